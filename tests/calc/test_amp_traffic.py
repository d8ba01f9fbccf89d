"""The fp32 residual stream under autocast (calc.amp_traffic): the element-wise bytes and kernels
it adds to a transformers block, counted by hand here, and where calc.timing adds them.

The trace of the same difference, family by family: tests/tools/test_count_amp_traffic.py."""

from __future__ import annotations

import pytest

from calc import amp_traffic, liger, presets, timing
from calc.request import parse_estimate_request

LLAMA2_7B = presets.get_preset("llama-2-7b")  # h 4096, 32 heads of 128 (MHA), 32 layers
QWEN3_06B = presets.get_preset("qwen3-0.6b")  # h 1024, 16 q heads, 8 k/v heads of 128, 28 layers
GPT2 = presets.get_preset("gpt2")  # h 768, LayerNorm, learned positions, fused c_attn, 12 layers


def _per_block(arch, total: float) -> float:
    """A stack total less the output layer's input cast (6 h, once), per block."""
    return (total - 6 * arch.hidden_size) / arch.num_layers


def test_a_llama_block_adds_its_casts_promotions_and_fp32_norms():
    """Forward, per token: q, k, v, gate and up each cast the fp32 norm output (5 x 6 h), two
        residual adds read fp32 (2 x 4 h), two RMSNorms drop their casts and scale in fp32 (2 x -8
        h), q and k (8192 elements) pass an fp32 rotary embedding (+10) and SDPA's cast (+6).
        Backward: the five input gradients cast back (5 x 6 h), three fp32 sums of them (q+k+v: 2,
        gate+up: 1; 3 x 6 h), two fp32 residual sums and the casts of their gradients to the
        sublayers' 16 bits (2 x 12 h), rotary's fp32 products and casts (+20) and SDPA's (+6). Each
    way, the fp32 cos and sin rows (8 bytes per head_dim element more). 222,208 and 508,928 bytes,
    what tools/count_amp_traffic.py traces for this block."""
    h, qk = 4096, 2 * 32 * 128
    forward, backward = amp_traffic.amp_stream_bytes_per_token(LLAMA2_7B)
    table = 8 * 128  # cos and sin rows read in fp32 by four products, each way
    assert _per_block(LLAMA2_7B, forward) == 30 * h + 8 * h - 16 * h + 16 * qk + table
    assert _per_block(LLAMA2_7B, backward) == 30 * h + 18 * h + 24 * h + 26 * qk + table
    # five input casts and SDPA's two, less two casts of each of two norms; backward the five
    # again, the two residual gradients' casts, SDPA's two and rotary's four, less the norms'
    assert amp_traffic.amp_block_extra_ops(LLAMA2_7B) == (5 + 2 - 4, 5 + 2 + 6 - 4)


def test_q_and_k_norms_keep_the_rotary_embedding_in_fp32():
    """Qwen3's q/k RMSNorm returns fp32 (its fp32 weight times a 16-bit output): the rotary
    embedding runs whole in fp32, 28 bytes per q/k element forward and 50 backward, and
    rotary's two gradient casts per tensor are not there (backward 7 kernels, not 9)."""
    h, qk = 1024, (16 + 8) * 128
    forward, backward = amp_traffic.amp_stream_bytes_per_token(QWEN3_06B)
    assert _per_block(QWEN3_06B, forward) == 30 * h + 8 * h - 16 * h + 28 * qk + 8 * 128
    assert _per_block(QWEN3_06B, backward) == 30 * h + 18 * h + 24 * h + 50 * qk + 8 * 128
    assert amp_traffic.amp_block_extra_ops(QWEN3_06B) == (3, 7)


def test_a_gpt2_block_has_no_rotary_and_layer_norms_that_read_more():
    """GPT-2: the fused c_attn and c_fc cast one h-wide input each (2 x 6 h), two fp32 residual
    adds (2 x 4 h), two LayerNorms reading and writing fp32 (2 x 4 h); no rotary, so SDPA gets
    16-bit q, k, v and casts nothing; no cast dropped by a LayerNorm."""
    h = 768
    forward, backward = amp_traffic.amp_stream_bytes_per_token(GPT2)
    assert _per_block(GPT2, forward) == 12 * h + 8 * h + 8 * h
    assert _per_block(GPT2, backward) == 12 * h + 24 * h + 12 * h  # no sum: one reader each
    assert amp_traffic.amp_block_extra_ops(GPT2) == (2, 4)


AMP = {
    "model": "llama-2-7b",
    "method": "full",
    "precision": "bf16-mixed",
    "framework": "hf-trainer",
    "micro_batch_size": 1,
    "seq_len": 1024,
}


def _counts(monkeypatch, request: dict, zero: bool) -> timing.Counts:
    if zero:
        monkeypatch.setattr(amp_traffic, "amp_stream_bytes_per_token", lambda arch: (0.0, 0.0))
        monkeypatch.setattr(amp_traffic, "amp_block_extra_ops", lambda arch: (0.0, 0.0))
    req = parse_estimate_request(request)
    return timing._counts(req, req.sharding, None)


@pytest.mark.parametrize("checkpointing", [False, True])
def test_the_time_model_adds_the_stream_to_each_pass(monkeypatch, checkpointing):
    """calc.timing adds the forward's bytes and kernels once per forward (twice with the
    recomputation of checkpointed blocks) and the backward's once."""
    request = {**AMP, "gradient_checkpointing": checkpointing}
    with monkeypatch.context() as m:
        without = _counts(m, request, zero=True)
    with_stream = _counts(monkeypatch, request, zero=False)
    forward, backward = amp_traffic.amp_stream_bytes_per_token(LLAMA2_7B)
    ops_f, ops_b = amp_traffic.amp_block_extra_ops(LLAMA2_7B)
    passes = 2 if checkpointing else 1
    assert with_stream.elementwise_bytes_per_token - without.elementwise_bytes_per_token == (
        pytest.approx(forward * passes + backward)
    )
    assert with_stream.kernels_per_micro - without.kernels_per_micro == pytest.approx(
        32 * (ops_f * passes + ops_b)
    )


@pytest.mark.parametrize(
    "change",
    [
        {"precision": "bf16-true"},  # 16-bit weights, no autocast
        {"weights_loaded_16bit": True},  # autocast over bf16 weights: a 16-bit stream
        {"sharding": "zero3", "num_gpus": 2},  # DeepSpeed hands the modules 16-bit weights
        {"torch_compile": True},  # inductor fuses the casts
        {"framework": "generic"},  # not transformers' blocks: not what was traced
        {"method": "qlora"},  # bitsandbytes casts around its 4-bit matmuls itself
    ],
)
def test_stacks_without_an_fp32_stream_or_outside_the_trace_are_unchanged(monkeypatch, change):
    request = {**AMP, **change}
    with monkeypatch.context() as m:
        without = _counts(m, request, zero=True)
    plain = _counts(monkeypatch, request, zero=False)
    assert plain.elementwise_bytes_per_token == without.elementwise_bytes_per_token
    assert plain.kernels_per_micro == without.kernels_per_micro


def test_weights_of_the_other_16bit_type_get_the_fp32_stream_too():
    """fp16 weights under bf16 autocast: the first residual add promotes the stream to fp32."""
    req = parse_estimate_request(
        {**AMP, "weights_loaded_16bit": True, "weights_loaded_other_16bit": True}
    )
    assert timing.fp32_stream_counted(req, req.sharding, liger.applies(req))


def test_post_norm_blocks_with_fp32_rope_pay_only_the_casts_and_adds():
    """OLMo 3: no norm reads the stream (the norms follow the sublayers) and its rotary code
    computes in fp32 and casts back whatever the stream: what is left are the five input casts
    and the two promoted adds (38 h forward), the casts back, three fp32 sums and the residual
    gradients (72 h backward); 5 and 7 kernels. 155,648 and 294,912 bytes at h 4096: the trace."""
    olmo = presets.get_preset("olmo-3-7b")
    h = 4096
    forward, backward = amp_traffic.amp_stream_bytes_per_token(olmo)
    assert _per_block(olmo, forward) == 38 * h
    assert _per_block(olmo, backward) == 72 * h
    assert amp_traffic.amp_block_extra_ops(olmo) == (5, 7)


def test_phi3_concatenates_its_rotated_q_and_k_in_fp32():
    """Phi-3-mini: one fused qkv and one fused gate_up read the norms (2 x 6 h, no sums), its
    rotary code concatenates the fp32 rotated part with an empty pass-through part (+4 per q/k
    element, one more cast kernel for q and k each way)."""
    phi3 = presets.get_preset("phi-3-mini")
    h, qk = 3072, 2 * 32 * 96
    forward, backward = amp_traffic.amp_stream_bytes_per_token(phi3)
    table = 8 * 96
    assert _per_block(phi3, forward) == 12 * h + 8 * h - 16 * h + (16 + 4) * qk + table
    assert _per_block(phi3, backward) == 12 * h + 0 + 24 * h + 26 * qk + table
    assert amp_traffic.amp_block_extra_ops(phi3) == (2 + 2 + 2 - 4, 2 + 2 + 6 + 2 - 4)


def test_ministral3_scales_its_fp32_query_per_position():
    """Ministral 3 multiplies the roped query by a per-position factor: on an fp32 query that
    product moves 4 bytes more per query element each way, and the factor's cast to the query's
    dtype launches nothing."""
    m3 = presets.get_preset("ministral-3-3b")
    llama_like = amp_traffic.amp_stream_bytes_per_token(m3)
    q = 32 * 128
    h, qk = 3072, (32 + 8) * 128
    table = 8 * 128
    assert _per_block(m3, llama_like[0]) == 38 * h - 16 * h + 16 * qk + 4 * q + table
    assert _per_block(m3, llama_like[1]) == 72 * h + 26 * qk + 4 * q + table
    assert amp_traffic.amp_block_extra_ops(m3) == (3 - 1, 9)


LORA = {**AMP, "method": "lora", "lora_targets": "all-linear", "lora_adapter_dtype": "fp32"}


@pytest.mark.parametrize(
    ("change", "under_autocast"),
    [
        ({}, True),  # fp32 weights under autocast
        ({"weights_loaded_16bit": True}, True),  # bf16 weights under autocast: TRL's default
        ({"precision": "bf16-true", "weights_loaded_16bit": True}, False),  # no autocast
        ({"sharding": "zero3", "num_gpus": 2}, False),  # DeepSpeed's bf16, no torch autocast
        ({"framework": "unsloth"}, False),  # Unsloth casts the adapters itself
    ],
)
def test_fp32_adapters_run_in_16_bits_under_autocast(change, under_autocast):
    """Autocast hands lora_A and lora_B 16-bit copies and a 16-bit input: tensor-core matmuls,
    a 16-bit branch (LORA_BYTES_PER_OUTPUT), and a cast down after peft's cast up."""
    req = parse_estimate_request({**LORA, **change})
    assert timing.autocast_runs_adapters(req) is under_autocast
    counts = timing._counts(req, req.sharding, None)
    if under_autocast:
        assert not counts.adapter_fp32
        assert timing.lora_output_bytes(req) == timing.LORA_BYTES_PER_OUTPUT
        assert timing.lora_input_bytes(req) == 6 + 6
    elif change.get("precision") == "bf16-true":
        assert counts.adapter_fp32
        assert timing.lora_output_bytes(req) == timing.LORA_FP32_BYTES_PER_OUTPUT
        assert timing.lora_input_bytes(req) == 6


def test_adapters_reading_the_fp32_stream_skip_peft_s_cast_up():
    """On fp32 weights under autocast q, k, v, gate and up read the fp32 norm output: peft's
    cast to the fp32 adapters does nothing there (only autocast's cast down is paid); o_proj
    and down_proj read 16-bit tensors and pay both."""
    req = parse_estimate_request(LORA)
    adapted = timing.st.adapted(req)
    readers = amp_traffic.reader_names(req.model)
    assert readers == {"q_proj", "k_proj", "v_proj", "gate_proj", "up_proj"}
    with_readers = timing.peft_path_bytes(req, adapted, readers)
    without = timing.peft_path_bytes(req, adapted, frozenset())
    read = sum(a.blocks * a.active * a.d_in for a in adapted if a.name in readers)
    assert without - with_readers == 6 * read


QLORA = {
    **AMP,
    "method": "qlora",
    "lora_targets": "all-linear",
    "lora_adapter_dtype": "fp32",
    "qlora_prepare_kbit": True,
}


def test_qlora_s_fp32_stream_forward_is_the_sum_of_what_the_code_does():
    """Llama-2-7B (h 4096, q 4096, k/v 4096, MLP 11008, head_dim 128), per block forward:
    pre-norms -16 h, the readers' input casts 30 h, their output casts 6 (q + 2 kv) + 12 ffn,
    fp32 RoPE 20 (q + kv), SDPA's casts 6 (q + 2 kv), the residual adds 4 h + 6 h, the fp32
    activation 10 ffn, the down projection's casts 6 ffn + 6 h, cos and sin 8 head_dim."""
    h, q, kv, ffn = 4096, 4096, 4096, 11008
    forward, _ = amp_traffic.qlora_stream_bytes_per_token(LLAMA2_7B)
    expected = (
        -16 * h
        + 30 * h
        + 6 * (q + 2 * kv)
        + 12 * ffn
        + 20 * (q + kv)
        + 6 * (q + 2 * kv)
        + 10 * h
        + 10 * ffn
        + 6 * ffn
        + 6 * h
        + 8 * 128
    )
    assert _per_block(LLAMA2_7B, forward) == expected


def test_qlora_s_adapters_on_the_stream_keep_an_fp32_result_but_not_the_output_projection():
    """peft's LoRA layer on a 4-bit linear under autocast: clone, 16-bit scale and fp32 add on
    an fp32 result (22 per output element, and autocast's cast of the fp32 input), 14 on the
    output projection's 16-bit result (no cast of its 16-bit input)."""
    req = parse_estimate_request(QLORA)
    adapted = timing.st.adapted(req)
    by_name = {a.name: a for a in adapted}
    only_q = timing.qlora_autocast_path_bytes(req, (by_name["q_proj"],))
    only_o = timing.qlora_autocast_path_bytes(req, (by_name["o_proj"],))
    q, o = by_name["q_proj"], by_name["o_proj"]
    assert only_q == q.blocks * (22 * q.d_out + 6 * q.d_in)
    assert only_o == o.blocks * 14 * o.d_out


@pytest.mark.parametrize(
    ("change", "counted"),
    [
        ({}, True),
        ({"model": "mistral-7b"}, True),
        ({"model": "qwen3-0.6b"}, False),  # q/k norms: not the traced block
        ({"torch_compile": True}, False),
        ({"qlora_prepare_kbit": False, "weights_loaded_16bit": True}, False),  # a 16-bit stream
        ({"precision": "bf16-true"}, False),  # kbit preparation without autocast: KBIT_FP32
    ],
)
def test_qlora_s_stream_is_counted_where_it_was_traced(change, counted):
    req = parse_estimate_request({**QLORA, **change})
    assert timing.qlora_stream_counted(req, req.sharding, liger.applies(req)) is counted
