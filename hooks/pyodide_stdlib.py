"""MkDocs hook: the standard library the calculator needs, not all of it.

Pyodide's ``python_stdlib.zip`` is 2.5 MB (already deflated: a server's gzip gains nothing)
and the calculator imports a small part of it. At build time ``hooks/stdlib_imports.mjs``
(Node) starts Pyodide, imports every module of the calc bundle and every stdlib module an
import statement of the bundle names (those inside functions too), and lists the stdlib
files then loaded, Pyodide's own start-up included. This hook writes a zip of those files
only, named after its content (``python_stdlib-<hash>.zip``, next to the runtime), and an
empty package lock (``pyodide-lock-calc.json``: the calculator loads no packages, and
Pyodide reads the lock at start-up). The worker passes both to ``loadPyodide``
(``stdLibURL``, ``lockFileURL``); the full files stay in the site for other uses.

Compiling Python from source is most of a first visit's start in the browser (Pyodide's own
start imports some 140 stdlib modules). ``hooks/pyodide_precompile.mjs`` (Node) then
replaces, in this zip and in the calc bundle, the modules a first start imports by bytecode
compiled by Pyodide's own Python (about 0.25 MB more to download, seconds less of CPU on a
slow machine); the rest stays as source. The bundle with bytecode gets a name of its own
(``calc-<version>-<hash>.zip``, in ``config.extra["calc_bundle"]``; calc_bundle.py then
writes no other).

The file list is kept in ``.cache/pyodide-stdlib/`` under a key of the calc bundle's name,
the Pyodide version and the script, so repeated builds do not run Node again. Site-relative
paths go in ``config.extra["pyodide_stdlib"]`` and ``config.extra["pyodide_lock"]``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.plugins import event_priority

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "hooks" / "stdlib_imports.mjs"
PRECOMPILE = ROOT / "hooks" / "pyodide_precompile.mjs"
SAMPLES = ROOT / "hooks" / "sample_requests.mjs"  # imported by both scripts: in both keys
CACHE = ROOT / ".cache" / "pyodide-stdlib"
# Where the worker unpacks the bundle (= hooks/pyodide_snapshot.py PACKAGE_DIR)
PACKAGE_DIR = "/home/pyodide/calc-bundle"
LOCK_NAME = "pyodide-lock-calc.json"
TIMEOUT_S = 300

_BUILT: dict[str, bytes] = {}  # site-relative path -> bytes, for on_post_build


def list_key(bundle_name: str, pyodide_version: str, script: bytes) -> str:
    digest = hashlib.sha256(f"{bundle_name}\0{pyodide_version}\0{PACKAGE_DIR}\0".encode() + script)
    return digest.hexdigest()[:16]


def needed_files(pyodide_dir: Path, bundle: bytes) -> list[str]:
    """The stdlib zip's entries the calculator can import (runs Node once)."""
    node = shutil.which("node")
    if node is None:
        raise PluginError("node is needed to list the standard library's modules (install Node.js)")
    with tempfile.TemporaryDirectory() as tmp:
        bundle_path, out = Path(tmp) / "bundle.zip", Path(tmp) / "files.json"
        bundle_path.write_bytes(bundle)
        run = subprocess.run(
            [node, str(SCRIPT), f"{pyodide_dir}/", str(bundle_path), PACKAGE_DIR, str(out)],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            cwd=tmp,
        )
        if run.returncode != 0 or not out.is_file():
            raise PluginError(
                "listing the standard library's modules failed: " + run.stderr[-2000:]
            )
        return json.loads(out.read_text(encoding="utf-8"))["files"]


def precompiled(
    pyodide_dir: Path, stdlib: bytes, lock: bytes, bundle: bytes
) -> tuple[bytes, bytes]:
    """The stdlib zip and the calc bundle with the modules a first start imports as
    bytecode (runs Node once; the script fails when calc answers differently from them)."""
    node = shutil.which("node")
    if node is None:
        raise PluginError("node is needed to compile the calculator's Python (install Node.js)")
    with tempfile.TemporaryDirectory() as tmp:
        paths = [Path(tmp) / name for name in ("s.zip", "lock.json", "b.zip", "so.zip", "bo.zip")]
        for path, data in zip(paths, (stdlib, lock, bundle), strict=False):
            path.write_bytes(data)
        run = subprocess.run(
            [node, str(PRECOMPILE), f"{pyodide_dir}/", *map(str, paths[:3]), PACKAGE_DIR,
             *map(str, paths[3:])],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            cwd=tmp,
        )  # fmt: skip
        if run.returncode != 0 or not all(p.is_file() for p in paths[3:]):
            raise PluginError("compiling the calculator's Python failed: " + run.stderr[-2000:])
        return paths[3].read_bytes(), paths[4].read_bytes()


def compiled_bundle_name(data: bytes, version: str) -> str:
    return f"calc-{version}-{hashlib.sha256(data).hexdigest()[:12]}.zip"


def trimmed_zip(full: bytes, keep: set[str]) -> bytes:
    """The members of ``full`` named in ``keep``, in the original order and dates (the same
    input gives the same bytes)."""
    missing = keep - set(zipfile.ZipFile(io.BytesIO(full)).namelist())
    if missing:
        raise PluginError(f"stdlib files listed but not in python_stdlib.zip: {sorted(missing)}")
    out = io.BytesIO()
    with (
        zipfile.ZipFile(io.BytesIO(full)) as source,
        zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target,
    ):
        for info in source.infolist():
            if info.filename in keep:
                copy = zipfile.ZipInfo(info.filename, info.date_time)
                copy.compress_type = zipfile.ZIP_DEFLATED
                copy.external_attr = info.external_attr
                target.writestr(copy, source.read(info))
    return out.getvalue()


def empty_lock(full_lock: bytes) -> bytes:
    """Pyodide's lock with its ``info`` (checked against the runtime) and no packages."""
    info = json.loads(full_lock)["info"]
    return json.dumps({"info": info, "packages": {}}, sort_keys=True).encode()


def calc_bundle_bytes(name: str) -> bytes:
    """The calc bundle as hooks/calc_bundle.py builds it (hooks are loaded from their files,
    not as a package: loaded the same way here)."""
    spec = importlib.util.spec_from_file_location("_calc_bundle", ROOT / "hooks" / "calc_bundle.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    members = module.bundle_members()
    if module.bundle_name(members, module.calc_version()) != name:
        raise PluginError(f"the calc bundle changed during the build (expected {name})")
    return module.build_bundle(members)


# after calc_bundle (default priority) and pyodide_assets; before pyodide_snapshot (-10)
@event_priority(-5)
def on_config(config: MkDocsConfig) -> MkDocsConfig:
    package_dir = Path(config.config_file_path).resolve().parent / "node_modules" / "pyodide"
    version = config.extra["pyodide"]["version"]
    bundle_name = Path(config.extra["calc_bundle"]).name
    key = list_key(bundle_name, version, SCRIPT.read_bytes() + SAMPLES.read_bytes())
    cached = CACHE / f"{key}.json"
    if cached.is_file():
        files = json.loads(cached.read_text(encoding="utf-8"))
    else:
        files = needed_files(package_dir, calc_bundle_bytes(bundle_name))
        CACHE.mkdir(parents=True, exist_ok=True)
        cached.write_text(json.dumps(files), encoding="utf-8")
    data = trimmed_zip((package_dir / "python_stdlib.zip").read_bytes(), set(files))
    lock = empty_lock((package_dir / "pyodide-lock.json").read_bytes())
    source_bundle = calc_bundle_bytes(bundle_name)
    scripts = PRECOMPILE.read_bytes() + SAMPLES.read_bytes()
    digest = hashlib.sha256(data + b"\0" + source_bundle + b"\0" + scripts)
    key = f"{version}-{digest.hexdigest()[:16]}"
    cached_stdlib, cached_bundle = CACHE / f"{key}-stdlib.zip", CACHE / f"{key}-bundle.zip"
    if not (cached_stdlib.is_file() and cached_bundle.is_file()):
        compiled = precompiled(package_dir, data, lock, source_bundle)
        CACHE.mkdir(parents=True, exist_ok=True)
        cached_stdlib.write_bytes(compiled[0])
        cached_bundle.write_bytes(compiled[1])
    data, bundle = cached_stdlib.read_bytes(), cached_bundle.read_bytes()
    name = f"python_stdlib-{hashlib.sha256(data).hexdigest()[:12]}.zip"
    base = config.extra["pyodide"]["path"]
    calc_version = bundle_name.removeprefix("calc-").rsplit("-", 1)[0]
    bundle_path = f"assets/calc/{compiled_bundle_name(bundle, calc_version)}"
    _BUILT.clear()
    _BUILT[base + name] = data
    _BUILT[base + LOCK_NAME] = lock
    _BUILT[bundle_path] = bundle
    config.extra["pyodide_stdlib"] = base + name
    config.extra["pyodide_lock"] = base + LOCK_NAME
    config.extra["calc_bundle"] = bundle_path
    return config


@event_priority(-5)  # before pyodide_snapshot (-10), which starts Pyodide with these files
def on_post_build(config: MkDocsConfig) -> None:
    for rel, data in _BUILT.items():
        target = Path(config.site_dir) / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.is_file() or target.read_bytes() != data:
            target.write_bytes(data)
