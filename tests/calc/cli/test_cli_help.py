"""``--help`` teaches every key (meaning, unit, default, allowed values) in both languages, its
examples run, and the CLI's words stay those of the site."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys

import pytest

from calc.fields import field_specs
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
        "Unit: tokens. Default: 2,048. Allowed: whole number 1-4,194,304."
    )
    assert "Default: --gradient-checkpointing." in field_help(specs["gradient_checkpointing"], msg)
    assert "Allowed: full, lora, qlora." in field_help(specs["method"], msg)
    # --help names the values briefly; the API page (field_sentences) has the long names
    assert "adamw-8bit (8-bit AdamW)," in field_help(specs["optimizer"], msg)
    from calc.cli.helptext import field_sentences

    assert "adamw-8bit (8-bit AdamW (bitsandbytes))" in " ".join(
        field_sentences(specs["optimizer"], msg)
    )
    assert "Allowed: number 0 <= x <= 1." in field_help(specs["safety_margin"], msg)
    import dataclasses

    assert "Default: 0.25." in field_help(
        dataclasses.replace(specs["safety_margin"], default=0.25), msg
    )
    assert "Required." in field_help(specs["dataset_tokens"], msg)
    es = field_help(specs["lora_dropout"], Messages("es"))
    assert "Por defecto: 0." in es and "0 <= x < 1" in es


@pytest.mark.parametrize(
    "lang, command, words",
    [
        ("en", "estimate", ["examples:", "7B QLoRA on a 24 GB card", "ZeRO-3", "/en/methodology/"]),
        (
            "es",
            "estimate",
            [
                "ejemplos:",
                "QLoRA de un modelo de 7B",
                "ZeRO-3",
                "/methodology/",
                "muestra esta ayuda",
            ],
        ),
        ("en", "plan", ["examples:", "cheapest", "/en/methodology/"]),
        ("es", "plan", ["ejemplos:", "más barata", "/methodology/"]),
    ],
)
def test_help_has_examples_and_the_methodology(lang, command, words):
    rc, out, _ = run_main([command, "--help", "--lang", lang])
    assert rc == 0 and all(w in out for w in words)


def _commands():
    from calc.cli import commands, sweep  # noqa: F401  (they register the subcommands)
    from calc.cli.registry import COMMANDS
    from calc.config_import.cli import register_cli

    register_cli()
    return sorted(c.name for c in COMMANDS)


@pytest.mark.parametrize("lang", ["es", "en"])
def test_each_subcommand_has_examples_of_its_own(lang):
    """``import --help`` shows imports, ``gpus --help`` the catalogue...: no two subcommands
    share their examples, and each one's are in its --help (the program's --help has one of
    each kind)."""
    from calc.cli.helptext import EXAMPLES

    names = _commands()
    assert set(EXAMPLES) == set(names)
    seen: dict[str, str] = {}
    for name in names:
        rc, out, _ = run_main([name, "--help", "--lang", lang])
        mine = examples(name)
        assert rc == 0 and mine and all(f"python -m calc {args}\n" in out for args in mine), name
        assert all(args.split()[0] == name for args in mine[:1]), name
        for args in mine:
            assert seen.setdefault(args, name) == name, (args, name)
        others = [a for n in names if n != name for a in examples(n)]
        assert not any(f"python -m calc {a}\n" in out for a in others if a not in mine), name
    _, top, _ = run_main(["--help", "--lang", lang])
    assert {a.split()[0] for a in examples() if f"python -m calc {a}\n" in top} >= {
        "estimate",
        "plan",
        "sweep",
    }


@pytest.mark.parametrize("example", examples())
def test_examples_run(example, tmp_path, monkeypatch):
    """Every example of every --help runs; ``FILE.yml`` is one of the tests' axolotl configs."""
    import shutil

    shutil.copy(ROOT / "tests" / "configs" / "axolotl" / "qlora.yml", tmp_path / "FILE.yml")
    monkeypatch.chdir(tmp_path)
    argv = shlex.split(example)
    rc, out, err = run_main(argv + ["--json"] * (argv[0] != "import"))  # import writes JSON anyway
    assert rc == 0, out + err
    if "--export" in example:
        assert "lora" in out
    else:
        json.loads(out)


def test_estimate_help_is_short_and_groups_the_library_behaviours():
    """One usage of three lines (argparse's listed every flag: 45 lines), and every key a
    --framework profile sets under one heading, one line each for a yes/no one."""
    from calc.cli.helptext import default_library_value
    from calc.frameworks import profile_keys

    specs = {s.key: s for s in field_specs("estimate")}
    for lang, heading in (("en", "library behaviours"), ("es", "comportamientos de la biblioteca")):
        rc, out, _ = run_main(["estimate", "--help", "--lang", lang])
        lines = out.splitlines()
        assert rc == 0
        assert lines[0].startswith("usage: python -m calc estimate [") and lines[3] == ""
        head = next(i for i, line in enumerate(lines) if line.startswith(heading))
        tail = next(
            i for i in range(head + 1, len(lines)) if lines[i] and not lines[i].startswith(" ")
        )
        block = "\n".join(lines[head:tail])
        # 334 (en) and 363 (es) when every flag had its full paragraph. The library behaviours
        # grow with the libraries calc reads: each takes at most three lines under its heading
        # (a yes/no one mostly one), and the rest of the help stays under 260 lines (230 until
        # the reader keys gained shard_group and gradient_bucket_mb, 240 until
        # sequence_parallel, 250 until tf32)
        assert tail - head <= 6 + 3 * len(profile_keys()), (tail - head, len(profile_keys()))
        assert len(lines) - (tail - head) < 260, len(lines) - (tail - head)
        for key in profile_keys():
            flag = specs[key].flag
            if specs[key].kind == "bool":
                at = next(
                    i for i in range(head, tail) if lines[i].startswith(f"  --[no-]{flag[2:]}")
                )
                # its name on the same line or the next one, and its default within three lines
                assert Messages(lang).label(key)[:12] in " ".join(
                    " ".join(lines[at : at + 2]).split()
                ), key
                # the default library's value: stated on the line when on; the heading says
                # that every other switch is off
                on = default_library_value(specs[key])
                end = next(
                    i for i in range(at + 1, tail + 1) if i == tail or lines[i][:4] == "  --"
                )
                stated = any(
                    w in " ".join(" ".join(lines[at:end]).split())
                    for w in ("Default: on", "Por defecto: sí")
                )
                assert stated == bool(on), key
            else:
                assert f"  {flag} " in block, flag
        before = "\n".join(lines[:head])
        assert not any(
            f"--[no-]{specs[k].flag[2:]}" in before or f"  {specs[k].flag} " in before
            for k in profile_keys()
        )


def test_sweep_help_does_not_mark_gpu_or_dataset_tokens_required():
    """A sweep runs estimate without them; plan needs both."""
    for lang, required, optional in (
        ("en", "Required.", "Optional in a sweep"),
        ("es", "Obligatorio.", "Opcional en un barrido"),
    ):
        _, sweep, _ = run_main(["sweep", "--help", "--lang", lang])
        _, plan, _ = run_main(["plan", "--help", "--lang", lang])
        for flag in ("--gpu ID ", "--dataset-tokens X "):
            sweep_text = sweep.split("\n  " + flag)[1].split("\n  --")[0]
            plan_text = plan.split("\n  " + flag)[1].split("\n  --")[0]
            assert required not in " ".join(sweep_text.split()) and optional in " ".join(
                sweep_text.split()
            )
            assert required in " ".join(plan_text.split())
    rc, out, err = run_main(
        ["sweep", "--model", "llama-3.1-8b", "--seq-len", "1024,2048", "--json"]
    )
    assert rc == 0 and json.loads(out)["command"] == "estimate"


@pytest.mark.parametrize("lang, unit", [("en", "Unit: "), ("es", "Unidad: ")])
def test_every_numeric_flag_says_its_unit(lang, unit):
    """--seq-len tokens, --safety-margin a fraction 0-1, --lora-rank dimensions..."""
    import argparse

    from calc.cli.app import build_parser

    numeric = {s.key for s in field_specs("plan") if s.numeric} | {"show_margin"}
    for command in ("estimate", "plan", "sweep"):
        parser = build_parser(Messages(lang), only=command)
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[
            command
        ]
        checked = [a for a in sub._actions if a.dest in numeric]
        assert len(checked) >= (6 if command == "estimate" else 20)
        for action in checked:
            assert unit in action.help, (command, action.dest, action.help)
    _, out, _ = run_main(["estimate", "--help", "--lang", lang])
    margin = " ".join(out.split("--safety-margin P")[1].split("\n\n")[0].split())
    assert ("fraction" if lang == "en" else "fracción") in margin and "0 <= x <= 1" in margin


def test_version_names_the_distribution():
    import calc
    from calc.cli.app import main

    rc, out, _ = run_main(["--version"])
    assert rc == 0 and out == f"gpu-finetune-calc {calc.__version__} (python -m calc)\n"
    import contextlib
    import io

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer), pytest.raises(SystemExit):
        main(["--version"], prog="gpu-finetune-calc")
    assert buffer.getvalue() == f"gpu-finetune-calc {calc.__version__}\n"
    _, top, _ = run_main(["--help", "--lang", "es"])
    assert "--version" in top and "imprime el nombre del paquete" in " ".join(top.split())


def test_help_subprocess_in_spanish_from_the_locale():
    env = {"PATH": "/usr/bin:/bin", "LANG": "es_ES.UTF-8", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "calc", "plan", "--help"],
        capture_output=True,
        cwd=ROOT,
        env=env,
        timeout=60,
    )
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


def test_checkpointing_every_says_when_it_is_required():
    """Its absence is not calc's choice: N is required with every-n and ignored otherwise."""
    for lang, said in (
        ("en", "Default: none (required with every-n, ignored otherwise)."),
        ("es", "Por defecto: ninguno (obligatorio con every-n; si no, se ignora)."),
    ):
        rc, out, _ = run_main(["estimate", "--help", "--lang", lang])
        assert rc == 0
        at = out.index("--checkpointing-every N")
        entry = " ".join(out[at : out.index("\n  --", at + 1)].split())
        assert said in entry, entry
        assert "calc" not in entry.split("N of every-n.")[-1].split("N de every-n.")[-1]
