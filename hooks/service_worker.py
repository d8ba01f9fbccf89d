"""MkDocs hook: the calculator's service worker, written at the site's root.

``hooks/service_worker.js`` is the worker; this hook fills in what it keeps and writes it
to ``<site_dir>/calc-sw.js`` (at the root: a service worker's scope is its own folder and
below, and on GitHub Pages a project site's root is ``/<repo>/``; the page registers it
with a path relative to itself). It keeps:

- immutable (answered from the cache): the Pyodide runtime the worker loads, the trimmed
  standard library and lock, the calc bundle (all with a version or a hash in their path),
  and Material's hashed stylesheets and scripts the calculator pages use;
- fresh (network first, the cache when offline): the calculator pages themselves (both
  languages), the calculator's scripts and stylesheets, and any other same-origin script or
  stylesheet those pages load.

The build name in the cache's name is a hash of every kept file's content and the worker's
own source: any change gives a new worker, which replaces the old build's cache. Its
site-relative path goes in ``config.extra["calc_service_worker"]``.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
from html.parser import HTMLParser
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.plugins import event_priority

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "hooks" / "service_worker.js"
SW_PATH = "calc-sw.js"
# The runtime files the worker loads from the Pyodide directory (the stdlib and lock come
# from config.extra: the trimmed ones).
PYODIDE_FILES = ("pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm")
CALCULATOR_ASSETS = "assets/calculator"
# Material's build names its assets after their content: main.57a0d79d.min.css
HASHED = re.compile(r"\.[0-9a-f]{8,}\.min\.(css|js)$")

# page URL (site-relative) -> site-relative paths of the scripts and stylesheets it loads;
# filled page by page (mkdocs-static-i18n builds each language in turn, this hook's state
# lasts across them)
_PAGES: dict[str, set[str]] = {}


class _Assets(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.refs: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "script" and a.get("src"):
            self.refs.append(a["src"])
        elif tag == "link" and a.get("href") and (a.get("rel") or "") in ("stylesheet", "icon"):
            self.refs.append(a["href"])


def page_assets(html: str, page_url: str) -> set[str]:
    """Site-relative paths of the same-origin scripts, stylesheets and icon of a page."""
    parser = _Assets()
    parser.feed(html)
    base = posixpath.dirname(page_url.rstrip("/") + "/x")  # the page's folder
    out = set()
    for ref in parser.refs:
        if "://" in ref or ref.startswith(("//", "data:")):
            continue  # not the site's own (the site loads none; the offline test checks)
        path = ref.split("#")[0].split("?")[0]
        out.add(posixpath.normpath(posixpath.join(base, path)))
    return out


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    config.extra["calc_service_worker"] = SW_PATH
    return config


def on_post_page(output: str, page, config: MkDocsConfig) -> str:
    if 'id="calc"' in output and 'class="calc"' in output:
        _PAGES[page.url] = page_assets(output, page.url)
    return output


def kept_files(site: Path, extra: dict) -> tuple[list[str], list[str]]:
    """(immutable, fresh) site-relative paths, sorted, of files that exist in ``site``."""
    pyodide = extra["pyodide"]["path"]
    immutable = {pyodide + name for name in PYODIDE_FILES}
    immutable |= {extra["pyodide_stdlib"], extra["pyodide_lock"], extra["calc_bundle"]}
    fresh = {url for url in _PAGES}  # "calculator/", "en/calculator/"
    fresh |= {
        f"{CALCULATOR_ASSETS}/{p.name}"
        for p in (site / CALCULATOR_ASSETS).glob("*")
        if p.suffix in (".js", ".css")
    }
    for assets in _PAGES.values():
        for path in assets:
            (immutable if HASHED.search(path) else fresh).add(path)

    def exists(path: str) -> bool:
        target = site / path
        return (target / "index.html").is_file() if path.endswith("/") else target.is_file()

    return sorted(p for p in immutable if exists(p)), sorted(
        p for p in fresh - immutable if exists(p)
    )


def build_id(site: Path, paths: list[str], template: bytes) -> str:
    digest = hashlib.sha256(template)
    for path in paths:
        target = site / path
        if path.endswith("/"):
            target = target / "index.html"
        digest.update(path.encode() + b"\0" + hashlib.sha256(target.read_bytes()).digest())
    return digest.hexdigest()[:12]


@event_priority(-20)  # after every hook that writes the files it lists
def on_post_build(config: MkDocsConfig) -> None:
    site = Path(config.site_dir)
    immutable, fresh = kept_files(site, config.extra)
    template = TEMPLATE.read_text(encoding="utf-8")
    for mark in ('"__BUILD__"', "[/* immutable */]", "[/* fresh */]"):
        if template.count(mark) != 1:
            raise PluginError(f"hooks/service_worker.js must hold {mark} once")
    source = (
        template.replace(
            '"__BUILD__"', json.dumps(build_id(site, immutable + fresh, template.encode()))
        )
        .replace("[/* immutable */]", json.dumps(immutable))
        .replace("[/* fresh */]", json.dumps(fresh))
    )
    (site / SW_PATH).write_text(source, encoding="utf-8")
