"""The calculator page under Playwright, shared by the browser tests (not a test module).

``Calc`` drives one loaded calculator page; ``request_for`` is the request CPython gets for a
URL query; ``assert_parity`` checks every ``data-output`` number of the page against
``calc``'s response; ``assert_clean`` fails on any problem the page had offline, except the
browser's own favicon fetches and the Pyodide downloads a page cancelled itself. The
``shared_context`` and ``calc_page`` fixtures are in ``conftest.py``.
"""

from __future__ import annotations

import json
import math
from urllib.parse import urlencode

import calc_view as view
from macros import calculator

READY_TIMEOUT_MS = 90_000
#: Upper bound of any wait on a page's state (the calculator's, Material's search, a worker's
#: request). Tests wait for a state, never for a time; this bound only turns a state that
#: never comes into a failure, so it is generous: a loaded 2-core machine is slow, not wrong.
STATE_TIMEOUT_MS = READY_TIMEOUT_MS
STATE = "document.getElementById('calc').dataset.calcState"
# The page's public signal: "ready" = every number on show belongs to the form's request;
# "invalid" = the form's errors are all on show. Tests wait for it alone.
SETTLED = f"['ready', 'invalid'].includes({STATE})"
WORKER_UP = "document.getElementById('calc').dataset.calcWorker === 'up'"  # private
# Private: no request in flight or queued, so no answer can still arrive and change the page.
NOTHING_PENDING = "document.getElementById('calc').dataset.calcPending === 'false'"
OUTPUTS_JS = """() => [...document.querySelectorAll('#calc [data-output][data-value]')]
    .map(el => [el.dataset.output, el.dataset.value, el.textContent])"""

CACHED_SNAPSHOT_JS = """async ([part, timeoutMs]) => {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
        const cache = await caches.open("calc-pyodide-snapshot");  // the worker's cache
        const urls = (await cache.keys()).map((r) => r.url);
        if (urls.some((u) => u.includes(part)) || performance.now() > deadline) return urls;
        await new Promise((resolve) => setTimeout(resolve, 50));  // next look, not a wait
    }
}"""

# Once the numbers are live, boot.js registers the service worker (calc-sw.js); it is done
# when it is active and its cache (one per build) holds the runtime. null after the bound.
SW_ACTIVE_JS = """async (timeoutMs) => {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
        const reg = await navigator.serviceWorker.getRegistration();
        if (reg && reg.active) {
            const names = (await caches.keys()).filter((n) => n.startsWith("calc-sw-"));
            return { scope: reg.scope, caches: names };
        }
        if (performance.now() > deadline) return null;
        await new Promise((resolve) => setTimeout(resolve, 50));  // next look, not a wait
    }
}"""

FIELDS = calculator.request_fields()
STRINGS = calculator.load_strings()


def tree_outputs(node, found=None) -> list:
    """(data-output, data-value) pairs of a rendered results tree, in document order."""
    found = [] if found is None else found
    if isinstance(node, list):
        attrs = node[1]
        if "data-value" in attrs:
            found.append((attrs["data-output"], attrs["data-value"]))
        for child in node[2:]:
            tree_outputs(child, found)
    return found


# Chromium itself fetches the favicon again when the address changes (history.replaceState)
# and drops that fetch when a page closes or the network is cut: browser chrome, not a request
# of the page, so it is left out too.
def _browser_favicon(entry: str) -> bool:
    return entry.split(": ")[0].endswith("/favicon.png")


def _cancelled_by_the_page(entry: str, origin: str | None) -> bool:
    """A request of this origin that the page (or a worker it terminated) cancelled itself
    (net::ERR_ABORTED): Pyodide's runtime download when a worker is stopped or its page left,
    or the snapshot a repeat visit's worker stores in the background once its numbers are live
    (the page may be left or reloaded during that download; the next visit starts the ordinary
    way and tries again). Not a failure of the site; requests outside the origin are blocked
    and counted apart."""
    if not entry.endswith(": net::ERR_ABORTED") or origin is None:
        return False
    url = entry.rsplit(": ", 1)[0]
    return url.startswith(origin + "/assets/pyodide/") or (
        url.startswith(origin + "/assets/calc/") and url.endswith(".snapshot.gz")
    )


def assert_clean(problems, what: str, origin: str | None = None) -> None:
    problems.failed = [e for e in problems.failed if not _cancelled_by_the_page(e, origin)]
    favicon = [e for e in problems.failed if _browser_favicon(e)]
    problems.failed = [e for e in problems.failed if e not in favicon]
    for entry in favicon:
        line = "Failed to load resource: " + entry.split(": ", 1)[1]
        if line in problems.console_errors:
            problems.console_errors.remove(line)
    problems.assert_clean(what)


# URL parameters of the page that are not request keys: the form's mode, and the dataset
# size as examples × average tokens (multiplied into dataset_tokens, which the URL holds too)
PAGE_ONLY_PARAMS = {"mode", "examples", "example_tokens"}


def to_number(text: str):
    """What the page sends for a number typed as ``text`` (JSON keeps whole numbers whole)."""
    value = float(text)
    return int(value) if value.is_integer() and abs(value) < 2**53 else value


def request_for(query: dict) -> dict:
    """The request CPython gets for a URL query: the page's defaults, then the query."""
    request = calculator.default_request()
    for key, text in query.items():
        if key in PAGE_ONLY_PARAMS:
            continue
        kind = calculator.input_kind(FIELDS[key])
        if key == "model" and text.startswith("{"):
            request[key] = json.loads(text)
        elif kind in ("int", "number"):
            request[key] = to_number(text)
        elif kind == "bool":
            request[key] = text == "true"
        elif kind == "targets":
            request[key] = text if text == "all-linear" else text.split(",")
        else:
            request[key] = text
    # a key with a default per method follows the method the query sets (form-state.js)
    for key, by_method in calculator.METHOD_DEFAULTS.items():
        if key not in query and request.get("method") in by_method:
            request[key] = by_method[request["method"]]
    return request


def assert_parity(page_outputs: list, response: dict, lang: str) -> None:
    assert page_outputs, "no data-output elements"
    expected_paths = [
        p for p, _ in tree_outputs(view.render_results(response, lang, STRINGS[lang]))
    ]
    assert [p for p, _, _ in page_outputs] == expected_paths
    for path, raw, _text in page_outputs:
        assert_raw_equals(raw, view.resolve(response, path), path)


def assert_raw_equals(raw: str, value: object, path: str) -> None:
    """A ``data-value`` as the page wrote it equals calc's value (booleans as true/false,
    integers exactly, other numbers to 1e-9)."""
    if isinstance(value, bool):
        assert raw == ("true" if value else "false"), path
    elif isinstance(value, int):
        assert int(raw) == value, path
    else:
        assert math.isclose(float(raw), value, rel_tol=1e-9, abs_tol=0.0), path


class Calc:
    """One loaded calculator page."""

    def __init__(self, page, server, lang: str):
        self.page, self.server, self.lang = page, server, lang

    def url(self, query: dict | None = None) -> str:
        base = self.server.url("calculator/" if self.lang == "es" else "en/calculator/")
        return base + ("?" + urlencode(query) if query else "")

    def open(self, query: dict | None = None) -> None:
        # A default setup is "ready" before its worker has loaded; leaving the page then
        # would abort the worker's downloads (a failed request of the page): wait for it.
        if self.page.evaluate("document.getElementById('calc') !== null"):
            self.wait_worker()
        self.page.goto(self.url(query))
        self.wait_ready()

    def wait_ready(self) -> None:
        self.page.wait_for_function(f"{STATE} === 'ready'", timeout=READY_TIMEOUT_MS)

    def settle(self) -> None:
        """After an edit (the page turns "computing" at once): its answer is on show."""
        self.page.wait_for_function(SETTLED, timeout=READY_TIMEOUT_MS)

    def wait_worker(self) -> None:
        self.page.wait_for_function(WORKER_UP, timeout=READY_TIMEOUT_MS)

    def wait_quiet(self) -> None:
        """Ready, the worker up and nothing pending: no answer can still change the page."""
        self.page.wait_for_function(
            f"{STATE} === 'ready' && {WORKER_UP} && {NOTHING_PENDING}", timeout=READY_TIMEOUT_MS
        )

    def wait_cached_snapshot(self, part: str) -> list[str]:
        """The URLs in the worker's snapshot cache once one contains ``part`` (the worker
        stores the snapshot after it has started and posts nothing when done, so Cache
        Storage itself is polled, in the page); whatever is there after the bound, if not."""
        return self.page.evaluate(CACHED_SNAPSHOT_JS, [part, STATE_TIMEOUT_MS])

    def wait_service_worker(self) -> dict | None:
        """The service worker's scope and caches once it is active (it installs after the
        numbers are live, in the background: a test that then cuts the network or closes the
        page waits for it, or its downloads would fail); None if it never becomes active."""
        return self.page.evaluate(SW_ACTIVE_JS, STATE_TIMEOUT_MS)

    def navigate(self, query: dict) -> None:
        """Go to a query the way the back button does: no reload."""
        self.page.evaluate(
            """q => {
            history.pushState(null, '', location.pathname + q);
            window.dispatchEvent(new PopStateEvent('popstate'));
        }""",
            "?" + urlencode(query) if query else "",
        )
        self.settle()

    def outputs(self) -> list:
        return self.page.evaluate(OUTPUTS_JS)

    def error_for(self, field: str):
        el = self.page.locator(f'#calc [data-error-for="{field}"]')
        return None if el.is_hidden() else (el.get_attribute("data-error-code"), el.text_content())

    def state(self) -> str:
        return self.page.evaluate(STATE)


def new_context(browser, **options):
    """A fresh browser context whose waits are bounded by ``STATE_TIMEOUT_MS``, not by
    Playwright's 30 s default: every wait in these tests is for a state."""
    context = browser.new_context(**options)
    context.set_default_timeout(STATE_TIMEOUT_MS)
    return context


def close_calculator_page(page) -> None:
    """Close a calculator page of the shared context once its worker is up: closing it while
    the worker downloads Pyodide aborts those requests, which the context's watcher (the
    calc_page fixture's) would count as failures of the site."""
    if page.evaluate("document.getElementById('calc') !== null"):
        page.wait_for_function(WORKER_UP, timeout=READY_TIMEOUT_MS)
    page.close()
