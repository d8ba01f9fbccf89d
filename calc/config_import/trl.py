"""Hugging Face ``TrainingArguments`` / TRL ``SFTConfig`` (JSON or YAML, as ``trl sft
--config`` reads it) -> request, with TRL's ``ModelConfig`` keys (model, dtype,
attention, LoRA and 4-bit options) and nested ``peft_config`` / ``lora_config``
(peft ``LoraConfig``) and ``quantization_config`` / ``bnb_config`` (``BitsAndBytesConfig``)
sections.

Defaults: transformers 5.17.0 ``TrainingArguments`` (``per_device_train_batch_size`` 8,
``gradient_accumulation_steps`` 1, ``optim`` "adamw_torch_fused", ``gradient_checkpointing``
false, ``bf16``/``fp16`` false, ``num_train_epochs`` 3.0) overridden by TRL 1.9.0
``SFTConfig`` (commit f2cd577, July 2026: ``gradient_checkpointing`` true, ``bf16`` true
unless ``fp16``, ``max_length`` 1024, ``packing`` false, ``loss_type`` "chunked_nll"
unless ``use_liger_kernel``) and ``ModelConfig`` (``dtype`` "float32", ``lora_r`` 16,
``lora_dropout`` 0.05, ``use_bnb_nested_quant`` false). A file with no SFTConfig key is
read with the plain ``TrainingArguments`` defaults (``seq_len`` then has no default in
the file and keeps calc's).
"""

from __future__ import annotations

from ..jsontypes import JsonObject
from . import common, hf, keys, sections
from .models import resolve_model
from .report import Report

TOOL = "TRL 1.9.0 / transformers 5.17.0"

TRAINING_IGNORED = {
    "output_dir",
    "learning_rate",
    "lr_scheduler_type",
    "lr_scheduler_kwargs",
    "warmup_steps",
    "warmup_ratio",
    "optim_args",
    "weight_decay",
    "adam_beta1",
    "adam_beta2",
    "adam_epsilon",
    "average_tokens_across_devices",
    "label_smoothing_factor",
    "use_cache",
    "neftune_noise_alpha",
    "logging_strategy",
    "logging_steps",
    "logging_first_step",
    "log_on_each_node",
    "logging_nan_inf_filter",
    "include_num_input_tokens_seen",
    "log_level",
    "log_level_replica",
    "disable_tqdm",
    "report_to",
    "run_name",
    "project",
    "trackio_space_id",
    "trackio_bucket_id",
    "trackio_static_space_id",
    "eval_delay",
    "prediction_loss_only",
    "eval_do_concat_batches",
    "eval_use_gather_object",
    "eval_accumulation_steps",
    "include_for_metrics",
    "batch_eval_metrics",
    "save_on_each_node",
    "enable_jit_checkpoint",
    "push_to_hub",
    "hub_token",
    "hub_private_repo",
    "hub_model_id",
    "hub_strategy",
    "hub_always_push",
    "hub_revision",
    "load_best_model_at_end",
    "metric_for_best_model",
    "greater_is_better",
    "ignore_data_skip",
    "restore_callback_states_from_checkpoint",
    "full_determinism",
    "seed",
    "data_seed",
    "dataloader_drop_last",
    "dataloader_num_workers",
    "dataloader_pin_memory",
    "dataloader_persistent_workers",
    "dataloader_prefetch_factor",
    "dataloader_multiprocessing_context",
    "dataloader_in_order",
    "remove_unused_columns",
    "label_names",
    "train_sampling_strategy",
    "length_column_name",
    "ddp_find_unused_parameters",
    "ddp_broadcast_buffers",
    "ddp_static_graph",
    "ddp_backend",
    "ddp_timeout",
    "debug",
    "skip_memory_metrics",
    "do_train",
    "do_eval",
    "do_predict",
    "resume_from_checkpoint",
    "local_rank",
    "bf16_full_eval",
    "fp16_full_eval",
    "torch_compile_backend",
    "torch_compile_mode",
    "overwrite_output_dir",
    "logging_dir",
    "save_safetensors",
    # SFTConfig
    "model_init_kwargs",
    "router_aux_loss_coef",
    "trust_remote_code",
    "chat_template_path",
    "dataset_text_field",
    "dataset_kwargs",
    "dataset_num_proc",
    "eos_token",
    "truncation_mode",
    "shuffle_dataset",
    "eval_packing",
    "completion_only_loss",
    "assistant_only_loss",
    "pad_token",
    "pad_to_multiple_of",
    # ModelConfig / ScriptArguments
    "model_revision",
    "lora_alpha",
    "lora_task_type",
    "use_rslora",
    "bnb_4bit_quant_type",
    "bnb_4bit_quant_storage",
    "dataset_name",
    "dataset_config",
    "dataset_train_split",
    "dataset_test_split",
    "dataset_streaming",
    "datasets",
    "streaming",
    "test_split_size",
    "ignore_bias_buffers",
    "gradient_checkpointing_use_reentrant",
}
NOT_MODELLED = {
    "torch_empty_cache_steps",
    "auto_find_batch_size",
    "optim_target_modules",
    "use_dora",
    "lora_target_parameters",
    "accelerator_config",
    "parallelism_config",
    "liger_kernel_config",
    "use_cpu",
}
SFT_ONLY = {
    "max_length",
    "max_seq_length",
    "packing",
    "loss_type",
    "activation_offloading",
    "dataset_text_field",
    "completion_only_loss",
    "assistant_only_loss",
    "padding_free",
    "model_init_kwargs",
    "packing_strategy",
    "use_peft",
    "lora_r",
    "model_name_or_path",
}
_LORA_CONFIG_IGNORED = {
    "lora_alpha",
    "task_type",
    "bias",
    "use_rslora",
    "fan_in_fan_out",
    "inference_mode",
    "init_lora_weights",
    "peft_type",
    "base_model_name_or_path",
    "revision",
    "r_alpha",
}


def import_trl(
    data: JsonObject, model: object = None, read_file: common.ReadFile | None = None
) -> JsonObject:
    rep = Report("trl", TOOL)
    st: JsonObject = {}
    sft = any(key in SFT_ONLY for key in data)
    arch = None
    model_key = next(
        (k for k in ("model_name_or_path", "model") if isinstance(data.get(k), str)), None
    )
    if model_key is not None:
        arch = resolve_model(rep, model_key, data[model_key], model)
    elif model is not None:
        arch = resolve_model(rep, "(model)", None, model)
    for key, value in data.items():
        key = str(key)
        if key == model_key:
            continue
        if training_arg(rep, st, key, value, read_file):
            continue
        if key in NOT_MODELLED:
            rep.unknown(key, "not_modelled")
        elif key in TRAINING_IGNORED:
            rep.ignore(key)
        else:
            rep.unknown(key)

    if st.get("use_peft") or st.get("load_in_4bit"):
        rep.request["method"] = "qlora" if st.get("load_in_4bit") else "lora"
    elif "use_peft" in st:
        rep.request["method"] = "full"
    else:
        rep.default("method", "full", TOOL + ": no peft_config = full fine-tuning")
    if any(k in st for k in ("bf16", "fp16", "dtype")):
        rep.request.setdefault("precision", _precision(st, sft))
    else:
        rep.default(
            "precision",
            _precision(st, sft),
            "TRL 1.9.0: bf16 on, ModelConfig.dtype float32"
            if sft
            else "transformers 5.17.0: no autocast, weights loaded with dtype auto",
        )
    if rep.request["method"] != "full":
        hf.finish_targets(rep, st.get("targets_key"), arch, TOOL)
        rep.default(
            "lora_rank",
            16 if sft else 8,
            "TRL 1.9.0 ModelConfig.lora_r" if sft else "peft 0.21.0 LoraConfig.r",
        )
        rep.default(
            "lora_dropout",
            0.05 if sft else 0.0,
            "TRL 1.9.0 ModelConfig.lora_dropout" if sft else "peft 0.21.0 LoraConfig.lora_dropout",
        )
        hf.adapter_dtype_default(
            rep, True, "peft 0.21.0 get_peft_model autocast_adapter_dtype=True"
        )
        if rep.request["method"] == "qlora":
            rep.default(
                "qlora_double_quant",
                False,
                "TRL 1.9.0 ModelConfig.use_bnb_nested_quant"
                if sft
                else "transformers 5.17.0 BitsAndBytesConfig",
            )
    rep.default("micro_batch_size", 8, "transformers 5.17.0 TrainingArguments")
    rep.default("gradient_accumulation_steps", 1, "transformers 5.17.0 TrainingArguments")
    if sft:
        rep.default("seq_len", 1024, "TRL 1.9.0 SFTConfig.max_length")
        rep.default("gradient_checkpointing", True, "TRL 1.9.0 SFTConfig")
        rep.default("chunked_loss", True, "TRL 1.9.0 SFTConfig.loss_type chunked_nll")
    else:
        rep.default("gradient_checkpointing", False, "transformers 5.17.0 TrainingArguments")
    rep.default("optimizer", "adamw", "transformers 5.17.0 TrainingArguments: adamw_torch_fused")
    rep.default("optimizer_fused", True, "transformers 5.17.0 TrainingArguments: adamw_torch_fused")
    rep.default("attention", "sdpa", "transformers 5.17.0: sdpa when no attention is chosen")
    _finish_packing_strategy(rep, st)
    hf.finish_padding_free(rep, st)
    hf.finish_common(rep, st, TOOL, packing=st.get("packing", False), default_epochs=3.0)
    hf.finish_run_phases(rep, st)
    # SFTTrainer prepares the model and computes the loss its own way (calc.frameworks)
    hf.set_framework(rep, "trl-sft" if sft else "hf-trainer")
    return rep.result()


def _packing_strategy(rep: Report, key: str, value: object, st: JsonObject) -> None:
    """``packing_strategy``: read once the whole file is (:func:`_finish_packing_strategy`)."""
    if value in ("bfd", "bfd_split", "wrapped"):
        st["packing_strategy"] = (key, value)
    else:
        rep.unknown(key)


def _finish_packing_strategy(rep: Report, st: JsonObject) -> None:
    """TRL 1.16.0 ``SFTTrainer.__init__``: ``padding_free = args.padding_free or (args.packing
    and args.packing_strategy in {'bfd', 'bfd_split'})``. Padding-free rows restart their
    position ids at each sample (the ``trl-sft`` profile's ``packed_attention`` ``per-sample``);
    ``wrapped`` packing without ``padding_free`` concatenates and cuts the samples, and the
    collator passes no position ids and an all-ones mask (``DataCollatorForLanguageModeling``),
    so they attend across the row (``cross-sample``)."""
    found = st.get("packing_strategy")
    if found is None:
        return
    key, value = found
    if value == "wrapped" and st.get("packing") and not st.get("padding_free"):
        rep.use(key, "packed_attention", "cross-sample")
    else:
        rep.ignore(key)


def _max_length(rep: Report, key: str, value: object, st: JsonObject) -> None:
    if value is None:
        rep.unknown(key, "no_truncation_length")
    else:
        common.set_int(rep, key, "seq_len", value)


def _precision_flag(rep: Report, key: str, value: object, st: JsonObject) -> None:
    # None: the Trainer's "not set" (in TRL, bf16)
    flagged = None if value is None else common.flag(rep, key, value, "precision")
    if flagged is not None or value is None:
        st[key] = flagged
    rep.mark_used(key, ["precision"])


def _tf32(rep: Report, key: str, value: object, st: JsonObject) -> None:
    # TrainingArguments.tf32 sets torch.backends.cuda.matmul.allow_tf32; None leaves torch's
    rep.use(key, "tf32", None if value is None else common.flag(rep, key, value, "tf32"))


def _dtype(rep: Report, key: str, value: object, st: JsonObject) -> None:
    # TRL 1.9.0 ModelConfig.dtype choices (torch's names written out also load)
    name = value.lower().replace("torch.", "") if isinstance(value, str) else value
    dtype = None if value is None else common.choice(rep, key, name, _DTYPES, "precision")
    if dtype is not None or value is None:
        st["dtype"] = dtype
    rep.mark_used(key, ["precision"])


def _attention(rep: Report, key: str, value: object, st: JsonObject) -> None:
    if value is None:
        rep.ignore(key)
    else:
        common.set_attention(rep, key, value)


def _liger(rep: Report, key: str, value: object, st: JsonObject) -> None:
    st["liger"] = common.flag(rep, key, value, "chunked_loss")
    if st["liger"] is True:
        # the Trainer patches the model with Liger's defaults (transformers Trainer
        # ``_apply_liger_kernel_to_instance``): its norms, MLP and fused linear cross-entropy
        rep.use(key, "chunked_loss", True)
        rep.use(key, "liger_kernel", True)
    else:
        rep.ignore(key)


def _loss_type(rep: Report, key: str, value: object, st: JsonObject) -> None:
    st["loss_type"] = value
    if value == "chunked_nll":
        rep.use(key, "chunked_loss", True)
    elif value in ("nll", "dft"):
        rep.use(key, "chunked_loss", False)
    else:
        rep.unknown(key)


def _fsdp_config(rep: Report, key: str, value: object, st: JsonObject) -> None:
    if isinstance(value, dict):
        sections.fsdp_section(rep, value, key + ".")
    else:
        rep.unknown(key, "fsdp_config_file_not_read")


def _use_peft(rep: Report, key: str, value: object, st: JsonObject) -> None:
    st["use_peft"] = common.flag(rep, key, value, "method")
    rep.mark_used(key, ["method"])


def _target_modules(rep: Report, path: str, value: object, st: JsonObject) -> None:
    st["targets_key"] = (path, value)  # checked against the model once it is known


LORA_CONFIG: dict[str, keys.Key] = {
    **{name: keys.ignored() for name in sorted(_LORA_CONFIG_IGNORED)},
    "r": keys.whole("lora_rank"),
    "lora_dropout": keys.call(hf.set_dropout, "lora_dropout"),
    "target_modules": keys.Key(_target_modules, ("lora_targets",)),
    "modules_to_save": keys.call(hf.set_modules_to_save, "lora_modules_to_save"),
    **{name: keys.not_modelled() for name in ("use_dora", "layers_to_transform", "rank_pattern")},
}
"""peft ``LoraConfig`` keys (``peft_config`` / ``lora_config``, peft 0.21.0)."""


def _peft_config(rep: Report, key: str, value: object, st: JsonObject) -> None:
    """A ``LoraConfig`` given inline: LoRA (or QLoRA with 4-bit loading), read by :data:`LORA_CONFIG`."""
    if isinstance(value, dict):
        st["use_peft"] = True
        keys.read_keys(rep, value, LORA_CONFIG, st, key + ".")
    else:
        rep.unknown(key)


# TrainingArguments / SFTConfig / ModelConfig keys that change memory or time
TRAINING_ARGS: dict[str, keys.Key] = {
    "per_device_train_batch_size": keys.whole("micro_batch_size"),
    "gradient_accumulation_steps": keys.whole("gradient_accumulation_steps"),
    "max_length": keys.Key(_max_length, ("seq_len",)),
    "max_seq_length": keys.Key(_max_length, ("seq_len",), "the name before TRL 0.20"),
    "packing": keys.Key(hf.read_packing, ("batching",), "packed sequences fill seq_len"),
    "padding_free": keys.Key(hf.read_padding_free, ("batching",)),
    "packing_strategy": keys.Key(_packing_strategy, ("packed_attention",)),
    "group_by_length": keys.Key(hf.read_group_by_length),
    "max_grad_norm": keys.Key(hf.read_max_grad_norm, ("gradient_clipping",)),
    "optim": keys.call(common.set_optimizer_hf, "optimizer", "optimizer_fused"),
    "gradient_checkpointing": keys.boolean("gradient_checkpointing"),
    "gradient_checkpointing_kwargs": keys.section(hf.CHECKPOINTING_KWARGS, otherwise="ignored"),
    "bf16": keys.Key(_precision_flag, ("precision",)),
    "fp16": keys.Key(_precision_flag, ("precision",)),
    "tf32": keys.Key(_tf32, ("tf32",)),
    "dtype": keys.Key(_dtype, ("precision",)),
    "torch_dtype": keys.Key(_dtype, ("precision",)),
    "attn_implementation": keys.Key(_attention, ("attention",)),
    "use_liger_kernel": keys.Key(_liger, ("chunked_loss", "liger_kernel")),
    "loss_type": keys.Key(_loss_type, ("chunked_loss",)),
    "activation_offloading": keys.boolean("activation_offload"),
    "torch_compile": keys.boolean("torch_compile"),
    "num_train_epochs": keys.call(hf.set_epochs, "epochs"),
    # evaluations and saves (calc.run_phases), settled by hf.finish_run_phases
    "save_strategy": keys.Key(hf.read_phase_strategy, ("save_steps",)),
    "save_steps": keys.Key(hf.read_phase_steps, ("save_steps",)),
    "eval_strategy": keys.Key(hf.read_phase_strategy, ("eval_steps",)),
    "evaluation_strategy": keys.Key(
        hf.read_phase_strategy, ("eval_steps",), "the name before transformers 4.46"
    ),
    "eval_steps": keys.Key(hf.read_phase_steps, ("eval_steps",)),
    "ddp_bucket_cap_mb": keys.Key(hf.read_bucket_cap, ("gradient_bucket_mb",)),
    "per_device_eval_batch_size": hf.plan_int("eval_batch_size"),
    "save_total_limit": hf.plan_int("save_total_limit"),
    "eval_on_start": hf.plan_flag("eval_on_start"),
    "save_only_model": hf.plan_flag("save_only_model"),
    "max_steps": keys.Key(hf.read_max_steps, ("max_steps", "dataset_tokens")),
    "deepspeed": keys.Key(
        lambda rep, key, value, st: hf.deepspeed_value(rep, key, value, st.get("read_file")),
        common.DEEPSPEED_FIELDS,
        table=sections.DEEPSPEED,
    ),
    "fsdp": keys.call(common.fsdp_trainer_option, "sharding", "cpu_offload"),
    "fsdp_config": keys.Key(_fsdp_config, sections.FSDP_FIELDS, table=sections.FSDP),
    "use_peft": keys.Key(_use_peft, ("method",)),
    "lora_r": keys.whole("lora_rank"),
    "lora_dropout": keys.call(hf.set_dropout, "lora_dropout"),
    "lora_modules_to_save": keys.call(hf.set_modules_to_save, "lora_modules_to_save"),
    "lora_target_modules": keys.Key(hf.read_targets, ("lora_targets",)),
    "load_in_4bit": keys.Key(hf.read_load_in, ("method",)),
    "load_in_8bit": keys.Key(hf.read_load_in, ("method",), "int8 base weights not modelled"),
    "use_bnb_nested_quant": keys.boolean("qlora_double_quant"),
    "peft_config": keys.Key(
        _peft_config, ("method", "lora_rank", "lora_dropout", "lora_targets"), table=LORA_CONFIG
    ),
    "lora_config": keys.Key(
        _peft_config, ("method", "lora_rank", "lora_dropout", "lora_targets"), table=LORA_CONFIG
    ),
    "quantization_config": keys.section(hf.BNB_WITH_METHOD, ("method", "qlora_double_quant")),
    "bnb_config": keys.section(hf.BNB_WITH_METHOD, ("method", "qlora_double_quant")),
}


def training_arg(
    rep: Report, st: JsonObject, key: str, value: object, read_file: common.ReadFile | None = None
) -> bool:
    """One key of TrainingArguments / SFTConfig / ModelConfig (:data:`TRAINING_ARGS`); False
    when not one of them."""
    spec = TRAINING_ARGS.get(key)
    if spec is None:
        return False
    st["read_file"] = read_file
    spec.read(rep, key, value, st)
    return True


_DTYPES = ("auto", "bfloat16", "float16", "float32", "bf16", "fp16", "fp32")


def _precision(st: JsonObject, sft: bool) -> str:
    """16-bit autocast over weights of the loading dtype: bf16 weights give bf16 states
    ("-true"); fp32 weights keep fp32 master copies ("-mixed"). The loading dtype, when the
    file names none: TRL 1.9.0 ``ModelConfig.dtype`` "float32" for ``trl sft``; for a plain
    ``TrainingArguments`` file, transformers 5.17.0 ``from_pretrained``'s "auto" (the
    checkpoint's dtype, bf16 for the presets)."""
    fp16 = common.is_true(st.get("fp16"))
    bf16 = st.get("bf16")
    bf16 = (not fp16) if bf16 is None and sft else common.is_true(bf16)
    dtype = str(st.get("dtype") or ("float32" if sft else "auto")).lower().replace("torch.", "")
    if fp16:
        return "fp16-mixed"
    if dtype in ("bfloat16", "bf16", "auto"):
        return "bf16-true"
    return "bf16-mixed" if bf16 else "fp32"
