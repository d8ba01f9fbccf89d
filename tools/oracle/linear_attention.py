"""What a GPU run of a Gated DeltaNet or short-convolution mixer saves, for the fake CPU run
(a workaround in the manner of :mod:`tools.oracle.workarounds`).

transformers 5.17 runs a Gated DeltaNet mixer (Qwen3-Next, Qwen3.5, Qwen3.5-MoE) through
``causal_conv1d.causal_conv1d_fn`` and ``fla.chunk_gated_delta_rule`` when those packages are
installed (``integrations/hub_kernels.py`` ``use_kernel_func_from_hub_with_fallback``), else
through its torch reference code (``torch_chunk_gated_delta_rule``), which saves fp32 copies
of q, k, v, per-chunk ``64 x 64`` matrices and the recurrent state of every chunk: memory a
GPU run with the kernels never holds; LFM2's short convolution calls the same
``causal_conv1d_fn``. Neither package runs on CPU; :func:`linear_attention_kernels`
replaces both with autograd functions that have the kernels' saved tensors and gradient shapes
(causal-conv1d ``CausalConv1dFn``; flash-linear-attention ``ChunkGatedDeltaRuleFunction`` with
its ``input_guard`` contiguous copies and the chunk states its backward recomputes). Kimi
Linear's Kimi Delta Attention calls ``chunk_kimi_delta_attention``, flash-linear-attention's
``chunk_kda`` when installed (its torch fallback saves fp32 copies of q, k, v and the decay and a
``64 x 64 x head_dim`` decay tensor per chunk): :func:`chunk_kda` models ``ChunkKDAFunction``.
The Mamba-2 mixers of Nemotron-H, Falcon-H1 and Granite 4.0, in training, hands its projection to mamba-ssm's
``mamba_split_conv1d_scan_combined`` (transformers' stand-in returns None without mamba-ssm,
sending it down its torch path): :func:`mamba_split_conv1d_scan_combined` models that fused
function (``MambaSplitConv1dScanCombinedFn``), output projection included.
``benchmarks.oracle_sweep`` applies it to the hybrid families' setups (and hashes this file
into their cache keys only).
"""

from __future__ import annotations

from contextlib import contextmanager

import torch
import torch.nn.functional as F


FLA_CHUNK = 64


class _CausalConv1d(torch.autograd.Function):
    """causal-conv1d 1.x ``CausalConv1dFn``: ``x`` made contiguous only when neither its
    channel nor its time axis is, ``out = torch.empty_like(x)`` (the CUDA op keeps ``x``'s
    layout), ``ctx.save_for_backward(x, weight, bias, seq_idx, initial_states)``."""

    @staticmethod
    def forward(ctx, x, weight, bias):
        if x.stride(2) != 1 and x.stride(1) != 1:
            x = x.contiguous()
        ctx.save_for_backward(x, weight, *(() if bias is None else (bias,)))
        ctx.has_bias = bias is not None
        return torch.empty_like(x)

    @staticmethod
    def backward(ctx, dout):
        x, weight = ctx.saved_tensors[:2]
        dbias = torch.empty_like(ctx.saved_tensors[2]) if ctx.has_bias else None
        return torch.empty_like(x), torch.empty_like(weight), dbias


def causal_conv1d_fn(x, weight, bias=None, activation=None, **_kwargs):
    """Drop-in for transformers' ``causal_conv1d_fn`` with causal-conv1d's memory."""
    return _CausalConv1d.apply(x, weight, bias)


class _ChunkGatedDeltaRule(torch.autograd.Function):
    """flash-linear-attention ``ChunkGatedDeltaRuleFunction`` (``fla/ops/gated_delta_rule/
    chunk.py``) with ``use_qk_l2norm_in_kernel``: saves the l2-normalised q and k, their fp32
    ``rstd``, ``v``, the fp32 chunk-local cumulative decay, ``beta`` and ``A`` (``B x T x H x
    64`` in k's dtype); the backward recomputes the chunk states ``h`` and builds ``dh``
    (``B x chunks x H x K x V`` each)."""

    @staticmethod
    def forward(ctx, q, k, v, g, beta):
        b, t, h, _ = q.shape
        q_n, k_n = torch.empty_like(q), torch.empty_like(k)
        rstd = [torch.empty((b, t, h), dtype=torch.float32) for _ in range(2)]
        g_cum = torch.empty((b, t, h), dtype=torch.float32)
        a = torch.empty((b, t, h, FLA_CHUNK), dtype=k.dtype)
        ctx.save_for_backward(q_n, rstd[0], k_n, rstd[1], v, g_cum, beta, a)
        ctx.g_dtype = g.dtype
        return torch.empty(v.shape, dtype=q.dtype)

    @staticmethod
    def backward(ctx, do):
        q, _, k, _, v, g_cum, beta, _ = ctx.saved_tensors
        b, t, h, dk = k.shape
        chunks = -(-t // FLA_CHUNK)
        states = k.new_empty((b, chunks, h, dk, v.shape[-1]))  # recomputed h
        d_states = q.new_empty((b, chunks, h, dk, v.shape[-1]))  # dh
        grads = (
            torch.empty_like(q),
            torch.empty_like(k),
            torch.empty_like(v),
            torch.empty_like(g_cum).to(ctx.g_dtype),
            torch.empty_like(beta),
        )
        del states, d_states
        return grads


def chunk_gated_delta_rule(query, key, value, g, beta, **_kwargs):
    """Drop-in for transformers' ``torch_chunk_gated_delta_rule`` with the memory of
    ``fla.chunk_gated_delta_rule``, which refuses fp32 inputs (``assert q.dtype !=
    torch.float32``) and makes every tensor argument contiguous (``input_guard``)."""
    if query.dtype == torch.float32:
        raise ValueError("flash-linear-attention's chunk_gated_delta_rule refuses float32 inputs")
    query, key, value, g, beta = (x.contiguous() for x in (query, key, value, g, beta))
    return _ChunkGatedDeltaRule.apply(query, key, value, g, beta), None


class _ChunkKDA(torch.autograd.Function):
    """flash-linear-attention ``ChunkKDAFunction`` (``fla/ops/kda/chunk.py``) with
    ``use_qk_l2norm_in_kernel`` and the default ``disable_recompute=False``: saves the
    l2-normalised q and k, their fp32 ``rstd``, ``v``, the fp32 chunk-local cumulative decay
    (``B x T x H x K``, one per channel), the decay it was given, ``beta`` and the intra-chunk
    matrices ``Aqk`` (fp32) and ``Akk`` (k's dtype after ``solve_tril``), ``B x T x H x 64``
    each; ``w``, ``u``, ``qg``, ``kg``, ``v_new`` and the chunk states ``h`` are dropped and
    recomputed in the backward (``chunk_kda_bwd``), which holds, at its widest (in
    ``chunk_kda_bwd_intra``), ``w``, ``u``, ``qg``, ``kg``, ``v_new``, ``h`` and ``dh``, ``dAqk``,
    the fp32 ``dq``, ``dk``, ``dg``, ``db``, ``dAkk`` and ``dv2`` of
    ``chunk_kda_bwd_wy_dqkg_fused`` and the fp32 ``dq2``, ``dk2``, ``dg2``, ``db2`` written
    beside them."""

    @staticmethod
    def forward(ctx, q, k, v, g, beta):
        b, t, h, _ = q.shape
        q_n, k_n = torch.empty_like(q), torch.empty_like(k)
        rstd = [torch.empty((b, t, h), dtype=torch.float32) for _ in range(2)]
        g_cum = torch.empty(g.shape, dtype=torch.float32)
        a_qk = torch.empty((b, t, h, FLA_CHUNK), dtype=torch.float32)
        a_kk = torch.empty((b, t, h, FLA_CHUNK), dtype=k.dtype)
        ctx.save_for_backward(q_n, rstd[0], k_n, rstd[1], v, g_cum, g, beta, a_qk, a_kk)
        return torch.empty(v.shape, dtype=q.dtype)

    @staticmethod
    def backward(ctx, do):
        q, _, k, _, v, _, g, beta, _, _ = ctx.saved_tensors
        b, t, h, dk = k.shape
        chunks = -(-t // FLA_CHUNK)
        states = k.new_empty((b, chunks, h, dk, v.shape[-1]))  # recomputed h
        d_states = q.new_empty((b, chunks, h, dk, v.shape[-1]))  # dh
        recomputed = [torch.empty_like(k) for _ in range(4)] + [torch.empty_like(v)]
        d_aqk = torch.empty((b, t, h, FLA_CHUNK), dtype=torch.float32)
        d_v2 = torch.empty_like(v)
        fp32 = [torch.empty(k.shape, dtype=torch.float32) for _ in range(6)]  # dq dk dg, x2
        d_akk = torch.empty((b, t, h, FLA_CHUNK), dtype=torch.float32)
        key_blocks = -(-dk // min(32, dk))
        d_beta = [torch.empty((b, t, h), dtype=torch.float32) for _ in range(1 + key_blocks)]
        grads = (
            torch.empty_like(q),
            torch.empty_like(k),
            torch.empty_like(v),
            torch.empty_like(g),
            torch.empty_like(beta),
        )
        del states, d_states, recomputed, d_aqk, d_v2, fp32, d_akk, d_beta
        return grads


def chunk_kda(query, key, value, g, beta, **_kwargs):
    """Drop-in for transformers' ``chunk_kimi_delta_attention`` (Kimi Linear) with the memory of
    ``fla.ops.kda.chunk_kda``, which makes every tensor argument contiguous
    (``input_guard``)."""
    query, key, value, g, beta = (x.contiguous() for x in (query, key, value, g, beta))
    return _ChunkKDA.apply(query, key, value, g, beta), None


class _MambaSplitConv1dScanCombined(torch.autograd.Function):
    """mamba-ssm ``MambaSplitConv1dScanCombinedFn`` (``mamba_ssm/ops/triton/ssd_combined.py``),
    with a gated RMSNorm and an output projection as transformers calls it in training: the
    convolution, chunked scan and gated norm run inside; ``out = F.linear(out, outproj_weight,
    outproj_bias)``; ``ctx.save_for_backward(zxbcdt, conv1d_weight, conv1d_bias, out_x, A, D,
    dt_bias, initial_states, seq_idx, rmsnorm_weight, rstd, outproj_weight, outproj_bias)``,
    ``out_x`` the scan output (``B x T x d_inner`` in x's dtype) and ``rstd`` fp32 per row and
    group. The backward builds ``dzxbcdt`` and ``dxBC``, recomputes the conv output and the
    norm's output (``out_recompute``), takes ``dout`` through ``outproj_weight`` and, in
    ``_mamba_chunk_scan_combined_bwd``, recomputes the fp32 chunk states beside their
    gradients."""

    @staticmethod
    def forward(
        ctx, zxbcdt, conv_w, conv_b, dt_bias, a, d, norm_w, out_w, out_b, groups, chunk, dim
    ):
        b, t, _ = zxbcdt.shape
        out_x = zxbcdt.new_empty((b, t, dim))
        # without a gated norm (rmsnorm_weight None) the scan gates by z and rstd is None
        rstd = None if norm_w is None else torch.empty((b * t * groups,), dtype=torch.float32)
        out = F.linear(zxbcdt.new_empty((b, t, dim)), out_w, out_b)
        ctx.save_for_backward(zxbcdt, conv_w, conv_b, out_x, a, d, dt_bias, norm_w, rstd, out_w)
        ctx.has_out_b = out_b is not None
        ctx.groups, ctx.chunk = groups, chunk
        return out

    @staticmethod
    def backward(ctx, dout):
        zxbcdt, conv_w, conv_b, out_x, a, d, dt_bias, norm_w, _, out_w = ctx.saved_tensors
        b, t, _ = zxbcdt.shape
        heads, dim = d.shape[0], out_x.shape[-1]
        state = (conv_w.shape[0] - dim) // ctx.groups // 2
        chunks = -(-t // ctx.chunk)
        recomputed = torch.empty_like(out_x)  # out_recompute
        conv_out = zxbcdt.new_empty((b, t, conv_w.shape[0]))  # xBC_conv, recomputed
        d_conv = torch.empty_like(conv_out)  # dxBC
        d_out = torch.empty_like(out_x)  # dout through outproj_weight
        # _mamba_chunk_scan_combined_bwd: the chunk states recomputed and their gradients, fp32
        states = [torch.empty((b, chunks, heads, dim // heads, state)) for _ in range(2)]
        grads = (
            torch.empty_like(zxbcdt),
            torch.empty_like(conv_w),
            None if conv_b is None else torch.empty_like(conv_b),
            torch.empty_like(dt_bias),
            torch.empty_like(a),
            torch.empty_like(d),
            None if norm_w is None else torch.empty_like(norm_w),
            torch.empty_like(out_w),
            torch.empty(out_w.shape[0], dtype=out_w.dtype) if ctx.has_out_b else None,
            None,
            None,
            None,
        )
        del recomputed, conv_out, d_conv, d_out, states
        return grads


def mamba_split_conv1d_scan_combined(
    zxbcdt,
    conv1d_weight,
    conv1d_bias,
    dt_bias,
    A,
    D,
    chunk_size,
    rmsnorm_weight=None,
    outproj_weight=None,
    outproj_bias=None,
    headdim=None,
    ngroups=1,
    **_kwargs,
):
    """Drop-in for transformers' ``mamba2_split_conv1d_scan_combined`` (which returns None
    without mamba-ssm, sending the mixer down its torch path) with the memory of mamba-ssm's
    fused function."""
    return _MambaSplitConv1dScanCombined.apply(
        zxbcdt,
        conv1d_weight,
        conv1d_bias,
        dt_bias,
        A,
        D,
        rmsnorm_weight,
        outproj_weight,
        outproj_bias,
        ngroups,
        chunk_size,
        D.shape[0] * headdim,
    )


MAMBA2_MODULES = (
    "transformers.models.nemotron_h.modeling_nemotron_h",
    "transformers.models.falcon_h1.modeling_falcon_h1",
    "transformers.models.granitemoehybrid.modeling_granitemoehybrid",
)

GATED_DELTA_MODULES = (
    "transformers.models.qwen3_next.modeling_qwen3_next",
    "transformers.models.qwen3_5.modeling_qwen3_5",
    "transformers.models.qwen3_5_moe.modeling_qwen3_5_moe",
    "transformers.models.olmo_hybrid.modeling_olmo_hybrid",
    "transformers.models.lfm2.modeling_lfm2",  # causal_conv1d_fn only
    "transformers.models.lfm2_moe.modeling_lfm2_moe",  # causal_conv1d_fn only
    "transformers.models.kimi_linear.modeling_kimi_linear",  # causal_conv1d_fn, chunk_kda
)


@contextmanager
def linear_attention_kernels():
    """The Gated DeltaNet modules call :func:`causal_conv1d_fn` and
    :func:`chunk_gated_delta_rule` (they look both up as module globals at call time)."""
    import importlib

    saved = []
    for name in GATED_DELTA_MODULES:
        module = importlib.import_module(name)
        for attr, fn in (
            ("causal_conv1d_fn", causal_conv1d_fn),
            ("torch_chunk_gated_delta_rule", chunk_gated_delta_rule),
            ("chunk_kimi_delta_attention", chunk_kda),
        ):
            if hasattr(module, attr):
                saved.append((module, attr, getattr(module, attr)))
                setattr(module, attr, fn)
    for name in MAMBA2_MODULES:
        module = importlib.import_module(name)
        attr = "mamba2_split_conv1d_scan_combined"
        saved.append((module, attr, getattr(module, attr)))
        setattr(module, attr, mamba_split_conv1d_scan_combined)
    try:
        yield
    finally:
        for module, attr, fn in saved:
            setattr(module, attr, fn)
