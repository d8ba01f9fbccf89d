"""An optimizer that updates one tensor at a time (``optimizer_per_tensor``): its ops counted by
hand, and what they do to a step the host binds."""

from __future__ import annotations

import pytest

from calc import states, timing
from calc.plan import parse_plan_request


def _req(model: str = "llama-3.2-1b", **keys):
    return parse_plan_request({"model": model, "gpu": "h100-sxm", "dataset_tokens": 1e9, **keys})


def test_per_tensor_ops_by_hand():
    # Llama 3.2 1B, LoRA r16 on q, k, v, o, gate, up, down of 16 blocks: an A and a B each
    req, _ = _req(method="lora", lora_targets="all-linear", optimizer_per_tensor=True)
    layout = states.param_layout(req)
    assert timing.optimizer_dispatch_ops(req, layout) == 8 * 16 * 7 * 2
    # full fine-tuning: the embedding (tied head), 7 matrices and 2 norms per block, the final norm
    full, _ = _req(method="full", optimizer_per_tensor=True)
    assert timing.optimizer_dispatch_ops(full, states.param_layout(full)) == 8 * (
        1 + 16 * 7 + 16 * 2 + 1
    )


@pytest.mark.parametrize(
    "keys",
    [
        {"optimizer_per_tensor": False},
        {"optimizer_per_tensor": True, "optimizer": "adafactor"},
        {"optimizer_per_tensor": True, "optimizer_in_backward": True},
    ],
)
def test_no_per_tensor_ops_where_the_path_is_another(keys):
    req, _ = _req(method="full", **keys)
    assert timing.optimizer_dispatch_ops(req, states.param_layout(req)) == 0


def test_a_short_step_pays_the_per_tensor_dispatch():
    # a small step on a fast card: the GPU finishes before the host has dispatched the loop
    # (Qwen3 0.6B: its 28 blocks of q/k norms make many small tensors for the device's work;
    # Llama 3.2 1B's step hides most of its loop behind the device since MATMUL_HALF_TOKENS 215)
    keys = dict(model="qwen3-0.6b", method="full", micro_batch_size=1, seq_len=128)
    req, opts = _req(**keys, optimizer_per_tensor=True)
    base, _ = _req(**keys)
    rates = timing.card_rates(opts.gpu, 1)
    args = dict(num_gpus=1, sharding=req.sharding, cpu_offload=req.cpu_offload, efficiency=0.68)
    c = timing.counts(req, req.sharding)
    slow = timing.step_breakdown(c, rates, **args)
    fast = timing.step_breakdown(timing.counts(base, base.sharding), rates, **args)
    dispatched = c.optimizer_ops * timing.DISPATCH_SECONDS_PER_KERNEL
    assert slow.overheads > fast.overheads
    assert slow.step_seconds - fast.step_seconds <= dispatched + 1e-12
    assert slow.step_seconds - fast.step_seconds > 0.5 * dispatched
