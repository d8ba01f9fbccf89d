"""``python -m benchmarks.oracle_sweep --only F --merge``: a family swept again is merged into
the summary of the last full run without retracing the others (needs no torch)."""

from __future__ import annotations

import pytest

from benchmarks import oracle_sweep as sweep

VERSIONS = {"torch": "t", "transformers": "x", "peft": "p"}


def _row(setup_id: str, error: float) -> dict:
    phases = {p: {"calc": 1.0, "oracle": 1.0, "error": error} for p in sweep.PHASES}
    return {
        "id": setup_id,
        "model_type": setup_id.split("/")[0],
        "peak_error": error,
        "phases": phases,
    }


OLD_ROWS = [_row("llama/full", 0.001), _row("llama/lora-r16", -0.03), _row("qwen3/qlora-r16", 0.0)]


def test_merge_adds_a_new_family_and_keeps_the_others():
    old = sweep.summarise(OLD_ROWS, VERSIONS)
    new = [_row("glm4_moe/full", 0.002), _row("glm4_moe/lora-r8-attn", -0.025)]
    merged = sweep.merge_summary(old, new, VERSIONS)
    whole = sweep.summarise(OLD_ROWS + new, VERSIONS)
    for key in ("setups", "within_2pct", "within_5pct", "phases", "phases_within_5pct"):
        assert merged[key] == whole[key], key
        for method in ("full", "lora", "qlora"):
            assert merged["groups"][method][key] == whole["groups"][method][key], (method, key)
    assert merged["model_types"] == whole["model_types"]
    assert merged["per_family"]["llama"] == old["per_family"]["llama"]
    assert [m["id"] for m in merged["beyond_2pct"]] == ["llama/lora-r16", "glm4_moe/lora-r8-attn"]
    assert merged["worst_id"] == "llama/lora-r16"


def test_merging_a_family_again_replaces_its_figures():
    old = sweep.summarise(OLD_ROWS, VERSIONS)
    first = sweep.merge_summary(old, [_row("glm4_moe/full", 0.04)], VERSIONS)
    assert first["worst_id"] == "glm4_moe/full" and first["within_2pct"] == 2
    again = sweep.merge_summary(first, [_row("glm4_moe/full", 0.001)], VERSIONS)
    assert again["setups"] == 4 and again["within_2pct"] == 3
    assert again["worst_id"] == "llama/lora-r16"
    assert all(m["id"] != "glm4_moe/full" for m in again["beyond_2pct"])


def test_merge_refuses_what_it_cannot_subtract_or_other_versions():
    old = sweep.summarise(OLD_ROWS, VERSIONS)
    with pytest.raises(ValueError):
        sweep.merge_summary(old, [_row("llama/full", 0.0)], VERSIONS)  # no per-method counts
    with pytest.raises(ValueError):
        sweep.merge_summary(old, [_row("glm4_moe/full", 0.0)], {**VERSIONS, "torch": "other"})


def test_a_whole_sweep_keeps_the_preset_checks_and_can_be_merged_into():
    old = sweep.merge_presets(
        sweep.summarise(OLD_ROWS, VERSIONS),
        [dict(_row("seed-oss-36b/x", 0.001), calc_peak=2, oracle_peak=3, model_type="seed_oss")],
    )
    old["stacks"] = {"torchtune": {"profiles": {"torchtune": {"setups": 1}}}}
    whole = sweep.full_summary(OLD_ROWS, VERSIONS, old)
    assert whole["presets"] == old["presets"] and whole["stacks"] == old["stacks"]
    assert whole["per_family"]["llama"]["methods"]["lora"]["setups"] == 1
    kept = ("presets", "stacks")
    assert {k: v for k, v in whole.items() if k not in kept} != sweep.summarise(OLD_ROWS, VERSIONS)
    # every family of a whole sweep can be swept again alone: its counts taken out and replaced
    again = sweep.merge_summary(
        whole, [_row("llama/full", 0.001), _row("llama/lora-r16", 0.0)], VERSIONS
    )
    assert again["setups"] == 3 and again["within_2pct"] == 3
    assert again["groups"]["lora"]["within_2pct"] == 1
    assert again["beyond_2pct"] == [] and again["presets"] == old["presets"]
    assert sweep.full_summary(OLD_ROWS, VERSIONS, None).get("presets") is None


def test_preset_checks_are_recorded_by_setup_and_leave_the_rest():
    old = sweep.summarise(OLD_ROWS, VERSIONS)
    row = dict(_row("seed-oss-36b/lora-all-linear-ckpt", -0.001), calc_peak=2, oracle_peak=3)
    row["model_type"] = "seed_oss"
    merged = sweep.merge_presets(old, [row])
    assert merged["presets"]["seed-oss-36b/lora-all-linear-ckpt"]["error"] == -0.001
    assert {k: v for k, v in merged.items() if k != "presets"} == old
    again = sweep.merge_presets(merged, [dict(row, peak_error=0.002)])
    assert again["presets"]["seed-oss-36b/lora-all-linear-ckpt"]["error"] == 0.002


def test_preset_setups_name_presets_and_their_model_types():
    from calc.presets import preset_ids

    ids = set(preset_ids())
    swept = {sweep.model_type_of(s) for s in sweep.setups()}
    for setup in sweep.preset_setups():
        assert setup["request"]["model"] in ids
        # a model_type read as another family (Kimi K2.5's kimi_k2) is swept as that family
        model_type = sweep.model_type_of(setup)
        assert sweep.FAMILY_ALIASES.get(model_type, model_type) in swept


def test_every_preset_is_checked_at_full_size_within_3_percent():
    import json

    from calc.presets import preset_ids
    from conftest import REPO_ROOT

    wanted = list(preset_ids())
    assert sorted(wanted) == sorted(sweep.PRESET_CHECKS)
    summary = json.loads((REPO_ROOT / "validation" / "oracle_sweep_summary.json").read_text())
    recorded = {k.split("/")[0]: v for k, v in summary.get("presets", {}).items()}
    for preset_id in wanted:
        assert preset_id in recorded, "run python -m benchmarks.oracle_sweep --presets"
        assert abs(recorded[preset_id]["error"]) <= sweep.PRESET_TOLERANCE, preset_id


def _stack_row(setup_id: str, framework: str, error: float) -> dict:
    return dict(_row(setup_id, error), framework=framework)


def test_stacks_are_recorded_by_profile_and_leave_the_sweep_alone():
    old = sweep.summarise(OLD_ROWS, VERSIONS)
    rows = [
        _stack_row("llama/lora-hf-trainer-4", "hf-trainer-4", 0.001),
        _stack_row("qwen3_moe/full-hf-trainer-4", "hf-trainer-4", -0.03),
        _stack_row("llama/lora-pytorch-loop-4", "pytorch-loop-4", 0.0),
    ]
    tf4 = {**VERSIONS, "transformers": "4.x"}
    merged = sweep.merge_stacks(old, rows, tf4)
    assert {k: v for k, v in merged.items() if k != "stacks"} == old
    entry = merged["stacks"]["transformers-4"]
    assert entry["versions"] == tf4 and entry["setups"] == 3 and entry["within_2pct"] == 2
    assert entry["profiles"]["hf-trainer-4"]["worst_id"] == "qwen3_moe/full-hf-trainer-4"
    assert entry["profiles"]["pytorch-loop-4"]["setups"] == 1
    again = sweep.merge_stacks(merged, rows[:1], tf4)  # a stack swept again replaces its entry
    assert again["stacks"]["transformers-4"]["setups"] == 1
