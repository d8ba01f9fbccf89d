"""Published reserved peaks of runs whose samples vary in length (no packing), against calc.

Reads ``validation/variable_length_peaks.csv``: each row is a published reserved figure of a run
padded to the longest sample of each batch, with the run's settings, a ``length_stats`` object
whose source the row cites, and ``calc_request`` (an estimate request carrying that
``length_stats`` and ``batching``). calc answers such a request with two reserved figures: the
estimate's ``peak_reserved_bytes`` (the allocated peak of the longest micro-batch times the
fitted slack) and the allocator replay's ``allocator.simulated_reserved_bytes``
(:func:`calc.step_events.simulate_request`). The replay is what these rows validate; both are
recorded. Errors are ``(predicted - measured) / measured``.

The judged columns (``judged_at_commit``, ``first_contact_simulated_gib``,
``first_contact_error``, ``first_contact_estimate_gib``, ``first_contact_estimate_error``) are
filled once by :func:`record_first_contact`, before anything in calc changes for these rows, and
never rewritten. ``today_request_changes`` (a JSON object merged onto the request for today's
figures) and ``reading_note`` record a setting read wrong at first contact; the recorded columns
keep what was said.

``validation/variable_length_quantiles.csv`` holds, per row, a percentile of the data that the
row's length source publishes and the request keys of its first contact could not carry (``p99``):
today's request adds it to ``length_stats``; the recorded request and its first contact stay.
"""

from __future__ import annotations

import csv
import json
import re
import statistics
import subprocess
from dataclasses import dataclass
from pathlib import Path

from accuracy.stats import percentile
from calc.request import EstimateRequest

CSV = Path(__file__).resolve().parent.parent / "validation" / "variable_length_peaks.csv"
QUANTILES = CSV.with_name("variable_length_quantiles.csv")
GIB = 2**30
JUDGED = (
    "judged_at_commit",
    "first_contact_simulated_gib",
    "first_contact_error",
    "first_contact_estimate_gib",
    "first_contact_estimate_error",
)
BATCHINGS = ("pad-longest", "grouped", "pad-max", "padding-free")
"""The ``batching`` of a request these rows may carry: every row is a run without packing
(``padding-free`` puts a micro-batch's own samples in one row; it packs nothing)."""


@dataclass(frozen=True)
class Judged:
    row_id: str
    source: str
    measured_gib: float
    simulated_gib: float  # allocator.simulated_reserved_bytes
    estimate_gib: float  # peak_reserved_bytes
    allocated_gib: float  # peak_allocated_bytes
    peak_batch_tokens: int
    card: str | None = None  # the catalogue card the replay ran on (None: not named, unlimited)
    out_of_memory: bool = False  # the replay on that card ran out of memory (figure: unlimited)

    @property
    def error(self) -> float:
        return (self.simulated_gib - self.measured_gib) / self.measured_gib

    @property
    def estimate_error(self) -> float:
        return (self.estimate_gib - self.measured_gib) / self.measured_gib


def load(path: Path = CSV) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def covered(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    return [r for r in rows if not r["calc_not_covered"]]


def load_quantiles(path: Path = QUANTILES) -> dict[str, int]:
    """Row id -> the data's published 99th percentile (tokens per sample), where its source
    gives one."""
    with path.open(newline="") as handle:
        return {r["id"]: int(r["p99"]) for r in csv.DictReader(handle)}


def row_request(row: dict[str, str], today: bool = True) -> dict[str, object]:
    """The row's request: as recorded, or (``today``) with ``today_request_changes`` merged,
    the run's length the row records (its ``max_steps`` column), which calc reads as the number
    of samples the run meets (``max_steps``, :func:`calc.lengths.samples_seen`), and the data's
    ``p99`` where :data:`QUANTILES` has it (``length_stats.p99``): the recorded requests predate
    those keys, and their first contact stays as judged."""
    request: dict[str, object] = json.loads(row["calc_request"])
    if today:
        if row.get("max_steps"):
            request.setdefault("max_steps", int(row["max_steps"]))
        if row.get("today_request_changes"):
            request.update(json.loads(row["today_request_changes"]))
        p99 = load_quantiles().get(row["id"])
        stats = request.get("length_stats")
        if p99 is not None and isinstance(stats, dict):
            request["length_stats"] = {**stats, "p99": p99}
    return request


ONE_RANK_METRIC = "printed by rank 0"
"""Words of a row's ``memory_metric`` when its figure is one process's while the run trains on
several data-parallel ranks: the HF Trainer logs on the main process only (Liger-Kernel's
``examples/huggingface/callback.py`` ``EfficiencyCallback``), llama-recipes prints its
``MemoryTrace`` on rank 0. Each rank draws its own samples, so the longest micro-batch that rank
met is the longest of its share of them, ``1 / data_parallel`` of the run's; calc's estimate
answers for the rank that meets the run's longest (the run stops at the first GPU out of
memory). Today's reading judges such a figure on that rank's share (:func:`row_estimate_request`);
the first contact stays as recorded."""


def one_rank(row: dict[str, str]) -> bool:
    """Whether the row's figure is one rank's of several (:data:`ONE_RANK_METRIC`)."""
    return ONE_RANK_METRIC in row["memory_metric"]


def row_estimate_request(row: dict[str, str], today: bool = True) -> EstimateRequest:
    """:func:`row_request`, validated. Today, for one rank's figure (:func:`one_rank`) of a run
    on several data-parallel ranks, the run's length is that rank's: the samples it meets,
    ``samples_seen / data_parallel`` (:func:`calc.lengths.samples_seen`), in place of
    ``max_steps`` (which counts every rank's). A request cannot say that (``samples_seen`` is
    the plan's, from its dataset), so the validated request carries it."""
    from calc.lengths import samples_seen
    from calc.request import parse_estimate_request

    req = parse_estimate_request(row_request(row, today))
    seen = samples_seen(req)
    if today and one_rank(row) and req.data_parallel > 1 and seen is not None:
        req = req.replaced(max_steps=None, samples_seen=max(1, seen // req.data_parallel))
    return req


PER_STEP_METRIC = re.compile(r"memory_reserved p(\d+) over training steps")
"""A row's ``memory_metric`` when its figure is a percentile of the reserved memory logged
after each optimizer step by a loop that empties the cache after every step (PEFT's
``method_comparison/MetaMathQA/run.py`` at 5fe7f8f8a: ``torch.cuda.memory_reserved()`` after
``optimizer.step()``, then ``torch.cuda.empty_cache()``; ``np.percentile(log, 99)``): each
logged figure is then that step's own reserved peak, built from the cache the release left,
and the percentile is a step's, not the run's peak."""


def per_step_percentile(row: dict[str, str]) -> int | None:
    """The percentile of a per-step reserved metric (:data:`PER_STEP_METRIC`), else None."""
    found = PER_STEP_METRIC.fullmatch(row["memory_metric"])
    return int(found.group(1)) if found else None


DEVICE_METRIC = "nvidia-smi memory.used"
"""A row's ``memory_metric`` prefix when its figure is what NVML reports as used on the card
(``nvidia-smi --query-gpu=memory.used``): the caching allocator's reserved memory plus what lies
outside it (the CUDA context, the driver's and libraries' own buffers). calc's figures for such a
row add its outside memory (``device_total_bytes - peak_reserved_bytes``) to the replay, and the
estimate's figure is ``device_total_bytes``."""


def is_device_metric(row: dict[str, str]) -> bool:
    """Whether the row's figure is the card's used memory (:data:`DEVICE_METRIC`) rather than the
    allocator's reserved memory."""
    return row["memory_metric"].startswith(DEVICE_METRIC)


def step_percentile_reserved(req: EstimateRequest, percent: int) -> int:
    """The ``percent``-th percentile (``numpy.percentile``'s linear interpolation) of the
    reserved memory after each optimizer step of the request's step sequence, the cache emptied
    after every step (:func:`calc.step_events.reserved_after_step`). A step's figure then
    depends on its own micro-batches only and grows with their length, so the percentile is
    that of the steps ranked by their longest micro-batch: the two steps around the rank are
    replayed, not all of them."""
    from calc.lengths import micro_batch_tokens
    from calc.step_events import optimizer_steps, reserved_after_step

    steps = sorted(
        optimizer_steps(req, micro_batch_tokens(req)), key=lambda group: (max(group), sum(group))
    )
    rank = (len(steps) - 1) * percent / 100
    low, high = int(rank), min(int(rank) + 1, len(steps) - 1)
    at_low = reserved_after_step(req, steps[low])
    at_high = at_low if high == low else reserved_after_step(req, steps[high])
    return round(at_low + (at_high - at_low) * (rank - low))


ROW_CARDS = (
    (re.compile(r"\bT4\b"), "t4"),
    (re.compile(r"A100 \(?80GB"), "a100-80gb-sxm"),
    (re.compile(r"A100-SXM4-40GB"), "a100-40gb-sxm"),
    (re.compile(r"\bA10G\b"), "a10g"),
    (re.compile(r"\bL40S\b"), "l40s"),
    (re.compile(r"\bL4\b"), "l4"),
    (re.compile(r"RTX 4090"), "rtx-4090"),
    (re.compile(r"RTX 3090"), "rtx-3090"),
    (re.compile(r"RTX 5090"), "rtx-5090"),
)
"""The catalogue card of a row's ``gpu`` text (the first pattern found), for the replay on the
run's own card: the A100 80GB rows are read as the SXM card (the rows do not name the form
factor; both carry 80 GB); the A100 40GB row names it (``A100-SXM4-40GB``, as torch prints
it); ``L4`` is the L4 (not the L40S, whose name goes on). A row whose card is not stated
matches none and is replayed with no limit."""


def row_card(row: dict[str, str]) -> str | None:
    """The catalogue id of the card the row's run used (:data:`ROW_CARDS`), or None."""
    if row["gpu"].lower().startswith("not stated"):
        return None
    return next((card for pattern, card in ROW_CARDS if pattern.search(row["gpu"])), None)


def replay_on_card(req: EstimateRequest, card: str) -> tuple[int, bool]:
    """The replay's peak reserved bytes on ``card`` (the allocator's capacity: the card's memory
    less calc's memory outside the allocator, :func:`calc.memory.outside_allocator_bytes`), and whether
    it ran out of memory there. On a card smaller than the unlimited replay's cache the allocator
    releases its cached segments and retries before it grows past the card
    (``release_cached_blocks``), so the figure a run published on that card is bounded by it.
    The load's warmup block is the one that card's free memory caps
    (:func:`calc.load_warmup.block_bytes`)."""
    from calc.gpus import get_gpu
    from calc.load_warmup import block_bytes
    from calc.memory import CUDA_CONTEXT_BYTES, outside_allocator_bytes
    from calc.step_events import StepReplay, simulated_lengths

    memory = get_gpu(card).memory_bytes
    capacity = memory - outside_allocator_bytes(req.num_gpus)
    # the load's warmup block, capped by the memory free when the model loads (the CUDA
    # context made, no NCCL buffer yet: those come with the first collective)
    block = block_bytes(req, memory - CUDA_CONTEXT_BYTES)
    run = StepReplay(req, simulated_lengths(req), load_block_bytes=block).replay(capacity)
    return run.peak_reserved_bytes, not run.fits


def judge_row(row: dict[str, str], today: bool = True) -> Judged:
    """calc's two reserved figures for a covered row at today's code, for today's request or
    (``today`` false) the request as recorded (:func:`row_estimate_request`). The replay's
    figure is the run's peak reserved (``allocator.simulated_reserved_bytes``), or, for a
    per-step percentile metric (:data:`PER_STEP_METRIC`, today's reading), that percentile of
    the steps' reserved memory (:func:`step_percentile_reserved`). For a row that measured the
    card's used memory (:data:`DEVICE_METRIC`) both figures carry calc's memory outside the
    allocator."""
    from calc.memory import estimate_response

    req = row_estimate_request(row, today)
    out = estimate_response(req)
    allocator = out["allocator"]
    assert isinstance(allocator, dict)
    data = out["data"]
    assert isinstance(data, dict)
    percent = per_step_percentile(row) if today else None
    simulated = (
        int(allocator["simulated_reserved_bytes"])
        if percent is None
        else step_percentile_reserved(req, percent)
    )
    card, out_of_memory = row_card(row), False
    if card is not None and percent is None:
        on_card, out_of_memory = replay_on_card(req, card)
        if not out_of_memory:
            simulated = on_card
    estimate = int(out["peak_reserved_bytes"])
    if is_device_metric(row):
        outside = int(out["device_total_bytes"]) - estimate
        simulated += outside
        estimate += outside
    return Judged(
        row["id"],
        row["source"],
        float(row["peak_gib"]),
        simulated / GIB,
        estimate / GIB,
        int(out["peak_allocated_bytes"]) / GIB,
        int(data["peak_batch_tokens"]),
        card,
        out_of_memory,
    )


def head_commit() -> str:
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()


def record_first_contact(path: Path = CSV) -> int:
    """Fill the judged columns of covered rows that have none; a judged row is never touched.
    Returns how many rows were judged now."""
    rows = load(path)
    commit = head_commit()
    count = 0
    for row in covered(rows):
        if row["judged_at_commit"]:
            continue
        j = judge_row(row, today=False)
        row.update(
            {
                "judged_at_commit": commit,
                "first_contact_simulated_gib": f"{j.simulated_gib:.4f}",
                "first_contact_error": f"{j.error:.6f}",
                "first_contact_estimate_gib": f"{j.estimate_gib:.4f}",
                "first_contact_estimate_error": f"{j.estimate_error:.6f}",
            }
        )
        count += 1
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return count


def abs_stats(errors: list[float]) -> tuple[float, float]:
    """Median and 90th percentile of ``|error|``."""
    values = [abs(e) for e in errors]
    return statistics.median(values), percentile(values, 90)


def figures(rows: list[dict[str, str]] | None = None, today: bool = True) -> dict[str, object]:
    """What the methodology page publishes: the recorded first contact of the replay's reserved
    peak (median and p90 of ``|error|``, signed median) and of the estimate's reserved figure,
    the rows and sources behind them and the commit(s) they were judged at, the same median and
    p90 over the rows judged after the first judged row's commit (``later_*``: the sources added
    after the replay's first contact); with ``today``, the
    replay's median and p90 of ``|error|`` today (today's requests) too."""
    rows = load() if rows is None else rows
    judged = [r for r in covered(rows) if r["judged_at_commit"]]
    errors = [float(r["first_contact_error"]) for r in judged]
    estimate = [float(r["first_contact_estimate_error"]) for r in judged]
    median, p90 = abs_stats(errors)
    est_median, est_p90 = abs_stats(estimate)
    # the rows judged after the first judged row's commit: sources added once the replay had met
    # its first rows, so their first contact is a prediction on data it had not seen
    first_commit = judged[0]["judged_at_commit"] if judged else ""
    later = [r for r in judged if r["judged_at_commit"] != first_commit]
    later_median, later_p90 = (
        abs_stats([float(r["first_contact_error"]) for r in later]) if later else (0.0, 0.0)
    )
    now: dict[str, object] = {}
    if today:
        now_median, now_p90 = abs_stats([judge_row(r).error for r in covered(rows)])
        now = {"today_median": now_median, "today_p90": now_p90}
    return {
        **now,
        "rows": len(rows),
        "judged": len(judged),
        "sources": len({r["source"] for r in judged}),
        "median": median,
        "p90": p90,
        "signed_median": statistics.median(errors),
        "estimate_median": est_median,
        "estimate_p90": est_p90,
        "commits": sorted({r["judged_at_commit"][:10] for r in judged}),
        "later_rows": len(later),
        "later_sources": len({r["source"] for r in later}),
        "later_median": later_median,
        "later_p90": later_p90,
    }


def report(rows: list[dict[str, str]] | None = None) -> list[str]:
    """Lines for ``python -m benchmarks.validate_fit_boundaries``: each covered row today (the
    replay's reserved peak, the estimate's, the allocated peak, the longest micro-batch) beside
    the measured figure, rows not covered with their reason, and the recorded first contact."""
    rows = load() if rows is None else rows
    lines = ["variable-length reserved peaks (validation/variable_length_peaks.csv):"]
    today = []
    for row in rows:
        if row["calc_not_covered"]:
            lines.append(f"  {row['id']:7s} not covered: {row['calc_not_covered']}")
            continue
        if row.get("today_request_changes"):
            lines.append(f"  {row['id']:7s} read again today: {row['today_request_changes']}")
        if one_rank(row):
            lines.append(f"  {row['id']:7s} one rank's figure: judged on that rank's samples")
        j = judge_row(row)
        today.append(j)
        lines.append(
            f"  {j.row_id:7s} measured {j.measured_gib:6.2f} GiB  replay {j.simulated_gib:6.2f} "
            f"({j.error:+.1%})  estimate {j.estimate_gib:6.2f} ({j.estimate_error:+.1%})  "
            f"allocated {j.allocated_gib:6.2f}  longest micro-batch {j.peak_batch_tokens} tokens"
            f"  on {j.card or 'no named card'}{' (out of memory there)' if j.out_of_memory else ''}"
        )
    if today:
        median, p90 = abs_stats([j.error for j in today])
        lines.append(
            f"  today: replay |error| median {median:.1%}, p90 {p90:.1%} over {len(today)} rows"
        )
    f = figures(rows, today=False)
    if f["judged"]:
        lines.append(
            f"  first contact (calc at {', '.join(f['commits'])}): replay |error| median "
            f"{f['median']:.1%}, p90 {f['p90']:.1%} (signed median {f['signed_median']:+.1%}); "
            f"estimate's reserved |error| median {f['estimate_median']:.1%}, p90 "
            f"{f['estimate_p90']:.1%}; {f['judged']} rows, {f['sources']} sources "
            "(target: median <= 10 %, p90 <= 25 %)"
        )
        lines.append(
            f"  first contact of the sources added later ({f['later_sources']} sources, "
            f"{f['later_rows']} rows): replay |error| median {f['later_median']:.1%}, p90 "
            f"{f['later_p90']:.1%}"
        )
    return lines
