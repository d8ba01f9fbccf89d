"""The reserved memory torchtune's QLoRA model build leaves with torchao before v0.2.0.

torchtune's single-device LoRA recipe (``recipes/lora_finetune_single_device.py``
``_setup_model`` at fef3ed10d and 0217d44c2, which pin ``torchao==0.1``) builds the model on
the GPU in bf16 and quantizes every base weight to NF4 three times:

1. ``lora_llama2`` (``torchtune/models/llama2/_component_builders.py``) builds **one**
   decoder layer: each ``LoRALinear._create_weight_and_bias``
   (``torchtune/modules/peft/lora.py``) makes an ``nn.Linear`` and calls ``to_nf4`` on its
   weight; then the embedding and the output layer;
2. ``TransformerDecoder.__init__`` (``torchtune/modules/transformer.py``) copies that layer
   ``num_layers`` times with ``_get_clones`` (``copy.deepcopy``); torchtune's
   ``aten.clone`` override for NF4 (``torchtune/utils/_register_nf4_dispatch_ops.py``)
   dequantizes the weight (``get_original_weight``) and quantizes it again;
3. ``model.load_state_dict`` copies the checkpoint in; the NF4 ``aten.copy_`` override
   moves each bf16 weight to the GPU, quantizes it and replaces the destination's tensors.

Each quantization (``NF4Tensor.from_tensor``, ``torchao/dtypes/nf4tensor.py`` at v0.1) holds
two ``(numel, 16)`` bf16 tensors of distances to the NF4 code values at once: 64 bytes per
element of the weight, the largest temporaries of the run. The quantized tensors each pass
keeps are carved out of the blocks earlier passes freed, so the next pass's temporaries no
longer fit there and PyTorch's caching allocator maps new segments; the recipe never calls
``empty_cache``, so the reserved memory of the whole run stays at least the build's peak.
:func:`build_events` writes the build as the allocations and frees of those functions, and
:func:`build_reserved_bytes` replays them through :mod:`calc.allocator`. For Llama-2-7B
(every linear of the blocks quantized) the replay gives 8.50 GiB: torchtune's QLoRA tutorial
at fef3ed10d (``docs/source/tutorials/qlora_finetune.rst``) reports 9.13 GB (8.50 GiB)
reserved after the model init.

Tensors under 512 bytes (scalars, the 16 NF4 code values, second-level absmax) are left
out: they occupy one small-pool segment whatever the model.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from .allocator import Event, replay
from .arch import LinearLayer, ModelArch

NF4_BLOCK_SIZE = 64
"""Weights per first-level absmax block: torchao v0.1 ``to_nf4(tensor, block_size=64,
scaler_block_size=256)``."""

NF4_SCALER_BLOCK_SIZE = 256
"""First-level absmax values per second-level (double quantization) block: torchao v0.1
``to_nf4``'s ``scaler_block_size``."""

NF4_CODE_VALUES = 16
"""The NF4 code values ``quantize_tensor_nearest`` measures each element's distance to:
``(value.unsqueeze(-1) - nf4).abs()`` is a ``(numel, 16)`` tensor (torchao v0.1)."""

BUILD_BYTES = 2
"""torchtune builds the model in bf16 (``utils.set_default_dtype(self._dtype)``, the recipes'
``dtype: bf16``), and torchao v0.1 ``NF4Tensor.from_tensor`` asserts a bf16 input."""

_INDEX_BYTES = 8  # int64 indices (torch.max / torch.min / .to(torch.long))
_FP32_BYTES = 4


class _Events:
    """An event list with fresh keys."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self._keys: Iterator[int] = itertools.count()

    def new(self, nbytes: int) -> int:
        key = next(self._keys)
        self.events.append(("alloc", key, nbytes))
        return key

    def free(self, *keys: int) -> None:
        self.events.extend(("free", k) for k in keys)


def _block_absmax(ev: _Events, n: int, block: int) -> int:
    """``get_block_absmax`` of ``n`` bf16 elements: ``blocks.abs()``, then ``.max(dim=1)``,
    whose int64 indices are dropped; returns the key of the bf16 maxima."""
    a = ev.new(BUILD_BYTES * n)
    values, indices = ev.new(BUILD_BYTES * (n // block)), ev.new(_INDEX_BYTES * (n // block))
    ev.free(a, indices)
    return values


def quantize(ev: _Events, n: int) -> tuple[int, ...]:
    """torchao v0.1 ``NF4Tensor.from_tensor`` on a resident bf16 weight of ``n`` elements;
    returns the keys of what the NF4 tensor keeps: ``quantized_data`` (``n / 2`` bytes), the
    int8 ``quantized_scalers`` and the storage of ``quantization_factor``."""
    scalers = n // NF4_BLOCK_SIZE
    # double_quantize_scalers
    s1 = _block_absmax(ev, n, NF4_BLOCK_SIZE)
    centred = ev.new(BUILD_BYTES * scalers)  # scalers_1 - scalers_1.mean()
    ev.free(s1)
    absmax = ev.new(BUILD_BYTES * scalers)  # get_block_absmax(scalers_1, 256): abs()
    ev.free(absmax)
    # 256 / (2 * scaler_absmax) on the expanded view: scaler_block_size copies per block,
    # kept whole by the ``quantization_factor[:, 0]`` view
    doubled = ev.new(BUILD_BYTES * scalers)
    factor = ev.new(BUILD_BYTES * scalers)
    ev.free(doubled)
    product = ev.new(BUILD_BYTES * scalers)  # scaler_blocks * quantization_factor
    rounded = ev.new(BUILD_BYTES * scalers)
    ev.free(product)
    clamped = ev.new(BUILD_BYTES * scalers)
    ev.free(rounded)
    quantized_scalers = ev.new(scalers)  # .to(torch.int8)
    ev.free(clamped, centred)
    # convert_to_norm_float_weight
    block_max = _block_absmax(ev, n, NF4_BLOCK_SIZE)
    scaled = ev.new(BUILD_BYTES * n)  # blocks / scales
    # quantize_tensor_nearest: (value - nf4).abs(), then .min(dim=-1).indices
    diff = ev.new(BUILD_BYTES * NF4_CODE_VALUES * n)
    dist = ev.new(BUILD_BYTES * NF4_CODE_VALUES * n)
    ev.free(diff)
    values, indices = ev.new(BUILD_BYTES * n), ev.new(_INDEX_BYTES * n)
    ev.free(values, dist)
    # quantized_blocks[::2] << 4 | quantized_blocks[1::2], then .to(torch.uint8)
    shifted = ev.new(_INDEX_BYTES * (n // 2))
    combined = ev.new(_INDEX_BYTES * (n // 2))
    ev.free(shifted)
    data = ev.new(n // 2)
    ev.free(combined, indices, scaled, block_max)
    return data, quantized_scalers, factor


def dequantize(ev: _Events, n: int) -> int:
    """torchao v0.1 ``NF4Tensor.get_original_weight``: the two halves of the codes as int64,
    their bf16 code values, the dequantized scalers, each half scaled (``repeated.flatten()``
    copies the expanded scalers), stacked into the bf16 weight, whose key it returns."""
    half = n // 2
    keep = []
    for _ in range(2):
        codes = ev.new(half)  # quantized_data >> 4 (or & 0b1111), uint8
        keep.append(ev.new(_INDEX_BYTES * half))  # .to(torch.long)
        ev.free(codes)
    keep += [ev.new(BUILD_BYTES * half), ev.new(BUILD_BYTES * half)]  # nf4[codes]
    ratio = ev.new(BUILD_BYTES * (n // NF4_BLOCK_SIZE))  # inpt / quantization_factor
    keep.append(ev.new(BUILD_BYTES * (n // NF4_BLOCK_SIZE)))  # + scaler_mean
    ev.free(ratio)
    for _ in range(2):
        repeated = ev.new(BUILD_BYTES * half)
        keep.append(ev.new(BUILD_BYTES * half))
        ev.free(repeated)
    weight = ev.new(BUILD_BYTES * n)  # torch.stack(...).reshape(shape)
    ev.free(*keep)
    return weight


def _rope_cache(ev: _Events, arch: ModelArch) -> int:
    """``RotaryPositionalEmbeddings.build_rope_cache``: the fp32 angles, their cos and sin,
    stacked into the kept ``(max_seq_len, head_dim / 2, 2)`` cache."""
    angles = arch.max_position_embeddings * (arch.head_dim // 2)
    temps = [ev.new(_FP32_BYTES * angles) for _ in range(3)]
    cache = ev.new(_FP32_BYTES * 2 * angles)
    ev.free(*temps)
    return cache


def _layer_linears(arch: ModelArch) -> list[tuple[LinearLayer, int]]:
    """A block's linear modules, each copy apart, with the blocks that hold it."""
    return [(l, arch.blocks_of(l)) for l in arch.linears for _ in range(l.count)]


def build_events(arch: ModelArch, rank: int, adapted: set[str]) -> list[Event]:
    """The allocations and frees of torchtune's QLoRA build (module doc): ``adapted`` names
    the linears that carry a LoRA adapter of ``rank`` (bf16 ``lora_a``, ``lora_b``); the
    quantizable linears are NF4 (as calc's states count them), the others bf16."""
    ev = _Events()
    h, b = arch.hidden_size, BUILD_BYTES
    linears = _layer_linears(arch)

    def build_layer(source: dict[int, tuple[int, ...]] | None) -> dict[int, tuple[int, ...]]:
        """One layer; ``source``: the layer it deep-copies (NF4 clone: dequantize, quantize)."""
        kept: dict[int, tuple[int, ...]] = {}
        for i, (lin, _) in enumerate(linears):
            n = lin.weight_params
            if lin.quantizable and lin.kind == "linear":
                weight = ev.new(b * n) if source is None else dequantize(ev, n)
                kept[i] = quantize(ev, n)
                ev.free(weight)
            else:
                kept[i] = (ev.new(b * n),)
            if lin.name in adapted:
                ev.new(b * rank * lin.d_in)
                ev.new(b * rank * lin.d_out)
        for _ in range(arch.norms_per_layer):
            ev.new(b * h)
        if source is None:
            _rope_cache(ev, arch)
        else:  # deepcopy clones the cache buffer
            ev.new(_FP32_BYTES * arch.max_position_embeddings * arch.head_dim)
        return kept

    first = build_layer(None)
    ev.new(b * arch.vocab_size * h)  # tok_embeddings
    if not arch.tie_word_embeddings:
        ev.new(b * arch.vocab_size * h)  # output
    layers = [build_layer(first) for _ in range(arch.num_layers)]
    ev.new(b * h)  # the final norm
    ev.free(*(k for keys in first.values() for k in keys))  # the builder's layer
    # load_state_dict: each NF4 weight replaced by the quantized checkpoint tensor
    for layer_index, layer in enumerate(layers):
        for i, (lin, blocks) in enumerate(linears):
            if layer_index >= blocks or not (lin.quantizable and lin.kind == "linear"):
                continue
            n = lin.weight_params
            source = ev.new(b * n)  # args[0][1].to(dest_tensor.device)
            fresh = quantize(ev, n)
            ev.free(source, *layer[i])
            layer[i] = fresh
    return ev.events


def build_reserved_bytes(arch: ModelArch, rank: int, adapted: set[str]) -> int:
    """The peak reserved memory of :func:`build_events` replayed through the caching
    allocator (one stream, default settings, no capacity limit)."""
    return replay(build_events(arch, rank, adapted)).peak_reserved_bytes


__all__ = [
    "BUILD_BYTES",
    "NF4_BLOCK_SIZE",
    "NF4_CODE_VALUES",
    "NF4_SCALER_BLOCK_SIZE",
    "build_events",
    "build_reserved_bytes",
    "dequantize",
    "quantize",
]
