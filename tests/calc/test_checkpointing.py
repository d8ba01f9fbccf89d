"""Activation checkpointing by granularity (calc.checkpointing): torchtitan's every-N-th block
and per-op policies, counted by hand from its rules, against the estimate and the step."""

from __future__ import annotations

import pytest

import calc
from calc import activations as act
from calc import states as st
from calc import timing
from calc.checkpointing import Granularity, block_matmuls, block_wrapped, wrapped_blocks
from calc.errors import InputError
from calc.memory import act_config, activation_bytes, estimate_dict
from calc.presets import get_preset
from calc.request import parse_estimate_request

BASE = {"model": "llama-3-8b", "method": "full", "seq_len": 4096, "precision": "bf16-mixed"}
EVERY_2 = {"checkpointing_granularity": "every-n", "checkpointing_every": 2}
OP = {"checkpointing_granularity": "selective-op"}


def _req(**more):
    return parse_estimate_request({**BASE, **more})


def test_every_n_wraps_blocks_n_2n_and_so_on():
    # torchtitan's counter is raised before the test: blocks N, 2N, ... (1-based)
    assert wrapped_blocks(32, Granularity.EVERY_N, 2) == 16
    assert wrapped_blocks(32, Granularity.EVERY_N, 3) == 10
    assert wrapped_blocks(32, Granularity.EVERY_N, 33) == 0
    assert wrapped_blocks(32, Granularity.FULL, None) == 32
    assert [i for i in range(7) if block_wrapped(i, Granularity.EVERY_N, 3)] == [2, 5]


def test_per_op_policy_keeps_every_other_mm_of_a_llama_block():
    # q(1) k(2) v(3) o(4) gate(5) up(6) down(7): the odd counts are kept
    kept = {m.name: m.kept for m in block_matmuls(get_preset("llama-3-8b"), frozenset(), 16)}
    assert kept == {
        "q_proj": True,
        "k_proj": False,
        "v_proj": True,
        "o_proj": False,
        "gate_proj": True,
        "up_proj": False,
        "down_proj": True,
    }


def test_biased_linears_dispatch_addmm_which_the_list_lacks():
    # Qwen2's q, k, v carry a bias: aten.addmm, recomputed and not counted
    arch = get_preset("qwen2.5-7b")
    assert [l.bias for l in arch.linears[:4]] == [True, True, True, False]
    kept = [m.kept for m in block_matmuls(arch, frozenset(), 16)]
    assert kept == [False, False, False, True, False, True, False]


def test_lora_adapters_add_two_mm_each_in_the_count():
    arch = get_preset("llama-3-8b")
    names = [(m.name, m.kept) for m in block_matmuls(arch, frozenset({"q_proj"}), 8)][:4]
    assert names == [
        ("q_proj", True),
        ("q_proj.lora_A", False),
        ("q_proj.lora_B", True),
        ("k_proj", False),
    ]


def test_selective_op_keeps_the_outputs_its_list_names():
    req = _req(**OP)
    reg = st.request_regime(req)
    cfg = act_config(req, reg)
    h, heads = 4096, 32
    # block input (fp32 residual under mixed precision), q, v, gate, down (bf16), SDPA output
    # and its fp32 log-sum-exp
    by_hand = 4 * h + 2 * (4096 + 1024 + 14336 + 4096) + 2 * heads * 128 + 4 * heads
    tokens = 4096
    a = activation_bytes(req, reg)
    assert a.saved_all - a.head == 32 * by_hand * tokens
    assert a.recompute == act.block_bytes_per_token(req.model, cfg) * tokens


def test_every_n_keeps_the_unwrapped_blocks_whole():
    req, full = _req(**EVERY_2), _req()
    reg = st.request_regime(req)
    cfg = act_config(req, reg)
    tokens = 4096
    block = act.block_bytes_per_token(req.model, cfg) * tokens
    ckpt = act.checkpoint_bytes_per_token(req.model, cfg) * tokens
    a, a_full = activation_bytes(req, reg), activation_bytes(full, reg)
    # block 1 is not wrapped: its first norm's input is saved, as without checkpointing
    head = a_full.head - act.first_norm_unsaved_bytes_per_token(req.model, cfg) * tokens
    assert a.saved_all == 16 * ckpt + 16 * block + head


def test_memory_orders_the_granularities():
    # full fine-tuning in bf16: each kept matmul output is a fraction of what a block saves
    # (LoRA's fp32 adapters make their kept lora_B outputs twice as wide as their base's)
    request = {**BASE, "precision": "bf16-true", "seq_len": 8192}
    saved = [
        estimate_dict({**request, **more})["components"]["activations"]
        for more in ({}, OP, EVERY_2, {"gradient_checkpointing": False})
    ]
    assert saved == sorted(saved) and len(set(saved)) == 4


def test_every_block_is_full_checkpointing():
    one = estimate_dict({**BASE, "checkpointing_granularity": "every-n", "checkpointing_every": 1})
    full = estimate_dict(BASE)
    for out in (one, full):
        del out["request"]
    assert one == full


def test_selective_op_recomputes_the_kept_list_s_complement():
    req = _req(**OP)
    c = timing.counts(req, req.sharding)
    # k, o and up of 32 blocks, 2 FLOPs per weight; SDPA's flash output is kept
    assert c.flops.linear_recompute == 32 * 2.0 * (4096 * 1024 + 4096 * 4096 + 4096 * 14336)
    assert c.flops.recompute == c.flops.linear_recompute
    assert c.flops.attention_recompute_share == 0.0
    full = timing.counts(_req(), req.sharding)
    assert c.kernels_per_micro == full.kernels_per_micro - 32 * 5  # q, v, gate, down, SDPA


def test_every_n_recomputes_its_share_of_the_forward():
    req = _req(**EVERY_2)
    c, full = timing.counts(req, req.sharding), timing.counts(_req(), req.sharding)
    assert c.flops.recompute == pytest.approx(full.flops.forward / 2)
    assert c.flops.attention_recompute_share == 0.5
    assert c.passes == 2.5


def _step_seconds(request: dict) -> float:
    plan = calc.run("plan", {**request, "gpu": "a100-80gb-sxm", "dataset_tokens": 1e8})
    return plan["result"]["time"]["step"]["seconds"]


def test_time_orders_the_granularities():
    seconds = [
        _step_seconds({**BASE, **more})
        for more in ({"gradient_checkpointing": False}, OP, EVERY_2, {})
    ]
    assert seconds == sorted(seconds) and len(set(seconds)) == 4


def test_selective_op_recomputes_attention_on_a_kernel_its_list_lacks():
    # on an H100, torch's default order runs cuDNN attention, which the 2024-2025 list lacks
    req = _req(**OP)
    c = timing.counts(req, req.sharding)
    rates = timing.card_rates(calc.gpus.get_gpu("h100-sxm"), 1)
    rates_a100 = timing.card_rates(calc.gpus.get_gpu("a100-80gb-sxm"), 1)
    args = dict(num_gpus=1, sharding=req.sharding, cpu_offload=req.cpu_offload, efficiency=0.6)
    kept = timing.replace(c, attention_kept_if_flash=False)
    more = timing.step_breakdown(c, rates, **args).compute
    assert more > timing.step_breakdown(kept, rates, **args).compute
    # an A100 runs flash: kept
    assert timing.step_breakdown(c, rates_a100, **args) == timing.step_breakdown(
        kept, rates_a100, **args
    )


@pytest.mark.parametrize(
    ("more", "code", "field"),
    [
        ({"checkpointing_granularity": "layer"}, "unknown_value", "checkpointing_granularity"),
        ({"checkpointing_granularity": "every-n"}, "missing_field", "checkpointing_every"),
        (
            {"checkpointing_granularity": "every-n", "checkpointing_every": 0},
            "not_positive",
            "checkpointing_every",
        ),
        (
            {"checkpointing_granularity": "every-n", "checkpointing_every": 1.5},
            "not_integer",
            "checkpointing_every",
        ),
        (
            {"checkpointing_granularity": "selective-op", "gradient_checkpointing": False},
            "checkpointing_granularity_without_checkpointing",
            "checkpointing_granularity",
        ),
    ],
)
def test_bad_granularities_are_coded_errors(more, code, field):
    with pytest.raises(InputError) as err:
        _req(**more)
    assert (err.value.code, err.value.field) == (code, field)


@pytest.mark.parametrize(
    "more", [{"method": "qlora"}, {"model": "qwen3-30b-a3b", "method": "lora"}]
)
def test_selective_op_elsewhere_is_counted_as_full_and_says_so(more):
    sac = estimate_dict({**BASE, **more, **OP})
    full = estimate_dict({**BASE, **more})
    assert "selective_op_counted_as_full" in sac["warnings"]
    assert sac["peak_allocated_bytes"] == full["peak_allocated_bytes"]


def test_an_unused_n_is_a_warning():
    out = estimate_dict({**BASE, "checkpointing_every": 4})
    assert "checkpointing_every_ignored" in out["warnings"]
    assert out["peak_allocated_bytes"] == estimate_dict(BASE)["peak_allocated_bytes"]
