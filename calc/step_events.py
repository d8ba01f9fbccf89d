"""The allocation sequence of training steps, built from ``calc.memory``'s own counts.

:func:`step_events` turns one request and a list of micro-batch lengths (the padded sequence
length of each micro-batch; one entry per micro-batch, ``gradient_accumulation_steps`` of
them per optimizer step) into the alloc/free events :mod:`calc.allocator` replays:

1. before the first step: the weights (per block, split like its linears; embedding and
   output layer apart) and the adapters; the persistent communication buffers;
2. per micro-batch, the forward: per block, its saved activations (:func:`_saved_tensors`:
   intermediate-width tensors, then hidden-width ones, then the rest); with checkpointing
   the block's input kept and the block's own tensors alive only while it runs; then the
   logits and loss tensors (``Activations.logits``);
3. the backward, last block first: the tensors not kept past the loss freed; per block the
   recomputed block (checkpointing), the gradients in flight (``Activations.workspace``: two
   hidden- and two intermediate-width tensors), the block's parameter gradients (on the
   first micro-batch of a step), then its saved tensors freed;
4. the optimizer step: its states on the first step (``torch.optim.AdamW`` creates them
   lazily in its first ``step``), its temporaries, then the gradients freed
   (``zero_grad(set_to_none=True)``), or kept for the next steps where the loop zeroes them
   in place (``zero_grad_set_to_none`` False).

The amounts are ``calc.memory``'s: ``model_states`` for weights, gradients, optimizer states
and temporaries, ``activation_bytes`` for activations and logits, the peak phase's
``weight_copies``, ``gathered_weights``, ``dequant_buffer`` and ``comm_buffers`` as
single tensors alive through forward and backward. Only the split into tensors is this
module's: it follows the shapes the model's layers give (hidden and intermediate widths,
adapter ``r x d`` factors) but not every tensor of the real trace.
"""

from __future__ import annotations

import bisect
import gc
import itertools
from contextlib import contextmanager

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any, Iterator, Sequence

from . import activations as act
from . import memory as mem
from . import states as st
from . import allocator as al
from . import load_warmup
from .allocator import SMALL_SIZE_BYTES, Event
from .checkpointing import block_wrapped
from .jsontypes import JsonObject
from .lengths import as_rows, micro_batch_tokens
from .request import EstimateRequest, Method, Sharding, local_length
from .states import FP32_BYTES

SAVED_TENSORS_PER_BLOCK = 16
"""At most this many saved tensors per block in the synthetic sequence (a Llama block saves
about 14 under SDPA: norms' inputs and statistics, q/k/v, attention output and its
statistics, the MLP's three intermediates, the residuals)."""

MLP_INTERMEDIATES = 3
"""Intermediate-width tensors a gated MLP saves: gate and up projections' outputs and the
activation's output (the down projection's input)."""


def _split(total: int, shares: Sequence[int]) -> list[int]:
    """``total`` bytes split in proportion to ``shares`` (integers; the last takes the rest)."""
    weight = sum(shares)
    if total <= 0 or weight <= 0:
        return []
    out = [total * s // weight for s in shares[:-1]]
    out.append(total - sum(out))
    return [x for x in out if x > 0]


def _pack(sizes: Sequence[int]) -> list[int]:
    """Tensors allocated together and freed together, with runs of small ones (at most
    1 MiB, the small pool's) merged into lumps of at most 1 MiB: the small pool packs them
    into the same 2 MiB segments either way, and the replay has fewer events to run."""
    out: list[int] = []
    lump = 0
    for n in sizes:
        if n <= SMALL_SIZE_BYTES:
            if lump + n > SMALL_SIZE_BYTES:
                out.append(lump)
                lump = 0
            lump += n
        else:
            out.append(n)
    if lump:
        out.append(lump)
    return out


def _saved_tensors(
    total: int, tokens: int, req: EstimateRequest, act_bytes: int, mask_copy: int = 0
) -> list[int]:
    """One block's saved bytes as tensors: ATen's copy of a boolean mask where every block's
    SDPA gets one (``mask_copy``, :func:`calc.activations.mask_copy_bytes`: ``b x 1 x s x s``,
    a tensor of its own), up to :data:`MLP_INTERMEDIATES` of ``tokens x intermediate`` (at
    ``act_bytes``), one fp32 ``tokens x hidden`` per RMSNorm (its upcast input,
    :func:`calc.activations.norm_bytes`), hidden-width ones at ``act_bytes`` while they fit, the
    rest as one."""
    arch = req.model
    wide = tokens * arch.intermediate_size * act_bytes
    upcast = tokens * arch.hidden_size * FP32_BYTES if arch.norm_kind == "rms" else 0
    narrow = tokens * arch.hidden_size * act_bytes
    out: list[int] = [mask_copy] if 0 < mask_copy <= total else []
    left = total - sum(out)
    for unit, most in (
        (wide, MLP_INTERMEDIATES),
        (upcast, arch.norms_per_layer),
        (narrow, SAVED_TENSORS_PER_BLOCK),
    ):
        taken = 0
        while unit and left >= unit and taken < most and len(out) < SAVED_TENSORS_PER_BLOCK - 1:
            out.append(unit)
            left -= unit
            taken += 1
    if left > 0:
        out.append(left)
    return out


def _norm_transients(tokens: int, req: EstimateRequest) -> list[int]:
    """Tensors an RMSNorm's forward makes and frees at once: ``hidden.pow(2)`` and ``hidden *
    torch.rsqrt(variance + eps)``, fp32 ``tokens x hidden`` each (transformers 5.17
    ``LlamaRMSNorm.forward``); none for LayerNorm (one fused kernel)."""
    if req.model.norm_kind != "rms":
        return []
    return [tokens * req.model.hidden_size * FP32_BYTES] * 2


def _trainable_shares(req: EstimateRequest) -> tuple[list[int], int]:
    """Parameter counts of one block's trainable tensors, and of the rest (embedding, output
    layer, modules_to_save copies) as one share."""
    arch = req.model
    layout = st.param_layout(req)
    if req.method is Method.FULL:
        block = [l.count * l.weight_params for l in arch.block_linears]
        block.append(max(1, arch.block_params - sum(block)))
    else:
        block = []
        for a in st.adapted(req):
            if a.blocks == arch.num_layers or a.blocks == 0:
                per = a.params(req.lora_rank)
                block += [per * a.d_in // (a.d_in + a.d_out), per * a.d_out // (a.d_in + a.d_out)]
        block = [b for b in block if b > 0] or [1]
    rest = max(0, layout.trainable - arch.num_layers * sum(block))
    return block, rest


def _layered(
    total: int, block: list[int], rest: int, layers: int
) -> tuple[list[list[int]], list[int]]:
    """``total`` split over ``layers`` copies of ``block`` and one ``rest`` share: per-block
    tensor lists and the rest's tensors."""
    shares = block * layers + ([rest] if rest else [])
    parts = _split(total, shares)
    if len(parts) < len(shares):  # tiny totals: keep what there is as one tensor
        return [], parts
    n = len(block)
    return [parts[i * n : (i + 1) * n] for i in range(layers)], parts[layers * n :]


def _weight_shares(req: EstimateRequest, reg: st.Regime) -> tuple[list[int], list[int]]:
    """Bytes of one block's weight tensors (each linear, then the rest of the block: norms,
    biases) and of the embedding and the output layer (one table when tied): the shares
    :func:`_layered` splits the weights by. A QLoRA linear in NF4
    (:func:`calc.states.quantized_bytes`), every other parameter at the regime's weight bytes,
    the tables TRL casts back to bf16 at 2 (:func:`calc.states.recast_params`). In bytes, not
    parameters: a 4-bit linear holds a quarter of a 16-bit table's bytes per parameter, and
    the replay places each tensor at its size."""
    arch = req.model
    quantized = req.method is Method.QLORA
    block = [
        st.quantized_bytes(l.count * l.weight_params, req.qlora_double_quant)
        if quantized and l.quantizable
        else l.count * l.weight_params * reg.weight_bytes
        for l in arch.block_linears
    ]
    linear_params = sum(l.count * l.weight_params for l in arch.block_linears)
    block.append(max(1, (arch.block_params - linear_params) * reg.weight_bytes))
    tables = [arch.embedding_params, arch.lm_head_params]
    table_bytes = st.BF16_BYTES if st.recast_params(req, reg) else reg.weight_bytes
    return block, [n * table_bytes for n in tables if n]


def _kbit_table_casts(
    req: EstimateRequest, reg: st.Regime
) -> tuple[list[int], list[int], bool] | None:
    """The embedding's and output layer's bytes as the loader left them, after
    ``prepare_model_for_kbit_training`` (fp32), and whether TRL then casts them back to bf16
    (:func:`calc.states.embeddings_recast`), for QLoRA whose loop runs the preparation
    (``qlora_prepare_kbit``) on one GPU or with DDP (TRL skips both under FSDP or ZeRO-3
    QLoRA); ``None`` otherwise, the tables then allocated as they end up. peft 0.17
    ``utils/other.py``: every fp16 / bf16 parameter that is not ``Params4bit`` becomes fp32;
    the loader's 16 bits where the stack loads the model in 16 bits (``weights_loaded_16bit``),
    else the tables are fp32 already. The norms do the same at a few KB: left out."""
    if (
        req.method is not Method.QLORA
        or not req.qlora_prepare_kbit
        or req.sharding not in (Sharding.NONE, Sharding.DDP)
    ):
        return None
    arch = req.model
    tables = [n for n in (arch.embedding_params, arch.lm_head_params) if n]
    load = st.BF16_BYTES if req.weights_loaded_16bit else FP32_BYTES
    return (
        [n * load for n in tables],
        [n * FP32_BYTES for n in tables],
        st.embeddings_recast(req, reg),
    )


def rows_per_micro_batch(req: EstimateRequest) -> int:
    """Rows of one micro-batch: ``micro_batch_size``, or one with ``padding-free`` batching (the
    samples end to end, :func:`calc.lengths.as_rows`)."""
    return as_rows(req).micro_batch_size


def lengths_of(req: EstimateRequest, micro_batch_tokens: Sequence[int]) -> list[int]:
    """Padded length of each micro-batch's rows from its token count (``micro_batch_size``
    rows, each padded to the batch's longest sample, or one row of them all with
    ``padding-free`` batching): ``ceil(tokens / rows)``."""
    size = rows_per_micro_batch(req)
    if size == 1:
        return list(map(int, micro_batch_tokens))
    return [-(-int(t) // size) for t in micro_batch_tokens]


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused while a replay runs, as it was after. The
    replays make and drop many blocks that link to each other (a segment's neighbours, copied
    for each paused run): paused, the collector does not traverse them again and again while
    the walk runs (a tenth of the estimate's time in CPython, more in its slowest runs); they
    are collected afterwards as usual."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


@dataclass(frozen=True)
class AllocatorEstimate:
    """The replayed step sequence, in bytes: peaks with an unlimited device (the cache as on
    a large card), the allocator capacity from which it runs on every larger one too
    (:meth:`StepReplay.capacity_threshold`), and the memory outside the allocator added to
    that for the device. ``min_allocator_exact``: whether that capacity is the exact threshold
    (False: a proven upper bound, where the walk's budget of continuations,
    :data:`calc.allocator.THRESHOLD_REPLAYS`, ran out first, or ``max_split_size_mb`` is
    set: every capacity from it runs the steps, and so may a few below it)."""

    simulated_allocated_bytes: int
    simulated_reserved_bytes: int
    min_allocator_bytes: int
    cuda_context_bytes: int
    comm_buffer_bytes: int
    driver_reserve_bytes: int
    min_device_bytes: int
    min_allocator_exact: bool = True

    def to_dict(self) -> JsonObject:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


EXPANDABLE_CONFIG = al.AllocatorConfig(expandable_segments=True)
"""``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`` (the request key ``expandable_segments``)."""


def allocator_config(req: EstimateRequest) -> al.AllocatorConfig:
    """The allocator settings the request's loop runs with: PyTorch's defaults, or
    ``expandable_segments`` where the request (or its stack's profile) sets it."""
    if req.expandable_segments:
        return EXPANDABLE_CONFIG
    return al.DEFAULT_CONFIG


def simulate(
    req: EstimateRequest,
    micro_batch_tokens: Sequence[int] | None = None,
    config: al.AllocatorConfig | None = None,
    driver_reserve_bytes: int = 0,
) -> AllocatorEstimate:
    """Replay the steps of ``micro_batch_tokens`` (tokens per micro-batch; default one
    optimizer step at ``micro_batch_size x seq_len``) through :mod:`calc.allocator`
    (:class:`StepReplay`: the same peaks and capacity as :func:`calc.allocator.replay` and
    :func:`calc.allocator.min_device_bytes` of :func:`step_events`, without replaying the steps
    that cannot change the cache).

    The peaks replay the load's warmup block as a card larger than its count sizes it
    (:func:`calc.load_warmup.block_bytes`); the capacity walk replays the load without it
    (see :mod:`calc.load_warmup`). With expandable segments one replay with the block gives
    both: the smallest card is the peak of the pages held blocks touch from the block's release
    on (``reset_footprint``; the same figure as a replay without the block on 20 Unsloth QLoRA
    requests, ``tests/calc/test_load_warmup.py``).

    Outside the allocator: :data:`calc.memory.CUDA_CONTEXT_BYTES` (context and kernel images,
    cited there), :data:`calc.memory.NCCL_BUFFER_BYTES` on several GPUs (cited there), and
    ``driver_reserve_bytes``: memory the driver keeps on the card that nvidia-smi's
    ``memory.total`` still counts (an input: calc has no cited figure for it, so 0 unless the
    caller gives one).
    ``config``: the allocator's settings (default: :func:`allocator_config` of the request)."""
    lengths = (
        lengths_of(req, micro_batch_tokens)
        if micro_batch_tokens
        else [req.seq_len] * req.gradient_accumulation_steps
    )
    config = allocator_config(req) if config is None else config
    block = load_warmup.block_bytes(req, None)
    expandable = config.expandable_segments
    with collector_paused():
        # with expandable segments no walk runs: the smallest card is the footprint's peak,
        # which the block's replay restarts after the block (reset_footprint), so one replay
        # gives both figures
        steps = StepReplay(req, lengths, config, block if expandable else 0)
        run = steps.replay()
        capacity, exact = steps.capacity_threshold(run)
        if block and not expandable:
            # the peaks as on a large card, whose load warms the cache with the uncapped block
            run = StepReplay(req, lengths, config, block).replay()
    return AllocatorEstimate(
        run.peak_allocated_bytes,
        run.peak_reserved_bytes,
        capacity,
        mem.CUDA_CONTEXT_BYTES,
        mem.comm_buffer_bytes(req.num_gpus),
        driver_reserve_bytes,
        capacity + mem.outside_allocator_bytes(req.num_gpus) + driver_reserve_bytes,
        exact,
    )


def reserved_after_step(req: EstimateRequest, micro_batch_tokens: Sequence[int]) -> int:
    """The reserved memory after an optimizer step of micro-batches of ``micro_batch_tokens``
    (tokens each) in a loop that calls ``torch.cuda.empty_cache()`` after every step (the
    gradients still held; the next step's ``zero_grad`` frees them). The release returns every
    segment nothing holds, so each step starts from the same cache whatever the steps before
    it and maps what it needs itself: no step inherits another's fragmentation. Replayed: the
    weights, a step of the same lengths (it creates the optimizer states), the release, then
    the step, whose peak reserved is the reserved memory at its end (nothing is released
    within it on a card large enough)."""
    lengths = tuple(lengths_of(req, micro_batch_tokens))
    builder = _Builder(req)
    # the load's block as on a large card: the weights hold its segment, so no release frees it
    events = builder.resident(load_warmup.block_bytes(req, None))
    events += builder.step(lengths, empty_cache=True)
    events.append(("mark",))
    events += builder.step(lengths)
    return al.replay(events, al.UNLIMITED, allocator_config(req)).peak_reserved_bytes


STEADY_STEPS = 1
"""Optimizer steps at the longest micro-batches replayed after the data's growing steps
(:func:`simulated_lengths`): the first step creates the optimizer states in the cache its
forward left, the next one shows the cache in its steady state."""


def simulated_lengths(req: EstimateRequest) -> list[int]:
    """The micro-batch lengths :func:`simulate_request` replays: the optimizer steps of the
    data's step sequence (:func:`calc.lengths.micro_batch_tokens`, in drawn order) whose
    longest micro-batch is longer than every one before it, then :data:`STEADY_STEPS` more
    steps like the last of them. Those are the steps at which a cache grown on shorter
    micro-batches lacks a block large enough and opens segments; the steps between them run
    on cached blocks (see :class:`StepReplay`). Without ``length_stats`` every micro-batch
    is ``seq_len`` long: one step, then one more."""
    lengths = lengths_of(req, micro_batch_tokens(req))
    kept: list[tuple[int, ...]] = []
    longest = 0
    if req.gradient_accumulation_steps <= 1:  # one micro-batch per step: no groups to build
        for length in lengths:
            if length > longest:
                longest = length
                kept.append((length,))
    else:
        for group in optimizer_steps(req, lengths):
            top = max(group)
            if top > longest:
                longest = top
                kept.append(group)
    kept += [kept[-1]] * STEADY_STEPS
    return [length for group in kept for length in group]


def simulate_request(req: EstimateRequest) -> AllocatorEstimate:
    """:func:`simulate` of the request's :func:`simulated_lengths`, kept for repeated requests
    (a recompute, the CLI's sweep) and for requests that differ only in how long the run is
    but draw the same steps (:func:`_simulated`)."""
    return _simulated(req.without_run_length(), tuple(simulated_lengths(req)))


def simulate_lengths(req: EstimateRequest, lengths: Sequence[int]) -> AllocatorEstimate:
    """:func:`simulate` of micro-batches of ``lengths`` (padded tokens per sample each), never
    kept (a refit that changes a constant the replay reads needs a fresh one)."""
    return simulate(req, [rows_per_micro_batch(req) * n for n in lengths])


@lru_cache(maxsize=64)
def _simulated(req: EstimateRequest, lengths: tuple[int, ...]) -> AllocatorEstimate:
    """:func:`simulate_lengths`, kept. The run's length (``max_steps``, ``samples_seen``)
    reaches the replay only through ``lengths`` (how many samples are drawn, and the longest of
    them), so the key leaves it out: a calculator whose reader changes the epochs or the
    dataset size, with a longest sample already at the cap, replays nothing again."""
    return simulate_lengths(req, lengths)


def forget_simulations() -> None:
    """Forget the simulations :func:`simulate_request` kept (a benchmark's cold start)."""
    _simulated.cache_clear()


class MinDevice:
    """The ``min_device_bytes`` of one request (:func:`simulate_request`'s, to the byte),
    found only as far as a question about it needs: a verdict asks whether it is at most
    some number of bytes, and certain bounds answer most such questions without the
    capacity walk (:meth:`StepReplay.capacity_threshold`), the costliest part of a
    simulation. Certain of the figure calc publishes: the walk's answer, which is the
    smallest capacity from which every larger one runs or, when its budget of
    continuations (:data:`calc.allocator.THRESHOLD_REPLAYS`) runs out first, the proven
    bound it reached.

    - **Upper bound**: the largest need (reserved plus the new segment) of a device
      allocation of the unlimited replay, in whole 2 MiB steps: the walk starts there and
      only ever goes down (:func:`calc.allocator.capacity_threshold`).
    - **Lower bound**: the walk goes down band by band, a band being the capacities between
      two successive new maxima of those needs, and spends at least one continuation on each
      band it clears (besides the first, from the unlimited replay); so with a budget of
      ``B`` it never ends below the ``B``-th largest of those maxima. With fewer maxima than
      that: the largest total of live requests (each rounded as
      :func:`calc.allocator.round_size` rounds it) over the steps the unlimited replay ran,
      below which no capacity holds those tensors at once (the steps it skips are each
      covered by one it ran with every micro-batch at least as long, whose tensors are each
      at least as large: :class:`StepReplay`).
    - **A probe** (:meth:`at_most`): one replay at the capacity asked about
      (:meth:`StepReplay.fits`). One that runs out of memory proves the answer above it
      (the walk never ends at or below a capacity that fails); one that runs proves
      nothing (running is not monotone in the capacity), and the walk decides.

    Each bound adds the memory outside the allocator (CUDA context, NCCL buffers on several
    GPUs), as :func:`simulate` does. The allocator's settings are the request's
    (:func:`allocator_config`, as :func:`simulate_request` replays them); with expandable
    segments the unlimited replay gives the answer itself (no walk). An inconsistency of the
    replay raises ``AssertionError``, as :func:`simulate` does."""

    def __init__(self, req: EstimateRequest) -> None:
        self.req = req
        self.method = req.method.value
        self.outside = mem.outside_allocator_bytes(req.num_gpus)
        self._caps: _Capacities | None = None

    @property
    def walked(self) -> bool:
        """Whether an answer needed the capacity walk (the figure itself is then known)."""
        return self._capacities().walked

    def _capacities(self) -> _Capacities:
        if self._caps is None:
            self._caps = _capacities(self.req)
        return self._caps

    def bounds(self) -> tuple[int, int]:
        """``(low, high)`` device bytes between which ``min_device_bytes`` certainly lies (both
        equal once it is known); the unlimited replay runs on the first call."""
        caps = self._capacities()
        if caps.exact is not None:
            return caps.exact + self.outside, caps.exact + self.outside
        return caps.low + self.outside, caps.high + self.outside

    def at_most(self, nbytes: int) -> bool:
        """Whether ``min_device_bytes <= nbytes``, exactly: from the bounds where they decide,
        else from one capacity probe that runs out of memory, else from the walk."""
        cap = (nbytes - self.outside) // al.ROUND_LARGE_BYTES * al.ROUND_LARGE_BYTES
        return self._capacities().at_most(cap)

    def exact_bytes(self) -> int:
        """``min_device_bytes`` itself (the walk, unless a question already needed it)."""
        return self._capacities().exact_capacity() + self.outside


class _Capacities:
    """What :class:`MinDevice` knows of one event sequence's allocator capacity (the walk's
    answer, :meth:`StepReplay.min_capacity`), in whole 2 MiB steps: certain bounds, and the
    answer once a question needed it. Shared by the requests whose sequences are the same
    (:func:`_capacities`)."""

    def __init__(self, steps: StepReplay) -> None:
        with collector_paused():
            run = steps.replay()
        self.steps, self.run = steps, run
        self.exact: int | None = None
        self.walked = False
        self.probes = 0  # capacity replays run by at_most
        needs = steps._needs
        assert needs is not None
        if not al.threshold_applies(steps.config) or not needs:
            self.exact = al.unwalked_capacity(run, steps.config)
        self.high = al.whole_steps(needs[-1]) if needs else 0
        # the walk spends a continuation per band between distinct running maxima, so
        # with its budget it cannot go below the budget-th of them from the top; else no
        # capacity below the live requests' largest total runs
        tops = sorted(set(needs), reverse=True)
        if len(tops) >= al.THRESHOLD_REPLAYS:
            self.low = al.whole_steps(tops[al.THRESHOLD_REPLAYS - 1])
        else:
            self.low = al.whole_steps(steps.live_floor())
        self.low = min(self.low, self.high)

    def at_most(self, cap: int) -> bool:
        """Whether the walk's answer is at most ``cap`` (a multiple of 2 MiB)."""
        if self.exact is not None:
            return self.exact <= cap
        if cap >= self.high:
            return True
        if cap < self.low:
            return False
        with collector_paused():
            self.probes += 1
            if not self.steps.fits(cap):
                self.low = cap + al.ROUND_LARGE_BYTES  # a capacity that fails: the answer is above
                return False
        return self.exact_capacity() <= cap

    def exact_capacity(self) -> int:
        if self.exact is None:
            with collector_paused():
                self.exact = self.steps.min_capacity(self.run)
                self.walked = True
        return self.exact


_SHARED: dict[tuple[Any, ...], _Capacities] = {}
_SHARED_LIMIT = 64
"""How many fixed-shape event sequences :func:`_capacities` keeps (the oldest dropped)."""


def clear_shared() -> None:
    """Forget the sequences :func:`_capacities` shares (a benchmark's cold start)."""
    _SHARED.clear()


def _capacities(req: EstimateRequest) -> _Capacities:
    """The :class:`_Capacities` of the request's :func:`simulated_lengths`, shared between
    requests of one fixed shape whose events are the same (a plan's data-parallel setups
    differ in GPU count only: each GPU replays the same steps). The key is the events
    themselves: the weights, the first step and the steady one (every later step of a
    fixed shape is the steady one; with ``length_stats`` nothing is shared)."""
    steps = StepReplay(req, simulated_lengths(req))
    groups = steps.groups
    if len(set(groups)) > 1:
        return _Capacities(steps)
    key = (
        steps.config,
        tuple(groups),
        tuple(steps._resident),
        steps._first.key(),
        steps._events(1).key() if len(groups) > 1 else (),
    )
    found = _SHARED.get(key)
    if found is None:
        found = _SHARED[key] = _Capacities(steps)
        while len(_SHARED) > _SHARED_LIMIT:
            del _SHARED[next(iter(_SHARED))]
    return found


class StepReplay:
    """The events of :func:`step_events` replayed optimizer step by optimizer step, skipping
    the steps that cannot change the allocator.

    Why a step can be skipped: every tensor a step allocates after the first (activations,
    gradients, the optimizer's temporaries) is freed by its end, and a freed block merges
    with its free neighbours (``free_block``), so a step that neither allocates nor frees
    device memory (no ``cudaMalloc``, no ``cudaFree``, no page mapped or unmapped) leaves
    every segment split exactly as it found it: the state after it is the state before it,
    and replaying it again from that state repeats it. So a step is skipped when, since the
    last device allocation or release, a step of the same lengths ran without one: the same
    replay from the same state. The first step (it creates the optimizer states, kept for
    good) always runs. Within a step the same rule skips micro-batches (:meth:`_run_span`).

    A step of shorter lengths does not stand for a longer one, though its tensors are each
    smaller and in the same size classes (calc assumed so before 2026-12-07): a shorter
    tensor splits a cached block that the longer one filled exactly, and the rest of the
    block then changes the later best fits, or is counted whole where the longer one's was
    split off. On Llama 3.2 1B LoRA (micro-batches of 2, two per step, lengths of mean 500 /
    p90 1,000) that rule ended the capacity walk at 6.27 GB where the replay of every event
    ends at 7.10 GB; on its full fine-tuning (micro-batches of 8) the allocated peak came out
    3.9 MB short; one level down, on its QLoRA, a micro-batch of 892 tokens after one of
    1,024 took a 1,002 MiB block for its 873 MiB logits and later opened a segment the longer
    one had not (walk 4.72 GB against 5.55 GB). ``tests/calc/test_allocator.py`` holds all
    three to the full replay.

    The unlimited replay also skips a step whose lengths repeat the step just before it
    when the best fits that one made show, exactly, that run again from the state it left
    it makes no device allocation, reaches no new peak and leaves that state as it is
    (:func:`calc.allocator.repeats_from_cache`): the data's last growing step and the
    steady step after it (:data:`STEADY_STEPS`), though the growing step opened segments.

    A step's events are built once per distinct lengths (its keys are its own: every key
    it allocates it frees), so the capacity search's replays reuse them.

    ``load_block_bytes``: the block transformers allocates and frees before it loads the
    weights, sized for the card replayed (:func:`calc.load_warmup.block_bytes`), run first.
    The capacity walk runs without it (:func:`simulate`, :mod:`calc.load_warmup`)."""

    def __init__(
        self,
        req: EstimateRequest,
        seq_lens: Sequence[int],
        config: al.AllocatorConfig | None = None,
        load_block_bytes: int = 0,
    ) -> None:
        self.config = allocator_config(req) if config is None else config
        self.groups = optimizer_steps(req, list(seq_lens)) or [()]
        # a step repeated from the state it left is skipped only on these rules (see _advance)
        self._repeats_apply = (
            al.threshold_applies(self.config) and self.config.roundup_power2_divisions <= 1
        )
        self._builder = _Builder(req)
        self._resident = self._builder.resident(load_block_bytes)
        self._first = self._builder.step(self.groups[0])
        # the first step's events serve a later step of the same lengths only when they keep
        # nothing (no optimizer states to create)
        self._steps: dict[tuple[int, ...], StepEvents] = (
            {} if self._builder.states_made else {self.groups[0]: self._first}
        )
        # the keys held for good: the weights and what the first step keeps (the optimizer
        # states; a later step frees every key it allocates); the copies of a replay share
        # their blocks (CachingAllocator.copy)
        # (a contained micro-batch frees all it allocates: only the events outside them read)
        first = self._first.outside()
        freed = {ev[1] for ev in first if ev[0] == "free"}
        built_freed = {ev[1] for ev in self._resident if ev[0] == "free"}
        self._kept = frozenset(
            [ev[1] for ev in self._resident if ev[0] == "alloc" and ev[1] not in built_freed]
            + [ev[1] for ev in first if ev[0] == "alloc" and ev[1] not in freed]
        )
        # CachingAllocator.device_needs of the unlimited replay, as a running maximum
        self._needs: list[int] | None = None
        # a replay paused before a device allocation (its index), and the states after
        # the release there, for fits
        self._start: tuple[int, _Progress] | None = None
        self._released: dict[int, _Released] = {}
        # the unlimited replay copied before device allocations of its later steps (see
        # _advance), and the events it ran since the last copy (None: none yet)
        self._marks: list[tuple[int, _Progress]] = []
        self._since_mark: int | None = None
        # the step of the unlimited replay that the next one repeats without a device
        # allocation (see _advance), or None
        self._repeated: int | None = None
        self._req = req
        # copies kept by _pause, by the id of the state paused (kept with it)
        self._pause_copies: dict[int, tuple[_Progress, list[_Progress]]] = {}
        # the micro-batches that run from a cache without opening or releasing a segment, by
        # the cache's shape (see _quiet_runs)
        self._quiet: dict[tuple[Any, ...], dict[int, int]] = {}
        # the walk's continuations so far, by where they began (see _splice)
        self._seen: list[_Seen] = []

    def live_floor(self) -> int:
        """The largest total of live requests (rounded as the allocator rounds them) over the
        weights, the first step and every step built so far (each later step frees all it
        allocates, and starts from what the first one keeps)."""
        config = self.config
        peak, kept = al.live_profile(_profiled([self._resident, self._first], config), config)
        for group, events in self._steps.items():
            if group != self.groups[0] or events is not self._first:
                peak = max(peak, kept + al.live_profile(_profiled([events], config), config)[0])
        return peak

    def _events(self, index: int) -> StepEvents:
        if index == 0:
            return self._first
        group = self.groups[index]
        found = self._steps.get(group)
        if found is None:
            found = self._steps[group] = self._builder.step(group)
        return found

    def _run_span(self, run: _Progress, events: StepEvents, start: int, stop: int) -> int:
        """``run``'s allocator on ``events[start:stop]`` (:meth:`calc.allocator.CachingAllocator.run`:
        -1, or the index in that span where it ran out of memory or paused), skipping the
        micro-batches that cannot change the allocator.

        The rule of the step skipping (see :class:`StepReplay`), one level down: a micro-batch
        that frees every key it allocates and no other (all but the first of a step, which
        allocates the gradients: :func:`self_contained_micro_batches`) and that runs without a
        device allocation or release leaves every segment split as it found it. So one is
        skipped when a micro-batch of its length already ran that way from a cache of the same
        shape (:meth:`_quiet_runs`): the same replay from the same state, whose allocated peak
        is kept with it. Packed or fully padded data (every micro-batch at one length) then
        replays a step of ``gradient_accumulation_steps`` micro-batches as one or two, and the
        capacity walk's replays skip what the unlimited one ran from the same cache. Where
        the best fits are being recorded (:func:`calc.allocator.repeats_from_cache`) a skipped
        micro-batch is noted (:data:`calc.allocator.SKIPPED`)."""
        a, live = run.a, run.live
        own = events.contained
        if len(own) < 2:  # nothing to skip: at most one such micro-batch in the step
            return a.run(events.span(start, stop), live)
        pos = start
        index = run.index
        for s, e, length in own:
            if s < pos:
                continue  # begun already (a run resumed inside it) or behind
            if e > stop:
                break
            if pos < s:
                stop_at = a.run(events.span(pos, s), live)
                if stop_at >= 0:
                    return pos - start + stop_at
                pos = s
            version = a.num_device_alloc + a.num_device_free
            if run.chain_at != (index, s) or run.chain_version != version:
                # the cache as this micro-batch finds it, unchanged while micro-batches run
                # without a device allocation or release: looked up once for such a run
                run.chain = self._quiet_runs(run)
            peak = run.chain.get(length)
            if peak is not None:
                if peak > a.peak_allocated:
                    a.peak_allocated = peak
                if a.choices is not None:
                    a.choices.append(al.SKIPPED)
                run.chain_at, run.chain_version = (index, e), version
                pos = e
                continue
            before, a.peak_allocated = a.peak_allocated, a.allocated  # its own peak, measured
            stop_at = a.run(events.span(s, e), live)
            reached = a.peak_allocated
            a.peak_allocated = max(before, reached)
            if stop_at >= 0:
                return s - start + stop_at
            pos = e
            if a.num_device_alloc + a.num_device_free == version:
                run.chain[length] = reached
                run.chain_at, run.chain_version = (index, e), version
        if pos < stop:
            stop_at = a.run(events.span(pos, stop), live)
            if stop_at >= 0:
                return pos - start + stop_at
        return -1

    def _quiet_runs(self, run: _Progress) -> dict[int, int]:
        """The micro-batch lengths known to run from ``run``'s cache as it stands without a
        device allocation or release, each with the allocated peak it reaches (a dict that
        :meth:`_run_span` extends). Without expandable segments they are kept by the cache's
        shape (:meth:`calc.allocator.CachingAllocator.shape`, the blocks held standing only
        as neighbours: a contained micro-batch frees none of them), for every replay of this
        sequence: the same shape makes the same decisions on the same events, whichever
        replay, step or capacity it comes from (a capacity matters only at a device
        allocation). With expandable segments, whose pages a shape does not describe, only
        for this replay where it stands."""
        if self.config.expandable_segments:
            return {}
        key = run.a.shape(run.live, frozenset(run.live))
        found = self._quiet.get(key)
        if found is None:
            found = self._quiet[key] = {}
        return found

    def replay(self, capacity_bytes: int | None = al.UNLIMITED) -> al.Replay:
        """The replay on ``capacity_bytes`` usable device memory (``None``: unlimited), as
        :func:`calc.allocator.replay` of the whole sequence gives it; ``failed_at`` is the
        index of the optimizer step that ran out of memory (-1: it fits; the weights
        count as step 0). Unlimited, it also keeps what each device allocation needed and
        copies of itself before device allocations of its later steps
        (:meth:`capacity_threshold` starts from them)."""
        run = _Progress(al.CachingAllocator(capacity_bytes, self.config), self._kept)
        if capacity_bytes is not None:
            return run.a.result(self._advance(run))
        needs: list[int] = []
        run.a.device_needs = needs
        self._marks = []
        self._since_mark = None
        self._repeated = None
        marks = None if self.config.expandable_segments else self._marks
        result = run.a.result(self._advance(run, marks))
        # the largest need so far, at each device allocation: sorted, so the first
        # allocation that needs more than a capacity is a bisection away
        self._needs = list(itertools.accumulate(needs, max))
        self._start = None
        self._released = {}
        return result

    def _advance(
        self,
        run: _Progress,
        marks: list[tuple[int, _Progress]] | None = None,
        until: tuple[int, int] | None = None,
    ) -> int:
        """Run ``run`` on from where it stands to the end: -1 when it fits, else the index
        of the step that ran out of memory (see :meth:`replay`), or :data:`_PAUSED` when
        the allocator paused (``pause_before``; ``run`` then stands before that event).
        ``marks``: copies of ``run`` standing before device allocations of the steps it runs
        after the first, with the device allocations made before each (:meth:`_run_marking`).
        ``until``: a place (step, offset in it; the offset not 0) not behind ``run``: there
        the run stops and returns :data:`_AT` (unless it skips that step or stops before)."""
        a, live = run.a, run.live
        if run.index < 0:
            resident = self._resident
            stop = a.run(resident[run.offset :] if run.offset else resident, live)
            if stop >= 0:
                run.offset += stop
                return _PAUSED if a.paused else 0
            run.index, run.offset = 0, 0
        groups = self.groups
        while run.index < len(groups):
            index = run.index
            group = groups[index]
            if not run.offset:
                version = a.num_device_alloc + a.num_device_free
                if index:
                    if version != run.since:
                        run.witnesses, run.since = [], version
                    elif group in run.witnesses:  # the same lengths: the same replay
                        run.index += 1
                        continue
                run.version = version
                if marks is not None and index > 1 and self._repeated == index - 1:
                    # the same events as the step before (a later step of the same lengths),
                    # which showed that run again from the state it left they make no device
                    # allocation and change nothing (calc.allocator.repeats_from_cache): as
                    # if run, keeping no copy
                    if self._since_mark is not None:
                        self._since_mark += len(self._events(index))
                    self._repeated = None
                    run.witnesses = [w for w in run.witnesses if w != group]
                    run.witnesses.append(group)
                    run.index += 1
                    continue
            events = self._events(index)
            if until is not None and until[0] == index:
                stop = self._run_span(run, events, run.offset, until[1])
                if stop >= 0:
                    run.offset += stop
                    return _PAUSED if a.paused else index
                run.offset = until[1]
                return _AT
            if marks is not None and index:
                # a later step whose events the next one repeats: its choices kept, to see
                # whether that one needs running (the unlimited replay's rules, see
                # threshold_applies, and the whole step run here)
                record = (
                    not run.offset
                    and self._repeats_apply
                    and index + 1 < len(groups)
                    and groups[index + 1] == group  # the same list of events (_events)
                    and events is not self._first  # a later step's own: it keeps nothing
                )
                a.choices = [] if record else None
                self._run_marking(run, events, marks)
                if record:
                    assert a.choices is not None
                    self._repeated = index if al.repeats_from_cache(a.choices) else None
                a.choices = None
                stop = -1
            else:
                stop = self._run_span(run, events, run.offset, len(events))
            if stop >= 0:
                run.offset += stop
                return _PAUSED if a.paused else index
            run.offset = 0
            if index and a.num_device_alloc + a.num_device_free == run.version:
                run.witnesses = [w for w in run.witnesses if w != group]
                run.witnesses.append(group)
            run.index += 1
        return -1

    def _run_marking(
        self, run: _Progress, events: StepEvents, marks: list[tuple[int, _Progress]]
    ) -> None:
        """The rest of a step of the unlimited replay (:meth:`_advance`'s ``marks``), keeping a
        copy of ``run`` standing before a device allocation (paused there: ``pause_before``)
        with the count of those made before it: before the first of these steps' device
        allocations, then before any that comes :data:`MARK_SPACING` events or more after the
        last copy. The walk's pauses and :meth:`fits` start from the last copy before the
        allocation they stop at (:meth:`_pause`): so they replay at most the events since it,
        not those since the start of the step; a step without device allocations keeps none
        (no pause stops in it)."""
        a, end = run.a, len(events)
        while run.offset < end:
            at = run.offset
            if self._since_mark is not None and self._since_mark < MARK_SPACING:
                # no copy this close to the last: run on to where one may be kept again
                stop = min(end, at + MARK_SPACING - self._since_mark)
                if self._run_span(run, events, at, stop) >= 0:
                    raise AssertionError("the unlimited replay stopped")
                self._since_mark += stop - at
                run.offset = stop
                continue
            a.pause_before = a.num_device_alloc  # stop before the next device allocation
            stop = self._run_span(run, events, at, end)
            a.pause_before = -1
            if stop < 0:
                if self._since_mark is not None:
                    self._since_mark += end - at
                run.offset = end
                return
            if not a.paused:
                raise AssertionError("the unlimited replay stopped")
            a.paused = False
            run.offset = at + stop
            marks.append((a.num_device_alloc, run.copy()))
            self._since_mark = 0  # the allocation itself runs next, without a pause

    def min_capacity(self, unlimited: al.Replay | None = None) -> int:
        """The allocator capacity from which every larger one runs the sequence
        (:meth:`capacity_threshold`); ``unlimited``: :meth:`replay` with no limit, when the
        caller has it (it must be this object's: it keeps the needs and copies)."""
        return self.capacity_threshold(unlimited)[0]

    def capacity_threshold(
        self, unlimited: al.Replay | None = None, budget: int | None = None
    ) -> tuple[int, bool]:
        """:func:`calc.allocator.capacity_threshold` of this replay, and whether it is exact
        (else a proven upper bound). The walk starts from the unlimited replay (its needs,
        its copies at the start of its last steps) and runs each band's continuation with
        the step skipping of :meth:`_advance`; a continuation that comes to stand where an
        earlier one began, in the state it began from, takes the rest from it
        (:meth:`_splice`). Where a release does not leave one state for
        a band (:func:`calc.allocator.threshold_applies`), :func:`calc.allocator.unwalked_capacity`
        (exact with expandable segments, a bound with ``max_split_size_mb``). ``budget``: the
        continuations the walk may replay (default :data:`calc.allocator.THRESHOLD_REPLAYS`)."""
        free_run = unlimited or self.replay()
        if not al.threshold_applies(self.config):
            return al.unwalked_capacity(free_run, self.config), self.config.expandable_segments
        if self._needs is None:
            self.replay()
        root = _Progress(al.CachingAllocator(None, self.config), self._kept)
        self._pause_copies = {}
        self._seen = []
        try:
            return al.capacity_threshold(
                root,
                self._continuation,
                self._pause,
                self._release_at,
                al.THRESHOLD_REPLAYS if budget is None else budget,
            )
        finally:
            self._pause_copies = {}
            self._seen = []

    def _continuation(
        self, state: _Progress, hi: int, lo: int = 0
    ) -> tuple[list[int], int, _Progress | None]:
        """The needs of the device allocations ``state`` makes on from where it stands with no
        limit, and how many it made before; stopped at the first that needs ``hi`` or more
        (see :func:`calc.allocator.capacity_threshold`), the run then standing before it
        (else ``None``). On the way it keeps a copy of itself before the first device
        allocation (not its first) that needs more than ``lo``, for the pauses of ``state``
        (:meth:`_advance_from`)."""
        if state.index < 0 and not state.offset and not state.a.num_device_alloc:
            assert self._needs is not None  # the unlimited replay from the start
            return list(self._needs), 0, None
        here = (state.index, state.offset)
        ahead = [s for s in self._seen if s.at >= here]
        base = state.a.num_device_alloc
        needs: list[int] = []
        shape = None  # the state's, once needed
        while ahead and ahead[0].at == here:  # begun here before: compared without a copy
            seen = ahead.pop(0)
            if seen.cheap != _cheap_shape(state):
                continue
            shape = shape or state.shape()
            if seen.shape == shape:
                spliced = self._splice(seen, needs, hi)
                if spliced is not None:
                    return needs, base, spliced[0]
        run = state.copy()
        a = run.a
        a.capacity, a.device_needs = None, needs
        # first stopped above lo (if that lies below hi), then at hi
        a.need_limit = lo + 1 if lo + 1 < hi else hi
        code = None
        for seen in ahead:
            code = self._advance_from(run, state, hi, seen.at)
            if code != _AT:
                break
            if seen.cheap == _cheap_shape(run) and seen.shape == run.shape():
                spliced = self._splice(seen, needs, hi)
                if spliced is not None:
                    return needs, base, spliced[0]
            code = None
        if code is None:
            code = self._advance_from(run, state, hi)
        stopped = code == _PAUSED
        a.device_needs, a.need_limit, a.paused = None, None, False
        if state.index >= 0:
            record = _Seen(state, shape, list(needs), run.copy() if stopped else None)
            bisect.insort(self._seen, record, key=_seen_at)
        return needs, base, run if stopped else None

    def _advance_from(
        self, run: _Progress, state: _Progress, hi: int, until: tuple[int, int] | None = None
    ) -> int:
        """:meth:`_advance` of the continuation ``run`` of ``state`` (its ``device_needs``
        kept, its ``need_limit`` at ``hi``, or first just above the band's bottom): where it
        stops below ``hi`` (the first device allocation that needs more than the bottom),
        a copy of it is kept for the pauses of ``state`` (:meth:`_pause` starts from the
        last copy before the allocation it stops at), unless that is the first device
        allocation of the run (the copy would stand about where ``state`` does), and it runs
        on to ``hi``. The walk pauses ``state`` only at allocations that need more than the
        bottom (:func:`calc.allocator.capacity_threshold`): each then replays from the copy,
        not from ``state``. A copy stands before its allocation, as the ones :meth:`_pause`
        keeps do: the need the stop counted is taken back."""
        a = run.a
        needs = a.device_needs
        assert needs is not None
        while True:
            code = self._advance(run, until=until)
            if code != _PAUSED or a.need_limit == hi or needs[-1] >= hi:
                return code
            needs.pop()  # counted again when the allocation runs
            a.paused, a.need_limit = False, hi
            if a.num_device_alloc > state.a.num_device_alloc:
                copy = run.copy()
                copy.a.need_limit = None
                kept = self._pause_copies.get(id(state))
                if kept is None or kept[0] is not state:
                    kept = self._pause_copies[id(state)] = (state, [])
                kept[1].append(copy)

    def _splice(self, seen: _Seen, needs: list[int], hi: int) -> tuple[_Progress | None] | None:
        """A continuation (or the state it begins from) stands where ``seen``'s began, in
        the state ``seen`` began from up to addresses (:meth:`_Progress.shape`; the needs
        of its device allocations so far in ``needs``): the rest of it is ``seen``'s, since
        the allocator makes the same decisions on the same events (see
        :meth:`calc.allocator.CachingAllocator.shape`), so the same device allocations
        with the same needs follow. ``needs`` then gets those up to the first that reaches
        ``hi`` (where a continuation stops), and the answer holds the run standing before
        that one (``seen``'s own stop, copied, or ``seen``'s start paused there), or
        ``None`` when none reaches ``hi``. ``None`` (nothing done) when ``seen`` stopped
        below ``hi`` (what follows its stop is not known). That run keeps ``seen``'s
        counts of device allocations and releases: the walk reads a state's counts only
        against its own (the pauses of it, the step skipping's flags), never against
        another's."""
        start = seen.state
        at = next((i for i, need in enumerate(seen.needs) if need >= hi), None)
        if at is None:
            if seen.stop is not None:
                return None
            needs += seen.needs
            return (None,)
        needs += seen.needs[: at + 1]
        if seen.stop is not None and at == len(seen.needs) - 1:
            return (seen.stop.copy(),)
        return (self._pause(start, start.a.num_device_alloc + at),)

    def _pause(self, state: _Progress, k: int) -> _Progress:
        """A copy of ``state`` run on with no limit to just before its device allocation
        ``k``; from the start, from the unlimited replay's last copy before it (each stands
        before a device allocation: :meth:`_run_marking`).

        The walk pauses one state at one allocation after another, from the last down
        (:func:`calc.allocator.capacity_threshold`): so on the way to ``k`` the run keeps a
        copy of itself :data:`PAUSE_LEAD` device allocations earlier (or, where ``k`` lies
        closer to where the run starts, before the first device allocation after that), and a
        later pause of the same state at or after that one starts from the copy (the same
        replay, shorter)."""
        start = state
        from_copy = False  # whether start stands just before a device allocation already
        if state.index < 0 and not state.offset and not state.a.num_device_alloc:
            for count, mark in reversed(self._marks):
                if count <= k:
                    start, from_copy = mark, True
                    break
        kept = self._pause_copies.get(id(state))
        if kept is not None and kept[0] is state:
            for copy in kept[1]:
                # a copy stands just before its allocation: past a mark or the state of its count
                if start.a.num_device_alloc <= copy.a.num_device_alloc <= k:
                    start, from_copy = copy, True
        run = start.copy()
        run.a.capacity = None
        count = run.a.num_device_alloc
        early = k - PAUSE_LEAD
        if early <= count < k and not from_copy:
            # k lies within the lead of a mark or the state: the copy is kept before the first
            # device allocation after it (the replay up to that one is the long part)
            early = count
        if early > count or (early == count < k and not from_copy):
            run.a.pause_before = early
            if self._advance(run) != _PAUSED:
                raise AssertionError("the unlimited replay did not reach its own allocation")
            run.a.paused = False
            if kept is None or kept[0] is not state:
                kept = self._pause_copies[id(state)] = (state, [])
            kept[1].append(run.copy())
        run.a.pause_before = k
        if self._advance(run) != _PAUSED:
            raise AssertionError("the unlimited replay did not reach its own allocation")
        run.a.pause_before, run.a.paused = -1, False
        return run

    def _release_at(self, paused: _Progress) -> tuple[int, _Progress | None]:
        """The release and retry at the device allocation ``paused`` stands before
        (:func:`calc.allocator.release_and_retry`): the retry's need, and the state after it
        (``paused`` itself, run on by one event; ``None`` when nothing was cached)."""
        event = (self._resident if paused.index < 0 else self._events(paused.index))[paused.offset]
        low, ran = al.release_and_retry(paused.a, paused.live, event, self.config)
        if not ran:
            return low, None
        paused.offset += 1
        return low, paused

    def fits(self, capacity_bytes: int) -> bool:
        """Whether the sequence runs on ``capacity_bytes``: :meth:`replay`'s ``fits``, from
        the point where that replay can first differ from the unlimited one.

        A replay on a capacity is the unlimited one until a device allocation would take
        reserved memory past it (only then are cached segments released): when none does,
        it fits; else the unlimited replay is run up to that allocation, and the capacity
        runs on from a copy of it (:meth:`calc.allocator.CachingAllocator.copy`). The copy
        serves every later capacity whose first such allocation is not earlier (from the
        smallest capacity asked up; a smaller one after it rebuilds the copy).

        At that allocation a replay releases every cached whole segment and retries
        (``release_cached_blocks``): out of memory when the retry needs more than the
        capacity, else it goes on from a state that is the same for every capacity from
        that need up to the allocation's first need, and is the unlimited replay run on
        from there until a device allocation would exceed its capacity again. From the
        second capacity that reaches the same allocation on, that state is kept with what
        the device allocations of its unlimited continuation need (:class:`_Released`): a
        capacity below the retry's need does not fit, one no continuation's allocation
        exceeds fits, and only the others run on (from a copy of the state). Not with
        ``max_split_size_mb`` (its release of oversize blocks first makes what follows
        depend on the capacity) nor with expandable segments (pages, not segments, are
        mapped: each capacity runs from the start)."""
        if self.config.expandable_segments:
            return self.replay(capacity_bytes).fits
        if self._needs is None:
            self.replay()
        assert self._needs is not None
        first = bisect.bisect_right(self._needs, capacity_bytes)
        if first == len(self._needs):
            return True
        again = self._start is not None and self._start[0] == first
        if self._start is None or self._start[0] > first:
            # from a copy of the last copy the unlimited replay kept before that allocation
            # (kept for the capacity walk's pauses), else from the beginning
            at = len(self._marks)
            while at and self._marks[at - 1][0] > first:
                at -= 1
            start = (
                self._marks[at - 1][1].copy()
                if at
                else _Progress(al.CachingAllocator(None, self.config), self._kept)
            )
            start.a.pause_before = first
            if self._advance(start) != _PAUSED:
                raise AssertionError("the unlimited replay did not reach its own allocation")
            start.a.pause_before, start.a.paused = -1, False
            self._start = (first, start)
        if self.config.max_split_size_bytes is None and (again or first in self._released):
            released = self._released.get(first)
            if released is None:
                released = self._released[first] = self._release(self._start[1])
            if capacity_bytes < released.low:
                return False
            if capacity_bytes >= released.high:
                return True
            run = released.start.copy()
        else:
            run = self._start[1].copy()
        run.a.capacity = capacity_bytes
        return self._advance(run) < 0

    def _release(self, paused: _Progress) -> _Released:
        """The state a replay paused before a device allocation reaches on every capacity
        below that allocation's need that lets its retry succeed (see :meth:`fits`)."""
        run = paused.copy()
        a = run.a
        event = (self._resident if run.index < 0 else self._events(run.index))[run.offset]
        cached = a.pools[0].whole + a.pools[1].whole
        need = a.reserved + al.allocation_size(al.round_size(event[2], self.config))
        if not cached:
            # nothing to release: every capacity that comes here is below the need
            return _Released(run, need, need)
        a.capacity = need - cached  # the allocation fails, the release and retry succeed
        retries = a.num_alloc_retries
        if a.run([event], run.live) >= 0 or a.num_alloc_retries != retries + 1:
            raise AssertionError("the retry after the release did not run as expected")
        a.capacity = None
        run.offset += 1
        start = run.copy()
        needs: list[int] = []
        a.device_needs = needs
        self._advance(run)
        return _Released(start, need - cached, max(needs, default=0))


_PAUSED = -2
_AT = -3


PAUSE_LEAD = 16
"""How many device allocations before the one it pauses at :meth:`StepReplay._pause` keeps a
copy of its run, for the walk's next pauses of the same state (each one allocation earlier
than the last; chosen for time, the replays are the same)."""


MARK_SPACING = 512
"""In the steps after the first, the unlimited replay keeps a copy of itself before a device
allocation that comes at least this many events after its last copy
(:meth:`StepReplay._run_marking`): the capacity search's replays first differ from it late
(at one of the last device allocations, the largest), and run on from the last copy before
it. Chosen for time: a copy costs about what replaying a few hundred events does, and the
first step, which opens most segments, keeps none; the replays are the same."""


class _Released:
    """A state every capacity from ``low`` up reaches after the release at one device
    allocation (see :meth:`StepReplay.fits`): a replay standing there (not run on), and the
    largest need of the device allocations of its unlimited continuation (``high``: every
    capacity from it fits)."""

    __slots__ = ("start", "low", "high")

    def __init__(self, start: _Progress, low: int, high: int) -> None:
        self.start = start
        self.low = low
        self.high = high


class _Seen:
    """A continuation of the capacity walk (:meth:`StepReplay._continuation`): the state it
    began from (never run on: the walk copies the states it explores), where, a cheap part
    of its shape (compared first), the needs of its device allocations and, when it stopped
    at one, a copy of the run standing there. The shape itself (:meth:`_Progress.shape`) is
    taken when first compared."""

    __slots__ = ("state", "at", "cheap", "_shape", "needs", "stop")

    def __init__(
        self,
        state: _Progress,
        shape: tuple[Any, ...] | None,
        needs: list[int],
        stop: _Progress | None,
    ) -> None:
        self.state = state
        self.at = (state.index, state.offset)
        self.cheap = _cheap_shape(state)
        self._shape = shape
        self.needs = needs
        self.stop = stop

    @property
    def shape(self) -> tuple[Any, ...]:
        if self._shape is None:
            self._shape = self.state.shape()
        return self._shape


def _seen_at(seen: _Seen) -> tuple[int, int]:
    return seen.at


def _cheap_shape(run: _Progress) -> tuple[int, int, int, int]:
    """What two equal shapes (:meth:`_Progress.shape`) share that costs nothing to read."""
    a = run.a
    return a.reserved, a.allocated, len(a.pools[0].keys), len(a.pools[1].keys)


class _Progress:
    """A replay under way: its allocator, the blocks held by event key, where it stands
    (``index``: the step, -1 for the resident states; ``offset``: the next event in that
    step's list), the step skipping's state (see :meth:`StepReplay._advance`) and the keys
    held for good (their blocks are shared by the copies: :meth:`CachingAllocator.copy`)."""

    __slots__ = (
        "a",
        "live",
        "index",
        "offset",
        "witnesses",
        "since",
        "version",
        "kept",
        "chain",
        "chain_at",
        "chain_version",
    )

    def __init__(self, a: al.CachingAllocator, kept: frozenset[Any] = frozenset()) -> None:
        self.a = a
        self.kept = kept
        self.live: dict[Any, Any] = {}
        self.index = -1
        self.offset = 0
        self.witnesses: list[tuple[int, ...]] = []
        self.since = -1
        self.version = 0
        # the micro-batch skipping (StepReplay._run_span): the micro-batches known to run from
        # the cache as it stands (StepReplay._quiet_runs), valid where the last one ended
        # (chain_at: step, offset) while the device allocations and releases number chain_version
        self.chain: dict[int, int] = {}
        self.chain_at: tuple[int, int] | None = None
        self.chain_version = -1

    def shape(self) -> tuple[Any, ...]:
        """The replay's state up to addresses, where it stands: the allocator's
        (:meth:`calc.allocator.CachingAllocator.shape`) and what the step skipping of
        :meth:`StepReplay._advance` will read (the witnesses; whether no device allocation
        or release happened since the skipping's last reset and since this step began; the
        counts themselves differ between replays that have made different ones before)."""
        a = self.a
        version = a.num_device_alloc + a.num_device_free
        return (
            a.shape(self.live, self.kept),
            tuple(self.witnesses),
            self.since == version,
            self.version == version,
        )

    def copy(self) -> _Progress:
        """An independent copy (the allocator's blocks copied, but those held for good)."""
        a, live = self.a.copy(self.live, self.kept)
        out = _Progress(a, self.kept)
        out.live = live
        out.index, out.offset, out.since, out.version = (
            self.index,
            self.offset,
            self.since,
            self.version,
        )
        out.witnesses = list(self.witnesses)
        # the lengths known to run from this cache (StepReplay._quiet_runs): facts about the
        # cache's shape, so the copy shares them and may add to them while it stands there
        out.chain, out.chain_at, out.chain_version = self.chain, self.chain_at, self.chain_version
        return out


def step_events(req: EstimateRequest, seq_lens: Sequence[int] | None = None) -> list[Event]:
    """Alloc/free events of the micro-batches ``seq_lens`` (padded length of each; default:
    one optimizer step of ``gradient_accumulation_steps`` micro-batches at ``seq_len``)."""
    lengths = list(seq_lens) if seq_lens else [req.seq_len] * req.gradient_accumulation_steps
    builder = _Builder(req)
    events = builder.resident()
    for group in optimizer_steps(req, lengths):
        events += builder.step(group)
    return events


def self_contained_micro_batches(
    events: Sequence[Event], bounds: Sequence[tuple[int, int, int]]
) -> list[tuple[int, int, int]]:
    """The micro-batches among ``bounds`` (``(start, end, length)`` in ``events``) that free
    every key they allocate and no key allocated before them, with nothing but allocations and
    frees among their events: those that, without a device allocation or release, leave the
    allocator as they found it (:meth:`StepReplay._run_span`). The check of what
    :meth:`_Builder.step` reports as ``contained``, from the events themselves."""
    out = []
    for start, end, length in bounds:
        part = events[start:end]
        made = {ev[1] for ev in part if ev[0] == "alloc"}
        freed = {ev[1] for ev in part if ev[0] == "free"}
        if made == freed and 2 * len(made) == len(part):
            out.append((start, end, length))
    return out


class StepEvents(Sequence[Event]):
    """An optimizer step's events (:meth:`_Builder.step`) as the lists they were built in: a
    micro-batch that frees every key it allocates and no other (``contained``: its
    ``(start, end, length)`` in the step) is a list its length shares with every other such
    micro-batch (their keys are free again before the next micro-batch begins), so a step of
    many micro-batches costs a list per distinct length, not per micro-batch. Read as one
    sequence (indexing, slicing, iteration)."""

    __slots__ = ("chunks", "contained", "_starts", "_length", "_flags")

    def __init__(self, chunks: list[list[Event]], contained: list[tuple[int, int, int]]) -> None:
        self.chunks = chunks
        self.contained = contained
        self._starts: list[int] = []
        at = 0
        for chunk in chunks:
            self._starts.append(at)
            at += len(chunk)
        self._length = at
        starts = {start for start, _end, _length in contained}
        self._flags = [start in starts for start in self._starts]

    def __len__(self) -> int:
        return self._length

    def __iter__(self) -> Iterator[Event]:
        return itertools.chain.from_iterable(self.chunks)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            start, stop, stride = i.indices(self._length)
            if stride != 1:
                return list(self)[i]
            return list(self.span(start, stop))
        if i < 0:
            i += self._length
        if not 0 <= i < self._length:
            raise IndexError(i)
        c = bisect.bisect_right(self._starts, i) - 1
        return self.chunks[c][i - self._starts[c]]

    def span(self, start: int, stop: int) -> list[Event]:
        """``self[start:stop]``; a whole chunk is the chunk itself (not copied: read only)."""
        if start >= stop:
            return []
        c = bisect.bisect_right(self._starts, start) - 1
        first = self.chunks[c]
        at = self._starts[c]
        if start == at and stop == at + len(first):
            return first
        out: list[Event] = []
        while start < stop:
            chunk, at = self.chunks[c], self._starts[c]
            out += chunk[start - at : min(len(chunk), stop - at)]
            start = at + len(chunk)
            c += 1
        return out

    def outside(self) -> list[Event]:
        """The events that are not in a contained micro-batch."""
        return [
            ev
            for chunk, flag in zip(self.chunks, self._flags, strict=True)
            if not flag
            for ev in chunk
        ]

    def flagged(self) -> Iterator[tuple[list[Event], bool]]:
        """Each chunk, and whether it is a contained micro-batch."""
        return zip(self.chunks, self._flags, strict=True)

    def key(self) -> tuple[Any, ...]:
        """What tells these events from another step's: each distinct chunk once, and the
        order of the chunks."""
        seen: dict[int, int] = {}
        order = [seen.setdefault(id(chunk), len(seen)) for chunk in self.chunks]
        distinct = {i: chunk for chunk in self.chunks for i in (seen[id(chunk)],)}
        return tuple(tuple(distinct[i]) for i in range(len(distinct))), tuple(order)


def _profiled(parts: Sequence[Sequence[Event]], config: al.AllocatorConfig) -> Iterator[Event]:
    """The events of ``parts`` one after another for :func:`calc.allocator.live_profile`, each
    contained micro-batch of a :class:`StepEvents` (it frees all it allocates) standing as one
    allocation of its own live peak, freed at once (the same largest total; with the default
    rounding, under which such a total is already a multiple of the rounding)."""
    peaks: dict[int, int] = {}
    plain = config.roundup_power2_divisions <= 1
    for part in parts:
        if not plain or not isinstance(part, StepEvents):
            yield from part
            continue
        for chunk, contained in part.flagged():
            if not contained:
                yield from chunk
                continue
            peak = peaks.get(id(chunk))
            if peak is None:
                peak = peaks[id(chunk)] = al.live_profile(chunk, config)[0]
            if peak:
                key = object()
                yield ("alloc", key, peak)
                yield ("free", key)


def optimizer_steps(req: EstimateRequest, seq_lens: Sequence[int]) -> list[tuple[int, ...]]:
    """The micro-batch lengths grouped by optimizer step: ``gradient_accumulation_steps`` each,
    the last group what is left."""
    n = max(1, req.gradient_accumulation_steps)
    return [tuple(seq_lens[i : i + n]) for i in range(0, len(seq_lens), n)]


_LOAD_BLOCK_KEY = 0
"""The key of the load's warmup block (:meth:`_Builder.resident`)."""


class _Builder:
    """The events of one request: :meth:`resident` once, then :meth:`step` per optimizer step,
    in order (keys are numbered across them)."""

    def __init__(self, req: EstimateRequest) -> None:
        # padding-free: each micro-batch one row of its samples (its lengths are the rows')
        req = as_rows(req)
        self.req = req
        self.reg = st.request_regime(req)
        self.s = mem.model_states(req, st.param_layout(req), self.reg)
        self.block, self.rest = _trainable_shares(req)
        self.ids = itertools.count(1)  # event keys, numbered across the steps
        self.states_made = False
        self.partition_held = st.grad_partition_held(req)
        # zeroed in place, not freed (zero_grad_set_to_none False): the first step's gradients
        # stay allocated through every later step
        self.grads_kept = st.gradients_kept_between_steps(req)
        self.grads_made = False
        self._peaks: dict[int, tuple[mem.Activations, dict[str, int], act.ActConfig]] = {}
        # the events of a micro-batch that frees all it allocates, by length (see step)
        self._contained: dict[int, list[Event]] = {}

    def _alloc(self, events: list[Event], nbytes: int) -> int:
        key = next(self.ids)
        events.append(("alloc", key, nbytes))
        return key

    def resident(self, load_block_bytes: int = 0) -> list[Event]:
        """:meth:`loaded`, after the block transformers allocates and frees before it loads
        the weights (``load_block_bytes``, :func:`calc.load_warmup.block_bytes`; 0: none). Its
        key is 0 (the steps' keys count from 1, a build's are negative)."""
        events = self.loaded()
        if load_block_bytes:
            block = [("alloc", _LOAD_BLOCK_KEY, load_block_bytes), ("free", _LOAD_BLOCK_KEY)]
            # expandable segments: the smallest card is the pages held blocks touch from here
            events = [*block, ("reset_footprint",), *events]
        return events

    def loaded(self) -> list[Event]:
        """Before the first step: weights per block (each tensor at its bytes,
        :func:`_weight_shares`), then the embedding and the output layer; adapters; persistent
        buffers. Where the loop runs kbit preparation (and TRL's recast), the two tables go
        through it around the adapters (:meth:`_load_tables`), with the cache that leaves.
        Where the stack quantizes each weight whole on the GPU
        (``qlora_unchunked_quantization``), the weights and adapters are what that build
        leaves (:func:`_nf4_build_events`), with the cache it leaves."""
        s, arch = self.s, self.req.model
        built = _nf4_build_events(self.req)
        if built is not None:
            if s.comm_static:
                self._alloc(built, s.comm_static)
            self._grad_partition(built)
            return built
        events: list[Event] = []
        base_block, tables = _weight_shares(self.req, self.reg)
        # the 16-bit rotary tables are buffers of their own (with the weights in s.weights)
        rope = mem.rope_cache_16bit_tensors(self.req)
        weights = s.weights - sum(rope)
        w_layers, w_rest = _layered(weights, base_block, sum(tables), arch.num_layers)
        if len(w_rest) == 1:
            w_rest = _split(w_rest[0], tables)  # the embedding and the output layer apart
        lora_layers, lora_rest = _layered(s.lora_weights, self.block, self.rest, arch.num_layers)
        casts = _kbit_table_casts(self.req, self.reg)
        if casts is not None and len(w_rest) != len(casts[0]):
            casts = None  # tiny totals: the tables are one tensor, allocated as they end up
        for part in w_layers:
            for nbytes in _pack(part):
                self._alloc(events, nbytes)
        held = self._load_tables(events, w_rest, casts)
        for nbytes in rope:
            self._alloc(events, nbytes)
        for part in lora_layers + [lora_rest]:
            for nbytes in _pack(part):
                self._alloc(events, nbytes)
        if casts is not None and casts[2]:
            # peft_module_casting_to_bf16, after get_peft_model: each fp32 table to bf16
            for key, nbytes in zip(held, w_rest, strict=True):
                self._swap(events, key, nbytes)
        if s.comm_static:
            self._alloc(events, s.comm_static)
        self._grad_partition(events)
        return events

    def _load_tables(
        self,
        events: list[Event],
        finals: list[int],
        casts: tuple[list[int], list[int], bool] | None,
    ) -> list[int]:
        """The embedding and output layer as the loader leaves them, then, where the loop runs
        ``prepare_model_for_kbit_training`` (:func:`_kbit_table_casts`), each 16-bit one
        replaced by an fp32 copy (``param.data = param.data.to(torch.float32)``: the copy
        allocated, then the original freed); the keys of the tables then held. Without the
        preparation the tables are allocated as they end up (``finals``). TRL's cast back to
        bf16 comes after the adapters (:meth:`resident`); what the swaps free stays in the
        cache, which the steps then allocate from (the loop calls no ``empty_cache``)."""
        if casts is None:
            return [self._alloc(events, n) for n in _pack(finals)]
        loaded, fp32, recast = casts
        held = [self._alloc(events, n) for n in loaded]
        if loaded != fp32:  # 16-bit tables: fp32 copies (the tables kept, without the recast)
            sizes = fp32 if recast else finals
            held = [self._swap(events, key, n) for key, n in zip(held, sizes, strict=True)]
        return held

    def _swap(self, events: list[Event], old: int, nbytes: int) -> int:
        """A tensor replaced by a copy of another dtype: the copy allocated, then the old freed."""
        key = self._alloc(events, nbytes)
        events.append(("free", old))
        return key

    def _grad_partition(self, events: list[Event]) -> None:
        """DeepSpeed's ZeRO-3 gradient partition, one flat tensor allocated before the first
        step and kept (:func:`calc.states.grad_partition_held`); the steps then allocate no
        gradients of their own."""
        if self.partition_held and self.s.grads_all:
            self._alloc(events, self.s.grads_all)

    def _at(self, length: int) -> tuple[mem.Activations, dict[str, int], act.ActConfig]:
        """Activations, the peak phase's components and the activation configuration of
        micro-batches of ``length`` (computed once per length)."""
        if length not in self._peaks:
            req = self.req
            r = mem.loss_at_size(req if length == req.seq_len else replace(req, seq_len=length))
            acts = mem.activation_bytes(r, self.reg)
            phases = mem.phase_components(r, self.reg, self.s, acts)
            peak = max(phases.values(), key=lambda p: sum(p.values()))
            self._peaks[length] = (acts, peak, mem.act_config(r, self.reg))
        return self._peaks[length]

    def step(
        self,
        lengths: Sequence[int],
        empty_cache: bool = False,
    ) -> StepEvents:
        """One optimizer step: its micro-batches of ``lengths`` (padded length each), then the
        optimizer (its states on the first step) and the gradients freed; ``empty_cache``:
        ``torch.cuda.empty_cache()`` after the optimizer, the gradients still held (a loop
        that empties the cache after each step and zeroes the gradients at the next one).

        A micro-batch that does not allocate the gradients frees every key it allocates and no
        other (:func:`self_contained_micro_batches` checks it): its events are the same list
        for every such micro-batch of its length, in every step (:class:`StepEvents`; their
        keys are free again before the next micro-batch begins)."""
        req, s, arch = self.req, self.s, self.req.model
        block, rest = self.block, self.rest
        layers = arch.num_layers
        chunks: list[list[Event]] = []
        contained: list[tuple[int, int, int]] = []
        events: list[Event] = []
        at = 0  # where ``events`` begins in the step
        ids = self.ids

        def alloc(nbytes: int) -> int:
            key = next(ids)
            events.append(("alloc", key, nbytes))
            return key

        def free(keys: list[int]) -> None:
            events.extend(zip(itertools.repeat("free"), keys))

        grads: list[int] = []
        for index, length in enumerate(lengths):
            last = index == len(lengths) - 1
            if index == 0 and not self.partition_held and not self.grads_made:
                self._micro_batch(events, length, grads)
            else:
                shared = self.contained(length)
                if events:
                    chunks.append(events)
                    at += len(events)
                    events = []
                chunks.append(shared)
                contained.append((at, at + len(shared), length))
                at += len(shared)
            # 4. optimizer step
            if last and not req.optimizer_in_backward:
                if not self.states_made and s.optimizer:
                    o_layers, o_rest = _layered(s.optimizer, block, rest, layers)
                    for part in o_layers + [o_rest]:
                        for nbytes in _pack(part):
                            alloc(nbytes)
                    self.states_made = True
                t_layers, t_rest = _layered(s.optimizer_temp, block, rest, layers)
                temps = [alloc(n) for part in t_layers + [t_rest] for n in _pack(part)]
                free(temps)
            if last:
                if empty_cache:
                    events.append(("empty_cache",))
                if self.grads_kept:
                    self.grads_made = True
                else:
                    free(grads)
                grads = []
        if events:
            chunks.append(events)
        return StepEvents(chunks, contained)

    def contained(self, length: int) -> list[Event]:
        """The events of a micro-batch of ``length`` that does not allocate the gradients,
        built once (the same list for every such micro-batch: see :meth:`step`)."""
        found = self._contained.get(length)
        if found is None:
            found = self._contained[length] = []
            self._micro_batch(found, length, None)
        return found

    def _micro_batch(self, events: list[Event], length: int, grads: list[int] | None) -> None:
        """One micro-batch of ``length`` (padded length per sample), its forward and backward,
        appended to ``events``; ``grads``: where given, the gradients are allocated in its
        backward (the first micro-batch of a step that makes them) and their keys appended."""
        req, s, arch = self.req, self.s, self.req.model
        block, rest = self.block, self.rest
        layers = arch.num_layers
        add, ids = events.append, self.ids

        def alloc(nbytes: int) -> int:
            key = next(ids)
            add(("alloc", key, nbytes))
            return key

        def allocs(sizes: list[int]) -> list[int]:
            keys = list(itertools.islice(ids, len(sizes)))
            events.extend(zip(itertools.repeat("alloc"), keys, sizes))
            return keys

        def free(keys: list[int]) -> None:
            events.extend(zip(itertools.repeat("free"), keys))

        lb = mem.returned_logit_bytes(req, self.reg)  # the logits' dtype, as memory counts them
        acts, peak, cfg = self._at(length)
        cb = cfg.act_bytes
        tokens = req.micro_batch_size * local_length(length, req.sequence_parallel)
        # peak-phase extras alive through the micro-batch (one tensor each)
        extras = [
            alloc(peak[name])
            for name in ("weight_copies", "gathered_weights", "dequant_buffer")
            if peak.get(name)
        ]
        comm = max(0, peak.get("comm_buffers", 0) - s.comm_static)
        if comm:
            extras.append(alloc(comm))
        # 2. forward
        ckpt = req.gradient_checkpointing
        per_layer = (
            mem.wrapped_block_bytes_per_token(req, cfg) * tokens if ckpt else acts.last_block
        )
        # every-n: blocks N, 2N, ... wrapped, the others keep their whole forward
        wrapped = [
            ckpt and block_wrapped(i, req.checkpointing_granularity, req.checkpointing_every)
            for i in range(layers)
        ]
        on_gpu = min(layers, 2) if req.activation_offload else layers
        head = max(
            0,
            acts.saved_all
            - on_gpu * per_layer
            - (0 if all(wrapped) else acts.last_block - per_layer) * wrapped.count(False),
        )
        if req.activation_offload and not all(wrapped):
            head = max(0, acts.saved_all - on_gpu * acts.last_block)
        saved: list[list[int]] = []
        transients = _norm_transients(tokens, req)
        # a mask copy in every block: its own tensor (a padded batch, packed samples kept
        # apart, sparse attention); a window's copies in some blocks stay in the rest
        mask_copy = act.mask_copy_bytes(arch, cfg) * tokens
        block_tensors = _saved_tensors(acts.last_block, tokens, req, cb, mask_copy)
        # the 4-D mask the model builds before its first block (memory.shared_mask_bytes):
        # gone when the forward returns, or kept by every checkpointed block until the first
        # block's backward, the last of the backward
        mask_keys = [alloc(acts.shared_mask)] if acts.shared_mask else []
        # eager attention's scores at the softmax, beyond what the block keeps
        # (memory.eager_scores_bytes); in the backward, its softmax's gradient beyond the
        # block's recomputed tensors and the linears' gradients in flight, less what the
        # block saved after its scores (phase_components' count, but for Falcon-H1's
        # parallel mixer, whose saved tensors it holds to the MLP's: Activations.scores_freed)
        scores_fwd = (
            max(0, acts.indexer_pre + acts.indexer_spike - acts.last_block)
            if acts.scores_backward
            else 0
        )
        for _layer in range(layers):
            free(allocs(transients))
            if wrapped[_layer]:
                inner = allocs(block_tensors)
                if scores_fwd:
                    free([alloc(scores_fwd)])
                saved.append([alloc(per_layer)])
                free(inner)
            else:
                saved.append(allocs(block_tensors))
                if scores_fwd:
                    free([alloc(scores_fwd)])
            if req.activation_offload and len(saved) > on_gpu:
                free(saved[-on_gpu - 1])
                saved[-on_gpu - 1] = []
        if not req.every_block_wrapped:
            free(mask_keys)
            mask_keys = []
        head_keys = [alloc(head)] if head else []
        kept = min(acts.kept_logits, acts.logits)
        rows = tokens * arch.vocab_size
        loss_total = acts.logits - kept
        loss_grads: list[int] = []
        # accelerate's fp32 copy of the returned logits (outputs_cast_fp32), freed with
        # the 16-bit logits when the loop drops the output, before the backward
        cast = bool(acts.output_cast)
        if not req.chunked_loss and loss_total >= 3 * FP32_BYTES * rows:
            # transformers' ForCausalLMLoss: the output layer's 16-bit logits (the model's
            # output, kept or not), their fp32 upcast (freed once log_softmax has read it), the
            # fp32 log-softmax the loss saves, and at the start of its backward two fp32
            # gradients (activations.logits_bytes_per_token)
            kept_keys = [alloc(kept)] if kept else []
            returned = [] if kept else [alloc(rows * lb)]
            upcast = [alloc(rows * FP32_BYTES)] if kept < rows * FP32_BYTES else []
            if not cast:
                # gone once the upcast has read them; the copy needs them alive (below)
                free(returned)
                returned = []
            loss_keys = [
                alloc(n) for n in (rows * FP32_BYTES, loss_total - 3 * FP32_BYTES * rows) if n
            ]
            free(upcast)
            if cast:
                # the copy is the output the loop keeps (kept_keys) or drops with the
                # 16-bit logits
                free(([] if kept else [alloc(rows * FP32_BYTES)]) + returned)
            loss_grads = [rows * FP32_BYTES] * 2
        else:
            loss_keys = [alloc(n) for n in _logit_tensors(loss_total, rows, lb)]
            if cast:
                free([alloc(rows * FP32_BYTES)])
            kept_keys = [alloc(kept)] if kept else []
        # 3. backward
        free([alloc(n) for n in loss_grads] + loss_keys)
        new_grads = grads is not None
        made = grads if grads is not None else []  # the gradients' keys, when it makes them
        g_layers, g_rest = _layered(s.grads_all, block, rest, layers) if new_grads else ([], [])
        if new_grads:
            made += [alloc(n) for n in _pack(g_rest)]
        free(head_keys)
        work_sizes = [tokens * arch.hidden_size * cb] * 2 + [
            tokens * arch.intermediate_size * cb
        ] * 2
        work_sizes = _split(acts.workspace, work_sizes)
        recompute_sizes = _saved_tensors(acts.recompute, tokens, req, cb, mask_copy) if ckpt else []
        scores_bwd = max(
            0,
            acts.indexer_pre
            + acts.scores_saved
            + acts.scores_backward
            - acts.last_block
            - acts.workspace,
        )
        for layer in reversed(range(layers)):
            recompute = allocs(recompute_sizes) if wrapped[layer] else []
            work = allocs(work_sizes)
            if scores_bwd:
                free([alloc(scores_bwd)])
            if new_grads and g_layers:
                made += allocs(_pack(g_layers[layer]))
            free(work)
            free(recompute)
            free(saved[layer])
        free(mask_keys)
        free(kept_keys)
        free(extras)


def _nf4_build_events(req: EstimateRequest) -> list[Event] | None:
    """The model build of a stack that quantizes each base weight whole on the GPU
    (``qlora_unchunked_quantization``: torchtune with torchao 0.1, :mod:`calc.nf4_build`),
    as the replay's first events: the NF4 weights, the adapters and the norms it keeps, and
    the blocks its quantization temporaries leave cached, which the steps then allocate from
    (torchtune's recipes never call ``empty_cache``). Its keys are negative, apart from the
    steps' (numbered from 1). ``None`` for every other stack."""
    if req.method is not Method.QLORA or not req.qlora_unchunked_quantization:
        return None
    from .nf4_build import build_events

    adapted = {a.name for a in st.adapted(req)}
    return [(ev[0], -1 - ev[1], *ev[2:]) for ev in build_events(req.model, req.lora_rank, adapted)]


def _logit_tensors(total: int, rows: int, act_bytes: int) -> list[int]:
    """The loss's tensors (:func:`calc.activations.logits_bytes_per_token`): fp32 ``tokens x
    vocab`` ones (log-softmax and the gradients of its backward) while they fit, then
    ``act_bytes`` ones (the 16-bit logits), the rest as one."""
    out: list[int] = []
    left = total
    for unit in (rows * FP32_BYTES, rows * act_bytes):
        while unit and left >= unit and len(out) < SAVED_TENSORS_PER_BLOCK:
            out.append(unit)
            left -= unit
    if left > 0:
        out.append(left)
    return out
