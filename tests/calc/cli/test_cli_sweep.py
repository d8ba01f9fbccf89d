"""``python -m calc sweep``: each row equals the single run with that value."""

from __future__ import annotations

import csv
import io
import json

import pytest

from calc.fields import spec_by_key
from calc.cli.sweep import sweep_values
from calc.memory import estimate_dict
from calc.plan import plan_dict
from cli_run import run_main

BASE = ["--model", "llama-3.1-8b", "--method", "qlora"]


def _single(command, argv):
    rc, out, err = run_main([command, *argv, "--json"])
    assert rc == 0, out + err
    return json.loads(out)


def test_list_sweep_equals_single_runs():
    rc, out, _ = run_main(["sweep", *BASE, "--seq-len", "1024,2048,4096,8192"])
    data = json.loads(out)
    assert rc == 0 and data["field"] == "seq_len" and data["command"] == "estimate"
    assert [r["value"] for r in data["runs"]] == [1024, 2048, 4096, 8192]
    for run in data["runs"]:
        assert run["response"] == _single("estimate", [*BASE, "--seq-len", str(run["value"])])


def test_range_sweep_equals_single_runs_in_plan():
    argv = [*BASE, "--dataset-tokens", "1e7", "--gpu", "l4"]
    rc, out, _ = run_main(["sweep", *argv, "--micro-batch-size", "1..4"])
    data = json.loads(out)
    assert (
        rc == 0 and data["command"] == "plan" and [r["value"] for r in data["runs"]] == [1, 2, 3, 4]
    )
    for run in data["runs"]:
        assert run["response"] == _single("plan", [*argv, "--micro-batch-size", str(run["value"])])


def test_enum_sweep_and_csv_rows_match_single_runs():
    rc, out, _ = run_main(
        ["sweep", "--model", "llama-3.1-8b", "--method", "full,lora,qlora", "--csv"]
    )
    rows = list(csv.DictReader(io.StringIO(out)))
    assert rc == 0 and [r["method"] for r in rows] == ["full", "lora", "qlora"]
    for row in rows:
        single = estimate_dict({"model": "llama-3.1-8b", "method": row["method"]})
        assert int(row["peak_allocated_bytes"]) == single["peak_allocated_bytes"]
        assert int(row["device_total_bytes"]) == single["device_total_bytes"]
        assert row["peak_phase"] == single["peak_phase"]


def test_gpu_verdict_in_an_estimate_sweep():
    rc, out, _ = run_main(["sweep", *BASE, "--seq-len", "2048,65536", "--gpu", "rtx-4090", "--csv"])
    rows = list(csv.DictReader(io.StringIO(out)))
    assert rc == 0 and [r["fits"] for r in rows] == ["True", "False"]


def test_plan_sweep_csv_has_time_and_cost():
    request = {"model": "llama-3.1-8b", "method": "qlora", "dataset_tokens": 1e7, "gpu": "l4"}
    rc, out, _ = run_main(
        [
            "sweep",
            *BASE,
            "--dataset-tokens",
            "1e7",
            "--gpu",
            "l4",
            "--seq-len",
            "1024,2048",
            "--csv",
        ]
    )
    rows = list(csv.DictReader(io.StringIO(out)))
    for row in rows:
        single = plan_dict({**request, "seq_len": int(row["seq_len"])})
        assert float(row["time_hours"]) == single["time_hours"]
        assert float(row["cost_usd"]) == single["cost_usd"]["total"]


@pytest.mark.parametrize(
    "lang, words", [("en", ["Peak allocated", "GiB"]), ("es", ["Pico asignado", ","])]
)
def test_sweep_table_on_a_terminal(lang, words):
    rc, out, _ = run_main(["sweep", *BASE, "--seq-len", "1024,2048", "--lang", lang], tty=True)
    assert rc == 0 and len(out.strip().splitlines()) == 4
    assert all(w in out for w in words)


@pytest.mark.parametrize(
    "argv, code",
    [
        ([*BASE], "sweep_needs_one_field"),
        ([*BASE, "--seq-len", "1,2", "--micro-batch-size", "1,2"], "sweep_needs_one_field"),
        ([*BASE, "--seq-len", "8..2"], "bad_sweep_range"),
        ([*BASE, "--seq-len", "1..100000"], "bad_sweep_range"),
        ([*BASE, "--seq-len", "1..8:0"], "bad_sweep_range"),
        ([*BASE, "--seq-len", "1024,abc"], "not_integer"),
        ([*BASE, "--method", "lora,bogus"], "unknown_value"),
    ],
)
def test_bad_sweeps_are_coded_errors(argv, code):
    rc, out, err = run_main(["sweep", *argv])
    assert rc == 2 and json.loads(out)["error"]["code"] == code and "Traceback" not in err


def test_sweep_of_a_request_that_is_no_object(tmp_path):
    path = tmp_path / "req.json"
    path.write_text("[1, 2]")
    rc, out, err = run_main(["sweep", "--request", str(path), "--seq-len", "1,2"])
    assert (
        rc == 2
        and json.loads(out)["error"]["code"] == "request_not_object"
        and "Traceback" not in err
    )


def test_sweep_values():
    seq = spec_by_key("plan")["seq_len"]
    assert sweep_values(seq, "512..2048:512") == [512, 1024, 1536, 2048]
    assert sweep_values(seq, "4096") is None
    assert sweep_values(spec_by_key("plan")["lora_targets"], "q_proj,v_proj") is None
    assert sweep_values(spec_by_key("plan")["epochs"], "0.5,1,1.5") == [0.5, 1, 1.5]


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from calc.fields import field_specs  # noqa: E402
from cli_run import flags_for_request, requests  # noqa: E402

_SWEEPABLE = [s for s in field_specs("estimate") if s.kind in ("int", "enum")]


@settings(max_examples=30)
@given(request=requests("estimate"), data=st.data())
def test_any_sweep_equals_its_single_runs(request, data):
    """Property: over a random key (a list of its values), each run of the sweep is the
    response (or the error) of the single run with that value."""
    spec = data.draw(st.sampled_from(_SWEEPABLE))
    if spec.kind == "enum":
        values = data.draw(
            st.lists(st.sampled_from(spec.choices), min_size=2, max_size=3, unique=True)
        )
    else:
        values = data.draw(st.lists(st.integers(1, 64), min_size=2, max_size=3, unique=True))
    base = {k: v for k, v in request.items() if k != spec.key}
    flags = flags_for_request(base, field_specs("estimate"))
    rc, out, _ = run_main(["sweep", *flags, f"{spec.flag}={','.join(map(str, values))}"])
    singles = [
        run_main(["estimate", *flags_for_request({**base, spec.key: v}, field_specs("estimate"))])
        for v in values
    ]
    if all(r[0] == 0 for r in singles):
        assert rc == 0
        runs = json.loads(out)["runs"]
        assert [r["value"] for r in runs] == values
        assert [r["response"] for r in runs] == [json.loads(s[1]) for s in singles]
    else:  # the first failing value stops the sweep with its error
        first = next(s for s in singles if s[0] != 0)
        assert rc == 2 and json.loads(out) == json.loads(first[1])


def test_sweeping_a_behaviour_the_request_file_sets_under_behaviour(tmp_path):
    """The swept value wins over the file's, whichever shape the file uses (nested or flat)."""
    path = tmp_path / "request.json"
    path.write_text(
        json.dumps({"model": "qwen1.5-moe-a2.7b", "behaviour": {"moe_expert_layout": "fused-3d"}})
    )
    rc, out, err = run_main(
        [
            "sweep",
            "--request",
            str(path),
            "--moe-expert-layout",
            "per-expert-modules,fused-3d",
            "--json",
        ]
    )
    assert rc == 0, err
    runs = json.loads(out)["runs"]
    for run, layout in zip(runs, ("per-expert-modules", "fused-3d"), strict=True):
        single = estimate_dict({"model": "qwen1.5-moe-a2.7b", "moe_expert_layout": layout})
        assert run["value"] == layout and run["response"] == single


def test_a_refused_sweep_lists_every_bad_field_as_its_single_run():
    # every-n without its N: the sweep stops at the first run with the single run's response
    base = ["--model", "llama-3.2-1b", "--checkpointing-granularity", "every-n", "--json"]
    rc, out, _ = run_main(["sweep", *base, "--seq-len", "512,1024"])
    rc_one, one, _ = run_main(["estimate", *base, "--seq-len", "512"])
    assert rc == rc_one == 2
    assert json.loads(out) == json.loads(one)
    assert json.loads(out)["errors"][0]["field"] == "checkpointing_every"
