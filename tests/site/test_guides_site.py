"""The built guides: every generated number equals what calc computes in CPython,
pages have titles and descriptions, links and anchors resolve, no serious
accessibility violation, nothing wider than the screen at desktop and phone widths (with
screenshots of them for a human to look at when SCREENSHOTS=1)."""

from __future__ import annotations

import json
import os
import posixpath
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

import calc
from calc import gpus
from conftest import REPO_ROOT, parse_page, site_pages
from calc.numfmt import KINDS, format_kind, parse_number
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
OPEN_DETAILS_JS = (
    "document.querySelectorAll('details:not([open])').forEach(d => { d.open = true; });"
)

COLLECT_JS = (
    """() => { """
    + OPEN_DETAILS_JS
    + """ return Array.from(document.querySelectorAll('[data-value]')).map(el => ({
    text: el.innerText.trim(),
    value: el.dataset.value, kind: el.dataset.kind, field: el.dataset.field,
    source: el.dataset.source || (el.closest('[data-source]') || {dataset: {}}).dataset.source,
    table: (el.closest('table') || {dataset: {}}).dataset.table || 'inline',
})); }"""
)


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
            rounded = parse_number(format_kind(raw, cell["kind"], lang), lang)  # as calc shows it
            assert shown == rounded, f"{where}: {cell['text']!r} vs {raw}"
            assert float(cell["value"]) == pytest.approx(raw, rel=1e-12), where
            checked[url] = checked.get(url, 0) + 1
    for guide in GUIDES:
        for prefix in ("", "en/"):
            assert checked.get(prefix + guide, 0) >= 20, f"{prefix + guide}: too few numbers"
    assert checked.get("gpus/", 0) >= 50 and checked.get("en/gpus/", 0) >= 50
    for prefix in ("", "en/"):  # the methodology's pages together
        on_methodology = sum(
            n for url, n in checked.items() if url.startswith(prefix + "methodology/")
        )
        assert on_methodology >= 300, prefix


COLLECT_REFS_JS = (
    """() => { """
    + OPEN_DETAILS_JS
    + """ return Array.from(document.querySelectorAll('[data-ref]')).map(el => ({
    text: el.innerText.trim(), ref: el.dataset.ref, field: el.dataset.field,
    kind: el.dataset.refKind, gpu: el.dataset.gpu || null,
    fits: el.dataset.fitsSource || null, noFit: el.dataset.noFitSource || null,
    source: (el.closest('[data-source]') || {dataset: {}}).dataset.source,
    table: (el.closest('table') || {dataset: {}}).dataset.table,
})); }"""
)


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
            elif kind == "model-borderline":  # named as borderline: calc says so
                assert plan_of(cell["fits"])["fits"][cell["gpu"]]["verdict"] == "borderline", where
                assert cell["text"] == model_names[cell["ref"]], where
                continue
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


class _VerdictParser(HTMLParser):
    """Elements that state a verdict or name the largest model that fits (``data-ref`` of kind
    ``model`` / ``model-borderline``, ``data-verdict`` with a source), in document order, with
    the table they sit in (``None`` in running text) and the card-class list item they sit in."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[dict] = []
        self.table: list[str | None] = []
        self.items: list[str] = []
        self.text_of_item = ""

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table":
            self.table.append(a.get("data-table"))
        if tag == "li":
            self.items.append("")
        kind = a.get("data-ref-kind")
        if kind in ("model", "model-borderline") or ("data-verdict" in a and "data-source" in a):
            self.found.append(
                {
                    **a,
                    "table": self.table[-1] if self.table else None,
                    "item": len(self.items) if self.items else None,
                }
            )

    def handle_endtag(self, tag):
        if tag == "table" and self.table:
            self.table.pop()


def _verdict_elements(built_site: Path, rel: str) -> list[dict]:
    parser = _VerdictParser()
    parser.feed((built_site / rel).read_text(encoding="utf-8"))
    return parser.found


@pytest.mark.parametrize("prefix", ["", "en/"])
def test_guides_prose_states_calcs_verdicts_and_agrees_with_the_tables(built_site, prefix):
    """The VRAM guide's verdicts in running text (card classes, inline verdict words) are
    calc's: each inline verdict equals the plan's verdict for its card; each class names, per
    method, a model whose verdict is fits on the class's smallest card, the next larger is not
    fits, a model named borderline is borderline; and the class sentences never claim more than
    the per-card table below them (a card with at least the class's memory fits at least as
    large a model)."""
    from calc import presets

    sizes = {p["id"]: p["params_total"] for p in presets.presets_listing()}
    memory = {g.id: g.memory_bytes for g in gpus.all_gpus()}
    plans: dict[str, dict] = {}

    def plan_of(source: str) -> dict:
        if source not in plans:
            plans[source] = calc.plan_setup(json.loads(source)["request"])
        return plans[source]

    found = _verdict_elements(built_site, prefix + "guides/vram/index.html")
    prose = [f for f in found if f["table"] is None]
    table = [f for f in found if f["table"] == "gpu_typical" and f.get("data-ref-kind") == "model"]
    inline = [f for f in prose if "data-verdict" in f]
    assert len(inline) >= 5 and table
    for f in inline:
        request = json.loads(f["data-source"])["request"]
        assert plan_of(f["data-source"])["fits"][request["gpu"]]["verdict"] == f["data-verdict"]
    classes = [f for f in prose if f.get("data-ref-kind") == "model"]
    assert len(classes) >= 12  # four classes x three methods

    def method_of(f: dict) -> tuple:
        source = f.get("data-fits-source") or f.get("data-no-fit-source")
        request = json.loads(source)["request"]
        return request["method"], request.get("precision")

    for f in classes:
        gpu = f["data-gpu"]
        if f.get("data-fits-source"):
            assert plan_of(f["data-fits-source"])["fits"][gpu]["verdict"] == "fits"
        if f.get("data-no-fit-source"):
            assert plan_of(f["data-no-fit-source"])["fits"][gpu]["verdict"] != "fits"
        for t in table:
            if method_of(t) == method_of(f) and memory[t["data-gpu"]] >= memory[gpu]:
                assert sizes.get(t["data-ref"], 0) >= sizes.get(f["data-ref"], 0), (
                    gpu,
                    t["data-gpu"],
                )
    for f in (f for f in prose if f.get("data-ref-kind") == "model-borderline"):
        assert plan_of(f["data-fits-source"])["fits"][f["data-gpu"]]["verdict"] == "borderline"


@pytest.mark.parametrize(
    "rel",
    [
        "guides/vram/index.html",
        "guides/cloud/index.html",
        "en/guides/vram/index.html",
        "en/guides/cloud/index.html",
    ],
)
def test_guides_add_no_margin_on_top_of_the_range(built_site, rel):
    """The guides do not tell readers to add 20-30 % to a figure that carries its range."""
    import re

    text = re.sub(r"<[^>]+>", " ", (built_site / rel).read_text(encoding="utf-8"))
    assert not re.search(r"20\s*[-–]\s*30\s*%", text), rel


@pytest.mark.parametrize("prefix", ["", "en/"])
def test_methodology_documents_every_constant_and_column(built_site, prefix):
    """Every numeric module-level constant of calc, every numeric plan default and every data
    column appears on the methodology's pages in both languages (an undocumented one fails)."""
    import re

    from calc.fields import BY_KEY, PLAN, keys
    from macros.methodology import data_file_columns, is_numeric_constant, numeric_constants

    text = "".join(
        p.read_text(encoding="utf-8")
        for p in sorted((built_site / prefix / "methodology").rglob("index.html"))
    )
    shown = set(re.findall(r'data-constant="([^"]+)"', text))
    assert shown == set(numeric_constants())
    assert len(shown) >= 30
    defaults = set(re.findall(r'data-plan-default="([^"]+)"', text))
    assert defaults == {k for k in keys(PLAN) if is_numeric_constant(BY_KEY[k].default)}
    columns = set(re.findall(r'data-column="([^"]+)"', text))
    assert columns == {
        f"{name}:{c}"
        for name in ("gpus.csv", "prices.csv", "instances.csv", "models.json")
        for c in data_file_columns(name)
    }
    for table in (
        "validation_time_rows",
        "validation_time_summary",
        "validation_time_uncovered",
        "validation_qlora_ratio",
        "validation_time_fit",
        "validation_memory_rows",
    ):
        assert f'data-table="{table}"' in text, table


#: The anchors the methodology had when it was one page (/methodology/#memory ...): links
#: shared before it was split must still land on the part they meant.
OLD_METHODOLOGY_ANCHORS = (
    "methodology",
    "what-it-computes",
    "memory",
    "time-and-cost",
    "time",
    "cost",
    "recommendation",
    "models",
    "not-modelled",
    "config-import",
    "formulas-and-constants",
    "limits",
    "data-files",
    "data-sources",
    "validation",
    "validation-memory",
    "validation-memory-loso",
    "validation-memory-first-contact",
    "validation-memory-ranges",
    "training-libraries",
    "validation-oracle",
    "validation-time",
)


@pytest.mark.parametrize("prefix", ["", "en/"])
def test_old_methodology_anchors_lead_to_their_part(built_site, prefix):
    """/methodology/ is the overview; each anchor of the former single page is still an id
    there: either its own section, or a link to the sub-page that now holds the section
    under the same anchor."""
    import re

    overview = built_site / prefix / "methodology" / "index.html"
    html = overview.read_text(encoding="utf-8")
    ids = parse_page(overview).ids
    moved = 0
    for anchor in OLD_METHODOLOGY_ANCHORS:
        assert anchor in ids, anchor
        link = re.search(rf'<a href="([^"#]+)#{anchor}" id="{anchor}"', html)
        if link is None:  # a section of the overview itself
            assert re.search(rf'<h[1-6] id="{anchor}"', html), anchor
            continue
        target = built_site / prefix / "methodology" / link.group(1) / "index.html"
        assert anchor in parse_page(target).ids, (anchor, link.group(1))
        moved += 1
    assert moved >= 15
    # the overview is short: the parts are pages of their own
    assert len(re.sub(r"<[^>]+>", "", html.split("<article", 1)[1])) < 12_000


def html_files(site: Path) -> list[str]:
    return [r for r in site_pages(site) if not r.endswith("404.html")]


def test_every_page_has_title_and_description(built_site):
    for rel in html_files(built_site):
        page = parse_page(built_site / rel)
        assert page.title.strip(), rel
        description = page.meta.get("description", "")
        assert len(description) >= 50, f"{rel}: meta description missing or generic"
    # the guides' own descriptions, not the site-wide default
    assert parse_page(built_site / "guides/vram/index.html").meta.get("description") != parse_page(
        built_site / "guides/cloud/index.html"
    ).meta.get("description")


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
                ids = (
                    parsed[target].ids if target in parsed else parse_page(built_site / target).ids
                )
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
        bad = [
            f"{v['id']}: {v['help']} ({len(v['nodes'])} nodes)"
            for v in results.response["violations"]
            if v["impact"] in ("serious", "critical")
        ]
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
                "document.documentElement.scrollWidth - document.documentElement.clientWidth"
            )
            assert overflow <= 0, (
                f"{prefix}{guide} at {viewport['width']}px: page {overflow}px wide"
            )
            if TAKE_SCREENSHOTS:
                SCREENSHOTS.mkdir(parents=True, exist_ok=True)
                name = f"{guide.strip('/').replace('/', '-')}-{lang}-{viewport['width']}.png"
                page.screenshot(path=str(SCREENSHOTS / name), full_page=True)
