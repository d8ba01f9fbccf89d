"""Every family calc accepts is held to the oracle: each ``model_type`` that ``calc.hf_config``
reads has setups in ``benchmarks.oracle_sweep`` and was swept for real
(``validation/oracle_sweep_summary.json`` lists it under ``model_types``).

Needs no torch: it reads the sweep's setups and the summary its last run wrote.
"""

from __future__ import annotations

import json

import pytest

from benchmarks import oracle_sweep as sweep
from calc.hf_config import MODEL_TYPES
from conftest import REPO_ROOT

SUMMARY = REPO_ROOT / "validation" / "oracle_sweep_summary.json"


def swept_as(model_type: str) -> str:
    """The model_type a family is swept under (Falcon's remote-code names: falcon)."""
    return sweep.FAMILY_ALIASES.get(model_type, model_type)


def missing(readable: tuple[str, ...], swept: list[str]) -> list[str]:
    return sorted(t for t in readable if swept_as(t) not in swept)


def test_every_readable_model_type_has_sweep_setups():
    in_setups = sorted({sweep.model_type_of(s) for s in sweep.setups()})
    assert missing(MODEL_TYPES, in_setups) == []


def test_every_readable_model_type_was_swept():
    summary = json.loads(SUMMARY.read_text(encoding="utf-8"))
    assert missing(MODEL_TYPES, summary["model_types"]) == [], (
        "run python -m benchmarks.oracle_sweep to sweep the families calc now reads"
    )


def test_a_family_missing_from_the_summary_is_caught():
    summary = json.loads(SUMMARY.read_text(encoding="utf-8"))
    assert missing(MODEL_TYPES + ("qwen9_next",), summary["model_types"]) == ["qwen9_next"]
    swept = [t for t in summary["model_types"] if t != "gpt_oss"]
    assert missing(MODEL_TYPES, swept) == ["gpt_oss"]
    # an alias is covered by its family, and only by it
    assert missing(("RefinedWeb",), ["falcon"]) == []
    assert missing(("RefinedWeb",), ["llama"]) == ["RefinedWeb"]


@pytest.mark.parametrize("family", sorted(sweep.ACCEPTED_FAMILIES))
def test_accepted_family_setups_cover_the_methods(family):
    """Full, LoRA (all-linear and attention only), QLoRA and checkpointing for every family;
    eager attention on top of SDPA where the family has both."""
    ids = {s["id"].split("/", 1)[1] for s in sweep.setups() if s["id"].split("/")[0] == family}
    assert {
        "full",
        "full-ckpt",
        "lora-r16-all-linear",
        "lora-r8-attn",
        "lora-ckpt",
        "qlora-r16",
        "qlora-ckpt",
    } <= ids
    attention = {
        s["request"]["attention"] for s in sweep.setups() if s["id"].split("/")[0] == family
    }
    assert attention == ({"eager"} if family in sweep.EAGER_ONLY else {"sdpa", "eager"})


def test_every_profile_is_swept_or_says_why_not():
    # each library profile runs its own code path in the sweep, or names why the oracle cannot
    from calc.frameworks import ORACLE_UNTRACED, ORACLE_UNTRACED_KEYS, PROFILES, Framework
    from tools.oracle import litgpt_stack, torchtune_stack
    from tools.oracle.run import HANDLED_KEYS, TRACED_FRAMEWORKS

    # profiles traced through their own library's modules, with the keys that code decides
    stacks = {
        "torchtune": (torchtune_stack.TRACED_KEYS, torchtune_stack.UNTRACED_KEYS),
        "litgpt": (litgpt_stack.TRACED_KEYS, litgpt_stack.UNTRACED_KEYS),
    }
    swept = {s["request"]["framework"] for s in sweep.setups()}
    for fw in Framework:
        if fw in ORACLE_UNTRACED:
            assert fw.value not in swept and len(ORACLE_UNTRACED[fw]) > 30, fw
            continue
        assert fw.value in swept, fw
        handled, untraced = stacks.get(fw.value, (HANDLED_KEYS, {}))
        assert fw.value in stacks or fw.value in TRACED_FRAMEWORKS, fw
        # every key the profile sets is traced, or the oracle says why not
        for key in PROFILES[fw]:
            assert (
                key in handled
                or key in sweep.SWEEP_HANDLED_KEYS
                or key in ORACLE_UNTRACED_KEYS
                or key in untraced
            ), (fw, key)


def test_every_stack_profile_is_recorded_in_the_summary():
    # a profile traced in a venv of its own has its figures and versions under stacks
    summary = json.loads(SUMMARY.read_text(encoding="utf-8"))
    for fw, stack in sweep.STACKS.items():
        entry = summary["stacks"][stack]
        assert fw in entry["profiles"] and entry["versions"]["torch"], fw
        assert entry["setups"] == len(sweep.stack_setups(stack)), stack


FAMILY_TARGET = 0.95
"""Share of a family's setups whose allocated peak is within 2 % of the oracle's."""


def families_below(per_family: dict, target: float = FAMILY_TARGET) -> dict[str, str]:
    """The families whose share of setups within 2 % is under ``target``, with their figures."""
    return {
        family: f"{f['within_2pct']}/{f['setups']} within 2 %, worst {f['worst_id']} "
        f"{100 * f['worst_error']:+.2f} %"
        for family, f in per_family.items()
        if not f["setups"] or f["within_2pct"] < target * f["setups"]
    }


def test_every_family_has_95_percent_of_its_setups_within_2_percent():
    summary = json.loads(SUMMARY.read_text(encoding="utf-8"))
    per_family = summary["per_family"]
    assert sorted(per_family) == summary["families"]
    assert sum(f["setups"] for f in per_family.values()) == summary["setups"]
    assert sum(f["within_2pct"] for f in per_family.values()) == summary["within_2pct"]
    assert families_below(per_family) == {}


def test_a_family_below_95_percent_is_caught():
    # 19 of 20 is 95 %; 18 of 20 is not; a family with no compared setup is not held either
    def fam(n, ok):
        return {"setups": n, "within_2pct": ok, "worst_id": "x/y", "worst_error": -0.03}

    below = families_below({"a": fam(20, 19), "b": fam(20, 18), "c": fam(0, 0), "d": fam(9, 9)})
    assert sorted(below) == ["b", "c"]
    assert below["b"] == "18/20 within 2 %, worst x/y -3.00 %"


@pytest.mark.parametrize("lang", ["es", "en"])
def test_the_methodology_shows_each_family_s_figures(lang):
    """The per-family table: a row per swept family, each figure resolved from that family's
    entry of the summary as the page tests read it."""
    import html
    import re

    from macros.oracle_sweep import oracle_sweep_families
    from page_numbers import expected_raw, response_for

    summary = json.loads(SUMMARY.read_text(encoding="utf-8"))
    table = oracle_sweep_families(lang)
    rows = re.findall(r'<tr data-source="([^"]+)">(.*?)</tr>', table)
    assert [json.loads(html.unescape(src))["family"] for src, _ in rows] == summary["families"]
    for src, cells in rows:
        response, request = response_for(json.loads(html.unescape(src)))
        family = json.loads(html.unescape(src))["family"]
        assert response == summary["per_family"][family]
        for value, field in re.findall(r'data-value="([^"]+)"[^>]*data-field="([^"]+)"', cells):
            expected = expected_raw(html.unescape(field), response, request)
            assert float(value) == pytest.approx(expected, abs=1e-9), (family, field)


def test_each_recorded_preset_check_holds_calc_s_figure_of_today():
    """A preset's full-size check records calc's peak beside the oracle's: a change to calc that
    moves a preset's figure leaves a stale record, which this catches (trace it again with
    ``python -m benchmarks.oracle_sweep --presets --only <id>``)."""
    from calc import memory

    summary = json.loads(SUMMARY.read_text(encoding="utf-8"))
    setups = {s["id"]: s for s in sweep.preset_setups()}
    stale = {
        pid: (
            rec["calc_peak"],
            memory.estimate_dict(setups[pid]["request"])["peak_allocated_bytes"],
        )
        for pid, rec in summary["presets"].items()
    }
    assert {p: v for p, v in stale.items() if v[0] != v[1]} == {}
    assert all(abs(rec["error"]) <= 0.03 for rec in summary["presets"].values())
