"""What a run does besides its training steps: evaluations and checkpoint saves.

When they happen is read from HF Trainer (transformers 5.17, the stack most readers run):

- ``TrainerState.compute_steps`` (``trainer_callback.py``): an ``eval_steps`` or
  ``save_steps`` below 1 is a share of the run's optimizer steps, ``ceil(max_steps x value)``;
- ``DefaultFlowCallback.on_step_end``: with the ``steps`` strategies an evaluation runs after
  every step that is a multiple of ``eval_steps`` and a save after every multiple of
  ``save_steps``; at the last step one more evaluation runs unless that step was one already,
  and a save runs (the same save when that step was a multiple). Both are
  ``ceil(steps / every)``.

What a save writes is what the memory model holds (:mod:`calc.states`), so it is counted, not
assumed: ``Trainer._save_checkpoint`` writes the model (``save_model``: every weight for full
fine-tuning; peft's ``save_pretrained`` writes the adapters and the ``modules_to_save`` copies
only) and, unless ``save_only_model``, the optimizer's state dict (``optimizer.pt``, or each
rank's ZeRO partition under DeepSpeed, which holds the fp32 master copy too). Scheduler, RNG
and trainer-state files are a few kilobytes and are left out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from . import states as st
from .cost import BYTES_PER_GB, CHECKPOINT_WRITE_GB_PER_S
from .fields import Method, Sharding
from .jsontypes import JsonObject
from .request import EstimateRequest


def interval_steps(every: float, total_steps: int) -> int:
    """``eval_steps`` / ``save_steps`` as HF Trainer reads it: below 1, a share of the run's
    steps (``ceil(total_steps x every)``, at least 1); else whole steps."""
    if every < 1:
        return max(1, math.ceil(total_steps * every))
    return max(1, int(every))


def occurrences(total_steps: int, every: float) -> int:
    """How many evaluations (or saves) a run of ``total_steps`` optimizer steps runs with one
    every ``every`` steps: one after each multiple, and one at the last step unless it is a
    multiple (``DefaultFlowCallback.on_step_end``)."""
    if total_steps <= 0:
        return 0
    return -(-total_steps // interval_steps(every, total_steps))


@dataclass(frozen=True)
class CheckpointBytes:
    """Bytes one checkpoint writes: the model's (one writer) and the optimizer's (per rank
    where the states are sharded)."""

    model: int
    optimizer: int

    @property
    def total(self) -> int:
        return self.model + self.optimizer


def checkpoint_bytes(req: EstimateRequest, save_only_model: bool) -> CheckpointBytes:
    """What one save writes (module docstring). Full fine-tuning: every parameter at the dtype
    it is stored in (fp32 under PyTorch AMP, 16-bit otherwise: :func:`calc.states.regime`);
    LoRA / QLoRA: the trainable parameters at theirs (:func:`calc.states.adapter_regime`).
    The optimizer: its states (:func:`calc.states.optimizer_state_bytes`) and a separate fp32
    master copy where the regime keeps one (DeepSpeed ZeRO's mixed precision)."""
    reg = st.request_regime(req)
    layout = st.param_layout(req)
    if req.method is Method.FULL:
        model = req.model.params_total * reg.weight_bytes
        trainable_reg = reg
    else:
        trainable_reg = st.adapter_regime(req, reg)
        model = layout.trainable * trainable_reg.weight_bytes
    optimizer = 0
    if not save_only_model:
        optimizer = (
            st.optimizer_state_bytes(req, layout, trainable_reg)
            + layout.trainable * trainable_reg.master_bytes
        )
    return CheckpointBytes(model, optimizer)


def save_seconds(
    ckpt: CheckpointBytes, sharding: Sharding, servers: int, write_gb_per_s: float
) -> float:
    """Seconds one save takes. The model is written by one process (rank 0, one server's disk);
    the optimizer's states too, unless they are sharded (ZeRO-1/2/3, FSDP): then every rank
    writes its own part and each server writes its ranks' parts at once, so the states take
    ``1 / servers`` of the time. The rate is the disk's (``write_gb_per_s`` per server):
    serialisation is assumed to keep up with it."""
    rate = write_gb_per_s * BYTES_PER_GB
    sharded = sharding not in (Sharding.NONE, Sharding.DDP)
    writers = max(1, servers) if sharded else 1
    return ckpt.model / rate + ckpt.optimizer / (rate * writers)


@dataclass(frozen=True)
class RunPhases:
    """Evaluations and saves of one run, by count and seconds each."""

    steps: int
    evaluations: int
    eval_seconds: float
    saves: int
    save_seconds: float
    checkpoint: CheckpointBytes | None

    @property
    def eval_hours(self) -> float:
        return self.evaluations * self.eval_seconds / 3600.0

    @property
    def save_hours(self) -> float:
        return self.saves * self.save_seconds / 3600.0

    def to_dict(self) -> JsonObject:
        return {
            "optimizer_steps": self.steps,
            "evaluations": self.evaluations,
            "seconds_per_evaluation": self.eval_seconds,
            "eval_hours": self.eval_hours,
            "saves": self.saves,
            "seconds_per_save": self.save_seconds,
            "save_hours": self.save_hours,
            "checkpoint_bytes": None if self.checkpoint is None else self.checkpoint.total,
            "checkpoint_model_bytes": None if self.checkpoint is None else self.checkpoint.model,
            "checkpoint_optimizer_bytes": (
                None if self.checkpoint is None else self.checkpoint.optimizer
            ),
        }


def run_steps(total_tokens: float, tokens_per_step: float) -> int:
    """Optimizer steps of a run: its tokens over the real tokens one step takes (all GPUs),
    the last partial step counted (HF Trainer's ``max_steps`` for one epoch rounds up)."""
    if tokens_per_step <= 0:
        return 0
    return max(1, math.ceil(total_tokens / tokens_per_step))


def with_sharding(req: EstimateRequest, num_gpus: int, sharding: str) -> EstimateRequest:
    """``req`` as a plan's setup runs it (the checkpoint's bytes follow its regime)."""
    if req.num_gpus == num_gpus and req.sharding.value == sharding:
        return req
    return req.replaced(num_gpus=num_gpus, sharding=Sharding(sharding))


__all__ = [
    "CHECKPOINT_WRITE_GB_PER_S",
    "CheckpointBytes",
    "RunPhases",
    "checkpoint_bytes",
    "interval_steps",
    "occurrences",
    "run_steps",
    "save_seconds",
    "with_sharding",
]
