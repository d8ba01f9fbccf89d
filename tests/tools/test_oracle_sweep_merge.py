"""``benchmarks.oracle_sweep --only X --merge``: the figures of newly swept families join the
summary of the last whole sweep; a family it holds already is refused."""

from __future__ import annotations

import pytest

from benchmarks import oracle_sweep as sweep


def row(setup_id: str, error: float, model_type: str) -> dict:
    return {
        "id": setup_id,
        "model_type": model_type,
        "peak_error": error,
        "phases": {"forward_end": {"error": error}},
    }


OLD = sweep.summarise(
    [row("llama/full", 0.001, "llama"), row("llama/lora-r16", -0.03, "llama")],
    {"torch": "x"},
)


def test_new_families_are_added_to_every_figure():
    merged = sweep.merge_summary(
        OLD,
        [
            row("qwen3_next/full", 0.002, "qwen3_next"),
            row("qwen3_next/lora-r8-attn", 0.05, "qwen3_next"),
        ],
    )
    assert (merged["setups"], merged["within_2pct"], merged["within_5pct"]) == (4, 2, 4)
    assert merged["worst_id"] == "qwen3_next/lora-r8-attn"
    assert [m["id"] for m in merged["beyond_2pct"]] == ["qwen3_next/lora-r8-attn", "llama/lora-r16"]
    assert merged["model_types"] == ["llama", "qwen3_next"]
    assert merged["per_family"]["qwen3_next"]["setups"] == 2
    assert merged["groups"]["full"]["setups"] == 2 and merged["groups"]["lora"]["setups"] == 2
    assert (merged["phases"], merged["phases_within_5pct"]) == (4, 4)
    assert merged["median_abs_error"] == OLD["median_abs_error"]


def test_a_family_already_swept_is_refused():
    with pytest.raises(SystemExit, match="llama"):
        sweep.merge_summary(OLD, [row("llama/full-ckpt", 0.0, "llama")])
