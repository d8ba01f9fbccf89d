"""The calculator page in headless Chromium, served from localhost.

Parity: for each request variation, every ``data-output`` number in the page equals what
CPython's ``calc`` returns for the same request (integers exactly, floats to 1e-9
relative). Most variations are driven through the URL without reloading the page
(``history.pushState`` + ``popstate``, which the page handles like a shared link), so one
loaded page per language serves them all; a few go through the form.
"""

from __future__ import annotations

import html
import html.parser
import json
import re
from urllib.parse import parse_qsl, urlencode, urlsplit

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError
from calculator_page import (
    FIELDS,
    READY_TIMEOUT_MS,
    STATE,
    STATE_TIMEOUT_MS,
    STRINGS,
    Calc,
    assert_clean,
    assert_parity,
    assert_raw_equals,
    close_calculator_page,
    new_context,
    request_for,
    tree_outputs,
)
from conftest import REPO_ROOT, watch_offline

from calc import run as calc_run
import calc_view as view
from macros import calculator

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ARTIFACTS = REPO_ROOT / "artifacts"
CUSTOM_CONFIG = {
    "model_type": "llama",
    "hidden_size": 2048,
    "num_attention_heads": 16,
    "num_key_value_heads": 4,
    "intermediate_size": 5632,
    "num_hidden_layers": 12,
    "vocab_size": 32000,
    "max_position_embeddings": 8192,
}

# Every option of the request appears at least once; both languages run all of them.
VARIATIONS = [
    {},
    {"model": "llama-2-7b"},
    {"model": "mistral-7b", "method": "full", "optimizer": "adamw-8bit"},
    {"method": "qlora", "qlora_double_quant": "false"},
    {"method": "qlora", "model": "mixtral-8x7b"},
    {"lora_rank": "64", "lora_targets": "q_proj,v_proj"},
    {"lora_dropout": "0.05", "lora_rank": "8"},
    {
        "gradient_accumulation_steps": "4",
        "num_gpus": "2",
        "sharding": "zero3",
        "sync_each_micro_batch": "true",
        "method": "full",
    },
    {"method": "qlora", "qlora_keeps_inputs": "true", "model": "qwen2.5-7b"},
    {"frozen_weight_grads": "true", "num_gpus": "2", "sharding": "zero3"},
    {"method": "qlora", "qlora_unchunked_quantization": "true", "model": "llama-2-13b"},
    {"attention_keeps_fused_qkv": "true", "attention": "eager", "gradient_checkpointing": "false"},
    {"optimizer_fused": "true", "method": "full", "model": "llama-3.2-1b"},
    {"torch_compile": "true", "gradient_checkpointing": "false", "model": "qwen2.5-0.5b"},
    {"precision": "bf16-mixed"},
    {"precision": "fp16-mixed", "method": "full"},
    {"precision": "fp32", "model": "qwen2.5-0.5b"},
    {"optimizer": "paged-adamw"},
    {"optimizer": "paged-adamw-8bit", "method": "full", "model": "llama-3.2-1b"},
    {"optimizer": "adafactor", "method": "full", "model": "gemma-2-2b"},
    {"optimizer": "sgd", "method": "full", "model": "tinyllama-1.1b"},
    {"optimizer": "sgd-momentum", "optimizer_in_backward": "true", "method": "full"},
    {"micro_batch_size": "4", "seq_len": "4096"},
    {"gradient_checkpointing": "false", "micro_batch_size": "2"},
    {"attention": "flash", "seq_len": "8192"},
    {"attention": "eager", "gradient_checkpointing": "false"},
    {"attention_mask": "padding", "seq_len": "4096"},
    {"chunked_loss": "true", "model": "gemma-2-9b"},
    {"activation_offload": "true", "model": "phi-3-mini"},
    {"num_gpus": "4", "sharding": "ddp"},
    {"num_gpus": "8", "sharding": "zero1", "method": "full"},
    {"num_gpus": "2", "sharding": "zero2", "method": "full", "model": "qwen2.5-7b"},
    {"num_gpus": "8", "sharding": "zero3", "model": "llama-3.1-70b", "method": "full"},
    {"num_gpus": "16", "sharding": "zero3", "shard_group": "8", "method": "full"},
    {"num_gpus": "4", "sharding": "zero3", "sequence_parallel": "4", "seq_len": "32768"},
    {
        "num_gpus": "8",
        "sharding": "zero3",
        "method": "full",
        "attention": "flash",
        "seq_len": "65536",
        "sequence_parallel": "8",
        "sequence_parallel_repeats_kv": "true",
    },
    {"num_gpus": "16", "sharding": "zero1", "gradient_bucket_mb": "512", "method": "full"},
    {"cpu_offload": "optimizer", "method": "full", "model": "llama-3.2-3b"},
    {"cpu_offload": "optimizer+params", "sharding": "zero3", "num_gpus": "2", "method": "full"},
    {"seq_len": "200000", "sharding": "zero2"},  # warnings: above max positions, one GPU
    {"model": json.dumps({"hf_config": CUSTOM_CONFIG}), "method": "qlora"},
    {"model": "yi-34b", "method": "qlora", "lora_targets": "q_proj,k_proj,v_proj,o_proj"},
    {"model": "qwen2.5-14b", "micro_batch_size": "8", "seq_len": "1024"},
    {"model": "falcon-7b", "lora_targets": "all-linear"},
    {"model": "gpt2", "method": "full", "precision": "fp32", "optimizer": "sgd"},
]
# The plan's own inputs (data, card, price) go in as they exist in calc's plan request.
PLAN_VARIATIONS = [
    {"dataset_tokens": "500000000", "epochs": "3"},
    {"gpu": "a100-80gb-sxm", "price_per_gpu_hour": "1.5"},
    {"gpu": "rtx-4090", "model": "qwen2.5-1.5b", "epochs": "2.5"},
    {"gpu": "rtx-3090"},  # does not fit: suggestions
    {"gpu": "mi300x", "price_per_gpu_hour": "0.75", "num_gpus": "8", "sharding": "zero3"},
    {"price_tier": "managed", "gpu": "h100-sxm"},
    {
        "interruptible": "true",
        "checkpoint_interval_minutes": "20",
        "checkpoint_minutes": "3",
        "interruptions_per_day": "4",
    },
    {"startup_minutes": "25", "starts": "3"},
    # evaluations and saves (calc.run_phases); on interruptible capacity the saves are the
    # checkpoints
    {
        "method": "full",
        "gpu": "h100-sxm",
        "num_gpus": "8",
        "sharding": "zero3",
        "eval_steps": "200",
        "eval_tokens": "5000000",
        "eval_batch_size": "4",
        "save_steps": "0.25",
        "checkpoint_write_gb_per_s": "2",
        "eval_on_start": "true",
        "save_total_limit": "2",
    },
    {"interruptible": "true", "save_steps": "300", "save_only_model": "true"},
    # eight GPUs on servers of four: the multi-node note and the network's rate
    {"gpu": "a100-40gb-sxm", "num_gpus": "8", "sharding": "zero3", "gpus_per_node": "4"},
    {"storage_gb": "200", "storage_price_per_gb_month": "0.1", "months_kept": "6"},
    {"experiment_multiplier": "3", "safety_margin": "0.1"},
    {"mfu": "0.35", "method": "qlora", "qlora_speed_factor": "0.5"},
    {"scaling_efficiency": "0.8", "num_gpus": "4", "sharding": "zero2", "gpu": "a100-40gb-sxm"},
    # current presets, a mixture of experts, new cards and an unpriced owner's card
    {"model": "qwen3-30b-a3b", "method": "lora", "gpu": "rtx-pro-6000"},
    {"model": "gpt-oss-20b", "method": "qlora", "gpu": "h100-nvl"},
    {"model": "gemma-3-4b", "method": "qlora", "gpu": "t4"},
    # the training-library section (its profiles) and its behaviours
    {"framework": "hf-trainer", "lora_adapter_dtype": "fp32"},
    # transformers 5's 3-D MoE experts under peft (calc.lora.fused_expert_adapters)
    {"model": "qwen3-30b-a3b", "moe_expert_layout": "fused-3d", "lora_adapter_dtype": "fp32"},
    {"framework": "hf-custom-loop", "loss_outputs_kept": "true", "attention_grouped_kv": "true"},
    # the transformers 4 generation of the Trainer, and DeepSpeed's ZeRO accumulating sharded
    {
        "framework": "hf-trainer-4",
        "model": "qwen3-30b-a3b",
        "num_gpus": "2",
        "sharding": "zero3",
        "sharding_engine": "deepspeed",
        "gradient_accumulation_steps": "4",
    },
    # FSDP1's wrap floor and slack (fsdp_wrap_floor, set by hf-custom-loop on several GPUs)
    {
        "framework": "hf-custom-loop",
        "method": "qlora",
        "num_gpus": "2",
        "sharding": "zero3",
        "gpu": "rtx-3090",
    },
    {"framework": "torchtune", "method": "full", "model": "llama-3.2-1b"},
    # torchtune before July 2024: fp32 logits kept through backward; its eager chunked loss
    {
        "framework": "torchtune",
        "model": "llama-3.2-1b",
        "chunked_loss": "false",
        "loss_outputs_kept": "true",
        "logits_upcast_in_model": "true",
    },
    {"model": "llama-3.2-1b", "chunked_loss": "true", "chunked_loss_keeps_fp32": "true"},
    {"framework": "litgpt", "num_gpus": "2", "sharding": "zero3"},
    # LitGPT's QLoRA behaviours (the previous micro-batch kept, 4-bit output layer, fp16
    # dequantisation) and FSDP1's flat parameters and wrap floor, set by hand outside their profiles
    {
        "method": "qlora",
        "model": "llama-3.2-3b",
        "previous_outputs_kept": "true",
        "qlora_output_layer_quantized": "true",
        "qlora_dequant_fp16": "true",
    },
    {
        "fsdp_flat_parameters": "true",
        "fsdp_wrap_floor": "true",
        "method": "full",
        "model": "gemma-2-2b",
        "num_gpus": "2",
        "sharding": "zero3",
    },
    {
        "framework": "unsloth",
        "method": "qlora",
        "qlora_quant_state_replicated": "true",
        "num_gpus": "2",
        "sharding": "zero3",
    },
    # FP8 compute on a card that has it
    {"fp8_compute": "true", "gpu": "h100-sxm", "method": "full", "model": "llama-3.2-1b"},
    # torchao's FP8 linears run eager (the accelerate profiles' library), and Transformer Engine's
    {"fp8_compute": "true", "fp8_library": "torchao", "gpu": "h100-sxm", "method": "lora"},
    {
        "fp8_compute": "true",
        "fp8_library": "transformer-engine",
        "framework": "generic",
        "gpu": "h100-sxm",
    },
    # fp32 training with TF32 matmuls (an NVIDIA container, or tf32=True)
    {"tf32": "true", "precision": "fp32", "method": "lora", "gpu": "a100-80gb-sxm"},
    # a loop that zeroes its gradients in place (torch < 2.0, accelerate < 0.28): kept all step
    {"zero_grad_set_to_none": "false", "method": "full", "model": "llama-3.2-1b"},
    # peft's modules_to_save: the embedding and / or the output layer trained in full
    {"lora_modules_to_save": "embed_tokens+lm_head", "model": "llama-3.2-1b", "gpu": "l4"},
    {"lora_modules_to_save": "embed_tokens", "method": "qlora", "lora_adapter_dtype": "fp32"},
    {"lora_modules_to_save": "lm_head", "model": "gemma-3-4b", "method": "lora"},
    {"lora_modules_to_save": "embed_tokens+lm_head-tied", "model": "qwen3-0.6b"},
    # the reader's data: sample lengths (name:value pairs in the URL) and how they are batched
    {"length_stats": "mean:900,p90:2000", "micro_batch_size": "4", "seq_len": "4096"},
    {"length_stats": "mean:600,max:1024", "batching": "pad-max", "gpu": "l4"},
    {"length_stats": "p90:1500", "batching": "packed", "micro_batch_size": "2"},
    # PyTorch's expandable segments (Unsloth sets them): the replay maps pages, not segments
    {"length_stats": "mean:900,p90:2000", "expandable_segments": "true", "micro_batch_size": "4"},
    # a short run (60 steps of 2 x 4 samples) meets a shorter longest sample than the draws'
    {
        "length_stats": "mean:225,p90:442,max:1585",
        "max_steps": "60",
        "micro_batch_size": "2",
        "gradient_accumulation_steps": "4",
    },
    # the same run with the data's 99th percentile: the tail fitted through it
    {
        "length_stats": "mean:225,p90:442,p99:619,max:1585",
        "max_steps": "60",
        "micro_batch_size": "2",
        "gradient_accumulation_steps": "4",
    },
    # checkpointing by granularity: torchtitan's every-N-th block and per-op policies
    {
        "method": "full",
        "checkpointing_granularity": "every-n",
        "checkpointing_every": "2",
        "seq_len": "4096",
        "gpu": "h100-sxm",
    },
    {"checkpointing_granularity": "selective-op", "model": "llama-3.2-1b", "gpu": "a100-80gb-sxm"},
    # FSDP2 (fully_shard): the gathered parameters copied out of the all-gather buffer
    {
        "fsdp_fully_shard": "true",
        "method": "full",
        "model": "llama-3.2-1b",
        "num_gpus": "8",
        "sharding": "zero3",
        "gpu": "h100-sxm",
    },
    # peft's prepare_model_for_kbit_training (fp32 outside the 4-bit weights), and a loop's loss
    # on the model's 16-bit logits
    {
        "method": "qlora",
        "model": "llama-3.1-8b",
        "qlora_prepare_kbit": "true",
        "lora_adapter_dtype": "fp32",
    },
    {"model": "llama-3.2-1b", "loss_on_16bit_logits": "true", "seq_len": "4096"},
    # the libraries' own profiles, one generation each
    {"framework": "generic", "method": "full", "model": "llama-3.2-1b"},
    {"framework": "hf-trainer-4", "method": "qlora", "model": "qwen3-30b-a3b"},
    {"framework": "trl-sft", "method": "qlora", "model": "llama-3.1-8b", "gpu": "rtx-4090"},
    {"framework": "axolotl", "method": "lora", "model": "qwen3-8b"},
    {"framework": "llama-factory", "method": "lora", "num_gpus": "2", "sharding": "zero3"},
    {"framework": "ms-swift", "method": "lora", "model": "qwen3-4b"},
    {"framework": "pytorch-loop", "method": "lora", "model": "llama-3.2-3b"},
    {"framework": "pytorch-loop-4", "method": "full", "model": "llama-3.2-1b"},
    # Unsloth's own kernels and its loss, and TRL's fused output layer, set by hand
    {"fused_lora_kernels": "true", "loss_grad_in_forward": "true", "method": "qlora"},
    {"loss_fused_lm_head": "true", "model": "llama-3.2-1b", "seq_len": "4096"},
    {"liger_kernel": "true", "chunked_loss": "true", "method": "full", "model": "llama-3.2-1b"},
    # the network between servers (16 GPUs: two servers of eight)
    {"network": "infiniband-3200", "num_gpus": "16", "sharding": "zero3", "gpu": "h100-sxm"},
    {"network": "infiniband-1600", "num_gpus": "16", "sharding": "zero3", "gpu": "a100-80gb-sxm"},
    {"network": "roce-3200", "num_gpus": "16", "sharding": "zero3", "gpu": "h100-sxm"},
    {"network": "efa-3200", "num_gpus": "16", "sharding": "zero2", "gpu": "h100-sxm"},
    {"network": "efa-400", "num_gpus": "16", "sharding": "zero3", "gpu": "a100-80gb-sxm"},
    {"network": "ethernet-100", "num_gpus": "16", "sharding": "zero3", "gpu": "h100-sxm"},
    {"network": "ethernet-25", "num_gpus": "16", "sharding": "ddp", "method": "lora"},
    {"network": "gpudirect-tcpxo-1600", "num_gpus": "16", "sharding": "zero3", "gpu": "h100-sxm"},
    {"network": "gpudirect-tcpx-800", "num_gpus": "24", "sharding": "zero2", "gpu": "h100-sxm"},
    {
        "network": "roce-800",
        "num_gpus": "32",
        "sharding": "zero3",
        "gpu": "h100-sxm",
        "method": "lora",
    },
    # torch 2.5-2.10's SDPA order (cuDNN tried last), on a card where cuDNN would run first
    {"sdpa_cudnn_last": "true", "gpu": "h100-sxm", "model": "llama-3.2-3b"},
    # FlashAttention-4 on a Blackwell card, on an MoE model's grouped experts
    {"flash_attention_4": "true", "attention": "flash", "gpu": "b200", "model": "qwen3-30b-a3b"},
    # an optimizer that updates one tensor at a time, on a small full fine-tuning step
    {"optimizer_per_tensor": "true", "method": "full", "model": "llama-3.2-1b", "seq_len": "256"},
    # transformers 4.52's additive padding mask, shared by the blocks (no copy per block), on a
    # model whose sliding window the sequence reaches
    {
        "sdpa_mask_boolean": "false",
        "attention_mask": "padding",
        "model": "mistral-7b",
        "seq_len": "8192",
        "gpu": "a100-80gb-sxm",
    },
    # a loop that does not clip its gradients (torchtune's and LitGPT's defaults)
    {"gradient_clipping": "false", "method": "full", "gpu": "h100-sxm", "model": "llama-3.2-1b"},
    # DeepSpeed's ZeRO-Offload before 0.19.5 / 0.17: pageable gradient copies, fp32 upload
    {
        "sharding_engine": "deepspeed",
        "sharding": "zero2",
        "num_gpus": "2",
        "cpu_offload": "optimizer",
        "offload_pinned": "false",
        "offload_host_cast": "false",
        "method": "full",
        "model": "llama-3.2-1b",
        "gpu": "a100-80gb-sxm",
    },
    # transformers 4.51's load block (0.95 of the free memory), Alpaca-like lengths
    {
        "framework": "unsloth",
        "method": "qlora",
        "model": "llama-3.1-8b",
        "gpu": "t4",
        "load_warmup": "transformers-4.51",
        "length_stats": "mean:225,p90:442,max:1585",
    },
    # TRL's QLoRA notebook on transformers 4.57: the 4.52-4.57 load block on the default stack
    {
        "method": "qlora",
        "model": "qwen2.5-7b",
        "gpu": "l4",
        "load_warmup": "transformers-4.52",
        "length_stats": "mean:600,p90:1500",
    },
    # Unsloth 2024's whole logits, copied to fp32 by accelerate's mixed precision wrapper
    {
        "framework": "unsloth",
        "method": "qlora",
        "model": "mistral-7b",
        "loss_grad_in_forward": "false",
        "outputs_cast_fp32": "true",
    },
    # torchtune's chunked output layer trained in full, its fp32 rotary table; bitsandbytes
    # <= 0.46 taking its matmuls' dtype from the input
    {
        "output_layer_chunked": "true",
        "chunked_loss": "true",
        "method": "full",
        "model": "llama-3.2-1b",
    },
    {"rope_cache_fp32": "true", "model": "llama-3.2-3b", "method": "lora"},
    # Unsloth's 16-bit rotary tables: in every attention layer (transformers up to 4.47), and
    # the model's one on a stack whose profile has none
    {"rope_cache_16bit": "per-layer", "framework": "unsloth", "method": "qlora"},
    {"rope_cache_16bit": "model", "model": "qwen2.5-7b", "method": "lora"},
    {"qlora_compute_dtype_from_input": "true", "method": "qlora", "gpu": "a100-80gb-sxm"},
    # TRL before 0.26: the kbit-prepared embedding and output layer (and the copies
    # lora_modules_to_save trains) back in bf16
    {
        "qlora_embeddings_recast_bf16": "true",
        "qlora_prepare_kbit": "true",
        "lora_modules_to_save": "embed_tokens+lm_head",
        "method": "qlora",
        "precision": "bf16-true",
    },
    # LitGPT's chunked loss on the logits its loop holds, its one q/k/v adapter
    {
        "chunked_loss_holds_logits": "true",
        "chunked_loss": "true",
        "lora_fused_qkv_adapter": "true",
        "lora_targets": "q_proj,v_proj",
    },
    # weights loaded in 16 bits under mixed precision, set by hand on the generic library
    {"weights_loaded_16bit": "true", "precision": "bf16-mixed", "framework": "generic"},
    # an fp16 checkpoint (Llama 2) loaded as it is and trained under bf16 autocast
    {
        "weights_loaded_16bit": "true",
        "weights_loaded_other_16bit": "true",
        "precision": "bf16-mixed",
        "model": "llama-2-7b",
    },
    # samples of like length batched together (group_by_length)
    {"length_stats": "mean:700,p90:1800", "batching": "grouped", "micro_batch_size": "4"},
    {"length_stats": "mean:300,p90:900", "batching": "padding-free", "micro_batch_size": "4"},
    {
        "framework": "unsloth",
        "method": "qlora",
        "loss_fused_lm_head": "true",
        "loss_whole_logits_small_batches": "true",
        "length_stats": "mean:225,p90:442,max:1585",
        "micro_batch_size": "2",
    },
    # packed samples that attend each within itself (varlen flash attention)
    {
        "length_stats": "mean:400,p90:900",
        "batching": "packed",
        "packed_attention": "per-sample",
        "attention": "flash",
        "seq_len": "8192",
    },
    # a card the reader owns: electricity instead of rent
    {"owned": "true", "electricity_price_per_kwh": "0.3", "gpu": "rtx-4090", "method": "qlora"},
    {"owned": "true", "board_power_w": "300", "gpu": "rtx-3090", "method": "lora"},
    # a card capped below its board power (nvidia-smi -pl): a lower clock, a slower step
    {"power_limit_w": "300", "gpu": "rtx-4090", "method": "qlora", "owned": "true"},
]
ALL_VARIATIONS = VARIATIONS + PLAN_VARIATIONS


# ---------------------------------------------------------------- parity


@pytest.mark.parametrize("query", ALL_VARIATIONS, ids=lambda q: urlencode(q)[:60] or "default")
def test_page_matches_cpython(calc_page, query):
    calc_page.navigate(query)
    response = calc_run(calculator.COMMAND, request_for(query))["result"]
    assert calc_page.page.locator("#calc .calc-stale-note").is_hidden()
    assert_parity(calc_page.outputs(), response, calc_page.lang)
    warnings = calc_page.page.eval_on_selector_all(
        "#calc [data-warning]", "els => els.map(e => e.dataset.warning)"
    )
    assert warnings == list(response.get("warnings", []))


# ---------------------------------------------------------------- shared links

# Records, from the first script on, every moment the page says "ready" (the numbers it
# shows then, and its key) and whether any number was visible while it did not.
WATCH_JS = """(() => {
  const log = window.__calcLog = { ready: [], visibleWhileNotReady: [], states: [] };
  const outputs = () => [...document.querySelectorAll('#calc [data-output][data-value]')];
  function sample(root) {
    const state = root.dataset.calcState;
    if (log.states[log.states.length - 1] !== state) log.states.push(state);
    if (state === 'ready') {
      log.ready.push({ key: root.dataset.calcKey,
                       values: outputs().map(el => [el.dataset.output, el.dataset.value]) });
    } else {
      const shown = outputs().filter(el => el.checkVisibility()).length;
      if (shown) log.visibleWhileNotReady.push([state, shown]);
    }
  }
  function watch(root) {
    new MutationObserver(() => sample(root)).observe(root, { attributes: true,
      attributeFilter: ['data-calc-state', 'data-calc-key'] });
    const frame = () => { sample(root); if (!log.ready.length) requestAnimationFrame(frame); };
    frame();
  }
  const found = () => document.getElementById('calc');
  if (found()) watch(found());
  else new MutationObserver((_, obs) => { if (found()) { obs.disconnect(); watch(found()); } })
    .observe(document, { childList: true, subtree: true });
})()"""

# Shared links, including one that differs from the default in every group of the form.
SHARED_LINKS = [
    ("en", {"model": "llama-2-7b", "method": "qlora", "micro_batch_size": "2", "seq_len": "4096"}),
    (
        "es",
        {
            "model": "mistral-7b",  # model
            "method": "full",
            "optimizer": "adamw-8bit",  # method
            "micro_batch_size": "2",
            "gradient_checkpointing": "false",
            "seq_len": "1024",  # batch
            "num_gpus": "2",
            "sharding": "zero3",  # parallelism
            "gpu": "a100-80gb-sxm",
            "dataset_tokens": "200000000",
            "epochs": "2",  # plan
            "mfu": "0.35",
            "startup_minutes": "20",
        },
    ),  # advanced
    (
        "en",
        {
            "model": "qwen2.5-7b",
            "num_gpus": "4",
            "sharding": "zero2",
            "gpu": "rtx-4090",
            "price_per_gpu_hour": "0.5",
            "safety_margin": "0.1",
        },
    ),
    ("es", {"seq_len": "2048"}),  # spelled out, but the default setup: ready at once
]


def cli_plan(request: dict) -> dict:
    """What ``python -m calc plan`` prints for a request."""
    import subprocess
    import sys

    run = subprocess.run(
        [sys.executable, "-m", "calc", "plan", "--request", "-"],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=60,
        check=True,
    )
    return json.loads(run.stdout)


@pytest.mark.parametrize(("lang", "query"), SHARED_LINKS, ids=lambda x: str(x)[:50])
def test_shared_link_never_shows_foreign_numbers(browser, site_server, lang, query):
    context = new_context(browser)
    page = context.new_page()
    page.add_init_script(WATCH_JS)
    problems = watch_offline(page, site_server.origin)
    calc = Calc(page, site_server, lang)
    calc.open(query)
    calc.wait_quiet()  # every answer the page asked for is in: a late one would show here
    log = page.evaluate("window.__calcLog")
    expected = cli_plan(request_for(query))
    assert log["ready"], log["states"]
    assert log["visibleWhileNotReady"] == [], log
    for seen in log["ready"]:
        assert json.loads(seen["key"]) == request_for(query)
        for path, raw in seen["values"]:
            assert_raw_equals(raw, view.resolve(expected, path), path)
    assert calc.state() == "ready"
    assert_parity(calc.outputs(), expected, lang)
    # the verdict line, first in the results, says what the CLI's answer says
    from calc.gpus import gpus_listing

    strings = calculator.results_strings(lang, gpus_listing()["gpus"])
    line = view.to_html(view.Renderer(expected, lang, strings).verdict())
    verdict = page.locator("#calc .calc-results-slot .calc-verdict")
    assert verdict.text_content() == html.unescape(re.sub(r"<[^>]+>", "", line))
    assert verdict.get_attribute("data-verdict") in ("fits", "borderline", "does_not_fit")
    if query == {"seq_len": "2048"}:
        # boot.js withdraws any link's figures; calculator.js finds the default setup and
        # shows the build-time figures as the form's, with no computation
        assert log["states"] in (["static", "computing", "ready"], ["computing", "ready"])
    else:
        assert "computing" in log["states"]
        # while computing, the results said so instead of showing the default's figures
        assert page.locator("#calc .calc-pending-note").is_hidden()
    context.close()
    assert_clean(problems, f"shared link {query}", site_server.origin)


def test_enough_variations_cover_every_option():
    assert len(ALL_VARIATIONS) >= 30
    used = {key for query in ALL_VARIATIONS for key in query}
    assert set(FIELDS) <= used
    for key, spec in FIELDS.items():
        if spec.enum is not None and calculator.input_kind(spec) == "enum":
            seen = {q[key] for q in ALL_VARIATIONS if key in q} | {str(spec.default)}
            assert seen >= set(spec.choices or ()), key


class _StaticOutputs(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.found, self.state = [], None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "data-calc-state" in attrs:
            self.state = attrs["data-calc-state"]
        if "data-output" in attrs and "data-value" in attrs:
            self.found.append((attrs["data-output"], attrs["data-value"]))


@pytest.mark.parametrize("lang", ["es", "en"])
def test_static_result_is_in_the_html_and_equals_the_live_one(
    lang, built_site, shared_context, site_server
):
    path = built_site / ("calculator" if lang == "es" else "en/calculator") / "index.html"
    parser = _StaticOutputs()
    parser.feed(path.read_text(encoding="utf-8"))
    assert parser.state == "static"
    response = calc_run(calculator.COMMAND, calculator.default_request())["result"]
    assert parser.found == tree_outputs(view.render_results(response, lang, STRINGS[lang]))
    page = shared_context.new_page()
    calc = Calc(page, site_server, lang)
    calc.open()  # the default setup: the build-time figures are the form's, "ready" at once
    assert [(p, v) for p, v, _ in calc.outputs()] == parser.found
    calc.navigate({"seq_len": "1024"})
    calc.navigate({})  # computed live this time
    assert [(p, v) for p, v, _ in calc.outputs()] == parser.found
    close_calculator_page(page)


def test_the_worker_warms_up_on_the_build_time_request(shared_context, site_server):
    """Once up, the worker answers the build-time request once and drops the answer
    (worker.js ``warmUp``, ``Session.warm``): the page then hears "warmed", its figures are
    still the build-time ones and no answer is pending."""
    page = shared_context.new_page()
    calc = Calc(page, site_server, "en")
    calc.open()
    shown = calc.outputs()
    page.wait_for_function(
        "document.getElementById('calc').dataset.calcWarm === 'true'", timeout=READY_TIMEOUT_MS
    )
    calc.wait_quiet()
    assert calc.outputs() == shown
    close_calculator_page(page)


# ---------------------------------------------------------------- form


def test_form_drives_the_same_numbers(calc_page):
    page = calc_page.page
    calc_page.navigate({"mode": "advanced"})  # chunked loss and LoRA targets are advanced
    page.fill("#calc-seq_len", "3072")
    page.select_option("#calc-method", "qlora")
    page.check("#calc-chunked_loss")
    page.fill("#calc-lora_targets", "q_proj, v_proj")
    page.fill("#calc-micro_batch_size", "2")
    calc_page.settle()
    page.wait_for_function("() => location.search.includes('micro_batch_size=2')")
    query = {
        "mode": "advanced",
        "seq_len": "3072",
        "method": "qlora",
        "chunked_loss": "true",
        "lora_targets": "q_proj,v_proj",
        "micro_batch_size": "2",
    }
    assert dict(parse_qsl(urlsplit(page.url).query)) == query
    response = calc_run(calculator.COMMAND, request_for(query))["result"]
    assert_parity(calc_page.outputs(), response, calc_page.lang)


def test_an_edit_sends_its_request_before_the_address_changes(calc_page):
    """The worker gets an edit's request before the page writes the address
    (history.replaceState): Chromium lays the page out first, which right after an answer's
    results went in took 27 ms a change here (bench_calculator), time the worker can spend
    computing."""
    page = calc_page.page
    calc_page.navigate({})
    page.evaluate(
        """() => {
        window.__order = [];
        const post = Worker.prototype.postMessage;
        Worker.prototype.postMessage = function (msg, transfer) {
          if (msg && msg.type === "compute") window.__order.push("compute");
          return post.call(this, msg, transfer);
        };
        const replace = History.prototype.replaceState;
        history.replaceState = function (...args) {
          window.__order.push("address");
          return replace.apply(this, args);
        };
        window.__unwrap = () => {
          Worker.prototype.postMessage = post;
          delete history.replaceState;
        };
    }"""
    )
    try:
        page.fill("#calc-seq_len", "3072")
        calc_page.settle()
        page.wait_for_function("() => location.search.includes('seq_len=3072')")
    finally:
        order = page.evaluate("() => { window.__unwrap(); return window.__order; }")
    assert order[:2] == ["compute", "address"], order


def test_the_training_library_sets_what_the_reader_left_to_it(calc_page):
    """Choosing a library changes the numbers as its profile does in calc, the behaviours
    the reader did not touch show the profile's values, and the URL carries the choice only."""
    page = calc_page.page
    calc_page.navigate({"mode": "advanced"})
    # the default library (hf-trainer) stays out of the URL: another one goes into it
    page.select_option("#calc-framework", "trl-sft")
    calc_page.settle()
    page.wait_for_function("() => location.search.includes('framework=trl-sft')")
    query = {"mode": "advanced", "framework": "trl-sft"}
    assert dict(parse_qsl(urlsplit(page.url).query)) == query
    response = calc_run(calculator.COMMAND, request_for(query))["result"]
    assert (
        response["memory"]["request"]["lora_adapter_dtype"] == "fp32"
    )  # TRL leaves LoRA adapters in fp32
    assert_parity(calc_page.outputs(), response, calc_page.lang)
    assert page.input_value("#calc-lora_adapter_dtype") == "fp32"
    # the behaviours fold under the library's choice, until the reader opens them
    assert page.locator("#calc-lora_adapter_dtype").is_hidden()
    page.click("#calc .calc-library-behaviours > summary")
    # a behaviour the reader sets wins over the profile, and goes into the URL
    page.select_option("#calc-lora_adapter_dtype", "base")
    calc_page.settle()
    page.wait_for_function("() => location.search.includes('lora_adapter_dtype=base')")
    query = {**query, "lora_adapter_dtype": "base"}
    response = calc_run(calculator.COMMAND, request_for(query))["result"]
    assert response["memory"]["request"]["lora_adapter_dtype"] == "base"
    assert_parity(calc_page.outputs(), response, calc_page.lang)


def test_a_shared_behaviour_unfolds_its_section(calc_page):
    """A link that sets one of the library's behaviours opens the advanced options and the
    behaviours' fold, so the reader sees why the numbers differ from the library's."""
    page = calc_page.page
    calc_page.navigate({"optimizer_fused": "true"})
    assert page.locator("#calc details.calc-advanced").evaluate("d => d.open")
    assert page.locator("#calc details.calc-library-behaviours").evaluate("d => d.open")
    assert page.locator("#calc-optimizer_fused").is_visible()
    assert page.locator("#calc-optimizer_fused").is_checked()


def test_the_cuda_only_filter_outlives_a_recompute(calc_page):
    page = calc_page.page
    calc_page.navigate({})
    box = page.locator("#calc .calc-cuda-only-box").first
    assert page.locator('#calc tr[data-stack]:not([data-stack="cuda"])').count() > 0
    # one rank per row: among all stacks while the filter is off
    ranks = "#calc .calc-recommendations tbody tr:visible "
    assert page.locator(ranks + ".calc-rank-all").first.is_visible()
    assert page.locator(ranks + ".calc-rank-stack").first.is_hidden()
    box.check()
    assert page.locator('#calc tr[data-stack]:not([data-stack="cuda"])').first.is_hidden()
    page.fill("#calc-seq_len", "3072")
    calc_page.settle()
    assert page.locator("#calc .calc-cuda-only-box").first.is_checked()
    assert page.locator('#calc tr[data-stack]:not([data-stack="cuda"])').first.is_hidden()
    # every recommendation line keeps to CUDA, the filter is in the URL, ranks start at 1
    assert page.locator('#calc .calc-highlights li[data-stack="rocm"]').first.is_hidden()
    assert page.locator('#calc .calc-highlights li[data-stack="cuda"]').first.is_visible()
    page.wait_for_function("() => location.search.includes('stack=cuda')")
    first_rank = page.locator("#calc .calc-recommendations tbody tr:visible .calc-rank-stack")
    assert first_rank.first.inner_text() == "1"
    assert first_rank.first.is_visible()
    assert page.locator(ranks + ".calc-rank-all").first.is_hidden()
    # a shared link with the filter opens with it on
    calc_page.navigate({"stack": "cuda"})
    assert page.locator("#calc .calc-cuda-only-box").first.is_checked()
    assert page.locator('#calc .calc-highlights li[data-stack="rocm"]').first.is_hidden()
    calc_page.navigate({})
    assert not page.locator("#calc .calc-cuda-only-box").first.is_checked()


def test_pasted_config_drives_the_same_numbers(calc_page):
    page = calc_page.page
    calc_page.navigate({})
    page.click("#calc .calc-config summary")  # closed after a restore without a config
    page.fill("#calc-hf_config", json.dumps(CUSTOM_CONFIG, indent=2))
    calc_page.settle()
    response = calc_run(
        calculator.COMMAND, request_for({"model": json.dumps({"hf_config": CUSTOM_CONFIG})})
    )["result"]
    assert_parity(calc_page.outputs(), response, calc_page.lang)
    assert json.loads(dict(parse_qsl(urlsplit(page.url).query))["model"]) == {
        "hf_config": CUSTOM_CONFIG
    }


def test_a_suggestion_applies_its_changes(calc_page):
    page = calc_page.page
    calc_page.navigate({"gpu": "rtx-3090"})
    response = calc_run(calculator.COMMAND, request_for({"gpu": "rtx-3090"}))["result"]
    # the first change after which it fits (only those get a button)
    first = next(s for s in response["suggestions"] if s["verdict"] == "fits")
    page.locator("#calc button.calc-apply").first.click()
    calc_page.settle()
    query = {"gpu": "rtx-3090", **{k: str(v) for k, v in first["changes"].items()}}
    shown = dict(parse_qsl(urlsplit(page.url).query))
    shown.pop("mode", None)  # a changed advanced option unfolds the advanced options
    assert shown == query
    applied = calc_run(calculator.COMMAND, request_for(query))["result"]
    assert_parity(calc_page.outputs(), applied, calc_page.lang)


# ---------------------------------------------------------------- bad input


BAD = [
    ({"seq_len": "-5"}, "seq_len", "not_positive"),
    ({"seq_len": "0"}, "seq_len", "not_positive"),
    ({"micro_batch_size": "0"}, "micro_batch_size", "not_positive"),
    ({"seq_len": "1000000000"}, "seq_len", "out_of_range"),
    ({"seq_len": "abc"}, "seq_len", "not_integer"),
    ({"lora_rank": "2.5"}, "lora_rank", "not_integer"),
    ({"seq_len": ""}, "seq_len", "empty_value"),
    ({"method": "bogus"}, "method", "unknown_value"),
    ({"gradient_checkpointing": "maybe"}, "gradient_checkpointing", "not_boolean"),
    ({"lora_targets": "q_proj,nonexistent"}, "lora_targets", "unknown_lora_target"),
    ({"model": "no-such-model"}, "model", "unknown_preset"),
    ({"model": "{not json"}, "hf_config", "config_json_invalid"),
    (
        {"model": json.dumps({"hf_config": {"model_type": "t5"}})},
        "hf_config",
        "unsupported_architecture",
    ),
    (
        {"model": json.dumps({"hf_config": {"model_type": "llama"}})},
        "hf_config",
        "config_missing_key",
    ),
    ({"model": json.dumps({"hf_config": [1, 2]})}, "hf_config", "config_not_object"),
    ({"model": "<script>window.__pwned=1</script>"}, "model", "unknown_preset"),
    ({"seq_len": '"><img src=x onerror="window.__pwned=1">'}, "seq_len", "not_integer"),
    ({"method": "'\"><svg onload=window.__pwned=1>"}, "method", "unknown_value"),
    ({"dataset_tokens": "0"}, "dataset_tokens", "out_of_range"),
    ({"dataset_tokens": "-1e9"}, "dataset_tokens", "out_of_range"),
    ({"safety_margin": "150"}, "safety_margin", "out_of_range"),  # 150 % (25 = 25 %)
    ({"price_per_gpu_hour": "-1"}, "price_per_gpu_hour", "out_of_range"),
    ({"epochs": "1,5,3"}, "epochs", "not_number"),
    ({"gpu": "gtx-480"}, "gpu", "unknown_gpu"),
    ({"mfu": "NaN"}, "mfu", "not_number"),
    ({"lora_dropout": "1.5"}, "lora_dropout", "out_of_range"),
]


# errors about text the reader pasted or a model: no range to state
ERRORS_WITHOUT_RANGE = {
    "empty_value",
    "config_json_invalid",
    "unsupported_architecture",
    "config_missing_key",
    "config_not_object",
    "unknown_preset",
}


def _valid_phrases(lang: str) -> list[str]:
    ui = STRINGS[lang]["ui"]
    return [
        text.split("{")[0]
        for key, text in ui.items()
        if key.startswith("valid_") and key not in ("valid_percent", "valid_whole")
    ]


@pytest.mark.parametrize(("query", "field", "code"), BAD, ids=lambda x: str(x)[:40])
def test_bad_input_is_reported_at_its_field_and_keeps_the_last_result(
    calc_page, query, field, code
):
    calc_page.navigate({"seq_len": "1024"})
    good = calc_page.outputs()
    calc_page.navigate(query)
    found = calc_page.error_for(field)
    assert found is not None, f"no message at {field}"
    assert found[0] == code
    message = STRINGS[calc_page.lang]["errors"][code]
    assert found[1].startswith(message)
    assert calc_page.outputs() == good  # last good result kept
    assert calc_page.page.locator("#calc .calc-stale-note").is_visible()
    assert calc_page.state() == "invalid"
    if code not in ERRORS_WITHOUT_RANGE:  # the message says what would be valid
        assert any(p in found[1] for p in _valid_phrases(calc_page.lang)), found[1]
    assert calc_page.page.evaluate("window.__pwned") is None
    assert (
        calc_page.page.locator("#calc script:not([type='application/json']):not([src])").count()
        == 0
    )
    assert calc_page.page.locator("#calc img, #calc .calc-error svg").count() == 0
    calc_page.navigate({})  # and it recovers
    assert calc_page.error_for(field) is None


def test_an_unknown_value_in_the_url_is_shown_as_given(calc_page):
    calc_page.navigate({"method": "bogus"})
    page = calc_page.page
    assert page.input_value("#calc-method") == "bogus"  # not a valid one in its place
    assert calc_page.error_for("method")[0] == "unknown_value"
    assert (
        "full" in calc_page.error_for("method")[1] and "qlora" in calc_page.error_for("method")[1]
    )
    page.select_option("#calc-method", "qlora")
    calc_page.settle()
    assert calc_page.state() == "ready"
    assert page.locator("#calc-method option[data-from-url]").count() == 0


@pytest.mark.parametrize("text", ["25", "25 %", "0.25", "25%"])
def test_the_margin_reads_percentages_and_shares(calc_page, text):
    calc_page.navigate(
        {"safety_margin": text.replace(".", ",") if calc_page.lang == "es" else text}
    )
    assert calc_page.state() == "ready"
    key = json.loads(calc_page.page.evaluate("document.getElementById('calc').dataset.calcKey"))
    assert key["safety_margin"] == 0.25


def test_an_unknown_model_id_asks_for_its_config(calc_page):
    calc_page.navigate({"model": "someone/Some-Model-7B"})
    code, text = calc_page.error_for("model")
    assert code == "unknown_preset"
    assert STRINGS[calc_page.lang]["ui"]["not_in_list"] in text
    assert calc_page.page.locator("#calc-hf_config").is_visible()  # the box to paste it in
    response = calc_run(calculator.COMMAND, request_for({"model": "someone/Some-Model-7B"}))
    suggested = response["error"].get("suggestions") or []
    for item in suggested[:5]:  # calc's nearest presets, when it names any
        assert (item["id"] if isinstance(item, dict) else item) in text


def test_more_than_eight_gpus_say_several_nodes(calc_page):
    calc_page.navigate({"num_gpus": "16", "sharding": "zero3", "gpu": "h100-sxm"})
    note = calc_page.page.locator("#calc .calc-multi-node")
    assert note.is_visible() and "NVLink" in note.text_content()
    calc_page.navigate({"num_gpus": "8", "sharding": "zero3", "gpu": "h100-sxm"})
    assert calc_page.page.locator("#calc .calc-multi-node").count() == 0


def test_every_bad_field_gets_its_own_message(calc_page):
    calc_page.navigate({"seq_len": "1024"})
    good = calc_page.outputs()
    calc_page.navigate({"micro_batch_size": "-3", "lora_rank": "abc", "price_per_gpu_hour": "-1"})
    assert calc_page.error_for("micro_batch_size")[0] == "not_positive"
    assert calc_page.error_for("lora_rank")[0] == "not_integer"
    assert calc_page.error_for("price_per_gpu_hour")[0] == "out_of_range"
    assert calc_page.outputs() == good
    calc_page.navigate({})
    assert all(
        calc_page.error_for(f) is None
        for f in ("micro_batch_size", "lora_rank", "price_per_gpu_hour")
    )


def test_empty_field_and_calc_errors_show_together(calc_page):
    # An empty field is caught in the page; the other fields still go to calc, whose
    # messages join it instead of waiting for the empty field to be filled.
    calc_page.navigate({"seq_len": "1024"})
    good = calc_page.outputs()
    calc_page.navigate({"seq_len": "", "micro_batch_size": "-3", "lora_rank": "abc"})
    assert calc_page.error_for("seq_len")[0] == "empty_value"
    calc_page.page.wait_for_selector('#calc [data-error-for="lora_rank"]:not([hidden])')
    assert calc_page.error_for("micro_batch_size")[0] == "not_positive"
    assert calc_page.error_for("lora_rank")[0] == "not_integer"
    assert calc_page.error_for("seq_len")[0] == "empty_value"  # still there
    assert calc_page.outputs() == good  # a check never shows results
    assert calc_page.page.locator("#calc .calc-stale-note").is_visible()
    calc_page.navigate({"seq_len": ""})  # only the empty field: calc finds nothing more
    assert calc_page.error_for("seq_len")[0] == "empty_value"
    assert calc_page.error_for("micro_batch_size") is None
    assert calc_page.outputs() == good
    calc_page.navigate({})
    assert calc_page.error_for("seq_len") is None


def test_unknown_query_parameters_are_named_and_ignored(calc_page):
    calc_page.navigate({"seq_len": "512"})
    calc_page.navigate({"seq_len": "1024", "colour": "blue", "<b>x</b>": "1"})
    general = calc_page.page.locator('#calc [data-error-for="_general"]')
    assert general.is_visible()
    text = general.text_content()
    assert "colour" in text and "<b>x</b>" in text
    assert calc_page.page.locator('#calc [data-error-for="_general"] b').count() == 0
    response = calc_run(calculator.COMMAND, request_for({"seq_len": "1024"}))["result"]
    assert_parity(calc_page.outputs(), response, calc_page.lang)


def test_worker_crash_is_reported_and_the_worker_restarted(browser, site_server):
    context = new_context(browser)
    page = context.new_page()
    calc = Calc(page, site_server, "en")
    calc.open()
    calc.wait_worker()
    page.evaluate("document.getElementById('calc').calculator.crashWorker()")
    page.wait_for_function("document.getElementById('calc').dataset.calcRestarts === '1'")
    calc.wait_worker()
    assert page.locator("#calc .calc-status").get_attribute("data-status") == "status_restarted"
    calc.navigate({"seq_len": "512"})
    response = calc_run(calculator.COMMAND, request_for({"seq_len": "512"}))["result"]
    assert_parity(calc.outputs(), response, "en")
    context.close()


# A bug planted in the shipped calc (the bundle served to the worker, patched in flight):
# plan_dict raises for one setup, with markup in the exception's message.
BUG_SEQ_LEN = 1234
PLANTED_BUG = f"""

_plan_dict_without_the_bug = plan_dict


def plan_dict(data):
    if isinstance(data, dict) and data.get("seq_len") == {BUG_SEQ_LEN}:
        raise ZeroDivisionError('<img src=x onerror="document.title=1">')
    return _plan_dict_without_the_bug(data)
""".encode()


def _bundle_with_a_bug(bundle: bytes) -> bytes:
    """The bundle with calc/plan.py's source and the planted bug in place of its bytecode
    (the site's bundle holds what the worker imports to start as .pyc)."""
    import io
    import zipfile

    planted = (REPO_ROOT / "calc" / "plan.py").read_bytes() + PLANTED_BUG
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(bundle)) as source, zipfile.ZipFile(out, "w") as target:
        for info in source.infolist():
            if info.filename in ("calc/plan.py", "calc/plan.pyc"):
                target.writestr("calc/plan.py", planted)
            else:
                target.writestr(info, source.read(info))
    return out.getvalue()


def test_a_bug_in_calc_is_reported_as_a_bug_not_as_bad_input(browser, site_server, built_site):
    """An exception inside calc reaches the page as an internal error: a message asking for a
    report (its code, the exception's type, where, the version; no traceback, no markup from
    the message), no field marked, the last figures kept; the next edit computes again."""
    (bundle,) = (built_site / "assets" / "calc").glob("calc-*.zip")
    patched = _bundle_with_a_bug(bundle.read_bytes())
    context = new_context(browser)  # fresh storage: no cached snapshot, the bundle is fetched
    page = context.new_page()
    problems = watch_offline(page, site_server.origin)
    # registered last, so it answers before the offline watcher's route
    context.route(
        "**/assets/calc/*.zip",
        lambda route: route.fulfill(body=patched, content_type="application/zip"),
    )
    calc = Calc(page, site_server, "en")
    calc.open()
    calc.wait_worker()
    shown = calc.outputs()
    page.fill("#calc-seq_len", str(BUG_SEQ_LEN))
    page.wait_for_function(f"{STATE} === 'error'", timeout=READY_TIMEOUT_MS)
    ui = STRINGS["en"]["ui"]
    assert page.locator("#calc .calc-status").get_attribute("data-status") == "status_internal"
    assert page.locator("#calc .calc-status").text_content() == ui["status_internal"]
    message = page.locator('#calc [data-error-for="_general"] [data-error-code="internal_error"]')
    assert message.count() == 1
    head, _, tail = ui["internal_error_report"].partition("{}")
    text = message.text_content()
    assert text.startswith(head) and text.endswith(tail), text
    reference = text[len(head) : len(text) - len(tail)]
    assert re.fullmatch(
        r"internal_error · ZeroDivisionError · calc/plan\.py:\d+ · calc "
        + re.escape(calc_module_version()),
        reference,
    ), reference
    assert page.evaluate("document.getElementById('calc').dataset.internalError") == reference
    # not an input error: no field blamed, no input-error marker, nothing from the message
    assert page.locator("#calc [aria-invalid]").count() == 0
    assert page.locator("#calc .calc-error[data-error-for]:not([hidden])").count() == 0
    assert page.evaluate("'inputError' in document.getElementById('calc').dataset") is False
    assert page.locator("#calc img").count() == 0 and page.title() != "1"
    assert "onerror" not in page.locator("#calc").inner_html()
    assert calc.outputs() == shown  # the last figures stay, as another setup's
    assert page.evaluate("document.getElementById('calc').dataset.calcResults") == "other"
    # the worker is fine: another setup computes, and the message goes
    page.fill("#calc-seq_len", "1536")
    calc.settle()
    assert calc.state() == "ready"
    assert message.count() == 0
    assert page.evaluate("'internalError' in document.getElementById('calc').dataset") is False
    assert_parity(
        calc.outputs(),
        calc_run(calculator.COMMAND, request_for({"seq_len": "1536"}))["result"],
        "en",
    )
    calc.wait_worker()
    page.wait_for_load_state("networkidle")
    context.close()
    assert_clean(problems, "calculator page with a planted bug", site_server.origin)


def calc_module_version() -> str:
    from calc import __version__

    return __version__


# ---------------------------------------------------------------- basic / advanced


def test_basic_and_advanced_modes_round_trip_through_the_url(shared_context, site_server):
    page = shared_context.new_page()
    calc = Calc(page, site_server, "en")
    calc.open()
    advanced = page.locator("#calc details[data-mode]")
    is_open = lambda: advanced.evaluate("d => d.open")  # noqa: E731
    assert not is_open()  # basic by default: the answer's inputs only
    for key in (
        "model",
        "method",
        "gpu",
        "num_gpus",
        "seq_len",
        "micro_batch_size",
        "dataset_tokens",
        "epochs",
    ):
        assert page.locator(f"#calc-{key}").is_visible(), key
    assert page.locator("#calc-lora_rank").is_hidden() and page.locator("#calc-mfu").is_hidden()
    page.click("#calc details[data-mode] > summary")
    page.wait_for_function("() => location.search.includes('mode=advanced')")
    page.goto(page.url)
    calc.wait_ready()
    assert is_open() and page.locator("#calc-lora_rank").is_visible()
    page.click("#calc details[data-mode] > summary")
    page.wait_for_function("() => !location.search.includes('mode=')")
    assert not is_open()
    # options that do not apply to the method are hidden
    calc.navigate({"mode": "advanced", "method": "full"})
    assert page.locator("#calc-lora_rank").is_hidden()
    assert page.locator("#calc-qlora_double_quant").is_hidden()
    assert page.locator("#calc-precision").is_visible()
    calc.navigate({"mode": "advanced", "method": "qlora"})
    assert page.locator("#calc-qlora_double_quant").is_visible()
    assert page.locator("#calc-lora_rank").is_visible()
    calc.navigate({"mode": "advanced"})
    assert page.locator("#calc-qlora_double_quant").is_hidden()
    assert page.locator("#calc-lora_rank").is_visible()
    close_calculator_page(page)


def test_dataset_size_from_examples_and_their_length(calc_page):
    page = calc_page.page
    calc_page.navigate({})
    page.click("#calc .calc-dataset > summary")
    page.fill("#calc-examples", "20000")
    page.fill("#calc-example_tokens", "750")
    calc_page.settle()
    assert page.input_value("#calc-dataset_tokens") == "15000000"
    key = json.loads(page.evaluate("document.getElementById('calc').dataset.calcKey"))
    assert key["dataset_tokens"] == 15_000_000
    query = dict(parse_qsl(urlsplit(page.url).query))
    assert query == {"examples": "20000", "example_tokens": "750", "dataset_tokens": "15000000"}
    response = calc_run(calculator.COMMAND, request_for(query))["result"]
    assert_parity(calc_page.outputs(), response, calc_page.lang)
    page.fill("#calc-dataset_tokens", "2000000")  # typed directly: the helper empties
    calc_page.settle()
    assert page.input_value("#calc-examples") == ""


# ---------------------------------------------------------------- URL, language, offline


def test_url_round_trip(shared_context, site_server):
    page = shared_context.new_page()
    problems = watch_offline(page, site_server.origin)
    calc = Calc(page, site_server, "es")
    query = {
        "model": calculator.PAGE_DEFAULTS["model"],
        "method": "qlora",
        "seq_len": "4096",
        "lora_targets": "q_proj,v_proj",
        "gradient_checkpointing": "false",
    }
    calc.open(query)
    assert page.input_value("#calc-seq_len") == "4096"
    assert page.input_value("#calc-method") == "qlora"
    assert page.input_value("#calc-lora_targets") == "q_proj,v_proj"
    assert not page.is_checked("#calc-gradient_checkpointing")
    # the URL holds only non-default values; lists keep their commas
    assert "lora_targets=q_proj,v_proj" in page.url and "model=" not in page.url
    page.fill("#calc-seq_len", "8192")
    calc.settle()
    page.wait_for_function("() => location.search.includes('seq_len=8192')")
    shown = calc.outputs()
    page.goto(page.url)
    calc.wait_ready()
    assert page.input_value("#calc-seq_len") == "8192"
    assert calc.outputs() == shown
    close_calculator_page(page)
    assert_clean(problems, "round trip", site_server.origin)


def test_the_family_picker_fills_the_model_field(shared_context, site_server):
    """Choosing a preset in the family list types its id into the model field: the request,
    the URL (model=...) and the figures follow; the picker itself is no URL parameter."""
    page = shared_context.new_page()
    problems = watch_offline(page, site_server.origin)
    calc = Calc(page, site_server, "en")
    calc.open({})
    default = calculator.PAGE_DEFAULTS["model"]
    assert page.input_value("#calc-model-pick") == default
    assert page.locator("#calc-model-pick optgroup").first.get_attribute("label")
    page.select_option("#calc-model-pick", "ministral-3-8b")
    calc.settle()
    page.wait_for_function("() => location.search.includes('model=ministral-3-8b')")
    assert page.input_value("#calc-model") == "ministral-3-8b"
    assert "pick" not in page.url
    # typing an id (or a Hugging Face id) moves the picker with it; a pasted id of no preset
    # leaves it on its placeholder
    page.fill("#calc-model", default)
    calc.settle()
    assert page.input_value("#calc-model-pick") == default
    page.fill("#calc-model", "Qwen/Qwen3-8B")
    calc.settle()
    assert page.input_value("#calc-model-pick") == ""
    close_calculator_page(page)
    assert_clean(problems, "family picker", site_server.origin)


def test_language_switch_keeps_the_state(shared_context, site_server):
    page = shared_context.new_page()
    problems = watch_offline(page, site_server.origin)
    calc = Calc(page, site_server, "es")
    calc.open({"method": "full", "seq_len": "1024", "mode": "advanced"})
    page.select_option("#calc-optimizer", "adamw-8bit")
    calc.settle()
    page.wait_for_load_state("networkidle")  # search's loads, before leaving the page
    href = page.get_attribute('a[hreflang="en"]', "href")
    assert urlsplit(href).path.endswith("/en/calculator/")
    assert dict(parse_qsl(urlsplit(href).query)) == {
        "mode": "advanced",
        "method": "full",
        "seq_len": "1024",
        "optimizer": "adamw-8bit",
    }
    page.goto(
        site_server.url(href.lstrip("/")) if href.startswith("/") else page.url.split("?")[0] + href
    )
    en = Calc(page, site_server, "en")
    en.wait_ready()
    assert page.input_value("#calc-optimizer") == "adamw-8bit"
    assert page.input_value("#calc-method") == "full"
    back = page.get_attribute('a[hreflang="es"]', "href")
    assert "optimizer=adamw-8bit" in back
    response = calc_run(
        calculator.COMMAND,
        request_for({"method": "full", "seq_len": "1024", "optimizer": "adamw-8bit"}),
    )["result"]
    assert_parity(en.outputs(), response, "en")
    close_calculator_page(page)
    assert_clean(problems, "language switch", site_server.origin)


def test_offline_from_the_start_and_after_load(browser, site_server):
    context = new_context(browser)
    page = context.new_page()
    problems = watch_offline(page, site_server.origin)  # every non-localhost request aborted
    fetched = []
    page.on(
        "requestfinished",
        lambda r: fetched.append(r.url) if r.url.split("?")[0].endswith(".snapshot.gz") else None,
    )
    # every request the context (page and workers) finished: Material's search worker is
    # loaded by a worker, which the page's own events and its network idle do not see
    finished: list[str] = []
    context.on("requestfinished", lambda r: finished.append(r.url))
    calc = Calc(page, site_server, "en")
    calc.open()
    page.fill("#calc-seq_len", "1536")
    calc.settle()
    # loaded, and nothing more to come: a first visit only notes itself (no snapshot), and
    # the service worker has kept the runtime
    assert any("calc-visited" in u for u in calc.wait_cached_snapshot("calc-visited"))
    assert fetched == []
    assert calc.wait_service_worker() is not None

    # Material's search, deferred until the calculator is live and left alone a moment
    # (search-defer.js), has fetched its worker: nothing more is to come before the cut
    def search_worker_loaded() -> bool:
        return any(
            "/assets/javascripts/workers/search." in u and u.split("?")[0].endswith(".min.js")
            for u in finished
        )

    while not search_worker_loaded():
        context.wait_for_event("requestfinished", timeout=STATE_TIMEOUT_MS)
    context.set_offline(True)
    page.fill("#calc-seq_len", "2560")
    calc.settle()
    assert calc.state() == "ready"
    response = calc_run(calculator.COMMAND, request_for({"seq_len": "2560"}))["result"]
    assert_parity(calc.outputs(), response, "en")
    assert any("/assets/pyodide/" in url for url in problems.requested)
    context.close()
    assert_clean(problems, "offline calculator", site_server.origin)


@pytest.mark.parametrize("path", ["", "en/"])
def test_guide_pages_load_no_pyodide_bytes(shared_context, site_server, path):
    page = shared_context.new_page()
    problems = watch_offline(page, site_server.origin)
    page.goto(site_server.url(path))
    page.wait_for_load_state("networkidle")
    heavy = [
        u
        for u in problems.requested
        if "/assets/pyodide/" in u or "/assets/calc/" in u or "/assets/calculator/" in u
    ]
    assert heavy == []
    page.close()
    assert_clean(problems, f"guide page {path!r}", site_server.origin)


@pytest.mark.parametrize("lang", ["es", "en"])
def test_phone_width_layout(browser, site_server, lang):
    context = new_context(browser, viewport={"width": 390, "height": 844}, device_scale_factor=1)
    page = context.new_page()
    calc = Calc(page, site_server, lang)
    calc.open()
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"calculator-390-{lang}.png"), full_page=True)
    calc.navigate({"gpu": "rtx-3090"})  # the longest results: suggestions, every table
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    peek = page.locator("#calc .calc-peek")
    assert peek.is_visible()  # headline figures pinned on phones
    assert peek.locator("[data-output]").first.is_visible()
    # under an input error the pinned line says so instead of showing the old figures
    calc.navigate({"gpu": "rtx-3090", "seq_len": "0"})
    assert peek.locator(".calc-peek-error").is_visible()
    assert peek.locator("[data-output]").evaluate_all("els => els.every(e => !e.checkVisibility())")
    calc.navigate({"gpu": "rtx-3090"})
    assert not peek.locator(".calc-peek-error").is_visible()
    assert peek.locator("[data-output]").first.is_visible()
    context.close()


@pytest.mark.parametrize("color_scheme", ["light", "dark"])
@pytest.mark.parametrize("lang", ["es", "en"])
def test_no_axe_violations(browser, site_server, lang, color_scheme):
    """The page with results, suggestions and an input error on show, in both schemes."""
    from axe_playwright_python.sync_playwright import Axe

    context = new_context(browser)
    page = context.new_page()
    page.emulate_media(color_scheme=color_scheme)
    calc = Calc(page, site_server, lang)
    calc.open({"gpu": "rtx-3090"})
    calc.navigate({"gpu": "rtx-3090", "seq_len": "-1"})
    page.evaluate("document.querySelectorAll('#calc details').forEach(d => d.open = true)")
    results = Axe().run(page, context="#calc")
    context.close()
    assert results.violations_count == 0, results.generate_report()


# The outline a focused control shows: width, style and colour as computed.
OUTLINE_JS = """el => { const s = getComputedStyle(el);
    return {visible: el.matches(':focus-visible'), width: parseFloat(s.outlineWidth),
            style: s.outlineStyle, color: s.outlineColor}; }"""


@pytest.mark.parametrize("color_scheme", ["light", "dark"])
def test_a_focused_control_shows_where_the_keyboard_is(browser, site_server, color_scheme):
    """Every kind of control, the config import's included, draws a solid focus ring of
    2px or more, in both schemes; the text input reached with Tab as a keyboard reader
    reaches it."""
    context = new_context(browser)
    page = context.new_page()
    page.emulate_media(color_scheme=color_scheme)
    calc = Calc(page, site_server, "es")
    calc.open()
    page.evaluate("document.querySelectorAll('#calc details').forEach(d => d.open = true)")
    page.focus("#calc-model")
    page.keyboard.press("Tab")  # the control after the model (the config import's fold)
    tabbed = page.evaluate("document.activeElement.closest('#calc') !== null")
    selectors = [
        "#calc-seq_len",
        "#calc-method",
        "#calc .calc-check input >> visible=true",
        "#calc .calc-advanced > summary",
        "#calc-import-text",
        "#calc-import-format",
        "#calc .calc-import-run",
    ]
    rings = {"(tab)": page.evaluate(f"() => ({OUTLINE_JS})(document.activeElement)")}
    for selector in selectors:
        control = page.locator(selector).first
        control.focus()
        rings[selector] = control.evaluate(OUTLINE_JS)
    context.close()
    assert tabbed
    for selector, ring in rings.items():
        assert ring["visible"], selector
        assert ring["style"] == "solid" and ring["width"] >= 2, (selector, ring)
        assert ring["color"] not in ("rgba(0, 0, 0, 0)", "transparent"), (selector, ring)


# The verdict line as a screen reader hears it (spaces as shown).
VERDICT_TEXT = (
    "() => document.querySelector('#calc .calc-verdict').textContent.replace(/\\s+/g, ' ').trim()"
)
ANNOUNCED = "() => document.querySelector('#calc .calc-announce').textContent"


def test_a_new_verdict_is_said_once_the_answers_settle(calc_page):
    """The live region holds the new answer's verdict line, in the page's language, said
    once after typing stops, not once per key; the status line is not a live region."""
    page = calc_page.page
    calc_page.navigate({})
    calc_page.wait_quiet()
    region = page.locator("#calc .calc-announce")
    assert region.get_attribute("role") == "status"
    assert page.locator("#calc .calc-status").get_attribute("aria-live") is None
    assert page.locator("#calc .calc-status").get_attribute("role") is None
    page.evaluate("""() => {
        const region = document.querySelector('#calc .calc-announce');
        window.calcSaid = [];
        new MutationObserver(() => window.calcSaid.push(region.textContent))
            .observe(region, {childList: true, characterData: true, subtree: true});
    }""")
    page.fill("#calc-seq_len", "")
    page.locator("#calc-seq_len").press_sequentially("3584", delay=60)  # four answers
    calc_page.wait_quiet()
    page.wait_for_function(f"({ANNOUNCED})() === ({VERDICT_TEXT})()", timeout=5000)
    verdict = page.evaluate(VERDICT_TEXT)
    state = page.locator("#calc .calc-verdict").get_attribute("data-verdict")
    assert STRINGS[calc_page.lang]["ui"]["verdict_" + state] in verdict  # the page's language
    assert "3584" in verdict.replace(".", "").replace(",", "").replace("\u202f", "").replace(
        "\xa0", ""
    )
    page.wait_for_timeout(1000)  # nothing more is said while the page stays as it is
    assert page.evaluate("window.calcSaid") == [verdict]
    calc_page.navigate({})


NO_WORKER_JS = {
    "no Worker at all": "delete window.Worker;",
    # a browser that ignores {type: "module"} (it would run the worker as a classic script)
    "classic workers only": """(() => { const Classic = window.Worker;
        window.Worker = function (url) { return new Classic(url); }; })()""",
}


@pytest.mark.parametrize("how", sorted(NO_WORKER_JS))
@pytest.mark.parametrize("query", [{}, {"seq_len": "4096"}], ids=["default", "shared-link"])
def test_without_module_workers_the_page_ends_in_error(browser, site_server, how, query):
    context = new_context(browser)
    page = context.new_page()
    page.add_init_script(NO_WORKER_JS[how])
    calc = Calc(page, site_server, "en")
    page.goto(calc.url(query))
    page.wait_for_function(f"{STATE} === 'error'", timeout=READY_TIMEOUT_MS)
    status = page.locator("#calc .calc-status")
    visible = page.locator("#calc [data-output]").evaluate_all(
        "els => els.filter(e => e.checkVisibility()).length"
    )
    if query:  # the default's figures are not passed off as the link's
        assert status.get_attribute("data-status") == "status_error_other"
        assert visible == 0
    else:  # the build-time figures are the form's: they stay
        assert status.get_attribute("data-status") == "status_error"
        assert visible > 0
    assert status.text_content() == STRINGS["en"]["ui"][status.get_attribute("data-status")]
    context.close()


def test_when_pyodide_cannot_start_the_static_result_stays(browser, site_server):
    context = new_context(browser)
    context.route("**/assets/calc/*.zip", lambda route: route.abort())
    page = context.new_page()
    calc = Calc(page, site_server, "en")
    page.goto(calc.url())
    static = calc.outputs()
    page.wait_for_function(f"{STATE} === 'error'", timeout=READY_TIMEOUT_MS)
    assert page.locator("#calc .calc-status").get_attribute("data-status") == "status_error"
    assert calc.outputs() == static and static
    context.close()


def _timings(page) -> dict:
    return json.loads(page.evaluate("document.getElementById('calc').dataset.calcTimings || '{}'"))


def _snapshot_fetched(fetched: list, page, wait_ms: int = STATE_TIMEOUT_MS) -> bool:
    """Whether the build's snapshot was downloaded, waiting up to ``wait_ms`` for it."""
    if fetched:
        return True
    try:
        page.wait_for_event(
            "requestfinished",
            lambda r: r.url.split("?")[0].endswith(".snapshot.gz"),
            timeout=wait_ms,
        )
    except PlaywrightTimeoutError:
        return False
    return bool(fetched)


def test_the_snapshot_is_fetched_on_a_second_visit_and_restored_on_the_third(browser, site_server):
    # First visit: Python starts the ordinary way and nothing more is fetched (a reader who
    # comes once pays for no snapshot); the worker notes the visit. Second visit: once its
    # numbers are live, the worker caches the build's snapshot (Python started, calc
    # imported). Third visit: restored from the cache.
    context = new_context(browser)
    page = context.new_page()
    fetched = []
    page.on(
        "requestfinished",
        lambda r: fetched.append(r.url) if r.url.split("?")[0].endswith(".snapshot.gz") else None,
    )
    # every request the context (page and workers) finished: Material's search worker is
    # loaded by a worker, which the page's own events and its network idle do not see
    finished: list[str] = []
    context.on("requestfinished", lambda r: finished.append(r.url))
    calc = Calc(page, site_server, "en")
    calc.open()
    calc.wait_worker()
    assert _timings(page)["snapshot"] is False
    assert any("calc-visited" in u for u in calc.wait_cached_snapshot("calc-visited"))
    assert fetched == []
    calc.open({"seq_len": "1024"})
    calc.wait_worker()
    assert _timings(page)["snapshot"] is False
    assert _snapshot_fetched(fetched, page)
    snapshot = page.evaluate("document.getElementById('calc').dataset.snapshot")
    assert fetched[0].endswith(snapshot.split("/")[-1])
    # the fetch finishes, then the worker stores it (the visit's note stays)
    stored = calc.wait_cached_snapshot(snapshot.split("/")[-1])
    assert sorted(u.split("/")[-1] for u in stored) == sorted(
        [snapshot.split("/")[-1], "calc-visited"]
    )
    calc.open({"method": "qlora", "seq_len": "4096"})
    calc.wait_worker()
    assert _timings(page)["snapshot"] is True
    response = calc_run(calculator.COMMAND, request_for({"method": "qlora", "seq_len": "4096"}))[
        "result"
    ]
    assert_parity(calc.outputs(), response, "en")
    calc.navigate({})
    assert_parity(
        calc.outputs(), calc_run(calculator.COMMAND, calculator.default_request())["result"], "en"
    )
    context.close()


WORKER_WITH_SNAPSHOT_JS = """async ([snapshotPath, request]) => {
    const root = document.getElementById("calc");
    const abs = (u) => new URL(u, location.href).href;
    const cache = await caches.open("calc-pyodide-snapshot");  // where the worker looks
    await cache.put(abs(snapshotPath), await fetch(snapshotPath));
    const url = new URL(abs(root.dataset.worker));
    url.searchParams.set("pyodide", abs(root.dataset.pyodide));
    url.searchParams.set("bundle", abs(root.dataset.bundle));
    url.searchParams.set("snapshot", abs(snapshotPath));
    const worker = new Worker(url.href, { type: "module" });
    const next = () => new Promise((resolve) => { worker.onmessage = (e) => resolve(e.data); });
    let msg = next();
    worker.postMessage({ type: "init", lang: "en",
                         strings: JSON.parse(document.getElementById("calc-strings").textContent) });
    const ready = await msg;
    msg = next();
    worker.postMessage({ type: "compute", id: 1, command: root.dataset.command,
                         request: JSON.stringify(request) });
    const result = await msg;
    worker.terminate();
    await new Promise((resolve) => setTimeout(resolve, 200));
    const kept = Boolean(await cache.match(abs(snapshotPath)));
    const marked = Boolean(await cache.match(abs(snapshotPath) + "?unusable=1"));
    return { ready, result, kept, marked };
}"""


@pytest.mark.parametrize("content", ["garbage", "zeros"])
def test_a_broken_cached_snapshot_falls_back_to_an_ordinary_start(browser, site_server, content):
    import gzip

    folder = site_server.root / "_test_snapshot"
    folder.mkdir(exist_ok=True)
    body = b"not a gzip stream" if content == "garbage" else gzip.compress(b"\0" * 65536)
    (folder / f"{content}.snapshot.gz").write_bytes(body)
    context = new_context(browser)
    page = context.new_page()
    calc = Calc(page, site_server, "en")
    calc.open()
    # the page's own worker has noted its (first) visit: its own cache writes are done
    assert any("calc-visited" in u for u in calc.wait_cached_snapshot("calc-visited"))
    request = calculator.default_request()
    out = page.evaluate(
        WORKER_WITH_SNAPSHOT_JS, [f"/_test_snapshot/{content}.snapshot.gz", request]
    )
    assert out["ready"]["type"] == "ready" and out["ready"]["timings"]["snapshot"] is False
    assert out["kept"] is False  # a broken snapshot is dropped, not tried on every visit
    # one this browser could not restore is not downloaded again; a bad download may be
    assert out["marked"] is (content == "zeros")
    assert out["result"]["type"] == "result"
    # the worker's lean answer: the results tree, no replay to follow (nothing deferred)
    answer = out["result"]["out"]
    assert answer["pending"] is False
    expected = calc_run(calculator.COMMAND, request)["result"]
    shown = dict(tree_outputs(answer["view"]))
    path = "peak_allocated_bytes"
    assert_raw_equals(shown[path], view.resolve(expected, path), path)
    context.close()


@pytest.mark.parametrize(
    ("depth", "codes"),
    [
        # JavaScript serialises it; in Pyodide, Python's parser either refuses it
        # (request_too_deep: its recursion limit) or reads it and calc finds a list, not a config
        (2_000, {"request_too_deep", "config_not_object"}),
        # too deep for JavaScript to serialise: refused in the page, nothing is sent
        (50_000, {"request_too_deep"}),
    ],
)
def test_absurdly_nested_config_is_refused_and_the_worker_survives(calc_page, depth, codes):
    calc_page.navigate({"seq_len": "1024"})
    good = calc_page.outputs()
    deep = '{"hf_config": ' + "[" * depth + "]" * depth + "}"
    calc_page.navigate({"model": deep})
    shown = calc_page.page.eval_on_selector_all(
        "#calc [data-error-code]:not([hidden])", "els => els.map(e => e.dataset.errorCode)"
    )
    assert len(shown) == 1 and shown[0] in codes
    assert calc_page.outputs() == good
    calc_page.navigate({"seq_len": "1024"})
    assert calc_page.page.locator('#calc [data-error-for="_general"]').is_hidden()
    assert calc_page.state() == "ready" and calc_page.outputs() == good
    # and the worker survived: the next computation is answered
    calc_page.navigate({"seq_len": "1536"})
    assert calc_page.state() == "ready"
    assert calc_page.page.evaluate("document.getElementById('calc').dataset.calcRestarts") is None
