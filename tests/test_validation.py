"""The validation benchmark's mapping from CSV rows to requests, and its statistics."""

from __future__ import annotations

import pytest

from benchmarks import validation_memory as vm


@pytest.fixture(scope="module")
def rows():
    return {r["id"]: r for r in vm.load_rows()}


@pytest.fixture(scope="module")
def results():
    return {r.row_id: r for r in vm.compare_rows()}


def test_every_row_compared_or_explained(results):
    assert len(results) == 70
    for r in results.values():
        assert r.covered or r.reason, r.row_id
        if r.covered:
            assert r.predicted_bytes > 0 and r.measured_bytes > 0


@pytest.mark.parametrize("row_id, expected", [
    ("2", {"model": "llama-2-7b", "method": "lora", "lora_rank": 8, "lora_targets": ["q_proj", "v_proj"],
           "micro_batch_size": 4, "seq_len": 2048, "gradient_checkpointing": True, "optimizer": "adamw"}),
    ("13", {"model": "llama-3.1-8b", "method": "full", "optimizer": "paged-adamw-8bit",
            "optimizer_in_backward": True, "chunked_loss": True}),
    ("18", {"num_gpus": 8, "sharding": "zero3", "cpu_offload": "optimizer+params", "optimizer": "adamw",
            "optimizer_in_backward": False}),
    ("28", {"optimizer": "adamw-8bit", "optimizer_in_backward": True, "activation_offload": True,
            "chunked_loss": True, "gradient_checkpointing": True}),  # cumulative table
    ("39", {"model": "stablelm-base-alpha-3b", "lora_targets": ["query_key_value"]}),
    ("45", {"method": "qlora", "qlora_double_quant": True, "optimizer": "paged-adamw"}),
    ("53", {"method": "qlora", "qlora_double_quant": False}),
    ("51", {"precision": "bf16-mixed"}),
    ("32", {"lora_targets": "all-linear"}),
])
def test_row_request_mapping(rows, row_id, expected):
    req = vm.row_request(rows[row_id])
    for key, value in expected.items():
        assert req[key] == value, key


@pytest.mark.parametrize("row_id, reason", [
    ("21", "seq_len_upper_bound_only"),
    ("16", "gradient_checkpointing_not_stated"),
    ("48", "fsdp_no_sync_gradient_accumulation"),
    ("59", "measured_below_model_states"),
])
def test_not_covered_reasons(results, row_id, reason):
    assert not results[row_id].covered and results[row_id].reason == reason


@pytest.mark.parametrize("text, metric", [
    ('torch.cuda.max_memory_allocated()/1e9 ("Max GPU RAM")', "allocated"),
    ("peak memory ACTIVE (torch.cuda.memory_stats active_bytes.all.peak), GiB", "allocated"),
    ("peak memory RESERVED during training (torch.cuda.max_memory_reserved/1e9)", "reserved"),
    ("torchtune get_memory_stats (GiB); which stat not stated", "reserved"),
    ("formula", "model_states"),
])
def test_metric_rule(text, metric):
    assert vm._metric(text) == metric


def test_zero_paper_rows_match_model_states(results):
    for row_id in ("119", "120", "121", "122"):
        assert abs(results[row_id].error) < 0.015


def test_units(results):
    # Row 20 prints GB (10^9), row 13 GiB (2^30).
    assert results["20"].measured_bytes == 44_800_000_000
    assert results["13"].measured_bytes == round(18.9 * 2 ** 30)


@pytest.mark.parametrize("values, q, expected", [
    ([1.0, 2.0, 3.0, 4.0], 50, 2.5),
    ([0.0, 10.0], 90, 9.0),
    ([5.0], 90, 5.0),
])
def test_percentile(values, q, expected):
    assert vm.percentile(values, q) == pytest.approx(expected)


def test_summary_and_slack_fit(results):
    s = vm.summary(list(results.values()))
    assert s.count == sum(1 for r in results.values() if r.covered)
    assert 0 <= s.median_abs_error <= s.p90_abs_error <= s.max_abs_error
    fit = vm.fit_allocator_slack(list(results.values()))
    assert set(fit.fit_rows) == {"31", "32", "33", "34"}
    assert 0 < fit.fraction < 0.3
