"""The site's reference setup: the one workload every page quotes, stated once.

The home page's summary matrix, the VRAM and cloud guides and the calculator's first view all
start from this setup, so that "how much memory, which card, how long, what cost" has one
answer across the site. It is a question, not an answer: the card and the count to rent are
what :func:`pick` derives from calc's plan for it.

Why these values:

- three current models, one per size a reader asks about: ``small`` Llama 3.1 8B (the
  calculator's first model), ``medium`` Qwen3.6 27B, ``large`` Llama 3.3 70B (presets of
  ``calc/data/models.json``). Qwen is the family most fine-tuned on Hugging Face (over
  113,000 derivative models by mid-2025 against about 27,000 for Llama, in Hugging Face's
  retrospective of February 2026 on open models since DeepSeek-R1), so the medium model is
  Qwen3.6 27B (April 2026), its current dense model at that size, the open-weight model of
  the Qwen3.6 release. Gemma 4 31B (April 2026) is the other current dense model there; a
  ranking of the last year's open models by Hugging Face downloads per day (solmaz.io,
  "Popularity rankings for open models", mid-2026) puts Qwen3.6 27B just behind its MoE
  sibling and ahead of both mid-sized Gemma 4 models. Qwen3.6 27B is a hybrid: 48 of its 64
  blocks are Gated DeltaNet linear attention (a recurrent state of fixed size per head
  instead of attention over every earlier token) and 16 gated full attention; calc counts
  both (``qwen3_5_text``) and the oracle sweep holds it at full size. The small model stays
  Llama 3.1 8B although Qwen3.5 9B is newer: the calculator opens on the small model, and a
  shared link leaves out every value equal to the first view, so a link made since the
  first release without ``model`` means Llama 3.1 8B and must keep meaning it. No family
  has released a dense model near 70B since Llama 3.3 70B, so it stays the large model. The
  guides set a mixture of experts (:data:`MOE`, Qwen3-30B-A3B) beside the three;
- ``seq_len`` 2048, micro-batch 1, no gradient accumulation, gradient checkpointing, SDPA
  attention, AdamW, LoRA rank 16 on every linear layer: the request's own defaults
  (:data:`calc.fields.FIELDS`), so a page's setup is what the CLI and the
  calculator do when told nothing;
- the training library: the HF Trainer on transformers 5 (``framework`` ``hf-trainer``, the
  request's default), what most readers run; its profile (:mod:`calc.frameworks`) sets the
  library behaviours (fused AdamW, fp32 adapters, MoE experts as 3-D tensors);
- precision per method: PyTorch AMP mixed precision (``bf16-mixed``, fp32 master weights)
  for full fine-tuning, as Hugging Face's Trainer does with ``bf16=True``; pure bf16
  (``bf16-true``, the request's default) for LoRA and QLoRA, as torchtune and LitGPT do;
- 100 M training tokens, one epoch: the matrix quotes hours per 100 M tokens, so one pass
  over 100 M tokens is the run it prices, and the calculator's default dataset;
- managed-cloud prices (``price_tier`` ``managed``): the kind of provider the catalogue
  prices both on demand and interruptible for most cards, and the calculator's default.

Standard library only (this module runs in the browser too).
"""

from __future__ import annotations

from typing import Callable

from .jsontypes import JsonObject

MODELS = {"small": "llama-3.1-8b", "medium": "qwen3.6-27b", "large": "llama-3.3-70b"}
"""Size -> model preset id, smallest first."""

LADDER = (
    "qwen3-1.7b",
    "qwen3.5-4b",
    "qwen3.5-9b",
    "gemma-3-12b",
    "ministral-3-14b",
    "mistral-small-24b",
    "qwen3.6-27b",
    "gemma-4-31b",
    "llama-3.3-70b",
)
"""The dense models the guides' card-class tables climb, smallest first: per size people
fine-tune, the newest preset of a family fine-tuned at that size. 4B and 9B: Qwen3.5 (March
2026, hybrids like the medium model); 27B and 31B: Qwen3.6 and Gemma 4 (April 2026); 14B:
Ministral 3 (December 2025). Where no newer family has a preset at the size, the older
model stays: Qwen3 1.7B (Qwen3.5's 0.8B and 2B have no preset), Gemma 3 12B, Mistral Small
3 24B (its 3.1 and 3.2 updates keep its shapes), Llama 3.3 70B. Dense only: a mixture of
experts fits by its total parameters but runs by its active ones, so the guides set it
beside the ladder."""

MOE = "qwen3-30b-a3b"
"""The mixture of experts the guides set beside the reference models and the ladder:
Qwen3-30B-A3B, the one whose expert layout both transformers 4 (one linear layer per expert)
and 5 (3-D expert tensors) load, which the VRAM guide compares under QLoRA. The newer
mixtures of experts of that size with presets, Qwen3.5-35B-A3B (February 2026) and Gemma 4
26B-A4B (April 2026), load in transformers 5 only: the last transformers 4 (4.57.6) has no
``qwen3_5_moe`` or ``gemma4`` model."""

METHODS = ("full", "lora", "qlora")

PRECISION = {"full": "bf16-mixed", "lora": "bf16-true", "qlora": "bf16-true"}
"""Precision of each method (see the module docstring)."""

SETUP: JsonObject = {
    "seq_len": 2048,
    "micro_batch_size": 1,
    "gradient_accumulation_steps": 1,
    "gradient_checkpointing": True,
    "attention": "sdpa",
    "optimizer": "adamw",
    "lora_rank": 16,
    "lora_targets": "all-linear",
    "framework": "hf-trainer",
    "dataset_tokens": 100_000_000,
    "epochs": 1,
    "price_tier": "managed",
}
"""Request keys every reference request shares (estimate keys, then the plan's run keys)."""

RUN_KEYS = ("dataset_tokens", "epochs", "price_tier")
"""The keys of :data:`SETUP` that only the plan command takes."""

VOCABULARY_PAIR = ("mistral-7b-v0.3", "llama-3.1-8b")
"""Two presets with the same decoder body (hidden 4096, 32 layers, MLP 14336, 8 KV heads)
and different vocabularies (32,768 vs 128,256 tokens): what the vocabulary alone costs in
memory (logits and loss), the reason an "8B" can need a larger card than a "7B"."""

OFFLOAD_CARD = "h100-sxm"
"""The 80 GB card the full fine-tuning of the large model is sized on, sharded (ZeRO-3) and
with the optimizer states offloaded to the CPU: the H100 SXM, the usual unit of multi-node
training clusters."""

LONG_CONTEXT: JsonObject = {"seq_len": 131_072, "attention": "flash"}
"""The guides' one long-sequence example, the only plan they quote away from :data:`SETUP`'s
length and attention: 131,072 tokens (the small model's context, Llama 3.1's
``max_position_embeddings``) with flash attention, which sequence parallelism runs on (XTuner
requires it; DeepSpeed's Ulysses for Hugging Face models takes flash attention or SDPA)."""

PLAN_GPU = "h100-sxm"
"""The ``gpu`` of a request that reads only what does not depend on the chosen card (the
catalogue-wide fits and recommendations)."""


def estimate_setup(method: str) -> JsonObject:
    """The estimate keys of the reference setup for ``method`` (no model)."""
    out = {k: v for k, v in SETUP.items() if k not in RUN_KEYS}
    out["method"] = method
    out["precision"] = PRECISION[method]
    return out


def request(model: str, method: str, **changes: object) -> JsonObject:
    """The reference plan request of ``model`` x ``method`` (``gpu`` = :data:`PLAN_GPU`
    unless ``changes`` name one); ``changes`` override any key."""
    out = {
        "model": model,
        **estimate_setup(method),
        **{k: SETUP[k] for k in RUN_KEYS},
        "gpu": PLAN_GPU,
    }
    out.update(changes)
    return out


def priced_both_ways(gpu_id: str, tier: str) -> bool:
    """The catalogue prices ``gpu_id`` at ``tier`` both on demand and interruptible, so the
    two costs of one configuration are like for like (same card, same kind of provider)."""
    from . import gpus

    kinds = {p.interruptible for p in gpus.prices_for(gpu_id) if p.tier == tier}
    return kinds == {False, True}


def pick(plan: JsonObject, tier: str | None = None) -> JsonObject | None:
    """The configuration to rent for a reference plan: among ``plan["recommendations"]
    ["configs"]`` (every card, count and sharding that fits), those on a card priced at
    ``tier`` both on demand and interruptible and with no warning of their own (no ROCm
    caveat, no price from another rate or kind of provider), the smallest in total marketed
    memory, then the cheaper on demand, then the faster. "Smallest" follows the seed's advice
    and the VRAM guide's rule: start with the least memory that fits, move up only when
    time is the bottleneck. ``None`` when no configuration qualifies."""
    from . import gpus

    wanted = str(tier or SETUP["price_tier"])
    candidates: list[JsonObject] = [
        c
        for c in plan["recommendations"]["configs"]
        if not c["warnings"] and priced_both_ways(c["gpu"], wanted)
    ]
    if not candidates:
        return None
    return min(
        candidates,
        key=lambda c: (
            c["num_gpus"] * gpus.get_gpu(c["gpu"]).memory_gb_marketed,
            c["cost_usd"],
            c["time_hours"],
            c["id"],
        ),
    )


def config_request(model: str, method: str, config: JsonObject, **changes: object) -> JsonObject:
    """The plan request of ``model`` x ``method`` on a picked configuration (its card,
    count and sharding): what the matrix cell's figures and calculator link are."""
    return request(
        model,
        method,
        gpu=config["gpu"],
        num_gpus=config["num_gpus"],
        sharding=config["sharding"],
        **changes,
    )


def smallest_count(
    plan_fn: Callable[[JsonObject], JsonObject],
    model: str,
    method: str,
    gpu: str,
    sharding: str,
    counts: tuple[int, ...],
    **changes: object,
) -> int | None:
    """Fewest of ``counts`` GPUs of ``gpu`` on which ``model`` x ``method`` fits with
    ``sharding`` (``plan_fn`` is ``calc.plan_setup``): the answer to "how many 80 GB cards"."""
    for n in counts:
        req = request(
            model, method, gpu=gpu, num_gpus=n, sharding=sharding if n > 1 else "none", **changes
        )
        if plan_fn(req)["fits_selected_gpu"]:
            return n
    return None


__all__ = [
    "LADDER",
    "METHODS",
    "MODELS",
    "MOE",
    "OFFLOAD_CARD",
    "PLAN_GPU",
    "PRECISION",
    "RUN_KEYS",
    "SETUP",
    "VOCABULARY_PAIR",
    "config_request",
    "estimate_setup",
    "pick",
    "priced_both_ways",
    "request",
    "smallest_count",
]
