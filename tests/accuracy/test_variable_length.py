"""accuracy.variable_length: published reserved peaks of runs without packing."""

from __future__ import annotations

import csv
import json
import re
import shutil
import statistics

import pytest

from accuracy import variable_length as vl
from accuracy.stats import percentile
from calc.fields import LoadWarmup
from calc.lengths import PARTS
from calc.memory import parse_estimate_request

ROWS = vl.load()
COVERED = vl.covered(ROWS)


def test_rows_are_well_formed():
    assert len({r["id"] for r in ROWS}) == len(ROWS)
    assert len(COVERED) >= 8 and len({r["source"] for r in COVERED}) >= 2
    for row in ROWS:
        for column in ("source", "source_url", "source_section", "source_version", "length_source"):
            assert row[column].strip(), (row["id"], column)
        stats = json.loads(row["length_stats"])
        assert stats and set(stats) <= set(PARTS)
        assert all(isinstance(v, int) and v > 0 for v in stats.values())
        p90 = stats.get("p90", stats["max"])
        assert stats.get("mean", 0) <= p90 <= stats.get("p99", stats["max"]) <= stats["max"]
        # the data's longest sample may pass the run's cap where the run cuts samples to it
        assert stats["max"] <= int(row["seq_len"]) or "max_seq_len" in row["dataset"]
        assert not row["batching"].startswith("packed")
        assert row["memory_metric"].startswith(
            ("max_memory_reserved", "memory_reserved", vl.DEVICE_METRIC)
        )
        unit = {"GiB": 2**30, "MiB": 2**20, "GB": 10**9, "bytes": 1}[row["peak_unit"]]
        assert float(row["peak_gib"]) == pytest.approx(
            float(row["peak_value"]) * unit / 2**30, 1e-3
        )
        assert bool(row["calc_request"]) != bool(row["calc_not_covered"])


@pytest.mark.parametrize("row", COVERED, ids=[r["id"] for r in COVERED])
def test_covered_requests_carry_the_row_s_lengths(row):
    request = json.loads(row["calc_request"])
    assert request["length_stats"] == json.loads(row["length_stats"])
    assert request["batching"] in vl.BATCHINGS
    assert request["seq_len"] == int(row["seq_len"])
    parse_estimate_request(request)  # a request calc accepts


def test_every_covered_row_was_judged_at_first_contact():
    for row in COVERED:
        assert re.fullmatch(r"[0-9a-f]{40}", row["judged_at_commit"])
        measured = float(row["peak_gib"])
        for gib, err in (
            ("first_contact_simulated_gib", "first_contact_error"),
            ("first_contact_estimate_gib", "first_contact_estimate_error"),
        ):
            assert float(row[err]) == pytest.approx(float(row[gib]) / measured - 1, abs=1e-4)


def test_figures_are_computed_from_the_recorded_rows():
    errors = [abs(float(r["first_contact_error"])) for r in COVERED]
    figures = vl.figures()
    assert figures["judged"] == len(COVERED)
    assert figures["median"] == statistics.median(errors)
    assert figures["p90"] == percentile(errors, 90)
    # double every recorded error: the figures follow the rows, nothing is typed in
    rows = [dict(r) for r in ROWS]
    for row in vl.covered(rows):
        row["first_contact_error"] = str(2 * float(row["first_contact_error"]))
    doubled = vl.figures(rows)
    assert doubled["median"] == pytest.approx(2 * figures["median"])
    assert doubled["p90"] == pytest.approx(2 * figures["p90"])


def test_a_used_memory_row_is_judged_with_calc_s_memory_outside_the_allocator():
    """An nvidia-smi row compares the replay plus calc's outside memory (CUDA context, ...) and
    the estimate's ``device_total_bytes``; the same row read as a reserved figure does not."""
    from calc.memory import estimate_dict

    row = dict(next(r for r in COVERED if not vl.per_step_percentile(r)))
    reserved = vl.judge_row(row, today=False)
    row["memory_metric"] = vl.DEVICE_METRIC + " (peak over the run)"
    used = vl.judge_row(row, today=False)
    out = estimate_dict(vl.row_request(row, today=False))
    outside = (int(out["device_total_bytes"]) - int(out["peak_reserved_bytes"])) / vl.GIB
    assert outside > 0
    assert used.simulated_gib == pytest.approx(reserved.simulated_gib + outside)
    assert used.estimate_gib == pytest.approx(int(out["device_total_bytes"]) / vl.GIB)


def test_later_figures_are_the_rows_judged_after_the_first_commit():
    judged = [r for r in COVERED if r["judged_at_commit"]]
    first = judged[0]["judged_at_commit"]
    later = [r for r in judged if r["judged_at_commit"] != first]
    errors = [abs(float(r["first_contact_error"])) for r in later]
    figures = vl.figures(today=False)
    assert 0 < figures["later_rows"] == len(later) < len(judged)
    assert figures["later_sources"] == len({r["source"] for r in later})
    assert figures["later_median"] == statistics.median(errors)
    assert figures["later_p90"] == percentile(errors, 90)
    # a row of the first commit does not enter them
    rows = [dict(r) for r in ROWS]
    first_row = next(r for r in vl.covered(rows) if r["judged_at_commit"] == first)
    first_row["first_contact_error"] = "9.0"
    assert vl.figures(rows, today=False)["later_p90"] == figures["later_p90"]


def test_record_first_contact_fills_new_rows_and_keeps_judged_ones(tmp_path):
    path = tmp_path / "peaks.csv"
    shutil.copy(vl.CSV, path)
    rows = vl.load(path)
    target = next(r for r in rows if r["id"] == COVERED[0]["id"])
    kept = {k: r[k] for r in rows for k in vl.JUDGED if r is not target}
    for column in vl.JUDGED:
        target[column] = ""
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    assert vl.record_first_contact(path) == 1
    again = vl.load(path)
    assert {k: r[k] for r in again for k in vl.JUDGED if r["id"] != target["id"]} == kept
    judged = next(r for r in again if r["id"] == target["id"])
    today = vl.judge_row(judged, today=False)
    assert float(judged["first_contact_error"]) == pytest.approx(today.error, abs=1e-6)


def test_today_s_request_merges_the_reading_and_first_contact_keeps_the_recorded_one():
    row = next(r for r in COVERED if r["today_request_changes"])
    recorded = json.loads(row["calc_request"])
    changes = json.loads(row["today_request_changes"])
    assert vl.row_request(row, today=False) == recorded
    stats = recorded["length_stats"]
    if row["id"] in vl.load_quantiles():  # the data's p99, which the recorded keys could not say
        stats = {**stats, "p99": vl.load_quantiles()[row["id"]]}
    assert vl.row_request(row) == {
        **recorded,
        "max_steps": int(row["max_steps"]),
        **changes,
        "length_stats": stats,
    }
    assert row["reading_note"]
    # the recorded first contact stays what calc said then
    assert float(row["first_contact_error"]) != pytest.approx(vl.judge_row(row).error, abs=1e-3)
    # the recorded first contact is calc's answer to the request as written
    assert vl.judge_row(row, today=False).error != vl.judge_row(row).error


SEEN = [r for r in COVERED if r["samples_seen"]]


def test_a_row_without_samples_seen_records_no_run_length():
    """A source that does not say how many samples its run met (ms-swift's table) leaves both
    columns empty, so today's request adds no ``max_steps`` to it."""
    for row in COVERED:
        if not row["samples_seen"]:
            assert not row["max_steps"]
            assert "max_steps" not in vl.row_request(row)


@pytest.mark.parametrize("row", SEEN, ids=[r["id"] for r in SEEN])
def test_today_s_request_sees_the_run_s_samples(row):
    """Today's request carries the run's length the row records: calc then meets the row's
    samples_seen, and the longest micro-batch is the expected longest of them: no longer than
    that of the same request without the run's length (calc then draws its own SAMPLES) where
    the run meets fewer samples than that, no shorter where it meets more. (Rows recorded
    before ``max_steps`` was a request key lack it in the recorded request; later rows carry
    it there too, so the comparison drops it from today's request rather than reading the
    recorded one, which also lacks today's ``p99``.)"""
    from calc.lengths import SAMPLES, samples_seen
    from calc.memory import estimate_dict, estimate_request

    today_request = vl.row_request(row)
    request = parse_estimate_request(today_request)
    seen = int(row["samples_seen"])
    one_step = (
        request.micro_batch_size * request.gradient_accumulation_steps * request.data_parallel
    )
    if seen < one_step:
        # a dataset smaller than one optimizer step (vl-v21a1: 5 samples, batch 2 x 4): the
        # Trainer runs one short step, calc's max_steps 1 one whole step
        assert request.max_steps == 1 and samples_seen(request) == one_step
    else:
        assert samples_seen(request) == seen
    # the judged figure is that of today's reading (one rank's samples where the row says so)
    judged = estimate_request(vl.row_estimate_request(row)).data
    assert judged is not None
    assert vl.judge_row(row).peak_batch_tokens == judged["peak_batch_tokens"]
    without = {k: v for k, v in today_request.items() if k != "max_steps"}
    today = estimate_dict(today_request)["data"]["peak_batch_tokens"]
    default = estimate_dict(without)["data"]["peak_batch_tokens"]
    if int(row["samples_seen"]) <= SAMPLES:
        assert today <= default
    else:
        assert today >= default


def test_the_quantiles_name_rows_and_fit_their_lengths():
    """Every p99 belongs to a row of the peaks CSV, lies between the row's p90 and max, and
    cites its source."""
    quantiles = vl.load_quantiles()
    by_id = {r["id"]: r for r in ROWS}
    assert quantiles and set(quantiles) <= set(by_id)
    with vl.QUANTILES.open(newline="") as handle:
        assert all(r["source"].strip() for r in csv.DictReader(handle))
    for row_id, p99 in quantiles.items():
        stats = json.loads(by_id[row_id]["length_stats"])
        assert stats.get("p90", 1) <= p99 <= stats["max"]


def test_today_s_request_carries_the_data_s_p99_and_first_contact_does_not():
    """A row with a published p99: today's request fits the tail through it (the Alpaca rows:
    a shorter longest micro-batch than the log-normal through mean and p90 meets); the recorded
    request, and the judged columns, do not."""
    row = next(r for r in COVERED if r["id"] in vl.load_quantiles() and r["max_steps"])
    today = vl.row_request(row)
    assert today["length_stats"]["p99"] == vl.load_quantiles()[row["id"]]
    assert "p99" not in vl.row_request(row, today=False)["length_stats"]
    without = {**today, "length_stats": json.loads(row["length_stats"])}
    from calc.memory import estimate_dict

    assert (
        estimate_dict(today)["data"]["peak_batch_tokens"]
        < estimate_dict(without)["data"]["peak_batch_tokens"]
    )


PER_STEP = [r for r in COVERED if vl.per_step_percentile(r) is not None]


def test_per_step_rows_come_from_loops_that_empty_the_cache_each_step():
    """A per-step percentile metric is read with the release after every step: each such row
    says its loop calls torch.cuda.empty_cache() after each step and which percentile it logs."""
    assert PER_STEP
    for row in PER_STEP:
        assert (
            "empty_cache()" in row["notes"]
            and "cache emptied after every step" in (row["source_section"])
        )
        assert f"{vl.per_step_percentile(row)}th percentile" in row["source_section"]


def test_a_per_step_percentile_is_judged_at_that_step_and_first_contact_at_the_run_s_peak():
    """Today's figure of a per-step row is the percentile of the steps' reserved memory, each
    step replayed after the release (calc.step_events.reserved_after_step): between the
    shortest and the longest step's, at the longest for the 100th; the recorded request is
    judged as it was, at the run's peak."""
    from calc.lengths import micro_batch_tokens
    from calc.step_events import reserved_after_step

    row = PER_STEP[-1]
    request = vl.row_request(row)
    req = parse_estimate_request(request)
    tokens = micro_batch_tokens(req)
    top = vl.step_percentile_reserved(req, 100)
    assert top == reserved_after_step(req, [max(tokens)])
    assert vl.step_percentile_reserved(req, 0) == reserved_after_step(req, [min(tokens)])
    assert vl.step_percentile_reserved(req, 50) < top
    today = vl.judge_row(row)
    assert today.simulated_gib * vl.GIB == vl.step_percentile_reserved(
        req, vl.per_step_percentile(row)
    )
    recorded = vl.judge_row(row, today=False)
    from calc.memory import estimate_dict

    run_peak = estimate_dict(vl.row_request(row, today=False))["allocator"]
    assert recorded.simulated_gib * vl.GIB == run_peak["simulated_reserved_bytes"]


def test_every_named_card_is_a_catalogue_card():
    """Each covered row's run is replayed on its own card where the row names one: the text
    maps to a catalogue id (or, not stated, to none)."""
    from calc.gpus import get_gpu

    for row in COVERED:
        card = vl.row_card(row)
        if row["gpu"].lower().startswith("not stated"):
            assert card is None, row["id"]
        else:
            assert card is not None, (row["id"], row["gpu"])
            assert get_gpu(card).memory_bytes > 0


def test_a_card_smaller_than_the_unlimited_cache_bounds_the_replay():
    """vl-g2 (Llama 3 8B full, batch 48, FSDP1 on 4 A100 80GB): the unlimited replay's cache
    outgrows the card; on the card the allocator releases its cached segments and retries, and
    the replay's reserved peak stays within the card (the run published 76.8 GiB)."""
    from calc.gpus import get_gpu
    from calc.memory import estimate_response

    row = next(r for r in COVERED if r["id"] == "vl-g2")
    req = vl.row_estimate_request(row)
    unlimited = estimate_response(req)["allocator"]["simulated_reserved_bytes"]
    on_card, out_of_memory = vl.replay_on_card(req, "a100-80gb-sxm")
    assert not out_of_memory
    assert on_card <= get_gpu("a100-80gb-sxm").memory_bytes < unlimited
    judged = vl.judge_row(row)
    assert (judged.card, judged.simulated_gib) == ("a100-80gb-sxm", on_card / vl.GIB)


@pytest.mark.parametrize("row_id", ["vl-q4", "vl-t27c1"])
def test_a_4bit_load_of_transformers_4_51_on_reserves_its_block_before_training(row_id):
    """Unsloth's Llama 3.1 8B notebook on a T4 under transformers 4.51.3 (vl-q4) and 4.56.2
    (vl-t27c1) printed a reserve before training above calc's weights: the block transformers
    allocates and frees at the load, capped by the T4's free memory (calc.load_warmup). The
    replay on the card now starts from it, so its peak is at least that printed reserve; with
    the load read as transformers 4.49's it is not."""
    row = next(r for r in COVERED if r["id"] == row_id)
    before = float(row["reserved_before_training_gib"]) * vl.GIB
    req = vl.row_estimate_request(row)
    assert req.load_warmup.value != "none"
    on_card, out_of_memory = vl.replay_on_card(req, "t4")
    assert not out_of_memory and on_card >= before
    without, _ = vl.replay_on_card(req.replaced(load_warmup=LoadWarmup.NONE), "t4")
    assert without < before


ONE_RANK = [r for r in COVERED if vl.one_rank(r)]


def test_one_rank_figures_are_judged_on_that_rank_s_samples():
    from calc.lengths import samples_seen

    assert ONE_RANK, "the Liger-Kernel example logs print rank 0's figure"
    for row in ONE_RANK:
        whole = parse_estimate_request(vl.row_request(row))
        one = vl.row_estimate_request(row)
        assert whole.data_parallel > 1
        assert one.max_steps is None
        assert samples_seen(one) == samples_seen(whole) // whole.data_parallel
        # the recorded reading is the request as written
        assert vl.row_estimate_request(row, today=False) == parse_estimate_request(
            vl.row_request(row, today=False)
        )


def test_a_figure_of_every_rank_keeps_the_run_s_samples():
    row = dict(ONE_RANK[0])
    row["memory_metric"] = row["memory_metric"].replace(vl.ONE_RANK_METRIC, "the largest of all")
    assert not vl.one_rank(row)
    assert vl.row_estimate_request(row) == parse_estimate_request(vl.row_request(row))
    # fewer samples, a shorter expected longest micro-batch: the rank's figure is not above it
    assert vl.judge_row(ONE_RANK[0]).peak_batch_tokens <= vl.judge_row(row).peak_batch_tokens
