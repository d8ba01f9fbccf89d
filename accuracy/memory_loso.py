"""Leave-one-source-out (LOSO) validation of the memory model's fitted constants.

``calc`` has three constants fitted on measurements (each cited where it is defined):

- :data:`calc.memory.ALLOCATOR_SLACK_FRACTION`: reserved = allocated x (1 + slack);
- :data:`calc.memory.FSDP1_ALLOCATOR_SLACK_FRACTION`: the same for runs with FSDP1's wrap
  floor (``fsdp_wrap_floor``); a fold without such rows falls back to its own generic slack;
- :data:`calc.activations.COMPILE_KEPT_FRACTION`: the share of the recomputable bytes that
  ``torch.compile`` still keeps.

A source is one publication: one table of one commit of a README, one tutorial page, one
resource table (:func:`accuracy.memory.source_key`). For each source, both constants are fitted again on
the rows of every *other* source with the same procedure that produced ``calc``'s value
(:func:`fit_constants`), and the held-out source's rows are predicted with them. The
residuals of those predictions are the LOSO errors: what the model would have said about a
publication it had never seen. In-sample errors are those of ``calc`` as shipped.

The same LOSO residuals calibrate the ranges ``calc`` returns
(:mod:`calc.calibration`): per method and metric, the 10th and 90th percentiles of the
signed error. The calibration is itself checked leave-one-source-out: each held-out row is
tested against the band computed without its source (:func:`range_coverage`).

Analytic rows (the ZeRO paper's model-states formula) are no measurement: they are
reported apart and enter no headline figure (:func:`is_measured`).
"""

from __future__ import annotations

import contextlib
import statistics
from dataclasses import dataclass, replace

from accuracy import memory as vm
from accuracy.stats import percentile
from calc import activations, calibration, memory
from calc.fields import BY_KEY


def is_measured(result: vm.RowResult) -> bool:
    """A measurement, not the ZeRO paper's analytic model-states figure."""
    return result.metric != "model_states"


@dataclass(frozen=True)
class Constants:
    slack: float
    compile_kept: float
    slack_rows: tuple = ()
    compile_rows: tuple = ()
    compile_rule: str = "pair"  # "pair" (rows 22 -> 23) or "grid" (pair held out)
    slack_fsdp1: float = memory.FSDP1_ALLOCATOR_SLACK_FRACTION
    slack_fsdp1_rows: tuple = ()


@contextlib.contextmanager
def compile_kept(value: float):
    """Run estimates with another ``COMPILE_KEPT_FRACTION`` (read at call time by
    :func:`calc.memory.act_config`); restores calc's value on exit."""
    saved = activations.COMPILE_KEPT_FRACTION
    activations.COMPILE_KEPT_FRACTION = value
    memory.forget_estimates()
    try:
        yield
    finally:
        activations.COMPILE_KEPT_FRACTION = saved
        memory.forget_estimates()


def reserved_from(allocated: int, floor: int, slack: float) -> int:
    """:func:`calc.memory.reserved_bytes` with a given slack, and the reserved floor
    (quantization or FSDP1 wrap, :func:`accuracy.memory.reserved_floor_of`)."""
    return max(memory.reserved_bytes(allocated, slack), floor)


def predict(result: vm.RowResult, constants: Constants) -> vm.RowResult:
    """``result`` predicted again with ``constants`` (only covered, measured rows change)."""
    if not result.covered or not is_measured(result):
        return result
    allocated, floor = result.allocated_bytes, result.reserved_floor_bytes
    if result.request.get("torch_compile"):
        with compile_kept(constants.compile_kept):
            est = memory.estimate_dict(result.request)
        allocated, floor = est["peak_allocated_bytes"], vm.reserved_floor_of(est)
    slack = constants.slack_fsdp1 if result.fsdp1 else constants.slack
    predicted = (
        allocated if result.metric == "allocated" else reserved_from(allocated, floor, slack)
    )
    if result.metric == "device":
        predicted += result.device_extra_bytes
    return replace(
        result,
        predicted_bytes=predicted,
        allocated_bytes=allocated,
        reserved_floor_bytes=floor,
        error=(predicted - result.measured_bytes) / result.measured_bytes,
    )


def _fit_slack(train: list) -> tuple[float, tuple]:
    """calc's rule (:func:`accuracy.memory.fit_slack_fraction`): per publication,
    the median of ``measured / allocated - 1`` over rows that state ``max_memory_reserved``;
    then the median over publications. Without any such row, calc's value."""
    rows = [
        r
        for r in train
        if r.covered
        and r.metric == "reserved"
        and "metric_assumed" not in r.flags
        and "ambiguous" not in r.flags
    ]
    fraction = vm.fit_slack_fraction(rows)
    if fraction is None:
        return memory.ALLOCATOR_SLACK_FRACTION, ()
    return fraction, tuple(r.row_id for r in rows)


GRID = tuple(i / 100 for i in range(0, 101))


def _fit_compile(train: list, slack: float) -> tuple[float, tuple, str]:
    """calc's rule (:func:`accuracy.memory.fit_compile_kept`) on the pair of rows
    that isolates compile; when that pair is held out, the share in [0, 1] (steps of 0.01)
    that minimises the median absolute error of the compiled rows left (ambiguous ones
    excepted, as for the slack), predicted with the fold's slack."""
    ids = {r.row_id for r in train}
    if set(vm.COMPILE_FIT_ROWS) <= ids:
        return vm.fit_compile_kept(train).kept, vm.COMPILE_FIT_ROWS, "pair"
    compiled = [
        r
        for r in train
        if r.covered and "compile" in r.flags and is_measured(r) and "ambiguous" not in r.flags
    ]
    if not compiled:
        return activations.COMPILE_KEPT_FRACTION, (), "none"
    best = min(
        GRID,
        key=lambda k: (
            statistics.median(abs(predict(r, Constants(slack, k)).error) for r in compiled),
            abs(k - 0.5),
        ),
    )
    return best, tuple(r.row_id for r in compiled), "grid"


def fit_constants(results: list, held_out: str | None = None) -> Constants:
    """Both constants fitted on the rows whose source is not ``held_out``."""
    train = [r for r in results if r.source_key != held_out]
    slack, slack_rows = _fit_slack(train)
    fsdp1 = vm.fit_fsdp1_slack(train)
    fsdp1_rows = tuple(vm.fsdp1_slack_values(train))
    kept, compile_rows, rule = _fit_compile(train, slack)
    return Constants(
        slack, kept, slack_rows, compile_rows, rule, slack if fsdp1 is None else fsdp1, fsdp1_rows
    )


@dataclass(frozen=True)
class Loso:
    in_sample: list  # calc as shipped, every row
    held_out: list  # each row predicted with constants fitted without its source
    folds: dict  # source -> Constants fitted without it
    fitted_rows: frozenset  # rows some in-sample constant was fitted on


def run(results: list | None = None) -> Loso:
    results = results if results is not None else vm.compare_rows()
    folds, held = {}, []
    by_source: dict = {}
    for r in results:
        by_source.setdefault(r.source_key, []).append(r)
    for source, rows in by_source.items():
        constants = fit_constants(results, source)
        folds[source] = constants
        held.extend(predict(r, constants) for r in rows)
    order = {r.row_id: i for i, r in enumerate(results)}
    held.sort(key=lambda r: order[r.row_id])
    full = fit_constants(results)
    fitted = (
        frozenset(full.slack_rows)
        | frozenset(full.slack_fsdp1_rows)
        | frozenset(vm.COMPILE_FIT_ROWS)
    )
    return Loso(results, held, folds, fitted)


def framework_of(result: vm.RowResult) -> str:
    """The training library of a row (its request's ``framework``), ``analytic`` for the
    ZeRO paper."""
    if not is_measured(result):
        return "analytic"
    return str(result.request.get("framework", BY_KEY["framework"].default))


# ---- ranges ---------------------------------------------------------------------------------


def band(errors: list) -> tuple[float, float]:
    """The 10th and 90th percentiles of signed errors, rounded to 0.001."""
    return (round(percentile(errors, 10), 3), round(percentile(errors, 90), 3))


def bands(rows: list) -> dict:
    """``{(method, metric): (low, high)}`` from the signed LOSO errors of measured covered
    rows, in :data:`calc.calibration.ERROR_BANDS`'s shape: the wider of the cell's 10th-90th
    percentile band (when it has :data:`calc.calibration.MIN_ROWS` rows) and the band over
    every measured row. Small cells alone calibrate badly (their held-out coverage is far
    below 80 %, :func:`coverage_by_rule`); the pooled band alone ignores that QLoRA errs
    more than LoRA."""
    measured = [r for r in rows if r.covered and is_measured(r) and "ambiguous" not in r.flags]
    if not measured:
        return {}
    p_lo, p_hi = band([r.error for r in measured])
    out = {}
    for metric in calibration.METRICS:
        for method in calibration.METHODS:
            cell = [
                r.error
                for r in measured
                if _band_metric(r) == metric and r.method.lower() == method
            ]
            lo, hi = band(cell) if len(cell) >= calibration.MIN_ROWS else (p_lo, p_hi)
            out[(method, metric)] = (min(lo, p_lo), max(hi, p_hi))
    return out


def _band_metric(result: vm.RowResult) -> str:
    """nvidia-smi figures are reserved memory plus what the allocator does not see: their
    error joins the reserved band."""
    return "reserved" if result.metric == "device" else result.metric


def coverage_by_rule(loso: "Loso") -> dict:
    """Held-out coverage of the three candidate rules (cell alone, all rows alone, the wider of
    both), each band computed without the row's source: ``{rule: (inside, n)}``."""
    held = [r for r in loso.held_out if r.covered and is_measured(r)]
    out = {"cell": [0, 0], "pooled": [0, 0], "wider": [0, 0]}
    for source in {r.source_key for r in held}:
        train = [r for r in held if r.source_key != source and "ambiguous" not in r.flags]
        pooled = band([r.error for r in train])
        for r in (x for x in held if x.source_key == source):
            errs = [
                x.error
                for x in train
                if _band_metric(x) == _band_metric(r) and x.method == r.method
            ]
            cell = band(errs) if len(errs) >= calibration.MIN_ROWS else pooled
            wider = (min(cell[0], pooled[0]), max(cell[1], pooled[1]))
            for rule, b in (("cell", cell), ("pooled", pooled), ("wider", wider)):
                out[rule][0] += inside(r, b)
                out[rule][1] += 1
    return {k: tuple(v) for k, v in out.items()}


def inside(result: vm.RowResult, lo_hi: tuple[float, float]) -> bool:
    """Whether the measurement lies within the range the band gives around the prediction:
    ``measured = predicted / (1 + e)``, so ``e`` in [p10, p90] (:mod:`calc.calibration`)."""
    lo, hi = lo_hi
    return lo - 1e-12 <= result.error <= hi + 1e-12


def range_coverage(loso: Loso) -> dict:
    """Share of held-out rows inside the band computed without their source, overall and per
    method: ``{"all": (inside, n), "full": ..., ...}``."""
    held = [r for r in loso.held_out if r.covered and is_measured(r)]
    counts: dict = {}
    for source in {r.source_key for r in held}:
        table = bands([r for r in held if r.source_key != source])
        for r in (x for x in held if x.source_key == source):
            key = (r.method.lower(), _band_metric(r))
            if key not in table:
                continue
            hit = inside(r, table[key])
            for group in ("all", r.method.lower()):
                a, n = counts.get(group, (0, 0))
                counts[group] = (a + hit, n + 1)
    return counts


# ---- the report (benchmark script, methodology page and its tests read the same figures) ----


def groups(loso: Loso) -> list:
    """``[(group_id, keep)]``: the headline (measured rows), the measured rows no constant was
    fitted on, then by method, framework, metric and source."""
    results = loso.in_sample
    out = [
        ("measured", is_measured),
        ("measured_unfitted", lambda r: is_measured(r) and r.row_id not in loso.fitted_rows),
    ]
    out += [
        (f"method:{m}", lambda r, m=m: is_measured(r) and r.method == m)
        for m in ("full", "LoRA", "QLoRA")
    ]
    frameworks = sorted({framework_of(r) for r in results if r.covered})
    out += [(f"framework:{f}", lambda r, f=f: framework_of(r) == f) for f in frameworks]
    out += [
        (f"metric:{m}", lambda r, m=m: r.metric == m)
        for m in ("allocated", "reserved", "device", "model_states")
    ]
    out += [("metric_stated", lambda r: is_measured(r) and "metric_assumed" not in r.flags)]
    out += [
        (f"source:{k}", lambda r, k=k: r.source_key == k)
        for k in dict.fromkeys(r.source_key for r in results)
    ]
    return out


def report(loso: Loso | None = None) -> dict:
    """``{group_id: {count, in_median, in_p90, in_max, loso_median, loso_p90, loso_max}}``
    (fractions) for every group of :func:`groups` with covered rows."""
    loso = loso or run()
    out = {}
    for gid, keep in groups(loso):
        a, b = vm.summary(loso.in_sample, keep), vm.summary(loso.held_out, keep)
        if a.count:
            out[gid] = {
                "count": a.count,
                "in_median": a.median_abs_error,
                "in_p90": a.p90_abs_error,
                "in_max": a.max_abs_error,
                "loso_median": b.median_abs_error,
                "loso_p90": b.p90_abs_error,
                "loso_max": b.max_abs_error,
            }
    return out


__all__ = [
    "Constants",
    "Loso",
    "band",
    "bands",
    "fit_constants",
    "framework_of",
    "coverage_by_rule",
    "groups",
    "inside",
    "is_measured",
    "predict",
    "range_coverage",
    "report",
    "run",
]
