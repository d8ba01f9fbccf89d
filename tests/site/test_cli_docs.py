"""The API page's macros (macros/cli_docs.py): generated from calc, complete, in both languages."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

import calc
from calc.fields import PLAN, field_specs, keys
from macros import cli_docs
from conftest import REPO_ROOT

ROOT = REPO_ROOT


def env(lang: str, url: str = "api/"):
    return SimpleNamespace(conf={"theme": {"language": lang}}, page=SimpleNamespace(url=url))


@pytest.mark.parametrize("lang", ["es", "en"])
def test_flags_tables_list_every_key(lang):
    estimate = cli_docs.cli_flags_table(env(lang), "estimate")
    plan = cli_docs.cli_flags_table(env(lang), "plan")
    for key in [spec.key for spec in field_specs("estimate")]:
        assert f"`--{key.replace('_', '-')}`" in estimate
    for key in keys(PLAN):
        assert f"`--{key.replace('_', '-')}`" in plan
    assert "`--no-gradient-checkpointing`" in estimate


@pytest.mark.parametrize("lang", ["es", "en"])
def test_response_tables_list_every_key_with_its_text(lang):
    from calc.catalogue import catalogue

    cat = catalogue(lang)
    for command, response in (("estimate", calc.estimate(cli_docs.REQUEST)),
                              ("plan", calc.plan_setup(cli_docs.PLAN_REQUEST))):
        table = cli_docs.response_fields(env(lang), command)
        texts = cat.namespace("api." + command)
        for key in response:
            assert f"| `{key}` |" in table
            assert key in texts, f"describe {command} response key {key!r}: api.{command}.{key} in calc/data/messages"
        for key, text in texts.items():
            if key in response:
                assert text.split(" (")[0][:30] in table


@pytest.mark.parametrize("lang", ["es", "en"])
def test_response_codes_cover_the_response(lang):
    est = calc.estimate(cli_docs.REQUEST)
    for section in ("components", "phases"):
        table = cli_docs.response_codes(env(lang), section)
        assert all(f"| `{code}` |" in table for code in est[section])
    warnings = cli_docs.response_codes(env(lang), "warnings")
    assert "| `seq_len_above_max_positions` |" in warnings and "does_not_fit_selected_gpu" in warnings


def test_schema_links_are_relative_to_the_page():
    assert 'href="../schema/estimate-request.schema.json"' in cli_docs.schema_link(env("es", "api/"), "estimate")
    assert 'href="../../schema/plan-request.schema.json"' in cli_docs.schema_link(env("en", "en/api/"), "plan")


def test_cli_example_is_the_cli_on_a_terminal():
    from cli_run import run_main
    block = cli_docs.cli_example(env("es"), "estimate --model llama-3.1-8b --gpu l4")
    _, out, _ = run_main(["estimate", "--model", "llama-3.1-8b", "--gpu", "l4", "--lang", "es"], tty=True)
    assert block == f"```text\n$ python -m calc estimate --model llama-3.1-8b --gpu l4\n{out.rstrip()}\n```"


def test_pages_exist_in_both_languages_and_in_the_nav():
    for lang in ("es", "en"):
        text = (ROOT / "docs" / lang / "api.md").read_text(encoding="utf-8")
        for macro in ("cli_example(", "cli_flags_table(", "response_fields(", "response_codes(",
                      "schema_link(", "api_example()"):
            assert macro in text, (lang, macro)
    assert "  - api.md" in (ROOT / "mkdocs.yml").read_text(encoding="utf-8")


def test_browser_bundle_leaves_the_command_line_out(tmp_path):
    """The page's calc bundle has no CLI, message catalogue (nor its reader) or schema
    generator, and calc still runs from it alone."""
    import io
    import subprocess
    import sys
    import zipfile
    from hooks import calc_bundle
    names = [name for name, _ in calc_bundle.bundle_members()]
    assert not [n for n in names if n.startswith(("calc/cli/", "calc/data/messages/"))
                or n in ("calc/schema.py", "calc/catalogue.py")]
    with zipfile.ZipFile(io.BytesIO(calc_bundle.build_bundle(calc_bundle.bundle_members()))) as archive:
        archive.extractall(tmp_path)
    code = ("import sys; sys.path.insert(0, '.'); import calc; assert calc.__file__.startswith(sys.argv[1]); r = calc.run('plan', {'model': 'llama-3.2-1b', 'dataset_tokens': 1e6, 'gpu': 'l4'});"
            "assert 'result' in r; assert calc.plan.PlanOptions; print('ok')")
    proc = subprocess.run([sys.executable, "-I", "-c", code, str(tmp_path)], cwd=tmp_path, capture_output=True, timeout=60)
    assert proc.stdout.decode().strip() == "ok", proc.stderr.decode()
