"""The calculator's results as a tree of elements, rendered in one place.

The same function draws the build-time result (``macros/calculator.py``
serialises the tree to HTML) and every live result (the Web Worker runs this
module in Pyodide next to ``calc`` and posts the tree; the page builds it with
``createElement`` and ``textContent``, never ``innerHTML``). So the static and
the live page cannot drift apart, and numbers are formatted by one function.

A node is ``[tag, {attr: value}, child, ...]``; a child is a node or a string.
Every number carries ``data-output`` (its dotted path in the response, list
items by index) and ``data-value`` (the raw JSON number).

Pure standard library: it must import in CPython 3.11+ and in Pyodide.
"""

from __future__ import annotations

import json
import math

GIB = 2**30  # memory is shown in GiB (2^30 bytes), as the page states
NNBSP = "\u202f"  # Spanish thousands separator (narrow no-break space), from 10 000 up

# Memory fields shown as headline figures, in this order.
MEMORY_KPIS = ("peak_allocated_bytes", "peak_reserved_bytes", "device_total_bytes")
# Keys of the response that are rendered by a dedicated section, not the generic one.
_DEDICATED = {
    "peak_allocated_bytes", "peak_reserved_bytes", "device_total_bytes", "components",
    "peak_phase", "params_total", "params_trainable", "host_bytes", "warnings", "request",
}
SVG_NS = "http://www.w3.org/2000/svg"


# ---------------------------------------------------------------- formatting

def _group(digits: str, sep: str) -> str:
    head = len(digits) % 3 or 3
    parts = [digits[:head]] + [digits[i:i + 3] for i in range(head, len(digits), 3)]
    return sep.join(parts)


def format_number(value: float, decimals: int, lang: str) -> str:
    """Spanish: decimal comma, U+202F grouping from 10 000 up. English: decimal point, comma
    grouping from 1 000 up."""
    text = f"{abs(value):.{decimals}f}"
    int_part, _, frac = text.partition(".")
    if lang == "es":
        int_part = _group(int_part, NNBSP) if len(int_part) >= 5 else int_part
        point = ","
    else:
        int_part = _group(int_part, ",")
        point = "."
    negative = value < 0 and any(ch not in "0." for ch in text)
    return ("-" if negative else "") + int_part + (point + frac if frac else "")


def raw_value(value: object) -> str:
    """The JSON spelling of a number (what ``data-value`` holds)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def format_value(key: str, value: object, lang: str, strings: dict) -> str:
    """Format by the unit in the field's name (the project's naming rule)."""
    units = strings["units"]
    if isinstance(value, bool):
        return strings["ui"]["yes" if value else "no"]
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        return str(value)
    if key.endswith("_bytes"):
        return units["gib"].replace("{}", format_number(value / GIB, 1, lang))
    if key.endswith("_hours"):
        return units["hours"].replace("{}", format_number(value, 1, lang))
    if key.endswith("_usd") or key.startswith("price") or key.startswith("cost"):
        return units["usd"].replace("{}", format_number(value, 2, lang))
    if key.endswith("_fraction") or key.endswith("_ratio") or key == "mfu":
        return units["percent"].replace("{}", format_number(value * 100, 1, lang))
    if isinstance(value, int):
        return format_number(value, 0, lang)
    if abs(value) >= 100:
        return format_number(value, 0, lang)
    if abs(value) >= 1:
        return format_number(value, 2, lang)
    return format_number(value, 3, lang)


def label(key: str, strings: dict) -> str:
    return strings["labels"].get(key) or key.replace("_", " ")


def translate(kind: str, code: object, strings: dict) -> str:
    """Text for a code (phase, warning, enum value); the code itself when untranslated."""
    return strings.get(kind, {}).get(str(code), str(code))


# ---------------------------------------------------------------- nodes

def num(path: str, key: str, value: object, lang: str, strings: dict) -> list:
    return ["span", {"class": "calc-num", "data-output": path, "data-value": raw_value(value)},
            format_value(key, value, lang, strings)]


def _kpi(path: str, key: str, value: object, lang: str, strings: dict) -> list:
    return ["div", {"class": "calc-kpi"},
            ["span", {"class": "calc-kpi-label"}, label(key, strings)],
            num(path, key, value, lang, strings)]


def _text_kpi(path: str, key: str, text: str, strings: dict) -> list:
    return ["div", {"class": "calc-kpi"},
            ["span", {"class": "calc-kpi-label"}, label(key, strings)],
            ["span", {"class": "calc-text", "data-output": path}, text]]


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _fmt_svg(x: float) -> str:
    return f"{x:.2f}".rstrip("0").rstrip(".") or "0"


def memory_chart(result: dict, lang: str, strings: dict) -> list:
    """One stacked bar: the components up to the allocated peak, then what the allocator
    reserves on top, then CUDA context and communication buffers up to the device total."""
    components = {k: v for k, v in result.get("components", {}).items() if _is_number(v)}
    allocated = result.get("peak_allocated_bytes", sum(components.values()))
    reserved = result.get("peak_reserved_bytes", allocated)
    total = result.get("device_total_bytes", reserved)
    scale_max = max(total, reserved, allocated, 1)
    width, height = 600.0, 32.0
    segments = [(f"components.{name}", name, value, f"calc-seg-{i % 10}")
                for i, (name, value) in enumerate(components.items())]
    extras = [("peak_reserved_bytes", "reserved_extra", reserved - allocated, "calc-seg-reserved"),
              ("device_total_bytes", "context_extra", total - reserved, "calc-seg-context")]
    rects, legend, x = [], [], 0.0
    for path, name, value, css in segments + [e for e in extras if e[2] > 0]:
        w = width * max(value, 0) / scale_max
        text = _component_label(name, strings)
        shown = format_value("x_bytes", value, lang, strings)
        rects.append(["rect", {"x": _fmt_svg(x), "y": "0", "width": _fmt_svg(w),
                               "height": _fmt_svg(height), "class": "calc-seg " + css},
                      ["title", {}, f"{text}: {shown}"]])
        x += w
        item = ["li", {}, ["span", {"class": "calc-swatch " + css, "aria-hidden": "true"}],
                ["span", {"class": "calc-legend-label"}, text]]
        if path.startswith("components."):
            item.append(num(path, name + "_bytes", value, lang, strings))
        else:  # a difference, not a response field: plain text
            item.append(["span", {"class": "calc-num"}, shown])
        legend.append(item)
    summary = strings["ui"]["chart_summary"].replace(
        "{}", format_value("x_bytes", allocated, lang, strings))
    svg = ["svg", {"xmlns": SVG_NS, "viewBox": f"0 0 {_fmt_svg(width)} {_fmt_svg(height)}",
                   "preserveAspectRatio": "none", "class": "calc-bar", "role": "img",
                   "aria-label": summary}] + rects
    return ["figure", {"class": "calc-chart"}, svg,
            ["figcaption", {}, ["ul", {"class": "calc-legend"}] + legend]]


def _component_label(name: str, strings: dict) -> str:
    return strings["components"].get(name) or name.replace("_", " ")


def memory_section(result: dict, lang: str, strings: dict, prefix: str = "") -> list:
    kpis = ["div", {"class": "calc-kpis"}]
    for key in MEMORY_KPIS:
        if key in result:
            kpis.append(_kpi(prefix + key, key, result[key], lang, strings))
    if "peak_phase" in result:
        kpis.append(_text_kpi(prefix + "peak_phase", "peak_phase",
                              translate("phases", result["peak_phase"], strings), strings))
    for key in ("params_total", "params_trainable", "host_bytes"):
        if key in result and _is_number(result[key]):
            kpis.append(_kpi(prefix + key, key, result[key], lang, strings))
    section = ["section", {"class": "calc-section calc-memory"},
               ["h3", {}, strings["ui"]["memory_heading"]],
               ["p", {"class": "calc-note"}, strings["ui"]["gib_note"]], kpis]
    if result.get("components"):
        section.append(memory_chart(result, lang, strings))
    return section


def warnings_section(codes: list, strings: dict) -> list | None:
    if not codes:
        return None
    items = [["li", {"data-warning": str(code)}, translate("warnings", code, strings)]
             for code in codes]
    return ["section", {"class": "calc-section calc-warnings", "role": "note"},
            ["h3", {}, strings["ui"]["warnings_heading"]], ["ul", {}] + items]


# ---------------------------------------------------------------- generic parts (plan)

def _cell(path: str, key: str, value: object, lang: str, strings: dict) -> list:
    if _is_number(value) or isinstance(value, bool):
        return num(path, key, value, lang, strings)
    if isinstance(value, (list, tuple)):
        return ["span", {}, ", ".join(translate("enums", v, strings) for v in value)]
    if isinstance(value, dict):
        return ["span", {}, "; ".join(f"{label(k, strings)}: {format_value(k, v, lang, strings)}"
                                      for k, v in value.items())]
    return ["span", {}, translate("enums", value, strings)]


def table(path: str, rows: list, lang: str, strings: dict) -> list:
    """A list of objects as a table; columns in first-seen order."""
    columns: list[str] = []
    for row in rows:
        for key in row:
            if key not in columns:
                columns.append(key)
    head = ["tr", {}] + [["th", {"scope": "col"}, label(c, strings)] for c in columns]
    body = ["tbody", {}]
    for i, row in enumerate(rows):
        tr = ["tr", {}]
        for c in columns:
            tr.append(["td", {}] + ([_cell(f"{path}.{i}.{c}", c, row[c], lang, strings)]
                                    if c in row else []))
        body.append(tr)
    return ["div", {"class": "calc-table-wrap"},
            ["table", {"class": "calc-table"}, ["thead", {}, head], body]]


def generic(path: str, key: str, value: object, lang: str, strings: dict) -> list | None:
    """Any response field: number -> figure, dict -> nested list, list of objects -> table."""
    if _is_number(value) or isinstance(value, bool):
        return _kpi(path, key, value, lang, strings)
    if isinstance(value, dict):
        inner = [generic(f"{path}.{k}", k, v, lang, strings) for k, v in value.items()]
        inner = [n for n in inner if n]
        if not inner:
            return None
        return ["div", {"class": "calc-group"}, ["h4", {}, label(key, strings)],
                ["div", {"class": "calc-kpis"}] + inner]
    if isinstance(value, list):
        if not value:
            return ["div", {"class": "calc-group"}, ["h4", {}, label(key, strings)],
                    ["p", {"class": "calc-empty"}, strings["ui"]["none"]]]
        if all(isinstance(v, dict) for v in value):
            return ["div", {"class": "calc-group"}, ["h4", {}, label(key, strings)],
                    table(path, value, lang, strings)]
        items = [["li", {}, _cell(f"{path}.{i}", key, v, lang, strings)] for i, v in enumerate(value)]
        return ["div", {"class": "calc-group"}, ["h4", {}, label(key, strings)], ["ul", {}] + items]
    if isinstance(value, str):
        return _text_kpi(path, key, translate("enums", value, strings), strings)
    return None


def find_memory(result: dict) -> tuple[dict, str]:
    """The memory estimate inside a response: at the top (estimate) or nested (plan)."""
    if "peak_allocated_bytes" in result:
        return result, ""
    for key in ("memory", "estimate"):
        inner = result.get(key)
        if isinstance(inner, dict) and "peak_allocated_bytes" in inner:
            return inner, ""
    return {}, ""


def render_results(result: dict, lang: str, strings: dict) -> list:
    memory, prefix = find_memory(result)
    root = ["div", {"class": "calc-results-body"}]
    if memory:
        root.append(memory_section(memory, lang, strings, prefix))
    warnings = list(memory.get("warnings", [])) + [
        w for w in result.get("warnings", []) if w not in memory.get("warnings", [])]
    section = warnings_section(warnings, strings)
    if section:
        root.append(section)
    rest = ["section", {"class": "calc-section calc-plan"},
            ["h3", {}, strings["ui"]["plan_heading"]]]
    for key, value in result.items():
        if key in _DEDICATED or key in ("memory", "estimate"):
            continue
        node = generic(key, key, value, lang, strings)
        if node:
            rest.append(node)
    if len(rest) > 3:
        root.append(rest)
    return root


# ---------------------------------------------------------------- HTML (build time)

_VOID = {"input", "br", "meta", "link", "img", "hr", "source", "col", "wbr", "area", "base"}


def _esc(text: str, quote: bool) -> str:
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace('"', "&quot;") if quote else text


def to_html(node: object) -> str:
    """Serialise a tree; every text and attribute is escaped."""
    if isinstance(node, str):
        return _esc(node, False)
    tag, attrs, *children = node
    attr_text = "".join(f' {k}="{_esc(str(v), True)}"' for k, v in attrs.items())
    if tag in _VOID:
        return f"<{tag}{attr_text}>"
    if tag == "script":  # raw text: "<" is escaped so no "</script>" can end it early
        return f"<{tag}{attr_text}>" + "".join(children).replace("<", "\\u003c") + f"</{tag}>"
    return f"<{tag}{attr_text}>" + "".join(to_html(c) for c in children) + f"</{tag}>"


# ---------------------------------------------------------------- worker entry

_STATE: dict = {"lang": "en", "strings": None}


def configure(lang: str, strings_json: str) -> None:
    """Called once by the worker with the page's language and its strings."""
    _STATE["lang"] = lang
    _STATE["strings"] = json.loads(strings_json)


_ENTRIES = {"estimate": ("calc.memory", "estimate_dict"), "plan": ("calc.plan", "plan_dict")}


def run(command: str, request: object) -> dict:
    """``calc.run``'s contract: ``{"result": ...}`` or ``{"error": ...}``.

    It calls the functions the CLI calls (``calc.plan.plan_dict``...) instead of
    ``calc.run``: importing the submodule ``calc.plan`` rebinds the package attribute
    ``calc.plan`` from the function to the module, so ``calc.run("plan", ...)`` fails from
    its second call on (reported to the lead; switch back once ``calc/__init__`` is fixed).
    """
    import importlib

    from calc.errors import CalcError

    try:
        module_name, function = _ENTRIES[command]
    except KeyError:
        return {"error": {"code": "unknown_command", "field": "command", "value": str(command)}}
    try:
        return {"result": getattr(importlib.import_module(module_name), function)(request)}
    except CalcError as err:
        return {"error": err.to_dict()}


def handle(command: str, request_json: str) -> str:
    """The worker's one entry: a request in, ``{"result", "view"}`` or ``{"error"}`` out,
    as JSON text. Never raises: an unexpected failure becomes ``internal_error``."""
    try:
        out = run(command, json.loads(request_json))
        if "result" in out:
            out["view"] = render_results(out["result"], _STATE["lang"], _STATE["strings"])
        return json.dumps(out, allow_nan=False)
    except RecursionError:
        return json.dumps({"error": {"code": "request_too_deep", "field": None, "value": None}})
    except Exception as exc:  # the worker must survive any input
        return json.dumps({"error": {"code": "internal_error", "field": None,
                                     "value": type(exc).__name__}})
