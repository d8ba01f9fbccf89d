"""calc's count of what a decoder block's element-wise ops move per token, forward and backward
(``calc.timing._counts`` with ``block_backward_bytes``), against a trace of it
(``tools/count_block_traffic.py``).

Needs torch and transformers (skipped without them, except where ``REQUIRE_ORACLE=1``)."""

from __future__ import annotations

import pytest

from oracle_deps import need_oracle_stack

torch = need_oracle_stack()

from tools import count_block_traffic as cbt  # noqa: E402


@pytest.mark.parametrize("kind", sorted(cbt.NORMS))
@pytest.mark.parametrize("trained", [False, True])
def test_norm_backward_is_the_traced_module(kind, trained):
    """Llama's RMSNorm and Gemma's fp32-scale one, weight frozen (LoRA) and trained (full): the
    table's whole bytes per element (the per-row statistics are a few bytes per row, under 0.5
    per element at this width)."""
    from calc import timing

    weight = "trained" if trained else "frozen"
    traced = cbt.norm_backward(kind, trained, width=1024)
    assert traced == pytest.approx(timing.NORM_BACKWARD_BYTES_PER_ELEMENT[kind, weight], abs=0.5)


def test_tanh_gelu_backward_is_the_traced_activation():
    """GPT-2's and Phi's ``gelu_new``, one kernel per op: its backward as autograd runs it."""
    from calc import timing

    traced = cbt.activation_backward("gelu_new", width=1024)
    assert traced == pytest.approx(timing.TANH_GELU_OP_BY_OP_BACKWARD_BYTES_PER_ELEMENT, abs=0.5)


@pytest.mark.parametrize(
    "preset", ["qwen3-0.6b", "gemma-3-1b", "gemma-4-31b", "phi-3-mini", "phi-4-mini"]
)
def test_calc_counts_what_the_block_moves(preset):
    """The whole block, forward and backward, every parameter trained: Qwen3 (grouped k/v,
    per-head q/k norms, Llama's norm), Gemma 3 (four norms per block scaling in fp32, q/k
    norms, a GELU gate, a sliding and a full layer type) and Gemma 4 (sliding blocks of head
    dim 256 beside full ones of 512 sharing k as v, a weightless v norm, the layer scalar, each
    kind's own readers) and Phi-3 / Phi-4-mini (q, k and v sliced out of one fused projection,
    the rotary embedding's split of q and k, a fused gate-up chunk; Phi-4-mini rotates 0.75 of
    each head) within 1 % (the per-token statistics of the norms and the loss's share are the
    rest)."""
    row = cbt.row(preset)
    assert row["calc_total"] == pytest.approx(row["traced_total"], rel=0.01)


@pytest.mark.parametrize("preset", ["llama-2-7b", "qwen3-0.6b"])
def test_calc_counts_what_the_eager_block_moves(preset):
    """The same under transformers' eager attention: the bf16 scores' passes beside their
    matmuls (the upcast and the fp32 softmax as two kernels, the gradient cast back), the output
    and value-gradient copies and, on Qwen3, the repeat of its grouped k/v heads, within 1 %
    (Llama-2-7B: MHA, no repeat)."""
    row = cbt.row(preset, "eager")
    assert row["calc_total"] == pytest.approx(row["traced_total"], rel=0.01)


@pytest.mark.parametrize(
    ("preset", "regime"), [("qwen3-0.6b", "autocast"), ("gemma-3-1b", "16bit")]
)
def test_calc_counts_what_the_lora_block_moves(preset, regime):
    """The whole block under peft's LoRA on the frozen stack: TRL's regime (bf16 weights, fp32
    adapters, bf16 autocast) and adapters in the weights' bf16, within 1 % (the frozen norms'
    backward, the adapters' casts, sums and scaling, the linears' input gradients only)."""
    row = cbt.row(preset, lora=regime)
    assert row["calc_total"] == pytest.approx(row["traced_total"], rel=0.01)


@pytest.mark.parametrize("preset", ["mixtral-8x7b", "qwen3-30b-a3b", "gemma-4-26b-a4b"])
def test_calc_counts_what_the_routed_block_moves(preset):
    """A routed MoE block under transformers 5.17's grouped experts, op by op
    (``calc.moe_kernels.grouped_route_bytes``): Mixtral, whose router hands fp32 weights (the
    product, reorder, sum and cast back in fp32); Qwen3-30B-A3B, bf16 weights, k = 2 of 8
    experts in the shrunk stack; Gemma 4 26B-A4B, fp32 weights, a dense MLP beside the experts
    in every block and a router that normalises and scales its input. Within 1 % (the trace
    reads a gathered token's storage once where the kernel reads it per copy)."""
    row = cbt.row(preset)
    assert row["calc_total"] == pytest.approx(row["traced_total"], rel=0.01)


def test_calc_counts_what_the_dense_expert_block_moves():
    """Llama 4 Maverick's MoE block, every expert on every token (``dense_route_bytes``: the
    copies, their scaling and sum, which match the trace to a few bytes), within 3 %: the rest
    of its block (complex rotary, per-head L2 q/k norm) is not counted by part yet (noted in
    validation/README.md)."""
    row = cbt.row("llama-4-maverick")
    assert row["calc_total"] == pytest.approx(row["traced_total"], rel=0.03)
