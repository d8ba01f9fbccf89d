"""Methodology page: calc against the fake-tensor oracle.

Rendered from ``validation/oracle_sweep_summary.json``, which ``python -m
benchmarks.oracle_sweep`` writes, so the site build never needs torch."""

from __future__ import annotations

import json
from pathlib import Path

from .site import bind_all
from .tables import SOURCE, Col, render

SUMMARY_PATH = Path(__file__).resolve().parents[1] / "validation" / "oracle_sweep_summary.json"


def load_summary() -> dict:
    return json.loads(SUMMARY_PATH.read_text(encoding="utf-8"))


def oracle_sweep_summary(lang: str) -> str:
    """Setups, share within 2 % and 5 %, median and worst error of the allocated peak: all
    setups, then each method (full, LoRA, QLoRA)."""
    s = load_summary()
    # labels of the measured-run validation's groups: "fine-tuning, all", "fine-tuning, LoRA"...
    groups = [("fine-tune", s, {})] + [
        (f"fine-tune/{m}", g, {"group": m}) for m, g in s.get("groups", {}).items()
    ]
    rows = [
        {
            "group": name,
            "setups": g["setups"],
            "within_2pct": g["within_2pct"],
            "share": 100 * g["within_2pct"] / g["setups"],
            "within_5pct": g["within_5pct"],
            "median": 100 * g["median_abs_error"],
            "worst": 100 * g["worst_error"],
            "phases": g["phases_within_5pct"],
            SOURCE: {"command": "oracle_sweep_summary", **extra},
        }
        for name, g, extra in groups
    ]
    cols = [
        Col("group", "label.method", "code", row_header=True, options="group"),
        Col("setups", "col.setups", "int"),
        Col("within_2pct", "col.within_2pct", "int", check="within_2pct"),
        Col("share", "col.within_2pct_share", "pct", check="pct:within_2pct/setups"),
        Col("within_5pct", "col.within_5pct", "int", check="within_5pct"),
        Col("median", "col.median_error", "pct", check="pct:median_abs_error"),
        Col("worst", "col.worst_error", "pct", check="pct:worst_error"),
        Col("phases", "col.phases_within_5pct", "int", check="phases_within_5pct"),
    ]
    return render(rows, cols, lang, "oracle_sweep_summary", "caption.oracle_sweep_summary")


def oracle_sweep_families(lang: str) -> str:
    """Each swept family's setups, share within 2 % and 5 % and worst error of the allocated
    peak (``per_family``; the target holds per family: 95 % of its setups within 2 %)."""
    s = load_summary()
    rows = [
        {
            "family": family,
            "setups": f["setups"],
            "within_2pct": f["within_2pct"],
            "share": 100 * f["within_2pct"] / f["setups"],
            "within_5pct": f["within_5pct"],
            "worst": 100 * f["worst_error"],
            SOURCE: {"command": "oracle_sweep_summary", "family": family},
        }
        for family, f in s["per_family"].items()
    ]
    cols = [
        Col("family", "col.family", "text", row_header=True),
        Col("setups", "col.setups", "int"),
        Col("within_2pct", "col.within_2pct", "int", check="within_2pct"),
        Col("share", "col.within_2pct_share", "pct", check="pct:within_2pct/setups"),
        Col("within_5pct", "col.within_5pct", "int", check="within_5pct"),
        Col("worst", "col.worst_error", "pct", check="pct:worst_error"),
    ]
    return render(rows, cols, lang, "oracle_sweep_families", "caption.oracle_sweep_families")


def oracle_sweep_misses(lang: str) -> str:
    """Every setup whose allocated peak is beyond 2 %, with its signed error."""
    s = load_summary()
    rows = [
        {
            "setup": m["id"],
            "error": 100 * m["error"],
            SOURCE: {"command": "oracle_sweep_miss", "id": m["id"]},
        }
        for m in s["beyond_2pct"]
    ]
    if not rows:
        return ""
    cols = [
        Col("setup", "col.setup", "text", row_header=True),
        Col("error", "col.error_pct", "pct", check="pct:error"),
    ]
    return render(rows, cols, lang, "oracle_sweep_misses", "caption.oracle_sweep_misses")


def oracle_sweep_stacks(lang: str) -> str:
    """The profiles traced in a venv of their own (transformers 4, torchtune, LitGPT): per
    profile, the libraries it ran with, its setups, those within 2 % and 5 %, its worst error."""
    s = load_summary()
    rows = [
        {
            "profile": profile,
            "versions": ", ".join(f"{lib} {v}" for lib, v in stack["versions"].items()),
            "setups": g["setups"],
            "within_2pct": g["within_2pct"],
            "within_5pct": g["within_5pct"],
            "worst": 100 * g["worst_error"],
            SOURCE: {"command": "oracle_sweep_stack", "stack": name, "profile": profile},
        }
        for name, stack in s.get("stacks", {}).items()
        for profile, g in stack["profiles"].items()
    ]
    if not rows:
        return ""
    cols = [
        Col("profile", "label.framework", "code", row_header=True, options="framework"),
        Col("versions", "col.library_versions", "text"),
        Col("setups", "col.setups", "int"),
        Col("within_2pct", "col.within_2pct", "int", check="within_2pct"),
        Col("within_5pct", "col.within_5pct", "int", check="within_5pct"),
        Col("worst", "col.worst_error", "pct", check="pct:worst_error"),
    ]
    return render(rows, cols, lang, "oracle_sweep_stacks", "caption.oracle_sweep_stacks")


MACROS = (
    "oracle_sweep_summary",
    "oracle_sweep_families",
    "oracle_sweep_misses",
    "oracle_sweep_stacks",
)


def register(env) -> None:
    bind_all(env, MACROS, globals())
