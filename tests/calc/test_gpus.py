"""GPU catalogue and prices: contract ids, driver-reported memory, sources, fallbacks, CLI."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from calc import gpus
from calc.errors import InputError
from conftest import REPO_ROOT

ROOT = REPO_ROOT

CONTRACT_IDS = [
    "rtx-3090",
    "rtx-4090",
    "rtx-5090",
    "l4",
    "a10g",
    "a40",
    "l40s",
    "rtx-a6000",
    "rtx-6000-ada",
    "a100-40gb-pcie",
    "a100-80gb-pcie",
    "a100-40gb-sxm",
    "a100-80gb-sxm",
    "h100-pcie",
    "h100-sxm",
    "h200",
    "b200",
    "mi300x",
]
# The newer cards (contract ids). Those with no dated public rental price are planned for their
# owners (warning price_is_none) instead of being priced.
NEW_IDS = [
    "t4",
    "rtx-2080-ti",
    "rtx-4060-ti-16gb",
    "rtx-4080",
    "rtx-5080",
    "rtx-pro-6000",
    "rtx-a5000",
    "h100-nvl",
    "gh200",
    "b300",
    "mi325x",
    "mi355x",
]
UNPRICED = {"t4", "rtx-2080-ti", "rtx-4060-ti-16gb", "rtx-4080", "rtx-5080", "mi355x", "rtx-a5000"}


def test_catalogue_ids_are_the_contract():
    assert sorted(gpus.gpu_ids()) == sorted(CONTRACT_IDS + NEW_IDS)


@pytest.mark.parametrize(
    "gpu_id, mib",
    [
        # nvidia-smi memory.total (rocm-smi VRAM total for the MI355X) in published outputs
        ("t4", 15360),
        ("rtx-2080-ti", 11264),
        ("rtx-4060-ti-16gb", 16380),
        ("rtx-4080", 16376),
        ("rtx-5080", 16303),
        ("rtx-pro-6000", 97887),
        ("h100-nvl", 95830),
        ("gh200", 97871),
        ("b300", 275040),
        ("mi355x", 309_220_868_096 // 2**20),
    ],
)
def test_new_cards_memory_is_driver_reported(gpu_id, mib):
    assert gpus.get_gpu(gpu_id).memory_mib == mib


def test_b200_is_180_gb_not_192():
    # HGX B200 exposes 180 GB per GPU (183359 MiB in nvidia-smi); the 192 GB of early
    # announcements is the physical HBM3e. The source says so.
    b200 = gpus.get_gpu("b200")
    assert b200.memory_gb_marketed == 180 and b200.memory_mib == 183359
    assert "192 GB" in b200.source and b200.memory_bytes < 180 * 10**9 * 1.1


@pytest.mark.parametrize(
    "gpu_id, tflops",
    [
        ("rtx-3090", 0),
        ("a100-80gb-sxm", 0),
        ("t4", 0),
        ("rtx-4090", 330.3),
        ("l40s", 733),
        ("h100-sxm", 1979),
        ("h100-pcie", 1513),
        ("b200", 4500),
        ("mi300x", 2614.9),
        ("mi355x", 5033.2),
    ],
)
def test_fp8_dense_not_sparse(gpu_id, tflops):
    assert gpus.get_gpu(gpu_id).fp8_dense_tflops == tflops


def test_fp8_column_is_right_after_bf16():
    header = next(
        line
        for line in (ROOT / "calc/data/gpus.csv").read_text().splitlines()
        if line.startswith("id,")
    )
    cols = header.split(",")
    assert cols[cols.index("bf16_dense_tflops") + 1] == "fp8_dense_tflops"
    for gpu in gpus.all_gpus():  # FP8 tensor cores run at twice the BF16 rate where they exist
        assert gpu.fp8_dense_tflops in (0, pytest.approx(2 * gpu.bf16_dense_tflops, rel=0.01))
        assert gpu.to_dict()["fp8_dense_tflops"] == gpu.fp8_dense_tflops


def test_unpriced_cards_are_exactly_those_listed():
    assert {g.id for g in gpus.all_gpus() if not gpus.prices_for(g.id)} == UNPRICED


@pytest.mark.parametrize(
    "gpu_id, mib",
    [
        # nvidia-smi memory.total as published in the cited issues
        ("a100-80gb-sxm", 81920),
        ("a100-40gb-pcie", 40960),
        ("h100-sxm", 81559),
        ("l40s", 46068),
        ("l4", 23034),
        ("rtx-4090", 24564),
        ("rtx-3090", 24576),
        ("rtx-5090", 32607),
        ("b200", 183359),
    ],
)
def test_memory_is_driver_reported(gpu_id, mib):
    gpu = gpus.get_gpu(gpu_id)
    assert gpu.memory_mib == mib
    assert gpu.memory_bytes == mib * 2**20


def test_a100_80gb_bytes():
    assert gpus.get_gpu("a100-80gb-pcie").memory_bytes == 85_899_345_920


@pytest.mark.parametrize(
    "gpu_id, tflops",
    [
        ("a100-80gb-sxm", 312),
        ("h100-sxm", 989),
        ("h100-pcie", 756),
        ("rtx-4090", 165.2),
        ("rtx-3090", 71),
        ("mi300x", 1307.4),
        ("b200", 2250),
    ],
)
def test_dense_bf16_not_sparse(gpu_id, tflops):
    assert gpus.get_gpu(gpu_id).bf16_dense_tflops == tflops


def test_every_row_is_sourced_and_dated():
    for gpu in gpus.all_gpus():
        assert gpu.source and gpu.as_of[:4].isdigit()
        for price in gpus.prices_for(gpu.id):
            assert price.source and price.as_of[:4].isdigit() and price.usd > 0


def test_every_card_has_a_price():
    for gpu_id in CONTRACT_IDS:
        for tier in gpus.TIERS:
            for interruptible in (False, True):
                assert gpus.price_quote(gpu_id, tier, interruptible).usd_per_gpu_hour > 0


@pytest.mark.parametrize(
    "gpu_id, tier, interruptible, usd, fallback",
    [
        ("rtx-4090", "marketplace", False, 0.68, False),
        ("rtx-4090", "managed", True, 0.34, False),
        ("rtx-4090", "managed", False, 0.74, False),
        ("l4", "marketplace", False, 0.44, True),  # no marketplace row: managed on-demand
        ("mi300x", "managed", True, 1.50, True),  # no interruptible row: on-demand
        (
            "rtx-5090",
            "managed",
            False,
            0.87,
            True,
        ),  # derived on-demand row dropped: marketplace on-demand
        ("a100-40gb-pcie", "managed", False, 0.40, True),  # only interruptible capacity is listed
    ],
)
def test_price_quote(gpu_id, tier, interruptible, usd, fallback):
    quote = gpus.price_quote(gpu_id, tier, interruptible)
    assert (quote.usd_per_gpu_hour, quote.fallback) == (usd, fallback)


def test_interruptible_is_cheaper_where_listed():
    for gpu_id in CONTRACT_IDS:
        rows = gpus.prices_for(gpu_id)
        for tier in gpus.TIERS:
            on = [p.usd for p in rows if p.tier == tier and not p.interruptible]
            spot = [p.usd for p in rows if p.tier == tier and p.interruptible]
            if on and spot:
                assert min(spot) < min(on), gpu_id


# Vast.ai's cheapest RTX A6000 listing (0.55) is above RunPod's Secure Cloud rate (0.49): the one
# place where the marketplace low end is not the cheaper tier in the current snapshot.
MARKETPLACE_ABOVE_MANAGED = {("rtx-a6000", False)}


def test_marketplace_not_dearer_than_managed():
    seen = set()
    for gpu_id in CONTRACT_IDS:
        rows = gpus.prices_for(gpu_id)
        for interruptible in (False, True):
            market = [
                p.usd for p in rows if p.tier == "marketplace" and p.interruptible == interruptible
            ]
            managed = [
                p.usd for p in rows if p.tier == "managed" and p.interruptible == interruptible
            ]
            if market and managed and min(market) > min(managed):
                seen.add((gpu_id, interruptible))
    assert seen == MARKETPLACE_ABOVE_MANAGED


def test_every_card_has_an_on_demand_row_but_one():
    # the A100 40GB PCIe has no sourced on-demand price yet (plan warns price_is_interruptible_rate)
    missing = [g for g in CONTRACT_IDS if not any(not p.interruptible for p in gpus.prices_for(g))]
    assert missing == ["a100-40gb-pcie"]


def test_no_serverless_or_derived_rows():
    for gpu_id in CONTRACT_IDS:
        for price in gpus.prices_for(gpu_id):
            assert "serverless" not in price.source and "runcomfy" not in price.source, gpu_id


@pytest.mark.parametrize(
    "value, code", [("a100", "unknown_gpu"), ("H100-SXM", "unknown_gpu"), (3, "wrong_type")]
)
def test_unknown_gpu(value, code):
    with pytest.raises(InputError) as err:
        gpus.get_gpu(value)
    assert (err.value.code, err.value.field, err.value.value) == (code, "gpu", value)


@pytest.mark.parametrize(
    "gpu_id, n, link",
    [
        ("a100-80gb-sxm", 8, "nvlink"),
        ("a100-80gb-pcie", 2, "nvlink"),
        ("a100-80gb-pcie", 4, "pcie"),
        ("rtx-4090", 2, "pcie"),
        ("mi300x", 8, "nvlink"),
        ("h100-sxm", 16, "nvlink"),
        ("rtx-3090", 2, "nvlink"),
        ("rtx-3090", 4, "pcie"),
    ],
)
def test_link_for(gpu_id, n, link):
    assert gpus.get_gpu(gpu_id).link_for(n) == link


def test_rocm_caveat_codes():
    assert gpus.rocm_warnings(gpus.get_gpu("mi300x"), "qlora", "flash") == [
        "rocm_qlora_needs_extra_work",
        "rocm_flash_attention_needs_extra_work",
    ]
    assert gpus.rocm_warnings(gpus.get_gpu("mi300x"), "lora", "sdpa") == []
    assert gpus.rocm_warnings(gpus.get_gpu("h100-sxm"), "qlora", "flash") == []


def test_storage_price():
    assert gpus.storage_price().usd == 0.07


def test_cli_gpus_lists_catalogue():
    out = subprocess.run(
        [sys.executable, "-m", "calc", "gpus"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert [g["id"] for g in data["gpus"]] == list(gpus.gpu_ids())
    a100 = next(g for g in data["gpus"] if g["id"] == "a100-80gb-sxm")
    assert a100["memory_bytes"] == 85_899_345_920 and a100["prices"]
    assert "prices_move_override_with_price_per_gpu_hour" in data["notes"]


def test_unpriced_card_is_planned_for_its_owner():
    from calc.plan import plan_dict

    out = plan_dict(
        {"model": "qwen3-8b", "method": "qlora", "dataset_tokens": 20_000_000, "gpu": "rtx-4080"}
    )
    assert "price_is_none" in out["warnings"]
    assert (
        out["cost_usd"]["price"]["usd_per_gpu_hour"] == 0 and out["cost_usd"]["price"]["no_price"]
    )
    assert out["time_hours"] > 0 and out["fits_selected_gpu"]
    configs = out["recommendations"]["configs"]
    unpriced = [c for c in configs if "price_is_none" in c["warnings"]]
    assert {c["gpu"] for c in unpriced} <= UNPRICED and any(
        c["gpu"] == "rtx-4080" for c in unpriced
    )
    assert configs[-len(unpriced) :] == unpriced  # ranked after every priced configuration
    cheapest = next(c for c in configs if c["id"] == out["recommendations"]["cheapest"])
    assert "price_is_none" not in cheapest["warnings"]
    # an owner who gives a price gets a priced plan
    priced = plan_dict(
        {
            "model": "qwen3-8b",
            "method": "qlora",
            "dataset_tokens": 20_000_000,
            "gpu": "rtx-4080",
            "price_per_gpu_hour": 0.2,
        }
    )
    assert "price_is_none" not in priced["warnings"]


def test_gddr_cards_listed_at_full_rate_fp32_accumulate_have_a_class_of_their_own():
    """GeForce cards are listed at half their FP16-accumulate tensor rate (FP32 accumulate), the
    workstation and data-centre GDDR cards at the full rate their power limits do not sustain:
    classes of their own, so one kind's measured rows do not set the other's efficiency; the
    Ampere ones apart from the Ada and Blackwell ones (Answer.AI's RTX A5000 reached 0.53 of its
    rate where its RTX 6000 Ada reached 0.36, same code and settings)."""
    from calc import gpus, timing

    geforce = {
        "rtx-2080-ti",
        "rtx-3090",
        "rtx-4090",
        "rtx-5090",
        "rtx-4080",
        "rtx-5080",
        "rtx-4060-ti-16gb",
    }
    pro = {"l4", "l40s", "rtx-6000-ada", "rtx-pro-6000", "t4"}
    ampere_pro = {"rtx-a5000", "rtx-a6000", "a40"}
    assert {gpus.get_gpu(g).utilisation_class for g in geforce} == {"gddr"}
    assert {gpus.get_gpu(g).utilisation_class for g in pro} == {"gddr-pro"}
    assert {gpus.get_gpu(g).utilisation_class for g in ampere_pro} == {"gddr-pro-ampere"}
    assert timing.default_mfu("gddr-pro") < timing.default_mfu("gddr-pro-ampere")
    assert timing.default_mfu("gddr-pro-ampere") < timing.default_mfu("gddr")


def test_derived_rates_are_marked_in_the_catalogue_and_on_the_gpu_page():
    """A figure computed from a published one (the source says DERIVED) is named in the row's
    ``derived`` column, and the GPU page's catalogue table says which, in its language."""
    from calc import gpus
    from macros import guides

    for gpu in gpus.all_gpus():
        says = "BF16 w/ FP32 acc dense is DERIVED" in gpu.source or (
            "dense BF16 w/ FP32 acc is DERIVED" in gpu.source
        )
        assert says <= ("bf16_dense_tflops" in gpu.derived), gpu.id
        # the FP32 rate's own source says DERIVED exactly when the row marks it
        assert gpu.fp32_source.startswith("DERIVED") == ("fp32_tflops" in gpu.derived), gpu.id
    assert gpus.get_gpu("rtx-pro-6000").derived == (
        "bf16_dense_tflops",
        "fp8_dense_tflops",
        "fp32_tflops",
        "sustained_clock_mhz",
    )
    assert gpus.get_gpu("h100-sxm").derived == ("boost_clock_mhz",)
    assert gpus.get_gpu("rtx-pro-6000").to_dict()["derived"] == [
        "bf16_dense_tflops",
        "fp8_dense_tflops",
        "fp32_tflops",
        "sustained_clock_mhz",
    ]
    assert "dense BF16 rate, dense FP8 rate, FP32 rate" in guides.gpu_catalogue("en")
    assert "velocidad BF16 densa, velocidad FP8 densa, velocidad FP32" in guides.gpu_catalogue("es")


def test_every_card_has_a_sourced_fp32_rate_below_its_tensor_rate():
    """FP32 without tensor cores, from the datasheets (or DERIVED, saying how): the rate fp32
    matmuls run at. NVIDIA cards: below the BF16 tensor rate (A100 19.5 against 312); the
    GeForce and workstation cards keep full-rate FP32 lanes (RTX 4090 82.6 against 165.2)."""
    from calc import gpus

    for gpu in gpus.all_gpus():
        assert 0 < gpu.fp32_tflops and gpu.fp32_source, gpu.id
        if gpu.vendor == "nvidia":
            assert gpu.fp32_tflops < gpu.bf16_dense_tflops, gpu.id
    assert gpus.get_gpu("a100-80gb-sxm").fp32_tflops == 19.5
    assert gpus.get_gpu("h100-sxm").fp32_tflops == 67
    assert gpus.get_gpu("rtx-4090").fp32_flops == 82.6e12


def test_sustained_clocks_follow_the_stated_count_from_each_die_familys_reference():
    """A card's sustained clock is the boost clock where it has at least the board power per
    compute unit of its die family's reference, else the reference's clock x (power ratio)^(1/3)
    between its base and boost clocks: recomputed here for every derived row, marked derived
    exactly where the count cuts the clock; a card without a reference runs at its boost clock
    unless its vendor published the clock it holds (MEASURED in its source)."""
    from calc import gpus

    cut, measured = set(), {}
    for gpu in gpus.all_gpus():
        assert gpu.clock_source and gpu.compute_units > 0, gpu.id
        if not gpu.clock_reference:
            if "Sustained MEASURED" in gpu.clock_source:
                assert 0 < gpu.sustained_clock_mhz < gpu.boost_clock_mhz, gpu.id
                measured[gpu.id] = gpu.sustained_clock_mhz
            else:
                assert gpu.sustained_clock_mhz == gpu.boost_clock_mhz, gpu.id
            assert "sustained_clock_mhz" not in gpu.derived, gpu.id
            continue
        ref = gpus.get_gpu(gpu.clock_reference)
        assert not ref.clock_reference, f"{gpu.id}: its reference is a reference"
        assert (ref.vendor, ref.stack) == (gpu.vendor, gpu.stack), gpu.id
        expected = gpus.power_limited_clock_mhz(gpu, ref)
        assert gpu.sustained_clock_mhz == round(expected), gpu.id
        derived = gpu.sustained_clock_mhz < gpu.boost_clock_mhz
        assert ("sustained_clock_mhz" in gpu.derived) == derived, gpu.id
        assert ("sustained DERIVED" in gpu.clock_source) == derived, gpu.id
        if derived:
            cut.add(gpu.id)
    # the power-limited cards of the issue lose clock, the 450-575 W GeForce flagships do not
    assert {"l4", "rtx-6000-ada", "rtx-pro-6000", "l40s", "a40", "rtx-a6000", "t4"} <= cut
    assert {"rtx-4090", "rtx-5090", "rtx-4080", "a100-80gb-sxm", "h200"}.isdisjoint(cut)
    l4 = gpus.get_gpu("l4")
    assert l4.sustained_clock_mhz == round(2520 * ((72 / 58) / (450 / 128)) ** (1 / 3)) == 1781
    assert l4.clock_factor == 1781 / 2040
    # the T4 (70 W for 40 SMs) against Turing's GeForce flagship: about three quarters of its
    # boost clock, above the 585 MHz base clock a continuous GEMM drops it to
    t4 = gpus.get_gpu("t4")
    assert t4.clock_reference == "rtx-2080-ti"
    assert t4.sustained_clock_mhz == round(1545 * ((70 / 40) / (250 / 68)) ** (1 / 3)) == 1206
    # AMD's published dense BF16 GEMM clocks (ROCm blogs, Max-Achievable FLOPs part 2)
    assert measured == {"mi300x": 1207, "mi325x": 1447}
    assert not any(g.clock_reference in measured for g in gpus.all_gpus())


def test_the_count_holds_at_base_and_boost():
    """The derivation never leaves the card's own clock range, and more power per unit than the
    reference means the boost clock, whatever the reference's clock."""
    from dataclasses import replace

    from calc import gpus

    ref = gpus.get_gpu("rtx-4090")
    l4 = gpus.get_gpu("l4")
    starved = replace(l4, board_power_w=1.0)
    assert gpus.power_limited_clock_mhz(starved, ref) == l4.base_clock_mhz
    rich = replace(l4, board_power_w=1000.0)
    assert gpus.power_limited_clock_mhz(rich, ref) == l4.boost_clock_mhz
    more = replace(l4, board_power_w=80.0)
    assert gpus.power_limited_clock_mhz(more, ref) > gpus.power_limited_clock_mhz(l4, ref)


def test_the_datasheet_rates_are_computed_at_the_boost_clock():
    """The clock the catalogue calls boost is the one behind the datasheet's tensor rate: units x
    FLOP per unit and clock x boost gives the BF16 figure (512 FLOP per SM and clock for the
    GeForce cards' FP32 accumulate, 1024 for the workstation and data-centre GDDR cards and the
    Turing T4, 2048 for the A100 and the MI300X, 4096 for Hopper and the MI355X), so scaling by
    sustained / boost scales that rate. The A10G's rate is a measured GEMM (not at a clock)."""
    from calc import gpus

    for gpu in gpus.all_gpus():
        if gpu.boost_clock_mhz <= 0 or gpu.id == "a10g":
            continue
        per_clock = gpu.bf16_dense_tflops * 1e6 / (gpu.compute_units * gpu.boost_clock_mhz)
        assert any(abs(per_clock / k - 1) < 0.015 for k in (512, 1024, 2048, 4096)), (
            gpu.id,
            per_clock,
        )


def test_the_gpu_page_shows_the_clocks_and_marks_a_derived_sustained_clock():
    from macros import guides

    for lang, header, mark in (
        ("en", "Sustained clock (MHz)", "sustained clock"),
        ("es", "Reloj sostenido (MHz)", "reloj sostenido"),
    ):
        html = guides.gpu_catalogue(lang, ["l4", "rtx-4090"])
        assert header in html and mark in html
        assert 'data-field="sustained_clock_mhz"' in html
        assert 'data-value="1781"' in html
        sources = guides.gpu_sources(lang, ["l4"])
        assert "rtx-4090 reference" in sources


@pytest.mark.parametrize("lang, words", [("en", "not published"), ("es", "no publicado")])
def test_a_clock_the_vendor_does_not_publish_is_not_shown_as_zero(lang, words):
    """gpus.csv stores 0 for a clock with no published figure (B200: none; MI300X: no base
    clock); the catalogue page says so in words rather than printing 0 MHz."""
    from macros import guides

    b200, mi300x = gpus.get_gpu("b200"), gpus.get_gpu("mi300x")
    assert b200.base_clock_mhz == b200.boost_clock_mhz == 0 and mi300x.base_clock_mhz == 0
    html = guides.gpu_catalogue(lang, ["b200", "mi300x", "h100-sxm"])
    assert html.count(f'data-published="false">{words}<') == 4
    assert 'data-field="base_clock_mhz"' in html  # the H100's published base clock stays a number
    assert 'data-value="0" data-kind="int" data-field="' not in html
