"""Tables of the guides that need ``calc.plan_setup``: which cards fit, what a run costs.

Every cell comes from a plan response; each row (or cell) carries the plan request as its
``data-source`` so the browser tests recompute it. Cells that name a card or a model are
``ref`` cells: they carry the calc id and the response path it was read from.
"""

from __future__ import annotations

import calc
from calc_view.html import el, to_html

from . import labels
from .rows import REFERENCE_GPU, config_text, gpu_name, model_name, plan_source
from .site import bind_all
from .tables import (
    SOURCE,
    Col,
    cost_or_unpriced,
    inline,
    ref,
    ref_node,
    render,
    resolve,
    source_json,
)


def plan_value(lang: str, field: str, kind: str, **request) -> str:
    """One figure of ``calc.plan_setup`` inside running text, checkable like a table cell."""
    return inline(
        lang,
        resolve(field, calc.plan_setup(request), request),
        kind,
        field,
        {"command": "plan", "request": request},
    )


def plan_default(lang: str, key: str, kind: str) -> str:
    """The default of a plan-only request key (:data:`calc.fields.FIELDS`), as the page shows it."""
    from calc.fields import BY_KEY

    default = BY_KEY[key].default
    if default is None or isinstance(default, (bool, str)):
        raise ValueError(f"{key} has no numeric default")
    scale = 100 if kind.startswith("pct") else 1
    return inline(
        lang,
        default * scale,
        kind,
        "value",
        {"command": "plan_default", "key": key, "scale": scale},
    )


def cards_that_fit(lang: str, models: list[str], methods: list, **setup) -> str:
    """Per model x method: memory and what "fits" requires, the smallest single card that fits
    and the smallest configuration of any size (``recommendations`` of the plan)."""
    variants = [m if isinstance(m, dict) else {"method": m} for m in methods]
    rows = []
    for model in models:
        for variant in variants:
            request = {"model": model, **setup, **variant, "gpu": setup.get("gpu", REFERENCE_GPU)}
            plan = calc.plan_setup(request)
            rec = plan["recommendations"]
            single, smallest = rec["smallest_single_gpu"], rec["smallest_config"]
            rows.append(
                {
                    "model_name": model_name(model),
                    "method": request["method"],
                    "total": plan["memory"]["device_total_bytes"],
                    "required": plan["fits"][request["gpu"]]["required_bytes"],
                    "single": ref(
                        single and single["gpu"],
                        gpu_name(single["gpu"])
                        if single
                        else labels.text("text.no_single_card", lang),
                        **{"ref-kind": "gpu"},
                    ),
                    "smallest": ref(
                        smallest and smallest["id"],
                        config_text(smallest, lang),
                        **{"ref-kind": "config"},
                    ),
                    SOURCE: {"command": "plan", "request": request},
                }
            )
    gpu = setup.get("gpu", REFERENCE_GPU)
    cols = [
        Col("model_name", "col.model", "text", row_header=True),
        Col("method", "col.method", "code"),
        Col("total", "col.device_total", "gib", check="memory.device_total_bytes"),
        Col("required", "col.required_with_margin", "gib", check=f"fits.{gpu}.required_bytes"),
        Col(
            "single",
            "col.smallest_single_card",
            "ref",
            check="recommendations.smallest_single_gpu.gpu",
        ),
        Col("smallest", "col.smallest_config", "ref", check="recommendations.smallest_config.id"),
    ]
    return render(rows, cols, lang, "cards_that_fit", "caption.cards_that_fit")


class _Largest:
    """The largest of ``models`` (ordered by size) whose verdict on a card is ``fits``, per
    method variant, from one plan per (model, variant): the plan's ``fits`` table holds every
    card's verdict (:func:`calc.recommend.judge`), so a card is read, never judged here."""

    def __init__(self, models: list[str], methods: list, setup: dict) -> None:
        from calc import presets

        sizes = {p["id"]: p["params_total"] for p in presets.presets_listing()}
        self.ordered = sorted(models, key=lambda m: sizes[m])
        self.variants = [m if isinstance(m, dict) else {"method": m} for m in methods]
        self.requests = {
            (m, i): {"model": m, **setup, **v, "gpu": setup.get("gpu", REFERENCE_GPU)}
            for m in self.ordered
            for i, v in enumerate(self.variants)
        }
        self.plans = {key: calc.plan_setup(req) for key, req in self.requests.items()}

    def state(self, model: str, i: int, gpu_id: str) -> str:
        return str(self.plans[(model, i)]["fits"][gpu_id]["verdict"])

    def best(self, i: int, gpu_id: str) -> tuple[str | None, str | None]:
        """(largest model that fits, the next larger one), either ``None``."""
        fitting = [m for m in self.ordered if self.state(m, i, gpu_id) == "fits"]
        best = fitting[-1] if fitting else None
        above = (
            self.ordered[self.ordered.index(best) + 1]
            if best and best != self.ordered[-1]
            else (None if best else self.ordered[0])
        )
        return best, above

    def ref(self, i: int, gpu_id: str, lang: str) -> dict:
        """A ``ref`` naming the largest model that fits; the tests check both sides of the
        boundary (it fits, the next larger does not)."""
        best, above = self.best(i, gpu_id)
        attrs = {"ref-kind": "model", "gpu": gpu_id}
        if best:
            attrs["fits-source"] = plan_source(self.requests[(best, i)])
        if above:
            attrs["no-fit-source"] = plan_source(self.requests[(above, i)])
        return ref(
            best, model_name(best) if best else labels.text("text.nothing_fits", lang), **attrs
        )

    def borderline_ref(self, i: int, gpu_id: str) -> dict | None:
        """The next larger model when its verdict is ``borderline`` (a ``ref`` the tests
        check is borderline), else ``None``."""
        _, above = self.best(i, gpu_id)
        if above is None or self.state(above, i, gpu_id) != "borderline":
            return None
        return ref(
            above,
            model_name(above),
            **{
                "ref-kind": "model-borderline",
                "gpu": gpu_id,
                "fits-source": plan_source(self.requests[(above, i)]),
            },
        )


def gpu_typical(lang: str, gpu_ids: list[str], models: list[str], methods: list, **setup) -> str:
    """Per card: the largest of ``models`` that fits one card, per method (the verdict
    ``fits`` of the plan), and the card's memory."""
    largest = _Largest(models, methods, setup)
    variants = largest.variants
    rows = []
    for gpu_id in gpu_ids:
        row = {
            "gpu": gpu_name(gpu_id),
            "memory": largest.plans[(largest.ordered[0], 0)]["fits"][gpu_id]["memory_bytes"],
            SOURCE: {"command": "gpu", "id": gpu_id},
        }
        for i, _ in enumerate(variants):
            row[f"m{i}"] = largest.ref(i, gpu_id, lang)
        rows.append(row)
    cols = [
        Col("gpu", "col.gpu", "text", row_header=True),
        Col("memory", "col.gpu_memory", "gib", check="memory_bytes"),
    ]
    cols += [
        Col(f"m{i}", "col.largest_fitting." + v["method"], "ref", check="fits")
        for i, v in enumerate(variants)
    ]
    return render(rows, cols, lang, "gpu_typical", "caption.gpu_typical")


def card_class(lang: str, gpu_ids: list[str], models: list[str], methods: list, **setup) -> str:
    """What a class of cards fits, in words computed from calc: the cards' names, then per
    method the largest of ``models`` whose verdict is ``fits`` on the class's smallest card
    (so on every card of the class), and the next larger model when it is borderline there.
    The same plans and verdicts as :func:`gpu_typical`'s table."""
    from calc import gpus

    largest = _Largest(models, methods, setup)
    cards = [gpus.get_gpu(g) for g in gpu_ids]
    smallest = min(cards, key=lambda g: g.memory_bytes).id
    parts = []
    for i, variant in enumerate(largest.variants):
        method = variant["method"]
        found = largest.ref(i, smallest, lang)
        node = ref_node("span", found, "fits")
        if found["id"] is None:  # the ref still marks the boundary: the smallest does not fit
            before, _, after = labels.text("text.class_fits_none." + method, lang).partition(
                "{model}"
            )
        else:
            before, _, after = labels.text("text.class_fits." + method, lang).partition("{model}")
        sentence = before + to_html(node) + after
        edge = largest.borderline_ref(i, smallest)
        if edge is not None:
            b_before, _, b_after = labels.text("text.class_borderline", lang).partition("{model}")
            sentence += b_before + to_html(ref_node("span", edge, "fits")) + b_after
        parts.append(sentence)
    names = ", ".join(g.name for g in cards)
    return f"({names}): " + "; ".join(parts)


def plan_verdict(lang: str, **request) -> str:
    """The one verdict (``fits`` / ``borderline`` / ``does_not_fit``) of a plan on its
    chosen card, as a word inside running text, with its source for the tests."""
    plan = calc.plan_setup(request)
    state = plan["fits"][request["gpu"]]["verdict"]
    return to_html(
        el(
            "span",
            {
                "data-verdict": state,
                "data-field": f"fits.{request['gpu']}.verdict",
                "data-source": source_json({"command": "plan", "request": request}),
            },
            labels.text("ui.verdict_" + state, lang),
        )
    )


def multi_gpu_plan(
    lang: str, gpu: str, gpu_counts: list[int], shardings: list[str], **setup
) -> str:
    """The same job on 1..N cards of one kind: memory per GPU, its verdict on the card (fits,
    borderline, does not fit), speed, wall-clock and cost (``calc.plan_setup`` with that count
    and strategy)."""
    requests = [{**setup, "gpu": gpu, "num_gpus": 1, "sharding": "none"}]
    requests += [
        {**setup, "gpu": gpu, "num_gpus": n, "sharding": s}
        for s in shardings
        for n in gpu_counts
        if n > 1
    ]
    rows = []
    for request in requests:
        plan = calc.plan_setup(request)
        rows.append(
            {
                "sharding": request["sharding"],
                "num_gpus": request["num_gpus"],
                "total": plan["memory"]["device_total_bytes"],
                "fits": plan["fits"][gpu]["verdict"],
                "tps": plan["time"]["tokens_per_second"],
                "time": plan["time_hours"],
                "cost": cost_or_unpriced(plan, plan["cost_usd"]["total"]),
                SOURCE: {"command": "plan", "request": request},
            }
        )
    cols = [
        Col("sharding", "col.sharding", "code", row_header=True),
        Col("num_gpus", "col.num_gpus", "int", check="request.num_gpus"),
        Col("total", "col.device_total", "gib", check="memory.device_total_bytes"),
        Col("fits", "col.fits", "code", options="fits"),
        Col("tps", "col.tokens_per_second", "int", check="time.tokens_per_second"),
        Col("time", "col.time_hours", "hours", check="time_hours"),
        Col("cost", "col.cost_total", "usd", check="cost_usd.total"),
    ]
    return render(rows, cols, lang, "multi_gpu_plan", "caption.multi_gpu_plan|" + gpu_name(gpu))


# --- what a run costs -----------------------------------------------------------------------


def _priced_single_cards(request: dict) -> dict[str, dict]:
    """The single-card configurations of the plan's recommendations that fit ``request``
    and are priced at its own kind of provider and capacity (no fallback price)."""
    configs = calc.plan_setup({**request, "gpu": REFERENCE_GPU})["recommendations"]["configs"]
    return {
        c["gpu"]: c
        for c in configs
        if c["num_gpus"] == 1
        and c["sharding"] == "none"
        and not any(w.startswith("price_") for w in c["warnings"])
    }


def _scenario_requests(scenarios: list[dict], setup: dict) -> list[dict]:
    """Plan requests of the cost scenarios. A scenario without ``gpu`` runs on the smallest
    single card that fits it (seed 004: start there) among those the catalogue prices at the
    scenario's kind of provider both on demand and interruptible, so the two capacity
    variants of a setup use the same card and comparable prices. Smallest as calc's
    recommendation ranks it: least marketed memory, then the cheaper on-demand run."""
    from calc import gpus

    out = []
    for scenario in scenarios:
        request = {**setup, **scenario}
        if "gpu" not in scenario:
            on_demand = _priced_single_cards({**request, "interruptible": False})
            interruptible = _priced_single_cards({**request, "interruptible": True})
            both = [on_demand[g] for g in on_demand if g in interruptible]
            if not both:
                raise ValueError(f"no single card fits and is priced for the scenario {scenario}")
            best = min(
                both,
                key=lambda c: (gpus.get_gpu(c["gpu"]).memory_gb_marketed, c["cost_usd"], c["gpu"]),
            )
            request["gpu"] = best["gpu"]
        out.append(request)
    return out


def example_costs(lang: str, scenarios: list[dict], view: str, **setup) -> str:
    """Example runs: ``view="time"`` shows throughput, wall-clock, GPU-hours and rates;
    ``view="cost"`` the cost of each run by line (compute, start-ups, interruptions,
    experimentation, storage) and its total. The build fails if a run does not fit its card."""
    rows = []
    for request in _scenario_requests(scenarios, setup):
        plan = calc.plan_setup(request)
        if not plan["fits_selected_gpu"]:
            raise ValueError(f"scenario does not fit {request['gpu']}: {request}")
        cost = plan["cost_usd"]
        b = cost["breakdown"]
        capacity = "interruptible" if request.get("interruptible") else "on_demand"
        rows.append(
            {
                "scenario": f"{model_name(request['model'])} · {labels.option('method', request['method'], lang)}"
                f" · {labels.option('capacity', capacity, lang)}",
                "card": f"{plan['num_gpus']} × {gpu_name(plan['gpu'])}",
                "tokens_per_second": plan["time"]["tokens_per_second"],
                "time": plan["time_hours"],
                "gpu_hours": cost["gpu_hours"],
                "per_gpu_hour": cost_or_unpriced(plan, cost["per_gpu_hour"]),
                "per_month": cost_or_unpriced(plan, cost["per_month"]),
                "compute": cost_or_unpriced(plan, b["gpu_compute"]),
                "startup": cost_or_unpriced(plan, b["startup"]),
                "interruptions": cost_or_unpriced(plan, b["checkpointing"] + b["lost_work"]),
                "experimentation": cost_or_unpriced(plan, b["experimentation"]),
                "storage": b["storage"],
                "total": cost_or_unpriced(plan, cost["total"]),
                SOURCE: {"command": "plan", "request": request},
            }
        )
    cols = [Col("scenario", "col.scenario", "text", row_header=True)]
    if view == "time":
        cols += [
            Col("card", "col.card", "text"),
            Col(
                "tokens_per_second", "col.tokens_per_second", "int", check="time.tokens_per_second"
            ),
            Col("time", "col.time_hours", "hours", check="time_hours"),
            Col("gpu_hours", "col.gpu_hours", "hours", check="cost_usd.gpu_hours"),
            Col("per_gpu_hour", "col.usd_per_hour", "usd", check="cost_usd.per_gpu_hour"),
            Col("per_month", "col.usd_per_month", "usd", check="cost_usd.per_month"),
        ]
        name, caption = "example_times", "caption.example_times"
    elif view == "cost":
        cols += [
            Col("compute", "col.cost_compute", "usd", check="cost_usd.breakdown.gpu_compute"),
            Col("startup", "col.cost_startup", "usd", check="cost_usd.breakdown.startup"),
            Col(
                "interruptions",
                "col.cost_interruptions",
                "usd",
                check="cost_usd.breakdown.checkpointing+cost_usd.breakdown.lost_work",
            ),
            Col(
                "experimentation",
                "col.cost_experimentation",
                "usd",
                check="cost_usd.breakdown.experimentation",
            ),
            Col("storage", "col.cost_storage", "usd", check="cost_usd.breakdown.storage"),
            Col("total", "col.cost_total", "usd", check="cost_usd.total"),
        ]
        name, caption = "example_costs", "caption.example_costs"
    else:
        raise ValueError(f"unknown view {view!r}")
    return render(rows, cols, lang, name, caption)


# plan-only key -> (kind of number, unit label key or None)
DEFAULT_KINDS = {
    "experiment_multiplier": ("factor", None),
    "safety_margin": ("pct0", "unit.pct"),
    "startup_minutes": ("int", "unit.minutes"),
    "starts": ("int", None),
    "months_kept": ("int", None),
    "checkpoint_interval_minutes": ("int", "unit.minutes"),
    "checkpoint_minutes": ("int", "unit.minutes"),
    "interruptions_per_day": ("int", None),
}


def plan_defaults_list(lang: str, keys: list[str]) -> str:
    """A Markdown list of plan defaults (:data:`calc.fields.FIELDS`), each a checkable figure."""
    lines = []
    for key in keys:
        kind, unit = DEFAULT_KINDS[key]
        suffix = "\u00a0" + labels.text(unit, lang) if unit else ""
        lines.append(
            f"- {labels.text('label.' + key, lang)}: {plan_default(lang, key, kind)}{suffix}"
        )
    return "\n".join(lines)


MACROS = (
    "plan_value",
    "plan_default",
    "cards_that_fit",
    "gpu_typical",
    "card_class",
    "plan_verdict",
    "example_costs",
    "multi_gpu_plan",
    "plan_defaults_list",
)


def register(env) -> None:
    bind_all(env, MACROS, globals())
