"""The calculator page, rendered at build time.

``{{ calculator() }}`` writes the form (controls named after the request keys,
with their kinds and defaults from ``calc``'s field registry, :mod:`calc.fields`) and the result
of the default setup, computed now by CPython's ``calc`` and drawn by
``calc_view`` — the same renderer the browser's worker runs. The page so
shows numbers before Pyodide has loaded (``data-calc-state="static"``).
"""

from __future__ import annotations

import importlib
import json
import re
from enum import Enum
from pathlib import Path

import calc
import calc_view as view
from calc import reference as _reference
from calc.catalogue import LANGS, catalogue
from calc.fields import BEHAVIOUR, FieldSpec, keys, spec_by_key

ROOT = Path(__file__).resolve().parent.parent

# The calculator's starting setup: only what the request requires or the page chooses;
# every other default comes from calc's field tables.
# The default card is priced at managed clouds only: the default tier follows it, so the
# first view carries no "price from the other kind of provider" warning.
# The workload is the site's reference setup (calc.reference): the small model, the
# request's default method (LoRA), 100 M tokens x 1 epoch at managed-cloud prices, so the first
# view answers for the same setup as the home page's matrix and the guides.
PAGE_DEFAULTS = {
    "model": _reference.MODELS["small"],
    "dataset_tokens": _reference.SETUP["dataset_tokens"],
    "gpu": "l40s",
    "price_tier": _reference.SETUP["price_tier"],
}
COMMAND = "plan"  # one round trip: the plan response includes the memory estimate

# Request keys whose default depends on the method: the site's one precision per method
# (calc.reference.PRECISION, what the guides and the home page quote). The form follows the
# method with them until the reader picks a value (form-state.js).
METHOD_DEFAULTS = {"precision": dict(_reference.PRECISION)}

# Form sections: (legend key, request keys). Reader and plan keys calc adds later land in the
# last one. The first is the basic form (shown); the others are the advanced options, folded in
# one <details> whose open state is the URL's mode=advanced.
GROUPS = (
    # the precision beside the method: its default depends on it (METHOD_DEFAULTS), and the
    # verdict line names it
    (
        "legend_basic",
        (
            "model",
            "method",
            "precision",
            "gpu",
            "num_gpus",
            "seq_len",
            "micro_batch_size",
            "dataset_tokens",
            "epochs",
        ),
    ),
    # the training library first: its profile (calc.frameworks) sets the library behaviours
    # (every key of group "behaviour" in calc.fields, added by form()) below it,
    # each of which stays adjustable for a version that differs
    # what the data looks like: sample lengths and how they are batched (calc.lengths)
    ("legend_data", ("length_stats", "batching", "max_steps")),
    ("legend_library", ("framework",)),
    (
        "legend_method",
        (
            "lora_rank",
            "lora_targets",
            "lora_dropout",
            "qlora_double_quant",
            "optimizer",
            "optimizer_per_tensor",
            "optimizer_in_backward",
            "lora_modules_to_save",
        ),
    ),
    (
        "legend_batch",
        (
            "gradient_accumulation_steps",
            "gradient_checkpointing",
            "checkpointing_granularity",
            "checkpointing_every",
            "attention",
            "flash_attention_4",
            "torch_compile",
            "tf32",
            "chunked_loss",
            "liger_kernel",
            "activation_offload",
        ),
    ),
    (
        "legend_parallel",
        (
            "sharding",
            "shard_group",
            "sequence_parallel",
            "gradient_bucket_mb",
            "cpu_offload",
            "gpus_per_node",
        ),
    ),
    # what the run does besides training steps (calc.run_phases)
    (
        "legend_run",
        (
            "eval_steps",
            "eval_tokens",
            "eval_on_start",
            "eval_batch_size",
            "save_steps",
            "save_only_model",
            "save_total_limit",
            "checkpoint_write_gb_per_s",
        ),
    ),
    (
        "legend_plan",
        (
            "price_tier",
            "price_per_gpu_hour",
            "interruptible",
            "owned",
            "electricity_price_per_kwh",
            "board_power_w",
            "power_limit_w",
            "safety_margin",
        ),
    ),
    ("legend_advanced", ()),
)
BASIC = "legend_basic"
LIBRARY = "legend_library"


# The page's words, taken from the message catalogue (calc/data/messages): section of the
# page's strings (what calculator_view and the front end read) -> namespace of message ids.
PAGE_SECTIONS = {
    "ui": "ui",
    "units": "unit",
    "labels": "label",
    "components": "component",
    "warnings": "warning",
    "errors": "error",
    "actions": "action",
    "notes": "note",
    "config_import": "import",
}


def option_fields() -> list[str]:
    """The request keys with a closed set of values the form offers (a <select>)."""
    return [key for key, spec in request_fields().items() if spec.kind == "enum"]


def page_strings(lang: str) -> dict:
    """What the page needs of the catalogue, in the long form where there are two: messages by
    section, ``phases``, and ``enums`` as ``{field: {code: name}}``."""
    cat = catalogue(lang)
    strings = {name: cat.namespace(prefix, "long") for name, prefix in PAGE_SECTIONS.items()}
    # the config import's sub-tables (import.formats.<id>, import.notes.<id>, import.status.<id>)
    flat, strings["config_import"] = strings["config_import"], {}
    for key, text in flat.items():
        head, dot, rest = key.partition(".")
        if dot:
            strings["config_import"].setdefault(head, {})[rest] = text
        else:
            strings["config_import"][key] = text
    strings["phases"] = cat.options("phase", "long")
    strings["enums"] = {field: cat.options(field, "long") for field in option_fields()}
    # the short names the verdict line uses for what it assumes (method, precision, library)
    strings["short_enums"] = {
        field: cat.options(field, "short") for field in ("method", "precision", "framework")
    }
    return strings


def load_strings() -> dict:
    """The page's strings of every language: ``{lang: strings}``."""
    return {lang: page_strings(lang) for lang in LANGS}


def results_strings(lang: str, gpus: list) -> dict:
    """The strings the results are rendered with: the page's, plus the cards' names and
    stacks (the response names cards by id)."""
    return dict(
        page_strings(lang),
        gpus={g["id"]: g.get("name") or g["id"] for g in gpus},
        gpu_stacks={g["id"]: g.get("stack") or "cuda" for g in gpus},
    )


def request_fields() -> dict[str, FieldSpec]:
    """Every request key of the command, as calc's field registry declares it."""
    return spec_by_key(COMMAND)


def behaviour_order() -> tuple[str, ...]:
    """The library behaviours (group ``behaviour``), in the registry's order."""
    return keys(BEHAVIOUR)


def profile_keys() -> tuple[str, ...]:
    """The request keys a training library's profile sets (calc.frameworks): the form sends
    them only when the reader chose a value, so that the library's profile decides the rest."""
    from calc.frameworks import profile_keys as keys

    return keys()


def profileless_frameworks() -> list[str]:
    """The training libraries whose profile sets no key (``generic``): under them a key the
    reader set at its own default is what calc uses anyway, so the URL can leave it out."""
    from calc.frameworks import PROFILES

    return [fw.value for fw, entries in PROFILES.items() if not entries]


def default_request() -> dict:
    """The page's default request: calc's defaults, plus the page's choices. The keys a
    library profile sets are left to the profile, as the form leaves them (form-state.js)."""
    out = {}
    governed = set(profile_keys())
    for key, spec in request_fields().items():
        if key in governed and key not in PAGE_DEFAULTS:
            continue
        value = PAGE_DEFAULTS.get(key, spec.default)
        if value is not None:
            out[key] = value
    for key, by_method in METHOD_DEFAULTS.items():
        out[key] = by_method[str(out["method"])]
    return out


def compute(request: dict) -> dict:
    out = calc.run(COMMAND, request)
    if "error" in out:  # the build fails loudly on a bad default
        raise ValueError(f"calculator default request rejected: {out['error']}")
    return out["result"]


# ---------------------------------------------------------------- form

# calc's field kinds (calc.fields.KINDS) -> the form's: how a control reads and writes its value.
_INPUT_KINDS = {
    "int": "int",
    "number": "number",
    "fraction": "number",
    "bool": "bool",
    "targets": "targets",
    "model": "model",
    "gpu": "enum",
    "enum": "enum",
    "stats": "stats",
}


def input_kind(spec: FieldSpec) -> str:
    """A kind calc adds later stops the build here, rather than becoming a text box that
    sends the wrong type."""
    if spec.kind not in _INPUT_KINDS:
        raise ValueError(f"calculator: no form control for request field kind {spec.kind!r}")
    return _INPUT_KINDS[spec.kind]


def _choices(spec: FieldSpec, strings: dict, gpus: list) -> list[tuple[str, str]]:
    if spec.kind == "gpu":
        return [(g["id"], g.get("name") or g["id"]) for g in gpus]
    return [(value, view.option(spec.key, value, strings)) for value in spec.choices or ()]


def _field_wrap(
    key: str, strings: dict, control: list, hint: str | None = None, checkbox: bool = False
) -> list:
    text = view.label(key, strings)
    if checkbox:
        head = ["label", {"class": "calc-check", "for": f"calc-{key}"}, control, ["span", {}, text]]
        node = ["div", {"class": "calc-field", "data-field": key}, head]
    else:
        node = [
            "div",
            {"class": "calc-field", "data-field": key},
            ["label", {"for": f"calc-{key}"}, text],
            control,
        ]
    if hint:
        node.append(["small", {"class": "calc-hint"}, hint])
    node.append(
        ["p", {"class": "calc-error", "data-error-for": key, "role": "alert", "hidden": "hidden"}]
    )
    return node


def _text_input(key: str, value: object, kind: str, default: object, **extra: str) -> list:
    attrs = {
        "id": f"calc-{key}",
        "name": key,
        "type": "text",
        "data-kind": kind,
        "data-default": "" if default is None else url_text(default),
        "value": "" if value is None else url_text(value),
        "autocomplete": "off",
        "spellcheck": "false",
    }
    if kind in ("int", "number"):
        attrs["inputmode"] = "numeric" if kind == "int" else "decimal"
    attrs.update(extra)
    return ["input", attrs]


def url_text(value: object) -> str:
    """A value as it appears in the URL and the form (booleans true/false, lists comma-joined)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    if isinstance(value, dict):  # a "stats" value: name:value pairs
        return ",".join(f"{k}:{v}" for k, v in value.items())
    if isinstance(value, Enum):
        return str(value.value)
    return str(value)


def model_order(preset: dict) -> list[tuple[int, int, str]]:
    """Names in reading order, numbers by value ("Qwen3 4B" before "Qwen3 14B")."""
    name = str(preset.get("name") or preset["id"])
    return [
        (0, int(part), "") if part.isdigit() else (1, 0, part.lower())
        for part in re.findall(r"\d+|\D+", name)
    ]


def _newest_first(month: str) -> tuple[int, int]:
    year, _, mm = month.partition("-")
    return (-int(year), -int(mm))


def model_groups(presets: list) -> list[tuple[str, list[dict]]]:
    """The model list by family (``series``), the family with the newest release first; within
    a family the newest release first, then by size (total parameters), then by name."""
    by_series: dict[str, list[dict]] = {}
    for p in presets:
        by_series.setdefault(p["series"], []).append(p)
    for members in by_series.values():
        members.sort(
            key=lambda p: (_newest_first(p["released"]), p["params_total"], model_order(p))
        )
    return sorted(
        by_series.items(), key=lambda item: (_newest_first(item[1][0]["released"]), item[0])
    )


def _model_picker(strings: dict, groups: list[tuple[str, list[dict]]], current: object) -> list:
    """A <select> of the presets in <optgroup>s by family. It has no name: it writes its choice
    into the model field (calculator.js), which alone goes to the request and the URL."""
    select: list = [
        "select",
        {"id": "calc-model-pick", "class": "calc-model-pick", "data-kind": "picker"},
        ["option", {"value": ""}, strings["ui"]["model_pick_none"]],
    ]
    for series, members in groups:
        select.append(
            ["optgroup", {"label": strings["ui"]["family." + series]}]
            + [
                [
                    "option",
                    {"value": p["id"], **({"selected": "selected"} if p["id"] == current else {})},
                    p.get("name") or p["id"],
                ]
                for p in members
            ]
        )
    return [
        "div",
        {"class": "calc-model-pick-wrap"},
        ["label", {"for": "calc-model-pick"}, strings["ui"]["model_pick"]],
        select,
    ]


def _control(
    spec: FieldSpec, value: object, strings: dict, presets: list, gpus: list, placeholders: dict
) -> list:
    key = spec.key
    page_default = PAGE_DEFAULTS.get(key, spec.default)
    kind_name = input_kind(spec)
    if kind_name == "model":
        groups = model_groups(presets)
        options = ["datalist", {"id": "calc-model-list"}] + [
            ["option", {"value": p["id"]}, p.get("name") or p["id"]]
            for _, members in groups
            for p in members
        ]
        control = _text_input(key, value, "model", page_default, list="calc-model-list")
        node = _field_wrap(key, strings, control, strings["ui"]["preset_hint"])
        node.insert(3, options)
        node.insert(len(node) - 1, _model_picker(strings, groups, value or page_default))
        config = [
            "details",
            {"class": "calc-config"},
            ["summary", {}, strings["ui"]["config_summary"]],
            ["label", {"for": "calc-hf_config"}, view.label("hf_config", strings)],
            [
                "textarea",
                {
                    "id": "calc-hf_config",
                    "name": "hf_config",
                    "data-kind": "config",
                    "rows": "6",
                    "spellcheck": "false",
                    "aria-describedby": "calc-hf_config-hint",
                },
            ],
            [
                "small",
                {"class": "calc-hint", "id": "calc-hf_config-hint"},
                strings["ui"]["config_hint"],
            ],
            [
                "p",
                {
                    "class": "calc-error",
                    "data-error-for": "hf_config",
                    "role": "alert",
                    "hidden": "hidden",
                },
            ],
        ]
        node.append(config)
        return node
    if kind_name == "bool":
        attrs = {
            "id": f"calc-{key}",
            "name": key,
            "type": "checkbox",
            "data-kind": "bool",
            "data-default": url_text(page_default),
        }
        if value:
            attrs["checked"] = "checked"
        return _field_wrap(key, strings, ["input", attrs], checkbox=True)
    if kind_name == "enum":
        select = [
            "select",
            {
                "id": f"calc-{key}",
                "name": key,
                "data-kind": "enum",
                "data-default": url_text(page_default),
            },
        ]
        for val, text in _choices(spec, strings, gpus):
            attrs = {"value": val}
            if val == url_text(value):
                attrs["selected"] = "selected"
            select.append(["option", attrs, text])
        return _field_wrap(key, strings, select)
    if kind_name == "targets":
        return _field_wrap(
            key,
            strings,
            _text_input(key, value, "targets", page_default),
            strings["ui"]["targets_hint"],
        )
    if kind_name == "stats":  # "mean:900,p90:2000", sent as written: calc reads it (calc.lengths)
        return _field_wrap(
            key,
            strings,
            _text_input(key, value, "stats", page_default, placeholder="mean:900,p90:2000"),
            strings["ui"]["stats_hint"],
        )
    hint = None
    if page_default is None:
        # a key whose emptiness means "none" has words of its own (nothing shown in grey)
        hint = strings["ui"].get("empty_hint_" + key, strings["ui"]["optional_hint"])
    extra = {"placeholder": placeholders[key]} if key in placeholders else {}
    if spec.percent:  # 25, "25 %" and 0.25 all mean a quarter (form-state.js parseNumber)
        extra["data-percent"] = "true"
        hint = strings["ui"]["margin_hint"]
    return _field_wrap(
        key, strings, _text_input(key, value, kind_name, page_default, **extra), hint
    )


def _dataset_helper(strings: dict) -> list:
    """Dataset size as examples × average tokens per example: the page multiplies them into
    ``dataset_tokens`` (form-only fields, kept in the URL, never sent to calc)."""
    ui = strings["ui"]
    fields = ["div", {"class": "calc-dataset-helper"}]
    for name in ("examples", "example_tokens"):
        fields.append(
            [
                "div",
                {"class": "calc-field", "data-field": name},
                ["label", {"for": f"calc-{name}"}, ui["helper_" + name]],
                [
                    "input",
                    {
                        "id": f"calc-{name}",
                        "name": name,
                        "type": "text",
                        "data-kind": "helper",
                        "data-default": "",
                        "value": "",
                        "inputmode": "numeric",
                        "autocomplete": "off",
                        "spellcheck": "false",
                    },
                ],
                [
                    "p",
                    {
                        "class": "calc-error",
                        "data-error-for": name,
                        "role": "alert",
                        "hidden": "hidden",
                    },
                ],
            ]
        )
    return [
        "details",
        {"class": "calc-dataset"},
        ["summary", {}, ui["helper_summary"]],
        fields,
        ["small", {"class": "calc-hint"}, ui["helper_hint"]],
    ]


def form(strings: dict, presets: list, gpus: list, placeholders: dict) -> list:
    fields = request_fields()
    request = default_request()
    sections = [
        (legend, names + behaviour_order() if legend == LIBRARY else names)
        for legend, names in GROUPS
    ]
    placed = {k for _, names in sections for k in names}
    node = ["form", {"class": "calc-form", "novalidate": "novalidate", "autocomplete": "off"}]
    advanced = ["div", {"class": "calc-advanced-body"}]
    for legend, names in sections:
        names = names or tuple(k for k in fields if k not in placed)
        fieldset = ["fieldset", {}, ["legend", {}, strings["ui"][legend]]]
        # the library's behaviours fold under its choice: the profile sets them, and a reader
        # opens them only to match another version (calculator.js opens them when the URL
        # sets one)
        behaviours = (
            [
                "details",
                {"class": "calc-library-behaviours"},
                ["summary", {}, strings["ui"]["library_behaviours_summary"]],
            ]
            if legend == LIBRARY
            else None
        )
        for key in names:
            if key in fields:
                spec = fields[key]
                control = _control(spec, request.get(key), strings, presets, gpus, placeholders)
                if spec.methods:  # shown for these methods only (calculator.css, data-method)
                    control[1]["data-applies"] = " ".join(spec.methods)
                if key == "dataset_tokens":
                    fieldset.append(_dataset_helper(strings))
                (behaviours if behaviours is not None and key != "framework" else fieldset).append(
                    control
                )
        if behaviours is not None:
            fieldset.append(behaviours)
        if legend == BASIC:
            node.append(fieldset)
        else:
            advanced.append(fieldset)
    node.append(
        [
            "details",
            {"class": "calc-advanced", "data-mode": "advanced"},
            ["summary", {}, strings["ui"]["advanced_summary"]],
            advanced,
        ]
    )
    return node


# ---------------------------------------------------------------- page


def _json_script(element_id: str, data: object) -> list:
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return ["script", {"type": "application/json", "id": element_id}, text]


# The assets the calculator block links, each a key of ``urls`` (site_urls builds them for a page).
URL_KEYS = ("worker", "js", "boot", "css", "pyodide", "bundle", "snapshot", "stdlib", "lock", "sw")


def calculator_html(lang: str, urls: dict[str, str], presets: list, gpus: list) -> str:
    """The whole calculator block for one language. ``urls``: one URL per ``URL_KEYS`` entry,
    each relative to the page."""
    strings = results_strings(lang, gpus)
    request = default_request()
    result = compute(request)
    # data-static-request: the request of the build-time result; the page shows that result
    # as the form's only while the form holds this very request (state.js, CalcMachine's shownKey).
    root = [
        "div",
        {
            "class": "calc",
            "id": "calc",
            "data-calc-state": "static",
            "data-lang": lang,
            "data-method": str(request["method"]),
            "data-static-request": json.dumps(request, separators=(",", ":")),
            "data-profile-keys": json.dumps(list(profile_keys()), separators=(",", ":")),
            "data-profileless": json.dumps(profileless_frameworks(), separators=(",", ":")),
            "data-method-defaults": json.dumps(METHOD_DEFAULTS, separators=(",", ":")),
            "data-command": COMMAND,
            "data-worker": urls["worker"],
            "data-pyodide": urls["pyodide"],
            "data-bundle": urls["bundle"],
            "data-snapshot": urls["snapshot"],
            "data-stdlib": urls["stdlib"],
            "data-lock": urls["lock"],
            "data-sw": urls["sw"],
        },
        ["link", {"rel": "stylesheet", "href": urls["css"]}],
        ["script", {"src": urls["boot"]}],  # starts the worker now (see boot.js)
        _json_script("calc-strings", strings),
        # what the calculator is doing, on screen; not a live region: it changes with every
        # keystroke ("Calculando…", "Listo")
        ["p", {"class": "calc-status"}, strings["ui"]["status_static"]],
        # what a screen reader hears: a new verdict once the answer settles, or a failure
        # (calculator.js); empty until then, the build-time verdict is in the page
        [
            "p",
            {
                "class": "calc-announce",
                "role": "status",
                "aria-live": "polite",
                "aria-atomic": "true",
            },
        ],
        [
            "div",
            {"class": "calc-layout"},
            form(strings, presets, gpus, view.Renderer(result, lang, strings).defaults_used()),
            [
                "section",
                {"class": "calc-results"},
                ["h2", {"id": "calc-results-heading"}, strings["ui"]["results_heading"]],
                [
                    "div",
                    {
                        "class": "calc-general",
                        "data-error-for": "_general",
                        "role": "alert",
                        "hidden": "hidden",
                    },
                ],
                [
                    "p",
                    {"class": "calc-stale-note", "hidden": "hidden"},
                    strings["ui"]["stale_note"],
                ],
                # shown instead of the results while they belong to another request (boot.js
                # shows it at once for a shared link, before the build-time figures are drawn)
                [
                    "p",
                    {"class": "calc-pending-note", "role": "status", "hidden": "hidden"},
                    strings["ui"]["pending_note"],
                ],
                # on a phone, the bar pinned to the bottom says so from the first paint until
                # a shared link's own figures come (calculator.css; the note above is what a
                # screen reader hears)
                [
                    "p",
                    {"class": "calc-peek-pending", "aria-hidden": "true"},
                    strings["ui"]["peek_pending"],
                ],
                ["div", {"class": "calc-results-slot"}, view.render_results(result, lang, strings)],
            ],
        ],
        ["script", {"type": "module", "src": urls["js"]}],
    ]
    return view.to_html(root)


def relative_root(page_url: str) -> str:
    """``calculator/`` -> ``../``; ``en/calculator/`` -> ``../../``."""
    return "../" * page_url.strip("/").count("/") + ("../" if page_url.strip("/") else "")


def site_urls(conf: dict, page_url: str) -> dict[str, str]:
    root = relative_root(page_url)
    extra = conf.get("extra", {}) or {}
    return {
        "worker": root + "assets/calculator/worker.js",
        "js": root + "assets/calculator/calculator.js",
        "boot": root + "assets/calculator/boot.js",
        "css": root + "assets/calculator/calculator.css",
        "pyodide": root + extra["pyodide"]["path"].strip("/") + "/",
        "bundle": root + extra["calc_bundle"],
        "snapshot": root + extra["calc_snapshot"],
        "stdlib": root + extra["pyodide_stdlib"],
        "lock": root + extra["pyodide_lock"],
        "sw": root + extra["calc_service_worker"],
    }


def register(env) -> None:
    """Add ``{{ calculator() }}`` to a mkdocs-macros environment."""

    @env.macro
    def calculator() -> str:
        preset_module = importlib.import_module("calc.presets")
        gpu_module = importlib.import_module("calc.gpus")

        lang = env.conf["theme"]["language"]
        urls = site_urls(env.conf, env.page.url)
        return calculator_html(
            lang, urls, preset_module.presets_listing(), gpu_module.gpus_listing()["gpus"]
        )
