"""calc against the oracle on the transformers 4 generation (hf-trainer-4, pytorch-loop-4).

The traces need a venv of ``tools/requirements-oracle-transformers4.txt`` (transformers 4.53.3,
peft 0.16.0 on the transformers 5 venv's torch; see that file): they run only where the
installed transformers is 4.x and are skipped elsewhere, CI included (CI installs the
transformers 5 requirements and no second generation). The balanced routing's row counts and
the sweep's handling of these profiles need torch only.
"""

from __future__ import annotations

import pytest

from oracle_deps import need

need("torch")

from benchmarks import oracle_sweep as sweep  # noqa: E402
from tools.oracle.transformers4 import balanced_rows  # noqa: E402

PINNED = (
    "llama3-gqa-tied/lora-hf-trainer-4",  # repeat_kv before SDPA, unfused AdamW, fp32 adapters
    "qwen2/lora-pytorch-loop-4",  # a loop's cross-entropy on 4.x's bf16 logits
    "qwen3/full-pytorch-loop-4",  # foreach AdamW temporaries of a full fine-tune
    "qwen3_moe/lora-all-linear-hf-trainer-4",  # one adapted nn.Linear per expert matrix
    "mixtral/lora-all-linear-ckpt-hf-trainer-4",  # per-expert modules under checkpointing
)


def _transformers4() -> bool:
    try:
        import transformers
    except ImportError:
        return False
    return transformers.__version__.startswith("4.")


needs_transformers4 = pytest.mark.skipif(
    not _transformers4(),
    reason="the transformers 4 oracle venv (tools/requirements-oracle-transformers4.txt) is not "
    "the running one; CI installs the transformers 5 oracle only",
)


@needs_transformers4
@pytest.mark.parametrize("setup_id", PINNED)
def test_calc_matches_the_transformers4_code_path(setup_id):
    from tools.oracle import oracle_estimate
    from tools.oracle.transformers4 import transformers4_run

    setup = {s["id"]: s for s in sweep.setups()}[setup_id]
    with transformers4_run():
        oracle = oracle_estimate(dict(sweep.oracle_request(setup["request"]), oracle={}))
    row = sweep.compare(setup, oracle)
    assert abs(row["peak_error"]) <= 0.02, row
    for phase, values in row["phases"].items():
        assert abs(values["error"]) <= 0.05, (phase, row)


@needs_transformers4
def test_the_expert_layout_is_the_generation_s_own():
    # calc with transformers 5's 3-D experts misses the per-expert trace by more than 2 %
    from calc.memory import estimate_dict
    from tools.oracle import oracle_estimate
    from tools.oracle.transformers4 import transformers4_run

    setup = {s["id"]: s for s in sweep.setups()}["qwen3_moe/lora-all-linear-hf-trainer-4"]
    with transformers4_run():
        oracle = oracle_estimate(dict(sweep.oracle_request(setup["request"]), oracle={}))
    fused = estimate_dict(dict(setup["request"], moe_expert_layout="fused-3d"))
    assert fused["peak_allocated_bytes"] / oracle["peak_allocated_bytes"] - 1 > 0.02


def test_balanced_routing_gives_every_expert_its_share():
    assert balanced_rows(256, 2, 8) == [64] * 8
    assert balanced_rows(5, 2, 4) == [3, 3, 2, 2]
    assert sum(balanced_rows(257, 3, 16)) == 257 * 3


def test_the_sweep_traces_both_profiles_on_dense_and_moe_families():
    generation = [s for s in sweep.setups() if sweep.is_generation4(s)]
    frameworks = {s["request"]["framework"] for s in generation}
    assert frameworks == set(sweep.TRANSFORMERS_4_PROFILES)
    families = {s["id"].split("/")[0] for s in generation}
    assert {"qwen3_moe", "mixtral", "llama3-gqa-tied"} <= families
    for s in generation:
        # the profile sets grouped k/v, expert layout and optimizer: the request leaves them out
        assert not {"attention_grouped_kv", "moe_expert_layout", "optimizer_fused"} & set(
            s["request"]
        )
        # the SDPA kernel order and the 4-bit matmuls' dtype are time only: the oracle is told
        # not to read them
        traced = sweep.oracle_request(s["request"])
        assert traced["sdpa_cudnn_last"] is False
        assert traced["qlora_compute_dtype_from_input"] is False


def test_the_summary_records_the_generation_apart():
    import json

    from conftest import REPO_ROOT

    summary = json.loads((REPO_ROOT / "validation" / "oracle_sweep_summary.json").read_text())
    entry = summary["stacks"]["transformers-4"]
    assert entry["versions"]["transformers"].startswith("4.")
    assert set(entry["profiles"]) == set(sweep.TRANSFORMERS_4_PROFILES)
    assert entry["setups"] == len(sweep.stack_setups("transformers-4"))
