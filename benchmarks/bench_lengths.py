"""Speed of ``estimate`` with a length distribution (``length_stats``): median, CPython.

Usage: ``python -m benchmarks.bench_lengths [--cpu]``. Target: <= 5 ms median. ``--cpu`` times
with this process's CPU time (``time.process_time``) instead of the wall clock: on a machine
other work shares, the wall clock counts its turns too. Two figures per request:
``drawn`` forgets every memo of calc before each call (:func:`calc.caches.forget_all`), so
every call fits the distribution, draws its 4,096 samples, estimates and replays the allocator
again (a request calc has not seen; fewer runs: the replay is slow); ``cached`` is a repeated request (a recompute of the
same form); then, drawn, requests of many micro-batches per optimizer step
(:data:`ACCUMULATION_REQUESTS`). Then one ``plan`` with and
without a length distribution (p90 of fresh requests; the plan's target is <= 100 ms p90): its
solvers draw a sequence for each micro-batch size and sequence length they try.
"""

from __future__ import annotations

import statistics
import sys
import time

CLOCK = time.perf_counter

REQUESTS = {
    "lora mean+p90, mbs 1 (llama-3.1-8b)": {
        "model": "llama-3.1-8b",
        "length_stats": {"mean": 900, "p90": 2000},
    },
    "lora mean+p90+max, mbs 8 (llama-3.1-8b)": {
        "model": "llama-3.1-8b",
        "micro_batch_size": 8,
        "seq_len": 4096,
        "length_stats": {"mean": 700, "p90": 1800, "max": 4096},
    },
    "full zero3 mean only, 8 GPUs (llama-3.1-70b)": {
        "model": "llama-3.1-70b",
        "method": "full",
        "num_gpus": 8,
        "sharding": "zero3",
        "length_stats": {"mean": 1200},
    },
}


ACCUMULATION_REQUESTS = {
    f"lora {batching}, {steps} micro-batches per step (llama-3.1-8b)": {
        "model": "llama-3.1-8b",
        "micro_batch_size": 2,
        "gradient_accumulation_steps": steps,
        "length_stats": {"mean": 900, "p90": 2000},
        "batching": batching,
    }
    for batching in ("packed", "pad-longest")
    for steps in (32, 128)
}
"""Requests whose optimizer steps hold many micro-batches: the replay skips a micro-batch that
repeats one of its step without a device allocation (``StepReplay._run_span``); packed rows
all repeat, padded ones rarely. Timed drawn only (no target of their own)."""


def time_estimates(request: dict, drawn: bool, runs: int = 500) -> float:
    """Median seconds of ``calc.memory.estimate_dict`` (validation, draw, model, allocator
    replay, serialisation)."""
    from calc.caches import forget_all
    from calc.memory import estimate_dict

    if drawn:
        runs = min(runs, 15)
    estimate_dict(request)  # warm: presets loaded once
    samples = []
    for _ in range(runs):
        if drawn:
            forget_all()
        start = CLOCK()
        estimate_dict(request)
        samples.append(CLOCK() - start)
    return statistics.median(samples)


PLAN_BASE = {
    "model": "llama-3.1-8b",
    "gpu": "rtx-4090",
    "dataset_tokens": 1e8,
    "seq_len": 8192,
    "micro_batch_size": 8,
}
"""The plan this benchmark times (and ``benchmarks.estimate_snapshot`` keeps)."""


def time_plans(with_lengths: bool, runs: int = 20) -> float:
    """p90 seconds of ``calc.plan_setup`` on requests calc has not seen (each a new mean)."""
    from calc import plan_setup

    base = dict(PLAN_BASE)
    plan_setup(base)  # warm
    samples = []
    for i in range(runs):
        request = (
            {**base, "length_stats": {"mean": 3000 + i, "p90": 6000}}
            if with_lengths
            else {**base, "lora_rank": 16 + i}
        )
        start = CLOCK()
        plan_setup(request)
        samples.append(CLOCK() - start)
    return statistics.quantiles(samples, n=10)[-1]


def main() -> int:
    global CLOCK
    if "--cpu" in sys.argv[1:]:
        CLOCK = time.process_time
    print(
        f"python {sys.version.split()[0]}, {'CPU time' if CLOCK is time.process_time else 'wall clock'}"
    )
    for label, request in REQUESTS.items():
        drawn, cached = time_estimates(request, True), time_estimates(request, False)
        print(
            f"estimate {label:<46} drawn {1e3 * drawn:6.3f} ms  cached {1e3 * cached:6.3f} ms"
            "  (target <= 5 ms)"
        )
    for label, request in ACCUMULATION_REQUESTS.items():
        print(f"estimate {label:<58} drawn {1e3 * time_estimates(request, True, 5):8.1f} ms")
    print(
        f"plan rtx-4090 8B mbs 8 seq 8192, p90: without lengths {1e3 * time_plans(False):6.1f} ms, "
        f"with lengths {1e3 * time_plans(True):6.1f} ms  (plan target <= 100 ms p90)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
