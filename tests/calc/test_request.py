"""Request validation: every bad input gives an InputError/ConfigError with code and field."""

from __future__ import annotations

import pytest

from calc import memory
from calc.errors import CalcError, ConfigError, InputError
from calc.fields import spec_by_key
from calc.request import parse_estimate_request

OK = {"model": "llama-2-7b"}


@pytest.mark.parametrize(
    "request_obj, code, field",
    [
        ([], "request_not_object", None),
        ("llama-2-7b", "request_not_object", None),
        (None, "request_not_object", None),
        ({}, "missing_field", "model"),
        ({"model": "llama-2-7b", "batch": 1}, "unknown_key", "batch"),
        ({"model": "no-such-model"}, "unknown_preset", "model"),
        ({"model": 7}, "wrong_type", "model"),
        ({"model": ["llama-2-7b"]}, "wrong_type", "model"),
        ({"model": {"hf_config": {}, "extra": 1}}, "unknown_key", "model.extra"),
        ({"model": {}}, "missing_field", "model.hf_config"),
        ({"model": {"hf_config": []}}, "config_not_object", "hf_config"),
        (
            {"model": {"hf_config": {"model_type": "t5"}}},
            "unsupported_architecture",
            "hf_config.model_type",
        ),
        ({"model": {"hf_config": {"model_type": "llama"}}}, "config_missing_key", None),
        ({"model": "llama-2-7b", "micro_batch_size": 2.5}, "not_integer", "micro_batch_size"),
        ({"model": "llama-2-7b", "micro_batch_size": -2.0}, "not_positive", "micro_batch_size"),
        ({"model": "llama-2-7b", "seq_len": 1e300}, "out_of_range", "seq_len"),
        (
            {"model": "llama-2-7b", "micro_batch_size": float("nan")},
            "not_integer",
            "micro_batch_size",
        ),
        ({"model": "llama-2-7b", "micro_batch_size": True}, "not_integer", "micro_batch_size"),
        ({"model": "llama-2-7b", "micro_batch_size": "2"}, "not_integer", "micro_batch_size"),
        ({"model": "llama-2-7b", "seq_len": 0}, "not_positive", "seq_len"),
        ({"model": "llama-2-7b", "seq_len": -5}, "not_positive", "seq_len"),
        ({"model": "llama-2-7b", "seq_len": 10**400}, "out_of_range", "seq_len"),
        ({"model": "llama-2-7b", "num_gpus": 10**6}, "out_of_range", "num_gpus"),
        ({"model": "llama-2-7b", "lora_rank": [8]}, "not_integer", "lora_rank"),
        ({"model": "llama-2-7b", "method": "dora"}, "unknown_value", "method"),
        ({"model": "llama-2-7b", "method": 1}, "wrong_type", "method"),
        ({"model": "llama-2-7b", "precision": "fp8"}, "unknown_value", "precision"),
        ({"model": "llama-2-7b", "optimizer": "lion"}, "unknown_value", "optimizer"),
        ({"model": "llama-2-7b", "attention": None}, "wrong_type", "attention"),
        ({"model": "llama-2-7b", "sharding": "zero4"}, "unknown_value", "sharding"),
        ({"model": "llama-2-7b", "cpu_offload": "params"}, "unknown_value", "cpu_offload"),
        (
            {"model": "llama-2-7b", "gradient_checkpointing": "yes"},
            "not_boolean",
            "gradient_checkpointing",
        ),
        ({"model": "llama-2-7b", "chunked_loss": 1}, "not_boolean", "chunked_loss"),
        ({"model": "llama-2-7b", "lora_targets": []}, "wrong_type", "lora_targets"),
        ({"model": "llama-2-7b", "lora_targets": [1]}, "wrong_type", "lora_targets"),
        ({"model": "llama-2-7b", "lora_targets": {"q_proj": 1}}, "wrong_type", "lora_targets"),
        (
            {"model": "llama-2-7b", "lora_targets": ["q_proj", "c_attn"]},
            "unknown_lora_target",
            "lora_targets",
        ),
        ({"model": "llama-2-7b", "lora_dropout": 1.0}, "out_of_range", "lora_dropout"),
        ({"model": "llama-2-7b", "lora_dropout": -0.1}, "out_of_range", "lora_dropout"),
        ({"model": "llama-2-7b", "lora_dropout": "0.1"}, "not_number", "lora_dropout"),
        ({"model": "llama-2-7b", "lora_dropout": True}, "not_number", "lora_dropout"),
        (
            {"model": "llama-2-7b", "gradient_accumulation_steps": 0},
            "not_positive",
            "gradient_accumulation_steps",
        ),
        (
            {"model": "llama-2-7b", "gradient_accumulation_steps": 2.5},
            "not_integer",
            "gradient_accumulation_steps",
        ),
        ({"model": "llama-2-7b", "qlora_keeps_inputs": 1}, "not_boolean", "qlora_keeps_inputs"),
        (
            {"model": "llama-2-7b", "frozen_weight_grads": "no"},
            "not_boolean",
            "frozen_weight_grads",
        ),
        (
            {"model": "llama-2-7b", "qlora_unchunked_quantization": 0},
            "not_boolean",
            "qlora_unchunked_quantization",
        ),
        (
            {"model": "llama-2-7b", "attention_keeps_fused_qkv": "true"},
            "not_boolean",
            "attention_keeps_fused_qkv",
        ),
    ],
)
def test_bad_input_code_and_field(request_obj, code, field):
    with pytest.raises(CalcError) as info:
        memory.estimate_dict(request_obj)
    assert info.value.code == code
    if field is not None or code == "request_not_object":
        assert info.value.field == field
    assert isinstance(info.value, (InputError, ConfigError))
    assert info.value.to_dict()["code"] == code


def test_defaults_fill_every_field():
    req = parse_estimate_request(OK)
    echoed = req.to_dict()
    assert set(echoed) == set(spec_by_key("estimate"))
    assert echoed["method"] == "lora" and echoed["lora_rank"] == 16 and echoed["seq_len"] == 2048
    assert echoed["gradient_checkpointing"] is True and echoed["precision"] == "bf16-true"
    # keys added later default to modern behaviour
    assert (
        echoed["qlora_unchunked_quantization"] is False
        and echoed["attention_keeps_fused_qkv"] is False
    )


def test_hf_config_model_runs():
    cfg = {
        "model_type": "llama",
        "hidden_size": 2048,
        "num_attention_heads": 32,
        "num_key_value_heads": 4,
        "intermediate_size": 5632,
        "num_hidden_layers": 22,
        "vocab_size": 32000,
    }
    out = memory.estimate_dict({"model": {"hf_config": cfg}, "method": "full"})
    assert out["params_total"] == 1_100_048_384  # TinyLlama-1.1B
    assert out["request"]["model"] == "hf_config:llama"


def test_comma_separated_targets_accepted():
    out = memory.estimate_dict(
        {"model": "llama-2-7b", "lora_targets": "q_proj,v_proj", "lora_rank": 8}
    )
    assert out["params_trainable"] == 4_194_304
