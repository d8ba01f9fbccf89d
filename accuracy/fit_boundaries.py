"""calc's verdict against published fit boundaries (validation/fit_boundaries.csv).

:func:`judge_row` judges every row with the verdict the site
uses (:func:`calc.recommend.judge` of :func:`calc.recommend.need_of`) on the row's card and
prints, per row, the verdict at the published length, the verdict 25 % above it, calc's
largest length that is not ``does_not_fit`` and whether the verdict agrees with the
publication, then the share of rows that agree and the median and p90 of ``|error|`` of
calc's largest length on the ``max_fits`` rows.

Today's verdicts run each row's request under the stack its source ran where that was
mapped after first contact (``validation/fit_boundaries_stacks.csv``: the profile of the
library generation and the behaviour keys the stack sets, keyed by ``source_section``;
:func:`row_request`); the recorded first contact keeps the request as written.

A row agrees when:

- ``max_fits`` (the largest length the publication fitted; 25 % more ran out of memory or was
  not reached): the verdict at the length is not ``does_not_fit`` and 25 % above it is not
  ``fits``;
- ``fits`` (a run that fitted): the verdict at the length is not ``does_not_fit``;
- ``oom`` (a run that ran out of memory): the verdict at the length is not ``fits``.

:func:`record_first_contact` fills the first-contact columns of rows that have none (with the
commit calc is at): rows already judged keep their columns (first contact is history).
``python -m benchmarks.validate_fit_boundaries`` prints it all.
"""

from __future__ import annotations

import csv
import json
import statistics
import subprocess
from dataclasses import dataclass
from pathlib import Path

from accuracy.stats import percentile
from calc.errors import CalcError
from calc.gpus import gpu_ids, get_gpu
from calc.memory import estimate_dict
from calc.recommend import judge, largest_fitting, need_of

CSV = Path(__file__).resolve().parent.parent / "validation" / "fit_boundaries.csv"
STACKS = CSV.parent / "fit_boundaries_stacks.csv"
ABOVE = 1.25
"""The length, relative to a ``max_fits`` row's, that the publication did not fit."""

FIRST_CONTACT = (
    "judged_at_commit",
    "first_contact_verdict",
    "first_contact_verdict_above",
    "first_contact_largest_seq_len",
    "first_contact_error",
    "first_contact_agrees",
)


@dataclass(frozen=True)
class Judged:
    row_id: str
    outcome: str
    seq_len: int
    verdict: str
    verdict_above: str
    largest: int | None
    agrees: bool

    @property
    def error(self) -> float | None:
        """calc's largest possible length against the published largest (``max_fits`` rows)."""
        if self.outcome != "max_fits" or self.largest is None:
            return None
        return self.largest / self.seq_len - 1


def memory_bytes(row: dict[str, str]) -> int:
    """The row's card: the catalogue's memory where the card is in it, else the stated GiB."""
    if row["gpu"] in gpu_ids():
        return get_gpu(row["gpu"]).memory_bytes
    return int(float(row["card_memory_gib"]) * 2**30)


def verdict(request: dict, seq_len: int, card: int) -> str:
    try:
        estimate = estimate_dict({**request, "seq_len": seq_len})
    except CalcError:
        return "does_not_fit"
    return judge(need_of(estimate), card).state


def min_device_verdict(request: dict, seq_len: int, card: int) -> str:
    """The verdict the site gives with :data:`calc.memory.SIMULATED_VERDICT` on, whatever the
    switch: :func:`calc.recommend.need_of` of the estimate with ``min_device_bytes`` and its
    calibrated range (:func:`calc.memory.with_min_device`)."""
    from calc.memory import estimate_request, with_min_device
    from calc.request import parse_estimate_request

    try:
        req = parse_estimate_request({**request, "seq_len": seq_len})
        estimate = with_min_device(req, estimate_request(req)).to_dict()
    except CalcError:
        return "does_not_fit"
    return judge(need_of(estimate), card).state


def stacks(path: Path = STACKS) -> dict[str, tuple[str, dict[str, object]]]:
    """``{source_section: (framework, behaviour keys)}``: the stack a source's rows ran, named
    after first contact with its evidence (``fit_boundaries_stacks.csv``)."""
    if not path.exists():
        return {}
    with path.open(newline="") as handle:
        return {
            r["source_section"]: (r["framework"], json.loads(r["behaviour"] or "{}"))
            for r in csv.DictReader(handle)
        }


def row_request(row: dict[str, str]) -> dict:
    """The row's ``calc_request`` under its source's stack where :func:`stacks` names one: that
    framework, and the stack's behaviour keys the request does not state (a key the request
    states stays as stated)."""
    request: dict = json.loads(row["calc_request"])
    stack = stacks().get(row["source_section"])
    if stack is not None:
        framework, behaviour = stack
        request["framework"] = framework
        for key, value in behaviour.items():
            request.setdefault(key, value)
    return request


def agrees(outcome: str, at: str, above: str) -> bool:
    if outcome == "max_fits":
        return at != "does_not_fit" and above != "fits"
    if outcome == "fits":
        return at != "does_not_fit"
    return at != "fits"


def judge_row(row: dict[str, str]) -> Judged:
    request = row_request(row)
    card = memory_bytes(row)
    seq_len = int(row["seq_len"])
    at = verdict(request, seq_len, card)
    above = verdict(request, int(seq_len * ABOVE), card)
    largest = largest_fitting(
        lambda n: verdict(request, n, card) != "does_not_fit", seq_len, 4 * seq_len
    )
    outcome = row["outcome"]
    return Judged(row["id"], outcome, seq_len, at, above, largest, agrees(outcome, at, above))


def load() -> list[dict[str, str]]:
    with CSV.open(newline="") as handle:
        return list(csv.DictReader(handle))


EXTRAPOLATED = "extrapolated, not each one measured"
"""What a row's ``notes`` say when its publisher drew the length from a line through a few
runs rather than running it on that card (unsloth.ai/blog/long-context: "Numbers are
extrapolated based on experiments"): judged like the others, never calibrated on."""


def extrapolated(row: dict[str, str]) -> bool:
    return EXTRAPOLATED in row["notes"]


def summary(judged: list[Judged]) -> str:
    agree = sum(j.agrees for j in judged)
    errs = [abs(j.error) for j in judged if j.error is not None]
    text = f"fit boundaries: verdict agrees on {agree} of {len(judged)} ({agree / len(judged):.0%})"
    if errs:
        text += (
            f"; largest length |error| (max_fits rows, n={len(errs)}): median "
            f"{statistics.median(errs):.1%}, p90 {percentile(errs, 90):.1%}"
        )
    return text


def record_first_contact(rows: list[dict[str, str]], judged: list[Judged]) -> None:
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    for row, j in zip(rows, judged, strict=True):
        if row.get("judged_at_commit"):
            continue
        row.update(
            {
                "judged_at_commit": commit,
                "first_contact_verdict": j.verdict,
                "first_contact_verdict_above": j.verdict_above if j.outcome == "max_fits" else "",
                "first_contact_largest_seq_len": "" if j.largest is None else str(j.largest),
                "first_contact_error": "" if j.error is None else f"{j.error:.6f}",
                "first_contact_agrees": "yes" if j.agrees else "no",
            }
        )
    fields = list(rows[0])
    fields += [f for f in FIRST_CONTACT if f not in fields]
    with CSV.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)


def first_contact_counts(rows: list[dict[str, str]]) -> tuple[int, int]:
    """The recorded first-contact agreement: rows that agreed, rows judged."""
    judged = [r for r in rows if r.get("first_contact_agrees")]
    return sum(r["first_contact_agrees"] == "yes" for r in judged), len(judged)


def first_contact_summary(rows: list[dict[str, str]]) -> str:
    agree, judged = first_contact_counts(rows)
    return f"first contact: verdict agreed on {agree} of {judged}"


def figures() -> dict[str, object]:
    """What the methodology page publishes: rows, first-contact and today's agreement (also
    over the rows a publisher ran, :func:`extrapolated` ones left out), the median and p90 of
    today's ``|error|`` of the largest length, the commit(s) judged at."""
    rows = load()
    judged = [judge_row(r) for r in rows]
    errs = [abs(j.error) for j in judged if j.error is not None]
    fc_agree, fc_rows = first_contact_counts(rows)
    measured = [j for j, r in zip(judged, rows, strict=True) if not extrapolated(r)]
    return {
        "rows": len(rows),
        "first_contact_agree": fc_agree,
        "first_contact_rows": fc_rows,
        "agree": sum(j.agrees for j in judged),
        # the rows a publisher ran, its extrapolated lengths left out
        "measured_rows": len(measured),
        "measured_agree": sum(j.agrees for j in measured),
        "median": statistics.median(errs),
        "p90": percentile(errs, 90),
        "commits": sorted({r["judged_at_commit"][:10] for r in rows if r.get("judged_at_commit")}),
    }
