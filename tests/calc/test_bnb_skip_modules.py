"""A checkpoint's 4-bit skip list (``quantization_config.llm_int8_skip_modules``): the block
linears it keeps in 16 bits, what they weigh and cost, and what calc refuses."""

from __future__ import annotations

import pytest

import calc
from calc import states as st
from calc.errors import ConfigError
from calc.hf_config import arch_from_hf_config
from calc.memory import estimate_dict
from calc.presets import preset_row

LLAMA31_8B = preset_row("llama-3.1-8b")["config"]

# Unsloth's dynamic 4-bit Llama 3.1 8B (unslothai/notebooks bdda2efc, Llama3.1_(8B)-GRPO.ipynb
# line 224, as unsloth_zoo's vLLM loader prints the checkpoint's quantization_config)
UNSLOTH_SKIP = ["lm_head", "multi_modal_projector", "merger", "modality_projection"]
DYNAMIC = {
    "quant_method": "bitsandbytes",
    "load_in_4bit": True,
    "bnb_4bit_quant_type": "nf4",
    "bnb_4bit_use_double_quant": True,
    "llm_int8_skip_modules": [*UNSLOTH_SKIP, "model.layers.1.mlp"],
}


def _model(skip: list[str] | None, **config: object) -> dict:
    quant = {**DYNAMIC, "llm_int8_skip_modules": skip}
    return {"hf_config": {**LLAMA31_8B, **config, "quantization_config": quant}, "name": "l"}


def test_one_mlp_kept_in_16_bits():
    arch = arch_from_hf_config({**LLAMA31_8B, "quantization_config": DYNAMIC})
    assert arch.bnb_kept_16bit == ((1, "gate_proj"), (1, "up_proj"), (1, "down_proj"))
    gate = next(l for l in arch.linears if l.name == "gate_proj")
    assert arch.quantized_blocks(gate) == 31
    assert arch.kept_16bit_block_params == 3 * 4096 * 14336
    # the default skips and Unsloth's vision names keep nothing in a block
    plain = arch_from_hf_config(
        {
            **LLAMA31_8B,
            "quantization_config": _model(UNSLOTH_SKIP)["hf_config"]["quantization_config"],
        }
    )
    assert plain.bnb_kept_16bit == ()


def test_the_kept_mlp_weighs_its_16_bit_bytes():
    # 176,160,768 weights in bf16 instead of NF4 with double quantization: 0.261 GB, the
    # difference between the dynamic build's 5.96 GB file and the plain 4-bit build's 5.70 GB
    base = {"method": "qlora", "framework": "unsloth", "seq_len": 2048}
    with_list = estimate_dict({**base, "model": _model(DYNAMIC["llm_int8_skip_modules"])})
    without = estimate_dict({**base, "model": _model(UNSLOTH_SKIP)})
    kept = 3 * 4096 * 14336
    total = st.quantized_weight_params(arch_from_hf_config(LLAMA31_8B))
    nf4 = st.quantized_bytes(total, True) - st.quantized_bytes(total - kept, True)
    delta = with_list["components"]["weights"] - without["components"]["weights"]
    assert delta == 2 * kept - nf4
    assert 0.26e9 < delta < 0.262e9


def test_transformers_matches_a_pattern_as_a_regular_expression_at_the_start():
    # quantizers_utils.should_convert_module: re.match(key, name) -- "model.layers.1" also
    # starts "model.layers.10" to "model.layers.19"; a pattern may end a name ("o_proj")
    arch = arch_from_hf_config(
        {
            **LLAMA31_8B,
            "quantization_config": {
                **DYNAMIC,
                "llm_int8_skip_modules": ["lm_head", "model.layers.1"],
            },
        }
    )
    assert {i for i, _ in arch.bnb_kept_16bit} == {1, *range(10, 20)}
    assert len(arch.bnb_kept_16bit) == 11 * 7
    ends = arch_from_hf_config(
        {
            **LLAMA31_8B,
            "quantization_config": {**DYNAMIC, "llm_int8_skip_modules": ["lm_head", "o_proj"]},
        }
    )
    assert ends.bnb_kept_16bit == tuple((i, "o_proj") for i in range(32))


def test_the_kept_linears_run_no_bitsandbytes_kernels():
    base = {"method": "qlora", "gpu": "a100-80gb-sxm", "dataset_tokens": 1e8, "seq_len": 2048}
    fewer = calc.plan_setup({**base, "model": _model(DYNAMIC["llm_int8_skip_modules"])})
    plain = calc.plan_setup({**base, "model": _model(UNSLOTH_SKIP)})
    assert fewer["time"]["tokens_per_second"] > plain["time"]["tokens_per_second"]


@pytest.mark.parametrize(
    "skip",
    [
        ["model.layers.1.mlp"],  # given without the output layer: transformers quantizes it
        ["lm_head", 3],
        "lm_head",
        ["lm_head", "model.layers.(1"],
    ],
)
def test_bad_skip_lists_are_coded_errors(skip):
    out = calc.run("estimate", {"method": "qlora", "model": _model(skip)})
    assert out["error"]["field"] == "hf_config.quantization_config.llm_int8_skip_modules"
    assert out["error"]["code"] in ("quantization_skip_not_modelled", "config_invalid_value")


def test_block_names_calc_cannot_place_are_refused():
    gpt2 = {
        "model_type": "gpt2",
        "n_embd": 768,
        "n_head": 12,
        "n_layer": 12,
        "vocab_size": 50257,
        "n_positions": 1024,
    }
    quant = {**DYNAMIC, "llm_int8_skip_modules": ["lm_head", "transformer.h.1.mlp"]}
    with pytest.raises(ConfigError) as err:
        arch_from_hf_config({**gpt2, "quantization_config": quant})
    assert err.value.code == "quantization_skip_not_modelled"
    # the names that hold no block module are accepted anywhere
    quant = {**DYNAMIC, "llm_int8_skip_modules": UNSLOTH_SKIP}
    assert arch_from_hf_config({**gpt2, "quantization_config": quant}).bnb_kept_16bit == ()


def test_stacks_whose_4bit_layers_differ_per_block_refuse_a_kept_module():
    for framework in ("litgpt", "torchtune"):
        out = calc.run(
            "estimate",
            {
                "method": "qlora",
                "framework": framework,
                "model": _model(DYNAMIC["llm_int8_skip_modules"]),
            },
        )
        assert out["error"]["code"] == "quantization_skip_not_modelled", framework
    # without QLoRA the list reads nothing
    full = calc.run(
        "estimate", {"method": "lora", "model": _model(DYNAMIC["llm_int8_skip_modules"])}
    )
    assert "error" not in full


def test_a_training_config_s_skip_list_is_the_model_s_to_say():
    from calc.config_import import import_data

    quant = {"load_in_4bit": True, "llm_int8_skip_modules": ["model.layers.1.mlp"]}
    out = import_data({"quantization_config": quant}, "trl")
    entry = next(k for k in out["keys"] if k["key"].endswith("llm_int8_skip_modules"))
    assert entry["note"] == "bnb_skip_modules_in_model_config"
    quiet = import_data(
        {"quantization_config": {**quant, "llm_int8_skip_modules": ["lm_head"]}}, "trl"
    )
    entry = next(k for k in quiet["keys"] if k["key"].endswith("llm_int8_skip_modules"))
    assert entry.get("note") is None


def test_fsdp1_wrap_floor_holds_the_larger_block_the_list_keeps():
    # FSDP1 wraps block by block through the GPU (calc.memory.fsdp_wrap_reserved_bytes): the
    # block whose MLP stays in bf16 passes through whole, a larger unit than the NF4 blocks
    from calc import memory

    base = {
        "method": "qlora",
        "framework": "hf-custom-loop",
        "num_gpus": 2,
        "sharding": "zero3",
        "micro_batch_size": 1,
        "seq_len": 512,
        "fsdp_wrap_floor": True,
    }
    with_list = estimate_dict({**base, "model": _model(DYNAMIC["llm_int8_skip_modules"])})
    without = estimate_dict({**base, "model": _model(UNSLOTH_SKIP)})
    attn = [4096 * 4096, 1024 * 4096, 1024 * 4096, 4096 * 4096]
    mlp = [14336 * 4096] * 3
    norms = 2 * 4096 * 2
    nf4 = [n // 2 for n in attn]
    plain = memory._wrap_transient_bytes([*nf4, *(n // 2 for n in mlp), norms], 2, True, True)
    kept = memory._wrap_transient_bytes([*nf4, *(2 * n for n in mlp), norms], 2, True, True)
    assert kept > plain
    weights = with_list["components"]["weights"] - without["components"]["weights"]
    # the step's all-gather pool holds GATHERED_UNITS of the largest block, this one
    pool = memory.GATHERED_UNITS * (2 * sum(mlp) - sum(mlp) // 2)
    grown = with_list["fsdp_wrap_reserved_bytes"] - without["fsdp_wrap_reserved_bytes"]
    segment = 2 * 1024**2
    assert abs(grown - (kept - plain + weights + pool)) < segment
