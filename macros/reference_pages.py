"""The reference setup on the pages: stated once (``calc.reference``), quoted by
every page through these macros.

- ``reference_setup()``: the setup as a list, with its requests in ``data-reference-setup``;
- ``summary_matrix()``: small / medium / large x full / LoRA / QLoRA -> the configuration to
  rent (``calc.reference.pick``), hours, cost on demand and interruptible, each a link to
  the calculator with that setup; ``memory=True`` adds the memory per GPU;
- ``ref_request``, ``ref_pick``, ``ref_scenario``, ``ref_min_gpus``: the requests a page's
  own sentences and tables use, so that their figures answer for the same setup;
- ``ref_card`` and ``preset_value``: a card a plan names, a preset's figure, in running text.

Every number carries ``data-value``/``data-kind``/``data-field``/``data-source`` and every
named configuration ``data-ref`` like the guides' tables (``macros.tables``), so the browser
tests recompute them. The words of this module are in the message catalogue.
"""

from __future__ import annotations

import functools
import json
import posixpath
import re
from urllib.parse import quote

import calc
from calc import reference

from . import labels
from .rows import gpu_name, model_name, plan_source
from .site import page_language
from .tables import inline, raw_number, ref, ref_node
from calc_view.html import el, to_html
from calc.numfmt import format_kind

# The words of this module are messages of the catalogue (calc/data/messages).

# Shardings as a matrix cell names them (names of techniques, the same in both languages).
SHARDING_SHORT = {"none": "", "ddp": "DDP", "zero1": "ZeRO-1", "zero2": "ZeRO-2", "zero3": "ZeRO-3"}


def text(key: str, lang: str) -> str:
    from calc.catalogue import catalogue

    return catalogue(lang).message(key)


def _number(
    raw: float,
    kind: str,
    field: str,
    lang: str,
    source: dict | None = None,
    link: str | None = None,
) -> list:
    """A checkable number as a table cell; ``link``: the shown figure opens that URL."""
    attrs = {
        "data-value": raw_number(raw),
        "data-kind": kind,
        "data-field": field,
        "data-source": None if source is None else plan_source(source),
    }
    shown = format_kind(raw, kind, lang)
    return el("td", attrs, _link(link, shown, lang) if link else shown)


# --- requests -------------------------------------------------------------------------------


def model_for(size_or_model: str) -> str:
    """``small`` -> its preset id; a preset id is itself."""
    return reference.MODELS.get(size_or_model, size_or_model)


def ref_request(size_or_model: str, method: str, **changes) -> dict:
    """The reference plan request (macro): ``{{ plan_value(..., **ref_request("large", "full")) }}``."""
    return reference.request(model_for(size_or_model), method, **changes)


def ref_estimate(size_or_model: str, method: str, **changes) -> dict:
    """The reference estimate request (no plan keys)."""
    return {"model": model_for(size_or_model), **reference.estimate_setup(method), **changes}


def _plan(request: dict) -> dict:
    return calc.plan_setup(request)


def ref_pick(size_or_model: str, method: str) -> dict:
    """The configuration the matrix names for a cell: ``{gpu, num_gpus, sharding, id}``."""
    model = model_for(size_or_model)
    plan = _plan(reference.request(model, method))
    config = reference.pick(plan)
    if config is None:  # the build stops: a matrix cell must have an answer
        raise ValueError(f"no configuration for {model} {method}")
    return {k: config[k] for k in ("id", "gpu", "num_gpus", "sharding")}


def ref_scenario(size_or_model: str, method: str, interruptible: bool = False) -> dict:
    """A cost scenario of the cloud guide on the matrix's configuration for that cell."""
    config = ref_pick(size_or_model, method)
    out = reference.config_request(model_for(size_or_model), method, config)
    out["interruptible"] = interruptible
    return out


def ref_min_gpus(size_or_model: str, method: str, gpu: str, sharding: str, **changes) -> int:
    """Fewest GPUs of ``gpu`` (among calc's counts, up to 8 nodes) the cell fits on."""
    from calc import recommend

    n = reference.smallest_count(
        _plan, model_for(size_or_model), method, gpu, sharding, recommend.GPU_COUNTS, **changes
    )
    if n is None:
        raise ValueError(f"{size_or_model} {method} fits no count of {gpu} with {sharding}")
    return n


# --- links to the calculator ----------------------------------------------------------------


def calculator_href(request: dict, lang: str, page_url: str) -> str:
    """The calculator's URL for ``request``, relative to the page: every key whose value
    differs from the calculator's first view, as its URL parameters (the calculator reads
    ``?key=value``; lists comma-joined, booleans true/false)."""
    from .calculator import default_request, url_text

    defaults = default_request()
    parts = []
    for key, value in request.items():
        if key in defaults and url_text(defaults[key]) == url_text(value):
            continue
        parts.append(f"{quote(key)}={quote(url_text(value), safe=',')}")
    prefix = "en/" if lang == "en" else ""
    base = page_url.rstrip("/") or "."
    if base.endswith(".html"):
        base = posixpath.dirname(base) or "."
    target = posixpath.relpath(prefix + "calculator", base) + "/"
    return target + ("?" + "&".join(parts) if parts else "")


def _link(href: str, shown: str, lang: str) -> list:
    return el("a", {"href": href, "title": text("link.title", lang)}, shown)


# --- the summary matrix ---------------------------------------------------------------------


def config_text(config: dict) -> str:
    """``2 × H200 · ZeRO-3``; one unsharded card is ``1 × RTX A6000``."""
    out = f"{config['num_gpus']}\u00a0× {gpu_name(config['gpu'])}"
    short = SHARDING_SHORT[config["sharding"]]
    return out + (f" · {short}" if short else "")


@functools.lru_cache(maxsize=None)
def matrix_cell(size: str, method: str) -> dict:
    """Everything a matrix row shows for ``size`` x ``method``, from calc."""
    model = reference.MODELS[size]
    base_plan = _plan(reference.request(model, method))
    config = reference.pick(base_plan)
    if config is None:
        raise ValueError(f"no configuration for {model} {method}")
    on_demand = reference.config_request(model, method, config)
    interruptible = reference.config_request(model, method, config, interruptible=True)
    plan = _plan(on_demand)
    plan_int = _plan(interruptible)
    if not plan["fits_selected_gpu"]:  # pick() read the same estimate: never, unless calc drifts
        raise ValueError(f"{config['id']} does not fit {model} {method}")
    index = next(
        i for i, c in enumerate(plan["recommendations"]["configs"]) if c["id"] == config["id"]
    )
    return {
        "model": model,
        "method": method,
        "config": config,
        "index": index,
        "on_demand": on_demand,
        "interruptible": interruptible,
        "plan": plan,
        "plan_interruptible": plan_int,
    }


def summary_matrix(lang: str, page_url: str, memory: bool = False) -> str:
    """One small table per model size (three narrow tables read on a phone without scrolling
    sideways): method, what to rent, [memory per GPU,] hours, cost on demand and interruptible."""
    out = []
    for size, model in reference.MODELS.items():
        caption = (
            f"{model_name(model)} ({text('size.' + size, lang)}; {text('caption.costs', lang)})"
        )
        heads = (
            ["col.method", "col.rent"]
            + (["col.memory"] if memory else [])
            + ["col.hours", "col.on_demand", "col.interruptible"]
        )
        rows = []
        for method in reference.METHODS:
            cell = matrix_cell(size, method)
            plan, plan_int = cell["plan"], cell["plan_interruptible"]
            href = calculator_href(cell["on_demand"], lang, page_url)
            href_int = calculator_href(cell["interruptible"], lang, page_url)
            config = cell["config"]
            cells = [
                el("th", {"scope": "row"}, text("method." + method, lang)),
                el(
                    "td",
                    {
                        "data-ref": config["id"],
                        "data-ref-kind": "config",
                        "data-field": f"recommendations.configs.{cell['index']}.id",
                    },
                    _link(href, config_text(config), lang),
                ),
            ]
            if memory:
                cells.append(
                    _number(
                        plan["memory"]["device_total_bytes"],
                        "gib",
                        "memory.device_total_bytes",
                        lang,
                    )
                )
            cells.append(_number(plan["time_hours"], "hours", "time_hours", lang))
            cells.append(
                _number(plan["cost_usd"]["total"], "usd_approx", "cost_usd.total", lang, link=href)
            )
            cells.append(
                _number(
                    plan_int["cost_usd"]["total"],
                    "usd_approx",
                    "cost_usd.total",
                    lang,
                    source=cell["interruptible"],
                    link=href_int,
                )
            )
            rows.append(
                el(
                    "tr",
                    {
                        "data-source": plan_source(cell["on_demand"]),
                        "data-size": size,
                        "data-method": method,
                    },
                    *cells,
                )
            )
        table = el(
            "table",
            {
                "class": "calc-table__table",
                "data-table": "reference_matrix",
                "data-size": size,
                "data-model": model,
                "data-lang": lang,
            },
            el("caption", {}, caption),
            el(
                "thead",
                {},
                el("tr", {}, *(el("th", {"scope": "col"}, text(h, lang)) for h in heads)),
            ),
            el("tbody", {}, *rows),
        )
        out.append(
            to_html(
                el(
                    "div",
                    {
                        "class": "calc-table ref-matrix",
                        "role": "region",
                        "tabindex": "0",
                        "aria-label": caption,
                        "style": "overflow-x:auto;max-width:100%",
                    },
                    table,
                )
            )
        )
    return "\n".join(out)


# --- the answer box -------------------------------------------------------------------------


def answer_box(lang: str, page_url: str, size: str = "small", method: str = "lora") -> str:
    """The page's answer at a glance, for the reference setup of ``size`` x ``method`` (the
    matrix's cell, :func:`matrix_cell`): what to rent with calc's one verdict on it
    (:func:`calc.recommend.judge`, read from the plan's ``fits``), the hours, and the cost on
    demand and interruptible; the setup it answers for is named with the calculator's own words
    (its verdict line, ``calc_view``), and a link opens the calculator on that very request."""
    from calc import gpus
    from calc_view.render import Renderer

    from .calculator import results_strings

    cell = matrix_cell(size, method)
    plan, plan_int, config = cell["plan"], cell["plan_interruptible"], cell["config"]
    href = calculator_href(cell["on_demand"], lang, page_url)
    source = {"command": "plan", "request": cell["on_demand"]}
    source_int = {"command": "plan", "request": cell["interruptible"]}
    strings = results_strings(lang, gpus.gpus_listing()["gpus"])
    view = Renderer(plan, lang, strings)
    state = view.verdict_state()

    def figure(raw: float, kind: str, field: str, src: dict) -> list:
        return el(
            "span",
            {
                "data-value": raw_number(raw),
                "data-kind": kind,
                "data-field": field,
                "data-source": json.dumps(src, sort_keys=True, separators=(",", ":")),
            },
            format_kind(raw, kind, lang),
        )

    card = el(
        "span",
        {
            "data-ref": config["id"],
            "data-ref-kind": "config",
            "data-field": f"recommendations.configs.{cell['index']}.id",
            "data-source": plan_source(cell["on_demand"]),
        },
        config_text(config),
    )
    cost_before, _, rest = text("answer.cost_value", lang).partition("{on_demand}")
    cost_middle, _, cost_end = rest.partition("{interruptible}")
    lines = [
        (
            "card",
            text("answer.card", lang),
            [
                card,
                ": ",
                el(
                    "strong",
                    {"data-verdict": state, "data-field": f"fits.{config['gpu']}.verdict"},
                    view.verdict_word(state),
                ),
            ],
        ),
        (
            "hours",
            text("answer.hours", lang),
            [figure(plan["time_hours"], "hours", "time_hours", source), " h"],
        ),
        (
            "cost",
            text("answer.cost", lang),
            [
                cost_before,
                figure(plan["cost_usd"]["total"], "usd_approx", "cost_usd.total", source),
                cost_middle,
                figure(plan_int["cost_usd"]["total"], "usd_approx", "cost_usd.total", source_int),
                cost_end,
            ],
        ),
    ]
    title = text("answer.title", lang).format(model=model_name(cell["model"]))
    return to_html(
        el(
            "section",
            {
                "class": "answer-box",
                "aria-label": title,
                "data-answer": f"{size}/{method}",
                "data-source": plan_source(cell["on_demand"]),
            },
            el(
                "p", {"class": "answer-box__title"}, el("strong", {}, title), " ", view.setup_text()
            ),
            el(
                "dl",
                {"class": "answer-box__lines"},
                *(
                    node
                    for key, label, value in lines
                    for node in (
                        el("dt", {"data-line": key}, label),
                        el("dd", {"data-line": key}, *value),
                    )
                ),
            ),
            el(
                "p",
                {"class": "answer-box__link"},
                el(
                    "a",
                    {"href": href, "title": text("link.title", lang)},
                    text("answer.link", lang),
                ),
            ),
        )
    )


# --- the setup, stated ----------------------------------------------------------------------


def reference_setup(lang: str) -> str:
    """The reference setup as a list, generated from ``calc.reference`` (so the words cannot
    drift from the requests); ``data-reference-setup`` carries the setup for the tests."""
    s = reference.SETUP
    models = ", ".join(
        f"{model_name(m)} ({text('size.' + size, lang)})" for size, m in reference.MODELS.items()
    )
    methods = "; ".join(
        f"{text('method.' + m, lang)}: {text('setup.precision.' + reference.PRECISION[m], lang)}"
        for m in reference.METHODS
    )
    items = [(text("setup.models", lang), models), (text("setup.methods", lang), methods)]
    for key in (
        "seq_len",
        "micro_batch_size",
        "gradient_accumulation_steps",
        "gradient_checkpointing",
        "attention",
        "optimizer",
        "lora_rank",
        "lora_targets",
        "framework",
    ):
        items.append((labels.text("label." + key, lang), labels.value(key, s[key], lang)))
    items.append((text("setup.dataset", lang), ref_run_text(lang)))
    items.append((text("setup.prices", lang), text("setup.prices_value", lang)))
    data = {"models": reference.MODELS, "precision": reference.PRECISION, "setup": s}
    return to_html(
        el(
            "ul",
            {
                "class": "reference-setup",
                "data-reference-setup": json.dumps(data, sort_keys=True, separators=(",", ":")),
            },
            *(el("li", {}, f"{k}: ", *_inline_code(v)) for k, v in items),
        )
    )


def ref_run_text(lang: str) -> str:
    """The run of the reference setup in words: ``100 million tokens, 1 epoch``."""
    from calc.numfmt import format_number

    s = reference.SETUP
    return text("setup.dataset_value", lang).format(
        tokens=format_number(s["dataset_tokens"] / 1e6, 0, lang),
        epochs=format_number(s["epochs"], 0, lang),
    )


def _inline_code(value: str) -> list:
    """``labels.value`` writes enum values as Markdown code: inside HTML it becomes <code>."""
    return [el("code", {}, p) if i % 2 else p for i, p in enumerate(value.split("`")) if p or i % 2]


# --- inline references ----------------------------------------------------------------------


def ref_card(lang: str, field: str, **request) -> str:
    """The card a plan names at ``field`` (e.g. ``recommendations.smallest_single_gpu.gpu``),
    by name, checkable like a table's card cell."""
    node: object = _plan(request)
    for part in field.split("."):
        node = node[part]  # type: ignore[index]
    gpu_id = str(node)
    value = ref(gpu_id, gpu_name(gpu_id), **{"ref-kind": "gpu", "source": plan_source(request)})
    return to_html(ref_node("span", value, field))


def preset_value(lang: str, model: str, field: str, kind: str) -> str:
    """A figure of a model preset (``python -m calc presets``), e.g. its ``vocab``."""
    from calc import presets

    row = next(p for p in presets.presets_listing() if p["id"] == model)
    return inline(lang, row[field], kind, field, {"command": "preset", "id": model})


# --- registration ---------------------------------------------------------------------------


def model_size(preset_id: str) -> str:
    """The size a preset's name states ("70B" of "Llama 3.3 70B Instruct")."""
    match = re.search(r"\b\d+(?:\.\d+)?[BM]\b", model_name(preset_id))
    if match is None:
        raise ValueError(f"{preset_id}: its name states no size")
    return match.group(0)


def variables() -> dict:
    """``ref`` in the pages: the setup's pieces, for the macros' keyword arguments."""
    return {
        "models": dict(reference.MODELS),
        # the prose names the ladder from it, so the words follow a change of model
        "names": {size: model_name(m) for size, m in reference.MODELS.items()},
        "sizes": {size: model_size(m) for size, m in reference.MODELS.items()},
        # the card-class tables' models, and their names for the prose that lists them
        "ladder": list(reference.LADDER),
        "ladder_names": [model_name(m) for m in reference.LADDER],
        # the mixture of experts the guides set beside the ladder
        "moe": reference.MOE,
        "moe_name": model_name(reference.MOE),
        "estimate": {m: reference.estimate_setup(m) for m in reference.METHODS},
        # the guides' shared setup: full fine-tuning's keys without the method (a table's
        # method entries set the method and, for LoRA and QLoRA, their precision)
        "base": {k: v for k, v in reference.estimate_setup("full").items() if k != "method"},
        "run": {k: reference.SETUP[k] for k in reference.RUN_KEYS},
        "plan": {
            m: {
                **reference.estimate_setup(m),
                **{k: reference.SETUP[k] for k in reference.RUN_KEYS},
            }
            for m in reference.METHODS
        },
        "vocabulary": list(reference.VOCABULARY_PAIR),
        "offload_card": reference.OFFLOAD_CARD,
        "plan_gpu": reference.PLAN_GPU,
        "long_context": dict(reference.LONG_CONTEXT),
    }


def register(env) -> None:
    env.variables["ref"] = variables()

    def with_lang(fn):
        @functools.wraps(fn)
        def macro(*args, **kwargs):
            return fn(page_language(env), *args, **kwargs)

        return macro

    def matrix(memory: bool = False) -> str:
        return summary_matrix(page_language(env), env.page.url, memory=memory)

    env.macro(matrix, "summary_matrix")

    def answer(size: str = "small", method: str = "lora") -> str:
        return answer_box(page_language(env), env.page.url, size, method)

    env.macro(answer, "answer_box")
    for fn in (reference_setup, ref_card, preset_value, ref_run_text):
        env.macro(with_lang(fn), fn.__name__)
    for fn in (ref_request, ref_estimate, ref_pick, ref_scenario, ref_min_gpus):
        env.macro(fn, fn.__name__)
