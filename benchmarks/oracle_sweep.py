"""calc against the fake-tensor oracle (tools/oracle) on a sweep of training setups.

Usage: ``python -m benchmarks.oracle_sweep [--only SUBSTRING] [--no-write]`` (from the
repository root; needs torch, transformers and peft, as in ``tools/requirements-measure.txt``).

Each setup is one estimate request (calc's vocabulary, with the keys that describe the
traced code: Hugging Face transformers 5.17 + peft 0.21 + torch 2.13, so
``attention_grouped_kv`` is true for SDPA) plus the oracle's own options
(``reentrant`` checkpointing). The models are the families' real layer structure at
reduced depth and width (2 blocks, hidden 448-640), so every mechanism runs while a
step takes about a second on one core. Every ``model_type`` that ``calc.hf_config`` reads is
swept (``FAMILIES`` on every variant, ``ACCEPTED_FAMILIES`` on ``ACCEPTED_VARIANTS``); the
summary lists them under ``model_types`` and each family's figures under ``per_family``.
A setup the library refuses or fails on is printed as unsupported, never compared. Oracle results are cached under
``.cache/oracle_sweep/`` by a hash of the setup and the library versions, so a rerun
only traces what changed.

Printed: per setup and phase, calc and oracle and the signed error, worst peak first;
then the share of setups whose allocated peak is within 2 % and within 5 %, and the
worst. The summary is written to ``validation/oracle_sweep_summary.json``, which the
methodology page renders (the site build never needs torch).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE_DIR = ROOT / ".cache" / "oracle_sweep"
SUMMARY_PATH = ROOT / "validation" / "oracle_sweep_summary.json"
PHASES = ("forward_end", "backward", "optimizer_step")

# Reduced-size configs with each family's real structure (module names, norms, GQA ratio,
# head_dim, biases, tying, soft-capping, q/k norms, MoE routing).
FAMILIES: dict[str, dict] = {
    "llama": {
        "model_type": "llama",
        "hidden_size": 512,
        "intermediate_size": 1376,
        "num_attention_heads": 8,
        "num_key_value_heads": 8,
        "num_hidden_layers": 2,
        "vocab_size": 8000,
        "max_position_embeddings": 4096,
    },
    "llama3-gqa-tied": {
        "model_type": "llama",
        "hidden_size": 512,
        "intermediate_size": 1792,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "num_hidden_layers": 2,
        "vocab_size": 16000,
        "max_position_embeddings": 8192,
        "tie_word_embeddings": True,
    },
    "mistral": {
        "model_type": "mistral",
        "hidden_size": 512,
        "intermediate_size": 1792,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "num_hidden_layers": 2,
        "vocab_size": 8000,
        "max_position_embeddings": 8192,
        "sliding_window": None,
    },
    "qwen2": {
        "model_type": "qwen2",
        "hidden_size": 448,
        "intermediate_size": 2368,
        "num_attention_heads": 7,
        "num_key_value_heads": 1,
        "num_hidden_layers": 2,
        "vocab_size": 15200,
        "max_position_embeddings": 8192,
        "tie_word_embeddings": False,
    },
    "qwen3": {
        "model_type": "qwen3",
        "hidden_size": 512,
        "intermediate_size": 1536,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "num_hidden_layers": 2,
        "vocab_size": 15200,
        "max_position_embeddings": 8192,
        "tie_word_embeddings": False,
    },
    "gemma2": {
        "model_type": "gemma2",
        "hidden_size": 448,
        "intermediate_size": 1792,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 128,
        "num_hidden_layers": 2,
        "vocab_size": 16000,
        "max_position_embeddings": 8192,
        "sliding_window": 4096,
    },
    "gemma3": {
        "model_type": "gemma3_text",
        "hidden_size": 512,
        "intermediate_size": 2048,
        "num_attention_heads": 4,
        "num_key_value_heads": 1,
        "head_dim": 128,
        "num_hidden_layers": 2,
        "vocab_size": 16000,
        "max_position_embeddings": 8192,
        "sliding_window": 4096,
    },
    "phi3": {
        "model_type": "phi3",
        "hidden_size": 512,
        "intermediate_size": 1376,
        "num_attention_heads": 8,
        "num_key_value_heads": 8,
        "num_hidden_layers": 2,
        "vocab_size": 8064,
        "max_position_embeddings": 4096,
        "pad_token_id": 0,
    },
    "qwen3_moe": {
        "model_type": "qwen3_moe",
        "hidden_size": 512,
        "intermediate_size": 1536,
        "moe_intermediate_size": 192,
        "num_experts": 8,
        "num_experts_per_tok": 2,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "num_hidden_layers": 2,
        "vocab_size": 15200,
        "max_position_embeddings": 8192,
        "tie_word_embeddings": False,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
    },
}

ATTENTION_ONLY = ["q_proj", "k_proj", "v_proj", "o_proj"]

# Every other model_type calc.hf_config reads, at the same reduced size with its real structure,
# swept on fewer variants (ACCEPTED_VARIANTS). Falcon's remote-code names RefinedWeb and
# RefinedWebModel are the falcon reader under another name (FAMILY_ALIASES).
ACCEPTED_FAMILIES: dict[str, dict] = {
    "gemma": {
        "model_type": "gemma",
        "hidden_size": 512,
        "intermediate_size": 1536,
        "num_attention_heads": 4,
        "num_key_value_heads": 1,
        "head_dim": 128,
        "num_hidden_layers": 2,
        "vocab_size": 16000,
        "max_position_embeddings": 8192,
    },
    "granite": {
        "model_type": "granite",
        "hidden_size": 512,
        "intermediate_size": 1536,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "num_hidden_layers": 2,
        "vocab_size": 8000,
        "max_position_embeddings": 4096,
        "tie_word_embeddings": True,
        "embedding_multiplier": 12.0,
        "residual_multiplier": 0.22,
        "attention_multiplier": 0.015625,
        "logits_scaling": 8.0,
    },
    "smollm3": {
        "model_type": "smollm3",
        "hidden_size": 512,
        "intermediate_size": 1376,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "num_hidden_layers": 2,
        "vocab_size": 8000,
        "max_position_embeddings": 8192,
        "tie_word_embeddings": True,
        "no_rope_layer_interval": 2,
        "pad_token_id": 0,
    },
    "olmo": {
        "model_type": "olmo",
        "hidden_size": 512,
        "intermediate_size": 1376,
        "num_attention_heads": 8,
        "num_key_value_heads": 8,
        "num_hidden_layers": 2,
        "vocab_size": 8000,
        "max_position_embeddings": 4096,
        "clip_qkv": 8.0,
    },
    "olmo2": {
        "model_type": "olmo2",
        "hidden_size": 512,
        "intermediate_size": 1376,
        "num_attention_heads": 8,
        "num_key_value_heads": 8,
        "num_hidden_layers": 2,
        "vocab_size": 8000,
        "max_position_embeddings": 4096,
    },
    "stablelm": {
        "model_type": "stablelm",
        "hidden_size": 512,
        "intermediate_size": 1376,
        "num_attention_heads": 8,
        "num_key_value_heads": 8,
        "num_hidden_layers": 2,
        "vocab_size": 8000,
        "max_position_embeddings": 4096,
        "partial_rotary_factor": 0.25,
        "use_qkv_bias": True,
    },
    "mixtral": {
        "model_type": "mixtral",
        "hidden_size": 512,
        "intermediate_size": 768,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "num_hidden_layers": 2,
        "num_local_experts": 8,
        "num_experts_per_tok": 2,
        "vocab_size": 8000,
        "max_position_embeddings": 8192,
        "sliding_window": None,
    },
    "qwen2_moe": {
        "model_type": "qwen2_moe",
        "hidden_size": 512,
        "intermediate_size": 1376,
        "moe_intermediate_size": 192,
        "shared_expert_intermediate_size": 768,
        "num_experts": 8,
        "num_experts_per_tok": 2,
        "num_attention_heads": 8,
        "num_key_value_heads": 8,
        "num_hidden_layers": 2,
        "vocab_size": 15200,
        "max_position_embeddings": 8192,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
    },
    # intermediate_size == hidden_size, as in gpt-oss-20b and -120b (2880)
    "gpt_oss": {
        "model_type": "gpt_oss",
        "hidden_size": 512,
        "intermediate_size": 512,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "num_hidden_layers": 2,
        "num_local_experts": 8,
        "num_experts_per_tok": 2,
        "vocab_size": 8000,
        "max_position_embeddings": 4096,
        "sliding_window": 128,
        "layer_types": ["sliding_attention", "full_attention"],
        "pad_token_id": 0,
    },
    "llama4_text": {
        "model_type": "llama4_text",
        "hidden_size": 512,
        "intermediate_size": 256,
        "intermediate_size_mlp": 1024,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "num_hidden_layers": 2,
        "num_local_experts": 4,
        "num_experts_per_tok": 1,
        "interleave_moe_layer_step": 1,
        "vocab_size": 8000,
        "max_position_embeddings": 8192,
        "pad_token_id": 0,
    },
    # Phi-2's head_dim 80, so that its partial rotary factor 0.4 spans a whole 32 dimensions
    "phi": {
        "model_type": "phi",
        "hidden_size": 640,
        "intermediate_size": 2560,
        "num_attention_heads": 8,
        "num_hidden_layers": 2,
        "vocab_size": 8000,
        "max_position_embeddings": 2048,
        "partial_rotary_factor": 0.4,
        "resid_pdrop": 0.1,
    },
    "gpt_neox": {
        "model_type": "gpt_neox",
        "hidden_size": 512,
        "intermediate_size": 2048,
        "num_attention_heads": 8,
        "num_hidden_layers": 2,
        "vocab_size": 8000,
        "max_position_embeddings": 2048,
        "rotary_pct": 0.25,
    },
    "falcon": {
        "model_type": "falcon",
        "hidden_size": 512,
        "num_attention_heads": 8,
        "num_hidden_layers": 2,
        "vocab_size": 8000,
        "multi_query": True,
        "parallel_attn": True,
        "bias": False,
    },
    "bloom": {
        "model_type": "bloom",
        "hidden_size": 512,
        "n_head": 8,
        "n_layer": 2,
        "vocab_size": 8000,
    },
    "gpt2": {
        "model_type": "gpt2",
        "n_embd": 512,
        "n_head": 8,
        "n_layer": 2,
        "vocab_size": 8000,
        "n_positions": 1024,
    },
    # Hybrid linear attention: Gated DeltaNet blocks and gated full-attention blocks
    # (layer_types). Qwen3.5 at its real 3:1 ratio (full_attention_interval 4, 4 blocks); the
    # MoE ones one block of each kind. Linear-attention heads narrower than published (128)
    # but with value heads a multiple of the key heads, as published.
    "qwen3_5_text": {
        "model_type": "qwen3_5_text",
        "hidden_size": 512,
        "intermediate_size": 1536,
        "num_attention_heads": 4,
        "num_key_value_heads": 1,
        "head_dim": 128,
        "linear_num_key_heads": 4,
        "linear_num_value_heads": 8,
        "linear_key_head_dim": 64,
        "linear_value_head_dim": 64,
        "num_hidden_layers": 4,
        "vocab_size": 16000,
        "max_position_embeddings": 8192,
        "tie_word_embeddings": True,
    },
    "qwen3_5_moe_text": {
        "model_type": "qwen3_5_moe_text",
        "hidden_size": 512,
        "num_attention_heads": 4,
        "num_key_value_heads": 1,
        "head_dim": 128,
        "linear_num_key_heads": 2,
        "linear_num_value_heads": 4,
        "linear_key_head_dim": 128,
        "linear_value_head_dim": 128,
        "moe_intermediate_size": 192,
        "shared_expert_intermediate_size": 192,
        "num_experts": 8,
        "num_experts_per_tok": 2,
        "num_hidden_layers": 2,
        "layer_types": ["linear_attention", "full_attention"],
        "vocab_size": 16000,
        "max_position_embeddings": 8192,
    },
    # LFM2: gated short convolutions, attention at full_attn_idxs (as LFM2-1.2B: the third
    # block first); block_ff_dim auto-adjusted to 2/3, rounded to block_multiple_of
    "lfm2": {
        "model_type": "lfm2",
        "hidden_size": 512,
        "intermediate_size": 2304,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "num_hidden_layers": 4,
        "full_attn_idxs": [2],
        "conv_L_cache": 3,
        "vocab_size": 16000,
        "max_position_embeddings": 8192,
    },
    # OLMo Hybrid: Gated DeltaNet blocks and OLMo 2 attention blocks (every fourth)
    "olmo_hybrid": {
        "model_type": "olmo_hybrid",
        "hidden_size": 512,
        "intermediate_size": 1376,
        "num_attention_heads": 8,
        "num_key_value_heads": 8,
        "linear_num_key_heads": 4,
        "linear_num_value_heads": 4,
        "num_hidden_layers": 4,
        "vocab_size": 16000,
        "max_position_embeddings": 8192,
        "pad_token_id": 0,
        "eos_token_id": 1,
    },
    "qwen3_next": {
        "model_type": "qwen3_next",
        "hidden_size": 512,
        "intermediate_size": 1536,
        "num_attention_heads": 4,
        "num_key_value_heads": 1,
        "head_dim": 128,
        "linear_num_key_heads": 4,
        "linear_num_value_heads": 8,
        "linear_key_head_dim": 64,
        "linear_value_head_dim": 64,
        "moe_intermediate_size": 192,
        "shared_expert_intermediate_size": 192,
        "num_experts": 8,
        "num_experts_per_tok": 2,
        "num_hidden_layers": 2,
        "full_attention_interval": 2,
        "vocab_size": 16000,
        "max_position_embeddings": 8192,
    },
}
# Nemotron-H: one sublayer per block (Mamba-2 "M", attention "*", relu2 MLP "-"), the
# published 8B's pattern start; Mamba-2 heads, groups and state narrower than published
ACCEPTED_FAMILIES["nemotron_h"] = {
    "model_type": "nemotron_h",
    "hidden_size": 512,
    "intermediate_size": 1536,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "mamba_num_heads": 16,
    "mamba_head_dim": 64,
    "n_groups": 2,
    "ssm_state_size": 64,
    "conv_kernel": 4,
    "chunk_size": 128,
    "hybrid_override_pattern": "M-M-M*-",
    "num_hidden_layers": 7,
    "vocab_size": 16000,
    "max_position_embeddings": 8192,
}
# Nemotron-H's MoE blocks ("E", Nemotron 3's layout: 3-D non-gated relu2 experts beside a
# shared expert, sigmoid router) among Mamba-2, attention and MLP blocks
ACCEPTED_FAMILIES["nemotron_h_moe"] = {
    **ACCEPTED_FAMILIES["nemotron_h"],
    "hybrid_override_pattern": "MEM*E-",
    "num_hidden_layers": 6,
    "n_routed_experts": 8,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 256,
    "moe_shared_expert_intermediate_size": 512,
    "n_group": 1,
    "topk_group": 1,
}
# LFM2-MoE (LFM2-8B-A1B's layout): short-convolution and attention blocks, dense MLPs in the
# first num_dense_layers blocks, then 3-D routed SwiGLU experts behind a sigmoid router
ACCEPTED_FAMILIES["lfm2_moe"] = {
    "model_type": "lfm2_moe",
    "hidden_size": 512,
    "intermediate_size": 1536,
    "moe_intermediate_size": 256,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "num_hidden_layers": 5,
    "layer_types": ["conv", "conv", "full_attention", "conv", "full_attention"],
    "num_dense_layers": 2,
    "num_experts": 8,
    "num_experts_per_tok": 2,
    "conv_L_cache": 3,
    "vocab_size": 16000,
    "max_position_embeddings": 8192,
}
# Falcon-H1: a Mamba-2 mixer beside the attention in every block, with muP multipliers
# that differ from 1 (they hold no weights and save nothing); narrower than published
ACCEPTED_FAMILIES["falcon_h1"] = {
    "model_type": "falcon_h1",
    "hidden_size": 512,
    "intermediate_size": 1536,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "num_hidden_layers": 2,
    "mamba_d_ssm": 1024,
    "mamba_n_heads": 16,
    "mamba_d_head": 64,
    "mamba_n_groups": 1,
    "mamba_d_state": 64,
    "mamba_d_conv": 4,
    "mamba_chunk_size": 128,
    "vocab_size": 16000,
    "max_position_embeddings": 8192,
    "key_multiplier": 0.5,
    "attention_in_multiplier": 0.8,
    "attention_out_multiplier": 0.9,
    "ssm_in_multiplier": 1.25,
    "ssm_out_multiplier": 0.7,
    "ssm_multipliers": [0.5, 1.5, 0.25, 0.75, 2.0],
    "mlp_multipliers": [0.5, 2.0],
    "embedding_multiplier": 4.0,
    "lm_head_multiplier": 0.125,
}
# Granite 4.0 hybrid (H-Tiny's layout): Mamba-2 and attention blocks (no RoPE), each with 3-D
# routed experts beside a shared MLP; peft takes "all-linear" here, out_proj included, whose
# adapter the fused Mamba-2 kernel skips
ACCEPTED_FAMILIES["granitemoehybrid"] = {
    "model_type": "granitemoehybrid",
    "hidden_size": 512,
    "intermediate_size": 256,
    "shared_intermediate_size": 1024,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "num_hidden_layers": 4,
    "layer_types": ["mamba", "mamba", "mamba", "attention"],
    "mamba_n_heads": 16,
    "mamba_d_head": 64,
    "mamba_n_groups": 1,
    "mamba_d_state": 64,
    "mamba_d_conv": 4,
    "mamba_chunk_size": 128,
    "num_local_experts": 8,
    "num_experts_per_tok": 2,
    "vocab_size": 16000,
    "max_position_embeddings": 8192,
    "position_embedding_type": "nope",
    "embedding_multiplier": 12.0,
    "residual_multiplier": 0.22,
    "attention_multiplier": 0.0078125,
    "logits_scaling": 4.0,
}
# multi-head latent attention with q and kv ranks, a dense first block then an MoE block with a
# shared expert and group-limited sigmoid routing (DeepSeek-V3's layout at reduced size)
ACCEPTED_FAMILIES["deepseek_v3"] = {
    "model_type": "deepseek_v3",
    "hidden_size": 512,
    "intermediate_size": 1024,
    "moe_intermediate_size": 192,
    "num_hidden_layers": 2,
    "num_attention_heads": 8,
    "num_key_value_heads": 8,
    "q_lora_rank": 192,
    "kv_lora_rank": 128,
    "qk_nope_head_dim": 64,
    "qk_rope_head_dim": 32,
    "v_head_dim": 64,
    "n_routed_experts": 8,
    "num_experts_per_tok": 2,
    "n_shared_experts": 1,
    "n_group": 2,
    "topk_group": 1,
    "first_k_dense_replace": 1,
    "vocab_size": 8000,
    "max_position_embeddings": 4096,
    "pad_token_id": 0,
}
# Kimi Linear: Kimi Delta Attention blocks (per-channel decay, low-rank gates) and latent
# attention without RoPE, as the published config.json names its keys (linear_attn_config's
# 1-based block lists, num_experts_per_token, num_shared_experts); a dense first block
ACCEPTED_FAMILIES["kimi_linear"] = {
    "model_type": "kimi_linear",
    "hidden_size": 512,
    "intermediate_size": 1024,
    "moe_intermediate_size": 192,
    "num_hidden_layers": 3,
    "num_attention_heads": 8,
    "num_key_value_heads": 8,
    "q_lora_rank": None,
    "kv_lora_rank": 128,
    "qk_nope_head_dim": 64,
    "qk_rope_head_dim": 32,
    "v_head_dim": 64,
    "num_experts": 8,
    "num_experts_per_token": 2,
    "num_shared_experts": 1,
    "first_k_dense_replace": 1,
    "linear_attn_config": {
        "full_attn_layers": [3],
        "kda_layers": [1, 2],
        "num_heads": 4,
        "head_dim": 64,
        "short_conv_kernel_size": 4,
    },
    "vocab_size": 8000,
    "model_max_length": 4096,
    "pad_token_id": 0,
}
# Mistral 4: DeepSeek-V3's latent attention and MoE with a softmax router, every block sparse
ACCEPTED_FAMILIES["mistral4"] = {
    **{k: v for k, v in ACCEPTED_FAMILIES["deepseek_v3"].items() if k != "first_k_dense_replace"},
    "model_type": "mistral4",
    "n_group": 1,
}
# GLM-4.7-Flash: latent attention without a q rank, dense and sparse blocks by mlp_layer_types
ACCEPTED_FAMILIES["glm4_moe_lite"] = {
    **{k: v for k, v in ACCEPTED_FAMILIES["deepseek_v3"].items() if k != "first_k_dense_replace"},
    "model_type": "glm4_moe_lite",
    "q_lora_rank": None,
    "n_group": 1,
    "mlp_layer_types": ["dense", "sparse"],
}
# GLM-4.5's block: q/k/v biases, per-head q/k norm, half-rotary heads, DeepSeek's MoE layout
ACCEPTED_FAMILIES["glm4_moe"] = {
    "model_type": "glm4_moe",
    "hidden_size": 512,
    "intermediate_size": 1024,
    "moe_intermediate_size": 192,
    "num_hidden_layers": 2,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "partial_rotary_factor": 0.5,
    "attention_bias": True,
    "use_qk_norm": True,
    "n_routed_experts": 8,
    "num_experts_per_tok": 2,
    "n_shared_experts": 1,
    "first_k_dense_replace": 1,
    "vocab_size": 8000,
    "max_position_embeddings": 4096,
    "pad_token_id": 0,
}
# MiniMax-M2: whole-projection q/k norms, sigmoid routing with a score-correction buffer
ACCEPTED_FAMILIES["minimax_m2"] = {
    "model_type": "minimax_m2",
    "hidden_size": 512,
    "intermediate_size": 192,
    "num_hidden_layers": 2,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "num_local_experts": 8,
    "num_experts_per_tok": 2,
    "vocab_size": 8000,
    "max_position_embeddings": 4096,
    "pad_token_id": 0,
}
# OLMo 3: OLMo 2's block with a sliding-window layer (window above the swept lengths)
ACCEPTED_FAMILIES["olmo3"] = {
    "model_type": "olmo3",
    "hidden_size": 512,
    "intermediate_size": 1376,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "num_hidden_layers": 2,
    "vocab_size": 8000,
    "max_position_embeddings": 4096,
    "sliding_window": 4096,
    "layer_types": ["sliding_attention", "full_attention"],
    "pad_token_id": 0,
}
ACCEPTED_FAMILIES["ministral3"] = {
    "model_type": "ministral3",
    "hidden_size": 512,
    "intermediate_size": 1376,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "num_hidden_layers": 2,
    "vocab_size": 8000,
    "max_position_embeddings": 8192,
    "pad_token_id": 0,
}
# Gemma 4 (transformers 5.17 modeling_gemma4): Gemma 3n-style per-layer inputs, the last two
# blocks reading the keys and values of the first two with a double-wide MLP, sliding (head_dim
# 64) and full (global_head_dim 128) blocks, final logit soft-capping (E2B / E4B's layout)
ACCEPTED_FAMILIES["gemma4_text"] = {
    "model_type": "gemma4_text",
    "hidden_size": 512,
    "intermediate_size": 1024,
    "num_attention_heads": 4,
    "num_key_value_heads": 1,
    "head_dim": 64,
    "global_head_dim": 128,
    "num_hidden_layers": 4,
    "layer_types": ["sliding_attention", "full_attention"] * 2,
    "num_kv_shared_layers": 2,
    "use_double_wide_mlp": True,
    "hidden_size_per_layer_input": 64,
    "vocab_size_per_layer_input": 8000,
    "vocab_size": 8000,
    "max_position_embeddings": 8192,
    "sliding_window": 4096,
    "final_logit_softcapping": 30.0,
    "pad_token_id": 0,
}
# Gemma 4's MoE block beside the dense MLP, full blocks whose keys are the values (one global
# kv head), no per-layer inputs (26B-A4B / 31B's layout)
ACCEPTED_FAMILIES["gemma4_moe"] = {
    "model_type": "gemma4_text",
    "hidden_size": 512,
    "intermediate_size": 768,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "num_global_key_value_heads": 1,
    "attention_k_eq_v": True,
    "head_dim": 64,
    "global_head_dim": 128,
    "num_hidden_layers": 2,
    "layer_types": ["sliding_attention", "full_attention"],
    "hidden_size_per_layer_input": 0,
    "enable_moe_block": True,
    "num_experts": 8,
    "top_k_experts": 2,
    "moe_intermediate_size": 192,
    "vocab_size": 8000,
    "max_position_embeddings": 8192,
    "sliding_window": 4096,
    "final_logit_softcapping": 30.0,
    "pad_token_id": 0,
}
# Seed-OSS: q/k/v biases, residual and attention dropout 0.1 (its published configs)
ACCEPTED_FAMILIES["seed_oss"] = {
    "model_type": "seed_oss",
    "hidden_size": 512,
    "intermediate_size": 1376,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "num_hidden_layers": 2,
    "vocab_size": 8000,
    "max_position_embeddings": 8192,
    "pad_token_id": 0,
}
# DeepSeek sparse attention: DeepSeek-V3's reduced layout with a lightning indexer in every block
# (index heads and width as published relative to the model: 64 x 128 on 128 heads), fewer
# keys kept than the swept lengths
ACCEPTED_FAMILIES["deepseek_v32"] = {
    **ACCEPTED_FAMILIES["deepseek_v3"],
    "model_type": "deepseek_v32",
    "index_n_heads": 4,
    "index_head_dim": 64,
    "index_topk": 128,
}
# GLM-5: the same with a shared-indexer block (indexer_types), one dense block, no group routing
ACCEPTED_FAMILIES["glm_moe_dsa"] = {
    **{k: v for k, v in ACCEPTED_FAMILIES["deepseek_v32"].items() if k != "first_k_dense_replace"},
    "model_type": "glm_moe_dsa",
    "num_hidden_layers": 3,
    "mlp_layer_types": ["dense", "sparse", "sparse"],
    "indexer_types": ["full", "shared", "full"],
    "n_group": 1,
    "v_head_dim": 96,
}
# DeepSeek-V4 (V4-Flash's layout at reduced size): one block of each attention kind (heavily
# compressed, compressed sparse with its indexer, sliding window only), four residual streams
# with the published 20 Sinkhorn iterations, a hash-routed first block, a grouped output
# projection; windows and compression rates short enough for the swept lengths to fill them
ACCEPTED_FAMILIES["deepseek_v4"] = {
    "model_type": "deepseek_v4",
    "hidden_size": 512,
    "moe_intermediate_size": 192,
    "num_hidden_layers": 3,
    "num_attention_heads": 8,
    "num_key_value_heads": 1,
    "head_dim": 128,
    "q_lora_rank": 192,
    "n_routed_experts": 8,
    "num_experts_per_tok": 2,
    "n_shared_experts": 1,
    "o_groups": 2,
    "o_lora_rank": 128,
    "index_n_heads": 4,
    "index_head_dim": 32,
    "index_topk": 16,
    "sliding_window": 64,
    "compress_rates": {"compressed_sparse_attention": 4, "heavily_compressed_attention": 32},
    "layer_types": [
        "heavily_compressed_attention",
        "compressed_sparse_attention",
        "sliding_attention",
    ],
    "mlp_layer_types": ["hash_moe", "moe", "moe"],
    "hc_mult": 4,
    "hc_sinkhorn_iters": 20,
    "vocab_size": 8000,
    "max_position_embeddings": 4096,
    "pad_token_id": 0,
}
FAMILY_ALIASES = {"RefinedWeb": "falcon", "RefinedWebModel": "falcon", "kimi_k2": "deepseek_v3"}
"""model_types calc reads with another family's reader (Falcon's remote-code names): swept
through that family."""

# attention-only LoRA targets by the family's module names (q, k, v, o or fused qkv, output)
ATTENTION_TARGETS = {
    "lfm2": ["q_proj", "k_proj", "v_proj", "out_proj"],
    "lfm2_moe": ["q_proj", "k_proj", "v_proj", "out_proj"],
    "phi3": ["qkv_proj", "o_proj"],
    "phi": ["q_proj", "k_proj", "v_proj", "dense"],
    "gpt_neox": ["query_key_value", "dense"],
    "falcon": ["query_key_value", "dense"],
    "bloom": ["query_key_value", "dense"],
    "gpt2": ["c_attn"],
    "deepseek_v3": ["q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj"],
    "mistral4": ["q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj"],
    "glm4_moe_lite": ["q_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj"],
    "deepseek_v32": ["q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj"],
    "glm_moe_dsa": ["q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj"],
    # the grouped o_a_proj left out: peft fails on it (calc.lora.GROUPED_OUTPUT_REFUSED)
    "deepseek_v4": ["q_a_proj", "q_b_proj", "kv_proj", "o_b_proj"],
}
# "all-linear" where peft cannot take it: peft 0.21 wraps Llama 4's router (an nn.Linear whose
# forward returns a tuple) and fails in its forward (lora/layer.py: ``result.dtype`` of a
# tuple, AttributeError); every other linear of the block instead
ALL_LINEAR_TARGETS = {
    # every nn.Linear but the grouped output projection o_a_proj, which peft adapts and then
    # fails on (calc.lora.GROUPED_OUTPUT_REFUSED)
    "deepseek_v4": [
        "q_a_proj",
        "q_b_proj",
        "kv_proj",
        "gate_proj",
        "o_b_proj",
        "weights_proj",
        "up_proj",
        "down_proj",
    ],
    "llama4_text": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
    # peft 0.21 refuses the Mamba-2 out_proj (_check_lora_target_modules_mamba), which
    # "all-linear" includes: every other linear instead
    "nemotron_h": ["q_proj", "k_proj", "v_proj", "o_proj", "in_proj", "up_proj", "down_proj"],
    "nemotron_h_moe": ["q_proj", "k_proj", "v_proj", "o_proj", "in_proj", "up_proj", "down_proj"],
    "falcon_h1": [
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
        "in_proj",
        "gate_proj",
        "up_proj",
        "down_proj",
    ],
}
# transformers 5.17 runs these only with eager attention (``_supports_sdpa`` is False:
# GptOssPreTrainedModel, learned attention sinks; BloomPreTrainedModel, ALiBi;
# DeepseekV4PreTrainedModel, sinks and compressed entries joined to the keys)
EAGER_ONLY = ("gpt_oss", "bloom", "deepseek_v4")
_LONG_SEQUENCE_HEAVY: dict[str, tuple[dict, dict]] = {
    "lora-r8-attn-s2048": (
        {"method": "lora", "lora_rank": 8, "lora_targets": ATTENTION_ONLY, "seq_len": 2048},
        {},
    ),
    "lora-r16-all-linear-b2-s1024": (
        {
            "method": "lora",
            "lora_rank": 16,
            "lora_targets": "all-linear",
            "micro_batch_size": 2,
            "seq_len": 1024,
        },
        {},
    ),
    "full-s2048": ({"method": "full", "seq_len": 2048}, {}),
}
"""Long sequences on attention-only LoRA, all-linear LoRA and full fine-tuning: where the saved
activations set the peak (gpt-oss, the hybrids)."""
_EAGER_ALL_LINEAR_S1024: dict[str, tuple[dict, dict]] = {
    "lora-r16-all-linear-eager-s1024": (
        {
            "method": "lora",
            "lora_rank": 16,
            "lora_targets": "all-linear",
            "seq_len": 1024,
            "attention": "eager",
        },
        {},
    ),
}
# setups where the saved activations set the peak, on families whose count has traits of its
# own (gpt-oss: clamped expert gate, eager softmax with a sink column, fp32 norm scaling)
ACTIVATION_HEAVY: dict[str, dict[str, tuple[dict, dict]]] = {
    "gpt_oss": dict(_LONG_SEQUENCE_HEAVY),
    # multi-head latent attention's saved tensors (the kept kv_b_proj output, latent norms)
    "deepseek_v3": {
        "lora-r8-attn-s2048": _LONG_SEQUENCE_HEAVY["lora-r8-attn-s2048"],
        "full-s2048": _LONG_SEQUENCE_HEAVY["full-s2048"],
        **_EAGER_ALL_LINEAR_S1024,
    },
    # residual and attention-probability dropout
    "seed_oss": {**_EAGER_ALL_LINEAR_S1024, "full-s2048": _LONG_SEQUENCE_HEAVY["full-s2048"]},
}
_SPARSE_HEAVY = {
    "lora-r8-attn-s1024": (
        {"method": "lora", "lora_rank": 8, "lora_targets": ATTENTION_ONLY, "seq_len": 1024},
        {},
    ),
    "full-s1024": ({"method": "full", "seq_len": 1024}, {}),
    "full-ckpt-b2-s512": (
        {"method": "full", "seq_len": 512, "micro_batch_size": 2, "gradient_checkpointing": True},
        {},
    ),
    "lora-r16-all-linear-b2-s512": (
        {
            "method": "lora",
            "lora_rank": 16,
            "lora_targets": "all-linear",
            "micro_batch_size": 2,
            "seq_len": 512,
        },
        {},
    ),
}
SPARSE_FAMILIES = ("deepseek_v32", "glm_moe_dsa")
"""Families with DeepSeek sparse attention: traced with CUDA's SDPA mask conversion
(tools/oracle/sparse_attention.py), and swept where the indexer and the s x s masks set the
peak."""
ACTIVATION_HEAVY.update({family: _SPARSE_HEAVY for family in SPARSE_FAMILIES})
HYBRID_FAMILIES = (
    "qwen3_5_text",
    "qwen3_5_moe_text",
    "qwen3_next",
    "lfm2",
    "lfm2_moe",
    "olmo_hybrid",
    "nemotron_h",
    "falcon_h1",
    "granitemoehybrid",
    "kimi_linear",
)
"""Families with Gated DeltaNet, short-convolution or Mamba-2 blocks: traced with the kernels' memory
(tools/oracle/linear_attention.py), and swept where activations set the peak too."""
_HYBRID_HEAVY = {
    **_LONG_SEQUENCE_HEAVY,
    "full-ckpt-s2048": ({"method": "full", "seq_len": 2048, "gradient_checkpointing": True}, {}),
}
ACTIVATION_HEAVY.update({family: _HYBRID_HEAVY for family in HYBRID_FAMILIES})
ACTIVATION_HEAVY["nemotron_h_moe"] = _HYBRID_HEAVY
# Kimi Linear: the MLP names reach the shared experts and the dense MLP only (peft 0.21 converts
# no target of this family to the 3-D experts)
ACTIVATION_HEAVY["kimi_linear"] = {
    **_HYBRID_HEAVY,
    "lora-r16-mlp-names-s1024": (
        {
            "method": "lora",
            "lora_rank": 16,
            "lora_targets": ["gate_proj", "up_proj", "down_proj"],
            "moe_expert_layout": "fused-3d",
            "seq_len": 1024,
        },
        {},
    ),
}
# Gemma 4: the library's default LoRA targets, then the hybrids' lengths, where the saved
# activations (the per-layer inputs, the kv-shared blocks' attention, soft-capped logits) set the
# peak
_GEMMA4_HEAVY = {"lora-r16-default": ({"method": "lora", "lora_rank": 16}, {}), **_HYBRID_HEAVY}
ACTIVATION_HEAVY.update({"gemma4_text": _GEMMA4_HEAVY, "gemma4_moe": _GEMMA4_HEAVY})
# DeepSeek-V4: where the saved activations set the peak (the s x (s + s/m) eager softmax, the
# hyper-connections' streams and Sinkhorn tensors), with checkpointing at that length
ACTIVATION_HEAVY["deepseek_v4"] = {
    **_LONG_SEQUENCE_HEAVY,
    "full-ckpt-s2048": ({"method": "full", "seq_len": 2048, "gradient_checkpointing": True}, {}),
}
# Sliding windows the rows reach (window 128, rows of 512): under SDPA transformers 5.17 hands
# the windowed blocks a mask tensor (masking_utils._ignore_causal_mask_sdpa keeps it once the
# keys reach the window) and repeats their grouped k/v; CUDA's SDPA copies the boolean mask into
# the query's dtype on every call and the kernel saves the copy (traced with
# tools/oracle/sparse_attention.py's conversion)
WINDOW_FAMILIES: dict[str, dict] = {
    "gemma2": {**FAMILIES["gemma2"], "sliding_window": 128},
    "gemma3": {
        **FAMILIES["gemma3"],
        "sliding_window": 128,
        "layer_types": ["sliding_attention", "full_attention"],
    },
    "mistral": {**FAMILIES["mistral"], "sliding_window": 128},
    "qwen2": {
        **FAMILIES["qwen2"],
        "use_sliding_window": True,
        "sliding_window": 128,
        "max_window_layers": 1,
    },
    "olmo3": {**ACCEPTED_FAMILIES["olmo3"], "sliding_window": 128},
    "gemma4_text": {**ACCEPTED_FAMILIES["gemma4_text"], "sliding_window": 128},
    "gemma4_moe": {**ACCEPTED_FAMILIES["gemma4_moe"], "sliding_window": 128},
}
"""Families whose windowed blocks run otherwise under SDPA once the rows reach the window, each
with a window of 128 (Qwen2: ``use_sliding_window`` from the second block on)."""
WINDOW_VARIANTS = {
    "full-window-b2-s512": ({"method": "full", "micro_batch_size": 2, "seq_len": 512}, {}),
    "full-ckpt-window-b2-s512": (
        {"method": "full", "micro_batch_size": 2, "seq_len": 512, "gradient_checkpointing": True},
        {},
    ),
    "lora-r16-window-b2-s512": (
        {"method": "lora", "lora_rank": 16, "micro_batch_size": 2, "seq_len": 512},
        {},
    ),
}
MOE_FAMILIES = (
    "mixtral",
    "qwen2_moe",
    "qwen3_moe",
    "gpt_oss",
    "llama4_text",
    "qwen3_5_moe_text",
    "qwen3_next",
    "deepseek_v3",
    "glm4_moe",
    "minimax_m2",
    "mistral4",
    "glm4_moe_lite",
    "granitemoehybrid",
    "deepseek_v32",
    "glm_moe_dsa",
    "nemotron_h_moe",
    "lfm2_moe",
    "kimi_linear",
    "deepseek_v4",
)

# name -> (request overrides, oracle options)
VARIANTS: dict[str, tuple[dict, dict]] = {
    "full": ({"method": "full"}, {}),
    "full-ckpt": ({"method": "full", "gradient_checkpointing": True}, {}),
    "full-ckpt-reentrant": (
        {"method": "full", "gradient_checkpointing": True},
        {"reentrant": True},
    ),
    "full-mixed": ({"method": "full", "precision": "bf16-mixed"}, {}),
    "full-eager": ({"method": "full", "attention": "eager"}, {}),
    "full-b2-s512": ({"method": "full", "micro_batch_size": 2, "seq_len": 512}, {}),
    "full-outputs-kept": ({"method": "full", "loss_outputs_kept": True}, {}),
    "full-fused-adamw": ({"method": "full", "optimizer_fused": True}, {}),
    "lora-r16": ({"method": "lora", "lora_rank": 16}, {}),
    "lora-r16-fp32": ({"method": "lora", "lora_rank": 16, "lora_adapter_dtype": "fp32"}, {}),
    "lora-r64-fp32-s512": (
        {"method": "lora", "lora_rank": 64, "lora_adapter_dtype": "fp32", "seq_len": 512},
        {},
    ),
    "lora-r8-attn": ({"method": "lora", "lora_rank": 8, "lora_targets": ATTENTION_ONLY}, {}),
    "lora-dropout": ({"method": "lora", "lora_rank": 16, "lora_dropout": 0.1}, {}),
    "lora-ckpt": ({"method": "lora", "lora_rank": 16, "gradient_checkpointing": True}, {}),
    "lora-ckpt-reentrant": (
        {"method": "lora", "lora_rank": 16, "gradient_checkpointing": True},
        {"reentrant": True},
    ),
    "lora-mixed": ({"method": "lora", "lora_rank": 16, "precision": "bf16-mixed"}, {}),
    "lora-eager": ({"method": "lora", "lora_rank": 16, "attention": "eager"}, {}),
    # eager attention's score tensors at length: the softmax's moments in the forward and the
    # backward outgrow the end of the forward (calc.activations.eager_scores_bytes_per_token)
    "lora-eager-ckpt-s2048": (
        {
            "method": "lora",
            "lora_rank": 16,
            "attention": "eager",
            "gradient_checkpointing": True,
            "seq_len": 2048,
        },
        {},
    ),
    "lora-eager-s2048": (
        {"method": "lora", "lora_rank": 16, "attention": "eager", "seq_len": 2048},
        {},
    ),
    "lora-fp32-ckpt-b2": (
        {
            "method": "lora",
            "lora_rank": 32,
            "lora_adapter_dtype": "fp32",
            "gradient_checkpointing": True,
            "micro_batch_size": 2,
        },
        {},
    ),
    # the library profiles of calc.frameworks that describe this code, keys left to them
    "full-hf-trainer": ({"method": "full", "framework": "hf-trainer"}, {}),
    "lora-hf-custom-loop": ({"method": "lora", "lora_rank": 16, "framework": "hf-custom-loop"}, {}),
    # the tools built on the Trainer, TRL's SFTTrainer (its fused LM head and preparation, run
    # from the installed trl) and a hand-written PyTorch loop, keys left to their profiles
    "lora-trl-sft": ({"method": "lora", "lora_rank": 16, "framework": "trl-sft"}, {}),
    "full-trl-sft": ({"method": "full", "framework": "trl-sft"}, {}),
    "lora-axolotl": ({"method": "lora", "lora_rank": 16, "framework": "axolotl"}, {}),
    "lora-llama-factory": ({"method": "lora", "lora_rank": 16, "framework": "llama-factory"}, {}),
    "lora-ms-swift": ({"method": "lora", "lora_rank": 16, "framework": "ms-swift"}, {}),
    "lora-pytorch-loop": ({"method": "lora", "lora_rank": 16, "framework": "pytorch-loop"}, {}),
    # a hand-written loop's cross-entropy on the model's bf16 logits (loss_on_16bit_logits)
    "lora-loss16": ({"method": "lora", "lora_rank": 16, "loss_on_16bit_logits": True}, {}),
    "full-loss16-outputs-kept": (
        {"method": "full", "loss_on_16bit_logits": True, "loss_outputs_kept": True},
        {},
    ),
}

# QLoRA (tools/oracle/qlora.py: a model of bitsandbytes 0.49.2's Linear4bit, not the kernel).
# peft puts adapters in the 4-bit layer's bf16 compute dtype and, by default
# (autocast_adapter_dtype=True), upcasts them to fp32: lora_adapter_dtype "fp32" ("base" with
# autocast_adapter_dtype=False); precision "fp32" is what peft's prepare_model_for_kbit_training
# makes of a bf16 model (non-quantized parameters in fp32), "bf16-mixed" the same under autocast.
QLORA_VARIANTS: dict[str, tuple[dict, dict]] = {
    "qlora-r16": ({"method": "qlora", "lora_rank": 16, "lora_adapter_dtype": "fp32"}, {}),
    "qlora-ckpt": (
        {
            "method": "qlora",
            "lora_rank": 16,
            "lora_adapter_dtype": "fp32",
            "gradient_checkpointing": True,
        },
        {},
    ),
    "qlora-r64-nodq-s512": (
        {
            "method": "qlora",
            "lora_rank": 64,
            "lora_adapter_dtype": "fp32",
            "qlora_double_quant": False,
            "seq_len": 512,
        },
        {},
    ),
    "qlora-r8-attn-bf16-adapters": (
        {
            "method": "qlora",
            "lora_rank": 8,
            "lora_targets": ATTENTION_ONLY,
            "lora_adapter_dtype": "base",
        },
        {},
    ),
    "qlora-prepared-ckpt-reentrant": (
        {
            "method": "qlora",
            "lora_rank": 16,
            "lora_adapter_dtype": "fp32",
            "precision": "fp32",
            "gradient_checkpointing": True,
        },
        {"reentrant": True},
    ),
    # peft's prepare_model_for_kbit_training on the bf16 model itself (qlora_prepare_kbit)
    "qlora-kbit": (
        {
            "method": "qlora",
            "lora_rank": 16,
            "lora_adapter_dtype": "fp32",
            "qlora_prepare_kbit": True,
        },
        {},
    ),
    "qlora-kbit-ckpt-reentrant": (
        {
            "method": "qlora",
            "lora_rank": 16,
            "lora_adapter_dtype": "fp32",
            "qlora_prepare_kbit": True,
            "gradient_checkpointing": True,
        },
        {"reentrant": True},
    ),
    # the same fp32 parameters under autocast (calc's bf16-mixed: 4-bit outputs in fp32)
    "qlora-mixed": (
        {
            "method": "qlora",
            "lora_rank": 16,
            "lora_adapter_dtype": "fp32",
            "precision": "bf16-mixed",
        },
        {},
    ),
    "qlora-mixed-ckpt": (
        {
            "method": "qlora",
            "lora_rank": 16,
            "lora_adapter_dtype": "fp32",
            "precision": "bf16-mixed",
            "gradient_checkpointing": True,
        },
        {},
    ),
}
# a few more on one family: the prepare_model_for_kbit_training call itself, batch, dropout, eager
QLORA_EXTRA: dict[str, tuple[dict, dict]] = {
    "qlora-prepare-kbit": (
        {"method": "qlora", "lora_rank": 16, "lora_adapter_dtype": "fp32", "precision": "fp32"},
        {"prepare_kbit": True},
    ),
    "qlora-b2-dropout": (
        {
            "method": "qlora",
            "lora_rank": 32,
            "lora_adapter_dtype": "fp32",
            "micro_batch_size": 2,
            "lora_dropout": 0.05,
        },
        {},
    ),
    "qlora-eager-ckpt": (
        {
            "method": "qlora",
            "lora_rank": 16,
            "lora_adapter_dtype": "fp32",
            "attention": "eager",
            "gradient_checkpointing": True,
        },
        {},
    ),
    "qlora-kbit-bf16-adapters-loss16": (
        {
            "method": "qlora",
            "lora_rank": 16,
            "lora_adapter_dtype": "base",
            "qlora_prepare_kbit": True,
            "loss_on_16bit_logits": True,
        },
        {},
    ),
    "qlora-kbit-b2-ckpt": (
        {
            "method": "qlora",
            "lora_rank": 8,
            "lora_adapter_dtype": "fp32",
            "qlora_prepare_kbit": True,
            "micro_batch_size": 2,
            "gradient_checkpointing": True,
        },
        {},
    ),
    "qlora-hf-custom-loop": (
        {"method": "qlora", "lora_rank": 16, "framework": "hf-custom-loop"},
        {},
    ),
    "qlora-trl-sft": ({"method": "qlora", "lora_rank": 16, "framework": "trl-sft"}, {}),
    "qlora-axolotl": ({"method": "qlora", "lora_rank": 16, "framework": "axolotl"}, {}),
    "qlora-pytorch-loop": ({"method": "qlora", "lora_rank": 16, "framework": "pytorch-loop"}, {}),
}

GENERATION_VARIANTS: dict[str, tuple[dict, dict]] = {
    "lora-hf-trainer-4": ({"method": "lora", "lora_rank": 16, "framework": "hf-trainer-4"}, {}),
    "lora-ckpt-hf-trainer-4": (
        {
            "method": "lora",
            "lora_rank": 16,
            "gradient_checkpointing": True,
            "framework": "hf-trainer-4",
        },
        {},
    ),
    "full-hf-trainer-4": ({"method": "full", "framework": "hf-trainer-4"}, {}),
    "lora-pytorch-loop-4": ({"method": "lora", "lora_rank": 16, "framework": "pytorch-loop-4"}, {}),
    "full-pytorch-loop-4": ({"method": "full", "framework": "pytorch-loop-4"}, {}),
}
"""The transformers 4 profiles: traced in a venv of ``tools/requirements-oracle-transformers4.txt``
(``tools/oracle/transformers4.py``), listed as unsupported (with the reason) in the transformers 5
one. Dense families with and without grouped k/v (which 4.x expands with ``repeat_kv``)."""
GENERATION_FAMILIES = ("llama", "llama3-gqa-tied", "qwen2", "qwen3")
GENERATION_MOE_VARIANTS: dict[str, tuple[dict, dict]] = {
    "lora-all-linear-hf-trainer-4": (
        {
            "method": "lora",
            "lora_rank": 16,
            "lora_targets": "all-linear",
            "framework": "hf-trainer-4",
        },
        {},
    ),
    "lora-all-linear-ckpt-hf-trainer-4": (
        {
            "method": "lora",
            "lora_rank": 16,
            "lora_targets": "all-linear",
            "gradient_checkpointing": True,
            "framework": "hf-trainer-4",
        },
        {},
    ),
    "full-hf-trainer-4": ({"method": "full", "framework": "hf-trainer-4"}, {}),
    "lora-all-linear-pytorch-loop-4": (
        {
            "method": "lora",
            "lora_rank": 16,
            "lora_targets": "all-linear",
            "framework": "pytorch-loop-4",
        },
        {},
    ),
}
"""The transformers 4 profiles on MoE families: one ``nn.Linear`` per expert matrix, LoRA on
each (``moe_expert_layout="per-expert-modules"``, set by the profiles)."""
GENERATION_MOE_FAMILIES = ("qwen3_moe", "mixtral")
TORCHTUNE_VARIANTS: dict[str, tuple[dict, dict]] = {
    "lora-torchtune": (
        {"method": "lora", "lora_rank": 16, "lora_targets": "all-linear", "framework": "torchtune"},
        {},
    ),
    "lora-ckpt-torchtune": (
        {
            "method": "lora",
            "lora_rank": 16,
            "lora_targets": "all-linear",
            "gradient_checkpointing": True,
            "framework": "torchtune",
        },
        {},
    ),
    "lora-attn-torchtune": (
        {
            "method": "lora",
            "lora_rank": 8,
            "lora_targets": ATTENTION_ONLY,
            "framework": "torchtune",
        },
        {},
    ),
    "full-torchtune": ({"method": "full", "framework": "torchtune"}, {}),
    "full-ckpt-torchtune": (
        {"method": "full", "gradient_checkpointing": True, "framework": "torchtune"},
        {},
    ),
}
"""torchtune's own modules, LoRA, chunked loss and recipe step (``tools/oracle/torchtune_stack.py``),
traced in a venv of ``tools/requirements-oracle-torchtune.txt``; Llama 3 (untied) and Llama 3.2
(tied output) builders."""
TORCHTUNE_FAMILIES = ("llama", "llama3-gqa-tied")
LITGPT_VARIANTS: dict[str, tuple[dict, dict]] = {
    "lora-litgpt": (
        {"method": "lora", "lora_rank": 16, "lora_targets": "all-linear", "framework": "litgpt"},
        {},
    ),
    "lora-qv-litgpt": (
        {
            "method": "lora",
            "lora_rank": 8,
            "lora_targets": ["q_proj", "v_proj"],
            "framework": "litgpt",
        },
        {},
    ),
    "full-litgpt": ({"method": "full", "framework": "litgpt"}, {}),
}
"""LitGPT's own modules, LoRA, chunked head and loss and finetune step
(``tools/oracle/litgpt_stack.py``), traced in a venv of ``tools/requirements-oracle-litgpt.txt``:
LoRA on every linear and on LitGPT's default q and v, full fine-tuning; no checkpointing (LitGPT
checkpoints only under FSDP on several GPUs)."""
LITGPT_FAMILIES = ("llama", "mistral")
TRANSFORMERS_4_PROFILES = ("hf-trainer-4", "pytorch-loop-4")

QLORA_EXTRA_FAMILIES = ("llama", "qwen3", "gemma2")

# a checkpoint whose quantization_config keeps block modules in 16 bits (Unsloth's dynamic 4-bit
# builds: calc.hf_config.bnb_kept_16bit), by family: (skip list, request, oracle options)
SKIP_LIST_VARIANTS: dict[str, tuple[list[str], dict, dict]] = {
    "qlora-skip-mlp": (
        ["lm_head", "multi_modal_projector", "model.layers.1.mlp"],
        {
            "method": "qlora",
            "lora_rank": 16,
            "lora_adapter_dtype": "fp32",
            "gradient_checkpointing": True,
        },
        {},
    ),
    "qlora-skip-attn-kbit": (
        ["lm_head", "model.layers.0.self_attn"],
        {"method": "qlora", "lora_rank": 16, "lora_adapter_dtype": "fp32", "precision": "fp32"},
        {"prepare_kbit": True},
    ),
}
SKIP_LIST_FAMILIES = ("llama", "qwen3")

# bf16-mixed as the Hugging Face stacks run it: weights loaded in bf16 (transformers 5's
# dtype "auto"), autocast, peft's fp32 adapters (calc's weights_loaded_16bit, set by the
# hf-trainer profile); TRL's SFTTrainer loads fp32 (the key off in its profile)
LOAD_DTYPE_VARIANTS: dict[str, tuple[dict, dict]] = {
    "lora-mixed-hf-trainer": (
        {"method": "lora", "lora_rank": 16, "precision": "bf16-mixed", "framework": "hf-trainer"},
        {},
    ),
    "lora-mixed-ckpt-hf-trainer": (
        {
            "method": "lora",
            "lora_rank": 16,
            "precision": "bf16-mixed",
            "gradient_checkpointing": True,
            "framework": "hf-trainer",
        },
        {},
    ),
    "lora-mixed-dropout-hf-trainer": (
        {
            "method": "lora",
            "lora_rank": 16,
            "lora_dropout": 0.1,
            "precision": "bf16-mixed",
            "framework": "hf-trainer",
        },
        {},
    ),
    "qlora-mixed-hf-trainer": (
        {"method": "qlora", "lora_rank": 16, "precision": "bf16-mixed", "framework": "hf-trainer"},
        {},
    ),
    "qlora-mixed-ckpt-hf-trainer": (
        {
            "method": "qlora",
            "lora_rank": 16,
            "precision": "bf16-mixed",
            "gradient_checkpointing": True,
            "framework": "hf-trainer",
        },
        {},
    ),
    # the profile keeps full fine-tuning at fp32 master weights: the key stated
    "full-mixed-16bit-hf-trainer": (
        {
            "method": "full",
            "precision": "bf16-mixed",
            "framework": "hf-trainer",
            "weights_loaded_16bit": True,
        },
        {},
    ),
    "lora-mixed-trl-sft": (
        {"method": "lora", "lora_rank": 16, "precision": "bf16-mixed", "framework": "trl-sft"},
        {},
    ),
    # an fp16 checkpoint loaded with dtype "auto" under bf16 autocast (weights_loaded_other_16bit)
    "lora-mixed-fp16-weights": (
        {
            "method": "lora",
            "lora_rank": 16,
            "precision": "bf16-mixed",
            "framework": "hf-trainer",
            "weights_loaded_other_16bit": True,
        },
        {},
    ),
    "lora-mixed-ckpt-fp16-weights": (
        {
            "method": "lora",
            "lora_rank": 16,
            "precision": "bf16-mixed",
            "gradient_checkpointing": True,
            "framework": "hf-trainer",
            "weights_loaded_other_16bit": True,
        },
        {},
    ),
    "full-mixed-fp16-weights": (
        {
            "method": "full",
            "precision": "bf16-mixed",
            "framework": "hf-trainer",
            "weights_loaded_16bit": True,
            "weights_loaded_other_16bit": True,
        },
        {},
    ),
}

# MoE LoRA on the experts as transformers 5 stores them (3-D tensors, peft target_parameters):
# calc's "fused-3d" expert layout (calc/lora.py).
MOE_FUSED_VARIANTS: dict[str, tuple[dict, dict]] = {
    "lora-all-linear-fused": (
        {
            "method": "lora",
            "lora_rank": 16,
            "lora_targets": "all-linear",
            "lora_adapter_dtype": "fp32",
            "moe_expert_layout": "fused-3d",
        },
        {},
    ),
    "lora-all-linear-fused-ckpt": (
        {
            "method": "lora",
            "lora_rank": 16,
            "lora_targets": "all-linear",
            "lora_adapter_dtype": "fp32",
            "moe_expert_layout": "fused-3d",
            "gradient_checkpointing": True,
        },
        {},
    ),
    "lora-mlp-fused-bf16": (
        {
            "method": "lora",
            "lora_rank": 8,
            "moe_expert_layout": "fused-3d",
            "lora_targets": ["gate_proj", "up_proj", "down_proj"],
            "lora_adapter_dtype": "base",
        },
        {},
    ),
    "lora-mlp-fused-fp32": (
        {
            "method": "lora",
            "lora_rank": 8,
            "moe_expert_layout": "fused-3d",
            "lora_targets": ["gate_proj", "up_proj", "down_proj"],
            "lora_adapter_dtype": "fp32",
        },
        {},
    ),
    "lora-all-linear-fused-bf16": (
        {
            "method": "lora",
            "lora_rank": 8,
            "lora_targets": "all-linear",
            "lora_adapter_dtype": "base",
            "moe_expert_layout": "fused-3d",
        },
        {},
    ),
    "lora-experts-router-fused-b2-ckpt": (
        {
            "method": "lora",
            "lora_rank": 32,
            "moe_expert_layout": "fused-3d",
            "lora_targets": ["gate", "gate_proj", "up_proj", "down_proj"],
            "lora_adapter_dtype": "fp32",
            "micro_batch_size": 2,
            "gradient_checkpointing": True,
        },
        {},
    ),
    # the hf-trainer profile (transformers 5) sets the layout itself: no key in the request
    "lora-all-linear-hf-trainer": (
        {
            "method": "lora",
            "lora_rank": 16,
            "lora_targets": "all-linear",
            "framework": "hf-trainer",
        },
        {},
    ),
}

# LoRA / QLoRA that also trains the embedding and / or the output layer in full (peft
# modules_to_save: a trainable deep copy beside the frozen original), on an untied, a tied and
# a q/k-norm family.
MODULES_TO_SAVE_VARIANTS: dict[str, tuple[dict, dict]] = {
    "lora-save-both": (
        {"method": "lora", "lora_rank": 16, "lora_modules_to_save": "embed_tokens+lm_head"},
        {},
    ),
    "lora-save-both-fp32": (
        {
            "method": "lora",
            "lora_rank": 16,
            "lora_adapter_dtype": "fp32",
            "lora_modules_to_save": "embed_tokens+lm_head",
        },
        {},
    ),
    "lora-save-embed-ckpt": (
        {
            "method": "lora",
            "lora_rank": 16,
            "lora_modules_to_save": "embed_tokens",
            "gradient_checkpointing": True,
        },
        {},
    ),
    "lora-save-head-mixed": (
        {
            "method": "lora",
            "lora_rank": 16,
            "lora_modules_to_save": "lm_head",
            "precision": "bf16-mixed",
        },
        {},
    ),
    "qlora-save-both": (
        {
            "method": "qlora",
            "lora_rank": 16,
            "lora_adapter_dtype": "fp32",
            "lora_modules_to_save": "embed_tokens+lm_head",
        },
        {},
    ),
    "lora-save-both-tied": (
        {"method": "lora", "lora_rank": 16, "lora_modules_to_save": "embed_tokens+lm_head-tied"},
        {},
    ),
    "qlora-save-both-ckpt": (
        {
            "method": "qlora",
            "lora_rank": 16,
            "lora_adapter_dtype": "fp32",
            "lora_modules_to_save": "embed_tokens+lm_head",
            "gradient_checkpointing": True,
        },
        {},
    ),
}
MODULES_TO_SAVE_FAMILIES = ("llama", "llama3-gqa-tied", "qwen3")

# the variants every accepted family gets: full, LoRA (calc's default targets: all-linear; and
# attention only), QLoRA, checkpointing, eager attention
ACCEPTED_VARIANTS: dict[str, tuple[dict, dict]] = {
    "full": ({"method": "full"}, {}),
    "full-ckpt": ({"method": "full", "gradient_checkpointing": True}, {}),
    "full-eager": ({"method": "full", "attention": "eager"}, {}),
    "lora-r16-all-linear": ({"method": "lora", "lora_rank": 16, "lora_targets": "all-linear"}, {}),
    "lora-r8-attn": ({"method": "lora", "lora_rank": 8, "lora_targets": ATTENTION_ONLY}, {}),
    "lora-ckpt": (
        {
            "method": "lora",
            "lora_rank": 16,
            "lora_targets": "all-linear",
            "gradient_checkpointing": True,
        },
        {},
    ),
    "lora-eager": (
        {"method": "lora", "lora_rank": 16, "lora_targets": "all-linear", "attention": "eager"},
        {},
    ),
    "lora-eager-ckpt-s2048": (
        {
            "method": "lora",
            "lora_rank": 16,
            "lora_targets": "all-linear",
            "attention": "eager",
            "gradient_checkpointing": True,
            "seq_len": 2048,
        },
        {},
    ),
    "qlora-r16": (
        {
            "method": "qlora",
            "lora_rank": 16,
            "lora_adapter_dtype": "fp32",
            "lora_targets": "all-linear",
        },
        {},
    ),
    "qlora-ckpt": (
        {
            "method": "qlora",
            "lora_rank": 16,
            "lora_adapter_dtype": "fp32",
            "lora_targets": "all-linear",
            "gradient_checkpointing": True,
        },
        {},
    ),
}

BASE_REQUEST = {
    "micro_batch_size": 1,
    "seq_len": 256,
    "gradient_checkpointing": False,
    "attention": "sdpa",
    "attention_grouped_kv": True,
}


def setups() -> list[dict]:
    """Every (family, variant) pair; MoE LoRA adapts the attention only, but for the
    MOE_FUSED_VARIANTS (calc's moe_expert_layout="fused-3d")."""
    out = []
    for family, cfg in FAMILIES.items():
        for variant, (overrides, options) in VARIANTS.items():
            request = dict(BASE_REQUEST, model={"hf_config": cfg}, **overrides)
            if "framework" in overrides:
                del request["attention_grouped_kv"]  # left to the profile
            if family == "phi3" and request.get("lora_targets") == ATTENTION_ONLY:
                request["lora_targets"] = ["qkv_proj", "o_proj"]  # Phi-3's fused projections
            if (
                family == "qwen3_moe"
                and request["method"] == "lora"
                and "lora_targets" not in overrides
            ):
                request["lora_targets"] = ATTENTION_ONLY
            out.append({"id": f"{family}/{variant}", "request": request, "oracle": dict(options)})
    for variant, (overrides, options) in MOE_FUSED_VARIANTS.items():
        request = dict(BASE_REQUEST, model={"hf_config": FAMILIES["qwen3_moe"]}, **overrides)
        out.append({"id": f"qwen3_moe/{variant}", "request": request, "oracle": dict(options)})
    for family in MODULES_TO_SAVE_FAMILIES:
        for variant, (overrides, options) in MODULES_TO_SAVE_VARIANTS.items():
            request = dict(BASE_REQUEST, model={"hf_config": FAMILIES[family]}, **overrides)
            out.append({"id": f"{family}/{variant}", "request": request, "oracle": dict(options)})
    for family, cfg in FAMILIES.items():
        if family == "qwen3_moe":
            continue  # bitsandbytes leaves the 3-D expert tensors of transformers 5 unquantized
        variants = dict(QLORA_VARIANTS, **(QLORA_EXTRA if family in QLORA_EXTRA_FAMILIES else {}))
        for variant, (overrides, options) in variants.items():
            request = dict(BASE_REQUEST, model={"hf_config": cfg}, **overrides)
            if family == "phi3" and request.get("lora_targets") == ATTENTION_ONLY:
                request["lora_targets"] = ["qkv_proj", "o_proj"]
            out.append({"id": f"{family}/{variant}", "request": request, "oracle": dict(options)})
    for family in SKIP_LIST_FAMILIES:
        for variant, (skip, overrides, options) in SKIP_LIST_VARIANTS.items():
            quant = {"quant_method": "bitsandbytes", "load_in_4bit": True}
            cfg = {
                **FAMILIES[family],
                "quantization_config": {**quant, "llm_int8_skip_modules": skip},
            }
            request = dict(BASE_REQUEST, model={"hf_config": cfg}, **overrides)
            out.append({"id": f"{family}/{variant}", "request": request, "oracle": dict(options)})
    for family in QLORA_EXTRA_FAMILIES:
        for variant, (overrides, options) in LOAD_DTYPE_VARIANTS.items():
            request = dict(BASE_REQUEST, model={"hf_config": FAMILIES[family]}, **overrides)
            del request["attention_grouped_kv"]  # left to the profile
            out.append({"id": f"{family}/{variant}", "request": request, "oracle": dict(options)})
    generation = [(f, v) for f in GENERATION_FAMILIES for v in GENERATION_VARIANTS.items()]
    generation += [(f, v) for f in GENERATION_MOE_FAMILIES for v in GENERATION_MOE_VARIANTS.items()]
    generation += [(f, v) for f in TORCHTUNE_FAMILIES for v in TORCHTUNE_VARIANTS.items()]
    generation += [(f, v) for f in LITGPT_FAMILIES for v in LITGPT_VARIANTS.items()]
    for family, (variant, (overrides, options)) in generation:
        cfg = FAMILIES.get(family) or ACCEPTED_FAMILIES[family]
        request = dict(BASE_REQUEST, model={"hf_config": cfg}, **overrides)
        del request["attention_grouped_kv"]  # left to the profile
        if request["framework"] in TRANSFORMERS_4_PROFILES:
            # the traced transformers 4.53.3 builds boolean masks (masking_utils); the profiles'
            # False is 4.46-4.52's additive mask, which no mask-free setup here reaches anyway
            request["sdpa_mask_boolean"] = True
        out.append({"id": f"{family}/{variant}", "request": request, "oracle": dict(options)})
    for family, cfg in ACCEPTED_FAMILIES.items():
        for variant, (overrides, options) in {
            **ACCEPTED_VARIANTS,
            **ACTIVATION_HEAVY.get(family, {}),
        }.items():
            request = _accepted_request(family, cfg, overrides)
            if request is not None:
                out.append(
                    {"id": f"{family}/{variant}", "request": request, "oracle": dict(options)}
                )
    for family, cfg in WINDOW_FAMILIES.items():
        for variant, (overrides, options) in WINDOW_VARIANTS.items():
            request = dict(BASE_REQUEST, model={"hf_config": cfg}, **overrides)
            out.append({"id": f"{family}/{variant}", "request": request, "oracle": dict(options)})
    for setup in out:
        # a setup that names no library traces each key as it states it: no profile
        setup["request"].setdefault("framework", "generic")
    return out


# Presets traced at their published size (fake tensors allocate nothing; a 671B model takes
# minutes on one core): one setup each, LoRA on every linear with checkpointing, the experts as
# transformers 5 stores them. Run with ``--presets``; the summary keeps them under ``presets``.
def _all_presets() -> tuple[str, ...]:
    from calc.presets import preset_ids

    return tuple(preset_ids())


PRESET_CHECKS = _all_presets()
"""Every preset, held at full size (LoRA on all linears with checkpointing, 256 tokens; eager
attention for the families transformers refuses to run under SDPA, :data:`EAGER_ONLY`)."""
PRESET_TOLERANCE = 0.03


def preset_setups() -> list[dict]:
    """One full-size setup per preset of :data:`PRESET_CHECKS`."""
    from calc.presets import get_preset

    out = []
    for preset_id in PRESET_CHECKS:
        request = dict(
            BASE_REQUEST,
            model=preset_id,
            method="lora",
            lora_rank=16,
            lora_targets="all-linear",
            gradient_checkpointing=True,
        )
        arch = get_preset(preset_id)
        if arch.family in EAGER_ONLY:
            request["attention"] = "eager"
        if arch.num_experts:
            request["moe_expert_layout"] = "fused-3d"
        if arch.family in ALL_LINEAR_TARGETS:
            request["lora_targets"] = ALL_LINEAR_TARGETS[arch.family]
        # no library profile: each key traced as stated, as setups() does (a cached trace is
        # keyed without it)
        request["framework"] = "generic"
        out.append({"id": f"{preset_id}/lora-all-linear-ckpt", "request": request, "oracle": {}})
    return out


def merge_presets(old: dict, rows: list[dict]) -> dict:
    """The summary with the full-size preset checks of ``rows`` set (by setup id) under
    ``presets``; the other figures are left as they are."""
    out = json.loads(json.dumps(old))
    presets = out.setdefault("presets", {})
    for r in rows:
        presets[r["id"]] = {
            "model_type": r["model_type"],
            "calc_peak": r["calc_peak"],
            "oracle_peak": r["oracle_peak"],
            "error": round(r["peak_error"], 4),
        }
    out["presets"] = dict(sorted(presets.items()))
    return out


def _accepted_request(family: str, cfg: dict, overrides: dict) -> dict | None:
    """One ACCEPTED_VARIANTS setup for ``family``, in its own module names; None where the
    variant does not apply (the eager twin of a family that runs eager only)."""
    if family in EAGER_ONLY and overrides.get("attention") == "eager":
        return None  # every setup of the family is eager already
    request = dict(BASE_REQUEST, model={"hf_config": cfg}, **overrides)
    if family in EAGER_ONLY:
        request["attention"] = "eager"
    if request.get("lora_targets") == ATTENTION_ONLY:
        request["lora_targets"] = ATTENTION_TARGETS.get(family, ATTENTION_ONLY)
    if family in MOE_FAMILIES and request.get("lora_targets") == "all-linear":
        request["moe_expert_layout"] = "fused-3d"  # the experts as transformers 5 stores them
        request["lora_targets"] = ALL_LINEAR_TARGETS.get(family, "all-linear")
    elif request.get("lora_targets") == "all-linear" and family in ALL_LINEAR_TARGETS:
        request["lora_targets"] = ALL_LINEAR_TARGETS[family]
    return request


def _cache_key(setup: dict, versions: dict) -> str:
    """``framework: generic`` is left out of the key: a setup without a profile is keyed by
    the keys it states."""
    qlora = setup["request"].get("method") == "qlora"
    bf16_load = loads_16bit_weights(setup["request"])
    if setup["request"].get("framework") == "generic":
        request = {k: v for k, v in setup["request"].items() if k != "framework"}
        setup = {**setup, "request": request}
    text = json.dumps(
        {
            "setup": setup,
            "versions": versions,
            "oracle": _oracle_source_hash(
                qlora,
                is_hybrid(setup),
                masks_converted(setup),
                is_generation4(setup),
                is_torchtune(setup),
                is_litgpt(setup),
                bf16_load,
                is_dsv4(setup),
            ),
        },
        sort_keys=True,
    )
    return hashlib.sha256(text.encode()).hexdigest()[:24]


QLORA_ONLY_SOURCES = ("qlora.py",)
"""Oracle modules only QLoRA setups run: a change to them retraces those setups only."""
HYBRID_ONLY_SOURCES = ("linear_attention.py",)
"""Oracle modules only the hybrid families' setups run (:func:`run_oracle` applies them)."""
SPARSE_ONLY_SOURCES = ("sparse_attention.py",)
"""Oracle modules only the setups with boolean mask tensors run (:func:`masks_converted`)."""
LOAD_DTYPE_ONLY_SOURCES = ("load_dtype.py",)
FP32_MODULES_ONLY_SOURCES = ("keep_fp32_modules.py",)
"""Oracle modules only the families whose 4-bit loading leaves modules unquantized by name
run (:data:`FP32_MODULE_FAMILIES`)."""
FP32_MODULE_FAMILIES = ("deepseek_v4",)
"""Oracle modules only the setups with weights loaded in 16 bits under autocast run."""


GENERATION_4_ONLY_SOURCES = ("transformers4.py",)
"""Oracle modules only the transformers 4 profiles' setups run."""
TORCHTUNE_ONLY_SOURCES = ("torchtune_stack.py",)
"""Oracle modules only the torchtune profile's setups run."""
LITGPT_ONLY_SOURCES = ("litgpt_stack.py",)
"""Oracle modules only the litgpt profile's setups run."""


def _oracle_source_hash(
    qlora: bool = True,
    hybrid: bool = False,
    sparse: bool = False,
    generation4: bool = False,
    torchtune: bool = False,
    litgpt: bool = False,
    bf16_load: bool = False,
    dsv4: bool = False,
) -> str:
    """The oracle's own code is part of the key: a change to it retraces."""
    digest = hashlib.sha256()
    for path in sorted((ROOT / "tools" / "oracle").glob("*.py")):
        if path.name in GENERATION_4_ONLY_SOURCES and not generation4:
            continue
        if path.name in TORCHTUNE_ONLY_SOURCES and not torchtune:
            continue
        if path.name in LITGPT_ONLY_SOURCES and not litgpt:
            continue
        if path.name in HYBRID_ONLY_SOURCES and not hybrid:
            continue
        if path.name in SPARSE_ONLY_SOURCES and not sparse:
            continue
        if path.name in LOAD_DTYPE_ONLY_SOURCES and not bf16_load:
            continue
        if path.name in FP32_MODULES_ONLY_SOURCES and not dsv4:
            continue
        if qlora or path.name not in QLORA_ONLY_SOURCES:
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def is_hybrid(setup: dict) -> bool:
    """A setup of a family with Gated DeltaNet blocks."""
    return model_type_of(setup) in HYBRID_FAMILIES


def is_generation4(setup: dict) -> bool:
    """A setup of a transformers 4 profile (traced in that generation's venv)."""
    return setup["request"].get("framework") in TRANSFORMERS_4_PROFILES


def is_torchtune(setup: dict) -> bool:
    """A setup of the torchtune profile (traced through torchtune's own modules)."""
    return setup["request"].get("framework") == "torchtune"


def is_litgpt(setup: dict) -> bool:
    """A setup of the litgpt profile (traced through LitGPT's own modules)."""
    return setup["request"].get("framework") == "litgpt"


def stack_versions(setup: dict, versions: dict) -> dict:
    """The library versions a setup runs with: torch and torchtune (or LitGPT and Lightning)
    for those stacks when installed, the oracle venv's otherwise."""
    try:
        if is_torchtune(setup):
            from tools.oracle.torchtune_stack import versions as torchtune_versions

            return torchtune_versions()
        if is_litgpt(setup):
            from tools.oracle.litgpt_stack import versions as litgpt_versions

            return litgpt_versions()
    except ImportError:
        pass
    return versions


def is_dsv4(setup: dict) -> bool:
    """A setup of a family whose ``_keep_in_fp32_modules`` the 4-bit loading skips."""
    return model_type_of(setup) in FP32_MODULE_FAMILIES


def is_sparse(setup: dict) -> bool:
    """A setup of a family with DeepSeek sparse attention."""
    return model_type_of(setup) in SPARSE_FAMILIES


def masks_converted(setup: dict) -> bool:
    """A setup whose SDPA receives boolean mask tensors that CUDA's SDPA copies: a sparse
    family's, or a sliding window the rows reach (:data:`WINDOW_VARIANTS`). Only these run
    tools/oracle/sparse_attention.py (the other setups' cache keys leave its source out)."""
    return is_sparse(setup) or setup["id"].split("/", 1)[-1] in WINDOW_VARIANTS


def loaded_dtype(request: dict) -> str:
    """The torch dtype the sweep builds the model in where calc counts the request's weights as
    loaded in 16 bits under autocast (``weights_loaded_16bit`` with ``*-mixed``,
    calc.states.MIXED_16BIT_WEIGHTS: the autocast dtype; with ``weights_loaded_other_16bit``,
    calc.states.MIXED_OTHER_16BIT_WEIGHTS: the other one), else "" (the oracle's own build)."""
    from calc import states
    from calc.errors import InputError
    from calc.request import parse_estimate_request

    try:
        req = parse_estimate_request(request)
    except InputError:
        return ""
    reg = states.request_regime(req)
    fp16_autocast = req.precision.value == "fp16-mixed"
    if reg is states.MIXED_16BIT_WEIGHTS:
        return "float16" if fp16_autocast else "bfloat16"
    if reg is states.MIXED_OTHER_16BIT_WEIGHTS:
        return "bfloat16" if fp16_autocast else "float16"
    return ""


def loads_16bit_weights(request: dict) -> bool:
    """calc counts the request's weights as loaded in 16 bits under autocast."""
    return bool(loaded_dtype(request))


SWEEP_HANDLED_KEYS = frozenset({"weights_loaded_16bit", "weights_loaded_other_16bit"})
"""Request keys the sweep itself traces rather than the oracle's request reader
(``tools/oracle/run.py``): ``weights_loaded_16bit`` and ``weights_loaded_other_16bit`` are turned
off in :func:`oracle_request` and the model is built in the 16-bit dtype they say by
:func:`run_oracle` (``tools/oracle/load_dtype.py``) instead."""


def oracle_request(request: dict) -> dict:
    """The request the oracle traces. ``moe_expert_layout="fused-3d"`` is what the installed
    transformers 5 builds anyway (3-D expert tensors, peft ``target_parameters``), so it is
    dropped rather than taught to the oracle, whose source hash keys every cached trace.
    ``weights_loaded_16bit`` is turned off: where calc counts it, :func:`run_oracle` builds the
    model in bf16 itself (``tools/oracle/load_dtype.py``); elsewhere it changes nothing."""
    out = dict(request)
    if out.get("moe_expert_layout") == "fused-3d":
        del out["moe_expert_layout"]
    if out.get("framework") in TRANSFORMERS_4_PROFILES:
        # time only, the oracle traces memory: which SDPA kernel torch 2.4-2.7 tries first,
        # and the dtype bitsandbytes <= 0.46 runs its 4-bit matmuls in
        out.setdefault("sdpa_cudnn_last", False)
        out.setdefault("qlora_compute_dtype_from_input", False)
    out["weights_loaded_16bit"] = False
    out.pop("weights_loaded_other_16bit", None)
    return out


def run_oracle(setup: dict, versions: dict) -> dict:
    """The oracle's response for one setup, from the cache when there."""
    path = CACHE_DIR / f"{_cache_key(setup, stack_versions(setup, versions))}.json"
    if path.exists():
        return json.loads(path.read_text())
    from tools.oracle import Unsupported, oracle_estimate

    from tools.oracle.linear_attention import linear_attention_kernels

    from tools.oracle.sparse_attention import sdpa_boolean_masks_converted

    from tools.oracle.transformers4 import transformers4_run

    kernels = linear_attention_kernels() if is_hybrid(setup) else contextlib.nullcontext()
    masks = sdpa_boolean_masks_converted() if masks_converted(setup) else contextlib.nullcontext()
    from tools.oracle.keep_fp32_modules import fp32_modules_left_unquantized

    unquantized = fp32_modules_left_unquantized() if is_dsv4(setup) else contextlib.nullcontext()
    from tools.oracle.load_dtype import loaded_in

    generation = transformers4_run() if is_generation4(setup) else contextlib.nullcontext()
    dtype = loaded_dtype(setup["request"])
    bf16 = loaded_in(dtype) if dtype else contextlib.nullcontext()
    try:
        if is_torchtune(setup):
            result = _stack_estimate(setup, "torchtune")
        elif is_litgpt(setup):
            result = _stack_estimate(setup, "litgpt")
        else:
            with kernels, masks, generation, bf16, unquantized:
                result = oracle_estimate(
                    dict(oracle_request(setup["request"]), oracle=setup["oracle"])
                )
        result.pop("request", None)
    except Unsupported as exc:
        result = {"unsupported": str(exc)}
    except (RuntimeError, ValueError, NotImplementedError, AttributeError, TypeError) as exc:
        # an op the fake CPU run cannot take the CUDA path of, or a setup the library refuses
        # or fails on (listed as unsupported, never compared)
        result = {"unsupported": f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"}
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result))
    return result


def _stack_estimate(setup: dict, library: str) -> dict:
    """The oracle of a profile traced through its own library's modules (torchtune, litgpt:
    ``tools/oracle/<library>_stack.py``), or Unsupported where that library is not installed."""
    import importlib

    from tools.oracle import Unsupported

    try:
        importlib.import_module(library)
        stack = importlib.import_module(f"tools.oracle.{library}_stack")
    except ImportError as exc:
        raise Unsupported(
            f"framework {library}: {library} is not installed ({exc}); its venv: "
            f"tools/requirements-oracle-{library}.txt"
        ) from exc
    return stack.oracle_estimate(dict(setup["request"], oracle=setup["oracle"]))


def compare(setup: dict, oracle: dict) -> dict:
    """calc's estimate beside the oracle's, per phase; errors are ``calc / oracle - 1``."""
    from calc.memory import estimate_dict

    calc = estimate_dict(setup["request"])
    phases = {}
    for phase in PHASES:
        o = oracle["phases"].get(phase)
        c = calc["phases"].get(phase)
        if o and c is not None:
            phases[phase] = {"calc": c, "oracle": o, "error": c / o - 1}
    return {
        "id": setup["id"],
        "framework": setup["request"].get("framework", "generic"),
        "model_type": model_type_of(setup),
        "calc_peak": calc["peak_allocated_bytes"],
        "oracle_peak": oracle["peak_allocated_bytes"],
        "peak_error": calc["peak_allocated_bytes"] / oracle["peak_allocated_bytes"] - 1,
        "calc_phase": calc["peak_phase"],
        "oracle_phase": oracle["peak_phase"],
        "phases": phases,
    }


def model_type_of(setup: dict) -> str:
    """The ``model_type`` a setup's config holds (its ``text_config``'s for a multimodal one)."""
    model = setup["request"]["model"]
    if isinstance(model, str):  # a preset id: its row's config
        from calc.presets import preset_row

        cfg = preset_row(model)["config"]
    else:
        cfg = model["hf_config"]
    return cfg["model_type"] if "text_config" not in cfg else cfg["text_config"]["model_type"]


def method_of(row: dict) -> str:
    """The fine-tuning method of a sweep row, from its variant's name."""
    variant = row["id"].split("/", 1)[1]
    return variant.split("-", 1)[0]


def summarise(rows: list[dict], versions: dict) -> dict:
    """Shares within 2 % and 5 % (allocated peak), the worst peak and phase errors, over all
    rows and per method (``groups``)."""
    out = _figures(rows)
    out["groups"] = {
        m: _figures([r for r in rows if method_of(r) == m])
        for m in ("full", "lora", "qlora")
        if any(method_of(r) == m for r in rows)
    }
    out["families"] = sorted({r["id"].split("/")[0] for r in rows})
    out["model_types"] = sorted({r["model_type"] for r in rows})
    out["per_family"] = {
        f: _family_figures([r for r in rows if r["id"].split("/")[0] == f]) for f in out["families"]
    }
    out["versions"] = versions
    return out


def family_methods(rows: list[dict]) -> dict:
    """A family's counts per method, which a later ``--merge`` of it takes out of the totals."""
    return {m: _counts([r for r in rows if method_of(r) == m]) for m in ("full", "lora", "qlora")}


def full_summary(rows: list[dict], versions: dict, old: dict | None) -> dict:
    """The summary a whole sweep writes: :func:`summarise`, each family with its per-method
    counts (so that a later ``--merge`` can sweep it again), and what ``old`` recorded from runs
    this one does not trace: the full-size preset checks (``--presets``) and the profiles traced
    in venvs of their own (``--stacks``)."""
    out = summarise(rows, versions)
    for family, figures in out["per_family"].items():
        figures["methods"] = family_methods([r for r in rows if r["id"].split("/")[0] == family])
    for kept in ("presets", "stacks"):
        if old and kept in old:
            out[kept] = old[kept]
    return out


def _family_figures(rows: list[dict]) -> dict:
    """A family's share of setups within 2 % and 5 % and its worst setup."""
    worst = max(rows, key=lambda r: abs(r["peak_error"]))
    return {
        "setups": len(rows),
        "within_2pct": sum(1 for r in rows if abs(r["peak_error"]) <= 0.02),
        "within_5pct": sum(1 for r in rows if abs(r["peak_error"]) <= 0.05),
        "worst_id": worst["id"],
        "worst_error": round(worst["peak_error"], 4),
    }


MERGED_COUNTS = ("setups", "within_2pct", "within_5pct", "phases_within_5pct", "phases")


def merge_summary(old: dict, rows: list[dict], versions: dict) -> dict:
    """The summary of the last full run with the families of ``rows`` (an ``--only`` run)
    swept again: their ``per_family`` entries replaced, their counts (all setups, each method,
    phases) taken out of the totals and the new ones added, ``model_types`` and ``families``
    extended, their setups beyond 2 % replaced. Each merged family keeps its per-method counts
    (``per_family[f]["methods"]``) so that a later merge can take them out again, as a whole
    sweep writes them (:func:`full_summary`); a family recorded without them cannot be merged
    (run the whole sweep). The medians stay
    those of the last full run (a median needs every row), and the worst setup is the worst
    of the families' worst setups. Versions must match the last run's."""
    if old.get("versions") != versions:
        raise ValueError(f"library versions {versions} differ from the summary's: run the sweep")
    new = summarise(rows, versions)
    out = json.loads(json.dumps(old))
    for family, figures in new["per_family"].items():
        methods = family_methods([r for r in rows if r["id"].split("/")[0] == family])
        previous = out["per_family"].get(family)
        if previous is not None:
            if "methods" not in previous:
                raise ValueError(f"{family} was swept by a full run only: run the whole sweep")
            _add(out, previous["methods"], -1)
        _add(out, methods, 1)
        out["per_family"][family] = dict(figures, methods=methods)
    merged = set(new["per_family"])
    out["per_family"] = dict(sorted(out["per_family"].items()))
    out["families"] = sorted(out["per_family"])
    out["model_types"] = sorted(set(out["model_types"]) | set(new["model_types"]))
    kept = [m for m in out["beyond_2pct"] if m["id"].split("/")[0] not in merged]
    out["beyond_2pct"] = sorted(kept + new["beyond_2pct"], key=lambda m: -abs(m["error"]))
    for group, figures in out["groups"].items():
        fresh = new["groups"].get(group)
        if fresh and (
            figures["worst_id"] is None
            or abs(fresh["worst_error"]) > abs(figures["worst_error"])
            or figures["worst_id"].split("/")[0] in merged
        ):
            figures["worst_id"], figures["worst_error"] = fresh["worst_id"], fresh["worst_error"]
        figures["beyond_2pct"] = [
            m for m in figures["beyond_2pct"] if m["id"].split("/")[0] not in merged
        ] + new["groups"].get(group, {}).get("beyond_2pct", [])
    fresh = new["worst_id"] if abs(new["worst_error"]) > abs(out["worst_error"]) else None
    if out["worst_id"].split("/")[0] in merged:  # the old worst was swept again
        worst = max(out["per_family"].values(), key=lambda f: abs(f["worst_error"]))
        out["worst_id"], out["worst_error"] = worst["worst_id"], worst["worst_error"]
    elif fresh:
        out["worst_id"], out["worst_error"] = fresh, new["worst_error"]
    return out


STACKS = {
    "hf-trainer-4": "transformers-4",
    "pytorch-loop-4": "transformers-4",
    "torchtune": "torchtune",
    "litgpt": "litgpt",
}
"""Profiles traced in a venv of their own (``tools/requirements-oracle-*.txt``), by the name of
that stack: the summary records them under ``stacks``, apart from the transformers 5 sweep
(whose versions every other figure is of)."""


def stack_setups(stack: str) -> list[dict]:
    """The sweep's setups of a stack's profiles."""
    return [s for s in setups() if STACKS.get(s["request"]["framework"]) == stack]


def merge_stacks(old: dict, rows: list[dict], versions: dict) -> dict:
    """The summary with each stack of ``rows`` (every row a profile of :data:`STACKS`)
    recorded under ``stacks[name]``: the versions it ran with, its shares within 2 % and 5 %,
    median and worst, its setups beyond 2 %, and the same per profile (``profiles``). A stack
    swept again replaces its entry; the transformers 5 figures are left alone."""
    out = json.loads(json.dumps(old))
    stacks = out.setdefault("stacks", {})
    for name in sorted({STACKS[r["framework"]] for r in rows}):
        mine = [r for r in rows if STACKS[r["framework"]] == name]
        figures = {k: v for k, v in _figures(mine).items() if k != "beyond_2pct"}
        stacks[name] = {
            "versions": versions,
            **figures,
            "beyond_2pct": _figures(mine)["beyond_2pct"],
            "profiles": {
                fw: _family_figures([r for r in mine if r["framework"] == fw])
                for fw in sorted({r["framework"] for r in mine})
            },
            "families": sorted({r["id"].split("/")[0] for r in mine}),
        }
    out["stacks"] = dict(sorted(stacks.items()))
    return out


def _counts(rows: list[dict]) -> dict:
    figures = _figures(rows)
    return {key: figures[key] for key in MERGED_COUNTS}


def _add(summary: dict, methods: dict, sign: int) -> None:
    """Add (``sign`` 1) or take out (-1) a family's per-method counts from the totals."""
    for method, counts in methods.items():
        if not counts["setups"]:
            continue
        group = summary["groups"].setdefault(
            method,
            {
                **{key: 0 for key in MERGED_COUNTS},
                "median_abs_error": None,
                "worst_id": None,
                "worst_error": None,
                "beyond_2pct": [],
            },
        )
        for key in MERGED_COUNTS:
            group[key] += sign * counts[key]
            summary[key] += sign * counts[key]


def _figures(rows: list[dict]) -> dict:
    n = len(rows)
    peak = sorted(abs(r["peak_error"]) for r in rows)
    worst = max(rows, key=lambda r: abs(r["peak_error"])) if rows else None
    phase_errors = [abs(p["error"]) for r in rows for p in r["phases"].values()]
    return {
        "setups": n,
        "within_2pct": sum(1 for e in peak if e <= 0.02),
        "within_5pct": sum(1 for e in peak if e <= 0.05),
        "median_abs_error": peak[n // 2] if n else None,
        "worst_id": worst["id"] if worst else None,
        "worst_error": worst["peak_error"] if worst else None,
        "phases_within_5pct": sum(1 for e in phase_errors if e <= 0.05),
        "phases": len(phase_errors),
        "beyond_2pct": [
            {"id": r["id"], "error": round(r["peak_error"], 4)}
            for r in sorted(rows, key=lambda r: -abs(r["peak_error"]))
            if abs(r["peak_error"]) > 0.02
        ],
    }


def _pct(x: float) -> str:
    return f"{100 * x:+6.2f} %"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="run the setups whose id contains this text")
    parser.add_argument("--no-write", action="store_true", help="do not rewrite the summary file")
    parser.add_argument(
        "--presets",
        action="store_true",
        help="trace the full-size preset checks (PRESET_CHECKS) and record them in the summary",
    )
    parser.add_argument(
        "--merge",
        action="store_true",
        help="with --only: merge the families run into the summary of the last full run",
    )
    parser.add_argument(
        "--stacks",
        action="store_true",
        help="with --only: record the profiles traced in a venv of their own (transformers 4) "
        "under the summary's stacks, with their versions",
    )
    args = parser.parse_args(argv)
    try:
        from tools.oracle.run import versions as library_versions

        versions = library_versions()
    except ImportError as exc:
        print(f"oracle_sweep needs torch, transformers and peft: {exc}", file=sys.stderr)
        return 2
    pool = preset_setups() if args.presets else setups()
    chosen = [s for s in pool if not args.only or args.only in s["id"]]
    rows, unsupported = [], []
    started = time.perf_counter()
    for i, setup in enumerate(chosen, 1):
        oracle = run_oracle(setup, versions)
        if "unsupported" in oracle:
            unsupported.append((setup["id"], oracle["unsupported"]))
            continue
        rows.append(compare(setup, oracle))
        print(
            f"[{i}/{len(chosen)}] {setup['id']:<40} {_pct(rows[-1]['peak_error'])}",
            file=sys.stderr,
            flush=True,
        )
    rows.sort(key=lambda r: -abs(r["peak_error"]))
    print(
        f"{'setup':<40} {'peak calc/oracle MiB':>22} {'peak':>9}   "
        + "   ".join(f"{p:>16}" for p in PHASES)
    )
    for r in rows:
        phases = "   ".join(
            f"{_pct(r['phases'][p]['error']):>16}" if p in r["phases"] else f"{'-':>16}"
            for p in PHASES
        )
        print(
            f"{r['id']:<40} {r['calc_peak'] / 2**20:10.1f} / {r['oracle_peak'] / 2**20:9.1f} "
            f"{_pct(r['peak_error'])}   {phases}"
        )
    for sid, why in unsupported:
        print(f"{sid:<40} unsupported: {why}")
    s = summarise(rows, versions)
    print()
    print(
        f"setups {s['setups']}: allocated peak within 2 %: {s['within_2pct']} "
        f"({100 * s['within_2pct'] / max(1, s['setups']):.1f} %), within 5 %: {s['within_5pct']}; "
        f"median |error| {100 * (s['median_abs_error'] or 0):.2f} %; worst {s['worst_id']} "
        f"{_pct(s['worst_error'] or 0)}"
    )
    for method, g in s["groups"].items():
        print(
            f"  {method:<6} setups {g['setups']}: within 2 %: {g['within_2pct']}, within 5 %: "
            f"{g['within_5pct']}; worst {g['worst_id']} {_pct(g['worst_error'] or 0)}"
        )
    for family, g in s["per_family"].items():
        print(
            f"  {family:<16} setups {g['setups']:>3}: within 2 %: {g['within_2pct']:>3}, within 5 %: "
            f"{g['within_5pct']:>3}; worst {g['worst_id']} {_pct(g['worst_error'])}"
        )
    print(
        f"phases within 5 %: {s['phases_within_5pct']} of {s['phases']}; "
        f"{time.perf_counter() - started:.0f} s; {versions}"
    )
    if args.presets:
        if rows and not args.no_write:
            merged = merge_presets(json.loads(SUMMARY_PATH.read_text()), rows)
            SUMMARY_PATH.write_text(json.dumps(merged, indent=1) + "\n")
            print(f"preset checks recorded in {SUMMARY_PATH.relative_to(ROOT)}")
    elif not args.only and not args.no_write:
        old = json.loads(SUMMARY_PATH.read_text()) if SUMMARY_PATH.exists() else None
        SUMMARY_PATH.write_text(json.dumps(full_summary(rows, versions, old), indent=1) + "\n")
        print(f"summary written to {SUMMARY_PATH.relative_to(ROOT)}")
    elif args.stacks and rows and not args.no_write:
        if any(r["framework"] not in STACKS for r in rows):
            print("not recorded: --stacks takes the profiles of STACKS only", file=sys.stderr)
            return 2
        names = {STACKS[r["framework"]] for r in rows}
        ran = {r["id"] for r in rows} | {sid for sid, _why in unsupported}
        partial = sorted(n for n in names if any(s["id"] not in ran for s in stack_setups(n)))
        if partial:
            print(f"not recorded: --only left out setups of {partial}", file=sys.stderr)
            return 2
        merged = json.loads(SUMMARY_PATH.read_text())
        for name in sorted(names):
            mine = [r for r in rows if STACKS[r["framework"]] == name]
            first = next(s for s in chosen if s["id"] == mine[0]["id"])
            merged = merge_stacks(merged, mine, stack_versions(first, versions))
        SUMMARY_PATH.write_text(json.dumps(merged, indent=1) + "\n")
        print(f"stacks {sorted(names)} recorded in {SUMMARY_PATH.relative_to(ROOT)}")
    elif args.merge and rows and not args.no_write:
        ran = {r["id"].split("/")[0] for r in rows}
        partial = sorted(
            f for f in ran if any(s["id"].split("/")[0] == f and s not in chosen for s in setups())
        )
        if partial:
            print(f"not merged: --only left out setups of {partial}", file=sys.stderr)
            return 2
        try:
            merged = merge_summary(json.loads(SUMMARY_PATH.read_text()), rows, versions)
        except ValueError as exc:
            print(f"not merged: {exc}", file=sys.stderr)
            return 2
        SUMMARY_PATH.write_text(json.dumps(merged, indent=1) + "\n")
        print(f"families {sorted(s['per_family'])} merged into {SUMMARY_PATH.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
