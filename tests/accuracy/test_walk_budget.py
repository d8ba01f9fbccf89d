"""The capacity walk's budget beside a larger one (accuracy/walk_budget.py), as the methodology
page publishes it."""

from __future__ import annotations

import pytest

from accuracy import walk_budget
from calc import allocator as al

CHEAP = [walk_budget.GAP_REQUESTS[6], walk_budget.GAP_REQUESTS[0]]
"""One request whose walk ends within its budget, one whose budget runs out."""


@pytest.fixture
def cheap(monkeypatch):
    monkeypatch.setattr(walk_budget, "GAP_REQUESTS", CHEAP)
    walk_budget.summary.cache_clear()
    yield
    walk_budget.summary.cache_clear()


def test_the_shipped_walk_is_a_bound_of_the_larger_budget_s_threshold(cheap):
    gaps = [walk_budget.gap(r) for r in CHEAP]
    assert [g.bound_exact for g in gaps] == [True, False]
    for g in gaps:
        assert g.reference_exact
        assert g.bound_bytes >= g.reference_bytes
        assert (g.above == 0) is g.bound_exact
    # the walk's own answer is left as it was
    assert al.capacity_threshold.__name__ == "capacity_threshold"


def test_the_summary_counts_exact_walks_and_the_gap_of_the_others(cheap):
    s = walk_budget.summary()
    assert s["requests"] == 2 and s["exact"] == 1 and s["reference_exact"] == 2
    assert s["budget"] == al.THRESHOLD_REPLAYS
    assert s["reference_budget"] == al.THRESHOLD_REPLAYS * walk_budget.REFERENCE_FACTOR
    assert 0 < s["above_min"] == s["above_max"] < 0.05


def test_the_methodology_sentence_reads_the_summary(cheap):
    from macros.validation_min_device import _walk, _walk_sentence

    _walk.cache_clear()
    try:
        en, es = _walk_sentence("en"), _walk_sentence("es")
    finally:
        _walk.cache_clear()
    s = walk_budget.summary()
    above = f"{100 * s['above_max']:.1f}"
    assert f"at most {al.THRESHOLD_REPLAYS} continuations" in en
    assert f"exact on {s['exact']};" in en and above + " %" in en
    assert above.replace(".", ",") + " %" in es and "1024 continuaciones" in es
