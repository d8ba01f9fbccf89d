"""Reading config.json per family: key names, defaults, module names, errors."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, strategies as st

from calc.errors import ConfigError
from calc.hf_config import arch_from_hf_config
from hand_counts import TINY_GEMMA2

LLAMA = {
    "model_type": "llama",
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_key_value_heads": 32,
    "intermediate_size": 11008,
    "num_hidden_layers": 32,
    "vocab_size": 32000,
    "max_position_embeddings": 4096,
}
QWEN2 = {
    **LLAMA,
    "model_type": "qwen2",
    "hidden_size": 896,
    "num_attention_heads": 14,
    "num_key_value_heads": 2,
    "intermediate_size": 4864,
    "num_hidden_layers": 24,
    "vocab_size": 151936,
}
GEMMA2 = {
    "model_type": "gemma2",
    "hidden_size": 2304,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "head_dim": 256,
    "intermediate_size": 9216,
    "num_hidden_layers": 26,
    "vocab_size": 256000,
}
GEMMA3 = {
    "model_type": "gemma3_text",
    "hidden_size": 1152,
    "num_attention_heads": 4,
    "num_key_value_heads": 1,
    "head_dim": 256,
    "intermediate_size": 6912,
    "num_hidden_layers": 26,
    "vocab_size": 262144,
}
PHI3 = {
    "model_type": "phi3",
    "hidden_size": 3072,
    "num_attention_heads": 32,
    "num_key_value_heads": 32,
    "intermediate_size": 8192,
    "num_hidden_layers": 32,
    "vocab_size": 32064,
}
PHI = {
    "model_type": "phi",
    "hidden_size": 2560,
    "num_attention_heads": 32,
    "intermediate_size": 10240,
    "num_hidden_layers": 32,
    "vocab_size": 51200,
}
MIXTRAL = {
    **LLAMA,
    "model_type": "mixtral",
    "num_key_value_heads": 8,
    "intermediate_size": 14336,
    "num_local_experts": 8,
    "num_experts_per_tok": 2,
}
QWEN_MOE = {
    "model_type": "qwen2_moe",
    "hidden_size": 2048,
    "num_attention_heads": 16,
    "num_key_value_heads": 16,
    "intermediate_size": 5632,
    "moe_intermediate_size": 1408,
    "shared_expert_intermediate_size": 5632,
    "num_experts": 60,
    "num_experts_per_tok": 4,
    "num_hidden_layers": 24,
    "vocab_size": 151936,
}
NEOX = {
    "model_type": "gpt_neox",
    "hidden_size": 768,
    "num_attention_heads": 12,
    "intermediate_size": 3072,
    "num_hidden_layers": 12,
    "vocab_size": 50304,
}
FALCON = {
    "model_type": "falcon",
    "hidden_size": 4544,
    "num_attention_heads": 71,
    "num_hidden_layers": 32,
    "vocab_size": 65024,
}
BLOOM = {
    "model_type": "bloom",
    "hidden_size": 1024,
    "n_head": 16,
    "n_layer": 24,
    "vocab_size": 250880,
}
GPT2 = {"model_type": "gpt2", "n_embd": 768, "n_head": 12, "n_layer": 12, "vocab_size": 50257}

NAMES = [
    (LLAMA, ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")),
    (PHI3, ("qkv_proj", "o_proj", "gate_up_proj", "down_proj")),
    (PHI, ("q_proj", "k_proj", "v_proj", "dense", "fc1", "fc2")),
    (MIXTRAL, ("q_proj", "k_proj", "v_proj", "o_proj", "w1", "w3", "w2", "gate")),
    (
        QWEN_MOE,
        (
            "q_proj",
            "k_proj",
            "v_proj",
            "o_proj",
            "gate_proj",
            "up_proj",
            "down_proj",
            "gate",
            "shared_expert_gate",
        ),
    ),
    (NEOX, ("query_key_value", "dense", "dense_h_to_4h", "dense_4h_to_h")),
    (FALCON, ("query_key_value", "dense", "dense_h_to_4h", "dense_4h_to_h")),
    (BLOOM, ("query_key_value", "dense", "dense_h_to_4h", "dense_4h_to_h")),
    (GPT2, ("c_attn", "c_proj", "c_fc")),
]


@pytest.mark.parametrize("cfg,names", NAMES, ids=[c["model_type"] for c, _ in NAMES])
def test_module_names(cfg, names):
    assert arch_from_hf_config(cfg).linear_names() == names


# HF config-class defaults of tie_word_embeddings when config.json leaves it out.
TIE_DEFAULTS = [
    (LLAMA, False),
    ({**LLAMA, "model_type": "mistral"}, False),
    (QWEN2, False),
    (MIXTRAL, False),
    (QWEN_MOE, False),
    (PHI3, False),
    (PHI, False),
    (NEOX, False),
    ({**LLAMA, "model_type": "gemma", "head_dim": 128}, True),
    (GEMMA2, True),
    (GEMMA3, True),
    (FALCON, True),
    (BLOOM, True),
    (GPT2, True),
]


@pytest.mark.parametrize("cfg,tied", TIE_DEFAULTS, ids=[c["model_type"] for c, _ in TIE_DEFAULTS])
def test_tie_defaults(cfg, tied):
    arch = arch_from_hf_config(cfg)
    assert arch.tie_word_embeddings is tied
    assert (arch.lm_head_params == 0) is tied
    assert (
        arch_from_hf_config({**cfg, "tie_word_embeddings": not tied}).tie_word_embeddings
        is not tied
    )


def _by_name(arch):
    return {l.name: l for l in arch.linears}


def test_qwen2_bias_on_qkv_only():
    lin = _by_name(arch_from_hf_config(QWEN2))
    assert [lin[n].bias for n in ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj")] == [
        True,
        True,
        True,
        False,
        False,
    ]
    assert (lin["k_proj"].d_in, lin["k_proj"].d_out) == (896, 2 * 64)


def test_llama_attention_bias_and_mlp_bias():
    lin = _by_name(arch_from_hf_config({**LLAMA, "attention_bias": True, "mlp_bias": True}))
    assert all(l.bias for l in lin.values())
    base = arch_from_hf_config(LLAMA)
    biased = arch_from_hf_config({**LLAMA, "attention_bias": True})
    assert biased.params_total - base.params_total == 32 * 4 * 4096


def test_norm_kinds_and_counts():
    assert (arch_from_hf_config(LLAMA).norm_kind, arch_from_hf_config(LLAMA).norms_per_layer) == (
        "rms",
        2,
    )
    assert arch_from_hf_config(GEMMA2).norms_per_layer == 4
    assert arch_from_hf_config(GPT2).norm_kind == "layer"
    assert arch_from_hf_config(PHI).norms_per_layer == 1
    assert arch_from_hf_config(FALCON).norms_per_layer == 1
    assert arch_from_hf_config({**FALCON, "parallel_attn": False}).norms_per_layer == 2
    assert arch_from_hf_config(BLOOM).embedding_norm


def test_gemma3_text_qk_norm_and_four_norms():
    arch = arch_from_hf_config(GEMMA3)
    assert arch.norms_per_layer == 4 and arch.block_extra_params == 2 * 256
    # gemma-3-1b by hand: 26 * (q 1152*1024 + k,v 2*1152*256 + o 1024*1152 + 3*1152*6912
    # + 4*1152 + 2*256) + 262144*1152 (tied) + 1152
    block = 1152 * 1024 + 2 * 1152 * 256 + 1024 * 1152 + 3 * 1152 * 6912 + 4 * 1152 + 512
    assert arch.params_total == 26 * block + 262144 * 1152 + 1152 == 999_885_952


def test_gemma_head_dim_default_and_explicit():
    cfg = {**LLAMA, "model_type": "gemma"}
    assert arch_from_hf_config(cfg).head_dim == 256  # GemmaConfig default
    assert arch_from_hf_config({**cfg, "head_dim": 128}).head_dim == 128
    assert arch_from_hf_config(LLAMA).head_dim == 128  # hidden / heads


def test_mixtral_experts():
    arch = arch_from_hf_config(MIXTRAL)
    w1 = _by_name(arch)["w1"]
    assert (arch.num_experts, arch.experts_per_token) == (8, 2)
    assert (w1.count, w1.active, w1.d_in, w1.d_out) == (8, 2, 4096, 14336)


def test_qwen_moe_shared_expert():
    arch = arch_from_hf_config(QWEN_MOE)
    assert arch.shared_expert_intermediate_size == 5632
    assert arch.intermediate_size == 1408
    gates = [l for l in arch.linears if l.name == "gate_proj"]
    assert [(g.count, g.d_out) for g in gates] == [(60, 1408), (1, 5632)]
    assert _by_name(arch)["shared_expert_gate"].d_out == 1


def test_falcon_variants():
    mq = arch_from_hf_config(FALCON)
    assert mq.num_kv_heads == 1 and mq.linears[0].d_out == (71 + 2) * 64
    mha = arch_from_hf_config({**FALCON, "multi_query": False})
    assert mha.num_kv_heads == 71 and mha.linears[0].d_out == 3 * 4544
    legacy = arch_from_hf_config({**FALCON, "model_type": "RefinedWebModel"})
    assert legacy.family == "falcon" and legacy.params_total == mq.params_total
    biased = arch_from_hf_config({**FALCON, "bias": True})
    assert all(l.bias for l in biased.linears)


def test_gpt_neox_attention_bias_off_keeps_mlp_bias():
    arch = arch_from_hf_config({**NEOX, "attention_bias": False})
    assert [l.bias for l in arch.linears] == [False, False, True, True]
    assert arch_from_hf_config(NEOX).parallel_block
    assert not arch_from_hf_config({**NEOX, "use_parallel_residual": False}).parallel_block


def test_stablelm_options():
    base = {**LLAMA, "model_type": "stablelm"}
    arch = arch_from_hf_config(base)
    assert arch.norm_kind == "layer" and arch.norms_per_layer == 2 and not arch.parallel_block
    par = arch_from_hf_config({**base, "use_parallel_residual": True, "qk_layernorm": True})
    assert par.norms_per_layer == 1 and par.block_extra_params == (32 + 32) * 128


def test_olmo_norms():
    assert arch_from_hf_config({**LLAMA, "model_type": "olmo"}).norm_params == 0
    olmo2 = arch_from_hf_config({**LLAMA, "model_type": "olmo2", "num_key_value_heads": 8})
    assert olmo2.norm_params == 4096 and olmo2.block_extra_params == (32 + 8) * 128


def test_gpt2_n_inner_and_positions():
    arch = arch_from_hf_config({**GPT2, "n_inner": 1000, "n_positions": 2048})
    assert arch.intermediate_size == 1000 and arch.learned_positions == 2048


def test_real_config_with_extra_keys():
    """A full Llama-3.1-8B config.json, nested rope_scaling and all, reads as 8,030,261,248."""
    text = """{"architectures": ["LlamaForCausalLM"], "attention_bias": false,
      "attention_dropout": 0.0, "bos_token_id": 128000, "eos_token_id": 128001,
      "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
      "intermediate_size": 14336, "max_position_embeddings": 131072, "mlp_bias": false,
      "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32,
      "num_key_value_heads": 8, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
      "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
      "original_max_position_embeddings": 8192, "rope_type": "llama3"},
      "rope_theta": 500000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
      "transformers_version": "4.43.0.dev0", "use_cache": true, "vocab_size": 128256}"""
    arch = arch_from_hf_config(json.loads(text))
    assert arch.params_total == 8_030_261_248 and arch.max_position_embeddings == 131072


def test_text_config_nesting():
    arch = arch_from_hf_config({"model_type": "llava", "text_config": LLAMA}, "vlm")
    assert arch.family == "llama" and arch.extra["text_config_only"] is True
    assert arch.params_total == 6_738_415_616
    with pytest.raises(ConfigError) as err:
        arch_from_hf_config(
            {
                "model_type": "llava",
                "text_config": {k: v for k, v in LLAMA.items() if k != "vocab_size"},
            }
        )
    assert err.value.field == "hf_config.text_config.vocab_size"


MISSING = [
    (LLAMA, "intermediate_size"),
    (LLAMA, "hidden_size"),
    (LLAMA, "num_hidden_layers"),
    (LLAMA, "vocab_size"),
    (LLAMA, "num_attention_heads"),
    (MIXTRAL, "num_local_experts"),
    (MIXTRAL, "num_experts_per_tok"),
    (QWEN_MOE, "moe_intermediate_size"),
    (QWEN_MOE, "shared_expert_intermediate_size"),
    (QWEN_MOE, "num_experts"),
    (PHI3, "intermediate_size"),
    (NEOX, "intermediate_size"),
    (FALCON, "hidden_size"),
    (BLOOM, "hidden_size"),
    (BLOOM, "n_head"),
    (GPT2, "n_embd"),
    (GPT2, "n_layer"),
    (GEMMA2, "num_hidden_layers"),
]


@pytest.mark.parametrize("cfg,key", MISSING, ids=[f"{c['model_type']}-{k}" for c, k in MISSING])
def test_missing_key(cfg, key):
    broken = {k: v for k, v in cfg.items() if k != key}
    with pytest.raises(ConfigError) as err:
        arch_from_hf_config(broken)
    assert (err.value.code, err.value.field, err.value.value) == (
        "config_missing_key",
        f"hf_config.{key}",
        None,
    )


INVALID = [
    ("hidden_size", "4096"),
    ("hidden_size", -4096),
    ("hidden_size", 0),
    ("hidden_size", 4096.0),
    ("hidden_size", True),
    ("num_hidden_layers", [32]),
    ("vocab_size", {"n": 1}),
    ("tie_word_embeddings", "yes"),
    ("tie_word_embeddings", 1),
    ("attention_bias", "false"),
    ("layer_types", "full_attention"),
    ("layer_types", [1] * 32),
    ("layer_types", [""] * 32),
]


@pytest.mark.parametrize("key,value", INVALID, ids=[f"{k}={v!r}" for k, v in INVALID])
def test_invalid_value(key, value):
    with pytest.raises(ConfigError) as err:
        arch_from_hf_config({**LLAMA, key: value})
    assert (err.value.code, err.value.field, err.value.value) == (
        "config_invalid_value",
        f"hf_config.{key}",
        value,
    )
    json.dumps(err.value.to_dict())


# Shapes that contradict each other: each its own code, naming the key (catalogue words in
# both languages: tests/calc/test_catalogue.py). A family that derives head_dim from hidden / heads
# needs the heads to divide the hidden size; grouped-query attention needs the key/value heads
# to divide the heads; transformers 5 ``layer_type_validation`` needs one layer type per layer;
# a router cannot pick more experts than it has.
INCONSISTENT = [
    (MIXTRAL, "num_experts_per_tok", 9, "config_top_k_above_experts", 9),
    (QWEN_MOE, "num_experts_per_tok", 61, "config_top_k_above_experts", 61),
    (FALCON, "num_attention_heads", 70, "config_heads_indivisible", 70),
    (NEOX, "num_attention_heads", 7, "config_heads_indivisible", 7),
    (BLOOM, "n_head", 6, "config_heads_indivisible", 6),
    (GPT2, "n_head", 7, "config_heads_indivisible", 7),
    (
        {k: v for k, v in LLAMA.items() if k != "num_key_value_heads"},
        "num_attention_heads",
        31,
        "config_heads_indivisible",
        31,
    ),
    (PHI, "num_attention_heads", 30, "config_heads_indivisible", 30),
    (LLAMA, "num_key_value_heads", 5, "config_kv_heads_indivisible", 5),
    (LLAMA, "num_key_value_heads", 64, "config_kv_heads_indivisible", 64),
    (
        {**FALCON, "new_decoder_architecture": True, "num_kv_heads": 3},
        "num_kv_heads",
        3,
        "config_kv_heads_indivisible",
        3,
    ),
    (LLAMA, "layer_types", ["full_attention"] * 31, "config_layer_types_length", 31),
    (
        GEMMA2,
        "layer_types",
        ["sliding_attention", "full_attention"] * 14,
        "config_layer_types_length",
        28,
    ),
]


@pytest.mark.parametrize(
    "cfg,key,value,code,shown",
    INCONSISTENT,
    ids=[
        f"{c['model_type']}-{k}={v if not isinstance(v, list) else len(v)}"
        for c, k, v, _, _ in INCONSISTENT
    ],
)
def test_inconsistent_shapes_get_their_own_code(cfg, key, value, code, shown):
    with pytest.raises(ConfigError) as err:
        arch_from_hf_config({**cfg, key: value})
    assert (err.value.code, err.value.field, err.value.value) == (code, f"hf_config.{key}", shown)
    json.dumps(err.value.to_dict())


def test_inconsistent_shapes_of_a_text_config_name_its_key():
    cfg = {"model_type": "gemma3", "text_config": {**GEMMA3, "layer_types": ["full_attention"]}}
    with pytest.raises(ConfigError) as err:
        arch_from_hf_config(cfg)
    assert (err.value.code, err.value.field) == (
        "config_layer_types_length",
        "hf_config.text_config.layer_types",
    )


def test_consistent_layer_types_and_explicit_head_dim_are_read():
    # one type per layer is read; Gemma's explicit head_dim needs no division of hidden
    arch = arch_from_hf_config(
        {
            **GEMMA2,
            "layer_types": ["sliding_attention", "full_attention"]
            * (GEMMA2["num_hidden_layers"] // 2),
        }
    )
    assert arch.num_layers == GEMMA2["num_hidden_layers"]
    assert (
        arch_from_hf_config(
            {**LLAMA, "num_attention_heads": 31, "num_key_value_heads": 31, "head_dim": 128}
        ).head_dim
        == 128
    )


@pytest.mark.parametrize("key,value", [("mlp_only_layers", [0, 1]), ("decoder_sparse_step", 2)])
def test_qwen_moe_mixed_stack_refused(key, value):
    with pytest.raises(ConfigError) as err:
        arch_from_hf_config({**QWEN_MOE, key: value})
    assert (err.value.code, err.value.field) == ("unsupported_architecture", f"hf_config.{key}")


@pytest.mark.parametrize("model_type", ["t5", "bert", "mamba", "LLAMA", ""])
def test_unsupported_architecture(model_type):
    with pytest.raises(ConfigError) as err:
        arch_from_hf_config({**LLAMA, "model_type": model_type})
    assert (err.value.code, err.value.field, err.value.value) == (
        "unsupported_architecture",
        "hf_config.model_type",
        model_type,
    )


def test_model_type_missing_or_not_string():
    with pytest.raises(ConfigError) as err:
        arch_from_hf_config({k: v for k, v in LLAMA.items() if k != "model_type"})
    assert (err.value.code, err.value.field) == ("config_missing_key", "hf_config.model_type")
    with pytest.raises(ConfigError) as err:
        arch_from_hf_config({**LLAMA, "model_type": 3})
    assert (err.value.code, err.value.field, err.value.value) == (
        "config_invalid_value",
        "hf_config.model_type",
        3,
    )


@pytest.mark.parametrize("cfg", [[LLAMA], "llama", None, 3, 2.5])
def test_not_an_object(cfg):
    with pytest.raises(ConfigError) as err:
        arch_from_hf_config(cfg)
    assert (err.value.code, err.value.field) == ("config_not_object", "hf_config")


def test_supported_families():
    from calc.hf_config import _READERS

    assert {
        "llama",
        "mistral",
        "mixtral",
        "qwen2",
        "qwen2_moe",
        "gemma",
        "gemma2",
        "phi3",
        "gpt_neox",
        "falcon",
        "bloom",
        "gpt2",
        "phi",
        "qwen3",
        "gemma3_text",
        "qwen3_moe",
        "olmo",
        "olmo2",
        "stablelm",
        "granite",
    } <= set(_READERS)


@given(
    h_per_head=st.integers(1, 64),
    heads_per_kv=st.integers(1, 8),
    kv=st.integers(1, 8),
    inter=st.integers(1, 50_000),
    layers=st.integers(1, 128),
    vocab=st.integers(1, 300_000),
    tie=st.booleans(),
)
def test_llama_closed_form(h_per_head, heads_per_kv, kv, inter, layers, vocab, tie):
    """params = V*h*(1 or 2) + L*(2*h*h + 2*h*kv*hd + 3*h*inter + 2h) + h."""
    heads = heads_per_kv * kv
    hd = h_per_head
    h = heads * hd
    cfg = {
        "model_type": "llama",
        "hidden_size": h,
        "num_attention_heads": heads,
        "num_key_value_heads": kv,
        "intermediate_size": inter,
        "num_hidden_layers": layers,
        "vocab_size": vocab,
        "tie_word_embeddings": tie,
    }
    arch = arch_from_hf_config(cfg)
    block = 2 * h * h + 2 * h * kv * hd + 3 * h * inter + 2 * h
    assert arch.params_total == vocab * h * (1 if tie else 2) + layers * block + h
    deeper = arch_from_hf_config({**cfg, "num_hidden_layers": layers + 1})
    assert deeper.params_total - arch.params_total == block


_JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 10**6),
    st.floats(allow_nan=True),
    st.text(max_size=5),
    st.lists(st.integers(0, 3), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
_BASES = [
    LLAMA,
    QWEN2,
    GEMMA2,
    GEMMA3,
    PHI3,
    PHI,
    MIXTRAL,
    QWEN_MOE,
    NEOX,
    FALCON,
    BLOOM,
    GPT2,
    {**LLAMA, "model_type": "olmo2"},
    {**LLAMA, "model_type": "stablelm"},
    {**QWEN_MOE, "model_type": "qwen3_moe"},
    {"model_type": "llava", "text_config": LLAMA},
]
_KEYS = sorted(
    {k for base in _BASES for k in base}
    | {
        "head_dim",
        "tie_word_embeddings",
        "attention_bias",
        "mlp_bias",
        "multi_query",
        "new_decoder_architecture",
        "num_kv_heads",
        "parallel_attn",
        "bias",
        "ffn_hidden_size",
        "num_ln_in_parallel_attn",
        "n_inner",
        "n_positions",
        "mlp_only_layers",
        "decoder_sparse_step",
        "use_parallel_residual",
        "qk_layernorm",
        "n_embed",
        "text_config",
        "use_qkv_bias",
        "layer_types",
    }
)


@pytest.mark.parametrize("model_type", [[], {}, ["llama"], {"llava": 1}])
def test_unhashable_model_type_beside_a_text_config_is_a_coded_error(model_type):
    """A pasted ``model_type`` that is a list or an object, beside a ``text_config`` without
    one (the case where calc looks the outer type up among multimodal wrappers): a coded
    error naming the key, not a TypeError (found by the mutation test below in CI)."""
    cfg = {**_BASES[0], "model_type": model_type, "text_config": {}}
    with pytest.raises(ConfigError) as caught:
        arch_from_hf_config(cfg)
    assert caught.value.code == "config_invalid_value"
    assert caught.value.field == "hf_config.model_type"


@given(
    base=st.sampled_from(_BASES),
    changes=st.dictionaries(st.sampled_from(_KEYS), _JUNK, max_size=4),
    drop=st.lists(st.sampled_from(_KEYS), max_size=2),
)
def test_any_mutation_gives_arch_or_config_error(base, changes, drop):
    """Whatever a pasted config holds, the reader returns an architecture or a coded
    ConfigError naming an hf_config key; never another exception."""
    cfg = {k: v for k, v in {**base, **changes}.items() if k not in drop}
    try:
        arch = arch_from_hf_config(cfg)
    except ConfigError as err:
        assert err.code in {
            "config_missing_key",
            "config_invalid_value",
            "unsupported_architecture",
            "config_not_object",
            "config_heads_indivisible",
            "config_kv_heads_indivisible",
            "config_layer_types_length",
            "config_top_k_above_experts",
        }
        assert err.field.startswith("hf_config")
        json.dumps(err.to_dict(), allow_nan=False)
    else:
        assert arch.params_total > 0 and arch.params_active <= arch.params_total


@pytest.mark.parametrize(
    "key, value",
    [
        ("num_hidden_layers", 3_200_000_000),  # a typo, not a model
        ("hidden_size", int("4" * 4000)),  # a 4000-digit width
        ("vocab_size", 10**9),
    ],
)
def test_absurd_sizes_are_refused_with_the_key(key, value):
    cfg = {
        "model_type": "llama",
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "intermediate_size": 11008,
        "num_hidden_layers": 32,
        "vocab_size": 32000,
    }
    cfg[key] = value
    with pytest.raises(ConfigError) as err:
        arch_from_hf_config(cfg)
    assert (err.value.code, err.value.field) == ("config_invalid_value", f"hf_config.{key}")


# ---- newer families: qwen3, qwen3_moe, gemma3(_text), llama4 text, gpt_oss, phi3/phi4, smollm3 ----

NEW_FAMILIES = {
    "gpt_oss": {
        "model_type": "gpt_oss",
        "hidden_size": 64,
        "intermediate_size": 48,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "num_local_experts": 4,
        "num_experts_per_tok": 2,
        "vocab_size": 100,
        "tie_word_embeddings": False,
    },
    "llama4_text": {
        "model_type": "llama4_text",
        "hidden_size": 64,
        "intermediate_size": 32,
        "intermediate_size_mlp": 96,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "num_local_experts": 4,
        "num_experts_per_tok": 1,
        "vocab_size": 100,
    },
    "qwen3": {
        "model_type": "qwen3",
        "hidden_size": 64,
        "intermediate_size": 96,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "vocab_size": 100,
        "tie_word_embeddings": True,
    },
    "qwen3_moe": {
        "model_type": "qwen3_moe",
        "hidden_size": 64,
        "intermediate_size": 128,
        "moe_intermediate_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "vocab_size": 100,
    },
    "smollm3": {
        "model_type": "smollm3",
        "hidden_size": 64,
        "intermediate_size": 96,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 100,
        "pad_token_id": 0,
        "bos_token_id": 1,
        "eos_token_id": 2,
    },
    "gemma3_text": {
        "model_type": "gemma3_text",
        "hidden_size": 64,
        "intermediate_size": 96,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "vocab_size": 100,
    },
    "phi3-tied": {
        "model_type": "phi3",
        "hidden_size": 64,
        "intermediate_size": 96,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 100,
        "tie_word_embeddings": True,
        "pad_token_id": 0,
    },
    "mistral": {
        "model_type": "mistral",
        "hidden_size": 64,
        "intermediate_size": 96,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 32,
        "vocab_size": 100,
    },
}


@pytest.mark.parametrize("name", sorted(NEW_FAMILIES))
def test_new_families_count_what_transformers_builds(name):
    """Every parameter transformers 5.17 allocates for the same config (tiny, CPU)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    cfg = NEW_FAMILIES[name]
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(
            transformers.AutoConfig.for_model(**cfg)
        )
    assert arch_from_hf_config(cfg).params_total == sum(p.numel() for p in model.parameters())


def test_gpt_oss_shapes():
    arch = arch_from_hf_config(NEW_FAMILIES["gpt_oss"])
    kinds = {l.name: (l.kind, l.count, l.active, l.bias, l.quantizable) for l in arch.linears}
    assert kinds["experts.gate_up_proj"] == ("param", 4, 2, True, False)
    assert kinds["router"] == ("param", 1, 1, True, False)
    assert kinds["q_proj"] == ("linear", 1, 1, True, True)
    assert arch.block_extra_params == 4  # one attention-sink logit per head


def test_multimodal_configs_read_their_text_model():
    gemma = {
        "model_type": "gemma3",
        "text_config": {
            "model_type": "gemma3_text",
            "hidden_size": 2560,
            "intermediate_size": 10240,
            "num_hidden_layers": 34,
        },
    }
    arch = arch_from_hf_config(gemma)
    assert arch.family == "gemma3_text" and arch.vocab_size == 262_208 and arch.num_heads == 8
    llama4 = {"model_type": "llama4", "text_config": {**NEW_FAMILIES["llama4_text"]}}
    assert arch_from_hf_config(llama4).family == "llama4_text"
    mistral3 = {"model_type": "mistral3", "text_config": {**NEW_FAMILIES["mistral"]}}
    assert arch_from_hf_config(mistral3).extra["text_config_only"]


def test_a_text_config_without_model_type_is_the_text_model_its_wrapper_builds():
    # transformers fills it in: Mistral3Config "mistral", LlavaConfig "llama"
    text = {k: v for k, v in NEW_FAMILIES["mistral"].items() if k != "model_type"}
    arch = arch_from_hf_config({"model_type": "mistral3", "text_config": text})
    assert arch.family == "mistral" and arch.extra["text_config_only"]
    assert arch.params_total == arch_from_hf_config(NEW_FAMILIES["mistral"]).params_total
    plain = {k: v for k, v in LLAMA.items() if k != "model_type"}
    assert arch_from_hf_config({"model_type": "llava", "text_config": plain}).family == "llama"
    # a wrapper calc does not know still names the top-level model_type
    with pytest.raises(ConfigError) as err:
        arch_from_hf_config({"model_type": "pixtral_llm", "text_config": plain})
    assert (err.value.code, err.value.field) == ("unsupported_architecture", "hf_config.model_type")
    # an inconsistent shape is named under text_config
    with pytest.raises(ConfigError) as err:
        arch_from_hf_config(
            {"model_type": "mistral3", "text_config": {**text, "num_key_value_heads": 3}}
        )
    assert (err.value.code, err.value.field) == (
        "config_kv_heads_indivisible",
        "hf_config.text_config.num_key_value_heads",
    )


@pytest.mark.parametrize(
    "extra",
    [{"interleave_moe_layer_step": 2}, {"moe_layers": [0, 3]}, {"moe_layers": []}],
    ids=["step2", "moe_layers", "all-dense"],
)
def test_llama4_mixed_stack_counts_what_transformers_builds(extra):
    """Maverick alternates dense and MoE blocks: each block kind counted for its own blocks."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    cfg = {**NEW_FAMILIES["llama4_text"], "num_hidden_layers": 4, **extra}
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(
            transformers.AutoConfig.for_model(**cfg)
        )
    arch = arch_from_hf_config(cfg)
    assert arch.params_total == sum(p.numel() for p in model.parameters())
    assert arch.params_active <= arch.params_total


@pytest.mark.parametrize("value", [[0, 0], [9], [-1], "0,1", [True]])
def test_llama4_bad_moe_layers(value):
    cfg = {
        "model_type": "llama4",
        "text_config": {**NEW_FAMILIES["llama4_text"], "moe_layers": value},
    }
    with pytest.raises(ConfigError) as err:
        arch_from_hf_config(cfg)
    assert (err.value.code, err.value.field) == (
        "config_invalid_value",
        "hf_config.text_config.moe_layers",
    )


@pytest.mark.parametrize(
    "name, key",
    [
        ("gpt_oss", "num_local_experts"),
        ("gpt_oss", "hidden_size"),
        ("llama4_text", "num_experts_per_tok"),
        ("smollm3", "num_attention_heads"),
        ("qwen3_moe", "num_experts"),
    ],
)
def test_new_families_missing_key(name, key):
    cfg = {k: v for k, v in NEW_FAMILIES[name].items() if k != key}
    with pytest.raises(ConfigError) as err:
        arch_from_hf_config(cfg)
    assert (err.value.code, err.value.field) == ("config_missing_key", "hf_config." + key)


@pytest.mark.parametrize(
    "name, key, value, code",
    [
        ("gpt_oss", "num_experts_per_tok", 5, "config_top_k_above_experts"),
        ("llama4_text", "num_experts_per_tok", 9, "config_top_k_above_experts"),
        ("qwen3_moe", "num_experts_per_tok", 5, "config_top_k_above_experts"),
        ("gpt_oss", "attention_bias", "yes", "config_invalid_value"),
        ("gpt_oss", "num_key_value_heads", 3, "config_kv_heads_indivisible"),
        (
            "gpt_oss",
            "layer_types",
            ["sliding_attention", "full_attention", "sliding_attention"],
            "config_layer_types_length",
        ),
        ("qwen3", "layer_types", ["full_attention"], "config_layer_types_length"),
        ("smollm3", "num_attention_heads", 6, "config_heads_indivisible"),  # 64 / 6, kv 2 divides 6
    ],
)
def test_new_families_invalid_value(name, key, value, code):
    with pytest.raises(ConfigError) as err:
        arch_from_hf_config({**NEW_FAMILIES[name], key: value})
    assert (err.value.code, err.value.field) == (code, "hf_config." + key)


def test_gemma2_attention_softcapping_read_with_its_default():
    base = TINY_GEMMA2
    # transformers' Gemma2Config default when the file says nothing
    assert arch_from_hf_config(base).extra["attn_logit_softcapping"] == 50.0
    assert (
        arch_from_hf_config({**base, "attn_logit_softcapping": 20}).extra["attn_logit_softcapping"]
        == 20.0
    )
    assert (
        "attn_logit_softcapping"
        not in arch_from_hf_config({**base, "attn_logit_softcapping": None}).extra
    )
    # Gemma (1) has no cap
    gemma = {**base, "model_type": "gemma"}
    assert "attn_logit_softcapping" not in arch_from_hf_config(gemma).extra
