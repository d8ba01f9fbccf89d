"""calc against the oracle on torchtune's own code path (the ``torchtune`` profile).

The traces need torchtune (``tools/requirements-oracle-torchtune.txt``, on the oracle's torch):
skipped where it is not installed, CI included (CI installs the transformers 5 oracle only).
"""

from __future__ import annotations

import pytest

from oracle_deps import need

need("torch")
pytest.importorskip(
    "torchtune", reason="torchtune's stack venv: tools/requirements-oracle-torchtune.txt"
)

from benchmarks import oracle_sweep as sweep  # noqa: E402
from tools.oracle.torchtune_stack import oracle_estimate  # noqa: E402

PINNED = (
    "llama/full-torchtune",  # the output layer's weight gradient summed chunk by chunk
    "llama3-gqa-tied/full-ckpt-torchtune",  # tied output layer, checkpointed layers
    "llama/lora-torchtune",  # LoRALinear in bf16, chunked fp32 cross-entropy, the RoPE table
    "llama3-gqa-tied/lora-attn-torchtune",  # k/v expanded before SDPA, Llama 3.2 builder
)
BY_ID = {s["id"]: s for s in sweep.setups()}


def _trace(setup_id: str) -> dict:
    setup = BY_ID[setup_id]
    return oracle_estimate(dict(setup["request"], oracle=setup["oracle"]))


@pytest.mark.parametrize("setup_id", PINNED)
def test_calc_matches_torchtune_s_code_path(setup_id):
    row = sweep.compare(BY_ID[setup_id], _trace(setup_id))
    assert abs(row["peak_error"]) <= 0.02, row
    for phase, values in row["phases"].items():
        assert abs(values["error"]) <= 0.05, (phase, row)


def test_without_the_chunked_output_layer_calc_misses_full_fine_tuning():
    from calc.memory import estimate_dict

    oracle = _trace("llama/full-torchtune")
    request = dict(BY_ID["llama/full-torchtune"]["request"], output_layer_chunked=False)
    assert estimate_dict(request)["peak_allocated_bytes"] / oracle["peak_allocated_bytes"] < 0.95


def test_the_rope_table_is_one_shared_fp32_buffer():
    # the reduced llama config: 4096 positions x head_dim 64, fp32, plus theta (32 values)
    setup = BY_ID["llama/lora-torchtune"]
    out = _trace("llama/lora-torchtune")
    weights = out["components"]["weights"]
    from calc.memory import estimate_dict

    without = estimate_dict(dict(setup["request"], rope_cache_fp32=False))
    assert weights - without["components"]["weights"] == 4 * (4096 * 64 + 32)
