"""The calculator's view: the results of ``calc`` drawn as a tree of elements, in the
site's number format, for the build-time page and for the browser's worker alike.

Standard library only (it runs in CPython at build time and in Pyodide next to ``calc``),
and no module-level state: the language and the strings are passed in, or held by a
:class:`~calc_view.session.Session`.

- :mod:`calc.numfmt` (in calc: the CLI uses it too): numbers as each page language writes them;
- :mod:`calc_view.render`: a response (estimate or plan) -> a results tree;
- :mod:`calc_view.html`: a tree -> escaped HTML (build time);
- :mod:`calc_view.session`: the worker's entry, ``Session(lang, strings).handle(...)``.
"""

from __future__ import annotations

from calc.numfmt import format_number

from .html import to_html
from .render import (
    GIB,
    Renderer,
    format_estimate,
    format_value,
    label,
    option,
    raw_value,
    render_results,
    resolve,
    translate,
)
from .session import Session, internal_error

__all__ = [
    "GIB",
    "Renderer",
    "Session",
    "format_estimate",
    "format_number",
    "format_value",
    "internal_error",
    "label",
    "option",
    "raw_value",
    "render_results",
    "resolve",
    "to_html",
    "translate",
]
