"""What judging ``min_device_bytes`` changes: ``python -m benchmarks.verdict_basis_changes``.

For every model preset x method at the site's reference setup (:data:`calc.reference.SETUP`,
the method's precision), the card table a plan gives (every catalogue card,
:func:`calc.recommend.fits_table`) judged on the device total (``calc.memory.SIMULATED_VERDICT``
off) and on ``min_device_bytes`` (on): how many card verdicts change, and from what to what.
``--requests FILE``: the plan requests of a JSON list instead (e.g. those a site build made),
each judged on its own card and on every card. One replay per setup; the replays of the
presets take a few minutes in CPython.
"""

from __future__ import annotations

import argparse
import collections
import json

from calc import gpus, memory, presets, recommend
from calc.errors import CalcError
from calc.plan import parse_plan_request
from calc.reference import PRECISION, SETUP


def preset_requests() -> list[dict]:
    return [
        {**SETUP, "model": model, "method": method, "precision": PRECISION[method]}
        for model in presets.preset_ids()
        for method in ("full", "lora", "qlora")
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", help="a JSON list of plan requests")
    args = parser.parse_args()
    if args.requests:
        with open(args.requests, encoding="utf-8") as handle:
            bodies = json.load(handle)
    else:
        bodies = preset_requests()
    cards = list(gpus.all_gpus())
    changed: collections.Counter[tuple[str, str]] = collections.Counter()
    own: collections.Counter[tuple[str, str]] = collections.Counter()
    judged = setups = 0
    for body in bodies:
        try:
            req, options = parse_plan_request({"gpu": "h100-sxm", "dataset_tokens": 1e8, **body})
            off = memory.estimate_request(req)
        except CalcError:
            continue
        on = memory.with_min_device(req, off)
        if on.verdict_basis != "min_device_bytes":
            continue
        setups += 1
        before = recommend.fits_table(off.to_dict(), cards, options.safety_margin)
        after = recommend.fits_table(on.to_dict(), cards, options.safety_margin)
        for card in cards:
            judged += 1
            a, b = before[card.id]["verdict"], after[card.id]["verdict"]
            if a != b:
                changed[(a, b)] += 1
        a, b = before[options.gpu.id]["verdict"], after[options.gpu.id]["verdict"]
        own[(a, b) if a != b else ("same", "same")] += 1
    print(f"{setups} setups, {judged} card verdicts: {sum(changed.values())} change")
    for (a, b), n in changed.most_common():
        print(f"  {a:12s} -> {b:12s} {n}")
    if args.requests:
        moved = sum(n for k, n in own.items() if k != ("same", "same"))
        print(f"the request's own card: {moved} of {sum(own.values())} change")
        for (a, b), n in own.most_common():
            if a != "same":
                print(f"  {a:12s} -> {b:12s} {n}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
