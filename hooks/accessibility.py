"""MkDocs hook: fix what axe flags in Material's own markup.

Material 9.8 renders the search overlay as ``role="dialog"`` without an
accessible name (axe rule ``aria-dialog-name``). The dialog gets an
``aria-label`` in the page's language. The edit matches Material's markup
exactly; a page or 404 template without that markup stops the build
(``PluginError``) instead of shipping an unnamed dialog: Material changed, and
this hook must follow it (tests/site/test_hooks.py).

(The other finding, the low-contrast "Made with Material for MkDocs"
footer line, is turned off with ``extra.generator: false``.)
"""

from __future__ import annotations

import sys
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError

ROOT = Path(__file__).resolve().parent.parent
SEARCH_DIALOG = '<div class="md-search" data-md-component="search" role="dialog">'


def search_label(lang: str) -> str:
    """The dialog's name in ``lang``: ``site.search_label`` of the message catalogue."""
    if str(ROOT) not in sys.path:  # a hook may load before the macros plugin adds the root
        sys.path.insert(0, str(ROOT))
    from calc.catalogue import catalogue

    return catalogue(lang).message("site.search_label")


def _label_search_dialog(html: str, config: MkDocsConfig, where: str) -> str:
    if SEARCH_DIALOG not in html:
        raise PluginError(
            f"hooks/accessibility.py: {where} has no {SEARCH_DIALOG!r}: Material's search "
            "markup changed, so its dialog would ship without a name; update SEARCH_DIALOG"
        )
    label = search_label(config.theme["language"])
    labelled = SEARCH_DIALOG[:-1] + f' aria-label="{label}">'
    return html.replace(SEARCH_DIALOG, labelled, 1)


def on_post_page(output: str, page, config: MkDocsConfig) -> str:
    return _label_search_dialog(output, config, f"page {page.file.src_uri}")


def on_post_template(output_content: str, template_name: str, config: MkDocsConfig) -> str:
    # 404.html is a theme template, not a page; the other static templates (sitemap.xml)
    # are no HTML
    if template_name != "404.html":
        return output_content
    return _label_search_dialog(output_content, config, "the 404 template")
