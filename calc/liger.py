"""Liger-Kernel (``liger_kernel``): which models it patches and how its fused linear
cross-entropy cuts the logits into chunks. Read from liger-kernel v0.8.2 (000be609, 2026-08-18)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .arch import ModelArch
    from .request import EstimateRequest

FAMILIES = frozenset(
    {
        "llama",
        "mistral",
        "mixtral",
        "gemma",
        "gemma2",
        "gemma3_text",
        "qwen2",
        "qwen3",
        "qwen3_moe",
        "phi3",
        "olmo3",
        "smollm3",
    }
)
"""Families whose Liger modules calc counts: ``model_type`` keys of
``MODEL_TYPE_TO_APPLY_LIGER_FN`` (``src/liger_kernel/transformers/monkey_patch.py``, the table
``AutoLigerKernelForCausalLM`` and the Trainer's ``use_liger_kernel`` read) whose
``apply_liger_kernel_to_<family>`` replaces, by default, every RMSNorm, the dense MLP's gated
activation (``swiglu`` or ``geglu``) and the loss (``fused_linear_cross_entropy``), on the
decoder blocks calc counts as transformers' Llama-like ones. Left out, counted as
transformers' own modules (warning ``liger_kernel_not_applied``): families whose function
leaves the MLP (``gpt_oss``, ``deepseek_v4``: ``swiglu=False``) or the loss (``granite``:
``fused_linear_cross_entropy=False``) alone, and the hybrid and latent-attention stacks
(``qwen3_next``, ``qwen3_5*``, ``falcon_h1``, ``gemma4_text``, ``llama4``), whose patched
modules calc has not read. Routed experts keep transformers' count in every family
(:func:`calc.activations.glu_kernel_applies`); q/k norms too."""


def patches(family: str) -> bool:
    """Whether Liger-Kernel replaces this family's RMSNorm and MLP."""
    return family in FAMILIES


def applies(req: EstimateRequest) -> bool:
    """Whether the request's blocks run Liger's modules: ``liger_kernel`` on a family Liger
    patches (:data:`FAMILIES`). Its loss is the fused linear cross-entropy where the request
    also says ``chunked_loss`` (the importers set both)."""
    return req.liger_kernel and patches(req.model.family)


def gated_unit_form(arch: ModelArch) -> bool:
    """Whether the family's gated MLP unit is of the plain two-input form Liger's gated
    activation replaces (``LigerSwiGLUMLP``, ``LigerGEGLUMLP``, ``LigerPhi3SwiGLUMLP``): a gated
    MLP whose gate saves no more than ``act(gate) * up`` does (a family with
    ``arch.extra["glu_saved_widths"]`` has no Liger module). Memory
    (:func:`calc.activations.glu_kernel_applies`) and time read it alike."""
    return arch.mlp_gated and "glu_saved_widths" not in arch.extra


def flce_chunk_tokens(tokens: int, vocab_size: int, hidden_size: int) -> int:
    """Tokens per chunk of Liger's fused linear cross-entropy
    (``ops/fused_linear_cross_entropy.py`` ``fused_linear_cross_entropy_forward``):
    ``inc_factor = ceil(V / H)``, ``chunk_size = next_power_of_2(ceil(BT / inc_factor))``,
    so that one chunk's logits are about as large as the hidden states; never more than
    the tokens there are."""
    inc = -(-vocab_size // hidden_size)
    want = -(-tokens // inc)
    chunk = 1 << max(0, (want - 1).bit_length())
    return min(chunk, tokens) if tokens > 0 else 0


def flce_chunks(tokens: int, vocab_size: int, hidden_size: int) -> int:
    """How many chunks the fused linear cross-entropy runs for ``tokens`` tokens
    (``num_chunks = cdiv(BT, chunk_size)``, same function)."""
    chunk = flce_chunk_tokens(tokens, vocab_size, hidden_size)
    return -(-tokens // chunk) if chunk else 0
