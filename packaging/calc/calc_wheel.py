"""A PEP 517 build backend (standard library only) for the wheel of ``calc`` alone.

Why not setuptools: the project pins no build tool, Python 3.11's ``venv`` ships a setuptools
that cannot build wheels without the ``wheel`` package, and the test suite must build offline.
A pure-Python wheel is a zip with a fixed layout (PEP 427, PEP 491; metadata per the core
metadata spec 2.1; ``entry_points.txt`` for the console script), so this module writes it
directly: every file under ``calc/`` except byte-code, a ``.dist-info`` with METADATA (its
``Requires-Dist`` and ``Provides-Extra`` from ``dependencies`` / ``optional-dependencies``), WHEEL,
entry_points.txt and RECORD (sha256 of each file). Timestamps are fixed
(``SOURCE_DATE_EPOCH`` if set), so the same sources give the same bytes.

Name, summary, Python requirement, extras and scripts come from ``pyproject.toml`` beside this file;
the version is ``calc.__version__``, read from the source without importing it.

    python packaging/calc/calc_wheel.py --out dist/     # -> dist/gpu_finetune_calc-<v>-py3-none-any.whl
"""

from __future__ import annotations

import ast
import base64
import hashlib
import io
import os
import re
import sys
import tarfile
import time
import tomllib
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
_SKIP_DIRS = {"__pycache__"}
_SKIP_SUFFIXES = {".pyc", ".pyo"}


def _config() -> dict:
    with open(HERE / "pyproject.toml", "rb") as handle:
        return tomllib.load(handle)


def _source_root() -> Path:
    """The directory holding the package: beside this file in an sdist, else the repository."""
    package = _config()["tool"]["calc-wheel"]["package"]
    for root in (HERE, HERE.parent.parent):
        if (root / package / "__init__.py").is_file():
            return root
    raise FileNotFoundError(f"no {package}/__init__.py beside {HERE} or two levels up")


def _version(root: Path, package: str) -> str:
    tree = ast.parse((root / package / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__version__" for t in node.targets
        ):
            return ast.literal_eval(node.value)
    raise ValueError("no __version__")


def _dist_name(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()  # PEP 427 file-name escaping


def _timestamp() -> tuple:
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "1577836800"))  # 2020-01-01
    return time.gmtime(max(epoch, 315532800))[:6]  # zip dates start in 1980


def package_files(root: Path, package: str) -> list[tuple[str, bytes]]:
    """(path in the wheel, bytes), sorted: the package's sources and data, no byte-code."""
    out = []
    for path in sorted((root / package).rglob("*")):
        rel = path.relative_to(root)
        if path.is_dir() or _SKIP_DIRS & set(rel.parts) or path.suffix in _SKIP_SUFFIXES:
            continue
        out.append((rel.as_posix(), path.read_bytes()))
    return out


def _metadata(project: dict, version: str, readme: str | None) -> str:
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {project['name']}",
        f"Version: {version}",
        f"Summary: {project['description']}",
        f"Requires-Python: {project['requires-python']}",
    ]
    lines += [f"Classifier: {c}" for c in project.get("classifiers", [])]
    lines += [f"Requires-Dist: {r}" for r in project.get("dependencies", [])]
    for extra, requirements in project.get("optional-dependencies", {}).items():
        # core metadata 2.1: the extra's name, then each requirement under its environment marker
        lines.append(f"Provides-Extra: {extra}")
        lines += [f'Requires-Dist: {r}; extra == "{extra}"' for r in requirements]
    if readme is not None:
        lines.append("Description-Content-Type: text/markdown")
        return "\n".join(lines) + "\n\n" + readme
    return "\n".join(lines) + "\n"


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def wheel_members(root: Path | None = None) -> tuple[str, list[tuple[str, bytes]]]:
    """(wheel file name, members in order, RECORD last)."""
    root = root or _source_root()
    config = _config()
    project, options = config["project"], config["tool"]["calc-wheel"]
    package = options["package"]
    version = _version(root, package)
    dist = _dist_name(project["name"])
    info = f"{dist}-{version}.dist-info"
    readme_path = (
        root / options["readme"] if (root / options["readme"]).is_file() else HERE / "README.md"
    )
    readme = readme_path.read_text(encoding="utf-8") if readme_path.is_file() else None
    members = package_files(root, package)
    members.append((f"{info}/METADATA", _metadata(project, version, readme).encode()))
    members.append(
        (
            f"{info}/WHEEL",
            (
                "Wheel-Version: 1.0\nGenerator: calc_wheel\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
            ).encode(),
        )
    )
    scripts = project.get("scripts", {})
    if scripts:
        text = "[console_scripts]\n" + "".join(f"{k} = {v}\n" for k, v in scripts.items())
        members.append((f"{info}/entry_points.txt", text.encode()))
    record = "\n".join(_record_line(n, d) for n, d in members) + f"\n{info}/RECORD,,\n"
    members.append((f"{info}/RECORD", record.encode()))
    return f"{dist}-{version}-py3-none-any.whl", members


def _write_zip(path: Path, members: list[tuple[str, bytes]]) -> None:
    stamp = _timestamp()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members:
            info = zipfile.ZipInfo(name, stamp)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, data)


# --- PEP 517 hooks --------------------------------------------------------------------------------


def get_requires_for_build_wheel(config_settings=None) -> list[str]:
    return []


def get_requires_for_build_sdist(config_settings=None) -> list[str]:
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None) -> str:
    name, members = wheel_members()
    Path(wheel_directory).mkdir(parents=True, exist_ok=True)
    _write_zip(Path(wheel_directory) / name, members)
    return name


def build_sdist(sdist_directory, config_settings=None) -> str:
    """pyproject.toml, this backend, the README and the package, at the top of one directory."""
    root = _source_root()
    config = _config()
    package = config["tool"]["calc-wheel"]["package"]
    base = f"{_dist_name(config['project']['name'])}-{_version(root, package)}"
    files = [
        (f"{base}/{p.name}", p.read_bytes())
        for p in (HERE / "pyproject.toml", HERE / "calc_wheel.py")
    ]
    files.append((f"{base}/packaging/calc/README.md", (HERE / "README.md").read_bytes()))
    files += [(f"{base}/{name}", data) for name, data in package_files(root, package)]
    files.append(
        (f"{base}/PKG-INFO", _metadata(config["project"], _version(root, package), None).encode())
    )
    name = base + ".tar.gz"
    Path(sdist_directory).mkdir(parents=True, exist_ok=True)
    mtime = time.mktime(_timestamp() + (0, 0, -1))
    with tarfile.open(Path(sdist_directory) / name, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for member, data in files:
            info = tarfile.TarInfo(member)
            info.size, info.mtime, info.mode = len(data), mtime, 0o644
            tar.addfile(info, io.BytesIO(data))
    return name


def main(argv: list[str]) -> int:
    out = Path(argv[argv.index("--out") + 1]) if "--out" in argv else Path("dist")
    print(out / build_wheel(out))
    if "--sdist" in argv:
        print(out / build_sdist(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
