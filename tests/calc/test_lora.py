"""LoRA trainable parameters and adapted modules."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from calc.errors import InputError
from calc.hf_config import arch_from_hf_config
from calc.lora import ALL_LINEAR, PER_EXPERT_MODULES, adapted_linears, adapter_params
from calc.memory import estimate_dict
from calc.presets import get_preset
from calc.request import parse_estimate_request
from calc.states import param_layout, quantized_weight_params


def lora_trainable_params(
    arch, rank: int, targets: object = ALL_LINEAR, layout: str = PER_EXPERT_MODULES
) -> int:
    """The adapters' parameters as calc.states.param_layout counts them."""
    return adapter_params(adapted_linears(arch, targets, layout), rank)


GPT2 = {"model_type": "gpt2", "n_embd": 768, "n_head": 12, "n_layer": 12, "vocab_size": 50257}

CASES = [
    # LitGPT: 32 * 2 * 8 * (4096 + 4096)
    ("llama-2-7b", 8, ("q_proj", "v_proj"), 4_194_304),
    # peft's print_trainable_parameters for Llama-2-7B, r=16, all-linear:
    # 32 * 16 * (4*(4096+4096) + 2*(4096+11008) + (11008+4096))
    ("llama-2-7b", 16, "all-linear", 39_976_960),
    # GQA: k/v are 4096 -> 1024. 32 * 8 * ((4096+4096) + (4096+1024))
    ("llama-3.1-8b", 8, ("q_proj", "v_proj"), 3_407_872),
    # Mixtral all-linear, every expert adapted and the router too:
    # 32 * 8 * (2*(4096+4096) + 2*(4096+1024) + 8*3*(4096+14336) + (4096+8))
    ("mixtral-8x7b", 8, "all-linear", 32 * 8 * (2 * 8192 + 2 * 5120 + 24 * 18432 + 4104)),
    # Phi-3 fused modules: qkv 3072 -> 9216, gate_up 3072 -> 16384
    ("phi-3-mini", 16, ("qkv_proj", "gate_up_proj"), 32 * 16 * ((3072 + 9216) + (3072 + 16384))),
]


@pytest.mark.parametrize("preset_id,rank,targets,expected", CASES)
def test_lora_params(preset_id, rank, targets, expected):
    assert lora_trainable_params(get_preset(preset_id), rank, targets) == expected
    request = parse_estimate_request(
        {
            "model": preset_id,
            "method": "lora",
            "lora_rank": rank,
            "lora_targets": list(targets) if isinstance(targets, tuple) else targets,
            # the experts as transformers 4 stores them, one module each (no profile)
            "framework": "generic",
        }
    )
    assert param_layout(request).adapter == expected


def test_gpt2_c_proj_adapts_both_modules():
    arch = arch_from_hf_config(GPT2)
    adapted = adapted_linears(arch, ("c_proj",))
    assert [(a.d_in, a.d_out) for a in adapted] == [(768, 768), (3072, 768)]
    assert lora_trainable_params(arch, 4, ["c_proj"]) == 12 * 4 * ((768 + 768) + (3072 + 768))


def test_qwen_moe_gate_proj_adapts_experts_and_shared_expert():
    arch = get_preset("qwen1.5-moe-a2.7b")
    adapted = adapted_linears(arch, ("gate_proj",))
    assert [(a.count, a.active, a.d_out) for a in adapted] == [(60, 4, 1408), (1, 1, 5632)]
    assert sum(a.params(2) for a in adapted) == 2 * (60 * (2048 + 1408) + 2048 + 5632)
    # "gate" is the router only, never gate_proj or shared_expert_gate
    assert [a.name for a in adapted_linears(arch, ("gate",))] == ["gate"]


def test_all_linear_excludes_lm_head_and_covers_every_block_linear():
    arch = get_preset("llama-2-7b")
    names = [a.name for a in adapted_linears(arch, "all-linear")]
    assert names == list(arch.linear_names())
    assert "lm_head" not in names


@pytest.mark.parametrize(
    "targets,code,value",
    [
        (("lm_head",), "unknown_lora_target", "lm_head"),
        (("q_proj", "c_attn"), "unknown_lora_target", "c_attn"),
        ((), "wrong_type", ()),
        (None, "wrong_type", None),
        ((3,), "wrong_type", 3),
    ],
)
def test_bad_targets(targets, code, value):
    with pytest.raises(InputError) as err:
        adapted_linears(get_preset("llama-2-7b"), targets)
    assert (err.value.code, err.value.field, err.value.value) == (code, "lora_targets", value)


@pytest.mark.parametrize(
    "rank,code",
    [(0, "not_positive"), (-1, "not_positive"), (1.5, "not_integer"), (True, "not_integer")],
)
def test_bad_rank(rank, code):
    with pytest.raises(InputError) as err:
        parse_estimate_request({"model": "llama-2-7b", "method": "lora", "lora_rank": rank})
    assert err.value.code == code and err.value.field == "lora_rank"


@given(st.integers(1, 1024), st.integers(1, 1024))
def test_linear_in_rank(r1, r2):
    arch = get_preset("llama-2-7b")
    a = lora_trainable_params(arch, r1, "all-linear")
    b = lora_trainable_params(arch, r2, "all-linear")
    assert a * r2 == b * r1
    assert (a <= b) == (r1 <= r2)


@given(
    st.lists(
        st.sampled_from(
            ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
        ),
        min_size=1,
        unique=True,
    )
)
def test_subset_never_exceeds_all_linear(targets):
    arch = get_preset("llama-3.1-8b")
    assert (
        0 < lora_trainable_params(arch, 8, targets) <= lora_trainable_params(arch, 8, "all-linear")
    )


# ---- mixture of experts: attention only vs experts, by hand and against peft --------------------

TINY_GPT_OSS = {
    "model_type": "gpt_oss",
    "hidden_size": 64,
    "intermediate_size": 48,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "num_local_experts": 4,
    "num_experts_per_tok": 2,
    "vocab_size": 100,
    "tie_word_embeddings": False,
}
TINY_LLAMA4 = {
    "model_type": "llama4_text",
    "hidden_size": 64,
    "intermediate_size": 32,
    "intermediate_size_mlp": 96,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "num_local_experts": 4,
    "num_experts_per_tok": 1,
    "vocab_size": 100,
}
ATTN = ("q_proj", "k_proj", "v_proj", "o_proj")
EXPERTS = ("experts.gate_up_proj", "experts.down_proj")


def test_gpt_oss_attention_only_vs_experts_by_hand():
    arch = arch_from_hf_config(TINY_GPT_OSS)
    r = 4
    # q 64->64, k 64->32, v 64->32, o 64->64: r * (128 + 96 + 96 + 128) per layer
    attn = r * (128 + 96 + 96 + 128)
    assert lora_trainable_params(arch, r, ATTN) == 2 * attn == 3584
    # every expert its own A and B: gate_up 64 -> 96, down 48 -> 64, 4 experts
    experts = 4 * r * ((64 + 96) + (48 + 64))
    assert lora_trainable_params(arch, r, EXPERTS) == 2 * experts == 8704
    # all-linear is attention only: the experts are 3-D parameters and the router a custom module
    assert lora_trainable_params(arch, r, "all-linear") == 2 * attn
    # a token passes through its top-2 experts' adapters only
    active = sum(a.active * r * (a.d_in + a.d_out) for a in adapted_linears(arch, EXPERTS))
    assert active == 2 * r * ((64 + 96) + (48 + 64))
    assert {a.name: (a.count, a.active) for a in adapted_linears(arch, EXPERTS)} == {
        "experts.gate_up_proj": (4, 2),
        "experts.down_proj": (4, 2),
    }


def test_llama4_all_linear_adds_shared_expert_and_router_not_experts():
    arch = arch_from_hf_config(TINY_LLAMA4)
    r = 4
    attn = r * (128 + 96 + 96 + 128)
    router = r * (64 + 4)
    shared = r * (2 * (64 + 32) + (32 + 64))
    assert lora_trainable_params(arch, r, "all-linear") == 2 * (attn + router + shared)
    # "down_proj" names the shared expert's nn.Linear; the routed experts are reached only
    # through their parameter name, as peft's target_parameters
    assert [a.count for a in adapted_linears(arch, ("down_proj",))] == [1]
    assert lora_trainable_params(arch, r, EXPERTS) == 2 * 4 * r * ((64 + 64) + (32 + 64))


@pytest.fixture(scope="module")
def hf_stack():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    peft = pytest.importorskip("peft")
    return torch, transformers, peft


def _peft_trainable(hf_stack, cfg, **lora):
    torch, transformers, peft = hf_stack
    torch.manual_seed(0)
    conf = transformers.AutoConfig.for_model(**cfg)
    model = transformers.AutoModelForCausalLM.from_config(conf)
    model = peft.get_peft_model(model, peft.LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, **lora))
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


@pytest.mark.parametrize(
    "cfg, lora, targets",
    [
        (TINY_GPT_OSS, {"target_modules": list(ATTN)}, ATTN),
        (TINY_GPT_OSS, {"target_modules": "all-linear"}, "all-linear"),
        (TINY_GPT_OSS, {"target_parameters": list(EXPERTS)}, EXPERTS),
        (TINY_LLAMA4, {"target_modules": "all-linear"}, "all-linear"),
        (TINY_LLAMA4, {"target_parameters": list(EXPERTS)}, EXPERTS),
        (
            TINY_LLAMA4,
            {"target_modules": ["gate_proj", "up_proj", "down_proj"]},
            ("gate_proj", "up_proj", "down_proj"),
        ),
    ],
    ids=[
        "gpt_oss-attn",
        "gpt_oss-all-linear",
        "gpt_oss-experts",
        "llama4-all-linear",
        "llama4-experts",
        "llama4-shared-expert",
    ],
)
def test_moe_trainable_counts_equal_peft(hf_stack, cfg, lora, targets):
    """peft 0.21 on transformers 5.17 models built from the same config (CPU, tiny)."""
    assert _peft_trainable(hf_stack, cfg, **lora) == lora_trainable_params(
        arch_from_hf_config(cfg), 4, targets
    )


TINY_QWEN3_MOE = {
    "model_type": "qwen3_moe",
    "hidden_size": 64,
    "intermediate_size": 128,
    "moe_intermediate_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "num_experts": 4,
    "num_experts_per_tok": 2,
    "vocab_size": 100,
}
TINY_QWEN2_MOE = {
    "model_type": "qwen2_moe",
    "hidden_size": 64,
    "intermediate_size": 128,
    "moe_intermediate_size": 32,
    "shared_expert_intermediate_size": 48,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "num_experts": 4,
    "num_experts_per_tok": 2,
    "vocab_size": 100,
}
TINY_MIXTRAL = {
    "model_type": "mixtral",
    "hidden_size": 64,
    "intermediate_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "num_local_experts": 4,
    "num_experts_per_tok": 2,
    "vocab_size": 100,
}
MLP = ["gate_proj", "up_proj", "down_proj"]


def test_fused_3d_layout_by_hand():
    """transformers 5 experts (3-D tensors): gate + up are one adapter of rank 2r, the router
    one of rank r; per-expert modules stay the default."""
    arch = arch_from_hf_config(TINY_QWEN3_MOE)
    r, h, i, e = 4, 64, 32, 4
    fused = {a.name: a for a in adapted_linears(arch, "all-linear", "fused-3d")}
    assert fused["experts.gate_up_proj"].params(r) == e * 2 * r * (h + 2 * i)
    assert fused["experts.down_proj"].params(r) == e * r * (i + h)
    assert fused["gate"].params(r) == r * (h + e)
    assert all(fused[n].fused for n in ("experts.gate_up_proj", "experts.down_proj", "gate"))
    assert not fused["q_proj"].fused and "gate_proj" not in fused
    per_expert = lora_trainable_params(arch, r, "all-linear")
    assert per_expert == lora_trainable_params(arch, r, "all-linear", "per-expert-modules")
    # the known difference of the per-expert count: 2 r E I per block
    assert (
        lora_trainable_params(arch, r, "all-linear", "fused-3d") - per_expert == 2 * 2 * r * e * i
    )
    # Qwen2-MoE is not converted by peft 0.21: its shared expert keeps its adapters, the
    # 3-D experts and the router get none
    qwen2 = {
        a.name: a
        for a in adapted_linears(arch_from_hf_config(TINY_QWEN2_MOE), "all-linear", "fused-3d")
    }
    assert {n: a.count for n, a in qwen2.items() if a.role != "attn"} == {
        "gate_proj": 1,
        "up_proj": 1,
        "down_proj": 1,
        "shared_expert_gate": 1,
    }
    # a dense model has no experts to fuse
    dense = get_preset("llama-3.1-8b")
    assert lora_trainable_params(dense, 8, "all-linear", "fused-3d") == lora_trainable_params(
        dense, 8
    )


@pytest.mark.parametrize(
    "targets, missing", [(["gate_proj", "down_proj"], "up_proj"), (["w1"], "w3")]
)
def test_fused_3d_refuses_half_of_gate_up(targets, missing):
    """peft raises ValueError when only one of the fused pair is named; calc a coded error."""
    arch = arch_from_hf_config(TINY_MIXTRAL if targets == ["w1"] else TINY_QWEN3_MOE)
    with pytest.raises(InputError) as info:
        adapted_linears(arch, targets, "fused-3d")
    assert (info.value.code, info.value.field, info.value.value) == (
        "fused_target_incomplete",
        "lora_targets",
        missing,
    )


@pytest.mark.parametrize(
    "cfg, lora, targets",
    [
        (TINY_QWEN3_MOE, {"target_modules": list(ATTN)}, ATTN),
        (TINY_QWEN3_MOE, {"target_modules": "all-linear"}, "all-linear"),
        (TINY_QWEN3_MOE, {"target_modules": MLP}, MLP),
        (TINY_QWEN2_MOE, {"target_modules": "all-linear"}, "all-linear"),
        (TINY_QWEN2_MOE, {"target_modules": MLP}, MLP),
        (TINY_MIXTRAL, {"target_modules": "all-linear"}, "all-linear"),
        (TINY_MIXTRAL, {"target_modules": ["gate", "w1", "w3"]}, ("gate", "w1", "w3")),
    ],
    ids=[
        "qwen3_moe-attn",
        "qwen3_moe-all-linear",
        "qwen3_moe-mlp",
        "qwen2_moe-all-linear",
        "qwen2_moe-mlp",
        "mixtral-all-linear",
        "mixtral-router-gate-up",
    ],
)
def test_fused_3d_trainable_counts_equal_peft(hf_stack, cfg, lora, targets):
    """peft 0.21 on transformers 5.17 converts transformers-4 expert targets to the 3-D
    expert tensors (``_convert_peft_config_moe``): calc's ``fused-3d`` layout counts exactly
    what it trains."""
    assert _peft_trainable(hf_stack, cfg, **lora) == lora_trainable_params(
        arch_from_hf_config(cfg), 4, targets, "fused-3d"
    )


@pytest.mark.parametrize(
    "setup_id",
    [
        "qwen3_moe/lora-all-linear-fused",
        "qwen3_moe/lora-all-linear-fused-ckpt",
        "qwen3_moe/lora-all-linear-fused-bf16",
        "qwen3_moe/lora-mlp-fused-bf16",
        "mixtral/lora-ckpt",
        "mixtral/qlora-ckpt",
    ],
)
def test_fused_3d_peak_agrees_with_the_oracle(hf_stack, setup_id):
    """The merged W + B·A of each expert stack and the 16-bit factor copies (calc.memory
    ``merged_expert_bytes``), traced by the fake-tensor oracle: trainable count exact,
    allocated peak within 2 %."""
    from benchmarks.oracle_sweep import compare, oracle_request, setups
    from tools.oracle import oracle_estimate

    setup = {s["id"]: s for s in setups()}[setup_id]
    oracle = oracle_estimate(dict(oracle_request(setup["request"]), oracle=setup["oracle"]))
    row = compare(setup, oracle)
    assert estimate_dict(setup["request"])["params_trainable"] == oracle["params_trainable"]
    assert abs(row["peak_error"]) <= 0.02, row


def test_fused_3d_merged_stack_gradient_in_the_backward_by_hand():
    """Each merged expert stack gets a gradient of its own size in the block's backward: the
    down projection's (4 experts x 32 x 64) beside both merged stacks, then gate/up's (4 x 64
    x 64, once the down stack is freed and its adapters have their gradients). The block's
    own adapters have no gradient yet at that moment."""
    from dataclasses import replace

    from calc.memory import merged_expert_grad_bytes
    from calc.states import request_regime

    req = parse_estimate_request(
        {
            "model": {"hf_config": TINY_MIXTRAL},
            "method": "lora",
            "lora_rank": 4,
            "lora_targets": "all-linear",
            "moe_expert_layout": "fused-3d",
            "gradient_checkpointing": True,
            "framework": "generic",
        }
    )
    down, gate_up = 4 * 32 * 64 * 2, 4 * 64 * 64 * 2
    down_grads = 4 * 4 * (32 + 64) * 2  # rank 4 on each of 4 experts, bf16
    # one block's adapters: q, k, v, o (rank 4), the router (rank 4), gate/up (rank 8), down
    attention = 4 * (64 + 64) * 2 + 4 * (64 + 32) * 2
    block = attention + 4 * (64 + 4) + 4 * 8 * (64 + 64) + 4 * 4 * (32 + 64)
    stack_grad, block_grads = merged_expert_grad_bytes(req, request_regime(req))
    assert stack_grad == max(down, gate_up - down + down_grads) == gate_up - down + down_grads
    assert block_grads == 2 * block
    attn_only = replace(
        req,
        lora_targets=parse_estimate_request(
            {"model": "llama-3.1-8b", "lora_targets": ["q_proj", "o_proj"]}
        ).lora_targets,
    )
    assert merged_expert_grad_bytes(attn_only, request_regime(attn_only)) == (0, 0)


@pytest.mark.parametrize(
    "lora, targets",
    [
        ({"target_modules": "all-linear"}, "all-linear"),
        ({"target_parameters": list(EXPERTS)}, EXPERTS),
        (
            {"target_modules": ["gate_proj", "up_proj", "down_proj"]},
            ("gate_proj", "up_proj", "down_proj"),
        ),
    ],
    ids=["all-linear", "experts", "mlp-names"],
)
def test_mixed_stack_trainable_counts_equal_peft(hf_stack, lora, targets):
    """Llama 4 Maverick's layout (dense and MoE blocks alternating), tiny: each adapter counted
    in the blocks that hold its module."""
    cfg = {**TINY_LLAMA4, "num_hidden_layers": 4, "interleave_moe_layer_step": 2}
    arch = arch_from_hf_config(cfg)
    assert dict(arch.block_counts) == {"moe": 2, "dense": 2}
    assert _peft_trainable(hf_stack, cfg, **lora) == lora_trainable_params(arch, 4, targets)


def test_fused_3d_qlora_leaves_the_experts_in_16_bits():
    """transformers 5.17 stores Qwen3-MoE's routed experts as 3-D parameters, which
    bitsandbytes' replace_with_bnb_linear (nn.Linear / Conv1D only) does not quantise:
    48 layers x 128 experts x 3 matrices x 2048 x 768 = 28,991,029,248 weights stay bf16,
    every other linear is NF4 as before, and LoRA (nothing quantised) does not change."""
    from calc.request import parse_estimate_request
    from calc.states import NF4_DOUBLE_QUANT_BITS

    experts = 48 * 128 * 3 * 2048 * 768
    base = {"model": "qwen3-30b-a3b", "method": "qlora", "framework": "generic"}
    modules = parse_estimate_request(base).model
    fused = parse_estimate_request({**base, "moe_expert_layout": "fused-3d"}).model
    assert quantized_weight_params(modules) - quantized_weight_params(fused) == experts
    w_modules = estimate_dict(base)["components"]["weights"]
    w_fused = estimate_dict({**base, "moe_expert_layout": "fused-3d"})["components"]["weights"]
    # each expert weight goes from NF4 (double quantised by default) to 2 bytes
    assert w_fused - w_modules == pytest.approx(experts * (2 - NF4_DOUBLE_QUANT_BITS / 8), rel=1e-6)
    lora = {"model": "qwen3-30b-a3b", "method": "lora", "framework": "generic"}
    assert (
        estimate_dict({**lora, "moe_expert_layout": "fused-3d"})["components"]["weights"]
        == estimate_dict(lora)["components"]["weights"]
    )
    dense = {"model": "llama-3.1-8b", "method": "qlora", "framework": "generic"}
    assert (
        estimate_dict({**dense, "moe_expert_layout": "fused-3d"})["components"]["weights"]
        == estimate_dict(dense)["components"]["weights"]
    )
    # the default library, the HF Trainer on transformers 5, stores the experts as 3-D tensors
    default = {"model": "qwen3-30b-a3b", "method": "qlora"}
    assert estimate_dict(default)["components"]["weights"] == w_fused


def test_kept_adapters_answer_as_the_count_does():
    """adapted_linears keeps its answer per model, targets and layout (a plan asks hundreds
    of times): a list of names answers as the same tuple does, a bad target still raises,
    and two models that differ get their own adapters."""
    from calc.lora import _adapted

    arch = get_preset("llama-3.1-8b")
    names = ["q_proj", "v_proj"]
    assert adapted_linears(arch, names) == adapted_linears(arch, tuple(names))
    assert adapted_linears(arch, names) == _adapted(arch, tuple(names), PER_EXPERT_MODULES)
    assert len(adapted_linears(arch, ALL_LINEAR)) == 7 != len(adapted_linears(arch, names))
    with pytest.raises(InputError):
        adapted_linears(arch, ["no_such_proj"])
    with pytest.raises(InputError):
        adapted_linears(arch, [["q_proj"]])  # unhashable, and not a name
    small = get_preset("llama-3.2-1b")
    assert adapted_linears(small, ALL_LINEAR)[0].d_in != adapted_linears(arch, ALL_LINEAR)[0].d_in
