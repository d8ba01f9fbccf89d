"""The guides' words: a thin reader of the message catalogue (``calc/catalogue.py``, one
``calc/data/messages/<lang>.json`` per language).

``calc`` speaks in codes (methods, optimizers, components, warnings); the catalogue is where
they become Spanish or English, each value under the field it belongs to. A missing entry is
an error, so a new code in calc stops the build until it is translated there.
"""

from __future__ import annotations

from calc.catalogue import catalogue
from calc.numfmt import format_number


def text(key: str, lang: str, form: str = "short") -> str:
    """The message ``key`` in ``lang``; ``"key|n"`` fills ``n`` into it (a number written in
    ``lang``, or a name as it is)."""
    key, _, arg = key.partition("|")
    label = catalogue(lang).message(key, form)
    if not arg:
        return label
    return label.format(n=format_number(int(arg), 0, lang) if arg.isdigit() else arg)


def option(field: str, code: str, lang: str, form: str = "short") -> str:
    """The name of value ``code`` of ``field`` (a request key, or a set such as ``phase``)."""
    return catalogue(lang).option(field, str(code), form)


def yes_no(value: bool, lang: str) -> str:
    return text("ui.yes" if value else "ui.no", lang)


def reason(code_: str, lang: str) -> str:
    """Why a validation row is not covered; ``calc_error:<code>`` keeps calc's error code."""
    name, _, detail = code_.partition(":")
    text_ = option("reason", name, lang)
    return f"{text_} ({detail})" if detail else text_


def value(field: str, val: object, lang: str) -> str:
    """A request value as the setup lists show it."""
    if isinstance(val, bool):
        return yes_no(val, lang)
    if isinstance(val, int):
        return format_number(val, 0, lang)
    if isinstance(val, float):
        return format_number(val, 0 if val.is_integer() else 2, lang)
    if isinstance(val, list):
        return ", ".join(f"`{v}`" for v in val)
    return option(field, str(val), lang)


def method_label(raw: str, lang: str) -> str:
    """A method as a validation source wrote it (``full``, ``LoRA``, ``QLoRA (4-bit)``):
    the method's name in ``lang``, with the source's remark translated."""
    from .methodology_text import translate_label

    head = raw.split(" ", 1)[0]
    return option("method", head.lower(), lang) + translate_label(raw, lang)[len(head):]


def variant(request: dict, lang: str) -> str:
    """Short name of a weight-storage variant (method + double quantization)."""
    name = option("method", request.get("method", "lora"), lang)
    if request.get("method") == "qlora":
        dq = request.get("qlora_double_quant", True)
        name += " " + text("variant.double_quant." + ("yes" if dq else "no"), lang)
    return name
