"""How far the capacity walk's budget leaves ``min_device_bytes`` above the exact threshold.

The walk (:func:`calc.allocator.capacity_threshold`) replays at most
:data:`calc.allocator.THRESHOLD_REPLAYS` continuations; where they run out before it reaches
the exact threshold it returns the upper bound it has proven (every capacity from it runs the
steps). The response says which (``allocator.min_allocator_exact``). This module sets the
figure at that budget beside the one :data:`REFERENCE_FACTOR` times the budget reaches, on
:data:`GAP_REQUESTS` (``python -m benchmarks.bench_min_device --gap`` prints the same with
times); the methodology page publishes the summary (:func:`summary`).

Why the budget runs out: where the replay opens small-pool segments (2 MiB, ``kSmallBuffer``)
one after another, one per layer, each band between two of them costs the walk a continuation
and a release of its own (Llama 3.1 8B LoRA, lengths mean 900 / p90 2,000: 168 such bands at
the top of the unlimited replay's needs, about 80 of them walked down to the exact threshold),
so a descent of a few hundred MiB costs hundreds of continuations.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

GAP_REQUESTS: list[dict[str, Any]] = [
    {"model": "llama-3.1-8b", "length_stats": {"mean": 900, "p90": 2000}},
    {
        "model": "llama-3.1-8b",
        "micro_batch_size": 4,
        "seq_len": 2048,
        "length_stats": {"mean": 900, "p90": 2000},
    },
    {
        "model": "qwen2.5-7b",
        "method": "qlora",
        "micro_batch_size": 2,
        "seq_len": 4096,
        "length_stats": {"mean": 1500},
    },
    {
        "model": "llama-3.2-1b",
        "method": "full",
        "micro_batch_size": 4,
        "seq_len": 4096,
        "length_stats": {"mean": 400},
    },
    {
        "model": "llama-3.2-3b",
        "micro_batch_size": 8,
        "seq_len": 2048,
        "length_stats": {"mean": 600, "p90": 1400},
    },
    {
        "model": "mistral-7b",
        "method": "qlora",
        "micro_batch_size": 4,
        "seq_len": 2048,
        "length_stats": {"mean": 500, "p90": 1200},
    },
    {
        "model": "llama-3.1-8b",
        "method": "full",
        "micro_batch_size": 2,
        "seq_len": 4096,
        "gradient_checkpointing": True,
        "length_stats": {"mean": 1200, "p90": 3000},
    },
    {"model": "mistral-7b", "micro_batch_size": 4, "seq_len": 1024},
    {"model": "llama-3.1-8b", "method": "qlora", "micro_batch_size": 4, "seq_len": 2048},
]
"""Requests on which the walk's figure at its budget is set beside the one a larger budget
reaches: the speed benchmark's, the calculator's default with lengths, each method, fixed
shapes and lengths."""

REFERENCE_FACTOR = 64
"""The reference budget, in multiples of :data:`calc.allocator.THRESHOLD_REPLAYS`: large
enough that the walk is exact on every request of :data:`GAP_REQUESTS` (1,024 continuations,
2026-12-07; the summary says on how many it was)."""


@dataclass(frozen=True)
class Gap:
    """One request's walk at the shipped budget and at the reference one (bytes)."""

    request: dict[str, Any]
    bound_bytes: int
    bound_exact: bool
    reference_bytes: int
    reference_exact: bool

    @property
    def above(self) -> float:
        """How far the shipped figure lies above the reference one (a fraction)."""
        return self.bound_bytes / self.reference_bytes - 1


def walk(request: dict[str, Any], budget: int) -> tuple[int, bool]:
    """The capacity walk of ``request``'s simulated steps at ``budget`` continuations: the
    allocator capacity (bytes) and whether it is exact."""
    from calc import step_events as se
    from calc.request import parse_estimate_request

    req = parse_estimate_request(request)
    steps = se.StepReplay(req, se.simulated_lengths(req))
    with se.collector_paused():
        return steps.capacity_threshold(steps.replay(), budget)


def gap(request: dict[str, Any]) -> Gap:
    from calc.allocator import THRESHOLD_REPLAYS

    bound, exact = walk(request, THRESHOLD_REPLAYS)
    reference, reference_exact = walk(request, THRESHOLD_REPLAYS * REFERENCE_FACTOR)
    return Gap(request, bound, exact, reference, reference_exact)


@functools.lru_cache(maxsize=1)
def summary() -> dict[str, Any]:
    """Over :data:`GAP_REQUESTS`: how many, the budgets, on how many the shipped walk is
    exact, on how many the reference one is, and the least and largest share by which the
    shipped figure lies above the reference where it is not exact."""
    from calc.allocator import THRESHOLD_REPLAYS

    gaps = [gap(r) for r in GAP_REQUESTS]
    above = [g.above for g in gaps if not g.bound_exact]
    return {
        "requests": len(gaps),
        "budget": THRESHOLD_REPLAYS,
        "reference_budget": THRESHOLD_REPLAYS * REFERENCE_FACTOR,
        "exact": sum(g.bound_exact for g in gaps),
        "reference_exact": sum(g.reference_exact for g in gaps),
        "above_min": min(above, default=0.0),
        "above_max": max(above, default=0.0),
    }
