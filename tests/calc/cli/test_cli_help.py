"""``--help`` teaches every key (meaning, unit, default, allowed values) in both languages, its
examples run, and the CLI's words stay those of the site."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys

import pytest

from calc.cli.fields import field_specs
from calc.cli.helptext import examples, field_help
from calc.cli.messages import Messages, default_lang
from cli_run import run_main
from conftest import REPO_ROOT

ROOT = REPO_ROOT


@pytest.mark.parametrize("lang", ["es", "en"])
def test_every_key_has_its_own_help_text(lang):
    """A key added to a field table needs its sentence in calc/data/messages/{es,en}.json
    ("help"; "unit" when it has one); the CLI shows the site's label meanwhile."""
    msg = Messages(lang)
    missing = [s.key for s in field_specs("plan") if not msg.help(s.key)]
    assert not missing, f"add help texts to calc/data/messages/{lang}.json: {missing}"


def test_help_lines_say_default_and_allowed_values():
    msg = Messages("en")
    specs = {s.key: s for s in field_specs("plan")}
    assert field_help(specs["seq_len"], msg).endswith(
        "Unit: tokens. Default: 2,048. Allowed: whole number 1-4,194,304.")
    assert "Default: --gradient-checkpointing." in field_help(specs["gradient_checkpointing"], msg)
    assert "Allowed: full, lora, qlora." in field_help(specs["method"], msg)
    assert "adamw-8bit (8-bit AdamW (bitsandbytes))" in field_help(specs["optimizer"], msg)
    assert "Allowed: number 0 <= x <= 1." in field_help(specs["safety_margin"], msg)
    import dataclasses
    assert "Default: 0.25." in field_help(dataclasses.replace(specs["safety_margin"], default=0.25), msg)
    assert "Required." in field_help(specs["dataset_tokens"], msg)
    es = field_help(specs["lora_dropout"], Messages("es"))
    assert "Por defecto: 0." in es and "0 <= x < 1" in es


@pytest.mark.parametrize("lang, words", [
    ("en", ["examples:", "7B QLoRA on a 24 GB card", "ZeRO-3", "cheapest", "/en/methodology/"]),
    ("es", ["ejemplos:", "QLoRA de un modelo de 7B", "ZeRO-3", "más barata", "/methodology/",
            "muestra esta ayuda"]),
])
def test_help_has_examples_and_the_methodology(lang, words):
    rc, out, _ = run_main(["estimate", "--help", "--lang", lang])
    assert rc == 0 and all(w in out for w in words)


@pytest.mark.parametrize("example", examples())
def test_examples_run(example):
    rc, out, err = run_main(shlex.split(example) + ["--json"])
    assert rc == 0, out + err
    json.loads(out)


def test_help_subprocess_in_spanish_from_the_locale():
    env = {"PATH": "/usr/bin:/bin", "LANG": "es_ES.UTF-8", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "calc", "plan", "--help"], capture_output=True,
                          cwd=ROOT, env=env, timeout=60)
    assert proc.returncode == 0 and "Tokens de entrenamiento en una época" in proc.stdout.decode()


def test_default_language_follows_the_locale():
    assert default_lang({"LANG": "es_AR.UTF-8"}) == "es"
    assert default_lang({"LC_ALL": "en_US.UTF-8", "LANG": "es_ES"}) == "en"
    assert default_lang({}) == "en"


def test_every_cli_message_the_code_asks_for_exists():
    """The CLI's own words are ``cli.*`` ids of the catalogue (``tests/calc/test_catalogue.py``
    checks both languages hold the same ids)."""
    import re

    from calc.catalogue import load

    have = {k[4:] for k in load("en")["messages"] if k.startswith("cli.")}
    used = set()
    for path in (ROOT / "calc" / "cli").glob("*.py"):
        used |= set(re.findall(r'msg\.text\("([a-z_.]+[a-z])"', path.read_text(encoding="utf-8")))
    from calc.cli import commands, sweep  # noqa: F401  (they register the subcommands)
    from calc.cli.registry import COMMANDS
    used |= {command.help_key for command in COMMANDS}
    assert len(COMMANDS) >= 6 and used and not used - have, used - have
