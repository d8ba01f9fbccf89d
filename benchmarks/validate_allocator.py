"""The simulated caching allocator against the measured reserved peaks, and its cost.

``python -m benchmarks.validate_allocator`` prints, over the covered rows of
validation/measured_peaks.csv whose statistic is reserved (stated ``max_memory_reserved``,
and separately those where reserved is only assumed): the median and p90 of ``|error|`` of
today's ``peak_reserved_bytes`` (allocated x (1 + slack), floors) and of the simulated
reserved (``calc.allocator.replay`` of ``calc.step_events.step_events`` over a few steps at
the row's length, with the same floors), per row with ``--rows``; and the median times of
today's estimate, of building and replaying one step's sequence, of ``min_device_bytes`` and
of :func:`calc.step_events.simulate`.
"""

from __future__ import annotations

import argparse
import statistics
import time

from accuracy import memory as acc
from accuracy.stats import percentile
from calc import allocator as al
from calc.memory import estimate_dict
from calc.request import parse_estimate_request
from calc.step_events import simulate, step_events

STEPS = 3
"""Optimizer steps replayed per row: the first creates the optimizer states in the cache that
the first forward left, the others show the steady state."""


def simulated_reserved(request: dict, steps: int = STEPS) -> int:
    req = parse_estimate_request(request)
    lengths = [req.seq_len] * (steps * req.gradient_accumulation_steps)
    return al.replay(step_events(req, lengths)).peak_reserved_bytes


def rows(stated: bool) -> list[tuple[acc.RowResult, int]]:
    out = []
    for r in acc.compare_rows():
        if not (r.covered and r.metric == "reserved" and "ambiguous" not in r.flags):
            continue
        if stated == ("metric_assumed" in r.flags):
            continue
        sim = max(simulated_reserved(r.request), r.reserved_floor_bytes)
        out.append((r, sim))
    return out


def _stats(errs: list[float]) -> str:
    if not errs:
        return "n=0"
    return f"n={len(errs)} median {statistics.median(errs):.1%} p90 {percentile(errs, 90):.1%}"


def timing(body: dict, repeats: int = 9) -> tuple[float, float, float, float]:
    """Median ms of today's ``estimate``, of building and replaying one optimizer step's
    sequence, of ``min_device_bytes`` on it, and of :func:`calc.step_events.simulate` (both)."""
    req = parse_estimate_request(body)
    runs: list[list[float]] = [[], [], [], []]
    for _ in range(repeats):
        t0 = time.perf_counter()
        estimate_dict(body)
        t1 = time.perf_counter()
        events = step_events(req)
        unlimited = al.replay(events)
        t2 = time.perf_counter()
        al.min_device_bytes(events, unlimited=unlimited)
        t3 = time.perf_counter()
        simulate(req)
        t4 = time.perf_counter()
        for i, dt in enumerate((t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
            runs[i].append(dt * 1e3)
    m = [statistics.median(r) for r in runs]
    return m[0], m[1], m[2], m[3]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", action="store_true", help="print every row")
    args = parser.parse_args()
    for stated in (True, False):
        data = rows(stated)
        today = [abs(r.error) for r, _ in data]
        sim = [abs(s - r.measured_bytes) / r.measured_bytes for r, s in data]
        label = "stated max_memory_reserved" if stated else "reserved assumed"
        print(f"{label}: today (slack) {_stats(today)}; simulated {_stats(sim)}")
        if args.rows:
            for r, s in data:
                print(
                    f"  {r.row_id:>4} {r.source_key[:38]:38s} measured {r.measured_bytes / 2**30:7.2f} "
                    f"today {r.error:+6.1%} simulated {(s - r.measured_bytes) / r.measured_bytes:+6.1%}"
                )
    for body in (
        {"model": "llama-3.1-8b", "method": "lora"},
        {"model": "llama-3.1-8b", "method": "qlora", "micro_batch_size": 4},
        {"model": "llama-3.2-1b", "method": "full"},
    ):
        est_ms, seq_ms, min_ms, sim_ms = timing(body)
        print(
            f"timing {body}: estimate {est_ms:.2f} ms; sequence + replay {seq_ms:.1f} ms, "
            f"min_device_bytes {min_ms:.1f} ms, simulate {sim_ms:.1f} ms (medians)"
        )


if __name__ == "__main__":
    main()
