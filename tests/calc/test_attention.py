"""Attention as PyTorch dispatches it: the SDPA backend chosen and the FLOPs it computes,
counted by hand."""

from __future__ import annotations

import pytest

from calc.attention import (
    AttentionKernel,
    attention_kernel,
    compute_capability,
    request_fraction,
    sdpa_backend,
)
from calc.errors import InputError
from calc.fields import Sharding
from calc.flops import attention_forward_flops_per_token
from calc.request import parse_estimate_request
from calc.timing import counts

SM80, SM75, SM86, SM90 = (8, 0), (7, 5), (8, 6), (9, 0)


@pytest.mark.parametrize(
    ("dtype", "mask", "head_dim", "cc", "expected"),
    [
        # sm80 (A100): flash without a mask tensor, memory-efficient with one
        ("bf16", "causal", 64, SM80, "flash"),
        ("bf16", "causal", 128, SM80, "flash"),
        ("bf16", "causal", 256, SM80, "flash"),
        ("bf16", "padding", 64, SM80, "efficient"),
        ("bf16", "padding", 128, SM80, "efficient"),
        ("bf16", "padding", 256, SM80, "efficient"),
        # fp32: flash takes fp16/bf16 only; memory-efficient takes fp32 on any card >= sm50
        ("fp32", "causal", 64, SM80, "efficient"),
        ("fp32", "causal", 128, SM80, "efficient"),
        ("fp32", "padding", 256, SM80, "efficient"),
        ("fp32", "causal", 128, SM75, "efficient"),
        ("fp32", "padding", 64, SM75, "efficient"),
        # sm75 (T4): no flash (sm80+), and memory-efficient has no bf16 below sm80: math
        ("bf16", "causal", 64, SM75, "math"),
        ("bf16", "causal", 128, SM75, "math"),
        ("bf16", "padding", 256, SM75, "math"),
        ("fp16", "causal", 128, SM75, "efficient"),
        ("fp16", "padding", 256, SM75, "efficient"),
        # sm86 training: flash refuses head_dim in (192, 224]; memory-efficient runs it
        ("bf16", "causal", 208, SM86, "efficient"),
        ("bf16", "causal", 256, SM86, "flash"),
        # sm90: cuDNN comes first (check_prefer_cudnn_attention) and accepts the mask
        ("bf16", "causal", 128, SM90, "cudnn"),
        ("bf16", "padding", 128, SM90, "cudnn"),
        ("fp32", "padding", 128, SM90, "efficient"),
        # head_dim not a multiple of the gemm alignment (8 for bf16 on tensor cores): math
        ("bf16", "padding", 100, SM80, "math"),
    ],
)
def test_backend_grid(dtype: str, mask: str, head_dim: int, cc: tuple[int, int], expected: str):
    assert sdpa_backend(dtype=dtype, mask=mask, head_dim=head_dim, capability=cc) == expected


@pytest.mark.parametrize(
    ("head_dim", "value_dim", "cc", "cudnn_first", "expected"),
    [
        # multi-head latent attention (q/k 192, v 128): flash wants one width for q, k and v
        (192, 128, SM80, True, "efficient"),
        (192, 128, SM90, True, "cudnn"),  # cuDNN's backward takes (192, 128) on sm90 / sm10x
        (192, 128, SM90, False, "efficient"),
        # equal widths above 128 that cuDNN's backward refuses on sm90: flash runs them
        (160, 160, SM90, True, "flash"),
        (192, 192, SM90, True, "flash"),
        (256, 256, SM90, True, "cudnn"),
    ],
)
def test_backend_for_value_heads_and_cudnn_backward(head_dim, value_dim, cc, cudnn_first, expected):
    """sdp_utils.cpp at 001f694a: check_head_dim_size_flash (q, k, v of one width),
    check_head_dim_size_mem_efficient (q = k, each aligned), check_cudnn_d256_bprop_head_dim
    (on sm90 / sm10x the backward takes widths up to 128, (192, 128) or (256, 256))."""
    got = sdpa_backend(
        dtype="bf16",
        mask="causal",
        head_dim=head_dim,
        capability=cc,
        cudnn_first=cudnn_first,
        value_head_dim=value_dim if value_dim != head_dim else 0,
    )
    assert got == expected


def test_deepseek_v3_prices_its_mla_on_the_kernel_sdpa_picks():
    """DeepSeek V3's q/k heads of 192 and v heads of 128 reach SDPA as they are (transformers
    pads v only for flash_attention_2): memory-efficient on an A100, cuDNN on an H100."""
    from calc.timing import attention_dispatch
    from calc.gpus import get_gpu

    req = parse_estimate_request({"model": "deepseek-v3", "method": "lora", "attention": "sdpa"})
    assert attention_dispatch(req, get_gpu("a100-80gb-sxm"))[0] == "efficient"
    assert attention_dispatch(req, get_gpu("h100-sxm"))[0] == "cudnn"


def test_flash_with_dropout_and_large_head_on_sm86():
    # (224, 256] with dropout: flash refuses the backward on sm86-89
    got = sdpa_backend(dtype="bf16", mask="causal", head_dim=256, capability=SM86, dropout=0.1)
    assert got == "efficient"


def test_compute_capability_of_catalogue_cards():
    assert compute_capability("ampere", "a100-80gb-sxm") == (8, 0)
    assert compute_capability("ampere", "rtx-3090") == (8, 6)
    assert compute_capability("turing", "t4") == (7, 5)
    assert compute_capability("hopper", "h100-sxm") == (9, 0)
    assert compute_capability("blackwell", "b200") == (10, 0)
    assert compute_capability("blackwell", "rtx-5090") == (12, 0)
    assert compute_capability("cdna3", "mi300x") is None


def test_kernel_flops_per_layer_hand_count():
    # one layer, L = 4096, 32 heads of 128: QK^T and AV, 2 FLOPs per multiply-add, forward
    # full square: 2 matmuls * 2 * L * heads * head_dim = 4 * 4096 * 32 * 128 = 67,108,864
    full = 67_108_864
    causal = attention_kernel(
        attention="sdpa", dtype="bf16", mask="causal", head_dim=128, capability=SM80
    )
    padded = attention_kernel(
        attention="sdpa", dtype="bf16", mask="padding", head_dim=128, capability=SM80
    )
    assert causal.backend == "flash" and padded.backend == "efficient"
    assert causal.forward_flops_per_token(4096, 32, 128) == full // 2
    assert padded.forward_flops_per_token(4096, 32, 128) == full
    # fused kernels materialise no scores; the math backend writes and reads them 4 times
    assert padded.score_bytes_per_token(4096, 32, 2) == 0.0
    math = attention_kernel(
        attention="sdpa", dtype="bf16", mask="causal", head_dim=128, capability=SM75
    )
    assert math == AttentionKernel("math", 1.0, True, True)
    assert math.score_bytes_per_token(4096, 32, 2) == 4 * 32 * 4096 * 2


def test_request_fraction_by_implementation():
    assert request_fraction("sdpa", "causal") == 0.5
    assert request_fraction("sdpa", "padding") == 1.0
    assert request_fraction("eager", "causal") == 1.0
    assert request_fraction("flash", "padding") == 0.5  # flash_attention_2 unpads the batch


def test_model_attention_flops_padding_is_the_whole_square():
    req = parse_estimate_request({"model": "llama-3.1-8b", "seq_len": 4096})
    arch = req.model
    # 32 layers * 67,108,864 = 2,147,483,648 for the whole square, forward, per token
    assert attention_forward_flops_per_token(arch, 4096, "sdpa", "padding") == 2_147_483_648
    assert attention_forward_flops_per_token(arch, 4096, "sdpa", "causal") == 1_073_741_824
    assert attention_forward_flops_per_token(arch, 4096, "sdpa") == 1_073_741_824


def test_padding_mask_adds_the_skipped_half_to_the_step():
    base = {"model": "llama-3.1-8b", "seq_len": 4096}
    causal = counts(parse_estimate_request(base), Sharding.NONE).flops
    padded = counts(parse_estimate_request({**base, "attention_mask": "padding"}), Sharding.NONE)
    # forward + backward (2x) + recompute (checkpointing on by default): 4 x 1,073,741,824
    assert padded.flops.total - causal.total == 4 * 1_073_741_824
    # eager already computes the square: the mask changes nothing there
    eager = {**base, "attention": "eager"}
    assert (
        counts(parse_estimate_request(eager), Sharding.NONE).flops.total
        == counts(
            parse_estimate_request({**eager, "attention_mask": "padding"}), Sharding.NONE
        ).flops.total
    )


def test_attention_mask_bad_value_is_a_coded_error():
    with pytest.raises(InputError) as err:
        parse_estimate_request({"model": "llama-3.1-8b", "attention_mask": "full"})
    assert err.value.code == "unknown_value"
    assert err.value.field == "attention_mask"


def test_profiles_set_the_mask_on_padded_sdpa_batches_only():
    stats = {"length_stats": {"mean": 500, "max": 2048}, "seq_len": 2048}
    hf = {"model": "llama-3.1-8b", "framework": "hf-trainer"}
    assert parse_estimate_request(hf).attention_mask.value == "causal"
    assert parse_estimate_request({**hf, **stats}).attention_mask.value == "padding"
    packed = {**hf, **stats, "batching": "packed"}
    assert parse_estimate_request(packed).attention_mask.value == "causal"
    flash = {**hf, **stats, "attention": "flash"}
    assert parse_estimate_request(flash).attention_mask.value == "causal"
    for fw in ("hf-custom-loop", "hf-trainer-4"):
        req = parse_estimate_request({**hf, **stats, "framework": fw})
        assert req.attention_mask.value == "padding"
    for fw in ("torchtune", "litgpt", "generic"):
        req = parse_estimate_request({**hf, **stats, "framework": fw})
        assert req.attention_mask.value == "causal"
    # the request's own value wins over the profile
    mine = {**hf, **stats, "behaviour": {"attention_mask": "causal"}}
    assert parse_estimate_request(mine).attention_mask.value == "causal"


def test_mask_tensor_expands_grouped_kv_in_the_transformers_profile():
    # use_gqa_in_sdpa: enable_gqa only without a mask tensor; with one, repeat_kv
    stats = {"length_stats": {"mean": 500, "max": 2048}, "seq_len": 2048}
    hf = {"model": "llama-3.1-8b", "framework": "hf-trainer"}
    assert parse_estimate_request(hf).attention_grouped_kv is True
    assert parse_estimate_request({**hf, **stats}).attention_grouped_kv is False
    given = {**hf, "behaviour": {"attention_mask": "padding"}}
    assert parse_estimate_request(given).attention_grouped_kv is False
    packed = {**hf, **stats, "batching": "packed"}
    assert parse_estimate_request(packed).attention_grouped_kv is True


def test_kernel_for_flash_and_eager_implementations():
    flash = attention_kernel(
        attention="flash", dtype="bf16", mask="padding", head_dim=128, capability=SM80
    )
    assert (flash.backend, flash.computed_fraction, flash.scores_materialised) == (
        "flash",
        0.5,
        False,
    )
    eager = attention_kernel(
        attention="eager", dtype="bf16", mask="causal", head_dim=128, capability=SM80
    )
    assert (eager.backend, eager.computed_fraction, eager.scores_materialised) == (
        "eager",
        1.0,
        True,
    )
    # fp32 on sm80: memory-efficient on TF32 tensor cores; fp32 math below sm80 has none
    fp32 = attention_kernel(
        attention="sdpa", dtype="fp32", mask="padding", head_dim=128, capability=SM80
    )
    assert (fp32.backend, fp32.tensor_cores) == ("efficient", True)
    fp32_t4 = attention_kernel(
        attention="sdpa", dtype="fp32", mask="padding", head_dim=100, capability=SM75
    )
    assert fp32_t4.backend == "efficient"  # alignment 1 for fp32 below sm80
    assert fp32_t4.tensor_cores is False


def test_torch_before_2_9_runs_the_mask_on_the_memory_efficient_kernel():
    # torch 2.5.1-2.10 put cuDNN after math: sm90 keeps flash (causal) / efficient (mask)
    for cc in (SM90, (10, 0)):
        kw = {"dtype": "bf16", "head_dim": 128, "capability": cc, "cudnn_first": False}
        assert sdpa_backend(mask="padding", **kw) == "efficient"
        assert sdpa_backend(mask="causal", **kw) == "flash"
    # cards where cuDNN never comes first dispatch the same either way
    for cc in (SM80, SM86, (12, 0)):
        for cudnn_first in (True, False):
            got = sdpa_backend(
                dtype="bf16", mask="padding", head_dim=128, capability=cc, cudnn_first=cudnn_first
            )
            assert got == "efficient"


def test_torch_version_profiles_set_the_sdpa_order():
    base = {"model": "llama-3.1-8b"}
    assert parse_estimate_request(base).sdpa_cudnn_last is False
    for fw in ("hf-trainer", "hf-custom-loop", "pytorch-loop", "generic"):
        assert parse_estimate_request({**base, "framework": fw}).sdpa_cudnn_last is False
    for fw in ("hf-trainer-4", "pytorch-loop-4"):
        assert parse_estimate_request({**base, "framework": fw}).sdpa_cudnn_last is True
    mine = {**base, "framework": "hf-trainer-4", "behaviour": {"sdpa_cudnn_last": False}}
    assert parse_estimate_request(mine).sdpa_cudnn_last is False


def test_older_torch_order_slows_a_padded_step_on_h100_only():
    from calc.plan import Planner, parse_plan_request

    def tps(gpu: str, cudnn_first: bool) -> float:
        req, opts = parse_plan_request(
            {
                "model": "llama-3.1-8b",
                "method": "full",
                "gpu": gpu,
                "seq_len": 4096,
                "dataset_tokens": 1e9,
                "behaviour": {"attention_mask": "padding", "sdpa_cudnn_last": not cudnn_first},
            }
        )
        t = Planner(req, opts).time(opts.gpu, req.num_gpus, req.sharding.value)
        return t.tokens_per_second_per_gpu

    assert tps("h100-sxm", False) < tps("h100-sxm", True)
    assert tps("a100-80gb-sxm", False) == tps("a100-80gb-sxm", True)


def test_sdpa_cudnn_last_bad_value_is_a_coded_error():
    with pytest.raises(InputError) as err:
        parse_estimate_request({"model": "llama-3.1-8b", "behaviour": {"sdpa_cudnn_last": "maybe"}})
    assert err.value.field == "sdpa_cudnn_last"


def test_memory_efficient_tiles_pad_a_head_dim_they_do_not_divide():
    from calc.attention import efficient_padded_share, efficient_tiles

    # the tiles divide 64, 128 and 256: nothing is wasted
    for head_dim in (64, 128, 256):
        assert efficient_padded_share(head_dim) == 1.0
        assert efficient_padded_share(head_dim, recompute=True) == 1.0
    # Phi-3's 96: attn @ V in a 128-wide value tile (forward 224 / 192), dV, dQ, dK in
    # 128-wide tiles (backward 576 / 480), a backward of twice the forward
    assert efficient_tiles(96) == (128, (128, 128))
    assert efficient_padded_share(96) == pytest.approx((224 / 192 + 2 * 576 / 480) / 3)
    assert efficient_padded_share(96, recompute=True) == pytest.approx(
        (2 * 224 / 192 + 2 * 576 / 480) / 4
    )


def test_phi3_padding_mask_prices_the_padded_tiles_only_on_the_memory_efficient_kernel():
    from calc.attention import efficient_padded_share
    from calc.plan import parse_plan_request
    from calc.timing import ATTENTION_KERNEL_TIME, attention_time_factor, card_rates

    def factor(gpu: str, **behaviour: object) -> float:
        req, opts = parse_plan_request(
            {
                "model": "phi-3-mini",
                "method": "full",
                "gpu": gpu,
                "dataset_tokens": 1e9,
                "gradient_checkpointing": False,
                # below Phi-3-mini's 2047-token window: no mask tensor of its own
                "seq_len": 1024,
                "behaviour": behaviour,
            }
        )
        return attention_time_factor(counts(req, req.sharding), card_rates(opts.gpu, 1), 0.3)

    assert factor("a100-80gb-sxm", attention_mask="padding") == pytest.approx(
        ATTENTION_KERNEL_TIME["efficient"] * efficient_padded_share(96)
    )
    # flash (causal, no mask tensor) has a head-dim-96 build: no padding
    assert factor("a100-80gb-sxm") == 1.0
    # cuDNN takes the mask on sm90: no padding
    assert factor("h100-sxm", attention_mask="padding") == ATTENTION_KERNEL_TIME["cudnn"]
