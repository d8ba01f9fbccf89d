"""torch AdamW's foreach step, traced: which temporaries are alive at once.

calc counts the multi-tensor path's temporaries as the one list ``_multi_tensor_adam``
allocates, ``torch._foreach_sqrt`` of the second moments, per (device, dtype) group, the
previous group's list alive while the next one is made, each parameter group's freed when
its ``adam()`` returns (:func:`calc.states.optimizer_step_temp_bytes`). This traces real
steps of torch's own optimizer with the oracle's live-storage tracker and checks those
bytes by hand. Needs torch (skipped without it, as the other oracle modules).
"""

from __future__ import annotations

import pytest

from oracle_deps import need

torch = need("torch")

from calc.states import ParamLayout, Regime, optimizer_step_temp_bytes  # noqa: E402
from calc.request import parse_estimate_request  # noqa: E402
from tools.oracle.tracker import LiveStorageTracker  # noqa: E402

BIG = ((1000, 1000), torch.bfloat16)  # 1e6 elements, 2 bytes
SMALL = ((500, 500), torch.float32)  # 250,000 elements, 4 bytes
NORM = ((1000,), torch.bfloat16)  # a no-decay group's vector


def _step_temporaries(groups_spec: list, fused: bool = False) -> int:
    groups = []
    for spec in groups_spec:
        params = [torch.nn.Parameter(torch.randn(*shape, dtype=dtype)) for shape, dtype in spec]
        for p in params:
            p.grad = torch.randn_like(p)
        groups.append({"params": params})
    opt = torch.optim.AdamW(groups, lr=1e-3, **({"fused": True} if fused else {"foreach": True}))
    opt.step()  # the first step creates the states
    tracker = LiveStorageTracker()
    with tracker:
        tracker.set_phase("optimizer_step")
        with tracker.tagged("optimizer_temporaries"):
            opt.step()
    return tracker.peaks["optimizer_step"][1].get("optimizer_temporaries", 0)


@pytest.mark.parametrize(
    ("groups", "hand"),
    [
        ([[BIG]], 2 * 10**6),  # the sqrt of every second moment
        ([[BIG, SMALL]], 2 * 10**6 + 4 * 250_000),  # two dtype groups: both lists alive
        ([[SMALL, BIG]], 2 * 10**6 + 4 * 250_000),  # whichever comes first
        ([[BIG], [NORM]], 2 * 10**6),  # parameter groups: one at a time
    ],
)
def test_foreach_adamw_allocates_one_sqrt_list_per_dtype_group(groups, hand):
    assert _step_temporaries(groups) == hand


def test_fused_adamw_allocates_none():
    assert _step_temporaries([[BIG, SMALL]], fused=True) == 0


def test_calc_counts_the_traced_bytes():
    # calc's count for one dtype group of P parameters: state_bytes x P, as traced above
    req = parse_estimate_request(
        {"model": "llama-3.2-1b", "method": "full", "framework": "generic"}
    )
    p = 10**6
    layout = ParamLayout(p, 0, p, p, 0, p, ((1000, 1000, 1),))
    bf16 = Regime("bf16-true", 2, 2, 2, 0, 2, False)
    assert optimizer_step_temp_bytes(req, layout, bf16) == _step_temporaries([[BIG]])
