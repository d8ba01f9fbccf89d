"""The built guides: every generated number equals what calc computes in CPython,
pages have titles and descriptions, links and anchors resolve, no serious
accessibility violation, and screenshots at desktop and phone widths."""

from __future__ import annotations

import json
import posixpath
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

import calc
from calc import gpus
from conftest import REPO_ROOT, parse_page, site_pages
from calc_view.numfmt import KINDS, parse_number, shown_value

SCREENSHOTS = REPO_ROOT / "artifacts" / "screenshots"
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


# --- what calc says -----------------------------------------------------------


def response_for(source: dict) -> tuple[dict, dict]:
    """``(response, request)`` for a cell's ``data-source``, recomputed here."""
    command = source["command"]
    request = source.get("request", {})
    if command == "estimate":
        return calc.estimate(request), request
    if command == "plan":
        return calc.plan_setup(request), request
    if command == "gpu":
        listing = {g["id"]: g for g in gpus.gpus_listing()["gpus"]}
        return listing[source["id"]], request
    if command == "request":
        return {}, request
    if command == "preset":
        from calc import presets

        return next(p for p in presets.presets_listing() if p["id"] == source["id"]), request
    if command == "plan_default":
        from calc.plan import PLAN_FIELDS

        return {"value": PLAN_FIELDS[source["key"]][0] * source["scale"]}, request
    if command in ("validation_memory", "validation_memory_summary"):
        from accuracy import memory as v

        results = v.compare_rows()
        if command == "validation_memory":
            row = next(r for r in results if r.row_id == source["row"])
            return vars(row), request
        method = source["method"]
        keep = ((lambda r: r.metric != "model_states" and (method is None or r.method == method))
                if command == "validation_memory_summary" and source.get("measured") else
                (lambda r: method is None or r.method == method))
        s = v.summary(results, keep)
        return vars(s), request
    if command == "framework_profile":
        from calc.frameworks import PROFILES, Framework

        return {"value": PROFILES[Framework(source["framework"])][source["key"]]}, request
    if command in ("validation_memory_loso", "validation_memory_bands", "validation_memory_coverage"):
        from macros import validation_loso as vl

        if command == "validation_memory_loso":
            return vl.report()[source["group"]], request
        if command == "validation_memory_bands":
            key = source["key"]
            method = key.split("/")[0]
            return {**vl.bands()[key], "coverage": vl.coverage()[method]["share"]}, request
        return vl.coverage()[source["group"]], request
    if command == "constant":
        import importlib

        value = getattr(importlib.import_module(source["module"]), source["name"])
        if "key" in source:
            key = source["key"]
            value = value[tuple(key) if isinstance(key, list) else key]
        return {"value": value}, request
    if command in ("oracle_sweep_summary", "oracle_sweep_miss"):
        from macros.oracle_sweep import load_summary

        summary = load_summary()
        if command == "oracle_sweep_summary":
            return (summary["groups"][source["group"]] if "group" in source else summary), request
        return next(m for m in summary["beyond_2pct"] if m["id"] == source["id"]), request
    if command.startswith("validation_throughput") or command == "validation_qlora_ratio":
        from accuracy import throughput as vt

        result = vt.compare()
        if command == "validation_throughput":
            return next(r for r in result["rows"] if r["row_id"] == source["row"]), request
        if command == "validation_throughput_summary":
            return result["summary"][source["group"]], request
        if command == "validation_throughput_fit":
            return result["constant_basis"][source["constant"]], request
        return next(c for c in result["qlora_ratio_check"] if c["rows"] == source["rows"]), request
    raise AssertionError(f"unknown source command {command!r}")


def expected_raw(field: str, response: dict, request: dict) -> float:
    """The number a ``data-field`` names (independent of the macros' own resolver):
    ``a.b`` paths, ``x+y/z`` sums over a divisor, ``pct:`` for percent, ``request.*``."""
    pct = field.startswith("pct:")  # stored as a fraction, shown in percent
    num, _, den = field.removeprefix("pct:").partition("/")

    def get(path: str) -> float:
        if path.startswith("request."):
            return request[path.split(".", 1)[1]]
        node = response
        for part in path.split("."):
            if isinstance(node, list):
                node = node[int(part)]
            elif path.startswith("components.") and part not in node:
                return 0  # calc reports no such component: the table shows 0
            else:
                node = node[part]
        return node

    value = sum(get(p) for p in num.split("+"))
    if den:
        value /= get(den)
    return value * 100 if pct else value


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
    """Screenshots for a human to look at (artifacts/screenshots/), and the check a
    screenshot cannot make: nothing widens the page; wide tables scroll in their box."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size(viewport)
    for prefix, lang in (("", "es"), ("en/", "en")):
        for guide in SCREENSHOT_PAGES:
            page.goto(site_server.url(prefix + guide))
            overflow = page.evaluate(
                "document.documentElement.scrollWidth - document.documentElement.clientWidth")
            assert overflow <= 0, f"{prefix}{guide} at {viewport['width']}px: page {overflow}px wide"
            name = f"{guide.strip('/').replace('/', '-')}-{lang}-{viewport['width']}.png"
            page.screenshot(path=str(SCREENSHOTS / name), full_page=True)
