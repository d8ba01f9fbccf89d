"""Host seconds per module call of DeepSpeed ZeRO-3's hooks, the figure behind
``calc.timing.ZERO3_HOOK_SECONDS_PER_MODULE``.

``DS_ACCELERATOR=cpu python -m benchmarks.measure_zero3_hooks [plain|zero3|leaf] [EXPERTS]``
(needs torch and ``deepspeed==0.16.9``, which is no dependency of the project: install it
into a scratch virtual environment with ``DS_BUILD_OPS=0 pip install --no-deps
deepspeed==0.16.9 hjson py-cpuinfo msgpack einops ninja`` beside torch and pydantic). One
rank, DeepSpeed's CPU accelerator, gloo: the hooks' Python work without a GPU.

The model copies transformers 4.52's ``Qwen3MoeSparseMoeBlock`` (one ``nn.Linear`` per expert
matrix, a loop over every expert with ``torch.where`` on the routing mask) at small widths,
two blocks, each recomputed in backward (``torch.utils.checkpoint``, as gradient
checkpointing), with ms-swift's ``zero3.json`` settings as the HF Trainer fills them
(``overlap_comm`` false, prefetch bucket 0.9 h^2, persistence threshold 10 h, reduce bucket
h^2, live parameters and reuse distance 1e9). ``plain`` runs it without DeepSpeed; ``leaf``
marks the MoE block a ZeRO-3 leaf module (``set_z3_leaf_modules``). It prints the mean
process CPU seconds of a step after two warm-up steps; the difference zero3 - plain over the
module calls of a step (three passes: forward, recomputation, backward) is the per-call cost.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable

os.environ.setdefault("DS_ACCELERATOR", "cpu")
for key, value in {
    "MASTER_ADDR": "127.0.0.1",
    "MASTER_PORT": "29517",
    "RANK": "0",
    "WORLD_SIZE": "1",
    "LOCAL_RANK": "0",
}.items():
    os.environ.setdefault(key, value)

import deepspeed  # type: ignore[import-not-found]  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import torch.utils.checkpoint as checkpoint  # noqa: E402
from torch import nn  # noqa: E402

HIDDEN, WIDTH, TOP_K, BLOCKS, TOKENS = 256, 96, 8, 2, 64


class ExpertMLP(nn.Module):
    """transformers 4.52 ``Qwen3MoeMLP``: three linears and an activation module."""

    def __init__(self) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(HIDDEN, WIDTH, bias=False)
        self.up_proj = nn.Linear(HIDDEN, WIDTH, bias=False)
        self.down_proj = nn.Linear(WIDTH, HIDDEN, bias=False)
        self.act_fn = nn.SiLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class SparseMoe(nn.Module):
    """transformers 4.52 ``Qwen3MoeSparseMoeBlock.forward``: every expert, one by one."""

    def __init__(self, experts: int) -> None:
        super().__init__()
        self.num_experts = experts
        self.gate = nn.Linear(HIDDEN, experts, bias=False)
        self.experts = nn.ModuleList([ExpertMLP() for _ in range(experts)])

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        weights = F.softmax(self.gate(h), dim=1, dtype=torch.float)
        weights, selected = torch.topk(weights, TOP_K, dim=-1)
        weights = (weights / weights.sum(-1, keepdim=True)).to(h.dtype)
        out = torch.zeros_like(h)
        mask = F.one_hot(selected, num_classes=self.num_experts).permute(2, 1, 0)
        for e in range(self.num_experts):
            idx, top = torch.where(mask[e])
            current = h[None, top].reshape(-1, HIDDEN)
            out.index_add_(0, top, self.experts[e](current) * weights[top, idx, None])
        return out


class Block(nn.Module):
    def __init__(self, experts: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(HIDDEN)
        self.q = nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.mlp = SparseMoe(experts)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.q(self.norm(x))
        return x + self.mlp(x)


class Model(nn.Module):
    def __init__(self, experts: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList([Block(experts) for _ in range(BLOCKS)])
        self.head = nn.Linear(HIDDEN, 16, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = checkpoint.checkpoint(layer, x, use_reentrant=False)
        return self.head(x).float().pow(2).mean()


def seconds_per_step(mode: str, experts: int, steps: int = 6) -> float:
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = Model(experts)
    x = torch.randn(TOKENS, HIDDEN, requires_grad=True)
    step: Callable[[], None]
    if mode == "plain":
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

        def step() -> None:
            model(x).backward()
            opt.step()
            opt.zero_grad()

    else:
        if mode == "leaf":
            deepspeed.utils.set_z3_leaf_modules(model, [SparseMoe])
        config = {
            "train_micro_batch_size_per_gpu": 1,
            "gradient_accumulation_steps": 1,
            "optimizer": {"type": "AdamW", "params": {"lr": 1e-4, "torch_adam": True}},
            "zero_optimization": {
                "stage": 3,
                "overlap_comm": False,
                "contiguous_gradients": True,
                "reduce_bucket_size": HIDDEN * HIDDEN,
                "stage3_prefetch_bucket_size": int(0.9 * HIDDEN * HIDDEN),
                "stage3_param_persistence_threshold": 10 * HIDDEN,
                "stage3_max_live_parameters": 1e9,
                "stage3_max_reuse_distance": 1e9,
            },
        }
        engine, *_ = deepspeed.initialize(
            model=model, model_parameters=model.parameters(), config=config
        )

        def step() -> None:
            loss = engine(x)
            engine.backward(loss)
            engine.step()

    for _ in range(2):
        step()
    start = time.process_time()
    for _ in range(steps):
        step()
    return (time.process_time() - start) / steps


def main() -> int:
    mode = sys.argv[1] if len(sys.argv) > 1 else "zero3"
    experts = int(sys.argv[2]) if len(sys.argv) > 2 else 128
    print(json.dumps({"mode": mode, "experts": experts, "step_s": seconds_per_step(mode, experts)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
