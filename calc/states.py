"""Model states per GPU: weights, gradients and optimizer states, in bytes.

Byte counts per parameter follow the precision regime (:class:`Regime`), the
optimizer (:func:`optimizer_state_bytes`) and the sharding stage
(:func:`shard_divisors`). Sources:

- ZeRO (Rajbhandari et al. 2020, arXiv:1910.02054, sec. 3.1 and 5): mixed
  precision Adam holds 2 (16-bit weights) + 2 (16-bit grads) + 12 (fp32 master,
  momentum, variance) bytes per parameter; ZeRO-1 shards the 12, ZeRO-2 also the
  grads, ZeRO-3 also the weights.
- Hugging Face "Model training anatomy" (transformers docs, perf_train_gpu_one):
  PyTorch AMP keeps fp32 weights and fp32 gradients plus 16-bit copies for compute,
  18 bytes per parameter with AdamW.
- QLoRA (Dettmers et al. 2023, arXiv:2305.14314, sec. 3): NF4 with blocks of 64 and
  an fp32 absmax per block is 4.5 bits per weight; double quantization (8-bit absmax,
  one fp32 constant per 256 blocks) is ``4 + 8/64 + 32/(64*256)`` = 4.127 bits.
- 8-bit optimizers (Dettmers et al. 2022, arXiv:2110.02861, sec. 2): block-wise
  quantization with blocks of 2048 and one fp32 absmax per block.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .arch import ModelArch
from .checkpointing import Matmul, block_matmuls
from .request import (
    AdapterDtype,
    CpuOffload,
    EstimateRequest,
    Method,
    ModulesToSave,
    Optimizer,
    Precision,
    Sharding,
    ShardingEngine,
)

if TYPE_CHECKING:  # for annotations only: adapted() imports calc.lora when called
    from .lora import AdaptedLinear

NF4_BITS = 4 + 32 / 64
"""NF4 bits per weight without double quantization: 4-bit code + fp32 absmax per
64 weights (QLoRA, arXiv:2305.14314, sec. 3)."""

NF4_DOUBLE_QUANT_BITS = 4 + 8 / 64 + 32 / (64 * 256)
"""NF4 with double quantization: 8-bit absmax per 64 weights plus an fp32 constant
per 256 blocks, 4.127 bits (QLoRA, arXiv:2305.14314, sec. 3). torchao's NF4Tensor
(torchtune) uses the same block sizes (64 and 256)."""

OPT8_BLOCK = 2048
"""Block size of bitsandbytes' block-wise 8-bit optimizer states, one fp32 absmax per
block (Dettmers et al., arXiv:2110.02861, sec. 2.1)."""

FP32_BYTES = 4
BF16_BYTES = 2

ZERO_STAGES = (Sharding.ZERO1, Sharding.ZERO2, Sharding.ZERO3)


@dataclass(frozen=True)
class Regime:
    """Bytes per element of each kind of tensor under one precision setting.

    ``weight_bytes``: a parameter as stored; ``compute_bytes``: activations and the
    16-bit working copies of weights; ``grad_bytes``: a gradient; ``master_bytes``: a
    separate fp32 master copy (counted with the optimizer); ``state_bytes``: one element
    of a torch optimizer state (torch keeps states in the parameter's dtype);
    ``casts_weights``: autocast makes 16-bit working copies of fp32 weights; ``autocast``:
    the forward runs under ``torch.autocast`` (fp32 adapters' matmuls get 16-bit inputs).
    """

    name: str
    weight_bytes: int
    compute_bytes: int
    grad_bytes: int
    master_bytes: int
    state_bytes: int
    casts_weights: bool
    autocast: bool = False


def regime(precision: Precision, sharding: Sharding) -> Regime:
    """The byte sizes of one precision setting.

    - ``bf16-true``: weights, grads and states in bf16: 2 + 2 + 4 = 8 bytes/param with
      AdamW (torchtune, LitGPT ``bf16-true``).
    - ``*-mixed`` without ZeRO (none, ddp): PyTorch AMP. Parameters and their gradients
      are fp32 (a gradient has its parameter's dtype), states fp32, and autocast makes a
      16-bit copy of each weight for the matmuls: 4 + 4 + 8 (+2 copy) = 18 bytes/param
      (HF "model training anatomy").
    - ``*-mixed`` with ZeRO-1/2/3: DeepSpeed's scheme from the ZeRO paper: 16-bit
      weights and gradients, fp32 master copy with the optimizer: 2 + 2 + 4 + 8 = 16
      bytes/param. PyTorch FSDP with MixedPrecision holds fp32 shards of weights and
      grads instead (4 + 4 + 8 = 16 / N): the same per-GPU total under ZeRO-3.
    - ``fp32``: 4 + 4 + 8 = 16 bytes/param.
    """
    if precision is Precision.BF16_TRUE:
        return Regime("bf16-true", BF16_BYTES, BF16_BYTES, BF16_BYTES, 0, BF16_BYTES, False)
    if precision is Precision.FP32:
        return Regime("fp32", FP32_BYTES, FP32_BYTES, FP32_BYTES, 0, FP32_BYTES, False)
    if sharding in ZERO_STAGES:
        return Regime(
            "mixed-zero", BF16_BYTES, BF16_BYTES, BF16_BYTES, FP32_BYTES, FP32_BYTES, False
        )
    return Regime("mixed-amp", FP32_BYTES, BF16_BYTES, FP32_BYTES, 0, FP32_BYTES, True, True)


MIXED_16BIT_WEIGHTS = Regime(
    "mixed-16bit-weights", BF16_BYTES, BF16_BYTES, BF16_BYTES, 0, BF16_BYTES, False, True
)
"""``*-mixed`` on weights loaded in 16 bits (``weights_loaded_16bit``): autocast only. Every
weight, its gradient and torch's optimizer states in the weights' 16 bits (torch AdamW's
``exp_avg`` / ``exp_avg_sq`` are ``torch.zeros_like(p)``), no working copy (autocast's
``cached_cast`` copies only fp32 weights; a 16-bit weight already has the 16-bit dtype),
activations and residual stream in 16 bits. fp32 LoRA adapters get their own regime from
:func:`adapter_regime`."""


MIXED_OTHER_16BIT_WEIGHTS = Regime(
    "mixed-other-16bit-weights", BF16_BYTES, BF16_BYTES, BF16_BYTES, 0, BF16_BYTES, True, True
)
"""``*-mixed`` on 16-bit weights of the other 16-bit type than autocast's
(``weights_loaded_other_16bit``: an fp16 checkpoint under ``bf16-mixed``, or bf16 weights under
``fp16-mixed``). The weights, their gradients and torch's AdamW states keep the weights' 2 bytes,
but autocast casts every weight at each matmul (``cached_cast`` casts what is not its own dtype)
as it casts fp32 weights, and the matmuls' outputs added to the residual stream of the weights'
dtype promote it to fp32: the working copies and the fp32 residual stream of AMP on fp32 weights
(``casts_weights``), on 2-byte weights."""


KBIT_FP32 = Regime("kbit-fp32", FP32_BYTES, FP32_BYTES, FP32_BYTES, 0, FP32_BYTES, False)
"""QLoRA after peft's ``prepare_model_for_kbit_training`` without autocast
(``qlora_prepare_kbit``): every parameter that is not 4-bit, its gradient, states and every
activation in fp32; the 4-bit matmuls still dequantize to the bf16 compute dtype
(:data:`calc.memory.DEQUANT_BYTES`)."""


def request_regime(req: EstimateRequest, sharding: Sharding | None = None) -> Regime:
    """The byte sizes of one request (on ``sharding``, default the request's own: a plan
    weighs other shardings of the same request): :func:`regime` of its precision, except QLoRA
    prepared by peft's ``prepare_model_for_kbit_training`` on a bf16 model
    (``qlora_prepare_kbit`` with ``bf16-true``): :data:`KBIT_FP32`.

    peft 0.21.0 ``utils/other.py`` ``prepare_model_for_kbit_training`` casts each fp16 / bf16
    parameter whose class is not ``Params4bit`` to fp32. Per block, as the code then runs
    (transformers 5.17 ``modeling_llama.py``, bitsandbytes 0.49.2 ``nn/modules.py``):

    - the embedding (fp32 table) writes the fp32 residual stream, and RoPE's cos / sin follow
      it (``LlamaRotaryEmbedding.forward``: ``cos.to(dtype=x.dtype)``);
    - ``LlamaRMSNorm.forward`` upcasts (a no-op), scales and returns ``self.weight *
      hidden_states.to(input_dtype)``: fp32 weight times fp32, an fp32 output;
    - each ``Linear4bit.forward`` casts its input to the compute dtype (bf16, ``x.to(
      self.compute_dtype)``, saved by nothing: ``MatMul4Bit`` keeps no input), multiplies with
      the bf16 dequantized weight and returns ``out.to(inp_dtype)``: q, k, v, the attention
      output, gate, up and down projections are fp32, and so is what SDPA, the activation and
      the LoRA adapters (fp32, their input already fp32: no cast copy) save;
    - the output layer (fp32 weight) writes fp32 logits, whose ``logits.float()`` in the loss
      is a no-op.

    What stays 16-bit: the dequantized weight and the gradients around each 4-bit matmul.
    Under ``*-mixed`` precision calc's regime already holds the non-quantized parameters in
    fp32 (and counts the 4-bit linears' fp32 outputs that autocast leaves in the MLP,
    :func:`calc.activations.mlp_unit_bytes`), and under ``fp32`` everything: the key changes
    neither. Checked against the
    oracle's trace of that function (tools/oracle, ``*/qlora-prepare-kbit*``).

    ``*-mixed`` precision without ZeRO on weights the library loaded in 16 bits
    (``weights_loaded_16bit``): :data:`MIXED_16BIT_WEIGHTS`, unless peft's
    ``prepare_model_for_kbit_training`` casts the non-quantized weights to fp32 first
    (``qlora_prepare_kbit``: the fp32 regime of AMP again); on weights of the other 16-bit type
    than autocast's (``weights_loaded_other_16bit``), :data:`MIXED_OTHER_16BIT_WEIGHTS`."""
    reg = regime(req.precision, req.sharding if sharding is None else sharding)
    if (
        reg.casts_weights
        and req.weights_loaded_16bit
        and not (req.method is Method.QLORA and req.qlora_prepare_kbit)
    ):
        return MIXED_OTHER_16BIT_WEIGHTS if req.weights_loaded_other_16bit else MIXED_16BIT_WEIGHTS
    if (
        req.method is Method.QLORA
        and req.qlora_prepare_kbit
        and req.precision is Precision.BF16_TRUE
    ):
        return KBIT_FP32
    return reg


RECAST_BF16 = Regime("kbit-recast-bf16", BF16_BYTES, BF16_BYTES, BF16_BYTES, 0, BF16_BYTES, False)
"""The embedding and output layer that TRL casts back to bf16 after peft's
``prepare_model_for_kbit_training`` (``qlora_embeddings_recast_bf16``, :func:`embeddings_recast`):
the weights 2 bytes, their gradients in the weights' dtype, torch's AdamW states
(``torch.zeros_like(p)``) 2 bytes each, no master copy."""

_RECAST_NAMES_MISSED = frozenset({"gpt_neox"})
"""Families whose embedding and output layer none of TRL's names (``lm_head``, ``embed_tokens``,
``wte``, ``wpe``) matches: transformers' ``GPTNeoXModel.embed_in`` and
``GPTNeoXForCausalLM.embed_out`` (``models/gpt_neox/modeling_gpt_neox.py``). BLOOM's and
Falcon's embedding (``word_embeddings``) is not matched either, but their output layer
``lm_head`` is, and shares the table (tied) in the models calc knows."""


def embeddings_recast(req: EstimateRequest, reg: Regime) -> bool:
    """Whether the embedding and output layer are back in bf16 after kbit preparation
    (``qlora_embeddings_recast_bf16``): QLoRA prepared by ``prepare_model_for_kbit_training``
    (``qlora_prepare_kbit``), whose non-quantized parameters are fp32 then: without autocast
    (:data:`KBIT_FP32`, ``bf16-true``) or under it (``*-mixed`` without ZeRO, whose regime holds
    them in fp32 with 16-bit working copies). TRL's ``SFTTrainer`` runs the cast under its
    ``bf16`` flag, the Trainer's autocast (TRL 0.12.1 ``sft_trainer.py``: ``if args.bf16 and
    getattr(model, "is_loaded_in_4bit", False) and not is_sharded_qlora:
    peft_module_casting_to_bf16(model)``), so ``bf16-mixed`` is its usual reading. And only
    where TRL's names reach them (not :data:`_RECAST_NAMES_MISSED`: then neither the tables,
    nor their ``lora_modules_to_save`` copies, nor the logits the output layer writes are
    16-bit)."""
    prepared = reg is KBIT_FP32 or (
        reg.casts_weights and req.method is Method.QLORA and req.qlora_prepare_kbit
    )
    return (
        req.qlora_embeddings_recast_bf16
        and prepared
        and req.model.family not in _RECAST_NAMES_MISSED
    )


def recast_params(req: EstimateRequest, reg: Regime) -> int:
    """Base parameters (not the ``lora_modules_to_save`` copies, which :func:`saved_regime`
    covers) that ``peft_module_casting_to_bf16`` casts back to bf16 (TRL 0.12.1
    ``trainer/utils.py``): every module whose name contains ``lm_head``, ``embed_tokens``,
    ``wte`` or ``wpe`` and whose weight is fp32 (all of them after kbit preparation), i.e.
    the token table (with GPT-2's position table and the per-layer tables, whose names
    contain ``embed_tokens``) and the untied output layer with its bias. A norm of the
    embedding (BLOOM's ``word_embeddings_layernorm``) matches ``"norm"`` first and stays
    fp32. 0 when the key is off or outside :data:`KBIT_FP32`."""
    if not embeddings_recast(req, reg):
        return 0
    arch = req.model
    table = arch.embedding_params - (arch.norm_params if arch.embedding_norm else 0)
    return table + arch.lm_head_params


def saved_regime(req: EstimateRequest, reg: Regime) -> Regime:
    """The byte sizes of the ``lora_modules_to_save`` copies: ``reg`` (peft's copy keeps the
    module's dtype, :func:`saved_module_params`), or :data:`RECAST_BF16` where TRL casts the
    embedding and output layer back to bf16 (:func:`embeddings_recast`): TRL 0.12.1
    ``peft_module_casting_to_bf16`` runs after ``get_peft_model`` over ``named_modules()``,
    where the wrapper's original and its trainable copy (``...embed_tokens.original_module``,
    ``...embed_tokens.modules_to_save.default``) both carry the module's name."""
    return RECAST_BF16 if embeddings_recast(req, reg) else reg


def adapter_regime(req: EstimateRequest, reg: Regime) -> Regime:
    """The byte sizes of the trainable parameters: ``reg`` itself, except LoRA / QLoRA with
    ``lora_adapter_dtype="fp32"`` on a 16-bit base, where peft 0.21.0 upcasts the adapters
    to float32 (``get_peft_model(..., autocast_adapter_dtype=True)``, the default, ->
    ``tuners_utils.cast_adapter_dtype``: bf16 and fp16 adapter weights become float32).
    Their gradients have their dtype and torch's optimizer states follow the parameter:
    4 bytes each, no separate master copy. After ``prepare_model_for_kbit_training``
    (:data:`KBIT_FP32`) with ``"base"`` (``autocast_adapter_dtype=False``) the adapters keep
    the bf16 that peft gives an adapter on a 4-bit layer, its compute dtype, on fp32
    activations: 2 bytes each, and each adapted linear casts its fp32 input to bf16 for
    ``lora_A`` (:func:`calc.activations.lora_input_copy_bytes`)."""
    if reg is KBIT_FP32 and req.lora_adapter_dtype is AdapterDtype.BASE:
        # peft gives adapters on a 4-bit layer its bf16 compute dtype
        # (BaseTunerLayer._get_base_layer_device_and_dtype), and no upcast follows
        return Regime(
            reg.name + "+bf16-adapters",
            BF16_BYTES,
            reg.compute_bytes,
            BF16_BYTES,
            0,
            BF16_BYTES,
            False,
        )
    if (
        not req.is_peft
        or req.lora_adapter_dtype is not AdapterDtype.FP32
        or reg.weight_bytes >= FP32_BYTES
    ):
        return reg
    return Regime(
        reg.name + "+fp32-adapters",
        FP32_BYTES,
        reg.compute_bytes,
        FP32_BYTES,
        0,
        FP32_BYTES,
        reg.casts_weights,
        reg.autocast,
    )


# ---- which parameters exist and which train ------------------------------------------


@dataclass(frozen=True)
class ParamLayout:
    """Parameter counts of one request.

    ``quantized``: weights stored in NF4 (QLoRA's block linears); ``dense``: every other
    base parameter (16/32-bit); ``trainable``: what the optimizer updates (all base
    parameters for full fine-tuning, the adapters for LoRA/QLoRA; neither the parameters of a
    sparse-attention indexer nor adapters on them, which never get a gradient:
    ``ModelArch.no_grad_params``); ``adapter``: LoRA parameters held (0 for full fine-tuning). ``tensors``: shapes ``(rows, cols)`` of the
    trainable tensors (cols = 1 for vectors), for Adafactor and per-tensor buffers.
    """

    total: int
    quantized: int
    dense: int
    trainable: int
    adapter: int
    largest_trainable_tensor: int
    tensors: tuple[tuple[int, int, int], ...]  # (rows, cols, copies)
    saved: int = 0  # trainable copies of modules_to_save (in trainable and dense, not in adapter)
    saved_tensors: tuple[tuple[int, int, int], ...] = ()


def saved_module_params(req: EstimateRequest) -> tuple[int, int]:
    """Parameters of the trainable copies peft makes for ``lora_modules_to_save``:
    (embedding, output layer).

    peft 0.21.0 ``utils/other.py`` ``ModulesToSaveWrapper.update`` builds
    ``copy.deepcopy(self.original_module)`` and freezes the original
    (``self.original_module.requires_grad_(False)``): the module is held twice, the copy
    trainable. ``cast_adapter_dtype`` (``tuners/tuners_utils.py``) upcasts only the layers
    of a ``BaseTunerLayer``, which the wrapper is not, so the copy keeps the module's dtype.
    Tied to the embedding, the output layer's copy is a copy of the shared table, and the
    embedding's copy no longer feeds the output layer: ``ensure_weight_tying`` (off by
    default) is what would tie the two copies. Each copy is ``vocab x hidden`` (the output
    layer's bias, where a model has one, with it). 0, 0 without the key or for full
    fine-tuning."""
    which = req.lora_modules_to_save
    if not req.is_peft or which is ModulesToSave.NONE:
        return 0, 0
    arch = req.model
    table = arch.vocab_size * arch.hidden_size
    embed = table if which is not ModulesToSave.LM_HEAD else 0
    head = _output_layer_copy_params(arch) if which is not ModulesToSave.EMBED_TOKENS else 0
    if saved_copy_tied(req):
        head = 0  # the output layer's wrapper holds the embedding copy itself
    return embed, head


def saved_copy_tied(req: EstimateRequest) -> bool:
    """``"embed_tokens+lm_head-tied"`` on a model whose tables are tied: one trainable copy
    that the embedding and the output layer share (peft ``ensure_weight_tying=True``)."""
    return (
        req.is_peft
        and req.lora_modules_to_save is ModulesToSave.EMBED_TOKENS_LM_HEAD_TIED
        and req.model.tie_word_embeddings
    )


def trained_output_layer_params(req: EstimateRequest) -> int:
    """Weights of the output layer that train under ``lora_modules_to_save`` (its own copy, or
    the shared one when tied): what its weight gradient, its saved input and its cast are
    counted on."""
    if not req.is_peft or req.lora_modules_to_save in (
        ModulesToSave.NONE,
        ModulesToSave.EMBED_TOKENS,
    ):
        return 0
    return _output_layer_copy_params(req.model)


def _output_layer_copy_params(arch: ModelArch) -> int:
    """A copy of the output layer: ``vocab x hidden``, with its bias where the model has one
    (``lm_head_params`` is 0 on a tied model, whose copy is of the shared table)."""
    return max(arch.lm_head_params, arch.vocab_size * arch.hidden_size)


def trainer_32bit_embedding_params(req: EstimateRequest) -> int:
    """Parameters of the embedding copy that bitsandbytes' 8-bit optimizers keep 32-bit states
    for under the Hugging Face Trainer: transformers 5.17 ``trainer.py`` ``create_optimizer``
    registers ``GlobalOptimManager.register_module_override(module, "weight", {"optim_bits":
    32})`` for every ``nn.Embedding`` when the optimizer is a bitsandbytes one with
    ``optim_bits=8`` (``trainer_optimizer.py``: ``adamw_bnb_8bit``, ``paged_adamw_8bit``).
    Only the profiles whose loop is the Trainer (:data:`calc.frameworks.HF_TRAINER_SUBCLASSES`; the override is in transformers 4 too), only for the trainable embedding copy of
    ``lora_modules_to_save`` (full fine-tuning's embedding is left as before)."""
    from .frameworks import HF_TRAINER_SUBCLASSES

    if req.framework not in HF_TRAINER_SUBCLASSES or req.optimizer not in (
        Optimizer.ADAMW_8BIT,
        Optimizer.PAGED_ADAMW_8BIT,
    ):
        return 0
    return saved_module_params(req)[0]


def saved_part(layout: ParamLayout) -> tuple[ParamLayout, ParamLayout]:
    """``layout`` split into (adapters or full weights, modules_to_save copies): the two
    train in different dtypes when the adapters are fp32 (:func:`adapter_regime`)."""
    main_tensors = layout.tensors[: len(layout.tensors) - len(layout.saved_tensors)]
    main = ParamLayout(
        layout.total,
        layout.quantized,
        layout.dense,
        layout.trainable - layout.saved,
        layout.adapter,
        max((r * c for r, c, _ in main_tensors), default=0),
        main_tensors,
    )
    saved = ParamLayout(
        layout.total,
        layout.quantized,
        layout.dense,
        layout.saved,
        0,
        max((r * c for r, c, _ in layout.saved_tensors), default=0),
        layout.saved_tensors,
        layout.saved,
        layout.saved_tensors,
    )
    return main, saved


def adapted(req: EstimateRequest) -> tuple[AdaptedLinear, ...]:
    """The adapted linears of one block (empty for full fine-tuning)."""
    if req.method is Method.FULL:
        return ()
    from .lora import adapted_linears

    return adapted_linears(req.model, req.lora_targets, req.moe_expert_layout.value)


def selective_op_matmuls(req: EstimateRequest) -> tuple[Matmul, ...]:
    """The block's matmuls as torchtitan's per-op checkpoint policy sees them for this
    request, its adapters' included (:func:`calc.checkpointing.block_matmuls`): what the
    memory counts as kept and the time as recomputed."""
    names = frozenset(a.name for a in adapted(req))
    return block_matmuls(req.model, names, req.lora_rank)


def quantized_weight_params(arch: ModelArch) -> int:
    """Weights of the block linears QLoRA stores in NF4 (biases stay 16-bit), less those a
    checkpoint's skip list keeps in 16 bits (:meth:`calc.arch.ModelArch.quantized_blocks`),
    which count with the other dense weights."""
    return sum(arch.quantized_blocks(l) * l.count * l.weight_params for l in arch.linears)


def output_layer_quantized_params(req: EstimateRequest) -> int:
    """The output layer's weight when QLoRA stores it in NF4 too
    (``qlora_output_layer_quantized``: Lightning's ``BitsandbytesPrecision`` replaces every
    ``torch.nn.Linear``), ``vocab x hidden``; 0 when tied to the embedding (an
    ``nn.Embedding``, which no 4-bit layer replaces) or without QLoRA."""
    arch = req.model
    if (
        req.method is not Method.QLORA
        or not req.qlora_output_layer_quantized
        or arch.tie_word_embeddings
    ):
        return 0
    return arch.vocab_size * arch.hidden_size


def _full_tensors(arch: ModelArch) -> tuple[tuple[int, int, int], ...]:
    """Every parameter tensor as (rows, cols, copies): matrices, then vectors."""
    out = [(arch.vocab_size, arch.hidden_size, 1)]
    if arch.lm_head_params >= arch.vocab_size * arch.hidden_size:
        out.append((arch.vocab_size, arch.hidden_size, 1))
    for lin in arch.linears:
        if lin.role == "indexer":
            continue  # never gets a gradient (ModelArch.no_grad_params)
        out.append((lin.d_out, lin.d_in, arch.blocks_of(lin) * lin.count))
        if lin.bias:
            out.append((lin.d_out, 1, arch.blocks_of(lin) * lin.count))
    matrices = sum(r * c * n for r, c, n in out if c > 1)
    biases = sum(r * n for r, c, n in out if c == 1)
    # norms, positions, small extras (the indexers' key norms get no gradient either)
    rest = arch.params_total - arch.no_grad_params - matrices - biases
    if rest > 0:
        out.append((rest, 1, 1))
    return tuple(out)


def param_layout(req: EstimateRequest) -> ParamLayout:
    """Count quantized, dense and trainable parameters for the request's method."""
    arch = req.model
    total = arch.params_total
    quantized = quantized_weight_params(arch) if req.method is Method.QLORA else 0
    if quantized:
        quantized += output_layer_quantized_params(req)
    if req.method is Method.FULL:
        full = _full_tensors(arch)
        largest = max(r * c for r, c, _ in full)
        return ParamLayout(total, 0, total, total - arch.no_grad_params, 0, largest, full)
    rank = req.lora_rank
    tensors: list[tuple[int, int, int]] = []
    from .lora import adapter_params, gradless_adapter_params

    lins = adapted(req)
    for lin in lins:
        if lin.role == "indexer":
            continue  # held, never trained (gradless_adapter_params)
        copies = lin.blocks * lin.count
        r = rank * lin.rank_factor
        tensors.append((r, lin.d_in, copies))  # A: r x d_in
        tensors.append((lin.d_out, r, copies))  # B: d_out x r
    adapter = adapter_params(lins, rank)
    embed, head = saved_module_params(req)
    saved_tensors = tuple((n // arch.hidden_size, arch.hidden_size, 1) for n in (embed, head) if n)
    tensors.extend(saved_tensors)
    largest = max((r * c for r, c, _ in tensors), default=0)
    saved = embed + head
    return ParamLayout(
        total + saved,
        quantized,
        total + saved - quantized,
        adapter - gradless_adapter_params(lins, rank) + saved,
        adapter,
        largest,
        tuple(tensors),
        saved,
        saved_tensors,
    )


# ---- bytes per parameter -----------------------------------------------------------------


def quantized_bytes(params: int, double_quant: bool) -> int:
    """NF4 storage: ``params * bits / 8`` bytes (4.127 bits with double quantization,
    4.5 without; QLoRA sec. 3)."""
    bits = NF4_DOUBLE_QUANT_BITS if double_quant else NF4_BITS
    return int(params * bits / 8)


def optimizer_state_bytes(req: EstimateRequest, layout: ParamLayout, reg: Regime) -> int:
    """Optimizer state bytes for all trainable parameters (unsharded).

    - AdamW (torch): 2 states (m, v) in the parameter dtype: ``2 * state_bytes * P``.
    - paged AdamW (bitsandbytes, 32-bit): 2 fp32 states, ``8 * P`` whatever the
      parameter dtype (bnb allocates 32-bit states as float32).
    - 8-bit AdamW (paged or not): 2 one-byte states plus an fp32 absmax per 2048 values:
      ``2 * (1 + 4/2048) * P`` (arXiv:2110.02861).
    - Adafactor (Shazeer & Stern 2018, arXiv:1804.04235, sec. 3; HF default beta1=None):
      no first moment; the second moment of a ``rows x cols`` matrix is factored into
      ``rows + cols`` fp32 values (HF upcasts grads to fp32), a vector keeps one per value.
    - SGD: none; SGD with momentum: one state in the parameter dtype.
    """
    p = layout.trainable
    opt = req.optimizer
    if opt is Optimizer.ADAMW:
        return 2 * reg.state_bytes * p
    if opt is Optimizer.PAGED_ADAMW:
        return 2 * FP32_BYTES * p
    if opt in (Optimizer.ADAMW_8BIT, Optimizer.PAGED_ADAMW_8BIT):
        wide = trainer_32bit_embedding_params(req) if layout.saved else 0
        p -= wide
        return 2 * p + 2 * FP32_BYTES * -(-p // OPT8_BLOCK) + 2 * FP32_BYTES * wide
    if opt is Optimizer.ADAFACTOR:
        values = sum(((r + c) if c > 1 else r) * n for r, c, n in layout.tensors)
        return FP32_BYTES * values
    if opt is Optimizer.SGD_MOMENTUM:
        return reg.state_bytes * p
    return 0


def is_paged(opt: Optimizer) -> bool:
    """Paged optimizers (bitsandbytes) allocate states in CUDA unified memory, outside
    PyTorch's caching allocator: they are not in ``max_memory_allocated`` and the driver
    evicts them to host RAM under pressure (bitsandbytes docs, "Paged optimizers")."""
    return opt in (Optimizer.PAGED_ADAMW, Optimizer.PAGED_ADAMW_8BIT)


def optimizer_step_temp_bytes(req: EstimateRequest, layout: ParamLayout, reg: Regime) -> int:
    """Temporaries of the optimizer step.

    torch AdamW's default multi-tensor (foreach) path (torch 2.13.0 ``torch/optim/adam.py``
    ``_multi_tensor_adam``, the same lines in 2.5.1): every ``torch._foreach_*`` op on the
    states and gradients is in place (``_foreach_lerp_``, ``_foreach_mul_``,
    ``_foreach_addcmul_``, ``_foreach_addcdiv_``); decoupled weight decay multiplies the
    parameters in place. The one list it allocates is ``exp_avg_sq_sqrt =
    torch._foreach_sqrt(device_exp_avg_sqs)``: a copy of every second moment of the group at
    once, in the state's dtype, ``state_bytes * P``. It is made per (device, dtype) group of
    a parameter group (``Optimizer._group_tensors_by_device_and_dtype``) and bound to a local
    name, so the previous group's list is alive while the next one is allocated (fp32
    adapters and 16-bit ``modules_to_save`` copies: both, the caller adds them), and freed
    when ``adam()`` returns for the parameter group. Gradient clipping
    (``clip_grad_norm_``, ``_foreach_norm``) keeps one scalar per tensor. Its fused path
    (``optimizer_fused``; ``_fused_adamw`` -> ``torch._fused_adamw_``) updates weights and
    states in place inside one kernel: none.
    bitsandbytes updates tensor by tensor: the largest tensor's size.
    Adafactor (HF) works per tensor in fp32: about two fp32 copies of the largest tensor.
    """
    opt = req.optimizer
    if opt is Optimizer.ADAMW:
        return 0 if req.optimizer_fused else reg.state_bytes * layout.trainable
    if opt is Optimizer.ADAFACTOR:
        return 2 * FP32_BYTES * layout.largest_trainable_tensor
    if opt in (Optimizer.SGD, Optimizer.SGD_MOMENTUM):
        return 0
    return FP32_BYTES * layout.largest_trainable_tensor


DEEPSPEED_SUB_GROUP_SIZE = 10**9
"""DeepSpeed 0.16.5 ``runtime/zero/config.py``: ``sub_group_size`` defaults to 1e9 elements
(the value the Hugging Face examples' and Qwen's ``ds_config_zero3.json`` write too)."""


def deepspeed_zero(req: EstimateRequest) -> bool:
    """ZeRO-1/2/3 run by DeepSpeed (``sharding_engine="deepspeed"``)."""
    return req.sharding_engine is ShardingEngine.DEEPSPEED and req.sharding in ZERO_STAGES


def deepspeed_offload_swaps_optimizer(req: EstimateRequest) -> bool:
    """DeepSpeed's ZeRO with CPU offload and an optimizer other than AdamW: accelerate hands
    DeepSpeed a ``DeepSpeedCPUAdam`` in its place (accelerate 1.14 ``utils/deepspeed.py``
    ``map_pytorch_optim_to_deepspeed``: Adam's class for any torch or bitsandbytes optimizer,
    Adagrad and 32-bit Lion aside; DeepSpeed refuses any other with
    ``zero_force_ds_cpu_optimizer``), so the host holds and steps Adam's two fp32 states."""
    return (
        deepspeed_zero(req)
        and req.cpu_offload is not CpuOffload.NONE
        and req.optimizer is not Optimizer.ADAMW
    )


def grad_partition_held(req: EstimateRequest) -> bool:
    """DeepSpeed's ZeRO-3 gradient partition lives from the optimizer's set-up on, not from the
    first backward: DeepSpeed 0.16.5 ``runtime/zero/stage3.py``
    ``DeepSpeedZeroOptimizer_Stage3._setup_for_real_optimizer`` allocates
    ``grad_partitions_flat_buffer = torch.zeros(sum(p.partition_numel() ...),
    dtype=self.gradient_accumulation_dtype, device=self.device)`` once, beside the reduce bucket
    (:func:`deepspeed_reduce_bucket_bytes`); its dtype is the model's under ZeRO
    (``runtime/engine.py`` ``get_data_types``: fp32 only for bf16 without ZeRO). With the
    optimizer offloaded ``self.device`` is the CPU: not on the GPU then."""
    return (
        deepspeed_zero(req)
        and req.sharding is Sharding.ZERO3
        and req.cpu_offload is CpuOffload.NONE
        and not req.optimizer_in_backward
    )


def zero3_sub_group_elements(req: EstimateRequest, layout: ParamLayout) -> int:
    """Elements of this GPU's largest ZeRO-3 sub-group: DeepSpeed 0.16.5 ``stage3.py``
    ``_create_fp16_sub_groups`` walks a parameter group's parameters adding each one's
    partition (``ceil(numel / N)``) until the sum reaches ``sub_group_size``, then starts a
    new sub-group; a group smaller than that is one sub-group. With hybrid sharding (MiCS)
    the partitions are of the shard group (``shard_size``)."""
    n = req.shard_size
    largest = current = 0
    for rows, cols, copies in layout.tensors:
        part = ceil_div(rows * cols, n)
        while copies:  # the walk over ``copies`` equal parameters, a sub-group at a time
            closing = ceil_div(DEEPSPEED_SUB_GROUP_SIZE - current, part)  # parameters that close it
            if closing > copies:
                current += copies * part
                break
            largest, current = max(largest, current + closing * part), 0
            copies -= closing
    return max(largest, current)


def deepspeed_step_temp_bytes(req: EstimateRequest, layout: ParamLayout, reg: Regime) -> int:
    """Temporaries of DeepSpeed's ZeRO step on one GPU, per GPU. ZeRO-3 runs it sub-group by
    sub-group (DeepSpeed 0.16.5 ``runtime/zero/stage3.py`` ``step``):

    - ``_prepare_fp32_grad_for_sub_group``: ``self.flatten(averaged_gradients)`` concatenates
      the sub-group's 16-bit gradient partitions into a new flat tensor, ``.to(fp32)`` copies
      it into the fp32 gradient of the flat master partition; for a moment both exist;
    - ``_optimizer_step``: the optimizer steps that one flat partition (``param_groups[...]
      ['params'] = [fp32_param]``), so its own temporaries (:func:`optimizer_step_temp_bytes`)
      are those of one sub-group, beside the fp32 gradient;
    - ``_release_sub_group`` sets that gradient to ``None`` before the next sub-group.

    ZeRO-1/2 do the same once per parameter group on the group's whole partition
    (``stage_1_and_2.py`` ``step``: ``single_grad_partition = self.flatten(...).to(fp32)``,
    ``_optimizer_step(i)``, then ``single_partition_of_fp32_groups[i].grad = None``).

    The larger of the two moments, for the largest sub-group (:func:`zero3_sub_group_elements`)
    or the partition of the trainable parameters (ZeRO-1/2; the Trainer's no-decay group of
    norms and biases is counted in it). The flat master partition is fp32 under mixed precision
    (else the parameters' dtype)."""
    if req.sharding is Sharding.ZERO3:
        elems = zero3_sub_group_elements(req, layout)
    else:
        elems = sum(
            ceil_div(rows * cols, req.shard_size) * copies for rows, cols, copies in layout.tensors
        )
    flat_bytes = reg.master_bytes or reg.weight_bytes
    flat = ParamLayout(elems, 0, elems, elems, 0, elems, ((elems, 1, 1),))
    state_reg = Regime(reg.name, flat_bytes, reg.compute_bytes, flat_bytes, 0, flat_bytes, False)
    cast = elems * (reg.grad_bytes + flat_bytes)
    step = elems * flat_bytes + optimizer_step_temp_bytes(req, flat, state_reg)
    return max(cast, step)


def deepspeed_reduce_bucket_bytes(req: EstimateRequest, reg: Regime) -> int:
    """ZeRO-3's reduce bucket, allocated once (DeepSpeed 0.16.5 ``stage3.py``:
    ``torch.empty(self.reduce_bucket_size, dtype=self.dtype)`` with ``contiguous_gradients``,
    its default): ``reduce_bucket_size`` elements of the 16-bit dtype, ``hidden x hidden`` as the
    Hugging Face Trainer fills ``"auto"`` (transformers 5.17.0 ``integrations/deepspeed.py``
    ``trainer_config_finalize``). 0 outside DeepSpeed's ZeRO-3 on several GPUs."""
    if not deepspeed_zero(req) or req.sharding is not Sharding.ZERO3 or req.num_gpus < 2:
        return 0
    return req.model.hidden_size**2 * reg.grad_bytes


# ---- sharding ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Divisors:
    """How many GPUs share each model state (1 = replicated)."""

    weights: int
    grads: int
    optimizer: int


def shard_divisors(sharding: Sharding, num_gpus: int) -> Divisors:
    """ZeRO stages (arXiv:1910.02054, sec. 5): stage 1 shards optimizer states (and the
    master copy), stage 2 also gradients, stage 3 also weights; DDP replicates all.
    ``num_gpus``: the GPUs that share one copy (``EstimateRequest.shard_size``: fewer than
    the job's with hybrid sharding)."""
    n = num_gpus
    if sharding is Sharding.ZERO3:
        return Divisors(n, n, n)
    if sharding is Sharding.ZERO2:
        return Divisors(1, n, n)
    if sharding is Sharding.ZERO1:
        return Divisors(1, 1, n)
    return Divisors(1, 1, 1)


def gradient_params(req: EstimateRequest, layout: ParamLayout) -> int:
    """Parameters that get gradient storage: the trainable ones, plus, with
    ``frozen_weight_grads`` (FSDP v1 units mixing frozen and trainable weights), every
    decoder-block parameter; embedding and output units hold only frozen weights and get
    none (a flat parameter requires grad when any of its members does)."""
    if req.is_peft and req.frozen_weight_grads:
        return layout.trainable + req.model.stack_params
    return layout.trainable


def gradients_kept_between_steps(req: EstimateRequest) -> bool:
    """The loop zeroes its gradients in place instead of freeing them (``zero_grad_set_to_none``
    False: torch < 2.0 ``Optimizer.zero_grad(set_to_none=False)``, accelerate < 0.28
    ``AcceleratedOptimizer.zero_grad``): from the second step on they are alive through the
    forward and the backward, as with accumulation. Not under DeepSpeed's ZeRO, whose engine
    keeps its own gradients (accelerate 0.6 ``deepspeed_utils.py``
    ``DeepSpeedOptimizerWrapper.zero_grad`` does nothing: the engine's step zeroes them),
    nor with the step fused into backward (no gradient outlives its parameter's update)."""
    return (
        not req.zero_grad_set_to_none and not req.optimizer_in_backward and not deepspeed_zero(req)
    )


def gradients_held_from_start(req: EstimateRequest) -> bool:
    """Gradients alive from the start of a micro-batch's forward: accumulated over earlier
    micro-batches (:func:`accumulates_gradients`) or kept from the previous step
    (:func:`gradients_kept_between_steps`)."""
    return accumulates_gradients(req) or gradients_kept_between_steps(req)


def accumulates_unsharded_gradients(req: EstimateRequest) -> bool:
    """Gradient accumulation with sharded gradients (ZeRO-2/3, FSDP) on several GPUs keeps
    each GPU's gradients unsharded between micro-batches: the trainer skips the
    reduce-scatter with FSDP's ``no_sync()``, under which, as the PyTorch FSDP docs warn
    (``FullyShardedDataParallel.no_sync``), each GPU accumulates full, unsharded gradients
    until the synchronising micro-batch. Hugging Face accelerate does so by default
    (``GradientAccumulationPlugin.sync_each_batch=False``) and LitGPT through Fabric's
    ``no_backward_sync``. DeepSpeed and torchtune reduce every micro-batch into sharded
    gradients: ``sync_each_micro_batch``, and DeepSpeed's ZeRO-2/3 whatever that key says
    (``sharding_engine="deepspeed"``: accelerate 1.15.0 ``Accelerator.no_sync`` gives it a
    ``nullcontext``, and DeepSpeed 0.16.5 ``stage3.py`` ``partition_grads`` adds each
    micro-batch's reduced partition into its flat gradient buffer)."""
    return (
        accumulates_gradients(req)
        and req.num_gpus > 1
        and req.sharding in (Sharding.ZERO2, Sharding.ZERO3)
        and not reduces_each_micro_batch(req)
    )


def reduces_each_micro_batch(req: EstimateRequest) -> bool:
    """Each micro-batch's backward reduces its gradients: ``sync_each_micro_batch``, or
    DeepSpeed's ZeRO-2/3 whatever that key says (no ``no_sync``: DeepSpeed 0.14.0 ``engine.py``
    ``allreduce_gradients`` runs ZeRO>=2's epilogue off the accumulation boundary too, and
    ``stage3.py`` ``independent_gradient_partition_epilogue`` reduce-scatters each backward).
    The memory (:func:`accumulates_unsharded_gradients`) and the time read it alike."""
    return req.sync_each_micro_batch or (
        deepspeed_zero(req) and req.sharding in (Sharding.ZERO2, Sharding.ZERO3)
    )


def accumulates_gradients(req: EstimateRequest) -> bool:
    """Gradients of earlier micro-batches are alive during the next forward and backward:
    accumulation over several micro-batches, the step not fused into backward (a fused
    step frees each gradient at once; torchtune refuses the combination)."""
    return req.gradient_accumulation_steps > 1 and not req.optimizer_in_backward


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)
