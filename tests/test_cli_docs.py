"""The API page's macros (macros/cli_docs.py): generated from calc, complete, in both languages."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

import calc
from calc.plan import PLAN_FIELDS
from calc.request import ESTIMATE_FIELDS
from macros import cli_docs

ROOT = Path(__file__).resolve().parent.parent


def env(lang: str, url: str = "api/"):
    return SimpleNamespace(conf={"theme": {"language": lang}}, page=SimpleNamespace(url=url))


@pytest.mark.parametrize("lang", ["es", "en"])
def test_flags_tables_list_every_key(lang):
    estimate = cli_docs.cli_flags_table(env(lang), "estimate")
    plan = cli_docs.cli_flags_table(env(lang), "plan")
    for key in ESTIMATE_FIELDS:
        assert f"`--{key.replace('_', '-')}`" in estimate
    for key in PLAN_FIELDS:
        assert f"`--{key.replace('_', '-')}`" in plan
    assert "`--no-gradient-checkpointing`" in estimate


@pytest.mark.parametrize("lang", ["es", "en"])
def test_response_tables_list_every_key_with_its_text(lang):
    for command, response, texts in (
            ("estimate", calc.estimate(cli_docs.REQUEST), cli_docs.ESTIMATE_KEYS),
            ("plan", calc.plan(cli_docs.PLAN_REQUEST), cli_docs.PLAN_KEYS)):
        table = cli_docs.response_fields(env(lang), command)
        for key in response:
            assert f"| `{key}` |" in table
        for key, pair in texts.items():
            if key in response:
                assert pair[0 if lang == "es" else 1].split(" (")[0][:30] in table


def test_schema_links_are_relative_to_the_page():
    assert 'href="../schema/estimate-request.schema.json"' in cli_docs.schema_link(env("es", "api/"), "estimate")
    assert 'href="../../schema/plan-request.schema.json"' in cli_docs.schema_link(env("en", "en/api/"), "plan")


def test_cli_example_is_the_cli_on_a_terminal():
    from cli_run import run_main
    block = cli_docs.cli_example(env("es"), "estimate --model llama-3.1-8b --gpu l4")
    _, out, _ = run_main(["estimate", "--model", "llama-3.1-8b", "--gpu", "l4", "--lang", "es"], tty=True)
    assert block == f"```console\n$ python -m calc estimate --model llama-3.1-8b --gpu l4\n{out.rstrip()}\n```"


def test_pages_exist_in_both_languages_and_in_the_nav():
    for lang in ("es", "en"):
        text = (ROOT / "docs" / lang / "api.md").read_text(encoding="utf-8")
        for macro in ("cli_example(", "cli_flags_table(", "response_fields(", "schema_link(", "api_example()"):
            assert macro in text, (lang, macro)
    assert "  - api.md" in (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
