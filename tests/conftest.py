"""Shared fixtures for the site and browser tests.

Fixtures (reuse them; don't build or serve the site yourself):

- ``built_site`` (session): the site built ONCE with ``mkdocs build --strict``
  into a temporary directory; a :class:`pathlib.Path`.
- ``site_server`` (session): a static HTTP server on 127.0.0.1 (random free
  port) serving ``built_site``; a :class:`SiteServer` with ``.url(path)``.
- ``browser_type_launch_args`` (session, overrides pytest-playwright's): uses
  the system Chromium when there is one, with flags that keep it offline.
- ``offline_page``: a Playwright page whose requests outside the test server
  are aborted, with a :class:`PageProblems` collector; see its docstring.

Helpers (import from ``conftest``): :func:`run_mkdocs_build`,
:func:`site_pages`, :func:`parse_page`, :func:`pyodide_info`, :func:`watch_offline`,
:func:`settle_page`,
:class:`PageProblems`.

Markers (pyproject.toml): ``browser`` for Playwright tests, ``build`` for
tests that run mkdocs builds; select with ``-m``, e.g. ``-m "not browser"``.
Accessibility: ``axe_playwright_python.sync_playwright.Axe().run(page)``
works offline (axe-core is bundled with the package).
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from hypothesis import settings

# Property tests must not be timed: these machines are shared and noisy, so
# Hypothesis' per-example deadline would make them flaky. Counted, not timed.
settings.register_profile("project", deadline=None, print_blob=True)
settings.load_profile("project")

REPO_ROOT = Path(__file__).resolve().parent.parent
#: Chromium used when present (Debian's package; scripts/setup.sh installs it
#: as root on Debian). Otherwise, or with SYSTEM_CHROMIUM="", Playwright's own.
SYSTEM_CHROMIUM = os.environ.get("SYSTEM_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",  # needed as root (CI containers)
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
#: A built page has settled: loaded; Material's search index built (its results line has
#: turned from "initialising" to the "type to search" prompt); on the calculator page, the
#: worker up (or failed), the form's answer on show and no answer still to come.
PAGE_SETTLED_JS = """() => {
    if (document.readyState !== "complete") return false;
    const meta = document.querySelector(".md-search-result__meta");
    const config = document.getElementById("__config");
    if (meta && config) {
        const prompt = JSON.parse(config.textContent).translations["search.result.placeholder"];
        if (meta.textContent.trim() !== prompt) return false;
    }
    const calc = document.getElementById("calc");
    if (!calc) return true;
    const d = calc.dataset;
    return ["up", "failed"].includes(d.calcWorker) && d.calcPending !== "true"
        && ["ready", "invalid", "error"].includes(d.calcState);
}"""


# --- building ---------------------------------------------------------------


def run_mkdocs_build(
    site_dir: Path,
    config_file: Path | None = None,
    extra_env: dict[str, str] | None = None,
    timeout_s: float = 300,
) -> subprocess.CompletedProcess[str]:
    """Run ``mkdocs build --strict`` in a subprocess and return the result.

    Does not raise on a failed build: check ``returncode`` and read
    ``stdout + stderr``. ``config_file`` defaults to the repository's
    ``mkdocs.yml``; ``SITE_URL`` is unset unless ``extra_env`` sets it.
    """
    env = {k: v for k, v in os.environ.items() if k != "SITE_URL"}
    env["NO_MKDOCS_2_WARNING"] = "1"
    env.update(extra_env or {})
    cmd = [
        sys.executable, "-m", "mkdocs", "build", "--strict",
        "--config-file", str(config_file or REPO_ROOT / "mkdocs.yml"),
        "--site-dir", str(site_dir),
    ]  # fmt: skip
    return subprocess.run(
        cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=timeout_s
    )


# The site is built once per test run, in the background from the moment the tests are
# collected: the tests that do not need it run meanwhile (they are ordered first), so the
# build's minute or two overlaps them instead of adding to the run. Under pytest-xdist
# (``-n``) the workers share that one build: it writes into the run's common temporary
# directory while holding a lock there, and ``built_site`` waits on the lock.

_BUILD_PY = """import subprocess, sys
site, done, failed, timeout, *cmd = sys.argv[1:]
try:
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=float(timeout))
except subprocess.TimeoutExpired as late:
    # said once, in the failure log every waiting test reads, not a build per test again
    with open(failed, "w", encoding="utf-8") as log:
        log.write(f"mkdocs build did not finish in {late.timeout:.0f} s")
else:
    if run.returncode == 0:
        open(done, "w").close()
    else:
        with open(failed, "w", encoding="utf-8") as log:
            log.write(run.stdout + "\\n" + run.stderr)
"""

BACKGROUND_BUILD_TIMEOUT_S = 2700
"""How long the shared background build may take. The build computes the validation pages'
figures (the time model's fit and leave-one-source-out among them); on this two-core machine,
beside the two test workers, it took 20 minutes on 2026-12-06, against 1,200 s allowed
then. The CI run's own limit is 90 minutes."""


def _shared_build_paths(config: pytest.Config) -> tuple[Path, Path, Path, Path]:
    """(site, lock, done marker, failure log) in the directory this run's workers share."""
    root = config._tmp_path_factory.getbasetemp()  # type: ignore[attr-defined]
    if hasattr(config, "workerinput"):  # xdist: basetemp is this worker's, under the run's
        root = root.parent
    return root / "site", root / "site.lock", root / "site.built", root / "site.failed"


def _needs_site(item: pytest.Item) -> bool:
    """Uses the built site, or builds a site of its own (marker ``build``): those go after
    the background build has warmed the caches every build reads (the Pyodide snapshot)."""
    return (
        "built_site" in getattr(item, "fixturenames", ())
        or item.get_closest_marker("build") is not None
    )


@pytest.hookimpl(trylast=True)  # after -k and -m have deselected: only the tests that run
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    """Tests that need the built site go last (stable order otherwise), and the build starts
    now, in the background, if any test needs it and no other worker has started it."""
    items.sort(key=_needs_site)
    if not any(_needs_site(item) for item in items) or config.getoption("collectonly"):
        return
    import fcntl

    site, lock_path, done, failed = _shared_build_paths(config)
    lock = open(lock_path, "a")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:  # another worker is building
        lock.close()
        return
    if done.exists() or failed.exists():  # another worker has built it already
        lock.close()
        return
    env = {k: v for k, v in os.environ.items() if k != "SITE_URL"}
    env["NO_MKDOCS_2_WARNING"] = "1"
    cmd = [
        sys.executable,
        "-m",
        "mkdocs",
        "build",
        "--strict",
        "--config-file",
        str(REPO_ROOT / "mkdocs.yml"),
        "--site-dir",
        str(site),
    ]
    # the builder inherits the locked file and holds the lock until it has written a marker
    subprocess.Popen(
        [
            sys.executable,
            "-c",
            _BUILD_PY,
            str(site),
            str(done),
            str(failed),
            str(BACKGROUND_BUILD_TIMEOUT_S),
            *cmd,
        ],
        cwd=REPO_ROOT,
        env=env,
        pass_fds=(lock.fileno(),),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    lock.close()


@pytest.fixture(scope="session")
def built_site(request: pytest.FixtureRequest) -> Path:
    """The site built once per test run (``mkdocs build --strict``).

    Returns the site directory (``index.html`` = Spanish home,
    ``en/index.html`` = English home). Fails every test that uses it, with the
    build log, if the build fails. Treat it as read-only, except under a
    directory whose name starts with ``_test`` (ignored by :func:`site_pages`).
    """
    import fcntl

    site, lock_path, done, failed = _shared_build_paths(request.config)
    with open(lock_path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # waits for a build in progress; released on close
        if not done.exists() and not failed.exists():  # none started (e.g. one test by id)
            result = run_mkdocs_build(site)
            if result.returncode == 0:
                done.touch()
            else:
                failed.write_text(f"{result.stdout}\n{result.stderr}", encoding="utf-8")
    if failed.exists():
        pytest.fail("mkdocs build failed:\n" + failed.read_text(encoding="utf-8"), pytrace=False)
    return site


class PageParser(HTMLParser):
    """What the site tests read from a built page: language, title, meta tags, the language
    switcher's links, every element id and every link."""

    def __init__(self) -> None:
        super().__init__()
        self.html_lang: str | None = None
        self.title = ""
        self.meta: dict[str, str] = {}
        self.switcher: dict[str, str] = {}  # hreflang -> href of the language switcher
        self.ids: set[str] = set()
        self.links: list[str] = []
        self._in_title = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "html":
            self.html_lang = a.get("lang")
        elif tag == "title":
            self._in_title = True
        elif tag == "meta" and "name" in a:
            self.meta[a["name"]] = a.get("content") or ""
        elif tag == "a" and a.get("href"):
            self.links.append(a["href"])
            if "md-select__link" in (a.get("class") or "").split() and "hreflang" in a:
                self.switcher[a["hreflang"]] = a["href"]

    def handle_endtag(self, tag):
        if tag == "title":
            self._in_title = False

    def handle_data(self, data):
        if self._in_title:
            self.title += data


def parse_page(path: Path) -> PageParser:
    parser = PageParser()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def site_pages(site_dir: Path) -> list[str]:
    """Site-relative paths of every built HTML page, sorted.

    Skips the bundled Pyodide runtime and test-only directories (``_test*``).
    """
    pages = []
    for path in sorted(site_dir.rglob("*.html")):
        rel = path.relative_to(site_dir).as_posix()
        if rel.startswith("assets/pyodide/") or any(p.startswith("_test") for p in rel.split("/")):
            continue
        pages.append(rel)
    return pages


def pyodide_info() -> dict[str, str]:
    """Version and site-relative path of the bundled Pyodide (as the hook computes them)."""
    manifest = REPO_ROOT / "node_modules" / "pyodide" / "package.json"
    version = json.loads(manifest.read_text(encoding="utf-8"))["version"]
    return {"version": version, "path": f"assets/pyodide/{version}/"}


# --- serving ----------------------------------------------------------------


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    # Module scripts and WebAssembly need their exact MIME types.
    extensions_map = {
        **http.server.SimpleHTTPRequestHandler.extensions_map,
        ".mjs": "text/javascript",
        ".js": "text/javascript",
        ".wasm": "application/wasm",
        ".json": "application/json",
    }

    def log_message(self, format: str, *args) -> None:  # `format`: the stdlib's parameter name
        pass


@dataclass
class SiteServer:
    """A running static server; ``origin`` is ``http://127.0.0.1:<port>``."""

    origin: str
    root: Path

    def url(self, path: str = "") -> str:
        """Absolute URL of a site-relative path (``""`` is the home page)."""
        return f"{self.origin}/{path.lstrip('/')}"


@pytest.fixture(scope="session")
def site_server(built_site: Path):
    """Serve ``built_site`` on 127.0.0.1 at a free port for the whole session."""
    handler = functools.partial(_QuietHandler, directory=str(built_site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield SiteServer(origin=f"http://127.0.0.1:{server.server_port}", root=built_site)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


# --- browser ----------------------------------------------------------------


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict) -> dict:
    """pytest-playwright's launch args, plus the system Chromium when present.

    The extra flags stop Chromium's own background traffic, so any request
    outside the test server comes from the page under test.
    """
    args = dict(browser_type_launch_args)
    if SYSTEM_CHROMIUM and os.access(SYSTEM_CHROMIUM, os.X_OK):
        args["executable_path"] = SYSTEM_CHROMIUM
    args["args"] = [*args.get("args", []), *CHROMIUM_ARGS]
    return args


@dataclass
class PageProblems:
    """What went wrong while a page ran; empty lists mean a clean page.

    - ``aborted``: requests outside the allowed origin (aborted by routing)
    - ``failed``: requests that failed for any other reason
    - ``http_errors``: responses with status >= 400
    - ``page_errors``: uncaught exceptions in the page
    - ``console_errors``: ``console.error`` messages (incl. failed resources)
    """

    aborted: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    http_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    requested: list[str] = field(default_factory=list)

    def problems(self) -> dict[str, list[str]]:
        """Non-empty problem lists by name (``requested`` is not a problem)."""
        names = ("aborted", "failed", "http_errors", "page_errors", "console_errors")
        return {name: getattr(self, name) for name in names if getattr(self, name)}

    def assert_clean(self, what: str = "page") -> None:
        """Fail with every recorded problem, if any."""
        found = self.problems()
        assert not found, f"{what}: " + json.dumps(found, indent=2)


def _same_origin(url: str, origin: str) -> bool:
    parts = urlsplit(url)
    if parts.scheme in ("data", "blob", "about"):
        return True
    return f"{parts.scheme}://{parts.netloc}" == origin


def watch_offline(page, origin: str) -> PageProblems:
    """Abort every request of ``page``'s context outside ``origin``; record problems.

    Routes on the browser context, so requests from workers started by the
    page are covered as well. Call before ``page.goto``.
    """
    found = PageProblems()

    def route(route) -> None:
        url = route.request.url
        if _same_origin(url, origin):
            found.requested.append(url)
            route.continue_()
        else:
            found.aborted.append(url)
            route.abort("blockedbyclient")

    def on_request_failed(request) -> None:
        if request.url not in found.aborted:
            found.failed.append(f"{request.url}: {request.failure}")

    def on_response(response) -> None:
        if response.status >= 400:
            found.http_errors.append(f"{response.status} {response.url}")

    def on_console(message) -> None:
        if message.type == "error":
            found.console_errors.append(message.text)

    context = page.context
    context.route("**/*", route)
    context.on("requestfailed", on_request_failed)
    context.on("response", on_response)
    page.on("pageerror", lambda error: found.page_errors.append(str(error)))
    page.on("console", on_console)
    return found


def settle_page(page, timeout_ms: float = 90_000) -> None:
    """Wait until a built page has settled (:data:`PAGE_SETTLED_JS`) and the network is
    idle again (what it fetched once settled: the calculator's snapshot, search's lunr)."""
    page.wait_for_function(PAGE_SETTLED_JS, timeout=timeout_ms)
    page.wait_for_load_state("networkidle", timeout=timeout_ms)


@pytest.fixture
def offline_page(page, site_server: SiteServer):
    """``(page, problems)``: a fresh Playwright page, offline except for ``site_server``.

    Every request outside the test server is aborted and recorded;
    ``problems.assert_clean()`` fails on aborted or failed requests, HTTP
    errors, page errors and console errors. Usage::

        def test_x(offline_page, site_server):
            page, problems = offline_page
            page.goto(site_server.url("en/"))
            problems.assert_clean()
    """
    problems = watch_offline(page, site_server.origin)
    return page, problems


@pytest.fixture
def pyodide_smoke_dir(built_site: Path) -> Path:
    """Test-only Pyodide smoke page copied into the served site (``_test_smoke/``)."""
    target = built_site / "_test_smoke"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(Path(__file__).parent / "browser_assets" / "pyodide_smoke", target)
    return target


# --- the calculator page, shared by the browser tests (tests/calculator_page.py) -------------


@pytest.fixture
def context(context):
    """pytest-playwright's context, its waits bounded by ``STATE_TIMEOUT_MS`` (tests wait
    for states; the bound only turns a state that never comes into a failure)."""
    from calculator_page import STATE_TIMEOUT_MS

    context.set_default_timeout(STATE_TIMEOUT_MS)
    return context


@pytest.fixture(scope="module")
def shared_context(browser, site_server):
    from calculator_page import new_context

    context = new_context(browser)
    yield context
    context.close()


@pytest.fixture(scope="module", params=["es", "en"])
def calc_page(request, shared_context, site_server):
    """A calculator page per language, loaded once, offline except for localhost."""
    page = shared_context.new_page()
    problems = watch_offline(page, site_server.origin)
    from calculator_page import Calc, assert_clean

    calc = Calc(page, site_server, request.param)
    calc.open()
    yield calc
    # the worker and Material's search load in the background: closing mid-load is not a
    # failure of the page
    calc.wait_worker()
    page.wait_for_load_state("networkidle")
    page.close()
    assert_clean(problems, f"calculator page ({request.param})", site_server.origin)
