"""Number formatting per page language (calc/numfmt.py): exact strings, strict parsing, and
the table the page's JavaScript copy is checked on (tests/js/numfmt_cases.json)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from calc.numfmt import (
    KINDS,
    NNBSP,
    NUMBER_RE,
    format_kind,
    format_number,
    format_shortest,
    parse_number,
)

CASES = [
    # value, decimals, es, en
    (12345.6, 1, f"12{NNBSP}345,6", "12,345.6"),
    (1234.5, 1, "1234,5", "1,234.5"),
    (9999.94, 1, "9999,9", "9,999.9"),
    (9999.96, 1, f"10{NNBSP}000,0", "10,000.0"),
    (1234567.891, 2, f"1{NNBSP}234{NNBSP}567,89", "1,234,567.89"),
    (0.5, 2, "0,50", "0.50"),
    (-1.25, 1, "-1,2", "-1.2"),  # round half to even on the binary value
    (-0.04, 1, "0,0", "0.0"),  # no negative zero
    (-12345.0, 0, f"-12{NNBSP}345", "-12,345"),
    (100, 0, "100", "100"),
]


@pytest.mark.parametrize(("value", "decimals", "es", "en"), CASES)
def test_format_exact(value, decimals, es, en):
    assert format_number(value, decimals, "es") == es
    assert format_number(value, decimals, "en") == en


@pytest.mark.parametrize(("value", "decimals", "es", "en"), CASES)
def test_parse_inverts_format(value, decimals, es, en):
    assert parse_number(es, "es") == float(es.replace(NNBSP, "").replace(",", "."))
    assert parse_number(en, "en") == float(en.replace(",", ""))


@pytest.mark.parametrize(
    ("text", "lang"),
    [
        ("1,234.5", "es"),  # English in a Spanish page
        ("1234,5", "en"),
        (f"1{NNBSP}234,5", "es"),  # four digits are not grouped in Spanish
        ("12 345,6", "es"),  # ordinary space instead of U+202F
        ("12.345,6", "es"),  # dot grouping is not the site's choice
        ("1234.5", "en"),  # missing comma grouping
        ("12,34.5", "en"),
        ("", "en"),
        ("GiB", "es"),
        ("1,2", "fr"),
    ],
)
def test_parse_rejects_wrong_format(text, lang):
    with pytest.raises(ValueError):
        parse_number(text, lang)


@pytest.mark.parametrize(
    ("raw", "kind", "es", "en"),
    [
        (108_915_654_656, "gib", "101,4", "101.4"),
        (6_738_415_616, "billions", "6,74", "6.74"),
        (6_738_415_616, "millions", "6738,4", "6,738.4"),
        (3.456, "usd", "3,46", "3.46"),
        (12.34, "pct", "12,3", "12.3"),
        (1979.0, "tflops", "1979", "1,979"),
        # a constant in seconds: every digit it has, never "0,000"
        (1.6e-05, "shortest", "0,000016", "0.000016"),
        (8.4e-06, "shortest", "0,0000084", "0.0000084"),
    ],
)
def test_format_kind(raw, kind, es, en):
    assert format_kind(raw, kind, "es") == es
    assert format_kind(raw, kind, "en") == en


@given(
    value=st.floats(min_value=-1e12, max_value=1e12, allow_nan=False),
    decimals=st.integers(min_value=0, max_value=3),
    lang=st.sampled_from(["es", "en"]),
)
def test_round_trip(value, decimals, lang):
    text = format_number(value, decimals, lang)
    assert parse_number(text, lang) == pytest.approx(float(f"{value:.{decimals}f}"), abs=0)


def test_every_kind_has_positive_divisor():
    assert all(div > 0 and dec >= 0 for div, dec in KINDS.values())


@pytest.mark.parametrize(
    ("raw", "es", "en", "shown"),
    [
        (38.47, "38", "38", 38.0),
        (391.2, "390", "390", 390.0),
        (1834.0, "1800", "1,800", 1800.0),
        (7.26, "7,3", "7.3", 7.3),
        (12_345.0, f"12{NNBSP}000", "12,000", 12_000.0),
    ],
)
def test_costs_in_prose_are_rounded_to_two_figures(raw, es, en, shown):
    """``usd_approx``: a cost in running text shows two significant figures, and
    the browser tests' parser reads back exactly that value."""
    assert format_kind(raw, "usd_approx", "es") == es
    assert format_kind(raw, "usd_approx", "en") == en
    assert parse_number(es, "es") == shown == parse_number(en, "en")


@pytest.mark.parametrize(
    ("value", "es", "en"),
    [
        (1234.5, "1234,5", "1,234.5"),
        (12345.5, f"12{NNBSP}345,5", "12,345.5"),
        (-1_000_000, f"-1{NNBSP}000{NNBSP}000", "-1,000,000"),
        (0.1 + 0.2, "0,3", "0.3"),
        (0.9, "0,9", "0.9"),
        (-0.0, "0", "0"),
        (1e-6, "0,000001", "0.000001"),
        (1e15, f"1{NNBSP}000{NNBSP}000{NNBSP}000{NNBSP}000{NNBSP}000", "1,000,000,000,000,000"),
        # twelve significant figures, a tie rounded away from zero (as JavaScript's toPrecision)
        (1_234_567_890_125, f"1{NNBSP}234{NNBSP}567{NNBSP}890{NNBSP}130", "1,234,567,890,130"),
        (-1_234_567_890_125, f"-1{NNBSP}234{NNBSP}567{NNBSP}890{NNBSP}130", "-1,234,567,890,130"),
    ],
)
def test_format_shortest(value, es, en):
    """The bounds an error message quotes: no more digits than the number needs."""
    assert format_shortest(value, "es") == es
    assert format_shortest(value, "en") == en


@pytest.mark.parametrize("value", [1e21, -1e22, 1e-7, float("inf"), float("nan")])
def test_format_shortest_refuses_what_javascript_writes_with_an_exponent(value):
    with pytest.raises(ValueError):
        format_shortest(value, "en")


@pytest.mark.parametrize(
    ("text", "number"),
    [("2.5e+10", True), (".5", True), ("1,5", False), ("\uff11\uff12", False), ("\u0661", False)],
)
def test_number_pattern_reads_ascii_digits_only(text, number):
    """A number as typed, as the calculator's form reads it: JavaScript's ``\\d`` is ASCII."""
    assert (NUMBER_RE.fullmatch(text) is not None) is number


def test_the_javascript_table_is_what_calc_writes_now():
    """tests/js/numfmt.test.mjs checks format.js, NUMBER_RE and the config import's limits
    against this file; it must be what calc gives today."""
    import numfmt_cases

    assert numfmt_cases.PATH.read_text(encoding="utf-8") == numfmt_cases.text(), (
        "tests/js/numfmt_cases.json is stale: run .venv/bin/python tests/numfmt_cases.py"
    )


def test_the_constants_page_shows_small_constants_with_their_digits():
    """The methodology's constants are written in the kind their value needs: a dispatch time of
    16 us or a latency of 8.4 us in every digit, not three decimals that round them to 0."""
    from macros.methodology import _kind_of

    assert _kind_of(1.6e-05) == "shortest"
    assert _kind_of(0.0003) == "shortest"
    assert _kind_of(4.126953125) == "fraction3"
    assert _kind_of(0.67) == "factor"
    assert _kind_of(30) == "int"
