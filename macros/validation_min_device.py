"""Methodology page: the calibrated spread of ``min_device_bytes`` (the replayed allocator's
smallest card) and the verdict judged on it (``accuracy/min_device.py``). The figures are
computed, never typed; the words are the catalogue's (``validation.min_device``)."""

from __future__ import annotations

import functools

from calc import memory
from calc.catalogue import catalogue
from calc.numfmt import format_number

from .site import bind_all


@functools.lru_cache(maxsize=1)
def _figures() -> dict:
    from accuracy.min_device import figures

    return figures()


@functools.lru_cache(maxsize=1)
def _walk() -> dict:
    from accuracy.walk_budget import summary

    return summary()


def _percent(value: float, lang: str) -> str:
    return ("+" if value > 0 else "") + format_number(100 * value, 1, lang)


def validation_min_device(lang: str) -> str:
    """One paragraph: the rows of each kind and their sources, each method's band, the
    held-out coverage, the fit boundaries the verdict on the figure agrees with, how far the
    capacity walk's budget leaves the figure above the exact threshold, and whether
    the site's verdicts judge it today (:data:`calc.memory.SIMULATED_VERDICT`)."""
    f = _figures()
    msg = catalogue(lang)
    bands = "; ".join(
        f"{msg.message('method.' + method)} {_percent(low, lang)} % / {_percent(high, lang)} %"
        for method, (low, high) in f["bands"].items()
    )
    state = "on" if memory.SIMULATED_VERDICT else "off"
    return " ".join(
        (
            msg.message("validation.min_device").format(
                rows=format_number(f["rows"], 0, lang),
                sources=format_number(f["sources"], 0, lang),
                reserved=format_number(f["by_kind"]["reserved_peak"], 0, lang),
                variable=format_number(f["by_kind"]["variable_length"], 0, lang),
                boundaries=format_number(f["by_kind"]["fit_boundary"], 0, lang),
                bands=bands,
                low_pct=format_number(f["tail"], 0, lang),
                high_pct=format_number(100 - f["tail"], 0, lang),
                coverage=format_number(100 * f["coverage_inside"] / f["coverage_rows"], 0, lang),
                agree=format_number(f["fit_boundary_agree"], 0, lang),
                judged=format_number(f["fit_boundary_rows"], 0, lang),
                held=format_number(f["fit_boundary_agree_held_out"], 0, lang),
            ),
            _walk_sentence(lang),
            msg.message("validation.min_device_verdict_" + state),
        )
    )


def _walk_sentence(lang: str) -> str:
    """The capacity walk's budget and how far it leaves the figure above the exact threshold
    (:func:`accuracy.walk_budget.summary`)."""
    w = _walk()
    return (
        catalogue(lang)
        .message("validation.min_device_walk")
        .format(
            budget=format_number(w["budget"], 0, lang),
            requests=format_number(w["requests"], 0, lang),
            exact=format_number(w["exact"], 0, lang),
            above_min=format_number(100 * w["above_min"], 1, lang),
            above_max=format_number(100 * w["above_max"], 1, lang),
            reference_budget=format_number(w["reference_budget"], 0, lang),
            reference_exact=format_number(w["reference_exact"], 0, lang),
        )
    )


MACROS = ("validation_min_device",)


def register(env) -> None:
    bind_all(env, MACROS, globals())
