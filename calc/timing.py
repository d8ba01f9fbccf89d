"""Training time as a per-step roofline: every cost is a count divided by a rate.

One optimizer step on one GPU is ``A`` micro-steps of ``T = micro_batch_size * seq_len``
tokens (``A = gradient_accumulation_steps``), then the optimizer. Each part is a count (FLOPs,
bytes, kernel launches) over a rate (the card's datasheet peak, memory bandwidth, link rate,
CPU rate), and the step is their critical path, not their product::

    compute       = FLOPs(T) / (peak * eff(T))                 eff(T) = eff_class * T / (T + T_half)
    dequantise    = passes * NF4 weights * bytes per weight (read 4-bit + absmax, write 16-bit) / (HBM * eta_mem)
    comm_exposed  = sum over phases of max(first unit, comm_bytes / link - compute of the phase)
    transfer_exp. = host<->device bytes / host link, less the compute it overlaps
    optimizer     = bytes the optimizer and gradient clipping read and write / (HBM * eta_mem)
                    (+ the CPU optimizer and the parameters' upload with CPU offload)
    overheads     = max(0, host dispatch of the step's kernels - GPU time of the step)
    step          = A * (compute + dequantise + fp8 casts + comm/transfer exposed per micro-step)
                    + optimizer + exposed gradient synchronisation + overheads

``tokens/s per GPU = A * T / step``. The breakdown adds up to the step exactly
(:class:`StepBreakdown`). Fitted constants (the matmul efficiencies and ``T_half``) are
fitted by ``python -m benchmarks.validate_throughput`` leave-one-source-out on
``validation/measured_throughput.csv``; everything else is a datasheet figure, a library's
code at a stated version, or a stated assumption (methodology page).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache
from collections.abc import Sequence
from typing import Any

from . import attention as attn_kernels
from . import amp_traffic, comm, liger
from .moe_kernels import (
    SHARED_COMBINE_BYTES_PER_ELEMENT,
    MoeCounts,
    experts_called,
    moe_counts,
    routed_expert_linears,
)
from . import states as st
from .frameworks import TRANSFORMERS_MODELING
from .gpus import Gpu
from .host_offload import HostOffload, host_offload
from .flops import (
    CAUSAL_ATTENTION_FRACTION,
    AttentionPart,
    FlopsPerToken,
    attention_forward_flops_per_token,
    attention_parts,
    block_linear_params,
    matmul_params,
    training_flops_per_token,
    selective_recompute_flops,
)
from .activations import block_parts, key_of, norm_readers
from .arch import MLP_OUTPUT_NAMES, LinearLayer, ModelArch
from .jsontypes import JsonObject
from .lengths import as_rows, request_attention_span, request_shape
from .memory import fast_lora_keys
from .checkpointing import Granularity
from .fields import AdapterDtype, Attention, AttentionMask, Fp8Library
from .request import (
    CpuOffload,
    EstimateRequest,
    Method,
    Optimizer,
    Precision,
    Sharding,
    shard_size,
)

# --- fitted constants (accuracy/throughput.py fits them; benchmarks/validate_throughput prints) ----

MATMUL_EFFICIENCY = {
    "a100": 0.77,
    "blackwell": 0.60,
    "cdna3": 0.49,
    "gddr": 1.00,
    "gddr-pro": 0.35,
    "gddr-pro-ampere": 0.53,
    "hopper": 0.62,
}
"""Share of the dense BF16 peak the training FLOPs reach at large micro-steps, per card class
(``utilisation_class`` in ``gpus.csv``). FITTED on ``measured_throughput.csv`` (all covered
rows of the class, each source weighing the same among them; leave-one-source-out figures on
the methodology page). ``hopper`` rests on four sources (Unsloth on the H100/H200 measured by
the Surogate authors, llm-foundry, NeMo AutoModel's LoRA table, Answer.AI's 70B QLoRA on four
H100), ``gddr`` on three (Unsloth on the RTX 5090, torchtune and Answer.AI's fsdp_qlora on the
RTX 4090); ``gddr-pro`` (workstation and data-centre GDDR cards, listed at their datasheets'
full-rate FP32 accumulate, twice the GeForce rate per SM and clock; ``gpus.csv`` header) on two:
Answer.AI's rented RTX 6000 Ada and the L4 rows of Philipp Schmid's TRL table;
``gddr-pro-ampere`` (the Ampere workstation and data-centre GDDR cards: RTX A5000, RTX A6000, A40,
listed at the same full-rate FP32 accumulate) on ONE source: Answer.AI's Llama-2-70B QLoRA on two,
four and eight rented RTX A5000 (``benchmarks_03_2024.md``, the table that holds its RTX 6000 Ada
rows). In that table, same code and settings, the A5000 reaches 0.53 of its rate at its sustained
clock and the RTX 6000 Ada 0.36 of its own: one class gave the A5000, A6000 and A40 the Ada card's
share, and calc read the A6000 and the A40 35 to 56 % too slow at first contact (whyNLP/tinyllama,
katheryne; before 2026-12-05 the three cards were ``gddr-pro``). Every class's share is of the card's rate at its sustained clock (``calc.gpus.Gpu.clock_factor``:
the power-limited cards run below the boost clock their datasheet rate assumes, by a stated count
from their board power, not by a class of their own), so the RTX 6000 Ada's rows set the other
cards' share, not their clocks. Scicom's Qwen3-1.7B runs on the H100 and the RTX 5090
are judged but not fitted on (their figure is a whole job's wall time, start-up included);
``blackwell`` on two: Unsloth on the B200 (LoRA and QLoRA of Qwen3 0.6B-32B on one card) and
NeMo 2's Llama 3 8B BF16 pre-training on eight (vuiseng9's nemo-perf-nvfp4); Unsloth's rows
name the FlashAttention package, version 2 on Blackwell (:data:`FLASH2_B200_TFLOPS`), NeMo's run
cuDNN's attention through Transformer Engine (read as SDPA's cuDNN backend).
``cdna3`` (AMD Instinct MI300X and the cards the catalogue puts in its class) rests on ONE source,
one row: torchtitan's Llama 3 8B BF16 pre-training on eight MI300X in torchao's float8 README
(853f87d1), 0.49 of its rate at the 1207 MHz that AMD measured it holding in dense BF16 GEMM
(``gpus.csv``: 0.27 of the datasheet's 2100 MHz peak); before that row the class took the pooled
NVIDIA share and read +163 % at first contact (fct-n4). Until 2026-12-06 the MI300X ran at its
peak clock in calc and the fitted share was 0.27: its 18 first-contact rows (nine sources) read
+21.4 % by median, the MI325X's 11 +4.9 % and the MI355X's 6 -14.1 %; with the measured clocks
(the MI325X's 1447 MHz) they read -5.3, -10.5 and -3.0 %. ``gddr-pro-ampere`` rests on one source
too (above). Every other class rests on two sources or more; the methodology page says which rest on one, from the fit. A class without rows takes
:data:`MATMUL_EFFICIENCY_POOLED`. On the A100s, the Hopper cards and the B200 class SDPA's flash
and memory-efficient attention kernels run at FlashAttention-2's own measured rate instead
(:data:`FLASH2_TABLES`), so there the class efficiency is the share of the rest of the step.
Each row is read at the torch version it ran: the rows of torch 2.5.1 to 2.10 on Hopper
(torchtitan's H200, Answer.AI's H100; llm-foundry's 2023 tables, whose FlashAttention-2 is the
same kernel generation) set ``sdpa_cudnn_last``, so their attention is priced as the flash kernel
they ran, not as the cuDNN kernel torch 2.13 would pick (read as cuDNN until 2026-12-04, the fit
gave ``hopper`` 0.62, half tokens 128 and FP8 0.53)."""

SINGLE_SOURCE_CLASSES = frozenset({"cdna3", "gddr-pro-ampere"})
"""The card classes whose :data:`MATMUL_EFFICIENCY` rests on one published source (the fit's
own count, ``python -m benchmarks.validate_throughput``, section "fitted constants and the
sources they rest on"; a test keeps the two equal): a plan on such a card says so (warning
``time_class_single_source``)."""

MATMUL_EFFICIENCY_POOLED = 0.69
"""The same fit with every covered row pooled in one class: the figure for a card class with no
measured row (none in today's catalogue; the leave-one-source-out fits use it for a class whose
only source is held out); FITTED (0.71 until the block's element-wise backward was traced, 0.66
until the MI300X's measured clock, 2026-12-06: its row
no longer pulls the pooled share down)."""

MATMUL_HALF_TOKENS = 256.0
"""Tokens per micro-step at which a model of hidden size 4096 reaches half its large-step
efficiency on matmuls that run at the A100's BF16 rate: ``eff(T) = eff_class * T / (T + T_half *
(4096 / hidden)**2 * rate / 312e12)``. Per layer, matmul work grows as ``T * hidden**2`` while
the fixed costs of each kernel (tile quantisation, wave tails, element-wise passes) do not,
hence the ``hidden**2`` scaling; those costs are time, so a faster path reaches them at more
tokens (:data:`HALF_TOKENS_REFERENCE_FLOPS`). FITTED (with the rate in it: 256.0, a step of the fit's grid of 2^(1/4); 215.0 until the block's
element-wise work was counted from its trace and 181.0 until LoRA's backward was, both 2026-12-06)."""

FP8_MATMUL_EFFICIENCY = 0.67
"""Share of the dense FP8 peak that FP8 training's linears reach (torchao float8 / Transformer
Engine), large micro-steps. FITTED on the covered FP8 rows, each source weighing the same
(torchtitan, llm-foundry, NeMo 24.07 and Megatron-Bridge 25.11 on the H100 and the B200, NeMo 2 on
eight B200 by vuiseng9)."""

FP8_MEASURED_CLASSES = frozenset({"hopper", "blackwell"})
"""The card classes of the rows :data:`FP8_MATMUL_EFFICIENCY` is fitted on (a test keeps the two
equal): on a card of another class the FP8 rate is the datasheet's times an efficiency measured
elsewhere, and a plan with ``fp8_compute`` says so (warning ``fp8_rate_not_measured_on_class``).
torchao's MI300X rows show why: fp8 14.7 % faster than bf16 measured, 1.94 times in calc."""

SATURATION_REFERENCE_HIDDEN = 4096

HALF_TOKENS_REFERENCE_FLOPS = 312e12
"""The matmul rate at which :data:`MATMUL_HALF_TOKENS` is stated: the A100's dense BF16 peak
(NVIDIA A100 datasheet, 312 TFLOP/s). ``T_half`` is a fixed time per kernel (launch, prologue
and epilogue, the last wave's tail) written in tokens: a linear of width ``h`` does ``~h**2``
FLOPs per token, so a kernel that does ``T * h**2 / rate`` seconds of work beside a fixed
``tau`` reaches ``T / (T + tau * rate / h**2)`` of its rate. The same ``tau`` is worth more
tokens where the matmul runs faster: ``T_half`` grows with the rate of the path the matmul runs
on (the card's BF16 tensor rate, its FP8 rate, or its FP32 rate for fp32 matmuls without
TF32), each at the datasheet's boost clock: a power-limited card's slower clock
(:attr:`calc.gpus.Gpu.clock_factor`) stretches a kernel's fixed cycles as much as its work, so it
leaves ``T_half`` where it was. Hence ``T_half * (4096 / hidden)**2 * rate / 312e12``. Before
2026-12-04 one ``T_half`` served every rate: the B200's rows read +29 % (too fast) and the T4's
-11 % (too slow) at their median, a T4 saturating as late as a B200; fitted again on the same
rows with the rate in it, the leave-one-source-out p90 went from 25.0 to 21.5 %."""

# --- stated constants --------------------------------------------------------------------------

MEMORY_BANDWIDTH_EFFICIENCY = 0.8
"""Share of the datasheet memory bandwidth a streaming kernel reaches: BabelStream / STREAM-like
copy kernels measure about 1.7 TB/s on the A100 80GB (2.04 datasheet), 2.9-3.0 TB/s on the
H100 SXM (3.35) and about 0.9 TB/s on the RTX 4090 (1.01): 0.8-0.9; 0.8 for element-wise
optimizer and dequantisation kernels that do not reach copy speed."""

ATTENTION_KERNEL_TIME = {
    attn_kernels.FLASH: 1.0,
    attn_kernels.CUDNN: 1.0,
    attn_kernels.EFFICIENT: 2.0,
}
"""Time of the score and value matmuls on each fused attention kernel, relative to the flash kernel
at the same FLOPs (the matmul efficiency of the card class prices the flash kernel, and on the
A100s, Hopper and B200-class cards FlashAttention-2's own measured rate, :data:`FLASH2_TABLES`).
Read off the FlashAttention-2 paper (Dao 2023, arXiv:2307.08691, sec. 4.1, forward + backward on the
A100): FlashAttention-2 reaches 50-73 % of the peak, about 2x FlashAttention-1, whose speed
xformers' cutlass kernel (PyTorch's memory-efficient backend) matches, hence 2.0. cuDNN's fused
attention is taken at flash speed (NVIDIA's cuDNN 9 figures put it level with or above
FlashAttention-2 on the H100). Stated constants, not fitted. The kernels that materialise the scores
(the math backend, transformers' eager attention) are not priced by a factor: their matmuls run at
the rate of their dtype and their score traffic is counted (:data:`SCORE_BYTES_PER_ELEMENT`)."""

SCORE_BYTES_PER_ELEMENT = {
    (attn_kernels.MATH, "forward"): 24,
    (attn_kernels.MATH, "backward"): 28,
    (attn_kernels.EAGER, "forward"): 32,
    (attn_kernels.EAGER, "backward"): 36,
}
"""Bytes moved per element of the materialised L x L scores, (forward, backward), per layer,
head and query token, the score matmuls' own write and reads included. The math backend (torch
``aten/src/ATen/native/transformers/attention.cpp`` ``_scaled_dot_product_attention_math``)
upcasts 16-bit q, k, v to fp32 unless ``allow_fp16_bf16_reduction_math_sdp`` is set (off by
default, torch 2.5 on), so its scores are fp32 (4 bytes): forward, QK^T writes them (1 pass), the
mask (a causal one is built as a tensor too) is added in place (read, write: 2),
``_safe_softmax`` reads and writes (2), AV reads (1): 6 x 4 = 24; backward, dO V^T writes dP
(1), the softmax gradient reads P and dP and writes dS (3), dQ and dK read dS (2), dV reads P
(1): 7 x 4 = 28.

transformers' eager attention (5.17 ``models/llama/modeling_llama.py``
``eager_attention_forward``) on bf16 q, k, v: QK^T writes 2, ``* scaling`` reads and writes
2 + 2, the mask add 2 + 2, ``softmax(dtype=float32)`` is a cast (read 2, write 4) and an fp32
softmax (read 4, write 4): torch's ``softmax`` (``aten/src/ATen/native/SoftMax.cpp``) fuses the
upcast into the kernel (``half_to_float``) only for CUDA Half inputs, never bfloat16; then
``.to(query.dtype)`` reads 4 and writes 2, AV reads 2: 32. Backward: dP 2, the cast's gradient
2 + 4, the fp32 softmax gradient reads output and gradient and writes fp32 (4 + 4 + 4), the
upcast's gradient casts it back (4 + 2), the scaling's gradient 2 + 2, dQ and dK read dS
(2 + 2), dV reads P (2): 36. On fp32 q, k, v the casts vanish and every pass moves 4 bytes: the
same 32 and 36. Traced on the CPU, bf16 and fp32, Llama-2-7B's and Qwen3-0.6B's blocks eager
less SDPA (``tools/count_block_traffic.py --attention=eager``): 28 and 28 (bf16), 24 and 20
(fp32) per element beside the score matmuls, whose 4 and 8 (bf16) are counted here as well. On
fp16 the fused upcast moves less (:data:`HALF_TO_FLOAT_SCORE_BYTES_PER_ELEMENT`).

Dropout at p = 0 returns its input (ATen ``Dropout.cpp`` ``_dropout``); where a model drops its
probabilities out (GPT-2's ``attn_pdrop``, Seed-OSS) the dropout's own passes are added
(:data:`DROPOUT_PASSES`, :data:`DROPOUT_MASK_BYTES`). A checkpointed layer runs the forward again.
Gemma-2's attention soft-capping adds its passes on top (:data:`SOFTCAP_ELEMENT_PASSES`)."""

HALF_TO_FLOAT_SCORE_BYTES_PER_ELEMENT = {"forward": 24, "backward": 28}
"""Eager attention's score bytes per element (as :data:`SCORE_BYTES_PER_ELEMENT`) on fp16 q, k, v
on CUDA, where torch's ``softmax(dtype=float32)`` runs one ``half_to_float`` kernel
(``aten/src/ATen/native/SoftMax.cpp``: CUDA and ``ScalarType::Half`` only): the softmax reads 2
and writes 4 in one pass, and its gradient reads the fp32 output and gradient and writes fp16
(4 + 4 + 2, ``_softmax_backward_data`` with the Half input dtype). Forward 2 + 4 + 4 + 6 + 6 + 2
= 24, backward 2 + 6 + 10 + 4 + 4 + 2 = 28. From the code: the CPU takes the cast-then-softmax
path for every dtype, so no CPU trace can show this one."""

COMPILED_SCORE_PASSES = {"forward": 4, "backward": 7}
"""Passes over the materialised scores of eager attention under ``torch.compile``, per element:
inductor fuses the element-wise chain between the two matmuls (the scaling, the mask's add, the
softmax and its casts) into one kernel per direction, as it fuses every point-wise op. Forward,
QK^T writes the scores, the fused kernel reads them and writes the probabilities, AV reads them
(4); backward, dP is written, the fused softmax gradient reads P and dP and writes dS, dQ and
dK read dS, dV reads P (7). Each pass moves the element in the scores' dtype (2 bytes in 16 bits):
8 and 14 bytes against eager's 32 and 36 in bf16 (:data:`SCORE_BYTES_PER_ELEMENT`)."""

SOFTCAP_ELEMENT_PASSES = {"forward": 6, "backward": 7}
"""Element reads and writes of a tanh soft-capping, per capped element: ``x / cap``, ``tanh``,
``* cap``, each reading and writing one tensor (forward 3 x 2 = 6); backward, the product's
gradient (read 1, write 1), ``tanh_backward`` (reads the incoming gradient and the saved output,
writes 1: 3) and the quotient's gradient (read 1, write 1): 7. In the tensor's own dtype (2 bytes
in 16 bits, 4 in fp32). transformers 5.17 (and 4.49) ``models/gemma2/modeling_gemma2.py`` runs it
twice: on the attention scores in ``eager_attention_forward`` when ``softcap`` is set
(``attn_logit_softcapping``, 50.0 by default; SDPA is handed no cap and caps nothing), and on the
logits in ``Gemma2ForCausalLM.forward`` (``final_logit_softcapping``, 30.0 by default), whatever
the attention. The scores are materialised per layer and head (recomputed with checkpointing);
the logits once per micro-step (the output layer is not checkpointed)."""

DROPOUT_PASSES = 2
"""A dropout with ``p > 0`` reads its input and writes its output, in the tensor's dtype, in
each direction: CUDA's ``native_dropout`` (forward) and ``native_dropout_backward`` (the
gradient times the kept mask, scaled). Together with :data:`DROPOUT_MASK_BYTES` this is what a
dropout moves per element, forward and backward alike (2 x 2 + 1 = 5 bytes in 16 bits). Where it
runs (transformers 5.17): on eager attention's probabilities after their cast to the query's
dtype (``models/gpt2/modeling_gpt2.py`` ``eager_attention_forward``, lines 63-67, ``attn_pdrop``;
``models/seed_oss/modeling_seed_oss.py``, lines 149-150, ``attention_dropout``), and on each
block's attention and MLP outputs (GPT-2 ``resid_pdrop``, Phi; ``residual_dropout``). At ``p ==
0`` it returns its input (ATen ``Dropout.cpp`` ``_dropout``) and moves nothing. Under
``torch.compile`` inductor draws the mask inside the fused kernel and draws it again in the
backward (Philox seeds), so no mask is written: counted 0 there, as the fused chain
(:data:`COMPILED_SCORE_PASSES`) already holds the pass."""

DROPOUT_MASK_BYTES = 1
"""The boolean mask ``native_dropout`` writes in the forward and its backward reads: 1 byte per
element (:data:`DROPOUT_PASSES`)."""

RESIDUAL_DROPOUTS_PER_LAYER = 2
"""Dropouts on a block's residual branches where ``resid_pdrop > 0``: the attention output and
the MLP output (transformers 5.17 ``GPT2Attention.resid_dropout`` and ``GPT2MLP.dropout``,
``modeling_gpt2.py`` lines 224 and 242; ``PhiDecoderLayer.resid_dropout`` twice). The
embedding's own dropout (GPT-2 ``embd_pdrop``, once per forward) is left out: one tensor of the
same width against two per block."""


def dropout_bytes_per_element(element_bytes: int) -> int:
    """Bytes one dropout moves per element in one direction (:data:`DROPOUT_PASSES`)."""
    return DROPOUT_PASSES * element_bytes + DROPOUT_MASK_BYTES


MASK_READS = {
    ("fused", "forward"): 1,
    ("fused", "backward"): 1,
    ("materialised", "forward"): 1,
    ("materialised", "backward"): 0,
}
"""Passes over an explicit attention mask per head, per layer and query token (each pass reads
``seq_len`` mask elements of the q dtype: transformers 4.x builds the 4-D padding mask as an
additive float mask in the model dtype, and torch's SDPA turns a boolean mask into one of the
query dtype, ``convert_boolean_attn_mask``). The mask is one ``batch x 1 x L x L`` tensor
broadcast over the heads, and each head's blocks read their tile of it: the memory-efficient
kernel (PyTorch ``mem_eff_attention/kernel_forward.h`` and ``kernel_backward.h``, ``kSupportsBias``:
the forward adds the bias tile to the scores, the backward reloads it to recompute them) and
cuDNN read it once forward and once backward. The math backend and eager attention read it in
their mask add (forward; the add's gradient passes through). A mask of a few hundred MB per
micro-batch does not stay in L2 across heads. Flash never takes a mask, and causal masking in the
fused kernels is an index test, no tensor."""

FP32_ATTENTION_TIME = {"tf32x3": 6.0}
"""Time of fp32 attention matmuls on tensor cores relative to bf16 ones. The memory-efficient
kernel's fp32 path on sm80+ runs on tensor cores as CUTLASS's 3xTF32 (PyTorch
``aten/src/ATen/native/transformers/cuda/mem_eff_attention/gemm_kernel_utils.h``,
``DefaultGemmType<ArchTag >= 80, float>``: ``OpClassTensorOp`` with ``OpMultiplyAddFastF32``,
three TF32 products per fp32 product), and the dense TF32 peak is half the dense BF16 peak on
every sm80+ datasheet of the catalogue (A100 156 / 312, H100 SXM 495 / 989, L40S 183 / 366
TFLOP/s): 3 x 2 = 6. fp32 matmuls without tensor cores (the math backend's, eager attention's
on fp32 inputs, cuBLAS with ``allow_tf32`` off, its default, e.g. the output layer on fp32
weights and inputs after kbit preparation) run at the card's own FP32 rate
(``fp32_tflops`` in ``gpus.csv``, datasheets): :func:`fp32_time`."""


FP32_MATMUL_TF32_DEFAULT = False
"""Whether PyTorch lets cuBLAS run fp32 matmuls as TF32 on tensor cores unless told to:
``torch.backends.cuda.matmul.allow_tf32`` is ``False`` by default since PyTorch 1.12 (the CUDA
semantics notes, "TensorFloat-32 (TF32) on Ampere (and later) devices";
``torch.get_float32_matmul_precision()`` is ``"highest"``), and neither the HF Trainer (its
``tf32`` argument defaults to ``None``, leaving torch's setting) nor a plain loop changes it. So a
model trained in fp32 runs its linears at the card's FP32 rate (:func:`fp32_time`) unless the
request says ``tf32`` (the Trainer's ``tf32=True``, ``set_float32_matmul_precision('high')``, or
NVIDIA's containers' ``TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1``): :func:`fp32_matmul_time`."""


def fp32_time(rates: "Rates") -> float:
    """Time of an fp32 matmul on the CUDA cores relative to the same FLOPs on the card's BF16
    tensor cores: ``bf16_dense_tflops / fp32_tflops`` from the card's datasheets (A100 312 / 19.5
    = 16, H100 SXM 989 / 67 = 14.8, RTX 4090 165.2 / 82.6 = 2, RTX PRO 6000 503.8 / 126 = 4: the
    GeForce and workstation cards keep full-rate FP32 lanes while their tensor rate is lower)."""
    return rates.peak_flops / rates.fp32_flops


TF32_TIME = 2.0
"""Time of an fp32 matmul run as TF32 on the tensor cores (request key ``tf32``) relative to the
same FLOPs in BF16: the dense TF32 peak is half the dense BF16 peak on every Ampere-and-later
datasheet of the catalogue (A100 156 / 312, H100 SXM 495 / 989, L40S 183 / 366, L4 60 / 121,
RTX 4090 82.6 / 165.2 TFLOP/s)."""

_TF32_CAPABILITY = (8, 0)
"""The first CUDA compute capability with TF32 tensor cores (Ampere, sm80; NVIDIA A100 Tensor
Core GPU Architecture whitepaper): on older cards (Turing's T4) ``allow_tf32`` changes nothing."""

_BF16_TENSOR_CAPABILITY = (8, 0)
"""The first CUDA compute capability with BF16 tensor cores (Ampere, sm80; NVIDIA A100 Tensor Core
GPU Architecture whitepaper). Turing's tensor cores take FP16, INT8 and INT4 only (NVIDIA Turing
GPU architecture whitepaper): the T4 and the RTX 2080 Ti run bf16 matmuls without them."""

BF16_WITHOUT_TENSOR_CORES_SHARE = 0.55
"""Rate of a bf16 matmul on a card without BF16 tensor cores (compute capability below
:data:`_BF16_TENSOR_CAPABILITY`) as a share of the same card's fp32 matmul rate. PyTorch accepts
bf16 there: ``torch.cuda.is_bf16_supported()`` counts emulation by default (torch 2.13,
``including_emulation=True``: a bf16 tensor can be made), and transformers 5.17's
``is_torch_bf16_gpu_available`` asks just that, so the HF Trainer takes ``bf16=True`` on a T4
and its cuBLAS matmuls run off the tensor cores. Measured with ``torch.matmul`` on square
matrices of 1024 to 10240 (the best size of each dtype), bf16 over fp32: T4 on Colab 2.46 / 4.17
TFLOPS (torch 2.8), on Kaggle 2.27 / 4.43 and 2.01 / 4.35 (torch 2.6), RTX 2070 4.42 / 7.90, RTX
2080 5.14 / 9.23, RTX 2080 Ti 7.28 / 13.04 (zzc0721/torch-performance-test-data ``database.md``
at 9d82827), TITAN RTX 5.01 / 11.91 (the same repository's issue #127) and a TU104 SXM2 board
4.26 / 7.87 (issue #90): 0.42 to 0.59, median 0.55. The same tables put fp16 at 42 TFLOPS on the
T4: bf16 is about seventeen times slower there (:func:`half_matmul_rates`)."""


def _bf16_emulated(half: str, capability: tuple[int, int] | None) -> bool:
    """Whether 16-bit matmuls of dtype ``half`` run off the tensor cores on a card of CUDA
    ``capability`` (None: no CUDA): bf16 below :data:`_BF16_TENSOR_CAPABILITY`."""
    return half == "bf16" and capability is not None and capability < _BF16_TENSOR_CAPABILITY


def half_matmul_rates(c: "Counts", rates: "Rates") -> "Rates":
    """``rates`` with ``peak_flops`` at the rate the request's 16-bit matmuls run at: the card's
    tensor rate, except bf16 (``c.half_dtype``) on a card without BF16 tensor cores, which runs
    at :data:`BF16_WITHOUT_TENSOR_CORES_SHARE` of its fp32 rate. Everything priced at
    ``peak_flops`` (the linears, attention, the fp32 paths' ratios to it) follows."""
    if not _bf16_emulated(c.half_dtype, rates.capability):
        return rates
    return replace(rates, peak_flops=rates.fp32_flops * BF16_WITHOUT_TENSOR_CORES_SHARE)


def bf16_without_tensor_cores(precision: Precision, gpu: Gpu) -> bool:
    """Whether a request of ``precision`` runs bf16 matmuls on ``gpu`` without tensor cores
    (the rule of :func:`half_matmul_rates`): the plan's warning ``bf16_without_tensor_cores``."""
    return _bf16_emulated(precision_half_dtype(precision), card_capability(gpu))


def fp32_matmul_time(c: "Counts", rates: "Rates") -> float:
    """:func:`fp32_time`, or :data:`TF32_TIME` where the request runs its fp32 matmuls as TF32
    (``tf32``) on a card with TF32 tensor cores (:data:`_TF32_CAPABILITY`), whichever is shorter
    (a GeForce card's FP32 lanes run as fast as its TF32 tensor rate)."""
    full = fp32_time(rates)
    if c.tf32 and rates.capability is not None and rates.capability >= _TF32_CAPABILITY:
        return min(TF32_TIME, full)
    return full


FLASH2_A100_TFLOPS: dict[tuple[str, int, int], float] = {
    ("causal", 64, 512): 88.0,
    ("causal", 64, 1024): 119.0,
    ("causal", 64, 2048): 140.0,
    ("causal", 64, 4096): 156.0,
    ("causal", 64, 8192): 165.0,
    ("causal", 64, 16384): 171.0,
    ("causal", 128, 512): 99.0,
    ("causal", 128, 1024): 133.0,
    ("causal", 128, 2048): 155.0,
    ("causal", 128, 4096): 173.0,
    ("causal", 128, 8192): 182.0,
    ("causal", 128, 16384): 189.0,
    ("full", 64, 512): 132.0,
    ("full", 64, 1024): 153.0,
    ("full", 64, 2048): 162.0,
    ("full", 64, 4096): 171.0,
    ("full", 64, 8192): 175.0,
    ("full", 64, 16384): 176.0,
    ("full", 128, 512): 151.0,
    ("full", 128, 1024): 173.0,
    ("full", 128, 2048): 187.0,
    ("full", 128, 4096): 196.0,
    ("full", 128, 8192): 201.0,
    ("full", 128, 16384): 203.0,
}
"""What FlashAttention-2 sustains on the A100 80GB SXM4, forward and backward together, in
TFLOP/s, by (mask: ``causal`` or ``full``, head dim, keys per query): the bar labels of Dao 2023
(arXiv:2307.08691), Fig. 4 "Attention forward + backward speed (A100 80GB SXM4)", as the
flash-attention repository publishes it (``assets/flash2_a100_fwd_bwd_benchmark.png``, added in
4f285b35, "FlashAttention-2 release", unchanged since), 16k tokens per batch, hidden size 2048.
Four labels of the ``full`` panels (512 and 1k) sit under the plot's see-through legend and were
read at 6x zoom and checked against their bars' heights (the least certain, ``full``, 128, 512:
151 +- 1). The paper's text bounds them: "up to 73%" of the peak forward and "up to 63%" backward
(sec. 1). Measured, not fitted: :func:`flash2_peak_share` reads them."""

FLASH2_H100_TFLOPS: dict[tuple[str, int, int], float] = {
    ("causal", 64, 512): 141.0,
    ("causal", 64, 1024): 192.0,
    ("causal", 64, 2048): 232.0,
    ("causal", 64, 4096): 257.0,
    ("causal", 64, 8192): 273.0,
    ("causal", 64, 16384): 284.0,
    ("causal", 128, 512): 163.0,
    ("causal", 128, 1024): 221.0,
    ("causal", 128, 2048): 265.0,
    ("causal", 128, 4096): 294.0,
    ("causal", 128, 8192): 308.0,
    ("causal", 128, 16384): 328.0,
    ("full", 64, 512): 215.0,
    ("full", 64, 1024): 254.0,
    ("full", 64, 2048): 274.0,
    ("full", 64, 4096): 288.0,
    ("full", 64, 8192): 294.0,
    ("full", 64, 16384): 296.0,
    ("full", 128, 512): 248.0,
    ("full", 128, 1024): 294.0,
    ("full", 128, 2048): 320.0,
    ("full", 128, 4096): 326.0,
    ("full", 128, 8192): 335.0,
    ("full", 128, 16384): 338.0,
}
"""The same figure of the same release for the H100 80GB SXM5
(``assets/flash2_h100_fwd_bwd_benchmark.png``, added in 4f285b35; every label read, each within
1.2 of its bar's height). FlashAttention-2 issues Ampere's ``mma.sync``, not Hopper's ``wgmma``,
so it stays far below the Hopper GEMMs' share of the peak: "FlashAttention-2 achieving only 35%
utilization on the H100 GPU" (Shah et al. 2024, FlashAttention-3, arXiv:2407.08608, abstract).
Measured, not fitted."""

FLASH2_B200_FULL_64_TFLOPS: dict[int, float] = {
    512: 258.71,
    1024: 299.37,
    2048: 320.70,
    4096: 312.45,
    8192: 332.97,
    16384: 345.80,
}
"""FlashAttention-2 on a B200, forward and backward together, in TFLOP/s, by keys per query,
without a causal mask, head dim 64: the repository's own ``benchmarks/benchmark_flash_attention.py``
(the paper's setup: 16k tokens per batch, hidden size 2048) run with flash_attn 2.7.4.post1 and
torch 2.8.0.dev20250408+cu128, as posted in Dao-AILab/flash-attention issue #1589 ("benchmark is
low on B200", 2025-04-13). The only panel published; meta-pytorch/tritonbench PR #171
(2025-03-04) measures the head dim 128 forward alone at 315 to 362 TFLOP/s from 1k to 8k keys,
the range of this panel's forward (307 to 381). FlashAttention-2's kernels issue ``mma.sync``;
Blackwell's tensor cores are fed at full rate only by ``tcgen05`` (what cuDNN's attention and
FlashAttention-4 use), so it runs at about a seventh of the card's dense BF16 peak. Measured."""

FLASH2_B200_TFLOPS: dict[tuple[str, int, int], float] = {
    (mask, width, keys): rate
    * FLASH2_B200_FULL_64_TFLOPS[keys]
    / FLASH2_H100_TFLOPS[("full", 64, keys)]
    for (mask, width, keys), rate in FLASH2_H100_TFLOPS.items()
}
"""FlashAttention-2 on a B200 in :data:`FLASH2_A100_TFLOPS`'s layout, DERIVED: the H100 table
(:data:`FLASH2_H100_TFLOPS`, the same kernels) times, at each length, the ratio of the one
published B200 panel (:data:`FLASH2_B200_FULL_64_TFLOPS`) to the H100's same panel (1.09 to
1.20), so the causal and head dim 128 panels take the H100's shape at the B200's measured
speed-up. Not fitted."""

FLASH2_TABLES = {
    "a100": FLASH2_A100_TFLOPS,
    "hopper": FLASH2_H100_TFLOPS,
    "blackwell": FLASH2_B200_TFLOPS,
}
"""The card classes (``utilisation_class``) whose FlashAttention-2-generation kernels are priced by
a measured rate instead of the class's matmul efficiency, and the table measured on a card of the
class. The kernels are SDPA's flash backend (PyTorch vendors FlashAttention-2,
``aten/src/ATen/native/transformers/cuda/flash_attn``) and its memory-efficient backend (xformers'
CUTLASS kernel, built for ``cutlass::arch::Sm80`` on every card of compute capability 8.0 and
above, ``mem_eff_attention/gemm_kernel_utils.h`` ``DISPATCH_ARCHTAG``), which then takes
:data:`ATTENTION_KERNEL_TIME` on top. The GDDR classes (Ampere, Ada and Blackwell workstation and
GeForce cards) keep their class efficiency: no published figure measures the kernel on them.
cuDNN's attention and FlashAttention-3 (``wgmma``) keep the class efficiency."""

FLASH2_ONLY_CLASSES = frozenset({"a100", "blackwell"})
"""The classes on which the request's ``attention`` ``flash`` (the FlashAttention package,
transformers' ``flash_attention_2`` or ``_3``) can only be FlashAttention-2: FlashAttention-3 needs
compute capability 9.0 and runs on Hopper only, so on the A100s and on Blackwell transformers'
``flash_attention_2`` is FlashAttention-2 (flash-attn 2.x has no kernel for Blackwell's
``tcgen05``; FlashAttention-4's CuTe kernels are another entry point). prime-rl's Qwen3 4B runs on
eight B200 with ``flash_attention_2`` at 16k and 64k tokens read +140 to +217 % at first contact
with the package at the class efficiency, +17 to +34 % at FlashAttention-2's B200 rate. Transformer
Engine's fused attention (NeMo, MaxText's ``cudnn_flash_te``) is cuDNN's kernel: such rows are
read as SDPA's cuDNN backend, not as ``flash``. On Hopper the package names no version and keeps
the class efficiency."""

FLASH2_PEAK_TFLOPS = {"a100": 312.0, "hopper": 989.0, "blackwell": 2250.0}
"""The dense BF16 peak of the card each of :data:`FLASH2_TABLES` was measured on (A100, H100
SXM and B200 datasheets: the catalogue's ``bf16_dense_tflops`` of ``a100-80gb-sxm``, ``h100-sxm``
and ``b200``, a test keeps them equal): the figures become shares of the peak, which prices every
card of the class at its own peak (and sustained clock)."""


@lru_cache(maxsize=None)
def _flash2_panel(card_class: str, mask: str, width: int) -> dict[int, float]:
    """One panel of a :data:`FLASH2_TABLES` table, TFLOP/s by keys per query: picked out of the
    table once, not on every step a plan times."""
    table = FLASH2_TABLES[card_class]
    return {n: v for (m, d, n), v in table.items() if (m, d) == (mask, width)}


def flash2_peak_share(
    card_class: str, causal: bool, head_dim: int, keys: float, recompute_share: float
) -> float:
    """Share of the card's dense BF16 peak at which FlashAttention-2 runs calc's count of
    attention FLOPs on a card of ``card_class`` (:data:`FLASH2_TABLES` over
    :data:`FLASH2_PEAK_TFLOPS`). Interpolated in ``log2`` of ``keys`` (the keys per query); beyond
    16k the 16k figure holds (the bars have levelled off), below 512 the 512 one; a head dim above
    64 reads the 128 panel (none wider is published), one of 64 or less the 64 panel. The paper
    counts a backward as 2.5 forwards (its backward recomputes the scores) and calc as two
    (:attr:`calc.flops.StepFlops.attention_total`), plus ``recompute_share`` of a forward again
    for a checkpointed layer at the same rate: the share is scaled by ``(3 + r) / (3.5 + r)``."""
    panel = _flash2_panel(card_class, "causal" if causal else "full", 64 if head_dim <= 64 else 128)
    lengths = sorted(panel)
    x = min(max(keys, lengths[0]), lengths[-1])
    i = next(k for k in range(1, len(lengths)) if x <= lengths[k])
    lo, hi = lengths[i - 1], lengths[i]
    t = (math.log2(x) - math.log2(lo)) / (math.log2(hi) - math.log2(lo))
    tflops = panel[lo] + t * (panel[hi] - panel[lo])
    return (
        tflops / FLASH2_PEAK_TFLOPS[card_class] * (3.0 + recompute_share) / (3.5 + recompute_share)
    )


DEQUANT_WRITE_BYTES = 2
"""bitsandbytes ``MatMul4Bit`` (bitsandbytes 0.49.2, ``autograd/_functions.py``) dequantises
the whole NF4 weight to a 16-bit tensor (``dequantize_4bit``) before each matmul, in forward
and again in backward for the input gradient: per pass it writes 2 bytes per weight; the
matmul then reads the 16-bit copy like any bf16 weight. What it reads is
:func:`dequantisation_bytes_per_weight`."""

FP32_DEQUANT_WRITE_BYTES = 4
"""Bytes per weight of the dequantized copy when the 4-bit matmul computes in fp32
(``qlora_compute_dtype_from_input`` on fp32 activations; bitsandbytes 0.45 ``MatMul4Bit``:
``F.dequantize_4bit(B, quant_state).to(A.dtype)``): 4 instead of :data:`DEQUANT_WRITE_BYTES`.
``dequantize_4bit`` writes ``quant_state.dtype``, fp32 for a model loaded in fp32; a model
loaded in bf16 also casts its bf16 copy up (2 + 4 bytes more per weight), not counted."""

NF4_BLOCK = 64
"""Weights per absmax block of bitsandbytes' 4-bit weights (``Linear4bit`` / ``Params4bit``
default ``blocksize=64``, bitsandbytes 0.49.2)."""

NESTED_ABSMAX_BYTES_PER_BLOCK = 1 + 4 + 4 + 4
"""bitsandbytes 0.49.2 ``functional.dequantize_4bit`` with double quantisation
(``quant_state.nested``) first rebuilds the fp32 absmax: ``dequantize_blockwise`` reads the
8-bit absmax (1 byte per block) and writes it in fp32 (4), then ``absmax += offset`` reads and
writes it again (4 + 4): 13 bytes per block of :data:`NF4_BLOCK` weights, in two more kernels."""

BNB_OPS_FORWARD = {True: 9, False: 7}
"""Host-dispatched ops bitsandbytes 0.49.2 adds to one 4-bit linear's forward (and its
recomputation), beyond the matmul itself, by double quantisation: ``Linear4bit.forward`` casts
the input to the compute dtype and transposes the weight, ``MatMul4Bit.apply`` enters an autograd
Function, ``dequantize_4bit`` runs ``dequantize_blockwise`` and the in-place offset add (nested
only) and the 4-bit kernel (each a ``torch.ops.bitsandbytes`` custom op), then the 16-bit
weight is cast and transposed, and the output cast back: 9 nested, 7 plain."""

BNB_OPS_BACKWARD = {True: 5, False: 3}
"""The same in ``MatMul4Bit.backward`` (bitsandbytes 0.49.2): the dequantisation again (3 ops
nested, 1 plain), the cast and the transpose of the 16-bit weight; the input-gradient matmul is
the linear's own backward op."""

DEQUANT_KERNELS = {True: 3, False: 1}
"""Under torch.compile the Python layers of :data:`BNB_OPS_FORWARD` are traced away
(bitsandbytes 0.49.2 registers its kernels as ``torch.library`` custom ops, ``_ops.py``, and
``MatMul4Bit`` is an autograd Function dynamo traces): what is left per pass of a 4-bit linear
is the dequantisation itself, ``dequantize_blockwise``, the offset add and ``dequantize_4bit``
nested (3), the 4-bit kernel alone plain (1)."""


def dequantisation_bytes_per_weight(double_quant: bool) -> float:
    """Device-memory bytes one pass moves to dequantise one NF4 weight (bitsandbytes 0.49.2
    ``functional.dequantize_4bit``): the 4-bit kernel reads the packed code (half a byte) and
    the fp32 absmax (4 bytes per block of :data:`NF4_BLOCK`) and writes the 16-bit weight
    (:data:`DEQUANT_WRITE_BYTES`); with double quantisation the absmax is rebuilt first
    (:data:`NESTED_ABSMAX_BYTES_PER_BLOCK`). 2.77 bytes per weight nested, 2.56 plain."""
    per_block = 4 + (NESTED_ABSMAX_BYTES_PER_BLOCK if double_quant else 0)
    return 0.5 + per_block / NF4_BLOCK + DEQUANT_WRITE_BYTES


DISPATCH_SECONDS_PER_KERNEL = 16e-6
"""Host time to dispatch one op of the training step (Python, dispatcher, launch; module
hooks of peft, checkpointing and FSDP; Triton's Python launcher): FITTED on
``measured_throughput.csv``, where two sources are bound by it: small models on fast cards
(Unsloth on H100/H200/B200, whose ops are counted from its autograd functions,
:data:`FUSED_LORA_OPS_PER_ADAPTER`) and short steps (Qwen's 256-token rows, the HF Trainer
eager). Each alone gives about the same figure (leave-one-source-out: 16 us without either),
inside the 5-20 us a bare eager op costs (PyTorch "Accelerating PyTorch with CUDA Graphs"
blog, 2021). When a micro-step's GPU work is shorter than its dispatch, the GPU waits: the
step is the longer of the two."""

EAGER_OPS_PER_LAYER_FORWARD = 30
"""Ops of one decoder block's forward besides its linears, eager, where the block is not
transformers' own (a loop of code no library names, torchtune's and LitGPT's model classes,
Unsloth's patched blocks) or not traced (:data:`TRANSFORMERS_BLOCK_OPS`): a Llama block's,
counted by hand on transformers 5.17 ``LlamaDecoderLayer.forward`` (the trace of that block
gives 31 forward and 57 backward, against 30 and 60 here with :data:`BACKWARD_OPS_FACTOR`)."""

TRANSFORMERS_BLOCK_OPS: dict[tuple[int, str, str], float] = {
    (5, "deepseek_v3", "forward"): 93,
    (5, "deepseek_v3", "backward"): 114,
    (5, "deepseek_v32", "forward"): 121,
    (5, "deepseek_v32", "backward"): 108,
    (5, "falcon", "forward"): 31,
    (5, "falcon", "backward"): 38,
    (5, "gemma", "forward"): 35,
    (5, "gemma", "backward"): 58,
    (5, "gemma2", "forward"): 55,
    (5, "gemma2", "backward"): 93,
    (5, "gemma3_text", "forward"): 75,
    (5, "gemma3_text", "backward"): 126,
    (5, "gemma4_text", "forward"): 128.33,
    (5, "gemma4_text", "backward"): 216.5,
    (5, "glm4_moe", "forward"): 57,
    (5, "glm4_moe", "backward"): 66,
    (5, "glm_moe_dsa", "forward"): 115,
    (5, "glm_moe_dsa", "backward"): 98,
    (5, "gpt2", "forward"): 13,
    (5, "gpt2", "backward"): 21,
    (5, "gpt_neox", "forward"): 19,
    (5, "gpt_neox", "backward"): 32,
    (5, "llama", "forward"): 31,
    (5, "llama", "backward"): 57,
    (5, "llama4_text", "forward"): 38,
    (5, "llama4_text", "backward"): 62,
    (5, "minimax_m2", "forward"): 59,
    (5, "minimax_m2", "backward"): 86,
    (5, "ministral3", "forward"): 39,
    (5, "ministral3", "backward"): 58,
    (5, "mistral", "forward"): 31,
    (5, "mistral", "backward"): 57,
    (5, "mistral4", "forward"): 82,
    (5, "mistral4", "backward"): 101,
    (5, "mixtral", "forward"): 38,
    (5, "mixtral", "backward"): 50,
    (5, "olmo3", "forward"): 49,
    (5, "olmo3", "backward"): 99,
    (5, "phi", "forward"): 25,
    (5, "phi", "backward"): 45,
    (5, "phi3", "forward"): 34,
    (5, "phi3", "backward"): 64,
    (5, "qwen2", "forward"): 31,
    (5, "qwen2", "backward"): 60,
    (5, "qwen2_moe", "forward"): 40,
    (5, "qwen2_moe", "backward"): 55,
    (5, "qwen3", "forward"): 47,
    (5, "qwen3", "backward"): 89,
    (5, "qwen3_moe", "forward"): 51,
    (5, "qwen3_moe", "backward"): 74,
    (5, "seed_oss", "forward"): 31,
    (5, "seed_oss", "backward"): 60,
    (5, "smollm3", "forward"): 31,
    (5, "smollm3", "backward"): 57,
    (4, "falcon", "forward"): 33,
    (4, "falcon", "backward"): 38,
    (4, "gemma", "forward"): 42,
    (4, "gemma", "backward"): 60,
    (4, "gemma2", "forward"): 62,
    (4, "gemma2", "backward"): 96,
    (4, "gemma3_text", "forward"): 82,
    (4, "gemma3_text", "backward"): 128,
    (4, "gpt2", "forward"): 17,
    (4, "gpt2", "backward"): 21,
    (4, "gpt_neox", "forward"): 23,
    (4, "gpt_neox", "backward"): 32,
    (4, "llama", "forward"): 38,
    (4, "llama", "backward"): 57,
    (4, "mistral", "forward"): 38,
    (4, "mistral", "backward"): 60,
    (4, "phi", "forward"): 29,
    (4, "phi", "backward"): 45,
    (4, "phi3", "forward"): 38,
    (4, "phi3", "backward"): 64,
    (4, "qwen2", "forward"): 38,
    (4, "qwen2", "backward"): 63,
    (4, "qwen3", "forward"): 54,
    (4, "qwen3", "backward"): 92,
    (4, "smollm3", "forward"): 38,
    (4, "smollm3", "backward"): 60,
}
"""Ops one decoder block of transformers' own modeling code dispatches besides its linears'
matmuls (:func:`block_linear_ops`), eager, by ``(transformers major version, family, pass)``:
the version a profile runs (:data:`calc.frameworks.TRANSFORMERS_MODELING`), the family
(``ModelArch.family``; an average block of the stack's layer pattern), forward or backward.
TRACED with ``tools/count_eager_ops.py`` under a ``TorchDispatchMode``, kernel-launching aten
ops only (views and metadata ops left out): transformers 5.17.0 and 4.53.3 on torch 2.13.0
(CPU), one preset per family, bf16, SDPA, no KV cache, no checkpointing, dropouts at 0 (calc
counts a block's dropout kernels itself, :data:`RESIDUAL_DROPOUTS_PER_LAYER`); each figure is a
stack of two periods of the layer pattern less one of one period. Where this replaces :data:`EAGER_OPS_PER_LAYER_FORWARD`
and its :data:`BACKWARD_OPS_FACTOR`, the Llama block is unchanged (31 and 57 traced, 30 and 60
counted before), while Qwen3's q/k norms (47 / 89), Gemma 2's and 3's four norms, soft-capping
and scaled embeddings (55 / 93, 75 / 126) and MLA (DeepSeek V3: 93 / 114) dispatch far more,
and GPT-2's and GPT-NeoX's fused blocks fewer. Not traced, and counted with the generic
figures: hybrid stacks (calc prices their mixers as flash-linear-attention's and mamba-ssm's
kernels, which the CPU does not run), families transformers builds without SDPA (GPT-OSS,
DeepSeek V4, BLOOM), and transformers 4's routed experts (its per-expert loop runs as many ops
as experts are hit, :data:`calc.moe_kernels.LOOP_OPS_PER_EXPERT_FORWARD`, which a shrunk
trace cannot stand for)."""

EAGER_ATTENTION_EXTRA_OPS_FORWARD = 5
"""Ops the eager attention path dispatches in one block's forward beyond the single SDPA call
that :data:`EAGER_OPS_PER_LAYER_FORWARD` counts: the scores' matmul, the scaling, the mask's
add, the fp32 softmax, the cast back and the matmul with the values: 6, less the one SDPA call
(the dropout at p 0 returns its input without a kernel: torch ``aten/src/ATen/native/Dropout.cpp``
``_dropout_impl``; at p > 0 it is one op more, counted where the model has it). Counted on
transformers' eager ``LlamaAttention.forward``
(``models/llama/modeling_llama.py`` at 002272831f) against ``sdpa_attention_forward``
(``integrations/sdpa_attention.py`` at 00c238bd), whose reshapes and transposes are the same.
Eager only: compiled, inductor fuses the element-wise ones. Their backward counts as the other
ops' (:data:`BACKWARD_OPS_FACTOR`)."""

LORA_OPS_PER_ADAPTER = 4
"""peft 0.21 ``lora.Linear.forward``: dropout (identity module at p=0), ``lora_A``, ``lora_B``,
scale-and-add: 4 ops per adapted linear."""

FUSED_LORA_OPS_PER_ADAPTER = {"forward": 10, "backward": 24}
"""Host-dispatched ops of one adapted linear in Unsloth's hand-written LoRA autograd functions
(``fused_lora_kernels``; unsloth 2026.8 at 015bdef0d9, counted): forward, ``kernels/utils.py``
``matmul_lora`` runs the base matmul and the adapter in ten calls (the input's ``view``,
``W.t()``, the matmul, ``A.t()``, ``B.t()``, the adapters' two casts to the compute dtype, ``X @
A``, ``out.addmm_`` and the ``view`` back); backward, ``kernels/fast_lora.py``
``LoRA_QKV.backward`` per projection: the gradient's ``view``, two casts, two transposes, two
``empty_like``, the two weight gradients (``addmm_`` of a product, 4 calls each), the base
weight's transpose and input-gradient ``addmm_`` (2), the adapter's input-gradient ``addmm_`` (4)
and the two returned transposes: 24 (``LoRA_MLP.backward`` and ``LoRA_W.backward`` issue the
same calls per projection). The base linear's own matmul is inside these counts. The block's
other ops (norms, rotary embedding, attention, residuals) run through Unsloth's Python wrappers
and Triton launchers op by op: :data:`EAGER_OPS_PER_LAYER_FORWARD`, whatever the element-wise
fusion their kernels achieve."""

COMPILED_OPS_PER_LAYER_FORWARD = 8
"""Under torch.compile the block's element-wise work fuses into a few Triton kernels
(inductor): about 8 besides the matmuls (assumption, from inductor kernel counts of a
Llama block)."""

# --- element-wise (memory-bound) work: bytes per element of each activation it touches ------------

NORM_BYTES_PER_ELEMENT = {"eager": 36, "compiled": 8}
"""transformers 5.17 ``LlamaRMSNorm.forward``, eager, bf16 input: upcast to fp32 (read 2, write 4),
``pow(2)`` (read 4, write 4), ``mean`` (read 4), multiply by ``rsqrt`` (read 4, write 4), downcast
(read 4, write 2), multiply by the weight (read 2, write 2): 36 bytes per element of the hidden
state. Compiled (inductor fuses it into one kernel): read 2 + write 2, twice (forward reads the
input for the statistics and again to normalise): 8."""

NORM_FP32_SCALE_BYTES_PER_ELEMENT = 40
"""The RMSNorms that scale in fp32 (``arch.extra["norm_scale_fp32"]``: transformers 5.17 and 4.49
``GemmaRMSNorm.forward``, ``output = self._norm(x.float()); output = output * (1.0 +
self.weight.float()); return output.type_as(x)``), eager, bf16 input: upcast (read 2, write 4),
``pow(2)`` (4 + 4), ``mean`` (4), the ``rsqrt`` product (4 + 4), the weight product in fp32
(4 + 4), the downcast (read 4, write 2): 40 bytes per element, where Llama's norm multiplies
by its weight after the downcast, in 16 bits (36). Compiled, one fused kernel moves what
:data:`NORM_BYTES_PER_ELEMENT` says."""


LAYER_NORM_BYTES_PER_ELEMENT = 4
"""``torch.nn.LayerNorm`` runs one fused kernel (``native_layer_norm``): read 2, write 2 bytes per
element, eager or compiled."""

RESIDUAL_BYTES_PER_ELEMENT = {"eager": 6, "compiled": 0}
"""A residual add reads two bf16 tensors and writes one (6 bytes per element); inductor fuses it
into the following norm."""

ROTARY_BYTES_PER_ELEMENT = {"eager": 20, "compiled": 8}
"""transformers 5.17 ``apply_rotary_pos_emb`` on q and k, eager, bf16: ``q * cos`` (read 2, write
2; ``cos`` is one row per token broadcast over the heads, read from its own small storage),
``rotate_half(q)``: its two slices are views, ``-x2`` reads and writes half the elements (1 + 1)
and ``torch.cat`` reads both halves and writes the whole (2 + 2), ``* sin`` (2 + 2) and the sum
(4 + 2): 20 bytes per q/k element. TRACED (``tools/count_block_traffic.py``: the stack's
forward bytes change by 20 per q/k element when the widths of q and of k/v change apart; the
table said about 30 until 2026-12-06). Fused: read q (or k), cos, sin, write the result."""

ATTENTION_IO_BYTES_PER_ELEMENT = {"eager": 16, "compiled": 8}
"""Copies around the attention kernel per element of q, k and v where they are not traced
(compiled blocks, fp32 activations: :data:`FP32_ACTIVATION_BYTES_PER_ELEMENT`): transposes of
q, k, v to the head-major layout and the output's ``contiguous`` copy (read 2 + write 2 each).
Eager on 16-bit activations the copies are counted as transformers and torch make them
(:func:`attention_copy_bytes`)."""

ATTENTION_OUTPUT_COPY_BYTES = 4
"""transformers 5.17 ``attn_output.transpose(1, 2).contiguous()`` after eager attention
(``eager_attention_forward``): the value matmul writes its output head-major, so the call copies
it to token-major (read 2, write 2 per q element, bf16); its backward hands the gradient on
without a kernel (the value gradient's copy is :data:`VALUE_GRAD_COPY_BYTES`). After SDPA's fused kernels and the FlashAttention package the same call copies
nothing: torch 2.13 ``_scaled_dot_product_flash_attention_cuda`` and
``_scaled_dot_product_efficient_attention_cuda`` (``aten/src/ATen/native/transformers/cuda/
attention.cu``) take ``query.transpose(1, 2)`` views (the kernels need only a contiguous last
dimension) and return ``output.transpose(1, 2)`` of a token-major buffer, and their backward
transposes views the same way; the transposes of q, k and v in transformers' attention are views
too. Traced on the CPU's SDPA (``tools/count_block_traffic.py``: no copy either way)."""

VALUE_GRAD_COPY_BYTES = 4
"""Eager attention's backward copies the value gradient, per element of v (k/v width, bf16):
the probabilities' matmul (``torch.matmul(attn_weights, value_states)``) hands v's gradient back
head-major, and the view that made v head-major from the projection's token-major output
(``v_proj(x).view(...).transpose(1, 2)``) needs it token-major, so autograd copies it (read 2,
write 2). q's and k's gradients take the same copy under every attention (they leave the rotary
embedding's backward head-major: part of :data:`ROTARY_BACKWARD_BYTES_PER_ELEMENT`), v's only
where SDPA's fused kernels, which return it as a view of a token-major buffer, do not run.
Traced on the CPU (``tools/count_block_traffic.py --attention=eager``): eager's backward less
SDPA's is this copy and the repeat of grouped heads beyond the scores, to the byte on Llama-2-7B
(16,384 bytes per token: 4 x 4,096) and Qwen3-0.6B (4 x 1,024 + the repeat's 12,288)."""

REPEAT_KV_BYTES_PER_ELEMENT = 4
"""transformers 5.17 ``repeat_kv`` on k and v where grouped k/v heads are repeated to every query
head: eager attention always, SDPA when it is handed a mask tensor
(``integrations/sdpa_attention.py`` ``use_gqa_in_sdpa``: no mask and a head dim of 256 at most,
else ``repeat_kv``). ``expand`` then ``reshape`` copies: each of k and v read at its own width
and written at the query width (2 + 2 bytes), 4 per element of ``q + kv`` over the two; the
backward sums the copies back (``expand``'s gradient: read the query width, write the k/v
width), the same bytes."""

WEIGHTLESS_NORM_BYTES_PER_ELEMENT = {"forward": 32, "backward": 80}
"""Gemma 4's ``v_norm`` (transformers 5.17 ``Gemma4RMSNorm(with_scale=False)`` over v, per head),
eager, bf16, per element: the fp32-scale norm's passes without the weight's product, forward
upcast (2 + 4), ``pow(2)`` (4 + 4), ``mean`` (4), the product with ``pow(mean, -0.5)`` (4 + 4),
the downcast (4 + 2): 32; backward 80, where the norm with its weight moves 88 frozen and 104
trained (:data:`NORM_BACKWARD_BYTES_PER_ELEMENT`). TRACED on the module
(``tools/count_block_traffic.py --norms``): 32.0 and 80.0."""

LAYER_SCALAR_BYTES_PER_ELEMENT = 4
"""Gemma 4's ``hidden_states *= self.layer_scalar`` at the end of each block (a buffer, not
trained): an in-place product over the hidden state, read 2 and write 2 per element in bf16,
forward; its backward scales the incoming gradient once more (2 + 2)."""

GEMMA4_ROUTER_SCALE_BYTES_PER_ELEMENT = {"forward": 8, "backward": 16}
"""Gemma 4's router scales its normalised input before its projection,
``hidden_states * self.scale * self.scalar_root_size`` (transformers 5.17
``modeling_gemma4.py`` ``Gemma4TextRouter.forward``): two products over the hidden state
(bf16, read 2 and write 2 each) forward; backward the incoming gradient through both (2 + 2
each) and the trained ``scale``'s gradient (the gradient times the normalised input, summed
over tokens), 16. Traced on the router module (CPU, bf16): 40 forward and 96 backward per
hidden element with its weightless norm (:data:`WEIGHTLESS_NORM_BYTES_PER_ELEMENT`, 32 and
80)."""

NORM_BACKWARD_BYTES_PER_ELEMENT = {
    ("llama", "frozen"): 84,
    ("llama", "trained"): 92,
    ("fp32_scale", "frozen"): 88,
    ("fp32_scale", "trained"): 104,
    ("layer", "frozen"): 6,
    ("layer", "trained"): 6,
}
"""Backward of transformers 5.17's eager RMSNorm per element of the hidden state, bf16, by its
kind (``LlamaRMSNorm``: :data:`NORM_BYTES_PER_ELEMENT`; Gemma's fp32 scale:
:data:`NORM_FP32_SCALE_BYTES_PER_ELEMENT`) and whether its weight trains (full fine-tuning) or
is frozen (LoRA, QLoRA). TRACED on the module alone (``tools/count_block_traffic.py
norm_backward``, torch 2.13): autograd runs back the two casts (4 + 2, 2 + 4), the fp32
product's gradient for both factors, ``rsqrt``'s and ``mean``'s and ``pow``'s gradients and
the sum of the input's two gradients in fp32 (the input feeds both ``pow`` and the product);
a trained weight adds its product with the incoming gradient and the sum over tokens. More
than the twice the forward (72, 80) that calc counted until 2026-12-06. ``torch.nn.LayerNorm``
(``layer``: GPT-2, Phi-1.5/2, GPT-NeoX, Falcon, StableLM) runs one fused kernel each way,
``native_layer_norm_backward``: the incoming gradient and the input read, the input's gradient
written (2 + 2 + 2; its weight's and bias's sums over the tokens ride in the same pass): 6,
trained or frozen, where twice its forward (:data:`LAYER_NORM_BYTES_PER_ELEMENT`) counted 8
until 2026-12-07."""

ROTARY_BACKWARD_BYTES_PER_ELEMENT = 32
"""Backward of :data:`ROTARY_BYTES_PER_ELEMENT`'s ops per q/k element, eager, bf16: the
gradients of the two products (2 + 2 each, the broadcast ``cos`` and ``sin`` read from their
small storage), the negation's (1 + 1), the two slices' ``slice_backward`` (each writes a
zero-filled whole and copies its half: 6 in all), the sum of the three gradients that reach q
(two adds, 6 each) and one copy of the incoming gradient (2 + 2): 32. TRACED
(``tools/count_block_traffic.py``), where twice the forward counted 60."""

GATED_ACT_BACKWARD_BYTES_PER_ELEMENT = 18
"""Backward of the gated MLP's ``act(gate) * up`` per element of its inner width, eager, bf16:
the product's gradient for each factor (read 2 + 2, write 2, twice) and the activation's own
backward (``silu_backward`` or ``gelu_backward``: read the gradient and the gate, write 2): 18.
TRACED (``tools/count_block_traffic.py``), where twice the forward counted 20."""

FANOUT_ACCUMULATE_BYTES_PER_ELEMENT = 6
"""A tensor that several ops read gets one gradient from each, and autograd adds them
(``InputBuffer::accumulate``: read two, write one, in the tensor's dtype: 2 + 2 + 2 bytes per
element in 16 bits), once per reader beyond the first. In a decoder block (traced,
``tools/count_block_traffic.py``): the residual stream before each residual add feeds the norm
and the skip (one add each, two per block; the add itself runs back without a kernel); the
attention norm's output feeds each input projection (q, k and v: two adds; a fused qkv: none),
the MLP norm's output each input projection (gate and up: one; a fused gate-up: none) and, in
a routed MoE block, the router beside the experts."""

BIAS_GRADIENT_BYTES_PER_ELEMENT = 2
"""Backward of a trained linear's bias, per token and output element: the bias is added
broadcast over the tokens (``addmm``), so its gradient is the output's gradient summed over them
(torch 2.13 ``derivatives.yaml`` ``addmm``: ``maybe_multiply(grad, beta)`` reduced to the
bias's shape by autograd, one ``sum`` reading the 16-bit gradient once; the few bias elements
written are nothing). TRACED (``tools/count_block_traffic.py``): GLM-4.5-Air's block moves
28,672 bytes per token more with ``attention_bias`` than without, its q, k and v outputs
(12,288 + 1,024 + 1,024) at 2 bytes each; Qwen2.5's q, k and v biases likewise. Not counted
before 2026-12-07. A routed expert's bias is :data:`calc.moe_kernels.BIAS_BYTES_PER_ELEMENT`'s."""


def bias_gradient_bytes(req: EstimateRequest) -> float:
    """Bytes per token of one block on average of the bias gradients of its linears
    (:data:`BIAS_GRADIENT_BYTES_PER_ELEMENT`), where the base weights train (full
    fine-tuning; peft leaves biases frozen by default): every biased linear but the routed
    experts', counted by :mod:`calc.moe_kernels`."""
    if req.method is not Method.FULL:
        return 0.0
    arch = req.model
    outputs = sum(
        lin.d_out * lin.active * arch.blocks_of(lin)
        for lin in arch.linears
        if lin.bias and lin.count == 1 and lin.role != "indexer"
    )
    return BIAS_GRADIENT_BYTES_PER_ELEMENT * outputs / arch.num_layers


MLP_ACT_BYTES_PER_ELEMENT = {"eager": 10, "compiled": 6}
"""Gated MLP ``act(gate) * up``: the activation reads and writes the gate (4 bytes), the product
reads two and writes one (6): 10 bytes per element of the MLP's inner width, 6 fused. A plain
MLP (no gate) has the activation only (4, fused 4)."""

CLAMPED_GLU_BYTES_PER_ELEMENT = 32
"""gpt-oss's gated unit, op by op (transformers 5.17 ``GptOssExperts._apply_gate``; the family
sets ``arch.extra["clamped_glu"]``, ``calc.hf_config``): ``gate.clamp(max=limit)`` (read 2, write 2),
``up.clamp(-limit, limit)`` (2 + 2), ``gate * alpha`` (2 + 2), ``torch.sigmoid`` (2 + 2),
``gate * sigmoid`` (4 + 2), ``up + 1`` (2 + 2), ``(up + 1) * glu`` (4 + 2): 32 bytes per element of
the experts' width, where the plain ``act(gate) * up`` moves 10 (:data:`MLP_ACT_BYTES_PER_ELEMENT`)."""

TANH_GELU_OP_BY_OP_BYTES_PER_ELEMENT = 36
"""A plain MLP whose activation is ``gelu_new`` (GPT-2's and Phi's default), eager: transformers
5.17 ``activations.py`` ``NewGELUActivation.forward`` is written in Python, ``0.5 * input * (1.0 +
torch.tanh(c * (input + 0.044715 * torch.pow(input, 3.0))))``, so each op is its own kernel over
the inner width: ``pow`` (read 2, write 2), ``* 0.044715`` (2 + 2), ``input + ...`` (4 + 2),
``c * ...`` (2 + 2), ``tanh`` (2 + 2), ``1.0 + ...`` (2 + 2), ``0.5 * input`` (2 + 2) and the
product (4 + 2): 36 bytes per element on 16-bit activations, where ``F.gelu``'s one kernel
moves 4 (:data:`MLP_ACT_BYTES_PER_ELEMENT`). The families that have it are the ones whose
memory counts its saved tensors (``calc.hf_config._TANH_GELU_SAVED_WIDTHS``); compiled, it
fuses into one kernel."""

TANH_GELU_OP_BY_OP_BACKWARD_BYTES_PER_ELEMENT = 56
"""The backward of :data:`TANH_GELU_OP_BY_OP_BYTES_PER_ELEMENT`'s ops, as autograd runs them
(``gelu_new``, bf16, per element of the MLP's inner width): each product's and sum's gradient,
``tanh_backward`` and ``pow_backward``, and the sum of the input's three gradients (it feeds
``0.5 * input``, the cube and the sum inside the tanh). TRACED (``transformers.activations``
``NewGELUActivation`` alone, torch 2.13, CPU): 56, where twice the forward counted 72 until
2026-12-07."""

LORA_BYTES_PER_OUTPUT = 10
"""peft 0.21 ``lora.Linear.forward``: ``lora_B(lora_A(x)) * scaling`` (read 2, write 2) and the
add to the base output (read 4, write 2): 10 bytes per output element of each adapted linear."""

LORA_FP32_BYTES_PER_OUTPUT = 24
"""peft 0.21 ``lora.Linear.forward`` with fp32 adapters on a 16-bit base layer: ``lora_B(...) *
scaling`` on the fp32 output (read 4, write 4), ``result + ...`` promotes to fp32 (read 2 and 4,
write 4) and ``result.to(torch_result_dtype)`` casts back (read 4, write 2): 24 bytes per output
element of each adapted linear, where :data:`LORA_BYTES_PER_OUTPUT` counts 10 for adapters in the
base dtype."""

LORA_MATMUL_ELEMENTS = {"forward": 1, "backward": 2}
"""Passes over the adapted linear's input and over its output (or output gradient) that the two
rank-``r`` matmuls of one adapter make: forward, ``lora_A`` reads the input (``d_in`` per token)
and ``lora_B`` writes its output (``d_out``); backward, ``lora_B``'s weight gradient and its
input gradient each read the output gradient (2 ``d_out``), ``lora_A``'s weight gradient reads
the input and its input gradient writes one (2 ``d_in``). At rank ``r`` a matmul does ``2 r``
FLOPs per element it reads or writes (``r / 2`` FLOPs per byte in fp32, ``r`` in 16 bits): far
below the ridge point of every card (the H100 SXM's dense BF16 peak over its HBM bandwidth is
989 / 3.35 = 295 FLOPs per byte), so the adapters' matmuls run at the memory's rate, not the
tensor cores': their time is the larger of their FLOPs at the adapters' rate and these bytes at
the memory's (:func:`step_breakdown`), in the adapters' dtype (4 bytes fp32, 2 bytes 16-bit).
Unsloth's ``matmul_lora`` makes the same passes in the compute dtype (``X @ A``, then
``out.addmm_`` into the base output); adapters folded into their weight before the matmul make
none."""

LORA_CAST_BYTES_PER_INPUT = 6
"""peft 0.21 ``lora.Linear.forward`` casts the layer's input to the adapters' dtype
(``_cast_input_dtype(x, lora_A.weight.dtype)``) before the adapter path: fp32 adapters on a
16-bit input read 2 bytes and write 4 per input element of each adapted linear; the cast runs
whether or not autocast is on (it is an explicit ``.to``)."""

AUTOCAST_WEIGHT_CAST_BYTES = {4: 6, 2: 4}
"""Bytes moved per weight element, by the weight's own bytes: ``torch.autocast`` hands each matmul
a 16-bit copy of a weight that is not in its dtype (``aten/src/ATen/autocast_mode.cpp``
``cached_cast``, pytorch/pytorch 008ec6b1): an fp32 weight, read 4 bytes and write 2; a 16-bit
weight of the other type (``weights_loaded_other_16bit``: fp16 under bf16 autocast), read 2 and
write 2. It keeps the copy for reuse only when the weight is a leaf that
requires grad, and ``clear_cache`` drops every copy when the outermost autocast region exits, at
the end of each forward: a trained fp32 weight is cast once per forward, a frozen one (the base
weights under LoRA) at each use, which for a linear run once per forward is the same count. A
checkpointed block's recomputation runs in an autocast region of its own and casts its weights
again; the backward's matmuls use the copies the forward saved. Where the weights are fp32
under autocast (calc's ``mixed-amp`` regime: ``*-mixed`` without ZeRO or FSDP, the weights not
loaded in 16 bits); DeepSpeed and FSDP give the modules 16-bit weights themselves, and
QLoRA's 4-bit weights are dequantized by bitsandbytes, not cast. The adapters' own casts (fp32
LoRA weights, a fraction of a percent of the model) are left out."""

AUTOCAST_ADAPTER_INPUT_CAST_BYTES = 6
"""Under autocast, fp32 adapters' ``lora_A`` gets its input cast to 16 bits by autocast (read 4,
write 2 per input element), after peft's own cast of a 16-bit input to the adapters' fp32
(:data:`LORA_CAST_BYTES_PER_INPUT`): a round trip per adapted linear (torch 2.13
``autocast_mode.cpp`` ``linear``; peft 0.21 ``lora.Linear.forward`` ``_cast_input_dtype``).
Where the input is the fp32 residual stream's norm output, peft's cast is a no-op and only
this one runs (:func:`fp32_stream_counted`)."""

LORA_BACKWARD_BYTES_PER_OUTPUT = {"16bit": 4, "fp32_branch": 20}
"""Backward of peft 0.21 ``lora.Linear.forward``'s output side, per output element of each
adapted linear (traced, ``tools/count_lora_traffic.py``: LoRA less the same stack with only its
weight matrices trained, per block and token, peft 0.21, transformers 5.17, torch 2.13). The scale's gradient
reads and writes the output gradient (2 + 2 in 16 bits); the add to the base output passes
its gradient on without a kernel. Where fp32 adapters run their branch in fp32 on a 16-bit
layer (:data:`LORA_FP32_BYTES_PER_OUTPUT`, no autocast) the scale's gradient is fp32 (4 + 4)
and the two casts the forward made run back: the gradient of ``.to(torch_result_dtype)`` up to
fp32 (read 2, write 4) and the add's gradient to the 16-bit base output down to 16 bits (read
4, write 2): 8 + 6 + 6 = 20. Not twice the forward (:data:`BACKWARD_ELEMENTWISE_FACTOR`), which
counted 20 and 48."""

LORA_INPUT_GRAD_ACCUMULATE_PASSES = 3
"""Backward of the input side, per input element of each adapted linear: the linear's input
feeds both the base matmul and the adapter, so autograd adds the adapter's input gradient to
the base's (``InputBuffer::add``: read two, write one) in the input's dtype (2 bytes each on a
16-bit stream, 4 on the fp32 stream of :mod:`calc.amp_traffic`); each cast the forward made of
the input (:data:`LORA_CAST_BYTES_PER_INPUT`, :data:`AUTOCAST_ADAPTER_INPUT_CAST_BYTES`) runs
back as the reverse cast, the same bytes, and a dropout's backward moves what its forward did
(:data:`LORA_DROPOUT_BYTES_PER_INPUT`). Traced as :data:`LORA_BACKWARD_BYTES_PER_OUTPUT`:
6 per input element with 16-bit adapters, 12 with fp32 ones without autocast, 18 under
autocast (12 + 6 on the fp32 stream's readers, whose accumulation is fp32)."""

LORA_DROPOUT_BYTES_PER_INPUT = {"fp32": 9, "16bit": 5}
"""``lora_dropout`` > 0: ``nn.Dropout`` on the (cast) input of each adapted linear reads it and
writes it (4 + 4 bytes in fp32, 2 + 2 in 16-bit) and writes its mask (1 byte per element,
torch's fused dropout keeps a bool mask for the backward)."""

LOSS_BYTES_PER_LOGIT = 24
"""Cross-entropy on bf16 logits, forward and backward (transformers' ``ForCausalLMLoss``): upcast
to fp32 (read 2, write 4), log-softmax (read 4, write 4), its gradient (read 4, write 4) and the
downcast of the logits' gradient (write 2): 24 bytes per logit per token."""

# --- Liger-Kernel (``liger_kernel``): its Triton kernels in place of transformers' modules -----
# Read from liger-kernel v0.8.2 (000be609, 2026-08-18), ``src/liger_kernel/ops/``; each kernel
# makes one pass over its rows, so its traffic is what it loads and stores. Bytes per element
# with 16-bit activations (fp32 activations move twice as many).

LIGER_NORM_BYTES_PER_ELEMENT = {"forward": 4, "backward": 6}
"""``LigerRMSNorm`` (``ops/rms_norm.py``): the forward row kernel loads the input row and
stores the output row (2 + 2; the weight row and the fp32 ``rstd`` per row are ``1/T`` and
``2/h`` of that); the backward kernel loads the output gradient and the input and stores the
input gradient in the output gradient's place (2 + 2 + 2); each program keeps its weight
gradient in registers and ``_dW.sum(0)`` adds ``sm_count x h`` fp32 values, nothing per token.
Where transformers' eager norm moves :data:`NORM_BYTES_PER_ELEMENT` forward and twice that
backward."""

LIGER_ROTARY_BYTES_PER_ELEMENT = {"forward": 4, "backward": 4}
"""``LigerRopeFunction`` (``ops/rope.py``): one kernel rotates q and k in place, forward
(load 2, store 2 per q/k element; ``cos`` and ``sin`` once per token, shared by the heads) and
backward (the same kernel with the inverse rotation, in the incoming gradient's place). The
backward's ``dq.transpose(1, 2).contiguous()`` copies only when the attention kernel returns
the gradient in another layout, which calc does not count."""

LIGER_GLU_BYTES_PER_ELEMENT = {"forward": 6, "backward": 10}
"""``LigerSiLUMulFunction`` / ``LigerGELUMulFunction`` (``ops/swiglu.py``, ``ops/geglu.py``),
per element of the MLP's inner width: forward loads the gate and up outputs and stores the
product (2 + 2 + 2); backward loads the product's gradient, the gate and the up outputs and
stores the two gradients in their places (2 + 2 + 2 + 2 + 2). The activation is computed in
registers (fp32) both ways."""

LIGER_LOSS_BYTES_PER_LOGIT = 6
"""``liger_cross_entropy_kernel`` (``ops/cross_entropy.py``), run on each chunk of logits of
the fused linear cross-entropy: a first loop over the row loads the 16-bit logits for the
online max and sum, a second loads them again and stores the gradient in their place
(2 + 2 + 2); soft-capping, when the model has it, is inside the kernel. Transformers' loss
moves :data:`LOSS_BYTES_PER_LOGIT` and the soft-cap's passes."""

LIGER_FLCE_BYTES_PER_HIDDEN = 10
"""The fused linear cross-entropy's traffic per element of the hidden states it reads
(``ops/fused_linear_cross_entropy.py``): ``grad_input = torch.zeros_like(_input)`` (store 2),
``grad_input[chunk] = grad_logits_chunk @ weight`` copies the product in (load 2, store 2) and
the backward's ``element_mul_kernel`` scales it in place when the loss is divided by the
batch's token count, as the Trainer's is (load 2, store 2)."""

LIGER_HEAD_GRAD_BYTES_PER_CHUNK = {"cast": 16, "addmm": 8, "fp32_cast": 20}
"""What the fused linear cross-entropy moves per output-layer weight element, per chunk, to
accumulate the weight's gradient (``fused_linear_cross_entropy_forward``): a 16-bit weight
(``grad_weight`` is ``zeros_like(weight)``) takes ``grad_weight += torch.mm(...).float()``,
the product (store 2), its fp32 copy (load 2, store 4) and the in-place add (load 2 and 4,
store 2): 16 (``cast``); an fp32 weight on torch >= 2.8 and a card of compute capability 8 or
more takes ``torch.addmm(..., out_dtype=torch.float32, out=grad_weight)``, whose product
loads and stores the fp32 accumulator (4 + 4): 8 (``addmm``); an fp32 weight on an older
card takes the cast path with an fp32 add (2 + 2 + 4 + 4 + 4 + 4): 20 (``fp32_cast``). The
chunk's depth is about ``h / V`` of the tokens (:func:`calc.liger.flce_chunk_tokens`), so this
repeats about ``V / h`` times per micro-step. Once per micro-step besides: the zero fill
(store ``w``) and the backward's in-place scaling (load and store ``w``). liger-kernel before
v0.6.2 (#830) accumulated with ``torch.addmm(out=grad_weight)`` in every dtype."""

# --- Unsloth (``fused_lora_kernels``): its Triton kernels in place of transformers' modules --------
# Read from unsloth 2026.8.19 (015bdef0d9), ``unsloth/kernels/``; bytes per element with 16-bit
# activations (fp32 activations move twice as many), as the Liger tables above.

UNSLOTH_NORM_BYTES_PER_ELEMENT = {"forward": 4, "backward": 6}
"""``Fast_RMS_Layernorm`` (``kernels/rms_layernorm.py``): ``_rms_layernorm_forward`` (and the
Gemma variant) loads the input row and stores the output row (2 + 2; the weight row and one fp32
statistic per row are ``1/T`` and ``2/h`` of that); ``_rms_layernorm_backward`` loads the output
gradient and the input and stores the input gradient in the output gradient's place
(2 + 2 + 2), and computes no weight gradient. Where transformers' eager norm moves
:data:`NORM_BYTES_PER_ELEMENT` forward and twice that backward."""

UNSLOTH_ROTARY_BYTES_PER_ELEMENT = {"forward": 8, "backward": 8}
"""``Fast_RoPE_Embedding_QK`` (``kernels/rope_embedding.py``), called by Unsloth's attention
forward (``models/llama.py`` ``LlamaAttention_fast_forward``) on q and k after
``.view(...).transpose(1, 2)``: the tensors are not contiguous, so each is cloned first
(``Q.clone() if not Q.is_contiguous()``: load 2, store 2), then ``_rope_embedding_QK`` rotates the
clone in place (load 2, store 2); the backward does the same to the incoming gradients, which
come back in the forward's strided layout: 8 bytes per q/k element each way, where
transformers' op-by-op rotation moves :data:`ROTARY_BYTES_PER_ELEMENT` forward."""

UNSLOTH_GLU_BYTES_PER_ELEMENT = {"forward": 6, "backward": 12}
"""The gated activation inside ``LoRA_MLP`` (``kernels/swiglu.py``, ``kernels/geglu.py``), per
element of the MLP's inner width: ``_fg_kernel`` loads the gate and up outputs and stores the
product (2 + 2 + 2); ``_DWf_DW_dfg_kernel`` loads the product's gradient and the gate and up
outputs and stores the recomputed product and the two gradients in their places
(2 + 2 + 2, 2 + 2 + 2). Only where the MLP runs as ``LoRA_MLP``
(:func:`calc.memory.fast_lora_keys`); elsewhere the family's own activation runs."""

UNSLOTH_LORA_ADD_BYTES = {"forward": 2, "backward": 2}
"""One adapted linear inside Unsloth's autograd functions (``kernels/utils.py`` ``matmul_lora``,
``kernels/fast_lora.py``): the adapter's product is accumulated into the base output by
``out.addmm_(X @ A, B, alpha=s)``, whose epilogue loads the base output it adds to (2 bytes per
output element; its store is the adapter matmul's own write, counted in
:data:`LORA_MATMUL_ELEMENTS`), where peft scales and adds in two kernels
(:data:`LORA_BYTES_PER_OUTPUT`); backward, the adapter's part of the input gradient is
``addmm_``-ed into it the same way (2 bytes per input element). No cast of the input either:
``matmul_lora`` casts the adapter weights to the input's dtype."""

LIGER_FORWARD_OPS = {"norm": 1, "rotary": 1, "glu": 1}
"""Kernels Liger's modules launch in a block's forward, each where transformers' eager code
dispatches :data:`STOCK_FORWARD_OPS` (their backward: ``rms_norm_backward``'s kernel, its
``_dW.sum(0)`` and cast; one rope kernel; one gated-activation kernel: the two per forward
op :data:`BACKWARD_OPS_FACTOR` counts)."""

STOCK_FORWARD_OPS = {"norm": 8, "rotary": 10, "glu": 2}
"""The ops transformers' eager code dispatches for one RMSNorm (the cast to fp32, the square,
the mean, the epsilon's sum, the reciprocal square root, the product, the cast back and the
weight's product: 8), the rotary embedding of q and k (``rotate_half``'s negation and
concatenation, two products and a sum, for each: 10) and the gated activation with its
product (2): TRACED, the parts of the Llama block's 31 in :data:`TRANSFORMERS_BLOCK_OPS`
(two norms, the rotary embedding, SDPA, the gated activation, two residual sums)."""

LIGER_FLCE_OPS_PER_CHUNK = {"base": 5, "cast": 3, "addmm": 1}
"""Kernels the fused linear cross-entropy launches per chunk (``fused_linear_cross_entropy_
forward``, no bias, no token scaling): the logits' matmul, the cross-entropy kernel, the
loss slice's copy, the input gradient's matmul and its copy into ``grad_input`` (5); to
accumulate a trained output layer's gradient, ``mm``, ``.float()`` and the add (3), or one
``addmm`` (1)."""

FP32_ACTIVATION_BYTES_PER_ELEMENT = {
    ("norm", "eager"): 28,
    ("norm", "compiled"): 16,
    ("residual", "eager"): 12,
    ("residual", "compiled"): 0,
    ("rotary", "eager"): 40,
    ("rotary", "compiled"): 16,
    ("attention_io", "eager"): 32,
    ("attention_io", "compiled"): 16,
    ("mlp_act", "eager"): 20,
    ("mlp_act", "compiled"): 12,
    ("lora_output", "eager"): 28,
    ("lora_output", "compiled"): 28,
    ("loss_logit", "eager"): 16,
    ("loss_logit", "compiled"): 16,
}
"""The element-wise traffic of the tables above when the activations are fp32 (QLoRA after
peft's ``prepare_model_for_kbit_training`` without autocast, :data:`calc.states.KBIT_FP32`), per
element: RMSNorm's upcast and downcast are no-ops, ``pow`` (4 + 4), ``mean`` (4), the ``rsqrt``
product (4 + 4) and the weight product (4 + 4): 28, fused 4 + 4 twice: 16; a residual add reads
two and writes one fp32 tensor: 12; rotary's passes and the transposes around attention move 4
bytes where the 16-bit tables move 2: 40 and 32 (fused 16, 16); the gated activation 20 (fused
12); each adapted 4-bit linear's output, peft 0.21 ``tuners/lora/bnb.py`` ``Linear4bit.forward``:
``result.clone()`` (4 + 4), ``* scaling`` (4 + 4) and the add (4 + 4 + 4): 28; the loss on fp32
logits skips the upcast and the downcast: log-softmax (4 + 4) and its gradient (4 + 4): 16."""

KBIT_CAST_BYTES_PER_ELEMENT = 6
"""bitsandbytes 0.49.2 ``nn/modules.py`` ``Linear4bit.forward`` on an fp32 input: ``x.to(
self.compute_dtype)`` reads 4 and writes 2 bytes per input element, ``out.to(inp_dtype)`` reads 2
and writes 4 per output element; in the backward their gradients run the other way (4 + 2,
2 + 4). 6 bytes per input and per output element of each 4-bit linear, per pass (forward,
backward, recomputed forward)."""

BACKWARD_ELEMENTWISE_FACTOR = 2
"""The backward of an element-wise op reads its saved input and the incoming gradient and writes
the outgoing one: about twice its forward traffic."""

BACKWARD_OPS_FACTOR = 2
"""Autograd runs about two kernels per forward op (gradient of each input)."""

DDP_BUCKET_BYTES = 25 * 2**20
"""``torch.nn.parallel.DistributedDataParallel(bucket_cap_mb=25)``: gradients are all-reduced in
25 MiB buckets as backward produces them; only the last bucket's all-reduce is certainly
exposed (torch 2.13 ``DistributedDataParallel`` docstring)."""

FSDP2_COPY_OUT_PASSES = 2
"""Memory passes of FSDP2's copy-out of one unit's gathered parameters: read the all-gather
buffer, write each parameter's own tensor. FSDP2 (``fully_shard``) all-gathers a unit into one
flat buffer and then ``FSDPParamGroup.wait_for_unshard`` calls ``foreach_all_gather_copy_out``
(torch 2.13 ``distributed/fsdp/_fully_shard/_fsdp_collectives.py``), whose
``torch.ops.fsdp.split_with_sizes_copy(all_gather_output, ..., out=...)`` copies it into the
per-parameter tensors on the current (compute) stream: that stream waits for the all-gather
first, and the copy runs between the unit's neighbours' kernels, not behind communication
(only the next unit's all-gather, on its own stream, overlaps it). Each unit is copied out
at every unshard: a block in its forward and again in the backward (``reshard_after_forward``
frees it after the forward; recomputation runs inside the backward's unshard), the root
(embedding, final norm, output layer), which ``FSDPState._lazy_init`` does not reshard after
the forward, once. FSDP1 hands the modules views of the gathered flat parameter
(``_flat_param.py`` ``_use_unsharded_views``): no copy, so the request's
``fsdp_fully_shard`` switches this on."""

CPU_MEMORY_BYTES_PER_S = 40e9
"""Host memory bandwidth the CPU optimizer streams at: a cloud VM's share of a server socket
(STREAM triad on an 8-channel DDR4-3200 socket is about 150 GB/s; a GPU VM gets a fraction).
A stated assumption: the validation set's covered CPU-offload rows (Answer.AI's FSDP offload of
LoRA/QLoRA adapters on RTX 4090s, rows 252, 255, 257-260) send only adapters through the CPU
optimizer, under 2 % of their step, so no fitted row tests this rate; they do test the weights'
streaming over the host link (:func:`step_breakdown`). Judged only (not fitted): the ZenFlow
blog's DeepSpeed ZeRO-2 offload rows on a DGX A100 (first contact fct-t26cb1, cb2, cb4, two
EPYC 7742 for two ranks) read 8.5 to 25 % fast with it and :mod:`calc.host_offload`'s counts,
the fastest with each rank bound to its own cores."""

GRAD_CLIP_PASSES = 3
"""``torch.nn.utils.clip_grad_norm_`` (torch 2.13, foreach path): one read of every gradient
for the norm, then a read and a write to scale them (it always multiplies by the clamped
coefficient). Hugging Face Trainer clips by default (``max_grad_norm=1.0``); a loop that does
not clip (request key ``gradient_clipping`` False: torchtune's and LitGPT's defaults) skips
them."""

ZERO_GRAD_PASSES = 1
"""Writes of every gradient when the loop zeroes them in place instead of freeing them
(``zero_grad_set_to_none`` False): torch 1.12 ``Optimizer.zero_grad(set_to_none=False)``
calls ``p.grad.zero_()`` on each gradient (later versions one ``torch._foreach_zero_``): one
write pass per step; freed gradients cost nothing."""

FP8_CAST_BYTES_PER_ELEMENT = 3
"""Float8 training with dynamic tensorwise scaling (torchao ``float8`` at 0.x, torchtitan's
default) casts each linear's input, weight and output gradient to FP8 before its matmul:
read 2 bytes, write 1 per element (the amax reduction fuses with the read under
torch.compile)."""

FP8_EAGER_CAST_BYTES_PER_ELEMENT = 33
"""One cast of a bf16 tensor to FP8 by torchao's ``Float8Linear`` without torch.compile
(torchao 0.18.0, tensorwise dynamic scaling), op by op: ``float8_utils.py`` ``tensor_to_amax``
``torch.max(torch.abs(x))`` (read 2, write 2, read 2), ``float8_training_tensor.py``
``_ToFloat8ConstrFunc.forward`` ``tensor.to(torch.float32) * scale`` (read 2, write 4; read 4,
write 4) and ``float8_utils.py`` ``to_fp8_saturated`` ``x.clamp(...)`` then ``.to(float8_dtype)``
(read 4, write 4; read 4, write 1): 33 bytes per element, against
:data:`FP8_CAST_BYTES_PER_ELEMENT` fused. The scale's own ops (``amax_to_scale``) touch one
element."""

FP8_EAGER_CASTS = {
    ("input", "forward"): 1,
    ("input", "backward"): 1,
    ("weight", "forward"): 1,
    ("weight", "backward"): 1,
    ("grad_output", "forward"): 0,
    ("grad_output", "backward"): 2,
}
"""Casts of one torchao ``Float8Linear`` per tensor, in each forward and in the backward
(torchao 0.18.0 ``float8/float8_linear.py`` ``matmul_with_hp_or_float8_args``; the module saves
its bf16 input and weight and casts again in the backward): forward, the input and the weight;
backward, the output gradient for the input's gradient and again for the weight's, the weight
for the input's gradient, the input for the weight's gradient. Six a micro-step, two more for
a recomputed forward."""

FLOAT8_LINEAR_OPS = {"forward": 28, "backward": 64}
"""Host-dispatched ops of one torchao ``Float8Linear`` without torch.compile (torchao 0.18.0),
counted on its code and checked with a ``TorchDispatchMode`` over one forward and backward on
the CPU (``benchmarks/count_float8_ops.py``): each cast is eleven ops (``abs``, ``max``, the
scale's ``to(float64)``, ``clamp``, ``reciprocal`` and ``mul`` for ``finfo.max / amax``, its
``to(float32)``, then the tensor's ``to(float32)``, the multiply by the scale, ``clamp`` and
``to(float8)``); each matmul is ``float8_ops.py`` ``addmm_float8_unwrapped``: the two scales'
``reciprocal`` and ``torch._scaled_mm``. Forward: two casts, the weight's ``t``, two reshapes
and the matmul (28). Backward: four casts, the reshapes and transposes (7), the ``detach`` of
the returned gradient, two matmuls, and ``preprocess_addmm``'s layout copies (a row-major
operand in B, a column-major one in A: ``t().contiguous().t()`` for the weight and the input,
``contiguous()`` for the transposed output gradient, 7 ops): 64. A trained weight adds the
``t`` and ``detach`` of its gradient (66), as an ``nn.Linear`` does; both are taken as 64. An
``nn.Linear`` is counted as one op forward and :data:`BACKWARD_OPS_FACTOR` backward; the
difference is added."""

FP8_LAYOUT_COPY_BYTES_PER_ELEMENT = 2
"""``preprocess_addmm``'s copies in the backward (torchao 0.18.0 ``float8/float8_ops.py``): the
FP8 weight, the transposed FP8 output gradient and the FP8 input made contiguous in the layout
``torch._scaled_mm`` wants, read 1 byte and write 1 per element."""

# optimizer step traffic: passes over (parameter, gradient, state) per element
OPTIMIZER_OPS_PER_TENSOR = {"adamw": 8, "sgd": 1, "sgd-momentum": 3}
"""Ops the host dispatches per parameter tensor when the optimizer updates one tensor at a
time (``optimizer_per_tensor``). torch 2.13 ``torch/optim/adam.py`` ``_single_tensor_adam``
with decoupled weight decay (AdamW): ``param.mul_`` (weight decay), ``exp_avg.lerp_``,
``exp_avg_sq.mul_`` and ``.addcmul_``, ``exp_avg_sq.sqrt()``, the division by the bias
correction, ``.add_(eps)`` and ``param.addcdiv_`` (8; the step count and the bias corrections
are host scalars unless ``capturable``). ``torch/optim/sgd.py`` ``_single_tensor_sgd``:
``param.add_`` (1); with momentum ``buf.mul_(momentum).add_(grad)`` first (3)."""

_FOREACH_ADAMW = (4, 2, 12)
"""torch 2.13 ``_multi_tensor_adam`` (decoupled weight decay, non-capturable path):
``mul_(params)`` 2 param passes, ``lerp_(exp_avg, grad)`` 2 state + 1 grad, ``mul_(exp_avg_sq)``
2 state, ``addcmul_(exp_avg_sq, grad, grad)`` 2 state + 1 grad, ``sqrt`` -> temporary 2 state,
``div_`` 2, ``add_(eps)`` 2, ``addcdiv_(params, exp_avg, tmp)`` 2 param + 2 state."""
_FUSED_ADAMW = (2, 1, 4)
"""``torch._fused_adamw_`` and DeepSpeed FusedAdam / bitsandbytes' optimizers: one kernel reads
parameter, gradient and both states, writes parameter and both states."""


def _optimizer_passes(opt: Optimizer, fused: bool) -> tuple[int, int, int, int]:
    """(parameter passes, gradient passes, state passes, states) of one optimizer step."""
    if opt is Optimizer.ADAMW:
        p, g, s = _FUSED_ADAMW if fused else _FOREACH_ADAMW
        return p, g, s, 2
    if opt in (Optimizer.PAGED_ADAMW, Optimizer.ADAMW_8BIT, Optimizer.PAGED_ADAMW_8BIT):
        return (*_FUSED_ADAMW, 2)
    if opt is Optimizer.ADAFACTOR:
        return 4, 4, 0, 0  # per-tensor fp32 update; factored states are negligible
    if opt is Optimizer.SGD_MOMENTUM:
        return 2, 2, 2, 1
    return 2, 1, 0, 0  # plain SGD


def optimizer_step_bytes(req: EstimateRequest, trainable: int, reg: st.Regime) -> float:
    """Bytes the optimizer step moves through device memory for ``trainable`` parameters (one
    GPU's shard): parameter, gradient and state passes of the optimizer's kernels (see
    :data:`_FOREACH_ADAMW`), a separate fp32 master copy (ZeRO mixed precision: read 4, write
    4, and the 16-bit copy written back), and gradient clipping where the loop clips
    (:data:`GRAD_CLIP_PASSES`)."""
    p_pass, g_pass, s_pass, _states = _optimizer_passes(req.optimizer, req.optimizer_fused)
    state_bytes = {
        Optimizer.PAGED_ADAMW: 4,
        Optimizer.ADAMW_8BIT: 1,
        Optimizer.PAGED_ADAMW_8BIT: 1,
    }.get(req.optimizer, reg.state_bytes)
    weight = reg.master_bytes or reg.weight_bytes
    per_param = p_pass * weight + g_pass * reg.grad_bytes + s_pass * state_bytes
    if reg.master_bytes:
        per_param += reg.weight_bytes  # the updated 16-bit copy
    if req.gradient_clipping:
        per_param += GRAD_CLIP_PASSES * reg.grad_bytes
    if st.gradients_kept_between_steps(req):
        per_param += ZERO_GRAD_PASSES * reg.grad_bytes
    return float(per_param * trainable)


def host_optimizer_bytes(req: EstimateRequest) -> float:
    """Bytes per parameter a torch optimizer's per-tensor passes (:func:`_optimizer_passes`,
    unfused) move over fp32 tensors on the host: what FSDP's CPU offload steps with an optimizer
    other than AdamW (:func:`calc.host_offload.host_offload` counts AdamW itself, and under
    DeepSpeed the host always steps DeepSpeedCPUAdam)."""
    p_pass, g_pass, s_pass, _states = _optimizer_passes(req.optimizer, False)
    return float((p_pass + g_pass + s_pass) * st.FP32_BYTES)


def optimizer_dispatch_ops(req: EstimateRequest, layout: st.ParamLayout) -> float:
    """Ops the host dispatches one by one in an optimizer step that updates one tensor at a
    time (``optimizer_per_tensor``): :data:`OPTIMIZER_OPS_PER_TENSOR` for each trainable
    tensor (full fine-tuning: every weight and bias, and each block's norms; LoRA: the
    adapters' A and B and any trained copy of a module). 0 on the multi-tensor or fused path."""
    per_tensor = OPTIMIZER_OPS_PER_TENSOR.get(req.optimizer.value, 0)
    if not req.optimizer_per_tensor or not per_tensor or req.optimizer_in_backward:
        return 0.0
    arch = req.model
    tensors = sum(n for _, c, n in layout.tensors if c > 1 or n > 1)
    if req.method is Method.FULL:
        # the vector "rest" of the layout lumps the norms: one tensor per norm
        tensors += arch.num_layers * arch.norms_per_layer + 1
    return float(per_tensor * tensors)


def batch_saturation(
    micro_batch_size: int,
    seq_len: int,
    hidden_size: int = SATURATION_REFERENCE_HIDDEN,
    half_tokens: float | None = None,
) -> float:
    """``T / (T + T_half * (4096 / hidden)**2)``: the share of its large-step efficiency a
    micro-step of ``T`` tokens reaches on matmuls at the reference rate
    (:data:`HALF_TOKENS_REFERENCE_FLOPS`; :func:`saturation` at any other)."""
    return saturation(
        micro_batch_size * seq_len, hidden_size, HALF_TOKENS_REFERENCE_FLOPS, half_tokens
    )


def saturation(
    tokens: float, hidden_size: int, rate: float, half_tokens: float | None = None
) -> float:
    """:func:`batch_saturation` of a micro-step of ``tokens`` tokens (see
    :data:`HALF_TOKENS_REFERENCE_FLOPS` for why ``T_half`` grows with the rate)."""
    half = (
        (MATMUL_HALF_TOKENS if half_tokens is None else half_tokens)
        * (SATURATION_REFERENCE_HIDDEN / hidden_size) ** 2
        * (rate / HALF_TOKENS_REFERENCE_FLOPS)
    )
    return tokens / (tokens + half)


def default_mfu(utilisation_class: str, method: str = "full") -> float:
    """Large-step matmul efficiency of a card class (shown in the response, editable as
    ``mfu``). The method does not change it: LoRA's extra matmuls and kernels are counted in
    the step itself."""
    return MATMUL_EFFICIENCY.get(utilisation_class, MATMUL_EFFICIENCY_POOLED)


# --- counts of one request (cached: the plan asks for many cards and counts) ---------------------


@dataclass(frozen=True)
class Counts:
    """Everything the step needs that depends on the request only (not the card)."""

    flops: FlopsPerToken
    tokens_micro: int
    accumulation: int
    hidden: int
    layers: int
    dense_params: int
    quantized_params: int
    quantized_bytes: float
    trainable: int
    dequantisation_bytes: (
        float  # read and written by one pass's dequantisation of every 4-bit weight
    )
    grad_params: int
    reg: st.Regime
    passes: float  # forward + backward (+ recompute, its share): weight uses per micro-step
    kernels_per_micro: float
    fp8_cast_elements_per_token: float
    block_weight_params: int
    optimizer_bytes_per_param: float
    elementwise_bytes_per_token: float = 0.0  # forward + backward (+ recompute), whole model
    # Liger's output-layer gradient in fp32 on a card of compute capability under 8: what its
    # cast path moves beyond the addmm that elementwise_bytes_per_token counts
    liger_head_pre_ampere_bytes_per_token: float = 0.0
    attention_impl: str = "sdpa"  # the request's ``attention``
    torch_compile: bool = False  # the request's ``torch_compile``
    tf32: bool = False  # the request's ``tf32``: fp32 matmuls on TF32 tensor cores
    attention_mask: str = "causal"
    attention_dtype: str = "bf16"  # dtype of q, k, v when they reach attention
    half_dtype: str = "bf16"  # the 16-bit matmuls' dtype (bf16, fp16; fp32 in fp32 training)
    sdpa_cudnn_last: bool = False  # torch 2.5.1-2.10 SDPA order: cuDNN after math
    flash_attention_4: bool = False  # ``flash`` is FlashAttention-4 (tcgen05 on Blackwell)
    score_softcap: bool = False  # eager attention caps its scores with a tanh (Gemma-2)
    score_dropout: bool = False  # eager attention drops out its probabilities (GPT-2, Seed-OSS)
    fp32_matmul_flops_per_token: float = 0.0  # fp32 weights and inputs: CUDA cores, all passes
    head_dim: int = 128
    value_head_dim: int = 0  # v's head width where it differs from q/k's (MLA); 0: the same
    attention_keys: float = 0.0  # keys per query: the packed span, else seq_len
    # the blocks' attention by kernel and shape (calc.flops.attention_parts): windowed blocks
    # and Gemma 4's wide full blocks run their own kernel; empty: one part of the fields above
    attention_parts: tuple[AttentionPart, ...] = ()
    adapter_flops_per_token: float = 0.0  # the LoRA adapters' rank-r matmuls, all passes
    adapter_bytes_per_token: float = 0.0  # what those matmuls read and write, all passes
    adapter_fp32: bool = False  # the adapters' matmuls run in fp32 (no tensor cores)
    # DeepSpeed ZeRO-3's all-gathers per pass over the model and elements per reduce bucket
    # (0: one collective per layer, FSDP's units; :func:`zero3_messages`)
    gather_messages: int = 0
    reduce_bucket_params: int = 0
    # module calls per pass whose DeepSpeed ZeRO-3 hooks run on the host, and of those the
    # calls inside a per-expert loop that synchronises host and device (:func:`zero3_module_calls`)
    hooked_module_calls: float = 0.0
    synced_module_calls: float = 0.0
    # torchtitan's per-op policy keeps SDPA's flash and memory-efficient outputs only: another
    # kernel's attention runs again in backward (calc.checkpointing)
    attention_kept_if_flash: bool = False
    # FSDP2's copy-out of the gathered parameters, bytes read and written per micro-step
    # (:data:`FSDP2_COPY_OUT_PASSES`, :func:`fsdp2_copy_out_bytes`)
    copy_out_bytes: float = 0.0
    # gradients per DDP / ZeRO-1/2 reduction (the request's gradient_bucket_mb, else DDP's)
    bucket_bytes: float = DDP_BUCKET_BYTES
    # Ulysses sequence parallelism: bytes of this GPU's tensors that go through all-to-alls per
    # micro-step, and how many all-to-alls (:func:`sequence_parallel_traffic`)
    all_to_all_bytes: float = 0.0
    all_to_all_calls: float = 0.0
    all_to_all_forward_share: float = 0.0
    # torchao's Float8Linear without torch.compile (fp8_library "torchao"), read only under
    # fp8_compute (:func:`fp8_eager_counts`); None: the casts are fused
    fp8_eager: Fp8Eager | None = None
    # ops the host dispatches one by one in each optimizer step (optimizer_per_tensor)
    optimizer_ops: float = 0.0
    # CPU offload: what crosses the host link and host memory per parameter of the shard
    # (calc.host_offload); None without offload
    host_offload: HostOffload | None = None
    # routed MoE experts (calc.moe_kernels): their matmul FLOPs per token in the forward (the
    # other passes run them as the block linears do) and each expert's share of the
    # micro-step's tokens (k / E)
    expert_forward_flops_per_token: float = 0.0
    expert_token_share: float = 1.0
    # ops a forward pass launches inside transformers 4's per-expert loop (host-synchronised)
    expert_loop_ops: float = 0.0


@dataclass(frozen=True)
class Fp8Eager:
    """What torchao's ``Float8Linear`` costs without torch.compile beyond a fused FP8 linear, for
    one micro-step (:func:`fp8_eager_counts`): the bytes its casts and layout copies move (per
    token, and per micro-step for the weights), the weight gradient it computes for a frozen
    weight (FLOPs per token, at the FP8 rate) and the ops the host dispatches (the forward's
    share apart)."""

    bytes_per_token: float
    weight_bytes: float
    frozen_wgrad_flops_per_token: float
    ops: float
    forward_ops: float


def fp8_eager_counts(req: EstimateRequest, recompute: float) -> Fp8Eager | None:
    """torchao's ``Float8Linear`` run eager (``fp8_library`` ``"torchao"`` and no
    ``torch_compile``; None otherwise) on the blocks' linears that FP8 covers (those a 4-bit
    base would quantize), per micro-step: :data:`FP8_EAGER_CASTS` casts of
    :data:`FP8_EAGER_CAST_BYTES_PER_ELEMENT` (the forward's again for a recomputed block), the
    backward's layout copies (:data:`FP8_LAYOUT_COPY_BYTES_PER_ELEMENT`), the weight gradient of
    a frozen base weight (``2 d_in d_out`` FLOPs per token, its bf16 output written: LoRA), and
    :data:`FLOAT8_LINEAR_OPS` less the ops an ``nn.Linear`` is counted as."""
    if req.fp8_library is not Fp8Library.TORCHAO or req.torch_compile:
        return None
    arch = req.model
    fp8 = [lin for lin in arch.linears if lin.quantizable]
    blocks = arch.blocks_of
    d_in = sum(blocks(lin) * lin.active * lin.d_in for lin in fp8)
    d_out = sum(blocks(lin) * lin.active * lin.d_out for lin in fp8)
    weights = sum(blocks(lin) * lin.count * lin.d_in * lin.d_out for lin in fp8)
    active_weights = sum(blocks(lin) * lin.active * lin.d_in * lin.d_out for lin in fp8)
    frozen = req.method is not Method.FULL
    cast, copy = FP8_EAGER_CAST_BYTES_PER_ELEMENT, FP8_LAYOUT_COPY_BYTES_PER_ELEMENT
    forward = 1 + recompute  # the forward's casts run again in a recomputed block

    def casts(tensor: str) -> float:
        return FP8_EAGER_CASTS[tensor, "forward"] * forward + FP8_EAGER_CASTS[tensor, "backward"]

    # the casts (FP8_EAGER_CASTS), the backward's layout copies of the FP8 input, output
    # gradient and weight, and a frozen weight's gradient, written in bf16 and dropped
    per_token = cast * (d_in * casts("input") + d_out * casts("grad_output")) + copy * (
        d_out + d_in
    )
    weight_bytes = (
        cast * weights * casts("weight")
        + copy * weights
        + (st.BF16_BYTES * weights if frozen else 0)
    )
    n = sum(blocks(lin) * lin.active for lin in fp8)
    forward_ops = n * (FLOAT8_LINEAR_OPS["forward"] - 1)
    backward_ops = n * (FLOAT8_LINEAR_OPS["backward"] - BACKWARD_OPS_FACTOR)
    return Fp8Eager(
        bytes_per_token=float(per_token),
        weight_bytes=float(weight_bytes),
        frozen_wgrad_flops_per_token=2.0 * active_weights if frozen else 0.0,
        ops=float(forward_ops * forward + backward_ops),
        forward_ops=float(forward_ops),
    )


_COUNTS: dict[tuple[int, Sharding, int | None], tuple[EstimateRequest, Counts]] = {}


def counts(req: EstimateRequest, sharding: Sharding, trainable: int | None = None) -> Counts:
    """:func:`_counts`, memoised on the request object itself (hashing a request hashes the
    whole model description, which costs more than the step; the plan asks hundreds of times)."""
    key = (id(req), sharding, trainable)
    hit = _COUNTS.get(key)
    if hit is not None and hit[0] is req:
        return hit[1]
    if len(_COUNTS) > 1024:
        _COUNTS.clear()
    out = _counts(req, sharding, trainable)
    _COUNTS[key] = (req, out)
    return out


_AT_MEAN: dict[int, tuple[EstimateRequest, EstimateRequest]] = {}


def at_mean_length(req: EstimateRequest, length: int) -> EstimateRequest:
    """``req`` at the data's mean padded length, one object per request object (memoised as
    :func:`counts` is): a plan times each request on every card, and a new object each time
    would miss :func:`counts`' memo and count the step again."""
    hit = _AT_MEAN.get(id(req))
    if hit is not None and hit[0] is req and hit[1].seq_len == length:
        return hit[1]
    if len(_AT_MEAN) > 1024:
        _AT_MEAN.clear()
    out = as_rows(req, length)  # padding-free: one row of the samples end to end
    if out is req:
        out = replace(req, seq_len=length)
    _AT_MEAN[id(req)] = (req, out)
    return out


def traced_block_ops(req: EstimateRequest) -> tuple[float, float] | None:
    """:data:`TRANSFORMERS_BLOCK_OPS` of the request's family, where its stack runs
    transformers' own blocks eager (:data:`calc.frameworks.TRANSFORMERS_MODELING`; not
    compiled, not Unsloth's kernels); None where the generic count applies."""
    version = TRANSFORMERS_MODELING.get(req.framework.value)
    if version is None or req.torch_compile or req.fused_lora_kernels:
        return None
    family = req.model.family
    forward = TRANSFORMERS_BLOCK_OPS.get((version, family, "forward"))
    if forward is None:
        return None
    return forward, TRANSFORMERS_BLOCK_OPS[version, family, "backward"]


FUSED_CHUNK_NAMES = frozenset({"gate_up_proj", "input_linear"})
"""Dense MLP input projections whose output the MLP splits with ``chunk(2, dim=-1)`` into the
gate and the up halves (Phi-3's ``gate_up_proj``, Granite 4's ``input_linear``): autograd joins
the halves' gradients with one ``cat`` (:func:`sliced_projection_bytes`)."""


def slice_backward_bytes(shares: Sequence[float], act: int = 2) -> float:
    """Bytes per element of a tensor's width that the backward of taking slices of it moves
    (``act`` bytes per element), the slices covering ``shares`` of the width: each slice short
    of the whole width (a whole-width slice is the tensor itself) runs ``slice_backward``, which
    writes zeros over the whole width and copies the slice's gradient in (torch 2.13
    ``FunctionsManual.cpp`` ``slice_backward``: ``at::zeros`` then ``copy_``), and autograd
    sums the slices' gradients into the tensor's (one ``add`` per slice after the first: both
    read, the sum written). Traced on Phi-3's block (CPU, bf16): its q, k and v slices of
    ``qkv_proj``'s output, 22 per element; its empty rotary pass-through slices of q and k, 8."""
    parts = [share for share in shares if share < 1.0]
    return act * len(parts) + 2 * act * sum(parts) + 3 * act * (len(shares) - 1)


def sliced_projection_bytes(arch: ModelArch, qk_own: float) -> tuple[float, float]:
    """Bytes per token and block, ``(forward, backward)``, of the slices a family takes of its
    fused projections (:func:`slice_backward_bytes`): Phi-3's q, k and v out of ``qkv_proj``,
    its rotary embedding's split of q and k into the rotated part and the rest (forward the
    ``torch.cat`` that joins them again, read and written), and the ``cat`` that joins a fused
    gate-up's halves' gradients (:data:`FUSED_CHUNK_NAMES`, 2 + 2 per element of its output)."""
    act = 2
    forward = backward = 0.0
    if arch.extra.get("fused_qkv_view"):
        fused = [l for l in arch.linears if l.name == "qkv_proj" and l.role == "attn"]
        q, kv = arch.num_heads * arch.head_dim, arch.num_kv_heads * arch.head_dim
        for lin in fused:
            shares = [q / lin.d_out, kv / lin.d_out, kv / lin.d_out]
            backward += slice_backward_bytes(shares, act) * lin.d_out
    fraction = arch.extra.get("rotary_split_fraction")
    if fraction is not None:
        forward += 2 * act * qk_own
        backward += slice_backward_bytes([fraction, 1.0 - fraction], act) * qk_own
    for lin in arch.linears:
        if lin.role == "mlp" and lin.count == 1 and lin.name in FUSED_CHUNK_NAMES:
            share = arch.blocks_of(lin) / arch.num_layers
            backward += 2 * act * lin.d_out * share
    return forward, backward


def mlp_act_width(arch: ModelArch) -> float:
    """The MLP intermediate elements a token's activation runs over, per block on average over
    the stack: the input width of each MLP output projection (``calc.arch.MLP_OUTPUT_NAMES``,
    read by name) in every block that holds it, times the copies that run per token (the top-k
    routed experts, or all of them where the family runs them densely). A mixed stack counts
    each kind where it is: Llama 4 Maverick's dense and MoE blocks alternate, Nemotron-H has an
    MLP in one block of its sublayers, Gemma 4 26B-A4B runs a dense MLP beside its experts in
    every block, DeepSeek-style stacks start with dense blocks. Without an output projection
    by name: the top-k (or every) expert's width plus the shared expert's, in every block."""
    dense = bool(arch.extra.get("experts_run_densely"))
    outputs = [l for l in arch.linears if l.role == "mlp" and l.name in MLP_OUTPUT_NAMES]
    if not outputs:
        experts_run = arch.num_experts if dense else arch.experts_per_token
        return float(
            (experts_run or 1) * arch.intermediate_size + arch.shared_expert_intermediate_size
        )
    elements = sum(arch.blocks_of(l) * (l.count if dense else l.active) * l.d_in for l in outputs)
    return elements / arch.num_layers


def block_linear_ops(req: EstimateRequest, moe: MoeCounts | None = None) -> float:
    """Forward ops of the stack's linears in one micro-step: one matmul per linear of each
    block (a linear of one kind of block counts in the blocks of that kind only,
    :meth:`calc.arch.ModelArch.blocks_of`: Gemma 4's sliding and full blocks, a hybrid stack's
    mixers, Llama 4's dense and MoE MLPs), and for routed experts what their layout launches
    in place of ``k`` matmuls per linear (``moe``: :func:`calc.moe_kernels.moe_counts` of the
    request, computed when not given)."""
    arch = req.model
    if moe is None:
        tokens = req.micro_batch_size * req.local_seq_len
        moe = moe_counts(arch, req.moe_expert_layout.value, req.torch_compile, tokens)
    ops: float = sum(
        arch.blocks_of(lin) * (lin.count if lin.active == lin.count else lin.active)
        for lin in arch.linears
    )
    return ops + moe.ops_forward - moe.linear_ops


@dataclass(frozen=True)
class AttentionWidths:
    """A block's attention widths per token, averaged over its layers: ``q`` and ``kv`` (the
    q and the k/v projections' widths), ``own_kv`` (the k/v width of the layers that compute
    their own keys and values: a Gemma 4 block that shares them runs no k norm, k rotary or
    v norm), ``grouped`` (q plus k/v width of the layers whose k/v heads are fewer than their
    q heads: what ``repeat_kv`` copies where it runs) and ``wide_heads`` (the same, of those
    layers whose head dim is over 256, where SDPA repeats them whatever the mask:
    ``use_gqa_in_sdpa``)."""

    q: float
    kv: float
    own_kv: float
    grouped: float
    wide_heads: float


def attention_widths(arch: ModelArch) -> AttentionWidths:
    """:class:`AttentionWidths` of ``arch``: its uniform heads, or Gemma 4's per layer kind
    (``arch.extra["gemma4_layers"]`` and ``gemma4_head_dims``: sliding blocks of head dim 256
    beside full ones of 512 with fewer k/v heads, transformers 5.17 ``modeling_gemma4.py``)."""
    kinds = arch.extra.get("gemma4_layers")
    dims = arch.extra.get("gemma4_head_dims")
    layers = (
        [(k, *(int(x) for x in dims["full" if k.startswith("full") else "sliding"])) for k in kinds]
        if kinds and dims
        else [("", arch.head_dim, arch.num_kv_heads)]
    )
    q = kv = own = grouped = wide = 0.0
    for kind, head_dim, kv_heads in layers:
        q += arch.num_heads * head_dim
        kv += kv_heads * head_dim
        own += 0 if kind.endswith("_shared") else kv_heads * head_dim
        if kv_heads < arch.num_heads:
            grouped += (arch.num_heads + kv_heads) * head_dim
            if head_dim > 256:
                wide += (arch.num_heads + kv_heads) * head_dim
    n = len(layers)
    return AttentionWidths(q / n, kv / n, own / n, grouped / n, wide / n)


def attention_copy_bytes(req: EstimateRequest, widths: AttentionWidths) -> tuple[float, float]:
    """The copies one block makes around its attention per token, forward and backward, eager
    on 16-bit activations: eager attention's output copy (:data:`ATTENTION_OUTPUT_COPY_BYTES`,
    forward) and value gradient copy (:data:`VALUE_GRAD_COPY_BYTES`, backward) and, where grouped k/v heads are
    repeated (:data:`REPEAT_KV_BYTES_PER_ELEMENT`: eager attention, or SDPA handed a padding
    mask or heads wider than 256), the repeat each way. SDPA's fused kernels and the
    FlashAttention package take the strided views and copy nothing."""
    eager = req.attention is Attention.EAGER
    q_dim, kv_dim = widths.q, widths.kv
    repeat = 0.0
    if eager or (req.attention is Attention.SDPA and req.attention_mask is AttentionMask.PADDING):
        repeat = REPEAT_KV_BYTES_PER_ELEMENT * widths.grouped
    elif req.attention is Attention.SDPA:
        repeat = REPEAT_KV_BYTES_PER_ELEMENT * widths.wide_heads
    if not eager:
        return repeat, repeat
    return (
        ATTENTION_OUTPUT_COPY_BYTES * q_dim + repeat,
        VALUE_GRAD_COPY_BYTES * kv_dim + repeat,
    )


def qk_norm_share(arch: ModelArch) -> float:
    """The share of a stack's blocks that normalise q and k before attention (per head:
    Qwen3's and Gemma 3's ``q_norm``, ``k_norm``; over the whole projections: OLMo 2's; Llama
    4's weightless norm on its RoPE layers only, ``arch.extra["qk_norm_layers"]``): each such
    norm runs the block's own kind of RMSNorm over the q and k widths, forward and backward
    (traced with the block, ``tools/count_block_traffic.py``)."""
    if not (arch.extra.get("qk_norm_per_head") or arch.extra.get("qk_norm_whole")):
        return 0.0
    layers = arch.extra.get("qk_norm_layers")
    return layers / arch.num_layers if isinstance(layers, int) else 1.0


def reader_sums(arch: ModelArch) -> float:
    """Gradient sums per block where a norm's output has several readers beyond the first:
    the attention's input projections (q, k, v) and the MLP's (gate and up, the router beside
    the experts). In a stack of block kinds whose linears belong to one kind (Gemma 4's sliding
    and full blocks, a hybrid's mixers) each kind counts its own readers, weighted by its
    blocks: the linears of all kinds together are not one block's."""

    def sums(linears: tuple[LinearLayer, ...]) -> int:
        attn_in, mlp_in, routers = norm_readers(linears)
        mlp_readers = sum(1 for lin in mlp_in if lin.count == 1) + len(routers)
        mlp_readers += 1 if any(lin.count > 1 for lin in mlp_in) else 0
        return max(0, len(attn_in) - 1) + max(0, mlp_readers - 1)

    kinds = arch.block_counts
    if not kinds or arch.ffn_counts or not any(lin.block_kind for lin in arch.linears):
        return float(sums(arch.linears))
    total = sum(
        n * sums(tuple(lin for lin in arch.linears if lin.block_kind in ("", kind)))
        for kind, n in kinds
    )
    return total / sum(n for _, n in kinds)


def block_backward_bytes(
    req: EstimateRequest,
    parts: dict[str, float],
    widths: dict[str, float],
    traced: dict[str, str | None],
) -> float:
    """One block's element-wise backward bytes per token, eager, on 16-bit activations: the
    traced backward of each part transformers runs op by op (the RMSNorms, transformers'
    rotary embedding, the gated activation, the gradient sums where a tensor has several
    readers: :data:`NORM_BACKWARD_BYTES_PER_ELEMENT`, :data:`ROTARY_BACKWARD_BYTES_PER_ELEMENT`,
    :data:`GATED_ACT_BACKWARD_BYTES_PER_ELEMENT`, :data:`FANOUT_ACCUMULATE_BYTES_PER_ELEMENT`),
    twice its forward for the parts not traced (a fused LayerNorm, gpt-oss's clamped gate, the
    op-by-op tanh GELU). ``parts``: each part's forward bytes per element as :func:`_counts`
    priced it (0 where a fused kernel replaced it), and ``copies`` the backward of the copies
    around attention, bytes per token (:func:`attention_copy_bytes`); ``widths``: ``h``,
    ``normed`` (the elements the RMSNorms normalise, q/k norms included), ``qk`` (q plus k/v
    widths), ``ffn``; ``traced``: which traced op-by-op code the norm and the activation run
    (``norm``: ``"llama"``, ``"fp32_scale"`` or ``"layer"``; ``act``: ``"gated"`` or
    ``"tanh_gelu"``), ``None`` where they run something else."""
    arch = req.model
    h = widths["h"]
    weight = "trained" if req.method is Method.FULL else "frozen"
    kind = traced["norm"]
    norm = parts["norm"] * BACKWARD_ELEMENTWISE_FACTOR
    if kind is not None and parts["norm"]:
        norm = NORM_BACKWARD_BYTES_PER_ELEMENT[kind, weight]
    rotary = ROTARY_BACKWARD_BYTES_PER_ELEMENT if parts["rotary"] else 0
    act = parts["act"] * BACKWARD_ELEMENTWISE_FACTOR
    if traced["act"] == "gated" and parts["act"]:
        act = GATED_ACT_BACKWARD_BYTES_PER_ELEMENT
    elif traced["act"] == "tanh_gelu" and parts["act"]:
        act = TANH_GELU_OP_BY_OP_BACKWARD_BYTES_PER_ELEMENT
    # gradient sums: the stream before each residual add (norm and skip), and each norm
    # output read by several input projections (the router beside the experts)
    sums = (2 if parts["residual"] else 0) + reader_sums(arch)
    return (
        widths["normed"] * norm
        + sums * FANOUT_ACCUMULATE_BYTES_PER_ELEMENT * h
        + rotary * widths["qk"]
        + parts["copies"]
        + act * widths["ffn"]
    )


def _counts(req: EstimateRequest, sharding: Sharding, trainable: int | None) -> Counts:
    reg = st.regime(req.precision, sharding)
    layout = st.param_layout(req)
    arch = req.model
    trainable = layout.trainable if trainable is None else trainable
    # lora_modules_to_save: the copies replace their originals in the forward (no extra
    # matmul); the output layer's copy adds its weight gradient, 2 V h FLOPs per token
    embed_copy = st.saved_module_params(req)[0]
    head_copy = st.trained_output_layer_params(req)
    span, mask = packed_attention(req)
    # what the backward runs again (calc.checkpointing): the whole forward of every block
    # (full), of floor(L / N) blocks (every-n), or the matmuls and element-wise ops torchtitan's
    # per-op policy does not keep (selective-op)
    granularity = req.checkpointing_granularity
    share = 1.0
    selective = None
    sac_kept_ops = 0  # per block: the kernels whose outputs the per-op policy keeps
    if req.gradient_checkpointing and granularity is Granularity.EVERY_N:
        share = req.wrapped_blocks / arch.num_layers
    elif req.selective_op:
        matmuls = st.selective_op_matmuls(req)
        selective = selective_recompute_flops(arch, matmuls)
        sac_kept_ops = sum(m.kept for m in matmuls) + (req.attention is Attention.SDPA)
    fpt = training_flops_per_token(
        arch,
        req.method.value,
        req.seq_len,
        req.gradient_checkpointing,
        trainable - layout.saved if trainable == layout.trainable else trainable,
        req.attention.value,
        mask,
        span,
        share,
        selective,
    )
    if head_copy:
        fpt = replace(fpt, backward=fpt.backward + 2.0 * head_copy)
    # the element-wise ops of a block run again with its recompute (all of them under the
    # per-op policy); every-n: in the wrapped share of the blocks
    recompute: float = (1 if req.gradient_checkpointing else 0) if share == 1.0 else share
    passes = 2 + recompute
    tokens = req.micro_batch_size * req.local_seq_len
    # routed experts: what their layout launches in place of k matmuls per linear, the rows
    # each expert's matmuls run on, the tokens' trips into expert order and back
    moe = moe_counts(arch, req.moe_expert_layout.value, req.torch_compile, tokens)
    linear_ops = block_linear_ops(req, moe)
    adapted = st.adapted(req) if req.is_peft else ()
    adapters = sum(a.blocks for a in adapted)
    traced = traced_block_ops(req)
    if req.torch_compile:
        other: float = COMPILED_OPS_PER_LAYER_FORWARD
    else:
        other = traced[0] if traced else EAGER_OPS_PER_LAYER_FORWARD
    liger_on = liger.applies(req)
    # Liger's gated activation replaces a dense MLP's (routed experts keep the family's own)
    liger_glu = liger_on and not arch.experts_per_token and liger.gated_unit_form(arch)
    if liger_on and not req.torch_compile:
        # Liger's kernels replace the eager ops of the modules they patch: the two RMSNorms
        # EAGER_OPS_PER_LAYER_FORWARD counts, the rotary embedding, the gated activation
        saved = {
            "norm": 2 if arch.norm_kind == "rms" else 0,
            "rotary": 1 if arch.learned_positions == 0 else 0,
            "glu": 1 if liger_glu else 0,
        }
        other -= sum(n * (STOCK_FORWARD_OPS[k] - LIGER_FORWARD_OPS[k]) for k, n in saved.items())
    eager_attention = 0
    if req.attention is Attention.EAGER and not req.torch_compile:
        eager_attention = EAGER_ATTENTION_EXTRA_OPS_FORWARD
        # a dropout with p > 0 is one op more (native_dropout); at p 0 it launches nothing
        eager_attention += 1 if arch.extra.get("eager_attention_dropout") else 0
    other += eager_attention
    if arch.extra.get("residual_dropout") and not req.torch_compile:
        other += RESIDUAL_DROPOUTS_PER_LAYER
    # QLoRA: bitsandbytes wraps each 4-bit matmul in host ops of its own (dequantisation, casts)
    # (per block, less the 16-bit linears of a checkpoint's skip list, which run none)
    active = {l.name: l.active for l in arch.linears}
    quantized_linears = (
        sum(arch.blocks_of(l) * l.active for l in arch.linears if l.quantizable)
        - sum(active[name] for _, name in arch.bnb_kept_16bit)
        if req.method is Method.QLORA
        else 0
    )
    dq = req.qlora_double_quant
    bnb_fwd, bnb_bwd = (
        (DEQUANT_KERNELS[dq], DEQUANT_KERNELS[dq])
        if req.torch_compile
        else (BNB_OPS_FORWARD[dq], BNB_OPS_BACKWARD[dq])
    )
    bnb_ops = quantized_linears * (bnb_fwd * (1 + recompute) + bnb_bwd)
    if req.fused_lora_kernels and adapters:
        # Unsloth's autograd functions: each adapted linear (its base matmul included) in the
        # counted calls of its forward, recomputation and backward; the rest op by op, eager
        fused = FUSED_LORA_OPS_PER_ADAPTER
        kernels = (
            adapters * (fused["forward"] * (1 + recompute) + fused["backward"])
            + (
                linear_ops
                - adapters
                + arch.num_layers * (EAGER_OPS_PER_LAYER_FORWARD + eager_attention)
            )
            * (1 + BACKWARD_OPS_FACTOR + recompute)
            + bnb_ops
        )
    else:
        fwd_ops = linear_ops + arch.num_layers * other + LORA_OPS_PER_ADAPTER * adapters
        kernels = fwd_ops * (1 + BACKWARD_OPS_FACTOR + recompute) + bnb_ops
        if traced:
            # the block's traced backward in place of BACKWARD_OPS_FACTOR times its forward
            kernels += arch.num_layers * (traced[1] - BACKWARD_OPS_FACTOR * traced[0])
        if sac_kept_ops:
            kernels -= arch.num_layers * sac_kept_ops  # kept outputs are not launched again
    # FP8 casts per token: inputs (forward, recompute) and output gradients (backward)
    stack_in = sum(arch.blocks_of(l) * l.active * l.d_in for l in arch.linears if l.quantizable)
    stack_out = sum(arch.blocks_of(l) * l.active * l.d_out for l in arch.linears if l.quantizable)
    cast = (passes - 1) * stack_in + stack_out
    mode = "compiled" if req.torch_compile else "eager"
    h = arch.hidden_size
    aw = attention_widths(arch)
    q_dim, kv_dim = aw.q, aw.kv
    # the widths rotary and the q/k norms run over: q, and k where a block computes its own
    qk_own = q_dim + aw.own_kv
    ffn = mlp_act_width(arch)
    act = MLP_ACT_BYTES_PER_ELEMENT[mode] if arch.mlp_gated else 4
    if arch.mlp_gated and mode == "eager" and arch.extra.get("clamped_glu"):
        act = CLAMPED_GLU_BYTES_PER_ELEMENT  # gpt-oss's clamped gate, op by op
    tanh_gelu = (
        not arch.mlp_gated and mode == "eager" and bool(arch.extra.get("plain_act_saved_widths"))
    )
    if tanh_gelu:
        act = TANH_GELU_OP_BY_OP_BYTES_PER_ELEMENT  # gelu_new, one kernel per op
    norm = NORM_BYTES_PER_ELEMENT[mode] if arch.norm_kind == "rms" else LAYER_NORM_BYTES_PER_ELEMENT
    if arch.norm_kind == "rms" and mode == "eager" and arch.extra.get("norm_scale_fp32"):
        norm = NORM_FP32_SCALE_BYTES_PER_ELEMENT
    rotary = ROTARY_BYTES_PER_ELEMENT[mode] if arch.learned_positions == 0 else 0
    residual = RESIDUAL_BYTES_PER_ELEMENT[mode]
    attention_io = ATTENTION_IO_BYTES_PER_ELEMENT[mode]
    fp32_adapters = _adapters_run_fp32(req)
    loss = LOSS_BYTES_PER_LOGIT
    kbit_casts = 0.0
    # bitsandbytes up to 0.46 computes each 4-bit matmul in its input's dtype: on fp32
    # activations, fp32 dequantized weights and fp32 matmuls, with no cast around them
    fp32_4bit = (
        req.method is Method.QLORA
        and req.qlora_compute_dtype_from_input
        and attention_dtype(req) == "fp32"
    )
    if st.request_regime(req) is st.KBIT_FP32:
        # fp32 activations: the same kernels move 4-byte elements; each 4-bit linear casts
        # its input down and its output back up (not when it computes in fp32 itself)
        fp32 = FP32_ACTIVATION_BYTES_PER_ELEMENT
        norm = fp32["norm", mode] if arch.norm_kind == "rms" else 2 * norm
        residual = fp32["residual", mode]
        rotary = fp32["rotary", mode] if rotary else 0
        attention_io = fp32["attention_io", mode]
        act = fp32["mlp_act", mode] if arch.mlp_gated else 2 * act
        loss = fp32["loss_logit", mode]
        kbit_casts = (
            0.0 if fp32_4bit else KBIT_CAST_BYTES_PER_ELEMENT * (stack_in + stack_out) * passes
        )
    fp32_head_flops = 0.0
    if st.request_regime(req) is st.KBIT_FP32 and not req.qlora_output_layer_quantized:
        # the output layer's weight and input are fp32: 2 V h forward, 2 V h for the input
        # gradient (the layer is frozen)
        fp32_head_flops = 4.0 * arch.vocab_size * h
    if fp32_4bit:
        # every 4-bit linear's matmul in fp32: 2 FLOPs per weight per pass (forward,
        # recompute, the input gradient of the frozen weight)
        quantized = sum(
            arch.blocks_of(l) * l.active * l.d_in * l.d_out for l in arch.linears if l.quantizable
        )
        fp32_head_flops += 2.0 * quantized * passes
    liger_fwd = liger_bwd = 0.0
    scale = 2 if st.request_regime(req) is st.KBIT_FP32 else 1  # fp32 activations
    # the elements the block's RMSNorms normalise per token: its own norms and, where it has
    # them, the q/k norms (Qwen3, Gemma 3, OLMo 2: the block's own kind of norm over the q and
    # k widths), whichever code runs them
    normed = arch.norms_per_layer * h + qk_norm_share(arch) * qk_own
    if liger_on:
        # Liger's modules in place of the norms, the rotary embedding and the dense gated
        # activation: their own forward and backward traffic (not the tables' backward factor)
        parts = []
        if arch.norm_kind == "rms":
            # its RMSNorm takes the q/k norms too: liger-kernel monkey_patch.py replaces the
            # family's RMSNorm class, and patches self_attn.q_norm / k_norm on an instance
            # (PR #1470)
            parts.append((LIGER_NORM_BYTES_PER_ELEMENT, normed))
            norm = 0
        if rotary:
            parts.append((LIGER_ROTARY_BYTES_PER_ELEMENT, qk_own))
            rotary = 0
        if liger_glu:
            parts.append((LIGER_GLU_BYTES_PER_ELEMENT, ffn))
            act = 0
        liger_fwd, liger_bwd = kernel_traffic(parts, scale)
    unsloth_fwd = unsloth_bwd = 0.0
    fast = fast_lora_keys(req)
    if req.fused_lora_kernels:
        # Unsloth's kernels in place of the norms and the rotary embedding, and of the gated
        # activation where the MLP runs as LoRA_MLP: their own forward and backward traffic
        parts = []
        if arch.norm_kind == "rms" and norm:
            # Unsloth's attention runs its norm kernel on the q/k norms too: unsloth
            # models/qwen3.py Qwen3Attention_fast_forward, fast_rms_layernorm(self.q_norm, Q)
            parts.append((UNSLOTH_NORM_BYTES_PER_ELEMENT, normed))
            norm = 0
        if rotary:
            parts.append((UNSLOTH_ROTARY_BYTES_PER_ELEMENT, qk_own))
            rotary = 0
        downs = block_parts(arch).mlp_down
        if act and downs and all(key_of(d) in fast for d in downs):
            parts.append((UNSLOTH_GLU_BYTES_PER_ELEMENT, ffn))
            act = 0
        unsloth_fwd, unsloth_bwd = kernel_traffic(parts, scale)
    stream = fp32_stream_counted(req, sharding, liger_on)
    stream_readers = amp_traffic.reader_names(arch) if stream else frozenset()
    qlora_stream = qlora_stream_counted(req, sharding, liger_on)
    # adapted linears inside Unsloth's autograd functions, and the others (peft's path)
    in_fast = tuple(a for a in adapted if key_of(a) in fast)
    peft_path = tuple(a for a in adapted if key_of(a) not in fast)
    fast_lora_out = sum(a.blocks * a.active * a.d_out for a in in_fast)
    fast_lora_in = sum(a.blocks * a.active * a.d_in for a in in_fast)
    # eager on 16-bit activations the block is counted as traced (tools/count_block_traffic.py):
    # the copies around attention as transformers and torch make them, not the table's, and
    # the backward by part (block_backward_bytes)
    by_part = mode == "eager" and st.request_regime(req) is not st.KBIT_FP32
    copies_fwd = copies_bwd = 0.0
    if by_part:
        copies_fwd, copies_bwd = attention_copy_bytes(req, aw)
        attention_io = 0
    # Gemma 4: a weightless RMSNorm over the v each block computes, and the product by the
    # block's layer scalar (WEIGHTLESS_NORM_BYTES_PER_ELEMENT, LAYER_SCALAR_BYTES_PER_ELEMENT;
    # traced eager on 16-bit activations, else priced as the block's own norms and fused away
    # when compiled)
    gemma4 = bool(arch.extra.get("gemma4_layers"))
    v_normed = aw.own_kv if gemma4 else 0.0
    layer_scalar = LAYER_SCALAR_BYTES_PER_ELEMENT * h if gemma4 and mode == "eager" else 0.0
    # Gemma 4's MoE blocks (26B-A4B): the router's weightless norm over the residual and its
    # scale products, and the sum of the dense MLP's and the experts' outputs
    # (Gemma4TextDecoderLayer.forward: hidden_states_1 + hidden_states_2)
    router_fwd = router_bwd = 0.0
    # the slices of fused projections (Phi-3's qkv and rotary split, fused gate-up chunks),
    # counted op by op where the block is (eager on 16-bit activations)
    sliced_fwd, sliced_bwd = sliced_projection_bytes(arch, qk_own) if by_part else (0.0, 0.0)
    # the rotary embedding runs over the rotated share of each q and k head (Phi-4-mini's
    # partial_rotary_factor 0.75; Phi-3's apply_rotary_pos_emb slices the rest off)
    rotated = qk_own * arch.extra.get("rotary_split_fraction", 1.0)
    if gemma4 and moe.route_bytes and mode == "eager":
        v_normed += h
        router_fwd = (
            GEMMA4_ROUTER_SCALE_BYTES_PER_ELEMENT["forward"] + SHARED_COMBINE_BYTES_PER_ELEMENT
        ) * h
        router_bwd = GEMMA4_ROUTER_SCALE_BYTES_PER_ELEMENT["backward"] * h
    v_norm_fwd = WEIGHTLESS_NORM_BYTES_PER_ELEMENT["forward"] if by_part else norm
    per_layer = (
        normed * norm
        + 2 * residual * h
        + rotary * rotated
        + attention_io * (q_dim + 2 * kv_dim)
        + copies_fwd
        + act * ffn
        + v_norm_fwd * v_normed
        + layer_scalar
        + router_fwd
        + sliced_fwd
    )
    fwd_bytes = arch.num_layers * per_layer + moe.route_bytes
    route_backward = (
        BACKWARD_ELEMENTWISE_FACTOR * moe.route_bytes
        if moe.route_bytes_backward is None
        else moe.route_bytes_backward
    )
    if by_part:
        part_bytes: dict[str, float] = {"norm": norm, "residual": residual, "rotary": rotary}
        part_bytes.update({"act": act, "copies": copies_bwd})
        widths = {"h": h, "normed": normed, "qk": rotated, "ffn": ffn}
        runs: dict[str, str | None] = {
            "norm": (
                "layer"
                if arch.norm_kind == "layer"
                else None
                if arch.norm_kind != "rms"
                else "fp32_scale"
                if arch.extra.get("norm_scale_fp32")
                else "llama"
            ),
            "act": (
                "gated"
                if arch.mlp_gated and not arch.extra.get("clamped_glu")
                else "tanh_gelu"
                if tanh_gelu
                else None
            ),
        }
        own = (
            WEIGHTLESS_NORM_BYTES_PER_ELEMENT["backward"] * v_normed
            + layer_scalar
            + router_bwd
            + sliced_bwd
            + bias_gradient_bytes(req)
        )
        bwd_bytes = (
            arch.num_layers * (block_backward_bytes(req, part_bytes, widths, runs) + own)
            + route_backward
        )
    else:
        bwd_bytes = BACKWARD_ELEMENTWISE_FACTOR * (fwd_bytes - moe.route_bytes) + route_backward
    if req.method is Method.LORA:
        # peft's lora.Linear: its backward traced (peft_path_backward_bytes)
        peft_fwd = peft_path_bytes(req, peft_path, stream_readers)
        peft_bwd = peft_path_backward_bytes(req, peft_path, stream_readers)
    else:
        # bitsandbytes' LoRA layer (tuners/lora/bnb.py): twice its forward, the share
        # calc.amp_traffic's traced QLoRA stream counts leave to it
        peft_fwd = (
            qlora_autocast_path_bytes(req, peft_path)
            if qlora_stream
            else peft_path_bytes(req, peft_path, stream_readers)
        )
        peft_bwd = BACKWARD_ELEMENTWISE_FACTOR * peft_fwd
    adapter_re = recompute
    if selective is not None:
        # the per-op policy runs again only the adapters' matmuls it does not keep
        adapter_fwd = adapter_matmul_counts(req, 0)[0] / 3.0  # one forward of 1 + 2
        adapter_re = selective[1] / adapter_fwd if adapter_fwd else 0.0
    adapter_flops, adapter_bytes = adapter_matmul_counts(req, adapter_re)
    if req.precision is Precision.FP32 and not FP32_MATMUL_TF32_DEFAULT:
        # fp32 training without autocast: every matmul gets fp32 weights and inputs, and
        # cuBLAS runs them on the CUDA cores (FP32_MATMUL_TF32_DEFAULT); attention and the
        # adapters are priced on their own paths (attention_dtype, adapter_fp32)
        fp32_head_flops = fpt.total - fpt.attention_total - adapter_flops
    # Gemma-2 caps its logits with a tanh (forward and backward once per micro-step), in the
    # logits' dtype: fp32 where the output layer runs in fp32 (kbit preparation, fp32 training)
    logit_bytes = (
        4 if st.request_regime(req) is st.KBIT_FP32 or req.precision is Precision.FP32 else 2
    )
    softcap = (
        sum(SOFTCAP_ELEMENT_PASSES.values()) * logit_bytes * arch.vocab_size
        if arch.extra.get("final_logit_softcapping")
        else 0
    )
    head_pre_ampere = 0.0
    if liger_on and req.chunked_loss:
        # Liger's fused linear cross-entropy: its kernel on each chunk's logits (the
        # soft-cap inside it), its input gradient, and a trained output layer's gradient
        # accumulated chunk by chunk (liger.flce_chunks)
        loss = LIGER_LOSS_BYTES_PER_LOGIT * logit_bytes // 2
        softcap = 0
        chunks = liger.flce_chunks(tokens, arch.vocab_size, h)
        head_bytes = 0.0
        head_ops = 0
        if req.method is Method.FULL or head_copy:
            w = st.request_regime(req).weight_bytes
            path = "cast" if w < st.FP32_BYTES else "addmm"
            per_chunk = LIGER_HEAD_GRAD_BYTES_PER_CHUNK[path]
            head_bytes = arch.vocab_size * h * (chunks * per_chunk + 3 * w)
            if path == "addmm":
                head_pre_ampere = (
                    arch.vocab_size
                    * h
                    * chunks
                    * (LIGER_HEAD_GRAD_BYTES_PER_CHUNK["fp32_cast"] - per_chunk)
                    / tokens
                )
            head_ops = LIGER_FLCE_OPS_PER_CHUNK[path]
        loss_extra = LIGER_FLCE_BYTES_PER_HIDDEN * h * logit_bytes / 2 + head_bytes / tokens
        kernels += chunks * (LIGER_FLCE_OPS_PER_CHUNK["base"] + head_ops)
    else:
        loss_extra = 0.0
    # residual dropouts (resid_pdrop > 0, eager): each moves as much backward as forward
    # (DROPOUT_PASSES), not the backward factor of the other element-wise ops
    residual_dropout = 0.0
    if arch.extra.get("residual_dropout") and not req.torch_compile:
        element = 4 if st.request_regime(req) is st.KBIT_FP32 else reg.compute_bytes
        residual_dropout = (
            RESIDUAL_DROPOUTS_PER_LAYER * h * dropout_bytes_per_element(element) * (2 + recompute)
        )
    elementwise: float = (
        fwd_bytes * (1 + recompute)
        + bwd_bytes
        + peft_fwd * (1 + recompute)
        + peft_bwd
        + arch.num_layers * (residual_dropout + liger_fwd * (1 + recompute) + liger_bwd)
        + arch.num_layers * (unsloth_fwd * (1 + recompute) + unsloth_bwd)
        + UNSLOTH_LORA_ADD_BYTES["forward"] * fast_lora_out * (1 + recompute)
        + UNSLOTH_LORA_ADD_BYTES["backward"] * fast_lora_in
        + loss * arch.vocab_size
        + loss_extra
        + softcap
        + kbit_casts
    )
    # autocast's 16-bit copies of fp32 weights: each forward, and a checkpointed block's
    # recomputation again (AUTOCAST_WEIGHT_CAST_BYTES)
    cast_block, cast_head, cast_ops = autocast_cast_params(req, sharding)
    if cast_ops:
        cast_bytes = AUTOCAST_WEIGHT_CAST_BYTES[st.request_regime(req, sharding).weight_bytes]
        elementwise += cast_bytes * (cast_block * (1 + recompute) + cast_head) / tokens
        kernels += cast_ops * (1 + recompute)
    if stream or qlora_stream:
        # autocast on an fp32 residual stream: the casts and fp32 element-wise work the
        # 16-bit tables above leave out (calc.amp_traffic, traced per family)
        if stream:
            amp_fwd, amp_bwd = amp_traffic.amp_stream_bytes_per_token(arch)
            ops_fwd, ops_bwd = amp_traffic.amp_block_extra_ops(arch)
        else:
            amp_fwd, amp_bwd = amp_traffic.qlora_stream_bytes_per_token(arch)
            ops_fwd, ops_bwd = amp_traffic.QLORA_BLOCK_EXTRA_OPS
        elementwise += amp_fwd * (1 + recompute) + amp_bwd
        kernels += arch.num_layers * (ops_fwd * (1 + recompute) + ops_bwd)
    if embed_copy:
        # the embedding copy's gradient: PyTorch's dense embedding backward zero-fills the
        # V x h table once per micro-step and scatter-adds each token's output gradient into
        # it (read h, read and write h): memory-bound, counted in bytes
        elementwise += embed_copy * reg.grad_bytes / tokens + h * (
            reg.compute_bytes + 2 * reg.grad_bytes
        )
    qbytes = st.quantized_bytes(layout.quantized, req.qlora_double_quant) if layout.quantized else 0
    gathers, reduce_bucket = zero3_messages(req, sharding)
    hooked, synced = zero3_module_calls(req, sharding)
    a2a_bytes, a2a_calls, a2a_fwd = sequence_parallel_traffic(req, tokens, recompute)
    return Counts(
        flops=fpt,
        tokens_micro=tokens,
        accumulation=req.gradient_accumulation_steps,
        hidden=arch.hidden_size,
        layers=arch.num_layers,
        dense_params=layout.dense,
        quantized_params=layout.quantized,
        quantized_bytes=float(qbytes),
        trainable=trainable,
        dequantisation_bytes=layout.quantized
        * (
            dequantisation_bytes_per_weight(req.qlora_double_quant)
            + (FP32_DEQUANT_WRITE_BYTES - DEQUANT_WRITE_BYTES if fp32_4bit else 0)
        ),
        grad_params=st.gradient_params(req, layout) if trainable == layout.trainable else trainable,
        reg=reg,
        passes=passes,
        kernels_per_micro=float(kernels),
        fp8_cast_elements_per_token=float(cast),
        fp8_eager=fp8_eager_counts(req, recompute),
        block_weight_params=arch.stack_params,
        optimizer_bytes_per_param=optimizer_step_bytes(req, 1, reg),
        elementwise_bytes_per_token=float(elementwise),
        liger_head_pre_ampere_bytes_per_token=head_pre_ampere,
        attention_impl=req.attention.value,
        torch_compile=req.torch_compile,
        tf32=req.tf32,
        attention_mask=mask,
        attention_dtype=attention_dtype(req),
        half_dtype=half_dtype(req),
        sdpa_cudnn_last=req.sdpa_cudnn_last,
        flash_attention_4=req.flash_attention_4,
        score_softcap=bool(arch.extra.get("attn_logit_softcapping")),
        score_dropout=bool(arch.extra.get("eager_attention_dropout")),
        fp32_matmul_flops_per_token=fp32_head_flops,
        head_dim=arch.head_dim,
        value_head_dim=arch.v_head_dim if arch.v_head_dim != arch.head_dim else 0,
        attention_keys=float(span if span is not None else req.seq_len),
        attention_parts=attention_parts(arch, req.seq_len, req.attention.value, mask, span),
        adapter_flops_per_token=adapter_flops,
        adapter_bytes_per_token=adapter_bytes,
        adapter_fp32=fp32_adapters,
        gather_messages=gathers,
        reduce_bucket_params=reduce_bucket,
        hooked_module_calls=hooked,
        synced_module_calls=synced,
        attention_kept_if_flash=selective is not None and req.attention is Attention.SDPA,
        copy_out_bytes=fsdp2_copy_out_bytes(req, sharding, reg, float(qbytes)),
        bucket_bytes=gradient_bucket_bytes(req, sharding, reg),
        all_to_all_bytes=a2a_bytes,
        all_to_all_calls=a2a_calls,
        all_to_all_forward_share=a2a_fwd,
        expert_forward_flops_per_token=moe.flops_forward,
        expert_token_share=moe.token_share,
        expert_loop_ops=moe.loop_ops_forward,
        optimizer_ops=optimizer_dispatch_ops(req, layout),
        host_offload=host_offload(req, reg, host_optimizer_bytes(req), GRAD_CLIP_PASSES),
    )


ULYSSES_ALL_TO_ALLS_PER_LAYER = 4
"""All-to-alls one block's attention runs per pass under Ulysses sequence parallelism: q, k and
v each go from sequence-split to head-split before attention, the output comes back (XTuner
``xtuner/parallel/sequence/attention.py`` ``pre_process_for_sequence_parallel_attn`` /
``post_process_for_sequence_parallel_attn``, one ``all_to_all`` per tensor; DeepSpeed
``deepspeed/sequence/layer.py`` ``DistributedAttention``; Jacobs et al. 2023, "DeepSpeed
Ulysses", arXiv:2309.14509, sec. 3.1). Each is an autograd function whose backward is the
opposite all-to-all of the gradient: as many again in the backward, and the forward's again in
a checkpointed block's recompute."""


def sequence_parallel_traffic(
    req: EstimateRequest, tokens: int, recompute: float
) -> tuple[float, float, float]:
    """``(bytes, calls, forward share)`` of the Ulysses all-to-alls of one micro-step on one
    GPU: the q, k, v and output tensors of its ``tokens`` local tokens, at the dtype attention
    receives (:func:`attention_dtype`), :data:`ULYSSES_ALL_TO_ALLS_PER_LAYER` per block and pass
    (forward, backward, and the recomputed share of the forward). Key/value heads fewer than
    the group are repeated to one per GPU before theirs (DeepSpeed Ulysses' GQA path), or to
    every query head with ``sequence_parallel_repeats_kv`` (XTuner). ``(0, 0, 0)`` without
    sequence parallelism."""
    sp = req.sequence_parallel
    if sp <= 1:
        return 0.0, 0.0, 0.0
    arch = req.model
    # XTuner repeats k/v to every query head before its all-to-all
    kv = arch.num_heads if req.sequence_parallel_repeats_kv else max(arch.num_kv_heads, sp)
    elem = 4 if attention_dtype(req) == "fp32" else 2
    per_pass = float(
        arch.num_layers * tokens * elem * arch.head_dim * (2 * arch.num_heads + 2 * kv)
    )
    passes = 2.0 + recompute
    calls = arch.num_layers * ULYSSES_ALL_TO_ALLS_PER_LAYER * passes
    return per_pass * passes, calls, 1.0 / passes


def gradient_bucket_bytes(req: EstimateRequest, sharding: Sharding, reg: st.Regime) -> float:
    """Bytes of gradients per DDP or ZeRO-1/2 reduction: the request's ``gradient_bucket_mb``;
    else, for DeepSpeed's ZeRO-1/2, ``reduce_bucket_size`` elements as the Hugging Face Trainer
    fills its ``auto`` (``hidden x hidden``: transformers 5.17 ``integrations/deepspeed.py``
    ``trainer_config_finalize``; DeepSpeed 0.16.5 ``stage_1_and_2.py`` reduces the gradients in
    buckets of that many elements) at the gradients' dtype; else torch DDP's
    :data:`DDP_BUCKET_BYTES`."""
    if req.gradient_bucket_mb is not None:
        return req.gradient_bucket_mb * 2**20
    if st.deepspeed_zero(req) and sharding in (Sharding.ZERO1, Sharding.ZERO2):
        return float(req.model.hidden_size**2 * reg.grad_bytes)
    return float(DDP_BUCKET_BYTES)


def fsdp2_copy_out_bytes(
    req: EstimateRequest, sharding: Sharding, reg: st.Regime, quantized_bytes: float
) -> float:
    """Bytes FSDP2 reads and writes per micro-step copying gathered parameters out of the
    all-gather buffer (:data:`FSDP2_COPY_OUT_PASSES`): the blocks twice (forward, and the
    backward's re-gather), the root once, at the dtype they are gathered in (the compute
    dtype; 4-bit weights as their packed bytes). 0 unless ``fsdp_fully_shard`` on FSDP
    ZeRO-3 over several GPUs."""
    if (
        not req.fsdp_fully_shard
        or sharding is not Sharding.ZERO3
        or req.shard_size <= 1
        or st.deepspeed_zero(req)
    ):
        return 0.0
    arch = req.model
    layout = st.param_layout(req)
    root = float(arch.embedding_params + arch.norm_params + arch.lm_head_params)
    root_bytes = root * reg.compute_bytes
    blocks = layout.dense * reg.compute_bytes + quantized_bytes - root_bytes
    return FSDP2_COPY_OUT_PASSES * (2.0 * blocks + root_bytes)


def adapter_matmul_counts(req: EstimateRequest, recompute: float) -> tuple[float, float]:
    """(FLOPs, bytes) per token, whole model, all passes (forward, backward, recomputed forward),
    of the LoRA adapters' rank-``r`` matmuls that tokens pass through: ``2 r (d_in + d_out)``
    FLOPs per adapted linear forward and twice that backward (the FLOPs
    :func:`calc.flops.training_flops_per_token` already counts as ``6 A``, ``8 A`` recomputed),
    and the input and output elements of :data:`LORA_MATMUL_ELEMENTS` at the adapters' dtype.
    (0, 0) without adapters; adapters folded into their weight pass no token."""
    if not req.is_peft:
        return 0.0, 0.0
    fp32 = _adapters_run_fp32(req)
    size = 4 if fp32 else 2
    live = [l for l in st.adapted(req) if not l.fused]
    # over the whole stack: an adapter on one kind of block's linear runs in those blocks only
    width = sum(l.blocks * l.active * l.rank_factor * (l.d_in + l.d_out) for l in live)
    elements = sum(l.blocks * l.active * (l.d_in + l.d_out) for l in live)
    fwd = LORA_MATMUL_ELEMENTS["forward"]
    passes = fwd * (1 + recompute) + LORA_MATMUL_ELEMENTS["backward"]
    flops = 2.0 * req.lora_rank * width * (1 + 2 + recompute)
    return flops, float(size * elements * passes)


def _adapters_run_fp32(req: EstimateRequest) -> bool:
    """The adapters' matmuls and output run in fp32: fp32 adapters (or fp32 training) in peft's
    ``lora.Linear``; Unsloth's ``matmul_lora`` casts fp32 adapters to the input's dtype first
    (``A.to(dtype)``, ``B.to(dtype)``) and adds their product into the base output in place.
    Not under autocast (:func:`autocast_runs_adapters`)."""
    return (
        req.is_peft
        and _fp32_adapters(req)
        and not (req.fused_lora_kernels and attention_dtype(req) != "fp32")
        and not autocast_runs_adapters(req)
    )


def autocast_runs_adapters(req: EstimateRequest) -> bool:
    """peft's adapters run in 16 bits whatever their own dtype: the forward runs under
    ``torch.autocast`` (a ``*-mixed`` regime that autocasts, :attr:`calc.states.Regime.autocast`),
    whose ``linear`` casts fp32 adapter weights and their input to 16 bits (torch 2.13
    ``aten/src/ATen/autocast_mode.cpp``), so ``lora_A`` and ``lora_B`` multiply on tensor cores
    and return 16 bits, and the scale and the add to the base output are 16-bit (traced,
    ``tools/count_amp_traffic.py``'s stacks under peft 0.21 with fp32 adapters: ``_to_copy`` of
    A, B and the input, ``mm`` in bf16). Unsloth's kernels cast the adapters themselves."""
    return (
        req.is_peft
        and not req.fused_lora_kernels
        and st.request_regime(req).autocast
        and req.precision is not Precision.FP32
    )


DEEPSPEED_PREFETCH_BUCKET_PER_HIDDEN2 = 0.9
"""DeepSpeed ZeRO-3's prefetch bucket in elements per ``hidden x hidden``, as the Hugging Face
Trainer fills ``stage3_prefetch_bucket_size: "auto"`` (transformers 5.17.0
``integrations/deepspeed.py`` ``trainer_config_finalize``: ``0.9 * hidden_size * hidden_size``).
DeepSpeed 0.16.5 ``PartitionedParameterCoordinator.fetch_sub_module`` gathers the next
parameters of its trace until their elements reach the bucket, in one coalesced all-gather."""


def zero3_messages(req: EstimateRequest, sharding: Sharding) -> tuple[int, int]:
    """``(all-gathers per pass over the model, elements per reduce bucket)`` of ZeRO-3 when
    DeepSpeed runs it; ``(0, 0)`` for FSDP (an all-gather and a reduce-scatter per layer, its
    units) and other shardings.

    DeepSpeed fetches parameters per module, not per layer: walking a block's parameters in
    forward order (first norm, the attention linears, second norm, the MLP linears), one
    all-gather takes parameters until their elements reach the prefetch bucket
    (:data:`DEEPSPEED_PREFETCH_BUCKET_PER_HIDDEN2`); the gradients leave in reduce buckets of
    ``reduce_bucket_size`` elements, ``hidden x hidden`` with the Trainer's ``auto``
    (:func:`calc.states.deepspeed_reduce_bucket_bytes`), one reduce-scatter each: the step counts
    ``ceil(gradient elements / bucket)`` of them."""
    if sharding is not Sharding.ZERO3 or not st.deepspeed_zero(req):
        return 0, 0
    arch = req.model
    bucket = DEEPSPEED_PREFETCH_BUCKET_PER_HIDDEN2 * arch.hidden_size**2
    attn = [l for l in arch.block_linears if l.role == "attn"]
    rest = [l for l in arch.block_linears if l.role != "attn"]
    norm = [arch.norm_params] * max(arch.norms_per_layer, 0)
    sizes = (
        norm[:1]
        + [l.d_in * l.d_out for l in attn for _ in range(l.count)]
        + norm[1:]
        + [l.d_in * l.d_out for l in rest for _ in range(l.count)]
    )
    per_block, held = 0, 0.0
    for size in sizes:
        held += size
        if held >= bucket:
            per_block, held = per_block + 1, 0.0
    per_block += 1 if held else 0
    return arch.num_layers * per_block, arch.hidden_size**2


ZERO3_HOOK_SECONDS_PER_MODULE = 3.0e-4
"""Host seconds DeepSpeed ZeRO-3 spends on one module call, its forward or backward hooks
together: MEASURED (one measurement, one machine). DeepSpeed 0.16.9 registers hooks on every
submodule (``parameter_offload.py`` ``_register_hooks_recursively``); each call runs
``PartitionedParameterCoordinator.fetch_sub_module`` (trace bookkeeping, the module's
parameters waited on or gathered, the next ``stage3_prefetch_bucket_size`` of the trace
issued) and ``release_sub_module`` (re-partition, the reuse-distance walk), all in Python,
plus the per-parameter gradient hook that fills the reduce bucket. Measured on this project's
build machine (``benchmarks/measure_zero3_hooks.py``: DeepSpeed 0.16.9, torch 2.13, CPU
accelerator, one rank, process CPU time): a two-block model with transformers-4.52-style
experts (128 per block, one ``nn.Linear`` per matrix) takes 1.61 s per step under ZeRO-3 and
0.43 s plain, 3,876 module calls per step: 305 us per call; with 32 experts, 0.368 s and
0.098 s over 996 calls: 271 us. A GPU host adds CUDA stream and event calls per hook; a faster
host CPU takes less. Rests on that one measurement."""


def _experts_called(req: EstimateRequest) -> float:
    """Experts a block's loop calls in one micro-step when each expert is its own module
    (``moe_expert_layout`` ``per-expert-modules``, transformers 4's loop): every expert that
    receives a token, in expectation ``E (1 - (1 - k/E)^T)`` over ``T`` tokens routed to ``k``
    of ``E`` (transformers 4.52 ``Qwen3MoeSparseMoeBlock.forward``, the last release ms-swift
    3.5 allowed, loops over all ``E``; other releases loop over the experts hit; with thousands
    of tokens both call all of them).
    0 for a dense model or 3-D expert weights (one module for all experts)."""
    if req.moe_expert_layout.value != "per-expert-modules":
        return 0.0
    return experts_called(req.model, req.micro_batch_size * req.local_seq_len)


def zero3_module_calls(req: EstimateRequest, sharding: Sharding) -> tuple[float, float]:
    """``(module calls per pass, of which inside a per-expert loop)`` whose hooks DeepSpeed
    ZeRO-3 runs (:data:`ZERO3_HOOK_SECONDS_PER_MODULE` each); ``(0, 0)`` for FSDP and other
    shardings.

    Per block: the block, its attention and its MLP (or MoE) module, the norms (two more for
    q/k norms), each linear module, the dense MLP's activation module; each expert called
    (:func:`_experts_called`) adds its MLP module, its linears and its activation module
    (transformers 4.52 ``Qwen3MoeMLP``: ``gate_proj``, ``up_proj``, ``down_proj``,
    ``act_fn = ACT2FN[...]``, a module per expert), the ``ModuleList`` itself is not called.
    Outside the blocks: the model, its inner model, the embedding, the rotary embedding, the
    final norm and the output layer (6). The expert loop's calls are returned apart: the loop
    asks the device for each expert's tokens (``torch.where`` on the routing mask, a host
    synchronisation), so the host cannot run ahead of the GPU through it."""
    if sharding is not Sharding.ZERO3 or not st.deepspeed_zero(req):
        return 0.0, 0.0
    arch = req.model
    called = _experts_called(req)
    routed = {id(l) for l in routed_expert_linears(arch)}
    is_expert = [id(l) in routed for l in arch.block_linears]
    outside = sum(l.count for l, ex in zip(arch.block_linears, is_expert, strict=True) if not ex)
    expert_linears = sum(1 for ex in is_expert if ex)
    norms = arch.norms_per_layer + (2 if arch.block_extra_params else 0)
    dense_act = 0 if arch.num_experts > 1 else 1
    if called:
        per_expert = expert_linears + 2
        loop = called * per_expert
    else:
        loop = 0.0
        outside += 1 if expert_linears else 0  # 3-D experts: one module for all of them
    per_block = 3 + norms + outside + dense_act + loop
    return arch.num_layers * per_block + 6, arch.num_layers * loop


def packed_attention(req: EstimateRequest) -> tuple[float | None, str]:
    """``(span, mask)``: the keys per query of the score and value matmuls (``None``: the
    row's length) and what SDPA receives, for a request whose packed samples attend each within
    itself (:func:`calc.lengths.request_attention_span`), as transformers 5.17 runs it:

    - ``flash`` (``flash_attention_2``): position ids that restart at each sample reach
      ``_flash_attention_forward`` (``modeling_flash_attention_utils.py``:
      ``_is_packed_sequence``, ``prepare_fa_kwargs_from_position_ids``), which calls
      ``flash_attn_varlen_func`` with the samples' ``cu_seqlens`` and ``causal=True``: each
      sample's own causal triangle, the span of :func:`calc.lengths.attention_span`;
    - ``sdpa``: ``masking_utils.py`` ``create_causal_mask`` finds the packed samples from the
      position ids (``find_packed_sequence_indices``), ands their block-diagonal mask into the
      causal one and sets ``allow_is_causal_skip = False``, so ``sdpa_mask`` hands SDPA a 4-D
      boolean mask tensor: the whole row's square (``attention_mask`` ``padding``), no saving;
    - ``eager``: the same 4-D mask added to the whole row's scores: as without packing.

    Otherwise ``(None, attention_mask)``."""
    mask = req.attention_mask.value
    span = request_attention_span(req)
    if span is None or req.attention is Attention.EAGER:
        return None, mask
    if req.attention is Attention.SDPA:
        return None, "padding"
    return span, mask


FP32_STREAM_REGIMES = ("mixed-amp", "mixed-other-16bit-weights")
"""Regimes whose residual stream is fp32 under autocast (:mod:`calc.states`): fp32 weights
make an fp32 embedding output; weights of the other 16-bit type promote the stream at the
first residual add."""


def qlora_stream_counted(req: EstimateRequest, sharding: Sharding, liger_on: bool) -> bool:
    """Whether :func:`calc.amp_traffic.qlora_stream_bytes_per_token` prices the request: QLoRA
    prepared by peft (``qlora_prepare_kbit``) under autocast (its regime ``mixed-amp``; with
    bitsandbytes' older rule of computing in the input's dtype too, since autocast casts the
    matmul to 16 bits all the same), a block of :data:`calc.amp_traffic.QLORA_TRACED_FAMILIES`,
    transformers' own blocks run eager."""
    return (
        req.method is Method.QLORA
        and st.request_regime(req, sharding).name == "mixed-amp"
        and req.model.family in amp_traffic.QLORA_TRACED_FAMILIES
        and _traced_eager_blocks(req, liger_on)
    )


def fp32_stream_counted(req: EstimateRequest, sharding: Sharding, liger_on: bool) -> bool:
    """Whether :mod:`calc.amp_traffic` prices the request's fp32 stream: a regime of
    :data:`FP32_STREAM_REGIMES`, transformers' own blocks run eager (the trace's code; not
    compiled, whose fused kernels absorb the casts, nor Liger's or Unsloth's kernels, which
    replace the norms and RoPE), and not QLoRA, whose 4-bit linears cast their input and
    return their output in it themselves (bitsandbytes ``Linear4bit.forward``): a stream of its
    own (:func:`qlora_stream_counted`)."""
    return (
        st.request_regime(req, sharding).name in FP32_STREAM_REGIMES
        and _traced_eager_blocks(req, liger_on)
        and req.method is not Method.QLORA
    )


def _traced_eager_blocks(req: EstimateRequest, liger_on: bool) -> bool:
    """The blocks run as ``tools/count_amp_traffic.py`` traces them: transformers' own code
    (:data:`calc.frameworks.TRANSFORMERS_MODELING`), eager, with no Liger or Unsloth kernels in
    place of its norms and RoPE."""
    return (
        TRANSFORMERS_MODELING.get(req.framework.value) is not None
        and not req.torch_compile
        and not req.fused_lora_kernels
        and not liger_on
    )


def autocast_cast_params(req: EstimateRequest, sharding: Sharding) -> tuple[int, int, int]:
    """What :data:`AUTOCAST_WEIGHT_CAST_BYTES` is counted on, per forward: the fp32 weight
    elements of the block linears (every MoE expert: each runs once a token reaches it), those of
    the output layer (the embedding's table when tied: the output matmul reads it; none once TRL
    cast it back to bf16, :func:`calc.states.embeddings_recast`), and the casts
    themselves (one op per block linear copy, and one for the output layer); QLoRA's 4-bit
    weights left out. ``(0, 0, 0)`` where the matmuls get 16-bit weights (see the constant)."""
    reg = st.request_regime(req, sharding)
    if not reg.casts_weights:
        return 0, 0, 0
    arch = req.model
    qlora = req.method is Method.QLORA
    cast = [lin for lin in arch.linears if not (qlora and lin.quantizable)]
    block = sum(arch.blocks_of(lin) * lin.params for lin in cast)
    ops = sum(arch.blocks_of(lin) * lin.count for lin in cast)
    # an output layer TRL cast back to bf16 after kbit preparation has nothing to cast
    head = (
        0
        if st.embeddings_recast(req, reg)
        else arch.vocab_size * arch.hidden_size - st.output_layer_quantized_params(req)
    )
    return block, head, ops + (1 if head else 0)


def kernel_traffic(parts: list[tuple[dict[str, int], float]], scale: int) -> tuple[float, float]:
    """Forward and backward bytes per token of one block's hand-written kernels (Liger's,
    Unsloth's): each ``(table, width)`` moves ``table[pass]`` bytes per element of ``width``,
    times ``scale`` (2 on fp32 activations)."""
    forward = scale * sum(table["forward"] * width for table, width in parts)
    backward = scale * sum(table["backward"] * width for table, width in parts)
    return float(forward), float(backward)


def lora_input_bytes(req: EstimateRequest) -> float:
    """Bytes per input element of each adapted linear that the adapter path moves before its
    first matmul, forward: the cast to fp32 adapters (:data:`LORA_CAST_BYTES_PER_INPUT`, when the
    input is 16-bit) and the dropout (:data:`LORA_DROPOUT_BYTES_PER_INPUT`, at the adapters'
    dtype)."""
    if not req.is_peft:
        return 0.0
    fp32_adapters = _fp32_adapters(req)
    cast = LORA_CAST_BYTES_PER_INPUT if _peft_casts_input_up(req) else 0
    if fp32_adapters and autocast_runs_adapters(req):
        # autocast casts the (now fp32) input back to 16 bits for lora_A
        cast += AUTOCAST_ADAPTER_INPUT_CAST_BYTES
    dropout = (
        LORA_DROPOUT_BYTES_PER_INPUT["fp32" if fp32_adapters else "16bit"]
        if req.lora_dropout > 0
        else 0
    )
    return float(cast + dropout)


def lora_output_bytes(req: EstimateRequest) -> int:
    """Element-wise bytes per output element of each adapted linear on peft's path: the 16-bit
    scale and add (:data:`LORA_BYTES_PER_OUTPUT`), fp32 adapters' fp32 branch on a 16-bit layer
    (:data:`LORA_FP32_BYTES_PER_OUTPUT`; not under autocast, :func:`autocast_runs_adapters`), or
    the fp32 activations' own path after kbit preparation (:data:`calc.states.KBIT_FP32`)."""
    if st.request_regime(req) is st.KBIT_FP32:
        mode = "compiled" if req.torch_compile else "eager"
        return FP32_ACTIVATION_BYTES_PER_ELEMENT["lora_output", mode]
    if _fp32_branch(req):
        return LORA_FP32_BYTES_PER_OUTPUT
    return LORA_BYTES_PER_OUTPUT


def _fp32_branch(req: EstimateRequest) -> bool:
    """fp32 adapters run their branch in fp32 on a 16-bit layer and cast the sum back
    (:data:`LORA_FP32_BYTES_PER_OUTPUT`); not after kbit preparation, which
    :func:`lora_output_bytes` asks first."""
    return _adapters_run_fp32(req) and attention_dtype(req) != "fp32"


def peft_path_backward_bytes(
    req: EstimateRequest, peft_path: Sequence[Any], stream_readers: frozenset[str]
) -> float:
    """Backward element-wise bytes per token, whole stack, of the adapters on peft's
    ``lora.Linear`` path (the forward's :func:`peft_path_bytes`): the output side's
    :data:`LORA_BACKWARD_BYTES_PER_OUTPUT`, and on each adapted linear's input the reverse of
    the forward's casts and dropout (the same bytes, :func:`_peft_input_bytes`) and the sum of
    the input gradients (:data:`LORA_INPUT_GRAD_ACCUMULATE_PASSES`), in fp32 on the stream's
    readers."""
    per_out = LORA_BACKWARD_BYTES_PER_OUTPUT["fp32_branch" if _fp32_branch(req) else "16bit"]
    out = per_out * sum(a.blocks * a.active * a.d_out for a in peft_path)
    stream_bytes = 4 if req.precision is Precision.FP32 else 2
    inputs = [a for a in peft_path if not a.fused]
    summed = stream_bytes * sum(a.blocks * a.active * a.d_in for a in inputs) + (
        4 - stream_bytes
    ) * sum(a.blocks * a.active * a.d_in for a in inputs if a.name in stream_readers)
    return float(
        out
        + _peft_input_bytes(req, peft_path, stream_readers)
        + LORA_INPUT_GRAD_ACCUMULATE_PASSES * summed
    )


def peft_path_bytes(
    req: EstimateRequest, peft_path: Sequence[Any], stream_readers: frozenset[str]
) -> float:
    """Forward element-wise bytes per token, whole stack, of the adapters on peft's path: their
    output's scale and add (:func:`lora_output_bytes`) and their input's casts and dropout
    (:func:`_peft_input_bytes`)."""
    out = lora_output_bytes(req) * sum(a.blocks * a.active * a.d_out for a in peft_path)
    return float(out + _peft_input_bytes(req, peft_path, stream_readers))


def _peft_input_bytes(
    req: EstimateRequest, peft_path: Sequence[Any], stream_readers: frozenset[str]
) -> float:
    """The casts and dropout on the adapted linears' inputs, per token, whole stack
    (:func:`lora_input_bytes`; folded adapters pass no token). ``stream_readers``: the adapted
    linears whose input is the fp32 stream's norm output (:mod:`calc.amp_traffic`), where peft's
    cast up to fp32 has nothing to do."""
    inputs = [a for a in peft_path if not a.fused]
    total = lora_input_bytes(req) * sum(a.blocks * a.active * a.d_in for a in inputs)
    if stream_readers and _peft_casts_input_up(req):
        total -= LORA_CAST_BYTES_PER_INPUT * sum(
            a.blocks * a.active * a.d_in for a in inputs if a.name in stream_readers
        )
    return float(total)


def qlora_autocast_path_bytes(req: EstimateRequest, peft_path: Sequence[Any]) -> float:
    """Forward element-wise bytes per token, whole stack, of peft's LoRA layers on 4-bit linears
    on QLoRA's fp32 stream under autocast (:data:`calc.amp_traffic.QLORA_AUTOCAST_LORA_BYTES`):
    an fp32 result and autocast's input cast where the linear's input is fp32, a 16-bit result
    and no cast on the output projection; a dropout at the input's dtype."""
    fp32_in = amp_traffic.fp32_input_names(req.model)
    table = amp_traffic.QLORA_AUTOCAST_LORA_BYTES
    total = 0.0
    for a in peft_path:
        wide = a.name in fp32_in
        out = table["fp32_result"] if wide else table["16bit_result"]
        total += out * a.blocks * a.active * a.d_out
        if a.fused:
            continue
        per_input = AUTOCAST_ADAPTER_INPUT_CAST_BYTES if wide else 0
        if req.lora_dropout > 0:
            per_input += LORA_DROPOUT_BYTES_PER_INPUT["fp32" if wide else "16bit"]
        total += per_input * a.blocks * a.active * a.d_in
    return total


def _peft_casts_input_up(req: EstimateRequest) -> bool:
    """peft casts each adapted linear's 16-bit input to its fp32 adapters
    (:data:`LORA_CAST_BYTES_PER_INPUT`)."""
    return req.is_peft and _fp32_adapters(req) and attention_dtype(req) != "fp32"


def _fp32_adapters(req: EstimateRequest) -> bool:
    """The adapters' weights are fp32: ``lora_adapter_dtype`` fp32 (peft's upcast) or fp32
    training."""
    return req.lora_adapter_dtype is AdapterDtype.FP32 or req.precision is Precision.FP32


def attention_dtype(req: EstimateRequest) -> str:
    """The dtype q, k and v have when they reach attention: fp32 where the memory model says the
    residual stream is fp32 and nothing casts it down (QLoRA after PEFT's
    ``prepare_model_for_kbit_training`` in a loop without autocast, ``bf16-true``: the 4-bit
    linears return their input's dtype; full fp32 training), else the 16-bit compute dtype."""
    if (
        req.method is Method.QLORA
        and req.qlora_prepare_kbit
        and req.precision is Precision.BF16_TRUE
    ):
        return "fp32"
    return half_dtype(req)


def half_dtype(req: EstimateRequest) -> str:
    """The dtype of the request's 16-bit matmuls (the linears' compute dtype)."""
    return precision_half_dtype(req.precision)


def precision_half_dtype(precision: Precision) -> str:
    """The 16-bit matmuls' dtype of ``precision``: ``fp16`` under ``fp16-mixed``, ``fp32`` in
    fp32 training, else ``bf16``."""
    if precision is Precision.FP32:
        return "fp32"
    return "fp16" if precision is Precision.FP16_MIXED else "bf16"


def _kernel(c: "Counts", capability: tuple[int, int]) -> attn_kernels.AttentionKernel:
    return attn_kernels.attention_kernel(
        attention=c.attention_impl,
        dtype=c.attention_dtype,
        mask=c.attention_mask,
        head_dim=c.head_dim,
        capability=capability,
        cudnn_first=not c.sdpa_cudnn_last,
        value_head_dim=c.value_head_dim,
    )


def attention_part_views(c: "Counts") -> list[tuple["Counts", float]]:
    """``c`` as each of its attention parts (:attr:`Counts.attention_parts`) sees it, with the
    part's share of the attention FLOPs: its head width, what SDPA receives, the keys its
    kernel's length is read at, and that share of ``c.flops.attention_forward``. One part
    with share 1 where the request names none."""
    parts = c.attention_parts
    total = sum(p.flops for p in parts)
    own = [(p.head_dim, p.mask, p.keys) for p in parts] == [
        (c.head_dim, c.attention_mask, c.attention_keys)
    ]
    if own or total <= 0:
        return [(c, 1.0)]  # the request's own kernel: no copy (a plan times many steps)
    views = []
    for part in parts:
        share = part.flops / total
        view = replace(
            c,
            head_dim=part.head_dim,
            attention_mask=part.mask,
            attention_keys=part.keys,
            flops=replace(c.flops, attention_forward=c.flops.attention_forward * share),
        )
        views.append((view, share))
    return views


def attention_dispatch(req: EstimateRequest, gpu: Gpu) -> tuple[str, int] | None:
    """What calc prices the request's attention as on ``gpu``: the kernel PyTorch dispatches
    for its largest attention part (:func:`calc.attention.attention_kernel`: ``flash``,
    ``efficient``, ``cudnn``, ``math`` or ``eager``) and the widest head dim of its parts (a
    Gemma 4 block of head dim 512 beside sliding ones of 256). ``None`` on a card without CUDA:
    the dispatch calc reads is CUDA's."""
    capability = card_capability(gpu)
    if capability is None:
        return None
    views = attention_part_views(counts(req, req.sharding))
    largest = max(views, key=lambda view: view[1])[0]
    return _kernel(largest, capability).backend, max(view.head_dim for view, _ in views)


def attention_time_factor(
    c: "Counts",
    rates: "Rates",
    efficiency: float,
    views: list[tuple["Counts", float]] | None = None,
) -> float:
    """:func:`part_time_factor` of each attention part (``views``, default
    :func:`attention_part_views`), weighted by its FLOPs: windowed blocks under SDPA run a
    masked kernel over the whole square, Gemma 4's full blocks (``global_head_dim`` 512) a
    kernel wider than flash's."""
    views = attention_part_views(c) if views is None else views
    return sum(share * part_time_factor(view, rates, efficiency) for view, share in views)


def part_time_factor(c: "Counts", rates: "Rates", efficiency: float) -> float:
    """Time of the attention matmuls relative to the same FLOPs at the card class's matmul
    ``efficiency`` in bf16: the kernel PyTorch dispatches (:func:`calc.attention.attention_kernel`)
    times its :data:`ATTENTION_KERNEL_TIME` (the memory-efficient kernel's in 16 bits times the
    multiply-adds its tiles run over a head dim they do not divide,
    :func:`calc.attention.efficient_padded_share`), times :data:`FP32_ATTENTION_TIME` for fp32 inputs on
    tensor cores, times ``efficiency / share`` where FlashAttention-2's measured share of the peak
    at the attention's length is below the class efficiency (:func:`flash2_peak_share`, on the
    classes of :data:`FLASH2_TABLES`: SDPA's flash and memory-efficient kernels, and ``attention``
    ``flash`` where it can only be FlashAttention-2, :data:`FLASH2_ONLY_CLASSES`). The math backend runs fp32 matmuls whatever the input dtype (it
    upcasts: see :data:`SCORE_BYTES_PER_ELEMENT`) and eager runs cuBLAS matmuls in the input
    dtype, both without tensor cores in fp32 (``allow_tf32`` off by default): the card's
    :func:`fp32_time`. A card without CUDA (AMD) keeps 1.0: the dispatch read here is CUDA's."""
    capability = rates.capability
    if capability is None:
        return 1.0
    kernel = _kernel(c, capability)
    if kernel.backend == attn_kernels.MATH or (
        kernel.backend == attn_kernels.EAGER and c.attention_dtype == "fp32"
    ):
        return fp32_matmul_time(c, rates)
    if kernel.backend == attn_kernels.EAGER:
        return 1.0
    factor = ATTENTION_KERNEL_TIME[kernel.backend]
    if kernel.backend == attn_kernels.EFFICIENT and c.attention_dtype != "fp32":
        # its tiles pad a head dim they do not divide (Phi-3's 96 runs 128 wide)
        factor *= attn_kernels.efficient_padded_share(
            c.head_dim, bool(c.flops.attention_recompute_share)
        )
    if c.attention_dtype == "fp32":
        factor *= (
            FP32_ATTENTION_TIME["tf32x3"] if kernel.tensor_cores else fp32_matmul_time(c, rates)
        )
    flash2_family = kernel.backend in (attn_kernels.FLASH, attn_kernels.EFFICIENT)
    # FlashAttention-4 on Blackwell is not FlashAttention-2: the class efficiency stands
    flash4 = c.flash_attention_4 and rates.card_class == "blackwell"
    called = c.attention_impl == "sdpa" or (rates.card_class in FLASH2_ONLY_CLASSES and not flash4)
    if not (flash2_family and called and rates.card_class in FLASH2_TABLES):
        return factor
    # FlashAttention-2's own measured rate at this length, where it is below the class's
    share = flash2_peak_share(
        rates.card_class,
        kernel.computed_fraction < 1.0,
        c.head_dim,
        c.attention_keys or 1.0,
        c.flops.attention_recompute_share,
    )
    if share < efficiency:
        factor *= efficiency / share
    return factor


def score_bytes_per_token(
    c: "Counts",
    capability: tuple[int, int] | None,
    views: list[tuple["Counts", float]] | None = None,
) -> tuple[float, float]:
    """:func:`part_score_bytes_per_token` summed over the attention parts (``views``, default
    :func:`attention_part_views`)."""
    fwd = bwd = 0.0
    for view, _ in attention_part_views(c) if views is None else views:
        f, b = part_score_bytes_per_token(view, capability)
        fwd += f
        bwd += b
    return fwd, bwd


def part_score_bytes_per_token(
    c: "Counts", capability: tuple[int, int] | None
) -> tuple[float, float]:
    """(forward, backward) bytes per token, whole model, of the materialised scores
    (:data:`SCORE_BYTES_PER_ELEMENT`, and in eager attention Gemma-2's soft-capping of them,
    :data:`SOFTCAP_ELEMENT_PASSES`, and the dropout of GPT-2's probabilities,
    :data:`DROPOUT_PASSES`) and of the explicit mask's reads (:data:`MASK_READS`),
    over ``heads * seq_len * layers`` elements per token (the full-square forward attention
    FLOPs over ``4 * head_dim``); a recomputed forward counts again in the backward. (0, 0) for
    the flash kernel, for fused kernels without a mask tensor and for cards without CUDA."""
    if capability is None or not c.flops.attention_forward:
        return 0.0, 0.0
    kernel = _kernel(c, capability)
    elements = c.flops.attention_forward / (4.0 * c.head_dim * kernel.computed_fraction)
    mask_bytes = 4 if c.attention_dtype == "fp32" else 2
    if kernel.scores_materialised:
        if kernel.backend == attn_kernels.EAGER and c.torch_compile:
            # inductor fuses the chain between the two matmuls (COMPILED_SCORE_PASSES)
            fwd_scores = mask_bytes * COMPILED_SCORE_PASSES["forward"]
            bwd_scores = mask_bytes * COMPILED_SCORE_PASSES["backward"]
        elif kernel.backend == attn_kernels.EAGER and c.attention_dtype == "fp16":
            # CUDA's fused half_to_float softmax (HALF_TO_FLOAT_SCORE_BYTES_PER_ELEMENT)
            fwd_scores = HALF_TO_FLOAT_SCORE_BYTES_PER_ELEMENT["forward"]
            bwd_scores = HALF_TO_FLOAT_SCORE_BYTES_PER_ELEMENT["backward"]
        else:
            fwd_scores = SCORE_BYTES_PER_ELEMENT[kernel.backend, "forward"]
            bwd_scores = SCORE_BYTES_PER_ELEMENT[kernel.backend, "backward"]
        fwd = fwd_scores + mask_bytes * MASK_READS["materialised", "forward"]
        bwd = bwd_scores + mask_bytes * MASK_READS["materialised", "backward"]
        if kernel.backend == attn_kernels.EAGER and c.score_softcap:
            # the scores are in the q dtype when capped (before the fp32 softmax)
            fwd += mask_bytes * SOFTCAP_ELEMENT_PASSES["forward"]
            bwd += mask_bytes * SOFTCAP_ELEMENT_PASSES["backward"]
        if kernel.backend == attn_kernels.EAGER and c.score_dropout and not c.torch_compile:
            # the probabilities dropped out after their cast to the q dtype (DROPOUT_PASSES)
            fwd += dropout_bytes_per_element(mask_bytes)
            bwd += dropout_bytes_per_element(mask_bytes)
    elif c.attention_mask != attn_kernels.MASK_CAUSAL and kernel.backend != attn_kernels.FLASH:
        fwd = mask_bytes * MASK_READS["fused", "forward"]
        bwd = mask_bytes * MASK_READS["fused", "backward"]
    else:
        return 0.0, 0.0
    recompute = c.flops.attention_recompute_share
    return elements * fwd, elements * (bwd + recompute * fwd)


# --- the step ----------------------------------------------------------------------------------

BREAKDOWN_KEYS = (
    "compute",
    "elementwise",
    "dequantisation",
    "fp8_casts",
    "exposed_communication",
    "exposed_transfer",
    "optimizer",
    "overheads",
)


@dataclass(frozen=True)
class StepBreakdown:
    """Seconds of one optimizer step on one GPU, by cause; they add up to ``step_seconds``."""

    compute: float
    elementwise: float
    dequantisation: float
    fp8_casts: float
    exposed_communication: float
    exposed_transfer: float
    optimizer: float
    overheads: float
    # one micro-step's forward pass alone (not a part of the step: an evaluation's micro-step,
    # :func:`eval_seconds`): the forward's share of each part above that runs in it
    forward_micro: float = 0.0
    # every collective second of the step, hidden under compute or not (not a part of the
    # step: ``exposed_communication`` is the part that adds to it); what overlap is asked to
    # hide (benchmarks.probe_multi_gpu_bias, the validation page's multi-GPU table)
    communication: float = 0.0

    @property
    def step_seconds(self) -> float:
        return (
            self.compute
            + self.elementwise
            + self.dequantisation
            + self.fp8_casts
            + self.exposed_communication
            + self.exposed_transfer
            + self.optimizer
            + self.overheads
        )

    def to_dict(self) -> JsonObject:
        return {k: getattr(self, k) for k in BREAKDOWN_KEYS}


@dataclass(frozen=True)
class Rates:
    """The rates of one card: peak FLOP/s (BF16 and FP8 tensor, FP32 without tensor cores),
    memory and link bandwidths (bytes/s)."""

    peak_flops: float
    fp8_peak_flops: float
    memory_bytes_per_s: float
    link: comm.Link
    host_bytes_per_s: float
    fp32_flops: float  # FP32 without tensor cores (gpus.csv fp32_tflops)
    capability: tuple[int, int] | None = None  # CUDA compute capability; None without CUDA
    card_class: str = ""  # gpus.csv utilisation_class: the key of FLASH2_TABLES
    clock: float = 1.0  # the sustained clock's share of the boost clock (Gpu.clock_factor)


_RATES: dict[tuple[Gpu, int, str, int], Rates] = {}


def card_rates(
    gpu: Gpu,
    num_gpus: int,
    network: str = comm.CATALOGUE_NETWORK,
    per_node: int = comm.GPUS_PER_NODE,
) -> Rates:
    key = (gpu, num_gpus, network, per_node)
    if key not in _RATES:
        _RATES[key] = _card_rates(gpu, num_gpus, network, per_node)
    return _RATES[key]


def card_capability(gpu: Gpu) -> tuple[int, int] | None:
    """The card's CUDA compute capability (``Rates.capability``); None for a card without CUDA."""
    return (
        attn_kernels.compute_capability(gpu.architecture, gpu.id) if gpu.stack == "cuda" else None
    )


def _card_rates(gpu: Gpu, num_gpus: int, network: str, per_node: int) -> Rates:
    """The card's rates as it runs: the datasheet's tensor and FP32 rates, computed at the boost
    clock, times ``gpu.clock_factor`` (the clock it holds under its board power limit over the
    boost clock, ``gpus.csv``'s ``sustained_clock_mhz``); memory and links at their figures."""
    clock = gpu.clock_factor
    return Rates(
        peak_flops=gpu.bf16_dense_flops * clock,
        fp8_peak_flops=getattr(gpu, "fp8_dense_tflops", 0.0) * 1e12 * clock,
        memory_bytes_per_s=gpu.memory_bandwidth_gb_per_s * 1e9 * MEMORY_BANDWIDTH_EFFICIENCY,
        link=comm.collective_link(gpu, num_gpus, network, per_node),
        host_bytes_per_s=comm.host_link_bytes_per_s(gpu.pcie_gen),
        fp32_flops=gpu.fp32_flops * clock,
        capability=card_capability(gpu),
        card_class=gpu.utilisation_class,
        clock=clock,
    )


def step_breakdown(
    c: Counts,
    rates: Rates,
    *,
    num_gpus: int,
    sharding: Sharding,
    cpu_offload: CpuOffload,
    efficiency: float,
    half_tokens: float | None = None,
    fp8: bool = False,
    fp8_efficiency: float | None = None,
    sync_each_micro_batch: bool = False,
    paged_overflow_bytes: float = 0.0,
    dispatch_seconds: float | None = None,
    shard_size: int | None = None,
    group_link: comm.Link | None = None,
    replica_link: comm.Link | None = None,
    sp_link: comm.AllToAll | None = None,
) -> StepBreakdown:
    """One optimizer step on one GPU (see the module docstring for the equations).

    Hybrid sharding (``shard_size`` below ``num_gpus``): the ZeRO collectives run inside the
    shard group over ``group_link``, and each reduced gradient shard is then all-reduced
    between the replicas over ``replica_link`` (:func:`calc.comm.replica_link`), with the
    reduce-scatter it follows (FSDP ``HYBRID_SHARD`` runs both in the post-backward hook).

    Sequence parallelism (``sp_link``, :func:`calc.comm.all_to_all_link`): the Ulysses
    all-to-alls of :func:`sequence_parallel_traffic`, exposed whole."""
    rates = half_matmul_rates(c, rates)
    n = num_gpus
    g = n if shard_size is None else shard_size
    replicas = n // g
    T = c.tokens_micro
    A = c.accumulation
    # a slower clock slows a kernel's fixed cycles as much as its work: T_half follows the
    # rate at the boost clock
    sat = saturation(T, c.hidden, rates.peak_flops / rates.clock, half_tokens)
    eff = efficiency * sat
    if c.attention_kept_if_flash and rates.capability is not None:
        backend = _kernel(c, rates.capability).backend
        if backend not in (attn_kernels.FLASH, attn_kernels.EFFICIENT):
            # cuDNN or the math backend: not in the per-op policy's list, run again
            c = replace(
                c,
                flops=replace(
                    c.flops,
                    recompute=c.flops.recompute + c.flops.attention_forward,
                    attention_recompute_share=1.0,
                ),
            )
    f = c.flops
    use_fp8 = fp8 and rates.fp8_peak_flops > 0
    fp8_sat = (
        saturation(T, c.hidden, rates.fp8_peak_flops / rates.clock, half_tokens) if use_fp8 else sat
    )
    fp8_eff = (FP8_MATMUL_EFFICIENCY if fp8_efficiency is None else fp8_efficiency) * fp8_sat

    def phase_compute(total: float, linear: float) -> float:
        if use_fp8:
            return T * (
                (total - linear) / (rates.peak_flops * eff)
                + linear / (rates.fp8_peak_flops * fp8_eff)
            )
        return T * total / (rates.peak_flops * eff)

    t_fwd = phase_compute(f.forward, f.linear_forward)
    t_bwd = phase_compute(f.backward + f.recompute, f.linear_backward + f.linear_recompute)
    # routed experts' matmuls run on T k / E rows each: they reach the share of their rate a
    # matmul reaches at that many tokens (calc.moe_kernels), not at T
    if c.expert_forward_flops_per_token:
        path_rate, path_eff, path_sat = (
            (rates.fp8_peak_flops, fp8_eff, fp8_sat) if use_fp8 else (rates.peak_flops, eff, sat)
        )
        expert_sat = saturation(
            T * c.expert_token_share, c.hidden, path_rate / rates.clock, half_tokens
        )
        # the forward's extra, then the other passes' as many times over as the linears run
        extra_fwd = (
            T
            * c.expert_forward_flops_per_token
            / (path_rate * path_eff)
            * (path_sat / expert_sat - 1.0)
        )
        t_fwd += extra_fwd
        t_bwd += extra_fwd * (f.linear_total / f.linear_forward - 1.0)
    # attention kernels slower than flash (mask tensor, eager, fp32 inputs): the extra time
    views = attention_part_views(c)  # one copy per part, for the kernels' time and bytes
    slower = attention_time_factor(c, rates, efficiency, views) - 1.0
    if slower and f.attention_forward:
        extra = T * f.attention_total * slower / (rates.peak_flops * eff)
        fwd_part = 1.0 / (3.0 + f.attention_recompute_share)
        t_fwd += extra * fwd_part
        t_bwd += extra * (1.0 - fwd_part)
    # matmuls on fp32 weights and inputs (the output layer after kbit preparation, every
    # matmul but attention's and the adapters' in fp32 training) run at the card's FP32 rate
    # (CUDA cores; AMD's FP32 rate, hipBLASLt's XF32 being off unless asked for): the extra
    # time over the 16-bit rate the compute above priced them at
    if c.fp32_matmul_flops_per_token:
        rate32 = rates.peak_flops / fp32_matmul_time(c, rates)
        eff32 = efficiency * saturation(T, c.hidden, rate32 / rates.clock, half_tokens)
        extra = (
            T
            * c.fp32_matmul_flops_per_token
            * (1.0 / (rate32 * eff32) - 1.0 / (rates.peak_flops * eff))
        )
        t_fwd += extra / 2
        t_bwd += extra / 2
    # the adapters' rank-r matmuls: the larger of their FLOPs at the adapters' rate (the card's
    # FP32 rate for fp32 adapters, cuBLAS without TF32) and their bytes at the memory's, in place
    # of the tensor-core time the compute above priced them at
    if c.adapter_flops_per_token:
        priced = T * c.adapter_flops_per_token / (rates.peak_flops * eff)
        rate = (
            rates.peak_flops / fp32_matmul_time(c, rates)
            if c.adapter_fp32
            else rates.peak_flops * eff
        )
        runs = max(
            T * c.adapter_flops_per_token / rate,
            T * c.adapter_bytes_per_token / rates.memory_bytes_per_s,
        )
        fwd_part = 1.0 / (3.0 + (1.0 if f.recompute else 0.0))
        t_fwd += (runs - priced) * fwd_part
        t_bwd += (runs - priced) * (1.0 - fwd_part)
    compute_micro = t_fwd + t_bwd
    # element-wise kernels run between the matmuls on the same stream: added, not overlapped
    elementwise_bytes = c.elementwise_bytes_per_token
    if c.liger_head_pre_ampere_bytes_per_token and (
        rates.capability is not None and rates.capability[0] < 8
    ):
        elementwise_bytes += c.liger_head_pre_ampere_bytes_per_token
    elementwise_micro = T * elementwise_bytes / rates.memory_bytes_per_s
    fwd_share = 1.0 / (1 + BACKWARD_ELEMENTWISE_FACTOR + (c.passes - 2))
    t_fwd += elementwise_micro * fwd_share
    t_bwd += elementwise_micro * (1 - fwd_share)
    # the math backend and eager attention write and read the L x L scores, and kernels
    # given a mask tensor read it per head (element-wise too)
    score_fwd, score_bwd = score_bytes_per_token(c, rates.capability, views)
    t_fwd += T * score_fwd / rates.memory_bytes_per_s
    t_bwd += T * score_bwd / rates.memory_bytes_per_s
    elementwise_micro += T * (score_fwd + score_bwd) / rates.memory_bytes_per_s
    # FSDP2 copies each gathered unit out of its all-gather buffer on the compute stream: the
    # copies split evenly between the forward and the backward (the root's single copy, in the
    # forward, is small beside the blocks')
    if c.copy_out_bytes:
        copy_out = c.copy_out_bytes / rates.memory_bytes_per_s
        t_fwd += copy_out / 2
        t_bwd += copy_out / 2
        elementwise_micro += copy_out

    # QLoRA: each pass that uses a frozen 4-bit weight dequantises it first
    dq_pass = c.dequantisation_bytes / rates.memory_bytes_per_s
    dq_fwd, dq_bwd = dq_pass, dq_pass * (c.passes - 1)
    eager8 = c.fp8_eager if use_fp8 else None
    if eager8 is not None:
        # torchao's Float8Linear without torch.compile: its casts op by op and its layout copies
        # in place of the fused casts, and a frozen weight's gradient in the backward
        casts_micro = (T * eager8.bytes_per_token + eager8.weight_bytes) / rates.memory_bytes_per_s
        frozen_wgrad = T * eager8.frozen_wgrad_flops_per_token / (rates.fp8_peak_flops * fp8_eff)
        t_bwd += frozen_wgrad
        compute_micro += frozen_wgrad
    elif use_fp8:
        casts_micro = (
            FP8_CAST_BYTES_PER_ELEMENT
            * (T * c.fp8_cast_elements_per_token + c.passes * c.block_weight_params)
            / rates.memory_bytes_per_s
        )
    else:
        casts_micro = 0.0
    fwd_busy = t_fwd + dq_fwd
    bwd_busy = t_bwd + dq_bwd

    reg = c.reg
    div = st.shard_divisors(sharding, g) if g > 1 else st.Divisors(1, 1, 1)
    grad_bytes = float(c.grad_params) * reg.grad_bytes
    param_bytes = c.dense_params * reg.compute_bytes + c.quantized_bytes
    in_group = rates.link if group_link is None else group_link
    link = in_group.bytes_per_s
    layers = max(c.layers, 1)
    # latency of each collective across servers (NCCL's ring model, 0 on one server): ZeRO-3
    # gathers and reduce-scatters once per unit (FSDP: a layer; DeepSpeed: a prefetch bucket of
    # parameters, a reduce bucket of gradients), every DDP / ZeRO-1/2 bucket pays one
    gather_lat = comm.ring_latency_s(in_group, g)

    def between_replicas(nbytes: float) -> float:
        """Seconds of the all-reduce of ``nbytes`` of reduced gradient shard between the
        replicas (0 without hybrid sharding), its latency included (ring or tree, as NCCL
        picks: :func:`calc.comm.all_reduce_seconds`)."""
        if replicas <= 1 or replica_link is None:
            return 0.0
        return comm.all_reduce_seconds(nbytes, replica_link, replicas)

    # Exposed seconds: per ordinary micro-step, extra in the micro-step that synchronises the
    # gradients (the last one under no_sync accumulation), and after the optimizer step.
    comm_micro = comm_last = comm_after = fwd_gather = 0.0
    collectives = 0.0  # every collective second of the step (StepBreakdown.communication)
    # Ulysses' all-to-alls sit between a block's projections and its attention, on the same
    # stream: nothing overlaps them
    sp_fwd = 0.0
    if c.all_to_all_calls and sp_link is not None:
        sp_total = sp_link.seconds(c.all_to_all_bytes, c.all_to_all_calls)
        sp_fwd = sp_total * c.all_to_all_forward_share
        comm_micro += sp_total
        collectives += A * sp_total
    if n > 1:
        if sharding is Sharding.ZERO3:
            gathers = c.gather_messages or layers
            reduces = (
                -(-c.grad_params // c.reduce_bucket_params) if c.reduce_bucket_params else layers
            )
            ag = comm.all_gather_bytes(param_bytes, g) / link + gathers * gather_lat
            rs = (
                comm.reduce_scatter_bytes(grad_bytes, g) / link
                + reduces * gather_lat
                + reduces * between_replicas(grad_bytes / g / reduces)
            )
            fwd_gather = max(ag / layers, ag - fwd_busy)
            comm_micro += fwd_gather
            collectives += A * 2 * ag + (A if sync_each_micro_batch else 1) * rs
            if sync_each_micro_batch or A == 1:
                comm_micro += max((ag + rs) / layers, ag + rs - bwd_busy)
            else:  # no_sync: gradients reduced once, with the last micro-step's backward
                comm_micro += max(ag / layers, ag - bwd_busy)
                comm_last += max((ag + rs) / layers, ag + rs - bwd_busy) - max(
                    ag / layers, ag - bwd_busy
                )
        else:
            buckets = max(1.0, -(-grad_bytes // c.bucket_bytes))
            size = min(grad_bytes, c.bucket_bytes)
            last = grad_bytes - (buckets - 1) * size  # the last bucket holds the rest
            if sharding in (Sharding.ZERO1, Sharding.ZERO2):
                sync = (
                    comm.reduce_scatter_bytes(grad_bytes, g) / link
                    + (buckets - 1) * between_replicas(size / g)
                    + between_replicas(last / g)
                    + buckets * gather_lat
                )
                bucket = (
                    comm.reduce_scatter_bytes(size, g) / link
                    + between_replicas(size / g)
                    + gather_lat
                )
                # the updated (trainable) weights are all-gathered after the step: not overlapped
                comm_after += (
                    comm.all_gather_bytes(c.trainable * reg.weight_bytes, g) / link + gather_lat
                )
                collectives += comm_after
            else:  # DDP: every GPU of the job in one all-reduce per bucket, ring or tree
                bucket = comm.all_reduce_seconds(size, rates.link, n)
                sync = (buckets - 1) * bucket + comm.all_reduce_seconds(last, rates.link, n)
            exposed_sync = max(bucket, sync - bwd_busy)
            collectives += (A if sync_each_micro_batch else 1) * sync
            if sync_each_micro_batch:
                comm_micro += exposed_sync
            else:
                comm_last += exposed_sync

    # host <-> device transfers (CPU offload) and the optimizer
    opt_shard = c.trainable / div.optimizer
    transfer_micro = transfer_last = transfer_after = fwd_stream = 0.0
    if cpu_offload is CpuOffload.NONE:
        optimizer = c.optimizer_bytes_per_param * opt_shard / rates.memory_bytes_per_s
    else:
        ho = c.host_offload
        if ho is None:
            raise ValueError("CPU offload needs the host's counts (calc.host_offload)")
        host = rates.host_bytes_per_s
        # gradients cross the host link during the backward: under it where the buffers are
        # page-locked, else each copy holds the host and the GPU waits (offload_pinned)
        each = opt_shard * ho.grads_each_micro / host
        last = opt_shard * ho.grads_last / host
        transfer_micro = max(0.0, each - bwd_busy) if ho.grads_hidden else each
        transfer_last = max(0.0, last - bwd_busy) if ho.grads_hidden else last
        cpu_step = opt_shard * ho.cpu / CPU_MEMORY_BYTES_PER_S
        on_device = c.optimizer_bytes_per_param * opt_shard / rates.memory_bytes_per_s
        # the CPU step and the upload are not hidden (ZeRO-Offload's one-step delayed update is
        # off by default)
        transfer_after = opt_shard * ho.upload / host
        optimizer = max(on_device, cpu_step)
        if cpu_offload is CpuOffload.OPTIMIZER_PARAMS:
            # this GPU's weights come in once in forward and once in backward, as the all-gather
            # does: FSDP unshards a unit in its pre-backward hook and the checkpointed block
            # inside it recomputes from that copy (torch 2.13 FSDP, checkpoint_wrapper per block)
            stream = ((c.dense_params * ho.stream + c.quantized_bytes) / div.weights) / host
            fwd_stream = max(stream / layers, stream - fwd_busy)
            transfer_micro += fwd_stream + max(stream / layers, stream - bwd_busy)
    # paged optimizer states (bitsandbytes, CUDA unified memory) that do not fit on the card are
    # evicted to host memory and faulted back in by the step: in and out once per optimizer step
    transfer_after += 2.0 * paged_overflow_bytes / rates.host_bytes_per_s

    # the host dispatches every kernel; when that takes longer than the GPU's work, the GPU waits
    gpu_micro = (
        compute_micro
        + elementwise_micro
        + dq_fwd
        + dq_bwd
        + casts_micro
        + comm_micro
        + transfer_micro
    )
    gpu_last = gpu_micro + comm_last + transfer_last
    per_op = DISPATCH_SECONDS_PER_KERNEL if dispatch_seconds is None else dispatch_seconds
    dispatch_micro = (c.kernels_per_micro + (eager8.ops if eager8 else 0.0)) * per_op
    # DeepSpeed ZeRO-3's module hooks run on the host beside the dispatch, in every pass; in a
    # per-expert loop that synchronises host and device each expert (forward and recomputed
    # forward), the GPU waits for them: that part adds to the step whole
    hooks = c.hooked_module_calls * c.passes * ZERO3_HOOK_SECONDS_PER_MODULE
    synced = c.synced_module_calls * (c.passes - 1) * ZERO3_HOOK_SECONDS_PER_MODULE
    # transformers 4's per-expert loop waits for the device at every expert (a nonzero), so
    # the host cannot dispatch its kernels ahead of the GPU in the passes that run the loop
    # (forward and recomputed forward; autograd's backward has no such wait): added whole
    loop_ops = c.expert_loop_ops * (c.passes - 1) * per_op
    synced += loop_ops
    dispatch_micro += hooks - synced
    # an optimizer that updates one tensor at a time: its ops follow the last micro-step's on
    # the host as its work follows it on the GPU
    opt_dispatch = c.optimizer_ops * per_op
    overheads = (
        (A - 1) * max(0.0, dispatch_micro - gpu_micro)
        + max(0.0, dispatch_micro - gpu_last, dispatch_micro + opt_dispatch - gpu_last - optimizer)
        + A * synced
    )
    # the forward alone (an evaluation's micro-step): its compute, element-wise work and
    # dequantisation, one pass's share of the FP8 casts, ZeRO-3's forward all-gathers and an
    # offloaded model's forward upload as far as the forward does not hide them, and the host's
    # dispatch of the forward's kernels (its share as the element-wise work's) and hooks
    gpu_fwd = fwd_busy + casts_micro / max(c.passes, 1.0) + fwd_gather + fwd_stream + sp_fwd
    hooks_fwd = c.hooked_module_calls * ZERO3_HOOK_SECONDS_PER_MODULE
    synced_fwd = c.synced_module_calls * ZERO3_HOOK_SECONDS_PER_MODULE + c.expert_loop_ops * per_op
    dispatch_fwd = (
        c.kernels_per_micro * per_op * fwd_share
        + (eager8.forward_ops * per_op if eager8 else 0.0)
        + hooks_fwd
        - synced_fwd
    )
    forward_micro = max(gpu_fwd, dispatch_fwd) + synced_fwd
    return StepBreakdown(
        compute=A * compute_micro,
        elementwise=A * elementwise_micro,
        dequantisation=A * (dq_fwd + dq_bwd),
        fp8_casts=A * casts_micro,
        exposed_communication=A * comm_micro + comm_last + comm_after,
        exposed_transfer=A * transfer_micro + transfer_last + transfer_after,
        optimizer=optimizer,
        overheads=overheads,
        forward_micro=forward_micro,
        communication=collectives,
    )


# --- the estimate ------------------------------------------------------------------------------


@dataclass(frozen=True)
class TimeEstimate:
    flops_per_token: FlopsPerToken
    peak_flops_per_gpu: float
    utilisation: float
    batch_saturation: float
    breakdown: StepBreakdown
    tokens_per_step_per_gpu: int
    num_gpus: int
    total_tokens: float
    link: comm.Link
    fp8_compute: bool = False
    padding_ratio: float | None = None  # padded tokens per real token (with length_stats only)
    # the card's rate as it runs over its datasheet rate (calc.gpus.Gpu.clock_factor)
    clock_factor: float = 1.0
    # where ``utilisation`` comes from: the request's ``mfu``, or the card class's fitted share
    mfu_source: str = "card_class"

    @property
    def step_seconds(self) -> float:
        return self.breakdown.step_seconds

    @property
    def tokens_per_second_per_gpu(self) -> float:
        return self.tokens_per_step_per_gpu / self.step_seconds

    @property
    def tokens_per_second(self) -> float:
        return self.tokens_per_second_per_gpu * self.num_gpus

    @property
    def compute_hours(self) -> float:
        """Steady-state training hours (start-up and checkpoints are added by the schedule)."""
        return self.total_tokens / self.tokens_per_second / 3600.0

    @property
    def effective_utilisation(self) -> float:
        """Achieved FLOP rate (FLOPs executed, recomputation and padding included) over the
        datasheet's BF16 peak (``peak_flops_per_gpu``, at the boost clock)."""
        padded = self.tokens_per_second_per_gpu * (self.padding_ratio or 1.0)
        return self.flops_per_token.total * padded / self.peak_flops_per_gpu

    def _share_left(self, key: str) -> float:
        part: float = getattr(self.breakdown, key)
        return 1.0 - part / self.step_seconds

    def to_dict(self) -> JsonObject:
        b = self.breakdown
        return {
            "compute_hours": self.compute_hours,
            "total_tokens": self.total_tokens,
            "tokens_per_second": self.tokens_per_second,
            "tokens_per_second_per_gpu": self.tokens_per_second_per_gpu,
            "flops_per_token": self.flops_per_token.to_dict(),
            "peak_flops_per_gpu": self.peak_flops_per_gpu,
            # the rate the time is computed at: the datasheet's at the card's sustained clock
            "sustained_peak_flops_per_gpu": self.peak_flops_per_gpu * self.clock_factor,
            # which rate each utilisation is a share of, and where ``factors.mfu`` comes from
            "utilisation_basis": {
                "mfu": "sustained_peak_flops_per_gpu",
                "mfu_source": self.mfu_source,
                "effective_utilisation": "peak_flops_per_gpu",
            },
            # the step's parts as multiplicative factors (1 - their share of the step)
            "factors": {
                "mfu": self.utilisation,
                "qlora_speed_factor": self._share_left("dequantisation"),
                "batch_saturation": self.batch_saturation,
                "scaling_efficiency": self._share_left("exposed_communication"),
                "cpu_offload_factor": self._share_left("exposed_transfer"),
                "effective_utilisation": self.effective_utilisation,
            },
            "step": {
                "seconds": self.step_seconds,
                "tokens_per_gpu": self.tokens_per_step_per_gpu,
                "breakdown_seconds": b.to_dict(),
                "breakdown_fraction": {k: v / self.step_seconds for k, v in b.to_dict().items()},
                "link": self.link.to_dict(),
                "fp8_compute": self.fp8_compute,
            },
            "steady_state_tokens_per_second": self.tokens_per_second,
            "steady_state_tokens_per_second_per_gpu": self.tokens_per_second_per_gpu,
            **(
                {}
                if self.padding_ratio is None
                else {
                    "padding_ratio": self.padding_ratio,
                    # what the GPU processes, padding included (the rates above count real data)
                    "padded_tokens_per_second": self.tokens_per_second * self.padding_ratio,
                    "padded_tokens_per_second_per_gpu": (
                        self.tokens_per_second_per_gpu * self.padding_ratio
                    ),
                }
            ),
        }


def estimate_time(
    req: EstimateRequest,
    gpu: Gpu,
    total_tokens: float,
    *,
    num_gpus: int | None = None,
    sharding: Sharding | str | None = None,
    mfu: float | None = None,
    qlora_speed_factor: float | None = None,
    scaling_efficiency: float | None = None,
    fp8_compute: bool = False,
    trainable_params: int | None = None,
    half_tokens: float | None = None,
    fp8_efficiency: float | None = None,
    memory: JsonObject | None = None,
    network: str = comm.CATALOGUE_NETWORK,
    gpus_per_node: int = comm.GPUS_PER_NODE,
) -> TimeEstimate:
    """Steady-state time of ``total_tokens`` on ``num_gpus`` x ``gpu`` (defaults: the request's),
    servers of ``gpus_per_node`` cards joined by ``network`` (:data:`calc.comm.NETWORKS`)
    when the job spans several.

    Overrides kept from the factor model: ``mfu`` replaces the class efficiency, both a share
    of the card's rate at its sustained clock (``sustained_peak_flops_per_gpu``; the response's
    ``utilisation_basis`` says so, and that ``effective_utilisation`` is of the datasheet's);
    ``qlora_speed_factor`` (QLoRA) sets the step to the same step without dequantisation
    divided by it; ``scaling_efficiency`` (several GPUs) sets the step to the one-GPU step
    divided by it. What an override adds goes to the part of the breakdown it stands for.

    With ``length_stats`` (:mod:`calc.lengths`) the micro-step runs at the data's mean padded
    length per sample (padded tokens cost compute), and the tokens counted per step, and so
    tokens/s and the hours of ``total_tokens``, are the real ones: ``padded / padding_ratio``."""
    n = req.num_gpus if num_gpus is None else num_gpus
    shard = req.sharding if sharding is None else Sharding(sharding)
    shape = request_shape(req)
    if shape is not None:
        req = at_mean_length(req, shape.mean_padded_length)
    c = counts(req, shard, trainable_params)
    eff = default_mfu(gpu.utilisation_class) if mfu is None else mfu
    kw: dict[str, Any] = dict(
        cpu_offload=req.cpu_offload,
        efficiency=eff,
        half_tokens=half_tokens,
        fp8=fp8_compute,
        fp8_efficiency=fp8_efficiency,
        # DeepSpeed ZeRO-2/3 reduce every micro-batch whatever the trainer's no_sync
        sync_each_micro_batch=st.reduces_each_micro_batch(req),
        paged_overflow_bytes=paged_overflow_bytes(memory, gpu),
    )
    rates = card_rates(gpu, n, network, gpus_per_node)
    g = shard_size(n, req.shard_group) if shard in st.ZERO_STAGES else n
    # the links of the groups inside the job: hybrid sharding's shard groups and the replicas
    # between them, sequence parallelism's all-to-all groups
    groups: dict[str, Any] = {}
    if g < n:  # hybrid sharding: collectives inside the group, an all-reduce between groups
        groups = dict(
            shard_size=g,
            group_link=comm.collective_link(gpu, g, network, gpus_per_node),
            replica_link=comm.replica_link(gpu, n, g, network, gpus_per_node),
        )
    if req.sequence_parallel > 1:
        groups["sp_link"] = comm.all_to_all_link(gpu, req.sequence_parallel, network, gpus_per_node)
    b = step_breakdown(c, rates, num_gpus=n, sharding=shard, **kw, **groups)
    if qlora_speed_factor is not None and req.method is Method.QLORA:
        without = b.step_seconds - b.dequantisation
        b = _replace(b, dequantisation=without / qlora_speed_factor - without)
    if scaling_efficiency is not None and n > 1:
        one = step_breakdown(c, card_rates(gpu, 1), num_gpus=1, sharding=Sharding.NONE, **kw)
        rest = b.step_seconds - b.exposed_communication
        b = _replace(
            b, exposed_communication=max(0.0, one.step_seconds / scaling_efficiency - rest)
        )
    sat = saturation(c.tokens_micro, c.hidden, rates.peak_flops / rates.clock, half_tokens)
    step_tokens = c.tokens_micro * c.accumulation
    ratio = None if shape is None else shape.padding_ratio
    return TimeEstimate(
        flops_per_token=c.flops,
        peak_flops_per_gpu=gpu.bf16_dense_flops,
        utilisation=eff,
        batch_saturation=sat,
        breakdown=b,
        tokens_per_step_per_gpu=step_tokens if ratio is None else round(step_tokens / ratio),
        num_gpus=n,
        total_tokens=total_tokens,
        link=rates.link,
        fp8_compute=fp8_compute and getattr(gpu, "fp8_dense_tflops", 0.0) > 0,
        padding_ratio=ratio,
        clock_factor=gpu.clock_factor,
        mfu_source="card_class" if mfu is None else "request",
    )


def eval_seconds(
    req: EstimateRequest,
    gpu: Gpu,
    eval_tokens: float,
    *,
    batch_size: int,
    num_gpus: int | None = None,
    sharding: Sharding | str | None = None,
    mfu: float | None = None,
    fp8_compute: bool = False,
    trainable_params: int | None = None,
    network: str = comm.CATALOGUE_NETWORK,
    gpus_per_node: int = comm.GPUS_PER_NODE,
) -> float:
    """Seconds of one evaluation over ``eval_tokens`` tokens of real data.

    HF Trainer's ``evaluation_loop`` (transformers 5.17 ``trainer.py``, ``prediction_step``
    under ``torch.no_grad()``) runs the forward pass alone: no backward, no recomputation, no
    optimizer step, no gradient reduction. Its micro-batches hold ``batch_size`` samples
    (``per_device_eval_batch_size``) at the training sequence length (with ``length_stats``, at
    the data's mean padded length of such a batch: padded tokens cost compute here too), spread
    over the GPUs data-parallel; each micro-step costs what the training step's forward costs
    (:attr:`StepBreakdown.forward_micro` of :func:`estimate_time` on that micro-batch: the same
    counts and rates, ZeRO-3's forward all-gathers included)."""
    step = estimate_time(
        req.replaced(micro_batch_size=batch_size, gradient_accumulation_steps=1),
        gpu,
        eval_tokens,
        num_gpus=num_gpus,
        sharding=sharding,
        mfu=mfu,
        fp8_compute=fp8_compute,
        trainable_params=trainable_params,
        network=network,
        gpus_per_node=gpus_per_node,
    )
    # one micro-step per optimizer step here: its real tokens are the step's
    micro_steps = eval_tokens / step.num_gpus / step.tokens_per_step_per_gpu
    return micro_steps * step.breakdown.forward_micro


def paged_overflow_bytes(memory: JsonObject | None, gpu: Gpu) -> float:
    """Bytes of paged (unified-memory) optimizer state that do not fit beside everything else on
    the card: the memory estimate's ``unified_memory_bytes`` beyond the card's free memory."""
    if not memory or not memory.get("unified_memory_bytes"):
        return 0.0
    free = gpu.memory_bytes - memory["device_total_bytes"]
    return float(min(memory["unified_memory_bytes"], max(0, memory["unified_memory_bytes"] - free)))


def _replace(b: StepBreakdown, **changes: float) -> StepBreakdown:
    return replace(b, **changes)


__all__ = [
    "BREAKDOWN_KEYS",
    "CAUSAL_ATTENTION_FRACTION",
    "Counts",
    "FlopsPerToken",
    "MATMUL_EFFICIENCY",
    "MATMUL_HALF_TOKENS",
    "TF32_TIME",
    "ZERO_GRAD_PASSES",
    "Rates",
    "StepBreakdown",
    "TimeEstimate",
    "attention_forward_flops_per_token",
    "batch_saturation",
    "block_linear_params",
    "card_rates",
    "counts",
    "default_mfu",
    "dequantisation_bytes_per_weight",
    "estimate_time",
    "eval_seconds",
    "matmul_params",
    "optimizer_step_bytes",
    "step_breakdown",
    "training_flops_per_token",
]
