"""calc's count of what autocast over fp32 weights adds to a transformers block
(calc.amp_traffic) against a trace of it (tools/count_amp_traffic.py).

Needs torch and transformers (skipped without them, except where ``REQUIRE_ORACLE=1``)."""

from __future__ import annotations

import pytest

from oracle_deps import need_oracle_stack

torch = need_oracle_stack()

from tools import count_amp_traffic as cat  # noqa: E402

# the kinds of block calc.amp_traffic counts exactly: Llama's, q/k norms before RoPE (Qwen3),
# Gemma's fp32-scaling norms with post-norms (Gemma 3), GPT-2's LayerNorms and fused projections,
# norms after the sublayers with an fp32 rotary code (OLMo 3), a rotary concatenation and fused
# projections (Phi-3), a per-position query scale (Ministral 3)
FAMILIES = {
    "llama": "llama-2-7b",
    "qwen3": "qwen3-0.6b",
    "gemma3_text": "gemma-3-1b",
    "gpt2": "gpt2",
    "olmo3": "olmo-3-7b",
    "phi3": "phi-3-mini",
    "ministral3": "ministral-3-3b",
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_calc_counts_what_the_trace_of_the_block_adds(family):
    """Per block and token, the extra element-wise bytes (the double difference over blocks and
    lengths) equal calc's count, forward and backward; the extra kernels too (autocast's weight
    copies left out of both: calc counts them per weight)."""
    row = cat.family_row(FAMILIES[family])
    traced, counted = row["traced"], row["calc"]
    for key in ("ops_forward", "ops_backward"):
        assert traced[key] == pytest.approx(counted[key], abs=0.01), key
    for key in ("bytes_forward", "bytes_backward"):
        assert traced[key] == pytest.approx(counted[key], rel=0.001), key


@pytest.mark.parametrize("family", ["llama", "qwen3"])
def test_fp32_adapters_under_autocast_move_the_forward_bytes_calc_counts(family):
    """peft's fp32 adapters on every linear: under autocast they run in 16 bits (their branch's
    scale and add too) and pay peft's cast up and autocast's cast down of their input (only
    autocast's on the stream's readers); the forward's extra bytes per block and token are
    calc's to the byte."""
    row = cat.lora_row(FAMILIES[family])
    assert row["traced_forward"] == pytest.approx(row["calc_forward"], abs=1.0)


@pytest.mark.parametrize("family", ["llama", "mistral"])
def test_qlora_on_the_fp32_stream_moves_what_calc_counts(family):
    """QLoRA prepared by peft under autocast (bitsandbytes returns fp32 from its 4-bit linears):
    the extra element-wise bytes per block and token, forward and backward together, are calc's
    to the byte (the oracle's stand-in of Linear4bit, fp32 adapters on every linear)."""
    presets = {"llama": "llama-2-7b", "mistral": "mistral-7b"}
    row = cat.qlora_row(presets[family])
    assert row["traced_total"] == pytest.approx(row["calc_total"], abs=1.0)
    from calc import amp_traffic

    traced_ops = (row["traced"]["ops_forward"], row["traced"]["ops_backward"])
    assert traced_ops == amp_traffic.QLORA_BLOCK_EXTRA_OPS
