// The page's JavaScript copies of calc, checked against the table Python writes
// (tests/js/numfmt_cases.json, from tests/numfmt_cases.py): the number format of the bounds
// quoted in error messages (format.js = calc.numfmt.format_shortest), the pattern of a typed
// number (form-state.js = calc.numfmt.NUMBER_RE) and the config import's formats and size
// limit (config-import.js = calc.config_import). Run by tests/js/test_calculator_state_js.py.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { formatNumber } from "../../docs/assets/calculator/format.js";
import { NUMBER_RE } from "../../docs/assets/calculator/form-state.js";
import { FORMATS, MAX_BYTES } from "../../docs/assets/calculator/config-import.js";

const CASES = JSON.parse(readFileSync(new URL("./numfmt_cases.json", import.meta.url), "utf8"));

test("format.js writes every number of the table as calc.numfmt does", () => {
  assert.deepEqual(CASES.numbers_columns, ["value", "lang", "style", "text"]);
  assert.ok(CASES.numbers.length > 300, "the table is too short");
  const wrong = [];
  for (const [value, lang, style, text] of CASES.numbers) {
    assert.equal(style, "shortest"); // the only style the page writes
    const got = formatNumber(value, lang);
    if (got !== text) wrong.push({ value, lang, expected: text, got });
  }
  assert.deepEqual(wrong, []);
});

test("form-state.js reads a typed number by calc.numfmt.NUMBER_RE", () => {
  assert.equal(NUMBER_RE.source, `^${CASES.number_re_pattern}$`);
  assert.equal(NUMBER_RE.flags, "");
  for (const [text, isNumber] of CASES.number_re_cases) {
    assert.equal(NUMBER_RE.test(text), isNumber, JSON.stringify(text));
  }
});

test("config-import.js offers calc's formats and applies calc's size limit", () => {
  assert.deepEqual(FORMATS, ["auto", ...CASES.config_import_formats]);
  assert.equal(MAX_BYTES, CASES.config_import_max_bytes);
});
