"""The simulated allocator on the oracle's real allocation sequence vs calc's synthetic one.

``python -m benchmarks.oracle_allocator [ID ...]`` (needs torch, transformers and peft:
tools/requirements-measure.txt) traces each oracle setup (benchmarks.oracle_sweep ids) with
its storages' allocations and frees recorded in order (tools/oracle/tracker.py ``events``),
replays that sequence through calc.allocator, and replays calc.step_events' sequence for
the same request and step count. It prints, per setup, both peaks allocated and reserved and
the synthetic reserved's error against the replayed real one.
"""

from __future__ import annotations

import sys

from calc import allocator as al
from calc.request import parse_estimate_request
from calc.step_events import step_events

DEFAULT_IDS = ("llama/full", "mistral/lora-ckpt-reentrant", "qwen3/lora-r16-fp32", "llama/qlora-ckpt")
STEPS = 3


def compare(setup: dict) -> dict:
    from tools.oracle.run import normalise, run_steps

    body = dict(setup["request"], oracle=dict(setup["oracle"], steps=STEPS, record_events=True))
    req, options = normalise(body)
    real = al.replay(run_steps(req, options)["events"])
    calc_req = parse_estimate_request(setup["request"])
    synth = al.replay(step_events(calc_req, [calc_req.seq_len] * STEPS * calc_req.gradient_accumulation_steps))
    return {"id": setup["id"], "real_allocated": real.peak_allocated_bytes,
            "real_reserved": real.peak_reserved_bytes, "synthetic_allocated": synth.peak_allocated_bytes,
            "synthetic_reserved": synth.peak_reserved_bytes,
            "reserved_error": synth.peak_reserved_bytes / real.peak_reserved_bytes - 1}


def main(ids: list[str]) -> int:
    from benchmarks.oracle_sweep import setups

    by_id = {s["id"]: s for s in setups()}
    for setup_id in ids or DEFAULT_IDS:
        r = compare(by_id[setup_id])
        mib = 2 ** 20
        print(f"{r['id']:34s} real alloc {r['real_allocated'] / mib:8.1f} res {r['real_reserved'] / mib:8.1f} MiB | "
              f"synthetic alloc {r['synthetic_allocated'] / mib:8.1f} res {r['synthetic_reserved'] / mib:8.1f} MiB | "
              f"reserved {r['reserved_error']:+.1%}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
