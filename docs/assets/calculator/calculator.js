// The calculator page: form state <-> URL <-> request, a module worker running `calc` in
// Pyodide, and the results tree it sends back, built with createElement/textContent only.
// The page arrives with the build-time result (data-calc-state="static"); nothing here
// blocks it. States: static -> loading -> ready, or error when Pyodide cannot start.

import { initConfigImport } from "./config-import.js";
import { CalcMachine, requestKey } from "./state.js";

const SVG_NS = "http://www.w3.org/2000/svg";
const MAX_RESTARTS = 3;
const COMPUTE_TIMEOUT_MS = 15000;
// A worker that has not started after this long (a stalled download) is replaced; after
// MAX_RESTARTS the page says the calculator cannot run here. Generous: a first visit
// downloads about 14 MB.
const START_TIMEOUT_MS = 120000;

const root = document.getElementById("calc");
if (root) main(root);

function main(root) {
  const strings = JSON.parse(document.getElementById("calc-strings").textContent);
  const form = root.querySelector(".calc-form");
  const slot = root.querySelector(".calc-results-slot");
  const status = root.querySelector(".calc-status");
  const staleNote = root.querySelector(".calc-stale-note");
  const pendingNote = root.querySelector(".calc-pending-note");
  const general = root.querySelector('[data-error-for="_general"]');
  const command = root.dataset.command;
  const lang = root.dataset.lang;
  const controls = [...form.querySelectorAll("[name]")];
  const byName = new Map(controls.map((el) => [el.name, el]));
  const configArea = byName.get("hf_config");
  const advanced = form.querySelector("details[data-mode]"); // open = advanced mode
  const MODE_PARAM = "mode";
  const helpers = controls.filter((el) => el.dataset.kind === "helper");

  // Values from the URL that no control can hold (e.g. method=bogus): sent as they are,
  // so calc names the problem; dropped as soon as the reader edits that field.
  const overrides = new Map();
  let unknownParams = [];

  // The keys a training library's profile sets (calc.frameworks). The form sends one only
  // once the reader has chosen its value (an edit, the URL, an imported config); until then
  // the chosen library decides it, and the control shows what calc used.
  const profileKeys = new Set(JSON.parse(root.dataset.profileKeys || "[]"));
  const chosen = new Set();
  const leftToProfile = (key) => profileKeys.has(key) && !chosen.has(key);
  const libraryChosen = () => {
    const el = byName.get("framework");
    return Boolean(el) && el.value !== el.dataset.default;
  };

  let worker = null;
  let restarts = 0;
  let computeTimer = null;
  let startTimer = null;
  let machine = null; // CalcMachine, made once the form has read the URL
  let ownShown = false;

  // ------------------------------------------------------------ URL <-> form

  function readUrl() {
    const params = new URLSearchParams(window.location.search);
    for (const [key, value] of params) {
      if (key === MODE_PARAM && (value === "advanced" || value === "basic")) {
        advanced.open = value === "advanced";
        continue;
      }
      const el = byName.get(key);
      if (key === "hf_config" || !el) {
        unknownParams.push(key);
        continue;
      }
      chosen.add(key);
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
        else {
          // shown as the URL gave it (an option of its own, until the reader picks another),
          // so that calc's error is read against that value, not against a valid one
          const option = document.createElement("option");
          option.value = value;
          option.textContent = value;
          option.dataset.fromUrl = "true";
          el.appendChild(option);
          el.value = value;
          overrides.set(key, value);
        }
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
    if (advanced.open) parts.push(`${MODE_PARAM}=advanced`); // basic is the default
    for (const el of controls) {
      if (el === configArea) continue;
      if (leftToProfile(el.name)) continue;
      let text = controlText(el);
      if (el.name === "model" && configArea.value.trim()) text = modelTextForUrl();
      // a behaviour the reader set stays in the URL while a library's profile could change it
      if (text === el.dataset.default && !(profileKeys.has(el.name) && libraryChosen())) continue;
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

  // percent: a share the reader may write as 0.25, 25 or "25 %" (the safety margin): a
  // value above 1, or one with "%", is a percentage.
  function parseNumber(text, percent = false) {
    let t = text.trim().replace(/[\s\u202f\u00a0_]/g, "");
    let isPercent = false;
    if (percent && t.endsWith("%")) {
      t = t.slice(0, -1);
      isPercent = true;
    }
    if (lang === "es" && /^[+-]?\d*,\d+$/.test(t)) t = t.replace(",", ".");
    if (!NUMBER_RE.test(t)) return text; // sent as text: calc answers not_number / not_integer
    const value = Number(t);
    return percent && (isPercent || value > 1) ? value / 100 : value;
  }

  function buildRequest() {
    const request = {};
    const errors = {};
    for (const el of controls) {
      const key = el.name;
      if (el === configArea || leftToProfile(key)) continue;
      if (overrides.has(key)) {
        request[key] = overrides.get(key);
        continue;
      }
      const kind = el.dataset.kind;
      if (kind === "helper") continue; // form-only: multiplied into dataset_tokens
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
        if (kind === "int" || kind === "number") request[key] = parseNumber(text, el.dataset.percent === "true");
        else if (kind === "targets") request[key] = text === "all-linear" ? text : splitList(text);
        else request[key] = text;
      }
    }
    for (const el of helpers) {
      const text = el.value.trim();
      const value = text ? parseNumber(text) : null;
      if (text && !(typeof value === "number" && value > 0)) {
        errors[el.name] = { code: "not_number", field: el.name, value: text, minimum: 0,
                            minimum_exclusive: true };
      }
    }
    return { request, errors };
  }

  // Examples × average tokens per example -> dataset_tokens, as the reader types them.
  function fillDatasetTokens() {
    const [a, b] = helpers.map((el) => parseNumber(el.value.trim()));
    if (typeof a === "number" && typeof b === "number" && a > 0 && b > 0) {
      byName.get("dataset_tokens").value = String(Math.round(a * b));
    }
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
    const text = detail ? `${base} (${detail})` : base;
    if (error.code === "unknown_preset") return `${text} ${presetHelp(error)}`;
    const valid = validText(error);
    return valid ? `${text} ${valid}` : text;
  }

  // A model id calc does not know (a Hugging Face id of no preset): paste its config.json,
  // or pick one of the presets calc names as nearest (its "suggestions", when it has any).
  function presetHelp(error) {
    const found = Array.isArray(error.suggestions) ? error.suggestions : [];
    const ids = found.map((s) => (s && typeof s === "object" ? s.id : s)).filter((s) => typeof s === "string");
    const help = strings.ui.not_in_list;
    return ids.length ? `${help} ${strings.ui.nearest_presets.replace("{}", ids.slice(0, 5).join(", "))}` : help;
  }

  // What calc says would be valid (its error's allowed / minimum / maximum), in words.
  function validText(error) {
    const ui = strings.ui;
    const el = byName.get(String(error.field || "").split(".")[0]);
    if (Array.isArray(error.allowed) && error.allowed.length) {
      const names = error.allowed.map((v) => {
        if (typeof v === "boolean") return ui[v ? "yes" : "no"];
        if (error.field === "gpu") return (strings.gpus || {})[v] || String(v);
        const known = (strings.enums || {})[v];
        return known && known !== v ? `${v} (${known})` : String(v);
      });
      const list = names.length > 12 ? `${names.slice(0, 12).join(", ")}, …` : names.join(", ");
      return ui.valid_one_of.replace("{}", list);
    }
    if (typeof error.minimum !== "number" && typeof error.maximum !== "number") return "";
    const percent = el && el.dataset.percent === "true";
    const num = (v) => (percent ? ui.valid_percent.replace("{}", formatNumber(v * 100)) : formatNumber(v));
    const low = typeof error.minimum === "number" ? num(error.minimum) : null;
    const high = typeof error.maximum === "number" ? num(error.maximum) : null;
    let range;
    if (low !== null && high !== null) {
      const key = `valid_range${error.minimum_exclusive ? "_above" : ""}${error.maximum_exclusive ? "_below" : ""}`;
      range = ui[key].replace("{min}", low).replace("{max}", high);
    } else if (low !== null) {
      range = ui[error.minimum_exclusive ? "valid_more_than" : "valid_at_least"].replace("{}", low);
    } else {
      range = ui.valid_at_most.replace("{}", high);
    }
    return error.integer ? `${range} ${ui.valid_whole}` : range;
  }

  // The site's number format (macros/numfmt.py): "1,234.5" in English; "1234,5" and, from
  // five digits, "12 345,5" (narrow no-break spaces) in Spanish.
  function formatNumber(value) {
    const [whole, frac] = String(Math.abs(value) >= 1e21 ? value : Number(value.toPrecision(12)))
      .replace("-", "").split(".");
    const sep = lang === "es" ? (whole.length >= 5 ? "\u202f" : "") : ",";
    const int = whole.replace(/\B(?=(\d{3})+(?!\d))/g, sep);
    const sign = value < 0 ? "-" : "";
    return sign + int + (frac ? (lang === "es" ? "," : ".") + frac : "");
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
      if (error.code === "unknown_preset") configArea.closest("details").open = true; // paste it here
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
    // the "CUDA only" filter lives in the results: the reader's choice outlives a recompute
    const cudaOnly = slot.querySelector(".calc-cuda-only-box");
    const keepCudaOnly = Boolean(cudaOnly && cudaOnly.checked);
    slot.replaceChildren(body);
    const newBox = body.querySelector(".calc-cuda-only-box");
    if (newBox) newBox.checked = keepCudaOnly;
    // optional inputs left empty show what calc used instead
    let used;
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
    showProfileValues(body);
  }

  // The controls left to the library's profile show the values calc used for them.
  function showProfileValues(body) {
    let values;
    try {
      values = JSON.parse(body.dataset.profileValues || "{}");
    } catch (err) {
      values = {};
    }
    for (const [key, value] of Object.entries(values)) {
      const el = byName.get(key);
      if (!el || !leftToProfile(key)) continue;
      if (el.type === "checkbox") el.checked = value === true;
      else el.value = String(value);
    }
  }

  // ------------------------------------------------------------ worker

  // The first worker was started by boot.js while the page was parsed; restarts use the
  // same function.
  function startWorker() {
    setWorker("starting");
    const booted = root.calcBootWorker;
    root.calcBootWorker = null;
    if (booted && root.calcBootFailed) {
      booted.terminate();
      restartWorker();
      return;
    }
    if (!booted && root.calcNoModuleWorker) {
      fail("no module workers"); // boot.js found no module workers: no use trying again
      return;
    }
    try {
      worker = booted || root.calcStartWorker();
    } catch (err) {
      fail(String(err && err.message ? err.message : err));
      return;
    }
    worker.onmessage = (event) => onWorkerMessage(event.data);
    worker.onerror = (event) => {
      event.preventDefault();
      restartWorker();
    };
    clearTimeout(startTimer);
    startTimer = setTimeout(() => restartWorker(), START_TIMEOUT_MS);
    worker.postMessage({ type: "init", lang, strings });
  }

  function restartWorker() {
    if (worker) worker.terminate();
    worker = null;
    clearTimeout(computeTimer);
    clearTimeout(startTimer);
    restarts += 1;
    root.dataset.calcRestarts = String(restarts);
    if (restarts > MAX_RESTARTS) {
      fail("worker failed to start");
      return;
    }
    apply(machine.workerRestarting());
    startWorker();
  }

  function fail(detail) {
    if (worker) worker.terminate();
    worker = null;
    clearTimeout(startTimer);
    root.dataset.calcFailure = String(detail).slice(0, 200);
    setWorker("failed");
    apply(machine.workerFailed(detail));
  }

  function setWorker(value) {
    root.dataset.calcWorker = value; // private: tests and benchmarks
  }

  function onWorkerMessage(msg) {
    if (msg.type === "ready") {
      clearTimeout(startTimer);
      root.dataset.calcTimings = JSON.stringify(msg.timings);
      performance.mark("calc-ready");
      setWorker("up");
      apply(machine.workerUp());
    } else if (msg.type === "failed") {
      fail(msg.detail);
    } else if (msg.type === "crashed") {
      restartWorker();
    } else if (msg.type === "config-result") {
      configImport.onResult(msg);
    } else if (msg.type === "result") {
      clearTimeout(computeTimer);
      apply(machine.answer(msg.id, msg.out));
    }
  }

  // Carries out the machine's effects, then publishes its state.
  function apply(effects) {
    for (const effect of effects) {
      if (effect.type === "send") {
        clearTimeout(computeTimer);
        computeTimer = setTimeout(restartWorker, COMPUTE_TIMEOUT_MS);
        worker.postMessage({ type: "compute", id: effect.id, command, request: effect.key });
      } else if (effect.type === "render") {
        clearErrors();
        render(effect.out);
        delete root.dataset.inputError;
        answered();
      } else if (effect.type === "errors") {
        if (!effect.add) clearErrors();
        const out = effect.out;
        // every bad field at once (calc names them all), the first one first
        for (const error of Array.isArray(out.errors) ? out.errors : [out.error]) showError(error);
        answered();
      }
    }
    publish();
  }

  // The public signal: data-calc-state, and data-calc-key, the request the numbers on show
  // belong to. Set last, after the results they describe are in the page.
  function publish() {
    const state = machine.state;
    if (state === "ready" && "inputError" in root.dataset) {
      // back to a request whose numbers are on show (no new answer): its errors go
      clearErrors();
      delete root.dataset.inputError;
    }
    const results = machine.results;
    staleNote.hidden = !(state === "invalid" && results !== "none");
    root.classList.toggle("calc-withdrawn", machine.withdrawn);
    pendingNote.hidden = !machine.withdrawn;
    if (machine.shownKey === null) delete root.dataset.calcKey;
    else root.dataset.calcKey = machine.shownKey;
    root.dataset.calcResults = results;
    slot.setAttribute("aria-busy", state === "computing" ? "true" : "false");
    if (state === "error") {
      setStatus(results === "current" ? "status_error" : "status_error_other");
    } else if (state === "ready") {
      // the build-time result, while the worker starts: edits wait for it
      if (root.dataset.calcWorker !== "up") setStatus("status_static");
      else setStatus(restarts ? "status_restarted" : "status_ready");
    } else if (state === "computing") {
      setStatus(machine.withdrawn ? "status_computing_yours" : "status_computing");
    } else if (state === "invalid") {
      setStatus("status_invalid");
    }
    root.dataset.calcState = state;
    if (state === "ready" && !ownShown) {
      ownShown = true;
      performance.mark("calc-own-numbers"); // benchmarks: first numbers that are the form's
    }
  }

  // Counts the answers shown (results or messages): search-defer.js restarts its wait on it.
  function answered() {
    root.dataset.computed = String(Number(root.dataset.computed || "0") + 1);
  }

  function update() {
    root.dataset.method = byName.get("method").value; // options of other methods hide (CSS)
    syncUrl();
    const { request, errors } = buildRequest();
    let key = null;
    try {
      key = requestKey(request); // also what the worker receives: text, never a deep object
    } catch (err) {
      // nested beyond what JavaScript can serialise (stack overflow): refused here
      errors.hf_config = { code: "request_too_deep", field: "hf_config", value: null };
    }
    const clientErrors = Object.values(errors);
    const blocked = clientErrors.length > 0;
    if (blocked) showClientErrors(clientErrors);
    // With errors found here, the other fields still go to calc, so that their errors show
    // at once too; not without a model (calc checks LoRA targets and sizes against it).
    apply(machine.setForm(key, { blocked, check: key !== null && "model" in request }));
  }

  function dropUrlOptions(el) {
    for (const option of el.querySelectorAll("option[data-from-url]")) {
      if (option.value !== el.value || !overrides.has(el.name)) option.remove();
    }
  }

  function onEdit(event) {
    const name = event.target && event.target.name;
    if (name) overrides.delete(name);
    if (name && profileKeys.has(name)) chosen.add(name);
    if (event.target && event.target.dataset.kind === "helper") fillDatasetTokens();
    else if (name === "dataset_tokens") for (const el of helpers) el.value = ""; // typed directly
    if (event.target && event.target.tagName === "SELECT") dropUrlOptions(event.target);
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
      chosen.add(key);
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
    chosen.clear();
    for (const option of form.querySelectorAll("option[data-from-url]")) option.remove();
    unknownParams = [];
    for (const el of controls) {
      if (el === configArea) el.value = "";
      else if (el.type === "checkbox") el.checked = el.dataset.default === "true";
      else el.value = el.dataset.default;
    }
    for (const folded of form.querySelectorAll("details")) folded.open = false;
    readUrl();
    clearErrors();
    update();
  }

  // ------------------------------------------------------------ start

  readUrl();
  clearErrors();
  patchLanguageLinks(queryString());
  // The build-time result is the default setup's: the form's own when the form holds it.
  let shownKey;
  try {
    shownKey = requestKey(JSON.parse(root.dataset.staticRequest));
  } catch (err) {
    shownKey = null; // no build-time request: the figures on show count as no request's
  }
  machine = new CalcMachine({ shownKey });
  form.addEventListener("input", onEdit);
  form.addEventListener("change", onEdit);
  form.addEventListener("submit", (event) => event.preventDefault());
  slot.addEventListener("click", onApply);
  window.addEventListener("popstate", restoreFromUrl);
  advanced.addEventListener("toggle", () => syncUrl()); // basic <-> advanced, in the URL
  // Client-side checks answer at once, before the worker is up.
  update();
  root.calculator = {
    crashWorker: () => worker && worker.postMessage({ type: "crash" }),
  };
  const configImport = initConfigImport(root, {
    post: (msg) => Boolean(worker && root.dataset.calcWorker === "up" && (worker.postMessage(msg), true)),
    apply: applyChanges,
    request: () => buildRequest().request,
  });
  startWorker();
}
