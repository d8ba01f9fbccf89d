"""The CLI's words in Spanish and English, from ``calc/data/messages/{es,en}.json``.

``site`` holds the calculator page's own translations (copied by
``tools/sync_cli_messages.py``), so the CLI names fields, options and warnings as the site
does; ``cli``, ``help`` and ``unit`` are the CLI's own. A missing entry falls back to the
code itself: a key another part of calc adds later is shown, untranslated, never dropped.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

LANGS = ("es", "en")
# os.path, not pathlib: one import less at every start of the CLI
_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "messages")


def default_lang(environ: Mapping[str, str] | None = None) -> str:
    """Spanish when the locale is Spanish (``LC_ALL``, ``LC_MESSAGES``, ``LANG``), else English."""
    environ = os.environ if environ is None else environ
    for name in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = environ.get(name)
        if value:
            return "es" if value.lower().startswith("es") else "en"
    return "en"


class Messages:
    """Lookups by message id (``cli``), by field (``help``, ``unit``, ``site.labels``) and by
    (section, code) for the site's translated codes."""

    def __init__(self, lang: str) -> None:
        if lang not in LANGS:
            raise ValueError(lang)
        self.lang = lang
        with open(os.path.join(_DIR, f"{lang}.json"), encoding="utf-8") as handle:
            self._data = json.load(handle)

    def text(self, key: str, **values: object) -> str:
        template = self._data["cli"].get(key, key)
        text: str = template.format(**values) if values else template
        return text

    def site(self, section: str, code: str) -> str:
        text: str = self._data.get("site", {}).get(section, {}).get(code, code)
        return text

    def label(self, field: str) -> str:
        return self.site("labels", field)

    def help(self, field: str) -> str | None:
        text: str | None = self._data["help"].get(field)
        return text

    def unit(self, field: str) -> str | None:
        text: str | None = self._data["unit"].get(field)
        return text

    def has(self, section: str, code: str) -> bool:
        return code in self._data.get(section, {})

    def methodology_url(self) -> str:
        return "/methodology/" if self.lang == "es" else "/en/methodology/"
