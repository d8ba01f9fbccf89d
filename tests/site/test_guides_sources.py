"""The Markdown sources of the guides: language parity, front matter, no hand-typed
figures, complete translations. No build needed."""

from __future__ import annotations

import re

import pytest

from macros import labels
from conftest import REPO_ROOT

DOCS = REPO_ROOT / "docs"
# The calculator page belongs to the calculator's own tests; the rest are the guides'.
OWNED_BY_OTHERS = {"calculator.md"}
PAGES = sorted(
    p.relative_to(DOCS / "es").as_posix()
    for p in (DOCS / "es").rglob("*.md")
    if p.relative_to(DOCS / "es").as_posix() not in OWNED_BY_OTHERS
)

HEADING = re.compile(r"^(#{1,6}) (.+?)\s*$", re.M)
ANCHOR = re.compile(r"\{ *#([A-Za-z0-9_-]+) *\}\s*$")
JINJA = re.compile(r"\{\{.*?\}\}|\{%.*?%\}", re.S)
FENCE = re.compile(r"^```.*?^```", re.M | re.S)

# A number followed (or preceded, for currencies) by a unit of memory, time or money.
FIGURE = re.compile(
    r"(?<![\w.,])\d[\d.,\u202f\u00a0]*\s?(?:GB|GiB|MB|MiB|TB|TiB|GPU-h|h|horas?|hours?|"
    r"min|USD|EUR|US\$|\$|€)(?![\w])"
    r"|[$€]\s?\d",
    re.I,
)
# Figures that are names, not quantities calc computes, per page; each with its reason.
ALLOWED_FIGURES = {
    # card classes are product names ("an 80 GB card"), not computed memory
    "guides/vram.md": {"16 GB", "16GB", "24 GB", "48 GB", "80 GB", "96 GB"},
    # the card class a 70B full fine-tuning is sized on ("a node of 80 GB cards")
    "index.md": {"80 GB"},
    # marketed capacities named to explain them (B200's 180 vs 192 GB) and card classes
    "gpus.md": {"16 GB", "96 GB", "180 GB", "192 GB"},
}


def front_matter(text: str) -> dict[str, str]:
    match = re.match(r"---\n(.*?)\n---\n", text, re.S)
    assert match, "no front matter"
    out = {}
    for line in match.group(1).splitlines():
        key, _, value = line.partition(":")
        out[key.strip()] = value.strip()
    return out


def headings(text: str) -> list[tuple[int, str | None]]:
    body = FENCE.sub("", text)
    out = []
    for hashes, title in HEADING.findall(body):
        anchor = ANCHOR.search(title)
        out.append((len(hashes), anchor.group(1) if anchor else None))
    return out


def read(lang: str, page: str) -> str:
    return (DOCS / lang / page).read_text(encoding="utf-8")


def test_guides_pages_present():
    for page in (
        "index.md",
        "guides/vram.md",
        "guides/cloud.md",
        "methodology/index.md",
        "gpus.md",
    ):
        assert page in PAGES


def test_same_pages_in_both_languages():
    es = {p.relative_to(DOCS / "es").as_posix() for p in (DOCS / "es").rglob("*.md")}
    en = {p.relative_to(DOCS / "en").as_posix() for p in (DOCS / "en").rglob("*.md")}
    assert es == en


@pytest.mark.parametrize("page", PAGES)
def test_same_headings_and_anchors(page):
    es, en = headings(read("es", page)), headings(read("en", page))
    assert es, f"{page}: no headings"
    assert es == en
    missing = [lvl for lvl, anchor in es if anchor is None]
    assert not missing, f"{page}: every heading needs an explicit {{ #anchor }}"
    anchors = [a for _, a in es]
    assert len(anchors) == len(set(anchors)), f"{page}: repeated anchor"


@pytest.mark.parametrize("page", PAGES)
def test_same_macro_calls(page):
    es = [re.sub(r"\s+", " ", m) for m in JINJA.findall(read("es", page))]
    en = [re.sub(r"\s+", " ", m) for m in JINJA.findall(read("en", page))]
    assert es == en


@pytest.mark.parametrize("lang", ["es", "en"])
@pytest.mark.parametrize("page", PAGES)
def test_title_and_description(page, lang):
    meta = front_matter(read(lang, page))
    assert meta.get("title"), f"{lang}/{page}: no title"
    assert len(meta.get("description", "")) >= 50, f"{lang}/{page}: no useful description"


@pytest.mark.parametrize("lang", ["es", "en"])
@pytest.mark.parametrize("page", PAGES)
def test_no_hand_typed_figures(page, lang):
    text = JINJA.sub("", read(lang, page))
    text = re.sub(r"^---\n.*?\n---\n", "", text, flags=re.S)
    found = {m.group(0).strip() for m in FIGURE.finditer(text)}
    extra = found - ALLOWED_FIGURES.get(page, set())
    assert not extra, f"{lang}/{page}: hand-typed figures {sorted(extra)}; use a macro"


@pytest.mark.parametrize(
    ("text", "hit"),
    [
        ("ocupa 14 GB", True),
        ("unos 3,5 GiB", True),
        ("cuesta $120", True),
        ("12 h", True),
        ("1.5 hours", True),
        ("20 €", True),
        ("rango 16", False),
        ("Llama 2 7B", False),
        ("2048 tokens", False),
        ("20-30 %", False),
    ],
)
def test_figure_pattern(text, hit):
    assert bool(FIGURE.search(text)) is hit


# --- the methodology's constants (their descriptions: tests/calc/test_catalogue.py) ------------


@pytest.mark.parametrize(
    ("value", "numeric"),
    [
        (4, True),
        (0.5, True),
        (True, False),
        ("a", False),
        ({"a": 0.5}, True),
        ({"a": "x"}, False),
        ((1, 2), True),
        ((), False),
        ({(1, 2): 0.9}, True),
    ],
)
def test_numeric_constant_rule(value, numeric):
    from macros.methodology import is_numeric_constant

    assert is_numeric_constant(value) is numeric


def test_every_validation_note_is_translated():
    from accuracy import throughput
    from macros.labels import translate_note

    result = throughput.compare()
    texts = [r["note"] for r in result["rows"]] + [r["reason"] for r in result["not_covered"]]
    assert all(r["reason"] for r in result["not_covered"]), "a row not covered without its reason"
    for text in filter(None, texts):
        es, en = (
            translate_note(text, "es"),
            translate_note(text, "en"),
        )  # raise on an untranslated part
        # one translated part per "; "-separated part, none empty, and Spanish is not English
        for out in (es, en):
            assert out.count("; ") == text.count("; ") and all(out.split("; ")), (text, out)
        assert es != en, text
    assert translate_note("", "es") == ""
    with pytest.raises(KeyError, match="no 'es' message"):
        translate_note(next(filter(None, texts)) + "; a note nobody translated", "es")


def test_every_request_key_has_a_label():
    """Setup lists name request keys: every key of the estimate and plan requests has one."""
    from calc.fields import spec_by_key

    missing = [k for k in spec_by_key("plan") if k != "model" and not _has_label("label." + k)]
    assert missing == []


def _has_label(key: str) -> bool:
    try:
        labels.text(key, "es"), labels.text(key, "en")
    except KeyError:
        return False
    return True


@pytest.mark.parametrize("lang", ["es", "en"])
def test_a_guide_table_shows_no_rental_price_instead_of_a_cost(lang):
    from macros.plan_tables import multi_gpu_plan

    setup = {"model": "qwen3-1.7b", "method": "qlora", "dataset_tokens": 1e7}
    words = labels.text("ui.no_rental_price", lang)
    unpriced = multi_gpu_plan(lang, "rtx-4060-ti-16gb", [2], ["ddp"], **setup)
    cells = re.findall(r'<td data-priced="false">([^<]*)</td>', unpriced)
    assert cells and set(cells) == {words}
    priced = multi_gpu_plan(lang, "rtx-4090", [2], ["ddp"], **setup)
    assert 'data-priced="false"' not in priced and words not in priced


def test_bytes_per_parameter_are_the_model_states_whatever_the_peak():
    # Llama 3.1 8B, AMP AdamW under the default library (fused AdamW), 8192 tokens: the peak
    # comes in the backward's last block, before the embedding's fp32 gradient exists, yet
    # weights, gradients and states are 4 + 4 + 8 bytes per parameter; a subtracted term
    # resolves as the page tests read it
    import html

    from macros.guides import bytes_per_param
    from macros.tables import resolve
    from page_numbers import expected_raw

    from calc.memory import estimate_dict

    request = {
        "model": "llama-3.1-8b",
        "method": "full",
        "precision": "bf16-mixed",
        "seq_len": 8192,
    }
    response = estimate_dict(request)
    assert response["peak_phase"] == "backward"
    assert response["components"]["gradients"] < 4 * response["params_total"]
    table = bytes_per_param("en", "llama-3.1-8b", [["bf16-mixed", "adamw"]])
    cells = re.findall(r'data-value="([^"]+)"[^>]*data-field="([^"]+)"', table)
    values = {html.unescape(field): float(value) for value, field in cells}
    grads = "model_states_bytes+-components.weights+-components.optimizer/params_total"
    assert values[grads] == pytest.approx(4.0)
    assert values["model_states_bytes/params_total"] == pytest.approx(16.0)
    for field in (grads, "model_states_bytes/params_total"):
        assert resolve(field, response) == expected_raw(field, response, request)


# Dense models a guide names by id rather than through ``ref``, each with its reason.
GUIDE_DENSE_MODELS = {
    # the "a 7B just fits on one 80 GB card" claim of other guides, checked on its own model
    "llama-2-7b",
    # the multi-GPU example of full fine-tuning by strategy
    "qwen3-14b",
}


def test_the_guides_examples_take_dense_models_from_calc_reference():
    """A guide's example on a dense model reads it from calc.reference (``ref.models``) or is
    one of GUIDE_DENSE_MODELS; the mixture of experts set beside the ladder is ``ref.moe``
    (calc.reference.MOE), its id never typed in a macro call nor its name in the prose."""
    from calc import reference
    from calc.presets import presets_listing
    from macros.rows import model_name

    dense = {p["id"] for p in presets_listing() if p["params_active"] == p["params_total"]}
    preset = next(p for p in presets_listing() if p["id"] == reference.MOE)
    for lang in ("es", "en"):
        for page in ("guides/vram.md", "guides/cloud.md"):
            text = (DOCS / lang / page).read_text(encoding="utf-8")
            named = set(re.findall(r'model="([^"]+)"', text)) & dense
            assert named <= GUIDE_DENSE_MODELS, (lang, page, sorted(named - GUIDE_DENSE_MODELS))
            # a quoted id, whether a keyword's value or an item of a models list
            calls = " ".join(JINJA.findall(text))
            assert f'"{reference.MOE}"' not in calls, (lang, page, reference.MOE)
            assert "ref.moe" in calls, (lang, page)
            # and its name in the prose too, in either spelling
            prose = JINJA.sub("", text)
            for typed in (model_name(reference.MOE), preset["hf_repo"].split("/")[-1]):
                assert typed not in prose, (lang, page, typed)


def test_the_guides_name_the_reference_ladder_from_calc():
    """The guides' words about the small / medium / large models come from calc.reference
    (``ref.names``, ``ref.sizes``, ``ref.models``), so a change of model changes them too."""
    from calc import reference
    from macros.reference_pages import model_size, variables
    from macros.rows import model_name

    ref = variables()
    for size, preset_id in reference.MODELS.items():
        assert ref["names"][size] == model_name(preset_id)
        assert ref["sizes"][size] == model_size(preset_id)
        assert re.fullmatch(r"\d+(\.\d+)?[BM]", ref["sizes"][size])
    assert model_size("llama-3.3-70b") == "70B"  # "Llama 3.3 70B Instruct": not the last word
    for lang in ("es", "en"):
        for page in ("guides/vram.md", "guides/cloud.md"):
            text = (DOCS / lang / page).read_text(encoding="utf-8")
            assert "{{ ref.sizes.medium }}" in text, (lang, page)
            # a ladder model's id in the prose is written through ref.models, never by hand
            for preset_id in reference.MODELS.values():
                assert f"`{preset_id}`" not in text, (lang, page, preset_id)
        vram = (DOCS / lang / "guides/vram.md").read_text(encoding="utf-8")
        assert "{{ ref.names.small }}, {{ ref.names.medium }}" in vram
    assert ref["ladder"] == list(reference.LADDER)
    assert ref["ladder_names"] == [model_name(m) for m in reference.LADDER]
    assert ref["moe"] == reference.MOE


def test_the_guides_climb_the_ladder_of_calc_reference():
    """The card-class tables and the words that list their models take ``ref.ladder``: no
    page keeps a list of its own, so a newer model enters every table and sentence at once."""
    from calc import reference

    for lang in ("es", "en"):
        vram = (DOCS / lang / "guides/vram.md").read_text(encoding="utf-8")
        cloud = (DOCS / lang / "guides/cloud.md").read_text(encoding="utf-8")
        assert "{% set class_models = ref.ladder %}" in vram, lang
        assert vram.count("models=class_models") >= 5, lang
        assert cloud.count("models=ref.ladder") == 2, lang
        for text in (vram, cloud):
            assert "ref.ladder_names[:-1]" in text, lang
            # a ladder literal: two of its ids quoted side by side
            for a, b in zip(reference.LADDER, reference.LADDER[1:], strict=False):
                assert f'"{a}", "{b}"' not in text, (lang, a, b)
