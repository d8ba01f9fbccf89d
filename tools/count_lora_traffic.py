"""What peft's LoRA path moves per block and token, forward and backward, traced beside calc's
count of it (``calc.timing.peft_path_bytes`` and ``peft_path_backward_bytes``).

Usage: ``python tools/count_lora_traffic.py [PRESET ...]`` (default: Llama-2-7B and Qwen3-0.6B),
one line per preset and regime, on the CPU. Needs torch, transformers and peft
(``tools/requirements-measure.txt``).

For a preset's block (its sizing widths shrunk as in ``tools/count_eager_ops.py``) it traces,
under a ``TorchDispatchMode``, the bytes the element-wise ops read and write in one training
forward (with the loss) and one backward of two stacks:

- peft 0.21's LoRA (rank 8, every linear, no dropout) on the frozen stack;
- the same stack with only its weight matrices trained (no adapters; the norms' and biases'
  vectors frozen, as under LoRA): what LoRA's frozen linears cost apart from the adapters (their
  weight gradients are matmuls and casts per weight, which the counts leave out).

The difference, over stacks of one and two periods of blocks and two lengths (what the embedding,
head and loss cost once drops out, ``tools/count_amp_traffic.per_block_and_token``), is the
adapters' own element-wise traffic per block and token. Four regimes, each a calc request:

- ``16bit``: bf16 weights, adapters in bf16 (``lora_adapter_dtype`` ``base``), no autocast;
- ``fp32``: bf16 weights, fp32 adapters (peft's default), no autocast (``bf16-true``);
- ``autocast``: bf16 weights, fp32 adapters, bf16 autocast (``bf16-mixed`` on 16-bit weights:
  TRL and the Trainer with ``bf16=True``);
- ``amp``: fp32 weights, fp32 adapters, bf16 autocast (``bf16-mixed``: the fp32 residual stream).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tools.count_amp_traffic import TOKENS, count_step, per_block_and_token  # noqa: E402
from tools.count_eager_ops import build_stack, calc_framework, period, traced_config  # noqa: E402

REGIMES = {
    # name: (fp32 weights, autocast, fp32 adapters)
    "16bit": (False, False, False),
    "fp32": (False, False, True),
    "autocast": (False, True, True),
    "amp": (True, True, True),
}
"""The traced regimes: whether the weights are fp32, whether the step runs under bf16 autocast,
and whether the adapters are fp32."""

PRESETS = ("llama-2-7b", "qwen3-0.6b")


def with_lora(model: Any, regime: str) -> Any:
    """peft's LoRA (rank 8, every linear, no dropout) on ``model``, its adapters in fp32 or in
    the weights' dtype as ``regime`` says."""
    from peft import LoraConfig, get_peft_model

    adapters = LoraConfig(r=8, target_modules="all-linear", lora_dropout=0.0)
    return get_peft_model(model, adapters, autocast_adapter_dtype=REGIMES[regime][2])


def lora_keys(regime: str) -> dict[str, Any]:
    """calc's request keys for :func:`with_lora`'s stack in ``regime``."""
    fp32_weights, autocast, fp32_adapters = REGIMES[regime]
    return {
        "method": "lora",
        "lora_targets": "all-linear",
        "lora_rank": 8,
        "lora_adapter_dtype": "fp32" if fp32_adapters else "base",
        "lora_dropout": 0.0,
        "precision": "bf16-mixed" if autocast else "bf16-true",
        "weights_loaded_16bit": not fp32_weights,
    }


def trace(config: dict, layers: int, tokens: int, regime: str, lora: bool) -> tuple[int, int]:
    """Element-wise bytes of one forward and one backward: peft's LoRA on the frozen stack
    (``lora``), else the stack with only its weight matrices trained."""
    import torch

    fp32_weights, autocast, _ = REGIMES[regime]
    model, cfg = build_stack(config, layers, torch.float32 if fp32_weights else torch.bfloat16)
    if lora:
        model = with_lora(model, regime)
    else:
        for p in model.parameters():
            # the matrices (linears, GPT-2's Conv1D, the embedding and head, whose cost is
            # once per stack), not the norms' and biases' vectors, frozen under LoRA too
            p.requires_grad_(p.dim() == 2)
    counted = count_step(model, torch.randint(0, cfg.vocab_size, (1, tokens)), autocast)
    return counted[2], counted[3]


def traced(config: dict, regime: str) -> tuple[float, float]:
    """The adapters' element-wise bytes per block and token, ``(forward, backward)``."""
    p = period(config)
    t = {
        (lora, n, s): trace(config, n, s, regime, lora)
        for lora in (True, False)
        for n in (p, 2 * p)
        for s in TOKENS
    }

    def adapters(direction: int) -> float:
        def moved(lora: bool) -> float:
            return per_block_and_token(lambda n, s: t[lora, n, s][direction], p)

        return moved(True) - moved(False)

    return adapters(0), adapters(1)


def calc_request(config: dict, regime: str) -> Any:
    """calc's request for the traced stack of one period in ``regime`` (see :data:`REGIMES`)."""
    from calc.request import parse_estimate_request

    return parse_estimate_request(
        {
            "model": {"hf_config": traced_config(config, period(config))},
            **lora_keys(regime),
            "gradient_checkpointing": False,
            "attention": "sdpa",
            "framework": calc_framework(),
            "micro_batch_size": 1,
            "seq_len": TOKENS[0],
        }
    )


def calc_counts(config: dict, regime: str) -> tuple[float, float]:
    """calc's count of the same, per block and token: ``(forward, backward)``."""
    from calc import amp_traffic, states, timing

    req = calc_request(config, regime)
    readers = (
        amp_traffic.reader_names(req.model)
        if timing.fp32_stream_counted(req, req.sharding, False)
        else frozenset()
    )
    adapted = states.adapted(req)
    blocks = req.model.num_layers
    return (
        timing.peft_path_bytes(req, adapted, readers) / blocks,
        timing.peft_path_backward_bytes(req, adapted, readers) / blocks,
    )


def row(preset: str, regime: str) -> dict[str, Any]:
    """The traced and counted bytes of one preset's block in one regime."""
    from calc.presets import preset_row

    config = preset_row(preset)["config"]
    forward, backward = traced(config, regime)
    counted = calc_counts(config, regime)
    return {
        "preset": preset,
        "regime": regime,
        "traced_forward": forward,
        "traced_backward": backward,
        "calc_forward": counted[0],
        "calc_backward": counted[1],
    }


def main(argv: list[str]) -> int:
    presets = argv or list(PRESETS)
    print(
        f"{'preset':<14} {'regime':<9} {'traced fwd':>11} {'calc fwd':>11} {'traced bwd':>11} {'calc bwd':>11}"
    )
    for preset in presets:
        for regime in REGIMES:
            r = row(preset, regime)
            print(
                f"{preset:<14} {regime:<9} {r['traced_forward']:>11.0f} {r['calc_forward']:>11.0f}"
                f" {r['traced_backward']:>11.0f} {r['calc_backward']:>11.0f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
