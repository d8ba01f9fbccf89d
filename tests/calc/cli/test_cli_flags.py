"""CLI flags: one per request key, from the field tables; same response as ``--request``."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calc.cli.flags import parse_number
from calc.fields import field_specs
from cli_run import dumps, flags_for_request, requests, run_main


def test_every_request_key_has_its_flag():
    rc, out, _ = run_main(["plan", "--help", "--lang", "en"])
    assert rc == 0
    for key, kind in ((spec.key, spec.kind) for spec in field_specs("plan")):
        flag = "--" + key.replace("_", "-")
        if kind == "bool":  # --help writes the pair --key / --no-key as --[no-]key
            assert "--[no-]" + key.replace("_", "-") in out, flag
        else:
            assert flag in out, flag
    rc, out, _ = run_main(["estimate", "--help", "--lang", "en"])
    options = out.split("examples:")[0]
    assert "--dataset-tokens" not in options and "--seq-len" in options


@pytest.mark.parametrize(
    "text, value",
    [
        ("4096", 4096),
        ("2.0", 2),
        ("1e3", 1000),
        ("50e6", 50_000_000),
        ("1_000", 1000),
        ("0.5", 0.5),
        ("-3", -3),
        ("abc", "abc"),
        ("2.5.1", "2.5.1"),
        ("1e400", float("inf")),
    ],
)
def test_numbers_are_read_as_the_page_reads_them(text, value):
    assert parse_number(text) == value and type(parse_number(text)) is type(value)


def _run_both(command, request, tmp_path):
    path = tmp_path / "req.json"
    path.write_text(json.dumps(request))
    by_file = run_main([command, "--request", str(path)])
    flags = flags_for_request(request, field_specs(command))
    by_flags = run_main([command, *flags])
    return by_file, by_flags, flags


@settings(max_examples=60)
@given(request=requests("estimate"))
def test_flags_give_the_response_of_the_request_estimate(request, tmp_path_factory):
    by_file, by_flags, flags = _run_both("estimate", request, tmp_path_factory.mktemp("r"))
    assert by_flags == by_file, flags


@settings(max_examples=25)
@given(request=requests("plan"))
def test_flags_give_the_response_of_the_request_plan(request, tmp_path_factory):
    by_file, by_flags, flags = _run_both("plan", request, tmp_path_factory.mktemp("r"))
    assert by_flags == by_file, flags


def test_example_from_the_issue():
    argv = [
        "estimate",
        "--model",
        "llama-3.1-8b",
        "--method",
        "qlora",
        "--seq-len",
        "4096",
        "--micro-batch-size",
        "2",
    ]
    rc, out, _ = run_main(argv)
    assert rc == 0
    rc2, out2, _ = run_main(
        ["estimate", "--request", "-"],
        stdin=dumps(
            {"model": "llama-3.1-8b", "method": "qlora", "seq_len": 4096, "micro_batch_size": 2}
        ),
    )
    assert out == out2


def test_flags_override_the_request_file(tmp_path):
    path = tmp_path / "req.json"
    path.write_text(
        json.dumps(
            {
                "model": "llama-3.1-8b",
                "method": "lora",
                "seq_len": 1024,
                "gradient_checkpointing": True,
            }
        )
    )
    rc, out, _ = run_main(
        ["estimate", "--request", str(path), "--seq-len", "4096", "--no-gradient-checkpointing"]
    )
    echo = json.loads(out)["request"]
    assert rc == 0 and echo["seq_len"] == 4096 and echo["gradient_checkpointing"] is False
    assert echo["method"] == "lora"


def test_lists_are_comma_separated_as_in_the_url():
    rc, out, _ = run_main(
        ["estimate", "--model", "llama-3.1-8b", "--lora-targets", "q_proj, v_proj"]
    )
    assert rc == 0 and json.loads(out)["request"]["lora_targets"] == ["q_proj", "v_proj"]


def test_hf_config_file_is_the_model(tmp_path):
    from calc.presets import get_preset  # noqa: F401  (presets load)

    config = {
        "model_type": "llama",
        "hidden_size": 2048,
        "intermediate_size": 8192,
        "num_hidden_layers": 16,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "vocab_size": 128256,
        "max_position_embeddings": 131072,
        "tie_word_embeddings": True,
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    rc, out, _ = run_main(["estimate", "--hf-config", str(path)])
    rc2, out2, _ = run_main(["estimate", "--model", json.dumps({"hf_config": config})])
    assert rc == rc2 == 0 and out == out2


@pytest.mark.parametrize(
    "argv, code, field, allowed",
    [
        (
            ["--model", "llama-3.1-8b", "--method", "bogus"],
            "unknown_value",
            "method",
            ["full", "lora", "qlora"],
        ),
        (
            ["--model", "llama-3.1-8b", "--sharding", "zero4"],
            "unknown_value",
            "sharding",
            ["none", "ddp", "zero1", "zero2", "zero3"],
        ),
        (["--model", "qwen9-8b"], "unknown_preset", "model", None),
        (["--model", "llama-3.1-8b", "--seq-len", "2.5"], "not_integer", "seq_len", None),
        (["--model", "llama-3.1-8b", "--seq-len", "many"], "not_integer", "seq_len", None),
        (["--model", "llama-3.1-8b", "--seq-len", "0"], "not_positive", "seq_len", None),
        (["--model", "llama-3.1-8b", "--lora-dropout", "1"], "out_of_range", "lora_dropout", None),
        (
            ["--model", "llama-3.1-8b", "--lora-targets", "q_proj,nope"],
            "unknown_lora_target",
            "lora_targets",
            [
                "all-linear",
                "q_proj",
                "k_proj",
                "v_proj",
                "o_proj",
                "gate_proj",
                "up_proj",
                "down_proj",
            ],
        ),
        (["--model", "{not json"], "config_json_invalid", "model", None),
        (["--model", "llama-3.1-8b", "--seq-length", "5"], "bad_arguments", "argv", None),
        (["--model", "llama-3.1-8b", "--gpu", "rtx4090"], "unknown_gpu", "gpu", None),
        ([], "missing_field", "model", None),
    ],
)
def test_bad_flags_are_coded_errors(argv, code, field, allowed):
    rc, out, err = run_main(["estimate", *argv])
    error = json.loads(out)["error"]
    assert rc == 2 and "Traceback" not in err
    assert (error["code"], error["field"]) == (code, field)
    assert error.get("allowed") == allowed


def test_bad_flags_on_a_terminal_name_the_allowed_values():
    rc, out, err = run_main(
        ["estimate", "--model", "llama-3.1-8b", "--method", "bogus", "--lang", "en"], tty=True
    )
    assert rc == 2 and out == ""
    assert err == (
        "error [unknown_value]: Method (method) = 'bogus': Unknown option; "
        "allowed values: full, lora, qlora\n"
    )
    rc, out, err = run_main(["estimate", "--model", "qwen9-8b", "--lang", "es"], tty=True)
    assert rc == 2 and "qwen" in err.split("qwen9-8b")[1] and "presets" in err


def test_mistyped_flags_get_the_closest_and_prefixes_are_refused():
    rc, out, err = run_main(
        ["estimate", "--model", "llama-3.1-8b", "--seq-length", "5", "--lang", "en"], tty=True
    )
    assert rc == 2 and "closest: --seq-len" in err
    rc, out, _ = run_main(["estimate", "--model", "llama-3.1-8b", "--seq", "5"])
    assert rc == 2 and json.loads(out)["error"]["code"] == "bad_arguments"


def test_plan_keys_are_not_estimate_flags():
    rc, out, _ = run_main(["estimate", "--model", "llama-3.1-8b", "--dataset-tokens", "5"])
    assert rc == 2 and json.loads(out)["error"]["code"] == "bad_arguments"


_WORDS = [
    "estimate",
    "plan",
    "sweep",
    "schema",
    "--model",
    "llama-3.1-8b",
    "{",
    '{"hf_config": 1}',
    "--seq-len",
    "1..4",
    "0",
    "-1",
    "1e999",
    "nan",
    "2,3",
    "--gpu",
    "l4",
    "l4,nope",
    "--json",
    "--table",
    "--csv",
    "--lang",
    "es",
    "--method",
    "qlora,full",
    "--lora-targets",
    "",
    ",",
    "--no-chunked-loss",
    "--dataset-tokens",
    "1e7",
    "--mfu",
    "null",
    "--hf-config",
    "/nonexistent",
    "--request",
    "--safety-margin",
    "2",
    "--micro-batch-size",
    "1..3:0",
    "x",
]


@settings(max_examples=200)
@given(argv=st.lists(st.sampled_from(_WORDS), max_size=10))
def test_no_argument_list_gives_a_traceback(argv):
    """Whatever is typed, the CLI answers (status 0) or names the problem (status 2)."""
    rc, out, err = run_main(argv, tty=False)
    assert rc in (0, 2), (argv, rc)
    if rc == 2:
        import calc.cli.app as app

        human = app._prescan(argv)[1] != "json"  # --table or --csv asked, and no --json
        if human:  # asked for a table or CSV: one line on stderr
            assert out == "" and err.startswith("error ["), argv
        else:
            assert "error" in json.loads(out), argv
