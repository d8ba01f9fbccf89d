"""One function per generated table of the guides. Each builds calc requests,
calls calc, puts the responses in rows (``macros.rows``) and hands them to the one
renderer (``macros.tables.render``).

Every function takes the page language first; the Markdown calls them with
the same arguments in both languages (a test checks it). Any calc error
propagates: the build fails instead of printing a broken table.
"""

from __future__ import annotations

import calc

from . import labels
from .labels import translate_label
from .rows import REFERENCE_GPU, estimate_rows, gpu_name, gpu_rows, model_name, present_components
from .site import bind_all
from .tables import CELL_SOURCE, NOT_PUBLISHED, SOURCE, Col, inline, ref, render, resolve


def _component_cols(rows: list[dict]) -> list[Col]:
    cols = []
    for name in present_components(rows):
        field = "components." + name
        if not any(row[field] for row in rows):
            continue  # a component no row has would only add a column of zeros
        cols.append(Col(field, "col.component." + name, "gib"))
    return cols


def setup_list(lang: str, **setup) -> str:
    """The stated setup of a table, as a Markdown list generated from the very
    arguments the table gets (so the text cannot drift from the figures)."""
    lines = []
    for key, value in setup.items():
        lines.append(f"- {labels.text('label.' + key, lang)}: {labels.value(key, value, lang)}")
    return "\n".join(lines)


def vram_by_model(lang: str, models: list[str], methods: list, **setup) -> str:
    """Memory on one GPU for each model x method, cut to what a reader compares: the total
    (what decides the card) and, when the setup is a run (it has ``dataset_tokens``), the
    smallest single card it fits (the verdict ``fits``). The peak allocated, its phase and the
    components are in the chart of ``macros.charts.memory_components_chart`` and its table.
    A method is a name or a dict of request keys that override the setup (its precision)."""
    from calc.fields import PLAN, keys

    variants = [m if isinstance(m, dict) else {"method": m} for m in methods]
    if any(k in keys(PLAN) for k in setup):
        return _vram_by_model_plan(lang, models, variants, setup)
    requests = [{"model": m, **setup, **v} for m in models for v in variants]
    cols = [
        Col("model_name", "col.model", "text", row_header=True),
        Col("req.method", "col.method", "code"),
        Col("req.precision", "col.precision", "code"),
        Col("device_total_bytes", "col.device_total", "gib"),
    ]
    return render(estimate_rows(requests), cols, lang, "vram_by_model", "caption.vram_by_model")


def _vram_by_model_plan(lang: str, models: list[str], variants: list[dict], setup: dict) -> str:
    rows = []
    for model in models:
        for variant in variants:
            request = {"model": model, **setup, **variant, "gpu": setup.get("gpu", REFERENCE_GPU)}
            plan = calc.plan_setup(request)
            single = plan["recommendations"]["smallest_single_gpu"]
            rows.append(
                {
                    "model_name": model_name(model),
                    "method": plan["memory"]["request"]["method"],
                    "precision": plan["memory"]["request"]["precision"],
                    "total": plan["memory"]["device_total_bytes"],
                    "single": ref(
                        single and single["gpu"],
                        gpu_name(single["gpu"])
                        if single
                        else labels.text("text.no_single_card", lang),
                        **{"ref-kind": "gpu"},
                    ),
                    SOURCE: {"command": "plan", "request": request},
                }
            )
    cols = [
        Col("model_name", "col.model", "text", row_header=True),
        Col("method", "col.method", "code"),
        Col("precision", "col.precision", "code"),
        Col("total", "col.device_total", "gib", check="memory.device_total_bytes"),
        Col(
            "single",
            "col.smallest_single_card",
            "ref",
            check="recommendations.smallest_single_gpu.gpu",
        ),
    ]
    return render(rows, cols, lang, "vram_by_model", "caption.vram_by_model")


def memory_vs_seq_batch(
    lang: str, model: str, method: str, seq_lens: list[int], batches: list[int], **setup
) -> str:
    """Peak allocated memory: rows are sequence lengths, columns micro-batch sizes."""
    rows = []
    for seq in seq_lens:
        # the row header number is the request's own value, checked against the cell sources
        row = {"seq_len": seq, SOURCE: {"command": "request", "request": {"seq_len": seq}}}
        for batch in batches:
            req = {
                "model": model,
                "method": method,
                **setup,
                "seq_len": seq,
                "micro_batch_size": batch,
            }
            row[f"b{batch}"] = calc.estimate(req)["peak_allocated_bytes"]
            row[CELL_SOURCE + f"b{batch}"] = {"command": "estimate", "request": req}
        rows.append(row)
    cols = [Col("seq_len", "col.seq_len", "int", check="request.seq_len", row_header=True)]
    cols += [Col(f"b{b}", f"col.batch|{b}", "gib", check="peak_allocated_bytes") for b in batches]
    return render(rows, cols, lang, "memory_vs_seq_batch", "caption.memory_vs_seq_batch")


def per_gpu_memory(
    lang: str, model: str, method: str, gpu_counts: list[int], shardings: list[str], **setup
) -> str:
    """Per-GPU memory when the same job is spread over N GPUs with each strategy."""
    requests = [{"model": model, "method": method, **setup, "num_gpus": 1, "sharding": "none"}]
    requests += [
        {"model": model, "method": method, **setup, "num_gpus": n, "sharding": s}
        for s in shardings
        for n in gpu_counts
        if n > 1
    ]
    rows = estimate_rows(requests)
    cols = [
        Col("req.sharding", "col.sharding", "code", row_header=True),
        Col("req.num_gpus", "col.num_gpus", "int", check="request.num_gpus"),
    ]
    cols += _component_cols(rows)
    cols += [
        Col("peak_allocated_bytes", "col.peak_allocated", "gib"),
        Col("device_total_bytes", "col.device_total", "gib"),
    ]
    return render(rows, cols, lang, "per_gpu_memory", "caption.per_gpu_memory")


def bytes_per_param(lang: str, model: str, combos: list[list[str]], **setup) -> str:
    """Model-state bytes per parameter of full fine-tuning, per precision and
    optimizer: calc's model states divided by the parameter count, whether or not they
    peak together (with a fused optimizer the peak can come before the last gradients
    exist): weights and optimizer states as calc's components, the gradients the rest
    of the model states."""
    requests = [
        {"model": model, "method": "full", **setup, "precision": p, "optimizer": o}
        for p, o in combos
    ]
    rows = estimate_rows(requests)
    present_components(rows)  # fills absent components with 0
    states = ("weights", "gradients", "optimizer")
    cols = [
        Col("req.precision", "col.precision", "code", row_header=True),
        Col("req.optimizer", "col.optimizer", "code"),
    ]
    checks = {
        "weights": "components.weights/params_total",
        "gradients": "model_states_bytes+-components.weights+-components.optimizer/params_total",
        "optimizer": "components.optimizer/params_total",
    }
    for row in rows:
        row["bpp.total"] = row["model_states_bytes"] / row["params_total"]
        row["bpp.weights"] = row["components.weights"] / row["params_total"]
        row["bpp.optimizer"] = row["components.optimizer"] / row["params_total"]
        row["bpp.gradients"] = (
            row["model_states_bytes"] - row["components.weights"] - row["components.optimizer"]
        ) / row["params_total"]
    for name in states:
        # the values are bytes per parameter, so not the components' GiB headers
        cols.append(Col("bpp." + name, "col.bpp_" + name, "bpp", check=checks[name]))
    cols.append(Col("bpp.total", "col.bpp_total", "bpp", check="model_states_bytes/params_total"))
    return render(rows, cols, lang, "bytes_per_param", "caption.bytes_per_param")


def weight_bytes(lang: str, model: str, variants: list[dict], **setup) -> str:
    """Bytes per parameter of the weights alone: 16-bit base vs 4-bit NF4."""
    requests = [{"model": model, **setup, **v} for v in variants]
    rows = estimate_rows(requests)
    for row, request in zip(rows, requests, strict=True):
        row["bpp.weights"] = row["components.weights"] / row["params_total"]
        row["variant"] = labels.variant(request, lang)
    cols = [
        Col("variant", "col.variant", "text", row_header=True),
        Col("components.weights", "col.component.weights", "gib"),
        Col("bpp.weights", "col.bpp_weights", "bpp", check="components.weights/params_total"),
    ]
    return render(rows, cols, lang, "weight_bytes", "caption.weight_bytes")


# The macros the pages may call; each gets the page language from the config.
MACROS = (
    "setup_list",
    "vram_by_model",
    "memory_vs_seq_batch",
    "per_gpu_memory",
    "bytes_per_param",
    "weight_bytes",
    "full_ft_sharded",
    "gib_note",
    "calc_value",
    "gpu_catalogue",
    "gpu_names",
    "gpu_sources",
    "gpu_prices",
    "validation_memory_rows",
    "validation_memory_summary",
    "validation_memory_uncovered",
)


def register(env) -> None:
    """Declare every table function of this module as a macro of ``env``."""
    bind_all(env, MACROS, globals())


def full_ft_sharded(
    lang: str, models: list[str], gpu_counts: list[int], sharding: str, **setup
) -> str:
    """Full fine-tuning: total memory per GPU (what nvidia-smi shows) for each model
    when its states are sharded over N GPUs."""
    rows = []
    for model in models:
        row = {"model": model_name(model)}
        for n in gpu_counts:
            req = {
                "model": model,
                "method": "full",
                **setup,
                "num_gpus": n,
                "sharding": sharding if n > 1 else "none",
            }
            row[f"n{n}"] = calc.estimate(req)["device_total_bytes"]
            row[CELL_SOURCE + f"n{n}"] = {"command": "estimate", "request": req}
        rows.append(row)
    cols = [Col("model", "col.model", "text", row_header=True)]
    cols += [
        Col(
            f"n{n}",
            f"col.per_gpu_of{'_one' if n == 1 else ''}|{n}",
            "gib",
            check="device_total_bytes",
        )
        for n in gpu_counts
    ]
    return render(rows, cols, lang, "full_ft_sharded", "caption.full_ft_sharded")


def gib_note(lang: str) -> str:
    """The page's one statement of the memory unit."""
    return labels.text("note.gib", lang)


def calc_value(lang: str, field: str, kind: str, **request) -> str:
    """One figure from ``calc.estimate`` inside running text, as checkable as a table cell."""
    response = calc.estimate(request)
    return inline(
        lang,
        resolve(field, response, request),
        kind,
        field,
        {"command": "estimate", "request": request},
    )


CLOCK_FIELDS = ("base_clock_mhz", "boost_clock_mhz", "sustained_clock_mhz")


def gpu_catalogue(lang: str, gpu_ids: list[str] | None = None) -> str:
    """The catalogue's hardware figures, one card per row."""
    rows = [
        {
            **row,
            "stack_label": row["stack"],
            "derived_label": ", ".join(
                labels.text("derived." + name, lang) for name in row["derived"]
            )
            or labels.text("derived.none", lang),
            "p2p_label": labels.text("p2p.yes" if row["pcie_p2p"] else "p2p.no", lang),
            # a clock the vendor does not publish is 0 in the data, not a speed of 0 MHz
            **{name: NOT_PUBLISHED for name in CLOCK_FIELDS if not row[name]},
        }
        for row in gpu_rows(gpu_ids)
    ]
    cols = [
        Col("name", "col.gpu", "text", row_header=True),
        Col("stack_label", "col.stack", "code", options="stack"),
        Col("memory_bytes", "col.gpu_memory", "gib"),
        Col("memory_gb_marketed", "col.memory_marketed", "int"),
        Col("bf16_dense_tflops", "col.bf16_tflops", "tflops"),
        Col("fp32_tflops", "col.fp32_tflops", "tflops"),
        Col("base_clock_mhz", "col.base_clock", "int"),
        Col("boost_clock_mhz", "col.boost_clock", "int"),
        Col("sustained_clock_mhz", "col.sustained_clock", "int"),
        Col("memory_bandwidth_gb_per_s", "col.bandwidth", "gbps"),
        Col("nvlink_gb_per_s", "col.nvlink", "gbps"),
        Col("p2p_label", "col.pcie_p2p", "text"),
        Col("derived_label", "col.derived_figures", "text"),
        Col("as_of", "col.as_of", "text"),
    ]
    return render(rows, cols, lang, "gpu_catalogue", "caption.gpu_catalogue")


def gpu_names(lang: str) -> str:
    """Every card of the catalogue by name, in one sentence: the tables are kept out of the
    search index (``hooks/search_i18n.py``), so this is where a search for "4090" or "MI300X"
    finds the catalogue page."""
    from calc.gpus import gpus_listing

    names = [g["name"] for g in gpus_listing()["gpus"]]
    return labels.text("text.gpu_names", lang).format(count=len(names), names=", ".join(names))


GPU_SOURCE_COLS = [
    Col("name", "col.gpu", "text", row_header=True),
    Col("source", "col.source", "text", recorded_in="en"),
    Col("fp32_source", "col.fp32_source", "text", recorded_in="en"),
    Col("clock_source", "col.clock_source", "text", recorded_in="en"),
    Col("as_of", "col.as_of", "text"),
]


def gpu_sources(lang: str, gpu_ids: list[str] | None = None) -> str:
    """Where each card's figures come from, and when."""
    return render(gpu_rows(gpu_ids), GPU_SOURCE_COLS, lang, "gpu_sources", "caption.gpu_sources")


def gpu_prices(lang: str, gpu_ids: list[str] | None = None, notes_id: str = "price-source") -> str:
    """Every dated price row of the catalogue, per card, kind of provider and capacity. Each
    source becomes a numbered note below the table (one number per distinct address), so the
    price and its date stay in view on a phone. A note shows the source's address only
    (``calc_view.render.citation``): the data's sources are recorded in English, and quoted
    whole on the methodology page (``macros/source_notes.py``)."""
    from calc_view.html import el, to_html
    from calc_view.render import citation

    rows, sources = [], []
    for gpu in gpu_rows(gpu_ids):
        for i, price in enumerate(gpu["prices"]):
            where = citation(price["source"])
            if where not in sources:
                sources.append(where)
            number = str(sources.index(where) + 1)
            rows.append(
                {
                    "name": gpu["name"],
                    "tier": price["tier"],
                    "capacity": ("interruptible" if price["interruptible"] else "on_demand"),
                    "usd": price["usd"],
                    "as_of": price["as_of"],
                    "note": el("a", {"href": f"#{notes_id}-{number}", "data-note": number}, number),
                    SOURCE: gpu[SOURCE],
                    "check": f"prices.{i}.usd",
                }
            )
    # the price and its date first: on a phone they stay in view next to the card's name
    cols = [
        Col("name", "col.gpu", "text", row_header=True),
        Col("usd", "col.usd_per_hour", "usd", check="@check"),
        Col("as_of", "col.as_of", "text"),
        Col("tier", "col.tier", "code", options="price_tier"),
        Col("capacity", "col.capacity", "code"),
        Col("note", "col.source_note", "node"),
    ]
    table = render(rows, cols, lang, "gpu_prices", "caption.gpu_prices")
    notes = el(
        "div",
        {"class": "calc-notes", "data-notes": "gpu_prices", "data-search-exclude": True},
        el("p", {"class": "calc-notes-title"}, labels.text("caption.price_sources", lang)),
        el(
            "ol",
            {"class": "calc-notes-list"},
            *(
                el("li", {"id": f"{notes_id}-{n}", "data-note": str(n)}, src)
                for n, src in enumerate(sources, 1)
            ),
        ),
    )
    return f"{table}\n{to_html(notes)}"


def _validation():
    from accuracy import memory

    return memory


def validation_memory_rows(lang: str) -> str:
    """Every measured row the model covers: predicted vs measured and the error."""
    results = [r for r in _validation().compare_rows() if r.covered]
    rows = [
        {
            "row": r.row_id,
            "source_name": r.source,
            "model": translate_label(r.model, lang),
            "method": labels.method_label(r.method, lang),
            "metric": r.metric,
            "measured_bytes": r.measured_bytes,
            "predicted_bytes": r.predicted_bytes,
            "error": r.error * 100,
            "flags": ", ".join(labels.option("flag", f, lang) for f in r.flags),
            SOURCE: {"command": "validation_memory", "row": r.row_id},
        }
        for r in results
    ]
    cols = [
        Col("row", "col.row", "text", row_header=True),
        Col("source_name", "col.source", "text"),
        Col("model", "col.model", "text"),
        Col("method", "col.method", "text"),
        Col("metric", "col.metric", "code"),
        Col("measured_bytes", "col.measured", "gib"),
        Col("predicted_bytes", "col.predicted", "gib"),
        Col("error", "col.error_pct", "pct", check="pct:error"),
        Col("flags", "col.flags", "text"),
    ]
    return render(rows, cols, lang, "validation_memory_rows", "caption.validation_rows")


def validation_memory_summary(lang: str) -> str:
    """Median, 90th percentile and largest absolute error, per method and overall."""
    v = _validation()
    results = v.compare_rows()
    methods = sorted({r.method for r in results if r.covered})
    rows = []
    for method in [*methods, None]:
        s = v.summary(results, (lambda r, m=method: m is None or r.method == m))
        rows.append(
            {
                "method": (
                    labels.method_label(method, lang)
                    if method
                    else labels.text("row.all_methods", lang)
                ),
                "count": s.count,
                "median": s.median_abs_error * 100,
                "p90": s.p90_abs_error * 100,
                "max": s.max_abs_error * 100,
                SOURCE: {"command": "validation_memory_summary", "method": method},
            }
        )
    cols = [
        Col("method", "col.method", "text", row_header=True),
        Col("count", "col.rows", "int"),
        Col("median", "col.median_error", "pct", check="pct:median_abs_error"),
        Col("p90", "col.p90_error", "pct", check="pct:p90_abs_error"),
        Col("max", "col.max_error", "pct", check="pct:max_abs_error"),
    ]
    return render(rows, cols, lang, "validation_memory_summary", "caption.validation_summary")


def validation_memory_uncovered(lang: str) -> str:
    """Measured rows the request contract cannot express, with the reason code."""
    results = [r for r in _validation().compare_rows() if not r.covered]
    rows = [
        {
            "row": r.row_id,
            "source_name": r.source,
            "model": translate_label(r.model, lang),
            "method": labels.method_label(r.method, lang),
            "reason": labels.reason(r.reason, lang),
        }
        for r in results
    ]
    cols = [
        Col("row", "col.row", "text", row_header=True),
        Col("source_name", "col.source", "text"),
        Col("model", "col.model", "text"),
        Col("method", "col.method", "text"),
        Col("reason", "col.reason", "text"),
    ]
    return render(rows, cols, lang, "validation_memory_uncovered", "caption.validation_uncovered")
