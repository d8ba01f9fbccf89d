"""Where calc's multi-GPU throughput leans, and against what: a probe, not a fit.

Usage: ``python -m benchmarks.probe_multi_gpu_bias``. Three tables, all from calc as it is
now (nothing here changes a constant):

1. **Hidden communication** (:func:`accuracy.first_contact_throughput.multi_gpu_lean`, the
   table the validation page publishes): today's signed error on the first-contact rows
   that run on several GPUs of one server, by sharding and by the collective seconds calc
   hides under compute as a share of the step's matmul seconds
   (:func:`accuracy.first_contact_throughput.hidden_share`, from
   ``StepBreakdown.communication``).
2. **The same on the fitted rows** (``validation/measured_throughput.csv``, with the
   constants calc fits on them): whether the lean is only in rows calc was not fitted on.
3. **Scaling pairs** (:func:`accuracy.first_contact_throughput.scaling_pairs`): rows of one
   source and setup at one GPU and at several; calc's ratio over the measured one.

What the tables say is written, with figures, in ``validation/README.md`` ("Multi-GPU rows:
where the lean grows").
"""

from __future__ import annotations

from typing import Any

from accuracy import first_contact_throughput as fc


def fitted_steps() -> list[dict[str, Any]]:
    """The fitted rows on several GPUs: id, sharding, signed error with calc's fitted
    constants, hidden share."""
    from accuracy import throughput as th

    params = th.calc_params()
    out = []
    for case in th.cases(th.load_rows()):
        if case.num_gpus <= 1:
            continue
        step = th.breakdown_with(case, params)
        tokens = case.counts.tokens_micro * case.counts.accumulation
        out.append(
            {
                "id": case.row_id,
                "sharding": case.sharding.value,
                "num_gpus": case.num_gpus,
                "one_server": True,  # grouped with the rest: the fitted rows' servers vary
                "error": tokens / step.step_seconds / case.measured - 1,
                "hidden": fc.hidden_share(step),
            }
        )
    return out


def _line(label: str, f: dict) -> str:
    return (
        f"   {label:<18s} n {f['count']:3d}  signed median {100 * f['median_signed']:+6.1f} %  "
        f"|error| median {100 * f['median']:5.1f} %  p90 {100 * f['p90']:6.1f} %"
    )


def main() -> int:
    steps = fc.today_steps()
    print("1. first-contact rows on one server, today, by sharding and hidden communication")
    for key, f in fc.multi_gpu_lean(steps).items():
        print(_line(key, f))
    print("2. fitted rows (measured_throughput.csv) on several GPUs, the same grouping")
    for key, f in fc.multi_gpu_lean(fitted_steps()).items():
        if key != "one_gpu":
            print(_line(key, f))
    print("3. scaling pairs: (calc's n-GPU / 1-GPU ratio) over (the measured one) - 1")
    pairs = fc.scaling_pairs(steps)
    for p in pairs:
        print(
            f"   {p['id']:12s} vs {p['one']:12s} n={p['num_gpus']:<2d} {p['sharding']:6s} "
            f"measured {p['measured']:.2f}  calc {p['predicted']:.2f}  {100 * p['error']:+6.1f} %"
        )
    print(_line("all pairs", fc.stats([p["error"] for p in pairs])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
