"""Print the memory model's error on every row of validation/measured_peaks.csv.

Usage: ``python -m benchmarks.validate_memory`` (from the repository root).
Per row: predicted, measured, signed error; then per method, per source, and overall
the median and 90th-percentile absolute error; the fits of the allocator slack, of the FSDP1
slack (with its per-row spread) and of torch.compile's kept share; leave-one-source-out (every fitted constant refitted without
each source) in-sample and held-out errors by method, framework, metric and source; the
calibrated bands of calc's ranges and their held-out coverage; first contact (sources calc had
never seen, judged before any change: validation/first_contact_peaks.csv) per source beside the
in-sample and held-out headline; then the rows not covered and why.
"""

from __future__ import annotations

from accuracy.memory import (
    COMPILE_FIT_ROWS,
    compare_rows,
    fit_allocator_slack,
    fit_compile_kept,
    fit_fsdp1_slack,
    fsdp1_slack_values,
    summary,
)
from accuracy.stats import percentile
from calc.activations import COMPILE_KEPT_FRACTION
from calc.memory import ALLOCATOR_SLACK_FRACTION, FSDP1_ALLOCATOR_SLACK_FRACTION

GIB = 2**30


def _fmt_summary(label: str, s) -> str:
    if not s.count:
        return f"{label:<34} n=0"
    return (
        f"{label:<34} n={s.count:<3d} median {100 * s.median_abs_error:5.1f} %  "
        f"p90 {100 * s.p90_abs_error:5.1f} %  max {100 * s.max_abs_error:5.1f} % (row {s.worst_row})"
    )


def main() -> int:
    results = compare_rows()
    print(
        f"{'row':>4} {'source':<10} {'model':<24} {'method':<6} {'metric':<12} "
        f"{'pred GiB':>9} {'meas GiB':>9} {'error':>8}  flags"
    )
    for r in results:
        if not r.covered:
            continue
        print(
            f"{r.row_id:>4} {r.source:<10} {r.model[:24]:<24} {r.method:<6} {r.metric:<12} "
            f"{r.predicted_bytes / GIB:9.2f} {r.measured_bytes / GIB:9.2f} "
            f"{100 * r.error:+7.1f} %  {','.join(r.flags)}"
        )
    print()
    print(_fmt_summary("all covered rows", summary(results)))
    for method in ("full", "LoRA", "QLoRA"):
        print(
            _fmt_summary(f"  method {method}", summary(results, lambda r, m=method: r.method == m))
        )
    for source in ("torchtune", "litgpt", "zero-paper"):
        print(
            _fmt_summary(f"  source {source}", summary(results, lambda r, s=source: r.source == s))
        )
    print(
        _fmt_summary(
            "  without torch.compile rows", summary(results, lambda r: "compile" not in r.flags)
        )
    )
    print(
        _fmt_summary(
            "  metric stated (not assumed)",
            summary(results, lambda r: "metric_assumed" not in r.flags),
        )
    )
    fit = fit_allocator_slack(results)
    print()
    print(
        f"allocator slack: calc uses {ALLOCATOR_SLACK_FRACTION:.3f}; fitted on rows "
        f"{','.join(fit.fit_rows)} (stated max_memory_reserved): {fit.fraction:.3f}"
    )
    print(
        _fmt_summary("  fitted slack on rows not fitted", fit.test_summary)
        + f"  rows {','.join(fit.test_rows)}"
    )
    values = fsdp1_slack_values(results)
    fsdp1 = fit_fsdp1_slack(results)
    spread = sorted(values.values())
    print(
        f"FSDP1 slack (fsdp_wrap_floor, output kept): calc uses {FSDP1_ALLOCATOR_SLACK_FRACTION:.3f}; "
        f"fitted on rows {','.join(values)}: {fsdp1 if fsdp1 is not None else float('nan'):.3f}"
    )
    if spread:
        print(
            f"  per-row measured/allocated - 1: min {spread[0]:.3f}  p10 {percentile(spread, 10):.3f}  "
            f"median {percentile(spread, 50):.3f}  p90 {percentile(spread, 90):.3f}  max {spread[-1]:.3f}"
        )
    cfit = fit_compile_kept(results)
    print(
        f"torch.compile kept share: calc uses {COMPILE_KEPT_FRACTION:.3f}; fitted on rows "
        f"{','.join(COMPILE_FIT_ROWS)} ({cfit.measured_saving / GIB:.2f} GiB saved of "
        f"{cfit.removable / GIB:.2f} removable): {cfit.kept:.3f}"
    )
    print(
        _fmt_summary("  compiled rows not fitted", cfit.test_summary)
        + f"  rows {','.join(cfit.test_rows)}"
    )
    _print_loso(results)
    _print_first_contact(results)
    print()
    print("not covered:")
    for r in results:
        if not r.covered:
            print(f"{r.row_id:>4} {r.source:<10} {r.model[:24]:<24} {r.method:<6} {r.reason}")
    return 0


def _print_loso(results) -> None:
    """Leave-one-source-out: every fitted constant refitted without each source (module doc
    of accuracy/memory_loso.py), errors in-sample and held out, ranges and their coverage."""
    from accuracy import memory_loso as lm
    from calc.calibration import ERROR_BANDS

    loso = lm.run(results)
    print()
    print("leave-one-source-out (LOSO): constants refitted without each source")
    print(
        f"  {'held-out source':<44} {'rows':>4} {'slack':>6} {'FSDP1':>6} {'compile kept':>12}  rule"
    )
    for source, c in loso.folds.items():
        n = sum(1 for r in results if r.source_key == source and r.covered)
        print(
            f"  {source[:44]:<44} {n:>4} {c.slack:6.3f} {c.slack_fsdp1:6.3f} {c.compile_kept:12.3f}  {c.compile_rule}"
        )
    print()
    print(
        f"  {'group':<52} {'n':>3}  {'in-sample med / p90 / max':>27}  {'LOSO med / p90 / max':>24}"
    )
    for gid, f in lm.report(loso).items():
        label = GROUP_LABELS.get(gid, gid.replace(":", " "))
        print(f"  {label[:52]:<52} {f['count']:>3}  {_trio(f, 'in'):>27}  {_trio(f, 'loso'):>24}")
    print()
    print(
        "calibrated bands (signed LOSO error, wider of the method-metric cell's p10-p90 and all rows'):"
    )
    derived = lm.bands(loso.held_out)
    for key, (lo, hi) in derived.items():
        mark = (
            ""
            if ERROR_BANDS.get(key) == (lo, hi)
            else f"   <- calc has {ERROR_BANDS.get(key)}: update calc.calibration"
        )
        print(f"  {key[0]:<6} {key[1]:<10} [{100 * lo:+6.1f} %, {100 * hi:+6.1f} %]{mark}")
    cov = lm.range_coverage(loso)
    print("range calibration (held-out rows inside the band computed without their source):")
    for group, (hit, n) in sorted(cov.items()):
        print(f"  {group:<6} {hit}/{n} = {100 * hit / n:.0f} %")
    rules = lm.coverage_by_rule(loso)
    print(
        "  rules compared: "
        + ", ".join(f"{k} {h}/{n} = {100 * h / n:.0f} %" for k, (h, n) in rules.items())
    )


def _print_first_contact(results) -> None:
    """First contact per source (recorded once, accuracy/first_contact.py), beside the in-sample
    and leave-one-source-out figures of the measured rows, and calc's figures on the same rows today."""
    from accuracy import first_contact as fc
    from accuracy import memory_loso as lm

    head = lm.report(lm.run(results))["measured"]
    first = fc.summary()
    today = fc.now_beside_first()
    print()
    print(
        "first contact: sources calc had never seen, judged before any change (validation/first_contact_peaks.csv)"
    )
    print(
        f"  {'source':<60} {'n':>3} {'not cov.':>8}  {'med / p90 / max abs':>23}  {'med signed':>10}  {'today med / p90':>16}"
    )
    for source, f in first.items():
        label = "all first-contact rows" if source == fc.ALL else source.replace("github.com/", "")
        t = today[source]
        print(
            f"  {label[:60]:<60} {f['count']:>3} {f['not_covered']:>8}  "
            f"{100 * f['median']:5.1f} / {100 * f['p90']:5.1f} / {100 * f['max']:5.1f} %  "
            f"{100 * f['median_signed']:+9.1f} %  {100 * t['median']:5.1f} / {100 * t['p90']:5.1f} %"
        )
    print(
        f"  one vote per source: median of the sources' medians {100 * first[fc.ALL]['median_of_sources']:.1f} %"
    )
    commits = sorted({c.commit[:10] for c in fc.first_contacts()})
    print(f"  judged at calc commit {', '.join(commits)}")
    for source, framework in fc.stacks().items():
        print(
            f"  today under its own profile ({fc.STACKS_PATH.name}): {source[11:60]} -> {framework}"
        )
    print(
        f"  beside: measured rows in-sample {_trio(head, 'in')}, leave-one-source-out {_trio(head, 'loso')}"
    )


GROUP_LABELS = {
    "measured": "measured rows (headline)",
    "measured_unfitted": "measured rows no constant was fitted on",
    "metric_stated": "metric stated (not assumed)",
}


def _trio(f: dict, prefix: str) -> str:
    return (
        f"{100 * f[prefix + '_median']:5.1f} / {100 * f[prefix + '_p90']:5.1f} / "
        f"{100 * f[prefix + '_max']:5.1f} %"
    )


if __name__ == "__main__":
    raise SystemExit(main())
