"""Liger-Kernel's modules (``liger_kernel``): what they save, read from liger-kernel v0.8.2, and
how configs that turn them on reach the request."""

from __future__ import annotations

import pytest

from calc import activations as act
from calc import states as st
from calc.config_import import import_config
from calc.liger import flce_chunk_tokens, patches
from calc.memory import act_config, estimate_dict
from calc.request import parse_estimate_request

H, I, V = 4096, 14336, 128256  # Llama 3.1 8B


@pytest.mark.parametrize(
    "tokens, chunk",
    [
        (8192, 256),  # inc_factor ceil(V / H) = 32: ceil(8192 / 32) = 256, a power of 2
        (5000, 256),  # ceil(5000 / 32) = 157, up to the next power of 2
        (300_000, 16384),  # ceil(300000 / 32) = 9375
        (32, 1),
        (1, 1),
    ],
)
def test_flce_chunk_is_the_next_power_of_two_of_tokens_over_v_over_h(tokens, chunk):
    assert flce_chunk_tokens(tokens, V, H) == chunk


def test_flce_chunk_never_exceeds_the_tokens():
    # a vocabulary no larger than the hidden size: inc_factor 1, next power of 2 of the tokens
    assert flce_chunk_tokens(100, 1000, 4096) == 100


def _block_and_workspace(**more: object) -> tuple[int, int]:
    req = parse_estimate_request(
        {"model": "llama-3.1-8b", "precision": "bf16-true", "seq_len": 1024, **more}
    )
    reg = st.request_regime(req)
    cfg = act_config(req, reg)
    return (
        act.block_bytes_per_token(req.model, cfg),
        act.backward_workspace_bytes_per_token(req.model, cfg),
    )


@pytest.mark.parametrize(
    "method, saved",
    [
        # two RMSNorms: 6h + 4 (fp32 copy, rsqrt, the normalised 16-bit copy the trained weight's
        # mul saves) -> 2h + 4 each; the MLP's act(gate) output no longer saved: 2 I
        ("full", 8 * H + 2 * I),
        # the norms' weights frozen: 4h + 4 -> 2h + 4 each
        ("lora", 4 * H + 2 * I),
    ],
)
def test_a_llama_block_saves_what_liger_kernel_v082_keeps(method, saved):
    stock, stock_work = _block_and_workspace(method=method)
    liger, liger_work = _block_and_workspace(method=method, liger_kernel=True)
    assert stock - liger == saved
    # the gate's and up's gradients written into the saved inputs: one I-wide 16-bit gradient
    assert stock_work - liger_work == 2 * I


def test_the_fused_loss_holds_hidden_states_their_gradient_a_chunk_and_the_head_gradient():
    arch = parse_estimate_request({"model": "llama-3.1-8b"}).model
    tokens = 8192
    frozen = act.liger_flce_loss_bytes(arch, 2, tokens, None)
    assert frozen == tokens * 2 * 2 * H + 256 * V * 2
    trained = act.liger_flce_loss_bytes(arch, 2, tokens, 2)
    # grad_weight in the weight's dtype, and the per-chunk 16-bit product and its fp32 copy
    assert trained - frozen == V * H * (2 + act.LIGER_HEAD_GRAD_TRANSIENT_BYTES)


def test_with_the_chunked_loss_liger_replaces_the_whole_logits_at_long_context():
    base = {
        "model": "llama-3.1-8b",
        "method": "lora",
        "seq_len": 16384,
        "chunked_loss": True,
        "gradient_checkpointing": True,
    }
    stock = estimate_dict(base)
    liger = estimate_dict({**base, "liger_kernel": True})
    assert liger["peak_allocated_bytes"] < stock["peak_allocated_bytes"]
    assert "liger_kernel_not_applied" not in liger["warnings"]


def test_a_family_liger_does_not_patch_gets_the_warning_and_the_stock_count():
    assert not patches("gpt2") and patches("llama") and patches("qwen3")
    base = {"model": "gpt2", "method": "full", "seq_len": 512}
    stock = estimate_dict(base)
    marked = estimate_dict({**base, "liger_kernel": True})
    assert "liger_kernel_not_applied" in marked["warnings"]
    assert marked["peak_allocated_bytes"] == stock["peak_allocated_bytes"]


@pytest.mark.parametrize("on", [True, False])
@pytest.mark.parametrize(
    "fmt, text",
    [
        ("trl", "output_dir: x\nuse_liger_kernel: {}\n"),
        ("llamafactory", "stage: sft\nfinetuning_type: lora\nenable_liger_kernel: {}\n"),
    ],
)
def test_configs_that_turn_liger_on_set_the_key_and_its_loss(fmt, text, on):
    request = import_config(text.format(str(on).lower()), fmt)["request"]
    if on:
        assert request["liger_kernel"] is True
        assert request["chunked_loss"] is True
    else:  # off: the config leaves both keys to the profile
        assert "liger_kernel" not in request


def _actions(**more: object) -> dict[str, dict]:
    from calc import plan_setup

    base = {"model": "llama-3.1-8b", "gpu": "h100-sxm", "seq_len": 16384, "dataset_tokens": 1e7}
    return {s["action"]: s for s in plan_setup({**base, **more})["suggestions"]}


def test_the_plan_suggests_liger_where_the_reader_can_turn_it_on():
    found = _actions(method="full", gradient_checkpointing=True)["liger_kernel"]
    assert found["changes"] == {"liger_kernel": True, "chunked_loss": True}
    assert found["saved_bytes"] > 0


@pytest.mark.parametrize(
    "more",
    [
        {"liger_kernel": True},  # already on
        {"framework": "unsloth", "method": "qlora"},  # its own kernels
        {"framework": "torchtune", "method": "lora"},  # its own modules
        {"model": "gpt2", "seq_len": 1024},  # a family Liger's modules are not counted for
    ],
)
def test_the_plan_does_not_suggest_liger_where_it_cannot_apply(more):
    assert "liger_kernel" not in _actions(**more)
