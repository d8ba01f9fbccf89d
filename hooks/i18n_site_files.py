"""MkDocs hook: per-language site files that mkdocs-static-i18n leaves wrong.

mkdocs-static-i18n runs one build per language into the same ``site_dir``
(default language first). Two site-wide files then come out wrong:

- ``404.html``: each build writes it at the site root, so the LAST language
  wins and GitHub Pages shows an English 404 on the Spanish site. The
  default language's page is put back at the root; the others' go to
  ``<lang>/404.html``.
- ``sitemap.xml``: written at the root only, but Material's JavaScript
  fetches ``sitemap.xml`` under every alternate language link (``/en/``),
  a 404 on every page. The root sitemap lists every language's pages with
  their alternates, so each language directory gets a copy.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig

SITEMAP_FILES = ("sitemap.xml", "sitemap.xml.gz")

# The default language's 404 page, kept between the builds of one run.
_default_404: bytes | None = None


def _languages(config: MkDocsConfig) -> tuple[str, list[str]]:
    """(default locale, other built locales) from the i18n plugin's config."""
    languages = config.plugins["i18n"].config.languages
    default = next(lang.locale for lang in languages if lang.default)
    others = [lang.locale for lang in languages if lang.build and not lang.default]
    return default, others


def on_post_build(config: MkDocsConfig) -> None:
    global _default_404
    site = Path(config.site_dir)
    default, others = _languages(config)
    language = config.theme["language"]
    page_404 = site / "404.html"

    if language == default:
        _default_404 = page_404.read_bytes() if page_404.is_file() else None
    elif page_404.is_file() and _default_404 is not None:
        (site / language).mkdir(exist_ok=True)
        shutil.move(page_404, site / language / "404.html")
        page_404.write_bytes(_default_404)

    for locale in others:
        if (site / locale).is_dir():
            for name in SITEMAP_FILES:
                if (site / name).is_file():
                    shutil.copyfile(site / name, site / locale / name)
