"""The site's languages, the default first: one message catalogue per language
(``calc/data/messages/<lang>.json``), one number format per language (:mod:`calc.numfmt`),
the CLI's ``--lang`` choices and the site's builds. ``mkdocs.yml`` (``plugins.i18n.languages``)
cannot import this; ``tests/calc/test_catalogue.py`` checks that it lists the same languages."""

LANGS = ("es", "en")
