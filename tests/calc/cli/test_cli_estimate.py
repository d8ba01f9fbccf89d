"""``python -m calc estimate``: JSON out, coded JSON errors with exit 2, never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import REPO_ROOT

ROOT = REPO_ROOT


def run_cli(stdin: str | bytes, *args: str) -> subprocess.CompletedProcess:
    argv = args or ("estimate", "--request", "-")
    data = stdin.encode() if isinstance(stdin, str) else stdin
    proc = subprocess.run(
        [sys.executable, "-m", "calc", *argv], input=data, capture_output=True, cwd=ROOT, timeout=60
    )
    return subprocess.CompletedProcess(
        proc.args, proc.returncode, proc.stdout.decode(), proc.stderr.decode(errors="replace")
    )


def test_estimate_prints_response():
    proc = run_cli(json.dumps({"model": "llama-2-7b", "method": "qlora"}))
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert sum(out["components"].values()) == out["peak_allocated_bytes"]


def test_estimate_from_file(tmp_path):
    path = tmp_path / "req.json"
    path.write_text(json.dumps({"model": "tinyllama-1.1b", "method": "full"}))
    proc = run_cli("", "estimate", "--request", str(path))
    assert proc.returncode == 0 and json.loads(proc.stdout)["params_total"] == 1_100_048_384


@pytest.mark.parametrize(
    "stdin, code",
    [
        ("not json", "request_not_json"),
        ("[1, 2]", "request_not_object"),
        ('{"model": "llama-2-7b", "seq_len": NaN}', "not_integer"),
        ('{"model": "llama-2-7b", "seq_len": 1e999}', "not_integer"),
        ('{"model": "llama-2-7b", "seq_len": 2.5}', "not_integer"),
        ('{"model": "llama-2-7b", "seq_len": 512, "seq_len": 4096}', "duplicate_key"),
        ('{"model": "llama-2-7b", "micro_batch_size": 99999999999999999999999999}', "out_of_range"),
        ('{"model": "llama-2-7b", "lora_dropout": 1}', "out_of_range"),
        ('{"model": "llama-2-7b", "lora_dropout": NaN}', "not_number"),
        ('{"model": {"hf_config": {"model_type": [[[]]]}}}', "config_invalid_value"),
        (
            '{"model": {"hf_config": {"model_type": "llama", "hidden_size": "4096"}}}',
            "config_invalid_value",
        ),
        ('{"model": "llama-2-7b", "nested": {"a": [1, {"b": null}]}}', "unknown_key"),
        ("[" * 100000 + "]" * 100000, "request_too_deep"),
    ],
    ids=lambda v: repr(v)[:40],
)
def test_bad_requests_exit_2_without_traceback(stdin, code):
    proc = run_cli(stdin)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert json.loads(proc.stdout)["error"]["code"] == code


@pytest.mark.parametrize("from_file", [False, True], ids=["stdin", "file"])
def test_undecodable_bytes_are_a_coded_error(tmp_path, from_file):
    # the same code from stdin and from a file, whatever the locale
    data = b"\xff\xfe{"
    if from_file:
        path = tmp_path / "req.json"
        path.write_bytes(data)
        proc = run_cli("", "estimate", "--request", str(path))
    else:
        proc = run_cli(data)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert json.loads(proc.stdout)["error"]["code"] == "request_not_utf8"


def test_utf8_bom_is_accepted():
    proc = run_cli(b"\xef\xbb\xbf" + json.dumps({"model": "tinyllama-1.1b"}).encode())
    assert proc.returncode == 0, proc.stdout
    assert json.loads(proc.stdout)["params_total"] == 1_100_048_384


def test_closed_pipe_shows_no_traceback():
    # `python -m calc gpus | head -c 1`: the reader leaves before the output ends
    proc = subprocess.run(
        f"'{sys.executable}' -m calc gpus | head -c 1",
        shell=True,
        cwd=ROOT,
        capture_output=True,
        timeout=60,
    )
    assert b"Traceback" not in proc.stderr and proc.stdout == b"{"


def test_missing_file_is_a_coded_error():
    proc = run_cli("", "estimate", "--request", "/nonexistent/req.json")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert json.loads(proc.stdout)["error"]["code"] == "request_unreadable"


def test_run_entry_survives_repeated_plan_calls():
    """The browser calls calc.run many times; importing calc.plan must not shadow anything."""
    import calc

    request = {"model": "llama-3.2-1b", "dataset_tokens": 1_000_000, "epochs": 1, "gpu": "l4"}
    first = calc.run("plan", request)
    second = calc.run("plan", request)
    assert "result" in first and first == second
    assert calc.run("estimate", {"model": "llama-3.2-1b"})["result"]["peak_allocated_bytes"] > 0
    assert calc.run("nope", {})["error"]["code"] == "unknown_command"
