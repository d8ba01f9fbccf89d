"""The MkDocs hooks' edits of the rendered HTML: each one finds the markup it expects in the
installed Material theme, edits it, and stops the build when the markup is not there (a
changed theme must not ship pages the edit silently missed); the per-language 404 pages land
in their place whichever language builds first."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import material
import pytest
from mkdocs.exceptions import PluginError

from hooks import accessibility, i18n_site_files

THEME = Path(material.__file__).resolve().parent / "templates"


def _config(language: str, site_dir: Path | None = None, site_url: str = "") -> SimpleNamespace:
    langs = [SimpleNamespace(locale="es", default=True, build=True),
             SimpleNamespace(locale="en", default=False, build=True)]
    i18n = SimpleNamespace(config=SimpleNamespace(languages=langs))
    return SimpleNamespace(theme={"language": language}, plugins={"i18n": i18n},
                           site_dir=str(site_dir or "."), site_url=site_url)


def _page(src_uri: str = "guides/vram.md") -> SimpleNamespace:
    return SimpleNamespace(file=SimpleNamespace(src_uri=src_uri))


def _rendered(template_line: str, **values: str) -> str:
    """A line of a Jinja template with each ``{{ ... }}`` replaced by the next value."""
    it = iter(values.values())
    return re.sub(r"\{\{[^}]*\}\}", lambda _: next(it), template_line)


# --- accessibility.py: the search dialog's name ------------------------------------------------

def test_materials_search_dialog_is_the_markup_the_hook_edits():
    assert accessibility.SEARCH_DIALOG in (THEME / "partials" / "search.html").read_text(encoding="utf-8")


@pytest.mark.parametrize("lang, label", [("es", "Buscar en el sitio"), ("en", "Search the site")])
def test_search_dialog_gets_a_name_in_the_page_language(lang, label):
    html = f"<header>{accessibility.SEARCH_DIALOG}<form></form></div></header>"
    out = accessibility.on_post_page(html, _page(), _config(lang))
    assert f'role="dialog" aria-label="{label}">' in out and accessibility.SEARCH_DIALOG not in out
    assert accessibility.on_post_template(html, "404.html", _config(lang)) == out


@pytest.mark.parametrize("changed", [
    '<div class="md-search" role="dialog" data-md-component="search">',   # attributes reordered
    '<dialog class="md-search" data-md-component="search">',              # another element
    "",                                                                   # no search at all
])
def test_search_dialog_markup_missing_stops_the_build(changed):
    html = f"<header>{changed}</header>"
    with pytest.raises(PluginError, match="accessibility.py: page guides/vram.md has no"):
        accessibility.on_post_page(html, _page(), _config("en"))
    with pytest.raises(PluginError, match="the 404 template"):
        accessibility.on_post_template(html, "404.html", _config("en"))


def test_non_html_templates_pass_through():
    xml = '<?xml version="1.0"?><urlset></urlset>'
    assert accessibility.on_post_template(xml, "sitemap.xml", _config("es")) == xml


# --- i18n_site_files.py: the head's alternate links and the 404 page's switcher ---------------

def _head_alternate_line() -> str:
    base = (THEME / "base.html").read_text(encoding="utf-8")
    (line,) = [ln for ln in base.splitlines() if '<link rel="alternate"' in ln and "hreflang" in ln]
    return line.strip()


def test_materials_alternate_links_are_the_markup_the_hook_drops():
    line = _rendered(_head_alternate_line(), link="/en/calculator/", lang="en")
    assert line == '<link rel="alternate" href="/en/calculator/" hreflang="en">'
    assert i18n_site_files._HEAD_ALTERNATE.fullmatch(line)


def test_head_alternates_are_dropped_and_nothing_else():
    rss = '<link rel="alternate" type="application/rss+xml" href="/feed.xml">'
    html = ("<head>\n    <link rel=\"alternate\" href=\"/calculator/\" hreflang=\"es\">\n"
            "    <link rel=\"alternate\" href=\"/en/calculator/\" hreflang=\"en\">\n"
            f"    {rss}\n</head><body><a href=\"/en/calculator/\" hreflang=\"en\">English</a></body>")
    out = i18n_site_files.on_post_page(html, _page(), _config("es"))
    assert "hreflang=\"es\"" not in out and out.count("hreflang") == 1  # the switcher's link stays
    assert rss in out


@pytest.mark.parametrize("changed", [
    '<link hreflang="en" rel="alternate" href="/en/calculator/">',
    "<link rel=alternate href=/en/calculator/ hreflang=en>",
    '<link rel="alternate" href="/en/calculator/" hreflang="en" />',
])
def test_alternate_links_in_another_form_stop_the_build(changed):
    with pytest.raises(PluginError, match="page guides/vram.md keeps"):
        i18n_site_files.on_post_page(f"<head>{changed}</head>", _page(), _config("en"))


def test_materials_switcher_links_are_the_markup_the_404_fix_edits():
    source = (THEME / "partials" / "alternate.html").read_text(encoding="utf-8")
    (line,) = [ln.strip() for ln in source.splitlines() if "hreflang" in ln]
    rendered = _rendered(line, link="/guides/vram/", lang="en")
    assert i18n_site_files._SWITCHER_LINK.search(rendered)


@pytest.mark.parametrize("site_url, es_home, en_home", [("", "/", "/en/"),
                                                         ("https://x.github.io/site/", "/site/", "/site/en/")])
def test_404_language_links_point_at_each_home(site_url, es_home, en_home):
    html = ('<link rel="alternate" href="/guides/vram/" hreflang="es">'
            '<a href="/en/guides/vram/" hreflang="en" class="md-select__link">English</a>')
    out = i18n_site_files.on_post_template(html, "404.html", _config("en", site_url=site_url))
    assert f'href="{es_home}" hreflang="es"' in out and f'href="{en_home}" hreflang="en"' in out
    assert i18n_site_files.on_post_template(html, "main.html", _config("en")) == html


def test_404_without_language_links_stops_the_build():
    with pytest.raises(PluginError, match="the 404 template has no language link"):
        i18n_site_files.on_post_template("<a hreflang='en' href='/en/'>x</a>", "404.html", _config("en"))


# --- i18n_site_files.py: the 404 pages and sitemaps, whichever language builds first -----------

@pytest.mark.parametrize("order", [("es", "en"), ("en", "es")])
def test_404_pages_land_in_place_whatever_the_build_order(tmp_path, order):
    site = tmp_path / "site"
    site.mkdir()
    i18n_site_files._default_404.pop(str(site), None)
    for lang in order:  # each build writes its own 404 and sitemap at the root, then post_build
        (site / "404.html").write_text(f"<html lang={lang}>404</html>")
        (site / "sitemap.xml").write_text("<urlset/>")
        if lang == "en":
            (site / "en").mkdir(exist_ok=True)
        i18n_site_files.on_post_build(_config(lang, site))
    assert (site / "404.html").read_text() == "<html lang=es>404</html>"
    assert (site / "en" / "404.html").read_text() == "<html lang=en>404</html>"
    assert (site / "en" / "sitemap.xml").read_text() == "<urlset/>"
