"""The site's one reference setup (``calc.reference``): what it is, the configuration
the summary matrix names for each cell, and that every page quotes that setup (the built site)."""

from __future__ import annotations

import html
import json
import re
from urllib.parse import parse_qsl, urlsplit

import pytest

import calc
from calc import gpus, presets, recommend, reference
from calc.fields import BY_KEY, PLAN, keys, spec_by_key

CELLS = [(size, method) for size in reference.MODELS for method in reference.METHODS]


@pytest.fixture(scope="module")
def plans() -> dict:
    """The reference plan of every matrix cell, computed once."""
    return {
        cell: calc.plan_setup(reference.request(reference.MODELS[cell[0]], cell[1]))
        for cell in CELLS
    }


# --- the setup itself -------------------------------------------------------------------------


def test_models_are_presets_ordered_by_size():
    sizes = {p["id"]: p["params_total"] for p in presets.presets_listing()}
    ids = list(reference.MODELS.values())
    assert all(i in sizes for i in ids)
    assert [sizes[i] for i in ids] == sorted(sizes[i] for i in ids)
    assert list(reference.MODELS) == ["small", "medium", "large"]


def test_ladder_is_dense_presets_ordered_by_size():
    """The card-class ladder: distinct presets, dense (a mixture of experts stands beside it),
    strictly growing, reaching the reference's medium and large models."""
    rows = {p["id"]: p for p in presets.presets_listing()}
    ladder = list(reference.LADDER)
    assert len(set(ladder)) == len(ladder) >= 6
    assert all(i in rows for i in ladder)
    assert all(rows[i]["params_active"] == rows[i]["params_total"] for i in ladder)
    sizes = [rows[i]["params_total"] for i in ladder]
    assert sizes == sorted(sizes) and len(set(sizes)) == len(sizes)
    assert {reference.MODELS["medium"], reference.MODELS["large"]} <= set(ladder)


def test_moe_is_a_mixture_of_experts_preset_beside_the_ladder():
    """The guides' mixture of experts: a preset whose active parameters are fewer than its
    total, Qwen3's MoE (the layout transformers 4 and 5 both load), within the ladder's sizes."""
    rows = {p["id"]: p for p in presets.presets_listing()}
    moe = rows[reference.MOE]
    assert moe["params_active"] < moe["params_total"]
    assert reference.MOE not in reference.LADDER
    assert presets.preset_row(reference.MOE)["config"]["model_type"] == "qwen3_moe"
    sizes = [rows[i]["params_total"] for i in reference.LADDER]
    assert sizes[0] < moe["params_total"] < sizes[-1]


# A preset "at the same size" as a ladder entry: within this factor of its parameters either
# way (Qwen3 8B and Qwen3.5 9B are one size; Gemma 3 12B and Gemma 4 31B are not).
SAME_SIZE = 1.25


def test_ladder_names_no_model_a_newer_one_of_its_family_replaces():
    """Each ladder entry is the newest dense preset of its family at its size: a newer release
    of the same series within :data:`SAME_SIZE` would make the ladder out of date."""
    rows = presets.presets_listing()
    by_id = {p["id"]: p for p in rows}
    for model in reference.LADDER:
        row = by_id[model]
        newer = [
            p["id"]
            for p in rows
            if p["series"] == row["series"]
            and p["params_active"] == p["params_total"]
            and row["params_total"] / SAME_SIZE
            <= p["params_total"]
            <= row["params_total"] * SAME_SIZE
            and p["released"] > row["released"]
        ]
        assert not newer, (model, newer)


def test_medium_model_is_the_hybrid_the_vram_guide_describes():
    """The VRAM guide says the medium model has Gated DeltaNet linear attention in three of
    every four blocks and a larger vocabulary than the large model: hold calc to those words."""
    arch = presets.get_preset(reference.MODELS["medium"])
    assert arch.linear_attention is not None and "kda" not in arch.extra  # Gated DeltaNet
    counts = dict(arch.block_counts)
    assert counts["linear_attention"] == 3 * counts["full_attention"]
    rows = {p["id"]: p for p in presets.presets_listing()}
    assert rows[reference.MODELS["medium"]]["vocab"] > rows[reference.MODELS["large"]]["vocab"]


def test_setup_is_the_requests_own_defaults():
    """The docstring's claim: every estimate key of the setup is the request's default, and
    the run is one epoch (the plan's default), so a page's setup is what the CLI does."""
    for key, value in reference.SETUP.items():
        if key in spec_by_key("estimate"):
            assert BY_KEY[key].default == value, key
    assert BY_KEY["epochs"].default == reference.SETUP["epochs"]
    assert reference.PRECISION["lora"] == BY_KEY["precision"].default
    assert set(reference.RUN_KEYS) <= set(keys(PLAN))


def test_matrix_quotes_hours_per_hundred_million_tokens():
    assert reference.SETUP["dataset_tokens"] * reference.SETUP["epochs"] == 100_000_000


def test_vocabulary_pair_differs_only_in_vocabulary():
    rows = {p["id"]: p for p in presets.presets_listing()}
    a, b = (rows[i] for i in reference.VOCABULARY_PAIR)
    for key in (
        "layers",
        "hidden",
        "heads",
        "kv_heads",
        "head_dim",
        "intermediate",
        "num_experts",
        "tie_word_embeddings",
    ):
        assert a[key] == b[key], key
    assert a["vocab"] < b["vocab"]
    # and what the vocabulary costs: more logits, a larger card
    small, large = (
        calc.estimate({"model": m, **reference.estimate_setup("lora")})
        for m in reference.VOCABULARY_PAIR
    )
    assert large["components"]["logits"] > 2 * small["components"]["logits"]
    cards = [
        calc.plan_setup(reference.request(m, "lora"))["recommendations"]["smallest_single_gpu"][
            "gpu"
        ]
        for m in reference.VOCABULARY_PAIR
    ]
    assert gpus.get_gpu(cards[0]).memory_bytes < gpus.get_gpu(cards[1]).memory_bytes


# --- the configuration the matrix names -----------------------------------------------------


def _total_memory(config: dict) -> int:
    return config["num_gpus"] * gpus.get_gpu(config["gpu"]).memory_gb_marketed


@pytest.mark.parametrize("cell", CELLS, ids=[f"{s}-{m}" for s, m in CELLS])
def test_pick_is_the_smallest_like_for_like_configuration(cell, plans):
    plan = plans[cell]
    config = reference.pick(plan)
    assert config is not None, cell
    assert config in plan["recommendations"]["configs"]
    assert not config["warnings"]
    assert reference.priced_both_ways(config["gpu"], reference.SETUP["price_tier"])
    others = [
        c
        for c in plan["recommendations"]["configs"]
        if not c["warnings"] and reference.priced_both_ways(c["gpu"], "managed")
    ]
    assert _total_memory(config) == min(_total_memory(c) for c in others)


@pytest.mark.parametrize("cell", CELLS, ids=[f"{s}-{m}" for s, m in CELLS])
def test_picked_configuration_fits_its_card(cell, plans):
    """The cell is a real configuration: planned on its own card, count and sharding, the
    upper end of its per-GPU range fits the card's memory, and its time is the one the
    recommendation ranked."""
    model = reference.MODELS[cell[0]]
    config = reference.pick(plans[cell])
    own = calc.plan_setup(reference.config_request(model, cell[1], config))
    assert own["fits_selected_gpu"]
    fit = own["fits"][config["gpu"]]
    assert fit["device_range_bytes"][1] <= gpus.get_gpu(config["gpu"]).memory_bytes
    assert own["time_hours"] == pytest.approx(config["time_hours"], rel=1e-9)
    assert own["cost_usd"]["total"] == pytest.approx(config["cost_usd"], rel=1e-9)
    interruptible = calc.plan_setup(
        reference.config_request(model, cell[1], config, interruptible=True)
    )
    assert not any(w.startswith("price_") for w in interruptible["warnings"])
    assert interruptible["cost_usd"]["per_gpu_hour"] < own["cost_usd"]["per_gpu_hour"]


def test_large_full_fine_tuning_has_an_answer(plans):
    """Never "none, not even with 8": the 70B full fine-tuning cell names a sharded
    configuration over several cards."""
    config = reference.pick(plans[("large", "full")])
    assert config["num_gpus"] > 1 and config["sharding"] == "zero3"


@pytest.mark.parametrize("offload", ["none", "optimizer"])
def test_fewest_80gb_cards_for_large_full_fine_tuning(offload):
    """The home page's count of 80 GB cards is the fewest: it fits, half as many does not."""
    model, card = reference.MODELS["large"], reference.OFFLOAD_CARD
    assert gpus.get_gpu(card).memory_gb_marketed == 80
    n = reference.smallest_count(
        calc.plan_setup, model, "full", card, "zero3", recommend.GPU_COUNTS, cpu_offload=offload
    )
    assert n is not None and n > 1
    fits = calc.plan_setup(
        reference.request(
            model, "full", gpu=card, num_gpus=n, sharding="zero3", cpu_offload=offload
        )
    )
    assert fits["fits_selected_gpu"]
    fewer = calc.plan_setup(
        reference.request(
            model,
            "full",
            gpu=card,
            num_gpus=n // 2,
            sharding="zero3" if n // 2 > 1 else "none",
            cpu_offload=offload,
        )
    )
    assert not fewer["fits_selected_gpu"]
    if offload == "none":
        assert n > 8  # across nodes: no single 8-GPU node of 80 GB cards holds it


def test_calculator_first_view_is_the_reference_setup():
    from macros.calculator import default_request

    first = default_request()
    assert first["model"] == reference.MODELS["small"]
    expected = {
        **reference.estimate_setup(first["method"]),
        **{k: reference.SETUP[k] for k in reference.RUN_KEYS},
    }
    for key, value in expected.items():
        assert first.get(key, BY_KEY[key].default if key in BY_KEY else None) == value, key


# --- the built pages ----------------------------------------------------------------------------

SOURCE = re.compile(r'data-source="([^"]*)"')
MATRIX = re.compile(
    r'<table class="calc-table__table" data-table="reference_matrix".*?</table>', re.S
)
ROW = re.compile(
    r'<tr data-source="([^"]*)" data-size="(\w+)" data-method="(\w+)">(.*?)</tr>', re.S
)
CELL = re.compile(r"<td ([^>]*)>(.*?)</td>", re.S)
HREF = re.compile(r'<a href="([^"]*)"')
INLINE = re.compile(
    r'<span data-value="([^"]*)" data-kind="([^"]*)" data-field="([^"]*)" '
    r'data-source="([^"]*)">([^<]*)</span>'
)
PAGES = ["index.html", "guides/vram/index.html", "guides/cloud/index.html"]


def _read(site, rel: str) -> str:
    return (site / rel).read_text(encoding="utf-8")


def _attrs(text: str) -> dict:
    return {k: html.unescape(v) for k, v in re.findall(r"data-([\w-]+)=[\"']([^\"']*)[\"']", text)}


def _link_request(href: str) -> dict:
    """What the calculator would compute for a link: its first view, with the URL's keys."""
    from macros.calculator import default_request, request_fields

    out = default_request()
    fields = request_fields()
    for key, text in parse_qsl(urlsplit(html.unescape(href)).query):
        kind = fields[key].kind
        if text in ("true", "false"):
            out[key] = text == "true"
        elif kind == "int":
            out[key] = int(text)
        elif kind == "number":
            out[key] = float(text)
        else:
            out[key] = text
    return out


@pytest.mark.parametrize("prefix", ["", "en/"])
@pytest.mark.parametrize("page", ["index.html", "guides/vram/index.html"])
def test_matrix_cells_equal_calc(built_site, prefix, page):
    """Each row of the matrix is the reference request on the picked configuration; its
    figures are calc's for that request (on demand, and interruptible for the last cost);
    its links open the calculator on exactly those requests."""
    text = _read(built_site, prefix + page)
    tables = MATRIX.findall(text)
    assert len(tables) == len(reference.MODELS)
    seen = set()
    for table in tables:
        for source, size, method, body in ROW.findall(table):
            request = json.loads(html.unescape(source))["request"]
            model = reference.MODELS[size]
            config = reference.pick(calc.plan_setup(reference.request(model, method)))
            assert request == reference.config_request(model, method, config)
            cells = CELL.findall(body)
            ref_cell = _attrs(cells[0][0])
            assert ref_cell["ref"] == config["id"]
            on_demand, interruptible = calc.plan_setup(request), None
            for attrs_text, inner in cells[1:]:
                attrs = _attrs(attrs_text)
                own = json.loads(attrs["source"])["request"] if "source" in attrs else request
                if own != request:
                    assert own == {**request, "interruptible": True}
                    interruptible = calc.plan_setup(own)
                plan = interruptible if own != request else on_demand
                node = plan
                for part in attrs["field"].split("."):
                    node = node[part]
                assert float(attrs["value"]) == pytest.approx(node, rel=1e-12)
                for href in HREF.findall(inner):
                    got = _link_request(href)
                    assert {k: got[k] for k in own} == own, href
            assert interruptible is not None
            href = HREF.search(cells[0][1]).group(1)
            assert {k: _link_request(href)[k] for k in request} == request
            seen.add((size, method))
    assert seen == set(CELLS)


ANSWER = re.compile(r'<section class="answer-box"(.*?)</section>', re.S)
ANSWER_FIGURE = re.compile(
    r'<span data-value="([^"]*)" data-kind="([^"]*)" data-field="([^"]*)" '
    r'data-source="([^"]*)">([^<]*)</span>'
)


@pytest.mark.parametrize("prefix", ["", "en/"])
@pytest.mark.parametrize("page", PAGES)
def test_answer_box_opens_the_page_with_calcs_answer(built_site, prefix, page):
    """The home page and each guide open with one answer box, before any section: the
    configuration the matrix picks for the small model with LoRA, calc's verdict on it in the
    catalogue's word, the hours and the cost on demand and interruptible (each figure calc's
    for its request, shown as calc.numfmt writes it), and a link that opens the calculator on
    that very request."""
    from calc.catalogue import catalogue
    from calc.numfmt import format_kind

    lang = "en" if prefix else "es"
    text = _read(built_site, prefix + page)
    boxes = ANSWER.findall(text)
    assert len(boxes) == 1, page
    article = text[text.index('<article class="md-content__inner') :]
    assert article.index('class="answer-box"') < article.index("<h2"), "the box comes first"
    box = boxes[0]
    model = reference.MODELS["small"]
    config = reference.pick(calc.plan_setup(reference.request(model, "lora")))
    request = reference.config_request(model, "lora", config)
    plan = calc.plan_setup(request)
    card = re.search(r'data-ref="([^"]*)"[^>]*>([^<]*)</span>', box)
    assert card.group(1) == config["id"]
    assert gpus.get_gpu(config["gpu"]).name in html.unescape(card.group(2))
    state = plan["fits"][config["gpu"]]["verdict"]
    verdict = re.search(r'<strong data-verdict="(\w+)"[^>]*>([^<]*)</strong>', box)
    assert verdict.groups() == (state, catalogue(lang).message("ui.verdict_" + state))
    figures = ANSWER_FIGURE.findall(box)
    assert [f[2] for f in figures] == ["time_hours", "cost_usd.total", "cost_usd.total"]
    for value, kind, field, source, shown in figures:
        own = json.loads(html.unescape(source))["request"]
        assert own in (request, {**request, "interruptible": True})
        raw = calc.plan_setup(own)
        for part in field.split("."):
            raw = raw[part]
        assert float(value) == pytest.approx(raw, rel=1e-12)
        assert shown == format_kind(raw, kind, lang)
    href = HREF.search(box.split('class="answer-box__link"')[1]).group(1)
    got = _link_request(href)
    assert {k: got[k] for k in request} == request, href


@pytest.mark.parametrize("prefix", ["", "en/"])
def test_every_page_quotes_the_reference_setup(built_site, prefix):
    """The home page states the setup calc.reference defines; every plan the home page and
    the guides quote runs the reference's data (no more 50 M x 3 against 100 M x 1), and the
    calculator's first view is the same setup."""
    home = _read(built_site, prefix + "index.html")
    stated = re.search(r'data-reference-setup="([^"]*)"', home)
    assert stated, "no reference setup on the home page"
    assert json.loads(html.unescape(stated.group(1))) == {
        "models": reference.MODELS,
        "precision": reference.PRECISION,
        "setup": reference.SETUP,
    }
    run = {k: reference.SETUP[k] for k in ("dataset_tokens", "epochs")}
    checked = 0
    for page in PAGES:
        for source in SOURCE.findall(_read(built_site, prefix + page)):
            data = json.loads(html.unescape(source))
            request = data.get("request", {})
            if data.get("command") != "plan":
                continue
            for key, value in run.items():
                assert request.get(key, BY_KEY[key].default) == value, (page, request)
            # the setup's length and attention, or the guides' one long-sequence example's
            long = request.get("seq_len") == reference.LONG_CONTEXT["seq_len"]
            for key in ("seq_len", "micro_batch_size", "gradient_checkpointing", "attention"):
                expected = (reference.LONG_CONTEXT if long else {}).get(key, reference.SETUP[key])
                assert request.get(key, BY_KEY[key].default) == expected, (page, key)
            checked += 1
    assert checked >= 50
    calculator = _read(built_site, prefix + "calculator/index.html")
    first = json.loads(
        html.unescape(re.search(r"data-static-request=\"([^\"]*)\"", calculator).group(1))
    )
    assert first["model"] == reference.MODELS["small"]
    for key in (
        "dataset_tokens",
        "epochs",
        "price_tier",
        "seq_len",
        "micro_batch_size",
        "framework",
    ):
        assert first.get(key) == reference.SETUP[key], key
    # the libraries with no profile: under any other, the default one included, the form keeps
    # a behaviour the reader set in the URL even at its own default
    profileless = re.search(r"data-profileless=\"([^\"]*)\"", calculator).group(1)
    assert json.loads(html.unescape(profileless)) == ["generic"]


@pytest.mark.parametrize("prefix", ["", "en/"])
def test_home_and_calculator_quote_the_error_by_method(built_site, prefix):
    """Memory and time, held out, for each of full, LoRA and QLoRA; not one median."""
    for page in ("index.html", "calculator/index.html"):
        text = _read(built_site, prefix + page)
        memory = set(re.findall(r'"group":"(method:\w+)"', html.unescape(text)))
        time = set(re.findall(r'"group":"(fine-tune/\w+)"', html.unescape(text)))
        assert memory >= {"method:full", "method:LoRA", "method:QLoRA"}, page
        assert time >= {"fine-tune/full", "fine-tune/lora", "fine-tune/qlora"}, page
        assert 'data-field="loso.median_abs_pct"' in text and 'data-field="pct:loso_median"' in text

    # the calculator page is outside the guides' browser check: its quoted figures here
    from calc.numfmt import format_kind, parse_number
    from page_numbers import expected_raw, response_for

    text = _read(built_site, prefix + "calculator/index.html")
    spans = INLINE.findall(text)  # the prose around the form (its figures are data-output)
    assert len(spans) >= 9
    for value, kind, field, source, shown in spans:
        response, request = response_for(json.loads(html.unescape(source)))
        raw = expected_raw(html.unescape(field), response, request)
        assert float(value) == pytest.approx(raw, rel=1e-12), field
        lang = "en" if prefix else "es"
        assert parse_number(shown, lang) == parse_number(format_kind(raw, kind, lang), lang), field


@pytest.mark.parametrize("url", ["", "en/", "guides/vram/", "en/guides/vram/"])
def test_matrix_reads_on_a_phone_without_scrolling_sideways(page, site_server, url):
    """At 390 px each of the matrix's tables fits its box: the whole answer is on screen."""
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(site_server.url(url))
    widths = page.evaluate(
        "Array.from(document.querySelectorAll('.ref-matrix'))"
        ".map(e => e.scrollWidth - e.clientWidth)"
    )
    assert len(widths) == len(reference.MODELS)
    assert max(widths) <= 0, widths
