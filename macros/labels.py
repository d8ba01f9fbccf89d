"""The guides' words: a thin reader of the message catalogue (``calc/catalogue.py``, one
``calc/data/messages/<lang>.json`` per language).

``calc`` speaks in codes (methods, optimizers, components, warnings); the catalogue is where
they become Spanish or English, each value under the field it belongs to. A missing entry is
an error, so a new code in calc stops the build until it is translated there.
"""

from __future__ import annotations

import re

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
    head = raw.split(" ", 1)[0]
    return option("method", head.lower(), lang) + translate_label(raw, lang)[len(head) :]


def variant(request: dict, lang: str) -> str:
    """Short name of a weight-storage variant (method + double quantization)."""
    name = option("method", request.get("method", "lora"), lang)
    if request.get("method") == "qlora":
        dq = request.get("qlora_double_quant", True)
        name += " " + text("variant.double_quant." + ("yes" if dq else "no"), lang)
    return name


def translate_note(text: str, lang: str) -> str:
    """A validation note or reason in ``lang``: ``"; "``-separated note ids, each ``id`` or
    ``id:argument``, worded by the catalogue's ``validation_note.<id>`` (the CSVs hold ids, so
    a wording is corrected in the catalogue alone)."""
    if not text:
        return ""
    parts = []
    for part in text.split("; "):
        key, _, arg = part.partition(":")
        words = catalogue(lang).message("validation_note." + key)
        parts.append(words.format(arg=arg) if arg else words)
    return "; ".join(parts)


def translate_label(text: str, lang: str) -> str:
    """A source's label of a card, model or method, its bracketed remark in ``lang``.

    Validation rows name their card, method and model as the source labelled them, often
    with a remark in brackets ("A100 (40/80GB not stated)"). The name is kept (or worded by
    the catalogue's ``label_name`` where it has words of its own); the remark is worded by
    ``label_remark``. A bracket that is a plain identifier (an instance type, a system name)
    is kept as it is; any other unknown remark stops the build."""
    cat = catalogue(lang)
    match = re.fullmatch(r"(.*?)\s*\((.*)\)", text)
    name, remark = (match.group(1), match.group(2)) if match else (text, None)
    name = cat.get_option("label_name", name) or name
    if remark is None:
        return name
    worded = cat.get_option("label_remark", remark)
    if worded is not None:
        remark = worded
    elif not re.fullmatch(r"[\w.-]+", remark):
        raise KeyError(f"no {lang!r} translation for the label remark {remark!r}")
    return f"{name} ({remark})"
