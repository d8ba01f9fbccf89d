"""The oracle's sparse-attention workaround (tools/oracle/sparse_attention.py): SDPA given a
boolean mask saves the additive mask CUDA's ATen makes of it, in the query's dtype.

Needs torch, transformers and peft (skipped without them, as test_oracle_workarounds.py)."""

from __future__ import annotations

from contextlib import ExitStack

from oracle_deps import need_oracle_stack

torch = need_oracle_stack()

from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402

from tools.oracle import sparse_attention as sa  # noqa: E402
from tools.oracle import workarounds as wa  # noqa: E402
from tools.oracle.tracker import LiveStorageTracker  # noqa: E402


def test_boolean_mask_becomes_additive_in_the_query_dtype():
    mask = torch.tensor([[True, False]])
    out = sa.additive_mask(mask, torch.bfloat16)
    assert out.dtype == torch.bfloat16
    assert out[0, 0].item() == 0 and out[0, 1].item() == float("-inf")
    additive = torch.zeros(1, 2)
    assert sa.additive_mask(additive, torch.bfloat16) is additive
    assert sa.additive_mask(None, torch.bfloat16) is None


def test_flash_sdpa_saves_the_converted_mask():
    """b=1, 2 heads, s=64, d=8 in bf16: the saved mask is 64 x 64 x 2 bytes, not 1 byte each."""

    def saved_bytes(convert: bool) -> int:
        tracker = LiveStorageTracker()
        with FakeTensorMode(), tracker:
            q, k, v = (
                torch.empty(1, 2, 64, 8, dtype=torch.bfloat16, requires_grad=True) for _ in "qkv"
            )
            with ExitStack() as stack:
                if convert:
                    stack.enter_context(sa.sdpa_boolean_masks_converted())
                stack.enter_context(wa.flash_like_sdpa())
                out = torch.nn.functional.scaled_dot_product_attention(
                    q, k, v, attn_mask=torch.ones(1, 1, 64, 64, dtype=torch.bool)
                )
            return tracker.total - out.untyped_storage().nbytes() - 3 * 64 * 2 * 8 * 2

    assert saved_bytes(True) - saved_bytes(False) == 64 * 64 * (2 - 1)
