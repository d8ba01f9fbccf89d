"""Print calc's time model against published training throughput, leave-one-source-out.

    python -m benchmarks.validate_throughput      # fit, per-row table, summaries, not covered

The figures come from :func:`accuracy.throughput.compare` (which reads
``validation/measured_throughput.csv``, fits the time model's constants in-sample and once per
held-out source, and keeps the result in ``.cache/validate_throughput/``); this script prints
the per-row table, the summaries in-sample, leave-one-source-out and with calc's shipped
constants, which fitted constant rests on a single source, the QLoRA/LoRA pairs, the rows
not covered, and first contact (sources calc had never compared, judged before any change:
``validation/first_contact_throughput.csv``) per source, recorded and today, beside the
in-sample and leave-one-source-out headline.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # also runs as ``python benchmarks/validate_throughput.py``
    sys.path.insert(0, str(ROOT))

from accuracy.throughput import compare  # noqa: E402


def _print_stats(name: str, s: dict) -> None:
    if s.get("rows"):
        print(
            f"  {name:44} rows {s['rows']:>3}  median {s['median_abs_pct']:5.1f} %  "
            f"p90 {s['p90_abs_pct']:5.1f} %  max {s['max_abs_pct']:5.1f} %  signed {s['mean_signed_pct']:+6.1f} %"
        )


def main() -> int:
    result = compare()
    print(
        f"{'row':>4} {'workload':9} {'model':16} {'method':6} {'gpu':15} {'n':>3} "
        f"{'meas tok/s':>10} {'calc tok/s':>10} {'calc %':>7} {'in %':>7} {'LOSO %':>7}  note"
    )
    for r in result["rows"]:
        m = r["method"] + ("+fp8" if r["fp8"] else "")
        print(
            f"{r['row_id']:>4} {r['workload']:9} {r['model'][:16]:16} {m:6} {r['gpu']:15} "
            f"{r['num_gpus']:>3} {r['measured_tokens_per_second_per_gpu']:>10.0f} "
            f"{r['predicted_tokens_per_second_per_gpu']:>10.0f} {r['error_pct']:>+7.1f} "
            f"{r['in_sample_error_pct']:>+7.1f} {r['loso_error_pct']:>+7.1f}  {r['note']}"
        )
    print("\nfitted on all covered rows (in-sample):", json.dumps(result["fit"]))
    print("shipped in calc/timing.py:            ", json.dumps(result["shipped"]))
    for kind, title in (
        ("in_sample", "IN-SAMPLE fit"),
        ("loso", "LEAVE-ONE-SOURCE-OUT fit"),
        (None, "calc's shipped constants"),
    ):
        print(f"\nabsolute % error of tokens/s per GPU, {title}:")
        for name, s in result["summary"].items():
            _print_stats(name, s[kind] if kind else s)
    print("\nfitted constants and the sources they rest on (LOSO error of their rows):")
    for name, b in result["constant_basis"].items():
        flag = "SINGLE SOURCE" if b["single_source"] else f"{len(b['sources'])} sources"
        s = b["loso"]
        tail = (
            f"LOSO median {s['median_abs_pct']:.1f} %, p90 {s['p90_abs_pct']:.1f} %, max {s['max_abs_pct']:.1f} %"
            if s.get("rows")
            else "no rows"
        )
        print(
            f"  {name:32} {flag:14} {tail}  ({', '.join(x.replace('github.com/', '') for x in b['sources'])})"
        )
    print("\nQLoRA / LoRA speed, measured vs calc's counted dequantisation:")
    for q in result["qlora_ratio_check"]:
        calc_r = "n/a" if q["calc_ratio"] is None else f"{q['calc_ratio']:.2f}"
        print(
            f"  rows {q['rows']}: {q['model']} on {q['gpu']}: measured {q['measured_ratio']:.2f}, calc {calc_r}"
        )
    print(f"\nnot covered ({len(result['not_covered'])} rows):")
    for r in result["not_covered"]:
        print(f"  {r['row_id']:>4} {r['model'][:22]:22} {r['gpu'][:28]:28} {r['reason']}")
    _print_first_contact(result["summary"]["all"])
    return 0


def _pct3(f: dict) -> str:
    return f"{100 * f['median']:5.1f} / {100 * f['p90']:5.1f} / {100 * f['max']:6.1f} %"


def _print_first_contact(headline: dict) -> None:
    """First contact per source (recorded once, accuracy/first_contact_throughput.py), today's
    figures on the same rows, and the measured rows' in-sample and LOSO headline beside them."""
    from accuracy import first_contact_throughput as fc

    first = fc.summary()
    today = fc.now_beside_first()
    print(
        "\nfirst contact: sources calc had never compared, judged before any change "
        "(validation/first_contact_throughput.csv)"
    )
    print(
        f"  {'source':<58} {'n':>3} {'not cov.':>8}  {'recorded med / p90 / max':>26}  "
        f"{'med signed':>10}  {'today med / p90 / max':>26}"
    )
    for source, f in first.items():
        label = {
            fc.ALL: "all first-contact rows",
            fc.AFTER_FIXES: "rows added after the model's fixes",
        }.get(source, source.replace("github.com/", ""))
        print(
            f"  {label[:58]:<58} {f['count']:>3} {f['not_covered']:>8}  {_pct3(f):>26}  "
            f"{100 * f['median_signed']:+9.1f} %  {_pct3(today[source]):>26}"
        )
    print(
        "  one vote per source: median of the sources' medians "
        f"{100 * first[fc.ALL]['median_of_sources']:.1f} %"
    )
    commits = sorted({c.commit[:10] for c in fc.first_contacts()})
    print(f"  judged at calc commit {', '.join(commits)}")
    i, lo = headline["in_sample"], headline["loso"]
    print(
        f"  beside: measured rows in-sample {i['median_abs_pct']:.1f} / {i['p90_abs_pct']:.1f} / "
        f"{i['max_abs_pct']:.1f} %, leave-one-source-out {lo['median_abs_pct']:.1f} / "
        f"{lo['p90_abs_pct']:.1f} / {lo['max_abs_pct']:.1f} %"
    )


if __name__ == "__main__":
    raise SystemExit(main())
