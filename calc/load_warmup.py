"""The block transformers allocates and frees while it loads a model (``load_warmup``).

From 4.50, ``PreTrainedModel.from_pretrained`` calls ``caching_allocator_warmup`` before it
copies the weights to a GPU named by ``device_map`` (``modeling_utils.py``: 4.51.3 line 4793,
4.56.2 line 5600). It creates one fp16 tensor and drops it, so PyTorch's cache keeps one
segment of that size, and the weights then load into it. The block's size is a count of the
model's parameters, divided by a factor and capped by the card's free memory:

- **The count:** every parameter the device map puts on the GPU, at its element size before
  loading (4.56.2 lines 6154-6230: ``param.numel() * param.element_size()``, tied weights once).
  bitsandbytes' ``Linear4bit`` is built as a full-shape ``nn.Linear`` while transformers holds
  the load dtype as torch's default (4.51.3 ``from_pretrained``: ``preprocess_model`` runs
  before ``torch.set_default_dtype(dtype_orig)``), so a 4-bit model counts at 16 bits.
- **The factor:** ``torch.empty(byte_count // factor, dtype=torch.float16)``. Without a
  quantizer it is 2, so the block is the count; with one it is the quantizer's
  (``HfQuantizer.get_accelerator_warm_up_factor``, 4.56.2 ``quantizers/base.py`` lines
  283-292: 4; bitsandbytes does not override it), so the block is half the count.
- **The cap:** 4.51 (``transformers-4.51``): 0.95 of the free memory; 4.52 to 4.57
  (``transformers-4.52``): the free memory less 1.2 GiB, less what the cache holds unused
  (nothing, at a fresh load).

Only a 4-bit model then gets a block larger than its weights: half of its 16-bit bytes is
about twice its 4-bit ones. Its unused part stays cached in a segment the weights hold, so
training allocates from it and the reserved memory starts above the weights. An 8-bit model's
block is its weights, and a 16-bit one's too: they fill it, as the replay's own segments do,
so calc counts no block for them. transformers 5 sizes the block from each parameter's loaded
element size (5.17 ``get_total_byte_count``: ``hf_quantizer.param_element_size``, 0.5 bytes
for bitsandbytes' 4-bit) without a factor: the block is the weights there too (``none``).
4.50 alone divided no quantized count (``byte_count // 2`` of fp16): a block of the whole
16-bit count, capped at 0.95 of the free memory; calc offers no setting for that one release.

The replay (:mod:`calc.step_events`) runs the block as its first events on the card it
replays (:func:`block_bytes`). ``min_device_bytes`` does not: on the smallest card that runs
the steps the block, capped by that card, is at most the weights that load into it unless
that card exceeds twice the weights by 1.2 GiB, and the weights fill it. Checked on Unsloth's
Llama 3.1 8B QLoRA (seq_len 2048, 8192 x 2, 16384, and lengths mean 1500 / p90 3000 at 4096;
expandable segments and the default allocator): the replay with the block that card's free
memory gives runs at ``min_device_bytes`` in seven of the eight; the eighth (lengths, expandable
segments) needs 0.08 GiB (1.1 %) more, its pages laid out otherwise. With expandable
segments (the ``unsloth`` profile's) the block's replay gives ``min_device_bytes`` too: the
pages held blocks touch after the block's release are those of a load without it."""

from __future__ import annotations

from .fields import LoadWarmup, Method, Sharding
from .request import EstimateRequest
from .states import BF16_BYTES, FP32_BYTES

QUANTIZER_WARMUP_FACTOR = 4
"""``HfQuantizer.get_accelerator_warm_up_factor`` (transformers 4.56.2 ``quantizers/base.py``
lines 283-292; 4.52.4 ``get_cuda_warm_up_factor``, the same 4; 4.51.3 passes ``factor=4`` for
any quantizer, ``modeling_utils.py`` line 4793): the count is divided by 4 fp16 elements of 2
bytes, so the block is half the count. bitsandbytes' 4-bit quantizer keeps the default."""

FREE_SHARE_4_51 = 0.95
"""transformers 4.51 caps the count at ``int(0.95 * device_memory)``, the free memory
``torch.cuda.mem_get_info`` reports (4.51.3 ``modeling_utils.py`` lines 5752-5800)."""

HEADROOM_4_52_BYTES = int(1.2 * 1024**3)
"""transformers 4.52 to 4.57 cap the count at ``max(0, int(device_memory - 1.2 * 1024**3))`` of
the free memory, after transformers issue #37436 (4.52.4 ``modeling_utils.py`` lines
6002-6070; 4.56.2 lines 6154-6230)."""


def applies(req: EstimateRequest) -> bool:
    """Whether the load warms the cache with a block larger than the weights: a bitsandbytes
    4-bit model (``qlora``, the stacks that quantize through bitsandbytes) loaded onto one GPU
    per process (bitsandbytes' quantizer sets ``device_map`` to the current GPU when the loop
    gives none, ``quantizer_bnb_4bit.py`` ``update_device_map``), under a transformers
    generation that sizes it that way (``load_warmup``). Sharded loads (ZeRO-3 / FSDP
    FULL_SHARD) build the model without a device map."""
    return (
        req.load_warmup is not LoadWarmup.NONE
        and req.method is Method.QLORA
        and not req.qlora_unchunked_quantization
        and req.sharding is not Sharding.ZERO3
    )


def block_bytes(req: EstimateRequest, free_bytes: int | None) -> int:
    """The block's bytes, 0 where :func:`applies` is false. ``free_bytes``: the card's free
    memory at the load (None: a card larger than the count and its cap, the figure as on a
    large card). The count is every parameter at the load dtype's element size (16 bits, or
    fp32 where the loop loads in fp32: ``weights_loaded_16bit`` false)."""
    if not applies(req):
        return 0
    element = BF16_BYTES if req.weights_loaded_16bit else FP32_BYTES
    count = req.model.params_total * element
    if free_bytes is not None:
        if req.load_warmup is LoadWarmup.TRANSFORMERS_4_51:
            cap = int(FREE_SHARE_4_51 * free_bytes)
        else:
            cap = max(0, free_bytes - HEADROOM_4_52_BYTES)
        count = min(count, cap)
    # torch.empty(count // factor, dtype=torch.float16): 2 bytes an element
    return count // QUANTIZER_WARMUP_FACTOR * BF16_BYTES
