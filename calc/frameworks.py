"""Training libraries as profiles of the request keys whose behaviour differs between them.

The request key ``framework`` names a profile. A profile is a set of request-key values
(``key -> value``), each read from that library's code at a stated version (the
``SOURCES`` entry of the same key). :func:`calc.request.parse_estimate_request` applies
the profile to every key the request leaves out; a key the request states explicitly
always wins over the profile. A profile never sets the shape of the model, the method,
the batch or the GPUs: only what the library decides for the user.

``hf-trainer`` is the default: what most readers run. ``generic`` sets nothing: every key
keeps its own default, a stack no library runs as such (kept for requests that name it).
The profiles:

- ``hf-trainer`` (the default): a transformers model trained by ``transformers.Trainer``, PEFT adapters,
  bitsandbytes 4-bit, accelerate for FSDP / DeepSpeed: the transformers 5 generation
  (5.17, peft 0.21, accelerate 1.15, torch >= 2.8), MoE experts as 3-D tensors.
- ``trl-sft``: TRL's ``SFTTrainer`` (1.9 to 1.16) on that Trainer: the loss from a fused, chunked LM
  head (no full logits), QLoRA adapters cast to bf16, no ``prepare_model_for_kbit_training``.
  Its data defaults are reader keys that config import reads: ``packing`` False (the
  collator pads to the longest: ``batching`` ``pad-longest``), ``packing=True`` with the
  default ``bfd`` strategy turns ``padding_free`` on (``batching`` ``packed``),
  ``max_length`` 1024, ``gradient_checkpointing`` and ``bf16`` True; a model given by name
  loads in fp32 unless ``model_init_kwargs`` set a dtype (``bf16-mixed`` then).
- ``axolotl`` (0.18), ``llama-factory`` (0.9.6.dev0), ``ms-swift`` (4.4.3): the same Trainer,
  with each tool's own defaults (optimizer, dropout, which parameters are cast to fp32).
- ``pytorch-loop`` / ``pytorch-loop-4``: a hand-written PyTorch loop on transformers 5.17 /
  4.46-4.53 models: cross-entropy on the model's 16-bit logits, held through the backward,
  torch's default (foreach) AdamW, no autocast (``precision`` ``bf16-true``, the key's default).
- ``hf-trainer-4``: the same stack one generation back, transformers 4.46 to 4.53 (peft
  0.13-0.16, accelerate 1.x, torch 2.4-2.7): unfused AdamW, k/v repeated before SDPA, one
  module per MoE expert.
- ``hf-custom-loop``: the same model and libraries in the user's own loop (accelerate or a
  plain FSDP script) with ``torch.optim.AdamW`` built by hand.
- ``torchtune``: torchtune's recipes and configs (from Sep 2024, v0.3 on).
- ``litgpt``: LitGPT's ``finetune`` commands (2024, v0.4).
- ``unsloth``: Unsloth's ``FastLanguageModel`` with its trainer (TRL, transformers): its fused
  cross-entropy, which computes the hidden states' gradient chunk by chunk in the forward
  (``chunked_loss``, ``loss_grad_in_forward``), its offloaded gradient checkpointing
  (``activation_offload``), and its hand-written LoRA q/k/v, output-projection and MLP
  autograd functions and RMSNorm kernel (``fused_lora_kernels``), which save fewer tensors
  than peft's and transformers' modules. It loads the model in its 16-bit compute dtype and
  upcasts only the LoRA adapters to fp32 (``weights_loaded_16bit``, ``lora_adapter_dtype``).

``weights_loaded_16bit`` says which dtype ``*-mixed`` precision finds the weights in: 16 bits
for transformers 5's ``from_pretrained`` (``dtype="auto"``) and the tools that load their
compute dtype (axolotl, LLaMA-Factory, ms-swift, Unsloth), fp32 for TRL's loader and
transformers 4; the ``hf-trainer`` profile sets it for LoRA / QLoRA only.

Behaviours the fake-tensor oracle (``tools/oracle``) cannot trace say so in their source:
reserved-memory floors (``fsdp_wrap_floor``), several-GPU paths, and bitsandbytes' kernels,
which the oracle replaces by their documented saved tensors.

Profiles are data: validation rows of an older version of a library override the keys
whose behaviour changed since (``accuracy/memory.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from enum import Enum
from typing import Any

from .jsontypes import JsonObject


class Framework(str, Enum):
    GENERIC = "generic"
    HF_TRAINER = "hf-trainer"
    HF_CUSTOM_LOOP = "hf-custom-loop"
    TORCHTUNE = "torchtune"
    LITGPT = "litgpt"
    UNSLOTH = "unsloth"
    HF_TRAINER_4 = "hf-trainer-4"
    TRL_SFT = "trl-sft"
    AXOLOTL = "axolotl"
    LLAMA_FACTORY = "llama-factory"
    MS_SWIFT = "ms-swift"
    PYTORCH_LOOP = "pytorch-loop"
    PYTORCH_LOOP_4 = "pytorch-loop-4"


_HF_COMMON = {
    "qlora_keeps_inputs": False,
    "qlora_quant_state_replicated": True,
    "sync_each_micro_batch": False,
    "chunked_loss": False,
    "lora_dropout": 0.0,
    "frozen_weight_grads": False,
    "attention_keeps_fused_qkv": False,
    "lora_adapter_dtype": "fp32",
    "attention_grouped_kv": True,
    "attention_mask": "padding",
    "zero_grad_set_to_none": True,
}

_HF_TRAINER_5 = {
    **_HF_COMMON,
    "fp8_library": "torchao",
    "optimizer_fused": True,
    "loss_outputs_kept": False,
    "moe_expert_layout": "fused-3d",
    "weights_loaded_16bit": True,
    "fsdp_flat_parameters": True,
    "outputs_cast_fp32": True,
}
"""The HF Trainer on transformers 5: what the tools built on it inherit."""

_PYTORCH_LOOP = {
    **_HF_COMMON,
    "optimizer_fused": False,
    "loss_outputs_kept": True,
    "moe_expert_layout": "fused-3d",
    "qlora_prepare_kbit": True,
    "loss_on_16bit_logits": True,
    "weights_loaded_16bit": True,
}

PROFILES: dict[Framework, dict[str, object]] = {
    Framework.GENERIC: {},
    Framework.HF_TRAINER: {**_HF_TRAINER_5, "sequence_parallel_repeats_kv": False},
    Framework.HF_CUSTOM_LOOP: {
        **_HF_COMMON,
        "fp8_library": "torchao",
        "optimizer_fused": False,
        "loss_outputs_kept": True,
        "fsdp_wrap_floor": True,
        "moe_expert_layout": "fused-3d",
        "qlora_prepare_kbit": True,
        "loss_on_16bit_logits": False,
        "weights_loaded_16bit": True,
    },
    Framework.TORCHTUNE: {
        "sync_each_micro_batch": True,
        "chunked_loss": True,
        "optimizer_fused": True,
        "lora_dropout": 0.0,
        "qlora_keeps_inputs": False,
        "qlora_unchunked_quantization": False,
        "qlora_quant_state_replicated": False,
        "frozen_weight_grads": False,
        "attention_keeps_fused_qkv": False,
        "lora_adapter_dtype": "base",
        "attention_grouped_kv": False,
        "loss_outputs_kept": False,
        "logits_upcast_in_model": True,
        "chunked_loss_keeps_fp32": True,
        "output_layer_chunked": True,
        "rope_cache_fp32": True,
        "fsdp_fully_shard": True,
        "gradient_clipping": False,
        "zero_grad_set_to_none": True,
    },
    Framework.LITGPT: {
        "attention_keeps_fused_qkv": True,
        "frozen_weight_grads": True,
        "lora_dropout": 0.05,
        "chunked_loss": True,
        "qlora_keeps_inputs": True,
        "sync_each_micro_batch": False,
        "optimizer_fused": False,
        "lora_adapter_dtype": "base",
        "attention_grouped_kv": False,
        "loss_outputs_kept": False,
        "previous_outputs_kept": True,
        "chunked_loss_holds_logits": True,
        "lora_fused_qkv_adapter": True,
        "qlora_output_layer_quantized": True,
        "qlora_dequant_fp16": True,
        "fsdp_flat_parameters": True,
        "gradient_clipping": False,
        "zero_grad_set_to_none": True,
    },
    Framework.UNSLOTH: {
        "chunked_loss": True,
        "loss_grad_in_forward": True,
        "loss_whole_logits_small_batches": False,
        "batching": "padding-free",
        "fused_lora_kernels": True,
        "activation_offload": True,
        "lora_dropout": 0.0,
        "qlora_keeps_inputs": False,
        "optimizer_fused": True,
        "sync_each_micro_batch": False,
        "attention_keeps_fused_qkv": False,
        "loss_outputs_kept": False,
        "lora_adapter_dtype": "fp32",
        "weights_loaded_16bit": True,
        "weights_loaded_other_16bit": False,
        "outputs_cast_fp32": True,
        "expandable_segments": True,
        "zero_grad_set_to_none": True,
        "rope_cache_16bit": "model",
        "load_warmup": "transformers-4.52",
    },
    Framework.HF_TRAINER_4: {
        **_HF_COMMON,
        "optimizer_fused": False,
        "loss_outputs_kept": False,
        "outputs_cast_fp32": True,
        "fsdp_flat_parameters": True,
        "attention_grouped_kv": False,
        "sdpa_cudnn_last": True,
        "sdpa_mask_boolean": False,
        "moe_expert_layout": "per-expert-modules",
        "weights_loaded_16bit": False,
        "qlora_embeddings_recast_bf16": True,
        "offload_pinned": False,
        "offload_host_cast": False,
    },
    Framework.TRL_SFT: {
        **_HF_TRAINER_5,
        "sequence_parallel_repeats_kv": False,
        "chunked_loss": True,
        "loss_fused_lm_head": True,
        "qlora_prepare_kbit": False,
        "weights_loaded_16bit": False,
        "packed_attention": "per-sample",
    },
    Framework.AXOLOTL: {
        **_HF_TRAINER_5,
        "weights_loaded_other_16bit": False,
        "qlora_prepare_kbit": False,
        "packed_attention": "per-sample",
    },
    Framework.LLAMA_FACTORY: {**_HF_TRAINER_5, "qlora_prepare_kbit": False},
    Framework.MS_SWIFT: {**_HF_TRAINER_5, "lora_dropout": 0.05, "packed_attention": "per-sample"},
    Framework.PYTORCH_LOOP: dict(_PYTORCH_LOOP),
    Framework.PYTORCH_LOOP_4: {
        **_PYTORCH_LOOP,
        "attention_grouped_kv": False,
        "sdpa_cudnn_last": True,
        "sdpa_mask_boolean": False,
        "moe_expert_layout": "per-expert-modules",
        "qlora_compute_dtype_from_input": True,
        "weights_loaded_16bit": False,
        "offload_pinned": False,
        "offload_host_cast": False,
    },
}
"""``framework -> {request key: value}``; the citation of every entry is in :data:`SOURCES`."""

SOURCES: dict[Framework, dict[str, str]] = {
    Framework.HF_TRAINER: {
        "zero_grad_set_to_none": "transformers 5.17.0 trainer.py _inner_training_loop calls "
        "model.zero_grad() after each optimizer step; torch 2.13 nn/modules/module.py "
        "Module.zero_grad(set_to_none=True) by default (since torch 2.0): the gradients are freed",
        "fp8_library": "accelerate 1.15.0 accelerator.py Accelerator.__init__: with "
        "mixed_precision='fp8' and no recipe handler, torchao first when installed "
        "('Prioritize AO -> TE -> MSAMP'), the Trainer's Accelerator included",
        "optimizer_fused": "transformers 5.17.0 training_args.py: TrainingArguments.optim defaults to "
        "'adamw_torch_fused' when torch >= 2.8 ('adamw_torch' before)",
        "qlora_keeps_inputs": "bitsandbytes >= 0.43.2 (PR #1270, Jul 2024): MatMul4Bit saves no input",
        "qlora_quant_state_replicated": "bitsandbytes 0.43.0 PR #970 (FSDP-QLoRA): Params4bit keeps "
        "absmax/code in the quant_state dict, not a parameter or "
        "buffer, so FSDP and ZeRO-3 shard only the packed 4-bit data",
        "sync_each_micro_batch": "accelerate 1.15.0 GradientAccumulationPlugin.sync_each_batch=False: "
        "no_sync between micro-batches",
        "chunked_loss": "transformers 5.17.0 loss/loss_utils.py ForCausalLMLoss: cross-entropy on "
        "the whole logits, up-cast with logits.float()",
        "lora_dropout": "peft 0.21.0 tuners/lora/config.py: LoraConfig.lora_dropout = 0.0",
        "frozen_weight_grads": "transformers Trainer with FSDP and PEFT (PR #29587, v4.39) sets "
        "peft.utils.other.fsdp_auto_wrap_policy: adapters wrapped apart",
        "attention_keeps_fused_qkv": "transformers 5.17.0 models/llama/modeling_llama.py LlamaAttention: "
        "separate q_proj, k_proj, v_proj",
        "lora_adapter_dtype": "peft 0.21.0 get_peft_model(autocast_adapter_dtype=True) -> "
        "tuners_utils.cast_adapter_dtype: bf16/fp16 adapters upcast to fp32",
        "attention_grouped_kv": "transformers 5.17.0 integrations/sdpa_attention.py: enable_gqa=True "
        "instead of repeat_kv (no mask, head_dim <= 256; use_gqa_in_sdpa is False with a mask "
        "tensor, so not on padded batches)",
        "attention_mask": "transformers masking_utils.py (5.x; read on the main branch, not at the "
        "5.17.0 tag) sdpa_mask: _ignore_causal_mask_sdpa drops the mask (is_causal=True) only when "
        "the 2-D padding mask is all ones; a padded batch (DataCollatorWithPadding / "
        "DataCollatorForLanguageModeling pad to the longest) gets a 4-D boolean mask tensor, "
        "which torch 2.13 SDPA cannot hand to flash (sdp_utils.cpp check_for_attn_mask)",
        "fsdp_flat_parameters": "accelerate 1.15 utils/dataclasses.py "
        "FullyShardedDataParallelPlugin.__post_init__: fsdp_version = FSDP_VERSION, default 1 "
        "(FSDP1, FullyShardedDataParallel with flat parameters); FSDP2 only when a config "
        "says fsdp_version: 2 (config import then sets fsdp_fully_shard)",
        "loss_outputs_kept": "transformers 5.17.0 Trainer.compute_loss returns the loss alone "
        "(return_outputs=False); training_step drops the outputs",
        "outputs_cast_fp32": "accelerate 1.15.0 accelerator.py: Accelerator.__init__ (lines "
        "564-604) sets native_amp for mixed_precision fp16 / bf16 unless DeepSpeed or Megatron-LM "
        "runs, and prepare_model then wraps the forward in convert_outputs_to_fp32 (lines 1830, "
        "1835; utils/operations.py convert_to_fp32: tensor.float() on every fp16 / bf16 "
        "output); transformers 5.17.0 Trainer._inner_training_loop prepares its model with "
        "self.accelerator.prepare (trainer.py lines 1692, 1701). *-mixed without DeepSpeed "
        "only (APPLIES_WHEN)",
        "moe_expert_layout": "transformers 5.17.0 models/qwen3_moe/modeling_qwen3_moe.py Qwen3MoeExperts "
        "and models/mixtral/modeling_mixtral.py MixtralExperts: the experts of a "
        "block are two nn.Parameter 3-D tensors (gate_up_proj, down_proj)",
        "weights_loaded_16bit": "transformers 5.17.0 modeling_utils.py PreTrainedModel.from_pretrained "
        "(line 4100): 'if dtype is None: dtype = \"auto\"', the checkpoint's dtype (_get_dtype: "
        "config.dtype); Trainer(bf16=True / fp16=True) casts no parameter (trainer.py casts the "
        "model only for bf16_full_eval / fp16_full_eval) and accelerate 1.15.0 accelerator.py "
        "prepare_model wraps the forward in autocast_context (line 1826) and upcasts only under "
        "FSDP. LoRA / QLoRA only (PROFILE_APPLIES_WHEN): full fine-tuning keeps *-mixed as fp32 "
        "master weights (a model loaded with dtype=torch.float32), the site's reference setup; "
        "loaded with 'auto' the Trainer trains the bf16 weights themselves (the key on)",
        "sequence_parallel_repeats_kv": "accelerate 1.15.0 ParallelismConfig (sp_backend "
        "'deepspeed', the only one) hands sequence parallelism to DeepSpeed's Arctic Long Sequence "
        "Training: deepspeed/runtime/sequence_parallel/ulysses_sp.py UlyssesSPAttentionHF "
        "(deepspeedai/DeepSpeed 5db0c450) all-to-alls k and v at their own head count, repeated "
        "only by kv_replication_factor = sp // kv heads when there are fewer heads than GPUs",
    },
    Framework.HF_CUSTOM_LOOP: {
        "zero_grad_set_to_none": "accelerate 1.15.0 optimizer.py AcceleratedOptimizer.zero_grad: "
        "set_to_none None becomes True (since accelerate 0.28.0, PR #2472), and torch 2.13 "
        "Optimizer.zero_grad defaults to set_to_none=True",
        "fp8_library": "as hf-trainer (accelerate 1.15.0 picks torchao first for "
        "mixed_precision='fp8')",
        "optimizer_fused": "torch.optim.AdamW with neither foreach nor fused set takes the "
        "foreach path on CUDA (torch 2.x optim/adamw.py, _default_to_fused_or_foreach)",
        "qlora_keeps_inputs": "as hf-trainer (bitsandbytes >= 0.43.2)",
        "qlora_quant_state_replicated": "as hf-trainer (bitsandbytes PR #970)",
        "sync_each_micro_batch": "as hf-trainer (accelerate no_sync)",
        "chunked_loss": "as hf-trainer (transformers ForCausalLMLoss)",
        "lora_dropout": "as hf-trainer (peft LoraConfig)",
        "frozen_weight_grads": "accelerate 1.15.0 FSDP with peft 0.21.0 fsdp_auto_wrap_policy, or FSDP2",
        "attention_keeps_fused_qkv": "as hf-trainer",
        "lora_adapter_dtype": "as hf-trainer (peft 0.21.0 autocast_adapter_dtype=True)",
        "attention_grouped_kv": "as hf-trainer (transformers 5.17.0 SDPA enable_gqa)",
        "attention_mask": "as hf-trainer (transformers masking_utils.py sdpa_mask on a padded batch)",
        "loss_outputs_kept": "the usual loop 'outputs = model(**batch); outputs.loss.backward()' "
        "(accelerate 1.15.0 examples, Answer.AI fsdp_qlora train.py 2024) holds "
        "the output object, logits included, through the backward",
        "fsdp_wrap_floor": "Answer.AI fsdp_qlora train.py (50efa1e, 2024-03-26): the model loaded on "
        "rank 0's CPU (low_memory), then FSDP1 FullyShardedDataParallel(device_id, "
        "sync_module_states=True, use_orig_params=False); no empty_cache after the "
        "wrap. hf-trainer leaves it off: accelerate 1.15.0 FSDP1 defaults to "
        "sync_module_states=False and offers FSDP2, which shards parameter by parameter",
        "qlora_prepare_kbit": "peft docs/source/developer_guides/quantization.md (007b249c): a 4-bit model "
        "goes through prepare_model_for_kbit_training (utils/other.py: every "
        "non-Params4bit fp16/bf16 parameter cast to fp32) before get_peft_model; "
        "on one GPU only: the several-GPU loop this profile cites, Answer.AI "
        "train.py (50efa1e), wraps a bf16 model in FSDP (NO_SHARD for DDP) and "
        "never calls it, and TRL sft_trainer.py _prepare_peft_model skips it "
        "for sharded QLoRA (is_sharded_qlora)",
        "loss_on_16bit_logits": "the loop's loss is outputs.loss, computed by the model from labels "
        "(accelerate 1.15.0 examples, Answer.AI train.py): transformers 5.17.0 "
        "ForCausalLMLoss upcasts with logits.float()",
        "moe_expert_layout": "as hf-trainer (transformers 5.17.0 Qwen3MoeExperts, MixtralExperts: 3-D "
        "expert tensors)",
        "weights_loaded_16bit": "as hf-trainer (transformers 5.17.0 from_pretrained: dtype 'auto'); "
        "the loop's own torch.autocast casts no parameter",
    },
    Framework.HF_TRAINER_4: {
        "offload_pinned": "DeepSpeed 0.15.4-0.16.9 (Nov 2024 - May 2025, the releases beside "
        "transformers 4.46-4.53) runtime/zero/offload_config.py: pin_memory: bool = False; the "
        "gradients' copies to the host go to pageable memory (True only from v0.19.5, #8207)",
        "offload_host_cast": "DeepSpeed 0.16.9 runtime/zero/stage_1_and_2.py lines 1890-1891: "
        "the fp32 partition goes to the GPU whole (fp32_partition.to(device)) and is cast there; "
        "the host-side cast to 16 bits came with v0.17.0 (#7309, June 2025)",
        "zero_grad_set_to_none": "transformers 4.46 Trainer calls model.zero_grad() after each "
        "optimizer step, on torch 2.4-2.7 Module.zero_grad(set_to_none=True) by default",
        "outputs_cast_fp32": "accelerate 0.30-1.x Accelerator.prepare_model wraps the forward in "
        "convert_outputs_to_fp32 under native AMP (fp16 / bf16 without DeepSpeed), as in "
        "hf-trainer; the axolotl and Unsloth 2024 runs that ran out of memory in _convert_to_fp32 "
        "(Unsloth issue #465) are this generation",
        "fsdp_flat_parameters": "accelerate before 1.6 has FSDP1 only (FullyShardedDataParallel, "
        "flat parameters); from 1.6 on it still defaults to it, as in hf-trainer",
        "optimizer_fused": "transformers 4.46-4.53 training_args.py: TrainingArguments.optim defaults to "
        "'adamw_torch' (PR #25109, v4.32); 'adamw_torch_fused' became the default only "
        "with PR #37358 (July 2025) and torch >= 2.8. torch.optim.AdamW then takes "
        "the foreach path (torch 2.x optim/optimizer.py _default_to_fused_or_foreach)",
        "qlora_keeps_inputs": "bitsandbytes >= 0.43.2 (PR #1270, Jul 2024), the releases beside "
        "transformers 4.46 (Oct 2024) on: MatMul4Bit saves no input",
        "qlora_quant_state_replicated": "as hf-trainer (bitsandbytes 0.43.0 PR #970: quant_state "
        "is a plain attribute)",
        "sync_each_micro_batch": "accelerate 1.0-1.8 GradientAccumulationPlugin.sync_each_batch=False: "
        "no_sync between micro-batches (FSDP; DeepSpeed ZeRO-2/3 gets a "
        "nullcontext, see sharding_engine)",
        "chunked_loss": "transformers 4.46 loss/loss_utils.py ForCausalLMLoss: cross-entropy on the "
        "whole logits, up-cast with logits.float()",
        "lora_dropout": "peft 0.13.0 tuners/lora/config.py: LoraConfig.lora_dropout = 0.0",
        "frozen_weight_grads": "transformers Trainer with FSDP and PEFT (PR #29587, v4.39) sets "
        "peft.utils.other.fsdp_auto_wrap_policy: adapters wrapped apart",
        "attention_keeps_fused_qkv": "transformers 4.46 models/llama/modeling_llama.py "
        "LlamaSdpaAttention: separate q_proj, k_proj, v_proj",
        "lora_adapter_dtype": "peft 0.12.0 (Jul 2024) on: get_peft_model(autocast_adapter_dtype=True) "
        "upcasts bf16/fp16 adapters to fp32",
        "attention_grouped_kv": "transformers 4.46-4.53 integrations/sdpa_attention.py (and 4.46's "
        "LlamaSdpaAttention): repeat_kv expands k, v to every query head before "
        "SDPA; enable_gqa came with PR #39412 (July 2025, v4.54)",
        "sdpa_mask_boolean": "transformers 4.46-4.52 LlamaModel._update_causal_mask "
        "(modeling_attn_mask_utils.py AttentionMaskConverter): one additive mask of the model's "
        "dtype (0 and the dtype's minimum) per forward, handed to every layer, which SDPA does "
        "not convert; 4.53 moved the models to masking_utils' boolean masks (set it true there)",
        "attention_mask": "transformers 4.46 modeling_attn_mask_utils.py AttentionMaskConverter."
        "_ignore_causal_mask_sdpa (LlamaModel._update_causal_mask): the 4-D mask is dropped for "
        "is_causal only when no token is masked; a padded batch passes it to SDPA",
        "qlora_embeddings_recast_bf16": "TRL 0.12.1 (the SFTTrainer of transformers 4.46-4.53, "
        "whose own Trainer calls no prepare_model_for_kbit_training: a 4-bit model prepared under "
        "this generation is TRL's) trainer/sft_trainer.py SFTTrainer.__init__: on a 4-bit model "
        "that is not sharded, prepare_model_for_kbit_training, get_peft_model, then 'if args is "
        'not None and args.bf16 and getattr(model, "is_loaded_in_4bit", False) and not '
        "is_sharded_qlora: peft_module_casting_to_bf16(model)'; trainer/utils.py "
        "peft_module_casting_to_bf16: norms to fp32, every module named lm_head / embed_tokens "
        "/ wte / wpe with an fp32 weight to bf16 (peft's modules_to_save copies among them). "
        "The same cast from TRL 0.7.5 (f100ca34c; up to 0.9.2 it cast peft's tuner layers, the "
        "adapters, to bf16 too, which PR #1644 stopped in 0.9.3) to 0.25.1; PR #3882 (0.22.0) moved it into trl/models/utils.py prepare_peft_model and PR #4577 "
        "(2af35fb0d, 0.26.0) took it out of SFTTrainer. Only where the reader's request turns "
        "qlora_prepare_kbit on (PROFILE_APPLIES_WHEN)",
        "sdpa_cudnn_last": "torch 2.5.1 to 2.7 aten/src/ATen/native/transformers/cuda/sdp_utils.cpp "
        "priority_order: flash, memory-efficient, math, cuDNN last (pytorch PR #138522, "
        "cherry-picked onto release/2.5 after the 2.5.0 cuDNN bugs); torch 2.4: cuDNN attention "
        "only with TORCH_CUDNN_SDPA_ENABLED=1 (PR #125343 reverted for 2.4 by PR #128539)",
        "loss_outputs_kept": "transformers 4.46 Trainer.compute_loss returns the loss alone "
        "(return_outputs=False); training_step drops the outputs",
        "moe_expert_layout": "transformers 4.46-4.57 models/qwen3_moe/modeling_qwen3_moe.py "
        "Qwen3MoeSparseMoeBlock (nn.ModuleList of Qwen3MoeMLP) and "
        "models/mixtral/modeling_mixtral.py MixtralSparseMoeBlock (ModuleList of "
        "MixtralBlockSparseTop2MLP): one nn.Linear per expert matrix",
        "weights_loaded_16bit": "transformers 4.46-4.53 modeling_utils.py from_pretrained: "
        "torch_dtype=None builds the model in torch's default dtype ('If not specified the model "
        "will get loaded in torch.float (fp32)', the torch_dtype docstring); 'auto' became the "
        "default with transformers 5",
    },
    Framework.TORCHTUNE: {
        "zero_grad_set_to_none": "torchtune v0.3 (2024) recipes call "
        "self._optimizer.zero_grad(set_to_none=True) after each optimizer step",
        "sync_each_micro_batch": "torchtune recipes/*_distributed.py (2024): no no_sync, gradients "
        "reduced every micro-batch",
        "chunked_loss": "torchtune recipes/configs llama3_1, llama3_2 (Sep 2024 on): "
        "loss: CEWithChunkedOutputLoss",
        "optimizer_fused": "torchtune commit cca50f02e (2024-09-14): fused: True on every torch AdamW",
        "lora_dropout": "torchtune commit d7fae9677 (2024-09-11): LoRA builders lora_dropout=0.0",
        "qlora_keeps_inputs": "torchao >= 0.3 (pinned by torchtune from 2024-06-26) linear_nf4 saves only the weight",
        "qlora_unchunked_quantization": "torchtune pins torchao >= 0.3 from c1c9f308a (2024-06-26); "
        "torchao PR #196 (v0.2.0) quantizes in 1 Mi-element chunks",
        "qlora_quant_state_replicated": "torchao NF4Tensor shards its scalers with its data under "
        "FSDP2 (fsdp_pre_all_gather / fsdp_post_all_gather)",
        "frozen_weight_grads": "torchtune v0.3 (2024) FSDP2 shard_model, or lora_fsdp_wrap_policy before it",
        "fsdp_fully_shard": "torchtune v0.3 (2024) training/_distributed.py shard_model: "
        "fully_shard on each matching layer, then on the model (FSDP2)",
        "attention_keeps_fused_qkv": "torchtune modules/attention.py MultiHeadAttention (v0.3, 2024): separate q, k, v projections",
        "lora_adapter_dtype": "torchtune v0.3 (2024) LoRALinear builds lora_a / lora_b in the model dtype",
        "attention_grouped_kv": "torchtune v0.3 (2024) MultiHeadAttention expands k, v to every query "
        "head before scaled_dot_product_attention",
        "loss_outputs_kept": "torchtune v0.3 (2024) recipes compute the loss from the logits and "
        "delete them before loss.backward() ('del logits')",
        "logits_upcast_in_model": "torchtune modules/transformer.py TransformerDecoder.forward "
        "(86c23185f 2024-01-10 through 30b8519e8 2024-09-24): "
        "output = self.output(h).float() unless the output is chunked",
        "chunked_loss_keeps_fp32": "torchtune modules/loss/ce_chunked_output_loss.py (4fba6cd44 "
        "2024-08-28 through 1814feb17): F.cross_entropy(logits.float()) "
        "per chunk; only training.compile_loss (compile: True) fuses it",
        "output_layer_chunked": "torchtune 0.6.1 modules/transformer.py "
        "TransformerDecoder.chunked_output: [self.output(chunk) for chunk in "
        "last_hidden_state.chunk(num_output_chunks, dim=1)], set by the recipes' "
        "model.set_num_output_chunks(loss_fn.num_output_chunks) "
        "(recipes/full_finetune_single_device.py, lora_finetune_single_device.py); the weight "
        "gradient's per-chunk sums are torch's autograd InputBuffer::accumulate (traced by the "
        "oracle's torchtune stack)",
        "rope_cache_fp32": "torchtune 0.6.1 modules/position_embeddings.py "
        "RotaryPositionalEmbeddings.build_rope_cache and models/llama3_1/_position_embeddings.py "
        "Llama3ScaledRoPE: register_buffer('cache', [max_seq_len, head_dim // 2, 2]) from the "
        "fp32 theta; models/llama3_1/_component_builders.py llama3_1, lora_llama3_1: one rope "
        "module passed to every layer (max_seq_len=131072 in llama3_1_8b)",
        "gradient_clipping": "torchtune recipes (lora_finetune_single_device.py at 0097adab, "
        "2024, no clipping at all; later recipes: self._clip_grad_norm = "
        "cfg.get('clip_grad_norm', None), clip_grad_norm_ only when it is set)",
    },
    Framework.LITGPT: {
        "zero_grad_set_to_none": "LitGPT 0.4 (2024) finetune scripts call optimizer.zero_grad() "
        "on torch >= 2.2, whose Optimizer.zero_grad defaults to set_to_none=True (since 2.0)",
        "gradient_clipping": "litgpt/args.py TrainArgs (02f2fca4): max_norm: Optional[float] = None; "
        "the finetune scripts clip only when it is set",
        "attention_keeps_fused_qkv": "LitGPT litgpt/model.py CausalSelfAttention.forward (5895df10, "
        "00af8b0d, 2024): fused qkv split by views",
        "frozen_weight_grads": "LitGPT finetune/lora.py: FSDPStrategy(auto_wrap_policy={Block}), "
        "frozen and adapter weights in one FSDP1 unit",
        "lora_dropout": "LitGPT config_hub/finetune/*/lora.yaml (2024): lora_dropout: 0.05",
        "chunked_loss": "LitGPT finetune/lora.py (2024): chunked_cross_entropy, lm_head_chunk_size=128",
        "qlora_keeps_inputs": "LitGPT pyproject.toml pinned bitsandbytes==0.42.0 through Sep 2024 "
        "(< 0.43.2: MatMul4Bit saved its input)",
        "sync_each_micro_batch": "LitGPT finetune/lora.py (2024): fabric.no_backward_sync while accumulating",
        "optimizer_fused": "LitGPT 0.4 (2024) config_hub: torch.optim.AdamW without fused=True",
        "lora_adapter_dtype": "LitGPT 0.4 (2024) lora.py: LoRALinear adapters follow the model's "
        "dtype (fabric precision bf16-true)",
        "attention_grouped_kv": "LitGPT 0.4 (2024) model.py CausalSelfAttention expands k, v to "
        "every query head before SDPA",
        "loss_outputs_kept": "LitGPT 0.4 (2024) finetune/lora.py: the loss is computed from the "
        "logits inside the step; no output object is kept (the loop's logits, held through "
        "the backward, are chunked_loss_holds_logits')",
        "chunked_loss_holds_logits": "litgpt 0.5.13 utils.py chunked_cross_entropy: "
        "F.cross_entropy(reduction='none') per 128-token chunk of the 16-bit logits; "
        "finetune/lora.py fit (lines 355-359): logits = model(input_ids, "
        "lm_head_chunk_size=128), loss = chunked_cross_entropy(logits, ...), "
        "fabric.backward(loss / ...) with logits alive; finetune/full.py (lines 282-285): "
        "logits = model(input_ids), chunked_cross_entropy(logits[..., :-1, :], ...) "
        "(traced by the oracle's litgpt stack)",
        "lora_fused_qkv_adapter": "litgpt 0.5.13 lora.py LoRAQKVLinear.forward: after_A = "
        "F.linear(self.lora_dropout(x), self.lora_A), lora_B as a grouped conv1d, "
        "zero_pad: result.index_copy_(dim=-1, index=self.lora_ind, source=x) unless "
        "all(self.enable_lora) (traced by the oracle's litgpt stack)",
        "previous_outputs_kept": "LitGPT finetune/lora.py (5895df10 line 276, 00af8b0d line 304) and "
        "full.py: 'logits = model(...)' keeps the previous micro-batch's "
        "logits, and their autograd graph, until the next forward returns",
        "qlora_output_layer_quantized": "lightning 2.3.0.dev20240328 (pinned by LitGPT 5895df10) "
        "BitsandbytesPrecision.module_init_context replaces every "
        "torch.nn.Linear; LitGPT finetune/lora.py passes no "
        "ignore_modules, so lm_head.linear is 4-bit",
        "qlora_dequant_fp16": "lightning 2.3.0.dev20240328 fabric/plugins/precision/bitsandbytes.py "
        "_Linear4bit.quantize: weight.to(dtype=torch.half) before quantize_4bit; "
        "bitsandbytes 0.42.0 MatMul4Bit casts the fp16 dequantization to bf16",
        "fsdp_flat_parameters": "LitGPT finetune/full.py (5895df10): lightning FSDPStrategy (FSDP1; "
        "2.3.0.dev20240328 sets use_orig_params=True), whose flat parameters "
        "give modules torch.split views",
    },
    Framework.UNSLOTH: {
        "load_warmup": "Unsloth's notebooks install transformers 4.56.2 (unslothai/notebooks, "
        "2025-10 to 2026-06; the runs of validation rows vl-t27a1 to vl-t27c1 print it): "
        "FastLanguageModel.from_pretrained loads through transformers' from_pretrained with a "
        "device_map, whose caching_allocator_warmup (4.56.2 modeling_utils.py lines 6154-6230) "
        "allocates half the 4-bit model's 16-bit bytes, capped at the free memory less 1.2 GiB "
        "(quantizers/base.py lines 283-292: factor 4)",
        "zero_grad_set_to_none": "Unsloth trains with TRL's SFTTrainer on transformers' Trainer, "
        "which calls model.zero_grad() (transformers 5.17.0 trainer.py); torch 2.x frees the "
        "gradients (Module.zero_grad set_to_none=True since 2.0)",
        "chunked_loss": "Unsloth 2026.8.19 (015bdef0d9) models/llama.py CausalLM_fast_forward "
        "(lines 1464-1500): with labels, unsloth_fused_ce_loss (unsloth_zoo), which never builds "
        "the whole logits, at any size (the 'bsz * q_len <= 1024' branch keeps RETURN_LOGITS "
        "False since 0cd0635a, 2025-10-22; from b9fe2588, 2024-12-10, it built them for "
        "micro-batches of at most 1024 tokens: loss_whole_logits_small_batches)",
        "batching": "Unsloth 2026.8.19 (015bdef0d9) trainer.py: _should_auto_padding_free (lines "
        "118-121) and the SFTTrainer patch (lines 903-912: configure_padding_free when "
        "padding_free is unset and packing off; 'Padding-free auto-enabled'), from 75e0d7ce "
        "(2025-12-10); not on PADDING_FREE_BLOCKLIST (gemma2, gpt_oss) nor hybrid stacks",
        "loss_whole_logits_small_batches": "Unsloth 2026.8.19 (015bdef0d9) models/llama.py "
        "lines 1466-1469: 'if bsz * q_len <= 1024 and not RETURN_LOGITS: RETURN_LOGITS = False' "
        "(since 0cd0635a, 2025-10-22; from b9fe2588, 2024-12-10, the same line set it True)",
        "loss_grad_in_forward": "unsloth_zoo 2026.8.13 (ce232d6c) fused_losses/"
        "cross_entropy_loss.py UnslothFusedLoss.forward: torch.func.grad_and_value of "
        "compute_fused_ce_loss per torch.chunk of the hidden states (get_chunk_size: one chunk's "
        "fp32 logits at most min(free/2, 4 GiB)), written into grad_inputs = "
        "torch.empty_like(hidden_states); ctx.save_for_backward(grad_inputs, grad_lm_head, "
        "grad_lm_head_bias)",
        "fused_lora_kernels": "Unsloth 2026.8.19 (015bdef0d9) kernels/fast_lora.py LoRA_MLP "
        "(save_for_backward(gateA, gateB, upA, upB, downA, downB, X, e, g); backward in place: "
        "kernels/swiglu.py _DWf_DW_dfg_kernel, torch.matmul(..., out=X)), LoRA_QKV "
        "(save_for_backward(X, QA, QB, KA, KB, VA, VB)), LoRA_W (save_for_backward(A, B, X)); "
        "kernels/rms_layernorm.py Fast_RMS_Layernorm (save_for_backward(X, W, r), r fp32 per "
        "row); kernels/rope_embedding.py Fast_RoPE_Embedding_QK rotates q, k in place and keeps "
        "only cos, sin; models/llama.py FastLlamaModel.patch_peft_model applies them with "
        "lora_dropout == 0 and bias == 'none'",
        "activation_offload": "Unsloth 2026.8.19 models/llama.py FastLlamaModel.get_peft_model("
        "use_gradient_checkpointing='unsloth') by default: models/_utils.py "
        "Unsloth_Offloaded_Gradient_Checkpointer moves each checkpointed block input to host RAM",
        "lora_dropout": "Unsloth 2026.8.19 models/llama.py FastLlamaModel.get_peft_model: "
        "lora_dropout = 0.0 (its fast LoRA path needs it)",
        "qlora_keeps_inputs": "Unsloth requires bitsandbytes >= 0.43.3",
        "optimizer_fused": "Unsloth trains through transformers' Trainer (TRL SFTTrainer): "
        "optim default adamw_torch_fused (transformers 5.17.0, torch >= 2.8)",
        "sync_each_micro_batch": "as hf-trainer (accelerate no_sync)",
        "attention_keeps_fused_qkv": "Unsloth (2025.x) patches transformers models, which keep separate q, k, v",
        "lora_adapter_dtype": "unsloth_zoo 2026.8.13 training_utils.py prepare_model_for_training "
        "(called by Unsloth 2026.8.19 FastLlamaModel.get_peft_model through models/_utils.py "
        "prepare_model_for_kbit_training): '.lora_A.' / '.lora_B.' parameters get upcast = True, "
        "'dtype = torch.float32 if upcast' (lines 384, 420): fp32 adapters whatever the precision",
        "weights_loaded_other_16bit": "Unsloth 2026.8.19 models/llama.py "
        "FastLlamaModel.from_pretrained: the dtype it loads is the one it trains in (dtype None -> "
        "torch.float16 if not SUPPORTS_BFLOAT16 else torch.bfloat16, lines 2434-2435), whatever "
        "the checkpoint's: autocast finds the weights in its own dtype",
        "weights_loaded_16bit": "Unsloth 2026.8.19 models/llama.py FastLlamaModel.from_pretrained: "
        "dtype None -> torch.float16 if not SUPPORTS_BFLOAT16 else torch.bfloat16 (lines "
        "2434-2435), passed to from_pretrained (add_dtype_kwargs, line 2657); unsloth_zoo "
        "2026.8.13 training_utils.py prepare_model_for_training freezes every other parameter "
        "of a LoRA model without a cast. Full fine-tuning casts every trainable parameter to "
        "fp32 (mixed_precision_dtype, float32_mixed_precision=True): LoRA / QLoRA only "
        "(PROFILE_APPLIES_WHEN)",
        "loss_outputs_kept": "as hf-trainer (transformers 5.17.0 Trainer.compute_loss)",
        "outputs_cast_fp32": "Unsloth trains through transformers' Trainer, which prepares the "
        "model with accelerate: as hf-trainer; Unsloth issue #465 (2024-05, Unsloth 2024.5, "
        "fp16 on a T4) ran out of memory in accelerate's _convert_to_fp32 on the [2, L, 128256] "
        "logits",
        "rope_cache_16bit": "Unsloth models/llama.py, LlamaRotaryEmbedding.__init__: "
        "current_rope_size = min(4 * 8192, max_position_embeddings) and _set_cos_sin_cache(..., "
        "dtype=torch.get_default_dtype()) registering cos_cached and sin_cached (2024.9.post3, "
        "c0b4d640, lines 1079-1098; LlamaExtendedRotaryEmbedding, Llama 3.1's, the same at lines "
        "1174-1184), and at 015bdef0d9 (2026-08) lines 1811-1823, per device; FastLlamaModel."
        "pre_patch puts the class in place of transformers' "
        "(transformers.models.llama.modeling_llama.LlamaRotaryEmbedding = LlamaRotaryEmbedding, "
        "c0b4d640 line 1463, 015bdef0d9 line 2316). transformers 4.48 on builds one rotary "
        "module in the model ('model'); 4.43 to 4.47 also built one in every LlamaAttention "
        "(self.rotary_emb), each then Unsloth's: 'per-layer' for Unsloth's 2024 releases",
        "expandable_segments": "unsloth_zoo 2026.8.13 (ce232d6c) __init__.py (lines 277-291; "
        "removed again on Windows / WSL and ROCm builds): unless UNSLOTH_VLLM_STANDBY, on "
        "torch >= 2.10 it sets PYTORCH_ALLOC_CONF to "
        "'expandable_segments:True' (on older torch PYTORCH_CUDA_ALLOC_CONF to "
        "'expandable_segments:True,roundup_power2_divisions:[32:256,64:128,256:64,>:32]'), "
        "where the user has not set it; before unsloth #3499 (590d6d6a, 2025-10-26) Unsloth's "
        "own __init__.py did the same, from c599ae0f (2024-03-17) on torch >= 2.2 (it deleted the "
        "setting on older torch)",
    },
    Framework.TRL_SFT: {
        "chunked_loss": "TRL 1.16.0 trainer/sft_trainer.py: SFTTrainer.__init__ calls "
        "add_fused_lm_head(outputs=('log_probs', 'entropy', 'is_top1')) and compute_loss runs "
        "model(**inputs, fused_lm_head=True); trainer/utils.py _ChunkedLogProbFunction projects "
        "the LM head tile by tile (_CHUNKED_LOGPROB_CHUNK_SIZE tokens), never the whole logits; "
        "TRL 1.9.0 (f2cd577) sft_config.py: loss_type defaults to 'chunked_nll' (the lm_head "
        "projection computed in chunks on the non-ignored tokens) unless use_liger_kernel",
        "loss_fused_lm_head": "TRL 1.16.0 trainer/utils.py add_fused_lm_head: "
        "_ChunkedLogProbFunction.apply(hidden_states[mask], lm_head.weight, ...) "
        "(trl/kernels/chunked_logprob.py ChunkedLogProbFunction: [TOKEN_CHUNK_SIZE=4096, "
        "chunk_size=32768] tiles in one mm_buf, saves hidden, targets, log_z, entropy; backward "
        "accumulates grad_hidden in fp32)",
        "loss_outputs_kept": "TRL 1.16.0 SFTTrainer.compute_loss keeps a FusedCausalLMOutput "
        "(per-token log-probs, entropy, top-1 flags), no logits",
        "lora_adapter_dtype": "peft 0.21.0 get_peft_model(autocast_adapter_dtype=True) keeps "
        "LoRA adapters in fp32; TRL 1.16.0 sft_trainer.py then casts every trainable parameter of "
        "a quantized model to bf16 (QLoRA adapters in the base dtype; the same cast in 1.9.0, "
        "f2cd577) and passes "
        "autocast_adapter_dtype=False under DeepSpeed ZeRO-3 on a model that is not quantized",
        "packed_attention": "TRL 1.16.0 trainer/sft_trainer.py: padding_free = args.padding_free or "
        "(args.packing and args.packing_strategy in {'bfd', 'bfd_split'}) (sft_config.py: "
        "packing_strategy defaults to 'bfd'); DataCollatorForLanguageModeling(padding_free=True) "
        "flattens the rows, restarts position_ids at each sample and passes cu_seq_lens_q/k, so "
        "transformers 5.17 runs flash_attn_varlen_func per sample (SDPA and eager: a 4-D block "
        "mask from masking_utils.find_packed_sequence_indices)",
        "qlora_prepare_kbit": "TRL 1.16.0 SFTTrainer calls no prepare_model_for_kbit_training "
        "(PR #3882, 65d7894b6, 2025-08-12, v0.22.0, moved the call out of sft_trainer.py into "
        "trl/models/utils.py prepare_peft_model, which SFTTrainer still called; PR #4577, "
        "2af35fb0d, 2025-12-04, v0.26.0, replaced it by get_peft_model alone): the "
        "non-quantized parameters keep the dtype they were loaded in",
        "weights_loaded_16bit": "TRL 1.16.0 trainer/utils.py create_model_from_path (line 1332): "
        '\'dtype = kwargs.get("dtype", "float32")\' for a model given by name (the '
        "SFTTrainer docstring: 'it defaults to float32. This differs from from_pretrained'), and "
        "trainer/model_config.py ModelConfig.dtype defaults to 'float32' (the trl sft script)",
    },
    Framework.AXOLOTL: {
        "packed_attention": "axolotl src/axolotl/monkeypatch/multipack.py (006f2262, main "
        "branch, not checked at the 0.18 tag) patch_for_multipack: with sample_packing and "
        "flash attention, transformers' modeling_flash_attention_utils._get_unpad_data is "
        "replaced by monkeypatch/utils.py get_unpad_data, which reads the sample-numbered "
        "attention mask of the multipack collator as each sample's cu_seqlens: "
        "flash_attn_varlen_func per sample; set for attention flash only (PROFILE_APPLIES_WHEN)",
        "optimizer_fused": "axolotl 0.18 (067b021c8) utils/schemas/training.py: optimizer "
        "defaults to 'adamw_torch_fused', whatever the torch version",
        "lora_dropout": "axolotl 0.18 (067b021c8) utils/schemas/peft.py: lora_dropout = 0.0",
        "qlora_prepare_kbit": "axolotl 0.18 (067b021c8) loaders/model.py "
        "_configure_embedding_dtypes: _prepare_model_for_quantization runs peft's "
        "prepare_model_for_kbit_training on a 4-bit model, then, for any LoRA/QLoRA adapter, "
        "_convert_embedding_modules_dtype(dist_dtype=cfg.torch_dtype) casts the norms and the "
        "embedding modules back to the 16-bit dtype: no fp32 residual stream",
        "weights_loaded_other_16bit": "axolotl 0.18.0 utils/config/__init__.py normalize_config: "
        "'if cfg.bf16 or cfg.bfloat16: cfg.torch_dtype = torch.bfloat16', passed to "
        "from_pretrained (loaders/model.py): an fp16 checkpoint is loaded in the bf16 autocast "
        "computes in",
        "weights_loaded_16bit": "axolotl 0.18.0 utils/config/__init__.py normalize_config: "
        "'if cfg.bf16 or cfg.bfloat16: cfg.torch_dtype = torch.bfloat16' (fp16 with fp16: "
        "true), and loaders/model.py: 'self.model_kwargs[\"dtype\"] = self.cfg.torch_dtype' "
        "for from_pretrained; no cast of trainable parameters to fp32 beyond peft's adapters",
    },
    Framework.LLAMA_FACTORY: {
        "lora_adapter_dtype": "LLaMA-Factory 0.9.6.dev0 (ff6d4d12e) model/adapter.py init_adapter: "
        "cast_trainable_params_to_fp32 unless pure_bf16 or (DeepSpeed ZeRO-3 and no "
        "quantization), passed to get_peft_model(autocast_adapter_dtype=...) and applied as "
        "param.data.to(torch.float32)",
        "lora_dropout": "LLaMA-Factory 0.9.6.dev0 (ff6d4d12e) hparams/finetuning_args.py: "
        "lora_dropout default 0.0",
        "qlora_prepare_kbit": "LLaMA-Factory 0.9.6.dev0 (ff6d4d12e) calls no "
        "prepare_model_for_kbit_training; model_utils/checkpointing.py "
        "prepare_model_for_training casts the norms to fp32 only with upcast_layernorm "
        "(default False) and the logits only with upcast_lmhead_output (default False)",
        "weights_loaded_16bit": "LLaMA-Factory 0.9.5 model/loader.py load_model: "
        'init_kwargs["torch_dtype"] = "auto" (line 155) on a config whose dtype '
        "model/patcher.py sets to the 16-bit compute_dtype; model/adapter.py init_adapter "
        "casts only the trainable parameters to fp32 (cast_trainable_params_to_fp32, line 325): "
        "full fine-tuning's weights are all trainable, so LoRA / QLoRA only "
        "(PROFILE_APPLIES_WHEN)",
    },
    Framework.MS_SWIFT: {
        "lora_dropout": "ms-swift 4.4.3 (3602360a5) swift/arguments/tuner_args.py: "
        "lora_dropout = 0.05",
        "packed_attention": "ms-swift 4.4.3 (3602360a5) arguments/sft_args.py "
        "_check_padding_free: packing sets padding_free = True and refuses any attn_impl but "
        "flash_attn / flash_attention_2/3/4; template/base.py packing_row restarts position_ids "
        "at each sample and the padding-free collator passes no attention_mask, so transformers' "
        "flash attention runs flash_attn_varlen_func per sample",
        "loss_outputs_kept": "ms-swift 4.4.3 trainers/seq2seq_trainer.py compute_loss: the "
        "model's own loss (outputs['loss'], transformers ForCausalLMLoss) unless loss_scale, "
        "and the outputs are returned only with return_outputs",
        "weights_loaded_16bit": "ms-swift 4.6.0 (read in place of 4.4.3) arguments/base_args/"
        "model_args.py: torch_dtype None -> the model's config.json dtype (model/utils.py "
        "get_default_torch_dtype), which the model is loaded in, and _init_mixed_precision sets "
        "the Trainer's bf16 / fp16 from it: autocast on 16-bit weights",
    },
    Framework.PYTORCH_LOOP: {
        "loss_on_16bit_logits": "a hand-written loop's 'logits = model(input_ids).logits; loss = "
        "F.cross_entropy(logits.view(-1, V), labels.view(-1))': transformers 5.17.0 "
        "LlamaForCausalLM.forward returns the lm_head output in the model dtype and calls "
        "self.loss_function (which upcasts) only when given labels",
        "loss_outputs_kept": "the loop's 'logits' variable holds the logits through "
        "loss.backward() (torch 2.x tutorials' loop shape)",
        "optimizer_fused": "torch.optim.AdamW(model.parameters()) with neither foreach nor fused "
        "takes the foreach path on CUDA (torch 2.x optim/optimizer.py "
        "_default_to_fused_or_foreach)",
        "qlora_prepare_kbit": "peft docs/source/developer_guides/quantization.md (007b249c): a "
        "4-bit model goes through prepare_model_for_kbit_training (peft 0.21.0 utils/other.py) "
        "before get_peft_model; one GPU only (APPLIES_WHEN)",
        "lora_adapter_dtype": "peft 0.21.0 get_peft_model(autocast_adapter_dtype=True): adapters "
        "in fp32",
        "moe_expert_layout": "as hf-trainer (transformers 5.17.0 Qwen3MoeExperts, MixtralExperts: "
        "3-D expert tensors)",
    },
    Framework.PYTORCH_LOOP_4: {
        "offload_pinned": "as hf-trainer-4 (DeepSpeed 0.15.4-0.16.9: pin_memory False)",
        "offload_host_cast": "as hf-trainer-4 (DeepSpeed 0.16.9: the fp32 partition uploaded)",
        "sdpa_mask_boolean": "as hf-trainer-4 (transformers 4.46-4.52 AttentionMaskConverter: one "
        "additive mask per forward)",
        "loss_on_16bit_logits": "transformers 4.46-4.53 LlamaForCausalLM.forward: 'logits = "
        "self.lm_head(hidden_states[:, -num_logits_to_keep:, :])', upcast only inside "
        "self.loss_function when labels are given (4.45 and before always called .float()); "
        "the loop's own F.cross_entropy then runs on 16-bit logits",
        "loss_outputs_kept": "as pytorch-loop (the loop's 'logits' variable)",
        "optimizer_fused": "as pytorch-loop (torch 2.4-2.7 AdamW: foreach)",
        "qlora_prepare_kbit": "as pytorch-loop (peft 0.13-0.16 prepare_model_for_kbit_training, "
        "same cast to fp32)",
        "qlora_compute_dtype_from_input": "bitsandbytes 0.45.0-0.46.1 nn/modules.py (the releases "
        "beside transformers 4.46-4.53): Linear4bit.__init__ sets compute_type_is_set = False, so "
        "the first forward's set_compute_type switches compute_dtype to an fp32 or bf16 input's "
        "dtype; 0.47.0 (commit 812ef06a) keeps a given bnb_4bit_compute_dtype",
        "lora_adapter_dtype": "peft 0.12.0 (Jul 2024) on: get_peft_model(autocast_adapter_dtype=True)",
        "attention_grouped_kv": "as hf-trainer-4 (transformers 4.46-4.53 repeat_kv before SDPA)",
        "sdpa_cudnn_last": "as hf-trainer-4 (torch 2.4-2.7: cuDNN attention last or off)",
        "moe_expert_layout": "as hf-trainer-4 (transformers 4.46-4.57: one nn.Linear per expert "
        "matrix)",
        "weights_loaded_16bit": "as hf-trainer-4 (transformers 4.46-4.53 from_pretrained loads "
        "fp32 unless torch_dtype is given)",
    },
}
"""Where each profile entry comes from (library, file, version or commit)."""


def _inherit(framework: Framework, parent: Framework, via: str) -> None:
    """Cite the entries ``framework`` takes unchanged from ``parent``: ``via`` says how the
    library reaches ``parent``'s code (e.g. it subclasses transformers' Trainer)."""
    own = SOURCES[framework]
    for key in PROFILES[framework]:
        if key not in own and key in SOURCES[parent]:
            own[key] = f"as {parent.value} ({via}): {SOURCES[parent][key]}"


_inherit(
    Framework.TRL_SFT,
    Framework.HF_TRAINER,
    "TRL 1.16.0 SFTTrainer subclasses transformers 5.17 Trainer; sft_config.py SFTConfig "
    "keeps TrainingArguments' optim",
)
_inherit(
    Framework.AXOLOTL,
    Framework.HF_TRAINER,
    "axolotl 0.18 core/trainers AxolotlTrainer subclasses transformers' Trainer",
)
_inherit(
    Framework.LLAMA_FACTORY,
    Framework.HF_TRAINER,
    "LLaMA-Factory 0.9.6.dev0 train/sft/trainer.py CustomSeq2SeqTrainer subclasses "
    "transformers' Seq2SeqTrainer",
)
_inherit(
    Framework.MS_SWIFT,
    Framework.HF_TRAINER,
    "ms-swift 4.4.3 trainers/seq2seq_trainer.py Seq2SeqTrainer subclasses transformers' "
    "Seq2SeqTrainer",
)
_inherit(Framework.PYTORCH_LOOP, Framework.HF_CUSTOM_LOOP, "the same libraries, the user's loop")
_inherit(Framework.PYTORCH_LOOP_4, Framework.HF_TRAINER_4, "transformers 4.46-4.53 models")


ORACLE_UNTRACED: dict[Framework, str] = {
    Framework.UNSLOTH: "Unsloth patches transformers with Triton kernels (fast_lora, its fused "
    "cross-entropy) and offloads checkpoints to host memory; none run on the CPU",
}
"""Profiles the fake-tensor oracle (``tools/oracle``) does not run, and why; every other profile
has setups in ``benchmarks/oracle_sweep.py`` (torchtune and LitGPT through their own modules,
``tools/oracle/torchtune_stack.py``, ``tools/oracle/litgpt_stack.py``)."""

ORACLE_UNTRACED_KEYS: dict[str, str] = {
    "qlora_keeps_inputs": "bitsandbytes < 0.43.2 only; the oracle models 0.49.2",
    "qlora_quant_state_replicated": "several GPUs (ZeRO-3 / FSDP); the oracle runs one process",
    "sync_each_micro_batch": "several GPUs and gradient accumulation; the oracle runs one process",
    "frozen_weight_grads": "several GPUs (FSDP wrap units); the oracle runs one process",
    "sequence_parallel_repeats_kv": "several GPUs (a sequence-parallel group's all-to-alls); "
    "the oracle runs one process",
    "fsdp_wrap_floor": "reserved memory of the FSDP1 wrap; the oracle counts allocated bytes",
    "fsdp_flat_parameters": "several GPUs (FSDP1's flat parameters); the oracle runs one process",
    "fsdp_fully_shard": "FSDP2's copy-out of gathered parameters, time only; the oracle runs "
    "one process and traces memory",
    "attention_keeps_fused_qkv": "LitGPT's fused attention, traced by the LitGPT stack only; "
    "the transformers oracle runs separate q, k, v projections",
    "attention_mask": "padded micro-batches (length_stats) and their 4-D mask; the oracle "
    "feeds full rows",
    "moe_expert_layout": "each generation's venv builds its own layout: transformers 5 3-D "
    "experts (fused-3d), transformers 4 one module per expert (per-expert-modules)",
    "sdpa_cudnn_last": "which SDPA kernel a torch version tries first: time only, the oracle "
    "traces memory",
    "fp8_library": "what runs the FP8 linears: time only, the oracle traces memory",
    "load_warmup": "a block allocated and freed while the model loads, before any step: the "
    "oracle traces the steps of a model it builds itself; the allocator replay runs it "
    "(calc.load_warmup)",
    "offload_pinned": "DeepSpeed's host buffers for CPU offload: time only, the oracle runs one "
    "process without DeepSpeed and traces device memory",
    "offload_host_cast": "DeepSpeed's upload after a CPU step: time only, the oracle runs one "
    "process without DeepSpeed and traces device memory",
    "gradient_clipping": "the norm's passes over the gradients: time only (its per-tensor "
    "norms are a few bytes each), the oracle traces memory",
    "sdpa_mask_boolean": "transformers 4.52 and before (additive masks shared by every block); "
    "the transformers 4 oracle runs 4.53.3, whose masks are boolean already, and feeds full "
    "rows (no padding mask to copy)",
    "qlora_compute_dtype_from_input": "bitsandbytes <= 0.46 only, and calc prices it in time "
    "only (the 4-bit matmuls' dtype); the oracle models bitsandbytes 0.49.2 and traces memory",
    "packed_attention": "packed rows' block mask (attention FLOPs, and its 4-D mask under "
    "SDPA or eager): the oracle feeds full rows",
    "checkpointing_granularity": "torchtitan's wrappers (every N-th block, the per-op "
    "selective-checkpoint policy) run on torchtitan's own Llama modules; the oracle traces "
    "transformers' gradient_checkpointing_enable (full) and refuses the other granularities",
    "checkpointing_every": "read with the every-n granularity only, which the oracle refuses",
    "qlora_embeddings_recast_bf16": "TRL before 0.26.0 only (peft_module_casting_to_bf16 after "
    "kbit preparation, and the autocast it needs); the oracle runs the current libraries' own "
    "prepare_model_for_kbit_training on a bf16 model without autocast and no TRL",
}
"""Behaviour keys a traced profile sets that the oracle leaves at what the installed libraries
do, and reader keys whose other values it refuses, and why (``tools/oracle/run.py`` reads
every other key)."""


TRANSFORMERS_MODELING = {
    "hf-trainer": 5,
    "hf-custom-loop": 5,
    "pytorch-loop": 5,
    "trl-sft": 5,
    "axolotl": 5,
    "llama-factory": 5,
    "ms-swift": 5,
    "hf-trainer-4": 4,
    "pytorch-loop-4": 4,
}
"""Profiles (``framework`` values) whose model is transformers' own modeling code, with the
major version they run (the module docstring's generations). ``generic`` (code no library
names), torchtune and LitGPT (their own model classes) and Unsloth (its patched blocks) are not
among them."""


HF_TRAINER_SUBCLASSES = frozenset(
    {
        Framework.HF_TRAINER,
        Framework.HF_TRAINER_4,
        Framework.TRL_SFT,
        Framework.AXOLOTL,
        Framework.LLAMA_FACTORY,
        Framework.MS_SWIFT,
    }
)
"""Profiles whose loop is transformers' ``Trainer`` (or a subclass that keeps its
``create_optimizer``)."""


def profile_keys() -> tuple[str, ...]:
    """Every request key some profile sets, sorted: the keys whose value, when the request
    leaves them out, depends on ``framework``."""
    return tuple(sorted({key for entries in PROFILES.values() for key in entries}))


def _several_sharded(values: Mapping[str, Any]) -> bool:
    gpus = values.get("num_gpus")
    return (
        values.get("sharding") in ("zero2", "zero3")
        and isinstance(gpus, int)
        and not isinstance(gpus, bool)
        and gpus > 1
    )


def _one_gpu(values: Mapping[str, Any]) -> bool:
    return values.get("num_gpus") == 1


def _padded_sdpa(values: Mapping[str, Any]) -> bool:
    """SDPA on padded micro-batches: sample lengths given and not packed into full rows."""
    return (
        values.get("attention") == "sdpa"
        and values.get("length_stats") is not None
        and values.get("batching") != "packed"
    )


def _no_mask_tensor(values: Mapping[str, Any]) -> bool:
    """transformers' ``use_gqa_in_sdpa`` passes ``enable_gqa`` only without a mask tensor; with
    one, ``repeat_kv`` expands k/v to every query head."""
    return values.get("attention_mask") != "padding" and not _padded_sdpa(values)


def _fsdp_sharded(values: Mapping[str, Any]) -> bool:
    """Several GPUs sharded by PyTorch FSDP, not by DeepSpeed."""
    return _several_sharded(values) and values.get("sharding_engine") != "deepspeed"


def _fsdp1_path(values: Mapping[str, Any]) -> bool:
    """FSDP1's flat parameters, unless the request itself asks for FSDP2's ``fully_shard``."""
    return _fsdp_sharded(values) and not values.get("fsdp_fully_shard")


def _fsdp2_path(values: Mapping[str, Any]) -> bool:
    """FSDP2's ``fully_shard``, unless the request itself asks for FSDP1's flat parameters."""
    return _fsdp_sharded(values) and not values.get("fsdp_flat_parameters")


def _packed(values: Mapping[str, Any]) -> bool:
    return values.get("batching") == "packed"


def _packed_flash(values: Mapping[str, Any]) -> bool:
    """axolotl's multipack patch reaches flash attention's unpadding only."""
    return _packed(values) and values.get("attention") == "flash"


def _deepspeed_zero(values: Mapping[str, Any]) -> bool:
    """A ZeRO stage run by DeepSpeed (``calc.states.deepspeed_zero`` on the request's values)."""
    return (
        values.get("sharding") in ("zero1", "zero2", "zero3")
        and values.get("sharding_engine") == "deepspeed"
    )


def _native_amp(values: Mapping[str, Any]) -> bool:
    """accelerate's native mixed precision: ``*-mixed`` unless DeepSpeed runs the ZeRO stage
    (accelerate 1.15.0 ``Accelerator.__init__``: no ``native_amp`` under DeepSpeed)."""
    return values.get("precision") in ("bf16-mixed", "fp16-mixed") and not _deepspeed_zero(values)


def _deepspeed_offload(values: Mapping[str, Any]) -> bool:
    """DeepSpeed's ZeRO with the optimizer on the host (``cpu_offload``): FSDP's offload has
    neither setting."""
    return _deepspeed_zero(values) and values.get("cpu_offload") not in (None, "none")


APPLIES_WHEN = {
    "optimizer_fused": lambda values: values.get("optimizer") == "adamw",
    "packed_attention": _packed,
    "frozen_weight_grads": _several_sharded,
    "fsdp_flat_parameters": _fsdp1_path,
    "fsdp_fully_shard": _fsdp2_path,
    "qlora_prepare_kbit": _one_gpu,
    "attention_mask": _padded_sdpa,
    "attention_grouped_kv": _no_mask_tensor,
    "outputs_cast_fp32": _native_amp,
    "offload_pinned": _deepspeed_offload,
    "offload_host_cast": _deepspeed_offload,
    "load_warmup": lambda values: values.get("method") == "qlora",
}
"""Profile entries that describe a code path taken only in some setups: LitGPT's FSDP wrap
policy exists only under FSDP on several GPUs, and only torch's AdamW has a fused kernel;
the several-GPU QLoRA loops the profiles cite do not call ``prepare_model_for_kbit_training``;
transformers passes SDPA a mask tensor only when a micro-batch holds padding (every sample
fills ``seq_len`` when ``length_stats`` is left out), and then expands grouped k/v
(``use_gqa_in_sdpa`` is False with a mask); whether packed samples attend to each other is
a question for packed rows only. A profile's FSDP version applies under PyTorch FSDP only (not
under DeepSpeed's ZeRO) and yields to the other version the request names (one loop runs one
of them). accelerate casts the model's outputs to fp32 only under its native mixed precision
(``*-mixed``, DeepSpeed aside). DeepSpeed's offload settings describe DeepSpeed's offload only.
The load's warmup block is a 4-bit model's.
Outside those setups the key keeps its own default (no warning for a choice the user did
not make)."""


UNSLOTH_PADDING_FREE_BLOCKED = frozenset({"gemma2", "gpt_oss"})
"""Model families on which Unsloth does not turn padding-free batching on by itself (Unsloth
2026.8.19, 015bdef0d9, ``trainer.py`` ``PADDING_FREE_BLOCKLIST``: Gemma 2's soft-capped
attention under ``torch.compile``, gpt-oss's flex attention), beside the hybrid
linear-attention and state-space stacks it detects by structure."""


def _unsloth_padding_free(values: Mapping[str, Any]) -> bool:
    """Unsloth's trainer turns ``padding_free`` on when the config leaves it unset and does not
    pack (2026.8.19 ``trainer.py`` ``_should_auto_padding_free``, from 75e0d7ce, 2025-12-10), but
    not on the families of :data:`UNSLOTH_PADDING_FREE_BLOCKED` nor on hybrid stacks; a model
    calc cannot read keeps the key's own default (its error comes from the model itself)."""
    from .errors import ConfigError, InputError
    from .request import resolve_model

    try:
        arch, _ = resolve_model(values.get("model"))
    except (ConfigError, InputError):
        return False
    return arch.family not in UNSLOTH_PADDING_FREE_BLOCKED and not arch.hybrid


def _kbit_prepared(values: Mapping[str, Any]) -> bool:
    """TRL's SFTTrainer re-casts the embedding and output layer only where it prepared the
    4-bit model (the request's ``qlora_prepare_kbit``)."""
    return values.get("method") == "qlora" and values.get("qlora_prepare_kbit") is True


def _deepspeed_zero3(values: Mapping[str, Any]) -> bool:
    return values.get("sharding") == "zero3" and values.get("sharding_engine") == "deepspeed"


def _trl_fp32_adapters(values: Mapping[str, Any]) -> bool:
    """TRL 1.16.0 casts a quantized model's adapters to bf16 and builds them in the base dtype
    under DeepSpeed ZeRO-3."""
    return values.get("method") != "qlora" and not _deepspeed_zero3(values)


def _llamafactory_fp32_adapters(values: Mapping[str, Any]) -> bool:
    """LLaMA-Factory leaves the trainable parameters in the base dtype under DeepSpeed ZeRO-3
    without quantization."""
    return values.get("method") == "qlora" or not _deepspeed_zero3(values)


def _adapters(values: Mapping[str, Any]) -> bool:
    """LoRA / QLoRA: the libraries that cast every trainable parameter to fp32 leave only the
    frozen base in 16 bits."""
    return values.get("method") in ("lora", "qlora")


PROFILE_APPLIES_WHEN: dict[Framework, dict[str, Callable[[Mapping[str, Any]], bool]]] = {
    Framework.HF_TRAINER: {"weights_loaded_16bit": _adapters},
    Framework.HF_TRAINER_4: {"qlora_embeddings_recast_bf16": _kbit_prepared},
    Framework.TRL_SFT: {"lora_adapter_dtype": _trl_fp32_adapters},
    Framework.AXOLOTL: {"packed_attention": _packed_flash},
    Framework.LLAMA_FACTORY: {
        "lora_adapter_dtype": _llamafactory_fp32_adapters,
        "weights_loaded_16bit": _adapters,
    },
    Framework.UNSLOTH: {"weights_loaded_16bit": _adapters, "batching": _unsloth_padding_free},
}
"""Conditions of one profile's entry, in place of :data:`APPLIES_WHEN`'s for that key: where one
library takes a code path only in some setups (outside them the key keeps its own default)."""


def _condition(framework: Framework, key: str) -> Callable[[Mapping[str, Any]], bool] | None:
    return PROFILE_APPLIES_WHEN.get(framework, {}).get(key, APPLIES_WHEN.get(key))


def apply_profile(
    values: JsonObject, explicit: Collection[str], framework: Framework
) -> JsonObject:
    """``values`` (every key, defaults filled) with the profile's entries for the keys not
    in ``explicit`` (the keys the request gives, behaviours included), where
    :data:`APPLIES_WHEN` allows."""
    for key, value in PROFILES[framework].items():
        if key not in values or key in explicit:
            continue
        condition = _condition(framework, key)
        if condition is None or condition(values):
            values[key] = value
    return values


def reapplied(
    values: Mapping[str, Any],
    profile_keys: tuple[str, ...],
    framework: Framework,
    defaults: JsonObject,
) -> JsonObject:
    """``{key: value}`` for the conditional entries (:data:`APPLIES_WHEN`) that the profile
    filled (``profile_keys``), evaluated again on ``values`` (a request changed after parsing,
    e.g. a recommendation's variant with more GPUs): the profile's value where the condition
    now holds, the key's own default where it does not."""
    out = {}
    own = [key for key in PROFILE_APPLIES_WHEN.get(framework, {}) if key not in APPLIES_WHEN]
    for key in [*APPLIES_WHEN, *own]:
        condition = _condition(framework, key)
        if condition is not None and key in profile_keys and key in PROFILES[framework]:
            out[key] = PROFILES[framework][key] if condition(values) else defaults[key]
    return out


__all__ = [
    "APPLIES_WHEN",
    "Framework",
    "HF_TRAINER_SUBCLASSES",
    "ORACLE_UNTRACED",
    "ORACLE_UNTRACED_KEYS",
    "PROFILES",
    "PROFILE_APPLIES_WHEN",
    "SOURCES",
    "apply_profile",
    "reapplied",
]
