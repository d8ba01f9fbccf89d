"""MkDocs hook: one search index per language.

mkdocs-static-i18n 1.3.1 builds each language into the same ``site_dir`` and, after the
last build, writes ONE search index with every language's pages
(``reconfigure_search_index`` in its ``reconfigure.py``), its lunr ``lang`` the union of
the languages. Material 9.8 fetches ``search/search_index.json`` under the ``base`` of
its ``__config`` (the site root for every page) and resolves each hit's ``location``
against that same ``base``. So the English site found Spanish pages and the other way
round, and stemming mixed the two languages.

This hook:

- points ``base`` of a non-default language's pages (and its 404 page) at that
  language's root (``…/en/``), so the English site loads ``en/search/search_index.json``
  and its hits resolve under ``/en/``;
- once the last language is built (after the i18n plugin has written the merged index),
  splits that index: the default language's entries stay at ``search/search_index.json``
  with ``lang: [es]``; each other language's go to ``<lang>/search/search_index.json``
  with their ``<lang>/`` prefix removed and ``lang: [<lang>]``. Material's search
  worker only uses ``base`` for the index URL and the hits' links (bundle of 9.8.1).

It also keeps tables and footnotes out of the index as running text: Material's own
parser (``material/plugins/search/plugin.py``, ``Parser``, 9.8.1) skips any element that
carries ``data-search-exclude``, so every table's head and body (generated tables, source
tables, Markdown tables), the footnotes block (source notes) and the calculator's form and
pre-rendered result (the page's introduction stays findable) get that attribute before
the search plugin reads the page (``on_page_content`` runs before its ``on_page_context``).
A hit then shows the sentences around a table, and its caption, never a run of cells.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.plugins import event_priority

_BASE = re.compile(r'("base":\s*)"([^"]*)"')


def _languages(config: MkDocsConfig) -> tuple[str, list[str]]:
    """(default locale, other built locales), as mkdocs.yml's i18n plugin lists them."""
    languages = config.plugins["i18n"].config.languages
    default = next(lang.locale for lang in languages if lang.default)
    return default, [lang.locale for lang in languages if lang.build and not lang.default]


def language_base(base: str, language: str) -> str:
    """``base`` (the site root, relative to the page or absolute) moved to the
    language's root, always with a trailing slash: Material resolves the index URL with
    ``new URL("search/search_index.json", base)``, which drops a last segment without one."""
    root = base.rstrip("/")
    return (
        f"{root}/{language}/"
        if root not in ("", ".")
        else (f"/{language}/" if base.startswith("/") else f"{language}/")
    )


def _rebase(html: str, config: MkDocsConfig) -> str:
    default, _ = _languages(config)
    language = config.theme["language"]
    if language == default or 'id="__config"' not in html:
        return html
    start = html.index('id="__config"')
    end = html.index("</script>", start)
    block = _BASE.sub(
        lambda m: f'{m.group(1)}"{language_base(m.group(2), language)}"', html[start:end], count=1
    )
    return html[:start] + block + html[end:]


def on_post_page(output: str, page, config: MkDocsConfig) -> str:
    return _rebase(output, config)


def on_post_template(output_content: str, template_name: str, config: MkDocsConfig) -> str:
    # 404.html is a theme template, not a page
    return _rebase(output_content, config)


# What a search snippet must not read as a sentence: cells, notes, the calculator's form,
# status line and pre-rendered result (labels and figures; its introduction stays findable).
# Material's parser compares elements by tag name only (``Element.__eq__``/``__hash__``), so
# an excluded element stops being skipped at the first nested element of the same tag: each
# target below has no descendant of its own tag. A heading with the attribute drops its
# whole section (``Section.is_excluded``), which is how the calculator's result goes.
_EXCLUDED = re.compile(
    r'<(?:thead|tbody)(?=[\s>])|<div class="footnote"(?=[\s>])'
    r'|<form class="calc-form"(?=[\s>])|<p class="calc-status"(?=[\s>])'
    r'|<h2 id="calc-results-heading"(?=[\s>])'
)


def exclude_from_search(html: str) -> str:
    """``html`` with ``data-search-exclude`` on every table head and body, on the
    footnotes block and on the calculator."""
    return _EXCLUDED.sub(lambda m: m.group(0) + " data-search-exclude", html)


def on_page_content(html: str, page, config: MkDocsConfig, files) -> str:
    return exclude_from_search(html)


def split_index(index: dict, default: str, others: list[str]) -> dict[str, dict]:
    """The merged index split per language: ``{locale: index}``; a non-default
    language's locations lose their ``<locale>/`` prefix (they resolve under its root)."""
    out = {}
    for locale in [default, *others]:
        prefix = f"{locale}/"
        if locale == default:
            docs = [
                d
                for d in index["docs"]
                if not any(d["location"].startswith(f"{o}/") for o in others)
            ]
        else:
            docs = [
                {**d, "location": d["location"][len(prefix) :]}
                for d in index["docs"]
                if d["location"].startswith(prefix)
            ]
        out[locale] = {"config": {**index["config"], "lang": [locale]}, "docs": docs}
    return out


@event_priority(-200)  # after the i18n plugin's on_post_build (-100), which writes the merged index
def on_post_build(config: MkDocsConfig) -> None:
    if config.plugins["i18n"].building:
        return  # a language build the i18n plugin started: the merged index comes later
    default, others = _languages(config)
    site = Path(config.site_dir)
    path = site / "search" / "search_index.json"
    if not path.is_file():
        return
    index = json.loads(path.read_text(encoding="utf-8"))
    for locale, part in split_index(index, default, others).items():
        target = path if locale == default else site / locale / "search" / "search_index.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(
            json.dumps(part, separators=(",", ":"), ensure_ascii=False), encoding="utf-8"
        )
