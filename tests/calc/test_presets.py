"""Presets: the data file parses, every row matches its stated count, the CLI lists them."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from calc import presets
from calc.errors import InputError
from conftest import REPO_ROOT

ROOT = REPO_ROOT

# The first presets' ids (a contract: exactly these spellings).
REQUIRED_IDS = [
    "llama-2-7b",
    "llama-2-13b",
    "llama-2-70b",
    "llama-3.1-8b",
    "llama-3.1-70b",
    "llama-3.1-405b",
    "llama-3.2-1b",
    "llama-3.2-3b",
    "mistral-7b",
    "mixtral-8x7b",
    "qwen2.5-0.5b",
    "qwen2.5-1.5b",
    "qwen2.5-7b",
    "qwen2.5-14b",
    "qwen2.5-32b",
    "qwen2.5-72b",
    "gemma-2-2b",
    "gemma-2-9b",
    "gemma-2-27b",
    "phi-3-mini",
    "yi-34b",
    "tinyllama-1.1b",
]

# Published totals (HF Hub safetensors counts), independent of the data file's own column.
PUBLISHED = {
    "llama-2-7b": 6_738_415_616,
    "llama-3.1-8b": 8_030_261_248,
    "mistral-7b": 7_241_732_096,
    "mixtral-8x7b": 46_702_792_704,
    "qwen2.5-0.5b": 494_032_768,
    "gemma-2-9b": 9_241_705_984,
    "tinyllama-1.1b": 1_100_048_384,
    "phi-3-mini": 3_821_079_552,
    "gpt2": 124_439_808,
    "llama-2-70b": 68_976_648_192,
    "llama-3.1-405b": 405_853_388_800,
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


# Gemma 4's model card states totals to 0.1B (billions: total, active), not safetensors counts;
# the text model's, since the 26B-A4B and 31B cards count no encoder apart.
GEMMA4_CARD = {"gemma-4-26b-a4b": (25.2, 3.8), "gemma-4-31b": (30.7, 30.7)}


@pytest.mark.parametrize("preset_id,card", sorted(GEMMA4_CARD.items()))
def test_gemma4_totals_round_to_the_model_card(preset_id, card):
    arch = presets.get_preset(preset_id)
    assert (round(arch.params_total / 1e9, 1), round(arch.params_active / 1e9, 1)) == card
    assert arch.family == "gemma4_text" and arch.extra["text_config_only"]


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


LISTING_KEYS = {
    "id",
    "name",
    "family",
    "params_total",
    "params_active",
    "layers",
    "hidden",
    "heads",
    "kv_heads",
    "vocab",
    "max_position_embeddings",
    "source",
    "as_of",
}


def test_listing_fields():
    listing = presets.presets_listing()
    assert [p["id"] for p in listing] == list(ALL_IDS)
    for entry in listing:
        assert LISTING_KEYS <= set(entry)
    json.dumps(listing, allow_nan=False)


def test_cli_presets_prints_json():
    out = subprocess.run(
        [sys.executable, "-m", "calc", "presets"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
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


# ---- current presets ------------------------------------------------------------------------

CURRENT_IDS = [
    "llama-3.3-70b",
    "llama-4-scout",
    "llama-4-maverick",
    "qwen3-0.6b",
    "qwen3-1.7b",
    "qwen3-4b",
    "qwen3-8b",
    "qwen3-14b",
    "qwen3-32b",
    "qwen3-30b-a3b",
    "qwen3-235b-a22b",
    "gemma-3-1b",
    "gemma-3-4b",
    "gemma-3-12b",
    "gemma-3-27b",
    "phi-4",
    "phi-4-mini",
    "mistral-small-24b",
    "mistral-nemo-12b",
    "gpt-oss-20b",
    "gpt-oss-120b",
    "deepseek-r1-distill-qwen-7b",
    "deepseek-r1-distill-llama-8b",
    "smollm3-3b",
]
# llama-4-maverick interleaves dense and MoE blocks: a mixed stack (ModelArch.block_counts).

# Exact totals computed from each config.json (pinned), with the active count (MoE: top-k).
PINNED = {
    "llama-3.3-70b": (70_553_706_496, 70_553_706_496),
    "llama-4-scout": (107_769_861_120, 17_172_894_720),
    "llama-4-maverick": (400_711_848_960, 17_184_691_200),
    "qwen3-0.6b": (596_049_920, 596_049_920),
    "qwen3-1.7b": (1_720_574_976, 1_720_574_976),
    "qwen3-4b": (4_022_468_096, 4_022_468_096),
    "qwen3-8b": (8_190_735_360, 8_190_735_360),
    "qwen3-14b": (14_768_307_200, 14_768_307_200),
    "qwen3-32b": (32_762_123_264, 32_762_123_264),
    "qwen3-30b-a3b": (30_532_122_624, 3_353_032_704),
    "qwen3-235b-a22b": (235_093_634_560, 22_190_763_520),
    "gemma-3-1b": (999_885_952, 999_885_952),
    "gemma-3-4b": (3_880_263_168, 3_880_263_168),
    "gemma-3-12b": (11_766_034_176, 11_766_034_176),
    "gemma-3-27b": (27_009_346_304, 27_009_346_304),
    "phi-4": (14_659_507_200, 14_659_507_200),
    "phi-4-mini": (3_836_021_760, 3_836_021_760),
    "mistral-small-24b": (23_572_403_200, 23_572_403_200),
    "mistral-nemo-12b": (12_247_782_400, 12_247_782_400),
    "gpt-oss-20b": (20_914_757_184, 4_187_440_704),
    "gpt-oss-120b": (116_829_156_672, 5_711_982_912),
    "deepseek-r1-distill-qwen-7b": (7_615_616_512, 7_615_616_512),
    "deepseek-r1-distill-llama-8b": (8_030_261_248, 8_030_261_248),
    "smollm3-3b": (3_075_098_624, 3_075_098_624),
    "mistral-7b-v0.3": (7_248_023_552, 7_248_023_552),
}

# What each publisher states (model card or technical report), as (figure, what it counts,
# relative tolerance of its rounding). "non_embedding" excludes the input embedding and the
# output layer; "active_non_embedding" is OpenAI's count (active minus the embedding table).
STATED = {
    "qwen3-0.6b": [(0.6e9, "total", 0.05), (0.44e9, "non_embedding", 0.02)],  # Qwen3 model cards
    "qwen3-1.7b": [(1.7e9, "total", 0.03), (1.4e9, "non_embedding", 0.03)],
    "qwen3-4b": [(4.0e9, "total", 0.02), (3.6e9, "non_embedding", 0.02)],
    "qwen3-8b": [(8.2e9, "total", 0.01), (6.95e9, "non_embedding", 0.01)],
    "qwen3-14b": [(14.8e9, "total", 0.01), (13.2e9, "non_embedding", 0.01)],
    "qwen3-32b": [(32.8e9, "total", 0.01), (31.2e9, "non_embedding", 0.01)],
    "qwen3-30b-a3b": [
        (30.5e9, "total", 0.01),
        (3.3e9, "active", 0.02),
        (29.9e9, "non_embedding", 0.01),
    ],
    "qwen3-235b-a22b": [
        (235e9, "total", 0.005),
        (22e9, "active", 0.01),
        (234e9, "non_embedding", 0.005),
    ],
    # Gemma 3 technical report, table 1 (non-embedding parameters, millions)
    "gemma-3-1b": [(698e6, "non_embedding", 0.001)],
    "gemma-3-4b": [(3209e6, "non_embedding", 0.001)],
    "gemma-3-12b": [(10759e6, "non_embedding", 0.001)],
    "gemma-3-27b": [(25600e6, "non_embedding", 0.001)],
    # gpt-oss model card: 20.91B / 116.83B total, 3.61B / 5.13B active (embedding excluded)
    "gpt-oss-20b": [(20.91e9, "total", 0.001), (3.61e9, "active_non_embedding", 0.002)],
    "gpt-oss-120b": [(116.83e9, "total", 0.001), (5.13e9, "active_non_embedding", 0.002)],
    # Meta: 17B active; 109B total includes the vision encoder, which the text preset omits
    "llama-4-scout": [(17e9, "active", 0.02), (109e9, "total", 0.02)],
    # Meta: 17B active, 400B total (vision encoder included; the text model is 400.7B)
    "llama-4-maverick": [(17e9, "active", 0.02), (400e9, "total", 0.005)],
    "phi-4": [(14.7e9, "total", 0.005)],  # safetensors index total_size 29.3 GB in bf16
    "phi-4-mini": [(3.8e9, "total", 0.01)],
    "mistral-small-24b": [(24e9, "total", 0.02)],
    "mistral-nemo-12b": [(12.2e9, "total", 0.005)],
    "smollm3-3b": [(3.08e9, "total", 0.005)],
    "llama-3.3-70b": [(70.55e9, "total", 0.001)],
    "deepseek-r1-distill-qwen-7b": [(7.62e9, "total", 0.001)],
    "deepseek-r1-distill-llama-8b": [(8.03e9, "total", 0.001)],
}


def _count(arch, what):
    emb_head = arch.embedding_params + arch.lm_head_params
    return {
        "total": arch.params_total,
        "active": arch.params_active,
        "non_embedding": arch.params_total - emb_head,
        "active_non_embedding": arch.params_active - arch.embedding_params,
    }[what]


def test_current_ids_present():
    assert set(CURRENT_IDS) <= set(ALL_IDS)
    assert set(REQUIRED_IDS) <= set(ALL_IDS)  # the old presets stay


@pytest.mark.parametrize("preset_id", sorted(PINNED))
def test_pinned_totals(preset_id):
    arch = presets.get_preset(preset_id)
    assert (arch.params_total, arch.params_active) == PINNED[preset_id]


@pytest.mark.parametrize("preset_id", sorted(STATED))
def test_totals_match_publishers(preset_id):
    arch = presets.get_preset(preset_id)
    for figure, what, tol in STATED[preset_id]:
        assert _count(arch, what) == pytest.approx(figure, rel=tol), (what, figure)


def test_moe_presets_hold_every_expert_and_run_top_k():
    for pid, experts, top_k in [
        ("qwen3-30b-a3b", 128, 8),
        ("qwen3-235b-a22b", 128, 8),
        ("gpt-oss-20b", 32, 4),
        ("gpt-oss-120b", 128, 4),
        ("llama-4-scout", 16, 1),
        ("llama-4-maverick", 128, 1),
    ]:
        arch = presets.get_preset(pid)
        assert (arch.num_experts, arch.experts_per_token) == (experts, top_k)
        assert arch.params_active < arch.params_total


def test_gpt_oss_presets_state_mxfp4_experts():
    listing = {p["id"]: p for p in presets.presets_listing()}
    assert listing["gpt-oss-20b"]["mxfp4_experts"] and listing["gpt-oss-120b"]["mxfp4_experts"]
    assert not listing["qwen3-30b-a3b"]["mxfp4_experts"]


def test_gemma3_text_presets_read_through_text_config():
    arch = presets.get_preset("gemma-3-4b")
    assert arch.family == "gemma3_text" and arch.extra.get("text_config_only")
    # Gemma3TextConfig defaults (transformers 5.17) fill what the published text_config omits
    assert (arch.vocab_size, arch.num_heads, arch.num_kv_heads, arch.head_dim) == (
        262_208,
        8,
        4,
        256,
    )


# ---- models by name: Hugging Face ids and aliases ----------------------------------------------


@pytest.mark.parametrize(
    "hf_id, preset_id",
    [
        ("Qwen/Qwen3-8B", "qwen3-8b"),
        ("qwen/qwen3-8b", "qwen3-8b"),
        ("Qwen/Qwen3-8B-Base", "qwen3-8b"),
        ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b"),
        ("mistralai/Mistral-7B-v0.3", "mistral-7b-v0.3"),
        ("mistralai/Mistral-7B-Instruct-v0.2", "mistral-7b"),
        ("openai/gpt-oss-20b", "gpt-oss-20b"),
        ("https://huggingface.co/google/gemma-3-27b-it", "gemma-3-27b"),
        ("deepseek-ai/DeepSeek-R1-Distill-Llama-70B", "llama-3.3-70b"),
        ("llama-2-7b", "llama-2-7b"),
    ],
)
def test_hugging_face_ids_resolve(hf_id, preset_id):
    assert presets.resolve_preset_id(hf_id) == preset_id


def test_every_alias_names_one_preset_and_every_repo_resolves():
    table = presets.alias_table()
    for preset_id in ALL_IDS:
        row = presets.preset_row(preset_id)
        assert table[row["hf_repo"].lower()] == preset_id
        for alias in row["aliases"]:
            assert table[alias.lower()] == preset_id and alias != row["hf_repo"]


@pytest.mark.parametrize(
    "value, first",
    [
        ("meta-llama/Llama-3.1-8B-Instruct-FP8", "llama-3.1-8b"),
        ("Qwen/Qwen3-8B-AWQ", "qwen3-8b"),
        ("google/gemma-3-12b-it-qat", "gemma-3-12b"),
    ],
)
def test_unknown_hf_id_suggests_nearest(value, first):
    with pytest.raises(InputError) as err:
        presets.resolve_preset_id(value)
    e = err.value
    assert (e.code, e.field, e.value) == ("unknown_preset", "model", value)
    out = e.to_dict()
    assert out["suggestions"][0] == first and len(out["suggestions"]) <= 3
    assert set(out) == {"code", "field", "value", "suggestions"}


@pytest.mark.parametrize("value", ["", None, 7, "zzzz/qqqq-xx"])
def test_unknown_without_close_name_has_empty_suggestions(value):
    with pytest.raises(InputError) as err:
        presets.resolve_preset_id(value)
    assert err.value.to_dict()["suggestions"] == []


def test_request_accepts_hugging_face_id_and_reports_params_active():
    from calc.memory import estimate_dict

    moe = estimate_dict({"model": "Qwen/Qwen3-30B-A3B", "method": "lora"})
    assert moe["request"]["model"] == "qwen3-30b-a3b"
    assert (moe["params_total"], moe["params_active"]) == PINNED["qwen3-30b-a3b"]
    dense = estimate_dict({"model": "Qwen/Qwen3-8B", "method": "qlora"})
    assert dense["params_active"] == dense["params_total"] == PINNED["qwen3-8b"][0]


def test_cli_unknown_hf_id_prints_suggestions():
    out = subprocess.run(
        [sys.executable, "-m", "calc", "estimate", "--request", "-"],
        cwd=ROOT,
        input=json.dumps({"model": "Qwen/Qwen3-8B-GGUF"}),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    err = json.loads(out.stdout)["error"]
    assert err["code"] == "unknown_preset" and "qwen3-8b" in err["suggestions"]


def test_maverick_is_a_mixed_stack_of_dense_and_moe_blocks():
    arch = presets.get_preset("llama-4-maverick")
    assert dict(arch.block_counts) == {"moe": 24, "dense": 24}
    dense_mlp = [l for l in arch.linears if l.block_kind == "dense"]
    assert {(l.name, l.d_out if l.name != "down_proj" else l.d_in) for l in dense_mlp} == {
        ("gate_proj", 16384),
        ("up_proj", 16384),
        ("down_proj", 16384),
    }
    # the largest block (an MoE one) is what one FSDP unit gathers
    assert arch.block_params > arch.stack_params // arch.num_layers


# ---- multi-head latent attention and the new MoE layouts ------------------------------------

NEW_FAMILY_PINNED = {
    "deepseek-v3": (671_026_404_352, 37_552_282_624),
    # DeepseekV32ForCausalLM / GlmMoeDsaForCausalLM built on the meta device (transformers 5.17)
    "deepseek-v3.2": (671_877_929_216, 38_403_807_488),
    "glm-5": (743_911_199_232, 41_784_709_632),
    # DeepseekV4ForCausalLM built on the meta device (transformers 5.17)
    "deepseek-v4-flash": (284_325_869_015, 13_793_261_015),
    "deepseek-v4-pro": (1_572_973_188_067, 49_755_067_363),
    "kimi-k2": (1_026_408_209_408, 32_861_477_888),
    "glm-4.5-air": (106_852_245_504, 13_424_123_904),
    "glm-4.5": (352_797_814_784, 33_632_251_904),
    "minimax-m2": (228_689_748_992, 11_030_537_216),
    "seed-oss-36b": (36_151_104_512, 36_151_104_512),
    "olmo-3-7b": (7_298_011_136, 7_298_011_136),
    "olmo-3-32b": (32_233_522_176, 32_233_522_176),
}

# What the publishers' model cards state, as (total, active, what "active" counts, tolerance):
# DeepSeek-V3 "671B total parameters with 37B activated" (the multi-token-prediction module,
# 14B, outside both); Kimi K2 "1 trillion total parameters, 32 billion activated"; GLM-4.5
# "355 billion total parameters and 32 billion active", GLM-4.5-Air "106 billion total, 12
# billion active"; MiniMax-M2 "230 billion total parameters with 10 billion active"; Seed-OSS
# "36B"; OLMo 3 "7B" and "32B". GLM and MiniMax count the active parameters without the embedding and output layer.
NEW_FAMILY_STATED = {
    "deepseek-v3": (671e9, 37e9, "active", 0.02),
    # DeepSeek names V3.2's configuration "config_671B_v3.2" (DeepSeek-V3.2-Exp repository) and
    # keeps V3.1-Terminus' 37B active, to which the indexers add 0.85B (61 x 14M)
    "deepseek-v3.2": (671e9, 37e9, "active", 0.04),
    # DeepSeek: V4-Flash "284B total parameters, 13B activated", V4-Pro "1.6T total, 49B
    # activated" (rounded; the multi-token-prediction layer, not built by transformers, outside)
    "deepseek-v4-flash": (284e9, 13e9, "active_blocks", 0.03),
    "deepseek-v4-pro": (1.6e12, 49e9, "active", 0.02),
    # Z.ai: GLM-5 "744B parameters (40B active)"
    "glm-5": (744e9, 40e9, "active_blocks", 0.01),
    "kimi-k2": (1.0e12, 32e9, "active", 0.03),
    "glm-4.5-air": (106e9, 12e9, "active_blocks", 0.02),
    "glm-4.5": (355e9, 32e9, "active_blocks", 0.01),
    "minimax-m2": (230e9, 10e9, "active_blocks", 0.03),
    "seed-oss-36b": (36e9, 36e9, "active", 0.01),
    # allenai/Olmo-3-1025-7B states 7,298,011,136 parameters (its safetensors total)
    "olmo-3-7b": (7_298_011_136, 7_298_011_136, "active", 0.0),
    "olmo-3-32b": (32e9, 32e9, "active", 0.01),
}


@pytest.mark.parametrize("preset_id", sorted(NEW_FAMILY_PINNED))
def test_new_family_pinned_totals(preset_id):
    arch = presets.get_preset(preset_id)
    assert (arch.params_total, arch.params_active) == NEW_FAMILY_PINNED[preset_id]


@pytest.mark.parametrize("preset_id", sorted(NEW_FAMILY_STATED))
def test_new_family_totals_match_publishers(preset_id):
    arch = presets.get_preset(preset_id)
    total, active, what, tol = NEW_FAMILY_STATED[preset_id]
    counted = arch.params_active
    if what == "active_blocks":
        counted -= arch.embedding_params + arch.lm_head_params
    assert arch.params_total == pytest.approx(total, rel=tol)
    assert counted == pytest.approx(active, rel=tol)


def test_deepseek_v3_preset_is_latent_attention_with_dense_first_blocks():
    arch = presets.get_preset("deepseek-v3")
    assert arch.mla and (arch.kv_lora_rank, arch.q_lora_rank) == (512, 1536)
    assert (arch.head_dim, arch.v_head_dim, arch.qk_rope_head_dim) == (192, 128, 64)
    assert dict(arch.block_counts) == {"moe": 58, "dense": 3}
    assert (arch.num_experts, arch.experts_per_token) == (256, 8)
    assert presets.resolve_preset_id("deepseek-ai/DeepSeek-R1") == "deepseek-v3"
    assert presets.get_preset("glm-4.5").family == "glm4_moe"


# ---- Ministral 3, the other Qwen3.5 sizes, and the published sizes of the hybrid families ----

LATEST_PINNED = {
    "ministral-3-3b": (3_429_006_336, 3_429_006_336),
    "ministral-3-8b": (8_489_553_920, 8_489_553_920),
    "ministral-3-14b": (13_506_073_600, 13_506_073_600),
    "qwen3.5-4b": (4_205_751_296, 4_205_751_296),
}

# The publishers' figures, as (total, relative tolerance of their rounding): Mistral's model
# cards give the language model alone beside a 0.4B vision encoder ("3.4B Language Model",
# "8.4B", "13.5B"; the presets are the language model); Qwen "9B", "35B-A3B", "80B-A3B";
# Liquid AI "350M", "1.2B".
LATEST_STATED = {
    "ministral-3-3b": (3.4e9, 0.01),
    "ministral-3-8b": (8.4e9, 0.015),
    "ministral-3-14b": (13.5e9, 0.005),
    "qwen3.5-9b": (9e9, 0.01),
    "qwen3.5-35b-a3b": (35e9, 0.01),
    "qwen3-next-80b-a3b": (80e9, 0.005),
    "lfm2-350m": (350e6, 0.02),
    "lfm2-1.2b": (1.2e9, 0.03),
}


@pytest.mark.parametrize("preset_id", sorted(LATEST_PINNED))
def test_latest_pinned_totals(preset_id):
    arch = presets.get_preset(preset_id)
    assert (arch.params_total, arch.params_active) == LATEST_PINNED[preset_id]


@pytest.mark.parametrize("preset_id", sorted(LATEST_STATED))
def test_latest_totals_match_publishers(preset_id):
    total, tol = LATEST_STATED[preset_id]
    assert presets.get_preset(preset_id).params_total == pytest.approx(total, rel=tol)


def test_ministral_3_presets_are_the_language_model_of_the_multimodal_checkpoint():
    for pid, layers, tied in (("ministral-3-3b", 26, True), ("ministral-3-14b", 40, False)):
        arch = presets.get_preset(pid)
        assert arch.family == "ministral3" and arch.extra["text_config_only"]
        assert (arch.num_layers, arch.num_heads, arch.num_kv_heads, arch.head_dim) == (
            layers,
            32,
            8,
            128,
        )
        assert arch.tie_word_embeddings is tied
    assert presets.resolve_preset_id("mistralai/Ministral-3-8B-Instruct-2512") == "ministral-3-8b"


def test_every_row_states_its_family_and_release_month():
    listing = presets.presets_listing()
    for p in listing:
        assert re.fullmatch(r"[a-z0-9-]+", p["series"]), p["id"]
        assert re.fullmatch(r"(19|20)\d\d-(0[1-9]|1[0-2])", p["released"]), p["id"]
    by_id = {p["id"]: p for p in listing}
    assert by_id["qwen3.5-9b"]["series"] == by_id["qwen2.5-7b"]["series"] == "qwen"
    assert by_id["deepseek-r1-distill-llama-8b"]["series"] == "deepseek"


# ---- the Mamba-2 hybrids' published sizes: Falcon-H1 and Granite 4.0 H -----------------------

# transformers 5.17 AutoModelForCausalLM.from_config on the meta device, summed over
# model.parameters(), for each row's config (total, active)
HYBRID_PINNED = {
    "falcon-h1-3b": (3_149_256_192, 3_149_256_192),
    "falcon-h1-7b": (7_585_513_568, 7_585_513_568),
    "granite-4.0-h-1b": (1_461_538_368, 1_461_538_368),
    "granite-4.0-h-tiny": (6_939_037_248, 1_465_470_528),
    "granite-4.0-h-small": (32_207_337_984, 8_803_121_664),
}

# The publishers' figures, as (what, figure, relative tolerance of their rounding): IBM's
# Granite 4.0 cards state "7B total parameters" (H Tiny; its "1B activated" is a size class, the
# checkpoint runs 1.47B) and "32B total parameters, 9B activated" (H Small), the Granite 4.0
# Nano announcement a "~1.5B parameter" H 1B. TII names Falcon-H1's sizes only ("3B", "7B"):
# those presets are held by the pinned counts alone.
HYBRID_STATED = {
    "granite-4.0-h-1b": [("total", 1.5e9, 0.03)],
    "granite-4.0-h-tiny": [("total", 7e9, 0.01)],
    "granite-4.0-h-small": [("total", 32e9, 0.01), ("active", 9e9, 0.03)],
}


@pytest.mark.parametrize("preset_id", sorted(HYBRID_PINNED))
def test_hybrid_pinned_totals(preset_id):
    arch = presets.get_preset(preset_id)
    assert (arch.params_total, arch.params_active) == HYBRID_PINNED[preset_id]


@pytest.mark.parametrize("preset_id", sorted(HYBRID_STATED))
def test_hybrid_totals_match_publishers(preset_id):
    arch = presets.get_preset(preset_id)
    for what, figure, tol in HYBRID_STATED[preset_id]:
        assert _count(arch, what) == pytest.approx(figure, rel=tol), (what, figure)


def test_hybrid_presets_read_their_mixers_from_the_config():
    falcon = presets.get_preset("falcon-h1-7b")
    assert falcon.family == "falcon_h1" and falcon.extra["parallel_mamba"]
    assert falcon.mamba is not None
    assert (falcon.mamba.heads, falcon.mamba.head_dim, falcon.mamba.state) == (24, 128, 256)
    small = presets.get_preset("granite-4.0-h-small")
    assert small.family == "granitemoehybrid" and small.extra["no_rope"]
    assert dict(small.block_counts) == {"full_attention": 4, "mamba": 36}
    assert (small.num_experts, small.experts_per_token) == (72, 10)
    assert presets.get_preset("granite-4.0-h-1b").num_experts == 0
    assert presets.resolve_preset_id("ibm-granite/granite-4.0-h-tiny-base") == "granite-4.0-h-tiny"
    assert presets.resolve_preset_id("tiiuae/Falcon-H1-7B-Instruct") == "falcon-h1-7b"
    listing = {p["id"]: p for p in presets.presets_listing()}
    assert listing["granite-4.0-h-tiny"]["series"] == "granite"
    assert listing["falcon-h1-3b"]["series"] == listing["falcon-7b"]["series"] == "falcon"


# ---- Gemma 4 E2B and E4B: per-layer embeddings, kv-shared blocks --------------------------------

# transformers 5.17 Gemma4ForCausalLM on the meta device, parameters summed, for each row's
# text_config: the language model alone (the cards' totals add the vision and audio encoders)
GEMMA4_E_PINNED = {"gemma-4-e2b": 4_628_569_344, "gemma-4-e4b": 7_463_013_376}

# Google's model cards, in billions: "2.3B effective (5.1B with embeddings)" and "4.5B effective
# (8B with embeddings)". Their difference is the embedding tables, the token embedding and the
# per-layer embeddings (the encoders are in both figures), to the cards' 0.1B rounding.
GEMMA4_E_CARD = {"gemma-4-e2b": (2.3, 5.1), "gemma-4-e4b": (4.5, 8.0)}


@pytest.mark.parametrize("preset_id", sorted(GEMMA4_E_PINNED))
def test_gemma4_e_presets_count_the_language_model(preset_id):
    arch = presets.get_preset(preset_id)
    assert arch.params_total == arch.params_active == GEMMA4_E_PINNED[preset_id]
    assert arch.family == "gemma4_text" and arch.extra["text_config_only"]
    effective, with_embeddings = GEMMA4_E_CARD[preset_id]
    assert abs(arch.embedding_params - (with_embeddings - effective) * 1e9) <= 0.1e9
    # a 256-wide table per block, and the per-layer projection's norm
    assert arch.per_layer_embedding_params == arch.vocab_size * arch.num_layers * 256 + 256
    assert presets.resolve_preset_id(f"google/gemma-4-{preset_id[-3:].upper()}") == preset_id


# ---- the hybrids' MoE sizes: LFM2-8B-A1B and Nemotron 3 Nano ------------------------------------

# transformers 5.17 from_config on the meta device, parameters summed (total), and the active
# count calc derives from the same shapes (top-k of the routed experts)
HYBRID_MOE_PINNED = {
    "lfm2-8b-a1b": (8_339_929_856, 1_557_740_288),
    "nemotron-3-nano-30b-a3b": (31_577_937_344, 3_580_073_408),
}

# Liquid AI: "8.3B total parameters, 1.5B active"; NVIDIA: "31.6B total parameters,
# approximately 3.2B active (3.6B including embeddings)", the 3.2B without the token embedding
HYBRID_MOE_STATED = {
    "lfm2-8b-a1b": [("total", 8.3e9, 0.005), ("active", 1.5e9, 0.04)],
    "nemotron-3-nano-30b-a3b": [
        ("total", 31.6e9, 0.002),
        ("active", 3.6e9, 0.01),
        ("active_non_embedding", 3.2e9, 0.015),
    ],
}


@pytest.mark.parametrize("preset_id", sorted(HYBRID_MOE_PINNED))
def test_hybrid_moe_pinned_totals(preset_id):
    arch = presets.get_preset(preset_id)
    assert (arch.params_total, arch.params_active) == HYBRID_MOE_PINNED[preset_id]
    for what, figure, tol in HYBRID_MOE_STATED[preset_id]:
        assert _count(arch, what) == pytest.approx(figure, rel=tol), (what, figure)


def test_hybrid_moe_presets_hold_their_block_kinds():
    lfm = presets.get_preset("lfm2-8b-a1b")
    assert dict(lfm.ffn_counts) == {"dense": 2, "moe": 22}
    assert dict(lfm.block_counts) == {"full_attention": 6, "conv": 18}
    nano = presets.get_preset("nemotron-3-nano-30b-a3b")
    assert dict(nano.block_counts) == {"mamba": 23, "full_attention": 6, "mlp": 0, "moe": 23}
    assert (nano.num_experts, nano.experts_per_token) == (128, 6)


# ---- Kimi Linear 48B-A3B: Kimi Delta Attention and latent attention, DeepSeek-V3's MoE ----------


def test_kimi_linear_preset_counts_what_transformers_builds():
    arch = presets.get_preset("kimi-linear-48b-a3b")
    # transformers 5.17 KimiLinearForCausalLM on the meta device, parameters summed; the active
    # count calc derives from the same shapes (8 of 256 routed experts)
    assert (arch.params_total, arch.params_active) == (49_122_675_072, 3_484_453_248)
    # Moonshot's card: "48B" total and "3B" activated, both rounded; the activated figure
    # without the token embedding
    assert _count(arch, "total") == pytest.approx(48e9, rel=0.025)
    assert _count(arch, "active_non_embedding") == pytest.approx(3e9, rel=0.04)
    assert dict(arch.block_counts) == {"full_attention": 7, "linear_attention": 20}
    assert dict(arch.ffn_counts) == {"moe": 26, "dense": 1}
    assert presets.resolve_preset_id("moonshotai/Kimi-Linear-48B-A3B-Base") == (
        "kimi-linear-48b-a3b"
    )


def test_qwen3_6_27b_reads_its_published_config_as_pasted():
    arch = presets.get_preset("qwen3.6-27b")
    assert arch.family == "qwen3_5_text" and arch.extra["text_config_only"]
    # transformers 5.17 Qwen3_5ForCausalLM on the meta device, parameters summed; Qwen's card:
    # "27B" for the language model (the vision encoder and the MTP layer apart)
    assert arch.params_total == arch.params_active == 26_895_998_464
    assert _count(arch, "total") == pytest.approx(27e9, rel=0.005)
    assert dict(arch.block_counts) == {"full_attention": 16, "linear_attention": 48}
    la = arch.linear_attention
    assert (la.key_heads, la.value_heads, la.key_head_dim, la.value_head_dim) == (16, 48, 128, 128)


# ---- Mistral Small 4 and Kimi K2.5: the language model of a multimodal checkpoint --------------


def test_mistral_small_4_is_the_mistral4_model_inside_its_mistral3_config():
    arch = presets.get_preset("mistral-small-4-119b")
    assert arch.family == "mistral4" and arch.extra["text_config_only"]
    # transformers 5.17 Mistral4ForCausalLM on the meta device, parameters summed; the active
    # count calc derives from the same shapes (4 of 128 routed experts and the shared one)
    assert (arch.params_total, arch.params_active) == (118_972_826_624, 6_632_588_288)
    # Mistral's announcement: "119B total parameters, with 6B active parameters per token",
    # the active figure rounded to the billion and without the embedding and output layer
    assert _count(arch, "total") == pytest.approx(119e9, rel=0.001)
    active_blocks = arch.params_active - arch.embedding_params - arch.lm_head_params
    assert active_blocks == pytest.approx(6e9, abs=0.5e9)
    assert arch.mla and (arch.kv_lora_rank, arch.q_lora_rank) == (256, 1024)
    assert (arch.num_experts, arch.experts_per_token, arch.num_layers) == (128, 4, 36)
    assert presets.resolve_preset_id("mistralai/Mistral-Small-4-119B-2603") == (
        "mistral-small-4-119b"
    )


def test_kimi_k25_is_kimi_k2_s_language_model_inside_its_kimi_k25_config():
    arch = presets.get_preset("kimi-k2.5")
    assert arch.family == "deepseek_v3" and arch.extra["text_config_only"]
    k2 = presets.get_preset("kimi-k2")
    assert (arch.params_total, arch.params_active) == (k2.params_total, k2.params_active)
    # Moonshot's card: "1T total parameters, 32B activated"
    assert _count(arch, "total") == pytest.approx(1.0e12, rel=0.03)
    assert _count(arch, "active") == pytest.approx(32e9, rel=0.03)
    assert presets.resolve_preset_id("moonshotai/Kimi-K2.5") == "kimi-k2.5"


def test_glm_4_6_is_read_as_glm_4_5_s_shapes():
    assert presets.resolve_preset_id("zai-org/GLM-4.6") == "glm-4.5"
