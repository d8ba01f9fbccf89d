"""Numbers as each page language writes them, and back: the site's one number format.

The guides' tables (``macros/``, at build time), the calculator's results
(:mod:`calc_view.render`, at build time and in the browser) and the CLI's tables
(:mod:`calc.cli.table`) all format with :func:`format_number`. The page's JavaScript
formats only the bounds quoted in error messages, in the shortest form
(:func:`format_shortest`, copied by ``docs/assets/calculator/format.js``); ``tests/js/``
checks the copy on a table of numbers this module writes (``tests/js/numfmt_cases.json``).
:data:`NUMBER_RE` is a number as a reader types it, the same pattern for the CLI's flags and
the calculator's form (``docs/assets/calculator/form-state.js``).

Decisions fixed for the whole site:

- Spanish: decimal comma; integer part grouped in threes with a narrow
  no-break space (U+202F) only from 10 000 up (RAE/BIPM usage: ``1234,5`` but
  ``12 345,6``).
- English: decimal point, comma grouping from 1,000 up (``12,345.6``).

``parse_number`` is strict: it accepts only text that ``format_number`` would
write, so a test reading the page cannot be fooled by a wrong format.
"""

from __future__ import annotations

import re

from .languages import LANGS

NNBSP = "\u202f"

# a number as typed, once the page's decimal comma and digit separators are taken out; ASCII
# digits only, as JavaScript's \d
NUMBER_RE = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", re.ASCII)

_EN_RE = re.compile(r"-?\d{1,3}(?:,\d{3})*(?:\.\d+)?")
_ES_RE = re.compile(r"-?\d+(?:\u202f\d{3})*(?:,\d+)?")


def _check_lang(lang: str) -> None:
    if lang not in LANGS:
        raise ValueError(f"unknown language {lang!r}")


def _written(digits: str, frac: str, negative: bool, lang: str) -> str:
    """An integer part (plain digits), a fractional part and a sign as ``lang`` writes them."""
    if lang == "es":
        whole = f"{int(digits):,}".replace(",", NNBSP) if len(digits) >= 5 else digits
        point = ","
    else:
        whole, point = f"{int(digits):,}", "."
    return ("-" if negative else "") + whole + (point + frac if frac else "")


def format_number(value: float, decimals: int, lang: str) -> str:
    """``value`` rounded to ``decimals`` places (Python's ``format``: round half to
    even on the binary value) and written in ``lang``."""
    _check_lang(lang)
    text = f"{abs(value):.{decimals}f}"
    digits, _, frac = text.partition(".")
    negative = value < 0 and float(text) != 0.0  # no "-0.0"
    return _written(digits, frac, negative, lang)


def format_shortest(value: float, lang: str) -> str:
    """``value`` to twelve significant figures (half away from zero), written with no more
    digits than it needs (``0.1 + 0.2`` -> ``0.3``): the form of the bounds an error message
    quotes on the calculator page. Finite values from 1e-6 up to 1e21 in magnitude, or 0:
    outside those JavaScript switches to exponents."""
    from decimal import ROUND_HALF_UP, Decimal  # here: the page's figures never need it

    _check_lang(lang)
    if not -1e21 < value < 1e21:  # infinities and NaN too
        raise ValueError(f"outside the range written without an exponent: {value!r}")
    exact = Decimal(value)
    if exact:
        exact = exact.quantize(Decimal(1).scaleb(exact.adjusted() - 11), ROUND_HALF_UP)
    shortest = float(exact)
    if shortest and not 1e-6 <= abs(shortest) < 1e21:
        raise ValueError(f"outside the range written without an exponent: {value!r}")
    sign, digit_tuple, exponent = Decimal(repr(abs(shortest))).normalize().as_tuple()
    digits = "".join(map(str, digit_tuple))
    assert isinstance(exponent, int), value  # finite
    if exponent >= 0:
        whole, frac = digits + "0" * exponent, ""
    else:
        point = len(digits) + exponent
        whole = digits[:point] if point > 0 else "0"
        frac = ("0" * -point if point < 0 else "") + digits[max(point, 0) :]
    return _written(whole, frac, value < 0, lang)


def parse_number(text: str, lang: str) -> float:
    """The value of ``text`` written in ``lang``; ``ValueError`` if it is not in the
    exact form :func:`format_number` produces."""
    _check_lang(lang)
    text = text.strip()
    pattern = _ES_RE if lang == "es" else _EN_RE
    if not pattern.fullmatch(text):
        raise ValueError(f"not a {lang} number: {text!r}")
    if lang == "es":
        plain = text.replace(NNBSP, "").replace(",", ".")
    else:
        plain = text.replace(",", "")
    value = float(plain)
    decimals = len(plain.partition(".")[2])
    if format_number(value, decimals, lang) != text:
        raise ValueError(f"not written as {lang} writes numbers: {text!r}")
    return value


GIB = 2**30  # the site shows memory in GiB: 1 GiB = 2^30 bytes

# kind -> (divisor from the raw calc value to the shown value, decimals shown)
KINDS: dict[str, tuple[float, int]] = {
    "gib": (GIB, 1),  # bytes -> GiB
    "hours": (1, 1),
    "usd": (1, 2),
    "pct": (1, 1),  # already in percent
    "pct0": (1, 0),  # already in percent, whole
    "bpp": (1, 2),  # bytes per parameter
    "billions": (1e9, 2),  # parameter counts
    "millions": (1e6, 1),
    "tflops": (1, 0),
    "gbps": (1, 0),  # GB/s (10^9 bytes per second, as datasheets give it)
    "int": (1, 0),
    "factor": (1, 2),
    "fraction3": (1, 3),  # constants that need three decimals (e.g. 4.127 bits)
    "usd_approx": (1, 0),  # a cost in running text, to SIGNIFICANT["usd_approx"] figures
    "shortest": (1, 0),  # a small constant (seconds, latencies), every digit it has
}

# kind -> significant figures: the kinds shown rounded to a number of figures rather than
# of decimals (costs in prose are rounded, "about 40 $", not "38.47 $": the time model's
# held-out error is tens of percent, so more figures would claim a precision calc does not
# have).
SIGNIFICANT: dict[str, int] = {"usd_approx": 2}


def _significant(value: float, figures: int) -> tuple[float, int]:
    """``value`` rounded to ``figures`` significant figures, and the decimals that shows."""
    import math

    if not value or value != value or value in (float("inf"), float("-inf")):
        return value, 0
    decimals = figures - 1 - math.floor(math.log10(abs(value)))
    return round(value, decimals), max(0, decimals)


def format_kind(raw: float, kind: str, lang: str) -> str:
    divisor, decimals = KINDS[kind]
    if kind == "shortest":  # a constant below a hundredth: decimals would round it to 0
        return format_shortest(raw / divisor, lang)
    if kind in SIGNIFICANT:
        value, decimals = _significant(raw / divisor, SIGNIFICANT[kind])
        return format_number(value, decimals, lang)
    return format_number(raw / divisor, decimals, lang)
