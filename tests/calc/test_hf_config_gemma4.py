"""Gemma 4 (transformers 5.17 ``models/gemma4``): how calc reads ``gemma4_text`` and the
multimodal ``gemma4`` config, counts its parameters module by module, its saved tensors and
attention FLOPs, and refuses shapes that contradict each other."""

from __future__ import annotations

import pytest

from calc import activations as act
from calc.errors import ConfigError
from calc.flops import attention_forward_flops_per_token, block_linear_params
from calc.hf_config import MODEL_TYPES, arch_from_hf_config
from calc.request import Attention

H, HEADS, KV, HD, GHD, INTER, L, P, VOCAB, VOCAB_PLE = 512, 4, 1, 64, 128, 1024, 4, 64, 8000, 6000

# E2B's layout at reduced size: per-layer inputs, the last two blocks sharing the keys and values
# of the first two, a double-wide MLP there, sliding and full blocks
E2B_LIKE = {
    "model_type": "gemma4_text",
    "hidden_size": H,
    "intermediate_size": INTER,
    "num_attention_heads": HEADS,
    "num_key_value_heads": KV,
    "head_dim": HD,
    "global_head_dim": GHD,
    "num_hidden_layers": L,
    "layer_types": ["sliding_attention", "full_attention"] * 2,
    "num_kv_shared_layers": 2,
    "use_double_wide_mlp": True,
    "hidden_size_per_layer_input": P,
    "vocab_size_per_layer_input": VOCAB_PLE,
    "vocab_size": VOCAB,
}
# 26B-A4B's layout: an MoE block beside the MLP, full blocks whose keys are the values
MOE_LIKE = {
    "model_type": "gemma4_text",
    "hidden_size": H,
    "intermediate_size": 768,
    "num_attention_heads": HEADS,
    "num_key_value_heads": 2,
    "num_global_key_value_heads": 1,
    "attention_k_eq_v": True,
    "head_dim": HD,
    "global_head_dim": GHD,
    "num_hidden_layers": 2,
    "layer_types": ["sliding_attention", "full_attention"],
    "hidden_size_per_layer_input": 0,
    "enable_moe_block": True,
    "num_experts": 8,
    "top_k_experts": 2,
    "moe_intermediate_size": 192,
    "vocab_size": VOCAB,
}


def test_model_types_read():
    assert "gemma4_text" in MODEL_TYPES
    arch = arch_from_hf_config({"model_type": "gemma4", "text_config": E2B_LIKE})
    assert arch.extra["text_config_only"] is True
    assert arch.params_total == arch_from_hf_config(E2B_LIKE).params_total


def test_per_layer_inputs_and_kv_sharing_module_by_module():
    arch = arch_from_hf_config(E2B_LIKE)
    # Gemma4TextAttention: q_proj, k_proj, v_proj, o_proj; k/v only in blocks 0 and 1
    sliding_attn = H * HEADS * HD * 2 + 2 * H * KV * HD
    full_attn = H * HEADS * GHD * 2 + 2 * H * KV * GHD
    shared_sliding_attn = H * HEADS * HD * 2
    shared_full_attn = H * HEADS * GHD * 2
    # Gemma4TextMLP: twice intermediate_size in the kv-shared blocks (use_double_wide_mlp)
    mlp, wide_mlp = 3 * H * INTER, 3 * H * 2 * INTER
    # per-layer input: per_layer_input_gate, per_layer_projection; the model's context
    # projection (hidden -> layers * width) is counted a slice per block
    ple = 3 * H * P
    # norms: four full-width + post_per_layer_input_norm; q_norm per head width, k_norm too
    # where the block has its own keys
    norms = 5 * H
    blocks = (
        (sliding_attn + full_attn + shared_sliding_attn + shared_full_attn)
        + 2 * mlp
        + 2 * wide_mlp
        + L * (ple + norms)
        + (2 * HD + 2 * GHD)
        + (HD + GHD)
    )
    embedding = VOCAB * H + VOCAB_PLE * L * P + P  # tied output; per_layer_projection_norm
    assert arch.params_total == embedding + blocks + H  # final norm
    assert dict(arch.block_counts) == {
        "sliding": 1,
        "full": 1,
        "sliding_shared": 1,
        "full_shared": 1,
    }
    shared = {l.name for l in arch.linears if l.block_kind.endswith("_shared")}
    assert "k_proj" not in shared and "v_proj" not in shared
    # the per-layer table is a gather: no token multiplies through it
    assert block_linear_params(arch) == arch.params_active - VOCAB * H - VOCAB_PLE * L * P - P


def test_moe_block_beside_the_mlp_and_keys_as_values():
    arch = arch_from_hf_config(MOE_LIKE)
    attn = (
        H * HEADS * HD * 2
        + 2 * H * 2 * HD  # sliding: q, o, k, v of two kv heads
        + H * HEADS * GHD * 2
        + H * 1 * GHD  # full: q, o, k of one global kv head, no v
    )
    mlp = 2 * 3 * H * 768
    # Gemma4TextRouter: proj (hidden -> experts), scale (hidden), per_expert_scale (experts);
    # Gemma4TextExperts: gate_up_proj (experts x 2*width x hidden), down_proj
    moe = 2 * (H * 8 + H + 8 + 8 * 3 * H * 192)
    norms = 2 * 7 * H + (2 * HD + 2 * GHD)  # 4 + 3 MoE norms per block; q/k norms
    assert arch.params_total == VOCAB * H + attn + mlp + moe + norms + H
    full = {l.name for l in arch.linears if l.block_kind == "full"}
    assert full == {"q_proj", "k_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
    router = next(l for l in arch.linears if l.role == "router")
    assert (router.name, router.quantizable, router.kind) == ("proj", True, "linear")
    experts = [l for l in arch.linears if l.count > 1]
    assert all(l.kind == "param" and not l.quantizable for l in experts)
    inactive = 2 * 6 * 3 * H * 192
    assert arch.params_active == arch.params_total - inactive


def test_defaults_of_gemma4_text_config():
    # layer_types: five sliding then one full, the last block forced full; global_head_dim 512;
    # per-layer inputs of 256 from a 262,144-row table unless the config says 0
    cfg = {k: v for k, v in E2B_LIKE.items() if k not in ("layer_types", "global_head_dim")}
    cfg.update(num_hidden_layers=8, num_kv_shared_layers=0)
    arch = arch_from_hf_config(cfg)
    assert arch.extra["gemma4_layers"] == ["sliding"] * 5 + ["full", "sliding", "full"]
    assert arch.extra["gemma4_head_dims"]["full"][0] == 512
    del cfg["hidden_size_per_layer_input"], cfg["vocab_size_per_layer_input"]
    assert arch_from_hf_config(cfg).per_layer_embedding_params == 262_144 * 8 * 256 + 256


def test_attention_flops_sum_each_blocks_head_width():
    arch = arch_from_hf_config(E2B_LIKE)
    flops = attention_forward_flops_per_token(arch, 1024, "eager")
    assert flops == 4.0 * 1024 * HEADS * (2 * HD + 2 * GHD)


def _cfg(**kw: object) -> act.ActConfig:
    base: dict = dict(
        act_bytes=2,
        resid_bytes=2,
        full=False,
        adapted=frozenset(),
        rank=16,
        attention=Attention.SDPA,
        seq_len=1024,
        per_linear_casts=False,
        grouped_kv=True,
    )
    base.update(kw)
    return act.ActConfig(**base)


def _keys(arch, *names):
    return frozenset(
        act.linear_key(l.name, l.d_in, l.d_out, l.role, l.count)
        for l in arch.linears
        if l.name in names
    )


def test_shared_blocks_save_no_keys_or_values_of_their_own():
    shared = arch_from_hf_config({**E2B_LIKE, "use_double_wide_mlp": False})
    own = arch_from_hf_config({**E2B_LIKE, "num_kv_shared_layers": 0})
    cfg = _cfg()
    diff = act.block_bytes_per_token(own, cfg) - act.block_bytes_per_token(shared, cfg)
    # per block with keys of its own: k_norm and v_norm (fp32 input, the statistic and the
    # pow input per head each) and the k and v the kernel saves (grouped SDPA, 2 bytes)
    per_block = [(4 + 4) * KV * d + 4 * 4 * KV + 2 * 2 * KV * d for d in (HD, GHD)]
    assert diff == sum(per_block) // L


def test_frozen_per_layer_inputs_save_only_their_values():
    arch = arch_from_hf_config(E2B_LIKE)
    frozen = act.head_bytes_per_token(arch, _cfg())
    adapted = act.head_bytes_per_token(
        arch, _cfg(adapted=_keys(arch, "per_layer_model_projection"))
    )
    # adapted: the projection's input, its norm's fp32 input and two statistics per slice,
    # the adapter's rank-r output
    assert adapted - frozen == 2 * H + 4 * L * (P + 2) + 2 * 16


def test_mqa_keys_repeated_as_views():
    # repeat_kv from one k/v head is a stride-0 view: eager saves k and v at one head
    one = {**E2B_LIKE, "num_kv_shared_layers": 0, "hidden_size_per_layer_input": 0}
    arch = arch_from_hf_config(one)
    eager = _cfg(attention=Attention.EAGER)
    view = act._gemma4_kind_view(arch, "sliding")
    two = act._gemma4_kind_view(arch_from_hf_config({**one, "num_key_value_heads": 2}), "sliding")
    out = next(l for l in view.linears if l.name == "o_proj")
    one_kv = act.attention_core_bytes(view, eager, out)
    two_kv = act.attention_core_bytes(two, eager, out)
    assert two_kv - one_kv == 2 * 2 * HEADS * HD - 2 * 2 * KV * HD


@pytest.mark.parametrize(
    "change,key,code",
    [
        ({"layer_types": ["full_attention"] * 3}, "layer_types", "config_layer_types_length"),
        ({"layer_types": ["local", "full_attention"] * 2}, "layer_types", "config_invalid_value"),
        ({"num_kv_shared_layers": 4}, "num_kv_shared_layers", "config_kv_shared_out_of_range"),
        ({"num_kv_shared_layers": -1}, "num_kv_shared_layers", "config_kv_shared_out_of_range"),
        # the shared full block finds no full block before the shared ones
        (
            {"layer_types": ["sliding_attention"] * 3 + ["full_attention"]},
            "num_kv_shared_layers",
            "config_kv_shared_out_of_range",
        ),
        ({"num_key_value_heads": 3}, "num_key_value_heads", "config_kv_heads_indivisible"),
        (
            {"attention_k_eq_v": True, "num_global_key_value_heads": 3},
            "num_global_key_value_heads",
            "config_kv_heads_indivisible",
        ),
        ({"hidden_size_per_layer_input": -1}, "hidden_size_per_layer_input", None),
        ({"global_head_dim": 0}, "global_head_dim", None),
    ],
)
def test_inconsistent_shapes_are_coded_errors(change, key, code):
    with pytest.raises(ConfigError) as err:
        arch_from_hf_config({"model_type": "gemma4", "text_config": {**E2B_LIKE, **change}})
    assert err.value.field == "hf_config.text_config." + key
    assert err.value.code == (code or "config_invalid_value")


def test_more_experts_per_token_than_experts():
    with pytest.raises(ConfigError) as err:
        arch_from_hf_config({**MOE_LIKE, "top_k_experts": 9})
    assert (err.value.code, err.value.field) == (
        "config_top_k_above_experts",
        "hf_config.top_k_experts",
    )
