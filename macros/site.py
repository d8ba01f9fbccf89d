"""Helpers every macros module shares: the page language and site paths."""

from __future__ import annotations

#: Languages of the site, default first (mirrors ``plugins.i18n`` in mkdocs.yml).
LANGUAGES = ("es", "en")
DEFAULT_LANGUAGE = LANGUAGES[0]


def page_language(env) -> str:
    """Language of the build in progress: ``"es"`` or ``"en"``.

    mkdocs-static-i18n runs one build per language and sets the theme
    language in its ``on_config``, which runs AFTER mkdocs-macros has called
    ``define_env`` for that build. So call this inside a macro, while a page
    renders; read in ``define_env`` it returns the previous build's language.
    """
    language = env.conf["theme"]["language"]
    if language not in LANGUAGES:
        raise ValueError(f"unsupported page language {language!r}")
    return language


def pyodide_path(env) -> str:
    """Site-relative directory of the bundled Pyodide, e.g. ``assets/pyodide/314.0.7/``.

    Set by ``hooks/pyodide_assets.py``; make it relative to the page before
    using it in a URL (the site may live under a sub-path).
    """
    return env.conf["extra"]["pyodide"]["path"]
