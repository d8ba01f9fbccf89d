"""The data's sources as recorded, in one place: the methodology page.

The rows of ``calc/data/gpus.csv`` and ``prices.csv`` cite their sources in English prose
("… is DERIVED: …", "low end of …", "found by text search …"). Pages other than the
methodology show only what reads the same in every language: a price's address
(``calc_view.render.citation``) and its date; the full source and the note on how each
figure was chosen are listed here, in both languages' methodology page, inside a block
marked ``data-raw-sources="en"`` (the language they are recorded in) so the tests can tell
quoted sources from the page's own prose.
"""

from __future__ import annotations

from .guides import GPU_SOURCE_COLS
from .rows import gpu_rows
from .site import bind_all
from .tables import SOURCE, Col, table_node
from calc_view.html import el, to_html

# This module's words are in the message catalogue (calc/data/messages).


def _raw_block(table: list) -> str:
    return to_html(el("div", {"class": "calc-raw-sources", "data-raw-sources": "en"}, table))


def raw_gpu_sources(lang: str) -> str:
    """Every card's source as recorded (the GPU catalogue's source column)."""
    return _raw_block(
        table_node(gpu_rows(None), GPU_SOURCE_COLS, lang, "gpu_sources", "caption.gpu_sources_raw")
    )


def raw_price_sources(lang: str) -> str:
    """Every dated price row's source and note as recorded."""
    rows = []
    for gpu in gpu_rows(None):
        for i, price in enumerate(gpu["prices"]):
            rows.append(
                {
                    "name": gpu["name"],
                    "tier": price["tier"],
                    "capacity": ("interruptible" if price["interruptible"] else "on_demand"),
                    "usd": price["usd"],
                    "source": price["source"],
                    "note": price.get("note") or "",
                    "as_of": price["as_of"],
                    SOURCE: gpu[SOURCE],
                    "check": f"prices.{i}.usd",
                }
            )
    cols = [
        Col("name", "col.gpu", "text", row_header=True),
        Col("tier", "col.tier", "code", options="price_tier"),
        Col("capacity", "col.capacity", "code"),
        Col("usd", "col.usd_per_hour", "usd", check="@check"),
        Col("as_of", "col.as_of", "text"),
        Col("source", "col.source", "text", recorded_in="en"),
        Col("note", "col.price_note", "text", recorded_in="en"),
    ]
    return _raw_block(table_node(rows, cols, lang, "price_sources", "caption.price_sources_raw"))


MACROS = ("raw_gpu_sources", "raw_price_sources")


def register(env) -> None:
    bind_all(env, MACROS, globals())
