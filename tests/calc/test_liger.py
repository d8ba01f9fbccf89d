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


# ---- time: Liger's kernels priced by the bytes they move (calc.timing) -----------------------


def _counts(**more: object):
    from calc import timing

    req = parse_estimate_request({"model": "llama-3.1-8b", "seq_len": 4096, **more})
    return timing.counts(req, req.sharding)


@pytest.mark.parametrize("method", ["full", "lora"])
def test_liger_replaces_the_blocks_element_wise_traffic_with_its_kernels(method):
    from calc import timing

    stock = _counts(method=method, gradient_checkpointing=False)
    liger = _counts(method=method, gradient_checkpointing=False, liger_kernel=True)
    q_kv = 32 * 128 + 8 * 128
    # eager: two norms (36 bytes per element forward, the traced backward 92 with the weight
    # trained, 84 frozen), rotary on q and k (20, backward 32), the gated activation (10,
    # backward 18) -> Liger's own forward + backward bytes
    norm_back = 92 if method == "full" else 84
    before = 2 * (36 + norm_back) * H + (20 + 32) * q_kv + (10 + 18) * I
    after = 2 * (4 + 6) * H + (4 + 4) * q_kv + (6 + 10) * I
    per_token = 32 * (before - after)  # 32 blocks, no recompute
    assert stock.elementwise_bytes_per_token - liger.elementwise_bytes_per_token == per_token
    # 24 host ops per block's forward fewer (norms 8 -> 1 each, rotary 10 -> 1, act 2 -> 1),
    # each with its two backward ops
    assert stock.kernels_per_micro - liger.kernels_per_micro == 32 * 24 * (
        1 + timing.BACKWARD_OPS_FACTOR
    )


def test_liger_recomputed_forward_runs_its_forward_kernels_again():
    plain = _counts(method="lora", liger_kernel=True, gradient_checkpointing=False)
    checkpointed = _counts(method="lora", liger_kernel=True, gradient_checkpointing=True)
    stock_plain = _counts(method="lora", gradient_checkpointing=False)
    stock_ckpt = _counts(method="lora", gradient_checkpointing=True)
    liger_forward = 2 * 4 * H + 4 * (32 * 128 + 8 * 128) + 6 * I
    stock_extra = stock_ckpt.elementwise_bytes_per_token - stock_plain.elementwise_bytes_per_token
    extra = checkpointed.elementwise_bytes_per_token - plain.elementwise_bytes_per_token
    # the recompute adds Liger's forward where the stock path adds its own forward tables
    assert stock_extra - extra == 32 * (2 * 36 * H + 20 * (32 * 128 + 8 * 128) + 10 * I) - (
        32 * liger_forward
    )


@pytest.mark.parametrize(
    "precision, path, per_chunk",
    [
        # pure bf16: grad_weight is bf16: mm, .float() and the add, per chunk
        ("bf16-true", "cast", 16),
        # AMP: fp32 weight, fp32 grad_weight: torch.addmm(out_dtype=fp32) into it
        ("bf16-mixed", "addmm", 8),
    ],
)
def test_the_fused_loss_accumulates_the_head_gradient_once_per_chunk(precision, path, per_chunk):
    from calc import timing

    tokens = 2 * 4096
    chunks = 32  # ceil(8192 / 256)
    stock = _counts(method="full", precision=precision, micro_batch_size=2, liger_kernel=True)
    fused = _counts(
        method="full",
        precision=precision,
        micro_batch_size=2,
        liger_kernel=True,
        chunked_loss=True,
    )
    w = 2 if path == "cast" else 4
    head = V * H * (chunks * per_chunk + 3 * w) / tokens
    loss_change = (6 - 24) * V + 10 * H + head
    assert fused.elementwise_bytes_per_token - stock.elementwise_bytes_per_token == pytest.approx(
        loss_change
    )
    ops = timing.LIGER_FLCE_OPS_PER_CHUNK
    assert fused.kernels_per_micro - stock.kernels_per_micro == chunks * (ops["base"] + ops[path])
    # fp32 on a card before compute capability 8: the cast path, 20 bytes a chunk
    extra = V * H * chunks * (20 - 8) / tokens if path == "addmm" else 0.0
    assert fused.liger_head_pre_ampere_bytes_per_token == pytest.approx(extra)


def test_a_frozen_output_layer_has_no_head_gradient_to_accumulate():
    lora = _counts(method="lora", liger_kernel=True)
    fused = _counts(method="lora", liger_kernel=True, chunked_loss=True)
    assert fused.elementwise_bytes_per_token - lora.elementwise_bytes_per_token == pytest.approx(
        (6 - 24) * V + 10 * H
    )


def test_liger_time_leaves_a_family_it_does_not_patch_alone():
    req = {"model": "gpt-oss-20b", "method": "lora", "seq_len": 2048}
    from calc import timing

    a = parse_estimate_request(req)
    b = parse_estimate_request({**req, "liger_kernel": True, "chunked_loss": True})
    ca, cb = timing.counts(a, a.sharding), timing.counts(b, b.sharding)
    assert ca.elementwise_bytes_per_token == cb.elementwise_bytes_per_token
    assert ca.kernels_per_micro == cb.kernels_per_micro


def test_liger_speeds_a_plan_up_where_it_moves_fewer_bytes():
    from accuracy.first_contact_throughput import predict

    base = {"model": "llama-3.1-8b", "method": "lora", "gpu": "h100-sxm", "seq_len": 4096}
    assert predict({**base, "liger_kernel": True}) > predict(base)


def test_an_fp32_head_weight_accumulates_its_gradient_in_place():
    # fp32 grad_weight: torch.addmm(out_dtype=fp32, out=grad_weight), no per-chunk [V, h] copies
    arch = parse_estimate_request({"model": "llama-3.1-8b"}).model
    frozen = act.liger_flce_loss_bytes(arch, 2, 8192, None)
    assert act.liger_flce_loss_bytes(arch, 2, 8192, 4) - frozen == V * H * 4


# ---- axolotl's Liger plugin: one key per module ---------------------------------------------

_AXOLOTL_LIGER = """base_model: meta-llama/Llama-3.1-8B
{plugins}liger_rope: {rope}
liger_rms_norm: true
{glu}: true
liger_fused_linear_cross_entropy: true
"""
_PLUGIN = "plugins:\n  - axolotl.integrations.liger.LigerPlugin\n"


def _axolotl(plugins: str = _PLUGIN, rope: str = "true", glu: str = "liger_glu_activation"):
    result = import_config(_AXOLOTL_LIGER.format(plugins=plugins, rope=rope, glu=glu), "axolotl")
    return result["request"], {k["key"]: k for k in result["keys"]}


@pytest.mark.parametrize("glu", ["liger_glu_activation", "liger_swiglu"])
def test_axolotl_liger_plugin_with_every_module_sets_the_key(glu):
    request, keys = _axolotl(glu=glu)
    assert request["liger_kernel"] is True and request["chunked_loss"] is True
    for key in ("liger_rope", "liger_rms_norm", glu):
        assert keys[key]["status"] == "used" and keys[key]["field"] == "liger_kernel"


def test_axolotl_liger_modules_switched_on_in_part_are_reported_not_modelled():
    request, keys = _axolotl(rope="false")
    assert "liger_kernel" not in request
    assert keys["liger_rms_norm"]["status"] == "unknown"
    assert keys["liger_rms_norm"]["note"] == "liger_modules_partial"
    assert request["chunked_loss"] is True  # the fused loss is still Liger's own


def test_axolotl_liger_keys_without_the_plugin_do_nothing():
    request, keys = _axolotl(plugins="")
    assert "liger_kernel" not in request
    assert keys["liger_rope"]["note"] == "liger_plugin_not_loaded"


def test_axolotl_export_writes_the_liger_plugin_and_reads_back():
    from calc.config_import.export import export_axolotl

    text = export_axolotl(
        {"model": "llama-3.1-8b", "method": "full", "liger_kernel": True, "chunked_loss": True}
    )
    assert "axolotl.integrations.liger.LigerPlugin" in text
    request = import_config(text, "axolotl")["request"]
    assert request["liger_kernel"] is True and request["chunked_loss"] is True


@pytest.mark.parametrize(
    "stage, fused", [("sft", True), ("pt", True), ("dpo", False), ("rm", False)]
)
def test_llamafactory_fuses_the_loss_only_for_stages_that_need_no_logits(stage, fused):
    # model/loader.py: apply_liger_kernel(..., require_logits=stage not in ["pt", "sft"])
    result = import_config(
        f"stage: {stage}\nfinetuning_type: lora\nenable_liger_kernel: true\n", "llamafactory"
    )
    request = result["request"]
    assert request["liger_kernel"] is True
    assert request["chunked_loss"] is fused
    stage_key = next(k for k in result["keys"] if k["key"] == "stage")
    if fused:
        assert stage_key["status"] == "ignored"
    else:  # preference and reward stages: reported, not silently read as supervised
        assert stage_key["status"] == "unknown"
        assert stage_key["note"] == "training_stage_not_modelled"
