"""What the data looks like: sample lengths, how they are batched, and the step sequence.

A request may say how long its samples are (``length_stats``: ``mean``, ``p90``, ``max`` tokens
per sample, any of them) and how they are batched (``batching``). Without ``length_stats``
every sample fills ``seq_len``, as calc has always assumed, and nothing here runs.

**The distribution.** Sample lengths follow a log-normal distribution clipped at ``max``
(``max`` defaults to ``seq_len``): ``L = min(max, max(1, round(exp(mu + sigma * Z))))``,
``Z`` standard normal. Log-normal because text lengths are positive and right-skewed, and
because its quantiles are closed-form (:class:`statistics.NormalDist`, standard library), so
``p90`` is matched exactly (``mu = ln p90 - z90 * sigma``, ``z90 = 1.2816``) and only
``sigma`` is solved for, by bisection, so that the clipped mean is ``mean``
(``E[min(X, M)] = e^(mu + sigma^2/2) Phi(a - sigma) + M (1 - Phi(a))``, ``a = (ln M - mu) /
sigma``). A gamma distribution would need its quantile function, which the standard library
lacks. Clipping rather than truncation: a trainer cuts a sample longer than its maximum
length down to it, so the mass above ``max`` lands on ``max``. ``seq_len`` stays the cap: a
``max`` above it is cut to ``seq_len`` too. With ``mean`` alone or ``p90`` alone, ``sigma``
is :data:`DEFAULT_SIGMA` (the median spread of published length distributions; giving both
replaces it). With neither, every sample
is ``max`` long. A ``mean`` the clipped log-normal cannot reach with ``p90`` (a mean above ``p90``,
or far below it) gets the nearest one it can, and the warning
``length_stats_approximated``. Two quantiles leave the tail to the family: on a published
length histogram with a third one (AlpacaDataCleaned's p99), the log-normal's p99 lies well
above the data's, and gamma's and Weibull's fitted to the same two less so
(``python -m benchmarks.length_tail``); one histogram does not choose a family, so the
log-normal stays, and its longest samples err long.

**The tail, where ``p99`` is given.** The longest micro-batch of a run is a tail quantile of the
lengths (the longest of 480 samples is about their 99.8th percentile), so a published ``p99``
says more about the memory peak than the family does. With ``p99`` the distribution is fitted to
the quantiles given, each matched exactly, in the log domain of the standard normal draw ``Z``:

- ``mean``, ``p90`` and ``p99``: a two-piece log-normal split at ``p90``. Below it, the body
  ``exp(mu + sigma Z)`` through ``p90`` as above; above it, the tail ``exp(mu_t + sigma_t Z)``
  through ``p90`` and ``p99`` (``sigma_t = (ln p99 - ln p90) / (z99 - z90)``), so the quantile
  function is continuous and ``ln L`` is piecewise linear in ``Z``: a split (two-piece) normal in
  the log domain, as the two-piece normal of Wallis (2014, "The two-piece normal, binormal, or
  double Gaussian distribution", Statistical Science 29(1)) joins two half-normals with their own
  spreads, here joined at ``p90`` rather than at the mode. ``sigma`` is solved, as before, so that
  the clipped mean of both pieces is ``mean`` (the body's share falls from ``0.9 p90`` towards 0 as
  ``sigma`` grows; the tail's is fixed by ``p90``, ``p99`` and ``max``).
- ``p90`` and ``p99`` without ``mean``: the one log-normal through both (``sigma = sigma_t``).
- ``mean`` and ``p99`` without ``p90``: a log-normal through ``p99`` whose ``sigma`` meets the
  clipped mean, as ``mean`` and ``p90`` do; ``p99`` alone: through ``p99`` with
  :data:`DEFAULT_SIGMA`.

On AlpacaDataCleaned's histogram (mean 225, p90 442, p99 619) the two-piece tail puts the 99th
percentile at the data's 619 tokens where the log-normal fitted to mean and p90 puts it at 955. A
request without ``p99`` gets the log-normal above, unchanged.

**The step sequence.** :func:`data_shape` cuts :data:`SAMPLES` sample lengths (at least one
micro-batch) into micro-batches of ``micro_batch_size`` samples, in the order drawn. The
lengths come from standard normal draws of ``random.Random(SEED)`` by inverse transform
(deterministic: the same request gets the same sequence), drawn once and shared by every
request, so that two requests that differ in one value (a solver's steps, a plan's variants)
see the same samples, scaled. Each micro-batch is ``(real_tokens, padded_tokens)``;
:func:`micro_batch_tokens` lists the padded ones, the tokens each micro-batch puts on the GPU:

- ``pad-longest`` (the Hugging Face collators' default padding): every sample padded to the
  longest of its micro-batch, ``padded = micro_batch_size * longest``;
- ``grouped`` (transformers' ``group_by_length``, length-bucketed loops): as ``pad-longest``,
  but the samples of each group of :data:`GROUP_MEGABATCH` micro-batches are sorted by length
  first, so a micro-batch holds samples of like length;
- ``pad-max`` (``padding="max_length"``, axolotl ``pad_to_sequence_len``): padded to
  ``seq_len``, ``padded = micro_batch_size * seq_len``;
- ``packed`` (packing): every row is ``seq_len`` tokens of real data, ``real = padded =
  micro_batch_size * seq_len``, as calc's figures without ``length_stats``.

**Attention in a packed row.** Packed samples either attend across the whole row
(``packed_attention`` ``cross-sample``: concatenated and cut, as the classic ``group_texts``
recipe does) or each within itself (``per-sample``: position ids restart at each sample and a
varlen kernel gets its boundaries, ``cu_seqlens``). Per sample, the score and value matmuls of a
row cover ``sum_i L_i^2`` query-key pairs (times the causal share) instead of ``seq_len^2``.
A row of ``seq_len`` tokens filled with samples drawn independently holds, on average, tokens
of samples of length ``L`` in proportion to ``L p(L)``, so each token attends, on average, over
:func:`attention_span` ``= E[L^2] / E[L]`` keys (the length-biased mean) instead of
``seq_len``: :func:`request_attention_span` computes it from the same draw as the step sequence
(:func:`sample_lengths`, the first :data:`SAMPLES`). Samples cut at a row's end (``wrapped``
packing) and the padding a bin-packing strategy leaves at a row's end are not counted.

The memory peak is the longest micro-batch's (its padded length stands for ``seq_len``),
and the time model runs at the mean padded length and counts real tokens only
(``padding_ratio = padded / real`` over the sequence). Why :data:`SAMPLES` = 4,096: the
peak of a run is set by its longest micro-batch, and a run meets thousands of samples; the
longest of 4,096 draws is about the 99.98th percentile of the lengths, and a sequence of
4,096 costs about a millisecond in CPython (``python -m benchmarks.bench_lengths``), inside the
estimate's time budget of 5 ms.

**How long the run is.** The longest micro-batch a run meets depends on how many samples it
sees: a 60-step run of 8 samples a step meets 480, one epoch over a 51k-sample dataset meets
51k, and the longest of 480 is much shorter than the longest of 51k. Where the request says
how many (:func:`samples_seen`: ``max_steps`` x ``micro_batch_size`` x
``gradient_accumulation_steps`` x ``num_gpus``, every GPU's samples, since the run stops at
the first GPU out of memory; or a plan's ``dataset_tokens x epochs`` over the mean sample
length), the step sequence is the run's own: its first ``min(samples, SAMPLES)`` draws, in
whole micro-batches, and its longest sample is :func:`expected_longest`, the expected value of
the longest of ``samples`` lengths drawn from the fitted distribution (a deterministic figure,
the same for every seed: a draw's own longest sample swings by the luck of the draw, most of
all for a short run). A drawn sample above it is cut to it and the longest draw set to it, so
the peak is that figure, rising with the run's length and never above ``max``. Where the request
does not say, the sequence is the :data:`SAMPLES` draws as above, its longest sample the expected
longest of :data:`SAMPLES` (not the draw's own, which could lie above the figure of a longer run).
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import Enum
from functools import lru_cache, reduce
from typing import TYPE_CHECKING

from .errors import InputError
from .jsontypes import JsonObject

if TYPE_CHECKING:
    from statistics import NormalDist

    from .request import EstimateRequest

PARTS = ("mean", "p90", "p99", "max")
"""The keys of ``length_stats``, tokens per sample."""

SEED = 0
"""The seed of :class:`random.Random` that draws every step sequence."""

SAMPLES = 4096
"""Samples drawn per step sequence (at least one micro-batch): see the module docstring."""

DEFAULT_SIGMA = 0.62
"""The log-normal's ``sigma`` when only one of ``mean``, ``p90`` and ``p99`` is given (p90 about
2.2 times the median): the median of the spreads that the eight length distributions published
in ``validation/`` imply, each the clipped log-normal through its ``mean`` and ``p90`` at its
``max`` (:func:`fit`), one reading per dataset as fed to a run (tokenizer and template):
AlpacaDataCleaned's histogram 0.74, alpaca_data.json in llama-recipes' template 0.43, Alpaca's
text field under Llama 3 (Liger-Kernel's logs) 0.60, PaddleNLP's Alpaca benchmark 0.70,
cls-fudan-news-zh (ms-swift) 0.63, orca-math (fms-acceleration) 0.47, Zhihu-KOL with alpaca-zh
(ms-swift) 0.66, rasbt's instruction data 0.15 (``tests/calc/test_default_sigma.py`` recomputes
it from the rows). Until 2026-12-05 it was 1.0, an assumption wider than every one of them."""

_SIGMA_MIN = 1e-6
_SIGMA_GRID = tuple(0.01 * 1.1**i for i in range(72))  # 0.01 .. about 8.8


@lru_cache(maxsize=1)
def _normal() -> NormalDist:
    """The standard normal. ``statistics`` (with ``fractions`` and ``decimal``) is imported
    only by a request that states its lengths: a first start in the browser does without."""
    from statistics import NormalDist

    return NormalDist()


@lru_cache(maxsize=1)
def _z90() -> float:
    """The standard normal's 90th percentile."""
    return _normal().inv_cdf(0.9)


@lru_cache(maxsize=1)
def _z99() -> float:
    """The standard normal's 99th percentile."""
    return _normal().inv_cdf(0.99)


class Batching(str, Enum):
    PAD_LONGEST = "pad-longest"
    GROUPED = "grouped"
    PAD_MAX = "pad-max"
    PACKED = "packed"
    PADDING_FREE = "padding-free"


class PackedAttention(str, Enum):
    """Whether the samples of a packed row attend to each other."""

    CROSS_SAMPLE = "cross-sample"
    PER_SAMPLE = "per-sample"


GROUP_MEGABATCH = 50
"""``grouped`` batching: micro-batches per group of samples sorted by length before they are cut
into micro-batches. transformers' ``LengthGroupedSampler`` (``group_by_length=True``;
``trainer_pt_utils.get_length_grouped_indices``, ``mega_batch_mult`` at most 50) sorts
megabatches of 50 micro-batches by length, longest first; PEFT's method comparison
(``BucketIterator``, ``bucket_factor`` 20) does the same with 20."""


@dataclass(frozen=True)
class LengthStats:
    """Tokens per sample; ``None`` where the request leaves a part out."""

    mean: int | None = None
    p90: int | None = None
    max: int | None = None
    p99: int | None = None

    def to_dict(self) -> JsonObject:
        return {part: getattr(self, part) for part in PARTS if getattr(self, part) is not None}


# --- checks ---------------------------------------------------------------------------------------


def _part_range(maximum: int) -> JsonObject:
    return {"integer": True, "minimum": 1, "maximum": maximum}


def parse_text(text: str) -> object:
    """The URL's and the CLI's form, ``mean:900,p90:2000``, as an object (the values as
    numbers where they are; anything else is left for :func:`check_length_stats` to refuse).
    Empty text: ``None`` (no statistics)."""
    if not text.strip():
        return None
    out: JsonObject = {}
    for item in text.split(","):
        name, colon, value = item.partition(":")
        name, value = name.strip(), value.strip()
        if not colon:
            raise InputError("wrong_type", "length_stats", text, extra={"allowed": list(PARTS)})
        try:
            number: object = int(value)
        except ValueError:
            try:
                number = float(value)
            except ValueError:
                number = value
        out[name] = number
    return out


def check_length_stats(value: object, maximum: int) -> LengthStats | None:
    """``length_stats`` on its own: an object (or its text form) of the :data:`PARTS`, each a
    whole number of tokens from 1 to ``maximum``; ``None`` stays ``None``."""
    if value is None:
        return None
    if isinstance(value, str):
        value = parse_text(value)
        if value is None:
            return None
    if not isinstance(value, dict):
        raise InputError("wrong_type", "length_stats", value, extra={"allowed": list(PARTS)})
    parts: dict[str, int] = {}
    for name, number in value.items():
        field = f"length_stats.{name}"
        if name not in PARTS:
            raise InputError("unknown_key", field, None, extra={"allowed": list(PARTS)})
        whole = int(number) if isinstance(number, float) and number.is_integer() else number
        if isinstance(whole, bool) or not isinstance(whole, int):
            raise InputError("not_integer", field, number, extra=_part_range(maximum))
        if whole <= 0:
            raise InputError("not_positive", field, number, extra=_part_range(maximum))
        if whole > maximum:
            raise InputError("out_of_range", field, number, extra=_part_range(maximum))
        parts[name] = whole
    return LengthStats(**parts)


def check_consistent(stats: LengthStats, seq_len: int) -> None:
    """Parts that no distribution of lengths has: ``mean``, ``p90`` or ``p99`` above ``max``
    (which defaults to ``seq_len``), a ``p99`` below ``p90``, or a ``mean`` the percentiles rule
    out: at least 90 % of the samples are at most ``p90`` long and the rest at most ``max``, so
    ``mean <= 0.9 p90 + 0.1 max``; at least 10 % are ``p90`` long or more and none is shorter
    than 1, so ``mean >= 0.1 p90 + 0.9``. With ``p99`` the same reasoning over three intervals:
    ``0.9 + 0.09 p90 + 0.01 p99 <= mean <= 0.9 p90 + 0.09 p99 + 0.01 max`` (without ``p90``:
    ``0.99 + 0.01 p99 <= mean <= 0.99 p99 + 0.01 max``). The error names the part and the range
    it may take."""
    top = stats.max if stats.max is not None else seq_len
    for name in ("p99", "p90", "mean"):
        number = getattr(stats, name)
        if number is not None and number > top:
            raise InputError("out_of_range", f"length_stats.{name}", number, extra=_part_range(top))
    if stats.p99 is not None:
        _check_with_p99(stats, stats.p99, top)
        return
    if stats.mean is not None and stats.p90 is not None:
        low = math.ceil(0.1 * stats.p90 + 0.9)
        high = math.floor(0.9 * stats.p90 + 0.1 * top)
        _check_mean_between(stats.mean, low, high)


def _check_with_p99(stats: LengthStats, p99: int, top: int) -> None:
    """:func:`check_consistent`'s checks that involve ``p99`` (whole-number arithmetic, so a
    bound is never off by a rounding)."""
    if stats.p90 is not None and p99 < stats.p90:
        raise InputError(
            "out_of_range",
            "length_stats.p99",
            p99,
            extra={"integer": True, "minimum": stats.p90, "maximum": top},
        )
    if stats.mean is None:
        return
    if stats.p90 is not None:
        low = -(-(90 + 9 * stats.p90 + p99) // 100)
        high = (90 * stats.p90 + 9 * p99 + top) // 100
    else:
        low = -(-(99 + p99) // 100)
        high = (99 * p99 + top) // 100
    _check_mean_between(stats.mean, low, high)


def _check_mean_between(mean: int, low: int, high: int) -> None:
    """The coded error of a mean outside what the other parts of ``length_stats`` allow."""
    if not low <= mean <= high:
        raise InputError(
            "out_of_range",
            "length_stats.mean",
            mean,
            extra={"integer": True, "minimum": low, "maximum": high},
        )


# --- the distribution -----------------------------------------------------------------------------


def _clipped_mean(mu: float, sigma: float, top: float) -> float:
    """``E[min(X, top)]`` of a log-normal ``X`` (``mu``, ``sigma``)."""
    a = (math.log(top) - mu) / sigma
    cdf = _normal().cdf
    return math.exp(mu + sigma * sigma / 2) * cdf(a - sigma) + top * (1.0 - cdf(a))


def _bisect(
    f: Callable[[float], float], lo: float, hi: float, target: float, increasing: bool
) -> float:
    """``x`` in ``[lo, hi]`` with ``f(x) = target``, ``f`` monotonic there."""
    for _ in range(60):
        mid = (lo + hi) / 2
        above = f(mid) > target
        if above == increasing:
            hi = mid
        else:
            lo = mid
    return (lo + hi) / 2


def _through(quantile: int, z: float, mean: int, top: int) -> tuple[float, float, bool]:
    """``(mu, sigma, exact)`` of the log-normal through ``quantile`` (at the standard normal's
    ``z``) whose mean clipped at ``top`` is ``mean``, or the nearest one (``exact`` False)."""

    def at(sigma: float) -> float:
        return _clipped_mean(math.log(quantile) - z * sigma, sigma, top)

    # the clipped mean falls from the quantile as sigma grows from 0, down to a least value (then
    # rises again when max is far above it): the falling branch is searched
    means = [at(s) for s in _SIGMA_GRID]
    lowest = min(range(len(means)), key=means.__getitem__)
    narrowest = at(_SIGMA_MIN)
    if narrowest >= mean >= means[lowest]:
        sigma = _bisect(at, _SIGMA_MIN, _SIGMA_GRID[lowest], mean, False)
        return math.log(quantile) - z * sigma, sigma, True
    sigma = _SIGMA_MIN if mean > narrowest else _SIGMA_GRID[lowest]
    return math.log(quantile) - z * sigma, sigma, False


def _piece_mean(mu: float, sigma: float, low: float, high: float, cap: float) -> float:
    """``E[min(exp(mu + sigma Z), cap); low < Z <= high]``, ``Z`` standard normal: one piece of
    the two-piece fit (``low``, ``high`` may be infinite)."""
    cdf = _normal().cdf
    z_cap = (math.log(cap) - mu) / sigma
    total = 0.0
    below = min(high, z_cap)
    if below > low:
        total += math.exp(mu + sigma * sigma / 2) * (cdf(below - sigma) - cdf(low - sigma))
    if z_cap < high:
        total += cap * (cdf(high) - cdf(max(low, z_cap)))
    return total


def _tail_line(p90: int, p99: int) -> tuple[float, float]:
    """``(mu_t, sigma_t)`` of the log-normal through ``p90`` and ``p99``."""
    z90 = _z90()
    sigma = max((math.log(p99) - math.log(p90)) / (_z99() - z90), _SIGMA_MIN)
    return math.log(p90) - z90 * sigma, sigma


@lru_cache(maxsize=256)
def tail(stats: LengthStats) -> tuple[float, float, float] | None:
    """``(z_split, mu_t, sigma_t)``: the upper piece of the two-piece fit (``mean``, ``p90`` and
    ``p99`` given), a sample drawn at ``Z > z_split`` is ``exp(mu_t + sigma_t Z)`` long; ``None``
    where one log-normal (:func:`fit`) covers every draw."""
    if stats.p99 is None or stats.p90 is None or stats.mean is None:
        return None
    mu_t, sigma_t = _tail_line(stats.p90, stats.p99)
    return _z90(), mu_t, sigma_t


def _fit_with_p99(stats: LengthStats, p99: int, top: int) -> tuple[float, float, bool]:
    """:func:`fit` where ``p99`` is given (see the module docstring, "The tail")."""
    mean, p90 = stats.mean, stats.p90
    if p90 is None:
        if mean is None:
            return math.log(p99) - _z99() * DEFAULT_SIGMA, DEFAULT_SIGMA, True
        return _through(p99, _z99(), mean, top)
    mu_t, sigma_t = _tail_line(p90, p99)
    if mean is None:
        return mu_t, sigma_t, True
    z90 = _z90()
    upper = _piece_mean(mu_t, sigma_t, z90, math.inf, top)

    def at(sigma: float) -> float:  # the body's share falls as sigma grows
        return _piece_mean(math.log(p90) - z90 * sigma, sigma, -math.inf, z90, top) + upper

    widest = _SIGMA_GRID[-1]
    narrowest = at(_SIGMA_MIN)
    if narrowest >= mean >= at(widest):
        sigma = _bisect(at, _SIGMA_MIN, widest, mean, False)
        return math.log(p90) - z90 * sigma, sigma, True
    sigma = _SIGMA_MIN if mean > narrowest else widest
    return math.log(p90) - z90 * sigma, sigma, False


@lru_cache(maxsize=256)
def fit(stats: LengthStats, top: int) -> tuple[float, float, bool]:
    """``(mu, sigma, exact)`` of the clipped log-normal for ``stats`` clipped at ``top`` (with
    ``mean``, ``p90`` and ``p99``: its body, below ``p90``; :func:`tail` has the rest);
    ``exact`` is False where ``mean`` could not be met (the nearest mean is used)."""
    if stats.p99 is not None:
        return _fit_with_p99(stats, stats.p99, top)
    mean, p90 = stats.mean, stats.p90
    z90 = _z90()
    if p90 is not None and mean is not None:
        return _through(p90, z90, mean, top)
    sigma = DEFAULT_SIGMA
    if p90 is not None:
        return math.log(p90) - z90 * sigma, sigma, True
    assert mean is not None
    mu = _bisect(
        lambda m: _clipped_mean(m, sigma, top),
        math.log(mean) - 20.0,
        math.log(top) + 20.0,
        mean,
        True,
    )
    return mu, sigma, True


_LONGEST_NODES = 512
"""Quadrature nodes of :func:`expected_longest` (its figure moves by under a token beyond)."""


_CAPPED_FROM: dict[tuple[LengthStats, int], int] = {}
"""The fewest samples seen so far whose expected longest reached the cap, per distribution and
``seq_len``: the figure never falls as the run grows (see :func:`expected_longest`), so any run
at least that long is at the cap too, without the quadrature (a calculator whose reader
changes the epochs or the dataset asks for a new run length each time)."""


def expected_longest(stats: LengthStats, seq_len: int, samples: int) -> int:
    """:func:`_expected_longest`, at the cap without computing where a shorter run reached it."""
    key = (stats, seq_len)
    cap = min(stats.max if stats.max is not None else seq_len, seq_len)
    capped = _CAPPED_FROM.get(key)
    if capped is not None and samples >= capped:
        return cap
    out = _expected_longest(stats, seq_len, samples)
    if out == cap and (capped is None or samples < capped):
        if len(_CAPPED_FROM) > 1024:
            _CAPPED_FROM.clear()
        _CAPPED_FROM[key] = samples
    return out


@lru_cache(maxsize=256)
def _expected_longest(stats: LengthStats, seq_len: int, samples: int) -> int:
    """The expected length of the longest of ``samples`` lengths drawn from ``stats`` (clipped
    at ``max``, then at ``seq_len``), rounded to a whole token.

    With ``L = g(Z) = min(cap, max(1, exp(mu + sigma Z)))`` increasing in ``Z``, the longest of
    ``n`` is ``g(Z_(n))``, and ``Z_(n)`` has the distribution function ``Phi(z)^n``: with
    ``v = Phi(z)^n`` uniform on ``[0, 1]``, ``E[g(Z_(n))] = int_0^1 g(Phi^-1(v^(1/n))) dv``.
    The integrand rises steeply as ``v`` nears 1 (the tail), so the integral is taken in
    ``w = sqrt(1 - v)`` (``dv = 2w dw``) by the midpoint rule on :data:`_LONGEST_NODES` nodes,
    and ``Phi^-1(v^(1/n))`` as ``-Phi^-1(q)``, ``q = -expm1(ln(v) / n)``, which keeps its
    precision for runs of billions of samples. Each node rises with ``n``, so the figure never
    falls as the run grows; a run of one sample gets the distribution's mean."""
    top = stats.max if stats.max is not None else seq_len
    cap = min(top, seq_len)
    if _every_sample_max(stats):
        return cap
    mu, sigma, _ = fit(stats, top)
    split = tail(stats)
    zs, weights = _longest_nodes(samples)
    if split is None:
        xs = [mu + sigma * z for z in zs]
    else:
        z_split, mu_t, sigma_t = split
        xs = [mu + sigma * z if z <= z_split else mu_t + sigma_t * z for z in zs]
    # min(cap, max(1.0, exp(min(x, 700.0)))) per node (as conditionals: the same values),
    # times its weight, summed in order from 0.0 as a loop of += does (sum() of floats rounds
    # differently from Python 3.12 on)
    exp = math.exp
    heights = [exp(700.0 if 700.0 < x else x) for x in xs]
    heights = [(h if h > 1.0 else 1.0) for h in heights]
    heights = [(h if h < cap else cap) for h in heights]
    total = reduce(operator.add, map(operator.mul, heights, weights), 0.0)
    return min(cap, max(1, round(total / _LONGEST_NODES)))


@lru_cache(maxsize=16)
def _longest_nodes(samples: int) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """The nodes of :func:`expected_longest` for a run of ``samples``: the ``z`` and the
    weights ``2w`` at the midpoints ``w``, with ``z = -Phi^-1(q)``, ``q = -expm1(ln(1 - w^2) /
    samples)``. They depend on the run's length only, not on the distribution: computed once
    per length (the normal quantile is the costly part, and a plan asks for many distributions
    of one run)."""
    inv, log, expm1 = _normal().inv_cdf, math.log, math.expm1
    k = _LONGEST_NODES
    nodes = []
    for i in range(k):
        w = (i + 0.5) / k
        q = -expm1(log(1.0 - w * w) / samples)  # P(one sample is longer) at this node
        nodes.append((-inv(q) if q < 1.0 else -40.0, 2.0 * w))
    zs, weights = zip(*nodes, strict=True)
    return zs, weights


def _every_sample_max(stats: LengthStats) -> bool:
    """No part but ``max``: every sample is ``max`` long."""
    return stats.mean is None and stats.p90 is None and stats.p99 is None


def samples_seen(req: EstimateRequest) -> int | None:
    """Samples the run sees on all its GPUs together: ``max_steps x micro_batch_size x
    gradient_accumulation_steps x data_parallel`` (the GPUs that take samples of their own:
    ``num_gpus / sequence_parallel``) where the request gives ``max_steps``, else the
    count a plan derives from its dataset (:attr:`EstimateRequest.samples_seen`); ``None``
    where nothing says how long the run is."""
    if req.max_steps is not None:
        return (
            req.max_steps
            * req.micro_batch_size
            * req.gradient_accumulation_steps
            * req.data_parallel
        )
    return req.samples_seen


def dataset_samples(stats: LengthStats, seq_len: int, tokens: float) -> int:
    """Samples in ``tokens`` of data whose lengths follow ``stats``: ``ceil(tokens / mean)``,
    ``mean`` the fitted distribution's, clipped as the samples are (at ``max``, then
    ``seq_len``); at least one."""
    top = stats.max if stats.max is not None else seq_len
    cap = min(top, seq_len)
    if _every_sample_max(stats):
        mean = float(cap)
    else:
        mu, sigma, _ = fit(stats, top)
        split = tail(stats)
        if split is None:
            mean = _clipped_mean(mu, sigma, cap)
        else:
            z_split, mu_t, sigma_t = split
            mean = _piece_mean(mu, sigma, -math.inf, z_split, cap) + _piece_mean(
                mu_t, sigma_t, z_split, math.inf, cap
            )
    return max(1, math.ceil(tokens / mean))


# --- the step sequence ------------------------------------------------------------------------------


@dataclass(frozen=True)
class DataShape:
    """The step sequence of a request's data and what follows from it (the sums are kept:
    a plan asks for them once per card and setup)."""

    batching: Batching
    micro_batch_size: int
    tokens: tuple[tuple[int, int], ...]  # (real, padded) tokens per micro-batch
    exact: bool  # the fitted distribution meets the stats (else: length_stats_approximated)
    peak_batch_tokens: int  # padded tokens of the longest micro-batch
    real_total: int
    padded_total: int
    samples: int | None = None  # samples the run sees (None: not said)

    @property
    def rows(self) -> int:
        """Rows of one micro-batch: ``micro_batch_size``, or one with ``padding-free`` batching
        (the samples end to end)."""
        return 1 if self.batching is Batching.PADDING_FREE else self.micro_batch_size

    @property
    def peak_length(self) -> int:
        """Padded tokens per row of the longest micro-batch: the memory model's ``seq_len``
        (with ``padding-free`` batching, the whole micro-batch in one row)."""
        return self.peak_batch_tokens // self.rows

    @property
    def padding_ratio(self) -> float:
        """Padded tokens per real token over the sequence (1: no padding)."""
        return self.padded_total / self.real_total

    @property
    def mean_padded_length(self) -> int:
        """Padded tokens per row on average: the time model's ``seq_len``."""
        return max(1, round(self.padded_total / (len(self.tokens) * self.rows)))

    def to_dict(self) -> JsonObject:
        out: JsonObject = {
            "batching": self.batching.value,
            "micro_batches_drawn": len(self.tokens),
            "peak_batch_tokens": self.peak_batch_tokens,
            "peak_sample_tokens": self.peak_batch_tokens // self.micro_batch_size,
            "mean_sample_tokens": self.real_total / (len(self.tokens) * self.micro_batch_size),
            "mean_padded_sample_tokens": self.mean_padded_length,
            "padding_ratio": self.padding_ratio,
        }
        if self.samples is not None:  # the run's length, where the request says it
            out["samples_seen"] = self.samples
        return out


@lru_cache(maxsize=4)
def _normal_draws(count: int, seed: int = SEED) -> tuple[float, ...]:
    """``count`` standard normal draws of ``random.Random(seed)`` by inverse transform, drawn
    once: every request shares them, so two requests that differ in one value (a solver's
    steps, a plan's variants) see the same samples, longer or shorter."""
    import random
    import statistics

    rng = random.Random(seed)
    draw = rng.random
    probabilities = [draw() or 1e-300 for _ in range(count)]
    # NormalDist().inv_cdf(p) is _normal_dist_inv_cdf(p, 0.0, 1.0) once it has checked that
    # 0 < p < 1 (as every draw is): called directly, over the list in C, where it exists
    inv = getattr(statistics, "_normal_dist_inv_cdf", None)
    if inv is None:
        return tuple(map(_normal().inv_cdf, probabilities))
    return tuple(map(inv, probabilities, itertools.repeat(0.0), itertools.repeat(1.0)))


def sample_lengths(
    stats: LengthStats, seq_len: int, count: int, seed: int = SEED
) -> tuple[list[int], bool]:
    """``count`` sample lengths drawn from ``stats`` (clipped at ``max``, then at ``seq_len``),
    and whether the fit is exact."""
    lengths, exact = _lengths(stats, seq_len, max(count, SAMPLES), seed)
    return list(lengths[:count]), exact


@lru_cache(maxsize=64)
def _lengths(
    stats: LengthStats, seq_len: int, count: int, seed: int
) -> tuple[tuple[int, ...], bool]:
    """The lengths of :func:`sample_lengths`, kept for the other micro-batch sizes of a request
    (the plan's solver tries several)."""
    top = stats.max if stats.max is not None else seq_len
    cap = min(top, seq_len)
    if _every_sample_max(stats):
        return (cap,) * count, True
    mu, sigma, exact = fit(stats, top)
    # int(exp(x) + 0.5) as floor(exp(x) + 0.5) (the same for a positive number, and cheaper to
    # call in CPython), clipped to [1, cap] in the same pass
    exp, floor = math.exp, math.floor
    split = tail(stats)
    if split is None:
        lengths = [
            cap if (n := floor(exp(mu + sigma * z) + 0.5)) > cap else n if n > 1 else 1
            for z in _normal_draws(count, seed)
        ]
    else:  # the two-piece fit: the tail's line above the split
        z_split, mu_t, sigma_t = split
        lengths = [
            cap
            if (n := floor(exp(mu + sigma * z if z <= z_split else mu_t + sigma_t * z) + 0.5)) > cap
            else n
            if n > 1
            else 1
            for z in _normal_draws(count, seed)
        ]
    return tuple(lengths), exact


@lru_cache(maxsize=256)
def data_shape(
    stats: LengthStats,
    batching: Batching,
    seq_len: int,
    micro_batch_size: int,
    samples: int | None = None,
) -> DataShape:
    """The step sequence of the data (see the module docstring); ``samples``: how many the
    run sees (``None``: not said, :data:`SAMPLES` draws as they come)."""
    drawn = SAMPLES if samples is None else min(samples, SAMPLES)
    batches = max(1, drawn // micro_batch_size)
    if batching is Batching.PACKED:
        full = micro_batch_size * seq_len
        return DataShape(
            batching,
            micro_batch_size,
            ((full, full),) * batches,
            True,
            full,
            full * batches,
            full * batches,
            samples,
        )
    lengths, exact = sample_lengths(stats, seq_len, batches * micro_batch_size)
    # the run's longest sample: the expected longest of its samples, of SAMPLES where the
    # request does not say (so a longer run never gets a shorter peak than an unsaid one)
    longest = expected_longest(stats, seq_len, SAMPLES if samples is None else samples)
    lengths = [n if n < longest else longest for n in lengths]
    lengths[lengths.index(max(lengths))] = longest
    if batching is Batching.GROUPED:  # samples of like length share a micro-batch
        span = GROUP_MEGABATCH * micro_batch_size
        lengths = [
            n for i in range(0, len(lengths), span) for n in sorted(lengths[i : i + span])[::-1]
        ]
    if micro_batch_size == 1:
        reals = lengths
    else:  # consecutive micro-batches (built-in loops: this runs once per request)
        groups = list(zip(*[iter(lengths)] * micro_batch_size, strict=True))
        reals = list(map(sum, groups))
    if batching is Batching.PAD_MAX:
        padded = [micro_batch_size * seq_len] * batches
    elif micro_batch_size == 1 or batching is Batching.PADDING_FREE:
        padded = reals
    else:
        padded = [micro_batch_size * width for width in map(max, groups)]
    return DataShape(
        batching,
        micro_batch_size,
        tuple(zip(reals, padded, strict=True)),
        exact,
        max(padded),
        sum(reals),
        sum(padded),
        samples,
    )


def peak_of(
    stats: LengthStats,
    batching: Batching,
    seq_len: int,
    micro_batch_size: int,
    samples: int | None = None,
) -> tuple[int, bool]:
    """``(peak_length, exact)`` of :func:`data_shape` with the same arguments, without drawing
    the samples: the memory model reads only these two, and a plan's solvers ask for many
    lengths. Packed rows and ``pad-max`` batches are ``seq_len`` long; otherwise the longest
    micro-batch holds the run's longest sample (:func:`data_shape` clips the draw at
    :func:`expected_longest` and puts that length in), padded to it whatever the micro-batch
    size. ``exact`` is the fit's (True for packed rows, which draw nothing)."""
    if batching is Batching.PACKED:
        return seq_len, True
    if batching is Batching.PADDING_FREE:  # the longest sum of a micro-batch: drawn
        shape = data_shape(stats, batching, seq_len, micro_batch_size, samples)
        return shape.peak_length, shape.exact
    top = stats.max if stats.max is not None else seq_len
    exact = True if _every_sample_max(stats) else fit(stats, top)[2]
    if batching is Batching.PAD_MAX:
        return seq_len, exact
    return expected_longest(stats, seq_len, SAMPLES if samples is None else samples), exact


def request_peak(req: EstimateRequest) -> tuple[int, bool] | None:
    """:func:`peak_of` of an estimate request, ``None`` without ``length_stats``."""
    if req.length_stats is None:
        return None
    return peak_of(
        req.length_stats, req.batching, req.seq_len, req.micro_batch_size, samples_seen(req)
    )


@lru_cache(maxsize=64)
def attention_span(stats: LengthStats, seq_len: int) -> float:
    """Keys one token of a packed row attends over, on average, when attention stays within
    each sample: ``sum L^2 / sum L`` over the :data:`SAMPLES` lengths drawn from ``stats``
    (see the module docstring); ``seq_len`` when every sample fills the row."""
    lengths = sample_lengths(stats, seq_len, SAMPLES)[0]
    return sum(n * n for n in lengths) / sum(lengths)


def request_attention_span(req: EstimateRequest) -> float | None:
    """:func:`attention_span` of a request whose packed samples attend each within itself
    (``batching`` ``packed``, ``packed_attention`` ``per-sample``, ``length_stats`` given);
    ``None`` otherwise: attention spans the whole row."""
    if req.length_stats is None or not (
        req.batching is Batching.PADDING_FREE
        or (req.batching is Batching.PACKED and req.packed_attention is PackedAttention.PER_SAMPLE)
    ):
        return None
    return attention_span(req.length_stats, req.seq_len)


def as_rows(req: EstimateRequest, row_tokens: int | None = None) -> EstimateRequest:
    """A ``padding-free`` request as its micro-batches run (TRL's
    ``DataCollatorForLanguageModeling(padding_free=True)``: one row of the samples end to end,
    positions restarting at each): one row per micro-batch (``micro_batch_size`` 1) of
    ``row_tokens`` (else left as it is), the sample cap pinned in ``length_stats.max`` so that
    reading the stats again draws the same samples (``max`` left out means ``seq_len``). Any
    other request as it is."""
    if req.batching is not Batching.PADDING_FREE or req.length_stats is None:
        return req
    stats = req.length_stats
    cap = min(stats.max, req.seq_len) if stats.max is not None else req.seq_len
    changes: dict[str, object] = {"micro_batch_size": 1}
    if stats.max != cap:
        changes["length_stats"] = replace(stats, max=cap)
    if row_tokens is not None:
        changes["seq_len"] = row_tokens
    return req.replaced(**changes)


def request_shape(req: EstimateRequest) -> DataShape | None:
    """The data shape of an estimate request, ``None`` without ``length_stats``."""
    if req.length_stats is None:
        return None
    return data_shape(
        req.length_stats, req.batching, req.seq_len, req.micro_batch_size, samples_seen(req)
    )


def micro_batch_tokens(req: EstimateRequest) -> list[int]:
    """The tokens each micro-batch of the request's step sequence puts on the GPU (padding
    included), in order: ``micro_batch_size * seq_len`` each without ``length_stats``."""
    shape = request_shape(req)
    if shape is None:
        full = req.micro_batch_size * req.seq_len
        return [full] * max(1, SAMPLES // req.micro_batch_size)
    return [padded for _, padded in shape.tokens]


__all__ = [
    "Batching",
    "DEFAULT_SIGMA",
    "DataShape",
    "GROUP_MEGABATCH",
    "LengthStats",
    "PARTS",
    "PackedAttention",
    "SAMPLES",
    "SEED",
    "attention_span",
    "check_consistent",
    "check_length_stats",
    "data_shape",
    "dataset_samples",
    "expected_longest",
    "fit",
    "micro_batch_tokens",
    "parse_text",
    "peak_of",
    "request_attention_span",
    "request_peak",
    "request_shape",
    "sample_lengths",
    "samples_seen",
    "tail",
]
