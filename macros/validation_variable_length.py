"""Methodology page: published reserved peaks of runs whose samples vary in length (padded to
the longest of each batch), against calc's allocator replay, at first contact
(``accuracy/variable_length.py``, ``validation/variable_length_peaks.csv``). The figures are
computed, never typed; the words are the catalogue's (``validation.variable_length``)."""

from __future__ import annotations

import functools

from calc.catalogue import catalogue
from calc.numfmt import format_number

from .site import bind_all


@functools.lru_cache(maxsize=1)
def _figures() -> dict:
    from accuracy.variable_length import figures

    return figures()


def validation_variable_length(lang: str) -> str:
    """One paragraph: rows, sources, the recorded first-contact median and p90 of the replay's
    ``|error|`` (and of the estimate's reserved figure), the commit judged at, and today's
    median and p90 with the rows read again, and the first contact of the sources added later."""
    f = _figures()
    return (
        catalogue(lang)
        .message("validation.variable_length")
        .format(
            rows=format_number(f["rows"], 0, lang),
            judged=format_number(f["judged"], 0, lang),
            sources=format_number(f["sources"], 0, lang),
            commit=", ".join(f"`{c}`" for c in f["commits"]),
            median=format_number(100 * f["median"], 1, lang),
            p90=format_number(100 * f["p90"], 1, lang),
            signed=("+" if f["signed_median"] >= 0 else "")
            + format_number(100 * f["signed_median"], 1, lang),
            estimate_median=format_number(100 * f["estimate_median"], 1, lang),
            estimate_p90=format_number(100 * f["estimate_p90"], 1, lang),
            today_median=format_number(100 * f["today_median"], 1, lang),
            today_p90=format_number(100 * f["today_p90"], 1, lang),
            later_rows=format_number(f["later_rows"], 0, lang),
            later_sources=format_number(f["later_sources"], 0, lang),
            later_median=format_number(100 * f["later_median"], 1, lang),
            later_p90=format_number(100 * f["later_p90"], 1, lang),
        )
    )


MACROS = ("validation_variable_length",)


def register(env) -> None:
    bind_all(env, MACROS, globals())
