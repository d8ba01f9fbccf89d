// What the page says about an answer that is not a result, in the page's words (the
// strings the page embeds from the message catalogue, calc/data/messages), as plain text: the DOM wiring puts it in
// with textContent. No DOM: tests/js/ runs it under Node.
//
// Two kinds, never mixed:
// - an input error ({error, errors} from calc): a message next to the field it names;
// - an internal error ({internal_error} from calc_view.session): a bug in the calculator,
//   not in the reader's inputs; no field is blamed, the reader is asked to report it.

import { formatNumber } from "./format.js";

const DETAIL_MAX = 80; // characters of a value quoted back in a message

// Which message slot an error goes to: a field's name, or "_general".
// has(name): the form has that control; configFilled: the config box holds text.
export function errorTarget(error, { has, configFilled }) {
  const field = String(error.field || "");
  if (field === "hf_config" || field.startsWith("hf_config.") || field.startsWith("model.")) {
    return configFilled ? "hf_config" : "model";
  }
  const head = field.split(".")[0];
  return has(head) ? head : "_general";
}

// The message for an input error. isPercent(name): that field is written as a percentage.
export function errorText(error, { strings, lang, isPercent = () => false }) {
  const base = strings.errors[error.code] || strings.errors.generic;
  const field = String(error.field || "");
  let detail = "";
  // a key inside a control's object (length_stats.mean) is named with its value
  const part = field.includes(".") && !field.startsWith("model.") ? field.slice(field.indexOf(".") + 1) : "";
  const given = typeof error.value === "string" || typeof error.value === "number";
  if (field.startsWith("hf_config.") && error.code !== "unsupported_architecture") detail = field.slice("hf_config.".length);
  else if (part && given) detail = `${part}: ${error.value}`;
  else if (given) detail = String(error.value);
  else if (part) detail = part;
  if (detail.length > DETAIL_MAX) detail = `${detail.slice(0, DETAIL_MAX - 3)}…`;
  const text = detail ? `${base} (${detail})` : base;
  if (error.code === "unknown_preset") return `${text} ${presetHelp(error, strings)}`;
  const valid = validText(error, { strings, lang, isPercent });
  return valid ? `${text} ${valid}` : text;
}

// A model id calc does not know (a Hugging Face id of no preset): paste its config.json,
// or pick one of the presets calc names as nearest (its "suggestions", when it has any).
export function presetHelp(error, strings) {
  const found = Array.isArray(error.suggestions) ? error.suggestions : [];
  const ids = found.map((s) => (s && typeof s === "object" ? s.id : s)).filter((s) => typeof s === "string");
  const help = strings.ui.not_in_list;
  return ids.length ? `${help} ${strings.ui.nearest_presets.replace("{}", ids.slice(0, 5).join(", "))}` : help;
}

// What calc says would be valid (its error's allowed / minimum / maximum), in words.
export function validText(error, { strings, lang, isPercent = () => false }) {
  const ui = strings.ui;
  if (Array.isArray(error.allowed) && error.allowed.length) {
    const names = error.allowed.map((v) => {
      if (typeof v === "boolean") return ui[v ? "yes" : "no"];
      if (error.field === "gpu") return (strings.gpus || {})[v] || String(v);
      // option names are keyed by their field: sharding "none" and cpu_offload "none" differ
      const known = ((strings.enums || {})[String(error.field || "")] || {})[v];
      return known && known !== v ? `${v} (${known})` : String(v);
    });
    const list = names.length > 12 ? `${names.slice(0, 12).join(", ")}, …` : names.join(", ");
    return ui.valid_one_of.replace("{}", list);
  }
  if (typeof error.minimum !== "number" && typeof error.maximum !== "number") return "";
  const percent = isPercent(String(error.field || "").split(".")[0]);
  const num = (v) => (percent ? ui.valid_percent.replace("{}", formatNumber(v * 100, lang)) : formatNumber(v, lang));
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

// Only identifier-like text from an internal error reaches the page (its fields are
// calc_view.session's own: a type name, a file:line, a version), and briefly.
function token(value) {
  if (typeof value !== "string" && typeof value !== "number") return "";
  return String(value).replace(/[^\w./:+-]/g, "").slice(0, 60);
}

// The reference a reader quotes when reporting a bug: "internal_error · ZeroDivisionError ·
// calc/plan.py:120 · calc 0.1.0" (the stage is implied by the file).
export function internalReference(internal) {
  const found = internal && typeof internal === "object" ? internal : {};
  const version = token(found.calc_version);
  return [token(found.code) || "internal_error", token(found.exception), token(found.where),
          version ? `calc ${version}` : ""].filter(Boolean).join(" · ");
}

// The message for an internal error: a bug in the calculator, to be reported.
export function internalErrorText(internal, strings) {
  return strings.ui.internal_error_report.replace("{}", internalReference(internal));
}
