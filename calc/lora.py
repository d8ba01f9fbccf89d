"""LoRA adapters: which linear modules get one, and how many parameters they train.

Per adapted matrix LoRA adds ``A`` (``r x d_in``) and ``B`` (``d_out x r``):
``r * (d_in + d_out)`` trainable parameters (Hu et al. 2021, "LoRA", arXiv:2106.09685,
section 4; peft's ``LoraLayer`` with the default ``bias="none"``).

Targets follow peft's matching: a module name adapts *every* module of a block whose
last name component equals it (GPT-2's ``c_proj`` adapts ``attn.c_proj`` and
``mlp.c_proj``; Qwen-MoE's ``gate_proj`` adapts each expert's and the shared expert's).
``"all-linear"`` adapts every ``nn.Linear`` inside the decoder blocks and leaves out the
output layer, as peft's ``target_modules="all-linear"`` does (MoE routers included where
they are ``nn.Linear``). Each MoE expert holds its own adapter.

Mixture of experts, as peft 0.21.0 does it (``peft/tuners/lora/layer.py`` ``ParamWrapper``;
``peft/utils/transformers_weight_conversion.py``):

- Experts stored as 3-D parameters (gpt-oss and Llama 4 in transformers 5.17:
  ``experts.gate_up_proj`` of ``experts x hidden x 2*width``, ``experts.down_proj``) are not
  ``nn.Linear``: ``"all-linear"`` and module names leave them alone (LoRA on attention, the
  shared expert and ``nn.Linear`` routers only). Naming them (calc: ``experts.gate_up_proj``,
  ``experts.down_proj``; peft: ``target_parameters``) gives each expert its own ``A`` and
  ``B``: ``ParamWrapper`` builds ``lora_A`` as ``Linear(d_in, r * experts)`` and ``lora_B``
  as ``Linear(r * experts, d_out)``, so ``experts * r * (d_in + d_out)`` trainable
  parameters, the same count as one adapter per expert.
- Mixtral and Qwen-MoE presets list their experts under their transformers-4 module names
  (``w1``/``w3``/``w2``, ``gate_proj``/``up_proj``/``down_proj``), one adapter per expert
  matrix. Under transformers 5 peft 0.21 converts such targets to the fused 3-D parameters,
  where ``gate_proj`` + ``up_proj`` become one ``gate_up_proj`` adapter of rank ``2r``
  (``experts * 2r * (hidden + 2*width)``, more than the ``experts * 2r * (hidden + width)``
  counted here), and a module that shares the experts' names (a shared expert) loses its
  adapter; Qwen2-MoE itself is not converted (:data:`CONVERTED_FAMILIES`). calc counts this
  when the request says ``moe_expert_layout="fused-3d"`` (:func:`fused_expert_adapters`);
  the default ``"per-expert-modules"`` is the transformers-4 layout.
- Adapters on experts a token does not reach hold memory (parameters, gradients, optimizer
  states: ``count``) but cost no compute or activations (``active``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Iterable

from .arch import LinearLayer, ModelArch
from .errors import InputError

ALL_LINEAR = "all-linear"


@dataclass(frozen=True)
class AdaptedLinear:
    """A linear module of one block that carries an adapter.

    ``count``: copies per block (MoE experts), each with its own adapter; ``active``: the
    copies a token passes through (what LoRA activations scale with); ``blocks``: how many
    decoder blocks hold the module (all but in a mixed stack such as Llama 4 Maverick's).
    """

    name: str
    d_in: int
    d_out: int
    count: int
    active: int
    role: str
    blocks: int = 0
    # fused-3d layout only: the rank multiplier (2 for gate_up_proj, which fuses two
    # transformers-4 adapters), and the block linears this adapter stands for. A ``fused``
    # adapter is folded into its weight (W + B·A) before the matmul, so no token passes
    # through A and B: no per-token LoRA activations.
    rank_factor: int = 1
    fused: bool = False
    covers: tuple[LinearLayer, ...] = ()

    def params(self, rank: int) -> int:
        """Adapter parameters of all ``count`` copies: ``count * r * (d_in + d_out)``."""
        return self.count * rank * self.rank_factor * (self.d_in + self.d_out)


def _selected(arch: ModelArch, targets: object) -> tuple[LinearLayer, ...]:
    if targets == ALL_LINEAR:
        return tuple(l for l in arch.linears if l.kind == "linear")
    if isinstance(targets, str):
        targets = (targets,)
    if not isinstance(targets, (tuple, list)) or not targets:
        raise InputError("wrong_type", "lora_targets", targets)
    wanted = set()
    known = set(arch.linear_names())
    for name in targets:
        if not isinstance(name, str):
            raise InputError("wrong_type", "lora_targets", name)
        if name not in known:
            raise InputError("unknown_lora_target", "lora_targets", name)
        wanted.add(name)
    return tuple(l for l in arch.linears if l.name in wanted)


PER_EXPERT_MODULES = "per-expert-modules"
FUSED_3D = "fused-3d"


def adapted_linears(
    arch: ModelArch, targets: object, layout: str = PER_EXPERT_MODULES
) -> tuple[AdaptedLinear, ...]:
    """The linear modules of one decoder block that get an adapter, in block order.

    ``targets`` is ``"all-linear"`` or a sequence of HF module names (see the module doc).
    Every decoder block is adapted the same way, so the model holds ``arch.num_layers``
    times these. ``layout`` is the request's ``moe_expert_layout``.
    """
    if isinstance(targets, list):
        targets = tuple(targets)
    try:
        return _adapted_kept(arch, targets, layout)
    except TypeError:  # targets not hashable (a bad value: _selected says which)
        return _adapted(arch, targets, layout)


def _adapted(arch: ModelArch, targets: object, layout: str) -> tuple[AdaptedLinear, ...]:
    selected = _selected(arch, targets)
    if layout == FUSED_3D and _routed_experts(arch):
        return fused_expert_adapters(arch, selected)
    return tuple(
        AdaptedLinear(l.name, l.d_in, l.d_out, l.count, l.active, l.role, arch.blocks_of(l))
        for l in selected
    )


@lru_cache(maxsize=32)
def _adapted_kept(arch: ModelArch, targets: object, layout: str) -> tuple[AdaptedLinear, ...]:
    """:func:`_adapted`, kept: a plan asks the same model's adapters a few hundred times (each
    setup it weighs, its memory and its time), about a twentieth of its time in CPython. A
    value memo (``ModelArch`` is frozen, compared by value), so exact."""
    return _adapted(arch, targets, layout)


def _routed_experts(arch: ModelArch) -> tuple[LinearLayer, ...]:
    """Routed experts held as one ``nn.Linear`` per expert matrix (transformers-4 names)."""
    return tuple(l for l in arch.linears if l.kind == "linear" and l.count > 1 and l.role == "mlp")


def as_stored_3d(arch: ModelArch) -> ModelArch:
    """The model as transformers 5.17 stores it (``moe_expert_layout="fused-3d"``): the routed
    experts are 3-D ``nn.Parameter`` stacks (``Qwen3MoeExperts.gate_up_proj``,
    ``MixtralExperts``, ``Qwen2MoeExperts``), which QLoRA's quantisation does not reach:
    transformers 5.17 ``integrations/bitsandbytes.py`` ``replace_with_bnb_linear`` swaps only
    ``nn.Linear`` and ``Conv1D`` modules for 4-bit ones, so the experts stay in 16 bits (the
    attention, the shared expert and the other linears are quantised as before)."""
    experts = set(_routed_experts(arch))
    if not experts:
        return arch
    return replace(
        arch,
        linears=tuple(replace(l, quantizable=False) if l in experts else l for l in arch.linears),
    )


CONVERTED_FAMILIES = frozenset(
    {
        "mixtral",
        "qwen3_moe",
        "qwen3_next",
        "deepseek_v3",
        "deepseek_v32",
        "glm4_moe",
        "glm4_moe_lite",
        "glm_moe_dsa",
        "minimax_m2",
    }
)
"""Families whose transformers-4 expert targets peft 0.21.0 converts: the model types of
``_MODEL_TO_CONVERSION_PATTERN`` (transformers 5.17 ``conversion_mapping.py``, plus
``mixtral`` added by peft) that calc reads (``qwen3_next`` maps to ``qwen2_moe``'s pattern;
``qwen3_5_moe_text`` to ``qwen3_5_text``'s, which has no expert conversion). ``qwen2_moe`` itself is not among them (only
families that borrow its pattern are): on transformers 5.17 its 3-D experts and its router
get no adapter from module names, while its shared expert keeps its own."""


def fused_expert_adapters(
    arch: ModelArch, selected: tuple[LinearLayer, ...]
) -> tuple[AdaptedLinear, ...]:
    """What peft 0.21.0 adapts on transformers 5.17, where the experts are 3-D tensors
    (``Qwen3MoeExperts.gate_up_proj``: ``experts x 2*width x hidden``, ``down_proj``:
    ``experts x hidden x width``; ``MixtralExperts`` alike).

    ``peft/utils/transformers_weight_conversion.py`` ``_convert_peft_config_moe`` moves the
    expert names out of ``target_modules`` into ``target_parameters``: gate + up (Qwen
    ``gate_proj``/``up_proj``, Mixtral ``w1``/``w3``) become ``gate_up_proj`` with rank and
    alpha doubled (``rank_pattern``), down becomes ``down_proj``, the router ``gate`` becomes
    ``gate.weight``. Every other module of the same name (a shared expert, the dense MLP
    of a mixed stack) leaves ``target_modules`` with it and keeps no adapter. Families
    outside :data:`CONVERTED_FAMILIES` are not converted (see there).
    Naming only one of gate and up is peft's ``ValueError``: calc's ``fused_target_incomplete``.
    Each of these is a ``ParamWrapper`` (``peft/tuners/lora/layer.py``): ``lora_A`` of
    ``r * experts`` rows, so ``experts * r' * (d_in + d_out)`` parameters with ``r'`` its rank.
    """
    experts = _routed_experts(arch)
    expert_names = {l.name for l in experts}
    if arch.family not in CONVERTED_FAMILIES:
        # no conversion: the routed experts and the router are not nn.Linear any more, so
        # their names reach only the nn.Linear modules that share them (the shared expert)
        return tuple(
            AdaptedLinear(l.name, l.d_in, l.d_out, l.count, l.active, l.role, arch.blocks_of(l))
            for l in selected
            if l not in experts and not _is_router(arch, l)
        )
    inputs = [l for l in experts if not l.mlp_output]  # gate, up (w1, w3)
    chosen_inputs = [l for l in inputs if l in selected]
    if chosen_inputs and len(chosen_inputs) < len(inputs):
        missing = sorted(l.name for l in inputs if l not in selected)
        raise InputError("fused_target_incomplete", "lora_targets", ", ".join(missing))
    out = []
    if chosen_inputs:
        first = chosen_inputs[0]
        out.append(
            AdaptedLinear(
                "experts.gate_up_proj",
                first.d_in,
                sum(l.d_out for l in chosen_inputs),
                first.count,
                first.active,
                "mlp",
                arch.blocks_of(first),
                rank_factor=len(chosen_inputs),
                fused=True,
                covers=tuple(chosen_inputs),
            )
        )
    for l in selected:
        if l in experts and l not in inputs:
            out.append(
                AdaptedLinear(
                    "experts." + ("down_proj" if l.name == "w2" else l.name),
                    l.d_in,
                    l.d_out,
                    l.count,
                    l.active,
                    "mlp",
                    arch.blocks_of(l),
                    fused=True,
                    covers=(l,),
                )
            )
        elif _is_router(arch, l):
            # the router's 2-D weight: one ParamWrapper "expert", W + B·A built per forward
            out.append(
                AdaptedLinear(
                    l.name,
                    l.d_in,
                    l.d_out,
                    1,
                    1,
                    l.role,
                    arch.blocks_of(l),
                    fused=True,
                    covers=(l,),
                )
            )
        elif l not in experts and l.name not in expert_names:
            out.append(
                AdaptedLinear(l.name, l.d_in, l.d_out, l.count, l.active, l.role, arch.blocks_of(l))
            )
    return tuple(out)


def _is_router(arch: ModelArch, l: LinearLayer) -> bool:
    """The MoE router (hidden -> experts), not a shared expert's scalar gate."""
    return l.is_router


def gradless_adapter_params(adapted: Iterable[AdaptedLinear], rank: int) -> int:
    """Adapter parameters on the sparse-attention indexer's linears (``"all-linear"`` reaches
    ``wq_b``, ``wk`` and ``weights_proj``, which are ``nn.Linear``): they exist and require
    grad, but the indexer runs under ``torch.no_grad`` (transformers 5.17
    ``DeepseekV32Indexer.forward``), so they never get a gradient nor optimizer states."""
    return sum(a.blocks * a.params(rank) for a in adapted if a.role == "indexer")


def adapter_params(adapted: Iterable[AdaptedLinear], rank: int) -> int:
    """Trainable LoRA parameters of the whole model (the adapters only):
    ``sum blocks * count * r * (d_in + d_out)`` over the adapted modules.

    Llama-2-7B, r=8 on q_proj and v_proj: ``32 * 2 * 8 * (4096 + 4096) = 4,194,304``.
    """
    return sum(a.blocks * a.params(rank) for a in adapted)


TRANSFORMERS_FRAMEWORKS = frozenset(
    {
        "generic",
        "hf-trainer",
        "hf-custom-loop",
        "hf-trainer-4",
        "unsloth",
        "trl-sft",
        "axolotl",
        "llama-factory",
        "ms-swift",
        "pytorch-loop",
        "pytorch-loop-4",
    }
)
"""Training libraries that build the model with transformers' own modeling code."""

ATTENTION_REFUSED = {
    "gpt_oss": frozenset({"sdpa"}),
    "bloom": frozenset({"sdpa", "flash"}),
    "llama4_text": frozenset({"flash"}),
    "deepseek_v32": frozenset({"flash"}),
    "glm_moe_dsa": frozenset({"flash"}),
    "deepseek_v4": frozenset({"sdpa", "flash"}),
}
"""Attention implementations transformers 5.17 refuses per family: ``PreTrainedModel``
defaults ``_supports_sdpa`` and ``_supports_flash_attn`` to False (``modeling_utils.py``
lines 1131-1132) and raises ``ValueError`` when asked for one ("does not support an attention
implementation through torch.nn.functional.scaled_dot_product_attention yet", line 1669;
"does not support Flash Attention 2 yet", line 1597, before it looks for the flash-attn
package); ``GptOssPreTrainedModel`` sets ``_supports_sdpa = False``, ``_supports_flash_attn =
True`` (``modeling_gpt_oss.py`` lines 386-387); ``BloomPreTrainedModel`` keeps both defaults;
``Llama4PreTrainedModel``, ``DeepseekV32PreTrainedModel`` and ``GlmMoeDsaPreTrainedModel``
set ``_supports_flash_attn = False`` (``modeling_llama4.py`` line 457,
``modeling_deepseek_v32.py`` line 679, ``modeling_glm_moe_dsa.py`` line 652);
``DeepseekV4PreTrainedModel`` sets both False (eager only: flash attention caps the head width
at 256, below its 512, and SDPA takes no sink logit)."""

ROUTER_MODULES_REFUSED = frozenset({"llama4_text"})
"""Families whose router is an ``nn.Linear`` subclass that returns a tuple:
``Llama4Router(nn.Linear).forward`` returns ``(router_scores, router_logits)``
(transformers 5.17 ``modeling_llama4.py`` lines 141-152). peft matches it as a linear
(by name, or as one of ``"all-linear"``) and its ``lora.Linear.forward`` adds the adapter's
output to that tuple, a ``TypeError`` at the first forward."""

MAMBA_OUT_PROJ_REFUSED = frozenset({"nemotron_h", "falcon_h1"})
"""Families whose Mamba-2 ``out_proj`` peft refuses to adapt: peft 0.21
``tuners/tuners_utils.py`` ``_check_lora_target_modules_mamba`` raises ``ValueError``
("Module 'out_proj' is incompatible with Mamba-based models") for a LoRA target named
``out_proj`` or ``conv1d`` on the model types ``falcon_h1``, ``mamba``, ``mamba2``,
``falcon_mamba`` and ``nemotron_h``, and ``"all-linear"`` expands to every linear's name,
``out_proj`` among them. (On a GPU the adapter would not run anyway: see
:func:`calc.activations.bypassed_adapter`.)"""

GROUPED_OUTPUT_REFUSED = frozenset({"deepseek_v4"})
"""Families whose grouped output projection peft adapts and then fails on:
``DeepseekV4GroupedLinear`` (transformers 5.17, ``o_a_proj``) is an ``nn.Linear`` subclass
whose forward applies its weight per group of heads, ``(..., groups, in) -> (..., groups,
out / groups)``; peft matches it (by name, or as one of ``"all-linear"``) and its
``lora.Linear.forward`` adds an adapter output of the full ``out`` width: a broadcast error at
the first step (traced by the oracle)."""


def library_rejections(
    arch: ModelArch, framework: str, attention: str, peft: bool, targets: object
) -> list[str]:
    """Warning codes for a setup the real libraries refuse (calc still estimates it):
    ``attention_refused_by_transformers`` (see :data:`ATTENTION_REFUSED`) and
    ``lora_router_refused_by_peft`` (see :data:`ROUTER_MODULES_REFUSED`) and
    ``lora_mamba_out_proj_refused_by_peft`` (see :data:`MAMBA_OUT_PROJ_REFUSED`), and
    ``lora_mamba_out_proj_skipped`` where peft takes that adapter but the fused Mamba-2 kernel
    never runs it (:func:`calc.activations.bypassed_adapter`: Granite 4.0 hybrids), and
    ``lora_grouped_output_refused_by_peft`` (see :data:`GROUPED_OUTPUT_REFUSED`)."""
    if framework not in TRANSFORMERS_FRAMEWORKS:
        return []
    out = []
    if attention in ATTENTION_REFUSED.get(arch.family, ()):
        out.append("attention_refused_by_transformers")
    if (
        peft
        and arch.family in ROUTER_MODULES_REFUSED
        and any(l.is_router for l in _selected(arch, targets))
    ):
        out.append("lora_router_refused_by_peft")
    if (
        peft
        and arch.family in MAMBA_OUT_PROJ_REFUSED
        and any(l.role == "mixer" and l.name == "out_proj" for l in _selected(arch, targets))
    ):
        out.append("lora_mamba_out_proj_refused_by_peft")
    elif (
        peft
        and arch.mamba is not None
        and any(l.role == "mixer" and l.name == "out_proj" for l in _selected(arch, targets))
    ):
        out.append("lora_mamba_out_proj_skipped")
    if (
        peft
        and arch.family in GROUPED_OUTPUT_REFUSED
        and any(l.name == "o_a_proj" for l in _selected(arch, targets))
    ):
        out.append("lora_grouped_output_refused_by_peft")
    return out
