"""The calibrated spread of min_device_bytes (accuracy/min_device.py) and the verdict it gives."""

from __future__ import annotations

import pytest

from accuracy import fit_boundaries as fb
from accuracy import min_device as md
from calc import calibration


@pytest.fixture(scope="module")
def rows():
    return md.rows()


def test_calc_bands_are_the_derived_bands(rows):
    assert md.bands(rows) == calibration.MIN_DEVICE_BANDS, (
        "rerun python -m benchmarks.validate_fit_boundaries --min-device, update calc.calibration"
    )


def test_every_kind_of_row_observes_the_replay(rows):
    """Reserved peaks, variable-length peaks and fit boundaries all enter, each error the
    replay's against the row's own figure."""
    kinds = {r.kind for r in rows}
    assert kinds == set(md.KINDS)
    assert len({r.source for r in rows}) >= 5
    for r in rows:
        assert r.error == pytest.approx(r.predicted_bytes / r.measured_bytes - 1, abs=1e-6)


def test_a_band_is_the_wider_of_the_method_s_and_the_pooled_one():
    def row(method, error, source="s"):
        return md.Row("r", "reserved_peak", source, method, 0, 1, error)

    few = [row("full", 0.5)] + [row("lora", e) for e in (-0.1, 0.0, 0.1, 0.2)]
    out = md.bands(few, tail=10)
    pooled = (round(-0.1 + 0.4 * 0.1, 3), round(0.2 + 0.6 * 0.3, 3))  # 10th / 90th of 5 rows
    assert out["full"] == pooled  # one row: no band of its own
    assert out["lora"] == (min(-0.07, pooled[0]), max(0.17, pooled[1]))


def test_the_band_is_calibrated_on_held_out_sources(rows):
    """The band holds 80 % of the rows of each source left out, at the narrowest tail that
    does; the 10th-90th percentile band of all rows does not (sources err in ways of their
    own), which is why the tail is chosen on held-out rows."""
    tail = md.calibrated_tail(rows)
    inside, n = md.coverage(rows, tail)["all"]
    assert n >= 50 and inside / n >= md.NOMINAL_COVERAGE
    assert tail < 10 and md.TAILS[-1] < tail  # widened, and not to the extremes
    if tail + 1 in md.TAILS:
        narrower, _ = md.coverage(rows, tail + 1)["all"]
        assert narrower < md.NOMINAL_COVERAGE * n


def test_a_source_alone_is_not_judged_and_the_tail_widens_until_held_out_rows_fit():
    def row(source, error):
        return md.Row("r", "reserved_peak", source, "lora", 0, 1, error)

    assert md.coverage([row("a", 0.0), row("a", 0.1)], tail=10) == {}
    # five sources agree; two more err high, each beyond what the others' 10th-90th band holds
    agree = [row(s, e) for s in "abcde" for e in (-0.1, 0.0, 0.1)]
    spread = agree + [row("f", 0.3)] * 3 + [row("g", 0.35)]
    assert md.coverage(spread, 10)["all"] == (15, 19)  # 79 %: below the nominal 80 %
    # f's rows fall inside once the band reaches g's 0.35 (the 99th percentile of the others)
    assert md.coverage(spread, 1)["all"] == (18, 19)
    assert md.coverage(spread, 2)["all"] == (15, 19)
    assert md.calibrated_tail(spread) == 1
    assert md.calibrated_tail(agree) == 10


@pytest.mark.parametrize("held_out", [False, True])
def test_the_min_device_verdict_agrees_with_nine_in_ten_fit_boundaries(held_out):
    agree, rows = md.fit_boundary_agreement(held_out)
    assert rows == len(fb.load()) and agree / rows >= 0.9
    assert calibration.MIN_DEVICE_BANDS == md.bands()  # the held-out bands were put back
