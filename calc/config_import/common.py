"""Mappings shared by the importers: optimizer, attention and precision names, LoRA target
lists, checked values, DeepSpeed file names and the Trainer's ``fsdp`` option (the DeepSpeed
and FSDP sections several formats embed: :mod:`calc.config_import.sections`).

Sources (read at the stated versions):

- Hugging Face optimizer names: ``transformers.training_args.OptimizerNames``, v5.17.0.
- FSDP options of the Trainer: ``transformers.trainer_utils.FSDPOption``, v5.17.0.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ..comm import GPUS_PER_NODE
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
    "q_proj": "q_proj",
    "k_proj": "k_proj",
    "v_proj": "v_proj",
    "output_proj": "o_proj",
    "w1": "gate_proj",
    "w2": "down_proj",
    "w3": "up_proj",
    "output": "lm_head",
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
_PYDANTIC_TEXT = {
    **dict.fromkeys(("true", "t", "yes", "y", "on", "1"), True),
    **dict.fromkeys(("false", "f", "no", "n", "off", "0"), False),
}
_ARGPARSE_TEXT = {
    **dict.fromkeys(("yes", "true", "t", "y", "1"), True),
    **dict.fromkeys(("no", "false", "f", "n", "0"), False),
}
BOOL_TEXT: dict[str, dict[str, bool]] = {
    "axolotl": _PYDANTIC_TEXT,
    "deepspeed": _PYDANTIC_TEXT,
    "fsdp": _PYDANTIC_TEXT,
    "trl": _ARGPARSE_TEXT,
    "llamafactory": {},
    "torchtune": {},
    "accelerate": {},
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
    from ..fields import spec_by_key

    spec = spec_by_key("estimate").get(field) if field else None
    return (
        int(spec.maximum)
        if spec is not None and spec.kind == "int" and spec.maximum is not None
        else None
    )


def integer(
    rep: Report,
    key: str,
    value: object,
    field: str | None = None,
    minimum: int = 1,
    maximum: int | None = None,
    reader: str | None = None,
) -> int | None:
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


def number(
    rep: Report,
    key: str,
    value: object,
    field: str | None,
    minimum: float,
    maximum: float | None = None,
    minimum_exclusive: bool = False,
    maximum_exclusive: bool = False,
) -> float | None:
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


def flag(
    rep: Report,
    key: str,
    value: object,
    field: str | None = None,
    also: tuple[str, ...] = (),
    reader: str | None = None,
) -> bool | str | None:
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


def choice(
    rep: Report,
    key: str,
    value: object,
    allowed: tuple[object, ...] | list[object],
    field: str | None = None,
    not_modelled: tuple[object, ...] = (),
) -> object:
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
    "adamw_anyprecision",
    "adamw_torch_4bit",
    "ademamix",
    "adagrad",
    "ademamix_8bit",
    "lion_8bit",
    "lion_32bit",
    "paged_ademamix_32bit",
    "paged_ademamix_8bit",
    "paged_lion_32bit",
    "paged_lion_8bit",
    "rmsprop",
    "rmsprop_bnb",
    "rmsprop_bnb_8bit",
    "rmsprop_bnb_32bit",
    "galore_adamw",
    "galore_adamw_8bit",
    "galore_adafactor",
    "galore_adamw_layerwise",
    "galore_adamw_8bit_layerwise",
    "galore_adafactor_layerwise",
    "lomo",
    "adalomo",
    "grokadamw",
    "schedule_free_radam",
    "schedule_free_adamw",
    "schedule_free_sgd",
    "apollo_adamw",
    "apollo_adamw_layerwise",
    "stable_adamw",
    "optimi_adamw",
    "ao_adamw_4bit",
    "ao_adamw_fp8",
    "adopt_adamw",
    "came_pytorch",
    "muon",
    "dion",
)


def set_optimizer_hf(rep: Report, key: str, name: object) -> None:
    if not isinstance(name, str) or name.lower() not in HF_OPTIMIZERS:
        known = name.lower() if isinstance(name, str) else None
        if known in HF_OPTIMIZERS_NOT_MODELLED:
            rep.unknown(key, "optimizer_not_modelled")
        else:
            rep.invalid(
                key,
                name,
                "not_allowed",
                {"allowed": sorted(HF_OPTIMIZERS) + list(HF_OPTIMIZERS_NOT_MODELLED)},
                "optimizer",
            )
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
        rep.invalid(
            key,
            names,
            "not_a_list_of_names",
            {"type": "list", "allowed": ["all-linear"]},
            "lora_targets",
        )
        return
    names = list(dict.fromkeys(names))
    if arch is None:
        # without the model's shapes only the names no block linear has are left out
        kept = [n for n in names if n not in _NOT_BLOCK_LINEARS]
        dropped = [n for n in names if n in _NOT_BLOCK_LINEARS]
        if kept:
            rep.use(
                key,
                "lora_targets",
                kept,
                "targets_not_modelled:" + ",".join(dropped) if dropped else None,
            )
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
    rep.use(
        key, "lora_targets", value, "targets_not_modelled:" + ",".join(dropped) if dropped else None
    )


# -- DeepSpeed --------------------------------------------------------------------------
# (the config's sections: :mod:`calc.config_import.sections`)
DEEPSPEED_STAGES = {0: "ddp", 1: "zero1", 2: "zero2", 3: "zero3"}
# what a DeepSpeed config (or its file name) can set
DEEPSPEED_FIELDS = (
    "sharding",
    "sync_each_micro_batch",
    "sharding_engine",
    "cpu_offload",
    "offload_pinned",
    "precision",
    "micro_batch_size",
    "gradient_accumulation_steps",
    "num_gpus",
    "optimizer",
    "gradient_bucket_mb",
)


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
    rep.use(key, "sharding", DEEPSPEED_STAGES[stage], "inferred_from_file_name")
    rep.use(key, "sync_each_micro_batch", stage >= 2)
    if stage >= 1:
        rep.use(key, "sharding_engine", "deepspeed", "inferred_from_file_name")
    if "offload" in base:
        params = stage == 3 and ("all" in base or "param" in base or "ds_z3_offload" in base)
        rep.use(key, "cpu_offload", "optimizer+params" if params else "optimizer")
    if "bf16" in base:
        rep.use(key, "precision", "bf16-mixed")
    return True


# -- FSDP (an FSDP config section: :mod:`calc.config_import.sections`) --------------------------
def use_server_shard_group(rep: Report, key: str) -> None:
    """FSDP's HYBRID_SHARD strategies shard within one server's GPUs: torch 2.13
    ``fsdp/_init_utils.py`` ``_init_intra_and_inter_node_groups`` builds the group from
    ``device_count()``, read as calc's servers of :data:`calc.comm.GPUS_PER_NODE`."""
    rep.use(key, "shard_group", GPUS_PER_NODE, "shard_group_of_one_server")


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
    mapping = {
        "full_shard": "zero3",
        "hybrid_shard": "zero3",
        "shard_grad_op": "zero2",
        "hybrid_shard_zero2": "zero2",
        "no_shard": "ddp",
    }
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
            if word.startswith("hybrid"):
                use_server_shard_group(rep, key)
        elif word == "offload":
            rep.use(key, "cpu_offload", "optimizer+params")
    if rep.status(key) != "used":
        rep.ignore(key)
