"""The built site in headless Chromium: offline, no errors, Pyodide starts."""

from __future__ import annotations

import pytest

from conftest import pyodide_info, settle_page, site_pages

pytestmark = pytest.mark.browser

#: Cold start of Pyodide on a 2-core machine takes ~2-3 s; leave headroom.
PYODIDE_READY_TIMEOUT_MS = 60_000


def test_every_page_loads_offline_without_errors(offline_page, site_server):
    page, problems = offline_page
    pages = site_pages(site_server.root)
    assert {"index.html", "en/index.html"} <= set(pages)
    by_page = {}
    for rel_path in pages:
        before = {name: len(items) for name, items in problems.problems().items()}
        # settled: leaving a page while its search index or Pyodide is still loading
        # would abort those requests and blame the next page for them
        page.goto(site_server.url(rel_path))
        settle_page(page)
        found = {
            name: items[before.get(name, 0) :]
            for name, items in problems.problems().items()
            if items[before.get(name, 0) :]
        }
        if found:
            by_page[rel_path] = found
    assert by_page == {}
    assert problems.problems() == {}  # nor after the last page's check
    # The pages really loaded their own assets through the watched route.
    assert any(url.endswith(".css") for url in problems.requested)
    assert any(url.endswith(".js") for url in problems.requested)


def test_request_outside_the_site_is_caught(offline_page, site_server):
    # Guard for the test above: an external request must not go unnoticed.
    page, problems = offline_page
    page.goto(site_server.url(""), wait_until="load")
    with page.expect_event("requestfailed", lambda r: r.url == "https://example.com/cdn.js"):
        page.evaluate("() => fetch('https://example.com/cdn.js').catch(() => null)")
    assert problems.aborted == ["https://example.com/cdn.js"]
    assert problems.problems().keys() >= {"aborted"}


def test_pyodide_starts_offline_in_a_module_worker(offline_page, site_server, pyodide_smoke_dir):
    page, problems = offline_page
    index_url = "/" + pyodide_info()["path"]
    page.goto(site_server.url(f"_test_smoke/index.html?indexURL={index_url}"))
    page.wait_for_function(
        "document.getElementById('status').textContent !== 'loading'",
        timeout=PYODIDE_READY_TIMEOUT_MS,
    )
    assert page.text_content("#status") == "ready"

    def run(code: str):
        return page.evaluate("code => window.smoke.run(code)", code)

    assert run("1 + 1") == {"result": 2}
    version = run("import sys; sys.version")["result"]
    assert version.startswith("3.14."), version
    assert run("import sys; sys.platform") == {"result": "emscripten"}
    assert "ZeroDivisionError" in run("1 / 0")["error"]

    problems.assert_clean("pyodide smoke page")
    # The runtime came from the site's versioned directory, through the
    # watched route (so worker requests are covered by the offline check).
    wasm = site_server.url(pyodide_info()["path"] + "pyodide.asm.wasm")
    assert wasm in problems.requested
