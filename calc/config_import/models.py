"""A model named in a training config (a Hugging Face id, a torchtune component) -> preset.

The Hugging Face id is matched against each preset's ``hf_repo`` (case-insensitive), then
with the suffixes of the fine-tuned variants removed (``-Instruct``, ``-chat``, ``-it``,
with a version such as ``-v0.2``): an instruct or chat release has the base model's
shapes, so its memory and time are the base's. The presets' own alias table
(:func:`calc.presets.resolve_preset_id`: ``hf_repo`` and ``aliases``) is asked first. An id that matches nothing is reported
``unknown`` with the hint to paste the model's ``config.json``.
"""

from __future__ import annotations

import re

from .. import presets
from ..arch import ModelArch
from .report import Report

_VARIANT = re.compile(r"-(instruct|chat|it)(-v\d+(\.\d+)*)?(?=(-hf)?$)", re.IGNORECASE)
# ids that changed name on the Hub (both spellings are in circulation)
_RENAMES = {"meta-llama/meta-llama-3.1-": "meta-llama/llama-3.1-"}


def _by_repo() -> dict[str, str]:
    return {presets.preset_row(pid)["hf_repo"].lower(): pid for pid in presets.preset_ids()}


def preset_for_id(model_id: str) -> tuple[str | None, str | None]:
    """(preset id, note) for a Hugging Face id; (None, None) when none matches."""
    if not isinstance(model_id, str) or not model_id.strip():
        return None, None
    text = model_id.strip()
    lookup = getattr(presets, "resolve_preset_id", None)  # the presets' alias table
    if lookup is not None:
        from ..errors import InputError

        try:
            return lookup(text), None
        except InputError:
            pass
    if text in presets.preset_ids():
        return text, None
    repos = _by_repo()
    lowered = text.lower()
    for old, new in _RENAMES.items():
        if lowered.startswith(old):
            lowered = new + lowered[len(old) :]
    if lowered in repos:
        return repos[lowered], None
    base = _VARIANT.sub("", lowered)
    # Mistral numbers its releases: v0.2/v0.3 instruct have v0.1's shapes
    for candidate in (base, base + "-v0.1"):
        if candidate != lowered and candidate in repos:
            return repos[candidate], "variant_of_" + repos[candidate]
    return None, None


# torchtune builder names (torchtune 0.6 ``torchtune.models.<family>.<builder>``) -> preset
_TORCHTUNE_BUILDERS = {
    "llama2_7b": "llama-2-7b",
    "llama2_13b": "llama-2-13b",
    "llama2_70b": "llama-2-70b",
    "llama3_8b": "llama-3-8b",
    "llama3_1_8b": "llama-3.1-8b",
    "llama3_1_70b": "llama-3.1-70b",
    "llama3_1_405b": "llama-3.1-405b",
    "llama3_2_1b": "llama-3.2-1b",
    "llama3_2_3b": "llama-3.2-3b",
    "mistral_7b": "mistral-7b",
    "qwen2_5_0_5b": "qwen2.5-0.5b",
    "qwen2_5_1_5b_base": "qwen2.5-1.5b",
    "qwen2_5_1_5b_instruct": "qwen2.5-1.5b",
    "qwen2_5_3b": None,
    "qwen2_5_7b_base": "qwen2.5-7b",
    "qwen2_5_7b_instruct": "qwen2.5-7b",
    "qwen2_5_14b_base": "qwen2.5-14b",
    "qwen2_5_14b_instruct": "qwen2.5-14b",
    "qwen2_5_32b_base": "qwen2.5-32b",
    "qwen2_5_32b_instruct": "qwen2.5-32b",
    "qwen2_5_72b_base": "qwen2.5-72b",
    "qwen2_5_72b_instruct": "qwen2.5-72b",
    "gemma_2b": "gemma-2b",
    "gemma_7b": "gemma-7b",
    "gemma2_2b": "gemma-2-2b",
    "gemma2_9b": "gemma-2-9b",
    "gemma2_27b": "gemma-2-27b",
    "phi3_mini": "phi-3-mini",
}
TORCHTUNE_PRESETS = {v: k for k, v in _TORCHTUNE_BUILDERS.items() if v and "instruct" not in k}


def torchtune_builder(component: str) -> tuple[str | None, str]:
    """(preset id or None, method) from ``torchtune.models.llama3_1.qlora_llama3_1_8b``."""
    name = component.rsplit(".", 1)[-1] if isinstance(component, str) else ""
    method = "full"
    if name.startswith("qlora_"):
        method, name = "qlora", name[len("qlora_") :]
    elif name.startswith("lora_"):
        method, name = "lora", name[len("lora_") :]
    return _TORCHTUNE_BUILDERS.get(name), method


def resolve_model(
    rep: Report, key: str, value: object, override: object = None
) -> ModelArch | None:
    """Set ``model`` from the config's id (or from ``override``, the caller's model);
    returns the architecture for target checks, or None."""
    if override is not None:
        rep.mark_used(key, ["model"], "model_given_separately")
        rep.request["model"] = override
    elif isinstance(value, str):
        preset_id, note = preset_for_id(value)
        if preset_id is None:
            rep.unknown(key, "model_not_a_preset:paste_config_json")
            suggest = getattr(presets, "suggest_presets", None)
            if suggest is not None:
                rep.keys[-1]["suggestions"] = suggest(value)
            return None
        rep.use(key, "model", preset_id, note)
    else:
        rep.unknown(key, "not_a_model_id")
        return None
    return arch_of(rep.request.get("model"))


def arch_of(model: object) -> ModelArch | None:
    """The architecture of a request's ``model`` value, or None when it is not valid."""
    from ..errors import CalcError
    from ..request import resolve_model as resolve

    if model is None:
        return None
    try:
        return resolve(model)[0]
    except CalcError:
        return None
