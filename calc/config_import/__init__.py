"""Import a training config (axolotl, TRL/Trainer, LLaMA-Factory, torchtune, DeepSpeed,
accelerate) into an estimate/plan request, key by key, and export a request back.

``import_config(text, fmt="auto")`` returns ``{"format", "tool", "request", "keys",
"defaults", "notes"}`` (plus ``"plan"`` with ``epochs`` / ``dataset_tokens`` for the plan
command): ``keys`` lists every key of the file as ``used`` (with the ``field`` it set and its
``value``), ``invalid`` (a value the tool would refuse: ``value``, ``reason``, ``accepted``;
see :mod:`calc.config_import.report`), ``ignored`` (no effect on memory or time) or
``unknown``; ``defaults`` names each field filled from the tool's own default at a stated
version (also in place of an invalid value). A ``fmt`` the file's keys contradict raises
``config_format_mismatch``. ``export_config(request, fmt)``
writes the keys calc models in that format. Bad input raises a coded
:class:`~calc.errors.InputError`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..errors import InputError
from ..jsontypes import JsonObject
from .export import EXPORTERS, FORMATS
from .loading import load_text

if TYPE_CHECKING:
    from .common import ReadFile

__all__ = [
    "FORMATS",
    "check_format",
    "detect_format",
    "export_config",
    "import_config",
    "import_data",
]


def detect_format(data: JsonObject) -> str:
    """The format of a parsed config, from keys only one format has."""
    keys = set(map(str, data))
    if "base_model" in keys:
        return "axolotl"
    if (
        isinstance(data.get("model"), dict)
        and "_component_" in data["model"]
        or any(isinstance(v, dict) and "_component_" in v for v in data.values())
    ):
        return "torchtune"
    if keys & {
        "distributed_type",
        "compute_environment",
        "num_processes",
        "mixed_precision",
    } and not keys & {"per_device_train_batch_size", "model_name_or_path"}:
        return "accelerate"
    if keys & {"zero_optimization", "train_micro_batch_size_per_gpu", "train_batch_size"}:
        return "deepspeed"
    if "model_name_or_path" in keys and keys & {
        "finetuning_type",
        "stage",
        "template",
        "cutoff_len",
        "lora_target",
        "quantization_bit",
        "flash_attn",
    }:
        return "llamafactory"
    if keys & {
        "per_device_train_batch_size",
        "output_dir",
        "optim",
        "max_length",
        "max_seq_length",
        "gradient_accumulation_steps",
        "num_train_epochs",
        "model_name_or_path",
        "use_peft",
    }:
        return "trl"
    raise InputError("config_format_unknown", "format", None)


# (detected, asked): a LLaMA-Factory file with only Trainer keys reads as TRL's
_COMPATIBLE = {("trl", "llamafactory")}


def check_format(data: JsonObject, fmt: str) -> None:
    """Refuse a file that another format's keys mark as that format (an axolotl file read
    as torchtune would give a request of defaults only). A file no format claims (a few
    keys every format shares) is read as asked."""
    try:
        detected = detect_format(data)
    except InputError:
        return
    if detected != fmt and (detected, fmt) not in _COMPATIBLE:
        raise InputError(
            "config_format_mismatch",
            "format",
            fmt,
            f"the file looks like {detected}",
            extra={"detected": detected},
        )


def _importer(fmt: str) -> Callable[..., JsonObject]:
    if fmt == "axolotl":
        from .axolotl import import_axolotl as fn
    elif fmt == "trl":
        from .trl import import_trl as fn
    elif fmt == "llamafactory":
        from .llamafactory import import_llamafactory as fn
    elif fmt == "torchtune":
        from .torchtune import import_torchtune as fn
    elif fmt == "deepspeed":
        from .deepspeed import import_deepspeed as fn
    elif fmt == "accelerate":
        from .accelerate import import_accelerate as fn
    else:
        raise InputError("unknown_config_format", "format", fmt)
    return fn


def import_data(
    data: JsonObject, fmt: str = "auto", model: object = None, read_file: ReadFile | None = None
) -> JsonObject:
    """Map an already parsed config (a ``fmt`` other than "auto" must not contradict the
    file's own keys: :func:`check_format`). ``model``: a preset id or ``{"hf_config": ...}`` that
    replaces the file's model (the calculator's current model, or a pasted config.json);
    ``read_file(path) -> dict | None`` lets the CLI read a DeepSpeed file the config names."""
    if not isinstance(data, dict):
        raise InputError("config_not_mapping", "config", type(data).__name__)
    if fmt == "auto":
        fmt = detect_format(data)
    else:
        check_format(data, fmt)
    result = _importer(fmt)(data, model=model, read_file=read_file)
    result["detected"] = fmt
    return result


def import_config(
    text: str | bytes, fmt: str = "auto", model: object = None, read_file: ReadFile | None = None
) -> JsonObject:
    """Parse ``text`` (str or bytes, YAML or JSON) and map it (see :func:`import_data`)."""
    if fmt != "auto" and fmt not in FORMATS:
        raise InputError("unknown_config_format", "format", fmt)
    return import_data(load_text(text), fmt, model=model, read_file=read_file)


def export_config(request: object, fmt: str) -> str:
    """The request's modelled keys in ``fmt`` (YAML, or JSON for DeepSpeed)."""
    if fmt not in EXPORTERS:
        raise InputError("unknown_config_format", "format", fmt)
    if not isinstance(request, dict):
        raise InputError("request_not_object", None, type(request).__name__)
    return EXPORTERS[fmt](request)
