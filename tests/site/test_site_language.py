"""Each language reads as written in it: no page of one language shows the other's source
notes or labels, and the Spanish site avoids a short list of anglicisms ("forward" and
"backward" are "paso hacia delante" and "paso hacia atrás"). The data's sources, recorded
in English, are quoted whole only on the methodology's data page, inside blocks marked
``data-raw-sources``; other pages show a price's address and date
(``calc_view.render.citation``)."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from conftest import REPO_ROOT, site_pages
from calc.catalogue import load, pick
from calc_view.render import citation

VOID = {
    "area",
    "base",
    "br",
    "col",
    "embed",
    "hr",
    "img",
    "input",
    "link",
    "meta",
    "param",
    "source",
    "track",
    "wbr",
}
# words of the other language that must not show in Spanish text (code spans aside)
ANGLICISMS = [
    r"\bforward\b",
    r"\bbackward\b",
    r"respuesta corta",
    r"\bDERIVED\b",
    r"found by text search",
    r"as transcribed",
    r"low end of",
    r"\buncertain\b",
    r"\bnot found\b",
    r"\bdatasheet\b",
    r"\bwhitepaper\b",
    r"\bon-demand\b",
]
# identifiers, options, addresses and code (``loss.backward()``, ``--no-x-in-backward``)
IDENTIFIER = re.compile(r"\S*[._(=/-]\S*|`[^`]*`")


class VisibleText(HTMLParser):
    """A page's text as a reader sees it, without code, scripts, styles, the quoted raw
    sources (``data-raw-sources``) and, with ``skip_tables``, without tables."""

    def __init__(self, skip_tables: bool = False) -> None:
        super().__init__()
        self.skip_tables = skip_tables
        self.stack: list[tuple[str, bool]] = []
        self.parts: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag in VOID:
            return
        hidden = (
            tag in ("code", "pre", "script", "style", "kbd")
            or "data-raw-sources" in dict(attrs)
            or (self.skip_tables and tag == "table")
        )
        self.stack.append((tag, hidden))

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                del self.stack[i:]
                return

    def handle_data(self, data):
        if not any(hidden for _, hidden in self.stack):
            self.parts.append(data)

    @property
    def text(self) -> str:
        return " ".join(" ".join(self.parts).split())


def english_notes() -> list[str]:
    """Every source and note string of the GPU and price data (the tests look for them)."""
    from calc import gpus

    out = []
    for gpu in gpus.gpus_listing()["gpus"]:
        out.append(gpu["source"])
        for price in gpu["prices"]:
            out += [price["source"], price.get("note") or ""]
    return [s for s in out if s]


def visible_text(path: Path, skip_tables: bool = False) -> str:
    parser = VisibleText(skip_tables)
    parser.feed(path.read_text(encoding="utf-8"))
    return parser.text


def language_pages(site: Path, lang: str) -> list[Path]:
    out = []
    for rel in site_pages(site):
        english = rel.startswith("en/")
        if rel.startswith("assets/") or english != (lang == "en"):
            continue
        out.append(site / rel)
    return out


def fragments(note: str) -> list[str]:
    """Pieces of a note long enough to be its own (what a page quoting part of it shows)."""
    pieces = re.split(r"[;()]|\. ", note)
    return [p.strip() for p in pieces if len(p.strip()) >= 25 and re.search(r"[a-z]{3} [a-z]", p)]


# --- units -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (
            "runpod.io/pricing as transcribed in github.com/x/y (H100 SXM Secure Cloud)",
            "runpod.io/pricing",
        ),
        (
            "deploybase.ai/articles/runpod-gpu-pricing (RunPod spot column)",
            "deploybase.ai/articles/runpod-gpu-pricing",
        ),
        ("usagepricing.com/blueprint/vast-ai", "usagepricing.com/blueprint/vast-ai"),
        ("NVIDIA T4 datasheet (65 TFLOPS)", ""),
        ("", ""),
    ],
)
def test_citation_is_the_leading_address(source, expected):
    assert citation(source) == expected


def test_every_price_has_a_citation():
    from calc import gpus

    for gpu in gpus.gpus_listing()["gpus"]:
        for price in gpu["prices"]:
            assert citation(price["source"]), (gpu["id"], price["source"])


# --- the built site ------------------------------------------------------------------------------


def test_no_data_note_outside_the_quoted_sources(built_site):
    """The data's English notes show nowhere but inside the methodology's quoted-source
    blocks, in either language (so never on a Spanish page as running text or in the
    calculator's price cell)."""
    pieces = sorted({f for note in english_notes() for f in fragments(note)})
    assert len(pieces) > 100
    found = []
    for lang in ("es", "en"):
        for path in language_pages(built_site, lang):
            text = visible_text(path)
            found += [f"{path.relative_to(built_site)}: {p[:70]}" for p in pieces if p in text]
    assert not found, "\n".join(found[:20])


def test_quoted_sources_only_on_the_methodology_data_page(built_site):
    for path in language_pages(built_site, "es") + language_pages(built_site, "en"):
        html = path.read_text(encoding="utf-8")
        rel = path.relative_to(built_site).as_posix()
        expected = rel in ("methodology/data/index.html", "en/methodology/data/index.html")
        assert ("data-raw-sources" in html) is expected, rel


def _labels_only_in(lang: str) -> list[str]:
    other = "en" if lang == "es" else "es"
    out = []
    mine, yours = load(lang)["messages"], load(other)["messages"]
    for key, entry in mine.items():
        if key not in yours:
            continue
        own, theirs = pick(entry), pick(yours[key])
        if len(own) >= 25 and own != theirs and "<" not in own and "{" not in own:
            out.append(own)
    return out


class Cells(HTMLParser):
    """Every table cell of a page: its ``lang`` attribute (None without one) and its text."""

    def __init__(self) -> None:
        super().__init__()
        self.cells: list[tuple[str | None, str]] = []
        self._open: list[tuple[str | None, list[str]]] = []

    def handle_starttag(self, tag, attrs):
        if tag in ("td", "th"):
            self._open.append((dict(attrs).get("lang"), []))

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._open:
            lang, parts = self._open.pop()
            self.cells.append((lang, " ".join("".join(parts).split())))

    def handle_data(self, data):
        if self._open:
            self._open[-1][1].append(data)


def english_cells() -> set[str]:
    """What the tables quote as recorded, in English: the cards' and prices' sources and
    notes, and the training libraries' behaviours' sources."""
    from calc.frameworks import SOURCES

    quoted = set(english_notes())
    quoted |= {text for per_key in SOURCES.values() for text in per_key.values()}
    return {" ".join(text.split()) for text in quoted}


def test_english_cells_on_spanish_pages_say_so(built_site):
    """A screen reader reads a quoted English source in English on a Spanish page
    (``lang="en"`` on its cell); on English pages the page's own language holds."""
    english = english_cells()
    marked = {"es": 0, "en": 0}
    unmarked = []
    for lang in ("es", "en"):
        for path in language_pages(built_site, lang):
            parser = Cells()
            parser.feed(path.read_text(encoding="utf-8"))
            for cell_lang, text in parser.cells:
                if text not in english:
                    continue
                if lang == "es" and cell_lang != "en":
                    unmarked.append(f"{path.relative_to(built_site)}: {text[:70]}")
                marked[lang] += cell_lang == "en"
    assert not unmarked, "\n".join(unmarked[:20])
    assert marked["es"] > 100  # the methodology's quoted sources and the guides' card sources
    assert marked["en"] == 0


@pytest.mark.parametrize("lang", ["es", "en"])
def test_no_label_of_the_other_language(built_site, lang):
    other = "en" if lang == "es" else "es"
    strings = _labels_only_in(other)
    assert len(strings) > 50
    found = []
    for path in language_pages(built_site, lang):
        text = visible_text(path)
        found += [f"{path.relative_to(built_site)}: {s}" for s in strings if s in text]
    assert not found, "\n".join(found[:20])


def test_spanish_pages_avoid_anglicisms(built_site):
    """Spanish prose and tables; on the methodology page only its prose (its tables quote
    library sources as recorded)."""
    found = []
    for path in language_pages(built_site, "es"):
        rel = path.relative_to(built_site).as_posix()
        text = visible_text(path, skip_tables=rel.startswith("methodology/"))
        text = IDENTIFIER.sub(" ", text)
        for pattern in ANGLICISMS:
            for m in re.finditer(pattern, text, re.I):
                found.append(f"{rel}: …{text[max(0, m.start() - 50) : m.end() + 30]}…")
    assert not found, "\n".join(found[:20])


def _strings(node) -> list[str]:
    if isinstance(node, dict):
        return [s for v in node.values() for s in _strings(v)]
    if isinstance(node, list):
        return [s for v in node for s in _strings(v)]
    return [node] if isinstance(node, str) else []


@pytest.mark.parametrize("path", ["calc/data/messages/es.json"])
def test_spanish_catalogues_avoid_anglicisms(path):
    """What the calculator (in the browser) and the CLI say in Spanish: the same list, code
    (``loss.backward()``, ``--optimizer-in-backward``) aside."""
    data = json.loads((REPO_ROOT / path).read_text(encoding="utf-8"))
    spanish = data["es"] if "es" in data else data
    found = []
    for text in _strings(spanish):
        prose = IDENTIFIER.sub(" ", text)
        found += [text for p in ANGLICISMS if re.search(p, prose, re.I)]
    assert not found, "\n".join(found[:20])
