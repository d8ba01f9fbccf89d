"""FLOPs of one training token: forward, backward of what needs gradients, recomputation.

Counted from the shapes in :class:`calc.arch.ModelArch` (2 FLOPs per multiply-add), with the
linears that FP8 training can cover kept apart from the rest (attention scores, lm_head,
LoRA adapters), so each part can be divided by the rate that runs it (:mod:`calc.timing`).
"""

from __future__ import annotations

from dataclasses import dataclass

from .activations import FLA_CHUNK
from .arch import ModelArch
from .attention import request_fraction
from .attention_windows import band_fraction, sdpa_mask_tensor, window_of
from .checkpointing import Matmul
from .jsontypes import JsonObject


def block_linear_params(arch: ModelArch) -> int:
    """Weights of the decoder blocks' linears one token multiplies through (MoE: the router
    plus the top-k experts, as ``params_active`` counts them, and every expert where the family
    runs them all: :func:`dense_expert_params`)."""
    return (
        arch.params_active - arch.embedding_params - arch.lm_head_params + dense_expert_params(arch)
    )


def dense_expert_params(arch: ModelArch) -> int:
    """The routed experts' weights beyond the top-k that a token still multiplies through where
    the family runs every expert on every token (``arch.extra["experts_run_densely"]``: Llama 4
    under transformers, whose ``Llama4TextExperts.forward`` runs ``bmm`` over all experts on
    copies scaled by zero router scores, ``modeling_llama4.py`` lines 79-82 and 169-171). The
    published "active" count leaves them out; the kernels do not."""
    if not arch.extra.get("experts_run_densely"):
        return 0
    return sum(
        arch.blocks_of(lin) * (lin.count - lin.active) * lin.weight_params
        for lin in arch.linears
        if lin.role == "mlp" and lin.count > 1
    )


def matmul_params(arch: ModelArch) -> int:
    """Parameters one token multiplies through: the active block linears (MoE: top-k experts),
    norms and the lm_head matmul (computed even when it shares the embedding matrix). The
    embedding lookup is a gather, not a matmul, so it costs no FLOPs (Kaplan et al. 2020,
    arXiv:2001.08361, sec. 2.1 counts non-embedding parameters for the same reason)."""
    return block_linear_params(arch) + arch.vocab_size * arch.hidden_size


CAUSAL_ATTENTION_FRACTION = {"flash": 0.5, "sdpa": 0.5, "eager": 1.0}
"""Share of the score/value matmuls actually computed. Fused causal kernels (FlashAttention-2,
Dao 2023, arXiv:2307.08691, sec. 3.1; PyTorch SDPA dispatches to them) skip the blocks above
the diagonal, about half; eager attention computes the full matrix and masks it."""


@dataclass(frozen=True)
class AttentionPart:
    """Blocks whose attention runs one kernel on one shape: their count, the q/k head width,
    what SDPA receives (``causal``: no mask tensor; ``padding``: a mask tensor, whatever its
    pattern), the keys per query the kernel's length is read at (a windowed flash band: the
    window), the share of the full square computed, and their forward score and value FLOPs
    per token."""

    layers: int
    head_dim: int
    mask: str
    keys: float
    fraction: float
    flops: float


def attention_parts(
    arch: ModelArch,
    seq_len: int,
    attention: str = "eager",
    attention_mask: str = "causal",
    span: float | None = None,
) -> tuple[AttentionPart, ...]:
    """The score and value matmuls of self-attention, forward, per token, by kind of block:
    ``4 * layers * keys * heads * head_dim`` (2 FLOPs per multiply-add, QK^T and AV) for the
    full square (PaLM's MFU count, Chowdhery et al. 2022, arXiv:2204.02311, app. B), times the
    share computed: :data:`CAUSAL_ATTENTION_FRACTION` for ``attention``; the whole square where
    SDPA gets a mask tensor (``attention_mask="padding"``, :func:`calc.attention.request_fraction`,
    or a sliding window the keys reach, :mod:`calc.attention_windows`); a windowed flash band
    (:func:`calc.attention_windows.band_fraction`). A hybrid stack counts its attention blocks
    only; Gemma 4 gives each kind of block its own head width. ``span`` replaces ``seq_len`` as
    the keys each query meets where attention stays within each packed sample
    (:func:`calc.lengths.attention_span`: ``sum L_i^2 / sum L_i`` over the samples of a row)."""
    keys = float(seq_len) if span is None else span
    layers = arch.num_layers
    if arch.hybrid and arch.block_counts:  # a hybrid stack: its attention blocks only
        layers = arch.kind_share("full_attention")[0]
    mask = attention_mask
    if arch.hyper_connections or arch.sparse_attention:
        # DeepSeek-V4 (eager only) meets its compressed entries under an explicit mask; the
        # sparse indexer's selection reaches SDPA as a mask tensor: the whole square either way
        mask = "padding"
    if arch.hyper_connections:
        # DeepSeek-V4 (transformers 5.17 DeepseekV4Attention, eager only): every query scores
        # the s keys and its block's s / m compressed entries
        full = 4.0 * arch.num_heads * arch.head_dim * _dsv4_keys(arch, keys)
        return (_part(layers, arch.head_dim, mask, keys, attention, full, None, seq_len),)
    if arch.mla:
        # multi-head latent attention: QK^T over the q/k head width (qk_nope + qk_rope), AV over
        # the value head width (transformers 5.17 DeepseekV3Attention: ``qk_head_dim``,
        # ``v_head_dim``), ``2 * layers * s * heads * (qk + v)``
        full = 2.0 * layers * keys * arch.num_heads * (arch.head_dim + arch.v_head_dim)
        return (_part(layers, arch.head_dim, mask, keys, attention, full, None, seq_len),)
    window, windowed = window_of(arch)
    order = arch.extra.get("gemma4_layers")
    if isinstance(order, list):
        # Gemma 4: sliding blocks of head_dim, full blocks of global_head_dim
        # (transformers 5.17 Gemma4TextAttention: per_layer_config[layer_idx].head_dim)
        dims = arch.extra["gemma4_head_dims"]
        groups = [
            (
                sum(1 for k in order if k.startswith(base)),
                int(dims[base][0]),
                window if base == "sliding" else None,
            )
            for base in ("sliding", "full")
        ]
    else:
        groups = [(layers - windowed, arch.head_dim, None), (windowed, arch.head_dim, window)]
    return tuple(
        _part(n, width, mask, keys, attention, 4.0 * n * keys * arch.num_heads * width, w, seq_len)
        for n, width, w in groups
        if n
    )


def _part(
    layers: int,
    head_dim: int,
    mask: str,
    keys: float,
    attention: str,
    full: float,
    window: int | None,
    seq_len: int,
) -> AttentionPart:
    """One :class:`AttentionPart` from its full-square FLOPs ``full``."""
    kernel_keys = keys
    if attention == "sdpa" and sdpa_mask_tensor(window, seq_len):
        mask = "padding"  # the sliding mask is a tensor: the whole square, no flash
    if attention == "flash" and window is not None and keys > window:
        fraction = band_fraction(keys, window)
        kernel_keys = float(window)
    elif mask != "causal":
        fraction = request_fraction(attention, mask)
    else:
        fraction = CAUSAL_ATTENTION_FRACTION[attention]
    return AttentionPart(layers, head_dim, mask, kernel_keys, fraction, full * fraction)


def attention_forward_flops_per_token(
    arch: ModelArch,
    seq_len: int,
    attention: str = "eager",
    attention_mask: str = "causal",
    span: float | None = None,
) -> float:
    """Score and value matmuls of self-attention, forward, per token: the sum of
    :func:`attention_parts`, plus a hybrid stack's Gated DeltaNet blocks' chunked recurrence
    (:func:`linear_attention_forward_flops_per_token`) and Mamba-2 scans."""
    parts = attention_parts(arch, seq_len, attention, attention_mask, span)
    linear = linear_attention_forward_flops_per_token(arch) + mamba_forward_flops_per_token(arch)
    return sum(p.flops for p in parts) + linear


def _dsv4_keys(arch: ModelArch, keys: float) -> float:
    """Keys a DeepSeek-V4 query meets, summed over the blocks: ``keys`` plus the compressed
    entries of its block's kind (``keys / m``; none in a sliding-window block)."""
    rates = arch.extra.get("dsv4_compress_rates", {})
    total = 0.0
    for kind in arch.extra.get("dsv4_layers", []):
        rate = rates.get(kind, 0) if isinstance(rates, dict) else 0
        total += keys + (float(int(keys) // rate) if rate else 0.0)
    return total


def linear_attention_forward_flops_per_token(arch: ModelArch) -> float:
    """Forward FLOPs per token of the Gated DeltaNet blocks of a hybrid stack, beyond their
    projections (counted with the linears): the chunked gated delta rule of
    flash-linear-attention (``fla/ops/gated_delta_rule/chunk.py``; Yang et al. 2024, "Gated
    Delta Networks", arXiv:2412.06464, sec. 3.3), per value head, with chunk ``C = 64``:

    - within a chunk: ``A = beta K K^T`` (``2 C dk``), the triangular solve of ``A``
      (``C^3 / 3`` multiply-adds per chunk: ``2 C^2 / 3`` per token), ``W = A K`` and
      ``U = A V`` (``2 C dk + 2 C dv``), the output's ``Q K^T`` and its product with the new
      values (``2 C dk + 2 C dv``);
    - across chunks: the new values ``U - W S``, the state update ``S += K^T V_new`` and
      the output's ``Q S`` (``3 * 2 dk dv``).

    ``H (6 dk dv + 2 C (3 dk + 2 dv) + 2 C^2 / 3)`` per block, independent of the sequence
    length. Kimi Delta Attention (``fla/ops/kda``) runs the same products with a decay per
    channel instead of per head (``Aqk`` and ``Akk`` within a chunk, ``w``, ``u`` and the state
    update across chunks): the decay adds elementwise work only, so the same count. Its backward is counted as twice the forward like attention's (the kernel's
    recomputation of the chunk states in its backward is left out)."""
    la = arch.linear_attention
    if la is None:
        return 0.0
    c = float(FLA_CHUNK)
    dk, dv = float(la.key_head_dim), float(la.value_head_dim)
    per_head = 6.0 * dk * dv + 2.0 * c * (3.0 * dk + 2.0 * dv) + 2.0 * c * c / 3.0
    return arch.kind_share("linear_attention")[0] * la.value_heads * per_head


def mamba_forward_flops_per_token(arch: ModelArch) -> float:
    """Forward FLOPs per token of the Mamba-2 blocks of a hybrid stack, beyond their
    projections: mamba-ssm's chunked state-space-dual scan (``_mamba_chunk_scan_combined_fwd``,
    ``mamba_ssm/ops/triton/ssd_combined.py``; Dao and Gu 2024, "Transformers are SSMs",
    arXiv:2405.21060, sec. 6), with chunk ``Q`` (``chunk_size``), head width ``P``, state
    ``N``, ``G`` groups and ``H`` heads:

    - ``C B^T`` within each chunk, once per group (``_bmm_chunk_fwd``): ``2 Q N``;
    - per head, the chunk's output from it (``2 Q P``), the chunk's state ``B^T x``
      (``_chunk_state_fwd``: ``2 N P``) and the output from the carried state (``C h``:
      ``2 N P``).

    ``G 2 Q N + H (2 Q P + 4 N P)`` per block; the depthwise convolution, the decays and the
    gated norm are left out (a few FLOPs per channel). Its backward is counted as twice the
    forward like attention's."""
    m = arch.mamba
    if m is None:
        return 0.0
    q, p, n = float(m.chunk), float(m.head_dim), float(m.state)
    per_block = m.groups * 2.0 * q * n + m.heads * (2.0 * q * p + 4.0 * n * p)
    blocks = arch.kind_share("mamba")[0] if arch.block_counts else arch.num_layers
    return blocks * per_block


def indexer_forward_flops_per_token(arch: ModelArch, seq_len: int) -> float:
    """DeepSeek sparse attention's lightning indexer beyond its linears, forward, per token, as
    transformers 5.17 runs it (``DeepseekV32Indexer.forward``): every query scores every key,
    ``q . k`` over ``index_head_dim`` for each index head (``2 Hi D s``), then the heads'
    weighted sum (``2 Hi s``), in each block that runs an indexer. It runs under
    ``torch.no_grad``: no backward, and with checkpointing it runs again in the recompute.

    The attention itself then runs as dense SDPA under the selection mask (counted by
    :func:`attention_forward_flops_per_token` as the whole square). DeepSeek's own kernels
    (FlashMLA's sparse attention with the FP8 ``fp8_index`` indexer) score the causal keys
    only and attend to ``index_topk`` keys per query: ``2 * heads * (qk + v) * index_topk``
    instead of ``s``."""
    if not arch.indexer_layers:
        return 0.0
    keys = seq_len
    if arch.hyper_connections:
        # DeepSeek-V4's indexer scores the s / m compressed entries of its block (its graph is
        # freed unused: no backward either)
        rates = arch.extra.get("dsv4_compress_rates", {})
        keys = seq_len // int(rates.get("compressed_sparse_attention", 4))
    per_layer = 2.0 * arch.index_heads * (arch.index_head_dim + 1) * keys
    return arch.indexer_layers * per_layer


def indexer_linear_params(arch: ModelArch) -> int:
    """Weights of the indexers' linears (no backward: their forward runs under no_grad)."""
    return sum(arch.blocks_of(l) * l.weight_params for l in arch.linears if l.role == "indexer")


@dataclass(frozen=True)
class FlopsPerToken:
    """Training FLOPs per token, split by where they come from (``forward + backward +
    recompute = total``) and by what runs them: ``linear_*`` are the decoder blocks' linears
    (the matmuls FP8 training converts), the rest is attention, lm_head and adapters."""

    forward: float
    backward: float
    recompute: float
    linear_forward: float = 0.0
    linear_backward: float = 0.0
    linear_recompute: float = 0.0
    attention_forward: float = 0.0  # the score and value matmuls, forward (inside ``forward``)
    attention_recompute_share: float = 0.0  # of ``attention_forward``, run again in backward

    @property
    def attention_total(self) -> float:
        """The score and value matmuls over the step's passes: forward, backward (twice the
        forward: gradients of Q, K and V) and the recomputation under checkpointing."""
        return self.attention_forward * (3.0 + self.attention_recompute_share)

    @property
    def total(self) -> float:
        return self.forward + self.backward + self.recompute

    @property
    def linear_total(self) -> float:
        return self.linear_forward + self.linear_backward + self.linear_recompute

    def to_dict(self) -> JsonObject:
        return {
            "forward": self.forward,
            "backward": self.backward,
            "recompute": self.recompute,
            "total": self.total,
            "block_linears": self.linear_total,
        }


def training_flops_per_token(
    arch: ModelArch,
    method: str,
    seq_len: int,
    gradient_checkpointing: bool,
    trainable_params: int,
    attention: str = "eager",
    attention_mask: str = "causal",
    attention_span: float | None = None,
    recompute_share: float = 1.0,
    selective: tuple[float, float] | None = None,
) -> FlopsPerToken:
    """FLOPs one training token costs.

    - Forward: ``2*N`` for the matmuls (N = :func:`matmul_params`) plus attention.
    - Backward, full fine-tuning: gradients of activations and of weights, ``2 * forward``, so
      the whole step is the familiar ``6*N`` (Kaplan et al. 2020, sec. 2.1).
    - Backward, LoRA/QLoRA: the frozen base needs activation gradients only (``2*N``), no weight
      gradients; the adapters (``A`` trainable parameters) cost ``6*A`` in all (Hu et al. 2021,
      arXiv:2106.09685, sec. 4: no gradients for frozen weights). Attention backward is still
      twice its forward (Q, K and V all need gradients).
    - Gradient checkpointing recomputes the forward once (Chen et al. 2016, arXiv:1604.06174);
      ``recompute_share`` of it where only some blocks are wrapped (``every-n``:
      ``floor(L / N) / L``, :mod:`calc.checkpointing`). Under torchtitan's per-op policy
      (``selective``: the block-linear and adapter FLOPs per token its recomputed ``aten.mm``
      run, :func:`selective_recompute_flops`) the backward runs those matmuls again, and the
      attention only where it is not SDPA (whose flash and memory-efficient outputs the
      policy keeps; :func:`calc.timing.step_breakdown` adds it back where SDPA dispatches
      another kernel).
    - DeepSeek sparse attention: the indexer's linears and scores run forward only
      (:func:`indexer_forward_flops_per_token`).
    - Attention within each packed sample: ``attention_span`` keys per query instead of
      ``seq_len`` (:func:`attention_forward_flops_per_token`).
    """
    n = float(matmul_params(arch))
    lin = 2.0 * float(block_linear_params(arch))
    attn = attention_forward_flops_per_token(
        arch, seq_len, attention, attention_mask, attention_span
    )
    # the sparse-attention indexer runs forward only (under no_grad): its linears and scores
    # have no backward
    idx_lin = 2.0 * float(indexer_linear_params(arch))
    scores = indexer_forward_flops_per_token(arch, seq_len)
    if method == "full":
        fwd = 2.0 * n + attn + scores
        bwd = 2.0 * (2.0 * n - idx_lin + attn)
        lin_bwd = 2.0 * (lin - idx_lin)
    else:
        a = float(trainable_params)
        fwd = 2.0 * n + 2.0 * a + attn + scores
        bwd = 2.0 * n - idx_lin + 4.0 * a + 2.0 * attn
        lin_bwd = lin - idx_lin  # input gradients only
    if not gradient_checkpointing:
        recompute, lin_re, attn_share = 0.0, 0.0, 0.0
    elif selective is None:
        recompute, lin_re, attn_share = (
            fwd * recompute_share,
            lin * recompute_share,
            recompute_share,
        )
    else:
        lin_re, adapters_re = selective
        attn_share = 0.0 if attention == "sdpa" else 1.0
        recompute = lin_re + adapters_re + attn * attn_share
    return FlopsPerToken(
        forward=fwd,
        backward=bwd,
        recompute=recompute,
        linear_forward=lin,
        linear_backward=lin_bwd,
        linear_recompute=lin_re,
        attention_forward=attn,
        attention_recompute_share=attn_share,
    )


def selective_recompute_flops(arch: ModelArch, matmuls: tuple[Matmul, ...]) -> tuple[float, float]:
    """(block linears, adapters) FLOPs per token, whole model, of the matmuls torchtitan's per-op
    policy runs again (:func:`calc.checkpointing.block_matmuls`, those not kept): ``2 d_in
    d_out`` each, in every block."""
    base = sum(2.0 * m.d_in * m.d_out for m in matmuls if not m.kept and ".lora_" not in m.name)
    adapters = sum(2.0 * m.d_in * m.d_out for m in matmuls if not m.kept and ".lora_" in m.name)
    return arch.num_layers * base, arch.num_layers * adapters


__all__ = [
    "CAUSAL_ATTENTION_FRACTION",
    "FlopsPerToken",
    "AttentionPart",
    "attention_forward_flops_per_token",
    "attention_parts",
    "block_linear_params",
    "indexer_forward_flops_per_token",
    "linear_attention_forward_flops_per_token",
    "mamba_forward_flops_per_token",
    "matmul_params",
    "selective_recompute_flops",
    "training_flops_per_token",
]
