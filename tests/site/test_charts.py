"""The guides' charts (macros/charts.py): well-formed SVG with a text alternative and no
outside reference; every plotted mark equals what calc computes for the same request; the
table below carries the same numbers; the highlighted cheapest and fastest configurations
really are the cheapest and the fastest. Checked on the macros' own output (no build) and
on the built guides, both languages."""

from __future__ import annotations

import html
import json
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import pytest

import calc
from calc import gpus
from calc.catalogue import load
from macros import charts, labels
from macros.rows import config_text
from calculator_page import STRINGS

SVG = "{http://www.w3.org/2000/svg}"
BASE = {
    "precision": "bf16-mixed",
    "optimizer": "adamw",
    "micro_batch_size": 1,
    "seq_len": 2048,
    "gradient_checkpointing": True,
    "attention": "sdpa",
    "lora_rank": 16,
    "lora_targets": "all-linear",
}
RUN = {"dataset_tokens": 50_000_000, "epochs": 3, "price_tier": "managed"}
MODELS = ["qwen3-8b", "mistral-small-24b", "qwen3-30b-a3b", "llama-3.3-70b"]
METHODS = [
    {"method": "full"},
    {"method": "lora", "precision": "bf16-true"},
    {"method": "qlora", "precision": "bf16-true"},
]
CARDS = ["rtx-4090", "rtx-5090", "l40s", "a100-80gb-sxm"]


@pytest.fixture(scope="module", params=["es", "en"])
def rendered(request) -> dict[str, str]:
    lang = request.param
    return {
        "lang": lang,
        "memory_components": charts.memory_components_chart(lang, MODELS, METHODS, **BASE),
        "memory_seq_batch": charts.memory_seq_batch_chart(
            lang,
            "qwen3-8b",
            "lora",
            [512, 1024, 2048, 4096, 8192],
            [1, 2, 4, 8],
            CARDS,
            **dict(BASE, precision="bf16-true"),
        ),
        "time_cost": charts.time_cost_chart(
            lang, "qwen3-8b", "lora", **dict(BASE, **RUN, precision="bf16-true")
        ),
    }


# --- reading the markup ------------------------------------------------------------------


def svgs(markup: str) -> list[ET.Element]:
    """Every inline SVG of ``markup``, parsed as XML (a malformed one raises)."""
    return [ET.fromstring(s) for s in re.findall(r"<svg\b.*?</svg>", markup, re.DOTALL)]


class Cells(HTMLParser):
    """The numeric cells of the tables in ``markup``: (row source, data-field, raw value)."""

    def __init__(self) -> None:
        super().__init__()
        self.cells: list[dict] = []
        self.row_source: str | None = None
        self.table: str | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table":
            self.table = a.get("data-table")
        if tag == "tr":
            self.row_source = a.get("data-source")
        if tag in ("td", "th") and "data-value" in a:
            self.cells.append(
                {
                    "table": self.table,
                    "field": a["data-field"],
                    "value": float(a["data-value"]),
                    "source": a.get("data-source") or self.row_source,
                }
            )
        if tag in ("td", "th") and "data-ref" in a:
            self.cells.append(
                {
                    "table": self.table,
                    "field": a["data-field"],
                    "ref": a["data-ref"],
                    "source": self.row_source,
                }
            )


def cells(markup: str) -> list[dict]:
    parser = Cells()
    parser.feed(markup)
    return parser.cells


def figures(markup: str, name: str) -> list[str]:
    """The ``calc-figure`` blocks called ``name`` in a page or a macro's output."""
    return re.findall(
        rf'<div class="calc-figure" data-figure="{name}" data-search-exclude="">.*?</details></div>',
        markup,
        re.DOTALL,
    )


# --- the checks, shared by the macro and the built-page tests -----------------------------


def check_svg_alternative(svg: ET.Element) -> None:
    assert svg.get("role") == "img"
    ids = svg.get("aria-labelledby").split()
    found = {el.get("id"): el for el in svg.iter() if el.get("id")}
    assert [found[i].tag for i in ids] == [SVG + "title", SVG + "desc"]
    assert all(found[i].text and len(found[i].text) > 20 for i in ids)
    assert svg.get("viewBox") and svg.get("width") == "100%"
    for el in svg.iter():
        assert el.tag.removeprefix(SVG) not in ("script", "image", "foreignObject", "use", "a")
        for key, value in el.attrib.items():
            assert not key.endswith("href") and key != "src", (el.tag, key)
            assert "url(" not in value and "//" not in value.replace(SVG[1:-1], ""), (key, value)


def check_components(figure: str) -> int:
    checked = 0
    table = {c["source"]: c for c in cells(figure) if c["field"] == "device_total_bytes"}
    by_source_field = {(c["source"], c["field"]): c["value"] for c in cells(figure)}
    for svg in svgs(figure):
        check_svg_alternative(svg)
        for group in svg.iter(SVG + "g"):
            if not group.get("data-source"):
                continue
            source = json.loads(group.get("data-source"))
            response = calc.estimate(source["request"])
            total = 0
            for rect in group.iter(SVG + "rect"):
                series, value = rect.get("data-series"), float(rect.get("data-y"))
                if series == "reserve_context":
                    expected = response["device_total_bytes"] - response["peak_allocated_bytes"]
                else:
                    expected = response["components"].get(series, 0)
                    # the table below shows every component a bar draws with width
                    if expected:
                        key = (_attr_json(source), "components." + series)
                        assert by_source_field[key] == expected, key
                assert value == expected, (source["request"]["model"], series)
                total += value
                checked += 1
            assert total == response["device_total_bytes"] == float(group.get("data-total"))
            assert table[_attr_json(source)]["value"] == response["device_total_bytes"]
    return checked


def _attr_json(source: dict) -> str:
    from macros.tables import source_json

    return source_json(source)


def check_seq_batch(figure: str) -> int:
    checked = 0
    table = {(c["source"], c["field"]): c["value"] for c in cells(figure)}
    listing = {g["id"]: g for g in gpus.gpus_listing()["gpus"]}
    for svg in svgs(figure):
        check_svg_alternative(svg)
        base = json.loads(svg.get("data-source"))["request"]
        for group in svg.iter(SVG + "g"):
            if group.get("data-series") == "capacity":
                gpu = group.get("data-category")
                assert float(group.get("data-y")) == listing[gpu]["memory_bytes"]
                assert (
                    table[(_attr_json({"command": "gpu", "id": gpu}), "memory_bytes")]
                    == listing[gpu]["memory_bytes"]
                )
                continue
            if not group.get("data-x-key"):
                continue
            x_key, s_key = group.get("data-x-key"), group.get("data-series-key")
            for point in group.iter(SVG + "circle"):
                request = {
                    **base,
                    x_key: int(point.get("data-x")),
                    s_key: int(point.get("data-series")),
                }
                request = {k: request[k] for k in (*base, "seq_len", "micro_batch_size")}
                expected = calc.estimate(request)["device_total_bytes"]
                assert float(point.get("data-y")) == expected, request
                # the same figure in the table, in the cell whose source is this request
                cell_source = _attr_json(
                    {"command": "estimate", "request": _table_order(request, base)}
                )
                assert table[(cell_source, "device_total_bytes")] == expected
                checked += 1
    return checked


def _table_order(request: dict, base: dict) -> dict:
    """The request as the table's cells write it (the macro's key order)."""
    return {
        **{k: request[k] for k in base if k not in ("seq_len", "micro_batch_size")},
        **{k: request[k] for k in base if k in ("seq_len", "micro_batch_size")},
        "seq_len": request["seq_len"],
        "micro_batch_size": request["micro_batch_size"],
    }


def check_time_cost(figure: str) -> int:
    (svg,) = svgs(figure)
    check_svg_alternative(svg)
    source = json.loads(svg.get("data-source"))
    plan = calc.plan_setup(source["request"])
    configs = plan["recommendations"]["configs"]
    priced = [c for _, c in charts.priced_configs(plan)]
    points = list(svg.iter(SVG + "circle"))
    assert len(points) >= 5
    for point in points:
        config = configs[int(point.get("data-index"))]
        assert point.get("data-series") == config["id"]
        assert float(point.get("data-x")) == config["time_hours"]
        assert float(point.get("data-y")) == config["cost_usd"]
        assert config in priced  # only configurations priced at the request's own provider
    cheapest = [p for p in points if "cheapest" in p.get("data-role").split()]
    fastest = [p for p in points if "fastest" in p.get("data-role").split()]
    assert len(cheapest) == len(fastest) == 1
    assert float(cheapest[0].get("data-y")) == min(c["cost_usd"] for c in priced)
    assert float(fastest[0].get("data-x")) == min(c["time_hours"] for c in priced)
    assert float(cheapest[0].get("data-y")) == min(float(p.get("data-y")) for p in points)
    assert float(fastest[0].get("data-x")) == min(float(p.get("data-x")) for p in points)
    # every card that fits and is priced has its point
    assert {configs[int(p.get("data-index"))]["gpu"] for p in points} == {c["gpu"] for c in priced}
    # both are named on the chart, not by colour alone
    words = [el for el in svg.iter(SVG + "text") if el.get("data-label")]
    assert sorted(w.get("data-label") for w in words) == ["cheapest", "fastest"]
    # the table: one row per point, the same time, cost and configuration
    table = cells(figure)
    refs = [c for c in table if "ref" in c]
    assert [r["ref"] for r in refs] == [
        configs[int(p.get("data-index"))]["id"] for p in points
    ] or sorted(r["ref"] for r in refs) == sorted(p.get("data-series") for p in points)
    values = {c["field"]: c["value"] for c in table if "value" in c}
    for point in points:
        i = int(point.get("data-index"))
        assert values[f"recommendations.configs.{i}.time_hours"] == float(point.get("data-x"))
        assert values[f"recommendations.configs.{i}.cost_usd"] == float(point.get("data-y"))
    return len(points)


# --- on the macros' output ---------------------------------------------------------------


def test_memory_components_equal_calc(rendered):
    (figure,) = figures(rendered["memory_components"], "memory_components")
    assert len(svgs(figure)) == len(METHODS)
    assert check_components(figure) >= len(MODELS) * len(METHODS) * 3


def test_memory_seq_batch_equal_calc(rendered):
    (figure,) = figures(rendered["memory_seq_batch"], "memory_seq_batch")
    assert len(svgs(figure)) == 2
    assert check_seq_batch(figure) == 2 * 5 * 4


def test_time_cost_highlights_and_equals_calc(rendered):
    (figure,) = figures(rendered["time_cost"], "time_cost")
    assert check_time_cost(figure) >= 5


# --- where the words go: boxes computed from the coordinates the SVG carries ---------------

#: Placed words and the advance per character (in ems) this check assumes; a browser's
#: sans-serif averages about 0.55-0.6 em a character, bold a little more.
PLACED = ("calc-capacity-label", "calc-dot-label", "calc-point-label")


def _text_boxes(svg: ET.Element) -> list[tuple[str, tuple[float, float, float, float]]]:
    """(text, box) of every placed word: one box per line (``tspan``), from its ``x``, its
    baseline ``y``, ``text-anchor`` and ``font-size``."""
    out = []
    for text in svg.iter(SVG + "text"):
        if text.get("class") not in PLACED:
            continue
        size = float(text.get("font-size"))
        per_char = 0.66 if text.get("class") == "calc-dot-label" else 0.58
        lines = list(text.iter(SVG + "tspan")) or [text]
        for line in lines:
            x, y = float(line.get("x")), float(line.get("y"))
            w = len(line.text) * size * per_char
            x0 = x - {"start": 0, "middle": w / 2, "end": w}[text.get("text-anchor", "start")]
            out.append((line.text, (x0, y - 0.9 * size, x0 + w, y + 0.25 * size)))
    return out


def _overlap(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _crosses(box, p, q, samples: int = 200) -> bool:
    """Whether the segment p-q passes through ``box`` (sampled finely)."""
    return any(
        box[0] < p[0] + (q[0] - p[0]) * i / samples < box[2]
        and box[1] < p[1] + (q[1] - p[1]) * i / samples < box[3]
        for i in range(samples + 1)
    )


def _data_segments(svg: ET.Element) -> list:
    segments = []
    for path in svg.iter(SVG + "path"):
        nums = [float(v) for v in re.findall(r"-?[0-9.]+", path.get("d"))]
        pts = list(zip(nums[::2], nums[1::2], strict=False))
        segments += list(zip(pts, pts[1:], strict=False))
    for group in svg.iter(SVG + "g"):
        if group.get("data-series") == "capacity":
            line = group.find(SVG + "line")
            segments.append(
                (
                    (float(line.get("x1")), float(line.get("y1"))),
                    (float(line.get("x2")), float(line.get("y2"))),
                )
            )
    return segments


def test_words_on_the_charts_touch_no_point_line_or_other_word(rendered):
    """No placed word (a card's memory, "cheapest", "fastest", a point's number) overlaps a
    point, another word, or a data line (the series and the cards' dashed lines)."""
    checked = 0
    for name in ("memory_seq_batch", "time_cost"):
        for svg in svgs(rendered[name]):
            boxes = _text_boxes(svg)
            assert boxes
            points = [
                (float(c.get("cx")), float(c.get("cy")), float(c.get("r")))
                for c in svg.iter(SVG + "circle")
            ]
            segments = _data_segments(svg)
            for i, (text, box) in enumerate(boxes):
                for cx, cy, r in points:
                    assert not _overlap(box, (cx - r, cy - r, cx + r, cy + r)), (name, text, cx, cy)
                for other, box2 in boxes[i + 1 :]:
                    assert not _overlap(box, box2), (name, text, other)
                for p, q in segments:
                    assert not _crosses(box, p, q), (name, text, p, q)
                checked += 1
    assert checked >= 8 + 21


def test_the_checks_of_placed_words_catch_an_overlap():
    """The box and crossing checks themselves: a word over a point, a word on a line."""
    assert _overlap((0, 0, 10, 10), (9, 9, 12, 12)) and not _overlap((0, 0, 10, 10), (10, 0, 12, 5))
    assert _crosses((0, 0, 10, 10), (-5, 5), (15, 5)) and not _crosses(
        (0, 0, 10, 10), (-5, 12), (15, 12)
    )
    svg = ET.fromstring(
        f'<svg xmlns="{SVG[1:-1]}"><text class="calc-point-label" x="10" y="10" font-size="10">'
        "12</text></svg>"
    )
    ((_, box),) = _text_boxes(svg)
    assert _overlap(box, (14, 6, 16, 8))


def test_every_point_of_the_time_cost_chart_is_named(rendered):
    """Each point carries a number on the chart, and the list beside the chart names that
    number's configuration; the cheapest and the fastest are named in words as well."""
    (figure,) = figures(rendered["time_cost"], "time_cost")
    (svg,) = svgs(figure)
    plan = calc.plan_setup(json.loads(svg.get("data-source"))["request"])
    configs = plan["recommendations"]["configs"]
    numbers = {
        t.get("data-point"): t.text
        for t in svg.iter(SVG + "text")
        if t.get("class") == "calc-point-label"
    }
    key = dict(re.findall(r'<li data-point="(\d+)" data-config="[^"]+">([^<]+)</li>', figure))
    points = list(svg.iter(SVG + "circle"))
    assert len(points) >= 15
    for point in points:
        n = point.get("data-point")
        assert numbers[n] == n
        config = configs[int(point.get("data-index"))]
        assert html.unescape(key[n]).startswith(config_text(config, rendered["lang"])), (n, key[n])
    assert sorted(numbers, key=int) == [str(i) for i in range(1, len(points) + 1)]
    assert len(key) == len(points)


def test_charts_in_the_page_language(rendered):
    lang = rendered["lang"]
    other = "en" if lang == "es" else "es"
    for name in ("memory_components", "memory_seq_batch", "time_cost"):
        markup = rendered[name]
        assert html.escape(charts.t("data_summary", lang), quote=False) in markup
        assert html.escape(charts.t("data_summary", other), quote=False) not in markup
        for svg in svgs(markup):
            title = svg.find(SVG + "title").text

            def heads(code):
                titles = load(code)["messages"]
                return [
                    v.split("{")[0]
                    for k, v in titles.items()
                    if k.startswith("chart.")
                    and (k.endswith(".title") or k.startswith("chart.seq.title"))
                ]

            assert any(title.startswith(h) for h in heads(lang)), title
            assert not any(title.startswith(h) for h in heads(other)), title


def test_every_chart_string_in_both_languages():
    es, en = (load(lang)["messages"] for lang in ("es", "en"))
    chart_keys = [k for k in es if k.startswith("chart.")]
    assert chart_keys == [k for k in en if k.startswith("chart.")]
    assert len(chart_keys) > 10
    for key in chart_keys:
        assert es[key] and en.get(key), key
    # units and names aside, the charts' words are written in each language
    assert sum(es[k] != en[k] for k in chart_keys) > len(chart_keys) // 2


def test_text_is_escaped():
    from calc_view.html import el, to_html

    markup = to_html(el("text", {"data-x": '"><script>'}, "<b>&'\""))
    parsed = ET.fromstring(markup)
    assert parsed.get("data-x") == '"><script>' and parsed.text == "<b>&'\""
    assert "<script>" not in markup and "<b>" not in markup


@pytest.mark.parametrize(
    ("top", "ticks"),
    [(7.2, [0, 2, 4, 6, 8]), (160, [0, 50, 100, 150, 200]), (1461.9, [0, 500, 1000, 1500])],
)
def test_nice_ticks(top, ticks):
    assert charts.nice_ticks(top) == ticks


def test_log_ticks():
    assert charts.log_ticks(0.7, 35) == [1, 2, 5, 10, 20]
    assert charts.log_ticks(17, 130) == [20, 50, 100]


def test_price_sources_are_numbered_notes():
    from calc_view.render import citation
    from macros.guides import gpu_prices

    markup = gpu_prices("es")
    listing = gpus.gpus_listing()["gpus"]
    # one note per distinct address: the whole English source is quoted on the methodology page
    sources = list(dict.fromkeys(citation(p["source"]) for g in listing for p in g["prices"]))
    assert all(sources), "a price source without an address would make an empty note"
    notes = re.findall(r'<li id="price-source-(\d+)" data-note="\d+">(.*?)</li>', markup)

    assert [html.unescape(text) for _, text in notes] == sources
    assert [int(n) for n, _ in notes] == list(range(1, len(sources) + 1))
    links = re.findall(r'<a href="#price-source-(\d+)" data-note="\d+">(\d+)</a>', markup)
    assert len(links) == sum(len(g["prices"]) for g in listing)
    assert all(a == b and 1 <= int(a) <= len(sources) for a, b in links)
    table = markup.split("</table>")[0]
    assert not any(html.escape(s) in table for s in sources if len(s) > 12)
    # the date column comes before the long columns
    headers = re.findall(r'<th scope="col">(.*?)</th>', table)
    assert headers.index(labels.text("col.as_of", "es")) <= 2


def test_vram_table_is_cut_to_what_a_reader_compares():
    from macros.guides import vram_by_model

    markup = vram_by_model("en", MODELS, METHODS, **BASE)
    headers = re.findall(r'<th scope="col">(.*?)</th>', markup)
    assert len(headers) <= 4
    assert labels.text("col.device_total", "en") in headers


def test_vram_table_of_a_run_names_the_card():
    """With a run's setup (the cloud guide's), the cut table also names the smallest single
    card, the one calc's plan recommends, with the same total as the estimate."""
    from macros.guides import vram_by_model

    methods = METHODS[1:]
    markup = vram_by_model("es", MODELS, methods, **BASE, **RUN)
    headers = re.findall(r'<th scope="col">(.*?)</th>', markup)
    assert len(headers) == 5 and headers[-1] == html.escape(
        labels.text("col.smallest_single_card", "es")
    )
    found = cells(markup)
    refs = [c for c in found if "ref" in c]
    totals = [c for c in found if "value" in c]
    assert len(refs) == len(totals) == len(MODELS) * len(methods)
    for ref, total in zip(refs, totals, strict=True):
        request = json.loads(ref["source"])["request"]
        plan = calc.plan_setup(request)
        assert ref["ref"] == (plan["recommendations"]["smallest_single_gpu"] or {}).get("gpu", "")
        estimate = calc.estimate({k: v for k, v in request.items() if k not in ("gpu", *RUN)})
        assert (
            total["value"] == estimate["device_total_bytes"] == plan["memory"]["device_total_bytes"]
        )


# --- on the built guides -----------------------------------------------------------------


@pytest.mark.build
@pytest.mark.parametrize("prefix", ["", "en/"])
def test_built_guides_carry_the_charts(built_site, prefix):
    vram = (built_site / prefix / "guides/vram/index.html").read_text(encoding="utf-8")
    cloud = (built_site / prefix / "guides/cloud/index.html").read_text(encoding="utf-8")
    (a,) = figures(vram, "memory_components")
    (b,) = figures(vram, "memory_seq_batch")
    (c,) = figures(cloud, "time_cost")
    assert check_components(a) > 0 and check_seq_batch(b) > 0 and check_time_cost(c) > 0
    # each chart in a section of its own
    for page, anchor in (
        (vram, "memory-by-component"),
        (vram, "memory-against-cards"),
        (cloud, "time-against-cost"),
    ):
        assert f'id="{anchor}"' in page
    # the charts' words stay out of the search index (snippets must read as sentences)
    for path in {
        built_site / prefix / "search/search_index.json",
        built_site / "search/search_index.json",
    }:
        if path.is_file():
            index = path.read_text(encoding="utf-8")
            for lang in ("es", "en"):
                assert charts.t("cost.other", lang) not in index
                assert charts.t("reserve_context", lang) not in index
    for page in (vram, cloud):
        ids = re.findall(r'\bid="([^"]+)"', page)
        assert len(ids) == len(set(ids)), "repeated ids"


def test_table_renderer_takes_rows_and_element_trees():
    """``macros.tables.render``: a list of row dicts in; a ``node`` cell is an element tree,
    escaped like every text; a row without a column's key stops the build."""
    from calc_view.html import el
    from macros.tables import SOURCE, Col, render

    rows = [
        {
            "name": "<b>",
            "n": 2,
            "note": (el("a", {"href": "#x"}, "1"), " & more"),
            SOURCE: {"command": "gpu", "id": "l4"},
        }
    ]
    cols = [
        Col("name", "col.gpu", "text", row_header=True),
        Col("n", "col.rows", "int"),
        Col("note", "col.source_note", "node"),
    ]
    markup = render(rows, cols, "en", "t", "caption.gpu_prices")
    assert "<b>" not in markup and '<th scope="row">&lt;b&gt;</th>' in markup
    assert '<td><a href="#x">1</a> &amp; more</td>' in markup
    assert [c["value"] for c in cells(markup)] == [2.0]
    with pytest.raises(KeyError):
        render([{"name": "x"}], cols, "en", "t", "caption.gpu_prices")


# --- one palette for the memory components ----------------------------------------------


def test_one_palette_for_the_components_on_every_page(rendered):
    """The guides' component chart and the calculator's bar colour a component with the same
    class, from the same function; its colour is set once, for the light and the dark scheme,
    in the site-wide stylesheet, and the calculator's stylesheet sets none of its own."""
    from pathlib import Path

    import calc_view.render
    from calc_view import Renderer, palette

    assert charts.component_class is palette.component_class
    assert calc_view.render.component_class is palette.component_class
    # the guides' chart: every segment's class is its component's
    (figure,) = figures(rendered["memory_components"], "memory_components")
    guide = {}
    for svg in svgs(figure):
        for rect in svg.iter(SVG + "rect"):
            classes = rect.get("class").split()
            guide.setdefault(rect.get("data-series"), set()).add(classes[1])
    assert {n: c for n, c in guide.items() if n != "reserve_context"} == {
        n: {palette.component_class(n)} for n in guide if n != "reserve_context"
    }
    # the calculator's bar: the same class for the same component
    response = calc.estimate({"model": "qwen3-8b", "method": "lora", **BASE})
    bar = Renderer(response, rendered["lang"], STRINGS[rendered["lang"]]).memory_chart()
    rects = [n for n in bar[2][2:] if n[0] == "rect" and "calc-seg" in n[1]["class"]]
    names = [c for c, v in response["components"].items() if v] + ["reserved_extra"]
    assert [n[1]["class"].split()[1] for n in rects][: len(names)] == [
        palette.component_class(c) for c in names
    ]
    assert len(set(guide) & set(names)) >= 3  # components both draw, in the same colour
    # the colours: once per scheme, for every name, in the stylesheet every page loads
    root = Path(__file__).resolve().parents[2]
    css = (root / "docs/stylesheets/guides.css").read_text(encoding="utf-8")
    light, dark = (
        re.search(rf"{head}\s*\{{([^}}]*)\}}", css).group(1)
        for head in (
            re.escape(':root, [data-md-color-scheme="default"]') + r"(?=\s*\{\s*--calc-comp)",
            re.escape('[data-md-color-scheme="slate"]') + r"(?=\s*\{\s*--calc-comp)",
        )
    )
    for name in palette.NAMES:
        var = "--" + palette.component_class(name)
        assert re.search(rf"{var}:\s*#[0-9a-f]{{6}};", light) and re.search(
            rf"{var}:\s*#[0-9a-f]{{6}};", dark
        ), name
        assert css.count(f".{palette.component_class(name)} {{") == 1, name
    assert len({palette.component_class(n) for n in palette.NAMES}) == len(palette.NAMES)
    calculator_css = (root / "docs/assets/calculator/calculator.css").read_text(encoding="utf-8")
    assert not re.search(r"\.calc-comp-[\w-]+\s*\{", calculator_css)
    assert not re.search(r"\.calc-seg-\w", calculator_css)
