"""Methodology page: leave-one-source-out errors of the memory model, the calibrated bands of
its ranges and how well they are calibrated. The figures come from
``accuracy/memory_loso.py`` (what ``python -m benchmarks.validate_memory`` prints); each
cell names its source so the site tests recompute it."""

from __future__ import annotations

import functools

from . import labels
from .site import bind_all
from .tables import SOURCE, Col, inline, render

HEADLINE_GROUPS = ("measured", "measured_unfitted", "metric_stated")


@functools.lru_cache(maxsize=1)
def _loso():
    from accuracy import memory_loso as lm

    return lm.run()


def report() -> dict:
    from accuracy import memory_loso as lm

    return lm.report(_loso())


def bands() -> dict:
    from accuracy import memory_loso as lm

    return {
        f"{m}/{k}": {"low": lo, "high": hi}
        for (m, k), (lo, hi) in lm.bands(_loso().held_out).items()
    }


def coverage() -> dict:
    from accuracy import memory_loso as lm

    return {
        g: {"inside": a, "count": n, "share": a / n}
        for g, (a, n) in lm.range_coverage(_loso()).items()
    }


def group_label(gid: str, lang: str) -> str:
    """A group id (``measured``, ``method:LoRA``, ``source:ZeRO paper``) in words."""
    if gid in HEADLINE_GROUPS:
        return labels.text("loso.group." + gid, lang)
    kind, value = gid.split(":", 1)
    if kind == "method":
        shown = labels.method_label(value, lang)
    elif kind == "framework":
        shown = labels.option("framework", value, lang)
    elif kind == "metric":
        shown = labels.option("metric", value, lang)
    else:
        shown = value  # a publication's name
    return f"{labels.text('loso.kind.' + kind, lang)}: {shown}"


def validation_loso_table(lang: str) -> str:
    """In-sample and leave-one-source-out error per group."""
    rows = []
    for gid, f in report().items():
        row = {
            "group": group_label(gid, lang),
            "count": f["count"],
            SOURCE: {"command": "validation_memory_loso", "group": gid},
        }
        for key in ("in_median", "in_p90", "in_max", "loso_median", "loso_p90", "loso_max"):
            row[key] = f[key] * 100
        rows.append(row)
    cols = [Col("group", "col.group", "text", row_header=True), Col("count", "col.rows", "int")]
    cols += [
        Col(k, "col." + k, "pct", check="pct:" + k)
        for k in ("in_median", "in_p90", "in_max", "loso_median", "loso_p90", "loso_max")
    ]
    return render(rows, cols, lang, "validation_loso", "caption.validation_loso")


def validation_bands_table(lang: str) -> str:
    """The calibrated band per method and metric, and the held-out coverage per method."""
    cov = coverage()
    rows = []
    for key, b in bands().items():
        method, metric = key.split("/")
        c = cov.get(method, {"share": float("nan")})
        rows.append(
            {
                "method": labels.option("method", method, lang),
                "metric": metric,
                "low": b["low"] * 100,
                "high": b["high"] * 100,
                "coverage": c["share"] * 100,
                SOURCE: {"command": "validation_memory_bands", "key": key},
            }
        )
    cols = [
        Col("method", "col.method", "text", row_header=True),
        Col("metric", "col.metric", "code"),
        Col("low", "col.band_low", "pct", check="pct:low"),
        Col("high", "col.band_high", "pct", check="pct:high"),
        Col("coverage", "col.coverage", "pct", check="pct:coverage"),
    ]
    return render(rows, cols, lang, "validation_bands", "caption.validation_bands")


def validation_loso_figure(lang: str, stat: str, group: str = "measured", fit: str = "loso") -> str:
    """One figure in running text: ``stat`` (median, p90, max) of ``group`` in-sample
    (``fit="in"``) or held out (``"loso"``), in percent."""
    if stat not in ("median", "p90", "max") or fit not in ("in", "loso"):
        raise ValueError(f"unknown statistic {fit}_{stat}")
    key = f"{fit}_{stat}"
    return inline(
        lang,
        report()[group][key] * 100,
        "pct",
        "pct:" + key,
        {"command": "validation_memory_loso", "group": group},
    )


MEMORY_TARGETS = {"median": 0.08, "p90": 0.18, "max": 0.35}
"""The targets for the held-out error on measured rows, as fractions."""


def targets_sentence(lang: str, figures: dict[str, float], targets: dict[str, float]) -> str:
    """Which ``targets`` (statistic -> largest accepted error) ``figures`` (same keys) miss, in
    words; every statistic is named in the order of ``targets``."""
    missed = [
        labels.text("validation.stat." + stat, lang)
        for stat, target in targets.items()
        if figures[stat] > target
    ]
    if not missed:
        return labels.text("validation.targets_all_met", lang)
    if len(missed) == 1:
        return labels.text("validation.targets_missed_one", lang).format(stats=missed[0])
    stats = _listed(missed, lang)
    return labels.text("validation.targets_missed_many", lang).format(stats=stats)


def validation_loso_targets(lang: str, group: str = "measured") -> str:
    """Which of :data:`MEMORY_TARGETS` the held-out memory figures miss, in words."""
    figures = report()[group]
    return targets_sentence(lang, {k: figures["loso_" + k] for k in MEMORY_TARGETS}, MEMORY_TARGETS)


def validation_coverage_figure(lang: str, group: str = "all") -> str:
    """Share of held-out rows inside the band computed without their source, in percent."""
    return inline(
        lang,
        coverage()[group]["share"] * 100,
        "pct",
        "pct:share",
        {"command": "validation_memory_coverage", "group": group},
    )


FORMER_DEFAULT_MARGIN = 0.25
"""The default ``safety_margin`` before the verdict compared calibrated ranges (calc/fields.py
up to commit 4f88c0b): the middle of the seed's "add 20-30 %" advice, a fraction added to the
point estimate of every method alike. The validation page states it beside the range that
replaced it."""


def _listed(items: list[str], lang: str) -> str:
    """``a, b and c`` in the page's language."""
    return ", ".join(items[:-1]) + labels.text("validation.and", lang) + items[-1]


def range_above_point(method: str) -> float:
    """How far the upper end of ``method``'s reserved range lies above the point estimate, as a
    fraction: ``1 / (1 + low) - 1`` with ``low`` the band's lower held-out error (a prediction
    ``P`` corresponds to a measurement ``P / (1 + e)``)."""
    return 1 / (1 + bands()[method + "/reserved"]["low"]) - 1


def validation_margin_history(lang: str) -> str:
    """The default margin the range replaced, and the upper end of the range above the point
    estimate per method, in words."""
    former = inline(
        lang,
        FORMER_DEFAULT_MARGIN * 100,
        "pct",
        "pct:value",
        {"command": "constant", "module": __name__, "name": "FORMER_DEFAULT_MARGIN"},
    )
    parts = [
        labels.text("validation.margin_history_method", lang).format(
            figure=inline(
                lang,
                range_above_point(method) * 100,
                "pct",
                "pct:value",
                {"command": "validation_memory_above_point", "method": method},
            ),
            method=labels.option("method", method, lang),
        )
        for method in ("full", "lora", "qlora")
    ]
    figures = _listed(parts, lang)
    return labels.text("validation.margin_history", lang).format(former=former, figures=figures)


def framework_profiles_table(lang: str) -> str:
    """Every training-library profile: the request keys it sets, their values and where each
    comes from (``calc.frameworks``)."""
    from calc.frameworks import PROFILES, SOURCES

    rows = []
    for fw, entries in PROFILES.items():
        for key, value in entries.items():
            shown = (
                labels.yes_no(value, lang)
                if isinstance(value, bool)
                else str(value).replace(".", ",")
                if lang == "es"
                else str(value)
            )
            rows.append(
                {
                    "framework": labels.option("framework", fw.value, lang),
                    "key": key,
                    "value": shown,
                    "source": SOURCES[fw][key],
                    SOURCE: {"command": "framework_profile", "framework": fw.value, "key": key},
                }
            )
    cols = [
        Col("framework", "col.framework", "text", row_header=True),
        Col("key", "col.request_key", "text"),
        Col("value", "col.value", "text"),
        # the profiles' sources are quoted as recorded (calc.frameworks.SOURCES), in English
        Col("source", "col.source", "text", recorded_in="en"),
    ]
    return render(rows, cols, lang, "framework_profiles", "caption.framework_profiles")


MACROS = (
    "framework_profiles_table",
    "validation_loso_table",
    "validation_bands_table",
    "validation_loso_figure",
    "validation_coverage_figure",
    "validation_loso_targets",
    "validation_margin_history",
)


def register(env) -> None:
    bind_all(env, MACROS, globals())
