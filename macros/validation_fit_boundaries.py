"""Methodology page: calc's verdict against published fit boundaries (the largest context a
card fitted in public benchmark tables), first contact and today
(``accuracy/fit_boundaries.py``, ``validation/fit_boundaries.csv``). The figures are computed,
never typed; the words are the catalogue's (``validation.fit_boundaries``)."""

from __future__ import annotations

import functools

from calc.catalogue import catalogue
from calc.numfmt import format_number

from .site import bind_all


@functools.lru_cache(maxsize=1)
def _figures() -> dict:
    from accuracy.fit_boundaries import figures

    return figures()


def validation_fit_boundaries(lang: str) -> str:
    """One paragraph: rows, first-contact and today's agreement of the verdict, the error of
    calc's largest fitting length, the commit first contact was judged at."""
    f = _figures()
    return (
        catalogue(lang)
        .message("validation.fit_boundaries")
        .format(
            rows=format_number(f["rows"], 0, lang),
            first_contact=format_number(f["first_contact_agree"], 0, lang),
            judged=format_number(f["first_contact_rows"], 0, lang),
            commit=", ".join(f"`{c}`" for c in f["commits"]),
            agree=format_number(f["agree"], 0, lang),
            share=format_number(100 * f["agree"] / f["rows"], 0, lang),
            measured_agree=format_number(f["measured_agree"], 0, lang),
            measured_rows=format_number(f["measured_rows"], 0, lang),
            median=format_number(100 * f["median"], 0, lang),
            p90=format_number(100 * f["p90"], 0, lang),
        )
    )


MACROS = ("validation_fit_boundaries",)


def register(env) -> None:
    bind_all(env, MACROS, globals())
