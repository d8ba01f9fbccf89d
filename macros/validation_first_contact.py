"""Methodology page: first contact, calc's error on measurement sources it had never seen,
recorded before any change (``accuracy/first_contact.py``, ``validation/first_contact_peaks.csv``).
Every figure is read from the recorded columns, never typed; each cell names its source so the
site tests recompute it."""

from __future__ import annotations

import functools

from . import labels
from .site import bind_all
from .tables import SOURCE, Col, inline, render

STATS = ("median", "p90", "max", "median_signed")


@functools.lru_cache(maxsize=1)
def summary() -> dict:
    """:func:`accuracy.first_contact.summary`: per source and ``all``."""
    from accuracy import first_contact as fc

    return fc.summary()


def source_label(source: str, lang: str) -> str:
    """A source's name as the page shows it (the CSV's ``source``; ``all`` in words)."""
    from accuracy import first_contact as fc

    if source == fc.ALL:
        return labels.text("loso.group.first_contact_all", lang)
    return source.replace("github.com/", "")


def validation_first_contact_table(lang: str) -> str:
    """Per source: rows judged, rows not covered, median / p90 / max absolute and median signed
    first-contact error."""
    rows = []
    for source, f in summary().items():
        row = {
            "source": source_label(source, lang),
            "count": f["count"],
            "not_covered": f["not_covered"],
            SOURCE: {"command": "validation_memory_first_contact", "source": source},
        }
        row |= {"fc_" + k: f[k] * 100 for k in STATS}
        rows.append(row)
    cols = [
        Col("source", "col.source", "text", row_header=True),
        Col("count", "col.rows", "int"),
        Col("not_covered", "col.rows_not_covered", "int"),
    ]
    cols += [Col("fc_" + k, "col.fc_" + k, "pct", check="pct:" + k) for k in STATS]
    return render(rows, cols, lang, "validation_first_contact", "caption.validation_first_contact")


def validation_first_contact_figure(lang: str, stat: str, source: str = "all") -> str:
    """One first-contact figure in running text: ``stat`` (median, p90, max, median_signed) of
    ``source`` (a CSV ``source``, or ``all``), in percent; ``count`` gives the rows judged and
    ``median_of_sources`` (``all`` only) the median of the sources' medians."""
    if stat == "count":
        return inline(
            lang,
            summary()[source]["count"],
            "int",
            "count",
            {"command": "validation_memory_first_contact", "source": source},
        )
    if stat not in (*STATS, "median_of_sources"):
        raise ValueError(f"unknown statistic {stat}")
    return inline(
        lang,
        summary()[source][stat] * 100,
        "pct",
        "pct:" + stat,
        {"command": "validation_memory_first_contact", "source": source},
    )


def validation_first_contact_commit(lang: str) -> str:
    """The calc commit(s) the rows were judged at, abbreviated (from the CSV)."""
    from accuracy import first_contact as fc

    return ", ".join(f"`{c}`" for c in sorted({x.commit[:10] for x in fc.first_contacts()}))


@functools.lru_cache(maxsize=1)
def today() -> dict:
    """:func:`accuracy.first_contact.now_beside_first`: today's figures on the recorded rows,
    each source under its own stack's profile where one exists."""
    from accuracy import first_contact as fc

    return fc.now_beside_first()


def validation_first_contact_today(lang: str) -> str:
    """The first-contact sources judged again today, each under the profile of its own stack
    where ``calc.frameworks`` has one (``validation/first_contact_stacks.csv``): a note and a
    table of the recorded and today's median and p90."""
    from accuracy import first_contact as fc
    from calc_view.html import el, to_html

    stacks = fc.stacks()
    rows = []
    for source, f in summary().items():
        now = today()[source]
        framework = stacks.get(source)
        row = {
            "source": source_label(source, lang),
            "framework": labels.option("framework", framework, lang) if framework else "-",
            "fc_median": f["median"] * 100,
            "fc_p90": f["p90"] * 100,
            "today_median": now["median"] * 100,
            "today_p90": now["p90"] * 100,
            SOURCE: {"command": "validation_memory_first_contact_today", "source": source},
        }
        rows.append(row)
    cols = [
        Col("source", "col.source", "text", row_header=True),
        Col("framework", "col.framework_today", "text"),
        Col("fc_median", "col.fc_median", "pct", check="pct:median"),
        Col("fc_p90", "col.fc_p90", "pct", check="pct:p90"),
        Col("today_median", "col.fc_today_median", "pct", check="pct:today_median"),
        Col("today_p90", "col.fc_today_p90", "pct", check="pct:today_p90"),
    ]
    note = to_html(el("p", {}, labels.text("note.first_contact_today", lang)))
    table = render(
        rows, cols, lang, "validation_first_contact_today", "caption.validation_first_contact_today"
    )
    return note + table


MACROS = (
    "validation_first_contact_today",
    "validation_first_contact_table",
    "validation_first_contact_figure",
    "validation_first_contact_commit",
)


def register(env) -> None:
    bind_all(env, MACROS, globals())
