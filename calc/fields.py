"""The request's fields, defined once: name, kind, default, bounds or choices, group, words.

Every key of the ``estimate`` and ``plan`` requests is one :class:`FieldSpec` in
:data:`FIELDS`. The rest is read from it: the request's defaults, parsing and checks
(:mod:`calc.request`, :mod:`calc.plan`), the CLI's flags and ``--help``
(:mod:`calc.cli.flags`, :mod:`calc.cli.helptext`), the JSON Schema (:mod:`calc.schema`), the
calculator's controls and URL keys (``macros/calculator.py``; a control and its URL
parameter carry the key's name) and the help texts, which the message catalogue holds under
the spec's ``label_id``, ``help_id`` and ``unit_id``.

``group`` says what a key is:

- ``reader``: a choice the reader makes about the run (model, method, batch, GPUs...);
- ``behaviour``: how a library version behaves (a quirk of bitsandbytes, peft, FSDP...), which
  the training library's profile (``framework``, :mod:`calc.frameworks`) sets and the reader
  overrides only to match another version;
- ``plan``: a key of the plan request only (dataset, card, prices, time factors).

The order of :data:`FIELDS` is only the order keys are shown in (``--help``, the schema, the
request echoed in a response); it means nothing else. A profile may also set a reader key
(its usual choice, such as torchtune's chunked loss): :attr:`FieldSpec.profiles` says which.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, TypeVar

from .checkpointing import Granularity as CheckpointingGranularity
from .cost import CHECKPOINT_WRITE_GB_PER_S, ELECTRICITY_USD_PER_KWH
from .errors import InputError
from .frameworks import PROFILES, Framework
from .comm import CATALOGUE_NETWORK, GPUS_PER_NODE, NETWORKS
from .gpus import TIERS
from .jsontypes import JsonObject
from .lengths import PARTS as LENGTH_PARTS
from .lengths import Batching, PackedAttention, check_length_stats

if TYPE_CHECKING:
    from .arch import ModelArch

READER = "reader"
BEHAVIOUR = "behaviour"
PLAN = "plan"
GROUPS = (READER, BEHAVIOUR, PLAN)
KINDS = ("model", "int", "number", "fraction", "bool", "enum", "targets", "gpu", "stats")
"""``stats``: an object of named whole numbers (:attr:`FieldSpec.parts`), or ``null``; its text
form, in the URL and on the command line, is ``name:value`` pairs joined by commas
(``mean:900,p90:2000``)."""


class Method(str, Enum):
    FULL = "full"
    LORA = "lora"
    QLORA = "qlora"


class Precision(str, Enum):
    """Lightning's names. ``bf16-true``: weights, grads and optimizer states in
    bf16. ``*-mixed``: fp32 master weights and fp32 optimizer states, 16-bit
    compute, unless the library loaded the weights in 16 bits (``weights_loaded_16bit``:
    autocast only). ``fp32``: everything in fp32."""

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


class AttentionMask(str, Enum):
    """What the loop passes to SDPA: ``is_causal`` alone, or an explicit mask tensor."""

    CAUSAL = "causal"
    PADDING = "padding"


class Fp8Library(str, Enum):
    """What runs the FP8 linears of ``fp8_compute``: Transformer Engine's modules or torchao's
    ``Float8Linear`` (see the ``fp8_library`` key)."""

    TRANSFORMER_ENGINE = "transformer-engine"
    TORCHAO = "torchao"


class AdapterDtype(str, Enum):
    """dtype of the LoRA adapters: the base weights' (``base``) or ``fp32``."""

    BASE = "base"
    FP32 = "fp32"


class RopeCache16Bit(str, Enum):
    """Where a model keeps rotary cos and sin tables precomputed in its 16-bit dtype (see the
    ``rope_cache_16bit`` field): nowhere, in the model's one rotary module, or also in every
    attention layer's own."""

    NONE = "none"
    MODEL = "model"
    PER_LAYER = "per-layer"


class MoeExpertLayout(str, Enum):
    """How a MoE model stores its experts, which decides how peft adapts them (see
    :mod:`calc.lora`): one ``nn.Linear`` per expert matrix (transformers 4) or one 3-D
    tensor per expert stack adapted through peft's ``target_parameters`` (transformers 5)."""

    PER_EXPERT_MODULES = "per-expert-modules"
    FUSED_3D = "fused-3d"


class LoadWarmup(str, Enum):
    """How transformers' ``from_pretrained`` sizes the block it allocates and frees before it
    loads a 4-bit model onto the GPU (:mod:`calc.load_warmup`)."""

    NONE = "none"
    TRANSFORMERS_4_51 = "transformers-4.51"
    TRANSFORMERS_4_52 = "transformers-4.52"


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


class ShardingEngine(str, Enum):
    """What runs ZeRO-1/2/3: PyTorch FSDP (with accelerate's ``no_sync`` while accumulating) or
    DeepSpeed's ZeRO optimizer (:func:`calc.states.deepspeed_zero`)."""

    FSDP = "fsdp"
    DEEPSPEED = "deepspeed"


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
MAX_STEPS = 1_000_000_000  # a billion optimizer steps: beyond every published run, a typo
MAX_DATASET_TOKENS = 1e15  # beyond every published training corpus: a typo
MAX_STARTS = 100_000
MAX_GRADIENT_BUCKET_MB = 65_536  # 64 GiB: above any model's gradients in one bucket
MAX_GPUS_PER_NODE = 72  # a GB200 NVL72 rack: the largest NVLink domain sold as one
MAX_CHECKPOINTING_EVERY = 65_536  # blocks: beyond every published depth, a typo

E = TypeVar("E", bound=Enum)


# --- checks ---------------------------------------------------------------------------------------


def int_range(maximum: int | None) -> JsonObject:
    """What :func:`check_int` accepts, for the error's ``extra`` (the form says it)."""
    out: JsonObject = {"integer": True, "minimum": 1}
    if maximum is not None:
        out["maximum"] = maximum
    return out


def check_int(field: str, value: object, maximum: int | None = None) -> int:
    """A positive integer, at most ``maximum``. A float with no fraction counts as that
    integer (``2048.0`` is 2048), as JSON Schema and the calculator's form count it."""
    valid = int_range(maximum)
    number = int(value) if isinstance(value, float) and value.is_integer() else value
    if isinstance(number, bool) or not isinstance(number, int):
        raise InputError("not_integer", field, value, extra=valid)
    if number <= 0:
        raise InputError("not_positive", field, value, extra=valid)
    if maximum is not None and number > maximum:
        raise InputError("out_of_range", field, value, extra=valid)
    return number


def number_range(
    minimum: float,
    maximum: float | None,
    allow_equal_min: bool = True,
    maximum_exclusive: bool = False,
) -> JsonObject:
    """What :func:`check_number` accepts, for the error's ``extra``."""
    out: JsonObject = {"minimum": minimum}
    if not allow_equal_min:
        out["minimum_exclusive"] = True
    if maximum is not None:
        out["maximum"] = maximum
        if maximum_exclusive:
            out["maximum_exclusive"] = True
    return out


def check_number(
    field: str,
    value: object,
    minimum: float = 0.0,
    maximum: float | None = None,
    allow_equal_min: bool = True,
) -> float:
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


def check_choice(field: str, value: object, choices: tuple[str, ...]) -> str:
    """One of ``choices`` (the error names them all)."""
    valid = {"allowed": list(choices)}
    if not isinstance(value, str):
        raise InputError("wrong_type", field, value, extra=valid)
    if value not in choices:
        raise InputError("unknown_value", field, value, extra=valid)
    return value


def check_enum(field: str, value: object, enum: type[E]) -> E:
    return enum(check_choice(field, value, tuple(m.value for m in enum)))


def check_targets(value: object, arch: ModelArch) -> tuple[str, ...] | str:
    """``"all-linear"``, or linear module names of ``arch`` (a list, or comma-separated as in
    the URL form), repeats dropped, order kept."""
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


# --- the spec ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FieldSpec:
    """One request key. ``kind`` is one of :data:`KINDS`; ``minimum`` / ``maximum`` bound the
    numbers (an ``int`` is at least 1); ``choices`` are an ``enum``'s values, and ``enum`` the
    class a parsed value becomes (``None``: it stays text); ``methods`` the methods the key
    means something for (``None``: all); ``percent``: the form also reads ``25 %`` as 0.25;
    ``doc``: what the key stands for in the libraries, with sources (the reader's words are
    in the catalogue, under :attr:`help_id`); ``parts``: a ``stats`` key's names, each a whole
    number from 1 to ``maximum``."""

    key: str
    kind: str
    default: object
    group: str = READER
    required: bool = False
    optional: bool = False  # null allowed (calc picks its own value)
    choices: tuple[str, ...] | None = None
    enum: type[Enum] | None = None
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: bool = False
    exclusive_maximum: bool = False
    methods: tuple[str, ...] | None = None
    percent: bool = False
    doc: str = ""
    parts: tuple[str, ...] | None = None  # a ``stats`` key's names, each a whole number

    def __post_init__(self) -> None:
        assert self.kind in KINDS and self.group in GROUPS, (self.key, self.kind, self.group)

    @property
    def table(self) -> str:
        """``"plan"`` for a plan-only key, else ``"estimate"`` (the CLI's flag groups)."""
        return "plan" if self.group == PLAN else "estimate"

    @property
    def flag(self) -> str:
        """The URL parameter's name with dashes: ``seq_len`` -> ``--seq-len``."""
        return "--" + self.key.replace("_", "-")

    @property
    def numeric(self) -> bool:
        return self.kind in ("int", "number", "fraction")

    @property
    def label_id(self) -> str:
        return "label." + self.key

    @property
    def help_id(self) -> str:
        return "help." + self.key

    @property
    def unit_id(self) -> str:
        return "unit_of." + self.key

    @property
    def profiles(self) -> tuple[Framework, ...]:
        """The training libraries whose profile sets this key when the request leaves it out."""
        return tuple(fw for fw, entries in PROFILES.items() if self.key in entries)

    def check(self, value: object, arch: ModelArch | None = None) -> object:
        """The key's value checked on its own (not ``model``, which needs the catalogue):
        coded :class:`~calc.errors.InputError` if bad. ``arch`` is needed for ``lora_targets``
        only (``None``: not checked against a model). ``None`` stands for a left-out key."""
        key, kind = self.key, self.kind
        if self.required and value is None:
            raise InputError("missing_field", key, None)
        if kind == "gpu":
            from . import gpus

            try:
                return gpus.get_gpu(value, key)
            except InputError as err:  # say which cards there are
                ids = [g["id"] for g in gpus.gpus_listing()["gpus"]]
                raise InputError(err.code, key, value, extra={"allowed": ids}) from None
        if kind == "enum":
            assert self.choices is not None, key
            if self.enum is not None:
                return check_enum(key, value, self.enum)
            return check_choice(key, value, self.choices)
        if kind == "bool":
            return check_bool(key, value)
        if kind == "int":
            if self.optional and value is None:
                return None
            return check_int(key, value, None if self.maximum is None else int(self.maximum))
        if kind == "fraction":
            return check_fraction(key, value)
        if kind == "targets":
            return check_targets(value, arch) if arch is not None else value
        if kind == "stats":
            assert self.maximum is not None, key
            return check_length_stats(value, int(self.maximum))
        assert kind == "number" and self.minimum is not None, key  # "model" is not checked here
        if self.optional and value is None:
            return None
        return float(
            check_number(
                key, value, self.minimum, self.maximum, allow_equal_min=not self.exclusive_minimum
            )
        )


def _int(key: str, default: int, maximum: int, group: str, **more: object) -> FieldSpec:
    return FieldSpec(key, "int", default, group, minimum=1, maximum=maximum, **more)  # type: ignore[arg-type]


def _bool(key: str, default: bool, group: str, **more: object) -> FieldSpec:
    return FieldSpec(key, "bool", default, group, **more)  # type: ignore[arg-type]


def _enum(key: str, enum: type[Enum], default: str, group: str, **more: object) -> FieldSpec:
    choices = tuple(m.value for m in enum)
    return FieldSpec(key, "enum", default, group, choices=choices, enum=enum, **more)  # type: ignore[arg-type]


def _number(
    key: str,
    default: float | None,
    minimum: float,
    maximum: float,
    minimum_allowed: bool,
    **more: object,
) -> FieldSpec:
    bounds = {"minimum": minimum, "maximum": maximum, "exclusive_minimum": not minimum_allowed}
    return FieldSpec(key, "number", default, PLAN, **bounds, **more)  # type: ignore[arg-type]


PEFT = ("lora", "qlora")  # methods with adapters
QLORA = ("qlora",)
FULL = ("full",)

FIELDS: tuple[FieldSpec, ...] = (
    FieldSpec("model", "model", None, READER, required=True),
    _enum("method", Method, "lora", READER),
    _int("lora_rank", 16, MAX_LORA_RANK, READER, methods=PEFT),
    FieldSpec("lora_targets", "targets", "all-linear", READER, methods=PEFT),
    _bool("qlora_double_quant", True, READER, methods=QLORA),
    _enum("precision", Precision, "bf16-true", READER),
    _enum("optimizer", Optimizer, "adamw", READER),
    _bool("optimizer_in_backward", False, READER),
    _int("micro_batch_size", 1, MAX_MICRO_BATCH, READER),
    _int("seq_len", 2048, MAX_SEQ_LEN, READER),
    FieldSpec(
        "length_stats",
        "stats",
        None,
        READER,
        optional=True,
        minimum=1,
        maximum=MAX_SEQ_LEN,
        parts=LENGTH_PARTS,
        doc=(
            "tokens per sample of the reader's data: ``mean``, ``p90`` (90 % of the samples are "
            "at most this long), ``p99`` (99 %) and ``max`` (default ``seq_len``, which stays the "
            "cap), any of them. calc draws a seeded sequence of micro-batches from a log-normal "
            "distribution fitted to them, split at ``p90`` into a body and a tail through ``p99`` "
            "where ``p99`` is given (:mod:`calc.lengths`): the memory peak is the longest "
            "micro-batch's, "
            "and time counts the padded tokens as compute and the real ones as progress. "
            "Default ``null``: every sample fills ``seq_len``."
        ),
    ),
    _enum(
        "batching",
        Batching,
        "pad-longest",
        READER,
        doc=(
            "how samples become micro-batches: ``pad-longest``, each padded to the longest of its "
            "micro-batch (the Hugging Face collators' default, ``padding=True``); ``grouped``, the "
            "same with samples of like length batched together (transformers ``group_by_length``); "
            "``pad-max``, "
            'padded to ``seq_len`` (``padding="max_length"``, axolotl ``pad_to_sequence_len``); '
            "``packed``, rows of ``seq_len`` tokens of real data (TRL / LLaMA-Factory ``packing``, "
            "axolotl ``sample_packing``); ``padding-free``, each micro-batch one row of its own "
            "samples end to end, positions restarting at each (TRL ``padding_free`` without "
            "packing, ``DataCollatorForLanguageModeling(padding_free=True)``; Unsloth turns it on "
            "by itself): no padding, each sample attending within itself "
            "(:func:`calc.lengths.as_rows`). Read only with ``length_stats``: without it every "
            "sample fills ``seq_len`` and the five are the same."
        ),
    ),
    _bool("gradient_checkpointing", True, READER),
    _enum(
        "checkpointing_granularity",
        CheckpointingGranularity,
        "full",
        READER,
        doc=(
            "what checkpointing wraps and keeps (:mod:`calc.checkpointing`), read with "
            "``gradient_checkpointing`` on: ``full``, every decoder block keeps its input and "
            "runs its whole forward again in backward (transformers, torchtune, torchtitan "
            '``mode = "full"``); ``every-n``, torchtitan ``mode = "selective"`` with an integer '
            "``selective_ac_option`` N (``checkpointing_every``): blocks N, 2N, ... wrapped "
            "whole, the others keep every tensor; ``selective-op``, torchtitan "
            '``selective_ac_option = "op"`` (2024-2025 ``_save_list``): every block keeps the '
            "outputs of its odd-numbered ``aten.mm`` and of SDPA's flash or memory-efficient "
            "kernel and runs the rest again (every second matmul and the element-wise ops). "
            "Default ``full``."
        ),
    ),
    FieldSpec(
        "checkpointing_every",
        "int",
        None,
        READER,
        optional=True,
        minimum=1,
        maximum=MAX_CHECKPOINTING_EVERY,
        doc=(
            "N of ``checkpointing_granularity`` ``every-n``: torchtitan's integer "
            "``selective_ac_option`` (its command line's default was 2 in 2024). Required "
            "there, ignored (a warning) with the other granularities. Default ``null``."
        ),
    ),
    _enum("attention", Attention, "sdpa", READER),
    _bool("chunked_loss", False, READER),
    _bool("activation_offload", False, READER),
    _int("num_gpus", 1, MAX_GPUS, READER),
    _enum("sharding", Sharding, "none", READER),
    FieldSpec(
        "shard_group",
        "int",
        None,
        READER,
        optional=True,
        minimum=1,
        maximum=MAX_GPUS,
        doc=(
            "GPUs that share one copy of the sharded states (hybrid sharding): ZeRO-1/2/3 "
            "shard within groups of this many GPUs and replicate across the groups, whose "
            "gradients are all-reduced between them. PyTorch FSDP ``HYBRID_SHARD`` (one group "
            "per server, torch 2.13 ``fsdp/_init_utils.py`` ``_init_intra_node_process_group``) "
            "and ``_HYBRID_SHARD_ZERO2``, FSDP2 ``fully_shard`` on a 2-D device mesh, DeepSpeed "
            "MiCS (``mics_shard_size``), InternEvo's ``zero1`` size. Below ``num_gpus`` it must "
            "divide it; from ``num_gpus`` up it is one group of all. Default ``null``: every GPU "
            "of the job shares one copy (``calc.request.shard_size``)."
        ),
    ),
    FieldSpec(
        "sequence_parallel",
        "int",
        1,
        READER,
        minimum=1,
        maximum=MAX_GPUS,
        doc=(
            "GPUs that split each sequence between them (DeepSpeed-Ulysses sequence "
            "parallelism: XTuner ``sequence_parallel_size``, ms-swift's Ulysses, Arctic Long "
            "Sequence Training in accelerate / the Trainer). Each GPU of a group holds "
            "``ceil(seq_len / N)`` tokens of every sequence outside attention; before attention "
            "an all-to-all trades them for every token of ``heads / N`` heads, and another one "
            "trades the output back (calc.comm.all_to_all_link). The job's data-parallel "
            "size is ``num_gpus / N``; ZeRO still shards over every GPU. It must divide "
            "``num_gpus`` and the attention heads (``sequence_parallel_not_divisor``, "
            "``sequence_parallel_heads``). Default 1: every GPU holds whole sequences."
        ),
    ),
    FieldSpec(
        "gradient_bucket_mb",
        "number",
        None,
        READER,
        optional=True,
        minimum=0.0,
        exclusive_minimum=True,
        maximum=MAX_GRADIENT_BUCKET_MB,
        doc=(
            "MiB of gradients each DDP or ZeRO-1/2 reduction carries: PyTorch DDP's "
            "``bucket_cap_mb`` (Hugging Face ``ddp_bucket_cap_mb``), InternEvo's "
            "``reduce_bucket_size``. Each bucket pays one collective's latency and the last one "
            "waits for the backward's end (calc.timing.step_breakdown), so at hundreds of GPUs "
            "larger buckets save the latency and expose more at the end. Default ``null``: "
            "torch DDP's 25 MiB (``calc.timing.DDP_BUCKET_BYTES``); DeepSpeed's ZeRO-1/2, "
            "``hidden x hidden`` gradient elements (``calc.timing.gradient_bucket_bytes``)."
        ),
    ),
    _enum("cpu_offload", CpuOffload, "none", READER),
    FieldSpec(
        "lora_dropout",
        "fraction",
        0.0,
        READER,
        minimum=0.0,
        maximum=1.0,
        exclusive_maximum=True,
        methods=PEFT,
        doc=(
            "dropout on the adapter's input, ``0 <= p < 1``; peft's default "
            "``LoraConfig.lora_dropout = 0.0``. Above 0 each adapter keeps its dropout output and "
            "mask for backward (:mod:`calc.activations`)."
        ),
    ),
    _int(
        "gradient_accumulation_steps",
        1,
        MAX_ACCUMULATION,
        READER,
        doc=(
            "micro-batches per optimizer step. Above 1 the gradients of the earlier micro-batches "
            "stay alive through the forward and backward of the next ones; with FSDP / ZeRO-2/3 "
            "on several GPUs, accumulation under ``no_sync`` keeps them unsharded "
            "(:func:`calc.states.accumulates_unsharded_gradients`)."
        ),
    ),
    FieldSpec(
        "max_steps",
        "int",
        None,
        READER,
        optional=True,
        minimum=1,
        maximum=MAX_STEPS,
        doc=(
            "optimizer steps the run takes (Hugging Face ``TrainingArguments.max_steps``, TRL "
            "and axolotl ``max_steps``). With ``length_stats`` it says how many samples the run "
            "meets, ``max_steps x micro_batch_size x gradient_accumulation_steps x num_gpus``, "
            "and so how long its longest micro-batch is expected to be "
            "(:func:`calc.lengths.expected_longest`): a short run meets a shorter longest sample "
            "than a long one. Default ``null``: the plan derives the samples from "
            "``dataset_tokens x epochs``, the estimate draws :data:`calc.lengths.SAMPLES`."
        ),
    ),
    _bool(
        "qlora_keeps_inputs",
        False,
        BEHAVIOUR,
        methods=QLORA,
        doc=(
            "the 4-bit linears keep their input alive for backward, as bitsandbytes < 0.43.2 did "
            "(``MatMul4Bit.forward`` stored ``ctx.tensors = (A, B)``; removed by bitsandbytes PR "
            "#1270, July 2024). Default False: bitsandbytes >= 0.43.2 and torchao's NF4 keep only "
            "the weight."
        ),
    ),
    _bool(
        "frozen_weight_grads",
        False,
        BEHAVIOUR,
        methods=PEFT,
        doc=(
            "LoRA / QLoRA where gradient memory is allocated for the frozen weights of the "
            "decoder blocks too: PyTorch FSDP (v1) with ``use_orig_params=True`` and wrap units "
            "that mix frozen and trainable parameters, whose gradient memory the PyTorch FSDP "
            "docs (``FullyShardedDataParallel``, ``use_orig_params``) describe as that of an "
            "unfrozen model; torchtune's ``lora_fsdp_wrap_policy`` exists to avoid it. E.g. "
            "LitGPT's ``auto_wrap_policy={Block}``. Default False: FSDP2, or wrap policies that "
            "give the adapters their own units (torchtune ``lora_fsdp_wrap_policy``)."
        ),
    ),
    _bool(
        "sync_each_micro_batch",
        False,
        BEHAVIOUR,
        doc=(
            "gradients are reduce-scattered after every micro-batch (accelerate "
            "``GradientAccumulationPlugin(sync_each_batch=True)``, DeepSpeed ZeRO, torchtune's "
            "recipes); default False, accelerate's default, which uses ``no_sync``."
        ),
    ),
    _bool(
        "qlora_unchunked_quantization",
        False,
        BEHAVIOUR,
        methods=QLORA,
        doc=(
            "the base weights are quantized to NF4 on the GPU in one pass per weight, as torchao "
            "before v0.2.0 did (``NF4Tensor.quantize_tensor_nearest`` on the whole flattened "
            "weight), in torchtune's model build of that time (one layer built, deep-copied per "
            "layer, then the checkpoint quantized in); the segments that build maps stay in "
            "PyTorch's cache and set a floor under the reserved memory of the whole run "
            "(:func:`calc.memory.quantization_reserved_bytes`, replayed by "
            ":mod:`calc.nf4_build`). Default False: torchao >= 0.2.0 "
            "quantizes 1,048,576 elements at a time (torchao PR #196), and bitsandbytes quantizes "
            "in a CUDA kernel without full-size temporaries."
        ),
    ),
    _bool(
        "attention_keeps_fused_qkv",
        False,
        BEHAVIOUR,
        doc=(
            "the attention keeps the whole output of a fused q/k/v projection alive until its "
            "backward, where every query head has its own k/v head. LitGPT "
            "(``CausalSelfAttention.forward``, 2023 through Sep 2024) reshapes the fused output "
            "into q, k, v; with one query per group the reshape of ``v`` is a view, and SDPA "
            "saves that view, which holds the whole fused tensor (:mod:`calc.activations`). "
            "Default False: separate q, k, v projections (Hugging Face, torchtune), or grouped "
            "k/v heads, whose expand-and-reshape makes copies."
        ),
    ),
    _bool(
        "optimizer_fused",
        False,
        BEHAVIOUR,
        doc=(
            "torch's AdamW runs its fused kernel (``torch.optim.AdamW(..., fused=True)``; Hugging "
            'Face ``optim="adamw_torch_fused"``), which updates every tensor in place without the '
            "step's state-sized temporary (:func:`calc.states.optimizer_step_temp_bytes`). "
            "Default False: torch picks the multi-tensor (foreach) path on CUDA when neither flag "
            "is set. Only ``adamw`` has the choice; with another optimizer the key adds the "
            "warning ``optimizer_fused_ignored``."
        ),
    ),
    _bool(
        "optimizer_per_tensor",
        False,
        READER,
        doc=(
            "The optimizer updates one parameter tensor at a time: torch's AdamW or SGD with "
            "``foreach=False``, or a loop written by hand over the parameters (a course's "
            "AdamW, many research loops). The host then dispatches each tensor's ops one by one "
            "(:data:`calc.timing.OPTIMIZER_OPS_PER_TENSOR`) after the last backward, where the "
            "multi-tensor and fused paths launch a few kernels for all of them. Default False: "
            "torch picks the multi-tensor path on CUDA. Time only; ``adamw``, ``sgd`` and "
            "``sgd-momentum`` only (the others already run their own path)."
        ),
    ),
    _bool(
        "torch_compile",
        False,
        READER,
        doc=(
            "the decoder blocks run under ``torch.compile``, whose backward recomputes part of "
            "the pointwise work instead of saving it. A fitted share "
            "(:data:`calc.activations.COMPILE_KEPT_FRACTION`) of what could be recomputed stays; "
            "less certain than the rest of the model (methodology page). Default False: eager."
        ),
    ),
    _bool(
        "tf32",
        False,
        READER,
        doc=(
            "fp32 matmuls run as TF32 on the tensor cores (NVIDIA Ampere and later): the "
            "Hugging Face ``TrainingArguments(tf32=True)``, "
            "``torch.backends.cuda.matmul.allow_tf32 = True`` or "
            "``torch.set_float32_matmul_precision('high')``, or NVIDIA's PyTorch containers, "
            "which set ``TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1`` (torch "
            "``aten/src/ATen/Context.cpp`` ``allowTF32CuBLAS`` reads it). Time only: the "
            "matmuls calc prices at the card's FP32 rate (fp32 training, an fp32 output layer "
            "after kbit preparation, fp32 adapters, eager or math attention on fp32 inputs) run "
            "at the TF32 rate instead (:data:`calc.timing.TF32_TIME`). Default False: torch's "
            "own default (``allow_tf32`` False since 1.12; "
            ":data:`calc.timing.FP32_MATMUL_TF32_DEFAULT`)."
        ),
    ),
    _bool(
        "liger_kernel",
        False,
        READER,
        doc=(
            "the model runs Liger-Kernel's Triton modules (liger-kernel v0.8.2, 000be609, "
            "2026-08-18; the Trainer's and TRL's ``use_liger_kernel``, LLaMA-Factory's "
            "``enable_liger_kernel``, "
            "``AutoLigerKernelForCausalLM``), on the families it patches "
            "(:data:`calc.liger.FAMILIES`; elsewhere warning ``liger_kernel_not_applied``). "
            "Each RMSNorm saves its input and an fp32 statistic per token "
            "(``LigerRMSNormFunction``: ``resid h + 4`` instead of ``4 h + 4`` and the "
            "normalised copy); a dense gated MLP's activation saves only the gate and up "
            "outputs and writes their gradients into them (``LigerSiLUMulFunction``: ``2 m`` "
            "instead of ``3 m`` saved, one ``m``-wide gradient in the backward instead of two); "
            "RoPE rotates q and k in place and keeps the shared cos / sin as transformers' does. "
            "With ``chunked_loss`` the loss is Liger's fused linear cross-entropy "
            "(:func:`calc.activations.liger_flce_loss_bytes`). Time: the same FLOPs; each "
            "kernel's element-wise traffic and host ops in place of transformers' "
            "(:data:`calc.timing.LIGER_NORM_BYTES_PER_ELEMENT` and the constants beside it), "
            "and the fused loss's per-chunk accumulation of a trained output layer's gradient. "
            "Default False: transformers' modules."
        ),
    ),
    _enum(
        "lora_adapter_dtype",
        AdapterDtype,
        "base",
        BEHAVIOUR,
        methods=PEFT,
        doc=(
            '``"fp32"`` keeps the LoRA / QLoRA adapters in fp32 when the base is 16-bit, as peft '
            "does by default (peft 0.21.0 ``get_peft_model(..., autocast_adapter_dtype=True)`` -> "
            "``tuners_utils.cast_adapter_dtype`` upcasts bf16/fp16 adapter weights to float32). "
            "The adapters, their gradients and optimizer states are then fp32 (4 bytes each), and "
            "each adapted linear casts its input to fp32 before ``lora_A`` "
            "(``LoraLayer._cast_input_dtype(x, lora_A.weight.dtype)`` in "
            "``peft/tuners/lora/layer.py`` ``Linear.forward``), which ``lora_A`` saves for "
            "backward, with the fp32 rank intermediate (:mod:`calc.activations`). Default "
            '``"base"``: adapters in the base weights\' dtype (torchtune, LitGPT, peft with '
            "``autocast_adapter_dtype=False``)."
        ),
    ),
    _bool(
        "attention_grouped_kv",
        False,
        BEHAVIOUR,
        doc=(
            "torch SDPA keeps grouped k/v at kv-head size and saves them so for backward: "
            "transformers 5.17 ``integrations/sdpa_attention.py`` passes ``enable_gqa=True`` "
            "instead of ``repeat_kv`` when ``use_gqa_in_sdpa`` holds (no attention mask, head_dim "
            "<= 256: causal training without padding). Default False: k/v expanded to every query "
            "head before SDPA (transformers before ``enable_gqa``, torchtune, LitGPT)."
        ),
    ),
    _bool(
        "sdpa_mask_boolean",
        True,
        BEHAVIOUR,
        doc=(
            "The 4-D attention masks the model hands torch SDPA are boolean (transformers 5.17 "
            "``masking_utils.sdpa_mask``): on every call ATen makes an additive copy of the "
            "query's dtype (``attention.cpp`` ``convert_boolean_attn_mask``), which the "
            "memory-efficient and cuDNN kernels save for backward, and the mask itself holds a "
            "byte per element. Read where a mask tensor reaches SDPA (a padded batch, packed "
            "samples kept apart, a sliding window the keys reach); transformers builds them so "
            "from 4.53 on (``masking_utils``, the oracle's transformers 4.53.3 and 5.17). Off: "
            "transformers 4.52 and before, whose ``AttentionMaskConverter`` builds one additive "
            "mask in the model's dtype for every block to share, which the kernels save by "
            "reference."
        ),
    ),
    _bool(
        "sequence_parallel_repeats_kv",
        False,
        BEHAVIOUR,
        doc=(
            "With sequence parallelism, k/v repeated to every query head before the all-to-all: "
            "XTuner's attention (``xtuner/model/modules/dispatch/llama.py`` at 5af250da: "
            "``repeat_kv`` before the ``sequence_parallel_wrapper`` flash call), so the "
            "all-to-alls carry and flash attention saves k/v at the query heads' width. "
            "Default False: DeepSpeed's Ulysses (ALST in accelerate) keeps the key/value heads, "
            "repeated only up to one per GPU of the group."
        ),
    ),
    _enum(
        "attention_mask",
        AttentionMask,
        "causal",
        BEHAVIOUR,
        doc=(
            "what the loop hands torch's SDPA: ``causal``, ``is_causal=True`` and no mask tensor, "
            "so the fused kernels (flash, cuDNN, memory-efficient) skip the key blocks above the "
            "diagonal; ``padding``, an explicit mask tensor (a padded batch's 4-D mask), which "
            "takes flash out of the choice and makes cuDNN or memory-efficient compute the whole "
            "L x L square (:mod:`calc.attention`): twice the score and value matmuls. Read with "
            "``attention`` ``sdpa`` only: ``eager`` always computes the square and ``flash`` "
            "unpads the batch. In memory, ``padding`` counts the ``b x 1 x L x L`` mask the "
            "model builds once per forward, boolean under ``sdpa``, of the compute dtype under "
            "``eager``, none under ``flash`` (:func:`calc.memory.shared_mask_bytes`). "
            "Default ``causal``."
        ),
    ),
    _enum(
        "fp8_library",
        Fp8Library,
        "transformer-engine",
        BEHAVIOUR,
        doc=(
            "what runs the FP8 linears when the plan asks for ``fp8_compute`` (time only). "
            '``"transformer-engine"`` (default; NeMo, Megatron): its casts are fused kernels, and '
            "so are torchao's under ``torch_compile``: read 2 bytes and write 1 per element "
            "(:data:`calc.timing.FP8_CAST_BYTES_PER_ELEMENT`), no weight gradient for a frozen "
            'weight. ``"torchao"`` without ``torch_compile``: torchao 0.18.0 '
            "``float8/float8_linear.py`` ``matmul_with_hp_or_float8_args`` casts the input and the "
            "weight in the forward and, in the backward, the output gradient twice, the weight and "
            "the input again, each cast eleven eager ops over the tensor "
            "(``float8_utils.py`` ``tensor_to_amax``, ``amax_to_scale``, ``to_fp8_saturated``; "
            "``float8_training_tensor.py`` ``_ToFloat8ConstrFunc``: 33 bytes per element), and it "
            "computes the weight gradient of a frozen base weight too (the backward returns it "
            "whether or not the weight trains): :func:`calc.timing.fp8_eager_counts`. accelerate "
            "1.15.0 ``Accelerator.__init__`` picks torchao first when it is installed "
            '(``mixed_precision="fp8"`` without a backend: AO, then TE, then MS-AMP), so the '
            "profiles on accelerate set it."
        ),
    ),
    _enum(
        "packed_attention",
        PackedAttention,
        "cross-sample",
        BEHAVIOUR,
        doc=(
            "whether the samples of a packed row (``batching`` ``packed``) attend to each other: "
            "``cross-sample``, causal attention over the whole row (samples concatenated and cut, "
            "the classic ``group_texts`` recipe); ``per-sample``, each sample within itself "
            "(position ids restart at each sample: transformers' ``DataCollatorWithFlattening``, "
            "TRL ``padding_free``, axolotl ``sample_packing`` with flash attention, NeMo's packed "
            "fine-tuning). With ``attention`` ``flash`` the varlen kernel computes each sample's "
            "own triangle: per token, ``sum L^2 / sum L`` keys over the drawn sample lengths "
            "instead of ``seq_len`` (:mod:`calc.lengths`); with ``sdpa`` transformers 5.17 hands "
            "SDPA a 4-D block mask, the whole row's square (as ``attention_mask`` ``padding``); "
            "``eager`` computes the whole square either way; in memory, that 4-D mask under "
            "``sdpa`` or ``eager`` (as ``padding``). Read only with ``length_stats``. "
            "Default ``cross-sample``."
        ),
    ),
    _bool(
        "flash_attention_4",
        False,
        READER,
        doc=(
            "``attention`` ``flash`` runs FlashAttention-4's CuTe kernels (transformers 5.17 "
            '``attn_implementation="flash_attention_4"``, ``flash_attn/cute``), which issue '
            "Blackwell's ``tcgen05`` instructions: on the Blackwell class the attention is priced "
            "at the class's matmul efficiency like the other tensor-core paths, not at "
            "FlashAttention-2's measured B200 rate (:data:`calc.timing.FLASH2_ONLY_CLASSES`). "
            "Default False: flash-attn 2.x, what ``flash_attention_2`` loads. Time only; on other "
            "classes nothing changes (on Hopper ``flash`` already keeps the class efficiency)."
        ),
    ),
    _bool(
        "sdpa_cudnn_last",
        False,
        BEHAVIOUR,
        doc=(
            "torch's SDPA tries cuDNN attention last, after math, so it never runs: the order of "
            "torch 2.5.1 to 2.10 (``sdp_utils.cpp`` ``priority_order``; pytorch PR #138522, "
            "cherry-picked onto release/2.5; torch 2.4 and before had cuDNN off unless "
            "``TORCH_CUDNN_SDPA_ENABLED`` was set). A padded batch's mask tensor then runs on the "
            "memory-efficient kernel on every card. Default False: torch 2.11 on (2.13 here) "
            "tries cuDNN first on sm90 / sm100 / sm103 (``check_prefer_cudnn_attention``, "
            "pytorch PR #162073, gated on the bundled cuDNN > 9.15, which the wheels carry from "
            "2.11), so the mask runs on cuDNN there."
        ),
    ),
    _bool(
        "gradient_clipping",
        True,
        BEHAVIOUR,
        doc=(
            "The loop clips the gradients' norm before each optimizer step "
            "(``torch.nn.utils.clip_grad_norm_``): three more passes over every gradient in "
            "the optimizer's time (calc.timing.GRAD_CLIP_PASSES). Default True: the Hugging "
            "Face Trainer clips at ``max_grad_norm=1.0`` (transformers 5.17 "
            "``TrainingArguments``), and so do the tools built on it; torchtune's recipes "
            "clip only when ``clip_grad_norm`` is set (default None) and LitGPT only with "
            "``train.max_norm`` (default None), so their profiles say False. Time only."
        ),
    ),
    _enum(
        "load_warmup",
        LoadWarmup,
        "none",
        BEHAVIOUR,
        methods=QLORA,
        doc=(
            "the block transformers' ``from_pretrained`` allocates and frees before it copies "
            "a bitsandbytes 4-bit model to the GPU (``caching_allocator_warmup``), which the "
            "cache keeps and the weights then load into (:mod:`calc.load_warmup`). transformers "
            "4.51 to 4.57 count the 4-bit weights at 16 bits and halve the count, so the block "
            "is about twice the weights: ``transformers-4.51`` caps it at 0.95 of the free "
            "memory, ``transformers-4.52`` (4.52 to 4.57, the ``unsloth`` profile's: its "
            "notebooks pin 4.56.2) at the free memory less 1.2 GiB. ``none`` (the key's "
            "default): no block larger than the weights (transformers 4.49 and before, and "
            "transformers 5, which sizes it from the 4-bit bytes). The allocator replay only: "
            "its reserved memory on a card; not ``min_device_bytes``."
        ),
    ),
    _bool(
        "offload_pinned",
        True,
        BEHAVIOUR,
        doc=(
            "DeepSpeed's CPU-offload buffers are page-locked (``offload_optimizer.pin_memory``): "
            "the gradients' copies to the host (``copy_(..., non_blocking=True)``) then run "
            "beside the backward. Off, a copy into pageable memory holds the host thread until "
            "it ends, so the GPU waits for each one: they add to the step. Default True: "
            "DeepSpeed v0.19.5 (#8207, ``runtime/zero/offload_config.py``); False in every "
            "release before (v0.14 to v0.19.4), the transformers 4 profiles' generation. "
            "DeepSpeed with ``cpu_offload`` only; time only (calc.host_offload)."
        ),
    ),
    _bool(
        "offload_host_cast",
        True,
        BEHAVIOUR,
        doc=(
            "DeepSpeed casts the updated fp32 partition to 16 bits on the host and uploads 16 "
            "bits (v0.17.0 on, #7309: ``param_buffer_of_bit16_for_cpu_offload_groups``): 6 more "
            "bytes per parameter through host memory, 2 over the host link. Off (v0.14.1 to "
            "v0.16.9): the fp32 partition goes up whole (4 bytes) and is cast on the GPU. "
            "DeepSpeed with ``cpu_offload`` ``optimizer`` only; time only (calc.host_offload)."
        ),
    ),
    _bool(
        "zero_grad_set_to_none",
        True,
        BEHAVIOUR,
        doc=(
            "the loop's ``zero_grad`` frees the gradients after each optimizer step "
            "(``set_to_none=True``), so the next step's forward runs without them. Default True: "
            "torch 2.0 made ``set_to_none=True`` the default of ``Optimizer.zero_grad`` and "
            "``Module.zero_grad`` (the Hugging Face Trainer calls ``model.zero_grad()``), and "
            "accelerate 0.28.0 the default of its prepared optimizer's "
            "(``AcceleratedOptimizer.zero_grad``, PR #2472, 145a98fc). False: torch < 2.0, or a "
            "loop on accelerate < 0.28 that calls ``optimizer.zero_grad()`` (accelerate 0.6 to "
            "0.27 ``optimizer.py`` turns ``set_to_none=None`` into ``False``): the gradients are "
            "zeroed in place and stay allocated through every later forward and backward, as "
            "with gradient accumulation, and the zeroing writes each of them once a step "
            "(:data:`calc.timing.ZERO_GRAD_PASSES`). DeepSpeed's ZeRO engine zeroes its own "
            "gradients (accelerate's wrapper's ``zero_grad`` does nothing): no effect there, "
            "nor with the optimizer step fused into backward."
        ),
    ),
    _bool(
        "loss_outputs_kept",
        False,
        BEHAVIOUR,
        doc=(
            "the training loop holds the model's output object through ``loss.backward()`` "
            "(``outputs = model(...); outputs.loss.backward()``), so the output layer's logits "
            "stay alive at the start of the loss backward. Default False: the loop keeps only the "
            "loss (Hugging Face ``Trainer.compute_loss`` returns the loss alone when "
            "``return_outputs=False``, and ``training_step`` drops the rest)."
        ),
    ),
    _bool(
        "outputs_cast_fp32",
        False,
        BEHAVIOUR,
        doc=(
            "the loop casts the 16-bit tensors of the model's output to fp32 as the forward "
            "returns: accelerate's native mixed precision (``*-mixed`` without DeepSpeed; "
            "accelerate 1.15.0 ``accelerator.py`` ``Accelerator.__init__`` sets ``native_amp`` "
            "for fp16 and bf16 unless DeepSpeed or Megatron runs) wraps the model's forward in "
            "``convert_outputs_to_fp32`` (``prepare_model``), whose ``convert_to_fp32`` calls "
            "``tensor.float()`` on every fp16 / bf16 tensor of the output "
            "(``utils/operations.py``), and the Hugging Face Trainer prepares its model that "
            "way (transformers 5.17.0 ``trainer.py`` ``_inner_training_loop``: "
            "``self.accelerator.prepare(self.model)``). A model that returns its whole 16-bit "
            "logits (transformers' unchunked loss, or a chunked loss that holds them, Unsloth "
            "2024's ``Fast_CrossEntropyLoss``) gets an fp32 copy, ``4 V`` bytes per token, alive "
            "with the 16-bit logits and what the loss saved until the loop drops the output; a "
            "loop that keeps the output through the backward (``loss_outputs_kept``) keeps the "
            "copy, as with ``logits_upcast_in_model`` "
            "(:func:`calc.activations.output_cast_bytes_per_token`). Unsloth issue #465 (May "
            "2024) shows it failing: ``_convert_to_fp32`` asked for the ``[2, L, 128256]`` fp32 "
            "logits on a T4. No effect where the logits are never whole (``loss_fused_lm_head``, "
            "``loss_grad_in_forward``) or fp32 already. Default False: a loop of its own "
            "(accelerate's profiles set it under ``*-mixed``)."
        ),
    ),
    _bool(
        "expandable_segments",
        False,
        BEHAVIOUR,
        doc=(
            "PyTorch's caching allocator runs with ``expandable_segments:True`` "
            "(``PYTORCH_CUDA_ALLOC_CONF``, or ``PYTORCH_ALLOC_CONF`` from torch 2.10): one "
            "segment per pool that grows by mapping 20 MiB pages (2 MiB in the small pool) and "
            "unmaps its fully free pages before out of memory, instead of a ``cudaMalloc`` per "
            "segment (``c10/cuda/CUDACachingAllocator.cpp`` ``ExpandableSegment``, "
            ":class:`calc.allocator.AllocatorConfig`). Read by the allocator replay only "
            "(``min_device_bytes`` and the replayed reserved peak of a request with "
            "``length_stats``), whose smallest device is then the most that the pages held "
            "blocks touch add up to (:func:`calc.allocator.unwalked_capacity`). Default False: "
            "PyTorch's default; Unsloth sets it at import (its profile says True)."
        ),
    ),
    _bool(
        "qlora_quant_state_replicated",
        False,
        BEHAVIOUR,
        methods=QLORA,
        doc=(
            "QLoRA under ZeRO-3 / FSDP on several GPUs keeps the quantization statistics of every "
            "4-bit weight (absmax, and with double quantization its 8-bit absmax and their fp32 "
            "scales) whole on every GPU: bitsandbytes keeps them in ``Params4bit.quant_state``, a "
            "plain attribute that FSDP and ZeRO-3 do not shard (they shard parameters; "
            "bitsandbytes PR #970, v0.43.0, FSDP-QLoRA). Only the packed 4-bit data is sharded "
            "(:func:`calc.memory.model_states`). Default False: torchao's ``NF4Tensor`` shards "
            "its scalers with its data."
        ),
    ),
    _bool(
        "fsdp_wrap_floor",
        False,
        BEHAVIOUR,
        doc=(
            "the model is loaded on the CPU and wrapped by FSDP1 (``FullyShardedDataParallel`` "
            "with ``device_id``, flat parameters, ``sync_module_states``), as Answer.AI's "
            "``fsdp_qlora/train.py`` does. On several GPUs with a sharding other than ``none``, "
            "the reserved memory is at least what the wrapping leaves cached (the rank-0 copies "
            "of one block's and of the root's parameters, their broadcast buckets and flat "
            "parameters, freed but kept by PyTorch's caching allocator) plus the all-gather "
            "stream's own blocks, and the step's allocator slack is FSDP1's "
            "(:func:`calc.memory.fsdp_wrap_reserved_bytes`, "
            ":data:`calc.memory.FSDP1_ALLOCATOR_SLACK_FRACTION`). Default False: no such floor, "
            "the generic slack."
        ),
    ),
    _enum(
        "framework",
        Framework,
        "hf-trainer",
        READER,
        doc=(
            "the training library, a profile of the library behaviours (and of a few reader "
            "keys: :attr:`FieldSpec.profiles`; :mod:`calc.frameworks`), one generation of its "
            "libraries each: ``hf-trainer`` (default: transformers' Trainer on transformers 5, "
            "what most readers run), ``generic`` (no profile, every key at its own default), "
            "``hf-trainer-4`` (transformers 4.46-4.53), ``trl-sft``, ``axolotl``, ``llama-factory``, ``ms-swift`` (each on the transformers "
            "5 Trainer), ``hf-custom-loop``, ``pytorch-loop`` (transformers 5) and "
            "``pytorch-loop-4`` (transformers 4.46-4.53), ``torchtune``, ``litgpt``, "
            "``unsloth``. The profile fills only keys the request leaves out; an unknown name "
            "is refused with the list of known ones."
        ),
    ),
    _enum(
        "moe_expert_layout",
        MoeExpertLayout,
        "per-expert-modules",
        BEHAVIOUR,
        doc=(
            "how MoE experts are stored and run. In time, for every method "
            '(:mod:`calc.moe_kernels`): ``"fused-3d"`` experts run as grouped matmuls (transformers '
            '5.17 picks ``experts_implementation="grouped_mm"`` by default, '
            "``PreTrainedModel.get_correct_experts_implementation``; torchtitan's "
            '``GroupedExperts``), ``"per-expert-modules"`` as transformers 4\'s Python loop over '
            "the experts hit, which waits for the device at each expert. In memory, it decides "
            "what peft's LoRA does to them "
            '(:mod:`calc.lora`). ``"per-expert-modules"`` (the key\'s default, and the '
            "``hf-trainer-4`` profile's): one ``nn.Linear`` per expert matrix, as in transformers "
            '4, each with its own adapter. The ``hf-trainer`` profile sets ``"fused-3d"``. '
            '``"fused-3d"``: the expert stacks are 3-D tensors (transformers 5.17 '
            "``Qwen3MoeExperts``, ``MixtralExperts``), which peft 0.21 adapts through "
            "``target_parameters`` (``peft/utils/transformers_weight_conversion.py`` "
            "``_convert_peft_config_moe``): ``gate_proj`` + ``up_proj`` become one "
            "``gate_up_proj`` adapter of rank ``2r``, the router keeps an adapter of rank ``r`` "
            "(Qwen3-MoE, Mixtral; Qwen2-MoE is not converted: only its shared expert is adapted, "
            ":data:`calc.lora.CONVERTED_FAMILIES`), and each step builds ``W + B\u00b7A`` for every "
            "adapted expert stack, saved for backward (``peft/tuners/lora/layer.py`` "
            "``ParamWrapper._activate_lora`` / ``_LoraFactorsProxy``). With QLoRA the 3-D experts "
            "also stay in 16 bits (:func:`calc.lora.as_stored_3d`: bitsandbytes quantises "
            "``nn.Linear`` modules only). No effect on dense models, nor on gpt-oss / Llama 4, "
            "whose 3-D experts calc names directly."
        ),
    ),
    _enum(
        "lora_modules_to_save",
        ModulesToSave,
        "none",
        READER,
        methods=PEFT,
        doc=(
            "LoRA / QLoRA also trains the embedding, the output layer or both in full (peft "
            "``LoraConfig(modules_to_save=[...])``, axolotl ``lora_modules_to_save``), as runs "
            "that add chat tokens do. peft 0.21.0 ``utils/other.py`` ``ModulesToSaveWrapper`` "
            "keeps the original module, frozen, and trains a ``copy.deepcopy`` of it in the "
            "module's own dtype (``cast_adapter_dtype`` upcasts only adapter layers): the table "
            "is held twice, and the copy has a gradient and optimizer states "
            "(:func:`calc.states.saved_module_params`). Tied embeddings are untied by the copy "
            '(``ensure_weight_tying`` off, its default). ``"embed_tokens+lm_head-tied"`` is both '
            "with ``LoraConfig(ensure_weight_tying=True)``: on a model whose tables are tied, "
            "peft 0.21.0 (``tuners/lora/model.py`` ``_add_modules_to_save_to_tie``) copies the "
            "embedding alone and gives the output layer's wrapper a ``Linear`` whose weight is "
            "that copy (``ModulesToSaveWrapper.update(tied_module= ...)``): one trainable table, "
            'both gradients summed into it; on an untied model it is ``"embed_tokens+lm_head"`` '
            '(peft only warns). Default ``"none"``: adapters only.'
        ),
    ),
    _bool(
        "previous_outputs_kept",
        False,
        BEHAVIOUR,
        doc=(
            "the training loop holds the previous micro-batch's output (the logits) until the "
            "next forward returns, as LitGPT's ``finetune/*.py`` loops do (``logits = "
            "model(...)`` is rebound only after the call): during the forward the previous 16-bit "
            "logits are still alive, and with ``qlora_keeps_inputs`` so are the inputs that "
            "bitsandbytes < 0.43.2 stored in ``MatMul4Bit``'s ``ctx.tensors``, a Python attribute "
            "of the backward node that ``backward()`` does not release (saved tensors it does "
            "release), reachable from the held logits through their autograd graph "
            "(:func:`calc.memory.previous_micro_batch_bytes`). Default False: the loop keeps only "
            "the loss, or a detached copy (Hugging Face ``Trainer.training_step``, torchtune)."
        ),
    ),
    _bool(
        "qlora_output_layer_quantized",
        False,
        BEHAVIOUR,
        methods=QLORA,
        doc=(
            "QLoRA stores the output layer in 4 bits too, as Lightning's "
            "``BitsandbytesPrecision`` does (it replaces every ``torch.nn.Linear`` built under "
            "``fabric.init_module``; LitGPT passes no ``ignore_modules``): its weight counts as "
            "NF4, its input is kept with ``qlora_keeps_inputs``, and its matmul dequantizes the "
            "whole ``vocab x hidden`` weight while every saved activation is alive. Only for an "
            "output layer not tied to the embedding. Default False: transformers 5.17 keeps the "
            "output embedding in 16 bits (``quantizers/base.py`` ``get_keys_to_not_convert``), "
            "torchtune quantizes block linears only."
        ),
    ),
    _bool(
        "qlora_dequant_fp16",
        False,
        BEHAVIOUR,
        methods=QLORA,
        doc=(
            "the 4-bit weights were quantized from an fp16 copy (Lightning "
            "``_Linear4bit.quantize``: ``weight.to(dtype=torch.half)``), so ``dequantize_4bit`` "
            "writes fp16 (its ``quant_state.dtype``) and ``MatMul4Bit`` casts it to the bf16 "
            "compute dtype (``.to(A.dtype)``): two weight-sized buffers for a moment "
            "(:data:`calc.memory.DEQUANT_BYTES` each). No effect with fp16 compute. Default "
            "False: transformers quantizes the weights in the dtype they were loaded in, the "
            "compute dtype."
        ),
    ),
    _bool(
        "qlora_prepare_kbit",
        False,
        BEHAVIOUR,
        methods=QLORA,
        doc=(
            "peft's ``prepare_model_for_kbit_training`` ran on the 4-bit model (peft 0.21.0 "
            "``utils/other.py``, as peft's quantization guide and loops written after it call "
            "it) and no autocast runs (precision ``bf16-true``): it casts every fp16 / bf16 parameter "
            "whose class is not ``Params4bit`` to fp32 (``param.data = param.data.to("
            "torch.float32)``): the embedding, the norms, biases and the output layer. The "
            "embedding then writes an fp32 residual stream; transformers 5.17 "
            "``LlamaRMSNorm.forward`` returns ``self.weight * hidden_states.to(input_dtype)``, "
            "fp32 weight times fp32 input, so every norm output is fp32; bitsandbytes 0.49.2 "
            "``Linear4bit.forward`` casts its input to the bf16 compute dtype and its output "
            "back to the input's dtype (``out.to(inp_dtype)``), so q, k, v, the attention, the "
            "MLP and the output layer's logits are fp32 too; only the dequantized weights and "
            "the gradients inside each 4-bit matmul stay 16-bit (:data:`calc.memory.DEQUANT_BYTES`). "
            "Counted as the fp32 regime for everything but the 4-bit weights "
            "(:func:`calc.states.request_regime`). The function also enables checkpointing "
            "(``gradient_checkpointing`` stays the reader's key) and, for reentrant "
            "checkpointing, input gradients, which change no saved tensor under checkpointing. "
            "On its own no effect with ``*-mixed`` or ``fp32`` precision, whose non-quantized "
            "parameters are fp32 already (under autocast calc counts the 4-bit linears' fp32 "
            "outputs in the MLP, :func:`calc.activations.mlp_unit_bytes`). TRL's ``SFTTrainer`` "
            "before 0.26.0 calls it too (0.12.1 ``sft_trainer.py``: on a 4-bit model that is not "
            "sharded), and with ``bf16`` (the Trainer's autocast) then casts the embedding and "
            "output layer back to bf16 (``qlora_embeddings_recast_bf16``, counted under "
            "``bf16-true`` and ``*-mixed``). Default False: the non-quantized parameters "
            "keep the model's 16-bit dtype (transformers' ``from_pretrained`` alone)."
        ),
    ),
    _bool(
        "qlora_embeddings_recast_bf16",
        False,
        BEHAVIOUR,
        methods=QLORA,
        doc=(
            "after ``prepare_model_for_kbit_training`` (``qlora_prepare_kbit``) the loop casts "
            "the embedding and the output layer back to bf16: TRL 0.12.1 ``sft_trainer.py`` "
            "calls ``peft_module_casting_to_bf16`` after ``get_peft_model`` when ``args.bf16`` "
            "and the model is loaded in 4 bits and not sharded (FSDP / ZeRO-3 QLoRA skips both "
            "calls); ``trainer/utils.py`` casts every module whose name contains ``lm_head``, "
            "``embed_tokens``, ``wte`` or ``wpe`` and whose weight is fp32 to bf16, and every "
            "norm to fp32. ``named_modules()`` reaches peft's ``lora_modules_to_save`` "
            "wrappers by those names, so the frozen original and the trainable copy are both "
            "bf16: the copies' weights, gradients and torch AdamW states 2 bytes each instead of "
            "4 (:func:`calc.states.saved_regime`), the frozen tables 2 bytes "
            "(:func:`calc.states.recast_params`), and the output layer's logits 16-bit (then "
            "upcast by the loss). The LoRA adapters are not cast (TRL 0.9.3, PR #1644, stopped "
            "casting peft's tuner layers, which 0.7.5 to 0.9.2 cast to bf16 too: not counted) and "
            "stay in ``lora_adapter_dtype``. TRL's SFTTrainer ran this path up to 0.25.1; TRL PR #4577 (0.26.0) dropped the kbit preparation and "
            "the cast from it (PR #3882, 0.22.0, only moved them into "
            "``trl/models/utils.py`` ``prepare_peft_model``). Counted where the preparation "
            "ran (``qlora_prepare_kbit``), without autocast (``bf16-true``) or under it "
            "(``*-mixed`` without ZeRO, TRL's ``bf16`` flag: the output layer's weight is then "
            "16-bit, so autocast makes no working copy of it, :func:`calc.memory.weight_copy_bytes`, "
            "and casts nothing, :func:`calc.timing.autocast_cast_params`); the rest of the fp32 "
            "regime (activations, norms) is left as that key counts it. Default False."
        ),
    ),
    _bool(
        "qlora_compute_dtype_from_input",
        False,
        BEHAVIOUR,
        methods=QLORA,
        doc=(
            "each 4-bit linear takes its compute dtype from its first input when that is fp32 "
            "or bf16, whatever ``bnb_4bit_compute_dtype`` says: bitsandbytes up to 0.46 builds "
            "``Linear4bit`` with ``compute_type_is_set = False`` and its first ``forward`` calls "
            "``set_compute_type`` (``if x.dtype in [torch.float32, torch.bfloat16]: "
            "self.compute_dtype = x.dtype``, ``nn/modules.py``, 0.45.0 to 0.46.1); 0.47.0 keeps a "
            "compute dtype given (``compute_type_is_set = False if compute_dtype is None else "
            "True``, commit 812ef06a). With fp32 activations (``qlora_prepare_kbit``, or a model "
            "loaded in fp32) the 4-bit weights are dequantized to fp32 and every 4-bit matmul "
            "runs in fp32, at the card's FP32 rate without tensor cores (``allow_tf32`` off), "
            "and the input and output casts around it vanish. No effect with 16-bit "
            "activations. Default False: calc reads bitsandbytes 0.49.2."
        ),
    ),
    _bool(
        "fsdp_flat_parameters",
        False,
        BEHAVIOUR,
        methods=FULL,
        doc=(
            "FSDP (v1) keeps each wrapped unit's parameters in one flat parameter and hands the "
            "modules views of it made by ``torch.split`` then ``view`` (torch "
            "``distributed/fsdp/_flat_param.py`` ``_get_unflat_views_unaligned``; Lightning's "
            "``FSDPStrategy`` sets ``use_orig_params=True``). In full fine-tuning the root unit's "
            "gradient (embedding, final norm, output layer) is built by ``split``'s backward only "
            "once every view's gradient exists, at the end of the backward: the output layer's "
            "gradient waits from the start of the backward, and the concatenated flat gradient is "
            "written while the per-view ones are alive (:func:`calc.memory.root_gradient_bytes`). "
            "Only with ZeRO-3 / FSDP on several GPUs. Default False: FSDP2 (``fully_shard``) "
            "shards each parameter on its own, DeepSpeed partitions gradients as they come; the "
            "Hugging Face profiles set it under FSDP (accelerate 1.15 ``FullyShardedDataParallelPlugin`` "
            "defaults to ``fsdp_version`` 1)."
        ),
    ),
    _bool(
        "fsdp_fully_shard",
        False,
        BEHAVIOUR,
        doc=(
            "the loop shards with FSDP2 (``fully_shard``): each unshard copies the unit's "
            "gathered parameters out of the all-gather buffer into the per-parameter tensors "
            "(torch ``distributed/fsdp/_fully_shard/_fsdp_collectives.py`` "
            "``foreach_all_gather_copy_out``, called by ``FSDPParamGroup.wait_for_unshard``) on "
            "the compute stream, a block in its forward and again in the backward, the root "
            "once: read and written at the memory's rate, exposed "
            "(:data:`calc.timing.FSDP2_COPY_OUT_PASSES`). FSDP1 gives the modules views of the "
            "gathered flat parameter instead (``_flat_param.py`` ``_use_unsharded_views``). Only "
            "with ZeRO-3 / FSDP on several GPUs; not with ``fsdp_flat_parameters`` (FSDP1). "
            "Default False: no copy-out counted, as FSDP1 and DeepSpeed run."
        ),
    ),
    _bool(
        "logits_upcast_in_model",
        False,
        BEHAVIOUR,
        doc=(
            "the model's forward returns fp32 logits (its last op is ``self.output(h).float()``: "
            "torchtune ``modules/transformer.py`` ``TransformerDecoder`` from 86c23185f, "
            "2024-01-10, on its unchunked path), so logits the loop keeps through the backward "
            "(``loss_outputs_kept``) are ``4 V`` bytes per token instead of the compute dtype's. "
            "Without ``loss_outputs_kept``, or with a chunked loss (16-bit chunks), it changes "
            "nothing: the 16-bit logits are freed by the upcast and the loss counts its fp32 "
            "tensors anyway. Default False: transformers 5.17 returns 16-bit logits and upcasts "
            "in the loss."
        ),
    ),
    _bool(
        "chunked_loss_keeps_fp32",
        False,
        BEHAVIOUR,
        doc=(
            "the chunked loss upcasts each chunk to fp32 and, run eagerly (``torch_compile`` "
            "off), every chunk's ``log_softmax`` saves its fp32 output for backward: torchtune's "
            "``CEWithChunkedOutputLoss`` (``modules/loss/ce_chunked_output_loss.py`` at "
            "30b8519e8, ``F.cross_entropy(logits.float(), ...)`` per chunk; its docstring says "
            "the gains come only with ``compile_loss``, which compiles that call). Default False: "
            "the chunked loss holds only the 16-bit logits (compiled, or a fused kernel)."
        ),
    ),
    _bool(
        "output_layer_chunked",
        False,
        BEHAVIOUR,
        doc=(
            "the output layer runs once per chunk of the sequence and the chunked loss takes "
            "the list of chunks (torchtune 0.6.1 ``modules/transformer.py`` "
            "``TransformerDecoder.chunked_output``: ``[self.output(chunk) for chunk in "
            "last_hidden_state.chunk(num_output_chunks, dim=1)]``, 8 chunks). A trainable "
            "output layer's weight gradient then reaches its accumulator once per chunk, and "
            "torch's autograd engine sums the arrivals out of place (``InputBuffer::accumulate`` "
            "``old_var + var``): during the loss's backward the running sum, the new chunk's "
            "gradient and their sum are alive (``3 V h act``), beside the 16-bit gradients of "
            "the chunks' logits still waiting for the output layer (``(n - 2) / n`` of "
            "``act V`` per token) (:func:`calc.activations.chunked_head_grad_bytes`). Read with "
            "``chunked_loss`` on, ``loss_fused_lm_head`` and ``loss_grad_in_forward`` off, and a "
            "trainable output layer (full fine-tuning, or ``lm_head`` in "
            "``lora_modules_to_save``). Default False: the output layer runs once on the whole "
            "sequence (transformers, LitGPT's full fine-tuning), one weight gradient."
        ),
    ),
    _bool(
        "chunked_loss_holds_logits",
        False,
        BEHAVIOUR,
        doc=(
            "the chunked loss runs eager 16-bit cross-entropy on logits the model returned and "
            "the training loop holds them through the whole backward: LitGPT 0.5.13 "
            "``utils.py`` ``chunked_cross_entropy`` (``F.cross_entropy(..., reduction='none')`` "
            "per 128-token chunk; ``log_softmax`` saves each chunk's 16-bit output) called by "
            "``finetune/lora.py`` ``fit`` on ``logits = model(input_ids, "
            "lm_head_chunk_size=128)`` (the output layer run per chunk, a list) and by "
            "``finetune/full.py`` on ``logits = model(input_ids)`` (whole), ``logits`` alive "
            "through ``fabric.backward``. The loss's backward runs every chunk's cross-entropy "
            "before the output layer's: with a frozen output layer its peak holds the loop's "
            "logits, one 16-bit log-softmax or logits' gradient per scored token and, for the "
            "chunk being differentiated, the nll gradient and its logits' gradient; a trained "
            "whole output layer adds the sliced logits' gradient and the weight's gradient "
            "(:func:`calc.activations.held_chunks_loss_bytes`). The loop's logits stay through "
            "the backward. Read with ``chunked_loss`` on, ``loss_fused_lm_head``, "
            "``loss_grad_in_forward`` and ``chunked_loss_keeps_fp32`` off. Default False: the "
            "chunked loss holds only the 16-bit logits (compiled, or a fused kernel)."
        ),
    ),
    _bool(
        "lora_fused_qkv_adapter",
        False,
        BEHAVIOUR,
        methods=PEFT,
        doc=(
            "LoRA on q, k and v is one adapter on the fused qkv linear: litgpt 0.5.13 "
            "``lora.py`` ``LoRAQKVLinear.forward`` drops its input once "
            "(``F.linear(self.lora_dropout(x), self.lora_A)``, ``lora_A`` stacking ``r`` rows "
            "per adapted projection) and, when not all three are adapted, ``zero_pad`` pads "
            "the ``lora_B`` output to the fused width with ``index_copy_``, whose backward "
            "saves that output (:func:`calc.activations.lora_dropout_bytes`, "
            ":func:`calc.activations.qkv_adapter_pad_bytes`). Read where the attention's "
            "inputs are ``q_proj``, ``k_proj``, ``v_proj``. Default False: one adapter, and "
            "one dropout, per adapted linear (peft, torchtune)."
        ),
    ),
    _bool(
        "rope_cache_fp32",
        False,
        BEHAVIOUR,
        doc=(
            "the model keeps a precomputed rotary-embedding table, fp32, of "
            "``max_position_embeddings x head_dim`` values (cos and sin of every position): "
            "torchtune 0.6.1 ``modules/position_embeddings.py`` ``RotaryPositionalEmbeddings`` "
            "and ``models/llama3_1/_position_embeddings.py`` ``Llama3ScaledRoPE`` register "
            "``cache`` (``[max_seq_len, head_dim // 2, 2]``, built from the fp32 ``theta``) and "
            "the Llama 3.1, 3.2 and Qwen2 builders share one module among all layers "
            "(:func:`calc.memory.rope_cache_bytes`; the Llama 3 (3.0) LoRA builder builds one "
            "per layer, not counted). Counted with the weights, on every GPU (a buffer, never "
            "sharded or offloaded). Default False: transformers computes cos and sin in each "
            "forward from an ``inv_freq`` buffer of ``head_dim / 2`` values."
        ),
    ),
    _enum(
        "rope_cache_16bit",
        RopeCache16Bit,
        "none",
        BEHAVIOUR,
        doc=(
            "rotary cos and sin tables precomputed for ``min(32768, max_position_embeddings)`` "
            "positions of ``head_dim`` values each, in the model's 16-bit dtype, kept on the GPU "
            "as buffers: Unsloth's ``LlamaRotaryEmbedding`` (``models/llama.py``; Mistral and "
            "Qwen2 reuse it) builds them at construction (``current_rope_size = min(4 * 8192, "
            "max_position_embeddings)``, ``_set_cos_sin_cache`` with "
            "``torch.get_default_dtype()``, which transformers sets to the load dtype while it "
            "builds the model) and Unsloth puts its class in place of transformers'. ``model``: "
            "the model's one rotary module (transformers 4.48 on); ``per-layer``: also one in "
            "every attention layer (transformers up to 4.47 built ``self.rotary_emb`` in each "
            "``LlamaAttention``, and up to 4.37 its own class cached the same tables for "
            "``max_position_embeddings`` positions; before 4.43 there was no module in the model, "
            "one pair fewer). "
            "(:func:`calc.memory.rope_cache_bytes`); counted with the weights, on every GPU (a "
            "buffer, never sharded or offloaded). Default ``none``: transformers computes cos "
            "and sin in each forward from an ``inv_freq`` buffer of ``head_dim / 2`` values."
        ),
    ),
    _bool(
        "loss_on_16bit_logits",
        False,
        BEHAVIOUR,
        doc=(
            "the loss runs cross-entropy on the logits as the model returns them, 16-bit, as "
            "hand-written loops that call ``nn.CrossEntropyLoss`` / ``F.cross_entropy`` on "
            "``outputs.logits`` do: ``log_softmax`` keeps a 16-bit output for backward, and "
            "``nll_loss_backward`` and ``_log_softmax_backward_data`` write 16-bit gradients: "
            "``3 act V`` bytes per token at the start of the loss backward instead of the "
            "``12 V`` of transformers 5.17 ``loss/loss_utils.py`` ``ForCausalLMLoss``, which "
            "upcasts first (``logits = logits.float()``) "
            "(:func:`calc.activations.logits_bytes_per_token`). No effect when the logits are "
            "fp32 already (``fp32`` precision, ``qlora_prepare_kbit``, "
            "``logits_upcast_in_model``), nor with a chunked loss. Default False: the model "
            "computes its own loss from ``labels`` (the Hugging Face Trainer, accelerate's and "
            "peft's example loops with ``outputs.loss``)."
        ),
    ),
    _bool(
        "loss_fused_lm_head",
        False,
        BEHAVIOUR,
        doc=(
            "the chunked loss never builds the logits: the output layer and the cross-entropy "
            "run together, tile by tile, as TRL 1.16.0's ``SFTTrainer`` does "
            "(``trl/trainer/utils.py`` ``add_fused_lm_head``, ``trl/kernels/chunked_logprob.py`` "
            "``ChunkedLogProbFunction``). At the start of the loss's backward the function holds "
            "what it saved, per token: its own copy of the scored hidden states (``act h``: "
            "``hidden_states[mask]``), the int64 targets (8), the fp32 log-normaliser and "
            "entropy (4 + 4), the bool label mask (1) and the fp32 gradient of the log-probs "
            "(4); its backward adds the fp32 gradient accumulator of the hidden states (``4 h``) "
            "and, while that is alive, its cast to the compute dtype (``act h``); and one "
            "``[min(tokens, 4096), 32768]`` tile of the compute dtype "
            "(``TOKEN_CHUNK_SIZE``, ``_CHUNKED_LOGPROB_CHUNK_SIZE``) "
            "(:func:`calc.activations.fused_head_loss_bytes`). Read with ``chunked_loss`` only. "
            "Default False: the chunked loss holds the 16-bit logits (torchtune)."
        ),
    ),
    _bool(
        "loss_grad_in_forward",
        False,
        BEHAVIOUR,
        doc=(
            "the chunked loss computes the gradient of the hidden states in its forward, chunk "
            "by chunk, and saves only that gradient, as Unsloth's fused cross-entropy does "
            "(unsloth_zoo 2026.8.13 ``fused_losses/cross_entropy_loss.py`` ``UnslothFusedLoss``: "
            "``torch.func.grad_and_value`` per chunk into ``grad_inputs``, "
            "``ctx.save_for_backward(grad_inputs, ...)``). It holds, per token, the hidden "
            "states it reads and their gradient (``2 act h``), and one chunk's 16-bit logits, "
            "the chunks sized so that one chunk's fp32 logits stay under "
            "``min(half the free memory, 4 GiB)`` (counted at 4 GiB: "
            "``calc.activations.GRAD_IN_FORWARD_CHUNK_FP32_BYTES``; "
            ":func:`calc.activations.grad_in_forward_loss_bytes`). Read with ``chunked_loss`` "
            "only; ``loss_fused_lm_head`` wins when both are set. Default False: the chunked "
            "loss holds the 16-bit logits (torchtune)."
        ),
    ),
    _bool(
        "loss_whole_logits_small_batches",
        False,
        BEHAVIOUR,
        doc=(
            "a micro-batch of at most ``calc.memory.WHOLE_LOGITS_MAX_TOKENS`` (1024) tokens "
            "(micro-batch size x its padded length) skips the fused loss "
            "(``loss_fused_lm_head``, ``loss_grad_in_forward``): the output layer writes the "
            "whole 16-bit logits and the loss's kernel saves them and writes their gradient into "
            "them, so they are what it holds (``act V`` per token, as a chunked loss that holds "
            "the logits; :func:`calc.memory.loss_at_size`). Unsloth from b9fe2588 (2024-12-10) "
            "to 0cd0635a (2025-10-22): ``models/llama.py`` ``CausalLM_fast_forward`` sets "
            "``RETURN_LOGITS = True`` when ``bsz*q_len <= 1024``, then "
            "``kernels/cross_entropy_loss.py`` ``Fast_CrossEntropyLoss`` "
            "(``ctx.save_for_backward(logits, logsumexp, labels)``; its backward runs "
            "``_cross_entropy_backward`` on ``logits`` and returns them). The whole logits are "
            "the model's output too, so ``outputs_cast_fp32`` copies them. Read with "
            "``chunked_loss`` and a fused loss only. Default False: every micro-batch takes the "
            "loss the other keys say (Unsloth 2026.8.19 keeps the fused loss at any size)."
        ),
    ),
    _bool(
        "fused_lora_kernels",
        False,
        BEHAVIOUR,
        doc=(
            "the block runs Unsloth's hand-written autograd functions (unsloth 2026.8.19 "
            "``kernels/fast_lora.py``, ``kernels/rms_layernorm.py``) instead of peft's and "
            "transformers' modules, which save fewer tensors: each RMSNorm saves its input and "
            "an fp32 statistic per token (``Fast_RMS_Layernorm``: ``resid h + 4`` instead of "
            "``4 h + 4``); with adapters on q, k and v, ``LoRA_QKV`` saves only their input; with "
            "one on the output projection, ``LoRA_W`` only its input; with adapters on gate, up "
            "and down, ``LoRA_MLP`` saves its input and the gate and up outputs (``h + 2 m`` "
            "instead of ``h + 4 m``) and its backward works in place (one ``m``-wide gradient "
            "instead of two). None of them saves a rank-``r`` product, a dropout mask or an "
            "fp32 copy of its input. A group applies only when every linear of it carries an "
            "adapter without bias and ``lora_dropout`` is 0 (``FastLlamaModel.patch_peft_model``); "
            "Unsloth's in-place RoPE saves nothing beyond the shared cos / sin, as calc counts "
            "transformers' (:func:`calc.activations.fast_lora_groups`). In time, each adapted "
            "linear costs the host the calls of those functions "
            "(``calc.timing.FUSED_LORA_OPS_PER_ADAPTER``) and its adapters' matmuls run in the "
            "compute dtype (``matmul_lora`` casts fp32 adapters down); the element-wise traffic "
            "is that of Unsloth's Triton kernels (``calc.timing.UNSLOTH_NORM_BYTES_PER_ELEMENT``, "
            "``UNSLOTH_ROTARY_BYTES_PER_ELEMENT``, ``UNSLOTH_GLU_BYTES_PER_ELEMENT`` within "
            "``LoRA_MLP``, ``UNSLOTH_LORA_ADD_BYTES`` per adapted linear of a group), not "
            "transformers' op-by-op modules'. Default False: peft's "
            "``LoraLayer`` and transformers' ``RMSNorm``."
        ),
    ),
    _bool(
        "weights_loaded_16bit",
        False,
        BEHAVIOUR,
        doc=(
            "the library loads the model's weights in 16 bits and ``*-mixed`` precision (the "
            "Trainer's ``bf16=True`` / ``fp16=True``) only runs autocast: nothing casts the "
            'weights to fp32. transformers 5.17 ``from_pretrained`` defaults to ``dtype="auto"`` '
            '(``modeling_utils.py``: ``if dtype is None: dtype = "auto"``, the checkpoint\'s '
            "dtype, bf16 for the models calc knows); accelerate 1.15.0 wraps the forward in "
            "``torch.autocast`` and casts no parameter. Counted (:func:`calc.states.request_regime`): "
            "every weight 2 bytes, no 16-bit working copy of a frozen weight; the parameters that "
            "train keep the weights' 16 bits (their gradients and torch's AdamW states too), "
            "except LoRA adapters with ``lora_adapter_dtype`` ``fp32`` (4 bytes, their gradients "
            "and states too); activations and the residual stream are 16-bit, and each adapter "
            "saves autocast's 16-bit cast of the fp32 copy peft makes of its input. No effect "
            "with ``bf16-true`` or ``fp32``, under ZeRO (whose regime holds 16-bit weights "
            "already), or with ``qlora_prepare_kbit`` (peft casts the non-quantized weights to "
            "fp32). With ``fp16-mixed`` on a bf16 checkpoint, autocast's fp16 copies of the "
            "frozen bf16 weights are not counted. Default False: the weights are fp32 "
            "(transformers 4 loaded fp32 unless ``torch_dtype`` was given; TRL loads fp32 by "
            "default), Lightning's meaning of ``*-mixed``."
        ),
    ),
    _bool(
        "weights_loaded_other_16bit",
        False,
        BEHAVIOUR,
        doc=(
            "with ``weights_loaded_16bit``, the library loaded the weights in the other 16-bit "
            "type than autocast's: an fp16 checkpoint (Llama 2's config says ``float16``) loaded "
            'with ``dtype="auto"`` and trained with ``bf16-mixed``, or bf16 weights under '
            "``fp16-mixed``. ``torch.autocast`` then casts every weight to its own dtype at "
            "each matmul (``aten/src/ATen/autocast_mode.cpp`` ``cached_cast``: only the weights "
            "whose dtype differs from autocast's are cast), and the matmuls' bf16 outputs added "
            "to the fp16 residual stream promote it to fp32 (torch's type promotion: fp16 + bf16 "
            "-> float32), which every later block reads and writes. Counted "
            "(:func:`calc.states.request_regime`): the weights, their gradients and torch's "
            "AdamW states 2 bytes, a 16-bit working copy per weight as for fp32 weights under "
            "autocast, the residual stream fp32, and each cast's bytes in time (2 read, 2 "
            "written per weight element, :data:`calc.timing.AUTOCAST_WEIGHT_CAST_BYTES`). No "
            "effect without ``weights_loaded_16bit`` or where it has none."
        ),
    ),
    _enum(
        "sharding_engine",
        ShardingEngine,
        "fsdp",
        BEHAVIOUR,
        doc=(
            'what runs ``zero1`` / ``zero2`` / ``zero3``. ``"fsdp"`` (default): PyTorch FSDP, '
            "under which accelerate accumulates with ``no_sync`` (``sync_each_micro_batch``). "
            '``"deepspeed"``: DeepSpeed\'s ZeRO optimizer (config import sets it from a DeepSpeed '
            "config). With ZeRO-2/3, accelerate 1.15.0 ``Accelerator.no_sync`` gives DeepSpeed a "
            "``nullcontext`` (DeepSpeed 0.16.5 ``engine.no_sync`` refuses ZeRO 2/3): every "
            "micro-batch's gradients are reduced into the GPU's partition, so they stay sharded "
            "whatever ``sync_each_micro_batch`` says. The step casts the 16-bit gradient partition "
            "to an fp32 copy and steps the flat fp32 master partition with it, once per parameter "
            "group (ZeRO-1/2, ``stage_1_and_2.py`` ``step``) or one sub-group of at most "
            "``sub_group_size`` (1e9) elements at a time (ZeRO-3, ``stage3.py`` ``step``): the "
            "step's temporaries are that copy and the optimizer's own on one such partition "
            "(:func:`calc.states.deepspeed_step_temp_bytes`). ZeRO-3's reduce bucket "
            "(``reduce_bucket_size`` elements of the 16-bit dtype, ``hidden x hidden`` when the "
            "Hugging Face Trainer fills ``auto``) is allocated for the whole run."
        ),
    ),
    # at least one token: fewer is a typo (1e-300), not a dataset
    _number("dataset_tokens", None, 1.0, MAX_DATASET_TOKENS, True, required=True),
    _number("epochs", 1, 0.0, 10_000.0, False),
    FieldSpec("gpu", "gpu", None, PLAN, required=True),
    _number("price_per_gpu_hour", None, 0.0, 10_000.0, True, optional=True),
    FieldSpec("price_tier", "enum", "marketplace", PLAN, choices=TIERS),
    FieldSpec(
        "network",
        "enum",
        CATALOGUE_NETWORK,
        PLAN,
        choices=(CATALOGUE_NETWORK, *NETWORKS),
        doc=(
            "the network between servers when a job spans more than one (more than "
            "``calc.comm.GPUS_PER_NODE`` GPUs): ``catalogue``, the card's reference server (one "
            "InfiniBand adapter per GPU of a server board, an assumed 100 Gb/s per PCIe card, "
            ":func:`calc.comm.reference_network`), or a named network of "
            ":data:`calc.comm.NETWORKS` (its rate per server and its latency per ring step; "
            "``calc/data/instances.csv`` says which cloud instance has which). Every collective "
            "across servers pays NCCL's ring latency (:func:`calc.comm.ring_latency_s`). Read "
            "only beyond one server: figures on one server do not change."
        ),
    ),
    _int(
        "gpus_per_node",
        GPUS_PER_NODE,
        MAX_GPUS_PER_NODE,
        PLAN,
        doc=(
            "GPUs in one server: a job on more spans servers, whose collectives cross the "
            "network (``network``). Default 8, the SXM/OAM boards' (DGX/HGX H100, MI300X "
            "platform); 4-GPU servers (many A100 40GB and A10G instances, HPC nodes such as "
            "ALCF Polaris) and 2-GPU boxes put fewer GPUs behind each server's adapters "
            "(calc.comm.collective_link). Read only beyond one server."
        ),
    ),
    _bool("interruptible", False, PLAN),
    _bool(
        "owned",
        False,
        PLAN,
        doc=(
            "The reader owns the cards: no rent, the GPU time is priced as electricity, "
            "``board_power_w`` x hours x ``electricity_price_per_kwh`` (calc.cost."
            "electricity_usd_per_gpu_hour), for every card of the plan; storage is the "
            "reader's own disk (0 unless ``storage_price_per_gb_month`` is given). A "
            "``price_per_gpu_hour`` still sets the chosen card's hourly cost (say, with the "
            "card's depreciation); ``interruptible`` still adds checkpoints and lost work (a "
            "shared machine that pre-empts jobs)."
        ),
    ),
    _number(
        "electricity_price_per_kwh",
        ELECTRICITY_USD_PER_KWH,
        0.0,
        100.0,
        True,
        doc="USD per kWh, used when ``owned``: default about the US residential average (EIA).",
    ),
    _number(
        "board_power_w",
        None,
        0.0,
        100_000.0,
        False,
        optional=True,
        doc=(
            "Watts one card draws while training, used when ``owned``; empty: the chosen card's "
            "board power in the GPU catalogue (``board_power_w`` of calc/data/gpus.csv)."
        ),
    ),
    _number(
        "power_limit_w",
        None,
        1.0,
        10_000.0,
        True,
        optional=True,
        doc=(
            "The board power limit set on the chosen card (``nvidia-smi -pl``), watts; empty: "
            "the card's default, its board power in the GPU catalogue. The card then holds "
            "the clock that power allows (calc.gpus.with_power_limit: the catalogue's law for "
            "its derived clocks, clock ~ power ** (1 / 3) per compute unit, between the base "
            "and the boost clock), and every rate of the time model scales with that clock; "
            "an owned card's electricity is the limit (unless ``board_power_w`` says what it "
            "draws). The chosen card only: other cards of the plan run at their defaults."
        ),
    ),
    _number(
        "checkpoint_interval_minutes",
        30,
        0.0,
        1e6,
        False,
        doc=(
            "Interruptible capacity only. 30 minutes between checkpoints, 2 minutes per "
            "checkpoint and 2 interruptions a day are assumptions to be replaced by the user's "
            "own figures (marketplace interruptible instances can be pre-empted at any time)."
        ),
    ),
    _number(
        "checkpoint_minutes",
        2,
        0.0,
        10_000.0,
        True,
        doc=(
            "Interruptible capacity only. 30 minutes between checkpoints, 2 minutes per "
            "checkpoint and 2 interruptions a day are assumptions to be replaced by the user's "
            "own figures (marketplace interruptible instances can be pre-empted at any time)."
        ),
    ),
    _number(
        "interruptions_per_day",
        2,
        0.0,
        1440.0,
        True,
        doc=(
            "Interruptible capacity only. 30 minutes between checkpoints, 2 minutes per "
            "checkpoint and 2 interruptions a day are assumptions to be replaced by the user's "
            "own figures (marketplace interruptible instances can be pre-empted at any time)."
        ),
    ),
    _number(
        "eval_steps",
        None,
        0.0,
        1e9,
        False,
        optional=True,
        doc=(
            'HF Trainer\'s ``eval_steps`` with ``eval_strategy="steps"``: an evaluation after '
            "every multiple of it and one at the end (transformers 5.17 "
            "``DefaultFlowCallback``); below 1, a share of the run's steps. Empty: no "
            "evaluation counted. Each evaluation runs the forward pass over ``eval_tokens`` "
            "(calc.timing.eval_seconds)."
        ),
    ),
    _number(
        "eval_tokens",
        0,
        0.0,
        1e13,
        True,
        doc="Tokens of the evaluation set, read when ``eval_steps`` is given.",
    ),
    _bool(
        "eval_on_start",
        False,
        PLAN,
        doc=(
            "HF Trainer's ``eval_on_start``: one more evaluation before the first step "
            "(axolotl turns it on whenever it evaluates)."
        ),
    ),
    _int(
        "eval_batch_size",
        8,
        MAX_MICRO_BATCH,
        PLAN,
        doc=(
            "HF Trainer's ``per_device_eval_batch_size`` (default 8): samples per GPU in each "
            "evaluation micro-step."
        ),
    ),
    _number(
        "save_steps",
        None,
        0.0,
        1e9,
        False,
        optional=True,
        doc=(
            'HF Trainer\'s ``save_steps`` (its default ``save_strategy="steps"``, 500): a '
            "checkpoint after every multiple of it and one at the end; below 1, a share of the "
            "run's steps. Each save writes what the memory model holds (calc.run_phases."
            "checkpoint_bytes) at ``checkpoint_write_gb_per_s``; on interruptible capacity "
            "the saves are the checkpoints, in place of ``checkpoint_interval_minutes`` and "
            "``checkpoint_minutes``. Empty: no saves counted (interruptible capacity keeps its "
            "interval and minutes)."
        ),
    ),
    _bool(
        "save_only_model",
        False,
        PLAN,
        doc="HF Trainer's ``save_only_model``: the saves leave the optimizer's states out.",
    ),
    _int(
        "save_total_limit",
        None,  # type: ignore[arg-type]
        1_000_000,
        PLAN,
        optional=True,
        doc=(
            "HF Trainer's ``save_total_limit``: the checkpoints kept on disk (older ones "
            "deleted). Empty: every save stays, the Trainer's default. With ``save_steps`` "
            "the default storage counts the checkpoints kept at their counted size."
        ),
    ),
    _number(
        "checkpoint_write_gb_per_s",
        CHECKPOINT_WRITE_GB_PER_S,
        0.0,
        10_000.0,
        False,
        doc=(
            "GB/s one server writes a checkpoint at: default about a provisioned cloud block "
            "volume's most (AWS EBS gp3 up to 1,000 MiB/s; 125 MiB/s unless provisioned), an "
            "assumption to replace with one's own disk."
        ),
    ),
    _number(
        "startup_minutes",
        10,
        0.0,
        10_000.0,
        True,
        doc=(
            "Environment set-up and model download, billed per start: 10 stands for the seed's "
            '"several minutes per start".'
        ),
    ),
    _int("starts", 1, MAX_STARTS, PLAN),
    _number("storage_gb", None, 0.0, 1e9, True, optional=True),
    _number("storage_price_per_gb_month", None, 0.0, 10_000.0, True, optional=True),
    _number("months_kept", 1, 0.0, 1200.0, True),
    _number(
        "experiment_multiplier",
        2.0,
        1.0,
        1000.0,
        True,
        doc=(
            "GPU time of trials and failed runs, as a multiple of the final run. 2.0 is the least "
            'that the seed\'s "trials and failed runs often cost more than the final run" implies.'
        ),
    ),
    _number(
        "safety_margin",
        0.0,
        0.0,
        1.0,
        True,
        percent=True,
        doc=(
            "0: the verdict already compares the calibrated range of the estimate "
            "(calc.calibration: the middle 80 % of the memory model's held-out error) against the "
            "card; a margin set by the user multiplies both ends of that range. Each ``fits`` "
            "entry of the plan carries ``verdict`` (``fits`` | ``borderline`` | "
            '``does_not_fit``), ``device_range_bytes`` and ``fits`` (``verdict == "fits"``).'
        ),
    ),
    _number("mfu", None, 0.0, 1.0, False, optional=True),
    _number("qlora_speed_factor", None, 0.0, 1.0, False, optional=True, methods=QLORA),
    _number("scaling_efficiency", None, 0.0, 1.0, False, optional=True),
    _bool("fp8_compute", False, PLAN),
)
"""Every request key, estimate's then plan's."""

BY_KEY: dict[str, FieldSpec] = {spec.key: spec for spec in FIELDS}
_BEHAVIOUR_KEYS = frozenset(spec.key for spec in FIELDS if spec.group == BEHAVIOUR)


_SPECS: dict[str, tuple[FieldSpec, ...]] = {
    "estimate": tuple(spec for spec in FIELDS if spec.group != PLAN),
    "plan": FIELDS,
}


def field_specs(command: str) -> list[FieldSpec]:
    """The keys of a ``command``'s request (``"estimate"``: reader and behaviour keys;
    ``"plan"``: those and the plan's own), in :data:`FIELDS` order (a new list: the caller's to
    change; the selection is made once, a plan asks for it thousands of times)."""
    specs = _SPECS.get(command)
    if specs is None:
        raise ValueError(command)
    return list(specs)


def spec_by_key(command: str) -> dict[str, FieldSpec]:
    return {spec.key: spec for spec in field_specs(command)}


def keys(group: str) -> tuple[str, ...]:
    """The keys of one :data:`GROUPS` entry, in :data:`FIELDS` order."""
    return tuple(spec.key for spec in FIELDS if spec.group == group)


BEHAVIOUR_OBJECT = "behaviour"
"""The request key that holds the library behaviours:
``{"model": ..., "framework": "hf-trainer", "behaviour": {"qlora_keeps_inputs": true}}``."""


def _same(a: object, b: object) -> bool:
    return type(a) is type(b) and a == b


def migrate_request(data: object) -> object:
    """A request in its current shape: every library behaviour (group ``behaviour``) under
    :data:`BEHAVIOUR_OBJECT`, the reader's and the plan's keys on top.

    The one rule for older requests and older shared links, which give behaviours as top-level
    keys (as the CLI's flags, the config importers and the calculator's URL still name them):
    such a key moves into the object. A key given both ways with two different values is
    refused (``key_given_twice``): calc does not guess which one was meant. Anything else is
    returned unchanged, for the parser to judge (not an object, ``behaviour`` not an object)."""
    if not isinstance(data, dict):
        return data
    moved = {key: value for key, value in data.items() if key in _BEHAVIOUR_KEYS}
    if not moved:
        return data
    nested = data.get(BEHAVIOUR_OBJECT, {})
    if not isinstance(nested, dict):
        return data
    for key, value in moved.items():
        if key in nested and not _same(nested[key], value):
            raise InputError("key_given_twice", key, value, extra={"behaviour": nested[key]})
    out = {
        key: value for key, value in data.items() if key not in moved and key != BEHAVIOUR_OBJECT
    }
    out[BEHAVIOUR_OBJECT] = {**nested, **moved}
    return out


def given_fields(data: object, fields: dict[str, FieldSpec]) -> JsonObject:
    """The keys a request gives, behaviours taken out of their object, checked against
    ``fields`` (unknown keys, a missing model; values are checked later, one by one):
    ``{key: value}``, in the request's order."""
    data = migrate_request(data)
    if not isinstance(data, dict):
        raise InputError("request_not_object", None, type(data).__name__)
    given: JsonObject = {}
    for key, value in data.items():
        if key == BEHAVIOUR_OBJECT:
            if not isinstance(value, dict):
                raise InputError("wrong_type", BEHAVIOUR_OBJECT, value)
            for inner, inner_value in value.items():
                if inner not in _BEHAVIOUR_KEYS or inner not in fields:
                    raise InputError("unknown_key", f"{BEHAVIOUR_OBJECT}.{inner}", None)
                given[inner] = inner_value
        elif key not in fields:
            raise InputError("unknown_key", str(key), None)
        else:
            given[key] = value
    if "model" in fields and "model" not in given:
        raise InputError("missing_field", "model", None)
    return given


def with_changes(request: JsonObject, changes: JsonObject) -> JsonObject:
    """``request`` with ``changes`` winning over what it says, key by key, behaviours included,
    whichever shape each is in (a request file, then a config import, then flags)."""
    before, after = migrate_request(request), migrate_request(changes)
    assert isinstance(before, dict) and isinstance(after, dict), (request, changes)
    out = {**before, **after}
    inner, outer = before.get(BEHAVIOUR_OBJECT), after.get(BEHAVIOUR_OBJECT)
    if isinstance(inner, dict) and isinstance(outer, dict):
        out[BEHAVIOUR_OBJECT] = {**inner, **outer}
    return out


def defaults(command: str) -> JsonObject:
    """``{key: default}`` of a command's request (``None`` where calc picks or the key is required)."""
    return {spec.key: spec.default for spec in field_specs(command)}


__all__ = [
    "AdapterDtype",
    "Attention",
    "AttentionMask",
    "Fp8Library",
    "BEHAVIOUR",
    "Batching",
    "BEHAVIOUR_OBJECT",
    "CheckpointingGranularity",
    "BY_KEY",
    "CpuOffload",
    "FIELDS",
    "FieldSpec",
    "GROUPS",
    "KINDS",
    "Method",
    "ModulesToSave",
    "LoadWarmup",
    "MoeExpertLayout",
    "Optimizer",
    "PLAN",
    "Precision",
    "READER",
    "Sharding",
    "ShardingEngine",
    "check_bool",
    "check_enum",
    "check_fraction",
    "check_int",
    "check_number",
    "defaults",
    "field_specs",
    "given_fields",
    "keys",
    "migrate_request",
    "spec_by_key",
    "with_changes",
]
