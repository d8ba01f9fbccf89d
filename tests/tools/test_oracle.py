"""calc against the fake-tensor oracle on a pinned handful of setups.

Each setup traces two real training steps of a reduced-size transformers model (with
PEFT, checkpointing and AdamW as configured) under FakeTensorMode and asserts that
calc's allocated peak is within 2 % of the oracle's and each phase within 5 %, with the
request keys that describe the traced code (transformers 5.17: ``attention_grouped_kv``).
The full sweep is ``python -m benchmarks.oracle_sweep``.

Needs torch, transformers and peft (tools/requirements-measure.txt): skipped without them,
except where ``REQUIRE_ORACLE=1`` (``.ci/run`` sets it once they are installed), where a
missing library fails instead of skipping silently.
"""

from __future__ import annotations

import pytest

from oracle_deps import need_oracle_stack

need_oracle_stack()

from benchmarks.oracle_sweep import (  # noqa: E402
    compare,
    loaded_dtype,
    oracle_request,
    setups,
)
from calc.memory import estimate_dict  # noqa: E402
from tools.oracle import oracle_estimate  # noqa: E402

PINNED = (
    "llama/full",  # full fine-tuning, MHA, untied
    "llama3-gqa-tied/full-ckpt",  # GQA, tied embeddings, non-reentrant checkpointing
    "mistral/lora-ckpt-reentrant",  # LoRA with reentrant checkpointing
    "qwen3/lora-r16-fp32",  # peft's fp32 adapters on a bf16 base, q/k norms
    "gemma2/full",  # soft-capped logits, fp32 norm scaling, 4 norms
    "phi3/lora-r8-attn",  # fused qkv_proj adapter
    "qwen3_moe/full",  # MoE experts (grouped matmuls), router
    "qwen2/lora-eager",  # eager attention probabilities, 7:1 GQA
    "gemma3/lora-hf-custom-loop",  # calc's hf-custom-loop profile: fp32 adapters, logits kept
    "llama/qlora-ckpt",  # QLoRA (model of bitsandbytes' Linear4bit), checkpointing
    "qwen3/qlora-r16",  # QLoRA, fp32 adapters on uint8-packed weights, q/k norms
    "gemma2/qlora-prepare-kbit",  # peft's prepare_model_for_kbit_training: fp32 non-quantized
    "llama3-gqa-tied/lora-save-both-fp32",  # peft modules_to_save on a tied table, fp32 adapters
    "llama/qlora-save-both-ckpt",  # QLoRA with the embedding and output layer trained in full
    "llama3-gqa-tied/lora-save-both-tied",  # peft ensure_weight_tying: one copy for both tables
    "qwen3/qlora-kbit",  # prepare_model_for_kbit_training on the bf16 model: fp32 stream
    "gemma2/lora-loss16",  # a loop's cross-entropy on the soft-capped bf16 logits
    "llama/qlora-skip-attn-kbit",  # a 4-bit checkpoint's skip list: block 0's attention 16-bit
    "llama/lora-mixed",  # autocast's copy of the output layer freed before the blocks' backward
    "llama/full-b2-s512",  # the output layer's gradient held through the blocks' backward
    "llama/lora-eager-ckpt-s2048",  # eager attention's softmax moments, forward and backward
    "gemma2/lora-eager-s2048",  # the soft-capping's saved tanh beside them
    "falcon/lora-eager-ckpt-s2048",  # the model loop keeps the previous block's probabilities
)

_BY_ID = {s["id"]: s for s in setups()}


@pytest.mark.parametrize("setup_id", PINNED)
def test_calc_matches_oracle(setup_id):
    import contextlib

    from tools.oracle.load_dtype import loaded_in

    setup = _BY_ID[setup_id]
    # as the sweep traces it (run_oracle): a profile that loads its weights in 16 bits has the
    # model built in that dtype here, and the oracle's request leaves the keys off
    request = setup["request"]
    dtype = loaded_dtype(request)
    load = loaded_in(dtype) if dtype else contextlib.nullcontext()
    with load:
        oracle = oracle_estimate(dict(oracle_request(request), oracle=setup["oracle"]))
    row = compare(setup, oracle)
    assert abs(row["peak_error"]) <= 0.02, row
    assert set(row["phases"]) == {"forward_end", "backward", "optimizer_step"}
    for phase, values in row["phases"].items():
        assert abs(values["error"]) <= 0.05, (phase, row)


TRL_PINNED = (
    "llama/qlora-trl-sft",  # TRL's QLoRA: adapters cast to bf16, its fused LM head
    "qwen3/full-trl-sft",  # the fused head's fp32 weight-gradient accumulator
)


@pytest.mark.parametrize("setup_id", TRL_PINNED)
def test_calc_matches_trl_sft_code_path(setup_id):
    pytest.importorskip("trl")
    test_calc_matches_oracle(setup_id)


def test_oracle_response_speaks_the_estimate_vocabulary():
    setup = _BY_ID["llama/lora-r8-attn"]
    out = oracle_estimate(dict(setup["request"], oracle=setup["oracle"]))
    for key in (
        "peak_allocated_bytes",
        "peak_phase",
        "phases",
        "components",
        "params_total",
        "params_trainable",
    ):
        assert key in out
    assert out["peak_allocated_bytes"] == max(out["phases"].values())
    assert out["peak_phase"] in out["phases"]
    # LoRA: the base weights dominate, adapters and their states are separate components
    assert out["components"]["weights"] > out["components"]["lora_weights"] > 0
    # the model's published shape: trainable = 2 layers * 8 * (in + out) over q, k, v, o
    assert out["params_trainable"] == 2 * 8 * 4 * (512 + 512)


GPT2 = {
    "model_type": "gpt2",
    "n_embd": 512,
    "n_head": 8,
    "n_layer": 2,
    "n_positions": 1024,
    "vocab_size": 8000,
}


@pytest.mark.parametrize("precision", ["fp32", "bf16-true", "bf16-mixed"])
@pytest.mark.parametrize(
    "dropout", [{}, {"attn_pdrop": 0.0, "resid_pdrop": 0.0, "embd_pdrop": 0.0}]
)
def test_gpt2_eager_attention_dropout_and_softmax_dtype(precision, dropout):
    """GPT-2's eager attention takes its softmax without a dtype (fp32 under autocast, the
    scores' dtype otherwise) and drops the probabilities out with attn_pdrop (GPT2Config's
    default 0.1): calc within 2 % of the trace whatever the precision, with the config's
    dropouts and without them (the sweep's GPT-2 setups run one precision only)."""
    request = {
        "model": {"hf_config": {**GPT2, **dropout}},
        "method": "full",
        "attention": "eager",
        "precision": precision,
        "seq_len": 256,
        "micro_batch_size": 4,
        "gradient_checkpointing": False,
        "framework": "generic",
    }
    traced = oracle_estimate(dict(request))["peak_allocated_bytes"]
    assert estimate_dict(request)["peak_allocated_bytes"] == pytest.approx(traced, rel=0.02)


def test_unsupported_settings_are_refused_not_approximated():
    from tools.oracle import Unsupported

    setup = _BY_ID["llama/full"]
    for extra in (
        {"method": "qlora", "precision": "fp16-mixed"},
        {"attention": "flash"},
        {"sharding": "zero3", "num_gpus": 2},
        {"chunked_loss": True},
        {"framework": "torchtune"},
        {"framework": "hf-trainer-4"},  # transformers 4: its own venv
        {"chunked_loss": True, "framework": "hf-trainer"},  # only TRL's fused head is run
        {"method": "qlora", "qlora_prepare_kbit": True, "precision": "fp32"},
    ):
        with pytest.raises(Unsupported):
            oracle_estimate(dict(setup["request"], **extra))


LLAMA_SMALL = {
    "model_type": "llama",
    "hidden_size": 512,
    "intermediate_size": 1376,
    "num_hidden_layers": 2,
    "num_attention_heads": 8,
    "num_key_value_heads": 8,
    "vocab_size": 8000,
    "max_position_embeddings": 2048,
}


@pytest.mark.parametrize(
    "model, method, precision",
    [
        (GPT2, "full", "fp32"),  # a tied table: its output-layer gradient waits in the buffer
        (LLAMA_SMALL, "full", "bf16-mixed"),  # an untied table added into its stored gradient
        (LLAMA_SMALL, "lora", "fp32"),  # adapters only: no table
    ],
)
def test_gradients_zeroed_in_place_are_held_through_the_next_step(model, method, precision):
    """``zero_grad_set_to_none`` False (torch < 2.0, accelerate < 0.28): the oracle's second
    step runs with the first one's gradients zeroed in place, not freed. calc within 2 % of
    the trace, each phase within 5 %, and its peak above the freed loop's by what the trace
    adds, within a tenth of it."""
    request = {
        "model": {"hf_config": model},
        "method": method,
        "attention": "eager" if model is GPT2 else "sdpa",
        "precision": precision,
        "seq_len": 256,
        "micro_batch_size": 4,
        "gradient_checkpointing": False,
        "framework": "generic",
    }
    kept = {**request, "zero_grad_set_to_none": False}
    traced = {z: oracle_estimate(dict(r)) for z, r in (("freed", request), ("kept", kept))}
    calc = {"freed": estimate_dict(request), "kept": estimate_dict(kept)}
    assert calc["kept"]["peak_allocated_bytes"] == pytest.approx(
        traced["kept"]["peak_allocated_bytes"], rel=0.02
    )
    for phase, value in traced["kept"]["phases"].items():
        assert calc["kept"]["phases"][phase] == pytest.approx(value, rel=0.05), phase
    grown = {
        k: v["kept"]["peak_allocated_bytes"] - v["freed"]["peak_allocated_bytes"]
        for k, v in (("calc", calc), ("trace", traced))
    }
    assert grown["trace"] > 0
    assert grown["calc"] == pytest.approx(grown["trace"], rel=0.1)
