"""Site glue for mkdocs-macros: thin functions that call ``calc`` and render.

The plugin loads ``macros/main.py`` (``module_name: macros/main`` in
``mkdocs.yml``); its ``define_env`` registers every module of this package.
A module here exposes ``register(env)`` and keeps the numbers in ``calc``.
"""
