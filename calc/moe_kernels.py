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
    ("fused-3d", "compiled"): 6,
    ("per-expert-modules", "eager"): 14,
    ("per-expert-modules", "compiled"): 14,
}
"""Bytes read and written per routed copy of a token and per hidden element (16-bit
activations), forward, outside the matmuls and the gated activation (which
:mod:`calc.timing` counts with the experts' width), for the layouts not counted op by op
(:func:`grouped_route_bytes` counts transformers 5.17's eager grouped path); their backward
is :data:`calc.timing.BACKWARD_ELEMENTWISE_FACTOR` times it.

- ``fused-3d``, compiled (torchtitan's ``GroupedExperts`` under ``torch.compile``, per block):
  what no fusion removes: the gathered copy written and read (2 + 2) and the expert output
  read once by the fused weighting and combine (2): 6.
- ``per-expert-modules`` (transformers 4.46-4.57 ``Qwen3MoeSparseMoeBlock.forward``,
  ``MixtralSparseMoeBlock.forward``): the gather ``hidden_states[None, top_x]`` (2 + 2), the
  product by the routing weights (2 + 2), ``index_add_`` into the output (read the source 2,
  read and write the destination 2 + 2): 14. A loop is not fused by compile (each expert's
  row count depends on the data): the same. Its routers cast the weights back to the
  activations' dtype (``routing_weights.to(hidden_states.dtype)``), so the product stays
  16-bit."""

ACTIVATION_BYTES = 2
"""The 16-bit activations every routed-expert count here assumes (fp32 training keeps these
16-bit counts, as the rest of the element-wise tables do)."""

FP32_ROUTING_FAMILIES = frozenset(
    {
        "mixtral",
        "minimax_m2",
        "deepseek_v3",
        "deepseek_v32",
        "glm_moe_dsa",
        "glm4_moe",
        "glm4_moe_lite",
        "kimi_linear",
        "gemma4_text",
        "nemotron_h",
    }
)
"""Families whose router hands the experts fp32 routing weights under transformers 5.17, so
that ``grouped_mm_experts_forward``'s product ``proj_out * sample_weights_g`` promotes the
expert output to fp32 and its reorder, sum and final cast run in fp32
(:func:`grouped_route_bytes`). Read from each ``modeling_*.py`` router and confirmed on the
traced stacks (``top_k_weights.dtype`` at the experts' call, bf16 model, CPU): Mixtral and
MiniMax-M2 take ``softmax(router_logits.float())`` and never cast back; the DeepSeek-V3
routers (DeepSeek V3 / V3.2, Kimi K2, GLM 4.5 / 4.7 / 5, GLM-4.7-Flash, Kimi Linear,
Nemotron-H) compute ``F.linear(hidden_states.type(torch.float32), ...)`` and gather from its
sigmoid; ``Gemma4TextRouter`` returns fp32 weights. The others cast back to the activations'
dtype (Qwen2/Qwen3-MoE, Qwen3-Next, Qwen3.5, OLMoE: ``router_top_value.to(router_logits.dtype)``;
Granite, HunYuan, Jamba alike) or route in it (gpt-oss's softmax of bf16 logits, LFM2-MoE's
sigmoid, Mistral 4 and DeepSeek V4's 16-bit routers)."""


def grouped_route_bytes(
    weight_bytes: int, k: int, act: int = ACTIVATION_BYTES
) -> tuple[float, float]:
    """Bytes per routed copy of a token and per hidden element, ``(forward, backward)``, of
    transformers 5.17.0 ``integrations/moe.py`` ``grouped_mm_experts_forward`` outside its two
    grouped matmuls and the gate: ``k`` copies per token, routing weights of ``weight_bytes``,
    activations of ``act``. The weighted product takes the larger of the two dtypes (``o``).

    Forward: the gather ``hidden_states[perm // num_top_k]`` (read and write ``act``), the
    pre-mask ``masked_fill_`` in place (read and write), the down output's ``masked_fill``
    (read and write), the product by the routing weights (read ``act``, write ``o``), the
    reorder ``weighted_out[inv_perm]`` (``o`` each way), the sum over the ``k`` copies (read
    ``o`` per copy, write ``o`` per token) and, when ``o`` is wider, the cast back
    (``.to(hidden_states.dtype)``, per token).

    Backward, as autograd runs it (traced on the CPU, op by op): the cast's gradient back to
    ``o`` (per token); the sum's expanded gradient made contiguous for the view (read per
    token, write per copy); the reorder's gradient, ``new_zeros`` then ``index_put_`` with
    accumulation (write ``o``; read the values and read and write the destination); the
    product's two gradients, ``grad x weights`` (read and write ``o``, then cast to the
    output's dtype when ``o`` is wider) and ``grad x output`` (read ``o`` and ``act``, write
    ``o``) summed over the hidden width (read ``o``); both masks' gradients (``act`` each way,
    twice); the gather's gradient, ``new_zeros`` of the tokens and an accumulating
    ``index_put_`` of the copies (read ``act`` per copy, the destination read and written per
    token)."""
    o = max(act, weight_bytes)
    cast = (o + act) / k if o != act else 0.0
    forward = 2 * act + 2 * act + 2 * act + (act + o) + 2 * o + (o + o / k) + cast
    backward = (
        cast
        + (o / k + o)
        + (o + 3 * o)
        + (2 * o + (o + act if o != act else 0))
        + (2 * o + act + o)
        + 2 * act
        + 2 * act
        + (act / k + act + 2 * act / k)
    )
    return forward, backward


def grouped_width_bytes(gated: bool, act: int = ACTIVATION_BYTES) -> tuple[int, int]:
    """Bytes per routed copy and per element of the experts' intermediate width, ``(forward,
    backward)``, of transformers 5.17's grouped path besides the activation: the
    ``masked_fill`` of the first grouped matmul's output (``2 x width`` elements when gated,
    read and written, and its gradient the same); a gated expert's ``chunk`` of that output
    is a view, whose gradient ``cat`` reads and writes ``2 x width`` more. Fused away by
    compile, absent from the loop."""
    mask = 2 * act * (2 if gated else 1)
    return mask, mask + chunk_cat_bytes(gated, act)


def chunk_cat_bytes(gated: bool, act: int = ACTIVATION_BYTES) -> int:
    """Bytes per copy and per element of the experts' width of the ``cat`` that joins a gated
    expert's gate and up gradients (its ``chunk`` is a view): both halves read, ``2 x width``
    written; nothing without a gate."""
    return 2 * act * 2 if gated else 0


def dense_route_bytes(experts: int, act: int = ACTIVATION_BYTES) -> tuple[float, float]:
    """Bytes per token and hidden element, ``(forward, backward)``, of a block whose experts run
    densely: transformers 5.17.0 ``modeling_llama4.py`` ``Llama4TextMoe.forward`` (lines
    166-174; the same since 4.51) copies each token once per expert and scales each copy by its
    router score (zero for the experts not chosen), runs every expert on every copy
    (``Llama4TextExperts``: two ``bmm``), sums the copies and adds them to the shared expert's
    output. ``E`` experts, activations of ``act`` bytes.

    Forward: ``repeat`` (read the token, write ``E`` copies), the product by the scores (read
    and write each copy), the sum over experts (read each copy, write the token) and the
    in-place ``add_`` (read both, write): ``(4 E + 5) act``. Backward, traced on the CPU
    (Llama 4 Maverick's MoE block, bf16): the sum's expanded gradient made contiguous for the
    experts' ``bmm`` (read the token, write ``E`` copies), the product's two gradients (the
    incoming gradient times the scores, read and write; times the saved copies, read both and
    write, summed over the hidden width, read) and ``repeat``'s (read ``E`` copies, write the
    token): ``(8 E + 2) act``."""
    return (4 * experts + 5) * act, (8 * experts + 2) * act


DENSE_OPS_FORWARD = 11
"""Ops per block of :func:`dense_route_bytes`'s path, forward, besides the experts' two
``bmm`` and the gated activation: the router's ``topk``, ``full_like``, ``scatter_``, the
cast up, ``sigmoid`` and the cast back; the copy of the transposed scores, ``repeat``, the
product, the sum and ``add_`` (``modeling_llama4.py`` lines 146-151, 166-173)."""


BIAS_BYTES_PER_ELEMENT = {"forward": 10, "backward": 2}
"""Bytes per routed copy and per output element of a biased expert linear run as a grouped
matmul (gpt-oss's experts have biases): transformers 5.17.0 ``integrations/moe.py`` gathers
each copy's bias row (``gate_up_proj_bias[expert_ids_g]``: read and write, 2 + 2) and
``_grouped_linear`` adds it in place after ``torch._grouped_mm`` (``out.add_(bias)``: the
output and the gathered bias read, the output written, 2 + 2 + 2): 10. Backward the output's
gradient passes through the in-place add; the bias's is the gather's, an accumulating
``index_put_`` of every copy's gradient row into the experts' few rows (read 2)."""

SHARED_COMBINE_BYTES_PER_ELEMENT = 6
"""Bytes per token and hidden element, forward, of adding a shared expert's output to the
routed experts' (``expert_output += shared_expert_output`` in Qwen2-MoE, Qwen3-Next and
Qwen3.5; ``self.experts(...) + self.shared_experts(residuals)`` in DeepSeek V3 and its
relatives, Nemotron-H, Granite 4; transformers 5.17), and Gemma 4's sum of its dense MLP's
and its experts' outputs (counted by :mod:`calc.timing` with Gemma 4's router): both read and
the sum written (2 + 2 + 2). Its backward hands the one gradient to both: no kernel. Fused
with the combine under compile (not counted there)."""

SHARED_GATE_BYTES_PER_ELEMENT = {"forward": 4, "backward": 12}
"""Bytes per token and hidden element of a shared expert's scalar gate,
``F.sigmoid(self.shared_expert_gate(x)) * shared_expert_output`` (Qwen2-MoE, Qwen3-Next,
Qwen3.5-MoE; transformers 5.17): forward the product (read the expert's output 2, write 2;
the gate is one value per token); backward the output's gradient times the gate (read 2,
write 2) and the gate's gradient, the incoming gradient times the expert's output (read 2 +
2, write 2) summed over the hidden width (read 2): 12. Traced on the CPU (Qwen1.5-MoE's
block, bf16)."""

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


def expert_width(arch: ModelArch, experts: list[LinearLayer]) -> int:
    """The routed experts' intermediate width: what their output projection (back to the
    hidden width) reads. Not the narrower side of each linear: Mixtral's and Llama 4's experts
    are wider than the hidden state."""
    h = arch.hidden_size
    return max((lin.d_in for lin in experts if lin.d_out == h), default=arch.intermediate_size)


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
    ``k / E``, each expert's share of the micro-step's tokens; ``route_bytes`` and
    ``route_bytes_backward``: dispatch and combine bytes per token, forward and backward (``None``
    where the layout's backward is not counted op by op: :mod:`calc.timing` scales the forward);
    ``linear_ops``: the expert matmuls per micro-step as
    the dense count has them (``k`` per linear per block), ``ops_forward``: what the layout
    launches in their place, forward, of which ``loop_ops_forward`` inside the per-expert
    loop, whose ``nonzero`` makes the host wait for the device at every expert."""

    flops_forward: float = 0.0
    token_share: float = 1.0
    route_bytes: float = 0.0
    route_bytes_backward: float | None = 0.0
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
    width = expert_width(arch, experts)
    h = arch.hidden_size
    dense = bool(arch.extra.get("experts_run_densely"))
    if dense:
        # every expert on every token (Llama 4 under transformers, either generation): the
        # copies and their sum; the chunked gate-up's gradient is concatenated per copy
        per_h = dense_route_bytes(e)
        forward = per_h[0] * h
        backward = per_h[1] * h + chunk_cat_bytes(arch.mlp_gated) * width * e
    elif layout == "fused-3d" and not compiled:
        # transformers 5.17's grouped path, op by op, forward and backward
        weights = 4 if arch.family in FP32_ROUTING_FAMILIES else ACTIVATION_BYTES
        per_h = grouped_route_bytes(weights, k)
        per_w = grouped_width_bytes(arch.mlp_gated)
        # grouped matmuls take no bias: _grouped_linear adds each copy's gathered bias after
        biased = sum(lin.d_out for lin in experts if lin.bias)
        forward = (per_h[0] * h + per_w[0] * width + BIAS_BYTES_PER_ELEMENT["forward"] * biased) * k
        backward = (
            per_h[1] * h + per_w[1] * width + BIAS_BYTES_PER_ELEMENT["backward"] * biased
        ) * k
    else:
        forward = ROUTE_BYTES_PER_ELEMENT[layout, mode] * h * k
        if layout == "per-expert-modules":
            forward += LOOP_MASK_BYTES_PER_ENTRY * k * e
        backward = None  # not counted op by op: calc.timing scales the forward
    if arch.shared_expert_intermediate_size and not compiled and not dense:
        # (the dense path's add_ of the shared expert's output is in dense_route_bytes)
        forward += SHARED_COMBINE_BYTES_PER_ELEMENT * h
        if any(lin.name == "shared_expert_gate" for lin in arch.linears):
            forward += SHARED_GATE_BYTES_PER_ELEMENT["forward"] * h
            if backward is not None:
                backward += SHARED_GATE_BYTES_PER_ELEMENT["backward"] * h
    # the dense path runs every expert's matmuls on all the micro-step's rows
    runs = {lin.name: lin.count if dense else lin.active for lin in experts}
    linear_ops = float(sum(arch.blocks_of(lin) * lin.active for lin in experts))
    if layout == "per-expert-modules" and not dense:
        loop = blocks * experts_called(arch, tokens) * (len(experts) + LOOP_OPS_PER_EXPERT_FORWARD)
        ops = loop + blocks * LOOP_OPS_PER_BLOCK_FORWARD
    else:
        loop = 0.0
        extra_ops = DENSE_OPS_FORWARD if dense else GROUPED_OPS_FORWARD[mode]
        ops = blocks * (len(experts) + extra_ops)
    return MoeCounts(
        flops_forward=2.0
        * sum(arch.blocks_of(l) * runs[l.name] * l.d_in * l.d_out for l in experts),
        token_share=1.0 if dense else k / e,
        route_bytes=float(blocks * forward),
        route_bytes_backward=None if backward is None else float(blocks * backward),
        linear_ops=linear_ops,
        ops_forward=float(ops),
        loop_ops_forward=float(loop),
    )
