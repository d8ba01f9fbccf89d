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
   (``zero_grad(set_to_none=True)``).

The amounts are ``calc.memory``'s: ``model_states`` for weights, gradients, optimizer states
and temporaries, ``activation_bytes`` for activations and logits, the peak phase's
``weight_copies``, ``gathered_weights``, ``dequant_buffer`` and ``comm_buffers`` as
single tensors alive through forward and backward. Only the split into tensors is this
module's: it follows the shapes the model's layers give (hidden and intermediate widths,
adapter ``r x d`` factors) but not every tensor of the real trace.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterator, Sequence

from . import activations as act
from . import memory as mem
from . import states as st
from . import allocator as al
from .allocator import SMALL_SIZE_BYTES, Event
from .jsontypes import JsonObject
from .request import EstimateRequest, Method
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


def _saved_tensors(total: int, tokens: int, req: EstimateRequest, act_bytes: int) -> list[int]:
    """One block's saved bytes as tensors: up to :data:`MLP_INTERMEDIATES` of ``tokens x
    intermediate`` (at ``act_bytes``), one fp32 ``tokens x hidden`` per RMSNorm (its upcast
    input, :func:`calc.activations.norm_bytes`), hidden-width ones at ``act_bytes`` while they
    fit, the rest as one."""
    arch = req.model
    wide = tokens * arch.intermediate_size * act_bytes
    upcast = tokens * arch.hidden_size * FP32_BYTES if arch.norm_kind == "rms" else 0
    narrow = tokens * arch.hidden_size * act_bytes
    out: list[int] = []
    left = total
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


class _Ids:
    def __init__(self) -> None:
        self.n = 0

    def new(self) -> int:
        self.n += 1
        return self.n


def lengths_of(req: EstimateRequest, micro_batch_tokens: Sequence[int]) -> list[int]:
    """Padded length of each micro-batch from its token count (``micro_batch_size`` rows,
    each padded to the batch's longest sample): ``ceil(tokens / micro_batch_size)``."""
    return [-(-int(t) // req.micro_batch_size) for t in micro_batch_tokens]


@dataclass(frozen=True)
class AllocatorEstimate:
    """The replayed step sequence, in bytes: peaks with an unlimited device (the cache as on
    a large card), the smallest allocator capacity that runs it, and the memory outside the
    allocator added to that for the device."""

    simulated_allocated_bytes: int
    simulated_reserved_bytes: int
    min_allocator_bytes: int
    cuda_context_bytes: int
    comm_buffer_bytes: int
    driver_reserve_bytes: int
    min_device_bytes: int

    def to_dict(self) -> JsonObject:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


def simulate(
    req: EstimateRequest,
    micro_batch_tokens: Sequence[int] | None = None,
    config: al.AllocatorConfig = al.DEFAULT_CONFIG,
    driver_reserve_bytes: int = 0,
) -> AllocatorEstimate:
    """Replay the steps of ``micro_batch_tokens`` (tokens per micro-batch; default one
    optimizer step at ``micro_batch_size x seq_len``) through :mod:`calc.allocator`.

    Outside the allocator: :data:`calc.memory.CUDA_CONTEXT_BYTES` (context and kernel images,
    cited there), :data:`calc.memory.NCCL_BUFFER_BYTES` on several GPUs (cited there), and
    ``driver_reserve_bytes``: memory the driver keeps on the card that nvidia-smi's
    ``memory.total`` still counts (an input: calc has no cited figure for it, so 0 unless the
    caller gives one)."""
    lengths = lengths_of(req, micro_batch_tokens) if micro_batch_tokens else None
    events = step_events(req, lengths)
    run = al.replay(events, None, config)
    capacity = al.min_device_bytes(events, config, unlimited=run)
    comm = mem.NCCL_BUFFER_BYTES if req.num_gpus > 1 else 0
    return AllocatorEstimate(
        run.peak_allocated_bytes,
        run.peak_reserved_bytes,
        capacity,
        mem.CUDA_CONTEXT_BYTES,
        comm,
        driver_reserve_bytes,
        capacity + mem.CUDA_CONTEXT_BYTES + comm + driver_reserve_bytes,
    )


def step_events(req: EstimateRequest, seq_lens: Sequence[int] | None = None) -> list[Event]:
    """Alloc/free events of the micro-batches ``seq_lens`` (padded length of each; default:
    one optimizer step of ``gradient_accumulation_steps`` micro-batches at ``seq_len``)."""
    return list(
        _events(
            req, list(seq_lens) if seq_lens else [req.seq_len] * req.gradient_accumulation_steps
        )
    )


def _events(req: EstimateRequest, seq_lens: list[int]) -> Iterator[Event]:
    reg = st.regime(req.precision, req.sharding)
    layout = st.param_layout(req)
    s = mem.model_states(req, layout, reg)
    arch = req.model
    layers = arch.num_layers
    ids = _Ids()
    block, rest = _trainable_shares(req)

    def alloc(nbytes: int) -> int:
        key = ids.new()
        events.append(("alloc", key, nbytes))
        return key

    def free(keys: list[int]) -> None:
        events.extend(("free", k) for k in keys)

    events: list[Event] = []
    # 1. resident: weights per block, then the rest; adapters; persistent buffers
    base_block = [l.count * l.weight_params for l in arch.block_linears]
    base_block.append(max(1, arch.block_params - sum(base_block)))
    w_layers, w_rest = _layered(
        s.weights, base_block, arch.embedding_params + arch.lm_head_params, layers
    )
    lora_layers, lora_rest = _layered(s.lora_weights, block, rest, layers)
    for part in w_layers + [w_rest] + lora_layers + [lora_rest]:
        for nbytes in _pack(part):
            alloc(nbytes)
    if s.comm_static:
        alloc(s.comm_static)
    yield from events
    events.clear()

    accumulation = max(1, req.gradient_accumulation_steps)
    grads: list[int] = []
    states_made = False
    cache: dict[int, tuple[mem.Activations, dict[str, int]]] = {}
    for index, length in enumerate(seq_lens):
        first = index % accumulation == 0
        last = index % accumulation == accumulation - 1 or index == len(seq_lens) - 1
        if length not in cache:
            r = req if length == req.seq_len else replace(req, seq_len=length)
            acts = mem.activation_bytes(r, reg)
            phases = mem.phase_components(r, reg, s, acts)
            peak = max(phases.values(), key=lambda p: sum(p.values()))
            cache[length] = (acts, peak)
        acts, peak = cache[length]
        tokens = req.micro_batch_size * length
        cfg = mem.act_config(req if length == req.seq_len else replace(req, seq_len=length), reg)
        cb = cfg.act_bytes
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
        per_layer = act.checkpoint_bytes_per_token(arch, cfg) * tokens if ckpt else acts.last_block
        on_gpu = min(layers, 2) if req.activation_offload else layers
        head = max(0, acts.saved_all - on_gpu * per_layer)
        saved: list[list[int]] = []
        transients = _norm_transients(tokens, req)
        for _layer in range(layers):
            free([alloc(n) for n in transients])
            if ckpt:
                inner = [alloc(n) for n in _saved_tensors(acts.last_block, tokens, req, cb)]
                saved.append([alloc(per_layer)])
                free(inner)
            else:
                saved.append([alloc(n) for n in _saved_tensors(per_layer, tokens, req, cb)])
            if req.activation_offload and len(saved) > on_gpu:
                free(saved[-on_gpu - 1])
                saved[-on_gpu - 1] = []
        head_keys = [alloc(head)] if head else []
        kept = min(acts.kept_logits, acts.logits)
        rows = tokens * arch.vocab_size
        loss_total = acts.logits - kept
        loss_grads: list[int] = []
        if not req.chunked_loss and loss_total >= 3 * FP32_BYTES * rows:
            # transformers' ForCausalLMLoss: the output layer's 16-bit logits (the model's
            # output, kept or not), their fp32 upcast (freed once log_softmax has read it), the
            # fp32 log-softmax the loss saves, and at the start of its backward two fp32
            # gradients (activations.logits_bytes_per_token)
            kept_keys = [alloc(kept)] if kept else [alloc(rows * cb)]
            upcast = [alloc(rows * FP32_BYTES)] if kept < rows * FP32_BYTES else []
            if not kept:
                free(kept_keys)
                kept_keys = []
            loss_keys = [
                alloc(n) for n in (rows * FP32_BYTES, loss_total - 3 * FP32_BYTES * rows) if n
            ]
            free(upcast)
            loss_grads = [rows * FP32_BYTES] * 2
        else:
            loss_keys = [alloc(n) for n in _logit_tensors(loss_total, rows, cb)]
            kept_keys = [alloc(kept)] if kept else []
        yield from events
        events.clear()
        # 3. backward
        free([alloc(n) for n in loss_grads] + loss_keys)
        g_layers, g_rest = _layered(s.grads_all, block, rest, layers) if first else ([], [])
        if first:
            grads += [alloc(n) for n in _pack(g_rest)]
        free(head_keys)
        work_sizes = [tokens * arch.hidden_size * cb] * 2 + [
            tokens * arch.intermediate_size * cb
        ] * 2
        work_sizes = _split(acts.workspace, work_sizes)
        for layer in reversed(range(layers)):
            recompute = (
                [alloc(n) for n in _saved_tensors(acts.recompute, tokens, req, cb)] if ckpt else []
            )
            work = [alloc(n) for n in work_sizes]
            if first and g_layers:
                grads += [alloc(n) for n in _pack(g_layers[layer])]
            free(work)
            free(recompute)
            free(saved[layer])
        free(kept_keys)
        free(extras)
        yield from events
        events.clear()
        # 4. optimizer step
        if last and not req.optimizer_in_backward:
            if not states_made and s.optimizer:
                o_layers, o_rest = _layered(s.optimizer, block, rest, layers)
                for part in o_layers + [o_rest]:
                    for nbytes in _pack(part):
                        alloc(nbytes)
                states_made = True
            t_layers, t_rest = _layered(s.optimizer_temp, block, rest, layers)
            temps = [alloc(n) for part in t_layers + [t_rest] for n in _pack(part)]
            free(temps)
        if last:
            free(grads)
            grads = []
        yield from events
        events.clear()


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
