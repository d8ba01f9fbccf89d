"""The oracle's model of flash-linear-attention's Kimi Delta Attention kernel
(tools/oracle/linear_attention.py): what it saves, and that the Kimi Linear module calls it.

Needs torch and transformers (skipped without them, except where ``REQUIRE_ORACLE=1``)."""

from __future__ import annotations

from oracle_deps import need_oracle_stack

torch = need_oracle_stack()

from tools.oracle import linear_attention as la  # noqa: E402


def test_chunk_kda_saves_what_chunk_kda_function_keeps():
    b, t, h, d = 1, 128, 2, 64
    q, k, v = (torch.empty(b, t, h, d, dtype=torch.bfloat16, requires_grad=True) for _ in "qkv")
    g = torch.empty(b, t, h, d, dtype=torch.float32, requires_grad=True)
    beta = torch.empty(b, t, h, dtype=torch.bfloat16, requires_grad=True)
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda x: saved.append(x) or x, lambda x: x):
        out, state = la.chunk_kda(q, k, v, g, beta)
    assert state is None and out.shape == v.shape
    nbytes = sum(x.numel() * x.element_size() for x in saved)
    dim = h * d
    # l2-normalised q and k, v (bf16); two fp32 rstd per head; the fp32 cumulative decay and the
    # decay given; beta (bf16); Aqk (fp32) and Akk (bf16) of 64 per head
    per_token = 3 * 2 * dim + 2 * 4 * h + 2 * 4 * dim + 2 * h + (4 + 2) * h * 64
    assert nbytes == t * per_token
    out.sum().backward()
    assert q.grad.shape == q.shape and g.grad.dtype == torch.float32


def test_kimi_linear_module_calls_the_kernel_model():
    import transformers.models.kimi_linear.modeling_kimi_linear as kimi

    fallback = kimi.chunk_kimi_delta_attention
    with la.linear_attention_kernels():
        assert kimi.chunk_kimi_delta_attention is la.chunk_kda
        assert kimi.causal_conv1d_fn is la.causal_conv1d_fn
    assert kimi.chunk_kimi_delta_attention is fallback
