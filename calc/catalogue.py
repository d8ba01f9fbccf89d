"""The message catalogue: every word the guides, the calculator page and the CLI show, one
JSON file per language, ``calc/data/messages/{es,en}.json``.

Each file has three parts:

- ``options``: ``{field: {code: text}}``, the name of each value of a closed set, keyed by
  the field it belongs to (``cpu_offload: none`` and ``sharding: none`` are different
  words); request fields use their request key, other sets a name of their own (``phase``,
  ``metric``, ``group``...);
- ``messages``: ``{id: text}`` under stable ids, ``namespace.name`` (``ui.*`` the
  calculator page, ``label.*`` names of request and response keys, ``error.*`` and
  ``warning.*`` calc's codes, ``cli.*`` the command line, ``col.*`` / ``caption.*`` the
  guides' tables, ...).
- ``constants``: ``{id: {"text": ..., "source": ...}}``, what the methodology page says about
  each of calc's constants (``calc.<module>.<NAME>``) and each number a request defaults to
  (``default:<field>``), and where the figure comes from; a source that is a ``source.*``
  message id is that message (a source many figures share).

A text is a string, or ``{"short": ..., "long": ...}`` where two forms are in use: the
short one in tables and lists, the long one where there is room for it (the calculator's
options). ``tests/calc/test_catalogue.py`` fails on an id missing in one language, on an id
nothing reads, on a value of a closed request field without its name, and on a constant of
calc without its description (or a description of a constant calc no longer has).

:class:`Catalogue` is the one way to look words up; the CLI (:class:`calc.cli.messages.Messages`)
and the guides (``macros/labels.py``) are thin adapters over it with the forms and fallbacks
their callers need.

Standard library only; read by ``macros/`` at build time and by ``calc.cli``. The browser
never reads it: the calculator page embeds the part it needs (``macros/calculator.py``).
"""

from __future__ import annotations

import json
import os
from typing import Any, overload

from .languages import LANGS

__all__ = ["FORMS", "LANGS", "Catalogue", "catalogue", "load", "pick"]
FORMS = ("short", "long")
# os.path, not pathlib: one import less at every start of the CLI
DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "messages")

# a text: one string, or {"short": ..., "long": ...}
Entry = Any
_LOADED: dict[str, dict[str, dict[str, Any]]] = {}


def load(lang: str) -> dict[str, dict[str, Any]]:
    """The raw catalogue of ``lang`` (``{"options", "messages", "constants"}``), read once."""
    if lang not in LANGS:
        raise ValueError(f"no catalogue for language {lang!r}")
    if lang not in _LOADED:
        with open(os.path.join(DIR, f"{lang}.json"), encoding="utf-8") as handle:
            _LOADED[lang] = json.load(handle)
    return _LOADED[lang]


def pick(entry: object, form: str = "short") -> str:
    """One form of an entry: a string is both forms."""
    if isinstance(entry, str):
        return entry
    if form not in FORMS or not isinstance(entry, dict) or not isinstance(entry.get(form), str):
        raise ValueError(f"bad catalogue entry or form: {entry!r}, {form!r}")
    text: str = entry[form]
    return text


class Catalogue:
    """Lookups in one language. ``message`` and ``option`` raise ``KeyError`` on an unknown
    id: the build must stop on a missing word; ``get`` is for callers with a fallback."""

    def __init__(self, lang: str) -> None:
        self.lang = lang
        data = load(lang)
        self._messages: dict[str, Entry] = data["messages"]
        self._options: dict[str, dict[str, Entry]] = data["options"]
        self._constants: dict[str, dict[str, str]] = data["constants"]

    def message(self, key: str, form: str = "short") -> str:
        try:
            return pick(self._messages[key], form)
        except KeyError:
            raise KeyError(f"no {self.lang!r} message {key!r} in calc/data/messages") from None

    @overload
    def get(self, key: str, default: str, form: str = "short") -> str: ...

    @overload
    def get(self, key: str, default: None = None, form: str = "short") -> str | None: ...

    def get(self, key: str, default: str | None = None, form: str = "short") -> str | None:
        entry = self._messages.get(key)
        return default if entry is None else pick(entry, form)

    def has(self, key: str) -> bool:
        return key in self._messages

    def option(self, field: str, code: str, form: str = "short") -> str:
        try:
            return pick(self._options[field][code], form)
        except KeyError:
            raise KeyError(
                f"no {self.lang!r} name for {field}={code!r} in calc/data/messages"
            ) from None

    def get_option(self, field: str, code: str, form: str = "short") -> str | None:
        entry = self._options.get(field, {}).get(code)
        return None if entry is None else pick(entry, form)

    def options(self, field: str, form: str = "short") -> dict[str, str]:
        return {code: pick(entry, form) for code, entry in self._options.get(field, {}).items()}

    def constant(self, key: str) -> tuple[str, str]:
        """What constant ``key`` means and where its figure comes from (``source.*`` ids read)."""
        try:
            entry = self._constants[key]
        except KeyError:
            raise KeyError(
                f"no {self.lang!r} description of {key!r} in calc/data/messages"
            ) from None
        source = entry["source"]
        if source.startswith("source.") and source in self._messages:
            source = self.message(source)
        return entry["text"], source

    def constants(self) -> list[str]:
        """Every described constant's id."""
        return list(self._constants)

    def namespace(self, prefix: str, form: str = "short") -> dict[str, str]:
        """Every message ``prefix.name`` as ``{name: text}``."""
        start = prefix + "."
        return {
            key[len(start) :]: pick(entry, form)
            for key, entry in self._messages.items()
            if key.startswith(start)
        }


_CATALOGUES: dict[str, Catalogue] = {}


def catalogue(lang: str) -> Catalogue:
    if lang not in _CATALOGUES:
        _CATALOGUES[lang] = Catalogue(lang)
    return _CATALOGUES[lang]
