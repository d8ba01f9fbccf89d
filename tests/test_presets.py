"""Presets: the data file parses, every row matches its stated count, the CLI lists them."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from calc import presets
from calc.errors import InputError

ROOT = Path(__file__).resolve().parents[1]

# The ids issue 3 names (a contract: exactly these spellings).
REQUIRED_IDS = [
    "llama-2-7b", "llama-2-13b", "llama-2-70b", "llama-3.1-8b", "llama-3.1-70b",
    "llama-3.1-405b", "llama-3.2-1b", "llama-3.2-3b", "mistral-7b", "mixtral-8x7b",
    "qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-7b", "qwen2.5-14b", "qwen2.5-32b", "qwen2.5-72b",
    "gemma-2-2b", "gemma-2-9b", "gemma-2-27b", "phi-3-mini", "yi-34b", "tinyllama-1.1b",
]

# Published totals (HF Hub safetensors counts), independent of the data file's own column.
PUBLISHED = {
    "llama-2-7b": 6_738_415_616, "llama-3.1-8b": 8_030_261_248, "mistral-7b": 7_241_732_096,
    "mixtral-8x7b": 46_702_792_704, "qwen2.5-0.5b": 494_032_768, "gemma-2-9b": 9_241_705_984,
    "tinyllama-1.1b": 1_100_048_384, "phi-3-mini": 3_821_079_552, "gpt2": 124_439_808,
    "llama-2-70b": 68_976_648_192, "llama-3.1-405b": 405_853_388_800,
}

ALL_IDS = presets.preset_ids()


def test_required_ids_present():
    assert set(REQUIRED_IDS) <= set(ALL_IDS)


@pytest.mark.parametrize("preset_id", ALL_IDS)
def test_row_parses_and_matches_stated_count(preset_id):
    row = presets.preset_row(preset_id)
    arch = presets.get_preset(preset_id)
    assert re.fullmatch(r"[a-z0-9]+(?:[.-][a-z0-9]+)*", preset_id)
    assert arch.params_total == row["params_total"]
    assert arch.params_active == row["params_active"]
    assert arch.name == preset_id
    assert row["source"].startswith("https://huggingface.co/" + row["hf_repo"] + "/")
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", row["as_of"])
    assert row["name"]


@pytest.mark.parametrize("preset_id,total", sorted(PUBLISHED.items()))
def test_published_totals(preset_id, total):
    assert presets.get_preset(preset_id).params_total == total


def test_families_of_presets():
    fam = {p: presets.get_preset(p).family for p in ALL_IDS}
    assert fam["mixtral-8x7b"] == "mixtral" and fam["phi-3-mini"] == "phi3"
    assert fam["gemma-2-9b"] == "gemma2" and fam["qwen2.5-7b"] == "qwen2"
    assert presets.get_preset("mixtral-8x7b").num_experts == 8
    assert presets.get_preset("mixtral-8x7b").experts_per_token == 2


def test_cached():
    assert presets.get_preset("llama-2-7b") is presets.get_preset("llama-2-7b")


@pytest.mark.parametrize("bad", ["llama-2-8b", "Llama-2-7B", "", None, 7, ["llama-2-7b"]])
def test_unknown_preset(bad):
    with pytest.raises(InputError) as err:
        presets.get_preset(bad)
    assert (err.value.code, err.value.field, err.value.value) == ("unknown_preset", "model", bad)


LISTING_KEYS = {"id", "name", "family", "params_total", "params_active", "layers", "hidden",
                "heads", "kv_heads", "vocab", "max_position_embeddings", "source", "as_of"}


def test_listing_fields():
    listing = presets.presets_listing()
    assert [p["id"] for p in listing] == list(ALL_IDS)
    for entry in listing:
        assert LISTING_KEYS <= set(entry)
    json.dumps(listing, allow_nan=False)


def test_cli_presets_prints_json():
    out = subprocess.run([sys.executable, "-m", "calc", "presets"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    listing = json.loads(out.stdout)
    assert {p["id"] for p in listing} == set(ALL_IDS)
    by_id = {p["id"]: p for p in listing}
    assert by_id["llama-2-7b"]["params_total"] == 6_738_415_616
    assert by_id["mixtral-8x7b"]["params_active"] < by_id["mixtral-8x7b"]["params_total"]


def test_data_file_header_states_units_and_rows():
    data = json.loads((ROOT / "calc" / "data" / "models.json").read_text(encoding="utf-8"))
    assert {"units", "row_format"} <= set(data["header"])
    assert len(data["models"]) == len(ALL_IDS)
