"""Methodology tables for the config import (``calc.config_import``): which version of
each tool its keys and defaults were read from, and the parsing limits, both read from the
code when the page is built so the page cannot drift from it."""

from __future__ import annotations

import html

from calc.catalogue import catalogue
from macros.site import page_language

# format -> module; what each holds is ``import_docs.format.<format>`` in the catalogue
_FORMATS = {
    "axolotl": "calc.config_import.axolotl",
    "trl": "calc.config_import.trl",
    "llamafactory": "calc.config_import.llamafactory",
    "torchtune": "calc.config_import.torchtune",
    "deepspeed": "calc.config_import.deepspeed",
    "accelerate": "calc.config_import.accelerate",
}
# the parsing limits shown, each worded as ``import_docs.limit.<NAME>``
_LIMITS = ("MAX_BYTES", "MAX_DEPTH", "MAX_NODES")


def formats_table(lang: str) -> str:
    import importlib

    cat = catalogue(lang)
    head = [cat.message(f"import_docs.col.{c}") for c in ("format", "read_from", "holds")]
    rows = [f"| {head[0]} | {head[1]} | {head[2]} |", "|---|---|---|"]
    for fmt, module in _FORMATS.items():
        tool = importlib.import_module(module).TOOL
        what = cat.message(f"import_docs.format.{fmt}")
        rows.append(f"| `{fmt}` | {html.escape(tool)} | {html.escape(what)} |")
    return "\n".join(rows)


def limits_table(lang: str) -> str:
    from calc.config_import import loading

    cat = catalogue(lang)
    head = [cat.message(f"import_docs.col.{c}") for c in ("limit", "value", "bounds")]
    rows = [f"| {head[0]} | {head[1]} | {head[2]} |", "|---|---|---|"]
    for name in _LIMITS:
        value = getattr(loading, name)
        shown = f"{value:,}".replace(",", "\u202f" if lang == "es" else ",")
        text = cat.message(f"import_docs.limit.{name}")
        rows.append(f"| `calc.config_import.loading.{name}` | {shown} | {text} |")
    return "\n".join(rows)


def register(env) -> None:
    @env.macro
    def config_import_formats() -> str:
        """The formats the config import reads, with the tool version of each."""
        return formats_table(page_language(env))

    @env.macro
    def config_import_limits() -> str:
        """The bounds the YAML/JSON reader enforces."""
        return limits_table(page_language(env))
