"""Helpers for the CLI tests: run ``calc.cli`` in-process, and random valid requests built from
the request's field tables (so keys added later are covered without editing the tests)."""

from __future__ import annotations

import contextlib
import io
import json
import sys

from hypothesis import strategies as st

import calc.cli.app as app
from calc.fields import FieldSpec, field_specs
from calc.gpus import gpus_listing

PRESETS = [
    "llama-3.2-1b",
    "llama-3.1-8b",
    "qwen2.5-7b",
    "mistral-7b",
    "gemma-2-2b",
    "phi-2",
    "tinyllama-1.1b",
    "mixtral-8x7b",
]
LLAMA_LINEARS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def run_main(argv, *, tty: bool = False, stdin: bytes | None = None) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of ``python -m calc *argv`` run in this process, with stdout
    a terminal or not (no pytest fixture: Hypothesis calls it many times per test)."""
    out, err = io.StringIO(), io.StringIO()
    saved = app._is_terminal, sys.stdin
    app._is_terminal = lambda: tty
    if stdin is not None:
        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = app.main(list(argv))
            except SystemExit as stop:  # --help, --version
                rc = stop.code
    finally:
        app._is_terminal, sys.stdin = saved
    return rc, out.getvalue(), err.getvalue()


def _value(spec: FieldSpec):
    """A strategy of valid values of one key (None: a kind these tests do not know, skipped)."""
    if spec.kind == "bool":
        return st.booleans()
    if spec.kind == "enum":
        return st.sampled_from(spec.choices)
    if spec.kind == "int":
        top = {"seq_len": 16384, "num_gpus": 16}.get(spec.key, 8)
        return st.integers(1, min(int(spec.maximum), top))
    if spec.kind == "fraction":
        return st.floats(0.0, 0.95, allow_nan=False)
    if spec.kind == "number":
        lo = spec.minimum + (1e-3 if spec.exclusive_minimum else 0.0)
        hi = min(spec.maximum, lo + 1e6) if spec.key != "dataset_tokens" else 1e10
        values = st.floats(lo, hi, allow_nan=False, allow_infinity=False)
        return st.one_of(st.none(), values) if spec.optional else values
    if spec.kind == "targets":
        return st.one_of(
            st.just("all-linear"),
            st.lists(st.sampled_from(LLAMA_LINEARS), min_size=1, max_size=4, unique=True),
        )
    if spec.kind == "gpu":
        return st.sampled_from([g["id"] for g in gpus_listing()["gpus"]])
    return None


@st.composite
def requests(draw, command: str = "estimate"):
    """A random request of ``command`` (valid keys; the estimate may still refuse a setup, which
    the flags must then refuse identically)."""
    out = {
        "model": draw(
            st.sampled_from(
                [p for p in PRESETS if p != "mixtral-8x7b"] if command == "plan" else PRESETS
            )
        )
    }
    for spec in field_specs(command):
        if spec.key == "model":
            continue
        strategy = _value(spec)
        if strategy is None:
            continue
        if spec.required or draw(st.booleans()):
            value = draw(strategy)
            if (
                spec.key == "lora_targets"
                and isinstance(value, list)
                and out["model"]
                not in (
                    "llama-3.1-8b",
                    "llama-3.2-1b",
                    "qwen2.5-7b",
                    "mistral-7b",
                    "tinyllama-1.1b",
                )
            ):
                continue
            out[spec.key] = value
    return out


def dumps(obj) -> bytes:
    return json.dumps(obj).encode()


def flags_for_request(request: dict, specs: list[FieldSpec]) -> list[str]:
    """The command-line flags that stand for ``request`` (its keys must be fields): the inverse
    of :func:`calc.cli.flags.flag_overrides`."""
    by_key = {spec.key: spec for spec in specs}
    argv: list[str] = []
    for key, value in request.items():
        spec = by_key[key]
        if isinstance(value, bool) and spec.kind == "bool":
            argv.append(spec.flag if value else "--no-" + spec.flag[2:])
            continue
        if value is None:
            text = "null"
        elif isinstance(value, dict) and spec.kind == "stats":
            text = ",".join(f"{name}:{number}" for name, number in value.items())
        elif isinstance(value, (dict, bool)):
            text = json.dumps(value)
        elif isinstance(value, list):
            text = ",".join(value)
        else:
            text = repr(value) if isinstance(value, float) else str(value)
        argv.append(f"{spec.flag}={text}")  # "=": a value may start with "-"
    return argv
