"""Helpers every macros module shares: the page language, and declaring macros."""

from __future__ import annotations

from calc.languages import LANGS


def page_language(env) -> str:
    """Language of the build in progress: ``"es"`` or ``"en"``.

    mkdocs-static-i18n runs one build per language and sets the theme
    language in its ``on_config``, which runs AFTER mkdocs-macros has called
    ``define_env`` for that build. So call this inside a macro, while a page
    renders; read in ``define_env`` it returns the previous build's language.
    """
    language = env.conf["theme"]["language"]
    if language not in LANGS:
        raise ValueError(f"unsupported page language {language!r}")
    return language


def bind_all(env, names, namespace: dict) -> None:
    """Declare each function ``names`` of ``namespace`` as a macro of ``env`` (mkdocs-macros),
    with the page language as its first argument."""
    import functools

    def bind(fn):
        @functools.wraps(fn)
        def macro(*args, **kwargs):
            return fn(page_language(env), *args, **kwargs)

        return macro

    for name in names:
        env.macro(bind(namespace[name]), name)
