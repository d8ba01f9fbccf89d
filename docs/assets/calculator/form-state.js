// The form's state without the DOM: which controls the reader chose, values from the URL
// that no control can hold, the URL's query for the form, and the request it stands for.
// Controls are read through the properties every form control has (name, type, value,
// checked, dataset, options), so tests/js/ runs this under Node with plain objects.

export const MODE_PARAM = "mode"; // ?mode=advanced opens the advanced section
// ?stack=cuda: the recommendations keep to CUDA cards (the "CUDA only" filter); no
// parameter: every stack. Not a request key: calc ranks every card either way.
export const STACK_PARAM = "stack";
export const STACK_FILTERS = ["cuda"];

// calc.numfmt.NUMBER_RE, which the CLI's flags use (tests/js/numfmt.test.mjs checks the copy)
export const NUMBER_RE = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;

export function splitList(text) {
  return text.split(",").map((s) => s.trim()).filter(Boolean);
}

// A number as the reader typed it (the page's decimal comma in Spanish, spaces and
// underscores between digits); text that is not one is returned as it is, so that calc
// answers not_number / not_integer. percent: a share the reader may write as 0.25, 25 or
// "25 %" (the safety margin): a value above 1, or one with "%", is a percentage.
export function parseNumber(text, lang, percent = false) {
  let t = text.trim().replace(/[\s\u202f\u00a0_]/g, "");
  let isPercent = false;
  if (percent && t.endsWith("%")) {
    t = t.slice(0, -1);
    isPercent = true;
  }
  if (lang === "es" && /^[+-]?\d*,\d+$/.test(t)) t = t.replace(",", ".");
  if (!NUMBER_RE.test(t)) return text;
  const value = Number(t);
  return percent && (isPercent || value > 1) ? value / 100 : value;
}

// The first key that an object of this JSON text names twice, or null. JSON.parse keeps
// the last of two equal keys without a word; calc refuses such a text (duplicate_key), and
// so does the form. The text must be valid JSON (JSON.parse accepted it).
export function duplicateKey(text) {
  const stack = []; // per open object: the keys seen so far; per open array: null
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (c === '"') {
      let j = i + 1;
      while (text[j] !== '"') j += text[j] === "\\" ? 2 : 1;
      const raw = text.slice(i, j + 1);
      i = j + 1;
      const keys = stack[stack.length - 1];
      while (i < text.length && /\s/.test(text[i])) i += 1;
      if (keys && text[i] === ":") { // a key of the object being read
        const key = JSON.parse(raw);
        if (keys.has(key)) return key;
        keys.add(key);
      }
      continue;
    }
    if (c === "{") stack.push(new Set());
    else if (c === "[") stack.push(null);
    else if (c === "}" || c === "]") stack.pop();
    i += 1;
  }
  return null;
}

// model={"hf_config": {...}} in the URL: the config box shows the config itself (as it
// came, when it names a key twice, so that the form refuses it as calc would).
export function configTextFromUrl(value) {
  try {
    const parsed = JSON.parse(value);
    if (duplicateKey(value) !== null) return value;
    if (parsed && typeof parsed === "object" && !Array.isArray(parsed) && "hf_config" in parsed) {
      return JSON.stringify(parsed.hf_config, null, 1);
    }
  } catch (err) {
    /* kept as typed: the form reports it */
  }
  return value;
}

// Sample lengths (data-kind "stats") as name:value pairs, the URL's form of an object.
export function statsText(value) {
  return Object.entries(value).map(([name, number]) => `${name}:${number}`).join(",");
}

export class FormState {
  // controls: the form's named controls; profileKeys: the keys a training library's
  // profile sets (calc.frameworks); methodDefaults: {key: {method: value}}, the keys whose
  // default depends on the method (the precision: calc.reference.PRECISION); profileless: the
  // libraries whose profile sets nothing (calc.frameworks: generic).
  constructor({ controls, lang, profileKeys = [], methodDefaults = {}, profileless = [] }) {
    this.controls = controls;
    this.lang = lang;
    this.byName = new Map(controls.map((el) => [el.name, el]));
    this.configArea = this.byName.get("hf_config");
    this.helpers = controls.filter((el) => el.dataset.kind === "helper");
    // The keys a library's profile sets are sent only once the reader has chosen their
    // value (an edit, the URL, an imported config); until then the chosen library decides
    // them, and the control shows what calc used.
    this.profileKeys = new Set(profileKeys);
    this.profileless = new Set(profileless);
    // A key with a default per method follows the method until the reader chooses its
    // value (an edit, the URL, an imported config or a suggestion).
    this.methodDefaults = methodDefaults;
    this.chosen = new Set();
    // Values from the URL that no control can hold (e.g. method=bogus): sent as they are,
    // so calc names the problem; dropped as soon as the reader edits that field.
    this.overrides = new Map();
    this.unknownParams = [];
    this.stack = null; // the stack the recommendations keep to (STACK_PARAM); null: all
  }

  leftToProfile(key) {
    return this.profileKeys.has(key) && !this.chosen.has(key);
  }

  // The chosen library has a profile (the default library has one too), so a key the reader
  // set at its own default differs from what the profile would put there.
  libraryProfiled() {
    const el = this.byName.get("framework");
    return Boolean(el) && !this.profileless.has(el.value);
  }

  // The reader edited control `name`: its URL value goes, and a profile key (or a key with a
  // default per method) is now theirs.
  edited(name) {
    this.overrides.delete(name);
    if (this.profileKeys.has(name) || name in this.methodDefaults) this.chosen.add(name);
  }

  followsMethod(key) {
    return key in this.methodDefaults && !this.chosen.has(key) && !this.overrides.has(key);
  }

  // What a control holds when the URL leaves it out: its default, or the method's.
  urlDefault(el) {
    const byMethod = this.methodDefaults[el.name];
    const method = this.byName.get("method")?.value;
    return byMethod && method in byMethod ? byMethod[method] : el.dataset.default;
  }

  // The keys that follow the method take the chosen method's default (call before reading
  // the request).
  followMethod() {
    const method = this.byName.get("method")?.value;
    for (const [key, byMethod] of Object.entries(this.methodDefaults)) {
      const el = this.byName.get(key);
      if (!el || !this.followsMethod(key) || !(method in byMethod)) continue;
      el.value = byMethod[method];
    }
  }

  // Reads a query string into the controls. dom: what only the page can do, called back:
  //   setMode(advancedOpen), addOption(select, value) (an option for a value from the URL
  //   that the list lacks), reveal(control) (unfold the section that holds it).
  readQuery(search, dom) {
    for (const [key, value] of new URLSearchParams(search)) {
      if (key === MODE_PARAM && (value === "advanced" || value === "basic")) {
        dom.setMode(value === "advanced");
        continue;
      }
      if (key === STACK_PARAM && STACK_FILTERS.includes(value)) {
        this.stack = value;
        continue;
      }
      const el = this.byName.get(key);
      if (key === "hf_config" || !el) {
        this.unknownParams.push(key);
        continue;
      }
      this.chosen.add(key);
      if (key === "model" && value.trim().startsWith("{")) {
        this.configArea.value = configTextFromUrl(value);
        dom.reveal(this.configArea);
        continue;
      }
      if (el.type === "checkbox") {
        if (value === "true" || value === "false") el.checked = value === "true";
        else this.overrides.set(key, value);
      } else if (el.tagName === "SELECT") {
        if ([...el.options].some((o) => o.value === value)) el.value = value;
        else {
          // shown as the URL gave it (an option of its own, until the reader picks another),
          // so that calc's error is read against that value, not against a valid one
          dom.addOption(el, value);
          el.value = value;
          this.overrides.set(key, value);
        }
      } else {
        el.value = value;
      }
      dom.reveal(el);
    }
  }

  // Back to the defaults (before reading another URL).
  reset() {
    this.overrides.clear();
    this.chosen.clear();
    this.unknownParams = [];
    this.stack = null;
    for (const el of this.controls) {
      if (el === this.configArea) el.value = "";
      else if (el.type === "checkbox") el.checked = el.dataset.default === "true";
      else el.value = el.dataset.default;
    }
  }

  // The text a control stands for in the URL (booleans true/false, lists comma-joined).
  controlText(el) {
    if (this.overrides.has(el.name)) return this.overrides.get(el.name);
    if (el.type === "checkbox") return el.checked ? "true" : "false";
    if (el.dataset.kind === "targets") return splitList(el.value).join(",");
    return el.value;
  }

  modelTextForUrl() {
    try {
      return JSON.stringify({ hf_config: JSON.parse(this.configArea.value) });
    } catch (err) {
      return this.configArea.value;
    }
  }

  // "?key=value&..." for every control that differs from its default ("" when none does).
  queryString(advancedOpen) {
    const parts = [];
    if (advancedOpen) parts.push(`${MODE_PARAM}=advanced`); // basic is the default
    if (this.stack) parts.push(`${STACK_PARAM}=${encodeURIComponent(this.stack)}`);
    for (const el of this.controls) {
      if (el === this.configArea) continue;
      if (this.leftToProfile(el.name) || this.followsMethod(el.name)) continue; // implied
      let text = this.controlText(el);
      if (el.name === "model" && this.configArea.value.trim()) text = this.modelTextForUrl();
      // a behaviour the reader set stays in the URL while a library's profile could change it;
      // a key with a default per method is compared with the chosen method's
      if (text === this.urlDefault(el) && !(this.profileKeys.has(el.name) && this.libraryProfiled())) continue;
      let encoded = encodeURIComponent(text).replace(/%2C/gi, ",");
      if (el.dataset.kind === "stats") encoded = encoded.replace(/%3A/gi, ":"); // mean:900,p90:2000
      parts.push(`${encodeURIComponent(el.name)}=${encoded}`);
    }
    return parts.length ? `?${parts.join("&")}` : "";
  }

  // The request the form stands for, and the errors found without calc ({field: error}):
  // empty required values, a config that is not JSON, a bad examples × tokens helper.
  buildRequest() {
    const request = {};
    const errors = {};
    const configArea = this.configArea;
    for (const el of this.controls) {
      const key = el.name;
      if (el === configArea || this.leftToProfile(key)) continue;
      if (this.overrides.has(key)) {
        request[key] = this.overrides.get(key);
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
            const config = JSON.parse(text);
            const repeated = duplicateKey(text);
            if (repeated === null) request.model = { hf_config: config };
            else errors.hf_config = { code: "duplicate_key", field: "hf_config", value: repeated };
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
        if (kind === "int" || kind === "number") {
          request[key] = parseNumber(text, this.lang, el.dataset.percent === "true");
        } else if (kind === "targets") request[key] = text === "all-linear" ? text : splitList(text);
        else request[key] = text; // a model id; sample lengths as written (calc reads mean:900,p90:2000)
      }
    }
    for (const el of this.helpers) {
      const text = el.value.trim();
      const value = text ? parseNumber(text, this.lang) : null;
      if (text && !(typeof value === "number" && value > 0)) {
        errors[el.name] = { code: "not_number", field: el.name, value: text, minimum: 0,
                            minimum_exclusive: true };
      }
    }
    return { request, errors };
  }

  // Examples × average tokens per example -> dataset_tokens, as the reader types them.
  fillDatasetTokens() {
    const [a, b] = this.helpers.map((el) => parseNumber(el.value.trim(), this.lang));
    if (typeof a === "number" && typeof b === "number" && a > 0 && b > 0) {
      this.byName.get("dataset_tokens").value = String(Math.round(a * b));
    }
  }

  // Request changes onto the controls (a suggestion, an imported config); reveal(control)
  // unfolds the section that holds each.
  applyChanges(changes, reveal) {
    for (const [key, value] of Object.entries(changes)) {
      const el = this.byName.get(key);
      if (!el) continue;
      this.overrides.delete(key);
      this.chosen.add(key);
      if (el.type === "checkbox") el.checked = value === true;
      else if (value !== null && typeof value === "object" && !Array.isArray(value)) el.value = statsText(value);
      else el.value = Array.isArray(value) ? value.join(",") : value === null ? "" : String(value);
      reveal(el);
    }
    if ("model" in changes && this.configArea.value.trim()) this.configArea.value = ""; // the preset wins
  }

  // The values calc used for the keys left to the library's profile ({key: value}) onto
  // their controls.
  showProfileValues(values) {
    for (const [key, value] of Object.entries(values)) {
      const el = this.byName.get(key);
      if (!el || !this.leftToProfile(key)) continue;
      if (el.type === "checkbox") el.checked = value === true;
      else el.value = String(value);
    }
  }
}
