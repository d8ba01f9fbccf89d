"""Mappings shared by the importers: optimizer, attention and precision names, LoRA target
lists, and the DeepSpeed and FSDP sections that several formats embed.

Sources (read at the stated versions):

- Hugging Face optimizer names: ``transformers.training_args.OptimizerNames``, v5.17.0.
- FSDP options of the Trainer: ``transformers.trainer_utils.FSDPOption``, v5.17.0.
- FSDP sharding strategies: ``torch.distributed.fsdp.ShardingStrategy`` (FULL_SHARD=1,
  SHARD_GRAD_OP=2, NO_SHARD=3, HYBRID_SHARD=4), as numbered in accelerate 1.15.0's
  config; FSDP2 expresses the same choice as ``reshard_after_forward``.
- DeepSpeed config: ``zero_optimization.stage``, ``offload_optimizer``/``offload_param``
  ``.device``, ``bf16``/``fp16`` ``.enabled``, ``train_micro_batch_size_per_gpu``,
  ``gradient_accumulation_steps``, ``train_batch_size`` = micro x accumulation x GPUs
  (DeepSpeed configuration JSON documentation, v0.17).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ..arch import ModelArch
from ..jsontypes import JsonObject
from .report import Report

# How an importer reads a file its config names (a DeepSpeed JSON): the CLI passes one;
# the browser has no files, so None.
ReadFile = Callable[[str], JsonObject | None]

# Hugging Face ``optim`` names -> (optimizer, optimizer_fused)
HF_OPTIMIZERS: dict[str, tuple[str, bool]] = {
    "adamw_torch": ("adamw", False),
    "adamw_hf": ("adamw", False),
    "adamw_torch_fused": ("adamw", True),
    "adamw_apex_fused": ("adamw", False),
    "adamw_torch_npu_fused": ("adamw", False),
    "adamw_torch_xla": ("adamw", False),
    "adamw_bnb_8bit": ("adamw-8bit", False),
    "adamw_8bit": ("adamw-8bit", False),
    "adamw_torch_8bit": ("adamw-8bit", False),
    "paged_adamw_32bit": ("paged-adamw", False),
    "paged_adamw": ("paged-adamw", False),
    "paged_adamw_8bit": ("paged-adamw-8bit", False),
    "adafactor": ("adafactor", False),
    "sgd": ("sgd", False),  # torch.optim.SGD with the Trainer's defaults: momentum 0
    # axolotl's own names (axolotl 0.18.0, schemas/enums.py CustomSupportedOptimizers)
    "ao_adamw_8bit": ("adamw-8bit", False),
}

# torchtune ``optimizer._component_`` -> optimizer (fused comes from the ``fused`` arg)
COMPONENT_OPTIMIZERS: dict[str, str] = {
    "torch.optim.AdamW": "adamw",
    "torch.optim.Adam": "adamw",
    "bitsandbytes.optim.AdamW8bit": "adamw-8bit",
    "bitsandbytes.optim.PagedAdamW": "paged-adamw",
    "bitsandbytes.optim.PagedAdamW32bit": "paged-adamw",
    "bitsandbytes.optim.PagedAdamW8bit": "paged-adamw-8bit",
    "torchao.optim.AdamW8bit": "adamw-8bit",
    "torchao.prototype.low_bit_optim.AdamW8bit": "adamw-8bit",
    "torch.optim.SGD": "sgd",
}

# attention implementation names (transformers ``attn_implementation``, LLaMA-Factory
# ``flash_attn``) -> request ``attention``
ATTENTION_NAMES: dict[str, str] = {
    "flash_attention_2": "flash",
    "flash_attention_3": "flash",
    "fa2": "flash",
    "fa3": "flash",
    "flash": "flash",
    "sdpa": "sdpa",
    "eager": "eager",
    "disabled": "eager",  # LLaMA-Factory: transformers' eager attention
    "auto": "sdpa",  # transformers picks SDPA when no flash kernel is requested
}

# torchtune module names -> Hugging Face names (torchtune 0.6 ``lora_attn_modules``; the
# MLP's w1/w2/w3 are gate/down/up in Llama-style checkpoints, the convert functions of
# torchtune.models.convert_weights)
TORCHTUNE_TO_HF = {
    "q_proj": "q_proj", "k_proj": "k_proj", "v_proj": "v_proj", "output_proj": "o_proj",
    "w1": "gate_proj", "w2": "down_proj", "w3": "up_proj", "output": "lm_head",
}


def is_true(value: object) -> bool:
    """A value already read as a boolean (by :func:`flag`), or a text the key's tool takes."""
    return value is True or (isinstance(value, str) and value.lower() in ("true", "yes", "1"))


# -- values the tool itself would refuse ----------------------------------------------------
# Each converter returns the value to use, or None after reporting the key ``invalid`` (the
# value, a coded reason, what is accepted, the request field it was meant for).

# The text forms of a boolean each tool's own parser turns into true/false; YAML's and
# JSON's true/false are booleans everywhere, any other text is refused.
# - pydantic 2 in lax mode (axolotl 0.18.0's config schema, DeepSpeed's config models):
#   "true/false", "t/f", "yes/no", "y/n", "on/off", "1/0", any case, and the integers 0, 1;
# - ``trl sft --config``: TrlParser sets the file's values as argparse defaults, so text goes
#   through transformers 5.17.0 ``hf_argparser.string_to_bool``: "yes/no", "true/false",
#   "t/f", "y/n", "1/0", any case;
# - an FSDP section (accelerate's ``fsdp_config``, the Trainer's): accelerate 1.15.0 turns it
#   into environment variables read by ``utils.environment.str_to_bool``: the same forms;
# - LLaMA-Factory (``HfArgumentParser.parse_dict``), torchtune (OmegaConf) and accelerate's
#   top level (``ClusterConfig(**yaml)``) pass the value on unconverted: only a real boolean.
_PYDANTIC_TEXT = {**dict.fromkeys(("true", "t", "yes", "y", "on", "1"), True),
                  **dict.fromkeys(("false", "f", "no", "n", "off", "0"), False)}
_ARGPARSE_TEXT = {**dict.fromkeys(("yes", "true", "t", "y", "1"), True),
                  **dict.fromkeys(("no", "false", "f", "n", "0"), False)}
BOOL_TEXT: dict[str, dict[str, bool]] = {
    "axolotl": _PYDANTIC_TEXT, "deepspeed": _PYDANTIC_TEXT, "fsdp": _PYDANTIC_TEXT, "trl": _ARGPARSE_TEXT,
    "llamafactory": {}, "torchtune": {}, "accelerate": {},
}
_PYDANTIC_INTS = ("axolotl", "deepspeed")  # pydantic's lax mode also reads 0 and 1
# Whole numbers written as text ("8"): read by pydantic (axolotl) and by argparse's int (trl
# sft --config); the others pass the text on (DeepSpeed's batch keys through
# ``get_scalar_param``), where it fails, so it is refused.
TEXT_INTS = ("axolotl", "trl")


def _whole(value: object, as_text: bool = True) -> int | None:
    """An integer written as one (8, 8.0, and with ``as_text`` "8", "-5"); None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and as_text:
        text = value.strip()
        digits = text[1:] if text[:1] in "+-" else text
        return int(text) if digits.isdigit() and digits.isascii() else None
    return value if isinstance(value, int) else None


def positive_int(value: object) -> int | None:
    """An int > 0 (also "8" as text), else None."""
    number = _whole(value)
    return number if number is not None and number > 0 else None


def _field_maximum(field: str | None) -> int | None:
    from ..request import ESTIMATE_FIELDS

    spec = ESTIMATE_FIELDS.get(field) if field else None
    return spec[2] if spec is not None and spec[1] == "int" and isinstance(spec[2], int) else None


def integer(rep: Report, key: str, value: object, field: str | None = None, minimum: int = 1,
            maximum: int | None = None, reader: str | None = None) -> int | None:
    """A whole number from ``minimum`` to ``maximum`` (by default the request field's own
    maximum), as text too where the reader takes it (:data:`TEXT_INTS`; ``reader``: the
    format whose parser reads the key, by default the file's); else the key is reported
    ``invalid``."""
    maximum = maximum if maximum is not None else _field_maximum(field)
    accepted: JsonObject = {"type": "integer", "minimum": minimum}
    if maximum is not None:
        accepted["maximum"] = maximum
    number = _whole(value, (reader or rep.format) in TEXT_INTS)
    if number is None:
        rep.invalid(key, value, "not_an_integer", accepted, field)
    elif number < minimum or (maximum is not None and number > maximum):
        rep.invalid(key, value, "out_of_range", accepted, field)
    else:
        return number
    return None


def set_int(rep: Report, key: str, field: str, value: object, reader: str | None = None) -> bool:
    number = integer(rep, key, value, field, reader=reader)
    if number is None:
        return False
    rep.use(key, field, number)
    return True


def number(rep: Report, key: str, value: object, field: str | None, minimum: float,
           maximum: float | None = None, minimum_exclusive: bool = False,
           maximum_exclusive: bool = False) -> float | None:
    """A number (int or float, not a boolean, not text) within the bounds; else ``invalid``."""
    accepted: JsonObject = {"type": "number", "minimum": minimum}
    if minimum_exclusive:
        accepted["minimum_exclusive"] = True
    if maximum is not None:
        accepted["maximum"] = maximum
        if maximum_exclusive:
            accepted["maximum_exclusive"] = True
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        rep.invalid(key, value, "not_a_number", accepted, field)
        return None
    low = value <= minimum if minimum_exclusive else value < minimum
    high = maximum is not None and (value >= maximum if maximum_exclusive else value > maximum)
    if low or high:
        rep.invalid(key, value, "out_of_range", accepted, field)
        return None
    return value


def flag(rep: Report, key: str, value: object, field: str | None = None,
         also: tuple[str, ...] = (), reader: str | None = None) -> bool | str | None:
    """A boolean as the tool reads one (:data:`BOOL_TEXT`; ``reader``: the format whose
    parser reads the key, by default the file's), or one of the words ``also`` (axolotl's
    ``bf16: auto``) returned as written; else the key is reported ``invalid``."""
    if isinstance(value, bool) or value is None:  # None: the key left unset (``fp16:``)
        return value
    if isinstance(value, str) and value in also:
        return value
    reader = reader or rep.format
    texts = BOOL_TEXT.get(reader, {})
    if isinstance(value, str) and value.strip().lower() in texts:
        return texts[value.strip().lower()]
    if reader in _PYDANTIC_INTS and isinstance(value, int) and value in (0, 1):
        return bool(value)
    allowed: list[object] = [True, False, *also, *sorted(texts)]
    rep.invalid(key, value, "not_a_boolean", {"type": "boolean", "allowed": allowed}, field)
    return None


def choice(rep: Report, key: str, value: object, allowed: tuple[object, ...] | list[object],
           field: str | None = None, not_modelled: tuple[object, ...] = ()) -> object:
    """One of the tool's own names for the key: a name calc models is returned; one the tool
    takes but calc does not model is reported ``unknown`` (``not_modelled``) and None
    returned; anything else is ``invalid``."""
    if value in allowed and not isinstance(value, bool):
        return value
    if value in not_modelled and not isinstance(value, bool):
        rep.unknown(key, "not_modelled")
        return None
    rep.invalid(key, value, "not_allowed", {"allowed": [*allowed, *not_modelled]}, field)
    return None


# transformers 5.17.0 ``OptimizerNames`` calc does not model, and axolotl 0.18.0's own
# optimizer names (``CustomSupportedOptimizers``): a real name, reported ``unknown``
HF_OPTIMIZERS_NOT_MODELLED = (
    "adamw_anyprecision", "adamw_torch_4bit", "ademamix", "adagrad", "ademamix_8bit", "lion_8bit",
    "lion_32bit", "paged_ademamix_32bit", "paged_ademamix_8bit", "paged_lion_32bit", "paged_lion_8bit",
    "rmsprop", "rmsprop_bnb", "rmsprop_bnb_8bit", "rmsprop_bnb_32bit", "galore_adamw",
    "galore_adamw_8bit", "galore_adafactor", "galore_adamw_layerwise", "galore_adamw_8bit_layerwise",
    "galore_adafactor_layerwise", "lomo", "adalomo", "grokadamw", "schedule_free_radam",
    "schedule_free_adamw", "schedule_free_sgd", "apollo_adamw", "apollo_adamw_layerwise",
    "stable_adamw", "optimi_adamw", "ao_adamw_4bit", "ao_adamw_fp8", "adopt_adamw", "came_pytorch",
    "muon", "dion",
)


def set_optimizer_hf(rep: Report, key: str, name: object) -> None:
    if not isinstance(name, str) or name.lower() not in HF_OPTIMIZERS:
        known = name.lower() if isinstance(name, str) else None
        if known in HF_OPTIMIZERS_NOT_MODELLED:
            rep.unknown(key, "optimizer_not_modelled")
        else:
            rep.invalid(key, name, "not_allowed",
                        {"allowed": sorted(HF_OPTIMIZERS) + list(HF_OPTIMIZERS_NOT_MODELLED)}, "optimizer")
        return
    optimizer, fused = HF_OPTIMIZERS[name.lower()]
    rep.use(key, "optimizer", optimizer)
    rep.use(key, "optimizer_fused", fused)


def set_attention(rep: Report, key: str, name: object) -> None:
    if not isinstance(name, str):
        rep.invalid(key, name, "not_allowed", {"allowed": sorted(ATTENTION_NAMES)}, "attention")
        return
    value = ATTENTION_NAMES.get(name.lower())
    if value is None:
        # transformers also takes flex/paged attention and Hub kernels ("org/kernel")
        rep.unknown(key, "attention_not_modelled")
    else:
        rep.use(key, "attention", value)


_NOT_BLOCK_LINEARS = {"lm_head", "embed_tokens", "wte", "tok_embeddings", "output", "embed_out"}


def normalise_targets(rep: Report, key: str, names: object, arch: ModelArch | None) -> None:
    """A LoRA target list (names, "all-linear", or "a,b" text) onto ``lora_targets``.

    Names the model has no linear for (``lm_head``, ``embed_tokens``: adapters the
    request does not model) are left out and named in the key's note; a list that covers
    every linear of the model becomes "all-linear"."""
    if isinstance(names, str):
        if names.strip().lower() in ("all-linear", "all_linear", "all"):
            rep.use(key, "lora_targets", "all-linear")
            return
        names = [part.strip() for part in names.split(",") if part.strip()]
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        rep.invalid(key, names, "not_a_list_of_names", {"type": "list", "allowed": ["all-linear"]}, "lora_targets")
        return
    names = list(dict.fromkeys(names))
    if arch is None:
        # without the model's shapes only the names no block linear has are left out
        kept = [n for n in names if n not in _NOT_BLOCK_LINEARS]
        dropped = [n for n in names if n in _NOT_BLOCK_LINEARS]
        if kept:
            rep.use(key, "lora_targets", kept,
                    "targets_not_modelled:" + ",".join(dropped) if dropped else None)
        else:
            rep.unknown(key, "no_target_in_model:" + ",".join(dropped))
        return
    known = arch.linear_names()
    kept = [n for n in names if n in known]
    dropped = [n for n in names if n not in known]
    if not kept:
        rep.unknown(key, "no_target_in_model:" + ",".join(dropped))
        return
    value = "all-linear" if set(kept) == set(known) else kept
    rep.use(key, "lora_targets", value,
            "targets_not_modelled:" + ",".join(dropped) if dropped else None)


# -- DeepSpeed --------------------------------------------------------------------------
_DS_IGNORED = {
    "steps_per_print", "wall_clock_breakdown", "gradient_clipping", "prescale_gradients",
    "zero_allow_untested_optimizer", "scheduler", "tensorboard", "wandb", "csv_monitor",
    "comms_logger", "flops_profiler", "dump_state", "zero_force_ds_cpu_optimizer",
    "checkpoint", "seed", "memory_breakdown", "gradient_predivide_factor",
}
_DS_ZERO_IGNORED = {"overlap_comm", "contiguous_gradients", "round_robin_gradients",
                    "stage3_gather_16bit_weights_on_model_save",
                    "gather_16bit_weights_on_model_save", "load_from_fp32_weights",
                    "elastic_checkpoint", "ignore_unused_parameters"}
_DS_STAGE = {0: "ddp", 1: "zero1", 2: "zero2", 3: "zero3"}
# what a DeepSpeed config (or its file name) can set
DEEPSPEED_FIELDS = ("sharding", "sync_each_micro_batch", "sharding_engine", "cpu_offload", "precision",
                    "micro_batch_size", "gradient_accumulation_steps", "num_gpus", "optimizer")


def deepspeed_section(rep: Report, ds: JsonObject, prefix: str = "") -> None:
    """Map a DeepSpeed config dict. ``auto`` values are filled by the Hugging Face
    Trainer from its own arguments, so they are reported ``ignored`` (the Trainer's key
    sets the field)."""
    micro = gas = total = None
    for key, value in ds.items():
        path = prefix + str(key)
        if value == "auto":
            rep.ignore(path, "auto_from_trainer")
            continue
        if key == "zero_optimization" and isinstance(value, dict):
            _deepspeed_zero(rep, value, path + ".")
        elif key in ("bf16", "fp16") and isinstance(value, dict):
            for sub, item in value.items():
                subpath = f"{path}.{sub}"
                if sub == "enabled":
                    if item == "auto":
                        rep.ignore(subpath, "auto_from_trainer")
                    elif (enabled := flag(rep, subpath, item, "precision", reader="deepspeed")) is True:
                        # ZeRO keeps fp32 master weights and fp32 optimizer states and
                        # computes in 16 bits: Lightning's "-mixed"
                        rep.use(subpath, "precision", "bf16-mixed" if key == "bf16" else "fp16-mixed")
                    elif enabled is False:
                        rep.ignore(subpath)
                elif key == "fp16" and sub in ("loss_scale", "loss_scale_window", "initial_scale_power",
                                                 "hysteresis", "min_loss_scale", "auto_cast"):
                    rep.ignore(subpath)
                elif sub == "immediate_grad_update":
                    rep.unknown(subpath, "not_modelled")
                else:
                    rep.unknown(subpath)
        elif key == "train_micro_batch_size_per_gpu":
            micro = integer(rep, path, value, "micro_batch_size", reader="deepspeed")
            if micro is not None:
                rep.use(path, "micro_batch_size", micro)
        elif key == "gradient_accumulation_steps":
            gas = integer(rep, path, value, "gradient_accumulation_steps", reader="deepspeed")
            if gas is not None:
                rep.use(path, "gradient_accumulation_steps", gas)
        elif key == "train_batch_size":
            total = integer(rep, path, value, "num_gpus", maximum=2 ** 62, reader="deepspeed")
        elif key == "optimizer" and isinstance(value, dict):
            kind = value.get("type")
            for sub in value:
                subpath = f"{path}.{sub}"
                if sub == "type":
                    name = str(kind).lower()
                    if name in ("adam", "adamw", "fusedadam", "cpuadam", "deepspeedcpuadam"):
                        rep.use(subpath, "optimizer", "adamw")
                    elif name == "sgd":
                        rep.use(subpath, "optimizer", "sgd")
                    else:
                        rep.unknown(subpath, "optimizer_not_modelled")
                elif sub == "params":
                    rep.ignore(subpath)
                else:
                    rep.unknown(subpath)
        elif key in _DS_IGNORED:
            rep.ignore(path)
        elif key == "activation_checkpointing":
            # deepspeed.checkpointing is used by Megatron-style models; Hugging Face
            # models checkpoint through gradient_checkpointing instead
            rep.unknown(path, "not_modelled")
        else:
            rep.unknown(path)
    if total is not None:
        if micro and gas and total % (micro * gas) == 0:
            rep.use(prefix + "train_batch_size", "num_gpus", total // (micro * gas))
        else:
            rep.unknown(prefix + "train_batch_size", "num_gpus_not_derivable")


def _deepspeed_zero(rep: Report, zero: JsonObject, prefix: str) -> None:
    stage = zero.get("stage")
    for key, value in zero.items():
        path = prefix + str(key)
        if key == "stage":
            if value == "auto":
                rep.ignore(path, "auto_from_trainer")
            elif choice(rep, path, value, tuple(_DS_STAGE), "sharding") is not None:
                assert isinstance(value, int)
                rep.use(path, "sharding", _DS_STAGE[value])
                # ZeRO-2/3 reduce-scatter the gradients at every micro-batch
                rep.use(path, "sync_each_micro_batch", value >= 2)
                if value >= 1:
                    rep.use(path, "sharding_engine", "deepspeed")
        elif key in ("offload_optimizer", "offload_param") and isinstance(value, dict):
            for sub, item in value.items():
                subpath = f"{path}.{sub}"
                if sub == "device":
                    if item in ("cpu", "nvme"):
                        current = rep.request.get("cpu_offload", "none")
                        if key == "offload_param":
                            if stage == 3:
                                rep.use(subpath, "cpu_offload", "optimizer+params",
                                        "nvme_counted_as_cpu" if item == "nvme" else None)
                            else:
                                rep.unknown(subpath, "param_offload_needs_stage_3")
                        else:
                            rep.use(subpath, "cpu_offload",
                                    "optimizer+params" if current == "optimizer+params" else "optimizer",
                                    "nvme_counted_as_cpu" if item == "nvme" else None)
                    elif item in ("none", None):
                        rep.ignore(subpath)
                    else:
                        choice(rep, subpath, item, ("cpu", "nvme", "none"), "cpu_offload")
                elif sub in ("pin_memory", "nvme_path", "buffer_count", "buffer_size",
                             "max_in_cpu", "fast_init", "ratio"):
                    rep.ignore(subpath)
                else:
                    rep.unknown(subpath)
        elif key in _DS_ZERO_IGNORED:
            rep.ignore(path)
        elif value == "auto":
            rep.ignore(path, "auto_from_trainer")
        else:
            # bucket sizes, prefetch and persistence thresholds set communication buffers
            # on the GPU, which the estimate does not model
            rep.unknown(path, "not_modelled")


def deepspeed_from_name(rep: Report, key: str, name: str) -> bool:
    """Stage and offload read from a DeepSpeed file *name* (axolotl's
    ``deepspeed_configs/zero3_bf16_cpuoffload_all.json``, LLaMA-Factory's
    ``examples/deepspeed/ds_z3_offload_config.json``) when the file itself is not given."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1].lower()
    match = re.search(r"(?:zero|_z|^z|ds_z)_?([0-3])", base)
    if not match:
        rep.unknown(key, "deepspeed_file_not_read")
        return False
    stage = int(match.group(1))
    rep.use(key, "sharding", _DS_STAGE[stage], "inferred_from_file_name")
    rep.use(key, "sync_each_micro_batch", stage >= 2)
    if stage >= 1:
        rep.use(key, "sharding_engine", "deepspeed", "inferred_from_file_name")
    if "offload" in base:
        params = stage == 3 and ("all" in base or "param" in base or "ds_z3_offload" in base)
        rep.use(key, "cpu_offload", "optimizer+params" if params else "optimizer")
    if "bf16" in base:
        rep.use(key, "precision", "bf16-mixed")
    return True


# -- FSDP ---------------------------------------------------------------------------------
_FSDP_STRATEGY = {
    "FULL_SHARD": "zero3", "1": "zero3", "SHARD_GRAD_OP": "zero2", "2": "zero2",
    "NO_SHARD": "ddp", "3": "ddp", "HYBRID_SHARD": "zero3", "4": "zero3",
    "_HYBRID_SHARD_ZERO2": "zero2", "HYBRID_SHARD_ZERO2": "zero2", "5": "zero2",
}
_FSDP_IGNORED = {
    "auto_wrap_policy", "transformer_layer_cls_to_wrap", "backward_prefetch",
    "forward_prefetch", "state_dict_type", "sync_module_states", "cpu_ram_efficient_loading",
    "limit_all_gathers", "min_num_params", "final_state_dict_type", "cpu_offload_pin_memory",
    "xla", "xla_fsdp_settings", "xla_fsdp_grad_ckpt", "use_orig_params", "version",
    "reshard_after_forward", "sharding_strategy", "offload_params", "activation_checkpointing",
    "mixed_precision_policy",
}


def fsdp_section(rep: Report, cfg: JsonObject, prefix: str = "", strip: str = "fsdp_", version: object = None) -> None:
    """An FSDP config dict (accelerate's ``fsdp_config`` with ``fsdp_`` names, the
    Trainer's ``fsdp_config`` with or without them, axolotl's without). ``version``: the
    FSDP version when the file states it outside the dict (axolotl's ``fsdp_version``)."""
    plain = {}
    for key, value in cfg.items():
        name = str(key)
        plain[name[len(strip):] if name.startswith(strip) else name] = (key, value)
    version = positive_int(plain.get("version", (None, version))[1]) or 1
    for name, (key, value) in plain.items():
        path = prefix + str(key)
        if name == "sharding_strategy":
            strategy = _FSDP_STRATEGY.get(str(value).upper())
            if strategy is None:
                rep.invalid(path, value, "not_allowed", {"allowed": list(_FSDP_STRATEGY)}, "sharding")
            else:
                rep.use(path, "sharding", strategy,
                        "hybrid_counted_within_node" if "HYBRID" in str(value).upper() or str(value) in ("4", "5") else None)
        elif name == "reshard_after_forward":
            # accelerate 1.15.0 also takes an FSDP1 strategy name here
            reshard = (_FSDP_STRATEGY[value.upper()] == "zero3"
                       if isinstance(value, str) and value.upper() in _FSDP_STRATEGY
                       else flag(rep, path, value, "sharding", reader="fsdp"))
            if reshard is None:
                continue
            if version >= 2 or "sharding_strategy" not in plain:
                rep.use(path, "sharding", "zero3" if reshard is True else "zero2")
            else:
                rep.ignore(path)
        elif name == "offload_params":
            offload = flag(rep, path, value, "cpu_offload", reader="fsdp")
            if offload is True:
                rep.use(path, "cpu_offload", "optimizer+params")
            elif offload is False:
                rep.mark_used(path, ["cpu_offload"])
                rep.request.setdefault("cpu_offload", "none")
        elif name == "activation_checkpointing":
            checkpointing = flag(rep, path, value, "gradient_checkpointing", reader="fsdp")
            if checkpointing is True:
                rep.use(path, "gradient_checkpointing", True)
            elif checkpointing is False:
                rep.ignore(path, "does_not_disable_model_checkpointing")
        elif name == "use_orig_params":
            # FSDP1 + use_orig_params keeps gradient memory for frozen weights in mixed
            # wrap units (PyTorch FSDP docs); FSDP2 has no such flag
            orig = flag(rep, path, value, "frozen_weight_grads", reader="fsdp")
            if version == 1:
                rep.use(path, "frozen_weight_grads", orig is True)
            else:
                rep.ignore(path)
        elif name == "version":
            rep.mark_used(path, ["sharding"])
        elif name in _FSDP_IGNORED:
            rep.ignore(path)
        else:
            rep.unknown(path)
    if "sharding_strategy" not in plain and "reshard_after_forward" not in plain:
        # FULL_SHARD is the default strategy of torch FSDP and of accelerate 1.15.0
        rep.default("sharding", "zero3", "torch FSDP default FULL_SHARD")


def fsdp_trainer_option(rep: Report, key: str, value: object) -> None:
    """The Trainer's ``fsdp`` argument: "full_shard auto_wrap offload" or a list."""
    if isinstance(value, str):
        words = value.split()
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        words = value
    elif value in (False, None):
        rep.ignore(key)
        return
    else:
        rep.unknown(key)
        return
    words = [w.lower() for w in words]
    mapping = {"full_shard": "zero3", "hybrid_shard": "zero3", "shard_grad_op": "zero2",
               "hybrid_shard_zero2": "zero2", "no_shard": "ddp"}
    known = set(mapping) | {"offload", "auto_wrap"}
    if not words:
        rep.ignore(key)
        return
    if any(w not in known for w in words):
        rep.unknown(key, "unknown_fsdp_option")
        return
    for word in words:
        if word in mapping:
            rep.use(key, "sharding", mapping[word])
        elif word == "offload":
            rep.use(key, "cpu_offload", "optimizer+params")
    if rep.status(key) != "used":
        rep.ignore(key)
