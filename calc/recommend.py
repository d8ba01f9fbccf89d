"""Which cards and configurations fit, ranked by cost and by time; solvers; suggestions.

The memory estimate does not depend on the card, only on the setup (GPU count, sharding and
the rest of the request), so :class:`Estimator` computes each setup once and every card is
compared against it.

One verdict, everywhere: :func:`judge` compares what a run needs (:class:`Need`: the device
bytes with their calibrated range, read from an estimate by :func:`need_of`, the one place
that says which bytes are judged) with a card's driver-reported memory and answers
``fits`` / ``borderline`` / ``does_not_fit`` (:func:`calc.calibration.verdict`): ``fits``
when the upper end of the range, times ``1 + safety_margin`` when the user sets a margin
(default none), is at most the card's memory; ``does_not_fit`` when the lower end is above
it; ``borderline`` in between. The plan's card table, recommendations, solvers and
suggestions, the CLI, the calculator and the guides all read this verdict; none decides fit
on its own.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Iterable

from . import calibration
from .errors import CalcError
from .fields import BY_KEY
from .gpus import Gpu
from .jsontypes import JsonObject
from .request import EstimateRequest

GPU_COUNTS = (1, 2, 4, 8, 16, 32, 64)
"""GPU counts the recommendation explores: one node's 1-8, then 2, 4 and 8 nodes of 8, so
that a 70B full fine-tuning has an answer (more than 8 spans nodes: calc.timing)."""
MULTI_GPU_SHARDINGS = (
    "ddp",
    "zero2",
    "zero3",
)  # zero1 needs more memory than zero2 at the same speed


def _typed(key: str, value: object) -> object:
    """An enum field's value as its member: a change may name it by its value, and profiles
    and defaults hold the plain values."""
    enum = BY_KEY[key].enum
    return enum(value) if enum is not None and isinstance(value, str) else value


def _as_dict(result: object) -> JsonObject:
    if isinstance(result, dict):
        return result
    to_dict = getattr(result, "to_dict", None)
    if to_dict is None:
        raise TypeError("memory.estimate_request must return a dict or an object with to_dict()")
    out: JsonObject = to_dict()
    return out


class Estimator:
    """Memory estimates of variants of one request, each computed once.

    ``get(num_gpus=2, sharding="zero3")`` returns the estimate response dict of the request with
    those fields replaced, or ``None`` when the memory model rejects that variant."""

    def __init__(
        self,
        request: EstimateRequest,
        estimate_fn: Callable[[EstimateRequest], object] | None = None,
    ) -> None:
        # the request's own estimate carries min_device_bytes itself (when the verdict
        # judges it); its variants a verdict finds only as far as it needs
        # (calc.memory.estimate_alternative)
        self._variant_fn: Callable[[EstimateRequest], object] | None = None
        if estimate_fn is None:
            from .memory import estimate_alternative, estimate_request

            estimate_fn, self._variant_fn = estimate_request, estimate_alternative
        self.request = request
        self._fn = estimate_fn
        self._cache: dict[tuple[tuple[str, object], ...], JsonObject | None] = {}
        self.calls = 0

    def variant(self, **changes: object) -> EstimateRequest:
        """The request with ``changes`` (enum fields given as their values or members), and the
        library's setup-dependent behaviours evaluated again on the new setup."""
        fixed: JsonObject = {k: _typed(k, v) for k, v in changes.items()}
        out = _replaced(self.request, fixed)
        if out.profile_keys:  # the library's setup-dependent behaviours follow the new setup
            from .fields import defaults
            from .frameworks import reapplied

            again = reapplied(
                out.json_view(), out.profile_keys, out.framework, defaults("estimate")
            )
            typed: JsonObject = {k: _typed(k, v) for k, v in again.items() if k not in fixed}
            out = _replaced(out, typed)
        return out

    def get(self, **changes: object) -> JsonObject | None:
        key = tuple(sorted((k, v.value if hasattr(v, "value") else v) for k, v in changes.items()))
        if key not in self._cache:
            self.calls += 1
            try:
                fn = self._variant_fn if changes and self._variant_fn else self._fn
                self._cache[key] = _as_dict(fn(self.variant(**changes)))
            except CalcError:
                self._cache[key] = None
        return self._cache[key]


def _replaced(request: EstimateRequest, changes: JsonObject) -> EstimateRequest:
    """``request`` with ``changes``: :meth:`calc.request.EstimateRequest.replaced` (the fast
    copy), or ``dataclasses.replace`` for another dataclass (a test's stand-in)."""
    fast = getattr(request, "replaced", None)
    if fast is not None:
        out: EstimateRequest = fast(**changes)
        return out
    return dataclasses.replace(request, **changes)


def required_bytes(device_total_bytes: int, safety_margin: float) -> int:
    """Memory a card must report to run the setup with the margin: ``ceil(total * (1 + margin))``."""
    return math.ceil(device_total_bytes * (1.0 + safety_margin))


def device_range(estimate: JsonObject) -> tuple[int, int]:
    """What nvidia-smi would show, as a range: the calibrated reserved range
    (``peak_reserved_range_bytes``, :mod:`calc.calibration`) plus what the allocator does
    not see (``device_total_bytes - peak_reserved_bytes``: CUDA context, NCCL buffers). An
    estimate without a range (a plain figure) is its own range."""
    total = estimate["device_total_bytes"]
    rng = estimate.get("peak_reserved_range_bytes")
    if not rng:
        return total, total
    extra = total - estimate["peak_reserved_bytes"]
    return rng[0] + extra, rng[1] + extra


@dataclasses.dataclass(frozen=True)
class Need:
    """The device memory a run needs: a central figure and its calibrated range, in bytes
    (``low_bytes <= central_bytes <= high_bytes`` for a calibrated estimate; all three equal
    for a plain figure); ``basis``: which figure of the estimate the central one is
    (``min_device_bytes`` or ``device_total_bytes``), and ``device_total_bytes`` the
    estimate's own (what nvidia-smi would show on a large card), whichever is judged."""

    central_bytes: int
    low_bytes: int
    high_bytes: int
    basis: str = "device_total_bytes"
    device_total_bytes: int | None = None
    # basis ``min_device_bounds``: the certain bounds of ``min_device_bytes`` (``central_bytes``
    # is then the upper one) and what finds it as far as a verdict needs
    # (:class:`calc.step_events.MinDevice`)
    bounds: tuple[int, int] | None = None
    query: Any = dataclasses.field(default=None, compare=False, repr=False)
    # what is judged instead when the query's replay cannot run calc's sequence
    fallback: Need | None = dataclasses.field(default=None, compare=False, repr=False)

    @classmethod
    def exact(cls, nbytes: int) -> Need:
        """A figure without a range (its own range)."""
        return cls(nbytes, nbytes, nbytes)

    def min_device_fields(self) -> JsonObject:
        """What an entry judged on this need says of ``min_device_bytes`` (additive):
        ``{"min_device_bytes": ...}`` where the verdict judged the figure;
        ``{"verdict_basis": "min_device_bounds", "min_device_bounds_bytes": [low, high]}``
        where certain bounds of it decided the verdict without the figure (the central
        figure, and so the entry's headroom or saving, is then the upper bound); else
        nothing."""
        if self.basis == "min_device_bytes":
            return {"min_device_bytes": self.central_bytes}
        if self.bounds is not None:
            return {"verdict_basis": self.basis, "min_device_bounds_bytes": list(self.bounds)}
        return {}


def need_of(estimate: JsonObject) -> Need:
    """What the verdict judges of an estimate, the one place that says which bytes a run
    needs: ``min_device_bytes`` (the smallest card on which the replayed allocator runs the
    steps, :func:`calc.step_events.simulate_request`) and its calibrated range
    (``min_device_range_bytes``, :data:`calc.calibration.MIN_DEVICE_BANDS`) where the estimate
    carries them (:data:`calc.memory.SIMULATED_VERDICT`); otherwise the device total (what
    nvidia-smi would show) and its calibrated range (:func:`device_range`)."""
    total = int(estimate["device_total_bytes"])
    rng = estimate.get("min_device_range_bytes")
    if rng:
        low, high = rng
        return Need(int(estimate["min_device_bytes"]), low, high, "min_device_bytes", total)
    low, high = device_range(estimate)
    plain = Need(total, low, high)
    query = getattr(estimate, "min_device", None)
    if query is not None:
        try:
            return bounded_need(query, plain)
        except AssertionError:  # the replay could not run calc's sequence: the device total
            pass
    return plain


def settled(need: Need) -> Need:
    """``need`` with the figure itself where only its bounds were known (the walk runs:
    basis ``min_device_bytes``), for what reads the figure and not only the verdict (a
    suggestion's saving)."""
    if need.query is None:
        return need
    assert need.fallback is not None
    try:
        need.query.exact_bytes()
    except AssertionError:  # the replay could not run calc's sequence: the device total
        return need.fallback
    return bounded_need(need.query, need.fallback)


def bounded_need(query: Any, plain: Need) -> Need:
    """The need of an estimate whose ``min_device_bytes`` is found only as far as a verdict
    needs (``query``, :class:`calc.step_events.MinDevice`): its certain bounds ``(lo, hi)``,
    the range from the lower end of ``lo``'s calibrated range to the upper end of ``hi``'s
    (every ``min_device_bytes`` between them has its range inside), ``hi`` as the central
    figure (basis ``min_device_bounds``); once they meet, the figure itself (basis
    ``min_device_bytes``). ``plain``: the device total's need, judged instead where the
    replay cannot run calc's sequence."""
    lo, hi = query.bounds()
    total = plain.central_bytes
    if lo == hi:
        low, high = calibration.min_device_range_bytes(lo, query.method)
        return Need(lo, low, high, "min_device_bytes", total)
    low = calibration.min_device_range_bytes(lo, query.method)[0]
    high = calibration.min_device_range_bytes(hi, query.method)[1]
    return Need(hi, low, high, "min_device_bounds", total, (lo, hi), query, plain)


@dataclasses.dataclass(frozen=True)
class Verdict:
    """One run against one card: ``state`` (``fits`` | ``borderline`` | ``does_not_fit``,
    :data:`calc.calibration.VERDICTS`), what the run needs, the card's memory and the user's
    margin (0: none)."""

    state: str
    need: Need
    memory_bytes: int
    safety_margin: float

    @property
    def fits(self) -> bool:
        return self.state == "fits"

    @property
    def possible(self) -> bool:
        """Not ruled out: ``fits`` or ``borderline``."""
        return self.state != "does_not_fit"

    @property
    def required_bytes(self) -> int:
        """Memory a card must report for ``fits``: the upper end times ``1 + margin``."""
        return required_bytes(self.need.high_bytes, self.safety_margin)

    @property
    def lower_bytes(self) -> int:
        """The lower end times ``1 + margin``: above the card's memory, ``does_not_fit``."""
        return required_bytes(self.need.low_bytes, self.safety_margin)

    def to_dict(self) -> JsonObject:
        """The card-table entry (``plan``'s ``fits``): ``verdict``, ``fits`` (``verdict ==
        "fits"``), the range judged, what ``fits`` requires and the headroom of the central
        figure judged (``headroom_*``, without the margin); with ``verdict_basis``
        ``min_device_bytes``, that figure as ``min_device_bytes`` beside the estimate's
        ``device_total_bytes``."""
        central = self.need.central_bytes
        headroom = self.memory_bytes - central
        total = central if self.need.device_total_bytes is None else self.need.device_total_bytes
        out: JsonObject = {
            "fits": self.fits,
            "fits_without_margin": central <= self.memory_bytes,
            "memory_bytes": self.memory_bytes,
            "device_total_bytes": total,
            "required_bytes": self.required_bytes,
            "headroom_bytes": headroom,
            "headroom_fraction": headroom / self.memory_bytes,
            "verdict": self.state,
            "device_range_bytes": [self.need.low_bytes, self.need.high_bytes],
        }
        out |= self.need.min_device_fields()
        if self.need.basis == "min_device_bytes":
            out["verdict_basis"] = self.need.basis
        return out


def judge(need: Need, memory_bytes: int, safety_margin: float = 0.0) -> Verdict:
    """The verdict of a run that needs ``need`` on a card of ``memory_bytes``
    (:func:`calc.calibration.verdict`, each end of the range times ``1 + safety_margin``)."""
    if need.query is not None:
        try:
            return _judge_bounded(need, memory_bytes, safety_margin)
        except AssertionError:  # the replay could not run calc's sequence: the device total
            assert need.fallback is not None
            need = need.fallback
    state = calibration.verdict(need.low_bytes, need.high_bytes, memory_bytes, safety_margin)
    return Verdict(state, need, memory_bytes, safety_margin)


def _judge_bounded(need: Need, memory_bytes: int, safety_margin: float) -> Verdict:
    """The verdict of ``min_device_bytes`` where only its certain bounds are known at first
    (basis ``min_device_bounds``), exactly the one the figure itself gets.

    The verdict of a figure ``v`` (its calibrated range against the card) only moves from
    ``fits`` towards ``does_not_fit`` as ``v`` grows, so when both bounds get the same one,
    every figure between them does too. Else the figures between them (the memory outside
    the allocator plus whole 2 MiB steps, as ``min_device_bytes`` is) are bisected for the
    largest that ``fits`` or is not ``does_not_fit``, and the query answers whether the
    figure is at most that (:meth:`calc.step_events.MinDevice.at_most`). Where that needed
    the figure itself, the verdict is judged on it (basis ``min_device_bytes``)."""
    query = need.query
    method = query.method

    def state(v: int) -> str:
        low, high = calibration.min_device_range_bytes(v, method)
        return calibration.verdict(low, high, memory_bytes, safety_margin)

    bounds: tuple[int, int] = query.bounds()
    lo, hi = bounds
    at_lo, at_hi = state(lo), state(hi)
    if at_lo != at_hi:
        step = 2 * 1024**2  # kRoundLarge: min_device_bytes is outside + whole steps of it

        def largest(ok: Callable[[str], bool]) -> int:
            # the largest lo + k * step in [lo, hi) whose state is ok (state(lo) is)
            a, b = 0, (hi - lo) // step
            while b - a > 1:
                mid = (a + b) // 2
                if ok(state(lo + mid * step)):
                    a = mid
                else:
                    b = mid
            return lo + a * step

        found = at_hi
        if at_lo == "fits" and query.at_most(largest(lambda s: s == "fits")):
            found = "fits"
        elif at_hi == "does_not_fit" and query.at_most(largest(lambda s: s != "does_not_fit")):
            found = "borderline"
        assert need.fallback is not None
        if query.walked:  # the figure itself is known: judged on it
            return judge(bounded_need(query, need.fallback), memory_bytes, safety_margin)
        at_hi = found
        need = bounded_need(query, need.fallback)
    return Verdict(at_hi, need, memory_bytes, safety_margin)


def verdict_of(
    estimate: JsonObject | None, memory_bytes: int, safety_margin: float = 0.0
) -> Verdict | None:
    """:func:`judge` of an estimate response; ``None`` when the memory model rejected the
    setup (nothing to judge: it runs nowhere)."""
    if estimate is None:
        return None
    return judge(need_of(estimate), memory_bytes, safety_margin)


def state_of(estimate: JsonObject | None, memory_bytes: int, safety_margin: float = 0.0) -> str:
    """The verdict's state; ``does_not_fit`` for a setup the memory model rejected."""
    found = verdict_of(estimate, memory_bytes, safety_margin)
    return "does_not_fit" if found is None else found.state


def required_for(estimate: JsonObject, safety_margin: float) -> int:
    """Memory a card must report for the verdict ``fits`` (:attr:`Verdict.required_bytes`)."""
    return required_bytes(need_of(estimate).high_bytes, safety_margin)


def fit_entry(
    device_total_bytes: int,
    memory_bytes: int,
    safety_margin: float,
    device_range_bytes: tuple[int, int] | None = None,
) -> JsonObject:
    """One card against one figure and its range (:meth:`Verdict.to_dict` of :func:`judge`)."""
    low, high = device_range_bytes or (device_total_bytes, device_total_bytes)
    return judge(Need(device_total_bytes, low, high), memory_bytes, safety_margin).to_dict()


def fits_table(
    estimate: JsonObject | None, gpus: Iterable[Gpu], safety_margin: float
) -> JsonObject:
    """``{gpu_id: fit_entry}`` for every catalogue card (``fits: false`` and ``does_not_fit``
    everywhere when the memory model rejected the setup)."""
    out = {}
    for gpu in gpus:
        if estimate is None:
            out[gpu.id] = {
                "fits": False,
                "fits_without_margin": False,
                "memory_bytes": gpu.memory_bytes,
                "verdict": "does_not_fit",
            }
        else:
            out[gpu.id] = judge(need_of(estimate), gpu.memory_bytes, safety_margin).to_dict()
    return out


def configurations(request: EstimateRequest) -> list[tuple[int, str]]:
    """(GPU count, sharding) pairs the recommendation explores: one GPU unsharded, then 2 to
    64 GPUs (:data:`GPU_COUNTS`) with DDP, ZeRO-2 and ZeRO-3/FSDP, plus the request's own
    pair when it is not among them (e.g. 12 GPUs, or ZeRO-1). With sequence parallelism only
    the counts its groups divide (one GPU holds no group)."""
    sp = request.sequence_parallel
    out = [(1, "none")] if sp == 1 else []
    for n in GPU_COUNTS[1:]:
        if n % sp == 0:
            out.extend((n, s) for s in MULTI_GPU_SHARDINGS)
    own = (request.num_gpus, request.sharding.value)
    if own not in out:
        out.append(own)
    return out


def largest_fitting(fits: Callable[[int], bool], start: int, maximum: int) -> int | None:
    """Largest integer ``x`` in ``[1, maximum]`` with ``fits(x)``, assuming memory grows with x
    (so ``fits`` is true up to a point, then false). Exponential search from ``start``, then
    bisection: about ``2 * log2(answer)`` calls. ``None`` when even 1 does not fit."""
    start = max(1, min(start, maximum))
    if fits(start):
        lo = start
        hi = None
        probe = start
        while hi is None:
            if probe >= maximum:
                return maximum
            probe = min(probe * 2, maximum)
            if fits(probe):
                lo = probe
            else:
                hi = probe
    else:
        if start == 1 or not fits(1):
            return None
        lo, hi = 1, start
    while hi - lo > 1:  # invariant: fits(lo), not fits(hi)
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo


def has_caveat(config: JsonObject) -> bool:
    """A configuration with a warning of its own (ROCm caveats, a price at another rate or
    from the other kind of provider): ranked after an equal one without."""
    return any(
        isinstance(w, str) and (w.startswith(("rocm_", "price_")))
        for w in config.get("warnings", ())
    )


def estimate_level(value: float, figures: int = 2) -> float:
    """``value`` to two significant figures: what the site shows of an estimated time or cost
    (the time model's median error is 17 %), so two runs that show the same figure count as
    equal when ranking."""
    if not value or value != value or value in (float("inf"), float("-inf")):
        return value
    return round(value, figures - 1 - math.floor(math.log10(abs(value))))


__all__ = [
    "Estimator",
    "GPU_COUNTS",
    "MULTI_GPU_SHARDINGS",
    "Need",
    "Verdict",
    "configurations",
    "device_range",
    "estimate_level",
    "fit_entry",
    "fits_table",
    "has_caveat",
    "judge",
    "largest_fitting",
    "need_of",
    "required_bytes",
    "required_for",
    "settled",
    "state_of",
    "verdict_of",
]
