// Calculator page only (theme override), run just before Material's bundle: points Material's
// search at a stand-in worker (assets/javascripts/workers/search-after-calc.js) that builds
// the search index only when the reader opens search, or once the calculator is live
// (data-calc-state ready or error) and has been left alone for QUIET_MS. Building the index
// (a few hundred ms on a 2-core machine) beside Pyodide's start, or beside the first edits, slows the
// calculator on small machines; search itself works as on every other page.
(function () {
  "use strict";
  var QUIET_MS = 2000; // no new result for this long: the reader is not editing
  var script = document.currentScript;
  var config = document.getElementById("__config");
  var root = document.getElementById("calc");
  // file:// pages already defer search to its first use (Material), and cannot run workers
  if (!script || !script.dataset.worker || !config || !root) return;
  if (window.location.protocol === "file:") return;
  if (typeof BroadcastChannel === "undefined") return;
  var settings;
  try {
    settings = JSON.parse(config.textContent);
  } catch (err) {
    return;
  }
  if (!settings || typeof settings.search !== "string") return;

  var channelName = "calc-search-" + Math.random().toString(36).slice(2);
  var shim = new URL(script.dataset.worker, window.location.href);
  shim.searchParams.set("worker", new URL(settings.search, window.location.href).href);
  shim.searchParams.set("channel", channelName);
  settings.search = shim.href;
  config.textContent = JSON.stringify(settings);

  var channel = new BroadcastChannel(channelName);
  var released = false;
  function release() {
    if (released) return;
    released = true;
    performance.mark("calc-search-start");
    channel.postMessage("start");
    observer.disconnect();
    clearTimeout(timer);
    document.removeEventListener("focusin", onFocus, true);
    document.removeEventListener("change", onToggle, true);
  }
  channel.onmessage = function (event) {
    if (event.data === "waiting" && released) channel.postMessage("start");
  };

  // Each new result (data-computed) restarts the wait, once the worker is up (or failed):
  // data-calc-worker is the calculator's private "Python has started" signal.
  var timer = null;
  function waitForQuiet() {
    var worker = root.dataset.calcWorker;
    if (worker !== "up" && worker !== "failed") return;
    clearTimeout(timer);
    timer = setTimeout(release, QUIET_MS);
  }
  var observer = new MutationObserver(waitForQuiet);
  observer.observe(root, { attributes: true, attributeFilter: ["data-calc-worker", "data-computed"] });
  waitForQuiet();
  // The reader opens search (click, keyboard shortcut, ?q= link): start now.
  function onFocus(event) {
    var target = event.target;
    if (target && target.closest && target.closest(".md-search")) release();
  }
  function onToggle(event) {
    if (event.target && event.target.id === "__search") release();
  }
  document.addEventListener("focusin", onFocus, true);
  document.addEventListener("change", onToggle, true);
})();
