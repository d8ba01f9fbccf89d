"""A results tree as HTML, for the build-time page (the browser builds the same tree
with ``createElement`` and ``textContent`` instead: ``docs/assets/calculator/tree.js``)."""

from __future__ import annotations

from .render import Node

_VOID = {"input", "br", "meta", "link", "img", "hr", "source", "col", "wbr", "area", "base"}


def _esc(text: str, quote: bool) -> str:
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace('"', "&quot;") if quote else text


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
