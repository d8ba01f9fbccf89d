// Stand-in for Material's search worker on the calculator page (classic worker).
// Material posts it the search index at once; building the index (a few hundred ms on a
// 2-core machine) then competes with Pyodide's start beside it. So this worker holds the
// page's messages and loads the real search worker, which then receives them in order, only
// when the page says "start" (assets/calculator/search-defer.js: when the reader opens search,
// or once the calculator is live and left alone for a moment).
// URL: search-after-calc.js?worker=<Material's search worker>&channel=<BroadcastChannel name>
// It lives next to Material's worker so that the real worker's relative imports (its
// language stemmers, "../lunr/...") resolve to the same files.
(function () {
  "use strict";
  var params = new URL(self.location.href).searchParams;
  if (!params.get("worker")) return; // nothing to stand in for
  var real = new URL(params.get("worker"), self.location.href);
  var held = []; // messages from the page, until the real worker is loaded; then null

  function start() {
    if (held === null) return;
    var messages = held;
    held = null;
    // never code from elsewhere, nor this file again
    if (real.origin !== self.location.origin || real.pathname === self.location.pathname) return;
    importScripts(real.href);
    for (var i = 0; i < messages.length; i++) {
      self.dispatchEvent(new MessageEvent("message", { data: messages[i] }));
    }
  }

  self.addEventListener("message", function (event) {
    if (held !== null) held.push(event.data);
  });

  var name = params.get("channel");
  if (!name || typeof BroadcastChannel === "undefined") {
    start();
    return;
  }
  var channel = new BroadcastChannel(name);
  channel.onmessage = function (event) {
    if (event.data !== "start") return;
    channel.close();
    start();
  };
  // The page may have said "start" before this channel existed: ask again.
  channel.postMessage("waiting");
})();
