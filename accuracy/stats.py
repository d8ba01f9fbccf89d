"""Small statistics shared by the accuracy checks and the benchmark scripts (standard library only)."""

from __future__ import annotations


def percentile(values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default method), ``q`` in [0, 100];
    NaN for no values."""
    data = sorted(values)
    if not data:
        return float("nan")
    pos = (len(data) - 1) * q / 100
    low = int(pos)
    high = min(low + 1, len(data) - 1)
    return data[low] + (data[high] - data[low]) * (pos - low)
