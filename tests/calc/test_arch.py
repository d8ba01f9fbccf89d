"""Exact parameter counts per family, from configs built here.

Every expected total was derived by hand from the config (the per-module formulas in
calc/arch.py) AND matches a published figure: the Hugging Face Hub's safetensors
parameter count of the named repo (``safetensors.total`` in
https://huggingface.co/api/models/<repo>), unless the row says otherwise.
"""

from __future__ import annotations

import pytest

from calc.arch import LinearLayer, ModelArch
from calc.errors import ConfigError
from calc.hf_config import arch_from_hf_config
from calc.states import quantized_weight_params


def dense(model_type, h, heads, kv, inter, layers, vocab, tie=False, **extra):
    cfg = {
        "model_type": model_type,
        "hidden_size": h,
        "num_attention_heads": heads,
        "num_key_value_heads": kv,
        "intermediate_size": inter,
        "num_hidden_layers": layers,
        "vocab_size": vocab,
        "tie_word_embeddings": tie,
    }
    cfg.update(extra)
    return cfg


MIXTRAL_8X7B = dense(
    "mixtral", 4096, 32, 8, 14336, 32, 32000, num_local_experts=8, num_experts_per_tok=2
)
QWEN15_MOE = dense(
    "qwen2_moe",
    2048,
    16,
    16,
    5632,
    24,
    151936,
    moe_intermediate_size=1408,
    shared_expert_intermediate_size=5632,
    num_experts=60,
    num_experts_per_tok=4,
)
QWEN3_30B_A3B = dense(
    "qwen3_moe",
    2048,
    32,
    4,
    6144,
    48,
    151936,
    head_dim=128,
    moe_intermediate_size=768,
    num_experts=128,
    num_experts_per_tok=8,
)

# (case, config, exact total, source of the published figure)
TOTALS = [
    (
        "llama-2-7b",
        dense("llama", 4096, 32, 32, 11008, 32, 32000),
        6_738_415_616,
        "meta-llama/Llama-2-7b-hf",
    ),
    (
        "llama-2-13b",
        dense("llama", 5120, 40, 40, 13824, 40, 32000),
        13_015_864_320,
        "meta-llama/Llama-2-13b-hf",
    ),
    (
        "llama-2-70b",
        dense("llama", 8192, 64, 8, 28672, 80, 32000),
        68_976_648_192,
        "meta-llama/Llama-2-70b-hf",
    ),
    (
        "llama-3.1-8b",
        dense("llama", 4096, 32, 8, 14336, 32, 128256),
        8_030_261_248,
        "meta-llama/Llama-3.1-8B",
    ),
    (
        "llama-3.1-70b",
        dense("llama", 8192, 64, 8, 28672, 80, 128256),
        70_553_706_496,
        "meta-llama/Llama-3.1-70B",
    ),
    (
        "llama-3.1-405b",
        dense("llama", 16384, 128, 8, 53248, 126, 128256),
        405_853_388_800,
        "meta-llama/Llama-3.1-405B",
    ),
    (
        "llama-3.2-1b (tied, explicit head_dim)",
        dense("llama", 2048, 32, 8, 8192, 16, 128256, True, head_dim=64),
        1_235_814_400,
        "meta-llama/Llama-3.2-1B",
    ),
    (
        "llama-3.2-3b",
        dense("llama", 3072, 24, 8, 8192, 28, 128256, True, head_dim=128),
        3_212_749_824,
        "meta-llama/Llama-3.2-3B",
    ),
    (
        "tinyllama-1.1b",
        dense("llama", 2048, 32, 4, 5632, 22, 32000),
        1_100_048_384,
        "TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T",
    ),
    ("yi-34b", dense("llama", 7168, 56, 8, 20480, 60, 64000), 34_388_917_248, "01-ai/Yi-34B"),
    (
        "mistral-7b",
        dense("mistral", 4096, 32, 8, 14336, 32, 32000),
        7_241_732_096,
        "mistralai/Mistral-7B-v0.1",
    ),
    (
        "qwen2.5-0.5b (qkv bias, tied)",
        dense("qwen2", 896, 14, 2, 4864, 24, 151936, True),
        494_032_768,
        "Qwen/Qwen2.5-0.5B",
    ),
    (
        "qwen2.5-1.5b",
        dense("qwen2", 1536, 12, 2, 8960, 28, 151936, True),
        1_543_714_304,
        "Qwen/Qwen2.5-1.5B",
    ),
    (
        "qwen2.5-7b",
        dense("qwen2", 3584, 28, 4, 18944, 28, 152064),
        7_615_616_512,
        "Qwen/Qwen2.5-7B",
    ),
    (
        "qwen2.5-14b",
        dense("qwen2", 5120, 40, 8, 13824, 48, 152064),
        14_770_033_664,
        "Qwen/Qwen2.5-14B",
    ),
    (
        "qwen2.5-32b",
        dense("qwen2", 5120, 40, 8, 27648, 64, 152064),
        32_763_876_352,
        "Qwen/Qwen2.5-32B",
    ),
    (
        "qwen2.5-72b",
        dense("qwen2", 8192, 64, 8, 29568, 80, 152064),
        72_706_203_648,
        "Qwen/Qwen2.5-72B",
    ),
    (
        "qwen3-8b (q/k norm)",
        dense("qwen3", 4096, 32, 8, 12288, 36, 151936, head_dim=128),
        8_190_735_360,
        "Qwen/Qwen3-8B",
    ),
    (
        "gemma-2b (MQA, head_dim 256, tie default)",
        {
            **dense("gemma", 2048, 8, 1, 16384, 18, 256000, head_dim=256),
            "tie_word_embeddings": None,
        },
        2_506_172_416,
        "google/gemma-2b",
    ),
    (
        "gemma-7b (heads*head_dim != hidden)",
        dense("gemma", 3072, 16, 16, 24576, 28, 256000, True, head_dim=256),
        8_537_680_896,
        "google/gemma-7b",
    ),
    (
        "gemma-2-2b (4 norms)",
        dense("gemma2", 2304, 8, 4, 9216, 26, 256000, True, head_dim=256),
        2_614_341_888,
        "google/gemma-2-2b",
    ),
    (
        "gemma-2-9b",
        dense("gemma2", 3584, 16, 8, 14336, 42, 256000, True, head_dim=256),
        9_241_705_984,
        "google/gemma-2-9b",
    ),
    (
        "gemma-2-27b",
        dense("gemma2", 4608, 32, 16, 36864, 46, 256000, True, head_dim=128),
        27_227_128_320,
        "google/gemma-2-27b",
    ),
    (
        "granite-3.0-2b",
        dense("granite", 2048, 32, 8, 8192, 40, 49155, True),
        2_533_531_648,
        "ibm-granite/granite-3.1-2b-base",
    ),
    (
        "olmo-1b (weightless LayerNorm)",
        dense("olmo", 2048, 16, 16, 8192, 16, 50304, True),
        1_176_764_416,
        "allenai/OLMo-1B-hf",
    ),
    (
        "olmo-2-7b (post norms, full-width q/k norm)",
        dense("olmo2", 4096, 32, 32, 11008, 32, 100352),
        7_298_617_344,
        "allenai/OLMo-2-1124-7B",
    ),
    (
        "stablelm-2-1.6b (LayerNorm, qkv bias)",
        dense("stablelm", 2048, 32, 32, 5632, 24, 100352, use_qkv_bias=True),
        1_644_515_328,
        "stabilityai/stablelm-2-1_6b",
    ),
    (
        "phi-3-mini (fused qkv, gate_up)",
        dense("phi3", 3072, 32, 32, 8192, 32, 32064),
        3_821_079_552,
        "microsoft/Phi-3-mini-4k-instruct",
    ),
    (
        "phi-2 (lm_head bias)",
        {
            "model_type": "phi",
            "hidden_size": 2560,
            "num_attention_heads": 32,
            "intermediate_size": 10240,
            "num_hidden_layers": 32,
            "vocab_size": 51200,
        },
        2_779_683_840,
        "microsoft/phi-2",
    ),
    (
        "phi-1.5",
        {
            "model_type": "phi",
            "hidden_size": 2048,
            "num_attention_heads": 32,
            "intermediate_size": 8192,
            "num_hidden_layers": 24,
            "vocab_size": 51200,
        },
        1_418_270_720,
        "microsoft/phi-1_5",
    ),
    ("mixtral-8x7b", MIXTRAL_8X7B, 46_702_792_704, "mistralai/Mixtral-8x7B-v0.1"),
    ("qwen1.5-moe-a2.7b (shared expert)", QWEN15_MOE, 14_315_784_192, "Qwen/Qwen1.5-MoE-A2.7B"),
    ("qwen3-30b-a3b", QWEN3_30B_A3B, 30_532_122_624, "Qwen/Qwen3-30B-A3B"),
    (
        "gpt2 (learned positions, tied)",
        {
            "model_type": "gpt2",
            "n_embd": 768,
            "n_head": 12,
            "n_layer": 12,
            "n_positions": 1024,
            "vocab_size": 50257,
        },
        124_439_808,
        "openai-community/gpt2",
    ),
    (
        "gpt2-xl",
        {
            "model_type": "gpt2",
            "n_embd": 1600,
            "n_head": 25,
            "n_layer": 48,
            "n_positions": 1024,
            "vocab_size": 50257,
        },
        1_557_611_200,
        "openai-community/gpt2-xl",
    ),
    (
        "pythia-160m (gpt_neox)",
        {
            "model_type": "gpt_neox",
            "hidden_size": 768,
            "num_attention_heads": 12,
            "intermediate_size": 3072,
            "num_hidden_layers": 12,
            "vocab_size": 50304,
        },
        162_322_944,
        "EleutherAI/pythia-160m",
    ),
    (
        "gpt-neox-20b",
        {
            "model_type": "gpt_neox",
            "hidden_size": 6144,
            "num_attention_heads": 64,
            "intermediate_size": 24576,
            "num_hidden_layers": 44,
            "vocab_size": 50432,
        },
        20_554_567_680,
        "EleutherAI/gpt-neox-20b (also the GPT-NeoX README's n_parameters)",
    ),
    (
        "stablelm-base-alpha-3b (gpt_neox)",
        {
            "model_type": "gpt_neox",
            "hidden_size": 4096,
            "num_attention_heads": 32,
            "intermediate_size": 16384,
            "num_hidden_layers": 16,
            "vocab_size": 50688,
        },
        3_637_321_728,
        "stabilityai/stablelm-base-alpha-3b",
    ),
    (
        "falcon-7b (multi-query, parallel, tied)",
        {
            "model_type": "falcon",
            "hidden_size": 4544,
            "num_attention_heads": 71,
            "num_hidden_layers": 32,
            "vocab_size": 65024,
            "multi_query": True,
            "parallel_attn": True,
        },
        6_921_720_704,
        "tiiuae/falcon-7b: no exact public figure found (HF page: 7B); "
        "hand-derived: 32*(4544*4672 + 4544^2 + 2*4544*18176 + 2*4544) + 65024*4544 + 2*4544",
    ),
    (
        "bloom-560m (embedding LayerNorm)",
        {
            "model_type": "bloom",
            "hidden_size": 1024,
            "n_head": 16,
            "n_layer": 24,
            "vocab_size": 250880,
        },
        559_214_592,
        "bigscience/bloom-560m",
    ),
    (
        "bloom-176b (n_embed alias)",
        {
            "model_type": "bloom",
            "n_embed": 14336,
            "n_head": 112,
            "n_layer": 70,
            "vocab_size": 250880,
        },
        176_247_271_424,
        "bigscience/bloom",
    ),
]


@pytest.mark.parametrize("case,cfg,total,source", TOTALS, ids=[t[0] for t in TOTALS])
def test_exact_total(case, cfg, total, source):
    assert arch_from_hf_config(cfg).params_total == total


# Hand-derived: the totals above minus the inactive experts' weights.
ACTIVE = [
    # 46,702,792,704 - 32 layers * 6 idle experts * 3 * 4096 * 14336
    (MIXTRAL_8X7B, 12_879_925_248),
    # 14,315,784,192 - 24 * 56 idle experts * 3 * 2048 * 1408
    (QWEN15_MOE, 2_689_173_504),
    # 30,532,122,624 - 48 * 120 idle experts * 3 * 2048 * 768
    (QWEN3_30B_A3B, 3_353_032_704),
]


@pytest.mark.parametrize("cfg,active", ACTIVE)
def test_moe_active_params(cfg, active):
    arch = arch_from_hf_config(cfg)
    assert arch.params_active == active
    assert arch.params_active < arch.params_total
    assert arch.num_experts > 0


def test_dense_active_equals_total():
    arch = arch_from_hf_config(TOTALS[0][1])
    assert arch.params_active == arch.params_total
    assert arch.num_experts == 0 and arch.experts_per_token == 0


def test_falcon_40b_new_decoder_architecture():
    """Falcon-40B: 8 kv groups, ln_attn + ln_mlp, 4h MLP (hand-derived):
    block = 8192*(128+16)*64 + 8192^2 + 2*8192*32768 + 2*2*8192 = 679,510,016;
    total = 60 * block + 65024*8192 (tied) + 2*8192 = 41,303,293,952."""
    arch = arch_from_hf_config(
        {
            "model_type": "falcon",
            "hidden_size": 8192,
            "num_attention_heads": 128,
            "num_kv_heads": 8,
            "new_decoder_architecture": True,
            "num_hidden_layers": 60,
            "vocab_size": 65024,
        }
    )
    assert arch.block_params == 679_510_016
    assert arch.params_total == 41_303_293_952
    assert arch.num_kv_heads == 8 and arch.norms_per_layer == 2 and arch.parallel_block


def test_llama_2_7b_breakdown():
    arch = arch_from_hf_config(TOTALS[0][1])
    assert arch.embedding_params == 32000 * 4096
    assert arch.lm_head_params == 32000 * 4096
    assert arch.block_params == 4 * 4096 * 4096 + 3 * 4096 * 11008 + 2 * 4096
    assert quantized_weight_params(arch) == 32 * (4 * 4096 * 4096 + 3 * 4096 * 11008)
    assert arch.linear_names() == (
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
        "gate_proj",
        "up_proj",
        "down_proj",
    )


def test_router_not_quantizable():
    arch = arch_from_hf_config(MIXTRAL_8X7B)
    (gate,) = [l for l in arch.linears if l.name == "gate"]
    assert (gate.d_in, gate.d_out, gate.count, gate.quantizable, gate.role) == (
        4096,
        8,
        1,
        False,
        "router",
    )
    assert quantized_weight_params(arch) == arch.num_layers * sum(
        l.params for l in arch.linears if l.name != "gate"
    )


def test_gpt2_has_two_c_proj_listed_once():
    arch = arch_from_hf_config(
        {"model_type": "gpt2", "n_embd": 768, "n_head": 12, "n_layer": 12, "vocab_size": 50257}
    )
    assert [l.name for l in arch.linears].count("c_proj") == 2
    assert arch.linear_names() == ("c_attn", "c_proj", "c_fc")
    assert arch.learned_positions == 1024 and arch.max_position_embeddings == 1024


def test_linear_layer_counts_bias_per_copy():
    layer = LinearLayer("w1", 10, 20, bias=True, count=3, active=1)
    assert layer.weight_params == 200
    assert layer.params == 3 * 220


@pytest.mark.parametrize(
    "kwargs,field",
    [
        ({"d_in": 0}, "d_in"),
        ({"d_out": -1}, "d_out"),
        ({"count": 2, "active": 3}, "active"),
        ({"role": "other"}, "role"),
        ({"d_in": True}, "d_in"),
    ],
)
def test_linear_layer_rejects_bad_shapes(kwargs, field):
    base = {"name": "up_proj", "d_in": 4, "d_out": 4}
    with pytest.raises(ConfigError) as err:
        LinearLayer(**{**base, **kwargs})
    assert err.value.code == "config_invalid_value" and err.value.field == field


def _arch(**overrides):
    base = dict(
        name="t",
        family="llama",
        vocab_size=10,
        hidden_size=8,
        num_layers=2,
        num_heads=2,
        num_kv_heads=1,
        head_dim=4,
        intermediate_size=16,
        max_position_embeddings=32,
        linears=(LinearLayer("q_proj", 8, 8, role="attn"),),
    )
    return ModelArch(**{**base, **overrides})


@pytest.mark.parametrize(
    "overrides,field",
    [
        ({"hidden_size": 0}, "hidden_size"),
        ({"num_kv_heads": 3, "num_heads": 4}, "num_key_value_heads"),
        ({"linears": ()}, "linears"),
        ({"norm_kind": "batch"}, "norm_kind"),
        ({"num_experts": 2, "experts_per_token": 3}, "experts_per_token"),
        ({"norms_per_layer": -1}, "norms_per_layer"),
        # MLP kinds apart from the mixers: they sum to the blocks, and are not mixer kinds
        ({"ffn_counts": (("dense", 1), ("moe", 2))}, "ffn_counts"),
        (
            {"block_counts": (("moe", 1), ("conv", 1)), "ffn_counts": (("dense", 1), ("moe", 1))},
            "ffn_counts",
        ),
        ({"linears": (LinearLayer("q_proj", 8, 8, role="attn", block_kind="moe"),)}, "block_kind"),
    ],
)
def test_model_arch_validates(overrides, field):
    with pytest.raises(ConfigError) as err:
        _arch(**overrides)
    assert err.value.code == "config_invalid_value" and err.value.field == field


def test_model_arch_small_hand_count():
    # embedding 80 + 2 blocks * (q 64 + 2 rms norms 16) + final norm 8 + head 80
    assert _arch().params_total == 80 + 2 * (64 + 16) + 8 + 80


def test_moe_time_uses_active_parameters_dense_of_same_total_does_not():
    """Mixture of experts: memory holds every expert, compute runs the top-k. A Mixtral-shaped model and a
    dense model with the same expert width in one MLP hold the same parameters (to the router's
    hidden*experts per block) but an MoE token multiplies through 2 of its 8 experts."""
    from calc.memory import estimate_dict
    from calc.timing import matmul_params, training_flops_per_token

    base = {
        "hidden_size": 1024,
        "num_attention_heads": 16,
        "num_key_value_heads": 4,
        "num_hidden_layers": 8,
        "vocab_size": 32000,
    }
    moe = arch_from_hf_config(
        {
            **base,
            "model_type": "mixtral",
            "intermediate_size": 1024,
            "num_local_experts": 8,
            "num_experts_per_tok": 2,
        }
    )
    dense = arch_from_hf_config({**base, "model_type": "mistral", "intermediate_size": 8 * 1024})
    assert moe.params_total - dense.params_total == 8 * 1024 * 8  # the routers only
    fpt = {
        a.name: training_flops_per_token(a, "full", 2048, False, a.params_total, "sdpa").total
        for a in (moe, dense)
    }
    # attention's score/value FLOPs are equal; the matmul FLOPs follow the active parameters
    attn = 3 * 4.0 * 8 * 2048 * 16 * 64 * 0.5
    assert (fpt["mixtral"] - attn) / (fpt["mistral"] - attn) == pytest.approx(
        matmul_params(moe) / matmul_params(dense), rel=1e-9
    )
    assert matmul_params(moe) < 0.45 * matmul_params(dense)
    # memory: the full fine-tune of the MoE holds all its weights (at least the dense model's)
    m = estimate_dict(
        {
            "model": {
                "hf_config": {
                    **base,
                    "model_type": "mixtral",
                    "intermediate_size": 1024,
                    "num_local_experts": 8,
                    "num_experts_per_tok": 2,
                }
            },
            "method": "full",
        }
    )
    d = estimate_dict(
        {
            "model": {
                "hf_config": {**base, "model_type": "mistral", "intermediate_size": 8 * 1024}
            },
            "method": "full",
        }
    )
    assert m["components"]["weights"] >= d["components"]["weights"]
    assert (m["params_total"], m["params_active"]) == (moe.params_total, moe.params_active)
    assert d["params_active"] == d["params_total"]


def test_models_that_differ_in_a_config_trait_are_different_models():
    """Traits read from the config into ``extra`` (here GPT-2's attention dropout) are part of
    the model's identity: two configs that differ only there compare unequal, so no cache keyed
    on the request hands one the other's answer."""
    from calc.memory import estimate_dict

    gpt2 = {"model_type": "gpt2", "n_embd": 512, "n_head": 8, "n_layer": 2, "vocab_size": 8000}
    with_dropout = arch_from_hf_config(gpt2)
    without = arch_from_hf_config({**gpt2, "attn_pdrop": 0.0})
    assert with_dropout != without
    assert with_dropout == arch_from_hf_config(dict(gpt2))
    request = {
        "method": "full",
        "attention": "eager",
        "seq_len": 256,
        "micro_batch_size": 4,
        "gradient_checkpointing": False,
    }
    saved = [
        estimate_dict({**request, "model": {"hf_config": cfg}})["components"]["activations"]
        for cfg in (gpt2, {**gpt2, "attn_pdrop": 0.0}, gpt2)
    ]
    assert saved[0] > saved[1] and saved[2] == saved[0]


def test_hash_is_the_dataclass_rule_worked_out_once():
    """ModelArch.__hash__ keeps its value (requests are cache keys): the tuple of the fields
    dataclass would hash, so equal models hash alike, ``extra`` (a dict) is left out, and a
    replaced field gives a model of its own hash."""
    from dataclasses import fields, replace

    arch = _arch(extra={"dropout": 0.1})
    rule = hash(
        tuple(
            getattr(arch, f.name) for f in fields(arch) if (f.compare if f.hash is None else f.hash)
        )
    )
    assert hash(arch) == rule == hash(arch)
    twin = _arch(extra={"dropout": 0.1})
    assert twin == arch and hash(twin) == hash(arch)
    other_extra = _arch(extra={"dropout": 0.2})
    assert other_extra != arch and hash(other_extra) == hash(arch)  # compared, not hashed
    wider = replace(arch, hidden_size=16)
    assert wider != arch and hash(wider) != hash(arch)
