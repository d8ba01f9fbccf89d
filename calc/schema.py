"""JSON Schema (draft 2020-12) of the estimate and plan requests, generated from the field tables.

Every property comes from the request's field registry (:data:`calc.fields.FIELDS`, which the
CLI's flags are built from too), with the English help text of the message catalogue as its
``description``; preset and card ids come from the catalogues. ``model`` is one of three forms,
as calc reads it: a preset id, a Hugging Face id of the alias table (a pattern generated from that table, so it matches exactly the ids
:func:`calc.presets.resolve_preset_id` resolves: any letter case, spaces around, an
``https://huggingface.co/`` address; the ids themselves listed in ``examples``), or
``{"hf_config": {...}}``. ``python -m calc schema estimate|plan`` prints them; the site
publishes them as ``schema/estimate-request.schema.json`` and ``schema/plan-request.schema.json``.

A whole number may be written with a zero fraction: ``2048.0`` is 2048 for the schema (draft
2020-12 counts it as an integer), for calc's parser and for the calculator's form alike.

What a schema cannot say, and the parser still checks:

- ``lora_targets`` must name linear modules of the chosen model (``unknown_lora_target``);
- ``length_stats``: its text form must be ``name:value`` pairs, and its parts must agree with
  each other and with ``seq_len`` (``mean``, ``p90`` and ``p99`` at most ``max``, ``p99`` at
  least ``p90``, ``mean`` in the range the percentiles leave:
  :func:`calc.lengths.check_consistent`);
- a library behaviour given both on top (as older requests do) and under ``behaviour`` must have
  one value (``key_given_twice``);
- ``fsdp_flat_parameters`` (FSDP1) and ``fsdp_fully_shard`` (FSDP2) are not both true
  (``fsdp_versions_conflict``);
- ``shard_group`` below ``num_gpus`` must divide it (``shard_group_not_divisor``);
- ``sequence_parallel`` must divide ``num_gpus`` (``sequence_parallel_not_divisor``) and the
  model's attention heads (``sequence_parallel_heads``), on softmax attention only
  (``sequence_parallel_not_modelled``);
- ``model.hf_config`` must be a config.json calc can read (``calc.hf_config``): the schema only
  says it is an object; a bitsandbytes ``quantization_config`` whose ``llm_int8_skip_modules``
  leaves the output layer to be quantized or names block modules calc cannot place, or one that
  keeps block modules in 16 bits under a QLoRA stack that does not load 4-bit checkpoints
  through transformers (torchtune, LitGPT) or whose 4-bit layers keep their inputs or are built
  whole on the GPU, is refused
  (``quantization_skip_not_modelled``);
- ``checkpointing_granularity`` other than ``full`` needs ``gradient_checkpointing`` on
  (``checkpointing_granularity_without_checkpointing``), and ``every-n`` needs
  ``checkpointing_every`` (``missing_field``);
- ``checkpointing_granularity`` ``selective-op`` is counted as ``full`` (a warning says so)
  on QLoRA and on blocks :func:`calc.checkpointing.supports_selective_op` does not list;
- ``power_limit_w`` needs a card whose clocks the catalogue has (``power_limit_without_clock``:
  the time of a card without them cannot be priced under a limit);
- the memory model may still refuse a valid request it cannot estimate.
"""

from __future__ import annotations

from typing import Any

from .fields import BEHAVIOUR, BEHAVIOUR_OBJECT, FieldSpec, field_specs

DIALECT = "https://json-schema.org/draft/2020-12/schema"
FILE_NAMES = {"estimate": "estimate-request.schema.json", "plan": "plan-request.schema.json"}


def _number_bounds(spec: FieldSpec) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if spec.minimum is not None:
        out["exclusiveMinimum" if spec.exclusive_minimum else "minimum"] = spec.minimum
    if spec.maximum is not None:
        out["exclusiveMaximum" if spec.exclusive_maximum else "maximum"] = spec.maximum
    return out


def _any_case(text: str) -> str:
    """``Qwen/Qwen3-8B`` as a pattern that matches it in any ASCII letter case
    (``[Qq][Ww][Ee][Nn]/...``): ECMA-262 patterns, which JSON Schema uses, have no flag for it."""
    out = []
    for char in text:
        if char.isascii() and char.isalpha():
            out.append(f"[{char.upper()}{char.lower()}]")
        elif char.isascii() and (char.isalnum() or char in "/_-"):
            out.append(char)
        else:
            out.append("\\" + char if char in ".\\^$|?*+()[]{}" else char)
    return "".join(out)


def hf_id_pattern() -> str:
    """Exactly the strings :func:`calc.presets.resolve_preset_id` reads as a Hugging Face id:
    an id of the alias table in any letter case, with spaces around it, or as the address
    ``https://huggingface.co/<id>`` (slashes around the id allowed there)."""
    from .presets import HF_URL_PREFIX, alias_table

    ids = "|".join(_any_case(hf_id) for hf_id in sorted(alias_table()))
    prefix = _any_case(HF_URL_PREFIX)
    # trailing slashes only after the address (the lookahead), so the id list is written once
    return f"^(?=\\s*{prefix}|[\\s\\S]*[^/\\s]\\s*$)\\s*(?:{prefix}/*)?(?:{ids})/*\\s*$"


def model_schema() -> dict[str, Any]:
    """``model``: a preset id, a Hugging Face id calc knows, or ``{"hf_config": {...}}``."""
    from .presets import presets_listing

    listing = presets_listing()
    hf_ids = [hf_id for p in listing for hf_id in (p["hf_repo"], *p["aliases"])]
    return {
        "anyOf": [
            {
                "title": "Preset id",
                "description": "One of calc's model presets (`python -m calc presets`).",
                "type": "string",
                "enum": [p["id"] for p in listing],
            },
            {
                "title": "Hugging Face id",
                "description": (
                    "A Hugging Face model id in calc's alias table (each preset's hf_repo and "
                    "aliases, listed in examples), in any letter case, optionally as the address "
                    "https://huggingface.co/<id>. Nothing is fetched from the Hub: an id calc "
                    "does not know is refused (unknown_preset); pass its config.json instead."
                ),
                "type": "string",
                "pattern": hf_id_pattern(),
                "examples": hf_ids,
            },
            {
                "title": "config.json",
                "description": "A Hugging Face config.json, as an object.",
                "type": "object",
                "required": ["hf_config"],
                "additionalProperties": False,
                "properties": {"hf_config": {"type": "object"}, "name": {"type": "string"}},
            },
        ]
    }


def property_schema(spec: FieldSpec) -> dict[str, Any]:
    """The schema of one key (without description and default)."""
    if spec.kind == "bool":
        return {"type": "boolean"}
    if spec.kind == "enum":
        return {"type": "string", "enum": list(spec.choices or ())}
    if spec.kind == "int":
        return {"type": ["integer", "null"] if spec.optional else "integer", **_number_bounds(spec)}
    if spec.kind in ("number", "fraction"):
        schema = {"type": ["number", "null"] if spec.optional else "number", **_number_bounds(spec)}
        return schema
    if spec.kind == "model":
        return model_schema()
    if spec.kind == "gpu":
        from .gpus import gpus_listing

        return {"type": "string", "enum": [g["id"] for g in gpus_listing()["gpus"]]}
    if spec.kind == "targets":
        # "all-linear", "q_proj,v_proj" (the URL form) or a list of names
        return {
            "anyOf": [
                {"type": "string", "pattern": "[^,\\s]"},
                {"type": "array", "items": {"type": "string"}, "minItems": 1},
            ]
        }
    if spec.kind == "stats":
        # an object of whole numbers, its text form "mean:900,p90:2000" (the URL's), or null
        part = {"type": "integer", **_number_bounds(spec)}
        return {
            "type": ["object", "string", "null"],
            "additionalProperties": False,
            "properties": {name: part for name in spec.parts or ()},
        }
    return {}  # a kind this module does not know yet: any value, the parser decides


def request_schema(command: str) -> dict[str, Any]:
    """The JSON Schema of a ``command`` (``"estimate"`` or ``"plan"``) request."""
    if command not in FILE_NAMES:
        raise ValueError(command)
    from . import __version__
    from .catalogue import catalogue

    words = catalogue("en")
    properties: dict[str, Any] = {}
    behaviours: dict[str, Any] = {}  # filled as the keys come
    required = []
    for spec in field_specs(command):
        description = words.get(spec.help_id, None, "long") or words.get(
            spec.label_id, spec.key, "long"
        )
        prop = {"description": description, **property_schema(spec)}
        unit = words.get(spec.unit_id, None, "long")
        if unit:
            prop["description"] += f" Unit: {unit}."
        if spec.required:
            required.append(spec.key)
        else:  # a key without a default is required or optional (null: calc picks)
            assert spec.default is not None or spec.optional, spec.key
            prop["default"] = spec.default
        if spec.group == BEHAVIOUR:  # its place is the behaviour object; on top it still works
            behaviours[spec.key] = prop
            prop = {**prop, "deprecated": True}
        properties[spec.key] = prop
        if spec.key == "framework":  # the object the framework's profile fills, next to it
            properties[BEHAVIOUR_OBJECT] = {
                "description": words.message("help.behaviour", "long"),
                "type": "object",
                "additionalProperties": False,
                "properties": behaviours,
            }
    return {
        "$schema": DIALECT,
        "$id": FILE_NAMES[command],
        "title": f"calc {command} request",
        "description": (
            f"Request of `python -m calc {command}` and of calc.{command}() "
            f"(calc {__version__}). Generated from the request's field table."
        ),
        "type": "object",
        "required": required,
        "additionalProperties": False,
        "properties": properties,
    }


def schema_files() -> dict[str, str]:
    """File name -> JSON text, as published with the site."""
    import json

    return {
        FILE_NAMES[c]: json.dumps(request_schema(c), indent=2, ensure_ascii=False) + "\n"
        for c in FILE_NAMES
    }


__all__ = [
    "FILE_NAMES",
    "hf_id_pattern",
    "model_schema",
    "property_schema",
    "request_schema",
    "schema_files",
]
