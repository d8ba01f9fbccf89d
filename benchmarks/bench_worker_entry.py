"""The calculator worker's entry (``calc_view.session.Session.handle``) in CPython: how many
times one request runs calc's request parser and its per-field checks, and how long it takes,
for a good request, one bad field and four bad fields.

Usage: ``python -m benchmarks.bench_worker_entry [--runs N]``. The point: one
``handle`` runs ``calc.run`` once; after a bad request, every field is checked once more on
its own (``calc.field_errors``) to name every bad field, not calc again per field.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import calc.plan
import calc.request
from calc_view import Session
from macros import calculator


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    session = Session("en", calculator.load_strings()["en"])
    good = calculator.default_request()
    cases = {
        "good": good,
        "1 bad field": good | {"seq_len": -1},
        "4 bad fields": good
        | {"seq_len": -1, "micro_batch_size": "x", "lora_rank": 0, "gpu": "gtx-480"},
    }
    counts = {"parse": 0, "check": 0}
    parse, check = calc.request.parse_estimate_request, calc.request.check_estimate_field

    def counted_parse(*args, **kwargs):
        counts["parse"] += 1
        return parse(*args, **kwargs)

    def counted_check(*args, **kwargs):
        counts["check"] += 1
        return check(*args, **kwargs)

    calc.request.parse_estimate_request = calc.plan.parse_estimate_request = counted_parse
    calc.request.check_estimate_field = counted_check
    print(f"{'request':14} {'parser runs':>11} {'field checks':>12} {'errors':>6} {'median ms':>9}")
    for name, request in cases.items():
        text = json.dumps(request)
        counts.update(parse=0, check=0)
        out = json.loads(session.handle("plan", text))
        parses, checks = counts["parse"], counts["check"]
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            session.handle("plan", text)
            times.append((time.perf_counter() - start) * 1000)
        print(
            f"{name:14} {parses:>11} {checks:>12} {len(out.get('errors', [])):>6} "
            f"{statistics.median(times):>9.1f}"
        )


if __name__ == "__main__":
    main()
