"""calc's verdict against published fit boundaries (validation/fit_boundaries.csv).

``python -m benchmarks.validate_fit_boundaries`` judges every row with the verdict the site
uses (:func:`calc.recommend.judge` of :func:`calc.recommend.need_of`) on the row's card and
prints, per row, the verdict at the published length, the verdict 25 % above it, calc's
largest length that is not ``does_not_fit`` and whether the verdict agrees with the
publication, then the share of rows that agree and the median and p90 of ``|error|`` of
calc's largest length on the ``max_fits`` rows.

A row agrees when:

- ``max_fits`` (the largest length the publication fitted; 25 % more ran out of memory or was
  not reached): the verdict at the length is not ``does_not_fit`` and 25 % above it is not
  ``fits``;
- ``fits`` (a run that fitted): the verdict at the length is not ``does_not_fit``;
- ``oom`` (a run that ran out of memory): the verdict at the length is not ``fits``.

``--first-contact`` fills the first-contact columns of rows that have none (with the commit
calc is at): rows already judged keep their columns (first contact is history).
"""

from __future__ import annotations

import argparse
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


def judge_row(row: dict[str, str]) -> Judged:
    request = json.loads(row["calc_request"])
    card = memory_bytes(row)
    seq_len = int(row["seq_len"])
    at = verdict(request, seq_len, card)
    above = verdict(request, int(seq_len * ABOVE), card)
    largest = largest_fitting(
        lambda n: verdict(request, n, card) != "does_not_fit", seq_len, 4 * seq_len
    )
    outcome = row["outcome"]
    if outcome == "max_fits":
        agrees = at != "does_not_fit" and above != "fits"
    elif outcome == "fits":
        agrees = at != "does_not_fit"
    else:
        agrees = at != "fits"
    return Judged(row["id"], outcome, seq_len, at, above, largest, agrees)


def load() -> list[dict[str, str]]:
    with CSV.open(newline="") as handle:
        return list(csv.DictReader(handle))


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


def first_contact_summary(rows: list[dict[str, str]]) -> str:
    """The recorded first-contact agreement (the figure the methodology page publishes)."""
    judged = [r for r in rows if r.get("first_contact_agrees")]
    agree = sum(r["first_contact_agrees"] == "yes" for r in judged)
    return f"first contact: verdict agreed on {agree} of {len(judged)}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--first-contact", action="store_true", help="record unjudged rows")
    args = parser.parse_args()
    rows = load()
    judged = [judge_row(r) for r in rows]
    for j in judged:
        err = "" if j.error is None else f" error {j.error:+.1%}"
        print(
            f"{j.row_id:22s} {j.outcome:8s} L={j.seq_len:>7d} verdict {j.verdict:12s} "
            f"x{ABOVE} {j.verdict_above:12s} largest {j.largest}{err} "
            f"{'agrees' if j.agrees else 'DISAGREES'}"
        )
    print(summary(judged))
    if args.first_contact:
        record_first_contact(rows, judged)
    print(first_contact_summary(load()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
