"""Request -> each format: the keys calc models, under a comment header, to merge into the
user's own file. Importing the output gives back the same request (tested per format).

YAML is written by PyYAML's safe dumper, the library that reads it back (it ships in the
browser bundle; without it a YAML export is the coded error ``yaml_unavailable``, as a YAML
import is). DeepSpeed's format is JSON."""

from __future__ import annotations

import json

from ..jsontypes import JsonObject
from ..fields import defaults
from ..frameworks import Framework, apply_profile
from ..request import shard_size
from .models import TORCHTUNE_PRESETS

_HF_OPTIM = {
    ("adamw", True): "adamw_torch_fused",
    ("adamw", False): "adamw_torch",
    ("adamw-8bit", False): "adamw_bnb_8bit",
    ("paged-adamw", False): "paged_adamw_32bit",
    ("paged-adamw-8bit", False): "paged_adamw_8bit",
    ("adafactor", False): "adafactor",
    ("sgd", False): "sgd",
}
_ATTN = {"flash": "flash_attention_2", "sdpa": "sdpa", "eager": "eager"}
_TT_OPTIM = {
    "adamw": "torch.optim.AdamW",
    "adamw-8bit": "torchao.optim.AdamW8bit",
    "paged-adamw": "bitsandbytes.optim.PagedAdamW",
    "paged-adamw-8bit": "bitsandbytes.optim.PagedAdamW8bit",
    "sgd": "torch.optim.SGD",
    "sgd-momentum": "torch.optim.SGD",
}
_HF_TO_TT = {"q_proj": "q_proj", "k_proj": "k_proj", "v_proj": "v_proj", "o_proj": "output_proj"}
_STAGE = {"ddp": 0, "zero1": 1, "zero2": 2, "zero3": 3}

FORMATS = ("axolotl", "trl", "llamafactory", "torchtune", "deepspeed", "accelerate")


def _full(request: JsonObject) -> JsonObject:
    out = defaults("estimate")
    out.update(request)
    out.update(request.get("behaviour") or {})
    out.pop("behaviour", None)
    fsdp, given = ("fsdp_flat_parameters", "fsdp_fully_shard"), _given(request)
    if out["framework"] in _FRAMEWORKS and not set(fsdp) & given:
        # the FSDP version calc estimated with: the library's profile decides it when the
        # request names neither (the Hugging Face stacks run FSDP1, torchtune FSDP2)
        applied = apply_profile(dict(out), given, Framework(out["framework"]))
        out.update({k: applied[k] for k in fsdp})
    return out


_FRAMEWORKS = {f.value for f in Framework}


def _given(request: JsonObject) -> set[str]:
    return set(request) | set(request.get("behaviour") or {})


def _yaml(data: JsonObject) -> list[str]:
    """``data`` as YAML lines, keys in the order the exporter chose."""
    try:
        import yaml
    except ImportError:
        from .loading import yaml_unavailable

        raise yaml_unavailable() from None
    text: str = yaml.safe_dump(
        data, sort_keys=False, allow_unicode=True, default_flow_style=False, width=100
    )
    return text.rstrip("\n").split("\n")


def _header(fmt: str, req: JsonObject, notes: list[str]) -> list[str]:
    from .. import __version__

    model = req.get("model")
    lines = [
        f"# Exported by calc {__version__} ({fmt}): only the keys calc models.",
        "# Merge into your own config; keys not listed here keep your values.",
    ]
    if isinstance(model, dict):
        lines.append("# model: pasted config.json (name your checkpoint in the model key)")
    if req.get("num_gpus", 1) > 1 and fmt not in ("accelerate",):
        lines.append(f"# launch on {req['num_gpus']} GPUs")
    sp = req.get("sequence_parallel", 1)
    if sp > 1 and fmt != "accelerate":
        # Ulysses groups are set by the launcher (accelerate's ParallelismConfig), not here
        lines.append(
            f"# sequence parallel: {sp} GPUs per sequence (Ulysses): accelerate's"
            " parallelism_config_sp_size with DeepSpeed (calc's accelerate export writes it)"
        )
    lines.extend("# note: " + n for n in notes)
    return lines


def _hf_repo(model: object) -> str | None:
    if not isinstance(model, str):
        return None
    from .. import presets

    try:
        repo: str | None = presets.preset_row(model)["hf_repo"]
        return repo
    except Exception:  # an unknown id is exported as written
        return model


def _targets(req: JsonObject) -> str | list[str]:
    return "all-linear" if req["lora_targets"] == "all-linear" else list(req["lora_targets"])


def _modules_to_save(req: JsonObject) -> list[str]:
    """``lora_modules_to_save`` as the module list axolotl and TRL take (empty for ``none``);
    peft's ``ensure_weight_tying`` of the ``-tied`` value has no key in either format."""
    value = req.get("lora_modules_to_save", "none")
    return [] if value == "none" else value.removesuffix("-tied").split("+")


def _optim(req: JsonObject, notes: list[str]) -> str | None:
    name = _HF_OPTIM.get(
        (req["optimizer"], bool(req["optimizer_fused"]) and req["optimizer"] == "adamw")
    )
    if name is None:
        notes.append(f"optimizer {req['optimizer']} has no Trainer name")
    return name


def _deepspeed_dict(req: JsonObject) -> JsonObject:
    stage = _STAGE.get(req["sharding"], 0)
    zero: JsonObject = {"stage": stage}
    if req.get("gradient_bucket_mb") is not None and stage in (1, 2):
        # elements of 16-bit gradients, as the import reads them back
        zero["reduce_bucket_size"] = round(req["gradient_bucket_mb"] * 2**20 / 2)
    if req["cpu_offload"] != "none" and stage >= 1:
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": bool(req["offload_pinned"])}
        if req["cpu_offload"] == "optimizer+params" and stage == 3:
            zero["offload_param"] = {"device": "cpu", "pin_memory": True}
    out: JsonObject = {
        "zero_optimization": zero,
        "train_micro_batch_size_per_gpu": req["micro_batch_size"],
        "gradient_accumulation_steps": req["gradient_accumulation_steps"],
    }
    if req["num_gpus"] > 1:
        out["train_batch_size"] = (
            req["micro_batch_size"] * req["gradient_accumulation_steps"] * req["num_gpus"]
        )
    if req["precision"] == "bf16-mixed":
        out["bf16"] = {"enabled": True}
    elif req["precision"] == "fp16-mixed":
        out["fp16"] = {"enabled": True}
    return out


def _uses_deepspeed(req: JsonObject) -> bool:
    """ZeRO-1, optimizer-only offload and per-micro-batch reduce-scatter are DeepSpeed's;
    the other sharded setups are written as FSDP."""
    if req["sharding"] not in ("zero1", "zero2", "zero3"):
        return False
    return (
        req["sharding"] == "zero1"
        or req["cpu_offload"] == "optimizer"
        or bool(req["sync_each_micro_batch"])
        or req.get("sharding_engine") == "deepspeed"
    )


def _hybrid(req: JsonObject) -> bool:
    """Hybrid sharding: a shard group smaller than the job (:func:`calc.request.shard_size`)."""
    gpus = int(req["num_gpus"])
    return shard_size(gpus, req.get("shard_group")) < gpus


def _fsdp_dict(req: JsonObject, prefix: str = "") -> JsonObject:
    # FSDP1's flat parameters and its use_orig_params gradients of frozen weights need version 1;
    # fsdp_fully_shard (and a request that names neither) is written as FSDP2
    # hybrid sharding is FSDP1's HYBRID_SHARD strategies, whose group is one server's GPUs
    # (torch 2.13 fsdp/_init_utils.py)
    hybrid = _hybrid(req)
    version = 1 if req["frozen_weight_grads"] or req["fsdp_flat_parameters"] or hybrid else 2
    out: JsonObject = {prefix + "version": version}
    if version == 1:
        full = req["sharding"] == "zero3"
        if hybrid:
            strategy = "HYBRID_SHARD" if full else "_HYBRID_SHARD_ZERO2"
        else:
            strategy = "FULL_SHARD" if full else "SHARD_GRAD_OP"
        out[prefix + "sharding_strategy"] = strategy
        # use_orig_params is what gives a LoRA unit's frozen weights their gradients
        out[prefix + "use_orig_params"] = bool(req["frozen_weight_grads"])
    else:
        out[prefix + "reshard_after_forward"] = req["sharding"] == "zero3"
    out[prefix + "offload_params"] = req["cpu_offload"] == "optimizer+params"
    return out


def export_axolotl(request: JsonObject) -> str:
    req = _full(request)
    notes: list[str] = []
    out: JsonObject = {}
    repo = _hf_repo(req["model"])
    if repo:
        out["base_model"] = repo
    if req["method"] != "full":
        out["adapter"] = req["method"]
        out["load_in_4bit"] = req["method"] == "qlora"
        out["lora_r"] = req["lora_rank"]
        out["lora_dropout"] = req["lora_dropout"]
        if _targets(req) == "all-linear":
            out["lora_target_linear"] = True
        else:
            out["lora_target_modules"] = _targets(req)
        if req["method"] == "qlora":
            out["bnb_config_kwargs"] = {"bnb_4bit_use_double_quant": req["qlora_double_quant"]}
        if "lora_adapter_dtype" in req:
            out["peft_autocast_adapter_dtype"] = req["lora_adapter_dtype"] == "fp32"
        if saved := _modules_to_save(req):
            out["lora_modules_to_save"] = saved
    precision = req["precision"]
    out["bf16"] = precision in ("bf16-true", "bf16-mixed")
    out["fp16"] = precision == "fp16-mixed"
    if precision == "bf16-mixed" and not _uses_deepspeed(req):
        notes.append(
            "bf16-mixed (fp32 master weights) has no axolotl key; bf16: true loads bf16 weights"
        )
    name = _optim(req, notes)
    if name:
        out["optimizer"] = name
    out["micro_batch_size"] = req["micro_batch_size"]
    out["gradient_accumulation_steps"] = req["gradient_accumulation_steps"]
    out["sequence_len"] = req["seq_len"]
    if req.get("batching") == "packed":
        out["sample_packing"] = True
    elif req.get("batching") == "pad-max":
        out["pad_to_sequence_len"] = True
    if req["activation_offload"] and req["gradient_checkpointing"]:
        out["gradient_checkpointing"] = "offload"
    else:
        out["gradient_checkpointing"] = req["gradient_checkpointing"]
        if req["activation_offload"]:
            out["activation_offloading"] = True
    out["attn_implementation"] = _ATTN[req["attention"]]
    if req["liger_kernel"]:
        # axolotl's Liger plugin: each module switched on by its own key; the fused loss is
        # the plugin's liger_fused_linear_cross_entropy where calc's chunked_loss goes with it
        out["plugins"] = ["axolotl.integrations.liger.LigerPlugin"]
        out["liger_rope"] = out["liger_rms_norm"] = out["liger_glu_activation"] = True
        if req["chunked_loss"]:
            out["liger_fused_linear_cross_entropy"] = True
    elif req["chunked_loss"]:
        out["chunked_cross_entropy"] = True
    out["torch_compile"] = req["torch_compile"]
    if req["tf32"]:
        out["tf32"] = True
    _sharding_hf(req, out, notes, fsdp_key="fsdp_config", fsdp_prefix="")
    if req.get("max_steps") is not None:
        out["max_steps"] = req["max_steps"]
    if "epochs" in request:
        out["num_epochs"] = request["epochs"]
    return "\n".join(_header("axolotl", req, notes) + _yaml(out)) + "\n"


def _sharding_hf(
    req: JsonObject, out: JsonObject, notes: list[str], fsdp_key: str, fsdp_prefix: str
) -> None:
    if _uses_deepspeed(req):
        out["deepspeed"] = _deepspeed_dict(req)
    elif req["sharding"] in ("zero2", "zero3"):
        out[fsdp_key] = _fsdp_dict(req, fsdp_prefix)
    elif req["sharding"] == "ddp" and req["num_gpus"] > 1:
        notes.append("data parallel: launch with torchrun or accelerate, no sharding key")


def export_trl(request: JsonObject) -> str:
    req = _full(request)
    notes: list[str] = []
    out: JsonObject = {}
    repo = _hf_repo(req["model"])
    if repo:
        out["model_name_or_path"] = repo
    precision = req["precision"]
    out["dtype"] = "bfloat16" if precision == "bf16-true" else "float32"
    out["bf16"] = precision in ("bf16-true", "bf16-mixed")
    out["fp16"] = precision == "fp16-mixed"
    if req["method"] != "full":
        out["use_peft"] = True
        out["lora_r"] = req["lora_rank"]
        out["lora_dropout"] = req["lora_dropout"]
        out["lora_target_modules"] = _targets(req)
        if saved := _modules_to_save(req):
            out["lora_modules_to_save"] = saved
        if req.get("lora_adapter_dtype") == "base":
            notes.append(
                "adapters in the base dtype: pass autocast_adapter_dtype=False to get_peft_model"
            )
        if req["method"] == "qlora":
            out["load_in_4bit"] = True
            out["use_bnb_nested_quant"] = req["qlora_double_quant"]
    out["per_device_train_batch_size"] = req["micro_batch_size"]
    out["gradient_accumulation_steps"] = req["gradient_accumulation_steps"]
    out["max_length"] = req["seq_len"]
    if req.get("batching") == "packed":
        out["packing"] = True
    out["gradient_checkpointing"] = req["gradient_checkpointing"]
    out["activation_offloading"] = req["activation_offload"]
    name = _optim(req, notes)
    if name:
        out["optim"] = name
    out["attn_implementation"] = _ATTN[req["attention"]]
    out["loss_type"] = "chunked_nll" if req["chunked_loss"] else "nll"
    if req["liger_kernel"]:
        out["use_liger_kernel"] = True
    out["torch_compile"] = req["torch_compile"]
    if req["tf32"]:
        out["tf32"] = True
    _sharding_hf(req, out, notes, fsdp_key="fsdp_config", fsdp_prefix="")
    if req.get("gradient_bucket_mb") is not None and "deepspeed" not in out:
        # TrainingArguments.ddp_bucket_cap_mb is a whole number of MiB
        out["ddp_bucket_cap_mb"] = max(1, round(req["gradient_bucket_mb"]))
    if "fsdp_config" in out:
        words = (
            ("hybrid_shard", "hybrid_shard_zero2")
            if _hybrid(req)
            else ("full_shard", "shard_grad_op")
        )
        out["fsdp"] = words[0] if req["sharding"] == "zero3" else words[1]
        if req["cpu_offload"] == "optimizer+params":
            out["fsdp"] += " offload"
        out["fsdp"] += " auto_wrap"
    if req.get("max_steps") is not None:
        out["max_steps"] = req["max_steps"]
    if "epochs" in request:
        out["num_train_epochs"] = request["epochs"]
    return "\n".join(_header("trl", req, notes) + _yaml(out)) + "\n"


def export_llamafactory(request: JsonObject) -> str:
    req = _full(request)
    notes: list[str] = []
    out: JsonObject = {}
    repo = _hf_repo(req["model"])
    if repo:
        out["model_name_or_path"] = repo
    out["stage"] = "sft"
    out["finetuning_type"] = "full" if req["method"] == "full" else "lora"
    if req["method"] != "full":
        targets = _targets(req)
        out["lora_rank"] = req["lora_rank"]
        out["lora_dropout"] = req["lora_dropout"]
        out["lora_target"] = "all" if targets == "all-linear" else ",".join(targets)
        if req["method"] == "qlora":
            out["quantization_bit"] = 4
            out["double_quantization"] = req["qlora_double_quant"]
    precision = req["precision"]
    out["bf16"] = precision in ("bf16-true", "bf16-mixed")
    out["fp16"] = precision == "fp16-mixed"
    if req["method"] == "full":
        out["pure_bf16"] = precision == "bf16-true" and not _uses_deepspeed(req)
    else:  # LoRA: pure_bf16 keeps the adapters in bf16 instead of fp32
        out["pure_bf16"] = (
            req.get("lora_adapter_dtype", "fp32") == "base" and precision == "bf16-true"
        )
    out["cutoff_len"] = req["seq_len"]
    if req.get("batching") == "packed":
        out["packing"] = True
        if req.get("packed_attention") == "per-sample":
            out["neat_packing"] = True
    out["per_device_train_batch_size"] = req["micro_batch_size"]
    out["gradient_accumulation_steps"] = req["gradient_accumulation_steps"]
    out["disable_gradient_checkpointing"] = not req["gradient_checkpointing"]
    if req["activation_offload"]:
        out["use_unsloth_gc"] = True
    name = _optim(req, notes)
    if name:
        out["optim"] = name
    out["flash_attn"] = {"flash": "fa2", "sdpa": "sdpa", "eager": "disabled"}[req["attention"]]
    out["enable_liger_kernel"] = req["chunked_loss"] or req["liger_kernel"]
    out["torch_compile"] = req["torch_compile"]
    if req["tf32"]:
        out["tf32"] = True
    _sharding_hf(req, out, notes, fsdp_key="fsdp_config", fsdp_prefix="")
    if req.get("max_steps") is not None:
        out["max_steps"] = req["max_steps"]
    if "epochs" in request:
        out["num_train_epochs"] = request["epochs"]
    return "\n".join(_header("llamafactory", req, notes) + _yaml(out)) + "\n"


def export_torchtune(request: JsonObject) -> str:
    req = _full(request)
    notes: list[str] = []
    out: JsonObject = {}
    builder = TORCHTUNE_PRESETS.get(req["model"]) if isinstance(req["model"], str) else None
    model: JsonObject = {}
    if builder is None:
        notes.append("no torchtune builder for this model; set model._component_ yourself")
    else:
        family = _tt_family(builder)
        prefix = {"full": "", "lora": "lora_", "qlora": "qlora_"}[req["method"]]
        model["_component_"] = f"torchtune.models.{family}.{prefix}{builder}"
    if req["method"] != "full":
        targets = _targets(req)
        names = (
            ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "down_proj", "up_proj"]
            if targets == "all-linear"
            else targets
        )
        model["lora_attn_modules"] = [_HF_TO_TT[n] for n in names if n in _HF_TO_TT]
        model["apply_lora_to_mlp"] = any(n in ("gate_proj", "up_proj", "down_proj") for n in names)
        model["apply_lora_to_output"] = False
        model["lora_rank"] = req["lora_rank"]
        model["lora_dropout"] = req["lora_dropout"]
    if model:
        out["model"] = model
    out["tokenizer"] = {"max_seq_len": req["seq_len"]}
    if req.get("batching") == "packed":
        out["dataset"] = {"packed": True}
    out["batch_size"] = req["micro_batch_size"]
    out["gradient_accumulation_steps"] = req["gradient_accumulation_steps"]
    optim: JsonObject = {"_component_": _TT_OPTIM.get(req["optimizer"], "torch.optim.AdamW")}
    if req["optimizer"] == "adamw":
        optim["fused"] = req["optimizer_fused"]
    if req["optimizer"] == "sgd-momentum":
        optim["momentum"] = 0.9
    if req["optimizer"] not in _TT_OPTIM:
        notes.append(f"optimizer {req['optimizer']} has no torchtune component here")
    out["optimizer"] = optim
    out["optimizer_in_bwd"] = req["optimizer_in_backward"]
    out["loss"] = {
        "_component_": "torchtune.modules.loss.LinearCrossEntropyLoss"
        if req["chunked_loss"]
        else "torch.nn.CrossEntropyLoss"
    }
    if req["precision"] in ("bf16-true", "fp32"):
        out["dtype"] = "bf16" if req["precision"] == "bf16-true" else "fp32"
    else:
        out["dtype"] = "bf16"
        notes.append(f"{req['precision']} has no torchtune dtype; bf16 written")
    out["enable_activation_checkpointing"] = req["gradient_checkpointing"]
    out["enable_activation_offloading"] = req["activation_offload"]
    out["compile"] = req["torch_compile"]
    if req["sharding"] in ("zero2", "zero3"):
        out["fsdp_reshard_after_forward"] = req["sharding"] == "zero3"
        out["fsdp_cpu_offload"] = req["cpu_offload"] == "optimizer+params"
    if "epochs" in request:
        out["epochs"] = request["epochs"]
    return "\n".join(_header("torchtune", req, notes) + _yaml(out)) + "\n"


def _tt_family(builder: str) -> str:
    for family in (
        "llama3_1",
        "llama3_2",
        "llama3",
        "llama2",
        "qwen2_5",
        "gemma2",
        "gemma",
        "mistral",
        "phi3",
    ):
        if builder.startswith(family + "_"):
            return family
    return builder.split("_")[0]


def export_deepspeed(request: JsonObject) -> str:
    # JSON has no comments, and DeepSpeed refuses unknown top-level keys: no header here
    return json.dumps(_deepspeed_dict(_full(request)), indent=2) + "\n"


def export_accelerate(request: JsonObject) -> str:
    req, notes = _full(request), []
    out: JsonObject = {"compute_environment": "LOCAL_MACHINE"}
    if req["sharding"] in ("zero1", "zero2", "zero3") and _uses_deepspeed(req):
        stage = _STAGE[req["sharding"]]
        ds = {
            "zero_stage": stage,
            "offload_optimizer_device": "cpu" if req["cpu_offload"] != "none" else "none",
            "offload_param_device": "cpu"
            if req["cpu_offload"] == "optimizer+params" and stage == 3
            else "none",
            "gradient_accumulation_steps": req["gradient_accumulation_steps"],
        }
        out["distributed_type"] = "DEEPSPEED"
        out["deepspeed_config"] = ds
    elif req["sharding"] in ("zero2", "zero3"):
        out["distributed_type"] = "FSDP"
        out["fsdp_config"] = _fsdp_dict(req, "fsdp_")
    elif req["sharding"] == "ddp" or req["num_gpus"] > 1:
        out["distributed_type"] = "MULTI_GPU"
    else:
        out["distributed_type"] = "NO"
    out["mixed_precision"] = {"bf16-mixed": "bf16", "fp16-mixed": "fp16", "fp32": "no"}.get(
        req["precision"], "bf16"
    )
    if req["precision"] == "bf16-true":
        notes.append("bf16-true: load the model in bf16; accelerate's mixed_precision bf16 written")
    out["num_machines"] = 1
    out["num_processes"] = req["num_gpus"]
    sp = req.get("sequence_parallel", 1)
    if sp > 1 and out["distributed_type"] == "DEEPSPEED":
        # accelerate 1.15.0 ParallelismConfig: ALST's Ulysses runs on DeepSpeed only
        out["parallelism_config"] = {
            "parallelism_config_sp_size": sp,
            "parallelism_config_sp_backend": "deepspeed",
            "parallelism_config_sp_seq_length_is_variable": True,
            "parallelism_config_sp_attn_implementation": _ATTN[req["attention"]],
        }
    elif sp > 1:
        notes.append(f"sequence_parallel {sp} not written: accelerate's Ulysses needs DeepSpeed")
    return "\n".join(_header("accelerate", req, notes) + _yaml(out)) + "\n"


EXPORTERS = {
    "axolotl": export_axolotl,
    "trl": export_trl,
    "llamafactory": export_llamafactory,
    "torchtune": export_torchtune,
    "deepspeed": export_deepspeed,
    "accelerate": export_accelerate,
}
