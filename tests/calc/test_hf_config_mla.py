"""Multi-head latent attention (DeepSeek-V3, Kimi K2), the DeepSeek-style MoE layout (GLM-4.5,
MiniMax-M2) and the dense families OLMo 3, Ministral 3 and Seed-OSS: how calc reads their
config.json, counts them, and refuses shapes that contradict each other."""

from __future__ import annotations

import pytest

from calc import activations as act
from benchmarks.oracle_sweep import ACCEPTED_FAMILIES
from calc.errors import ConfigError
from calc.flops import attention_forward_flops_per_token
from calc.hf_config import MODEL_TYPES, arch_from_hf_config

# the sweep's reduced deepseek_v3 config (benchmarks.oracle_sweep), without the keys calc does not read
DEEPSEEK = {
    k: v
    for k, v in ACCEPTED_FAMILIES["deepseek_v3"].items()
    if k not in ("max_position_embeddings", "pad_token_id")
}
GLM = {
    "model_type": "glm4_moe",
    "hidden_size": 512,
    "intermediate_size": 1024,
    "moe_intermediate_size": 192,
    "num_hidden_layers": 3,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "attention_bias": True,
    "use_qk_norm": True,
    "n_routed_experts": 8,
    "num_experts_per_tok": 2,
    "n_shared_experts": 1,
    "first_k_dense_replace": 1,
    "vocab_size": 8000,
}
MINIMAX = {
    "model_type": "minimax_m2",
    "hidden_size": 512,
    "intermediate_size": 192,
    "num_hidden_layers": 2,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "num_local_experts": 8,
    "num_experts_per_tok": 2,
    "vocab_size": 8000,
}
SEED = {
    "model_type": "seed_oss",
    "hidden_size": 512,
    "intermediate_size": 1376,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "num_hidden_layers": 2,
    "vocab_size": 8000,
}
OLMO3 = {
    "model_type": "olmo3",
    "hidden_size": 512,
    "intermediate_size": 1376,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "num_hidden_layers": 4,
    "vocab_size": 8000,
}
MINISTRAL3 = {
    "model_type": "ministral3",
    "hidden_size": 512,
    "intermediate_size": 1376,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "num_hidden_layers": 2,
    "vocab_size": 8000,
}


def test_model_types_read():
    for t in ("deepseek_v3", "kimi_k2", "mistral4", "glm4_moe_lite", "glm4_moe", "minimax_m2"):
        assert t in MODEL_TYPES
    for t in ("olmo3", "ministral3", "seed_oss"):
        assert t in MODEL_TYPES


def test_deepseek_v3_parameters_module_by_module():
    arch = arch_from_hf_config(DEEPSEEK)
    h, heads, qk, v = 512, 8, 64 + 32, 64
    attn = (
        h * 192  # q_a_proj
        + 192 * heads * qk  # q_b_proj
        + h * (128 + 32)  # kv_a_proj_with_mqa
        + 128 * heads * (64 + v)  # kv_b_proj
        + heads * v * h  # o_proj
        + 192
        + 128  # q_a_layernorm, kv_a_layernorm
        + 2 * h  # input and post-attention RMSNorm
    )
    dense = 3 * h * 1024
    moe = 8 * 3 * h * 192 + h * 8 + 3 * h * 192  # routed experts, router, one shared expert
    assert arch.params_total == 2 * 8000 * h + 2 * attn + dense + moe + h
    assert arch.params_active == arch.params_total - 6 * 3 * h * 192
    assert dict(arch.block_counts) == {"moe": 1, "dense": 1}
    assert (arch.head_dim, arch.v_head_dim, arch.qk_rope_head_dim) == (96, 64, 32)
    parts = act.block_parts(arch)
    assert [l.name for l in parts.attn_in] == ["q_a_proj", "kv_a_proj_with_mqa"]
    assert [l.name for l in parts.attn_inner] == ["q_b_proj", "kv_b_proj"]
    assert parts.attn_out.name == "o_proj"


def test_deepseek_v3_without_q_rank_has_a_plain_q_proj():
    arch = arch_from_hf_config({**DEEPSEEK, "q_lora_rank": None})
    names = [l.name for l in arch.linears if l.role == "attn"]
    assert names == ["q_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj"]
    assert arch.q_lora_rank == 0 and arch.block_extra_params == 128


def test_mistral4_and_glm4_moe_lite_are_read_as_deepseek_v3s_modules():
    m4 = arch_from_hf_config({**DEEPSEEK, "model_type": "mistral4", "n_group": 1})
    assert m4.family == "mistral4" and "router_fp32_input" not in m4.extra
    assert not arch_from_hf_config(
        {k: v for k, v in DEEPSEEK.items() if k != "first_k_dense_replace"}
        | {"model_type": "mistral4", "n_group": 1}
    ).block_counts  # Mistral4Config.first_k_dense_replace 0: every block sparse
    lite = {**DEEPSEEK, "model_type": "glm4_moe_lite", "num_hidden_layers": 3}
    del lite["first_k_dense_replace"]
    assert dict(arch_from_hf_config(lite).block_counts) == {"moe": 2, "dense": 1}
    kinds = {**lite, "mlp_layer_types": ["dense", "dense", "sparse"]}
    assert dict(arch_from_hf_config(kinds).block_counts) == {"moe": 1, "dense": 2}
    with pytest.raises(ConfigError) as err:
        arch_from_hf_config({**lite, "mlp_layer_types": ["dense", "sparse"]})
    assert err.value.field == "hf_config.mlp_layer_types"


def test_every_block_dense_or_every_block_sparse():
    dense = arch_from_hf_config({**DEEPSEEK, "first_k_dense_replace": 5})
    assert dense.num_experts == 0 and not dense.block_counts
    sparse = arch_from_hf_config({**DEEPSEEK, "first_k_dense_replace": 0})
    assert sparse.num_experts == 8 and not sparse.block_counts
    assert all(l.role != "mlp" or l.count == 8 or l.d_in in (512, 192) for l in sparse.linears)


def test_kimi_k25_reads_its_kimi_k2_text_config_as_deepseek_v3():
    wrapper = {"model_type": "kimi_k25", "text_config": {**DEEPSEEK, "model_type": "kimi_k2"}}
    arch = arch_from_hf_config(wrapper)
    assert arch.family == "deepseek_v3" and arch.extra["text_config_only"]
    assert arch.params_total == arch_from_hf_config(DEEPSEEK).params_total
    # Kimi_K25Config reads a text_config that names no model_type as deepseek_v3
    bare = {k: v for k, v in DEEPSEEK.items() if k != "model_type"}
    unnamed = arch_from_hf_config({"model_type": "kimi_k25", "text_config": bare})
    assert unnamed.family == "deepseek_v3" and unnamed.params_total == arch.params_total


def test_glm4_moe_and_minimax_m2_layouts():
    glm = arch_from_hf_config(GLM)
    assert dict(glm.block_counts) == {"moe": 2, "dense": 1}
    assert glm.extra["qk_norm_per_head"] and glm.block_extra_params == 2 * 64
    q = next(l for l in glm.linears if l.name == "q_proj")
    o = next(l for l in glm.linears if l.name == "o_proj")
    assert q.bias and not o.bias
    mm = arch_from_hf_config(MINIMAX)
    assert {l.name for l in mm.linears if l.count == 8} == {"w1", "w2", "w3"}
    assert mm.extra["qk_norm_whole"] and mm.block_extra_params == (8 + 2) * 64
    assert mm.shared_expert_intermediate_size == 0


def test_seed_oss_biases_and_dropout():
    arch = arch_from_hf_config(SEED)
    bias = {l.name: l.bias for l in arch.linears}
    assert bias == {
        "q_proj": True,
        "k_proj": True,
        "v_proj": True,
        "o_proj": False,
        "gate_proj": False,
        "up_proj": False,
        "down_proj": False,
    }
    assert arch.extra["residual_dropout"] and arch.extra["eager_attention_dropout"]
    quiet = arch_from_hf_config({**SEED, "residual_dropout": 0.0, "attention_dropout": 0.0})
    assert "residual_dropout" not in quiet.extra and "eager_attention_dropout" not in quiet.extra


def test_olmo3_is_olmo2s_block_and_ministral3_mistrals():
    olmo3 = arch_from_hf_config(OLMO3)
    olmo2 = arch_from_hf_config({**OLMO3, "model_type": "olmo2"})
    assert olmo3.params_total == olmo2.params_total
    assert olmo3.extra["qk_norm_whole"] and olmo3.extra["norm_scale_fp32"]
    m3 = arch_from_hf_config(MINISTRAL3)
    assert m3.head_dim == 128  # Ministral3Config.head_dim default, not hidden / heads


def _cfg(attention, full=False, adapted=frozenset()):
    return act.ActConfig(2, 2, full, adapted, 16, attention, 256, False, grouped_kv=True)


def test_mla_saved_attention_tensors():
    """SDPA keeps kv_b_proj's whole output through the value slice; flash-attn pads v to the
    q/k width instead; eager saves the probabilities."""
    arch = arch_from_hf_config(DEEPSEEK)
    o_proj = act.block_parts(arch).attn_out
    heads, qk, nope, v = 8, 96, 64, 64
    sdpa = act.attention_core_bytes(arch, _cfg(act.Attention.SDPA), o_proj)
    assert sdpa == 2 * (2 * heads * qk + heads * (nope + v) + heads * v) + 4 * heads
    flash = act.attention_core_bytes(arch, _cfg(act.Attention.FLASH), o_proj)
    assert flash == 2 * 4 * heads * qk + 4 * heads
    eager = act.attention_core_bytes(arch, _cfg(act.Attention.EAGER), o_proj)
    assert eager == 2 * (2 * heads * qk + heads * (nope + v)) + heads * 256 * 6
    full = act.attention_core_bytes(arch, _cfg(act.Attention.SDPA, full=True), o_proj)
    assert full == sdpa + 2 * heads * v  # the output projection's contiguous input


def test_mla_latent_norms_and_up_projection_inputs():
    arch = arch_from_hf_config(DEEPSEEK)
    parts = act.block_parts(arch)
    frozen = act.mla_latent_bytes(arch, _cfg(act.Attention.SDPA), parts)
    assert frozen == (4 * 192 + 4) + (4 * 128 + 4)
    full = act.mla_latent_bytes(arch, _cfg(act.Attention.SDPA, full=True), parts)
    assert full == frozen + 2 * (192 + 128) + 2 * (192 + 128)  # normalised copies, b_proj inputs
    q_b = next(l for l in arch.linears if l.name == "q_b_proj")
    adapted = frozenset({(q_b.name, q_b.d_in, q_b.d_out, q_b.role)})
    lora = act.mla_latent_bytes(arch, _cfg(act.Attention.SDPA, adapted=adapted), parts)
    assert lora == frozen + 2 * 192
    llama = arch_from_hf_config({**MINISTRAL3, "model_type": "llama", "head_dim": 64})
    assert act.mla_latent_bytes(llama, _cfg(act.Attention.SDPA), act.block_parts(llama)) == 0
    assert act.block_parts(llama).attn_inner == ()


def test_router_fp32_input_saved_only_when_the_router_trains():
    arch = arch_from_hf_config(DEEPSEEK)
    parts = act.block_parts(arch)
    assert act.router_input_bytes(arch, _cfg(act.Attention.SDPA), parts) == 0
    # one MoE block of two: the per-block average of a 4 h fp32 copy
    assert act.router_input_bytes(arch, _cfg(act.Attention.SDPA, full=True), parts) == 4 * 512 // 2
    mm = arch_from_hf_config(MINIMAX)
    assert act.router_input_bytes(mm, _cfg(act.Attention.SDPA, full=True), act.block_parts(mm)) == 0


def test_mla_rope_and_attention_flops():
    arch = arch_from_hf_config(DEEPSEEK)
    assert act.rope_bytes_per_token(arch, _cfg(act.Attention.SDPA)) == 2 * 2 * 32
    flops = attention_forward_flops_per_token(arch, 1024, "eager")
    assert flops == 2.0 * 2 * 1024 * 8 * (96 + 64)


def test_seed_oss_eager_dropout_mask():
    arch = arch_from_hf_config(SEED)
    quiet = arch_from_hf_config({**SEED, "attention_dropout": 0.0})
    o = act.block_parts(arch).attn_out
    eager = _cfg(act.Attention.EAGER)
    assert act.attention_core_bytes(arch, eager, o) == act.attention_core_bytes(quiet, eager, o) + (
        8 * 256
    )
    sdpa = _cfg(act.Attention.SDPA)
    assert act.attention_core_bytes(arch, sdpa, o) == act.attention_core_bytes(quiet, sdpa, o)


@pytest.mark.parametrize(
    "cfg, key, value, code",
    [
        (DEEPSEEK, "kv_lora_rank", None, "config_missing_key"),
        (DEEPSEEK, "qk_rope_head_dim", None, "config_missing_key"),
        (DEEPSEEK, "v_head_dim", None, "config_missing_key"),
        (DEEPSEEK, "kv_lora_rank", 0, "config_invalid_value"),
        (DEEPSEEK, "num_key_value_heads", 3, "config_kv_heads_indivisible"),
        (DEEPSEEK, "num_experts_per_tok", 9, "config_top_k_above_experts"),
        (DEEPSEEK, "n_group", 3, "config_invalid_value"),  # 8 experts in 3 groups
        (DEEPSEEK, "n_group", 8, "config_invalid_value"),  # groups of one: top-2 per group fails
        (DEEPSEEK, "topk_group", 3, "config_invalid_value"),
        (DEEPSEEK, "first_k_dense_replace", -1, "config_invalid_value"),
        (DEEPSEEK, "n_shared_experts", "one", "config_invalid_value"),
        (GLM, "num_experts_per_tok", 9, "config_top_k_above_experts"),
        (GLM, "num_key_value_heads", 3, "config_kv_heads_indivisible"),
        (GLM, "moe_intermediate_size", None, "config_missing_key"),
        (MINIMAX, "num_experts_per_tok", 16, "config_top_k_above_experts"),
        (MINIMAX, "num_local_experts", None, "config_missing_key"),
        (SEED, "residual_dropout", 1.5, "config_invalid_value"),
        (SEED, "num_key_value_heads", 3, "config_kv_heads_indivisible"),
        (OLMO3, "layer_types", ["full_attention"] * 3, "config_layer_types_length"),
        (MINISTRAL3, "num_key_value_heads", 5, "config_kv_heads_indivisible"),
    ],
)
def test_inconsistent_shapes_are_coded_errors(cfg, key, value, code):
    bad = {k: v for k, v in cfg.items() if k != key}
    if value is not None:
        bad[key] = value
    with pytest.raises(ConfigError) as err:
        arch_from_hf_config(bad)
    assert (err.value.code, err.value.field) == (code, "hf_config." + key)


def test_heads_not_dividing_hidden_without_head_dim():
    cfg = {k: v for k, v in GLM.items() if k != "head_dim"}
    with pytest.raises(ConfigError) as err:
        arch_from_hf_config({**cfg, "num_attention_heads": 6, "num_key_value_heads": 2})
    assert (err.value.code, err.value.field) == (
        "config_heads_indivisible",
        "hf_config.num_attention_heads",
    )


def test_q_lora_rank_absent_is_a_missing_key_but_null_is_a_plain_q_proj():
    cfg = {k: v for k, v in DEEPSEEK.items() if k != "q_lora_rank"}
    with pytest.raises(ConfigError) as err:
        arch_from_hf_config(cfg)
    assert (err.value.code, err.value.field) == ("config_missing_key", "hf_config.q_lora_rank")


def test_olmo3_fp32_rope_and_post_norms_in_the_first_block():
    """Olmo3RotaryEmbedding keeps cos and sin in fp32; the first block's post-attention norm
    reads the attention output, which requires grad once the attention trains."""
    olmo3 = arch_from_hf_config(OLMO3)
    cfg = _cfg(act.Attention.SDPA)
    assert act.rope_bytes_per_token(olmo3, cfg) == 2 * 4 * 64
    q = next(l for l in olmo3.linears if l.name == "q_proj")
    up = next(l for l in olmo3.linears if l.name == "up_proj")
    attn = _cfg(act.Attention.SDPA, adapted=frozenset({(q.name, q.d_in, q.d_out, q.role)}))
    assert act.first_norm_unsaved_bytes_per_token(olmo3, attn) == 0
    mlp = _cfg(act.Attention.SDPA, adapted=frozenset({(up.name, up.d_in, up.d_out, up.role)}))
    parts = act.block_parts(olmo3)
    assert act.first_norm_unsaved_bytes_per_token(olmo3, mlp) == (
        act.norm_bytes(olmo3, mlp)
        + act.attention_core_bytes(olmo3, mlp, parts.attn_out)
        + act.qk_norm_bytes(olmo3, mlp)
    )


def test_a_shared_expert_as_wide_as_the_routed_ones_keeps_its_own_adapter_identity():
    """DeepSeek-style configs give the shared expert the routed experts' name and widths
    (one shared expert of ``moe_intermediate_size``). Mistral 4's routed experts are 3-D
    parameters peft does not convert, so "all-linear" adapts the shared expert only: the
    routed experts must not count as adapted (they would save their inputs and rank-r
    intermediates)."""
    from calc import memory, states
    from calc.request import parse_estimate_request

    cfg = {**DEEPSEEK, "model_type": "mistral4", "n_group": 1, "first_k_dense_replace": 0}
    req = parse_estimate_request(
        {
            "model": {"hf_config": cfg},
            "method": "lora",
            "lora_targets": "all-linear",
            "moe_expert_layout": "fused-3d",
            "seq_len": 256,
        }
    )
    acfg = memory.act_config(req, states.regime(req.precision, req.sharding))
    arch = req.model
    shared = [l for l in arch.linears if l.name == "gate_proj" and l.count == 1]
    routed = [l for l in arch.linears if l.name == "gate_proj" and l.count == 8]
    assert shared and routed
    key = act.linear_key
    assert key("gate_proj", 512, 192, "mlp", 1) in acfg.adapted
    assert key("gate_proj", 512, 192, "mlp", 8) not in acfg.adapted
    assert key("gate_proj", 512, 192, "mlp", 8) != key("gate_proj", 512, 192, "mlp", 1)
