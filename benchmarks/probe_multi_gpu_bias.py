"""Where calc's multi-GPU throughput leans, and against what: a probe, not a fit.

Usage: ``python -m benchmarks.probe_multi_gpu_bias``. Three tables, all from calc as it is
now (no constant changes here):

1. **Hidden communication.** For every covered row of
   ``validation/first_contact_throughput.csv`` that runs on several GPUs of one server
   (today's request, :func:`accuracy.first_contact_throughput.today_request`), the signed
   error of today's tokens/s per GPU beside the collective seconds calc hides under compute,
   as a share of the step's matmul seconds: ``(communication - exposed) / compute``.
   ``communication`` is every collective second of the step, found without reading calc's
   internals: the step is priced again on a link ``SLOWER`` times slower, where nothing is
   hidden any more, and its exposed seconds divided by ``SLOWER`` (ring latency, which does
   not scale, is left out; it is microseconds against these steps' milliseconds).
2. **The same on the fitted rows** (``validation/measured_throughput.csv``, with the
   constants calc fits on them): whether the lean is only in rows calc was not fitted on.
3. **Scaling pairs.** Rows of one source whose requests differ only in the GPU count (and
   sharding, accumulation, network): measured tokens/s per GPU at ``n`` GPUs over the same
   at one GPU, beside calc's ratio. calc's one-GPU error cancels, so what is left is what
   the GPU count itself costs that calc does not count.

What the tables say is written, with figures, in ``validation/README.md`` ("Multi-GPU
rows: where the lean grows").
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from dataclasses import replace
from typing import Any

from calc import timing

SLOWER = 1e4
"""How much slower the link is made to price every collective second as exposed."""

BINS = (0.05, 0.2, 0.5, 1.0)
"""Upper edges of the hidden-communication bins (share of the step's matmul seconds)."""

_LAST: list[tuple[timing.StepBreakdown, float]] = []


def _recording(original: Any) -> Any:
    """``timing.step_breakdown`` that also keeps, for the last call, the step and the
    collective seconds it holds (:data:`SLOWER`)."""

    def wrapped(c: Any, rates: Any, **kw: Any) -> timing.StepBreakdown:
        step = original(c, rates, **kw)
        if kw.get("num_gpus", 1) > 1:
            slow = replace(
                rates, link=replace(rates.link, bytes_per_s=rates.link.bytes_per_s / SLOWER)
            )
            kw2 = dict(kw)
            for key in ("group_link", "replica_link"):
                if kw2.get(key) is not None:
                    kw2[key] = replace(kw2[key], bytes_per_s=kw2[key].bytes_per_s / SLOWER)
            total = original(c, slow, **kw2).exposed_communication / SLOWER
        else:
            total = 0.0
        _LAST[:] = [(step, total)]
        return step

    return wrapped


def hidden_share(step: timing.StepBreakdown, total_comm: float) -> float:
    """Collective seconds hidden under compute, over the step's matmul seconds."""
    if step.compute <= 0:
        return 0.0
    return max(0.0, total_comm - step.exposed_communication) / step.compute


def _bin(share: float) -> str:
    low = 0.0
    for edge in BINS:
        if share < edge:
            return f"{low:.2f}-{edge:.2f}"
        low = edge
    return f">={BINS[-1]:.2f}"


def _stats(errors: list[float]) -> str:
    if not errors:
        return "-"
    abs_e = sorted(abs(e) for e in errors)
    p90 = statistics.quantiles(abs_e, n=10)[-1] if len(abs_e) > 1 else abs_e[0]
    return (
        f"n {len(errors):3d}  signed median {100 * statistics.median(errors):+6.1f} %  "
        f"|error| median {100 * statistics.median(abs_e):5.1f} %  p90 {100 * p90:6.1f} %"
    )


def first_contact_rows() -> list[dict[str, Any]]:
    """Table 1's rows: id, source, sharding, GPU count, error, hidden share, request."""
    from accuracy.first_contact_throughput import load_rows, today_request
    from calc.plan import Planner, parse_plan_request

    out = []
    original = timing.step_breakdown
    timing.step_breakdown = _recording(original)
    try:
        for row in load_rows():
            if not row["calc_request"]:
                continue
            request = today_request(row)
            try:
                req, opts = parse_plan_request({"dataset_tokens": 1e9, **request})
                _LAST.clear()
                t = Planner(req, opts).time(opts.gpu, req.num_gpus, req.sharding.value)
            except Exception:  # a row calc does not cover today: not this probe's business
                continue
            step, total = _LAST[0] if _LAST else (t.breakdown, 0.0)
            measured = float(row["tokens_per_second_per_gpu"])
            out.append(
                {
                    "id": row["id"],
                    "source": row["source"],
                    "sharding": req.sharding.value,
                    "num_gpus": req.num_gpus,
                    "one_server": req.num_gpus <= opts.gpus_per_node,
                    "error": t.tokens_per_second_per_gpu / measured - 1,
                    "predicted": t.tokens_per_second_per_gpu,
                    "measured": measured,
                    "hidden": hidden_share(t.breakdown, total) if req.num_gpus > 1 else 0.0,
                    "request": request,
                }
            )
    finally:
        timing.step_breakdown = original
    return out


def fitted_rows() -> list[dict[str, Any]]:
    """Table 2's rows: the fitted rows on several GPUs, with calc's fitted constants."""
    from accuracy import throughput as th

    params = th.calc_params()
    out = []
    for case in th.cases(th.load_rows()):
        if case.num_gpus <= 1:
            continue
        kw = dict(
            num_gpus=case.num_gpus,
            sharding=case.sharding,
            efficiency=params.eff(case.card_class),
            half_tokens=params.half_tokens,
            fp8=case.fp8,
            fp8_efficiency=params.fp8,
            **dict(case.kwargs),
        )
        step = timing.step_breakdown(case.counts, case.rates, **kw)
        slow = replace(
            case.rates,
            link=replace(case.rates.link, bytes_per_s=case.rates.link.bytes_per_s / SLOWER),
        )
        total = timing.step_breakdown(case.counts, slow, **kw).exposed_communication / SLOWER
        tokens = case.counts.tokens_micro * case.counts.accumulation
        out.append(
            {
                "id": case.row_id,
                "sharding": case.sharding.value,
                "error": tokens / step.step_seconds / case.measured - 1,
                "hidden": hidden_share(step, total),
            }
        )
    return out


def scaling_pairs(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Table 3: each multi-GPU row beside the one-GPU row of the same source and setup."""
    apart = ("num_gpus", "sharding", "sharding_engine", "gpus_per_node", "network")
    apart += ("gradient_accumulation_steps",)
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        setup = {k: v for k, v in row["request"].items() if k not in apart}
        groups[(row["source"], json.dumps(setup, sort_keys=True))].append(row)
    out = []
    for members in groups.values():
        ones = [r for r in members if r["num_gpus"] == 1]
        if not ones:
            continue
        one = ones[0]
        for row in members:
            if row["num_gpus"] == 1:
                continue
            measured = row["measured"] / one["measured"]
            predicted = row["predicted"] / one["predicted"]
            out.append(
                {
                    "id": row["id"],
                    "one": one["id"],
                    "num_gpus": row["num_gpus"],
                    "sharding": row["sharding"],
                    "measured": measured,
                    "predicted": predicted,
                    "error": predicted / measured - 1,
                }
            )
    return out


def by_bins(rows: list[dict[str, Any]], sharding: str) -> dict[str, list[float]]:
    """Errors of the rows of one sharding, by hidden-communication bin."""
    bins: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        if row["sharding"] == sharding:
            bins[_bin(row["hidden"])].append(row["error"])
    return dict(sorted(bins.items()))


def main() -> int:
    rows = first_contact_rows()
    one_server = [r for r in rows if r["num_gpus"] > 1 and r["one_server"]]
    print("1. first-contact rows on one server, today, by hidden communication / compute")
    for sharding in ("zero3", "zero2", "zero1", "ddp"):
        for label, errors in by_bins(one_server, sharding).items():
            print(f"   {sharding:6s} {label:>10s}  {_stats(errors)}")
    print(
        "   all one-GPU rows            ", _stats([r["error"] for r in rows if r["num_gpus"] == 1])
    )
    print("2. fitted rows (measured_throughput.csv) on several GPUs, by the same share")
    fitted = fitted_rows()
    for sharding in ("zero3", "zero2", "zero1", "ddp"):
        for label, errors in by_bins(fitted, sharding).items():
            print(f"   {sharding:6s} {label:>10s}  {_stats(errors)}")
    print("3. scaling pairs: (calc's n-GPU / 1-GPU ratio) over (the measured one) - 1")
    pairs = scaling_pairs(rows)
    for p in pairs:
        print(
            f"   {p['id']:12s} vs {p['one']:12s} n={p['num_gpus']:<2d} {p['sharding']:6s} "
            f"measured {p['measured']:.2f}  calc {p['predicted']:.2f}  {100 * p['error']:+6.1f} %"
        )
    print("   all pairs                   ", _stats([p["error"] for p in pairs]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
