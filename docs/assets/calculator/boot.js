// Starts the calculator's worker as early as the page allows, so Pyodide begins loading
// before the browser parses and lays out the (large) static result.
// - In the <head> (theme override, calculator page only): the script's own data-* give the
//   URLs; the worker is kept in window.calcEarlyBoot.
// - At the top of the calculator block: adopts that worker, or starts one if the head had
//   none. calculator.js (a module, run later) adopts this worker and restarts it the same way.
(function () {
  if (typeof Worker === "undefined") return;
  var script = document.currentScript;

  function workerUrl(urls) {
    var url = new URL(urls.worker, window.location.href);
    // The worker starts Pyodide and fetches calc as soon as it runs, from these URLs.
    url.searchParams.set("pyodide", new URL(urls.pyodide, window.location.href).href);
    url.searchParams.set("bundle", new URL(urls.bundle, window.location.href).href);
    if (urls.snapshot) url.searchParams.set("snapshot", new URL(urls.snapshot, window.location.href).href);
    return url.href;
  }

  function start(urls) {
    return new Worker(workerUrl(urls), { type: "module" });
  }

  function boot(urls) {
    var state = { worker: null, failed: false, url: workerUrl(urls) };
    try {
      state.worker = new Worker(state.url, { type: "module" });
      performance.mark("calc-worker-start");
      // An error before calculator.js listens (e.g. worker.js missing) must not be lost.
      state.worker.addEventListener("error", function () {
        state.failed = true;
      });
    } catch (err) {
      /* calculator.js starts one itself */
    }
    return state;
  }

  var root = document.getElementById("calc");
  if (!root) {
    if (script && script.dataset.worker && !window.calcEarlyBoot) {
      window.calcEarlyBoot = boot(script.dataset);
    }
    return;
  }
  root.calcStartWorker = function () {
    return start(root.dataset);
  };
  var early = window.calcEarlyBoot;
  window.calcEarlyBoot = null;
  // The head's worker is only adopted when it was started with the very same URLs.
  var same = Boolean(early && early.worker && early.url === workerUrl(root.dataset));
  var state = same ? early : boot(root.dataset);
  root.dataset.calcBoot = same ? "head" : "block"; // where the worker was started (tests)
  if (early && !same && early.worker) early.worker.terminate();
  root.calcBootWorker = state.worker;
  Object.defineProperty(root, "calcBootFailed", {
    configurable: true,
    get: function () {
      return state.failed;
    },
  });
})();
