"""Hybrid linear-attention stacks (Qwen3-Next, Qwen3.5, Qwen3.5-MoE): reading, parameter
counts, LoRA targets, saved activations against the oracle, FLOPs and coded errors."""

from __future__ import annotations

import copy

import pytest

from benchmarks.oracle_sweep import ACCEPTED_FAMILIES, BASE_REQUEST
from calc.errors import ConfigError
from calc.flops import attention_forward_flops_per_token, linear_attention_forward_flops_per_token
from calc.hf_config import arch_from_hf_config
from calc.lora import adapted_linears, adapter_params
from calc.memory import estimate_dict
from calc.presets import get_preset

QWEN35 = ACCEPTED_FAMILIES["qwen3_5_text"]
QWEN35_MOE = ACCEPTED_FAMILIES["qwen3_5_moe_text"]
QWEN3_NEXT = ACCEPTED_FAMILIES["qwen3_next"]


def config(base: dict, **changes: object) -> dict:
    out = copy.deepcopy(base)
    out.update(changes)
    return out


# Parameters of transformers 5.17's own model (AutoModelForCausalLM.from_config on the meta
# device, summed over model.parameters()) for the same config.
@pytest.mark.parametrize(
    ("cfg", "params"),
    [
        (QWEN35, 21_734_384),
        (QWEN35_MOE, 23_678_856),
        (QWEN3_NEXT, 23_682_896),
    ],
)
def test_reduced_configs_count_what_transformers_builds(cfg, params):
    assert arch_from_hf_config(cfg).params_total == params


@pytest.mark.parametrize(
    ("preset", "total", "active"),
    [
        # transformers 5.17 Qwen3NextForCausalLM on the published shapes; the MTP layer of the
        # checkpoint is not part of the model transformers builds
        ("qwen3-next-80b-a3b", 79_674_391_296, 3_874_929_408),
        # the language model of Qwen3_5ForConditionalGeneration (Qwen3_5ForCausalLM)
        ("qwen3.5-9b", 8_953_803_264, 8_953_803_264),
        ("qwen3.5-35b-a3b", 34_660_610_688, 3_454_988_928),
    ],
)
def test_presets_count_the_language_model(preset, total, active):
    arch = get_preset(preset)
    assert (arch.params_total, arch.params_active) == (total, active)


def test_layer_types_follow_the_full_attention_interval():
    arch = arch_from_hf_config(config(QWEN35, num_hidden_layers=8))
    assert dict(arch.block_counts) == {"full_attention": 2, "linear_attention": 6}
    assert arch.extra["mixer_order"] == ["linear_attention"] * 3 + ["full_attention"] * 1 + [
        "linear_attention"
    ] * 3 + ["full_attention"]
    every_other = arch_from_hf_config(config(QWEN35, full_attention_interval=2))
    assert dict(every_other.block_counts) == {"full_attention": 2, "linear_attention": 2}


def test_explicit_and_legacy_layer_types():
    arch = arch_from_hf_config(
        config(
            QWEN35,
            layer_types=["attention", "linear_attention", "full_attention", "linear_attention"],
        )
    )
    assert dict(arch.block_counts) == {"full_attention": 2, "linear_attention": 2}
    assert arch.extra["mixer_order"][0] == "full_attention"


def test_the_multimodal_config_is_read_through_its_text_config():
    text = config(QWEN35)
    arch = arch_from_hf_config({"model_type": "qwen3_5", "text_config": text, "vision_config": {}})
    assert arch.extra["text_config_only"] is True
    assert arch.params_total == arch_from_hf_config(QWEN35).params_total


@pytest.mark.parametrize(
    ("changes", "code", "field"),
    [
        ({"layer_types": ["linear_attention"] * 3}, "config_layer_types_length", "layer_types"),
        (
            {"layer_types": ["linear_attention", "mamba", "x", "full_attention"]},
            "config_invalid_value",
            "layer_types",
        ),
        ({"linear_num_key_heads": 3}, "config_kv_heads_indivisible", "linear_num_key_heads"),
        ({"num_key_value_heads": 3}, "config_kv_heads_indivisible", "num_key_value_heads"),
        ({"linear_value_head_dim": 0}, "config_invalid_value", "linear_value_head_dim"),
        ({"partial_rotary_factor": 1.5}, "config_invalid_value", "partial_rotary_factor"),
    ],
)
def test_inconsistent_shapes_are_coded_errors(changes, code, field):
    with pytest.raises(ConfigError) as err:
        arch_from_hf_config(config(QWEN35, **changes))
    assert (err.value.code, err.value.field) == (code, "hf_config." + field)


def test_moe_errors_name_the_key():
    with pytest.raises(ConfigError) as err:
        arch_from_hf_config(config(QWEN35_MOE, num_experts_per_tok=9))
    assert (err.value.code, err.value.field) == (
        "config_top_k_above_experts",
        "hf_config.num_experts_per_tok",
    )
    with pytest.raises(ConfigError) as err:
        arch_from_hf_config(config(QWEN3_NEXT, mlp_only_layers=[0]))
    assert err.value.code == "unsupported_architecture"


def test_all_linear_reaches_the_mixer_projections_not_the_convolution():
    arch = arch_from_hf_config(QWEN35)
    names = {a.name for a in adapted_linears(arch, "all-linear")}
    assert {"in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a", "out_proj"} <= names
    assert {"q_proj", "o_proj", "gate_proj", "down_proj"} <= names
    assert not any("conv" in n for n in names)


# peft 0.21 get_peft_model(r=16, target_modules="all-linear") on transformers 5.17's model:
# trainable parameters. Qwen3-Next's experts are converted to target_parameters (its
# model_type borrows qwen2_moe's conversion pattern), Qwen3.5-MoE's are not.
@pytest.mark.parametrize(("cfg", "trainable"), [(QWEN35_MOE, 219_296), (QWEN3_NEXT, 791_072)])
def test_all_linear_adapters_count_what_peft_builds(cfg, trainable):
    arch = arch_from_hf_config(cfg)
    assert adapter_params(adapted_linears(arch, "all-linear", "fused-3d"), 16) == trainable


def sweep_request(cfg: dict, **overrides: object) -> dict:
    """A request as benchmarks.oracle_sweep.setups builds it: no profile, each key as stated."""
    return dict(BASE_REQUEST, model={"hf_config": cfg}, framework="generic", **overrides)


# Allocated peaks the oracle traced (benchmarks.oracle_sweep: transformers 5.17 + peft 0.21 on
# fake tensors, with the causal-conv1d and flash-linear-attention kernels' saved tensors).
@pytest.mark.parametrize(
    ("cfg", "overrides", "oracle_peak"),
    [
        (QWEN35, {"method": "full", "seq_len": 2048}, 836_789_700),
        (QWEN35, {"method": "full", "seq_len": 2048, "gradient_checkpointing": True}, 542_818_564),
        # attention-only targets: the three Gated DeltaNet blocks before the first attention
        # block hold no adapter and see a frozen input, so they save nothing
        (
            QWEN35,
            {
                "method": "lora",
                "lora_rank": 8,
                "seq_len": 2048,
                "lora_targets": ["q_proj", "k_proj", "v_proj", "o_proj"],
            },
            483_527_816,
        ),
        (
            QWEN35_MOE,
            {
                "method": "lora",
                "lora_rank": 16,
                "lora_targets": "all-linear",
                "moe_expert_layout": "fused-3d",
            },
            110_427_184,
        ),
        (
            QWEN3_NEXT,
            {
                "method": "lora",
                "lora_rank": 16,
                "lora_targets": "all-linear",
                "moe_expert_layout": "fused-3d",
                "micro_batch_size": 2,
                "seq_len": 1024,
            },
            566_129_856,
        ),
    ],
)
def test_peaks_hold_to_the_oracle(cfg, overrides, oracle_peak):
    peak = estimate_dict(sweep_request(cfg, **overrides))["peak_allocated_bytes"]
    assert abs(peak / oracle_peak - 1) < 0.005


def test_linear_attention_flops_are_chunked_and_attention_counts_its_blocks_only():
    arch = get_preset("qwen3-next-80b-a3b")
    per_head = 6 * 128 * 128 + 2 * 64 * (3 * 128 + 2 * 128) + 2 * 64 * 64 / 3
    assert linear_attention_forward_flops_per_token(arch) == pytest.approx(36 * 32 * per_head)
    attention = 4.0 * 12 * 4096 * 16 * 256 * 0.5
    assert attention_forward_flops_per_token(arch, 4096, "sdpa") == pytest.approx(
        attention + 36 * 32 * per_head
    )
    # independent of the sequence length, unlike attention
    assert linear_attention_forward_flops_per_token(arch) == pytest.approx(
        attention_forward_flops_per_token(arch, 1, "sdpa") - 4.0 * 12 * 16 * 256 * 0.5
    )


def test_fp32_training_is_flagged_as_refused_by_the_kernel():
    warnings = estimate_dict(sweep_request(QWEN35, method="full", precision="fp32"))["warnings"]
    assert "linear_attention_fp32_refused_by_fla" in warnings
    bf16 = estimate_dict(sweep_request(QWEN35, method="full"))["warnings"]
    assert "linear_attention_fp32_refused_by_fla" not in bf16


# ---- LFM2: gated short convolutions beside attention blocks ---------------------------------
LFM2 = ACCEPTED_FAMILIES["lfm2"]


@pytest.mark.parametrize(
    ("cfg", "params"),
    [
        # transformers 5.17 Lfm2ForCausalLM on the meta device, parameters summed
        (LFM2, 21_439_616),
        (
            config(LFM2, conv_bias=True, block_ffn_dim_multiplier=1.5, tie_word_embeddings=False),
            34_357_888,
        ),
        (config(LFM2, full_attn_idxs=None, num_hidden_layers=3, vocab_size=1000), 9_559_936),
    ],
)
def test_lfm2_counts_what_transformers_builds(cfg, params):
    assert arch_from_hf_config(cfg).params_total == params


@pytest.mark.parametrize(
    ("preset", "total"), [("lfm2-350m", 354_483_968), ("lfm2-1.2b", 1_170_340_608)]
)
def test_lfm2_presets(preset, total):
    arch = get_preset(preset)
    assert arch.params_total == total
    assert dict(arch.block_counts) == {"full_attention": 6, "conv": 10}


def test_lfm2_reads_block_ff_dim_over_intermediate_size():
    """LFM2-1.2B's config.json holds intermediate_size 8192 and block_ff_dim 12288;
    Lfm2Config takes the latter and Lfm2MLP adjusts it to 2/3: 8192 wide."""
    arch = arch_from_hf_config(
        config(LFM2, hidden_size=2048, block_ff_dim=12288, intermediate_size=8192)
    )
    assert arch.intermediate_size == 8192


def test_lfm2_all_linear_adapts_both_out_projections():
    arch = arch_from_hf_config(LFM2)
    adapted = {(a.name, a.role) for a in adapted_linears(arch, "all-linear")}
    assert {("in_proj", "mixer"), ("out_proj", "mixer"), ("out_proj", "attn")} <= adapted
    # peft 0.21 get_peft_model(r=16, "all-linear") on transformers 5.17's model
    assert adapter_params(adapted_linears(arch, "all-linear"), 16) == 593_920


@pytest.mark.parametrize(
    ("changes", "code", "field"),
    [
        ({"layer_types": ["conv", "full_attention"]}, "config_layer_types_length", "layer_types"),
        ({"layer_types": ["conv", "mamba", "conv", "conv"]}, "config_invalid_value", "layer_types"),
        ({"full_attn_idxs": [7]}, "config_invalid_value", "full_attn_idxs"),
        ({"num_attention_heads": 6}, "config_heads_indivisible", "num_attention_heads"),
    ],
)
def test_lfm2_inconsistent_shapes_are_coded_errors(changes, code, field):
    with pytest.raises(ConfigError) as err:
        arch_from_hf_config(config(LFM2, **changes))
    assert (err.value.code, err.value.field) == (code, "hf_config." + field)


@pytest.mark.parametrize(
    ("overrides", "oracle_peak"),
    [
        ({"method": "full", "seq_len": 2048}, 751_746_204),
        # attention targets name out_proj, which the convolution blocks hold too: their
        # tensors before out_proj need no gradient in the first block
        (
            {
                "method": "lora",
                "lora_rank": 8,
                "seq_len": 2048,
                "lora_targets": ["q_proj", "k_proj", "v_proj", "out_proj"],
            },
            588_397_120,
        ),
    ],
)
def test_lfm2_peaks_hold_to_the_oracle(overrides, oracle_peak):
    peak = estimate_dict(sweep_request(LFM2, **overrides))["peak_allocated_bytes"]
    assert abs(peak / oracle_peak - 1) < 0.005


# ---- LFM2-MoE: dense MLPs in the first blocks, routed experts after, whichever the mixer -----
LFM2_MOE = ACCEPTED_FAMILIES["lfm2_moe"]


def test_lfm2_moe_counts_what_transformers_builds():
    # transformers 5.17 Lfm2MoeForCausalLM on the meta device, parameters summed
    arch = arch_from_hf_config(LFM2_MOE)
    assert arch.params_total == 26_827_008
    assert dict(arch.block_counts) == {"full_attention": 2, "conv": 3}
    assert dict(arch.ffn_counts) == {"dense": 2, "moe": 3}
    assert arch.extra["ffn_order"] == ["dense", "dense", "moe", "moe", "moe"]
    # the dense MLP keeps intermediate_size as given (no LFM2 2/3 adjustment)
    dense = {l.name: l for l in arch.linears if l.block_kind == "dense"}
    assert dense["w1"].d_out == 1536 and dense["w2"].d_in == 1536
    # 3 blocks x 6 idle experts x 3 x 512 x 256
    assert arch.params_total - arch.params_active == 3 * 6 * 3 * 512 * 256
    # one FSDP unit: the largest mixer (the convolution's 3h + h projections) beside the
    # routed experts, the largest MLP
    names = {(l.name, l.block_kind) for l in arch.block_linears}
    assert ("experts.gate_up_proj", "moe") in names and ("in_proj", "conv") in names
    assert not any(kind in ("dense", "full_attention") for _, kind in names)


@pytest.mark.parametrize(
    ("overrides", "oracle_peak"),
    [
        # the MLP norm's output is saved by the dense blocks' adapted w1 / w3 only: each MLP
        # kind weighs its own inputs by its share of blocks
        (
            {
                "method": "lora",
                "lora_rank": 16,
                "lora_targets": "all-linear",
                "moe_expert_layout": "fused-3d",
            },
            131_027_048,
        ),
        # no adapter before the third block: the first two (convolution, dense MLP) save
        # nothing, counted with the dense MLP they hold, not the average block's
        (
            {
                "method": "lora",
                "lora_rank": 8,
                "seq_len": 2048,
                "lora_targets": ["q_proj", "k_proj", "v_proj"],
            },
            541_029_368,
        ),
        ({"method": "full", "seq_len": 2048}, 816_781_448),
    ],
)
def test_lfm2_moe_peaks_hold_to_the_oracle(overrides, oracle_peak):
    peak = estimate_dict(sweep_request(LFM2_MOE, **overrides))["peak_allocated_bytes"]
    assert abs(peak / oracle_peak - 1) < 0.002


@pytest.mark.parametrize(
    ("changes", "code", "field"),
    [
        ({"layer_types": None}, "config_missing_key", "layer_types"),
        ({"num_dense_layers": -1}, "config_invalid_value", "num_dense_layers"),
        ({"num_dense_layers": "2"}, "config_invalid_value", "num_dense_layers"),
        ({"num_experts_per_tok": 9}, "config_top_k_above_experts", "num_experts_per_tok"),
        ({"num_experts": None}, "config_missing_key", "num_experts"),
    ],
)
def test_lfm2_moe_inconsistent_shapes_are_coded_errors(changes, code, field):
    cfg = config(LFM2_MOE, **changes)
    for key in [k for k, v in changes.items() if v is None]:
        del cfg[key]
    with pytest.raises(ConfigError) as err:
        arch_from_hf_config(cfg)
    assert (err.value.code, err.value.field) == (code, "hf_config." + field)


def test_lfm2_moe_with_every_block_dense_or_routed_is_one_kind():
    # transformers 5.17 builds 28,408,064 and 24,455,424 parameters for these
    every = arch_from_hf_config(config(LFM2_MOE, num_dense_layers=0))
    assert every.ffn_counts == () and every.num_experts == 8
    assert every.params_total == 28_408_064
    none = arch_from_hf_config(config(LFM2_MOE, num_dense_layers=9))
    assert none.ffn_counts == () and none.num_experts == 0
    assert none.params_total == none.params_active == 24_455_424


# ---- OLMo Hybrid: Gated DeltaNet blocks and OLMo 2 attention blocks -------------------------
OLMO_HYBRID = ACCEPTED_FAMILIES["olmo_hybrid"]


def test_olmo_hybrid_counts_what_transformers_builds():
    """transformers 5.17 OlmoHybridForCausalLM on the meta device (default linear widths:
    key heads = attention heads, key width int(0.75 * hidden / heads), values twice as wide;
    attention every fourth block, at least the last)."""
    arch = arch_from_hf_config(OLMO_HYBRID)
    assert arch.params_total == 30_642_264
    assert dict(arch.block_counts) == {"full_attention": 1, "linear_attention": 3}
    three = config(
        OLMO_HYBRID,
        intermediate_size=1024,
        num_key_value_heads=2,
        num_hidden_layers=3,
        vocab_size=1000,
        linear_num_key_heads=None,
        linear_num_value_heads=None,
    )
    arch = arch_from_hf_config(three)
    assert arch.params_total == 9_576_800
    assert arch.extra["mixer_order"] == ["linear_attention"] * 2 + ["full_attention"]


def test_olmo_hybrid_attention_names_reach_both_mixers():
    """q_proj, k_proj, v_proj and o_proj name the attention's and the Gated DeltaNet's
    projections alike: peft adapts both (747,904 trainable at r=16 on all linears, peft 0.21)."""
    arch = arch_from_hf_config(OLMO_HYBRID)
    adapted = {(a.name, a.role) for a in adapted_linears(arch, ["q_proj", "o_proj"])}
    assert adapted == {
        ("q_proj", "attn"),
        ("o_proj", "attn"),
        ("q_proj", "mixer"),
        ("o_proj", "mixer"),
    }
    assert adapter_params(adapted_linears(arch, "all-linear"), 16) == 747_904


@pytest.mark.parametrize(
    ("overrides", "oracle_peak"),
    [
        ({"method": "full", "seq_len": 2048}, 916_636_856),
        # the Gated DeltaNet's gate and decay projections hold no adapter: in the first
        # block their branches need no gradient
        (
            {
                "method": "lora",
                "lora_rank": 8,
                "seq_len": 2048,
                "lora_targets": ["q_proj", "k_proj", "v_proj", "o_proj"],
            },
            693_023_344,
        ),
    ],
)
def test_olmo_hybrid_peaks_hold_to_the_oracle(overrides, oracle_peak):
    peak = estimate_dict(sweep_request(OLMO_HYBRID, **overrides))["peak_allocated_bytes"]
    assert abs(peak / oracle_peak - 1) < 0.005


# ---- Kimi Linear: Kimi Delta Attention blocks beside latent attention without RoPE ----------
KIMI = ACCEPTED_FAMILIES["kimi_linear"]
ATTN = ["q_proj", "k_proj", "v_proj", "o_proj"]
# moonshotai/Kimi-Linear-48B-A3B-Instruct's config.json (the keys that shape the model)
KIMI_48B = {
    "model_type": "kimi_linear",
    "hidden_size": 2304,
    "intermediate_size": 9216,
    "moe_intermediate_size": 1024,
    "num_hidden_layers": 27,
    "num_attention_heads": 32,
    "num_key_value_heads": 32,
    "q_lora_rank": None,
    "kv_lora_rank": 512,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "num_experts": 256,
    "num_experts_per_token": 8,
    "num_shared_experts": 1,
    "num_expert_group": 1,
    "topk_group": 1,
    "first_k_dense_replace": 1,
    "linear_attn_config": {
        "full_attn_layers": [4, 8, 12, 16, 20, 24, 27],
        "kda_layers": [1, 2, 3, 5, 6, 7, 9, 10, 11, 13, 14, 15, 17, 18, 19, 21, 22, 23, 25, 26],
        "num_heads": 32,
        "head_dim": 128,
        "short_conv_kernel_size": 4,
    },
    "model_max_length": 1048576,
    "tie_word_embeddings": False,
    "vocab_size": 163840,
}


def test_kimi_linear_counts_what_transformers_builds():
    # transformers 5.17 KimiLinearForCausalLM on the meta device, parameters summed
    assert arch_from_hf_config(KIMI).params_total == 17_209_608
    arch = arch_from_hf_config(KIMI_48B)
    assert arch.params_total == 49_122_675_072  # Moonshot's card: 48B total, 3B activated
    assert arch.params_active == 3_484_453_248
    # the 1-based block lists of linear_attn_config
    assert dict(arch.block_counts) == {"full_attention": 7, "linear_attention": 20}
    assert [i for i, k in enumerate(arch.extra["mixer_order"]) if k == "full_attention"] == [
        3,
        7,
        11,
        15,
        19,
        23,
        26,
    ]
    assert dict(arch.ffn_counts) == {"moe": 26, "dense": 1}
    assert arch.extra["ffn_order"][:2] == ["dense", "moe"]
    mixer = {l.name: (l.d_in, l.d_out) for l in arch.linears if l.role == "mixer"}
    # low-rank forget and output gates through head_dim (128), per channel of 32 x 128
    assert mixer["f_a_proj"] == (2304, 128) and mixer["f_b_proj"] == (128, 4096)
    assert mixer["g_b_proj"] == (128, 4096) and mixer["b_proj"] == (2304, 32)
    attn = {l.name: (l.d_in, l.d_out) for l in arch.linears if l.role == "attn"}
    assert attn["q_proj"] == (2304, 32 * 192) and attn["kv_a_proj_with_mqa"] == (2304, 576)
    # no rotary embedding: KimiLinearModel deletes it
    assert arch.extra["no_rope"] and arch.mla


@pytest.mark.parametrize(
    ("overrides", "oracle_peak"),
    [
        # q, k, v, o adapt the KDA mixer's four and the latent attention's q_proj and o_proj
        (
            {"method": "lora", "lora_rank": 8, "seq_len": 2048, "lora_targets": ATTN},
            359_539_928,
        ),
        (
            {
                "method": "lora",
                "lora_rank": 16,
                "lora_targets": "all-linear",
                "moe_expert_layout": "fused-3d",
                "micro_batch_size": 2,
                "seq_len": 1024,
            },
            383_562_896,
        ),
        ({"method": "full", "seq_len": 2048}, 497_908_148),
    ],
)
def test_kimi_linear_peaks_hold_to_the_oracle(overrides, oracle_peak):
    # oracle: transformers 5.17 + peft 0.21 with flash-linear-attention's ChunkKDAFunction
    # modelled (tools/oracle/linear_attention.py)
    peak = estimate_dict(sweep_request(KIMI, **overrides))["peak_allocated_bytes"]
    assert abs(peak / oracle_peak - 1) < 0.003


def test_kimi_delta_attention_saved_tensors_by_hand():
    from calc import activations as act

    arch = arch_from_hf_config(KIMI)  # 4 heads of 64: D = 256, hidden 512
    cfg = act.ActConfig(2, 2, True, frozenset(), 0, act.Attention.SDPA, 256, False)
    expected = (
        2 * 512  # the norm output the six outer projections read
        + 2 * 2 * 64  # f_a_proj's and g_a_proj's outputs, read by f_b_proj and g_b_proj
        + 2 * 3 * 256  # causal-conv1d's x
        + (9 + 4) * 256  # exp output, log input, where mask; the fp32 softplus (A_log trains)
        + 2 * 4  # beta
        + 2 * 3 * 256
        + 4 * 2 * 4  # q, k (l2-normalised), v; two rstd
        + 2 * 4 * 256
        + (4 + 2) * 4 * 64  # g_cumsum, g; Aqk (fp32), Akk (bf16)
        + 4 * 256
        + 4 * 4
        + 4 * 256  # gated norm: upcast, rsqrt, normalised copy
        + 2 * 4 * 256  # weighted output, sigmoid of the gate
        + 2 * 256  # o_proj's input
    )
    assert act.gated_delta_net_bytes(arch, cfg) == expected
    # the backward's widest moment (chunk_kda_bwd_intra): w, u, qg, kg, v_new and dv2 (bf16),
    # dq, dk, dg and their second copies (fp32), dAqk, dAkk, db and two db2 blocks (fp32), the
    # chunk states and their gradients
    states = 2 * 2 * 4 * 64 * 64 // 64
    transient = 6 * 2 * 256 + 6 * 4 * 256 + 4 * 4 * (2 * 64 + 1 + 2) + states
    assert act.gated_delta_backward_bytes_per_token(arch, cfg) == transient
    # flash-linear-attention's chunk_kda takes fp32: no refusal warning
    request = sweep_request(KIMI, method="full", precision="fp32")
    assert "linear_attention_fp32_refused_by_fla" not in estimate_dict(request)["warnings"]


@pytest.mark.parametrize(
    ("changes", "code", "field"),
    [
        ({"num_experts_per_token": 9}, "config_top_k_above_experts", "num_experts_per_token"),
        ({"num_attention_heads": 12}, "config_kv_heads_indivisible", "num_key_value_heads"),
        ({"num_expert_group": 3}, "config_invalid_value", "num_expert_group"),
        (
            {"linear_attn_config": {**KIMI["linear_attn_config"], "kda_layers": [1]}},
            "config_invalid_value",
            "linear_attn_config.kda_layers",
        ),
        (
            {"linear_attn_config": {**KIMI["linear_attn_config"], "full_attn_layers": [4]}},
            "config_invalid_value",
            "linear_attn_config.full_attn_layers",
        ),
        (
            {"linear_attn_config": {**KIMI["linear_attn_config"], "num_heads": 0}},
            "config_invalid_value",
            "linear_attn_config.num_heads",
        ),
        ({"layer_types": ["linear_attention"] * 2}, "config_layer_types_length", "layer_types"),
        ({"mlp_layer_types": ["dense", "sparse"]}, "config_invalid_value", "mlp_layer_types"),
        ({"kv_lora_rank": 0}, "config_invalid_value", "kv_lora_rank"),
    ],
)
def test_kimi_linear_inconsistent_shapes_are_coded_errors(changes, code, field):
    with pytest.raises(ConfigError) as err:
        arch_from_hf_config(config(KIMI, **changes))
    assert (err.value.code, err.value.field) == (code, "hf_config." + field)


def test_kimi_linear_reads_the_transformers_names_and_defaults():
    # the names KimiLinearConfig's attribute_map resolves, and its default layer pattern
    # (full attention where i and i % 4 == 0) without linear_attn_config's lists
    cfg = {
        k: v
        for k, v in KIMI.items()
        if k not in ("num_experts_per_token", "num_shared_experts", "linear_attn_config")
    }
    cfg.update(num_experts_per_tok=2, n_shared_experts=1, num_hidden_layers=5)
    arch = arch_from_hf_config(cfg)
    assert arch.extra["mixer_order"] == ["linear_attention"] * 4 + ["full_attention"]
    assert arch.experts_per_token == 2 and arch.linear_attention.value_heads == 32


def test_kimi_linear_flops_count_the_latent_attention_blocks_and_the_kda_recurrence():
    arch = arch_from_hf_config(KIMI_48B)
    # 20 KDA blocks of 32 heads of 128, the chunked delta rule's count
    per_head = 6 * 128 * 128 + 2 * 64 * (3 * 128 + 2 * 128) + 2 * 64 * 64 / 3
    linear = linear_attention_forward_flops_per_token(arch)
    assert linear == pytest.approx(20 * 32 * per_head)
    # 7 latent-attention blocks: QK^T over 192 and AV over 128 per head, 32 heads, causal half
    full = attention_forward_flops_per_token(arch, 4096, "sdpa")
    assert full - linear == pytest.approx(2.0 * 7 * 4096 * 32 * (192 + 128) * 0.5, rel=1e-9)


def test_kimi_linear_expert_names_follow_the_checkpoint():
    arch = arch_from_hf_config(KIMI_48B)
    mlp_names = ["gate_proj", "up_proj", "down_proj"]
    # transformers 5.17 stacks the experts into 3-D parameters and peft 0.21 converts no target
    # of this family: the MLP names reach the shared experts and the dense first block's MLP
    fused = adapted_linears(arch, mlp_names, "fused-3d")
    assert {(a.name, a.count, a.blocks) for a in fused} == {
        ("gate_proj", 1, 26),
        ("up_proj", 1, 26),
        ("down_proj", 1, 26),
        ("gate_proj", 1, 1),
        ("up_proj", 1, 1),
        ("down_proj", 1, 1),
    }
    # the checkpoint's remote code holds one nn.Linear per expert, block_sparse_moe.experts.N.w1
    per_expert = adapted_linears(arch, ["w1", "w3", "w2"])
    assert {(a.name, a.count, a.active) for a in per_expert} == {
        ("w1", 256, 8),
        ("w3", 256, 8),
        ("w2", 256, 8),
    }
    # traced: the MLP names on the 3-D experts (benchmarks.oracle_sweep)
    request = sweep_request(
        KIMI,
        method="lora",
        lora_rank=16,
        lora_targets=mlp_names,
        moe_expert_layout="fused-3d",
        seq_len=1024,
    )
    assert estimate_dict(request)["peak_allocated_bytes"] / 187_487_184 - 1 == pytest.approx(
        0, abs=0.003
    )


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"mla_use_output_gate": True}, "mla_use_output_gate"),
        ({"mla_use_nope": False}, "mla_use_nope"),
        ({"routed_expert_hidden_size": 32}, "routed_expert_hidden_size"),
        ({"attn_res_block_size": 2}, "attn_res_block_size"),
        (
            {"linear_attn_config": {**KIMI["linear_attn_config"], "use_full_rank_gate": True}},
            "linear_attn_config.use_full_rank_gate",
        ),
    ],
)
def test_kimi_linear_layers_transformers_does_not_build_are_refused(changes, field):
    # a later Kimi's text config says kimi_linear too; KimiLinearForCausalLM builds none of these
    with pytest.raises(ConfigError) as err:
        arch_from_hf_config(config(KIMI, **changes))
    assert (err.value.code, err.value.field) == ("unsupported_architecture", "hf_config." + field)
    arch_from_hf_config(config(KIMI, mla_use_nope=True, mla_use_output_gate=False))


# Qwen/Qwen3.6-27B's config.json as published (revision 6a9e13bd), the way a user pastes it: a
# qwen3_5 wrapper with its vision encoder, the MTP layer's keys, rope parameters and token ids
QWEN36_27B_PUBLISHED = {
    "architectures": ["Qwen3_5ForConditionalGeneration"],
    "image_token_id": 248056,
    "language_model_only": False,
    "model_type": "qwen3_5",
    "text_config": {
        "attention_bias": False,
        "attention_dropout": 0.0,
        "attn_output_gate": True,
        "bos_token_id": 248044,
        "dtype": "bfloat16",
        "eos_token_id": 248044,
        "full_attention_interval": 4,
        "head_dim": 256,
        "hidden_act": "silu",
        "hidden_size": 5120,
        "initializer_range": 0.02,
        "intermediate_size": 17408,
        "layer_types": ["linear_attention"] * 3 + ["full_attention"],
        "linear_conv_kernel_dim": 4,
        "linear_key_head_dim": 128,
        "linear_num_key_heads": 16,
        "linear_num_value_heads": 48,
        "linear_value_head_dim": 128,
        "mamba_ssm_dtype": "float32",
        "max_position_embeddings": 262144,
        "model_type": "qwen3_5_text",
        "mtp_num_hidden_layers": 1,
        "mtp_use_dedicated_embeddings": False,
        "num_attention_heads": 24,
        "num_hidden_layers": 64,
        "num_key_value_heads": 4,
        "output_gate_type": "swish",
        "pad_token_id": None,
        "partial_rotary_factor": 0.25,
        "rms_norm_eps": 1e-06,
        "rope_parameters": {
            "mrope_interleaved": True,
            "mrope_section": [11, 11, 10],
            "partial_rotary_factor": 0.25,
            "rope_theta": 10000000,
            "rope_type": "default",
        },
        "tie_word_embeddings": False,
        "use_cache": True,
        "vocab_size": 248320,
    },
    "tie_word_embeddings": False,
    "transformers_version": "4.57.1",
    "video_token_id": 248057,
    "vision_config": {
        "deepstack_visual_indexes": [],
        "depth": 27,
        "hidden_act": "gelu_pytorch_tanh",
        "hidden_size": 1152,
        "in_channels": 3,
        "initializer_range": 0.02,
        "intermediate_size": 4304,
        "model_type": "qwen3_5",
        "num_heads": 16,
        "num_position_embeddings": 2304,
        "out_hidden_size": 5120,
        "patch_size": 16,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
    },
    "vision_end_token_id": 248054,
    "vision_start_token_id": 248053,
}
QWEN36_27B_PUBLISHED["text_config"]["layer_types"] *= 16


def test_a_published_multimodal_config_reads_as_pasted():
    arch = arch_from_hf_config(QWEN36_27B_PUBLISHED)
    assert arch.family == "qwen3_5_text" and arch.extra["text_config_only"]
    # transformers 5.17 Qwen3_5ForCausalLM built from this text_config on the meta device
    assert arch.params_total == 26_895_998_464
    assert dict(arch.block_counts) == {"full_attention": 16, "linear_attention": 48}
    wrong = {**QWEN36_27B_PUBLISHED["text_config"], "layer_types": ["full_attention"] * 63}
    with pytest.raises(ConfigError) as err:
        arch_from_hf_config({**QWEN36_27B_PUBLISHED, "text_config": wrong})
    assert (err.value.code, err.value.field) == (
        "config_layer_types_length",
        "hf_config.text_config.layer_types",
    )
