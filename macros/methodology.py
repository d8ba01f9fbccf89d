"""The methodology page's generated tables: calc's constants, limits, plan defaults and data
columns in both languages (values read from calc; words from the message catalogue, its
``constants`` section for what each constant means and where it comes from), and the time
model's check against published throughput.
"""

from __future__ import annotations

import ast
import functools
import importlib
import json
from pathlib import Path

import calc
from calc.catalogue import catalogue

from . import labels
from .labels import translate_label, translate_note
from .site import bind_all
from .tables import SOURCE, Col, inline, inline_node, render
from .validation_loso import targets_sentence
from calc_view.html import el

CALC_DIR = Path(calc.__file__).resolve().parent
# how the site writes numbers, not figures of the model (GIB, significant figures per kind)
NOT_MODEL_CONSTANTS = ("calc.numfmt",)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_numeric_constant(value: object) -> bool:
    """A number, or a dict/tuple/list whose values are all numbers (a table of factors)."""
    if _is_number(value):
        return True
    if isinstance(value, dict) and value:
        return all(_is_number(v) for v in value.values())
    if isinstance(value, (tuple, list)) and value:
        return all(_is_number(v) for v in value)
    return False


@functools.lru_cache(maxsize=1)
def numeric_constants() -> tuple[str, ...]:
    """``calc.module.NAME`` of every module-level UPPERCASE numeric constant, in the module
    that assigns it (names imported from another module are not counted twice)."""
    out = []
    for path in sorted(CALC_DIR.glob("*.py")):
        module = "calc." + path.stem
        if module in NOT_MODEL_CONSTANTS:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = []
        for node in tree.body:
            targets = (
                node.targets
                if isinstance(node, ast.Assign)
                else [node.target]
                if isinstance(node, ast.AnnAssign)
                else []
            )
            names += [t.id for t in targets if isinstance(t, ast.Name)]
        if not names:
            continue
        mod = importlib.import_module(module)
        for name in names:
            if (
                name.isupper()
                and not name.startswith("_")
                and is_numeric_constant(getattr(mod, name))
            ):
                out.append(f"{module}.{name}")
    return tuple(dict.fromkeys(out))


def is_limit(key: str) -> bool:
    """Validation bounds (``MAX_*``): limits on input, not figures of the model."""
    return key.rsplit(".", 1)[1].startswith("MAX_")


def _kind_of(value: float) -> str:
    if float(value).is_integer():
        return "int"
    if round(value * 100, 9).is_integer():
        return "factor"
    if abs(value) < 0.01 and not round(value * 1000, 9).is_integer():
        return "shortest"  # three decimals would show 16 us or 8.4 us as 0.000
    return "fraction3"


def _value_span(value: float, lang: str, source: dict) -> list:
    return inline_node(lang, value, _kind_of(value), "value", source)


def _key_text(key: object) -> str:
    parts = key if isinstance(key, tuple) else (key,)
    return ", ".join(str(p) for p in parts)


def constant_value(key: str, lang: str) -> tuple:
    """The constant's value read from calc: one checkable number, or one per entry."""
    module, name = key.rsplit(".", 1)
    value = getattr(importlib.import_module(module), name)
    base = {"command": "constant", "module": module, "name": name}
    if _is_number(value):
        return (_value_span(value, lang, base),)
    out: list = []
    if isinstance(value, dict):
        for k, v in value.items():
            if out:
                out.append(el("br"))
            out += [
                el("code", {}, _key_text(k)),
                ": ",
                _value_span(v, lang, {**base, "key": list(k) if isinstance(k, tuple) else k}),
            ]
        return tuple(out)
    for i, v in enumerate(value):
        if out:
            out.append(", ")
        out.append(_value_span(v, lang, {**base, "key": i}))
    return tuple(out)


def _constant_name(key: str) -> list:
    """``module.NAME`` with break opportunities after the dot and the underscores only."""
    module, name = key.removeprefix("calc.").rsplit(".", 1)
    parts: list = [module + ".", el("wbr")]
    for i, part in enumerate(name.split("_")):
        parts += ["_", el("wbr"), part] if i else [part]
    return el("code", {"data-constant": key}, *parts)


def _described(key: str, lang: str) -> tuple:
    """Meaning, then the source on its own line."""
    meaning, source = catalogue(lang).constant(key)
    return (meaning, el("br"), el("small", {}, f"{labels.text('col.source', lang)}: {source}"))


def undescribed(keys: list[str]) -> list[str]:
    """The constants of ``keys`` the catalogue does not describe in every language."""
    from calc.catalogue import LANGS

    return [k for k in keys if any(k not in catalogue(lang).constants() for lang in LANGS)]


def calc_constants(lang: str, group: str) -> str:
    """Every numeric constant of calc (``group="model"``) or every validation limit
    (``group="limits"``): name, value from calc, meaning and source. An undocumented
    constant stops the build."""
    if group not in ("model", "limits"):
        raise ValueError(f"unknown group {group!r}")
    keys = [k for k in numeric_constants() if is_limit(k) == (group == "limits")]
    missing = undescribed(keys)
    if missing:
        raise KeyError(
            f"calc constants without a description in calc/data/messages (constants): {missing}"
        )
    rows = [
        {
            "name": _constant_name(k),
            "value": constant_value(k, lang),
            "meaning": _described(k, lang),
        }
        for k in keys
    ]
    cols = [
        Col("name", "col.constant", "node", row_header=True),
        Col("value", "col.value", "node"),
        Col("meaning", "col.meaning", "node"),
    ]
    return render(rows, cols, lang, f"calc_constants_{group}", f"caption.constants_{group}")


TIME_RATE_CONSTANTS = (
    "calc.timing.ATTENTION_KERNEL_TIME",
    "calc.attention.EFFICIENT_K_CHUNK",
    "calc.timing.FLASH2_A100_TFLOPS",
    "calc.timing.FLASH2_H100_TFLOPS",
    "calc.timing.FLASH2_PEAK_TFLOPS",
    "calc.timing.FP32_ATTENTION_TIME",
    "calc.timing.FP32_DEQUANT_WRITE_BYTES",
    "calc.timing.LORA_MATMUL_ELEMENTS",
    "calc.timing.LORA_FP32_BYTES_PER_OUTPUT",
    "calc.timing.LORA_BACKWARD_BYTES_PER_OUTPUT",
    "calc.timing.LORA_INPUT_GRAD_ACCUMULATE_PASSES",
    "calc.timing.NORM_BACKWARD_BYTES_PER_ELEMENT",
    "calc.timing.ROTARY_BACKWARD_BYTES_PER_ELEMENT",
    "calc.timing.GATED_ACT_BACKWARD_BYTES_PER_ELEMENT",
    "calc.timing.TANH_GELU_OP_BY_OP_BACKWARD_BYTES_PER_ELEMENT",
    "calc.timing.FANOUT_ACCUMULATE_BYTES_PER_ELEMENT",
    "calc.timing.BIAS_GRADIENT_BYTES_PER_ELEMENT",
    "calc.timing.ATTENTION_OUTPUT_COPY_BYTES",
    "calc.timing.VALUE_GRAD_COPY_BYTES",
    "calc.timing.REPEAT_KV_BYTES_PER_ELEMENT",
    "calc.timing.FUSED_LORA_OPS_PER_ADAPTER",
    "calc.timing.ZERO3_HOOK_SECONDS_PER_MODULE",
)
"""The constants that price attention kernels, fp32 work, LoRA adapters' matmuls and host
calls, the block's traced element-wise backward and DeepSpeed ZeRO-3's module hooks, shown on the time page beside the cards' FP32
rates."""


def time_rate_constants(lang: str) -> str:
    """The attention kernels' and fp32 work's constants (:data:`TIME_RATE_CONSTANTS`): value
    read from calc, meaning and source, as in the constants table."""
    rows = [
        {
            "name": _constant_name(k),
            "value": constant_value(k, lang),
            "meaning": _described(k, lang),
        }
        for k in TIME_RATE_CONSTANTS
    ]
    cols = [
        Col("name", "col.constant", "node", row_header=True),
        Col("value", "col.value", "node"),
        Col("meaning", "col.meaning", "node"),
    ]
    return render(rows, cols, lang, "time_rate_constants", "caption.time_rate_constants")


def gpu_fp32_rates(lang: str) -> str:
    """Each card's FP32 rate without tensor cores beside its dense BF16 rate (the catalogue's
    ``fp32_tflops``). Its source, recorded in English, is quoted on the data page with the
    card's other sources (``gpu_sources``), never as running text of a page in either language."""
    from .rows import gpu_rows

    cols = [
        Col("name", "col.gpu", "text", row_header=True),
        Col("bf16_dense_tflops", "col.bf16_tflops", "tflops"),
        Col("fp32_tflops", "col.fp32_tflops", "tflops"),
    ]
    return render(gpu_rows(None), cols, lang, "gpu_fp32_rates", "caption.gpu_fp32_rates")


def cluster_networks(lang: str) -> str:
    """The cloud instances of ``calc/data/instances.csv``: cards, the named network between two
    of them (the ``network`` key), its rate per server and the latency of one ring step on it
    (:data:`calc.comm.NETWORKS`)."""
    from calc import comm
    from calc.gpus import get_gpu, instances

    rows = []
    for inst in instances():
        source = {"command": "instance", "id": inst.instance}
        rows.append(
            {
                "instance": inst.instance,
                "provider": inst.provider,
                "gpu": get_gpu(inst.gpu).name,
                "network": inst.network,
                "network_gbit_per_s": inst.network_gbit_per_s,
                "step_latency_us": comm.NETWORKS[inst.network].step_latency_s * 1e6,
                "source": inst.source,
                "as_of": inst.as_of,
                SOURCE: source,
            }
        )
    cols = [
        Col("instance", "col.instance", "text", row_header=True),
        Col("provider", "col.provider", "text"),
        Col("gpu", "col.gpu", "text"),
        Col("network", "col.network", "code"),
        Col("network_gbit_per_s", "col.network_gbit_per_s", "int"),
        Col("step_latency_us", "col.step_latency_us", "factor"),
        Col("as_of", "col.as_of", "text"),
        Col("source", "col.source", "text", recorded_in="en"),
    ]
    return render(rows, cols, lang, "cluster_networks", "caption.cluster_networks")


def plan_defaults_table(lang: str) -> str:
    """Numeric defaults of the plan request (group ``plan`` of :data:`calc.fields.FIELDS`), with
    their sources."""
    from calc.fields import BY_KEY, PLAN
    from calc.fields import keys as group_keys

    keys = [k for k in group_keys(PLAN) if _is_number(BY_KEY[k].default)]
    missing = undescribed([f"default:{k}" for k in keys])
    if missing:
        raise KeyError(f"plan defaults without a description: {missing}")
    rows = [
        {
            "name": el("code", {"data-plan-default": k}, k),
            "value": _value_span(
                BY_KEY[k].default, lang, {"command": "plan_default", "key": k, "scale": 1}
            ),
            "meaning": _described(f"default:{k}", lang),
        }
        for k in keys
    ]
    cols = [
        Col("name", "col.request_key", "node", row_header=True),
        Col("value", "col.default", "node"),
        Col("meaning", "col.meaning", "node"),
    ]
    return render(rows, cols, lang, "plan_defaults", "caption.plan_defaults")


def data_file_columns(name: str) -> list[str]:
    """Columns of a ``calc/data`` file: the CSV header after the comments, or the keys of
    a models.json row."""
    text = (CALC_DIR / "data" / name).read_text(encoding="utf-8")
    if name.endswith(".json"):
        return list(json.loads(text)["models"][0])
    header = next(ln for ln in text.splitlines() if ln.strip() and not ln.startswith("#"))
    return header.split(",")


def data_columns(lang: str, name: str) -> str:
    """Every column of a data file with its meaning and unit."""
    columns = data_file_columns(name)
    rows = [
        {
            "column": el("code", {"data-column": f"{name}:{c}"}, c),
            "meaning": labels.text(f"data_column.{name}:{c}", lang),
        }
        for c in columns
    ]
    cols = [
        Col("column", "col.column", "node", row_header=True),
        Col("meaning", "col.meaning", "text"),
    ]
    return render(rows, cols, lang, "data_columns", f"caption.data_columns.{name}")


# --- the time model against published throughput ---------------------------------------------


@functools.lru_cache(maxsize=1)
def _throughput() -> dict:
    from accuracy import throughput

    return throughput.compare()


TIME_TARGETS = {"median": 15.0, "p90": 30.0, "max": 60.0}
"""The targets for the held-out error of tokens per second per GPU, in percent."""


def validation_time_targets(lang: str) -> str:
    """Which of :data:`TIME_TARGETS` the held-out figures on every covered row miss, in words."""
    loso = _throughput()["summary"]["all"]["loso"]
    return targets_sentence(lang, {k: loso[k + "_abs_pct"] for k in TIME_TARGETS}, TIME_TARGETS)


def validation_time_rows(lang: str) -> str:
    """Every covered row: measured vs calc's tokens per second per GPU, the error with calc's
    constants, with the in-sample fit and with the fit that left the row's source out."""
    rows = _throughput()["rows"]
    from calc import gpus

    rows = [
        {
            "row": str(r["row_id"]),
            "source_name": r["source"].rstrip("/").rsplit("/", 1)[-1],
            "workload": r["workload"],
            "model": r["model"],
            "method": r["method"] + ("+fp8" if r["fp8"] else ""),
            "gpus": f"{r['num_gpus']} × {gpus.get_gpu(r['gpu']).name}",
            "measured": r["measured_tokens_per_second_per_gpu"],
            "predicted": r["predicted_tokens_per_second_per_gpu"],
            "error": r["error_pct"],
            "loso": r["loso_error_pct"],
            "note": translate_note(r["note"], lang),
            SOURCE: {"command": "validation_throughput", "row": r["row_id"]},
        }
        for r in rows
    ]
    # the comparison first, so it shows without scrolling; where the row comes from after
    cols = [
        Col("row", "col.row", "text", row_header=True),
        Col("model", "col.model", "text"),
        Col("method", "col.method", "code"),
        Col("gpus", "col.card", "text"),
        Col("measured", "col.measured_tps", "int", check="measured_tokens_per_second_per_gpu"),
        Col("predicted", "col.predicted_tps", "int", check="predicted_tokens_per_second_per_gpu"),
        Col("error", "col.error_pct", "pct", check="error_pct"),
        Col("loso", "col.loso_error_pct", "pct", check="loso_error_pct"),
        Col("workload", "col.workload", "code"),
        Col("source_name", "col.source", "text"),
        Col("note", "col.note", "text"),
    ]
    return render(rows, cols, lang, "validation_time_rows", "caption.validation_time_rows")


# summary groups in the order shown: fine-tuning per method first (the target), then the rest;
# then by card class and by source (labelled by their own names)
SUMMARY_GROUPS = (
    "fine-tune/full",
    "fine-tune/full+fp8",
    "fine-tune/lora",
    "fine-tune/qlora",
    "fine-tune",
    "pre-train/full",
    "pre-train/full+fp8",
    "pre-train",
    "all",
)


def _group_label(group: str, lang: str) -> str:
    """A summary group in ``lang``; a source is named by its repository."""
    if group.startswith("source:"):
        name = group.split(":", 1)[1].rstrip("/").rsplit("/", 1)[-1]
        return f"{labels.option('group', 'source', lang)}: {name}"
    return labels.option("group", group, lang)


def validation_time_summary(lang: str) -> str:
    """Median, 90th percentile and largest absolute error per group: with the fit on every row
    (in-sample) and with each source's rows predicted by a fit that never saw them (LOSO)."""
    summary = _throughput()["summary"]
    unknown = {g for g in summary if ":" not in g} - set(SUMMARY_GROUPS)
    if unknown:
        raise KeyError(f"throughput summary groups without a label: {sorted(unknown)}")
    order = (
        [g for g in SUMMARY_GROUPS if g in summary]
        + sorted(g for g in summary if g.startswith("class:"))
        + sorted(g for g in summary if g.startswith("source:"))
    )
    rows = []
    for group in order:
        s = summary[group]
        if not s.get("rows"):
            continue
        i, o = s["in_sample"], s["loso"]
        rows.append(
            {
                "group": _group_label(group, lang),
                "count": s["rows"],
                "median": i["median_abs_pct"],
                "p90": i["p90_abs_pct"],
                "max": i["max_abs_pct"],
                "lmedian": o["median_abs_pct"],
                "lp90": o["p90_abs_pct"],
                "lmax": o["max_abs_pct"],
                SOURCE: {"command": "validation_throughput_summary", "group": group},
            }
        )
    cols = [
        Col("group", "col.group", "text", row_header=True),
        Col("count", "col.rows", "int", check="rows"),
        Col("median", "col.median_error", "pct", check="in_sample.median_abs_pct"),
        Col("p90", "col.p90_error", "pct", check="in_sample.p90_abs_pct"),
        Col("max", "col.max_error", "pct", check="in_sample.max_abs_pct"),
        Col("lmedian", "col.loso_median_error", "pct", check="loso.median_abs_pct"),
        Col("lp90", "col.loso_p90_error", "pct", check="loso.p90_abs_pct"),
        Col("lmax", "col.loso_max_error", "pct", check="loso.max_abs_pct"),
    ]
    return render(rows, cols, lang, "validation_time_summary", "caption.validation_time_summary")


def validation_time_fit(lang: str) -> str:
    """The fitted constants of the time model: the value calc ships (the in-sample fit), the
    sources whose rows fix it, and the leave-one-source-out error of those rows."""
    result = _throughput()
    rows = []
    for name, b in result["constant_basis"].items():
        s = b["loso"]
        rows.append(
            {
                "constant": name,
                "value": b["value"],
                "sources": ", ".join(x.replace("github.com/", "") for x in b["sources"]),
                "count": len(b["sources"]),
                "lmedian": s.get("median_abs_pct", 0.0),
                "lmax": s.get("max_abs_pct", 0.0),
                SOURCE: {"command": "validation_throughput_fit", "constant": name},
            }
        )
    cols = [
        Col("constant", "col.constant", "text", row_header=True),
        Col("value", "col.value", "factor", check="value"),
        Col("count", "col.source_count", "int", check="source_count"),
        Col("sources", "col.source", "text"),
        Col("lmedian", "col.loso_median_error", "pct", check="loso.median_abs_pct"),
        Col("lmax", "col.loso_max_error", "pct", check="loso.max_abs_pct"),
    ]
    return render(rows, cols, lang, "validation_time_fit", "caption.validation_time_fit")


def single_source_constants(lang: str) -> str:
    """The time page's line on the fitted constants that rest on a single source: the
    validation page's sentence for each (its source and held-out error, read from the fit), or
    one saying there is none."""
    from .validation_time_first_contact import single_source_lines

    lines = single_source_lines(lang)
    return " ".join(lines) if lines else labels.text("text.single_source_constants_none", lang)


def validation_time_uncovered(lang: str) -> str:
    """Rows with a throughput figure calc cannot express, with the reason."""
    rows = [
        {
            "row": str(r["row_id"]),
            "model": translate_label(r["model"], lang),
            "method": labels.method_label(r["method"], lang),
            "gpu": translate_label(r["gpu"], lang),
            "reason": translate_note(r["reason"], lang),
        }
        for r in _throughput()["not_covered"]
    ]
    cols = [
        Col("row", "col.row", "text", row_header=True),
        Col("model", "col.model", "text"),
        Col("method", "col.method", "text"),
        Col("gpu", "col.gpu", "text"),
        Col("reason", "col.reason", "text"),
    ]
    return render(
        rows, cols, lang, "validation_time_uncovered", "caption.validation_time_uncovered"
    )


def validation_qlora_ratio(lang: str) -> str:
    """Measured QLoRA/LoRA speed ratios against calc's (counted dequantisation)."""
    checks = [c for c in _throughput()["qlora_ratio_check"] if c["calc_ratio"] is not None]
    rows = [
        {
            "rows": " / ".join(str(r) for r in c["rows"]),
            "model": c["model"],
            "gpu": translate_label(c["gpu"], lang),
            "measured": c["measured_ratio"],
            "calc": c["calc_ratio"],
            SOURCE: {"command": "validation_qlora_ratio", "rows": c["rows"]},
        }
        for c in checks
    ]
    cols = [
        Col("rows", "col.rows_pair", "text", row_header=True),
        Col("model", "col.model", "text"),
        Col("gpu", "col.gpu", "text"),
        Col("measured", "col.measured_ratio", "factor", check="measured_ratio"),
        Col("calc", "col.calc_ratio", "factor", check="calc_ratio"),
    ]
    return render(rows, cols, lang, "validation_qlora_ratio", "caption.validation_qlora_ratio")


def validation_figure(lang: str, model: str, stat: str = "median", group: str | None = None) -> str:
    """One accuracy figure inside running text: the ``stat`` ("median", "p90", "max")
    absolute error in percent of the memory model (``group``: a method, or None for all
    rows) or of the time model (``group``: a summary group, default fine-tuning)."""
    if stat not in ("median", "p90", "max"):
        raise ValueError(f"unknown statistic {stat!r}")
    if model == "memory":
        from accuracy import memory as v

        # measured rows only: the ZeRO paper's analytic rows are no measurement
        s = v.summary(
            v.compare_rows(),
            lambda r: r.metric != "model_states" and (group is None or r.method == group),
        )
        field = f"pct:{stat}_abs_error"
        return inline(
            lang,
            getattr(s, f"{stat}_abs_error") * 100,
            "pct",
            field,
            {"command": "validation_memory_summary", "method": group, "measured": True},
        )
    if model == "time":
        group = group or "fine-tune"
        field = f"loso.{stat}_abs_pct"  # the held-out figure: what a new setup can expect
        return inline(
            lang,
            _throughput()["summary"][group]["loso"][f"{stat}_abs_pct"],
            "pct",
            field,
            {"command": "validation_throughput_summary", "group": group},
        )
    raise ValueError(f"unknown model {model!r}")


MACROS = (
    "validation_figure",
    "validation_time_targets",
    "calc_constants",
    "plan_defaults_table",
    "data_columns",
    "validation_time_rows",
    "validation_time_summary",
    "validation_time_uncovered",
    "validation_qlora_ratio",
    "validation_time_fit",
    "single_source_constants",
    "time_rate_constants",
    "gpu_fp32_rates",
    "cluster_networks",
)


def register(env) -> None:
    bind_all(env, MACROS, globals())
