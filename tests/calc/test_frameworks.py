"""Training-library profiles (``framework``): what each sets, with hand-computed bytes."""

from __future__ import annotations

import pytest

from calc.errors import InputError
from calc.frameworks import APPLIES_WHEN, PROFILES, SOURCES, Framework
from calc.memory import estimate_dict
from calc.request import ESTIMATE_FIELDS, parse_estimate_request

FRAMEWORKS = [f.value for f in Framework]


def _resolved(**request) -> dict:
    return parse_estimate_request(request).to_dict()


def test_framework_follows_every_key_it_profiles_and_generic_by_default():
    # keys added later come after it, as every new key does (moe_expert_layout); the profiled
    # ones among them (LitGPT's loop and Lightning's 4-bit layers, torchtune's fp32 logits and
    # eager chunked loss) sit at the end: the profile is applied once every key is parsed
    order = list(ESTIMATE_FIELDS)
    profiled = {key for profile in PROFILES.values() for key in profile}
    later = {key for key in profiled if order.index(key) > order.index("framework")}
    assert later == {"previous_outputs_kept", "qlora_output_layer_quantized", "qlora_dequant_fp16",
                     "fsdp_flat_parameters", "logits_upcast_in_model", "chunked_loss_keeps_fp32"}
    assert set(order[-len(later):]) == later
    assert _resolved(model="llama-3.1-8b", framework="torchtune")["logits_upcast_in_model"] is True
    assert _resolved(model="llama-3.1-8b")["logits_upcast_in_model"] is False
    assert _resolved(model="llama-3.1-8b", framework="torchtune", logits_upcast_in_model=False)[
        "logits_upcast_in_model"] is False
    assert ESTIMATE_FIELDS["framework"][0] == "generic"
    assert _resolved(model="llama-3.1-8b")["framework"] == "generic"


def test_generic_keeps_every_default():
    base = {"model": "llama-3.1-8b", "method": "qlora", "num_gpus": 4, "sharding": "zero3"}
    assert estimate_dict(base) == estimate_dict({**base, "framework": "generic"})
    resolved = _resolved(**base)
    for key, (default, _kind, _extra) in ESTIMATE_FIELDS.items():
        if key not in base and key != "framework" and not isinstance(default, (str, type(None))):
            assert resolved[key] == default, key


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_every_profile_entry_cites_its_source(framework):
    fw = Framework(framework)
    entries = PROFILES[fw]
    assert set(entries) <= set(ESTIMATE_FIELDS) - {"model", "method", "framework"}
    for key in entries:
        text = SOURCES[fw][key]
        assert len(text) > 20 and any(ch.isdigit() for ch in text) or text.startswith("as "), (framework, key)
    if fw is Framework.GENERIC:
        assert entries == {}


def test_unknown_framework_is_a_coded_error():
    with pytest.raises(InputError) as err:
        parse_estimate_request({"model": "llama-3.1-8b", "framework": "keras"})
    assert err.value.code == "unknown_value" and err.value.field == "framework"
    with pytest.raises(InputError) as err:
        parse_estimate_request({"model": "llama-3.1-8b", "framework": 3})
    assert err.value.code == "wrong_type"


def test_explicit_keys_override_the_profile():
    assert _resolved(model="llama-3.1-8b", framework="torchtune")["chunked_loss"] is True
    assert _resolved(model="llama-3.1-8b", framework="torchtune", chunked_loss=False)["chunked_loss"] is False
    assert _resolved(model="llama-3.1-8b", framework="litgpt", lora_dropout=0.1)["lora_dropout"] == 0.1
    assert _resolved(model="llama-3.1-8b", framework="hf-trainer", optimizer_fused=False)["optimizer_fused"] is False


@pytest.mark.parametrize("model", ["llama-3.1-8b", "llama-2-7b", "mistral-7b", "gemma-2b", "phi-2",
                                   "llama-3.2-1b"])
@pytest.mark.parametrize("method", ["full", "lora", "qlora"])
def test_switching_framework_never_changes_parameter_counts(model, method):
    counts = {(e["params_total"], e["params_trainable"])
              for e in (estimate_dict({"model": model, "method": method, "framework": f, "num_gpus": 2,
                                       "sharding": "zero3"}) for f in FRAMEWORKS)}
    assert len(counts) == 1


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("setup", [
    {"method": "lora", "seq_len": 4096, "micro_batch_size": 2},
    {"method": "full", "precision": "bf16-mixed"},
    {"method": "qlora", "gradient_checkpointing": False},
    {"method": "lora", "num_gpus": 4, "sharding": "zero3", "gradient_accumulation_steps": 4},
])
def test_a_chunked_loss_never_raises_the_peak(framework, setup):
    req = {"model": "llama-3.1-8b", "framework": framework, **setup}
    chunked = estimate_dict({**req, "chunked_loss": True})
    full = estimate_dict({**req, "chunked_loss": False})
    assert chunked["peak_allocated_bytes"] <= full["peak_allocated_bytes"]
    assert chunked["components"]["logits"] <= full["components"]["logits"]


# ---- hand-computed bytes, one behaviour at a time ------------------------------------------

LLAMA31_8B_VOCAB = 128_256


def test_torchtune_chunked_loss_bytes():
    # Llama 3.1 8B, 1 x 2048 tokens: transformers' loss holds the fp32 log-softmax, its gradient
    # and the fp32 logits' gradient, 12 V bytes per token (calc.activations). torchtune's chunked
    # loss, compiled, keeps only the bf16 logits, V * 2: 10 V per token less. Run eagerly it also
    # keeps every chunk's fp32 log-softmax (4 V) and the last chunk's fp32 upcast (4 V / 8):
    # 6.5 V, so 5.5 V per token less than unchunked.
    req = {"model": "llama-3.1-8b", "seq_len": 2048}
    hf = estimate_dict({**req, "framework": "hf-trainer"})
    assert hf["components"]["logits"] == 2048 * LLAMA31_8B_VOCAB * 12 == 3_152_019_456
    for compiled, per_token in ((True, 2), (False, 2 + 4 + 4 / 8)):
        tt = estimate_dict({**req, "framework": "torchtune", "torch_compile": compiled})
        tt_unchunked = estimate_dict({**req, "framework": "torchtune", "torch_compile": compiled,
                                      "chunked_loss": False})
        assert tt["components"]["logits"] == 2048 * LLAMA31_8B_VOCAB * per_token
        assert (tt_unchunked["phases"]["forward_end"] - tt["phases"]["forward_end"]
                == 2048 * LLAMA31_8B_VOCAB * (12 - per_token))
    eager = estimate_dict({**req, "framework": "torchtune"})
    assert eager["components"]["logits"] == 2048 * (2 * 128_256 + 4 * 128_256 + 64_128) == 1_707_343_872
    # a profile other than torchtune's keeps the 16-bit chunks only, compiled or not
    # (the key itself: 4.5 V more at the end of the forward, nothing once compiled)
    generic = {**req, "chunked_loss": True}
    eager_fp32 = estimate_dict({**generic, "chunked_loss_keeps_fp32": True})
    assert (eager_fp32["phases"]["forward_end"] - estimate_dict(generic)["phases"]["forward_end"]
            == 2048 * (4 * 128_256 + 64_128))
    compiled = {**generic, "torch_compile": True}
    assert (estimate_dict({**compiled, "chunked_loss_keeps_fp32": True})["phases"]
            == estimate_dict(compiled)["phases"])


def test_custom_loop_keeps_the_logits():
    # a loop that holds the output object keeps the bf16 logits too: + 2 V per token
    req = {"model": "llama-3.1-8b", "seq_len": 2048, "lora_adapter_dtype": "base"}
    loop = estimate_dict({**req, "framework": "hf-custom-loop"})
    trainer = estimate_dict({**req, "framework": "hf-trainer"})
    assert loop["phases"]["forward_end"] - trainer["phases"]["forward_end"] == 2048 * LLAMA31_8B_VOCAB * 2


def test_torchtune_before_del_logits_keeps_fp32_logits():
    # torchtune's recipes before 8a98fbaa3 (2024-07-28) kept the model's output in a local through
    # loss.backward(), and the model returned it in fp32 (self.output(h).float()). Llama-2-7B,
    # 2 x 512 tokens, unchunked loss: the loss's fp32 log-softmax and two gradients (12 V) plus
    # the kept fp32 logits (4 V) = 16 V per token at the loss; the kept 4 V stay through the
    # blocks' backward. A model returning 16-bit logits keeps 2 V instead.
    req = {"model": "llama-2-7b", "method": "lora", "micro_batch_size": 2, "seq_len": 512,
           "framework": "torchtune", "chunked_loss": False, "gradient_checkpointing": True}
    tokens, vocab = 1024, 32000
    dropped = estimate_dict(req)
    kept = estimate_dict({**req, "loss_outputs_kept": True})
    assert dropped["request"]["logits_upcast_in_model"] is True
    assert kept["components"]["logits"] == 16 * vocab * tokens == 524_288_000
    for phase in ("forward_end", "backward"):
        assert kept["phases"][phase] - dropped["phases"][phase] == 4 * vocab * tokens == 131_072_000
    bf16 = estimate_dict({**req, "loss_outputs_kept": True, "logits_upcast_in_model": False})
    assert kept["phases"]["forward_end"] - bf16["phases"]["forward_end"] == 2 * vocab * tokens
    # no kept output, or a chunked loss (16-bit chunks): the upcast changes nothing
    assert estimate_dict({**req, "logits_upcast_in_model": False})["phases"] == dropped["phases"]
    chunked = {**req, "chunked_loss": True, "loss_outputs_kept": True}
    assert (estimate_dict(chunked)["phases"]
            == estimate_dict({**chunked, "logits_upcast_in_model": False})["phases"])


def test_hf_profiles_keep_peft_adapters_in_fp32():
    assert _resolved(model="llama-3.1-8b", framework="hf-trainer")["lora_adapter_dtype"] == "fp32"
    assert _resolved(model="llama-3.1-8b", framework="torchtune")["lora_adapter_dtype"] == "base"
    assert _resolved(model="llama-3.1-8b", framework="hf-trainer")["attention_grouped_kv"] is True
    assert _resolved(model="llama-3.1-8b", framework="litgpt")["attention_grouped_kv"] is False


def test_hf_trainer_fused_adamw_against_a_custom_loop():
    # Full fine-tuning of Llama 3.2 1B in pure bf16: torch's foreach AdamW holds one
    # state-sized bf16 temporary (sqrt(v)) in the step; the Trainer's default fused AdamW none.
    req = {"model": "llama-3.2-1b", "method": "full"}
    trainer = estimate_dict({**req, "framework": "hf-trainer"})
    loop = estimate_dict({**req, "framework": "hf-custom-loop"})
    params = 1_235_814_400
    assert trainer["params_trainable"] == params
    assert loop["phases"]["optimizer_step"] - trainer["phases"]["optimizer_step"] == 2 * params
    assert _resolved(model="llama-3.2-1b", framework="hf-trainer", optimizer="adamw-8bit")["optimizer_fused"] is False
    assert "optimizer_fused_ignored" not in estimate_dict(
        {**req, "framework": "hf-trainer", "optimizer": "adamw-8bit"})["warnings"]


def test_bitsandbytes_quant_state_stays_whole_on_every_gpu():
    # Llama 3.1 70B QLoRA on 8 GPUs under ZeRO-3: 80 blocks of 855,638,016 quantized weights
    # (q, o 8192^2; k, v 8192 x 1024; gate, up, down 8192 x 28672). Double quantization keeps
    # 8/64 + 32/16384 bits per weight of statistics beyond the 4-bit data: 0.126953125 bits.
    n = 80 * (2 * 8192 * 8192 + 2 * 8192 * 1024 + 3 * 8192 * 28672)
    assert n == 68_451_041_280
    stats = int(n * (4 + 8 / 64 + 32 / 16384) / 8) - n // 2
    assert stats == 1_086_259_200
    req = {"model": "llama-3.1-70b", "method": "qlora", "num_gpus": 8, "sharding": "zero3"}
    hf = estimate_dict({**req, "framework": "hf-trainer"})
    tt = estimate_dict({**req, "framework": "torchtune"})
    assert hf["components"]["weights"] - tt["components"]["weights"] == stats - -(-stats // 8)
    # one GPU: nothing is sharded, nothing changes
    one = {"model": "llama-3.1-70b", "method": "qlora"}
    assert (estimate_dict({**one, "qlora_quant_state_replicated": True})["components"]["weights"]
            == estimate_dict(one)["components"]["weights"])


def test_parameter_offload_leaves_the_quant_state_on_the_gpu():
    # Llama 2 70B QLoRA, FSDP with CPU offload: the 4-bit data leaves the GPU, the double-quant
    # statistics (0.126953125 bits per quantized weight) do not.
    n = 80 * (2 * 8192 * 8192 + 2 * 8192 * 1024 + 3 * 8192 * 28672)
    stats = int(n * (4 + 8 / 64 + 32 / 16384) / 8) - n // 2
    req = {"model": "llama-2-70b", "method": "qlora", "num_gpus": 2, "sharding": "zero3",
           "cpu_offload": "optimizer+params"}
    assert estimate_dict({**req, "framework": "hf-trainer"})["components"]["weights"] == stats
    assert estimate_dict({**req, "framework": "torchtune"})["components"]["weights"] == 0


def test_litgpt_fsdp_wrap_allocates_gradients_for_frozen_block_weights():
    # Llama 2 7B LoRA on 2 GPUs, FSDP: LitGPT's {Block} wrap puts frozen weights and adapters
    # in one flat parameter, so each GPU holds bf16 gradients for half of the 32 blocks'
    # 202,383,360 weights each (4 x 4096^2 + 3 x 4096 x 11008 + 2 x 4096 norms).
    req = {"model": "llama-2-7b", "method": "lora", "num_gpus": 2, "sharding": "zero3",
           "attention_keeps_fused_qkv": False, "lora_dropout": 0.0, "chunked_loss": False}
    lit = estimate_dict({**req, "framework": "litgpt"})
    gen = estimate_dict(req)
    assert lit["model_states_bytes"] - gen["model_states_bytes"] == 32 * 202_383_360 * 2 // 2
    # one GPU: no FSDP, the wrap policy does not exist, the key keeps its default
    assert _resolved(model="llama-2-7b", framework="litgpt")["frozen_weight_grads"] is False
    assert _resolved(model="llama-2-7b", framework="litgpt", num_gpus=2,
                     sharding="zero3")["frozen_weight_grads"] is True
    assert set(APPLIES_WHEN) <= {k for p in PROFILES.values() for k in p}


def test_unsloth_offloads_the_checkpointed_inputs():
    # Llama 3.1 8B, 1 x 2048 tokens, checkpointing: each of the 32 blocks' bf16 input
    # (2 x 4096 bytes per token) goes to host RAM except the two in flight.
    req = {"model": "llama-3.1-8b", "seq_len": 2048}
    uns = estimate_dict({**req, "framework": "unsloth"})
    assert uns["host_bytes"] == 30 * 2048 * 2 * 4096 == 503_316_480
    assert estimate_dict(req)["host_bytes"] == 0


def test_litgpt_fused_qkv_keeps_more_on_mha_models_only():
    mha = {"model": "llama-2-7b", "lora_dropout": 0.0, "chunked_loss": False}
    gqa = {"model": "llama-3.1-8b", "lora_dropout": 0.0, "chunked_loss": False}
    assert (estimate_dict({**mha, "framework": "litgpt"})["activations_per_token_bytes"]
            > estimate_dict(mha)["activations_per_token_bytes"])
    assert (estimate_dict({**gqa, "framework": "litgpt"})["activations_per_token_bytes"]
            == estimate_dict(gqa)["activations_per_token_bytes"])


def test_plan_accepts_framework():
    from calc.plan import plan_dict

    out = plan_dict({"model": "llama-3.1-8b", "framework": "torchtune", "gpu": "rtx-4090",
                     "dataset_tokens": 1e6})
    assert out["memory"]["request"]["framework"] == "torchtune"
    assert out["memory"]["request"]["chunked_loss"] is True


def test_recommendation_variants_follow_the_library():
    # LitGPT's {Block} FSDP wrap exists only under FSDP on several GPUs: a 1-GPU request keeps
    # the key's default, and the recommendation's 2-GPU ZeRO-3 variant gets the profile's value
    from calc import recommend
    from calc.request import parse_estimate_request

    req = parse_estimate_request({"model": "llama-2-7b", "framework": "litgpt"})
    assert req.frozen_weight_grads is False and "frozen_weight_grads" in req.profile_keys
    est = recommend.Estimator(req)
    assert est.get(num_gpus=2, sharding="zero3")["request"]["frozen_weight_grads"] is True
    assert est.get(num_gpus=2, sharding="ddp")["request"]["frozen_weight_grads"] is False
    # an explicit value is the user's: variants keep it
    fixed = recommend.Estimator(parse_estimate_request({"model": "llama-2-7b", "framework": "litgpt",
                                                        "frozen_weight_grads": False}))
    assert fixed.get(num_gpus=2, sharding="zero3")["request"]["frozen_weight_grads"] is False
    assert "profile_keys" not in est.get()["request"]


# ---- LitGPT 0.4 QLoRA: Lightning's 4-bit layers and the loop's held micro-batch ------------

LLAMA2_7B_QLORA = {"model": "llama-2-7b", "method": "qlora", "micro_batch_size": 2, "seq_len": 512,
                   "gradient_checkpointing": False, "chunked_loss": True, "qlora_double_quant": False,
                   "qlora_output_layer_quantized": False, "qlora_dequant_fp16": False}


def test_litgpt_loop_holds_the_previous_logits_and_kept_4bit_inputs():
    # Llama 2 7B, 2 x 512 tokens. The previous micro-batch's bf16 logits: 1024 x 32000 x 2.
    # bitsandbytes < 0.43.2 kept each 4-bit linear's input in ctx.tensors: per block the
    # attention norm's output (4096, read by q, k, v), the attention output (4096, o), the MLP
    # norm's output (4096, gate and up) and the down projection's input (11008), in bf16.
    logits = 1024 * 32_000 * 2
    inputs = 32 * 1024 * 2 * (4096 + 4096 + 4096 + 11008)
    assert (logits, inputs) == (65_536_000, 1_526_726_656)
    req = {**LLAMA2_7B_QLORA, "qlora_keeps_inputs": True}
    held = estimate_dict({**req, "previous_outputs_kept": True})["phases"]
    fresh = estimate_dict({**req, "previous_outputs_kept": False})["phases"]
    assert held["forward_end"] - fresh["forward_end"] == logits + inputs
    # the optimizer step runs while the loop still holds this micro-batch's logits and graph
    assert held["optimizer_step"] - fresh["optimizer_step"] == logits + inputs
    # bitsandbytes >= 0.43.2 keeps no input: only the logits stay
    new_bnb = {**LLAMA2_7B_QLORA, "qlora_keeps_inputs": False}
    assert (estimate_dict({**new_bnb, "previous_outputs_kept": True})["phases"]["forward_end"]
            - estimate_dict({**new_bnb, "previous_outputs_kept": False})["phases"]["forward_end"] == logits)
    assert _resolved(model="llama-2-7b", framework="litgpt")["previous_outputs_kept"] is True
    assert _resolved(model="llama-2-7b", framework="hf-trainer")["previous_outputs_kept"] is False


def test_lightning_plugin_quantizes_the_output_layer():
    # Llama 3 8B (untied), 1 x 512 tokens, NF4 without double quantization (4.5 bits): the
    # output layer's 128256 x 4096 weight goes from bf16 to NF4, and its matmul dequantizes
    # the whole weight into bf16 at the forward's end.
    n = 128_256 * 4096
    assert n == 525_336_576
    req = {**LLAMA2_7B_QLORA, "model": "llama-3-8b", "micro_batch_size": 1, "qlora_keeps_inputs": False}
    on = estimate_dict({**req, "qlora_output_layer_quantized": True})
    off = estimate_dict(req)
    weights = n * 9 // 16 - 2 * n
    assert weights == -755_171_328
    assert on["components"]["weights"] - off["components"]["weights"] == weights
    assert on["phases"]["forward_end"] - off["phases"]["forward_end"] == weights + 2 * n
    # quantized from an fp16 copy: the fp16 dequantization and its bf16 cast, 4 bytes each
    fp16 = estimate_dict({**req, "qlora_output_layer_quantized": True, "qlora_dequant_fp16": True})
    assert fp16["phases"]["forward_end"] - on["phases"]["forward_end"] == 2 * n
    # with qlora_keeps_inputs the output layer keeps its bf16 input: 512 x 4096 x 2 more
    keep = {**req, "qlora_keeps_inputs": True}
    assert (estimate_dict({**keep, "qlora_output_layer_quantized": True})["phases"]["forward_end"]
            - estimate_dict(keep)["phases"]["forward_end"] == weights + 2 * n + 512 * 4096 * 2)
    # an output layer tied to the embedding is an nn.Embedding: nothing changes
    tied = {**req, "model": "llama-3.2-1b"}
    quantized, plain = estimate_dict({**tied, "qlora_output_layer_quantized": True}), estimate_dict(tied)
    assert quantized["phases"] == plain["phases"] and quantized["components"] == plain["components"]


def test_fp16_dequantization_doubles_the_block_buffer_for_a_moment():
    # Llama 2 7B, 1 x 512 tokens: the largest 4-bit backward moment is gate/up (4096 -> 11008,
    # 45,088,768 weights). bf16 dequantization: the buffer (2 W) with the output's gradient
    # (2 x 512 x 11008) and the input's (2 x 512 x 4096). From fp16: the fp16 buffer and its
    # bf16 cast (4 W) with the output's gradient, before the input's gradient is written.
    from calc import memory, states
    from calc.request import parse_estimate_request

    w = 4096 * 11008
    grads = 2 * 512 * (4096 + 11008)
    req = {**LLAMA2_7B_QLORA, "micro_batch_size": 1}
    for fp16, expected in ((False, 2 * w + grads), (True, 4 * w + 2 * 512 * 11008)):
        r = parse_estimate_request({**req, "qlora_dequant_fp16": fp16})
        in_flight, buffer = memory.dequant_matmul_bytes(r, states.regime(r.precision, r.sharding))
        assert in_flight == grads and in_flight + buffer == expected
    # fp16 compute: the cast is a no-op
    r = parse_estimate_request({**req, "qlora_dequant_fp16": True, "precision": "fp16-mixed"})
    assert memory.dequant_cast_bytes(r) == 0


def test_fsdp1_root_gradient_of_two_vocabulary_tables():
    # gemma-2b full fine-tuning as LitGPT runs it: 4 GPUs, FSDP, untied output layer (LitGPT
    # keeps lm_head apart). The root unit: embedding and output layer, 256000 x 2048 each,
    # and the final norm (2048). At the end of the backward the two tables' bf16 gradients
    # wait in split's input buffer while the flat gradient is concatenated: twice the root.
    from accuracy.memory import _litgpt_model

    root = 2 * 256_000 * 2048 + 2048
    req = {"model": _litgpt_model("gemma-2b"), "method": "full", "num_gpus": 4, "sharding": "zero3",
           "gradient_checkpointing": True, "gradient_accumulation_steps": 4, "seq_len": 512}
    on = estimate_dict({**req, "fsdp_flat_parameters": True})
    off = estimate_dict({**req, "fsdp_flat_parameters": False})
    assert on["peak_phase"] == "backward"
    assert on["components"]["comm_buffers"] == 2 * root * 2 == 4_194_312_192
    # weights, optimizer states, every accumulated unsharded gradient, the root gathered
    assert on["components"]["gradients"] == off["model_states_bytes"] - off["components"]["weights"] - off["components"]["optimizer"]
    assert on["components"]["gathered_weights"] == root * 2
    assert on["peak_allocated_bytes"] > off["peak_allocated_bytes"]
    # LoRA: the root is frozen, no gradient to assemble; one GPU: no FSDP
    lora = {**req, "method": "lora"}
    assert (estimate_dict({**lora, "fsdp_flat_parameters": True})["phases"]
            == estimate_dict(lora)["phases"])
    assert _resolved(model="gemma-2b", framework="litgpt")["fsdp_flat_parameters"] is False
    assert _resolved(model="gemma-2b", framework="litgpt", num_gpus=4, sharding="zero3")["fsdp_flat_parameters"] is True
