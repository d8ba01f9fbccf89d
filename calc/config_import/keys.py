"""Importers as tables: each config key of a format -> how its value is read (a reader over
the shared converters of :mod:`calc.config_import.common`), the request fields it can set,
and a note for the reader of the table.

A format's table is a plain ``dict[str, Key]``; :func:`read_keys` walks a file's keys in
their order and hands each to its entry (a key the table lacks is reported ``unknown``).
A reader is ``read(rep, path, value, ctx)``: it reports the key (``used``, ``invalid``,
``ignored``, ``unknown``) and sets what it decides; ``ctx`` is the importer's state for
choices that depend on other keys (accelerate's ``distributed_type`` decides whether its
``fsdp_config`` counts).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..jsontypes import JsonObject
from . import common
from .report import Report

Reader = Callable[[Report, str, object, JsonObject], None]


@dataclass(frozen=True)
class Key:
    read: Reader
    fields: tuple[str, ...] = ()  # the request fields the key can set
    note: str | None = None  # why it is read so (a version, a source)


def read_keys(rep: Report, data: JsonObject, table: dict[str, Key], ctx: JsonObject, prefix: str = "") -> None:
    """Every key of ``data`` through its entry of ``table``, in the file's order."""
    for key, value in data.items():
        path = prefix + str(key)
        spec = table.get(str(key))
        if spec is None:
            rep.unknown(path)
        else:
            spec.read(rep, path, value, ctx)


def ignored(note: str | None = None) -> Key:
    """Understood; changes neither memory nor time."""
    return Key(lambda rep, path, value, ctx: rep.ignore(path, note), note=note)


def whole(field: str) -> Key:
    """A whole number within the request field's range."""
    def read(rep: Report, path: str, value: object, ctx: JsonObject) -> None:
        common.set_int(rep, path, field, value)
    return Key(read, (field,))


def mapped(field: str, names: dict[str, object], not_modelled: tuple[object, ...] = (),
           normalise: Callable[[object], object] | None = None, note: str | None = None) -> Key:
    """One of the tool's names (after ``normalise``), each setting ``field`` to its value;
    a name the tool has but calc does not model is ``unknown``, any other ``invalid``."""
    def read(rep: Report, path: str, value: object, ctx: JsonObject) -> None:
        name = common.choice(rep, path, normalise(value) if normalise else value, tuple(names), field, not_modelled)
        if name is not None:
            rep.use(path, field, names[str(name)])
    return Key(read, (field,), note)
