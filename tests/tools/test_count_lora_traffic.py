"""calc's count of what peft's LoRA path moves per block and token, forward and backward
(``calc.timing.peft_path_bytes`` and ``peft_path_backward_bytes``), against a trace of it
(``tools/count_lora_traffic.py``).

Needs torch, transformers and peft (skipped without them, except where ``REQUIRE_ORACLE=1``)."""

from __future__ import annotations

import pytest

from oracle_deps import need_oracle_stack

torch = need_oracle_stack()

from tools import count_lora_traffic as clt  # noqa: E402


@pytest.mark.parametrize("regime", sorted(clt.REGIMES))
@pytest.mark.parametrize("preset", ["qwen3-0.6b", "gpt2"])
def test_calc_counts_what_the_adapters_move_each_way(preset, regime):
    """16-bit adapters, fp32 ones without autocast, under autocast on 16-bit weights and on the
    fp32 stream: forward and backward to the byte. Qwen3's q/k norms sit between the stream and
    nothing adapted; GPT-2's fused projections (Conv1D, not nn.Linear) are what peft adapts."""
    row = clt.row(preset, regime)
    assert row["traced_forward"] == pytest.approx(row["calc_forward"], abs=1.0)
    assert row["traced_backward"] == pytest.approx(row["calc_backward"], abs=1.0)


def test_the_backward_is_not_twice_the_forward():
    """What the trace changed: the scale's gradient and the input gradient's sum, not a copy of
    every forward pass twice over (calc counted 2x the forward until 2026-12-06)."""
    from calc import states, timing
    from calc.presets import preset_row

    config = preset_row("qwen3-0.6b")["config"]
    for regime in ("16bit", "fp32"):
        req = clt.calc_request(config, regime)
        adapted = states.adapted(req)
        forward = timing.peft_path_bytes(req, adapted, frozenset())
        backward = timing.peft_path_backward_bytes(req, adapted, frozenset())
        assert backward < timing.BACKWARD_ELEMENTWISE_FACTOR * forward
