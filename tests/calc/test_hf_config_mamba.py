"""Mamba-2 hybrid stacks (Nemotron-H): reading, parameter counts, LoRA targets peft refuses,
saved activations of mamba-ssm's fused function, FLOPs and coded errors."""

from __future__ import annotations

import copy

import pytest

from benchmarks.oracle_sweep import ACCEPTED_FAMILIES, ALL_LINEAR_TARGETS
from calc import activations as act
from calc.errors import ConfigError
from calc.flops import attention_forward_flops_per_token, mamba_forward_flops_per_token
from calc.hf_config import arch_from_hf_config
from calc.memory import act_config, estimate_dict
from calc.presets import get_preset
from calc.request import parse_estimate_request
from calc.states import request_regime

NEMOTRON_H = ACCEPTED_FAMILIES["nemotron_h"]
NEMOTRON_H_MOE = ACCEPTED_FAMILIES["nemotron_h_moe"]


def config(**changes: object) -> dict:
    out = copy.deepcopy(NEMOTRON_H)
    out.update(changes)
    return out


def test_reduced_config_counts_what_transformers_builds():
    # transformers 5.17 AutoModelForCausalLM.from_config on the meta device, summed over
    # model.parameters(), for the same config
    arch = arch_from_hf_config(NEMOTRON_H)
    assert arch.params_total == 26_920_848
    assert dict(arch.block_counts) == {"mamba": 3, "full_attention": 1, "mlp": 3}
    assert arch.norms_per_layer == 1 and not arch.mlp_gated
    m = arch.mamba
    assert m is not None
    # in_proj: z, x (16 heads x 64), B and C (2 groups x 64 each), dt (16 heads)
    assert m.in_proj_width == 2 * 1024 + 2 * 2 * 64 + 16
    # conv weight and bias over x, B, C; dt_bias, A_log, D; the gated norm's weight
    assert m.own_params == 1280 * 4 + 1280 + 3 * 16 + 1024


def test_preset_counts_the_published_checkpoint():
    # nvidia/Nemotron-H-8B-Base-8K: 8,100,852,736 parameters (transformers 5.17 builds the
    # same from the shapes; NVIDIA's Megatron-Bridge NemotronHModelProvider8B states them)
    arch = get_preset("nemotron-h-8b")
    assert (arch.params_total, arch.params_active) == (8_100_852_736, 8_100_852_736)
    assert dict(arch.block_counts) == {"mamba": 24, "full_attention": 4, "mlp": 24}


def test_layer_list_and_legacy_names_read_like_the_pattern():
    pattern = arch_from_hf_config(NEMOTRON_H)
    legacy = ["mamba", "mlp", "mamba", "mlp", "mamba", "attention", "mlp"]
    current = ["linear_attention", "mlp", "linear_attention", "mlp"]
    current += ["linear_attention", "full_attention", "mlp"]
    for value in (legacy, current):
        cfg = config(layers_block_type=value)
        del cfg["hybrid_override_pattern"]
        arch = arch_from_hf_config(cfg)
        assert arch.params_total == pattern.params_total
        assert arch.extra["mixer_order"] == pattern.extra["mixer_order"]


@pytest.mark.parametrize(
    ("changes", "code", "field"),
    [
        ({"num_hidden_layers": 8}, "config_layer_types_length", "hybrid_override_pattern"),
        ({"hybrid_override_pattern": "M-X"}, "config_invalid_value", "hybrid_override_pattern"),
        ({"hybrid_override_pattern": None}, "config_missing_key", "hybrid_override_pattern"),
        ({"n_groups": 3}, "config_kv_heads_indivisible", "n_groups"),
        ({"num_key_value_heads": 3}, "config_kv_heads_indivisible", "num_key_value_heads"),
        ({"mamba_num_heads": 0}, "config_invalid_value", "mamba_num_heads"),
    ],
)
def test_inconsistent_shapes_are_coded_errors(changes, code, field):
    with pytest.raises(ConfigError) as err:
        arch_from_hf_config(config(**changes))
    assert err.value.code == code
    assert err.value.field == "hf_config." + field


def test_peft_refuses_the_mamba_out_proj():
    def warnings(**request: object) -> list[str]:
        out = estimate_dict(dict(model={"hf_config": NEMOTRON_H}, seq_len=256, **request))
        return out["warnings"]

    refused = "lora_mamba_out_proj_refused_by_peft"
    assert refused in warnings(method="lora", lora_targets="all-linear")
    assert refused in warnings(method="lora", lora_targets=["in_proj", "out_proj"])
    assert refused not in warnings(method="lora", lora_targets=ALL_LINEAR_TARGETS["nemotron_h"])
    assert refused not in warnings(method="full")
    packed = "qlora_mamba_out_proj_packed"
    assert packed in warnings(method="qlora", lora_targets=["in_proj"])
    assert packed not in warnings(method="lora", lora_targets=["in_proj"])


def _block_bytes(**request: object) -> int:
    """Saved bytes per token of the average block, as the estimate counts them."""
    req = parse_estimate_request(dict(model={"hf_config": NEMOTRON_H}, seq_len=256, **request))
    cfg = act_config(req, request_regime(req))
    return act.block_bytes_per_token(req.model, cfg)


def test_an_out_proj_adapter_saves_nothing_the_fused_kernel_skips_it():
    alone = _block_bytes(method="lora", lora_targets=["in_proj"])
    assert _block_bytes(method="lora", lora_targets=["in_proj", "out_proj"]) == alone
    # an attention output adapter does run: its input and rank-r product are saved
    assert _block_bytes(method="lora", lora_targets=["in_proj", "o_proj"]) > alone


def test_mamba_mixer_saves_what_the_fused_function_keeps():
    arch = arch_from_hf_config(NEMOTRON_H)
    cfg = act.ActConfig(
        act_bytes=2,
        resid_bytes=2,
        full=True,
        adapted=frozenset(),
        rank=0,
        attention=act.Attention.SDPA,
        seq_len=256,
        per_linear_casts=False,
    )
    # in_proj's input, zxbcdt, out_x (the scan output), the gated norm's fp32 rstd per group
    assert act.mamba2_bytes(arch, cfg) == 2 * 512 + 2 * 2320 + 2 * 1024 + 4 * 2


def test_flops_count_the_chunked_scan_and_the_attention_blocks_only():
    arch = arch_from_hf_config(NEMOTRON_H)
    # G 2 Q N + H (2 Q P + 4 N P) per Mamba-2 block, three blocks
    per_block = 2 * 2 * 128 * 64 + 16 * (2 * 128 * 64 + 4 * 64 * 64)
    assert mamba_forward_flops_per_token(arch) == 3 * per_block
    sdpa = attention_forward_flops_per_token(arch, 1024, "sdpa")
    assert sdpa == 0.5 * 4 * 1 * 1024 * 8 * 64 + 3 * per_block


FALCON_H1 = ACCEPTED_FAMILIES["falcon_h1"]


@pytest.mark.parametrize(
    ("changes", "params"),
    [
        ({}, 25_720_672),
        # the gated norm, every bias, no conv bias
        (
            {
                "mamba_rms_norm": True,
                "mamba_proj_bias": True,
                "projectors_bias": True,
                "attention_bias": True,
                "mlp_bias": True,
                "mamba_conv_bias": False,
            },
            25_735_552,
        ),
        # mamba_d_ssm null: mamba_expand * hidden; mamba_d_head "auto": d_ssm / heads
        (
            {"mamba_d_ssm": None, "mamba_d_head": "auto", "mamba_n_heads": 32, "mamba_n_groups": 2},
            25_869_504,
        ),
    ],
)
def test_falcon_h1_counts_what_transformers_builds(changes, params):
    # transformers 5.17 AutoModelForCausalLM.from_config on the meta device, same configs
    arch = arch_from_hf_config({**FALCON_H1, **changes})
    assert arch.params_total == params
    assert not arch.block_counts and arch.norms_per_layer == 2


@pytest.mark.parametrize(
    ("changes", "code", "field"),
    [
        ({"mamba_d_head": 48}, "config_invalid_value", "mamba_d_head"),
        (
            {"mamba_d_head": "auto", "mamba_n_heads": 24},
            "config_heads_indivisible",
            "mamba_n_heads",
        ),
        ({"mamba_n_groups": 3}, "config_kv_heads_indivisible", "mamba_n_groups"),
        ({"num_key_value_heads": 3}, "config_kv_heads_indivisible", "num_key_value_heads"),
    ],
)
def test_falcon_h1_inconsistent_shapes_are_coded_errors(changes, code, field):
    with pytest.raises(ConfigError) as err:
        arch_from_hf_config({**FALCON_H1, **changes})
    assert (err.value.code, err.value.field) == (code, "hf_config." + field)


def _falcon_bytes(**request: object) -> tuple[int, int]:
    req = parse_estimate_request(dict(model={"hf_config": FALCON_H1}, seq_len=256, **request))
    cfg = act_config(req, request_regime(req))
    return (
        act.block_bytes_per_token(req.model, cfg),
        act.first_norm_unsaved_bytes_per_token(req.model, cfg),
    )


def test_falcon_h1_block_saves_both_mixers_each_on_its_own_copy():
    full, _ = _falcon_bytes(method="full")
    arch = arch_from_hf_config(FALCON_H1)
    mamba = 2 * 512 + 2 * arch.mamba.in_proj_width + 2 * 1024  # no gated norm: no rstd
    assert arch.mamba.gated_norm is False
    assert act.mamba2_bytes(arch, act_config(*_req_reg(method="full"))) == mamba
    # the Mamba-2 mixer's share: what the block saves beyond an attention-only count
    assert full > mamba
    in_proj, unsaved_in = _falcon_bytes(method="lora", lora_targets=["in_proj"])
    both, _ = _falcon_bytes(method="lora", lora_targets=["in_proj", "out_proj"])
    assert both == in_proj  # the fused kernel skips an out_proj adapter
    # block 0 with only in_proj adapted: its norm and its attention save nothing
    _, unsaved_mlp = _falcon_bytes(method="lora", lora_targets=["up_proj"])
    assert unsaved_mlp > unsaved_in > 0


def _req_reg(**request: object):
    req = parse_estimate_request(dict(model={"hf_config": FALCON_H1}, seq_len=256, **request))
    return req, request_regime(req)


def test_falcon_h1_flops_count_every_block_s_attention_and_scan():
    arch = arch_from_hf_config(FALCON_H1)
    per_block = 2 * 1 * 128 * 64 + 16 * (2 * 128 * 64 + 4 * 64 * 64)
    assert mamba_forward_flops_per_token(arch) == 2 * per_block
    sdpa = attention_forward_flops_per_token(arch, 1024, "sdpa")
    assert sdpa == 0.5 * 4 * 2 * 1024 * 8 * 64 + 2 * per_block


def test_falcon_h1_out_proj_refused_like_nemotron_h():
    out = estimate_dict(dict(model={"hf_config": FALCON_H1}, method="lora", seq_len=256))
    assert "lora_mamba_out_proj_refused_by_peft" in out["warnings"]


GRANITE = ACCEPTED_FAMILIES["granitemoehybrid"]


@pytest.mark.parametrize(
    ("changes", "params"),
    [
        ({}, 40_894_992),
        ({"num_local_experts": 0}, 28_295_696),  # a dense hybrid: the shared MLP alone
        (
            {
                "attention_bias": True,
                "mamba_proj_bias": True,
                "mamba_conv_bias": False,
                "mamba_n_groups": 2,
                "mamba_d_head": "auto",
                "mamba_n_heads": 32,
            },
            41_124_224,
        ),
    ],
)
def test_granite_hybrid_counts_what_transformers_builds(changes, params):
    # transformers 5.17 AutoModelForCausalLM.from_config on the meta device, same configs
    arch = arch_from_hf_config({**GRANITE, **changes})
    assert arch.params_total == params
    assert dict(arch.block_counts) == {"full_attention": 1, "mamba": 3}


def test_granite_hybrid_without_layer_types_is_all_mamba():
    cfg = {key: value for key, value in GRANITE.items() if key != "layer_types"}
    assert dict(arch_from_hf_config(cfg).block_counts) == {"full_attention": 0, "mamba": 4}


@pytest.mark.parametrize(
    ("changes", "code", "field"),
    [
        ({"layer_types": ["mamba", "attention"]}, "config_layer_types_length", "layer_types"),
        ({"layer_types": ["mamba"] * 3 + ["conv"]}, "config_invalid_value", "layer_types"),
        ({"mamba_d_head": 32}, "config_invalid_value", "mamba_d_head"),
        ({"mamba_n_groups": 3}, "config_kv_heads_indivisible", "mamba_n_groups"),
        ({"num_experts_per_tok": 9}, "config_top_k_above_experts", "num_experts_per_tok"),
    ],
)
def test_granite_hybrid_inconsistent_shapes_are_coded_errors(changes, code, field):
    with pytest.raises(ConfigError) as err:
        arch_from_hf_config({**GRANITE, **changes})
    assert (err.value.code, err.value.field) == (code, "hf_config." + field)


def test_granite_out_proj_adapter_is_taken_by_peft_and_skipped_by_the_kernel():
    def run(targets: object) -> tuple[list[str], int]:
        request = dict(model={"hf_config": GRANITE}, method="lora", lora_targets=targets)
        req = parse_estimate_request(dict(request, seq_len=256))
        cfg = act_config(req, request_regime(req))
        out = estimate_dict(dict(request, seq_len=256))
        return out["warnings"], act.block_bytes_per_token(req.model, cfg)

    warnings, all_linear = run("all-linear")
    assert "lora_mamba_out_proj_skipped" in warnings
    assert "lora_mamba_out_proj_refused_by_peft" not in warnings
    names = ["q_proj", "k_proj", "v_proj", "o_proj", "in_proj", "input_linear", "output_linear"]
    warnings, without = run(names)
    assert "lora_mamba_out_proj_skipped" not in warnings
    assert all_linear == without


# ---- Nemotron-H's MoE blocks ("E": Nemotron 3) ------------------------------------------------


def moe_config(**changes: object) -> dict:
    out = copy.deepcopy(NEMOTRON_H_MOE)
    out.update(changes)
    return out


def test_moe_blocks_count_what_transformers_builds():
    # transformers 5.17 AutoModelForCausalLM.from_config on the meta device, summed over
    # model.parameters(), for the sweep's reduced config ("MEM*E-")
    arch = arch_from_hf_config(NEMOTRON_H_MOE)
    assert arch.params_total == 27_306_080
    assert dict(arch.block_counts) == {"mamba": 2, "full_attention": 1, "mlp": 1, "moe": 2}
    assert (arch.num_experts, arch.experts_per_token) == (8, 2)
    moe = {l.name: l for l in arch.linears if l.block_kind == "moe"}
    assert set(moe) == {"gate", "experts.up_proj", "experts.down_proj", "up_proj", "down_proj"}
    # non-gated 3-D experts (NemotronHExperts: up_proj, relu2, down_proj), never quantized
    up, down = moe["experts.up_proj"], moe["experts.down_proj"]
    assert (up.d_in, up.d_out, up.count, up.active, up.kind) == (512, 256, 8, 2, "param")
    assert not up.mlp_output and down.mlp_output and not up.quantizable
    # the shared expert every token passes through, and the router over all experts
    assert (moe["up_proj"].d_out, moe["gate"].d_out) == (512, 8)
    # each MoE block holds 8 experts of 2 x 512 x 256, a 512 x 8 router and a 2 x 512 x 512
    # shared expert; a token runs 2 of the experts
    dense = arch_from_hf_config(moe_config(hybrid_override_pattern="MEM*E-".replace("E", "-")))
    per_moe = 8 * 2 * 512 * 256 + 512 * 8 + 2 * 512 * 512
    per_mlp = 2 * 512 * 1536
    assert arch.params_total - dense.params_total == 2 * (per_moe - per_mlp)
    assert arch.params_total - arch.params_active == 2 * 6 * 2 * 512 * 256


def test_moe_blocks_save_their_routed_and_shared_units():
    req = parse_estimate_request(dict(model={"hf_config": NEMOTRON_H_MOE}, seq_len=256))
    cfg = act_config(req, request_regime(req))
    per = act._sublayer_bytes(req.model, cfg, act.block_parts(req.model))
    dense = arch_from_hf_config(moe_config(hybrid_override_pattern="M-M*--"))
    assert per["moe"] > 0 and per["mlp"] > 0
    assert act._sublayer_bytes(dense, cfg, act.block_parts(dense))["moe"] == 0


@pytest.mark.parametrize(
    ("changes", "code", "field"),
    [
        ({"moe_latent_size": 128}, "unsupported_architecture", "moe_latent_size"),
        ({"num_experts_per_tok": 9}, "config_top_k_above_experts", "num_experts_per_tok"),
        ({"n_routed_experts": None}, "config_missing_key", "n_routed_experts"),
        ({"n_group": 3}, "config_invalid_value", "n_group"),
    ],
)
def test_inconsistent_moe_shapes_are_coded_errors(changes, code, field):
    cfg = moe_config(**changes)
    if changes.get("n_routed_experts", 0) is None:
        del cfg["n_routed_experts"]
    with pytest.raises(ConfigError) as err:
        arch_from_hf_config(cfg)
    assert (err.value.code, err.value.field) == (code, "hf_config." + field)


def test_module_docstring_says_what_is_read_and_what_refused():
    """The family list says Nemotron-H's MoE blocks are read and names the one MoE key that
    is refused, as the two tests above find."""
    import calc.hf_config as hf

    entry = hf.__doc__.split("nemotron_h (", 1)[1].split("falcon_h1", 1)[0]
    assert "MoE" in entry and "routed experts beside a shared one" in entry
    assert "``moe_latent_size`` is refused as ``unsupported_architecture``" in entry
    assert "MoE blocks are refused" not in hf.__doc__


def test_moe_estimate_runs_and_warns_like_the_dense_stack():
    out = estimate_dict(
        dict(
            model={"hf_config": NEMOTRON_H_MOE},
            seq_len=256,
            method="lora",
            lora_targets="all-linear",
        )
    )
    assert out["params_total"] == 27_306_080
    assert "lora_mamba_out_proj_refused_by_peft" in out["warnings"]
