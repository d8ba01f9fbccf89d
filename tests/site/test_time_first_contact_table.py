"""The methodology page's table of the time model's first contact, per source: a source whose
every row is recorded not covered has no figure, and its cells say so in words (no build
needed)."""

from __future__ import annotations

import math

import pytest

from macros import labels
from macros import validation_time_first_contact as tfc

NAN_STATS = {k: math.nan for k in ("median", "p90", "max", "median_signed")}


def _fake_summary() -> dict:
    from accuracy import first_contact_throughput as fc

    covered = {"count": 2, "median": 0.1, "p90": 0.2, "max": 0.3, "median_signed": -0.1}
    none = {"count": 0, "not_covered": 5, **NAN_STATS}
    return {
        "github.com/example/covered": {
            **covered,
            "not_covered": 1,
            "today": {**covered, "not_covered": 1},
        },
        "github.com/example/tensor-parallel-only": {**none, "today": dict(none)},
        fc.ALL: {**covered, "not_covered": 6, "today": {**covered, "not_covered": 6}},
        fc.AFTER_FIXES: {**covered, "not_covered": 6, "today": {**covered, "not_covered": 6}},
    }


@pytest.mark.parametrize("lang", ["es", "en"])
def test_a_source_with_no_covered_row_says_so_instead_of_a_number(lang, monkeypatch):
    monkeypatch.setattr(tfc, "summary", _fake_summary)
    html = tfc._table(lang)
    words = labels.text("ui.no_covered_row", lang)
    # its four recorded figures and today's two, as words; the covered source keeps numbers
    assert html.count(f'data-covered="false">{words}<') == 6
    row = html.split(">example/tensor-parallel-only</th>")[1].split("</tr>")[0]
    assert row.count("data-value") == 2  # its row counts only: covered 0, not covered 5
    assert ">nan<" not in html.lower()
    covered = html.split(">example/covered</th>")[1].split("</tr>")[0]
    assert covered.count("data-value") >= 6 and "data-covered" not in covered


@pytest.mark.parametrize("lang", ["es", "en"])
def test_multi_gpu_table_reads_every_group_and_writes_its_range(lang):
    """The validation page's multi-GPU table: one row per group of
    accuracy.first_contact_throughput.multi_gpu_lean, each naming its group as the cell's
    source, the ranges written in the page's language; the paragraph reads the scaling pairs'
    median in."""
    import re

    groups = [g for g in tfc.multi_gpu() if g != "pairs"]
    html = tfc._multi_gpu_table(lang)
    named = re.findall(r"&quot;group&quot;:&quot;([^&]+)&quot;", html)
    assert named == groups
    assert ("0,05–0,2" if lang == "es" else "0.05–0.2") in html
    assert labels.text("validation.time_multi_gpu_one_gpu", lang) in html
    text = tfc.multi_gpu_paragraph(lang)
    pairs = tfc.multi_gpu()["pairs"]
    assert f"{pairs['count']}" in text
    assert '&quot;group&quot;:&quot;pairs&quot;' in text
    assert "{" not in re.sub(r"data-source=\"[^\"]*\"", "", text)  # every field filled


@pytest.mark.parametrize("lang", ["es", "en"])
def test_attention_table_names_each_kernel_in_the_page_s_language(lang):
    """The validation page's table per attention kernel and head width: one row per group of
    accuracy.first_contact_throughput.by_attention, each naming its group as the cell's source,
    the kernel written in the page's language and the width as a bound."""
    import re

    html = tfc._attention_table(lang)
    named = [g.replace("&lt;", "<").replace("&gt;", ">") for g in re.findall(r"&quot;group&quot;:&quot;([^&]+(?:&[lg]t;[^&]+)?)&quot;", html)]
    assert named == list(tfc.attention())
    assert labels.text("validation.attention_kernel.flash", lang) in html
    assert "≤ 128" in html and "&gt; 128" in html
