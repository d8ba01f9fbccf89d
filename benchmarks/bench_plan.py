"""Speed of the plan command (target: a full recommendation over the catalogue <= 50 ms in CPython).

    python benchmarks/bench_plan.py [repeats] [--simulated]

Prints, per request, the median and 90th-percentile wall time of
- ``recommendation``: every card x (1, 2, 4, 8 GPUs) x sharding, memory estimates included
  (a fresh estimator each time, so nothing is cached between repeats);
- ``plan``: the whole ``plan_dict`` (validation, recommendation, both solvers, suggestions);
and how many memory estimates each needed. ``--simulated``: with every estimate replaying the
caching allocator (:data:`calc.memory.SIMULATED_VERDICT` on), the replays' caches emptied
before each run (:func:`calc.step_events.simulate_request`'s and the sequences shared between
setups, :func:`calc.step_events.clear_shared`) so that no repeat reuses another's replays.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from calc import memory, plan, recommend  # noqa: E402
from calc import step_events  # noqa: E402
from calc.step_events import forget_simulations  # noqa: E402

REQUESTS = {
    "llama-3.1-8b lora, fits most cards": {
        "model": "llama-3.1-8b",
        "method": "lora",
        "micro_batch_size": 4,
        "seq_len": 2048,
        "dataset_tokens": 50_000_000,
        "epochs": 3,
        "gpu": "rtx-4090",
    },
    "llama-2-70b full, needs sharding": {
        "model": "llama-2-70b",
        "method": "full",
        "precision": "bf16-true",
        "micro_batch_size": 1,
        "seq_len": 4096,
        "dataset_tokens": 100_000_000,
        "gpu": "h100-sxm",
    },
    "qwen2.5-7b qlora, interruptible": {
        "model": "qwen2.5-7b",
        "method": "qlora",
        "micro_batch_size": 2,
        "seq_len": 4096,
        "dataset_tokens": 20_000_000,
        "gpu": "l4",
        "interruptible": True,
    },
}


def _timed(fn, repeats: int) -> tuple[list[float], object]:
    times, result = [], None
    for _ in range(repeats):
        forget_simulations()
        step_events.clear_shared()
        start = time.perf_counter()
        result = fn()
        times.append((time.perf_counter() - start) * 1000.0)
    return times, result


def _p90(values: list[float]) -> float:
    data = sorted(values)
    return data[min(len(data) - 1, int(round(0.9 * (len(data) - 1))))]


def main(argv: list[str]) -> int:
    simulated = "--simulated" in argv
    argv = [a for a in argv if a != "--simulated"]
    repeats = int(argv[1]) if len(argv) > 1 else 50
    memory.SIMULATED_VERDICT = simulated or memory.SIMULATED_VERDICT
    print(
        f"python {sys.version.split()[0]}, {repeats} repeats; times in ms"
        f"{'; every estimate replays the allocator' if memory.SIMULATED_VERDICT else ''}"
    )
    for name, data in REQUESTS.items():
        req, options = plan.parse_plan_request(data)

        # timed within this iteration; the defaults bind its request explicitly (ruff B023)
        def recommendation(req=req, options=options):
            planner = plan.Planner(req, options, recommend.Estimator(req))
            out = plan._recommendations(planner)
            return planner.estimator.calls, out["count"]

        def whole_plan(req=req, data=data):
            est = recommend.Estimator(req)
            r, o = plan.parse_plan_request(data)
            out = plan.plan_request(r, o, est)
            return est.calls, out["recommendations"]["count"]

        rec_times, (rec_calls, configs) = _timed(recommendation, repeats)
        plan_times, (plan_calls, _) = _timed(whole_plan, repeats)
        print(f"{name}:")
        print(
            f"  recommendation  median {statistics.median(rec_times):7.2f}  p90 {_p90(rec_times):7.2f}"
            f"  ({rec_calls} memory estimates, {configs} fitting configurations)"
        )
        print(
            f"  whole plan      median {statistics.median(plan_times):7.2f}  p90 {_p90(plan_times):7.2f}"
            f"  ({plan_calls} memory estimates)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
