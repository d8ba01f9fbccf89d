"""LLaMA-Factory YAML (``llamafactory-cli train x.yaml``) -> request. Its own keys and
defaults from LLaMA-Factory 0.9.6.dev0 (``src/llamafactory/hparams/*.py``, commit ff6d4d1,
August 2026): ``finetuning_type`` "lora", ``lora_rank`` 8, ``lora_dropout`` 0.0,
``lora_target`` "all", ``double_quantization`` true, ``cutoff_len`` 2048, ``flash_attn``
"auto", ``disable_gradient_checkpointing`` false (checkpointing on), ``pure_bf16`` false;
the rest are the Trainer's arguments, read as in :mod:`calc.config_import.trl`
(transformers 5.17.0 defaults: ``per_device_train_batch_size`` 8, ``optim``
"adamw_torch_fused", ``num_train_epochs`` 3.0).

Precision: LLaMA-Factory loads the weights in the compute dtype and, unless
``pure_bf16`` (or ZeRO-3/FSDP), casts the *trainable* parameters to fp32
(``model/adapter.py``): full fine-tuning then has fp32 master weights (``bf16-mixed``),
LoRA keeps bf16 base weights (``bf16-true``; the fp32 adapters are small).
"""

from __future__ import annotations

from ..jsontypes import JsonObject
from . import common, hf, keys, trl
from .models import resolve_model
from .report import Report

TOOL = "LLaMA-Factory 0.9.6.dev0"

IGNORED = {
    "do_train",
    "do_eval",
    "do_predict",
    "dataset",
    "eval_dataset",
    "dataset_dir",
    "media_dir",
    "template",
    "max_samples",
    "overwrite_cache",
    "preprocessing_num_workers",
    "preprocessing_batch_size",
    "tokenized_path",
    "mix_strategy",
    "interleave_probs",
    "streaming",
    "buffer_size",
    "train_on_prompt",
    "mask_history",
    "val_size",
    "eval_num_beams",
    "ignore_pad_token_for_loss",
    "enable_thinking",
    "tool_format",
    "default_system",
    "plot_loss",
    "overwrite_output_dir",
    "trust_remote_code",
    "use_fast_tokenizer",
    "resize_vocab",
    "split_special_tokens",
    "new_special_tokens",
    "add_tokens",
    "add_special_tokens",
    "model_revision",
    "hf_hub_token",
    "ms_hub_token",
    "om_hub_token",
    "cache_dir",
    "print_param_status",
    "compute_accuracy",
    "include_effective_tokens_per_second",
    "lora_alpha",
    "use_rslora",
    "loraplus_lr_ratio",
    "loraplus_lr_embedding",
    "create_new_adapter",
    "adapter_name_or_path",
    "adapter_folder",
    "export_dir",
    "export_size",
    "export_device",
    "export_quantization_bit",
    "export_legacy_format",
    "export_hub_model_id",
    "infer_backend",
    "use_reentrant_gc",
    "quantization_method",
    "quantization_type",
    "image_max_pixels",
    "image_min_pixels",
    "video_max_pixels",
    "video_min_pixels",
    "video_fps",
    "video_maxlen",
    "audio_sampling_rate",
    "freeze_vision_tower",
    "freeze_multi_modal_projector",
    "freeze_language_model",
    "swanlab_project",
    "swanlab_run_name",
    "use_swanlab",
    "ray_run_name",
    "ray_storage_path",
    "ray_num_workers",
    "resources_per_worker",
    "placement_strategy",
    "low_cpu_mem_usage",
    "offload_folder",
    "use_kv_cache",
    "infer_dtype",
    "disable_shuffling",
}
NOT_MODELLED = {
    "use_dora",
    "additional_target",
    "pissa_init",
    "pissa_iter",
    "pissa_convert",
    "use_galore",
    "use_apollo",
    "use_badam",
    "use_adam_mini",
    "use_muon",
    "upcast_layernorm",
    "upcast_lmhead_output",
    "rope_scaling",
    "shift_attn",
    "mixture_of_depths",
    "moe_aux_loss_coef",
    "freeze_trainable_layers",
    "freeze_trainable_modules",
    "freeze_extra_modules",
    "train_from_scratch",
    "fp8",
    "fp8_backend",
    "enable_fsdp_cpu_offload",
    "use_llama_pro",
    "sequence_parallel_size",
    "block_diag_attn",
}
_FLASH = {"auto": "sdpa", "disabled": "eager", "sdpa": "sdpa", "fa2": "flash", "fa3": "flash"}


def _finetuning_type(rep: Report, key: str, value: object, st: JsonObject) -> None:
    if value in ("freeze", "oft"):
        rep.unknown(key, "finetuning_type_not_modelled")
    elif common.choice(rep, key, value, ("lora", "full"), "method", ("freeze", "oft")) is not None:
        rep.mark_used(key, ["method"])


def _quantization_bit(rep: Report, key: str, value: object, st: JsonObject) -> None:
    st["bits"] = value
    if value == 4:
        rep.mark_used(key, ["method"])
    elif value is None:
        rep.ignore(key)
    elif value in (2, 3, 5, 6, 8) and not isinstance(value, bool):
        rep.unknown(key, "only_4bit_modelled")
    else:
        st["bits"] = None
        rep.invalid(key, value, "not_allowed", {"allowed": [2, 3, 4, 5, 6, 8, None]}, "method")


def _lora_target(rep: Report, key: str, value: object, st: JsonObject) -> None:
    st["targets_key"] = (key, value)  # checked against the model once it is known


def _flash_attn(rep: Report, key: str, value: object, st: JsonObject) -> None:
    if common.choice(rep, key, value, tuple(_FLASH), "attention") is not None:
        common.set_attention(rep, key, _FLASH[str(value)])


def _switch(field: str, value: object, note: str | None = None) -> keys.Key:
    """A key that, when true, sets ``field`` to ``value``; when false it changes nothing."""

    def read(rep: Report, key: str, item: object, st: JsonObject) -> None:
        if common.flag(rep, key, item, field) is True:
            rep.use(key, field, value)
        else:
            rep.ignore(key)

    return keys.Key(read, (field,), note)


LOGITS_STAGES = ("pt", "sft")
"""Stages whose loss is the causal language-modelling loss calc counts. The others (``rm``,
``ppo``, ``dpo``, ``kto``) train on preferences or rewards, with a reference or value model
calc does not count, and need the logits (``model/loader.py`` ``load_model``:
``apply_liger_kernel(..., require_logits=(finetuning_args.stage not in ["pt", "sft"]))``)."""


def _stage(rep: Report, key: str, value: object, st: JsonObject) -> None:
    """``stage`` (``FinetuningArguments.stage``, default ``sft``): ``pt`` and ``sft`` are what
    calc counts; another stage is reported not modelled (the estimate is then that of the
    supervised step, which the report says)."""
    st["stage"] = value
    if value in LOGITS_STAGES:
        rep.ignore(key)
    else:
        rep.unknown(key, "training_stage_not_modelled")


def _liger(rep: Report, key: str, value: object, st: JsonObject) -> None:
    if common.flag(rep, key, value, "liger_kernel") is True:
        st["liger_key"] = key
        rep.use(key, "liger_kernel", True)
    else:
        rep.ignore(key)


def _finish_liger(rep: Report, st: JsonObject) -> None:
    """LLaMA-Factory's ``model_utils/liger_kernel.py`` (at 12129195) applies liger-kernel with
    its fused linear cross-entropy for the ``pt`` and ``sft`` stages (calc's ``chunked_loss``)
    and with its plain cross-entropy on the whole logits for the others (``require_logits``)."""
    key = st.get("liger_key")
    if key is not None and st.get("stage", "sft") in LOGITS_STAGES:
        rep.use(key, "chunked_loss", True, "Liger's fused linear cross-entropy")


def _use_unsloth(rep: Report, key: str, value: object, st: JsonObject) -> None:
    if common.flag(rep, key, value) is True:
        st["unsloth"] = True
        rep.use(key, "framework", "unsloth")
    else:
        rep.ignore(key)


def _disable_checkpointing(rep: Report, key: str, value: object, st: JsonObject) -> None:
    disable = common.flag(rep, key, value, "gradient_checkpointing")
    rep.use(key, "gradient_checkpointing", None if disable is None else not disable)


def _precision_flag(rep: Report, key: str, value: object, st: JsonObject) -> None:
    st[key] = common.flag(rep, key, value, "precision")
    rep.mark_used(key, ["precision"])


def _trainer_key(rep: Report, key: str, value: object, st: JsonObject) -> None:
    """A key LLaMA-Factory takes from the Trainer (read as :mod:`.trl` reads it), or one of
    its own the estimate does not model, or ignores."""
    if trl.training_arg(rep, st, key, value, st["read_file"]):
        return
    if key in NOT_MODELLED:
        rep.unknown(key, "not_modelled")
    elif key in IGNORED or key in trl.TRAINING_IGNORED:
        rep.ignore(key)
    else:
        rep.unknown(key)


# LLaMA-Factory's own keys; any other goes through _trainer_key
KEYS: dict[str, keys.Key] = {
    "model_name_or_path": keys.Key(
        lambda rep, key, value, st: None, ("model",), "read first: the model's shapes"
    ),
    "finetuning_type": keys.Key(_finetuning_type, ("method",)),
    "quantization_bit": keys.Key(_quantization_bit, ("method",), "only 4 bits modelled"),
    "double_quantization": keys.boolean("qlora_double_quant"),
    "lora_rank": keys.whole("lora_rank"),
    "lora_dropout": keys.call(hf.set_dropout, "lora_dropout"),
    "lora_target": keys.Key(_lora_target, ("lora_targets",)),
    "cutoff_len": keys.whole("seq_len"),
    "packing": keys.Key(hf.read_packing, ("batching",), "packed sequences fill seq_len"),
    "neat_packing": keys.Key(
        hf.read_neat_packing,
        ("batching", "packed_attention"),
        "packing without cross-attention",
    ),
    "flash_attn": keys.Key(_flash_attn, ("attention",)),
    # liger-kernel's apply function on the model class before loading (LLaMA-Factory's
    # model_utils/liger_kernel.py): its norms, MLP and, for the sft stage, its fused loss
    "enable_liger_kernel": keys.Key(_liger, ("chunked_loss", "liger_kernel")),
    "stage": keys.Key(_stage),
    "use_unsloth": keys.Key(_use_unsloth, ("framework",)),
    # Unsloth's checkpointing offloads each block's input to the CPU
    "use_unsloth_gc": _switch("activation_offload", True),
    "disable_gradient_checkpointing": keys.Key(_disable_checkpointing, ("gradient_checkpointing",)),
    **{name: keys.Key(_precision_flag, ("precision",)) for name in ("pure_bf16", "bf16", "fp16")},
    # TRL's names, which LLaMA-Factory does not read
    **{
        name: keys.Key(lambda rep, key, value, st: rep.unknown(key))
        for name in ("max_length", "max_seq_length", "use_peft", "lora_r")
    },
}


def import_llamafactory(
    data: JsonObject, model: object = None, read_file: common.ReadFile | None = None
) -> JsonObject:
    rep = Report("llamafactory", TOOL)
    st: JsonObject = {}
    arch = None
    if "model_name_or_path" in data or model is not None:
        arch = resolve_model(
            rep,
            "model_name_or_path" if "model_name_or_path" in data else "(model)",
            data.get("model_name_or_path"),
            model,
        )
    finetuning = data.get("finetuning_type", "lora")
    if finetuning not in ("lora", "full", "freeze", "oft"):
        finetuning = "lora"  # refused below: LLaMA-Factory's default in its place
    st["read_file"] = read_file
    keys.read_keys(rep, data, KEYS, st, rest=keys.Key(_trainer_key))

    if finetuning in ("lora", "full"):
        method = "full" if finetuning == "full" else ("qlora" if st.get("bits") == 4 else "lora")
        if "finetuning_type" in data:
            rep.request["method"] = method
        else:
            rep.default("method", method, TOOL + ": finetuning_type lora")
    method = rep.request.get("method", "lora")
    rep.request.setdefault("precision", _precision(st, method))
    if method != "full":
        if st.get("targets_key") is None:
            st["targets_key"] = ("lora_target", "all")
            rep.defaults.append(
                {
                    "field": "lora_targets",
                    "value": "all-linear",
                    "source": TOOL + ": lora_target all",
                }
            )
        hf.finish_targets(rep, st["targets_key"], arch, TOOL)
        rep.default("lora_rank", 8, TOOL)
        # trainable parameters cast to fp32 unless pure_bf16 (model/adapter.py)
        hf.adapter_dtype_default(
            rep, not st.get("pure_bf16"), TOOL + ": trainable parameters in fp32 unless pure_bf16"
        )
        rep.default("lora_dropout", 0.0, TOOL)
        if method == "qlora":
            rep.default("qlora_double_quant", True, TOOL)
    if "lora_target" not in data and rep.status("lora_target"):
        rep.keys[:] = [k for k in rep.keys if k["key"] != "lora_target"]
    rep.default("seq_len", 2048, TOOL)
    rep.default("gradient_checkpointing", True, TOOL + ": disable_gradient_checkpointing false")
    rep.default("attention", "sdpa", TOOL + ": flash_attn auto")
    rep.default("micro_batch_size", 8, "transformers 5.17.0 TrainingArguments")
    rep.default("gradient_accumulation_steps", 1, "transformers 5.17.0 TrainingArguments")
    rep.default("optimizer", "adamw", "transformers 5.17.0 TrainingArguments: adamw_torch_fused")
    rep.default("optimizer_fused", True, "transformers 5.17.0 TrainingArguments: adamw_torch_fused")
    _finish_liger(rep, st)
    rep.default("chunked_loss", False, TOOL)
    hf.finish_padding_free(rep, st)
    hf.finish_common(rep, st, TOOL, packing=st.get("packing", False), default_epochs=3.0)
    # LLaMA-Factory trains with transformers' Seq2SeqTrainingArguments: the Trainer's schedule
    hf.finish_run_phases(rep, st)
    if not st.get("unsloth"):
        hf.set_framework(rep, "llama-factory")
    return rep.result()


def _precision(st: JsonObject, method: str) -> str:
    if st.get("fp16"):
        return "fp16-mixed"
    if st.get("bf16") or st.get("pure_bf16"):
        if st.get("pure_bf16") or method != "full":
            return "bf16-true"
        return "bf16-mixed"
    return "fp32"
