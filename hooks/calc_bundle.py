"""MkDocs hook: ship the pure-Python ``calc`` package to the browser.

At build time the package (its ``.py`` files and ``calc/data/``) and the
calculator's view package ``calc_view/`` (the results renderer, the site's number format
and the worker's entry, ``calc_view.session``) are packed into
one zip named after ``calc.__version__`` and a hash of the content, written
under ``assets/calc/`` in the site. The worker unpacks it into Pyodide's file
system. PyYAML's pure-Python package (``yaml/``, MIT, with its LICENSE; the C
accelerator ``cyaml`` left out) goes in too, so a pasted YAML training config is parsed
by the same parser as on the command line (``calc.config_import.loading``). A new content gets a new name, so a browser cache never serves a stale
``calc``. The path (relative to the site root) is put in
``config.extra.calc_bundle`` for the calculator macro (hooks/pyodide_stdlib.py then puts
there the same bundle with its first-start modules compiled, and this one is not written).
"""

from __future__ import annotations

import ast
import hashlib
import io
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "calc"
# The view package (pure Python) goes in next to calc, as a package of its own.
VIEW_PACKAGE = ROOT / "calc_view"
# PyYAML as pinned in requirements.txt (pulled in by mkdocs); its pure-Python modules only
YAML_VERSION = "6.0.4"
_YAML_SKIP = {"cyaml.py"}  # needs the compiled _yaml extension; yaml/__init__ falls back without it
# Fixed timestamp: the same sources give the same bytes (and the same hash).
_EPOCH = (2020, 1, 1, 0, 0, 0)
_SKIP_DIRS = {"__pycache__"}
_SKIP_SUFFIXES = {".pyc", ".pyo"}
# The command line, the message catalogue and its reader, and the JSON Schema generator: no
# use in the page (it embeds the words it needs), ~100 kB less to download and unpack (the
# wheel ships them; see packaging/calc).
_NOT_FOR_THE_BROWSER = ("calc/cli/", "calc/data/messages/", "calc/catalogue.py", "calc/schema.py")


def calc_version(package: Path = PACKAGE) -> str:
    """``__version__`` read from the source, without importing the package."""
    tree = ast.parse((package / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__version__" for t in node.targets
        ):
            return ast.literal_eval(node.value)
    raise ValueError("calc/__init__.py defines no __version__")


def bundle_members(package: Path = PACKAGE, view: Path = VIEW_PACKAGE) -> list[tuple[str, bytes]]:
    """(archive name, bytes), sorted: every file of the package, then of the view package."""
    members = []
    for root in (package, view):
        for path in sorted(root.rglob("*")):
            rel = path.relative_to(root.parent)
            if path.is_dir() or _SKIP_DIRS & set(rel.parts) or path.suffix in _SKIP_SUFFIXES:
                continue
            if rel.as_posix().startswith(_NOT_FOR_THE_BROWSER):
                continue
            members.append((rel.as_posix(), path.read_bytes()))
    members.extend(yaml_members())
    return members


def yaml_members() -> list[tuple[str, bytes]]:
    """PyYAML's pure-Python files and its licence, from the installed, pinned copy."""
    import importlib.metadata
    import importlib.util

    version = importlib.metadata.version("pyyaml")
    if version != YAML_VERSION:
        raise RuntimeError(
            f"PyYAML {version} installed, {YAML_VERSION} pinned: run scripts/setup.sh"
        )
    spec = importlib.util.find_spec("yaml")
    package = Path(spec.origin).parent
    out = [
        (f"yaml/{path.name}", path.read_bytes())
        for path in sorted(package.glob("*.py"))
        if path.name not in _YAML_SKIP
    ]
    dist = importlib.metadata.distribution("pyyaml")
    licence = next((f for f in dist.files or () if f.name == "LICENSE"), None)
    if licence is None:
        raise RuntimeError("PyYAML's LICENSE is missing from its installed metadata")
    out.append(("yaml/LICENSE", Path(dist.locate_file(licence)).read_bytes()))
    return out


def build_bundle(members: list[tuple[str, bytes]]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members:
            info = zipfile.ZipInfo(name, _EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, data)
    return buffer.getvalue()


def bundle_name(members: list[tuple[str, bytes]], version: str) -> str:
    digest = hashlib.sha256()
    for name, data in members:
        digest.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    return f"calc-{version}-{digest.hexdigest()[:12]}.zip"


_BUILT: dict[str, bytes] = {}


def on_config(config):
    members = bundle_members()
    name = bundle_name(members, calc_version())
    if name not in _BUILT:
        _BUILT.clear()
        _BUILT[name] = build_bundle(members)
    config.extra["calc_bundle"] = f"assets/calc/{name}"
    return config


def on_post_build(config):
    # mkdocs-static-i18n builds every language into the same site_dir; the bundle is shared.
    for name, data in _BUILT.items():
        if config.extra["calc_bundle"] != f"assets/calc/{name}":
            continue  # replaced by its precompiled form (hooks/pyodide_stdlib.py writes that)
        target = Path(config.site_dir) / "assets" / "calc" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists() or target.read_bytes() != data:
            target.write_bytes(data)
