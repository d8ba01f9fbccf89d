"""The JSON Schemas of the requests (calc.schema) against calc's own parser: a request the
schema accepts, the parser accepts (for what a schema can say); a request that breaks one
constraint the schema states, both refuse."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import calc
from calc import gpus
from calc.errors import CalcError
from calc.fields import BEHAVIOUR, BY_KEY, field_specs
from calc.plan import parse_plan_request
from calc.presets import get_preset, resolve_preset_id
from calc.request import parse_estimate_request
from calc.schema import FILE_NAMES, request_schema, schema_files
from schema_check import KEYWORDS, errors, keywords
from conftest import REPO_ROOT

PARSERS = {"estimate": parse_estimate_request, "plan": parse_plan_request}
SCHEMAS = {command: request_schema(command) for command in FILE_NAMES}


def _accepts(command: str, request: dict) -> bool:
    try:
        PARSERS[command](request)
    except CalcError:
        return False
    return True


@pytest.mark.parametrize("command", list(FILE_NAMES))
def test_schema_has_every_key_of_the_field_tables(command):
    schema = SCHEMAS[command]
    keys = [spec.key for spec in field_specs(command)]
    framework = keys.index("framework")
    assert list(schema["properties"]) == [
        *keys[: framework + 1],
        "behaviour",
        *keys[framework + 1 :],
    ]
    properties = dict(schema["properties"])
    behaviour = properties.pop("behaviour")
    assert behaviour["type"] == "object" and behaviour["additionalProperties"] is False
    assert list(behaviour["properties"]) == [k for k in keys if BY_KEY[k].group == BEHAVIOUR]
    for key, prop in behaviour["properties"].items():  # on top they still work, as before
        assert properties[key] == {**prop, "deprecated": True}
    assert schema["additionalProperties"] is False
    assert set(schema["required"]) == (
        {"model", "dataset_tokens", "gpu"} if command == "plan" else {"model"}
    )
    assert keywords(schema) <= KEYWORDS, keywords(schema) - KEYWORDS
    for key, prop in properties.items():
        assert prop["description"], key
        assert prop.get("deprecated", False) == (BY_KEY[key].group == BEHAVIOUR), key
        if key not in schema["required"] and "default" in prop:
            assert prop["default"] == BY_KEY[key].default


def _strategy(schema: dict):
    """Values of one property, drawn from its schema (None: nothing to draw from)."""
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    types = schema.get("type")
    types = [types] if isinstance(types, str) else types or []
    if types == ["boolean"]:
        return st.booleans()
    if "integer" in types:
        return st.integers(
            schema.get("minimum", schema.get("exclusiveMinimum", -(10**6) - 1) + 1),
            schema.get("maximum", 10**6),
        )
    if "number" in types:
        lo = schema.get("minimum", schema.get("exclusiveMinimum"))
        hi = schema.get("maximum", schema.get("exclusiveMaximum"))
        values = st.floats(
            lo,
            hi,
            exclude_min="exclusiveMinimum" in schema,
            exclude_max="exclusiveMaximum" in schema,
            allow_nan=False,
            allow_infinity=False,
        )
        return st.one_of(st.none(), values) if "null" in types else values
    return None


@st.composite
def valid_requests(draw, command: str):
    schema = SCHEMAS[command]
    # model: a preset id, or a Hugging Face id the schema lists, in any letter case (a
    # config.json's validity is beyond a schema; see calc.schema)
    presets, hf_ids, _ = schema["properties"]["model"]["anyOf"]
    written = draw(
        st.one_of(
            st.sampled_from(presets["enum"]),
            st.sampled_from(hf_ids["examples"]).flatmap(
                lambda hf_id: st.sampled_from(
                    [hf_id, hf_id.lower(), hf_id.upper(), f" https://HuggingFace.co/{hf_id}/ "]
                )
            ),
        )
    )
    model = resolve_preset_id(written)
    out = {"model": written}
    for key, prop in schema["properties"].items():
        if key == "model" or (key not in schema["required"] and not draw(st.booleans())):
            continue
        if key == "lora_targets":  # names must be the model's (beyond a schema)
            names = get_preset(model).linear_names()
            out[key] = draw(
                st.one_of(
                    st.just("all-linear"),
                    st.lists(st.sampled_from(names), min_size=1, max_size=3, unique=True),
                    st.lists(st.sampled_from(names), min_size=1, max_size=3, unique=True).map(
                        ",".join
                    ),
                )
            )
            continue
        strategy = _strategy(prop)
        if strategy is not None and prop.get("deprecated") and draw(st.booleans()):
            out.setdefault("behaviour", {})[key] = draw(strategy)  # a behaviour in its place
        elif strategy is not None:
            out[key] = draw(strategy)
    # what the schema cannot say (calc.schema): a granularity other than full with checkpointing on,
    # every-n with its N
    if out.get("checkpointing_granularity", "full") != "full":
        out["gradient_checkpointing"] = True
    if out.get("checkpointing_granularity") == "every-n" and out.get("checkpointing_every") is None:
        out["checkpointing_every"] = draw(st.integers(1, 64))
    # FSDP1 and FSDP2 together is beyond a schema (calc.schema): one of them only
    given = {**out, **out.get("behaviour", {})}
    if "fsdp_flat_parameters" in given and "fsdp_fully_shard" in given:
        out.pop("fsdp_fully_shard", None)
        out.get("behaviour", {}).pop("fsdp_fully_shard", None)
    # a shard group that does not divide the GPU count is beyond a schema (calc.schema)
    group, gpus_given = out.get("shard_group"), out.get("num_gpus", 1)
    if group is not None and group < gpus_given and gpus_given % group:
        out.pop("shard_group")
    # sequence parallel groups against the GPUs and the heads are beyond a schema (calc.schema)
    if out.get("sequence_parallel", 1) > 1:
        out.pop("sequence_parallel")
    # a power limit on a card without published clocks is beyond a schema (calc.schema)
    if "power_limit_w" in out and not gpus.get_gpu(out["gpu"]).boost_clock_mhz:
        out.pop("power_limit_w")
    return out


@settings(max_examples=150)
@given(data=st.data())
@pytest.mark.parametrize("command", list(FILE_NAMES))
def test_schema_valid_requests_are_accepted(command, data):
    request = data.draw(valid_requests(command))
    assert errors(request, SCHEMAS[command]) == []
    assert _accepts(command, request), request


def _base(command: str) -> dict:
    return {
        "model": "llama-3.1-8b",
        **({"dataset_tokens": 1e7, "gpu": "l4"} if command == "plan" else {}),
    }


def _breaking_values(prop: dict) -> list:
    """Values that break one constraint the property's schema states."""
    types = prop.get("type")
    types = [types] if isinstance(types, str) else types or []
    out: list = []
    if "enum" in prop:
        out.append("no-such-value")
    if types == ["boolean"]:
        out += ["true", 1, None]
    if "integer" in types or "number" in types:
        out += ["12", [1]] + ([] if "null" in types else [None])
        if "minimum" in prop:
            out.append(prop["minimum"] - 1)
        if "exclusiveMinimum" in prop:
            out.append(prop["exclusiveMinimum"])
        if "maximum" in prop:
            out.append(prop["maximum"] * 2 + 1)
        if "exclusiveMaximum" in prop:
            out.append(prop["exclusiveMaximum"])
        if "integer" in types:
            out.append(1.5)
    if "anyOf" in prop and "pattern" in prop["anyOf"][0]:  # lora_targets
        out += ["", ",", [], [1], 7]
    elif "anyOf" in prop:  # model
        out += REFUSED_MODELS
    return out


# model values both the schema and calc refuse: near misses of each accepted form
REFUSED_MODELS = [
    7,
    None,
    True,
    [],
    ["llama-3.1-8b"],
    "",
    " ",
    "no-such-preset",
    "Llama-3.1-8B",
    " llama-3.1-8b",
    "Qwen/NoSuchModel-8B",
    "Qwen/Qwen3-8B/",
    "/Qwen/Qwen3-8B",
    "Qwen/Qwen3-8B-extra",
    "Qwen//Qwen3-8B",
    "huggingface.co/Qwen/Qwen3-8B",
    "http://huggingface.co/Qwen/Qwen3-8B",
    "https://huggingface.co/",
    "https://huggingface.co/Qwen",
    "https://hf.co/Qwen/Qwen3-8B",
    "Qwen/Qwen3-8B\u0000",
    "gpt2/",
    {"name": "x"},
    {"hf_config": {}, "extra": 1},
    {"hf_config": "config.json"},
    {"hf_config": None},
]


@pytest.mark.parametrize("command", list(FILE_NAMES))
def test_requests_that_break_the_schema_are_refused(command):
    schema = SCHEMAS[command]
    checked = 0
    for key, prop in schema["properties"].items():
        for value in _breaking_values(prop):
            request = {**_base(command), key: value}
            assert errors(request, schema), (key, value)
            assert not _accepts(command, request), (key, value)
            checked += 1
    for key in schema["required"]:
        request = {k: v for k, v in _base(command).items() if k != key}
        assert errors(request, schema) and not _accepts(command, request)
    request = {**_base(command), "no_such_key": 1}
    assert errors(request, schema) and not _accepts(command, request)
    for behaviour in (
        3,
        {"no_such_key": 1},
        {"seq_len": 1024},
        {"qlora_keeps_inputs": 1},
        {"moe_expert_layout": "no-such-value"},
    ):
        request = {**_base(command), "behaviour": behaviour}
        assert errors(request, schema), behaviour
        assert not _accepts(command, request), behaviour
    assert checked > 60


def test_what_a_schema_cannot_say_is_documented():
    """Lora target names depend on the model: the schema cannot list them."""
    import calc.schema

    schema = SCHEMAS["estimate"]
    request = {"model": "llama-3.1-8b", "lora_targets": ["no_such_proj"]}
    assert errors(request, schema) == [] and not _accepts("estimate", request)
    assert "unknown_lora_target" in calc.schema.__doc__


@pytest.mark.parametrize("command", list(FILE_NAMES))
def test_a_whole_number_with_a_zero_fraction_is_an_integer_for_both(command):
    """Draft 2020-12 counts 2048.0 as an integer; calc reads it as 2048, with the same answer."""
    schema = SCHEMAS[command]
    whole = {**_base(command), "seq_len": 2048.0, "micro_batch_size": 2.0}
    assert errors(whole, schema) == [] and _accepts(command, whole)
    call = calc.estimate if command == "estimate" else calc.plan_setup
    assert call(whole) == call({**_base(command), "seq_len": 2048, "micro_batch_size": 2})
    fraction = {**_base(command), "seq_len": 2048.5}
    assert errors(fraction, schema) and not _accepts(command, fraction)


def test_schema_files_and_cli_print_the_same(tmp_path):
    from cli_run import run_main

    files = schema_files()
    assert set(files) == {"estimate-request.schema.json", "plan-request.schema.json"}
    for command, name in FILE_NAMES.items():
        rc, out, _ = run_main(["schema", command])
        assert rc == 0 and out == files[name] and json.loads(out) == SCHEMAS[command]


def test_site_hook_writes_the_schema_files(tmp_path):
    import importlib.util
    from types import SimpleNamespace

    root = REPO_ROOT
    spec = importlib.util.spec_from_file_location("schema_hook", root / "hooks" / "schema_files.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    hook.on_post_build(SimpleNamespace(site_dir=str(tmp_path)))
    for name, text in schema_files().items():
        assert (tmp_path / "schema" / name).read_text(encoding="utf-8") == text
    assert "hooks/schema_files.py" in (root / "mkdocs.yml").read_text(encoding="utf-8")


# --- the published schema against every request the project documents -----------------------------

ROOT = REPO_ROOT
DOCUMENTED_IN = ["README.md", "packaging/calc/README.md", "docs/en/api.md", "docs/es/api.md"]


def _command_lines() -> list[list[str]]:
    """argv of every estimate/plan/sweep command line the project shows: --help's examples, the
    READMEs' and the API pages' code blocks and cli_example() macros, with the program name."""
    import re
    import shlex

    from calc.cli.helptext import examples

    config = str(ROOT / "tests" / "configs" / "axolotl" / "qlora.yml")  # the reader's FILE.yml
    lines = [shlex.split(example.replace("FILE.yml", config)) for example in examples()]
    lines = [argv for argv in lines if argv[0] in ("estimate", "plan", "sweep")]
    for name in DOCUMENTED_IN:
        text = (ROOT / name).read_text(encoding="utf-8")
        lines += [shlex.split(m) for m in re.findall(r'cli_example\("([^"]+)"\)', text)]
        for line in text.splitlines():
            found = re.match(
                r"\s*(?:python -m calc|gpu-finetune-calc) ((?:estimate|plan|sweep) .*)", line
            )
            if found and "--help" not in found[1]:
                lines.append(shlex.split(found[1].split("#")[0]))
    return lines


def _request_of(argv: list[str]) -> tuple[str, dict]:
    """(estimate or plan, the request) that the CLI builds from ``argv``; a sweep's first run."""
    from calc.cli import app, commands, sweep  # importing commands and sweep registers them
    from calc.fields import field_specs, spec_by_key
    from calc.cli.messages import Messages
    from calc.config_import.cli import register_cli

    register_cli()
    command = argv[0]
    argv = [a for a in argv if a not in ("--csv", "--json", "--table")]
    args = app.build_parser(Messages("en"), only=command).parse_args(argv)
    if command == "sweep":
        for spec in spec_by_key("plan").values():
            text = getattr(args, spec.key, None)
            values = sweep.sweep_values(spec, text) if isinstance(text, str) else None
            if values is not None:
                setattr(args, spec.key, str(values[0]))
        kind = "plan" if args.dataset_tokens is not None and args.gpu is not None else "estimate"
        request = commands.build_request(args, field_specs("plan"))
        if kind == "estimate":
            request.pop("gpu", None)
        return kind, request
    return command, commands.build_request(args, field_specs(command))


def _python_requests() -> list[tuple[str, dict]]:
    """``estimate({...})`` and ``plan({...})`` in the Python examples of the docs."""
    import ast
    import re

    out = []
    for name in DOCUMENTED_IN:
        for block in re.findall(
            r"```python\n(.*?)```", (ROOT / name).read_text(encoding="utf-8"), re.S
        ):
            for node in ast.walk(ast.parse(block)):
                if (
                    isinstance(node, ast.Call)
                    and getattr(node.func, "id", None) in PARSERS
                    and node.args
                ):
                    out.append((node.func.id, ast.literal_eval(node.args[0])))
    return out


def _piped_requests() -> list[tuple[str, dict]]:
    """``echo '{...}' | python -m calc estimate --request -`` in the READMEs."""
    import re

    out = []
    for name in DOCUMENTED_IN:
        text = (ROOT / name).read_text(encoding="utf-8")
        out += [
            (c, json.loads(body))
            for body, c in re.findall(r"echo '(\{.*?\})' \| python -m calc (\w+)", text)
        ]
    return out


def _config_requests() -> list[tuple[str, dict]]:
    """What ``import`` makes of every example training config (an accelerate or DeepSpeed file
    alone names no model: it is launched with one, here the README's)."""
    from cli_run import run_main

    out = []
    for path in sorted((ROOT / "tests" / "configs").rglob("*")):
        if path.suffix not in (".json", ".yaml", ".yml") or "invalid" in path.parts:
            continue  # tests/configs/invalid/ holds configs that must be refused
        rc, text, err = run_main(["import", str(path)])
        assert rc == 0, (path, text, err)
        out.append(("estimate", {"model": "llama-3.1-8b", **json.loads(text)["request"]}))
    return out


def test_every_documented_request_is_valid_for_the_schema_and_for_calc():
    documented = (
        [_request_of(argv) for argv in _command_lines()]
        + _python_requests()
        + _piped_requests()
        + _config_requests()
    )
    assert len(documented) > 40 and {c for c, _ in documented} == {"estimate", "plan"}
    assert any("/" in str(r.get("model")) for _, r in documented)  # a Hugging Face id among them
    for command, request in documented:
        assert errors(request, SCHEMAS[command]) == [], (command, request)
        assert _accepts(command, request), (command, request)


def get_preset_config(preset_id: str) -> dict:
    from calc.presets import preset_row

    return preset_row(preset_id)["config"]


@pytest.mark.parametrize(
    "model",
    [
        "Qwen/Qwen3-8B",
        "qwen/qwen3-8b",
        "QWEN/QWEN3-8B",
        " Qwen/Qwen3-8B\n",
        "https://huggingface.co/Qwen/Qwen3-8B",
        "HTTPS://HUGGINGFACE.CO//qwen/qwen3-8b/",
        "gpt2",
        "meta-llama/Llama-3.1-8B-Instruct",
        "llama-3.1-8b",
        {"hf_config": get_preset_config("qwen3-8b")},
        {"hf_config": get_preset_config("qwen3-8b"), "name": "mine"},
    ],
)
def test_model_forms_calc_reads_are_in_the_schema(model):
    for command in FILE_NAMES:
        request = {**_base(command), "model": model}
        assert errors(request, SCHEMAS[command]) == [] and _accepts(command, request), (
            command,
            model,
        )


@pytest.mark.parametrize("model", REFUSED_MODELS)
def test_model_forms_calc_refuses_the_schema_refuses(model):
    for command in FILE_NAMES:
        request = {**_base(command), "model": model}
        assert errors(request, SCHEMAS[command]) and not _accepts(command, request), (
            command,
            model,
        )


def test_every_hugging_face_id_of_the_alias_table_and_no_other():
    """The pattern is the alias table: each id in three letter cases and as an address matches,
    and so does nothing calc does not resolve (each id with a letter dropped or added)."""
    import re

    from calc.presets import alias_table
    from calc.schema import hf_id_pattern

    pattern = re.compile(hf_id_pattern())
    examples_ = SCHEMAS["estimate"]["properties"]["model"]["anyOf"][1]["examples"]
    assert {e.lower() for e in examples_} == set(alias_table())
    for hf_id in alias_table():
        for written in (hf_id, hf_id.upper(), hf_id.title(), f"https://huggingface.co/{hf_id}"):
            assert pattern.search(written) and resolve_preset_id(written) == alias_table()[hf_id]
        for near in (hf_id[:-1], hf_id + "x", hf_id + "/"):
            if near.lower() not in alias_table():
                assert not pattern.search(near), near
                with pytest.raises(CalcError):
                    resolve_preset_id(near)


def test_the_pattern_is_an_ecma_262_regular_expression():
    """JSON Schema's patterns are ECMA-262: what JavaScript (the form, most validators) reads."""
    import shutil
    import subprocess

    from calc.schema import hf_id_pattern

    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    script = (
        "const r = new RegExp(process.argv[1], 'u');"
        "console.log(JSON.stringify(JSON.parse(process.argv[2]).map(s => r.test(s))));"
    )
    probes = [
        "Qwen/Qwen3-8B",
        "qwen/QWEN3-8B",
        " https://HuggingFace.co/Qwen/Qwen3-8B/",
        "gpt2",
        "Qwen/Qwen3-8B/",
        "Qwen/NoSuch",
        "llama-3.1-8b",
    ]
    proc = subprocess.run(
        [node, "-e", script, hf_id_pattern(), json.dumps(probes)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [True, True, True, True, False, False, False]
