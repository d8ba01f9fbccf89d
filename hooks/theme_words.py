"""MkDocs hook: the theme templates of ``overrides/`` take their words from the message
catalogue (``calc/data/messages``), as the pages do:
``{{ message("site.not_found_title", config.theme.language) }}``. An unknown id stops the
build (``KeyError``)."""

from __future__ import annotations


def message(key: str, lang: str) -> str:
    from calc.catalogue import catalogue

    return catalogue(lang).message(key)


def on_env(env, config, files):
    env.globals["message"] = message
    return env
