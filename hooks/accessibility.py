"""MkDocs hook: fix what axe flags in Material's own markup.

Material 9.8 renders the search overlay as ``role="dialog"`` without an
accessible name (axe rule ``aria-dialog-name``). The dialog gets an
``aria-label`` in the page's language. If Material's markup changes, the
replacement does nothing and the browser accessibility test fails.

(The other finding, the low-contrast "Made with Material for MkDocs"
footer line, is turned off with ``extra.generator: false``.)
"""

from __future__ import annotations

import sys
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig

ROOT = Path(__file__).resolve().parent.parent
SEARCH_DIALOG = '<div class="md-search" data-md-component="search" role="dialog">'


def _label_search_dialog(html: str, config: MkDocsConfig) -> str:
    if str(ROOT) not in sys.path:  # a hook may load before the macros plugin adds the root
        sys.path.insert(0, str(ROOT))
    from calc.catalogue import catalogue

    label = catalogue(config.theme["language"]).message("site.search_label")
    labelled = SEARCH_DIALOG[:-1] + f' aria-label="{label}">'
    return html.replace(SEARCH_DIALOG, labelled, 1)


def on_post_page(output: str, page, config: MkDocsConfig) -> str:
    return _label_search_dialog(output, config)


def on_post_template(output_content: str, template_name: str, config: MkDocsConfig) -> str:
    # 404.html is a theme template, not a page.
    return _label_search_dialog(output_content, config)
