"""Routed experts in the time model (calc.moe_kernels): counts by hand from the layouts' code,
and what they do to a step."""

from __future__ import annotations

import pytest

from calc import moe_kernels as mk
from calc import timing
from calc.plan import parse_plan_request
from calc.request import Sharding

# Qwen3-30B-A3B: 48 blocks, hidden 2048, 128 experts of width 768, 8 per token
H, W, E, K, BLOCKS = 2048, 768, 128, 8, 48


def _req(**keys):
    req, opts = parse_plan_request(
        {"model": "qwen3-30b-a3b", "gpu": "h100-sxm", "dataset_tokens": 1e9, **keys}
    )
    return req, opts


def test_a_dense_model_has_no_expert_counts():
    req, _ = parse_plan_request({"model": "llama-3.1-8b", "gpu": "h100-sxm", "dataset_tokens": 1e9})
    assert mk.moe_counts(req.model, "fused-3d", False, 8192) == mk.MoeCounts()
    assert timing.counts(req, req.sharding).expert_forward_flops_per_token == 0.0


@pytest.mark.parametrize("compiled", [False, True])
def test_grouped_counts_by_hand(compiled):
    req, _ = _req()
    c = mk.moe_counts(req.model, "fused-3d", compiled, 8192)
    assert c.token_share == K / E
    assert c.flops_forward == 2 * BLOCKS * K * 3 * H * W
    assert c.linear_ops == BLOCKS * 3 * K  # the dense count: k matmuls per expert linear
    mode = "compiled" if compiled else "eager"
    assert c.ops_forward == BLOCKS * (3 + mk.GROUPED_OPS_FORWARD[mode])
    per_copy = mk.ROUTE_BYTES_PER_ELEMENT["fused-3d", mode] * H
    per_copy += mk.ROUTE_BYTES_PER_WIDTH_ELEMENT["fused-3d", mode] * W
    assert c.route_bytes == BLOCKS * K * per_copy
    assert c.loop_ops_forward == 0.0


def test_the_loop_calls_every_expert_hit():
    req, _ = _req()
    few = mk.moe_counts(req.model, "per-expert-modules", False, 1)
    many = mk.moe_counts(req.model, "per-expert-modules", False, 8192)
    # one token reaches k experts; thousands reach all of them
    assert few.loop_ops_forward == pytest.approx(BLOCKS * K * (3 + mk.LOOP_OPS_PER_EXPERT_FORWARD))
    assert many.loop_ops_forward == pytest.approx(BLOCKS * E * (3 + mk.LOOP_OPS_PER_EXPERT_FORWARD))
    assert many.route_bytes == BLOCKS * K * (
        mk.ROUTE_BYTES_PER_ELEMENT["per-expert-modules", "eager"] * H
        + mk.LOOP_MASK_BYTES_PER_ENTRY * E
    )


def _step(**keys):
    req, opts = _req(**keys)
    c = timing.counts(req, req.sharding)
    rates = timing.card_rates(opts.gpu, req.num_gpus)
    args = dict(
        num_gpus=req.num_gpus,
        sharding=req.sharding,
        cpu_offload=req.cpu_offload,
        efficiency=0.68,
    )
    return c, rates, timing.step_breakdown(c, rates, **args), args


def test_experts_run_at_the_efficiency_of_their_own_rows():
    c, rates, step, args = _step(method="full", micro_batch_size=2, seq_len=4096)
    assert c.expert_token_share == K / E
    # the same counts with each expert's matmuls on all of the micro-step's rows
    from dataclasses import replace

    as_dense = timing.step_breakdown(replace(c, expert_token_share=1.0), rates, **args)
    T = c.tokens_micro
    rate = rates.peak_flops / rates.clock
    sat = timing.saturation(T, c.hidden, rate)
    sat_e = timing.saturation(T * K / E, c.hidden, rate)
    passes = c.flops.linear_total / c.flops.linear_forward  # forward, backward, recompute
    flops = c.expert_forward_flops_per_token * passes
    extra = T * flops / (rates.peak_flops * 0.68 * sat) * (sat / sat_e - 1)
    assert step.compute - as_dense.compute == pytest.approx(extra)
    assert extra > 0


def test_the_per_expert_loop_waits_for_the_host():
    # transformers 4's loop: the host waits for the device at every expert, so its dispatch
    # adds to the step whole in the forward and the recomputed forward
    lora = dict(method="lora", micro_batch_size=1, seq_len=2048, gradient_checkpointing=True)
    _, _, grouped, _ = _step(**lora, moe_expert_layout="fused-3d")
    c, _, loop, _ = _step(**lora, moe_expert_layout="per-expert-modules")
    waited = c.expert_loop_ops * (c.passes - 1) * timing.DISPATCH_SECONDS_PER_KERNEL
    assert waited > 1.0  # 48 blocks x 128 experts x 9 ops x 2 passes x 16 us
    assert loop.overheads >= waited
    assert loop.step_seconds > grouped.step_seconds + waited * 0.9


def test_layout_key_is_accepted_for_full_fine_tuning():
    req, _ = _req(method="full", moe_expert_layout="fused-3d")
    assert req.moe_expert_layout.value == "fused-3d"
    assert Sharding.NONE is req.sharding
