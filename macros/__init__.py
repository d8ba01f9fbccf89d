"""Site glue for mkdocs-macros: thin functions that call ``calc`` and render.

The plugin loads ``macros/main.py`` (``module_name: macros/main`` in
``mkdocs.yml``); its ``define_env`` registers every module of this package.
A module here exposes ``register(env)`` and keeps the numbers in ``calc``.

How a module writes markup: as a ``calc_view`` element tree (``calc_view.html``), the
way the calculator's results are built, so every text and attribute is escaped in one
place. A table is a list of row dicts given to ``tables.render``; calc's responses become
rows through ``rows`` (which also names calc's ids). Shared helpers live in ``site``,
``labels``, ``tables`` and ``rows``; a table or chart module imports only public names of
another, and no two import each other.

pandas is not used. A table here is a list of calc responses, a column one key of each,
and the derived columns (bytes per parameter) are one division per row: a DataFrame
added a dependency and a conversion step with no group-by or join to earn it. The one
place with group-bys, the accuracy summaries (``accuracy/``), groups a few hundred rows
with the standard library's ``statistics``, which the site and the benchmarks share.
"""
