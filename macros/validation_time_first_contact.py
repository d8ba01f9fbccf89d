"""Methodology page: the time model's first contact (sources of throughput calc had never
compared, judged before any change: ``accuracy/first_contact_throughput.py``,
``validation/first_contact_throughput.csv``) beside today's figures on the same rows and the
leave-one-source-out headline, and a line for every fitted constant of the time model that rests
on one source. One macro renders the section in either language; every word comes from the
message catalogue and every figure is read, never typed (each names its source so the site tests
recompute it)."""

from __future__ import annotations

import functools

from calc.numfmt import format_shortest

from . import labels
from .site import bind_all
from .tables import NO_COVERED_ROW, SOURCE, Col, inline, render

STATS = ("median", "p90", "max", "median_signed")
COMMAND = "validation_time_first_contact"


@functools.lru_cache(maxsize=1)
def summary() -> dict:
    """Per source and ``all``: the recorded first-contact figures
    (:func:`accuracy.first_contact_throughput.summary`) with today's on the same rows under
    ``today``."""
    from accuracy import first_contact_throughput as fc

    today = fc.now_beside_first()
    return {k: {**v, "today": today[k]} for k, v in fc.summary().items()}


def _source_label(source: str, lang: str) -> str:
    from accuracy import first_contact_throughput as fc

    if source == fc.ALL:
        return labels.text("loso.group.first_contact_all", lang)
    if source == fc.AFTER_FIXES:
        return labels.text("loso.group.first_contact_after_fixes", lang)
    return source.replace("github.com/", "")


def _pct(lang: str, value: float, field: str, source: str) -> str:
    return inline(lang, value * 100, "pct", field, {"command": COMMAND, "source": source})


def _table(lang: str) -> str:
    rows = []
    for source, f in summary().items():
        # a source whose every row is recorded not covered has no figure: said in words
        covered = f["count"] > 0
        row = {
            "source": _source_label(source, lang),
            "count": f["count"],
            "not_covered": f["not_covered"],
            "today_median": f["today"]["median"] * 100 if covered else NO_COVERED_ROW,
            "today_p90": f["today"]["p90"] * 100 if covered else NO_COVERED_ROW,
            SOURCE: {"command": COMMAND, "source": source},
        }
        row |= {"fc_" + k: f[k] * 100 if covered else NO_COVERED_ROW for k in STATS}
        rows.append(row)
    cols = [
        Col("source", "col.source", "text", row_header=True),
        Col("count", "col.rows", "int"),
        Col("not_covered", "col.rows_not_covered", "int"),
    ]
    cols += [Col("fc_" + k, "col.fc_" + k, "pct", check="pct:" + k) for k in STATS]
    cols += [
        Col("today_median", "col.today_median", "pct", check="pct:today.median"),
        Col("today_p90", "col.today_p90", "pct", check="pct:today.p90"),
    ]
    return render(
        rows, cols, lang, "validation_time_first_contact", "caption.validation_time_first_contact"
    )


CARD_COMMAND = "validation_time_first_contact_card"

TODAY_COLS = (
    Col("median_signed", "col.today_median_signed", "pct", check="pct:median_signed"),
    Col("median", "col.today_median", "pct", check="pct:median"),
)
"""Today's signed and absolute median error, in the tables of today's figures on groups of
the recorded rows (per card, per sharding and hidden communication)."""


def _lean_table(rows: list[dict], head: list[Col], lang: str, table: str) -> str:
    """A table of groups' leans: the group's own columns (``head``), then its rows, its
    sources and today's medians; ``table`` names it and its caption (``caption.`` + ``table``)."""
    cols = [*head, Col("count", "col.rows", "int"), Col("sources", "col.sources", "int")]
    return render(rows, [*cols, *TODAY_COLS], lang, table, "caption." + table)


def _lean_cells(f: dict, source: dict) -> dict:
    """A group's row count and today's signed and absolute medians (in %) as table cells, with
    the cells' source (what the site tests recompute)."""
    return {
        "count": f["count"],
        "median_signed": f["median_signed"] * 100,
        "median": f["median"] * 100,
        SOURCE: source,
    }


@functools.lru_cache(maxsize=1)
def cards() -> dict:
    """Today's figures on the recorded rows per card (:func:`accuracy.first_contact_throughput.by_card`)."""
    from accuracy import first_contact_throughput as fc

    return fc.by_card()


def _card_table(lang: str) -> str:
    """Today's error on the recorded rows, per card: where a card's rows lean one way, the
    estimate for that card leans the same way, on the rows and sources shown."""
    from calc.gpus import get_gpu

    rows = [
        {
            "gpu": get_gpu(card).name,
            "sources": f["sources"],
            **_lean_cells(f, {"command": CARD_COMMAND, "card": card}),
        }
        for card, f in cards().items()
    ]
    head = [Col("gpu", "col.gpu", "text", row_header=True)]
    return _lean_table(rows, head, lang, "validation_time_first_contact_cards")


ATTENTION_COMMAND = "validation_time_first_contact_attention"


@functools.lru_cache(maxsize=1)
def attention() -> dict:
    """Today's figures on the recorded rows on CUDA cards per attention kernel and head width
    (:func:`accuracy.first_contact_throughput.by_attention`)."""
    from accuracy import first_contact_throughput as fc

    return fc.by_attention()


def _attention_table(lang: str) -> str:
    """Today's error on the recorded rows per kernel calc reads PyTorch dispatching and per
    head width (at most, or above, FlashAttention-2's widest published panel)."""
    rows = []
    for group, f in attention().items():
        backend, width = group.split(" ")
        rows.append(
            {
                "kernel": labels.text("validation.attention_kernel." + backend, lang),
                "width": width.replace("<=", "≤ ").replace(">", "> "),
                "sources": f["sources"],
                **_lean_cells(f, {"command": ATTENTION_COMMAND, "group": group}),
            }
        )
    head = [
        Col("kernel", "col.attention_kernel", "text", row_header=True),
        Col("width", "col.head_width", "text"),
    ]
    return _lean_table(rows, head, lang, "validation_time_first_contact_attention")


MULTI_GPU_COMMAND = "validation_time_multi_gpu"


@functools.lru_cache(maxsize=1)
def multi_gpu() -> dict:
    """Today's figures on the recorded multi-GPU rows of one server per sharding and share of
    hidden communication, the one-GPU rows, and the scaling pairs under ``pairs``
    (:func:`accuracy.first_contact_throughput.multi_gpu_lean`, ``scaling_pairs``)."""
    from accuracy import first_contact_throughput as fc

    steps = fc.today_steps()
    out = dict(fc.multi_gpu_lean(steps))
    out["pairs"] = fc.stats([p["error"] for p in fc.scaling_pairs(steps)])
    return out


def _multi_gpu_table(lang: str) -> str:
    """The multi-GPU rows today by sharding and hidden communication, then the one-GPU rows."""
    rows = []
    for group, f in multi_gpu().items():
        if group == "pairs":
            continue
        if group == "one_gpu":
            sharding, share = labels.text("validation.time_multi_gpu_one_gpu", lang), "–"
        else:
            code, share = group.split(" ")
            sharding = labels.option("sharding", code, lang)
            share = _share_range(share, lang)
        rows.append(
            {
                "sharding": sharding,
                "share": share,
                **_lean_cells(f, {"command": MULTI_GPU_COMMAND, "group": group}),
            }
        )
    cols = [
        Col("sharding", "col.sharding", "text", row_header=True),
        Col("share", "col.hidden_communication", "text"),
        Col("count", "col.rows", "int"),
        *TODAY_COLS,
    ]
    return render(
        rows, cols, lang, "validation_time_multi_gpu", "caption.validation_time_multi_gpu"
    )


def _share_range(label: str, lang: str) -> str:
    """A bin of :data:`accuracy.first_contact_throughput.HIDDEN_BINS` ("0.05-0.2", "0.5+")
    written in ``lang`` ("0,05–0,2", "0,5 o más")."""
    if label.endswith("+"):
        low = format_shortest(float(label[:-1]), lang)
        return labels.text("validation.time_multi_gpu_at_least", lang).format(low=low)
    low, high = (format_shortest(float(x), lang) for x in label.split("-"))
    return f"{low}–{high}"


def multi_gpu_paragraph(lang: str) -> str:
    """What the multi-GPU table shows, with the scaling pairs' figures read in."""
    pairs = multi_gpu()["pairs"]
    source = {"command": MULTI_GPU_COMMAND, "group": "pairs"}
    return labels.text("validation.time_multi_gpu", lang).format(
        pairs=pairs["count"],
        pairs_median=inline(lang, pairs["median_signed"] * 100, "pct", "pct:median_signed", source),
    )


def single_source_lines(lang: str) -> list[str]:
    """One sentence per fitted constant of the time model that rests on a single source."""
    from accuracy import throughput as vt

    out = []
    for name, b in vt.compare()["constant_basis"].items():
        if not b["single_source"]:
            continue
        loso = inline(
            lang,
            b["loso"]["median_abs_pct"],
            "pct",
            "loso" + ".median_abs_pct",  # a response path, not a message id
            {"command": "validation_throughput_fit", "constant": name},
        )
        out.append(
            labels.text("validation.time_single_source", lang).format(
                constant=name, source=b["sources"][0].replace("github.com/", ""), loso=loso
            )
        )
    return out


def validation_time_first_contact_section(lang: str) -> str:
    """The section: heading, what the rows are, the recorded and today's figures beside the
    held-out headline, the recorded figures of the sources added after the model's mends, the
    table per source, and the single-source lines."""
    from accuracy import first_contact_throughput as fc
    from accuracy import throughput as vt

    f = summary()[fc.ALL]
    head = vt.compare()["summary"]["all"]["loso"]
    loso = {
        stat: inline(
            lang,
            head[stat + "_abs_pct"],
            "pct",
            "loso." + stat + "_abs_pct",
            {"command": "validation_throughput_summary", "group": "all"},
        )
        for stat in ("median", "p90")
    }
    commits = ", ".join(f"`{c}`" for c in sorted({x.commit[:10] for x in fc.first_contacts()}))
    text = labels.text("validation.time_first_contact", lang).format(
        count=f["count"],
        commits=commits,
        median=_pct(lang, f["median"], "pct:median", fc.ALL),
        p90=_pct(lang, f["p90"], "pct:p90", fc.ALL),
        today_median=_pct(lang, f["today"]["median"], "pct:today.median", fc.ALL),
        today_p90=_pct(lang, f["today"]["p90"], "pct:today.p90", fc.ALL),
        loso_median=loso["median"],
        loso_p90=loso["p90"],
    )
    late = summary()[fc.AFTER_FIXES]
    after = labels.text("validation.time_first_contact_after_fixes", lang).format(
        commit=fc.FIXES_IN_AT[:10],
        count=late["count"],
        median=_pct(lang, late["median"], "pct:median", fc.AFTER_FIXES),
        p90=_pct(lang, late["p90"], "pct:p90", fc.AFTER_FIXES),
    )
    heading = labels.text("validation.time_first_contact_heading", lang)
    parts = [f"#### {heading} {{ #validation-time-first-contact }}", "", text, "", after, ""]
    parts.append(_table(lang))
    parts += ["", labels.text("validation.time_first_contact_cards", lang), "", _card_table(lang)]
    parts += [
        "",
        labels.text("validation.time_first_contact_attention", lang),
        "",
        _attention_table(lang),
    ]
    parts += ["", multi_gpu_paragraph(lang), "", _multi_gpu_table(lang)]
    lines = single_source_lines(lang)
    if lines:
        parts += ["", *(f"- {line}" for line in lines)]
    return "\n".join(parts)


def time_first_contact_median(lang: str) -> str:
    """The time model's median error on every first-contact row as recorded (sources judged
    before any change): the honest figure for how far an estimate may be off, read where the
    pages argue from it (two significant figures in the recommendation)."""
    from accuracy import first_contact_throughput as fc

    return _pct(lang, summary()[fc.ALL]["median"], "pct:median", fc.ALL)


MACROS = ("validation_time_first_contact_section", "time_first_contact_median")


def register(env) -> None:
    bind_all(env, MACROS, globals())
