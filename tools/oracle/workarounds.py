"""What the fake CPU run changes so that it allocates what a CUDA run allocates.

Each function is one named, tested workaround (tests/tools/test_oracle_workarounds.py):

- :func:`cuda_default_adamw`: torch picks AdamW's multi-tensor (foreach) path when every
  parameter is a CUDA tensor (``torch/optim/optimizer.py`` ``_default_to_fused_or_foreach``,
  torch 2.13); on CPU it picks the per-tensor loop, whose temporaries are one tensor at a
  time. The oracle asks for ``foreach=True`` (or ``fused=True`` when the request says so).
- :func:`adam_step_value`: Adam reads its step count as a Python number
  (``torch/optim/adam.py``, ``_get_value(step)`` -> ``step.item()``). FakeTensorMode keeps
  the value of a small tensor made by ``torch.tensor(0.0)`` as a tracked constant, so
  torch 2.13's AdamW still reads it; a fake count that is not a tracked constant cannot
  give ``.item()``. The patched reader returns the real count of the step being run for
  such a tensor (the bias corrections it feeds are scalars: no memory depends on them).
- :func:`real_causal_masks`: transformers 5.17 ``masking_utils._ignore_causal_mask_sdpa``
  refuses to drop the causal mask when ``is_tracing(padding_mask)``, which is true for a
  fake tensor, so a fake run would materialise a ``b x 1 x s x s`` mask and SDPA would
  take the masked path (no ``is_causal``, no ``enable_gqa``). On a GPU, with no padding,
  the mask is ``None``. The patch makes ``is_tracing`` ignore fakeness (compile/jit/fx
  detection is kept), so the masks are the ones a CUDA run builds; and
  ``find_packed_sequence_indices`` (which reads position ids to detect packed sequences)
  answers "not packed", what it finds on a GPU for the oracle's one-sequence rows.
- :func:`flash_like_sdpa`: on CUDA, ``F.scaled_dot_product_attention`` runs the flash or
  memory-efficient kernel, which saves ``q, k, v``, the output and an fp32 log-sum-exp of
  ``b x heads x s`` (O(s), ``aten._scaled_dot_product_flash_attention``), with k/v at
  kv-head size when ``enable_gqa`` is set. The CPU dispatcher may pick the math path
  instead, which saves the ``s x s`` probabilities and expands grouped k/v. The
  replacement is an autograd function with exactly the flash kernel's saved tensors and
  gradient shapes. The kernels' backward workspaces (flash-attn's fp32 ``dq`` accumulator,
  the expanded ``dk``/``dv`` under GQA) are not modelled: see ``LIMITS``. Where CUDA
  refuses both fused kernels, so does the replacement: k/v with fewer heads than q and no
  ``enable_gqa`` (Falcon's ``multi_query`` calls SDPA with its one k/v head; torch 2.13
  ``sdp_utils_cpp.h`` ``check_batch_size_and_num_heads_dense``: "both fused kernels require
  query, key and value to have the same num_heads") run the math path, as on CUDA:
  ``aten._scaled_dot_product_attention_math``, fp32 copies of q, k and v (16-bit inputs),
  broadcast products and the fp32 ``s x s`` probabilities saved.
- :func:`cuda_dropout`: ``F.dropout`` on a CUDA tensor runs the fused ``native_dropout``,
  which saves a boolean mask (1 byte per element); on CPU, ATen's ``dropout`` takes the
  composite path (``empty_like(input).bernoulli_()`` then ``input * noise``) and saves a
  mask in the input's dtype. The patch calls ``torch.native_dropout`` as CUDA does
  (``aten/src/ATen/native/Dropout.cpp`` ``is_fused_kernel_acceptable``, torch 2.13).
"""

from __future__ import annotations

from contextlib import contextmanager

import torch

LIMITS = (
    "kernel workspaces (cuBLAS, flash/efficient attention backward accumulators) are not allocated",
    "bitsandbytes 4-bit kernels are not run: QLoRA runs a model of bitsandbytes 0.49.2's Linear4bit "
    "(tools/oracle/qlora.py: its storages, statistics and dequantized buffers, not its kernels)",
    "fused / chunked losses of other frameworks (Liger, torchtune) are not run; TRL's fused LM "
    "head runs with its Triton tile kernels replaced by in-place no-ops (triton_logprob_tiles), "
    "and on the CPU scores every position through a view of the hidden states (a copy with "
    "micro-batches above 1) where CUDA gathers the labelled ones (hidden_states[mask], a copy)",
    "bf16-mixed uses CPU autocast's op lists, which differ from CUDA's in a few pointwise ops",
    "the caching allocator's rounding to 512 bytes and its cached blocks are not modelled (allocated bytes only)",
)


def cuda_default_adamw(params, lr: float = 1e-5, fused: bool = False) -> torch.optim.Optimizer:
    """AdamW as torch builds it for CUDA parameters: foreach unless fused is asked for."""
    if fused:
        return torch.optim.AdamW(params, lr=lr, fused=True)
    return torch.optim.AdamW(params, lr=lr, foreach=True)


@contextmanager
def adam_step_value(counter: dict):
    """Adam's ``_get_value`` returns ``counter["step"]`` for fake step tensors."""
    import torch.optim.adam as adam_mod
    from torch._subclasses.fake_tensor import FakeTensor

    original = adam_mod._get_value

    def value(x):
        if isinstance(x, FakeTensor):
            return float(counter["step"])
        return original(x)

    adam_mod._get_value = value
    try:
        yield
    finally:
        adam_mod._get_value = original


@contextmanager
def real_causal_masks():
    """transformers' mask helpers treat fake tensors as real ones (see module doc)."""
    import transformers.masking_utils as mu
    from transformers.utils import import_utils

    original = mu.is_tracing, mu.find_packed_sequence_indices

    def not_fake_tracing(tensor=None):
        return import_utils.is_tracing(None)

    def unpacked(position_ids):
        # the oracle's inputs are one sequence per row (position ids 0..s-1): a GPU run
        # finds no packing and returns None, which needs the values a fake tensor lacks
        return None

    mu.is_tracing, mu.find_packed_sequence_indices = not_fake_tracing, unpacked
    try:
        yield
    finally:
        mu.is_tracing, mu.find_packed_sequence_indices = original


class _FlashAttention(torch.autograd.Function):
    """Saved tensors of ``aten._scaled_dot_product_flash_attention``: q, k, v, out, lse."""

    @staticmethod
    def forward(ctx, q, k, v, mask):
        b, h, s, _ = q.shape
        out = torch.empty(q.shape[:-1] + (v.shape[-1],), dtype=q.dtype, device=q.device)
        lse = torch.empty((b, h, s), dtype=torch.float32, device=q.device)
        ctx.save_for_backward(q, k, v, out, lse, *(() if mask is None else (mask,)))
        ctx.has_mask = mask is not None
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v = ctx.saved_tensors[:3]
        return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v), None


def _autocast_dtype(t: torch.Tensor):
    """The 16-bit dtype autocast would cast SDPA's inputs to, or None outside autocast.
    The replacement is a Python function, which autocast's dispatch does not wrap, so it
    applies CUDA's rule itself (``scaled_dot_product_attention`` is in CUDA autocast's
    ``lower_precision_fp`` list, torch 2.13 ``autocast_mode.cpp``)."""
    device = t.device.type
    if not torch.is_autocast_enabled(device):
        return None
    dtype = torch.get_autocast_dtype(device)
    return dtype if t.dtype != dtype else None


def flash_sdpa(
    query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False
):
    """Drop-in for ``F.scaled_dot_product_attention`` with the flash kernel's memory.

    With ``enable_gqa`` grouped k/v stay at kv-head size, as CUDA flash attention keeps them.
    Without it, k/v with fewer heads than q are refused by the fused kernels and broadcast by
    the math path, which runs instead (see the module doc). A mask (sliding window, padding)
    is an input the memory-efficient kernel saves too."""
    dtype = _autocast_dtype(query)
    if dtype is not None:  # CUDA autocast runs SDPA in 16 bits (lower_precision_fp list)
        query, key, value = (t.to(dtype) for t in (query, key, value))
    if key.shape[-3] != query.shape[-3] and not enable_gqa:
        return torch.ops.aten._scaled_dot_product_attention_math(
            query, key, value, attn_mask, dropout_p, is_causal, scale=scale
        )[0]
    return _FlashAttention.apply(query, key, value, attn_mask)


@contextmanager
def flash_like_sdpa():
    """Route ``torch.nn.functional.scaled_dot_product_attention`` through :func:`flash_sdpa`
    (transformers' SDPA integration looks the function up on ``torch.nn.functional`` at
    call time)."""
    import torch.nn.functional as F

    original = F.scaled_dot_product_attention
    F.scaled_dot_product_attention = flash_sdpa
    try:
        yield
    finally:
        F.scaled_dot_product_attention = original


@contextmanager
def cuda_dropout():
    """``torch.nn.functional.dropout`` through ``native_dropout`` (boolean mask), as on CUDA."""
    import torch.nn.functional as F

    original = F.dropout

    def dropout(input, p=0.5, training=True, inplace=False):
        if not training or p == 0.0:
            return input
        return torch.native_dropout(input, p, True)[0]

    F.dropout = dropout
    try:
        yield
    finally:
        F.dropout = original


@contextmanager
def triton_logprob_tiles():
    """TRL 1.16.0's fused LM head (``trl/kernels/chunked_logprob.py``) as it runs on CUDA:
    ``_forward_kernel`` / ``_backward_kernel`` are Triton programs that fold each
    ``[TOKEN_CHUNK_SIZE, chunk_size]`` logits tile into the per-token fp32 statistics, and turn
    it into the logits' gradient, in place and in registers. Without Triton (this CPU) TRL runs
    ``_forward_tile`` / ``_backward_tile``, torch versions that materialise fp32 copies of the
    whole tile; here they allocate nothing, as the kernels do. Likewise ``_addmm_fp32``, which
    on CUDA with torch >= 2.8 is ``torch.addmm(acc, a, b, out_dtype=torch.float32, out=acc)``
    (no copies) and elsewhere casts both operands to fp32 first. Everything around them (the
    tile buffer, the statistics, the saved tensors, the fp32 gradient accumulators) is TRL's
    own Python code, run as is."""
    import trl.kernels.chunked_logprob as cl

    saved = cl._forward_tile, cl._backward_tile, cl._addmm_fp32
    cl._forward_tile = cl._backward_tile = cl._addmm_fp32 = lambda *args, **kwargs: None
    try:
        yield
    finally:
        cl._forward_tile, cl._backward_tile, cl._addmm_fp32 = saved
