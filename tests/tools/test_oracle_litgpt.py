"""calc against the oracle on LitGPT's own code path (the ``litgpt`` profile).

The traces need LitGPT and Lightning (``tools/requirements-oracle-litgpt.txt``, on the oracle's
torch): skipped where litgpt is not installed, CI included (CI installs the transformers 5
oracle only).
"""

from __future__ import annotations

import pytest

from oracle_deps import need

need("torch")
pytest.importorskip("litgpt", reason="LitGPT's stack venv: tools/requirements-oracle-litgpt.txt")

from benchmarks import oracle_sweep as sweep  # noqa: E402
from calc.memory import estimate_dict  # noqa: E402
from tools.oracle.litgpt_stack import oracle_estimate  # noqa: E402

BY_ID = {s["id"]: s for s in sweep.setups()}


def _trace(setup_id: str) -> dict:
    setup = BY_ID[setup_id]
    return oracle_estimate(dict(setup["request"], oracle=setup["oracle"]))


@pytest.mark.parametrize("setup_id", ["llama/full-litgpt", "mistral/full-litgpt"])
def test_calc_matches_litgpt_full_fine_tuning(setup_id):
    # the peak is the foreach AdamW step, with the previous logits still held by the loop
    row = sweep.compare(BY_ID[setup_id], _trace(setup_id))
    assert abs(row["peak_error"]) <= 0.02, row


@pytest.mark.parametrize(
    "setup_id",
    ["llama/lora-litgpt", "mistral/lora-litgpt", "llama/lora-qv-litgpt", "mistral/lora-qv-litgpt"],
)
def test_calc_matches_litgpt_lora(setup_id):
    # the peak is inside the loss's backward (chunked_loss_holds_logits), with LoRAQKVLinear's
    # one dropout and, for q and v only, zero_pad's saved source (lora_fused_qkv_adapter)
    row = sweep.compare(BY_ID[setup_id], _trace(setup_id))
    assert abs(row["peak_error"]) <= 0.02, row
    assert all(abs(p["error"]) <= 0.05 for p in row["phases"].values()), row


def test_litgpt_lora_loss_peak_is_hand_counted():
    # finetune/lora.py, 256 tokens in two lm_head chunks of 128 (V 8000, bf16): at the loss's
    # peak, inside its backward, the loop's logits variable still holds this step's chunks
    # (2 V per token), every chunk's cross-entropy has written its log-softmax gradient (2 V per
    # token; the last chunk is shifted by one row: 127 rows), and the chunk being differentiated
    # holds its saved 16-bit log-softmax and the nll gradient (2 x 2 V x 128). The previous
    # step's logits are gone: 'logits = model(...)' replaced them before the loss.
    v, tokens, chunk = 8000, 256, 128
    hand = 2 * v * tokens + 2 * v * (tokens - 1) + 2 * 2 * v * chunk
    assert hand == 12_272_000
    out = _trace("llama/lora-qv-litgpt")
    logits = out["oracle"]["phase_components"]["forward_end"]["logits"]
    assert 0 <= logits - hand <= 8  # the loss's bf16 scalars
    # calc counts the same (chunked_loss_holds_logits), and the loop's logits in the backward
    calc = estimate_dict(BY_ID["llama/lora-qv-litgpt"]["request"])
    assert calc["peak_phase"] == "forward_end"
    assert calc["components"]["logits"] == hand
    assert out["oracle"]["phase_components"]["backward"]["logits"] - 2 * v * tokens <= 8
