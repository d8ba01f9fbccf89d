// The site's number format (calc/numfmt.py, which draws every figure of the results):
// "1,234.5" in English; "1234,5" and, from five digits, "12 345,5" (narrow no-break
// spaces) in Spanish. The page itself formats only the bounds quoted in error messages,
// in the shortest form: calc.numfmt.format_shortest, which this copies; tests/js/numfmt.test.mjs
// checks the copy on the table Python writes (tests/js/numfmt_cases.json). No DOM.

export function formatNumber(value, lang) {
  const [whole, frac] = String(Math.abs(value) >= 1e21 ? value : Number(value.toPrecision(12)))
    .replace("-", "").split(".");
  const sep = lang === "es" ? (whole.length >= 5 ? "\u202f" : "") : ",";
  const int = whole.replace(/\B(?=(\d{3})+(?!\d))/g, sep);
  const sign = value < 0 ? "-" : "";
  return sign + int + (frac ? (lang === "es" ? "," : ".") + frac : "");
}
