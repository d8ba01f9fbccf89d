"""Speed of the caching-allocator simulation that gives ``min_device_bytes``, CPython.

Usage: ``python -m benchmarks.bench_min_device [runs] [--budgets | --gap]``. Times
:func:`calc.step_events.simulate_request` (its cache cleared before each call: a request calc
has not seen) on fixed-shape requests and on requests with ``length_stats``: median and p90
in ms of process time (``time.process_time``: on a machine other work shares, the wall
clock counts its turns too), and the split of one call between building the events, the
unlimited replay and the capacity walk. Then what ``plan`` would pay if each of its memory
estimates carried ``min_device_bytes``: the estimates a plan makes are collected, and the
simulation of all of them timed (cache cleared; distinct event sequences counted).

``--budgets``: instead, the capacity walk of the request with lengths mean 900 / p90 2000 at
``calc.allocator.THRESHOLD_REPLAYS`` continuations and at larger budgets: the threshold it
gives (2 MiB steps), whether it is exact, and the walk's median ms. ``--gap``: on nine
requests (:data:`GAP_REQUESTS`), the walk's bound at its budget beside the one at 16 times it.

To compare two checkouts under the same load, run it alternately from each (``PYTHONPATH``).
"""

from __future__ import annotations

import gc
import statistics
import sys
import time
from typing import Any

from accuracy import walk_budget

CLOCK = time.process_time

REQUESTS: dict[str, dict[str, Any]] = {
    "fixed lora mbs 4 seq 2048 (llama-3.1-8b)": {
        "model": "llama-3.1-8b",
        "micro_batch_size": 4,
        "seq_len": 2048,
    },
    "fixed full mbs 4 seq 1024 (llama-3.2-1b)": {
        "model": "llama-3.2-1b",
        "method": "full",
        "micro_batch_size": 4,
        "seq_len": 1024,
    },
    "lengths lora mbs 4, mean 900 p90 2000 (llama-3.1-8b)": {
        "model": "llama-3.1-8b",
        "micro_batch_size": 4,
        "seq_len": 2048,
        "length_stats": {"mean": 900, "p90": 2000},
    },
    "lengths lora mbs 8 seq 4096, mean 700 p90 1800 (llama-3.1-8b)": {
        "model": "llama-3.1-8b",
        "micro_batch_size": 8,
        "seq_len": 4096,
        "length_stats": {"mean": 700, "p90": 1800, "max": 4096},
    },
    "lengths full zero3 8 GPUs, mean 1200 (llama-3.1-70b)": {
        "model": "llama-3.1-70b",
        "method": "full",
        "num_gpus": 8,
        "sharding": "zero3",
        "length_stats": {"mean": 1200},
    },
}

PLAN_REQUEST: dict[str, Any] = {
    "model": "llama-3.1-8b",
    "method": "lora",
    "micro_batch_size": 4,
    "seq_len": 2048,
    "dataset_tokens": 50_000_000,
    "epochs": 3,
    "gpu": "rtx-4090",
}


def _quantiles(samples: list[float]) -> tuple[float, float]:
    data = sorted(samples)
    return statistics.median(data), data[min(len(data) - 1, round(0.9 * (len(data) - 1)))]


def time_simulation(request: dict[str, Any], runs: int) -> tuple[float, float, list[float]]:
    """Median and p90 ms of one uncached ``simulate_request``, and the median split (ms):
    building the events, the unlimited replay, the capacity walk."""
    from calc import step_events as se
    from calc.request import parse_estimate_request

    req = parse_estimate_request(request)
    se.simulate_request(req)  # warm: presets, calc.lengths' caches
    samples, parts = [], []
    for _ in range(runs):
        se.forget_simulations()
        start = CLOCK()
        se.simulate_request(req)
        samples.append(1e3 * (CLOCK() - start))
        gc.disable()
        t0 = CLOCK()
        steps = se.StepReplay(req, se.simulated_lengths(req))
        t1 = CLOCK()
        unlimited = steps.replay()
        t2 = CLOCK()
        steps.min_capacity(unlimited)
        t3 = CLOCK()
        gc.enable()
        parts.append([1e3 * (t1 - t0), 1e3 * (t2 - t1), 1e3 * (t3 - t2)])
    median, p90 = _quantiles(samples)
    return median, p90, [statistics.median(p[i] for p in parts) for i in range(3)]


def time_plan_estimates(runs: int) -> tuple[int, int, float, float, float]:
    """The plan's memory estimates: how many, how many distinct event sequences, the plan's
    own median ms, and the median and p90 ms of simulating all of them."""
    from calc import plan, recommend
    from calc import step_events as se
    from calc.memory import estimate_request

    seen: list[Any] = []

    def collecting(r: Any) -> Any:
        seen.append(r)
        return estimate_request(r)

    req, options = plan.parse_plan_request(PLAN_REQUEST)
    plan.plan_request(req, options, recommend.Estimator(req, collecting))
    own = []
    for _ in range(runs):
        r, o = plan.parse_plan_request(PLAN_REQUEST)
        start = CLOCK()
        plan.plan_request(r, o, recommend.Estimator(r))
        own.append(1e3 * (CLOCK() - start))
    sequences = set()
    simulable = []
    for r in seen:
        try:
            lengths = se.simulated_lengths(r)
            events = se.step_events(r, lengths)
        except Exception:  # a variant the memory model rejects
            continue
        simulable.append(r)
        sequences.add(tuple(e[2] if e[0] == "alloc" else -1 for e in events))
    totals = []
    for _ in range(max(1, runs // 5)):
        se.forget_simulations()
        start = CLOCK()
        for r in simulable:
            se.simulate_request(r)
        totals.append(1e3 * (CLOCK() - start))
    median, p90 = _quantiles(totals)
    return len(seen), len(sequences), statistics.median(own), median, p90


BUDGETS_REQUEST = "lengths lora mbs 4, mean 900 p90 2000 (llama-3.1-8b)"


def time_budgets(
    request: dict[str, Any], runs: int, factors: tuple[int, ...] = (1, 4, 16, 64)
) -> list[tuple[int, int, bool, float]]:
    """Per budget of the capacity walk (``THRESHOLD_REPLAYS`` times each of ``factors``): the
    budget, the threshold in 2 MiB steps, whether it is exact, the walk's median ms."""
    from calc import allocator as al
    from calc import step_events as se
    from calc.request import parse_estimate_request

    req = parse_estimate_request(request)
    lengths = se.simulated_lengths(req)
    rows = []
    for budget in (al.THRESHOLD_REPLAYS * k for k in factors):
        samples = []
        for _ in range(runs):
            steps = se.StepReplay(req, lengths)
            unlimited = steps.replay()
            gc.disable()
            start = CLOCK()
            capacity, exact = steps.capacity_threshold(unlimited, budget)
            samples.append(1e3 * (CLOCK() - start))
            gc.enable()
        steps_2mib = capacity // al.ROUND_LARGE_BYTES
        rows.append((budget, steps_2mib, exact, statistics.median(samples)))
    return rows


GAP_REQUESTS = walk_budget.GAP_REQUESTS
"""``--gap``: requests on which the walk's bound at its budget is set beside the bound 16 times
that budget reaches (:mod:`accuracy.walk_budget`, whose summary the methodology page publishes
at 64 times)."""


def main(argv: list[str]) -> int:
    numbers = [a for a in argv[1:] if not a.startswith("--")]
    runs = int(numbers[0]) if numbers else 15
    print(f"python {sys.version.split()[0]}, process time, {runs} runs; ms")
    if "--gap" in argv:
        for request in GAP_REQUESTS:
            (_, bound, _, walk), (_, deeper, exact, slow) = time_budgets(request, 1, (1, 16))
            kind = "exact" if exact else "upper bound"
            print(
                f"{request}: {bound:,} x 2 MiB in {walk:.0f} ms; at 16x the budget {deeper:,}"
                f" ({kind}, {slow:.0f} ms): the bound {100 * (bound / deeper - 1):+.1f} %"
            )
        return 0
    if "--budgets" in argv:
        for budget, capacity, exact, walk in time_budgets(REQUESTS[BUDGETS_REQUEST], runs):
            kind = "exact" if exact else "upper bound"
            print(f"budget {budget:5d}: {capacity:,} x 2 MiB ({kind}), walk median {walk:6.1f}")
        return 0
    for label, request in REQUESTS.items():
        median, p90, (build, replay, walk) = time_simulation(request, runs)
        print(
            f"simulate {label:<54} median {median:6.1f}  p90 {p90:6.1f}"
            f"  (build {build:4.1f}, replay {replay:5.1f}, walk {walk:5.1f})"
        )
    count, distinct, own, median, p90 = time_plan_estimates(runs)
    print(
        f"plan 8B lora rtx-4090: {count} estimates ({distinct} distinct event sequences), "
        f"plan itself median {own:.1f}; simulating all of them: median {median:.0f}, p90 {p90:.0f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
