"""DeepSeek-V4 (``deepseek_v4``): how calc reads its config.json (block kinds, legacy keys),
counts what ``DeepseekV4ForCausalLM`` builds (transformers 5.17 meta-device totals), saves for
backward (hyper-connections with Sinkhorn mixing, eager attention over keys and compressed
entries, clamped experts), warns where the libraries refuse the setup, and refuses shapes
that contradict each other."""

from __future__ import annotations

from dataclasses import replace

import pytest

from benchmarks.oracle_sweep import ACCEPTED_FAMILIES
from calc import activations as act
from calc.errors import ConfigError
from calc.flops import attention_forward_flops_per_token, indexer_forward_flops_per_token
from calc.hf_config import MODEL_TYPES, arch_from_hf_config
from calc.memory import estimate_dict
from calc.request import Attention

# the sweep's reduced config (benchmarks.oracle_sweep), without the key calc does not read
DSV4 = {k: v for k, v in ACCEPTED_FAMILIES["deepseek_v4"].items() if k != "pad_token_id"}
HCA, CSA, SWA = (
    "heavily_compressed_attention",
    "compressed_sparse_attention",
    "sliding_attention",
)
# V4-Flash as DeepseekV4Config's defaults describe it (checkpoint deepseek-ai/DeepSeek-V4-Flash)
FLASH = {
    "model_type": "deepseek_v4",
    "vocab_size": 129280,
    "hidden_size": 4096,
    "moe_intermediate_size": 2048,
    "num_hidden_layers": 43,
    "num_attention_heads": 64,
    "n_routed_experts": 256,
    "num_experts_per_tok": 6,
}


def test_model_type_read():
    assert "deepseek_v4" in MODEL_TYPES


def test_parameters_equal_transformers_meta_builds():
    """``sum(p.numel() for p in DeepseekV4ForCausalLM(config).parameters())`` on the meta
    device (transformers 5.17): the reduced config, V4-Flash's defaults, V4-Pro's shape."""
    assert arch_from_hf_config(DSV4).params_total == 18_833_567
    assert arch_from_hf_config(FLASH).params_total == 284_325_869_015
    pro = {
        **FLASH,
        "hidden_size": 7168,
        "moe_intermediate_size": 3072,
        "num_hidden_layers": 61,
        "num_attention_heads": 128,
        "q_lora_rank": 1536,
        "o_groups": 16,
        "n_routed_experts": 384,
    }
    assert arch_from_hf_config(pro).params_total == 1_572_973_188_067


def test_hand_count_of_one_block_kind_each():
    """The reduced config counted by hand: h 512, 8 heads of 128 (rope 16), q rank 192,
    2 groups of rank 128, 8 experts of 192 (top 2), hc 4, index 4 x 32, rates 4 and 32."""
    arch = arch_from_hf_config(DSV4)
    h, heads, d, q, e, i, hc = 512, 8, 128, 192, 8, 192, 4
    mix = (2 + hc) * hc
    attention = h * q + q * heads * d + h * d + heads * d * 2 * 128 // 2 + 2 * 128 * h
    block = attention + q + d + heads  # q_a_norm, kv_norm, sinks
    block += 2 * (mix * hc * h + mix + 3) + 2 * h  # hyper-connections, norms
    block += e * h + e * 2 * i * h + e * h * i + 3 * h * i  # router, experts, shared expert
    hca = 2 * h * d + 32 * d + d
    csa = 2 * h * 2 * d + 4 * 2 * d + d
    indexer = 2 * h * 64 + 4 * 64 + 32 + q * 4 * 32 + h * 4
    outside = 2 * 8000 * h + h + hc * hc * h + hc + 1
    assert arch.params_total == 3 * block + hca + csa + indexer + outside
    assert arch.no_grad_params == indexer
    assert arch.indexer_layers == 1 and not arch.sparse_attention


def test_legacy_keys_read_as_the_config_class_folds_them():
    legacy = {
        k: v
        for k, v in DSV4.items()
        if k not in ("layer_types", "mlp_layer_types", "compress_rates")
    }
    legacy.update(
        compress_ratios=[128, 4, 0], num_hash_layers=1, compress_rate_hca=32, compress_rate_csa=4
    )
    assert arch_from_hf_config(legacy).params_total == arch_from_hf_config(DSV4).params_total
    # without layer_types: two heavily compressed blocks, then CSA / HCA in turn
    default = {k: v for k, v in DSV4.items() if k != "layer_types"}
    default["num_hidden_layers"] = 5
    default["mlp_layer_types"] = ["hash_moe"] * 3 + ["moe"] * 2
    assert arch_from_hf_config(default).extra["dsv4_layers"] == [HCA, HCA, HCA, CSA, HCA]


def _cfg(full: bool, seq: int = 1024) -> act.ActConfig:
    """bf16 fine-tuning at ``seq`` tokens, eager attention."""
    return act.ActConfig(2, 2, full, frozenset(), 0, Attention.EAGER, seq, False)


def test_hyper_connection_saved_tensors_by_hand():
    """Per token: fp32 copy of the 4 x 512 streams and its statistic, pre/post sigmoids and
    pre, 20 Sinkhorn iterations (40 matrices of 16 fp32, 39 sums of 4), the bf16 streams,
    comb and post casts and the sublayer output; full fine-tuning adds the normalised copy and
    the 24 mixing logits."""
    arch = arch_from_hf_config(DSV4)
    frozen = 4 * 2048 + 4 + 4 * 12 + 40 * 64 + 39 * 16 + 2 * 2048 + 2 * (16 + 4) + 2 * 512
    assert act.hyper_connection_bytes(arch, _cfg(False)) == frozen
    assert act.hyper_connection_bytes(arch, _cfg(True)) == frozen + 4 * 2048 + 4 * 24


def test_eager_softmax_spans_keys_compressed_entries_and_the_sink():
    arch = arch_from_hf_config(DSV4)
    cfg = _cfg(True, 1024)
    # the heavily compressed block attends to 1024 / 32 more entries than the sliding one,
    # the compressed sparse one to 1024 / 4 (softmax per head, the k=v concatenation)
    sliding = act._dsv4_attention_bytes(arch, cfg, SWA)
    hca = act._dsv4_attention_bytes(arch, cfg, HCA)
    csa = act._dsv4_attention_bytes(arch, cfg, CSA)
    compressor_hca = (4 + 4) * 128 + (4 * 128 + 4 + 2 * 128 + 2 * 2 * 16) // 32
    assert hca - sliding == 8 * 2 * 32 + 2 * 128 * 32 // 1024 + compressor_hca
    compressor_csa = (4 + 4) * 256 + (4 * 128 + 4 + 2 * 128 + 2 * 2 * 16) // 4
    assert csa - sliding == 8 * 2 * 256 + 2 * 128 * 256 // 1024 + compressor_csa


def test_checkpoint_keeps_the_streams():
    arch = arch_from_hf_config(DSV4)
    assert act.checkpoint_bytes_per_token(arch, _cfg(True)) == 2 * 4 * 512


def _request(**kw: object) -> dict:
    base = {"model": {"hf_config": DSV4}, "micro_batch_size": 1, "seq_len": 256}
    return {**base, "attention": "eager", **kw}


def test_indexer_weights_get_no_gradient():
    arch = arch_from_hf_config(DSV4)
    full = estimate_dict(_request(method="full"))
    assert full["params_trainable"] == arch.params_total - arch.no_grad_params


def test_fp32_copies_of_the_mixing_weights():
    """``F.linear(flat, self.fn.float())``: 16-bit ``fn`` copied to fp32 and saved, two per
    block and hc_head's."""
    full = estimate_dict(_request(method="full", seq_len=1024, gradient_checkpointing=False))
    assert full["components"]["weight_copies"] == 4 * 2048 * (2 * 3 * 24 + 4)


def test_warnings_for_what_the_libraries_refuse():
    sdpa = estimate_dict(_request(method="lora", attention="sdpa", lora_targets=["q_a_proj"]))
    assert "attention_refused_by_transformers" in sdpa["warnings"]
    eager = estimate_dict(_request(method="lora", lora_targets=["q_a_proj"]))
    assert "attention_refused_by_transformers" not in eager["warnings"]
    for targets in ("all-linear", ["o_a_proj"]):
        grouped = estimate_dict(_request(method="lora", lora_targets=targets))
        assert "lora_grouped_output_refused_by_peft" in grouped["warnings"]
    assert "lora_grouped_output_refused_by_peft" not in eager["warnings"]


def test_qlora_leaves_the_fp32_modules_and_the_grouped_projection_in_16_bits():
    arch = arch_from_hf_config(DSV4)
    quantized = {(l.name, l.role, l.block_kind) for l in arch.linears if l.quantizable}
    assert ("o_a_proj", "attn", "") not in quantized
    assert ("kv_proj", "attn", "") in quantized and ("q_b_proj", "indexer", CSA) in quantized
    assert not {(n, r) for n, r, k in quantized if k and n in ("kv_proj", "gate_proj")} - {
        ("q_b_proj", "indexer")
    }
    assert ("weights_proj", "indexer", CSA) not in quantized


def test_flops_count_the_compressed_entries_and_the_indexer():
    arch = arch_from_hf_config(DSV4)
    s = 1024
    keys = (s + s // 32) + (s + s // 4) + s
    assert attention_forward_flops_per_token(arch, s, "eager") == 4.0 * 8 * 128 * keys
    assert indexer_forward_flops_per_token(arch, s) == 2.0 * 4 * (32 + 1) * (s // 4)


@pytest.mark.parametrize(
    "key,value,code",
    [
        ("num_experts_per_tok", 9, "config_top_k_above_experts"),
        ("layer_types", [HCA, CSA], "config_layer_types_length"),
        ("layer_types", [HCA, CSA, "full_attention"], "config_invalid_value"),
        ("mlp_layer_types", ["hash_moe", "moe"], "config_layer_types_length"),
        ("mlp_layer_types", ["hash_moe", "dense", "moe"], "config_invalid_value"),
        ("o_groups", 3, "config_invalid_value"),
        ("index_head_dim", 8, "config_invalid_value"),
        ("compress_rates", {"sliding_attention": 4}, "config_invalid_value"),
        ("compress_ratios", [128, 4, 2], "config_invalid_value"),
        ("partial_rotary_factor", 1.5, "config_invalid_value"),
        ("hidden_size", 0, "config_invalid_value"),
    ],
)
def test_inconsistent_shapes_are_coded_errors(key, value, code):
    bad = dict(DSV4)
    if key == "compress_ratios":
        del bad["layer_types"]
    bad[key] = value
    with pytest.raises(ConfigError) as err:
        arch_from_hf_config(bad)
    assert (err.value.code, err.value.field) == (code, "hf_config." + key)


def test_two_rows_copy_the_broadcast_head_and_share_rope():
    """With two rows per micro-batch both attention products copy the one k=v head to every
    head (a copy each, s + s/m keys of 128), and cos/sin are shared by the rows."""
    arch = arch_from_hf_config(DSV4)
    one = act._dsv4_attention_bytes(arch, _cfg(True, 1024), CSA)
    two_cfg = replace(_cfg(True, 1024), micro_batch_size=2)
    two = act._dsv4_attention_bytes(arch, two_cfg, CSA)
    assert two - one == 2 * 2 * 8 * 128 * 1280 // 1024 - 3 * 2 * 2 * 16 // 2


def test_attention_transient_in_the_widest_block():
    """Three score tensors of the compressed-sparse block (s + s/4 keys, one more with the
    sink), the extended mask and the indexer's block bias."""
    arch = arch_from_hf_config(DSV4)
    s = 1024
    kv = s + s // 4
    expected = 2 * 8 * (3 * kv + 2) + 2 * kv + 2 * (s // 4 + 1)
    assert act.dsv4_attention_transient_bytes_per_token(arch, _cfg(True, s)) == expected
    long = estimate_dict(_request(method="full", seq_len=2048, gradient_checkpointing=True))
    short = estimate_dict(_request(method="full", seq_len=1024, gradient_checkpointing=True))
    # the recompute's scores grow with s^2: twice the tokens, well over twice the activations
    assert long["peak_phase"] == "backward"
    assert long["components"]["activations"] > 2.5 * short["components"]["activations"]
