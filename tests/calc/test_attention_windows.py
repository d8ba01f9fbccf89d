"""Sliding-window attention (calc.attention_windows): which blocks have a window, and what the
window does to FLOPs, time and memory once the rows reach it."""

from __future__ import annotations

import pytest

from calc.activations import mask_copy_bytes
from calc.attention_windows import band_fraction, read_windows, sdpa_mask_tensor, window_of
from calc.errors import ConfigError, InputError
from calc.flops import attention_forward_flops_per_token, attention_parts
from calc.hf_config import arch_from_hf_config
from calc.memory import estimate_dict
from calc.presets import get_preset
from calc.timing import attention_part_views, attention_time_factor, part_time_factor

MISTRAL = {
    "model_type": "mistral",
    "hidden_size": 1024,
    "intermediate_size": 2816,
    "num_attention_heads": 16,
    "num_key_value_heads": 4,
    "num_hidden_layers": 4,
    "vocab_size": 32000,
}


def _windows(cfg: dict) -> tuple[int | None, int]:
    return window_of(arch_from_hf_config(cfg))


def test_a_missing_key_takes_the_config_class_default_and_null_means_no_window():
    # transformers 5.17 MistralConfig: sliding_window = 4096 when absent; every block
    assert _windows(MISTRAL) == (4096, 4)
    assert _windows({**MISTRAL, "sliding_window": None}) == (None, 0)
    assert _windows({**MISTRAL, "sliding_window": 256}) == (256, 4)
    # Mixtral and Phi-3 default to no window
    assert _windows({**MISTRAL, "model_type": "phi3"}) == (None, 0)
    # Mistral's model never reads layer_types: every block keeps the window
    types = ["full_attention"] * 4
    assert _windows({**MISTRAL, "sliding_window": 256, "layer_types": types}) == (256, 4)


def test_layer_types_of_each_family_as_its_config_class_fills_them():
    gemma2 = {**MISTRAL, "model_type": "gemma2", "num_hidden_layers": 5, "head_dim": 64}
    assert _windows(gemma2) == (4096, 3)  # the even blocks
    gemma3 = {**gemma2, "model_type": "gemma3_text", "num_hidden_layers": 12}
    assert _windows(gemma3) == (4096, 10)  # five in six
    assert _windows({**gemma3, "sliding_window_pattern": 3}) == (4096, 8)
    olmo3 = {**MISTRAL, "model_type": "olmo3", "num_hidden_layers": 8}
    assert _windows(olmo3) == (4096, 6)  # three in four
    given = ["full_attention", "sliding_attention", "full_attention", "full_attention"]
    assert _windows({**olmo3, "num_hidden_layers": 4, "layer_types": given}) == (4096, 1)


def test_gated_families_need_use_sliding_window():
    qwen2 = {**MISTRAL, "model_type": "qwen2", "num_hidden_layers": 6}
    assert _windows(qwen2) == (None, 0)
    on = {**qwen2, "use_sliding_window": True, "sliding_window": 512, "max_window_layers": 2}
    assert _windows(on) == (512, 4)  # the blocks from max_window_layers on
    moe = {
        **on,
        "model_type": "qwen2_moe",
        "moe_intermediate_size": 256,
        "shared_expert_intermediate_size": 512,
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "max_window_layers": 4,
    }
    assert _windows(moe) == (512, 2)  # the even blocks below max_window_layers


def test_a_window_that_is_not_a_positive_integer_is_refused():
    for bad in (0, -5, 1.5, "4096", True):
        with pytest.raises(ConfigError) as err:
            arch_from_hf_config({**MISTRAL, "sliding_window": bad})
        assert err.value.field == "hf_config.sliding_window"


def test_family_rules_agree_with_transformers_config_classes():
    """The sliding blocks calc counts are the ones transformers' own config classes list."""
    transformers = pytest.importorskip("transformers")
    cases = {
        "gemma2": ({"num_hidden_layers": 7}, transformers.Gemma2Config),
        "gemma3_text": ({"num_hidden_layers": 13}, transformers.Gemma3TextConfig),
        "olmo3": ({"num_hidden_layers": 9}, transformers.Olmo3Config),
        "gpt_oss": ({"num_hidden_layers": 5}, transformers.GptOssConfig),
        "qwen2": (
            {"num_hidden_layers": 7, "use_sliding_window": True, "max_window_layers": 3},
            transformers.Qwen2Config,
        ),
        "qwen3": (
            {"num_hidden_layers": 7, "use_sliding_window": True, "max_window_layers": 5},
            transformers.Qwen3Config,
        ),
    }
    for family, (keys, config_class) in cases.items():
        theirs = config_class(**keys, sliding_window=64)
        ours = {"model_type": family, "sliding_window": 64, **keys}
        types = list(theirs.layer_types)
        arch = arch_from_hf_config(
            {**MISTRAL, "head_dim": 64, "num_local_experts": 4, "num_experts_per_tok": 2, **ours}
        )
        assert window_of(arch) == (64, types.count("sliding_attention")), family


def test_presets_hold_the_windows_of_their_configs():
    assert window_of(get_preset("mistral-7b")) == (4096, 32)  # v0.1
    assert window_of(get_preset("mistral-7b-v0.3")) == (None, 0)
    assert window_of(get_preset("phi-3-mini")) == (2047, 32)
    assert window_of(get_preset("gemma-3-4b")) == (1024, 29)
    assert window_of(get_preset("gemma-4-31b")) == (1024, 50)
    assert window_of(get_preset("llama-3.1-8b")) == (None, 0)


def test_band_fraction():
    assert band_fraction(1024, 1024) == pytest.approx(0.5, abs=1e-3)
    assert band_fraction(2048, 1024) == pytest.approx((1024 * 1025 / 2 + 1024 * 1024) / 2048**2)
    assert band_fraction(512, 1024) == pytest.approx(0.5, abs=1e-2)
    values = [band_fraction(n, 1024) for n in (1024, 2048, 4096, 8192, 65536)]
    assert values == sorted(values, reverse=True)


def test_sdpa_gets_a_mask_once_the_keys_reach_the_window():
    # masking_utils._ignore_causal_mask_sdpa: kv_length >= local_attention_size keeps the mask
    assert not sdpa_mask_tensor(1024, 1023)
    assert sdpa_mask_tensor(1024, 1024)
    assert not sdpa_mask_tensor(None, 10**6)


def test_flops_by_kind_of_block():
    arch = get_preset("gemma-3-4b")  # 29 sliding blocks of 34, window 1024
    full = 4.0 * 2048 * arch.num_heads * arch.head_dim
    parts = {p.mask: p for p in attention_parts(arch, 2048, "sdpa")}
    assert parts["padding"].layers == 29 and parts["padding"].fraction == 1.0
    assert parts["causal"].layers == 5 and parts["causal"].fraction == 0.5
    assert attention_forward_flops_per_token(arch, 2048, "sdpa") == pytest.approx(
        full * (29 + 5 * 0.5)
    )
    # below the window every block skips the upper half, as without a window
    assert attention_forward_flops_per_token(arch, 1000, "sdpa") == pytest.approx(
        4.0 * 1000 * arch.num_heads * arch.head_dim * 34 * 0.5
    )
    # flash computes the band only
    flash = attention_forward_flops_per_token(arch, 2048, "flash")
    assert flash == pytest.approx(full * (29 * band_fraction(2048, 1024) + 5 * 0.5))
    # eager computes the whole square whatever the window
    assert attention_forward_flops_per_token(arch, 2048, "eager") == pytest.approx(full * 34)


def test_a_stack_without_windows_keeps_one_part():
    arch = get_preset("llama-3.1-8b")
    (part,) = attention_parts(arch, 4096, "sdpa")
    assert part.layers == 32 and part.mask == "causal" and part.fraction == 0.5


def _plan(**keys) -> dict:
    from calc import plan_setup

    request = {"dataset_tokens": 1e8, "method": "lora", "gradient_checkpointing": True, **keys}
    return plan_setup(request)["time"]


def test_time_prices_each_part_on_its_own_kernel():
    from calc.plan import parse_plan_request
    from calc.timing import card_rates, counts

    req, opts = parse_plan_request(
        {
            "model": "gemma-4-31b",
            "seq_len": 2048,
            "gpu": "h100-sxm",
            "attention": "sdpa",
            "dataset_tokens": 1e9,
        }
    )
    c = counts(req, req.sharding)
    rates = card_rates(opts.gpu, 1)
    views = attention_part_views(c)
    assert len(views) == 2 and sum(share for _, share in views) == pytest.approx(1.0)
    by_dim = {view.head_dim: view for view, _ in views}
    # the sliding blocks get the mask tensor; the full blocks' 512-wide heads exclude flash
    assert by_dim[256].attention_mask == "padding" and by_dim[512].attention_mask == "causal"
    expected = sum(share * part_time_factor(v, rates, 0.6) for v, share in views)
    assert attention_time_factor(c, rates, 0.6) == pytest.approx(expected)


def test_a_window_the_rows_reach_slows_sdpa_and_speeds_flash():
    windowed = {"hf_config": {**MISTRAL, "sliding_window": 1024}, "name": "windowed"}
    plain = {"hf_config": {**MISTRAL, "sliding_window": None}, "name": "plain"}
    for attention, slower in (("sdpa", True), ("flash", False)):
        a = _plan(model=windowed, seq_len=8192, gpu="a100-80gb-sxm", attention=attention)
        b = _plan(model=plain, seq_len=8192, gpu="a100-80gb-sxm", attention=attention)
        ratio = a["tokens_per_second_per_gpu"] / b["tokens_per_second_per_gpu"]
        assert (ratio < 0.99) if slower else (ratio > 1.01), attention
    # below the window nothing changes
    a = _plan(model=windowed, seq_len=1000, gpu="a100-80gb-sxm", attention="sdpa")
    b = _plan(model=plain, seq_len=1000, gpu="a100-80gb-sxm", attention="sdpa")
    assert a["tokens_per_second_per_gpu"] == pytest.approx(b["tokens_per_second_per_gpu"])


def _estimate(**keys) -> dict:
    request = {
        "method": "full",
        "micro_batch_size": 2,
        "seq_len": 2048,
        "attention": "sdpa",
        "framework": "hf-trainer",
        **{"gradient_checkpointing": False, **keys},
    }
    return estimate_dict(request)


def test_memory_counts_the_mask_copies_the_repeated_kv_and_the_window_mask():
    """Without checkpointing each windowed block saves ATen's additive copy of the mask
    (``act * b * s^2``) and k/v repeated to every head (``2 act b s (heads - kv) head_dim``);
    the boolean window mask itself (``s^2``) is gone by the forward's end, when nothing holds
    it; with checkpointing every wrapped block keeps it as an argument to recompute with."""
    b, s, act = 2, 2048, 2
    cfg = {**MISTRAL, "num_hidden_layers": 4}
    heads, kv, head_dim = 16, 4, 64
    windowed = _estimate(model={"hf_config": {**cfg, "sliding_window": 1024}, "name": "w"})
    plain = _estimate(model={"hf_config": {**cfg, "sliding_window": None}, "name": "p"})
    per_block = act * b * s * s + 2 * act * b * s * (heads - kv) * head_dim
    grown = windowed["peak_allocated_bytes"] - plain["peak_allocated_bytes"]
    assert grown == 4 * per_block
    windowed = _estimate(
        model={"hf_config": {**cfg, "sliding_window": 1024}, "name": "w"},
        gradient_checkpointing=True,
    )
    plain = _estimate(
        model={"hf_config": {**cfg, "sliding_window": None}, "name": "p"},
        gradient_checkpointing=True,
    )
    assert windowed["peak_allocated_bytes"] - plain["peak_allocated_bytes"] >= s * s


def test_the_copy_is_counted_only_for_boolean_masks_under_sdpa():
    arch = get_preset("llama-3.1-8b")
    from calc.activations import ActConfig
    from calc.request import Attention

    base = ActConfig(2, 2, True, frozenset(), 0, Attention.SDPA, 4096, False)
    assert mask_copy_bytes(arch, base) == 0
    assert (
        mask_copy_bytes(
            arch,
            ActConfig(2, 2, True, frozenset(), 0, Attention.SDPA, 4096, False, mask_saved=True),
        )
        == 2 * 4096
    )
    eager = ActConfig(2, 2, True, frozenset(), 0, Attention.EAGER, 4096, False, mask_saved=True)
    assert mask_copy_bytes(arch, eager) == 0
    # transformers 4.52's additive masks are shared by every block: no copy per block
    padded = {"model": "llama-3.2-1b", "attention_mask": "padding", "seq_len": 4096}
    five = _estimate(**padded)
    four = _estimate(**padded, sdpa_mask_boolean=False)
    assert five["peak_allocated_bytes"] > four["peak_allocated_bytes"]


def test_the_behaviour_key_is_a_boolean():
    with pytest.raises(InputError):
        _estimate(model="llama-3.2-1b", sdpa_mask_boolean="yes")


def test_every_family_with_a_default_window_has_a_rule():
    from calc.attention_windows import WINDOW_DEFAULTS, _layer_types

    for family in WINDOW_DEFAULTS:
        if family != "gemma4_text":  # its kinds are read with its blocks
            assert len(_layer_types({}, family, 8)) == 8, family


def test_read_windows_leaves_families_without_windows_alone():
    arch = get_preset("llama-3.1-8b")
    read_windows({"sliding_window": 16}, "llama", "hf_config.", arch)
    assert window_of(arch) == (None, 0)
