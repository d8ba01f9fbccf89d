"""CLI output: JSON byte for byte when piped or with --json, a table on a terminal in Spanish
and English (snapshots of fixed responses, so a change in the memory model does not move them)."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from calc.cli.messages import Messages
from calc.cli.table import render_estimate, render_plan
from calc.memory import estimate_dict
from calc.plan import plan_dict
from cli_run import dumps, run_main
from conftest import REPO_ROOT

ROOT = REPO_ROOT
SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"
GIB = 2 ** 30

ESTIMATE = {
    "peak_allocated_bytes": int(17.6 * GIB), "peak_reserved_bytes": int(19.5 * GIB),
    "device_total_bytes": int(20.04 * GIB), "peak_phase": "forward_end", "host_bytes": 0,
    "warnings": ["seq_len_above_max_positions"],
    "request": {"model": "llama-3.1-8b", "method": "qlora", "seq_len": 4096, "micro_batch_size": 2,
                "num_gpus": 1, "sharding": "none"},
}
PLAN = {
    "gpu": "rtx-4090", "num_gpus": 1, "sharding": "none", "safety_margin": 0.25,
    "memory": {**ESTIMATE, "peak_allocated_range_bytes": [int(16.1 * GIB), int(19.2 * GIB)],
               "peak_reserved_range_bytes": [int(17.9 * GIB), int(21.3 * GIB)], "warnings": []},
    "fits": {"rtx-4090": {"fits": False, "fits_without_margin": True, "memory_bytes": int(23.99 * GIB),
                          "required_bytes": int(25.05 * GIB), "verdict": "borderline"}},
    "time_hours": 15.46, "time": {"tokens_per_second": 12345.6},
    "cost_usd": {"total": 1234.5, "final_run": 10.56},
    "recommendations": {"configs": [
        {"id": "h100-sxmx1-none", "cost_usd": 15.76, "time_hours": 3.4},
        {"id": "l4x1-none", "cost_usd": 16.1, "time_hours": 13.9}]},
    "warnings": ["does_not_fit_selected_gpu"],
}
REQUEST = {"model": "llama-3.1-8b", "method": "qlora", "seq_len": 4096, "micro_batch_size": 2}
PLAN_REQUEST = {**REQUEST, "dataset_tokens": 5e7, "gpu": "rtx-4090"}


def _snapshot(name: str, text: str) -> None:
    path = SNAPSHOTS / name
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8"), f"{name} changed (UPDATE_SNAPSHOTS=1 to accept)"


@pytest.mark.parametrize("lang", ["es", "en"])
def test_estimate_table_snapshot(lang):
    msg = Messages(lang)
    # fixed entries (not calc.recommend's), so the snapshot tests the rendering only: one without
    # calc's verdict code (the table derives it), two with it
    need = int(25.05 * GIB)
    verdicts = {"rtx-4090": {"fits": False, "fits_without_margin": True, "memory_bytes": int(23.99 * GIB),
                             "required_bytes": need},
                "a100-80gb-sxm": {"fits": True, "verdict": "fits", "memory_bytes": 80 * GIB, "required_bytes": need},
                "l4": {"fits": False, "verdict": "does_not_fit", "memory_bytes": int(22.5 * GIB),
                       "required_bytes": need}}
    _snapshot(f"cli_estimate_{lang}.txt", render_estimate(ESTIMATE, msg, verdicts, 0.25))


@pytest.mark.parametrize("lang", ["es", "en"])
def test_plan_table_snapshot(lang):
    """With calc's own verdict code and a range of the peak when the response has them."""
    _snapshot(f"cli_plan_{lang}.txt", render_plan(PLAN, Messages(lang)))


def test_plan_table_without_range_or_verdict_falls_back():
    plan = json.loads(json.dumps(PLAN))
    del plan["memory"]["peak_allocated_range_bytes"], plan["memory"]["peak_reserved_range_bytes"]
    del plan["fits"]["rtx-4090"]["verdict"]
    text = render_plan(plan, Messages("en"))
    assert "17.6 GiB\n" in text and "19.5 GiB\n" in text and "–" not in text
    assert "fits only without the safety margin" in text  # from fits / fits_without_margin


def test_no_margin_no_margin_words():
    plan = json.loads(json.dumps(PLAN))
    plan["safety_margin"] = 0.0
    text = render_plan(plan, Messages("en"))
    assert "Verdict\n" in text and "margin" not in text.split("Verdict")[1].split("\n")[1]


def test_estimate_verdict_judges_the_device_range_when_calc_has_one(monkeypatch):
    """calc.recommend may give an estimate a device range (device_range); the CLI then passes
    it to fit_entry as plan does."""
    from calc import recommend
    from calc.cli.commands import estimate_verdicts
    from calc.gpus import get_gpu
    seen = {}

    def fake_fit(total, memory, margin, device_range_bytes=None):
        seen["range"] = device_range_bytes
        return {"fits": True, "verdict": "borderline", "required_bytes": 1, "memory_bytes": memory}

    monkeypatch.setattr(recommend, "device_range", lambda est: (1, 2), raising=False)
    monkeypatch.setattr(recommend, "fit_entry", fake_fit)
    out = estimate_verdicts({"device_total_bytes": 5}, [get_gpu("l4")], 0.0)
    assert seen["range"] == (1, 2) and out["l4"]["verdict"] == "borderline"


@pytest.mark.parametrize("command, request_obj, compute", [
    ("estimate", REQUEST, estimate_dict), ("plan", PLAN_REQUEST, plan_dict)])
def test_json_is_todays_bytes(command, request_obj, compute):
    """Piped, with --json, and from --request: json.dumps(indent=2, ensure_ascii=False) + newline."""
    expected = json.dumps(compute(request_obj), indent=2, ensure_ascii=False) + "\n"
    assert run_main([command, "--request", "-"], stdin=dumps(request_obj))[1] == expected
    assert run_main([command, "--request", "-", "--json"], tty=True, stdin=dumps(request_obj))[1] == expected
    from calc.cli.fields import field_specs
    from calc.cli.flags import flags_for_request
    flags = flags_for_request(request_obj, field_specs(command))
    assert run_main([command, *flags, "--json", "--lang", "es"], tty=True)[1] == expected


@pytest.mark.parametrize("lang", ["es", "en"])
def test_terminal_gets_the_table_of_the_response(lang):
    est = estimate_dict(REQUEST)
    rc, out, _ = run_main(["estimate", "--request", "-", "--lang", lang], tty=True, stdin=dumps(REQUEST))
    assert rc == 0 and out == render_estimate(est, Messages(lang), {}, 0.25)
    rc, out, _ = run_main(["plan", "--request", "-", "--lang", lang], tty=True, stdin=dumps(PLAN_REQUEST))
    assert rc == 0 and out == render_plan(plan_dict(PLAN_REQUEST), Messages(lang))
    rc, forced, _ = run_main(["plan", "--request", "-", "--lang", lang, "--table"], stdin=dumps(PLAN_REQUEST))
    assert forced == out


def test_a_real_terminal_gets_a_table_and_a_pipe_gets_json():
    argv = [sys.executable, "-m", "calc", "estimate", "--model", "llama-3.1-8b", "--lang", "en"]
    leader, follower = pty.openpty()
    try:
        proc = subprocess.run(argv, stdout=follower, stderr=subprocess.PIPE, cwd=ROOT, timeout=60)
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the terminal's other end is closed
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(leader)
    text = b"".join(chunks).decode().replace("\r\n", "\n")
    assert proc.returncode == 0 and text.startswith("Setup: llama-3.1-8b") and "Peak allocated" in text
    piped = subprocess.run(argv, capture_output=True, cwd=ROOT, timeout=60)
    assert json.loads(piped.stdout)["peak_allocated_bytes"] > 0


def test_listings_stay_json_on_a_terminal():
    from calc.presets import presets_listing
    rc, out, _ = run_main(["presets"], tty=True)
    assert rc == 0 and out == json.dumps(presets_listing(), indent=2, ensure_ascii=False) + "\n"


def test_table_in_an_ascii_terminal_has_no_traceback():
    env = {**os.environ, "PYTHONIOENCODING": "ascii"}
    proc = subprocess.run([sys.executable, "-m", "calc", "estimate", "--model", "llama-3.1-8b", "--gpu", "l4",
                           "--table", "--lang", "es"], capture_output=True, cwd=ROOT, env=env, timeout=60)
    assert proc.returncode == 0 and b"Traceback" not in proc.stderr
    assert b"Configuraci?n" in proc.stdout


def test_estimate_against_every_card():
    from calc.gpus import all_gpus
    rc, out, _ = run_main(["estimate", "--model", "llama-3.1-8b", "--gpu", "all", "--lang", "en"], tty=True)
    lines = out.split("Verdict")[1].splitlines()[1:]
    assert rc == 0 and [line.split()[0] for line in lines[:len(all_gpus())]] == [g.id for g in all_gpus()]
