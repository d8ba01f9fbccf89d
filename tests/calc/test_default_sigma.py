"""DEFAULT_SIGMA is the median spread of the length distributions published in validation/."""

from __future__ import annotations

import csv
import json
import statistics
from pathlib import Path

from calc.lengths import DEFAULT_SIGMA, LengthStats, fit

VALIDATION = Path(__file__).resolve().parents[2] / "validation"

READINGS = {
    # dataset as fed to a run (tokenizer, template): the row that publishes it least clipped
    "AlpacaDataCleaned histogram (LLaMA-1 tokens, Alpaca template)": (
        "variable_length_peaks.csv",
        "vl-u1",
    ),
    "alpaca_data.json in llama-recipes' template": ("variable_length_peaks.csv", "vl-r1"),
    "tatsu-lab/alpaca text field, Llama 3 tokenizer": ("variable_length_peaks.csv", "vl-g1"),
    "PaddleNLP PEFT benchmark (Alpaca)": ("first_contact_throughput.csv", "fct-aj1"),
    "cls-fudan-news-zh, Qwen tokenizer (ms-swift)": ("variable_length_peaks.csv", "vl-m5"),
    "orca-math-word-problems (fms-acceleration)": ("variable_length_peaks.csv", "vl-f1"),
    "Zhihu-KOL with alpaca-zh (ms-swift)": ("variable_length_peaks.csv", "vl-x1"),
    "rasbt instruction-data.json, GPT-2 tokenizer": ("first_contact_throughput.csv", "fct-t16b1"),
}


def _stats(name: str, row_id: str) -> LengthStats:
    with (VALIDATION / name).open(newline="", encoding="utf-8") as handle:
        row = next(r for r in csv.DictReader(handle) if r["id"] == row_id)
    given = json.loads(row["calc_request"])["length_stats"]
    return LengthStats(mean=given["mean"], p90=given["p90"], max=given.get("max"))


def implied_sigmas() -> dict[str, float]:
    """Each reading's sigma: the clipped log-normal through its mean and p90 (calc's own fit)."""
    out = {}
    for label, (name, row_id) in READINGS.items():
        stats = _stats(name, row_id)
        top = stats.max if stats.max is not None else 1 << 20
        _, sigma, exact = fit(stats, top)
        assert exact, label
        out[label] = sigma
    return out


def test_default_sigma_is_the_median_of_the_published_spreads() -> None:
    sigmas = implied_sigmas()
    assert len(sigmas) == 8
    assert round(statistics.median(sigmas.values()), 2) == DEFAULT_SIGMA


def test_every_published_spread_is_narrower_than_the_old_assumption() -> None:
    # the assumption it replaced (1.0) was wider than every published distribution
    sigmas = implied_sigmas().values()
    assert max(sigmas) < 1.0
    assert min(sigmas) < DEFAULT_SIGMA < max(sigmas)
