"""Time model: FLOPs per token (hand-derived), utilisation factors, and monotonicity in GPUs."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calc import presets, timing

LLAMA2_7B = presets.get_preset("llama-2-7b")
# Llama-2-7B: 6,738,415,616 params; embedding and untied lm_head are 32000 x 4096 = 131,072,000 each.
# Matmul params = total - embedding (a gather) = 6,607,343,616 (lm_head kept: it is a matmul).
N_7B = 6_607_343_616
ATTN_FWD_7B_2048 = 4 * 32 * 2048 * 32 * 128  # 4 * layers * seq * heads * head_dim = 1,073,741,824
LORA_QV_R8 = 4_194_304  # 32 layers * 2 matrices * 8 * (4096 + 4096)


def test_matmul_params_llama2_7b():
    assert timing.matmul_params(LLAMA2_7B) == N_7B


def test_matmul_params_moe_uses_active_experts():
    # Mixtral-8x7B holds 46.7B parameters, a token passes through 2 of 8 experts.
    mixtral = presets.get_preset("mixtral-8x7b")
    assert timing.matmul_params(mixtral) == 12_748_853_248
    assert timing.matmul_params(mixtral) < mixtral.params_total / 3


def test_matmul_params_tied_embedding_still_computes_head():
    small = presets.get_preset("llama-3.2-1b")  # tied word embeddings
    assert small.tie_word_embeddings
    head = small.vocab_size * small.hidden_size
    assert timing.matmul_params(small) == small.params_active - small.embedding_params + head


@pytest.mark.parametrize("attention, share", [("eager", 1.0), ("sdpa", 0.5), ("flash", 0.5)])
def test_attention_flops(attention, share):
    # fused causal kernels skip the blocks above the diagonal
    assert timing.attention_forward_flops_per_token(LLAMA2_7B, 2048, attention) == ATTN_FWD_7B_2048 * share


@pytest.mark.parametrize("method, checkpointing, trainable, expected_total", [
    # full: 3 * (2N + attn) = 6N + 12*L*s*d
    ("full", False, 6_738_415_616, 3 * (2 * N_7B + ATTN_FWD_7B_2048)),
    # full + checkpointing: one more forward = 8N + 16*L*s*d
    ("full", True, 6_738_415_616, 4 * (2 * N_7B + ATTN_FWD_7B_2048)),
    # LoRA: fwd 2N + 2A + attn, bwd 2N + 4A + 2 attn, no weight gradients for the frozen base
    ("lora", False, LORA_QV_R8, (2 * N_7B + 2 * LORA_QV_R8 + ATTN_FWD_7B_2048)
     + (2 * N_7B + 4 * LORA_QV_R8 + 2 * ATTN_FWD_7B_2048)),
    ("lora", True, LORA_QV_R8, 43_972_583_424),
    ("qlora", True, LORA_QV_R8, 43_972_583_424),  # same FLOPs; the slowdown is a separate factor
])
def test_training_flops_per_token(method, checkpointing, trainable, expected_total):
    fpt = timing.training_flops_per_token(LLAMA2_7B, method, 2048, checkpointing, trainable)
    assert fpt.total == expected_total


def test_full_fine_tuning_is_six_n_plus_attention():
    fpt = timing.training_flops_per_token(LLAMA2_7B, "full", 2048, False, 0)
    assert fpt.total == 42_865_287_168  # 6 * 6,607,343,616 + 12 * 32 * 2048 * 4096


@pytest.mark.parametrize("mb, seq, hidden, expected", [
    (1, 256, 4096, 0.5), (1, 768, 4096, 0.75), (4, 2048, 4096, 8192 / 8448), (2, 128, 4096, 0.5),
    (1, 1024, 2048, 0.5),  # half-saturation grows as 1/hidden^2: 256 * 4 = 1024 tokens
    (1, 64, 8192, 0.5),
])
def test_batch_saturation(mb, seq, hidden, expected):
    assert timing.batch_saturation(mb, seq, hidden) == pytest.approx(expected)


@pytest.mark.parametrize("cls, method, expected", [
    ("a100", "full", 0.55), ("a100", "lora", 0.495), ("hopper", "qlora", 0.36), ("gddr", "lora", 0.45),
])
def test_default_mfu(cls, method, expected):
    assert timing.default_mfu(cls, method) == pytest.approx(expected)


@pytest.mark.parametrize("n, sharding, link, method, expected", [
    (1, "zero3", "pcie", "full", 1.0),
    (2, "ddp", "nvlink", "full", 0.95),
    (4, "zero3", "pcie", "full", 0.50),
    (8, "zero3", "nvlink", "lora", 0.92),
    (16, "zero3", "nvlink", "full", 0.90 * 0.90),
])
def test_scaling_efficiency(n, sharding, link, method, expected):
    assert timing.scaling_efficiency(n, sharding, link, method) == pytest.approx(expected)


def _inputs(num_gpus=1, sharding="none", method="full", mb=1, seq=2048, gc=True, offload="none",
            attention="eager"):
    return timing.TimeInputs(arch=LLAMA2_7B, method=method, seq_len=seq, micro_batch_size=mb,
                             gradient_checkpointing=gc, trainable_params=LORA_QV_R8 if method != "full"
                             else LLAMA2_7B.params_total, num_gpus=num_gpus, sharding=sharding,
                             cpu_offload=offload, total_tokens=1e9, attention=attention)


def test_estimate_time_hand_computed():
    # 1e9 tokens, full FT without checkpointing, eager attention, A100 peak 312 TFLOP/s,
    # utilisation 0.5, micro-batch 1 x 2048, hidden 4096 (saturation 2048/2304):
    # time = 1e9 * 42,865,287,168 / (312e12 * 0.5 * 8/9)
    est = timing.estimate_time(_inputs(gc=False), 312e12, 0.5, "nvlink")
    expected_s = 1e9 * 42_865_287_168 / (312e12 * 0.5 * (2048 / 2304))
    assert est.compute_hours == pytest.approx(expected_s / 3600)
    assert est.tokens_per_second_per_gpu == pytest.approx(312e12 * 0.5 * (2048 / 2304) / 42_865_287_168)


def test_sdpa_halves_attention_work():
    eager = timing.estimate_time(_inputs(gc=False), 312e12, 0.5, "nvlink")
    sdpa = timing.estimate_time(_inputs(gc=False, attention="sdpa"), 312e12, 0.5, "nvlink")
    assert sdpa.flops_per_token.total == 42_865_287_168 - 3 * ATTN_FWD_7B_2048 // 2


def test_qlora_factor_applies_only_to_qlora():
    lora = timing.estimate_time(_inputs(method="lora"), 312e12, 0.5, "nvlink")
    qlora = timing.estimate_time(_inputs(method="qlora"), 312e12, 0.5, "nvlink")
    assert lora.qlora_speed_factor == 1.0
    assert qlora.compute_hours == pytest.approx(lora.compute_hours / timing.QLORA_SPEED_FACTOR)
    custom = timing.estimate_time(_inputs(method="qlora"), 312e12, 0.5, "nvlink", qlora_speed_factor=1.0)
    assert custom.compute_hours == pytest.approx(lora.compute_hours)


def test_cpu_offload_slows_full_fine_tuning():
    plain = timing.estimate_time(_inputs(), 312e12, 0.5, "nvlink")
    offload = timing.estimate_time(_inputs(offload="optimizer"), 312e12, 0.5, "nvlink")
    assert offload.compute_hours == pytest.approx(plain.compute_hours / 0.8)


@settings(max_examples=200, deadline=None)
@given(n1=st.integers(1, 64), n2=st.integers(1, 64),
       sharding=st.sampled_from(["none", "ddp", "zero1", "zero2", "zero3"]),
       method=st.sampled_from(["full", "lora", "qlora"]),
       nvlink_max=st.sampled_from([0, 2, 8]))
def test_more_gpus_never_slower(n1, n2, sharding, method, nvlink_max):
    """The compute-bound part never gets slower with more GPUs (same card, same setup);
    the link may drop from NVLink to PCIe as the count grows past what the link joins."""
    lo, hi = sorted((n1, n2))

    def hours(n):  # as calc.gpus.Gpu.link_for: a board of 8 keeps NVLink, a bridge joins 2
        link = "nvlink" if nvlink_max == 8 or (nvlink_max and n <= nvlink_max) else "pcie"
        return timing.estimate_time(_inputs(num_gpus=n, sharding=sharding, method=method),
                                    312e12, 0.5, link).compute_hours

    assert hours(hi) <= hours(lo) * (1 + 1e-12)


def test_throughput_validation_accounts_for_every_row():
    """Every row of the throughput set is either compared or listed with its reason."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "validate_throughput.py"
    spec = importlib.util.spec_from_file_location("validate_throughput", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = module.compare()
    rows = module.load_rows()
    seen = [r["row_id"] for r in result["rows"]] + [r["row_id"] for r in result["not_covered"]]
    assert sorted(seen) == sorted(rows)
    assert all(r["reason"] != "not mapped" for r in result["not_covered"])
    assert len(result["rows"]) >= 50
    for r in result["rows"]:
        assert r["predicted_tokens_per_second_per_gpu"] > 0
