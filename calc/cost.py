"""Cloud cost of a fine-tuning run: GPU-hours, start-ups, interruptions, storage, experiments.

The seeds (004, "Coste fine tuning LLM en cloud") name what the hourly rate alone misses:
experimentation (failed runs and trials often cost more than the final run), storage billed
while it exists, and start-up/model download billed on every start; interruptible capacity is
cheaper but needs frequent checkpoints. Each appears as its own line of the breakdown.
All money in US dollars, all durations in hours unless the name says minutes.
"""

from __future__ import annotations

from dataclasses import dataclass

from .jsontypes import JsonObject

HOURS_PER_MONTH = 730.0
"""8760 hours a year / 12: the convention cloud price sheets use for monthly figures."""

BYTES_PER_GB = 10**9

DATASET_BYTES_PER_TOKEN = 4
"""Tokenised datasets store ids as int32 (4 bytes per token); the raw text is about as large
(roughly 4 characters per English token), so 4 bytes/token is the order of either."""

CHECKPOINT_BYTES_PER_TRAINABLE_PARAM = 6
"""A resumable checkpoint: 16-bit trainable weights plus AdamW's two moments in 16-bit
(the pure-bf16 regime of torchtune/LitGPT, 2 + 4 bytes); mixed precision would double it."""

CHECKPOINT_WRITE_GB_PER_S = 1.0
"""Default rate one server writes a checkpoint at, GB/s (request key
``checkpoint_write_gb_per_s``): about the most a provisioned cloud block volume sustains (AWS
EBS gp3: 125 MiB/s unless more is provisioned, at most 1,000 MiB/s per volume, AWS EC2 API
reference, ``CreateVolume`` ``Throughput``). An assumption to replace with one's own disk: a
gp3 volume left at its default writes 8 times slower, a local NVMe drive several times
faster."""

BASE_MODEL_BYTES_PER_PARAM = 2
"""The downloaded base model in bf16/fp16 safetensors."""

ELECTRICITY_USD_PER_KWH = 0.17
"""Default electricity price for a card one owns (request key ``electricity_price_per_kwh``):
about the US residential average, 17 cents per kWh (EIA, Electric Power Monthly, table 5.6.A,
2025). An assumption to replace with one's own tariff: prices per kWh differ several-fold
between countries and contracts."""

WATTS_PER_KW = 1000.0


def electricity_usd_per_gpu_hour(board_power_w: float, usd_per_kwh: float) -> float:
    """What an owned card costs per hour of work: its board power (watts, the vendor's TDP,
    ``board_power_w`` in ``calc/data/gpus.csv``) drawn for an hour, at ``usd_per_kwh``:
    ``board_power_w / 1000 * usd_per_kwh``. Full load is the working assumption of a training
    run; the host around the card (CPU, fans, power supply losses) is not counted."""
    return board_power_w / WATTS_PER_KW * usd_per_kwh


ENVIRONMENT_GB = 30.0
"""Container image with CUDA, PyTorch and the training stack: assumption (common images are
15-30 GB uncompressed)."""


@dataclass(frozen=True)
class CostInputs:
    """The cost-side inputs of a plan request, validated (their keys: group ``plan`` of :data:`calc.fields.FIELDS`)."""

    price_per_gpu_hour: float
    num_gpus: int
    storage_gb: float
    storage_price_per_gb_month: float
    months_kept: float
    startup_minutes: float
    starts: int
    experiment_multiplier: float
    interruptible: bool
    checkpoint_interval_minutes: float
    checkpoint_minutes: float
    interruptions_per_day: float


@dataclass(frozen=True)
class Schedule:
    """Wall-clock hours of the final run, by cause."""

    compute_hours: float
    startup_hours: float
    checkpoint_hours: float
    lost_work_hours: float
    interruptions: float
    eval_hours: float = 0.0

    @property
    def total_hours(self) -> float:
        return (
            self.compute_hours
            + self.eval_hours
            + self.startup_hours
            + self.checkpoint_hours
            + self.lost_work_hours
        )

    def to_dict(self) -> JsonObject:
        return {
            "compute_hours": self.compute_hours,
            "eval_hours": self.eval_hours,
            "startup_hours": self.startup_hours,
            "checkpoint_hours": self.checkpoint_hours,
            "lost_work_hours": self.lost_work_hours,
            "expected_interruptions": self.interruptions,
            "total_hours": self.total_hours,
        }


@dataclass(frozen=True)
class RunExtras:
    """Hours of a run besides its training steps, from :mod:`calc.run_phases`: its evaluations,
    and with ``save_steps`` its saves and the training hours between two of them."""

    eval_hours: float = 0.0
    save_hours: float | None = None
    save_interval_hours: float | None = None


def schedule(compute_hours: float, c: CostInputs, extras: RunExtras = RunExtras()) -> Schedule:
    """Wall-clock of one run.

    - Start-up (environment, model download): ``starts * startup_minutes``, billed each start.
    - Evaluations (``extras.eval_hours``): on top of the training hours.
    - Checkpoints: with ``save_steps`` (``extras.save_hours``) the saves the run makes, on any
      capacity; else on interruptible capacity only, one every ``checkpoint_interval_minutes``
      costing ``checkpoint_minutes``.
    - Interruptible capacity only: interruptions arrive at ``interruptions_per_day`` over the
      run, each losing half the work between two checkpoints on average (uniform arrival) plus
      a restart.
    """
    startup = c.starts * c.startup_minutes / 60.0
    working = compute_hours + extras.eval_hours
    if extras.save_hours is not None:
        ckpt = extras.save_hours
        interval_hours = extras.save_interval_hours or 0.0
    elif c.interruptible:
        ckpt = compute_hours * 60.0 / c.checkpoint_interval_minutes * c.checkpoint_minutes / 60.0
        interval_hours = c.checkpoint_interval_minutes / 60.0
    else:
        ckpt = interval_hours = 0.0
    if not c.interruptible:
        return Schedule(compute_hours, startup, ckpt, 0.0, 0.0, extras.eval_hours)
    interruptions = c.interruptions_per_day * (working + ckpt) / 24.0
    lost = interruptions * (interval_hours / 2.0 + c.startup_minutes / 60.0)
    return Schedule(compute_hours, startup, ckpt, lost, interruptions, extras.eval_hours)


def default_storage_gb(
    params_total: int,
    params_trainable: int,
    dataset_tokens: float,
    checkpoints_kept: int = 2,
    checkpoint_bytes: int | None = None,
) -> JsonObject:
    """Persistent disk when the request gives no ``storage_gb``: base model download,
    ``checkpoints_kept`` resumable checkpoints, the tokenised dataset and the environment. A
    checkpoint is ``checkpoint_bytes`` when the run's saves are counted (``save_steps``,
    :func:`calc.run_phases.checkpoint_bytes`), else ``CHECKPOINT_BYTES_PER_TRAINABLE_PARAM``
    per trainable parameter."""
    each = (
        params_trainable * CHECKPOINT_BYTES_PER_TRAINABLE_PARAM
        if checkpoint_bytes is None
        else checkpoint_bytes
    )
    parts = {
        "base_model": params_total * BASE_MODEL_BYTES_PER_PARAM / BYTES_PER_GB,
        "checkpoints": checkpoints_kept * each / BYTES_PER_GB,
        "dataset": dataset_tokens * DATASET_BYTES_PER_TOKEN / BYTES_PER_GB,
        "environment": ENVIRONMENT_GB,
    }
    parts["total"] = sum(parts.values())
    return parts


@dataclass(frozen=True)
class CostEstimate:
    schedule: Schedule
    inputs: CostInputs

    @property
    def gpu_hours(self) -> float:
        return self.schedule.total_hours * self.inputs.num_gpus

    @property
    def per_hour_usd(self) -> float:
        """What the rented GPUs cost per wall-clock hour."""
        return self.inputs.price_per_gpu_hour * self.inputs.num_gpus

    def _hours_usd(self, hours: float) -> float:
        return hours * self.per_hour_usd

    @property
    def final_run_usd(self) -> float:
        return self._hours_usd(self.schedule.total_hours)

    @property
    def experimentation_usd(self) -> float:
        """``(experiment_multiplier - 1)`` more runs' worth of GPU time for trials and failures."""
        return (self.inputs.experiment_multiplier - 1.0) * self.final_run_usd

    @property
    def storage_usd(self) -> float:
        return (
            self.inputs.storage_gb
            * self.inputs.storage_price_per_gb_month
            * self.inputs.months_kept
        )

    @property
    def total_usd(self) -> float:
        return self.final_run_usd + self.experimentation_usd + self.storage_usd

    @property
    def per_month_usd(self) -> float:
        """Keeping the GPUs rented around the clock for a month, plus a month of storage."""
        return (
            self.per_hour_usd * HOURS_PER_MONTH
            + self.inputs.storage_gb * self.inputs.storage_price_per_gb_month
        )

    def to_dict(self) -> JsonObject:
        s = self.schedule
        return {
            "total": self.total_usd,
            "final_run": self.final_run_usd,
            "breakdown": {
                "gpu_compute": self._hours_usd(s.compute_hours),
                "evaluation": self._hours_usd(s.eval_hours),
                "startup": self._hours_usd(s.startup_hours),
                "checkpointing": self._hours_usd(s.checkpoint_hours),
                "lost_work": self._hours_usd(s.lost_work_hours),
                "experimentation": self.experimentation_usd,
                "storage": self.storage_usd,
            },
            "gpu_hours": self.gpu_hours,
            "per_gpu_hour": self.inputs.price_per_gpu_hour,
            "per_hour": self.per_hour_usd,
            "per_month": self.per_month_usd,
            "storage_per_month": self.inputs.storage_gb * self.inputs.storage_price_per_gb_month,
            "hours_per_month": HOURS_PER_MONTH,
        }


def estimate_cost(
    compute_hours: float, inputs: CostInputs, extras: RunExtras = RunExtras()
) -> CostEstimate:
    return CostEstimate(schedule(compute_hours, inputs, extras), inputs)


__all__ = [
    "CostEstimate",
    "CostInputs",
    "HOURS_PER_MONTH",
    "RunExtras",
    "Schedule",
    "ELECTRICITY_USD_PER_KWH",
    "default_storage_gb",
    "electricity_usd_per_gpu_hour",
    "estimate_cost",
    "schedule",
]
