"""The short answer on a terminal: memory in GiB with one decimal, the peak phase, a verdict
per chosen card, and for ``plan`` time and cost. Words come from the message catalogue, numbers
are written as the site writes them in each language (Spanish: decimal comma, a narrow
no-break space between thousands from 10 000 up; English: decimal point, comma groups)."""

from __future__ import annotations

from ..jsontypes import JsonObject
from .messages import Messages

GIB = 2 ** 30
NNBSP = "\u202f"


def number(value: float, decimals: int, lang: str) -> str:
    """The site's number format (``calc_view/numfmt.py``), which the wheel does not ship."""
    text = f"{abs(value):,.{decimals}f}"
    int_part, _, frac = text.partition(".")
    negative = value < 0 and float(text.replace(",", "")) != 0.0
    if lang == "es":
        digits = int_part.replace(",", "")
        int_part = int_part.replace(",", NNBSP) if len(digits) >= 5 else digits
        text = int_part + ("," + frac if frac else "")
    return ("-" if negative else "") + text


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

    def usd(self, value: float) -> str:
        return self.msg.message("unit.usd", "{}").format(number(value, 2, self.msg.lang))

    def percent(self, fraction: float) -> str:
        return self.msg.message("unit.percent", "{}").format(number(fraction * 100, 0, self.msg.lang))


def _range_pair(value: object) -> tuple[float, float] | None:
    """``peak_allocated_range_bytes`` as [low, high] or {name: bytes}; None when absent or odd."""
    if isinstance(value, dict):
        value = [v for v in value.values() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if isinstance(value, (list, tuple)) and len(value) >= 2 and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
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


def _setup_line(request: JsonObject, msg: Messages) -> str:
    """``llama-3.1-8b · QLoRA · 2048 tokens × 1 · 1 GPU (none)``, from the echoed request."""
    model = request.get("model")
    parts = [model if isinstance(model, str) else "hf_config"]
    if "method" in request:
        parts.append(msg.option("method", str(request["method"])))
    if "seq_len" in request and "micro_batch_size" in request:
        parts.append(msg.text("table.shape", seq=request["seq_len"], mb=request["micro_batch_size"]))
    if "num_gpus" in request:
        sharding = str(request.get("sharding", "none"))
        parts.append(msg.text("table.gpus", n=request["num_gpus"], sharding=msg.option("sharding", sharding)))
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
    rows = [(msg.text("table.allocated"), figure("peak_allocated")),
            (msg.text("table.reserved"), figure("peak_reserved")),
            (msg.text("table.on_device"), total),
            (msg.text("table.peak_phase"), msg.option("phase", str(est.get("peak_phase"))))]
    if est.get("host_bytes"):
        rows.append((msg.text("table.host"), fmt.gib(est["host_bytes"])))
    return rows


def verdict_text(entry: JsonObject, fmt: Formatter, margin: float) -> str:
    """A card's verdict: calc's own ``verdict`` code when the response has one, else fits /
    fits only without the margin / does not fit; with what it needs and what it has."""
    msg = fmt.msg
    code = entry.get("verdict")
    if not isinstance(code, str):
        code = ("fits" if entry["fits"] else
                "fits_without_margin" if entry.get("fits_without_margin") else "does_not_fit")
    word = msg.message("cli.verdict." + code, code)
    if "required_bytes" not in entry or "memory_bytes" not in entry:
        return word
    need, has = fmt.gib(entry["required_bytes"]), fmt.gib(entry["memory_bytes"])
    detail = (msg.text("table.needs", need=need, margin=fmt.percent(margin), has=has) if margin
              else msg.text("table.needs_no_margin", need=need, has=has))
    return f"{word} ({detail})"


def verdict_heading(msg: Messages, margin: float) -> str:
    if not margin:
        return msg.text("table.verdict")
    return msg.text("table.verdict_margin", margin=Formatter(msg).percent(margin))


def _warnings(codes: list[str], msg: Messages, config: list[JsonObject] | None = None) -> list[str]:
    if not codes:
        return []
    lines = [msg.text("table.warnings")] + [f"  - {msg.message('warning.' + str(c), str(c))}" for c in codes]
    if config:  # --lenient: each refused config value and what was used instead
        from ..config_import.cli import invalid_text
        lines += [f"    {invalid_text(entry, msg, replaced=True)}" for entry in config]
    return lines


def render_estimate(est: JsonObject, msg: Messages, verdicts: dict[str, JsonObject] | None = None,
                    margin: float = 0.25) -> str:
    fmt = Formatter(msg)
    lines = [f"{msg.text('table.setup')}: {_setup_line(est.get('request', {}), msg)}",
             msg.text("table.memory")]
    lines += _rows(memory_rows(est, fmt))
    if verdicts:
        lines.append(verdict_heading(msg, margin))
        lines += _rows([(gpu, verdict_text(entry, fmt, margin)) for gpu, entry in verdicts.items()])
    lines += _warnings(est.get("warnings", []), msg, est.get("config_warnings"))
    lines.append(msg.text("table.more", url=msg.methodology_url()))
    return "\n".join(lines) + "\n"


def render_plan(plan: JsonObject, msg: Messages) -> str:
    fmt = Formatter(msg)
    est = plan["memory"]
    margin = plan.get("safety_margin", 0.25)
    lines = [f"{msg.text('table.setup')}: {_setup_line(est.get('request', {}), msg)}",
             msg.text("table.memory")]
    lines += _rows(memory_rows(est, fmt))
    card = msg.text("table.gpus_count", n=plan["num_gpus"], gpu=plan["gpu"])
    lines.append(verdict_heading(msg, margin))
    lines += _rows([(card, verdict_text(plan["fits"][plan["gpu"]], fmt, margin))])
    cost = plan["cost_usd"]
    lines.append(msg.text("table.time_cost"))
    lines += _rows([(msg.text("table.time"), fmt.hours(plan["time_hours"])),
                    (msg.text("table.cost"), fmt.usd(cost["total"])),
                    (msg.label("cost_final_run"), fmt.usd(cost["final_run"])),
                    (msg.label("tokens_per_second"), number(plan["time"]["tokens_per_second"], 0, msg.lang))])
    configs = plan.get("recommendations", {}).get("configs", [])[:3]
    if configs:
        lines.append(msg.text("table.cheapest"))
        lines += _rows([(c["id"], f"{fmt.usd(c['cost_usd'])} · {fmt.hours(c['time_hours'])}")
                        for c in configs])
    lines += _warnings(plan.get("warnings", []), msg, plan.get("config_warnings"))
    lines.append(msg.text("table.more", url=msg.methodology_url()))
    return "\n".join(lines) + "\n"
