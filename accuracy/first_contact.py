"""First contact: ``calc`` judged on measurement sources it had never seen, before any change.

In-sample error flatters the model (its constants were fitted on those rows) and
leave-one-source-out only judges behaviours the model already describes. The honest figure
for a new user's stack is the error on a source that no part of the project had looked at
when ``calc`` was asked. ``validation/first_contact_peaks.csv`` holds such rows: the columns
of ``measured_peaks.csv`` (what the source published and the settings it states), plus

- ``calc_request``: the row mapped onto a ``calc`` estimate request (JSON), written when the
  row was added, from the source's stated settings and its library's documented defaults of
  that version (the ``framework`` profile its stack matches; ``hf-trainer`` for the HF Trainer
  and the tools built on it);
- ``calc_not_covered``: a reason id when the request contract cannot express the row (then
  ``calc_request`` is empty), or when the measurement is below what its stated setup must hold;
- ``judged_at_commit``, ``first_contact_predicted_gib``, ``first_contact_error``: ``calc``'s
  prediction for the row and the signed error ``(predicted - measured) / measured``, recorded
  once by :func:`record` at the commit named, and never rewritten.

How later work treats these rows: the first-contact columns are history and never change
(:func:`record` fills only empty ones). A row may join the fits and the leave-one-source-out
set later, as a copy in ``measured_peaks.csv``; from then on its source counts as seen, and
its first-contact figure stays what it was. :func:`judge` recomputes today's prediction beside
the recorded one, so progress on these sources shows without touching the record.

``python -m accuracy.first_contact --record`` records the rows whose judged columns are empty.
"""

from __future__ import annotations

import csv
import json
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from accuracy import DATA_DIR, ROOT
from accuracy.memory import configured_floor_bytes
from accuracy.stats import percentile
from calc import memory
from calc.errors import CalcError
from calc.fields import BY_KEY

CSV_PATH = DATA_DIR / "first_contact_peaks.csv"
STACKS_PATH = DATA_DIR / "first_contact_stacks.csv"

JUDGED_COLUMNS = ("judged_at_commit", "first_contact_predicted_gib", "first_contact_error")
EXTRA_COLUMNS = ("calc_request", "calc_not_covered", *JUDGED_COLUMNS)
UNIT_BYTES = {"GB": 10**9, "GiB": 2**30}
GIB = 2**30


def load_rows(path: Path = CSV_PATH) -> list[dict]:
    """The CSV's rows as dicts (the measured columns, then :data:`EXTRA_COLUMNS`)."""
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def columns(path: Path = CSV_PATH) -> list[str]:
    with open(path, newline="", encoding="utf-8") as handle:
        return next(csv.reader(handle))


def metric(text: str) -> str:
    """Which response field a ``memory_metric`` text is compared with, by the rule of
    ``accuracy/memory.py``: allocated or active -> ``allocated``; nvidia-smi / NVML ->
    ``device``; reserved, or a statistic not stated -> ``reserved``."""
    low = text.lower()
    if "nvidia-smi" in low or "nvml" in low:
        return "device"
    if "not stated" in low:
        return "reserved"
    if "allocated" in low or "active" in low:
        return "allocated"
    return "reserved"


def measured_bytes(row: dict) -> int:
    """The published peak per GPU in bytes: a figure summed over the GPUs (``per_gpu`` "no (sum
    ...") is divided by ``num_gpus``."""
    value = float(row["peak_value"]) * UNIT_BYTES[row["peak_unit"]]
    if row["per_gpu"].startswith("no (sum"):
        value /= int(row["num_gpus"])
    return int(round(value))


FIELD = {
    "allocated": "peak_allocated_bytes",
    "reserved": "peak_reserved_bytes",
    "device": "device_total_bytes",
}


@dataclass(frozen=True)
class Judgement:
    """One row against ``calc`` as it is now. ``covered`` False comes with ``reason``."""

    row_id: str
    source: str
    method: str
    metric: str
    measured_bytes: int
    predicted_bytes: int = 0
    error: float = 0.0
    covered: bool = True
    reason: str = ""


def stacks(path: Path = STACKS_PATH) -> dict[str, str]:
    """``{source: framework}``: the profile of the stack a first-contact source ran, named once
    a profile of that library and generation exists (``first_contact_stacks.csv``, with the
    evidence). A recorded ``calc_request`` names the profile that was closest when it was
    judged; :func:`judge` runs today's estimate under the source's own profile instead. The
    keys the request states stay as stated (a profile never changes a given key)."""
    if not path.exists():
        return {}
    with open(path, newline="", encoding="utf-8") as handle:
        return {r["source"]: r["framework"] for r in csv.DictReader(handle)}


def judge(row: dict, stack: dict[str, str] | None = None) -> Judgement:
    """``calc``'s prediction for ``row`` today: the request's field of the row's metric, or the
    reason the row is not covered (the CSV's, or a measurement below the model states or the
    stated setup's floor, :func:`accuracy.memory.configured_floor_bytes`)."""
    base = {
        "row_id": row["id"],
        "source": row["source"],
        "method": row["method"],
        "metric": metric(row["memory_metric"]),
    }
    if row["calc_not_covered"]:
        return Judgement(**base, measured_bytes=0, covered=False, reason=row["calc_not_covered"])
    measured = measured_bytes(row)
    request = json.loads(row["calc_request"])
    request["framework"] = (stacks() if stack is None else stack).get(
        row["source"], request.get("framework", BY_KEY["framework"].default)
    )
    try:
        est = memory.estimate_dict(request)
    except CalcError as err:
        return Judgement(
            **base, measured_bytes=measured, covered=False, reason="calc_error:" + err.code
        )
    if measured < est["model_states_bytes"]:
        return Judgement(
            **base, measured_bytes=measured, covered=False, reason="measured_below_model_states"
        )
    if measured < configured_floor_bytes(request, est):
        return Judgement(
            **base, measured_bytes=measured, covered=False, reason="measured_below_configured_floor"
        )
    predicted = est[FIELD[base["metric"]]]
    return Judgement(
        **base,
        measured_bytes=measured,
        predicted_bytes=predicted,
        error=(predicted - measured) / measured,
    )


@dataclass(frozen=True)
class FirstContact:
    """A row's recorded first contact: what ``calc`` said at ``commit``, never recomputed."""

    row_id: str
    source: str
    method: str
    commit: str
    predicted: float  # in the unit of the CSV's column (GiB here, tokens/s for time)
    error: float


def recorded_first_contacts(rows: list[dict], predicted_column: str) -> list[FirstContact]:
    """The recorded first contacts of the rows that have a recorded error, the prediction read
    from ``predicted_column`` (memory's and time's first-contact CSVs share the other columns)."""
    return [
        FirstContact(
            r["id"],
            r["source"],
            r["method"],
            r["judged_at_commit"],
            float(r[predicted_column]),
            float(r["first_contact_error"]),
        )
        for r in rows
        if r["first_contact_error"]
    ]


def first_contacts(rows: list[dict] | None = None) -> list[FirstContact]:
    """The recorded first contacts of the covered rows (those with a recorded error)."""
    rows = load_rows() if rows is None else rows
    return recorded_first_contacts(rows, "first_contact_predicted_gib")


def stats(errors: list[float]) -> dict:
    """``count``, ``median`` / ``p90`` / ``max`` of ``|error|`` and the ``median_signed`` error
    (fractions)."""
    absolute = [abs(e) for e in errors]
    if not errors:
        return {
            "count": 0,
            "median": float("nan"),
            "p90": float("nan"),
            "max": float("nan"),
            "median_signed": float("nan"),
        }
    return {
        "count": len(errors),
        "median": statistics.median(absolute),
        "p90": percentile(absolute, 90),
        "max": max(absolute),
        "median_signed": statistics.median(errors),
    }


ALL = "all"


def summary(rows: list[dict] | None = None) -> dict[str, dict]:
    """First-contact figures per source (the CSV's ``source``, one publication or one folder of
    example READMEs) and over all rows (key :data:`ALL`), from the recorded errors; each also
    says how many of the source's rows are not covered (``not_covered``). :data:`ALL` adds
    ``median_of_sources``, the median of the sources' medians (one vote per source, so that one
    long table does not outvote the others)."""
    rows = load_rows() if rows is None else rows
    contacts = first_contacts(rows)
    out: dict[str, dict] = {}
    for source in dict.fromkeys(r["source"] for r in rows):
        errs = [c.error for c in contacts if c.source == source]
        out[source] = {
            **stats(errs),
            "not_covered": sum(
                1 for r in rows if r["source"] == source and not r["first_contact_error"]
            ),
        }
    medians = [f["median"] for f in out.values() if f["count"]]
    out[ALL] = {
        **stats([c.error for c in contacts]),
        "not_covered": sum(1 for r in rows if not r["first_contact_error"]),
        "median_of_sources": statistics.median(medians) if medians else float("nan"),
    }
    return out


def now_beside_first(rows: list[dict] | None = None) -> dict[str, dict]:
    """Per source, today's figures for the rows first contact covered (``calc`` as it is now),
    to show what later changes did to these sources; the record itself stays."""
    rows = load_rows() if rows is None else rows
    recorded = {c.row_id for c in first_contacts(rows)}
    stack = stacks()
    today = [j for j in (judge(r, stack) for r in rows if r["id"] in recorded) if j.covered]
    return {
        source: stats([j.error for j in today if j.source == source])
        for source in dict.fromkeys(r["source"] for r in rows)
    } | {ALL: stats([j.error for j in today])}


def head_commit() -> str:
    """The commit ``calc`` is judged at: ``git rev-parse HEAD`` of this checkout."""
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()


def record(path: Path = CSV_PATH, commit: str | None = None) -> int:
    """Judge every row whose ``judged_at_commit`` is empty and write its first contact (a
    reason found now, such as a floor, goes to ``calc_not_covered``); rows already judged are
    left exactly as they are. Returns the number of rows recorded."""
    commit = commit or head_commit()
    rows = load_rows(path)
    header = columns(path)
    done = 0
    for row in rows:
        if row["judged_at_commit"]:
            continue
        j = judge(row, {})  # the request as written, whatever profile exists later
        row["judged_at_commit"] = commit
        if j.covered:
            row["first_contact_predicted_gib"] = f"{j.predicted_bytes / GIB:.4f}"
            row["first_contact_error"] = f"{j.error:.6f}"
        elif not row["calc_not_covered"]:
            row["calc_not_covered"] = j.reason
        done += 1
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, header, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return done


if __name__ == "__main__":
    if sys.argv[1:] != ["--record"]:
        print("usage: python -m accuracy.first_contact --record", file=sys.stderr)
        raise SystemExit(2)
    print(f"recorded {record()} rows")
