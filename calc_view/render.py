"""The calculator's results as a tree of elements, rendered in one place.

The same function draws the build-time result (``macros/calculator.py``
serialises the tree to HTML with :func:`calc_view.html.to_html`) and every live
result (the Web Worker runs this package in Pyodide next to ``calc``, through
:class:`calc_view.session.Session`, and posts the tree; the page builds it with
``createElement`` and ``textContent``, never ``innerHTML``). So the static and
the live page cannot drift apart, and numbers are formatted by one function.

A node is ``[tag, {attr: value}, child, ...]``; a child is a node or a string.
Every number carries ``data-output`` (its dotted path in the response, list
items by index; memory fields keep the estimate's own names, see :func:`resolve`)
and ``data-value`` (the raw JSON number).

Pure standard library: it must import in CPython 3.11+ and in Pyodide.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, TypeAlias

from calc import numfmt
from calc.memory import min_device_is_bound
from .html import SVG_NS, Node, svg_number
from .palette import component_class

#: A calc response, or a part of one: a JSON object (as ``calc.jsontypes.JsonObject``).
JsonObject: TypeAlias = dict[str, Any]
#: The page's words for one language (``macros.calculator.load_strings``): groups of texts
#: keyed by id, a few groups nested one level more (``enums``: field -> code -> text).
Strings: TypeAlias = dict[str, Any]

GIB = numfmt.GIB  # memory is shown in GiB (2^30 bytes), as the page states

TOP_CONFIGS = 10  # recommendations shown per ranking


# ---------------------------------------------------------------- formatting

format_number = numfmt.format_number  # the site's one number format (Spanish and English)


def raw_value(value: object) -> str:
    """The JSON spelling of a number (what ``data-value`` holds)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def format_value(key: str, value: object, lang: str, strings: Strings) -> str:
    """Format by the unit in the field's name (the project's naming rule)."""
    units: dict[str, str] = strings["units"]
    if isinstance(value, bool):
        return str(strings["ui"]["yes" if value else "no"])
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        return str(value)
    if key.endswith("_bytes"):
        return units["gib"].replace("{}", format_number(value / GIB, 1, lang))
    if key.endswith("_hours"):
        return units["hours"].replace("{}", format_number(value, 1, lang))
    if key.endswith("_usd") or key.startswith("price") or key.startswith("cost"):
        return units["usd"].replace("{}", format_number(value, 2, lang))
    if key.endswith(("_fraction", "_ratio", "utilisation", "_margin")) or key in (
        "mfu",
        "scaling_efficiency",
    ):
        return units["percent"].replace("{}", format_number(value * 100, 1, lang))
    if key.endswith("_gb"):
        return units["gb"].replace("{}", format_number(value, 1, lang))
    if key.endswith("_mhz"):
        return units["mhz"].replace("{}", format_number(value, 0, lang))
    if key.endswith("_count"):
        return format_number(value, 0, lang)
    if isinstance(value, int):
        return format_number(value, 0, lang)
    if abs(value) >= 100:
        return format_number(value, 0, lang)
    if abs(value) >= 1:
        return format_number(value, 2, lang)
    return format_number(value, 3, lang)


# Estimated costs and times are shown to two significant figures: the time model's median
# error is 17 % (methodology page), so a third figure, or cents, would claim a precision the
# inputs do not have. data-value keeps the exact number.
ESTIMATE_FIGURES = 2


def format_estimate(value: float, unit: str, lang: str, strings: Strings) -> str:
    """An estimated cost (``unit`` "usd") or time ("hours") to two significant figures:
    33.09 -> 33, 1,234 -> 1,200, 0.437 -> 0.44."""
    if not _is_number(value) or not math.isfinite(value):
        return format_value("x", value, lang, strings)
    digits = ESTIMATE_FIGURES - 1 - math.floor(math.log10(abs(value))) if value else 0
    text: str = strings["units"][unit]
    return text.replace("{}", format_number(round(value, digits), max(0, digits), lang))


def label(key: str, strings: Strings) -> str:
    return str(strings["labels"].get(key) or key.replace("_", " "))


def translate(kind: str, code: object, strings: Strings) -> str:
    """Text for a code (phase, warning, action); the code itself when untranslated."""
    return str(strings.get(kind, {}).get(str(code), str(code)))


def option(field: str, code: object, strings: Strings) -> str:
    """The name of value ``code`` of the request field ``field``; the code when unnamed."""
    return str(strings.get("enums", {}).get(field, {}).get(str(code), str(code)))


# ---------------------------------------------------------------- paths


def resolve(response: JsonObject, path: str) -> object:
    """The value a ``data-output`` path names. Memory fields keep the estimate's own names
    (``peak_allocated_bytes``, ``components.weights``) even inside a plan response, where
    they live under ``memory``; list items are addressed by index."""
    parts = path.split(".")
    node: Any = response
    if isinstance(response.get("memory"), dict) and parts[0] not in response:
        node = response["memory"]
    for part in parts:
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


# A source as recorded starts with the address of where the figure was read
# ("runpod.io/pricing as transcribed in …"); the rest is a note in English.
_CITATION = re.compile(r"^((?:[a-z0-9-]+\.)+[a-z]{2,}(?:/[^\s,;()]*)?)", re.I)


def citation(source: str) -> str:
    """The language-neutral part of a price source: its leading address
    (``runpod.io/pricing``), or "" when it has none. Pages in either language show this;
    the full source and its note stay on the methodology page."""
    match = _CITATION.match(source.strip())
    return match.group(1) if match else ""


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# ---------------------------------------------------------------- renderer


class Renderer:
    """Draws one response (estimate or plan) in one language."""

    def __init__(self, result: JsonObject, lang: str, strings: Strings) -> None:
        self.result, self.lang, self.s = result, lang, strings
        self.plan = isinstance(result.get("memory"), dict)
        self.memory = result["memory"] if self.plan else result
        # the chosen card has a rental price (a plan for a card nobody rents publicly shows
        # "no rental price" instead of its costs, which would count storage only)
        self.priced = not self.plan or result["cost_usd"].get("priced", True) is not False

    # -- small pieces

    def mpath(self, key: str) -> str:
        """Path of a memory field: its estimate name unless the plan has that key too."""
        return f"memory.{key}" if self.plan and key in self.result else key

    def num(self, path: str, value: object, unit_key: str | None = None) -> Node:
        key = unit_key or path.rsplit(".", 1)[-1]
        return [
            "span",
            {"class": "calc-num", "data-output": path, "data-value": raw_value(value)},
            format_value(key, value, self.lang, self.s),
        ]

    def estimate(self, path: str, value: float, unit: str) -> Node:
        """A number shown rounded to what the estimate justifies (see ESTIMATE_FIGURES)."""
        return [
            "span",
            {"class": "calc-num", "data-output": path, "data-value": raw_value(value)},
            format_estimate(value, unit, self.lang, self.s),
        ]

    def unpriced(self, path: str, value: object) -> Node:
        """A cost of a card with no rental price: the words "no rental price", never a figure
        (it would count storage alone); ``data-value`` keeps what calc returned."""
        return [
            "span",
            {
                "class": "calc-num calc-unpriced",
                "data-output": path,
                "data-value": raw_value(value),
                "data-priced": "false",
            },
            self.s["ui"]["no_rental_price"],
        ]

    def cost(self, path: str, value: float, priced: bool, unit: str | None = "usd") -> Node:
        """A cost: an estimate (``unit``) or an exact rate (``unit`` None), or the words
        "no rental price" when the card has none."""
        if not priced:
            return self.unpriced(path, value)
        return self.estimate(path, value, unit) if unit else self.num(path, value, "x_usd")

    def label(self, key: str) -> str:
        return label(key, self.s)

    def shown_label(self, key: str) -> str:
        """A result row's name: the form's label without its typing hint ("(0–1)"), where
        the result is shown as a percentage."""
        return self.s["labels"].get(key + "_shown") or self.label(key)

    def change_value(self, key: str, value: object) -> str:
        """A suggested setting as the reader sees it: enum codes by name, yes/no, numbers
        in the page's format."""
        if isinstance(value, str):
            return option(key, value, self.s)
        return format_value(key, value, self.lang, self.s)

    def kpi(self, label_key: str, content: Node) -> Node:
        return [
            "div",
            {"class": "calc-kpi"},
            ["span", {"class": "calc-kpi-label"}, self.label(label_key)],
            content,
        ]

    def text(self, path: str | None, text: str) -> Node:
        attrs = {"class": "calc-text"}
        if path:
            attrs["data-output"] = path
        return ["span", attrs, text]

    def rows(self, rows: list[tuple[str, Node]]) -> Node:
        """A two-column table: label, value."""
        body: Node = ["tbody", {}]
        body += [
            ["tr", {}, ["th", {"scope": "row"}, text], ["td", {}, node]] for text, node in rows
        ]
        return ["table", {"class": "calc-table calc-rows"}, body]

    def table(self, head: list[str], rows: list[Node], name: str) -> Node:
        """A table in a box that scrolls sideways on a narrow screen: the box is a named
        region a keyboard can focus (and so scroll), named ``name``."""
        header: Node = ["tr", {}]
        header += [["th", {"scope": "col"}, self.label(h)] for h in head]
        thead: Node = ["thead", {}, header]
        body: Node = ["tbody", {}, *rows]
        return [
            "div",
            {"class": "calc-table-wrap", "role": "region", "tabindex": "0", "aria-label": name},
            ["table", {"class": "calc-table"}, thead, body],
        ]

    def gpu_name(self, gpu_id: str) -> str:
        return str(self.s.get("gpus", {}).get(gpu_id, gpu_id))

    def config_text(self, config: JsonObject, shardings: list[str] | None = None) -> str:
        """ "RTX 4090 × 2 · DDP", or "… · DDP / ZeRO-2" when several shardings give the same
        time and cost."""
        names = [option("sharding", s, self.s) for s in (shardings or [config["sharding"]])]
        sharding = " / ".join(names)
        return f"{self.gpu_name(config['gpu'])} × {config['num_gpus']} · {sharding}"

    def heading(self, level: int, key: str) -> Node:
        return [f"h{level}", {}, self.s["ui"][key]]

    # -- memory

    def memory_section(self) -> Node:
        m = self.memory
        kpis = ["div", {"class": "calc-kpis"}]
        for key in ("peak_allocated_bytes", "peak_reserved_bytes", "device_total_bytes"):
            kpis.append(self.kpi(key, self.num(self.mpath(key), m[key])))
        kpis.append(
            self.kpi(
                "peak_phase",
                self.text(self.mpath("peak_phase"), translate("phases", m["peak_phase"], self.s)),
            )
        )
        for key in ("min_device_bytes", "params_total", "params_trainable", "host_bytes"):
            if key == "min_device_bytes" and _is_number(m.get(key)) and min_device_is_bound(m):
                kpis.append(self.kpi(key, self.bound(self.num(self.mpath(key), m[key]))))
            elif _is_number(m.get(key)):
                kpis.append(self.kpi(key, self.num(self.mpath(key), m[key])))
            elif key == "min_device_bytes" and m.get("min_device_pending") is True:
                kpis.append(self.pending_kpi(key))
            if key == "min_device_bytes":
                kpis.extend(self.replayed_reserved_kpi(m))
        section: Node = [
            "section",
            {"class": "calc-section calc-memory"},
            self.heading(3, "memory_heading"),
            ["p", {"class": "calc-note"}, self.s["ui"]["gib_note"]],
            kpis,
            self.memory_chart(),
        ]
        phases = m.get("phases")
        if isinstance(phases, dict) and phases:
            rows = [
                (
                    translate("phases", name, self.s),
                    self.num(f"{self.mpath('phases')}.{name}", value, "x_bytes"),
                )
                for name, value in phases.items()
                if _is_number(value)
            ]
            section.append(
                [
                    "details",
                    {"class": "calc-phases"},
                    ["summary", {}, self.s["ui"]["phases_heading"]],
                    self.rows(rows),
                ]
            )
        return section

    def replayed_reserved_kpi(self, m: JsonObject) -> list[Node]:
        """With ``length_stats``, the reserved peak of the allocator replayed over the data's
        steps on a large card (``allocator.simulated_reserved_bytes``): what
        ``max_memory_reserved`` would print, where fragmentation can take it well above
        ``peak_reserved_bytes`` (allocated x the slack fitted on fixed shapes)."""
        key = "simulated_reserved_bytes"
        allocator = m.get("allocator")
        if isinstance(allocator, dict) and _is_number(allocator.get(key)):
            path = self.mpath(f"allocator.{key}")
            return [self.kpi(key, self.num(path, allocator[key]))]
        if m.get("min_device_pending") is True:
            return [self.pending_kpi(key)]
        return []

    def bound(self, figure: Node) -> Node:
        """A figure that is a proven upper bound (the allocator walk's budget ran out before
        the exact threshold: ``allocator.min_allocator_exact`` false), read as "at most"."""
        return [
            "span",
            {"class": "calc-bound", "data-bound": "true", "title": self.s["ui"]["walk_bound"]},
            self.s["ui"]["at_most"] + " ",
            figure,
        ]

    def pending_kpi(self, key: str) -> Node:
        """A figure of the allocator's replay, which comes in a second answer
        (``Session.complete``): said to be coming, not a number."""
        pending = {"class": "calc-num calc-pending-value", "data-pending": key}
        return self.kpi(key, ["span", pending, self.s["ui"]["value_pending"]])

    def memory_chart(self) -> Node:
        """One stacked bar: the components up to the allocated peak, then what the allocator
        reserves on top, then CUDA context and communication buffers up to the device total."""
        m = self.memory
        components = {k: v for k, v in m.get("components", {}).items() if _is_number(v)}
        allocated = m["peak_allocated_bytes"]
        reserved = m["peak_reserved_bytes"]
        total = m["device_total_bytes"]
        # in a plan, the bar is drawn against the chosen card's memory (a line marks it)
        capacity = self.result["fits"][self.result["gpu"]]["memory_bytes"] if self.plan else 0
        scale_max = max(total, reserved, allocated, capacity, 1)
        width, height = 600.0, 32.0
        segments = [
            (f"{self.mpath('components')}.{name}", name, value, component_class(name))
            for name, value in components.items()
        ]
        extras = [
            (None, "reserved_extra", reserved - allocated, component_class("reserved_extra")),
            (None, "context_extra", total - reserved, component_class("context_extra")),
        ]
        rects: list[Node] = []
        legend: list[Node] = []
        x = 0.0
        for path, name, value, css in segments + [e for e in extras if e[2] > 0]:
            w = width * max(value, 0) / scale_max
            text = self.s["components"].get(name) or name.replace("_", " ")
            shown = format_value("x_bytes", value, self.lang, self.s)
            if w > 0:
                rects.append(
                    [
                        "rect",
                        {
                            "x": svg_number(x),
                            "y": "0",
                            "width": svg_number(w),
                            "height": svg_number(height),
                            "class": "calc-seg " + css,
                        },
                        ["title", {}, f"{text}: {shown}"],
                    ]
                )
            x += w
            if value == 0:  # a component this setup does not have: in the data, not the legend
                continue
            value_node = (
                self.num(path, value, "x_bytes") if path else ["span", {"class": "calc-num"}, shown]
            )  # a difference, not a field
            legend.append(
                [
                    "li",
                    {},
                    ["span", {"class": "calc-swatch " + css, "aria-hidden": "true"}],
                    ["span", {"class": "calc-legend-label"}, text],
                    value_node,
                ]
            )
        if capacity:
            cx = svg_number(width * capacity / scale_max - 1.5)
            card = self.s["ui"]["card_memory"].replace("{}", self.gpu_name(self.result["gpu"]))
            shown = format_value("x_bytes", capacity, self.lang, self.s)
            rects.append(
                [
                    "rect",
                    {
                        "x": cx,
                        "y": "0",
                        "width": "3",
                        "height": svg_number(height),
                        "class": "calc-capacity",
                    },
                    ["title", {}, f"{card}: {shown}"],
                ]
            )
            legend.append(
                [
                    "li",
                    {},
                    ["span", {"class": "calc-swatch calc-capacity", "aria-hidden": "true"}],
                    ["span", {"class": "calc-legend-label"}, card],
                    self.num(f"fits.{self.result['gpu']}.memory_bytes", capacity, "x_bytes"),
                ]
            )
        summary = self.s["ui"]["chart_summary"].replace(
            "{}", format_value("x_bytes", allocated, self.lang, self.s)
        )
        svg = [
            "svg",
            {
                "xmlns": SVG_NS,
                "viewBox": f"0 0 {svg_number(width)} {svg_number(height)}",
                "preserveAspectRatio": "none",
                "class": "calc-bar",
                "role": "img",
                "aria-label": summary,
            },
        ] + rects
        return [
            "figure",
            {"class": "calc-chart"},
            svg,
            ["figcaption", {}, ["ul", {"class": "calc-legend"}] + legend],
        ]

    def warnings_section(self) -> Node | None:
        codes = list(dict.fromkeys(self.result.get("warnings", [])))
        if not codes:
            return None
        items = [
            ["li", {"data-warning": str(code)}, translate("warnings", code, self.s)]
            for code in codes
        ]
        return [
            "section",
            {"class": "calc-section calc-warnings", "role": "note"},
            self.heading(3, "warnings_heading"),
            ["ul", {}] + items,
        ]

    # -- plan

    def verdict_state(self) -> str:
        """ "fits", "borderline" or "does_not_fit": the engine's own verdict when the response
        has one (its calibrated range), else from today's booleans: fits with the margin,
        fits only without it, or not at all."""
        fit = self.result["fits"][self.result["gpu"]]
        found = fit.get("verdict")
        if found in ("fits", "borderline", "does_not_fit"):
            return str(found)
        if fit.get("fits"):
            return "fits"
        return "borderline" if fit.get("fits_without_margin") else "does_not_fit"

    def verdict_word(self, state: str) -> str:
        """The one word of a verdict state, wherever a verdict is shown."""
        return str(self.s["ui"]["verdict_" + state])

    def margin_text(self) -> str | None:
        """ "with your 10 % margin" when the reader set a margin; ``None`` without one (the
        verdict then judges the calibrated range alone, and says nothing of a margin)."""
        margin = self.result.get("safety_margin")
        if not _is_number(margin) or not margin:
            return None
        return str(self.s["ui"]["verdict_margin"]).replace(
            "{}", format_value("safety_margin", margin, self.lang, self.s)
        )

    def used_range(self, gpu: str, fit: JsonObject) -> Node:
        """What the verdict judged: the device range "19.2–26.0" (the central figure when
        the response has no range), as numbers with their paths."""
        rng = fit.get("device_range_bytes")
        if isinstance(rng, list) and len(rng) == 2 and rng[0] != rng[1]:
            ends = [
                [
                    "span",
                    {
                        "class": "calc-num",
                        "data-output": f"fits.{gpu}.device_range_bytes.{i}",
                        "data-value": raw_value(v),
                    },
                    format_number(v / GIB, 1, self.lang),
                ]
                for i, v in enumerate(rng)
            ]
            return [ends[0], "–", ends[1]]
        return [
            [
                "span",
                {
                    "class": "calc-num",
                    "data-output": f"fits.{gpu}.device_total_bytes",
                    "data-value": raw_value(fit["device_total_bytes"]),
                },
                format_number(fit["device_total_bytes"] / GIB, 1, self.lang),
            ]
        ]

    def basis_note(self) -> str | None:
        """Which figure the range judged is, where the response shows the replayed
        allocator's smallest card (``min_device_bytes``): that one, or the device total with
        the smallest card beside it for information; ``None`` where there is no such figure."""
        if self.result["fits"][self.result["gpu"]].get("verdict_basis") == "min_device_bytes":
            return str(self.s["ui"]["verdict_basis_min_device"])
        if _is_number(self.memory.get("min_device_bytes")) or self.memory.get("min_device_pending"):
            return str(self.s["ui"]["verdict_basis_device_total"])
        return None

    def verdict_items(self) -> Node:
        """The answer in one line: "1 × RTX 4090: fits (19.2–20.9 of 24.0 GiB) · 20 h · 33 USD"."""
        r = self.result
        gpu = r["gpu"]
        fit = r["fits"][gpu]
        state = self.verdict_state()
        card = f"{r['num_gpus']} × {self.gpu_name(gpu)}: "
        word = ["strong", {"class": "calc-verdict-word"}, self.verdict_word(state)]
        head = ["span", {"class": "calc-verdict-fit"}, card, word]
        if _is_number(fit.get("device_total_bytes")):
            of = self.num(f"fits.{gpu}.memory_bytes", fit["memory_bytes"])
            before, _, after = self.s["ui"]["verdict_memory"].partition("{used}")
            middle, _, end = after.partition("{card}")
            head += [before, *self.used_range(gpu, fit), middle, of, end]
        margin = self.margin_text()
        if margin:
            head.append(margin)
        cost: Node = self.cost("cost_usd.total", r["cost_usd"]["total"], self.priced)
        if r["cost_usd"].get("price", {}).get("source_kind") == "electricity":
            # an owned card: the cost is its electricity, not a rent
            cost = ["span", {}, cost, " " + str(self.s["ui"]["cost_electricity"])]
        return [
            head,
            self.estimate("time_hours", r["time_hours"], "hours"),
            cost,
        ]

    def electricity_text(self, price: JsonObject) -> str:
        """An owned card's price in words: "electricity: 450 W × 0.17 USD/kWh"."""
        return (
            str(self.s["ui"]["price_electricity"])
            .replace("{power}", format_number(price["board_power_w"], 0, self.lang))
            .replace("{price}", format_number(price["electricity_price_per_kwh"], 2, self.lang))
        )

    def verdict(self) -> Node:
        line: Node = [
            "p",
            {
                "class": "calc-verdict calc-verdict-" + self.verdict_state(),
                "data-verdict": self.verdict_state(),
            },
        ]
        for i, item in enumerate(self.verdict_items()):
            if i:
                line.append(["span", {"class": "calc-sep", "aria-hidden": "true"}, " · "])
            line.append(item)
        setup = self.setup_text()
        if setup:
            line += [
                ["span", {"class": "calc-sep", "aria-hidden": "true"}, " · "],
                ["span", {"class": "calc-verdict-setup"}, setup],
            ]
        return line

    def setup_text(self) -> str:
        """What the verdict assumes, in one line: method, precision, training library and
        the data ("LoRA · pure bf16 · Hugging Face Trainer · 2048 tokens per sequence"), from
        the request calc echoes (what it used, profile and method defaults included)."""
        used = self.memory.get("request") or {}
        short = self.s.get("short_enums", {})
        parts = []
        for key in ("method", "precision", "framework"):
            if key in used:
                parts.append(
                    short.get(key, {}).get(str(used[key])) or option(key, used[key], self.s)
                )
        if "framework" in used:
            parts[-1] = self.s["ui"]["verdict_framework"].replace("{}", parts[-1])
        data = self.data_text(used)
        if data:
            parts.append(data)
        return " · ".join(parts)

    def data_text(self, used: JsonObject) -> str | None:
        """The data the verdict assumes: ``seq_len`` tokens per sequence, or with
        ``length_stats`` what calc drew from them (the memory response's ``data``): the mean
        sample (as the reader gave it, else as drawn) and the padded length of the longest
        micro-batch (not the ``seq_len`` cap, which no sample may reach), or packed rows of
        ``seq_len``, or with ``padding-free`` batching the longest row (a micro-batch's samples end
        to end)."""
        data = self.memory.get("data")
        if isinstance(data, dict) and _is_number(data.get("peak_sample_tokens")):
            batching = data.get("batching")
            key = {
                "packed": "verdict_data_packed",
                "pad-max": "verdict_data_pad_max",
                "padding-free": "verdict_data_padding_free",
            }.get(str(batching), "verdict_data_lengths")
            # padding-free: the longest row is the whole micro-batch, not one sample's padding
            peak = data["peak_batch_tokens" if batching == "padding-free" else "peak_sample_tokens"]
            # the mean the reader gave, else the drawn one (close to it, not the same number)
            stated = used.get("length_stats")
            given = stated.get("mean") if isinstance(stated, dict) else None
            mean = given if isinstance(given, int) else float(data["mean_sample_tokens"])
            return (
                str(self.s["ui"][key])
                .replace("{mean}", format_number(mean, 0, self.lang))
                .replace("{peak}", format_number(peak, 0, self.lang))
            )
        if _is_number(used.get("seq_len")):
            return str(self.s["ui"]["verdict_data"]).replace(
                "{}", format_number(used["seq_len"], 0, self.lang)
            )
        return None

    def plan_summary(self) -> Node:
        r = self.result
        gpu = r["gpu"]
        fit = r["fits"][gpu]
        state = self.verdict_state()
        kpis = [
            "div",
            {"class": "calc-kpis"},
            self.kpi(
                "fits_selected_gpu",
                [
                    "span",
                    {
                        "class": "calc-num " + self.fit_class(state),
                        "data-output": "fits_selected_gpu",
                        "data-value": raw_value(r["fits_selected_gpu"]),
                    },
                    self.verdict_word(state),
                ],
            ),
            self.headroom_kpi(gpu, fit),
            self.kpi("time_hours", self.estimate("time_hours", r["time_hours"], "hours")),
            self.kpi(
                "cost_total", self.cost("cost_usd.total", r["cost_usd"]["total"], self.priced)
            ),
            self.kpi(
                "cost_final_run",
                self.cost("cost_usd.final_run", r["cost_usd"]["final_run"], self.priced),
            ),
            self.kpi(
                "gpu_hours",
                self.estimate("cost_usd.gpu_hours", r["cost_usd"]["gpu_hours"], "hours"),
            ),
            self.kpi(
                "tokens_per_second",
                self.num("time.tokens_per_second", r["time"]["tokens_per_second"], "x_count"),
            ),
        ]
        # what the hardware costs while it runs: below the run's own cost, not beside it
        rates = [
            "div",
            {"class": "calc-kpis calc-rates"},
            self.kpi(
                "per_hour",
                self.cost("cost_usd.per_hour", r["cost_usd"]["per_hour"], self.priced, None),
            ),
            self.kpi(
                "per_month",
                self.cost("cost_usd.per_month", r["cost_usd"]["per_month"], self.priced),
            ),
        ]
        setup = self.config_text({"gpu": gpu, "num_gpus": r["num_gpus"], "sharding": r["sharding"]})
        section = [
            "section",
            {"class": "calc-section calc-plan"},
            self.heading(3, "plan_heading"),
            ["p", {"class": "calc-setup"}, setup],
            kpis,
            rates,
        ]
        multi_node = self.multi_node_note()
        if multi_node:
            section.append(multi_node)
        if state != "fits":  # time and cost of a run that may not start: say so
            section.append(
                [
                    "p",
                    {"class": "calc-note calc-not-fit-note", "role": "note"},
                    self.s["ui"]["not_fit_note" if state == "does_not_fit" else "borderline_note"],
                ]
            )
        return section

    @staticmethod
    def fit_class(state: str) -> str:
        """The CSS class of a verdict word: ``calc-fit-yes`` | ``-borderline`` | ``-no``."""
        return "calc-fit-" + {"fits": "yes", "borderline": "borderline"}.get(state, "no")

    def multi_node_note(self) -> Node | None:
        """More GPUs than one node holds: say it is several nodes, and what link the time
        assumes inside and between them (calc.timing's own constants)."""
        from calc import comm
        from calc import gpus as catalogue

        n = self.result["num_gpus"]
        per_node = self.result.get("time", {}).get("gpus_per_node") or comm.GPUS_PER_NODE
        if n <= per_node:
            return None
        gpu = catalogue.get_gpu(self.result["gpu"])
        link = gpu.link_for(n, per_node)
        # the rate collectives get across servers (calc.comm: the slowest link, usable share),
        # on the network the request names when the time was computed
        step = self.result.get("time", {}).get("step", {})
        network = (
            step["link"]["gb_per_s"]
            if "link" in step
            else comm.collective_link(gpu, n, per_node=per_node).bytes_per_s / 1e9
        )
        text = (
            self.s["ui"]["multi_node_note"]
            .replace("{gpus}", format_number(n, 0, self.lang))
            .replace("{nodes}", format_number(math.ceil(n / per_node), 0, self.lang))
            .replace("{link}", self.s["ui"]["link_" + link])
            .replace("{network}", format_number(network, 0, self.lang))
        )
        return ["p", {"class": "calc-note calc-multi-node", "role": "note"}, text]

    def headroom_kpi(self, gpu: str, fit: JsonObject) -> Node:
        """Free share of the card; when the setup is larger than the card, what is missing
        (a percentage like -2,942 % says nothing a reader can act on)."""
        if fit.get("headroom_bytes", 0) >= 0:
            return self.kpi("headroom_fraction", self.headroom_cell(gpu, fit))
        return self.kpi(
            "shortfall_bytes",
            self.shortfall(
                gpu, fit, format_value("shortfall_bytes", -fit["headroom_bytes"], self.lang, self.s)
            ),
        )

    def headroom_cell(self, gpu: str, fit: JsonObject) -> Node:
        """A card's free share, or for a card too small, the GiB it lacks."""
        if fit.get("headroom_bytes", 0) >= 0:
            return self.num(f"fits.{gpu}.headroom_fraction", fit["headroom_fraction"])
        lacking = format_number(-fit["headroom_bytes"] / GIB, 1, self.lang)
        return self.shortfall(gpu, fit, self.s["units"]["short_gib"].replace("{}", lacking))

    def shortfall(self, gpu: str, fit: JsonObject, text: str) -> Node:
        """What a too-small card lacks: the raw (negative) headroom as data, ``text`` shown."""
        return [
            "span",
            {
                "class": "calc-num",
                "data-output": f"fits.{gpu}.headroom_bytes",
                "data-value": raw_value(fit["headroom_bytes"]),
            },
            text,
        ]

    def time_and_cost(self) -> Node:
        r = self.result
        schedule = r["time"]["schedule"]
        # evaluations only where the run has some (a row of zeros for every other reader)
        phases = r["time"].get("run_phases") or {}
        evaluating = bool(phases.get("evaluations"))
        time_rows = [
            (self.label(k), self.num(f"time.schedule.{k}", schedule[k]))
            for k in (
                "compute_hours",
                "eval_hours",
                "startup_hours",
                "checkpoint_hours",
                "lost_work_hours",
            )
            if _is_number(schedule.get(k)) and (k != "eval_hours" or evaluating)
        ]
        # how many evaluations and saves those hours hold, and what one save writes
        for k, unit in (("evaluations", "x_count"), ("saves", "x_count")):
            if _is_number(phases.get(k)) and phases[k] > 0:
                time_rows.append((self.label(k), self.num(f"time.run_phases.{k}", phases[k], unit)))
        if _is_number(phases.get("checkpoint_bytes")):
            time_rows.append(
                (
                    self.label("checkpoint_bytes"),
                    self.num("time.run_phases.checkpoint_bytes", phases["checkpoint_bytes"]),
                )
            )
        time_rows += [
            (self.shown_label(k), self.num(f"time.factors.{k}", v, k))
            for k, v in r["time"]["factors"].items()
            if _is_number(v)
        ]
        # where the time of one step goes (calc.timing's roofline), as shares of the step
        if _is_number(r["time"].get("steady_state_tokens_per_second")):
            time_rows.append(
                (
                    self.label("steady_state_tokens_per_second"),
                    self.num(
                        "time.steady_state_tokens_per_second",
                        r["time"]["steady_state_tokens_per_second"],
                        "x_count",
                    ),
                )
            )
        if _is_number(r["time"].get("power_limit_w")):
            # the clock the power limit leaves the card (calc.gpus.with_power_limit), beside
            # the limit itself
            time_rows.append(
                (
                    self.label("sustained_clock_mhz"),
                    [
                        "span",
                        {},
                        self.num("time.sustained_clock_mhz", r["time"]["sustained_clock_mhz"]),
                        [
                            "small",
                            {"class": "calc-source"},
                            " ("
                            + str(self.s["ui"]["power_limit_note"]).replace(
                                "{}", format_number(r["time"]["power_limit_w"], 0, self.lang)
                            )
                            + ")",
                        ],
                    ],
                )
            )
        shares = (r["time"].get("step") or {}).get("breakdown_fraction") or {}
        time_rows += [
            (
                self.label("step_" + k),
                self.num(f"time.step.breakdown_fraction.{k}", v, "step_fraction"),
            )
            for k, v in shares.items()
            if _is_number(v) and v > 0
        ]
        cost = r["cost_usd"]
        cost_rows = [
            (
                self.label("cost_" + k),
                # storage is billed whether or not the card is rented; the rest is GPU time
                self.cost(f"cost_usd.breakdown.{k}", v, self.priced or k == "storage"),
            )
            for k, v in cost["breakdown"].items()
            if _is_number(v) and (k != "evaluation" or evaluating)
        ]
        price = cost["price"]
        cost_rows.append(
            (
                self.label("price_per_gpu_hour"),
                [
                    "span",
                    {},
                    self.cost(
                        "cost_usd.price.usd_per_gpu_hour",
                        price["usd_per_gpu_hour"],
                        self.priced,
                        None,
                    ),
                    ["small", {"class": "calc-source"}, " " + self._price_note(price)],
                ],
            )
        )
        storage = r.get("storage_gb")
        if isinstance(storage, dict) and _is_number(storage.get("total")):
            cost_rows.append(
                (self.label("storage_gb"), self.num("storage_gb.total", storage["total"], "x_gb"))
            )
        if _is_number(r.get("storage_price_per_gb_month")):
            cost_rows.append(
                (
                    self.label("storage_price_per_gb_month"),
                    self.num(
                        "storage_price_per_gb_month", r["storage_price_per_gb_month"], "x_usd"
                    ),
                )
            )
        return [
            "div",
            {"class": "calc-columns"},
            ["div", {}, self.heading(4, "time_heading"), self.rows(time_rows)],
            ["div", {}, self.heading(4, "cost_heading"), self.rows(cost_rows)],
        ]

    def _price_note(self, price: JsonObject) -> str:
        tier = option("price_tier", price.get("tier", ""), self.s)
        if price.get("source_kind") == "electricity":
            return "(" + self.electricity_text(price) + ")"
        if price.get("source_kind") == "user":
            return f"({self.s['ui']['price_yours']})"
        # the source's site, not its English note (the whole note is on the methodology page)
        parts = [tier, citation(str(price.get("source", ""))), str(price.get("as_of", ""))]
        return "(" + " · ".join(p for p in parts if p) + ")"

    def solvers(self) -> Node:
        """The largest value that fits, and how far it stays borderline beyond it: the
        verdict of each value, as the headline judges the request's own."""
        solvers = self.result["solvers"]
        kpis = ["div", {"class": "calc-kpis"}]
        for key in ("max_micro_batch_size", "max_seq_len"):
            found = solvers.get(key, {})
            parts: Node = []
            if found.get("found"):
                parts.append(self.num(f"solvers.{key}.value", found["value"], "x_count"))
            if _is_number(found.get("borderline_value")):
                before, _, after = self.s["ui"]["solver_borderline"].partition("{}")
                if parts:
                    parts.append(" ")
                parts += [
                    before,
                    self.num(
                        f"solvers.{key}.borderline_value", found["borderline_value"], "x_count"
                    ),
                    after,
                ]
            node = ["span", {}, *parts] if parts else self.text(None, self.s["ui"]["not_found"])
            kpis.append(self.kpi("solver_" + key, node))
        return ["div", {"class": "calc-group"}, self.heading(4, "solvers_heading"), kpis]

    def suggestions(self) -> Node | None:
        """What to change so the setup fits: the table lists the changes after which the verdict
        is "fits" (each with its effect and an apply button); a change that alone leaves the
        setup borderline or not fitting is not offered as a fix, only named below the table
        with what it saves and that it is not enough on its own."""
        items = self.result.get("suggestions") or []
        if not items:
            return None
        rows: list[Node] = []
        short: list[Node] = []
        for i, item in enumerate(items):
            changes = item.get("changes", {})
            change_text = ", ".join(
                f"{self.label(k)} = {self.change_value(k, v)}" for k, v in changes.items()
            )
            fits = item.get("fits")
            state = item.get("verdict") or ("fits" if fits else "does_not_fit")
            verdict = [
                "span",
                {
                    "class": "calc-num " + self.fit_class(state),
                    "data-output": f"suggestions.{i}.fits",
                    "data-value": raw_value(fits),
                },
                self.verdict_word(state),
            ]
            saved = self.num(f"suggestions.{i}.saved_bytes", item["saved_bytes"])
            if state != "fits":
                before, _, after = self.s["ui"]["suggestion_not_enough"].partition("{saved}")
                middle, _, end = after.partition("{verdict}")
                short.append(
                    [
                        "li",
                        {"data-suggestion": item["action"]},
                        f"{translate('actions', item['action'], self.s)} ({change_text}): ",
                        before,
                        saved,
                        middle,
                        verdict,
                        end,
                    ]
                )
                continue
            rows.append(
                [
                    "tr",
                    {},
                    ["td", {}, translate("actions", item["action"], self.s)],
                    ["td", {}, change_text],
                    ["td", {}, verdict],
                    ["td", {}, saved],
                    ["td", {}]
                    + (
                        [self.num(f"suggestions.{i}.host_bytes", item["host_bytes"])]
                        if _is_number(item.get("host_bytes"))
                        else []
                    ),
                    [
                        "td",
                        {},
                        self.estimate(f"suggestions.{i}.time_hours", item["time_hours"], "hours"),
                    ],
                    [
                        "td",
                        {},
                        self.cost(f"suggestions.{i}.cost_usd", item["cost_usd"], self.priced),
                    ],
                    [
                        "td",
                        {},
                        [
                            "button",
                            {
                                "type": "button",
                                "class": "calc-apply",
                                "data-changes": json.dumps(changes),
                            },
                            self.s["ui"]["apply"],
                        ],
                    ],
                ]
            )
        out: Node = [
            "div",
            {"class": "calc-group calc-suggestions"},
            self.heading(4, "suggestions_heading"),
        ]
        if rows:
            out.append(
                self.table(
                    [
                        "action",
                        "changes",
                        "fits",
                        "saved_bytes",
                        "host_bytes",
                        "time_hours",
                        "cost_usd",
                        "apply",
                    ],
                    rows,
                    self.s["ui"]["suggestions_heading"],
                )
            )
        else:
            out.append(["p", {"class": "calc-note"}, self.s["ui"]["suggestions_none_fits"]])
        if short:
            out += [
                ["p", {"class": "calc-note"}, self.s["ui"]["suggestions_not_enough_heading"]],
                ["ul", {"class": "calc-suggestions-short"}, *short],
            ]
        return out

    def fits_table(self) -> Node:
        r = self.result
        rows: list[Node] = []
        for gpu, fit in r["fits"].items():
            css = "calc-selected" if gpu == r["gpu"] else ""
            rows.append(
                [
                    "tr",
                    {"class": css} if css else {},
                    ["td", {}, self.gpu_name(gpu)],
                    ["td", {}, self.num(f"fits.{gpu}.memory_bytes", fit["memory_bytes"])],
                    ["td", {}, self.num(f"fits.{gpu}.required_bytes", fit["required_bytes"])],
                    ["td", {}, self.headroom_cell(gpu, fit)],
                    ["td", {}, self.fit_word(gpu, fit)],
                ]
            )
        note = self.s["ui"]["verdict_rule"]
        basis = self.basis_note()
        if basis:
            note += " " + basis
        margin = self.margin_text()
        if margin:
            note += " " + self.s["ui"]["margin_note"].replace(
                "{}", format_value("safety_margin", r["safety_margin"], self.lang, self.s)
            )
        return [
            "div",
            {"class": "calc-group"},
            self.heading(4, "fits_heading"),
            ["p", {"class": "calc-note"}, note],
            self.table(
                ["gpu", "memory_bytes", "required_bytes", "headroom_fraction", "fits"],
                rows,
                self.s["ui"]["fits_heading"],
            ),
        ]

    def fit_word(self, gpu: str, fit: JsonObject) -> Node:
        """A card's verdict word in the cards table (``fits.<gpu>.fits`` as its data)."""
        state = fit.get("verdict")
        if state not in ("fits", "borderline", "does_not_fit"):
            state = "fits" if fit.get("fits") else "does_not_fit"
        return [
            "span",
            {
                "class": "calc-num " + self.fit_class(state),
                "data-output": f"fits.{gpu}.fits",
                "data-value": raw_value(fit["fits"]),
                "data-verdict": state,
            },
            self.verdict_word(state),
        ]

    def recommendations(self) -> Node:
        rec = self.result["recommendations"]
        configs = rec.get("configs", [])
        index = {c["id"]: i for i, c in enumerate(configs)}
        group: Node = [
            "div",
            {"class": "calc-group calc-recommendations"},
            self.heading(4, "recommendations_heading"),
        ]
        if not configs:
            group.append(["p", {"class": "calc-empty"}, self.s["ui"]["nothing_fits"]])
            return group
        stacks = self.s.get("gpu_stacks", {})

        def stack_of(c: JsonObject) -> str:
            return str(c.get("stack") or stacks.get(c["gpu"], "cuda"))

        several = len({stack_of(c) for c in configs}) > 1
        group.append(self.highlights(rec, configs, index, several))
        if any(stack_of(c) != "cuda" for c in configs):
            # CSS (:has) hides the other stacks' rows while it is checked
            group.append(
                [
                    "label",
                    {"class": "calc-check calc-cuda-only"},
                    ["input", {"type": "checkbox", "class": "calc-cuda-only-box"}],
                    ["span", {}, self.s["ui"]["cuda_only"]],
                ]
            )
        for order, rank_key in (("by_cost", "rank_by_cost"), ("by_time", "rank_by_time")):
            ranked = [configs[index[i]] for i in rec.get(order, []) if i in index]
            rows: list[Node] = []
            # the top rows of all stacks, and those of CUDA alone: the rows below the top
            # that only CUDA's top holds are shown while the reader keeps to CUDA (CSS), and
            # the other stacks' rows are hidden then
            shown = self.best_per_card(ranked)
            top = {c["id"] for c, _ in shown[:TOP_CONFIGS]}
            cuda_top = {
                c["id"] for c, _ in [x for x in shown if stack_of(x[0]) == "cuda"][:TOP_CONFIGS]
            }
            for c, same in shown:
                if c["id"] not in top and c["id"] not in cuda_top:
                    continue
                i = index[c["id"]]
                p = f"recommendations.configs.{i}"
                priced = c.get("priced", True) is not False
                attrs = {"data-stack": stack_of(c)}
                if c["id"] not in top:
                    attrs["data-cuda-top"] = "true"
                rows.append(
                    [
                        "tr",
                        attrs,
                        ["td", {}, self.rank_cell(p, rank_key, c, several)],
                        ["td", {}, self.config_text(c, same)] + self.config_caveats(c, brief=True),
                        ["td", {}, self.estimate(f"{p}.time_hours", c["time_hours"], "hours")],
                        ["td", {}, self.cost(f"{p}.cost_usd", c["cost_usd"], priced)],
                        ["td", {}, self.cost(f"{p}.per_hour_usd", c["per_hour_usd"], priced, None)],
                        ["td", {}, self.num(f"{p}.headroom_fraction", c["headroom_fraction"])],
                    ]
                )
            group.append(
                ["h5", {}, self.s["ui"][order + "_heading"] + " " + self.s["ui"]["one_per_card"]]
            )
            group.append(
                self.table(
                    [
                        "rank",
                        "config",
                        "time_hours",
                        "cost_usd",
                        "per_hour_usd",
                        "headroom_fraction",
                    ],
                    rows,
                    self.s["ui"][order + "_heading"],
                )
            )
        if _is_number(rec.get("count")):
            group.append(
                [
                    "p",
                    {"class": "calc-note"},
                    self.s["ui"]["configs_count"].replace(
                        "{}", format_value("x_count", rec["count"], self.lang, self.s)
                    ),
                ]
            )
        return group

    def highlights(
        self, rec: JsonObject, configs: list[JsonObject], index: dict[str, int], several: bool
    ) -> Node:
        """The picks in a few lines. With cards of several software stacks among the
        configurations, the picks of each stack: CUDA's four, then "cheapest" and "fastest" on
        ROCm, named as such (a ROCm card is no drop-in for a CUDA one); each line carries its
        stack, so that the "CUDA only" filter hides the others (CSS)."""
        out: Node = ["ul", {"class": "calc-highlights"}]
        keys = ("smallest_card", "cheapest", "fastest", "smallest_config")
        by_stack = rec.get("by_stack") if several else None
        if isinstance(by_stack, dict):
            groups = [
                (stack, by_stack.get(stack) or {}, keys if stack == "cuda" else keys[1:3])
                for stack in sorted(by_stack, key=lambda st: (st != "cuda", st))
            ]
        else:
            groups = [(None, rec, keys)]
        for stack, picks, wanted in groups:
            for key in wanted:
                ref = picks.get(key)
                ref_id = ref.get("id") if isinstance(ref, dict) else ref
                if ref_id not in index:
                    continue
                config = configs[index[ref_id]]
                name = self.label("best_" + key)
                if stack is not None:
                    name = (
                        self.s["ui"]["best_in_stack"]
                        .replace("{best}", name)
                        .replace("{stack}", self.s["ui"]["stack_" + stack])
                    )
                attrs = (
                    {"data-pick": key} if stack is None else {"data-pick": key, "data-stack": stack}
                )
                out.append(
                    ["li", attrs, ["strong", {}, name + ": "], self.config_text(config)]
                    + self.config_caveats(config)
                )
        return out

    def rank_cell(self, path: str, rank_key: str, config: JsonObject, several: bool) -> Node:
        """A configuration's rank among all, and, with several stacks, its rank within its
        stack: shown instead while the "CUDA only" filter is on (CSS), so the ranks start at
        1 whichever the reader sees."""
        overall = self.num(f"{path}.{rank_key}", config[rank_key], "x_count")
        in_stack = config.get(rank_key + "_in_stack")
        if not several or not _is_number(in_stack):
            return overall
        overall[1]["class"] += " calc-rank-all"
        own = self.num(f"{path}.{rank_key}_in_stack", in_stack, "x_count")
        own[1]["class"] += " calc-rank-stack"
        return ["span", {}, overall, own]

    @staticmethod
    def best_per_card(ranked: list[JsonObject]) -> list[tuple[JsonObject, list[str]]]:
        """One row per card model: its best configuration in this ranking, with the
        shardings of the other configurations of that card and GPU count that show the same
        time and cost (DDP and ZeRO-2 often do), merged into it."""
        from calc.recommend import estimate_level

        def shown(c: JsonObject) -> tuple[int, float, float]:
            return (c["num_gpus"], estimate_level(c["time_hours"]), estimate_level(c["cost_usd"]))

        best: dict[str, tuple[JsonObject, list[str]]] = {}
        best_shown: dict[str, tuple[int, float, float]] = {}  # each card's best, as shown
        for c in ranked:
            card = c["gpu"]
            if card not in best:
                best[card] = (c, [c["sharding"]])
                best_shown[card] = shown(c)
            elif c["sharding"] not in best[card][1] and shown(c) == best_shown[card]:
                best[card][1].append(c["sharding"])
        return list(best.values())

    def config_caveats(self, config: JsonObject, brief: bool = False) -> Node:
        """A configuration's own warnings (ROCm caveats, a price at another rate), as a small
        note after its name: a cheap AMD card is not a drop-in for QLoRA. ``brief`` (ranking
        tables) keeps only those that change the decision, not the price-tier fallback."""
        codes = [
            c
            for c in config.get("warnings", [])
            if isinstance(c, str) and (not brief or c.startswith(("rocm_", "price_is_")))
        ]
        if not codes:
            return []
        return [
            [
                "small",
                {"class": "calc-caveat", "data-warnings": " ".join(codes)},
                " (" + "; ".join(translate("warnings", c, self.s) for c in codes) + ")",
            ]
        ]

    def notes(self) -> Node | None:
        codes = self.result.get("notes") or []
        if not codes:
            return None
        return ["div", {"class": "calc-notes"}] + [
            ["p", {"class": "calc-note", "data-note": str(c)}, translate("notes", c, self.s)]
            for c in codes
        ]

    def peek(self) -> Node:
        """The headline figures in one line, pinned to the bottom of a phone's screen (CSS), with
        a link to the results: the form is long there."""
        m = self.memory
        items = (
            self.verdict_items()
            if self.plan
            else [self.num(self.mpath("peak_allocated_bytes"), m["peak_allocated_bytes"])]
        )
        line: Node = ["a", {"class": "calc-peek", "href": "#calc-results-heading"}]
        for i, item in enumerate(items):
            if i:
                line.append(["span", {"aria-hidden": "true"}, "·"])
            line.append(item)
        # shown by CSS instead of the figures when these are not for the inputs on show
        line.append(["span", {"class": "calc-peek-error"}, self.s["ui"]["peek_error"]])
        return line

    def defaults_used(self) -> dict[str, str]:
        """What calc used for the optional inputs left empty (shown as the fields'
        placeholders), as raw JSON numbers."""
        if not self.plan:
            return {}
        r = self.result
        factors = r["time"]["factors"]
        found = {
            # no rental price: the field stays empty rather than suggest a price of 0
            # (nor for an owned card, whose price is its electricity, not a rate to type)
            "price_per_gpu_hour": r["cost_usd"]["price"]["usd_per_gpu_hour"]
            if self.priced and r["cost_usd"]["price"].get("source_kind") != "electricity"
            else None,
            "storage_price_per_gb_month": r.get("storage_price_per_gb_month"),
            # an owned card: the catalogue's board power the electricity is priced with
            "board_power_w": r["cost_usd"]["price"].get("board_power_w"),
            "storage_gb": (r.get("storage_gb") or {}).get("total"),
            "mfu": factors.get("mfu"),
            "qlora_speed_factor": factors.get("qlora_speed_factor"),
            "scaling_efficiency": factors.get("scaling_efficiency"),
        }
        return {k: raw_value(v) for k, v in found.items() if _is_number(v)}

    def profile_values(self) -> JsonObject:
        """The values calc used for the keys a training library's profile sets (the form
        shows them on the controls the reader left to the profile)."""
        from calc.frameworks import profile_keys

        used = self.memory.get("request") or {}
        return {key: used[key] for key in profile_keys() if key in used}

    def render(self) -> Node:
        root = [
            "div",
            {
                "class": "calc-results-body",
                "data-defaults": json.dumps(self.defaults_used(), sort_keys=True),
                "data-profile-values": json.dumps(self.profile_values(), sort_keys=True),
            },
        ]
        if self.plan:  # the answer first, on every width (sticky: calculator.css)
            root.append(self.verdict())
        root.append(self.memory_section())
        for part in (self.warnings_section(),):
            if part:
                root.append(part)
        root.append(self.peek())
        if self.plan:
            plan = self.plan_summary()
            for part in (
                self.suggestions(),
                self.time_and_cost(),
                self.solvers(),
                self.recommendations(),
                self.fits_table(),
                self.notes(),
            ):
                if part:
                    plan.append(part)
            root.append(plan)
        return root


def render_results(result: JsonObject, lang: str, strings: Strings) -> Node:
    """The results tree of an estimate or plan response."""
    return Renderer(result, lang, strings).render()
