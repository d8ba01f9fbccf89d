"""The one table renderer of the site: rows of calc figures in, an HTML table out.

A table is a list of rows, each a dict keyed by column (``Col.field``); the table is built
as a ``calc_view`` element tree and written by :func:`calc_view.html.to_html`, as the
calculator's results are.

Every number cell is machine-checkable: it carries the raw calc value
(``data-value``), how it is shown (``data-kind``, see ``calc.numfmt.KINDS``) and
where it comes from (``data-field``: a path into the response of the request
in the ``data-source`` JSON of its row, or of the cell itself in pivoted
tables). The browser tests recompute each source in CPython and compare. The same
attributes mark a figure inside running text (:func:`inline`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from . import labels
from calc_view.html import el, to_html
from calc.numfmt import KINDS, format_kind

SOURCE = "_source"  # row key holding a row's source
CELL_SOURCE = "_source:"  # prefix of row keys holding per-cell sources


@dataclass(frozen=True)
class Col:
    """One column: ``field`` is the row key, ``header`` a label key,
    ``kind`` "text", "code" (a value of the closed set ``options``, named through the
    message catalogue; ``options`` defaults to ``field`` less a ``req.`` prefix), "ref" (a
    calc id shown by name, a dict from :func:`ref`), "node" (an element tree a macro built,
    or a tuple of nodes and strings; its numbers carry their own data-*) or a numeric kind;
    ``check`` is the path the tests resolve in the source's response (defaults
    to ``field``; ``"@column"`` reads it per row from that column); ``row_header`` marks the
    cells that name the row; ``recorded_in`` is the language a "text" column's data is written
    in (the data's sources are quoted in English): on a page in another language its cells
    say so (``lang``), so a screen reader reads them in that language."""

    field: str
    header: str
    kind: str = "text"
    check: str | None = None
    row_header: bool = False
    options: str | None = None
    recorded_in: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS and self.kind not in ("text", "code", "ref", "node"):
            raise ValueError(f"unknown column kind {self.kind!r}")


def source_json(source: object) -> str:
    """A ``data-source`` value: the request (or lookup) a figure comes from, as compact JSON."""
    return json.dumps(source, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def raw_number(value: object) -> str:
    """A ``data-value``: the JSON spelling of a calc number."""
    return repr(value) if isinstance(value, float) else str(value)


def ref(ref_id: str | None, text: str, **attrs: str) -> dict:
    """A ``ref`` cell: a calc id (card, model, configuration) shown by name; ``attrs``
    become ``data-<key>`` attributes."""
    return {"id": ref_id, "text": text, "attrs": attrs}


def ref_node(tag: str, value: dict, check: str) -> list:
    """A ``ref`` value as element ``tag`` (a cell, or a span in running text)."""
    attrs = {"data-ref": value["id"] or "", "data-field": check}
    attrs |= {f"data-{k}": v for k, v in value.get("attrs", {}).items()}
    return el(tag, attrs, value["text"])


def inline_node(lang: str, raw: float, kind: str, field: str, source: object) -> list:
    """A figure inside running text, as checkable as a table cell."""
    return el(
        "span",
        {
            "data-value": raw_number(raw),
            "data-kind": kind,
            "data-field": field,
            "data-source": source_json(source),
        },
        format_kind(raw, kind, lang),
    )


def inline(lang: str, raw: float, kind: str, field: str, source: object) -> str:
    """:func:`inline_node` as HTML, for a macro that returns running text."""
    return to_html(inline_node(lang, raw, kind, field, source))


def resolve(field: str, response: dict, request: dict | None = None) -> float:
    """The number a ``data-field`` names: a dotted path, or ``a+b/c`` (sum over a
    divisor; a term written ``-x`` is subtracted: ``a+-b/c``), ``a*100/c`` is written
    ``pct:a/c``. Paths starting ``request.`` read the request; a component calc did not
    report is 0."""
    pct = field.startswith("pct:")
    body = field[4:] if pct else field
    num, _, den = body.partition("/")

    def get(path: str) -> float:
        if path.startswith("request."):
            return (request or {})[path[len("request.") :]]
        node: object = response
        for part in path.split("."):
            if isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
                continue
            if not isinstance(node, dict) or part not in node:
                if path.startswith("components."):
                    return 0
                raise KeyError(f"no {path!r} in the response")
            node = node[part]
        return node  # type: ignore[return-value]

    value = sum(-get(p[1:]) if p.startswith("-") else get(p) for p in num.split("+"))
    if den:
        value = value / get(den)
    return value * 100 if pct else value


class _NoRentalPrice:
    """The value of a cost cell for a card with no rental price (:func:`cost_or_unpriced`)."""

    def __repr__(self) -> str:
        return "NO_RENTAL_PRICE"


NO_RENTAL_PRICE = _NoRentalPrice()


class _NotPublished:
    """The value of a cell whose figure its source does not publish (a clock the vendor gives
    no figure for, stored as 0 in ``gpus.csv``): shown as words, not as a number."""

    def __repr__(self) -> str:
        return "NOT_PUBLISHED"


NOT_PUBLISHED = _NotPublished()


class _NoCoveredRow:
    """The value of a figure over a source's rows when calc covers none of them (every row
    recorded not covered): shown as words, not as a number."""

    def __repr__(self) -> str:
        return "NO_COVERED_ROW"


NO_COVERED_ROW = _NoCoveredRow()


def cost_or_unpriced(plan: dict, value: float) -> float | _NoRentalPrice:
    """A cost figure of a plan, or :data:`NO_RENTAL_PRICE` when its card has no rental price
    (calc's ``cost_usd.priced``): the figure would count storage alone."""
    return NO_RENTAL_PRICE if plan["cost_usd"].get("priced") is False else value


def _cell(col: Col, value: object, source: object, lang: str, check: str) -> list:
    tag = "th" if col.row_header else "td"
    attrs: dict = {"scope": "row"} if col.row_header else {}
    if value is NO_RENTAL_PRICE:
        return el(tag, attrs | {"data-priced": "false"}, labels.text("ui.no_rental_price", lang))
    if value is NOT_PUBLISHED:
        return el(tag, attrs | {"data-published": "false"}, labels.text("ui.not_published", lang))
    if value is NO_COVERED_ROW:
        return el(tag, attrs | {"data-covered": "false"}, labels.text("ui.no_covered_row", lang))
    if col.kind == "text":
        if col.recorded_in and col.recorded_in != lang and str(value):
            attrs["lang"] = col.recorded_in
        return el(tag, attrs, str(value))
    if col.kind == "code":
        field = col.options or col.field.removeprefix("req.")
        return el(tag, attrs, labels.option(field, str(value), lang))
    if col.kind == "node":
        return el(tag, attrs, *(value if isinstance(value, tuple) else (value,)))
    if col.kind == "ref":
        cell = ref_node(tag, value, check)  # type: ignore[arg-type]
        return [cell[0], attrs | cell[1], *cell[2:]]
    if value is None or (isinstance(value, float) and value != value):
        raise ValueError(f"column {col.field!r}: missing number")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"column {col.field!r}: not a number: {value!r}")
    attrs |= {"data-value": raw_number(value), "data-kind": col.kind, "data-field": check}
    if source is not None:
        attrs["data-source"] = source_json(source)
    return el(tag, attrs, format_kind(value, col.kind, lang))


def render(rows: Sequence[dict], cols: list[Col], lang: str, name: str, caption: str) -> str:
    """HTML for ``rows`` (on one line, so Markdown keeps it as a raw block). ``caption`` is
    a label key; it names the scrollable region too."""
    return to_html(table_node(rows, cols, lang, name, caption))


def table_node(rows: Sequence[dict], cols: list[Col], lang: str, name: str, caption: str) -> list:
    """The table of :func:`render` as an element tree (for a chart's data below it)."""
    missing = sorted({c.field for c in cols for row in rows if c.field not in row})
    if missing:
        raise KeyError(f"table {name!r}: no column {missing}")
    title = labels.text(caption, lang)
    head = el("tr", {}, *(el("th", {"scope": "col"}, labels.text(c.header, lang)) for c in cols))
    body = []
    for row in rows:
        cells = []
        for col in cols:
            # a cell's own source is written on the cell; the row's once on <tr>
            check = col.check or col.field
            if check.startswith("@"):  # the path differs per row: read it from that column
                check = row[check[1:]]
            cells.append(_cell(col, row[col.field], row.get(CELL_SOURCE + col.field), lang, check))
        row_source = row.get(SOURCE)
        body.append(
            el(
                "tr",
                {"data-source": None if row_source is None else source_json(row_source)},
                *cells,
            )
        )
    table = el(
        "table",
        {"class": "calc-table__table", "data-table": name, "data-lang": lang},
        el("caption", {}, title),
        el("thead", {}, head),
        el("tbody", {}, *body),
    )
    return el(
        "div",
        {
            "class": "calc-table",
            "role": "region",
            "tabindex": "0",
            "aria-label": title,
            "style": "overflow-x:auto;max-width:100%",
        },
        table,
    )
