"""First contact for time: the recorded judgement of throughput sources calc had never seen
(validation/first_contact_throughput.csv)."""

from __future__ import annotations

import json
import statistics
import re

import pytest
from first_contact_csv import copy_with_one_row_unjudged

from accuracy import first_contact_throughput as fc
from accuracy import throughput as fitted_throughput


@pytest.fixture(scope="module")
def rows():
    return fc.load_rows()


def test_every_row_has_a_source_a_figure_and_is_judged_or_says_why_not(rows):
    assert len({r["id"] for r in rows}) == len(rows)
    for r in rows:
        assert r["source"] and r["source_path_or_url"] and r["source_version"], r["id"]
        assert r["section_table"] and r["published_figure"], r["id"]
        if r["calc_not_covered"]:
            assert not r["first_contact_error"], r["id"]
            assert not r["first_contact_predicted_tokens_per_second_per_gpu"], r["id"]
            continue
        assert isinstance(json.loads(r["calc_request"]), dict), r["id"]
        assert float(r["tokens_per_second_per_gpu"]) > 0 and r["derivation"], r["id"]
        assert re.fullmatch(r"[0-9a-f]{40}", r["judged_at_commit"]), r["id"]
        assert r["first_contact_error"] and r["first_contact_predicted_tokens_per_second_per_gpu"]


def test_recorded_error_is_the_recorded_prediction_against_the_measurement(rows):
    for r in rows:
        if r["first_contact_error"]:
            measured = float(r["tokens_per_second_per_gpu"])
            predicted = float(r["first_contact_predicted_tokens_per_second_per_gpu"])
            # the prediction is written to 0.1 token/s, the error from the unrounded one
            assert float(r["first_contact_error"]) == pytest.approx(
                (predicted - measured) / measured, abs=0.05 / measured + 1e-6
            ), r["id"]


def test_every_written_request_is_one_calc_can_read_today(rows):
    for r in rows:
        if r["calc_request"]:
            j = fc.judge(r)
            assert j.covered and j.predicted > 0, (r["id"], j.reason)


def test_multi_node_rows_on_named_networks_are_judged(rows):
    """Rows across servers with the network their source states (or its cloud instance has):
    what checks the network model's bandwidth and latency terms."""
    judged = [
        r
        for r in rows
        if r["first_contact_error"]
        and int(r["num_gpus"]) > 8
        and json.loads(r["calc_request"]).get("network", "catalogue") != "catalogue"
    ]
    assert len({r["source"] for r in judged}) >= 2
    assert {json.loads(r["calc_request"])["gpu"] for r in judged} >= {"h200", "b200"}


def test_at_least_four_sources_published_by_different_projects(rows):
    judged = {r["source"] for r in rows if r["first_contact_error"]}
    projects = {re.sub(r"^(github\.com/[^/]+/[^ /]+|[^/]+/blog)/?.*$", r"\1", s) for s in judged}
    assert len(projects) >= 4, projects


def test_record_fills_only_unjudged_rows(tmp_path, rows):
    path, target, text = copy_with_one_row_unjudged(fc, rows, tmp_path)
    assert fc.record(path) == 1
    after = {r["id"]: r for r in fc.load_rows(path)}
    assert re.fullmatch(r"[0-9a-f]{40}", after[target]["judged_at_commit"])
    assert after[target]["first_contact_error"]
    others = [line for line in path.read_text(encoding="utf-8").splitlines()]
    kept = [line for line in text.splitlines()]
    assert [line for line in others if not line.startswith(target + ",")] == [
        line for line in kept if not line.startswith(target + ",")
    ]


def test_after_fixes_figures_are_the_rows_recorded_from_the_first_judged_with_the_mends(rows):
    first = next(i for i, r in enumerate(rows) if r["judged_at_commit"] == fc.FIXES_IN_AT)
    assert first > 0
    assert [r["id"] for r in fc.after_fixes(rows)] == [r["id"] for r in rows[first:]]
    errors = [
        abs(float(r["first_contact_error"])) for r in rows[first:] if r["first_contact_error"]
    ]
    late = fc.summary(rows)[fc.AFTER_FIXES]
    assert late["count"] == len(errors) < fc.summary(rows)[fc.ALL]["count"]
    assert late["median"] == pytest.approx(statistics.median(errors))
    assert late["not_covered"] == sum(1 for r in rows[first:] if r["calc_not_covered"])
    assert fc.now_beside_first(rows)[fc.AFTER_FIXES]["count"] == len(errors)


def test_after_fixes_is_empty_when_no_row_was_judged_with_the_mends(rows):
    early = [r for r in rows if r["judged_at_commit"] != fc.FIXES_IN_AT]
    assert fc.after_fixes(early[:5]) == []
    assert fc.summary(early[:5])[fc.AFTER_FIXES]["count"] == 0


def test_by_card_groups_today_s_errors_by_the_request_s_card():
    """Each recorded, covered row counts once, under the card its request runs on today; the
    figures are the medians of those rows' signed and absolute errors."""
    rows = fc.load_rows()
    cards = fc.by_card(rows)
    judged = fc.today_judgements(rows)
    assert sum(c["count"] for c in cards.values()) == len(judged)
    by_id = {r["id"]: r for r in rows}
    t4 = [j.error for j in judged if fc.card_of(by_id[j.row_id]) == "t4"]
    assert cards["t4"]["count"] == len(t4) > 0
    assert cards["t4"]["median_signed"] == statistics.median(t4)
    assert cards["t4"]["median"] == statistics.median(abs(e) for e in t4)
    assert 1 <= cards["t4"]["sources"] <= len(t4)
    # a row whose today_request_changes moves it to another card counts under that card
    row = dict(next(r for r in rows if r["first_contact_error"] and r["calc_request"]))
    row["today_request_changes"] = json.dumps({"gpu": "h200"})
    assert fc.card_of(row) == "h200"


def test_by_attention_groups_the_cuda_rows_by_kernel_and_head_width():
    """Each recorded, covered row on a CUDA card counts once, under the kernel calc reads PyTorch
    dispatching for it and its widest head (at most 128 or above); an AMD row counts under no
    kernel; the figures are the medians of the group's errors."""
    rows = fc.load_rows()
    groups = fc.by_attention(rows)
    judged = fc.today_judgements(rows)
    by_id = {r["id"]: r for r in rows}
    keys = {j.row_id: fc.attention_group(by_id[j.row_id]) for j in judged}
    assert sum(g["count"] for g in groups.values()) == sum(1 for k in keys.values() if k)
    assert all(k == "" for i, k in keys.items() if fc.card_of(by_id[i]).startswith("mi3"))
    for group, figures in groups.items():
        backend, width = group.split(" ")
        assert backend in ("flash", "efficient", "cudnn", "math", "eager")
        assert width in ("<=128", ">128")
        errors = [j.error for j in judged if keys[j.row_id] == group]
        assert figures["count"] == len(errors) > 0
        assert figures["median_signed"] == statistics.median(errors)
        assert figures["median"] == statistics.median(abs(e) for e in errors)
    # a Gemma 2 row (head dim 256) is a wide head; a Llama row (128) is not
    gemma = next(r for r in rows if r["id"] == "fct-u12")
    assert fc.attention_group(gemma).endswith(">128")
    llama = next(r for r in rows if r["id"] == "fct-u2")
    assert fc.attention_group(llama).endswith("<=128")


def _repository(text: str) -> str | None:
    found = re.search(r"github\.com/([^/\s]+/[^/\s,]+)", text)
    return found.group(1).lower() if found else None


def test_no_row_repeats_a_fitted_row_unless_the_fitted_row_came_from_it(rows):
    """A first-contact row is a measurement the time model was never fitted on. A fitted row of
    ``measured_throughput.csv`` may repeat one (a source first judged, then added to the fit),
    and then names it in its notes; a first-contact row that repeats a fitted row which does
    not name it was fitted before it was judged: not first contact. Same repository and the
    same figure within 0.5 % count as a repeat."""
    by_repo: dict[str, list[dict]] = {}
    for m in fitted_throughput.load_rows().values():
        repo = _repository(m["source_repo_or_site"] + " " + m["source_path_or_url"])
        if repo and m["tokens_per_second_per_gpu"]:
            by_repo.setdefault(repo, []).append(m)
    repeats = []
    for r in rows:
        repo = _repository(r["source"] + " " + r["source_path_or_url"])
        figure = float(r["tokens_per_second_per_gpu"]) if r["tokens_per_second_per_gpu"] else 0.0
        for m in by_repo.get(repo or "", []) if figure else []:
            same = abs(float(m["tokens_per_second_per_gpu"]) - figure) <= 0.005 * figure
            if same and r["id"] not in m["flags_notes"]:
                repeats.append((r["id"], m["row_id"]))
    assert not repeats


# ---- where the multi-GPU rows lean (fc.multi_gpu_lean, fc.scaling_pairs) ------------------


def test_hidden_share_is_what_the_step_does_not_expose():
    from calc.timing import StepBreakdown

    zero = dict.fromkeys(
        (
            "elementwise",
            "dequantisation",
            "fp8_casts",
            "exposed_transfer",
            "optimizer",
            "overheads",
        ),
        0.0,
    )
    step = StepBreakdown(compute=2.0, exposed_communication=0.1, communication=0.5, **zero)
    assert fc.hidden_share(step) == pytest.approx(0.2)
    assert fc.hidden_share(StepBreakdown(compute=0.0, exposed_communication=0.0, **zero)) == 0.0
    assert [fc.hidden_bin(x) for x in (0.0, 0.05, 0.3, 0.5, 4.0)] == [
        "0-0.05",
        "0.05-0.2",
        "0.2-0.5",
        "0.5+",
        "0.5+",
    ]


def _step(rid, source, n, measured, predicted, sharding="none", hidden=0.0, **request):
    return {
        "id": rid,
        "source": source,
        "request": {"model": "m", "num_gpus": n, **request},
        "num_gpus": n,
        "one_server": True,
        "sharding": sharding,
        "measured": measured,
        "predicted": predicted,
        "error": predicted / measured - 1,
        "hidden": hidden,
    }


def test_lean_groups_rows_by_sharding_and_hidden_share():
    steps = [
        _step("a", "s", 8, 100.0, 150.0, "zero3", 0.3),
        _step("b", "s", 8, 100.0, 130.0, "zero3", 0.25),
        _step("c", "s", 8, 100.0, 101.0, "zero3", 0.01),
        _step("d", "s", 2, 100.0, 90.0, "ddp", 0.0),
        _step("e", "s", 1, 100.0, 110.0),
        {**_step("f", "s", 16, 100.0, 300.0, "zero3", 0.3), "one_server": False},
    ]
    lean = fc.multi_gpu_lean(steps)
    assert list(lean) == ["zero3 0-0.05", "zero3 0.2-0.5", "ddp 0-0.05", "one_gpu"]
    assert lean["zero3 0.2-0.5"]["count"] == 2  # the two-server row is left out
    assert lean["zero3 0.2-0.5"]["median_signed"] == pytest.approx(0.4)
    assert lean["one_gpu"]["median_signed"] == pytest.approx(0.1)


def test_pairs_join_one_source_and_one_setup_only():
    steps = [
        _step("a1", "s", 1, 100.0, 110.0),
        _step("a2", "s", 4, 80.0, 110.0, "ddp", gradient_accumulation_steps=4),
        _step("b2", "s", 4, 50.0, 55.0, "ddp", micro_batch_size=2),  # another setup
        _step("c2", "t", 4, 50.0, 55.0, "ddp"),  # another source
    ]
    pairs = fc.scaling_pairs(steps)
    assert [(p["id"], p["one"]) for p in pairs] == [("a2", "a1")]
    (p,) = pairs
    assert p["measured"] == pytest.approx(0.8)
    assert p["predicted"] == pytest.approx(1.0)
    assert p["error"] == pytest.approx(0.25)


def test_recorded_multi_gpu_rows_are_grouped():
    """On the recorded rows: the one-server multi-GPU rows fall in the published groups, each
    row once, and the scaling pairs come from rows of one source."""
    steps = fc.today_steps()
    lean = fc.multi_gpu_lean(steps)
    grouped = sum(f["count"] for k, f in lean.items() if k != "one_gpu")
    assert grouped == sum(
        1
        for s in steps
        if s["num_gpus"] > 1 and s["one_server"] and s["sharding"] in fc.SHARDING_ORDER
    )
    assert grouped >= 100 and lean["one_gpu"]["count"] >= 100
    ids = {s["id"]: s for s in steps}
    for p in fc.scaling_pairs(steps):
        assert ids[p["id"]]["source"] == ids[p["one"]]["source"]
        assert ids[p["one"]]["num_gpus"] == 1 < ids[p["id"]]["num_gpus"]
