"""The oracle's tracker and each of its CUDA-faithfulness workarounds (tools/oracle).

Needs torch, transformers and peft (tools/requirements-measure.txt): skipped without them,
except where ``REQUIRE_ORACLE=1`` (CI sets it once they are installed), where a missing
library fails instead of skipping silently."""

from __future__ import annotations

import pytest

from oracle_deps import need_oracle_stack

torch = need_oracle_stack()

from torch._subclasses.fake_tensor import DataDependentOutputException, FakeTensorMode  # noqa: E402

from tools.oracle import workarounds as wa  # noqa: E402
from tools.oracle.tracker import LiveStorageTracker  # noqa: E402


def test_tracker_counts_each_storage_once_and_frees_it():
    tracker = LiveStorageTracker()
    tracker.set_phase("p")
    with FakeTensorMode(), tracker:
        a = torch.empty(1024, dtype=torch.float32)
        view = a[:10]  # shares a's storage: not counted again
        assert tracker.total == 4096
        b = a * 2
        assert tracker.total == 8192
        del b
        assert tracker.total == 4096
        del a
        assert tracker.total == 4096  # the view keeps the storage alive
        del view
        assert tracker.total == 0
    assert tracker.peaks["p"][0] == 8192


def test_tracker_retags_roles():
    tracker = LiveStorageTracker()
    with FakeTensorMode(), tracker:
        g = torch.empty(8)
        assert tracker.category_of(g) == "activations"
        tracker.track(g, "gradients")
        assert tracker.by_category["gradients"] == 32 and tracker.by_category["activations"] == 0


def test_cuda_default_adamw_is_foreach_or_fused():
    p = [torch.nn.Parameter(torch.zeros(4))]
    assert wa.cuda_default_adamw(p).defaults["foreach"] is True
    assert wa.cuda_default_adamw(p, fused=True).defaults["fused"] is True


def test_adam_step_value_reads_a_fake_step_count():
    import torch.optim.adam as adam_mod

    with FakeTensorMode():
        step = torch.empty(())  # a fake count that is not a tracked constant
        with pytest.raises(DataDependentOutputException):
            adam_mod._get_value(step)
        with wa.adam_step_value({"step": 3}):
            assert adam_mod._get_value(step) == 3.0
        assert adam_mod._get_value(2.0) == 2.0


def test_foreach_adamw_steps_fake_params_twice():
    counter = {"step": 1}
    with FakeTensorMode(), wa.adam_step_value(counter):
        p = torch.nn.Parameter(torch.empty(16, 16))
        opt = wa.cuda_default_adamw([p])
        for step in (1, 2):
            counter["step"] = step
            p.grad = torch.empty(16, 16)
            opt.step()
        assert set(opt.state[p]) == {"step", "exp_avg", "exp_avg_sq"}


def _llama_config():
    from transformers import LlamaConfig

    return LlamaConfig(
        hidden_size=64,
        intermediate_size=128,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_hidden_layers=1,
        vocab_size=100,
    )


def test_real_causal_masks_drop_the_mask_as_on_gpu():
    from transformers.masking_utils import create_causal_mask

    config = _llama_config()
    config._attn_implementation = "sdpa"

    def mask():
        embeds = torch.empty(1, 32, 64)
        pos = torch.arange(32).unsqueeze(0)
        return create_causal_mask(
            config=config,
            inputs_embeds=embeds,
            attention_mask=None,
            past_key_values=None,
            position_ids=pos,
        )

    assert mask() is None  # real tensors: SDPA gets is_causal and no mask
    with FakeTensorMode():
        # a fake tensor counts as tracing: transformers builds a packed-sequence mask and a
        # (b, 1, s, s) attention mask, and SDPA would take the masked path
        assert mask() is not None
        with wa.real_causal_masks():
            assert mask() is None


def _saved_shapes(fn):
    shapes = []

    def pack(t):
        shapes.append((tuple(t.shape), t.dtype))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn()
    return out, shapes


def test_flash_like_sdpa_saves_what_the_flash_kernel_saves():
    q = torch.randn(1, 8, 64, 16, requires_grad=True)
    k = torch.randn(1, 2, 64, 16, requires_grad=True)
    v = torch.randn(1, 2, 64, 16, requires_grad=True)
    with wa.flash_like_sdpa():
        out, shapes = _saved_shapes(
            lambda: torch.nn.functional.scaled_dot_product_attention(
                q, k, v, is_causal=True, enable_gqa=True
            )
        )
    # q, k and v at kv-head size, the output and an fp32 (b, heads, s) log-sum-exp
    assert shapes == [
        ((1, 8, 64, 16), torch.float32),
        ((1, 2, 64, 16), torch.float32),
        ((1, 2, 64, 16), torch.float32),
        ((1, 8, 64, 16), torch.float32),
        ((1, 8, 64), torch.float32),
    ]
    out.sum().backward()
    assert k.grad.shape == k.shape and q.grad.shape == q.shape
    # no s x s tensor is saved, unlike the math path the CPU may pick
    assert all(s[-2:] != (64, 64) for s, _ in shapes)


def test_flash_like_sdpa_runs_the_math_path_where_cuda_refuses_the_fused_kernels():
    # one k/v head beside 8 query heads and no enable_gqa (Falcon's multi_query): CUDA's
    # fused kernels require equal head counts, so the math path runs, as the CPU picks too
    q = torch.randn(1, 8, 64, 16, dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(1, 1, 64, 16, dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(1, 1, 64, 16, dtype=torch.bfloat16, requires_grad=True)
    assert torch._fused_sdp_choice(q, k, v, is_causal=True) == 0  # math
    with wa.flash_like_sdpa():
        out, shapes = _saved_shapes(
            lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        )
    assert out.shape == q.shape and out.dtype == torch.bfloat16
    # fp32: q (scaled), k and v broadcast to every head (copies for the batched products) and
    # the softmax's probabilities, s x s per head
    assert sorted(shapes, key=str) == sorted(
        [
            ((8, 16, 64), torch.float32),
            ((8, 64, 16), torch.float32),
            ((1, 8, 64, 64), torch.float32),
            ((8, 64, 16), torch.float32),
            ((8, 64, 64), torch.float32),
        ],
        key=str,
    )
    out.float().sum().backward()
    assert k.grad.shape == k.shape and q.grad.shape == q.shape


def test_cuda_dropout_saves_a_boolean_mask():
    x = torch.randn(4, 32, requires_grad=True)
    with wa.cuda_dropout():
        out, shapes = _saved_shapes(lambda: torch.nn.functional.dropout(x, 0.1, True))
        assert torch.nn.functional.dropout(x, 0.1, False) is x
    assert shapes == [((4, 32), torch.bool)]
    out.sum().backward()
    assert x.grad.shape == x.shape
    # without the patch the CPU path keeps a mask in the input's dtype
    _, cpu_shapes = _saved_shapes(lambda: torch.nn.functional.dropout(x, 0.1, True))
    assert ((4, 32), torch.float32) in cpu_shapes


def test_peak_agrees_with_torch_memtracker():
    """Cross-check with PyTorch's own tracker (torch.distributed._tools.mem_tracker) over the
    same two fake steps: its peak (all steps) equals the oracle's (the second step's)."""
    from torch.distributed._tools.mem_tracker import MemTracker

    from benchmarks.oracle_sweep import FAMILIES
    from tools.oracle import oracle_estimate
    from tools.oracle.run import build_meta_model, fake_parameters, make_optimizer, normalise

    request = {
        "model": {"hf_config": FAMILIES["llama"]},
        "method": "full",
        "seq_len": 128,
        "gradient_checkpointing": False,
        "attention_grouped_kv": True,
    }
    ours = oracle_estimate(dict(request))
    req, options = normalise(dict(request))
    model, _ = build_meta_model(req, options)
    counter = {"step": 0}
    with (
        FakeTensorMode(),
        wa.real_causal_masks(),
        wa.flash_like_sdpa(),
        wa.adam_step_value(counter),
        wa.cuda_dropout(),
    ):
        fake_parameters(model, LiveStorageTracker())
        opt = make_optimizer(req, [p for p in model.parameters() if p.requires_grad])
        tracker = MemTracker()
        tracker.track_external(model, opt)
        with tracker:
            ids, labels = (
                torch.zeros((1, 128), dtype=torch.long),
                torch.zeros((1, 128), dtype=torch.long),
            )
            for step in (1, 2):
                counter["step"] = step
                tracker.reset_mod_stats()
                loss = model(input_ids=ids, labels=labels).loss
                loss.backward()
                del loss
                opt.step()
                opt.zero_grad(set_to_none=True)
        peak = tracker.get_tracker_snapshot("peak")[torch.device("cpu")]["Total"]
    assert peak == ours["peak_allocated_bytes"]


def test_trl_tile_kernels_allocate_nothing_as_on_cuda():
    # TRL's fused LM head, forward and backward on fake tensors: with the Triton kernels as
    # in-place no-ops, the peak is TRL's own buffers (the [N, 32768] bf16 tile, the fp32
    # statistics, grad_hidden in fp32 and its cast), never an fp32 copy of a tile
    pytest.importorskip("trl")
    from trl.kernels import ChunkedLogProbFunction
    import trl.kernels.chunked_logprob as cl

    n, h, v = 64, 8, 32768  # a full-width tile
    tracker = LiveStorageTracker()
    tracker.set_phase("p")
    original = cl._forward_tile
    with FakeTensorMode(), tracker, wa.triton_logprob_tiles():
        assert cl._forward_tile is not original
        hidden = torch.empty(n, h, dtype=torch.bfloat16, requires_grad=True)
        weight = torch.empty(v, h, dtype=torch.bfloat16)
        targets = torch.zeros(n, dtype=torch.long)
        out = ChunkedLogProbFunction.apply(hidden, weight, None, targets, 1.0, 32768, None, 1.0, ())
        out[0].sum().backward()
    assert cl._forward_tile is original
    tile = n * 32768 * 2
    fp32_tile = n * 32768 * 4
    assert tile <= tracker.peaks["p"][0] < tile + fp32_tile


def test_kimi_k25_s_text_config_is_built_as_deepseek_v3():
    """Kimi_K25Config builds its kimi_k2 text_config (or one naming no model_type) as
    deepseek_v3: the oracle traces that model for a kimi_k25 config, its language model alone."""
    from benchmarks.oracle_sweep import ACCEPTED_FAMILIES, oracle_request
    from tools.oracle.run import build_meta_model, normalise

    text = {k: v for k, v in ACCEPTED_FAMILIES["deepseek_v3"].items() if k != "model_type"}
    for named in ({"model_type": "kimi_k2"}, {}):
        cfg = {"model_type": "kimi_k25", "text_config": {**text, **named}}
        req, options = normalise(oracle_request({"model": {"hf_config": cfg}, "method": "lora"}))
        model, _ = build_meta_model(req, options)
        assert type(model.get_base_model()).__name__ == "DeepseekV3ForCausalLM"
