"""Dropout with p > 0 is counted in the time model: GPT-2's probabilities and residual branches."""

from __future__ import annotations

import pytest

from calc import timing
from calc.plan import parse_plan_request

GPT2 = {"model_type": "gpt2", "n_embd": 768, "n_head": 12, "n_layer": 12, "vocab_size": 50257}


def _counts(pdrop: float, **request):
    config = {**GPT2, "attn_pdrop": pdrop, "resid_pdrop": pdrop, "embd_pdrop": pdrop}
    req, opts = parse_plan_request(
        {
            "model": {"hf_config": config, "name": "gpt2-shaped"},
            "method": "full",
            "gpu": "a100-80gb-sxm",
            "attention": "eager",
            "seq_len": 1024,
            "micro_batch_size": 8,
            "gradient_checkpointing": False,
            "dataset_tokens": 1e9,
            **request,
        }
    )
    return timing.counts(req, req.sharding), timing.card_rates(opts.gpu, 1)


def test_probabilities_dropped_out_move_their_passes_and_mask():
    (off, rates), (on, _) = _counts(0.0), _counts(0.1)
    capability = rates.capability
    fwd_off, bwd_off = timing.score_bytes_per_token(off, capability)
    fwd_on, bwd_on = timing.score_bytes_per_token(on, capability)
    # heads x keys x layers score elements per token, each 2 x 2 + 1 bytes more each way
    elements = 12 * 1024 * 12
    per = timing.DROPOUT_PASSES * 2 + timing.DROPOUT_MASK_BYTES
    assert per == 5
    assert fwd_on - fwd_off == pytest.approx(elements * per)
    assert bwd_on - bwd_off == pytest.approx(elements * per)


def test_residual_dropouts_move_their_bytes_and_launch_their_ops():
    (off, _), (on, _) = _counts(0.0), _counts(0.1)
    # two residual dropouts per block, 768 wide, forward and backward (no recompute), bf16
    residual = 12 * timing.RESIDUAL_DROPOUTS_PER_LAYER * 768 * 5 * 2
    assert on.elementwise_bytes_per_token - off.elementwise_bytes_per_token == pytest.approx(
        residual
    )
    # per block: the probabilities' dropout and the two residual ones, forward and backward
    ops = 12 * (1 + timing.RESIDUAL_DROPOUTS_PER_LAYER) * (1 + timing.BACKWARD_OPS_FACTOR)
    assert on.kernels_per_micro - off.kernels_per_micro == ops


def test_compiled_dropout_moves_nothing_apart():
    (off, rates), (on, _) = _counts(0.0, torch_compile=True), _counts(0.1, torch_compile=True)
    assert timing.score_bytes_per_token(on, rates.capability) == timing.score_bytes_per_token(
        off, rates.capability
    )
    assert on.elementwise_bytes_per_token == off.elementwise_bytes_per_token
    assert on.kernels_per_micro == off.kernels_per_micro
