"""``python -m calc sweep``: one request key over a list (``--seq-len 1024,2048,4096``) or a
range (``--micro-batch-size 1..16``, ``--seq-len 512..8192:512``), every other key fixed.

Each value is an ordinary run (estimate, or plan when the request has ``dataset_tokens``), so
a row equals the single run with that value. With ``--gpu`` and no ``--dataset-tokens`` the
sweep is of estimates and the card only gets a verdict, as in ``estimate --gpu``. Output: a
table on a terminal, ``--csv`` (raw numbers), or JSON ``{"field", "runs": [{"value",
"response"}]}`` when piped or with ``--json``.
"""

from __future__ import annotations

import argparse
import re
import sys

from ..config_import.cli import add_config_warnings, config_warning_lines
from ..errors import InputError
from ..jsontypes import JsonObject
from . import io
from .commands import _computed, add_request_arguments, build_request, estimate_verdicts
from ..fields import FieldSpec, field_specs
from .flags import flag_value
from .helptext import sweep_field_help, usage
from .messages import Messages
from .registry import Command, Context, register
from .table import Formatter, gpu_name, verdict_text

MAX_VALUES = 10_000
_RANGE_RE = re.compile(r"\s*(\d+)\s*\.\.\s*(\d+)\s*(?::\s*(\d+)\s*)?")
# keys whose text can hold several values; lora_targets is a comma list by itself
_SWEEPABLE = ("int", "number", "fraction", "enum", "gpu", "model")


def sweep_values(spec: FieldSpec, text: str) -> list[object] | None:
    """The values of a swept flag, or ``None`` when the text is a single value."""
    if spec.kind not in _SWEEPABLE or (spec.kind == "model" and text.strip().startswith("{")):
        return None
    match = _RANGE_RE.fullmatch(text)
    if match:
        lo, hi, step = int(match[1]), int(match[2]), int(match[3] or 1)
        if lo > hi or step <= 0 or (hi - lo) // step + 1 > MAX_VALUES:
            raise InputError("bad_sweep_range", spec.key, text)
        return list(range(lo, hi + 1, step))
    if ".." in text:
        raise InputError("bad_sweep_range", spec.key, text)
    if "," in text:
        parts = [part for part in (p.strip() for p in text.split(",")) if part]
        if len(parts) > MAX_VALUES:
            raise InputError("bad_sweep_range", spec.key, text)
        return [flag_value(spec, part) for part in parts]
    return None


def _configure(parser: argparse.ArgumentParser, msg: Messages) -> None:
    parser.usage = usage("sweep", parser.prog)
    add_request_arguments(
        parser, msg, field_specs("plan"), help_for=lambda spec: sweep_field_help(spec, msg)
    )
    parser.add_argument("--csv", action="store_true", help=msg.text("opt.csv"))


def plan_sweep(args: argparse.Namespace) -> tuple[str, list[object], list[JsonObject], str, float]:
    """(swept key, values, responses, command, margin): every run, in order."""
    specs = field_specs("plan")
    swept = []
    for spec in specs:
        text = getattr(args, spec.key, None)
        if isinstance(text, str):
            values = sweep_values(spec, text)
            if values is not None:
                swept.append((spec, values))
    if len(swept) != 1:
        raise InputError("sweep_needs_one_field", ",".join(s.key for s, _ in swept) or None, None)
    spec, values = swept[0]
    setattr(args, spec.key, None)
    base = build_request(args, specs)
    if not isinstance(base, dict):  # the code calc gives such a request
        raise InputError("request_not_object", None, type(base).__name__)
    command = "plan" if "dataset_tokens" in base else "estimate"
    from ..fields import BY_KEY, with_changes
    from ..memory import estimate_dict
    from ..plan import plan_dict
    from ..request import check_number

    margin = BY_KEY["safety_margin"].default
    assert isinstance(margin, float), margin
    responses = []
    for value in values:
        request = with_changes(base, {spec.key: value})  # a behaviour may sit in "behaviour"
        if command == "plan":
            # a refused run lists every bad field, as the single run does
            responses.append(_computed("plan", plan_dict, request))
            continue
        gpu = request.pop("gpu", None)
        if "safety_margin" in request:
            margin = float(check_number("safety_margin", request.pop("safety_margin"), 0.0, 1.0))
        est = _computed("estimate", estimate_dict, request)
        if gpu is not None:
            from ..gpus import get_gpu

            card = get_gpu(gpu, "gpu")
            est = {
                "estimate": est,
                "verdict": estimate_verdicts(est, [card], margin)[card.id],
                "gpu": card.id,
            }
        responses.append(est)
    return spec.key, values, responses, command, margin


def _memory(response: JsonObject, command: str) -> JsonObject:
    if command == "plan":
        memory: JsonObject = response["memory"]
        return memory
    estimate: JsonObject = response.get("estimate", response)
    return estimate


def _verdict(response: JsonObject, command: str) -> tuple[str, JsonObject] | None:
    if command == "plan":
        return response["gpu"], response["fits"][response["gpu"]]
    if "verdict" in response:
        return response["gpu"], response["verdict"]
    return None


def _run(args: argparse.Namespace, ctx: Context) -> int:
    key, values, responses, command, margin = plan_sweep(args)
    for response in responses:  # --config --lenient: the values replaced, with every run
        add_config_warnings(response, args)
    if ctx.mode != "json":
        io.write(config_warning_lines(args, ctx.msg), sys.stderr)
    if ctx.mode == "json":
        # an estimate run is the estimate's own response (a verdict, when asked, beside it)
        io.emit_json(
            {
                "field": key,
                "command": command,
                "runs": [
                    {"value": v, "response": r} for v, r in zip(values, responses, strict=True)
                ],
            }
        )
    elif ctx.mode == "csv":
        io.write(render_csv(key, values, responses, command))
    else:
        io.write(render_table(key, values, responses, command, ctx.msg, margin))
    return 0


def _row(key: str, value: object, response: JsonObject, command: str) -> JsonObject:
    est = _memory(response, command)
    row = {
        key: value if not isinstance(value, dict) else "hf_config",
        "peak_allocated_bytes": est["peak_allocated_bytes"],
        "peak_reserved_bytes": est["peak_reserved_bytes"],
        "device_total_bytes": est["device_total_bytes"],
        "peak_phase": est["peak_phase"],
    }
    verdict = _verdict(response, command)
    if verdict is not None:
        gpu, entry = verdict
        row.update({"gpu": gpu, "fits": entry["fits"], "required_bytes": entry["required_bytes"]})
    if command == "plan":
        row.update(
            {"time_hours": response["time_hours"], "cost_usd": response["cost_usd"]["total"]}
        )
    return row


def render_csv(key: str, values: list[object], responses: list[JsonObject], command: str) -> str:
    import csv  # here, not at the top: every start of the CLI imports this module
    import io as _io

    rows = [_row(key, v, r, command) for v, r in zip(values, responses, strict=True)]
    out = _io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def render_table(
    key: str,
    values: list[object],
    responses: list[JsonObject],
    command: str,
    msg: Messages,
    margin: float,
) -> str:
    fmt = Formatter(msg)
    header = [
        msg.label(key),
        msg.text("table.allocated"),
        msg.text("table.reserved"),
        msg.text("table.on_device"),
        msg.text("table.peak_phase"),
    ]
    body = []
    for value, response in zip(values, responses, strict=True):
        est = _memory(response, command)
        cells = [
            str(value) if not isinstance(value, float) else f"{value:g}",
            fmt.gib(est["peak_allocated_bytes"]),
            fmt.gib(est["peak_reserved_bytes"]),
            fmt.gib(est["device_total_bytes"]),
            msg.option("phase", str(est["peak_phase"])),
        ]
        verdict = _verdict(response, command)
        if verdict is not None:
            gpu, entry = verdict
            cells.append(
                verdict_text(
                    entry,
                    fmt,
                    response.get("safety_margin", margin) if command == "plan" else margin,
                ).split(" (")[0]
            )
        if command == "plan":
            cells += [fmt.hours(response["time_hours"]), fmt.usd(response["cost_usd"]["total"])]
        body.append(cells)
    verdicts = [v for v in (_verdict(r, command) for r in responses) if v is not None]
    if verdicts:
        gpu = verdicts[0][0]
        card = gpu_name(gpu) if command != "plan" or key != "gpu" else msg.label("gpu")
        header.append(f"{msg.text('table.verdict')} ({card})")
    if command == "plan":
        header += [msg.text("table.time"), msg.text("table.cost")]
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    lines = [
        "  ".join(
            cell.ljust(w) if i == 0 or i >= 4 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(r, widths, strict=True))
        ).rstrip()
        for r in [header, *body]
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines) + "\n"


register(Command("sweep", "cmd.sweep", _configure, _run, order=30))
