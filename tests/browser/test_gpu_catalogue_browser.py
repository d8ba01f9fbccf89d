"""The GPU catalogue's specifications table as a reader sees it, on a desktop and on a phone:
rows of a line or two (not the derived-figures list wrapping into a column of words), short
headers, the card's name pinned while the figures scroll sideways, and no page overflow."""

from __future__ import annotations

import pytest
from calculator_page import new_context

pytestmark = [pytest.mark.browser]

MEASURE = """() => {
  const t = document.querySelector('table[data-table="gpu_catalogue"]');
  const box = t.parentElement;
  t.scrollIntoView();
  const rows = [...t.querySelectorAll('tbody tr')].map(r => r.getBoundingClientRect().height);
  box.scrollLeft = box.scrollWidth;
  const name = t.querySelector('tbody th').getBoundingClientRect().left;
  return {
    rows: rows.length,
    shortest: Math.min(...rows),
    tallest: Math.max(...rows),
    head: t.querySelector('thead tr').getBoundingClientRect().height,
    scrolls: box.scrollWidth > box.clientWidth,
    pinned: Math.abs(name - box.getBoundingClientRect().left) < 2,
    pageWidth: document.documentElement.scrollWidth,
  };
}"""


@pytest.mark.parametrize("width", [1280, 390])
@pytest.mark.parametrize("lang", ["es", "en"])
def test_catalogue_rows_stay_short_and_the_name_stays_in_view(browser, site_server, lang, width):
    context = new_context(browser, viewport={"width": width, "height": 900})
    page = context.new_page()
    page.goto(site_server.url("gpus/" if lang == "es" else "en/gpus/"), wait_until="load")
    m = page.evaluate(MEASURE)
    context.close()
    assert m["rows"] >= 20
    # a one-line row is the shortest; none takes more than about three lines
    assert m["tallest"] <= 2.5 * m["shortest"], m
    assert m["head"] <= 4 * m["shortest"], m
    assert m["scrolls"] and m["pinned"], m
    assert m["pageWidth"] <= width
