"""Ops one torchao ``Float8Linear`` dispatches without torch.compile, the count behind
``calc.timing.FLOAT8_LINEAR_OPS`` (and the casts of ``FP8_EAGER_CASTS``).

``python -m benchmarks.count_float8_ops`` (needs torch and ``torchao==0.18.0``, which is no
dependency of the project: ``pip install --no-deps torchao==0.18.0`` beside torch). On the CPU,
with torchao's ``emulate`` matmul: the host's ops are the same ones a GPU run dispatches, except
inside the matmul, where a GPU run calls ``float8_ops.addmm_float8_unwrapped`` (the scales'
``reciprocal`` twice and ``torch._scaled_mm``) after ``preprocess_addmm``'s layout copies. Both
are counted here on the GPU path's code: the matmul's inner ops are counted by calling
``preprocess_addmm`` and ``addmm_float8_unwrapped``'s own ops under a dispatch mode, with
``torch._scaled_mm`` replaced by a counting stand-in (the CPU has no FP8 matmul).

It prints, for one frozen and one trained ``Linear`` (bf16, 16 tokens), the ops of ``nn.Linear``
and of ``Float8Linear`` in the forward and the backward, by op."""

from __future__ import annotations

import collections
import dataclasses
import sys
from typing import Any

from tools.count_eager_ops import op_counter


def _matmul_inner_ops(tokens: int, d_in: int, d_out: int) -> dict[str, collections.Counter[str]]:
    """The ops inside torchao's FP8 matmul on the GPU path for the three matmuls of a linear,
    given the operand layouts ``matmul_with_hp_or_float8_args`` hands it."""
    import torch
    from torchao.float8 import float8_ops
    from torchao.float8.float8_training_tensor import Float8TrainingTensor, GemmInputRole
    from torchao.float8.float8_linear import Float8Linear
    from torchao.float8.config import Float8LinearConfig

    cfg = Float8LinearConfig.from_recipe_name("tensorwise")
    mm_config = Float8Linear(d_in, d_out, bias=False, config=cfg).linear_mm_config
    e4 = torch.float8_e4m3fn

    def f8(t: Any, role: Any) -> Any:
        return Float8TrainingTensor(
            t.to(e4),
            torch.tensor(1.0),
            torch.bfloat16,
            linear_mm_config=mm_config,
            gemm_input_role=role,
        )

    x = torch.randn(tokens, d_in)
    w_t = torch.randn(d_out, d_in).t()  # weight.t(): column-major
    go = torch.randn(tokens, d_out)
    cases = {
        "output": (f8(x, GemmInputRole.INPUT), f8(w_t, GemmInputRole.WEIGHT)),
        "grad_input": (f8(go, GemmInputRole.GRAD_OUTPUT), f8(w_t, GemmInputRole.WEIGHT).t()),
        "grad_weight": (f8(go, GemmInputRole.GRAD_OUTPUT).t(), f8(x, GemmInputRole.INPUT)),
    }
    real = torch._scaled_mm
    result = torch.empty(tokens, d_out, dtype=torch.bfloat16)

    def stand_in(a: Any, b: Any, **kwargs: Any) -> Any:
        return result  # made outside the count: the real kernel allocates its own

    out = {}
    for name, (a, b) in cases.items():
        counter = op_counter()
        torch._scaled_mm = stand_in  # type: ignore[assignment]
        try:
            with counter:
                a_data, a_scale, b_data, b_scale = float8_ops.preprocess_addmm(a, b)
                float8_ops.addmm_float8_unwrapped(a_data, a_scale, b_data, b_scale, torch.bfloat16)
        finally:
            torch._scaled_mm = real  # type: ignore[assignment]
        counter.ops["_scaled_mm"] += 1
        out[name] = counter.ops
    return out


def main() -> int:
    import torch
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training

    tokens, d_in, d_out = 16, 64, 96
    inner = _matmul_inner_ops(tokens, d_in, d_out)
    for frozen in (True, False):
        for fp8 in (False, True):
            model = torch.nn.Sequential(torch.nn.Linear(d_in, d_out, bias=False))
            model = model.to(torch.bfloat16)
            model[0].weight.requires_grad_(not frozen)
            if fp8:
                cfg = dataclasses.replace(
                    Float8LinearConfig.from_recipe_name("tensorwise"), emulate=True
                )
                convert_to_float8_training(model, config=cfg)
            x = torch.randn(tokens, d_in, dtype=torch.bfloat16, requires_grad=True)
            fwd, bwd = op_counter(), op_counter()
            with fwd:
                y = model(x)
            grad = torch.ones_like(y)
            with bwd:
                y.backward(grad)
            f, b = sum(fwd.ops.values()), sum(bwd.ops.values())
            if fp8:
                # the emulated matmul is one 'mm' seen from outside; the GPU path's are inner
                f += sum(inner["output"].values()) - 1
                b += sum(inner["grad_input"].values()) + sum(inner["grad_weight"].values()) - 2
            kind = "Float8Linear" if fp8 else "nn.Linear"
            print(f"{'frozen' if frozen else 'trained'} {kind}: forward {f}, backward {b}")
            print(f"  forward  {dict(fwd.ops)}")
            print(f"  backward {dict(bwd.ops)}")
    for name, ops in inner.items():
        print(f"inside the FP8 matmul ({name}): {dict(ops)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
