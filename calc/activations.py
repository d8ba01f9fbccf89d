"""Activations: the tensors a decoder block saves for its backward pass, in bytes.

Counted tensor by tensor from what autograd keeps (derivation on the methodology
page), per token of one block, for 16-bit compute unless the precision is fp32:

- RMSNorm (HF / torchtune / LitGPT code): the fp32 upcast of its input (``4h``, saved
  by ``pow`` and the scaling ``mul``); the normalised input before the weight
  (``h`` in the residual dtype) only when the norm weight trains. LayerNorm (fused
  kernel): its input plus fp32 mean and rstd.
- A linear layer saves its input only when its weight trains or it carries a LoRA
  adapter (a frozen weight needs only itself to pass the gradient on). Linears that
  read the same tensor share one saved copy, except under autocast where each
  linear saves its own 16-bit cast.
- SDPA / FlashAttention save q, k, v, the output and an fp32 log-sum-exp per head;
  torch SDPA paths (HF, torchtune, LitGPT) expand grouped k and v to all heads first,
  the flash-attn kernels take them as they are (Dao 2023, arXiv:2307.08691).
  Eager attention saves the fp32 softmax ``heads * s`` per token and its 16-bit copy
  (HF ``eager_attention_forward``) instead of the output.
- Gated MLP (SwiGLU / GeGLU): the activation's input, its output and the up
  projection (``3 * i``; gpt-oss's clamped gate ``6 * i``), plus the down projection's
  input when it saves it; plain
  MLP (GeLU): the activation's input (``i``) plus the second linear's input.
- MoE: each token's ``k`` experts save their MLP tensors, plus the gathered input and
  the expert output that the routing weight multiplies (HF ``MixtralSparseMoeBlock``).
- LoRA: the rank-``r`` intermediate ``A x`` of each adapter (saved by ``B``), and the
  adapter's input (through the rule on linears above). With adapter dropout
  (``lora_dropout > 0``) each adapter applies its own dropout to its input (peft
  ``LoraLayer.lora_dropout[name]``, torchtune ``LoRALinear.dropout``) and ``A`` saves the
  dropout output instead of the input; the dropout keeps a 1-byte boolean mask (CUDA
  ``native_dropout``): ``(act + 1) * d_in`` per adapter.
- QLoRA with ``qlora_keeps_inputs`` (bitsandbytes < 0.43.2): every 4-bit linear keeps its
  input (``MatMul4Bit.forward``: ``ctx.tensors = (A, B)``), through the rule on linears.
- Fused q/k/v output kept (``attention_keeps_fused_qkv``, LitGPT through Sep 2024): with
  one query head per k/v head, ``v`` reaches SDPA as a view into the fused projection's
  output, so the saved ``v`` holds all of it: ``act * (q_dim + kv_dim)`` more than ``v``.
- Hybrid stacks (Qwen3-Next, Qwen3.5, OLMo Hybrid, LFM2): each block's mixer weighted by the
  share of blocks of its kind. Gated DeltaNet and short convolutions are counted as the GPU
  kernels users run save them (flash-linear-attention ``chunk_gated_delta_rule``,
  causal-conv1d ``causal_conv1d_fn``), not as transformers' torch fallback, which keeps
  far more (:func:`gated_delta_net_bytes`). Nemotron-H's Mamba-2 blocks (one sublayer per
  block) are counted as mamba-ssm's fused ``mamba_split_conv1d_scan_combined`` saves them
  (:func:`mamba2_bytes`), its ``out_proj`` adapter as skipped (:func:`bypassed_adapter`).
- No dropout in the block (Llama-style models train without it).
- ``torch.compile`` (``torch_compile``): AOTAutograd's min-cut partitioner may recompute
  pointwise work in the backward instead of saving it. What it could drop at most is
  :func:`compile_removable_bytes_per_token`; what it drops in practice depends on its
  heuristics, so a fitted share of it stays (``COMPILE_KEPT_FRACTION``).

Korthikanti et al. 2022 (arXiv:2205.05198, sec. 4.1) give ``34 s b h`` for a GPT block
with a 4h GeLU MLP and dropout; this module derives the count for the actual block.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from .arch import ATTN_INNER_NAMES, LinearLayer, ModelArch
from .attention_windows import sdpa_mask_tensor, window_of
from .checkpointing import Matmul
from .liger import gated_unit_form
from .request import Attention

AdaptedKey = tuple[str | int, ...]
"""What :func:`linear_key` returns."""

FP32_BYTES = 4
INDEX_BYTES = 8
"""int64 indices (what ``max(dim)`` keeps for its backward)."""
LAYERNORM_STATS_BYTES = 8
"""fp32 mean and rstd per token saved by ``native_layer_norm`` (PyTorch ATen)."""

COMPILE_KEPT_FRACTION = 0.395
"""Share of :func:`compile_removable_bytes_per_token` that a ``torch.compile``'d block still
saves. Fitted, not derived: torchtune's "Optimization flags" table (README at 1814feb17,
Llama-3.2-3B full fine-tuning, batch 2 x 4096 packed tokens, no checkpointing) measured
60.0 GiB eager and 51.0 GiB with compile added and nothing else changed, a 9.0 GiB saving
against 14.88 GiB removable by this count: ``1 - 9.0 / 14.88 = 0.395``. Its error on the
compiled rows it was not fitted on is printed by ``python -m benchmarks.validate_memory``."""


@dataclass(frozen=True)
class ActConfig:
    """What decides the saved tensors of a block.

    ``act_bytes``: 16-bit compute (2) or fp32 (4); ``resid_bytes``: dtype of the
    residual stream (fp32 under AMP, whose fp32 embedding output stays fp32 through
    the residual adds); ``full``: every weight trains; ``adapted``: identities
    ``(name, d_in, d_out, role)`` of adapted linears; ``per_linear_casts``: autocast
    casts the shared input once per linear.
    """

    act_bytes: int
    resid_bytes: int
    full: bool
    adapted: frozenset[AdaptedKey]
    rank: int
    attention: Attention
    seq_len: int
    per_linear_casts: bool
    lora_dropout: bool = False
    autocast: bool = False  # the forward runs under torch.autocast (``*-mixed``)
    quant_keeps_inputs: bool = False
    keeps_fused_qkv: bool = False
    compile_kept: float | None = None  # share of the removable bytes kept; None: eager
    adapter_bytes: int | None = None  # fp32 adapters on a 16-bit base: 4; None: act_bytes
    grouped_kv: bool = False  # torch SDPA with enable_gqa: k/v saved at kv-head size
    # torch SDPA receives a boolean mask tensor (a padded batch, packed samples kept apart):
    # ATen's additive copy of it is saved by the kernel (mask_copy_bytes)
    mask_saved: bool = False
    # those masks are boolean (transformers 4.53 on), so each call copies them (sdpa_mask_boolean)
    mask_boolean: bool = True
    # transformers' own attention builds the sliding-window masks (not Unsloth's kernels,
    # which take the window as their own argument): windowed_config
    window_masks: bool = True
    # k/v repeated to every query head before attention whatever the kernel (XTuner's
    # sequence-parallel path, ``sequence_parallel_repeats_kv``)
    kv_repeated: bool = False
    # adapted linears whose adapter peft folds into the weight (moe_expert_layout "fused-3d",
    # calc.lora.fused_expert_adapters): their weight W + B·A trains, so the input is saved
    # whatever the adapter's dtype or dropout, and no token passes through A and B
    fused: frozenset[AdaptedKey] = frozenset()
    # the output layer is a 4-bit linear that keeps its input (qlora_output_layer_quantized
    # with qlora_keeps_inputs): the final norm's output is saved
    head_keeps_input: bool = False
    # 4-bit linears read fp32 norm outputs under autocast (QLoRA with fp32 norm weights,
    # *-mixed): bitsandbytes returns their output in that fp32 (mlp_unit_bytes)
    quant_outputs_fp32: bool = False
    # the model runs transformers' modeling code (not torchtune's or LitGPT's own): the
    # family traits read from that code (gelu_new's op-by-op activation, residual dropout)
    transformers_code: bool = True
    # hand-written kernels (fused_lora_kernels, Unsloth): each RMSNorm is one autograd function
    # that saves its input and fp32 rstd (norm_kernel); the adapted linears in ``fast`` run as
    # one autograd function per group (q/k/v, output projection, gated MLP) that saves only
    # the group's input and, in the MLP, the gate and up outputs (:func:`fast_lora_groups`)
    norm_kernel: bool = False
    # Liger-Kernel's gated activation (``liger_kernel``): ``act(gate) * up`` is one autograd
    # function that saves its two inputs and writes their gradients into them in its
    # backward (:func:`mlp_unit_bytes`, :func:`backward_workspace_bytes_per_token`)
    glu_kernel: bool = False
    fast: frozenset[AdaptedKey] = frozenset()
    micro_batch_size: int = 1
    # q, k and v adapted as one module on a fused qkv linear (lora_fused_qkv_adapter, LitGPT's
    # LoRAQKVLinear): one dropout over their shared input, and the padded B output kept
    # when not all three are adapted (qkv_adapter_pad_bytes)
    qkv_adapter: bool = False

    @property
    def kv_grouped(self) -> bool:
        """k/v reach attention at kv-head size: flash-attn, or torch SDPA's ``enable_gqa``;
        not where the loop repeats them first (``kv_repeated``)."""
        if self.kv_repeated:
            return False
        return self.attention is Attention.FLASH or (
            self.grouped_kv and self.attention is Attention.SDPA
        )

    @property
    def adapter_copies(self) -> bool:
        """Each adapter casts its input to its own (fp32) dtype and saves that copy."""
        return self.adapter_bytes is not None and self.adapter_bytes != self.act_bytes

    @property
    def lora_bytes(self) -> int:
        return self.act_bytes if self.adapter_bytes is None else self.adapter_bytes


def linear_key(name: str, d_in: int, d_out: int, role: str, count: int) -> AdaptedKey:
    """A linear's identity among the adapted ones: name, widths and role, and the copy count
    of a routed expert (a routed expert and a shared expert can share the other four:
    Qwen3.5-MoE's experts and shared expert are both ``gate_proj`` of ``hidden x 512``)."""
    return (name, d_in, d_out, role) + ((count,) if count > 1 else ())


def key_of(lin: Any) -> AdaptedKey:
    """:func:`linear_key` of a block linear, or of the adapter on one (``calc.lora.AdaptedLinear``
    carries the same five attributes)."""
    return linear_key(lin.name, lin.d_in, lin.d_out, lin.role, lin.count)


def _saves_input(lin: LinearLayer, cfg: ActConfig) -> bool:
    """The input itself is saved by a trainable weight, by an adapter without dropout
    (its ``A`` needs it), or by a 4-bit linear that keeps it (old bitsandbytes)."""
    if cfg.full:
        return True
    if cfg.quant_keeps_inputs and lin.quantizable:
        return True
    if key_of(lin) in cfg.fused or key_of(lin) in cfg.fast:
        return True
    return not cfg.lora_dropout and not cfg.adapter_copies and key_of(lin) in cfg.adapted


@dataclass(frozen=True)
class BlockParts:
    """A block's linears sorted by what they read."""

    attn_in: tuple[LinearLayer, ...]  # q, k, v or fused qkv: read the attention norm
    attn_out: LinearLayer  # output projection: reads the attention output
    mlp_in: tuple[LinearLayer, ...]  # gate/up/fc1 (and experts'): read the MLP norm
    mlp_down: tuple[LinearLayer, ...]  # down/fc2 of each MLP unit
    routers: tuple[LinearLayer, ...]
    # latent attention's up-projections (q_b_proj, kv_b_proj): read an attention intermediate
    attn_inner: tuple[LinearLayer, ...] = ()


def block_parts(arch: ModelArch) -> BlockParts:
    """Split linears by role and name, never by width: the last attention linear is the
    output projection (every reader lists it last); an MLP linear is an input or an output
    projection by its module name (:data:`calc.arch.MLP_OUTPUT_NAMES`). gpt-oss reads
    2880 values in both expert matrices (intermediate = hidden), so widths cannot tell."""
    attn = [l for l in arch.linears if l.role == "attn"]
    attn_in, mlp_in, routers = norm_readers(arch.linears)
    return BlockParts(
        attn_in,
        attn[-1],
        mlp_in,
        tuple(l for l in arch.linears if l.role == "mlp" and l.mlp_output),
        routers,
        tuple(l for l in attn[:-1] if l.name in ATTN_INNER_NAMES),
    )


def norm_readers(
    linears: tuple[LinearLayer, ...],
) -> tuple[tuple[LinearLayer, ...], tuple[LinearLayer, ...], tuple[LinearLayer, ...]]:
    """The linears that read a block's two norm outputs, by :func:`block_parts`' rule: the
    attention's input projections (every attention linear but the last, the output projection,
    and latent attention's inner ones), the MLP's input projections and the routers. Of one
    block's ``linears`` (one kind's, in a stack of several); a kind without attention linears
    (a recurrent mixer) has no attention readers."""
    attn = [l for l in linears if l.role == "attn"]
    return (
        tuple(l for l in attn[:-1] if l.name not in ATTN_INNER_NAMES),
        tuple(l for l in linears if l.role == "mlp" and not l.mlp_output),
        tuple(l for l in linears if l.role == "router"),
    )


def _group_input_bytes(consumers: tuple[LinearLayer, ...], width: int, cfg: ActConfig) -> int:
    """Saved input shared by ``consumers`` (one copy, or one cast per saving linear; a group of
    ``fast`` linears is one autograd function that saves the tensor it is given, once)."""
    saving = [l for l in consumers if _saves_input(l, cfg)]
    if not saving:
        return 0
    slow = sum(1 for l in saving if key_of(l) not in cfg.fast)
    copies = slow + (1 if slow < len(saving) else 0) if cfg.per_linear_casts else 1
    return cfg.act_bytes * width * copies


def norm_bytes(arch: ModelArch, cfg: ActConfig) -> int:
    """One norm's own saved tensors per token (output excluded).

    RMSNorm: ``4h`` (fp32 upcast) + 4 (the fp32 ``rsqrt`` the scaling ``mul`` saves:
    ``hidden * torch.rsqrt(variance + eps)`` in transformers 5.17 ``LlamaRMSNorm``)
    + ``resid_bytes * h`` if its weight trains.
    Gemma's RMSNorm (``arch.extra["norm_scale_fp32"]``) scales in fp32,
    ``output * (1.0 + self.weight.float())`` (transformers 5.17 ``Gemma2RMSNorm``,
    ``Gemma3RMSNorm``): the normalised copy it saves is fp32, ``4h``.
    LayerNorm: ``resid_bytes * h`` (input) + 8 (mean, rstd).
    Unsloth's RMSNorm kernel (``norm_kernel``; unsloth 2026.8.19 ``kernels/rms_layernorm.py``
    ``Fast_RMS_Layernorm.forward``: ``ctx.save_for_backward(X, W, r)``, ``r`` an fp32 row
    statistic ``torch.empty(n_rows, dtype=torch.float32)``): its input and 4 bytes,
    ``resid_bytes * h + 4``, whether the weight trains or not (its backward computes no weight
    gradient: ``# dW = X`` is commented out)."""
    h = arch.hidden_size
    if arch.norm_kind == "layer":
        return cfg.resid_bytes * h + LAYERNORM_STATS_BYTES
    if cfg.norm_kernel:
        return cfg.resid_bytes * h + FP32_BYTES
    normalised = FP32_BYTES if arch.extra.get("norm_scale_fp32") else cfg.resid_bytes
    return FP32_BYTES * h + FP32_BYTES + (normalised * h if cfg.full else 0)


def attention_core_bytes(arch: ModelArch, cfg: ActConfig, out_proj: LinearLayer) -> int:
    """Saved attention tensors per token.

    SDPA: ``act * (2 q_dim + 2 kv_eff) + 4 heads`` with ``kv_eff = q_dim`` when k, v are
    expanded (GQA through torch SDPA), ``kv_heads * head_dim`` with flash-attn or with
    torch SDPA's ``enable_gqa`` (``attention_grouped_kv``). Torch SDPA returns
    ``(b, heads, s, d)``; the output projection reads its ``transpose(1, 2)`` made
    contiguous, a copy (transformers 5.17 ``sdpa_attention_forward``; torchtune
    ``MultiHeadAttention.forward``; LitGPT ``reshape``), which it saves when its input is
    saved: ``act * q_dim`` more. flash-attn returns ``(b, s, heads, d)``: a view.
    Eager: ``act * (q_dim + 2 kv_eff) + heads * s * (4 + act)`` (fp32 softmax and its
    16-bit copy; only one fp32 copy at fp32) plus the output projection's input copy.
    gpt-oss (``arch.extra["eager_softmax_sinks"]``; transformers 5.17 ``modeling_gpt_oss``
    ``eager_attention_forward``) appends one learned sink logit per head
    (``torch.cat([attn_weights, sinks], dim=-1)``), subtracts the row maximum
    (``combined_logits.max(dim=-1, keepdim=True)``, whose backward keeps the int64 indices)
    and takes the softmax in the logits' own dtype (``F.softmax(..., dtype=combined_logits.dtype)``):
    ``heads * ((s + 1) * act + 8)`` instead of the probabilities above.
    Falcon's eager path (transformers 5.17 ``modeling_falcon.py`` lines 360-365; Llama 4's,
    ``modeling_llama4.py`` line 275, alike) takes
    ``F.softmax(..., dtype=hidden_states.dtype)``, one 16-bit tensor that the product with v
    saves (``arch.extra["eager_softmax_act_dtype"]``: ``heads * s * act``); GPT-2's
    (``modeling_gpt2.py`` ``eager_attention_forward``) calls ``softmax`` without a dtype
    (``arch.extra["eager_softmax_input_dtype"]``): the same without autocast, the fp32 softmax
    and its copy under it (autocast runs ``softmax`` in fp32), and its ``attn_pdrop`` dropout
    keeps its output beside the softmax's (:func:`eager_dropout_mask_bytes`). Falcon, with
    ``multi_query``, multiplies by its single k/v head broadcast, unexpanded
    (``arch.extra["eager_kv_broadcast"]``). Under SDPA it passes that one head to
    ``F.scaled_dot_product_attention`` without ``enable_gqa`` (lines 344-357), which the fused
    kernels refuse (torch 2.13 ``sdp_utils_cpp.h`` ``check_batch_size_and_num_heads_dense``:
    equal head counts), so torch runs its math path (``_scaled_dot_product_attention_math``):
    q, k and v upcast to fp32, the scaled q and k^T and v saved by the two batched products,
    and the fp32 probabilities of ``_safe_softmax``: ``4 * (q_dim + 2 kv) + 4 heads * s``, and
    k and v broadcast to every head when a micro-batch has more than one row (the products'
    ``reshape`` of the broadcast copies it; with one row it is a view), plus the output
    projection's input copy (:func:`sdpa_math_attention_bytes`)."""
    if arch.mla:
        return mla_attention_core_bytes(arch, cfg, out_proj)
    q_dim = arch.num_heads * arch.head_dim
    eager = cfg.attention is Attention.EAGER
    if sdpa_math(arch, cfg):
        return sdpa_math_attention_bytes(arch, cfg, out_proj)
    kv_eff = _kv_saved_width(arch, cfg)
    a = cfg.act_bytes
    out_copy = a * q_dim if _saves_input(out_proj, cfg) else 0
    if eager:
        dropout_mask = eager_dropout_mask_bytes(arch, cfg)
        if arch.extra.get("eager_softmax_sinks"):
            probs = arch.num_heads * ((cfg.seq_len + 1) * a + INDEX_BYTES)
        elif arch.extra.get("eager_softmax_act_dtype") or (
            arch.extra.get("eager_softmax_input_dtype") and not cfg.autocast
        ):
            probs = arch.num_heads * cfg.seq_len * a
            if dropout_mask:
                # the dropout's output beside the softmax's (GPT-2): no copy for it to replace
                probs += arch.num_heads * cfg.seq_len * a
        else:
            probs = arch.num_heads * cfg.seq_len * (FP32_BYTES + (a if a != FP32_BYTES else 0))
        if arch.extra.get("attn_logit_softcapping"):
            # Gemma-2 caps the scores (``attn_weights / cap``, ``tanh``, ``* cap``): the tanh
            # saves its output for its backward (oracle: gemma2/lora-eager-s2048, -7.7 % before)
            probs += arch.num_heads * cfg.seq_len * a
        return a * (q_dim + 2 * kv_eff) + probs + out_copy + dropout_mask
    if cfg.attention is Attention.FLASH:
        out_copy = 0
    return a * (2 * q_dim + 2 * kv_eff) + FP32_BYTES * arch.num_heads + out_copy


def eager_scores_bytes_per_token(
    arch: ModelArch, cfg: ActConfig, half_to_float: bool = False
) -> tuple[int, int, int]:
    """Eager attention's score tensors inside one block, per token (``heads`` rows of ``s``
    keys, the whole square whatever the window): ``(saved, forward, backward)``, where
    ``saved`` is what the block keeps of them (:func:`attention_core_bytes`), ``forward`` what
    is alive at the forward's moment with most of them and ``backward`` what is alive at the
    backward's, beyond ``saved`` (both with the block's other tensors around). (0, 0, 0)
    outside transformers' eager code, and for DeepSeek-V4, whose own count is
    :func:`dsv4_attention_transient_bytes_per_token`.

    transformers 5.17 ``eager_attention_forward`` (Llama and the families that share it), an
    ``a``-byte activation dtype: ``attn_weights`` still names the masked scores (``a``) while
    ``softmax(attn_weights, dim=-1, dtype=torch.float32).to(query.dtype)`` runs, the name being
    rebound only when that line returns; ATen's ``softmax`` (``SoftMax.cpp``, torch 2.13)
    casts a 16-bit input to fp32 first and writes fp32 probabilities, except fp16 on CUDA,
    which takes the fused ``half_to_float`` kernel (bf16 is not on that path): forward ``a + 4
    + 4`` at the softmax, ``a + 4 + a`` at the copy back (fp32 activations: ``4 + 4``). In the
    backward the product with v has freed the 16-bit probabilities when the softmax's gradient
    runs: its saved fp32 output, the incoming gradient made fp32 by ``.to()``'s backward and the
    gradient it returns, ``4 + 4 + 4`` (the returned one in fp16 with ``half_to_float``).
    gpt-oss (``eager_softmax_sinks``, ``s + 1`` wide): the masked scores, the concatenation with
    the sinks less its row maximum and the softmax in the scores' dtype, ``3a`` forward; in the
    backward the slice's gradient (``new_zeros``, then ``scatter`` into the ``s + 1`` row) and
    the softmax's beside the saved probabilities, ``a`` saved and ``2a`` beyond. Falcon and Llama 4
    (softmax in the activation dtype) ``3a`` forward (the scores, their sum with the mask, the
    probabilities; Falcon's loop holds the previous block's probabilities too: ``4a``) and
    ``2a`` beyond ``a``; GPT-2 without autocast (softmax in the input's
    dtype; each step rebinds the name) ``2a`` and ``2a``. Read against the oracle's trace
    (``*/lora-eager-ckpt-s2048``, ``*/lora-eager-s2048``)."""
    if cfg.attention is not Attention.EAGER or not cfg.transformers_code or arch.hyper_connections:
        return 0, 0, 0
    if sdpa_math(arch, cfg):
        return 0, 0, 0
    a, heads, s = cfg.act_bytes, arch.num_heads, cfg.seq_len
    if arch.extra.get("eager_softmax_sinks"):
        width = heads * (s + 1)
        return a * width, 3 * a * width, 2 * a * width
    width = heads * s
    if arch.extra.get("eager_softmax_act_dtype"):
        held = eager_held_probabilities_bytes_per_token(arch, cfg)
        return a * width, 3 * a * width + held, 2 * a * width
    if arch.extra.get("eager_softmax_input_dtype") and not cfg.autocast:
        return a * width, 2 * a * width, 2 * a * width
    copy = a if a != FP32_BYTES else 0
    cast = FP32_BYTES if copy and not half_to_float else 0
    forward = a + FP32_BYTES + max(cast, copy)
    returned = a if half_to_float else FP32_BYTES
    saved = FP32_BYTES + copy
    backward = 2 * FP32_BYTES + returned - saved
    if arch.extra.get("attn_logit_softcapping"):
        # Gemma-2's capped scores: the tanh's saved output stays beside both moments
        saved += a
        forward += a
    return saved * width, forward * width, backward * width


def eager_held_probabilities_bytes_per_token(arch: ModelArch, cfg: ActConfig) -> int:
    """Falcon's eager attention returns its probabilities (transformers 5.17
    ``modeling_falcon.py``: ``return attn_output, attention_scores``), which ``FalconModel``'s
    loop keeps in ``outputs`` until the next block's call returns: in a forward, the previous
    block's beside the current one's (oracle: falcon/lora-eager-ckpt-s2048, -21 % before); not
    in the recompute of a checkpointed block, which no loop holds."""
    if cfg.attention is not Attention.EAGER or not arch.extra.get("eager_kv_broadcast"):
        return 0
    return cfg.act_bytes * arch.num_heads * cfg.seq_len


def mlp_saved_bytes_per_token(arch: ModelArch, cfg: ActConfig) -> int:
    """What a block's MLP and the norm before it save, per token: what its backward, which
    runs first, has freed when the attention's runs (the count
    :func:`backward_workspace_bytes_per_token` makes for Falcon-H1's parallel mixer)."""
    parts = block_parts(arch)
    return (
        norm_bytes(arch, cfg)
        + _group_input_bytes(parts.mlp_in, arch.hidden_size, cfg)
        + sum(mlp_unit_bytes(arch, cfg, d, parts.mlp_in) for d in parts.mlp_down)
    )


def eager_pre_scores_bytes_per_token(arch: ModelArch, cfg: ActConfig) -> int:
    """What one block has saved, per token, when its eager attention computes the scores: the
    input norm, its output as the attention linears save it, and q, k and v (k and v repeated
    to every head where the family's ``repeat_kv`` copies them)."""
    parts = block_parts(arch)
    q_dim = arch.num_heads * arch.head_dim
    return (
        norm_bytes(arch, cfg)
        + _group_input_bytes(parts.attn_in, arch.hidden_size, cfg)
        + cfg.act_bytes * (q_dim + 2 * _kv_saved_width(arch, cfg))
    )


def _kv_saved_width(arch: ModelArch, cfg: ActConfig) -> int:
    """Width of k (and of v) as the attention keeps them, per token: every query head's where
    ``repeat_kv`` (``expand`` then ``reshape``) copies them, else the k/v heads'. No copy with
    grouped k/v (``kv_grouped``), nor from a single k/v head (the reshape merges a size-1
    dimension with the stride-0 one: a view), nor where Falcon's eager path broadcasts its one
    multi-query head (``eager_kv_broadcast``)."""
    broadcast = cfg.attention is Attention.EAGER and arch.extra.get("eager_kv_broadcast")
    expands = not cfg.kv_grouped and not broadcast and 1 < arch.num_kv_heads < arch.num_heads
    return (arch.num_heads if expands else arch.num_kv_heads) * arch.head_dim


def sdpa_math(arch: ModelArch, cfg: ActConfig) -> bool:
    """torch SDPA runs its math path: transformers' Falcon passes its single multi-query k/v
    head without ``enable_gqa`` (:func:`attention_core_bytes`)."""
    return (
        cfg.attention is Attention.SDPA
        and cfg.transformers_code
        and bool(arch.extra.get("eager_kv_broadcast"))
        and arch.num_kv_heads < arch.num_heads
    )


def sdpa_math_attention_bytes(arch: ModelArch, cfg: ActConfig, out_proj: LinearLayer) -> int:
    """Saved tensors per token of torch's SDPA math path (torch 2.13
    ``aten/src/ATen/native/transformers/attention.cpp`` ``_scaled_dot_product_attention_math``,
    composite, run alike on CUDA and CPU): ``query_acc * scale`` (fp32, ``q_dim``) and
    ``key_acc.transpose(-2, -1) * scale`` (fp32) saved by ``matmul``, ``_safe_softmax``'s fp32
    output (``heads * s``) and ``value_acc`` (fp32) saved by the second ``matmul``. The
    products' batch ``reshape`` of the broadcast k and v is a view with one row per
    micro-batch and a copy at every head otherwise."""
    q_dim = arch.num_heads * arch.head_dim
    kv = arch.num_kv_heads * arch.head_dim if cfg.micro_batch_size == 1 else q_dim
    out_copy = cfg.act_bytes * q_dim if _saves_input(out_proj, cfg) else 0
    return FP32_BYTES * (q_dim + 2 * kv + arch.num_heads * cfg.seq_len) + out_copy


def eager_dropout_mask_bytes(arch: ModelArch, cfg: ActConfig) -> int:
    """Dropout on the eager attention's probabilities (``arch.extra["eager_attention_dropout"]``:
    Seed-OSS, ``attention_dropout`` 0.1; transformers 5.17 ``modeling_seed_oss.py``
    ``eager_attention_forward``: ``nn.functional.dropout(attn_weights, p=dropout, ...)`` after
    the softmax's 16-bit copy): CUDA's ``native_dropout`` saves a boolean mask, 1 byte per
    probability, ``heads * s`` per token; the product with v saves the dropout's output in place
    of the 16-bit copy, which is freed (same size)."""
    if cfg.attention is not Attention.EAGER or not arch.extra.get("eager_attention_dropout"):
        return 0
    return arch.num_heads * cfg.seq_len


def mla_attention_core_bytes(arch: ModelArch, cfg: ActConfig, out_proj: LinearLayer) -> int:
    """Multi-head latent attention's saved attention tensors per token (transformers 5.17
    ``DeepseekV3Attention.forward`` and ``expand_kv``), with ``qk = qk_nope + qk_rope``
    (``arch.head_dim``), ``v = v_head_dim`` and ``H`` heads:

    - q: ``torch.cat((q_pass, q_rot))``, a new ``H * qk`` tensor; k: ``key_states``, filled by
      two ``copy_`` into ``new_empty``, ``H * qk``;
    - v: ``value_states`` is a slice of ``kv_b_proj``'s output (``torch.split(kv_nope,
      [qk_nope, v])`` after ``view``/``transpose``), so the kernel (SDPA, or eager's product
      with the probabilities) that saves it keeps that whole output alive:
      ``H * (qk_nope + v)``. flash-attn takes v padded to the q/k width
      (``integrations/flash_attention.py``: ``value = F.pad(value, [0, head_dim -
      v_head_dim])``), a new ``H * qk`` tensor, and the projection's output is freed;
    - the output: SDPA's ``H * v`` (flash-attn's padded ``H * qk``, cropped by a view) and an
      fp32 log-sum-exp per head; eager saves the fp32 softmax and its 16-bit copy instead
      (``heads * s * (4 + act)``);
    - the output projection's input: ``transpose(1, 2).contiguous()`` (SDPA) or the
      reshape of the cropped output (flash-attn), a copy of ``H * v``, when it saves its input.
    """
    heads, qk, v = arch.num_heads, arch.head_dim, arch.v_head_dim
    nope = qk - arch.qk_rope_head_dim
    a = cfg.act_bytes
    out_copy = a * heads * v if _saves_input(out_proj, cfg) else 0
    if cfg.attention is Attention.FLASH:
        return a * heads * 4 * qk + FP32_BYTES * heads + out_copy
    saved_v = heads * (nope + v)
    if cfg.attention is Attention.EAGER:
        probs = heads * cfg.seq_len * (FP32_BYTES + (a if a != FP32_BYTES else 0))
        return a * (2 * heads * qk + saved_v) + probs + out_copy
    return a * (2 * heads * qk + saved_v + heads * v) + FP32_BYTES * heads + out_copy


def mla_latent_bytes(arch: ModelArch, cfg: ActConfig, parts: BlockParts) -> int:
    """Multi-head latent attention's compressed path per token (transformers 5.17
    ``DeepseekV3Attention.forward``): each latent RMSNorm (``q_a_layernorm`` over
    ``q_lora_rank``, ``kv_a_layernorm`` over ``kv_lora_rank``; ``DeepseekV3RMSNorm`` is
    Llama's) saves its fp32 upcast and rsqrt, ``4 * width + 4``, and, with a trained weight, the
    normalised copy at the activation dtype; its output is the input of ``q_b_proj`` /
    ``kv_b_proj``, saved when they save their input. The rotary halves (``k_rot`` and ``q_rot``,
    slices of the projections' outputs) save only cos and sin (a product with a tensor that
    needs no gradient saves that tensor alone), counted once per model
    (:func:`rope_bytes_per_token`)."""
    if not arch.mla:
        return 0
    ranks = [r for r in (arch.q_lora_rank, arch.kv_lora_rank) if r]
    total = 0
    for r in ranks:
        total += FP32_BYTES * r + FP32_BYTES + (cfg.act_bytes * r if cfg.full else 0)
    for lin in parts.attn_inner:
        total += _group_input_bytes((lin,), lin.d_in, cfg)
    return total


def mask_copy_bytes(arch: ModelArch, cfg: ActConfig) -> int:
    """A block whose torch SDPA call receives a boolean mask tensor, per token: on CUDA,
    ``scaled_dot_product_attention`` turns a boolean mask into an additive one of the query's
    dtype before choosing a kernel, a new tensor on every call (ATen
    ``transformers/attention.cpp``, ``convert_boolean_attn_mask``: ``at::where`` over the
    broadcast ``b x 1 x s x s`` shape), and the memory-efficient and cuDNN kernels save it for
    their backward (flash attention takes no mask): ``act * s`` bytes per token, growing with
    ``s^2`` per block. Where: DeepSeek sparse attention (the indexer's selection, transformers
    5.17 ``DeepseekV32Attention.forward``: ``attention_mask & ~index_mask``), a padded batch or
    packed samples kept apart (``mask_saved``), a block whose sliding window the keys reach
    (:func:`block_bytes_per_token`). Eager attention adds the float mask to the scores, a sum
    that saves nothing."""
    if cfg.attention is not Attention.SDPA or not (arch.sparse_attention or cfg.mask_saved):
        return 0
    return cfg.act_bytes * cfg.seq_len


def indexer_transient_bytes_per_token(arch: ModelArch, cfg: ActConfig, batch: int = 1) -> int:
    """The lightning indexer's peak inside one block's forward, per token: tensors it
    allocates under ``torch.no_grad`` and frees before the attention runs (transformers 5.17
    ``DeepseekV32Indexer.forward``, ``GlmMoeDsaIndexer.forward``), with ``Hi`` index heads of
    width ``D``, rotary width ``r`` and ``s`` keys:

    - q: ``wq_b``'s output, its roped rotary part and their concatenation, ``act * Hi * (2D +
      r)``; k: the key norm's output, its roped part and their concatenation, ``act * (2D + r)``;
    - ``torch.matmul(q.float(), k.transpose(-1, -2).float().unsqueeze(1))``: the fp32 q
      (``4 Hi D``) and fp32 k (``4 D``), the fp32 scores ``4 Hi s`` and, with more than one
      sequence per micro-batch, inside ``matmul`` (ATen ``_matmul_impl``) the key broadcast
      over the query positions made contiguous for ``bmm`` (``tensor2.expand(...).reshape(
      ...)`` folds ``b x s`` batch dimensions; with ``b = 1`` that is a view of stride 0, with
      more a copy: ``4 D s``); after it the scaling and the ``relu`` hold two score tensors,
      ``8 Hi s``.
    Under autocast (``*-mixed``) the matmul runs in 16 bits: its operands are cast copies and
    the scores ``act``-sized. The scores are ``s`` wide whatever ``index_topk`` is: the torch
    path scores every key, and the DeepSeek kernels users run on GPU (FP8 ``fp8_index``) score
    them too, in 8 bits and in tiles."""
    if not arch.sparse_attention:
        return 0
    a, hi, d, r, s = (
        cfg.act_bytes,
        arch.index_heads,
        arch.index_head_dim,
        arch.qk_rope_head_dim,
        cfg.seq_len,
    )
    held = a * hi * (2 * d + r) + a * (2 * d + r)
    if cfg.per_linear_casts:  # autocast: fp32 copies, then 16-bit casts into the matmul
        score = a
        operands = (FP32_BYTES + a) * (hi * d + d)
    else:
        score = FP32_BYTES
        operands = FP32_BYTES * (hi * d + d)
    at_bmm = operands + (score * d * s if batch > 1 else 0) + score * hi * s
    return held + max(at_bmm, 2 * score * hi * s)


def sparse_attention_pre_indexer_bytes(arch: ModelArch, cfg: ActConfig) -> int:
    """What one block has saved, per token, when its indexer runs: the input norm, its output
    as the attention linears save it, the latent norms and up-projection inputs, and q, k and
    v (made before the indexer is called, saved by the attention after it)."""
    parts = block_parts(arch)
    heads, qk, v = arch.num_heads, arch.head_dim, arch.v_head_dim
    nope = qk - arch.qk_rope_head_dim
    return (
        norm_bytes(arch, cfg)
        + _group_input_bytes(parts.attn_in, arch.hidden_size, cfg)
        + mla_latent_bytes(arch, cfg, parts)
        + cfg.act_bytes * (2 * heads * qk + heads * (nope + v))
    )


def router_input_bytes(arch: ModelArch, cfg: ActConfig, parts: BlockParts) -> int:
    """The router's fp32 input (``arch.extra["router_fp32_input"]``: DeepSeek-V3 and GLM-4.5,
    transformers 5.17 ``DeepseekV3TopkRouter.forward``: ``F.linear(hidden_states.type(
    torch.float32), self.weight.type(torch.float32))``): a new fp32 copy of the MLP input,
    ``4 h`` per token, that the linear saves when the router's weight trains."""
    if not (cfg.full and arch.extra.get("router_fp32_input")):
        return 0
    return sum(
        _per_block(arch, l, FP32_BYTES * arch.hidden_size) for l in parts.routers if l.is_router
    )


def qk_norm_bytes(arch: ModelArch, cfg: ActConfig) -> int:
    """Per-head RMSNorm of q and k (``arch.extra["qk_norm_per_head"]``: Qwen3, Qwen3-MoE,
    Gemma-3; transformers 5.17 ``self.q_norm(self.q_proj(x).view(...))``), per token: the
    fp32 upcast of q and k, ``4 (q_dim + kv_dim)``, and the fp32 ``rsqrt`` per head,
    ``4 (heads + kv_heads)``; with trainable norm weights also the normalised copy the
    weight's ``mul`` saves, at ``act`` bytes (Qwen3: ``weight * x.to(input_dtype)``) or fp32
    (Gemma: :func:`norm_bytes`).

    OLMo 2 (``arch.extra["qk_norm_whole"]``) normalises each projection whole: one ``rsqrt``
    per token for q and one for k, ``4 * 2``, and its trained weights save the fp32 copy."""
    whole = bool(arch.extra.get("qk_norm_whole"))
    if not (arch.extra.get("qk_norm_per_head") or whole):
        return 0
    width = (arch.num_heads + arch.num_kv_heads) * arch.head_dim
    rsqrt = 2 if whole else arch.num_heads + arch.num_kv_heads
    total = FP32_BYTES * width + FP32_BYTES * rsqrt
    if arch.extra.get("qk_norm_unweighted"):
        # Llama 4's L2 norm holds no weight; only ``qk_norm_layers`` of the blocks have it
        # (its RoPE layers): the per-block average
        layers = arch.extra.get("qk_norm_layers", arch.num_layers)
        n = layers if isinstance(layers, int) and not isinstance(layers, bool) else 0
        return total * n // arch.num_layers
    if cfg.full:
        total += (FP32_BYTES if arch.extra.get("norm_scale_fp32") else cfg.act_bytes) * width
    return total


def fused_qkv_kept_bytes(arch: ModelArch, cfg: ActConfig) -> int:
    """Per token, what a kept fused q/k/v output adds beyond the ``v`` already counted:
    ``act * (q_dim + kv_dim)``, only where every query head has its own k/v head.

    LitGPT ``CausalSelfAttention.forward`` (lit_gpt/model.py at 8641822, Oct 2023;
    litgpt/model.py at 5895df10 and 00af8b0d, Apr and Sep 2024) views the fused output as
    ``(B, T, groups, q_per_kv + 2, hs)``, permutes it, splits q, k, v and reshapes each to
    ``(B, heads, T, hs)``. With ``q_per_kv == 1`` that reshape only drops a size-1 axis, so
    it returns a view; ``v`` goes to ``F.scaled_dot_product_attention`` unchanged and is
    saved for backward, keeping the whole fused storage (``q_dim + 2 kv_dim`` per token)
    alive. With grouped heads, ``expand`` then ``reshape`` copies, and the fused output is
    freed once q, k, v are copied; the roped q and k are new tensors either way.

    Hugging Face Phi-3 (``arch.extra["fused_qkv_view"]``; transformers 5.17
    ``Phi3Attention.forward``) slices q, k, v out of ``qkv_proj``'s output, so ``v`` is a
    view of it whatever the request says; it stays a view unless ``repeat_kv`` copies it
    (grouped heads expanded: eager, or SDPA without ``enable_gqa``)."""
    width = cfg.act_bytes * (arch.num_heads + arch.num_kv_heads) * arch.head_dim
    if arch.extra.get("fused_qkv_view"):
        grouped = cfg.kv_grouped
        return width if arch.num_kv_heads == arch.num_heads or grouped else 0
    if not cfg.keeps_fused_qkv or arch.num_kv_heads != arch.num_heads:
        return 0
    return width


def _per_block(arch: ModelArch, lin: LinearLayer, nbytes: int) -> int:
    """``nbytes`` of a module averaged over the blocks: all of it where every block holds the
    module; in a mixed stack (Llama 4 Maverick's dense and MoE blocks) its share of blocks,
    since the activations are summed as ``num_layers`` times one (average) block."""
    held, blocks = arch.block_share(lin)
    return nbytes if held == blocks else nbytes * held // blocks


def mlp_unit_bytes(
    arch: ModelArch,
    cfg: ActConfig,
    down: LinearLayer,
    mlp_in: tuple[LinearLayer, ...],
    weighted: bool = True,
) -> int:
    """Saved tensors per token of one MLP unit (dense MLP, an expert, a shared expert),
    times the copies a token passes through (``down.active``).

    Gated: ``act * 3m``; plain: ``act * m``; plus ``act * m`` when the down projection
    saves its input. Routed experts (``count > 1``) add the gathered input (when their
    input projections save it) and the output the routing weight multiplies: ``act * h``
    each.

    QLoRA under autocast with fp32 norm weights (``quant_outputs_fp32``: calc's ``*-mixed``
    regime, which is what peft's ``prepare_model_for_kbit_training`` makes of the
    non-quantized parameters): the norm returns ``self.weight * hidden_states.to(input_dtype)``,
    fp32 (transformers 5.17 ``LlamaRMSNorm.forward``; a ``mul`` is no autocast op), and
    bitsandbytes 0.49.2 ``Linear4bit.forward`` casts its result back to that input's dtype
    (``out.to(inp_dtype)``), so a dense unit's gate and up outputs, the activation's output (or
    a plain MLP's activation input) are saved in fp32: ``4 * 3m`` (``4 * m``). The down
    projection's adapter still saves autocast's 16-bit cast of its input. Routed experts are
    left at the compute dtype (not traced by the oracle).

    A ``fast`` gated unit (Unsloth's ``LoRA_MLP``, unsloth 2026.8.19 ``kernels/fast_lora.py``:
    ``ctx.save_for_backward(gateA, gateB, upA, upB, downA, downB, X, e, g)``) keeps the gate
    and up outputs ``e``, ``g``: ``act * 2m``; its input ``X`` is the MLP norm's output
    (:func:`norm_output_bytes`); the activation's output ``h`` and the adapters' rank-``r``
    products are temporaries of its forward, recomputed in its backward."""
    m, a = down.d_in, cfg.act_bytes
    if key_of(down) in cfg.fast:
        return _per_block(arch, down, _expert_copies(arch, down) * a * 2 * m)
    siblings = [l for l in mlp_in if l.count == down.count]
    fp32 = (
        cfg.quant_outputs_fp32
        and down.count == 1
        and bool(siblings)
        and all(l.quantizable for l in siblings)
    )
    widths = _glu_saved_widths(arch) if arch.mlp_gated else _plain_act_saved_widths(arch, cfg)
    if glu_kernel_applies(arch, cfg, down):
        widths = GLU_KERNEL_SAVED_WIDTHS
    per = (FP32_BYTES if fp32 else a) * widths * m
    if _saves_input(down, cfg):
        per += a * m
    if down.count > 1:
        if any(_saves_input(l, cfg) for l in siblings):
            per += a * arch.hidden_size
        per += a * arch.hidden_size
    per *= _expert_copies(arch, down)
    return _per_block(arch, down, per) if weighted else per


def _expert_copies(arch: ModelArch, down: LinearLayer) -> int:
    """Copies of a unit a token passes through: its routed top-k (``down.active``), or all
    experts where the family runs them densely (``arch.extra["experts_run_densely"]``,
    Llama 4 in transformers 5.17: see ``calc.hf_config``)."""
    if down.count > 1 and arch.extra.get("experts_run_densely"):
        return down.count
    return down.active


GLU_KERNEL_SAVED_WIDTHS = 2
"""Intermediate-width tensors Liger-Kernel's gated activation keeps for backward: its two
inputs, the gate and up outputs (``LigerSiLUMulFunction.forward``, and
``LigerGELUMulFunction`` for GeGLU: ``ctx.save_for_backward(a, b)``; liger-kernel
v0.8.2 (000be609, 2026-08-18) ``src/liger_kernel/ops/swiglu.py``, ``ops/geglu.py``). Its product, the down
projection's input, is saved by that projection as in transformers' MLP."""


def glu_kernel_applies(arch: ModelArch, cfg: ActConfig, down: LinearLayer) -> bool:
    """Whether a unit runs Liger's gated activation (``cfg.glu_kernel``): a dense gated
    unit (``LigerSwiGLUMLP``, ``LigerGEGLUMLP``, ``LigerPhi3SwiGLUMLP`` replace the
    family's MLP module; routed experts keep the family's own) of the plain two-input
    form (a family whose gate saves more, ``arch.extra["glu_saved_widths"]``, has no Liger
    module)."""
    return cfg.glu_kernel and down.count == 1 and gated_unit_form(arch)


def _glu_saved_widths(arch: ModelArch) -> int:
    """Intermediate-width tensors a gated unit saves: 3 for ``act(gate) * up`` (the activation's
    input, its output and ``up``; a fused gate_up output kept whole by the slices that read it
    counts as its two halves); ``arch.extra["glu_saved_widths"]`` where the family's gate
    saves more. gpt-oss, 6: transformers 5.17 ``GptOssExperts._apply_gate`` slices the fused
    output (``gate_up[..., ::2]``, ``gate_up[..., 1::2]``), clamps both halves (``clamp`` saves
    its input: the whole ``2m`` output), then ``glu = gate * torch.sigmoid(gate * alpha)``
    saves the clamped gate and the sigmoid's output, and ``(up + 1) * glu`` saves both of its
    factors: ``2m + m + m + m + m``."""
    widths = arch.extra.get("glu_saved_widths", 3)
    return widths if isinstance(widths, int) and not isinstance(widths, bool) and widths > 0 else 3


def _plain_act_saved_widths(arch: ModelArch, cfg: ActConfig) -> int:
    """Intermediate-width tensors a plain MLP's activation saves: 1 (``F.gelu`` saves its
    input); ``arch.extra["plain_act_saved_widths"]`` where the family's activation is written
    op by op (``gelu_new``, 4: its input, ``0.5 * input``, the ``tanh`` output and ``1 +
    tanh``; see ``calc.hf_config``) under transformers' code; LitGPT and torchtune call
    ``F.gelu(approximate="tanh")``, one op."""
    if not cfg.transformers_code:
        return 1
    widths = arch.extra.get("plain_act_saved_widths", 1)
    return widths if isinstance(widths, int) and not isinstance(widths, bool) and widths > 0 else 1


def residual_dropout_bytes(arch: ModelArch, cfg: ActConfig) -> int:
    """Dropout on the attention output and on the MLP output of a block
    (``arch.extra["residual_dropout"]``: GPT-2, Phi with ``resid_pdrop > 0``): CUDA's
    ``native_dropout`` saves a boolean mask of each, 1 byte per element: ``2 h`` per token.
    Its output is not saved (the residual add that reads it needs no input). transformers'
    code only: LitGPT's and torchtune's blocks have no dropout."""
    if not cfg.transformers_code:
        return 0
    return 2 * arch.hidden_size if arch.extra.get("residual_dropout") else 0


def _clipped_projections(arch: ModelArch, parts: BlockParts) -> tuple[LinearLayer, ...]:
    """q, k and v where the family clamps them in place (``arch.extra["clip_qkv"]``)."""
    return parts.attn_in if arch.extra.get("clip_qkv") else ()


def clip_qkv_bytes(arch: ModelArch, cfg: ActConfig) -> int:
    """OLMo's ``clip_qkv``: ``query_states.clamp_(...)`` and likewise k and v, in place
    (transformers 5.17 ``modeling_olmo.py`` lines 245-248). ``clamp``'s backward needs the
    unclamped input, which the in-place op overwrites, so autograd saves a clone of it
    (``original_self = self.clone()`` in the generated in-place kernel): ``act * (q_dim +
    2 kv_dim)`` per token."""
    return sum(cfg.act_bytes * l.d_out for l in _clipped_projections(arch, block_parts(arch)))


def _token_adapters(arch: ModelArch, cfg: ActConfig) -> tuple[LinearLayer, ...]:
    """Adapted linears whose tokens pass through ``A`` and ``B`` as modules of their own (all but
    the fused ones and those inside one of Unsloth's ``fast`` autograd functions, which save
    no rank-``r`` product, no dropout and no cast copy of the input)."""
    return tuple(
        l
        for l in arch.linears
        if key_of(l) in cfg.adapted
        and key_of(l) not in cfg.fused
        and key_of(l) not in cfg.fast
        and not bypassed_adapter(arch, l)
    )


def bypassed_adapter(arch: ModelArch, lin: LinearLayer) -> bool:
    """A linear whose adapter never runs on a GPU: a Mamba-2 mixer's ``out_proj``. In
    training, transformers 5.17 ``NemotronHMamba2Mixer.forward`` calls mamba-ssm's
    ``mamba_split_conv1d_scan_combined(..., outproj_weight=self.out_proj.weight,
    outproj_bias=self.out_proj.bias)`` and returns its output: the fused kernel multiplies by
    the weight itself (``F.linear(out, outproj_weight, outproj_bias)`` in
    ``MambaSplitConv1dScanCombinedFn.forward``, ``mamba_ssm/ops/triton/ssd_combined.py``),
    and peft's ``lora.Linear.weight`` is its base layer's weight, so the module's
    ``forward``, and the adapter with it, is never called."""
    return arch.mamba is not None and lin.role == "mixer" and lin.name == "out_proj"


def lora_rank_bytes(arch: ModelArch, cfg: ActConfig) -> int:
    """LoRA intermediates per token: ``r`` values per adapter a token passes through, in the
    adapter's dtype (``lora_B`` saves ``lora_A``'s output)."""
    if not cfg.adapted:
        return 0
    return sum(
        _per_block(arch, l, cfg.lora_bytes * cfg.rank * l.active)
        for l in _token_adapters(arch, cfg)
    )


def _qkv_adapters(arch: ModelArch, cfg: ActConfig) -> tuple[LinearLayer, ...]:
    """The adapted ``q_proj``, ``k_proj``, ``v_proj`` that form one fused qkv adapter
    (``qkv_adapter``); none unless the block's attention reads its input through exactly
    those three."""
    if not cfg.qkv_adapter:
        return ()
    attn_in = block_parts(arch).attn_in
    if {l.name for l in attn_in} != {"q_proj", "k_proj", "v_proj"}:
        return ()
    token = set(_token_adapters(arch, cfg))
    return tuple(l for l in attn_in if l in token)


def lora_dropout_bytes(arch: ModelArch, cfg: ActConfig) -> int:
    """Adapter dropout per token: each adapter's dropout output (in the adapter's dtype)
    and its boolean mask (1 byte) over the adapter's input: ``(lora + 1) * d_in`` per
    adapter a token passes through (peft / torchtune apply one dropout per adapted
    linear; peft casts the input to the adapter's dtype first). A fused qkv adapter
    (``qkv_adapter``; litgpt 0.5.13 ``lora.py`` ``LoRAQKVLinear.forward``:
    ``after_A = F.linear(self.lora_dropout(x), self.lora_A)``) drops its input once for
    all of q, k, v."""
    if not (cfg.lora_dropout and cfg.adapted):
        return 0
    qkv = _qkv_adapters(arch, cfg)
    total = sum(
        _per_block(arch, l, (cfg.lora_bytes + 1) * l.d_in * l.active)
        for l in _token_adapters(arch, cfg)
        if l not in qkv
    )
    if qkv:
        total += _per_block(arch, qkv[0], (cfg.lora_bytes + 1) * qkv[0].d_in * qkv[0].active)
    return total


def qkv_adapter_pad_bytes(arch: ModelArch, cfg: ActConfig) -> int:
    """What a fused qkv adapter (``qkv_adapter``) keeps when only some of q, k, v are
    adapted: litgpt 0.5.13 ``lora.py`` ``LoRAQKVLinear.zero_pad`` writes the ``lora_B`` output
    (the adapted projections' widths) into a zero tensor of the fused width with
    ``index_copy_(dim=-1, index=self.lora_ind, source=x)``, whose backward saves ``source``:
    ``lora * (sum of the adapted d_out)`` per token. With all three adapted ``zero_pad``
    returns its input and nothing more is saved."""
    qkv = _qkv_adapters(arch, cfg)
    if not qkv or len(qkv) == 3:
        return 0
    return sum(_per_block(arch, l, cfg.lora_bytes * l.d_out * l.active) for l in qkv)


def lora_input_copy_bytes(arch: ModelArch, cfg: ActConfig) -> int:
    """fp32 adapters on a 16-bit base (``lora_adapter_dtype="fp32"``), without adapter
    dropout: each adapted linear casts its input to fp32 for its own adapter and
    ``lora_A`` saves that copy: ``4 * d_in`` per adapter a token passes through (peft
    0.21.0 ``lora/layer.py`` ``Linear.forward``: ``x = self._cast_input_dtype(x,
    lora_A.weight.dtype)`` inside the loop over active adapters). The 16-bit input is
    then saved by nothing (the base weight is frozen)."""
    if not (cfg.adapter_copies and cfg.adapted) or cfg.lora_dropout:
        return 0
    return sum(
        _per_block(arch, l, cfg.lora_bytes * l.d_in * l.active) for l in _token_adapters(arch, cfg)
    )


def router_bytes(arch: ModelArch, parts: BlockParts) -> int:
    """fp32 routing probabilities per token: ``4 * num_experts`` per router."""
    return sum(_per_block(arch, l, FP32_BYTES * l.d_out) for l in parts.routers)


def norm_output_bytes(arch: ModelArch, cfg: ActConfig, parts: BlockParts) -> int:
    """The norms' outputs as the linears reading them save them: one group per norm (a
    parallel block with a single norm feeds attention and MLP from one output)."""
    h = arch.hidden_size
    if arch.parallel_block and arch.norms_per_layer == 1:
        return _group_input_bytes(parts.attn_in + parts.mlp_in + parts.routers, h, cfg)
    return _group_input_bytes(parts.attn_in, h, cfg) + _group_input_bytes(
        parts.mlp_in + parts.routers, h, cfg
    )


def windowed_config(arch: ModelArch, cfg: ActConfig) -> ActConfig | None:
    """How a block with a sliding window runs when it runs otherwise than the stack's other
    blocks: under torch SDPA in transformers' attention (``window_masks``), once the keys reach
    the window (:func:`calc.attention_windows.sdpa_mask_tensor`), the block's SDPA gets the
    sliding mask as a tensor, so ATen's additive copy is saved (:func:`mask_copy_bytes`) and
    transformers repeats grouped k/v to every head (5.17 ``integrations/sdpa_attention.py``
    ``use_gqa_in_sdpa``: no ``enable_gqa`` with a mask). None where the window changes nothing
    the block saves (no window, eager or flash attention, shorter rows, a mask tensor in every
    block already)."""
    window, windowed = window_of(arch)
    if (
        not windowed
        or cfg.attention is not Attention.SDPA
        or not cfg.window_masks
        or cfg.mask_saved
        or not sdpa_mask_tensor(window, cfg.seq_len)
    ):
        return None
    return replace(cfg, mask_saved=cfg.mask_boolean, grouped_kv=False)


@lru_cache(maxsize=256)
def block_bytes_per_token(arch: ModelArch, cfg: ActConfig) -> int:
    """Everything one decoder block saves for backward, per token, in bytes: averaged over
    the blocks with a sliding window (:func:`windowed_config`) and the others. Kept (a value
    memo on two frozen dataclasses, so exact): a plan's setups ask it about a hundred times
    for a few dozen configurations."""
    masked = windowed_config(arch, cfg)
    if masked is not None and not arch.extra.get("gemma4_layers"):
        windowed = window_of(arch)[1]
        plain = arch.num_layers - windowed
        return (
            windowed * _block_bytes_per_token(arch, masked)
            + (plain * _block_bytes_per_token(arch, cfg) if plain else 0)
        ) // arch.num_layers
    return _block_bytes_per_token(arch, cfg)


def _block_bytes_per_token(arch: ModelArch, cfg: ActConfig) -> int:
    """Everything one decoder block saves for backward, per token, in bytes."""
    if arch.hybrid:
        return hybrid_block_bytes_per_token(arch, cfg)
    if arch.extra.get("gemma4_layers"):
        return gemma4_block_bytes_per_token(arch, cfg)
    if arch.hyper_connections:
        return deepseek_v4_block_bytes_per_token(arch, cfg)
    parts = block_parts(arch)
    total = arch.norms_per_layer * norm_bytes(arch, cfg) + norm_output_bytes(arch, cfg, parts)
    total += attention_core_bytes(arch, cfg, parts.attn_out) + fused_qkv_kept_bytes(arch, cfg)
    total += qk_norm_bytes(arch, cfg)
    total += sum(mlp_unit_bytes(arch, cfg, d, parts.mlp_in) for d in parts.mlp_down)
    total += lora_rank_bytes(arch, cfg) + lora_dropout_bytes(arch, cfg) + router_bytes(arch, parts)
    total += qkv_adapter_pad_bytes(arch, cfg)
    total += lora_input_copy_bytes(arch, cfg) + residual_dropout_bytes(arch, cfg)
    total += clip_qkv_bytes(arch, cfg)
    total += mla_latent_bytes(arch, cfg, parts) + router_input_bytes(arch, cfg, parts)
    total += mask_copy_bytes(arch, cfg)
    if cfg.compile_kept is not None:
        total -= int((1 - cfg.compile_kept) * compile_removable_bytes_per_token(arch, cfg))
    return total


# ---- hybrid stacks: Gated DeltaNet blocks beside gated full-attention blocks ---------------
FLA_CHUNK = 64
"""Chunk length of flash-linear-attention's chunked kernels (``chunk_local_cumsum(g,
chunk_size=64)``, ``fla/ops/gated_delta_rule/chunk.py``)."""


def _share(arch: ModelArch, kind: str, nbytes: int) -> int:
    """``nbytes`` of one block of ``kind``, averaged over all blocks of the stack."""
    held, blocks = arch.kind_share(kind)
    return nbytes * held // blocks


def _mixer_linears(arch: ModelArch) -> tuple[tuple[LinearLayer, ...], LinearLayer]:
    """A linear-attention mixer's input projections (they read the block's first norm) and
    its output projection (listed last)."""
    mixer = [l for l in arch.linears if l.role == "mixer"]
    return tuple(mixer[:-1]), mixer[-1]


def gated_attention_bytes(arch: ModelArch, cfg: ActConfig, out_proj: LinearLayer) -> int:
    """What the output gate of a Qwen3-Next / Qwen3.5 attention block adds, per token
    (transformers 5.17 ``Qwen3NextAttention.forward``: ``attn_output =
    attn_output.reshape(*input_shape, -1).contiguous()``, then ``attn_output *
    torch.sigmoid(gate)``, then ``o_proj``): ``sigmoid`` saves its output and the product
    saves the attention output, ``act * q_dim`` each; ``o_proj`` saves the product instead
    of the attention output when it saves its input. With flash-attn the attention output is
    a view of what the kernel saves already."""
    a, q_dim = cfg.act_bytes, arch.num_heads * arch.head_dim
    flash = cfg.attention is Attention.FLASH
    saves = _saves_input(out_proj, cfg)
    # attention_core_bytes counted the contiguous output as o_proj's saved input
    counted = a * q_dim if saves and not flash else 0
    return a * q_dim + (0 if flash else a * q_dim) + (a * q_dim if saves else 0) - counted


def gated_delta_net_bytes(arch: ModelArch, cfg: ActConfig) -> int:
    """Saved tensors per token of one Gated DeltaNet mixer, as it runs on a GPU with the
    kernels transformers 5.17 dispatches to when they are installed
    (``use_kernel_func_from_hub_with_fallback``: ``causal_conv1d.causal_conv1d_fn`` and
    ``fla.chunk_gated_delta_rule``), for ``H`` value heads, key / value head widths
    ``dk`` / ``dv``, ``KD = Hk dk``, ``VD = H dv``, ``CD = 2 KD + VD``:

    - the input projections' shared input (the block's first norm output), by the rule on
      linears;
    - causal-conv1d 1.x ``CausalConv1dFn.forward`` (``causal_conv1d_interface.py``):
      ``ctx.save_for_backward(x, weight, bias, seq_idx, initial_states)``, ``x`` the
      projected q, k, v (a channels-last view, not copied): ``act * CD``; the SiLU is fused
      and its output not saved;
    - flash-linear-attention ``ChunkGatedDeltaRuleFunction.forward``
      (``fla/ops/gated_delta_rule/chunk.py``, with ``use_qk_l2norm_in_kernel=True``):
      ``ctx.save_for_backward(q, q_rstd, k, k_rstd, v, g, beta, A, ...)``: the l2-normalised
      q and k repeated to ``H`` heads (``act * 2 H dk``), their fp32 ``rstd`` (``4 * 2H``),
      ``v`` (``input_guard`` makes the strided slice of the conv output contiguous: a copy,
      ``act * VD``), the fp32 chunk-local cumulative decay (``4 H``), ``beta`` (the
      ``sigmoid`` output, ``act * H``, which ``sigmoid`` saves too) and the WY matrix ``A``
      of ``H x 64`` per token (``solve_tril(..., output_dtype=k.dtype)``). The per-chunk
      recurrent states ``h`` are recomputed in the backward, never saved
      (:func:`gated_delta_backward_bytes_per_token`);
    - the decay ``g = -A_log.float().exp() * F.softplus(a.float() + dt_bias)``:
      ``softplus`` saves its fp32 input (``4 H``), the product its output when ``A_log``
      trains (``4 H``);
    - ``Qwen3NextRMSNormGated.forward`` (torch code either way): the fp32 upcast of the
      kernel output (``4 VD``, saved by ``pow`` and the ``rsqrt`` product), the fp32
      ``rsqrt`` per head (``4 H``), the weight's 16-bit input when it trains (``act * VD``),
      the weighted output and the fp32 ``silu`` output that the gating product saves
      (``act * VD + 4 VD``), the fp32 upcast of the gate ``z`` that ``silu`` saves
      (``4 VD``), and ``out_proj``'s input when it saves it (``act * VD``).

    transformers' torch fallback (``torch_chunk_gated_delta_rule``, what a CPU run or a GPU
    without flash-linear-attention traces) saves far more: fp32 copies of q, k, v, the
    ``64 x 64`` decay and attention matrices of every chunk and the recurrent state of every
    chunk (``H dk dv`` fp32 per 64 tokens); calc does not count that path (see
    ``benchmarks.oracle_sweep``, which traces a model of the kernels). Traced on Qwen3.5-9B,
    LoRA r16 on all linears, 1 x 2048 tokens: 15.1 GiB of saved activations with the kernels
    (calc: the same), 26.2 GiB through the torch fallback; peaks 37.7 and 48.8 GiB."""
    la = arch.linear_attention
    if la is None:
        return 0
    if arch.extra.get("kda"):
        return kimi_delta_attention_bytes(arch, cfg)
    a, h = cfg.act_bytes, la.value_heads
    vd = la.value_dim
    mixer_in, out_proj = _mixer_linears(arch)
    total = _group_input_bytes(mixer_in, arch.hidden_size, cfg)
    total += a * la.conv_dim  # causal_conv1d's x
    total += a * 2 * h * la.key_head_dim + FP32_BYTES * 2 * h  # l2-normalised q, k, rstd
    total += a * vd + FP32_BYTES * h + a * h + a * h * FLA_CHUNK  # v, g, beta, A
    if arch.extra.get("gdn_beta_scaled"):
        total += a * h  # OLMo Hybrid: beta = sigmoid(b) * 2.0, the sigmoid's output apart
    total += FP32_BYTES * h * (2 if cfg.full else 1)  # softplus input (and output)
    total += FP32_BYTES * vd + FP32_BYTES * h + (a * vd if cfg.full else 0)  # gated norm
    total += a * vd + 2 * FP32_BYTES * vd  # weighted output, silu input and output
    total += a * vd if _saves_input(out_proj, cfg) else 0
    return total


KDA_INNER_NAMES = frozenset({"f_b_proj", "g_b_proj"})
"""Kimi Delta Attention's up-projections of its low-rank gates: they read ``f_a_proj`` /
``g_a_proj``'s output (``head_dim`` wide), not the block's norm output (transformers 5.17
``KimiLinearForgetGate.forward``: ``self.f_b_proj(self.f_a_proj(hidden_states))``;
``KimiLinearDeltaAttention.forward``: ``self.g_b_proj(self.g_a_proj(hidden_states))``)."""


def kimi_delta_attention_bytes(arch: ModelArch, cfg: ActConfig) -> int:
    """Saved tensors per token of one Kimi Delta Attention mixer (transformers 5.17
    ``KimiLinearDeltaAttention.forward``), as it runs on a GPU with causal-conv1d and
    flash-linear-attention installed (``chunk_kimi_delta_attention`` is
    ``use_kernel_func_from_hub_with_fallback("chunk_kda", "fla")``), for ``H`` heads of width
    ``d``, ``D = H d``:

    - the projections' inputs: the block's norm output (``q_proj``, ``k_proj``, ``v_proj``,
      ``f_a_proj``, ``b_proj``, ``g_a_proj``) and the two low-rank gate widths ``d`` that
      ``f_b_proj`` / ``g_b_proj`` read, by the rule on linears;
    - causal-conv1d's ``x``: the concatenated q, k, v, ``act * 3 D``;
    - the forget gate ``-exp(A_log) * where(g > 20, g, log(1 + exp(g)))`` on the fp32
      ``f_b_proj(f_a_proj(x)) + dt_bias``: ``exp`` saves its output and ``log`` its input
      (``4 D`` each), ``where`` its boolean condition (``D``); the product saves the fp32
      ``where`` output (``4 D``) only when ``A_log`` trains;
    - ``beta = sigmoid(b_proj(x))``: its output, ``act * H`` (the kernel saves the same tensor);
    - flash-linear-attention ``ChunkKDAFunction.forward`` (``fla/ops/kda/chunk.py``, with
      ``use_qk_l2norm_in_kernel=True`` and the recomputing default ``disable_recompute=False``,
      which drops ``w``, ``u``, ``qg``, ``kg``, ``v_new`` and the chunk states ``h``):
      ``ctx.save_for_backward(q, q_rstd, k, k_rstd, v, g_cumsum, g_input, beta_raw, beta, ...,
      Aqk, Akk, ...)``: the l2-normalised q and k (``act * 2 D``), their fp32 ``rstd``
      (``4 * 2 H``), ``v`` (``input_guard`` makes the strided slice of the conv output
      contiguous: ``act * D``), the fp32 chunk-local cumulative decay and the fp32 decay it was
      given (``4 D`` each), and the intra-chunk matrices ``Aqk`` (fp32) and ``Akk`` (after
      ``solve_tril(..., output_dtype=k.dtype)``), ``H x 64`` per token each;
    - ``KimiLinearRMSNormGated.forward`` (torch either way): the fp32 upcast of the kernel output
      (``4 D``) and its ``rsqrt`` per head (``4 H``), the normalised copy the weight's product
      saves when the weight trains (``4 D``), the weighted output and the fp32 ``sigmoid`` of
      the gate that the gating product saves (``4 D`` each); ``o_proj``'s 16-bit input when it
      saves it (``act * D``).

    transformers' torch fallback (``chunk_kimi_delta_attention``, what a CPU run traces) saves
    fp32 copies of q, k, v and g, a ``64 x 64 x d`` decay tensor per chunk and head
    (``decay_mask``, ``64 d`` fp32 values per token and head) and the recurrent state of every
    chunk: calc does not count that path (``benchmarks.oracle_sweep`` traces a model of the
    kernels, ``tools/oracle/linear_attention.py``). Traced on the sweep's reduced Kimi Linear
    (two mixers of 4 x 64, LoRA r8 on q, k, v, o, 1 x 2048 tokens): a 343 MiB peak with the
    kernels (calc: the same within 0.2 %), 1,142 MiB through the torch fallback."""
    la = arch.linear_attention
    if la is None:
        return 0
    a, h, dim = cfg.act_bytes, la.value_heads, la.value_dim
    mixer_in, out_proj = _mixer_linears(arch)
    outer = tuple(l for l in mixer_in if l.name not in KDA_INNER_NAMES)
    total = _group_input_bytes(outer, arch.hidden_size, cfg)
    total += sum(
        _group_input_bytes((l,), l.d_in, cfg) for l in mixer_in if l.name in KDA_INNER_NAMES
    )
    total += a * la.conv_dim  # causal_conv1d's x
    total += (2 * FP32_BYTES + 1) * dim + (FP32_BYTES * dim if cfg.full else 0)  # forget gate
    total += a * h  # beta
    total += a * 3 * dim + 2 * FP32_BYTES * h  # q, k (l2-normalised), v, rstd
    total += 2 * FP32_BYTES * dim + (FP32_BYTES + a) * h * FLA_CHUNK  # g_cumsum, g, Aqk, Akk
    total += FP32_BYTES * dim + FP32_BYTES * h + (FP32_BYTES * dim if cfg.full else 0)  # norm
    total += 2 * FP32_BYTES * dim  # weighted output, sigmoid of the gate
    total += a * dim if _saves_input(out_proj, cfg) else 0
    return total


def _frozen_gate_bytes(arch: ModelArch, cfg: ActConfig, inputs: tuple[LinearLayer, ...]) -> int:
    """In the first adapted Gated DeltaNet block, what the output gate and the decay do not
    save when the projections they come from hold no adapter (their outputs then need no
    gradient): the gate's fp32 upcast that ``silu`` saves and the weighted output that the
    gating product saves (``4 VD + act VD``), and the decay's ``softplus`` input (``4 H``).
    The projections are named by ``arch.extra["gdn_gate_proj"]`` / ``["gdn_decay_proj"]``."""
    la = arch.linear_attention
    if la is None:
        return 0
    adapted = {l.name for l in inputs if key_of(l) in cfg.adapted}
    if arch.extra.get("kda"):
        # Kimi Delta Attention: a gate branch (g_a_proj, g_b_proj) without an adapter leaves
        # the weighted output unsaved (4 D; the sigmoid's output is still saved), a decay branch
        # (f_a_proj, f_b_proj) without one its exp, log and where tensors (9 D)
        out = 0
        if not adapted & {"g_a_proj", "g_b_proj"}:
            out += FP32_BYTES * la.value_dim
        if not adapted & {"f_a_proj", "f_b_proj"}:
            out += (2 * FP32_BYTES + 1) * la.value_dim
        return out
    out = 0
    if arch.extra.get("gdn_gate_proj") not in adapted:
        out += (FP32_BYTES + cfg.act_bytes) * la.value_dim
    if arch.extra.get("gdn_decay_proj") not in adapted:
        out += FP32_BYTES * la.value_heads
    return out


def gated_delta_backward_bytes_per_token(arch: ModelArch, cfg: ActConfig) -> int:
    """Transient in one Gated DeltaNet layer's backward, per token: flash-linear-attention's
    ``chunk_gated_delta_rule_bwd`` recomputes the chunk states ``h`` (``B x chunks x H x dk
    x dv``, in k's dtype: ``chunk_gated_delta_rule_fwd_h``) and builds their gradients
    ``dh`` alike (``chunk_gated_delta_rule_bwd_dhu``): ``2 act H dk dv / 64``."""
    la = arch.linear_attention
    if la is None:
        return 0
    states = 2 * cfg.act_bytes * la.value_heads * la.key_head_dim * la.value_head_dim // FLA_CHUNK
    if not arch.extra.get("kda"):
        return states
    # Kimi Delta Attention (fla/ops/kda/chunk_bwd.py ``chunk_kda_bwd``, recomputing): at its
    # widest, in ``chunk_kda_bwd_intra``, these are alive together: the recomputed ``w``, ``u``,
    # ``qg``, ``kg`` (``recompute_w_u_fwd``) and ``v_new`` in k's dtype, the states and their
    # gradients, ``dAqk`` (fp32, ``H x 64``), ``dv2`` (v's dtype), the fp32 ``dq``, ``dk``,
    # ``dg``, ``db`` and ``dAkk`` of ``chunk_kda_bwd_wy_dqkg_fused``, and the fp32 ``dq2``,
    # ``dk2``, ``dg2`` and ``db2`` (one ``db`` per ``BK = min(32, K)`` block of the key width)
    # that ``chunk_kda_bwd_intra`` writes beside them
    a, h, dim = cfg.act_bytes, la.value_heads, la.value_dim
    key_blocks = -(-la.key_head_dim // min(32, la.key_head_dim))
    return (
        states
        + 6 * a * dim
        + 6 * FP32_BYTES * dim
        + FP32_BYTES * h * (2 * FLA_CHUNK + 1 + key_blocks)
    )


def _attention_mixer_bytes(arch: ModelArch, cfg: ActConfig, parts: BlockParts) -> int:
    """One full-attention block's mixer: its norm output as q/k/v save it, the attention
    kernel's tensors, the q/k norms and the output gate."""
    return (
        _group_input_bytes(parts.attn_in, arch.hidden_size, cfg)
        + attention_core_bytes(arch, cfg, parts.attn_out)
        + mla_latent_bytes(arch, cfg, parts)
        + _qk_norm_block_bytes(arch, cfg)
        + (
            gated_attention_bytes(arch, cfg, parts.attn_out)
            if arch.extra.get("attention_output_gate")
            else 0
        )
    )


def _qk_norm_block_bytes(arch: ModelArch, cfg: ActConfig) -> int:
    """:func:`qk_norm_bytes` of one attention block (not averaged over the stack)."""
    return qk_norm_bytes(arch, cfg)


def hybrid_block_bytes_per_token(arch: ModelArch, cfg: ActConfig) -> int:
    """Saved bytes per token of the average block of a hybrid stack
    (``arch.linear_attention``): the parts every block holds (two norms, the MLP norm's
    output, the MLP or MoE, LoRA tensors, routers, each linear weighted by the blocks that
    hold it), the full-attention mixer (:func:`_attention_mixer_bytes`) times the share of
    attention blocks and the Gated DeltaNet mixer (:func:`gated_delta_net_bytes`) times
    the share of linear-attention blocks."""
    parts = block_parts(arch)
    if arch.mamba is not None and arch.extra.get("parallel_mamba"):
        return parallel_mamba_block_bytes_per_token(arch, cfg, parts)
    if arch.mamba is not None and arch.extra.get("one_sublayer_per_block"):
        return sublayer_block_bytes_per_token(arch, cfg, parts)
    total = arch.norms_per_layer * norm_bytes(arch, cfg)
    total += _ffn_input_bytes(arch, cfg, parts)
    total += sum(mlp_unit_bytes(arch, cfg, d, parts.mlp_in) for d in parts.mlp_down)
    total += lora_rank_bytes(arch, cfg) + lora_dropout_bytes(arch, cfg) + router_bytes(arch, parts)
    total += lora_input_copy_bytes(arch, cfg)
    total += shared_expert_gate_bytes(arch, cfg) + router_input_bytes(arch, cfg, parts)
    total += _share(arch, "full_attention", _attention_mixer_bytes(arch, cfg, parts))
    total += _share(arch, "linear_attention", gated_delta_net_bytes(arch, cfg))
    total += _share(arch, "conv", short_conv_bytes(arch, cfg))
    total += _share(arch, "mamba", mamba2_bytes(arch, cfg))
    return total


def _ffn_input_bytes(arch: ModelArch, cfg: ActConfig, parts: BlockParts) -> int:
    """The MLP norm's output as the MLP's linears and router save it, per block: with MLP kinds
    apart from the mixers (``ffn_counts``, LFM2-MoE's dense first blocks and routed blocks),
    each kind's own consumers, weighted by its share of blocks."""
    h = arch.hidden_size
    consumers = parts.mlp_in + parts.routers
    if not arch.ffn_counts:
        return _group_input_bytes(consumers, h, cfg)
    return sum(
        _group_input_bytes(tuple(l for l in consumers if l.block_kind in ("", kind)), h, cfg)
        * n
        // arch.num_layers
        for kind, n in arch.ffn_counts
    )


def _ffn_block_bytes(arch: ModelArch, cfg: ActConfig, parts: BlockParts, kind: str) -> int:
    """One block's MLP units, router and shared-expert gate, not averaged, for a block whose
    MLP kind is ``kind`` (``""``: every block's MLP is the same)."""
    mlp_in = tuple(l for l in parts.mlp_in if l.block_kind in ("", kind))
    total = sum(
        mlp_unit_bytes(arch, cfg, d, mlp_in, weighted=False)
        for d in parts.mlp_down
        if d.block_kind in ("", kind)
    )
    total += sum(FP32_BYTES * l.d_out for l in parts.routers if l.block_kind in ("", kind))
    return total + shared_expert_gate_bytes(arch, cfg)


def mamba2_bytes(arch: ModelArch, cfg: ActConfig) -> int:
    """Saved tensors per token of one Mamba-2 mixer in training on a GPU with mamba-ssm and
    causal-conv1d installed: transformers 5.17 ``NemotronHMamba2Mixer.forward`` runs
    ``in_proj`` and hands its output ``zxbcdt`` to mamba-ssm's
    ``mamba_split_conv1d_scan_combined``, one autograd function for the convolution, the
    chunked scan, the gated RMSNorm and ``out_proj`` (``MambaSplitConv1dScanCombinedFn``,
    ``mamba_ssm/ops/triton/ssd_combined.py``): ``ctx.save_for_backward(zxbcdt, conv1d_weight,
    conv1d_bias, out_x, A, D, dt_bias, initial_states, seq_idx, rmsnorm_weight, rstd,
    outproj_weight, outproj_bias)``. Per token:

    - ``in_proj``'s input (the block's norm output), by the rule on linears;
    - ``zxbcdt``, the whole projection (``act * (2 d_inner + 2 G N + H)``);
    - ``out_x``, the scan's output before the gated norm (``act * d_inner``);
    - ``rstd`` of the gated norm, fp32 per group (``4 G``), when the mixer has that norm
      (Falcon-H1 without ``mamba_rms_norm`` passes ``rmsnorm_weight=None``: the scan gates
      by ``z`` itself and ``rstd`` is None).

    The convolution's output, x, B, C, dt and the chunk states are recomputed in its
    backward, and ``out_proj``'s input is rebuilt there (``recompute_output``), never saved;
    an adapter on ``out_proj`` does not run (:func:`bypassed_adapter`). transformers' torch
    path (a CPU run, or a GPU without mamba-ssm) keeps far more: the convolution's output,
    fp32 ``dt``, the per-chunk ``L`` matrices and states of ``torch_chunk_scan``, the gated
    norm's fp32 tensors and ``out_proj``'s input; calc does not count that path."""
    m = arch.mamba
    if m is None:
        return 0
    a = cfg.act_bytes
    in_proj = next(l for l in arch.linears if l.role == "mixer" and l.name == "in_proj")
    total = _group_input_bytes((in_proj,), arch.hidden_size, cfg)
    rstd = FP32_BYTES * m.groups if m.gated_norm else 0
    return total + a * m.in_proj_width + a * m.d_inner + rstd


def mamba2_backward_bytes_per_token(arch: ModelArch, cfg: ActConfig) -> int:
    """Transient in one Mamba-2 mixer's backward, per token (``MambaSplitConv1dScanCombinedFn.
    backward``, ``mamba_ssm/ops/triton/ssd_combined.py``): the recomputed norm output
    (``out_recompute``, ``d_inner``) and convolution output (``xBC_conv``, ``conv_dim``),
    ``dzxbcdt`` (the projection's width), ``dxBC`` (``conv_dim``) and ``dout`` taken through
    ``outproj_weight`` (``d_inner``), at the compute dtype; and the chunk states that
    ``_mamba_chunk_scan_combined_bwd`` recomputes beside their gradients, fp32 ``H x P x N``
    each per chunk: ``2 * 4 H P N / chunk``."""
    m = arch.mamba
    if m is None:
        return 0
    widths = 2 * m.d_inner + 2 * m.conv_dim + m.in_proj_width
    return cfg.act_bytes * widths + 2 * FP32_BYTES * m.heads * m.head_dim * m.state // m.chunk


def _saved_after_last(arch: ModelArch, cfg: ActConfig, kind: str) -> int:
    """What the blocks after the last block of ``kind`` save per token (their norms and
    sublayers), in a stack with one sublayer per block."""
    order = arch.extra.get("mixer_order")
    kinds = [k for k in order if isinstance(k, str)] if isinstance(order, list) else []
    if kind not in kinds:
        return 0
    after = kinds[len(kinds) - kinds[::-1].index(kind) :]
    per = _sublayer_bytes(arch, cfg, block_parts(arch))
    return sum(norm_bytes(arch, cfg) + per.get(k, 0) for k in after)


def _feed_forward_sublayer_bytes(
    arch: ModelArch, cfg: ActConfig, parts: BlockParts, kind: str
) -> int:
    """One ``mlp`` or ``moe`` sublayer of a stack with one sublayer per block: the norm's
    output as its linears and router save it, each unit's tensors (the routed experts' top-k
    copies, the shared expert), the router's fp32 scores and, where its weight trains, the
    fp32 copy of its input (Nemotron-H, ``NemotronHTopkRouter.forward``)."""
    h = arch.hidden_size
    mlp_in = tuple(l for l in parts.mlp_in if l.block_kind == kind)
    routers = tuple(l for l in parts.routers if l.block_kind == kind)
    total = _group_input_bytes(mlp_in + routers, h, cfg)
    total += sum(
        mlp_unit_bytes(arch, cfg, d, mlp_in, weighted=False)
        for d in parts.mlp_down
        if d.block_kind == kind
    )
    total += sum(FP32_BYTES * l.d_out for l in routers)
    if cfg.full and arch.extra.get("router_fp32_input"):
        total += sum(FP32_BYTES * h for l in routers if l.is_router)
    return total


def _sublayer_bytes(arch: ModelArch, cfg: ActConfig, parts: BlockParts) -> dict[str, int]:
    """Per block of each kind (not averaged): the sublayer's saved tensors, the norm's output
    as its linears save it included, the norm's own tensors not."""
    return {
        "mamba": mamba2_bytes(arch, cfg),
        "full_attention": _attention_mixer_bytes(arch, cfg, parts),
        "mlp": _feed_forward_sublayer_bytes(arch, cfg, parts, "mlp"),
        "moe": _feed_forward_sublayer_bytes(arch, cfg, parts, "moe"),
    }


def sublayer_block_bytes_per_token(arch: ModelArch, cfg: ActConfig, parts: BlockParts) -> int:
    """The average block of a stack with one sublayer per block (Nemotron-H,
    ``arch.extra["one_sublayer_per_block"]``): its norm, each sublayer kind
    (:func:`_sublayer_bytes`) times its share of blocks, and the LoRA tensors of the
    adapters that run (each weighted by the blocks that hold it)."""
    total = arch.norms_per_layer * norm_bytes(arch, cfg)
    for kind, nbytes in _sublayer_bytes(arch, cfg, parts).items():
        total += _share(arch, kind, nbytes)
    total += lora_rank_bytes(arch, cfg) + lora_dropout_bytes(arch, cfg)
    return total + lora_input_copy_bytes(arch, cfg)


def parallel_mamba_block_bytes_per_token(arch: ModelArch, cfg: ActConfig, parts: BlockParts) -> int:
    """A block that runs a Mamba-2 mixer beside its attention (Falcon-H1,
    ``arch.extra["parallel_mamba"]``): its two norms, the attention (its own scaled copy of
    the first norm's output as q/k/v save it, the attention kernel's tensors), the Mamba-2
    mixer (:func:`mamba2_bytes`, with ``in_proj``'s own scaled copy), the MLP and the LoRA
    tensors of the adapters that run."""
    total = arch.norms_per_layer * norm_bytes(arch, cfg)
    total += _attention_mixer_bytes(arch, cfg, parts) + mamba2_bytes(arch, cfg)
    total += _group_input_bytes(parts.mlp_in, arch.hidden_size, cfg)
    total += sum(mlp_unit_bytes(arch, cfg, d, parts.mlp_in) for d in parts.mlp_down)
    total += lora_rank_bytes(arch, cfg) + lora_dropout_bytes(arch, cfg)
    return total + lora_input_copy_bytes(arch, cfg)


def _parallel_mamba_first_block_unsaved(arch: ModelArch, cfg: ActConfig, parts: BlockParts) -> int:
    """:func:`first_norm_unsaved_bytes_per_token` for a block running attention and a Mamba-2
    mixer side by side: the first norm saves nothing; neither does a mixer none of whose
    input projections holds an adapter (the attention's kernel keeps nothing when only
    ``o_proj`` does, whose input is then saved); with no adapter in either mixer, the MLP's
    norm reads a stream that needs no gradient and saves nothing either."""
    norm = norm_bytes(arch, cfg)
    attention = _attention_mixer_bytes(arch, cfg, parts)
    mamba = mamba2_bytes(arch, cfg)
    in_proj = [l for l in arch.linears if l.role == "mixer" and not bypassed_adapter(arch, l)]
    attn_in = any(key_of(l) in cfg.adapted for l in parts.attn_in)
    mamba_in = any(key_of(l) in cfg.adapted for l in in_proj)
    attn_out = key_of(parts.attn_out) in cfg.adapted
    if not (attn_in or mamba_in or attn_out):
        return 2 * norm + attention + mamba
    unsaved = norm
    if not attn_in:
        kept = cfg.act_bytes * parts.attn_out.d_in if _saves_input(parts.attn_out, cfg) else 0
        unsaved += attention - (kept if attn_out else 0)
    if not mamba_in:
        unsaved += mamba
    return unsaved


def _sublayer_first_blocks_unsaved(arch: ModelArch, cfg: ActConfig, parts: BlockParts) -> int:
    """:func:`first_norm_unsaved_bytes_per_token` for a stack with one sublayer per block: the
    blocks before the first one holding an adapter that runs save nothing (their input and
    weights need no gradient); in that block, the norm saves nothing, and when only its
    output projection holds one (``o_proj``, ``down_proj``) nothing before it does either."""
    order = arch.extra.get("mixer_order")
    kinds = [k for k in order if isinstance(k, str)] if isinstance(order, list) else []
    per = _sublayer_bytes(arch, cfg, parts)
    groups: dict[str, tuple[tuple[LinearLayer, ...], LinearLayer | None]] = {
        "full_attention": (parts.attn_in, parts.attn_out),
    }
    for kind in ("mlp", "moe"):
        downs = [l for l in parts.mlp_down if l.block_kind == kind]
        groups[kind] = (
            tuple(l for l in parts.mlp_in if l.block_kind == kind),
            downs[0] if len(downs) == 1 else None,
        )
    norm = norm_bytes(arch, cfg)
    unsaved = 0
    for kind in kinds:
        running = [
            l
            for l in arch.linears
            if l.block_kind == kind and key_of(l) in cfg.adapted and not bypassed_adapter(arch, l)
        ]
        if not running:
            unsaved += norm + per[kind]
            continue
        inputs, output = groups.get(kind, ((), None))
        if (
            output is not None
            and running == [output]
            and not any(key_of(l) in cfg.adapted for l in inputs)
        ):
            kept = cfg.act_bytes * output.d_in if _saves_input(output, cfg) else 0
            return unsaved + norm + per[kind] - kept
        return unsaved + norm
    return unsaved


# ---- Gemma 4: blocks of four kinds (sliding / full attention, own or shared keys and values) -
_PLE_MODEL_PROJECTION = "per_layer_model_projection"


def _ple_projection(arch: ModelArch) -> LinearLayer:
    return next(l for l in arch.linears if l.name == _PLE_MODEL_PROJECTION)


def _ple_grad(arch: ModelArch, cfg: ActConfig) -> bool:
    """Gradients reach Gemma 4's per-layer inputs: the embedding or the context projection
    trains, or the projection is adapted. Else they are built from frozen weights and
    nothing on their way saves a tensor."""
    key = key_of(_ple_projection(arch))
    return cfg.full or key in cfg.adapted or key in cfg.fused or key in cfg.fast


def _gemma4_kind_view(arch: ModelArch, kind: str) -> ModelArch:
    """One Gemma 4 block of ``kind`` as a uniform stack: its own linears and every block's,
    its attention's ``head_dim`` and key/value heads (``arch.extra["gemma4_head_dims"]``)."""
    dims = arch.extra["gemma4_head_dims"]["full" if kind.startswith("full") else "sliding"]
    extra = {
        key: val
        for key, val in arch.extra.items()
        if not key.startswith("gemma4_") and key not in ("sliding_window", "window_layers")
    }
    return replace(
        arch,
        linears=tuple(
            replace(l, block_kind="")
            for l in arch.linears
            if l.block_kind in ("", kind) and l.name != _PLE_MODEL_PROJECTION
        ),
        block_counts=(),
        block_kind_params=(),
        head_dim=int(dims[0]),
        num_kv_heads=int(dims[1]),
        extra=extra,
    )


def gemma4_block_bytes_per_token(arch: ModelArch, cfg: ActConfig) -> int:
    """Saved bytes per token of the average Gemma 4 block (transformers 5.17
    ``modeling_gemma4.py``): each kind of block (``arch.extra["gemma4_layers"]``) counted as a
    uniform block of its own shapes (:func:`_gemma4_kind_view`), plus what the family's code
    adds, weighted by the blocks of that kind:

    - ``Gemma4TextAttention``: ``v_norm``, an RMSNorm without weight over v (its fp32 upcast,
      ``4 kv_dim``, and one fp32 statistic per head); a block that shares keys and values
      normalises q only (no ``k_norm``, ``v_norm``) and hands the earlier block's k and v to
      the kernel: with grouped-query SDPA or heads not repeated (one k/v head, or one per query
      head: see :func:`attention_core_bytes`), the same tensors, saved once;
    - the per-layer input (``hidden_size_per_layer_input``): ``per_layer_input_gate`` reads the
      block's output (saved where it trains or is adapted), ``gelu_pytorch_tanh`` saves its
      input, the product with the per-layer input saves the activation's output, and
      ``per_layer_projection`` saves the product where it trains or is adapted;
    - the MoE block (``enable_moe_block``): the router's own RMSNorm without weight and, where
      the router trains or is adapted, its scaled input (a tensor of its own: the router reads
      the residual, not the MLP norm's output); with the router's ``scale`` trained, the
      normalised input that product saves; the routing indices and weights
      (:func:`_gemma4_routing_bytes`);
    - ``Gemma4RMSNorm`` takes ``torch.pow(mean_squared, -0.5)``, whose input is one more fp32
      value per normalised row."""
    order = arch.extra["gemma4_layers"]
    a = cfg.act_bytes
    h = arch.hidden_size
    width = arch.extra.get("ple_width") or 0
    masked = windowed_config(arch, cfg)
    total = 0
    for kind, n in arch.block_counts:
        view = _gemma4_kind_view(arch, kind)
        own = masked if masked is not None and kind.startswith("sliding") else cfg
        grouped = own.kv_grouped
        block = block_bytes_per_token(view, own)
        kv_dim = view.num_kv_heads * view.head_dim
        if kind.endswith("_shared"):
            # q_norm only: the k half of qk_norm_bytes is not there
            block -= FP32_BYTES * (kv_dim + view.num_kv_heads)
            if cfg.full:
                block -= FP32_BYTES * kv_dim
            if grouped or view.num_kv_heads in (1, view.num_heads):
                block -= 2 * a * kv_dim
        else:
            block += FP32_BYTES * (kv_dim + view.num_kv_heads)  # v_norm
        if width:
            by_name = {l.name: l for l in view.linears if l.role == "ple"}
            block += a * width  # gelu's input
            if _ple_grad(arch, cfg):
                block += a * width  # gelu's output, saved by the product with the input
            if _saves_input(by_name["per_layer_input_gate"], cfg):
                block += a * h
            if _saves_input(by_name["per_layer_projection"], cfg):
                block += a * width
        # Gemma4RMSNorm takes ``torch.pow(mean_squared, -0.5)``: pow saves its input, one fp32
        # value per normalised row beside the statistic every RMSNorm keeps (full-width
        # norms, q per head, k and v per key/value head, the router's)
        rows = arch.norms_per_layer + view.num_heads
        rows += 0 if kind.endswith("_shared") else 2 * view.num_kv_heads
        block += FP32_BYTES * rows
        for router in (l for l in view.linears if l.role == "router"):
            block += FP32_BYTES + _gemma4_routing_bytes(arch, cfg)
            block += FP32_BYTES * h + FP32_BYTES  # router.norm, no weight
            if cfg.full:
                block += a * h  # the normalised input, saved by ``* self.scale``
            if _saves_input(router, cfg):
                block += a * h
        total += n * block
    return total // len(order)


def _gemma4_routing_bytes(arch: ModelArch, cfg: ActConfig) -> int:
    """The routing tensors of one Gemma 4 MoE block, per token (``k`` experts per token),
    as traced through ``Gemma4TextRouter.forward`` and transformers 5.17's default
    ``grouped_mm`` experts: the ``topk`` indices, the sum the top-k weights are divided by,
    the normalised weights and the gathered ``per_expert_scale`` (their product saves
    both; with the scale trained, the weights once more), and in the experts two int64
    indices per routed copy (sort and gather), the scatter's index, a boolean mask and the
    fp32 routing weight each copy's output is multiplied by."""
    k = arch.experts_per_token
    total = INDEX_BYTES * k * 4 + FP32_BYTES + FP32_BYTES * k + cfg.act_bytes * k
    total += k + FP32_BYTES * k
    return total + (FP32_BYTES * k if cfg.full else 0)


def gemma4_outside_bytes_per_token(arch: ModelArch, cfg: ActConfig) -> int:
    """Gemma 4's per-layer inputs, built once per forward (``Gemma4TextModel
    .project_per_layer_inputs``): ``per_layer_model_projection`` saves the embedding's output
    where it trains or is adapted, ``per_layer_projection_norm`` (RMSNorm over each block's
    slice of ``width``: fp32 upcast and one statistic per slice, and the fp32 normalised copy
    where its weight trains), the context projection's adapter (one, read once per token) and
    the combined per-layer inputs, ``layers * width`` at the compute dtype, which every block's
    product keeps (each block reads a view of it); with frozen weights (:func:`_ple_grad`) only
    those. The
    second rotary table (full-attention blocks: ``global_head_dim`` wide) is counted here."""
    width = arch.extra.get("ple_width") or 0
    a = cfg.act_bytes
    dims = arch.extra["gemma4_head_dims"]
    final_norm_pow = FP32_BYTES  # the final norm's pow input (see gemma4_block_bytes_per_token)
    kinds = {kind.split("_")[0] for kind, _ in arch.block_counts}
    total = final_norm_pow + (2 * a * int(dims["full"][0]) if kinds == {"sliding", "full"} else 0)
    if kinds == {"full"}:
        total += 2 * a * (int(dims["full"][0]) - arch.head_dim)
    if not width:
        return total
    layers = arch.num_layers
    total += a * layers * width
    if not _ple_grad(arch, cfg):
        return total
    total += FP32_BYTES * layers * (width + 2)
    if cfg.full:
        total += FP32_BYTES * layers * width
    proj = _ple_projection(arch)
    if _saves_input(proj, cfg):
        total += a * arch.hidden_size
    if key_of(proj) in cfg.adapted and key_of(proj) not in cfg.fused | cfg.fast:
        # one adapter, read once per token (not once per block)
        total += cfg.lora_bytes * cfg.rank
        if cfg.lora_dropout:
            total += (cfg.lora_bytes + 1) * arch.hidden_size
        elif cfg.adapter_copies:
            total += cfg.lora_bytes * arch.hidden_size
    return total


def short_conv_bytes(arch: ModelArch, cfg: ActConfig) -> int:
    """Saved tensors per token of one gated short-convolution mixer (transformers 5.17
    ``Lfm2ShortConv.forward``: ``B, C, x = in_proj(h).transpose(-1, -2).chunk(3, dim=-2)``,
    ``B * x``, ``causal_conv1d_fn``, ``C * conv``, ``out_proj`` of the contiguous product), on a
    GPU with causal-conv1d installed:

    - ``in_proj``'s input (the block's first norm output), by the rule on linears;
    - ``B * x`` saves both factors, views of ``in_proj``'s output, which keeps all of it:
      ``act * 3h``;
    - causal-conv1d ``CausalConv1dFn`` saves its input ``B x`` (``act * h``; channels-last, not
      copied) and fuses nothing else;
    - ``C * conv`` saves the convolution's output (``act * h``; ``C`` is the view above);
    - ``out_proj``'s input, the product made contiguous, when it saves it (``act * h``)."""
    if not arch.short_conv_kernel:
        return 0
    a, h = cfg.act_bytes, arch.hidden_size
    mixer_in, out_proj = _mixer_linears(arch)
    total = _group_input_bytes(mixer_in, h, cfg) + a * 3 * h + a * h + a * h
    return total + (a * h if _saves_input(out_proj, cfg) else 0)


def shared_expert_gate_bytes(arch: ModelArch, cfg: ActConfig) -> int:
    """The shared expert's scalar gate (``arch.extra["shared_expert_gated"]``; transformers
    5.17 ``Qwen3NextSparseMoeBlock.forward``: ``F.sigmoid(self.shared_expert_gate(x)) *
    shared_expert_output``): the product saves the shared expert's output and the
    ``sigmoid`` output (which ``sigmoid`` saves too): ``act * (h + 1)`` per token."""
    if not arch.extra.get("shared_expert_gated"):
        return 0
    return cfg.act_bytes * (arch.hidden_size + 1)


def _hybrid_first_block_unsaved(arch: ModelArch, cfg: ActConfig, parts: BlockParts) -> int:
    """:func:`first_norm_unsaved_bytes_per_token` for a hybrid stack, in the order of its
    mixers (``arch.extra["mixer_order"]``): with a frozen embedding, no block before the
    first one that holds an adapter has anything requiring grad, so it saves nothing (its
    norms, mixer and MLP; Qwen3.5 with attention-only targets: the three Gated DeltaNet
    blocks before the first attention block). In the first adapted block, the first norm
    saves nothing; when only the mixer's output projection holds an adapter (LFM2's
    ``out_proj`` among attention targets), nothing of the mixer before it does either; when
    the mixer holds none, neither does anything before the MLP (its two norms and the
    mixer)."""
    if arch.mamba is not None and arch.extra.get("parallel_mamba"):
        return _parallel_mamba_first_block_unsaved(arch, cfg, parts)
    if arch.mamba is not None and arch.extra.get("one_sublayer_per_block"):
        return _sublayer_first_blocks_unsaved(arch, cfg, parts)
    order = arch.extra.get("mixer_order")
    kinds = [k for k in order if isinstance(k, str)] if isinstance(order, list) else []
    adapted_kinds = {
        l.block_kind
        for l in arch.linears
        if key_of(l) in cfg.adapted and not bypassed_adapter(arch, l)
    }
    mixer_in, out_proj = _mixer_linears(arch)
    mixers = {
        "full_attention": (parts.attn_in, parts.attn_out, _attention_mixer_bytes(arch, cfg, parts)),
        "linear_attention": (mixer_in, out_proj, gated_delta_net_bytes(arch, cfg)),
        "conv": (mixer_in, out_proj, short_conv_bytes(arch, cfg)),
        "mamba": (mixer_in, out_proj, mamba2_bytes(arch, cfg)),
    }
    mlp = sum(mlp_unit_bytes(arch, cfg, d, parts.mlp_in) for d in parts.mlp_down)
    mlp += router_bytes(arch, parts) + shared_expert_gate_bytes(arch, cfg)
    ffn_order = arch.extra.get("ffn_order")
    ffns = [k for k in ffn_order if isinstance(k, str)] if isinstance(ffn_order, list) else []
    norm = norm_bytes(arch, cfg)
    unsaved = 0
    for i, kind in enumerate(kinds):
        inputs, output, mixer_bytes = mixers[kind]
        ffn = ffns[i] if i < len(ffns) else ""
        if ffn:
            # a block of one MLP kind holds that kind's MLP, not the average block's
            mlp = _ffn_block_bytes(arch, cfg, parts, ffn)
        if "" in adapted_kinds or kind in adapted_kinds or (ffn and ffn in adapted_kinds):
            if any(key_of(l) in cfg.adapted for l in inputs):
                partial = _frozen_gate_bytes(arch, cfg, inputs) if kind == "linear_attention" else 0
                return unsaved + norm + partial
            if key_of(output) in cfg.adapted and not bypassed_adapter(arch, output):
                # only the output projection trains: the mixer's tensors before it need no
                # gradient; its adapter keeps its input, and the MLP norm reads a stream that
                # requires grad
                kept = cfg.act_bytes * output.d_in if _saves_input(output, cfg) else 0
                return unsaved + norm + mixer_bytes - kept
            return unsaved + 2 * norm + mixer_bytes
        unsaved += 2 * norm + mixer_bytes + mlp
    return unsaved


def compile_removable_bytes_per_token(arch: ModelArch, cfg: ActConfig) -> int:
    """Saved bytes per token of one block that a compiled graph could recompute from
    tensors it keeps anyway, in the backward, with pointwise kernels only:

    - each RMSNorm's fp32 upcast and normalised copy (:func:`norm_bytes`) and the 16-bit
      output its linears save, down to its input and the fp32 ``rstd`` (``resid * h + 4``);
      a LayerNorm already saves only that;
    - in a gated MLP the activation's output and the down projection's input (the product),
      both pointwise in the gate and up projections, which stay; in a plain MLP the down
      projection's input, pointwise in the first projection's output.

    Matmul outputs and the attention kernel's saved tensors are never recomputed (the
    partitioner does not recompute matmuls)."""
    parts = block_parts(arch)
    h, a = arch.hidden_size, cfg.act_bytes
    removable = 0
    if arch.norm_kind == "rms":
        kept = cfg.resid_bytes * h + FP32_BYTES
        removable += max(
            0,
            arch.norms_per_layer * (norm_bytes(arch, cfg) - kept)
            + norm_output_bytes(arch, cfg, parts),
        )
    for down in parts.mlp_down:
        per = a * down.d_in if arch.mlp_gated else 0
        if _saves_input(down, cfg):
            per += a * down.d_in
        removable += _per_block(arch, down, down.active * per)
    return removable


BATCH_BYTES_PER_TOKEN = 16
"""The batch on the GPU: ``input_ids`` and ``labels``, int64 each (Hugging Face's data
collators build ``labels`` as a copy of ``input_ids``; torchtune and LitGPT hold tokens
and targets too)."""


def rope_bytes_per_token(arch: ModelArch, cfg: ActConfig) -> int:
    """RoPE's ``cos`` and ``sin`` at the compute dtype, built once per forward and saved by
    every block's ``q * cos`` and ``rotate_half(q) * sin``: ``2 * act * head_dim`` per token
    (transformers 5.17 ``LlamaRotaryEmbedding.forward`` returns them ``.to(x.dtype)``).
    None for learned positions (GPT-2) and ALiBi (BLOOM)."""
    if arch.learned_positions or arch.family == "bloom":
        return 0
    if arch.extra.get("no_rope") or arch.hyper_connections:
        # DeepSeek-V4: each RoPE application saves its own repeat_interleave'd copies
        # (counted in the block, :func:`_dsv4_attention_bytes`)
        return 0
    # multi-head latent attention rotates ``qk_rope_head_dim`` of each head (``DeepseekV3Config``
    # sets ``head_dim = qk_rope_head_dim`` for its rotary embedding)
    width = arch.qk_rope_head_dim or arch.head_dim
    rotary = arch.extra.get("rope_dim")  # partial rotary (Qwen3-Next: a quarter of head_dim)
    if isinstance(rotary, int) and not isinstance(rotary, bool) and rotary > 0:
        width = rotary
    if arch.extra.get("rope_fp32"):
        # Olmo3RotaryEmbedding.forward returns cos and sin in fp32 ("returns cos/sin in fp32
        # without casting to x.dtype", transformers 5.17 modeling_olmo3.py)
        return 2 * FP32_BYTES * width
    return 2 * cfg.act_bytes * width


def head_bytes_per_token(arch: ModelArch, cfg: ActConfig) -> int:
    """Once per token outside the blocks: the final norm's tensors, the output layer's
    input when its weight trains, RoPE's cos/sin (:func:`rope_bytes_per_token`) and the
    batch (:data:`BATCH_BYTES_PER_TOKEN`)."""
    saves_input = cfg.full or cfg.head_keeps_input
    return (
        norm_bytes(arch, cfg)
        + (cfg.act_bytes * arch.hidden_size if saves_input else 0)
        + rope_bytes_per_token(arch, cfg)
        + BATCH_BYTES_PER_TOKEN
        + (gemma4_outside_bytes_per_token(arch, cfg) if arch.extra.get("gemma4_layers") else 0)
        + (deepseek_v4_outside_bytes_per_token(arch, cfg) if arch.hyper_connections else 0)
    )


def quant_inputs_bytes_per_token(arch: ModelArch, act_bytes: int) -> int:
    """The inputs the 4-bit linears of every block keep (``qlora_keeps_inputs``), per token,
    counted once each: bitsandbytes < 0.43.2 ``MatMul4Bit.forward`` stores its input ``A`` in
    ``ctx.tensors``, a reference to the tensor the layer read, so linears that read one
    tensor hold one copy: the attention norm's output (q, k, v or fused qkv), the
    attention output (the output projection), the MLP norm's output (gate / up / fc1), and
    each down projection's input. A routed expert reads its own gathered rows,
    ``active`` tokens' worth per token across the experts. Used for what a held previous
    micro-batch keeps (:func:`calc.memory.previous_micro_batch_bytes`)."""
    parts = block_parts(arch)
    h = arch.hidden_size
    groups = ((parts.attn_in, h), ((parts.attn_out,), parts.attn_out.d_in), (parts.mlp_in, h))
    seen: set[tuple[int, int, int, str]] = set()
    total = 0
    for index, (lins, width) in enumerate(groups):
        for l in lins:
            key = (index, l.count, l.active, l.block_kind)  # one tensor per group and routing
            if l.quantizable and key not in seen:
                seen.add(key)
                total += act_bytes * width * l.active * arch.blocks_of(l)
    for l in parts.mlp_down:
        if l.quantizable:
            total += act_bytes * l.d_in * l.active * arch.blocks_of(l)
    return total


def first_norm_unsaved_bytes_per_token(arch: ModelArch, cfg: ActConfig) -> int:
    """With a frozen embedding (LoRA, QLoRA) the first block's input needs no gradient, so
    its first norm saves nothing: autograd records no graph for an op none of whose inputs
    requires grad. The blocks' other tensors still save (their adapters require grad).

    When no attention linear of the block is adapted (MLP-only targets), nothing requires
    grad before the first block's MLP either: its whole attention half records no graph
    (the norms before the MLP, the attention kernel's saved tensors, the q/k norms, a fused
    qkv output), and the MLP's adapters save only their own input. Later blocks read a
    residual stream that block 0's adapters made require grad, so they save everything.
    Found by the oracle (tools/oracle, qwen3_moe ``lora-mlp-fused-*``: calc +5.7 % before).
    Sequential blocks with two norms (pre-attention, pre-MLP) or Gemma's four (the
    post-attention norm also precedes the MLP); other layouts keep the first norm only.

    A parallel block (NeoX, Falcon, Phi: attention and MLP read the same normalised input)
    whose MLP holds no adapter: block 0's MLP reads only the frozen embedding's stream, so
    it records no graph either: its activation's saved tensors (:func:`mlp_unit_bytes`) and
    the mask of its output's dropout (Phi's ``resid_dropout(self.mlp(hidden_states))``,
    ``modeling_phi.py`` line 295) are not kept."""
    if cfg.full:
        return 0
    if arch.hyper_connections:
        # DeepSeek-V4: block 0's first hyper-connection and norm read the frozen embedding's
        # streams; only ``post``, cast for the product with the attention's output, is saved
        return (
            hyper_connection_bytes(arch, cfg)
            - cfg.act_bytes * arch.hyper_connections
            + norm_bytes(arch, cfg)
        )
    parts = block_parts(arch)
    if arch.hybrid:
        return _hybrid_first_block_unsaved(arch, cfg, parts)
    attention = (*parts.attn_in, parts.attn_out)
    attn_trains = any(key_of(l) in cfg.adapted for l in attention)
    # OLMo's in-place clamp of q, k, v clones only the outputs that require grad: in block 0,
    # those of adapted projections
    clipped = _clipped_projections(arch, parts)
    unclipped = sum(cfg.act_bytes * l.d_out for l in clipped if key_of(l) not in cfg.adapted)
    return unclipped + _first_block_unsaved(arch, cfg, parts, attn_trains)


def _first_block_unsaved(
    arch: ModelArch, cfg: ActConfig, parts: BlockParts, attn_trains: bool
) -> int:
    before_mlp = {2: 2, 4: 3}.get(arch.norms_per_layer)
    if arch.extra.get("norms_after_sublayers"):
        # OLMo 3 (transformers 5.17 Olmo3DecoderLayer.forward): ``post_attention_layernorm``
        # reads the attention's output, which requires grad once the attention trains, so it
        # saves its tensors even in block 0; the attention reads the raw residual stream
        if attn_trains:
            return 0
        return (
            norm_bytes(arch, cfg)
            + _group_input_bytes(parts.attn_in, arch.hidden_size, cfg)
            + attention_core_bytes(arch, cfg, parts.attn_out)
            + qk_norm_bytes(arch, cfg)
        )
    if arch.parallel_block:
        mlp = (*parts.mlp_in, *parts.mlp_down)
        if any(key_of(l) in cfg.adapted for l in mlp):
            return norm_bytes(arch, cfg)
        return (
            norm_bytes(arch, cfg)
            + sum(mlp_unit_bytes(arch, cfg, d, parts.mlp_in) for d in parts.mlp_down)
            + residual_dropout_bytes(arch, cfg) // 2
        )
    if attn_trains or before_mlp is None:
        return norm_bytes(arch, cfg)
    return (
        before_mlp * norm_bytes(arch, cfg)
        + _group_input_bytes(parts.attn_in, arch.hidden_size, cfg)
        + attention_core_bytes(arch, cfg, parts.attn_out)
        + fused_qkv_kept_bytes(arch, cfg)
        + qk_norm_bytes(arch, cfg)
        + mla_latent_bytes(arch, cfg, parts)
    )


def checkpoint_bytes_per_token(arch: ModelArch, cfg: ActConfig) -> int:
    """Activation checkpointing keeps each block's input: ``resid_bytes * h`` per token
    (Korthikanti et al. 2022, sec. 4.3: ``2 s b h`` per layer at 16 bits); DeepSeek-V4's
    block input is its ``hc`` residual streams."""
    return cfg.resid_bytes * arch.hidden_size * max(arch.hyper_connections, 1)


def selective_op_bytes_per_token(
    arch: ModelArch, cfg: ActConfig, matmuls: tuple[Matmul, ...]
) -> int:
    """What a block wrapped with torchtitan's per-op policy keeps per token
    (:mod:`calc.checkpointing`): its input, as full checkpointing keeps
    (:func:`checkpoint_bytes_per_token`), the outputs of its kept ``aten.mm`` (``d_out`` values
    each, in the compute dtype; an adapter's in the adapters' dtype) and, under SDPA, the
    flash or memory-efficient kernel's outputs: the attention output (``q_dim`` values) and its
    fp32 log-sum-exp (``4 heads`` bytes), the ops ``_save_list`` names. Counted as if SDPA runs
    one of those two kernels (cuDNN's or the math backend's outputs are not in the list and
    would be recomputed instead)."""
    total = checkpoint_bytes_per_token(arch, cfg)
    for mm in matmuls:
        if mm.kept:
            size = cfg.lora_bytes if ".lora_" in mm.name else cfg.act_bytes
            total += size * mm.d_out
    if cfg.attention is Attention.SDPA:
        total += cfg.act_bytes * arch.num_heads * arch.head_dim + 4 * arch.num_heads
    return total


def backward_workspace_bytes_per_token(arch: ModelArch, cfg: ActConfig) -> int:
    """Gradients in flight inside one block's backward: the gradient of the block's
    output and input (``2 h``) and of the widest MLP intermediate pair (``2 m``), at the
    compute dtype.

    A ``fast`` gated unit (Unsloth's ``LoRA_MLP.backward``, unsloth 2026.8.19
    ``kernels/fast_lora.py``) allocates one intermediate-width gradient, ``DW``; its SwiGLU
    backward (``kernels/swiglu.py`` ``_DWf_DW_dfg_kernel``) writes ``h``, ``df`` and ``de`` into
    ``DW``, ``e`` and ``g`` in place, and ``torch.matmul(df, upW.t(), out=X)`` writes the input's
    gradient into the saved ``X``: ``2 h + m``."""
    parts = block_parts(arch)
    widest = max((d.d_in for d in parts.mlp_down), default=arch.intermediate_size)
    pair = 2 * widest
    if parts.mlp_down and all(
        key_of(d) in cfg.fast or glu_kernel_applies(arch, cfg, d) for d in parts.mlp_down
    ):
        # Unsloth's LoRA_MLP (below), or Liger's gated activation, whose backward writes the
        # gate's and up's gradients into its saved inputs (LigerSiLUMulFunction.backward):
        # only the down projection's input gradient is new
        pair = widest
    if arch.mamba is not None and arch.extra.get("parallel_mamba"):
        # in a block's backward the MLP's runs first, then the attention's (computed after the
        # mixer in the forward), then the Mamba-2 mixer's: by then the block's MLP norm, MLP
        # and attention have freed what they saved
        parts = block_parts(arch)
        freed = norm_bytes(arch, cfg) + _attention_mixer_bytes(arch, cfg, parts)
        freed += _group_input_bytes(parts.mlp_in, arch.hidden_size, cfg)
        freed += sum(mlp_unit_bytes(arch, cfg, d, parts.mlp_in) for d in parts.mlp_down)
        mamba = mamba2_backward_bytes_per_token(arch, cfg) - freed
        return cfg.act_bytes * 2 * arch.hidden_size + max(cfg.act_bytes * pair, mamba)
    if arch.mamba is not None and not arch.extra.get("one_sublayer_per_block"):
        # a mixer and an MLP per block (Granite 4.0 hybrids): the MLP's backward runs first,
        # then the Mamba-2 mixer's, once the MLP and its norm have freed what they saved
        parts = block_parts(arch)
        freed = norm_bytes(arch, cfg) + _group_input_bytes(
            parts.mlp_in + parts.routers, arch.hidden_size, cfg
        )
        freed += sum(
            mlp_unit_bytes(arch, cfg, d, parts.mlp_in, weighted=False) for d in parts.mlp_down
        )
        mamba = mamba2_backward_bytes_per_token(arch, cfg) - freed
        return cfg.act_bytes * 2 * arch.hidden_size + max(cfg.act_bytes * pair, mamba)
    if arch.mamba is not None:
        # one sublayer per block: the MLP's and the Mamba-2 mixer's backward run in different
        # blocks, never together; when the last Mamba-2 block's runs, the blocks after it have
        # freed what they saved
        mamba = mamba2_backward_bytes_per_token(arch, cfg) - _saved_after_last(arch, cfg, "mamba")
        return cfg.act_bytes * 2 * arch.hidden_size + max(cfg.act_bytes * pair, mamba)
    if arch.extra.get("kda"):
        # the MLP's backward runs before the mixer's: its intermediates and Kimi Delta
        # Attention's transient are never alive together
        linear = gated_delta_backward_bytes_per_token(arch, cfg)
        return cfg.act_bytes * 2 * arch.hidden_size + max(cfg.act_bytes * pair, linear)
    return cfg.act_bytes * (2 * arch.hidden_size + pair) + gated_delta_backward_bytes_per_token(
        arch, cfg
    )


def fast_lora_groups(arch: ModelArch, adapted: frozenset[AdaptedKey]) -> frozenset[AdaptedKey]:
    """The adapted linears Unsloth runs inside its own autograd functions
    (``fused_lora_kernels``): unsloth 2026.8.19 ``models/llama.py``
    ``FastLlamaModel.patch_peft_model`` (with ``lora_dropout == 0`` and ``bias == "none"``)
    replaces a layer's MLP by ``LoRA_MLP`` when ``gate_proj``, ``up_proj`` and ``down_proj``
    all carry an adapter and no bias, its q/k/v by ``LoRA_QKV`` when all three do, and its
    output projection by ``LoRA_W`` when it does. Dense units only (a routed expert is no
    ``mlp.gate_proj``); a fused q/k/v projection has no such path."""
    if arch.hybrid:
        return frozenset()
    parts = block_parts(arch)
    out: set[AdaptedKey] = set()

    def group(lins: tuple[LinearLayer, ...]) -> None:
        if lins and all(key_of(l) in adapted and not l.bias and l.count == 1 for l in lins):
            out.update(key_of(l) for l in lins)

    names = {l.name for l in parts.attn_in}
    if names == {"q_proj", "k_proj", "v_proj"}:
        group(parts.attn_in)
    group((parts.attn_out,))
    # a MoE block's ``mlp`` is the sparse block, which has no ``gate_proj`` of its own
    if arch.mlp_gated and len(parts.mlp_in) == 2 and len(parts.mlp_down) == 1:
        group((*parts.mlp_in, *parts.mlp_down))
    return frozenset(out)


TORCHTUNE_OUTPUT_CHUNKS = 8
"""Chunks of torchtune's chunked output and loss: ``CEWithChunkedOutputLoss.__init__``
``num_output_chunks: int = 8`` (``modules/loss/ce_chunked_output_loss.py`` at 30b8519e8 and
1814feb17; the recipes pass it to ``model.set_num_output_chunks``)."""


def logits_bytes_per_token(
    arch: ModelArch,
    act_bytes: int,
    chunked: bool,
    outputs_kept: bool = False,
    upcast_in_model: bool = False,
    chunks_keep_fp32: bool = False,
    loss_on_logits_dtype: bool = False,
) -> int:
    """Logits and loss per token, at the loss's peak (the start of its backward).

    Unchunked (transformers 5.17 ``ForCausalLMLoss``: ``logits.float()`` then
    ``cross_entropy``): the fp32 log-softmax saved for backward (4), the gradient
    ``nll_loss_backward`` writes into it (4) and the fp32 logits' gradient
    ``_log_softmax_backward_data`` computes while both are alive (4): ``12 V``. The
    output layer's own logits (``act`` bytes) are saved by nothing (the upcast's backward
    needs no input), so they are freed after the forward unless the training loop holds
    the model's output (``loss_outputs_kept``): ``+ act * V``, or ``+ 4 V`` when the model
    itself returns fp32 logits (``logits_upcast_in_model``, :func:`kept_logits_bytes_per_token`).
    Chunked / fused cross-entropy computes the fp32 part one chunk at a time: ``V * act``
    (the 16-bit logits, then their gradient). torchtune's chunked loss run eagerly
    (``chunks_keep_fp32``: ``F.cross_entropy(chunk.float(), ...)`` per chunk, not compiled)
    saves every chunk's fp32 log-softmax: at the end of its forward, before the recipe's
    ``del logits``, the 16-bit chunks (``act V``), the log-softmax of every chunk (``4 V``)
    and the last chunk's fp32 upcast, not yet freed (``4 V / 8``,
    :data:`TORCHTUNE_OUTPUT_CHUNKS`): ``6.5 V`` in bf16. Its backward then frees them chunk
    by chunk (at most ``4 V + 10 V / 8`` alive).
    Gemma-2's final soft-capping (``arch.extra["final_logit_softcapping"]``; transformers
    5.17 ``Gemma2ForCausalLM.forward``: ``logits / cap``, ``tanh``, ``* cap``) saves the
    ``tanh`` output for backward: ``+ act * V``.
    Cross-entropy on the model's 16-bit logits (``loss_on_logits_dtype``, a loop calling
    ``F.cross_entropy(outputs.logits...)`` with no upcast): torch's ``log_softmax`` keeps the
    input's dtype (``half_to_float=False``) and saves its output, ``nll_loss_backward``
    writes the gradient of that output and ``_log_softmax_backward_data`` the logits'
    gradient, each ``act * V``: ``3 act V`` instead of ``12 V``. Logits that are fp32 already
    (``upcast_in_model``, fp32 activations) make the two the same.
    """
    v = arch.vocab_size
    if chunked:
        fp32 = v * FP32_BYTES + v * FP32_BYTES // TORCHTUNE_OUTPUT_CHUNKS if chunks_keep_fp32 else 0
        return v * act_bytes + fp32
    capped = act_bytes if arch.extra.get("final_logit_softcapping") else 0
    loss = act_bytes if loss_on_logits_dtype and not upcast_in_model else FP32_BYTES
    return v * (3 * loss + capped) + kept_logits_bytes_per_token(
        arch, act_bytes, chunked, outputs_kept, upcast_in_model
    )


def chunked_head_grad_bytes(arch: ModelArch, act_bytes: int, tokens: int) -> int:
    """Logits and loss of an output layer run chunk by chunk (``output_layer_chunked``,
    torchtune 0.6.1 ``TransformerDecoder.chunked_output``) whose weight is trained, at the
    moment of its backward where the most is alive, in bytes:

    ``3 V h act + tokens * act V (n - 2) / n``

    The loss's backward runs every chunk's cross-entropy and upcast first (they were created
    after all the chunks' output projections), leaving each chunk's 16-bit logit gradient
    (``act V`` per token in all); then each chunk's projection computes a ``V x h`` weight
    gradient, which torch's autograd engine adds to the ones already arrived out of place
    (``torch/csrc/autograd/input_buffer.cpp`` ``accumulate``: ``old_var + var``). At the
    second chunk's sum the running sum, the new gradient and the result are alive (``3 V h``)
    while ``n - 2`` chunks' logit gradients still wait (``n``:
    :data:`TORCHTUNE_OUTPUT_CHUNKS`). A tied output layer's weight is the embedding's: the
    same sums."""
    n = TORCHTUNE_OUTPUT_CHUNKS
    v = arch.vocab_size
    return 3 * v * arch.hidden_size * act_bytes + tokens * act_bytes * v * (n - 2) // n


LITGPT_LOSS_CHUNK = 128
"""Tokens per sequence in one chunk of LitGPT's loss: ``finetune/lora.py`` ``fit`` runs
``model(input_ids, lm_head_chunk_size=128)`` and ``utils.py`` ``chunked_cross_entropy`` has
``chunk_size: int = 128`` (litgpt 0.5.13)."""


def held_chunks_loss_bytes(
    arch: ModelArch, act_bytes: int, batch: int, seq_len: int, head_trained: bool
) -> int:
    """Logits and loss at the loss's peak of a chunked 16-bit cross-entropy on logits the loop
    holds (``chunked_loss_holds_logits``, litgpt 0.5.13 ``utils.py`` ``chunked_cross_entropy``),
    for ``batch`` sequences of ``seq_len`` tokens, in bytes. With ``T = batch * seq_len``
    tokens, ``T' = batch * (seq_len - 1)`` scored (the targets are shifted by one) and ``r =
    batch * min(128, seq_len - 1)`` rows in the first chunk (:data:`LITGPT_LOSS_CHUNK`):

    ``act V (T + T' + 2 r)`` with a frozen output layer (``finetune/lora.py``: the output
    layer runs per chunk, ``lm_head_chunk_size=128``). The loop's ``logits`` (``act V T``)
    live through ``fabric.backward``. Each chunk's ``F.cross_entropy`` saves its 16-bit
    ``log_softmax`` output; the backward runs the chunks' ``nll_loss_backward`` and
    ``_log_softmax_backward_data`` last chunk first, each freeing its saved output and leaving
    its logits' gradient for the output layer, whose backward comes after every chunk's (it was
    recorded before the loss): one 16-bit tensor per scored token (``act V T'``). The first
    chunk, differentiated last, holds its saved output, the nll gradient and the logits'
    gradient at once (two more chunks: ``2 act V r``).

    With the output layer trained (``finetune/full.py``: ``logits = model(input_ids)`` whole,
    ``chunked_cross_entropy(logits[..., :-1, :], ...)`` splits it), the largest of that moment,
    the chunks' gradients concatenated by the split's backward and padded back to ``T`` rows by
    the slice's (``act V (2 T + T')``), and the output layer's matmul backward: the loop's
    logits, the sliced gradient, the weight's gradient and the hidden states' (``act (2 V T + V
    h + T h)``). Its chunks are 128 rows of the flattened logits (``logits.split(chunk_size)``
    after ``reshape(-1, V)``), so there ``r = min(128, T')``."""
    v, h = arch.vocab_size, arch.hidden_size
    tokens = batch * seq_len
    scored = batch * (seq_len - 1)
    if not head_trained:
        first = batch * min(LITGPT_LOSS_CHUNK, seq_len - 1)
        return act_bytes * v * (tokens + scored + 2 * first)
    loss = act_bytes * v * (tokens + scored + 2 * min(LITGPT_LOSS_CHUNK, scored))
    sliced = act_bytes * v * (2 * tokens + scored)
    head = act_bytes * (2 * v * tokens + v * h + tokens * h)
    return max(loss, sliced, head)


FUSED_HEAD_TOKEN_TILE = 4096
"""Tokens per tile of TRL's fused LM head: ``TOKEN_CHUNK_SIZE`` (TRL 1.16.0
``trl/kernels/chunked_logprob.py``)."""

FUSED_HEAD_VOCAB_TILE = 32768
"""Vocabulary entries per tile of TRL's fused LM head: ``_CHUNKED_LOGPROB_CHUNK_SIZE`` (TRL
1.16.0 ``trl/trainer/utils.py``)."""

FUSED_HEAD_SAVED_BYTES_PER_TOKEN = 8 + 4 + 4 + 1 + 4
"""Per-token bytes of TRL's fused head besides the hidden states, at the start of its
backward: the int64 targets (8), the fp32 log-normaliser and entropy it saves (4 + 4), the bool
label mask ``masked_scatter`` saves (1) and the fp32 gradient of the log-probs (4)."""


def fused_head_loss_bytes(
    arch: ModelArch, act_bytes: int, tokens: int, head_trainable: bool = False
) -> int:
    """Loss of a fused LM head (``loss_fused_lm_head``, TRL 1.16.0 ``ChunkedLogProbFunction``)
    at its peak, inside its backward, for ``tokens`` scored tokens, in bytes:

    ``tokens * (2 act h + 4 h + 21) + min(tokens, 4096) * 32768 * act``

    - ``act h``: the copy of the scored hidden states it saves (``hidden_states[mask]``);
    - ``4 h``: ``grad_hidden``, accumulated in fp32 (``torch.zeros(..., dtype=torch.float32)``);
    - ``act h``: ``grad_hidden.to(hidden.dtype)``, written while the fp32 one is alive;
    - 21: :data:`FUSED_HEAD_SAVED_BYTES_PER_TOKEN`;
    - the tile buffer ``mm_buf`` (:data:`FUSED_HEAD_TOKEN_TILE` x :data:`FUSED_HEAD_VOCAB_TILE`,
      ``torch.empty((min(N, TOKEN_CHUNK_SIZE), chunk_size))``: the full chunk width even when the
      vocabulary is smaller), into which each logits tile is recomputed and turned into its
      gradient in place.

    With a trainable output layer (``head_trainable``: full fine-tuning, or the output layer in
    ``lora_modules_to_save``) the backward also accumulates the weight's gradient in fp32
    (``grad_weight``, ``4 V h``) and returns its cast (``grad_weight.to(weight.dtype)``,
    ``act V h``), written while the fp32 one is alive: ``+ (4 + act) V h``.

    No ``tokens x V`` tensor exists: the 16-bit logits that a chunked loss otherwise holds
    (:func:`logits_bytes_per_token`) are never built."""
    h = arch.hidden_size
    per_token = 2 * act_bytes * h + FP32_BYTES * h + FUSED_HEAD_SAVED_BYTES_PER_TOKEN
    tile = min(tokens, FUSED_HEAD_TOKEN_TILE) * FUSED_HEAD_VOCAB_TILE
    weight_grad = (FP32_BYTES + act_bytes) * arch.vocab_size * h if head_trainable else 0
    return tokens * per_token + tile * act_bytes + weight_grad


GRAD_IN_FORWARD_CHUNK_FP32_BYTES = 4 * 2**30
"""The most fp32 logits one chunk of Unsloth's fused loss holds, in bytes: unsloth_zoo
2026.8.13 (ce232d6c) ``fused_losses/cross_entropy_loss.py`` ``_get_chunk_multiplier``,
``target_gb = min(free_gb * 0.5, 4.0)`` (half the device memory free at its first call, capped
at 4 GiB); on a card with less than 8 GiB free there the chunks are smaller."""


def grad_in_forward_loss_bytes(arch: ModelArch, act_bytes: int, tokens: int) -> int:
    """Loss that computes the hidden states' gradient chunk by chunk in its forward
    (``loss_grad_in_forward``: unsloth_zoo 2026.8.13 ``fused_losses/cross_entropy_loss.py``
    ``UnslothFusedLoss``), at its peak, for ``tokens`` tokens, in bytes:

    ``tokens * 2 act h + ceil(tokens / n) * V * act``

    - ``act h``: the hidden states it reads (the final norm's output), alive until it returns;
    - ``act h``: ``grad_inputs = torch.empty_like(hidden_states)``, filled chunk by chunk
      (``torch.func.grad_and_value`` of ``compute_fused_ce_loss`` per chunk) and the only
      activation it saves (``ctx.save_for_backward(grad_inputs, grad_lm_head, ...)``);
    - one chunk's logits, ``torch.chunk`` into ``n`` chunks (``get_chunk_size``: 1 when the
      whole fp32 logits ``tokens * V * 4`` are at most the target, else that quotient rounded up
      to a multiple of 4; target :data:`GRAD_IN_FORWARD_CHUNK_FP32_BYTES`, an upper bound),
      counted as calc counts a compiled chunked loss (the chunk is ``torch.compile``'d): the
      16-bit logits, then their gradient in their place.

    No ``tokens x V`` tensor exists, and nothing of the loss is alive in the backward but
    ``grad_inputs``, which its backward hands on (:func:`logits_bytes_per_token` counts the
    whole 16-bit logits of a chunked loss instead)."""
    v = arch.vocab_size
    whole = tokens * v * FP32_BYTES
    target = GRAD_IN_FORWARD_CHUNK_FP32_BYTES
    chunks = 1 if whole <= target else -(-whole // (4 * target)) * 4
    return tokens * 2 * act_bytes * arch.hidden_size + -(-tokens // chunks) * v * act_bytes


LIGER_HEAD_GRAD_TRANSIENT_BYTES = 6
"""Bytes per output-layer weight element that Liger's fused linear cross-entropy allocates
for each chunk while it accumulates the weight's gradient without an fp32 accumulator (its
default, ``accum_dtype=None``): ``grad_weight += torch.mm(grad_logits_chunk.t(),
_input_chunk).float()``, a 16-bit ``[V, h]`` product (2) and its fp32 copy (4), freed after
each chunk (liger-kernel v0.8.2 (000be609, 2026-08-18) ``ops/fused_linear_cross_entropy.py``;
since v0.6.2, #830; v0.5.x accumulated in place with ``torch.addmm(out=grad_weight)``). An fp32
weight (mixed precision with fp32 weights: ``grad_weight`` is fp32) takes ``torch.addmm(...,
out_dtype=torch.float32, out=grad_weight)`` instead, on torch >= 2.8 and cards of compute
capability 8 or more (the same function), which allocates nothing per chunk; calc counts that
path for every fp32 weight (an estimate does not know the card: on a V100 or T4 the cast path's
6 bytes come back)."""


def liger_flce_loss_bytes(
    arch: ModelArch, act_bytes: int, tokens: int, head_weight_bytes: int | None
) -> int:
    """Liger-Kernel's fused linear cross-entropy (``liger_kernel`` with ``chunked_loss``;
    liger-kernel v0.8.2 (000be609, 2026-08-18) ``ops/fused_linear_cross_entropy.py``
    ``fused_linear_cross_entropy_forward``) at its peak, in its forward, for ``tokens``
    tokens, in bytes:

    ``tokens * 2 act h + chunk * V * act (+ V h (w + 6) when the output layer trains)``

    - ``act h``: the hidden states it reads (the final norm's output), alive until the model's
      forward returns;
    - ``act h``: ``grad_input = torch.zeros_like(_input)``, filled chunk by chunk and saved for
      the backward, which only scales it in place;
    - one chunk's logits, ``_input_chunk @ weight.t()`` in the compute dtype, whose gradient
      the cross-entropy kernel writes in their place; ``chunk`` tokens as
      :func:`calc.liger.flce_chunk_tokens` sizes it (about ``h / V`` of the tokens);
    - when the output layer trains (``head_weight_bytes``: its weight's bytes per element,
      ``w``): ``grad_weight = torch.zeros_like(weight)``, saved for the backward, and the
      per-chunk transient of its accumulation (:data:`LIGER_HEAD_GRAD_TRANSIENT_BYTES`; none for an
      fp32 weight).

    No ``tokens x V`` tensor exists; the fp32 per-token loss (4 bytes) is left out."""
    from .liger import flce_chunk_tokens

    v, h = arch.vocab_size, arch.hidden_size
    chunk = flce_chunk_tokens(tokens, v, h)
    head = 0
    if head_weight_bytes is not None:
        transient = LIGER_HEAD_GRAD_TRANSIENT_BYTES if head_weight_bytes < FP32_BYTES else 0
        head = v * h * (head_weight_bytes + transient)
    return tokens * 2 * act_bytes * h + chunk * v * act_bytes + head


def output_cast_bytes_per_token(arch: ModelArch, act_bytes: int, loss_saved_fp32: bool) -> int:
    """The moment accelerate's ``convert_outputs_to_fp32`` copies the model's returned 16-bit
    logits to fp32 (``outputs_cast_fp32``), logits and loss bytes per token: the 16-bit logits
    (``act V``, still the output's), what the model's own loss has saved by then and the fp32
    copy (``4 V``, ``tensor.float()``). transformers 5.17's unchunked ``ForCausalLMLoss`` has
    saved its fp32 log-softmax (``4 V``, ``loss_saved_fp32``; its fp32 upcast is freed once
    ``log_softmax`` has read it) and, with Gemma-2's soft-capping, the ``tanh`` output
    (``act V``); a chunked loss that holds the logits saved those same 16-bit logits
    (Unsloth 2024 ``kernels/cross_entropy_loss.py`` ``Fast_CrossEntropyLoss.forward``:
    ``ctx.save_for_backward(logits, logsumexp, labels)``), and a loop that computes its loss
    on the output has saved nothing yet. The copy and the 16-bit logits are freed when the loop
    drops the output (the Trainer's ``compute_loss`` returns the loss alone), before the
    backward; this moment is the larger of the forward's end only where the loss holds less
    than it (the chunked loss: ``act V + 4 V`` against ``act V``)."""
    v = arch.vocab_size
    saved = 0
    if loss_saved_fp32:
        saved = v * FP32_BYTES + (act_bytes * v if arch.extra.get("final_logit_softcapping") else 0)
    return v * act_bytes + saved + v * FP32_BYTES


def kept_logits_bytes_per_token(
    arch: ModelArch,
    act_bytes: int,
    chunked: bool,
    outputs_kept: bool,
    upcast_in_model: bool = False,
) -> int:
    """Logits the training loop holds through the whole backward (``loss_outputs_kept``):
    ``act * V`` per token; none with a chunked loss, which returns no full logits.

    A model that returns fp32 logits (``logits_upcast_in_model``: torchtune's
    ``TransformerDecoder.forward`` ends in ``self.output(h).float()``) hands the loop the fp32
    tensor, and the 16-bit one it came from is freed (the upcast's backward saves nothing):
    ``4 V``. torchtune's recipes before 8a98fbaa3 (2024-07-28, "delete logits before bwd")
    kept that tensor in the local ``logits`` through ``loss.backward()``: with the fp32
    log-softmax the loss saves (4) and the two gradients of its backward (4 + 4), ``16 V``
    per token at the start of the loss backward."""
    if not outputs_kept or chunked:
        return 0
    return arch.vocab_size * (FP32_BYTES if upcast_in_model else act_bytes)


# ---- DeepSeek-V4: hyper-connections, compressed and compressed-sparse attention ------------
def _dsv4_linear(arch: ModelArch, name: str, role: str = "attn", kind: str = "") -> LinearLayer:
    """The block linear ``name`` of ``role`` (a compressor's of block ``kind``)."""
    return next(
        l for l in arch.linears if l.name == name and l.role == role and l.block_kind == kind
    )


def hyper_connection_bytes(arch: ModelArch, cfg: ActConfig) -> int:
    """One manifold-constrained hyper-connection's saved tensors per token (transformers 5.17
    ``DeepseekV4HyperConnection.forward`` and the mixing in ``DeepseekV4DecoderLayer.forward``),
    ``hc`` streams of ``h``, ``t`` Sinkhorn iterations, ``mix = (2 + hc) hc``:

    - the weightless RMSNorm of the flattened streams: their fp32 copy (``4 hc h``, saved by
      ``square`` and the product) and its fp32 statistic; with ``fn`` trained, ``F.linear``
      saves the normalised copy (``4 hc h``) and the products with the trained scales the
      mixing logits (``4 mix``);
    - ``pre`` and ``post``: both sigmoids' outputs and ``pre + eps`` (``4 * 3 hc``);
    - Sinkhorn: the softmax's output and each normalisation's numerator (``2 t`` tensors of
      ``4 hc^2``) and denominator (``2 t - 1`` of ``4 hc``);
    - the streams (``act * hc h``), saved by the collapse ``pre * streams`` and the residual
      mix ``comb^T @ streams``, with ``comb`` and ``post`` cast to the compute dtype
      (``act * (hc^2 + hc)``) and the sublayer's output (``act * h``) that ``post`` multiplies.
    ``.float()`` of ``fn`` for ``F.linear`` is a weight-sized fp32 copy each hyper-connection
    saves once per micro-batch (:func:`hyper_connection_weight_bytes`)."""
    hc, h, a = arch.hyper_connections, arch.hidden_size, cfg.act_bytes
    iters = int(arch.extra.get("dsv4_sinkhorn_iters", 20))
    mix = (2 + hc) * hc
    total = FP32_BYTES * hc * h + FP32_BYTES + FP32_BYTES * 3 * hc
    total += 2 * iters * FP32_BYTES * hc * hc + (2 * iters - 1) * FP32_BYTES * hc
    total += cfg.resid_bytes * hc * h + a * (hc * hc + hc) + a * h
    if cfg.full:
        total += FP32_BYTES * hc * h + FP32_BYTES * mix
    return total


def hyper_connection_weight_bytes(arch: ModelArch) -> int:
    """The fp32 copy of every hyper-connection's ``fn`` (``fn.float()``, ``mix x hc h``) that
    ``F.linear`` saves, two per block and ``hc_head``'s, once per micro-batch."""
    hc, h = arch.hyper_connections, arch.hidden_size
    if not hc:
        return 0
    return FP32_BYTES * hc * h * (2 * arch.num_layers * (2 + hc) * hc + hc)


def _dsv4_attention_bytes(arch: ModelArch, cfg: ActConfig, kind: str) -> int:
    """One DeepSeek-V4 attention block of ``kind`` per token (``DeepseekV4Attention.forward``,
    eager: the only implementation transformers 5.17 runs for the family):

    - ``q_a_norm`` (fp32 copy, statistic; the normalised copy with its weight trained), the q
      latent where ``q_b_proj`` saves its input; ``q_b_norm`` without weight over each head:
      ``q_b_proj``'s output, its fp32 copy, one fp32 statistic and its 16-bit cast per head;
    - ``kv_norm`` likewise over the one k=v head; RoPE applied three times (q, kv and the
      output with ``-sin``), each saving its ``repeat_interleave``'d cos and sin (``2 act r`` per
      position, shared by a micro-batch's rows);
    - eager attention over the ``s`` keys and the ``s / m`` compressed entries: q, the
      concatenated k=v (``act * head_dim * (1 + 1/m)``; with more than one row per
      micro-batch, its copy broadcast to every head for each of the two products), the softmax
      over keys, entries and the sink column in the compute dtype and the row maximum's int64
      indices;
    - the grouped output projection: ``o_a_proj``'s ``bmm`` saves its input (the heads
      regrouped, a copy) where its weight trains, ``o_b_proj`` its input where it saves it;
    - a compressor (``DeepseekV4HCACompressor``: ``kv_proj``, ``gate_proj`` of ``head_dim``;
      ``DeepseekV4CSACompressor``: two overlapping series, ``2 head_dim``, laid out anew): the
      fp32 softmax over each window, its 16-bit cast and the values it weighs, then per
      compressed entry its ``kv_norm`` and RoPE. The CSA indexer only picks entries
      (``topk(...).indices``): its graph is freed when it returns, nothing stays saved."""
    a, h = cfg.act_bytes, arch.hidden_size
    heads, d, q, r = arch.num_heads, arch.head_dim, arch.q_lora_rank, arch.qk_rope_head_dim
    s = cfg.seq_len
    rates = arch.extra.get("dsv4_compress_rates", {})
    rate = int(rates.get(kind, 0)) if kind != "sliding_attention" else 0
    stack_kind = kind if arch.block_counts else ""
    groups = int(arch.extra.get("dsv4_o_groups", 1))
    o_rank = int(arch.extra.get("dsv4_o_rank", 1))
    inputs = [_dsv4_linear(arch, "q_a_proj"), _dsv4_linear(arch, "kv_proj")]
    if rate:
        inputs += [
            _dsv4_linear(arch, "kv_proj", kind=stack_kind),
            _dsv4_linear(arch, "gate_proj", kind=stack_kind),
        ]
    total = _group_input_bytes(tuple(inputs), h, cfg)
    total += FP32_BYTES * q + FP32_BYTES + (a * q if cfg.full else 0)  # q_a_norm
    if _saves_input(_dsv4_linear(arch, "q_b_proj"), cfg):
        total += a * q
    total += a * heads * d + FP32_BYTES * heads * d + (FP32_BYTES + a) * heads  # q_b_norm
    total += FP32_BYTES * d + FP32_BYTES + (a * d if cfg.full else 0)  # kv_norm
    # RoPE on q, kv and the output: cos and sin are built per position (position_ids 1 x s),
    # shared by the micro-batch's rows
    total += 3 * 2 * a * r // max(cfg.micro_batch_size, 1)
    entries = s // rate if rate else 0
    total += a * heads * d + a * d * (s + entries) // s  # q, k=v (with the entries)
    if cfg.micro_batch_size > 1:
        # the one k=v head broadcast to every head: with more than one row, both products'
        # matmul makes it contiguous for bmm (ATen _matmul_impl) and saves that copy
        total += 2 * a * heads * d * (s + entries) // s
    total += heads * (a * (s + entries + 1) + INDEX_BYTES)  # softmax with the sink, max
    if cfg.full:
        total += a * heads * d  # o_a_proj's regrouped input
    if _saves_input(_dsv4_linear(arch, "o_b_proj"), cfg):
        total += a * groups * o_rank
    if rate:
        width = 2 * d if kind == "compressed_sparse_attention" else d
        total += (FP32_BYTES + 2 * a) * width
        per_entry = FP32_BYTES * d + FP32_BYTES + (a * d if cfg.full else 0) + 2 * a * r
        total += per_entry // rate
    return total


def _dsv4_moe_bytes(arch: ModelArch, cfg: ActConfig) -> int:
    """DeepSeek-V4's MoE block per token (``DeepseekV4SparseMoeBlock``): the MLP input where
    the shared expert's or the router's weights save it; the router's logits and their
    ``sqrtsoftplus`` scores (``act`` per expert each), the picked weights and their sum; the
    experts and the shared expert with their clamped SwiGLU (:func:`mlp_unit_bytes`, five
    intermediate-width tensors) and, per routed copy, the int64 sort and gather indices,
    the routing weight and the boolean mask of transformers 5.17's ``grouped_mm`` path."""
    a, h, e, k = cfg.act_bytes, arch.hidden_size, arch.num_experts, arch.experts_per_token
    mlp = [l for l in arch.linears if l.role == "mlp"]
    parts = BlockParts((), mlp[-1], tuple(l for l in mlp if not l.mlp_output), (), ())
    downs = tuple(l for l in mlp if l.mlp_output)
    router = next(l for l in arch.linears if l.role == "router")
    total = _group_input_bytes(parts.mlp_in + (router,), h, cfg)
    total += 2 * a * e + a * k + a + INDEX_BYTES * k
    total += sum(mlp_unit_bytes(arch, cfg, d, parts.mlp_in, weighted=False) for d in downs)
    total += k * (3 * INDEX_BYTES + a + 1)
    return total


def deepseek_v4_block_bytes_per_token(arch: ModelArch, cfg: ActConfig) -> int:
    """Saved bytes per token of the average DeepSeek-V4 block: its two hyper-connections
    (:func:`hyper_connection_bytes`), its two RMSNorms, the attention of its kind
    (:func:`_dsv4_attention_bytes`), the MoE block (:func:`_dsv4_moe_bytes`) and the
    adapters' own tensors (:func:`lora_rank_bytes`, :func:`lora_dropout_bytes`,
    :func:`lora_input_copy_bytes`)."""
    kinds = arch.extra.get("dsv4_layers", [])
    if not isinstance(kinds, list) or not kinds:
        return 0
    common = 2 * hyper_connection_bytes(arch, cfg) + 2 * norm_bytes(arch, cfg)
    common += _dsv4_moe_bytes(arch, cfg)
    counts: dict[str, int] = {}
    for kind in kinds:
        counts[str(kind)] = counts.get(str(kind), 0) + 1
    attention = sum(n * _dsv4_attention_bytes(arch, cfg, kind) for kind, n in counts.items())
    # the adapters' own tensors (rank-r products, dropout, fp32 input copies), per block held
    adapters = lora_rank_bytes(arch, cfg) + lora_dropout_bytes(arch, cfg)
    adapters += lora_input_copy_bytes(arch, cfg)
    return common + attention // len(kinds) + adapters


def deepseek_v4_outside_bytes_per_token(arch: ModelArch, cfg: ActConfig) -> int:
    """``hc_head`` (``DeepseekV4HyperHead``), once per token: the last block's streams, their
    fp32 copy and statistic, the normalised copy and mixing logits where ``hc_fn`` trains, the
    sigmoid's output and ``pre``."""
    hc, h = arch.hyper_connections, arch.hidden_size
    total = cfg.resid_bytes * hc * h + FP32_BYTES * hc * h + FP32_BYTES + 2 * FP32_BYTES * hc
    if cfg.full:
        total += FP32_BYTES * hc * h + FP32_BYTES * hc
    return total


def _dsv4_widest_kind(arch: ModelArch) -> tuple[str, int]:
    """The DeepSeek-V4 block kind whose attention meets the most compressed entries, and its
    compression rate (0: sliding window only)."""
    rates = arch.extra.get("dsv4_compress_rates", {})
    kinds = set(arch.extra.get("dsv4_layers", []))
    best = ("sliding_attention", 0)
    for kind in kinds:
        rate = int(rates.get(kind, 0)) if isinstance(rates, dict) else 0
        if rate and (not best[1] or rate < best[1]):
            best = (str(kind), rate)
    return best


def dsv4_attention_transient_bytes_per_token(arch: ModelArch, cfg: ActConfig) -> int:
    """DeepSeek-V4's eager attention inside one block's forward, per token, beyond what it
    saves (transformers 5.17 ``eager_attention_forward`` of ``modeling_deepseek_v4``), in the
    block that meets the most compressed entries (``kv = s + s / m`` keys): the scores plus
    the mask (``attn_weights``, kept by its name), their concatenation with the sink column and
    that minus its row maximum, alive together (``act * heads * (3 kv + 2)``); the mask
    extended with the compressor's block bias (``torch.cat``, ``act * kv``) and, in a
    compressed-sparse block, the indexer's block bias (``new_full``, ``act * (s / m + 1)``)."""
    if not arch.hyper_connections:
        return 0
    kind, rate = _dsv4_widest_kind(arch)
    a, s = cfg.act_bytes, cfg.seq_len
    entries = s // rate if rate else 0
    kv = s + entries
    total = a * arch.num_heads * (3 * kv + 2)
    if rate:
        total += a * kv
    if kind == "compressed_sparse_attention":
        total += a * (entries + 1)
    return total


def dsv4_pre_attention_bytes_per_token(arch: ModelArch, cfg: ActConfig) -> int:
    """What that block has saved when its attention's scores are made: its first
    hyper-connection (without the attention's output, not made yet), its input norm and the
    attention's tensors before the softmax (:func:`_dsv4_attention_bytes` without the
    softmax, the output side and the row maximum)."""
    if not arch.hyper_connections:
        return 0
    kind, rate = _dsv4_widest_kind(arch)
    a, s, heads = cfg.act_bytes, cfg.seq_len, arch.num_heads
    entries = s // rate if rate else 0
    attention = _dsv4_attention_bytes(arch, cfg, kind)
    attention -= heads * (a * (s + entries + 1) + INDEX_BYTES)
    attention -= 2 * a * arch.qk_rope_head_dim  # the output's RoPE
    if cfg.full:
        attention -= a * heads * arch.head_dim
    if _saves_input(_dsv4_linear(arch, "o_b_proj"), cfg):
        attention -= (
            a * int(arch.extra.get("dsv4_o_groups", 1)) * int(arch.extra.get("dsv4_o_rank", 1))
        )
    hyper = hyper_connection_bytes(arch, cfg) - a * arch.hidden_size
    return hyper + norm_bytes(arch, cfg) + attention
