"""accuracy.fit_boundaries: the verdict against published fit boundaries."""

from __future__ import annotations

import json

import pytest

from accuracy import fit_boundaries as fb


@pytest.mark.parametrize(
    "outcome, at, above, expected",
    [
        ("max_fits", "fits", "borderline", True),
        ("max_fits", "borderline", "does_not_fit", True),
        ("max_fits", "fits", "fits", False),  # 25 % more would fit: the boundary is missed
        ("max_fits", "does_not_fit", "does_not_fit", False),
        ("fits", "borderline", "", True),
        ("fits", "does_not_fit", "", False),
        ("oom", "borderline", "", True),
        ("oom", "fits", "", False),
    ],
)
def test_agreement_rules(outcome, at, above, expected):
    assert fb.agrees(outcome, at, above) is expected


def test_every_row_was_judged_at_first_contact():
    rows = fb.load()
    assert len(rows) >= 19
    for row in rows:
        assert len(row["judged_at_commit"]) == 40
        assert row["first_contact_agrees"] in ("yes", "no")
        assert row["first_contact_verdict"] in ("fits", "borderline", "does_not_fit")


def test_figures_count_today_s_verdicts():
    rows = fb.load()
    figures = fb.figures()
    today = [fb.judge_row(r) for r in rows]
    assert figures["rows"] == len(rows)
    assert figures["agree"] == sum(j.agrees for j in today)
    assert figures["first_contact_rows"] == len(rows)
    assert 0 <= figures["median"] <= figures["p90"]


def test_stacks_run_today_s_verdict_under_the_source_s_stack_only():
    """``fit_boundaries_stacks.csv`` maps the Hugging Face + FA2 columns to the transformers 4
    generation with TRL's prepare_model_for_kbit_training: today's request gets that framework
    and the behaviour keys it does not state, the recorded ``calc_request`` stays as written."""
    rows = {r["id"]: r for r in fb.load()}
    stacks = fb.stacks()
    hf = rows["ub-8b-hf-80"]
    assert stacks[hf["source_section"]] == ("hf-trainer-4", {"qlora_prepare_kbit": True})
    recorded = json.loads(hf["calc_request"])
    today = fb.row_request(hf)
    assert recorded["framework"] == "hf-trainer" and "qlora_prepare_kbit" not in recorded
    assert today == {**recorded, "framework": "hf-trainer-4", "qlora_prepare_kbit": True}
    # a key the request states stays as stated
    stated = {**hf, "calc_request": json.dumps({**recorded, "qlora_prepare_kbit": False})}
    assert fb.row_request(stated)["qlora_prepare_kbit"] is False
    # a source without a mapped stack runs as recorded
    unsloth = rows["ub-8b-unsloth-80"]
    assert unsloth["source_section"] not in stacks
    assert fb.row_request(unsloth) == json.loads(unsloth["calc_request"])
    # every mapped section names rows of the CSV and a profile calc has
    from calc.frameworks import Framework

    sections = {r["source_section"] for r in rows.values()}
    for section, (framework, _) in stacks.items():
        assert section in sections
        Framework(framework)


def test_trl_0_12_notebook_trains_its_embedding_copies_in_bf16():
    """The 2025 notebook's single-L4 QLoRA runs (TRL 0.12.1, hf-trainer-4 with kbit
    preparation, embed_tokens and lm_head trained through modules_to_save) completed: with
    TRL's cast of the prepared embedding and output layer back to bf16 calc no longer calls
    them out of memory; with the copies in the fp32 of kbit preparation it does."""
    from calc.request import parse_estimate_request

    rows = {r["id"]: r for r in fb.load()}
    row = rows["p25-8b-1xl4-b1"]
    request = fb.row_request(row)
    assert parse_estimate_request(request).qlora_embeddings_recast_bf16 is True
    card, n = fb.memory_bytes(row), int(row["seq_len"])
    assert fb.verdict(request, n, card) != "does_not_fit"
    fp32_copies = {**request, "qlora_embeddings_recast_bf16": False}
    assert fb.verdict(fp32_copies, n, card) == "does_not_fit"
