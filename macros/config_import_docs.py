"""Methodology tables for the config import (``calc.config_import``): which version of
each tool its keys and defaults were read from, and the parsing limits, both read from the
code when the page is built so the page cannot drift from it."""

from __future__ import annotations

import html

from macros.site import page_language

# format -> (module, what the file holds), in both languages
_FORMATS = {
    "axolotl": ("calc.config_import.axolotl",
                {"es": "YAML de entrenamiento completo", "en": "whole training YAML"}),
    "trl": ("calc.config_import.trl",
            {"es": "TrainingArguments / SFTConfig + ModelConfig, LoraConfig, BitsAndBytesConfig (JSON o YAML)",
             "en": "TrainingArguments / SFTConfig + ModelConfig, LoraConfig, BitsAndBytesConfig (JSON or YAML)"}),
    "llamafactory": ("calc.config_import.llamafactory",
                     {"es": "YAML de llamafactory-cli train", "en": "llamafactory-cli train YAML"}),
    "torchtune": ("calc.config_import.torchtune", {"es": "receta YAML", "en": "recipe YAML"}),
    "deepspeed": ("calc.config_import.deepspeed",
                  {"es": "JSON de DeepSpeed: fragmentación, offload, lotes, GPU",
                   "en": "DeepSpeed JSON: sharding, offload, batches, GPUs"}),
    "accelerate": ("calc.config_import.accelerate",
                   {"es": "config de accelerate: GPU, FSDP/DeepSpeed, precisión",
                    "en": "accelerate config: GPUs, FSDP/DeepSpeed, precision"}),
}
_HEAD = {"es": ("Formato", "Claves y valores por defecto leídos de", "Contenido"),
         "en": ("Format", "Keys and defaults read from", "What it holds")}
_LIMITS = {
    "MAX_BYTES": {"es": "tamaño máximo del archivo, en bytes", "en": "largest file, in bytes"},
    "MAX_DEPTH": {"es": "niveles de anidamiento", "en": "nesting levels"},
    "MAX_NODES": {"es": "nodos tras expandir los alias YAML", "en": "nodes after YAML aliases are expanded"},
}


def formats_table(lang: str) -> str:
    import importlib

    head = _HEAD[lang]
    rows = [f"| {head[0]} | {head[1]} | {head[2]} |", "|---|---|---|"]
    for fmt, (module, what) in _FORMATS.items():
        tool = importlib.import_module(module).TOOL
        rows.append(f"| `{fmt}` | {html.escape(tool)} | {html.escape(what[lang])} |")
    return "\n".join(rows)


def limits_table(lang: str) -> str:
    from calc.config_import import loading

    head = ("Límite", "Valor", "Qué acota") if lang == "es" else ("Limit", "Value", "What it bounds")
    rows = [f"| {head[0]} | {head[1]} | {head[2]} |", "|---|---|---|"]
    for name, text in _LIMITS.items():
        value = getattr(loading, name)
        shown = f"{value:,}".replace(",", "\u202f" if lang == "es" else ",")
        rows.append(f"| `calc.config_import.loading.{name}` | {shown} | {text[lang]} |")
    return "\n".join(rows)


def register(env) -> None:
    @env.macro
    def config_import_formats() -> str:
        """The formats the config import reads, with the tool version of each."""
        return formats_table(page_language(env))

    @env.macro
    def config_import_limits() -> str:
        """The bounds the YAML/JSON reader enforces."""
        return limits_table(page_language(env))
