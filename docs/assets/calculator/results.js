// The results tree the worker sends (calc_view.render: [tag, {attr: value}, child, ...])
// built into the page with createElement and textContent only, never innerHTML; event
// handler attributes are dropped. calc_view.html.to_html writes the same tree at build time.

const SVG_NS = "http://www.w3.org/2000/svg";

export function buildTree(node, inSvg = false) {
  if (typeof node === "string") return document.createTextNode(node);
  const [tag, attrs, ...children] = node;
  const svg = inSvg || tag === "svg";
  const el = svg ? document.createElementNS(SVG_NS, tag) : document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (name === "xmlns" || name.toLowerCase().startsWith("on")) continue;
    el.setAttribute(name, String(value));
  }
  for (const child of children) el.appendChild(buildTree(child, svg));
  return el;
}

function jsonData(el, key) {
  try {
    return JSON.parse(el.dataset[key] || "{}");
  } catch (err) {
    return {};
  }
}

// The "CUDA only" filter lives in the results: sets it as the reader chose (the URL's
// stack=cuda), so that the choice outlives a recompute.
export function setCudaOnly(slot, on) {
  const box = slot.querySelector(".calc-cuda-only-box");
  if (box) box.checked = Boolean(on);
}

// Puts a result in the slot; returns {defaults, profileValues}: what calc used for the
// optional inputs left empty, and for the keys left to the library's profile. cudaOnly: the
// filter's state (undefined: as the results on show had it).
export function showResults(slot, view, cudaOnly) {
  const body = buildTree(view);
  const shown = slot.querySelector(".calc-cuda-only-box");
  const keep = cudaOnly === undefined ? Boolean(shown && shown.checked) : cudaOnly;
  slot.replaceChildren(body);
  setCudaOnly(body, keep);
  return { defaults: jsonData(body, "defaults"), profileValues: jsonData(body, "profileValues") };
}
