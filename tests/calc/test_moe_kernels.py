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
    if compiled:
        assert c.route_bytes == BLOCKS * K * mk.ROUTE_BYTES_PER_ELEMENT["fused-3d", mode] * H
        assert c.route_bytes_backward is None  # calc.timing scales the forward
    else:
        # Qwen3's router hands bf16 weights: per copy and hidden element 22.25 forward and 33
        # backward (grouped_route_bytes), per copy and width element 8 and 16 (the gate-up
        # output's mask, and the chunk's gradient concatenated)
        assert c.route_bytes == BLOCKS * K * (22.25 * H + 8 * W)
        assert c.route_bytes_backward == BLOCKS * K * (33 * H + 16 * W)
    assert c.loop_ops_forward == 0.0


def test_grouped_route_bytes_by_hand():
    """transformers 5.17's grouped path per routed copy and hidden element, counted op by op:
    bf16 routing weights (Qwen3, k = 8) and fp32 ones (Mixtral, k = 2), whose product, reorder,
    sum and cast back run in fp32 (traced on the CPU: 35 and 66 per copy on Mixtral's block)."""
    assert mk.grouped_route_bytes(2, 8) == (22.25, 33.0)
    assert mk.grouped_route_bytes(4, 2) == (35.0, 66.0)
    # a non-gated expert (Nemotron-H's relu2) masks its one output and concatenates nothing
    assert mk.grouped_width_bytes(True) == (8, 16)
    assert mk.grouped_width_bytes(False) == (4, 4)


def test_fp32_routing_families_pay_for_the_wider_product():
    from calc.presets import get_preset

    mixtral = get_preset("mixtral-8x7b")
    assert mixtral.family in mk.FP32_ROUTING_FAMILIES
    c = mk.moe_counts(mixtral, "fused-3d", False, 4096)
    h, w, blocks = 4096, 14336, 32
    assert mk.expert_width(mixtral, mk.routed_expert_linears(mixtral)) == w  # not the hidden
    assert c.route_bytes == blocks * 2 * (35 * h + 8 * w)
    assert c.route_bytes_backward == blocks * 2 * (66 * h + 16 * w)


def test_shared_experts_add_their_output_and_gate():
    """DeepSeek V3 adds its shared expert's output (6 per hidden element, no backward kernel);
    Qwen1.5-MoE's shared expert is also scaled by its sigmoid gate (4 forward, 12 backward)."""
    from calc.presets import get_preset

    def shared_part(preset: str) -> tuple[float, float]:
        arch = get_preset(preset)
        with_shared = mk.moe_counts(arch, "fused-3d", False, 4096)
        from dataclasses import replace

        alone = mk.moe_counts(
            replace(arch, shared_expert_intermediate_size=0), "fused-3d", False, 4096
        )
        blocks = max(arch.blocks_of(lin) for lin in mk.routed_expert_linears(arch))
        h = arch.hidden_size
        return (
            (with_shared.route_bytes - alone.route_bytes) / (blocks * h),
            (with_shared.route_bytes_backward - alone.route_bytes_backward) / (blocks * h),
        )

    assert shared_part("deepseek-v3") == (6, 0)
    assert shared_part("qwen1.5-moe-a2.7b") == (10, 12)


def test_llama4_runs_every_expert_on_every_token():
    """transformers' Llama4TextMoe copies each token once per expert and runs them all: the
    FLOPs of all 128 experts (not the one chosen), each on all the micro-step's rows, and the
    copies' bytes per hidden element, (4 E + 5) x 2 forward and (8 E + 2) x 2 backward."""
    from calc import flops
    from calc.presets import get_preset

    arch = get_preset("llama-4-maverick")
    c = mk.moe_counts(arch, "fused-3d", False, 4096)
    experts = mk.routed_expert_linears(arch)
    blocks = max(arch.blocks_of(lin) for lin in experts)
    e, h, w = 128, 5120, 8192
    assert c.token_share == 1.0
    assert c.flops_forward == 2 * blocks * e * (h * 2 * w + w * h)
    assert c.route_bytes == blocks * (4 * e + 5) * 2 * h
    assert c.route_bytes_backward == blocks * ((8 * e + 2) * 2 * h + 8 * w * e)
    assert flops.dense_expert_params(arch) == blocks * (e - 1) * 3 * h * w
    assert flops.block_linear_params(arch) == (
        arch.params_active - arch.embedding_params - arch.lm_head_params
    ) + flops.dense_expert_params(arch)
    assert flops.dense_expert_params(get_preset("mixtral-8x7b")) == 0


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
    assert many.route_bytes_backward is None


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


def test_the_activation_runs_where_each_mlp_is():
    """The MLP activation's width per block, on average over the stack (calc.timing.mlp_act_width):
    each MLP output projection's input width in the blocks that hold it, times the copies a
    token runs. A uniform dense stack: its intermediate size. Mixed stacks count each kind
    where it is."""
    from calc.presets import get_preset

    assert timing.mlp_act_width(get_preset("llama-3.1-8b")) == 14336
    assert timing.mlp_act_width(get_preset("qwen3-30b-a3b")) == K * W
    # Maverick: 24 MoE blocks (all 128 experts run, plus the shared one) and 24 dense blocks
    assert (
        timing.mlp_act_width(get_preset("llama-4-maverick"))
        == (24 * (128 * 8192 + 8192) + 24 * 16384) / 48
    )
    # Nemotron-H 8B: an MLP in 24 of its 52 one-sublayer blocks
    assert timing.mlp_act_width(get_preset("nemotron-h-8b")) == 24 * 21504 / 52
    # Gemma 4 26B-A4B: a dense MLP beside 8 of 128 experts in every block
    assert timing.mlp_act_width(get_preset("gemma-4-26b-a4b")) == 2112 + 8 * 704


def test_slices_of_a_fused_projection_by_hand():
    """slice_backward writes zeros over the whole width and copies its slice in; autograd sums
    the slices' gradients (calc.timing.slice_backward_bytes, bf16): Phi-3's q, k, v thirds of
    qkv_proj 22 per element, its empty rotary pass-through 8, Phi-4-mini's 0.75 / 0.25 split
    14."""
    assert timing.slice_backward_bytes([1 / 3, 1 / 3, 1 / 3]) == pytest.approx(22.0)
    assert timing.slice_backward_bytes([1.0, 0.0]) == 8.0
    assert timing.slice_backward_bytes([0.75, 0.25]) == 14.0
