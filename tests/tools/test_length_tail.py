"""benchmarks.length_tail: the families it compares meet the same mean and p90, and its expected
longest sample is calc's for the log-normal."""

from __future__ import annotations

import math

import pytest

from benchmarks import length_tail as lt
from calc.lengths import LengthStats, expected_longest, fit


@pytest.mark.parametrize("family", [lt.gamma_family, lt.weibull_family])
def test_the_lighter_families_meet_mean_and_p90(family):
    q = family(225, 442)
    assert q(0.9) == pytest.approx(442, rel=1e-6)
    nodes = 20_000  # the mean as the integral of the quantile function
    assert sum(q((i + 0.5) / nodes) for i in range(nodes)) / nodes == pytest.approx(225, rel=2e-3)


def test_expected_longest_of_a_quantile_function_is_calc_s_for_the_log_normal():
    from statistics import NormalDist

    stats = LengthStats(mean=225, p90=442, max=1585)
    mu, sigma, _ = fit(stats, 1585)
    q = lambda p: math.exp(mu + sigma * NormalDist().inv_cdf(p))  # noqa: E731
    for n in (60, 480):
        assert lt.expected_longest_of(q, n, 1585) == pytest.approx(
            expected_longest(stats, 2048, n), abs=1.5
        )


def test_published_quantiles_are_read_from_the_row_s_words():
    text = "read off the figure's pixels: about 51,400 samples, mean 225, p90 442, p99 619; max"
    assert lt.published_quantiles(text) == {"mean": 225, "p90": 442, "p99": 619}


def test_the_two_piece_fit_meets_the_published_p99_and_calc_s_longest():
    stats = LengthStats(mean=225, p90=442, max=1585, p99=619)
    q = lt.two_piece(stats, 1585)
    assert q(0.9) == pytest.approx(442, rel=1e-6) and q(0.99) == pytest.approx(619, rel=1e-6)
    for n in (60, 480):
        assert lt.expected_longest_of(q, n, 1585) == pytest.approx(
            expected_longest(stats, 2048, n), abs=1.5
        )
