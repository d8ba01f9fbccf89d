"""Read a Hugging Face ``config.json`` into a :class:`~calc.arch.ModelArch`.

Families: llama, mistral, mixtral, qwen2, qwen2_moe, qwen3, qwen3_moe, gemma, gemma2,
gemma3_text, granite, olmo, olmo2, olmo3, stablelm, phi, phi3 (Phi-3, Phi-4, Phi-4-mini), smollm3,
gpt_oss, llama4_text (including Maverick's mixed dense/MoE stack), gpt_neox, falcon, bloom, gpt2,
ministral3, seed_oss, deepseek_v3 (multi-head latent attention, shared experts, dense-first
blocks; also Kimi K2's ``kimi_k2`` text config, mistral4 and glm4_moe_lite), deepseek_v32 and
glm_moe_dsa (DeepSeek-V3.2 and GLM-5: the same with DeepSeek sparse attention's indexer),
deepseek_v4 (DeepSeek-V4: hyper-connections, compressed and compressed-sparse attention, hash
and learned routers), glm4_moe,
minimax_m2, gemma4_text (Gemma 4: per-kind attention shapes, kv-shared blocks, per-layer inputs,
an optional MoE block), and the hybrid stacks qwen3_next, qwen3_5_text and qwen3_5_moe_text
(Gated DeltaNet blocks with a gated full-attention block every ``full_attention_interval``-th),
olmo_hybrid (Gated DeltaNet and OLMo 2 attention blocks), lfm2 (gated short convolutions and
attention blocks), nemotron_h (one sublayer per block: Mamba-2, attention, MLP or MoE, by
``hybrid_override_pattern``; the MoE blocks are routed experts beside a shared one, as in
Nemotron 3 Nano, and a ``moe_latent_size`` is refused as ``unsupported_architecture``),
falcon_h1, granitemoehybrid and kimi_linear (Kimi Delta Attention blocks beside latent-attention
blocks without RoPE, DeepSeek-V3's MoE).
Multimodal configs (``gemma3``, ``gemma4``, ``llama4``, ``mistral3``, ``qwen3_5``, ``qwen3_5_moe``) are
read through their ``text_config`` (see below).
Each family is read with its own key names, and a key a config may leave out
takes the default of that family's ``transformers`` config class (source:
``transformers/models/<family>/configuration_<family>.py``, v4.44-v4.48), e.g.
``tie_word_embeddings`` is true for GPT-2, Gemma, Falcon and BLOOM and false for
Llama. Module names are the ones peft targets (the last component of the HF
module path: ``q_proj``, ``query_key_value``, ``c_attn``, ``w1`` ...).

Errors: a missing shape key is ``code="config_missing_key"`` with
``field="hf_config.<key>"``; a value of the wrong type, non-positive or
inconsistent is ``config_invalid_value``, except the inconsistencies that have their own
code, naming the key: attention heads that do not divide the hidden size where the family
derives ``head_dim`` from it (``config_heads_indivisible``), key/value heads that do not
divide the attention heads (``config_kv_heads_indivisible``), ``layer_types`` not listing
one type per layer (``config_layer_types_length``, value: its length) and more experts per
token than experts (``config_top_k_above_experts``); an unknown ``model_type`` is
``unsupported_architecture``; a config that is not an object is
``config_not_object``. A multimodal config whose ``text_config`` holds a
supported family is read through that ``text_config`` (the language model
only; ``extra["text_config_only"]`` is then true); a ``text_config`` without a ``model_type``
is read as the text model its wrapper builds (:data:`_WRAPPER_TEXT_TYPES`).
"""

from __future__ import annotations

import re

from dataclasses import replace

from .arch import MIXER_KINDS, LinearAttention, LinearLayer, Mamba2, ModelArch
from .attention_windows import read_windows
from .errors import ConfigError
from .jsontypes import JsonObject

_REQUIRED = ...  # sentinel: the key has no default

# Upper bounds on config integers: far above any published model (the largest have ~200
# layers, hidden 25,600, vocab 256k, 10M positions), low enough that a typo (an extra
# digit run) is refused instead of producing a meaningless, astronomically large estimate.
_INT_LIMITS = {
    "max_position_embeddings": 1 << 30,
    "n_positions": 1 << 30,
    "n_ctx": 1 << 30,
    "vocab_size": 1 << 24,
}
_LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers")
_INT_LIMIT_DEFAULT = 1 << 20  # widths, heads, experts
_LAYER_LIMIT = 1 << 12


class _Keys:
    """Typed access to one config dict; errors name the key as ``<prefix><key>``."""

    __slots__ = ("cfg", "prefix")

    def __init__(self, cfg: JsonObject, prefix: str) -> None:
        self.cfg = cfg
        self.prefix = prefix

    def _raw(self, keys: tuple[str, ...]) -> tuple[str, object]:
        for key in keys:
            if self.cfg.get(key) is not None:
                return key, self.cfg[key]
        return keys[0], None

    def int(self, *keys: str, default: object = _REQUIRED) -> int:
        """A positive int under the first present key of ``keys`` (aliases)."""
        key, value = self._raw(keys)
        if value is None:
            if default is _REQUIRED:
                raise ConfigError("config_missing_key", self.prefix + key, None)
            return default  # type: ignore[return-value]  # the caller's int (or None) default
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ConfigError("config_invalid_value", self.prefix + key, value)
        limit = _LAYER_LIMIT if key in _LAYER_KEYS else _INT_LIMITS.get(key, _INT_LIMIT_DEFAULT)
        if value > limit:
            raise ConfigError("config_invalid_value", self.prefix + key, value, "out_of_range")
        return value

    def bool(self, key: str, default: bool) -> bool:
        value = self.cfg.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise ConfigError("config_invalid_value", self.prefix + key, value)
        return value

    def error(self, key: str, value: object) -> ConfigError:
        return ConfigError("config_invalid_value", self.prefix + key, value)

    def heads_error(self, key: str, heads: object) -> ConfigError:
        """The attention heads do not divide the hidden size, and the family (or a config
        without ``head_dim``) takes ``head_dim = hidden / heads``."""
        return ConfigError("config_heads_indivisible", self.prefix + key, heads)

    def kv_error(self, key: str, kv: object) -> ConfigError:
        """Grouped-query attention needs the key/value heads to divide the query heads."""
        return ConfigError("config_kv_heads_indivisible", self.prefix + key, kv)

    def layer_types(self, layers: object) -> None:
        """``layer_types`` (transformers 5 configs: one attention kind per layer, e.g.
        ``sliding_attention`` / ``full_attention``), when given: a list of strings, one per
        layer, as transformers' ``layer_type_validation`` requires."""
        value = self.cfg.get("layer_types")
        if value is None:
            return
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise self.error("layer_types", value)
        if len(value) != layers:
            raise ConfigError("config_layer_types_length", self.prefix + "layer_types", len(value))


def _experts(k: _Keys, count_key: str) -> tuple[int, int]:
    """``(experts, top_k)`` of an MoE config: the expert count under ``count_key`` (its name
    differs by family) and ``num_experts_per_tok``, which cannot exceed it."""
    experts = k.int(count_key)
    top_k = k.int("num_experts_per_tok")
    if top_k > experts:
        raise ConfigError("config_top_k_above_experts", k.prefix + "num_experts_per_tok", top_k)
    return experts, top_k


def _heads(
    k: _Keys,
    hidden: int,
    heads: int,
    *,
    kv_key: str = "num_key_value_heads",
    head_dim_default: int | None = None,
) -> tuple[int, int]:
    """(kv_heads, head_dim): kv defaults to ``heads`` (multi-head attention);
    ``head_dim`` is explicit where the family allows, else ``hidden / heads``."""
    kv = k.int(kv_key, default=heads)
    if kv > heads or heads % kv:
        raise k.kv_error(kv_key, kv)
    head_dim = k.int("head_dim", default=head_dim_default or 0)
    if not head_dim:
        if hidden % heads:
            raise k.heads_error("num_attention_heads", heads)
        head_dim = hidden // heads
    return kv, head_dim


def _attention(
    h: int, heads: int, kv: int, hd: int, qkv_bias: bool, o_bias: bool
) -> tuple[LinearLayer, ...]:
    return (
        LinearLayer("q_proj", h, heads * hd, qkv_bias, role="attn"),
        LinearLayer("k_proj", h, kv * hd, qkv_bias, role="attn"),
        LinearLayer("v_proj", h, kv * hd, qkv_bias, role="attn"),
        LinearLayer("o_proj", heads * hd, h, o_bias, role="attn"),
    )


def _gated_mlp(
    h: int,
    inter: int,
    bias: bool = False,
    count: int = 1,
    active: int = 1,
    names: tuple[str, str, str] = ("gate_proj", "up_proj", "down_proj"),
) -> tuple[LinearLayer, ...]:
    gate, up, down = names
    return (
        LinearLayer(gate, h, inter, bias, count, active, role="mlp"),
        LinearLayer(up, h, inter, bias, count, active, role="mlp"),
        LinearLayer(down, inter, h, bias, count, active, role="mlp"),
    )


def _common(
    k: _Keys, family: str, name: str, max_pos_default: int, tie_default: bool
) -> JsonObject:
    return {
        "name": name,
        "family": family,
        "vocab_size": k.int("vocab_size"),
        "max_position_embeddings": k.int("max_position_embeddings", default=max_pos_default),
        "tie_word_embeddings": k.bool("tie_word_embeddings", tie_default),
    }


# ---- RoPE + RMSNorm + gated MLP families ---------------------------------------------------
# family: (max_position_embeddings default, tie default, head_dim default, norms per layer,
#          q/k RMSNorm per head)
_DENSE = {
    "llama": (2048, False, None, 2, False),
    "mistral": (4096 * 32, False, None, 2, False),
    "qwen2": (32768, False, None, 2, False),
    "qwen3": (32768, False, 128, 2, True),
    "gemma": (8192, True, 256, 2, False),
    "gemma2": (8192, True, 256, 4, False),  # input, post-attn, pre-ffn, post-ffn norms
    "gemma3_text": (131072, True, 256, 4, True),
    "granite": (2048, False, None, 2, False),  # Llama shapes; its multipliers hold no weights
    # SmolLM3: Llama shapes; its NoPE layers drop RoPE, which holds no weights.
    "smollm3": (32768, True, None, 2, False),
    # Ministral 3 (transformers 5.17 ``modeling_ministral3``): Mistral's block with
    # ``head_dim`` 128 by default; its llama-4 attention scaling and sliding window hold no weights.
    "ministral3": (262144, False, 128, 2, False),
}

# Keys a family's published config.json leaves out and transformers fills from its config
# class (transformers 5.17 ``Gemma3TextConfig``: vocab_size 262_208, 8 heads, 4 kv heads;
# the text_config of google/gemma-3-4b-pt states neither). Applied before reading.
_FAMILY_DEFAULTS = {
    "gemma3_text": {"vocab_size": 262_208, "num_attention_heads": 8, "num_key_value_heads": 4},
    # transformers 5.17 Gemma4TextConfig
    "gemma4_text": {"vocab_size": 262_144, "num_attention_heads": 8, "num_key_value_heads": 4},
}


def _dense(k: _Keys, family: str, name: str) -> ModelArch:
    """Llama, Mistral, Qwen2/3, Gemma 1/2/3: GQA attention, gated MLP, RMSNorm, RoPE.

    Qwen2 has q/k/v biases always; Llama, Mistral and Qwen3 add q/k/v/o biases only with
    ``attention_bias``. Qwen3 and Gemma 3 normalise q and k per head (``head_dim`` weights
    each). Gemma's ``head_dim`` is explicit (256 for Gemma-7B, where heads*head_dim != hidden).
    """
    max_pos, tie, hd_default, norms, qk_norm = _DENSE[family]
    h = k.int("hidden_size")
    heads = k.int("num_attention_heads")
    kv, hd = _heads(k, h, heads, head_dim_default=hd_default)
    inter = k.int("intermediate_size")
    attention_bias = k.bool("attention_bias", False)
    qkv_bias = family == "qwen2" or attention_bias
    linears = _attention(h, heads, kv, hd, qkv_bias, attention_bias)
    linears += _gated_mlp(h, inter, k.bool("mlp_bias", False))
    arch = ModelArch(
        **_common(k, family, name, max_pos, tie),
        hidden_size=h,
        num_layers=k.int("num_hidden_layers"),
        num_heads=heads,
        num_kv_heads=kv,
        head_dim=hd,
        intermediate_size=inter,
        linears=linears,
        norm_kind="rms",
        norms_per_layer=norms,
        block_extra_params=2 * hd if qk_norm else 0,
    )
    _saved_tensor_traits(arch, k, family, qk_norm)
    return arch


_GEMMA_NORMS = ("gemma", "gemma2", "gemma3_text", "gemma4_text")
_SOFTCAP_DEFAULTS = {"gemma2": 30.0}  # transformers 5.17 Gemma2Config.final_logit_softcapping
_ATTN_SOFTCAP_DEFAULTS = {"gemma2": 50.0}  # transformers 5.17 Gemma2Config.attn_logit_softcapping


def _saved_tensor_traits(arch: ModelArch, k: _Keys, family: str, qk_norm: bool) -> None:
    """Traits of the family's code that change what it saves for backward (read by
    :mod:`calc.activations`), in ``arch.extra``: ``qk_norm_per_head`` (q and k normalised
    per head), ``norm_scale_fp32`` (Gemma's RMSNorm multiplies the fp32 normalised input by
    ``1 + weight`` in fp32), ``final_logit_softcapping`` (Gemma-2: ``tanh`` of the scaled
    logits), ``attn_logit_softcapping`` (Gemma-2: ``tanh`` of the scaled attention scores in
    transformers' eager attention, ``modeling_gemma2.py`` ``eager_attention_forward``; read by
    :mod:`calc.timing`)."""
    if qk_norm:
        arch.extra["qk_norm_per_head"] = True
    if family in _GEMMA_NORMS:
        arch.extra["norm_scale_fp32"] = True
    cap = k.cfg.get("final_logit_softcapping", _SOFTCAP_DEFAULTS.get(family))
    if isinstance(cap, (int, float)) and not isinstance(cap, bool) and cap > 0:
        arch.extra["final_logit_softcapping"] = float(cap)
    attn_cap = k.cfg.get("attn_logit_softcapping", _ATTN_SOFTCAP_DEFAULTS.get(family))
    if isinstance(attn_cap, (int, float)) and not isinstance(attn_cap, bool) and attn_cap > 0:
        arch.extra["attn_logit_softcapping"] = float(attn_cap)


_TANH_GELU_SAVED_WIDTHS = 4
"""Intermediate-width tensors ``gelu_new`` saves: transformers 5.17 ``activations.py`` line 66,
``NewGELUActivation.forward``: ``0.5 * input * (1.0 + torch.tanh(c * (input + 0.044715 *
torch.pow(input, 3.0))))``, written in Python, so autograd records each op: ``pow`` saves
``input``, ``tanh`` its output, and the product of ``0.5 * input`` and ``1.0 + tanh(...)``
saves both factors (the products by Python scalars and the sums save nothing). The
``gelu`` of the other plain-MLP families (``F.gelu``, one op) saves its input only."""


def _plain_mlp_traits(arch: ModelArch, k: _Keys, act_key: str, act_default: str) -> ModelArch:
    """Traits of a plain-MLP family's block (GPT-2, Phi) in ``arch.extra``:
    ``plain_act_saved_widths`` when the activation is ``gelu_new`` (see
    :data:`_TANH_GELU_SAVED_WIDTHS`), and ``residual_dropout`` when ``resid_pdrop`` is above
    0: the block drops out the attention output and the MLP output (GPT-2:
    ``GPT2Attention.resid_dropout``, ``GPT2MLP.dropout``, ``modeling_gpt2.py`` lines 224,
    242; Phi: ``PhiDecoderLayer.resid_dropout`` twice, ``modeling_phi.py`` lines 293, 295).
    On CUDA ``F.dropout`` runs ``native_dropout`` (``p > 0``), which saves its boolean
    mask, 1 byte per element; with ``p == 0`` it returns its input and saves nothing."""
    act = k.cfg.get(act_key, act_default)
    if act == "gelu_new":
        arch.extra["plain_act_saved_widths"] = _TANH_GELU_SAVED_WIDTHS
    p = k.cfg.get("resid_pdrop", 0.0)
    if isinstance(p, (int, float)) and not isinstance(p, bool) and p > 0:
        arch.extra["residual_dropout"] = True
    return arch


def _olmo(k: _Keys, family: str, name: str) -> ModelArch:
    """OLMo (v1, ``olmo``): Llama shapes without biases and with LayerNorms that hold no
    weights. OLMo 2 (``olmo2``): RMSNorm after attention and after the MLP (2 per block, none
    before) and q/k RMSNorm over the whole projection (``heads*head_dim`` + ``kv*head_dim``).
    OLMo 3 (``olmo3``; transformers 5.17 ``modeling_olmo3``): OLMo 2's block, with sliding-window
    attention on three layers in four (``Olmo3Config.layer_types``), which holds no weights."""
    h = k.int("hidden_size")
    heads = k.int("num_attention_heads")
    kv, hd = _heads(k, h, heads)
    inter = k.int("intermediate_size")
    bias = k.bool("attention_bias", False)
    olmo2 = family in ("olmo2", "olmo3")
    arch = ModelArch(
        **_common(k, family, name, 2048, False),
        hidden_size=h,
        num_layers=k.int("num_hidden_layers"),
        num_heads=heads,
        num_kv_heads=kv,
        head_dim=hd,
        intermediate_size=inter,
        linears=_attention(h, heads, kv, hd, bias, bias) + _gated_mlp(h, inter),
        norm_kind="rms" if olmo2 else "none",
        norms_per_layer=2,
        block_extra_params=(heads + kv) * hd if olmo2 else 0,
    )
    if k.cfg.get("clip_qkv") is not None and not olmo2:
        arch.extra["clip_qkv"] = True  # q, k, v clamped in place (calc.activations.clip_qkv_bytes)
    if olmo2:
        # Olmo2RMSNorm returns ``(self.weight * hidden_states).to(input_dtype)`` with
        # ``hidden_states`` the fp32 normalised input (transformers 5.17 ``modeling_olmo2.py``
        # line 65): a trained weight saves that fp32 copy. q_norm and k_norm are such norms
        # over the whole q and k projections (lines 221-222, 235-236): one fp32 ``rsqrt``
        # per token each, not one per head.
        arch.extra["norm_scale_fp32"] = True
        arch.extra["qk_norm_whole"] = True
    if family == "olmo3":
        # what Olmo3's code saves beyond the norms' count (calc.activations): the norms follow
        # the attention and the MLP (Olmo3DecoderLayer.forward), and its rotary embedding keeps
        # cos and sin in fp32 (Olmo3RotaryEmbedding.forward)
        arch.extra["norms_after_sublayers"] = True
        arch.extra["rope_fp32"] = True
    return arch


def _stablelm(k: _Keys, family: str, name: str) -> ModelArch:
    """StableLM 2 / StableLM-3B-4E1T (``stablelm``): LayerNorm with bias, q/k/v biases with
    ``use_qkv_bias``, SwiGLU MLP, two norms per block (one with ``use_parallel_residual``),
    optional per-head q/k LayerNorm without bias (``qk_layernorm``)."""
    h = k.int("hidden_size")
    heads = k.int("num_attention_heads")
    kv, hd = _heads(k, h, heads)
    inter = k.int("intermediate_size")
    parallel = k.bool("use_parallel_residual", False)
    return ModelArch(
        **_common(k, family, name, 4096, False),
        hidden_size=h,
        num_layers=k.int("num_hidden_layers"),
        num_heads=heads,
        num_kv_heads=kv,
        head_dim=hd,
        intermediate_size=inter,
        linears=_attention(h, heads, kv, hd, k.bool("use_qkv_bias", False), False)
        + _gated_mlp(h, inter),
        norm_kind="layer",
        norms_per_layer=1 if parallel else 2,
        parallel_block=parallel,
        block_extra_params=(heads + kv) * hd if k.bool("qk_layernorm", False) else 0,
    )


def _mixtral(k: _Keys, family: str, name: str) -> ModelArch:
    """Mixtral: Mistral attention; per block ``num_local_experts`` SwiGLU experts named
    w1 (gate), w3 (up), w2 (down), ``num_experts_per_tok`` active, and a router ``gate``
    (hidden -> experts, no bias)."""
    h = k.int("hidden_size")
    heads = k.int("num_attention_heads")
    kv, hd = _heads(k, h, heads)
    inter = k.int("intermediate_size")
    experts, top_k = _experts(k, "num_local_experts")
    linears = _attention(h, heads, kv, hd, False, False)
    linears += _gated_mlp(h, inter, False, experts, top_k, ("w1", "w3", "w2"))
    linears += (LinearLayer("gate", h, experts, quantizable=False, role="router"),)
    return ModelArch(
        **_common(k, family, name, 4096 * 32, False),
        hidden_size=h,
        num_layers=k.int("num_hidden_layers"),
        num_heads=heads,
        num_kv_heads=kv,
        head_dim=hd,
        intermediate_size=inter,
        linears=linears,
        num_experts=experts,
        experts_per_token=top_k,
    )


def _qwen_moe(k: _Keys, family: str, name: str) -> ModelArch:
    """Qwen1.5/Qwen2-MoE and Qwen3-MoE: every block sparse; ``num_experts`` experts of width
    ``moe_intermediate_size`` (gate_proj, up_proj, down_proj), top ``num_experts_per_tok``,
    router ``gate``. Qwen2-MoE adds a shared expert (``shared_expert_intermediate_size``,
    same module names) and its scalar ``shared_expert_gate`` (hidden -> 1); q/k/v biases.
    Qwen3-MoE has no shared expert, no biases and per-head q/k RMSNorm."""
    qwen3 = family == "qwen3_moe"
    h = k.int("hidden_size")
    heads = k.int("num_attention_heads")
    kv, hd = _heads(k, h, heads, head_dim_default=128 if qwen3 else None)
    experts, top_k = _experts(k, "num_experts")
    moe_inter = k.int("moe_intermediate_size")
    # Blocks listed in mlp_only_layers or skipped by decoder_sparse_step are dense: a
    # mixed stack is not one repeated block, so it is refused rather than miscounted.
    step = k.int("decoder_sparse_step", default=1)
    if step != 1:
        raise ConfigError("unsupported_architecture", k.prefix + "decoder_sparse_step", step)
    dense_layers = k.cfg.get("mlp_only_layers") or []
    if dense_layers:
        raise ConfigError("unsupported_architecture", k.prefix + "mlp_only_layers", dense_layers)
    attention_bias = k.bool("attention_bias", False)
    linears = _attention(h, heads, kv, hd, attention_bias or not qwen3, attention_bias and qwen3)
    linears += _gated_mlp(h, moe_inter, False, experts, top_k)
    linears += (LinearLayer("gate", h, experts, quantizable=False, role="router"),)
    shared = 0
    if not qwen3:
        shared = k.int("shared_expert_intermediate_size")
        linears += _gated_mlp(h, shared)
        linears += (LinearLayer("shared_expert_gate", h, 1, quantizable=False, role="router"),)
    return ModelArch(
        **_common(k, family, name, 32768, False),
        hidden_size=h,
        num_layers=k.int("num_hidden_layers"),
        num_heads=heads,
        num_kv_heads=kv,
        head_dim=hd,
        intermediate_size=moe_inter,
        linears=linears,
        num_experts=experts,
        experts_per_token=top_k,
        shared_expert_intermediate_size=shared,
        block_extra_params=2 * hd if qwen3 else 0,
        extra={"qk_norm_per_head": True} if qwen3 else {},
    )


def _gpt_oss(k: _Keys, family: str, name: str) -> ModelArch:
    """gpt-oss (transformers 5.17 ``modeling_gpt_oss``): q/k/v/o ``nn.Linear`` with biases
    (``attention_bias``, default true) and one learned attention-sink logit per head
    (``sinks``); every block sparse: ``num_local_experts`` SwiGLU experts stored as 3-D
    parameters with biases (``experts.gate_up_proj`` hidden -> 2 * intermediate,
    ``experts.down_proj`` intermediate -> hidden), top ``num_experts_per_tok``, and a router
    (``GptOssTopKRouter``: a weight ``experts x hidden`` and a bias, not an ``nn.Linear``).
    The published checkpoints store the expert weights in MXFP4; calc counts parameters,
    which do not depend on the storage format (see ``calc/presets.py`` for what that means
    for fine-tuning)."""
    h = k.int("hidden_size")
    heads = k.int("num_attention_heads")
    kv, hd = _heads(k, h, heads, head_dim_default=64)
    inter = k.int("intermediate_size")
    experts, top_k = _experts(k, "num_local_experts")
    bias = k.bool("attention_bias", True)
    linears = _attention(h, heads, kv, hd, bias, bias)
    linears += (
        LinearLayer("router", h, experts, True, quantizable=False, role="router", kind="param"),
        LinearLayer(
            "experts.gate_up_proj",
            h,
            2 * inter,
            True,
            experts,
            top_k,
            quantizable=False,
            kind="param",
        ),
        LinearLayer(
            "experts.down_proj", inter, h, True, experts, top_k, quantizable=False, kind="param"
        ),
    )
    return ModelArch(
        **_common(k, family, name, 131072, False),
        hidden_size=h,
        num_layers=k.int("num_hidden_layers"),
        num_heads=heads,
        num_kv_heads=kv,
        head_dim=hd,
        intermediate_size=inter,
        linears=linears,
        num_experts=experts,
        experts_per_token=top_k,
        block_extra_params=heads,  # attention sinks
        # what its code saves for backward (calc.activations): GptOssRMSNorm scales in fp32,
        # ``(self.weight * hidden_states).to(input_dtype)``; eager attention with the sink
        # column and a softmax in the logits' dtype; the experts' clamped gate (6 widths; op by
        # op in time, calc.timing.CLAMPED_GLU_BYTES_PER_ELEMENT)
        extra={
            "norm_scale_fp32": True,
            "eager_softmax_sinks": True,
            "glu_saved_widths": 6,
            "clamped_glu": True,
        },
    )


def _llama4_text(k: _Keys, family: str, name: str) -> ModelArch:
    """Llama 4 text model (transformers 5.17 ``modeling_llama4``): Llama attention without
    biases (its q/k L2 norm holds no weights); in an MoE block, ``num_local_experts``
    experts stored as 3-D parameters (``experts.gate_up_proj`` hidden -> 2 *
    ``intermediate_size``, ``experts.down_proj``), top ``num_experts_per_tok``, a router
    ``router`` (an ``nn.Linear`` hidden -> experts, no bias) and a shared expert
    (``nn.Linear`` gate_proj, up_proj, down_proj of width ``intermediate_size``) that every
    token passes through. The MoE blocks are ``moe_layers`` (default: every
    ``interleave_moe_layer_step``-th block, as ``Llama4TextConfig`` fills it); the others are
    dense, an MLP of width ``intermediate_size_mlp``. Scout makes every block sparse;
    Maverick alternates dense and MoE blocks: a mixed stack (``block_counts``)."""
    h = k.int("hidden_size")
    heads = k.int("num_attention_heads")
    kv, hd = _heads(k, h, heads, head_dim_default=128)
    inter = k.int("intermediate_size")
    experts, top_k = _experts(k, "num_local_experts")
    layers = k.int("num_hidden_layers")
    step = k.int("interleave_moe_layer_step", default=1)
    moe_layers = k.cfg.get("moe_layers")
    if moe_layers is None:
        moe_layers = list(range(step - 1, layers, step))
    if (
        not isinstance(moe_layers, list)
        or len(set(map(repr, moe_layers))) != len(moe_layers)
        or any(
            isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < layers for i in moe_layers
        )
    ):
        raise k.error("moe_layers", moe_layers)
    n_moe = len(moe_layers)
    n_dense = layers - n_moe
    moe_kind, dense_kind = ("moe", "dense") if n_dense and n_moe else ("", "")
    bias = k.bool("attention_bias", False)
    linears = _attention(h, heads, kv, hd, bias, bias)
    if n_moe:
        # QLoRA: the experts stay 3-D 16-bit parameters. transformers 5.17 swaps
        # Llama4TextExperts for one nn.Linear MLP per expert (MODULES_TO_PATCH_FOR_QUANTIZATION)
        # only when the checkpoint is already quantized (quantizers/base.py lines 169-170:
        # ``if self.pre_quantized: self._convert_model_for_quantization(model)``); QLoRA
        # quantizes a 16-bit checkpoint on load, where replace_with_bnb_linear reaches
        # nn.Linear modules only (integrations/bitsandbytes.py line 189).
        linears += (
            LinearLayer(
                "router", h, experts, quantizable=False, role="router", block_kind=moe_kind
            ),
            LinearLayer(
                "experts.gate_up_proj",
                h,
                2 * inter,
                False,
                experts,
                top_k,
                quantizable=False,
                kind="param",
                block_kind=moe_kind,
            ),
            LinearLayer(
                "experts.down_proj",
                inter,
                h,
                False,
                experts,
                top_k,
                quantizable=False,
                kind="param",
                block_kind=moe_kind,
            ),
        )
        linears += tuple(
            LinearLayer(l.name, l.d_in, l.d_out, role="mlp", block_kind=moe_kind)
            for l in _gated_mlp(h, inter)
        )  # shared expert
    if n_dense:
        dense = k.int("intermediate_size_mlp", default=16384)
        linears += tuple(
            LinearLayer(l.name, l.d_in, l.d_out, role="mlp", block_kind=dense_kind)
            for l in _gated_mlp(h, dense)
        )
    counts = (("moe", n_moe), ("dense", n_dense)) if n_dense and n_moe else ()
    arch = ModelArch(
        **_common(k, family, name, 4096 * 32, False),
        hidden_size=h,
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=kv,
        head_dim=hd,
        intermediate_size=inter,
        linears=linears,
        num_experts=experts if n_moe else 0,
        experts_per_token=top_k if n_moe else 0,
        shared_expert_intermediate_size=inter if n_moe else 0,
        block_counts=counts,
    )
    # Every token passes through every expert: Llama4TextMoe.forward repeats the input once
    # per expert and scales each copy by its router score (``hidden_states.repeat(experts,
    # 1) * router_scores``, the non-selected scores being sigmoid(-inf) = 0), then
    # Llama4TextExperts.forward runs ``bmm`` over all of them (transformers 5.17
    # ``modeling_llama4.py`` lines 79-82, 169-171); under bitsandbytes the experts become
    # SequentialLlama4TextExperts, one Llama4TextMLP per expert, each on all tokens
    # (``quantizers/base.py`` lines 323-331). Saved tensors scale with all experts.
    arch.extra["experts_run_densely"] = True
    # its eager_attention_forward takes the softmax in the scores' own dtype, no fp32 upcast
    # (modeling_llama4.py line 275)
    arch.extra["eager_softmax_act_dtype"] = True
    if k.bool("use_qk_norm", True):
        # Llama4TextL2Norm (modeling_llama4.py lines 106-115, applied at 362-364 on the layers
        # that use RoPE): ``x.float()`` normalised per head, no weight. ``no_rope_layers``
        # holds 1 for a RoPE layer; by default every ``no_rope_layer_interval``-th layer
        # (4) has none (configuration_llama4.py lines 180-183).
        interval = k.int("no_rope_layer_interval", default=4)
        rope = k.cfg.get("no_rope_layers") or [int((i + 1) % interval != 0) for i in range(layers)]
        if not isinstance(rope, list) or len(rope) != layers or any(v not in (0, 1) for v in rope):
            raise k.error("no_rope_layers", rope)
        normed = sum(1 for v in rope if v)
        if normed:
            arch.extra["qk_norm_per_head"] = True
            arch.extra["qk_norm_unweighted"] = True
            arch.extra["qk_norm_layers"] = normed
    return arch


def _phi3(k: _Keys, family: str, name: str) -> ModelArch:
    """Phi-3: fused ``qkv_proj`` (hidden -> (heads + 2 kv) * head_dim) and fused
    ``gate_up_proj`` (hidden -> 2 * intermediate), ``o_proj``, ``down_proj``; RMSNorm."""
    h = k.int("hidden_size")
    heads = k.int("num_attention_heads")
    kv, hd = _heads(k, h, heads)
    inter = k.int("intermediate_size")
    linears = (
        LinearLayer("qkv_proj", h, (heads + 2 * kv) * hd, role="attn"),
        LinearLayer("o_proj", heads * hd, h, role="attn"),
        LinearLayer("gate_up_proj", h, 2 * inter, role="mlp"),
        LinearLayer("down_proj", inter, h, role="mlp"),
    )
    # v is a slice of qkv_proj's output (transformers 5.17 Phi3Attention.forward): see
    # calc.activations.fused_qkv_kept_bytes
    return ModelArch(
        **_common(k, family, name, 4096, False),
        hidden_size=h,
        num_layers=k.int("num_hidden_layers"),
        num_heads=heads,
        num_kv_heads=kv,
        head_dim=hd,
        intermediate_size=inter,
        linears=linears,
        # q, k and v are slices of qkv_proj's output, and apply_rotary_pos_emb slices each of
        # q and k into its rotated part and the rest (transformers 5.17 modeling_phi3.py
        # Phi3Attention.forward, apply_rotary_pos_emb): calc.timing.sliced_projection_bytes
        extra={
            "fused_qkv_view": True,
            "rotary_split_fraction": _rotary_dim(k, hd, 1.0) / hd,
        },
    )


def _phi(k: _Keys, family: str, name: str) -> ModelArch:
    """Phi-1.5 / Phi-2: q/k/v_proj and ``dense`` with biases, plain MLP fc1/fc2 with biases,
    one LayerNorm per block (attention and MLP in parallel), final LayerNorm, and an
    untied ``lm_head`` with a bias. ``qk_layernorm`` adds LayerNorms of ``head_dim``."""
    h = k.int("hidden_size")
    heads = k.int("num_attention_heads")
    kv, hd = _heads(k, h, heads)
    inter = k.int("intermediate_size")
    linears = (
        LinearLayer("q_proj", h, heads * hd, True, role="attn"),
        LinearLayer("k_proj", h, kv * hd, True, role="attn"),
        LinearLayer("v_proj", h, kv * hd, True, role="attn"),
        LinearLayer("dense", heads * hd, h, True, role="attn"),
        LinearLayer("fc1", h, inter, True, role="mlp"),
        LinearLayer("fc2", inter, h, True, role="mlp"),
    )
    qk_norm = 2 * 2 * hd if k.bool("qk_layernorm", False) else 0
    arch = ModelArch(
        **_common(k, family, name, 2048, False),
        hidden_size=h,
        num_layers=k.int("num_hidden_layers"),
        num_heads=heads,
        num_kv_heads=kv,
        head_dim=hd,
        intermediate_size=inter,
        linears=linears,
        norm_kind="layer",
        norms_per_layer=1,
        parallel_block=True,
        mlp_gated=False,
        lm_head_bias=True,
        block_extra_params=qk_norm,
    )
    # PhiConfig defaults (transformers 5.17): hidden_act "gelu_new", resid_pdrop 0.0
    return _plain_mlp_traits(arch, k, "hidden_act", "gelu_new")


def _plain_block(h: int, qkv_out: int, inter: int, bias: bool) -> tuple[LinearLayer, ...]:
    """NeoX / Falcon / BLOOM block: fused query_key_value, dense, dense_h_to_4h, dense_4h_to_h."""
    return (
        LinearLayer("query_key_value", h, qkv_out, bias, role="attn"),
        LinearLayer("dense", h, h, bias, role="attn"),
        LinearLayer("dense_h_to_4h", h, inter, bias, role="mlp"),
        LinearLayer("dense_4h_to_h", inter, h, bias, role="mlp"),
    )


def _gpt_neox(k: _Keys, family: str, name: str) -> ModelArch:
    """GPT-NeoX / Pythia / StableLM-alpha: biased linears (``attention_bias``, default true),
    two LayerNorms per block, parallel residual by default, untied ``embed_out``."""
    h = k.int("hidden_size")
    heads = k.int("num_attention_heads")
    if h % heads:
        raise k.heads_error("num_attention_heads", heads)
    inter = k.int("intermediate_size")
    linears = _plain_block(h, 3 * h, inter, True)
    if not k.bool("attention_bias", True):  # the MLP keeps its biases either way
        linears = (
            LinearLayer("query_key_value", h, 3 * h, role="attn"),
            LinearLayer("dense", h, h, role="attn"),
        ) + linears[2:]
    return ModelArch(
        **_common(k, family, name, 2048, False),
        hidden_size=h,
        num_layers=k.int("num_hidden_layers"),
        num_heads=heads,
        num_kv_heads=heads,
        head_dim=h // heads,
        intermediate_size=inter,
        linears=linears,
        norm_kind="layer",
        norms_per_layer=2,
        parallel_block=k.bool("use_parallel_residual", True),
        mlp_gated=False,
    )


def _falcon(k: _Keys, family: str, name: str) -> ModelArch:
    """Falcon. Key/value heads: ``new_decoder_architecture`` (40B/180B) uses
    ``num_kv_heads`` groups, else ``multi_query`` (7B) one, else one per head. Fused
    ``query_key_value`` outputs (heads + 2 kv) * head_dim. Norms per block: two
    (input_layernorm, post_attention_layernorm) without ``parallel_attn``; with it, ln_attn
    and ln_mlp when ``num_ln_in_parallel_attn`` is 2 (the default for the new architecture),
    else one input_layernorm. ``bias``
    (default false) applies to every linear; the LM head is tied by default."""
    h = k.int("hidden_size", "n_embed")
    heads = k.int("num_attention_heads", "n_head")
    if h % heads:
        raise k.heads_error("num_attention_heads", heads)
    hd = h // heads
    new_arch = k.bool("new_decoder_architecture", False)
    parallel = k.bool("parallel_attn", True)
    if new_arch:
        kv = k.int("num_kv_heads", default=heads)
        if kv > heads or heads % kv:
            raise k.kv_error("num_kv_heads", kv)
    else:
        kv = 1 if k.bool("multi_query", True) else heads
    ln_parallel = k.int("num_ln_in_parallel_attn", default=2 if new_arch else 1)
    if ln_parallel not in (1, 2):
        raise k.error("num_ln_in_parallel_attn", ln_parallel)
    norms = 2 if not parallel else ln_parallel
    inter = k.int("ffn_hidden_size", default=4 * h)
    # Every block linear is a ``FalconLinear`` (transformers 5.17 ``modeling_falcon.py`` lines
    # 60, 247, 250, 531, 533), an ``nn.Linear`` subclass; ``replace_with_bnb_linear``
    # (``integrations/bitsandbytes.py`` line 189) converts ``Conv1D`` or ``type(module) is
    # nn.Linear`` only, so under QLoRA they stay 16-bit: their weights, and peft wraps them as
    # plain ``lora.Linear`` (no dequantized copy, no defensive clone of the base output).
    linears = tuple(
        replace(l, quantizable=False)
        for l in _plain_block(h, (heads + 2 * kv) * hd, inter, k.bool("bias", False))
    )
    arch = ModelArch(
        **_common(k, family, name, 2048, True),
        hidden_size=h,
        num_layers=k.int("num_hidden_layers", "n_layer"),
        num_heads=heads,
        num_kv_heads=kv,
        head_dim=hd,
        intermediate_size=inter,
        linears=linears,
        norm_kind="layer",
        norms_per_layer=norms,
        parallel_block=parallel or new_arch,
        mlp_gated=False,
    )
    # eager attention (calc.activations.attention_core_bytes): a 16-bit softmax, and the
    # multi-query k/v head broadcast (new_decoder_architecture expands it in _split_heads)
    arch.extra["eager_softmax_act_dtype"] = True
    if not new_arch:
        arch.extra["eager_kv_broadcast"] = True
    return arch


def _bloom(k: _Keys, family: str, name: str) -> ModelArch:
    """BLOOM: ALiBi (no position table), LayerNorm after the embedding, two LayerNorms per
    block, biased linears with a 4 * hidden MLP, tied LM head. There is no
    max_position_embeddings; the training length ``seq_length`` (default 2048) stands in."""
    h = k.int("hidden_size", "n_embed")
    heads = k.int("n_head", "num_attention_heads")
    if h % heads:
        raise k.heads_error("n_head", heads)
    inter = 4 * h
    return ModelArch(
        name=name,
        family=family,
        vocab_size=k.int("vocab_size"),
        max_position_embeddings=k.int("seq_length", default=2048),
        tie_word_embeddings=k.bool("tie_word_embeddings", True),
        hidden_size=h,
        num_layers=k.int("n_layer", "num_hidden_layers"),
        num_heads=heads,
        num_kv_heads=heads,
        head_dim=h // heads,
        intermediate_size=inter,
        linears=_plain_block(h, 3 * h, inter, True),
        norm_kind="layer",
        norms_per_layer=2,
        embedding_norm=True,
        mlp_gated=False,
    )


def _gpt2(k: _Keys, family: str, name: str) -> ModelArch:
    """GPT-2: Conv1D modules c_attn (hidden -> 3 hidden), attn.c_proj, c_fc (hidden -> n_inner,
    default 4 hidden), mlp.c_proj, all with biases; learned position table of
    ``n_positions`` rows; two LayerNorms per block plus ln_f; tied LM head."""
    h = k.int("n_embd", "hidden_size")
    heads = k.int("n_head", "num_attention_heads")
    if h % heads:
        raise k.heads_error("n_head", heads)
    inter = k.int("n_inner", default=4 * h)
    positions = k.int("n_positions", "max_position_embeddings", default=1024)
    linears = (
        LinearLayer("c_attn", h, 3 * h, True, role="attn"),
        LinearLayer("c_proj", h, h, True, role="attn"),
        LinearLayer("c_fc", h, inter, True, role="mlp"),
        LinearLayer("c_proj", inter, h, True, role="mlp"),
    )
    arch = ModelArch(
        name=name,
        family=family,
        vocab_size=k.int("vocab_size"),
        hidden_size=h,
        num_layers=k.int("n_layer", "num_hidden_layers"),
        num_heads=heads,
        num_kv_heads=heads,
        head_dim=h // heads,
        intermediate_size=inter,
        max_position_embeddings=positions,
        linears=linears,
        norm_kind="layer",
        norms_per_layer=2,
        tie_word_embeddings=k.bool("tie_word_embeddings", True),
        learned_positions=positions,
        mlp_gated=False,
    )
    # GPT2Config defaults (transformers 5.17): activation_function "gelu_new", resid_pdrop 0.1
    if "resid_pdrop" not in k.cfg:
        k = _Keys({**k.cfg, "resid_pdrop": 0.1}, k.prefix)
    # the eager path (transformers 5.17 modeling_gpt2.py eager_attention_forward, lines 63-67)
    # takes the softmax without a dtype (fp32 under autocast, whose fp32 list has softmax;
    # else the scores' own dtype), then drops the probabilities out with attn_pdrop
    # (GPT2Config default 0.1): the dropout's mask and output, kept by the product with v
    arch.extra["eager_softmax_input_dtype"] = True
    if _positive_float(k, "attn_pdrop", 0.1):
        arch.extra["eager_attention_dropout"] = True
    return _plain_mlp_traits(arch, k, "activation_function", "gelu_new")


# ---- hybrid linear attention: Gated DeltaNet + gated full attention ---------------------------
_LEGACY_LAYER_TYPES = {"attention": "full_attention"}
"""transformers 5.17 ``configuration_utils._LEGACY_LAYER_TYPE_REMAP`` (the names a Qwen
hybrid can use; its ``mamba`` / ``conv`` entries belong to other families)."""


def _mixer_kinds(k: _Keys, layers: int) -> list[str]:
    """The mixer of each block: ``layer_types`` when given (one of :data:`MIXER_KINDS` per
    layer), else ``linear_attention`` except every ``full_attention_interval``-th block
    (default 4), as ``Qwen3NextConfig.__post_init__`` / ``Qwen3_5TextConfig.__post_init__``
    build it (transformers 5.17 ``configuration_qwen3_next.py``, ``configuration_qwen3_5.py``)."""
    value = k.cfg.get("layer_types")
    if value is None:
        interval = k.int("full_attention_interval", default=4)
        return [
            "linear_attention" if (i + 1) % interval else "full_attention" for i in range(layers)
        ]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise k.error("layer_types", value)
    if len(value) != layers:
        raise ConfigError("config_layer_types_length", k.prefix + "layer_types", len(value))
    kinds = [_LEGACY_LAYER_TYPES.get(str(v), str(v)) for v in value]
    unknown = sorted({v for v in kinds if v not in MIXER_KINDS})
    if unknown:
        raise ConfigError("config_invalid_value", k.prefix + "layer_types", unknown[0])
    return kinds


def _linear_attention(k: _Keys) -> LinearAttention:
    """The Gated DeltaNet shapes (``linear_*`` keys; defaults of ``Qwen3NextConfig`` and
    ``Qwen3_5TextConfig``, transformers 5.17: 16 key heads and 32 value heads of 128, kernel
    4). The value heads must be a multiple of the key heads (q and k are repeated to them:
    ``repeat_interleave(num_v_heads // num_k_heads)``)."""
    key_heads = k.int("linear_num_key_heads", default=16)
    value_heads = k.int("linear_num_value_heads", default=32)
    if value_heads % key_heads:
        raise k.kv_error("linear_num_key_heads", key_heads)
    return LinearAttention(
        key_heads=key_heads,
        value_heads=value_heads,
        key_head_dim=k.int("linear_key_head_dim", default=128),
        value_head_dim=k.int("linear_value_head_dim", default=128),
        conv_kernel=k.int("linear_conv_kernel_dim", default=4),
    )


def _rotary_dim(k: _Keys, head_dim: int, default_factor: float) -> int:
    """Rotated dimensions per head: ``int(head_dim * partial_rotary_factor)``
    (``modeling_rope_utils._compute_default_rope_parameters``); the factor is a top-level
    key or one of ``rope_parameters`` (transformers 5 configs)."""
    factor = k.cfg.get("partial_rotary_factor")
    rope = k.cfg.get("rope_parameters")
    if factor is None and isinstance(rope, dict):
        factor = rope.get("partial_rotary_factor")
    if factor is None:
        factor = default_factor
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 0 < factor <= 1:
        raise k.error("partial_rotary_factor", factor)
    return max(1, int(head_dim * factor))


def _qwen_hybrid(k: _Keys, family: str, name: str) -> ModelArch:
    """Qwen3-Next (``qwen3_next``), Qwen3.5 (``qwen3_5_text``) and Qwen3.5-MoE
    (``qwen3_5_moe_text``), transformers 5.17 ``modeling_qwen3_next.py`` /
    ``modeling_qwen3_5.py`` / ``modeling_qwen3_5_moe.py``.

    Each block holds one mixer (:func:`_mixer_kinds`) and one MLP, with two RMSNorms that
    scale by ``1 + weight`` in fp32 (``Qwen3NextRMSNorm``):

    - full attention (``Qwen3NextAttention``): ``q_proj`` of ``2 * heads * head_dim`` (the
      query and a sigmoid output gate per head, ``attn_output * torch.sigmoid(gate)``),
      ``k_proj``, ``v_proj``, ``o_proj`` (``attention_bias`` on all four), per-head q/k
      RMSNorm (``head_dim`` weights each), RoPE on ``partial_rotary_factor`` of each head
      (0.25 by default);
    - Gated DeltaNet (``Qwen3NextGatedDeltaNet``: ``in_proj_qkvz`` hidden -> ``2 key_dim +
      2 value_dim`` and ``in_proj_ba`` hidden -> ``2 value_heads``; ``Qwen3_5GatedDeltaNet``
      splits them: ``in_proj_qkv``, ``in_proj_z``, ``in_proj_b``, ``in_proj_a``), a depthwise
      ``nn.Conv1d`` (not an ``nn.Linear``: peft's ``all-linear`` and bitsandbytes leave it),
      ``A_log``, ``dt_bias``, ``Qwen3NextRMSNormGated`` and ``out_proj``
      (:class:`calc.arch.LinearAttention`);
    - MLP: Qwen3.5's dense SwiGLU (``intermediate_size``), or the MoE of Qwen3-Next and
      Qwen3.5-MoE (``Qwen3NextSparseMoeBlock``): ``num_experts`` experts of
      ``moe_intermediate_size`` (3-D parameters in transformers 5: calc's ``fused-3d``
      layout; not a peft-converted family, like ``qwen2_moe``), a router ``gate``, one shared
      expert of ``shared_expert_intermediate_size`` and its scalar ``shared_expert_gate``.
    """
    h = k.int("hidden_size")
    heads = k.int("num_attention_heads")
    kv, hd = _heads(k, h, heads, head_dim_default=256)
    layers = k.int("num_hidden_layers")
    kinds = _mixer_kinds(k, layers)
    la = _linear_attention(k)
    bias = k.bool("attention_bias", False)
    full, lin = "full_attention", "linear_attention"
    attention = (
        LinearLayer("q_proj", h, 2 * heads * hd, bias, role="attn", block_kind=full),
        LinearLayer("k_proj", h, kv * hd, bias, role="attn", block_kind=full),
        LinearLayer("v_proj", h, kv * hd, bias, role="attn", block_kind=full),
        LinearLayer("o_proj", heads * hd, h, bias, role="attn", block_kind=full),
    )
    if family == "qwen3_next":
        projections: tuple[tuple[str, int], ...] = (
            ("in_proj_qkvz", 2 * la.key_dim + 2 * la.value_dim),
            ("in_proj_ba", 2 * la.value_heads),
        )
    else:
        projections = (
            ("in_proj_qkv", la.conv_dim),
            ("in_proj_z", la.value_dim),
            ("in_proj_b", la.value_heads),
            ("in_proj_a", la.value_heads),
        )
    mixer = tuple(
        LinearLayer(n, h, width, role="mixer", block_kind=lin) for n, width in projections
    ) + (LinearLayer("out_proj", la.value_dim, h, role="mixer", block_kind=lin),)
    moe = family != "qwen3_5_text"
    experts = top_k = shared = 0
    if moe:
        if family == "qwen3_next":
            # blocks listed in mlp_only_layers or skipped by decoder_sparse_step hold a dense
            # MLP: refused rather than miscounted (no published checkpoint has them)
            step = k.int("decoder_sparse_step", default=1)
            if step != 1:
                raise ConfigError(
                    "unsupported_architecture", k.prefix + "decoder_sparse_step", step
                )
            dense_layers = k.cfg.get("mlp_only_layers") or []
            if dense_layers:
                raise ConfigError(
                    "unsupported_architecture", k.prefix + "mlp_only_layers", dense_layers
                )
        experts, top_k = _experts(k, "num_experts")
        inter = k.int("moe_intermediate_size")
        shared = k.int("shared_expert_intermediate_size")
        mlp = _gated_mlp(h, inter, False, experts, top_k)
        mlp += (LinearLayer("gate", h, experts, quantizable=False, role="router"),)
        mlp += _gated_mlp(h, shared)
        mlp += (LinearLayer("shared_expert_gate", h, 1, quantizable=False, role="router"),)
    else:
        inter = k.int("intermediate_size")
        mlp = _gated_mlp(h, inter)
    n_full = kinds.count(full)
    arch = ModelArch(
        **_common(k, family, name, 32768, False),
        hidden_size=h,
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=kv,
        head_dim=hd,
        intermediate_size=inter,
        linears=attention + mixer + mlp,
        norm_kind="rms",
        norms_per_layer=2,
        num_experts=experts,
        experts_per_token=top_k,
        shared_expert_intermediate_size=shared,
        block_counts=((full, n_full), (lin, layers - n_full)),
        block_kind_params=((full, 2 * hd), (lin, la.own_params)),
        linear_attention=la,
    )
    arch.extra["norm_scale_fp32"] = True  # Qwen3NextRMSNorm: output * (1.0 + weight.float())
    arch.extra["qk_norm_per_head"] = True
    arch.extra["attention_output_gate"] = True
    arch.extra["rope_dim"] = _rotary_dim(k, hd, 0.25)
    arch.extra["mixer_order"] = list(kinds)
    # the projections the output gate z and the decay's a come from
    arch.extra["gdn_gate_proj"] = "in_proj_qkvz" if family == "qwen3_next" else "in_proj_z"
    arch.extra["gdn_decay_proj"] = "in_proj_ba" if family == "qwen3_next" else "in_proj_a"
    if moe:
        arch.extra["shared_expert_gated"] = True  # sigmoid(shared_expert_gate(x)) * shared
    return arch


def _olmo_hybrid(k: _Keys, family: str, name: str) -> ModelArch:
    """OLMo Hybrid (``olmo_hybrid``; transformers 5.17 ``modeling_olmo_hybrid.py``): OLMo 2
    attention blocks (``OlmoHybridAttentionDecoderLayer``: q/k/v/o ``nn.Linear`` without
    biases, RMSNorm over the whole q and k projections, norms after attention and after the
    MLP) and Gated DeltaNet blocks (``OlmoHybridLinearAttentionDecoderLayer``: norms before
    the mixer and the MLP; ``OlmoHybridGatedDeltaNet`` with separate ``q_proj``, ``k_proj``,
    ``v_proj``, ``a_proj``, ``b_proj``, ``g_proj`` and ``o_proj``, a depthwise ``conv1d``
    over q, k and v, ``A_log``, ``dt_bias``, a gated norm, and ``beta`` doubled with
    ``linear_allow_neg_eigval``), each with a SwiGLU MLP. Every RMSNorm scales in fp32
    (``(self.weight * hidden_states).to(input_dtype)``). Defaults of ``OlmoHybridConfig``:
    attention every fourth block (at least the last one), linear heads as many as the
    attention heads, key head width ``int(0.75 * hidden / key_heads)``, value heads twice as
    wide; RoPE only with ``rope_parameters.rope_theta`` (on by default)."""
    h = k.int("hidden_size")
    heads = k.int("num_attention_heads")
    kv, hd = _heads(k, h, heads)
    layers = k.int("num_hidden_layers")
    if k.cfg.get("layer_types") is None:
        kinds = ["full_attention" if i % 4 == 3 else "linear_attention" for i in range(layers)]
        if "full_attention" not in kinds:
            kinds[-1] = "full_attention"
    else:
        kinds = _mixer_kinds(k, layers)
    key_heads = k.int("linear_num_key_heads", default=heads)
    value_heads = k.int("linear_num_value_heads", default=heads)
    if value_heads % key_heads:
        raise k.kv_error("linear_num_key_heads", key_heads)
    key_dim = k.int("linear_key_head_dim", default=max(1, int(0.75 * h / key_heads)))
    la = LinearAttention(
        key_heads=key_heads,
        value_heads=value_heads,
        key_head_dim=key_dim,
        value_head_dim=k.int("linear_value_head_dim", default=2 * key_dim),
        conv_kernel=k.int("linear_conv_kernel_dim", default=4),
    )
    inter = k.int("intermediate_size")
    full, lin = "full_attention", "linear_attention"
    attention = tuple(
        replace(l, block_kind=full) for l in _attention(h, heads, kv, hd, False, False)
    )
    mixer = tuple(
        LinearLayer(n, h, width, role="mixer", block_kind=lin)
        for n, width in (
            ("q_proj", la.key_dim),
            ("k_proj", la.key_dim),
            ("v_proj", la.value_dim),
            ("a_proj", la.value_heads),
            ("b_proj", la.value_heads),
            ("g_proj", la.value_dim),
        )
    ) + (LinearLayer("o_proj", la.value_dim, h, role="mixer", block_kind=lin),)
    n_full = kinds.count(full)
    arch = ModelArch(
        **_common(k, family, name, 65536, False),
        hidden_size=h,
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=kv,
        head_dim=hd,
        intermediate_size=inter,
        linears=attention + mixer + _gated_mlp(h, inter),
        norm_kind="rms",
        norms_per_layer=2,
        block_counts=((full, n_full), (lin, layers - n_full)),
        block_kind_params=((full, (heads + kv) * hd), (lin, la.own_params)),
        linear_attention=la,
    )
    arch.extra["norm_scale_fp32"] = True
    arch.extra["qk_norm_whole"] = True
    arch.extra["mixer_order"] = kinds
    arch.extra["gdn_gate_proj"], arch.extra["gdn_decay_proj"] = "g_proj", "a_proj"
    if k.bool("linear_allow_neg_eigval", True):
        arch.extra["gdn_beta_scaled"] = True  # beta = b_proj(x).sigmoid() * 2.0
    rope = k.cfg.get("rope_parameters")
    if isinstance(rope, dict) and rope.get("rope_theta") is None and "rope_theta" not in k.cfg:
        arch.extra["no_rope"] = True  # OlmoHybridModel builds no rotary embedding
    return arch


def _lfm2_ffn_width(k: _Keys) -> int:
    """``Lfm2MLP``'s width (transformers 5.17 ``modeling_lfm2.py``): ``block_ff_dim`` when
    given (``Lfm2Config.__post_init__`` pops it over ``intermediate_size``; LFM2-1.2B's
    config.json holds both, 12288 and 8192), else ``intermediate_size``; with
    ``block_auto_adjust_ff_dim``
    (default true) ``int(2 * width / 3)``, times ``block_ffn_dim_multiplier`` (default 1.0),
    rounded up to a multiple of ``block_multiple_of`` (default 256)."""
    width = k.int("block_ff_dim", "intermediate_size")
    if not k.bool("block_auto_adjust_ff_dim", True):
        return width
    width = int(2 * width / 3)
    multiplier = k.cfg.get("block_ffn_dim_multiplier", 1.0)
    if multiplier is not None:
        if isinstance(multiplier, bool) or not isinstance(multiplier, (int, float)):
            raise k.error("block_ffn_dim_multiplier", multiplier)
        if multiplier <= 0:
            raise k.error("block_ffn_dim_multiplier", multiplier)
        multiple = k.int("block_multiple_of", default=256)
        width = multiple * ((int(multiplier * width) + multiple - 1) // multiple)
    if width <= 0:
        raise k.error("intermediate_size", width)
    return width


def _lfm2_kinds(k: _Keys, layers: int) -> list[str]:
    """Each block's mixer: ``layer_types`` (``full_attention`` or ``conv``) when given, else
    ``full_attention`` at the indices of ``full_attn_idxs`` (default: every block) and
    ``conv`` elsewhere (``Lfm2Config.__post_init__``)."""
    value = k.cfg.get("layer_types")
    if value is None:
        idxs = k.cfg.get("full_attn_idxs")
        if idxs is None:
            return ["full_attention"] * layers
        if not isinstance(idxs, list) or not all(
            isinstance(i, int) and not isinstance(i, bool) and 0 <= i < layers for i in idxs
        ):
            raise k.error("full_attn_idxs", idxs)
        return ["full_attention" if i in idxs else "conv" for i in range(layers)]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise k.error("layer_types", value)
    if len(value) != layers:
        raise ConfigError("config_layer_types_length", k.prefix + "layer_types", len(value))
    unknown = sorted({str(v) for v in value if v not in ("full_attention", "conv")})
    if unknown:
        raise ConfigError("config_invalid_value", k.prefix + "layer_types", unknown[0])
    return [str(v) for v in value]


def _lfm2(k: _Keys, family: str, name: str) -> ModelArch:
    """LFM2 (``lfm2``; transformers 5.17 ``modeling_lfm2.py``): blocks of a gated short
    convolution (``Lfm2ShortConv``: ``in_proj`` hidden -> 3 hidden, a depthwise ``nn.Conv1d``
    of ``conv_L_cache`` taps, ``out_proj`` hidden -> hidden; ``conv_bias`` on all three) or
    of attention (``Lfm2Attention``: ``q_proj``, ``k_proj``, ``v_proj``, ``out_proj``, no
    biases, per-head RMSNorm ``q_layernorm`` / ``k_layernorm``), each with the SwiGLU
    ``Lfm2MLP`` (``w1``, ``w3``, ``w2``, :func:`_lfm2_ffn_width`) and two RMSNorms
    (``operator_norm``, ``ffn_norm``); the final norm is named ``embedding_norm``; the output
    layer is tied by default. The convolution is not an ``nn.Linear`` (peft's ``all-linear``
    and bitsandbytes leave it)."""
    h = k.int("hidden_size")
    heads = k.int("num_attention_heads")
    kv, hd = _heads(k, h, heads)
    layers = k.int("num_hidden_layers")
    moe = family == "lfm2_moe"
    if moe and k.cfg.get("layer_types") is None:
        # Lfm2MoeConfig builds no layer list from full_attn_idxs: the model indexes layer_types
        raise ConfigError("config_missing_key", k.prefix + "layer_types", None)
    kinds = _lfm2_kinds(k, layers)
    kernel = k.int("conv_L_cache", default=3)
    bias = k.bool("conv_bias", False)
    inter = k.int("intermediate_size", default=7168) if moe else _lfm2_ffn_width(k)
    full = "full_attention"
    counts = ((full, kinds.count(full)), ("conv", kinds.count("conv")))
    attention = tuple(
        replace(l, block_kind=full) for l in _attention(h, heads, kv, hd, False, False)
    )
    attention = attention[:3] + (replace(attention[3], name="out_proj"),)
    conv = (
        LinearLayer("in_proj", h, 3 * h, bias, role="mixer", block_kind="conv"),
        LinearLayer("out_proj", h, h, bias, role="mixer", block_kind="conv"),
    )
    mlp = _gated_mlp(h, inter, names=("w1", "w3", "w2"))
    ffn_counts: tuple[tuple[str, int], ...] = ()
    experts = top_k = 0
    if moe:
        mlp, ffn_counts, experts, top_k = _lfm2_moe_mlp(k, h, layers, inter)
    arch = ModelArch(
        # the original checkpoints name the tying key tie_embedding (Lfm2Config reads both)
        **_common(k, family, name, 128_000, k.bool("tie_embedding", True)),
        hidden_size=h,
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=kv,
        head_dim=hd,
        intermediate_size=inter,
        linears=attention + conv + mlp,
        norm_kind="rms",
        norms_per_layer=2,
        num_experts=experts,
        experts_per_token=top_k,
        block_counts=counts,
        block_kind_params=((full, 2 * hd), ("conv", h * kernel + (h if bias else 0))),
        ffn_counts=ffn_counts,
        short_conv_kernel=kernel,
    )
    arch.extra["qk_norm_per_head"] = True
    arch.extra["mixer_order"] = kinds
    if ffn_counts:
        dense = dict(ffn_counts)["dense"]
        arch.extra["ffn_order"] = ["dense"] * dense + ["moe"] * (layers - dense)
    return arch


def _lfm2_moe_mlp(
    k: _Keys, h: int, layers: int, inter: int
) -> tuple[tuple[LinearLayer, ...], tuple[tuple[str, int], ...], int, int]:
    """LFM2-MoE's MLPs (``lfm2_moe``; transformers 5.17 ``modeling_lfm2_moe.py``): the first
    ``num_dense_layers`` blocks hold ``Lfm2MoeMLP`` (``w1``, ``w3``, ``w2`` of
    ``intermediate_size``, no width adjustment), the others ``Lfm2MoeSparseMoeBlock``: the
    router ``gate`` (``Lfm2MoeTopKRouter``, a bare ``weight`` of ``num_experts`` rows; sigmoid
    scores, top ``num_experts_per_tok``; ``expert_bias`` is a buffer) and ``num_experts``
    SwiGLU experts as 3-D parameters (``Qwen2MoeExperts``: ``gate_up_proj``, ``down_proj`` of
    ``moe_intermediate_size``), no shared expert. Whichever its mixer, a block's MLP kind is
    counted in ``ffn_counts`` (none when all blocks hold one kind). Returns (linears,
    ffn_counts, experts, top_k)."""
    dense = k.cfg.get("num_dense_layers", 2)
    if isinstance(dense, bool) or not isinstance(dense, int) or dense < 0:
        raise k.error("num_dense_layers", dense)
    dense = min(dense, layers)  # Lfm2MoeDecoderLayer: dense where layer_idx < num_dense_layers
    experts, top_k = _routed_experts(k, "num_experts")
    width = k.int("moe_intermediate_size", default=1792)
    dense_kind, moe_kind = ("dense", "moe") if dense and dense < layers else ("", "")
    linears: tuple[LinearLayer, ...] = ()
    if dense:
        linears += tuple(
            replace(l, block_kind=dense_kind)
            for l in _gated_mlp(h, inter, names=("w1", "w3", "w2"))
        )
    if dense < layers:
        linears += (
            LinearLayer(
                "gate",
                h,
                experts,
                quantizable=False,
                role="router",
                kind="param",
                block_kind=moe_kind,
            ),
            LinearLayer(
                "experts.gate_up_proj",
                h,
                2 * width,
                False,
                experts,
                top_k,
                False,
                kind="param",
                block_kind=moe_kind,
            ),
            LinearLayer(
                "experts.down_proj",
                width,
                h,
                False,
                experts,
                top_k,
                False,
                kind="param",
                block_kind=moe_kind,
            ),
        )
    counts = (("dense", dense), ("moe", layers - dense)) if dense_kind else ()
    return linears, counts, experts if dense < layers else 0, top_k if dense < layers else 0


# ---- Mamba-2 hybrids: one sublayer per block ------------------------------------------------
_NEMOTRON_H_PATTERN = {"M": "mamba", "*": "full_attention", "-": "mlp", "E": "moe"}
"""``NemotronHConfig._pattern_to_list`` (transformers 5.17 ``configuration_nemotron_h.py``),
with calc's kind names: its ``linear_attention`` (legacy ``mamba``) blocks are Mamba-2."""
_NEMOTRON_H_TYPES = {
    "linear_attention": "mamba",
    "mamba": "mamba",
    "full_attention": "full_attention",
    "attention": "full_attention",
    "mlp": "mlp",
    "moe": "moe",
}
"""``layers_block_type`` names (and the legacy ones ``remap_legacy_layer_types`` maps)."""


def _nemotron_h_kinds(k: _Keys) -> list[str]:
    """Each block's sublayer: ``layers_block_type`` (``layer_types``) when given, else the
    characters of ``hybrid_override_pattern`` (``M`` Mamba-2, ``*`` attention, ``-`` MLP,
    ``E`` MoE). ``NemotronHConfig.num_hidden_layers`` is the list's length; a config that
    states another ``num_hidden_layers`` is refused rather than read one way or the other
    (transformers only logs a warning and builds the list's length)."""
    value = k.cfg.get("layers_block_type", k.cfg.get("layer_types"))
    key = "layers_block_type" if "layers_block_type" in k.cfg else "layer_types"
    if value is None:
        pattern = k.cfg.get("hybrid_override_pattern")
        key = "hybrid_override_pattern"
        if not isinstance(pattern, str) or not pattern:
            raise ConfigError("config_missing_key", k.prefix + key, pattern)
        unknown = sorted({c for c in pattern if c not in _NEMOTRON_H_PATTERN})
        if unknown:
            raise ConfigError("config_invalid_value", k.prefix + key, unknown[0])
        kinds = [_NEMOTRON_H_PATTERN[c] for c in pattern]
    else:
        if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
            raise k.error(key, value)
        unknown = sorted({str(v) for v in value if v not in _NEMOTRON_H_TYPES})
        if unknown:
            raise ConfigError("config_invalid_value", k.prefix + key, unknown[0])
        kinds = [_NEMOTRON_H_TYPES[str(v)] for v in value]
    if len(kinds) > _LAYER_LIMIT:
        raise ConfigError("config_invalid_value", k.prefix + key, len(kinds), "out_of_range")
    stated = k.int("num_hidden_layers", default=len(kinds))
    if stated != len(kinds):
        raise ConfigError("config_layer_types_length", k.prefix + key, len(kinds))
    return kinds


def _mamba2(k: _Keys) -> Mamba2:
    """``NemotronHMamba2Mixer``'s shapes (defaults of ``NemotronHConfig``: 128 heads of 64, 8
    groups, state 128, kernel 4, conv bias, chunk 128; the ``mamba_*`` names are the legacy
    aliases ``__post_init__`` pops)."""
    heads = k.int("mamba_num_heads", default=128)
    groups = k.int("n_groups", "mamba_n_groups", default=8)
    if heads % groups:
        raise k.kv_error("n_groups", groups)
    return Mamba2(
        heads=heads,
        head_dim=k.int("mamba_head_dim", default=64),
        groups=groups,
        state=k.int("ssm_state_size", default=128),
        conv_kernel=k.int("conv_kernel", "mamba_d_conv", default=4),
        conv_bias=k.bool("use_conv_bias", k.bool("mamba_conv_bias", True)),
        chunk=k.int("chunk_size", "mamba_chunk_size", default=128),
    )


def _mamba2_split(k: _Keys, d_ssm: int, gated_norm: bool) -> Mamba2:
    """The Mamba-2 shapes Falcon-H1 and Granite 4's hybrids read under the same key names
    (``FalconH1Config`` / ``GraniteMoeHybridConfig``, transformers 5.17): ``d_ssm`` channels in
    ``mamba_n_heads`` heads (128) of ``mamba_d_head`` (``"auto"``: ``d_ssm / heads``),
    ``mamba_n_groups`` groups (1), state 256, kernel 4, conv bias, chunk 256."""
    m_heads = k.int("mamba_n_heads", default=128)
    head = k.cfg.get("mamba_d_head", "auto")
    if head == "auto" or head is None:
        if d_ssm % m_heads:
            raise k.heads_error("mamba_n_heads", m_heads)
        m_head = d_ssm // m_heads
    else:
        m_head = k.int("mamba_d_head")
        if m_head * m_heads != d_ssm:
            raise k.error("mamba_d_head", m_head)
    groups = k.int("mamba_n_groups", default=1)
    if m_heads % groups:
        raise k.kv_error("mamba_n_groups", groups)
    return Mamba2(
        heads=m_heads,
        head_dim=m_head,
        groups=groups,
        state=k.int("mamba_d_state", default=256),
        conv_kernel=k.int("mamba_d_conv", default=4),
        conv_bias=k.bool("mamba_conv_bias", True),
        chunk=k.int("mamba_chunk_size", default=256),
        gated_norm=gated_norm,
    )


def _nemotron_h(k: _Keys, family: str, name: str) -> ModelArch:
    """Nemotron-H (``nemotron_h``; transformers 5.17 ``modeling_nemotron_h.py``): each
    ``NemotronHBlock`` is one RMSNorm, one sublayer and the residual add. The sublayer is a
    Mamba-2 mixer (``NemotronHMamba2Mixer``: ``in_proj`` hidden -> z, x, B, C, dt; a depthwise
    ``nn.Conv1d`` over x, B, C; ``dt_bias``, ``A_log``, ``D``; a gated RMSNorm; ``out_proj``;
    ``use_bias`` on both linears), an attention (``NemotronHAttention``: q/k/v/o without
    biases, ``head_dim`` 128 by default, no RoPE: ``NemotronHModel`` builds no rotary
    embedding), a plain MLP (``NemotronHMLP``: ``up_proj``, ``relu2``, ``down_proj``,
    ``mlp_bias``) or routed experts beside a shared one (:func:`_nemotron_h_moe`). The final norm is ``norm_f``; the output layer is untied by default."""
    h = k.int("hidden_size")
    kinds = _nemotron_h_kinds(k)
    layers = len(kinds)
    heads = k.int("num_attention_heads", default=32)
    kv, hd = _heads(k, h, heads, head_dim_default=128)
    mamba = _mamba2(k)
    inter = k.int("intermediate_size", default=21504)
    bias = k.bool("use_bias", False)
    mlp_bias = k.bool("mlp_bias", False)
    full = "full_attention"
    attention = tuple(
        replace(l, block_kind=full) for l in _attention(h, heads, kv, hd, False, False)
    )
    mixer = (
        LinearLayer("in_proj", h, mamba.in_proj_width, bias, role="mixer", block_kind="mamba"),
        LinearLayer("out_proj", mamba.d_inner, h, bias, role="mixer", block_kind="mamba"),
    )
    mlp = (
        LinearLayer("up_proj", h, inter, mlp_bias, role="mlp", block_kind="mlp"),
        LinearLayer("down_proj", inter, h, mlp_bias, role="mlp", block_kind="mlp"),
    )
    moe, experts, top_k = _nemotron_h_moe(k, h, mlp_bias) if "moe" in kinds else ((), 0, 0)
    counts = tuple((kind, kinds.count(kind)) for kind in ("mamba", full, "mlp", "moe"))
    counts = tuple((kind, n) for kind, n in counts if n or kind != "moe")
    arch = ModelArch(
        **_common(k, family, name, 4096, False),
        hidden_size=h,
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=kv,
        head_dim=hd,
        intermediate_size=inter,
        linears=attention + mixer + mlp + moe,
        norm_kind="rms",
        norms_per_layer=1,
        mlp_gated=False,
        num_experts=experts,
        experts_per_token=top_k,
        shared_expert_intermediate_size=k.int("moe_shared_expert_intermediate_size", default=7688)
        if experts
        else 0,
        block_counts=counts,
        block_kind_params=(("mamba", mamba.own_params),),
        mamba=mamba,
    )
    arch.extra["mixer_order"] = kinds
    arch.extra["no_rope"] = True
    arch.extra["one_sublayer_per_block"] = True
    if experts:
        # NemotronHTopkRouter.forward: F.linear(hidden_states.type(torch.float32), ...)
        arch.extra["router_fp32_input"] = True
    return arch


def _nemotron_h_moe(k: _Keys, h: int, bias: bool) -> tuple[tuple[LinearLayer, ...], int, int]:
    """The sublayer of Nemotron-H's ``moe`` blocks (transformers 5.17 ``NemotronHMoE``): the
    router ``gate`` (``NemotronHTopkRouter``: a bare ``weight`` of ``n_routed_experts`` rows
    over the hidden width, sigmoid scores with DeepSeek's group-limited top
    ``num_experts_per_tok``), the routed experts as 3-D parameters of non-gated units
    (``NemotronHExperts``: ``up_proj`` hidden -> ``moe_intermediate_size``, ``relu2``,
    ``down_proj``; no biases) and one shared expert (``shared_experts``, a ``NemotronHMLP`` of
    width ``moe_shared_expert_intermediate_size`` with ``mlp_bias``), every token through it
    (``n_shared_experts`` builds no more). A ``moe_latent_size`` (``fc1_latent_proj`` /
    ``fc2_latent_proj`` around the experts) is refused rather than miscounted."""
    latent = k.cfg.get("moe_latent_size")
    if latent is not None:
        raise ConfigError("unsupported_architecture", k.prefix + "moe_latent_size", latent)
    experts, top_k = _routed_experts(k, "n_routed_experts", "num_local_experts")
    _group_routing(k, experts)
    inter = k.int("moe_intermediate_size", default=7688)
    shared = k.int("moe_shared_expert_intermediate_size", default=7688)
    moe = "moe"
    return (
        (
            LinearLayer("gate", h, experts, quantizable=False, role="router", block_kind=moe),
            LinearLayer(
                "experts.up_proj",
                h,
                inter,
                False,
                experts,
                top_k,
                False,
                kind="param",
                block_kind=moe,
            ),
            LinearLayer(
                "experts.down_proj",
                inter,
                h,
                False,
                experts,
                top_k,
                False,
                kind="param",
                block_kind=moe,
            ),
            LinearLayer("up_proj", h, shared, bias, role="mlp", block_kind=moe),
            LinearLayer("down_proj", shared, h, bias, role="mlp", block_kind=moe),
        ),
        experts,
        top_k,
    )


def _falcon_h1(k: _Keys, family: str, name: str) -> ModelArch:
    """Falcon-H1 (``falcon_h1``; transformers 5.17 ``modeling_falcon_h1.py``): every
    ``FalconH1DecoderLayer`` runs a Mamba-2 mixer (``FalconH1Mixer``) and an attention
    (``FalconH1Attention``: q/k/v/o with ``attention_bias``, RoPE on the whole head) side by
    side on the output of ``input_layernorm``, each on its own scaled copy of it
    (``hidden_states * ssm_in_multiplier``, ``hidden_states * attention_in_multiplier``), then
    ``pre_ff_layernorm`` and a SwiGLU MLP (``mlp_bias``). The mixer is Nemotron-H's with
    ``mamba_d_ssm`` channels (``mamba_expand * hidden`` when null) in ``mamba_n_heads`` heads of
    ``mamba_d_head`` (``"auto"``: ``d_ssm / heads``), ``mamba_proj_bias`` on ``in_proj``,
    ``projectors_bias`` on ``out_proj`` and the gated RMSNorm only with ``mamba_rms_norm``.
    The muP multipliers (``ssm_multipliers``' buffer, ``mlp_multipliers``, ``key_multiplier``,
    ``embedding_multiplier``, ``lm_head_multiplier``) hold no weights and, as products by
    Python floats or by a buffer, save nothing per token."""
    h = k.int("hidden_size", default=4096)
    layers = k.int("num_hidden_layers", default=32)
    heads = k.int("num_attention_heads", default=32)
    kv, hd = _heads(k, h, heads, head_dim_default=0)
    inter = k.int("intermediate_size", default=14336)
    d_ssm = k.cfg.get("mamba_d_ssm", 1024)
    if d_ssm is None:
        d_ssm = k.int("mamba_expand", default=2) * h
    else:
        d_ssm = k.int("mamba_d_ssm")
    mamba = _mamba2_split(k, d_ssm, gated_norm=k.bool("mamba_rms_norm", False))
    bias = k.bool("attention_bias", False)
    mixer = (
        LinearLayer(
            "in_proj", h, mamba.in_proj_width, k.bool("mamba_proj_bias", False), role="mixer"
        ),
        LinearLayer("out_proj", mamba.d_inner, h, k.bool("projectors_bias", False), role="mixer"),
    )
    arch = ModelArch(
        **_common(k, family, name, 8192, False),
        hidden_size=h,
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=kv,
        head_dim=hd,
        intermediate_size=inter,
        linears=_attention(h, heads, kv, hd, bias, bias)
        + mixer
        + _gated_mlp(h, inter, k.bool("mlp_bias", False)),
        norm_kind="rms",
        norms_per_layer=2,
        block_extra_params=mamba.own_params,
        mamba=mamba,
    )
    arch.extra["parallel_mamba"] = True
    return arch


_GRANITE_HYBRID_TYPES = {
    "mamba": "mamba",
    "linear_attention": "mamba",
    "attention": "full_attention",
    "full_attention": "full_attention",
}
"""``layer_types`` names of Granite 4.0 hybrids (``remap_legacy_layer_types`` maps ``mamba``
and ``attention`` to ``linear_attention`` / ``full_attention``), with calc's kind names."""


def _granite_hybrid(k: _Keys, family: str, name: str) -> ModelArch:
    """Granite 4.0 hybrids (``granitemoehybrid``; transformers 5.17
    ``modeling_granitemoehybrid.py``): each ``GraniteMoeHybridDecoderLayer`` holds a Mamba-2
    mixer (``GraniteMoeHybridMambaLayer``: Nemotron-H's, ``mamba_expand * hidden`` channels,
    ``mamba_proj_bias`` on ``in_proj`` and ``out_proj``, always a gated norm) or an attention
    (``GraniteMoeHybridAttention``: q/k/v/o with ``attention_bias``, RoPE only with
    ``position_embedding_type: "rope"``), by ``layer_types`` (all Mamba-2 when absent), then
    the MoE (``num_local_experts`` 3-D SwiGLU experts ``experts.gate_up_proj`` /
    ``experts.down_proj`` of ``intermediate_size``, top ``num_experts_per_tok``, a router
    weight that is no ``nn.Linear``; none with 0 experts) beside the shared
    ``GraniteMoeHybridMLP`` (``input_linear`` hidden -> 2 ``shared_intermediate_size``,
    ``act(chunk 0) * chunk 1``, ``output_linear``); two RMSNorms. The multipliers
    (``embedding_multiplier``, ``residual_multiplier``, ``attention_multiplier``,
    ``logits_scaling``) are Python floats: no weights, nothing saved."""
    h = k.int("hidden_size", default=4096)
    layers = k.int("num_hidden_layers", default=32)
    heads = k.int("num_attention_heads", default=32)
    kv, hd = _heads(k, h, heads)
    value = k.cfg.get("layer_types", k.cfg.get("layers_block_type"))
    if value is None:
        kinds = ["mamba"] * layers
    else:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise k.error("layer_types", value)
        if len(value) != layers:
            raise ConfigError("config_layer_types_length", k.prefix + "layer_types", len(value))
        unknown = sorted({str(v) for v in value if v not in _GRANITE_HYBRID_TYPES})
        if unknown:
            raise ConfigError("config_invalid_value", k.prefix + "layer_types", unknown[0])
        kinds = [_GRANITE_HYBRID_TYPES[str(v)] for v in value]
    mamba = _mamba2_split(k, k.int("mamba_expand", default=2) * h, gated_norm=True)
    full = "full_attention"
    bias = k.bool("attention_bias", False)
    attention = tuple(replace(l, block_kind=full) for l in _attention(h, heads, kv, hd, bias, bias))
    proj_bias = k.bool("mamba_proj_bias", False)
    mixer = (
        LinearLayer("in_proj", h, mamba.in_proj_width, proj_bias, role="mixer", block_kind="mamba"),
        LinearLayer("out_proj", mamba.d_inner, h, proj_bias, role="mixer", block_kind="mamba"),
    )
    shared = k.int("shared_intermediate_size", default=1024)
    mlp: tuple[LinearLayer, ...] = ()
    experts = top_k = 0
    inter = shared
    count = k.cfg.get("num_local_experts", 8)
    if count != 0:
        experts, top_k = _experts(k, "num_local_experts")
        inter = k.int("intermediate_size", default=11008)
        mlp = (
            LinearLayer("router", h, experts, quantizable=False, role="router", kind="param"),
            LinearLayer(
                "experts.gate_up_proj", h, 2 * inter, False, experts, top_k, False, kind="param"
            ),
            LinearLayer("experts.down_proj", inter, h, False, experts, top_k, False, kind="param"),
        )
    mlp += (
        LinearLayer("input_linear", h, 2 * shared, role="mlp"),
        LinearLayer("output_linear", shared, h, role="mlp"),
    )
    n_full = kinds.count(full)
    arch = ModelArch(
        **_common(k, family, name, 2048, False),
        hidden_size=h,
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=kv,
        head_dim=hd,
        intermediate_size=inter,
        linears=attention + mixer + mlp,
        norm_kind="rms",
        norms_per_layer=2,
        num_experts=experts,
        experts_per_token=top_k,
        shared_expert_intermediate_size=shared if experts else 0,
        block_counts=((full, n_full), ("mamba", layers - n_full)),
        block_kind_params=(("mamba", mamba.own_params),),
        mamba=mamba,
    )
    arch.extra["mixer_order"] = kinds
    if k.cfg.get("position_embedding_type") != "rope":
        arch.extra["no_rope"] = True  # GraniteMoeHybridModel builds no rotary embedding
    return arch


def _routed_experts(k: _Keys, *count_keys: str) -> tuple[int, int]:
    """``(experts, top_k)`` where the expert count has several names (``attribute_map`` of the
    family's config class, e.g. ``num_local_experts`` -> ``n_routed_experts``)."""
    experts = k.int(*count_keys)
    top_k = k.int("num_experts_per_tok")
    if top_k > experts:
        raise ConfigError("config_top_k_above_experts", k.prefix + "num_experts_per_tok", top_k)
    return experts, top_k


def _group_routing(k: _Keys, experts: int) -> None:
    """Group-limited routing (``DeepseekV3TopkRouter.forward``, ``Glm4MoeTopkRouter.forward``):
    the scores are viewed as ``n_group`` groups of ``experts / n_group`` and each group scored by
    its top 2 (``topk(2, dim=-1)``), then ``topk_group`` groups kept: ``n_group`` must divide
    the experts into groups of at least 2, and ``topk_group`` cannot exceed ``n_group``."""
    groups = k.int("n_group", default=1)
    if experts % groups or experts // groups < 2:
        raise k.error("n_group", groups)
    if k.int("topk_group", default=1) > groups:
        raise k.error("topk_group", k.cfg.get("topk_group"))


def _shared_expert_moe(
    k: _Keys,
    h: int,
    layers: int,
    dense_default: int,
    expert_names: tuple[str, str, str],
    shared: int,
    count_keys: tuple[str, ...] = ("n_routed_experts", "num_local_experts"),
) -> tuple[tuple[LinearLayer, ...], tuple[tuple[str, int], ...], int, int, int]:
    """The MLP side of a DeepSeek-style stack: the first ``first_k_dense_replace`` blocks hold a
    dense MLP of width ``intermediate_size`` (``DeepseekV3DecoderLayer.__init__``: ``if
    layer_idx >= config.first_k_dense_replace: self.mlp = DeepseekV3MoE(config)``), the others
    the routed experts of width ``moe_intermediate_size``, the router ``gate`` and, when
    ``shared`` is above 0, a shared expert of width ``shared`` that every token passes through.

    The experts are named as in transformers 4 (what peft's target names and calc's
    ``moe_expert_layout`` mean; transformers 5.17 stores them as 3-D ``gate_up_proj`` /
    ``down_proj`` parameters, ``DeepseekV3Experts``). The router is a bare ``weight``
    parameter (``DeepseekV3TopkRouter``, ``MiniMaxM2TopKRouter``): no ``nn.Linear``, never
    quantized. ``count_keys``: the expert count's names in the family's config, the first
    named in a missing-key error. Returns (linears, block_counts, experts, top_k, moe width)."""
    experts, top_k = _routed_experts(k, *count_keys)
    moe_inter = k.int("moe_intermediate_size") if shared or "moe_intermediate_size" in k.cfg else 0
    n_dense = _dense_blocks(k, layers, dense_default)
    n_moe = layers - n_dense
    moe_kind, dense_kind = ("moe", "dense") if n_dense and n_moe else ("", "")
    linears: tuple[LinearLayer, ...] = ()
    width = moe_inter or k.int("intermediate_size")
    if n_moe:
        linears += tuple(
            replace(l, block_kind=moe_kind)
            for l in _gated_mlp(h, width, False, experts, top_k, expert_names)
        )
        linears += (
            LinearLayer("gate", h, experts, quantizable=False, role="router", block_kind=moe_kind),
        )
        if shared:
            linears += tuple(replace(l, block_kind=moe_kind) for l in _gated_mlp(h, shared))
    if n_dense:
        linears += tuple(
            replace(l, block_kind=dense_kind) for l in _gated_mlp(h, k.int("intermediate_size"))
        )
    counts = (("moe", n_moe), ("dense", n_dense)) if n_dense and n_moe else ()
    return linears, counts, experts if n_moe else 0, top_k if n_moe else 0, width


def _dense_blocks(k: _Keys, layers: int, dense_default: int) -> int:
    """How many blocks hold a dense MLP: ``mlp_layer_types`` where the family lists one kind
    per block (GLM-4.7-Flash, transformers 5.17 ``Glm4MoeLiteDecoderLayer.__init__``:
    ``Glm4MoeLiteMoE(config) if config.mlp_layer_types[layer_idx] == "sparse" else
    Glm4MoeLiteMLP(config)``; ``dense_default`` < 0 marks such a family, whose default is one
    dense block then sparse ones, ``Glm4MoeLiteConfig.__post_init__``), else the first
    ``first_k_dense_replace`` blocks (``dense_default`` when absent)."""
    if dense_default < 0:
        kinds = k.cfg.get("mlp_layer_types")
        if kinds is None:
            return min(1, layers)
        if (
            not isinstance(kinds, list)
            or len(kinds) != layers
            or any(v not in ("dense", "sparse") for v in kinds)
        ):
            raise k.error("mlp_layer_types", kinds)
        return sum(1 for v in kinds if v == "dense")
    first_dense = k.cfg.get("first_k_dense_replace", dense_default)
    if first_dense is None:
        first_dense = 0
    if isinstance(first_dense, bool) or not isinstance(first_dense, int) or first_dense < 0:
        raise k.error("first_k_dense_replace", first_dense)
    return min(first_dense, layers)


def _mla_dims(k: _Keys) -> tuple[int, int, int, int, int]:
    """(q_lora_rank or 0, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim) of
    multi-head latent attention. Every width is required (a config of the family without its
    latent widths is not one of its published shapes); ``q_lora_rank`` may be ``null``, which
    means a plain ``q_proj`` (``DeepseekV3Attention.__init__``: ``if self.q_lora_rank is
    None``)."""
    if "q_lora_rank" not in k.cfg:
        raise ConfigError("config_missing_key", k.prefix + "q_lora_rank", None)
    q_rank = 0 if k.cfg["q_lora_rank"] is None else k.int("q_lora_rank")
    return (
        q_rank,
        k.int("kv_lora_rank"),
        k.int("qk_nope_head_dim"),
        k.int("qk_rope_head_dim"),
        k.int("v_head_dim"),
    )


def _mla_attention(
    h: int, heads: int, dims: tuple[int, int, int, int, int], bias: bool
) -> tuple[LinearLayer, ...]:
    """Multi-head latent attention's linears (transformers 5.17 ``DeepseekV3Attention``):
    ``q_a_proj`` (hidden -> q_lora_rank, bias with ``attention_bias``), ``q_b_proj``
    (q_lora_rank -> heads * (nope + rope)), or one ``q_proj`` (hidden -> heads * (nope + rope))
    without a q rank; ``kv_a_proj_with_mqa`` (hidden -> kv_lora_rank + rope, ``attention_bias``),
    ``kv_b_proj`` (kv_lora_rank -> heads * (nope + v)), ``o_proj`` (heads * v -> hidden,
    ``attention_bias``). The output projection is listed last (``calc.activations.block_parts``)."""
    q_rank, kv_rank, nope, rope, v = dims
    qk = nope + rope
    q: tuple[LinearLayer, ...]
    if q_rank:
        q = (
            LinearLayer("q_a_proj", h, q_rank, bias, role="attn"),
            LinearLayer("q_b_proj", q_rank, heads * qk, role="attn"),
        )
    else:
        q = (LinearLayer("q_proj", h, heads * qk, role="attn"),)
    return q + (
        LinearLayer("kv_a_proj_with_mqa", h, kv_rank + rope, bias, role="attn"),
        LinearLayer("kv_b_proj", kv_rank, heads * (nope + v), role="attn"),
        LinearLayer("o_proj", heads * v, h, bias, role="attn"),
    )


# MLA + MoE families read by _deepseek_v3: (dense blocks by default, -1: ``mlp_layer_types``;
# max_position_embeddings default; router casts its input to fp32). Sources: transformers 5.17
# ``DeepseekV3Config`` (first_k_dense_replace 3, 4096), ``Mistral4Config`` (0, 1048576; its
# ``Mistral4TopkRouter.forward``: ``F.linear(hidden_states, self.weight)``, softmax, no
# correction bias), ``Glm4MoeLiteConfig`` (mlp_layer_types, 202752).
_MLA_FAMILIES = {
    "deepseek_v3": (3, 4096, True),
    "mistral4": (0, 1048576, False),
    "glm4_moe_lite": (-1, 202752, True),
}


def _deepseek_v3(k: _Keys, family: str, name: str) -> ModelArch:
    """DeepSeek-V3 / R1 and Kimi K2 (``deepseek_v3``; Kimi K2.5's ``text_config`` says
    ``kimi_k2``, which transformers 5.17 ``Kimi_K25Config`` reads as ``deepseek_v3``).

    Attention: multi-head latent attention (:func:`_mla_attention`) with RMSNorms of
    ``q_lora_rank`` and ``kv_lora_rank`` weights (``q_a_layernorm``, ``kv_a_layernorm``).
    ``num_key_value_heads`` (default: the heads) must divide the heads
    (``num_key_value_groups``); k and v come out of ``kv_b_proj`` with one head per query head.
    MLP: :func:`_shared_expert_moe` with ``n_shared_experts`` shared experts fused into one MLP
    of width ``moe_intermediate_size * n_shared_experts`` (``DeepseekV3MoE.__init__``) and
    ``first_k_dense_replace`` dense blocks (default 3, ``DeepseekV3Config``). The router's
    ``e_score_correction_bias`` is a buffer (``nn.Buffer``), not a parameter. The multi-token
    prediction layer of the checkpoints (``num_nextn_predict_layers``) is not built by
    transformers (``_keys_to_ignore_on_load_unexpected``) and not counted.

    Mistral 4 (``mistral4``, ``Mistral4Attention`` / ``Mistral4MoE``) and GLM-4.7-Flash
    (``glm4_moe_lite``, ``Glm4MoeLiteAttention`` / ``Glm4MoeLiteMoE``) are the same modules
    with other defaults and routers (:data:`_MLA_FAMILIES`); Mistral 4 scales q by Llama 4's
    position factor (a product with a tensor that needs no gradient: nothing more saved)."""
    h = k.int("hidden_size")
    heads = k.int("num_attention_heads")
    kv = k.int("num_key_value_heads", default=heads)
    if kv > heads or heads % kv:
        raise k.kv_error("num_key_value_heads", kv)
    dims = _mla_dims(k)
    q_rank, kv_rank, nope, rope, v = dims
    layers = k.int("num_hidden_layers")
    shared = k.cfg.get("n_shared_experts", 1)
    if isinstance(shared, bool) or not isinstance(shared, int) or shared < 0:
        raise k.error("n_shared_experts", shared)
    moe_inter = k.int("moe_intermediate_size")
    dense_default, max_pos, router_fp32 = _MLA_FAMILIES[family]
    mlp, counts, experts, top_k, width = _shared_expert_moe(
        k, h, layers, dense_default, ("gate_proj", "up_proj", "down_proj"), moe_inter * shared
    )
    if experts:
        _group_routing(k, experts)
    arch = ModelArch(
        **_common(k, family, name, max_pos, False),
        hidden_size=h,
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=heads,
        head_dim=nope + rope,
        intermediate_size=width,
        linears=_mla_attention(h, heads, dims, k.bool("attention_bias", False)) + mlp,
        num_experts=experts,
        experts_per_token=top_k,
        shared_expert_intermediate_size=moe_inter * shared if experts else 0,
        block_extra_params=q_rank + kv_rank,  # q_a_layernorm, kv_a_layernorm
        block_counts=counts,
        kv_lora_rank=kv_rank,
        q_lora_rank=q_rank,
        qk_rope_head_dim=rope,
        v_head_dim=v,
    )
    if router_fp32:
        # DeepseekV3TopkRouter.forward: ``F.linear(hidden_states.type(torch.float32), ...)``
        arch.extra["router_fp32_input"] = True
    return arch


# DeepSeek sparse attention families: (max_position_embeddings default, index_n_heads default).
# Sources: transformers 5.17 ``DeepseekV32Config`` (163840, 64) and ``GlmMoeDsaConfig``
# (202752, 32); both default index_head_dim 128, index_topk 2048, first_k_dense_replace 3.
_DSA_FAMILIES = {"deepseek_v32": (163840, 64), "glm_moe_dsa": (202752, 32)}


def _indexer_layers(k: _Keys, family: str, layers: int) -> int:
    """How many blocks run an indexer of their own. DeepSeek-V3.2: every block. GLM-5
    (``GlmMoeDsaConfig.indexer_types``): ``"full"`` blocks run one, ``"shared"`` blocks hold
    none and reuse the previous full block's selection (``GlmMoeDsaAttention.__init__``:
    ``self.indexer = None if self.skip_topk else ...``); without the key, the pattern of
    ``index_topk_pattern`` ("F"/"S" per block) or of ``index_topk_freq`` (default 1) and
    ``index_skip_topk_offset`` (default 2): block ``i`` is full when ``max(i - offset + 1, 0)
    % freq == 0``. The first block must be full (a shared one raises ``ValueError`` in
    ``GlmMoeDsaAttention.forward``)."""
    if family != "glm_moe_dsa":
        return layers
    kinds = k.cfg.get("indexer_types")
    pattern = k.cfg.get("index_topk_pattern")
    key = "indexer_types"
    if kinds is None and pattern is not None:
        key = "index_topk_pattern"
        letters = {"F": "full", "S": "shared"}
        if isinstance(pattern, str) and all(c in letters for c in pattern):
            kinds = [letters[c] for c in pattern]
        else:
            kinds = pattern
    if kinds is None:
        freq = k.int("index_topk_freq", default=1)
        offset = k.cfg.get("index_skip_topk_offset", 2)
        if isinstance(offset, bool) or not isinstance(offset, int):
            raise k.error("index_skip_topk_offset", offset)
        kinds = ["full" if max(i - offset + 1, 0) % freq == 0 else "shared" for i in range(layers)]
    if (
        not isinstance(kinds, list)
        or any(v not in ("full", "shared") for v in kinds)
        or not kinds
        or kinds[0] != "full"
    ):
        raise k.error(key, kinds)
    if len(kinds) != layers:
        raise ConfigError("config_layer_types_length", k.prefix + key, len(kinds))
    return sum(1 for v in kinds if v == "full")


def _deepseek_v32(k: _Keys, family: str, name: str) -> ModelArch:
    """DeepSeek-V3.2 (``deepseek_v32``; transformers 5.17 ``modeling_deepseek_v32``) and GLM-5
    (``glm_moe_dsa``, ``modeling_glm_moe_dsa``): DeepSeek-V3's latent attention and MoE
    (:func:`_deepseek_v3`) with DeepSeek sparse attention. Each block's attention
    (``DeepseekV32Attention``) holds a lightning indexer (``DeepseekV32Indexer``): ``wq_b``
    (``q_lora_rank -> index_n_heads * index_head_dim``, reading the normalised q latent, so a
    q rank is required: ``q_a_proj`` is ``None`` without one and the forward fails), ``wk``
    (``hidden -> index_head_dim``), ``k_norm`` (a LayerNorm of ``index_head_dim``, weight and
    bias) and ``weights_proj`` (``hidden -> index_n_heads``), no biases. ``weights_proj`` is in
    ``_keep_in_fp32_modules``, which the 4-bit quantizer leaves unquantized
    (``quantizers/quantizer_bnb_4bit.py``: ``get_modules_to_not_convert(...,
    model._keep_in_fp32_modules)``). The rotary part of the indexer's heads is
    ``qk_rope_head_dim`` wide, so ``index_head_dim`` cannot be narrower. Dense blocks:
    ``mlp_layer_types`` when given, else the first ``first_k_dense_replace`` (default 3).
    GLM-5's shared blocks hold no indexer (:func:`_indexer_layers`)."""
    if "mlp_layer_types" in k.cfg and k.cfg["mlp_layer_types"] is not None:
        family_kind = "glm4_moe_lite"  # a list of "dense"/"sparse", one per block
    else:
        family_kind = "deepseek_v3"
    if k.cfg.get("q_lora_rank", 0) is None:
        raise k.error("q_lora_rank", None)
    cfg = {**k.cfg, "first_k_dense_replace": k.cfg.get("first_k_dense_replace", 3)}
    arch = _deepseek_v3(_Keys(cfg, k.prefix), family_kind, name)
    max_pos_default, heads_default = _DSA_FAMILIES[family]
    index_heads = k.int("index_n_heads", default=heads_default)
    index_dim = k.int("index_head_dim", default=128)
    topk = k.int("index_topk", default=2048)
    if index_dim < arch.qk_rope_head_dim:
        raise k.error("index_head_dim", index_dim)
    h = arch.hidden_size
    indexer = (
        LinearLayer("wq_b", arch.q_lora_rank, index_heads * index_dim, role="indexer"),
        LinearLayer("wk", h, index_dim, role="indexer"),
        LinearLayer("weights_proj", h, index_heads, quantizable=False, role="indexer"),
    )
    attn = tuple(l for l in arch.linears if l.role == "attn")
    rest = tuple(l for l in arch.linears if l.role != "attn")
    return replace(
        arch,
        family=family,
        max_position_embeddings=k.int("max_position_embeddings", default=max_pos_default),
        # the indexer's linears before the output projection, which stays the last attention one
        linears=attn[:-1] + indexer + attn[-1:] + rest,
        index_heads=index_heads,
        index_head_dim=index_dim,
        index_topk=topk,
        indexer_layers=_indexer_layers(k, family, arch.num_layers),
    )


# ---- Kimi Linear: Kimi Delta Attention blocks beside latent-attention blocks -----------------
# DeepSeek-V4's attention kinds (transformers 5.17 ``DEEPSEEK_V4_LAYER_TYPES``), the
# legacy per-block ``compress_ratios`` that name them, and their default compression rates
# (``DeepseekV4Config.default_compress_rates``)
_DSV4_SLIDING, _DSV4_CSA, _DSV4_HCA = (
    "sliding_attention",
    "compressed_sparse_attention",
    "heavily_compressed_attention",
)
_DSV4_RATIO_KINDS = {0: _DSV4_SLIDING, 4: _DSV4_CSA, 128: _DSV4_HCA}
_DSV4_RATES = {_DSV4_CSA: 4, _DSV4_HCA: 128}


def _deepseek_v4_kinds(k: _Keys, layers: int) -> list[str]:
    """One attention kind per block: ``layer_types``, else the legacy ``compress_ratios``
    (0, 4 or 128 per block), else ``DeepseekV4Config.__post_init__``'s default: two heavily
    compressed blocks, then compressed-sparse and heavily compressed blocks in turn."""
    key = "layer_types"
    kinds = k.cfg.get("layer_types")
    if kinds is None and k.cfg.get("compress_ratios") is not None:
        key, ratios = "compress_ratios", k.cfg["compress_ratios"]
        if not isinstance(ratios, list) or any(
            isinstance(r, bool) or r not in _DSV4_RATIO_KINDS for r in ratios
        ):
            raise k.error(key, ratios)
        kinds = [_DSV4_RATIO_KINDS[r] for r in ratios]
    if kinds is None:
        kinds = [_DSV4_HCA] * min(layers, 2) + [
            _DSV4_CSA if i % 2 else _DSV4_HCA for i in range(max(layers - 2, 0))
        ]
    if not isinstance(kinds, list) or any(v not in _DSV4_RATIO_KINDS.values() for v in kinds):
        raise k.error(key, kinds)
    if len(kinds) != layers:
        raise ConfigError("config_layer_types_length", k.prefix + key, len(kinds))
    return kinds


def _deepseek_v4_hash_blocks(k: _Keys, layers: int) -> int:
    """Blocks whose router is the frozen token-id table (``hash_moe``): ``mlp_layer_types``,
    else the first ``num_hash_layers`` (default 3, ``DeepseekV4Config``)."""
    kinds = k.cfg.get("mlp_layer_types")
    if kinds is None:
        n_hash = k.cfg.get("num_hash_layers", 3)
        if isinstance(n_hash, bool) or not isinstance(n_hash, int) or n_hash < 0:
            raise k.error("num_hash_layers", n_hash)
        return min(n_hash, layers)
    if not isinstance(kinds, list) or any(v not in ("hash_moe", "moe") for v in kinds):
        raise k.error("mlp_layer_types", kinds)
    if len(kinds) != layers:
        raise ConfigError("config_layer_types_length", k.prefix + "mlp_layer_types", len(kinds))
    return sum(1 for v in kinds if v == "hash_moe")


def _deepseek_v4_rates(k: _Keys) -> dict[str, int]:
    """Tokens per compressed entry of each compressed kind: ``compress_rates``, else the
    legacy ``compress_rate_csa`` / ``compress_rate_hca``, else 4 and 128."""
    rates = dict(_DSV4_RATES)
    given = k.cfg.get("compress_rates")
    if given is not None:
        if not isinstance(given, dict) or not set(given) <= set(rates):
            raise k.error("compress_rates", given)
        for kind, rate in given.items():
            if isinstance(rate, bool) or not isinstance(rate, int) or rate <= 0:
                raise k.error("compress_rates", given)
            rates[kind] = rate
    for kind, key in ((_DSV4_CSA, "compress_rate_csa"), (_DSV4_HCA, "compress_rate_hca")):
        if k.cfg.get(key) is not None:
            rates[kind] = k.int(key)
    return rates


def _deepseek_v4(k: _Keys, family: str, name: str) -> ModelArch:
    """DeepSeek-V4 (``deepseek_v4``; transformers 5.17 ``modeling_deepseek_v4.py``), counted
    module by module as ``DeepseekV4ForCausalLM`` builds it:

    - attention (``DeepseekV4Attention``): ``q_a_proj`` (hidden -> ``q_lora_rank``), its RMSNorm
      ``q_a_norm``, ``q_b_proj`` (rank -> heads x ``head_dim``), one shared key/value head
      ``kv_proj`` (hidden -> ``head_dim``) with ``kv_norm``, a learned sink per head, and the
      grouped output projection: ``o_a_proj`` (an ``nn.Linear`` subclass applied per group of
      heads, ``heads x head_dim / o_groups`` -> ``o_groups x o_lora_rank``) then ``o_b_proj``
      (``o_groups x o_lora_rank`` -> hidden). ``num_key_value_heads`` is not read: one k=v head;
    - per block kind (:func:`_deepseek_v4_kinds`): a heavily compressed block's
      ``DeepseekV4HCACompressor`` (``kv_proj``, ``gate_proj`` hidden -> ``head_dim``, a
      ``position_bias`` of rate x ``head_dim``, ``kv_norm``); a compressed-sparse block's
      ``DeepseekV4CSACompressor`` (the same at twice the width: two overlapping series) and its
      ``DeepseekV4Indexer``: its own compressor at ``index_head_dim``, ``q_b_proj`` (q rank ->
      ``index_n_heads x index_head_dim``) and ``scorer.weights_proj`` (hidden ->
      ``index_n_heads``). The indexer only picks entries (``topk(...).indices``): no gradient
      reaches it (role ``"indexer"``);
    - QLoRA: the 4-bit loading converts ``type(module) is nn.Linear`` only (not ``o_a_proj``,
      an ``nn.Linear`` subclass) and skips ``_keep_in_fp32_modules`` (the compressors' and the
      indexer's ``kv_proj`` and ``gate_proj``, the indexer's ``weights_proj``): 16-bit;
    - MLP (``DeepseekV4SparseMoeBlock``): ``n_routed_experts`` 3-D SwiGLU experts
      (``experts.gate_up_proj``, ``experts.down_proj``) of ``moe_intermediate_size``, top
      ``num_experts_per_tok``, a router ``gate`` (a weight, learned or hash-routed: the same
      parameter) and one shared expert of the same width (``DeepseekV4MLP`` reads
      ``intermediate_size``, which ``attribute_map`` sends to ``moe_intermediate_size``:
      ``n_shared_experts`` changes nothing built);
    - two hyper-connections per block (``attn_hc``, ``ffn_hc``: ``fn`` of ``(2 + hc) hc x hc
      hidden``, ``base``, 3 scales) and the model's ``hc_head`` (``hc x hc hidden``, ``hc`` + 1).
    Buffers (``tid2eid``, ``e_score_correction_bias``) are not parameters; the checkpoints'
    multi-token-prediction layer is not built (``_keys_to_ignore_on_load_unexpected``)."""
    h = k.int("hidden_size")
    heads = k.int("num_attention_heads")
    hd = k.int("head_dim", default=512)
    q_rank = k.int("q_lora_rank", default=1024)
    layers = k.int("num_hidden_layers")
    factor = k.cfg.get("partial_rotary_factor")
    if k.cfg.get("qk_rope_head_dim") is not None and factor is None:
        rope = k.int("qk_rope_head_dim")
    else:
        if factor is None:
            factor = 64 / 512
        if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 0 < factor <= 1:
            raise k.error("partial_rotary_factor", factor)
        rope = int(hd * factor)
    if rope % 2 or not 0 < rope <= hd:
        raise k.error("qk_rope_head_dim" if "qk_rope_head_dim" in k.cfg else "head_dim", rope)
    groups = k.int("o_groups", default=8)
    o_rank = k.int("o_lora_rank", default=1024)
    if heads % groups:
        raise k.error("o_groups", groups)
    hc = k.int("hc_mult", default=4)
    experts, top_k = _routed_experts(k, "n_routed_experts", "num_local_experts")
    inter = k.int("moe_intermediate_size", default=2048)
    index_heads = k.int("index_n_heads", default=64)
    index_dim = k.int("index_head_dim", default=128)
    if index_dim < rope:
        raise k.error("index_head_dim", index_dim)
    kinds = _deepseek_v4_kinds(k, layers)
    rates = _deepseek_v4_rates(k)
    n_hash = _deepseek_v4_hash_blocks(k, layers)
    counts = {kind: kinds.count(kind) for kind in (_DSV4_SLIDING, _DSV4_CSA, _DSV4_HCA)}
    present = tuple((kind, n) for kind, n in counts.items() if n)
    linears: list[LinearLayer] = [
        LinearLayer("q_a_proj", h, q_rank, role="attn"),
        LinearLayer("q_b_proj", q_rank, heads * hd, role="attn"),
        LinearLayer("kv_proj", h, hd, role="attn"),
    ]
    kind_params: list[tuple[str, int]] = []
    if counts[_DSV4_CSA]:
        linears += [
            LinearLayer("kv_proj", h, 2 * hd, False, 1, 1, False, "attn", block_kind=_DSV4_CSA),
            LinearLayer("gate_proj", h, 2 * hd, False, 1, 1, False, "attn", block_kind=_DSV4_CSA),
        ]
        kind_params.append((_DSV4_CSA, rates[_DSV4_CSA] * 2 * hd + hd))
    if counts[_DSV4_HCA]:
        linears += [
            LinearLayer("kv_proj", h, hd, False, 1, 1, False, "attn", block_kind=_DSV4_HCA),
            LinearLayer("gate_proj", h, hd, False, 1, 1, False, "attn", block_kind=_DSV4_HCA),
        ]
        kind_params.append((_DSV4_HCA, rates[_DSV4_HCA] * hd + hd))
    linears += [
        LinearLayer(
            "o_a_proj", heads * hd // groups, groups * o_rank, quantizable=False, role="attn"
        ),
        LinearLayer("o_b_proj", groups * o_rank, h, role="attn"),
    ]
    if counts[_DSV4_CSA]:
        linears += [
            LinearLayer(name, d_in, d_out, quantizable=quant, role="indexer", block_kind=_DSV4_CSA)
            for name, d_in, d_out, quant in (
                ("kv_proj", h, 2 * index_dim, False),
                ("gate_proj", h, 2 * index_dim, False),
                ("q_b_proj", q_rank, index_heads * index_dim, True),
                ("weights_proj", h, index_heads, False),
            )
        ]
    linears += [
        LinearLayer("gate", h, experts, quantizable=False, role="router", kind="param"),
        LinearLayer(
            "experts.gate_up_proj", h, 2 * inter, False, experts, top_k, False, kind="param"
        ),
        LinearLayer("experts.down_proj", inter, h, False, experts, top_k, False, kind="param"),
    ]
    linears += list(_gated_mlp(h, inter))
    if len(present) == 1:  # every block of one kind: a uniform stack
        linears = [replace(l, block_kind="") for l in linears]
        extra_own = dict(kind_params).get(present[0][0], 0)
    else:
        extra_own = 0
    mix = (2 + hc) * hc
    hyper = 2 * (mix * hc * h + mix + 3)  # attn_hc and ffn_hc: fn, base, scale
    arch = ModelArch(
        **_common(k, family, name, 1048576, False),
        hidden_size=h,
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=1,
        head_dim=hd,
        intermediate_size=inter,
        linears=tuple(linears),
        num_experts=experts,
        experts_per_token=top_k,
        shared_expert_intermediate_size=inter,
        # q_a_norm, kv_norm, sinks, the hyper-connections (and a uniform stack's compressor)
        block_extra_params=q_rank + hd + heads + hyper + extra_own,
        block_counts=present if len(present) > 1 else (),
        block_kind_params=tuple(kind_params) if len(present) > 1 else (),
        q_lora_rank=q_rank,
        qk_rope_head_dim=rope,
        index_heads=index_heads if counts[_DSV4_CSA] else 0,
        index_head_dim=index_dim if counts[_DSV4_CSA] else 0,
        index_topk=k.int("index_topk", default=512),
        indexer_layers=counts[_DSV4_CSA],
        per_layer_embedding_params=hc * hc * h + hc + 1,  # hc_head
        hyper_connections=hc,
    )
    arch.extra.update(
        {
            # the indexer's compressor: position_bias (rate x 2 index_head_dim) and kv_norm
            "indexer_own_params": rates[_DSV4_CSA] * 2 * index_dim + index_dim,
            "dsv4_layers": kinds,
            "dsv4_compress_rates": rates,
            "dsv4_hash_blocks": n_hash,
            "dsv4_o_groups": groups,
            "dsv4_o_rank": o_rank,
            "dsv4_sliding_window": k.int("sliding_window", default=128),
            "dsv4_sinkhorn_iters": k.int("hc_sinkhorn_iters", default=20),
            # the clamped SwiGLU of the experts and the shared expert (DeepseekV4Experts
            # ._apply_gate, DeepseekV4MLP.forward): the gate and up outputs, both clamped, and
            # the activation's output
            "glu_saved_widths": 5,
        }
    )
    return arch


_KIMI_ALIASES = (
    ("num_experts_per_token", "num_experts_per_tok"),
    ("num_shared_experts", "n_shared_experts"),
    ("num_expert_group", "n_group"),
    ("model_max_length", "max_position_embeddings"),
)
"""``KimiLinearConfig.attribute_map`` (transformers 5.17): the published config.json names these
keys as on the left; the readers shared with DeepSeek-V3 read the names on the right."""
_KIMI_DEFAULTS = {
    "n_routed_experts": 256,
    "q_lora_rank": None,
    "kv_lora_rank": 512,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "intermediate_size": 9216,
    "moe_intermediate_size": 1024,
}
"""``KimiLinearConfig`` (and its parent ``DeepseekV3Config``) defaults, transformers 5.17."""


def _kimi_layer_kinds(k: _Keys, layers: int) -> list[str]:
    """The mixer of each block, with ``KimiLinearConfig.__post_init__``'s precedence:
    ``layer_types`` when given; else ``linear_attn_config``'s ``full_attn_layers`` and
    ``kda_layers`` (1-based block numbers, each block in exactly one list: a block in neither
    would have no mixer); else ``full_attention`` on every fourth block after the first
    (``i and i % 4 == 0``), ``linear_attention`` elsewhere."""
    if k.cfg.get("layer_types") is not None:
        return _mixer_kinds(k, layers)
    lac = k.cfg.get("linear_attn_config") or {}
    if not isinstance(lac, dict):
        raise k.error("linear_attn_config", lac)
    if "full_attn_layers" not in lac or "kda_layers" not in lac:
        return ["full_attention" if i and i % 4 == 0 else "linear_attention" for i in range(layers)]
    kinds: list[str | None] = [None] * layers
    for key, kind in (("full_attn_layers", "full_attention"), ("kda_layers", "linear_attention")):
        numbers = lac[key]
        if not isinstance(numbers, list) or any(
            isinstance(n, bool)
            or not isinstance(n, int)
            or not 1 <= n <= layers
            or kinds[n - 1] is not None
            for n in numbers
        ):
            raise k.error("linear_attn_config." + key, numbers)
        for n in numbers:
            kinds[n - 1] = kind
    if None in kinds:
        # a block in neither list: transformers would build no mixer for it
        raise k.error("linear_attn_config.kda_layers", lac["kda_layers"])
    return [str(v) for v in kinds]


_KIMI_REFUSED = (
    ("mla_use_nope", True),
    ("mla_use_output_gate", False),
    ("latent_moe_use_norm", None),
    ("routed_expert_hidden_size", None),
    ("attn_res_block_size", None),
)
"""Keys of configs that say ``kimi_linear`` but describe layers transformers 5.17's
``KimiLinearForCausalLM`` does not build (a later Kimi's text config: an output gate on the
latent attention, latent MoE projections, attention residual blocks, RoPE on the latent
attention): (key, the value the model builds; None: any value means a layer it lacks)."""


def _kimi_refused(k: _Keys) -> None:
    """Refuse, naming the key, a config whose layers transformers' Kimi Linear would not build
    (:data:`_KIMI_REFUSED`; ``linear_attn_config.use_full_rank_gate``: full-rank gates in place
    of the low-rank ``f_a_proj`` / ``f_b_proj``)."""
    for key, built in _KIMI_REFUSED:
        value = k.cfg.get(key)
        if value is not None and (built is None or value != built):
            raise ConfigError("unsupported_architecture", k.prefix + key, value)
    lac = k.cfg.get("linear_attn_config")
    if isinstance(lac, dict) and lac.get("use_full_rank_gate"):
        raise ConfigError(
            "unsupported_architecture",
            k.prefix + "linear_attn_config.use_full_rank_gate",
            lac["use_full_rank_gate"],
        )


def _kimi_linear(k: _Keys, family: str, name: str) -> ModelArch:
    """Kimi Linear (``kimi_linear``; transformers 5.17 ``modeling_kimi_linear.py``), a hybrid
    stack of two mixers (:func:`_kimi_layer_kinds`), each block with two RMSNorms and an MLP:

    - Kimi Delta Attention (``KimiLinearDeltaAttention``; ``linear_attn_config``'s
      ``num_heads`` H and ``head_dim`` d, ``D = H d``): ``q_proj``, ``k_proj``, ``v_proj``
      (hidden -> D), a depthwise ``nn.Conv1d`` over q, k and v (``3 D`` channels,
      ``short_conv_kernel_size`` taps, no bias), the forget gate ``KimiLinearForgetGate``
      (``f_a_proj`` hidden -> d, ``f_b_proj`` d -> D, ``dt_bias`` of D, ``A_log`` of H: a
      decay per channel, not per head as in Gated DeltaNet), ``b_proj`` (hidden -> H, beta),
      the output gate ``g_a_proj`` (hidden -> d), ``g_b_proj`` (d -> D), a gated RMSNorm of d
      weights (``KimiLinearRMSNormGated``, sigmoid gate) and ``o_proj`` (D -> hidden);
    - multi-head latent attention without RoPE (``KimiLinearAttention``, DeepSeek-V3's
      projections, :func:`_mla_attention`, and ``kv_a_layernorm``; the key's rotary part
      passes unrotated, and the model builds no rotary embedding);
    - the MLP: DeepSeek-V3's (:func:`_shared_expert_moe`): ``mlp_layer_types`` (``dense`` /
      ``sparse`` per block) or, without it, ``first_k_dense_replace`` dense blocks (default
      1); routed experts of ``moe_intermediate_size`` with ``num_shared_experts`` fused into
      one shared MLP, the router's bare ``weight`` (fp32 input, group-limited routing). The
      routed experts are named as the checkpoint and its remote code name them
      (``block_sparse_moe.experts.N.w1`` / ``w3`` / ``w2``; transformers 5.17 stacks them into
      3-D ``gate_up_proj`` / ``down_proj``, ``conversion_mapping.py``), the shared experts and
      the dense MLP ``gate_proj`` / ``up_proj`` / ``down_proj``. peft 0.21 converts no target of
      this family to the 3-D experts (``kimi_linear`` is not in transformers'
      ``_MODEL_TO_CONVERSION_PATTERN``).

    The published config.json names several keys as ``KimiLinearConfig.attribute_map`` does
    (:data:`_KIMI_ALIASES`); errors name the key the config used."""
    _kimi_refused(k)
    cfg = dict(k.cfg)
    for published, shared_name in _KIMI_ALIASES:
        if cfg.get(shared_name) is None and cfg.get(published) is not None:
            cfg[shared_name] = cfg[published]
    for key in ("num_experts", "num_local_experts"):
        if cfg.get("n_routed_experts") is None and cfg.get(key) is not None:
            cfg["n_routed_experts"] = cfg[key]
    # KimiLinearConfig's defaults (transformers 5.17) for keys a config may leave out
    for key, default in _KIMI_DEFAULTS.items():
        if cfg.get(key) is None and key not in k.cfg:
            cfg[key] = default
    kk = _Keys(cfg, k.prefix)
    h = k.int("hidden_size")
    heads = k.int("num_attention_heads")
    kv = k.int("num_key_value_heads", default=heads)
    if kv > heads or heads % kv:
        raise k.kv_error("num_key_value_heads", kv)
    layers = k.int("num_hidden_layers")
    kinds = _kimi_layer_kinds(k, layers)
    experts = kk.int("n_routed_experts")
    top_key = "num_experts_per_token" if "num_experts_per_token" in k.cfg else "num_experts_per_tok"
    top_k = k.int(top_key, default=8)
    cfg["num_experts_per_tok"] = top_k
    if top_k > experts:
        raise ConfigError("config_top_k_above_experts", k.prefix + top_key, top_k)
    group_key = "num_expert_group" if "num_expert_group" in k.cfg else "n_group"
    groups = k.int(group_key, default=1)
    if experts % groups or experts // groups < 2:
        raise k.error(group_key, groups)
    if k.int("topk_group", default=1) > groups:
        raise k.error("topk_group", k.cfg.get("topk_group"))
    lac = k.cfg.get("linear_attn_config") or {}
    lk = _Keys(lac if isinstance(lac, dict) else {}, k.prefix + "linear_attn_config.")
    la_heads = lk.int("num_heads", default=k.int("linear_num_heads", default=32))
    la_dim = lk.int("head_dim", default=k.int("linear_head_dim", default=128))
    kernel = lk.int("short_conv_kernel_size", default=k.int("linear_conv_kernel_dim", default=4))
    la = LinearAttention(
        key_heads=la_heads,
        value_heads=la_heads,
        key_head_dim=la_dim,
        value_head_dim=la_dim,
        conv_kernel=kernel,
    )
    dims = _mla_dims(kk)
    q_rank, kv_rank, nope, rope, v = dims
    shared = cfg.get("n_shared_experts", 1)
    if isinstance(shared, bool) or not isinstance(shared, int) or shared < 0:
        raise k.error(
            "num_shared_experts" if "num_shared_experts" in k.cfg else "n_shared_experts", shared
        )
    moe_inter = kk.int("moe_intermediate_size")
    dense_default = -1 if cfg.get("mlp_layer_types") is not None else 1
    n_dense = _dense_blocks(kk, layers, dense_default)
    mlp_kinds = cfg.get("mlp_layer_types") or [
        "dense" if i < n_dense else "sparse" for i in range(layers)
    ]
    mlp, counts, experts, top_k, width = _shared_expert_moe(
        kk, h, layers, dense_default, ("w1", "w3", "w2"), moe_inter * shared
    )
    full, lin = "full_attention", "linear_attention"
    bias = k.bool("attention_bias", False)
    attention = tuple(replace(l, block_kind=full) for l in _mla_attention(h, heads, dims, bias))
    d, big = la_dim, la.value_dim
    mixer = tuple(
        LinearLayer(n, d_in, d_out, role="mixer", block_kind=lin)
        for n, d_in, d_out in (
            ("q_proj", h, big),
            ("k_proj", h, big),
            ("v_proj", h, big),
            ("f_a_proj", h, d),
            ("f_b_proj", d, big),
            ("b_proj", h, la_heads),
            ("g_a_proj", h, d),
            ("g_b_proj", d, big),
            ("o_proj", big, h),
        )
    )
    n_full = kinds.count(full)
    # conv weight (3 D x 1 x kernel), dt_bias (D), A_log (H), the gated norm's weight (d)
    kda_own = la.conv_dim * kernel + big + la_heads + d
    arch = ModelArch(
        **_common(kk, family, name, 1048576, False),
        hidden_size=h,
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=heads,
        head_dim=nope + rope,
        intermediate_size=width,
        linears=attention + mixer + mlp,
        norm_kind="rms",
        norms_per_layer=2,
        num_experts=experts,
        experts_per_token=top_k,
        shared_expert_intermediate_size=moe_inter * shared if experts else 0,
        block_counts=((full, n_full), (lin, layers - n_full)),
        block_kind_params=((full, q_rank + kv_rank), (lin, kda_own)),
        ffn_counts=counts,
        linear_attention=la,
        kv_lora_rank=kv_rank,
        q_lora_rank=q_rank,
        qk_rope_head_dim=rope,
        v_head_dim=v,
    )
    arch.extra["mixer_order"] = kinds
    arch.extra["kda"] = True
    arch.extra["no_rope"] = True  # KimiLinearModel deletes its rotary embedding
    arch.extra["gdn_gate_proj"], arch.extra["gdn_decay_proj"] = "g_a_proj", "f_a_proj"
    if counts:
        arch.extra["ffn_order"] = ["dense" if v == "dense" else "moe" for v in mlp_kinds]
    if experts:
        arch.extra["router_fp32_input"] = True  # KimiLinearTopkRouter: DeepSeek-V3's
    return arch


def _glm4_moe(k: _Keys, family: str, name: str) -> ModelArch:
    """GLM-4.5 / 4.6 and GLM-4.5-Air (``glm4_moe``; transformers 5.17 ``modeling_glm4_moe``):
    ``Glm4MoeAttention`` is Llama's with q/k/v biases under ``attention_bias`` (``o_proj``
    never has one), explicit ``head_dim`` (default ``hidden / heads``), a partial rotary factor
    (RoPE over part of each head: no weights) and, with ``use_qk_norm``, per-head RMSNorm of q
    and k (``head_dim`` weights each). MLP: DeepSeek-V3's layout (``Glm4MoeMoE``: routed
    experts, one shared MLP of width ``moe_intermediate_size * n_shared_experts``, router
    ``Glm4MoeTopkRouter`` with group-limited sigmoid routing) after
    ``first_k_dense_replace`` dense blocks (default 1, ``Glm4MoeConfig``)."""
    h = k.int("hidden_size")
    heads = k.int("num_attention_heads")
    kv, hd = _heads(k, h, heads)
    layers = k.int("num_hidden_layers")
    shared = k.cfg.get("n_shared_experts", 1)
    if isinstance(shared, bool) or not isinstance(shared, int) or shared < 0:
        raise k.error("n_shared_experts", shared)
    moe_inter = k.int("moe_intermediate_size")
    mlp, counts, experts, top_k, width = _shared_expert_moe(
        k, h, layers, 1, ("gate_proj", "up_proj", "down_proj"), moe_inter * shared
    )
    if experts:
        _group_routing(k, experts)
    qk_norm = k.bool("use_qk_norm", False)
    arch = ModelArch(
        **_common(k, family, name, 131072, False),
        hidden_size=h,
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=kv,
        head_dim=hd,
        intermediate_size=width,
        linears=_attention(h, heads, kv, hd, k.bool("attention_bias", False), False) + mlp,
        num_experts=experts,
        experts_per_token=top_k,
        shared_expert_intermediate_size=moe_inter * shared if experts else 0,
        block_extra_params=2 * hd if qk_norm else 0,
        block_counts=counts,
    )
    if qk_norm:
        arch.extra["qk_norm_per_head"] = True
    arch.extra["router_fp32_input"] = True  # Glm4MoeTopkRouter.forward, as DeepSeek-V3's
    return arch


def _minimax_m2(k: _Keys, family: str, name: str) -> ModelArch:
    """MiniMax-M2 (``minimax_m2``; transformers 5.17 ``modeling_minimax_m2``): Llama-shaped
    attention without biases, explicit ``head_dim`` (default 128, ``MiniMaxM2Config``) and
    RMSNorm of q and k over the whole projection (``MiniMaxM2Attention``: ``q_norm`` of
    ``heads * head_dim`` weights, ``k_norm`` of ``kv_heads * head_dim``); every block sparse:
    ``num_local_experts`` experts of width ``intermediate_size`` (named ``w1``/``w3``/``w2`` as
    in transformers 4, whose peft targets transformers 5.17 converts with Mixtral's pattern,
    ``conversion_mapping.py``), top ``num_experts_per_tok`` by sigmoid scores plus the
    ``e_score_correction_bias`` buffer (``MiniMaxM2TopKRouter``), no shared expert."""
    h = k.int("hidden_size")
    heads = k.int("num_attention_heads")
    kv, hd = _heads(k, h, heads, head_dim_default=128)
    layers = k.int("num_hidden_layers")
    cfg = {**k.cfg, "first_k_dense_replace": 0}
    mlp, _counts, experts, top_k, width = _shared_expert_moe(
        _Keys(cfg, k.prefix),
        h,
        layers,
        0,
        ("w1", "w3", "w2"),
        0,
        ("num_local_experts", "num_experts"),
    )
    arch = ModelArch(
        **_common(k, family, name, 196608, False),
        hidden_size=h,
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=kv,
        head_dim=hd,
        intermediate_size=width,
        linears=_attention(h, heads, kv, hd, False, False) + mlp,
        num_experts=experts,
        experts_per_token=top_k,
        block_extra_params=(heads + kv) * hd,
    )
    # MiniMaxM2RMSNorm returns ``self.weight * hidden_states.to(input_dtype)`` (Llama's): the
    # normalised copy at the activation dtype, one fp32 rsqrt per token for q and one for k
    arch.extra["qk_norm_whole"] = True
    return arch


def _seed_oss(k: _Keys, family: str, name: str) -> ModelArch:
    """Seed-OSS (``seed_oss``; transformers 5.17 ``modeling_seed_oss``): Llama shapes with
    q/k/v biases (``attention_bias``, default true), an output-projection bias only with
    ``attention_out_bias`` (default false), MLP biases with ``mlp_bias``, explicit ``head_dim``
    (default 128). Dropout (``SeedOssConfig`` defaults 0.1, as the published configs): on the
    attention output and the MLP output (``residual_dropout``: ``SeedOssAttention.forward``,
    ``SeedOssMLP.forward``) and on the attention probabilities (``attention_dropout``, which the
    eager path applies with ``nn.functional.dropout``)."""
    h = k.int("hidden_size")
    heads = k.int("num_attention_heads")
    kv, hd = _heads(k, h, heads, head_dim_default=128)
    inter = k.int("intermediate_size")
    linears = _attention(
        h, heads, kv, hd, k.bool("attention_bias", True), k.bool("attention_out_bias", False)
    )
    linears += _gated_mlp(h, inter, k.bool("mlp_bias", False))
    arch = ModelArch(
        **_common(k, family, name, 524288, False),
        hidden_size=h,
        num_layers=k.int("num_hidden_layers"),
        num_heads=heads,
        num_kv_heads=kv,
        head_dim=hd,
        intermediate_size=inter,
        linears=linears,
    )
    if _positive_float(k, "residual_dropout", 0.1):
        arch.extra["residual_dropout"] = True
    if _positive_float(k, "attention_dropout", 0.1):
        arch.extra["eager_attention_dropout"] = True
    return arch


_GEMMA4_KINDS = ("sliding", "full", "sliding_shared", "full_shared")
"""Gemma 4's kinds of decoder block: the attention type of ``layer_types`` (sliding window or
full) and whether the block reads the keys and values of an earlier block (the last
``num_kv_shared_layers`` blocks)."""


def _gemma4_layer_types(k: _Keys, layers: int) -> list[str]:
    """``layer_types`` as ``Gemma4TextConfig.__post_init__`` fills it (transformers 5.17
    ``configuration_gemma4.py``): five sliding blocks then a full one by default, and the last
    block forced to ``full_attention``."""
    value = k.cfg.get("layer_types")
    if value is None:
        value = ["sliding_attention" if (i + 1) % 6 else "full_attention" for i in range(layers)]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise k.error("layer_types", value)
    if len(value) != layers:
        raise ConfigError("config_layer_types_length", k.prefix + "layer_types", len(value))
    unknown = sorted({v for v in value if v not in ("sliding_attention", "full_attention")})
    if unknown:
        raise ConfigError("config_invalid_value", k.prefix + "layer_types", unknown[0])
    return [*value[:-1], "full_attention"]


def _gemma4_text(k: _Keys, family: str, name: str) -> ModelArch:
    """Gemma 4's language model (``gemma4_text``; the multimodal ``gemma4`` through its
    ``text_config``), transformers 5.17 ``models/gemma4/modeling_gemma4.py``.

    ``Gemma4TextAttention``: sliding blocks have ``head_dim`` and ``num_key_value_heads``;
    full blocks ``global_head_dim`` (``Gemma4TextConfig.__post_init__`` pops it, default 512,
    into ``per_layer_config``) and, with ``attention_k_eq_v``, ``num_global_key_value_heads``
    and no ``v_proj`` (the keys are the values). The last ``num_kv_shared_layers`` blocks hold
    no ``k_proj``, ``v_proj``, ``k_norm``: they read the keys and values of the last earlier
    block of their type. q and k have per-head RMSNorms with weights, v one without.
    ``Gemma4TextMLP``: gated, ``intermediate_size`` wide, twice that in the kv-shared blocks with
    ``use_double_wide_mlp``. ``Gemma4TextDecoderLayer``: four RMSNorms; with
    ``enable_moe_block`` a router (``router.proj``, an ``nn.Linear`` hidden -> experts, a
    ``scale`` of hidden and a ``per_expert_scale``), ``num_experts`` experts as 3-D parameters
    (``experts.gate_up_proj``, ``experts.down_proj`` of ``moe_intermediate_size``, top
    ``top_k_experts``) beside the dense MLP, and three more norms; with
    ``hidden_size_per_layer_input`` (default 256) the per-layer input (``per_layer_input_gate``
    hidden -> width, ``per_layer_projection`` width -> hidden, one more norm). Outside the
    blocks (``Gemma4TextModel``): the per-layer table ``embed_tokens_per_layer``
    (``vocab_size_per_layer_input x layers*width``), ``per_layer_model_projection`` (an
    ``nn.Linear`` hidden -> layers*width, counted here as one hidden -> width slice per block)
    and its norm (width)."""
    h = k.int("hidden_size")
    heads = k.int("num_attention_heads")
    layers = k.int("num_hidden_layers")
    kv = k.int("num_key_value_heads", default=4)
    if kv > heads or heads % kv:
        raise k.kv_error("num_key_value_heads", kv)
    hd = k.int("head_dim", default=256)
    global_hd = k.int("global_head_dim", default=512)
    k_eq_v = k.bool("attention_k_eq_v", False)
    global_kv = k.int("num_global_key_value_heads", default=kv) if k_eq_v else kv
    if global_kv > heads or heads % global_kv:
        raise k.kv_error("num_global_key_value_heads", global_kv)
    types = _gemma4_layer_types(k, layers)
    shared = k.cfg.get("num_kv_shared_layers", 0)
    if shared is None:
        shared = 0
    if isinstance(shared, bool) or not isinstance(shared, int) or not 0 <= shared < layers:
        raise ConfigError(
            "config_kv_shared_out_of_range", k.prefix + "num_kv_shared_layers", shared
        )
    first_shared = layers - shared
    for i in range(first_shared, layers):
        # Gemma4TextAttention.__init__: prev_layers[::-1].index(layer_type) finds the block
        # whose keys and values a shared block reads; none of its type before: ValueError
        if types[i] not in types[:first_shared]:
            raise ConfigError(
                "config_kv_shared_out_of_range", k.prefix + "num_kv_shared_layers", shared
            )
    inter = k.int("intermediate_size")
    double = k.bool("use_double_wide_mlp", False)
    bias = k.bool("attention_bias", False)
    width = k.cfg.get("hidden_size_per_layer_input", 256)
    if width is None:
        width = 0
    if isinstance(width, bool) or not isinstance(width, int) or width < 0:
        raise k.error("hidden_size_per_layer_input", width)
    moe = k.bool("enable_moe_block", False)
    experts = top_k = moe_inter = 0
    if moe:
        experts = k.int("num_experts")
        top_k = k.int("top_k_experts")
        if top_k > experts:
            raise ConfigError("config_top_k_above_experts", k.prefix + "top_k_experts", top_k)
        moe_inter = k.int("moe_intermediate_size")

    def kind_of(i: int) -> str:
        base = "full" if types[i] == "full_attention" else "sliding"
        return base + ("_shared" if i >= first_shared else "")

    counts = {kind: 0 for kind in _GEMMA4_KINDS}
    for i in range(layers):
        counts[kind_of(i)] += 1
    linears: list[LinearLayer] = []
    kind_params = []
    for kind in _GEMMA4_KINDS:
        if not counts[kind]:
            continue
        full, is_shared = kind.startswith("full"), kind.endswith("_shared")
        d, n_kv = (global_hd, global_kv) if full else (hd, kv)
        linears.append(LinearLayer("q_proj", h, heads * d, bias, role="attn", block_kind=kind))
        if not is_shared:
            linears.append(LinearLayer("k_proj", h, n_kv * d, bias, role="attn", block_kind=kind))
            if not (k_eq_v and full):
                linears.append(
                    LinearLayer("v_proj", h, n_kv * d, bias, role="attn", block_kind=kind)
                )
        linears.append(LinearLayer("o_proj", heads * d, h, bias, role="attn", block_kind=kind))
        # Gemma4TextMLP.__init__: is_kv_shared_layer = layer_idx >= first_kv_shared_layer_idx > 0
        wide = 2 if double and is_shared and first_shared > 0 else 1
        linears += [
            LinearLayer(l.name, l.d_in, l.d_out, role="mlp", block_kind=kind)
            for l in _gated_mlp(h, inter * wide)
        ]
        kind_params.append((kind, d if is_shared else 2 * d))  # q_norm, k_norm weights
    if moe:
        linears.append(LinearLayer("proj", h, experts, role="router"))
        linears += [
            LinearLayer(
                "experts.gate_up_proj",
                h,
                2 * moe_inter,
                False,
                experts,
                top_k,
                quantizable=False,
                kind="param",
            ),
            LinearLayer(
                "experts.down_proj",
                moe_inter,
                h,
                False,
                experts,
                top_k,
                quantizable=False,
                kind="param",
            ),
        ]
    if width:
        linears += [
            LinearLayer("per_layer_model_projection", h, width, role="ple"),
            LinearLayer("per_layer_input_gate", h, width, role="ple"),
            LinearLayer("per_layer_projection", width, h, role="ple"),
        ]
    vocab_ple = k.int("vocab_size_per_layer_input", default=262_144) if width else 0
    kinds = tuple((kind, n) for kind, n in counts.items() if n)
    arch = ModelArch(
        **_common(k, family, name, 131_072, True),
        hidden_size=h,
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=kv,
        head_dim=hd,
        intermediate_size=moe_inter if moe else inter,
        linears=tuple(linears),
        norm_kind="rms",
        norms_per_layer=4 + (1 if width else 0) + (3 if moe else 0),
        num_experts=experts,
        experts_per_token=top_k,
        block_extra_params=(h + experts) if moe else 0,  # router.scale, router.per_expert_scale
        block_counts=kinds,
        block_kind_params=tuple(kind_params),
        per_layer_embedding_params=vocab_ple * layers * width + width,
    )
    _saved_tensor_traits(arch, k, family, True)
    arch.extra["gemma4_layers"] = [kind_of(i) for i in range(layers)]
    arch.extra["gemma4_head_dims"] = {"sliding": [hd, kv], "full": [global_hd, global_kv]}
    arch.extra["ple_width"] = width
    return arch


def _positive_float(k: _Keys, key: str, default: float) -> bool:
    """A dropout probability above 0 (the family's default where the key is absent)."""
    value = k.cfg.get(key, default)
    if value is None:
        value = default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise k.error(key, value)
    return value > 0


_READERS = {
    **{family: _dense for family in _DENSE},
    "olmo": _olmo,
    "olmo2": _olmo,
    "stablelm": _stablelm,
    "mixtral": _mixtral,
    "qwen2_moe": _qwen_moe,
    "qwen3_moe": _qwen_moe,
    "phi3": _phi3,
    "gpt_oss": _gpt_oss,
    "llama4_text": _llama4_text,
    "phi": _phi,
    "gpt_neox": _gpt_neox,
    "falcon": _falcon,
    "RefinedWeb": _falcon,  # Falcon's pre-transformers remote-code names
    "RefinedWebModel": _falcon,
    "bloom": _bloom,
    "gpt2": _gpt2,
    "qwen3_next": _qwen_hybrid,
    "qwen3_5_text": _qwen_hybrid,
    "qwen3_5_moe_text": _qwen_hybrid,
    "lfm2": _lfm2,
    "lfm2_moe": _lfm2,
    "olmo_hybrid": _olmo_hybrid,
    "nemotron_h": _nemotron_h,
    "falcon_h1": _falcon_h1,
    "granitemoehybrid": _granite_hybrid,
    "deepseek_v3": _deepseek_v3,
    "kimi_k2": _deepseek_v3,  # Kimi K2.5's text_config (Kimi_K25Config reads it as deepseek_v3)
    "mistral4": _deepseek_v3,
    "glm4_moe_lite": _deepseek_v3,
    "deepseek_v32": _deepseek_v32,
    "glm_moe_dsa": _deepseek_v32,
    "kimi_linear": _kimi_linear,
    "deepseek_v4": _deepseek_v4,
    "glm4_moe": _glm4_moe,
    "minimax_m2": _minimax_m2,
    "olmo3": _olmo,
    "seed_oss": _seed_oss,
    "gemma4_text": _gemma4_text,
}


MODEL_TYPES = tuple(_READERS)
"""Every ``model_type`` calc reads (a multimodal config is read through its ``text_config``,
whose ``model_type`` is one of these)."""


def arch_from_hf_config(cfg: object, name: str | None = None) -> ModelArch:
    """Build a ModelArch from a parsed ``config.json`` dict."""
    if not isinstance(cfg, dict):
        raise ConfigError("config_not_object", "hf_config", type(cfg).__name__)
    prefix = "hf_config."
    model_type = cfg.get("model_type")
    text = cfg.get("text_config")
    text_only = False
    # a model_type that is no string (a pasted list, an object) is not a wrapper's: reported
    # below as an invalid value, never looked up in a dict (unhashable)
    if (
        isinstance(text, dict)
        and "model_type" not in text
        and isinstance(model_type, str)
        and model_type in _WRAPPER_TEXT_TYPES
    ):
        text = {**text, "model_type": _WRAPPER_TEXT_TYPES[model_type]}
    if not _supported(model_type) and isinstance(text, dict) and _supported(text.get("model_type")):
        cfg, prefix, model_type, text_only = (
            text,
            "hf_config.text_config.",
            text["model_type"],
            True,
        )
    if model_type is None:
        raise ConfigError("config_missing_key", "hf_config.model_type", None)
    if not isinstance(model_type, str):
        raise ConfigError("config_invalid_value", "hf_config.model_type", model_type)
    reader = _READERS.get(model_type)
    if reader is None:
        raise ConfigError("unsupported_architecture", "hf_config.model_type", model_type)
    family = "falcon" if reader is _falcon else _FAMILY_OF.get(model_type, model_type)
    given = cfg  # as pasted: an explicit null window is no window (read_windows)
    defaults = _FAMILY_DEFAULTS.get(model_type)
    if defaults:
        cfg = {**defaults, **{key: val for key, val in cfg.items() if val is not None}}
    keys = _Keys(cfg, prefix)
    arch = reader(keys, family, name or family)
    keys.layer_types(arch.num_layers)
    read_windows(given, model_type, prefix, arch)
    if text_only:
        arch.extra["text_config_only"] = True
    kept = bnb_kept_16bit(cfg, arch, prefix, reader is _dense and not text_only)
    return replace(arch, bnb_kept_16bit=kept) if kept else arch


BNB_MODULE_PARENTS = {"attn": "self_attn", "mlp": "mlp"}
"""The module a block linear of a ``_DENSE`` family sits in, by its role: transformers 5.17
names them ``model.layers.{i}.self_attn.{q,k,v,o}_proj`` and ``model.layers.{i}.mlp.{gate,up,
down}_proj`` (``LlamaDecoderLayer``, ``Qwen2DecoderLayer``, ``Gemma2DecoderLayer``, ...)."""

BNB_BLOCKLESS_SKIPS = frozenset(
    {"lm_head", "multi_modal_projector", "merger", "modality_projection", "vision_tower"}
)
"""Skip-list entries that name no module of a decoder block: the output layer (kept 16-bit
anyway) and the vision parts Unsloth lists by default (unsloth-zoo ``SKIP_QUANTIZATION_MODULES``)
that a text model does not have."""


def _bnb_converts(name: str, patterns: list[re.Pattern[str]]) -> bool:
    """transformers 5.17 ``quantizers/quantizers_utils.py`` ``should_convert_module``: a module
    stays unquantized when a pattern, read as a regular expression, matches the start of its
    name (transformers also tries the pattern followed by a dot, a match that implies this one),
    or when its name ends with the pattern."""
    return not any(p.match(name) or name.endswith(p.pattern) for p in patterns)


def bnb_kept_16bit(
    cfg: JsonObject, arch: ModelArch, prefix: str, named: bool
) -> tuple[tuple[int, str], ...]:
    """The (block, linear) pairs a 4-bit loading of this checkpoint leaves in 16 bits: its
    ``quantization_config`` (bitsandbytes, ``load_in_4bit``) lists modules in
    ``llm_int8_skip_modules``, as Unsloth's dynamic 4-bit builds do (Llama 3.1 8B Instruct:
    ``model.layers.1.mlp``, printed by unsloth_zoo's vLLM loader in unslothai/notebooks
    bdda2efc ``nb/Llama3.1_(8B)-GRPO.ipynb`` line 224). transformers 5.17 skips exactly that
    list when it is given (``quantizers/base.py`` ``get_modules_to_not_convert``: the default
    skips, the output layer among them, only when it is ``None``), matched per module name
    (:func:`_bnb_converts`). ``named``: the block linears' names are known
    (:data:`BNB_MODULE_PARENTS`, the ``_DENSE`` families read whole); elsewhere only entries
    that name no block module (:data:`BNB_BLOCKLESS_SKIPS`) are accepted. A list that leaves
    the output layer to be quantized, or names block modules calc cannot place, is refused
    (``quantization_skip_not_modelled``)."""
    q = cfg.get("quantization_config")
    if q is None:
        return ()
    if not isinstance(q, dict):
        raise ConfigError("config_invalid_value", prefix + "quantization_config", q)
    skip = q.get("llm_int8_skip_modules")
    if q.get("quant_method") != "bitsandbytes" or q.get("load_in_4bit") is not True or skip is None:
        return ()
    key = prefix + "quantization_config.llm_int8_skip_modules"
    if not isinstance(skip, list) or not all(isinstance(p, str) and p for p in skip):
        raise ConfigError("config_invalid_value", key, skip)
    patterns = []
    for pattern in skip:
        try:
            patterns.append(re.compile(pattern))
        except re.error:
            raise ConfigError("config_invalid_value", key, pattern) from None
    if _bnb_converts("lm_head", patterns):
        raise ConfigError("quantization_skip_not_modelled", key, skip)
    if not named:
        if set(skip) - BNB_BLOCKLESS_SKIPS:
            raise ConfigError("quantization_skip_not_modelled", key, skip)
        return ()
    kept = []
    for index in range(arch.num_layers):
        for lin in arch.linears:
            if not lin.quantizable or lin.kind != "linear":
                continue
            parent = BNB_MODULE_PARENTS[lin.role]
            if not _bnb_converts(f"model.layers.{index}.{parent}.{lin.name}", patterns):
                kept.append((index, lin.name))
    return tuple(kept)


_WRAPPER_TEXT_TYPES = {
    "gemma3": "gemma3_text",
    "gemma4": "gemma4_text",
    "kimi_k25": "deepseek_v3",
    "lfm2_vl": "lfm2",
    "llama4": "llama4_text",
    "llava": "llama",
    "mistral3": "mistral",
    "qwen3_5": "qwen3_5_text",
    "qwen3_5_moe": "qwen3_5_moe_text",
}
"""The text model a multimodal config builds when its ``text_config`` names no ``model_type``
(transformers 5.17: the wrapper's fixed ``sub_configs["text_config"]`` class, or the default its
``__post_init__`` gives ``AutoConfig``: ``Mistral3Config`` "mistral", ``Kimi_K25Config``
"deepseek_v3", ``LlavaConfig`` "llama", ``Lfm2VlConfig`` "lfm2")."""

_FAMILY_OF = {"kimi_k2": "deepseek_v3"}
"""model_types read as another family (transformers builds that family's model for them)."""


def _supported(model_type: object) -> bool:
    return isinstance(model_type, str) and model_type in _READERS
