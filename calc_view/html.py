"""The site's one way to write HTML and SVG: a tree of elements, serialised here.

A node is ``[tag, {attr: value}, child, ...]``; a child is a node or a string (text).
The calculator's results (:mod:`calc_view.render`), the guides' tables
(``macros/tables.py``) and charts (``macros/charts.py``) are all built as such trees. At
build time :func:`to_html` writes them; in the browser ``docs/assets/calculator/results.js``
builds the same tree with ``createElement`` and ``textContent``. Every text and attribute
is escaped here, so no caller writes markup by hand and no input can inject any.
"""

from __future__ import annotations

from typing import Any, TypeAlias

#: A node of the tree, ``[tag, {attr: value}, child, ...]`` (a child is a node or a string):
#: a list of mixed items, so its items are typed ``Any``.
Node: TypeAlias = list[Any]

SVG_NS = "http://www.w3.org/2000/svg"

_VOID = {"input", "br", "meta", "link", "img", "hr", "source", "col", "wbr", "area", "base"}


def _esc(text: str, quote: bool) -> str:
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace('"', "&quot;") if quote else text


def svg_number(x: float) -> str:
    """A coordinate or length in an SVG: two decimals at most, no trailing zeros."""
    return f"{x:.2f}".rstrip("0").rstrip(".") or "0"


def el(tag: str, attrs: dict[str, object] | None = None, *children: object) -> Node:
    """A node; attributes whose value is None are left out, True is a bare attribute
    (written ``name=""``, which HTML reads the same)."""
    kept = {
        k: ("" if v is True else v)
        for k, v in (attrs or {}).items()
        if v is not None and v is not False
    }
    return [tag, kept, *children]


def to_html(node: Node | str) -> str:
    """Serialise a tree; every text and attribute is escaped."""
    if isinstance(node, str):
        return _esc(node, False)
    tag, attrs, *children = node
    attr_text = "".join(f' {k}="{_esc(str(v), True)}"' for k, v in attrs.items())
    if tag in _VOID:
        return f"<{tag}{attr_text}>"
    if tag == "script":  # raw text: "<" is escaped so no "</script>" can end it early
        return f"<{tag}{attr_text}>" + "".join(children).replace("<", "\\u003c") + f"</{tag}>"
    return f"<{tag}{attr_text}>" + "".join(to_html(c) for c in children) + f"</{tag}>"
