"""DeepSeek sparse attention (DeepSeek-V3.2 ``deepseek_v32``, GLM-5 ``glm_moe_dsa``): how calc
reads their config.json, counts the lightning indexer (parameters without gradients, the s x s
mask SDPA saves, the indexer's forward transient, forward-only FLOPs) and refuses shapes that
contradict each other."""

from __future__ import annotations

import pytest

from calc import activations as act
from benchmarks.oracle_sweep import ACCEPTED_FAMILIES
from calc.errors import ConfigError
from calc.flops import (
    attention_forward_flops_per_token,
    indexer_forward_flops_per_token,
    training_flops_per_token,
)
from calc.hf_config import MODEL_TYPES, arch_from_hf_config
from calc.memory import SPARSE_DENSE_MASK_SEQ_LEN, estimate_dict
from calc.request import Attention

# the sweep's reduced deepseek_v32 config (benchmarks.oracle_sweep), without the keys calc does not read
DSV32 = {k: v for k, v in ACCEPTED_FAMILIES["deepseek_v32"].items() if k not in ("pad_token_id",)}
GLM5 = {
    **{k: v for k, v in DSV32.items() if k != "first_k_dense_replace"},
    "model_type": "glm_moe_dsa",
    "num_hidden_layers": 3,
    "mlp_layer_types": ["dense", "sparse", "sparse"],
    "indexer_types": ["full", "shared", "full"],
    "n_group": 1,
    "v_head_dim": 96,
}
INDEXER = 192 * 4 * 64 + 512 * 64 + 2 * 64 + 512 * 4  # wq_b, wk, k_norm (w, b), weights_proj


def test_model_types_read():
    assert "deepseek_v32" in MODEL_TYPES and "glm_moe_dsa" in MODEL_TYPES


def test_parameters_equal_transformers_meta_builds():
    """Totals of ``DeepseekV32ForCausalLM`` / ``GlmMoeDsaForCausalLM`` built on the meta device
    from these configs (transformers 5.17; the oracle sweep's reduced configs)."""
    dsv32, glm5 = arch_from_hf_config(DSV32), arch_from_hf_config(GLM5)
    assert dsv32.params_total == 14_036_352
    assert glm5.params_total == 17_908_416
    assert dsv32.no_grad_params == 2 * INDEXER
    assert glm5.indexer_layers == 2 and glm5.no_grad_params == 2 * INDEXER  # one block shares
    without = arch_from_hf_config({**DSV32, "model_type": "deepseek_v3"})
    assert dsv32.params_total - without.params_total == 2 * INDEXER


def test_indexer_linears_sit_before_the_output_projection_and_save_nothing():
    arch = arch_from_hf_config(DSV32)
    names = [l.name for l in arch.linears if l.role in ("attn", "indexer")]
    assert names[-1] == "o_proj"
    assert {"wq_b", "wk", "weights_proj"} <= set(names)
    parts = act.block_parts(arch)
    read = [l.name for l in parts.attn_in + parts.attn_inner + (parts.attn_out,)]
    assert not {"wq_b", "wk", "weights_proj"} & set(read)
    # weights_proj is in _keep_in_fp32_modules: the 4-bit quantizer leaves it alone
    quantizable = {l.name: l.quantizable for l in arch.linears if l.role == "indexer"}
    assert quantizable == {"wq_b": True, "wk": True, "weights_proj": False}


def _request(model: dict, **kw: object) -> dict:
    base = {"model": {"hf_config": model}, "micro_batch_size": 1, "seq_len": 256}
    return {**base, **kw}


def test_indexer_weights_and_their_adapters_get_no_gradient_nor_optimizer_state():
    arch = arch_from_hf_config(DSV32)
    full = estimate_dict(_request(DSV32, method="full"))
    assert full["params_trainable"] == arch.params_total - arch.no_grad_params
    lora = estimate_dict(_request(DSV32, method="lora", lora_rank=16, lora_targets="all-linear"))
    idx_adapters = 2 * 16 * ((192 + 256) + (512 + 64) + (512 + 4))  # per block, two blocks
    # the adapters on wq_b, wk and weights_proj are held (lora_weights) but never trained
    base = estimate_dict(
        _request(
            DSV32,
            method="lora",
            lora_rank=16,
            lora_targets=["q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj"],
        )
    )
    attn = estimate_dict(
        _request(
            DSV32,
            method="lora",
            lora_rank=16,
            lora_targets=[
                "q_a_proj",
                "q_b_proj",
                "kv_a_proj_with_mqa",
                "kv_b_proj",
                "o_proj",
                "wq_b",
                "wk",
                "weights_proj",
            ],
        )
    )
    assert attn["params_trainable"] == base["params_trainable"]
    phases = attn["phases"]["optimizer_step"] - base["phases"]["optimizer_step"]
    # the adapters' weights only (fp32, peft's default upcast): no gradient, no state
    assert phases == idx_adapters * 4
    assert lora["params_trainable"] > base["params_trainable"]


def _cfg(attention: Attention, seq: int = 1024) -> act.ActConfig:
    """bf16 full fine-tuning at ``seq`` tokens."""
    return act.ActConfig(2, 2, True, frozenset(), 0, attention, seq, False)


def test_sdpa_saves_the_selection_mask_in_the_query_dtype():
    arch = arch_from_hf_config(DSV32)
    sdpa, eager = _cfg(Attention.SDPA), _cfg(Attention.EAGER)
    assert act.mask_copy_bytes(arch, sdpa) == 2 * 1024
    assert act.mask_copy_bytes(arch, eager) == 0
    plain = arch_from_hf_config({**DSV32, "model_type": "deepseek_v3"})
    assert act.block_bytes_per_token(arch, sdpa) - act.block_bytes_per_token(plain, sdpa) == (
        2 * 1024
    )


def test_indexer_transient_scores_and_the_broadcast_key_copy():
    arch = arch_from_hf_config(DSV32)
    cfg = _cfg(Attention.SDPA)
    hi, d, r, s = 4, 64, 32, 1024
    held = 2 * hi * (2 * d + r) + 2 * (2 * d + r)
    one = act.indexer_transient_bytes_per_token(arch, cfg, 1)
    assert one == held + max(4 * (hi * d + d) + 4 * hi * s, 8 * hi * s)
    # with two sequences matmul copies the key broadcast over the query positions
    two = act.indexer_transient_bytes_per_token(arch, cfg, 2)
    assert two == held + 4 * (hi * d + d) + 4 * d * s + 4 * hi * s


def test_forward_peak_grows_with_the_indexer_at_longer_sequences():
    """LoRA on attention at batch 2: the indexer's transient sets the forward's peak, so the
    activations beyond the weights grow faster than the tokens."""
    targets = ["q_a_proj", "kv_a_proj_with_mqa", "o_proj"]
    short = estimate_dict(
        _request(DSV32, method="lora", lora_targets=targets, micro_batch_size=2, seq_len=512)
    )
    long = estimate_dict(
        _request(DSV32, method="lora", lora_targets=targets, micro_batch_size=2, seq_len=1024)
    )
    plain = {**DSV32, "model_type": "deepseek_v3"}
    ref = estimate_dict(
        _request(plain, method="lora", lora_targets=targets, micro_batch_size=2, seq_len=1024)
    )
    assert long["phases"]["forward_end"] - ref["phases"]["forward_end"] > 0
    grow = long["components"]["activations"] / short["components"]["activations"]
    assert grow > 3.0


def test_checkpointed_recompute_runs_the_indexer_again():
    full = estimate_dict(
        _request(DSV32, method="full", micro_batch_size=2, seq_len=512, gradient_checkpointing=True)
    )
    plain = estimate_dict(
        _request(
            {**DSV32, "model_type": "deepseek_v3"},
            method="full",
            micro_batch_size=2,
            seq_len=512,
            gradient_checkpointing=True,
        )
    )
    assert full["peak_phase"] == "backward"
    # the broadcast key copy alone: 2 x 512 x 64 x 512 fp32 values (128 MiB)
    assert full["phases"]["backward"] - plain["phases"]["backward"] > 100 * 2**20


def test_warnings_flash_refused_and_long_sequences():
    flash = estimate_dict(_request(DSV32, method="lora", attention="flash"))
    assert "sparse_attention_flash_refused" in flash["warnings"]
    long = estimate_dict(_request(DSV32, method="lora", seq_len=SPARSE_DENSE_MASK_SEQ_LEN + 1))
    assert "sparse_attention_dense_mask_long_sequence" in long["warnings"]
    short = estimate_dict(_request(DSV32, method="lora", seq_len=SPARSE_DENSE_MASK_SEQ_LEN))
    assert not any(w.startswith("sparse_attention") for w in short["warnings"])


def test_indexer_flops_forward_only_and_dense_masked_attention():
    arch = arch_from_hf_config(DSV32)
    s = 1024
    assert indexer_forward_flops_per_token(arch, s) == 2 * 2.0 * 4 * (64 + 1) * s
    plain = arch_from_hf_config({**DSV32, "model_type": "deepseek_v3"})
    # the selection mask makes SDPA compute the whole square, where causal SDPA skips half
    sparse = attention_forward_flops_per_token(arch, s, "sdpa")
    assert sparse == 2 * attention_forward_flops_per_token(plain, s, "sdpa")
    full = training_flops_per_token(arch, "full", s, False, arch.params_total, "sdpa")
    idx_lin = 2.0 * 2 * (192 * 4 * 64 + 512 * 64 + 512 * 4)
    scores = indexer_forward_flops_per_token(arch, s)
    assert full.backward == 2.0 * (full.forward - scores - idx_lin)


def test_glm5_shared_indexers_from_the_frequency_schedule():
    """``GlmMoeDsaConfig.__post_init__``: block i runs its own indexer when
    ``max(i - offset + 1, 0) % freq == 0``."""
    cfg = {
        **{k: v for k, v in GLM5.items() if k not in ("indexer_types", "mlp_layer_types")},
        "num_hidden_layers": 6,
        "index_topk_freq": 2,
    }
    assert arch_from_hf_config(cfg).indexer_layers == 4  # F F S F S F
    assert arch_from_hf_config({**cfg, "index_topk_pattern": "FSSSSF"}).indexer_layers == 2
    default = {k: v for k, v in cfg.items() if k != "index_topk_freq"}
    assert arch_from_hf_config(default).indexer_layers == 6


@pytest.mark.parametrize(
    "cfg,key,value,code",
    [
        (DSV32, "q_lora_rank", "null", "config_invalid_value"),
        (DSV32, "index_head_dim", 16, "config_invalid_value"),
        (DSV32, "index_n_heads", 0, "config_invalid_value"),
        (DSV32, "index_topk", -1, "config_invalid_value"),
        (GLM5, "indexer_types", ["shared", "full", "full"], "config_invalid_value"),
        (GLM5, "indexer_types", ["full", "full"], "config_layer_types_length"),
        (GLM5, "indexer_types", ["full", "sparse", "full"], "config_invalid_value"),
        (GLM5, "mlp_layer_types", ["dense", "sparse"], "config_invalid_value"),
    ],
)
def test_inconsistent_shapes_are_coded_errors(cfg, key, value, code):
    bad = dict(cfg)
    bad[key] = None if value == "null" else value
    with pytest.raises(ConfigError) as err:
        arch_from_hf_config(bad)
    assert (err.value.code, err.value.field) == (code, "hf_config." + key)
