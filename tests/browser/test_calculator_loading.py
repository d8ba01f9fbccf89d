"""How the calculator loads: on a phone the pinned bar says it is calculating from the first
paint; the service worker (calc-sw.js) keeps the runtime, so a repeat visit works with the
network off; the worker loads the standard library cut to what calc needs."""

from __future__ import annotations

import time

import pytest
from calculator_page import (
    STATE_TIMEOUT_MS,
    Calc,
    assert_clean,
    assert_parity,
    new_context,
    request_for,
)
from conftest import watch_offline

from calc import run as calc_run
from macros import calculator

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.mark.parametrize("lang", ["es", "en"])
def test_a_repeat_visit_with_the_network_off_shows_live_numbers(browser, site_server, lang):
    context = new_context(browser)
    page = context.new_page()
    problems = watch_offline(page, site_server.origin)  # nothing outside the site, ever
    calc = Calc(page, site_server, lang)
    calc.open({"method": "qlora", "seq_len": "4096"})  # a shared link: numbers of its own
    calc.wait_worker()
    sw = calc.wait_service_worker()
    assert sw is not None, "no service worker became active after the numbers were live"
    assert sw["scope"] == site_server.url("")  # the site's root: both languages' pages
    assert len(sw["caches"]) == 1
    page.wait_for_load_state("networkidle")
    page.close()

    # Later, with no network: the browser's HTTP cache is emptied (the service worker's
    # cache is not) and every request that would leave the browser fails, so what comes can
    # only come from the service worker.
    cdp = context.new_cdp_session(context.new_page())
    cdp.send("Network.clearBrowserCache")
    context.set_offline(True)
    left: list[str] = []
    context.route("**/*", lambda route: (left.append(route.request.url), route.abort()))
    page = context.new_page()
    query = {"method": "lora", "seq_len": "1536", "micro_batch_size": "2"}
    calc = Calc(page, site_server, lang)
    calc.open(query)
    calc.wait_quiet()
    assert page.evaluate("navigator.serviceWorker.controller !== null")
    timings = page.evaluate("JSON.parse(document.getElementById('calc').dataset.calcTimings)")
    assert timings["snapshot"] is False  # nor did it need a snapshot to start
    assert_parity(calc.outputs(), calc_run(calculator.COMMAND, request_for(query))["result"], lang)
    # the runtime was not even asked of the network (the page and the calculator's scripts
    # are: network first, the cache when that fails)
    runtime = ("pyodide.asm.wasm", root_file(page, "stdlib"), root_file(page, "bundle"))
    assert not [u for u in left if u.split("?")[0].endswith(runtime)], left
    context.close()
    assert problems.aborted == []


def root_file(page, key: str) -> str:
    """The file name of one of the calculator block's URLs (data-<key>)."""
    return page.evaluate(f"document.getElementById('calc').dataset.{key}").rsplit("/", 1)[-1]


def test_the_worker_keeps_only_this_site_and_loads_the_trimmed_standard_library(
    browser, site_server
):
    context = new_context(browser)
    page = context.new_page()
    problems = watch_offline(page, site_server.origin)
    calc = Calc(page, site_server, "es")
    calc.open()
    calc.wait_worker()
    assert calc.wait_service_worker() is not None
    kept = page.evaluate("""async () => {
        const name = (await caches.keys()).find((n) => n.startsWith("calc-sw-"));
        return (await (await caches.open(name)).keys()).map((r) => r.url);
    }""")
    root = page.evaluate("document.getElementById('calc').dataset")
    abs_url = lambda rel: page.evaluate("u => new URL(u, location.href).href", rel)  # noqa: E731
    # the runtime the worker loads: the cut standard library, not Pyodide's full one
    assert abs_url(root["stdlib"]) in kept and abs_url(root["bundle"]) in kept
    assert abs_url(root["pyodide"] + "pyodide.asm.wasm") in kept
    assert not any(u.endswith("/python_stdlib.zip") for u in kept)
    assert not any(u.endswith(".snapshot.gz") for u in kept)  # the worker keeps that itself
    assert all(u.startswith(site_server.origin + "/") for u in kept)
    assert site_server.url("calculator/") in kept and site_server.url("en/calculator/") in kept
    assert any(u.endswith(root["stdlib"].rsplit("/", 1)[-1]) for u in problems.requested)
    assert not any(u.endswith("/python_stdlib.zip") for u in problems.requested)
    page.wait_for_load_state("networkidle")
    context.close()
    assert_clean(problems, "calculator with its service worker", site_server.origin)


PHONE = {"width": 390, "height": 844}


@pytest.mark.parametrize(("lang", "word"), [("es", "Calculando…"), ("en", "Calculating…")])
def test_a_shared_link_on_a_phone_says_calculating_until_its_own_numbers(
    browser, site_server, lang, word
):
    context = new_context(browser, viewport=PHONE)
    page = context.new_page()
    problems = watch_offline(page, site_server.origin)
    held = []  # Pyodide's wasm, held back: the numbers cannot come until it is let go
    context.route("**/pyodide.asm.wasm", lambda route: held.append(route))
    calc = Calc(page, site_server, lang)
    url = calc.url({"method": "qlora", "seq_len": "4096"})
    # in the HTML the server sends, not written by a script later
    assert word in page.request.get(url).text()
    page.goto(url, wait_until="domcontentloaded")
    pending, figures = page.locator("#calc .calc-peek-pending"), page.locator("#calc .calc-peek")
    assert pending.is_visible() and pending.text_content() == word
    assert not figures.is_visible()  # the build-time figures are not this link's
    box = pending.bounding_box()
    assert box["y"] + box["height"] == pytest.approx(PHONE["height"], abs=1)  # pinned, bottom
    deadline = time.monotonic() + STATE_TIMEOUT_MS / 1000
    while not held and time.monotonic() < deadline:  # until the worker asks for the wasm
        page.wait_for_timeout(50)  # next look, not a wait
    assert held
    for route in held:
        route.continue_()
    calc.wait_quiet()
    assert not pending.is_visible() and figures.is_visible()
    assert_parity(
        calc.outputs(),
        calc_run(calculator.COMMAND, request_for({"method": "qlora", "seq_len": "4096"}))["result"],
        lang,
    )
    page.wait_for_load_state("networkidle")
    context.close()
    assert_clean(problems, f"phone, shared link ({lang})", site_server.origin)


def test_the_default_setup_on_a_phone_shows_its_figures_at_once(browser, site_server):
    # the build-time figures are the default setup's own: no "Calculando…" in their place
    context = new_context(browser, viewport=PHONE)
    page = context.new_page()
    calc = Calc(page, site_server, "es")
    page.goto(calc.url(), wait_until="domcontentloaded")
    assert page.locator("#calc .calc-peek").is_visible()
    assert not page.locator("#calc .calc-peek-pending").is_visible()
    calc.wait_worker()
    page.wait_for_load_state("networkidle")
    context.close()
