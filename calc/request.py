"""The estimate request: validation of a plain dict into a frozen dataclass.

The key names and defaults are a public contract (CLI, browser, URL query):
add keys freely, rename none. Validation never guesses: unknown keys, wrong
types, non-positive or non-integer sizes and unknown enum values raise
:class:`~calc.errors.InputError` with a stable ``code`` and the ``field``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TypeVar

from .arch import ModelArch
from .errors import CalcError, ConfigError, InputError
from .frameworks import PROFILES, Framework, apply_profile
from .jsontypes import JsonObject


class Method(str, Enum):
    FULL = "full"
    LORA = "lora"
    QLORA = "qlora"


class Precision(str, Enum):
    """Lightning's names. ``bf16-true``: weights, grads and optimizer states in
    bf16. ``*-mixed``: fp32 master weights and fp32 optimizer states, 16-bit
    compute. ``fp32``: everything in fp32."""

    BF16_TRUE = "bf16-true"
    BF16_MIXED = "bf16-mixed"
    FP16_MIXED = "fp16-mixed"
    FP32 = "fp32"


class Optimizer(str, Enum):
    ADAMW = "adamw"
    ADAMW_8BIT = "adamw-8bit"
    PAGED_ADAMW = "paged-adamw"
    PAGED_ADAMW_8BIT = "paged-adamw-8bit"
    ADAFACTOR = "adafactor"
    SGD = "sgd"
    SGD_MOMENTUM = "sgd-momentum"


class Attention(str, Enum):
    SDPA = "sdpa"
    FLASH = "flash"
    EAGER = "eager"


class AdapterDtype(str, Enum):
    """dtype of the LoRA adapters: the base weights' (``base``) or ``fp32``."""

    BASE = "base"
    FP32 = "fp32"


class MoeExpertLayout(str, Enum):
    """How a MoE model stores its experts, which decides how peft adapts them (see
    :mod:`calc.lora`): one ``nn.Linear`` per expert matrix (transformers 4) or one 3-D
    tensor per expert stack adapted through peft's ``target_parameters`` (transformers 5)."""

    PER_EXPERT_MODULES = "per-expert-modules"
    FUSED_3D = "fused-3d"


class ModulesToSave(str, Enum):
    """Modules LoRA / QLoRA trains in full beside the adapters (peft ``modules_to_save``)."""

    NONE = "none"
    EMBED_TOKENS = "embed_tokens"
    LM_HEAD = "lm_head"
    EMBED_TOKENS_LM_HEAD = "embed_tokens+lm_head"
    EMBED_TOKENS_LM_HEAD_TIED = "embed_tokens+lm_head-tied"  # peft ensure_weight_tying=True


class Sharding(str, Enum):
    """FSDP FULL_SHARD = zero3, SHARD_GRAD_OP = zero2."""

    NONE = "none"
    DDP = "ddp"
    ZERO1 = "zero1"
    ZERO2 = "zero2"
    ZERO3 = "zero3"


class CpuOffload(str, Enum):
    NONE = "none"
    OPTIMIZER = "optimizer"
    OPTIMIZER_PARAMS = "optimizer+params"


# Upper bounds: beyond them a value is a typo, not a training run.
MAX_SEQ_LEN = 4_194_304  # 4M tokens, above the longest published context windows
MAX_MICRO_BATCH = 65_536
MAX_LORA_RANK = 65_536
MAX_GPUS = 65_536
MAX_ACCUMULATION = 65_536

# key -> (default, kind, extra); kind is "int", "bool", an Enum, or a special name.
# extra: an int field's maximum; a plan number's (minimum, maximum, minimum allowed) in calc.plan
FieldSpec = tuple[object, "str | type[Enum]", "int | tuple[float, float, bool] | None"]
E = TypeVar("E", bound=Enum)
ESTIMATE_FIELDS: dict[str, FieldSpec] = {
    "model": (None, "model", None),
    "method": ("lora", Method, None),
    "lora_rank": (16, "int", MAX_LORA_RANK),
    "lora_targets": ("all-linear", "targets", None),
    "qlora_double_quant": (True, "bool", None),
    "precision": ("bf16-true", Precision, None),
    "optimizer": ("adamw", Optimizer, None),
    "optimizer_in_backward": (False, "bool", None),
    "micro_batch_size": (1, "int", MAX_MICRO_BATCH),
    "seq_len": (2048, "int", MAX_SEQ_LEN),
    "gradient_checkpointing": (True, "bool", None),
    "attention": ("sdpa", Attention, None),
    "chunked_loss": (False, "bool", None),
    "activation_offload": (False, "bool", None),
    "num_gpus": (1, "int", MAX_GPUS),
    "sharding": ("none", Sharding, None),
    "cpu_offload": ("none", CpuOffload, None),
    "lora_dropout": (0.0, "fraction", None),
    "gradient_accumulation_steps": (1, "int", MAX_ACCUMULATION),
    "qlora_keeps_inputs": (False, "bool", None),
    "frozen_weight_grads": (False, "bool", None),
    "sync_each_micro_batch": (False, "bool", None),
    "qlora_unchunked_quantization": (False, "bool", None),
    "attention_keeps_fused_qkv": (False, "bool", None),
    "optimizer_fused": (False, "bool", None),
    "torch_compile": (False, "bool", None),
    "lora_adapter_dtype": ("base", AdapterDtype, None),
    "attention_grouped_kv": (False, "bool", None),
    "loss_outputs_kept": (False, "bool", None),
    "qlora_quant_state_replicated": (False, "bool", None),
    # a key a profile sets comes before "framework" (tests/calc/test_frameworks.py)
    "fsdp_wrap_floor": (False, "bool", None),
    "framework": ("generic", Framework, None),
    "moe_expert_layout": ("per-expert-modules", MoeExpertLayout, None),
    # a key no profile sets: before the profiled block that ends the list (tests/calc/test_frameworks.py)
    "lora_modules_to_save": ("none", ModulesToSave, None),
    "previous_outputs_kept": (False, "bool", None),
    "qlora_output_layer_quantized": (False, "bool", None),
    "qlora_dequant_fp16": (False, "bool", None),
    "fsdp_flat_parameters": (False, "bool", None),
    "logits_upcast_in_model": (False, "bool", None),
    "chunked_loss_keeps_fp32": (False, "bool", None),
}
"""Keys added after the first contract (all additive, defaults = modern behaviour):

- ``lora_dropout``: dropout on the adapter's input, ``0 <= p < 1``; peft's default
  ``LoraConfig.lora_dropout = 0.0``. Above 0 each adapter keeps its dropout output and
  mask for backward (:mod:`calc.activations`).
- ``gradient_accumulation_steps``: micro-batches per optimizer step. Above 1 the
  gradients of the earlier micro-batches stay alive through the forward and backward of
  the next ones; with FSDP / ZeRO-2/3 on several GPUs, accumulation under ``no_sync``
  keeps them unsharded (:func:`calc.states.accumulates_unsharded_gradients`).
- ``sync_each_micro_batch``: gradients are reduce-scattered after every micro-batch
  (accelerate ``GradientAccumulationPlugin(sync_each_batch=True)``, DeepSpeed ZeRO,
  torchtune's recipes); default False, accelerate's default, which uses ``no_sync``.
- ``qlora_keeps_inputs``: the 4-bit linears keep their input alive for backward, as
  bitsandbytes < 0.43.2 did (``MatMul4Bit.forward`` stored ``ctx.tensors = (A, B)``;
  removed by bitsandbytes PR #1270, July 2024). Default False: bitsandbytes >= 0.43.2
  and torchao's NF4 keep only the weight.
- ``frozen_weight_grads``: LoRA / QLoRA where gradient memory is allocated for the frozen
  weights of the decoder blocks too: PyTorch FSDP (v1) with ``use_orig_params=True`` and
  wrap units that mix frozen and trainable parameters, whose gradient memory the PyTorch
  FSDP docs (``FullyShardedDataParallel``, ``use_orig_params``) describe as that of an
  unfrozen model; torchtune's ``lora_fsdp_wrap_policy`` exists to avoid it. E.g. LitGPT's
  ``auto_wrap_policy={Block}``. Default False: FSDP2, or wrap policies that give the
  adapters their own units (torchtune ``lora_fsdp_wrap_policy``).
- ``qlora_unchunked_quantization``: the base weights are quantized to NF4 on the GPU in
  one pass per weight, as torchao before v0.2.0 did (``NF4Tensor.quantize_tensor_nearest``
  on the whole flattened weight); the blocks that pass frees stay in PyTorch's cache and
  set a floor under the reserved memory of the whole run
  (:func:`calc.memory.quantization_reserved_bytes`). Default False: torchao >= 0.2.0
  quantizes 1,048,576 elements at a time (torchao PR #196), and bitsandbytes quantizes
  in a CUDA kernel without full-size temporaries.
- ``attention_keeps_fused_qkv``: the attention keeps the whole output of a fused q/k/v
  projection alive until its backward, where every query head has its own k/v head.
  LitGPT (``CausalSelfAttention.forward``, 2023 through Sep 2024) reshapes the fused
  output into q, k, v; with one query per group the reshape of ``v`` is a view, and SDPA
  saves that view, which holds the whole fused tensor (:mod:`calc.activations`).
  Default False: separate q, k, v projections (Hugging Face, torchtune), or grouped
  k/v heads, whose expand-and-reshape makes copies.
- ``optimizer_fused``: torch's AdamW runs its fused kernel (``torch.optim.AdamW(...,
  fused=True)``; Hugging Face ``optim="adamw_torch_fused"``), which updates every tensor
  in place without the step's state-sized temporary
  (:func:`calc.states.optimizer_step_temp_bytes`). Default False: torch picks the
  multi-tensor (foreach) path on CUDA when neither flag is set. Only ``adamw`` has the
  choice; with another optimizer the key adds the warning ``optimizer_fused_ignored``.
- ``torch_compile``: the decoder blocks run under ``torch.compile``, whose backward
  recomputes part of the pointwise work instead of saving it. A fitted share
  (:data:`calc.activations.COMPILE_KEPT_FRACTION`) of what could be recomputed stays;
  less certain than the rest of the model (methodology page). Default False: eager.
- ``lora_adapter_dtype``: ``"fp32"`` keeps the LoRA / QLoRA adapters in fp32 when the base
  is 16-bit, as peft does by default (peft 0.21.0 ``get_peft_model(...,
  autocast_adapter_dtype=True)`` -> ``tuners_utils.cast_adapter_dtype`` upcasts bf16/fp16
  adapter weights to float32). The adapters, their gradients and optimizer states are then
  fp32 (4 bytes each), and each adapted linear casts its input to fp32 before ``lora_A``
  (``LoraLayer._cast_input_dtype(x, lora_A.weight.dtype)`` in ``peft/tuners/lora/layer.py``
  ``Linear.forward``), which ``lora_A`` saves for backward, with the fp32 rank
  intermediate (:mod:`calc.activations`). Default ``"base"``: adapters in the base
  weights' dtype (torchtune, LitGPT, peft with ``autocast_adapter_dtype=False``).
- ``attention_grouped_kv``: torch SDPA keeps grouped k/v at kv-head size and saves them so
  for backward: transformers 5.17 ``integrations/sdpa_attention.py`` passes
  ``enable_gqa=True`` instead of ``repeat_kv`` when ``use_gqa_in_sdpa`` holds (no attention
  mask, head_dim <= 256: causal training without padding). Default False: k/v expanded to
  every query head before SDPA (transformers before ``enable_gqa``, torchtune, LitGPT).
- ``loss_outputs_kept``: the training loop holds the model's output object through
  ``loss.backward()`` (``outputs = model(...); outputs.loss.backward()``), so the output
  layer's logits stay alive at the start of the loss backward. Default False: the loop
  keeps only the loss (Hugging Face ``Trainer.compute_loss`` returns the loss alone when
  ``return_outputs=False``, and ``training_step`` drops the rest).
- ``qlora_quant_state_replicated``: QLoRA under ZeRO-3 / FSDP on several GPUs keeps the
  quantization statistics of every 4-bit weight (absmax, and with double quantization its
  8-bit absmax and their fp32 scales) whole on every GPU: bitsandbytes keeps them in
  ``Params4bit.quant_state``, a plain attribute that FSDP and ZeRO-3 do not shard (they
  shard parameters; bitsandbytes PR #970, v0.43.0, FSDP-QLoRA). Only the packed 4-bit data
  is sharded (:func:`calc.memory.model_states`). Default False: torchao's ``NF4Tensor``
  shards its scalers with its data.
- ``framework``: the training library, a profile of the keys above
  (:mod:`calc.frameworks`): ``generic`` (default: no profile, every key at its own default,
  the behaviour before this key), ``hf-trainer``, ``hf-custom-loop``, ``torchtune``,
  ``litgpt``, ``unsloth``. The profile fills only keys the request leaves out.
- ``moe_expert_layout``: how MoE experts are stored, which decides what peft's LoRA does to
  them (:mod:`calc.lora`). ``"per-expert-modules"`` (default, today's behaviour): one
  ``nn.Linear`` per expert matrix, as in transformers 4, each with its own adapter.
  ``"fused-3d"``: the expert stacks are 3-D tensors (transformers 5.17 ``Qwen3MoeExperts``,
  ``MixtralExperts``), which peft 0.21 adapts through ``target_parameters``
  (``peft/utils/transformers_weight_conversion.py`` ``_convert_peft_config_moe``):
  ``gate_proj`` + ``up_proj`` become one ``gate_up_proj`` adapter of rank ``2r``, the router
  keeps an adapter of rank ``r`` (Qwen3-MoE, Mixtral; Qwen2-MoE is not converted: only its
  shared expert is adapted, :data:`calc.lora.CONVERTED_FAMILIES`), and each
  step builds ``W + B·A`` for every adapted expert stack, saved for backward
  (``peft/tuners/lora/layer.py`` ``ParamWrapper._activate_lora`` / ``_LoraFactorsProxy``).
  With QLoRA the 3-D experts also stay in 16 bits (:func:`calc.lora.as_stored_3d`:
  bitsandbytes quantises ``nn.Linear`` modules only).
  No effect on dense models, nor on gpt-oss / Llama 4, whose 3-D experts calc names directly.
- ``previous_outputs_kept``: the training loop holds the previous micro-batch's output
  (the logits) until the next forward returns, as LitGPT's ``finetune/*.py`` loops do
  (``logits = model(...)`` is rebound only after the call): during the forward the previous
  16-bit logits are still alive, and with ``qlora_keeps_inputs`` so are the inputs that
  bitsandbytes < 0.43.2 stored in ``MatMul4Bit``'s ``ctx.tensors``, a Python attribute of
  the backward node that ``backward()`` does not release (saved tensors it does release),
  reachable from the held logits through their autograd graph
  (:func:`calc.memory.previous_micro_batch_bytes`). Default False: the loop keeps only the
  loss, or a detached copy (Hugging Face ``Trainer.training_step``, torchtune).
- ``qlora_output_layer_quantized``: QLoRA stores the output layer in 4 bits too, as
  Lightning's ``BitsandbytesPrecision`` does (it replaces every ``torch.nn.Linear`` built
  under ``fabric.init_module``; LitGPT passes no ``ignore_modules``): its weight counts as
  NF4, its input is kept with ``qlora_keeps_inputs``, and its matmul dequantizes the whole
  ``vocab x hidden`` weight while every saved activation is alive. Only for an output
  layer not tied to the embedding. Default False: transformers 5.17 keeps the output
  embedding in 16 bits (``quantizers/base.py`` ``get_keys_to_not_convert``), torchtune
  quantizes block linears only.
- ``qlora_dequant_fp16``: the 4-bit weights were quantized from an fp16 copy (Lightning
  ``_Linear4bit.quantize``: ``weight.to(dtype=torch.half)``), so ``dequantize_4bit`` writes
  fp16 (its ``quant_state.dtype``) and ``MatMul4Bit`` casts it to the bf16 compute dtype
  (``.to(A.dtype)``): two weight-sized buffers for a moment (:data:`calc.memory.DEQUANT_BYTES`
  each). No effect with fp16 compute. Default False: transformers quantizes the weights in
  the dtype they were loaded in, the compute dtype.
- ``fsdp_flat_parameters``: FSDP (v1) keeps each wrapped unit's parameters in one flat
  parameter and hands the modules views of it made by ``torch.split`` then ``view``
  (torch ``distributed/fsdp/_flat_param.py`` ``_get_unflat_views_unaligned``; Lightning's
  ``FSDPStrategy`` sets ``use_orig_params=True``). In full fine-tuning the root unit's
  gradient (embedding, final norm, output layer) is built by ``split``'s backward only once
  every view's gradient exists, at the end of the backward: the output layer's gradient
  waits from the start of the backward, and the concatenated flat gradient is written while
  the per-view ones are alive (:func:`calc.memory.root_gradient_bytes`). Only with ZeRO-3 /
  FSDP on several GPUs. Default False: FSDP2 (``fully_shard``) shards each parameter on
  its own, DeepSpeed partitions gradients as they come.
- ``fsdp_wrap_floor``: the model is loaded on the CPU and wrapped by FSDP1
  (``FullyShardedDataParallel`` with ``device_id``, flat parameters, ``sync_module_states``),
  as Answer.AI's ``fsdp_qlora/train.py`` does. On several GPUs with a sharding other than
  ``none``, the reserved memory is at least what the wrapping leaves cached (the rank-0
  copies of one block's and of the root's parameters, their broadcast buckets and flat
  parameters, freed but kept by PyTorch's caching allocator) plus the all-gather stream's
  own blocks, and the step's allocator slack is FSDP1's
  (:func:`calc.memory.fsdp_wrap_reserved_bytes`, :data:`calc.memory.FSDP1_ALLOCATOR_SLACK_FRACTION`).
  Default False: no such floor, the generic slack.
- ``logits_upcast_in_model``: the model's forward returns fp32 logits (its last op is
  ``self.output(h).float()``: torchtune ``modules/transformer.py`` ``TransformerDecoder``
  from 86c23185f, 2024-01-10, on its unchunked path), so logits the loop keeps through the
  backward (``loss_outputs_kept``) are ``4 V`` bytes per token instead of the compute
  dtype's. Without ``loss_outputs_kept``, or with a chunked loss (16-bit chunks), it changes
  nothing: the 16-bit logits are freed by the upcast and the loss counts its fp32 tensors
  anyway. Default False: transformers 5.17 returns 16-bit logits and upcasts in the loss.
- ``chunked_loss_keeps_fp32``: the chunked loss upcasts each chunk to fp32 and, run eagerly
  (``torch_compile`` off), every chunk's ``log_softmax`` saves its fp32 output for backward:
  torchtune's ``CEWithChunkedOutputLoss`` (``modules/loss/ce_chunked_output_loss.py`` at
  30b8519e8, ``F.cross_entropy(logits.float(), ...)`` per chunk; its docstring says the
  gains come only with ``compile_loss``, which compiles that call). Default False: the
  chunked loss holds only the 16-bit logits (compiled, or a fused kernel).
- ``lora_modules_to_save``: LoRA / QLoRA also trains the embedding, the output layer or both
  in full (peft ``LoraConfig(modules_to_save=[...])``, axolotl ``lora_modules_to_save``),
  as runs that add chat tokens do. peft 0.21.0 ``utils/other.py`` ``ModulesToSaveWrapper``
  keeps the original module, frozen, and trains a ``copy.deepcopy`` of it in the module's own
  dtype (``cast_adapter_dtype`` upcasts only adapter layers): the table is held twice, and
  the copy has a gradient and optimizer states (:func:`calc.states.saved_module_params`).
  Tied embeddings are untied by the copy (``ensure_weight_tying`` off, its default).
  ``"embed_tokens+lm_head-tied"`` is both with ``LoraConfig(ensure_weight_tying=True)``: on a
  model whose tables are tied, peft 0.21.0 (``tuners/lora/model.py``
  ``_add_modules_to_save_to_tie``) copies the embedding alone and gives the output layer's
  wrapper a ``Linear`` whose weight is that copy (``ModulesToSaveWrapper.update(tied_module=
  ...)``): one trainable table, both gradients summed into it; on an untied model it is
  ``"embed_tokens+lm_head"`` (peft only warns). Default ``"none"``: adapters only.
"""


@dataclass(frozen=True)
class EstimateRequest:
    model: ModelArch
    model_id: str  # preset id, or "hf_config:<model_type>"
    method: Method = Method.LORA
    lora_rank: int = 16
    lora_targets: tuple[str, ...] | str = "all-linear"
    qlora_double_quant: bool = True
    precision: Precision = Precision.BF16_TRUE
    optimizer: Optimizer = Optimizer.ADAMW
    optimizer_in_backward: bool = False
    micro_batch_size: int = 1
    seq_len: int = 2048
    gradient_checkpointing: bool = True
    attention: Attention = Attention.SDPA
    chunked_loss: bool = False
    activation_offload: bool = False
    num_gpus: int = 1
    sharding: Sharding = Sharding.NONE
    cpu_offload: CpuOffload = CpuOffload.NONE
    lora_dropout: float = 0.0
    gradient_accumulation_steps: int = 1
    qlora_keeps_inputs: bool = False
    frozen_weight_grads: bool = False
    sync_each_micro_batch: bool = False
    qlora_unchunked_quantization: bool = False
    attention_keeps_fused_qkv: bool = False
    optimizer_fused: bool = False
    torch_compile: bool = False
    lora_adapter_dtype: AdapterDtype = AdapterDtype.BASE
    attention_grouped_kv: bool = False
    loss_outputs_kept: bool = False
    qlora_quant_state_replicated: bool = False
    framework: Framework = Framework.GENERIC
    moe_expert_layout: MoeExpertLayout = MoeExpertLayout.PER_EXPERT_MODULES
    previous_outputs_kept: bool = False
    qlora_output_layer_quantized: bool = False
    qlora_dequant_fp16: bool = False
    fsdp_flat_parameters: bool = False
    fsdp_wrap_floor: bool = False
    logits_upcast_in_model: bool = False
    chunked_loss_keeps_fp32: bool = False
    lora_modules_to_save: ModulesToSave = ModulesToSave.NONE
    # keys the framework profile filled (not part of the JSON form): a variant of this request
    # re-evaluates the conditional ones (calc.frameworks.reapplied)
    profile_keys: tuple[str, ...] = ()

    @property
    def is_peft(self) -> bool:
        return self.method is not Method.FULL

    def to_dict(self) -> JsonObject:
        """The request in its JSON form (model as its id)."""
        out = {}
        for key in ESTIMATE_FIELDS:
            value = getattr(self, key)
            if key == "model":
                value = self.model_id
            elif isinstance(value, Enum):
                value = value.value
            elif isinstance(value, tuple):
                value = list(value)
            out[key] = value
        return out


def int_range(maximum: int | None) -> JsonObject:
    """What :func:`check_int` accepts, for the error's ``extra`` (the form says it)."""
    out: JsonObject = {"integer": True, "minimum": 1}
    if maximum is not None:
        out["maximum"] = maximum
    return out


def check_int(field: str, value: object, maximum: int | None = None) -> int:
    """A positive integer, at most ``maximum``. Floats with no fraction are refused too:
    a size written as 2.0 is usually a slip."""
    valid = int_range(maximum)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError("not_integer", field, value, extra=valid)
    if value <= 0:
        raise InputError("not_positive", field, value, extra=valid)
    if maximum is not None and value > maximum:
        raise InputError("out_of_range", field, value, extra=valid)
    return value


def number_range(minimum: float, maximum: float | None, allow_equal_min: bool = True,
                 maximum_exclusive: bool = False) -> JsonObject:
    """What :func:`check_number` accepts, for the error's ``extra``."""
    out: JsonObject = {"minimum": minimum}
    if not allow_equal_min:
        out["minimum_exclusive"] = True
    if maximum is not None:
        out["maximum"] = maximum
        if maximum_exclusive:
            out["maximum_exclusive"] = True
    return out


def check_number(field: str, value: object, minimum: float = 0.0, maximum: float | None = None,
                 allow_equal_min: bool = True) -> float:
    """A finite real number in range (for prices, token counts, fractions)."""
    valid = number_range(minimum, maximum, allow_equal_min)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError("not_number", field, value, extra=valid)
    if value != value or value in (float("inf"), float("-inf")):
        raise InputError("not_number", field, value, extra=valid)
    if value < minimum or (not allow_equal_min and value == minimum):
        raise InputError("out_of_range", field, value, extra=valid)
    if maximum is not None and value > maximum:
        raise InputError("out_of_range", field, value, extra=valid)
    return value


def check_fraction(field: str, value: object) -> float:
    """A probability ``0 <= p < 1`` (a dropout rate of 1 drops everything)."""
    valid = number_range(0.0, 1.0, maximum_exclusive=True)
    try:
        value = check_number(field, value, 0.0, 1.0)
    except InputError as err:
        raise InputError(err.code, field, value, extra=valid) from None
    if value >= 1.0:
        raise InputError("out_of_range", field, value, extra=valid)
    return float(value)


def check_bool(field: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise InputError("not_boolean", field, value, extra={"allowed": [True, False]})
    return value


def check_enum(field: str, value: object, enum: type[E]) -> E:
    valid = {"allowed": [m.value for m in enum]}
    if not isinstance(value, str):
        raise InputError("wrong_type", field, value, extra=valid)
    try:
        return enum(value)
    except ValueError:
        raise InputError("unknown_value", field, value, extra=valid) from None


def _check_targets(value: object, arch: ModelArch) -> tuple[str, ...] | str:
    if value == "all-linear":
        return "all-linear"
    if isinstance(value, str):  # "q_proj,v_proj" as in the URL form
        value = [part.strip() for part in value.split(",") if part.strip()]
    valid = {"allowed": ["all-linear", *dict.fromkeys(arch.linear_names())]}
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise InputError("wrong_type", "lora_targets", value, extra=valid)
    known = set(arch.linear_names())
    for name in value:
        if name not in known:
            raise InputError("unknown_lora_target", "lora_targets", name, extra=valid)
    return tuple(dict.fromkeys(value))  # keep order, drop repeats


def resolve_model(value: object) -> tuple[ModelArch, str]:
    """A preset id, or ``{"hf_config": {...}}``."""
    from . import presets  # data is loaded lazily, on first use
    from .hf_config import arch_from_hf_config

    if isinstance(value, str):
        preset_id = presets.resolve_preset_id(value)  # a preset id or a Hugging Face id
        return presets.get_preset(preset_id), preset_id
    if isinstance(value, dict):
        extra = set(value) - {"hf_config", "name"}
        if extra:
            raise InputError("unknown_key", "model." + sorted(extra)[0], None)
        if "hf_config" not in value:
            raise InputError("missing_field", "model.hf_config", None)
        cfg = value["hf_config"]
        if isinstance(cfg, dict) and "model_type" in cfg and not isinstance(cfg["model_type"], str):
            raise ConfigError("config_invalid_value", "hf_config.model_type", cfg["model_type"])
        arch = arch_from_hf_config(cfg, value.get("name") if isinstance(value.get("name"), str) else None)
        return arch, "hf_config:" + arch.family
    raise InputError("wrong_type", "model", value)


def parse_fields(data: object, fields: dict[str, FieldSpec]) -> JsonObject:
    """Check the keys of ``data`` against ``fields`` and fill the defaults."""
    if not isinstance(data, dict):
        raise InputError("request_not_object", None, type(data).__name__)
    for key in data:
        if key not in fields:
            raise InputError("unknown_key", str(key), None)
    if "model" in fields and "model" not in data:
        raise InputError("missing_field", "model", None)
    return {key: data.get(key, spec[0]) for key, spec in fields.items()}


def parse_estimate_request(data: object, fields: dict[str, FieldSpec] | None = None) -> EstimateRequest:
    """Validate a request dict; ``fields`` lets a caller (the plan request) allow more keys,
    which it checks itself."""
    values = parse_fields(data, fields or ESTIMATE_FIELDS)
    framework = check_enum("framework", values["framework"], Framework)
    apply_profile(values, data, framework)
    arch, model_id = resolve_model(values["model"])
    kwargs: JsonObject = {"model": arch, "model_id": model_id}
    for key in ESTIMATE_FIELDS:
        if key != "model":
            kwargs[key] = check_estimate_field(key, values[key], arch)
    if kwargs["moe_expert_layout"] is MoeExpertLayout.FUSED_3D:
        from .lora import as_stored_3d  # experts as 3-D tensors: QLoRA leaves them in 16 bits

        kwargs["model"] = as_stored_3d(arch)
    kwargs["profile_keys"] = tuple(k for k in PROFILES[framework] if k not in data)  # type: ignore[operator]  # a dict: parse_fields checked it
    return EstimateRequest(**kwargs)


def check_estimate_field(key: str, value: object, arch: ModelArch | None) -> object:
    """One estimate field (not ``model``), checked on its own. ``arch`` is needed for
    ``lora_targets`` only (``None``: not checked against a model)."""
    _default, kind, extra = ESTIMATE_FIELDS[key]
    if kind == "int":
        assert not isinstance(extra, tuple), extra  # an int's extra is its maximum
        return check_int(key, value, extra)
    if kind == "bool":
        return check_bool(key, value)
    if kind == "fraction":
        return check_fraction(key, value)
    if kind == "targets":
        return _check_targets(value, arch) if arch is not None else value
    assert not isinstance(kind, str), kind  # every named kind is handled above
    return check_enum(key, value, kind)


def request_warnings(req: EstimateRequest) -> list[str]:
    """Codes for suspicious but valid input (the site translates them)."""
    out = []
    if req.seq_len > req.model.max_position_embeddings:
        out.append("seq_len_above_max_positions")
    if req.num_gpus == 1 and req.sharding in (Sharding.DDP, Sharding.ZERO1, Sharding.ZERO2, Sharding.ZERO3):
        out.append("sharding_on_single_gpu")
    if req.num_gpus > 1 and req.sharding is Sharding.NONE:
        out.append("multi_gpu_without_sharding")
    if req.method is Method.FULL and (req.lora_targets != "all-linear" or req.lora_dropout > 0
                                      or req.lora_modules_to_save is not ModulesToSave.NONE):
        out.append("lora_options_ignored")
    if req.method is Method.QLORA and req.precision in (Precision.FP32,):
        out.append("qlora_with_fp32")
    if req.cpu_offload is not CpuOffload.NONE and req.optimizer in (Optimizer.PAGED_ADAMW, Optimizer.PAGED_ADAMW_8BIT):
        out.append("paged_optimizer_with_cpu_offload")
    if req.optimizer_fused and req.optimizer is not Optimizer.ADAMW:
        out.append("optimizer_fused_ignored")
    return out


__all__ = [
    "AdapterDtype", "Attention", "CalcError", "CpuOffload", "ESTIMATE_FIELDS", "EstimateRequest", "Framework",
    "Method", "ModulesToSave",
    "Optimizer", "Precision", "Sharding", "parse_estimate_request", "request_warnings",
]
