"""Attention as PyTorch dispatches it: which kernel ``torch.nn.functional.
scaled_dot_product_attention`` (SDPA) runs for a training step, and what it costs.

The dispatch follows ``aten/src/ATen/native/transformers/cuda/sdp_utils.cpp`` (pytorch at
commit 001f694a, read for the torch 2.13 the oracle pins, not checked against the v2.13.0 tag;
CUDA build): ``select_sdp_backend`` walks
``priority_order`` (flash, memory-efficient, math; cuDNN first where
``check_prefer_cudnn_attention`` holds: sm90 / sm100 / sm103 with cuDNN > 9.15) and returns the
first backend whose ``can_use_*_attention`` filters all pass:

- flash (``can_use_flash_attention``): ``check_for_attn_mask`` (no mask tensor),
  ``check_head_dim_size_flash`` (head_dim <= 256), ``check_flash_attention_hardware_support``
  (sm80 to sm121), ``check_requires_grad_and_head_dim_gt192_constraints_on_sm86_89_or_120``
  (training on sm86-89 / sm120-121: head_dim <= 192, or > 224 without dropout),
  ``check_dtypes_flash_attention`` (fp16 / bf16); grouped k/v (``enable_gqa``) allowed.
- cuDNN (``can_use_cudnn_attention``): ``check_dtypes_low_precision`` (fp16 / bf16 on sm80+),
  ``check_cudnn_hardware_support`` (sm80 to sm121), ``check_cudnn_tensor_shapes`` (head_dim a
  multiple of 8, <= 128; <= 256 on sm90 / sm10x with a recent cuDNN), ``check_cudnn_dropout``
  (p a multiple of 1/16); a mask tensor is accepted.
- memory-efficient (``can_use_mem_efficient_attention``): ``check_mem_efficient_hardware_support``
  (sm50 to sm121), ``check_head_dim_size_mem_efficient`` (head_dim a multiple of
  ``minimum_gemm_alignment``: 8 for fp16 / bf16 on tensor cores, 4 for fp32 on sm80+, 1 for fp32
  below sm80), dtypes fp16 / bf16 / fp32 on sm80+ and fp16 / fp32 below; a mask tensor and
  grouped k/v are accepted.
- math: everything else (the composite ``_scaled_dot_product_attention_math``).

Value heads narrower than the query/key heads (multi-head latent attention: DeepSeek V3 and its
relatives, q/k 192 and v 128): flash wants q, k and v of one last dimension
(``check_head_dim_size_flash``); memory-efficient wants q and k equal and each aligned
(``check_head_dim_size_mem_efficient``); cuDNN takes 192 / 128 on sm90 / sm10x, where its
backward takes (at most 128, at most 128), (192, 128) or (256, 256) and nothing else
(``check_cudnn_tensor_shapes``, ``check_cudnn_d256_bprop_head_dim``). So MLA under SDPA runs
cuDNN on a Hopper or Blackwell card and memory-efficient on an A100.

What each costs: the fused kernels (flash, memory-efficient, cuDNN) given ``is_causal=True`` skip
the key blocks above the diagonal, about half of the score and value matmuls (FlashAttention-2,
Dao 2023, arXiv:2307.08691, sec. 3.1); given a mask tensor they compute every block and apply the
mask, the whole square. The math backend (and transformers' eager attention) always computes the
whole square and materialises the scores. Matmul rate: fp16 / bf16 run on tensor cores; fp32
runs on the CUDA cores (``torch.backends.cuda.matmul.allow_tf32`` defaults to False), except the
memory-efficient kernel's sm80+ path, which uses TF32 tensor cores (``use_tensor_cores`` in the
same file)."""

from __future__ import annotations

from dataclasses import dataclass

FLASH = "flash"
EFFICIENT = "efficient"
CUDNN = "cudnn"
MATH = "math"
EAGER = "eager"

BACKENDS = (FLASH, EFFICIENT, CUDNN, MATH, EAGER)

MASK_CAUSAL = "causal"
MASK_PADDING = "padding"
MASKS = (MASK_CAUSAL, MASK_PADDING)

CAUSAL_SKIP_FRACTION = 0.5
"""Share of the score/value matmuls a fused kernel computes under ``is_causal``: the blocks on
and below the diagonal, about half."""

_ARCH_CAPABILITY = {
    "turing": (7, 5),
    "ampere": (8, 6),
    "ada": (8, 9),
    "hopper": (9, 0),
    "blackwell": (10, 0),
}
"""Compute capability of each catalogue architecture (CUDA programming guide, "Compute
Capabilities"): GA10x cards are sm86 (A100 is sm80, listed apart), Ada sm89, Hopper sm90,
datacenter Blackwell sm100 and the GeForce / RTX PRO Blackwell cards sm120."""

_SM80_CARDS = ("a100",)
_SM120_CARDS = ("rtx-5", "rtx-pro")


def compute_capability(architecture: str, gpu_id: str = "") -> tuple[int, int] | None:
    """(major, minor) of a catalogue card; None for a card without CUDA (AMD)."""
    if architecture == "ampere" and gpu_id.startswith(_SM80_CARDS):
        return (8, 0)
    if architecture == "blackwell" and gpu_id.startswith(_SM120_CARDS):
        return (12, 0)
    return _ARCH_CAPABILITY.get(architecture)


def _cudnn_first(cc: tuple[int, int]) -> bool:
    # check_prefer_cudnn_attention (CUDA 12 wheels): major 9 or 10 with minor 0 or 3
    return cc[0] in (9, 10) and cc[1] in (0, 3)


def _alignment(dtype: str, cc: tuple[int, int]) -> int:
    # minimum_gemm_alignment: tensor cores on sm80+ (any dtype) and on sm7x for fp16
    half = dtype in ("bf16", "fp16")
    tensor_cores = cc[0] >= 8 or (cc[0] >= 7 and half)
    out = 4 if cc[0] >= 8 else 1
    if tensor_cores:
        out = max(out, 128 // (16 if half else 32))
    return out


def _can_flash(
    dtype: str,
    mask: str,
    head_dim: int,
    dropout: float,
    cc: tuple[int, int],
    training: bool,
    value_dim: int = 0,
) -> bool:
    if mask != MASK_CAUSAL or head_dim > 256 or dtype not in ("bf16", "fp16"):
        return False
    if value_dim and value_dim != head_dim:
        return False  # check_head_dim_size_flash: q, k and v of one last dimension
    if not (8, 0) <= cc <= (12, 1):
        return False
    if training and ((8, 6) <= cc <= (8, 9) or (12, 0) <= cc <= (12, 1)):
        return head_dim <= 192 or (dropout == 0.0 and head_dim > 224)
    return True


CUDNN_BACKWARD_HEAD_DIMS = ((192, 128), (256, 256))
"""(q/k, v) head widths above 128 whose backward cuDNN runs on sm90 / sm10x
(``check_cudnn_d256_bprop_head_dim``; widths up to 128 each always pass)."""


def _can_cudnn(
    dtype: str, head_dim: int, dropout: float, cc: tuple[int, int], value_dim: int = 0
) -> bool:
    if dtype not in ("bf16", "fp16") or not (8, 0) <= cc <= (12, 1):
        return False
    v = value_dim or head_dim
    if cc[0] in (9, 10):
        # training: the backward's combinations (check_cudnn_d256_bprop_head_dim)
        shapes = (head_dim <= 128 and v <= 128) or (head_dim, v) in CUDNN_BACKWARD_HEAD_DIMS
    else:
        shapes = head_dim <= 128 and v <= 128
    return shapes and head_dim % 8 == 0 and v % 8 == 0 and (dropout * 16).is_integer()


def _can_efficient(dtype: str, head_dim: int, cc: tuple[int, int], value_dim: int = 0) -> bool:
    if not (5, 0) <= cc <= (12, 1):
        return False
    dtypes = ("fp16", "bf16", "fp32") if cc[0] >= 8 else ("fp16", "fp32")
    align = _alignment(dtype, cc)
    return dtype in dtypes and head_dim % align == 0 and (value_dim or head_dim) % align == 0


def sdpa_backend(
    *,
    dtype: str,
    mask: str,
    head_dim: int,
    capability: tuple[int, int],
    dropout: float = 0.0,
    grouped_kv: bool = False,
    training: bool = True,
    cudnn_first: bool = True,
    value_head_dim: int = 0,
) -> str:
    """The SDPA backend torch 2.13 (CUDA) runs for q/k/v of ``dtype`` (``bf16``, ``fp16``,
    ``fp32``), ``mask`` (``causal``: ``is_causal=True``, no tensor; ``padding``: an explicit mask
    tensor), ``head_dim``, attention ``dropout``, on a card of compute ``capability``.
    ``grouped_kv`` (``enable_gqa=True``) changes nothing on CUDA: flash, cuDNN and
    memory-efficient all accept it (``check_batch_size_and_num_heads_dense<supports_gqa=true>``)
    and math expands k/v itself. ``cudnn_first`` False is the order of torch 2.5.1 to 2.10
    (pytorch PR #138522, cherry-picked onto release/2.5: cuDNN after math, so never reached
    here); torch 2.4 and before had cuDNN off unless ``TORCH_CUDNN_SDPA_ENABLED`` was set.
    ``value_head_dim``: v's head width where it differs from q's and k's (0: the same)."""
    del grouped_kv
    v = value_head_dim
    order = [FLASH, EFFICIENT, MATH]
    if cudnn_first and _cudnn_first(capability):
        order.insert(0, CUDNN)
    for backend in order:
        if backend == CUDNN and _can_cudnn(dtype, head_dim, dropout, capability, v):
            return CUDNN
        if backend == FLASH and _can_flash(dtype, mask, head_dim, dropout, capability, training, v):
            return FLASH
        if backend == EFFICIENT and _can_efficient(dtype, head_dim, capability, v):
            return EFFICIENT
    return MATH


def computed_fraction(backend: str, mask: str) -> float:
    """Share of the full L x L score and value matmuls ``backend`` computes under ``mask``."""
    if backend in (MATH, EAGER) or mask != MASK_CAUSAL:
        return 1.0
    return CAUSAL_SKIP_FRACTION


def request_fraction(attention: str, mask: str) -> float:
    """The computed share for a request's ``attention`` implementation and ``attention_mask``,
    on any CUDA card the catalogue holds with 16-bit compute: ``eager`` computes the whole
    square; ``flash`` (transformers' ``flash_attention_2``) unpads a padded batch
    (``_upad_input``, ``flash_attn_varlen_func`` with ``causal=True``) and keeps the causal skip
    whatever the mask; ``sdpa`` skips under ``causal`` (flash, cuDNN or memory-efficient) and
    computes the whole square under ``padding`` (cuDNN or memory-efficient with the mask)."""
    if attention == EAGER:
        return 1.0
    if attention == FLASH:
        return CAUSAL_SKIP_FRACTION
    return computed_fraction(EFFICIENT, mask)


EFFICIENT_K_CHUNK = 32
"""Width of the head-dim slices the memory-efficient kernel's matmuls reduce over (cutlass's
``GemmType::ThreadK`` on sm80: ``GemmShape<..., ThreadK>`` in ``MM0`` of ``kernel_forward.h`` and
in ``MatmulQK`` / ``MatmulDOIVJ`` of ``kernel_backward.h``)."""


def _padded(width: int, tile: int) -> int:
    return -(-width // tile) * tile


def efficient_tiles(head_dim: int) -> tuple[int, tuple[int, int]]:
    """(forward value tile, (backward ``kBlockSizeI``, ``kBlockSizeJ``)) of the memory-efficient
    kernels PyTorch launches for ``head_dim`` in 16 bits on sm80 and later. Read in pytorch
    ``aten/src/ATen/native/transformers/cuda/mem_eff_attention/`` (``kernel_forward.h`` at commit
    01b4eaef, ``kernels/cutlassF.h``, ``kernels/cutlassB.h`` at commit 0c762b3a): the launcher takes
    the first kernel of the list whose ``kMaxK`` covers the head dim. Forward (``cutlassF``):
    ``64x64_rf`` (kMaxK 64), then ``64x128_rf`` (kMaxK 128) and ``32x128_gmem`` (any), whose
    ``MM1`` (``attn @ V``) has ``ThreadblockShape<kQueriesPerBlock, kKeysPerBlock, ThreadK>``: the
    value columns run in tiles of ``kKeysPerBlock``, 64 or 128. Backward (``cutlassB``): ``64x64``
    for kMaxK 32 / 64; ``128x128_k128`` for kMaxK 128 (the ``128x64_k96`` kernel is built for
    sm86 / sm89 only, and its tiles pad a head dim of 96 to 128 as well); ``128x64_k65536``
    above; ``MatmulGradV`` and ``MatmulGradK`` tile the head dim by ``kBlockSizeI``,
    ``MatmulGradQ`` by ``kBlockSizeJ``."""
    if head_dim <= 64:
        return 64, (64, 64)
    if head_dim <= 128:
        return 128, (128, 128)
    return 128, (128, 64)


def efficient_padded_share(head_dim: int, recompute: bool = False) -> float:
    """Multiply-adds the memory-efficient kernel runs over those of the head dim itself, forward
    (``Q K^T`` over the head dim in :data:`EFFICIENT_K_CHUNK` slices, ``attn @ V`` over value
    tiles) and backward (``Q K^T`` again and ``dO V^T`` in slices; ``dV``, ``dQ``, ``dK`` over
    their tiles, :func:`efficient_tiles`), weighted as the step counts attention FLOPs: one
    forward (two with a recomputed forward) and a backward of twice the forward. 1.0 for head
    dims the tiles divide (64, 128, 256); 1.19 for Phi-3's 96, whose value tiles run 128 wide."""
    value_tile, (block_i, block_j) = efficient_tiles(head_dim)
    sliced = _padded(head_dim, EFFICIENT_K_CHUNK)
    forward = (sliced + _padded(head_dim, value_tile)) / (2.0 * head_dim)
    backward = (2 * sliced + 2 * _padded(head_dim, block_i) + _padded(head_dim, block_j)) / (
        5.0 * head_dim
    )
    forwards = 2.0 if recompute else 1.0
    return (forwards * forward + 2.0 * backward) / (forwards + 2.0)


@dataclass(frozen=True)
class AttentionKernel:
    """What one layer's attention runs and costs per token (forward, score and value matmuls)."""

    backend: str
    computed_fraction: float
    tensor_cores: bool
    scores_materialised: bool

    def forward_flops_per_token(self, seq_len: int, num_heads: int, head_dim: int) -> float:
        """``4 * seq_len * heads * head_dim`` (QK^T and AV, 2 FLOPs per multiply-add) for the
        full square, times the computed share."""
        return 4.0 * seq_len * num_heads * head_dim * self.computed_fraction

    def score_bytes_per_token(self, seq_len: int, num_heads: int, dtype_bytes: int) -> float:
        """Bytes the math backend moves for the materialised scores, forward, per token: the
        scores written by the QK^T matmul, read and written by the masked softmax, read by the
        AV matmul (4 passes over ``heads * seq_len`` elements); 0 for the fused kernels."""
        if not self.scores_materialised:
            return 0.0
        return 4.0 * num_heads * seq_len * dtype_bytes


def attention_kernel(
    *,
    attention: str,
    dtype: str,
    mask: str,
    head_dim: int,
    capability: tuple[int, int],
    dropout: float = 0.0,
    grouped_kv: bool = False,
    cudnn_first: bool = True,
    value_head_dim: int = 0,
) -> AttentionKernel:
    """The kernel a training step's attention runs (``attention``: ``sdpa``, ``eager``,
    ``flash``) and what it costs."""
    if attention == EAGER:
        backend = EAGER
    elif attention == FLASH:
        backend = FLASH
    else:
        backend = sdpa_backend(
            dtype=dtype,
            mask=mask,
            head_dim=head_dim,
            capability=capability,
            dropout=dropout,
            grouped_kv=grouped_kv,
            cudnn_first=cudnn_first,
            value_head_dim=value_head_dim,
        )
    # transformers' flash_attention_2 unpads a padded batch: the causal skip holds either way
    fraction = (
        request_fraction(FLASH, mask) if attention == FLASH else computed_fraction(backend, mask)
    )
    half = dtype in ("bf16", "fp16")
    tensor_cores = half or (backend == EFFICIENT and capability[0] >= 8)
    return AttentionKernel(
        backend=backend,
        computed_fraction=fraction,
        tensor_cores=tensor_cores,
        scores_materialised=backend in (MATH, EAGER),
    )


__all__ = [
    "BACKENDS",
    "CAUSAL_SKIP_FRACTION",
    "CUDNN_BACKWARD_HEAD_DIMS",
    "EFFICIENT_K_CHUNK",
    "MASKS",
    "AttentionKernel",
    "attention_kernel",
    "compute_capability",
    "computed_fraction",
    "efficient_padded_share",
    "efficient_tiles",
    "request_fraction",
    "sdpa_backend",
]
