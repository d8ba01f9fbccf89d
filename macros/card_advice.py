"""The cloud guide's advice with calc's figures beside it: what each card is typically
rented for (the seed's per-card advice, in our words) next to the largest model it fits,
the time and cost of a reference run and the longest sequence it takes; and the kinds of
provider (idle-capacity marketplaces, managed clouds) compared on the catalogue's dated
prices and on one run priced at each.

Every number is a ``data-value`` span or cell whose ``data-source`` the browser tests
recompute; model names are ``ref`` cells with the plans that prove they fit (and that the
next larger model does not), as in ``plan_tables.gpu_typical``.
"""

from __future__ import annotations

import html

import calc

from calc.catalogue import catalogue

from . import labels
from .rows import REFERENCE_GPU, gpu_name, gpu_rows, model_name, plan_source
from .site import bind_all
from .tables import SOURCE, Col, inline, inline_node, ref, ref_node, render
from calc_view.html import el, to_html

# This module's words are in the message catalogue (calc/data/messages), what each card is
# usually rented for too (``advice.use.<gpu>``: the seed's table of the cloud guide, rewritten,
# and extended to the cards the catalogue adds; no figure there, the columns beside say how
# much).


def _largest(
    plans: dict, ordered: list[str], requests: dict, i: int, gpu_id: str, lang: str
) -> dict:
    """The largest of ``ordered`` that fits ``gpu_id`` with variant ``i`` (a ``ref`` cell
    with the plans that prove it and that the next larger model does not fit)."""
    fitting = [m for m in ordered if plans[(m, i)]["fits"][gpu_id]["fits"]]
    best = fitting[-1] if fitting else None
    above = (
        (ordered[ordered.index(best) + 1] if best != ordered[-1] else None) if best else ordered[0]
    )
    attrs = {"ref-kind": "model", "gpu": gpu_id}
    if best:
        attrs["fits-source"] = plan_source(requests[(best, i)])
    if above:
        attrs["no-fit-source"] = plan_source(requests[(above, i)])
    return ref(best, model_name(best) if best else labels.text("text.nothing_fits", lang), **attrs)


def _figure(lang: str, request: dict, field: str, kind: str, value) -> str:
    return inline(lang, value, kind, field, {"command": "plan", "request": request})


def gpu_typical_use(
    lang: str, gpu_ids: list[str], models: list[str], reference_model: str, **setup
) -> str:
    """Per card: its typical use, the largest of ``models`` that fits one card with LoRA
    and QLoRA (bf16 base), and for ``reference_model`` on that one card the hours and cost
    of the run ``setup`` describes (QLoRA everywhere it fits; LoRA where it fits) and the
    longest sequence LoRA takes."""
    from calc import presets

    unknown = [g for g in gpu_ids if not catalogue(lang).has("advice.use." + g)]
    if unknown:
        raise KeyError(f"no typical use written for {unknown}")
    sizes = {p["id"]: p["params_total"] for p in presets.presets_listing()}
    ordered = sorted(models, key=lambda m: sizes[m])
    variants = [
        {"method": "lora", "precision": "bf16-true"},
        {"method": "qlora", "precision": "bf16-true"},
    ]
    requests = {
        (m, i): {"model": m, **setup, **v, "gpu": REFERENCE_GPU}
        for m in ordered
        for i, v in enumerate(variants)
    }
    plans = {key: calc.plan_setup(req) for key, req in requests.items()}
    ref_name = model_name(reference_model)
    items = []
    for gpu_id in gpu_ids:
        runs = {}
        for key, variant in (("q", variants[1]), ("l", variants[0])):
            request = {"model": reference_model, **setup, **variant, "gpu": gpu_id}
            plan = calc.plan_setup(request)
            if not plan["fits_selected_gpu"]:
                runs[key] = labels.text("text.does_not_fit", lang)
                continue
            seq = plan["solvers"]["max_seq_len"]
            # a card nobody rents publicly: hours, and the words "no rental price", no cost
            priced = plan["cost_usd"].get("priced") is not False
            runs[key] = labels.text("advice.run" if priced else "advice.run_unpriced", lang).format(
                hours=_figure(lang, request, "time_hours", "hours", plan["time_hours"]),
                cost=_figure(lang, request, "cost_usd.total", "usd", plan["cost_usd"]["total"])
                if priced
                else "",
                seq=_figure(lang, request, "solvers.max_seq_len.value", "int", seq["value"])
                if seq.get("found")
                else "?",
            )
        figures = labels.text("advice.figures", lang).format(
            lora=_ref_span(_largest(plans, ordered, requests, 0, gpu_id, lang)),
            qlora=_ref_span(_largest(plans, ordered, requests, 1, gpu_id, lang)),
            ref=html.escape(ref_name),
            q=runs["q"],
            l=runs["l"],
        )
        items.append(
            f'<li data-gpu="{html.escape(gpu_id)}"><strong>{html.escape(gpu_name(gpu_id))}'
            f"</strong>: {html.escape(labels.text('advice.use.' + gpu_id, lang))} {figures}</li>"
        )
    # one sentence per card, advice first and the figures after it: read on a phone as on a
    # desktop, no table to scroll sideways
    return '<ul class="calc-advice" data-table="gpu_typical_use">\n' + "\n".join(items) + "\n</ul>"


def _ref_span(value: dict) -> str:
    """A model named by calc, as a ``ref`` cell names it, in a span."""
    return to_html(ref_node("span", value, "fits"))


def provider_prices(lang: str, gpu_ids: list[str]) -> str:
    """Per card, the catalogue's price at each kind of provider and capacity, with its date."""
    kinds = [("marketplace", False), ("marketplace", True), ("managed", False), ("managed", True)]
    rows = []
    for gpu in gpu_rows(gpu_ids):
        row = {"gpu": gpu["name"], SOURCE: gpu[SOURCE]}
        for tier, interruptible in kinds:
            found = [
                (i, p)
                for i, p in enumerate(gpu["prices"])
                if p["tier"] == tier and p["interruptible"] == interruptible
            ]
            key = f"{tier}|{str(interruptible).lower()}"
            if not found:
                row[key] = labels.text("text.no_price", lang)
                continue
            i, price = found[0]
            row[key] = (
                inline_node(lang, price["usd"], "usd", f"prices.{i}.usd", gpu[SOURCE]),
                " ",
                el("small", {}, f"({price['as_of']})"),
            )
        rows.append(row)
    cols = [Col("gpu", "col.gpu", "text", row_header=True)]
    cols += [
        Col(f"{t}|{str(x).lower()}", f"col.price_at.{t}.{str(x).lower()}", "node") for t, x in kinds
    ]
    return render(rows, cols, lang, "provider_prices", "caption.provider_prices")


def provider_run(lang: str, gpu: str, **setup) -> str:
    """One run on ``gpu`` priced at each kind of provider and capacity the catalogue prices
    for that card itself (no price borrowed from another kind): price, hours (interruptible
    capacity adds checkpoints and lost work), total cost."""
    rows = []
    for tier in ("marketplace", "managed"):
        for interruptible in (False, True):
            request = {**setup, "gpu": gpu, "price_tier": tier, "interruptible": interruptible}
            plan = calc.plan_setup(request)
            if plan["cost_usd"]["price"].get("fallback") or plan["cost_usd"].get("priced") is False:
                continue
            if not plan["fits_selected_gpu"]:
                raise ValueError(f"the provider example does not fit {gpu}: {request}")
            schedule = plan["time"]["schedule"]
            kind = (
                labels.option("price_tier", tier, lang)
                + " · "
                + labels.option("capacity", "interruptible" if interruptible else "on_demand", lang)
            )
            rows.append(
                {
                    "kind": kind,
                    "usd": plan["cost_usd"]["price"]["usd_per_gpu_hour"],
                    "as_of": plan["cost_usd"]["price"]["as_of"],
                    "lost": schedule["checkpoint_hours"] + schedule["lost_work_hours"],
                    "hours": plan["time_hours"],
                    "total": plan["cost_usd"]["total"],
                    SOURCE: {"command": "plan", "request": request},
                }
            )
    if len(rows) < 2:
        raise ValueError(f"{gpu}: fewer than two kinds of provider priced; pick another card")
    cols = [
        Col("kind", "col.where_rented", "text", row_header=True),
        Col("usd", "col.usd_per_hour", "usd", check="cost_usd.price.usd_per_gpu_hour"),
        Col("as_of", "col.price_date", "text"),
        Col(
            "lost",
            "col.lost_hours",
            "hours",
            check="time.schedule.checkpoint_hours+time.schedule.lost_work_hours",
        ),
        Col("hours", "col.time_hours", "hours", check="time_hours"),
        Col("total", "col.cost_total", "usd", check="cost_usd.total"),
    ]
    return render(rows, cols, lang, "provider_run", "caption.provider_run|" + gpu_name(gpu))


MACROS = ("gpu_typical_use", "provider_prices", "provider_run")


def register(env) -> None:
    bind_all(env, MACROS, globals())
