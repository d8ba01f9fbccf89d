"""The field registry (calc.fields): each key defined once, and what is read from it agrees."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from calc import timing
from calc.catalogue import LANGS, catalogue
from calc.errors import InputError
from calc.fields import (
    BEHAVIOUR,
    BY_KEY,
    FIELDS,
    GROUPS,
    KINDS,
    PLAN,
    READER,
    field_specs,
    keys,
    spec_by_key,
)
from calc.plan import PlanOptions
from calc.request import EstimateRequest, parse_estimate_request


def test_each_key_once_in_a_known_group_and_kind():
    assert len(BY_KEY) == len(FIELDS)
    assert {spec.group for spec in FIELDS} == set(GROUPS)
    assert {spec.kind for spec in FIELDS} <= set(KINDS)
    assert [s.key for s in field_specs("plan")] == [s.key for s in FIELDS]
    assert [s.key for s in field_specs("estimate")] == [s.key for s in FIELDS if s.group != PLAN]
    with pytest.raises(ValueError):
        field_specs("sweep")


def test_a_key_without_a_default_is_required_or_optional():
    assert [s.key for s in FIELDS if s.required] == ["model", "dataset_tokens", "gpu"]
    for spec in FIELDS:
        assert spec.default is not None or spec.required or spec.optional, spec.key
        if spec.kind == "enum":
            assert spec.choices and spec.default in spec.choices, spec.key
            if spec.enum is not None:
                assert spec.choices == tuple(m.value for m in spec.enum), spec.key
        if spec.kind in ("int", "number", "fraction"):
            assert spec.minimum is not None and spec.maximum is not None, spec.key
        if spec.methods is not None:
            assert set(spec.methods) <= {"full", "lora", "qlora"}, spec.key


def test_library_behaviours_are_switches_a_profile_or_the_reader_sets():
    # a behaviour is a yes/no or a closed choice with a default that is today's usual library
    for key in keys(BEHAVIOUR):
        spec = BY_KEY[key]
        assert spec.kind in ("bool", "enum") and spec.table == "estimate", key
        assert spec.doc, key  # what the quirk is in the libraries, with sources
    assert "framework" in keys(READER)


@pytest.mark.parametrize("lang", LANGS)
def test_every_key_has_its_words_in_the_catalogue(lang):
    words = catalogue(lang)
    for spec in FIELDS:
        assert words.has(spec.label_id), (lang, spec.label_id)
        assert words.has(spec.help_id), (lang, spec.help_id)


def test_the_request_classes_carry_exactly_the_registry_keys():
    estimate = {f.name for f in dataclasses.fields(EstimateRequest)}
    assert estimate == {"model_id", "profile_keys", "samples_seen", *spec_by_key("estimate")}
    assert {f.name for f in dataclasses.fields(PlanOptions)} == set(keys(PLAN))
    echoed = parse_estimate_request({"model": "llama-3.1-8b"}).to_dict()
    assert list(echoed) == [s.key for s in field_specs("estimate")]
    assert echoed["framework"] == "hf-trainer"
    # without a library profile every key echoes its own default
    bare = parse_estimate_request({"model": "llama-3.1-8b", "framework": "generic"}).to_dict()
    for spec in field_specs("estimate"):
        if spec.key not in ("model", "framework"):
            value = bare[spec.key]
            assert value == spec.default or spec.key in ("lora_targets",), spec.key


@pytest.mark.parametrize(
    "key, value, code",
    [
        ("seq_len", 0, "not_positive"),
        ("seq_len", 2.5, "not_integer"),
        ("lora_dropout", 1.0, "out_of_range"),
        ("method", "dora", "unknown_value"),
        ("price_tier", 3, "wrong_type"),
        ("price_tier", "cheap", "unknown_value"),
        ("mfu", 0, "out_of_range"),
        ("dataset_tokens", None, "missing_field"),
        ("gpu", "h900", "unknown_gpu"),
        ("qlora_keeps_inputs", 1, "not_boolean"),
    ],
)
def test_one_check_per_kind_names_the_key(key, value, code):
    with pytest.raises(InputError) as err:
        BY_KEY[key].check(value)
    assert (err.value.code, err.value.field) == (code, key)


def test_checked_values_take_the_registry_types():
    assert BY_KEY["method"].check("qlora").value == "qlora"
    assert BY_KEY["seq_len"].check(2048.0) == 2048 and type(BY_KEY["seq_len"].check(2048.0)) is int
    assert BY_KEY["price_tier"].check("managed") == "managed"
    assert BY_KEY["mfu"].check(None) is None and BY_KEY["mfu"].check(1) == 1.0
    assert BY_KEY["lora_targets"].check("q_proj,v_proj") == "q_proj,v_proj"  # no model: as given


def test_the_schema_does_not_need_the_cli():
    code = "import sys, calc.schema; calc.schema.request_schema('plan'); print('calc.cli' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_help_of_mfu_says_what_the_default_depends_on():
    # the default utilisation depends on the card class only (calc.timing.default_mfu)
    for cls in timing.MATMUL_EFFICIENCY:
        assert len({timing.default_mfu(cls, m) for m in ("full", "lora", "qlora")}) == 1
    assert "method" not in catalogue("en").message("help.mfu")
    assert "método" not in catalogue("es").message("help.mfu")
