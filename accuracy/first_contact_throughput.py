"""First contact for the time model: ``calc`` judged on throughput sources it had never compared.

The design is :mod:`accuracy.first_contact`'s (memory), for tokens per second per GPU.
``validation/first_contact_throughput.csv`` holds published throughput or step-time figures of
sources that ``measured_throughput.csv`` does not use, each with its settings, the source's
address and commit, the figure as tokens/s per GPU (``derivation`` says how, when the source
publishes a step time), and

- ``calc_request``: the row as a ``calc`` plan request (JSON), written from the source's stated
  settings and its library's documented defaults of that version;
- ``calc_not_covered``: a reason id when the request contract cannot express the row (then
  ``calc_request`` is empty);
- ``today_request_changes``, ``reading_note``: keys merged onto ``calc_request`` for today's
  judgement where a setting was read wrong at first contact (the note says what and where it
  was read); the recorded columns keep what was said;
- ``judged_at_commit``, ``first_contact_predicted_tokens_per_second_per_gpu``,
  ``first_contact_error``: ``calc``'s steady-state tokens/s per GPU for the row (the plan's
  ``time.tokens_per_second_per_gpu``) and ``(predicted - measured) / measured``, recorded once by
  :func:`record` at the commit named, and never rewritten.

A row whose figure is a whole run's wall time (``notes`` holds
``whole_run_time_includes_startup``) is judged like the others: calc's steady-state rate is
what a reader would compare it with, and the gap says how much the run's start-up, evaluation
and checkpoints took.

The early sources were judged before the time model was mended (attention kernels, fp32 paths,
sustained clocks, collective latency); :data:`AFTER_FIXES` gathers the rows recorded since the
first row judged at :data:`FIXES_IN_AT`, the first commit at which sources were judged with those
mends in. The file is only appended to, so its order is the order of recording.

``python -m accuracy.first_contact_throughput --record`` records the rows whose judged columns
are empty.
"""

from __future__ import annotations

import csv
import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

from accuracy import DATA_DIR
from accuracy.first_contact import ALL, FirstContact, head_commit, recorded_first_contacts, stats
from accuracy.first_contact import columns as _columns
from accuracy.first_contact import load_rows as _load_rows
from calc.errors import CalcError
from calc.plan import PlanOptions, Planner, parse_plan_request
from calc.request import EstimateRequest
from calc.timing import StepBreakdown, TimeEstimate, attention_dispatch

CSV_PATH = DATA_DIR / "first_contact_throughput.csv"

AFTER_FIXES = "after_fixes"
"""Key of :func:`summary` and :func:`now_beside_first` for the rows recorded after the model's
mends (see the module's docstring)."""

FIXES_IN_AT = "62d30fed3b58b3f6d28bd0f56a1b9ca214363b21"

JUDGED_COLUMNS = (
    "judged_at_commit",
    "first_contact_predicted_tokens_per_second_per_gpu",
    "first_contact_error",
)


def load_rows(path: Path = CSV_PATH) -> list[dict]:
    return _load_rows(path)


def columns(path: Path = CSV_PATH) -> list[str]:
    return _columns(path)


def read_request(request: dict) -> tuple[EstimateRequest, PlanOptions]:
    """A row's plan request as calc reads it (``dataset_tokens`` defaults to 10^9: the rate does
    not depend on it)."""
    return parse_plan_request({"dataset_tokens": 1e9, **request})


def time_estimate(request: dict) -> tuple[TimeEstimate, EstimateRequest, PlanOptions]:
    """calc's steady-state time of a plan request (:func:`read_request`), with the request and
    options it was read as."""
    req, opts = read_request(request)
    return Planner(req, opts).time(opts.gpu, req.num_gpus, req.sharding.value), req, opts


def predict(request: dict) -> float:
    """calc's steady-state tokens/s per GPU for a plan request (:func:`time_estimate`)."""
    return time_estimate(request)[0].tokens_per_second_per_gpu


@dataclass(frozen=True)
class Judgement:
    """One row against ``calc`` as it is now; ``covered`` False comes with ``reason``."""

    row_id: str
    source: str
    method: str
    measured: float
    predicted: float = 0.0
    error: float = 0.0
    covered: bool = True
    reason: str = ""


def judge(row: dict) -> Judgement:
    """``calc``'s tokens/s per GPU for ``row`` today, or why the row is not covered."""
    base = {"row_id": row["id"], "source": row["source"], "method": row["method"]}
    measured = float(row["tokens_per_second_per_gpu"] or 0.0)
    if row["calc_not_covered"]:
        return Judgement(**base, measured=measured, covered=False, reason=row["calc_not_covered"])
    request = today_request(row)
    try:
        predicted = predict(request)
    except CalcError as err:
        return Judgement(**base, measured=measured, covered=False, reason="calc_error:" + err.code)
    return Judgement(
        **base, measured=measured, predicted=predicted, error=(predicted - measured) / measured
    )


def first_contacts(rows: list[dict] | None = None) -> list[FirstContact]:
    rows = load_rows() if rows is None else rows
    return recorded_first_contacts(rows, "first_contact_predicted_tokens_per_second_per_gpu")


def after_fixes(rows: list[dict]) -> list[dict]:
    """The rows recorded from the first one judged at :data:`FIXES_IN_AT` on, those calc could
    not express included (none when no row was judged there)."""
    start = next((i for i, r in enumerate(rows) if r["judged_at_commit"] == FIXES_IN_AT), None)
    return [] if start is None else rows[start:]


def summary(rows: list[dict] | None = None) -> dict[str, dict]:
    """Recorded first-contact figures per source, over all rows (key :data:`ALL`) and over the
    rows recorded after the model's mends (key :data:`AFTER_FIXES`), each with ``not_covered``
    (rows calc could not express); :data:`ALL` also carries ``median_of_sources`` (one vote per
    source)."""
    rows = load_rows() if rows is None else rows
    judged = first_contacts(rows)
    out: dict[str, dict] = {}
    for source in sorted({r["source"] for r in rows}):
        errs = [j.error for j in judged if j.source == source]
        out[source] = {
            **stats(errs),
            "not_covered": sum(1 for r in rows if r["source"] == source and r["calc_not_covered"]),
        }
    out[ALL] = {
        **stats([j.error for j in judged]),
        "not_covered": sum(1 for r in rows if r["calc_not_covered"]),
        "median_of_sources": statistics.median(v["median"] for k, v in out.items() if v["count"]),
    }
    late = after_fixes(rows)
    late_ids = {r["id"] for r in late}
    out[AFTER_FIXES] = {
        **stats([j.error for j in judged if j.row_id in late_ids]),
        "not_covered": sum(1 for r in late if r["calc_not_covered"]),
    }
    return out


def today_judgements(rows: list[dict]) -> list[Judgement]:
    """Today's judgement of each covered row that has a recorded first contact."""
    recorded = {r["id"] for r in rows if r["first_contact_error"]}
    return [j for j in (judge(r) for r in rows if r["id"] in recorded) if j.covered]


def today_request(row: dict) -> dict:
    """The row's request as judged today: ``calc_request`` with ``today_request_changes``
    merged onto it."""
    request = json.loads(row["calc_request"])
    if row.get("today_request_changes"):
        request.update(json.loads(row["today_request_changes"]))
    return request


def card_of(row: dict) -> str:
    """The catalogue card a row's request runs on today (its ``gpu``, with
    ``today_request_changes``); "" for a row without a request."""
    if not row["calc_request"]:
        return ""
    return str(today_request(row).get("gpu", ""))


def _lean(groups: dict[str, list[Judgement]]) -> dict[str, dict]:
    """Per group of today's judgements: ``count``, ``sources``, ``median_signed`` (positive:
    calc too fast) and ``median`` of |error|."""
    return {
        key: {
            "count": len(js),
            "sources": len({j.source for j in js}),
            "median_signed": statistics.median(j.error for j in js),
            "median": statistics.median(abs(j.error) for j in js),
        }
        for key, js in sorted(groups.items())
    }


def _grouped(rows: list[dict], key_of: dict[str, str]) -> dict[str, dict]:
    """:func:`_lean` of today's judgements grouped by ``key_of[row id]`` (rows keyed "" left out)."""
    groups: dict[str, list[Judgement]] = {}
    for j in today_judgements(rows):
        if key_of[j.row_id]:
            groups.setdefault(key_of[j.row_id], []).append(j)
    return _lean(groups)


def by_card(rows: list[dict] | None = None) -> dict[str, dict]:
    """Today's figures on the recorded rows, per card of the catalogue (the ``gpu`` of each
    row's request): ``count``, ``sources``, ``median_signed`` (positive: calc too fast) and
    ``median`` of |error|. Where one card's rows lean one way, that is the bias a reader of
    that card should expect, and how many sources it rests on."""
    rows = load_rows() if rows is None else rows
    return _grouped(rows, {r["id"]: card_of(r) for r in rows})


WIDE_HEAD_DIM = 128
"""The widest head dim of FlashAttention-2's published panels (:data:`calc.timing.FLASH2_TABLES`
reads a wider head at the 128 panel): the edge between the two widths of :func:`by_attention`."""


def attention_group(row: dict) -> str:
    """The attention calc prices a covered row's request as (:func:`calc.timing.attention_dispatch`):
    its kernel and whether its widest head is above :data:`WIDE_HEAD_DIM` ("flash <=128",
    "cudnn >128"); "" for a row without a request or on a card without CUDA."""
    if not row["calc_request"] or row["calc_not_covered"]:
        return ""
    try:
        req, opts = read_request(today_request(row))
    except CalcError:
        return ""
    found = attention_dispatch(req, opts.gpu)
    if found is None:
        return ""
    backend, head_dim = found
    return f"{backend} {'>' if head_dim > WIDE_HEAD_DIM else '<='}{WIDE_HEAD_DIM}"


def by_attention(rows: list[dict] | None = None) -> dict[str, dict]:
    """Today's figures on the recorded rows on CUDA cards, per attention calc prices
    (:func:`attention_group`), as :func:`by_card` gives them per card: where the rows of one
    kernel and head width lean one way, calc's time for such a setup leans the same way."""
    rows = load_rows() if rows is None else rows
    return _grouped(rows, {r["id"]: attention_group(r) for r in rows})


def now_beside_first(rows: list[dict] | None = None) -> dict[str, dict]:
    """Today's figures on the rows that have a recorded first contact, per source and overall."""
    rows = load_rows() if rows is None else rows
    today = today_judgements(rows)
    out = {
        source: stats([j.error for j in today if j.source == source])
        for source in sorted({r["source"] for r in rows})
    }
    out[ALL] = stats([j.error for j in today])
    late_ids = {r["id"] for r in after_fixes(rows)}
    out[AFTER_FIXES] = stats([j.error for j in today if j.row_id in late_ids])
    return out


HIDDEN_BINS = (0.05, 0.2, 0.5)
"""Upper edges of the bins of hidden communication (:func:`hidden_share`) by which
:func:`multi_gpu_lean` groups the rows; the last bin holds the rest."""


def hidden_share(step: StepBreakdown) -> float:
    """The collective seconds calc hides under compute, over the step's matmul seconds:
    ``(communication - exposed_communication) / compute`` (:class:`calc.timing.StepBreakdown`)."""
    if step.compute <= 0:
        return 0.0
    return max(0.0, step.communication - step.exposed_communication) / step.compute


def hidden_bin(share: float) -> str:
    """The bin of :data:`HIDDEN_BINS` a share falls in, as its range ("0.05-0.2", "0.5+")."""
    low = 0.0
    for edge in HIDDEN_BINS:
        if share < edge:
            return f"{low:g}-{edge:g}"
        low = edge
    return f"{low:g}+"


def today_steps(rows: list[dict] | None = None) -> list[dict]:
    """Today's step of every covered row that has a recorded first contact: its ``id``,
    ``source``, ``request``, ``num_gpus``, whether it runs on ``one_server``, the
    ``sharding``, ``measured`` and ``predicted`` tokens/s per GPU, the signed ``error`` and
    the :func:`hidden_share` of its step."""
    rows = load_rows() if rows is None else rows
    out = []
    for row in rows:
        if not row["first_contact_error"] or row["calc_not_covered"]:
            continue
        request = today_request(row)
        try:
            t, req, opts = time_estimate(request)
        except CalcError:
            continue
        measured = float(row["tokens_per_second_per_gpu"])
        out.append(
            {
                "id": row["id"],
                "source": row["source"],
                "request": request,
                "num_gpus": req.num_gpus,
                "one_server": req.num_gpus <= opts.gpus_per_node,
                "sharding": req.sharding.value,
                "measured": measured,
                "predicted": t.tokens_per_second_per_gpu,
                "error": t.tokens_per_second_per_gpu / measured - 1,
                "hidden": hidden_share(t.breakdown),
            }
        )
    return out


SHARDING_ORDER = ("zero3", "zero2", "zero1", "ddp")
"""The shardings :func:`multi_gpu_lean` reports, in its order."""


def multi_gpu_lean(steps: list[dict] | None = None) -> dict[str, dict]:
    """Today's figures (:func:`stats`) on the recorded rows that run on several GPUs of one
    server, per sharding and bin of hidden communication (key ``"zero3 0.05-0.2"``), and on
    the one-GPU rows (key ``"one_gpu"``): where calc's multi-GPU estimate leans, and how that
    grows with what it counts as hidden by overlap."""
    steps = today_steps() if steps is None else steps
    groups: dict[str, list[float]] = {}
    for s in steps:
        if s["num_gpus"] > 1 and s["one_server"] and s["sharding"] in SHARDING_ORDER:
            key = f"{s['sharding']} {hidden_bin(s['hidden'])}"
            groups.setdefault(key, []).append(s["error"])
    bins = [hidden_bin(low) for low in (0.0, *HIDDEN_BINS)]
    keys = [f"{sharding} {b}" for sharding in SHARDING_ORDER for b in bins]
    out = {k: stats(groups[k]) for k in keys if k in groups}
    out["one_gpu"] = stats([s["error"] for s in steps if s["num_gpus"] == 1])
    return out


PAIR_APART = (
    "num_gpus",
    "sharding",
    "sharding_engine",
    "gpus_per_node",
    "network",
    "gradient_accumulation_steps",
)
"""Request keys two rows of one source may differ in and still be one setup at two GPU counts
(:func:`scaling_pairs`)."""


def scaling_pairs(steps: list[dict] | None = None) -> list[dict]:
    """Each recorded row on several GPUs beside the one-GPU row of the same source and setup
    (the request without :data:`PAIR_APART`): ``measured`` and ``predicted`` ratios of tokens/s
    per GPU (several over one) and ``error`` = predicted ratio over measured - 1. The one-GPU
    error cancels: what is left is what the GPU count costs that calc does not count."""
    steps = today_steps() if steps is None else steps
    groups: dict[tuple[str, str], list[dict]] = {}
    for s in steps:
        setup = {k: v for k, v in s["request"].items() if k not in PAIR_APART}
        groups.setdefault((s["source"], json.dumps(setup, sort_keys=True)), []).append(s)
    out = []
    for members in groups.values():
        ones = [s for s in members if s["num_gpus"] == 1]
        if not ones:
            continue
        one = ones[0]
        for s in members:
            if s["num_gpus"] == 1:
                continue
            measured = s["measured"] / one["measured"]
            predicted = s["predicted"] / one["predicted"]
            out.append(
                {
                    "id": s["id"],
                    "one": one["id"],
                    "num_gpus": s["num_gpus"],
                    "sharding": s["sharding"],
                    "measured": measured,
                    "predicted": predicted,
                    "error": predicted / measured - 1,
                }
            )
    return out


def record(path: Path = CSV_PATH) -> int:
    """Fill the judged columns of covered rows that have none, at the current commit; a judged
    row is never touched. Returns the number of rows recorded."""
    commit = head_commit()
    rows, cols = load_rows(path), columns(path)
    done = 0
    for row in rows:
        if row["first_contact_error"] or row["calc_not_covered"]:
            continue
        j = judge(row)
        if not j.covered:
            row["calc_not_covered"] = j.reason
            continue
        row["judged_at_commit"] = commit
        row["first_contact_predicted_tokens_per_second_per_gpu"] = f"{j.predicted:.1f}"
        row["first_contact_error"] = f"{j.error:.6f}"
        done += 1
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, cols, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return done


if __name__ == "__main__":
    if sys.argv[1:] == ["--record"]:
        print(f"recorded {record()} rows")
    else:
        for source, f in summary().items():
            print(source, json.dumps(f))
