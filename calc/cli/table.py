"""The short answer on a terminal: memory in GiB with one decimal, the peak phase, a verdict
per chosen card, and for ``plan`` time and cost. Words come from the message catalogue, numbers
are written as the site writes them in each language (Spanish: decimal comma, a narrow
no-break space between thousands from 10 000 up; English: decimal point, comma groups)."""

from __future__ import annotations

from ..jsontypes import JsonObject
from ..memory import min_device_is_bound
from ..numfmt import GIB
from ..numfmt import format_number as number
from .messages import Messages


class Formatter:
    def __init__(self, msg: Messages) -> None:
        self.msg = msg

    def gib(self, nbytes: float) -> str:
        return self.msg.message("unit.gib", "{}").format(number(nbytes / GIB, 1, self.msg.lang))

    def gib_range(self, pair: tuple[float, float]) -> str:
        lo, hi = (number(b / GIB, 1, self.msg.lang) for b in pair)
        return self.msg.message("unit.gib", "{}").format(self.msg.text("table.range", lo=lo, hi=hi))

    def hours(self, value: float) -> str:
        return self.msg.message("unit.hours", "{}").format(number(value, 1, self.msg.lang))

    def usd(self, value: float, priced: object = True) -> str:
        """A cost, or "no rental price" for a card without one (``priced`` False: the figure
        would count storage alone)."""
        if priced is False:
            return self.msg.message("ui.no_rental_price", "no rental price")
        return self.msg.message("unit.usd", "{}").format(number(value, 2, self.msg.lang))

    def percent(self, fraction: float) -> str:
        return self.msg.message("unit.percent", "{}").format(
            number(fraction * 100, 0, self.msg.lang)
        )


def _range_pair(value: object) -> tuple[float, float] | None:
    """``peak_allocated_range_bytes`` as [low, high] or {name: bytes}; None when absent or odd."""
    if isinstance(value, dict):
        value = [
            v for v in value.values() if isinstance(v, (int, float)) and not isinstance(v, bool)
        ]
    if (
        isinstance(value, (list, tuple))
        and len(value) >= 2
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
    ):
        return min(value), max(value)
    return None


def _device_range(est: JsonObject) -> tuple[int, int] | None:
    """What nvidia-smi would show as a range, where calc gives one (``recommend.device_range``):
    the range the verdicts judge."""
    from .. import recommend

    if not hasattr(recommend, "device_range") or not est.get("peak_reserved_range_bytes"):
        return None
    low, high = recommend.device_range(est)
    return (low, high) if low != high else None


def _rows(rows: list[tuple[str, str]], indent: str = "  ") -> list[str]:
    width = max((len(label) for label, _ in rows), default=0)
    return [f"{indent}{label.ljust(width)}  {value}" for label, value in rows]


def _short(name: str) -> str:
    """A value's name without its parenthesis, for a one-line summary: ``ZeRO-3 (FSDP
    FULL_SHARD)`` -> ``ZeRO-3``."""
    return name.split(" (")[0]


def gpu_count(n: int, msg: Messages) -> str:
    """``1 GPU``, ``8 GPUs`` (Spanish: ``8 GPU``, an acronym takes no plural ending)."""
    return msg.text("table.gpus_one" if n == 1 else "table.gpus_other", n=n)


def gpu_name(gpu_id: str) -> str:
    """The catalogue's name of a card (``rtx-4090`` -> ``GeForce RTX 4090``); an id the
    catalogue does not hold stays as it is."""
    from ..gpus import gpus_listing

    names = {g["id"]: g["name"] for g in gpus_listing()["gpus"]}
    return str(names.get(gpu_id, gpu_id))


def model_name(model: object, msg: Messages) -> str:
    """A preset's name (``llama-3.1-8b`` -> ``Llama 3.1 8B``); a pasted config.json as
    ``config.json (llama)``, from the echoed id ``hf_config:<family>``."""
    if not isinstance(model, str):
        return msg.text("table.hf_model", family="?")
    if model.startswith("hf_config:"):
        return msg.text("table.hf_model", family=model.partition(":")[2])
    from ..presets import preset_ids, preset_row

    return str(preset_row(model)["name"]) if model in preset_ids() else model


def setup_name(config: JsonObject, msg: Messages) -> str:
    """A setup of the plan's ranking for people: ``h100-sxmx4-zero3`` -> ``4 × H100 SXM5 ·
    ZeRO-3``; the sharding left out when there is none."""
    if not all(k in config for k in ("gpu", "num_gpus")):
        return str(config.get("id"))
    text = msg.text("table.gpus_count", n=config["num_gpus"], gpu=gpu_name(str(config["gpu"])))
    sharding = str(config.get("sharding", "none"))
    return text if sharding == "none" else f"{text} · {_short(msg.option('sharding', sharding))}"


def _setup_line(request: JsonObject, msg: Messages) -> str:
    """``Llama 3.1 8B · QLoRA · pure bf16 · library: Hugging Face Trainer · 2048 tokens × 1 per
    micro-batch · 1 GPU``, from the echoed request (a key it lacks is left out)."""
    parts = [model_name(request.get("model"), msg)]
    if "method" in request:
        parts.append(msg.option("method", str(request["method"])))
    if "precision" in request:
        parts.append(_short(msg.short_option("precision", str(request["precision"]))))
    if "framework" in request:
        parts.append(
            msg.text(
                "table.framework", name=msg.short_option("framework", str(request["framework"]))
            )
        )
    if "seq_len" in request and "micro_batch_size" in request:
        parts.append(
            msg.text("table.shape", seq=request["seq_len"], mb=request["micro_batch_size"])
        )
    if "num_gpus" in request:
        parts.append(gpu_count(int(request["num_gpus"]), msg))
        sharding = str(request.get("sharding", "none"))
        if sharding != "none" or request["num_gpus"] != 1:
            parts.append(_short(msg.option("sharding", sharding)))
    return " · ".join(parts)


def memory_rows(est: JsonObject, fmt: Formatter) -> list[tuple[str, str]]:
    msg = fmt.msg

    def figure(key: str) -> str:
        """The estimate, and its calibrated range when the response has one (``<key>_range``)."""
        text = fmt.gib(est[key + "_bytes"])
        spread = _range_pair(est.get(key + "_range_bytes"))
        return f"{text} ({fmt.gib_range(spread)})" if spread is not None else text

    total = fmt.gib(est["device_total_bytes"])
    device = _device_range(est)
    if device is not None:
        total = f"{total} ({fmt.gib_range(device)})"
    rows = [
        (msg.text("table.allocated"), figure("peak_allocated")),
        (msg.text("table.reserved"), figure("peak_reserved")),
        (msg.text("table.on_device"), total),
    ]
    if "min_device_bytes" in est:  # the replayed allocator's smallest card, with its range
        shown = figure("min_device")
        if min_device_is_bound(est):
            shown = msg.text("table.at_most", figure=shown)
        rows.append((msg.text("table.min_device"), shown))
    rows.append((msg.text("table.peak_phase"), msg.option("phase", str(est.get("peak_phase")))))
    if est.get("host_bytes"):
        rows.append((msg.text("table.host"), fmt.gib(est["host_bytes"])))
    return rows


def verdict_text(entry: JsonObject, fmt: Formatter, margin: float) -> str:
    """A card's verdict: calc's own ``verdict`` code when the response has one (the one
    verdict, :func:`calc.recommend.judge`), else fits / fits only without the margin / does
    not fit; with the device range it judged (or what it needs) and what the card has; the
    margin named only when one is set."""
    msg = fmt.msg
    code = entry.get("verdict")
    if not isinstance(code, str):
        code = (
            "fits"
            if entry["fits"]
            else "fits_without_margin"
            if entry.get("fits_without_margin")
            else "does_not_fit"
        )
    word = msg.message("cli.verdict." + code, code)
    if "required_bytes" not in entry or "memory_bytes" not in entry:
        return word
    has = fmt.gib(entry["memory_bytes"])
    rng = _range_pair(entry.get("device_range_bytes"))
    if (
        rng is not None and rng[0] != rng[1]
    ):  # what the verdict judged: the range, and the margin set
        judged = fmt.gib_range(rng)
        detail = (
            msg.text("table.range_has_margin", range=judged, margin=fmt.percent(margin), has=has)
            if margin
            else msg.text("table.range_has", range=judged, has=has)
        )
        return f"{word} ({detail})"
    need = fmt.gib(entry["required_bytes"])
    detail = (
        msg.text("table.needs", need=need, margin=fmt.percent(margin), has=has)
        if margin
        else msg.text("table.needs_no_margin", need=need, has=has)
    )
    return f"{word} ({detail})"


def verdict_heading(msg: Messages, margin: float) -> str:
    if not margin:
        return msg.text("table.verdict")
    return msg.text("table.verdict_margin", margin=Formatter(msg).percent(margin))


def _warnings(codes: list[str], msg: Messages, config: list[JsonObject] | None = None) -> list[str]:
    if not codes:
        return []
    lines = [msg.text("table.warnings")] + [
        f"  - {msg.message('warning.' + str(c), str(c))}" for c in codes
    ]
    if config:  # --lenient: each refused config value and what was used instead
        from ..config_import.cli import invalid_text

        lines += [f"    {invalid_text(entry, msg, replaced=True)}" for entry in config]
    return lines


def render_estimate(
    est: JsonObject,
    msg: Messages,
    verdicts: dict[str, JsonObject] | None = None,
    margin: float = 0.0,
) -> str:
    fmt = Formatter(msg)
    lines = [
        f"{msg.text('table.setup')}: {_setup_line(est.get('request', {}), msg)}",
        msg.text("table.memory"),
    ]
    lines += _rows(memory_rows(est, fmt))
    if verdicts:
        lines.append(verdict_heading(msg, margin))
        lines += _rows(
            [(gpu_name(gpu), verdict_text(entry, fmt, margin)) for gpu, entry in verdicts.items()]
        )
    lines += _warnings(est.get("warnings", []), msg, est.get("config_warnings"))
    lines.append(msg.text("table.more", url=msg.methodology_url()))
    return "\n".join(lines) + "\n"


def render_plan(plan: JsonObject, msg: Messages) -> str:
    fmt = Formatter(msg)
    est = plan["memory"]
    margin = plan.get("safety_margin", 0.0)
    lines = [
        f"{msg.text('table.setup')}: {_setup_line(est.get('request', {}), msg)}",
        msg.text("table.memory"),
    ]
    lines += _rows(memory_rows(est, fmt))
    card = setup_name(
        {
            "gpu": plan["gpu"],
            "num_gpus": plan["num_gpus"],
            "sharding": plan.get("sharding", "none"),
        },
        msg,
    )
    lines.append(verdict_heading(msg, margin))
    lines += _rows([(card, verdict_text(plan["fits"][plan["gpu"]], fmt, margin))])
    cost = plan["cost_usd"]
    lines.append(msg.text("table.time_cost"))
    rows = [
        (msg.text("table.time"), fmt.hours(plan["time_hours"])),
        (msg.text("table.cost"), fmt.usd(cost["total"], cost.get("priced"))),
        (msg.label("cost_final_run"), fmt.usd(cost["final_run"], cost.get("priced"))),
        (
            msg.label("tokens_per_second"),
            number(plan["time"]["tokens_per_second"], 0, msg.lang),
        ),
    ]
    # of that time, what the run spends evaluating and saving (the calculator's rows)
    schedule = plan["time"].get("schedule") or {}
    phases = plan["time"].get("run_phases") or {}
    for key, counted in (("eval_hours", "evaluations"), ("checkpoint_hours", "saves")):
        if phases.get(counted):
            rows.append((msg.label(key), fmt.hours(schedule[key])))
    if phases.get("checkpoint_bytes"):
        rows.append((msg.label("checkpoint_bytes"), fmt.gib(phases["checkpoint_bytes"])))
    limit = plan["time"].get("power_limit_w")
    if isinstance(limit, (int, float)) and not isinstance(limit, bool):
        # the clock the power limit leaves the card, as the calculator shows it
        note = msg.message("ui.power_limit_note", "at a power limit of {} W")
        rows.append(
            (
                msg.label("sustained_clock_mhz"),
                f"{number(plan['time']['sustained_clock_mhz'], 0, msg.lang)} MHz ("
                + note.replace("{}", number(limit, 0, msg.lang))
                + ")",
            )
        )
    price = cost.get("price") or {}
    if price.get("source_kind") == "electricity":
        # an owned card: what its cost is made of, in the calculator's words
        template = msg.message("ui.price_electricity", "{power} W x {price} USD/kWh")
        power = number(price["board_power_w"], 0, msg.lang)
        per_kwh = number(price["electricity_price_per_kwh"], 2, msg.lang)
        rows.append(
            (
                msg.label("price_per_gpu_hour"),
                f"{fmt.usd(price['usd_per_gpu_hour'])} ("
                + template.replace("{power}", power).replace("{price}", per_kwh)
                + ")",
            )
        )
    lines += _rows(rows)
    configs = plan.get("recommendations", {}).get("configs", [])[:3]
    if configs:
        lines.append(msg.text("table.cheapest"))
        lines += _rows(
            [
                (
                    setup_name(c, msg),
                    f"{fmt.usd(c['cost_usd'], c.get('priced'))} · {fmt.hours(c['time_hours'])}",
                )
                for c in configs
            ]
        )
    lines += _warnings(plan.get("warnings", []), msg, plan.get("config_warnings"))
    lines.append(msg.text("table.more", url=msg.methodology_url()))
    return "\n".join(lines) + "\n"


def _grid(header: list[str], body: list[list[str]], right: set[int]) -> list[str]:
    """Columns padded to their widest cell; numbers (the ``right`` columns) right-aligned."""
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]
    lines = [
        "  ".join(
            cell.rjust(w) if i in right else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in [header, *body]
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


def _billions(count: float, msg: Messages) -> str:
    return msg.text("listing.billions", n=number(count / 1e9, 1, msg.lang))


def render_presets(listing: list[JsonObject], msg: Messages) -> str:
    """``presets`` on a terminal: id, name, parameters (active ones of a mixture of experts),
    context, layers and hidden size; the rest (shapes, Hugging Face ids, sources) in ``--json``."""
    header = [
        msg.text("listing.id"),
        msg.text("listing.name"),
        msg.text("listing.params"),
        msg.text("listing.context"),
        msg.text("listing.layers"),
        msg.text("listing.hidden"),
    ]
    body = []
    for row in listing:
        params = _billions(row["params_total"], msg)
        if row["params_active"] != row["params_total"]:
            params = msg.text(
                "listing.active", total=params, active=_billions(row["params_active"], msg)
            )
        body.append(
            [
                str(row["id"]),
                str(row["name"]),
                params,
                number(row["max_position_embeddings"], 0, msg.lang),
                number(row["layers"], 0, msg.lang),
                number(row["hidden"], 0, msg.lang),
            ]
        )
    lines = _grid(header, body, {3, 4, 5})
    lines.append(msg.text("listing.presets_footer", n=len(listing)))
    return "\n".join(lines) + "\n"


def render_gpus(listing: JsonObject, msg: Messages) -> str:
    """``gpus`` on a terminal: id, name, memory the driver reports, dense bf16 TFLOPS, memory
    bandwidth and the lowest price per GPU-hour of the catalogue; sources in ``--json``."""
    header = [
        msg.text("listing.id"),
        msg.text("listing.name"),
        msg.text("listing.memory"),
        msg.text("listing.bf16"),
        msg.text("listing.bandwidth"),
        msg.text("listing.price"),
    ]
    body = []
    for gpu in listing["gpus"]:
        prices = [p["usd"] for p in gpu["prices"] if p.get("unit") == "usd_per_gpu_hour"]
        body.append(
            [
                str(gpu["id"]),
                str(gpu["name"]),
                number(gpu["memory_bytes"] / GIB, 1, msg.lang),
                number(gpu["bf16_dense_tflops"], 0, msg.lang),
                number(gpu["memory_bandwidth_gb_per_s"], 0, msg.lang),
                number(min(prices), 2, msg.lang) if prices else "–",
            ]
        )
    lines = _grid(header, body, {2, 3, 4, 5})
    lines.append(msg.text("listing.gpus_footer", n=len(listing["gpus"])))
    return "\n".join(lines) + "\n"
