"""The tail of calc's length distribution against a published histogram:
``python -m benchmarks.length_tail``.

calc fits a log-normal to ``mean`` and ``p90`` (:func:`calc.lengths.fit`). The variable-length
rows (``validation/variable_length_peaks.csv``) whose ``length_source`` publishes more quantiles
than the request carries (the AlpacaDataCleaned histogram: mean, p90 and p99) show how far the
fitted tail lies from the data's. Printed per such source: the published quantiles, the
log-normal's, and those of two lighter-tailed families fitted to the same mean and p90 (gamma and
Weibull, each with two parameters, as the log-normal), and where the source publishes a p99 the
two-piece log-normal calc fits when a request gives it (``length_stats.p99``: the body through
mean and p90, the tail through p90 and p99), then the expected longest sample of the rows' runs
(``samples_seen``) under each, clipped at ``max``. A comparison on one histogram: it says how far
the family's tail is off there, not which family fits text lengths in general.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from statistics import NormalDist

from accuracy import variable_length
from calc.lengths import LengthStats, expected_longest, fit, tail

_NORMAL = NormalDist()


def _bisect(f, lo: float, hi: float, target: float) -> float:
    """``x`` in ``[lo, hi]`` with ``f(x) = target``, ``f`` increasing."""
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if f(mid) < target else (lo, mid)
    return (lo + hi) / 2


def _gamma_cdf(x: float, k: float) -> float:
    """Regularised lower incomplete gamma ``P(k, x)`` (unit scale), by its series."""
    if x <= 0:
        return 0.0
    term = total = 1.0 / k
    n = k
    while term > 1e-16 * total:
        n += 1
        term *= x / n
        total += term
    return min(1.0, total * math.exp(-x + k * math.log(x) - math.lgamma(k)))


def gamma_family(mean: float, p90: float):
    """Quantile function of the gamma with this mean and p90 (shape by bisection)."""

    def p90_over_mean(k: float) -> float:  # falls as the shape grows
        return _bisect(lambda x: _gamma_cdf(x, k), 0.0, 50 * k + 50, 0.9) / k

    k = _bisect(lambda s: -p90_over_mean(s), 0.05, 200.0, -p90 / mean)
    scale = mean / k
    return lambda p: scale * _bisect(lambda x: _gamma_cdf(x, k), 0.0, 50 * k + 200, p)


def weibull_family(mean: float, p90: float):
    """Quantile function of the Weibull with this mean and p90 (shape by bisection)."""

    def p90_over_mean(c: float) -> float:
        return math.log(10) ** (1 / c) / math.gamma(1 + 1 / c)

    c = _bisect(lambda s: -p90_over_mean(s), 0.2, 50.0, -p90 / mean)
    scale = mean / math.gamma(1 + 1 / c)
    return lambda p: scale * (-math.log(1 - p)) ** (1 / c)


def expected_longest_of(quantile, n: int, cap: float, nodes: int = 2000) -> float:
    """``E[min(cap, longest of n)]`` from a quantile function: ``int_0^1 Q(v^(1/n)) dv`` in
    ``w = sqrt(1 - v)`` by the midpoint rule, as :func:`calc.lengths.expected_longest`."""
    total = 0.0
    for i in range(nodes):
        w = (i + 0.5) / nodes
        p = -math.expm1(math.log(1 - w * w) / n)
        total += min(cap, quantile(1 - p)) * 2 * w
    return total / nodes


def two_piece(stats: LengthStats, top: int) -> Callable[[float], float]:
    """Quantile function of calc's fit for ``stats`` (with ``p99``: the two-piece log-normal)."""
    mu, sigma, _ = fit(stats, top)
    split = tail(stats)

    def quantile(p: float) -> float:
        z = _NORMAL.inv_cdf(p)
        if split is None or z <= split[0]:
            return math.exp(mu + sigma * z)
        return math.exp(split[1] + split[2] * z)

    return quantile


def published_quantiles(text: str) -> dict[str, int]:
    """``mean``, ``pNN`` figures a row's ``length_source`` names (``mean 225, p90 442``)."""
    return {name: int(value) for name, value in re.findall(r"\b(mean|p\d\d) (\d+)\b", text)}


def main() -> int:
    seen: set[str] = set()
    for row in variable_length.load():
        published = published_quantiles(row["length_source"])
        extra = sorted(set(published) - {"mean", "p90"})
        if not extra or row["length_source"] in seen or "mean" not in published:
            continue
        seen.add(row["length_source"])
        stats = LengthStats(**json.loads(row["length_stats"]))
        top = stats.max or int(row["seq_len"])
        mu, sigma, _ = fit(stats, top)
        families = {
            "log-normal (calc)": lambda p, mu=mu, sigma=sigma: math.exp(
                mu + sigma * _NORMAL.inv_cdf(p)
            ),
            "gamma": gamma_family(published["mean"], published["p90"]),
            "Weibull": weibull_family(published["mean"], published["p90"]),
        }
        tailed = None
        if "p99" in published:
            tailed = LengthStats(**json.loads(row["length_stats"]), p99=published["p99"])
            families["two-piece (p99)"] = two_piece(tailed, top)
        runs = sorted(
            {
                int(r["samples_seen"])
                for r in variable_length.load()
                if r["length_source"] == row["length_source"] and r["samples_seen"]
            }
        )
        print(f"{row['dataset'][:60]} (rows like {row['id']}); max {top}")
        print("  published: " + ", ".join(f"{k} {v}" for k, v in published.items()))
        for name, q in families.items():
            cells = [f"{p} {min(top, q(int(p[1:]) / 100)):.0f}" for p in ("p50", "p90", *extra)]
            longest = [f"{expected_longest_of(q, n, top):.0f} of {n}" for n in runs]
            print(f"  {name:18s} " + ", ".join(cells) + "; expected longest " + ", ".join(longest))
        for n in runs:
            print(f"  calc.lengths.expected_longest of {n}: {expected_longest(stats, top, n)}")
            if tailed is not None:
                print(f"    with the data's p99: {expected_longest(tailed, top, n)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
