"""MkDocs hook: per-language site files that mkdocs-static-i18n leaves wrong.

mkdocs-static-i18n runs one build per language into the same ``site_dir``
(default language first). Two site-wide files then come out wrong:

- ``404.html``: each build writes it at the site root, so the LAST language
  wins and GitHub Pages shows an English 404 on the Spanish site. The
  default language's page is put back at the root; the others' go to
  ``<lang>/404.html``, in whichever order the languages build.
- ``sitemap.xml``: written at the root only, but Material's JavaScript
  fetches ``sitemap.xml`` under every alternate language link (``/en/``),
  a 404 on every page. The root sitemap lists every language's pages with
  their alternates, so each language directory gets a copy.
- the language switcher of a non-default ``404.html``: the i18n plugin sets
  the alternates per page, and the 404 template (not a page) inherits those
  of the last page built; they are pointed back at each language's home.
- the head's ``<link rel="alternate" hreflang>`` tags: Material's JavaScript
  fetches ``sitemap.xml`` under each of them, which only exists under a
  language's home, so every page other than a home page logged two 404s.
  They are dropped; the sitemap keeps the hreflang alternates for search
  engines and the switcher's own links are untouched.

The two edits of the rendered HTML match the plugins' markup exactly; markup they
do not recognise stops the build (``PluginError``) rather than shipping a page
the edit silently missed (tests/site/test_hooks.py).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from urllib.parse import urlsplit

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError

SITEMAP_FILES = ("sitemap.xml", "sitemap.xml.gz")

# The default language's 404 page, by site directory, kept between the builds of one run: a
# later language's build writes its own 404 over it at the root.
_default_404: dict[str, bytes] = {}


def _languages(config: MkDocsConfig) -> tuple[str, list[str]]:
    """(default locale, other built locales) from the i18n plugin's config."""
    languages = config.plugins["i18n"].config.languages
    default = next(lang.locale for lang in languages if lang.default)
    others = [lang.locale for lang in languages if lang.build and not lang.default]
    return default, others


def on_post_build(config: MkDocsConfig) -> None:
    """Each language's 404 page to its place, whichever language built first: the root one
    is the default language's, ``<lang>/404.html`` the others'."""
    site = Path(config.site_dir)
    default, others = _languages(config)
    language = config.theme["language"]
    page_404 = site / "404.html"

    if page_404.is_file():  # this build's own 404 page, just written
        if language == default:
            _default_404[str(site)] = page_404.read_bytes()
        else:
            (site / language).mkdir(exist_ok=True)
            shutil.move(page_404, site / language / "404.html")
            if str(site) in _default_404:  # built before: put it back
                page_404.write_bytes(_default_404[str(site)])
            # else the default language builds later and writes the root one itself

    for locale in others:
        if (site / locale).is_dir():
            for name in SITEMAP_FILES:
                if (site / name).is_file():
                    shutil.copyfile(site / name, site / locale / name)


# Both the switcher (<a>) and the head's <link rel="alternate"> carry them.
_SWITCHER_LINK = re.compile(r'href="[^"]*" hreflang="([A-Za-z-]+)"')


def on_post_template(output: str, template_name: str, config: MkDocsConfig) -> str:
    """Point the 404 page's language links at each language's home page, as it is rendered."""
    if template_name != "404.html":
        return output
    default, _ = _languages(config)
    prefix = urlsplit(config.site_url or "/").path or "/"
    prefix = prefix if prefix.endswith("/") else prefix + "/"

    def home(match: re.Match) -> str:
        lang = match.group(1)
        link = prefix if lang == default else f"{prefix}{lang}/"
        return f'href="{link}" hreflang="{lang}"'

    fixed, count = _SWITCHER_LINK.subn(home, output)
    if not count:
        raise PluginError(
            "hooks/i18n_site_files.py: the 404 template has no language link "
            "(href=... hreflang=...): the i18n plugin's or Material's markup changed, "
            "so the 404 page's language switcher would keep another page's links"
        )
    return fixed


_HEAD_ALTERNATE = re.compile(r'[ \t]*<link rel="alternate" href="[^"]*" hreflang="[A-Za-z-]+">\n?')
# Any hreflang alternate link, whatever the order or quoting of its attributes.
_ANY_ALTERNATE = re.compile(
    r'<link\b(?=[^>]*\brel=["\']?alternate\b)(?=[^>]*\bhreflang=)[^>]*>', re.I
)


def on_post_page(output: str, page, config: MkDocsConfig) -> str:
    fixed = _HEAD_ALTERNATE.sub("", output)
    left = _ANY_ALTERNATE.findall(fixed)
    if left:
        raise PluginError(
            f"hooks/i18n_site_files.py: page {page.file.src_uri} keeps {left[0]!r}: the "
            "alternate links' markup changed, and Material would fetch sitemap.xml "
            "under each of them (a 404); update _HEAD_ALTERNATE"
        )
    return fixed
