"""The JSON Schemas of the requests (calc.schema) against calc's own parser: a request the
schema accepts, the parser accepts (for what a schema can say); a request that breaks one
constraint the schema states, both refuse."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calc.errors import CalcError
from calc.plan import PLAN_FIELDS, parse_plan_request
from calc.presets import get_preset
from calc.request import ESTIMATE_FIELDS, parse_estimate_request
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
    keys = list(ESTIMATE_FIELDS) + (list(PLAN_FIELDS) if command == "plan" else [])
    assert list(schema["properties"]) == keys
    assert schema["additionalProperties"] is False
    assert set(schema["required"]) == ({"model", "dataset_tokens", "gpu"} if command == "plan" else {"model"})
    assert keywords(schema) <= KEYWORDS, keywords(schema) - KEYWORDS
    for key, prop in schema["properties"].items():
        assert prop["description"], key
        if key not in schema["required"] and "default" in prop:
            default = (ESTIMATE_FIELDS.get(key) or PLAN_FIELDS[key])[0]
            assert prop["default"] == default


def _strategy(schema: dict):
    """Values of one property, drawn from its schema (None: nothing to draw from)."""
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    types = schema.get("type")
    types = [types] if isinstance(types, str) else types or []
    if types == ["boolean"]:
        return st.booleans()
    if "integer" in types:
        return st.integers(schema.get("minimum", schema.get("exclusiveMinimum", -10**6 - 1) + 1),
                           schema.get("maximum", 10**6))
    if "number" in types:
        lo = schema.get("minimum", schema.get("exclusiveMinimum"))
        hi = schema.get("maximum", schema.get("exclusiveMaximum"))
        values = st.floats(lo, hi, exclude_min="exclusiveMinimum" in schema,
                           exclude_max="exclusiveMaximum" in schema, allow_nan=False, allow_infinity=False)
        return st.one_of(st.none(), values) if "null" in types else values
    return None


@st.composite
def valid_requests(draw, command: str):
    schema = SCHEMAS[command]
    # model: the preset branch (a config.json's validity is beyond a schema; see calc.schema)
    model = draw(st.sampled_from(schema["properties"]["model"]["oneOf"][0]["enum"]))
    out = {"model": model}
    for key, prop in schema["properties"].items():
        if key == "model" or (key not in schema["required"] and not draw(st.booleans())):
            continue
        if key == "lora_targets":  # names must be the model's (beyond a schema)
            names = get_preset(model).linear_names()
            out[key] = draw(st.one_of(st.just("all-linear"), st.lists(
                st.sampled_from(names), min_size=1, max_size=3, unique=True),
                st.lists(st.sampled_from(names), min_size=1, max_size=3, unique=True).map(",".join)))
            continue
        strategy = _strategy(prop)
        if strategy is not None:
            out[key] = draw(strategy)
    return out


@settings(max_examples=150)
@given(data=st.data())
@pytest.mark.parametrize("command", list(FILE_NAMES))
def test_schema_valid_requests_are_accepted(command, data):
    request = data.draw(valid_requests(command))
    assert errors(request, SCHEMAS[command]) == []
    assert _accepts(command, request), request


def _base(command: str) -> dict:
    return {"model": "llama-3.1-8b", **({"dataset_tokens": 1e7, "gpu": "l4"} if command == "plan" else {})}


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
    if "anyOf" in prop:  # lora_targets
        out += ["", ",", [], [1], 7]
    if "oneOf" in prop:  # model
        out += [7, {"name": "x"}, {"hf_config": {}, "extra": 1}, "no-such-preset"]
    return out


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
    assert checked > 60


def test_what_a_schema_cannot_say_is_documented():
    """2.0 is an integer for JSON Schema, not for calc; lora target names depend on the model."""
    import calc.schema
    schema = SCHEMAS["estimate"]
    for request in ({"model": "llama-3.1-8b", "seq_len": 2048.0},
                    {"model": "llama-3.1-8b", "lora_targets": ["no_such_proj"]}):
        assert errors(request, schema) == [] and not _accepts("estimate", request)
    assert "2.0" in calc.schema.__doc__ and "unknown_lora_target" in calc.schema.__doc__


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
