"""Cost model: hand-computed schedules and bills; a higher price never makes a run cheaper."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calc import cost


def _inputs(**kw):
    base = dict(
        price_per_gpu_hour=2.0,
        num_gpus=4,
        storage_gb=100.0,
        storage_price_per_gb_month=0.1,
        months_kept=2.0,
        startup_minutes=12.0,
        starts=2,
        experiment_multiplier=3.0,
        interruptible=False,
        checkpoint_interval_minutes=30.0,
        checkpoint_minutes=3.0,
        interruptions_per_day=4.0,
    )
    base.update(kw)
    return cost.CostInputs(**base)


def test_on_demand_schedule_has_only_startups():
    s = cost.schedule(10.0, _inputs())
    assert (s.compute_hours, s.startup_hours, s.checkpoint_hours, s.lost_work_hours) == (
        10.0,
        0.4,
        0.0,
        0.0,
    )
    assert s.total_hours == pytest.approx(10.4)


def test_interruptible_schedule_hand_computed():
    # 12 h of compute, checkpoint every 30 min taking 3 min: 24 checkpoints = 1.2 h.
    # 4 interruptions/day over 13.2 h = 2.2 interruptions, each losing 15 min + 12 min restart.
    s = cost.schedule(12.0, _inputs(interruptible=True))
    assert s.checkpoint_hours == pytest.approx(1.2)
    assert s.interruptions == pytest.approx(2.2)
    assert s.lost_work_hours == pytest.approx(2.2 * 27 / 60)
    assert s.total_hours == pytest.approx(12 + 0.4 + 1.2 + 0.99)


def test_bill_hand_computed():
    c = cost.estimate_cost(10.0, _inputs())
    # 10.4 h x 4 GPUs x 2 USD = 83.2; experimentation (3 - 1) x 83.2 = 166.4; storage 100 x 0.1 x 2 = 20
    assert c.final_run_usd == pytest.approx(83.2)
    assert c.experimentation_usd == pytest.approx(166.4)
    assert c.storage_usd == pytest.approx(20.0)
    assert c.total_usd == pytest.approx(269.6)
    assert c.gpu_hours == pytest.approx(41.6)
    assert c.per_hour_usd == 8.0
    assert c.per_month_usd == pytest.approx(8.0 * 730 + 10.0)
    out = c.to_dict()
    b = out["breakdown"]
    assert sum(b.values()) == pytest.approx(out["total"])
    assert b["gpu_compute"] == pytest.approx(80.0) and b["startup"] == pytest.approx(3.2)


def test_default_storage_breakdown():
    # 7e9 params -> 14 GB download; 2 checkpoints of 1e6 trainable x 6 B = 0.012 GB;
    # 1e9 tokens x 4 B = 4 GB; environment 30 GB.
    parts = cost.default_storage_gb(7_000_000_000, 1_000_000, 1e9)
    assert parts == pytest.approx(
        {
            "base_model": 14.0,
            "checkpoints": 0.012,
            "dataset": 4.0,
            "environment": 30.0,
            "total": 48.012,
        }
    )


@settings(max_examples=200, deadline=None)
@given(
    p1=st.floats(0.01, 50),
    p2=st.floats(0.01, 50),
    hours=st.floats(0.01, 1000),
    n=st.sampled_from([1, 2, 4, 8]),
    interruptible=st.booleans(),
    mult=st.floats(1, 10),
)
def test_higher_price_never_cheaper(p1, p2, hours, n, interruptible, mult):
    lo, hi = sorted((p1, p2))
    cheap = cost.estimate_cost(
        hours,
        _inputs(
            price_per_gpu_hour=lo,
            num_gpus=n,
            interruptible=interruptible,
            experiment_multiplier=mult,
        ),
    )
    dear = cost.estimate_cost(
        hours,
        _inputs(
            price_per_gpu_hour=hi,
            num_gpus=n,
            interruptible=interruptible,
            experiment_multiplier=mult,
        ),
    )
    assert dear.total_usd >= cheap.total_usd
    assert dear.per_month_usd >= cheap.per_month_usd
