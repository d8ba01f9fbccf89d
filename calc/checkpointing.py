"""Activation checkpointing by granularity: which decoder blocks are wrapped, what a wrapped
block keeps for backward, and what the backward runs again.

The request key ``checkpointing_granularity`` (read with ``gradient_checkpointing`` on) names one
of three ways the libraries wrap the decoder blocks:

- ``full``: every block runs under ``torch.utils.checkpoint`` and keeps only its input; its
  backward first runs its whole forward again (transformers ``gradient_checkpointing_enable``,
  torchtune ``enable_activation_checkpointing``, torchtitan ``activation_checkpoint.mode =
  "full"``). calc's meaning of ``gradient_checkpointing`` alone.
- ``every-n``: torchtitan ``mode = "selective"`` with an integer ``selective_ac_option`` N
  (``checkpointing_every``). torchtitan 04133643 (April 2024)
  ``torchtitan/parallelisms/parallelize_llama.py`` ``checkpoint_wrapper`` and d4c86e37 (January
  2025) ``_apply_ac_to_transformer_block`` keep a counter over the blocks, raised before the
  test, and wrap a block whole when ``count % N == 0``: blocks N, 2N, ... (1-based), that is
  ``floor(L / N)`` of the ``L`` blocks; the others are not wrapped and keep every tensor their
  forward saves. torchtune's ``training/_activation_checkpointing.py``
  (``apply_selective_activation_checkpointing``) copies that rule.
- ``selective-op``: torchtitan ``selective_ac_option = "op"`` (the same two commits; the
  default of its ``llama3_8b.toml`` then): every block is wrapped with a selective-checkpoint
  policy (``torch.utils.checkpoint.create_selective_checkpoint_contexts``) that keeps the
  outputs of the ops in ``_save_list`` (``aten.mm``, ``aten._scaled_dot_product_flash_attention``,
  ``aten._scaled_dot_product_efficient_attention``, ``_c10d_functional.reduce_scatter_tensor``;
  ``aten.abs`` and ``aten.max`` from 2025) and recomputes every other op, except every second
  ``aten.mm`` of a block, which is recomputed too (``meta[mm_count_key] % 2 == 0``; the count
  starts again in each block's call, ``selective_checkpointing_context_fn`` builds a new
  ``meta``). A linear without bias on a 3-D input dispatches ``aten.mm``; one with a bias
  dispatches ``aten.addmm`` (torch ``at::linear``'s ``_flatten_nd_linear``), which is not in
  that list: it is recomputed and not counted. peft's LoRA ``lora_A`` and ``lora_B`` are
  bias-free ``nn.Linear`` run after their base layer (peft 0.21.0 ``tuners/lora/layer.py``
  ``Linear.forward``): two more ``aten.mm`` each. Attention is kept only where SDPA runs its
  flash or memory-efficient kernel (cuDNN, the math backend, eager attention and the
  flash-attn package are recomputed). Newer torchtitan (b5bcd76c, August 2026,
  ``torchtitan/distributed/activation_checkpoint.py`` ``SelectiveAC``) keeps the same
  every-second-matmul rule over a wider list (torch's compute-intensive ops, ``aten.linear``,
  cuDNN attention); calc counts the 2024-2025 list, the version of the published runs.

Megatron-LM's ``recompute_granularity = "selective"`` (core attention only) is not one of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from .arch import ModelArch
from .errors import InputError


class Granularity(str, Enum):
    FULL = "full"
    SELECTIVE_OP = "selective-op"
    EVERY_N = "every-n"


FIELD = "checkpointing_granularity"
EVERY_FIELD = "checkpointing_every"


def wrapped_blocks(layers: int, granularity: Granularity, every: int | None) -> int:
    """Decoder blocks wrapped in a checkpoint: all of them, or ``floor(L / N)`` for ``every-n``
    (torchtitan's counter wraps blocks N, 2N, ...)."""
    if granularity is Granularity.EVERY_N:
        assert every is not None
        return layers // every
    return layers


def block_wrapped(index: int, granularity: Granularity, every: int | None) -> bool:
    """Whether block ``index`` (0-based, forward order) is wrapped."""
    if granularity is Granularity.EVERY_N:
        assert every is not None
        return (index + 1) % every == 0
    return True


@dataclass(frozen=True)
class Matmul:
    """One ``aten.mm`` / ``aten.addmm`` of a block's forward under the per-op policy: the
    linear (or ``<name>.lora_A`` / ``.lora_B``), its widths, and whether its output is kept."""

    name: str
    d_in: int
    d_out: int
    kept: bool


def supports_selective_op(arch: ModelArch) -> bool:
    """The per-op policy is counted on plain dense blocks: attention then MLP linears, one copy
    each, as every dense decoder's ``nn.Linear`` list runs them. Experts, routers, latent
    attention, sparse-attention indexers, hybrid mixers and hyper-connections run matmuls
    whose order and dispatch (grouped or batched products) calc does not list."""
    return (
        not arch.hybrid
        and arch.num_experts == 0
        and arch.kv_lora_rank == 0
        and arch.q_lora_rank == 0
        and arch.indexer_layers == 0
        and arch.hyper_connections == 0
        and not arch.block_counts
        and all(
            l.role in ("attn", "mlp")
            and l.kind == "linear"
            and l.count == 1
            and l.active == 1
            and not l.block_kind
            for l in arch.linears
        )
    )


def block_matmuls(arch: ModelArch, adapted: frozenset[str], rank: int) -> tuple[Matmul, ...]:
    """A block's matmuls in forward order under the per-op policy: each linear's own product,
    then its adapter's ``lora_A`` and ``lora_B`` when it carries one (``adapted``: linear
    names), each ``aten.mm`` counted and kept when its count is odd; a biased linear's
    ``aten.addmm`` is recomputed and not counted."""
    out: list[Matmul] = []
    count = 0

    def add(name: str, d_in: int, d_out: int, bias: bool) -> None:
        nonlocal count
        if bias:
            out.append(Matmul(name, d_in, d_out, False))
            return
        count += 1
        out.append(Matmul(name, d_in, d_out, count % 2 == 1))

    for lin in arch.linears:
        add(lin.name, lin.d_in, lin.d_out, lin.bias)
        if lin.name in adapted:
            add(lin.name + ".lora_A", lin.d_in, rank, False)
            add(lin.name + ".lora_B", rank, lin.d_out, False)
    return tuple(out)


def check(granularity: Granularity, every: int | None, checkpointing: bool) -> None:
    """Coded errors for a granularity the request cannot mean: another than ``full`` without
    checkpointing, ``every-n`` without ``checkpointing_every``."""
    if granularity is Granularity.FULL:
        return
    if not checkpointing:
        raise InputError(
            "checkpointing_granularity_without_checkpointing",
            FIELD,
            granularity.value,
            extra={"gradient_checkpointing": False},
        )
    if granularity is Granularity.EVERY_N and every is None:
        raise InputError("missing_field", EVERY_FIELD, None, extra={"integer": True, "minimum": 1})


def selective_op_counted(arch: ModelArch, method: str) -> bool:
    """The per-op policy is counted: dense blocks :func:`supports_selective_op` lists, full
    fine-tuning or LoRA. QLoRA's 4-bit matmuls run inside bitsandbytes' autograd function with
    their own dequantisation, which calc does not split by op; there, and on other blocks, the
    request is counted as ``full`` (an upper bound on memory and time) and a warning says so."""
    return method != "qlora" and supports_selective_op(arch)


__all__ = [
    "EVERY_FIELD",
    "FIELD",
    "Granularity",
    "Matmul",
    "block_matmuls",
    "block_wrapped",
    "check",
    "selective_op_counted",
    "supports_selective_op",
    "wrapped_blocks",
]
