"""The time model's per-linear counts over a stack whose blocks differ (Gemma 4's sliding and
full blocks, a hybrid stack's attention and linear-attention blocks, Llama 4's dense and MoE
MLPs): each linear counts in the blocks of its kind only (``ModelArch.blocks_of``)."""

from __future__ import annotations

import pytest

from calc import timing
from calc.memory import estimate_dict
from calc.plan import parse_plan_request

MIXED = ["gemma-4-31b", "qwen3.5-9b", "nemotron-h-8b"]
UNIFORM = ["llama-3.1-8b"]


def _req(model: str, **keys):
    req, _ = parse_plan_request(
        {"model": model, "method": "lora", "gpu": "h100-sxm", "dataset_tokens": 1e9, **keys}
    )
    return req


@pytest.mark.parametrize("model", MIXED + UNIFORM)
def test_adapter_flops_are_six_per_trainable_parameter(model):
    """A rank-r adapter on a dense linear does 2 r (d_in + d_out) FLOPs per token forward and
    twice that backward: 6 per adapter parameter, whatever blocks hold it. The memory model
    counts those parameters from the same structure (``params_trainable``)."""
    keys = {"lora_targets": "all-linear", "lora_rank": 16}
    flops, _ = timing.adapter_matmul_counts(_req(model, **keys), 0.0)
    trainable = estimate_dict({"model": model, "method": "lora", **keys})["params_trainable"]
    assert flops == pytest.approx(6.0 * trainable)


@pytest.mark.parametrize("model", MIXED)
def test_adapter_traffic_counts_each_kind_in_its_own_blocks(model):
    """The LoRA path's element-wise bytes grow by the adapted outputs and inputs of the blocks
    that hold the adapted linear, not of every block."""
    keys = {"lora_dropout": 0.0, "gradient_checkpointing": False}
    base = _req(model, lora_targets=["o_proj"], **keys)
    more = _req(model, lora_targets=["o_proj", "q_proj"], **keys)
    arch = base.model
    added = [lin for lin in arch.linears if lin.name == "q_proj"]
    assert added, model
    # forward, and backward as traced (calc.timing.peft_path_backward_bytes): fp32 adapters on
    # 16-bit layers, no autocast
    per_output = (
        timing.LORA_FP32_BYTES_PER_OUTPUT + timing.LORA_BACKWARD_BYTES_PER_OUTPUT["fp32_branch"]
    )
    per_input = 2 * timing.lora_input_bytes(more) + timing.LORA_INPUT_GRAD_ACCUMULATE_PASSES * 2
    expected = sum(
        arch.blocks_of(lin) * lin.active * (per_output * lin.d_out + per_input * lin.d_in)
        for lin in added
    )
    grown = (
        timing.counts(more, more.sharding).elementwise_bytes_per_token
        - timing.counts(base, base.sharding).elementwise_bytes_per_token
    )
    assert grown == pytest.approx(expected)
    if len(added) > 1:  # q_proj in more than one kind of block: each weighed by its own count
        assert grown < arch.num_layers * sum(
            lin.active * (per_output * lin.d_out + per_input * lin.d_in) for lin in added
        )


def test_kernels_count_each_linear_in_its_own_blocks():
    """Gemma 4 31B dispatches its block's ops once per block: fewer linears than a stack that
    held both kinds' linears in every block would."""
    req = _req("gemma-4-31b", lora_targets="all-linear", gradient_checkpointing=False)
    arch = req.model
    c = timing.counts(req, req.sharding)
    per_block_modules = {}
    for lin in arch.linears:
        per_block_modules.setdefault(lin.block_kind, 0)
        per_block_modules[lin.block_kind] += 1
    assert len(per_block_modules) == 2  # sliding and full
    every_block_both = arch.num_layers * sum(per_block_modules.values())
    weighted = sum(arch.blocks_of(lin) for lin in arch.linears)
    assert weighted < every_block_both
    # the kernels per micro-step count each linear (and its adapter's ops) in its own blocks,
    # and the block's other ops as traced for Gemma 4 (its backward in place of the factor)
    factor = 1 + timing.BACKWARD_OPS_FACTOR
    forward, backward = timing.traced_block_ops(req)
    assert c.kernels_per_micro == pytest.approx(
        (weighted * (1 + timing.LORA_OPS_PER_ADAPTER) + arch.num_layers * forward) * factor
        + arch.num_layers * (backward - timing.BACKWARD_OPS_FACTOR * forward),
        rel=0.02,
    )
