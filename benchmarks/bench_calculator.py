"""Speed and weight of the browser calculator, in headless Chromium on a local server.

    python benchmarks/bench_calculator.py [--site DIR [--site DIR2]] [--runs N] [--changes N]
        [--down-mbps 20] [--latency-ms 40] [--no-gzip]

Builds the site (``mkdocs build --strict``, unless ``--site`` points at a built one) and
serves it on 127.0.0.1 the way GitHub Pages does: gzip on the fly for text, JSON and
WebAssembly, nothing for archives (``--no-gzip``: plain files, as ``python -m http.server``).
Every page gets Chromium's network throttling (CDP ``Network.emulateNetworkConditions``:
``--down-mbps`` down, ``--latency-ms`` per request; 0 turns it off), in its dedicated
workers too (not in the service worker's own fetches: before live numbers it only reads its
cache, and on a first visit it is not installed yet).

For the default setup (``calculator/``) and a shared link (``?SHARED_LINK``), each in a
fresh browser context, it prints:

- first visit: first contentful paint (the build-time result is in the HTML), when the
  numbers are live (the worker has Python and ``calc`` loaded: ``performance.mark(
  "calc-ready")``; for a shared link, its own numbers on show: ``"calc-own-numbers"``), and
  the bytes over the wire before that (bodies as sent, compressed where the server
  compresses, plus headers) and when the last of them came (the network's share of the
  wait; the rest is CPU), and the bytes after it (what the page fetches for later visits);
- repeat visit, same context: the same, from the browser's caches and the service worker;
- repeat visit with the network off (``context.set_offline``): whether live numbers come;
- bare Pyodide: a page that only starts Pyodide in a module worker, same server, first
  visit: the gap ready - bare is the calculator's own cost;
- recompute latency p50/p95 over N input changes (from the input event to the new result
  in the DOM; target p95 <= 150 ms), and the first change's own (the page waits 3 s after
  its numbers are live, so the worker's warm-up, worker.js ``warmUp``, is done): on the
  default setup (sequence length and micro-batch size in turn), then with a length
  distribution (``?LENGTHS_QUERY``: sequence length, micro-batch size and epochs in turn;
  the first answer, then up to the second answer that adds the allocator replay's smallest
  card);
- bytes for a guide page (a guide page loads no Pyodide);
- where a first visit's wait goes: when each file's last byte came (network) and when each
  step of the worker's start ended (CPU: WebAssembly instantiated, Python started, the calc
  bundle unpacked, calc imported), medians in ms from the navigation.

``--first-only``: first visits only (no repeat or offline visit, bare Pyodide, recompute
latency or guide pages), for comparing builds quickly on a busy machine. ``--recompute-only``:
the recompute latencies only (and the guide pages' bytes).
"""

from __future__ import annotations

import argparse
import functools
import gzip
import http.server
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make `accuracy` importable
    sys.path.insert(0, str(ROOT))
from accuracy.stats import percentile  # noqa: E402

CHROMIUM = Path(os.environ.get("SYSTEM_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
READY_TIMEOUT_MS = 120_000
# A shared link (not the build-time setup): its own numbers need the worker.
SHARED_LINK = "model=llama-2-7b&method=qlora&micro_batch_size=2&seq_len=4096"

BARE_HTML = """<!doctype html><meta charset="utf-8"><title>bare pyodide</title>
<script type="module">
performance.mark("bare-worker-start");
const worker = new Worker(new URL("bare-worker.js", location.href), {type: "module"});
worker.onmessage = () => { performance.mark("bare-ready"); document.body.dataset.ready = "1"; };
worker.postMessage(new URL("../assets/pyodide/VERSION/", location.href).href);
</script><body></body>"""
BARE_WORKER = """self.onmessage = async (event) => {
  const { loadPyodide } = await import(event.data + "pyodide.mjs");
  await loadPyodide({ indexURL: event.data });
  postMessage("ready");
};"""

RECOMPUTE_JS = """async (changes) => {
  const root = document.getElementById("calc");
  const times = [];
  for (const [id, value] of changes) {
    const before = Number(root.dataset.computed || 0);
    const done = new Promise((resolve) => {
      const obs = new MutationObserver(() => {
        if (Number(root.dataset.computed || 0) > before) { obs.disconnect(); resolve(); }
      });
      obs.observe(root, { attributes: true, attributeFilter: ["data-computed"] });
    });
    const t0 = performance.now();
    const el = document.getElementById(id);
    el.value = value;
    el.dispatchEvent(new Event("input", { bubbles: true }));
    await done;
    times.push(performance.now() - t0);
  }
  return times;
}"""


SETTLED_JS = RECOMPUTE_JS.replace(
    "if (Number(root.dataset.computed || 0) > before)",
    'if (Number(root.dataset.computed || 0) > before && root.dataset.calcPending === "false")',
).replace(
    'attributeFilter: ["data-computed"]', 'attributeFilter: ["data-computed", "data-calc-pending"]'
)
"""Like :data:`RECOMPUTE_JS`, up to the last answer of each change: with a length
distribution the first answer leaves the caching allocator's replay to a second one
(``calc.memory.allocator_deferred``), whose figure (the smallest card) this waits for."""
assert "calcPending" in SETTLED_JS and "data-calc-pending" in SETTLED_JS  # the edit took


def default_changes(n: int) -> list[tuple[str, str]]:
    """Sequence length and micro-batch size in turn, on the default setup."""
    return [
        ("calc-micro_batch_size", str(1 + (i % 8)))
        if i % 2
        else ("calc-seq_len", str(512 + 64 * i))
        for i in range(n)
    ]


LENGTHS_QUERY = "length_stats=mean:900,p90:2000"
"""The setup of the second recompute series: a length distribution (the allocator replayed
over the data's steps on every change of the shape)."""


def lengths_changes(n: int) -> list[tuple[str, str]]:
    """With :data:`LENGTHS_QUERY`: sequence length (from 2048 up: the p90 must fit), micro-batch
    size and epochs in turn (an epochs change keeps the shape: no new replay)."""
    out = []
    for i in range(n):
        kind, k = i % 3, i // 3  # each value differs from the field's last one (else no answer)
        if kind == 0:
            out.append(("calc-seq_len", str(2176 + 128 * (k % 16))))
        elif kind == 1:
            out.append(("calc-micro_batch_size", str(1 + (k + 1) % 8)))
        else:
            out.append(("calc-epochs", str(1 + (k + 1) % 5)))
    return out


# What GitHub Pages compresses (gzip, on the fly, for a client that accepts it): text,
# JavaScript, JSON, SVG and WebAssembly; archives (the stdlib zip, the calc bundle, the
# snapshot) go as they are.
GZIP_TYPES = ("text/", "application/javascript", "application/json", "image/svg+xml",
              "application/wasm")  # fmt: skip


class _Handler(http.server.SimpleHTTPRequestHandler):
    """Static files as GitHub Pages serves them, but for how long a browser may reuse them
    unasked: Pages says ten minutes; here a repeat visit stands for one made later than that,
    so every answer must be revalidated (``no-cache``; an unchanged file costs a 304)."""

    extensions_map = {
        **http.server.SimpleHTTPRequestHandler.extensions_map,
        ".mjs": "text/javascript",
        ".js": "text/javascript",
        ".wasm": "application/wasm",
        ".json": "application/json",
    }
    gzip = True
    _gzipped: dict[str, bytes] = {}  # path -> gzip body (compressed once per run)

    def send_head(self):
        path = self.translate_path(self.path)
        ctype = self.guess_type(path)
        accepts = "gzip" in self.headers.get("Accept-Encoding", "")
        if not (self.gzip and accepts and os.path.isfile(path) and ctype.startswith(GZIP_TYPES)):
            return super().send_head()
        modified = self.date_time_string(int(os.stat(path).st_mtime))
        if self.headers.get("If-Modified-Since") == modified:
            self.send_response(304)
            self.end_headers()
            return None
        body = self._gzipped.get(path)
        if body is None:
            body = self._gzipped[path] = gzip.compress(Path(path).read_bytes(), 6)
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Last-Modified", modified)
        self.end_headers()
        return io.BytesIO(body)

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "no-cache")
        super().end_headers()

    def log_message(self, *args) -> None:
        pass


def build_site(target: Path) -> None:
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    env.pop("SITE_URL", None)
    subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(target)],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
    )


def add_bare_page(site: Path) -> str:
    version = json.loads((ROOT / "node_modules/pyodide/package.json").read_text())["version"]
    bare = site / "_bench"
    bare.mkdir(exist_ok=True)
    (bare / "index.html").write_text(BARE_HTML.replace("VERSION", version), encoding="utf-8")
    (bare / "bare-worker.js").write_text(BARE_WORKER, encoding="utf-8")
    return "_bench/"


def _is_snapshot(url: str) -> bool:
    return url.split("?")[0].endswith(".snapshot.gz")


def throttle(context, page, down_mbps: float, latency_ms: float) -> None:
    """Chromium's own throttling for this page and the workers it starts."""
    if not down_mbps:
        return
    cdp = context.new_cdp_session(page)
    cdp.send("Network.enable")
    rate = down_mbps * 1e6 / 8  # bytes per second
    cdp.send(
        "Network.emulateNetworkConditions",
        {"offline": False, "latency": latency_ms, "downloadThroughput": rate,
         "uploadThroughput": rate / 2},
    )  # fmt: skip


class Traffic:
    """Every finished request of a browser context: when (epoch ms), bytes over the wire
    (body as sent + headers; 0 for an answer from the service worker), URL."""

    def __init__(self, context) -> None:
        self.rows: list[tuple[float, int, str]] = []
        self.started: dict[int, float] = {}  # row index -> when the request was sent (epoch ms)
        context.on("requestfinished", self._finished)

    def _finished(self, request) -> None:
        # when the last byte came (the event itself may be handled later)
        timing = request.timing
        now = timing["startTime"] + max(timing["responseEnd"], 0)
        self.started[len(self.rows)] = timing["startTime"]
        response = request.response()
        if response is not None and response.from_service_worker:
            self.rows.append((now, 0, request.url))
            return
        s = request.sizes()
        self.rows.append((now, s["responseBodySize"] + s["responseHeadersSize"], request.url))

    def split(self, since: int, at_ms: float) -> dict:
        """Bytes and requests of the rows from index ``since``: finished before ``at_ms``,
        after it (the snapshot apart)."""
        out = {"before": 0, "requests": 0, "after": 0, "snapshot": 0, "pyodide": 0, "last": 0.0}
        for when, n, url in self.rows[since:]:
            if _is_snapshot(url):
                out["snapshot"] += n
            elif when <= at_ms:
                out["before"] += n
                out["requests"] += 1
                if n:  # over the wire, not from a cache
                    out["last"] = max(out["last"], when)
                if "/assets/pyodide/" in url:
                    out["pyodide"] += n
            else:
                out["after"] += n
        return out

    def files(self, since: int, origin: float) -> dict[str, tuple[float, float]]:
        """The files of the calculator's start fetched from row ``since``: (sent, last byte),
        ms from ``origin``."""
        out = {}
        for i, (when, _n, url) in enumerate(self.rows[since:], since):
            name = _file_label(url)
            if name and name not in out:
                out[name] = (self.started.get(i, when) - origin, when - origin)
        return out


# The files a first visit needs before live numbers, by what their URL holds (first match).
FILE_LABELS = (
    ("pyodide.asm.wasm", "pyodide.asm.wasm"),
    ("pyodide.asm.mjs", "pyodide.asm.mjs"),
    ("pyodide.mjs", "pyodide.mjs"),
    ("python_stdlib", "stdlib zip"),
    ("pyodide-lock", "package lock"),
    ("/assets/calc/calc-", "calc bundle"),
    ("calculator/worker.js", "worker.js"),
    ("calculator/boot.js", "boot.js"),
    ("calculator/calculator.js", "calculator.js"),
)


def _file_label(url: str) -> str | None:
    path = url.split("?")[0]
    if path.endswith("/calculator/"):
        return "page (HTML)"
    return next((label for key, label in FILE_LABELS if key in path), None)


LIVE_JS = (
    "document.getElementById('calc').dataset.calcWorker === 'up' && "
    "document.getElementById('calc').dataset.calcState === 'ready'"
)
# The service worker, when the page registers one, installed (it is registered after the
# live numbers, when the page is idle).
SW_SETTLED_JS = """async () => {
    const calc = document.getElementById("calc");
    if (!("serviceWorker" in navigator) || !calc.dataset.sw) return "none";
    const deadline = performance.now() + 60000;
    for (;;) {
        const reg = await navigator.serviceWorker.getRegistration();
        if (reg && reg.active && !reg.installing && !reg.waiting) return "active";
        if (performance.now() > deadline) return "not active after 60 s";
        await new Promise((resolve) => setTimeout(resolve, 100));
    }
}"""


def measure_visit(page, url: str, traffic: Traffic, timeout_ms: int = READY_TIMEOUT_MS) -> dict:
    """One load of the calculator page: paint, live numbers, bytes before and after them."""
    since = len(traffic.rows)
    page.goto(url)
    static_at_dcl = page.evaluate("""() => {
        const root = document.getElementById("calc");
        return root && root.querySelectorAll("[data-output][data-value]").length > 0;
    }""")
    # the worker is up (a private signal: data-calc-state is about the numbers, see state.js),
    # and the page shows the form's own numbers
    page.wait_for_function(LIVE_JS, timeout=timeout_ms)
    perf = page.evaluate("""() => ({
        origin: performance.timeOrigin,
        own: performance.getEntriesByName("calc-own-numbers")[0].startTime,
        fcp: (performance.getEntriesByName("first-contentful-paint")[0] || {}).startTime,
        ready: performance.getEntriesByName("calc-ready")[0].startTime,
        start: performance.getEntriesByName("calc-worker-start")[0].startTime,
        timings: JSON.parse(document.getElementById("calc").dataset.calcTimings || "{}"),
    })""")
    live = max(perf["own"], perf["ready"])
    # what the page fetches once the numbers are live (for a later visit), settled
    page.wait_for_load_state("networkidle")
    page.wait_for_timeout(3000)
    sw = page.evaluate(SW_SETTLED_JS)
    page.wait_for_load_state("networkidle")
    return {
        "fcp_ms": perf["fcp"],
        "ready_ms": perf["ready"],
        "start_ms": perf["start"],
        "own_ms": perf["own"],
        "live_ms": live,
        "static_in_dom": static_at_dcl,
        "worker": perf["timings"],
        "service_worker": sw,
        "bytes": traffic.split(since, perf["origin"] + live),
        "origin": perf["origin"],
        "files": traffic.files(since, perf["origin"]),
    }


def measure_offline(context, url: str) -> dict:
    """A repeat visit with the network off: live numbers, or why not."""
    context.set_offline(True)
    page = context.new_page()
    try:
        page.goto(url)
        page.wait_for_function(LIVE_JS, timeout=60_000)
        live = page.evaluate("""() => Math.max(
            performance.getEntriesByName("calc-own-numbers")[0].startTime,
            performance.getEntriesByName("calc-ready")[0].startTime)""")
        return {"live_ms": live}
    except Exception as err:  # the reason is the result
        return {"error": str(err).splitlines()[0][:100]}
    finally:
        page.close()
        context.set_offline(False)


def measure_bare(page, url: str) -> dict:
    page.goto(url)
    page.wait_for_function("document.body.dataset.ready === '1'", timeout=READY_TIMEOUT_MS)
    return page.evaluate("""() => ({
        ready_ms: performance.getEntriesByName("bare-ready")[0].startTime,
        start_ms: performance.getEntriesByName("bare-worker-start")[0].startTime})""")


def guide_bytes(browser, url: str, net: tuple[float, float]) -> dict:
    """Bytes over the wire for one first load of a guide page (no Pyodide expected)."""
    context = browser.new_context()
    traffic = Traffic(context)
    page = context.new_page()
    throttle(context, page, *net)
    page.goto(url)
    page.wait_for_load_state("networkidle")
    context.close()
    return traffic.split(0, float("inf"))


def serve(site: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_Handler, directory=str(site))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_port}"


def run(
    sites: list[Path],
    runs: int,
    changes: int,
    net: tuple[float, float],
    first_only: bool = False,
    recompute_only: bool = False,
) -> list[dict]:
    """Every site measured in the same rounds (interleaved: they see the same machine load,
    so two builds compare on a shared, noisy machine)."""
    from playwright.sync_api import sync_playwright

    served = [(site, *serve(site), add_bare_page(site)) for site in sites]
    out = [{"results": {"bare": [], "calc": [], "link": []}} for _ in sites]
    with sync_playwright() as p:
        launch = {"args": CHROMIUM_ARGS}
        if CHROMIUM.is_file():
            launch["executable_path"] = str(CHROMIUM)
        browser = p.chromium.launch(**launch)
        for _ in range(0 if recompute_only else runs):
            for (_site, _server, origin, bare_path), mine in zip(served, out, strict=True):
                calc_url = f"{origin}/calculator/"
                urls = (
                    ("bare", f"{origin}/{bare_path}"),
                    ("calc", calc_url),
                    ("link", f"{calc_url}?{SHARED_LINK}"),
                )
                for kind, url in urls:
                    if first_only and kind == "bare":
                        continue
                    context = browser.new_context()
                    traffic = Traffic(context)
                    page = context.new_page()
                    throttle(context, page, *net)
                    if kind == "bare":
                        mine["results"]["bare"].append(measure_bare(page, url))
                        context.close()
                        continue
                    first = measure_visit(page, url, traffic)
                    page.close()
                    if first_only:
                        mine["results"][kind].append({"first": first})
                        context.close()
                        continue
                    page = context.new_page()
                    throttle(context, page, *net)
                    repeat = measure_visit(page, url, traffic)
                    page.close()
                    offline = measure_offline(context, url)
                    mine["results"][kind].append(
                        {"first": first, "repeat": repeat, "offline": offline}
                    )
                    context.close()
        for (_site, _server, origin, _bare), mine in zip(served, out, strict=True):
            if first_only:
                break
            context = browser.new_context()
            page = context.new_page()
            measure_visit(page, f"{origin}/calculator/", Traffic(context))
            mine["latencies"] = page.evaluate(RECOMPUTE_JS, default_changes(changes))
            context.close()
            context = browser.new_context()
            page = context.new_page()
            measure_visit(page, f"{origin}/calculator/?{LENGTHS_QUERY}", Traffic(context))
            mine["latencies_lengths"] = page.evaluate(RECOMPUTE_JS, lengths_changes(changes))
            context.close()
            context = browser.new_context()
            page = context.new_page()
            measure_visit(page, f"{origin}/calculator/?{LENGTHS_QUERY}", Traffic(context))
            mine["latencies_settled"] = page.evaluate(SETTLED_JS, lengths_changes(changes))
            context.close()
            mine["guides"] = {
                path: guide_bytes(browser, f"{origin}/{path}", net) for path in ("", "en/")
            }
        browser.close()
    for _site, server, _origin, _bare in served:
        server.shutdown()
    return out


def report(
    label: str, results: dict, latencies: dict, guides: dict, net: tuple[float, float]
) -> None:
    med = statistics.median
    gz = "gzip as GitHub Pages" if _Handler.gzip else "no compression"
    throttled = f"{net[0]:g} Mbps down, {net[1]:g} ms latency" if net[0] else "no throttling"
    print(f"{label}: calculator page, headless Chromium, local server ({gz}; {throttled}); medians")
    if results["bare"]:
        bare = med(r["ready_ms"] for r in results["bare"])
        print(f"  bare Pyodide (first visit): ready {bare:.0f} ms")
    for kind, label in (("calc", "default setup"), ("link", "shared link")):
        rows = results[kind]
        if not rows:  # --recompute-only
            continue
        print(f"  {label} [n={len(rows)}]:")
        for visit in ("first", "repeat"):
            if visit not in rows[0]:
                continue
            v = [r[visit] for r in rows]
            b = {k: med(x["bytes"][k] for x in v) for k in v[0]["bytes"]}
            restored = sum(1 for x in v if x["worker"].get("snapshot"))
            static = all(x["static_in_dom"] for x in v)
            after = f"; after them {b['after'] / 1e6:.2f} MB"
            if b["snapshot"]:
                after += f" + snapshot {b['snapshot'] / 1e6:.2f} MB"
            print(
                f"    {visit:6s}: FCP {med(x['fcp_ms'] for x in v):5.0f} ms (static result in "
                f"DOM: {static}) | live numbers {med(x['live_ms'] for x in v):5.0f} ms "
                f"(worker ready {med(x['ready_ms'] for x in v):5.0f} ms, Pyodide "
                f"{med(x['worker'].get('pyodide_ms', float('nan')) for x in v):.0f} + calc "
                f"{med(x['worker'].get('calc_ms', float('nan')) for x in v):.0f} ms, snapshot "
                f"restored {restored}/{len(v)})"
            )
            # when the last of those bytes came: what the network alone costs (the rest of
            # the wait is the machine's CPU, which a shared machine makes noisy)
            wire = [x["bytes"]["last"] - x["origin"] for x in v if x["bytes"]["last"]]
            wire_done = f", the last at {med(wire):.0f} ms" if wire else ""
            print(
                f"            {b['before'] / 1e6:.2f} MB in {b['requests']:.0f} requests before "
                f"live numbers{wire_done} (Pyodide {b['pyodide'] / 1e6:.2f} MB){after}; "
                f"service worker: {', '.join(sorted({x['service_worker'] for x in v}))}"
            )
        report_phases([r["first"] for r in rows])
        if "offline" not in rows[0]:
            continue
        off = [r["offline"] for r in rows]
        ok = [x["live_ms"] for x in off if "live_ms" in x]
        why = sorted({x["error"] for x in off if "error" in x})
        print(
            f"    offline repeat visit: live numbers in {len(ok)}/{len(off)}"
            + (f", {med(ok):.0f} ms" if ok else "")
            + (f" ({'; '.join(why)})" if why else "")
        )
    for setup, times in latencies.items():
        if times:
            print(
                f"  recompute latency over {len(times)} input changes ({setup}): "
                f"p50 {percentile(times, 50):.1f} ms, p95 {percentile(times, 95):.1f} ms, "
                f"max {max(times):.1f} ms, first change {times[0]:.1f} ms (target p95 <= 150)"
            )
    for path, s in guides.items():
        print(
            f"  guide page /{path}: {s['before'] / 1e6:.2f} MB in {s['requests']} requests, "
            f"of which Pyodide {s['pyodide'] / 1e6:.2f} MB"
        )


# The worker's steps (worker.js), in the order they end.
WORKER_PHASES = (
    ("pyodide_mjs", "worker: pyodide.mjs imported"),
    ("wasm_instantiated", "worker: WebAssembly instantiated"),
    ("python_started", "worker: Python started (stdlib in)"),
    ("bundle_fetched", "worker: calc bundle fetched"),
    ("bundle_unpacked", "worker: calc bundle unpacked"),
    ("view_imported", "worker: calc_view.session imported"),
    ("calc_imported", "worker: calc imported"),
    ("session", "worker: session made (ready)"),
)


def report_phases(visits: list[dict]) -> None:
    """Where the first visits' wait went: medians, ms from the navigation, in time order."""
    med = statistics.median
    events: dict[str, list[float]] = {}
    for v in visits:
        for name, (sent, done) in v["files"].items():
            events.setdefault(f"net: {name} sent", []).append(sent)
            events.setdefault(f"net: {name} last byte", []).append(done)
        events.setdefault("page: worker started (boot.js)", []).append(v["start_ms"])
        timings = v["worker"]
        if "origin" in timings:
            at = timings["origin"] - v["origin"]
            events.setdefault("worker: running", []).append(at)
            for key, label in WORKER_PHASES:
                if key in timings.get("phases", {}):
                    events.setdefault(label, []).append(at + timings["phases"][key])
        events.setdefault("page: worker ready", []).append(v["ready_ms"])
        events.setdefault("page: live numbers", []).append(v["live_ms"])
    rows = sorted(
        (med(times), name)
        for name, times in events.items()
        if name.endswith(("last byte", "wasm sent", "(HTML) sent")) or not name.startswith("net:")
    )
    print("    first visit, where the wait goes (median ms from navigation):")
    previous = 0.0
    for at, name in rows:
        print(f"      {at:7.0f}  (+{at - previous:5.0f})  {name}")
        previous = at


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--site",
        type=Path,
        action="append",
        help="an already built site (default: build one); twice or more: compared in one run",
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--changes", type=int, default=100)
    parser.add_argument("--down-mbps", type=float, default=20.0, help="0: no throttling")
    parser.add_argument("--latency-ms", type=float, default=40.0)
    parser.add_argument("--no-gzip", action="store_true", help="serve files uncompressed")
    parser.add_argument("--first-only", action="store_true", help="first visits only")
    parser.add_argument(
        "--recompute-only", action="store_true", help="recompute latency only (no visits)"
    )
    args = parser.parse_args(argv)
    _Handler.gzip = not args.no_gzip
    net = (args.down_mbps, args.latency_ms)
    with tempfile.TemporaryDirectory() as tmp:
        sites = []
        for i, given in enumerate(args.site or [None]):
            site = Path(tmp) / f"site{i}"
            if given:
                shutil.copytree(given, site)
            else:
                build_site(site)
            sites.append(site)
        measured = run(sites, args.runs, args.changes, net, args.first_only, args.recompute_only)
        for given, m in zip(args.site or ["(built now)"], measured, strict=True):
            report(
                str(given),
                m["results"],
                {
                    "default setup": m.get("latencies", []),
                    LENGTHS_QUERY: m.get("latencies_lengths", []),
                    LENGTHS_QUERY + ", to the replay's figure": m.get("latencies_settled", []),
                },
                m.get("guides", {}),
                net,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
