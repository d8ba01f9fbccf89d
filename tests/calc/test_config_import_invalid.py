"""Config values the tool itself would refuse are decided out loud: each bad config of
``tests/configs/invalid/`` (what calc must answer is in its ``expected.json``) through the
Python API, ``estimate``/``plan``/``import`` on the CLI (refused, or with ``--lenient`` the
defaults used and said), standard input, and the calculator's import entry."""

from __future__ import annotations

import json

import pytest
from cli_run import run_main

from calc.config_import import import_config
from calc.config_import.browser import handle
from calc.config_import.loading import load_text
from calc.errors import InputError
from calc.request import parse_estimate_request
from conftest import REPO_ROOT

ROOT = REPO_ROOT
INVALID = ROOT / "tests" / "configs" / "invalid"
EXPECTED = {
    name: case
    for name, case in json.loads((INVALID / "expected.json").read_text()).items()
    if not name.startswith("_")
}
CASES = sorted(EXPECTED)
REFUSED = [name for name in CASES if EXPECTED[name]["code"] == "config_invalid_values"]
MODEL = "llama-3.2-1b"  # stands in for the model of the formats that name none


def _format_args(case: dict, flag: str) -> list[str]:
    return [] if case["format"] == "auto" else [flag, case["format"]]


def test_every_file_of_the_folder_is_a_case():
    files = {p.name for p in INVALID.iterdir() if p.name != "expected.json"}
    assert files == set(EXPECTED)


@pytest.mark.parametrize("name", CASES)
def test_python_api_reports_each_refused_key(name):
    case = EXPECTED[name]
    text = (INVALID / name).read_bytes()
    if case["code"] == "config_format_mismatch":
        with pytest.raises(InputError) as err:
            import_config(text, case["format"])
        assert err.value.code == "config_format_mismatch"
        assert err.value.to_dict()["detected"] == case["detected"]
        assert import_config(text)["detected"] == case["detected"]  # detected, it imports
        return
    result = import_config(text, case["format"])
    invalid = {e["key"]: e for e in result["keys"] if e["status"] == "invalid"}
    assert {k: e["reason"] for k, e in invalid.items()} == case["invalid"]
    data = load_text(text)
    for key, entry in invalid.items():
        assert entry["field"] is None and entry["accepted"]
        written = data
        for part in key.split("."):
            written = written[part]
        assert entry["value"] == written  # the value as the file writes it
        if "target" in entry:  # what calc uses in its place, and whose default it is
            assert "used_instead" in entry and entry["source"]
    for field, value in case.get("used", {}).items():
        assert result["request"][field] == value, field
    # the request holds the tools' defaults in place of the refused values, and is valid
    for field, value in case.get("lenient", {}).items():
        assert (
            parse_estimate_request({"model": MODEL, **result["request"]}).to_dict()[field] == value
        ), field


@pytest.mark.parametrize("command", ["estimate", "plan"])
@pytest.mark.parametrize("name", CASES)
def test_cli_refuses_the_file_with_one_coded_error(name, command):
    case = EXPECTED[name]
    rc, out, _ = run_main(
        [
            command,
            "--config",
            str(INVALID / name),
            *_format_args(case, "--config-format"),
            "--model",
            MODEL,
            "--json",
        ]
    )
    error = json.loads(out)["error"]
    assert (rc, error["code"]) == (2, case["code"])
    if case["code"] == "config_format_mismatch":
        assert error["detected"] == case["detected"]
        return
    assert {e["key"]: e["reason"] for e in error["invalid"]} == case["invalid"]
    assert error["value"] == [e["key"] for e in error["invalid"]]
    for entry in error["invalid"]:
        assert set(entry) >= {"key", "value", "reason", "accepted"}


@pytest.mark.parametrize("name", REFUSED)
def test_cli_lenient_uses_the_defaults_and_says_so(name):
    case = EXPECTED[name]
    rc, out, err = run_main(
        ["estimate", "--config", str(INVALID / name), "--model", MODEL, "--lenient", "--json"]
    )
    assert rc == 0, out + err
    response = json.loads(out)
    assert "config_values_replaced" in response["warnings"]
    assert {e["key"]: e["reason"] for e in response["config_warnings"]} == case["invalid"]
    for field, value in case["lenient"].items():
        assert response["request"][field] == value, field


@pytest.mark.parametrize("lang", ["en", "es"])
def test_terminal_says_each_key_in_the_readers_language(lang):
    path = str(INVALID / "axolotl_issue.yml")
    words = {
        "en": ("out of range", "from 1 to 65536", "not a whole number", "not a boolean"),
        "es": ("fuera de rango", "de 1 a 65536", "no es un número entero", "no es un booleano"),
    }[lang]
    rc, out, err = run_main(["estimate", "--config", path, "--lang", lang], tty=True)
    assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "[config_invalid_values]" in err
    for text in ("lora_r = -5", 'micro_batch_size = "two"', 'bf16 = "yes please"', *words):
        assert text in err, text
    rc, out, err = run_main(
        [
            "plan",
            "--config",
            path,
            "--lenient",
            "--dataset-tokens",
            "1e7",
            "--gpu",
            "h100-sxm",
            "--lang",
            lang,
        ],
        tty=True,
    )
    assert rc == 0, err
    used = {"en": "8 used instead", "es": "se usa 8 en su lugar"}[lang]
    assert "lora_r = -5" in out and used in out and "peft 0.21.0" in out


def test_cli_import_reports_refused_keys_and_exits_2_unless_lenient():
    path = str(INVALID / "trl_issue.yaml")
    rc, out, _ = run_main(["import", path])
    data = json.loads(out)
    assert rc == 2 and data["error"]["code"] == "config_invalid_values"
    assert data["format"] == "trl" and "request" in data  # the report itself is kept
    statuses = {e["key"]: e["status"] for e in data["keys"]}
    assert statuses["per_device_train_batch_size"] == statuses["max_length"] == "invalid"
    rc, out, _ = run_main(["import", "--lenient", path])
    assert rc == 0 and "error" not in json.loads(out)
    rc, out, _ = run_main(["import", "--export", "axolotl", path])
    assert rc == 2 and json.loads(out)["error"]["code"] == "config_invalid_values"


def test_cli_import_refuses_a_format_the_file_contradicts():
    rc, out, _ = run_main(
        ["import", "--format", "torchtune", str(INVALID / "axolotl_as_torchtune.yml")]
    )
    error = json.loads(out)["error"]
    assert rc == 2 and error["code"] == "config_format_mismatch" and error["detected"] == "axolotl"
    rc, _, err = run_main(
        [
            "import",
            "--format",
            "torchtune",
            "--lang",
            "es",
            str(INVALID / "axolotl_as_torchtune.yml"),
        ],
        tty=True,
    )
    assert rc == 2


def test_llamafactory_file_read_as_trl_and_trainer_file_as_llamafactory():
    """LLaMA-Factory's keys are the Trainer's plus its own: a file with Trainer keys only is
    detected as TRL and may be read as LLaMA-Factory; the other way round is refused."""
    trainer = "model_name_or_path: meta-llama/Llama-3.1-8B\nper_device_train_batch_size: 2\n"
    assert import_config(trainer, "llamafactory")["request"]["micro_batch_size"] == 2
    with pytest.raises(InputError) as err:
        import_config(trainer + "finetuning_type: lora\n", "trl")
    assert err.value.code == "config_format_mismatch"


def test_stdin_import_and_config():
    raw = (ROOT / "tests" / "configs" / "axolotl" / "lora.yml").read_bytes()
    rc, out, _ = run_main(["import", "-"], stdin=raw)
    assert rc == 0 and json.loads(out)["request"]["lora_rank"] == 32
    rc, via_stdin, _ = run_main(["estimate", "--config", "-", "--json"], stdin=raw)
    rc_file, via_file, _ = run_main(
        ["estimate", "--config", str(ROOT / "tests/configs/axolotl/lora.yml"), "--json"]
    )
    assert rc == rc_file == 0 and json.loads(via_stdin) == json.loads(via_file)
    bad = (INVALID / "axolotl_issue.yml").read_bytes()
    rc, out, _ = run_main(["import", "-"], stdin=bad)
    assert rc == 2 and json.loads(out)["error"]["code"] == "config_invalid_values"
    rc, out, _ = run_main(["estimate", "--config", "-", "--request", "-", "--json"], stdin=raw)
    assert rc == 2 and json.loads(out)["error"]["code"] == "bad_arguments"


def test_used_keys_carry_the_value_they_set():
    result = import_config((ROOT / "tests" / "configs" / "axolotl" / "qlora.yml").read_bytes())
    keys = {e["key"]: e for e in result["keys"]}
    assert keys["micro_batch_size"]["value"] == result["request"]["micro_batch_size"]
    assert keys["optimizer"]["values"] == {
        "optimizer": "paged-adamw-8bit",
        "optimizer_fused": False,
    }


_AXOLOTL = "base_model: meta-llama/Llama-3.1-8B\nadapter: lora\n"
_TRL = "model_name_or_path: meta-llama/Llama-3.1-8B\n"
_TORCHTUNE = "model:\n  _component_: torchtune.models.llama3_1.lora_llama3_1_8b\n"


@pytest.mark.parametrize(
    ("fmt", "text", "field", "want"),
    [
        # pydantic (axolotl): on/off, y/n, 0/1 are booleans
        ("axolotl", _AXOLOTL + "load_in_4bit: 'on'\n", "method", "qlora"),
        ("axolotl", _AXOLOTL + "load_in_4bit: 1\n", "method", "qlora"),
        ("axolotl", _AXOLOTL + "load_in_4bit: 'si'\n", "method", None),
        # transformers' string_to_bool (TRL): y/n, t/f, yes/no, true/false, 1/0, but no "on"
        ("trl", _TRL + "use_peft: 'y'\n", "method", "lora"),
        ("trl", _TRL + "use_peft: 'on'\n", "method", None),
        # torchtune passes values on unconverted: only a YAML boolean
        (
            "torchtune",
            _TORCHTUNE + "enable_activation_checkpointing: 'true'\n",
            "gradient_checkpointing",
            None,
        ),
        # an FSDP section goes through accelerate's str_to_bool, even in a strict tool's file
        (
            "axolotl",
            _AXOLOTL + "fsdp_config:\n  offload_params: 'on'\n",
            "cpu_offload",
            "optimizer+params",
        ),
        (
            "accelerate",
            "distributed_type: FSDP\nfsdp_config:\n  fsdp_offload_params: 'on'\n",
            "cpu_offload",
            "optimizer+params",
        ),
    ],
)
def test_booleans_as_each_tool_reads_them(fmt, text, field, want):
    """``want``: the value the text gives the field; None: the text is refused."""
    result = import_config(text, fmt)
    refused = [e for e in result["keys"] if e["status"] == "invalid"]
    if want is None:
        assert [e["reason"] for e in refused] == ["not_a_boolean"]
        assert True in refused[0]["accepted"]["allowed"]
    else:
        assert refused == [] and result["request"][field] == want


def test_calculator_entry_shows_refused_keys():
    """The page's import (calc.config_import.browser) keeps the refused keys in its report and
    fills the form with the defaults in their place."""
    out = json.loads(
        handle("import", json.dumps({"text": (INVALID / "axolotl_issue.yml").read_text()}))
    )
    result = out["result"]
    refused = {e["key"]: e for e in result["keys"] if e["status"] == "invalid"}
    assert set(refused) == {"lora_r", "micro_batch_size", "bf16"}
    assert result["form"]["lora_rank"] == refused["lora_r"]["used_instead"] == 8
    mismatch = json.loads(
        handle(
            "import",
            json.dumps(
                {"text": (INVALID / "axolotl_as_torchtune.yml").read_text(), "format": "torchtune"}
            ),
        )
    )
    assert (
        mismatch["error"]["code"] == "config_format_mismatch"
        and mismatch["error"]["detected"] == "axolotl"
    )


@pytest.mark.parametrize(
    ("fmt", "text", "field", "want"),
    [
        # pydantic (axolotl) and argparse's int (trl sft --config) read "4" as 4
        ("axolotl", _AXOLOTL + "micro_batch_size: '4'\n", "micro_batch_size", 4),
        ("trl", _TRL + "per_device_train_batch_size: '4'\n", "micro_batch_size", 4),
        # torchtune, LLaMA-Factory and DeepSpeed pass the text on, where it fails
        ("torchtune", _TORCHTUNE + "batch_size: '4'\n", "micro_batch_size", None),
        ("llamafactory", _TRL + "finetuning_type: lora\ncutoff_len: '1024'\n", "seq_len", None),
        ("deepspeed", '{"train_micro_batch_size_per_gpu": "4"}', "micro_batch_size", None),
    ],
)
def test_whole_numbers_written_as_text_as_each_tool_reads_them(fmt, text, field, want):
    result = import_config(text, fmt)
    refused = [e for e in result["keys"] if e["status"] == "invalid"]
    if want is None:
        assert [e["reason"] for e in refused] == ["not_an_integer"]
    else:
        assert refused == [] and result["request"][field] == want


def test_sweep_refuses_or_says_each_replaced_value():
    path = str(INVALID / "axolotl_issue.yml")
    rc, out, _ = run_main(["sweep", "--config", path, "--seq-len", "512,1024", "--json"])
    assert rc == 2 and json.loads(out)["error"]["code"] == "config_invalid_values"
    rc, out, _ = run_main(
        ["sweep", "--config", path, "--seq-len", "512,1024", "--lenient", "--json"]
    )
    runs = json.loads(out)["runs"]
    assert rc == 0 and all("config_values_replaced" in r["response"]["warnings"] for r in runs)
    rc, out, err = run_main(
        ["sweep", "--config", path, "--seq-len", "512,1024", "--lenient"], tty=True
    )
    assert rc == 0 and "lora_r = -5" in err and "8 used instead" in err and "lora_r" not in out


@pytest.mark.parametrize("fmt", ["axolotl", "trl", "llamafactory"])
def test_a_model_id_that_is_not_text_is_reported(fmt):
    key = "base_model" if fmt == "axolotl" else "model_name_or_path"
    extra = {
        "axolotl": "adapter: lora\n",
        "trl": "per_device_train_batch_size: 2\n",
        "llamafactory": "finetuning_type: lora\n",
    }[fmt]
    result = import_config(f"{key}: 7\n{extra}", fmt)
    statuses = {e["key"]: e["status"] for e in result["keys"]}
    assert statuses[key] == "unknown" and "model" not in result["request"]


def _tables():
    from calc.config_import import accelerate, axolotl, llamafactory, torchtune, trl

    return {
        "axolotl": [axolotl.KEYS],
        "trl": [trl.TRAINING_ARGS],
        "torchtune": [torchtune.KEYS],
        "accelerate": [accelerate.KEYS],
        "llamafactory": [llamafactory.KEYS, trl.TRAINING_ARGS],
    }


@pytest.mark.parametrize("fmt", ["axolotl", "trl", "torchtune", "accelerate", "llamafactory"])
def test_key_tables_name_the_fields_their_keys_set(fmt):
    """A table's ``fields`` are what the fixtures' top-level keys really set."""
    from calc.config_import.cli import import_file
    from calc.fields import spec_by_key

    tables = _tables()[fmt]
    for table in tables:
        for spec in table.values():
            assert set(spec.fields) <= set(spec_by_key("plan"))
    for path in sorted((ROOT / "tests" / "configs" / fmt).iterdir()):
        if path.name.startswith("ds_z"):
            continue
        for entry in import_file(str(path))["keys"]:
            top = entry["key"].split(".")[0]
            spec = next((t[top] for t in tables if top in t), None)
            if entry["status"] == "used" and spec is not None and "." not in entry["key"]:
                assert set(entry.get("fields") or [entry["field"]]) <= set(spec.fields), (
                    path.name,
                    entry,
                )


def _nested_keys(key, fmt):
    """The key-table entries a dotted key goes through, outermost first (FSDP names also
    without their ``fsdp_`` prefix); stops where an entry has no table of its own."""
    from calc.config_import import sections

    tables = [sections.DEEPSPEED] if fmt == "deepspeed" else _tables()[fmt]
    parts = key.split(".")
    spec = next((t[parts[0]] for t in tables if parts[0] in t), None)
    found = [spec] if spec is not None else []
    for part in parts[1:]:
        if spec is None or spec.table is None:
            return found, False
        spec = spec.table.get(part) or spec.table.get(part.removeprefix("fsdp_"))
        if spec is None:
            return found, False
        found.append(spec)
    return found, True


@pytest.mark.parametrize("fmt", ["axolotl", "trl", "torchtune", "accelerate", "deepspeed"])
def test_nested_sections_are_key_tables_naming_the_fields_they_set(fmt):
    """DeepSpeed's ``zero_optimization``, an FSDP config, bitsandbytes' and peft's configs and
    torchtune's components are read through tables: every key of theirs a fixture uses is an
    entry of its section's table, whose ``fields``, and each enclosing entry's, name what it set."""
    from calc.config_import.cli import import_file
    from calc.fields import spec_by_key

    nested = 0
    for path in sorted((ROOT / "tests" / "configs" / fmt).iterdir()):
        for entry in import_file(str(path))["keys"]:
            if entry["status"] != "used" or "." not in entry["key"]:
                continue
            specs, complete = _nested_keys(entry["key"], fmt)
            assert complete, (path.name, entry["key"])
            nested += 1
            for spec in specs:
                assert set(spec.fields) <= set(spec_by_key("estimate")) | {
                    "epochs",
                    "dataset_tokens",
                }
                assert set(entry.get("fields") or [entry["field"]]) <= set(spec.fields), (
                    path.name,
                    entry,
                    spec,
                )
    assert nested


def test_torchtune_components_of_the_wrong_type_are_reported_not_raised():
    """A loss component that is not a name, and an SGD momentum written as text, are keys
    the file gets wrong: reported, and the import goes on."""
    text = (
        "model:\n  _component_: torchtune.models.llama3_2.llama3_2_1b\n"
        "loss:\n  _component_: [torchtune.modules.loss.CEWithChunkedOutputLoss]\n"
        "optimizer:\n  _component_: torch.optim.SGD\n  momentum: high\n"
    )
    result = import_config(text, "torchtune")
    statuses = {e["key"]: e for e in result["keys"]}
    assert statuses["loss._component_"]["status"] == "unknown"
    assert statuses["optimizer.momentum"]["status"] == "invalid"
    assert statuses["optimizer.momentum"]["reason"] == "not_a_number"
    assert result["request"]["optimizer"] == "sgd" and result["request"]["chunked_loss"] is False
