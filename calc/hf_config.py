"""Read a Hugging Face ``config.json`` into a :class:`~calc.arch.ModelArch`.

Each family is read with its own key names. A missing key is reported with
``code="config_missing_key"`` and ``field="hf_config.<key>"``; an unknown
``model_type`` with ``code="unsupported_architecture"``.
"""

from __future__ import annotations

from .arch import LinearLayer, ModelArch
from .errors import ConfigError


def _get(cfg: dict, key: str, default: object = ..., kind: type = int):
    if key not in cfg or cfg[key] is None:
        if default is ...:
            raise ConfigError("config_missing_key", f"hf_config.{key}", None)
        return default
    value = cfg[key]
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ConfigError("config_invalid_value", f"hf_config.{key}", value)
    elif kind is bool:
        if not isinstance(value, bool):
            raise ConfigError("config_invalid_value", f"hf_config.{key}", value)
    return value


def _llama_like(cfg: dict, name: str) -> ModelArch:
    """Llama, Mistral, Qwen2: GQA attention, SwiGLU MLP, RMSNorm, RoPE."""
    family = cfg.get("model_type")
    h = _get(cfg, "hidden_size")
    heads = _get(cfg, "num_attention_heads")
    kv = _get(cfg, "num_key_value_heads", heads)
    hd = _get(cfg, "head_dim", None) or h // heads
    inter = _get(cfg, "intermediate_size")
    qkv_bias = family == "qwen2" or bool(cfg.get("attention_bias", False))
    mlp_bias = bool(cfg.get("mlp_bias", False))
    linears = (
        LinearLayer("q_proj", h, heads * hd, qkv_bias),
        LinearLayer("k_proj", h, kv * hd, qkv_bias),
        LinearLayer("v_proj", h, kv * hd, qkv_bias),
        LinearLayer("o_proj", heads * hd, h, bool(cfg.get("attention_bias", False))),
        LinearLayer("gate_proj", h, inter, mlp_bias),
        LinearLayer("up_proj", h, inter, mlp_bias),
        LinearLayer("down_proj", inter, h, mlp_bias),
    )
    return ModelArch(
        name=name, family=family, vocab_size=_get(cfg, "vocab_size"), hidden_size=h,
        num_layers=_get(cfg, "num_hidden_layers"), num_heads=heads, num_kv_heads=kv,
        head_dim=hd, intermediate_size=inter,
        max_position_embeddings=_get(cfg, "max_position_embeddings", 4096),
        linears=linears, norm_kind="rms", norms_per_layer=2,
        tie_word_embeddings=_get(cfg, "tie_word_embeddings", False, bool),
    )


_READERS = {
    "llama": _llama_like,
    "mistral": _llama_like,
    "qwen2": _llama_like,
}


def arch_from_hf_config(cfg: object, name: str | None = None) -> ModelArch:
    """Build a ModelArch from a parsed ``config.json`` dict."""
    if not isinstance(cfg, dict):
        raise ConfigError("config_not_object", "hf_config", type(cfg).__name__)
    model_type = cfg.get("model_type")
    if not isinstance(model_type, str):
        raise ConfigError("config_missing_key", "hf_config.model_type", model_type)
    reader = _READERS.get(model_type)
    if reader is None:
        raise ConfigError("unsupported_architecture", "hf_config.model_type", model_type)
    return reader(cfg, name or model_type)


def supported_families() -> tuple[str, ...]:
    return tuple(sorted(_READERS))
