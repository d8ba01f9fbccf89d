"""The element-wise work autocast adds when the residual stream is fp32: ``*-mixed`` on fp32
weights (calc's ``mixed-amp`` regime) or on weights of the other 16-bit type
(``mixed-other-16bit-weights``), eager, in transformers' modeling code.

The element-wise tables of :mod:`calc.timing` describe a block whose activations are all 16-bit.
Under ``torch.autocast`` on fp32 weights they are not (transformers 5.17
``models/llama/modeling_llama.py``; torch 2.13 ``aten/src/ATen/autocast_mode.cpp``, whose CUDA
and CPU lists both cast ``linear`` and ``scaled_dot_product_attention`` to 16 bits and leave
``mul`` and ``add`` alone):

- the embedding's fp32 output and every residual add (fp32 plus a 16-bit sublayer output) keep
  the residual stream fp32, so each pre-norm gets an fp32 input: its upcast and downcast do
  nothing, and a Llama-style norm (``self.weight * hidden_states.to(input_dtype)``) multiplies
  by its fp32 weight in fp32 and returns fp32;
- each linear that reads that fp32 output (q, k, v; gate, up; a router) casts it to 16 bits
  itself, one cast per module (autocast caches weight casts, not activation casts), and
  autograd casts each of their input gradients back to fp32 and sums them in fp32;
- RoPE's cos and sin follow the hidden states' dtype (``LlamaRotaryEmbedding.forward``:
  ``cos.to(dtype=x.dtype)``), fp32: ``q * cos + rotate_half(q) * sin`` promotes q and k to
  fp32, which SDPA casts back to 16 bits (and their gradients both ways);
- each residual add reads fp32 and 16 bits and writes fp32, and its gradient reaches the
  sublayer's 16-bit output through a cast;
- the final norm's fp32 output is cast once more for the output layer.

Counted here per token, beyond what the 16-bit tables count, as bytes read and written by
the element-wise kernels (the matmuls and attention are priced by their FLOPs) and as kernels
launched. ``python tools/count_amp_traffic.py`` traces the same difference (fp32 weights under
CPU autocast against bf16 weights, transformers 5.17, torch 2.13) and prints it beside these
counts, family by family. Under ``torch.compile`` inductor fuses the casts into the kernels
around them: not counted there. QLoRA prepared by peft runs a stream of its own (bitsandbytes'
4-bit linears return fp32): :data:`QLORA_STREAM_FORWARD_BYTES`, at the end of this module.

Held to that trace (``tests/tools/test_count_amp_traffic.py``: Llama, Qwen3, Gemma 3, GPT-2,
OLMo 3, Phi-3, Ministral 3): bytes and kernels per block agree on Llama, Mistral, Qwen2, Qwen3,
SmolLM3, Seed-OSS, Gemma 1 to 3, OLMo 3, Phi-3 and Ministral 3 (to 4 bytes per token), and
GPT-2 (within 8 bytes of 21,512). Where the count is not written for the block yet, the trace
disagrees (2026-12-06; traced against counted bytes per block and token, forward / backward):
GPT-NeoX's, Falcon's and Phi-2's parallel LayerNorm blocks with partial RoPE (backward counted
10 to 37 % high); routed experts, where CPU autocast also leaves ``_grouped_mm`` in fp32 (it is
not on torch's CPU list), so the trace is not what a GPU runs (from Mixtral's -10 % / +2 % to
DeepSeek-V3's +34 % / +60 % and Llama 4's -58 % / -49 %); latent attention (Mistral 4: -27 % /
-24 %) and Gemma 4's blocks (-30 % / -22 %). Those blocks take this count as it stands."""

from __future__ import annotations

from .activations import block_parts
from .arch import LinearLayer, ModelArch

CAST_BYTES_PER_ELEMENT = 6
"""``x.to(torch.bfloat16)`` of an fp32 tensor reads 4 and writes 2 bytes per element; its
gradient's cast back reads 2 and writes 4."""

ADD_PROMOTION_BYTES = {"forward": 4, "backward": 6}
"""A residual add of an fp32 stream and a 16-bit sublayer output: forward it reads 4 + 2 and
writes 4 (10 bytes per element) where the 16-bit add moves 6, +4; backward the gradient sum of
the stream (two fp32 reads, one fp32 write: 12) where the 16-bit one moves 6, +6. The same +6
for every fp32 sum of the input gradients of the linears that read one norm output."""

ROTARY_PROMOTION_BYTES = {"forward": 10, "backward": 20}
"""Per q and k element, ``q * cos + rotate_half(q) * sin`` with fp32 cos and sin and a 16-bit q
(transformers 5.17 ``apply_rotary_pos_emb``): each product writes fp32 (+2 bytes each over the
16-bit product; cos and sin are broadcast over the heads), the sum reads and writes fp32 (12
against 6: +6): +10 forward. Backward the two products of the gradient run in fp32 (+4 each) and
their results are cast to q's 16 bits for ``rotate_half``'s backward and q's own gradient (+6
each): +20."""

ROTARY_TABLE_BYTES_PER_HEAD_DIM = 8
"""cos and sin are read by four products per block (q's and k's, forward; the same four on their
gradients backward), one row of ``head_dim`` per token each, in fp32 where the 16-bit stack
reads them in 16 bits (transformers casts them to the hidden states' dtype once per forward):
4 x 2 bytes more per ``head_dim`` element, each way."""

QK_NORM_ROTARY_BYTES = {"forward": 28, "backward": 50}
"""Per q and k element where a Llama-style RMSNorm of q and k (``qk_norm_per_head``: Qwen3,
transformers 5.17 ``self.q_norm(self.q_proj(...))``) runs before RoPE: the norm's fp32 weight
times its 16-bit output writes fp32 (+2), so the whole rotary embedding runs in fp32, the
``rotate_half`` negation and concatenation too (+20 over the 16-bit one), and SDPA casts the
result (+6): 28 forward. Backward, traced (``tools/count_amp_traffic.py``, Qwen3-0.6B): 50.
In place of :data:`ROTARY_PROMOTION_BYTES` and the SDPA cast."""

QK_NORM_ROTARY_BACKWARD_OPS = 4
"""The backward kernels that path adds per block (traced as above): SDPA's gradients of q and k
cast to fp32, and the gradient of each norm's 16-bit output cast back; rotary's own gradients
stay fp32 (6 on the plain path: :func:`amp_block_extra_ops`)."""

ROTARY_CONCAT_FAMILIES = frozenset({"phi3"})
"""Families whose rotary embedding splits q and k into a rotated part and a pass-through part
and concatenates them again, even with nothing to pass through (transformers 5.17
``models/phi3/modeling_phi3.py`` ``apply_rotary_pos_emb``: ``torch.cat([(q_rot * cos) +
(rotate_half(q_rot) * sin), q_pass], dim=-1)``): :data:`ROTARY_CONCAT_BYTES`."""

ROTARY_CONCAT_BYTES = {"rotated_forward": 4, "pass_forward": 10, "pass_backward": 6}
"""That concatenation on an fp32 rotated part: it reads and writes fp32 (+4 bytes per rotated
element forward), casts the 16-bit pass-through part to fp32 first (+6, and +4 in the
concatenation: +10 per pass-through element), and backward casts that part's gradient back (+6);
one cast kernel more for q and for k each way, traced on Phi-3-mini (whose pass-through part is
empty: the casts launch on zero elements)."""

QUERY_SCALE_FAMILIES = frozenset({"ministral3"})
"""Families that scale the roped query by a per-position factor before attention (transformers
5.17 ``models/ministral3/modeling_ministral3.py`` ``Ministral3Attention.forward``: ``query_states
* get_llama_4_attn_scale(...).to(query_states.dtype)``): :data:`QUERY_SCALE_BYTES`."""

QUERY_SCALE_BYTES = 4
"""That product on an fp32 query: read 4 and write 4 bytes per query element where the 16-bit
one moves 2 + 2, forward, and the same for its gradient backward; and the factor's cast to the
query's dtype is no kernel when that dtype is already fp32 (one kernel fewer forward; traced on
Ministral-3-3B)."""

RMS_NORM_INPUT_BYTES = {
    ("weight_16bit", "forward"): -8,
    ("weight_16bit", "backward"): 0,
    ("scale_fp32", "forward"): -12,
    ("scale_fp32", "backward"): -12,
    ("layer", "forward"): 4,
    ("layer", "backward"): 6,
}
"""Per element of a pre-norm that reads the fp32 stream, against its 16-bit input:

- Llama-style RMSNorm (``weight_16bit``; transformers 5.17 ``LlamaRMSNorm``): no upcast (read 2,
  write 4) nor downcast (read 4, write 2), the weight's product in fp32 (read 4, write 4 against
  2 + 2): -8 forward; backward the gradient's products and the weight's reduction read fp32
  (+4, +6, +2) and the two casts of the gradient go: 0.
- Gemma's (``scale_fp32``, ``arch.extra["norm_scale_fp32"]``: it scales in fp32 anyway and
  returns ``type_as(x)``): only the two casts go, forward and backward: -12 each.
- LayerNorm (``native_layer_norm`` is on autocast's fp32 list): reads and writes 4 bytes where
  it moved 2 (+4); backward it reads the gradient and the input and writes one more: +6."""

CASTS_PER_NORM = 2
"""Kernels a Llama-style or Gemma RMSNorm no longer launches on an fp32 input (its upcast and
downcast), forward and backward alike."""


def _readers(arch: ModelArch) -> tuple[tuple[LinearLayer, ...], tuple[LinearLayer, ...]]:
    """The linears that read the attention norm's and the MLP norm's output (routers with the
    MLP's): each casts it to 16 bits on its own."""
    parts = block_parts(arch)
    return parts.attn_in, parts.mlp_in + parts.routers


def reader_names(arch: ModelArch) -> frozenset[str]:
    """Names of the linears that read a norm's output (the fp32 stream's, under autocast)."""
    attn, mlp = _readers(arch)
    return frozenset(l.name for l in attn + mlp)


def _cast_elements(arch: ModelArch, linears: tuple[LinearLayer, ...]) -> float:
    """Input elements per token that ``linears`` cast, averaged over the stack's blocks."""
    return sum(arch.blocks_of(l) * l.active * l.d_in for l in linears) / arch.num_layers


def _modules(arch: ModelArch, linears: tuple[LinearLayer, ...]) -> float:
    """Distinct modules per block among ``linears`` (a routed expert set counts once: its
    input is gathered once per block), averaged over the stack."""
    return sum(arch.blocks_of(l) for l in linears) / arch.num_layers


def _norm_kind(arch: ModelArch) -> str | None:
    if arch.norm_kind == "layer":
        return "layer"
    if arch.norm_kind != "rms":
        return None
    return "scale_fp32" if arch.extra.get("norm_scale_fp32") else "weight_16bit"


def _fp32_qk_norm(arch: ModelArch) -> bool:
    """q and k pass a Llama-style RMSNorm with a weight before RoPE, whose fp32 weight makes its
    output fp32 (:data:`QK_NORM_ROTARY_BYTES`)."""
    per_head = arch.extra.get("qk_norm_per_head") or arch.extra.get("qk_norm_whole")
    return (
        bool(per_head)
        and not arch.extra.get("qk_norm_unweighted")
        and (_norm_kind(arch) == "weight_16bit")
    )


def pre_norms(arch: ModelArch) -> int:
    """Norms per block that read the residual stream: the two pre-norms (one in Phi's parallel
    block); Gemma's post-norms read the sublayers' 16-bit outputs, and OLMo 2's and 3's blocks
    have no other (``norms_after_sublayers``: the sublayers read the stream itself)."""
    if arch.extra.get("norms_after_sublayers"):
        return 0
    return min(2, arch.norms_per_layer)


def _rope_promoted(arch: ModelArch) -> bool:
    """RoPE runs and SDPA receives q and k in fp32 only under autocast: not without RoPE, nor
    where the family's rotary code computes in fp32 and casts back to q's dtype whatever the
    stream (``rope_fp32``: OLMo 3's ``Olmo3RotaryEmbedding`` and ``apply_rotary_pos_emb``,
    transformers 5.17), where the 16-bit stack already pays for it."""
    return arch.learned_positions == 0 and not arch.extra.get("rope_fp32")


def _rotary_split(arch: ModelArch) -> tuple[int, int]:
    """Rotated and passed-through elements of q and k per token (``rope_dim`` of each head
    where the config rotates part of it)."""
    heads = arch.num_heads + arch.num_kv_heads
    rotated = min(int(arch.extra.get("rope_dim", arch.head_dim)), arch.head_dim)
    return heads * rotated, heads * (arch.head_dim - rotated)


def amp_stream_bytes_per_token(arch: ModelArch) -> tuple[float, float]:
    """Element-wise bytes per token the fp32 stream adds over the 16-bit tables, whole stack
    (every block and the output layer's input cast): ``(forward, backward)``."""
    h = arch.hidden_size
    attn, mlp = _readers(arch)
    casts = _cast_elements(arch, attn) + _cast_elements(arch, mlp)
    sums = max(0.0, _modules(arch, attn) - 1) + max(0.0, _modules(arch, mlp) - 1)
    forward = CAST_BYTES_PER_ELEMENT * casts + 2 * ADD_PROMOTION_BYTES["forward"] * h
    backward = (
        CAST_BYTES_PER_ELEMENT * casts
        + ADD_PROMOTION_BYTES["backward"] * h * sums
        + 2 * (ADD_PROMOTION_BYTES["backward"] + CAST_BYTES_PER_ELEMENT) * h
    )
    kind = _norm_kind(arch)
    if kind:
        forward += pre_norms(arch) * RMS_NORM_INPUT_BYTES[kind, "forward"] * h
        backward += pre_norms(arch) * RMS_NORM_INPUT_BYTES[kind, "backward"] * h
    if _rope_promoted(arch):
        roped = (arch.num_heads + arch.num_kv_heads) * arch.head_dim
        if arch.family in ROTARY_CONCAT_FAMILIES:
            rotated, passed = _rotary_split(arch)
            forward += ROTARY_CONCAT_BYTES["rotated_forward"] * rotated
            forward += ROTARY_CONCAT_BYTES["pass_forward"] * passed
            backward += ROTARY_CONCAT_BYTES["pass_backward"] * passed
        if arch.family in QUERY_SCALE_FAMILIES:
            forward += QUERY_SCALE_BYTES * arch.num_heads * arch.head_dim
            backward += QUERY_SCALE_BYTES * arch.num_heads * arch.head_dim
        forward += ROTARY_TABLE_BYTES_PER_HEAD_DIM * arch.head_dim
        backward += ROTARY_TABLE_BYTES_PER_HEAD_DIM * arch.head_dim
        if _fp32_qk_norm(arch):
            forward += QK_NORM_ROTARY_BYTES["forward"] * roped
            backward += QK_NORM_ROTARY_BYTES["backward"] * roped
        else:
            forward += (ROTARY_PROMOTION_BYTES["forward"] + CAST_BYTES_PER_ELEMENT) * roped
            backward += (ROTARY_PROMOTION_BYTES["backward"] + CAST_BYTES_PER_ELEMENT) * roped
    head = CAST_BYTES_PER_ELEMENT * h
    return arch.num_layers * forward + head, arch.num_layers * backward + head


def amp_block_extra_ops(arch: ModelArch) -> tuple[float, float]:
    """Kernels per block the fp32 stream adds, ``(forward, backward)``: one cast per reading
    linear (forward its input, backward its input gradient), SDPA's casts of the roped q and k
    (and of their gradients, and rotary's two gradient casts of each), the two residual
    gradients' casts, less the casts the pre-norms drop (:data:`CASTS_PER_NORM`)."""
    attn, mlp = _readers(arch)
    readers = _modules(arch, attn) + _modules(arch, mlp)
    dropped = (
        CASTS_PER_NORM * pre_norms(arch)
        if _norm_kind(arch) in ("weight_16bit", "scale_fp32")
        else 0
    )
    roped = _rope_promoted(arch)
    rope_backward = QK_NORM_ROTARY_BACKWARD_OPS if _fp32_qk_norm(arch) else 6
    concat = 2 if roped and arch.family in ROTARY_CONCAT_FAMILIES else 0
    scaled = 1 if roped and arch.family in QUERY_SCALE_FAMILIES else 0
    forward = readers + (2 if roped else 0) + concat - scaled - dropped
    backward = readers + 2 + (rope_backward if roped else 0) + concat - dropped
    return float(forward), float(backward)


# --- QLoRA after peft's kbit preparation, under autocast -------------------------------------

QLORA_STREAM_FORWARD_BYTES = {"hidden": 30, "q": 32, "kv": 44, "ffn": 28, "head_dim": 8}
"""Element-wise bytes per token and block that QLoRA's fp32 stream adds forward, per element of
the hidden size, of q (``heads x head_dim``), of k/v (``kv_heads x head_dim``), of the MLP's
inner width and of ``head_dim``: peft's ``prepare_model_for_kbit_training`` leaves the norms and
embeddings fp32, and under autocast (``*-mixed``) bitsandbytes' ``Linear4bit.forward`` casts
each input to its bf16 compute dtype and returns ``out.to(inp_dtype)`` (bitsandbytes 0.49.2
``nn/modules.py``), so q, k, v, gate and up come out fp32.

Forward, read in the code: the pre-norms on fp32 (2 x -8 h); the five readers' input casts
(5 x 6 h) and their output casts (6 per q, k, v, gate and up element); RoPE wholly fp32 (+20 per
q and k element) and SDPA's casts of q, k and v (6 each); the first residual add fp32 plus the
output projection's 16-bit output (+4 h); the gated activation on fp32 (+10 per inner element);
the down projection's input cast (6) and output cast (6 h); the second residual add fp32 plus
fp32 (+6 h); cos and sin read in fp32 (8 per ``head_dim``). 30 h + 32 q + 44 kv + 28 ffn.

Backward, traced (``tools/count_amp_traffic.py`` with the oracle's stand-in of ``Linear4bit``,
``tools/oracle/qlora.py``; peft 0.21, transformers 5.17, torch 2.13): the extra backward bytes
of the whole block are ``72 h + 34 q + 48 kv + 34 ffn + 8 head_dim`` on Llama-2-7B, Mistral-7B
(MLP widths 64 and 512) and Seed-OSS-36B alike (integer coefficients, exact on all four), fp32
adapters on every linear; what calc's adapters' path moves backward (twice its forward,
:data:`calc.timing.BACKWARD_ELEMENTWISE_FACTOR`, on :data:`QLORA_AUTOCAST_LORA_BYTES`) is taken
out: ``-24 h - 16 q - 8 kv - 8 ffn``, which leaves :data:`QLORA_STREAM_BACKWARD_BYTES`. So
adapters on fewer linears are priced as if on every one there."""

QLORA_STREAM_BACKWARD_BYTES = {"hidden": 96, "q": 50, "kv": 56, "ffn": 42, "head_dim": 8}
"""The backward's part of :data:`QLORA_STREAM_FORWARD_BYTES` (see there): the traced
``72 h + 34 q + 48 kv + 34 ffn + 8 head_dim`` less what the adapters' path already moves."""

QLORA_AUTOCAST_LORA_BYTES = {"fp32_result": 22, "16bit_result": 14}
"""peft 0.21's LoRA layer on a 4-bit linear under autocast (``tuners/lora/bnb.py``
``Linear4bit.forward``: ``result.clone()``, no casts of its own under autocast), per output
element: on an fp32 result (every 4-bit linear whose input is fp32) the clone (read 4, write 4),
the 16-bit scale (2 + 2) and the fp32 add (4 + 2 + 4): 22; on the output projection's 16-bit
result, 4 + 4 + 6: 14. Its input: autocast's cast of an fp32 input for ``lora_A`` (6 per
element, :data:`calc.timing.AUTOCAST_ADAPTER_INPUT_CAST_BYTES`), none on a 16-bit one."""

QLORA_BLOCK_EXTRA_OPS = (3, 10)
"""Kernels per block that path adds, forward and backward, traced as above (autocast's and
bitsandbytes' weight-sized casts left out)."""

QLORA_TRACED_FAMILIES = frozenset({"llama", "mistral", "qwen2", "seed_oss", "smollm3"})
"""Families whose block is Llama's (plain RMSNorm pre-norms, no q/k norm, RoPE on the whole
head, a gated MLP): where :data:`QLORA_STREAM_FORWARD_BYTES` was traced. Other blocks get no QLoRA
stream count (their 16-bit tables alone)."""


def qlora_stream_bytes_per_token(arch: ModelArch) -> tuple[float, float]:
    """:data:`QLORA_STREAM_FORWARD_BYTES` and :data:`QLORA_STREAM_BACKWARD_BYTES` over the
    stack, and the output layer's input cast (6 h each way): ``(forward, backward)`` per
    token."""
    widths = {
        "hidden": arch.hidden_size,
        "q": arch.num_heads * arch.head_dim,
        "kv": arch.num_kv_heads * arch.head_dim,
        "ffn": arch.intermediate_size,
        "head_dim": arch.head_dim,
    }
    head = CAST_BYTES_PER_ELEMENT * arch.hidden_size
    forward = sum(QLORA_STREAM_FORWARD_BYTES[k] * widths[k] for k in widths)
    backward = sum(QLORA_STREAM_BACKWARD_BYTES[k] * widths[k] for k in widths)
    return arch.num_layers * forward + head, arch.num_layers * backward + head


def fp32_input_names(arch: ModelArch) -> frozenset[str]:
    """Linears whose input is fp32 on QLoRA's fp32 stream: the norms' readers and the down
    projections (the gated activation of fp32 gate and up outputs is fp32)."""
    return reader_names(arch) | frozenset(l.name for l in block_parts(arch).mlp_down)
