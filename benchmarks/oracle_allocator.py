"""The simulated allocator on the oracle's real allocation sequence vs calc's synthetic one.

``python -m benchmarks.oracle_allocator [--micro-batch B] [--lengths L,L,...] [ID ...]`` (needs
torch, transformers and peft:
tools/requirements-measure.txt) traces each oracle setup (benchmarks.oracle_sweep ids) with
its storages' allocations and frees recorded in order (tools/oracle/tracker.py ``events``),
replays that sequence through calc.allocator, and replays calc.step_events' sequence for
the same request and step count, and today's ``peak_reserved_bytes`` (allocated x (1 + slack)). ``--lengths`` runs one step per padded length (variable
shapes), ``--micro-batch`` overrides the setups' batch of 1 (larger tensors: the large pool).
``--save DIR`` keeps each recorded sequence (gzipped JSON, labelled ``--set``); ``--load
DIR`` compares kept ones again without torch (validation/allocator_sequences holds them). It prints, per setup, both peaks allocated and reserved and the synthetic reserved's error
against the replayed real one.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
from pathlib import Path

from calc import allocator as al
from calc.memory import estimate_dict
from calc.request import parse_estimate_request
from calc.step_events import step_events

DEFAULT_IDS = (
    "llama/full",
    "mistral/lora-ckpt-reentrant",
    "qwen3/lora-r16-fp32",
    "llama/qlora-ckpt",
)
STEPS = 3


def compare(
    setup: dict,
    lengths: list[int] | None = None,
    micro_batch: int | None = None,
    save: str = "",
    label: str = "held_out",
) -> dict:
    from tools.oracle.run import normalise, run_steps

    request = dict(setup["request"])
    if micro_batch:
        request["micro_batch_size"] = micro_batch
    if lengths:
        request["seq_len"] = max(lengths)
    steps = len(lengths) if lengths else STEPS
    options = dict(setup["oracle"], steps=steps, record_events=True, seq_lens=lengths)
    req, options = normalise(dict(request, oracle=options))
    events = run_steps(req, options)["events"]
    if save:
        name = setup["id"].replace("/", "_") + ("-var" if lengths and len(set(lengths)) > 1 else "")
        Path(save).mkdir(parents=True, exist_ok=True)
        kept = {
            "request": request,
            "lengths": lengths,
            "steps": steps,
            "set": label,
            "events": events,
        }
        with gzip.open(Path(save) / f"{name}.json.gz", "wt", compresslevel=9) as handle:
            handle.write(json.dumps(kept, separators=(",", ":")))
    real = al.replay(events)
    calc_req = parse_estimate_request(request)
    synth = al.replay(step_events(calc_req, lengths or [calc_req.seq_len] * steps))
    return {
        "id": setup["id"],
        "real_allocated": real.peak_allocated_bytes,
        "real_reserved": real.peak_reserved_bytes,
        "synthetic_allocated": synth.peak_allocated_bytes,
        "synthetic_reserved": synth.peak_reserved_bytes,
        "reserved_error": synth.peak_reserved_bytes / real.peak_reserved_bytes - 1,
        "slack_error": estimate_dict(request)["peak_reserved_bytes"] / real.peak_reserved_bytes - 1,
    }


def recorded_request(data: dict) -> dict:
    """The request of a kept sequence: one that names no library was traced with every key
    at its own default (``framework`` ``generic``, the oracle sweep's setups)."""
    return {"framework": "generic", **data["request"]}


def compare_saved(path: Path) -> dict:
    """A sequence kept by ``--save`` against calc's synthetic one (no torch needed)."""
    with gzip.open(path, "rt") as handle:
        data = json.load(handle)
    real = al.replay([tuple(e) for e in data["events"]])
    request = recorded_request(data)
    calc_req = parse_estimate_request(request)
    synth = al.replay(step_events(calc_req, data["lengths"] or [calc_req.seq_len] * data["steps"]))
    return {
        "id": path.name.removesuffix(".json.gz"),
        "set": data["set"],
        "real_allocated": real.peak_allocated_bytes,
        "real_reserved": real.peak_reserved_bytes,
        "synthetic_allocated": synth.peak_allocated_bytes,
        "synthetic_reserved": synth.peak_reserved_bytes,
        "reserved_error": synth.peak_reserved_bytes / real.peak_reserved_bytes - 1,
        "slack_error": estimate_dict(request)["peak_reserved_bytes"] / real.peak_reserved_bytes - 1,
    }


def _print(r: dict) -> None:
    mib = 2**20
    print(
        f"{r.get('set', ''):8s} {r['id']:34s} real alloc {r['real_allocated'] / mib:8.1f} res {r['real_reserved'] / mib:8.1f} MiB | "
        f"synthetic alloc {r['synthetic_allocated'] / mib:8.1f} res {r['synthetic_reserved'] / mib:8.1f} MiB | "
        f"synthetic {r['reserved_error']:+.1%}, today's slack {r['slack_error']:+.1%}",
        flush=True,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("ids", nargs="*")
    parser.add_argument("--lengths", default="")
    parser.add_argument("--micro-batch", type=int, default=0)
    parser.add_argument("--save", default="", help="folder for the recorded sequences (JSON)")
    parser.add_argument("--set", default="held_out", help="label of the kept sequences (--save)")
    parser.add_argument("--load", default="", help="compare the sequences kept in this folder")
    args = parser.parse_args()
    if args.load:
        results = [compare_saved(path) for path in sorted(Path(args.load).glob("*.json.gz"))]
        for r in results:
            _print(r)
        for label in sorted({r["set"] for r in results}):
            for key in ("reserved_error", "slack_error"):
                errs = [abs(r[key]) for r in results if r["set"] == label]
                print(
                    f"{label} {key}: n={len(errs)} median {statistics.median(errs):.1%} max {max(errs):.1%}"
                )
        return 0
    from benchmarks.oracle_sweep import setups

    lengths = [int(x) for x in args.lengths.split(",") if x] or None
    by_id = {s["id"]: s for s in setups()}
    for setup_id in args.ids or DEFAULT_IDS:
        _print(compare(by_id[setup_id], lengths, args.micro_batch or None, args.save, args.set))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
