"""What autocast over fp32 weights adds to a decoder block's element-wise work: the trace behind
``calc.amp_traffic``.

``python tools/count_amp_traffic.py [MODEL_TYPE ...] [--json]`` (needs torch and transformers:
``tools/requirements-oracle-transformers5.txt``). For one preset of each family that
``tools/count_eager_ops.py`` traces, it builds the stack twice on the CPU: in bf16 with no
autocast (what calc's element-wise tables describe), and in fp32 under
``torch.autocast("cpu", torch.bfloat16)`` (calc's ``mixed-amp`` regime: ``*-mixed`` on fp32
weights without ZeRO). CPU autocast casts the same ops to bf16 as CUDA autocast for what a block
runs: ``linear`` and ``scaled_dot_product_attention`` (torch 2.13
``aten/src/ATen/autocast_mode.cpp``, both lists); a norm's ``pow`` and ``rsqrt`` already get
fp32 inputs.

For each, it counts the kernel-launching aten ops of one forward (with the loss) and one
backward, and the bytes those ops read and write, matmuls and attention left out (calc prices
those by FLOPs): each tensor argument's elements times its element size (a broadcast input,
whose storage is smaller, by its storage), and each output's. The per-token, per-block figure is
a double difference: stacks of one and two periods of the layer pattern, at 32 and 64 tokens;
what a weight costs once (autocast's weight copies, the fp32 gradients' casts) and what the
embedding, head and loss cost drop out.

The table prints, per family, the extra ops and the extra bytes per token the amp stack's block
runs over the bf16 one, forward and backward, beside calc's count of the same
(``calc.amp_traffic.amp_stream_bytes_per_token`` and ``amp_block_extra_ops``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tools.count_eager_ops import (  # noqa: E402
    NO_KERNEL,
    SEQ_LEN,
    build_stack,
    fp32_matmuls,
    family_table,
    print_family_table,
    period,
    traced_config,
)

PRICED_APART = frozenset(
    {
        "addmm",
        "mm",
        "bmm",
        "matmul",
        "linear",
        "baddbmm",
        "_grouped_mm",
        "grouped_mm",
        "_scaled_dot_product_flash_attention_for_cpu",
        "_scaled_dot_product_flash_attention_for_cpu_backward",
        "_scaled_dot_product_efficient_attention",
        "_scaled_dot_product_efficient_attention_backward",
        "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_flash_attention_backward",
        "scaled_dot_product_attention",
    }
)
"""Ops calc prices by their FLOPs (the linears' matmuls, the routed experts' grouped matmuls,
the attention kernel): not element-wise."""

TOKENS = (32, 64)


SHAPED_LIKE = frozenset(
    {
        "new_zeros",
        "new_ones",
        "new_full",
        "new_empty",
        "zeros_like",
        "ones_like",
        "full_like",
        "empty_like",
    }
)
"""Ops that write a new tensor and read nothing of the one they are called on (autograd's
``index`` and ``repeat`` backwards start from ``grad.new_zeros(...)``): their output counts,
their input does not."""


def traffic_counter(weight_shapes: frozenset[tuple[int, ...]] = frozenset()) -> Any:
    """A ``TorchDispatchMode`` that counts kernel-launching ops (``.ops``) and the bytes the
    element-wise ones read and write (``.bytes``). Casts of a tensor shaped as a weight
    (``weight_shapes``: autocast's weight copies, the fp32 weight gradients' casts) are left
    out of ``.ops``: calc counts them per weight (``AUTOCAST_WEIGHT_CAST_BYTES``)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    def size(t: Any) -> int:
        if not isinstance(t, torch.Tensor):
            return 0
        full = t.numel() * t.element_size()
        try:
            return min(full, t.untyped_storage().nbytes())
        except (RuntimeError, NotImplementedError):
            return full

    def flat(x: Any) -> list[Any]:
        if isinstance(x, (list, tuple)):
            return [y for item in x for y in flat(item)]
        return [x]

    class Traffic(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.ops = 0
            self.bytes = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            out = func(*args, **(kwargs or {}))
            name = func.overloadpacket.__name__
            if name in NO_KERNEL:
                return out
            weight_cast = (
                name == "_to_copy"
                and isinstance(args[0], torch.Tensor)
                and (tuple(args[0].shape) in weight_shapes)
            )
            self.ops += 0 if weight_cast else 1
            if name not in PRICED_APART:
                inputs = flat(list(args)) + flat(list((kwargs or {}).values()))
                if name in SHAPED_LIKE:
                    inputs = []  # the tensor passed only lends its dtype and device
                self.bytes += sum(size(t) for t in inputs) + sum(size(t) for t in flat(out))
            return out

    return Traffic()


def trace(
    config: dict, layers: int, tokens: int, amp: bool, lora: bool = False, qlora: bool = False
) -> tuple[int, int, int, int]:
    """Ops and element-wise bytes of one forward (with the loss) and one backward: ``(forward
    ops, backward ops, forward bytes, backward bytes)``. ``amp``: fp32 weights under bf16
    autocast, else bf16 weights without it. ``lora``: peft 0.21's LoRA (rank 8, every linear,
    no dropout) with fp32 adapters (``get_peft_model``'s default ``autocast_adapter_dtype``)."""
    import torch

    model, cfg = build_stack(config, layers, torch.float32 if amp else torch.bfloat16)
    if lora or qlora:
        from peft import LoraConfig, get_peft_model

        adapters = LoraConfig(r=8, target_modules="all-linear", lora_dropout=0.0)
        if qlora:
            # the oracle's stand-in for bitsandbytes' Linear4bit (its casts and buffers, not
            # its kernels) and peft's LoRA layer for it
            from tools.oracle.qlora import Linear4bitModel, lora_layer_class, quantize_linears

            quantize_linears(model, True, torch.uint8)
            adapters._register_custom_module({Linear4bitModel: lora_layer_class()})
        model = get_peft_model(model, adapters, autocast_adapter_dtype=True)
    return count_step(model, torch.randint(0, cfg.vocab_size, (1, tokens)), amp)


def count_step(model: Any, ids: Any, autocast: bool) -> tuple[int, int, int, int]:
    """:func:`traffic_counter` over one training forward (with the loss) and backward of
    ``model`` on ``ids``, after one that is not counted (lazy inits), under bf16 autocast or
    not: ``(forward ops, backward ops, forward bytes, backward bytes)``."""
    import contextlib

    import torch

    model.train()

    def region() -> Any:
        if autocast:
            return torch.autocast("cpu", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    with fp32_matmuls():
        with region():
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()  # warm-up: lazy inits off the count
        model.zero_grad(set_to_none=True)
        shapes = frozenset(tuple(p.shape) for p in model.parameters())
        forward, backward = traffic_counter(shapes), traffic_counter(shapes)
        with forward, region():
            loss = model(input_ids=ids, labels=ids).loss
        with backward:
            loss.backward()
    return forward.ops, backward.ops, forward.bytes, backward.bytes


def per_block_and_token(moved: Any, p: int) -> float:
    """What a block adds per token: ``moved(layers, tokens)`` over stacks of one and two periods
    of ``p`` blocks, at the two lengths of :data:`TOKENS` (what a weight or the embedding, head
    and loss cost once drops out)."""
    short, long = TOKENS
    d = (moved(2 * p, long) - moved(p, long)) - (moved(2 * p, short) - moved(p, short))
    return d / (p * (long - short))


def per_block(config: dict, amp: bool, lora: bool = False, qlora: bool = False) -> dict[str, float]:
    """Ops per block (the layer difference at the shorter length) and element-wise bytes per
    block per token (:func:`per_block_and_token`), forward and backward."""
    p = period(config)
    short, long = TOKENS
    t = {(n, s): trace(config, n, s, amp, lora, qlora) for n in (p, 2 * p) for s in (short, long)}
    return {
        "ops_forward": (t[2 * p, short][0] - t[p, short][0]) / p,
        "ops_backward": (t[2 * p, short][1] - t[p, short][1]) / p,
        "bytes_forward": per_block_and_token(lambda n, s: t[n, s][2], p),
        "bytes_backward": per_block_and_token(lambda n, s: t[n, s][3], p),
    }


def traced_delta(config: dict, lora: bool = False, qlora: bool = False) -> dict[str, float]:
    """:func:`per_block` of the autocast stack less that of the bf16 one."""
    bf16 = per_block(config, False, lora, qlora)
    amp = per_block(config, True, lora, qlora)
    return {k: amp[k] - bf16[k] for k in amp}


def calc_figures(config: dict) -> dict[str, float]:
    """calc's count of what the amp block adds, on the traced stack's widths."""
    from calc import amp_traffic
    from tools.count_eager_ops import calc_request

    arch = calc_request(config, period(config)).model
    forward, backward = amp_traffic.amp_stream_bytes_per_token(arch)
    ops_f, ops_b = amp_traffic.amp_block_extra_ops(arch)
    head = amp_traffic.CAST_BYTES_PER_ELEMENT * arch.hidden_size  # once, not per block
    return {
        "ops_forward": ops_f,
        "ops_backward": ops_b,
        "bytes_forward": (forward - head) / arch.num_layers,
        "bytes_backward": (backward - head) / arch.num_layers,
    }


def adapter_request(config: dict, layers: int, tokens: int, amp: bool, method: str) -> Any:
    """calc's request for the traced stack with peft's fp32 adapters on every linear: ``amp``
    ``bf16-mixed`` on fp32 weights (QLoRA: prepared by peft), else ``bf16-true`` on bf16."""
    from calc.request import parse_estimate_request
    from tools.count_eager_ops import calc_framework

    return parse_estimate_request(
        {
            "model": {"hf_config": traced_config(config, layers)},
            "method": method,
            "lora_targets": "all-linear",
            "lora_adapter_dtype": "fp32",
            "lora_dropout": 0.0,
            "precision": "bf16-mixed" if amp else "bf16-true",
            "qlora_prepare_kbit": amp and method == "qlora",
            "weights_loaded_16bit": not amp,
            "gradient_checkpointing": False,
            "attention": "sdpa",
            "framework": calc_framework(),
            "micro_batch_size": 1,
            "seq_len": tokens,
        }
    )


def calc_lora_forward(config: dict) -> float:
    """calc's extra forward bytes per block and token with fp32 adapters under autocast on fp32
    weights: the stream's (:func:`calc_figures`) and the change of peft's path
    (``calc.timing.peft_path_bytes``: 16-bit branch, autocast's input casts)."""
    from calc import amp_traffic, states, timing

    layers = period(config)
    paths = []
    for amp in (False, True):
        req = adapter_request(config, layers, SEQ_LEN, amp, "lora")
        readers = amp_traffic.reader_names(req.model) if amp else frozenset()
        paths.append(timing.peft_path_bytes(req, states.adapted(req), readers))
    return calc_figures(config)["bytes_forward"] + (paths[1] - paths[0]) / layers


def lora_row(preset: str) -> dict[str, Any]:
    """The traced extra forward bytes per block and token with fp32 LoRA adapters, beside
    calc's."""
    from calc.presets import preset_row

    config = preset_row(preset)["config"]
    return {
        "preset": preset,
        "traced_forward": round(traced_delta(config, lora=True)["bytes_forward"], 1),
        "calc_forward": calc_lora_forward(config),
    }


def calc_qlora_total(config: dict) -> float:
    """calc's extra element-wise bytes per block and token, forward and backward, of QLoRA on
    the fp32 stream against QLoRA on bf16: the same double difference over blocks and lengths,
    on its counts."""
    from calc import timing

    def moved(amp: bool) -> Any:
        def at(layers: int, tokens: int) -> float:
            req = adapter_request(config, layers, tokens, amp, "qlora")
            counts = timing._counts(req, req.sharding, None)
            return counts.elementwise_bytes_per_token * tokens

        return at

    p = period(config)
    return per_block_and_token(moved(True), p) - per_block_and_token(moved(False), p)


def qlora_row(preset: str) -> dict[str, Any]:
    """The traced extra bytes per block and token of QLoRA on the fp32 stream (the oracle's
    stand-in of bitsandbytes' ``Linear4bit``), forward and backward, and calc's total."""
    from calc.presets import preset_row

    config = preset_row(preset)["config"]
    traced = traced_delta(config, qlora=True)
    return {
        "preset": preset,
        "traced": traced,
        "traced_total": traced["bytes_forward"] + traced["bytes_backward"],
        "calc_total": calc_qlora_total(config),
    }


def family_row(preset: str) -> dict[str, Any]:
    from calc.presets import preset_row

    config = preset_row(preset)["config"]
    traced = {k: round(v, 1) for k, v in traced_delta(config).items()}
    return {"preset": preset, "traced": traced, "calc": calc_figures(config)}


def main(argv: list[str]) -> int:
    import torch
    import transformers

    as_json = "--json" in argv
    wanted = [a for a in argv if not a.startswith("--")]
    adapters = {"--qlora": qlora_row, "--lora": lora_row}
    for flag, row in adapters.items():
        if flag in argv:
            print(json.dumps(family_table(wanted, row), indent=1, sort_keys=True))
            return 0
    table = family_table(wanted, family_row)
    versions = {"torch": torch.__version__, "transformers": transformers.__version__}
    if as_json:
        print(json.dumps({"versions": versions, "families": table}, indent=1, sort_keys=True))
        return 0
    print(f"torch {versions['torch']}, transformers {versions['transformers']}")
    print("extra per block under autocast on fp32 weights: traced | calc")
    print_family_table(table, _line)
    return 0


def _line(row: dict[str, Any]) -> str:
    tr, ca = row["traced"], row["calc"]
    return (
        f"ops fwd {tr['ops_forward']:5.1f} | {ca['ops_forward']:5.1f}  "
        f"bwd {tr['ops_backward']:5.1f} | {ca['ops_backward']:5.1f}  "
        f"bytes/token fwd {tr['bytes_forward']:8.0f} | {ca['bytes_forward']:8.0f}  "
        f"bwd {tr['bytes_backward']:8.0f} | {ca['bytes_backward']:8.0f}"
    )


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
