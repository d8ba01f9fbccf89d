// The calculator page's wiring: the form's events, the worker's answers and the state
// machine's effects onto the DOM. The parts live in modules of their own:
//   state.js         which request the numbers on show belong to (no DOM);
//   form-state.js    form <-> URL <-> request (no DOM);
//   messages.js      input errors and internal errors in words (no DOM);
//   format.js        the site's number format, for those messages (no DOM);
//   worker-client.js the worker's start, restarts and time-outs (no DOM);
//   results.js       the results tree into the page.
// The page arrives with the build-time result (data-calc-state="static"); nothing here
// blocks it. States: static -> computing -> ready, or invalid, or error (state.js).

import { initConfigImport } from "./config-import.js";
import { FormState } from "./form-state.js";
import { errorTarget, errorText, internalErrorText, internalReference } from "./messages.js";
import { setCudaOnly, showResults } from "./results.js";
import { CalcMachine, requestKey } from "./state.js";
import { WorkerClient } from "./worker-client.js";

const root = document.getElementById("calc");
if (root) main(root);

function main(root) {
  const strings = JSON.parse(document.getElementById("calc-strings").textContent);
  const form = root.querySelector(".calc-form");
  const slot = root.querySelector(".calc-results-slot");
  const status = root.querySelector(".calc-status");
  const announcer = root.querySelector(".calc-announce");
  const staleNote = root.querySelector(".calc-stale-note");
  const pendingNote = root.querySelector(".calc-pending-note");
  const general = root.querySelector('[data-error-for="_general"]');
  const command = root.dataset.command;
  const lang = root.dataset.lang;
  const controls = [...form.querySelectorAll("[name]")];
  const advanced = form.querySelector("details[data-mode]"); // open = advanced mode
  const state = new FormState({ controls, lang, profileKeys: JSON.parse(root.dataset.profileKeys || "[]"),
                                methodDefaults: JSON.parse(root.dataset.methodDefaults || "{}"),
                                profileless: JSON.parse(root.dataset.profileless || "[]") });
  const { byName, configArea, helpers } = state;
  let machine = null; // CalcMachine, made once the form has read the URL
  let ownShown = false;

  // ------------------------------------------------------------ URL <-> form

  // A control inside a folded section (config, advanced, the library's behaviours inside
  // advanced) is unfolded, with every section around it, when it has a value from the URL or
  // an error.
  function revealField(el) {
    for (let folded = el.closest("details"); folded; folded = folded.parentElement?.closest("details")) {
      folded.open = true;
    }
  }

  const urlDom = {
    setMode: (open) => { advanced.open = open; },
    reveal: revealField,
    addOption: (select, value) => {
      const option = document.createElement("option");
      option.value = value;
      option.textContent = value;
      option.dataset.fromUrl = "true";
      select.appendChild(option);
    },
  };

  function syncUrl() {
    const query = state.queryString(advanced.open);
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

  // ------------------------------------------------------------ messages

  function clearErrors() {
    for (const p of root.querySelectorAll(".calc-error[data-error-for]")) {
      p.textContent = "";
      p.hidden = true;
    }
    for (const el of controls) el.removeAttribute("aria-invalid");
    delete root.dataset.internalError;
    showGeneral(); // keeps only the unknown-parameter notice, if any
  }

  function showGeneral() {
    general.textContent = "";
    if (!state.unknownParams.length) {
      general.hidden = true;
      return;
    }
    generalLine(`${strings.errors.unknown_parameter} ${state.unknownParams.join(", ")}`, "unknown_parameter");
  }

  function generalLine(text, code) {
    const p = document.createElement("p");
    p.textContent = text;
    p.dataset.errorCode = code;
    general.appendChild(p);
    general.hidden = false;
    return p;
  }

  function showError(error) {
    const target = errorTarget(error, { has: (name) => byName.has(name), configFilled: Boolean(configArea.value.trim()) });
    const text = errorText(error, { strings, lang, isPercent: (name) => {
      const el = byName.get(name);
      return Boolean(el && el.dataset.percent === "true");
    } });
    if (target === "_general") {
      generalLine(text, error.code);
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

  // A bug in the calculator (calc_view.session's internal_error): one message that asks for
  // a report, in the general slot; no field is marked, the inputs are not at fault.
  function showInternal(internal) {
    const p = generalLine(internalErrorText(internal, strings), "internal_error");
    p.classList.add("calc-internal-error");
    root.dataset.internalError = internalReference(internal);
  }

  function setStatus(key) {
    status.textContent = strings.ui[key];
    status.dataset.status = key;
  }

  // ------------------------------------------------------------ what a screen reader hears

  // The live region says what changed, once: the verdict line of a new answer (in the page's
  // language, as the worker wrote it), or a failure. The verdict waits until the answers stop
  // coming (typing "4096" computes four times), and a text already said is not said again.
  const SETTLE_MS = 600;
  let said = verdictText(); // the build-time verdict is on the page already
  let settling = null;

  function verdictText() {
    const line = slot.querySelector(".calc-verdict");
    return line ? line.textContent.replace(/\s+/g, " ").trim() : "";
  }

  function announce(text) {
    if (!text || text === said) return;
    said = text;
    announcer.textContent = text;
  }

  function announceState(now) {
    clearTimeout(settling);
    settling = null;
    if (now === "error") {
      announce(status.textContent); // input errors are alerts at their fields already
    } else if (now === "ready" && !machine.pending && root.dataset.calcWorker === "up") {
      settling = setTimeout(() => announce(verdictText()), SETTLE_MS);
    }
  }

  // ------------------------------------------------------------ results

  function render(out) {
    const { defaults, profileValues } = showResults(slot, out.view, state.stack === "cuda");
    // optional inputs left empty show what calc used instead
    for (const el of controls) {
      if (el.dataset.default === "" && el.dataset.kind !== "config") {
        if (el.name in defaults) el.placeholder = String(defaults[el.name]);
        else el.removeAttribute("placeholder");
      }
    }
    // the controls left to the library's profile show the values calc used for them
    state.showProfileValues(profileValues);
  }

  // ------------------------------------------------------------ worker

  // The request of the build-time result, as the worker receives requests (null when the
  // page has none: the figures on show then count as no request's).
  const staticKey = (() => {
    try {
      return requestKey(JSON.parse(root.dataset.staticRequest));
    } catch (err) {
      return null;
    }
  })();

  const setWorker = (value) => { root.dataset.calcWorker = value; }; // private: tests, benchmarks
  const client = new WorkerClient({
    // warm: the build-time request, which the worker answers once while the reader reads
    init: { type: "init", lang, strings, command, warm: staticKey },
    boot: {
      // the first worker was started by boot.js while the page was parsed
      take: () => {
        const worker = root.calcBootWorker;
        root.calcBootWorker = null;
        return { worker, failed: Boolean(worker && root.calcBootFailed),
                 noModule: Boolean(root.calcNoModuleWorker) };
      },
      start: () => root.calcStartWorker(),
    },
    on: {
      status: setWorker,
      restarted: (count) => { root.dataset.calcRestarts = String(count); },
      restarting: () => apply(machine.workerRestarting()),
      failed: (detail) => {
        root.dataset.calcFailure = String(detail).slice(0, 200);
        apply(machine.workerFailed(detail));
      },
      ready: (timings) => {
        root.dataset.calcTimings = JSON.stringify(timings);
        performance.mark("calc-ready");
        setWorker("up");
        apply(machine.workerUp());
      },
      result: (id, out) => apply(machine.answer(id, out)),
      message: (msg) => {
        if (msg.type === "config-result") configImport.onResult(msg);
        else if (msg.type === "update") apply(machine.update(msg.id, msg.out));
        else if (msg.type === "warmed") root.dataset.calcWarm = "true"; // private: benchmarks
      },
    },
  });

  // Carries out the machine's effects, then publishes its state.
  function apply(effects) {
    for (const effect of effects) {
      if (effect.type === "send") {
        // defer: the answer comes without the allocator's replay, which follows as "update"
        client.compute({ type: "compute", id: effect.id, command, request: effect.key,
                         defer: true });
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
      } else if (effect.type === "internal") {
        if (!effect.add) clearErrors();
        showInternal(effect.out && effect.out.internal_error);
        answered();
      }
    }
    publish();
  }

  // The public signal: data-calc-state, and data-calc-key, the request the numbers on show
  // belong to. Set last, after the results they describe are in the page.
  function publish() {
    const now = machine.state;
    if (now === "ready" && ("inputError" in root.dataset || "internalError" in root.dataset)) {
      // back to a request whose numbers are on show (no new answer): its errors go
      clearErrors();
      delete root.dataset.inputError;
    }
    const results = machine.results;
    staleNote.hidden = !(now === "invalid" && results !== "none");
    root.classList.toggle("calc-withdrawn", machine.withdrawn);
    pendingNote.hidden = !machine.withdrawn;
    if (machine.shownKey === null) delete root.dataset.calcKey;
    else root.dataset.calcKey = machine.shownKey;
    root.dataset.calcResults = results;
    slot.setAttribute("aria-busy", now === "computing" ? "true" : "false");
    if (now === "error") {
      if (machine.internal) setStatus("status_internal");
      else setStatus(results === "current" ? "status_error" : "status_error_other");
    } else if (now === "ready") {
      // the build-time result, while the worker starts: edits wait for it
      if (root.dataset.calcWorker !== "up") setStatus("status_static");
      else setStatus(client.restarts ? "status_restarted" : "status_ready");
    } else if (now === "computing") {
      setStatus(machine.withdrawn ? "status_computing_yours" : "status_computing");
    } else if (now === "invalid") {
      setStatus("status_invalid");
    }
    announceState(now);
    // private (tests): "true" while an answer is still to come (a request in flight or queued)
    root.dataset.calcPending = String(machine.pending);
    root.dataset.calcState = now;
    if (now === "ready" && !ownShown) {
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
    syncPicker();
    state.followMethod(); // the precision of the method, until the reader picks one
    const { request, errors } = state.buildRequest();
    let key = null;
    try {
      key = requestKey(request); // also what the worker receives: text, never a deep object
    } catch (err) {
      // nested beyond what JavaScript can serialise (stack overflow): refused here
      errors.hf_config = { code: "request_too_deep", field: "hf_config", value: null };
    }
    const clientErrors = Object.values(errors);
    const blocked = clientErrors.length > 0;
    if (blocked) {
      // errors found here (empty values, JSON): shown at once, without a round trip
      clearErrors();
      for (const error of clientErrors) showError(error);
    }
    // With errors found here, the other fields still go to calc, so that their errors show
    // at once too; not without a model (calc checks LoRA targets and sizes against it).
    apply(machine.setForm(key, { blocked, check: key !== null && "model" in request }));
    // After the request is on its way: Chromium's history.replaceState lays out the page
    // first, and right after an answer's results went in that costs tens of milliseconds,
    // which the worker now spends computing instead of waiting (bench_calculator).
    syncUrl();
  }

  // ------------------------------------------------------------ events

  function dropUrlOptions(el) {
    for (const option of el.querySelectorAll("option[data-from-url]")) {
      if (option.value !== el.value || !state.overrides.has(el.name)) option.remove();
    }
  }

  function onEdit(event) {
    const target = event.target;
    const name = target && target.name;
    if (name) state.edited(name);
    if (target && target.dataset.kind === "helper") state.fillDatasetTokens();
    else if (name === "dataset_tokens") for (const el of helpers) el.value = ""; // typed directly
    if (target && target.tagName === "SELECT") dropUrlOptions(target);
    if (state.unknownParams.length) {
      state.unknownParams = [];
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
    state.applyChanges(changes, revealField);
    update();
  }

  // Back/forward (and links that only change the query): the URL is the state.
  function restoreFromUrl() {
    for (const option of form.querySelectorAll("option[data-from-url]")) option.remove();
    state.reset();
    for (const folded of form.querySelectorAll("details")) folded.open = false;
    state.readQuery(window.location.search, urlDom);
    setCudaOnly(slot, state.stack === "cuda");
    clearErrors();
    update();
  }

  // The "CUDA only" filter (in the results): kept in the URL as stack=cuda.
  function onFilter(event) {
    if (!event.target.classList || !event.target.classList.contains("calc-cuda-only-box")) return;
    state.stack = event.target.checked ? "cuda" : null;
    syncUrl();
  }

  // The presets by family (a <select> without a name): a choice is typed into the model field,
  // which alone goes to the request and the URL; the picker shows the field's preset, if any.
  const picker = form.querySelector("#calc-model-pick");
  function syncPicker() {
    if (!picker) return;
    const value = byName.get("model").value.trim();
    picker.value = [...picker.options].some((o) => o.value === value) ? value : "";
  }
  function onPick(event) {
    event.stopPropagation(); // not a request control: onEdit sees the model field's input
    if (!picker.value) return;
    const model = byName.get("model");
    model.value = picker.value;
    model.dispatchEvent(new Event("input", { bubbles: true }));
  }

  // ------------------------------------------------------------ start

  state.readQuery(window.location.search, urlDom);
  setCudaOnly(slot, state.stack === "cuda"); // the build-time results too
  clearErrors();
  patchLanguageLinks(state.queryString(advanced.open));
  // The build-time result is the default setup's: the form's own when the form holds it.
  machine = new CalcMachine({ shownKey: staticKey });
  if (picker) {
    picker.addEventListener("change", onPick);
    picker.addEventListener("input", (event) => event.stopPropagation());
  }
  form.addEventListener("input", onEdit);
  form.addEventListener("change", onEdit);
  form.addEventListener("submit", (event) => event.preventDefault());
  slot.addEventListener("click", onApply);
  slot.addEventListener("change", onFilter);
  window.addEventListener("popstate", restoreFromUrl);
  advanced.addEventListener("toggle", () => syncUrl()); // basic <-> advanced, in the URL
  // Client-side checks answer at once, before the worker is up.
  update();
  root.calculator = { crashWorker: () => client.crash() };
  const configImport = initConfigImport(root, {
    post: (msg) => client.post(msg),
    apply: applyChanges,
    request: () => state.buildRequest().request,
  });
  client.start();
}
