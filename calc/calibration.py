"""Calibrated ranges around the memory estimate, and the three-state fit verdict.

The memory model's error is measured, not guessed: ``accuracy/memory_loso.py`` predicts
every published measurement of ``validation/measured_peaks.csv`` with the fitted constants
refitted without that measurement's source (leave-one-source-out), and takes, per method
and metric, the 10th and 90th percentiles of the signed error ``e = (predicted -
measured) / measured``. Since ``measured = predicted / (1 + e)``, a prediction ``P`` comes
with the range ``[P / (1 + p90), P / (1 + p10)]``: the middle 80 % of what the held-out
sources measured for such a prediction. ``python -m benchmarks.validate_memory`` prints
the bands it derives and what share of held-out rows fell inside (the calibration), and a
test keeps :data:`ERROR_BANDS` equal to them.

The replayed allocator's smallest device (``min_device_bytes``) has a band of its own,
:data:`MIN_DEVICE_BANDS`, measured the same way on the rows that observe it.

Verdict of a card (``plan``'s ``fits`` entries): the device range is the range of
``min_device_bytes`` where the estimate carries it, else the reserved range plus what the
allocator does not see (CUDA context, NCCL buffers), each end multiplied by
``1 + safety_margin`` when the user sets one (default 0: no margin beyond the range).
``fits`` when the upper end is at most the card's memory, ``does_not_fit`` when the lower
end is above it, ``borderline`` in between.
"""

from __future__ import annotations

import math

METHODS = ("full", "lora", "qlora")
METRICS = ("allocated", "reserved")
MIN_ROWS = 3
"""A (method, metric) cell with fewer held-out rows than this has no band of its own (three
rows are the fewest with a 10th and a 90th percentile apart from the extremes' mean)."""

ERROR_BANDS: dict[tuple[str, str], tuple[float, float]] = {
    ("full", "allocated"): (-0.108, 0.060),
    ("lora", "allocated"): (-0.108, 0.060),
    ("qlora", "allocated"): (-0.108, 0.060),
    ("full", "reserved"): (-0.108, 0.215),
    ("lora", "reserved"): (-0.195, 0.072),
    ("qlora", "reserved"): (-0.164, 0.060),
}
"""``(method, metric) -> (p10, p90)`` of the signed leave-one-source-out error (fractions),
from ``python -m benchmarks.validate_memory`` (section "calibrated bands")."""

MIN_DEVICE_BANDS: dict[str, tuple[float, float]] = {
    "full": (-0.285, 0.145),
    "lora": (-0.293, 0.279),
    "qlora": (-0.244, 0.145),
}
"""``method -> (low, high)`` percentiles (8th and 92nd at the last derivation, 2026-12-06 with the
thirty-third session's variable-length row vl-t33a1: the narrowest pair
that holds 80 % of the rows of each source left out, ``accuracy.min_device.calibrated_tail``) of the signed error of ``min_device_bytes`` (the replayed
allocator's smallest device, :func:`calc.step_events.simulate_request`) against what published
runs needed: fixed-shape and variable-length reserved peaks plus the memory outside the
allocator, and the largest lengths that fitted a card, those a publisher extrapolated left out
(``accuracy/min_device.py``), from
``python -m benchmarks.validate_fit_boundaries --min-device`` (section "calibrated bands")."""

VERDICTS = ("fits", "borderline", "does_not_fit")


def range_bytes(value: int, method: str, metric: str) -> list[int]:
    """``[low, high]`` bytes for a predicted ``value``: ``value / (1 + p90)`` and
    ``value / (1 + p10)``, never reversed."""
    return _band_range(value, *ERROR_BANDS[(method, metric)])


def min_device_range_bytes(value: int, method: str) -> list[int]:
    """``[low, high]`` bytes around a predicted ``min_device_bytes``: ``value / (1 + p90)`` and
    ``value / (1 + p10)`` of :data:`MIN_DEVICE_BANDS`, never reversed."""
    return _band_range(value, *MIN_DEVICE_BANDS[method])


def _band_range(value: int, p10: float, p90: float) -> list[int]:
    """``[low, high]``: the measurements ``value / (1 + e)`` a prediction ``value`` stands for
    at the band's errors ``p90`` and ``p10``, outward to whole bytes, never reversed."""
    low = math.floor(value / (1 + p90))
    high = math.ceil(value / (1 + p10))
    return [min(low, high), max(low, high)]


def verdict(
    device_low: int, device_high: int, memory_bytes: int, safety_margin: float = 0.0
) -> str:
    """``fits`` | ``borderline`` | ``does_not_fit`` of a device range against a card."""
    factor = 1.0 + safety_margin
    if math.ceil(device_high * factor) <= memory_bytes:
        return "fits"
    if math.ceil(device_low * factor) > memory_bytes:
        return "does_not_fit"
    return "borderline"


__all__ = [
    "ERROR_BANDS",
    "METHODS",
    "METRICS",
    "MIN_DEVICE_BANDS",
    "MIN_ROWS",
    "VERDICTS",
    "min_device_range_bytes",
    "range_bytes",
    "verdict",
]
