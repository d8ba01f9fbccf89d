// "Paste or drop your training config": a box next to the model field that sends the text
// to the worker (calc.config_import, the same code as `python -m calc import`), shows the
// key-by-key report, fills the form with the imported setup (which puts it in the URL like
// any edit), and exports the current setup back to each format.
// Built with createElement/textContent only: nothing from the file becomes markup.
//
// initConfigImport(root, hooks) -> {onResult(msg)}; hooks:
//   post(msg) -> bool   send {type: "config", id, action, payload} to the worker (false: not ready)
//   apply(changes)      set form controls from {field: value} and recompute
//   request() -> object the current request (for export)

// "auto", then calc.config_import.FORMATS; calc.config_import.loading.MAX_BYTES
// (tests/js/numfmt.test.mjs checks both against calc)
export const FORMATS = ["auto", "axolotl", "trl", "llamafactory", "torchtune", "deepspeed", "accelerate"];
export const MAX_BYTES = 256 * 1024;

export function initConfigImport(root, hooks) {
  const strings = JSON.parse(document.getElementById("calc-strings").textContent);
  const t = strings.config_import;
  const anchor = root.querySelector('.calc-field[data-field="model"]');
  if (!t || !anchor) return { onResult() {} };

  const el = (tag, attrs = {}, ...children) => {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, String(value));
    for (const child of children) node.append(child);
    return node;
  };

  const textarea = el("textarea", { id: "calc-import-text", rows: "7", spellcheck: "false",
                                    "aria-describedby": "calc-import-hint" });
  const file = el("input", { id: "calc-import-file", type: "file", accept: ".yml,.yaml,.json,.txt" });
  const format = el("select", { id: "calc-import-format" });
  for (const name of FORMATS) format.append(el("option", { value: name }, t.formats[name] || name));
  const run = el("button", { type: "button", class: "calc-import-run" }, t.import);
  const message = el("p", { class: "calc-import-message", role: "status", "aria-live": "polite" });
  const error = el("p", { class: "calc-error calc-import-error", role: "alert", hidden: "hidden" });
  const report = el("div", { class: "calc-import-report" });
  const exportOut = el("textarea", { id: "calc-export-text", rows: "8", readonly: "readonly",
                                     spellcheck: "false", hidden: "hidden" });
  const exportLabel = el("label", { for: "calc-export-text", hidden: "hidden" }, t.export_label);
  const copy = el("button", { type: "button", class: "calc-export-copy", hidden: "hidden" }, t.copy);
  const exportButtons = el("div", { class: "calc-export-buttons", role: "group",
                                    "aria-label": t.export_heading });
  for (const name of FORMATS.slice(1)) {
    exportButtons.append(el("button", { type: "button", class: "calc-export", "data-format": name },
                            t.formats[name] || name));
  }
  const box = el("details", { class: "calc-import" },
    el("summary", {}, t.summary),
    el("label", { for: "calc-import-text" }, t.label),
    textarea,
    el("small", { class: "calc-hint", id: "calc-import-hint" }, t.hint),
    el("div", { class: "calc-import-controls" },
      el("label", { for: "calc-import-file" }, t.file), file,
      el("label", { for: "calc-import-format" }, t.format), format, run),
    message, error, report,
    el("p", { class: "calc-import-subhead" }, el("strong", {}, t.export_heading)),
    el("small", { class: "calc-hint" }, t.export_hint),
    exportButtons, exportLabel, exportOut, copy);
  anchor.after(box);
  const style = el("link", { rel: "stylesheet", href: new URL("./config-import.css", import.meta.url).href });
  document.head.append(style);

  // The form recomputes on every input/change event inside it: this box is not part of
  // the request, so its events stop here.
  for (const type of ["input", "change"]) box.addEventListener(type, (event) => event.stopPropagation());

  let nextId = 1;
  const waiting = new Map(); // id -> callback

  function send(action, payload, callback) {
    const id = `cfg-${nextId++}`;
    const sent = hooks.post({ type: "config", id, action, payload: JSON.stringify(payload) });
    if (!sent) {
      showError(null, t.not_ready);
      return;
    }
    waiting.set(id, callback);
  }

  function showError(code, text) {
    const base = text || strings.errors[code] || t.error_generic;
    error.textContent = base;
    error.dataset.errorCode = code || "not_ready";
    error.hidden = false;
    message.textContent = "";
  }

  function clearError() {
    error.textContent = "";
    error.hidden = true;
    delete error.dataset.errorCode;
  }

  function noteText(note) {
    if (!note) return "";
    return (t.notes && t.notes[note]) || note;
  }

  // A refused value in words (= calc.config_import.cli.invalid_text): the value, why, what
  // the tool accepts, and the default the form got instead.
  function acceptedText(accepted) {
    const json = (v) => JSON.stringify(v);
    if (Array.isArray(accepted.allowed)) {
      const shown = accepted.allowed.slice(0, 16).map(json);
      return shown.join(", ") + (accepted.allowed.length > 16 ? ", …" : "");
    }
    const kind = accepted.maximum === undefined ? (accepted.minimum_exclusive ? "above" : "at_least")
      : (accepted.maximum_exclusive ? "below" : "range");
    return (t.accepted[kind] || kind).replace("{low}", json(accepted.minimum)).replace("{high}", json(accepted.maximum));
  }

  function invalidText(entry) {
    let text = t.invalid_key.replace("{key}", entry.key).replace("{value}", JSON.stringify(entry.value))
      .replace("{reason}", t.invalid[entry.reason] || entry.reason)
      .replace("{accepted}", acceptedText(entry.accepted || {}));
    if ("used_instead" in entry) {
      const source = t.source[entry.source] || entry.source;
      text += "; " + t.used_instead.replace("{value}", JSON.stringify(entry.used_instead)).replace("{source}", source);
    }
    return text;
  }

  function table(caption, heads, rows) {
    const head = el("tr", {}, ...heads.map((h) => el("th", { scope: "col" }, h)));
    const body = rows.map((cells) => el("tr", cells.attrs || {}, ...cells.map((c) => el("td", {}, c))));
    return el("table", { class: "calc-import-table" }, el("caption", {}, caption),
              el("thead", {}, head), el("tbody", {}, ...body));
  }

  function showReport(result) {
    const counts = { used: 0, ignored: 0, unknown: 0, invalid: 0 };
    for (const entry of result.keys) counts[entry.status] += 1;
    message.textContent = t.imported
      .replace("{format}", t.formats[result.format] || result.format)
      .replace("{tool}", result.tool)
      .replace("{used}", counts.used).replace("{ignored}", counts.ignored)
      .replace("{unknown}", counts.unknown)
      + (counts.invalid ? " " + t.invalid_count.replace("{invalid}", counts.invalid) : "");
    const rows = result.keys.map((entry) => {
      const fields = entry.fields ? entry.fields.join(", ") : entry.field || "";
      const note = entry.status === "invalid" ? invalidText(entry) : noteText(entry.note);
      const cells = [entry.key, t.status[entry.status] || entry.status,
                     [fields, note].filter(Boolean).join(" — ")];
      cells.attrs = { "data-key": entry.key, "data-status": entry.status };
      return cells;
    });
    const parts = [table(t.report_caption, [t.col_key, t.col_status, t.col_field], rows)];
    if (result.defaults.length) {
      const defaults = result.defaults.map((d) => {
        const cells = [d.field, JSON.stringify(d.value), d.source];
        cells.attrs = { "data-field": d.field };
        return cells;
      });
      parts.push(table(t.defaults_caption, [t.col_key, t.col_value, t.col_source], defaults));
    }
    if (!("model" in result.request)) {
      const note = el("p", { class: "calc-import-model" }, t.model_unknown);
      const nearest = result.keys.find((entry) => Array.isArray(entry.suggestions) && entry.suggestions.length);
      if (nearest) {
        note.append(" ", t.suggestions, " ");
        for (const id of nearest.suggestions) {
          const pick = el("button", { type: "button", class: "calc-import-pick", "data-model": id }, id);
          pick.addEventListener("click", () => hooks.apply({ model: id }));
          note.append(pick, " ");
        }
      }
      parts.unshift(note);
    }
    report.replaceChildren(...parts);
    root.dataset.importStatus = "done";
  }

  function doImport() {
    clearError();
    const text = textarea.value;
    if (new TextEncoder().encode(text).length > MAX_BYTES) {
      showError("config_too_large");
      return;
    }
    message.textContent = t.working;
    root.dataset.importStatus = "working";
    send("import", { text, format: format.value, model: hooks.request().model }, (out) => {
      if ("error" in out) {
        const detected = out.error.detected;
        showError(out.error.code, detected && `${strings.errors[out.error.code]} ${
          t.format_detected.replace("{detected}", t.formats[detected] || detected)}`);
        root.dataset.importStatus = "error";
        return;
      }
      const result = out.result;
      const changes = { ...result.form };
      if ("model" in result.request && typeof result.request.model === "string") {
        changes.model = result.request.model;
      }
      showReport(result);
      hooks.apply(changes);
    });
  }

  function doExport(name) {
    clearError();
    send("export", { request: hooks.request(), format: name }, (out) => {
      if ("error" in out) {
        showError(out.error.code);
        return;
      }
      exportOut.value = out.result.text;
      exportOut.dataset.format = name;
      exportOut.hidden = false;
      exportLabel.hidden = false;
      copy.hidden = false;
      copy.textContent = t.copy;
      root.dataset.exportStatus = name;
    });
  }

  async function readFile(picked) {
    if (!picked) return;
    if (picked.size > MAX_BYTES) {
      showError("config_too_large");
      return;
    }
    textarea.value = await picked.text();
    doImport();
  }

  run.addEventListener("click", doImport);
  file.addEventListener("change", () => readFile(file.files && file.files[0]));
  textarea.addEventListener("dragover", (event) => event.preventDefault());
  textarea.addEventListener("drop", (event) => {
    const dropped = event.dataTransfer && event.dataTransfer.files && event.dataTransfer.files[0];
    if (!dropped) return; // dropped text: the browser inserts it
    event.preventDefault();
    readFile(dropped);
  });
  exportButtons.addEventListener("click", (event) => {
    const button = event.target.closest("button.calc-export");
    if (button) doExport(button.dataset.format);
  });
  copy.addEventListener("click", async () => {
    exportOut.select();
    try {
      await navigator.clipboard.writeText(exportOut.value);
      copy.textContent = t.copied;
    } catch (err) {
      /* no clipboard permission: the text is selected for Ctrl+C */
    }
  });

  return {
    onResult(msg) {
      const callback = waiting.get(msg.id);
      if (!callback) return;
      waiting.delete(msg.id);
      callback(msg.out);
    },
  };
}
