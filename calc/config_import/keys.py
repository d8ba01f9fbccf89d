"""Importers as tables: each config key of a format -> how its value is read (a reader over
the shared converters of :mod:`calc.config_import.common`), the request fields it can set,
and a note for the reader of the table.

A format's table is a plain ``dict[str, Key]``; :func:`read_keys` walks a file's keys in
their order and hands each to its entry (a key the table lacks is reported ``unknown``).
A reader is ``read(rep, path, value, ctx)``: it reports the key (``used``, ``invalid``,
``ignored``, ``unknown``) and sets what it decides; ``ctx`` is the importer's state for
choices that depend on other keys (accelerate's ``distributed_type`` decides whether its
``fsdp_config`` counts).

A nested section (DeepSpeed's ``zero_optimization``, an FSDP config, bitsandbytes' and peft's
configs, torchtune's components) is a table too, read the same way with dotted paths; the
entry that holds it names it in :attr:`Key.table` (:func:`section` does so itself).
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
    table: dict[str, Key] | None = None  # a nested section's own keys (:func:`section`)


def read_keys(
    rep: Report,
    data: JsonObject,
    table: dict[str, Key],
    ctx: JsonObject,
    prefix: str = "",
    rest: Key | None = None,
) -> None:
    """Every key of ``data`` through its entry of ``table``, in the file's order; a key the
    table lacks through ``rest``, or reported ``unknown``."""
    for key, value in data.items():
        path = prefix + str(key)
        spec = table.get(str(key), rest)
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


def mapped(
    field: str,
    names: dict[str, object],
    not_modelled: tuple[object, ...] = (),
    normalise: Callable[[object], object] | None = None,
    note: str | None = None,
) -> Key:
    """One of the tool's names (after ``normalise``), each setting ``field`` to its value;
    a name the tool has but calc does not model is ``unknown``, any other ``invalid``."""

    def read(rep: Report, path: str, value: object, ctx: JsonObject) -> None:
        name = common.choice(
            rep, path, normalise(value) if normalise else value, tuple(names), field, not_modelled
        )
        if name is not None:
            rep.use(path, field, names[str(name)])

    return Key(read, (field,), note)


def boolean(
    field: str, values: tuple[object, object] | None = None, note: str | None = None
) -> Key:
    """A boolean as the tool reads one (:func:`common.flag`), setting ``field`` to it, or to
    ``values`` = (value when false, value when true)."""

    def read(rep: Report, path: str, value: object, ctx: JsonObject) -> None:
        flag = common.flag(rep, path, value, field)
        rep.use(path, field, flag if values is None or flag is None else values[flag is True])

    return Key(read, (field,), note)


def not_modelled(note: str = "not_modelled") -> Key:
    """Understood, but what it changes is not in the model: ``unknown`` with the note."""
    return Key(lambda rep, path, value, ctx: rep.unknown(path, note), note=note)


def section(
    table: dict[str, Key],
    fields: tuple[str, ...] = (),
    otherwise: str | Key = "unknown",
    rest: Key | None = None,
    note: str | None = None,
) -> Key:
    """A nested mapping read through its own table (keys reported by dotted path, those it
    lacks through ``rest``); any other value is ``unknown``, ``ignored`` with
    ``otherwise="ignored"``, or read by ``otherwise`` when it is a :class:`Key`."""

    def read(rep: Report, path: str, value: object, ctx: JsonObject) -> None:
        if isinstance(value, dict):
            read_keys(rep, value, table, ctx, path + ".", rest)
        elif isinstance(otherwise, Key):
            otherwise.read(rep, path, value, ctx)
        elif otherwise == "ignored":
            rep.ignore(path)
        else:
            rep.unknown(path)

    return Key(read, fields, note, table)


def state(name: str, value: object, key: Key) -> Key:
    """``key``, after noting ``ctx[name] = value`` (torchtune: an ``fsdp_*`` key makes the
    recipe distributed)."""

    def read(rep: Report, path: str, item: object, ctx: JsonObject) -> None:
        ctx[name] = value
        key.read(rep, path, item, ctx)

    return Key(read, key.fields, key.note)


def call(reader: Callable[[Report, str, object], None], *fields: str) -> Key:
    """A shared converter ``reader(rep, key, value)`` (``common.set_optimizer_hf``...) as an entry."""
    return Key(lambda rep, path, value, ctx: reader(rep, path, value), fields)


def dict_only(
    read: Callable[[Report, str, JsonObject, JsonObject], None],
    *fields: str,
    table: dict[str, Key] | None = None,
) -> Key:
    """``read`` for a mapping (``table``: the mapping's own keys, when ``read`` walks a table);
    any other value is ``unknown``."""

    def entry(rep: Report, path: str, value: object, ctx: JsonObject) -> None:
        if isinstance(value, dict):
            read(rep, path, value, ctx)
        else:
            rep.unknown(path)

    return Key(entry, fields, table=table)
