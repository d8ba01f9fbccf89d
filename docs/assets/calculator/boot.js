// Starts the calculator's worker as early as the page allows, so Pyodide begins loading
// before the browser parses and lays out the (large) static result.
// - In the <head> (theme override, calculator page only): the script's own data-* give the
//   URLs; the worker is kept in window.calcEarlyBoot.
// - At the top of the calculator block: adopts that worker, or starts one if the head had
//   none. calculator.js (a module, run later) adopts this worker and restarts it the same way.
(function () {
  var script = document.currentScript;
  var root = document.getElementById("calc");
  if (root) {
    // A shared link's setup is not the build-time one: its figures are withdrawn before
    // they are even drawn, and calculator.js shows them again if the link turns out to hold
    // the default setup (data-calc-state is public: see state.js).
    root.dataset.calcWorker = "starting";
    if (window.location.search.length > 1) {
      root.dataset.calcState = "computing";
      root.classList.add("calc-withdrawn");
    }
  }
  if (typeof Worker === "undefined") {
    if (root) root.calcNoModuleWorker = true; // calculator.js ends in "error"
    return;
  }

  function workerUrl(urls) {
    var url = new URL(urls.worker, window.location.href);
    // The worker starts Pyodide and fetches calc as soon as it runs, from these URLs.
    url.searchParams.set("pyodide", new URL(urls.pyodide, window.location.href).href);
    url.searchParams.set("bundle", new URL(urls.bundle, window.location.href).href);
    // the standard library and package lock cut to what calc needs (absent: Pyodide's own)
    ["snapshot", "stdlib", "lock"].forEach(function (key) {
      if (urls[key]) url.searchParams.set(key, new URL(urls[key], window.location.href).href);
    });
    return url.href;
  }

  // A browser without module workers reads no "type" from the options (and would run the
  // worker as a classic script, which cannot load Pyodide): the getter tells.
  function newModuleWorker(url) {
    var module = false;
    var worker = new Worker(url, { get type() { module = true; return "module"; } });
    if (!module) {
      worker.terminate();
      if (root) root.calcNoModuleWorker = true;
      throw new Error("no module workers");
    }
    return worker;
  }

  function start(urls) {
    return newModuleWorker(workerUrl(urls));
  }

  function boot(urls) {
    var state = { worker: null, failed: false, url: workerUrl(urls) };
    try {
      state.worker = newModuleWorker(state.url);
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

  if (!root) {
    if (script && script.dataset.worker && !window.calcEarlyBoot) {
      window.calcEarlyBoot = boot(script.dataset);
    }
    return;
  }
  // The service worker that keeps the runtime for repeat and offline visits (calc-sw.js at
  // the site's root, its scope the whole site) is registered once the numbers are live (the
  // worker up, and a shared link's own numbers on show) and the page is idle: its downloads
  // never compete with the first start, and mostly come from the HTTP cache then.
  function registerServiceWorker() {
    if (!root.dataset.sw || !("serviceWorker" in navigator) || !window.isSecureContext) return;
    var idle = window.requestIdleCallback || function (f) { setTimeout(f, 200); };
    var register = function () {
      navigator.serviceWorker.register(new URL(root.dataset.sw, window.location.href).href)
        .catch(function () { /* no service worker: every visit loads as the first */ });
    };
    var watch = new MutationObserver(function () {
      if (root.dataset.calcWorker !== "up" || root.dataset.calcState === "computing") return;
      watch.disconnect();
      idle(register);
    });
    watch.observe(root, { attributes: true, attributeFilter: ["data-calc-worker", "data-calc-state"] });
  }
  registerServiceWorker();

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
