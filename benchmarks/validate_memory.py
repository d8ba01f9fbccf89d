"""Print the memory model's error on every row of validation/measured_peaks.csv.

Usage: ``python -m benchmarks.validate_memory`` (from the repository root).
Per row: predicted, measured, signed error; then per method, per source, and overall
the median and 90th-percentile absolute error; then the rows not covered and why.
"""

from __future__ import annotations

from benchmarks.validation_memory import (COMPILE_FIT_ROWS, compare_rows, fit_allocator_slack,
                                          fit_compile_kept, summary)
from calc.activations import COMPILE_KEPT_FRACTION
from calc.memory import ALLOCATOR_SLACK_FRACTION

GIB = 2 ** 30


def _fmt_summary(label: str, s) -> str:
    if not s.count:
        return f"{label:<34} n=0"
    return (f"{label:<34} n={s.count:<3d} median {100 * s.median_abs_error:5.1f} %  "
            f"p90 {100 * s.p90_abs_error:5.1f} %  max {100 * s.max_abs_error:5.1f} % (row {s.worst_row})")


def main() -> int:
    results = compare_rows()
    print(f"{'row':>4} {'source':<10} {'model':<24} {'method':<6} {'metric':<12} "
          f"{'pred GiB':>9} {'meas GiB':>9} {'error':>8}  flags")
    for r in results:
        if not r.covered:
            continue
        print(f"{r.row_id:>4} {r.source:<10} {r.model[:24]:<24} {r.method:<6} {r.metric:<12} "
              f"{r.predicted_bytes / GIB:9.2f} {r.measured_bytes / GIB:9.2f} "
              f"{100 * r.error:+7.1f} %  {','.join(r.flags)}")
    print()
    print(_fmt_summary("all covered rows", summary(results)))
    for method in ("full", "LoRA", "QLoRA"):
        print(_fmt_summary(f"  method {method}", summary(results, lambda r, m=method: r.method == m)))
    for source in ("torchtune", "litgpt", "zero-paper"):
        print(_fmt_summary(f"  source {source}", summary(results, lambda r, s=source: r.source == s)))
    print(_fmt_summary("  without torch.compile rows", summary(results, lambda r: "compile" not in r.flags)))
    print(_fmt_summary("  metric stated (not assumed)", summary(results, lambda r: "metric_assumed" not in r.flags)))
    fit = fit_allocator_slack(results)
    print()
    print(f"allocator slack: calc uses {ALLOCATOR_SLACK_FRACTION:.3f}; fitted on rows "
          f"{','.join(fit.fit_rows)} (stated max_memory_reserved): {fit.fraction:.3f}")
    print(_fmt_summary("  fitted slack on rows not fitted", fit.test_summary) + f"  rows {','.join(fit.test_rows)}")
    cfit = fit_compile_kept(results)
    print(f"torch.compile kept share: calc uses {COMPILE_KEPT_FRACTION:.3f}; fitted on rows "
          f"{','.join(COMPILE_FIT_ROWS)} ({cfit.measured_saving / GIB:.2f} GiB saved of "
          f"{cfit.removable / GIB:.2f} removable): {cfit.kept:.3f}")
    print(_fmt_summary("  compiled rows not fitted", cfit.test_summary) + f"  rows {','.join(cfit.test_rows)}")
    print()
    print("not covered:")
    for r in results:
        if not r.covered:
            print(f"{r.row_id:>4} {r.source:<10} {r.model[:24]:<24} {r.method:<6} {r.reason}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
