"""Peak GPU memory of one fine-tuning setup, per GPU, by component and phase.

The peak is the largest of three moments of a training step (a Hugging Face blog on
training memory models it as ``params + optimizer + max(grads + temporaries,
activations)``; this module keeps each term):

- ``forward_end``: the loss is computed and its backward starts: every saved
  activation is alive, plus the logits and their fp32 loss tensors (and, with gradient
  accumulation, the gradients summed over the earlier micro-batches).
- ``backward``: the larger of the first block's backward (all saved activations plus
  one block recomputed) and the last one (all gradients plus one block's activations).
  Between these two ends memory moves linearly (activations freed, gradients added
  block by block), so one of them is the maximum.
- ``optimizer_step``: all gradients plus the optimizer's temporaries (absent when the
  step is fused into backward).

Entry points: :func:`estimate_request` (typed) and :func:`estimate_dict` (JSON).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from . import activations as act
from . import calibration, liger
from . import states as st
from .arch import LinearLayer, ModelArch
from .checkpointing import block_wrapped
from .jsontypes import JsonObject
from .attention_windows import sdpa_mask_tensor, window_of
from .fields import AttentionMask, RopeCache16Bit
from .frameworks import Framework
from .lengths import as_rows, request_attention_span, request_peak, request_shape
from .lora import TRANSFORMERS_FRAMEWORKS, library_rejections
from .request import (
    Attention,
    CpuOffload,
    EstimateRequest,
    Method,
    Precision,
    Sharding,
    parse_estimate_request,
    request_warnings,
)

if TYPE_CHECKING:  # for annotations only, as in calc.states
    from .lora import AdaptedLinear

ALLOCATOR_SLACK_FRACTION = 0.102
"""Caching-allocator slack: ``reserved = allocated * (1 + f)``.

PyTorch's caching allocator rounds blocks up (512 B; 2 MiB segments for large blocks)
and keeps freed blocks cached; fragmentation adds more (PyTorch docs, "CUDA semantics:
memory management"). Fitted on the validation rows that state ``max_memory_reserved``: for
each publication the median of ``measured_reserved / predicted_allocated - 1``, then the
median over publications (one vote each): torchtune's QLoRA tutorial 0.088, its LoRA
tutorial 0.102, Answer.AI's FSDP + QLoRA benchmark 0.240 (whose allocated figures agree
with ``calc`` within 1 % but whose reserved ones do not: an allocator behaviour of that
stack, FSDP1 with CPU offload or large batches, that one fraction cannot carry: see
:data:`FSDP1_ALLOCATOR_SLACK_FRACTION` and :func:`fsdp_wrap_reserved_bytes`). The torchtune
tutorials' figures are counted with their recipes keeping the fp32 logits through the
backward (``accuracy.memory.TORCHTUNE_DEL_LOGITS_FROM``; 0.098 and 0.112 before that count).
``python -m benchmarks.validate_memory`` prints the fit, its leave-one-source-out refits and
the errors on the rows it was not fitted on."""

FSDP1_ALLOCATOR_SLACK_FRACTION = 0.240
"""Caching-allocator slack of the FSDP1 step in a loop that keeps the model's output
(``fsdp_wrap_floor`` with ``loss_outputs_kept``, :func:`fsdp1_slack_applies`): ``reserved =
allocated x (1 + f)`` where the wrap's floor (:func:`fsdp_wrap_reserved_bytes`) does not bind. FSDP1
allocates its all-gather outputs on its own unshard stream, its reduce-scatter buffers on a
post-backward stream and, with CPU offload, the host-to-device copies of the shards on a
pre-unshard stream (torch 2.13.0 ``torch/distributed/fsdp/_runtime_utils.py`` ``_unshard``,
``_post_backward_hook``); the caching allocator serves a request only from blocks freed on
the same stream, so each stream keeps a pool of its own beside the default stream's. Fitted like
:data:`ALLOCATOR_SLACK_FRACTION` (median over publications of each one's median of
``measured_reserved / predicted_allocated - 1``) on the stated ``max_memory_reserved`` rows of
runs where it applies: Answer.AI's FSDP + QLoRA benchmark alone (13 rows, per-row values
0.11 to 0.48, median 0.240), its rows counted with the fp32 logits their transformers 4.38
model returns and the loop keeps (``logits_upcast_in_model``: ``logits = logits.float()`` in
``LlamaForCausalLM.forward``, 4.38.2 ``models/llama/modeling_llama.py`` line 1196; 0.299 when
those logits were counted in 16 bits). PEFT's accelerate FSDP1 example (Trainer, outputs dropped) shows
no such slack (its nvidia-smi rows 124-125), hence the condition on the kept output. With one
publication, leave-one-source-out cannot test it: holding that publication out falls back to
:data:`ALLOCATOR_SLACK_FRACTION`, and ``python -m benchmarks.validate_memory`` prints both
figures and the per-row spread."""

FSDP1_BROADCAST_BUCKET_BYTES = 250 * 1024**2
"""``sync_module_states`` broadcasts a unit's parameters and buffers from rank 0 in buckets of
at most 250 MiB (torch 2.13.0 ``torch/distributed/fsdp/_init_utils.py``
``PARAM_BROADCAST_BUCKET_SIZE``, the same value since torch 2.0), two buckets in flight
(``torch/csrc/distributed/c10d/comm.cpp`` ``broadcast_coalesced``, ``max_in_flight = 2``); a
bucket of two or more tensors is a new flat copy (``flatten_dense_tensors``: ``torch.cat``), a
bucket of one is a view."""

ALLOCATOR_SEGMENT_BYTES = 2 * 1024**2
"""PyTorch's caching allocator reserves large blocks in 2 MiB segments (PyTorch docs, "CUDA
semantics: memory management"): every reserved figure is a whole number of them."""


def whole_segments(nbytes: int) -> int:
    """``nbytes`` rounded up to whole :data:`ALLOCATOR_SEGMENT_BYTES` segments."""
    return -(-nbytes // ALLOCATOR_SEGMENT_BYTES) * ALLOCATOR_SEGMENT_BYTES


CUDA_CONTEXT_BYTES = 512 * 1024**2
"""CUDA context and kernel images outside PyTorch's allocator: 512 MiB, inside the
0.3-1.5 GB range that nvidia-smi shows for an idle PyTorch process (PyTorch docs,
"CUDA semantics", notes that the context is not counted by the allocator; lazy module
loading since CUDA 11.7 keeps it near the low end)."""

NCCL_BUFFER_BYTES = 2 * 32 * 4 * 1024**2
"""NCCL communication buffers on multi-GPU runs: ``NCCL_BUFFSIZE`` (4 MiB default)
for each of send/receive on up to 32 channels (NCCL docs, environment variables
``NCCL_BUFFSIZE`` and ``NCCL_MAX_NCHANNELS``): 256 MiB."""


def comm_buffer_bytes(num_gpus: int) -> int:
    """:data:`NCCL_BUFFER_BYTES` on several GPUs, else nothing."""
    return NCCL_BUFFER_BYTES if num_gpus > 1 else 0


def outside_allocator_bytes(num_gpus: int) -> int:
    """Device memory PyTorch's allocator does not see: :data:`CUDA_CONTEXT_BYTES` and, on
    several GPUs, :data:`NCCL_BUFFER_BYTES`."""
    return CUDA_CONTEXT_BYTES + comm_buffer_bytes(num_gpus)


GATHERED_UNITS = 2
"""ZeRO-3 / FSDP FULL_SHARD holds the block being computed and the prefetched next one
unsharded in the backward, on top of the root unit (PyTorch FSDP
``BackwardPrefetch.BACKWARD_PRE``; FSDP2 ``FSDPState._lazy_init`` for the root; DeepSpeed
``stage3_prefetch_bucket_size``); see :func:`gathered_weight_bytes`."""

DEQUANT_BYTES = 2
"""Bytes per element of a dequantized 4-bit weight and of the gradients around its matmul:
the 16-bit compute dtype, whatever the other parameters' dtype. bitsandbytes 0.49.2
``Linear4bit.forward`` casts its input to ``compute_dtype`` (transformers'
``bnb_4bit_compute_dtype``, bf16 in QLoRA recipes) and ``dequantize_4bit`` writes that
dtype; with fp32 non-quantized parameters (peft 0.21.0 ``prepare_model_for_kbit_training``
casts every 16-bit parameter that is not a ``Params4bit`` to fp32: calc's ``fp32``
precision for QLoRA) the matmul still runs in bf16 and only its output is cast back.
torchao's NF4 (torchtune) dequantizes to the bf16 of its input."""

COMPONENTS = (
    "weights",
    "lora_weights",
    "gradients",
    "optimizer",
    "optimizer_temporaries",
    "activations",
    "logits",
    "weight_copies",
    "gathered_weights",
    "dequant_buffer",
    "comm_buffers",
)
"""Stable component names of the response (all present, zeros included)."""

PHASES = ("forward_end", "backward", "optimizer_step")


@dataclass(frozen=True)
class MemoryEstimate:
    """Per-GPU result; every size in bytes."""

    peak_allocated_bytes: int
    peak_reserved_bytes: int
    device_total_bytes: int
    components: JsonObject
    peak_phase: str
    phases: JsonObject
    params_total: int
    params_trainable: int
    host_bytes: int
    unified_memory_bytes: int
    model_states_bytes: int
    activations_per_token_bytes: int
    warnings: tuple[str, ...]
    quantization_reserved_bytes: int = 0
    # the request echoed, as JSON or as the request itself (written out by to_dict: a plan's
    # estimates at a length distribution's peak are echoed with the request as given)
    request: JsonObject | EstimateRequest = field(default_factory=dict)
    peak_allocated_range_bytes: tuple[int, ...] = ()
    peak_reserved_range_bytes: tuple[int, ...] = ()
    params_active: int = 0  # parameters one token passes through (MoE: top-k + shared)
    fsdp_wrap_reserved_bytes: int = 0  # reserved floor of FSDP1's wrapping (fsdp_wrap_floor)
    allocator_slack_fraction: float = ALLOCATOR_SLACK_FRACTION  # the slack the reserved figure used
    data: JsonObject | None = (
        None  # the data's step sequence (calc.lengths), with length_stats only
    )
    min_device_bytes: int = 0  # the replayed allocator's smallest device; 0: not replayed
    min_device_range_bytes: tuple[int, ...] = ()  # its calibrated range (MIN_DEVICE_BANDS)
    verdict_basis: str = "device_total_bytes"  # what the verdict judges (see SIMULATED_VERDICT)

    def __post_init__(self) -> None:
        if sum(self.components.values()) != self.peak_allocated_bytes:
            raise ValueError("components do not sum to peak_allocated_bytes")

    def to_dict(self) -> JsonObject:
        """The JSON response (field names are a contract)."""
        return {
            "peak_allocated_bytes": self.peak_allocated_bytes,
            "peak_reserved_bytes": self.peak_reserved_bytes,
            "device_total_bytes": self.device_total_bytes,
            "components": dict(self.components),
            "peak_phase": self.peak_phase,
            "phases": dict(self.phases),
            "params_total": self.params_total,
            "params_trainable": self.params_trainable,
            "params_active": self.params_active,
            "host_bytes": self.host_bytes,
            "unified_memory_bytes": self.unified_memory_bytes,
            "model_states_bytes": self.model_states_bytes,
            "activations_per_token_bytes": self.activations_per_token_bytes,
            "quantization_reserved_bytes": self.quantization_reserved_bytes,
            "warnings": list(self.warnings),
            "request": (
                self.request.to_dict()
                if isinstance(self.request, EstimateRequest)
                else dict(self.request)
            ),
            "peak_allocated_range_bytes": list(self.peak_allocated_range_bytes),
            "peak_reserved_range_bytes": list(self.peak_reserved_range_bytes),
            "fsdp_wrap_reserved_bytes": self.fsdp_wrap_reserved_bytes,
            "allocator_slack_fraction": self.allocator_slack_fraction,
            **({} if self.data is None else {"data": dict(self.data)}),
            **(
                {
                    "min_device_bytes": self.min_device_bytes,
                    "min_device_range_bytes": list(self.min_device_range_bytes),
                }
                if self.min_device_range_bytes
                else {}
            ),
            "verdict_basis": self.verdict_basis,
        }


# ---- the pieces -------------------------------------------------------------------------


@dataclass(frozen=True)
class States:
    """Model states resident on one GPU, and what goes to host RAM."""

    weights: int
    lora_weights: int
    optimizer: int
    grads_all: int  # gradients alive after a full backward
    optimizer_temp: int
    comm_static: int  # DDP gradient buckets
    comm_backward: int  # unsharded gradients of one unit before reduce-scatter
    host: int
    unified: int


def _base_weight_bytes(req: EstimateRequest, layout: st.ParamLayout, reg: st.Regime) -> int:
    """Base model weights: NF4 block linears plus every other parameter at the weight dtype;
    the embedding, the output layer and their ``lora_modules_to_save`` copies at 2 bytes
    where TRL casts them back to bf16 after kbit preparation
    (:func:`calc.states.embeddings_recast`)."""
    quant = st.quantized_bytes(layout.quantized, req.qlora_double_quant)
    recast = st.recast_params(req, reg)
    if recast:
        recast += layout.saved
    return quant + (layout.dense - recast) * reg.weight_bytes + recast * st.BF16_BYTES


def model_states(req: EstimateRequest, layout: st.ParamLayout, reg: st.Regime) -> States:
    """Weights, gradients and optimizer states per GPU after sharding and offload."""
    div = st.shard_divisors(req.sharding, req.shard_size)
    offload = req.cpu_offload
    base = _base_weight_bytes(req, layout, reg)
    areg = st.adapter_regime(req, reg)
    lora = layout.adapter * areg.weight_bytes
    # modules_to_save copies (in ``base``, dense) train in the module's dtype, not the adapters'
    # (bf16 where TRL casts them back after kbit preparation: saved_regime)
    main, saved = st.saved_part(layout)
    sreg = st.saved_regime(req, reg)
    grads = (
        main.trainable * areg.grad_bytes
        + saved.trainable * sreg.grad_bytes
        + (st.gradient_params(req, layout) - layout.trainable) * reg.grad_bytes
    )
    states = st.optimizer_state_bytes(req, main, areg) + st.optimizer_state_bytes(req, saved, sreg)
    master = main.trainable * areg.master_bytes + saved.trainable * sreg.master_bytes
    paged = st.is_paged(req.optimizer)
    host = unified = 0
    opt_gpu = st.ceil_div(master + (0 if paged else states), div.optimizer)
    if paged:
        unified = st.ceil_div(states, div.optimizer)
        host += unified
    temp = st.ceil_div(
        st.optimizer_step_temp_bytes(req, main, areg)
        + (st.optimizer_step_temp_bytes(req, saved, sreg) if saved.trainable else 0),
        div.optimizer,
    )
    if st.deepspeed_zero(req):
        # DeepSpeed steps a flat fp32 partition (ZeRO-3: one sub-group) at a time; per GPU already
        temp = st.deepspeed_step_temp_bytes(req, layout, reg)
    if req.optimizer_in_backward:
        grads_all = max(
            main.largest_trainable_tensor * areg.grad_bytes,
            saved.largest_trainable_tensor * sreg.grad_bytes,
        )
        temp = 0
    elif st.accumulates_unsharded_gradients(req):
        grads_all = grads
    else:
        grads_all = st.ceil_div(grads, div.grads)
    offloads_params = offload is CpuOffload.OPTIMIZER_PARAMS
    replicated = quant_state_replicated_bytes(req, layout, div.weights, offloads_params)
    weights_gpu = st.ceil_div(base - replicated, div.weights) + replicated
    lora_gpu = st.ceil_div(lora, div.weights)
    unit_grads = _unit_trainable(req, layout) * areg.grad_bytes
    if offload is not CpuOffload.NONE:
        # ZeRO-Offload / FSDP CPUOffload: states, master and fp32 grads live in host RAM and
        # the step runs on the CPU; gradients leave the GPU unit by unit. Under DeepSpeed the
        # host's optimizer is DeepSpeedCPUAdam whatever the loop built: Adam's two fp32 states
        # (a paged optimizer's unified-memory states with them: none is made)
        if st.deepspeed_offload_swaps_optimizer(req):
            opt_gpu = st.ceil_div(master + 2 * st.FP32_BYTES * layout.trainable, div.optimizer)
            host, unified = host - unified, 0
        host += opt_gpu + st.ceil_div(layout.trainable * st.FP32_BYTES, div.optimizer)
        opt_gpu, temp = 0, 0
        grads_all = min(grads_all, unit_grads)
    if offloads_params:
        # the quantization statistics are no parameter: parameter offload leaves them on the GPU
        host += weights_gpu - replicated + lora_gpu
        weights_gpu, lora_gpu = replicated, 0
    # a buffer: on every GPU, never sharded or offloaded
    weights_gpu += rope_cache_bytes(req)
    comm_static = grads if req.sharding is Sharding.DDP else 0
    comm_static += st.deepspeed_reduce_bucket_bytes(req, reg)
    multi = req.num_gpus > 1 and req.sharding in (Sharding.ZERO2, Sharding.ZERO3)
    comm_backward = unit_grads if multi else 0
    return States(
        weights_gpu, lora_gpu, opt_gpu, grads_all, temp, comm_static, comm_backward, host, unified
    )


def quant_state_replicated_bytes(
    req: EstimateRequest, layout: st.ParamLayout, weight_divisor: int, offloads_params: bool = False
) -> int:
    """Quantization statistics that stay whole on every GPU when the weights are sharded or
    offloaded (``qlora_quant_state_replicated``, bitsandbytes under FSDP / ZeRO-3, whose
    sharding and CPU offload move parameters only): the NF4 storage beyond its 4 bits per
    weight, ``quantized_bytes(n) - n / 2``: ``n * 0.5 / 8`` bytes (an fp32 absmax per 64
    weights) or ``n * 0.127 / 8`` with double quantization (an 8-bit absmax per 64 and an
    fp32 scale per 256 blocks; QLoRA sec. 3). Zero when the weights are neither sharded nor
    offloaded, or without QLoRA."""
    if req.method is not Method.QLORA or not req.qlora_quant_state_replicated:
        return 0
    if weight_divisor <= 1 and not offloads_params:
        return 0
    return st.quantized_bytes(layout.quantized, req.qlora_double_quant) - layout.quantized // 2


def _unit_trainable(req: EstimateRequest, layout: st.ParamLayout) -> int:
    """Trainable parameters of one FSDP unit (a block; the adapters of a block for LoRA)."""
    if req.method is Method.FULL:
        return max(req.model.block_params, req.model.vocab_size * req.model.hidden_size)
    adapters = (layout.trainable - layout.saved) // req.model.num_layers
    # the modules_to_save copies sit in the root unit (embedding, output layer) together
    if req.frozen_weight_grads:
        return max(req.model.block_params + adapters, layout.saved)
    return max(adapters, layout.saved)


def gathered_weight_bytes(req: EstimateRequest, reg: st.Regime) -> tuple[int, int]:
    """Unsharded weights held (at the end of the forward, during the backward).

    ZeRO-3 / FSDP FULL_SHARD on several GPUs: the root unit (embedding, final norm, output
    layer, never quantized) stays gathered from its forward until its backward: PyTorch
    FSDP2 ``FSDPState._lazy_init`` sets the root's ``post_forward_mesh_info = None`` ("do
    not reshard after forward") and FSDP1 ``_post_forward_reshard`` frees no root
    parameters. Each block is resharded after its forward and gathered again in the
    backward, with the next one prefetched: ``GATHERED_UNITS`` blocks on top of the root.
    DeepSpeed ZeRO-3 releases the embedding and head after use, so there this is high by
    the root's size.

    Parameters offloaded to the CPU without ZeRO-3 are streamed unit by unit, the
    embedding and the head as units of their own: ``GATHERED_UNITS`` times the largest."""
    sharded = req.sharding is Sharding.ZERO3 and req.shard_size > 1
    if not sharded and req.cpu_offload is not CpuOffload.OPTIMIZER_PARAMS:
        return 0, 0
    arch = req.model
    if req.method is Method.QLORA:
        # the largest unit: a block whose skip-listed linears stay 16-bit, if any, holds more
        quant = (
            sum(l.count * l.weight_params for l in arch.block_linears if l.quantizable)
            - arch.kept_16bit_block_params
        )
        # replicated statistics are resident already: only the packed 4-bit data is gathered
        packed = (
            quant // 2
            if req.qlora_quant_state_replicated and sharded
            else st.quantized_bytes(quant, req.qlora_double_quant)
        )
        block = packed + (arch.block_params - quant) * reg.weight_bytes
    else:
        block = arch.block_params * reg.weight_bytes
    if sharded:
        root = root_unit_bytes(req, reg)
        return root, root + GATHERED_UNITS * block
    table = arch.vocab_size * arch.hidden_size * reg.weight_bytes
    streamed = GATHERED_UNITS * max(block, table)
    return streamed, streamed


def root_unit_bytes(req: EstimateRequest, reg: st.Regime) -> int:
    """The FSDP root unit unsharded: embedding, final norm and output layer at the weights'
    precision (:func:`gathered_weight_bytes`)."""
    return _root_params(req.model) * reg.weight_bytes


def _root_params(arch: ModelArch) -> int:
    """Parameters of the FSDP root unit: embedding, final norm and output layer."""
    return arch.embedding_params + arch.norm_params + arch.lm_head_params


def root_gradient_bytes(req: EstimateRequest, reg: st.Regime) -> int:
    """The root unit's gradient in flight at the end of the backward with FSDP1 flat
    parameters (``fsdp_flat_parameters``), full fine-tuning under ZeRO-3 / FSDP on several
    GPUs: the gradient of each of its parameters (output layer from the start of the
    backward, embedding at its end) held in the autograd input buffer of ``split``'s
    backward, and the flat gradient ``split_with_sizes_backward`` concatenates from them
    (torch ``distributed/fsdp/_flat_param.py`` builds the views with ``torch.split(tensor,
    flat_param._numels)`` then ``.view(shape)``): twice the root's parameters at the
    gradient dtype. ``AccumulateGrad`` then adds the flat gradient into the one accumulated
    so far and frees it. 0 otherwise."""
    if (
        not req.fsdp_flat_parameters
        or req.method is not Method.FULL
        or req.sharding is not Sharding.ZERO3
        or req.shard_size <= 1
    ):
        return 0
    return 2 * _root_params(req.model) * reg.grad_bytes


def weight_copy_bytes(
    req: EstimateRequest, reg: st.Regime, one_layer: bool, blocks: bool = True
) -> int:
    """16-bit copies autocast makes of fp32 weights (``*-mixed`` without ZeRO): 2 bytes per
    weight of every matmul (block linears not stored in NF4, and the output layer unless TRL
    cast it back to bf16 after kbit preparation, :func:`calc.states.embeddings_recast`). Copies
    of trainable weights stay in autocast's cache for the whole forward; copies of frozen
    weights are saved for backward, so with checkpointing only one block's are alive, and only
    while that block recomputes and runs backward: ``blocks`` False leaves the blocks' copies out
    (a checkpointed forward saves none; the output layer's copy is saved).
    DeepSeek-V4's hyper-connections add theirs (:func:`hyper_connection_copy_bytes`)."""
    hyper = hyper_connection_copy_bytes(req, reg, one_layer)
    if not reg.casts_weights:
        return hyper
    arch = req.model
    quantized = req.method is Method.QLORA

    def copied(l: LinearLayer) -> bool:
        return not (quantized and l.quantizable)

    # an output layer cast back to bf16 after kbit preparation has the 16-bit dtype already
    head = 0 if st.embeddings_recast(req, reg) else arch.vocab_size * arch.hidden_size
    if not blocks:
        return hyper + reg.compute_bytes * head
    if one_layer:
        # a checkpoint's skip list keeps some 4-bit linears in 16 bits: copied like the others
        return hyper + reg.compute_bytes * (
            sum(l.count * l.weight_params for l in arch.block_linears if copied(l))
            + (arch.kept_16bit_block_params if quantized else 0)
            + head
        )
    return hyper + reg.compute_bytes * (
        sum(
            (arch.blocks_of(l) - (arch.quantized_blocks(l) if quantized else 0))
            * l.count
            * l.weight_params
            for l in arch.linears
        )
        + head
    )


def hyper_connection_copy_bytes(req: EstimateRequest, reg: st.Regime, one_layer: bool) -> int:
    """DeepSeek-V4's hyper-connections mix with ``F.linear(flat, self.fn.float())``
    (transformers 5.17 ``DeepseekV4HyperConnection.forward``, ``hc_head`` likewise): stored in
    16 bits, each ``fn`` is copied to fp32 and that copy is saved for the backward (autocast
    casts it back to 16 bits for the matmul: a 16-bit copy instead). Two per block and
    ``hc_head``'s; with checkpointing one block's, recomputed, beside ``hc_head``'s."""
    arch = req.model
    hc = arch.hyper_connections
    if not hc:
        return 0
    if reg.casts_weights:
        per = reg.compute_bytes
    elif reg.weight_bytes < act.FP32_BYTES:
        per = act.FP32_BYTES
    else:
        return 0
    width = hc * arch.hidden_size
    blocks = 1 if one_layer else arch.num_layers
    return per * width * (2 * blocks * (2 + hc) * hc + hc)


def dequant_matmul_bytes(req: EstimateRequest, reg: st.Regime) -> tuple[int, int]:
    """The moment of a 4-bit matmul's backward, the largest over the quantized linears:
    (gradients in flight, dequantized weight).

    bitsandbytes 0.49.2 ``MatMul4Bit`` (``autograd/_functions.py``) dequantizes the whole
    weight into a new 16-bit ``out x in`` tensor for each matmul and frees it after: in the
    forward (``F.linear``) and again in the backward (``grad_A = grad_output @ W``). The
    buffer is alive only during that matmul, with the output's gradient (``d_out`` per
    token) and the input's gradient being written (``d_in``), all at ``DEQUANT_BYTES``;
    a routed expert sees ``tokens * active / count`` rows. The forward's moment holds less
    than the end of the forward (the output layer and loss come after the last 4-bit
    matmul, with no buffer alive), so only the backward's counts: the larger of this and
    the block's ``workspace`` is in flight. Read from the oracle's trace of that code
    (tools/oracle/qlora.py)."""
    if req.method is not Method.QLORA:
        return 0, 0
    tokens = req.micro_batch_size * req.local_seq_len
    cast = dequant_cast_bytes(req)
    best = (0, 0)
    for l in req.model.linears:
        if not l.quantizable:
            continue
        rows = -(-tokens * l.active // l.count)
        grads = DEQUANT_BYTES * rows * (l.d_in + l.d_out)
        # with an fp16 dequantization (qlora_dequant_fp16) the fp16 buffer and its cast
        # are both alive before the matmul writes the input's gradient
        weight = DEQUANT_BYTES * l.weight_params + max(
            0, cast * l.weight_params - DEQUANT_BYTES * rows * l.d_in
        )
        if grads + weight > sum(best):
            best = (grads, weight)
    return best


def dequant_cast_bytes(req: EstimateRequest) -> int:
    """Bytes per element of the second buffer of a 4-bit matmul whose weight dequantizes to
    fp16 and is cast to the compute dtype (``qlora_dequant_fp16``): bitsandbytes 0.42.0
    ``MatMul4Bit`` runs ``F.dequantize_4bit(B, quant_state).to(A.dtype)``
    (``autograd/_functions.py`` lines 516 and 546; unchanged in 0.49.2), and
    ``dequantize_4bit`` writes ``quant_state.dtype`` (``functional.py``: ``torch.empty(
    quant_state.shape, dtype=quant_state.dtype)``), fp16 when Lightning quantized an fp16
    copy. The fp16 buffer is freed once the cast returns. 0 with fp16 compute (the cast is
    a no-op) or without the key."""
    if (
        req.method is not Method.QLORA
        or not req.qlora_dequant_fp16
        or req.precision is Precision.FP16_MIXED
    ):
        return 0
    return DEQUANT_BYTES


def output_layer_dequant_bytes(req: EstimateRequest) -> int:
    """The output layer's dequantized weight (``qlora_output_layer_quantized``),
    ``vocab x hidden`` at ``DEQUANT_BYTES`` plus :func:`dequant_cast_bytes`: alive during
    each of its matmuls. Its last one in the forward runs with every saved activation, the
    logits and what the loop still holds of the previous micro-batch alive (the end of the
    forward); the first one in the backward holds the same buffer without the previous
    micro-batch, so the forward's counts. LitGPT splits the output layer into 128-token
    chunks (``lm_head_chunk_size=128``), each dequantizing the whole weight again: the
    buffer is per matmul, not per token."""
    params = st.output_layer_quantized_params(req)
    return params * (DEQUANT_BYTES + dequant_cast_bytes(req))


def previous_micro_batch_bytes(req: EstimateRequest, reg: st.Regime) -> tuple[int, int]:
    """What the loop still holds of the previous micro-batch during the next forward
    (``previous_outputs_kept``): (kept activations, logits).

    LitGPT ``finetune/lora.py`` (5895df10, 2024-04-26, line 276; 00af8b0d, 2024-09-27, line
    304) and ``finetune/full.py`` run ``logits = model(input_ids, ...)``: the name keeps the
    previous micro-batch's logits (``act * V`` per token, a list of 16-bit chunks) until the
    call returns. Through their autograd graph it also keeps what custom autograd functions
    stored as Python attributes, which ``backward()`` does not release (it releases saved
    tensors only): with ``qlora_keeps_inputs`` every 4-bit linear's input
    (:func:`calc.activations.quant_inputs_bytes_per_token`), and the output layer's when it
    is 4-bit too. The same micro-batch's length as the current one is assumed (the worst
    case a batch padded to ``seq_len`` after another meets)."""
    if not req.previous_outputs_kept:
        return 0, 0
    tokens = req.micro_batch_size * req.local_seq_len
    logits = req.model.vocab_size * reg.compute_bytes * tokens
    if req.method is not Method.QLORA or not req.qlora_keeps_inputs:
        return 0, logits
    per_token = act.quant_inputs_bytes_per_token(req.model, reg.compute_bytes)
    if st.output_layer_quantized_params(req):
        per_token += reg.compute_bytes * req.model.hidden_size
    return per_token * tokens, logits


def quantization_reserved_bytes(req: EstimateRequest) -> int:
    """Reserved memory left by quantizing the base weights on the GPU in one pass per
    weight (``qlora_unchunked_quantization``, torchao < 0.2.0): the peak reserved memory of
    torchtune's QLoRA model build replayed through the caching allocator
    (:func:`calc.nf4_build.build_reserved_bytes`: one layer built, deep-copied per layer with
    NF4's clone, then every weight quantized again by ``load_state_dict``).

    PyTorch's caching allocator keeps the freed blocks (no ``empty_cache`` in torchtune's
    recipes at fef3ed10d and 0217d44c2, which pin ``torchao==0.1``) and ``get_memory_stats``
    / ``memory_stats_log`` only reset the peak counters, so the reserved memory of the whole
    run is at least this. torchtune's QLoRA tutorial at fef3ed10d shows the effect: 9.13 GB
    reserved after model init against 9.29 GB at the training peak."""
    if req.method is not Method.QLORA or not req.qlora_unchunked_quantization:
        return 0
    from .nf4_build import build_reserved_bytes

    adapted = {a.name for a in st.adapted(req)}
    return build_reserved_bytes(req.model, req.lora_rank, adapted)


def _fsdp1_applies(req: EstimateRequest) -> bool:
    """``fsdp_wrap_floor`` on a run FSDP1 wraps: several GPUs, any sharding but ``none``."""
    return req.fsdp_wrap_floor and req.num_gpus > 1 and req.sharding is not Sharding.NONE


def fsdp1_slack_applies(req: EstimateRequest) -> bool:
    """:data:`FSDP1_ALLOCATOR_SLACK_FRACTION` applies: the FSDP1 wrap (``fsdp_wrap_floor``) in
    a loop that keeps the model's output (``loss_outputs_kept``, unchunked loss), the only
    setting it was fitted on; otherwise the generic slack."""
    return _fsdp1_applies(req) and req.loss_outputs_kept and not req.chunked_loss


def _broadcast_copy_bytes(sizes: list[int]) -> int:
    """The largest two consecutive broadcast buckets' flat copies (:data:`FSDP1_BROADCAST_BUCKET_BYTES`):
    tensors fill a bucket in order until it holds the limit or more."""
    copies, bucket, total = [], 0, 0
    for size in sizes:
        bucket, total = bucket + 1, total + size
        if total >= FSDP1_BROADCAST_BUCKET_BYTES:
            copies.append(total if bucket > 1 else 0)
            bucket, total = 0, 0
    if bucket:
        copies.append(total if bucket > 1 else 0)
    return max((a + b for a, b in zip(copies, copies[1:] + [0], strict=True)), default=0)


def _wrap_transient_bytes(
    sizes: list[int], num_gpus: int, sharded: bool, resident_shard: bool
) -> int:
    """Bytes one FSDP1 unit's wrapping adds on rank 0 beyond what it leaves allocated (torch
    2.13.0 ``_init_utils.py`` ``_init_param_handle_from_module``): its parameters moved from
    the CPU (``U``), the broadcast's bucket copies (``B``), freed before ``flatten_tensors``
    writes the flat parameter (``torch.cat``, ``U``) while the moved parameters are still
    referenced (``managed_params``); then ``FlatParamHandle.shard`` clones this rank's shard
    (``U / n``, into a freed bucket where it fits) and frees the flat parameter. Without
    sharding (``NO_SHARD``) the flat parameter stays: ``U + B``. A shard offloaded to the CPU
    right after is transient too (``resident_shard`` False)."""
    unit, copies = sum(sizes), _broadcast_copy_bytes(sizes)
    if not sharded:
        return unit + copies
    shard = -(-unit // num_gpus)
    reused = min(copies, shard)
    return 2 * unit + copies - reused + (0 if resident_shard else shard)


def fsdp_wrap_reserved_bytes(req: EstimateRequest, reg: st.Regime, s: States) -> int:
    """Reserved memory that FSDP1's wrapping of a CPU-loaded model leaves, and that the step
    never returns (``fsdp_wrap_floor``), in whole 2 MiB segments; 0 when it does not apply.

    Answer.AI's ``fsdp_qlora/train.py`` (50efa1e, 2024-03-26) loads the model on rank 0's CPU
    (``low_memory``; QLoRA quantizes each layer on the GPU, moves it to the CPU and calls
    ``torch.cuda.empty_cache()``), then wraps it with ``FullyShardedDataParallel(...,
    auto_wrap_policy=<decoder layers and LoRA leaves>, use_orig_params=False, device_id=...,
    sync_module_states=True, limit_all_gathers=True)``, wrapping the blocks first and the root
    (embedding, final norm, output layer) last. Each unit passes through the GPU unsharded
    (:func:`_wrap_transient_bytes`); the caching allocator keeps the freed blocks (no
    ``empty_cache`` after the wrap, and ``reset_peak_memory_stats`` before the first step
    only resets the peak to the memory reserved then). Units of one size reuse each other's
    blocks, so the floor is what stays allocated (the shards: ``weights + lora_weights``)
    plus one block's transient plus the root's, whose larger tensors cannot reuse the
    block's freed pieces (PyTorch ``CUDACachingAllocator`` never merges blocks of different
    segments). QLoRA's packed weights count 4 bits each (``quant_storage`` holds the packed
    data; the statistics are resident already).

    The default stream's cache cannot serve the step's all-gathers (FSDP1 allocates them on
    its unshard stream, :data:`FSDP1_ALLOCATOR_SLACK_FRACTION`): their blocks (the root and
    the gathered blocks, :func:`gathered_weight_bytes`) add to the floor. The benchmark
    prints ``reserved_after_model_wrap`` for its first run (Llama-2-7B QLoRA, 2 GPUs): 3.72
    GiB, where this counts 3.19 GiB before the all-gather pool."""
    if not _fsdp1_applies(req):
        return 0
    arch = req.model
    wb = reg.weight_bytes
    quantized = req.method is Method.QLORA
    rest = (arch.block_params - sum(l.params for l in arch.block_linears)) * wb
    sharded = req.sharding in (Sharding.ZERO2, Sharding.ZERO3)
    resident = req.cpu_offload is not CpuOffload.OPTIMIZER_PARAMS

    def block_transient(kept: frozenset[str]) -> int:
        # a linear of the checkpoint's skip list (bnb_kept_16bit) stays a dense weight
        sizes = [
            l.weight_params // 2
            if quantized and l.quantizable and l.name not in kept
            else l.weight_params * wb
            for l in arch.block_linears
            for _ in range(l.count)
        ]
        sizes.append(rest)
        return _wrap_transient_bytes([b for b in sizes if b], req.shard_size, sharded, resident)

    # blocks that keep linears in 16 bits are larger units: the largest one's transient is
    # what the cache must hold once (a smaller unit's freed pieces cannot serve it whole)
    kept_sets: set[frozenset[str]] = {frozenset()} | {
        frozenset(name for i, name in arch.bnb_kept_16bit if i == index)
        for index, _ in arch.bnb_kept_16bit
    }
    root = [arch.embedding_params * wb, arch.norm_params * wb, arch.lm_head_params * wb]
    floor = (
        s.weights
        + s.lora_weights
        + max(block_transient(kept) for kept in kept_sets)
        + _wrap_transient_bytes([r for r in root if r], req.shard_size, sharded, resident)
    )
    pool = gathered_weight_bytes(req, reg)[1]
    return whole_segments(floor + pool)


def _adapter_keys(
    req: EstimateRequest,
) -> tuple[frozenset[act.AdaptedKey], frozenset[act.AdaptedKey]]:
    """The keys of the block linears that carry an adapter, and of those whose adapter is
    folded into the weight (a fused-3d adapter's ``covers``). Adapters on a sparse-attention
    indexer run under torch.no_grad and are left out: they save nothing."""
    adapters = tuple(a for a in st.adapted(req) if a.role != "indexer")
    fused = frozenset(act.key_of(l) for a in adapters if a.fused for l in a.covers)
    adapted = frozenset(act.key_of(a) for a in adapters if not a.fused) | fused
    return adapted, fused


def fast_lora_keys(req: EstimateRequest) -> frozenset[act.AdaptedKey]:
    """The adapted linears Unsloth runs in its own autograd functions (``fused_lora_kernels``
    with ``lora_dropout`` 0: :func:`calc.activations.fast_lora_groups`), which the memory
    counts as saving less and the time as moving less (``calc.timing``)."""
    if not (req.fused_lora_kernels and req.is_peft and req.lora_dropout == 0):
        return frozenset()
    adapted, fused = _adapter_keys(req)
    return act.fast_lora_groups(req.model, adapted - fused)


def act_config(req: EstimateRequest, reg: st.Regime) -> act.ActConfig:
    adapted, fused = _adapter_keys(req)
    resid = st.FP32_BYTES if reg.casts_weights else reg.compute_bytes
    # autocast on 16-bit weights (weights_loaded_16bit): only fp32 adapters' inputs are cast,
    # one copy per adapted linear (peft's fp32 copy, then autocast's 16-bit cast of it)
    adapter_casts = (
        reg.autocast
        and req.is_peft
        and st.adapter_regime(req, reg).weight_bytes > reg.compute_bytes
    )
    return act.ActConfig(
        reg.compute_bytes,
        resid,
        req.method is Method.FULL,
        adapted,
        req.lora_rank,
        req.attention,
        req.seq_len,
        reg.casts_weights or adapter_casts,
        lora_dropout=req.is_peft and req.lora_dropout > 0,
        autocast=reg.autocast,
        quant_keeps_inputs=req.method is Method.QLORA and req.qlora_keeps_inputs,
        keeps_fused_qkv=req.attention_keeps_fused_qkv,
        qkv_adapter=req.lora_fused_qkv_adapter,
        compile_kept=act.COMPILE_KEPT_FRACTION if req.torch_compile else None,
        # under autocast the adapters' matmuls cast their inputs to 16 bits
        adapter_bytes=(
            st.adapter_regime(req, reg).weight_bytes if req.is_peft and not reg.autocast else None
        ),
        grouped_kv=req.attention_grouped_kv,
        mask_saved=(
            req.attention is Attention.SDPA and req.sdpa_mask_boolean and request_mask_tensor(req)
        ),
        mask_boolean=req.sdpa_mask_boolean,
        window_masks=window_masks(req),
        kv_repeated=req.sequence_parallel > 1 and req.sequence_parallel_repeats_kv,
        fused=fused,
        micro_batch_size=req.micro_batch_size,
        norm_kernel=(req.fused_lora_kernels or liger.applies(req)) and req.model.norm_kind == "rms",
        glu_kernel=liger.applies(req),
        fast=fast_lora_keys(req),
        # a trainable output layer saves its input for its weight's gradient
        quant_outputs_fp32=req.method is Method.QLORA and reg.casts_weights,
        transformers_code=req.framework.value in TRANSFORMERS_FRAMEWORKS,
        head_keeps_input=(
            req.method is Method.QLORA
            and req.qlora_keeps_inputs
            and st.output_layer_quantized_params(req) > 0
            or st.trained_output_layer_params(req) > 0
        ),
    )


@dataclass(frozen=True)
class Activations:
    """Activation bytes at the moments that matter."""

    saved_all: int  # everything saved for backward at the end of the forward
    recompute: int  # one block recomputed during backward (checkpointing)
    last_block: int  # what the first block keeps during its own backward
    workspace: int  # gradients in flight inside one block
    logits: int
    kept_logits: int  # logits the loop holds through the backward (loss_outputs_kept)
    per_token_block: int
    host: int
    # DeepSeek sparse attention: the indexer's transient inside one block's forward and what
    # that block has saved when it runs; the 4-D mask the model builds once per forward
    indexer_spike: int = 0
    indexer_pre: int = 0
    shared_mask: int = 0
    head: int = 0  # saved after the last block (final norm, output layer input)
    # the loop's fp32 copy of the returned logits, with what is alive beside it
    # (outputs_cast_fp32), at the forward's end
    output_cast: int = 0
    # eager attention's scores in one block: what the block saves of them, and what its
    # softmax's gradient holds beyond that (eager_scores_bytes); the forward's moment is
    # indexer_spike, after indexer_pre
    scores_saved: int = 0
    scores_backward: int = 0
    scores_held: int = 0  # of indexer_spike, what a forward's loop holds (not a recompute)
    # of the block's saved tensors, those its backward has freed when the softmax's gradient
    # runs (the MLP's and its norm's, and what the block saved after its scores)
    scores_freed: int = 0


def eager_scores_bytes(req: EstimateRequest, cfg: act.ActConfig) -> tuple[int, int, int]:
    """:func:`calc.activations.eager_scores_bytes_per_token` of the request's micro-batch
    (``cfg``: its :func:`act_config`): ``(saved, forward, backward)`` bytes of eager attention's
    score tensors in one block (fp16 takes ATen's fused ``half_to_float`` softmax, bf16 does
    not)."""
    fp16 = req.precision is Precision.FP16_MIXED
    tokens = req.micro_batch_size * req.local_seq_len
    saved, fwd, bwd = act.eager_scores_bytes_per_token(req.model, cfg, half_to_float=fp16)
    return saved * tokens, fwd * tokens, bwd * tokens


def merged_expert_bytes(req: EstimateRequest, reg: st.Regime, one_layer: bool) -> int:
    """``moe_expert_layout="fused-3d"``: the merged weights peft builds for the adapted 3-D
    expert stacks (and the router), saved for backward.

    peft 0.21.0 ``peft/tuners/lora/layer.py`` ``ParamWrapper._activate_lora`` registers a
    parametrization for the forward: with one adapter on a stack of experts,
    ``_LoraFactorsProxy`` returns ``torch.baddbmm(W, lhs, rhs)``, a new tensor the size of the
    whole stack (``experts * d_in * d_out`` in the weight's dtype), which the experts'
    matmuls (transformers 5.17 ``Qwen3MoeExperts.forward``: ``linear(x,
    self.gate_up_proj[expert_idx])``) save for backward through their per-expert views.
    ``get_delta_factors`` casts the factors to the weight's dtype (``lhs.to(param.dtype)``):
    when the adapters are fp32, these 16-bit copies (as many elements as the adapter) are
    saved by ``baddbmm`` too. On the router's 2-D weight ``_LoraParameterProxy`` returns
    ``W + delta``, the weight's size, saved by its ``linear``. All of it lives until the
    layer's backward: every layer's at the end of the forward without checkpointing, one
    layer's (the one recomputed) with it (``one_layer``).

    Except in the first block when no attention linear is adapted: nothing there requires
    grad before the MLP, so a matmul whose input needs no gradient saves only that input and
    its merged weight is freed after the forward (the stacks reading the MLP norm; the down
    projection too unless gate/up is adapted). Oracle: qwen3_moe ``lora-mlp-fused-*``."""
    adapted = st.adapted(req) if req.is_peft else []
    fused = [a for a in adapted if a.fused]
    if not fused:
        return 0
    weight = reg.weight_bytes
    factors = st.adapter_regime(req, reg).weight_bytes != weight
    attn_trains = any(a.role == "attn" for a in adapted)

    # a stack reads the MLP norm's output unless it is the experts' down projection (by
    # module name: widths cannot tell where intermediate == hidden)
    def reads_norm(a: AdaptedLinear) -> bool:
        return not any(c.mlp_output for c in a.covers)

    gate_up_trains = any(a.role != "router" and reads_norm(a) for a in fused)
    total = 0
    for a in fused:
        merged = a.count * a.d_in * a.d_out * weight
        copies = a.params(req.lora_rank) * weight if factors and a.count > 1 else 0
        if one_layer:
            total += merged + copies
            continue
        saved_blocks = a.blocks
        if (
            not attn_trains
            and a.blocks == req.model.num_layers
            and (reads_norm(a) or not gate_up_trains)
        ):
            saved_blocks -= 1  # block 0's merged weight: its matmul input needs no gradient
        total += merged * saved_blocks + copies * a.blocks
    return total


def merged_expert_grad_bytes(req: EstimateRequest, reg: st.Regime) -> tuple[int, int]:
    """``moe_expert_layout="fused-3d"``: the gradient of a merged expert stack in a block's
    backward, and the block's adapter gradients, not made yet at that moment.

    The experts' matmuls (transformers 5.17 ``grouped_mm`` / per-expert ``linear`` on
    ``W + B·A``, :func:`merged_expert_bytes`) give the merged weight a gradient the size of the
    whole stack, in the weight's dtype, which ``baddbmm``'s backward then turns into the
    adapters' gradients. The down projection's comes first, while both merged stacks of the
    block are alive; then gate/up's, once the down projection's stack is freed (its matmul's
    backward has run) and its adapters have their gradients: the larger of ``down`` and
    ``gate_up - down + down's adapter gradients``. The block's own adapters have no gradient
    yet at the first of these moments (its MLP's backward precedes its attention's).
    Oracle: mixtral ``lora-ckpt`` (a stack of 8 x 512 x 768), qwen3_moe ``lora-*-fused*``."""
    adapted = st.adapted(req) if req.is_peft else []
    fused = [a for a in adapted if a.fused and a.role != "router"]
    if not fused:
        return 0, 0
    weight = reg.weight_bytes
    grad = st.adapter_regime(req, reg).grad_bytes
    downs = [a for a in fused if any(c.mlp_output for c in a.covers)]
    ins = [a for a in fused if a not in downs]
    down = sum(a.count * a.d_in * a.d_out * weight for a in downs)
    down_grads = sum(a.params(req.lora_rank) for a in downs) * grad
    widest_in = max((a.count * a.d_in * a.d_out * weight for a in ins), default=0)
    transient = max(down, widest_in - down + down_grads)
    layers = req.model.num_layers
    block_grads = sum(a.params(req.lora_rank) for a in adapted if a.blocks == layers) * grad
    return transient, block_grads


def wrapped_block_bytes_per_token(req: EstimateRequest, cfg: act.ActConfig) -> int:
    """What a block wrapped in a checkpoint keeps per token: its input
    (:func:`calc.activations.checkpoint_bytes_per_token`), and under torchtitan's per-op policy
    also the outputs it keeps (:func:`calc.activations.selective_op_bytes_per_token`)."""
    arch = req.model
    if req.selective_op:
        return act.selective_op_bytes_per_token(arch, cfg, st.selective_op_matmuls(req))
    return act.checkpoint_bytes_per_token(arch, cfg)


def activation_bytes(req: EstimateRequest, reg: st.Regime) -> Activations:
    """Saved activations for ``b * s`` tokens through ``L`` blocks.

    Without checkpointing: ``L * block``; with it: ``L * checkpoint`` plus one block
    recomputed in backward (Korthikanti et al. 2022, sec. 4.3); ``checkpoint`` is what a wrapped
    block keeps (:func:`wrapped_block_bytes_per_token`), and with ``every-n`` only
    ``floor(L / N)`` blocks are wrapped, the others keep ``block``. Activation offloading
    moves saved activations to host RAM, keeping two blocks' worth in flight."""
    arch = req.model
    cfg = act_config(req, reg)
    tokens = req.micro_batch_size * req.local_seq_len
    block = act.block_bytes_per_token(arch, cfg) * tokens
    ckpt = wrapped_block_bytes_per_token(req, cfg) * tokens
    per_layer = ckpt if req.gradient_checkpointing else block
    layers = arch.num_layers
    wrapped = req.wrapped_blocks
    host = 0
    on_gpu_layers = layers
    if req.activation_offload:
        on_gpu_layers = min(layers, 2)
        host = (layers - on_gpu_layers) * per_layer
    saved_blocks = on_gpu_layers * per_layer
    if req.gradient_checkpointing and wrapped < layers:
        # every-n: the unwrapped blocks keep what their forward saves (offloaded but two)
        saved_blocks = wrapped * ckpt + (layers - wrapped) * block
        if req.activation_offload:
            saved_blocks, host = on_gpu_layers * block, saved_blocks - on_gpu_layers * block
    head = act.head_bytes_per_token(arch, cfg) * tokens
    logit_bytes = returned_logit_bytes(req, reg)
    first_wrapped = req.gradient_checkpointing and block_wrapped(
        0, req.checkpointing_granularity, req.checkpointing_every
    )
    if not first_wrapped and not req.activation_offload and not st.saved_module_params(req)[0]:
        # (a trainable embedding copy makes the first block's input require grad)
        head -= act.first_norm_unsaved_bytes_per_token(arch, cfg) * tokens
    recompute = block if wrapped else 0
    # accelerate's fp32 copy of the returned logits: the loop then holds fp32 logits, as if
    # the model returned them (logits_upcast_in_model)
    cast = output_cast_applies(req, reg)
    upcast = req.logits_upcast_in_model or cast
    spike = act.indexer_transient_bytes_per_token(arch, cfg, req.micro_batch_size) * tokens
    pre = act.sparse_attention_pre_indexer_bytes(arch, cfg) * tokens if spike else 0
    if arch.hyper_connections:
        # DeepSeek-V4: the eager attention's scores, a few copies alive in one block's forward
        spike = act.dsv4_attention_transient_bytes_per_token(arch, cfg) * tokens
        pre = act.dsv4_pre_attention_bytes_per_token(arch, cfg) * tokens
    scores_saved, scores_fwd, scores_bwd = eager_scores_bytes(req, cfg)
    scores_held = scores_freed = 0
    if scores_fwd:
        # eager attention: its score tensors at the softmax, in one block's forward (the
        # moment a sparse model's indexer stands for, when that one holds more)
        pre_scores = act.eager_pre_scores_bytes_per_token(arch, cfg) * tokens
        if pre_scores + scores_fwd > pre + spike:
            spike, pre = scores_fwd, pre_scores
            scores_held = act.eager_held_probabilities_bytes_per_token(arch, cfg) * tokens
        # the block's MLP runs its backward first and frees what it saved; Falcon-H1's Mamba-2
        # mixer runs beside the attention and backward after it, so what it saved stays
        # (activations.backward_workspace_bytes_per_token)
        scores_freed = (
            act.mlp_saved_bytes_per_token(arch, cfg) * tokens
            if arch.mamba is not None and arch.extra.get("parallel_mamba")
            else block - pre - scores_saved
        )
    return Activations(
        saved_all=saved_blocks + head,
        recompute=recompute,
        last_block=block,
        workspace=act.backward_workspace_bytes_per_token(arch, cfg) * tokens,
        # Liger's patched model computes its own loss (LigerForCausalLMLoss) whatever else
        # the stack would chunk
        logits=act.liger_flce_loss_bytes(
            arch, logit_bytes, tokens, reg.weight_bytes if _output_layer_trained(req) else None
        )
        if req.chunked_loss and liger.applies(req)
        else act.fused_head_loss_bytes(
            arch,
            logit_bytes,
            tokens,
            req.method == Method.FULL or "lm_head" in req.lora_modules_to_save.value,
        )
        if req.chunked_loss and req.loss_fused_lm_head
        else act.grad_in_forward_loss_bytes(arch, logit_bytes, tokens)
        if req.chunked_loss and req.loss_grad_in_forward
        else act.held_chunks_loss_bytes(
            arch,
            logit_bytes,
            req.micro_batch_size,
            req.local_seq_len,
            _output_layer_trained(req),
        )
        if _held_chunks_loss(req)
        else max(
            act.logits_bytes_per_token(
                arch,
                logit_bytes,
                req.chunked_loss,
                req.loss_outputs_kept,
                upcast,
                req.chunked_loss_keeps_fp32 and not req.torch_compile,
                req.loss_on_16bit_logits,
            )
            * tokens,
            act.chunked_head_grad_bytes(arch, logit_bytes, tokens)
            if req.chunked_loss and req.output_layer_chunked and _output_layer_trained(req)
            else 0,
        ),
        kept_logits=arch.vocab_size * logit_bytes * tokens
        if _held_chunks_loss(req)
        else act.kept_logits_bytes_per_token(
            arch,
            logit_bytes,
            req.chunked_loss,
            req.loss_outputs_kept,
            upcast,
        )
        * tokens,
        per_token_block=act.block_bytes_per_token(arch, cfg),
        host=host,
        indexer_spike=spike,
        head=head,
        indexer_pre=pre,
        scores_saved=scores_saved,
        scores_backward=scores_bwd,
        scores_held=scores_held,
        scores_freed=scores_freed,
        shared_mask=shared_mask_bytes(req, reg),
        output_cast=act.output_cast_bytes_per_token(
            arch, logit_bytes, not req.chunked_loss and not req.loss_on_16bit_logits
        )
        * tokens
        if cast
        else 0,
    )


def returned_logit_bytes(req: EstimateRequest, reg: st.Regime) -> int:
    """Bytes per value of the logits the output layer writes: the activations' dtype, except
    the output layer cast back to bf16 after kbit preparation, which writes 16-bit logits
    (autocast, the only way its bf16 weight meets the fp32 final norm), upcast by the loss.
    The allocator replay (:mod:`calc.step_events`) sizes the same tensors with it."""
    return st.BF16_BYTES if st.embeddings_recast(req, reg) else reg.compute_bytes


WHOLE_LOGITS_MAX_TOKENS = 1024
"""Tokens of a micro-batch (``bsz * q_len``: micro-batch size x padded length) up to which
Unsloth from b9fe2588 (2024-12-10) to 0cd0635a (2025-10-22) built the whole logits instead of
its fused loss: ``models/llama.py`` ``CausalLM_fast_forward``, ``if bsz*q_len <= 1024:
RETURN_LOGITS = True`` (``# < 1024 Normal Unsloth uses less VRAM!``); read with
``loss_whole_logits_small_batches``."""


def loss_at_size(req: EstimateRequest) -> EstimateRequest:
    """The request as its loss runs on micro-batches of ``micro_batch_size x seq_len`` tokens:
    at most :data:`WHOLE_LOGITS_MAX_TOKENS` of them with ``loss_whole_logits_small_batches``, a
    fused loss (``loss_fused_lm_head``, ``loss_grad_in_forward``) gives way to the whole 16-bit
    logits held by the loss (``chunked_loss`` alone: ``act V`` per token,
    :func:`calc.activations.logits_bytes_per_token`). The estimate at a shape and the replay's
    micro-batches of each length read the loss through it."""
    if (
        not req.loss_whole_logits_small_batches
        or not req.chunked_loss
        or not (req.loss_fused_lm_head or req.loss_grad_in_forward)
        or req.micro_batch_size * req.seq_len > WHOLE_LOGITS_MAX_TOKENS
    ):
        return req
    return req.replaced(loss_fused_lm_head=False, loss_grad_in_forward=False)


def output_cast_applies(req: EstimateRequest, reg: st.Regime) -> bool:
    """``outputs_cast_fp32`` with whole 16-bit logits returned: not a fused loss that never
    builds them (``loss_fused_lm_head``, ``loss_grad_in_forward``), not a model that returns
    fp32 logits, not fp32 logits."""
    never_whole = req.chunked_loss and (
        req.loss_fused_lm_head or req.loss_grad_in_forward or liger.applies(req)
    )
    return (
        req.outputs_cast_fp32
        and returned_logit_bytes(req, reg) < act.FP32_BYTES
        and not never_whole
        and not req.logits_upcast_in_model
    )


def _output_layer_trained(req: EstimateRequest) -> bool:
    return req.method == Method.FULL or "lm_head" in req.lora_modules_to_save.value


def _held_chunks_loss(req: EstimateRequest) -> bool:
    """LitGPT's chunked 16-bit loss on logits the loop holds (``chunked_loss_holds_logits``),
    when no fused or fp32 chunked loss is read instead."""
    return (
        req.chunked_loss
        and req.chunked_loss_holds_logits
        and not req.loss_fused_lm_head
        and not req.loss_grad_in_forward
        and not req.chunked_loss_keeps_fp32
        and not liger.applies(req)
    )


def rope_cache_bytes(req: EstimateRequest) -> int:
    """The rotary tables a model keeps on the GPU: torchtune's fp32 table
    (``rope_cache_fp32``: ``max_position_embeddings x head_dim`` values, 4 bytes each, one
    module shared by every layer, torchtune 0.6.1 ``RotaryPositionalEmbeddings`` /
    ``Llama3ScaledRoPE`` ``cache``, ``[max_seq_len, head_dim // 2, 2]``, plus its ``theta``,
    ``head_dim / 2`` values) and the 16-bit cos and sin tables of :func:`rope_cache_16bit_tensors`."""
    arch = req.model
    fp32 = (
        st.FP32_BYTES * (arch.max_position_embeddings * arch.head_dim + arch.head_dim // 2)
        if req.rope_cache_fp32
        else 0
    )
    return fp32 + sum(rope_cache_16bit_tensors(req))


ROPE_CACHE_16BIT_POSITIONS = 4 * 8192
"""Positions Unsloth's rotary module precomputes at construction, at most
(``current_rope_size = min(4 * 8192, max_position_embeddings)``, ``models/llama.py``
``LlamaRotaryEmbedding`` at 2024.9.post3 c0b4d640 line 1079 and at 015bdef0d9 line 1811); it
grows the tables only when a longer sequence arrives."""


def rope_cache_16bit_tensors(req: EstimateRequest) -> list[int]:
    """The cos and sin tables of ``rope_cache_16bit``, each ``min(32768,
    max_position_embeddings) x head_dim`` values in the 16-bit dtype the model was built in
    (``torch.get_default_dtype()`` while transformers builds it): two per rotary module, one
    module in the model (``model``) or one more in every attention layer (``per-layer``)."""
    kind = req.rope_cache_16bit
    if kind is RopeCache16Bit.NONE:
        return []
    arch = req.model
    modules = 1 + (arch.num_layers if kind is RopeCache16Bit.PER_LAYER else 0)
    positions = min(ROPE_CACHE_16BIT_POSITIONS, arch.max_position_embeddings)
    table = positions * arch.head_dim * st.BF16_BYTES
    return [table] * (2 * modules)


def sparse_causal_mask_bytes(req: EstimateRequest, reg: st.Regime) -> int:
    """The causal mask a sparse-attention model builds once per forward, ``b x 1 x s x s``:
    DeepSeek-V3.2 and GLM-5 ask for it even where SDPA could skip it
    (``create_causal_mask(..., allow_is_causal_skip=False)``, transformers 5.17
    ``DeepseekV32Model.forward``), boolean for SDPA and of the activation dtype for eager
    attention. It lives through the forward and, with checkpointing, until the last block's
    backward (each checkpointed block keeps it as an argument to recompute with)."""
    if not (req.model.sparse_attention or req.model.hyper_connections):
        # DeepSeek-V4 runs eager attention only: create_sliding_window_causal_mask always
        # builds its mask in the activation dtype
        return 0
    per = 1 if req.attention is Attention.SDPA else reg.compute_bytes
    return req.micro_batch_size * req.seq_len * req.seq_len * per


def request_mask_tensor(req: EstimateRequest) -> bool:
    """Whether the request says the model builds a 4-D mask tensor: a padded batch
    (``attention_mask`` ``padding``) or packed samples that attend each within itself
    (``packed_attention`` ``per-sample``, read with ``length_stats`` as the time model reads
    it), under SDPA or eager attention. Flash attention takes none (transformers 5.17
    ``masking_utils.flash_attention_mask`` keeps the 2-D padding mask, or nothing)."""
    if req.attention not in (Attention.SDPA, Attention.EAGER):
        return False
    return req.attention_mask is AttentionMask.PADDING or request_attention_span(req) is not None


def shared_mask_bytes(req: EstimateRequest, reg: st.Regime) -> int:
    """The 4-D mask the model builds once per forward and hands to every block, ``b x 1 x s x
    s``: a sparse-attention model's (:func:`sparse_causal_mask_bytes`), or the one a request
    with a mask tensor (:func:`request_mask_tensor`) makes ``create_causal_mask`` build
    (transformers 5.17 ``masking_utils.py``): padding or a packed block pattern stop
    ``_ignore_causal_mask_sdpa`` from returning ``None``, so ``sdpa_mask`` materialises
    ``mask_function(...)`` over ``(b, 1, s, s)``, one boolean per element (lines 496-519);
    ``eager_mask`` turns that into the activation dtype with ``torch.where(mask, 0, min)``
    (lines 585-604); a packed block pattern (position ids that restart,
    ``find_packed_sequence_indices``) sets ``allow_is_causal_skip = False`` (lines 970-974).
    Its lifetime is the sparse model's: the forward, and with checkpointing until the first
    block's backward (``GradientCheckpointingLayer.__call__`` checkpoints ``partial(...,
    **kwargs)``, the mask among the kwargs: ``modeling_layers.py`` line 108)."""
    sparse = sparse_causal_mask_bytes(req, reg)
    if sparse:
        return sparse
    if req.attention is Attention.EAGER and window_masks(req):
        # eager attention takes every mask as a tensor (masking_utils.eager_mask: torch.where
        # over the batch's boolean mask, into the activation dtype), padded or not: the causal
        # one, and beside it the sliding one where only some blocks have the window
        arch = req.model
        _, windowed = window_of(arch)
        masks = 2 if 0 < windowed < arch.num_layers else 1
        return masks * req.micro_batch_size * req.seq_len * req.seq_len * reg.compute_bytes
    window = window_mask_bytes(req, reg)
    if not request_mask_tensor(req):
        return window
    per = 1 if req.attention is Attention.SDPA and req.sdpa_mask_boolean else reg.compute_bytes
    return req.micro_batch_size * req.seq_len * req.seq_len * per + window


def window_masks(req: EstimateRequest) -> bool:
    """The request's stack runs transformers' own attention, which builds the sliding-window
    masks (:mod:`calc.attention_windows`); not Unsloth, whose patched attention hands its
    kernels the window itself (xformers' local attention, flash-attn's ``window_size``), nor
    torchtune and LitGPT (their own modules, not read here)."""
    return req.framework.value in TRANSFORMERS_FRAMEWORKS and req.framework is not Framework.UNSLOTH


def window_mask_bytes(req: EstimateRequest, reg: st.Regime) -> int:
    """The mask of the blocks with a sliding window (:mod:`calc.attention_windows`), built once
    per forward beside the full blocks' (transformers 5.17: ``causal_mask_mapping
    ["sliding_attention"] = create_sliding_window_causal_mask(...)``; a stack whose blocks all
    have the window builds that one only) and handed to each of them, with the lifetime of
    :func:`shared_mask_bytes`. Under SDPA only once the keys reach the window
    (:func:`calc.attention_windows.sdpa_mask_tensor`) or a padded batch needs one: ``sdpa_mask``
    broadcasts the window over ``(1, 1, s, s)`` booleans and expands the batch as a view
    (``_non_vmap_expansion_sdpa``, lines 507-512: ``s^2`` bytes), ``b s^2`` with padding (the
    padding mask brings the batch index); with ``sdpa_mask_boolean`` off (transformers 4.52 and
    before) an additive ``b x 1 x s x s`` mask of the activation dtype. A stack whose every
    block has the window and a padded batch: that mask is the padding one
    :func:`shared_mask_bytes` counts.
    Not with flash attention (the window is the kernel's argument), nor outside transformers'
    code (:func:`window_masks`). Eager attention's masks are left to the eager count."""
    arch = req.model
    window, windowed = window_of(arch)
    if not windowed or req.attention is not Attention.SDPA or not window_masks(req):
        return 0
    padded = request_mask_tensor(req)
    if not (padded or sdpa_mask_tensor(window, req.seq_len)):
        return 0
    if padded and windowed == arch.num_layers:
        return 0
    if not req.sdpa_mask_boolean:
        return req.micro_batch_size * req.seq_len * req.seq_len * reg.compute_bytes
    batch = req.micro_batch_size if padded else 1
    return batch * req.seq_len * req.seq_len


# ---- phases and peak ----------------------------------------------------------------------


def _phase(**parts: int) -> JsonObject:
    return {name: int(parts.get(name, 0)) for name in COMPONENTS}


def phase_components(req: EstimateRequest, reg: st.Regime, s: States, a: Activations) -> JsonObject:
    """Component bytes alive at each phase."""
    common = dict(weights=s.weights, lora_weights=s.lora_weights, optimizer=s.optimizer)
    gathered_fwd, gathered = gathered_weight_bytes(req, reg)
    # a 4-bit matmul's backward: its dequantized weight and the gradients around it, when
    # that moment exceeds the block's other gradients in flight (dequant_matmul_bytes)
    dq_grads, dq_weight = dequant_matmul_bytes(req, reg)
    in_flight, dequant = a.workspace, 0
    if dq_grads + dq_weight > a.workspace:
        in_flight, dequant = dq_grads, dq_weight
    # the terms below that depend on checkpointing read it on when every block is wrapped;
    # every-n with blocks left unwrapped counts them as without checkpointing (an upper bound)
    copies_all = weight_copy_bytes(req, reg, one_layer=req.every_block_wrapped and req.is_peft)
    copies_one = weight_copy_bytes(req, reg, one_layer=True)
    # a checkpointed forward saves no frozen weight's copy: at its end only the output
    # layer's (oracle: llama/lora-mixed-ckpt-fp16-weights, +9.8 % before)
    copies_fwd = (
        weight_copy_bytes(req, reg, one_layer=True, blocks=False)
        if req.every_block_wrapped and req.is_peft
        else copies_all
    )
    merged_all = merged_expert_bytes(req, reg, one_layer=False)
    merged_one = merged_expert_bytes(req, reg, one_layer=True)
    # checkpointing discards what the forward saved: the merged stacks come back one layer
    # at a time, with the recompute
    merged_fwd = 0 if req.every_block_wrapped else merged_all
    merged_first = merged_one if req.every_block_wrapped else merged_all
    # with accumulation (or kept from the previous step) the gradients are there from the
    # start, and DeepSpeed's ZeRO-3 allocates its gradient partition before the first step
    stored = st.gradients_held_from_start(req)
    held = s.grads_all if stored or st.grad_partition_held(req) else 0
    # the loop may still hold the previous micro-batch's logits and, through their graph, its
    # 4-bit inputs (previous_outputs_kept)
    prev_acts, prev_logits = previous_micro_batch_bytes(req, reg)
    # the 4-D mask built once per forward (shared_mask_bytes), kept by every checkpointed
    # block until its backward
    held_mask = a.shared_mask if req.every_block_wrapped else 0
    forward_end = _phase(
        **common,
        activations=a.saved_all + prev_acts + held_mask,
        logits=max(a.logits, a.output_cast) + prev_logits,
        gradients=held,
        weight_copies=copies_fwd + merged_fwd,
        gathered_weights=gathered_fwd,
        comm_buffers=s.comm_static,
    )
    if _held_chunks_loss(req) and (prev_acts or prev_logits):
        # the loss's peak comes after 'logits = model(...)' has dropped the previous
        # micro-batch; the forward's end, with this step's logits written, still holds it
        tokens = req.micro_batch_size * req.local_seq_len
        loss_peak = _phase(
            **{**forward_end, "activations": a.saved_all + held_mask, "logits": a.logits}
        )
        written = _phase(
            **{
                **forward_end,
                "logits": req.model.vocab_size * reg.compute_bytes * tokens + prev_logits,
            }
        )
        forward_end = max(loss_peak, written, key=lambda parts: sum(parts.values()))
    if a.indexer_spike:
        # the last block's indexer: every earlier block's saved tensors, what that block has
        # saved so far, the causal mask and the indexer's transient
        before = a.saved_all - a.head
        if not req.every_block_wrapped:
            before += a.indexer_pre - a.last_block
        elif a.scores_saved:
            # a checkpointed block saves nothing, but its norm output and q, k, v are alive as
            # the forward's locals while its eager attention runs (oracle: falcon and
            # llama/lora-eager-ckpt-s2048)
            before += a.indexer_pre
        spike = _phase(
            **{
                **forward_end,
                "activations": before + a.shared_mask + a.indexer_spike + prev_acts,
                "logits": prev_logits,
                # the last block's merged expert stacks come after its attention
                "weight_copies": copies_all + max(0, merged_fwd - merged_one),
            }
        )
        forward_end = max(forward_end, spike, key=lambda parts: sum(parts.values()))
    elif a.shared_mask and not req.every_block_wrapped:
        # unheld, the mask is freed when the model's forward returns: its last moment is the
        # last block's forward, with every block's saved tensors
        last_forward = _phase(
            **{
                **forward_end,
                "activations": a.saved_all - a.head + a.shared_mask + prev_acts,
                "logits": prev_logits,
            }
        )
        forward_end = max(forward_end, last_forward, key=lambda parts: sum(parts.values()))
    head_dequant = output_layer_dequant_bytes(req)
    if head_dequant:
        # a 4-bit output layer's matmul: its dequantized weight with the 16-bit logits written
        # so far, before the loss (whose own peak is the moment above)
        tokens = req.micro_batch_size * req.local_seq_len
        head = _phase(
            **{
                **forward_end,
                "logits": req.model.vocab_size * reg.compute_bytes * tokens + prev_logits,
                "dequant_buffer": head_dequant,
            }
        )
        forward_end = max(forward_end, head, key=lambda parts: sum(parts.values()))
    table = embedding_grad_bytes(req, reg)
    # full fine-tuning of a tied table (or peft's shared copy): the output layer's gradient is
    # the embedding's
    tied = req.model.tie_word_embeddings and req.method is Method.FULL or st.saved_copy_tied(req)
    # held from the start (stored), the table's gradient is there already, and a tied table's
    # output-layer contribution waits in the engine's input buffer beside it
    # a trainable output layer copy (lora_modules_to_save) has its gradient from the start;
    # full fine-tuning without stored gradients: the output layer's backward has written its
    # weight gradient (tied: the contribution that waits in the engine's input buffer) before
    # any block's backward (oracle: llama/full-b2-s512 -5.5 %, llama3-gqa-tied/full-b2-s512
    # -8.8 % on this moment before)
    full = req.method is Method.FULL
    head_copy = st.trained_output_layer_params(req)
    head_grad = 0 if held else head_copy * st.saved_regime(req, reg).grad_bytes
    # autocast's 16-bit copy of the output layer (frozen or trained), saved by its matmul, is
    # freed by that matmul's backward, which runs before any block's (oracle:
    # */lora-save-head-mixed +6 %, llama/lora-mixed +9.4 % on this moment before)
    head_cast = weight_copy_bytes(req, reg, one_layer=True, blocks=False) - (
        hyper_connection_copy_bytes(req, reg, one_layer=True)
    )
    first_block = _phase(
        **common,
        activations=a.saved_all + a.recompute + in_flight + held_mask,
        logits=a.kept_logits,
        gradients=held + head_grad + (table if (tied if stored else full) else 0),
        weight_copies=copies_all + merged_first - head_cast,
        gathered_weights=gathered,
        dequant_buffer=dequant,
        comm_buffers=s.comm_static,
    )
    last_block = _phase(
        **common,
        activations=a.last_block + in_flight + held_mask,
        gradients=s.grads_all + (table if tied else 0)
        if stored
        else s.grads_all - (0 if tied else table),
        logits=a.kept_logits,
        weight_copies=copies_one + merged_one - head_cast,
        gathered_weights=gathered,
        dequant_buffer=dequant,
        comm_buffers=s.comm_static + s.comm_backward,
    )
    candidates = [first_block, last_block]
    if a.scores_backward:
        # eager attention's softmax gradient in the first block's backward: the block's q, k,
        # v and probabilities stay, what its backward has freed is gone (Activations.
        # scores_freed; oracle: */lora-eager-ckpt-s2048)
        here = a.saved_all + (a.recompute if req.every_block_wrapped else 0) - a.scores_freed
        candidates.append(
            {
                **first_block,
                "activations": here + a.scores_backward + held_mask,
                # and its merged expert stacks, saved for the MLP's backward, are freed
                "weight_copies": copies_all + merged_first - merged_one - head_cast,
            }
        )
    if a.indexer_spike and req.every_block_wrapped:
        # each block's recompute runs its indexer again: at the first block recomputed (every
        # checkpoint alive) and at the last one (every later block's gradient alive)
        indexer = a.indexer_pre + a.indexer_spike + a.shared_mask
        if req.model.hyper_connections:
            # DeepSeek-V4's attention transient: its widest block's recompute, once the
            # backward has left the model's head (hc_head's tensors freed) and with the
            # gradient of that block's output streams coming in
            arch = req.model
            tokens = req.micro_batch_size * req.local_seq_len
            incoming = reg.compute_bytes * arch.hyper_connections * arch.hidden_size * tokens
            activations = a.saved_all - a.head + indexer + incoming
            candidates.append({**first_block, "activations": activations})
        else:
            indexer -= a.scores_held
            candidates.append({**first_block, "activations": a.saved_all + indexer})
            # at the last block recomputed, the later blocks' checkpoints are gone: its own
            # input is the one left
            own = (a.saved_all - a.head) // req.model.num_layers
            candidates.append({**last_block, "activations": indexer + own})
    if table:
        # the embedding's backward, after every block's: all gradients; tied to the output
        # layer, its gradient meets the output layer's in the engine's input buffer, which
        # sums them out of place: two more tables for a moment. Held from the start, the sum
        # (untied: the embedding's own gradient) is one table more, added into the stored
        # gradient in place
        extra = (3 if tied else 1) * table if stored else (2 if tied else 0) * table
        # autocast's weight copies are freed with the backward of the matmuls that saved them
        candidates.append(
            _phase(
                **common,
                gradients=s.grads_all + extra,
                logits=a.kept_logits,
                gathered_weights=gathered,
                comm_buffers=s.comm_static + s.comm_backward,
            )
        )
    root_grads = root_gradient_bytes(req, reg)
    if root_grads:
        # FSDP1's root unit: its flat gradient assembled at the end of the backward, every
        # block's gradient done, the root still gathered (root_gradient_bytes)
        candidates.append(
            _phase(
                **common,
                gradients=s.grads_all,
                logits=a.kept_logits,
                gathered_weights=root_unit_bytes(req, reg),
                comm_buffers=s.comm_static + root_grads,
            )
        )
    stack_grad, block_grads = merged_expert_grad_bytes(req, reg)
    if stack_grad:
        # a merged expert stack's gradient: in the first block of the backward (nothing else
        # has a gradient yet) and in the last, whose own adapters have none yet
        candidates.append({**first_block, "activations": first_block["activations"] + stack_grad})
        candidates.append(
            {
                **last_block,
                "activations": last_block["activations"] + stack_grad,
                "gradients": last_block["gradients"] - block_grads,
            }
        )
    backward = max(candidates, key=lambda parts: sum(parts.values()))
    phases = {"forward_end": forward_end, "backward": backward}
    if not req.optimizer_in_backward:
        # the step runs while the loop holds this micro-batch's logits (previous_outputs_kept)
        phases["optimizer_step"] = _phase(
            **common,
            gradients=s.grads_all,
            optimizer_temporaries=s.optimizer_temp,
            activations=prev_acts,
            logits=prev_logits,
            comm_buffers=s.comm_static,
        )
    return phases


def embedding_grad_bytes(req: EstimateRequest, reg: st.Regime) -> int:
    """The embedding table's gradient, when the embedding trains on one unsharded GPU.

    The embedding is the last module of the backward: while the first block's backward
    runs its gradient does not exist yet, so the last-block moment holds every gradient
    but this one (untied). Tied to the output layer, the table already has the output
    layer's gradient; autograd's engine sums the two contributions in its input buffer
    out of place (``torch/csrc/autograd/input_buffer.cpp`` ``accumulate``, torch 2.13):
    the stored gradient, the embedding's and their sum coexist, ``2 V h`` more than all
    gradients. Both read from the oracle's trace (tools/oracle) and the engine's code.
    With gradients held from the start (accumulation, or ``zero_grad_set_to_none`` False) the
    stored gradient exists already and ``AccumulateGrad`` adds the incoming one in place: the
    incoming table is a temporary beside it (``V h`` more untied, ``3 V h`` tied), and a tied
    table's output-layer contribution waits in the input buffer through the whole backward
    (oracle: two steps with ``zero_grad(set_to_none=False)``).
    LoRA / QLoRA with the embedding in ``lora_modules_to_save``: the same for its trainable
    copy, which no output layer shares (peft's copy unties it), at the copy's dtype: the
    base weights' (oracle: ``*/lora-save-*``), bf16 where TRL casts it back after kbit
    preparation (:func:`calc.states.saved_regime`)."""
    if (
        (req.method is not Method.FULL and not st.saved_module_params(req)[0])
        or req.optimizer_in_backward
        or req.num_gpus > 1
        or req.cpu_offload is not CpuOffload.NONE
    ):
        return 0
    grad_bytes = (
        reg.grad_bytes if req.method is Method.FULL else st.saved_regime(req, reg).grad_bytes
    )
    return req.model.vocab_size * req.model.hidden_size * grad_bytes


SIMULATED_VERDICT = False
"""Whether every estimate replays PyTorch's caching allocator over its steps
(:func:`calc.step_events.simulate_request`) and carries ``min_device_bytes`` with its
calibrated range (:data:`calc.calibration.MIN_DEVICE_BANDS`), which the verdict then judges
everywhere (:func:`calc.recommend.need_of`; ``verdict_basis`` ``min_device_bytes``). Off:
the verdict judges ``device_total_bytes`` and its range (``verdict_basis``
``device_total_bytes``), and only an estimate with ``length_stats`` shows
``min_device_bytes`` (:func:`estimate_dict`), for information. The one switch: on, a plan
replays each of its setups (about fifty; the ones other than the request itself judged from
certain bounds of the figure, :func:`estimate_alternative`, the walk run only where they leave
a verdict open), still about a second a plan in CPython where the calculator needs a tenth of
that (``python -m benchmarks.bench_plan --simulated``)."""


def estimate_request(req: EstimateRequest) -> MemoryEstimate:
    """Peak memory per GPU for a validated request. With ``length_stats``, at the longest
    micro-batch of the data's step sequence (:mod:`calc.lengths`): its padded length per sample
    stands for ``seq_len``; the response echoes the request as given and adds ``data``. With
    :data:`SIMULATED_VERDICT`, the replayed allocator's smallest device too
    (:func:`with_min_device`)."""
    est = _estimate_shaped(req)
    return with_min_device(req, est) if SIMULATED_VERDICT else est


def _estimate_shaped(req: EstimateRequest, drawn: bool = True) -> MemoryEstimate:
    """:func:`estimate_request` without ``min_device_bytes``. ``drawn`` False: without the
    ``data`` block, so without drawing the samples (:func:`calc.lengths.request_peak`: the
    same peak length and fit), for the setups a plan only weighs."""
    if req.length_stats is None:
        return _estimate_kept(req)
    if drawn:
        shape = request_shape(req)
        assert shape is not None
        peak, exact, data = shape.peak_length, shape.exact, shape.to_dict()
    else:
        found = request_peak(req)
        assert found is not None
        (peak, exact), data = found, None
    # the run's length reaches the estimate only through the peak length: left out of the key
    # (padding-free: the peak micro-batch is one row of that many tokens)
    at_peak = as_rows(req).replaced(seq_len=peak, max_steps=None, samples_seen=None)
    est = _estimate_kept(at_peak)
    warnings = est.warnings if exact else (*est.warnings, "length_stats_approximated")
    return replace(est, request=req, data=data, warnings=warnings)


class BoundedEstimate(dict[str, Any]):
    """An estimate response (a JSON object like any other to its readers) whose
    ``min_device_bytes`` a verdict finds only as far as it needs: :attr:`min_device`
    (:class:`calc.step_events.MinDevice`), read by :func:`calc.recommend.need_of`."""

    min_device: Any = None


def estimate_alternative(req: EstimateRequest) -> JsonObject:
    """The estimate response of a setup calc weighs against the request (a plan's other
    counts, shardings, micro-batches, lengths and suggested changes:
    :class:`calc.recommend.Estimator`). With :data:`SIMULATED_VERDICT`, without
    ``min_device_bytes``: a :class:`BoundedEstimate` (``verdict_basis``
    ``min_device_bounds``) whose verdicts come from certain bounds of it, and from the
    figure itself only where the bounds leave a card's verdict open
    (:func:`calc.recommend.judge`); the verdicts are those the figure gives. Else
    :func:`estimate_request`'s response. Either way without the ``data`` block of a request
    with ``length_stats`` (no reader of a weighed setup reads it, and drawing it for each of a
    solver's lengths was a fifth of a plan's time)."""
    if not SIMULATED_VERDICT:
        return _estimate_shaped(req, drawn=False).to_dict()
    from .step_events import MinDevice

    out = BoundedEstimate(_estimate_shaped(req, drawn=False).to_dict())
    out["verdict_basis"] = "min_device_bounds"
    out.min_device = MinDevice(req)
    return out


def with_min_device(req: EstimateRequest, est: MemoryEstimate) -> MemoryEstimate:
    """``est`` with ``min_device_bytes`` (:func:`calc.step_events.simulate_request` of the
    request: the data's steps with ``length_stats``, else two steps at ``seq_len``), its
    calibrated range, and ``verdict_basis`` ``min_device_bytes``. Where the replay cannot run
    the sequence calc built (an inconsistency of the replay, not of the request), the estimate
    stays judged on ``device_total_bytes`` and says so (warning
    ``min_device_not_simulated``)."""
    from .step_events import simulate_request

    try:
        need = simulate_request(req).min_device_bytes
    except AssertionError:
        return replace(est, warnings=(*est.warnings, "min_device_not_simulated"))
    return replace(
        est,
        min_device_bytes=need,
        min_device_range_bytes=tuple(calibration.min_device_range_bytes(need, req.method.value)),
        verdict_basis="min_device_bytes",
    )


_KEPT: dict[EstimateRequest, MemoryEstimate] = {}
_KEPT_LIMIT = 2048
"""How many estimates :func:`_estimate_kept` keeps (all dropped when full): a plan weighs
about fifty setups, and the calculator's next plan (another price, epochs, card, or a
solver's neighbouring length) asks for most of them again."""


def _estimate_kept(req: EstimateRequest) -> MemoryEstimate:
    """:func:`_estimate_at`, kept by request value (estimates are immutable; a request's hash
    costs microseconds, an estimate a millisecond)."""
    hit = _KEPT.get(req)
    if hit is None:
        if len(_KEPT) >= _KEPT_LIMIT:
            _KEPT.clear()
        hit = _KEPT[req] = _estimate_at(req)
    return hit


def forget_estimates() -> None:
    """Forget the kept estimates: for a caller that changes a module constant the estimate
    reads (a leave-one-source-out refit) or times a cold start."""
    _KEPT.clear()


def _estimate_at(req: EstimateRequest) -> MemoryEstimate:
    """Peak memory per GPU of micro-batches of ``micro_batch_size`` x ``seq_len`` tokens."""
    reg = st.request_regime(req)
    layout = st.param_layout(req)
    states = model_states(req, layout, reg)
    loss_req = loss_at_size(req)
    acts = activation_bytes(loss_req, reg)
    phases = phase_components(loss_req, reg, states, acts)
    totals = {name: sum(parts.values()) for name, parts in phases.items()}
    peak_phase = max(PHASES, key=lambda p: totals.get(p, -1))
    allocated = totals[peak_phase]
    quant_reserved = quantization_reserved_bytes(req)
    wrap_reserved = fsdp_wrap_reserved_bytes(req, reg, states)
    slack = FSDP1_ALLOCATOR_SLACK_FRACTION if fsdp1_slack_applies(req) else ALLOCATOR_SLACK_FRACTION
    reserved = max(reserved_bytes(allocated, slack), quant_reserved, wrap_reserved)
    device = reserved + outside_allocator_bytes(req.num_gpus)
    return MemoryEstimate(
        peak_allocated_bytes=allocated,
        peak_reserved_bytes=reserved,
        device_total_bytes=device,
        components=phases[peak_phase],
        peak_phase=peak_phase,
        phases=totals,
        params_total=layout.total,
        params_trainable=layout.trainable,
        host_bytes=states.host + acts.host,
        unified_memory_bytes=states.unified,
        model_states_bytes=model_states_total(states),
        activations_per_token_bytes=acts.per_token_block,
        warnings=tuple(warnings_for(req)),
        quantization_reserved_bytes=quant_reserved,
        request=req,
        fsdp_wrap_reserved_bytes=wrap_reserved,
        allocator_slack_fraction=slack,
        # calibrated ranges: the held-out error of this method and metric (calc.calibration)
        peak_allocated_range_bytes=tuple(
            calibration.range_bytes(allocated, req.method.value, "allocated")
        ),
        peak_reserved_range_bytes=tuple(
            calibration.range_bytes(reserved, req.method.value, "reserved")
        ),
        params_active=req.model.params_active,
    )


def model_states_total(s: States) -> int:
    """Weights + adapters + all gradients + optimizer states on one GPU (the ZeRO paper's
    "model states"), whether or not they peak together."""
    return s.weights + s.lora_weights + s.grads_all + s.optimizer


def reserved_bytes(allocated: int, slack: float | None = None) -> int:
    """``allocated * (1 + slack)`` (default :data:`ALLOCATOR_SLACK_FRACTION`), rounded up to
    whole 2 MiB segments."""
    return whole_segments(
        int(allocated * (1 + (ALLOCATOR_SLACK_FRACTION if slack is None else slack)))
    )


SPARSE_DENSE_MASK_SEQ_LEN = 4096
"""Above this many tokens per sequence, transformers' torch path of DeepSeek sparse attention
holds ``s x s`` tensors that outgrow the rest: a mask per block saved by SDPA
(:func:`calc.activations.mask_copy_bytes`) and the indexer's fp32 scores
(:func:`calc.activations.indexer_transient_bytes_per_token`). DeepSeek-V3.2 at 4096 tokens:
8 GiB of indexer scores and 2 GiB of masks per sequence, growing fourfold per doubling."""


def warnings_for(req: EstimateRequest) -> list[str]:
    out = request_warnings(req)
    if st.is_paged(req.optimizer):
        out.append("paged_optimizer_states_in_unified_memory")
    if req.activation_offload and not req.gradient_checkpointing:
        out.append("activation_offload_without_checkpointing")
    if req.attention is Attention.EAGER and req.seq_len > 8192:
        out.append("eager_attention_long_sequence")
    if req.model.sparse_attention:
        if req.attention is Attention.FLASH:
            # DeepseekV32PreTrainedModel / GlmMoeDsaPreTrainedModel: _supports_flash_attn = False
            out.append("sparse_attention_flash_refused")
        elif req.seq_len > SPARSE_DENSE_MASK_SEQ_LEN:
            out.append("sparse_attention_dense_mask_long_sequence")
    if req.is_peft and req.lora_rank > req.model.hidden_size:
        # an adapter wider than the layer it adapts: a typo (65536 for 64), not a setup
        out.append("lora_rank_above_hidden")
    out += library_rejections(
        req.model, req.framework.value, req.attention.value, req.is_peft, req.lora_targets
    )
    if (
        req.model.linear_attention is not None
        and not req.model.extra.get("kda")
        and req.precision is Precision.FP32
    ):
        # flash-linear-attention's chunk_gated_delta_rule: ``assert q.dtype != torch.float32``
        # (fla/ops/gated_delta_rule/chunk.py); calc counts that kernel's tensors (its chunk_kda,
        # Kimi Linear's, has no such check: fla/ops/kda/chunk.py)
        out.append("linear_attention_fp32_refused_by_fla")
    if (
        req.model.mamba is not None
        and req.method is Method.QLORA
        and req.framework.value in TRANSFORMERS_FRAMEWORKS
    ):
        # NemotronHMamba2Mixer.forward hands mamba-ssm's fused function
        # ``outproj_weight=self.out_proj.weight``, which bitsandbytes has packed into 4 bits:
        # its ``F.linear`` fails on the packed shape (traced: tools/oracle)
        out.append("qlora_mamba_out_proj_packed")
    return out


def estimate_dict(request: object) -> JsonObject:
    """JSON in, JSON out: validate the request, estimate, serialise (with
    :func:`with_allocator`)."""
    return estimate_response(parse_estimate_request(request))


def estimate_response(req: EstimateRequest) -> JsonObject:
    """:func:`estimate_dict`'s response for a request already validated."""
    return with_allocator(req, estimate_request(req).to_dict())


_DEFERRED = [False]  # set by allocator_deferred (one thread: the worker's, or a test's)


@contextmanager
def allocator_deferred(defer: bool = True) -> Iterator[None]:
    """Within it, :func:`with_allocator` leaves the replay for later: the response carries
    ``min_device_pending: true`` instead of ``allocator`` and ``min_device_bytes``. The
    calculator's worker answers a change at once this way and adds the replay's figures in a
    second answer (``calc_view.session.Session.complete``), which a newer change skips; the
    verdicts do not read them while :data:`SIMULATED_VERDICT` is off."""
    before = _DEFERRED[0]
    _DEFERRED[0] = defer and not SIMULATED_VERDICT
    try:
        yield
    finally:
        _DEFERRED[0] = before


def min_device_is_bound(response: JsonObject) -> bool:
    """Whether an estimate response's ``min_device_bytes`` is a proven upper bound rather than
    the exact threshold (``allocator.min_allocator_exact`` false: the capacity walk's budget
    ran out first), as :func:`with_allocator` writes it. The CLI's table and the calculator
    say "at most" then."""
    allocator = response.get("allocator")
    return isinstance(allocator, dict) and allocator.get("min_allocator_exact") is False


def with_allocator(req: EstimateRequest, out: JsonObject) -> JsonObject:
    """``out`` (the estimate response of ``req``) with, where ``req`` has ``length_stats``,
    PyTorch's caching allocator replayed over the data's growing steps
    (:func:`calc.step_events.simulate_request`): ``allocator`` and ``min_device_bytes``. Only
    the response of the request itself (``estimate``, and ``plan``'s ``memory``): the plan's
    other setups and the guides' tables do not pay for the replay unless
    :data:`SIMULATED_VERDICT` is on. Within :func:`allocator_deferred`: ``min_device_pending``
    instead."""
    if req.length_stats is not None and _DEFERRED[0]:
        return {**out, "min_device_pending": True}
    if req.length_stats is not None:
        from .step_events import simulate_request

        simulated = simulate_request(req)
        out = dict(out)
        out["allocator"] = simulated.to_dict()
        out["min_device_bytes"] = simulated.min_device_bytes
    return out
