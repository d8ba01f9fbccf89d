"""Boolean attention masks as CUDA's SDPA holds them (applied to the setups that hand SDPA one).

On CUDA, ATen's ``scaled_dot_product_attention`` (``aten/src/ATen/native/transformers/
attention.cpp``) first turns a boolean mask into an additive one of the query's dtype
(``convert_boolean_attn_mask``: ``at::where(mask, 0, -inf)``), a new tensor on every call, and
only then picks a kernel: flash attention takes no mask, so the memory-efficient (or cuDNN)
kernel runs and saves that additive mask for its backward. The oracle's flash-like SDPA
(``workarounds.flash_sdpa``) saves the mask it is given, so here it is given the converted one.
transformers 5.17 hands SDPA boolean masks where DeepSeek sparse attention folds the indexer's
top-k selection into one (``DeepseekV32Attention.forward``, ``GlmMoeDsaAttention``) and where a
sliding window the keys reach keeps ``create_sliding_window_causal_mask``'s mask
(``masking_utils._ignore_causal_mask_sdpa``). Only those setups run this module (its source is
left out of the other setups' cache keys).
"""

from __future__ import annotations

from contextlib import contextmanager

import torch


def additive_mask(mask: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """``convert_boolean_attn_mask``: a boolean mask as an additive one of ``dtype``."""
    if mask is None or mask.dtype != torch.bool:
        return mask
    zero = torch.zeros((), dtype=dtype)
    return torch.where(mask, zero, torch.tensor(float("-inf"), dtype=dtype))


@contextmanager
def sdpa_boolean_masks_converted():
    """``workarounds.flash_sdpa`` with a boolean mask converted first (see module doc); the
    dtype is the query's after autocast's cast, as in ATen."""
    from . import workarounds

    original = workarounds.flash_sdpa

    def converted(query, key, value, attn_mask=None, *args, **kwargs):
        dtype = workarounds._autocast_dtype(query) or query.dtype
        return original(query, key, value, additive_mask(attn_mask, dtype), *args, **kwargs)

    workarounds.flash_sdpa = converted
    try:
        yield
    finally:
        workarounds.flash_sdpa = original
