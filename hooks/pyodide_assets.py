"""MkDocs hook: bundle the pinned Pyodide runtime into the built site.

The browser calculator runs ``calc`` in Pyodide, and the site must work
offline and make no request outside its own origin, so the runtime files are
copied from ``node_modules/pyodide`` (installed by ``npm ci`` from
``package-lock.json``) into ``<site_dir>/assets/pyodide/<version>/``. The
version in the path lets browsers cache the files forever and makes an
upgrade change every URL.

The site-relative directory is exposed to pages and macros as
``config.extra["pyodide"] = {"version": ..., "path": "assets/pyodide/<v>/"}``
(in templates: ``config.extra.pyodide.path``; in macros: the ``pyodide``
variable). Pages must make it relative to themselves (the site may be served
under a sub-path, e.g. GitHub Pages' ``/<repo>/``).

A missing or incomplete ``node_modules/pyodide`` fails the build.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.plugins import event_priority

#: Files the browser loads to start Pyodide with the standard library only.
#: (The package ships no wheels; ``pyodide-lock.json`` is read at start-up.)
RUNTIME_FILES = (
    "pyodide.mjs",
    "pyodide.asm.mjs",
    "pyodide.asm.wasm",
    "python_stdlib.zip",
    "pyodide-lock.json",
)
#: Copied when present, so the browser's developer tools find no 404s.
OPTIONAL_FILES = ("pyodide.mjs.map", "LICENSE")

SITE_SUBDIR = "assets/pyodide"


def pyodide_package_dir(config: MkDocsConfig) -> Path:
    """``node_modules/pyodide`` next to ``mkdocs.yml``."""
    return Path(config.config_file_path).resolve().parent / "node_modules" / "pyodide"


def pyodide_version(package_dir: Path) -> str:
    """The installed Pyodide version, from its ``package.json``."""
    manifest = package_dir / "package.json"
    if not manifest.is_file():
        raise PluginError(
            f"Pyodide is not installed ({manifest} is missing). "
            "Run `bash scripts/setup.sh` (it runs `npm ci`)."
        )
    return json.loads(manifest.read_text(encoding="utf-8"))["version"]


def site_path(version: str) -> str:
    """Site-relative directory of the runtime, with a trailing slash."""
    return f"{SITE_SUBDIR}/{version}/"


# Before the plugins (macros reads ``extra.pyodide`` in its own on_config).
@event_priority(100)
def on_config(config: MkDocsConfig) -> MkDocsConfig:
    package_dir = pyodide_package_dir(config)
    version = pyodide_version(package_dir)
    missing = [name for name in RUNTIME_FILES if not (package_dir / name).is_file()]
    if missing:
        raise PluginError(
            f"node_modules/pyodide {version} lacks {', '.join(missing)}; "
            "reinstall it with `npm ci`."
        )
    config.extra["pyodide"] = {"version": version, "path": site_path(version)}
    return config


def _same_file(src: Path, dst: Path) -> bool:
    if not dst.is_file():
        return False
    a, b = src.stat(), dst.stat()
    return a.st_size == b.st_size and a.st_mtime_ns == b.st_mtime_ns


def on_post_build(config: MkDocsConfig) -> None:
    # mkdocs-static-i18n runs one build per language into the same site_dir,
    # so this runs more than once: unchanged files are not copied again.
    package_dir = pyodide_package_dir(config)
    info = config.extra["pyodide"]
    target = Path(config.site_dir) / info["path"]
    target.mkdir(parents=True, exist_ok=True)
    for name in RUNTIME_FILES + OPTIONAL_FILES:
        src = package_dir / name
        if src.is_file() and not _same_file(src, target / name):
            shutil.copy2(src, target / name)
