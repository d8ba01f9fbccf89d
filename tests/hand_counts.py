"""Hand-derived counts that several test modules check calc against (not a test module)."""

from __future__ import annotations

# Llama-2-7B shapes: h 4096, MLP 11008, 32 layers, 32 heads (MHA), vocab 32000
# eager attention (its output's token-major copy: 4 bytes per q element; MHA, no k/v repeat)
ELEMENTWISE_FWD_7B = 32 * (
    2 * 36 * 4096 + 2 * 6 * 4096 + 20 * (4096 + 4096) + 4 * 4096 + 10 * 11008
)
# ... and its traced backward under full fine-tuning (calc.timing.block_backward_bytes): two
# RMSNorms with trained weights (92), five gradient sums of 6 bytes per hidden element (the
# stream at each of the two residual adds, q/k/v reading one norm output: two, gate and up
# the other: one), rotary 32 per q/k element (the output copy's backward runs no kernel), the
# value gradient's token-major copy (4 per v element: eager attention's bmm hands it head-major)
# and the gated activation 18 per element of the MLP's width
ELEMENTWISE_BWD_7B_FULL = 32 * (
    2 * 92 * 4096 + 5 * 6 * 4096 + 32 * (4096 + 4096) + 4 * 4096 + 18 * 11008
)

# FSDP1 wrapping of Llama-2-7B QLoRA on 2 GPUs (calc.memory.fsdp_wrap_reserved_bytes), bytes.
# A block unit: q, k, v, o packed to 4 bits (4096^2 / 2 each), gate, up, down (4096 * 11008 / 2
# each) and the two RMSNorms (2 * 4096 * 2): U; one broadcast bucket of all (U < 250 MiB), a flat
# copy; the shard (U / 2) reuses the freed bucket: 2U + U - U/2.
FSDP1_BLOCK_UNIT_7B_QLORA = (
    4 * 4096 * 4096 // 2 + 3 * 4096 * 11008 // 2 + 2 * 4096 * 2
)  # 101,203,968
FSDP1_BLOCK_TRANSIENT_7B_QLORA = (
    2 * FSDP1_BLOCK_UNIT_7B_QLORA + FSDP1_BLOCK_UNIT_7B_QLORA - FSDP1_BLOCK_UNIT_7B_QLORA // 2
)
# The root unit: embedding and output layer (32000 * 4096 * 2 each, the embedding exactly one
# 250 MiB bucket, a view) and the final norm (4096 * 2), which joins the output layer's bucket
# (a flat copy of 262,152,192); the shard (262,148,096) fits in that freed copy.
FSDP1_ROOT_UNIT_7B = 2 * 32000 * 4096 * 2 + 4096 * 2  # 524,296,192
FSDP1_ROOT_TRANSIENT_7B = (
    2 * FSDP1_ROOT_UNIT_7B + (32000 * 4096 * 2 + 4096 * 2) - FSDP1_ROOT_UNIT_7B // 2
)

# A two-layer Gemma 2 config.json (head_dim 128, 4 heads over 2 k/v heads): small enough to
# count by hand, with transformers' Gemma2Config defaults for everything it leaves out
TINY_GEMMA2 = {
    "model_type": "gemma2",
    "hidden_size": 512,
    "intermediate_size": 2048,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 128,
    "num_hidden_layers": 2,
    "vocab_size": 1000,
}
