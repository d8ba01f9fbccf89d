"""The DeepSpeed and FSDP sections several formats embed, as key tables
(:mod:`calc.config_import.keys`): each key of the section -> its reader, the request fields
it can set, a note.

Sources (read at the stated versions):

- DeepSpeed config: ``zero_optimization.stage``, ``offload_optimizer``/``offload_param``
  ``.device``, ``bf16``/``fp16`` ``.enabled``, ``train_micro_batch_size_per_gpu``,
  ``gradient_accumulation_steps``, ``train_batch_size`` = micro x accumulation x GPUs
  (DeepSpeed configuration JSON documentation, v0.17).
- FSDP sharding strategies: ``torch.distributed.fsdp.ShardingStrategy`` (FULL_SHARD=1,
  SHARD_GRAD_OP=2, NO_SHARD=3, HYBRID_SHARD=4), as numbered in accelerate 1.15.0's
  config; FSDP2 expresses the same choice as ``reshard_after_forward``.
"""

from __future__ import annotations

from ..fields import MAX_GRADIENT_BUCKET_MB
from ..jsontypes import JsonObject
from . import common, keys
from .keys import Key
from .report import Report

# -- DeepSpeed --------------------------------------------------------------------------------------
_DS_IGNORED = (
    "steps_per_print",
    "wall_clock_breakdown",
    "gradient_clipping",
    "prescale_gradients",
    "zero_allow_untested_optimizer",
    "scheduler",
    "tensorboard",
    "wandb",
    "csv_monitor",
    "comms_logger",
    "flops_profiler",
    "dump_state",
    "zero_force_ds_cpu_optimizer",
    "checkpoint",
    "seed",
    "memory_breakdown",
    "gradient_predivide_factor",
)
_DS_ZERO_IGNORED = (
    "overlap_comm",
    "contiguous_gradients",
    "round_robin_gradients",
    "stage3_gather_16bit_weights_on_model_save",
    "gather_16bit_weights_on_model_save",
    "load_from_fp32_weights",
    "elastic_checkpoint",
    "ignore_unused_parameters",
)
_DS_OFFLOAD_IGNORED = (
    "nvme_path",
    "buffer_count",
    "buffer_size",
    "max_in_cpu",
    "fast_init",
    "ratio",
)
_FP16_IGNORED = (
    "loss_scale",
    "loss_scale_window",
    "initial_scale_power",
    "hysteresis",
    "min_loss_scale",
    "auto_cast",
)
_DS_ADAM = ("adam", "adamw", "fusedadam", "cpuadam", "deepspeedcpuadam")


def _trainer_auto(key: Key) -> Key:
    """``key``, unless the value is ``auto``: the Hugging Face Trainer fills it from its own
    arguments, so it is ``ignored`` (the Trainer's key sets the field)."""

    def read(rep: Report, path: str, value: object, ctx: JsonObject) -> None:
        if value == "auto":
            rep.ignore(path, "auto_from_trainer")
        else:
            key.read(rep, path, value, ctx)

    return Key(read, key.fields, key.note, key.table)


def _ds_enabled(precision: str) -> Key:
    """``bf16.enabled`` / ``fp16.enabled``: ZeRO keeps fp32 master weights and fp32 optimizer
    states and computes in 16 bits, Lightning's ``-mixed``."""

    def read(rep: Report, path: str, value: object, ctx: JsonObject) -> None:
        if value == "auto":
            rep.ignore(path, "auto_from_trainer")
        elif (enabled := common.flag(rep, path, value, "precision", reader="deepspeed")) is True:
            rep.use(path, "precision", precision)
        elif enabled is False:
            rep.ignore(path)

    return Key(read, ("precision",))


def _ds_batch(field: str, name: str) -> Key:
    """A batch size read as ``field`` and kept as ``ctx[name]`` for ``train_batch_size``."""

    def read(rep: Report, path: str, value: object, ctx: JsonObject) -> None:
        ctx[name] = common.integer(rep, path, value, field, reader="deepspeed")
        if ctx[name] is not None:
            rep.use(path, field, ctx[name])

    return Key(read, (field,))


def _ds_total(rep: Report, path: str, value: object, ctx: JsonObject) -> None:
    """micro x accumulation x GPUs: the GPUs once the file is read (:func:`deepspeed_section`)."""
    ctx["total"] = common.integer(rep, path, value, "num_gpus", maximum=2**62, reader="deepspeed")


def _ds_optimizer_type(rep: Report, path: str, value: object, ctx: JsonObject) -> None:
    name = str(value).lower()
    if name in _DS_ADAM:
        rep.use(path, "optimizer", "adamw")
    elif name == "sgd":
        rep.use(path, "optimizer", "sgd")
    else:
        rep.unknown(path, "optimizer_not_modelled")


def _zero_stage(rep: Report, path: str, value: object, ctx: JsonObject) -> None:
    if value == "auto":
        rep.ignore(path, "auto_from_trainer")
    elif common.choice(rep, path, value, tuple(common.DEEPSPEED_STAGES), "sharding") is not None:
        assert isinstance(value, int)
        rep.use(path, "sharding", common.DEEPSPEED_STAGES[value])
        # ZeRO-2/3 reduce-scatter the gradients at every micro-batch
        rep.use(path, "sync_each_micro_batch", value >= 2)
        if value >= 1:
            rep.use(path, "sharding_engine", "deepspeed")


def _offload_device(params: bool) -> Key:
    """``offload_param.device`` (``params``) or ``offload_optimizer.device``: cpu or nvme."""

    def read(rep: Report, path: str, value: object, ctx: JsonObject) -> None:
        note = "nvme_counted_as_cpu" if value == "nvme" else None
        if value in ("cpu", "nvme"):
            if not params:
                both = rep.request.get("cpu_offload", "none") == "optimizer+params"
                rep.use(path, "cpu_offload", "optimizer+params" if both else "optimizer", note)
            elif ctx["stage"] == 3:
                rep.use(path, "cpu_offload", "optimizer+params", note)
            else:
                rep.unknown(path, "param_offload_needs_stage_3")
        elif value in ("none", None):
            rep.ignore(path)
        else:
            common.choice(rep, path, value, ("cpu", "nvme", "none"), "cpu_offload")

    return Key(read, ("cpu_offload",))


def _zero_other(rep: Report, path: str, value: object, ctx: JsonObject) -> None:
    """Bucket sizes, prefetch and persistence thresholds set communication buffers on the GPU,
    which the estimate does not model."""
    if value == "auto":
        rep.ignore(path, "auto_from_trainer")
    else:
        rep.unknown(path, "not_modelled")


_ZERO_OTHER = Key(_zero_other)


def _reduce_bucket_size(rep: Report, path: str, value: object, ctx: JsonObject) -> None:
    """ZeRO-1/2's ``reduce_bucket_size``, in elements (DeepSpeed 0.16.5 ``stage_1_and_2.py``),
    as MiB of 16-bit gradients (DeepSpeed's fp16/bf16 modes reduce 16-bit gradients); ZeRO-3's
    reduce bucket stays the Trainer's ``hidden x hidden`` (calc.timing.zero3_messages)."""
    if value == "auto":
        rep.ignore(path, "auto_from_trainer")
        return
    if ctx["stage"] not in (1, 2):
        rep.unknown(path, "not_modelled")
        return
    elements = common.number(rep, path, value, "gradient_bucket_mb", 0.0, minimum_exclusive=True)
    if elements is not None:
        mib = elements * 2 / 2**20
        if mib > MAX_GRADIENT_BUCKET_MB:
            rep.invalid(
                path,
                value,
                "out_of_range",
                {"maximum": MAX_GRADIENT_BUCKET_MB * 2**19},
                "gradient_bucket_mb",
            )
            return
        rep.use(path, "gradient_bucket_mb", mib, "elements_as_16bit_gradients")


def _offload(params: bool) -> Key:
    """``offload_optimizer`` / ``offload_param``. The optimizer's ``pin_memory`` says whether the
    gradients' copies to the host can run under the backward (``offload_pinned``); ZeRO-3 pins
    the 16-bit weights it keeps on the host whatever the weights' own ``pin_memory`` says
    (DeepSpeed v0.19.5 ``stage3.py``), so that one is ignored."""
    pin = keys.ignored() if params else keys.boolean("offload_pinned")
    return keys.section(
        {
            "device": _offload_device(params),
            "pin_memory": pin,
            **{name: keys.ignored() for name in _DS_OFFLOAD_IGNORED},
        },
        ("cpu_offload",) if params else ("cpu_offload", "offload_pinned"),
        otherwise=_ZERO_OTHER,
    )


DEEPSPEED_ZERO: dict[str, Key] = {
    **{name: keys.ignored() for name in _DS_ZERO_IGNORED},
    "stage": Key(_zero_stage, ("sharding", "sync_each_micro_batch", "sharding_engine")),
    "reduce_bucket_size": Key(_reduce_bucket_size, ("gradient_bucket_mb",)),
    "offload_optimizer": _offload(params=False),
    "offload_param": _offload(params=True),
}
"""``zero_optimization``; a key it lacks is ``auto`` (ignored) or not modelled. ``ctx["stage"]``
is the section's stage wherever it stands (param offload needs ZeRO-3)."""


def _zero_section(rep: Report, path: str, value: object, ctx: JsonObject) -> None:
    if isinstance(value, dict):
        keys.read_keys(
            rep, value, DEEPSPEED_ZERO, {"stage": value.get("stage")}, path + ".", _ZERO_OTHER
        )
    else:
        rep.unknown(path)


DEEPSPEED: dict[str, Key] = {
    key: _trainer_auto(entry)
    for key, entry in {
        **{name: keys.ignored() for name in _DS_IGNORED},
        "zero_optimization": Key(
            _zero_section,
            (
                "sharding",
                "sync_each_micro_batch",
                "sharding_engine",
                "cpu_offload",
                "offload_pinned",
                "gradient_bucket_mb",
            ),
            table=DEEPSPEED_ZERO,
        ),
        "bf16": keys.section(
            {"enabled": _ds_enabled("bf16-mixed"), "immediate_grad_update": keys.not_modelled()},
            ("precision",),
        ),
        "fp16": keys.section(
            {
                "enabled": _ds_enabled("fp16-mixed"),
                **{name: keys.ignored() for name in _FP16_IGNORED},
                "immediate_grad_update": keys.not_modelled(),
            },
            ("precision",),
        ),
        "train_micro_batch_size_per_gpu": _ds_batch("micro_batch_size", "micro"),
        "gradient_accumulation_steps": _ds_batch("gradient_accumulation_steps", "gas"),
        "train_batch_size": Key(_ds_total, ("num_gpus",), "micro x accumulation x GPUs"),
        "optimizer": keys.section(
            {"type": Key(_ds_optimizer_type, ("optimizer",)), "params": keys.ignored()},
            ("optimizer",),
        ),
        # deepspeed.checkpointing is used by Megatron-style models; Hugging Face models
        # checkpoint through gradient_checkpointing instead
        "activation_checkpointing": keys.not_modelled(),
    }.items()
}
"""A DeepSpeed config's top-level keys."""

_DS_REST = _trainer_auto(Key(lambda rep, path, value, ctx: rep.unknown(path)))


def deepspeed_section(rep: Report, ds: JsonObject, prefix: str = "") -> None:
    """Map a DeepSpeed config dict (:data:`DEEPSPEED`); the GPUs follow from
    ``train_batch_size`` once the micro-batch and the accumulation are read."""
    ctx: JsonObject = {"micro": None, "gas": None, "total": None}
    keys.read_keys(rep, ds, DEEPSPEED, ctx, prefix, _DS_REST)
    micro, gas, total = ctx["micro"], ctx["gas"], ctx["total"]
    if total is not None:
        if micro and gas and total % (micro * gas) == 0:
            rep.use(prefix + "train_batch_size", "num_gpus", total // (micro * gas))
        else:
            rep.unknown(prefix + "train_batch_size", "num_gpus_not_derivable")


# -- FSDP ---------------------------------------------------------------------------------------------
_FSDP_STRATEGY = {
    "FULL_SHARD": "zero3",
    "1": "zero3",
    "SHARD_GRAD_OP": "zero2",
    "2": "zero2",
    "NO_SHARD": "ddp",
    "3": "ddp",
    "HYBRID_SHARD": "zero3",
    "4": "zero3",
    "_HYBRID_SHARD_ZERO2": "zero2",
    "HYBRID_SHARD_ZERO2": "zero2",
    "5": "zero2",
}
_FSDP_IGNORED = (
    "auto_wrap_policy",
    "transformer_layer_cls_to_wrap",
    "backward_prefetch",
    "forward_prefetch",
    "state_dict_type",
    "sync_module_states",
    "cpu_ram_efficient_loading",
    "limit_all_gathers",
    "min_num_params",
    "final_state_dict_type",
    "cpu_offload_pin_memory",
    "xla",
    "xla_fsdp_settings",
    "xla_fsdp_grad_ckpt",
)


def _sharding_strategy(rep: Report, path: str, value: object, ctx: JsonObject) -> None:
    strategy = _FSDP_STRATEGY.get(str(value).upper())
    if strategy is None:
        rep.invalid(path, value, "not_allowed", {"allowed": list(_FSDP_STRATEGY)}, "sharding")
    else:
        hybrid = "HYBRID" in str(value).upper() or str(value) in ("4", "5")
        rep.use(path, "sharding", strategy)
        if hybrid:
            common.use_server_shard_group(rep, path)


def _reshard_after_forward(rep: Report, path: str, value: object, ctx: JsonObject) -> None:
    # accelerate 1.15.0 also takes an FSDP1 strategy name here
    reshard = (
        _FSDP_STRATEGY[value.upper()] == "zero3"
        if isinstance(value, str) and value.upper() in _FSDP_STRATEGY
        else common.flag(rep, path, value, "sharding", reader="fsdp")
    )
    if reshard is None:
        return
    if ctx["version"] >= 2 or not ctx["strategy_given"]:
        rep.use(path, "sharding", "zero3" if reshard is True else "zero2")
    else:
        rep.ignore(path)


def _offload_params(rep: Report, path: str, value: object, ctx: JsonObject) -> None:
    offload = common.flag(rep, path, value, "cpu_offload", reader="fsdp")
    if offload is True:
        rep.use(path, "cpu_offload", "optimizer+params")
    elif offload is False:
        rep.mark_used(path, ["cpu_offload"])
        rep.request.setdefault("cpu_offload", "none")


def _activation_checkpointing(rep: Report, path: str, value: object, ctx: JsonObject) -> None:
    checkpointing = common.flag(rep, path, value, "gradient_checkpointing", reader="fsdp")
    if checkpointing is True:
        rep.use(path, "gradient_checkpointing", True)
    elif checkpointing is False:
        rep.ignore(path, "does_not_disable_model_checkpointing")


def _use_orig_params(rep: Report, path: str, value: object, ctx: JsonObject) -> None:
    # FSDP1 + use_orig_params keeps gradient memory for frozen weights in mixed wrap units
    # (PyTorch FSDP docs); FSDP2 has no such flag
    orig = common.flag(rep, path, value, "frozen_weight_grads", reader="fsdp")
    if ctx["version"] == 1:
        rep.use(path, "frozen_weight_grads", orig is True)
    else:
        rep.ignore(path)


FSDP: dict[str, Key] = {
    **{name: keys.ignored() for name in _FSDP_IGNORED},
    "sharding_strategy": Key(
        _sharding_strategy,
        ("sharding", "shard_group"),
        "HYBRID_SHARD: groups of one server's GPUs (shard_group 8)",
    ),
    "reshard_after_forward": Key(
        _reshard_after_forward,
        ("sharding",),
        "FSDP2's strategy; with FSDP1 only when no sharding_strategy is given",
    ),
    "offload_params": Key(_offload_params, ("cpu_offload",)),
    "activation_checkpointing": Key(_activation_checkpointing, ("gradient_checkpointing",)),
    "use_orig_params": Key(_use_orig_params, ("frozen_weight_grads",), "FSDP1 only"),
    "version": Key(
        lambda rep, path, value, ctx: rep.mark_used(
            path, ["sharding", "fsdp_fully_shard"] if ctx["version"] >= 2 else ["sharding"]
        ),
        ("sharding", "fsdp_fully_shard"),
    ),
    "mixed_precision_policy": keys.ignored(),
}
"""An FSDP config's keys, by their names without the ``fsdp_`` prefix."""
FSDP_FIELDS = (
    "sharding",
    "shard_group",
    "cpu_offload",
    "frozen_weight_grads",
    "gradient_checkpointing",
    "fsdp_fully_shard",
)
"""What an FSDP config can set."""


def fsdp_section(
    rep: Report, cfg: JsonObject, prefix: str = "", strip: str = "fsdp_", version: object = None
) -> None:
    """An FSDP config dict (accelerate's ``fsdp_config`` with ``fsdp_`` names, the
    Trainer's ``fsdp_config`` with or without them, axolotl's without), through :data:`FSDP`.
    ``version``: the FSDP version when the file states it outside the dict (axolotl's
    ``fsdp_version``). A name given with and without the prefix is read once, as the later."""
    plain = {}
    for key, value in cfg.items():
        name = str(key)
        plain[name[len(strip) :] if name.startswith(strip) else name] = (key, value)
    ctx: JsonObject = {
        "version": common.positive_int(plain.get("version", (None, version))[1]) or 1,
        "strategy_given": "sharding_strategy" in plain,
    }
    for name, (key, value) in plain.items():
        path = prefix + str(key)
        entry = FSDP.get(name)
        if entry is None:
            rep.unknown(path)
        else:
            entry.read(rep, path, value, ctx)
    if ctx["version"] >= 2:
        # FSDP2 shards with fully_shard, which copies each gathered unit out of its buffer
        rep.request.setdefault("fsdp_fully_shard", True)
    if "sharding_strategy" not in plain and "reshard_after_forward" not in plain:
        # FULL_SHARD is the default strategy of torch FSDP and of accelerate 1.15.0
        rep.default("sharding", "zero3", "torch FSDP default FULL_SHARD")
