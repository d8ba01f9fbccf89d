"""MkDocs hook: a memory snapshot of Pyodide with ``calc`` imported, for the worker.

Starting Python inside Pyodide and importing the calculator is most of the worker's
start (about 1.5 s of CPU on a slow machine). At build time ``hooks/make_snapshot.mjs``
(Node, which ``npm ci`` already needs) does it once and saves Pyodide's memory, gzipped;
the worker restores it instead (Pyodide's ``_makeSnapshot`` / ``_loadSnapshot``) and
falls back to the ordinary start when it cannot.

The file name hashes the calc bundle's name, the Pyodide version, the trimmed standard
library's name (hooks/pyodide_stdlib.py: Python starts from it) and the script, so a
snapshot is only ever used with the runtime and the ``calc`` it was made from. Made
snapshots are kept in ``.cache/pyodide-snapshots/`` so repeated builds reuse them.
The site-relative path goes in ``config.extra["calc_snapshot"]``.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.plugins import event_priority

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "hooks" / "make_snapshot.mjs"
CACHE = ROOT / ".cache" / "pyodide-snapshots"
# Where the worker unpacks the bundle; the snapshot imports calc from the same place.
PACKAGE_DIR = "/home/pyodide/calc-bundle"
TIMEOUT_S = 300


def snapshot_name(bundle_path: str, pyodide_version: str, script: bytes, stdlib: str) -> str:
    key = f"{bundle_path}\0{pyodide_version}\0{PACKAGE_DIR}\0{stdlib}\0"
    digest = hashlib.sha256(key.encode() + script)
    return f"pyodide-{pyodide_version}-{digest.hexdigest()[:12]}.snapshot.gz"


@event_priority(-10)  # after calc_bundle, pyodide_assets and pyodide_stdlib have set their paths
def on_config(config: MkDocsConfig) -> MkDocsConfig:
    name = snapshot_name(
        config.extra["calc_bundle"],
        config.extra["pyodide"]["version"],
        SCRIPT.read_bytes(),
        config.extra["pyodide_stdlib"],
    )
    config.extra["calc_snapshot"] = f"assets/calc/{name}"
    return config


def make_snapshot(pyodide_dir: Path, bundle: Path, out: Path, stdlib: Path, lock: Path) -> None:
    node = shutil.which("node")
    if node is None:
        raise PluginError("node is needed to build the Pyodide snapshot (install Node.js)")
    tmp = out.with_suffix(".tmp")
    run = subprocess.run(
        [
            node,
            str(SCRIPT),
            str(pyodide_dir),
            str(bundle),
            PACKAGE_DIR,
            str(tmp),
            str(stdlib),
            str(lock),
        ],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    if run.returncode != 0 or not tmp.is_file():
        raise PluginError("Pyodide snapshot failed: " + run.stderr[-2000:])
    tmp.replace(out)


@event_priority(-10)  # after calc_bundle wrote the bundle and pyodide_assets the runtime
def on_post_build(config: MkDocsConfig) -> None:
    site = Path(config.site_dir)
    target = site / config.extra["calc_snapshot"]
    if target.is_file():  # mkdocs-static-i18n: one post_build per language, same site_dir
        return
    cached = CACHE / target.name
    if not cached.is_file():
        CACHE.mkdir(parents=True, exist_ok=True)
        pyodide_dir = site / config.extra["pyodide"]["path"]
        make_snapshot(
            pyodide_dir,
            site / config.extra["calc_bundle"],
            cached,
            site / config.extra["pyodide_stdlib"],
            site / config.extra["pyodide_lock"],
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(cached, target)
