"""The calibrated spread of ``min_device_bytes``: how far the replayed allocator's smallest
device is from what published runs needed.

``min_device_bytes`` (:func:`calc.step_events.simulate_request`) predicts the smallest card
memory on which the run's steps finish. Three kinds of published row observe that quantity:

- ``reserved_peak``: a fixed-shape run's reserved peak (``max_memory_reserved``) or its
  nvidia-smi figure (``validation/measured_peaks.csv``, measured rows, settings not
  ambiguous). The run finished on a card with that much memory in use: the device it
  needed is taken as the reserved peak plus what the allocator does not see (calc's CUDA
  context and NCCL buffers), or the nvidia-smi figure itself. On a card that large the
  cache did not have to be released, so this figure can only exceed the smallest device:
  the error is biased low and the range built from it errs on the large side.
- ``variable_length``: the same for runs padded to each batch's longest sample
  (``validation/variable_length_peaks.csv``, covered rows, today's requests).
- ``fit_boundary``: the largest length a publication fitted on a card, 25 % more not
  fitting (``validation/fit_boundaries.csv``, ``max_fits`` rows). The need at that length is
  at most the card, the need 25 % above it more: with ``P`` the prediction, the error
  ``(P - need) / need`` lies between ``P(L) / card - 1`` and ``P(1.25 L) / card - 1``; the row
  counts the geometric middle of both. Rows of one run that fitted or ran out of memory bound
  the error on one side only and count in the agreement of the verdict, not here; nor do
  lengths the publisher extrapolated rather than ran (:func:`accuracy.fit_boundaries.extrapolated`):
  several cards' rows would repeat one measurement.

The error is ``(predicted - measured) / measured`` as for :data:`calc.calibration.ERROR_BANDS`
and the bands are built by the same rule (:func:`accuracy.memory_loso.bands`): per method,
the wider of the method's percentile band (with at least :data:`calc.calibration.MIN_ROWS`
rows) and the band over all rows. The percentiles are chosen on held-out rows
(:func:`calibrated_tail`): the 10th and 90th when, each source left out, 80 % of its rows fall
inside the band of the others; wider ones (9th-91st, ...) until they do. The replay has no constant
fitted on these rows (the allocator slack does not enter it); the one fitted constant it reads,
:data:`calc.activations.COMPILE_KEPT_FRACTION` for ``torch.compile`` runs, is refitted without
the row's source (:func:`accuracy.memory_loso.fit_constants`), so every error is a held-out
one. The calibration is checked leave-one-source-out (:func:`coverage`): each source's rows
against the band computed from the other sources. ``python -m benchmarks.validate_fit_boundaries
--min-device`` prints it all; a test keeps :data:`calc.calibration.MIN_DEVICE_BANDS` equal to
:func:`bands`.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterator

from accuracy import fit_boundaries as fb
from accuracy import memory as vm
from accuracy import memory_loso as loso
from accuracy import variable_length as vl
from accuracy.stats import percentile
from calc import calibration
from calc.errors import CalcError
from calc.request import EstimateRequest, parse_estimate_request
from calc.step_events import AllocatorEstimate, simulate_lengths, simulated_lengths

KINDS = ("reserved_peak", "variable_length", "fit_boundary")


@dataclass(frozen=True)
class Row:
    """One published observation of the smallest device, against ``min_device_bytes``."""

    row_id: str
    kind: str  # one of KINDS
    source: str  # the publication (leave-one-source-out folds)
    method: str  # full | lora | qlora
    predicted_bytes: int
    measured_bytes: int  # the device the run needed (fit_boundary: the card)
    error: float  # (predicted - measured) / measured


def _replay(request: dict[str, object]) -> AllocatorEstimate:
    """:func:`_replay_request` of a request not yet validated."""
    return _replay_request(parse_estimate_request(request))


def _replay_request(req: EstimateRequest) -> AllocatorEstimate:
    """The replay of a request, never from :func:`simulate_request`'s cache (a fold may run
    with another ``COMPILE_KEPT_FRACTION``)."""
    return simulate_lengths(req, simulated_lengths(req))


def reserved_peak_rows(results: list[vm.RowResult] | None = None) -> list[Row]:
    """Measured reserved and nvidia-smi rows of ``measured_peaks.csv`` the replay covers."""
    results = vm.compare_rows() if results is None else results
    out = []
    for r in results:
        if not r.covered or r.metric not in ("reserved", "device") or "ambiguous" in r.flags:
            continue
        measured = r.measured_bytes + (r.device_extra_bytes if r.metric == "reserved" else 0)
        try:
            if r.request.get("torch_compile"):
                kept = loso.fit_constants(results, r.source_key).compile_kept
                with loso.compile_kept(kept):
                    predicted = _replay(r.request).min_device_bytes
            else:
                predicted = _replay(r.request).min_device_bytes
        except CalcError:
            continue
        out.append(
            Row(
                r.row_id,
                "reserved_peak",
                r.source_key,
                r.method.lower(),
                predicted,
                measured,
                (predicted - measured) / measured,
            )
        )
    return out


def variable_length_rows() -> list[Row]:
    """Covered rows of ``variable_length_peaks.csv``: reserved peak plus calc's outside memory
    (a row that measured the card's used memory already holds it), each judged on the request
    today's reading gives it (:func:`accuracy.variable_length.row_estimate_request`: one rank's
    figure on that rank's samples)."""
    from calc.memory import estimate_request

    out = []
    for row in vl.covered(vl.load()):
        req = vl.row_estimate_request(row)
        est = estimate_request(req)
        outside = est.device_total_bytes - est.peak_reserved_bytes
        # a reserved figure needs the memory outside the allocator; a used-memory one holds it
        measured = round(float(row["peak_gib"]) * vl.GIB) + (
            0 if vl.is_device_metric(row) else outside
        )
        predicted = _replay_request(req).min_device_bytes
        out.append(
            Row(
                row["id"],
                "variable_length",
                row["source"],
                req.method.value,
                predicted,
                measured,
                (predicted - measured) / measured,
            )
        )
    return out


def fit_boundary_rows() -> list[Row]:
    """``max_fits`` rows of ``fit_boundaries.csv``: the middle of the error's bounds."""
    out = []
    for row in fb.load():
        if row["outcome"] != "max_fits" or fb.extrapolated(row):
            continue
        request, card, length = fb.row_request(row), fb.memory_bytes(row), int(row["seq_len"])
        try:
            at = _replay({**request, "seq_len": length}).min_device_bytes
            above = _replay({**request, "seq_len": int(length * fb.ABOVE)}).min_device_bytes
        except CalcError:
            continue
        middle = math.sqrt(at * above)
        out.append(
            Row(
                row["id"],
                "fit_boundary",
                f"{row['source_url']} {row['source_section']}",
                str(request["method"]),
                round(middle),
                card,
                middle / card - 1,
            )
        )
    return out


@lru_cache(maxsize=1)
def rows() -> tuple[Row, ...]:
    """Every observation, in :data:`KINDS` order."""
    return (*reserved_peak_rows(), *variable_length_rows(), *fit_boundary_rows())


NOMINAL_COVERAGE = 0.80
"""The share of held-out rows a band must hold (the 10th-90th percentile band's nominal 80 %)."""

TAILS = tuple(range(10, -1, -1))
"""Tail percentiles tried, narrowest band first: the band runs from the ``tail``-th to the
``(100 - tail)``-th percentile of the signed errors."""


def band_at(errors: list[float], tail: int) -> tuple[float, float]:
    """The ``tail``-th and ``(100 - tail)``-th percentiles of ``errors``, rounded to 0.001."""
    return (round(percentile(errors, tail), 3), round(percentile(errors, 100 - tail), 3))


def bands(
    observed: tuple[Row, ...] | list[Row] | None = None, tail: int | None = None
) -> dict[str, tuple[float, float]]:
    """``{method: (low, high)}`` in :data:`calc.calibration.MIN_DEVICE_BANDS`' shape: the wider
    of the method's band (with :data:`calc.calibration.MIN_ROWS` rows) and the pooled one, both
    between the ``tail``-th and ``(100 - tail)``-th percentiles; ``tail`` defaults to
    :func:`calibrated_tail` of the rows."""
    observed = rows() if observed is None else observed
    if not observed:
        return {}
    if tail is None:
        tail = calibrated_tail(observed)
    p_lo, p_hi = band_at([r.error for r in observed], tail)
    out = {}
    for method in calibration.METHODS:
        cell = [r.error for r in observed if r.method == method]
        lo, hi = band_at(cell, tail) if len(cell) >= calibration.MIN_ROWS else (p_lo, p_hi)
        out[method] = (min(lo, p_lo), max(hi, p_hi))
    return out


def coverage(
    observed: tuple[Row, ...] | list[Row] | None = None, tail: int | None = None
) -> dict[str, tuple[int, int]]:
    """Leave-one-source-out: each source's rows against the band of the other sources at the
    same ``tail`` (default :func:`calibrated_tail`), ``{"all" | method | kind: (inside, rows)}``.
    A source alone has no other rows to be judged against, and is left out."""
    observed = rows() if observed is None else observed
    if tail is None:
        tail = calibrated_tail(observed)
    counts: dict[str, tuple[int, int]] = {}
    for source in dict.fromkeys(r.source for r in observed):
        others = [r for r in observed if r.source != source]
        if not others:
            continue
        table = bands(others, tail)
        for r in (x for x in observed if x.source == source):
            lo, hi = table[r.method]
            hit = lo - 1e-12 <= r.error <= hi + 1e-12
            for group in ("all", r.method, r.kind):
                a, n = counts.get(group, (0, 0))
                counts[group] = (a + hit, n + 1)
    return counts


def calibrated_tail(observed: tuple[Row, ...] | list[Row]) -> int:
    """The narrowest band of :data:`TAILS` whose held-out coverage reaches
    :data:`NOMINAL_COVERAGE`: the rows' sources err in ways of their own (one source's rows
    share a setup and a reading), so the 10th-90th percentile band of all rows holds fewer
    than 80 % of a source's rows when that source is left out; the band is widened until it
    does, on held-out rows only (the widest, the rows' extremes, when none does)."""
    for tail in TAILS:
        inside, n = coverage(observed, tail).get("all", (0, 0))
        if n and inside >= NOMINAL_COVERAGE * n:
            return tail
    return TAILS[-1]


@contextlib.contextmanager
def min_device_bands(table: dict[str, tuple[float, float]]) -> Iterator[None]:
    """Run estimates with other :data:`calc.calibration.MIN_DEVICE_BANDS` (read at call time
    by :func:`calc.calibration.min_device_range_bytes`); restores calc's bands on exit."""
    saved = dict(calibration.MIN_DEVICE_BANDS)
    calibration.MIN_DEVICE_BANDS.clear()
    calibration.MIN_DEVICE_BANDS.update(table)
    try:
        yield
    finally:
        calibration.MIN_DEVICE_BANDS.clear()
        calibration.MIN_DEVICE_BANDS.update(saved)


def fit_boundary_agreement(held_out: bool = False) -> tuple[int, int]:
    """Rows of ``fit_boundaries.csv`` on which the verdict judged on ``min_device_bytes``
    (:func:`accuracy.fit_boundaries.min_device_verdict`, whatever the switch) agrees with the
    publication (:func:`accuracy.fit_boundaries.agrees`), and the rows. ``held_out``: each row
    judged with the bands computed without its source's rows (:func:`bands`)."""
    agree = 0
    table = fb.load()
    held: dict[str, dict[str, tuple[float, float]]] = {}  # the bands without each source
    for row in table:
        request, card, length = fb.row_request(row), fb.memory_bytes(row), int(row["seq_len"])
        source = f"{row['source_url']} {row['source_section']}"
        if held_out and source not in held:
            held[source] = bands([r for r in rows() if r.source != source])
        own = held.get(source)
        with contextlib.nullcontext() if own is None else min_device_bands(own):
            at = fb.min_device_verdict(request, length, card)
            above = fb.min_device_verdict(request, int(length * fb.ABOVE), card)
        agree += fb.agrees(row["outcome"], at, above)
    return agree, len(table)


def figures() -> dict[str, object]:
    """What the methodology page publishes: rows and sources per kind, the bands, the
    held-out coverage, the fit-boundary agreement of the verdict judged on the figure."""
    observed = rows()
    tail = calibrated_tail(observed)
    inside, total = coverage(observed, tail)["all"]
    agree, boundaries = fit_boundary_agreement()
    held, _ = fit_boundary_agreement(held_out=True)
    return {
        "rows": len(observed),
        "sources": len({r.source for r in observed}),
        "by_kind": {k: sum(r.kind == k for r in observed) for k in KINDS},
        "bands": bands(observed, tail),
        "tail": tail,
        "coverage_inside": inside,
        "coverage_rows": total,
        "fit_boundary_agree": agree,
        "fit_boundary_rows": boundaries,
        "fit_boundary_agree_held_out": held,
    }


def report() -> list[str]:
    """Lines for ``python -m benchmarks.validate_fit_boundaries --min-device``."""
    observed = rows()
    lines = ["min_device_bytes against published needs (error = predicted / measured - 1):"]
    for r in observed:
        lines.append(
            f"  {r.kind:15s} {r.row_id:18s} {r.method:5s} predicted {r.predicted_bytes / 2**30:7.2f}"
            f" GiB  measured {r.measured_bytes / 2**30:7.2f} GiB  {r.error:+.1%}"
        )
    tail = calibrated_tail(observed)
    derived = bands(observed, tail)
    lines.append(
        f"  calibrated bands (p{tail}, p{100 - tail}: the narrowest holding"
        f" {NOMINAL_COVERAGE:.0%} of held-out rows), per method:"
    )
    for method, band in derived.items():
        note = (
            ""
            if calibration.MIN_DEVICE_BANDS.get(method) == band
            else f"   <- calc has {calibration.MIN_DEVICE_BANDS.get(method)}: update calc.calibration"
        )
        lines.append(f"    {method:5s} {band}{note}")
    for group, (a, n) in coverage(observed, tail).items():
        lines.append(f"  held-out coverage {group}: {a} of {n} ({a / n:.0%})")
    for held_out in (False, True):
        agree, n = fit_boundary_agreement(held_out)
        how = "bands without the row's source" if held_out else "calc's bands"
        lines.append(f"  fit boundaries, verdict on min_device_bytes ({how}): {agree} of {n}")
    return lines


__all__ = [
    "KINDS",
    "Row",
    "NOMINAL_COVERAGE",
    "TAILS",
    "band_at",
    "bands",
    "calibrated_tail",
    "coverage",
    "figures",
    "fit_boundary_agreement",
    "min_device_bands",
    "fit_boundary_rows",
    "report",
    "reserved_peak_rows",
    "rows",
    "variable_length_rows",
]
