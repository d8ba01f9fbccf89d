"""What a decoder block's element-wise ops move per token, forward and backward, traced beside
calc's count of it (``calc.timing._counts``, whose backward is ``block_backward_bytes``).

Usage: ``python tools/count_block_traffic.py [--attention=eager] [--lora=REGIME] [PRESET ...]``
(default :data:`PRESETS`), on the CPU; ``--attention=eager`` traces transformers' eager attention
instead of SDPA (its materialised scores counted on both sides); ``--lora=REGIME`` traces peft's
LoRA on the frozen stack in a regime of ``tools/count_lora_traffic.py`` (``16bit``, ``fp32``,
``autocast``: TRL's, ``amp``) beside calc's LoRA request; ``--norms`` prints the RMSNorm
modules' own backward instead. Needs torch and transformers
(``tools/requirements-oracle-transformers5.txt``).

For a preset's stack (its sizing widths shrunk as in ``tools/count_eager_ops.py``, every
parameter trained, bf16, SDPA, no autocast) it counts the bytes the element-wise ops read and
write in one training forward (with the loss) and one backward
(``tools/count_amp_traffic.count_step``), per block and token (the double difference over
stacks of one and two periods and two lengths). calc's figure is the same double difference of
its element-wise bytes per token for the same stack (full fine-tuning, ``bf16-true``). The
CPU's SDPA, like the CUDA fused kernels (``calc.timing.ATTENTION_OUTPUT_COPY_BYTES``), takes q,
k and v as the strided views transformers hands it and writes its output token-major, so no
copy runs around it either way.

How the per-part constants were read: the stack's bytes change by the part's count per element
when one width changes (the MLP's inner width: the gated activation; q apart from k/v: the
rotary embedding and the attention copies), and the norms' by a trace of the module alone
(:func:`norm_backward`, weight trained and frozen).
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
from tools.count_lora_traffic import REGIMES, lora_keys, with_lora  # noqa: E402

PRESETS = ("llama-2-7b", "qwen3-0.6b", "gemma-3-1b", "phi-3-mini")

NORMS = {
    "llama": "transformers.models.llama.modeling_llama.LlamaRMSNorm",
    "fp32_scale": "transformers.models.gemma3.modeling_gemma3.Gemma3RMSNorm",
    "layer": "torch.nn.LayerNorm",
}
"""The RMSNorm of each kind ``calc.timing.NORM_BACKWARD_BYTES_PER_ELEMENT`` names."""


def trace(
    config: dict, layers: int, tokens: int, attention: str = "sdpa", lora: str | None = None
) -> tuple[int, int]:
    """Element-wise bytes of one forward (with the loss) and one backward of the stack,
    ``attention`` as transformers names it: every parameter trained, bf16, no autocast; or with
    ``lora`` (a regime of ``tools/count_lora_traffic.REGIMES``) peft's LoRA on the frozen stack
    (rank 8, every linear, no dropout), its weights, adapters and autocast as the regime says."""
    import torch

    if lora is None:
        model, cfg = build_stack(config, layers, torch.bfloat16, attention)
        autocast = False
    else:
        fp32_weights, autocast, _ = REGIMES[lora]
        dtype = torch.float32 if fp32_weights else torch.bfloat16
        model, cfg = build_stack(config, layers, dtype, attention)
        model = with_lora(model, lora)
    counted = count_step(model, torch.randint(0, cfg.vocab_size, (1, tokens)), autocast)
    return counted[2], counted[3]


def traced(config: dict, attention: str = "sdpa", lora: str | None = None) -> tuple[float, float]:
    """The block's element-wise bytes per token, ``(forward, backward)``."""
    p = period(config)
    t = {(n, s): trace(config, n, s, attention, lora) for n in (p, 2 * p) for s in TOKENS}
    return (
        per_block_and_token(lambda n, s: t[n, s][0], p),
        per_block_and_token(lambda n, s: t[n, s][1], p),
    )


def calc_request(
    config: dict, layers: int, tokens: int, attention: str = "sdpa", lora: str | None = None
) -> Any:
    """calc's request for the traced stack: full fine-tuning, bf16 weights without autocast; or
    LoRA in the ``lora`` regime (as ``tools/count_lora_traffic.calc_request`` reads it)."""
    from calc.request import parse_estimate_request

    body: dict[str, Any] = {
        "model": {"hf_config": traced_config(config, layers)},
        "method": "full",
        "precision": "bf16-true",
        "weights_loaded_16bit": True,
        "gradient_checkpointing": False,
        "attention": attention,
        "framework": calc_framework(),
        "micro_batch_size": 1,
        "seq_len": tokens,
    }
    if lora is not None:
        body.update(lora_keys(lora))
    return parse_estimate_request(body)


CUDA_CAPABILITY = (8, 0)
"""The card whose dispatch calc's score bytes are read for (an A100): eager attention
materialises its scores on every CUDA card, and its bf16 and fp32 passes are the ones the CPU
runs (``calc.timing.SCORE_BYTES_PER_ELEMENT``)."""


SCORE_MATMUL_BYTES = {"forward": 4, "backward": 8}
"""What calc's eager score bytes (``calc.timing.SCORE_BYTES_PER_ELEMENT``, bf16) hold that the
trace prices apart with the matmuls: QK^T's write and AV's read of the scores forward (2 + 2);
dP's write, dQ's and dK's reads of dS and dV's read of P backward (2 + 2 + 2 + 2)."""


def seen_score_share(attention: str) -> tuple[float, float]:
    """The shares of calc's score bytes per element, (forward, backward), that an op trace sees:
    without the score matmuls' own reads and writes (:data:`SCORE_MATMUL_BYTES`) and the mask's
    per-head reads (``calc.timing.MASK_READS``: a CPU trace counts a broadcast mask's storage
    once, a CUDA kernel reads it for every head)."""
    from calc import attention as attn
    from calc import timing

    if attention != "eager":
        return 1.0, 1.0
    shares = []
    for way in ("forward", "backward"):
        total = timing.SCORE_BYTES_PER_ELEMENT[attn.EAGER, way]
        mask = 2 * timing.MASK_READS["materialised", way]
        shares.append((total - SCORE_MATMUL_BYTES[way]) / (total + mask))
    return shares[0], shares[1]


def calc_total(config: dict, attention: str = "sdpa", lora: str | None = None) -> float:
    """calc's element-wise bytes per block and token, forward and backward, with the share of
    the materialised scores' passes that an op trace sees (:func:`seen_score_share`; eager
    attention's, none under SDPA's fused kernels)."""
    from calc import timing

    seen = seen_score_share(attention)

    def moved(layers: int, tokens: int) -> float:
        req = calc_request(config, layers, tokens, attention, lora)
        counts = timing._counts(req, req.sharding, None)
        fwd, bwd = timing.score_bytes_per_token(counts, CUDA_CAPABILITY)
        scores = fwd * seen[0] + bwd * seen[1]
        return (counts.elementwise_bytes_per_token + scores) * tokens

    return per_block_and_token(moved, period(config))


def row(preset: str, attention: str = "sdpa", lora: str | None = None) -> dict[str, Any]:
    """The traced and counted bytes of one preset's block."""
    from calc.presets import preset_row

    config = preset_row(preset)["config"]
    forward, backward = traced(config, attention, lora)
    return {
        "preset": preset,
        "traced_forward": forward,
        "traced_backward": backward,
        "traced_total": forward + backward,
        "calc_total": calc_total(config, attention, lora),
    }


def norm_backward(kind: str, trained: bool, width: int = 512, tokens: int = 64) -> float:
    """Bytes the ``kind`` RMSNorm's backward moves per element of its input (bf16), its
    weight ``trained`` or frozen."""
    import importlib

    import torch

    from tools.count_amp_traffic import traffic_counter

    module_path, _, name = NORMS[kind].rpartition(".")
    norm = getattr(importlib.import_module(module_path), name)(width).to(torch.bfloat16)
    norm.weight.requires_grad_(trained)
    x = torch.randn(tokens, width, dtype=torch.bfloat16, requires_grad=True)
    y = norm(x)
    grad = torch.ones_like(y)  # made outside the count
    counter = traffic_counter()
    with counter:
        y.backward(grad)
    return counter.bytes / (tokens * width)


def activation_backward(name: str, width: int = 512, tokens: int = 64) -> float:
    """Bytes the backward of transformers' activation ``name`` (``ACT2FN``) moves per element,
    bf16."""
    import torch
    from transformers.activations import ACT2FN

    from tools.count_amp_traffic import traffic_counter

    x = torch.randn(tokens, width, dtype=torch.bfloat16, requires_grad=True)
    y = ACT2FN[name](x)
    grad = torch.ones_like(y)  # made outside the count
    counter = traffic_counter()
    with counter:
        y.backward(grad)
    return counter.bytes / (tokens * width)


def main(argv: list[str]) -> int:
    if "--norms" in argv:
        from calc import timing

        for kind in NORMS:
            for trained in (False, True):
                weight = "trained" if trained else "frozen"
                print(
                    f"{kind:<11} {weight:<8} traced {norm_backward(kind, trained):6.1f}"
                    f"  calc {timing.NORM_BACKWARD_BYTES_PER_ELEMENT[kind, weight]:4d}"
                )
        return 0
    attention = "eager" if "--attention=eager" in argv else "sdpa"
    lora = next((a.split("=", 1)[1] for a in argv if a.startswith("--lora=")), None)
    if lora is not None and lora not in REGIMES:
        print(f"--lora: one of {', '.join(REGIMES)}", file=sys.stderr)
        return 2
    presets = [a for a in argv if not a.startswith("--")] or list(PRESETS)
    print(f"{'preset':<14} {'traced fwd':>11} {'traced bwd':>11} {'traced':>11} {'calc':>11}")
    for preset in presets:
        r = row(preset, attention, lora)
        print(
            f"{preset:<14} {r['traced_forward']:>11.0f} {r['traced_backward']:>11.0f}"
            f" {r['traced_total']:>11.0f} {r['calc_total']:>11.0f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
