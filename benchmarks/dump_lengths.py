"""Dump calc's answers to requests with a length distribution, to compare two versions byte for
byte (a speed change must leave them unchanged).

    python -m benchmarks.dump_lengths OUT.jsonl [--quick]

One JSON line per case: ``estimate`` of a deterministic spread of requests with ``length_stats``
of every shape (mean, p90, p99, max and their combinations, ones the fit can only approximate,
the text form), every ``batching``, several models (MoE, 70B, LayerNorm), methods, shardings,
micro-batch sizes, accumulation, checkpointing, run lengths (``max_steps``); ``plan`` with and
without lengths; the allocator replay under other allocator settings and the bounds and probes
of :class:`calc.step_events.MinDevice`; the rows of ``validation/variable_length_peaks.csv``
and ``validation/fit_boundaries.csv`` as the accuracy modules judge them (today's and first
contact's requests). :mod:`benchmarks.dump_responses` covers requests without lengths.
"""

from __future__ import annotations

import dataclasses
import json
import random
import sys
from collections.abc import Iterator

MODELS = (
    "llama-3.1-8b",
    "llama-3.2-1b",
    "llama-3.1-70b",
    "qwen3-30b-a3b",
    "mixtral-8x7b",
    "gemma-2-2b",
    "gpt2",
    "qwen2.5-7b",
)
STATS = (
    {"mean": 900},
    {"p90": 2000},
    {"max": 1500},
    {"p99": 3000},
    {"mean": 900, "p90": 2000},
    {"mean": 700, "p90": 1800, "max": 4096},
    {"mean": 225, "p90": 442, "max": 1585},
    {"mean": 225, "p90": 442, "p99": 619},
    {"mean": 225, "p90": 442, "p99": 619, "max": 1585},
    {"p90": 500, "p99": 1900},
    {"mean": 400, "p99": 3000},
    {"mean": 1900, "p90": 2000},  # near the top of what p90 allows
    {"mean": 250, "p90": 2000},  # near the bottom
    {"mean": 1200},
    {"mean": 60, "p90": 120, "max": 4000},
    "mean:900,p90:2000",
)
BATCHING = ("pad-longest", "grouped", "pad-max", "packed")
SETUPS = (
    {},
    {"num_gpus": 2, "sharding": "zero2"},
    {"num_gpus": 4, "sharding": "zero3"},
    {"num_gpus": 8, "sharding": "zero3", "sharding_engine": "deepspeed"},
    {"num_gpus": 2, "sharding": "ddp"},
    {"num_gpus": 4, "sharding": "zero1"},
)
FRAMEWORKS = ("hf-trainer", "torchtune", "unsloth", "axolotl", "pytorch-loop", "litgpt", "generic")


def _estimates(count: int) -> Iterator[dict]:
    rng = random.Random(27)
    # every shape and batching at least once on the default model
    for stats in STATS:
        for batching in BATCHING:
            yield {"model": "llama-3.1-8b", "length_stats": stats, "batching": batching}
    for _ in range(count):
        req: dict = {
            "model": rng.choice(MODELS),
            "method": rng.choice(("full", "lora", "qlora")),
            "length_stats": rng.choice(STATS),
            "batching": rng.choice(BATCHING),
            "micro_batch_size": rng.choice((1, 2, 4, 8)),
            "seq_len": rng.choice((2048, 4096, 8192)),
            "framework": rng.choice(FRAMEWORKS),
            **rng.choice(SETUPS),
        }
        if rng.random() < 0.4:
            req["gradient_accumulation_steps"] = rng.choice((2, 4, 8))
        if rng.random() < 0.3:
            req["max_steps"] = rng.choice((10, 60, 500))
        if rng.random() < 0.3:
            req["gradient_checkpointing"] = False
        if rng.random() < 0.15:
            req["activation_offload"] = True
        if rng.random() < 0.15:
            req["checkpointing_granularity"] = "every-n"
            req["checkpointing_every"] = 2
        if rng.random() < 0.2:
            req["optimizer"] = rng.choice(("adamw-8bit", "sgd", "adafactor", "paged-adamw-8bit"))
        if rng.random() < 0.2:
            req["attention"] = rng.choice(("flash", "eager"))
        if rng.random() < 0.15:
            req["chunked_loss"] = True
        if req["batching"] == "packed" and rng.random() < 0.5:
            req["packed_attention"] = "per-sample"
        if rng.random() < 0.1:
            req["qlora_unchunked_quantization"] = True
        if rng.random() < 0.1:
            req["optimizer_in_backward"] = True
        yield req


def _plans() -> Iterator[dict]:
    base = {"model": "llama-3.1-8b", "dataset_tokens": 1e8, "seq_len": 8192}
    for gpu in ("rtx-4090", "l4", "a100-80gb-sxm", "h100-sxm"):
        for mbs in (1, 8):
            yield {**base, "gpu": gpu, "micro_batch_size": mbs}
            yield {
                **base,
                "gpu": gpu,
                "micro_batch_size": mbs,
                "length_stats": {"mean": 3000, "p90": 6000},
            }
    for stats in STATS[:10]:
        yield {**base, "gpu": "rtx-4090", "micro_batch_size": 4, "length_stats": stats}
    for model, method in (
        ("llama-3.1-70b", "qlora"),
        ("qwen3-30b-a3b", "lora"),
        ("llama-3.2-1b", "full"),
    ):
        yield {
            "model": model,
            "method": method,
            "gpu": "h100-sxm",
            "dataset_tokens": 5e7,
            "seq_len": 4096,
            "micro_batch_size": 2,
            "length_stats": {"mean": 800, "p90": 2000},
            "batching": "grouped",
        }


def _direct(reqs: list[dict]) -> Iterator[tuple[str, object]]:
    """Replays under other allocator settings, and MinDevice's bounds and probes."""
    from calc import allocator as al
    from calc import step_events
    from calc.errors import CalcError
    from calc.request import parse_estimate_request

    configs = (
        al.AllocatorConfig(max_split_size_bytes=128 * 2**20),
        al.AllocatorConfig(expandable_segments=True),
        al.AllocatorConfig(roundup_power2_divisions=4),
    )
    for raw in reqs:
        try:
            req = parse_estimate_request(raw)
        except CalcError:
            continue
        lengths = step_events.simulated_lengths(req)
        tokens = [req.micro_batch_size * n for n in lengths]
        for config in configs:
            try:
                out: object = step_events.simulate(req, tokens, config).to_dict()
            except AssertionError as err:
                out = f"AssertionError {err}"
            yield f"simulate {config} {json.dumps(raw)}", out
        md = step_events.MinDevice(req)
        low, high = md.bounds()
        answers = [md.at_most(low + (high - low) * k // 6) for k in range(7)]
        yield f"min_device {json.dumps(raw)}", [low, high, answers, md.exact_bytes()]
        yield (
            f"reserved_after_step {json.dumps(raw)}",
            step_events.reserved_after_step(req, tokens[: max(1, req.gradient_accumulation_steps)]),
        )


def _validation() -> Iterator[tuple[str, object]]:
    from accuracy import fit_boundaries, variable_length

    for row in variable_length.load():
        for today in (True, False):
            try:
                out: object = dataclasses.asdict(variable_length.judge_row(row, today))
            except Exception as err:
                out = f"{type(err).__name__} {err}"
            yield f"variable_length {row['id']} today={today}", out
        for today in (True, False):
            try:
                request = variable_length.row_request(row, today)
            except Exception as err:
                yield f"variable_length estimate {row['id']} today={today}", repr(err)
                continue
            import calc

            yield (
                f"variable_length estimate {row['id']} today={today}",
                calc.run("estimate", request),
            )
    for row in fit_boundaries.load():
        judged = fit_boundaries.judge_row(row)
        yield f"fit_boundaries {row['id']}", dataclasses.asdict(judged)
        request = fit_boundaries.row_request(row)
        card = fit_boundaries.memory_bytes(row)
        seq = int(row["seq_len"])
        yield (
            f"fit_boundaries min_device_verdict {row['id']}",
            [fit_boundaries.min_device_verdict(request, n, card) for n in (seq, int(seq * 1.25))],
        )


def main(argv: list[str]) -> int:
    import calc
    from calc import memory

    quick = "--quick" in argv
    path = [a for a in argv if not a.startswith("--")][0]
    estimates = list(_estimates(60 if quick else 300))
    with open(path, "w", encoding="utf-8") as out:

        def write(case: str, answer: object) -> None:
            out.write(json.dumps({"case": case, "answer": answer}, ensure_ascii=False) + "\n")
            out.flush()

        for req in estimates:
            write("estimate " + json.dumps(req), calc.run("estimate", req))
        for req in _plans():
            write("plan " + json.dumps(req), calc.run("plan", req))
        for case, answer in _direct(estimates[:: 6 if quick else 3]):
            write(case, answer)
        # the verdicts from the replayed device (the plan's setups through MinDevice)
        saved = memory.SIMULATED_VERDICT
        memory.SIMULATED_VERDICT = True
        try:
            for req in list(_plans())[:: 3 if quick else 1]:
                write("plan simulated_verdict " + json.dumps(req), calc.run("plan", req))
            for req in estimates[:: 10 if quick else 4]:
                write("estimate simulated_verdict " + json.dumps(req), calc.run("estimate", req))
        finally:
            memory.SIMULATED_VERDICT = saved
        if not quick:
            for case, answer in _validation():
                write(case, answer)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
