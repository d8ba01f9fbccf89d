// The calculator page: form state <-> URL <-> request, a module worker running `calc` in
// Pyodide, and the results tree it sends back, built with createElement/textContent only.
// The page arrives with the build-time result (data-calc-state="static"); nothing here
// blocks it. States: static -> loading -> ready, or error when Pyodide cannot start.

import { initConfigImport } from "./config-import.js";

const SVG_NS = "http://www.w3.org/2000/svg";
const MAX_RESTARTS = 3;
const COMPUTE_TIMEOUT_MS = 15000;

const root = document.getElementById("calc");
if (root) main(root);

function main(root) {
  const strings = JSON.parse(document.getElementById("calc-strings").textContent);
  const form = root.querySelector(".calc-form");
  const slot = root.querySelector(".calc-results-slot");
  const status = root.querySelector(".calc-status");
  const staleNote = root.querySelector(".calc-stale-note");
  const general = root.querySelector('[data-error-for="_general"]');
  const command = root.dataset.command;
  const lang = root.dataset.lang;
  const controls = [...form.querySelectorAll("[name]")];
  const byName = new Map(controls.map((el) => [el.name, el]));
  const configArea = byName.get("hf_config");

  // Values from the URL that no control can hold (e.g. method=bogus): sent as they are,
  // so calc names the problem; dropped as soon as the reader edits that field.
  const overrides = new Map();
  let unknownParams = [];

  let worker = null;
  let restarts = 0;
  let nextId = 1;
  let inFlight = null; // {id, key, timer}
  let pending = null; // {key}: the request's JSON text, waiting for the worker
  let lastKey = null; // request last answered or in flight
  let clientBlocked = false; // the form has an error found here: no result may replace it

  const setState = (state) => {
    root.dataset.calcState = state;
  };

  // ------------------------------------------------------------ URL <-> form

  function readUrl() {
    const params = new URLSearchParams(window.location.search);
    for (const [key, value] of params) {
      const el = byName.get(key);
      if (key === "hf_config" || !el) {
        unknownParams.push(key);
        continue;
      }
      if (key === "model" && value.trim().startsWith("{")) {
        configArea.value = configTextFromUrl(value);
        revealField(configArea);
        continue;
      }
      if (el.type === "checkbox") {
        if (value === "true" || value === "false") el.checked = value === "true";
        else overrides.set(key, value);
      } else if (el.tagName === "SELECT") {
        if ([...el.options].some((o) => o.value === value)) el.value = value;
        else overrides.set(key, value);
      } else {
        el.value = value;
      }
      revealField(el);
    }
  }

  // A control inside a folded section (config, advanced) is unfolded when it has a value
  // from the URL or an error.
  function revealField(el) {
    const folded = el.closest("details");
    if (folded) folded.open = true;
  }

  function configTextFromUrl(value) {
    try {
      const parsed = JSON.parse(value);
      if (parsed && typeof parsed === "object" && !Array.isArray(parsed) && "hf_config" in parsed) {
        return JSON.stringify(parsed.hf_config, null, 1);
      }
    } catch (err) {
      /* kept as typed: the form reports it */
    }
    return value;
  }

  // The text a control stands for in the URL (booleans true/false, lists comma-joined).
  function controlText(el) {
    if (overrides.has(el.name)) return overrides.get(el.name);
    if (el.type === "checkbox") return el.checked ? "true" : "false";
    if (el.dataset.kind === "targets") return splitList(el.value).join(",");
    return el.value;
  }

  function splitList(text) {
    return text.split(",").map((s) => s.trim()).filter(Boolean);
  }

  function queryString() {
    const parts = [];
    for (const el of controls) {
      if (el === configArea) continue;
      let text = controlText(el);
      if (el.name === "model" && configArea.value.trim()) text = modelTextForUrl();
      if (text === el.dataset.default) continue;
      const encoded = encodeURIComponent(text).replace(/%2C/gi, ",");
      parts.push(`${encodeURIComponent(el.name)}=${encoded}`);
    }
    return parts.length ? `?${parts.join("&")}` : "";
  }

  function modelTextForUrl() {
    try {
      return JSON.stringify({ hf_config: JSON.parse(configArea.value) });
    } catch (err) {
      return configArea.value;
    }
  }

  function syncUrl() {
    const query = queryString();
    const url = window.location.pathname + query + window.location.hash;
    if (url !== window.location.pathname + window.location.search + window.location.hash) {
      window.history.replaceState(null, "", url);
    }
    patchLanguageLinks(query);
  }

  // Material's language switcher links to the same page in the other language: carry the state.
  function patchLanguageLinks(query) {
    for (const link of document.querySelectorAll("a[hreflang]")) {
      try {
        const target = new URL(link.getAttribute("href"), window.location.href);
        if (target.origin !== window.location.origin) continue;
        target.search = query;
        link.setAttribute("href", target.pathname + target.search + target.hash);
      } catch (err) {
        /* a link we cannot parse is left alone */
      }
    }
  }

  // ------------------------------------------------------------ form -> request

  const NUMBER_RE = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;

  function parseNumber(text) {
    let t = text.trim().replace(/[\s\u202f\u00a0_]/g, "");
    if (lang === "es" && /^[+-]?\d*,\d+$/.test(t)) t = t.replace(",", ".");
    if (!NUMBER_RE.test(t)) return text; // sent as text: calc answers not_number / not_integer
    return Number(t);
  }

  function buildRequest() {
    const request = {};
    const errors = {};
    for (const el of controls) {
      const key = el.name;
      if (el === configArea) continue;
      if (overrides.has(key)) {
        request[key] = overrides.get(key);
        continue;
      }
      const kind = el.dataset.kind;
      if (kind === "bool") {
        request[key] = el.checked;
      } else if (kind === "enum") {
        request[key] = el.value;
      } else if (kind === "model") {
        const text = configArea.value.trim();
        if (text) {
          try {
            request.model = { hf_config: JSON.parse(text) };
          } catch (err) {
            errors.hf_config = { code: "config_json_invalid", field: "hf_config", value: null };
          }
        } else if (!el.value.trim()) {
          errors.model = { code: "empty_value", field: "model", value: null };
        } else {
          request.model = el.value.trim();
        }
      } else {
        const text = el.value.trim();
        if (!text) {
          if (el.dataset.default !== "") errors[key] = { code: "empty_value", field: key, value: null };
          continue; // an optional value left empty: calc uses its own
        }
        if (kind === "int" || kind === "number") request[key] = parseNumber(text);
        else if (kind === "targets") request[key] = text === "all-linear" ? text : splitList(text);
        else request[key] = text;
      }
    }
    return { request, errors };
  }

  // ------------------------------------------------------------ messages

  function clearErrors() {
    for (const p of root.querySelectorAll(".calc-error[data-error-for]")) {
      p.textContent = "";
      p.hidden = true;
    }
    for (const el of controls) el.removeAttribute("aria-invalid");
    showGeneral(); // keeps only the unknown-parameter notice, if any
  }

  // Errors found here (empty values, JSON): shown at once, without a round trip.
  function showClientErrors(errors) {
    clearErrors();
    for (const error of errors) showError(error);
    staleNote.hidden = false;
  }

  function showGeneral() {
    general.textContent = "";
    if (!unknownParams.length) {
      general.hidden = true;
      return;
    }
    const p = document.createElement("p");
    p.textContent = `${strings.errors.unknown_parameter} ${unknownParams.join(", ")}`;
    p.dataset.errorCode = "unknown_parameter";
    general.appendChild(p);
    general.hidden = false;
  }

  function errorTarget(error) {
    const field = String(error.field || "");
    if (field === "hf_config" || field.startsWith("hf_config.") || field.startsWith("model.")) {
      return configArea.value.trim() ? "hf_config" : "model";
    }
    const head = field.split(".")[0];
    return byName.has(head) ? head : "_general";
  }

  function errorText(error) {
    const base = strings.errors[error.code] || strings.errors.generic;
    const field = String(error.field || "");
    let detail = "";
    if (field.startsWith("hf_config.") && error.code !== "unsupported_architecture") detail = field.slice("hf_config.".length);
    else if (typeof error.value === "string" || typeof error.value === "number") detail = String(error.value);
    if (detail.length > 80) detail = `${detail.slice(0, 77)}…`;
    return detail ? `${base} (${detail})` : base;
  }

  function showError(error) {
    const target = errorTarget(error);
    const text = errorText(error);
    if (target === "_general") {
      const p = document.createElement("p");
      p.textContent = text;
      p.dataset.errorCode = error.code;
      general.appendChild(p);
      general.hidden = false;
    } else {
      revealField(byName.get(target));
      const p = root.querySelector(`.calc-error[data-error-for="${target}"]`);
      p.textContent = text;
      p.dataset.errorCode = error.code;
      p.hidden = false;
      byName.get(target).setAttribute("aria-invalid", "true");
    }
    root.dataset.inputError = error.code;
  }

  function setStatus(key) {
    status.textContent = strings.ui[key];
    status.dataset.status = key;
  }

  // ------------------------------------------------------------ results

  function build(node, inSvg) {
    if (typeof node === "string") return document.createTextNode(node);
    const [tag, attrs, ...children] = node;
    const svg = inSvg || tag === "svg";
    const el = svg ? document.createElementNS(SVG_NS, tag) : document.createElement(tag);
    for (const [name, value] of Object.entries(attrs)) {
      if (name === "xmlns" || name.toLowerCase().startsWith("on")) continue;
      el.setAttribute(name, String(value));
    }
    for (const child of children) el.appendChild(build(child, svg));
    return el;
  }

  function render(out) {
    const body = build(out.view, false);
    slot.replaceChildren(body);
    // optional inputs left empty show what calc used instead
    let used = {};
    try {
      used = JSON.parse(body.dataset.defaults || "{}");
    } catch (err) {
      used = {};
    }
    for (const el of controls) {
      if (el.dataset.default === "" && el.dataset.kind !== "config") {
        if (el.name in used) el.placeholder = String(used[el.name]);
        else el.removeAttribute("placeholder");
      }
    }
  }

  // ------------------------------------------------------------ worker

  // The first worker was started by boot.js while the page was parsed; restarts use the
  // same function.
  function startWorker() {
    setState("loading");
    // results of the default setup under a shared link's inputs: keep saying so
    setStatus(root.classList.contains("calc-stale") ? "status_static_stale" : "status_loading");
    const booted = root.calcBootWorker;
    root.calcBootWorker = null;
    if (booted && root.calcBootFailed) {
      booted.terminate();
      restartWorker();
      return;
    }
    worker = booted || root.calcStartWorker();
    worker.onmessage = (event) => onWorkerMessage(event.data);
    worker.onerror = (event) => {
      event.preventDefault();
      restartWorker();
    };
    worker.postMessage({ type: "init", lang, strings });
  }

  function restartWorker() {
    if (worker) worker.terminate();
    worker = null;
    if (inFlight) clearTimeout(inFlight.timer);
    inFlight = null;
    lastKey = null;
    restarts += 1;
    root.dataset.calcRestarts = String(restarts);
    if (restarts > MAX_RESTARTS) {
      setState("error");
      setStatus("status_error");
      return;
    }
    startWorker();
  }

  function onWorkerMessage(msg) {
    if (msg.type === "ready") {
      root.dataset.calcTimings = JSON.stringify(msg.timings);
      performance.mark("calc-ready");
      setState("ready");
      setStatus(restarts ? "status_restarted" : "status_ready");
      update();
    } else if (msg.type === "failed") {
      setState("error");
      setStatus("status_error");
      root.dataset.calcFailure = String(msg.detail).slice(0, 200);
    } else if (msg.type === "crashed") {
      restartWorker();
    } else if (msg.type === "config-result") {
      configImport.onResult(msg);
    } else if (msg.type === "result") {
      if (!inFlight || msg.id !== inFlight.id) return;
      clearTimeout(inFlight.timer);
      const check = inFlight.check;
      inFlight = null;
      if (!pending && check && clientBlocked) addCheckedErrors(msg.out);
      else if (!pending && !check && !clientBlocked) show(msg.out);
      send();
    }
  }

  function show(out) {
    clearErrors();
    if ("error" in out) {
      // every bad field at once (the worker names them all), the first one first
      for (const error of Array.isArray(out.errors) ? out.errors : [out.error]) showError(error);
      staleNote.hidden = false;
    } else {
      render(out);
      delete root.dataset.inputError;
      staleNote.hidden = true;
      root.classList.remove("calc-stale");
    }
    answered();
  }

  // The answer to a check (the fields this page could read, sent while others are empty):
  // calc's own messages join the ones already shown; its results are not shown.
  function addCheckedErrors(out) {
    if (!("error" in out)) return;
    for (const error of Array.isArray(out.errors) ? out.errors : [out.error]) showError(error);
    answered();
  }

  // Counts the answers shown (results or messages): tests and benchmarks wait on it.
  function answered() {
    root.dataset.computed = String(Number(root.dataset.computed || "0") + 1);
  }

  // One request in flight at most; the newest waiting one replaces older ones.
  function send() {
    if (!pending || inFlight || root.dataset.calcState !== "ready") return;
    const { key, check } = pending;
    pending = null;
    const id = nextId++;
    const timer = setTimeout(restartWorker, COMPUTE_TIMEOUT_MS);
    inFlight = { id, key, timer, check };
    lastKey = check ? null : key; // a check is never the last computed result
    worker.postMessage({ type: "compute", id, command, request: key });
  }

  // force: compute even when the request did not change (a restored URL re-renders).
  function update(force = false) {
    syncUrl();
    const { request, errors } = buildRequest();
    let key = null;
    try {
      key = JSON.stringify(request); // also what the worker receives: text, never a deep object
    } catch (err) {
      // nested beyond what JavaScript can serialise (stack overflow): refused here
      errors.hf_config = { code: "request_too_deep", field: "hf_config", value: null };
    }
    const clientErrors = Object.values(errors);
    clientBlocked = clientErrors.length > 0;
    if (clientBlocked) {
      pending = null;
      showClientErrors(clientErrors);
      lastKey = null;
      answered();
      // The other fields still go to calc, so that their errors show at once too; not
      // without a model (calc checks LoRA targets and sizes against it).
      if (key !== null && "model" in request) {
        pending = { key, check: true };
        send();
      }
      return;
    }
    if (key === lastKey && !pending && !force) return;
    pending = { key, check: false };
    send();
  }

  function onEdit(event) {
    const name = event.target && event.target.name;
    if (name) overrides.delete(name);
    if (unknownParams.length) {
      unknownParams = [];
      showGeneral();
    }
    update();
  }

  // "What to change if it does not fit": a suggestion's button carries its request changes.
  function onApply(event) {
    const button = event.target.closest("button.calc-apply");
    if (!button) return;
    let changes;
    try {
      changes = JSON.parse(button.dataset.changes);
    } catch (err) {
      return;
    }
    applyChanges(changes);
  }

  // Request changes onto the form (a suggestion, an imported config), then recompute.
  function applyChanges(changes) {
    for (const [key, value] of Object.entries(changes)) {
      const el = byName.get(key);
      if (!el) continue;
      overrides.delete(key);
      if (el.type === "checkbox") el.checked = value === true;
      else el.value = Array.isArray(value) ? value.join(",") : value === null ? "" : String(value);
      revealField(el);
    }
    if ("model" in changes && configArea.value.trim()) configArea.value = ""; // the preset wins
    update();
  }

  // Back/forward (and links that only change the query): the URL is the state.
  function restoreFromUrl() {
    overrides.clear();
    unknownParams = [];
    for (const el of controls) {
      if (el === configArea) el.value = "";
      else if (el.type === "checkbox") el.checked = el.dataset.default === "true";
      else el.value = el.dataset.default;
    }
    for (const folded of form.querySelectorAll("details")) folded.open = false;
    readUrl();
    clearErrors();
    update(true);
  }

  // ------------------------------------------------------------ start

  readUrl();
  clearErrors();
  if (window.location.search && queryString() !== "") {
    root.classList.add("calc-stale");
    setStatus("status_static_stale");
  }
  patchLanguageLinks(queryString());
  form.addEventListener("input", onEdit);
  form.addEventListener("change", onEdit);
  form.addEventListener("submit", (event) => event.preventDefault());
  slot.addEventListener("click", onApply);
  window.addEventListener("popstate", restoreFromUrl);
  // Client-side checks answer at once, before the worker is up.
  const firstErrors = Object.values(buildRequest().errors);
  if (firstErrors.length) showClientErrors(firstErrors);
  root.calculator = {
    crashWorker: () => worker && worker.postMessage({ type: "crash" }),
  };
  const configImport = initConfigImport(root, {
    post: (msg) => Boolean(worker && root.dataset.calcState === "ready" && (worker.postMessage(msg), true)),
    apply: applyChanges,
    request: () => buildRequest().request,
  });
  startWorker();
}
