"""The built guides: every generated number equals what calc computes in CPython,
pages have titles and descriptions, links and anchors resolve, no serious
accessibility violation, nothing wider than the screen at desktop and phone widths (with
screenshots of them for a human to look at when SCREENSHOTS=1)."""

from __future__ import annotations

import json
import os
import posixpath
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

import calc
from calc import gpus
from conftest import REPO_ROOT, parse_page, site_pages
from calc_view.numfmt import KINDS, parse_number, shown_value
from page_numbers import expected_raw, response_for

SCREENSHOTS = REPO_ROOT / "artifacts" / "screenshots"
#: Full-page screenshots are for a human, not a check, and take a long while of a test
#: run: taken only on request (`SCREENSHOTS=1 bash scripts/test.sh -k screenshots`).
TAKE_SCREENSHOTS = os.environ.get("SCREENSHOTS") == "1"
GUIDES = ("guides/vram/", "guides/cloud/")
SCREENSHOT_PAGES = (*GUIDES, "methodology/")
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 900}


def guide_pages(site: Path) -> list[str]:
    """Site-relative URLs of the guides' pages (not the calculator's), both languages."""
    out = []
    for rel in site_pages(site):
        if rel.endswith("404.html") or "calculator/" in rel:
            continue
        out.append(rel[: -len("index.html")] if rel.endswith("index.html") else rel)
    return out


# Numbers inside a closed <details> (a chart's table) have no rendered text: open them first.
OPEN_DETAILS_JS = "document.querySelectorAll('details:not([open])').forEach(d => { d.open = true; });"

COLLECT_JS = """() => { """ + OPEN_DETAILS_JS + """ return Array.from(document.querySelectorAll('[data-value]')).map(el => ({
    text: el.innerText.trim(),
    value: el.dataset.value, kind: el.dataset.kind, field: el.dataset.field,
    source: el.dataset.source || (el.closest('[data-source]') || {dataset: {}}).dataset.source,
    table: (el.closest('table') || {dataset: {}}).dataset.table || 'inline',
})); }"""


@pytest.fixture(scope="module")
def pages(built_site):
    return guide_pages(built_site)


def test_generated_numbers_equal_calc(page, site_server, pages):
    """Playwright reads every generated number of every page, parses it in the page's
    language and compares it with calc's value for the same request, rounded the same."""
    checked = {}
    cache: dict[str, tuple[dict, dict]] = {}
    for url in pages:
        page.goto(site_server.url(url))
        lang = page.evaluate("document.documentElement.lang")
        assert lang in ("es", "en"), url
        for cell in page.evaluate(COLLECT_JS):
            where = f"{url} {cell['table']} {cell['field']}"
            assert cell["kind"] in KINDS, where
            assert cell["source"], f"{where}: no data-source"
            if cell["source"] not in cache:
                cache[cell["source"]] = response_for(json.loads(cell["source"]))
            response, request = cache[cell["source"]]
            raw = expected_raw(cell["field"], response, request)
            shown = parse_number(cell["text"], lang)
            assert shown == shown_value(raw, cell["kind"]), f"{where}: {cell['text']!r} vs {raw}"
            assert float(cell["value"]) == pytest.approx(raw, rel=1e-12), where
            checked[url] = checked.get(url, 0) + 1
    for guide in GUIDES:
        for prefix in ("", "en/"):
            assert checked.get(prefix + guide, 0) >= 20, f"{prefix + guide}: too few numbers"
    assert checked.get("gpus/", 0) >= 50 and checked.get("en/gpus/", 0) >= 50
    assert checked.get("methodology/", 0) >= 300 and checked.get("en/methodology/", 0) >= 300


COLLECT_REFS_JS = """() => { """ + OPEN_DETAILS_JS + """ return Array.from(document.querySelectorAll('[data-ref]')).map(el => ({
    text: el.innerText.trim(), ref: el.dataset.ref, field: el.dataset.field,
    kind: el.dataset.refKind, gpu: el.dataset.gpu || null,
    fits: el.dataset.fitsSource || null, noFit: el.dataset.noFitSource || null,
    source: (el.closest('[data-source]') || {dataset: {}}).dataset.source,
    table: (el.closest('table') || {dataset: {}}).dataset.table,
})); }"""


def _resolve_path(response: dict, path: str):
    node = response
    for part in path.split("."):
        if node is None:
            return None
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


def test_named_cards_and_models_equal_calc(page, site_server, pages):
    """Cells that name a card, a configuration or a model: the id equals what calc's plan
    returns at the stated path, the text shows that id's name, and for "largest model that
    fits" cells the model fits the card and the next larger one does not."""
    names = {g["id"]: g["name"] for g in gpus.gpus_listing()["gpus"]}
    from calc import presets

    model_names = {p["id"]: p["name"] for p in presets.presets_listing()}
    plans: dict[str, dict] = {}

    def plan_of(source: str) -> dict:
        if source not in plans:
            plans[source] = calc.plan_setup(json.loads(source)["request"])
        return plans[source]

    checked = {"gpu": 0, "config": 0, "model": 0}
    for url in pages:
        page.goto(site_server.url(url))
        for cell in page.evaluate(COLLECT_REFS_JS):
            where = f"{url} {cell['table']} {cell['text']!r}"
            kind = cell["kind"]
            if kind in ("gpu", "config"):
                got = _resolve_path(plan_of(cell["source"]), cell["field"])
                assert (got or "") == cell["ref"], where
                if got:
                    gpu_id = got if kind == "gpu" else got.rsplit("x", 1)[0]
                    assert names[gpu_id] in cell["text"], where
            elif kind == "model":
                gpu_id = cell["gpu"]
                if cell["ref"]:
                    assert json.loads(cell["fits"])["request"]["model"] == cell["ref"], where
                    assert plan_of(cell["fits"])["fits"][gpu_id]["fits"], where
                    assert cell["text"] == model_names[cell["ref"]], where
                else:
                    assert cell["fits"] is None, where
                if cell["noFit"]:
                    assert not plan_of(cell["noFit"])["fits"][gpu_id]["fits"], where
            else:
                raise AssertionError(f"{where}: unknown ref kind {kind!r}")
            checked[kind] += 1
    assert min(checked.values()) >= 10, checked


# --- static checks of the built HTML -----------------------------------------


@pytest.mark.parametrize("prefix", ["", "en/"])
def test_methodology_documents_every_constant_and_column(built_site, prefix):
    """Every numeric module-level constant of calc, every numeric plan default and every data
    column appears on the methodology page in both languages (an undocumented one fails)."""
    import re

    from calc.plan import PLAN_FIELDS
    from macros.methodology import data_file_columns, is_numeric_constant, numeric_constants

    text = (built_site / prefix / "methodology" / "index.html").read_text(encoding="utf-8")
    shown = set(re.findall(r'data-constant="([^"]+)"', text))
    assert shown == set(numeric_constants())
    assert len(shown) >= 30
    defaults = set(re.findall(r'data-plan-default="([^"]+)"', text))
    assert defaults == {k for k, v in PLAN_FIELDS.items() if is_numeric_constant(v[0])}
    columns = set(re.findall(r'data-column="([^"]+)"', text))
    assert columns == {f"{name}:{c}" for name in ("gpus.csv", "prices.csv", "models.json")
                       for c in data_file_columns(name)}
    for table in ("validation_time_rows", "validation_time_summary", "validation_time_uncovered",
                  "validation_qlora_ratio", "validation_time_fit", "validation_memory_rows"):
        assert f'data-table="{table}"' in text, table



def html_files(site: Path) -> list[str]:
    return [r for r in site_pages(site) if not r.endswith("404.html")]


def test_every_page_has_title_and_description(built_site):
    for rel in html_files(built_site):
        page = parse_page(built_site / rel)
        assert page.title.strip(), rel
        description = page.meta.get("description", "")
        assert len(description) >= 50, f"{rel}: meta description missing or generic"
    # the guides' own descriptions, not the site-wide default
    assert parse_page(built_site / "guides/vram/index.html").meta.get("description") != \
        parse_page(built_site / "guides/cloud/index.html").meta.get("description")


def test_internal_links_and_anchors_resolve(built_site):
    parsed = {rel: parse_page(built_site / rel) for rel in html_files(built_site)}
    checked = 0
    for rel, page in parsed.items():
        for href in page.links:
            parts = urlsplit(href)
            if parts.scheme or parts.netloc or href.startswith(("mailto:", "javascript:")):
                continue
            path = unquote(parts.path)
            if not path:
                target = rel
            elif path.startswith("/"):  # site-root links (language switcher without site_url)
                target = path.lstrip("/") or "."
            else:
                target = posixpath.normpath(posixpath.join(posixpath.dirname(rel), path))
            if target == "." or target.endswith("/") or (built_site / target).is_dir():
                target = posixpath.join(target, "index.html")
            assert (built_site / target).is_file(), f"{rel}: broken link {href}"
            if parts.fragment and target.endswith(".html"):
                ids = parsed[target].ids if target in parsed else parse_page(built_site / target).ids
                assert unquote(parts.fragment) in ids, f"{rel}: no anchor {href}"
            checked += 1
    assert checked > 50


# --- accessibility and layout --------------------------------------------------


def test_no_serious_accessibility_violations(page, site_server, pages):
    from axe_playwright_python.sync_playwright import Axe

    axe = Axe()
    found = {}
    for url in pages:
        page.goto(site_server.url(url))
        results = axe.run(page)
        bad = [f"{v['id']}: {v['help']} ({len(v['nodes'])} nodes)"
               for v in results.response["violations"] if v["impact"] in ("serious", "critical")]
        if bad:
            found[url] = bad
    assert not found, json.dumps(found, indent=2, ensure_ascii=False)


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_guides_screenshots_and_no_page_overflow(page, site_server, viewport):
    """The check a screenshot cannot make: nothing widens the page; wide tables scroll in
    their box. With SCREENSHOTS=1, screenshots for a human too (artifacts/screenshots/)."""
    page.set_viewport_size(viewport)
    for prefix, lang in (("", "es"), ("en/", "en")):
        for guide in SCREENSHOT_PAGES:
            page.goto(site_server.url(prefix + guide))
            overflow = page.evaluate(
                "document.documentElement.scrollWidth - document.documentElement.clientWidth")
            assert overflow <= 0, f"{prefix}{guide} at {viewport['width']}px: page {overflow}px wide"
            if TAKE_SCREENSHOTS:
                SCREENSHOTS.mkdir(parents=True, exist_ok=True)
                name = f"{guide.strip('/').replace('/', '-')}-{lang}-{viewport['width']}.png"
                page.screenshot(path=str(SCREENSHOTS / name), full_page=True)
