// The form's state without a browser (docs/assets/calculator/form-state.js): controls are
// plain objects with the properties of form controls. Run by tests/js/test_calculator_state_js.py.
import { test } from "node:test";
import assert from "node:assert/strict";
import { FormState, configTextFromUrl, duplicateKey, parseNumber, splitList } from "../../docs/assets/calculator/form-state.js";

// A control as the page renders it (macros/calculator.py): name, kind, default.
function control(name, kind, def, extra = {}) {
  const tagName = kind === "enum" ? "SELECT" : kind === "config" ? "TEXTAREA" : "INPUT";
  const type = kind === "bool" ? "checkbox" : tagName === "INPUT" ? "text" : undefined;
  return { name, tagName, type, value: kind === "bool" ? "on" : def, checked: def === "true",
           dataset: { kind, default: def, ...extra }, options: extra.options || [] };
}

function form(lang = "en") {
  const controls = [
    control("model", "model", "llama-3.1-8b"),
    control("method", "enum", "qlora", { options: [{ value: "lora" }, { value: "qlora" }] }),
    control("seq_len", "int", "2048"),
    control("safety_margin", "number", "0.1", { percent: "true" }),
    control("gradient_checkpointing", "bool", "true"),
    control("lora_targets", "targets", "all-linear"),
    control("framework", "enum", "hf-trainer",
            { options: [{ value: "hf-trainer" }, { value: "generic" }, { value: "axolotl" }] }),
    control("optimizer", "enum", "adamw", { options: [{ value: "adamw" }, { value: "sgd" }] }),
    control("price_per_gpu_hour", "number", ""),
    control("examples", "helper", ""),
    control("tokens_per_example", "helper", ""),
    control("dataset_tokens", "number", "100000000"),
    control("hf_config", "config", ""),
  ];
  return new FormState({ controls, lang, profileKeys: ["optimizer"], profileless: ["generic"] });
}

const dom = () => {
  const calls = [];
  return { calls, setMode: (open) => calls.push(["mode", open]),
           reveal: (el) => calls.push(["reveal", el.name]),
           addOption: (el, value) => calls.push(["option", el.name, value]) };
};

test("numbers as readers type them, in each page language", () => {
  assert.equal(parseNumber("2 048", "en"), 2048);
  assert.equal(parseNumber("1_000", "en"), 1000);
  assert.equal(parseNumber("0,5", "es"), 0.5);
  assert.equal(parseNumber("0,5", "en"), "0,5"); // sent as text: calc names the error
  assert.equal(parseNumber("abc", "es"), "abc");
  assert.equal(parseNumber("1e3", "en"), 1000);
  // a share: 25, "25 %" and 0.25 are a quarter
  assert.equal(parseNumber("25", "en", true), 0.25);
  assert.equal(parseNumber("25 %", "en", true), 0.25);
  assert.equal(parseNumber("0.25", "en", true), 0.25);
  assert.equal(parseNumber("0.5%", "en", true), 0.005);
});

test("lists and pasted configs", () => {
  assert.deepEqual(splitList(" q_proj, ,v_proj ,"), ["q_proj", "v_proj"]);
  assert.equal(configTextFromUrl('{"hf_config": {"a": 1}}'), '{\n "a": 1\n}');
  assert.equal(configTextFromUrl("{not json"), "{not json");
});

test("the default form has an empty query and sends only what the profile does not set", () => {
  const f = form();
  assert.equal(f.queryString(false), "");
  assert.equal(f.queryString(true), "?mode=advanced");
  const { request, errors } = f.buildRequest();
  assert.deepEqual(errors, {});
  assert.equal("optimizer" in request, false); // left to the library's profile
  assert.equal("price_per_gpu_hour" in request, false); // optional, empty: calc's own
  assert.equal("examples" in request, false); // a helper, never sent
  assert.deepEqual(request, { model: "llama-3.1-8b", method: "qlora", seq_len: 2048, safety_margin: 0.1,
                              gradient_checkpointing: true, lora_targets: "all-linear",
                              framework: "hf-trainer", dataset_tokens: 100000000 });
});

test("a URL fills the controls; what no control can hold is sent as it is", () => {
  const f = form();
  const d = dom();
  f.readQuery("?mode=advanced&seq_len=4096&method=bogus&gradient_checkpointing=maybe&nope=1&optimizer=sgd", d);
  assert.deepEqual(d.calls, [["mode", true], ["reveal", "seq_len"], ["option", "method", "bogus"],
                             ["reveal", "method"], ["reveal", "gradient_checkpointing"], ["reveal", "optimizer"]]);
  assert.deepEqual(f.unknownParams, ["nope"]);
  const { request } = f.buildRequest();
  assert.equal(request.seq_len, 4096);
  assert.equal(request.method, "bogus");
  assert.equal(request.gradient_checkpointing, "maybe");
  assert.equal(request.optimizer, "sgd"); // chosen in the URL: no longer the profile's
  assert.equal(f.queryString(false),
               "?method=bogus&seq_len=4096&gradient_checkpointing=maybe&optimizer=sgd");
  f.edited("method"); // the reader picks another value: the URL's goes
  f.byName.get("method").value = "lora";
  assert.equal(f.buildRequest().request.method, "lora");
});

test("a config in the URL goes to the config box, and back to the URL as the model", () => {
  const f = form();
  f.readQuery(`?model=${encodeURIComponent('{"hf_config": {"model_type": "llama"}}')}`, dom());
  assert.deepEqual(f.buildRequest().request.model, { hf_config: { model_type: "llama" } });
  assert.equal(f.queryString(false), `?model=${encodeURIComponent('{"hf_config":{"model_type":"llama"}}')}`);
  f.configArea.value = "{broken";
  assert.equal(f.buildRequest().errors.hf_config.code, "config_json_invalid");
});

test("empty required values and bad helpers are caught before calc", () => {
  const f = form("es");
  f.byName.get("seq_len").value = " ";
  f.byName.get("model").value = "";
  f.byName.get("examples").value = "-3";
  const { errors } = f.buildRequest();
  assert.deepEqual(Object.keys(errors).sort(), ["examples", "model", "seq_len"]);
  assert.equal(errors.model.code, "empty_value");
  assert.equal(errors.examples.code, "not_number");
  assert.equal(errors.examples.minimum_exclusive, true);
});

test("examples × tokens per example fill the dataset size", () => {
  const f = form("es");
  f.byName.get("examples").value = "10 000";
  f.byName.get("tokens_per_example").value = "512,5";
  f.fillDatasetTokens();
  assert.equal(f.byName.get("dataset_tokens").value, "5125000");
});

test("a profile key set by the reader stays in the URL while a library's profile applies", () => {
  const f = form();
  f.edited("optimizer");
  // the default library has a profile: the key's own default is the reader's choice, kept
  assert.equal(f.queryString(false), "?optimizer=adamw");
  f.byName.get("framework").value = "generic";
  assert.equal(f.queryString(false), "?framework=generic"); // no profile: nothing to keep
  f.byName.get("framework").value = "axolotl";
  assert.equal(f.queryString(false), "?framework=axolotl&optimizer=adamw");
  const r = form();
  r.readQuery("?framework=generic", dom()); // an old link naming generic keeps it
  assert.equal(r.buildRequest().request.framework, "generic");
  assert.equal(r.queryString(false), "?framework=generic");
  const g = form();
  g.byName.get("framework").value = "axolotl";
  g.showProfileValues({ optimizer: "sgd" }); // what calc used: shown, not sent
  assert.equal(g.byName.get("optimizer").value, "sgd");
  assert.equal("optimizer" in g.buildRequest().request, false);
});

test("applied changes set controls and clear a pasted config when a preset is chosen", () => {
  const f = form();
  f.configArea.value = '{"model_type": "llama"}';
  const revealed = [];
  f.applyChanges({ model: "llama-2-7b", lora_targets: ["q_proj", "v_proj"], price_per_gpu_hour: null,
                   gradient_checkpointing: false, optimizer: "sgd", unknown: 1 }, (el) => revealed.push(el.name));
  assert.equal(f.configArea.value, "");
  assert.deepEqual(revealed, ["model", "lora_targets", "price_per_gpu_hour", "gradient_checkpointing", "optimizer"]);
  const { request } = f.buildRequest();
  assert.deepEqual(request.lora_targets, ["q_proj", "v_proj"]);
  assert.equal(request.gradient_checkpointing, false);
  assert.equal(request.optimizer, "sgd");
  f.reset();
  assert.equal(f.buildRequest().request.model, "llama-3.1-8b");
  assert.equal(f.queryString(false), "");
});

test("a config that names a key twice is refused, not read with the last value", () => {
  assert.equal(duplicateKey('{"a": 1, "b": {"a": 2}, "c": [{"a": 3}, {"a": 4}]}'), null);
  assert.equal(duplicateKey('{"a": 1, "b": 2, "a": 3}'), "a");
  assert.equal(duplicateKey('{"x": {"k\\"": 1, "k\\"" : 2}}'), 'k"');
  assert.equal(duplicateKey('{"a": "a", "b": ["a", "a"]}'), null); // values, not keys
  const f = form();
  f.configArea.value = '{"model_type": "llama", "model_type": "mistral"}';
  const { request, errors } = f.buildRequest();
  assert.deepEqual(errors.hf_config, { code: "duplicate_key", field: "hf_config", value: "model_type" });
  assert.equal("model" in request, false);
  // from the URL, the config keeps its text, so the form refuses it as calc would
  const text = '{"hf_config": {"model_type": "llama", "model_type": "mistral"}}';
  assert.equal(configTextFromUrl(text), text);
});

test("the precision follows the method until the reader picks one", () => {
  const controls = [
    control("model", "model", "llama-3.1-8b"),
    control("method", "enum", "lora", { options: [{ value: "full" }, { value: "lora" }] }),
    control("precision", "enum", "bf16-true", { options: [{ value: "bf16-true" }, { value: "bf16-mixed" }] }),
    control("hf_config", "config", ""),
  ];
  const methodDefaults = { precision: { full: "bf16-mixed", lora: "bf16-true" } };
  const make = () => new FormState({ controls, lang: "en", methodDefaults });
  let state = make();
  state.byName.get("method").value = "full";
  state.followMethod();
  assert.equal(state.buildRequest().request.precision, "bf16-mixed");
  assert.equal(state.queryString(false), "?method=full"); // implied by the method, not in the URL
  state.byName.get("precision").value = "bf16-true"; // the reader picks pure bf16
  state.edited("precision");
  state.followMethod();
  assert.equal(state.buildRequest().request.precision, "bf16-true");
  assert.equal(state.queryString(false), "?method=full&precision=bf16-true");
  // a shared link without a precision gets the method's; one with a precision keeps it
  state = make();
  state.reset();
  state.readQuery("?method=full", dom());
  state.followMethod();
  assert.equal(state.buildRequest().request.precision, "bf16-mixed");
  state.reset();
  state.readQuery("?method=full&precision=bf16-true", dom());
  state.followMethod();
  assert.equal(state.buildRequest().request.precision, "bf16-true");
});

test("sample lengths travel as name:value pairs, in the URL and to calc", () => {
  const controls = [control("model", "model", "llama-3.1-8b"), control("length_stats", "stats", ""),
                    control("hf_config", "config", "")];
  const state = new FormState({ controls, lang: "es" });
  state.readQuery("?length_stats=mean:900,p90:2000", dom());
  assert.equal(state.queryString(false), "?length_stats=mean:900,p90:2000");
  assert.deepEqual(state.buildRequest().request, { model: "llama-3.1-8b", length_stats: "mean:900,p90:2000" });
  state.applyChanges({ length_stats: { mean: 700, max: 4096 } }, () => {});
  assert.equal(state.queryString(false), "?length_stats=mean:700,max:4096");
  state.applyChanges({ length_stats: null }, () => {});
  assert.deepEqual(state.buildRequest().request, { model: "llama-3.1-8b" });
});

test("the run's steps, an optional whole number, travel in the URL and are left out when empty", () => {
  const controls = [control("model", "model", "llama-3.1-8b"), control("max_steps", "int", ""),
                    control("hf_config", "config", "")];
  const state = new FormState({ controls, lang: "es" });
  state.readQuery("?max_steps=60", dom());
  assert.equal(state.queryString(false), "?max_steps=60");
  assert.deepEqual(state.buildRequest().request, { model: "llama-3.1-8b", max_steps: 60 });
  state.applyChanges({ max_steps: null }, () => {});
  assert.deepEqual(state.buildRequest(), { request: { model: "llama-3.1-8b" }, errors: {} });
});

test("the CUDA-only filter is kept in the URL as stack=cuda, and is no request key", () => {
  const f = form();
  assert.equal(f.stack, null); // an old link, without the key: every stack
  f.readQuery("?seq_len=4096", dom());
  assert.equal(f.stack, null);
  f.readQuery("?stack=cuda&seq_len=4096", dom());
  assert.equal(f.stack, "cuda");
  assert.deepEqual(f.unknownParams, []);
  assert.equal("stack" in f.buildRequest().request, false);
  assert.equal(f.queryString(false), "?stack=cuda&seq_len=4096");
  assert.equal(f.queryString(true), "?mode=advanced&stack=cuda&seq_len=4096");
  f.stack = null; // the reader unticks the box
  assert.equal(f.queryString(false), "?seq_len=4096");
  // a value the filter does not know is named as an unknown parameter, not applied
  const g = form();
  g.readQuery("?stack=rocm-only", dom());
  assert.equal(g.stack, null);
  assert.deepEqual(g.unknownParams, ["stack"]);
  f.reset();
  assert.equal(f.stack, null);
});
