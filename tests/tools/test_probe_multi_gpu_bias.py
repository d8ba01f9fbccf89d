"""The multi-GPU lean probe (benchmarks/probe_multi_gpu_bias.py): its count of the collective
seconds a step holds, and how it pairs rows."""

from __future__ import annotations

import pytest

from benchmarks import probe_multi_gpu_bias as probe
from calc import comm, timing
from calc.plan import parse_plan_request
from calc.request import CpuOffload, Sharding


def _zero3_step(link_scale: float = 1.0) -> tuple[timing.StepBreakdown, float, float]:
    """Llama 3.1 8B full, ZeRO-3 on 8 H100: the step, the probe's collective seconds, and the
    same counted by hand (two all-gathers of the 16-bit weights, one reduce-scatter of the
    gradients, per micro-step)."""
    req, opts = parse_plan_request(
        {
            "model": "llama-3.1-8b",
            "method": "full",
            "num_gpus": 8,
            "sharding": "zero3",
            "gpu": "h100-sxm",
            "dataset_tokens": 1e9,
        }
    )
    c = timing.counts(req, Sharding.ZERO3)
    rates = timing.card_rates(opts.gpu, 8)
    kw = dict(num_gpus=8, sharding=Sharding.ZERO3, cpu_offload=CpuOffload.NONE, efficiency=0.5)
    original = timing.step_breakdown
    wrapped = probe._recording(original)
    step = wrapped(c, rates, **kw)
    _, total = probe._LAST[0]
    reg = c.reg
    params = c.dense_params * reg.compute_bytes + c.quantized_bytes
    grads = float(c.grad_params) * reg.grad_bytes
    link = rates.link.bytes_per_s
    by_hand = (
        c.accumulation
        * (2 * comm.all_gather_bytes(params, 8) + comm.reduce_scatter_bytes(grads, 8))
        / link
    )
    return step, total, by_hand


def test_collective_seconds_match_the_hand_count():
    step, total, by_hand = _zero3_step()
    assert total == pytest.approx(by_hand, rel=0.01)
    # on NVLink most of it hides under the step's matmuls
    assert step.exposed_communication < total


def test_hidden_share_is_what_the_step_does_not_expose():
    step, total, _ = _zero3_step()
    share = probe.hidden_share(step, total)
    assert share == pytest.approx((total - step.exposed_communication) / step.compute)
    assert 0 < share < 1


def test_bins_have_their_edges():
    assert probe._bin(0.0) == "0.00-0.05"
    assert probe._bin(0.05) == "0.05-0.20"
    assert probe._bin(0.49) == "0.20-0.50"
    assert probe._bin(3.0) == ">=1.00"


def _row(rid, source, n, measured, predicted, **request):
    return {
        "id": rid,
        "source": source,
        "sharding": request.get("sharding", "none"),
        "num_gpus": n,
        "measured": measured,
        "predicted": predicted,
        "request": {"model": "m", "num_gpus": n, **request},
    }


def test_pairs_join_one_source_and_one_setup_only():
    rows = [
        _row("a1", "s", 1, 100.0, 110.0),
        _row("a2", "s", 4, 80.0, 110.0, sharding="ddp", gradient_accumulation_steps=4),
        _row("b2", "s", 4, 50.0, 55.0, sharding="ddp", micro_batch_size=2),  # another setup
        _row("c2", "t", 4, 50.0, 55.0, sharding="ddp"),  # another source
    ]
    pairs = probe.scaling_pairs(rows)
    assert [(p["id"], p["one"]) for p in pairs] == [("a2", "a1")]
    (p,) = pairs
    assert p["measured"] == pytest.approx(0.8)
    assert p["predicted"] == pytest.approx(1.0)
    assert p["error"] == pytest.approx(0.25)
