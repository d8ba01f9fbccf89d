"""Config import: every fixture maps to a valid request with the values its file states,
every key is reported, round trips through each exporter, hostile files fail coded."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time

import pytest

from calc.config_import import detect_format, export_config, import_config
from calc.config_import.cli import import_file
from calc.errors import InputError
from calc.fields import spec_by_key
from calc.request import parse_estimate_request
from conftest import REPO_ROOT

ROOT = REPO_ROOT
CONFIGS = ROOT / "tests" / "configs"
FIXTURES = sorted(
    p for p in CONFIGS.glob("*/*") if not p.name.startswith("ds_z") and p.parent.name != "invalid"
)
FORMATS = ("axolotl", "trl", "llamafactory", "torchtune", "deepspeed", "accelerate")
ESTIMATE_KEYS = spec_by_key("estimate")
PLAN_KEYS = spec_by_key("plan")


def _normal(request: dict) -> dict:
    req = dict(request)
    req.setdefault("model", "llama-3.1-8b")
    return parse_estimate_request(req).to_dict()


def _keys(result: dict) -> dict:
    return {entry["key"]: entry for entry in result["keys"]}


@pytest.mark.parametrize("fmt", FORMATS)
def test_each_format_has_five_fixtures(fmt):
    assert len([p for p in FIXTURES if p.parent.name == fmt]) >= 5


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fixture_imports_to_valid_request_and_is_detected(path):
    result = import_file(str(path))
    assert result["detected"] == path.parent.name
    _normal(result["request"])  # raises when a value is not a valid request value
    # every top-level key of the file is reported exactly once (nested ones by path)
    from calc.config_import.loading import load_text

    data = load_text(path.read_bytes())
    reported = {entry["key"].split(".")[0] for entry in result["keys"]}
    assert set(map(str, data)) <= reported
    assert len({e["key"] for e in result["keys"]}) == len(result["keys"])
    for entry in result["keys"]:
        assert entry["status"] in ("used", "ignored", "unknown")
        assert (entry["field"] is not None) == (entry["status"] == "used")
        if entry["status"] == "used":
            assert entry["field"] in ESTIMATE_KEYS or entry["field"] in PLAN_KEYS


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_round_trip_import_export_import(path):
    first = import_file(str(path))
    fmt = path.parent.name
    text = export_config(first["request"], fmt)
    second = import_config(text, fmt)
    want, got = dict(first["request"]), dict(second["request"])
    if fmt in ("deepspeed", "accelerate"):  # these formats carry no model
        got.pop("model", None)
        want.pop("model", None)
    assert _normal(got) == _normal(want)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(
    "source", ["axolotl/qlora.yml", "torchtune/multigpu.yaml", "trl/offload.yaml"]
)
def test_cross_format_export_reimports(fmt, source):
    """A request from one tool, written for another, is read back the same where the other
    format can say it (the sharding/offload formats carry only their part)."""
    first = import_file(str(CONFIGS / source))["request"]
    second = import_config(export_config(first, fmt), fmt)["request"]
    shared = {
        "deepspeed": ("sharding", "cpu_offload", "micro_batch_size", "gradient_accumulation_steps"),
        "accelerate": ("sharding", "cpu_offload", "num_gpus"),
    }.get(fmt)
    if shared is None:
        a, b = _normal(first), _normal(second)
        for key in (
            "method",
            "lora_rank",
            "seq_len",
            "micro_batch_size",
            "gradient_accumulation_steps",
            "gradient_checkpointing",
            "optimizer",
            "model",
        ):
            assert a[key] == b[key], key
    else:
        a, b = _normal(first), _normal(second)
        for key in shared:
            if key == "sharding" and a["sharding"] == "none" and fmt == "deepspeed":
                continue
            assert a[key] == b[key], key


def test_axolotl_values_and_report():
    result = import_file(str(CONFIGS / "axolotl/qlora.yml"))
    req, keys = result["request"], _keys(result)
    assert req["model"] == "mistral-7b" and req["method"] == "qlora"
    assert req["lora_targets"] == ["q_proj", "k_proj", "v_proj", "o_proj"]
    assert "lm_head" in keys["lora_target_modules"]["note"]
    assert req["qlora_double_quant"] is False
    assert req["optimizer"] == "paged-adamw-8bit"
    assert req["activation_offload"] is True and req["gradient_checkpointing"] is True
    assert req["chunked_loss"] is True and req["attention"] == "flash"
    assert keys["learning_rate"]["status"] == "ignored"
    assert keys["liger_rms_norm"]["status"] == "unknown"
    # no packing: the run's length, but not its tokens
    assert keys["max_steps"]["status"] == "used" and req["max_steps"] == 500
    assert keys["max_steps"]["note"] == "dataset_tokens_need_packing"
    assert "dataset_tokens" not in result["plan"]
    assert {"key": "lora_r", "status": "used", "field": "lora_rank", "value": 16} == keys["lora_r"]


@pytest.mark.parametrize(
    ("fmt", "text", "want"),
    [
        (
            "axolotl",
            "lora_modules_to_save:\n  - embed_tokens\n  - lm_head\n",
            "embed_tokens+lm_head",
        ),
        ("axolotl", "lora_modules_to_save: [model.embed_tokens]\n", "embed_tokens"),
        ("trl", "use_peft: true\nlora_modules_to_save: [lm_head]\n", "lm_head"),
    ],
)
def test_modules_to_save_is_read_and_written_back(fmt, text, want):
    base = (
        "base_model: meta-llama/Llama-3.1-8B\nadapter: lora\n"
        if fmt == "axolotl"
        else "model_name_or_path: meta-llama/Llama-3.1-8B\n"
    )
    result = import_config(base + text, fmt)
    assert result["request"]["lora_modules_to_save"] == want
    assert _keys(result)["lora_modules_to_save"]["status"] == "used"
    again = import_config(export_config(result["request"], fmt), fmt)["request"]
    assert again["lora_modules_to_save"] == want


def test_modules_to_save_beyond_embedding_and_output_layer_is_not_modelled():
    result = import_config(
        "base_model: meta-llama/Llama-3.1-8B\nadapter: lora\n"
        "lora_modules_to_save: [embed_tokens, score]\n",
        "axolotl",
    )
    assert "lora_modules_to_save" not in result["request"]
    assert _keys(result)["lora_modules_to_save"]["status"] == "unknown"


def test_axolotl_defaults_are_named_with_version():
    result = import_config(
        "base_model: meta-llama/Llama-3.1-8B\nadapter: lora\nlearning_rate: 0.0002\n"
    )
    req = result["request"]
    assert req["micro_batch_size"] == 1 and req["seq_len"] == 512 and req["lora_rank"] == 8
    assert req["optimizer"] == "adamw" and req["optimizer_fused"] is True
    assert req["lora_targets"] == ["q_proj", "v_proj"]  # peft's table for llama
    sources = {d["field"]: d["source"] for d in result["defaults"]}
    assert "0.18.0" in sources["seq_len"] and "peft 0.21.0" in sources["lora_targets"]


def test_unknown_keys_are_listed_never_dropped():
    result = import_config(
        "base_model: meta-llama/Llama-3.1-8B\nmy_custom_flag: 3\nnested:\n  a: 1\n"
    )
    keys = _keys(result)
    assert keys["my_custom_flag"]["status"] == "unknown"
    assert keys["nested"]["status"] == "unknown"


def test_unknown_model_is_reported_with_hint_and_model_override():
    result = import_config("base_model: someone/private-model-7b\nadapter: lora\n")
    entry = _keys(result)["base_model"]
    assert entry["status"] == "unknown" and "paste_config_json" in entry["note"]
    assert "model" not in result["request"]
    given = import_config(
        "base_model: someone/private-model-7b\nadapter: lora\n", model="qwen2.5-7b"
    )
    assert given["request"]["model"] == "qwen2.5-7b"
    _normal(given["request"])


def test_trl_sft_defaults_and_plain_trainer_defaults():
    sft = import_config("model_name_or_path: Qwen/Qwen2.5-7B\nmax_length: 512\n")["request"]
    assert sft["gradient_checkpointing"] is True  # TRL's default
    assert sft["precision"] == "bf16-mixed"  # bf16 autocast over float32 weights
    assert sft["micro_batch_size"] == 8 and sft["chunked_loss"] is True
    plain = import_config("output_dir: x\nper_device_train_batch_size: 2\n", "trl")["request"]
    assert plain["gradient_checkpointing"] is False and plain["precision"] == "bf16-true"
    assert (
        import_config("output_dir: x\nmax_steps: 10\nnum_train_epochs: 2\n", "trl")["plan"][
            "epochs"
        ]
        == 2
    )


def test_deepspeed_values_and_gpus():
    req = import_file(str(CONFIGS / "deepspeed/zero3_offload.json"))["request"]
    assert req["sharding"] == "zero3" and req["cpu_offload"] == "optimizer+params"
    assert req["num_gpus"] == 8 and req["precision"] == "bf16-mixed"
    # a DeepSpeed config says who runs ZeRO: DeepSpeed, not FSDP
    assert req["sharding_engine"] == "deepspeed"
    stage0 = import_config('{"zero_optimization": {"stage": 0}}', "deepspeed")["request"]
    assert stage0["sharding"] == "ddp" and "sharding_engine" not in stage0


def test_deepspeed_file_named_by_path_read_or_inferred():
    read = import_file(str(CONFIGS / "llamafactory/offload.yaml"))
    assert _keys(read)["deepspeed"].get("note") == "file_read"
    assert read["request"]["cpu_offload"] == "optimizer+params"
    assert read["request"]["sharding_engine"] == "deepspeed"
    named = import_file(str(CONFIGS / "llamafactory/multigpu.yaml"))
    assert _keys(named)["deepspeed"]["note"] == "inferred_from_file_name"
    assert (
        named["request"]["sharding"] == "zero2"
        and named["request"]["sharding_engine"] == "deepspeed"
    )


def test_accelerate_gpus_and_fsdp():
    req = import_file(str(CONFIGS / "accelerate/ddp.yaml"))["request"]
    assert req["num_gpus"] == 16 and req["sharding"] == "ddp" and req["precision"] == "fp16-mixed"
    fsdp1 = import_file(str(CONFIGS / "accelerate/fsdp1_offload.yaml"))["request"]
    assert fsdp1["frozen_weight_grads"] is True and fsdp1["cpu_offload"] == "optimizer+params"
    assert "sharding_engine" not in fsdp1
    deepspeed = import_file(str(CONFIGS / "accelerate/deepspeed_offload.yaml"))["request"]
    assert deepspeed["sharding_engine"] == "deepspeed"


def test_torchtune_values():
    req = import_file(str(CONFIGS / "torchtune/lora.yaml"))["request"]
    assert req["method"] == "lora" and req["model"] == "llama-3.1-8b"
    assert req["lora_targets"] == [
        "q_proj",
        "v_proj",
        "o_proj",
        "gate_proj",
        "down_proj",
        "up_proj",
    ]
    multi = import_file(str(CONFIGS / "torchtune/multigpu.yaml"))
    assert multi["request"]["sync_each_micro_batch"] is True
    assert multi["plan"]["dataset_tokens"] == 500 * 2 * 1 * 4096


@pytest.mark.parametrize("fmt", ["axolotl", "trl", "llamafactory", "torchtune"])
def test_framework_key_names_the_files_training_library(fmt):
    path = next(p for p in FIXTURES if p.parent.name == fmt)
    got = import_file(str(path))["request"]["framework"]
    want = {"axolotl": "axolotl", "llamafactory": "llama-factory", "torchtune": "torchtune"}
    assert got == want.get(fmt, "trl-sft")


def test_llamafactory_unsloth_sets_framework():
    text = "model_name_or_path: meta-llama/Llama-3.1-8B\nfinetuning_type: lora\nuse_unsloth: true\n"
    assert _keys(import_config(text))["use_unsloth"]["status"] == "used"
    assert import_config(text)["request"]["framework"] == "unsloth"


def test_detect_format_refuses_unrelated_mapping():
    with pytest.raises(InputError) as err:
        detect_format({"name": "x", "version": 2})
    assert err.value.code == "config_format_unknown"


# ---- hostile and broken input --------------------------------------------------------
BILLION_LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(8)
)
HOSTILE = {
    "billion_laughs": (BILLION_LAUGHS, "config_alias_expansion"),
    "huge_anchor": (
        "a: &a [" + ", ".join(["0123456789"] * 2000) + "]\nb: [" + ", ".join(["*a"] * 60) + "]\n",
        "config_alias_expansion",
    ),
    "deep_flow": ("a: " + "[" * 5000 + "]" * 5000 + "\n", "config_too_deep"),
    "deep_block": ("".join(" " * i + f"k{i}:\n" for i in range(200)), "config_too_deep"),
    "deep_json": ('{"a": ' * 3000 + "1" + "}" * 3000, "config_too_deep"),
    "python_object": ("a: !!python/object/apply:os.system ['echo pwned']\n", "config_syntax"),
    "python_name": ("a: !!python/name:os.system\n", "config_syntax"),
    "binary_tag": ("a: !!binary aGVsbG8=\n", "config_unsupported_value"),
    "nul_bytes": (b"base_model: x\x00\x01\x02", "config_binary"),
    "not_utf8": (b"base_model: \xff\xfe\xfa", "config_not_utf8"),
    "too_large": ("a: " + "x" * (300 * 1024) + "\n", "config_too_large"),
    "syntax": ("a: [1, 2\nb: {\n", "config_syntax"),
    "list_root": ("- a\n- b\n", "config_not_mapping"),
    "empty": ("   \n", "config_empty"),
    "two_documents": ("a: 1\n---\nb: 2\n", "config_syntax"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_files_fail_coded_and_fast(name, tmp_path):
    text, code = HOSTILE[name]
    marker = tmp_path / "pwned"
    if isinstance(text, str):
        text = text.replace("echo pwned", f"touch {marker}")
    start = time.process_time()
    with pytest.raises(InputError) as err:
        import_config(text)
    cpu_s = time.process_time() - start
    assert err.value.code == code
    assert not marker.exists()
    # A hang guard, not a speed target (benchmarks/bench_config_import.py prints the speed):
    # expanding these files would take minutes of CPU; refusing them takes milliseconds.
    # CPU time, so a loaded machine does not fail it.
    assert cpu_s < 10.0


def test_cli_import_json_contract(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "calc",
            "import",
            "--format",
            "axolotl",
            str(CONFIGS / "axolotl/lora.yml"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["format"] == "axolotl" and data["request"]["lora_rank"] == 32
    assert {"key": "lora_r", "status": "used", "field": "lora_rank", "value": 32} in data["keys"]


def test_cli_estimate_config_equals_request(tmp_path):
    path = CONFIGS / "trl/lora.json"
    request = import_file(str(path))["request"]
    req_file = tmp_path / "r.json"
    req_file.write_text(json.dumps(request))
    via_config = subprocess.run(
        [sys.executable, "-m", "calc", "estimate", "--config", str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    via_request = subprocess.run(
        [sys.executable, "-m", "calc", "estimate", "--request", str(req_file)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert via_config.returncode == 0 and json.loads(via_config.stdout) == json.loads(
        via_request.stdout
    )


def test_cli_plan_config_with_overrides(tmp_path):
    over = tmp_path / "o.json"
    over.write_text(json.dumps({"gpu": "h100-sxm", "num_gpus": 8}))
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "calc",
            "plan",
            "--config",
            str(CONFIGS / "torchtune/multigpu.yaml"),
            "--request",
            str(over),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stdout
    data = json.loads(out.stdout)
    assert data["num_gpus"] == 8


def test_cli_bad_config_is_coded(tmp_path):
    bad = tmp_path / "bad.yml"
    bad.write_text(BILLION_LAUGHS)
    out = subprocess.run(
        [sys.executable, "-m", "calc", "import", str(bad)], capture_output=True, text=True, cwd=ROOT
    )
    assert (
        out.returncode == 2 and json.loads(out.stdout)["error"]["code"] == "config_alias_expansion"
    )
    out = subprocess.run(
        [sys.executable, "-m", "calc", "import", "--format", "nope", str(bad)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert out.returncode == 2 and json.loads(out.stdout)["error"]["code"] == "bad_arguments"


def test_calc_imports_without_yaml(tmp_path):
    """calc stays standard-library only: with yaml hidden, JSON configs still import and
    YAML gives the coded error."""
    code = (
        "import sys; sys.modules['yaml'] = None\n"
        "import calc, calc.config_import as ci\n"
        "print(ci.import_config('{\"zero_optimization\": {\"stage\": 2}}')['request']['sharding'])\n"
        "try:\n    ci.import_config('a: 1')\nexcept calc.InputError as e:\n    print(e.code)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.stdout.split() == ["zero2", "yaml_unavailable"], out.stderr


def test_axolotl_fsdp_version_outside_the_fsdp_config():
    text = (
        "base_model: meta-llama/Llama-3.1-8B\nadapter: lora\n{version}fsdp_config:\n"
        "  use_orig_params: true\n  reshard_after_forward: true\n"
    )
    v2 = import_config(text.format(version="fsdp_version: 2\n"))
    assert "frozen_weight_grads" not in v2["request"]  # FSDP2 has no flat-parameter units
    v1 = import_config(text.format(version=""))
    assert v1["request"]["frozen_weight_grads"] is True
    # FSDP2 copies each gathered unit out of its all-gather buffer; FSDP1 does not
    assert v2["request"]["fsdp_fully_shard"] is True
    assert "fsdp_fully_shard" not in v1["request"]


def test_accelerate_fsdp_version_2_reads_as_fully_shard():
    v2 = import_config((CONFIGS / "accelerate/fsdp2.yaml").read_bytes())
    assert v2["request"]["fsdp_fully_shard"] is True
    v1 = import_config((CONFIGS / "accelerate/fsdp1_offload.yaml").read_bytes())
    assert "fsdp_fully_shard" not in v1["request"]


def test_browser_entry_never_raises_and_fills_the_whole_form():
    from calc.config_import.browser import handle

    out = json.loads(
        handle("import", json.dumps({"text": (CONFIGS / "trl/lora.json").read_text()}))
    )
    form = out["result"]["form"]
    assert set(form) >= set(ESTIMATE_KEYS) - {"model"}
    assert form["lora_rank"] == 32 and form["epochs"] == 2
    exported = json.loads(
        handle("export", json.dumps({"request": out["result"]["request"], "format": "axolotl"}))
    )
    assert exported["result"]["text"] == export_config(out["result"]["request"], "axolotl")
    for action, payload in (
        ("import", "not json"),
        ("import", "[1]"),
        ("import", json.dumps({"text": 3})),
        ("export", json.dumps({"request": {}, "format": "nope"})),
        ("bogus", json.dumps({})),
    ):
        assert "error" in json.loads(handle(action, payload))


def test_cli_export_prints_the_format(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "calc",
            "import",
            "--export",
            "llamafactory",
            str(CONFIGS / "axolotl/lora.yml"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert out.returncode == 0
    again = import_config(out.stdout, "llamafactory")["request"]
    first = import_file(str(CONFIGS / "axolotl/lora.yml"))["request"]
    for key in ("model", "method", "lora_rank", "seq_len", "micro_batch_size", "optimizer"):
        assert again[key] == first[key]


def test_cli_combines_a_training_file_with_its_launch_config(tmp_path):
    train = CONFIGS / "axolotl/lora.yml"
    launch = CONFIGS / "accelerate/fsdp2.yaml"
    out = subprocess.run(
        [sys.executable, "-m", "calc", "estimate", "--config", str(train), "--config", str(launch)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stdout
    from calc.config_import.cli import request_from_config_file

    request = request_from_config_file([str(train), str(launch)])
    assert (
        request["num_gpus"] == 8 and request["sharding"] == "zero3" and request["lora_rank"] == 32
    )
    assert (
        request["precision"] == "bf16-true"
    )  # the Trainer's bf16 over accelerate's mixed_precision
    assert request_from_config_file([str(launch), str(train)]) == request  # order does not matter
    direct = subprocess.run(
        [sys.executable, "-m", "calc", "estimate", "--request", "-"],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert json.loads(out.stdout) == json.loads(direct.stdout)


def test_cli_flags_override_the_config_and_stand_in_for_an_unknown_model(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "calc",
            "plan",
            "--config",
            str(CONFIGS / "torchtune/lora.yaml"),
            "--gpu",
            "h100-sxm",
            "--num-gpus",
            "2",
            "--dataset-tokens",
            "1e8",
            "--json",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert json.loads(out.stdout)["num_gpus"] == 2
    private = tmp_path / "private.yml"
    private.write_text("base_model: someone/private-7b\nadapter: lora\nlora_r: 8\n")
    missing = subprocess.run(
        [sys.executable, "-m", "calc", "estimate", "--config", str(private), "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert (
        missing.returncode == 2
        and json.loads(missing.stdout)["error"]["code"] == "config_model_unknown"
    )
    given = subprocess.run(
        [
            sys.executable,
            "-m",
            "calc",
            "estimate",
            "--config",
            str(private),
            "--model",
            "mistral-7b",
            "--json",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert given.returncode == 0, given.stdout


def test_tied_modules_to_save_exports_both_modules():
    """axolotl and TRL have no key for peft's ensure_weight_tying: the export names both
    modules, and reads back as the untied pair."""
    req = {
        "model": "llama-3.2-1b",
        "method": "lora",
        "lora_modules_to_save": "embed_tokens+lm_head-tied",
    }
    for fmt in ("axolotl", "trl"):
        again = import_config(export_config(req, fmt), fmt)["request"]
        assert again["lora_modules_to_save"] == "embed_tokens+lm_head"


def test_trl_file_without_sftconfig_keys_is_the_plain_trainer():
    args = '{"per_device_train_batch_size": 2, "gradient_checkpointing": true}'
    assert import_config(args, "trl")["request"]["framework"] == "hf-trainer"
    sft = '{"per_device_train_batch_size": 2, "packing": false}'
    assert import_config(sft, "trl")["request"]["framework"] == "trl-sft"


@pytest.mark.parametrize("fmt", ["axolotl", "trl", "llamafactory", "accelerate"])
@pytest.mark.parametrize(
    ("request_keys", "version"),
    [
        ({"method": "full", "fsdp_fully_shard": True}, 2),
        ({"method": "full", "fsdp_flat_parameters": True}, 1),
        ({"method": "lora", "frozen_weight_grads": True}, 1),
        # neither key: the library's profile decides (accelerate's FSDP1 for the Trainer)
        ({"method": "full", "framework": "hf-trainer"}, 1),
        ({"method": "full", "framework": "torchtune"}, 2),
    ],
)
def test_fsdp_section_writes_the_version_the_request_runs(fmt, request_keys, version):
    """FSDP2 (fully_shard) is written as version 2 and read back as fsdp_fully_shard; FSDP1's
    flat parameters as version 1, which reads back without FSDP2's copy-out."""
    req = {"model": "llama-3.1-8b", "num_gpus": 4, "sharding": "zero3", **request_keys}
    text = export_config(req, fmt)
    key = "fsdp_version" if fmt == "accelerate" else "version"
    assert re.search(rf"^\s*{key}: {version}$", text, re.M), text
    again = import_config(text, fmt)["request"]
    assert bool(again.get("fsdp_fully_shard")) == (version == 2)
    assert again["sharding"] == "zero3"
    assert bool(again.get("frozen_weight_grads")) == bool(request_keys.get("frozen_weight_grads"))
    parse_estimate_request({"model": "llama-3.1-8b", **again})


_TT_FULL = "model:\n  _component_: torchtune.models.llama3_1.llama3_1_8b\n"
_TT_LORA = "model:\n  _component_: torchtune.models.llama3_1.lora_llama3_1_8b\n"


@pytest.mark.parametrize(
    ("text", "want", "statuses"),
    [
        # torchtune 0.7.0 recipes/configs/dev/8B_full_experimental.yaml
        (
            _TT_FULL
            + "enable_activation_checkpointing: False\nac_mode: 'selective'\nac_option: 2\n",
            {
                "gradient_checkpointing": True,
                "checkpointing_granularity": "every-n",
                "checkpointing_every": 2,
            },
            {"ac_mode": "used", "ac_option": "used"},
        ),
        (
            _TT_FULL + "ac_mode: selective\nac_option: '3'\n",
            {
                "gradient_checkpointing": True,
                "checkpointing_granularity": "every-n",
                "checkpointing_every": 3,
            },
            {"ac_mode": "used", "ac_option": "used"},
        ),
        (
            _TT_FULL + "ac_mode: selective\nac_option: 0\n",
            {"gradient_checkpointing": True, "checkpointing_granularity": "full"},
            {"ac_mode": "used", "ac_option": "used"},
        ),
        (
            _TT_FULL + "ac_mode: full\nac_option: 2\n",
            {"gradient_checkpointing": True, "checkpointing_granularity": "full"},
            {"ac_mode": "used", "ac_option": "ignored"},
        ),
        # checkpoint_wrapper's int(ac_style) fails on "op": not a run torchtune 0.7.0 makes
        (
            _TT_FULL + "ac_mode: selective\nac_option: op\n",
            {"gradient_checkpointing": False},
            {"ac_mode": "unknown", "ac_option": "unknown"},
        ),
        # the older flag checkpoints only while ac_mode is unset: both set run with neither
        (
            _TT_FULL + "enable_activation_checkpointing: true\nac_mode: selective\nac_option: 2\n",
            {"gradient_checkpointing": False},
            {"ac_mode": "used", "ac_option": "ignored"},
        ),
        # the LoRA recipes read neither key
        (
            _TT_LORA + "enable_activation_checkpointing: true\nac_mode: selective\nac_option: 2\n",
            {"gradient_checkpointing": True},
            {"ac_mode": "ignored", "ac_option": "ignored"},
        ),
    ],
)
def test_torchtune_selective_activation_checkpointing(text, want, statuses):
    result = import_config(text, "torchtune")
    req, keys = result["request"], _keys(result)
    for field, value in want.items():
        assert req.get(field) == value, (field, req)
    if want.get("checkpointing_granularity") != "every-n":
        assert "checkpointing_every" not in req
    for key, status in statuses.items():
        assert keys[key]["status"] == status, keys[key]
    parse_estimate_request(req)


@pytest.mark.parametrize(
    "text, plan",
    [
        # the Trainer's defaults: a save every 500 steps, no evaluation
        ("output_dir: x\n", {"save_steps": 500, "eval_steps": None}),
        (
            "save_steps: 200\neval_strategy: steps\neval_steps: 0.1\nsave_only_model: true\n",
            {"save_steps": 200, "eval_steps": 0.1, "save_only_model": True},
        ),
        # one at each epoch's end: a share of the run's steps
        (
            "save_strategy: epoch\neval_strategy: epoch\nnum_train_epochs: 4\n",
            {"save_steps": 0.25, "eval_steps": 0.25},
        ),
        ("save_strategy: epoch\nnum_train_epochs: 1\n", {"save_steps": 0.999}),
        # none: said outright, so that a file pasted over another clears the interval
        ("save_strategy: 'no'\nsave_steps: 100\n", {"save_steps": None}),
        ("per_device_eval_batch_size: 2\n", {"eval_batch_size": 2}),
    ],
)
def test_trainer_evaluations_and_saves_are_imported(text, plan):
    result = import_config(text, "trl")
    for key, value in plan.items():
        assert result["plan"][key] == value, key
    assert ("eval_tokens_needed" in result["notes"]) == (result["plan"]["eval_steps"] is not None)
    # the plan runs them: the schedule counts the saves the Trainer would make
    run = import_config(text + "model_name_or_path: Qwen/Qwen2.5-0.5B\n", "trl")
    request = {**run["request"], **run["plan"], "gpu": "l4", "dataset_tokens": 1e6}
    import calc

    phases = calc.plan_setup(request)["time"]["run_phases"]
    assert (phases["saves"] > 0) == (run["plan"]["save_steps"] is not None)


@pytest.mark.parametrize(
    "text, plan",
    [
        # no strategy: a save each epoch, four kept; no evaluation set, no evaluation
        (
            "base_model: x\nval_set_size: 0\neval_steps: 10\n",
            {"save_steps": 0.999, "eval_steps": None},
        ),
        (
            "val_set_size: 0.05\nevals_per_epoch: 4\nsaves_per_epoch: 2\nnum_epochs: 2\n",
            {"save_steps": 0.25, "eval_steps": 0.125, "eval_on_start": True, "save_total_limit": 4},
        ),
        # a save interval in steps wins over the strategy
        (
            "save_steps: 100\nsave_strategy: epoch\nsave_total_limit: 2\n",
            {"save_steps": 100, "save_total_limit": 2},
        ),
        ("test_datasets: [x]\neval_strategy: epoch\nnum_epochs: 3\n", {"eval_steps": 1 / 3}),
    ],
)
def test_axolotl_evaluations_and_saves_are_imported(text, plan):
    result = import_config(text, "axolotl")
    for key, value in plan.items():
        assert (
            result["plan"][key] == pytest.approx(value) if value else result["plan"][key] == value
        )
    keys = {e["key"] for e in result["keys"]}
    assert keys >= {k.split(":")[0] for k in text.splitlines() if ":" in k}


@pytest.mark.parametrize(
    ("fmt", "line", "want"),
    [
        ("axolotl", "tf32: true", True),
        ("axolotl", "tf32: auto", True),  # axolotl turns it on where the card has TF32
        ("axolotl", "tf32: false", False),
        ("trl", "tf32: true", True),
        ("trl", "tf32: false", False),
        ("trl", "tf32:", None),  # left unset: torch's own default, calc's
    ],
)
def test_tf32_is_read_into_the_request(fmt, line, want):
    head = {
        "axolotl": "base_model: meta-llama/Llama-3.1-8B\nadapter: lora\n",
        "trl": "model_name_or_path: meta-llama/Llama-3.1-8B\nuse_peft: true\n",
    }[fmt]
    result = import_config(head + line + "\n", fmt)
    entry = next(k for k in result["keys"] if k["key"] == "tf32")
    if want is None:
        assert "tf32" not in result["request"] and entry["status"] == "ignored"
    else:
        assert result["request"]["tf32"] is want and entry["status"] == "used"


@pytest.mark.parametrize("fmt", ["axolotl", "trl", "llamafactory"])
def test_tf32_survives_export_and_import(fmt):
    request = {"model": "llama-3.1-8b", "method": "lora", "precision": "fp32", "tf32": True}
    back = import_config(export_config(request, fmt), fmt)["request"]
    assert back["tf32"] is True
