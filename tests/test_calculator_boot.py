"""The calculator's worker starts from the page's <head> and is adopted, not started twice."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("path", ["calculator/", "en/calculator/"])
def test_worker_started_in_head_is_adopted(offline_page, site_server, path):
    page, problems = offline_page
    page.goto(site_server.url(path))
    page.wait_for_function("document.getElementById('calc').dataset.calcState === 'ready'",
                           timeout=60_000)
    workers = page.evaluate("""() => performance.getEntriesByType('resource')
        .filter(e => new URL(e.name).pathname.endsWith('/worker.js')).length""")
    head_boot = page.evaluate("""() => [...document.head.querySelectorAll('script[data-worker]')]
        .map(s => s.dataset.bundle)""")
    body_bundle = page.evaluate("document.getElementById('calc').dataset.bundle")
    assert head_boot == [body_bundle]  # the head starts the very worker the block would
    assert page.evaluate("document.getElementById('calc').dataset.calcBoot") == "head"
    assert workers == 1  # one worker: the head's, adopted by the calculator block
    problems.assert_clean()


def test_guide_pages_have_no_early_boot(offline_page, site_server):
    page, problems = offline_page
    page.goto(site_server.url("guides/vram/"))
    assert page.evaluate("document.querySelectorAll('script[data-worker]').length") == 0
    problems.assert_clean()
