"""Training-library profiles (``framework``): what each sets, with hand-computed bytes."""

from __future__ import annotations

import pytest

from calc.errors import InputError
from calc.frameworks import APPLIES_WHEN, PROFILES, SOURCES, Framework, reapplied
from calc.memory import estimate_dict
from calc.fields import BEHAVIOUR, BY_KEY, READER, defaults, field_specs, keys, spec_by_key
from calc.request import parse_estimate_request

FRAMEWORKS = [f.value for f in Framework]


def _resolved(**request) -> dict:
    return parse_estimate_request(request).to_dict()


def test_profiles_set_library_behaviours_and_a_few_reader_defaults():
    # a profile sets the library behaviours (group "behaviour"), and of the reader's choices
    # only those a library makes for its users unless told otherwise; which keys a profile sets
    # is what the registry says, not where the keys stand in it
    profiled = {key for profile in PROFILES.values() for key in profile}
    assert {BY_KEY[key].group for key in profiled} == {BEHAVIOUR, READER}
    assert {key for key in profiled if BY_KEY[key].group == READER} == {
        "chunked_loss",
        "lora_dropout",
        "activation_offload",
        "batching",  # Unsloth turns padding-free batching on by itself
    }
    # which engine runs ZeRO is the reader's launch, not the library's generation
    assert set(keys(BEHAVIOUR)) - profiled == {"sharding_engine"}
    for key in profiled:
        assert BY_KEY[key].profiles == tuple(fw for fw in Framework if key in PROFILES[fw]), key
    assert BY_KEY["moe_expert_layout"].profiles == (
        Framework.HF_TRAINER,
        Framework.HF_CUSTOM_LOOP,
        Framework.HF_TRAINER_4,
        Framework.TRL_SFT,
        Framework.AXOLOTL,
        Framework.LLAMA_FACTORY,
        Framework.MS_SWIFT,
        Framework.PYTORCH_LOOP,
        Framework.PYTORCH_LOOP_4,
    )
    # a profile's entry applies wherever its key stands among the fields
    assert _resolved(model="llama-3.1-8b", framework="torchtune")["logits_upcast_in_model"] is True
    assert (
        _resolved(model="llama-3.1-8b", framework="torchtune")["qlora_unchunked_quantization"]
        is False
    )
    assert _resolved(model="llama-3.1-8b")["logits_upcast_in_model"] is False
    assert (
        _resolved(model="llama-3.1-8b", framework="torchtune", logits_upcast_in_model=False)[
            "logits_upcast_in_model"
        ]
        is False
    )
    assert BY_KEY["framework"].default == "hf-trainer" and BY_KEY["framework"].group == READER
    assert _resolved(model="llama-3.1-8b")["framework"] == "hf-trainer"


def test_the_default_library_is_the_hf_trainer():
    # what most readers run: a request naming no library gets the hf-trainer profile
    base = {"model": "qwen3-30b-a3b", "method": "qlora"}
    assert estimate_dict(base) == estimate_dict({**base, "framework": "hf-trainer"})
    assert estimate_dict(base) != estimate_dict({**base, "framework": "generic"})
    resolved = _resolved(**base)
    for key, value in PROFILES[Framework.HF_TRAINER].items():
        condition = APPLIES_WHEN.get(key)
        if condition is None or condition(resolved):
            assert resolved[key] == value, key


def test_generic_keeps_every_default():
    base = {
        "model": "llama-3.1-8b",
        "method": "qlora",
        "num_gpus": 4,
        "sharding": "zero3",
        "framework": "generic",
    }
    resolved = _resolved(**base)
    for spec in field_specs("estimate"):
        if (
            spec.key not in base
            and spec.key != "framework"
            and not isinstance(spec.default, (str, type(None)))
        ):
            assert resolved[spec.key] == spec.default, spec.key


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_every_profile_entry_cites_its_source(framework):
    fw = Framework(framework)
    entries = PROFILES[fw]
    assert set(entries) <= set(spec_by_key("estimate")) - {"model", "method", "framework"}
    for key in entries:
        text = SOURCES[fw][key]
        assert len(text) > 20 and any(ch.isdigit() for ch in text) or text.startswith("as "), (
            framework,
            key,
        )
    if fw is Framework.GENERIC:
        assert entries == {}


def test_unknown_framework_is_a_coded_error():
    with pytest.raises(InputError) as err:
        parse_estimate_request({"model": "llama-3.1-8b", "framework": "keras"})
    assert err.value.code == "unknown_value" and err.value.field == "framework"
    # the error lists every profile, the transformers 4 generation included
    assert err.value.extra["allowed"] == FRAMEWORKS and "hf-trainer-4" in FRAMEWORKS
    with pytest.raises(InputError) as err:
        parse_estimate_request({"model": "llama-3.1-8b", "framework": 3})
    assert err.value.code == "wrong_type"


def test_explicit_keys_override_the_profile():
    assert _resolved(model="llama-3.1-8b", framework="torchtune")["chunked_loss"] is True
    assert (
        _resolved(model="llama-3.1-8b", framework="torchtune", chunked_loss=False)["chunked_loss"]
        is False
    )
    assert (
        _resolved(model="llama-3.1-8b", framework="litgpt", lora_dropout=0.1)["lora_dropout"] == 0.1
    )
    assert (
        _resolved(model="llama-3.1-8b", framework="hf-trainer", optimizer_fused=False)[
            "optimizer_fused"
        ]
        is False
    )
    # every profile leaves every key the request gives as given, in either request shape
    for fw in FRAMEWORKS:
        for key, value in PROFILES[Framework(fw)].items():
            other = {True: False, False: True}.get(value) if isinstance(value, bool) else None
            if BY_KEY[key].kind == "fraction":
                other = 0.0 if value else 0.1
            if other is None:
                choices = BY_KEY[key].choices or ()
                other = next((c for c in choices if c != value), None)
            if other is None:
                continue
            for shape in (
                {key: other},
                {"behaviour": {key: other}} if BY_KEY[key].group == BEHAVIOUR else {key: other},
            ):
                assert (
                    _resolved(model="qwen3-30b-a3b", method="lora", framework=fw, **shape)[key]
                    == other
                ), (fw, key)


@pytest.mark.parametrize(
    "model", ["llama-3.1-8b", "llama-2-7b", "mistral-7b", "gemma-2b", "phi-2", "llama-3.2-1b"]
)
@pytest.mark.parametrize("method", ["full", "lora", "qlora"])
def test_switching_framework_never_changes_parameter_counts(model, method):
    counts = {
        (e["params_total"], e["params_trainable"])
        for e in (
            estimate_dict(
                {
                    "model": model,
                    "method": method,
                    "framework": f,
                    "num_gpus": 2,
                    "sharding": "zero3",
                }
            )
            for f in FRAMEWORKS
        )
    }
    assert len(counts) == 1


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize(
    "setup",
    [
        {"method": "lora", "seq_len": 4096, "micro_batch_size": 2},
        {"method": "full", "precision": "bf16-mixed"},
        {"method": "qlora", "gradient_checkpointing": False},
        {"method": "lora", "num_gpus": 4, "sharding": "zero3", "gradient_accumulation_steps": 4},
    ],
)
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
        tt_unchunked = estimate_dict(
            {**req, "framework": "torchtune", "torch_compile": compiled, "chunked_loss": False}
        )
        assert tt["components"]["logits"] == 2048 * LLAMA31_8B_VOCAB * per_token
        assert tt_unchunked["phases"]["forward_end"] - tt["phases"][
            "forward_end"
        ] == 2048 * LLAMA31_8B_VOCAB * (12 - per_token)
    eager = estimate_dict({**req, "framework": "torchtune"})
    assert (
        eager["components"]["logits"]
        == 2048 * (2 * 128_256 + 4 * 128_256 + 64_128)
        == 1_707_343_872
    )
    # a profile other than torchtune's keeps the 16-bit chunks only, compiled or not
    # (the key itself: 4.5 V more at the end of the forward, nothing once compiled)
    generic = {**req, "chunked_loss": True}
    eager_fp32 = estimate_dict({**generic, "chunked_loss_keeps_fp32": True})
    assert eager_fp32["phases"]["forward_end"] - estimate_dict(generic)["phases"][
        "forward_end"
    ] == 2048 * (4 * 128_256 + 64_128)
    compiled = {**generic, "torch_compile": True}
    assert (
        estimate_dict({**compiled, "chunked_loss_keeps_fp32": True})["phases"]
        == estimate_dict(compiled)["phases"]
    )


def test_custom_loop_keeps_the_logits():
    # a loop that holds the output object keeps the bf16 logits too: + 2 V per token
    req = {"model": "llama-3.1-8b", "seq_len": 2048, "lora_adapter_dtype": "base"}
    loop = estimate_dict({**req, "framework": "hf-custom-loop"})
    trainer = estimate_dict({**req, "framework": "hf-trainer"})
    assert (
        loop["phases"]["forward_end"] - trainer["phases"]["forward_end"]
        == 2048 * LLAMA31_8B_VOCAB * 2
    )


def test_torchtune_before_del_logits_keeps_fp32_logits():
    # torchtune's recipes before 8a98fbaa3 (2024-07-28) kept the model's output in a local through
    # loss.backward(), and the model returned it in fp32 (self.output(h).float()). Llama-2-7B,
    # 2 x 512 tokens, unchunked loss: the loss's fp32 log-softmax and two gradients (12 V) plus
    # the kept fp32 logits (4 V) = 16 V per token at the loss; the kept 4 V stay through the
    # blocks' backward. A model returning 16-bit logits keeps 2 V instead.
    req = {
        "model": "llama-2-7b",
        "method": "lora",
        "micro_batch_size": 2,
        "seq_len": 512,
        "framework": "torchtune",
        "chunked_loss": False,
        "gradient_checkpointing": True,
    }
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
    assert (
        estimate_dict(chunked)["phases"]
        == estimate_dict({**chunked, "logits_upcast_in_model": False})["phases"]
    )


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
    assert (
        _resolved(model="llama-3.2-1b", framework="hf-trainer", optimizer="adamw-8bit")[
            "optimizer_fused"
        ]
        is False
    )
    assert (
        "optimizer_fused_ignored"
        not in estimate_dict({**req, "framework": "hf-trainer", "optimizer": "adamw-8bit"})[
            "warnings"
        ]
    )


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
    tt = estimate_dict({**req, "framework": "torchtune", "rope_cache_fp32": False})
    assert hf["components"]["weights"] - tt["components"]["weights"] == stats - -(-stats // 8)
    # one GPU: nothing is sharded, nothing changes
    one = {"model": "llama-3.1-70b", "method": "qlora"}
    assert (
        estimate_dict({**one, "qlora_quant_state_replicated": True})["components"]["weights"]
        == estimate_dict(one)["components"]["weights"]
    )


def test_parameter_offload_leaves_the_quant_state_on_the_gpu():
    # Llama 2 70B QLoRA, FSDP with CPU offload: the 4-bit data leaves the GPU, the double-quant
    # statistics (0.126953125 bits per quantized weight) do not.
    n = 80 * (2 * 8192 * 8192 + 2 * 8192 * 1024 + 3 * 8192 * 28672)
    stats = int(n * (4 + 8 / 64 + 32 / 16384) / 8) - n // 2
    req = {
        "model": "llama-2-70b",
        "method": "qlora",
        "num_gpus": 2,
        "sharding": "zero3",
        "cpu_offload": "optimizer+params",
    }
    assert estimate_dict({**req, "framework": "hf-trainer"})["components"]["weights"] == stats
    # torchtune's only weight on the GPU is its fp32 RoPE table, a buffer parameter offload
    # leaves there: 4096 positions x head_dim 128 (+ theta), 4 bytes each
    rope = 4 * (4096 * 128 + 64)
    assert estimate_dict({**req, "framework": "torchtune"})["components"]["weights"] == rope


def test_litgpt_fsdp_wrap_allocates_gradients_for_frozen_block_weights():
    # Llama 2 7B LoRA on 2 GPUs, FSDP: LitGPT's {Block} wrap puts frozen weights and adapters
    # in one flat parameter, so each GPU holds bf16 gradients for half of the 32 blocks'
    # 202,383,360 weights each (4 x 4096^2 + 3 x 4096 x 11008 + 2 x 4096 norms).
    req = {
        "model": "llama-2-7b",
        "method": "lora",
        "num_gpus": 2,
        "sharding": "zero3",
        "attention_keeps_fused_qkv": False,
        "lora_dropout": 0.0,
        "chunked_loss": False,
    }
    lit = estimate_dict({**req, "framework": "litgpt"})
    gen = estimate_dict({**req, "framework": "generic"})
    assert lit["model_states_bytes"] - gen["model_states_bytes"] == 32 * 202_383_360 * 2 // 2
    # one GPU: no FSDP, the wrap policy does not exist, the key keeps its default
    assert _resolved(model="llama-2-7b", framework="litgpt")["frozen_weight_grads"] is False
    assert (
        _resolved(model="llama-2-7b", framework="litgpt", num_gpus=2, sharding="zero3")[
            "frozen_weight_grads"
        ]
        is True
    )
    assert set(APPLIES_WHEN) <= {k for p in PROFILES.values() for k in p}


def test_unsloth_offloads_the_checkpointed_inputs():
    # Llama 3.1 8B, 1 x 2048 tokens, checkpointing: each of the 32 blocks' bf16 input
    # (2 x 4096 bytes per token) goes to host RAM except the two in flight.
    req = {"model": "llama-3.1-8b", "seq_len": 2048}
    uns = estimate_dict({**req, "framework": "unsloth"})
    assert uns["host_bytes"] == 30 * 2048 * 2 * 4096 == 503_316_480
    assert estimate_dict(req)["host_bytes"] == 0


UNSLOTH_8B = {
    "model": "llama-3.1-8b",
    "method": "qlora",
    "lora_rank": 32,
    "attention": "flash",
    "framework": "unsloth",
    "seq_len": 21848,
}
"""The published Unsloth context-length row of Llama 3.1 8B on a 12 GB card."""


def test_unsloth_fast_lora_saves_fewer_tensors_per_block():
    # Llama 3.1 8B (h 4096, q 4096, k/v 1024, 32 heads, m 14336), QLoRA r32 on all linears,
    # flash-attn, bf16: what one block saves per token under Unsloth 2026.8.19
    h, q, kv, heads, m = 4096, 4096, 1024, 32, 14336
    unsloth = (
        2 * (2 * h + 4)  # kernels/rms_layernorm.py Fast_RMS_Layernorm: save_for_backward(X, W, r)
        + 2 * h  # kernels/fast_lora.py LoRA_QKV: save_for_backward(X, QA, QB, KA, KB, VA, VB)
        + 2 * (2 * q + 2 * kv)
        + 4 * heads  # flash_attn_func: q, k, v, out, fp32 lse
        + 0  # LoRA_W: save_for_backward(A, B, X), X a view of flash's output
        + 2 * h
        + 2 * 2 * m  # LoRA_MLP: save_for_backward(..., X, e, g)
    )
    assert unsloth == 110_728
    # peft's LoraLayer and transformers' LlamaRMSNorm: each norm's fp32 upcast and rsqrt
    # (4 h + 4), the two norm outputs, the MLP's gate, activation, up outputs and the down
    # projection's input (4 m), one rank-r product per adapter (7 x 32 x 2)
    peft = 2 * (4 * h + 4) + 2 * 2 * h + 2 * (2 * q + 2 * kv) + 4 * heads + 2 * 4 * m + 7 * 32 * 2
    assert peft == 184_904
    # adapters in the base dtype on both sides (Unsloth's own are fp32, for which peft's
    # LoraLayer would also save fp32 copies of each input)
    base = {**UNSLOTH_8B, "lora_adapter_dtype": "base"}
    fast = estimate_dict(base)
    slow = estimate_dict({**base, "fused_lora_kernels": False})
    assert fast["activations_per_token_bytes"] == unsloth
    assert slow["activations_per_token_bytes"] == peft
    # the backward: one block recomputed, the final norm's saved tensors (4 h + 4 -> 2 h + 4),
    # and LoRA_MLP.backward's one m-wide gradient (DW; swiglu's backward writes in place)
    # instead of two
    tokens = UNSLOTH_8B["seq_len"]
    drop = tokens * ((peft - unsloth) + 2 * h + 2 * m)
    assert slow["phases"]["backward"] - fast["phases"]["backward"] == drop


def test_unsloth_fast_lora_groups_need_every_linear_adapted_without_dropout():
    def per_token(**more: object) -> int:
        # adapters in the base dtype: peft's modules then save no fp32 copy of their input
        base = {**UNSLOTH_8B, "lora_adapter_dtype": "base"}
        return estimate_dict({**base, **more})["activations_per_token_bytes"]

    # with adapter dropout Unsloth keeps peft's modules: only the norm kernel differs
    for targets in ("all-linear", "q_proj,v_proj"):
        req = {"lora_dropout": 0.05, "lora_targets": targets}
        assert per_token(**req) - per_token(**req, fused_lora_kernels=False) == 2 * ((2 - 4) * 4096)
    # q and v without k: no LoRA_QKV, and no MLP or output projection adapted: the same
    assert per_token(lora_targets="q_proj,v_proj") - per_token(
        lora_targets="q_proj,v_proj", fused_lora_kernels=False
    ) == 2 * ((2 - 4) * 4096)
    # the MLP alone: LoRA_MLP saves X, e, g instead of 4 m and three rank-r products
    mlp = "gate_proj,up_proj,down_proj"
    assert (
        per_token(lora_targets=mlp) - per_token(lora_targets=mlp, fused_lora_kernels=False)
        == 2 * ((2 - 4) * 4096) - 2 * 2 * 14336 - 3 * 32 * 2
    )


def test_unsloth_loss_computes_its_gradient_in_the_forward():
    # unsloth_zoo fused_losses/cross_entropy_loss.py: the hidden states and grad_inputs (2 x 2 h
    # a token) and one chunk of bf16 logits; 21848 tokens of fp32 logits are 10.4 GiB, over the
    # 4 GiB target: get_chunk_size rounds 10.4 / 4 up to 4 chunks of ceil(21848 / 4) tokens
    tokens, v, h = 21848, LLAMA31_8B_VOCAB, 4096
    assert tokens * v * 4 > 4 * 2**30
    fused = tokens * 2 * 2 * h + 5462 * v * 2
    assert fused == 1_759_026_176
    on = estimate_dict(UNSLOTH_8B)["phases"]["forward_end"]
    # the chunked loss without it: the whole bf16 logits (2 V a token)
    off = estimate_dict({**UNSLOTH_8B, "loss_grad_in_forward": False})["phases"]["forward_end"]
    assert off - on == tokens * v * 2 - fused
    # 2972 tokens (1.5 GB of fp32 logits): one chunk, the whole logits' worth
    short = {**UNSLOTH_8B, "seq_len": 2972}
    on = estimate_dict(short)["phases"]["forward_end"]
    off = estimate_dict({**short, "loss_grad_in_forward": False})["phases"]["forward_end"]
    assert off - on == -2972 * 2 * 2 * h
    # without the chunked loss the key reads nothing
    plain = {**UNSLOTH_8B, "chunked_loss": False}
    assert (
        estimate_dict(plain)["phases"]
        == estimate_dict({**plain, "loss_grad_in_forward": False})["phases"]
    )


def test_unsloth_2025_small_micro_batches_build_the_whole_logits():
    # Unsloth b9fe2588..0cd0635a: bsz * q_len <= 1024 -> RETURN_LOGITS, the whole bf16 logits
    # kept by Fast_CrossEntropyLoss (2 V a token, their gradient written in place), fp32-copied
    # by accelerate's output conversion; above the cap, the fused loss as before
    small = {**UNSLOTH_8B, "seq_len": 512, "micro_batch_size": 2}
    fused = estimate_dict(small)["phases"]
    whole = estimate_dict({**small, "loss_grad_in_forward": False})["phases"]
    capped = estimate_dict({**small, "loss_whole_logits_small_batches": True})["phases"]
    assert capped == whole != fused
    # 2 x 513 tokens: over the cap
    over = {**small, "seq_len": 513, "loss_whole_logits_small_batches": True}
    assert estimate_dict(over)["phases"] == estimate_dict({**small, "seq_len": 513})["phases"]
    # the replay sizes each micro-batch's loss by its own tokens; the longer ones took Cut
    # Cross-Entropy then (written as the fused head), which holds far less than whole logits
    data = {**UNSLOTH_8B, "seq_len": 2048, "micro_batch_size": 2, "gradient_accumulation_steps": 4}
    # transformers 4.46-4.49 (Unsloth up to 2025.3): no load block to absorb the logits
    data.update(loss_fused_lm_head=True, outputs_cast_fp32=True, load_warmup="none")
    data["length_stats"] = {"mean": 225, "p90": 442, "max": 1585}
    plain = estimate_dict(data)
    cap = estimate_dict({**data, "loss_whole_logits_small_batches": True})
    # the estimate is at the longest micro-batch (over the cap): the same peak
    assert cap["phases"] == plain["phases"]
    assert (
        cap["allocator"]["simulated_reserved_bytes"]
        > plain["allocator"]["simulated_reserved_bytes"]
    )
    # without a fused loss the key reads nothing
    unfused = {**data, "loss_grad_in_forward": False, "loss_fused_lm_head": False}
    assert (
        estimate_dict({**unfused, "loss_whole_logits_small_batches": True})["allocator"][
            "simulated_reserved_bytes"
        ]
        == estimate_dict(unfused)["allocator"]["simulated_reserved_bytes"]
    )


def test_litgpt_fused_qkv_keeps_more_on_mha_models_only():
    mha = {
        "model": "llama-2-7b",
        "lora_dropout": 0.0,
        "chunked_loss": False,
        "framework": "generic",
    }
    gqa = {
        "model": "llama-3.1-8b",
        "lora_dropout": 0.0,
        "chunked_loss": False,
        "framework": "generic",
    }
    assert (
        estimate_dict({**mha, "framework": "litgpt"})["activations_per_token_bytes"]
        > estimate_dict(mha)["activations_per_token_bytes"]
    )
    assert (
        estimate_dict({**gqa, "framework": "litgpt"})["activations_per_token_bytes"]
        == estimate_dict(gqa)["activations_per_token_bytes"]
    )


def test_plan_accepts_framework():
    from calc.plan import plan_dict

    out = plan_dict(
        {
            "model": "llama-3.1-8b",
            "framework": "torchtune",
            "gpu": "rtx-4090",
            "dataset_tokens": 1e6,
        }
    )
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
    fixed = recommend.Estimator(
        parse_estimate_request(
            {"model": "llama-2-7b", "framework": "litgpt", "frozen_weight_grads": False}
        )
    )
    assert fixed.get(num_gpus=2, sharding="zero3")["request"]["frozen_weight_grads"] is False
    assert "profile_keys" not in est.get()["request"]


# ---- LitGPT 0.4 QLoRA: Lightning's 4-bit layers and the loop's held micro-batch ------------

LLAMA2_7B_QLORA = {
    "model": "llama-2-7b",
    "method": "qlora",
    "micro_batch_size": 2,
    "seq_len": 512,
    "gradient_checkpointing": False,
    "chunked_loss": True,
    "qlora_double_quant": False,
    "qlora_output_layer_quantized": False,
    "qlora_dequant_fp16": False,
}


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
    assert (
        estimate_dict({**new_bnb, "previous_outputs_kept": True})["phases"]["forward_end"]
        - estimate_dict({**new_bnb, "previous_outputs_kept": False})["phases"]["forward_end"]
        == logits
    )
    assert _resolved(model="llama-2-7b", framework="litgpt")["previous_outputs_kept"] is True
    assert _resolved(model="llama-2-7b", framework="hf-trainer")["previous_outputs_kept"] is False


def test_lightning_plugin_quantizes_the_output_layer():
    # Llama 3 8B (untied), 1 x 512 tokens, NF4 without double quantization (4.5 bits): the
    # output layer's 128256 x 4096 weight goes from bf16 to NF4, and its matmul dequantizes
    # the whole weight into bf16 at the forward's end.
    n = 128_256 * 4096
    assert n == 525_336_576
    req = {
        **LLAMA2_7B_QLORA,
        "model": "llama-3-8b",
        "micro_batch_size": 1,
        "qlora_keeps_inputs": False,
    }
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
    assert (
        estimate_dict({**keep, "qlora_output_layer_quantized": True})["phases"]["forward_end"]
        - estimate_dict(keep)["phases"]["forward_end"]
        == weights + 2 * n + 512 * 4096 * 2
    )
    # an output layer tied to the embedding is an nn.Embedding: nothing changes
    tied = {**req, "model": "llama-3.2-1b"}
    quantized, plain = (
        estimate_dict({**tied, "qlora_output_layer_quantized": True}),
        estimate_dict(tied),
    )
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
    req = {
        "model": _litgpt_model("gemma-2b"),
        "method": "full",
        "num_gpus": 4,
        "sharding": "zero3",
        "gradient_checkpointing": True,
        "gradient_accumulation_steps": 4,
        "seq_len": 512,
    }
    on = estimate_dict({**req, "fsdp_flat_parameters": True})
    off = estimate_dict({**req, "fsdp_flat_parameters": False})
    assert on["peak_phase"] == "backward"
    assert on["components"]["comm_buffers"] == 2 * root * 2 == 4_194_312_192
    # weights, optimizer states, every accumulated unsharded gradient, the root gathered
    assert (
        on["components"]["gradients"]
        == off["model_states_bytes"] - off["components"]["weights"] - off["components"]["optimizer"]
    )
    assert on["components"]["gathered_weights"] == root * 2
    assert on["peak_allocated_bytes"] > off["peak_allocated_bytes"]
    # LoRA: the root is frozen, no gradient to assemble; one GPU: no FSDP
    lora = {**req, "method": "lora"}
    assert (
        estimate_dict({**lora, "fsdp_flat_parameters": True})["phases"]
        == estimate_dict(lora)["phases"]
    )
    assert _resolved(model="gemma-2b", framework="litgpt")["fsdp_flat_parameters"] is False
    assert (
        _resolved(model="gemma-2b", framework="litgpt", num_gpus=4, sharding="zero3")[
            "fsdp_flat_parameters"
        ]
        is True
    )


# ---- peft's prepare_model_for_kbit_training in a hand-written QLoRA loop --------------------


def test_custom_loop_prepares_a_4bit_model_on_one_gpu_only():
    # peft's quantization guide calls prepare_model_for_kbit_training before get_peft_model; the
    # several-GPU loop the profile cites (Answer.AI's train.py, FSDP even for DDP) does not
    one = {"model": "llama-3.1-8b", "method": "qlora", "framework": "hf-custom-loop"}
    assert _resolved(**one)["qlora_prepare_kbit"] is True
    assert _resolved(**one, num_gpus=2, sharding="zero3")["qlora_prepare_kbit"] is False
    assert _resolved(**one, num_gpus=2, sharding="ddp")["qlora_prepare_kbit"] is False
    assert _resolved(**one, qlora_prepare_kbit=False)["qlora_prepare_kbit"] is False
    for fw in ("generic", "hf-trainer", "torchtune", "litgpt", "unsloth"):
        assert _resolved(**dict(one, framework=fw))["qlora_prepare_kbit"] is False, fw
    # the loop's own loss is the model's (outputs.loss): fp32 upcast, as without the profile
    assert _resolved(**one)["loss_on_16bit_logits"] is False
    # a recommendation's sharded variant drops the profile's value, a 1-GPU one keeps it
    from calc import recommend

    est = recommend.Estimator(parse_estimate_request(one))
    assert est.get(num_gpus=2, sharding="zero3")["request"]["qlora_prepare_kbit"] is False
    assert est.get()["request"]["qlora_prepare_kbit"] is True


def test_prepared_4bit_model_costs_the_fp32_residual_stream_in_the_custom_loop():
    # Llama-3.1-8B QLoRA, 2 x 8192 tokens, checkpointing, the loop holding the output: at the end
    # of the forward the 1,050,939,392 parameters outside the 4-bit blocks weigh 4 bytes, not 2;
    # each of the 32 checkpointed blocks keeps its fp32 input (4 h, not 2 h); RoPE's cos / sin
    # follow the fp32 hidden states (2 * 2 * 128 more); the output layer's kept logits are fp32
    # (4 V, not 2 V); the loss's fp32 tensors are 12 V either way
    req = {
        "model": "llama-3.1-8b",
        "method": "qlora",
        "micro_batch_size": 2,
        "seq_len": 8192,
        "framework": "hf-custom-loop",
    }
    prepared, plain = estimate_dict(req), estimate_dict({**req, "qlora_prepare_kbit": False})
    dense = 8_030_261_248 - 6_979_321_856
    assert prepared["components"]["weights"] - plain["components"]["weights"] == 2 * dense
    per_token = 32 * 2 * 4096 + 2 * 2 * 128 + 2 * LLAMA31_8B_VOCAB
    assert (
        prepared["phases"]["forward_end"] - plain["phases"]["forward_end"]
        == 2 * dense + 2 * 8192 * per_token
        == 10_607_927_296
    )


def test_trl_before_026_casts_the_kbit_prepared_embeddings_back_to_bf16():
    # TRL 0.12.1 SFTTrainer: prepare_model_for_kbit_training, get_peft_model, then (bf16, 4-bit,
    # not sharded) peft_module_casting_to_bf16: lm_head / embed_tokens, the frozen originals
    # and peft's modules_to_save copies alike, back to bf16; the norms stay fp32
    one = {
        "model": "llama-3.1-8b",
        "method": "qlora",
        "framework": "hf-trainer-4",
        "precision": "bf16-true",
        "lora_rank": 16,
        "lora_targets": "all-linear",
        "seq_len": 1024,
        "qlora_prepare_kbit": True,
    }
    assert _resolved(**one)["qlora_embeddings_recast_bf16"] is True
    assert (
        _resolved(**{**one, "qlora_prepare_kbit": False})["qlora_embeddings_recast_bf16"] is False
    )
    for fw in ("hf-trainer", "pytorch-loop-4", "trl-sft"):
        assert _resolved(**{**one, "framework": fw})["qlora_embeddings_recast_bf16"] is False, fw
    saved = {**one, "lora_modules_to_save": "embed_tokens+lm_head"}
    on = estimate_dict(saved)["components"]
    off = estimate_dict({**saved, "qlora_embeddings_recast_bf16": False})["components"]
    table = 128_256 * 4096  # one vocab x hidden table
    # weights: the embedding and output layer, and their two trainable copies, 4 -> 2 bytes
    assert off["weights"] - on["weights"] == 4 * table * 2 == 4_202_692_608
    # the copies' gradients 4 -> 2 bytes, torch AdamW's two states 4 -> 2 bytes each, and the
    # foreach step's sqrt of the second moments (one state-sized list) 4 -> 2 bytes
    assert off["gradients"] - on["gradients"] == 2 * table * 2
    assert off["optimizer"] - on["optimizer"] == 2 * 2 * table * 2
    assert off["optimizer_temporaries"] - on["optimizer_temporaries"] == 2 * table * 2
    # the LoRA adapters keep their fp32 (peft autocast_adapter_dtype; TRL >= 0.9.3 casts none)
    assert on["lora_weights"] == off["lora_weights"] == 41_943_040 * 4
    # without modules_to_save only the two frozen tables change
    plain_on = estimate_dict(one)["components"]
    plain_off = estimate_dict({**one, "qlora_embeddings_recast_bf16": False})["components"]
    assert plain_off["weights"] - plain_on["weights"] == 2 * table * 2
    assert plain_off["optimizer"] == plain_on["optimizer"]


def test_trl_recasts_under_its_bf16_autocast_too():
    # TRL's bf16 flag is the Trainer's autocast (bf16-mixed): after kbit preparation the
    # non-quantized weights are fp32 (the AMP regime), and peft_module_casting_to_bf16 puts the
    # embedding and output layer back in bf16, so autocast has no fp32 head to copy either
    from calc import states as st
    from calc import timing

    one = {
        "model": "llama-3.1-8b",
        "method": "qlora",
        "framework": "hf-trainer-4",
        "precision": "bf16-mixed",
        "lora_rank": 16,
        "lora_targets": "all-linear",
        "seq_len": 1024,
        "qlora_prepare_kbit": True,
    }
    table = 128_256 * 4096
    on = estimate_dict(one)["components"]
    off = estimate_dict({**one, "qlora_embeddings_recast_bf16": False})["components"]
    assert off["weights"] - on["weights"] == 2 * table * 2
    # the fp32 head's 16-bit working copy is gone; the fp32 norms stay (no copy: not matmuls)
    assert off["weight_copies"] - on["weight_copies"] == table * 2
    req = parse_estimate_request(one)
    assert st.embeddings_recast(req, st.request_regime(req))
    assert timing.autocast_cast_params(req, req.sharding)[1:] == (0, 0)
    fp32_head = parse_estimate_request({**one, "qlora_embeddings_recast_bf16": False})
    assert timing.autocast_cast_params(fp32_head, fp32_head.sharding)[1:] == (table, 1)
    # without the preparation the weights are whatever the loader left: nothing to recast
    plain = parse_estimate_request({**one, "qlora_prepare_kbit": False})
    assert not st.embeddings_recast(plain, st.request_regime(plain))


def test_the_recast_embeddings_write_16bit_logits():
    # the bf16 output layer meets the fp32 final norm under autocast: 16-bit logits, as on a
    # model never prepared; seen through a fused head loss (Liger's, as the 2025 notebook
    # runs), whose tiles and casts have the logits' dtype (transformers' unchunked loss costs
    # 12 V per token in fp32 either way)
    from calc import memory as mem
    from calc import states as st

    base = {
        "model": "llama-3.1-8b",
        "method": "qlora",
        "framework": "hf-trainer-4",
        "precision": "bf16-true",
        "micro_batch_size": 2,
        "seq_len": 2048,
        "chunked_loss": True,
        "loss_fused_lm_head": True,
    }

    def logits(**extra) -> int:
        req = parse_estimate_request({**base, **extra})
        return mem.activation_bytes(req, st.request_regime(req)).logits

    recast = logits(qlora_prepare_kbit=True)
    assert recast == logits(qlora_prepare_kbit=False)
    assert recast != logits(qlora_prepare_kbit=True, qlora_embeddings_recast_bf16=False)
    # GPT-NeoX's embed_in / embed_out match none of TRL's names
    neox = parse_estimate_request(
        {**base, "model": "stablelm-base-alpha-3b", "qlora_prepare_kbit": True}
    )
    assert st.recast_params(neox, st.request_regime(neox)) == 0
    # ... so nothing of it is cast: not the logits, not a modules_to_save copy
    neox_saved = {
        **base,
        "model": "stablelm-base-alpha-3b",
        "qlora_prepare_kbit": True,
        "chunked_loss": False,
        "loss_fused_lm_head": False,
        "lora_modules_to_save": "embed_tokens+lm_head",
    }
    on = estimate_dict(neox_saved)
    off = estimate_dict({**neox_saved, "qlora_embeddings_recast_bf16": False})
    assert on["components"] == off["components"]
    assert on["peak_allocated_bytes"] == off["peak_allocated_bytes"]
    tied = parse_estimate_request({**base, "model": "llama-3.2-1b", "qlora_prepare_kbit": True})
    assert st.recast_params(tied, st.request_regime(tied)) == 128_256 * 2048


# ---- one library generation per profile ---------------------------------------------------------
# ---- one library generation per profile ---------------------------------------------------------

MOE = {"model": "qwen3-30b-a3b", "method": "lora", "lora_rank": 16, "lora_targets": "all-linear"}


def test_hf_trainer_profiles_pin_their_transformers_generation():
    # transformers 5 stores a block's experts as 3-D tensors, transformers 4 as one module each
    five = _resolved(**MOE, framework="hf-trainer")
    four = _resolved(**MOE, framework="hf-trainer-4")
    assert (
        _resolved(**MOE, framework="hf-custom-loop")["moe_expert_layout"] == "fused-3d"
    )  # transformers 5 too
    assert (
        five["moe_expert_layout"] == "fused-3d"
        and four["moe_expert_layout"] == "per-expert-modules"
    )
    # the rest of the generation: unfused AdamW and k/v repeated before SDPA before 4.54
    assert (five["optimizer_fused"], five["attention_grouped_kv"]) == (True, True)
    assert (four["optimizer_fused"], four["attention_grouped_kv"]) == (False, False)
    # the profile's layout is the key's own behaviour, and the user's layout wins
    assert estimate_dict({**MOE, "framework": "hf-trainer"}) == estimate_dict(
        {**MOE, "framework": "hf-trainer", "moe_expert_layout": "fused-3d"}
    )
    assert (
        estimate_dict(
            {**MOE, "framework": "hf-trainer", "moe_expert_layout": "per-expert-modules"}
        )["params_trainable"]
        == estimate_dict({**MOE, "framework": "hf-trainer-4"})["params_trainable"]
    )
    # different adapters: peft 0.21 fuses gate+up into one rank-2r adapter on the 3-D stacks
    assert (
        estimate_dict({**MOE, "framework": "hf-trainer"})["params_trainable"]
        != estimate_dict({**MOE, "framework": "hf-trainer-4"})["params_trainable"]
    )
    # a dense model has no experts: the layout changes nothing there
    dense = {
        "model": "llama-3.1-8b",
        "method": "lora",
        "optimizer_fused": True,
        "attention_grouped_kv": True,
    }
    assert (
        estimate_dict({**dense, "framework": "hf-trainer"})["phases"]
        == estimate_dict({**dense, "framework": "hf-trainer-4"})["phases"]
    )


# ---- DeepSpeed's ZeRO under the Hugging Face Trainer ----------------------------------------

ZERO3 = {
    "model": "llama-3.2-1b",
    "method": "full",
    "precision": "bf16-mixed",
    "num_gpus": 2,
    "sharding": "zero3",
    "framework": "hf-trainer",
    "optimizer_fused": False,
}


def test_deepspeed_keeps_accumulated_gradients_sharded():
    # accelerate skips no_sync for DeepSpeed ZeRO-2/3: each micro-batch's gradients are reduced
    # into the partition, so accumulation holds 2 bytes x P / N, not the unsharded 2 x P
    accum = {**ZERO3, "gradient_accumulation_steps": 8}
    fsdp = estimate_dict(accum)
    deepspeed = estimate_dict({**accum, "sharding_engine": "deepspeed"})
    params = fsdp["params_trainable"]
    assert (
        fsdp["phases"]["backward"]
        - estimate_dict({**accum, "sync_each_micro_batch": True})["phases"]["backward"]
        == 2 * params - 2 * params // 2
    )
    synced = estimate_dict({**accum, "sync_each_micro_batch": True, "sharding_engine": "deepspeed"})
    assert deepspeed["phases"]["backward"] == synced["phases"]["backward"]
    for phase in ("forward_end", "backward"):
        assert deepspeed["phases"][phase] < fsdp["phases"][phase]
    # ZeRO-2 too; ZeRO-1 never sharded the gradients, DDP has no engine to choose
    for sharding in ("zero2",):
        z = {**accum, "sharding": sharding}
        assert (
            estimate_dict({**z, "sharding_engine": "deepspeed"})["phases"]["backward"]
            < estimate_dict(z)["phases"]["backward"]
        )
    ddp = {**accum, "sharding": "ddp"}
    assert (
        estimate_dict({**ddp, "sharding_engine": "deepspeed"})["phases"]
        == estimate_dict(ddp)["phases"]
    )


def test_deepspeed_zero3_step_is_one_sub_group_at_a_time():
    # Llama 3.2 1B on 2 GPUs: a 0.62 G-element partition, under sub_group_size (1e9): one
    # sub-group S = P / 2 (every tensor has an even size). stage3.py step: the flat 16-bit
    # gradients (2 S) and their fp32 copy (4 S) for a moment, then the fp32 gradient (4 S)
    # beside torch's foreach sqrt of the fp32 second moments (4 S): 8 S; fused AdamW: 6 S.
    # 512 tokens: the gradient partition is held from the set-up on (grad_partition_held),
    # so the forward's end outgrows the fused step at 2048
    ds = {**ZERO3, "sharding_engine": "deepspeed", "seq_len": 512}
    params = estimate_dict(ds)["params_trainable"]
    half = params // 2
    assert params % 2 == 0
    temp = estimate_dict(ds)
    fused = estimate_dict({**ds, "optimizer_fused": True})
    parts = {e["peak_phase"] for e in (temp, fused)}
    assert parts == {"optimizer_step"}
    assert temp["components"]["optimizer_temporaries"] == 8 * half
    assert fused["components"]["optimizer_temporaries"] == 6 * half
    # FSDP's count: the foreach sqrt over this GPU's shard of the states, 4 bytes x P / 2; and
    # DeepSpeed's reduce bucket, hidden x hidden bf16 elements (the Trainer's "auto"), all run long
    bucket = 2048**2 * 2
    assert (
        temp["components"]["comm_buffers"] - bucket
        == estimate_dict(ZERO3)["components"]["comm_buffers"]
    )
    assert (
        temp["phases"]["optimizer_step"] - estimate_dict(ZERO3)["phases"]["optimizer_step"]
        == 8 * half - 4 * half + bucket
    )


def test_deepspeed_zero3_sub_groups_bound_the_step():
    # Llama 3.1 8B on 2 GPUs: a 4.0 G-element partition in sub-groups that close once they
    # reach 1e9 elements, so the largest is 1e9 plus at most one tensor's partition (the
    # 128256 x 4096 embedding's half, 262,668,288) and the step's temporaries 8 S
    from calc.states import DEEPSPEED_SUB_GROUP_SIZE, param_layout, zero3_sub_group_elements

    req = parse_estimate_request({**ZERO3, "model": "llama-3.1-8b", "sharding_engine": "deepspeed"})
    sub = zero3_sub_group_elements(req, param_layout(req))
    assert DEEPSPEED_SUB_GROUP_SIZE <= sub < DEEPSPEED_SUB_GROUP_SIZE + 128_256 * 4096 // 2
    est = estimate_dict({**ZERO3, "model": "llama-3.1-8b", "sharding_engine": "deepspeed"})
    assert est["components"]["optimizer_temporaries"] == 8 * sub
    whole = estimate_dict({**ZERO3, "model": "llama-3.1-8b"})
    assert (
        est["components"]["optimizer_temporaries"]
        < 2 * whole["components"]["optimizer_temporaries"]
    )
    # the engine changes nothing without ZeRO
    single = {**ZERO3, "num_gpus": 1, "sharding": "none"}
    assert (
        estimate_dict({**single, "sharding_engine": "deepspeed"})["phases"]
        == estimate_dict(single)["phases"]
    )


def test_deepspeed_zero2_steps_each_parameter_group_partition_in_fp32():
    # stage_1_and_2.py step: the group's gradient partition flattened and cast to fp32 (4 S,
    # S = P / 2), stepped with torch's foreach sqrt beside it (4 S); FSDP's count has the sqrt only
    z2 = {**ZERO3, "sharding": "zero2"}
    half = estimate_dict(z2)["params_trainable"] // 2
    deepspeed = estimate_dict({**z2, "sharding_engine": "deepspeed"})
    assert (
        deepspeed["phases"]["optimizer_step"] - estimate_dict(z2)["phases"]["optimizer_step"]
        == 8 * half - 4 * half
    )
    assert (
        deepspeed["components"]["comm_buffers"] == estimate_dict(z2)["components"]["comm_buffers"]
    )  # no ZeRO-3 bucket


@pytest.mark.parametrize("model", ["llama-3.1-8b", "qwen3-30b-a3b", "llama-3.2-1b"])
@pytest.mark.parametrize("gpus", [1, 2, 3, 8])
def test_zero3_sub_groups_as_deepspeed_walks_the_parameters(model, gpus):
    # stage3.py _create_fp16_sub_groups, one parameter at a time: a sub-group closes once it
    # holds sub_group_size elements or more
    from calc.states import (
        DEEPSPEED_SUB_GROUP_SIZE,
        ceil_div,
        param_layout,
        zero3_sub_group_elements,
    )

    req = parse_estimate_request(
        {**ZERO3, "model": model, "num_gpus": gpus, "sharding_engine": "deepspeed"}
    )
    layout = param_layout(req)
    groups, current = [], 0
    for rows, cols, copies in layout.tensors:
        for _ in range(copies):
            current += ceil_div(rows * cols, gpus)
            if current >= DEEPSPEED_SUB_GROUP_SIZE:
                groups.append(current)
                current = 0
    groups.append(current)
    assert zero3_sub_group_elements(req, layout) == max(groups)


# ---- libraries built on the Trainer, and hand-written loops --------------------------------------

LLAMA_8B_LORA = {"model": "llama-3.1-8b", "method": "lora", "micro_batch_size": 2, "seq_len": 8192}
ZERO3_DS = {"num_gpus": 4, "sharding": "zero3", "sharding_engine": "deepspeed"}


def test_trl_sft_runs_its_chunked_lm_head_and_bf16_qlora_adapters():
    lora = _resolved(**LLAMA_8B_LORA, framework="trl-sft")
    qlora = _resolved(**{**LLAMA_8B_LORA, "method": "qlora"}, framework="trl-sft")
    assert (lora["chunked_loss"], lora["lora_adapter_dtype"]) == (True, "fp32")
    # sft_trainer.py casts a quantized model's trainable parameters to bf16, and prepares no
    # fp32 copy of the non-quantized ones
    assert (qlora["lora_adapter_dtype"], qlora["qlora_prepare_kbit"]) == ("base", False)
    # ZeRO-3 on a model that is not quantized: autocast_adapter_dtype=False
    assert _resolved(**LLAMA_8B_LORA, **ZERO3_DS, framework="trl-sft")["lora_adapter_dtype"] == (
        "base"
    )
    assert (
        _resolved(**LLAMA_8B_LORA, **{**ZERO3_DS, "sharding_engine": "fsdp"}, framework="trl-sft")[
            "lora_adapter_dtype"
        ]
        == "fp32"
    )
    # the user's adapter dtype wins over the condition too
    assert (
        _resolved(
            **{**LLAMA_8B_LORA, "method": "qlora"}, framework="trl-sft", lora_adapter_dtype="fp32"
        )["lora_adapter_dtype"]
        == "fp32"
    )
    # the profile is the Trainer's with those entries: no other key differs
    for method in ("lora", "qlora"):
        req = {**LLAMA_8B_LORA, "method": method}
        trl = estimate_dict({**req, "framework": "trl-sft"})
        hf = estimate_dict(
            {
                **req,
                "framework": "hf-trainer",
                "chunked_loss": True,
                "loss_fused_lm_head": True,
                "lora_adapter_dtype": "base" if method == "qlora" else "fp32",
            }
        )
        assert trl["phases"] == hf["phases"], method


def test_fused_lm_head_holds_no_logits():
    # Llama-3.1-8B LoRA, 2 x 8192 tokens, bf16. transformers' loss at the start of its backward:
    # 12 V bytes a token (fp32 log-softmax and two fp32 gradients). TRL 1.16.0's
    # ChunkedLogProbFunction.backward: its copy of the hidden states (2 h), grad_hidden in fp32
    # (4 h) and its bf16 cast (2 h), targets int64 (8), log_z and entropy fp32 (4 + 4), the label
    # mask (1), the log-probs' fp32 gradient (4); and one 4096 x 32768 bf16 tile (mm_buf)
    tokens, v, h = 2 * 8192, LLAMA31_8B_VOCAB, 4096
    fused = tokens * (2 * h + 4 * h + 2 * h + 8 + 4 + 4 + 1 + 4) + 4096 * 32768 * 2
    assert fused == 805_650_432
    trainer = estimate_dict({**LLAMA_8B_LORA, "framework": "hf-trainer"})["phases"]
    trl = estimate_dict({**LLAMA_8B_LORA, "framework": "trl-sft"})["phases"]
    assert trainer["forward_end"] - trl["forward_end"] == 12 * v * tokens - fused
    # a chunked loss that builds the 16-bit logits (torchtune, Unsloth) holds 2 V a token
    chunked = estimate_dict({**LLAMA_8B_LORA, "framework": "hf-trainer", "chunked_loss": True})
    assert chunked["phases"]["forward_end"] - trl["forward_end"] == 2 * v * tokens - fused
    # full fine-tuning: the output layer's gradient accumulates in fp32 (4 V h) and is cast to
    # bf16 (2 V h) inside the same backward
    full = {**LLAMA_8B_LORA, "method": "full"}
    trainer = estimate_dict({**full, "framework": "hf-trainer"})["phases"]
    trl = estimate_dict({**full, "framework": "trl-sft"})["phases"]
    assert trainer["forward_end"] - trl["forward_end"] == 12 * v * tokens - fused - 6 * v * h
    # without the chunked loss the key reads nothing (use_liger_kernel, a compute_loss_func)
    off = {**LLAMA_8B_LORA, "framework": "trl-sft", "chunked_loss": False}
    assert (
        estimate_dict(off)["phases"]
        == estimate_dict({**off, "loss_fused_lm_head": False})["phases"]
    )


def test_llama_factory_keeps_zero3_adapters_in_the_base_dtype_unless_quantized():
    assert _resolved(**LLAMA_8B_LORA, framework="llama-factory")["lora_adapter_dtype"] == "fp32"
    assert (
        _resolved(**LLAMA_8B_LORA, **ZERO3_DS, framework="llama-factory")["lora_adapter_dtype"]
        == "base"
    )
    qlora = {**LLAMA_8B_LORA, "method": "qlora", **ZERO3_DS}
    assert _resolved(**qlora, framework="llama-factory")["lora_adapter_dtype"] == "fp32"


def test_trainer_tools_keep_their_own_defaults():
    assert _resolved(**LLAMA_8B_LORA, framework="ms-swift")["lora_dropout"] == 0.05
    assert _resolved(**LLAMA_8B_LORA, framework="axolotl")["lora_dropout"] == 0.0
    qlora = {**LLAMA_8B_LORA, "method": "qlora"}
    # axolotl casts the norms and embeddings back after prepare_model_for_kbit_training
    assert _resolved(**qlora, framework="axolotl")["qlora_prepare_kbit"] is False
    assert _resolved(**qlora, framework="pytorch-loop")["qlora_prepare_kbit"] is True
    # axolotl on its own defaults runs the Trainer's code path
    assert estimate_dict({**qlora, "framework": "axolotl"}) == {
        **estimate_dict({**qlora, "framework": "hf-trainer"}),
        "request": estimate_dict({**qlora, "framework": "axolotl"})["request"],
    }


def test_pytorch_loop_runs_cross_entropy_on_the_16bit_logits():
    # Llama-3.1-8B LoRA, 2 x 8192 tokens: the loop holds its bf16 logits (2 V) either way; the
    # model's own loss (hf-custom-loop, transformers' ForCausalLMLoss) adds 12 V of fp32
    # tensors, the loop's F.cross_entropy on bf16 logits 3 x 2 V (log_softmax output, its
    # gradient, the logits' gradient)
    tokens, v = 2 * 8192, LLAMA31_8B_VOCAB
    loop = estimate_dict({**LLAMA_8B_LORA, "framework": "pytorch-loop"})["phases"]
    model_loss = estimate_dict({**LLAMA_8B_LORA, "framework": "hf-custom-loop"})["phases"]
    assert (
        model_loss["forward_end"] - loop["forward_end"] == (12 - 6) * v * tokens == 12_608_077_824
    )
    assert (model_loss["backward"], model_loss["optimizer_step"]) == (
        loop["backward"],
        loop["optimizer_step"],
    )
    four = _resolved(**MOE, framework="pytorch-loop-4")
    assert (four["loss_on_16bit_logits"], four["moe_expert_layout"]) == (True, "per-expert-modules")
    assert four["attention_grouped_kv"] is False


def test_a_profile_condition_is_evaluated_again_on_a_changed_request():
    values = dict(_resolved(**LLAMA_8B_LORA, framework="trl-sft"))
    own = defaults("estimate")
    assert reapplied({**values, **ZERO3_DS}, ("lora_adapter_dtype",), Framework.TRL_SFT, own) == {
        "lora_adapter_dtype": "base"
    }
    assert reapplied(values, ("lora_adapter_dtype",), Framework.TRL_SFT, own) == {
        "lora_adapter_dtype": "fp32"
    }


def test_torchtune_keeps_one_fp32_rope_table_on_every_gpu():
    # torchtune 0.6.1 Llama3ScaledRoPE: cache [max_seq_len, head_dim // 2, 2] fp32 and theta
    # [head_dim // 2], one module shared by the 32 layers of llama3_1_8b (max_seq_len 131072,
    # head_dim 128): 4 * (131072 * 128 + 64) bytes, sharding or not
    table = 4 * (131072 * 128 + 64)
    assert table == 67_109_120
    for extra in ({}, {"num_gpus": 4, "sharding": "zero3"}):
        req = {"model": "llama-3.1-8b", "method": "lora", "framework": "torchtune", **extra}
        on = estimate_dict(req)["components"]["weights"]
        off = estimate_dict({**req, "rope_cache_fp32": False})["components"]["weights"]
        assert on - off == table, extra


def test_chunked_output_layer_sums_its_weight_gradient_out_of_place():
    # full fine-tuning of Llama 3.2 1B (tied: the output layer's weight is the embedding,
    # 128256 x 2048) through torchtune's 8 output chunks, bf16, 1024 tokens: during the loss's
    # backward the running sum, the new chunk's gradient and their sum (3 V h * 2 bytes) beside
    # the 16-bit logit gradients of 6 of the 8 chunks (1024 * 2 * 128256 * 6 / 8)
    v, h, tokens = 128256, 2048, 1024
    moment = 3 * v * h * 2 + tokens * 2 * v * 6 // 8
    at_start = tokens * (v * 2 + v * 4 + v * 4 // 8)  # chunks, fp32 log-softmax, last upcast
    assert moment > at_start
    req = {
        "model": "llama-3.2-1b",
        "method": "full",
        "seq_len": tokens,
        "framework": "torchtune",
        "optimizer_in_backward": False,
    }
    on = estimate_dict(req)
    off = estimate_dict({**req, "output_layer_chunked": False})
    assert on["phases"]["forward_end"] - off["phases"]["forward_end"] == moment - at_start
    # LoRA: the output layer is frozen, its weight has no gradient to sum
    lora = {**req, "method": "lora"}
    assert (
        estimate_dict(lora)["phases"]
        == estimate_dict({**lora, "output_layer_chunked": False})["phases"]
    )


# ---- weights loaded in 16 bits under mixed precision (weights_loaded_16bit) ----------------

LLAMA31_8B_PARAMS = 8_030_261_248
LLAMA31_8B_R16_ALL_LINEAR = 32 * 16 * (2 * (4096 + 4096) + 2 * (4096 + 1024) + 3 * (4096 + 14336))
"""r (d_in + d_out) per adapted linear: q, o (4096 -> 4096), k, v (4096 -> 1024), gate, up
(4096 -> 14336), down (14336 -> 4096), 32 blocks."""


def test_hf_trainer_mixed_lora_keeps_the_bf16_weights_it_loaded():
    # transformers 5.17.0 modeling_utils.py from_pretrained (line 4100): dtype None -> "auto",
    # the checkpoint's bf16; accelerate only autocasts. Frozen weights 2 bytes, no working copy;
    # peft's fp32 adapters 4 bytes, their AdamW states 8
    assert LLAMA31_8B_R16_ALL_LINEAR == 41_943_040
    req = {"model": "llama-3.1-8b", "method": "lora", "precision": "bf16-mixed"}
    on = estimate_dict({**req, "framework": "hf-trainer"})
    assert on["request"]["weights_loaded_16bit"] is True
    c = on["components"]
    assert c["weights"] == 2 * LLAMA31_8B_PARAMS == 16_060_522_496
    assert c["weight_copies"] == 0
    assert c["lora_weights"] == 4 * LLAMA31_8B_R16_ALL_LINEAR
    assert c["optimizer"] == 8 * LLAMA31_8B_R16_ALL_LINEAR
    # Lightning's meaning (the key off): fp32 frozen weights and autocast's 16-bit copies
    off = estimate_dict({**req, "framework": "hf-trainer", "weights_loaded_16bit": False})
    assert off["components"]["weights"] == 4 * LLAMA31_8B_PARAMS
    assert off["components"]["weight_copies"] > 0


def test_autocast_adapters_save_a_16bit_cast_of_their_input():
    # peft 0.21.0 lora/layer.py Linear.forward: x = self._cast_input_dtype(x, fp32) for the fp32
    # adapter; under autocast lora_A's matmul casts that copy back to bf16 and saves the cast
    # (2 d_in), and lora_B saves lora_A's bf16 output (2 r). Without autocast (bf16-true) lora_A
    # saves the fp32 copy (4 d_in) and lora_B an fp32 output (4 r). Per token and block, the
    # seven adapted linears of Llama 3.1 8B (d_in: 4096 x 6, 14336 for down), r = 16:
    r = 16
    saved_less = (4 - 2) * (6 * 4096 + 14336) + 7 * (4 - 2) * r
    assert saved_less == 78_048
    req = {
        "model": "llama-3.1-8b",
        "method": "lora",
        "framework": "hf-trainer",
        "gradient_checkpointing": False,
    }
    mixed = estimate_dict({**req, "precision": "bf16-mixed"})["activations_per_token_bytes"]
    true = estimate_dict({**req, "precision": "bf16-true"})["activations_per_token_bytes"]
    assert true - mixed == saved_less


def test_mixed_full_fine_tuning_on_16bit_weights_trains_the_bf16_weights():
    # the loaded bf16 weights train as they are: torch AdamW's states are zeros_like(p), bf16;
    # no master copy. The same bytes as bf16-true in every phase
    req = {"model": "llama-3.1-8b", "method": "full", "framework": "hf-trainer"}
    mixed = estimate_dict({**req, "precision": "bf16-mixed", "weights_loaded_16bit": True})
    assert mixed["phases"] == estimate_dict({**req, "precision": "bf16-true"})["phases"]
    c = mixed["components"]
    assert c["weights"] == c["gradients"] == 2 * LLAMA31_8B_PARAMS
    assert c["optimizer"] == 4 * LLAMA31_8B_PARAMS


def test_unsloth_qlora_fp16_counts_16bit_weights_and_fp32_adapters():
    # Unsloth 2026.8.19 models/llama.py: dtype None -> float16 on a card without bf16, passed to
    # from_pretrained; unsloth_zoo 2026.8.13 training_utils.py prepare_model_for_training: lora_A /
    # lora_B upcast to fp32 (line 420), every other parameter frozen as loaded. Llama 3.1 8B:
    # NF4 block linears (4.127 bits, double quantization) + the embedding and output layer and
    # norms in 2 bytes, + the model's 16-bit rotary cos and sin tables (rope_cache_16bit model:
    # 32768 x 128 x 2 bytes each)
    linears = 32 * (4096 * 4096 * 2 + 4096 * 1024 * 2 + 4096 * 14336 * 3)
    dense = LLAMA31_8B_PARAMS - linears
    nf4 = int(linears * (4 + 8 / 64 + 32 / (64 * 256)) / 8)
    rope = 2 * 32768 * 128 * 2
    req = {
        "model": "llama-3.1-8b",
        "method": "qlora",
        "precision": "fp16-mixed",
        "framework": "unsloth",
        "micro_batch_size": 2,
    }
    c = estimate_dict(req)["components"]
    assert c["weights"] == nf4 + 2 * dense + rope == 5_702_295_552 + rope
    assert c["lora_weights"] == 4 * LLAMA31_8B_R16_ALL_LINEAR
    assert c["weight_copies"] == 0
    # the same request read as Lightning's fp16-mixed: fp32 embedding, output layer and norms,
    # and autocast's fp16 copy of the output layer (the embedding is a lookup, no autocast op)
    off = estimate_dict({**req, "weights_loaded_16bit": False})["components"]
    assert off["weights"] == nf4 + 4 * dense + rope
    assert off["weight_copies"] == 2 * 128_256 * 4096


@pytest.mark.parametrize(
    ("framework", "method", "loaded_16bit"),
    [
        ("hf-trainer", "lora", True),
        # the hf-trainer profile keeps full fine-tuning's *-mixed as fp32 master weights
        ("hf-trainer", "full", False),
        ("axolotl", "full", True),
        ("ms-swift", "lora", True),
        ("hf-custom-loop", "lora", True),
        ("pytorch-loop", "lora", True),
        # TRL 1.16.0 trainer/utils.py create_model_from_path: dtype defaults to "float32"
        ("trl-sft", "lora", False),
        # transformers 4 from_pretrained loads fp32 unless torch_dtype is given
        ("hf-trainer-4", "lora", False),
        ("pytorch-loop-4", "lora", False),
        # full fine-tuning casts every trainable parameter to fp32 (unsloth_zoo
        # prepare_model_for_training; LLaMA-Factory cast_trainable_params_to_fp32)
        ("unsloth", "full", False),
        ("unsloth", "qlora", True),
        ("llama-factory", "full", False),
        ("llama-factory", "lora", True),
    ],
)
def test_which_profiles_load_16bit_weights(framework: str, method: str, loaded_16bit: bool):
    req = {"model": "llama-3.2-1b", "method": method, "framework": framework}
    parsed = parse_estimate_request({**req, "precision": "bf16-mixed"})
    assert parsed.weights_loaded_16bit is loaded_16bit
    assert "weights_loaded_16bit" in SOURCES[Framework(framework)]


def test_weights_loaded_16bit_leaves_other_regimes_alone():
    base = {"model": "llama-3.2-1b", "method": "lora", "framework": "generic"}
    for more in (
        {"precision": "bf16-true"},
        {"precision": "fp32"},
        {"precision": "bf16-mixed", "num_gpus": 2, "sharding": "zero3"},
        # peft's prepare_model_for_kbit_training casts the non-quantized weights to fp32
        {"precision": "bf16-mixed", "method": "qlora", "qlora_prepare_kbit": True},
    ):
        req = {**base, **more}
        assert (
            estimate_dict({**req, "weights_loaded_16bit": True})["phases"]
            == estimate_dict(req)["phases"]
        )


def test_litgpt_chunked_loss_on_held_logits_is_hand_counted():
    # litgpt 0.5.13 finetune/lora.py fit: logits = model(input_ids, lm_head_chunk_size=128),
    # loss = chunked_cross_entropy(logits, ...) (utils.py: F.cross_entropy per chunk, 16-bit),
    # fabric.backward(loss) with logits alive. Llama 3.1 8B, 2 x 1024 tokens, bf16: at the
    # loss's peak the loop's logits (2 V x 2048), one log-softmax or logits' gradient per
    # scored token (2 V x 2 x 1023) and, for the first chunk (2 x 128 rows), its nll gradient
    # and logits' gradient beside its saved log-softmax (2 x 2 V x 256). The previous
    # micro-batch's logits are gone by then ('logits = model(...)' replaced them).
    v = 128_256
    peak = 2 * v * (2048 + 2 * 1023 + 2 * 256)
    assert peak == 1_181_494_272
    req = {
        "model": "llama-3.1-8b",
        "method": "lora",
        "framework": "litgpt",
        "micro_batch_size": 2,
        "seq_len": 1024,
        "gradient_checkpointing": False,
    }
    on = estimate_dict(req)
    off = estimate_dict({**req, "chunked_loss_holds_logits": False})
    assert on["peak_phase"] == "forward_end"
    assert on["components"]["logits"] == peak
    # without it: the chunks counted once (2 V per token) and the previous micro-batch's logits
    assert off["components"]["logits"] == 2 * (2 * v * 2048)
    # the loop's logits stay through the whole backward
    assert on["phases"]["backward"] - off["phases"]["backward"] == 2 * v * 2048
    assert on["phases"]["optimizer_step"] == off["phases"]["optimizer_step"]
    # finetune/full.py: logits = model(input_ids) whole; the peak of its loss is the output
    # layer's matmul backward: the loop's logits, the gradient the slice's backward padded back
    # to 2048 rows, the weight's gradient (V x 4096) and the hidden states' (2048 x 4096)
    full = {**req, "method": "full", "micro_batch_size": 1, "seq_len": 2048}
    head = 2 * (2 * v * 2048 + v * 4096 + 2048 * 4096)
    assert head > 2 * v * (2 * 2048 + 2047)  # the slice's backward, before the matmul's
    on = estimate_dict(full)["phases"]["forward_end"]
    off = estimate_dict({**full, "chunked_loss_holds_logits": False})["phases"]["forward_end"]
    assert on - off == head - 2 * (2 * v * 2048)
    assert _resolved(model="llama-3.1-8b", framework="litgpt")["chunked_loss_holds_logits"] is True
    assert (
        _resolved(model="llama-3.1-8b", framework="torchtune")["chunked_loss_holds_logits"] is False
    )


def test_litgpt_fused_qkv_adapter_drops_once_and_keeps_the_padded_output():
    # litgpt 0.5.13 lora.py LoRAQKVLinear.forward: F.linear(self.lora_dropout(x), self.lora_A)
    # drops the block's input once for q, k and v; with LitGPT's default q and v only,
    # zero_pad's index_copy_(dim=-1, index=self.lora_ind, source=x) saves its source, the
    # lora_B output of q and v. Llama 3.1 8B (h 4096, q 4096, v 1024), 32 blocks, bf16,
    # 1 x 1024 tokens, dropout 0.05: per block and token, one dropout (2 bytes of output and a
    # 1-byte mask per input value) instead of two, and the padded output (2 x (4096 + 1024)).
    dropped = (2 + 1) * 4096
    padded = 2 * (4096 + 1024)
    assert (dropped, padded) == (12_288, 10_240)
    req = {
        "model": "llama-3.1-8b",
        "method": "lora",
        "framework": "litgpt",
        "lora_targets": ["q_proj", "v_proj"],
        "seq_len": 1024,
        "gradient_checkpointing": False,
    }
    on = estimate_dict(req)
    off = estimate_dict({**req, "lora_fused_qkv_adapter": False})
    # activations_per_token_bytes: one block's saved bytes per token
    assert on["activations_per_token_bytes"] - off["activations_per_token_bytes"] == (
        padded - dropped
    )
    tokens_blocks = 1024 * 32
    assert on["components"]["activations"] - off["components"]["activations"] == tokens_blocks * (
        padded - dropped
    )
    # all of q, k, v adapted: zero_pad returns its input; two dropouts fewer per block
    every = {**req, "lora_targets": "all-linear"}
    assert (
        estimate_dict(every)["activations_per_token_bytes"]
        - estimate_dict({**every, "lora_fused_qkv_adapter": False})["activations_per_token_bytes"]
        == -2 * dropped
    )
    # no dropout: the shared input is saved once either way, and nothing is padded with q, k, v
    nodrop = {**every, "lora_dropout": 0.0}
    assert (
        estimate_dict(nodrop)["phases"]
        == estimate_dict({**nodrop, "lora_fused_qkv_adapter": False})["phases"]
    )
    assert _resolved(model="llama-3.1-8b", framework="litgpt")["lora_fused_qkv_adapter"] is True
    assert (
        _resolved(model="llama-3.1-8b", framework="hf-trainer")["lora_fused_qkv_adapter"] is False
    )


def test_accelerate_casts_the_outputs_under_its_native_mixed_precision_only():
    # accelerate 1.15.0: native_amp for fp16 / bf16 unless DeepSpeed runs; the Trainer family
    # prepares its model with it, a loop of its own does not
    mixed = {"model": "llama-3.2-1b", "method": "lora", "precision": "bf16-mixed"}
    trainers = ("hf-trainer", "hf-trainer-4", "trl-sft", "axolotl", "llama-factory", "ms-swift")
    for fw in trainers + ("unsloth",):
        assert _resolved(**mixed, framework=fw)["outputs_cast_fp32"] is True, fw
        assert "outputs_cast_fp32" in SOURCES[Framework(fw)], fw
        for other in ({"precision": "bf16-true"}, {"precision": "fp32"}):
            assert _resolved(**{**mixed, **other}, framework=fw)["outputs_cast_fp32"] is False
        zero3 = dict(mixed, framework=fw, num_gpus=2, sharding="zero3")
        assert _resolved(**zero3, sharding_engine="deepspeed")["outputs_cast_fp32"] is False
        assert _resolved(**zero3, sharding_engine="fsdp")["outputs_cast_fp32"] is True
    for fw in ("generic", "hf-custom-loop", "torchtune", "litgpt", "pytorch-loop"):
        assert _resolved(**mixed, framework=fw)["outputs_cast_fp32"] is False, fw
    # stated by the reader, it holds whatever the precision (a row read as bf16-true)
    stated = dict(mixed, framework="unsloth", precision="bf16-true", outputs_cast_fp32=True)
    assert _resolved(**stated)["outputs_cast_fp32"] is True


def test_deepspeed_zero3_gradient_partition_is_held_from_the_start():
    """DeepSpeed's ZeRO-3 allocates its flat gradient partition when the optimizer is set up
    (stage3.py ``grad_partitions_flat_buffer``): the forward's end holds it; FSDP's gradients
    appear with the backward; an offloaded optimizer keeps the partition in host memory. The
    replay holds the same buffer among its resident events."""
    from calc import states as st
    from calc.memory import activation_bytes, model_states, phase_components
    from calc.step_events import _Builder

    def parts(data):
        r = parse_estimate_request(data)
        reg = st.request_regime(r)
        s = model_states(r, st.param_layout(r), reg)
        return r, s, phase_components(r, reg, s, activation_bytes(r, reg))

    ds = {**ZERO3, "sharding_engine": "deepspeed"}
    req, states, phases = parts(ds)
    assert states.grads_all > 0 and phases["forward_end"]["gradients"] == states.grads_all
    assert parts(ZERO3)[2]["forward_end"]["gradients"] == 0
    assert parts({**ds, "cpu_offload": "optimizer"})[2]["forward_end"]["gradients"] == 0
    resident = _Builder(req).resident()
    assert resident[-1][0] == "alloc" and resident[-1][2] == states.grads_all


def test_unsloth_runs_the_allocator_with_expandable_segments():
    # unsloth_zoo 2026.8.13 __init__.py sets PYTORCH_ALLOC_CONF=expandable_segments:True on
    # import; every other profile leaves PyTorch's default
    base = {"model": "llama-3.2-1b", "method": "lora"}
    assert _resolved(**base, framework="unsloth")["expandable_segments"] is True
    assert "expandable_segments" in SOURCES[Framework.UNSLOTH]
    for fw in Framework:
        if fw is not Framework.UNSLOTH:
            assert _resolved(**base, framework=fw.value)["expandable_segments"] is False, fw
    assert (
        _resolved(**base, framework="unsloth", expandable_segments=False)["expandable_segments"]
        is False
    )


@pytest.mark.parametrize(
    "model, positions, layers, head_dim",
    [
        ("llama-3.1-8b", 32768, 32, 128),  # max_position_embeddings 131072: capped at 4 x 8192
        ("llama-2-7b", 4096, 32, 128),  # 4096 positions: all of them
    ],
)
def test_unsloth_keeps_16bit_rotary_tables_per_module(model, positions, layers, head_dim):
    # Unsloth's LlamaRotaryEmbedding: cos and sin, min(32768, max_position_embeddings) x head_dim,
    # 2 bytes each (the 16-bit default dtype transformers sets while it builds the model); one
    # module in the model, or one more in each attention layer before transformers 4.48
    table = positions * head_dim * 2
    req = {"model": model, "method": "qlora", "framework": "unsloth"}
    weights = {
        kind: estimate_dict({**req, "rope_cache_16bit": kind})["components"]["weights"]
        for kind in ("none", "model", "per-layer")
    }
    assert weights["model"] - weights["none"] == 2 * table
    assert weights["per-layer"] - weights["none"] == 2 * table * (layers + 1)
    # the unsloth profile's default is the one module of current transformers
    assert estimate_dict(req)["components"]["weights"] == weights["model"]
    # sharding leaves a buffer whole on every GPU
    sharded = {**req, "num_gpus": 2, "sharding": "zero3", "rope_cache_16bit": "per-layer"}
    sharded_none = {**sharded, "rope_cache_16bit": "none"}
    grown = (
        estimate_dict(sharded)["components"]["weights"]
        - estimate_dict(sharded_none)["components"]["weights"]
    )
    assert grown == 2 * table * (layers + 1)


def test_the_replay_holds_the_16bit_rotary_tables_as_tensors_of_their_own():
    """Each table is its own 8 MiB buffer in the replay (Llama 3.1 8B: 32768 x 128 x 2 bytes):
    the resident weights' reserved memory grows by the 66 tables, to the segment, and the
    weights' own tensors keep their sizes."""
    from calc import allocator as al
    from calc import step_events as se

    def resident(kind: str) -> tuple[int, list[int]]:
        req = parse_estimate_request(
            {
                "model": "llama-3.1-8b",
                "method": "qlora",
                "framework": "unsloth",
                "rope_cache_16bit": kind,
                "expandable_segments": False,
            }
        )
        events = se._Builder(req).resident()
        sizes = sorted(ev[2] for ev in events if ev[0] == "alloc")
        return al.replay(events, al.UNLIMITED, al.DEFAULT_CONFIG).peak_reserved_bytes, sizes

    table = 32768 * 128 * 2
    with_tables, sizes = resident("per-layer")
    without, base_sizes = resident("none")
    assert sizes.count(table) - base_sizes.count(table) == 66
    assert sorted(base_sizes + [table] * 66) == sizes
    # 8 MiB requests go two to a 20 MiB segment of the large pool (at most)
    assert 66 * table <= with_tables - without <= 33 * 20 * 2**20


def test_rope_cache_16bit_rejects_an_unknown_value():
    with pytest.raises(InputError) as err:
        parse_estimate_request({"model": "llama-3.1-8b", "rope_cache_16bit": "always"})
    assert "rope_cache_16bit" in str(err.value)
