"""Flags for every request key, and their text turned into request values as the URL does.

The calculator page reads ``?seq_len=4096&gradient_checkpointing=false&lora_targets=q_proj,v_proj``;
the CLI reads ``--seq-len 4096 --no-gradient-checkpointing --lora-targets q_proj,v_proj``. Text
is converted the way the page converts it (numbers by the same pattern, whole numbers as
integers, lists split on commas, a model that starts with ``{`` read as JSON); anything else is
passed on as text, so calc itself answers with its coded error (``not_integer``,
``unknown_value``...), the same one a JSON request gets.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable

from ..errors import InputError
from ..fields import FieldSpec
from ..jsontypes import JsonObject
from ..numfmt import NUMBER_RE as _NUMBER_RE  # the calculator form's pattern too

_MAX_EXACT = 2**53  # a JavaScript number is exact up to here, and so is the page's request
_NULL_WORDS = ("", "null", "none", "default")


def parse_number(text: str) -> object:
    """A number as the page reads it (``_`` and spaces ignored); integral values become ``int``
    (the page's ``Number("2.0")`` is sent as ``2``). Other text is returned as it is."""
    t = re.sub(r"[\s\u202f\u00a0_]", "", text)
    if not _NUMBER_RE.fullmatch(t):
        return text
    if re.fullmatch(r"[+-]?\d+", t):
        return int(t)
    value = float(t)
    if value.is_integer() and abs(value) <= _MAX_EXACT:
        return int(value)
    return value


def flag_value(spec: FieldSpec, text: object) -> object:
    """The request value of one flag's text."""
    if not isinstance(text, str):  # booleans come from --x / --no-x already
        return text
    if spec.optional and text.strip().lower() in _NULL_WORDS:
        return None
    if spec.numeric:
        return parse_number(text)
    if spec.kind == "targets":
        if text.strip() == "all-linear":
            return "all-linear"
        return [part.strip() for part in text.split(",") if part.strip()]
    if spec.kind == "model":
        if text.strip().startswith("{"):
            try:
                return json.loads(text)
            except ValueError:
                raise InputError("config_json_invalid", "model", text) from None
        return text.strip()
    if spec.kind in ("enum", "gpu"):
        return text.strip()
    if spec.kind == "stats":  # "mean:900,p90:2000" as the URL writes it (calc reads it), or JSON
        if text.strip().startswith("{"):
            return _any_value(text)
        return text.strip()
    return _any_value(text)


def _any_value(text: str) -> object:
    """A key of a kind not named above: a JSON literal if the text is one, else text."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def add_field_flags(
    group: argparse._ArgumentGroup, specs: list[FieldSpec], help_for: Callable[[FieldSpec], str]
) -> None:
    """One option per key: ``--x VALUE``, or ``--x/--no-x`` for booleans. Unset flags stay
    ``None`` so that only what the user typed overrides ``--request``."""
    for spec in specs:
        if spec.kind == "bool":
            group.add_argument(
                spec.flag,
                dest=spec.key,
                action=argparse.BooleanOptionalAction,
                default=None,
                help=help_for(spec),
            )
        else:
            group.add_argument(
                spec.flag, dest=spec.key, default=None, metavar=_metavar(spec), help=help_for(spec)
            )


def _metavar(spec: FieldSpec) -> str:
    if spec.kind == "enum" and spec.choices:
        return "{" + ",".join(spec.choices) + "}"
    if spec.kind == "stats" and spec.parts:
        return ",".join(f"{part}:N" for part in spec.parts)
    return {
        "int": "N",
        "number": "X",
        "fraction": "P",
        "model": "ID|JSON",
        "gpu": "ID",
        "targets": "LIST",
    }.get(spec.kind, "VALUE")


def flag_overrides(args: argparse.Namespace, specs: list[FieldSpec]) -> JsonObject:
    """The request keys given as flags, converted."""
    out = {}
    for spec in specs:
        text = getattr(args, spec.key, None)
        if text is not None:
            out[spec.key] = flag_value(spec, text)
    return out
