// Starts the calculator's worker while the page is still being parsed: a small classic
// script at the top of the calculator block, so Pyodide starts loading tens of milliseconds
// after the HTML arrives instead of after the whole page and the theme's scripts.
// calculator.js (a module, run later) adopts this worker and restarts it the same way.
(function () {
  var root = document.getElementById("calc");
  if (!root || typeof Worker === "undefined") return;
  root.calcStartWorker = function () {
    var url = new URL(root.dataset.worker, window.location.href);
    // The worker starts Pyodide and fetches calc as soon as it runs, from these two URLs.
    url.searchParams.set("pyodide", new URL(root.dataset.pyodide, window.location.href).href);
    url.searchParams.set("bundle", new URL(root.dataset.bundle, window.location.href).href);
    return new Worker(url, { type: "module" });
  };
  try {
    var worker = root.calcStartWorker();
    performance.mark("calc-worker-start");
    // An error before calculator.js listens (e.g. worker.js missing) must not be lost.
    worker.addEventListener("error", function () {
      root.calcBootFailed = true;
    });
    root.calcBootWorker = worker;
  } catch (err) {
    /* calculator.js starts one itself */
  }
})();
