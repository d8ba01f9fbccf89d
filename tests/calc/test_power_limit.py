"""A power limit on the chosen card (plan key ``power_limit_w``): the clock it allows, the time
priced at that clock, the electricity of an owned card, and the cards without clocks."""

from __future__ import annotations

import pytest

import calc
from calc import gpus
from calc.errors import InputError

PLAN = {"model": "llama-3.1-8b", "gpu": "h100-sxm", "dataset_tokens": 1e8}
CLOCKED = [g for g in gpus.all_gpus() if g.boost_clock_mhz > 0]


@pytest.mark.parametrize("gpu", CLOCKED, ids=lambda g: g.id)
def test_default_power_gives_back_the_catalogue_clock(gpu):
    limited = gpus.with_power_limit(gpu, gpu.board_power_w)
    assert limited.sustained_clock_mhz == gpu.sustained_clock_mhz
    assert limited.id == gpu.id and limited.memory_bytes == gpu.memory_bytes


@pytest.mark.parametrize("gpu", CLOCKED, ids=lambda g: g.id)
def test_clock_never_rises_as_the_limit_falls_and_stays_between_base_and_boost(gpu):
    clocks = [
        gpus.with_power_limit(gpu, gpu.board_power_w * share).sustained_clock_mhz
        for share in (1.5, 1.0, 0.8, 0.6, 0.4, 0.1)
    ]
    assert clocks == sorted(clocks, reverse=True)
    assert all(gpu.base_clock_mhz <= c <= gpu.boost_clock_mhz for c in clocks)


def test_reference_card_follows_the_cube_root_law():
    # torchtitan's Grand Teton H100 at 500 W: 1830 MHz x (500 / 700) ** (1 / 3) = 1636 MHz
    h100 = gpus.get_gpu("h100-sxm")
    assert gpus.with_power_limit(h100, 500).sustained_clock_mhz == 1636
    assert gpus.with_power_limit(h100, 500).board_power_w == 500.0


def test_derived_card_follows_its_reference():
    # an L4 limited to 60 W has the power per SM of its reference (RTX 4090) times
    # (60 / 58) / (450 / 128): the same law the catalogue derived its 72 W clock with
    l4, ref = gpus.get_gpu("l4"), gpus.get_gpu("rtx-4090")
    ratio = (60 / l4.compute_units) / (ref.board_power_w / ref.compute_units)
    expected = min(l4.boost_clock_mhz, max(l4.base_clock_mhz, 2520 * ratio ** (1 / 3)))
    assert gpus.with_power_limit(l4, 60).sustained_clock_mhz == round(expected)


def test_plan_prices_time_at_the_limited_clock_on_the_chosen_card_only():
    free = calc.plan_setup(PLAN)
    capped = calc.plan_setup({**PLAN, "power_limit_w": 400})
    assert capped["time"]["sustained_clock_mhz"] < free["time"]["sustained_clock_mhz"] == 1830
    assert capped["time"]["power_limit_w"] == 400.0 and free["time"]["power_limit_w"] is None
    assert capped["time"]["tokens_per_second"] < free["time"]["tokens_per_second"]
    # the memory verdicts do not move; the recommendation entry of the chosen card is the
    # headline's; another card runs at its catalogue clock
    assert capped["fits"] == free["fits"]

    def entry(plan, gpu):
        return next(
            c
            for c in plan["recommendations"]["configs"]
            if c["gpu"] == gpu and c["num_gpus"] == 1 and c["sharding"] == "none"
        )

    assert entry(capped, "h100-sxm")["tokens_per_second"] == pytest.approx(
        capped["time"]["tokens_per_second"]
    )
    for key in ("tokens_per_second", "cost_usd", "time_hours"):  # its ranks may move
        assert entry(capped, "a100-80gb-sxm")[key] == entry(free, "a100-80gb-sxm")[key]


def test_owned_card_draws_its_limit_unless_board_power_says_otherwise():
    owned = {**PLAN, "owned": True, "electricity_price_per_kwh": 0.2}
    price = calc.plan_setup({**owned, "power_limit_w": 450})["cost_usd"]["price"]
    assert (price["board_power_w"], price["board_power_from"]) == (450.0, "power_limit")
    assert price["usd_per_gpu_hour"] == pytest.approx(0.09)
    both = calc.plan_setup({**owned, "power_limit_w": 450, "board_power_w": 380})
    assert both["cost_usd"]["price"]["board_power_from"] == "request"


@pytest.mark.parametrize(
    ("value", "code"),
    [(0, "out_of_range"), (-5, "out_of_range"), ("lots", "not_number"), (True, "not_number")],
)
def test_bad_limits_get_coded_errors(value, code):
    with pytest.raises(InputError) as err:
        calc.plan_setup({**PLAN, "power_limit_w": value})
    assert (err.value.code, err.value.field) == (code, "power_limit_w")


def test_card_without_clocks_says_so_instead_of_a_number():
    with pytest.raises(InputError) as err:
        calc.plan_setup({**PLAN, "gpu": "b200", "power_limit_w": 700})
    assert (err.value.code, err.value.field) == ("power_limit_without_clock", "power_limit_w")


def test_a_measured_clock_scales_by_the_same_law():
    # AMD measured the MI300X at 1207 MHz at its 750 W (dense BF16 GEMM): a 600 W cap takes the
    # cube root of the power ratio from there, not from the 2100 MHz peak
    mi300x = gpus.get_gpu("mi300x")
    assert mi300x.sustained_clock_mhz == 1207
    assert gpus.with_power_limit(mi300x, 600).sustained_clock_mhz == round(1207 * 0.8 ** (1 / 3))
    assert gpus.with_power_limit(mi300x, 750).sustained_clock_mhz == 1207
