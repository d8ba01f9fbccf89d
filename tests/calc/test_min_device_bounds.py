"""Verdicts on min_device_bytes decided by certain bounds of it (calc.step_events.MinDevice):
the same verdicts as the figure itself gives, on a grid of setups x every catalogue card."""

from __future__ import annotations

import pytest

from calc import calibration, gpus, recommend
from calc import step_events as se
from calc.request import parse_estimate_request

MIB = 2**20

SETUPS = [
    {"model": model, "method": method, **shape}
    for model in ("qwen2.5-0.5b", "llama-3.2-1b", "qwen3-1.7b")
    for method in ("full", "lora", "qlora")
    for shape in (
        {"micro_batch_size": 4, "seq_len": 2048},
        {"micro_batch_size": 8, "seq_len": 4096, "length_stats": {"mean": 700, "p90": 1800}},
    )
] + [
    {"model": "llama-3.1-8b", "method": "lora", "micro_batch_size": 4, "seq_len": 2048},
    {"model": "llama-3.1-8b", "method": "lora", "micro_batch_size": 4, "seq_len": 512},
    {"model": "llama-3.1-8b", "method": "qlora", "micro_batch_size": 2, "num_gpus": 2},
]


def _fresh(req):
    """A query that knows nothing yet (no sequence shared with an earlier one)."""
    se.clear_shared()
    return se.MinDevice(req)


def _label(body):
    return "-".join(str(v) for v in body.values() if not isinstance(v, dict)) + (
        "-lengths" if "length_stats" in body else ""
    )


@pytest.mark.slow
@pytest.mark.parametrize("body", SETUPS, ids=_label)
def test_bounds_hold_the_figure_and_at_most_answers_as_the_figure_does(body):
    req = parse_estimate_request(body)
    figure = se.simulate_request(req).min_device_bytes
    low, high = _fresh(req).bounds()
    assert low <= figure <= high
    for asked in {low - 1, low, figure - 2 * MIB, figure - 1, figure, high - 1, high, high + 1}:
        query = _fresh(req)
        assert query.at_most(asked) == (figure <= asked), asked


@pytest.mark.slow
@pytest.mark.parametrize("body", SETUPS, ids=_label)
@pytest.mark.parametrize("margin", [0.0, 0.1])
def test_verdicts_from_bounds_equal_the_verdicts_of_the_figure(body, margin):
    """Every card, smallest first and then largest first, each pass with a query that knows
    nothing: the cards judged before a walk was needed (if one was) are judged from the
    bounds alone, and each gets the verdict the figure itself gets."""
    req = parse_estimate_request(body)
    figure = se.simulate_request(req).min_device_bytes
    exact = recommend.Need(
        figure,
        *calibration.min_device_range_bytes(figure, req.method.value),
        "min_device_bytes",
    )
    cards = sorted({g.memory_bytes for g in gpus.all_gpus()})
    from_bounds = 0
    for order in (cards, cards[::-1]):
        query = _fresh(req)
        plain = recommend.Need.exact(1)
        for memory_bytes in order:
            walked = query.walked
            verdict = recommend.judge(recommend.bounded_need(query, plain), memory_bytes, margin)
            assert verdict.state == recommend.judge(exact, memory_bytes, margin).state
            from_bounds += not query.walked
            if not walked and not query.walked:
                assert verdict.need.basis == "min_device_bounds" or query.bounds()[0] == figure
    assert from_bounds  # the bounds decided some cards on their own


def test_data_parallel_setups_share_their_sequence_and_others_do_not():
    se.clear_shared()
    base = {"model": "qwen2.5-0.5b", "method": "lora", "micro_batch_size": 2, "seq_len": 512}
    two = se.MinDevice(parse_estimate_request({**base, "num_gpus": 2, "sharding": "ddp"}))
    four = se.MinDevice(parse_estimate_request({**base, "num_gpus": 4, "sharding": "ddp"}))
    zero3 = se.MinDevice(parse_estimate_request({**base, "num_gpus": 4, "sharding": "zero3"}))
    assert two._capacities() is four._capacities()
    assert zero3._capacities() is not four._capacities()
    lengths = {**base, "length_stats": {"mean": 200, "p90": 400}}
    a = se.MinDevice(parse_estimate_request({**lengths, "num_gpus": 2, "sharding": "ddp"}))
    b = se.MinDevice(parse_estimate_request({**lengths, "num_gpus": 4, "sharding": "ddp"}))
    assert a._capacities() is not b._capacities()
    # the same figure either way, with the outside memory of its own GPU count
    single = parse_estimate_request(base)
    assert se.MinDevice(single).exact_bytes() == se.simulate_request(single).min_device_bytes
    assert four.exact_bytes() == se.simulate_request(four.req).min_device_bytes


def test_a_run_of_another_length_that_draws_the_same_steps_replays_nothing_again(monkeypatch):
    """simulate_request is kept by the steps it replays, not by the run's length: two runs
    whose longest sample is at the cap draw the same steps and share one replay, whose figures
    are those of a fresh replay; a run short enough to meet a shorter longest sample replays
    its own steps."""
    from dataclasses import replace

    body = {"model": "llama-3.2-1b", "length_stats": {"mean": 900, "p90": 2000}}
    req = parse_estimate_request(body)
    long_run, longer_run, short_run = (replace(req, samples_seen=n) for n in (10**6, 10**7, 50))
    assert se.simulated_lengths(long_run) == se.simulated_lengths(longer_run)
    assert se.simulated_lengths(short_run) != se.simulated_lengths(long_run)
    se.forget_simulations()
    replays = []
    real = se.simulate
    monkeypatch.setattr(se, "simulate", lambda *a, **k: replays.append(a[0]) or real(*a, **k))
    first = se.simulate_request(long_run)
    assert se.simulate_request(longer_run) is first and len(replays) == 1
    assert se.simulate_request(short_run) != first and len(replays) == 2
    se.forget_simulations()
    assert se.simulate_request(longer_run) == first and len(replays) == 3
