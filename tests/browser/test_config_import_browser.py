"""The calculator's "paste your training config" box in headless Chromium: the numbers
after an import equal ``python -m calc plan --config FILE`` (with the page's own plan
inputs), in both languages; the key report is shown, the setup goes into the URL, and the
export buttons write what ``calc.config_import.export_config`` writes."""

from __future__ import annotations

import json
import subprocess
import sys
from urllib.parse import parse_qsl, urlsplit

import pytest
from conftest import REPO_ROOT
from calculator_page import assert_parity, request_for

from calc.config_import import export_config
from calc.config_import.cli import import_file
from calc.fields import PLAN, keys
from macros import calculator

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CONFIGS = REPO_ROOT / "tests" / "configs"
FILES = ["axolotl/qlora.yml", "torchtune/lora.yaml", "trl/lora.json", "llamafactory/multigpu.yaml"]


def cli_plan(path, overrides: dict) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "calc", "plan", "--config", str(path), "--request", "-"],
        input=json.dumps(overrides),
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout)


def paste_and_import(calc, text: str) -> None:
    page = calc.page
    calc.navigate({})
    box = page.locator("#calc details.calc-import")
    if not box.evaluate("el => el.open"):
        page.click("#calc .calc-import summary")
    calc.wait_worker()  # the import goes through the worker
    page.fill("#calc-import-text", text)
    page.click("#calc .calc-import-run")
    page.wait_for_function("document.getElementById('calc').dataset.importStatus === 'done'")
    calc.settle()


@pytest.mark.parametrize("name", FILES)
def test_pasted_config_gives_the_cli_numbers(calc_page, name):
    path = CONFIGS / name
    paste_and_import(calc_page, path.read_text())
    result = import_file(str(path))
    defaults = calculator.default_request()
    overrides = {
        k: v for k, v in defaults.items() if k in keys(PLAN) and k not in result.get("plan", {})
    }
    response = cli_plan(path, overrides)
    assert_parity(calc_page.outputs(), response, calc_page.lang)
    page = calc_page.page
    # every key of the report is shown, with its status
    rows = page.locator("#calc .calc-import-report tr[data-key]")
    assert rows.count() == len(result["keys"])
    shown = dict(
        zip(
            rows.evaluate_all("els => els.map(e => e.dataset.key)"),
            rows.evaluate_all("els => els.map(e => e.dataset.status)"),
            strict=True,
        )
    )
    assert shown == {e["key"]: e["status"] for e in result["keys"]}
    # the imported setup is in the URL: reloading it gives the same request
    query = dict(parse_qsl(urlsplit(page.url).query))
    request = request_for(query)
    for key, value in result["request"].items():
        if key == "lora_targets" and isinstance(value, list):
            assert request[key] == value
        elif key in request:
            assert request[key] == value, key


def test_export_buttons_write_the_formats(calc_page):
    path = CONFIGS / "axolotl/lora.yml"
    paste_and_import(calc_page, path.read_text())
    page = calc_page.page
    query = dict(parse_qsl(urlsplit(page.url).query))
    # the page sends its whole plan request; the exporters write the estimate keys and epochs
    request = {k: v for k, v in request_for(query).items() if k not in keys(PLAN) or k == "epochs"}
    for fmt in ("axolotl", "trl", "llamafactory", "torchtune", "deepspeed", "accelerate"):
        page.click(f'#calc button.calc-export[data-format="{fmt}"]')
        page.wait_for_function(
            "f => document.getElementById('calc').dataset.exportStatus === f", arg=fmt
        )
        page.wait_for_function(
            "f => document.getElementById('calc-export-text').dataset.format === f", arg=fmt
        )
        assert page.input_value("#calc-export-text") == export_config(request, fmt)


def test_broken_config_is_reported_and_keeps_the_result(calc_page):
    page = calc_page.page
    calc_page.navigate({})
    calc_page.wait_worker()
    before_outputs = calc_page.outputs()
    if not page.locator("#calc details.calc-import").evaluate("el => el.open"):
        page.click("#calc .calc-import summary")
    page.fill(
        "#calc-import-text",
        "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
        + "".join(
            f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n"
            for i in range(8)
        ),
    )
    page.click("#calc .calc-import-run")
    page.wait_for_function("document.getElementById('calc').dataset.importStatus === 'error'")
    assert (
        page.get_attribute("#calc .calc-import-error", "data-error-code")
        == "config_alias_expansion"
    )
    assert calc_page.outputs() == before_outputs


def test_unknown_model_keeps_the_form_model_and_offers_presets(calc_page):
    page = calc_page.page
    text = (
        "base_model: someone/llama-3.1-8b-finetune\nadapter: lora\nlora_r: 64\nsequence_len: 1024\n"
    )
    paste_and_import(calc_page, text)
    assert page.locator("#calc .calc-import-model").is_visible()
    query = dict(parse_qsl(urlsplit(page.url).query))
    assert "model" not in query and query["lora_rank"] == "64"  # the page's model stays
    picks = page.locator("#calc button.calc-import-pick")
    assert picks.count() >= 1
    current = page.input_value("#calc-model")
    ids = picks.evaluate_all("els => els.map(e => e.dataset.model)")
    other = next(i for i, pid in enumerate(ids) if pid != current)  # a change recomputes
    picks.nth(other).click()
    calc_page.settle()
    assert page.input_value("#calc-model") == ids[other]


def test_refused_values_are_shown_in_words_and_the_defaults_used(calc_page):
    """A value the tool would refuse is a row marked invalid that says the value, why, what is
    accepted and the default used instead, in the page's language (the catalogue's words)."""
    from calc.catalogue import catalogue

    path = CONFIGS / "invalid" / "axolotl_issue.yml"
    paste_and_import(calc_page, path.read_text())
    page = calc_page.page
    cat = catalogue(calc_page.lang)
    row = page.locator('#calc .calc-import-report tr[data-key="lora_r"]')
    assert row.get_attribute("data-status") == "invalid"
    text = row.inner_text()
    for words in (
        "-5",
        cat.get("import.invalid.out_of_range"),
        cat.get("import.status.invalid"),
        "65536",
    ):
        assert words in text, words
    assert cat.get("import.invalid_count").split("{invalid}")[1].strip()[:20] in page.inner_text(
        "#calc .calc-import-message"
    )
    query = dict(parse_qsl(urlsplit(page.url).query))
    assert request_for(query)["lora_rank"] == 8  # peft's default in place of -5
