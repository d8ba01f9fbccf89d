"""What a mixture-of-experts block costs in time beyond its FLOPs: counted from the kernels
each stack runs.

A dense block's linears each run one matmul over the micro-step's ``T`` tokens. A routed MoE
block (``E`` experts, ``k`` per token) runs each expert's linears on the tokens routed to it,
``T k / E`` of them on average, and moves every routed copy of a token's hidden state into
expert order and back:

- **Matmuls of ``T k / E`` rows.** Each expert's matmul pays the fixed costs of a kernel (tile
  quantisation, the last wave's tail, prologue and epilogue) on its own rows, so it reaches
  the share of its rate that a dense matmul reaches at ``T k / E`` tokens:
  :func:`calc.timing.saturation` at that count, the same curve and constants as the dense
  linears (no constant of its own). A grouped GEMM runs the experts in one launch but still
  tiles each expert's rows apart, so the same count holds for both layouts.
- **Dispatch and combine.** Bytes per routed copy and per hidden element
  (:data:`ROUTE_BYTES_PER_ELEMENT`), counted from the code each layout runs, plus the
  routing mask of the per-expert loop (:data:`LOOP_MASK_BYTES_PER_ENTRY`).
- **Kernels.** The host dispatches the grouped path's ops once per block
  (:data:`GROUPED_OPS_FORWARD`) and the loop's once per expert called
  (:data:`LOOP_OPS_PER_EXPERT_FORWARD`), each expert's matmuls apart.

The layout is the request's ``moe_expert_layout``: ``fused-3d`` (transformers 5.17's 3-D
experts, which run ``grouped_mm`` by default; torchtitan's ``GroupedExperts``) or
``per-expert-modules`` (transformers 4's ``nn.Linear`` per expert, a Python loop).
"""

from __future__ import annotations

from dataclasses import dataclass

from .arch import LinearLayer, ModelArch

ROUTE_BYTES_PER_ELEMENT = {
    ("fused-3d", "eager"): 22,
    ("fused-3d", "compiled"): 6,
    ("per-expert-modules", "eager"): 14,
    ("per-expert-modules", "compiled"): 14,
}
"""Bytes read and written per routed copy of a token and per hidden element (16-bit
activations), forward, outside the matmuls and the gated activation (which
:mod:`calc.timing` counts with the experts' width).

- ``fused-3d``, eager: transformers 5.17.0 ``integrations/moe.py``
  ``grouped_mm_experts_forward``: the gather ``hidden_states[perm // num_top_k]`` (read 2,
  write 2), its in-place ``masked_fill_`` (2 + 2), the ``masked_fill`` of the down
  projection's output (2 + 2), the routing weights' product (2 + 2), the reorder
  ``weighted_out[inv_perm]`` (2 + 2) and the sum over the ``k`` copies (read 2): 22. The
  gate-up output's ``masked_fill`` is counted per element of the experts' width
  (:data:`ROUTE_BYTES_PER_WIDTH_ELEMENT`).
- ``fused-3d``, compiled (torchtitan's ``GroupedExperts`` under ``torch.compile``, per block):
  what no fusion removes: the gathered copy written and read (2 + 2) and the expert output
  read once by the fused weighting and combine (2): 6.
- ``per-expert-modules`` (transformers 4.46-4.57 ``Qwen3MoeSparseMoeBlock.forward``,
  ``MixtralSparseMoeBlock.forward``): the gather ``hidden_states[None, top_x]`` (2 + 2), the
  product by the routing weights (2 + 2), ``index_add_`` into the output (read the source 2,
  read and write the destination 2 + 2): 14. A loop is not fused by compile (each expert's
  row count depends on the data): the same."""

ROUTE_BYTES_PER_WIDTH_ELEMENT = {
    ("fused-3d", "eager"): 8,
    ("fused-3d", "compiled"): 0,
    ("per-expert-modules", "eager"): 0,
    ("per-expert-modules", "compiled"): 0,
}
"""Bytes per routed copy and per element of the experts' intermediate width, forward:
transformers 5.17's ``masked_fill`` of the fused gate-up output (``2 x width`` elements read
and written, 2 + 2 bytes each); fused away by compile, absent from the loop."""

BIAS_ADD_BYTES_PER_ELEMENT = 4
"""Bytes per routed copy and per output element of a biased expert linear run as a grouped
matmul: transformers 5.17.0 ``integrations/moe.py`` ``_grouped_linear`` adds the bias in
place after ``torch._grouped_mm`` (``out.add_(bias)``: 16-bit output read and written, 2 + 2;
gpt-oss's experts have biases)."""

LOOP_MASK_BYTES_PER_ENTRY = 24
"""Per token, per MoE block and per (chosen slot, expert) entry: transformers 4's loop builds
``one_hot(selected_experts, num_classes=E)`` in int64 (8 bytes written), sums it over tokens
to find the experts hit (8 read), and each expert's ``torch.where(expert_mask[expert_idx])``
reads its own slice (8 read over all experts)."""

GROUPED_OPS_FORWARD = {"eager": 16, "compiled": 5}
"""Ops per MoE block, forward, besides the expert matmuls and the gated activation (which the
per-block count of :mod:`calc.timing` has once): transformers 5.17
``grouped_mm_experts_forward`` launches the sort, the index division and the gather, the
weights' gather, ``histc``, ``cumsum``, the sentinel compare, the clamp, three
``masked_fill``, the routing product, ``arange``, the inverse-permutation scatter, the reorder
gather and the sum (16). Compiled: the sort, the histogram, the cumulative sum, the gather and
the fused weighting and combine (5)."""

LOOP_OPS_PER_EXPERT_FORWARD = 6
"""Ops per expert called, forward, besides its matmuls: transformers 4's loop runs
``torch.where`` on the expert's mask (a ``nonzero``, which waits for the device), the gather
of its tokens, the activation and the gate product, the routing-weight product and
``index_add_``."""

LOOP_OPS_PER_BLOCK_FORWARD = 3
"""Ops per MoE block of transformers 4's loop outside it: ``one_hot``, the sum that finds the
experts hit, the zeroed output."""


def routed_expert_linears(arch: ModelArch) -> list[LinearLayer]:
    """The linears of the routed experts (several copies per block, fewer active per token);
    shared experts and routers are not among them."""
    if arch.num_experts <= 1:
        return []
    return [
        lin
        for lin in arch.linears
        if lin.role == "mlp" and lin.count > 1 and lin.active < lin.count
    ]


def experts_called(arch: ModelArch, tokens: int) -> float:
    """Experts that receive a token in a micro-step of ``tokens`` tokens routed to ``k`` of
    ``E``, in expectation ``E (1 - (1 - k/E)^T)``: what transformers 4's loop calls (with
    thousands of tokens, every expert). 0 for a dense model."""
    e, k = arch.num_experts, arch.experts_per_token
    if e <= 1:
        return 0.0
    return e * (1.0 - (1.0 - k / e) ** tokens)


@dataclass(frozen=True)
class MoeCounts:
    """A request's routed-expert counts per micro-step (zero for a dense model).

    ``flops_forward``: the routed experts' matmul FLOPs per token, forward; ``token_share``:
    ``k / E``, each expert's share of the micro-step's tokens; ``route_bytes``: dispatch and
    combine bytes per token, forward; ``linear_ops``: the expert matmuls per micro-step as
    the dense count has them (``k`` per linear per block), ``ops_forward``: what the layout
    launches in their place, forward, of which ``loop_ops_forward`` inside the per-expert
    loop, whose ``nonzero`` makes the host wait for the device at every expert."""

    flops_forward: float = 0.0
    token_share: float = 1.0
    route_bytes: float = 0.0
    linear_ops: float = 0.0
    ops_forward: float = 0.0
    loop_ops_forward: float = 0.0


def moe_counts(arch: ModelArch, layout: str, compiled: bool, tokens: int) -> MoeCounts:
    """:class:`MoeCounts` of ``arch`` for a micro-step of ``tokens`` tokens."""
    experts = routed_expert_linears(arch)
    if not experts:
        return MoeCounts()
    e, k = arch.num_experts, arch.experts_per_token
    blocks = max(arch.blocks_of(lin) for lin in experts)
    mode = "compiled" if compiled else "eager"
    width = max(min(lin.d_in, lin.d_out) for lin in experts)
    h = arch.hidden_size
    route = (
        ROUTE_BYTES_PER_ELEMENT[layout, mode] * h
        + ROUTE_BYTES_PER_WIDTH_ELEMENT[layout, mode] * width
    ) * k
    if layout == "fused-3d" and not compiled:
        # grouped matmuls take no bias: transformers 5.17 _grouped_linear adds it after
        # (out.add_(bias), its output read and written); nn.Linear fuses it into the matmul
        route += BIAS_ADD_BYTES_PER_ELEMENT * k * sum(lin.d_out for lin in experts if lin.bias)
    linear_ops = float(sum(arch.blocks_of(lin) * lin.active for lin in experts))
    if layout == "per-expert-modules":
        route += LOOP_MASK_BYTES_PER_ENTRY * k * e
        loop = blocks * experts_called(arch, tokens) * (len(experts) + LOOP_OPS_PER_EXPERT_FORWARD)
        ops = loop + blocks * LOOP_OPS_PER_BLOCK_FORWARD
    else:
        loop = 0.0
        ops = blocks * (len(experts) + GROUPED_OPS_FORWARD[mode])
    return MoeCounts(
        flops_forward=2.0 * sum(arch.blocks_of(l) * l.active * l.d_in * l.d_out for l in experts),
        token_share=k / e,
        route_bytes=float(blocks * route),
        linear_ops=linear_ops,
        ops_forward=float(ops),
        loop_ops_forward=float(loop),
    )
