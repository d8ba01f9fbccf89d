"""Charts of the guides, drawn at build time from ``calc`` as inline SVG.

No script, font or request: each chart is markup the browser draws as it is, readable
without JavaScript. Every chart has a text alternative (``role="img"`` with a ``<title>``
and a ``<desc>`` that says what the picture shows) and, below it, the same numbers in a
table (``macros.tables.render``, so the site tests check every cell against ``calc``).

Every plotted mark carries its raw ``calc`` number in ``data-y`` (and ``data-x`` where the
horizontal position is a number too), its series in ``data-series`` and its category in
``data-category``; the ``<g>`` or ``<svg>`` around it carries the ``data-source`` request, so
a test recomputes each mark. Not ``data-value``: that attribute marks the numbers written
as text, which the site tests read with ``innerText`` (an SVG element has none).

Colours are classes styled in ``docs/stylesheets/guides.css`` from CSS variables set for
Material's light and dark palettes; a memory component's class comes from
``calc_view.palette``, which the calculator's bar uses too (one colour per component on the
whole site). Words inside a plot are placed by ``macros.chart_layout`` where they touch no
point, no data line and no other word, and every point is named on the chart. The SVG scales to the column (``viewBox``, width 100 %);
its legend is HTML below it so the words reflow on a phone instead of shrinking.
"""

from __future__ import annotations

import hashlib
import math

import calc

from . import labels
from .chart_layout import ASCENT, DESCENT, Box, Layout, around, circle_box, nearest_edge, text_width
from .rows import REFERENCE_GPU, config_text, estimate_rows, model_name, present_components
from .site import bind_all
from calc_view.html import SVG_NS, el, svg_number, to_html
from calc_view.palette import component_class
from calc.numfmt import GIB, format_kind, format_number
from .tables import CELL_SOURCE, SOURCE, Col, raw_number, source_json, table_node

# The charts' words (``chart.*``) and their tables' headers and captions are in the message
# catalogue (calc/data/messages).

# Geometry of every chart, in viewBox units. A narrow box keeps the words legible on a
# phone (it scales down little); the CSS caps its width on a desktop so they do not swell.
WIDTH = 420.0
FONT = 13.0
# Words placed inside a plot (set on the element, so the layout's boxes hold) and marks.
CAPACITY_FONT = 11.0
DOT_LABEL_FONT = 12.0
POINT_LABEL_FONT = 10.5
POINT_R = 3.2


def t(key: str, lang: str, **fill: object) -> str:
    """The chart's words: ``chart.<key>`` of the message catalogue (calc/data/messages)."""
    return labels.text("chart." + key, lang).format(**fill)


# ---------------------------------------------------------------- SVG building
# Charts are element trees (``calc_view.html``), written once by ``to_html`` in :func:`_wrap`.


def _chart_id(name: str, payload: object) -> str:
    """An id stable across builds and distinct per chart on a page."""
    digest = hashlib.sha1(source_json(payload).encode()).hexdigest()[:8]
    return f"chart-{name}-{digest}"


def _svg(
    chart_id: str,
    name: str,
    height: float,
    title: str,
    desc: str,
    body: list,
    attrs: dict | None = None,
) -> list:
    head = [
        el("title", {"id": chart_id + "-title"}, title),
        el("desc", {"id": chart_id + "-desc"}, desc),
    ]
    return el(
        "svg",
        {
            "xmlns": SVG_NS,
            "class": "calc-svg",
            "viewBox": f"0 0 {svg_number(WIDTH)} {svg_number(height)}",
            "width": "100%",
            "role": "img",
            "data-chart": name,
            "id": chart_id,
            "aria-labelledby": f"{chart_id}-title {chart_id}-desc",
            "font-size": svg_number(FONT),
            **(attrs or {}),
        },
        *head,
        *body,
    )


def _legend(items: list[tuple[str, str]]) -> list:
    """HTML legend: (css class of the swatch, label)."""
    return el(
        "ul",
        {"class": "calc-chart-legend"},
        *(
            el("li", {}, el("span", {"class": f"calc-swatch {css}", "aria-hidden": "true"}), label)
            for css, label in items
        ),
    )


def _details(lang: str, tables: list) -> list:
    """The chart's figures as tables (``macros.tables.table_node``), folded."""
    return el(
        "details", {"class": "calc-chart-data"}, el("summary", {}, t("data_summary", lang)), *tables
    )


def _wrap(name: str, parts: list) -> str:
    """One raw HTML block (one line, so Markdown leaves it alone). Kept out of the search
    index: tick labels and a table of figures do not read as sentences in a snippet."""
    return to_html(
        el(
            "div",
            {"class": "calc-figure", "data-figure": name, "data-search-exclude": True},
            *parts,
        )
    )


def nice_ticks(top: float, count: int = 5) -> list[float]:
    """Round tick values from 0 to at least ``top``: steps of 1, 2 or 5 × 10^k."""
    if top <= 0:
        return [0.0, 1.0]
    raw = top / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    n = math.ceil(top / step - 1e-9)
    return [i * step for i in range(n + 1)]


def log_ticks(low: float, high: float) -> list[float]:
    """1, 2, 5 × 10^k between ``low`` and ``high`` (both > 0)."""
    out = []
    k = math.floor(math.log10(low))
    while 10**k <= high * 10:
        for m in (1, 2, 5):
            v = m * 10**k
            if low <= v <= high:
                out.append(float(v))
        k += 1
    return out


def _tick_text(value: float, lang: str) -> str:
    decimals = (
        0 if float(value).is_integer() else (1 if abs(value * 10 - round(value * 10)) < 1e-9 else 2)
    )
    return format_number(value, decimals, lang)


def _y_gridline(y: float, left: float, right: float, label: str) -> list:
    """A horizontal grid line across the plot at ``y`` and its tick label left of the axis."""
    line = {"class": "calc-grid", "x1": svg_number(left), "x2": svg_number(WIDTH - right)}
    tick = {"class": "calc-tick", "x": svg_number(left - 4), "y": svg_number(y + 4)}
    return [
        el("line", {**line, "y1": svg_number(y), "y2": svg_number(y)}),
        el("text", {**tick, "text-anchor": "end", "aria-hidden": "true"}, label),
    ]


def _x_gridline(x: float, top: float, bottom: float) -> list:
    """A vertical grid line at ``x`` from ``top`` down to ``bottom`` (the plot's height)."""
    attrs = {"class": "calc-grid", "x1": svg_number(x), "x2": svg_number(x)}
    return el("line", {**attrs, "y1": svg_number(top), "y2": svg_number(bottom)})


def _component_name(name: str, lang: str) -> str:
    """A component's name without the table header's unit (``Pesos (GiB)`` → ``Pesos``)."""
    label = labels.text("col.component." + name, lang)
    return label.removesuffix(" (GiB)")


def _series_class(i: int) -> str:
    return f"calc-c{i % 10}"


# ---------------------------------------------------------------- a. memory by component


def _variant_text(variant: dict, setup: dict, lang: str) -> str:
    method = labels.option("method", variant.get("method", setup.get("method", "lora")), lang)
    precision = variant.get("precision", setup.get("precision"))
    return f"{method} ({labels.option('precision', precision, lang)})" if precision else method


def memory_components_chart(lang: str, models: list[str], methods: list, **setup) -> str:
    """Stacked bars of the peak memory by component, one panel per method (each with its
    own scale: a 70B full fine-tuning would flatten every LoRA bar), one bar per model;
    the components' table below."""
    variants = [m if isinstance(m, dict) else {"method": m} for m in methods]
    requests = [{"model": m, **setup, **v} for v in variants for m in models]
    responses = [calc.estimate(r) for r in requests]
    # a component calc adds later still shows (after the known ones)
    present = present_components(
        [{f"components.{c}": v for r in responses for c, v in r["components"].items() if v}]
    )
    css = {c: component_class(c) for c in present}
    n = len(models)
    panels = [
        _component_panel(
            lang,
            requests[i * n : (i + 1) * n],
            responses[i * n : (i + 1) * n],
            present,
            css,
            _variant_text(variant, setup, lang),
        )
        for i, variant in enumerate(variants)
    ]
    legend = _legend(
        [(css[c], _component_name(c, lang)) for c in present]
        + [(component_class("reserve_context"), t("reserve_context", lang))]
    )
    table = _components_table(lang, requests, present)
    return _wrap("memory_components", [*panels, legend, _details(lang, [table])])


def _component_panel(
    lang: str,
    requests: list[dict],
    responses: list[dict],
    present: list[str],
    css: dict,
    variant_text: str,
) -> list:
    left, right, top = 8.0, 14.0, 6.0
    label_h, bar_h, gap = 15.0, 16.0, 9.0
    row_h = label_h + bar_h + gap
    plot_w = WIDTH - left - right
    top_value = max(r["device_total_bytes"] for r in responses) / GIB
    ticks = nice_ticks(top_value, 5)
    scale = plot_w / ticks[-1]
    n = len(requests)
    axis_y = top + n * row_h
    height = axis_y + 34.0
    body: list = []
    for tick in ticks:  # light vertical grid behind the bars
        body.append(_x_gridline(left + tick * scale, top, axis_y))
    items = []
    for i, (req, resp) in enumerate(zip(requests, responses, strict=True)):
        y = top + i * row_h
        name = model_name(req["model"])
        total = resp["device_total_bytes"]
        total_text = format_kind(total, "gib", lang)
        marks = [
            el(
                "text",
                {"class": "calc-label", "x": svg_number(left), "y": svg_number(y + label_h - 4)},
                f"{name} · {total_text} GiB",
            )
        ]
        x = left
        parts = []
        for comp in present:
            value = resp["components"].get(comp, 0)
            w = value / GIB * scale
            shown = format_kind(value, "gib", lang)
            if value:
                parts.append(f"{_component_name(comp, lang).lower()} {shown}")
            marks.append(
                el(
                    "rect",
                    {
                        "class": "calc-seg " + css[comp],
                        "x": svg_number(x),
                        "y": svg_number(y + label_h),
                        "width": svg_number(w),
                        "height": svg_number(bar_h),
                        "data-series": comp,
                        "data-y": raw_number(value),
                    },
                    el("title", {}, f"{name}: {_component_name(comp, lang)} {shown} GiB"),
                )
            )
            x += w
        rest = total - resp["peak_allocated_bytes"]
        w = rest / GIB * scale
        marks.append(
            el(
                "rect",
                {
                    "class": "calc-seg " + component_class("reserve_context"),
                    "x": svg_number(x),
                    "y": svg_number(y + label_h),
                    "width": svg_number(max(w, 0)),
                    "height": svg_number(bar_h),
                    "data-series": "reserve_context",
                    "data-y": raw_number(rest),
                },
                el(
                    "title",
                    {},
                    f"{name}: {t('reserve_context', lang)} {format_kind(rest, 'gib', lang)} GiB",
                ),
            )
        )
        body.append(
            el(
                "g",
                {
                    "data-category": req["model"],
                    "data-total": raw_number(total),
                    "data-source": source_json({"command": "estimate", "request": req}),
                },
                *marks,
            )
        )
        items.append(
            t("components.item", lang, model=name, total=total_text, parts=", ".join(parts))
        )
    body.append(_x_axis(lang, ticks, left, scale, axis_y, t("axis.gib", lang)))
    title = t("components.title", lang, variant=variant_text)
    desc = t("components.desc", lang, items="; ".join(items))
    chart_id = _chart_id("memory_components", requests)
    return el(
        "figure",
        {"class": "calc-chart-panel"},
        el("figcaption", {}, title),
        _svg(chart_id, "memory_components", height, title, desc, body),
    )


def _x_axis(
    lang: str,
    ticks: list[float],
    left: float,
    scale: float,
    y: float,
    label: str,
    positions: list[float] | None = None,
) -> list:
    parts = [
        el(
            "line",
            {
                "class": "calc-axis",
                "x1": svg_number(left),
                "x2": svg_number(WIDTH - 8),
                "y1": svg_number(y),
                "y2": svg_number(y),
            },
        )
    ]
    for i, tick in enumerate(ticks):
        x = positions[i] if positions else left + tick * scale
        anchor = "start" if i == 0 and x - left < 10 else ("end" if x > WIDTH - 20 else "middle")
        parts.append(
            el(
                "text",
                {
                    "class": "calc-tick",
                    "x": svg_number(x),
                    "y": svg_number(y + 13),
                    "text-anchor": anchor,
                },
                _tick_text(tick, lang),
            )
        )
    parts.append(
        el(
            "text",
            {
                "class": "calc-axis-label",
                "x": svg_number(WIDTH - 8),
                "y": svg_number(y + 28),
                "text-anchor": "end",
            },
            label,
        )
    )
    return el("g", {"class": "calc-x-axis", "aria-hidden": "true"}, *parts)


def _components_table(lang: str, requests: list[dict], present: list[str]) -> list:
    rows = estimate_rows(requests)
    for row in rows:
        row["phase"] = row["peak_phase"]
        for comp in present:
            row["components." + comp] = row.get("components." + comp) or 0
    cols = [
        Col("model_name", "col.model", "text", row_header=True),
        Col("req.method", "col.method", "code"),
        Col("req.precision", "col.precision", "code"),
        Col("phase", "col.peak_phase", "code", options="phase"),
    ]
    for comp in present:
        cols.append(Col("components." + comp, "col.component." + comp, "gib"))
    cols += [
        Col("peak_allocated_bytes", "col.peak_allocated", "gib"),
        Col("device_total_bytes", "col.device_total", "gib"),
    ]
    return table_node(rows, cols, lang, "memory_components", "caption.memory_components")


# ---------------------------------------------------------------- b. memory vs sequence and batch


def memory_seq_batch_chart(
    lang: str,
    model: str,
    method: str,
    seq_lens: list[int],
    batches: list[int],
    gpu_ids: list[str],
    **setup,
) -> str:
    """Total memory on the GPU against the sequence length (a line per micro-batch) and
    against the micro-batch (a line per length), with the cards' memory as horizontal lines;
    below, the grid of figures and the cards' memory."""
    from calc import gpus

    grid: dict[tuple[int, int], tuple[dict, float]] = {}
    for seq in seq_lens:
        for batch in batches:
            req = {
                "model": model,
                "method": method,
                **setup,
                "seq_len": seq,
                "micro_batch_size": batch,
            }
            grid[(seq, batch)] = (req, calc.estimate(req)["device_total_bytes"])
    listing = {g["id"]: g for g in gpus.gpus_listing()["gpus"]}
    cards = [(g, listing[g]["name"], listing[g]["memory_bytes"]) for g in gpu_ids]
    request = {"model": model, "method": method, **setup}
    method_text = labels.option("method", method, lang)
    name = model_name(model)
    by_seq = _line_panel(
        lang,
        "memory_vs_seq",
        t("seq.title_seq", lang, model=name, method=method_text),
        xs=seq_lens,
        series=batches,
        value=lambda x, s: grid[(x, s)],
        series_label=lambda s: t("seq.legend_batch", lang, n=format_number(s, 0, lang)),
        series_word=t("seq.series_batch", lang),
        x_label=t("axis.seq_len", lang),
        cards=cards,
        request=request,
        x_key="seq_len",
        s_key="micro_batch_size",
    )
    by_batch = _line_panel(
        lang,
        "memory_vs_batch",
        t("seq.title_batch", lang, model=name, method=method_text),
        xs=batches,
        series=seq_lens,
        value=lambda x, s: grid[(s, x)],
        series_label=lambda s: t("seq.legend_seq", lang, n=format_number(s, 0, lang)),
        series_word=t("seq.series_seq", lang),
        x_label=t("axis.micro_batch", lang),
        cards=cards,
        request=request,
        x_key="micro_batch_size",
        s_key="seq_len",
    )
    rows = []
    for seq in seq_lens:
        row = {"seq_len": seq, SOURCE: {"command": "request", "request": {"seq_len": seq}}}
        for batch in batches:
            req, value = grid[(seq, batch)]
            row[f"b{batch}"] = value
            row[CELL_SOURCE + f"b{batch}"] = {"command": "estimate", "request": req}
        rows.append(row)
    cols = [Col("seq_len", "col.seq_len", "int", check="request.seq_len", row_header=True)]
    cols += [Col(f"b{b}", f"col.batch|{b}", "gib", check="device_total_bytes") for b in batches]
    grid_table = table_node(
        rows, cols, lang, "memory_seq_batch_chart", "caption.memory_seq_batch_chart"
    )
    card_rows = [{"name": n, "memory": m, SOURCE: {"command": "gpu", "id": g}} for g, n, m in cards]
    card_table = table_node(
        card_rows,
        [
            Col("name", "col.gpu", "text", row_header=True),
            Col("memory", "col.gpu_memory", "gib", check="memory_bytes"),
        ],
        lang,
        "chart_capacities",
        "caption.chart_capacities",
    )
    return _wrap("memory_seq_batch", [*by_seq, *by_batch, _details(lang, [grid_table, card_table])])


def _line_panel(
    lang,
    name,
    title,
    xs,
    series,
    value,
    series_label,
    series_word,
    x_label,
    cards,
    request,
    x_key,
    s_key,
) -> tuple[list, list]:
    """A panel of lines and its legend."""
    left, right, top, bottom = 40.0, 12.0, 22.0, 36.0
    plot_h = 240.0
    height = top + plot_h + bottom
    plot_w = WIDTH - left - right
    values = [value(x, s)[1] for x in xs for s in series]
    top_value = max(values + [m for _, _, m in cards]) / GIB
    ticks = nice_ticks(top_value * 1.04, 5)
    lx = [math.log2(x) for x in xs]  # the lengths and batches double: log scale spaces them evenly
    span = (lx[-1] - lx[0]) or 1.0

    def y_of(gib: float) -> float:
        return top + plot_h - gib / ticks[-1] * plot_h

    def x_of(x: float) -> float:
        return left + 6 + (math.log2(x) - lx[0]) / span * (plot_w - 12)

    body = []
    for tick in ticks:
        y = y_of(tick)
        body += _y_gridline(y, left, right, _tick_text(tick, lang))
    body.append(
        el(
            "text",
            {
                "class": "calc-axis-label",
                "x": svg_number(4),
                "y": svg_number(top - 10),
                "aria-hidden": "true",
            },
            t("axis.gib", lang),
        )
    )
    # the cards' memory: dashed lines behind the data; their names are drawn last, on top
    capacity = []
    for gpu_id, card, memory in sorted(cards, key=lambda c: c[2]):
        y = y_of(memory / GIB)
        capacity.append((gpu_id, f"{card} · {format_kind(memory, 'gib', lang)} GiB", y))
        body.append(
            el(
                "g",
                {
                    "class": "calc-capacity-line",
                    "data-series": "capacity",
                    "data-category": gpu_id,
                    "data-y": raw_number(memory),
                    "data-source": source_json({"command": "gpu", "id": gpu_id}),
                },
                el(
                    "line",
                    {
                        "x1": svg_number(left),
                        "x2": svg_number(WIDTH - right),
                        "y1": svg_number(y),
                        "y2": svg_number(y),
                    },
                ),
            )
        )
    layout = Layout(Box(left, top - FONT, WIDTH - right, top + plot_h))
    layout.add_box(Box(0, 0, left + 30, top - 6))  # the unit above the axis
    for _, _, y in capacity:
        layout.add_path([(left, y), (WIDTH - right, y)])
    items = []
    for i, s in enumerate(series):
        css = _series_class(i)
        points = [(x, value(x, s)) for x in xs]
        path = " ".join(
            f"{'M' if j == 0 else 'L'}{svg_number(x_of(x))},{svg_number(y_of(v / GIB))}"
            for j, (x, (_, v)) in enumerate(points)
        )
        marks = [el("path", {"class": "calc-line " + css, "d": path})]
        layout.add_path([(x_of(x), y_of(v / GIB)) for x, (_, v) in points])
        for x, (_, v) in points:
            layout.add_box(circle_box(x_of(x), y_of(v / GIB), POINT_R + 1))
            marks.append(
                el(
                    "circle",
                    {
                        "class": "calc-point " + css,
                        "cx": svg_number(x_of(x)),
                        "cy": svg_number(y_of(v / GIB)),
                        "r": svg_number(POINT_R),
                        "data-series": str(s),
                        "data-x": str(x),
                        "data-y": raw_number(v),
                    },
                    el(
                        "title",
                        {},
                        f"{series_label(s)}, {x_key_text(x_key, x, lang)}: "
                        f"{format_kind(v, 'gib', lang)} GiB",
                    ),
                )
            )
        body.append(
            el("g", {"data-series": str(s), "data-x-key": x_key, "data-series-key": s_key}, *marks)
        )
        items.append(
            t(
                "seq.item",
                lang,
                series=series_word,
                s=format_number(s, 0, lang),
                points=", ".join(
                    t("seq.point", lang, x=format_number(x, 0, lang), y=format_kind(v, "gib", lang))
                    for x, (_, v) in points
                ),
            )
        )
    body.append(_capacity_labels(layout, capacity, left, WIDTH - right))
    axis_y = top + plot_h
    positions = [x_of(x) for x in xs]
    body.append(_x_axis(lang, [float(x) for x in xs], left, 1.0, axis_y, x_label, positions))
    cards_text = ", ".join(f"{c} ({format_kind(m, 'gib', lang)} GiB)" for _, c, m in cards)
    desc = t("seq.desc", lang, series=series_word, cards=cards_text, items="; ".join(items))
    chart_id = _chart_id(name, [request, xs, series])
    legend = _legend(
        [(_series_class(i), series_label(s)) for i, s in enumerate(series)]
        + [("calc-capacity", t("capacity", lang))]
    )
    svg = _svg(
        chart_id,
        name,
        height,
        title,
        desc,
        body,
        {"data-source": source_json({"command": "estimate", "request": request})},
    )
    return el("figure", {"class": "calc-chart-panel"}, el("figcaption", {}, title), svg), legend


def _capacity_labels(
    layout: Layout, capacity: list[tuple[str, str, float]], x_min: float, x_max: float
) -> list:
    """Each card's name and memory just above its dashed line (or just below it), at the
    first place along the line where it touches no data line, point or other name. The
    names that fit beside their line go first; a name whose line is crowded then goes to the
    free place nearest its line, joined to it by a thin leader that crosses no other name."""
    size = CAPACITY_FONT
    h = (ASCENT + DESCENT) * size
    placed: dict[str, tuple[Box, float | None]] = {}

    def xs_for(w: float) -> list[float]:
        xs = [x_min + 4, x_max - 4 - w]
        step = x_min + 10
        while step < x_max - 4 - w:
            xs.append(step)
            step += 6
        return xs

    for gpu_id, text, y in capacity:
        w = text_width(text, size)
        beside = [Box(x, y0, x + w, y0 + h) for y0 in (y - 2.5 - h, y + 2.5) for x in xs_for(w)]
        box = layout.place(beside)
        if box is not None:
            placed[gpu_id] = (box, None)
    for gpu_id, text, y in capacity:
        if gpu_id in placed:
            continue
        w = text_width(text, size)
        rows = []
        r = layout.bounds.y0
        while r + h <= layout.bounds.y1:
            rows.append(r)
            r += 2.0
        rows.sort(key=lambda r: min(abs(r - y), abs(r + h - y)))
        found = None
        for r in rows:
            for x in sorted(xs_for(w)):
                box = Box(x, r, x + w, r + h)
                if not layout.free(box):
                    continue
                edge = box.y1 if box.y1 < y else box.y0
                for lx in (box.x0 + 3, box.x1 - 3, (box.x0 + box.x1) / 2):
                    if not any(o.crosses((lx, edge), (lx, y)) for o in layout.boxes):
                        found = (box, lx)
                        break
                if found:
                    break
            if found:
                break
        if found is None:
            raise ValueError(f"no room on the chart for the name of {gpu_id}")
        box, lx = found
        layout.add_box(box)
        layout.add_path([(lx, box.y1 if box.y1 < y else box.y0), (lx, y)])
        placed[gpu_id] = found
    texts = []
    for gpu_id, text, y in capacity:
        box, lx = placed[gpu_id]
        if lx is not None:
            texts.append(
                el(
                    "line",
                    {
                        "class": "calc-capacity-leader",
                        "x1": svg_number(lx),
                        "x2": svg_number(lx),
                        "y1": svg_number(box.y1 if box.y1 < y else box.y0),
                        "y2": svg_number(y),
                    },
                )
            )
        texts.append(
            el(
                "text",
                {
                    "class": "calc-capacity-label",
                    "data-category": gpu_id,
                    "x": svg_number(box.x0),
                    "y": svg_number(box.y0 + ASCENT * size),
                    "font-size": svg_number(size),
                },
                text,
            )
        )
    return el("g", {"class": "calc-capacity-labels", "aria-hidden": "true"}, *texts)


def x_key_text(key: str, x: int, lang: str) -> str:
    word = t("axis.seq_len", lang) if key == "seq_len" else t("axis.micro_batch", lang)
    return f"{word.split(' (')[0].lower()} {format_number(x, 0, lang)}"


# ---------------------------------------------------------------- c. time against cost


def priced_configs(plan: dict) -> list[tuple[int, dict]]:
    """(index, config) of the plan's configurations priced at the request's own kind of
    provider and capacity (no fallback price, no missing price)."""
    return [
        (i, c)
        for i, c in enumerate(plan["recommendations"]["configs"])
        if c["cost_usd"] is not None
        and not c["price_fallback"]
        and not any(w.startswith("price_") for w in c["warnings"])
    ]


def time_cost_points(plan: dict) -> tuple[list[tuple[int, dict]], int, int]:
    """The plotted configurations: per card its cheapest one (then the faster), plus the
    fastest of all; and the indices of the cheapest and the fastest among them."""
    priced = priced_configs(plan)
    if not priced:
        raise ValueError("no priced configuration fits: nothing to chart")
    best: dict[str, tuple[int, dict]] = {}
    for i, c in priced:
        key = (c["cost_usd"], c["time_hours"], c["id"])
        if c["gpu"] not in best or key < (
            best[c["gpu"]][1]["cost_usd"],
            best[c["gpu"]][1]["time_hours"],
            best[c["gpu"]][1]["id"],
        ):
            best[c["gpu"]] = (i, c)
    fastest = min(priced, key=lambda ic: (ic[1]["time_hours"], ic[1]["cost_usd"], ic[1]["id"]))
    points = sorted(
        {i: (i, c) for i, c in [*best.values(), fastest]}.values(),
        key=lambda ic: (ic[1]["cost_usd"], ic[1]["time_hours"]),
    )
    cheapest = min(points, key=lambda ic: (ic[1]["cost_usd"], ic[1]["time_hours"], ic[1]["id"]))[0]
    return points, cheapest, fastest[0]


def _roles(index: int, cheapest: int, fastest: int) -> list[str]:
    return [w for w, i in (("cheapest", cheapest), ("fastest", fastest)) if i == index]


def _time_cost_marks(
    lang: str,
    points: list[tuple[int, dict]],
    cheapest: int,
    fastest: int,
    x_of,
    y_of,
    left: float,
    top: float,
    plot_w: float,
    plot_h: float,
) -> list:
    """The points, each numbered (the key below the chart names the number), and the
    cheapest and the fastest named in words; every word placed where it touches no point
    and no other word, joined to its point by a thin line when it had to move away."""
    layout = Layout(Box(left + 1, top, left + plot_w, top + plot_h - 1))
    dots, words, leaders = [], [], []
    placed = []
    for n, (index, c) in enumerate(points, start=1):
        roles = _roles(index, cheapest, fastest)
        role = " ".join(roles) or "other"
        x, y = x_of(c["time_hours"]), y_of(c["cost_usd"])
        r = 6.0 if roles else 4.0
        layout.add_box(circle_box(x, y, r + 1))
        name = config_text(c, lang)
        tip = (
            f"{n}. {name}: {format_kind(c['time_hours'], 'hours', lang)} h, "
            f"{format_kind(c['cost_usd'], 'usd', lang)} USD"
        )
        dots.append(
            el(
                "circle",
                {
                    "class": f"calc-dot calc-dot-{(roles or ['other'])[0]}",
                    "cx": svg_number(x),
                    "cy": svg_number(y),
                    "r": svg_number(r),
                    "data-series": c["id"],
                    "data-role": role,
                    "data-index": str(index),
                    "data-point": str(n),
                    "data-x": raw_number(c["time_hours"]),
                    "data-y": raw_number(c["cost_usd"]),
                },
                el("title", {}, tip),
            )
        )
        placed.append((n, index, x, y, r, roles, name))
    # the named ones first (the longer words need the room), then the numbers
    size, line = DOT_LABEL_FONT, DOT_LABEL_FONT + 2
    for n, _index, x, y, r, roles, name in placed:
        for word in roles:
            head = t("cost." + word, lang) + ":"
            w = max(text_width(head, size, bold=True), text_width(name, size, bold=True))
            h = ASCENT * size + line + DESCENT * size
            box = layout.place(around(x, y, w, h, r + 3, layout.bounds))
            if box is None:
                # a long configuration name finds no free room: its number instead (the key
                # below the chart names it)
                name = str(n)
                w = max(text_width(head, size, bold=True), text_width(name, size, bold=True))
                box = layout.place(around(x, y, w, h, r + 3, layout.bounds))
            if box is None:
                raise ValueError(f"no room on the time-cost chart for {word} {name}")
            # left of its point, the words end at the box's right edge: they hug the point
            # whatever the face's real width
            left_of = box.x1 <= x
            tx = svg_number(box.x1 if left_of else box.x0)
            words.append(
                el(
                    "text",
                    {
                        "class": "calc-dot-label",
                        "text-anchor": "end" if left_of else "start",
                        "data-label": word,
                        "data-point": str(n),
                        "font-size": svg_number(size),
                    },
                    el("tspan", {"x": tx, "y": svg_number(box.y0 + ASCENT * size)}, head),
                    el("tspan", {"x": tx, "y": svg_number(box.y0 + ASCENT * size + line)}, name),
                )
            )
            leaders.append(_leader(box, x, y, r, 6.0))
    size = POINT_LABEL_FONT
    for n, _index, x, y, r, _roles_of, name in placed:
        text = str(n)
        w, h = text_width(text, size), (ASCENT + DESCENT) * size
        box = layout.place(around(x, y, w, h, r + 1.5, layout.bounds))
        if box is None:
            raise ValueError(f"no room on the time-cost chart for point {n} ({name})")
        words.append(
            el(
                "text",
                {
                    "class": "calc-point-label",
                    "data-point": str(n),
                    "text-anchor": "middle",
                    "x": svg_number((box.x0 + box.x1) / 2),
                    "y": svg_number(box.y0 + ASCENT * size),
                    "font-size": svg_number(size),
                },
                text,
            )
        )
        leaders.append(_leader(box, x, y, r, 4.0))
    # the leaders under the points, the highlighted points over the others, words on top
    dots.sort(key=lambda d: d[1]["data-role"] != "other")
    return [*(ld for ld in leaders if ld), *dots, *words]


def _leader(box: Box, x: float, y: float, r: float, near: float) -> list | None:
    """A thin line from a point's edge to its label, when the label sits away from it."""
    ex, ey = nearest_edge(box, x, y)
    d = math.hypot(ex - x, ey - y)
    if d <= r + near:
        return None
    fx, fy = x + (ex - x) * r / d, y + (ey - y) * r / d
    return el(
        "line",
        {
            "class": "calc-leader",
            "x1": svg_number(fx),
            "y1": svg_number(fy),
            "x2": svg_number(ex),
            "y2": svg_number(ey),
        },
    )


def _time_cost_key(lang: str, points: list[tuple[int, dict]], cheapest: int, fastest: int):
    """The numbered points' names, in the chart's numbering, beside the chart."""
    items = []
    for n, (index, c) in enumerate(points, start=1):
        roles = [t("cost." + w, lang) for w in _roles(index, cheapest, fastest)]
        items.append(
            el(
                "li",
                {"data-point": str(n), "data-config": c["id"]},
                config_text(c, lang) + (f" ({' · '.join(roles)})" if roles else ""),
            )
        )
    return el("ol", {"class": "calc-chart-key", "aria-label": t("cost.key", lang)}, *items)


def time_cost_chart(lang: str, model: str, method: str, **setup) -> str:
    """Time against cost of every card for one job (log scales), the cheapest and the
    fastest configuration marked and named; the figures in the table below."""
    request = {"model": model, "method": method, **setup}
    request.setdefault("gpu", REFERENCE_GPU)
    plan = calc.plan_setup(request)
    points, cheapest, fastest = time_cost_points(plan)
    source = {"command": "plan", "request": request}
    left, right, top, bottom = 44.0, 12.0, 24.0, 36.0
    plot_h = 250.0
    plot_w = WIDTH - left - right
    height = top + plot_h + bottom
    times = [c["time_hours"] for _, c in points]
    costs = [c["cost_usd"] for _, c in points]
    t_lo, t_hi = min(times) / 1.3, max(times) * 1.3
    c_lo, c_hi = min(costs) / 1.25, max(costs) * 1.25

    def x_of(hours: float) -> float:
        return left + math.log(hours / t_lo) / math.log(t_hi / t_lo) * plot_w

    def y_of(usd: float) -> float:
        return top + plot_h - math.log(usd / c_lo) / math.log(c_hi / c_lo) * plot_h

    body = []
    for tick in log_ticks(c_lo, c_hi):
        y = y_of(tick)
        body += _y_gridline(y, left, right, _tick_text(tick, lang))
    x_ticks = log_ticks(t_lo, t_hi)
    for tick in x_ticks:
        body.append(_x_gridline(x_of(tick), top, top + plot_h))
    body.append(
        el(
            "text",
            {
                "class": "calc-axis-label",
                "x": svg_number(4),
                "y": svg_number(top - 10),
                "aria-hidden": "true",
            },
            t("axis.usd", lang),
        )
    )
    body.append(
        _x_axis(
            lang,
            x_ticks,
            left,
            1.0,
            top + plot_h,
            t("axis.hours", lang),
            [x_of(v) for v in x_ticks],
        )
    )
    body += _time_cost_marks(lang, points, cheapest, fastest, x_of, y_of, left, top, plot_w, plot_h)
    cheap_c = plan["recommendations"]["configs"][cheapest]
    fast_c = plan["recommendations"]["configs"][fastest]
    title = t(
        "cost.title", lang, model=model_name(model), method=labels.option("method", method, lang)
    )
    desc = t(
        "cost.desc",
        lang,
        cheapest=config_text(cheap_c, lang),
        cheap_h=format_kind(cheap_c["time_hours"], "hours", lang),
        cheap_usd=format_kind(cheap_c["cost_usd"], "usd", lang),
        fastest=config_text(fast_c, lang),
        fast_h=format_kind(fast_c["time_hours"], "hours", lang),
        fast_usd=format_kind(fast_c["cost_usd"], "usd", lang),
    )
    chart_id = _chart_id("time_cost", request)
    svg = _svg(
        chart_id, "time_cost", height, title, desc, body, {"data-source": source_json(source)}
    )
    legend = _legend(
        [
            ("calc-dot-cheapest", t("cost.cheapest", lang)),
            ("calc-dot-fastest", t("cost.fastest", lang)),
            ("calc-dot-other", t("cost.other", lang)),
        ]
    )
    rows = []
    for index, c in points:
        role = _roles(index, cheapest, fastest)
        rows.append(
            {
                "config": {
                    "id": c["id"],
                    "text": config_text(c, lang),
                    "attrs": {"ref-kind": "config"},
                },
                "field_id": f"recommendations.configs.{index}.id",
                "time": c["time_hours"],
                "cost": c["cost_usd"],
                "per_hour": c["per_hour_usd"],
                "time_check": f"recommendations.configs.{index}.time_hours",
                "cost_check": f"recommendations.configs.{index}.cost_usd",
                "hour_check": f"recommendations.configs.{index}.per_hour_usd",
                "highlight": " · ".join(t("cost." + w, lang) for w in role),
                SOURCE: source,
            }
        )
    cols = [
        Col("config", "col.config", "ref", check="@field_id", row_header=True),
        Col("time", "col.time_hours", "hours", check="@time_check"),
        Col("cost", "col.cost_total", "usd", check="@cost_check"),
        Col("per_hour", "col.usd_per_hour_all", "usd", check="@hour_check"),
        Col("highlight", "col.highlight", "text"),
    ]
    table = table_node(rows, cols, lang, "time_cost", "caption.time_cost")
    figure = el("figure", {"class": "calc-chart-panel"}, el("figcaption", {}, title), svg)
    key = _time_cost_key(lang, points, cheapest, fastest)
    return _wrap("time_cost", [figure, key, legend, _details(lang, [table])])


MACROS = ("memory_components_chart", "memory_seq_batch_chart", "time_cost_chart")


def register(env) -> None:
    bind_all(env, MACROS, globals())
