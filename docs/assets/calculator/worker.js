// Module Web Worker: runs the `calc` package in Pyodide, off the page's main thread.
// It starts loading Pyodide and the calc bundle at once, from the URLs in its own query
// (?pyodide=<dir>/&bundle=<zip>&snapshot=<gz>&stdlib=<zip>&lock=<json>), so nothing waits
// for the page. stdlib and lock: the standard library and package lock cut to what calc
// needs (hooks/pyodide_stdlib.py); without them Pyodide loads its own, in full.
// Messages in:  {type: "init", lang, strings, command, warm}  (warm: the page's build-time
//                 request as JSON text, answered once after "ready" and dropped; or null)
//               {type: "compute", id, command, request, defer}  (request: JSON text; defer:
//                 answer without the caching allocator's replay, then send it as "update")
//               {type: "config", id, action, payload}  (config-import.js: import/export, JSON text)
//               {type: "crash"}  (makes the worker die, to exercise the page's restart path)
// Messages out: {type: "ready", timings} | {type: "failed", detail}
//               {type: "result", id, out}  (out: {view, pending} (the results tree, and
//                 whether an "update" with the replay follows), {error, errors} for bad
//                 input, or {internal_error} for a bug in calc: passed through as Python
//                 wrote it, the page tells them apart)
//               {type: "update", id, out}  (a deferred answer with the allocator's replay:
//                 sent COMPLETE_DELAY_MS after the answer unless another compute came first)
//               {type: "crashed", id, detail}
//               {type: "config-result", id, out}  (out: {result} or {error})
//               {type: "warmed"}  (the warm-up answer is done: a private signal, benchmarks)
// Python is called through one entry, calc_view.session.Session(lang, strings).handle(command,
// request_json, defer, lean), which never raises; any JavaScript-side exception means Pyodide
// itself broke, so the worker reports it and closes, and the page starts a new one.

const PACKAGE_DIR = "/home/pyodide/calc-bundle"; // = hooks/pyodide_snapshot.py PACKAGE_DIR
const SNAPSHOT_CACHE = "calc-pyodide-snapshot"; // Cache Storage name (see cachedSnapshot)
const SNAPSHOT_PREFETCH_DELAY_MS = 1500; // after the first results, not during them
// A deferred answer's replay (tens to hundreds of ms in Pyodide, which cannot be interrupted)
// starts this long after the answer: a change the reader makes meanwhile skips it.
const COMPLETE_DELAY_MS = 30;
// The warm-up (see warmUp) starts this long after "ready": a page that has a request of its
// own (a shared link) sends it at once, and that request is answered instead.
const WARM_DELAY_MS = 100;
// Cache Storage key (no request is ever made to it) that says this browser has run the
// calculator before: the snapshot is fetched on the second visit, never on the first.
const VISITED_KEY = new URL("calc-visited", self.location.href).href;
const t0 = performance.now();
// When each step of the start ended, in ms from t0 (benchmarks/bench_calculator.py reads
// them, with the worker's time origin, to split the wait between network and CPU).
const phases = {};
const phase = (name) => { phases[name] = Math.round(performance.now() - t0); };
const params = new URL(self.location.href).searchParams;
const booting = boot(params.get("pyodide"), params.get("bundle"), params.get("snapshot"),
                     params.get("stdlib"), params.get("lock"));
booting.catch(() => {}); // handled when "init" arrives; not an unhandled rejection before
let handle = null;
let session = null;
let completion = null; // the answer whose replay is still to come: {id}
let warming = null; // the warm-up's timer, until it runs or a request comes

async function bytes(url) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`HTTP ${response.status} for ${url}`);
  return response;
}

// The build's memory snapshot of Pyodide with calc already imported (gzipped). Restoring
// it skips Python's start-up and calc's import, most of the worker's start. It is used
// only from this origin's Cache Storage: Pyodide waits for the snapshot before it even
// fetches its wasm, so on a first visit downloading ~6 MB more would delay the start.
// A first visit starts Python the ordinary way and fetches nothing more (a reader who
// comes once pays for no snapshot); a second one, once its numbers are live, stores the
// snapshot for the visits after it.
async function cachedSnapshot(url) {
  try {
    if (typeof caches === "undefined") return null; // no Cache Storage (not https)
    const response = await (await caches.open(SNAPSHOT_CACHE)).match(url);
    if (!response) return null;
    const stream = response.body.pipeThrough(new DecompressionStream("gzip"));
    return new Uint8Array(await new Response(stream).arrayBuffer());
  } catch (err) {
    forgetSnapshot(url); // not a gzip stream: do not try it again
    return null;
  }
}

// A snapshot this browser could not restore is dropped and marked, so it is not
// downloaded again on every visit.
function forgetSnapshot(url, unusable = false) {
  if (typeof caches === "undefined") return Promise.resolve();
  return caches.open(SNAPSHOT_CACHE).then(async (cache) => {
    await cache.delete(url);
    if (unusable) await cache.put(unusableKey(url), new Response("unusable"));
  }).catch(() => {});
}

function unusableKey(url) {
  const key = new URL(url);
  key.searchParams.set("unusable", "1");
  return key.href;
}

// After "ready", on a repeat visit: store the snapshot for the next visit (only this
// build's: older ones go), unless the connection is slow or the reader saves data. On a
// first visit only the visit is noted.
function cacheSnapshotLater(url) {
  const connection = self.navigator && self.navigator.connection;
  const slow = connection && (connection.saveData
    || /(^|-)(2g|3g)$/.test(String(connection.effectiveType || "")));
  if (slow || typeof caches === "undefined") return;
  setTimeout(async () => {
    try {
      const cache = await caches.open(SNAPSHOT_CACHE);
      if (await cache.match(unusableKey(url))) return;
      if (!(await cache.match(VISITED_KEY))) {
        await cache.put(VISITED_KEY, new Response("1"));
        return;
      }
      const response = await fetch(url);
      if (!response.ok) return;
      for (const key of await cache.keys()) {
        if (key.url !== url && key.url !== VISITED_KEY) await cache.delete(key);
      }
      await cache.put(url, response);
    } catch (err) {
      /* offline or out of quota: the next visit starts the ordinary way */
    }
  }, SNAPSHOT_PREFETCH_DELAY_MS);
}

async function boot(pyodideUrl, bundleUrl, snapshotUrl, stdlibUrl, lockUrl) {
  // The bundle downloads (and a cached snapshot is read) while Pyodide's script loads.
  const bundle = bytes(bundleUrl).then((response) => response.arrayBuffer());
  bundle.then(() => phase("bundle_fetched"), () => {});
  const usable = snapshotUrl && typeof DecompressionStream === "function";
  const [{ loadPyodide }, snapshot] = await Promise.all([
    import(pyodideUrl + "pyodide.mjs").then((module) => { phase("pyodide_mjs"); return module; }),
    usable ? cachedSnapshot(snapshotUrl) : null]);
  // fsInit runs once the WebAssembly module is instantiated, before Python starts
  const options = { indexURL: pyodideUrl, stdout: () => {}, stderr: () => {},
                    fsInit: () => phase("wasm_instantiated") };
  if (stdlibUrl) options.stdLibURL = stdlibUrl;
  if (lockUrl) options.lockFileURL = lockUrl;
  let pyodide = null;
  if (snapshot) {
    try {
      pyodide = await loadPyodide({ ...options, _loadSnapshot: snapshot });
    } catch (err) {
      pyodide = null; // a snapshot this browser cannot restore: start the ordinary way
      await forgetSnapshot(snapshotUrl, true);
    }
  }
  const restored = pyodide !== null;
  if (!pyodide) pyodide = await loadPyodide(options);
  const t1 = performance.now();
  phase("python_started");
  // The snapshot holds Python's memory, not its files: calc's data files come from here.
  pyodide.unpackArchive(await bundle, "zip", { extractDir: PACKAGE_DIR });
  phase("bundle_unpacked");
  pyodide.runPython(`import sys\nif ${JSON.stringify(PACKAGE_DIR)} not in sys.path: sys.path.insert(0, ${JSON.stringify(PACKAGE_DIR)})`);
  const view = pyodide.pyimport("calc_view.session");
  phase("view_imported");
  pyodide.pyimport("calc"); // import now, so the first request does not pay for it
  phase("calc_imported");
  if (usable && !restored) cacheSnapshotLater(snapshotUrl);
  return { view, t1, restored, pyodide };
}

async function init(msg) {
  const { view, t1, restored } = await booting;
  session = view.Session.from_json(msg.lang, JSON.stringify(msg.strings));
  handle = session.handle;
  const t2 = performance.now();
  phase("session");
  postMessage({ type: "ready", timings: { pyodide_ms: t1 - t0, calc_ms: t2 - t1, total_ms: t2 - t0,
                                          snapshot: restored, origin: performance.timeOrigin + t0,
                                          phases } });
  if (msg.warm) warming = setTimeout(() => warmUp(msg.command, msg.warm), WARM_DELAY_MS);
}

// A fresh worker's first answer imports the modules it needs and fills the tables calc
// keeps (catalogue, presets, strings): about three times a later answer's time. Answering
// the page's build-time request once, while the reader has changed nothing yet, takes that
// off their first change (Session.warm drops the answer).
function warmUp(command, request) {
  warming = null;
  try {
    session.warm(command, request);
  } catch (err) {
    crashed(null, err);
    return;
  }
  postMessage({ type: "warmed" });
}

function compute(msg) {
  completion = null; // a newer request: the last answer's replay is no longer wanted
  if (warming !== null) { // the request warms the worker itself
    clearTimeout(warming);
    warming = null;
  }
  let text;
  try {
    // lean: the results tree and whether a replay follows, not calc's whole response
    text = handle(msg.command, msg.request, msg.defer === true, true);
  } catch (err) {
    crashed(msg.id, err);
    return;
  }
  const out = JSON.parse(text);
  postMessage({ type: "result", id: msg.id, out });
  if (msg.defer === true && out.pending === true) { // the lean answer says a replay follows
    const waiting = { id: msg.id };
    completion = waiting;
    setTimeout(() => complete(waiting), COMPLETE_DELAY_MS);
  }
}

// The replay of a deferred answer, unless a newer request came first.
function complete(waiting) {
  if (completion !== waiting) return;
  completion = null;
  let text;
  try {
    text = session.complete(true);
  } catch (err) {
    crashed(waiting.id, err);
    return;
  }
  const out = JSON.parse(text);
  if (!out.none) postMessage({ type: "update", id: waiting.id, out });
}

function crashed(id, err) {
  postMessage({ type: "crashed", id, detail: String(err && err.message ? err.message : err) });
  close();
}

self.onmessage = (event) => {
  const msg = event.data || {};
  if (msg.type === "init") {
    init(msg).catch((err) => postMessage({ type: "failed", detail: String(err && err.message ? err.message : err) }));
  } else if (msg.type === "config") {
    booting.then(({ pyodide }) => {
      const text = pyodide.pyimport("calc.config_import.browser").handle(msg.action, msg.payload);
      postMessage({ type: "config-result", id: msg.id, out: JSON.parse(text) });
    }).catch((err) => postMessage({ type: "crashed", id: msg.id, detail: String(err && err.message ? err.message : err) }));
  } else if (msg.type === "compute") {
    if (handle === null) {
      postMessage({ type: "crashed", id: msg.id, detail: "not ready" });
      close();
      return;
    }
    compute(msg);
  } else if (msg.type === "crash") {
    setTimeout(() => {
      throw new Error("crash requested");
    });
  }
};
