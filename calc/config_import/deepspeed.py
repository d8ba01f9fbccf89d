"""A DeepSpeed config JSON on its own -> the sharding/offload part of a request
(:func:`calc.config_import.sections.deepspeed_section`). ``auto`` values are the Trainer's
and stay out; the rest of the request keeps calc's defaults."""

from __future__ import annotations

from ..jsontypes import JsonObject
from . import common, sections
from .report import Report

TOOL = "DeepSpeed 0.17 config"


def import_deepspeed(
    data: JsonObject, model: object = None, read_file: common.ReadFile | None = None
) -> JsonObject:
    rep = Report("deepspeed", TOOL)
    if model is not None:
        rep.request["model"] = model
    sections.deepspeed_section(rep, data)
    if "zero_optimization" not in data:
        rep.default("sharding", "ddp", TOOL + ": no zero_optimization = ZeRO stage 0")
    rep.default("cpu_offload", "none", TOOL)
    return rep.result()
