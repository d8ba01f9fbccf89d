"""The one table renderer of the site: a pandas DataFrame in, an HTML table out.

Every number cell is machine-checkable: it carries the raw calc value
(``data-value``), how it is shown (``data-kind``, see ``calc.numfmt.KINDS``) and
where it comes from (``data-field``: a path into the response of the request
in the ``data-source`` JSON of its row, or of the cell itself in pivoted
tables). The browser tests recompute each source in CPython and compare.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass

import pandas as pd

from . import labels
from calc.numfmt import KINDS, format_kind

SOURCE = "_source"          # DataFrame column holding a row's source
CELL_SOURCE = "_source:"    # prefix of columns holding per-cell sources


@dataclass(frozen=True)
class Col:
    """One column: ``field`` is the DataFrame column, ``header`` a label key,
    ``kind`` "text", "code" (a value of the closed set ``options``, named through the
    message catalogue; ``options`` defaults to ``field`` less a ``req.`` prefix), "ref" (a calc id shown
    by name, a dict ``{"id", "text", "attrs"}``), "html" (markup built by a macro) or a
    numeric kind;
    ``check`` is the path the tests resolve in the source's response (defaults
    to ``field``; ``"@column"`` reads it per row from that column); ``row_header`` marks the cells that name the row."""

    field: str
    header: str
    kind: str = "text"
    check: str | None = None
    row_header: bool = False
    options: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS and self.kind not in ("text", "code", "ref", "html"):
            raise ValueError(f"unknown column kind {self.kind!r}")


def _attr(value: object) -> str:
    return html.escape(str(value), quote=True)


def _source_json(source: object) -> str:
    return json.dumps(source, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _cell(col: Col, value: object, source: object, lang: str, check: str) -> str:
    tag = "th" if col.row_header else "td"
    scope = ' scope="row"' if col.row_header else ""
    if col.kind == "text":
        return f"<{tag}{scope}>{html.escape(str(value))}</{tag}>"
    if col.kind == "code":
        field = col.options or col.field.removeprefix("req.")
        return f"<{tag}{scope}>{html.escape(labels.option(field, str(value), lang))}</{tag}>"
    if col.kind == "html":  # markup a macro built (its numbers carry their own data-*)
        return f"<{tag}{scope}>{value}</{tag}>"
    if col.kind == "ref":  # a calc id shown by name: {"id", "text", "attrs"}
        attrs = [f'data-ref="{_attr(value["id"] or "")}"', f'data-field="{_attr(check)}"']
        attrs += [f"data-{k}='{_attr(v)}'" for k, v in value.get("attrs", {}).items()]
        return f'<{tag}{scope} {" ".join(attrs)}>{html.escape(value["text"])}</{tag}>'
    if value is None or (isinstance(value, float) and value != value):
        raise ValueError(f"column {col.field!r}: missing number")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"column {col.field!r}: not a number: {value!r}")
    attrs = [f'data-value="{_attr(repr(value) if isinstance(value, float) else value)}"',
             f'data-kind="{col.kind}"', f'data-field="{_attr(check)}"']
    if source is not None:
        attrs.append(f"data-source='{_attr(_source_json(source))}'")
    text = format_kind(value, col.kind, lang)
    return f'<{tag}{scope} {" ".join(attrs)}>{text}</{tag}>'


def render(frame: pd.DataFrame, cols: list[Col], lang: str, name: str, caption: str) -> str:
    """HTML for ``frame`` (one line per row, no blank lines, so Markdown keeps it as
    a raw block). ``caption`` is a label key; it names the scrollable region too."""
    missing = [c.field for c in cols if c.field not in frame.columns]
    if missing:
        raise KeyError(f"table {name!r}: no column {missing}")
    title = labels.text(caption, lang)
    head = "".join(f'<th scope="col">{html.escape(labels.text(c.header, lang))}</th>'
                   for c in cols)
    lines = [f'<div class="calc-table" role="region" tabindex="0" '
             f'aria-label="{_attr(title)}" style="overflow-x:auto;max-width:100%">',
             f'<table class="calc-table__table" data-table="{_attr(name)}" data-lang="{lang}">',
             f"<caption>{html.escape(title)}</caption>",
             f"<thead><tr>{head}</tr></thead>", "<tbody>"]
    for _, row in frame.iterrows():
        row_source = row[SOURCE] if SOURCE in frame.columns else None
        cells = []
        for col in cols:
            own = CELL_SOURCE + col.field
            cell_source = row[own] if own in frame.columns else None
            # a cell's own source is written on the cell; the row's once on <tr>
            check = col.check or col.field
            if check.startswith("@"):  # the path differs per row: read it from that column
                check = row[check[1:]]
            cells.append(_cell(col, row[col.field], cell_source, lang, check))
        tr_attr = (f" data-source='{_attr(_source_json(row_source))}'"
                   if row_source is not None else "")
        lines.append(f"<tr{tr_attr}>{''.join(cells)}</tr>")
    lines += ["</tbody>", "</table>", "</div>"]
    return "\n".join(lines)
