"""Accessibility of the site skeleton (theme, header, footer, search) with axe.

Content pages are checked by their own tests; this covers what every page
inherits from the theme, in both colour schemes.
"""

from __future__ import annotations

import pytest
from axe_playwright_python.sync_playwright import Axe

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("color_scheme", ["light", "dark"])
@pytest.mark.parametrize("rel_path", ["index.html", "en/index.html", "404.html", "en/404.html"])
def test_skeleton_has_no_axe_violations(offline_page, site_server, rel_path, color_scheme):
    page, problems = offline_page
    page.emulate_media(color_scheme=color_scheme)
    page.goto(site_server.url(rel_path), wait_until="load")
    results = Axe().run(page)
    assert results.violations_count == 0, results.generate_report()
    problems.assert_clean(rel_path)
