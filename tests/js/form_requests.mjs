// The requests the calculator's form builds from URL queries (docs/assets/calculator/form-state.js),
// for tests/calc/test_bad_inputs.py: `node form_requests.mjs INPUT.json` with
// {controls, profileKeys, lang, cases: [{id, url}]} prints {id: {request, errors}}.
// The controls are plain objects with the properties of the page's form controls.
import { readFileSync } from "node:fs";
import { FormState } from "../../docs/assets/calculator/form-state.js";

const input = JSON.parse(readFileSync(process.argv[2], "utf-8"));
const dom = { setMode: () => {}, reveal: () => {}, addOption: () => {} };
const out = {};
for (const { id, url } of input.cases) {
  const controls = input.controls.map((c) => ({ ...c, dataset: { ...c.dataset } }));
  const form = new FormState({ controls, lang: input.lang, profileKeys: input.profileKeys });
  form.readQuery(url, dom);
  out[id] = form.buildRequest();
}
process.stdout.write(JSON.stringify(out));
