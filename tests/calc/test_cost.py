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


# --- a card one owns: electricity instead of rent -------------------------------------------

OWNED = {
    "model": "llama-3.1-8b",
    "method": "qlora",
    "dataset_tokens": 1e8,
    "gpu": "rtx-4090",
    "price_tier": "managed",
}


def test_electricity_per_gpu_hour_hand_computed():
    # 450 W for an hour is 0.45 kWh; at 0.20 USD per kWh, 0.09 USD
    assert cost.electricity_usd_per_gpu_hour(450.0, 0.20) == pytest.approx(0.09)


def test_owned_card_costs_its_electricity_not_a_rent():
    """Board power (the catalogue's) x hours x price per kWh, for the chosen card and for every
    configuration ranked; storage is the owner's disk; a card without a rental price is priced."""
    import calc
    from calc import gpus

    rented = calc.plan_setup(OWNED)
    owned = calc.plan_setup({**OWNED, "owned": True, "electricity_price_per_kwh": 0.25})
    assert owned["time_hours"] == rented["time_hours"]
    price = owned["cost_usd"]["price"]
    assert price["source_kind"] == "electricity" and price["board_power_w"] == 450.0
    assert price["usd_per_gpu_hour"] == pytest.approx(0.45 * 0.25)
    compute = owned["time"]["schedule"]["compute_hours"]
    assert owned["cost_usd"]["breakdown"]["gpu_compute"] == pytest.approx(compute * 0.45 * 0.25)
    assert owned["cost_usd"]["breakdown"]["storage"] == 0.0
    assert owned["cost_usd"]["total"] < rented["cost_usd"]["total"]
    for config in owned["recommendations"]["configs"]:
        assert config["priced"]
        per_gpu = gpus.get_gpu(config["gpu"]).board_power_w / 1000 * 0.25
        assert config["price_per_gpu_hour"] == pytest.approx(per_gpu), config["id"]
    unrented = calc.plan_setup({**OWNED, "gpu": "rtx-4060-ti-16gb", "owned": True})
    assert unrented["cost_usd"]["priced"] and unrented["cost_usd"]["total"] > 0
    assert unrented["cost_usd"]["price"]["board_power_w"] == 165.0


def test_owned_board_power_is_editable_for_the_chosen_card():
    import calc

    plan = calc.plan_setup(
        {**OWNED, "owned": True, "board_power_w": 300, "electricity_price_per_kwh": 0.1}
    )
    price = plan["cost_usd"]["price"]
    assert (price["board_power_w"], price["board_power_from"]) == (300.0, "request")
    assert price["usd_per_gpu_hour"] == pytest.approx(0.03)
    other = next(c for c in plan["recommendations"]["configs"] if c["gpu"] == "l40s")
    assert other["price_per_gpu_hour"] == pytest.approx(0.035)  # the catalogue's 350 W


@pytest.mark.parametrize(
    ("changes", "code", "field"),
    [
        (
            {"owned": True, "electricity_price_per_kwh": -0.1},
            "out_of_range",
            "electricity_price_per_kwh",
        ),
        (
            {"owned": True, "electricity_price_per_kwh": "cheap"},
            "not_number",
            "electricity_price_per_kwh",
        ),
        ({"owned": True, "board_power_w": 0}, "out_of_range", "board_power_w"),
        ({"owned": "yes"}, "not_boolean", "owned"),
    ],
)
def test_owned_bad_values_are_coded_errors(changes, code, field):
    import calc

    out = calc.run("plan", {**OWNED, **changes})
    assert (out["error"]["code"], out["error"]["field"]) == (code, field)


def test_every_catalogue_card_has_a_sourced_board_power():
    from calc import gpus

    for gpu in gpus.all_gpus():
        assert 50 <= gpu.board_power_w <= 2000, gpu.id
        assert f"{gpu.board_power_w:g} W" in gpu.board_power_source, gpu.id


def test_owned_with_a_price_or_interruptions():
    """A price per GPU-hour still sets the chosen card's (the owner's own figure, with
    depreciation, say) and electricity prices the others; interruptions still add checkpoints
    and lost work to the owner's electricity."""
    import calc

    priced = calc.plan_setup({**OWNED, "owned": True, "price_per_gpu_hour": 0.5})
    assert priced["cost_usd"]["price"]["usd_per_gpu_hour"] == 0.5
    other = next(c for c in priced["recommendations"]["configs"] if c["gpu"] == "l40s")
    assert other["price_per_gpu_hour"] == pytest.approx(0.35 * 0.17)
    steady = calc.plan_setup({**OWNED, "owned": True})
    shared = calc.plan_setup({**OWNED, "owned": True, "interruptible": True})
    assert shared["cost_usd"]["price"]["source_kind"] == "electricity"
    assert shared["time"]["schedule"]["lost_work_hours"] > 0
    assert shared["cost_usd"]["total"] > steady["cost_usd"]["total"]
    assert not any(w.startswith("price_is_") for w in shared["warnings"])
