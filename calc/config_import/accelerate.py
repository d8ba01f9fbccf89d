"""An accelerate config YAML (``accelerate config`` / ``accelerate launch --config_file``)
-> GPUs, sharding, offload and precision. Keys from accelerate 1.15.0
(``commands/config/cluster.py``, ``utils/dataclasses.py``): ``distributed_type``
(NO, MULTI_GPU, FSDP, DEEPSPEED), ``num_processes`` x ``num_machines`` GPUs,
``mixed_precision`` (no, bf16, fp16: autocast over fp32 weights, so "-mixed"),
``fsdp_config`` (:func:`calc.config_import.common.fsdp_section`; FSDP version 1 unless
``fsdp_version: 2``) and ``deepspeed_config`` (``zero_stage``, ``offload_optimizer_device``,
``offload_param_device``, ``gradient_accumulation_steps``, or ``deepspeed_config_file``).
"""

from __future__ import annotations

from ..jsontypes import JsonObject
from . import common
from .report import Report

TOOL = "accelerate 1.15.0"

IGNORED = {"compute_environment", "debug", "machine_rank", "main_training_function", "rdzv_backend",
           "same_network", "tpu_env", "tpu_use_cluster", "tpu_use_sudo", "use_cpu", "main_process_ip",
           "main_process_port", "gpu_ids", "downcast_bf16", "enable_cpu_affinity", "dynamo_config"}
_STAGES = {0: "ddp", 1: "zero1", 2: "zero2", 3: "zero3"}
# accelerate 1.15.0 ``DistributedType`` members calc does not model
_DIST_NOT_MODELLED = ("MULTI_CPU", "MULTI_NPU", "MULTI_MLU", "MULTI_SDAA", "MULTI_MUSA", "MULTI_XPU",
                      "MULTI_HPU", "XLA", "MEGATRON_LM")


def import_accelerate(data: JsonObject, model: object = None, read_file: common.ReadFile | None = None) -> JsonObject:
    rep = Report("accelerate", TOOL)
    if model is not None:
        rep.request["model"] = model
    dist = str(data.get("distributed_type", "NO")).upper()
    procs = machines = None
    for key, value in data.items():
        key = str(key)
        if key == "distributed_type":
            if common.choice(rep, key, str(value).upper(), ("NO", "MULTI_GPU", "FSDP", "DEEPSPEED"), "sharding",
                             _DIST_NOT_MODELLED) is not None:
                rep.mark_used(key, ["sharding"])
                if dist == "MULTI_GPU":
                    rep.use(key, "sharding", "ddp")
                elif dist == "NO":
                    rep.use(key, "sharding", "none")
        elif key == "num_processes":
            procs = common.integer(rep, key, value, "num_gpus")
            if procs:
                rep.mark_used(key, ["num_gpus"])
        elif key == "num_machines":
            machines = common.integer(rep, key, value, "num_gpus")
            if machines:
                rep.mark_used(key, ["num_gpus"])
        elif key == "mixed_precision":
            name = common.choice(rep, key, str(value).lower(), ("no", "bf16", "fp16"), "precision", ("fp8",))
            if name is not None:
                rep.use(key, "precision", {"no": "fp32", "bf16": "bf16-mixed", "fp16": "fp16-mixed"}[str(name)])
        elif key == "fsdp_config" and isinstance(value, dict):
            if dist == "FSDP":
                common.fsdp_section(rep, value, key + ".")
            else:
                rep.ignore(key, "distributed_type_is_not_fsdp")
        elif key == "deepspeed_config" and isinstance(value, dict):
            if dist == "DEEPSPEED":
                _deepspeed_plugin(rep, value, key + ".", read_file)
            else:
                rep.ignore(key, "distributed_type_is_not_deepspeed")
        elif key in IGNORED:
            rep.ignore(key)
        else:
            rep.unknown(key)
    if procs:
        rep.request["num_gpus"] = procs * (machines or 1)
    rep.default("num_gpus", 1, TOOL + ": num_processes 1")
    rep.default("precision", "fp32", TOOL + ": mixed_precision no")
    if dist == "FSDP":
        rep.default("sharding", "zero3", TOOL + ": FULL_SHARD")
    rep.default("cpu_offload", "none", TOOL)
    return rep.result()


def _deepspeed_plugin(rep: Report, cfg: JsonObject, prefix: str, read_file: common.ReadFile | None) -> None:
    stage = common.positive_int(cfg.get("zero_stage")) if cfg.get("zero_stage") != 0 else 0
    for key, value in cfg.items():
        path = prefix + str(key)
        if key == "zero_stage":
            if common.choice(rep, path, value, tuple(_STAGES), "sharding") is not None and stage is not None:
                rep.use(path, "sharding", _STAGES[stage])
                rep.use(path, "sync_each_micro_batch", stage >= 2)
        elif key == "offload_optimizer_device":
            if value in ("cpu", "nvme"):
                rep.use(path, "cpu_offload", "optimizer+params"
                        if cfg.get("offload_param_device") in ("cpu", "nvme") and stage == 3 else "optimizer")
            elif common.choice(rep, path, value, ("cpu", "nvme", "none"), "cpu_offload") is not None:
                rep.ignore(path)
        elif key == "offload_param_device":
            if value in ("cpu", "nvme") and stage == 3:
                rep.use(path, "cpu_offload", "optimizer+params")
            elif value in ("cpu", "nvme"):
                rep.unknown(path, "param_offload_needs_stage_3")
            else:
                rep.ignore(path)
        elif key == "gradient_accumulation_steps":
            common.set_int(rep, path, "gradient_accumulation_steps", value)
        elif key == "deepspeed_config_file":
            data = read_file(value) if read_file is not None and isinstance(value, str) else None
            if isinstance(data, dict):
                rep.mark_used(path, ["sharding"], "file_read")
                common.deepspeed_section(rep, data, path + ".")
            elif isinstance(value, str):
                common.deepspeed_from_name(rep, path, value)
            else:
                rep.unknown(path)
        elif key in ("zero3_init_flag", "zero3_save_16bit_model", "deepspeed_multinode_launcher"):
            rep.ignore(path)
        else:
            rep.unknown(path)
