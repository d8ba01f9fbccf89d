"""An accelerate config YAML (``accelerate config`` / ``accelerate launch --config_file``)
-> GPUs, sharding, offload and precision. Keys from accelerate 1.15.0
(``commands/config/cluster.py``, ``utils/dataclasses.py``): ``distributed_type``
(NO, MULTI_GPU, FSDP, DEEPSPEED), ``num_processes`` x ``num_machines`` GPUs,
``mixed_precision`` (no, bf16, fp16: autocast over fp32 weights, so "-mixed"),
``fsdp_config`` (:func:`calc.config_import.sections.fsdp_section`; FSDP version 1 unless
``fsdp_version: 2``) and ``deepspeed_config`` (``zero_stage``, ``offload_optimizer_device``,
``offload_param_device``, ``gradient_accumulation_steps``, or ``deepspeed_config_file``) and
``parallelism_config`` (``parallelism_config_sp_size`` with the DeepSpeed backend: Arctic Long
Sequence Training's Ulysses, ``sequence_parallel``).
"""

from __future__ import annotations

from ..jsontypes import JsonObject
from . import common, keys, sections
from .report import Report

TOOL = "accelerate 1.15.0"

IGNORED = {
    "compute_environment",
    "debug",
    "machine_rank",
    "main_training_function",
    "rdzv_backend",
    "same_network",
    "tpu_env",
    "tpu_use_cluster",
    "tpu_use_sudo",
    "use_cpu",
    "main_process_ip",
    "main_process_port",
    "gpu_ids",
    "downcast_bf16",
    "enable_cpu_affinity",
    "dynamo_config",
}
_STAGES = {0: "ddp", 1: "zero1", 2: "zero2", 3: "zero3"}
_DISTRIBUTED = ("NO", "MULTI_GPU", "FSDP", "DEEPSPEED")
# accelerate 1.15.0 ``DistributedType`` members calc does not model
_DIST_NOT_MODELLED = (
    "MULTI_CPU",
    "MULTI_NPU",
    "MULTI_MLU",
    "MULTI_SDAA",
    "MULTI_MUSA",
    "MULTI_XPU",
    "MULTI_HPU",
    "XLA",
    "MEGATRON_LM",
)


def _distributed_type(rep: Report, key: str, value: object, ctx: JsonObject) -> None:
    if (
        common.choice(rep, key, str(value).upper(), _DISTRIBUTED, "sharding", _DIST_NOT_MODELLED)
        is not None
    ):
        rep.mark_used(key, ["sharding"])
        # FSDP and DeepSpeed: their own sections decide
        sharding = {"MULTI_GPU": "ddp", "NO": "none"}.get(ctx["dist"])
        if sharding is not None:
            rep.use(key, "sharding", sharding)


def _count(name: str) -> keys.Reader:
    """num_processes x num_machines GPUs, multiplied once both are read."""

    def read(rep: Report, key: str, value: object, ctx: JsonObject) -> None:
        ctx[name] = common.integer(rep, key, value, "num_gpus")
        if ctx[name]:
            rep.mark_used(key, ["num_gpus"])

    return read


def _fsdp_config(rep: Report, key: str, value: object, ctx: JsonObject) -> None:
    if not isinstance(value, dict):
        rep.unknown(key)
    elif ctx["dist"] == "FSDP":
        sections.fsdp_section(rep, value, key + ".")
    else:
        rep.ignore(key, "distributed_type_is_not_fsdp")


def _deepspeed_config(rep: Report, key: str, value: object, ctx: JsonObject) -> None:
    if not isinstance(value, dict):
        rep.unknown(key)
    elif ctx["dist"] == "DEEPSPEED":
        stage = common.positive_int(value.get("zero_stage")) if value.get("zero_stage") != 0 else 0
        keys.read_keys(
            rep, value, DEEPSPEED_PLUGIN, {**ctx, "cfg": value, "stage": stage}, key + "."
        )
    else:
        rep.ignore(key, "distributed_type_is_not_deepspeed")


# -- deepspeed_config: accelerate's DeepSpeed plugin --------------------------------------------
def _zero_stage(rep: Report, path: str, value: object, ctx: JsonObject) -> None:
    stage = ctx["stage"]
    if (
        common.choice(rep, path, value, tuple(_STAGES), "sharding") is not None
        and stage is not None
    ):
        rep.use(path, "sharding", _STAGES[stage])
        rep.use(path, "sync_each_micro_batch", stage >= 2)
        if stage >= 1:
            rep.use(path, "sharding_engine", "deepspeed")


def _offload_optimizer(rep: Report, path: str, value: object, ctx: JsonObject) -> None:
    if value in ("cpu", "nvme"):
        params = ctx["cfg"].get("offload_param_device") in ("cpu", "nvme") and ctx["stage"] == 3
        rep.use(path, "cpu_offload", "optimizer+params" if params else "optimizer")
    elif common.choice(rep, path, value, ("cpu", "nvme", "none"), "cpu_offload") is not None:
        rep.ignore(path)


def _offload_params(rep: Report, path: str, value: object, ctx: JsonObject) -> None:
    if value in ("cpu", "nvme") and ctx["stage"] == 3:
        rep.use(path, "cpu_offload", "optimizer+params")
    elif value in ("cpu", "nvme"):
        rep.unknown(path, "param_offload_needs_stage_3")
    else:
        rep.ignore(path)


def _config_file(rep: Report, path: str, value: object, ctx: JsonObject) -> None:
    read_file = ctx["read_file"]
    data = read_file(value) if read_file is not None and isinstance(value, str) else None
    if isinstance(data, dict):
        rep.mark_used(path, ["sharding"], "file_read")
        sections.deepspeed_section(rep, data, path + ".")
    elif isinstance(value, str):
        common.deepspeed_from_name(rep, path, value)
    else:
        rep.unknown(path)


DEEPSPEED_PLUGIN: dict[str, keys.Key] = {
    "zero_stage": keys.Key(
        _zero_stage,
        ("sharding", "sync_each_micro_batch", "sharding_engine"),
        "ZeRO-2/3 reduce-scatter the gradients at every micro-batch",
    ),
    "offload_optimizer_device": keys.Key(
        _offload_optimizer, ("cpu_offload",), "nvme counted as cpu"
    ),
    "offload_param_device": keys.Key(_offload_params, ("cpu_offload",), "needs ZeRO-3"),
    "gradient_accumulation_steps": keys.whole("gradient_accumulation_steps"),
    "deepspeed_config_file": keys.Key(
        _config_file,
        common.DEEPSPEED_FIELDS,
        "read when it exists, else stage and offload from its name",
        sections.DEEPSPEED,
    ),
    **{
        name: keys.ignored()
        for name in ("zero3_init_flag", "zero3_save_16bit_model", "deepspeed_multinode_launcher")
    },
}


# -- parallelism_config: accelerate's ParallelismConfig ------------------------------------------
def _sp_size(rep: Report, path: str, value: object, ctx: JsonObject) -> None:
    size = common.integer(rep, path, value, "sequence_parallel")
    if size is None:
        return
    backend = str(ctx["parallelism"].get("parallelism_config_sp_backend", "deepspeed")).lower()
    if size > 1 and backend != "deepspeed":
        rep.unknown(path, "sequence_parallel_backend_not_modelled")
    else:
        # ALST: DeepSpeed's Ulysses, heads split by all-to-all around attention
        rep.use(path, "sequence_parallel", size)


def _only_one(note: str) -> keys.Key:
    """A degree calc has no model for: 1 changes nothing, more is ``unknown`` with ``note``."""

    def read(rep: Report, path: str, value: object, ctx: JsonObject) -> None:
        size = common.integer(rep, path, value, None, maximum=1 << 16)
        if size == 1:
            rep.ignore(path)
        elif size is not None:
            rep.unknown(path, note)

    return keys.Key(read, note=note)


def _parallelism_config(rep: Report, key: str, value: object, ctx: JsonObject) -> None:
    if not isinstance(value, dict):
        rep.unknown(key)
        return
    keys.read_keys(rep, value, PARALLELISM, {**ctx, "parallelism": value}, key + ".")


PARALLELISM: dict[str, keys.Key] = {
    "parallelism_config_sp_size": keys.Key(
        _sp_size, ("sequence_parallel",), "sp_backend deepspeed (ALST, Ulysses)"
    ),
    "parallelism_config_sp_backend": keys.ignored("read with sp_size"),
    "parallelism_config_sp_attn_implementation": keys.call(common.set_attention, "attention"),
    "parallelism_config_sp_seq_length": keys.ignored(),
    "parallelism_config_sp_seq_length_is_variable": keys.ignored(),
    "parallelism_config_cp_size": _only_one("context_parallel_not_modelled"),
    "parallelism_config_cp_backend": keys.ignored(),
    "parallelism_config_cp_comm_strategy": keys.ignored(),
    "parallelism_config_tp_size": _only_one("tensor_parallel_not_modelled"),
    "parallelism_config_dp_replicate_size": _only_one("replicate_groups_not_read"),
    # the data-parallel shards are what is left of the job: num_processes says it
    "parallelism_config_dp_shard_size": keys.ignored(),
}
"""accelerate 1.15.0 ``ParallelismConfig`` (``parallelism_config.py``), as an accelerate
config file writes it (``parallelism_config_*``)."""


KEYS: dict[str, keys.Key] = {
    # listed first: an explicit entry below overrides them
    **{name: keys.ignored() for name in sorted(IGNORED)},
    "distributed_type": keys.Key(_distributed_type, ("sharding",)),
    "num_processes": keys.Key(_count("procs"), ("num_gpus",)),
    "num_machines": keys.Key(_count("machines"), ("num_gpus",)),
    # autocast over fp32 weights: "-mixed"
    "mixed_precision": keys.mapped(
        "precision",
        {"no": "fp32", "bf16": "bf16-mixed", "fp16": "fp16-mixed"},
        ("fp8",),
        lambda value: str(value).lower(),
    ),
    "fsdp_config": keys.Key(
        _fsdp_config, sections.FSDP_FIELDS, "FSDP version 1 unless fsdp_version: 2", sections.FSDP
    ),
    "deepspeed_config": keys.Key(
        _deepspeed_config, common.DEEPSPEED_FIELDS, table=DEEPSPEED_PLUGIN
    ),
    "parallelism_config": keys.Key(
        _parallelism_config, ("sequence_parallel", "attention"), table=PARALLELISM
    ),
}


def import_accelerate(
    data: JsonObject, model: object = None, read_file: common.ReadFile | None = None
) -> JsonObject:
    rep = Report("accelerate", TOOL)
    if model is not None:
        rep.request["model"] = model
    dist = str(data.get("distributed_type", "NO")).upper()
    ctx: JsonObject = {"dist": dist, "read_file": read_file, "procs": None, "machines": None}
    keys.read_keys(rep, data, KEYS, ctx)
    if ctx["procs"]:
        rep.request["num_gpus"] = ctx["procs"] * (ctx["machines"] or 1)
    rep.default("num_gpus", 1, TOOL + ": num_processes 1")
    rep.default("precision", "fp32", TOOL + ": mixed_precision no")
    if dist == "FSDP":
        rep.default("sharding", "zero3", TOOL + ": FULL_SHARD")
    rep.default("cpu_offload", "none", TOOL)
    return rep.result()
