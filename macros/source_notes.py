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

import pandas as pd

from . import labels
from .guides import _gpu_frame, bind_all, gpu_sources
from .tables import SOURCE, Col, render

# This module's strings (until the message catalogue of issue 21 takes them).
TEXT = {
    "caption.price_sources_raw": {"es": "Fuentes de los precios, tal como se registraron (en inglés)",
                              "en": "Sources of the prices, as recorded"},
    "caption.gpu_sources_raw": {"es": "Fuentes del catálogo de GPU, tal como se registraron "
                                      "(en inglés)",
                                "en": "Sources of the GPU catalogue, as recorded"},
    "col.price_note": {"es": "Cómo se eligió la cifra", "en": "How the figure was chosen"},
}
labels._TEXT.update(TEXT)


def _raw_block(html: str) -> str:
    return f'<div class="calc-raw-sources" data-raw-sources="en">\n{html}\n</div>'


def raw_gpu_sources(lang: str) -> str:
    """Every card's source as recorded (the GPU catalogue's source column)."""
    return _raw_block(gpu_sources(lang).replace(
        labels.text("caption.gpu_sources", lang), labels.text("caption.gpu_sources_raw", lang)))


def raw_price_sources(lang: str) -> str:
    """Every dated price row's source and note as recorded."""
    rows = []
    for _, gpu in _gpu_frame(None).iterrows():
        for i, price in enumerate(gpu["prices"]):
            rows.append({"name": gpu["name"], "tier": price["tier"],
                         "capacity": "capacity." + ("interruptible" if price["interruptible"]
                                                    else "on_demand"),
                         "usd": price["usd"], "source": price["source"],
                         "note": price.get("note") or "", "as_of": price["as_of"],
                         SOURCE: {"command": "gpu", "id": gpu["id"]},
                         "check": f"prices.{i}.usd"})
    frame = pd.DataFrame(rows)
    cols = [Col("name", "col.gpu", "text", row_header=True),
            Col("tier", "col.tier", "code"), Col("capacity", "col.capacity", "code"),
            Col("usd", "col.usd_per_hour", "usd", check="@check"),
            Col("as_of", "col.as_of", "text"), Col("source", "col.source", "text"),
            Col("note", "col.price_note", "text")]
    return _raw_block(render(frame, cols, lang, "price_sources", "caption.price_sources_raw"))


def english_notes() -> list[str]:
    """Every source and note string of the GPU and price data (the tests look for them)."""
    from calc import gpus

    out = []
    for gpu in gpus.gpus_listing()["gpus"]:
        out.append(gpu["source"])
        for price in gpu["prices"]:
            out += [price["source"], price.get("note") or ""]
    return [s for s in out if s]


MACROS = ("raw_gpu_sources", "raw_price_sources")


def register(env) -> None:
    bind_all(env, MACROS, globals())
