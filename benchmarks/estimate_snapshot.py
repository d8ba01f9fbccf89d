"""The ``estimate`` responses of varied requests with a length distribution, as one JSON file:
an exactness check for work on the allocator replay's speed.

Usage: ``python -m benchmarks.estimate_snapshot OUT.json``, once at the commit before a change
and once after it (``git stash``, or a second checkout), then ``cmp`` the two files: they must
be the same to the byte. Each request is estimated after :func:`calc.caches.forget_all` (a
request calc has not seen: lengths drawn, allocator replayed and walked), and so are three
plans (``OUT.json.plans``), whose solvers ask :class:`calc.step_events.MinDevice` their
questions. The requests cross model presets, methods (full, LoRA, QLoRA, the whole-weight
NF4 build), micro-batch sizes 1-8, gradient accumulation, ``length_stats`` variants, GPU
counts and sharding, ``expandable_segments``, checkpointing off and packed batching, and
include ``benchmarks.bench_lengths``' requests.
"""

from __future__ import annotations

import json
import sys
from typing import Any

MODELS = (
    "llama-3.1-8b",
    "llama-3.2-1b",
    "qwen2.5-0.5b",
    "mistral-7b",
    "gemma-2-2b",
    "qwen3-30b-a3b",
    "llama-3.1-70b",
    "phi-3-mini",
    "gpt2",
    "mixtral-8x7b",
    "qwen3-4b",
    "gemma-3-1b",
    "lfm2-350m",
    "nemotron-h-8b",
    "gpt-oss-20b",
)
STATS = (
    {"mean": 900, "p90": 2000},
    {"mean": 700, "p90": 1800, "max": 4096},
    {"mean": 1200},
    {"mean": 300, "p90": 600},
    {"p90": 1900},
    {"mean": 2000, "p90": 3500, "max": 8192},
    {"mean": 150},
    {"mean": 500, "p90": 1500, "p99": 2000},
)
EXTRA = (
    {"model": "llama-3.1-8b", "length_stats": {"mean": 900, "p90": 2000}},
    {
        "model": "llama-3.1-8b",
        "micro_batch_size": 8,
        "seq_len": 4096,
        "length_stats": {"mean": 700, "p90": 1800, "max": 4096},
    },
    {
        "model": "llama-3.1-70b",
        "method": "full",
        "num_gpus": 8,
        "sharding": "zero3",
        "length_stats": {"mean": 1200},
    },
    {
        "model": "llama-3.2-1b",
        "method": "full",
        "micro_batch_size": 4,
        "seq_len": 4096,
        "length_stats": {"mean": 400},
    },
    {
        "model": "llama-3.1-8b",
        "micro_batch_size": 4,
        "seq_len": 2048,
        "length_stats": {"mean": 900, "p90": 2000},
    },
    {
        "model": "qwen2.5-7b",
        "method": "qlora",
        "qlora_unchunked_quantization": True,
        "length_stats": {"mean": 900, "p90": 2000},
    },
)
PLANS = (
    {"length_stats": {"mean": 3000, "p90": 6000}},
    {},
    {"length_stats": {"mean": 900, "p90": 2000}, "gpu": "rtx-3090"},
)


def requests() -> list[dict[str, Any]]:
    """Sixty varied requests, then :data:`EXTRA`."""
    out: list[dict[str, Any]] = []
    for i in range(60):
        r: dict[str, Any] = {"model": MODELS[i % len(MODELS)], "length_stats": STATS[i % 8]}
        r["method"] = ("lora", "full", "qlora")[i % 3]
        r["micro_batch_size"] = (1, 2, 4, 8)[(i // 3) % 4]
        r["seq_len"] = (2048, 4096, 8192)[(i // 5) % 3]
        if i % 4 == 1:
            r["gradient_accumulation_steps"] = (2, 4, 3)[(i // 4) % 3]
        if i % 5 == 2:
            r["num_gpus"] = 8
            r["sharding"] = ("zero3", "zero2", "zero1", "ddp")[(i // 5) % 4]
        if i % 7 == 3:
            r["expandable_segments"] = True
        if i % 6 == 4:
            r["gradient_checkpointing"] = False
        if i % 9 == 5:
            r["batching"] = "packed"
        out.append(r)
    return out + [dict(r) for r in EXTRA]


def main() -> int:
    from calc import plan_setup
    from calc.caches import forget_all
    from calc.memory import estimate_dict

    from benchmarks.bench_lengths import PLAN_BASE

    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    path = sys.argv[1]
    responses = []
    for request in requests():
        forget_all()
        responses.append({"request": request, "response": estimate_dict(request)})
    with open(path, "w") as f:
        json.dump(responses, f, indent=1, sort_keys=True, default=repr)
    plans = []
    for extra in PLANS:
        forget_all()
        plans.append(plan_setup({**PLAN_BASE, **extra}))
    with open(path + ".plans", "w") as f:
        json.dump(plans, f, indent=1, sort_keys=True, default=repr)
    print(f"{len(responses)} estimates and {len(plans)} plans written to {path}(.plans)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
