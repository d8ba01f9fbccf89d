"""Search per language (hooks/search_i18n.py): the Spanish site's index holds Spanish pages
only and the English site's English pages only, each with its own lunr language; table
cells and footnotes (source notes) are not indexed as running text; in a browser, a query
typed in each site's search box finds pages of that language only."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from calculator_page import STATE_TIMEOUT_MS
from conftest import parse_page, site_pages
from hooks.search_i18n import exclude_from_search, language_base, split_index

INDEX = {"es": "search/search_index.json", "en": "en/search/search_index.json"}
ROOT = {"es": "", "en": "en/"}


def load_index(site: Path, lang: str) -> dict:
    return json.loads((site / INDEX[lang]).read_text(encoding="utf-8"))


def page_of(site: Path, lang: str, location: str) -> Path:
    """The built file a hit's location opens (resolved under the language's root)."""
    path = location.split("#")[0]
    return site / ROOT[lang] / path / "index.html" if not path.endswith(".html") else \
        site / ROOT[lang] / path


# --- units -------------------------------------------------------------------------------


@pytest.mark.parametrize(("base", "expected"), [
    ("..", "../en/"), ("../../..", "../../../en/"), ("/", "/en/"), (".", "en/"),
    ("/repo/", "/repo/en/"), ("https://x.github.io/repo/", "https://x.github.io/repo/en/"),
])
def test_language_base(base, expected):
    assert language_base(base, "en") == expected


def test_split_index_keeps_each_language_apart():
    merged = {"config": {"lang": ["es", "en"], "separator": "x"},
              "docs": [{"location": "", "title": "Inicio", "text": "a"},
                       {"location": "gpus/#prices", "title": "Precios", "text": "b"},
                       {"location": "en/", "title": "Home", "text": "c"},
                       {"location": "en/gpus/#prices", "title": "Prices", "text": "d"}]}
    out = split_index(merged, "es", ["en"])
    assert out["es"]["config"] == {"lang": ["es"], "separator": "x"}
    assert [d["title"] for d in out["es"]["docs"]] == ["Inicio", "Precios"]
    assert out["en"]["config"]["lang"] == ["en"]
    assert [d["location"] for d in out["en"]["docs"]] == ["", "gpus/#prices"]


def test_exclusion_marks_table_parts_and_footnotes_only():
    html = ('<p>x</p><table><caption>c</caption><thead><tr><th>a</th></tr></thead>'
            '<tbody class="b"><tr><td>1</td></tr></tbody></table>'
            '<div class="footnote"><ol><li>n</li></ol></div><div class="other">y</div>')
    out = exclude_from_search(html)
    assert out.count("data-search-exclude") == 3
    assert "<thead data-search-exclude>" in out and '<tbody data-search-exclude class="b">' in out
    assert '<div class="footnote" data-search-exclude>' in out
    assert '<div class="other">' in out and "<caption>c</caption>" in out
    calc = exclude_from_search('<p class="calc-status" role="status"></p>'
                               '<form class="calc-form" novalidate></form>'
                               '<h2 id="calc-results-heading">R</h2>')
    assert calc.count("data-search-exclude") == 3


# --- the built indexes -----------------------------------------------------------------------


@pytest.mark.parametrize("lang", ["es", "en"])
def test_each_site_indexes_its_own_language_only(built_site, lang):
    index = load_index(built_site, lang)
    assert index["config"]["lang"] == [lang]
    docs = index["docs"]
    assert len(docs) > 30
    pages = set()
    for doc in docs:
        assert not doc["location"].startswith("en/"), doc["location"]
        target = page_of(built_site, lang, doc["location"])
        assert target.is_file(), f"{lang}: {doc['location']} opens no page"
        assert parse_page(target).html_lang == lang, f"{lang} index has {target}"
        pages.add(target.relative_to(built_site / ROOT[lang]).as_posix())
    # every page of the language is findable
    built = {p for p in site_pages(built_site / ROOT[lang]) if not p.startswith("en/")
             and not p.startswith("assets/") and p != "404.html"}
    assert built == pages
    # the calculator is found by its introduction and the notes below the form, not by its
    # form or pre-rendered result
    calculator = [d["location"] for d in docs if d["location"].startswith("calculator/")]
    assert calculator == ["calculator/", "calculator/#about-these-figures"]
    assert not any("sdpa" in d["text"] for d in docs if d["location"].startswith("calculator/"))


def test_both_sites_index_the_same_sections(built_site):
    es = [d["location"] for d in load_index(built_site, "es")["docs"]]
    en = [d["location"] for d in load_index(built_site, "en")["docs"]]
    assert es == en  # the trees mirror each other, anchors included


def test_no_front_matter_read_as_text(built_site):
    for lang in ("es", "en"):
        for doc in load_index(built_site, lang)["docs"]:
            assert not re.search(r"\b(title|description): ", doc["text"][:200]), doc["location"]


class _Cells(HTMLParser):
    """Text of every table cell and of every footnote of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.cells: list[str] = []
        self._stack: list[list[str]] = []
        self._footnote = 0

    def handle_starttag(self, tag, attrs):
        if tag in ("td", "th"):
            self._stack.append([])
        if tag == "div" and dict(attrs).get("class") == "footnote":
            self._footnote = 1
        elif self._footnote and tag == "div":
            self._footnote += 1
        if self._footnote and tag == "li":
            self._stack.append([])

    def handle_endtag(self, tag):
        if tag in ("td", "th") or (self._footnote and tag == "li"):
            if self._stack:
                self.cells.append(" ".join("".join(self._stack.pop()).split()))
        if self._footnote and tag == "div":
            self._footnote -= 1

    def handle_data(self, data):
        for part in self._stack:
            part.append(data)


def test_table_cells_and_source_notes_are_not_indexed(built_site):
    """No cell (a price source, a GPU's source note, a long label) of a long enough text to
    be distinctive shows up in the index text: snippets read as sentences."""
    checked = 0
    for lang in ("es", "en"):
        text = " ".join(" ".join(re.sub(r"<[^>]+>", " ", d["text"]).split())
                        for d in load_index(built_site, lang)["docs"])
        for rel in site_pages(built_site / ROOT[lang]):
            if rel.startswith(("en/", "assets/")):
                continue
            parser = _Cells()
            parser.feed((built_site / ROOT[lang] / rel).read_text(encoding="utf-8"))
            for cell in parser.cells:
                if len(cell) >= 40 and re.search(r"[A-Za-z]{4}", cell):
                    assert cell not in text, f"{lang}/{rel}: cell indexed: {cell[:80]}"
                    checked += 1
    assert checked > 100  # the source tables alone have that many long cells


def search_words(index: dict) -> dict[str, set[str]]:
    """Each word Material's search worker indexes -> the pages that hold it: the text between
    tags, split with the index's own ``separator`` (the worker runs it as one regular
    expression over the whole text), lowercased; the pipeline has no trimmer, so punctuation
    left on a word stays part of it."""
    separator = re.compile(index["config"]["separator"])
    out: dict[str, set[str]] = {}
    for doc in index["docs"]:
        plain = re.sub(r"<[^>]+>", " ", doc["title"] + " " + doc["text"])
        for word in separator.split(plain):
            if word:
                out.setdefault(word.lower(), set()).add(doc["location"].split("#")[0])
    return out


@pytest.mark.parametrize("lang", ["es", "en"])
def test_card_names_providers_and_spot_are_search_words(built_site, lang):
    """A search for a card ("4090", "MI300X"), a provider ("Vast.ai", "RunPod") or "spot" finds
    the pages about them: each query's words (split as the worker splits a query) are words of
    the index on those pages, though the tables that list them are kept out of it."""
    from calc.gpus import gpus_listing

    index = load_index(built_site, lang)
    words = search_words(index)
    separator = re.compile(index["config"]["separator"])

    def pages(query: str) -> set[str]:
        # Material's worker appends "*" to each word of a query: a word matches as a prefix
        found = [
            set().union(*(where for word, where in words.items() if word.startswith(w.lower())))
            for w in separator.split(query)
            if w
        ]
        return set.intersection(*found) if found else set()

    assert {"gpus/", "guides/cloud/"} <= pages("4090")
    for query in ("Vast.ai", "RunPod", "spot"):
        assert {"gpus/", "guides/cloud/"} <= pages(query), query
    for gpu in gpus_listing()["gpus"]:
        assert "gpus/" in pages(gpu["name"]), gpu["name"]


# --- in a browser ------------------------------------------------------------------------------

QUERY = "input[data-md-component=search-query]"
HITS = ".md-search-result__item a"
META = ".md-search-result__meta"


@pytest.mark.browser
@pytest.mark.parametrize(("path", "own", "other"), [
    ("guides/vram/", "tarjeta", "card"),
    ("en/guides/vram/", "card", "tarjeta"),
])
def test_search_box_finds_own_language_only(offline_page, site_server, path, own, other):
    page, problems = offline_page
    page.goto(site_server.url(path))
    english = path.startswith("en/")
    page.wait_for_load_state("networkidle")

    def search(query: str) -> None:
        # typed as a reader types (Material reacts to key events on a focused box)
        page.click(QUERY)
        page.keyboard.type(query, delay=30)

    search(own)
    page.wait_for_selector(HITS, timeout=STATE_TIMEOUT_MS)
    hrefs = page.eval_on_selector_all(HITS, "els => els.map(a => a.href)")
    assert hrefs
    root = site_server.url("en/")
    for href in hrefs:
        assert href.startswith(root) is english, href
    # the first hit opens a page of the same language (leaving once the page is settled:
    # a page left while it loads counts its aborted downloads as failures)
    page.wait_for_load_state("networkidle")
    page.goto(hrefs[0])
    page.wait_for_load_state("networkidle")
    assert page.evaluate("document.documentElement.lang") == ("en" if english else "es")
    # a word only the other language uses finds nothing here
    page.goto(site_server.url(path))
    page.wait_for_load_state("networkidle")
    search(other)
    # Material's own state: the results line says "no matching documents" for the query.
    # Search matches prefixes, so once a typed prefix finds nothing, the whole word finds
    # nothing too: this line is the final answer, not a passing one.
    none = page.evaluate("JSON.parse(document.getElementById('__config').textContent)"
                         ".translations['search.result.none']")
    page.wait_for_function(f"none => document.querySelector('{META}').textContent.trim() === none",
                           arg=none, timeout=STATE_TIMEOUT_MS)
    assert page.locator(HITS).count() == 0
    problems.assert_clean()
