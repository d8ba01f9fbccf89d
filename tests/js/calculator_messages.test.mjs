// Messages for answers that are not results (docs/assets/calculator/messages.js) and the
// number format they quote (format.js), without a browser. Run by
// tests/js/test_calculator_state_js.py.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { formatNumber } from "../../docs/assets/calculator/format.js";
import { errorTarget, errorText, internalErrorText, internalReference, validText } from "../../docs/assets/calculator/messages.js";

// the page's strings as macros/calculator.py embeds them, from the message catalogue
// (calc/data/messages); tests/js/test_calculator_state_js.py writes them and names the file
const STRINGS = JSON.parse(readFileSync(process.env.CALC_PAGE_STRINGS, "utf8"));

test("numbers quoted in messages follow the site's format (calc/numfmt.py)", () => {
  assert.equal(formatNumber(1234.5, "en"), "1,234.5");
  assert.equal(formatNumber(1234.5, "es"), "1234,5"); // no grouping below 10 000 in Spanish
  assert.equal(formatNumber(12345.5, "es"), "12\u202f345,5");
  assert.equal(formatNumber(-1000000, "en"), "-1,000,000");
  assert.equal(formatNumber(0.1 + 0.2, "en"), "0.3"); // twelve significant figures, no float noise
});

test("an error goes next to its field, a config's to the box that holds it", () => {
  const has = (name) => ["model", "seq_len", "hf_config"].includes(name);
  assert.equal(errorTarget({ field: "seq_len" }, { has, configFilled: false }), "seq_len");
  assert.equal(errorTarget({ field: "bogus" }, { has, configFilled: false }), "_general");
  assert.equal(errorTarget({ field: null }, { has, configFilled: false }), "_general");
  assert.equal(errorTarget({ field: "hf_config.num_layers" }, { has, configFilled: true }), "hf_config");
  assert.equal(errorTarget({ field: "model.hf_config" }, { has, configFilled: false }), "model");
});

test("an input error says what is wrong and what would be valid", () => {
  const s = STRINGS.en;
  const text = errorText({ code: "out_of_range", field: "seq_len", value: 10, minimum: 16, maximum: 131072,
                           integer: true }, { strings: s, lang: "en" });
  assert.equal(text, `${s.errors.out_of_range} (10) ${s.ui.valid_range.replace("{min}", "16")
    .replace("{max}", "131,072")} ${s.ui.valid_whole}`);
  const share = validText({ code: "out_of_range", field: "safety_margin", minimum: 0, maximum: 0.9 },
                          { strings: STRINGS.es, lang: "es", isPercent: (name) => name === "safety_margin" });
  assert.ok(share.includes(STRINGS.es.ui.valid_percent.replace("{}", "90")), share);
  const long = errorText({ code: "not_number", field: "seq_len", value: "x".repeat(200) }, { strings: s, lang: "en" });
  assert.ok(long.includes(`${"x".repeat(77)}…`) && !long.includes("x".repeat(78)));
  const unknown = errorText({ code: "unknown_preset", field: "model", value: "a/b", suggestions: [{ id: "llama-2-7b" }] },
                            { strings: s, lang: "en" });
  assert.ok(unknown.endsWith(s.ui.nearest_presets.replace("{}", "llama-2-7b")));
});

test("an internal error asks for a report, quoting only calc_view.session's own fields", () => {
  for (const lang of ["es", "en"]) {
    const s = STRINGS[lang];
    const internal = { code: "internal_error", stage: "calc", exception: "ZeroDivisionError",
                       where: "calc/plan.py:120", calc_version: "0.1.0" };
    const text = internalErrorText(internal, s);
    assert.equal(text, s.ui.internal_error_report.replace(
      "{}", "internal_error · ZeroDivisionError · calc/plan.py:120 · calc 0.1.0"));
    assert.notEqual(s.ui.internal_error_report, s.errors.internal_error);
  }
  // whatever arrives, no markup and no long text gets through
  const hostile = internalReference({ code: "<b>x</b>", exception: '<img src=x onerror="alert(1)">',
                                      where: "a".repeat(500), calc_version: null });
  assert.ok(!/[<>"= ]/.test(hostile.replace(/ · /g, "")), hostile);
  assert.ok(hostile.length < 140);
  assert.equal(internalReference(undefined), "internal_error");
});

test("an error inside a control's object goes to the control and names the part", () => {
  const s = STRINGS.en;
  const has = (name) => name === "length_stats";
  assert.equal(errorTarget({ field: "length_stats.mean" }, { has, configFilled: false }), "length_stats");
  const text = errorText({ code: "out_of_range", field: "length_stats.mean", value: 5000, integer: true,
                           minimum: 1, maximum: 4000 }, { strings: s, lang: "en" });
  assert.ok(text.includes("(mean: 5000)") && text.includes("4,000"), text);
  const unknown = errorText({ code: "unknown_key", field: "length_stats.median", value: null,
                              allowed: ["mean", "p90", "max"] }, { strings: s, lang: "en" });
  assert.ok(unknown.includes("(median)"), unknown);
});
