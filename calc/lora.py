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
  counted here) and the shared expert of Qwen2-MoE loses its adapter: a documented
  difference, not modelled.
- Adapters on experts a token does not reach hold memory (parameters, gradients, optimizer
  states: ``count``) but cost no compute or activations (``active``).
"""

from __future__ import annotations

from dataclasses import dataclass

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

    def params(self, rank: int) -> int:
        """Adapter parameters of all ``count`` copies: ``count * r * (d_in + d_out)``."""
        return self.count * rank * (self.d_in + self.d_out)


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


def adapted_linears(arch: ModelArch, targets: object) -> tuple[AdaptedLinear, ...]:
    """The linear modules of one decoder block that get an adapter, in block order.

    ``targets`` is ``"all-linear"`` or a sequence of HF module names (see the module doc).
    Every decoder block is adapted the same way, so the model holds ``arch.num_layers``
    times these.
    """
    return tuple(AdaptedLinear(l.name, l.d_in, l.d_out, l.count, l.active, l.role,
                               arch.blocks_of(l)) for l in _selected(arch, targets))


def lora_params_per_layer(arch: ModelArch, rank: int, targets: object) -> int:
    """Trainable LoRA parameters in one decoder block: ``sum count * r * (d_in + d_out)``."""
    _check_rank(rank)
    return sum(a.params(rank) for a in adapted_linears(arch, targets))


def lora_trainable_params(arch: ModelArch, rank: int, targets: object = ALL_LINEAR) -> int:
    """Trainable LoRA parameters of the whole model: ``num_layers * sum count * r * (d_in + d_out)``.

    Llama-2-7B, r=8 on q_proj and v_proj: ``32 * 2 * 8 * (4096 + 4096) = 4,194,304``.
    """
    _check_rank(rank)
    return sum(a.blocks * a.params(rank) for a in adapted_linears(arch, targets))


def _check_rank(rank: object) -> None:
    if isinstance(rank, bool) or not isinstance(rank, int):
        raise InputError("not_integer", "lora_rank", rank)
    if rank <= 0:
        raise InputError("not_positive", "lora_rank", rank)
