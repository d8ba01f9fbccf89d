// Module Web Worker: runs the `calc` package in Pyodide, off the page's main thread.
// It starts loading Pyodide and the calc bundle at once, from the URLs in its own query
// (?pyodide=<dir>/&bundle=<zip>), so nothing waits for the page.
// Messages in:  {type: "init", lang, strings}
//               {type: "compute", id, command, request}  (request: JSON text)
//               {type: "crash"}  (makes the worker die, to exercise the page's restart path)
// Messages out: {type: "ready", timings} | {type: "failed", detail}
//               {type: "result", id, out}  (out: {result, view} or {error})
//               {type: "crashed", id, detail}
// Python is called through one entry, calculator_view.handle(command, request_json), which
// never raises for bad input; any JavaScript-side exception means Pyodide itself broke,
// so the worker reports it and closes, and the page starts a new one.

const PACKAGE_DIR = "/home/pyodide/calc-bundle";
const t0 = performance.now();
const params = new URL(self.location.href).searchParams;
const booting = boot(params.get("pyodide"), params.get("bundle"));
booting.catch(() => {}); // handled when "init" arrives; not an unhandled rejection before
let handle = null;

async function boot(pyodideUrl, bundleUrl) {
  // The bundle downloads while Pyodide boots.
  const bundle = fetch(bundleUrl).then((response) => {
    if (!response.ok) throw new Error(`bundle HTTP ${response.status}`);
    return response.arrayBuffer();
  });
  const { loadPyodide } = await import(pyodideUrl + "pyodide.mjs");
  const pyodide = await loadPyodide({ indexURL: pyodideUrl, stdout: () => {}, stderr: () => {} });
  const t1 = performance.now();
  pyodide.unpackArchive(await bundle, "zip", { extractDir: PACKAGE_DIR });
  pyodide.pyimport("sys").path.insert(0, PACKAGE_DIR);
  const view = pyodide.pyimport("calculator_view");
  pyodide.pyimport("calc"); // import now, so the first request does not pay for it
  return { view, t1 };
}

async function init(msg) {
  const { view, t1 } = await booting;
  view.configure(msg.lang, JSON.stringify(msg.strings));
  handle = view.handle;
  const t2 = performance.now();
  postMessage({ type: "ready", timings: { pyodide_ms: t1 - t0, calc_ms: t2 - t1, total_ms: t2 - t0 } });
}

function compute(msg) {
  let text;
  try {
    text = handle(msg.command, msg.request);
  } catch (err) {
    postMessage({ type: "crashed", id: msg.id, detail: String(err && err.message ? err.message : err) });
    close();
    return;
  }
  postMessage({ type: "result", id: msg.id, out: JSON.parse(text) });
}

self.onmessage = (event) => {
  const msg = event.data || {};
  if (msg.type === "init") {
    init(msg).catch((err) => postMessage({ type: "failed", detail: String(err && err.message ? err.message : err) }));
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
