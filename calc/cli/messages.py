"""The CLI's words in Spanish and English, read from the message catalogue
(``calc.catalogue``, ``calc/data/messages/{es,en}.json``), the same one the site reads, so the
CLI names fields, options, phases, warnings and errors as the calculator page does.

``cli.*`` messages are the CLI's own; ``help.<field>`` and ``unit_of.<field>`` explain a
request key in ``--help``. A missing entry falls back to the code itself: a key another part
of calc adds later is shown, untranslated, never dropped (the catalogue's tests catch it).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from ..catalogue import LANGS, catalogue

__all__ = ["LANGS", "Messages", "default_lang"]


def default_lang(environ: Mapping[str, str] | None = None) -> str:
    """Spanish when the locale is Spanish (``LC_ALL``, ``LC_MESSAGES``, ``LANG``), else English."""
    env: Mapping[str, str] = os.environ if environ is None else environ
    for name in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = env.get(name)
        if value:
            return "es" if value.lower().startswith("es") else "en"
    return "en"


class Messages:
    """The CLI's adapter over :class:`calc.catalogue.Catalogue`: lookups by message id
    (``text``: the CLI's own, ``message``: any), by field (``label``, ``help``, ``unit``) and by
    (field, code) (``option``), in the long form where there are two (as the calculator's form
    shows them) and with the code as fallback."""

    def __init__(self, lang: str) -> None:
        if lang not in LANGS:
            raise ValueError(lang)
        self.lang = lang
        self._cat = catalogue(lang)

    def text(self, key: str, **values: object) -> str:
        template = self._cat.get("cli." + key, key, "long")
        return template.format(**values) if values else template

    def message(self, key: str, default: str) -> str:
        return self._cat.get(key, default, "long")

    def option(self, field: str, code: str) -> str:
        name = self._cat.get_option(field, code, "long")
        return code if name is None else name

    def short_option(self, field: str, code: str) -> str:
        """The short form of a value's name (``Hugging Face Trainer``), as tables show it."""
        name = self._cat.get_option(field, code, "short")
        return code if name is None else name

    def label(self, field: str) -> str:
        return self.message("label." + field, field)

    def help(self, field: str) -> str | None:
        return self._cat.get("help." + field)

    def unit(self, field: str) -> str | None:
        return self._cat.get("unit_of." + field)

    def methodology_url(self) -> str:
        return "/methodology/" if self.lang == "es" else "/en/methodology/"
