"""The estimate request: validation of a plain dict into a frozen dataclass.

The key names and defaults are a public contract (CLI, browser, URL query):
add keys freely, rename none. Validation never guesses: unknown keys, wrong
types, non-positive or non-integer sizes and unknown enum values raise
:class:`~calc.errors.InputError` with a stable ``code`` and the ``field``.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import fields as dataclass_fields
from enum import Enum
from typing import Any, Callable, Iterator, Mapping

from . import liger
from .arch import ModelArch
from .checkpointing import Granularity, selective_op_counted, wrapped_blocks
from .checkpointing import check as check_granularity
from .errors import CalcError, ConfigError, InputError
from .fields import (
    BY_KEY,
    MAX_ACCUMULATION,
    MAX_GPUS,
    MAX_LORA_RANK,
    MAX_MICRO_BATCH,
    MAX_SEQ_LEN,
    PLAN,
    AdapterDtype,
    AttentionMask,
    Attention,
    CheckpointingGranularity,
    CpuOffload,
    FieldSpec,
    Fp8Library,
    Method,
    ModulesToSave,
    LoadWarmup,
    MoeExpertLayout,
    Optimizer,
    Precision,
    RopeCache16Bit,
    Sharding,
    ShardingEngine,
    check_bool,
    check_enum,
    check_fraction,
    check_int,
    check_number,
    field_specs,
    given_fields,
    int_range,
    number_range,
)
from .frameworks import PROFILES, Framework, apply_profile
from .jsontypes import JsonObject
from .lengths import Batching, LengthStats, PackedAttention, check_consistent


# the estimate request's keys in the registry's order (to_dict walks them for every setup a
# plan weighs)
_ESTIMATE_KEYS = tuple(spec.key for spec in field_specs("estimate"))
_ESTIMATE_KEY_SET = frozenset(_ESTIMATE_KEYS)


@dataclass(frozen=True)
class EstimateRequest:
    """A checked estimate request: one attribute per estimate key of :data:`calc.fields.FIELDS`
    (their defaults are there; :func:`parse_estimate_request` fills them)."""

    model: ModelArch
    model_id: str  # preset id, or "hf_config:<model_type>"
    method: Method
    lora_rank: int
    lora_targets: tuple[str, ...] | str
    qlora_double_quant: bool
    precision: Precision
    optimizer: Optimizer
    optimizer_in_backward: bool
    micro_batch_size: int
    seq_len: int
    length_stats: LengthStats | None
    batching: Batching
    gradient_checkpointing: bool
    checkpointing_granularity: CheckpointingGranularity
    checkpointing_every: int | None
    attention: Attention
    chunked_loss: bool
    activation_offload: bool
    num_gpus: int
    sharding: Sharding
    shard_group: int | None
    sequence_parallel: int
    gradient_bucket_mb: float | None
    cpu_offload: CpuOffload
    lora_dropout: float
    gradient_accumulation_steps: int
    max_steps: int | None
    qlora_keeps_inputs: bool
    frozen_weight_grads: bool
    sync_each_micro_batch: bool
    qlora_unchunked_quantization: bool
    attention_keeps_fused_qkv: bool
    optimizer_fused: bool
    optimizer_per_tensor: bool
    tf32: bool
    torch_compile: bool
    lora_adapter_dtype: AdapterDtype
    attention_grouped_kv: bool
    sequence_parallel_repeats_kv: bool
    attention_mask: AttentionMask
    fp8_library: Fp8Library
    packed_attention: PackedAttention
    sdpa_cudnn_last: bool
    flash_attention_4: bool
    sdpa_mask_boolean: bool
    gradient_clipping: bool
    offload_pinned: bool
    load_warmup: LoadWarmup
    offload_host_cast: bool
    loss_outputs_kept: bool
    zero_grad_set_to_none: bool
    outputs_cast_fp32: bool
    expandable_segments: bool
    qlora_quant_state_replicated: bool
    framework: Framework
    moe_expert_layout: MoeExpertLayout
    previous_outputs_kept: bool
    qlora_output_layer_quantized: bool
    qlora_dequant_fp16: bool
    qlora_prepare_kbit: bool
    qlora_embeddings_recast_bf16: bool
    qlora_compute_dtype_from_input: bool
    fsdp_flat_parameters: bool
    fsdp_fully_shard: bool
    fsdp_wrap_floor: bool
    logits_upcast_in_model: bool
    chunked_loss_keeps_fp32: bool
    output_layer_chunked: bool
    chunked_loss_holds_logits: bool
    lora_fused_qkv_adapter: bool
    rope_cache_fp32: bool
    rope_cache_16bit: RopeCache16Bit
    loss_on_16bit_logits: bool
    loss_fused_lm_head: bool
    loss_grad_in_forward: bool
    loss_whole_logits_small_batches: bool
    fused_lora_kernels: bool
    liger_kernel: bool
    weights_loaded_16bit: bool
    weights_loaded_other_16bit: bool
    lora_modules_to_save: ModulesToSave
    sharding_engine: ShardingEngine
    # keys the framework profile filled (not part of the JSON form): a variant of this request
    # re-evaluates the conditional ones (calc.frameworks.reapplied)
    profile_keys: tuple[str, ...] = ()
    # samples the run sees where a plan derives them from its dataset (not part of the JSON
    # form; ``max_steps`` overrides it): calc.lengths.samples_seen
    samples_seen: int | None = None

    @property
    def is_peft(self) -> bool:
        return self.method is not Method.FULL

    @property
    def local_seq_len(self) -> int:
        """Tokens of each sequence one GPU holds outside attention: ``seq_len`` split between
        the ``sequence_parallel`` GPUs of its group, the last share padded (Ulysses pads each
        sequence to a multiple of the group). Attention still sees ``seq_len`` keys."""
        return local_length(self.seq_len, self.sequence_parallel)

    @property
    def data_parallel(self) -> int:
        """Replicas that each take their own samples: ``num_gpus / sequence_parallel``."""
        return max(1, self.num_gpus // self.sequence_parallel)

    @property
    def shard_size(self) -> int:
        """GPUs that share one copy of the sharded states (:func:`shard_size`)."""
        return shard_size(self.num_gpus, self.shard_group)

    @property
    def wrapped_blocks(self) -> int:
        """Decoder blocks checkpointing wraps (:func:`calc.checkpointing.wrapped_blocks`); 0
        without checkpointing."""
        if not self.gradient_checkpointing:
            return 0
        return wrapped_blocks(
            self.model.num_layers, self.checkpointing_granularity, self.checkpointing_every
        )

    @property
    def selective_op(self) -> bool:
        """torchtitan's per-op policy, counted as such
        (:func:`calc.checkpointing.selective_op_counted`; elsewhere ``selective-op`` is
        counted as ``full``)."""
        return (
            self.gradient_checkpointing
            and self.checkpointing_granularity is Granularity.SELECTIVE_OP
            and selective_op_counted(self.model, self.method.value)
        )

    @property
    def every_block_wrapped(self) -> bool:
        """Checkpointing on and every decoder block wrapped (``full``, ``selective-op``, or
        ``every-n`` with N = 1): what the terms that depend on whether a block's forward is
        kept read."""
        return self.gradient_checkpointing and self.wrapped_blocks == self.model.num_layers

    def without_run_length(self) -> EstimateRequest:
        """This request without how long the run is (``max_steps``, ``samples_seen``): the key
        of what reads the run's length only through the data it draws (the peak length, the
        replayed steps), so two runs that draw the same share one answer."""
        return self.replaced(max_steps=None, samples_seen=None)

    def replaced(self, **changes: object) -> EstimateRequest:
        """``dataclasses.replace(self, **changes)``, without running ``__init__`` again: the
        request has no ``__post_init__`` and no derived attribute, so copying its fields and
        setting the changed ones gives the same object (a plan makes thousands, and the
        generic ``replace`` was a fifth of its time)."""
        unknown = changes.keys() - _FIELD_NAMES
        if unknown:
            raise TypeError(f"unknown request fields: {sorted(unknown)}")
        new = object.__new__(EstimateRequest)
        fields = new.__dict__
        fields.update(self.__dict__)
        fields.update(changes)
        return new

    def to_dict(self) -> JsonObject:
        """The request in its JSON form (model as its id). A plan turns a few thousand
        variants into this form, so each value's conversion is looked up by its type
        (:func:`_json_form`) rather than tested for each key."""
        fields = self.__dict__
        out = {}
        for key in _ESTIMATE_KEYS:
            value = fields[key]
            form = _JSON_FORMS.get(type(value)) or _json_form(type(value))
            out[key] = value if form is _as_is else form(value)
        out["model"] = self.model_id
        return out

    def json_view(self) -> Mapping[str, object]:
        """:meth:`to_dict` as a mapping that converts a value only when it is read: for the
        callers that read a few keys of it (a profile's conditions, for each of a plan's
        variants: :func:`calc.frameworks.reapplied`)."""
        return _JsonView(self)


class _JsonView(Mapping[str, object]):
    """:meth:`EstimateRequest.to_dict`'s keys and values, each converted as it is read."""

    __slots__ = ("_fields", "_model")

    def __init__(self, req: EstimateRequest) -> None:
        self._fields = req.__dict__
        self._model = req.model_id

    def __getitem__(self, key: str) -> object:
        if key == "model":
            return self._model
        if key not in _ESTIMATE_KEY_SET:
            raise KeyError(key)
        value = self._fields[key]
        form = _JSON_FORMS.get(type(value)) or _json_form(type(value))
        return value if form is _as_is else form(value)

    def __iter__(self) -> Iterator[str]:
        return iter(_ESTIMATE_KEYS)

    def __len__(self) -> int:
        return len(_ESTIMATE_KEYS)


def _as_is(value: object) -> object:
    return value


_JSON_FORMS: dict[type, Callable[[Any], object]] = {}


def _json_form(kind: type) -> Callable[[Any], object]:
    """How a request value of type ``kind`` is written in JSON: an enum as its value, a tuple
    as a list, a length distribution as its object, anything else as it is (kept per type)."""
    form: Callable[[Any], object]
    if issubclass(kind, Enum):
        form = _enum_value
    elif issubclass(kind, tuple):
        form = list
    elif issubclass(kind, LengthStats):
        form = LengthStats.to_dict
    else:
        form = _as_is
    _JSON_FORMS[kind] = form
    return form


def _enum_value(value: Enum) -> object:
    return value.value


_FIELD_NAMES = frozenset(f.name for f in dataclass_fields(EstimateRequest))


def local_length(length: int, sequence_parallel: int) -> int:
    """A sequence's tokens on each GPU of its sequence-parallel group, the last share padded:
    ``ceil(length / sequence_parallel)``."""
    return -(-length // sequence_parallel)


def shard_size(num_gpus: int, shard_group: int | None) -> int:
    """GPUs among which ZeRO-1/2/3 split one copy of the states: ``shard_group`` (hybrid
    sharding: the job holds ``num_gpus / shard_group`` replicas), or all ``num_gpus``. A job
    size ``shard_group`` does not divide (the planner's other GPU counts; the request itself
    is refused, ``shard_group_not_divisor``) or does not exceed shards over all its GPUs."""
    if shard_group is None or shard_group >= num_gpus or num_gpus % shard_group:
        return num_gpus
    return shard_group


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
        arch = arch_from_hf_config(
            cfg, value.get("name") if isinstance(value.get("name"), str) else None
        )
        return arch, "hf_config:" + arch.family
    raise InputError("wrong_type", "model", value)


def parse_fields(data: object, fields: dict[str, FieldSpec]) -> JsonObject:
    """Check the keys of ``data`` against ``fields`` and fill the defaults (behaviours taken
    out of their object: :func:`calc.fields.given_fields`)."""
    given = given_fields(data, fields)
    return {key: given.get(key, spec.default) for key, spec in fields.items()}


def parse_estimate_request(data: object, command: str = "estimate") -> EstimateRequest:
    """Validate a request dict; ``command="plan"`` allows the plan's keys too, which
    :func:`calc.plan.parse_plan_options` checks."""
    fields = {spec.key: spec for spec in field_specs(command)}
    given = given_fields(data, fields)
    values = {key: given.get(key, spec.default) for key, spec in fields.items()}
    framework = check_enum("framework", values["framework"], Framework)
    apply_profile(values, given, framework)
    arch, model_id = resolve_model(values["model"])
    kwargs: JsonObject = {"model": arch, "model_id": model_id}
    for key, spec in fields.items():
        if key != "model" and spec.group != PLAN:
            kwargs[key] = spec.check(values[key], arch)
    check_granularity(
        kwargs["checkpointing_granularity"],
        kwargs["checkpointing_every"],
        kwargs["gradient_checkpointing"],
    )
    if kwargs["length_stats"] is not None:  # its parts against each other and seq_len
        check_consistent(kwargs["length_stats"], kwargs["seq_len"])
    group = kwargs["shard_group"]
    if group is not None and group < kwargs["num_gpus"] and kwargs["num_gpus"] % group:
        # a replica is whole groups: 12 GPUs cannot hold groups of 8 (a group of the job's
        # size or more is one group: HYBRID_SHARD on one server)
        raise InputError("shard_group_not_divisor", "shard_group", group)
    check_sequence_parallel(kwargs["sequence_parallel"], kwargs["num_gpus"], kwargs["model"])
    if kwargs["fsdp_flat_parameters"] and kwargs["fsdp_fully_shard"]:
        # FSDP1's flat parameters and FSDP2's per-parameter sharding: one loop runs one of them
        raise InputError("fsdp_versions_conflict", "fsdp_fully_shard", True)
    if (
        arch.bnb_kept_16bit
        and kwargs["method"] is Method.QLORA
        and (
            framework in (Framework.TORCHTUNE, Framework.LITGPT)
            or kwargs["qlora_keeps_inputs"]
            or kwargs["qlora_unchunked_quantization"]
            or kwargs["qlora_output_layer_quantized"]
        )
    ):
        # a skip list is read by transformers' 4-bit loading: torchtune and LitGPT quantize the
        # model themselves and cannot load a 4-bit checkpoint; and where the 4-bit layers keep
        # their inputs, are built whole on the GPU or include the output layer, blocks with a
        # kept linear differ in what calc counts for every block alike
        raise InputError("quantization_skip_not_modelled", "model", kwargs["framework"].value)
    if kwargs["moe_expert_layout"] is MoeExpertLayout.FUSED_3D:
        from .lora import as_stored_3d  # experts as 3-D tensors: QLoRA leaves them in 16 bits

        kwargs["model"] = as_stored_3d(arch)
    kwargs["profile_keys"] = tuple(k for k in PROFILES[framework] if k not in given)
    return EstimateRequest(**kwargs)


def check_sequence_parallel(sp: int, num_gpus: int, arch: ModelArch) -> None:
    """Ulysses' groups against the job and the model: a group is whole GPUs of the job
    (``sequence_parallel_not_divisor``), and its all-to-all hands each GPU whole attention
    heads, so the group divides the query heads and the key/value heads divide it or are
    divided by it (fewer key/value heads than GPUs are repeated to one per GPU, as XTuner's
    and DeepSpeed's Ulysses do): ``sequence_parallel_heads``. Attention other than softmax
    heads (linear attention, Mamba, short convolutions along the sequence, MLA's latent, sparse
    indexers) has no Ulysses path calc counts: ``sequence_parallel_not_modelled``."""
    if sp == 1:
        return
    if sp > num_gpus or num_gpus % sp:
        raise InputError("sequence_parallel_not_divisor", "sequence_parallel", sp)
    if (
        arch.linear_attention is not None
        or arch.mamba is not None
        or arch.short_conv_kernel
        or arch.kv_lora_rank
        or arch.index_heads
        or arch.hyper_connections
    ):
        raise InputError("sequence_parallel_not_modelled", "sequence_parallel", sp)
    kv = arch.num_kv_heads
    if arch.num_heads % sp or (kv % sp and sp % kv):
        raise InputError("sequence_parallel_heads", "sequence_parallel", sp)


def check_estimate_field(key: str, value: object, arch: ModelArch | None) -> object:
    """One estimate field (not ``model``), checked on its own. ``arch`` is needed for
    ``lora_targets`` only (``None``: not checked against a model)."""
    return BY_KEY[key].check(value, arch)


def request_warnings(req: EstimateRequest) -> list[str]:
    """Codes for suspicious but valid input (the site translates them)."""
    out = []
    if req.seq_len > req.model.max_position_embeddings:
        out.append("seq_len_above_max_positions")
    if req.num_gpus == 1 and req.sharding in (
        Sharding.DDP,
        Sharding.ZERO1,
        Sharding.ZERO2,
        Sharding.ZERO3,
    ):
        out.append("sharding_on_single_gpu")
    if req.num_gpus > 1 and req.sharding is Sharding.NONE:
        out.append("multi_gpu_without_sharding")
    if req.shard_group is not None and req.sharding in (Sharding.NONE, Sharding.DDP):
        out.append("shard_group_ignored")
    if req.method is Method.FULL and (
        req.lora_targets != "all-linear"
        or req.lora_dropout > 0
        or req.lora_modules_to_save is not ModulesToSave.NONE
    ):
        out.append("lora_options_ignored")
    if req.method is Method.QLORA and req.precision in (Precision.FP32,):
        out.append("qlora_with_fp32")
    if req.cpu_offload is not CpuOffload.NONE and req.optimizer in (
        Optimizer.PAGED_ADAMW,
        Optimizer.PAGED_ADAMW_8BIT,
    ):
        out.append("paged_optimizer_with_cpu_offload")
    from .states import deepspeed_offload_swaps_optimizer  # states imports this module

    if deepspeed_offload_swaps_optimizer(req):
        out.append("deepspeed_offload_runs_cpu_adam")
    if req.optimizer_fused and req.optimizer is not Optimizer.ADAMW:
        out.append("optimizer_fused_ignored")
    if (
        req.checkpointing_every is not None
        and req.checkpointing_granularity is not Granularity.EVERY_N
    ):
        out.append("checkpointing_every_ignored")
    if (
        req.gradient_checkpointing
        and req.checkpointing_granularity is Granularity.SELECTIVE_OP
        and not req.selective_op
    ):
        out.append("selective_op_counted_as_full")
    if req.liger_kernel and not liger.patches(req.model.family):
        out.append("liger_kernel_not_applied")
    return out


__all__ = [
    "AdapterDtype",
    "Attention",
    "Batching",
    "CalcError",
    "ConfigError",
    "CpuOffload",
    "EstimateRequest",
    "Framework",
    "MAX_ACCUMULATION",
    "MAX_GPUS",
    "MAX_LORA_RANK",
    "MAX_MICRO_BATCH",
    "MAX_SEQ_LEN",
    "Method",
    "ModulesToSave",
    "LoadWarmup",
    "MoeExpertLayout",
    "Optimizer",
    "Precision",
    "Sharding",
    "ShardingEngine",
    "check_bool",
    "check_fraction",
    "check_int",
    "check_number",
    "check_sequence_parallel",
    "int_range",
    "local_length",
    "number_range",
    "parse_estimate_request",
    "request_warnings",
    "shard_size",
]
