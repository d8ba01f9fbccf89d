"""accuracy.fit_boundaries: the verdict against published fit boundaries."""

from __future__ import annotations

import pytest

from accuracy import fit_boundaries as fb


@pytest.mark.parametrize(
    "outcome, at, above, expected",
    [
        ("max_fits", "fits", "borderline", True),
        ("max_fits", "borderline", "does_not_fit", True),
        ("max_fits", "fits", "fits", False),  # 25 % more would fit: the boundary is missed
        ("max_fits", "does_not_fit", "does_not_fit", False),
        ("fits", "borderline", "", True),
        ("fits", "does_not_fit", "", False),
        ("oom", "borderline", "", True),
        ("oom", "fits", "", False),
    ],
)
def test_agreement_rules(outcome, at, above, expected):
    assert fb.agrees(outcome, at, above) is expected


def test_every_row_was_judged_at_first_contact():
    rows = fb.load()
    assert len(rows) >= 19
    for row in rows:
        assert len(row["judged_at_commit"]) == 40
        assert row["first_contact_agrees"] in ("yes", "no")
        assert row["first_contact_verdict"] in ("fits", "borderline", "does_not_fit")


def test_figures_count_today_s_verdicts():
    rows = fb.load()
    figures = fb.figures()
    today = [fb.judge_row(r) for r in rows]
    assert figures["rows"] == len(rows)
    assert figures["agree"] == sum(j.agrees for j in today)
    assert figures["first_contact_rows"] == len(rows)
    assert 0 <= figures["median"] <= figures["p90"]
