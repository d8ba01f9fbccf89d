"""The oracle's model of bitsandbytes' 4-bit linear (tools/oracle/qlora.py): its storages,
its dequantized buffers, peft's adapters on it and ``prepare_model_for_kbit_training``.

Needs torch, transformers and peft (tools/requirements-measure.txt): skipped without them,
except where ``REQUIRE_ORACLE=1`` (CI sets it once they are installed)."""

from __future__ import annotations

import pytest

from oracle_deps import need_oracle_stack

torch = need_oracle_stack()

from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402

from calc import states  # noqa: E402
from tools.oracle import qlora  # noqa: E402
from tools.oracle.tracker import LiveStorageTracker  # noqa: E402

TINY = {
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "num_hidden_layers": 2,
    "vocab_size": 256,
}


def _bytes(shapes: dict) -> int:
    total = 0
    for shape, dtype in shapes.values():
        n = 1
        for d in shape:
            n *= d
        total += n * dtype.itemsize
    return total


@pytest.mark.parametrize("double_quant", [True, False])
def test_storage_is_calc_nf4_count_plus_the_code_tables(double_quant):
    """4096 x 4096 weights: packed nibbles, absmax per 64 (uint8 + fp32 per 256 blocks with
    double quantization, fp32 without); beyond calc's per-weight count only the code tables
    (16 fp32 NF4 values; with double quantization the 256-entry dynamic map and the offset)."""
    shapes = qlora.storage_shapes(4096, 4096, double_quant)
    n = 4096 * 4096
    assert shapes["weight"] == ((n // 2, 1), torch.uint8)
    assert shapes["quant_absmax"] == ((n // 64,), torch.uint8 if double_quant else torch.float32)
    tables = 16 * 4 + ((256 * 4 + 4) if double_quant else 0)
    assert _bytes(shapes) == states.quantized_bytes(n, double_quant) + tables
    # bf16 packing (bnb_4bit_quant_storage=torch.bfloat16) holds the same bytes
    bf16 = qlora.storage_shapes(4096, 4096, double_quant, torch.bfloat16)
    assert bf16["weight"] == ((n // 4, 1), torch.bfloat16) and _bytes(bf16) == _bytes(shapes)


def test_matmul_saves_no_input_and_dequantizes_in_forward_and_backward():
    tracker = LiveStorageTracker()
    qlora.CURRENT["tracker"] = tracker
    try:
        with FakeTensorMode(), tracker:
            layer = qlora.Linear4bitModel(
                256, 512, bias=False, dtype=torch.bfloat16, double_quant=True, device="cpu"
            )
            for t in list(layer.parameters()) + list(layer.buffers()):
                tracker.track(t, "weights")
            leaf = torch.empty((8, 256), dtype=torch.bfloat16, requires_grad=True)
            x = leaf * 2  # an activation (a leaf would be held by its AccumulateGrad node)
            tracker.set_phase("forward")
            y = layer(x)
            # the 256 x 512 bf16 weight existed during the matmul and is gone after it
            assert tracker.peaks["forward"][1]["dequant_buffer"] >= 256 * 512 * 2
            assert tracker.by_category["dequant_buffer"] == 0
            base = tracker.total
            del x  # nothing of the input is saved: its storage dies with the last reference
            assert tracker.total == base - 8 * 256 * 2
            tracker.set_phase("backward")
            y.backward(torch.empty_like(y))
            assert tracker.peaks["backward"][1]["dequant_buffer"] >= 256 * 512 * 2
            assert tracker.by_category["dequant_buffer"] == 0
    finally:
        qlora.CURRENT["tracker"] = None


def _tiny_quantized(storage, prepare: bool):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = dict(TINY)
    config = AutoConfig.for_model(cfg.pop("model_type"), **cfg)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    replaced = qlora.quantize_linears(model, True, storage)
    if prepare:
        from peft import prepare_model_for_kbit_training

        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)
    lora = LoraConfig(r=4, target_modules="all-linear", task_type="CAUSAL_LM")
    lora._register_custom_module({qlora.Linear4bitModel: qlora.lora_layer_class()})
    return get_peft_model(model, lora, autocast_adapter_dtype=False), replaced


def test_every_block_linear_is_quantized_but_the_head_and_adapters_take_the_compute_dtype():
    """peft moves adapters to a 4-bit layer's compute_dtype (bf16), not to its uint8 storage;
    only autocast_adapter_dtype=True (peft's default) makes them fp32."""
    model, replaced = _tiny_quantized(torch.uint8, prepare=False)
    assert len(replaced) == 2 * 7 and "lm_head" not in replaced
    assert {p.dtype for n, p in model.named_parameters() if "lora_" in n} == {torch.bfloat16}
    assert all(not p.requires_grad for n, p in model.named_parameters() if "lora_" not in n)


def test_prepare_model_for_kbit_training_casts_all_but_the_4bit_weights_to_fp32():
    model, _ = _tiny_quantized(torch.uint8, prepare=True)
    dtypes = {n: p.dtype for n, p in model.named_parameters()}
    assert all(d == torch.uint8 for n, d in dtypes.items() if n.endswith("base_layer.weight"))
    assert dtypes["base_model.model.lm_head.weight"] == torch.float32
    assert dtypes["base_model.model.model.embed_tokens.weight"] == torch.float32
    assert dtypes["base_model.model.model.norm.weight"] == torch.float32


def _meta_model(cfg: dict):
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = dict(cfg)
    config = AutoConfig.for_model(cfg.pop("model_type"), **cfg)
    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)


def test_gpt2_conv1d_is_quantized_with_its_stored_widths():
    """replace_with_bnb_linear converts Conv1D: c_attn (64 -> 192), attn.c_proj, c_fc
    (64 -> 256) and mlp.c_proj (256 -> 64) of each block become 4-bit, the tied head not."""
    model = _meta_model(
        {"model_type": "gpt2", "n_embd": 64, "n_head": 4, "n_layer": 2, "vocab_size": 256}
    )
    replaced = qlora.quantize_linears(model, True, torch.uint8)
    assert len(replaced) == 2 * 4 and "lm_head" not in replaced
    block = model.transformer.h[0]
    widths = [
        (m.in_features, m.out_features)
        for m in (block.attn.c_attn, block.attn.c_proj, block.mlp.c_fc, block.mlp.c_proj)
    ]
    assert widths == [(64, 192), (64, 64), (64, 256), (256, 64)]
    # packed nf4: half a byte per weight
    assert block.mlp.c_fc.weight.numel() == 64 * 256 // 2


def test_falcon_linear_subclass_stays_16_bit():
    """FalconLinear subclasses nn.Linear; replace_with_bnb_linear asks type(module) is
    nn.Linear, so no block linear of Falcon is quantized."""
    model = _meta_model(
        {
            "model_type": "falcon",
            "hidden_size": 64,
            "num_attention_heads": 4,
            "num_hidden_layers": 2,
            "vocab_size": 256,
        }
    )
    assert qlora.quantize_linears(model, True, torch.uint8) == []
    assert model.transformer.h[0].mlp.dense_h_to_4h.weight.dtype == torch.bfloat16
