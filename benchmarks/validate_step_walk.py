"""The step replay's capacity walk against the full search, on the requests a plan estimates.

Usage: ``python -m benchmarks.validate_step_walk [--limit N]``. For each memory estimate the
plans of :data:`benchmarks.bench_plan.REQUESTS` make (every card, GPU count, sharding and the
solvers' micro-batch sizes and sequence lengths), and for the requests of
:data:`benchmarks.bench_min_device.REQUESTS`, the sequence ``estimate`` replays
(:func:`calc.step_events.simulated_lengths`) is searched twice: by
:meth:`calc.step_events.StepReplay.capacity_threshold` (step skipping, copies, spliced
continuations) and by :func:`calc.allocator.capacity_threshold` over the flat event list
(every continuation run to its end from its own state). Prints the requests whose answers
(capacity and exactness) or unlimited peaks differ, and a count; exit status 1 if any.
Slow: the full search replays every event of every continuation.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from calc import allocator as al
from calc import plan, recommend
from calc.errors import CalcError
from calc.memory import estimate_request
from calc.request import EstimateRequest, parse_estimate_request
from calc.step_events import StepReplay, simulated_lengths, step_events


def corpus() -> list[EstimateRequest]:
    """The distinct estimate requests of the benchmark plans, then the speed benchmark's."""
    from benchmarks.bench_min_device import REQUESTS as SPEED
    from benchmarks.bench_plan import REQUESTS as PLANS

    seen: list[EstimateRequest] = []

    def collecting(r: EstimateRequest) -> Any:
        seen.append(r)
        return estimate_request(r)

    for body in PLANS.values():
        req, options = plan.parse_plan_request(body)
        plan.plan_request(req, options, recommend.Estimator(req, collecting))
    seen += [parse_estimate_request(body) for body in SPEED.values()]
    return list(dict.fromkeys(seen))


def compare(req: EstimateRequest) -> tuple[bool, str]:
    """Whether both searches (and both unlimited replays) agree, and a line saying so."""
    lengths = simulated_lengths(req)
    steps = StepReplay(req, lengths)
    fast_run = steps.replay()
    fast = steps.capacity_threshold(fast_run)
    events = step_events(req, lengths)
    full_run = al.replay(events)
    flat = al._FlatEvents(events, al.DEFAULT_CONFIG)
    full = al.capacity_threshold(flat.root(), flat.continuation, flat.pause, flat.release)
    peaks = (fast_run.peak_allocated_bytes, fast_run.peak_reserved_bytes)
    same = fast == full and peaks == (full_run.peak_allocated_bytes, full_run.peak_reserved_bytes)
    return same, f"{req.model_id} {req.method.value} mbs {req.micro_batch_size} seq {req.seq_len}"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=0, help="check only the first N requests")
    args = parser.parse_args(argv)
    requests = corpus()
    if args.limit:
        requests = requests[: args.limit]
    start = time.process_time()
    checked = differ = 0
    for req in requests:
        try:
            same, label = compare(req)
        except CalcError:
            continue  # a variant the memory model rejects
        checked += 1
        if not same:
            differ += 1
            print(f"differs: {label}", flush=True)
    print(f"{checked} requests, {differ} differ ({time.process_time() - start:.0f} s process time)")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
