"""First contact: the recorded judgement of sources calc had never seen (validation/first_contact_peaks.csv)."""

from __future__ import annotations

import csv
import json
import re
import statistics

import pytest
from first_contact_csv import copy_with_one_row_unjudged

from accuracy import first_contact as fc
from accuracy import memory as vm
from calc.frameworks import Framework
from calc.memory import estimate_dict


@pytest.fixture(scope="module")
def rows():
    return fc.load_rows()


def test_file_parses_with_the_measured_columns_and_the_first_contact_columns():
    with open(vm.CSV_PATH, newline="", encoding="utf-8") as handle:
        measured = next(csv.reader(handle))
    assert fc.columns() == measured + list(fc.EXTRA_COLUMNS)


def test_every_row_has_a_source_and_is_judged(rows):
    assert len({r["id"] for r in rows}) == len(rows)
    for r in rows:
        assert r["source"] and r["source_section"] and r["source_version"], r["id"]
        assert re.fullmatch(r"[0-9a-f]{40}", r["judged_at_commit"]), r["id"]
        if r["calc_not_covered"]:
            assert not r["first_contact_error"] and not r["first_contact_predicted_gib"], r["id"]
        else:
            assert (
                r["calc_request"] and r["first_contact_error"] and r["first_contact_predicted_gib"]
            ), r["id"]
            assert isinstance(json.loads(r["calc_request"]), dict)


def test_recorded_error_is_the_recorded_prediction_against_the_measurement(rows):
    for r in rows:
        if r["first_contact_error"]:
            measured = fc.measured_bytes(r)
            predicted = float(r["first_contact_predicted_gib"]) * 2**30
            assert float(r["first_contact_error"]) == pytest.approx(
                (predicted - measured) / measured, abs=2e-5
            ), r["id"]


def test_at_least_four_sources_with_judged_rows(rows):
    judged = {r["source"] for r in rows if r["first_contact_error"]}
    assert len(judged) >= 4
    assert all(s.startswith("github.com/") for s in judged)


def test_sum_over_gpus_is_compared_per_gpu():
    row = {
        "peak_value": "139.2",
        "peak_unit": "GB",
        "per_gpu": "no (sum over the 2 GPUs)",
        "num_gpus": "2",
    }
    assert fc.measured_bytes(row) == 69_600_000_000


@pytest.mark.parametrize(
    "text, metric",
    [
        ("max_memory_reserved (swift's get_max_cuda_memory)", "reserved"),
        ('not stated ("memory (GB)")', "reserved"),
        ("max_memory_allocated", "allocated"),
        ("nvidia-smi", "device"),
    ],
)
def test_metric_rule(text, metric):
    assert fc.metric(text) == metric


def test_record_fills_only_unjudged_rows(tmp_path, rows):
    path, target, text = copy_with_one_row_unjudged(fc, rows, tmp_path)
    assert fc.record(path, commit="f" * 40) == 1
    after = {r["id"]: r for r in fc.load_rows(path)}
    assert after[target]["judged_at_commit"] == "f" * 40
    assert after[target]["first_contact_error"]
    others = [
        line
        for line in path.read_text(encoding="utf-8").splitlines()
        if not line.startswith(target + ",")
    ]
    assert others == [line for line in text.splitlines() if not line.startswith(target + ",")]


def _expected(errors):
    absolute = sorted(abs(e) for e in errors)
    pos = (len(absolute) - 1) * 0.9
    low = int(pos)
    p90 = absolute[low] + (absolute[min(low + 1, len(absolute) - 1)] - absolute[low]) * (pos - low)
    return {
        "count": len(errors),
        "median": statistics.median(absolute),
        "p90": p90,
        "max": absolute[-1],
        "median_signed": statistics.median(errors),
    }


def test_summary_recomputed_from_the_file(rows):
    got = fc.summary(rows)
    by_source: dict = {}
    for r in rows:
        if r["first_contact_error"]:
            by_source.setdefault(r["source"], []).append(float(r["first_contact_error"]))
    every = [e for errs in by_source.values() for e in errs]
    for source, errs in [*by_source.items(), (fc.ALL, every)]:
        for key, value in _expected(errs).items():
            assert got[source][key] == pytest.approx(value, rel=1e-12), (source, key)
    assert got[fc.ALL]["not_covered"] == sum(1 for r in rows if not r["first_contact_error"])
    medians = sorted(_expected(errs)["median"] for errs in by_source.values())
    assert got[fc.ALL]["median_of_sources"] == pytest.approx(statistics.median(medians), rel=1e-12)


@pytest.mark.parametrize("lang", ["es", "en"])
def test_page_table_shows_the_recomputed_figures(lang, rows):
    """Every number of the methodology page's first-contact table equals the figure recomputed
    here from the CSV, for the source its row names."""
    from macros import validation_first_contact as vf

    html = vf.validation_first_contact_table(lang)
    by_source: dict = {}
    for r in rows:
        if r["first_contact_error"]:
            by_source.setdefault(r["source"], []).append(float(r["first_contact_error"]))
    by_source[fc.ALL] = [e for errs in list(by_source.values()) for e in errs]
    checked = 0
    for chunk in html.split('<tr data-source="')[1:]:
        src = json.loads(chunk.split('"', 1)[0].replace("&quot;", '"'))
        expected = _expected(by_source[src["source"]])
        for value, field in re.findall(
            r'<td data-value="([^"]+)" data-kind="[^"]+" data-field="([^"]+)"', chunk
        ):
            key = field.removeprefix("pct:")
            if key == "not_covered":
                continue
            scale = 100 if field.startswith("pct:") else 1
            assert float(value) == pytest.approx(expected[key] * scale, rel=1e-12), (src, field)
            checked += 1
    assert checked >= 5 * len(by_source)


def test_today_is_reported_beside_the_record(rows):
    today = fc.now_beside_first(rows)
    assert today[fc.ALL]["count"] <= fc.summary(rows)[fc.ALL]["count"]


def test_today_runs_each_source_under_its_own_stack(rows):
    # a source whose stack has a profile now is judged under it; the keys its request states
    # stay as stated, and the recorded first contact does not move
    stack = fc.stacks()
    assert stack, "first_contact_stacks.csv names at least one source's profile"
    known = {f.value for f in Framework}
    assert set(stack.values()) <= known and set(stack) <= {r["source"] for r in rows}
    row = next(r for r in rows if r["source"] in stack and r["calc_request"])
    own, written = fc.judge(row), fc.judge(row, {})
    request = json.loads(row["calc_request"])
    want = estimate_dict({**request, "framework": stack[row["source"]]})
    assert own.predicted_bytes == want[fc.FIELD[own.metric]]
    assert written.predicted_bytes == estimate_dict(request)[fc.FIELD[written.metric]]
    # the hand-written loop's cross-entropy on 16-bit logits is what its LoRA rows lacked
    lora = [r for r in rows if r["source"] in stack and r["method"] == "LoRA" and r["calc_request"]]
    assert any(fc.judge(r).predicted_bytes < fc.judge(r, {}).predicted_bytes for r in lora)
