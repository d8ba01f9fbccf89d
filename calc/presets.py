"""Model presets (TEMPORARY minimal version; to be replaced by the data-file loader)."""

from __future__ import annotations

from .arch import ModelArch
from .errors import InputError
from .hf_config import arch_from_hf_config

_CONFIGS = {
    "llama-2-7b": {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
                   "num_key_value_heads": 32, "intermediate_size": 11008,
                   "num_hidden_layers": 32, "vocab_size": 32000,
                   "max_position_embeddings": 4096},
}


def preset_ids() -> tuple[str, ...]:
    return tuple(_CONFIGS)


def get_preset(preset_id: str) -> ModelArch:
    cfg = _CONFIGS.get(preset_id)
    if cfg is None:
        raise InputError("unknown_preset", "model", preset_id)
    return arch_from_hf_config(cfg, preset_id)
