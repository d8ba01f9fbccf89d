"""Time model: FLOPs per token (hand-derived), the per-step roofline (counts over rates, recomputed
from the stated equations), its properties, and the throughput validation (LOSO)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calc import amp_traffic, comm, gpus, presets, timing
from calc.plan import parse_plan_request
from calc.request import Sharding
from hand_counts import ELEMENTWISE_BWD_7B_FULL, ELEMENTWISE_FWD_7B

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
    assert (
        timing.attention_forward_flops_per_token(LLAMA2_7B, 2048, attention)
        == ATTN_FWD_7B_2048 * share
    )


@pytest.mark.parametrize(
    "method, checkpointing, trainable, expected_total",
    [
        # full: 3 * (2N + attn) = 6N + 12*L*s*d
        ("full", False, 6_738_415_616, 3 * (2 * N_7B + ATTN_FWD_7B_2048)),
        # full + checkpointing: one more forward = 8N + 16*L*s*d
        ("full", True, 6_738_415_616, 4 * (2 * N_7B + ATTN_FWD_7B_2048)),
        # LoRA: fwd 2N + 2A + attn, bwd 2N + 4A + 2 attn, no weight gradients for the frozen base
        (
            "lora",
            False,
            LORA_QV_R8,
            (2 * N_7B + 2 * LORA_QV_R8 + ATTN_FWD_7B_2048)
            + (2 * N_7B + 4 * LORA_QV_R8 + 2 * ATTN_FWD_7B_2048),
        ),
        ("lora", True, LORA_QV_R8, 43_972_583_424),
        (
            "qlora",
            True,
            LORA_QV_R8,
            43_972_583_424,
        ),  # same FLOPs; the slowdown is a separate factor
    ],
)
def test_training_flops_per_token(method, checkpointing, trainable, expected_total):
    fpt = timing.training_flops_per_token(LLAMA2_7B, method, 2048, checkpointing, trainable)
    assert fpt.total == expected_total


def test_full_fine_tuning_is_six_n_plus_attention():
    fpt = timing.training_flops_per_token(LLAMA2_7B, "full", 2048, False, 0)
    assert fpt.total == 42_865_287_168  # 6 * 6,607,343,616 + 12 * 32 * 2048 * 4096


HALF = timing.MATMUL_HALF_TOKENS


@pytest.mark.parametrize(
    "tokens, hidden, expected",
    [
        (HALF, 4096, 0.5),
        (3 * HALF, 4096, 0.75),
        (8192, 4096, 8192 / (8192 + HALF)),
        (4 * HALF, 2048, 0.5),  # half-saturation grows as 1/hidden^2: T_half * 4 tokens
        (HALF / 4, 8192, 0.5),
    ],
)
def test_batch_saturation(tokens, hidden, expected):
    # batch_saturation takes micro-batch and sequence length: T = 1 x tokens
    assert timing.batch_saturation(1, tokens, hidden) == pytest.approx(expected)


def test_default_mfu_is_what_the_measured_rows_of_the_class_give(validation):
    """The default efficiency of a card class is the one fitted on that class's published
    throughputs (AMD's CDNA3 too, since torchao's MI300X row); a class no published row measured
    gets the fit over all rows."""
    _, result, _ = validation
    fitted = result["fit"]["matmul_efficiency"]
    assert {"a100", "hopper", "cdna3"} <= set(fitted)
    for cls in fitted:
        for method in ("full", "lora", "qlora"):
            assert timing.default_mfu(cls, method) == pytest.approx(fitted[cls], abs=0.01)
    assert timing.default_mfu("no-such-class", "full") == pytest.approx(
        result["fit"]["matmul_efficiency_pooled"], abs=0.01
    )


def _req(**kw):
    data = {
        "model": "llama-2-7b",
        "method": "full",
        "gpu": "a100-80gb-sxm",
        "dataset_tokens": 1e9,
        "micro_batch_size": 1,
        "seq_len": 2048,
        "gradient_checkpointing": False,
        "attention": "eager",
        **kw,
    }
    return parse_plan_request(data)


def test_step_hand_computed_full_fine_tuning():
    """Full FT, one A100 80GB SXM, 1 x 2048 tokens, no checkpointing, eager attention, bf16-true,
    torch AdamW (foreach), recomputed from the stated equations."""
    req, opts = _req(framework="generic")
    est = timing.estimate_time(req, opts.gpu, 1e9, mfu=0.5)
    b = est.breakdown
    bw = 2039e9 * timing.MEMORY_BANDWIDTH_EFFICIENCY
    sat = 2048 / (2048 + HALF)
    # eager attention: its score and value matmuls run at the card's bf16 rate
    assert b.compute == pytest.approx(2048 * 42_865_287_168 / (312e12 * 0.5 * sat))
    # ... and it moves its 2048 x 2048 scores: 32 bytes per element forward, 36 backward (bf16:
    # the softmax's upcast and its gradient's cast back run apart), and reads the bf16 causal
    # mask tensor in its mask add (2); 32 heads x 32 layers, no recompute
    scores_per_token = 32 * 32 * 2048 * (32 + 2 + 36)
    elementwise_per_token = (
        ELEMENTWISE_FWD_7B + ELEMENTWISE_BWD_7B_FULL + 24 * 32000 + scores_per_token
    )
    assert b.elementwise == pytest.approx(2048 * elementwise_per_token / bw)
    # foreach AdamW: 4 weight + 2 grad + 12 state passes of 2 bytes, clipping 3 grad passes
    assert b.optimizer == pytest.approx(6_738_415_616 * (4 * 2 + 2 * 2 + 12 * 2 + 3 * 2) / bw)
    assert b.dequantisation == b.exposed_communication == b.exposed_transfer == b.overheads == 0
    assert est.step_seconds == pytest.approx(b.compute + b.elementwise + b.optimizer)
    assert est.tokens_per_second_per_gpu == pytest.approx(2048 / est.step_seconds)


def test_memory_bound_parts_follow_the_datasheet_bandwidth():
    """Element-wise passes, the optimizer step and dequantisation are bytes over the card's
    memory bandwidth: the A100 80GB SXM (2,039 GB/s) against the H100 SXM (3,350 GB/s) on the
    same step, whatever share of the datasheet figure streaming kernels reach."""
    req, opts = _req(method="qlora", gradient_checkpointing=True)
    a100 = timing.estimate_time(req, opts.gpu, 1e9).breakdown
    h100 = timing.estimate_time(req, gpus.get_gpu("h100-sxm"), 1e9).breakdown
    assert (
        opts.gpu.memory_bandwidth_gb_per_s,
        gpus.get_gpu("h100-sxm").memory_bandwidth_gb_per_s,
    ) == (2039, 3350)
    for part in ("elementwise", "optimizer", "dequantisation"):
        assert getattr(a100, part) > 0
        assert getattr(a100, part) / getattr(h100, part) == pytest.approx(3350 / 2039)


def test_fused_adamw_moves_fewer_bytes():
    req, _ = _req(optimizer_fused=True)
    c = timing.counts(req, Sharding.NONE)
    assert c.optimizer_bytes_per_param == 2 * 2 + 1 * 2 + 4 * 2 + 3 * 2  # 20 B, the issue's 16-20


def test_qlora_dequantisation_is_per_weight_not_per_token():
    """Dequantisation moves the NF4 weights and their absmax (read) and their 16-bit copy
    (write) once per pass: the same seconds at 512 and 8192 tokens, so its share falls as
    tokens grow."""
    short_req, opts = _req(method="qlora", seq_len=512, gradient_checkpointing=True)
    long_req, _ = _req(method="qlora", seq_len=8192, gradient_checkpointing=True)
    short = timing.estimate_time(short_req, opts.gpu, 1e9)
    long = timing.estimate_time(long_req, opts.gpu, 1e9)
    c = timing.counts(short_req, Sharding.NONE)
    # bitsandbytes 0.49.2 with double quantisation, per weight: packed code 0.5, and per block
    # of 64 the 8-bit absmax read (1), its fp32 copy written (4), the offset add (4 + 4), the
    # fp32 absmax read by the 4-bit kernel (4); the 16-bit weight written (2)
    per_weight = 0.5 + (1 + 4 + 4 + 4 + 4) / 64 + 2
    assert timing.dequantisation_bytes_per_weight(True) == pytest.approx(per_weight)
    assert timing.dequantisation_bytes_per_weight(False) == pytest.approx(0.5 + 4 / 64 + 2)
    per_pass = per_weight * c.quantized_params / (2039e9 * timing.MEMORY_BANDWIDTH_EFFICIENCY)
    assert short.breakdown.dequantisation == pytest.approx(
        3 * per_pass
    )  # forward, recompute, backward
    assert long.breakdown.dequantisation == pytest.approx(short.breakdown.dequantisation)
    assert (
        long.breakdown.dequantisation / long.step_seconds
        < short.breakdown.dequantisation / short.step_seconds
    )


@pytest.mark.parametrize(
    ("double_quant", "compiled", "per_linear"),
    [
        (True, False, 9 * 2 + 5),  # eager, nested: forward and recompute 9 ops each, backward 5
        (False, False, 7 * 2 + 3),  # eager, plain absmax
        (True, True, 3 * 2 + 3),  # compiled: only the 3 dequantisation kernels per pass
    ],
)
def test_qlora_counts_bitsandbytes_host_ops(double_quant, compiled, per_linear):
    """bitsandbytes 0.49.2 wraps each 4-bit matmul in host ops of its own (Linear4bit.forward,
    MatMul4Bit, dequantize_4bit): QLoRA dispatches that many more ops than LoRA per micro-step,
    32 layers x 7 linears of Llama-2-7B, with checkpointing."""
    kw = dict(gradient_checkpointing=True, qlora_double_quant=double_quant, torch_compile=compiled)
    lora, _ = _req(method="lora", **kw)
    qlora, _ = _req(method="qlora", **kw)
    extra = (
        timing.counts(qlora, Sharding.NONE).kernels_per_micro
        - timing.counts(lora, Sharding.NONE).kernels_per_micro
    )
    assert extra == 32 * 7 * per_linear


@pytest.mark.parametrize("gc", [False, True])
def test_offloaded_weights_stream_in_twice_per_micro_step(gc):
    """With the weights offloaded, a micro-step brings them over the host link in forward and in
    backward, like FSDP's all-gather (the recompute reuses the backward's copy): a LoRA step
    too short to hide them exposes two streams less its GPU work, with or without checkpointing.
    FSDP's offload keeps the stepped weights on the host (the next forward's stream brings them):
    nothing goes up after the step."""
    req, _ = _req(
        method="lora", seq_len=16, gradient_checkpointing=gc, cpu_offload="optimizer+params"
    )
    gpu = gpus.get_gpu("rtx-4090")
    est = timing.estimate_time(req, gpu, 1e9)
    c = timing.counts(req, Sharding.NONE)
    host = comm.host_link_bytes_per_s(gpu.pcie_gen)
    stream = (c.dense_params * c.reg.compute_bytes) / host
    b = est.breakdown
    # each stream hides behind its own phase's GPU work only: forward + backward = the whole micro-step
    assert b.exposed_transfer == pytest.approx(2 * stream - b.compute - b.elementwise, rel=1e-6)
    assert b.exposed_transfer > 1.9 * stream


def test_ddp_all_reduce_exposed_beyond_backward():
    """DDP over PCIe: a ring all-reduce moves 2 (n-1)/n of the gradient bytes; what backward does
    not cover is exposed. RTX 4090s have no PCIe peer-to-peer: NCCL stages through host memory."""
    req, _ = _req(num_gpus=4, sharding="ddp", micro_batch_size=1, seq_len=128)
    gpu = gpus.get_gpu("rtx-4090")
    est = timing.estimate_time(req, gpu, 1e9)
    link = comm.collective_link(gpu, 4)
    staged = 31.5e9 * comm.HOST_STAGED_BUS_SHARE[4]
    assert link.kind == "pcie" and link.bytes_per_s == pytest.approx(staged)
    ar = comm.all_reduce_bytes(6_738_415_616 * 2, 4) / link.bytes_per_s
    assert est.breakdown.exposed_communication < ar  # part of it hides behind backward
    assert (
        est.breakdown.exposed_communication > ar - est.breakdown.compute - est.breakdown.elementwise
    )


def test_communication_counts_every_collective_second_hidden_or_not():
    """StepBreakdown.communication is every collective second of the step, the part hidden
    under compute included: ZeRO-3 gathers the 16-bit weights twice a micro-step (forward,
    backward) and reduce-scatters the gradients once (no_sync: once a step); DDP all-reduces
    the gradients once a step; one GPU has none. Not a part of step_seconds."""
    c8 = dict(num_gpus=8, method="full", gpu="h100-sxm", gradient_accumulation_steps=4)
    req, opts = parse_plan_request(
        {"model": "llama-3.1-8b", "dataset_tokens": 1e9, **c8, "sharding": "zero3"}
    )
    est = timing.estimate_time(req, opts.gpu, 1e9)
    c = timing.counts(req, Sharding.ZERO3)
    link = comm.collective_link(opts.gpu, 8)
    lat = comm.ring_latency_s(link, 8)
    ag = comm.all_gather_bytes(c.dense_params * c.reg.compute_bytes, 8) / link.bytes_per_s
    rs = comm.reduce_scatter_bytes(float(c.grad_params) * c.reg.grad_bytes, 8) / link.bytes_per_s
    layers = c.layers
    reduces = 4 if timing.st.reduces_each_micro_batch(req) else 1
    expected = 4 * 2 * (ag + layers * lat) + reduces * (rs + layers * lat)
    b = est.breakdown
    assert b.communication == pytest.approx(expected, rel=1e-9)
    assert b.exposed_communication < b.communication  # NVLink: most of it hides
    assert b.step_seconds == pytest.approx(sum(b.to_dict().values()))

    req, opts = parse_plan_request(
        {"model": "llama-3.1-8b", "dataset_tokens": 1e9, **c8, "sharding": "ddp"}
    )
    b = timing.estimate_time(req, opts.gpu, 1e9).breakdown
    cd = timing.counts(req, Sharding.DDP)
    grads = float(cd.grad_params) * cd.reg.grad_bytes
    buckets = -(-grads // cd.bucket_bytes)
    last = grads - (buckets - 1) * cd.bucket_bytes
    # one all-reduce per 25 MB bucket (ring or tree, as NCCL picks), once a step (no_sync)
    expected = (buckets - 1) * comm.all_reduce_seconds(cd.bucket_bytes, link, 8)
    expected += comm.all_reduce_seconds(last, link, 8)
    assert b.communication == pytest.approx(expected, rel=1e-9)
    assert b.communication == pytest.approx(
        comm.all_reduce_bytes(grads, 8) / link.bytes_per_s, rel=0.02
    )

    req, opts = parse_plan_request(
        {"model": "llama-3.1-8b", "dataset_tokens": 1e9, "gpu": "h100-sxm"}
    )
    assert timing.estimate_time(req, opts.gpu, 1e9).breakdown.communication == 0.0


def test_link_kinds():
    assert comm.collective_link(gpus.get_gpu("a100-80gb-sxm"), 8).kind == "nvlink"
    assert comm.collective_link(gpus.get_gpu("rtx-3090"), 2).kind == "nvlink"  # bridge
    assert comm.collective_link(gpus.get_gpu("rtx-3090"), 4).kind == "pcie"
    # 8 adapters of 200 Gb/s per A100 server: 200 GB/s, below NVLink's 300 per direction
    multi = comm.collective_link(gpus.get_gpu("a100-80gb-sxm"), 16)
    assert multi.kind == "network" and multi.bytes_per_s == pytest.approx(
        200e9 * comm.LINK_EFFICIENCY
    )


def test_fp8_uses_the_fp8_rate_only_where_the_card_has_it():
    req, _ = _req(seq_len=4096)
    h100 = gpus.get_gpu("h100-sxm")
    assert h100.fp8_dense_tflops == 1979
    bf16 = timing.estimate_time(req, h100, 1e9)
    fp8 = timing.estimate_time(req, h100, 1e9, fp8_compute=True)
    assert fp8.breakdown.compute < bf16.breakdown.compute and fp8.breakdown.fp8_casts > 0
    a100 = gpus.get_gpu("a100-80gb-sxm")
    assert a100.fp8_dense_tflops == 0
    assert (
        timing.estimate_time(req, a100, 1e9, fp8_compute=True).step_seconds
        == timing.estimate_time(req, a100, 1e9).step_seconds
    )


def _fp8_lora(**kw):
    """A LoRA micro-step of 2,048 tokens on an H100 with FP8 linears (the vessl benchmark's
    shape, on a smaller model), and the request."""
    req, opts = _req(
        **{"model": "llama-3.1-8b", "method": "lora", "gpu": "h100-sxm", "attention": "sdpa", **kw}
    )
    return req, timing.estimate_time(req, opts.gpu, 1e9, fp8_compute=True)


def test_torchao_fp8_without_compile_casts_op_by_op():
    """fp8_library "torchao" without torch.compile: torchao's Float8Linear casts op by op (33
    bytes per element against 3 fused), computes a frozen weight's gradient and dispatches its
    own ops; under torch.compile, or with Transformer Engine, the casts are fused and nothing
    else changes."""
    _, te = _fp8_lora(fp8_library="transformer-engine")
    req, eager = _fp8_lora(fp8_library="torchao")
    _, compiled = _fp8_lora(fp8_library="torchao", torch_compile=True)
    _, te_compiled = _fp8_lora(fp8_library="transformer-engine", torch_compile=True)
    assert compiled.step_seconds == te_compiled.step_seconds
    assert eager.breakdown.fp8_casts > 8 * te.breakdown.fp8_casts
    # the base weights' gradients, at the FP8 rate: 2 x (block linear weights) FLOPs a token
    eager8 = timing.fp8_eager_counts(req, 0.0)
    assert eager8 is not None and eager8.frozen_wgrad_flops_per_token == pytest.approx(
        2 * req.model.num_layers * sum(l.d_in * l.d_out for l in req.model.linears if l.quantizable)
    )
    assert eager.breakdown.compute > te.breakdown.compute
    # and so, for a LoRA step this short, slower than the same step in BF16
    bf16 = timing.estimate_time(req, gpus.get_gpu("h100-sxm"), 1e9)
    assert eager.step_seconds > bf16.step_seconds > te.step_seconds


def test_torchao_fp8_trains_the_weights_it_casts_in_full_fine_tuning():
    """Full fine-tuning computes every weight's gradient anyway: the eager path adds casts and
    host ops, no FLOPs."""
    req, eager = _fp8_lora(fp8_library="torchao", method="full", num_gpus=8, sharding="zero3")
    _, te = _fp8_lora(fp8_library="transformer-engine", method="full", num_gpus=8, sharding="zero3")
    eager8 = timing.fp8_eager_counts(req, 0.0)
    assert eager8 is not None and eager8.frozen_wgrad_flops_per_token == 0
    assert eager.breakdown.compute == pytest.approx(te.breakdown.compute)
    assert eager.breakdown.fp8_casts > te.breakdown.fp8_casts


def test_torchao_fp8_host_ops_are_counted_per_float8_linear():
    """Each FP8 linear adds FLOAT8_LINEAR_OPS less what an nn.Linear is counted as; a
    recomputed block runs its forward's again."""
    plain, _ = _fp8_lora(fp8_library="torchao")
    ckpt, _ = _fp8_lora(fp8_library="torchao", gradient_checkpointing=True)
    linears = plain.model.num_layers * sum(l.active for l in plain.model.linears if l.quantizable)
    fwd = timing.FLOAT8_LINEAR_OPS["forward"] - 1
    bwd = timing.FLOAT8_LINEAR_OPS["backward"] - timing.BACKWARD_OPS_FACTOR
    assert timing.fp8_eager_counts(plain, 0.0).ops == linears * (fwd + bwd)
    assert timing.fp8_eager_counts(ckpt, 1.0).ops == linears * (2 * fwd + bwd)


def test_accelerate_profiles_run_fp8_on_torchao():
    """accelerate 1.15 picks torchao first for mixed_precision fp8: the profiles on it say so;
    the generic stack keeps Transformer Engine's fused casts."""
    for framework in ("hf-trainer", "trl-sft", "hf-custom-loop", "axolotl"):
        req, _ = _req(framework=framework)
        assert req.fp8_library.value == "torchao", framework
    req, _ = _req(framework="generic")
    assert req.fp8_library.value == "transformer-engine"


def test_overrides_keep_their_meaning():
    req, opts = _req(method="qlora", gradient_checkpointing=True)
    plain = timing.estimate_time(req, opts.gpu, 1e9)
    forced = timing.estimate_time(req, opts.gpu, 1e9, qlora_speed_factor=0.5)
    assert forced.step_seconds == pytest.approx(
        (plain.step_seconds - plain.breakdown.dequantisation) / 0.5
    )
    multi, _ = _req(num_gpus=4, sharding="zero3")
    one, _ = _req()
    scaled = timing.estimate_time(multi, opts.gpu, 1e9, scaling_efficiency=0.8)
    single = timing.estimate_time(one, opts.gpu, 1e9)
    assert scaled.step_seconds == pytest.approx(single.step_seconds / 0.8, rel=1e-9)


# --- properties --------------------------------------------------------------------------------

CARDS = [g.id for g in gpus.all_gpus()]
SETUP = dict(
    method=st.sampled_from(["full", "lora", "qlora"]),
    gc=st.booleans(),
    gpu=st.sampled_from(CARDS),
    n=st.sampled_from([1, 2, 4, 8, 16]),
    sharding=st.sampled_from(["ddp", "zero1", "zero2", "zero3"]),
    offload=st.sampled_from(["none", "optimizer", "optimizer+params"]),
    accum=st.integers(1, 8),
    compile_=st.booleans(),
    fp8=st.booleans(),
)


def _estimate(method, gc, gpu, n, sharding, offload, accum, compile_, fp8, mb=1, seq=1024, **extra):
    req, opts = parse_plan_request(
        {
            "model": "llama-3.2-1b",
            "method": method,
            "gpu": gpu,
            "dataset_tokens": 1e9,
            "micro_batch_size": mb,
            "seq_len": seq,
            "gradient_checkpointing": gc,
            "num_gpus": n,
            "sharding": sharding if n > 1 else "none",
            "cpu_offload": offload,
            "gradient_accumulation_steps": accum,
            "torch_compile": compile_,
        }
    )
    return req, opts, timing.estimate_time(req, opts.gpu, 1e9, fp8_compute=fp8, **extra)


@settings(max_examples=150, deadline=None)
@given(**SETUP)
def test_breakdown_adds_up_to_the_step(method, gc, gpu, n, sharding, offload, accum, compile_, fp8):
    _, _, est = _estimate(method, gc, gpu, n, sharding, offload, accum, compile_, fp8)
    parts = est.to_dict()["step"]["breakdown_seconds"]
    assert all(v >= 0 for v in parts.values())
    assert sum(parts.values()) == pytest.approx(est.step_seconds, rel=1e-12)
    assert est.step_seconds == pytest.approx(
        est.tokens_per_step_per_gpu / est.tokens_per_second_per_gpu
    )


@settings(max_examples=150, deadline=None)
@given(
    **SETUP,
    mb=st.integers(1, 16),
    seq=st.sampled_from([64, 256, 1024, 4096]),
    more=st.integers(1, 8),
)
def test_more_tokens_never_lower_the_flop_rate(
    method, gc, gpu, n, sharding, offload, accum, compile_, fp8, mb, seq, more
):
    """Achieved FLOP rate = FLOPs of the step / step time; a larger micro-batch never lowers it."""

    def rate(m):
        _, _, est = _estimate(
            method, gc, gpu, n, sharding, offload, accum, compile_, fp8, mb=m, seq=seq
        )
        return est.effective_utilisation

    assert rate(mb * (1 + more)) >= rate(mb) * (1 - 1e-9)


@settings(max_examples=150, deadline=None)
@given(**SETUP, factor=st.floats(1.0, 100.0))
def test_faster_link_never_slows_a_step(
    method, gc, gpu, n, sharding, offload, accum, compile_, fp8, factor
):
    req, opts, _ = _estimate(method, gc, gpu, n, sharding, offload, accum, compile_, fp8)
    c = timing.counts(req, req.sharding)
    rates = timing.card_rates(opts.gpu, n)
    fast = replace(
        rates,
        link=comm.Link(rates.link.kind, rates.link.bytes_per_s * factor),
        host_bytes_per_s=rates.host_bytes_per_s * factor,
    )
    kw = dict(
        num_gpus=n, sharding=req.sharding, cpu_offload=req.cpu_offload, efficiency=0.5, fp8=fp8
    )
    slow_s = timing.step_breakdown(c, rates, **kw).step_seconds
    fast_s = timing.step_breakdown(c, fast, **kw).step_seconds
    assert fast_s <= slow_s * (1 + 1e-12)


@settings(max_examples=150, deadline=None)
@given(**SETUP)
def test_offload_never_speeds_a_step(method, gc, gpu, n, sharding, offload, accum, compile_, fp8):
    _, _, none = _estimate(method, gc, gpu, n, sharding, "none", accum, compile_, fp8)
    _, _, opt = _estimate(method, gc, gpu, n, sharding, "optimizer", accum, compile_, fp8)
    _, _, both = _estimate(method, gc, gpu, n, sharding, "optimizer+params", accum, compile_, fp8)
    # not opt <= both: with the weights on the host the stepped weights stay there and the
    # forward's stream (under compute) brings them, where the optimizer alone uploads its result
    # after the step, exposed (calc.host_offload)
    assert none.step_seconds <= opt.step_seconds * (1 + 1e-12)
    assert none.step_seconds <= both.step_seconds * (1 + 1e-12)


# --- validation (accuracy/throughput.py reads validation/measured_throughput.csv) ------------


@pytest.fixture(scope="module")
def validation():
    from accuracy import throughput as vt

    return vt, vt.compare(), vt.load_rows()


def test_throughput_validation_accounts_for_every_row(validation):
    """Every row of the throughput set is either compared or listed with its reason."""
    _, result, rows = validation
    seen = [r["row_id"] for r in result["rows"]] + [r["row_id"] for r in result["not_covered"]]
    assert sorted(seen) == sorted(rows)
    assert all(r["reason"] and r["reason"] != "not mapped" for r in result["not_covered"])
    assert len(result["rows"]) >= 50
    for r in result["rows"]:
        assert r["predicted_tokens_per_second_per_gpu"] > 0


def test_csv_is_the_single_source(validation):
    """Each row carries its calc request or why it has none; the script holds no row literals."""
    vt, _, rows = validation
    for r in rows.values():
        assert bool(r["calc_request"]) or bool(r["calc_not_covered"]), r["row_id"]
    assert not hasattr(vt, "COVERED") and not hasattr(vt, "NOT_COVERED")


def test_rows_sharded_by_deepspeed_run_the_deepspeed_engine(validation):
    """A row whose sharding column names DeepSpeed is priced with DeepSpeed's hooks and buckets,
    not with FSDP's (the engine a `zero3` request gets when it names none)."""
    import json

    _, _, rows = validation
    deepspeed = [
        r
        for r in rows.values()
        if r["calc_request"] and "deepspeed" in r["sharding_parallelism"].lower()
    ]
    assert len(deepspeed) >= 3
    for r in deepspeed:
        assert json.loads(r["calc_request"]).get("sharding_engine") == "deepspeed", r["row_id"]


def test_rows_naming_no_library_are_judged_without_a_profile(validation):
    """The rows come from many stacks (llm-foundry, torchtitan, Unsloth, the HF Trainer…) and
    name no training library: each is judged with the keys it states and the rest at their
    own defaults, not as a run of the request's default library."""
    import json

    vt, _, rows = validation
    plain = [
        r
        for r in rows.values()
        if r["calc_request"] and "framework" not in json.loads(r["calc_request"])
    ]
    assert len(plain) >= 50
    for r in plain:
        assert vt.row_request(r)["framework"] == "generic", r["row_id"]


def test_shipped_constants_are_the_in_sample_fit(validation):
    _, result, _ = validation
    fit, shipped = result["fit"], result["shipped"]
    for cls, value in fit["matmul_efficiency"].items():
        assert shipped["matmul_efficiency"][cls] == pytest.approx(value, abs=0.01)
    assert shipped["matmul_efficiency_pooled"] == pytest.approx(
        fit["matmul_efficiency_pooled"], abs=0.01
    )
    assert shipped["fp8_matmul_efficiency"] == pytest.approx(fit["fp8_matmul_efficiency"], abs=0.01)
    assert shipped["matmul_half_tokens"] == pytest.approx(fit["matmul_half_tokens"], rel=0.02)
    assert shipped["dispatch_seconds_per_kernel"] == pytest.approx(
        fit["dispatch_seconds_per_kernel"], rel=0.02
    )


def test_single_source_classes_are_the_fit_s(validation):
    """The card classes a plan warns about (``time_class_single_source``) are those whose
    efficiency the fit rests on one source."""
    _, result, _ = validation
    single = {
        key.split(".", 1)[1]
        for key, basis in result["constant_basis"].items()
        if key.startswith("matmul_efficiency.") and basis["source_count"] == 1
    }
    assert timing.SINGLE_SOURCE_CLASSES == single


def test_a_plan_on_a_single_source_card_says_so():
    from calc import plan_setup

    body = {"model": "llama-3.1-8b", "dataset_tokens": 1e7}
    assert "time_class_single_source" in plan_setup({**body, "gpu": "mi300x"})["warnings"]
    assert "time_class_single_source" not in plan_setup({**body, "gpu": "h100-sxm"})["warnings"]


def test_loso_fit_never_sees_the_held_out_source(validation):
    vt, result, rows = validation
    cases = vt.cases(rows)
    source = "github.com/QwenLM/Qwen"
    refit = vt.fit([c for c in cases if c.source != source and c.fitted])
    assert refit.to_dict() == result["loso_fits"][source]
    assert refit.to_dict() != result["fit"]


def test_whole_job_wall_time_rows_are_judged_not_fitted(validation):
    """A figure that holds start-up and compilation is not steady-state tokens/s: such rows get a
    prediction and an error like any other, but no constant rests on their source."""
    from accuracy import throughput

    _, result, rows = validation
    judged = [r for r in result["rows"] if not r["fitted"]]
    assert judged, "expected the whole-job rows (Scicom) in the set"
    for r in judged:
        assert throughput.NOT_FITTED_NOTES & {n.strip() for n in r["note"].split(";")}
        assert r["loso_error_pct"] == pytest.approx(r["in_sample_error_pct"])
    judged_sources = {r["source"] for r in judged} - {
        r["source"] for r in result["rows"] if r["fitted"]
    }
    for basis in result["constant_basis"].values():
        assert not judged_sources & set(basis["sources"])


def test_power_limited_card_rows_are_fitted_at_the_sustained_clock(validation):
    """calc runs the L4 at the clock its 72 W hold (gpus.csv sustained_clock_mhz), so its rows
    are fitted like the others: the workstation and data-centre GDDR class rests on two sources,
    not on Answer.AI's RTX 6000 Ada alone."""
    from accuracy import throughput

    _, result, _ = validation
    assert "power_limited_card" not in throughput.NOT_FITTED_NOTES
    l4 = [r for r in result["rows"] if r["gpu"] == "l4"]
    assert len(l4) == 5 and all(r["fitted"] for r in l4)
    basis = result["constant_basis"]["matmul_efficiency.gddr-pro"]
    assert not basis["single_source"] and len(basis["sources"]) == 2


def _counts_and_rates(gpu_id: str, **request):
    req, opts = parse_plan_request(
        {"model": "llama-2-7b", "gpu": gpu_id, "dataset_tokens": 1e9, **request}
    )
    return timing.counts(req, req.sharding), timing.card_rates(opts.gpu, 1), req


@pytest.mark.parametrize(
    "gpu_id, request_keys, factor",
    [
        # causal, no mask tensor: the flash kernel (cuDNN first on sm90), the reference rate
        ("a100-80gb-sxm", {}, 1.0),
        ("h100-sxm", {}, 1.0),
        # a mask tensor on sm80: flash is out, the memory-efficient kernel runs
        ("a100-80gb-sxm", {"attention_mask": "padding"}, timing.ATTENTION_KERNEL_TIME["efficient"]),
        # on sm90 cuDNN takes the mask at flash speed
        ("h100-sxm", {"attention_mask": "padding"}, timing.ATTENTION_KERNEL_TIME["cudnn"]),
        # eager attention's matmuls are cuBLAS bf16 matmuls on tensor cores; its score traffic
        # is counted apart (score_bytes_per_token)
        ("a100-80gb-sxm", {"attention": "eager"}, 1.0),
        # sm75 has neither flash nor bf16 memory-efficient: the math backend, which upcasts
        # to fp32 and runs without tensor cores, at the T4's own FP32 rate (65 / 8.1)
        ("t4", {}, 65 / 8.1),
        # QLoRA after prepare_model_for_kbit_training, no autocast: q, k, v in fp32 reach the
        # memory-efficient kernel's 3xTF32 path
        (
            "a100-80gb-sxm",
            {"method": "qlora", "framework": "hf-custom-loop"},
            timing.ATTENTION_KERNEL_TIME["efficient"] * timing.FP32_ATTENTION_TIME["tf32x3"],
        ),
        # the same under autocast-free bf16 mixed precision is 16-bit: no fp32 factor
        (
            "a100-80gb-sxm",
            {"method": "qlora", "framework": "hf-custom-loop", "precision": "bf16-mixed"},
            1.0,
        ),
        # no CUDA dispatch to read on AMD cards
        ("mi300x", {"attention_mask": "padding"}, 1.0),
    ],
)
def test_attention_kernel_time_factor(gpu_id, request_keys, factor):
    c, rates, _ = _counts_and_rates(gpu_id, **request_keys)
    # at an efficiency below the Hopper share of Ampere-generation kernels: no share applies
    assert timing.attention_time_factor(c, rates, 0.3) == pytest.approx(factor)


def test_materialised_scores_are_counted_not_a_factor():
    # the same FLOPs (both padded to the full square by the mask) on two kernels: eager runs
    # its matmuls at the flash kernel's rate (the memory-efficient one takes twice as long) and
    # moves its L x L scores: 32 bytes per score element forward, 36 backward, 32 again for
    # the recomputed forward (checkpointing is on by default; bf16 scores)
    kw = {"seq_len": 4096, "micro_batch_size": 1, "attention_mask": "padding"}
    c_eff, rates, _ = _counts_and_rates("a100-80gb-sxm", **kw)
    c_eager, _, _ = _counts_and_rates("a100-80gb-sxm", attention="eager", **kw)
    assert c_eff.flops.attention_total == c_eager.flops.attention_total > 0
    assert c_eager.flops.recompute > 0
    args = dict(
        num_gpus=1, sharding=Sharding.NONE, cpu_offload=timing.CpuOffload.NONE, efficiency=0.5
    )
    eff = timing.step_breakdown(c_eff, rates, **args)
    eager = timing.step_breakdown(c_eager, rates, **args)
    sat = c_eff.tokens_micro / (c_eff.tokens_micro + timing.MATMUL_HALF_TOKENS)
    per_factor = c_eff.tokens_micro * c_eff.flops.attention_total / (rates.peak_flops * 0.5 * sat)
    assert eff.compute - eager.compute == pytest.approx(per_factor)
    # llama-2-7b: 32 layers x 32 heads x 4096 keys per query token; the bf16 padding mask
    # (2 bytes) is read per head by eager's mask add (forward) and by the memory-efficient
    # kernel forward and backward
    elements = 32 * 32 * 4096
    assert timing.score_bytes_per_token(c_eager, rates.capability) == (
        elements * (32 + 2),
        elements * (36 + 32 + 2),
    )
    assert timing.score_bytes_per_token(c_eff, rates.capability) == (elements * 2, elements * 4)
    gap = (32 + 2 + 36 + 32 + 2) - (2 + 2 + 2)
    # and eager copies its head-major output token-major (4 bytes per q element, forward and
    # recomputed forward; MHA, no k/v repeat), where the fused kernel writes it token-major, and
    # its value gradient (4 bytes per v element, backward)
    copies = 32 * 4096 * (timing.ATTENTION_OUTPUT_COPY_BYTES * 2 + timing.VALUE_GRAD_COPY_BYTES)
    score_s = c_eager.tokens_micro * (elements * gap + copies) / rates.memory_bytes_per_s
    assert eager.elementwise - eff.elementwise == pytest.approx(score_s)


def test_compiled_eager_attention_fuses_the_chain_between_its_matmuls():
    """Under torch.compile inductor fuses eager attention's scaling, mask add and softmax into
    one kernel per direction: 4 passes over the 16-bit scores forward and 7 backward (8 and 14
    bytes per element, against 32 and 36 op by op in bf16); the matmuls and the mask's read
    stay."""
    kw = {"seq_len": 4096, "micro_batch_size": 1, "attention": "eager"}
    eager, rates, _ = _counts_and_rates("a100-80gb-sxm", **kw)
    compiled, _, _ = _counts_and_rates("a100-80gb-sxm", torch_compile=True, **kw)
    assert compiled.flops.attention_total == eager.flops.attention_total > 0
    elements = 32 * 32 * 4096  # llama-2-7b: layers x heads x keys per query token
    mask = 2  # the causal mask eager attention is handed, read by its add forward
    assert timing.score_bytes_per_token(compiled, rates.capability) == (
        elements * (2 * timing.COMPILED_SCORE_PASSES["forward"] + mask),
        elements * (2 * timing.COMPILED_SCORE_PASSES["backward"] + 8 + mask),
    )
    assert timing.score_bytes_per_token(eager, rates.capability) == (
        elements * (32 + mask),
        elements * (36 + 32 + mask),
    )


@pytest.mark.parametrize(
    "gpu_id, request_keys, masked",
    [
        # no mask tensor: flash or cuDNN mask causally by index, nothing to read
        ("a100-80gb-sxm", {}, False),
        ("h100-sxm", {}, False),
        # a padding mask: the memory-efficient kernel (sm80) and cuDNN (sm90) read it per head
        ("a100-80gb-sxm", {"attention_mask": "padding"}, True),
        ("h100-sxm", {"attention_mask": "padding"}, True),
        # flash_attention_2 unpads the batch: no mask tensor reaches the kernel
        ("a100-80gb-sxm", {"attention_mask": "padding", "attention": "flash"}, False),
    ],
)
def test_mask_tensor_is_read_per_head(gpu_id, request_keys, masked):
    c, rates, _ = _counts_and_rates(gpu_id, seq_len=4096, micro_batch_size=1, **request_keys)
    # llama-2-7b: 32 layers x 32 heads x 4096 keys; a bf16 mask (2 bytes) read once forward,
    # once backward and once in the recomputed forward
    per_pass = 32 * 32 * 4096 * 2 if masked else 0.0
    assert timing.score_bytes_per_token(c, rates.capability) == (per_pass, 2 * per_pass)


@pytest.mark.parametrize(
    "request_keys, expected",
    [
        ({"method": "full"}, 0.0),
        # bf16 adapters, no dropout: the adapter reads the layer's input as it is
        ({"method": "lora", "framework": "torchtune"}, 0.0),
        # HF profiles: fp32 adapters on a bf16 input are cast first
        ({"method": "lora", "framework": "hf-trainer"}, timing.LORA_CAST_BYTES_PER_INPUT),
        # ... and dropout then runs on the fp32 copy
        (
            {"method": "lora", "framework": "hf-trainer", "lora_dropout": 0.05},
            timing.LORA_CAST_BYTES_PER_INPUT + timing.LORA_DROPOUT_BYTES_PER_INPUT["fp32"],
        ),
        # LitGPT: adapters in the base dtype, dropout 0.05 in 16-bit
        ({"method": "lora", "framework": "litgpt"}, timing.LORA_DROPOUT_BYTES_PER_INPUT["16bit"]),
    ],
)
def test_lora_input_bytes(request_keys, expected):
    _, _, req = _counts_and_rates("a100-80gb-sxm", **request_keys)
    assert timing.lora_input_bytes(req) == expected


LORA_QV_KEYS = {
    "method": "lora",
    "lora_rank": 8,
    "lora_targets": ["q_proj", "v_proj"],
    "gradient_checkpointing": False,
    "seq_len": 2048,
    "micro_batch_size": 1,
}


@pytest.mark.parametrize(
    "request_keys, size, fp32",
    [
        # torchtune: adapters in the base dtype, bf16 matmuls on the tensor cores
        ({"framework": "torchtune"}, 2, False),
        # peft's autocast_adapter_dtype: fp32 adapters, fp32 matmuls
        ({"framework": "hf-trainer"}, 4, True),
        # Unsloth's matmul_lora casts the fp32 adapters to the input's dtype first
        ({"framework": "hf-trainer", "fused_lora_kernels": True}, 2, False),
    ],
)
def test_adapter_matmuls_counted_by_hand(request_keys, size, fp32):
    """Llama-2-7B, rank 8 on q and v (4096 -> 4096), no recomputation: 2 r (d_in + d_out) FLOPs
    per adapter forward, twice that backward (6 A in all, A = the adapters' parameters); bytes:
    input and output once forward, twice backward, at the adapters' dtype."""
    c, _, _ = _counts_and_rates("h100-sxm", **LORA_QV_KEYS, **request_keys)
    assert c.adapter_flops_per_token == 6 * LORA_QV_R8
    assert c.adapter_bytes_per_token == 32 * size * 2 * (4096 + 4096) * (1 + 2)
    assert c.adapter_fp32 is fp32
    full, _, _ = _counts_and_rates("h100-sxm", **{**LORA_QV_KEYS, "method": "full"})
    assert full.adapter_flops_per_token == full.adapter_bytes_per_token == 0.0


@pytest.mark.parametrize("gpu_id", ["a100-80gb-sxm", "h100-sxm", "rtx-pro-6000"])
@pytest.mark.parametrize("framework", ["torchtune", "hf-trainer"])
def test_adapter_matmuls_take_the_larger_of_flops_and_bytes(gpu_id, framework):
    """The rank-r matmuls replace their tensor-core time by the larger of their FLOPs at the
    adapters' rate and their bytes at the memory's: at rank 8 the bytes win on every card."""
    c, rates, _ = _counts_and_rates(gpu_id, **LORA_QV_KEYS, framework=framework)
    args = dict(
        num_gpus=1, sharding=Sharding.NONE, cpu_offload=timing.CpuOffload.NONE, efficiency=0.5
    )
    bare = replace(c, adapter_flops_per_token=0.0, adapter_bytes_per_token=0.0)
    extra = (
        timing.step_breakdown(c, rates, **args).compute
        - timing.step_breakdown(bare, rates, **args).compute
    )
    T = c.tokens_micro
    eff = 0.5 * timing.saturation(T, c.hidden, rates.peak_flops / rates.clock)
    rate = rates.fp32_flops if c.adapter_fp32 else rates.peak_flops * eff
    flops_s = T * c.adapter_flops_per_token / rate
    bytes_s = T * c.adapter_bytes_per_token / rates.memory_bytes_per_s
    assert bytes_s > flops_s
    assert extra == pytest.approx(
        bytes_s - T * c.adapter_flops_per_token / (rates.peak_flops * eff)
    )


def test_fp32_adapters_on_a_16bit_layer_move_more_per_output():
    """peft's fp32 branch is scaled in fp32, added with promotion and cast back: 24 bytes per
    output element instead of 10 forward, 20 instead of 4 backward (the fp32 scale's gradient and
    the two casts run back); each input is cast up forward and its gradient cast back down."""
    bf16, _, req = _counts_and_rates("h100-sxm", **LORA_QV_KEYS, framework="torchtune")
    fp32, _, _ = _counts_and_rates("h100-sxm", **LORA_QV_KEYS, framework="hf-trainer")
    outputs = inputs = 32 * 2 * 4096  # q and v of Llama-2-7B's 32 blocks, 4096 -> 4096
    dropout = timing.lora_input_bytes(req)  # torchtune: no cast, no dropout
    assert dropout == 0.0
    backward = timing.LORA_BACKWARD_BYTES_PER_OUTPUT
    assert fp32.elementwise_bytes_per_token - bf16.elementwise_bytes_per_token == pytest.approx(
        outputs * (timing.LORA_FP32_BYTES_PER_OUTPUT - timing.LORA_BYTES_PER_OUTPUT)
        + outputs * (backward["fp32_branch"] - backward["16bit"])
        + inputs * 2 * timing.LORA_CAST_BYTES_PER_INPUT
    )


def test_unsloth_host_calls_counted_per_adapted_linear():
    """Unsloth's autograd functions: each adapted linear (its base matmul included) costs the
    counted calls forward, recomputed and backward; the block's other ops and unadapted linears
    count as eager ops (forward, backward, recomputation)."""
    keys = {**LORA_QV_KEYS, "gradient_checkpointing": True, "framework": "hf-trainer"}
    fused, _, _ = _counts_and_rates("h100-sxm", **keys, fused_lora_kernels=True)
    plain, _, _ = _counts_and_rates("h100-sxm", **keys)
    ops = timing.FUSED_LORA_OPS_PER_ADAPTER
    per_layer = 2 * (2 * ops["forward"] + ops["backward"]) + (
        7 - 2 + timing.EAGER_OPS_PER_LAYER_FORWARD
    ) * (1 + timing.BACKWARD_OPS_FACTOR + 1)
    assert fused.kernels_per_micro == 32 * per_layer
    # transformers' own Llama block (traced), its peft adapters on q and v
    table = timing.TRANSFORMERS_BLOCK_OPS
    forward, backward = table[5, "llama", "forward"], table[5, "llama", "backward"]
    assert plain.kernels_per_micro == 32 * (
        (7 + forward + 4 * 2) * (1 + 2 + 1) + backward - 2 * forward
    )
    assert fused.kernels_per_micro > plain.kernels_per_micro


UNSLOTH_KEYS = {
    "method": "lora",
    "lora_rank": 16,
    "lora_dropout": 0.0,
    "lora_adapter_dtype": "base",
    "gradient_checkpointing": False,
    "seq_len": 2048,
    "framework": "hf-trainer",
    "precision": "bf16-true",
}


@pytest.mark.parametrize(
    "targets, adapted_out, adapted_in, glu",
    [
        # every linear adapted: LoRA_QKV, LoRA_W and LoRA_MLP; Llama-2-7B's block: q, k, v, o
        # 4096 -> 4096, gate and up 4096 -> 11008, down 11008 -> 4096
        ("all-linear", 4 * 4096 + 2 * 11008 + 4096, 4 * 4096 + 2 * 4096 + 11008, True),
        # q and v only: no group is complete, both adapters stay on peft's path
        (["q_proj", "v_proj"], 0, 0, False),
    ],
)
def test_unsloth_kernels_move_the_bytes_read_from_unsloth(targets, adapted_out, adapted_in, glu):
    """Unsloth's RMSNorm (4 forward, 6 backward per element), rotary embedding (clone and in-place
    kernel, 8 each way per q/k element), LoRA_MLP's gated activation (6 and 12 per inner element)
    and addmm_ of the adapters into their base outputs (2 per output element forward, 2 per input
    element backward), in place of transformers' eager tables (forward, and the traced backward) and
    peft's scale-and-add (10 per output element). Llama-2-7B, no recompute, 16-bit adapters."""
    keys = {**UNSLOTH_KEYS, "lora_targets": targets}
    fused, _, _ = _counts_and_rates("h100-sxm", **keys, fused_lora_kernels=True)
    plain, _, _ = _counts_and_rates("h100-sxm", **keys)
    h, qkv, inner = 4096, 4096 + 4096, 11008
    # peft's path backward: the scale's gradient (4 per output element) and the sum of the
    # adapter's input gradient with the base's (3 passes of 2 bytes per input element)
    # transformers' eager parts, forward and their traced backward: the frozen norm 36 + 84,
    # rotary 20 + 32, the gated activation 10 + 18
    before = (
        2 * (36 + 84) * h
        + (20 + 32) * qkv
        + ((10 + 18) * inner if glu else 0)
        + (10 + 4) * adapted_out
        + 6 * adapted_in
    )
    after = (
        2 * (4 + 6) * h
        + (8 + 8) * qkv
        + ((6 + 12) * inner if glu else 0)
        + 2 * adapted_out
        + 2 * adapted_in
    )
    assert plain.elementwise_bytes_per_token - fused.elementwise_bytes_per_token == 32 * (
        before - after
    )


def test_unsloth_recompute_runs_its_forward_kernels_again():
    keys = {**UNSLOTH_KEYS, "lora_targets": "all-linear", "fused_lora_kernels": True}
    plain, _, _ = _counts_and_rates("h100-sxm", **keys)
    again, _, _ = _counts_and_rates("h100-sxm", **{**keys, "gradient_checkpointing": True})
    h, qkv, inner = 4096, 8192, 11008
    # the block's forward once more: Unsloth's forward kernels, the residual adds (6 bytes per
    # element, twice; SDPA's fused kernel copies nothing around it), and the adapters' addmm_
    # reads
    forward = 2 * 4 * h + 8 * qkv + 6 * inner + 2 * (4 * 4096 + 2 * 11008 + 4096)
    forward += 2 * 6 * h
    assert again.elementwise_bytes_per_token - plain.elementwise_bytes_per_token == 32 * forward


def test_eager_attention_dispatches_its_own_ops():
    """Eager attention issues the scores' matmul, scaling, mask add, fp32 softmax, cast back and
    the values' matmul where SDPA is one call: 5 more forward ops per block, each with its
    backward; compiled, the count stays the compiled block's."""
    keys = {**LORA_QV_KEYS, "framework": "hf-trainer-4"}
    eager, _, _ = _counts_and_rates("a100-80gb-sxm", **keys, attention="eager")
    sdpa, _, _ = _counts_and_rates("a100-80gb-sxm", **keys, attention="sdpa")
    extra = 32 * timing.EAGER_ATTENTION_EXTRA_OPS_FORWARD * (1 + timing.BACKWARD_OPS_FACTOR)
    assert eager.kernels_per_micro - sdpa.kernels_per_micro == extra
    compiled = {**keys, "torch_compile": True}
    eager_c, _, _ = _counts_and_rates("a100-80gb-sxm", **compiled, attention="eager")
    sdpa_c, _, _ = _counts_and_rates("a100-80gb-sxm", **compiled, attention="sdpa")
    assert eager_c.kernels_per_micro == sdpa_c.kernels_per_micro


def test_dispatch_time_rests_on_the_rows_the_host_binds(validation):
    """The dispatch time is read from the rows whose step waits on the host: Unsloth's small
    models on fast cards and Qwen's 256-token steps, two sources; held out, each leaves the
    fit where the other puts it."""
    vt, result, rows = validation
    basis = result["constant_basis"]["dispatch_seconds_per_kernel"]
    assert {"github.com/invergent-ai/surogate", "github.com/QwenLM/Qwen"} <= set(basis["sources"])
    assert not basis["single_source"]
    fits = result["loso_fits"]
    for source in basis["sources"]:
        assert fits[source]["dispatch_seconds_per_kernel"] == pytest.approx(
            result["fit"]["dispatch_seconds_per_kernel"], rel=0.5
        )
    cases = {c.row_id: c for c in vt.cases(rows)}
    assert vt.host_bound(cases[192], vt.calc_params())  # Unsloth, Qwen3-1.7B LoRA on a B200
    assert not vt.host_bound(cases[60], vt.calc_params())


NETWORK_PLAN = {
    "model": "llama-2-70b",
    "gpu": "a100-80gb-sxm",
    "method": "full",
    "precision": "bf16-mixed",
    "micro_batch_size": 1,
    "seq_len": 2048,
    "sharding": "zero3",
    "dataset_tokens": 1e9,
}


def _plan_time(**kw):
    from calc.plan import plan_dict

    return plan_dict({**NETWORK_PLAN, **kw})["time"]


@pytest.mark.parametrize("network", sorted(comm.NETWORKS))
def test_network_changes_nothing_on_one_server(network):
    assert _plan_time(num_gpus=8, network=network) == _plan_time(num_gpus=8)


def test_catalogue_network_is_the_default():
    assert _plan_time(num_gpus=16, network="catalogue") == _plan_time(num_gpus=16)
    # the reference server's InfiniBand pays NCCL's RDMA step latency across servers
    link = _plan_time(num_gpus=16)["step"]["link"]
    assert link["step_latency_us"] == pytest.approx(comm.NCCL_RING_STEP_LATENCY_S["network"] * 1e6)
    assert "step_latency_us" not in _plan_time(num_gpus=8)["step"]["link"]


def test_ring_latency_is_nccls_model_of_steps_inside_and_across_servers():
    """NCCL's tuning model (Simple protocol, ring): base + (steps - inter) x intra + inter x net,
    n - 1 steps of which k - 1 cross the network for an all-gather, twice both for an
    all-reduce; nothing on one server."""
    h100 = gpus.get_gpu("h100-sxm")
    link = comm.collective_link(h100, 32, "efa-400")
    assert (link.nodes, link.intra_step_latency_s, link.step_latency_s) == (4, 3.4e-6, 15e-6)
    assert comm.ring_latency_s(link, 32) == pytest.approx(8.4e-6 + 28 * 3.4e-6 + 3 * 15e-6)
    assert comm.ring_latency_s(link, 32, all_reduce=True) == pytest.approx(
        8.4e-6 + 56 * 3.4e-6 + 6 * 15e-6
    )
    # a server of PCIe cards steps over PCIe inside each server
    pcie = comm.collective_link(gpus.get_gpu("l40s"), 16, "ethernet-25")
    assert comm.ring_latency_s(pcie, 16) == pytest.approx(8.4e-6 + 14 * 5.7e-6 + 50e-6)
    assert comm.ring_latency_s(comm.collective_link(h100, 8), 8) == 0.0


def test_pcie_cards_do_not_borrow_a_server_boards_network():
    """A server of PCIe cards has no adapter per GPU: RTX 5090 or H100 PCIe servers take the
    PCIe figure, not the DGX B200 / H100 one of their architecture; their ring then runs at the
    slower of the slot and that network."""
    per_gpu = comm.NETWORK_GB_PER_S_PER_GPU
    for card in ("rtx-5090", "h100-pcie", "a100-80gb-pcie"):
        gpu = gpus.get_gpu(card)
        assert comm.reference_network(gpu).gb_per_s_per_node == 8 * per_gpu["pcie"]
        link = comm.collective_link(gpu, 16)
        slot = comm.PCIE_GB_PER_S_PER_DIRECTION[gpu.pcie_gen]
        # a GeForce card stages through host memory (no peer-to-peer), the others use the slot
        intra = slot * (comm.LINK_EFFICIENCY if gpu.pcie_p2p else comm.HOST_STAGED_BUS_SHARE[8])
        network = 8 * per_gpu["pcie"] * comm.LINK_EFFICIENCY
        assert link.bytes_per_s == pytest.approx(min(intra, network) * 1e9)
    assert comm.reference_network(gpus.get_gpu("b200")).gb_per_s_per_node == 8 * 50.0
    # a slow named network is the bottleneck of a PCIe server too
    assert comm.collective_link(gpus.get_gpu("rtx-5090"), 16, "ethernet-100").kind == "network"


def test_geforce_cards_stage_collectives_through_host_memory():
    """No PCIe peer-to-peer on GeForce cards (NVIDIA/nccl-tests#287): NCCL's ring runs through
    host memory at the measured share of the slot (0.55 up to 4 cards, 0.44 up to 8), while a
    workstation card with peer-to-peer runs at the slot's rate and a bridged pair over NVLink."""
    geforce = {g.id for g in gpus.all_gpus() if g.name.startswith("GeForce")}
    assert geforce and {g.id for g in gpus.all_gpus() if not g.pcie_p2p} == geforce
    rtx4090, a6000 = gpus.get_gpu("rtx-4090"), gpus.get_gpu("rtx-a6000")
    for n, share in ((2, 0.55), (4, 0.55), (8, 0.44)):
        assert comm.collective_link(rtx4090, n).bytes_per_s == pytest.approx(31.5e9 * share)
        assert comm.collective_link(a6000, n).kind == ("nvlink" if n == 2 else "pcie")
    assert comm.collective_link(a6000, 8).bytes_per_s == pytest.approx(
        31.5e9 * comm.LINK_EFFICIENCY
    )
    assert comm.collective_link(gpus.get_gpu("rtx-3090"), 2).kind == "nvlink"  # its bridge
    slow = timing.estimate_time(_req(num_gpus=8, sharding="ddp")[0], rtx4090, 1e9)
    p2p = timing.estimate_time(
        _req(num_gpus=8, sharding="ddp")[0], replace(rtx4090, pcie_p2p=True), 1e9
    )
    assert slow.breakdown.exposed_communication > p2p.breakdown.exposed_communication
    assert rtx4090.to_dict()["pcie_p2p"] is False and a6000.to_dict()["pcie_p2p"] is True


def test_a_server_board_without_a_reference_network_is_a_coded_error():
    from calc.errors import InputError

    odd = replace(gpus.get_gpu("h100-sxm"), architecture="volta")
    with pytest.raises(InputError) as err:
        comm.collective_link(odd, 16)
    assert (err.value.code, err.value.field) == ("no_network_rate", "network")
    # a named network prices it, and one server never needs one
    assert comm.collective_link(odd, 16, "infiniband-3200").kind == "network"
    assert comm.collective_link(odd, 8).kind == "nvlink"


def test_every_cloud_instance_names_a_network_calc_prices_at_its_stated_rate():
    rows = gpus.instances()
    assert len(rows) >= 10 and {r.provider for r in rows} == {"aws", "gcp", "azure"}
    for row in rows:
        assert row.network in comm.NETWORKS, row.instance
        assert comm.NETWORKS[row.network].gbit_per_s_per_node == row.network_gbit_per_s
        assert gpus.get_gpu(row.gpu).id == row.gpu and row.gpus == comm.GPUS_PER_NODE
        assert row.intra_node in ("nvlink", "pcie") and row.source and row.as_of
    used = {row.network for row in rows}
    assert used >= {"efa-400", "efa-3200", "infiniband-3200", "roce-3200", "gpudirect-tcpx-800"}


def test_named_network_sets_the_rate_and_latency_across_servers():
    efa = _plan_time(num_gpus=16, network="efa-400")
    link = efa["step"]["link"]
    assert link["gb_per_s"] == pytest.approx(400 / 8 * comm.LINK_EFFICIENCY)
    assert link["step_latency_us"] == pytest.approx(comm.NETWORKS["efa-400"].step_latency_s * 1e6)
    # a 70B ZeRO-3 step on one micro-batch of 2048 tokens cannot hide 400 Gb/s per server
    assert (
        efa["tokens_per_second_per_gpu"]
        < 0.7 * _plan_time(num_gpus=16)["tokens_per_second_per_gpu"]
    )


def test_ring_latency_is_exposed_per_layer_under_zero3():
    """Every layer's all-gather (forward, backward) and reduce-scatter crosses the servers in
    n - 1 ring steps: with the rate held, the latency adds layers x steps x latency to the
    exposed communication of a step whose compute cannot hide it."""
    req, opts = parse_plan_request({**NETWORK_PLAN, "num_gpus": 16, "network": "ethernet-25"})
    c = timing.counts(req, req.sharding)
    rates = timing.card_rates(opts.gpu, 16, "ethernet-25")
    no_lat = replace(rates, link=comm.Link(rates.link.kind, rates.link.bytes_per_s))
    args = dict(
        num_gpus=16, sharding=Sharding.ZERO3, cpu_offload=timing.CpuOffload.NONE, efficiency=0.5
    )
    with_lat = timing.step_breakdown(c, rates, **args).exposed_communication
    without = timing.step_breakdown(c, no_lat, **args).exposed_communication
    one = comm.ring_latency_s(rates.link, 16)
    assert one == pytest.approx(8.4e-6 + 14 * 3.4e-6 + comm.NETWORKS["ethernet-25"].step_latency_s)
    # forward all-gather, then all-gather + reduce-scatter in the backward (A = 1): 3 per layer
    assert with_lat - without == pytest.approx(3 * c.layers * one)


def test_unknown_network_is_a_coded_error_naming_the_field():
    from calc.errors import InputError
    from calc.plan import plan_dict

    with pytest.raises(InputError) as err:
        plan_dict({**NETWORK_PLAN, "num_gpus": 16, "network": "token-ring"})
    assert (err.value.code, err.value.field) == ("unknown_value", "network")


def test_kbit_prepared_qlora_moves_fp32_activations_and_casts_each_4bit_linear():
    # the same loop with and without prepare_model_for_kbit_training: fp32 activations move
    # more element-wise bytes, and each 4-bit linear's input and output casts add 6 bytes per
    # element per pass (forward, backward, recompute)
    kw = {"method": "qlora", "framework": "pytorch-loop", "seq_len": 2048, "micro_batch_size": 1}
    kbit, _, req = _counts_and_rates("a100-80gb-sxm", **kw)
    plain, _, _ = _counts_and_rates("a100-80gb-sxm", **kw, behaviour={"qlora_prepare_kbit": False})
    assert req.qlora_prepare_kbit and req.gradient_checkpointing
    arch = req.model
    io = sum(l.active * (l.d_in + l.d_out) for l in arch.linears if l.quantizable)
    casts = timing.KBIT_CAST_BYTES_PER_ELEMENT * arch.num_layers * io * 3
    assert kbit.elementwise_bytes_per_token - casts > plain.elementwise_bytes_per_token
    # the output layer's matmul on fp32 weight and input: 2 V h forward, 2 V h backward
    assert kbit.fp32_matmul_flops_per_token == 4.0 * arch.vocab_size * arch.hidden_size
    assert plain.fp32_matmul_flops_per_token == 0.0


@pytest.mark.parametrize("method", ["full", "lora"])
def test_fp32_training_runs_every_matmul_but_attention_and_adapters_at_the_fp32_rate(method):
    # no autocast and no TF32 (torch's default): the block linears and the output layer on
    # the CUDA cores; attention has its own fp32 path, fp32 adapters theirs
    kw = {"method": method, "seq_len": 1024, "micro_batch_size": 2}
    fp32, rates, req = _counts_and_rates("a100-80gb-sxm", **kw, precision="fp32")
    bf16, _, _ = _counts_and_rates("a100-80gb-sxm", **kw, precision="bf16-true")
    f = fp32.flops
    assert fp32.attention_dtype == "fp32"
    assert fp32.fp32_matmul_flops_per_token == pytest.approx(
        f.total - f.attention_total - fp32.adapter_flops_per_token
    )
    assert fp32.fp32_matmul_flops_per_token >= f.linear_total > 0
    assert bf16.fp32_matmul_flops_per_token == 0.0
    args = dict(
        num_gpus=1, sharding=Sharding.NONE, cpu_offload=timing.CpuOffload.NONE, efficiency=0.5
    )
    slow = timing.step_breakdown(fp32, rates, **args).compute
    fast = timing.step_breakdown(bf16, rates, **args).compute
    # on an A100 (16x between the BF16 tensor and FP32 rates) the matmuls dominate both steps
    assert slow > 8 * fast


@pytest.mark.parametrize(
    "gpu_id, fp32_time",
    [
        # datasheets: BF16 dense over FP32 without tensor cores
        ("a100-80gb-sxm", 312 / 19.5),
        ("h100-sxm", 989 / 67),
        # the workstation Blackwell keeps full-rate FP32 lanes: 4x, not the A100's 16x
        ("rtx-pro-6000", 503.8 / 126.0),
        ("rtx-4090", 165.2 / 82.6),
    ],
)
def test_fp32_time_is_each_cards_datasheet_ratio(gpu_id, fp32_time):
    rates = timing.card_rates(gpus.get_gpu(gpu_id), 1)
    assert timing.fp32_time(rates) == pytest.approx(fp32_time)


@pytest.mark.parametrize("gpu_id", ["a100-80gb-sxm", "rtx-pro-6000"])
def test_fp32_output_layer_runs_at_the_fp32_rate(gpu_id):
    kw = {"method": "qlora", "framework": "pytorch-loop", "seq_len": 2048, "micro_batch_size": 1}
    c, rates, _ = _counts_and_rates(gpu_id, **kw)
    args = dict(
        num_gpus=1, sharding=Sharding.NONE, cpu_offload=timing.CpuOffload.NONE, efficiency=0.5
    )
    with_head = timing.step_breakdown(c, rates, **args).compute
    from dataclasses import replace

    without = timing.step_breakdown(replace(c, fp32_matmul_flops_per_token=0.0), rates, **args)
    T, h = c.tokens_micro, c.hidden
    sat = timing.saturation(T, h, rates.peak_flops / rates.clock)
    # the fp32 matmuls saturate at their own rate: a kernel's fixed time is fewer tokens there
    sat32 = timing.saturation(T, h, rates.fp32_flops / rates.clock)
    assert sat32 > sat
    # the fp32 FLOPs take the card's own FP32 time: FLOPs / (FP32 peak x efficiency), in place
    # of the 16-bit time the rest of the compute priced them at
    fp32_seconds = T * c.fp32_matmul_flops_per_token / (rates.fp32_flops * 0.5 * sat32)
    priced = T * c.fp32_matmul_flops_per_token / (rates.peak_flops * 0.5 * sat)
    assert with_head - without.compute == pytest.approx(fp32_seconds - priced)


@pytest.mark.parametrize(
    "gpu_id, tf32_time",
    [
        ("a100-80gb-sxm", timing.TF32_TIME),  # TF32 156 of BF16 312: 2x, not the FP32 lanes' 16x
        ("h100-sxm", timing.TF32_TIME),
        ("rtx-4090", 165.2 / 82.6),  # FP32 lanes as fast as its TF32 tensor rate: unchanged
        ("t4", None),  # Turing: no TF32 tensor cores, allow_tf32 changes nothing
    ],
)
def test_tf32_runs_fp32_matmuls_at_half_the_bf16_rate_where_the_card_has_it(gpu_id, tf32_time):
    kw = {"method": "full", "precision": "fp32", "seq_len": 1024, "micro_batch_size": 2}
    plain, rates, _ = _counts_and_rates(gpu_id, model="llama-3.2-1b", **kw)
    tf32, _, _ = _counts_and_rates(gpu_id, model="llama-3.2-1b", tf32=True, **kw)
    assert plain.fp32_matmul_flops_per_token > 0 and tf32.tf32 and not plain.tf32
    assert timing.fp32_matmul_time(plain, rates) == timing.fp32_time(rates)
    expected = timing.fp32_time(rates) if tf32_time is None else tf32_time
    assert timing.fp32_matmul_time(tf32, rates) == pytest.approx(expected)
    args = dict(
        num_gpus=1, sharding=Sharding.NONE, cpu_offload=timing.CpuOffload.NONE, efficiency=0.5
    )
    slow = timing.step_breakdown(plain, rates, **args).compute
    fast = timing.step_breakdown(tf32, rates, **args).compute
    assert fast < slow if expected < timing.fp32_time(rates) else fast == pytest.approx(slow)


def test_tf32_moves_no_bf16_step():
    kw = {"method": "lora", "precision": "bf16-true", "seq_len": 2048, "micro_batch_size": 1}
    plain, rates, _ = _counts_and_rates("a100-80gb-sxm", **kw)
    tf32, _, _ = _counts_and_rates("a100-80gb-sxm", tf32=True, **kw)
    args = dict(
        num_gpus=1, sharding=Sharding.NONE, cpu_offload=timing.CpuOffload.NONE, efficiency=0.5
    )
    assert timing.step_breakdown(tf32, rates, **args) == timing.step_breakdown(plain, rates, **args)


def test_bf16_on_a_card_without_bf16_tensor_cores_runs_at_its_measured_share_of_fp32():
    """Turing has FP16 tensor cores only: a bf16 request's matmuls run at
    BF16_WITHOUT_TENSOR_CORES_SHARE of the card's FP32 rate (PyTorch accepts bf16 there), fp16's
    on the tensor cores; an Ampere card runs both on its tensor cores alike."""
    kw = {"method": "lora", "seq_len": 2048, "micro_batch_size": 2, "model": "llama-3.2-1b"}
    args = dict(
        num_gpus=1, sharding=Sharding.NONE, cpu_offload=timing.CpuOffload.NONE, efficiency=0.5
    )
    bf16, rates, _ = _counts_and_rates("t4", precision="bf16-true", **kw)
    fp16, _, _ = _counts_and_rates("t4", precision="fp16-mixed", **kw)
    assert (bf16.half_dtype, fp16.half_dtype) == ("bf16", "fp16")
    emulated = timing.half_matmul_rates(bf16, rates)
    assert emulated.peak_flops == pytest.approx(
        rates.fp32_flops * timing.BF16_WITHOUT_TENSOR_CORES_SHARE
    )
    assert timing.half_matmul_rates(fp16, rates) == rates
    slow = timing.step_breakdown(bf16, rates, **args).compute
    fast = timing.step_breakdown(fp16, rates, **args).compute
    # 65 TFLOPS of FP16 tensor rate against 0.55 x 8.1 of FP32 lanes: an order of magnitude
    assert slow > 8 * fast
    a100_bf16, a100, _ = _counts_and_rates("a100-80gb-sxm", precision="bf16-true", **kw)
    assert timing.half_matmul_rates(a100_bf16, a100) == a100
    assert timing.bf16_without_tensor_cores(timing.Precision.BF16_MIXED, gpus.get_gpu("t4"))
    assert timing.bf16_without_tensor_cores(timing.Precision.BF16_TRUE, gpus.get_gpu("rtx-2080-ti"))
    assert not timing.bf16_without_tensor_cores(timing.Precision.FP16_MIXED, gpus.get_gpu("t4"))
    assert not timing.bf16_without_tensor_cores(
        timing.Precision.BF16_TRUE, gpus.get_gpu("rtx-3090")
    )


def test_the_plan_warns_of_bf16_without_tensor_cores_on_the_card_and_its_recommendations():
    from calc.plan import plan_dict

    body = {"model": "llama-3.2-1b", "method": "lora", "dataset_tokens": 1e6, "gpu": "t4"}
    plan = plan_dict(body)
    assert "bf16_without_tensor_cores" in plan["warnings"]
    configs = plan["recommendations"]["configs"]
    assert any(gpus.get_gpu(config["gpu"]).architecture == "turing" for config in configs)
    for config in configs:
        turing = gpus.get_gpu(config["gpu"]).architecture == "turing"
        assert ("bf16_without_tensor_cores" in config["warnings"]) == turing, config["id"]
    fp16 = plan_dict({**body, "precision": "fp16-mixed"})
    assert "bf16_without_tensor_cores" not in fp16["warnings"]
    assert fp16["time_hours"] * 3 < plan["time_hours"]


def test_flash2_share_reads_the_papers_a100_figures():
    share = timing.flash2_peak_share
    # 16k keys, causal, head dim 128: 189 TFLOP/s of the paper's 3.5 forwards, calc counts 3
    assert share("a100", True, 128, 16384, 0.0) == pytest.approx(189 / 312 * 3 / 3.5)
    # a checkpointed layer's forward again: 4 of calc's forwards against 4.5 of the paper's
    assert share("a100", True, 128, 16384, 1.0) == pytest.approx(189 / 312 * 4 / 4.5)
    # the bars have levelled off: longer sequences keep the 16k figure, shorter ones the 512
    assert share("a100", True, 128, 131072, 0.0) == share("a100", True, 128, 16384, 0.0)
    assert share("a100", True, 64, 100, 0.0) == pytest.approx(88 / 312 * 3 / 3.5)
    # halfway between 2k and 4k in log2 of the length: halfway between 155 and 173
    mid = share("a100", True, 128, 2048 * 2**0.5, 0.0)
    assert mid == pytest.approx((155 + 173) / 2 / 312 * 3 / 3.5)
    # head dims: 96 reads the 128 panel, 32 the 64 panel
    assert share("a100", True, 96, 8192, 0.0) == pytest.approx(182 / 312 * 3 / 3.5)
    assert share("a100", True, 32, 8192, 0.0) == pytest.approx(165 / 312 * 3 / 3.5)
    # the full mask's panels, the labels under the legend included
    assert share("a100", False, 128, 1024, 0.0) == pytest.approx(173 / 312 * 3 / 3.5)
    assert share("a100", False, 128, 4096, 0.0) == pytest.approx(196 / 312 * 3 / 3.5)
    # the H100's figure, as a share of its own peak: Ampere code far below Hopper's GEMMs
    assert share("hopper", True, 128, 16384, 0.0) == pytest.approx(328 / 989 * 3 / 3.5)
    assert share("hopper", False, 64, 512, 0.0) == pytest.approx(215 / 989 * 3 / 3.5)
    assert share("hopper", True, 128, 16384, 0.0) < share("a100", True, 128, 16384, 0.0)


def test_flash2_tables_are_whole_panels():
    """Every table has the four panels (mask x head dim) at the same six lengths, and every rate
    is below the card's peak; the paper's two figures climb with the length (the B200's panel,
    one run of the benchmark, dips at 4k and is kept as measured)."""
    lengths = [512, 1024, 2048, 4096, 8192, 16384]
    for card_class, table in timing.FLASH2_TABLES.items():
        assert set(table) == {
            (m, d, n) for m in ("causal", "full") for d in (64, 128) for n in lengths
        }
        for m in ("causal", "full"):
            for d in (64, 128):
                rates = [table[m, d, n] for n in lengths]
                if card_class != "blackwell":
                    assert rates == sorted(rates), (card_class, m, d)
                assert rates[-1] < timing.FLASH2_PEAK_TFLOPS[card_class]
    assert timing.FLASH2_ONLY_CLASSES <= set(timing.FLASH2_TABLES)


@pytest.mark.parametrize("attention", ["sdpa", "flash"])
def test_flash2_on_the_a100_runs_at_its_measured_rate(attention):
    """On an A100-class card the flash kernel is FlashAttention-2 whichever way it is called,
    priced at the paper's rate at the request's length, not at the class efficiency."""
    c, rates, _ = _counts_and_rates(
        "a100-80gb-sxm", attention=attention, seq_len=16384, gradient_checkpointing=False
    )
    share = timing.flash2_peak_share("a100", True, 128, 16384, 0.0)
    assert c.attention_keys == 16384
    assert timing.attention_time_factor(c, rates, 0.8) == pytest.approx(0.8 / share)
    # a longer sequence of the same run is no faster per FLOP than 16k
    long, _, _ = _counts_and_rates(
        "a100-80gb-sxm", attention=attention, seq_len=65536, gradient_checkpointing=False
    )
    assert timing.attention_time_factor(long, rates, 0.8) == pytest.approx(0.8 / share)
    # the PCIe card is of the class: the same share of its own peak
    _, pcie, _ = _counts_and_rates("a100-80gb-pcie")
    assert timing.attention_time_factor(c, pcie, 0.8) == pytest.approx(0.8 / share)
    # a GDDR Ampere card has no published figure: its class efficiency holds
    _, a10g, _ = _counts_and_rates("a10g")
    assert timing.attention_time_factor(c, a10g, 0.8) == 1.0


def test_flash2_measured_rate_slows_long_sequences_on_the_a100(monkeypatch):
    """At 16k tokens attention is a quarter of a 7B step's FLOPs: the measured rate below the
    class efficiency makes the step longer than at the class efficiency, by less than the ratio
    of the two (the linears keep the class rate)."""
    from calc.plan import Planner

    def seconds_per_token() -> float:
        req, opts = parse_plan_request(
            {
                "model": "llama-2-7b",
                "gpu": "a100-80gb-sxm",
                "dataset_tokens": 1e9,
                "seq_len": 16384,
                "attention": "flash",
            }
        )
        t = Planner(req, opts).time(opts.gpu, 1, req.sharding.value)
        return 1.0 / t.tokens_per_second_per_gpu

    measured = seconds_per_token()
    ratio = timing.MATMUL_EFFICIENCY["a100"] / timing.flash2_peak_share(
        "a100", True, 128, 16384, 1.0
    )
    monkeypatch.setattr(timing, "FLASH2_TABLES", {})
    at_class = seconds_per_token()
    assert 1.05 < measured / at_class < ratio


def test_flash2_peaks_are_the_catalogue_rates_of_the_cards_measured():
    """Each FlashAttention-2 table is a share of the peak of the card it was measured on: those
    peaks are the catalogue's own rates, not a second copy that could drift from them."""
    from calc.gpus import get_gpu

    measured_on = {"a100": "a100-80gb-sxm", "hopper": "h100-sxm", "blackwell": "b200"}
    assert set(measured_on) == set(timing.FLASH2_TABLES) == set(timing.FLASH2_PEAK_TFLOPS)
    for card_class, gpu_id in measured_on.items():
        gpu = get_gpu(gpu_id)
        assert gpu.utilisation_class == card_class
        assert timing.FLASH2_PEAK_TFLOPS[card_class] == gpu.bf16_dense_tflops


def test_flash2_on_the_b200_is_the_hopper_table_at_the_measured_speed_up():
    """The B200 table holds its one published panel as measured and scales the H100's other
    panels by that panel's ratio at each length: the causal and head dim 128 panels keep the
    H100's shape."""
    b200, h100 = timing.FLASH2_B200_TFLOPS, timing.FLASH2_H100_TFLOPS
    for n, rate in timing.FLASH2_B200_FULL_64_TFLOPS.items():
        assert b200["full", 64, n] == pytest.approx(rate)
        ratio = rate / h100["full", 64, n]
        assert 1.05 < ratio < 1.25
        for m, d in (("causal", 64), ("causal", 128), ("full", 128)):
            assert b200[m, d, n] == pytest.approx(h100[m, d, n] * ratio)
    # about a seventh of the B200's dense peak, where the H100 table is about a third of its own
    assert b200["full", 128, 8192] / timing.FLASH2_PEAK_TFLOPS["blackwell"] < 0.2


def test_flash2_on_the_b200_runs_at_its_rate_and_cudnn_at_the_class_efficiency():
    """torch 2.5.1-2.10 (cuDNN last) send a causal bf16 step on a B200 to SDPA's flash kernel,
    FlashAttention-2, priced at its measured B200 rate, and so is the FlashAttention package
    (version 3 runs on Hopper only); torch 2.13 sends it to cuDNN, at the class efficiency."""
    eff = timing.MATMUL_EFFICIENCY["blackwell"]
    c, rates, _ = _counts_and_rates("b200", sdpa_cudnn_last=True, seq_len=8192)
    share = timing.flash2_peak_share(
        "blackwell", True, c.head_dim, c.attention_keys, c.flops.attention_recompute_share
    )
    assert share < eff / 2
    assert timing.attention_time_factor(c, rates, eff) == pytest.approx(eff / share)
    cudnn, rates, _ = _counts_and_rates("b200", seq_len=8192)
    assert timing.attention_time_factor(cudnn, rates, eff) == 1.0
    package, rates, _ = _counts_and_rates("b200", attention="flash", seq_len=8192)
    assert timing.attention_time_factor(package, rates, eff) == pytest.approx(eff / share)


def _hopper_flash2(c) -> float:
    causal = c.attention_mask == "causal"
    return timing.flash2_peak_share(
        "hopper", causal, c.head_dim, c.attention_keys, c.flops.attention_recompute_share
    )


@pytest.mark.parametrize(
    "gpu_id, request_keys, kernel_time",
    [
        # SDPA's flash backend (FlashAttention-2) on Hopper, chosen where cuDNN comes last
        # (torch 2.5): Ampere's mma.sync, the H100's measured rate against the class's 60 %
        ("h100-sxm", {"sdpa_cudnn_last": True}, 1.0),
        # torch 2.5's order (cuDNN last) sends a padding mask to the memory-efficient kernel,
        # also Ampere code: twice flash's time, at the H100's measured full-mask rate
        (
            "h100-sxm",
            {"attention_mask": "padding", "sdpa_cudnn_last": True},
            timing.ATTENTION_KERNEL_TIME["efficient"],
        ),
    ],
)
def test_ampere_attention_kernels_run_at_their_hopper_rate(gpu_id, request_keys, kernel_time):
    c, rates, _ = _counts_and_rates(gpu_id, **request_keys)
    expected = kernel_time * 0.6 / _hopper_flash2(c)
    assert timing.attention_time_factor(c, rates, 0.6) == pytest.approx(expected)


@pytest.mark.parametrize(
    "gpu_id, request_keys",
    [
        # the FlashAttention package names no version (FA3 uses wgmma): the class efficiency
        ("h100-sxm", {"attention": "flash"}),
        # cuDNN (wgmma) keeps the class efficiency on Hopper
        ("h100-sxm", {"attention_mask": "padding"}),
        ("h100-sxm", {}),
        # on Blackwell cuDNN keeps the class efficiency (tcgen05)
        ("b200", {}),
    ],
)
def test_other_kernels_keep_the_class_efficiency(gpu_id, request_keys):
    c, rates, _ = _counts_and_rates(gpu_id, **request_keys)
    assert timing.attention_time_factor(c, rates, 0.6) == 1.0


def test_the_hopper_rate_only_caps_a_higher_efficiency():
    # a user's mfu below FlashAttention-2's measured share: the kernel is not slowed further
    c, rates, _ = _counts_and_rates("h100-sxm", sdpa_cudnn_last=True)
    below = _hopper_flash2(c) * 0.9
    assert timing.attention_time_factor(c, rates, below) == 1.0
    assert timing.attention_time_factor(c, rates, 0.6) > 1.0


def test_bitsandbytes_up_to_0_46_runs_4bit_matmuls_in_fp32_on_fp32_activations():
    """bitsandbytes 0.45-0.46 take each 4-bit linear's compute dtype from its first input: on
    fp32 activations (kbit preparation, no autocast) every 4-bit matmul is an fp32 matmul on
    the CUDA cores, its dequantized weight is written in fp32 and the casts around it vanish."""
    kw = {"method": "qlora", "framework": "pytorch-loop", "seq_len": 2048, "micro_batch_size": 1}
    bf16, rates, req = _counts_and_rates("a100-80gb-sxm", **kw)
    fp32, _, _ = _counts_and_rates("a100-80gb-sxm", **kw, qlora_compute_dtype_from_input=True)
    arch = req.model
    quantized = arch.num_layers * sum(
        l.active * l.d_in * l.d_out for l in arch.linears if l.quantizable
    )
    # forward, recompute and the input gradient: 2 FLOPs per 4-bit weight each
    assert req.gradient_checkpointing
    assert fp32.fp32_matmul_flops_per_token - bf16.fp32_matmul_flops_per_token == pytest.approx(
        2.0 * quantized * 3
    )
    # the dequantized copy is 4 bytes, not 2, per weight and pass
    weights = fp32.quantized_params
    assert fp32.dequantisation_bytes - bf16.dequantisation_bytes == pytest.approx(
        weights * (timing.FP32_DEQUANT_WRITE_BYTES - timing.DEQUANT_WRITE_BYTES)
    )
    # the input and output casts of each 4-bit linear are gone
    io = sum(l.active * (l.d_in + l.d_out) for l in arch.linears if l.quantizable)
    casts = timing.KBIT_CAST_BYTES_PER_ELEMENT * arch.num_layers * io * 3
    assert bf16.elementwise_bytes_per_token - fp32.elementwise_bytes_per_token == pytest.approx(
        casts
    )
    args = dict(
        num_gpus=1, sharding=Sharding.NONE, cpu_offload=timing.CpuOffload.NONE, efficiency=0.5
    )
    slow = timing.step_breakdown(fp32, rates, **args).step_seconds
    fast = timing.step_breakdown(bf16, rates, **args).step_seconds
    assert slow > 3 * fast  # an A100 runs fp32 matmuls 16x slower than bf16 ones


@pytest.mark.parametrize(
    "request_keys",
    [
        # 16-bit activations: the compute dtype stays 16-bit whatever bitsandbytes does
        {"precision": "bf16-mixed"},
        {"behaviour": {"qlora_prepare_kbit": False}},
    ],
)
def test_the_input_dtype_rule_needs_fp32_activations(request_keys):
    kw = {"method": "qlora", "framework": "pytorch-loop", "seq_len": 2048, "micro_batch_size": 1}
    off, _, _ = _counts_and_rates("a100-80gb-sxm", **kw, **request_keys)
    on, _, _ = _counts_and_rates(
        "a100-80gb-sxm", **kw, **request_keys, qlora_compute_dtype_from_input=True
    )
    assert on == off


def test_transformers_4_loops_take_bitsandbytes_0_45_compute_dtype_rule():
    # the profile of hand-written loops on transformers 4.46-4.53 sets it; calc's default
    # (bitsandbytes 0.49.2) and the transformers 5 loop do not
    assert _counts_and_rates("a100-80gb-sxm", framework="pytorch-loop-4")[
        2
    ].qlora_compute_dtype_from_input
    assert not _counts_and_rates("a100-80gb-sxm", framework="pytorch-loop")[
        2
    ].qlora_compute_dtype_from_input


def test_deepspeed_zero3_sends_a_message_per_prefetch_bucket_and_reduce_bucket():
    """DeepSpeed gathers per module group (prefetch bucket 0.9 hidden^2 elements), FSDP per
    layer. Llama 2 70B's block, in forward order: norm + q (67.1M) | k + v + o | norm + gate |
    up | down against 60.4M elements: 5 gathers per block; gradients leave in buckets of
    hidden^2 elements."""
    keys = {**NETWORK_PLAN, "num_gpus": 16}
    ds_req, _ = parse_plan_request({**keys, "sharding_engine": "deepspeed"})
    fsdp_req, _ = parse_plan_request(keys)
    ds = timing.counts(ds_req, Sharding.ZERO3)
    assert (ds.gather_messages, ds.reduce_bucket_params) == (5 * 80, 8192**2)
    assert timing.zero3_messages(fsdp_req, Sharding.ZERO3) == (0, 0)
    assert timing.zero3_messages(ds_req, Sharding.ZERO2) == (0, 0)
    # more messages, more latency across servers; none on one server
    fsdp = timing.counts(fsdp_req, Sharding.ZERO3)
    rates = timing.card_rates(gpus.get_gpu("a100-80gb-sxm"), 16, "ethernet-25")
    args = dict(
        num_gpus=16, sharding=Sharding.ZERO3, cpu_offload=timing.CpuOffload.NONE, efficiency=0.5
    )
    lat = comm.ring_latency_s(rates.link, 16)
    extra = timing.step_breakdown(ds, rates, **args).exposed_communication - (
        timing.step_breakdown(fsdp, rates, **args).exposed_communication
    )
    reduces = -(-ds.grad_params // ds.reduce_bucket_params)
    # forward gathers, backward gathers and reduce-scatters, all exposed on 25 Gb/s
    assert extra == pytest.approx((2 * (400 - 80) + reduces - 80) * lat)


def test_card_rates_run_at_the_sustained_clock():
    """A power-limited card's tensor, FP8 and FP32 rates are the datasheet's times sustained /
    boost clock; a reference card's are the datasheet's exactly (its fitted rows unchanged)."""
    l4, ref = gpus.get_gpu("l4"), gpus.get_gpu("rtx-4090")
    r = timing.card_rates(l4, 1, comm.CATALOGUE_NETWORK)
    factor = 1781 / 2040
    assert r.peak_flops == pytest.approx(121e12 * factor)
    assert r.fp8_peak_flops == pytest.approx(242.5e12 * factor)
    assert r.fp32_flops == pytest.approx(30.3e12 * factor)
    assert r.memory_bytes_per_s == 300e9 * timing.MEMORY_BANDWIDTH_EFFICIENCY
    rr = timing.card_rates(ref, 1, comm.CATALOGUE_NETWORK)
    assert (rr.peak_flops, rr.fp32_flops) == (ref.bf16_dense_flops, ref.fp32_flops)


def test_a_power_limited_card_is_slower_than_its_datasheet_rate_says():
    """Same family efficiency, same request: the RTX 6000 Ada (300 W for 142 SMs) runs its
    matmuls at its sustained clock, so the matmul part of its step grows by boost / sustained
    over what its datasheet rate alone would give. LoRA adapters' rank-r matmuls that their bytes
    bound run at the memory's rate, which the clock does not set: a LoRA step grows by less."""

    def ratios(method: str) -> tuple[float, float]:
        req, opts = parse_plan_request(
            {
                "model": "llama-3.1-8b",
                "method": method,
                "gpu": "rtx-6000-ada",
                "dataset_tokens": 1e9,
            }
        )
        card = opts.gpu
        at_boost = replace(card, sustained_clock_mhz=card.boost_clock_mhz)
        slow = timing.estimate_time(req, card, 1e9)
        fast = timing.estimate_time(req, at_boost, 1e9)
        assert slow.tokens_per_second_per_gpu < fast.tokens_per_second_per_gpu
        clock = card.boost_clock_mhz / card.sustained_clock_mhz
        return slow.breakdown.compute / fast.breakdown.compute, clock

    ratio, clock = ratios("full")
    assert ratio == pytest.approx(clock)
    lora, clock = ratios("lora")
    assert 1.0 < lora < clock


def _gemma_counts(model: str, extra_without: str | None = None, **request):
    req, opts = parse_plan_request(
        {"model": model, "gpu": "a100-80gb-sxm", "dataset_tokens": 1e9, **request}
    )
    if extra_without:
        extra = {k: v for k, v in req.model.extra.items() if k != extra_without}
        req = replace(req, model=replace(req.model, extra=extra))
    return timing.counts(req, req.sharding), timing.card_rates(opts.gpu, 1), req


@pytest.mark.parametrize(
    "request_keys, logit_bytes",
    [
        # bf16 logits: the tanh cap's 6 forward and 7 backward passes at 2 bytes
        ({"method": "lora"}, 2),
        # QLoRA after kbit preparation in a loop without autocast: the output layer is fp32
        ({"method": "qlora", "framework": "hf-custom-loop", "precision": "bf16-true"}, 4),
    ],
)
def test_gemma2_final_logit_softcapping_is_counted(request_keys, logit_bytes):
    capped, _, req = _gemma_counts("gemma-2-9b", **request_keys)
    plain, _, _ = _gemma_counts("gemma-2-9b", "final_logit_softcapping", **request_keys)
    assert req.model.extra["final_logit_softcapping"] == 30.0
    assert req.model.vocab_size == 256_000
    per_logit = (6 + 7) * logit_bytes
    assert capped.elementwise_bytes_per_token - plain.elementwise_bytes_per_token == (
        pytest.approx(per_logit * 256_000)
    )


def test_gemma2_eager_attention_caps_its_scores():
    kw = {"seq_len": 4096, "micro_batch_size": 1, "attention": "eager"}
    capped, rates, req = _gemma_counts("gemma-2-9b", **kw)
    plain, _, _ = _gemma_counts("gemma-2-9b", "attn_logit_softcapping", **kw)
    assert req.model.extra["attn_logit_softcapping"] == 50.0
    assert capped.flops.recompute > 0  # checkpointing: the capped forward runs again
    # 42 layers x 16 heads x 4096 keys per query token, bf16 scores: 6 element passes
    # forward, 7 backward plus 6 recomputed
    elements = 42 * 16 * 4096
    fwd, bwd = timing.score_bytes_per_token(capped, rates.capability)
    fwd0, bwd0 = timing.score_bytes_per_token(plain, rates.capability)
    assert (fwd - fwd0, bwd - bwd0) == (elements * 2 * 6, elements * 2 * (7 + 6))
    # SDPA is handed no cap: nothing more than without it
    sdpa = {**kw, "attention": "sdpa", "attention_mask": "padding"}
    capped_sdpa, _, _ = _gemma_counts("gemma-2-9b", **sdpa)
    plain_sdpa, _, _ = _gemma_counts("gemma-2-9b", "attn_logit_softcapping", **sdpa)
    assert timing.score_bytes_per_token(capped_sdpa, rates.capability) == (
        timing.score_bytes_per_token(plain_sdpa, rates.capability)
    )


@pytest.mark.parametrize("compiled, extra_bytes", [(False, 40 - 36), (True, 0)])
def test_rms_norm_scaling_in_fp32_moves_more_bytes(compiled, extra_bytes):
    kw = {"method": "lora", "torch_compile": compiled}
    fp32_scale, _, req = _gemma_counts("gemma-7b", **kw)
    plain, _, _ = _gemma_counts("gemma-7b", "norm_scale_fp32", **kw)
    arch = req.model
    assert arch.extra["norm_scale_fp32"] and arch.norms_per_layer == 2
    # per layer two norms over the hidden state; forward and the recomputed forward, and the
    # backward: eager, the traced modules' difference with frozen weights (88 - 84); compiled,
    # twice the forward's
    backward = extra_bytes * timing.BACKWARD_ELEMENTWISE_FACTOR
    if not compiled:
        table = timing.NORM_BACKWARD_BYTES_PER_ELEMENT
        backward = table["fp32_scale", "frozen"] - table["llama", "frozen"]
    expected = arch.num_layers * 2 * arch.hidden_size * (extra_bytes * 2 + backward)
    assert fp32_scale.elementwise_bytes_per_token - plain.elementwise_bytes_per_token == (
        pytest.approx(expected)
    )


@pytest.mark.parametrize("forced", [None, 0.4])
def test_time_says_which_rate_each_utilisation_is_a_share_of(forced):
    """On a power-limited card (L4) the rate the time runs at is the datasheet's at the
    sustained clock: ``factors.mfu``, forced or the class's, is a share of that rate, while
    ``effective_utilisation`` is of the datasheet's peak; the response names both bases and
    where ``mfu`` came from, and the achieved rate over the named basis stays within ``mfu``."""
    from calc.plan import plan_dict

    request = {"model": "llama-3.2-1b", "method": "full", "gpu": "l4", "dataset_tokens": 1e8}
    if forced is not None:
        request["mfu"] = forced
    t = plan_dict(request)["time"]
    basis = t["utilisation_basis"]
    assert basis == {
        "mfu": "sustained_peak_flops_per_gpu",
        "mfu_source": "card_class" if forced is None else "request",
        "effective_utilisation": "peak_flops_per_gpu",
    }
    l4 = gpus.get_gpu("l4")
    assert l4.clock_factor < 1
    assert t["sustained_peak_flops_per_gpu"] == pytest.approx(
        t["peak_flops_per_gpu"] * l4.clock_factor
    )
    factors = t["factors"]
    if forced is not None:
        assert factors["mfu"] == forced
    achieved = factors["effective_utilisation"] * t[basis["effective_utilisation"]]
    assert achieved / t[basis["mfu"]] <= factors["mfu"]
    assert achieved / t[basis["mfu"]] > factors["effective_utilisation"]


MOE_ZERO3_PLAN = {
    "model": "qwen3-30b-a3b",
    "gpu": "a100-80gb-sxm",
    "method": "full",
    "precision": "bf16-mixed",
    "micro_batch_size": 1,
    "seq_len": 8192,
    "gradient_checkpointing": True,
    "sharding": "zero3",
    "sharding_engine": "deepspeed",
    "num_gpus": 16,
    "dataset_tokens": 1e9,
}


def test_deepspeed_zero3_hooks_every_module_an_expert_loop_calls():
    """transformers 4.52's Qwen3-MoE block, one module per expert matrix: per block the block,
    attention and MoE modules, 2 norms + q/k norms, 4 attention linears and the router, and 128
    experts of 5 modules (MLP, gate/up/down, activation); 6 outside the blocks. The experts'
    calls sit in a loop that synchronises host and device each expert."""
    req, _ = parse_plan_request({**MOE_ZERO3_PLAN, "framework": "hf-trainer-4"})
    per_block = 3 + 4 + 5 + 128 * 5
    assert timing.zero3_module_calls(req, Sharding.ZERO3) == pytest.approx(
        (48 * per_block + 6, 48 * 128 * 5)
    )
    c = timing.counts(req, Sharding.ZERO3)
    assert (c.hooked_module_calls, c.synced_module_calls) == pytest.approx(
        (48 * per_block + 6, 48 * 640)
    )
    # FSDP, ZeRO-2 and 3-D experts (transformers 5: one module holds them all, no expert loop)
    fsdp, _ = parse_plan_request({**MOE_ZERO3_PLAN, "sharding_engine": "fsdp"})
    assert timing.zero3_module_calls(fsdp, Sharding.ZERO3) == (0, 0)
    assert timing.zero3_module_calls(req, Sharding.ZERO2) == (0, 0)
    fused, _ = parse_plan_request({**MOE_ZERO3_PLAN, "framework": "hf-trainer"})
    assert timing.zero3_module_calls(fused, Sharding.ZERO3) == pytest.approx(
        (48 * (3 + 4 + 5 + 1) + 6, 0)
    )


def test_few_tokens_call_only_the_experts_they_reach():
    """Expected experts hit by T tokens routed to 8 of 128: 128 (1 - (1 - 8/128)^T)."""
    req, _ = parse_plan_request(
        {**MOE_ZERO3_PLAN, "framework": "hf-trainer-4", "seq_len": 4, "num_gpus": 2}
    )
    called = 128 * (1 - (1 - 8 / 128) ** 4)
    assert timing.zero3_module_calls(req, Sharding.ZERO3)[1] == pytest.approx(48 * 5 * called)


def test_zero3_hooks_inside_a_synchronising_expert_loop_add_to_the_step():
    """The hooks of the expert loop's modules in forward and recomputed forward add to the step
    whole (the GPU waits on the host each expert); the rest join the host's dispatch, hidden
    behind GPU work that lasts longer."""
    req, _ = parse_plan_request({**MOE_ZERO3_PLAN, "framework": "hf-trainer-4"})
    c = timing.counts(req, Sharding.ZERO3)
    rates = timing.card_rates(gpus.get_gpu("a100-80gb-sxm"), 16)
    args = dict(
        num_gpus=16, sharding=Sharding.ZERO3, cpu_offload=timing.CpuOffload.NONE, efficiency=0.5
    )
    with_hooks = timing.step_breakdown(c, rates, **args)
    without = timing.step_breakdown(
        replace(c, hooked_module_calls=0.0, synced_module_calls=0.0), rates, **args
    )
    synced = 48 * 640 * 2 * timing.ZERO3_HOOK_SECONDS_PER_MODULE
    assert c.passes == 3
    assert with_hooks.overheads - without.overheads >= synced
    # the backward's hooks (31,302 calls at 0.3 ms) outlast its GPU work: the host bounds it
    assert with_hooks.step_seconds > without.step_seconds + synced
    # a dense model's hooks hide behind its GPU work: Qwen2.5-14B at 8192 tokens on 8 GPUs
    dense, _ = parse_plan_request(
        {**MOE_ZERO3_PLAN, "framework": "hf-trainer-4", "model": "qwen2.5-14b", "num_gpus": 8}
    )
    d = timing.counts(dense, Sharding.ZERO3)
    assert d.hooked_module_calls > 0 and d.synced_module_calls == 0
    args8 = {**args, "num_gpus": 8}
    r8 = timing.card_rates(gpus.get_gpu("a100-80gb-sxm"), 8)
    assert (
        timing.step_breakdown(d, r8, **args8).step_seconds
        == timing.step_breakdown(replace(d, hooked_module_calls=0.0), r8, **args8).step_seconds
    )


def test_fsdp2_copy_out_is_memory_traffic_on_the_compute_stream():
    """FSDP2 (``fsdp_fully_shard``) copies each gathered unit out of its all-gather buffer on
    the compute stream: read and write (2 passes) of the blocks' bf16 bytes in the forward and
    again in the backward, and of the root (embedding, final norm, output layer) once, over
    the memory's rate, in the element-wise part; nothing else in the step moves."""
    kw = {"num_gpus": 8, "sharding": "zero3", "gpu": "h100-sxm", "precision": "bf16-mixed"}
    req, opts = _req(**kw)
    on_req, _ = _req(fsdp_fully_shard=True, **kw)
    off = timing.estimate_time(req, opts.gpu, 1e9).breakdown
    on = timing.estimate_time(on_req, opts.gpu, 1e9).breakdown
    # Llama 2 7B: 6,738,415,616 parameters, root = 2 x 32000 x 4096 + 4096
    root = 2 * 32000 * 4096 + 4096
    blocks = 6_738_415_616 - root
    bw = 3350e9 * timing.MEMORY_BANDWIDTH_EFFICIENCY
    copy_out = 2 * (2 * blocks + root) * 2 / bw
    assert on.elementwise - off.elementwise == pytest.approx(copy_out)
    assert (on.compute, on.optimizer) == (off.compute, off.optimizer)
    # the busier compute stream hides no less communication than before
    assert on.exposed_communication <= off.exposed_communication
    assert on.step_seconds > off.step_seconds + copy_out * 0.99 - (
        off.exposed_communication - on.exposed_communication
    )


@pytest.mark.parametrize(
    "kw",
    [
        {"num_gpus": 1, "sharding": "none"},  # nothing gathered
        {"num_gpus": 8, "sharding": "ddp"},
        {"num_gpus": 8, "sharding": "zero3", "sharding_engine": "deepspeed"},
    ],
)
def test_fsdp2_copy_out_only_where_fsdp_gathers(kw):
    """The copy-out is FSDP2's: no unshard, no copy (one GPU, DDP), and DeepSpeed ZeRO-3
    gathers into the parameters' own storage."""
    req, opts = _req(**kw)
    on_req, _ = _req(fsdp_fully_shard=True, **kw)
    assert timing.counts(on_req, on_req.sharding).copy_out_bytes == 0
    assert timing.estimate_time(on_req, opts.gpu, 1e9).step_seconds == pytest.approx(
        timing.estimate_time(req, opts.gpu, 1e9).step_seconds, rel=0, abs=0
    )


def test_fsdp2_copy_out_set_by_the_torchtune_profile_only_where_it_shards():
    """torchtune shards with ``fully_shard``: its profile counts the copy-out on several GPUs
    under ZeRO-3, not on one GPU; a request that says otherwise wins; the generic profile
    (FSDP1 as much as FSDP2) leaves it off."""
    sharded = {"num_gpus": 8, "sharding": "zero3"}
    assert _req(framework="torchtune", **sharded)[0].fsdp_fully_shard is True
    assert _req(framework="torchtune")[0].fsdp_fully_shard is False
    assert _req(framework="generic", **sharded)[0].fsdp_fully_shard is False
    assert (
        _req(framework="torchtune", fsdp_fully_shard=False, **sharded)[0].fsdp_fully_shard is False
    )


@pytest.mark.parametrize("sharding", ["zero2", "zero3"])
def test_deepspeed_reduces_every_micro_batch_whatever_no_sync_says(sharding):
    """DeepSpeed ZeRO-2/3 has no no_sync: each micro-batch's backward reduces its gradients
    (DeepSpeed 0.14.0 engine.py allreduce_gradients, stage3.py
    independent_gradient_partition_epilogue), as the memory model already reads it
    (calc.states.accumulates_unsharded_gradients). Under accumulation on a slow network the
    step pays the reduce A times, as with sync_each_micro_batch; FSDP under accelerate's
    no_sync pays it once."""
    keys = {
        **NETWORK_PLAN,
        "num_gpus": 16,
        "network": "ethernet-25",
        "sharding": sharding,
        "gradient_accumulation_steps": 4,
    }

    def step(**kw):
        req, opts = parse_plan_request({**keys, **kw})
        assert not req.sync_each_micro_batch or kw.get("sync_each_micro_batch")
        return timing.estimate_time(req, opts.gpu, 1e9, network="ethernet-25").breakdown

    ds = step(sharding_engine="deepspeed")
    ds_synced = step(sharding_engine="deepspeed", sync_each_micro_batch=True)
    fsdp = step()
    assert ds.exposed_communication == pytest.approx(ds_synced.exposed_communication)
    assert ds.exposed_communication > fsdp.exposed_communication


def test_a_request_with_lengths_counts_its_step_once_across_cards(monkeypatch):
    # A plan times one request on every card: with length_stats the step is priced at the
    # data's mean padded length, and that request must stay one object so counts() is memoised
    from calc.lengths import request_shape
    from calc.request import parse_estimate_request

    req = parse_estimate_request(
        {"model": "llama-3.1-8b", "length_stats": {"mean": 900, "p90": 2000}}
    )
    calls = []
    real = timing._counts
    monkeypatch.setattr(timing, "_counts", lambda *a: calls.append(a[0]) or real(*a))
    timing._COUNTS.clear()
    first = timing.estimate_time(req, gpus.get_gpu("rtx-4090"), 1e8)
    again = timing.estimate_time(req, gpus.get_gpu("h100-sxm"), 1e8)
    assert len(calls) == 1
    assert calls[0].seq_len == request_shape(req).mean_padded_length < req.seq_len
    assert again.padding_ratio == first.padding_ratio


def test_fp8_measured_classes_are_the_fit_s(validation):
    """The card classes a plan with fp8_compute does not warn about are those of the rows the
    FP8 efficiency is fitted on."""
    _, result, _ = validation
    fitted = result["constant_basis"]["fp8_matmul_efficiency"]["card_classes"]
    assert timing.FP8_MEASURED_CLASSES == set(fitted)


def test_fp8_on_a_family_without_a_measured_run_says_so():
    from calc import plan_setup

    body = {"model": "llama-3.1-8b", "dataset_tokens": 1e7, "fp8_compute": True}
    assert "fp8_rate_not_measured_on_class" in plan_setup({**body, "gpu": "mi300x"})["warnings"]
    assert (
        "fp8_rate_not_measured_on_class" not in plan_setup({**body, "gpu": "h100-sxm"})["warnings"]
    )
    plain = {k: v for k, v in body.items() if k != "fp8_compute"}
    assert (
        "fp8_rate_not_measured_on_class" not in plan_setup({**plain, "gpu": "mi300x"})["warnings"]
    )


def test_gpus_per_node_puts_servers_apart():
    """Eight GPUs on 4-GPU servers cross the network (two servers, each with its 4 adapters of
    the reference network); on the default 8-GPU board they stay on NVLink; a single server's
    figures do not read the key."""
    from calc import comm, plan_setup
    from calc.gpus import get_gpu

    gpu = get_gpu("a100-40gb-sxm")
    board = comm.collective_link(gpu, 8)
    split = comm.collective_link(gpu, 8, per_node=4)
    assert board.kind == "nvlink" and board.nodes == 1
    assert split.kind == "network" and split.nodes == 2
    assert split.bytes_per_s == pytest.approx(board.bytes_per_s / 225 * 75)  # 4 x 200 Gb/s
    body = {"model": "llama-3.1-8b", "method": "full", "gpu": "a100-40gb-sxm", "num_gpus": 8,
            "sharding": "zero3", "dataset_tokens": 1e8}  # fmt: skip
    eight, four = plan_setup(body), plan_setup({**body, "gpus_per_node": 4})
    assert four["time"]["step"]["link"]["kind"] == "network"
    assert four["time"]["tokens_per_second"] < eight["time"]["tokens_per_second"]
    one = {**body, "num_gpus": 4}
    assert plan_setup({**one, "gpus_per_node": 4})["time"] == {
        **plan_setup(one)["time"],
        "gpus_per_node": 4,
    }


@pytest.mark.parametrize("compiled", [False, True])
def test_gelu_new_pays_one_pass_per_op_in_eager(compiled):
    """GPT-2's gelu_new is written op by op in transformers (eight kernels over the inner width,
    36 bytes per element in bf16) where gelu_pytorch_tanh is one kernel (4): eager, the
    element-wise traffic per token differs by 32 x inner width x layers forward, and backward
    by gelu_new's traced backward (56) less twice the one kernel's forward; compiled, not at
    all."""
    from calc.request import parse_estimate_request

    def elementwise(act: str) -> float:
        cfg = {
            "model_type": "gpt2",
            "n_embd": 768,
            "n_head": 12,
            "n_layer": 12,
            "n_positions": 1024,
            "vocab_size": 50257,
            "activation_function": act,
        }
        req = parse_estimate_request(
            {
                "model": {"hf_config": cfg},
                "method": "full",
                "precision": "bf16-true",
                "torch_compile": compiled,
                "gradient_checkpointing": False,
            }
        )
        return timing.counts(req, Sharding.NONE).elementwise_bytes_per_token

    gap = elementwise("gelu_new") - elementwise("gelu_pytorch_tanh")
    expected = (
        (
            (timing.TANH_GELU_OP_BY_OP_BYTES_PER_ELEMENT - 4)
            + (
                timing.TANH_GELU_OP_BY_OP_BACKWARD_BYTES_PER_ELEMENT
                - 4 * timing.BACKWARD_ELEMENTWISE_FACTOR
            )
        )
        * 3072
        * 12
    )
    assert gap == pytest.approx(0.0 if compiled else expected)


def test_fp32_matmuls_run_at_the_fp32_rate_on_amd_cards_too():
    # an MI300X has no CUDA capability in calc, but its fp32 rate (163.4 TFLOPS, datasheet)
    # is an eighth of its dense bf16 rate: fp32 training must not be priced at the bf16 rate.
    # The matmuls' time, not the step's: at 512 tokens the bf16 matmuls reach only part of
    # their rate (MATMUL_HALF_TOKENS) and the element-wise work is the same bytes either way
    from accuracy.first_contact_throughput import time_estimate

    base = {"model": "llama-2-7b", "method": "lora", "gpu": "mi300x", "seq_len": 512}
    bf16 = time_estimate({**base, "precision": "bf16-true"})[0].breakdown.compute
    fp32 = time_estimate({**base, "precision": "fp32"})[0].breakdown.compute
    assert fp32 / bf16 > 3


def _counts_of(**keys: object) -> timing.Counts:
    req, _ = parse_plan_request(
        {"model": "llama-3.1-8b", "gpu": "h100-sxm", "dataset_tokens": 1e9, **keys}
    )
    return timing.counts(req, req.sharding)


def _readers_skip_peft_cast(method: str, passes: int, **keys: object) -> float:
    """On an fp32 stream peft's cast of an adapted reader's input to the fp32 adapters does
    nothing (calc.timing.peft_path_bytes): -6 bytes per such input element in each forward
    (passes: 1, or 2 with checkpointing). Backward the same: the cast's reverse is gone (-6) and
    the input gradients are summed in fp32 instead of 16 bits (+3 x 2), as traced
    (tools/count_lora_traffic.py: 525,952 bytes per block and token either way on Llama-2-7B)."""
    if method == "full":
        return 0.0
    req, _ = parse_plan_request(
        {
            "model": "llama-3.1-8b",
            "gpu": "h100-sxm",
            "dataset_tokens": 1e9,
            "method": method,
            "precision": "bf16-mixed",
            **keys,
        }
    )
    readers = amp_traffic.reader_names(req.model)
    read = sum(
        a.blocks * a.active * a.d_in
        for a in timing.st.adapted(req)
        if a.name in readers and not a.fused
    )
    return -timing.LORA_CAST_BYTES_PER_INPUT * read * passes


@pytest.mark.parametrize("gc", [False, True])
@pytest.mark.parametrize("method", ["lora", "full"])
def test_autocast_casts_fp32_weights_at_every_forward(method, gc):
    # bf16-mixed on fp32 weights without ZeRO: torch.autocast casts every linear's weight to
    # bf16 in the forward and again in a checkpointed block's recomputation (autocast_mode.cpp
    # cached_cast keeps a copy only within one autocast region): 6 bytes per weight element
    # and one op per linear, on top of the same request with weights loaded in 16 bits; and the
    # fp32 residual stream's own casts and fp32 element-wise work (calc.amp_traffic)
    keys = dict(method=method, precision="bf16-mixed", gradient_checkpointing=gc)
    fp32 = _counts_of(**keys, weights_loaded_16bit=False)
    bf16 = _counts_of(**keys, weights_loaded_16bit=True)
    arch = presets.get_preset("llama-3.1-8b")
    block = sum(arch.blocks_of(lin) * lin.params for lin in arch.linears)
    head = arch.vocab_size * arch.hidden_size
    passes = 2 if gc else 1
    tokens = fp32.tokens_micro
    stream_fwd, stream_bwd = amp_traffic.amp_stream_bytes_per_token(arch)
    stream_ops = amp_traffic.amp_block_extra_ops(arch)
    extra = fp32.elementwise_bytes_per_token - bf16.elementwise_bytes_per_token
    assert extra == pytest.approx(
        6 * (block * passes + head) / tokens
        + stream_fwd * passes
        + stream_bwd
        + _readers_skip_peft_cast(method, passes, weights_loaded_16bit=False),
        rel=1e-9,
    )
    ops = 7 * arch.num_layers + 1
    assert fp32.kernels_per_micro - bf16.kernels_per_micro == pytest.approx(
        ops * passes + arch.num_layers * (stream_ops[0] * passes + stream_ops[1])
    )


@pytest.mark.parametrize("gc", [False, True])
@pytest.mark.parametrize("method", ["lora", "full"])
def test_autocast_casts_weights_of_the_other_16bit_type(method, gc):
    # an fp16 checkpoint loaded as it is under bf16 autocast (weights_loaded_other_16bit):
    # every weight is cast as fp32 weights are, 2 bytes read and 2 written per element, and the
    # residual stream, promoted to fp32 at the first add, costs what it costs on fp32 weights
    keys = dict(method=method, precision="bf16-mixed", gradient_checkpointing=gc)
    same = _counts_of(**keys, weights_loaded_16bit=True)
    other = _counts_of(**keys, weights_loaded_16bit=True, weights_loaded_other_16bit=True)
    arch = presets.get_preset("llama-3.1-8b")
    block = sum(arch.blocks_of(lin) * lin.params for lin in arch.linears)
    head = arch.vocab_size * arch.hidden_size
    passes = 2 if gc else 1
    stream_fwd, stream_bwd = amp_traffic.amp_stream_bytes_per_token(arch)
    stream_ops = amp_traffic.amp_block_extra_ops(arch)
    extra = other.elementwise_bytes_per_token - same.elementwise_bytes_per_token
    assert extra == pytest.approx(
        4 * (block * passes + head) / other.tokens_micro
        + stream_fwd * passes
        + stream_bwd
        + _readers_skip_peft_cast(
            method, passes, weights_loaded_16bit=True, weights_loaded_other_16bit=True
        ),
        rel=1e-9,
    )
    assert other.kernels_per_micro - same.kernels_per_micro == pytest.approx(
        (7 * arch.num_layers + 1) * passes
        + arch.num_layers * (stream_ops[0] * passes + stream_ops[1])
    )


def test_weights_of_the_other_16bit_type_keep_two_bytes_but_get_working_copies():
    """The regime of AMP on fp32 weights (working copies, fp32 residual stream) on 2-byte
    weights, gradients and states; only where the weights were loaded in 16 bits under
    ``*-mixed`` without ZeRO."""
    from calc import memory, states
    from calc.request import parse_estimate_request

    base = {
        "model": "llama-2-7b",
        "method": "lora",
        "precision": "bf16-mixed",
        "seq_len": 512,
        "gradient_checkpointing": False,
    }
    same = parse_estimate_request({**base, "weights_loaded_16bit": True})
    other = parse_estimate_request(
        {**base, "weights_loaded_16bit": True, "weights_loaded_other_16bit": True}
    )
    reg = states.request_regime(other)
    assert reg is states.MIXED_OTHER_16BIT_WEIGHTS and reg.casts_weights and reg.weight_bytes == 2
    assert states.request_regime(same) is states.MIXED_16BIT_WEIGHTS
    a, b = memory.estimate_request(same), memory.estimate_request(other)
    assert a.components["weights"] == b.components["weights"]  # both 2 bytes per weight
    # every frozen weight's bf16 copy saved for backward (no checkpointing)
    copies = b.components["weight_copies"] - a.components["weight_copies"]
    arch = presets.get_preset("llama-2-7b")
    linears = sum(arch.blocks_of(lin) * lin.count * lin.weight_params for lin in arch.linears)
    assert copies == 2 * (linears + arch.vocab_size * arch.hidden_size)
    # without weights_loaded_16bit, or in bf16-true, the key changes nothing
    for extra in ({"weights_loaded_16bit": False}, {"precision": "bf16-true"}):
        on = parse_estimate_request({**base, **extra, "weights_loaded_other_16bit": True})
        off = parse_estimate_request({**base, **extra})
        assert states.request_regime(on) == states.request_regime(off)


@pytest.mark.parametrize(
    "keys",
    [
        {"precision": "bf16-true"},
        {"precision": "bf16-mixed", "weights_loaded_16bit": True},
        # ZeRO and FSDP hand the modules 16-bit weights themselves
        {"precision": "bf16-mixed", "num_gpus": 8, "sharding": "zero3", "sharding_engine": "fsdp"},
        {"precision": "bf16-mixed", "num_gpus": 8, "sharding": "zero2"},
    ],
)
def test_no_autocast_casts_where_the_matmuls_get_16bit_weights(keys):
    req, _ = parse_plan_request(
        {
            "model": "llama-3.1-8b",
            "gpu": "h100-sxm",
            "dataset_tokens": 1e9,
            "weights_loaded_16bit": False,
            **keys,
        }
    )
    assert timing.autocast_cast_params(req, req.sharding) == (0, 0, 0)


def test_qlora_autocast_casts_only_the_weights_it_does_not_quantize():
    # peft's kbit preparation leaves the output layer fp32 under bf16-mixed; the 4-bit block
    # linears are dequantized by bitsandbytes, not cast by autocast
    req, _ = parse_plan_request(
        {
            "model": "llama-3.1-8b",
            "gpu": "h100-sxm",
            "dataset_tokens": 1e9,
            "method": "qlora",
            "precision": "bf16-mixed",
            "qlora_prepare_kbit": True,
        }
    )
    arch = req.model
    assert timing.autocast_cast_params(req, req.sharding) == (
        0,
        arch.vocab_size * arch.hidden_size,
        1,
    )


def test_traced_block_ops_are_keyed_by_real_profiles_and_families():
    """Every profile named in TRANSFORMERS_MODELING is a framework calc accepts, every family of
    the traced table is one some preset has, and each family has both passes."""
    from calc.frameworks import TRANSFORMERS_MODELING, Framework
    from calc.presets import get_preset, preset_ids

    assert set(TRANSFORMERS_MODELING) <= {f.value for f in Framework}
    assert set(TRANSFORMERS_MODELING.values()) == {4, 5}
    families = {get_preset(p).family for p in preset_ids()}
    keys = set(timing.TRANSFORMERS_BLOCK_OPS)
    for version, family, step in keys:
        assert family in families
        assert (version, family, "backward" if step == "forward" else "forward") in keys
    # transformers 4's routed experts run a per-expert loop the table does not stand for
    assert (4, "qwen3_moe", "forward") not in keys
    assert (5, "qwen3_moe", "forward") in keys


def test_attention_dispatch_reads_the_kernel_and_the_widest_head():
    """calc.timing.attention_dispatch: the SDPA backend calc prices (cuDNN first on an H100 with
    torch 2.13's order, flash on an A100, the memory-efficient kernel under torch 2.5's order with a
    mask tensor), the widest head dim (Gemma 2's 256), and nothing on a card without CUDA."""
    from calc.gpus import get_gpu
    from calc.request import parse_estimate_request

    def dispatch(gpu: str, **keys):
        req = parse_estimate_request({"model": "gemma-2-9b", "method": "lora", **keys})
        return timing.attention_dispatch(req, get_gpu(gpu))

    assert dispatch("h100-sxm", attention="sdpa") == ("cudnn", 256)
    assert dispatch("a100-80gb-sxm", attention="sdpa") == ("flash", 256)
    assert dispatch(
        "h100-sxm", attention="sdpa", attention_mask="padding", sdpa_cudnn_last=True
    ) == ("efficient", 256)
    assert dispatch("mi300x", attention="sdpa") is None


@pytest.mark.parametrize(
    ("precision", "fwd", "bwd"),
    [
        # torch's softmax(dtype=float32) fuses the upcast only for CUDA Half inputs
        ("fp16-mixed", 24, 28),
        # bf16: the cast, the fp32 softmax, its fp32 gradient and the cast back run apart
        ("bf16-mixed", 32, 36),
        # fp32 q, k, v: no casts, every pass 4 bytes (the same totals)
        ("fp32", 32, 36),
    ],
)
def test_eager_score_bytes_follow_the_softmax_path_of_the_dtype(precision, fwd, bwd):
    kw = {"seq_len": 2048, "micro_batch_size": 1, "attention": "eager"}
    c, rates, _ = _counts_and_rates(
        "a100-80gb-sxm", precision=precision, gradient_checkpointing=False, **kw
    )
    elements = 32 * 32 * 2048  # llama-2-7b: layers x heads x keys per query token
    mask = 4 if precision == "fp32" else 2  # the causal mask in the q dtype, read by the add
    assert timing.score_bytes_per_token(c, rates.capability) == (
        elements * (fwd + mask),
        elements * bwd,
    )
