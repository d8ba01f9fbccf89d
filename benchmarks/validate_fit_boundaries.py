"""calc's verdict against published fit boundaries: ``python -m benchmarks.validate_fit_boundaries``.

Prints, per row of validation/fit_boundaries.csv (:mod:`accuracy.fit_boundaries`), the verdict
at the published length, 25 % above it, calc's largest length that is not ``does_not_fit``
and whether the verdict agrees; then the share of rows that agree, the error of the largest
length and the recorded first-contact agreement. ``--min-device`` adds the verdict judged on
``min_device_bytes`` with its calibrated range, and that range's derivation
(:mod:`accuracy.min_device`: each row's error, the bands, the held-out coverage); ``--first-contact`` records the rows not yet judged. Then the published
reserved peaks of variable-length runs (:mod:`accuracy.variable_length`): each row today and the
recorded first contact (median and p90 of ``|error|``).
"""

from __future__ import annotations

import argparse

from accuracy import min_device, variable_length
from accuracy.fit_boundaries import (
    ABOVE,
    agrees,
    first_contact_summary,
    judge_row,
    load,
    memory_bytes,
    min_device_verdict,
    record_first_contact,
    row_request,
    summary,
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--first-contact", action="store_true", help="record unjudged rows")
    parser.add_argument(
        "--min-device", action="store_true", help="also the verdict on min_device_bytes"
    )
    args = parser.parse_args()
    rows = load()
    judged = [judge_row(r) for r in rows]
    for j in judged:
        err = "" if j.error is None else f" error {j.error:+.1%}"
        print(
            f"{j.row_id:22s} {j.outcome:8s} L={j.seq_len:>7d} verdict {j.verdict:12s} "
            f"x{ABOVE} {j.verdict_above:12s} largest {j.largest}{err} "
            f"{'agrees' if j.agrees else 'DISAGREES'}"
        )
    print(summary(judged))
    if args.min_device:
        count = 0
        for row in rows:
            request, card, n = (
                row_request(row),
                memory_bytes(row),
                int(row["seq_len"]),
            )
            at = min_device_verdict(request, n, card)
            above = min_device_verdict(request, int(n * ABOVE), card)
            ok = agrees(row["outcome"], at, above)
            count += ok
            print(f"{row['id']:22s} min_device verdict {at:12s} x{ABOVE} {above:12s} {ok}")
        print(f"verdict on min_device_bytes agrees on {count} of {len(rows)}")
        print("\n".join(min_device.report()))
    if args.first_contact:
        record_first_contact(rows, judged)
    print(first_contact_summary(load()))
    print("\n".join(variable_length.report()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
