"""The calculator's worker starts from the page's <head> and is adopted, not started twice."""

from __future__ import annotations

import pytest

from calculator_page import STATE_TIMEOUT_MS

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("path", ["calculator/", "en/calculator/"])
def test_worker_started_in_head_is_adopted(offline_page, site_server, path):
    page, problems = offline_page
    page.goto(site_server.url(path))
    page.wait_for_function(
        "document.getElementById('calc').dataset.calcWorker === 'up'", timeout=STATE_TIMEOUT_MS
    )
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


# ---------------------------------------------------------------- search on the calculator page
# Material's search index is built in a worker; on the calculator page that build waits until
# the reader opens search, or the calculator is live and left alone for a moment
# (search-defer.js), so it competes neither with Pyodide's start nor with the first edits.
# Search must work all the same.

READY = "document.getElementById('calc').dataset.calcWorker === 'up'"  # private: Python started
SEARCH_STARTED = "performance.getEntriesByName('calc-search-start').length > 0"
SEARCH_QUERY = "input[data-md-component=search-query]"
SEARCH_HITS = ".md-search-result__item"
REAL_SEARCH_WORKER = "/assets/javascripts/workers/search."  # Material's, hashed name


def search(page, query: str) -> None:
    """Type a query as a reader does. Material reads the box on a key released, on focus and
    when its index is ready, never on a bare input event: a filled-in value is seen only if
    the index happens to become ready after it (a race lost when the index is ready first)."""
    page.click(SEARCH_QUERY)
    page.keyboard.type(query)


def _is_real_worker(url: str) -> bool:
    return REAL_SEARCH_WORKER in url and ".min.js" in url.split("?")[0]


def _real_worker_requested(problems) -> bool:
    """Whether Material's own search worker was fetched (the stand-in loads it on "start")."""
    return any(_is_real_worker(url) for url in problems.requested)


@pytest.mark.parametrize("path, query", [("calculator/", "memoria"), ("en/calculator/", "memory")])
def test_search_starts_once_the_calculator_is_ready_and_idle_and_works(
    offline_page, site_server, path, query
):
    page, problems = offline_page
    # untouched, search starts by itself: the stand-in fetches Material's worker (waited for
    # as an event from the start, so it cannot slip by between two looks)
    with page.context.expect_event(
        "request", lambda r: _is_real_worker(r.url), timeout=STATE_TIMEOUT_MS
    ):
        page.goto(site_server.url(path))
        page.wait_for_function(READY, timeout=STATE_TIMEOUT_MS)
        page.wait_for_function(SEARCH_STARTED, timeout=STATE_TIMEOUT_MS)
    marks = page.evaluate("""() => ({
        ready: performance.getEntriesByName('calc-ready')[0].startTime,
        search: performance.getEntriesByName('calc-search-start').map(e => e.startTime)})""")
    assert len(marks["search"]) == 1
    assert marks["search"][0] >= marks["ready"] + 1000  # after a quiet moment, not at once
    search(page, query)  # only now does anyone touch search
    page.wait_for_selector(SEARCH_HITS, timeout=STATE_TIMEOUT_MS)
    assert page.locator(SEARCH_HITS).count() > 0
    problems.assert_clean()


def test_opening_search_while_the_calculator_loads_starts_it_at_once(offline_page, site_server):
    page, problems = offline_page
    held = []
    # Pyodide's wasm is held back: the worker keeps starting until the end of the test.
    page.route("**/pyodide.asm.wasm", lambda route: held.append(route))
    # Material has set its search up once the stand-in worker it was pointed at runs: it has
    # Material's messages and asked the page whether to start (search-after-calc.js)
    with page.expect_worker(lambda w: "/search-after-calc.js" in w.url) as stand_in:
        page.goto(site_server.url("en/calculator/"), wait_until="load")
    stand_in.value.evaluate("self.location.href")  # its script has run
    page.wait_for_function("document.getElementById('calc').dataset.calcWorker === 'starting'")
    assert not _real_worker_requested(problems)
    assert page.evaluate("performance.getEntriesByName('calc-search-start').length") == 0
    search(page, "memory")
    page.wait_for_selector(SEARCH_HITS, timeout=STATE_TIMEOUT_MS)
    assert _real_worker_requested(problems)
    assert page.evaluate("document.getElementById('calc').dataset.calcWorker") == "starting"
    assert len(held) == 1
    held[0].continue_()
    page.wait_for_function(READY, timeout=STATE_TIMEOUT_MS)
    problems.assert_clean()


def test_guide_pages_keep_materials_search_worker(offline_page, site_server):
    page, problems = offline_page
    page.goto(site_server.url("guides/vram/"))
    config = page.evaluate("JSON.parse(document.getElementById('__config').textContent)")
    assert REAL_SEARCH_WORKER in config["search"] and "search-after-calc" not in config["search"]
    assert page.evaluate("document.querySelectorAll('script[src*=\"search-defer\"]').length") == 0
    problems.assert_clean()
