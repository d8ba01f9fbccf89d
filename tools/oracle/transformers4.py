"""The oracle on the transformers 4 generation (hf-trainer-4, pytorch-loop-4).

Run in a venv of ``tools/requirements-oracle-transformers4.txt`` (transformers 4.53.3, peft
0.16.0, accelerate 1.8.1). :func:`transformers4_run` adapts the oracle's transformers 5 calls
to the 4.x API without changing what the library computes:

- ``from_config(dtype=...)`` is ``torch_dtype=`` in 4.x (``PreTrainedModel._from_config``);
- ``integrations/sdpa_attention.py`` has no ``use_gqa_in_sdpa`` in 4.53 (it always calls
  ``repeat_kv`` before SDPA); the oracle's grouped-k/v switch patches that name, so a
  stand-in that answers False is installed (4.53 never reads it);
- ``masking_utils`` has no module-level ``is_tracing`` in 4.53 (``_ignore_causal_mask_sdpa``
  tests ``torch.jit.is_tracing()`` and ``fx.Proxy``, which a fake tensor is not, so the mask
  is dropped as on a GPU without the patch); a stand-in is installed for the same reason;
- peft 0.16 ``LoraConfig`` has no ``ensure_weight_tying`` (0.18 on): the oracle passes it
  False unless the request trains a tied table once (``lora_modules_to_save`` ``*-tied``),
  which peft 0.16 cannot do and the oracle refuses;
- :func:`balanced_expert_routing`: the MoE blocks of 4.x run one ``nn.Linear`` module per
  expert in a Python loop over ``expert_mask.sum(...).nonzero()`` and ``torch.where(mask)``,
  whose sizes depend on the router's values, which a fake tensor does not have. The block's
  forward is the library's own, op for op (router, softmax, top-k, one-hot mask, the gather
  ``hidden_states[None, top_x]``, the expert module, the product with
  ``routing_weights[top_x, idx, None]``, ``index_add_``), with the routing replaced by a
  balanced one: expert ``e`` receives ``tokens * top_k / num_experts`` rows (the remainder
  spread one row each over the first experts), what calc counts per routed expert
  (``tokens * active / count``).

The request keys the transformers 4 profiles set that the oracle does not read are dropped by
the sweep (``benchmarks.oracle_sweep.oracle_request``): ``sdpa_cudnn_last`` (which SDPA
kernel runs first: time only) and ``moe_expert_layout="per-expert-modules"`` (what 4.x
builds).
"""

from __future__ import annotations

from contextlib import ExitStack, contextmanager

import torch

MOE_BLOCKS = {
    "mixtral": ("transformers.models.mixtral.modeling_mixtral", "MixtralSparseMoeBlock"),
    "qwen3_moe": ("transformers.models.qwen3_moe.modeling_qwen3_moe", "Qwen3MoeSparseMoeBlock"),
    "qwen2_moe": ("transformers.models.qwen2_moe.modeling_qwen2_moe", "Qwen2MoeSparseMoeBlock"),
}
"""The 4.x sparse-MoE blocks whose expert loop :func:`balanced_expert_routing` replaces."""


def is_transformers4() -> bool:
    import transformers

    return int(transformers.__version__.split(".")[0]) == 4


def balanced_rows(tokens: int, top_k: int, experts: int) -> list[int]:
    """Rows each expert receives when ``tokens * top_k`` routed copies are spread evenly."""
    total = tokens * top_k
    base, extra = divmod(total, experts)
    return [base + (1 if e < extra else 0) for e in range(experts)]


def _balanced_forward(self, hidden_states: torch.Tensor):
    """transformers 4.53.3 ``MixtralSparseMoeBlock.forward`` / ``Qwen3MoeSparseMoeBlock.forward``
    / ``Qwen2MoeSparseMoeBlock.forward`` with balanced routing (see the module doc)."""
    import torch.nn.functional as F

    batch_size, sequence_length, hidden_dim = hidden_states.shape
    jitter = getattr(self, "jitter_noise", 0)
    if self.training and jitter > 0:
        hidden_states *= torch.empty_like(hidden_states).uniform_(1.0 - jitter, 1.0 + jitter)
    hidden_states = hidden_states.view(-1, hidden_dim)
    router_logits = self.gate(hidden_states)
    routing_weights = F.softmax(router_logits, dim=1, dtype=torch.float)
    routing_weights, selected_experts = torch.topk(routing_weights, self.top_k, dim=-1)
    if getattr(self, "norm_topk_prob", True):  # Mixtral always normalises
        routing_weights /= routing_weights.sum(dim=-1, keepdim=True)
    routing_weights = routing_weights.to(hidden_states.dtype)
    final_hidden_states = torch.zeros(
        (batch_size * sequence_length, hidden_dim),
        dtype=hidden_states.dtype,
        device=hidden_states.device,
    )
    expert_mask = torch.nn.functional.one_hot(
        selected_experts, num_classes=self.num_experts
    ).permute(2, 1, 0)
    expert_hit = torch.greater(expert_mask.sum(dim=(-1, -2)), 0)  # the library's .nonzero() input
    del expert_hit
    rows = balanced_rows(batch_size * sequence_length, self.top_k, self.num_experts)
    for expert_idx, n in enumerate(rows):
        if n == 0:
            continue
        expert_layer = self.experts[expert_idx]
        # torch.where(expert_mask[expert_idx]): n (slot, token) pairs, int64 each
        idx = torch.zeros((n,), dtype=torch.long, device=hidden_states.device)
        top_x = torch.zeros((n,), dtype=torch.long, device=hidden_states.device)
        current_state = hidden_states[None, top_x].reshape(-1, hidden_dim)
        current_hidden_states = expert_layer(current_state) * routing_weights[top_x, idx, None]
        final_hidden_states.index_add_(0, top_x, current_hidden_states.to(hidden_states.dtype))
    shared = getattr(self, "shared_expert", None)
    if shared is not None:  # Qwen2-MoE's always-on expert and its sigmoid gate
        shared_expert_output = shared(hidden_states)
        shared_expert_output = (
            F.sigmoid(self.shared_expert_gate(hidden_states)) * shared_expert_output
        )
        final_hidden_states = final_hidden_states + shared_expert_output
    final_hidden_states = final_hidden_states.reshape(batch_size, sequence_length, hidden_dim)
    return final_hidden_states, router_logits


@contextmanager
def balanced_expert_routing():
    """The 4.x sparse-MoE blocks route a fixed, balanced share of rows to each expert."""
    import importlib

    saved = []
    for module_name, cls_name in MOE_BLOCKS.values():
        try:
            cls = getattr(importlib.import_module(module_name), cls_name)
        except (ImportError, AttributeError):
            continue
        saved.append((cls, cls.forward))
        cls.forward = _balanced_forward
    try:
        yield
    finally:
        for cls, forward in saved:
            cls.forward = forward


@contextmanager
def _from_config_dtype():
    """``_from_config(config, dtype=...)`` as 4.x spells it (``torch_dtype=``)."""
    from transformers import PreTrainedModel

    original = PreTrainedModel.__dict__["_from_config"]

    def _from_config(cls, config, **kwargs):
        if "dtype" in kwargs:
            kwargs["torch_dtype"] = kwargs.pop("dtype")
        return original.__func__(cls, config, **kwargs)

    PreTrainedModel._from_config = classmethod(_from_config)
    try:
        yield
    finally:
        PreTrainedModel._from_config = original


@contextmanager
def _lora_config_without_tying():
    """peft 0.16's ``LoraConfig`` for the oracle's keyword arguments (module doc)."""
    import peft

    original = peft.LoraConfig

    def lora_config(*args, ensure_weight_tying=False, **kwargs):
        if ensure_weight_tying:
            raise ValueError(f"peft {peft.__version__} LoraConfig has no ensure_weight_tying")
        return original(*args, **kwargs)

    peft.LoraConfig = lora_config
    try:
        yield
    finally:
        peft.LoraConfig = original


@contextmanager
def _stand_in(module, name: str, value):
    """``module.name = value`` for the duration when 4.x lacks it."""
    if hasattr(module, name):
        yield
        return
    setattr(module, name, value)
    try:
        yield
    finally:
        delattr(module, name)


@contextmanager
def transformers4_run():
    """Everything the oracle needs to trace the transformers 4.53 code path (module doc); a
    no-op under transformers 5."""
    if not is_transformers4():
        yield
        return
    import transformers.integrations.sdpa_attention as sa
    import transformers.masking_utils as mu

    with ExitStack() as stack:
        stack.enter_context(_from_config_dtype())
        stack.enter_context(_stand_in(sa, "use_gqa_in_sdpa", lambda *a, **k: False))
        stack.enter_context(_stand_in(mu, "is_tracing", lambda *a, **k: False))
        stack.enter_context(_lora_config_without_tying())
        stack.enter_context(balanced_expert_routing())
        yield
