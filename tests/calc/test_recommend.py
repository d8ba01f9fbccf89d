"""Fits, the bisection solver and the recommendation's use of the memory estimates."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calc import gpus, recommend
from calc.request import parse_estimate_request
from plan_fakes import fake_estimate

MIB = 2**20


@pytest.mark.parametrize(
    "total, margin, expected",
    [
        (100, 0.25, 125),
        (101, 0.25, 127),
        (80 * 2**30, 0.0, 80 * 2**30),
        (3, 0.2, 4),
    ],
)
def test_required_bytes_rounds_up(total, margin, expected):
    assert recommend.required_bytes(total, margin) == expected


def test_fit_entry_hand_computed():
    # 60 GiB estimate on an A100 80GB (81920 MiB): 60 GiB x 1.25 = 75 GiB = 76800 MiB <= 81920 MiB
    entry = recommend.fit_entry(60 * 2**30, 81920 * MIB, 0.25)
    assert entry["fits"] and entry["fits_without_margin"]
    assert entry["required_bytes"] == 76800 * MIB
    assert entry["headroom_bytes"] == (81920 - 61440) * MIB
    assert entry["headroom_fraction"] == pytest.approx(20480 / 81920)
    tight = recommend.fit_entry(70 * 2**30, 81920 * MIB, 0.25)  # 87.5 GiB needed
    assert not tight["fits"] and tight["fits_without_margin"]


@settings(max_examples=300, deadline=None)
@given(total=st.integers(1, 300 * 2**30), margin=st.floats(0.0, 1.0))
def test_fits_monotone_in_card_memory(total, margin):
    """A setup that fits card X fits every card of the same software stack with more memory."""
    table = recommend.fits_table({"device_total_bytes": total}, gpus.all_gpus(), margin)
    cards = gpus.all_gpus()
    for x in cards:
        if not table[x.id]["fits"]:
            continue
        for y in cards:
            if y.stack == x.stack and y.memory_bytes >= x.memory_bytes:
                assert table[y.id]["fits"], (x.id, y.id)


@settings(max_examples=300, deadline=None)
@given(threshold=st.integers(0, 70_000), start=st.integers(1, 70_000))
def test_largest_fitting_finds_threshold(threshold, start):
    calls = []

    def fits(x):
        calls.append(x)
        return x <= threshold

    got = recommend.largest_fitting(fits, start, 65_536)
    if threshold == 0:
        assert got is None
    else:
        assert got == min(threshold, 65_536)
    assert len(calls) <= 2 * math.ceil(math.log2(65_536)) + 3


def test_configurations():
    req = parse_estimate_request({"model": "llama-2-7b"})
    configs = recommend.configurations(req)
    assert configs[0] == (1, "none")
    assert len(configs) == 1 + 6 * 3
    assert {n for n, _ in configs} == {1, 2, 4, 8, 16, 32, 64}  # up to 8 nodes
    own = recommend.configurations(
        parse_estimate_request({"model": "llama-2-7b", "num_gpus": 12, "sharding": "zero1"})
    )
    assert own[-1] == (12, "zero1") and len(own) == 20


def test_estimate_level_and_caveats():
    assert recommend.estimate_level(33.09) == 33 and recommend.estimate_level(1234.5) == 1200
    assert recommend.estimate_level(0.437) == 0.44 and recommend.estimate_level(0) == 0
    assert recommend.has_caveat({"warnings": ["rocm_qlora_bitsandbytes"]})
    assert recommend.has_caveat({"warnings": ["price_from_other_tier"]})
    assert not recommend.has_caveat({"warnings": []}) and not recommend.has_caveat({})


def test_estimator_memoises_variants():
    req = parse_estimate_request({"model": "llama-2-7b", "method": "full"})
    est = recommend.Estimator(req, fake_estimate)
    a = est.get(num_gpus=4, sharding="zero3")
    b = est.get(sharding="zero3", num_gpus=4)
    assert a is b and est.calls == 1
    assert a["components"]["states"] == 4 * 2**30  # 16 GiB sharded over 4


@pytest.mark.parametrize(
    "low, high, memory, margin, state",
    [
        (10, 20, 20, 0.0, "fits"),  # the upper end within the card
        (10, 20, 19, 0.0, "borderline"),  # the card inside the range
        (10, 20, 10, 0.0, "borderline"),
        (10, 20, 9, 0.0, "does_not_fit"),  # not even the lower end
        (10, 20, 21, 0.1, "borderline"),  # a margin the user sets multiplies both ends: 22
        (10, 20, 10, 0.1, "does_not_fit"),  # 11 > 10
    ],
)
def test_judge_hand_computed(low, high, memory, margin, state):
    verdict = recommend.judge(recommend.Need(15, low, high), memory, margin)
    assert verdict.state == state
    assert verdict.fits == (state == "fits") and verdict.possible == (state != "does_not_fit")
    entry = verdict.to_dict()
    assert entry["verdict"] == state and entry["fits"] == verdict.fits
    assert entry["required_bytes"] == math.ceil(high * (1 + margin))
    assert entry["device_range_bytes"] == [low, high] and entry["headroom_bytes"] == memory - 15


def test_need_of_is_the_device_range_and_fit_entry_is_judge():
    est = {
        "device_total_bytes": 110,
        "peak_reserved_bytes": 100,
        "peak_reserved_range_bytes": [90, 120],
    }
    assert recommend.need_of(est) == recommend.Need(110, 100, 130)
    assert recommend.need_of({"device_total_bytes": 7}) == recommend.Need.exact(7)
    assert (
        recommend.fit_entry(110, 125, 0.0, (100, 130))
        == recommend.judge(recommend.need_of(est), 125).to_dict()
    )
    assert (
        recommend.verdict_of(None, 125) is None and recommend.state_of(None, 125) == "does_not_fit"
    )
    table = recommend.fits_table(est, gpus.all_gpus(), 0.0)
    assert all(
        e == recommend.judge(recommend.need_of(est), g.memory_bytes).to_dict()
        for g, e in zip(gpus.all_gpus(), table.values(), strict=True)
    )


def test_a_variant_re_evaluates_an_enum_behaviour_of_the_profile_as_its_member():
    """The profile's setup-dependent values are plain strings; a variant's request holds the
    enum member, as a parsed request does (a plan with a library profile and no sample lengths)."""
    from calc.fields import AttentionMask
    from calc.request import parse_estimate_request

    req = parse_estimate_request({"model": "llama-3.2-1b", "framework": "hf-custom-loop"})
    variant = recommend.Estimator(req).variant(num_gpus=2, sharding="zero3")
    assert variant.attention_mask is AttentionMask.CAUSAL
    assert recommend.Estimator(req).get(num_gpus=2, sharding="zero3") is not None


def test_need_of_judges_min_device_and_its_range_where_the_estimate_carries_them():
    """The replayed allocator's smallest card and its calibrated range are what the verdict
    judges; the card entry keeps the estimate's device total beside it."""
    est = {
        "device_total_bytes": 110,
        "peak_reserved_bytes": 100,
        "peak_reserved_range_bytes": [90, 120],
        "min_device_bytes": 95,
        "min_device_range_bytes": [85, 104],
    }
    need = recommend.need_of(est)
    assert (need.central_bytes, need.low_bytes, need.high_bytes) == (95, 85, 104)
    assert need.basis == "min_device_bytes"
    entry = recommend.judge(need, 105).to_dict()
    assert entry["verdict"] == "fits"  # on the device range (100-130) it would be borderline
    assert entry["device_total_bytes"] == 110 and entry["min_device_bytes"] == 95
    assert entry["verdict_basis"] == "min_device_bytes" and entry["headroom_bytes"] == 10
    assert recommend.judge(need, 90).state == "borderline"
    assert recommend.judge(need, 84).state == "does_not_fit"
    # without its range (an estimate with length_stats, the switch off) it is not judged
    shown = {k: v for k, v in est.items() if k != "min_device_range_bytes"}
    assert recommend.need_of(shown) == recommend.Need(110, 100, 130)
    assert "verdict_basis" not in recommend.judge(recommend.need_of(shown), 105).to_dict()


# ---- the switch: every estimate judged on min_device_bytes ----------------------------------

SMALL = {"model": "qwen2.5-0.5b", "method": "full", "seq_len": 2048, "micro_batch_size": 4}


@pytest.fixture
def simulated(monkeypatch):
    from calc import memory

    monkeypatch.setattr(memory, "SIMULATED_VERDICT", True)


def test_off_the_verdict_judges_the_device_total_and_says_so():
    from calc.memory import estimate_dict

    est = estimate_dict(SMALL)
    assert est["verdict_basis"] == "device_total_bytes" and "min_device_bytes" not in est
    assert recommend.need_of(est).basis == "device_total_bytes"


def test_on_every_estimate_carries_min_device_and_old_fields_keep_their_values(monkeypatch):
    from calc import calibration, memory
    from calc.step_events import simulate_request

    off = memory.estimate_dict(SMALL)
    monkeypatch.setattr(memory, "SIMULATED_VERDICT", True)
    on = memory.estimate_dict(SMALL)
    need = simulate_request(parse_estimate_request(SMALL)).min_device_bytes
    assert on["min_device_bytes"] == need
    assert on["min_device_range_bytes"] == calibration.min_device_range_bytes(need, "full")
    assert on["verdict_basis"] == "min_device_bytes"
    added = ("min_device_bytes", "min_device_range_bytes", "verdict_basis")
    assert {k: v for k, v in on.items() if k not in added} == {
        k: v for k, v in off.items() if k not in added
    }


def test_on_plan_s_table_solvers_and_suggestions_judge_min_device(simulated):
    """One verdict: the card table, the micro-batch solver and the suggestions all read the
    range of min_device_bytes."""
    from calc.memory import estimate_dict
    from calc.plan import plan_dict

    body = {**SMALL, "micro_batch_size": 8, "gpu": "rtx-4060-ti-16gb", "dataset_tokens": 1e7}
    out = plan_dict(body)
    need = recommend.need_of(out["memory"])
    assert need.basis == "min_device_bytes"
    for gpu in gpus.all_gpus():
        entry = out["fits"][gpu.id]
        assert entry == recommend.judge(need, gpu.memory_bytes).to_dict()
        assert entry["min_device_bytes"] == out["memory"]["min_device_bytes"]
    card = gpus.get_gpu("rtx-4060-ti-16gb").memory_bytes
    solved = out["solvers"]["max_micro_batch_size"]
    assert solved["found"]
    at = estimate_dict({**SMALL, "micro_batch_size": solved["value"]})
    above = estimate_dict({**SMALL, "micro_batch_size": solved["value"] + 1})
    assert recommend.judge(recommend.need_of(at), card).state == "fits"
    assert recommend.judge(recommend.need_of(above), card).state != "fits"
    # the other setups: the figure, or the certain bounds of it that decided the verdict
    assert out["suggestions"] and all(_judged_on_min_device(s) for s in out["suggestions"])
    picks = out["recommendations"]["configs"]
    assert picks and all(_judged_on_min_device(c) for c in picks)


def _judged_on_min_device(entry):
    if "min_device_bytes" in entry:
        return "min_device_bounds_bytes" not in entry
    low, high = entry["min_device_bounds_bytes"]
    return entry["verdict_basis"] == "min_device_bounds" and low < high


def _verdicts(out):
    """What a plan decides from its verdicts (not the figures it shows beside them)."""
    return (
        {k: v["verdict"] for k, v in out["fits"].items()},
        [(c["id"], c["required_bytes"] > 0) for c in out["recommendations"]["configs"]],
        out["solvers"],
        [(s["action"], s["changes"], s["verdict"], s["fits"]) for s in out["suggestions"]],
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "body",
    [
        {**SMALL, "micro_batch_size": 8, "gpu": "rtx-4060-ti-16gb", "dataset_tokens": 1e7},
        {
            "model": "llama-3.2-1b",
            "method": "lora",
            "micro_batch_size": 8,
            "seq_len": 4096,
            "gpu": "rtx-4080",
            "dataset_tokens": 1e7,
        },
    ],
    ids=["qwen-0.5b-full", "llama-1b-lora"],
)
def test_on_plan_verdicts_from_bounds_equal_those_of_every_figure(simulated, body):
    """A plan whose other setups are judged from certain bounds of min_device_bytes (the
    default) decides what a plan whose every setup carries the figure decides: the same
    card table, configurations, solvers and suggestions, each with its verdict."""
    from calc import memory
    from calc.plan import parse_plan_request, plan_request
    from calc.step_events import clear_shared

    clear_shared()
    req, options = parse_plan_request(body)
    bounded = plan_request(req, options, recommend.Estimator(req))
    req, options = parse_plan_request(body)
    every = plan_request(req, options, recommend.Estimator(req, memory.estimate_request))
    assert _verdicts(bounded) == _verdicts(every)
    entries = bounded["recommendations"]["configs"] + bounded["suggestions"]
    assert any(e.get("verdict_basis") == "min_device_bounds" for e in entries)


def test_on_a_setup_whose_replay_fails_is_judged_on_its_device_total(simulated, monkeypatch):
    from calc import memory, step_events

    def broken(self, *args):
        raise AssertionError("the unlimited replay did not reach its own allocation")

    monkeypatch.setattr(step_events.StepReplay, "replay", broken)
    step_events.clear_shared()
    est = memory.estimate_alternative(parse_estimate_request(SMALL))
    need = recommend.need_of(est)
    assert need.basis == "device_total_bytes"
    assert need == recommend.Need(est["device_total_bytes"], *recommend.device_range(est))


def test_where_the_replay_fails_the_estimate_falls_back_and_says_so(simulated, monkeypatch):
    from calc import step_events
    from calc.memory import estimate_dict

    def broken(req):
        raise AssertionError("the unlimited replay did not reach its own allocation")

    monkeypatch.setattr(step_events, "simulate_request", broken)
    est = estimate_dict(SMALL)
    assert est["verdict_basis"] == "device_total_bytes" and "min_device_bytes" not in est
    assert "min_device_not_simulated" in est["warnings"]
    assert recommend.need_of(est).basis == "device_total_bytes"
