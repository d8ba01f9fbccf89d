"""Sliding-window attention: which blocks of a stack attend within a window, and what that
does to a training step as transformers 5.17 and torch 2.13 run it.

A config's ``sliding_window`` (``W``) limits each query to the ``W`` latest keys, itself
included (``masking_utils.sliding_window_overlay``: ``kv_idx > q_idx - W``). Which blocks do
so is the family's rule, read in transformers 5.17 ``models/<family>/configuration_*.py`` and
``modeling_*.py`` (:data:`WINDOW_DEFAULTS`, :func:`windowed_layers`). How each attention
implementation takes the window:

- **SDPA**: ``create_sliding_window_causal_mask`` hands SDPA a 4-D boolean mask whenever the keys
  reach the window (``masking_utils._ignore_causal_mask_sdpa``, lines 262-264: ``kv_length >=
  local_attention_size`` keeps the mask). With a mask tensor SDPA cannot run the flash kernel
  nor skip the blocks above the diagonal: the whole square is computed
  (:func:`calc.attention.request_fraction` of a ``padding`` mask). transformers then repeats
  grouped k/v to every head (``sdpa_attention.use_gqa_in_sdpa`` is false with a mask), and
  ATen turns the boolean mask into an additive one of the query's dtype on every call
  (``attention.cpp`` ``convert_boolean_attn_mask``), which the memory-efficient and cuDNN
  kernels save for their backward (:func:`calc.memory.mask_tensor_blocks`).
- **flash** (``flash_attention_2``): ``_flash_attention_forward`` passes ``window_size =
  (W - 1, W - 1)`` once the keys exceed ``W`` (``modeling_flash_attention_utils.py`` lines
  650-655), and the kernel computes the band only (:func:`band_fraction`).
- **eager**: the whole square is computed and masked whatever the window.
"""

from __future__ import annotations

from .arch import ModelArch
from .errors import ConfigError
from .jsontypes import JsonObject

WINDOW_DEFAULTS: dict[str, int | None] = {
    "gemma2": 4096,
    "gemma3_text": 4096,
    "gemma4_text": 512,
    "gpt_oss": 128,
    "olmo3": 4096,
    "mistral": 4096,
    "ministral3": None,
    "mixtral": None,
    "phi3": None,
    "qwen2": 4096,
    "qwen2_moe": 4096,
    "qwen3": 4096,
    "qwen3_moe": 4096,
    "smollm3": None,
}
"""``sliding_window`` where a config leaves the key out: the default of the family's config class
in transformers 5.17 (``sliding_window: int | None = ...`` in each ``configuration_*.py``). A key
given as ``null`` means no window. Families absent here have no sliding window in transformers
5.17 (DeepSeek-V4's compressed attention is read on its own: ``dsv4_sliding_window``)."""

GATED_FAMILIES = frozenset({"qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "smollm3"})
"""Families whose window applies only with ``use_sliding_window`` true (default false): their
``__post_init__`` sets ``sliding_window`` to None (Qwen2-MoE: 0) otherwise, and no block is a
sliding one."""

ALL_BLOCKS_FAMILIES = frozenset({"mistral", "ministral3", "mixtral", "phi3", "qwen3_moe"})
"""Families without ``layer_types``: every block gets the window (``mask_function =
create_sliding_window_causal_mask`` when ``config.sliding_window`` is set; each attention passes
``sliding_window=config.sliding_window``)."""


def _layer_types(cfg: JsonObject, family: str, layers: int) -> list[str]:
    """The attention kind of each block: every block in :data:`ALL_BLOCKS_FAMILIES` (their
    models never read ``layer_types``; Mistral's config only warns about one), else the config's
    ``layer_types``, else as the family's ``__post_init__`` fills it (transformers 5.17). Gemma
    4's kinds are read with its blocks (:func:`read_windows`)."""
    slide, full = "sliding_attention", "full_attention"
    if family in ALL_BLOCKS_FAMILIES:
        return [slide] * layers
    given = cfg.get("layer_types")
    if isinstance(given, list) and len(given) == layers:
        return [str(kind) for kind in given]
    if family in ("gemma2", "gpt_oss"):  # (i + 1) % 2: the even blocks
        return [slide if (i + 1) % 2 else full for i in range(layers)]
    if family == "gemma3_text":  # sliding_window_pattern, 6 by default
        pattern = cfg.get("sliding_window_pattern", 6)
        if not isinstance(pattern, int) or isinstance(pattern, bool) or pattern <= 0:
            pattern = 6
        return [slide if (i + 1) % pattern else full for i in range(layers)]
    if family == "olmo3":  # three blocks in four
        return [slide if (i + 1) % 4 else full for i in range(layers)]
    if family in ("qwen2", "qwen3"):  # the blocks from max_window_layers on
        first = _int_or(cfg.get("max_window_layers"), 28)
        return [slide if i >= first else full for i in range(layers)]
    if family == "qwen2_moe":  # the even blocks below max_window_layers
        last = _int_or(cfg.get("max_window_layers"), 28)
        return [slide if (i + 1) % 2 and i < last else full for i in range(layers)]
    if family == "smollm3":  # the blocks without rotary embeddings (no_rope_layers 0)
        no_rope = cfg.get("no_rope_layers")
        if not (isinstance(no_rope, list) and len(no_rope) == layers):
            interval = _int_or(cfg.get("no_rope_layer_interval"), 4)
            no_rope = [int((i + 1) % interval != 0) for i in range(layers)]
        return [slide if not has_rope else full for has_rope in no_rope]
    raise ValueError(f"no window rule for {family}")  # WINDOW_DEFAULTS names a family it lacks


def _int_or(value: object, default: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return default
    return value


def read_windows(cfg: JsonObject, model_type: str, prefix: str, arch: ModelArch) -> None:
    """Store in ``arch.extra`` the window (``sliding_window``) and how many attention blocks
    use it (``window_layers``), read from the config as given (before calc's family defaults,
    so that an explicit ``null`` means no window). Nothing for a family without windows or a
    config without one. A window that is not a positive integer is refused
    (``config_invalid_value``)."""
    if model_type not in WINDOW_DEFAULTS:
        return
    if model_type in GATED_FAMILIES and cfg.get("use_sliding_window") is not True:
        return
    value = cfg.get("sliding_window", WINDOW_DEFAULTS[model_type])
    if value is None or (model_type == "qwen2_moe" and value == 0):
        return
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError("config_invalid_value", prefix + "sliding_window", value)
    if arch.extra.get("gemma4_layers"):
        kinds = arch.extra["gemma4_layers"]
        count = sum(1 for kind in kinds if kind.startswith("sliding"))
    else:
        types = _layer_types(cfg, model_type, arch.num_layers)
        count = sum(1 for kind in types if kind == "sliding_attention")
    if count:
        arch.extra["sliding_window"] = value
        arch.extra["window_layers"] = count


def window_of(arch: ModelArch) -> tuple[int | None, int]:
    """(the window, the attention blocks that use it); (None, 0) without one."""
    window = arch.extra.get("sliding_window")
    if not isinstance(window, int) or isinstance(window, bool):
        return None, 0
    return window, int(arch.extra.get("window_layers", 0))


def sdpa_mask_tensor(window: int | None, seq_len: int) -> bool:
    """Whether SDPA gets a mask tensor for a block of ``window`` on rows of ``seq_len`` tokens
    (no padding): once the keys reach the window (``_ignore_causal_mask_sdpa``)."""
    return window is not None and seq_len >= window


def band_fraction(keys: float, window: int) -> float:
    """Share of the full ``keys x keys`` square a causal band of ``window`` keys per query covers
    (each query meets ``min(i + 1, window)`` keys): ``(W (W + 1) / 2 + (L - W) W) / L^2``; the
    causal half (``(L + 1) / 2L``, about 0.5) when the window holds every key."""
    length = float(keys)
    if length <= 0:
        return 0.5
    w = min(float(window), length)
    return (w * (w + 1.0) / 2.0 + (length - w) * w) / (length * length)


__all__ = [
    "ALL_BLOCKS_FAMILIES",
    "GATED_FAMILIES",
    "WINDOW_DEFAULTS",
    "band_fraction",
    "read_windows",
    "sdpa_mask_tensor",
    "window_of",
]
