"""CLI output: JSON byte for byte when piped or with --json, a table on a terminal in Spanish
and English (snapshots of fixed responses, so a change in the memory model does not move them)."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest

from calc.cli.messages import Messages
from calc.cli.table import render_estimate, render_plan
from calc.memory import estimate_dict
from calc.plan import plan_dict
from cli_run import dumps, flags_for_request, run_main
from conftest import REPO_ROOT

ROOT = REPO_ROOT
SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"
GIB = 2**30

ESTIMATE = {
    "peak_allocated_bytes": int(17.6 * GIB),
    "peak_reserved_bytes": int(19.5 * GIB),
    "device_total_bytes": int(20.04 * GIB),
    "peak_phase": "forward_end",
    "host_bytes": 0,
    "warnings": ["seq_len_above_max_positions"],
    "request": {
        "model": "llama-3.1-8b",
        "method": "qlora",
        "precision": "bf16-mixed",
        "seq_len": 4096,
        "micro_batch_size": 2,
        "num_gpus": 1,
        "sharding": "none",
        "framework": "hf-trainer",
    },
}
PLAN = {
    "gpu": "rtx-4090",
    "num_gpus": 2,
    "sharding": "zero2",
    "safety_margin": 0.25,
    "memory": {
        **ESTIMATE,
        "peak_allocated_range_bytes": [int(16.1 * GIB), int(19.2 * GIB)],
        "peak_reserved_range_bytes": [int(17.9 * GIB), int(21.3 * GIB)],
        "warnings": [],
        "request": {**ESTIMATE["request"], "num_gpus": 2, "sharding": "zero2"},
    },
    "fits": {
        "rtx-4090": {
            "fits": False,
            "fits_without_margin": True,
            "memory_bytes": int(23.99 * GIB),
            "required_bytes": int(25.05 * GIB),
            "verdict": "borderline",
        }
    },
    "time_hours": 15.46,
    "time": {"tokens_per_second": 12345.6},
    "cost_usd": {"total": 1234.5, "final_run": 10.56},
    "recommendations": {
        "configs": [
            {
                "id": "h100-sxmx4-zero3",
                "gpu": "h100-sxm",
                "num_gpus": 4,
                "sharding": "zero3",
                "cost_usd": 15.76,
                "time_hours": 3.4,
            },
            {
                "id": "l4x1-none",
                "gpu": "l4",
                "num_gpus": 1,
                "sharding": "none",
                "cost_usd": 16.1,
                "time_hours": 13.9,
            },
        ]
    },
    "warnings": ["borderline_selected_gpu"],
}
REQUEST = {"model": "llama-3.1-8b", "method": "qlora", "seq_len": 4096, "micro_batch_size": 2}
PLAN_REQUEST = {**REQUEST, "dataset_tokens": 5e7, "gpu": "rtx-4090"}


def _snapshot(name: str, text: str) -> None:
    path = SNAPSHOTS / name
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8"), (
        f"{name} changed (UPDATE_SNAPSHOTS=1 to accept)"
    )


@pytest.mark.parametrize("lang", ["es", "en"])
def test_estimate_table_snapshot(lang):
    msg = Messages(lang)
    # fixed entries (not calc.recommend's), so the snapshot tests the rendering only: one without
    # calc's verdict code (the table derives it), two with it
    need = int(25.05 * GIB)
    verdicts = {
        "rtx-4090": {
            "fits": False,
            "fits_without_margin": True,
            "memory_bytes": int(23.99 * GIB),
            "required_bytes": need,
        },
        "a100-80gb-sxm": {
            "fits": True,
            "verdict": "fits",
            "memory_bytes": 80 * GIB,
            "required_bytes": need,
        },
        "l4": {
            "fits": False,
            "verdict": "does_not_fit",
            "memory_bytes": int(22.5 * GIB),
            "required_bytes": need,
        },
    }
    _snapshot(f"cli_estimate_{lang}.txt", render_estimate(ESTIMATE, msg, verdicts, 0.25))


@pytest.mark.parametrize("lang", ["es", "en"])
def test_plan_table_snapshot(lang):
    """With calc's own verdict code and a range of the peak when the response has them."""
    _snapshot(f"cli_plan_{lang}.txt", render_plan(PLAN, Messages(lang)))


def test_plan_table_without_range_or_verdict_falls_back():
    plan = json.loads(json.dumps(PLAN))
    del plan["memory"]["peak_allocated_range_bytes"], plan["memory"]["peak_reserved_range_bytes"]
    del plan["fits"]["rtx-4090"]["verdict"]
    text = render_plan(plan, Messages("en"))
    assert "17.6 GiB\n" in text and "19.5 GiB\n" in text and "–" not in text
    assert "fits only without the safety margin" in text  # from fits / fits_without_margin


def test_the_smallest_card_is_a_memory_row_with_its_range_where_the_response_has_it():
    plan = json.loads(json.dumps(PLAN))
    assert "Smallest card it runs on" not in render_plan(plan, Messages("en"))
    plan["memory"]["min_device_bytes"] = 20 * 2**30
    text = render_plan(plan, Messages("en"))
    assert "Smallest card it runs on (allocator replayed)  20.0 GiB\n" in text
    plan["memory"]["min_device_range_bytes"] = [18 * 2**30, 24 * 2**30]
    text = render_plan(plan, Messages("es"))
    assert (
        "Tarjeta mínima en la que corre (asignador reproducido)  20,0 GiB (18,0–24,0 GiB)" in text
    )


def test_a_smallest_card_that_is_a_proven_bound_reads_at_most():
    """``allocator.min_allocator_exact`` false (the capacity walk's budget ran out before the
    exact threshold): the row says "at most" the figure; true or absent: the figure alone."""
    plan = json.loads(json.dumps(PLAN))
    plan["memory"]["min_device_bytes"] = 20 * 2**30
    plan["memory"]["min_device_range_bytes"] = [18 * 2**30, 24 * 2**30]
    plan["memory"]["allocator"] = {"min_allocator_exact": False}
    assert "(allocator replayed)  at most 20.0 GiB (18.0–24.0 GiB)\n" in render_plan(
        plan, Messages("en")
    )
    assert "como mucho 20,0 GiB (18,0–24,0 GiB)" in render_plan(plan, Messages("es"))
    plan["memory"]["allocator"]["min_allocator_exact"] = True
    assert "(allocator replayed)  20.0 GiB (18.0–24.0 GiB)\n" in render_plan(plan, Messages("en"))


def test_evaluations_and_saves_are_rows_where_the_run_has_them():
    assert "Checkpoint" not in render_plan(PLAN, Messages("en"))
    request = {
        "model": "llama-3.1-8b",
        "method": "full",
        "gpu": "h100-sxm",
        "dataset_tokens": 1e8,
        "save_steps": 500,
        "eval_steps": 0.5,
        "eval_tokens": 1e6,
    }
    plan = plan_dict(request)
    text = render_plan(plan, Messages("en"))
    hours = plan["time"]["schedule"]
    assert f"Evaluation  {hours['eval_hours']:.1f} h" in re.sub("  +", "  ", text)
    assert f"Checkpoints  {hours['checkpoint_hours']:.1f} h" in re.sub("  +", "  ", text)
    each = plan["time"]["run_phases"]["checkpoint_bytes"] / GIB
    assert f"One checkpoint  {each:.1f} GiB" in re.sub("  +", "  ", text)


def test_no_margin_no_margin_words():
    plan = json.loads(json.dumps(PLAN))
    plan["safety_margin"] = 0.0
    text = render_plan(plan, Messages("en"))
    assert "Verdict\n" in text and "margin" not in text.split("Verdict")[1].split("\n")[1]


def test_estimate_verdict_is_the_one_verdict(monkeypatch):
    """``estimate --gpu`` judges with calc.recommend.judge on need_of(estimate), as plan does:
    replacing what a run needs (need_of) changes the CLI's verdict too."""
    from calc import recommend
    from calc.cli.commands import estimate_verdicts
    from calc.gpus import get_gpu

    card = get_gpu("l4")
    monkeypatch.setattr(
        recommend,
        "need_of",
        lambda est: recommend.Need(5, card.memory_bytes - 1, card.memory_bytes + 1),
    )
    out = estimate_verdicts({"device_total_bytes": 5}, [card], 0.0)
    assert out["l4"]["verdict"] == "borderline" and out["l4"]["device_range_bytes"] == [
        card.memory_bytes - 1,
        card.memory_bytes + 1,
    ]


@pytest.mark.parametrize(
    "model, method, gpu",
    [
        (model, method, gpu)
        for model in ("qwen3-4b", "llama-3.1-8b", "qwen3-14b")
        for method in ("full", "lora", "qlora")
        for gpu in ("rtx-4090", "l40s", "h100-sxm")
    ],
)
def test_cli_verdicts_say_what_the_plan_says(model, method, gpu):
    """The verdict line of ``plan --table`` and of ``estimate --gpu --table`` name the state the
    plan's cards table holds for that card, in both languages, and no margin unless one is set."""
    from calc.cli.commands import estimate_verdicts
    from calc.gpus import get_gpu
    from calc.reference import PRECISION

    request = {
        "model": model,
        "method": method,
        "precision": PRECISION[method],
        "gpu": gpu,
        "dataset_tokens": 1e8,
    }
    plan = plan_dict(request)
    state = plan["fits"][gpu]["verdict"]
    est = estimate_dict({k: v for k, v in request.items() if k not in ("gpu", "dataset_tokens")})
    entry = estimate_verdicts(est, [get_gpu(gpu)], 0.0)[gpu]
    assert entry["verdict"] == state
    for lang in ("es", "en"):
        msg = Messages(lang)
        word = msg.message("cli.verdict." + state, state)
        others = [
            msg.message("cli.verdict." + s, s)
            for s in ("fits", "borderline", "does_not_fit")
            if s != state
        ]
        for text in (render_plan(plan, msg), render_estimate(est, msg, {gpu: entry}, 0.0)):
            line = next(x for x in text.splitlines() if get_gpu(gpu).name in x and "GiB" in x)
            verdict = line.split(get_gpu(gpu).name, 1)[1].strip()
            assert verdict.startswith(word) and not any(verdict.startswith(o + " ") for o in others)
            assert "margen" not in line and "margin" not in line


@pytest.mark.parametrize(
    "command, request_obj, compute",
    [("estimate", REQUEST, estimate_dict), ("plan", PLAN_REQUEST, plan_dict)],
)
def test_json_is_todays_bytes(command, request_obj, compute):
    """Piped, with --json, and from --request: json.dumps(indent=2, ensure_ascii=False) + newline."""
    expected = json.dumps(compute(request_obj), indent=2, ensure_ascii=False) + "\n"
    assert run_main([command, "--request", "-"], stdin=dumps(request_obj))[1] == expected
    assert (
        run_main([command, "--request", "-", "--json"], tty=True, stdin=dumps(request_obj))[1]
        == expected
    )
    from calc.fields import field_specs

    flags = flags_for_request(request_obj, field_specs(command))
    assert run_main([command, *flags, "--json", "--lang", "es"], tty=True)[1] == expected


@pytest.mark.parametrize("lang", ["es", "en"])
def test_terminal_gets_the_table_of_the_response(lang):
    est = estimate_dict(REQUEST)
    rc, out, _ = run_main(
        ["estimate", "--request", "-", "--lang", lang], tty=True, stdin=dumps(REQUEST)
    )
    assert rc == 0 and out == render_estimate(est, Messages(lang), {}, 0.25)
    rc, out, _ = run_main(
        ["plan", "--request", "-", "--lang", lang], tty=True, stdin=dumps(PLAN_REQUEST)
    )
    assert rc == 0 and out == render_plan(plan_dict(PLAN_REQUEST), Messages(lang))
    rc, forced, _ = run_main(
        ["plan", "--request", "-", "--lang", lang, "--table"], stdin=dumps(PLAN_REQUEST)
    )
    assert forced == out


def test_a_real_terminal_gets_a_table_and_a_pipe_gets_json():
    argv = [sys.executable, "-m", "calc", "estimate", "--model", "llama-3.1-8b", "--lang", "en"]
    leader, follower = pty.openpty()
    try:
        proc = subprocess.run(argv, stdout=follower, stderr=subprocess.PIPE, cwd=ROOT, timeout=60)
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the terminal's other end is closed
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(leader)
    text = b"".join(chunks).decode().replace("\r\n", "\n")
    assert (
        proc.returncode == 0 and text.startswith("Setup: Llama 3.1 8B") and "Peak allocated" in text
    )
    piped = subprocess.run(argv, capture_output=True, cwd=ROOT, timeout=60)
    assert json.loads(piped.stdout)["peak_allocated_bytes"] > 0


@pytest.mark.parametrize("command", ["presets", "gpus"])
def test_listings_are_tables_on_a_terminal_and_todays_json_for_scripts(command):
    """A table on a terminal (or with --table); piped or with --json the JSON of before, byte
    for byte (scripts read it: ``python -m calc gpus | jq``)."""
    from calc.gpus import gpus_listing
    from calc.presets import presets_listing

    listing = presets_listing() if command == "presets" else gpus_listing()
    expected = json.dumps(listing, indent=2, ensure_ascii=False) + "\n"
    assert run_main([command]) == (0, expected, "")
    assert run_main([command, "--json"], tty=True) == (0, expected, "")
    rows = listing if command == "presets" else listing["gpus"]
    for lang in ("es", "en"):
        rc, table, _ = run_main([command, "--lang", lang], tty=True)
        assert rc == 0 and run_main([command, "--table", "--lang", lang])[1] == table
        lines = table.splitlines()
        assert (
            set(lines[1]) == {"-", " "} and len(lines) == len(rows) + 3
        )  # header, rule, rows, footer
        for row, line in zip(rows, lines[2:], strict=False):
            assert line.startswith(row["id"] + " ") and row["name"] in line
        assert str(len(rows)) in lines[-1] and "--json" in lines[-1]


def test_presets_table_shows_size_context_and_active_parameters():
    from calc.cli.table import render_presets
    from calc.presets import presets_listing

    rows = {
        line.split()[0]: line
        for line in render_presets(presets_listing(), Messages("en")).splitlines()
    }
    assert rows["llama-3.1-8b"].split()[-4:] == ["8.0B", "131,072", "32", "4,096"]
    assert "30.5B (3.4B active)" in rows["qwen3-30b-a3b"]
    es = {
        line.split()[0]: line
        for line in render_presets(presets_listing(), Messages("es")).splitlines()
    }
    cells = re.split(" {2,}", es["llama-3.1-8b"])  # a Spanish thousands separator is a space
    assert (
        cells == ["llama-3.1-8b", "Llama 3.1 8B", "8,0B", "131\u202f072", "32", "4096"]
        and "Parámetros" in es["id"]
    )


def test_gpus_table_shows_memory_speed_and_the_lowest_price():
    from calc.cli.table import render_gpus
    from calc.gpus import gpus_listing

    listing = gpus_listing()
    rows = {line.split()[0]: line for line in render_gpus(listing, Messages("en")).splitlines()}
    card = next(g for g in listing["gpus"] if g["id"] == "rtx-4090")
    lowest = min(p["usd"] for p in card["prices"])
    assert rows["rtx-4090"].split()[-4:] == ["24.0", "165", "1,008", f"{lowest:.2f}"]
    assert rows["rtx-4090"].startswith("rtx-4090") and "GeForce RTX 4090" in rows["rtx-4090"]
    unpriced = next(g["id"] for g in listing["gpus"] if not g["prices"])
    assert rows[unpriced].endswith("–")


def test_setup_line_names_the_model_framework_precision_and_gpus():
    from calc.cli.table import _setup_line

    request = {
        "model": "llama-3.1-8b",
        "method": "lora",
        "precision": "bf16-true",
        "framework": "torchtune",
        "seq_len": 2048,
        "micro_batch_size": 1,
        "num_gpus": 8,
        "sharding": "zero3",
    }
    assert _setup_line(request, Messages("en")) == (
        "Llama 3.1 8B · LoRA · pure bf16 · library: torchtune · 2048 tokens × 1 per micro-batch · 8 GPUs · ZeRO-3"
    )
    assert _setup_line(request, Messages("es")).endswith(
        "· 8 GPU · ZeRO-3"
    )  # siglas: sin plural escrito
    one = {**request, "num_gpus": 1, "sharding": "none", "model": "hf_config:qwen3"}
    assert _setup_line(one, Messages("en")).startswith("config.json (qwen3) · ")
    assert _setup_line(one, Messages("en")).endswith("· 1 GPU")
    assert _setup_line(one, Messages("es")).endswith("· 1 GPU")


def test_setups_and_cards_are_named_not_ids():
    from calc.cli.table import gpu_name, setup_name

    config = {"id": "h100-sxmx4-zero3", "gpu": "h100-sxm", "num_gpus": 4, "sharding": "zero3"}
    assert setup_name(config, Messages("en")) == "4 × H100 SXM5 · ZeRO-3"
    assert (
        setup_name({**config, "num_gpus": 1, "sharding": "none"}, Messages("es")) == "1 × H100 SXM5"
    )
    assert gpu_name("rtx-4090") == "GeForce RTX 4090" and gpu_name("no-such-card") == "no-such-card"
    text = render_plan(PLAN, Messages("en"))
    assert "4 × H100 SXM5 · ZeRO-3" in text and "h100-sxmx4-zero3" not in text
    assert "2 × GeForce RTX 4090 · ZeRO-2" in text and "2 GPUs · ZeRO-2" in text
    rc, sweep, _ = run_main(
        [
            "sweep",
            "--model",
            "llama-3.1-8b",
            "--seq-len",
            "1024,2048",
            "--gpu",
            "rtx-4090",
            "--lang",
            "en",
        ],
        tty=True,
    )
    assert (
        rc == 0
        and "Verdict (GeForce RTX 4090)" in sweep.splitlines()[0]
        and "rtx-4090" not in sweep
    )


def test_table_in_an_ascii_terminal_has_no_traceback():
    env = {**os.environ, "PYTHONIOENCODING": "ascii"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "calc",
            "estimate",
            "--model",
            "llama-3.1-8b",
            "--gpu",
            "l4",
            "--table",
            "--lang",
            "es",
        ],
        capture_output=True,
        cwd=ROOT,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 0 and b"Traceback" not in proc.stderr
    assert b"Configuraci?n" in proc.stdout


def test_estimate_against_every_card():
    from calc.gpus import all_gpus

    rc, out, _ = run_main(
        ["estimate", "--model", "llama-3.1-8b", "--gpu", "all", "--lang", "en"], tty=True
    )
    lines = out.split("Verdict")[1].splitlines()[1:]
    names = [line.strip().split("  ")[0] for line in lines[: len(all_gpus())]]
    assert rc == 0 and names == [g.name for g in all_gpus()]


@pytest.mark.parametrize("lang, words", [("en", "is not installed"), ("es", "no está instalado")])
def test_yaml_unavailable_says_how_to_install_it(lang, words, monkeypatch):
    """Without PyYAML (a wheel installed without its yaml extra) a YAML config is refused with
    one line that names the extra to install."""
    from calc.config_import import loading

    monkeypatch.setitem(sys.modules, "yaml", None)  # import yaml -> ImportError
    monkeypatch.setattr(loading, "_loader_class", None)
    config = str(ROOT / "tests" / "configs" / "axolotl" / "qlora.yml")
    rc, out, err = run_main(["estimate", "--config", config, "--lang", lang], tty=True)
    assert (
        rc == 2
        and out == ""
        and err.count("\n") == 1
        and "[yaml_unavailable]" in err
        and words in err
    )
    assert "pip install 'gpu-finetune-calc[yaml]'" in err


@pytest.mark.parametrize("lang", ["es", "en"])
def test_a_card_without_rental_price_shows_no_rental_price_in_the_table(lang):
    from calc.plan import plan_dict

    plan = plan_dict(
        {
            "model": "llama-3.1-8b",
            "method": "qlora",
            "dataset_tokens": 1e7,
            "gpu": "rtx-4060-ti-16gb",
        }
    )
    text = render_plan(plan, Messages(lang))
    words = Messages(lang).message("ui.no_rental_price", "")
    assert words
    cost_lines = [
        line
        for line in text.splitlines()
        if line.strip().startswith(
            (Messages(lang).text("table.cost"), Messages(lang).label("cost_final_run"))
        )
    ]
    assert len(cost_lines) == 2 and all(line.rstrip().endswith(words) for line in cost_lines)
    # the same card with a price of its own is priced
    priced = plan_dict(
        {
            "model": "llama-3.1-8b",
            "method": "qlora",
            "dataset_tokens": 1e7,
            "gpu": "rtx-4060-ti-16gb",
            "price_per_gpu_hour": 0.2,
        }
    )
    assert words not in render_plan(priced, Messages(lang))


@pytest.mark.parametrize("lang", ["es", "en"])
def test_plan_table_of_an_owned_card_says_its_electricity(lang):
    """--owned prices the card's electricity: the table names the board power and the price
    per kWh it multiplied, in the calculator's words; a rented card's table has no such line."""
    argv = ["plan", "--model", "llama-3.1-8b", "--method", "qlora", "--gpu", "rtx-4090"]
    argv += ["--dataset-tokens", "1e8", "--lang", lang, "--table"]
    rc, table, _ = run_main([*argv, "--owned", "--electricity-price-per-kwh", "0.3"])
    assert rc == 0
    msg = Messages(lang)
    shown = msg.message("ui.price_electricity", "").replace("{power}", "450")
    shown = shown.replace("{price}", "0,30" if lang == "es" else "0.30")
    assert shown in table
    assert "450 W" not in run_main(argv)[1]
    rc, _, err = run_main([*argv, "--owned", "--electricity-price-per-kwh", "-1"])
    assert rc != 0 and "out_of_range" in err


@pytest.mark.parametrize("lang", ["es", "en"])
def test_plan_table_under_a_power_limit_says_the_clock(lang):
    """--power-limit-w: the table shows the clock the time was priced at and the limit, in the
    calculator's words; without a limit, no such line."""
    argv = ["plan", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--dataset-tokens", "1e8"]
    argv += ["--lang", lang, "--table"]
    rc, table, _ = run_main([*argv, "--power-limit-w", "500"])
    assert rc == 0
    msg = Messages(lang)
    note = msg.message("ui.power_limit_note", "").replace("{}", "500")
    from calc.numfmt import format_number

    assert f"{format_number(1636, 0, lang)} MHz ({note})" in table
    assert "MHz" not in run_main(argv)[1]
