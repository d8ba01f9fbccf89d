"""The modules transformers' 4-bit loading leaves unquantized by name (applied to the families
that name any: DeepSeek-V4).

``from_pretrained(..., quantization_config=BitsAndBytesConfig(load_in_4bit=True))`` skips,
beside the keys :func:`transformers.quantizers.base.get_keys_to_not_convert` returns (what
:func:`tools.oracle.qlora.quantize_linears` skips), the model's ``_keep_in_fp32_modules``
(transformers 5.17 ``quantizers/quantizer_bnb_4bit.py``: ``get_modules_to_not_convert(model,
..., model._keep_in_fp32_modules)``), matched by
``quantizers/quantizers_utils.py`` ``should_convert_module``: a pattern that starts the module's
name (as a regular expression) or ends it. DeepSeek-V4 lists its compressors' and indexer's
``kv_proj`` / ``gate_proj`` and the indexer's ``weights_proj`` there (they ship in BF16 beside
FP8 weights). Only those families' setups run this module (its source is left out of the other
setups' cache keys).
"""

from __future__ import annotations

from contextlib import contextmanager


@contextmanager
def fp32_modules_left_unquantized():
    """``get_keys_to_not_convert`` also returning every module a ``_keep_in_fp32_modules``
    pattern matches, as the 4-bit loading skips them."""
    from transformers.quantizers import base
    from transformers.quantizers.quantizers_utils import should_convert_module

    original = base.get_keys_to_not_convert

    def with_fp32_modules(model) -> list:
        keys = list(original(model))
        patterns = list(getattr(model, "_keep_in_fp32_modules", None) or [])
        if patterns:
            keys += [
                name
                for name, _module in model.named_modules()
                if name and not should_convert_module(name, patterns)
            ]
        return keys

    base.get_keys_to_not_convert = with_fp32_modules
    try:
        yield
    finally:
        base.get_keys_to_not_convert = original
