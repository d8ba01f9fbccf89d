"""axolotl YAML -> request. Keys and defaults read from axolotl 0.18.0
(``src/axolotl/utils/schemas/{config,training,peft,fsdp}.py``, commit 067b021, July 2026):
``micro_batch_size`` 1, ``gradient_accumulation_steps`` 1, ``sequence_len`` 512,
``optimizer`` "adamw_torch_fused", ``gradient_checkpointing`` false, ``bf16`` "auto"
(bf16 on Ampere and newer), ``tf32`` "auto", ``adapter`` none (full fine-tuning),
``lora_dropout`` 0.0, ``load_in_4bit``/``load_in_8bit`` false, ``num_epochs`` 1.0,
4-bit double quantization on (``loaders/model.py`` sets ``bnb_4bit_use_double_quant``
true). ``lora_r`` has no axolotl default and goes to peft's ``LoraConfig.r`` = 8
(peft 0.21.0); no target list and no ``lora_target_linear`` leaves the choice to peft's
per-model table (:mod:`calc.config_import.hf`).
"""

from __future__ import annotations

from ..jsontypes import JsonObject
from . import common, hf, keys, sections
from .models import resolve_model
from .report import Report

TOOL = "axolotl 0.18.0"

IGNORED = {
    "base_model_config",
    "base_model_ignore_patterns",
    "revision_of_model",
    "tokenizer_config",
    "model_type",
    "tokenizer_type",
    "tokenizer_use_fast",
    "tokenizer_legacy",
    "trust_remote_code",
    "is_llama_derived_model",
    "is_mistral_derived_model",
    "is_qwen_derived_model",
    "is_falcon_derived_model",
    "strict",
    "datasets",
    "dataset_prepared_path",
    "push_dataset_to_hub",
    "dataset_processes",
    "dataset_num_proc",
    "shuffle_merged_datasets",
    "chat_template",
    "chat_template_jinja",
    "default_system_message",
    "special_tokens",
    "tokens",
    "added_tokens_overrides",
    "train_on_inputs",
    "output_dir",
    "hub_model_id",
    "hub_strategy",
    "hf_use_auth_token",
    "wandb_project",
    "wandb_entity",
    "wandb_name",
    "wandb_watch",
    "wandb_log_model",
    "wandb_run_id",
    "mlflow_tracking_uri",
    "mlflow_experiment_name",
    "use_wandb",
    "use_mlflow",
    "comet_project_name",
    "use_tensorboard",
    "learning_rate",
    "lr_scheduler",
    "lr_scheduler_kwargs",
    "cosine_min_lr_ratio",
    "lr_div_factor",
    "warmup_steps",
    "warmup_ratio",
    "weight_decay",
    "adam_beta1",
    "adam_beta2",
    "adam_epsilon",
    "optim_args",
    "logging_steps",
    "save_safetensors",
    "save_first_step",
    "eval_table_size",
    "eval_max_new_tokens",
    "do_causal_lm_eval",
    "eval_causal_lm_metrics",
    "early_stopping_patience",
    "resume_from_checkpoint",
    "auto_resume_from_checkpoints",
    "local_rank",
    "seed",
    "debug",
    "logging_dir",
    "loss_watchdog_threshold",
    "loss_watchdog_patience",
    "gc_steps",
    "ddp_timeout",
    "ddp_bucket_cap_mb",
    "ddp_broadcast_buffers",
    "ddp_find_unused_parameters",
    "dataloader_pin_memory",
    "dataloader_num_workers",
    "dataloader_prefetch_factor",
    "dataloader_drop_last",
    "eval_sample_packing",
    "sample_packing_eff_est",
    "sample_packing_group_size",
    "sample_packing_bin_size",
    "sample_packing_sequentially",
    "remove_unused_columns",
    "lora_alpha",
    "lora_fan_in_fan_out",
    "lora_model_dir",
    "peft_use_rslora",
    "loraplus_lr_ratio",
    "loraplus_lr_embedding",
    "merge_lora",
    "plugins",
    "neftune_noise_alpha",
    "flash_attn_cross_entropy",
    "flash_attn_rms_norm",
    "flash_attn_fuse_qkv",
    "flash_attn_fuse_mlp",
    "liger_use_token_scaling",
    "excess_length_strategy",
    "min_sample_len",
    "skip_prepare_dataset",
    "embeddings_skip_upcast",
    "train_on_eos",
    "unfrozen_parameters",
    "max_memory",
    "gpu_memory_limit",
    "device_map",
    "torch_compile_backend",
    "torch_compile_mode",
    "auto_find_batch_size",
    "include_tokens_per_second",
    "profiler_steps",
    "xformers_attention_kernel",
    "torchdistx_path",
    "pretraining_dataset",
    "streaming",
    "shuffle_before_merging_datasets",
    "sequence_len_overflow_handling",
    "deepcompile",
    "fp8_enable_fsdp_float8_all_gather",
    "fsdp_final_state_dict_type",
    "save_steps_ratio",
}
# understood, but what they change is not in the model (listed as unknown + not_modelled)
NOT_MODELLED = {
    "peft_use_dora",
    "lora_mlp_kernel",
    "lora_qkv_kernel",
    "lora_o_kernel",
    "lora_embedding_kernel",
    "liger_rms_norm_gated",
    "liger_layer_norm",
    "unsloth_lora_mlp",
    "unsloth_lora_qkv",
    "unsloth_lora_o",
    "unsloth_rms_norm",
    "unsloth_rope",
    "tiled_mlp",
    "tiled_mlp_num_shards",
    "selective_checkpointing",
    "layer_offloading",
    "fp8",
    "gptq",
    "relora",
    "relora_steps",
    "lora_target_parameters",
    "lora_rank_pattern",
    "lora_alpha_pattern",
    "sequence_parallel_degree",
    "context_parallel_size",
    "tensor_parallel_size",
    "fp32_norms",
    "s2_attention",
    "chunked_cross_entropy_num_chunks",
}
# chunked or fused loss kernels that never build the full logits tensor
CHUNKED_LOSS = {
    "cut_cross_entropy",
    "liger_fused_linear_cross_entropy",
    "chunked_cross_entropy",
    "unsloth_cross_entropy_loss",
    "liger_cross_entropy",
}


LIGER_MODULE_KEYS = ("liger_rope", "liger_rms_norm", "liger_glu_activation", "liger_swiglu")
"""The Liger plugin's switches of the modules calc's ``liger_kernel`` turns on together
(``liger_swiglu``: the deprecated name of ``liger_glu_activation``); settled by
:func:`_finish_liger`."""


def _liger_module(rep: Report, key: str, value: object, st: JsonObject) -> None:
    on = common.flag(rep, key, value)
    if on is None or isinstance(on, bool):
        st.setdefault("liger", {})[key] = on


def _finish_liger(rep: Report, st: JsonObject, data: JsonObject) -> None:
    """axolotl's Liger plugin (``integrations/liger/plugin.py`` ``LigerPlugin.pre_model_load``,
    at 8fcba967; its keys in ``args.py`` at 1ed35178, each ``None`` unless set) hands each
    switch to liger-kernel's apply function of the model's family (``rope``, ``rms_norm``,
    ``swiglu`` or ``geglu`` from ``liger_glu_activation``): a module not switched on keeps
    transformers' code. calc's ``liger_kernel`` is the three together, so the keys set it only
    when the plugin is listed in ``plugins`` and all three are on (the fused loss is
    ``liger_fused_linear_cross_entropy``, read as ``chunked_loss``); otherwise each key set is
    reported as not modelled (``liger_modules_partial``, or ``liger_plugin_not_loaded`` without
    the plugin, whose keys then do nothing)."""
    flags = st.get("liger")
    if not flags:
        return
    plugins = data.get("plugins")
    loaded = isinstance(plugins, list) and any(
        isinstance(p, str) and p.rsplit(".", 1)[-1] == "LigerPlugin" for p in plugins
    )
    glu = flags.get("liger_glu_activation")
    if glu is None:
        glu = flags.get("liger_swiglu")
    if loaded and flags.get("liger_rope") and flags.get("liger_rms_norm") and glu:
        for key in flags:
            rep.use(key, "liger_kernel", True)
        return
    note = "liger_modules_partial" if loaded else "liger_plugin_not_loaded"
    for key, on in flags.items():
        if on is None:
            rep.ignore(key, "not_set")
        else:
            rep.unknown(key, note)


def _adapter(rep: Report, key: str, value: object, st: JsonObject) -> None:
    if value in ("lora", "qlora"):
        st["adapter"] = value
        rep.mark_used(key, ["method"])
    elif value in (None, ""):
        rep.mark_used(key, ["method"])
    elif isinstance(value, str):
        rep.unknown(key, "adapter_not_modelled")
    else:
        rep.invalid(key, value, "not_allowed", {"allowed": ["lora", "qlora", None]}, "method")


def _autocast_adapter(rep: Report, key: str, value: object, st: JsonObject) -> None:
    if value is None:
        rep.ignore(key)
    else:
        upcast = common.flag(rep, key, value, "lora_adapter_dtype")
        rep.use(key, "lora_adapter_dtype", "fp32" if upcast else "base")


def _target_linear(rep: Report, key: str, value: object, st: JsonObject) -> None:
    if common.flag(rep, key, value, "lora_targets") is True:
        st["targets_key"] = (key, "all-linear")
    else:
        rep.ignore(key)


def _precision_flag(rep: Report, key: str, value: object, st: JsonObject) -> None:
    # bf16: true, false or "auto"; "full" also reads as bf16 weights (axolotl's ``bf16: full``
    # examples)
    also = {"bf16": ("auto", "full")}.get(key, ())
    st[key] = common.flag(rep, key, value, "precision", also)
    rep.mark_used(key, ["precision"])


def _tf32(rep: Report, key: str, value: object, st: JsonObject) -> None:
    # true, false or "auto", which axolotl turns into TF32 wherever the card has it; calc's
    # tf32 changes nothing on a card without (calc.timing.fp32_matmul_time)
    flagged = common.flag(rep, key, value, "tf32", ("auto",))
    rep.use(key, "tf32", None if flagged is None else flagged in (True, "auto"))


def _checkpointing(rep: Report, key: str, value: object, st: JsonObject) -> None:
    if value in ("offload", "offload_disk"):
        rep.use(key, "gradient_checkpointing", True)
        rep.use(
            key,
            "activation_offload",
            True,
            "disk_counted_as_cpu" if value == "offload_disk" else None,
        )
    else:
        rep.use(
            key,
            "gradient_checkpointing",
            common.flag(rep, key, value, "gradient_checkpointing", ("offload", "offload_disk")),
        )


def _activation_offloading(rep: Report, key: str, value: object, st: JsonObject) -> None:
    offload = (
        False
        if value is None
        else common.flag(rep, key, value, "activation_offload", ("legacy", "disk"))
    )
    if offload is not None:
        rep.use(key, "activation_offload", offload is not False)


def _batch_size(rep: Report, key: str, value: object, st: JsonObject) -> None:
    # accumulation = batch_size / micro_batch_size, once both are read
    st["batch_size"] = common.integer(rep, key, value, "gradient_accumulation_steps", maximum=2**62)


def _pad_to_sequence_len(rep: Report, key: str, value: object, st: JsonObject) -> None:
    st["pad_to_sequence_len"] = (key, common.flag(rep, key, value, "batching"))  # packing decides


def _attention_switch(name: str) -> keys.Key:
    """``flash_attention: true`` and the like: ``name`` when on."""

    def read(rep: Report, key: str, value: object, st: JsonObject) -> None:
        if common.flag(rep, key, value, "attention") is True:
            common.set_attention(rep, key, name)
        else:
            rep.ignore(key)

    return keys.Key(read, ("attention",))


def _attention_not_modelled(rep: Report, key: str, value: object, st: JsonObject) -> None:
    if common.flag(rep, key, value, "attention") is True:
        rep.unknown(key, "attention_not_modelled")
    else:
        rep.ignore(key)


def _chunked_loss(rep: Report, key: str, value: object, st: JsonObject) -> None:
    chunked = common.flag(rep, key, value, "chunked_loss")
    rep.use(key, "chunked_loss", True) if chunked is True else rep.ignore(key)


def _fsdp_version(rep: Report, key: str, value: object, st: JsonObject) -> None:
    # fsdp_section reads the version for the FSDP config (FSDP2: fsdp_fully_shard)
    two = (common.positive_int(value) or 1) >= 2
    rep.mark_used(key, ["sharding", "fsdp_fully_shard"] if two else ["sharding"])


def _torch_compile(rep: Report, key: str, value: object, st: JsonObject) -> None:
    compile_ = common.flag(rep, key, value, "torch_compile", ("auto",))
    if isinstance(compile_, bool):
        rep.use(key, "torch_compile", compile_)
    elif compile_ == "auto":
        rep.unknown(key, "auto_depends_on_torch_version")


def _per_epoch(rep: Report, key: str, value: object, st: JsonObject) -> None:
    """``saves_per_epoch`` / ``evals_per_epoch``: read once the epochs are known
    (:func:`_finish_run_phases`)."""
    if value is None:
        rep.ignore(key, "not_set")
        return
    count = common.integer(rep, key, value, key)
    if count is not None:
        st[key] = count


def _eval_set(rep: Report, key: str, value: object, st: JsonObject) -> None:
    """``val_set_size`` / ``test_datasets``: whether the run has an evaluation set at all
    (axolotl evaluates nothing without one); they set no calc field of their own."""
    if key == "val_set_size":
        size = common.number(rep, key, value, key, 0.0) if value is not None else 0.0
        st["has_eval_set"] = st.get("has_eval_set", False) or bool(size)
    else:
        st["has_eval_set"] = st.get("has_eval_set", False) or bool(value)
    rep.ignore(key, "evaluation_set_decides_evaluations")


KEYS: dict[str, keys.Key] = {
    # listed first: an explicit entry below overrides them
    **{name: keys.ignored() for name in sorted(IGNORED)},
    **{name: keys.not_modelled() for name in sorted(NOT_MODELLED)},
    "base_model": keys.Key(
        lambda rep, key, value, st: None, ("model",), "read first: the model's shapes"
    ),
    "adapter": keys.Key(_adapter, ("method",)),
    "load_in_4bit": keys.Key(hf.read_load_in, ("method",)),
    "load_in_8bit": keys.Key(hf.read_load_in, ("method",), "int8 base weights not modelled"),
    "peft_autocast_adapter_dtype": keys.Key(_autocast_adapter, ("lora_adapter_dtype",)),
    "lora_modules_to_save": keys.call(hf.set_modules_to_save, "lora_modules_to_save"),
    "lora_r": keys.whole("lora_rank"),
    "lora_dropout": keys.call(hf.set_dropout, "lora_dropout"),
    "lora_target_modules": keys.Key(hf.read_targets, ("lora_targets",)),
    "lora_target_linear": keys.Key(_target_linear, ("lora_targets",)),
    "bnb_config_kwargs": keys.section(hf.BNB, ("qlora_double_quant",)),
    **{
        name: keys.Key(_precision_flag, ("precision",))
        for name in ("bf16", "fp16", "bfloat16", "float16", "float32")
    },
    "tf32": keys.Key(_tf32, ("tf32",)),
    "gradient_checkpointing": keys.Key(
        _checkpointing, ("gradient_checkpointing", "activation_offload")
    ),
    "gradient_checkpointing_kwargs": keys.section(hf.CHECKPOINTING_KWARGS),
    "activation_offloading": keys.Key(_activation_offloading, ("activation_offload",)),
    "micro_batch_size": keys.whole("micro_batch_size"),
    "gradient_accumulation_steps": keys.whole("gradient_accumulation_steps"),
    "batch_size": keys.Key(_batch_size, ("gradient_accumulation_steps",)),
    "sequence_len": keys.whole("seq_len"),
    "sample_packing": keys.Key(hf.read_packing, ("batching",), "packed sequences fill seq_len"),
    "pad_to_sequence_len": keys.Key(_pad_to_sequence_len, ("batching",)),
    "group_by_length": keys.Key(hf.read_group_by_length),
    "max_grad_norm": keys.Key(hf.read_max_grad_norm, ("gradient_clipping",)),
    "flash_attention": _attention_switch("flash"),
    "sdp_attention": _attention_switch("sdpa"),
    "eager_attention": _attention_switch("eager"),
    **{
        name: keys.Key(_attention_not_modelled)
        for name in ("xformers_attention", "flex_attention", "sage_attention")
    },
    "attn_implementation": keys.call(common.set_attention, "attention"),
    **{name: keys.Key(_chunked_loss, ("chunked_loss",)) for name in sorted(CHUNKED_LOSS)},
    **{name: keys.Key(_liger_module, ("liger_kernel",)) for name in LIGER_MODULE_KEYS},
    "optimizer": keys.call(common.set_optimizer_hf, "optimizer", "optimizer_fused"),
    "deepspeed": keys.Key(
        lambda rep, key, value, st: hf.deepspeed_value(rep, key, value, st["read_file"]),
        common.DEEPSPEED_FIELDS,
        table=sections.DEEPSPEED,
    ),
    "fsdp": keys.call(common.fsdp_trainer_option, "sharding", "cpu_offload"),
    "fsdp_config": keys.dict_only(
        lambda rep, key, value, st: sections.fsdp_section(
            rep, value, key + ".", version=st["fsdp_version"]
        ),
        *sections.FSDP_FIELDS,
        table=sections.FSDP,
    ),
    "fsdp_version": keys.Key(_fsdp_version, ("sharding", "fsdp_fully_shard")),
    "torch_compile": keys.Key(_torch_compile, ("torch_compile",)),
    "num_epochs": keys.call(hf.set_epochs, "epochs"),
    "max_steps": keys.Key(hf.read_max_steps, ("max_steps", "dataset_tokens")),
    # evaluations and saves (calc.run_phases), settled by _finish_run_phases
    "save_strategy": keys.Key(hf.read_phase_strategy, ("save_steps",)),
    "save_steps": keys.Key(hf.read_phase_steps, ("save_steps",)),
    "saves_per_epoch": keys.Key(_per_epoch, ("save_steps",)),
    "eval_strategy": keys.Key(hf.read_phase_strategy, ("eval_steps",)),
    "eval_steps": keys.Key(hf.read_phase_steps, ("eval_steps",)),
    "evals_per_epoch": keys.Key(_per_epoch, ("eval_steps",)),
    "val_set_size": keys.Key(_eval_set, ("eval_steps",)),
    "test_datasets": keys.Key(_eval_set, ("eval_steps",)),
    "eval_batch_size": hf.plan_int("eval_batch_size"),
    # 0 or none: axolotl's "not set" (4 kept, _finish_run_phases)
    "save_total_limit": hf.plan_int("save_total_limit", unset=(None, 0, False)),
    "save_only_model": hf.plan_flag("save_only_model"),
}


def _finish_run_phases(rep: Report, st: JsonObject, data: JsonObject) -> None:
    """Saves and evaluations as axolotl 0.18.0 hands them to the Trainer:
    ``utils/config/__init__.py`` turns ``saves_per_epoch`` / ``evals_per_epoch`` into the
    share ``1 / (per_epoch x num_epochs)`` of the steps when it is below 1;
    ``core/builders/base.py`` ``_configure_save_and_eval_strategy``: a ``save_steps`` means
    the ``steps`` strategy whatever ``save_strategy`` says, no strategy means a save each
    epoch, and ``save_total_limit`` is 4 unless set; without an evaluation set
    (``val_set_size`` 0 and no ``test_datasets``) nothing is evaluated, else ``eval_steps``
    (or ``evals_per_epoch``) means ``steps`` and any evaluation also runs once at the start
    (``eval_on_start``)."""
    epochs = rep.plan.get("epochs", 1.0)
    assert isinstance(epochs, (int, float))
    for kind in ("save", "eval"):
        per = st.get(kind + "s_per_epoch")
        if per is not None:
            share = 1.0 / (per * epochs)
            if share < 1.0 and kind + "_steps" not in st:
                st[kind + "_steps"] = (kind + "s_per_epoch", share)
            else:
                rep.ignore(kind + "s_per_epoch", "steps_given_or_more_than_the_run")
        if kind + "_steps" in st:
            key = st.get(kind + "_strategy", (None, None))[0]
            if key is not None and st[kind + "_strategy"][1] != "steps":
                rep.ignore(key, "steps_given")
            st[kind + "_strategy"] = (None, "steps")
    evaluating = st.get("has_eval_set", False)
    if not evaluating:
        for key in ("eval_steps", "evals_per_epoch", "eval_strategy"):
            if key in data and key in st:
                rep.ignore(key, "no_evaluation_set")
        st.pop("eval_steps", None)
        st["eval_strategy"] = (None, "no")
    elif "eval_strategy" in st and st["eval_strategy"][1] != "no":
        rep.default("eval_on_start", True, TOOL + " core/builders/base.py", plan=True)
    hf.finish_run_phases(rep, st, TOOL, save_default="epoch", total_limit=4)


def import_axolotl(
    data: JsonObject, model: object = None, read_file: common.ReadFile | None = None
) -> JsonObject:
    rep = Report("axolotl", TOOL)
    st: JsonObject = {}
    arch = None
    if "base_model" in data:
        arch = resolve_model(rep, "base_model", data["base_model"], model)
    elif model is not None:
        arch = resolve_model(rep, "(model)", None, model)
    st["read_file"] = read_file
    st["fsdp_version"] = data.get("fsdp_version")  # read by fsdp_config wherever it stands
    keys.read_keys(rep, data, KEYS, st)

    # method: adapter + 4-bit loading (axolotl's "qlora" adapter loads in 4 bits)
    peft = st.get("adapter")
    if peft is not None:
        method = "qlora" if peft == "qlora" or st.get("load_in_4bit") else "lora"
    else:
        method = "full"
    if "adapter" in data or st.get("load_in_4bit") is not None:
        rep.request["method"] = method
    else:
        rep.default("method", "full", TOOL + ": no adapter = full fine-tuning")
    if st.get("batch_size") and "gradient_accumulation_steps" not in data:
        micro = rep.request.get("micro_batch_size", 1)
        if st["batch_size"] % micro == 0:
            rep.use("batch_size", "gradient_accumulation_steps", st["batch_size"] // micro)
        else:
            rep.unknown("batch_size", "not_a_multiple_of_micro_batch_size")
    elif "batch_size" in data:
        rep.ignore("batch_size", "gradient_accumulation_steps_given")
    precision = _precision(st)
    if precision is not None:
        rep.request.setdefault("precision", precision)
    else:
        rep.default("precision", "bf16-true", TOOL + ": bf16 auto (bf16 on Ampere and newer)")
    if rep.request.get("method") != "full" or method != "full":
        hf.finish_targets(rep, st.get("targets_key"), arch, TOOL)
        rep.default("lora_rank", 8, "peft 0.21.0 LoraConfig.r (axolotl 0.18.0 sets none)")
        rep.default("lora_dropout", 0.0, TOOL)
        hf.adapter_dtype_default(
            rep, True, "peft 0.21.0 autocast_adapter_dtype (axolotl 0.18.0 leaves it on)"
        )
        if method == "qlora":
            rep.default("qlora_double_quant", True, TOOL + " loaders/model.py")
    rep.default("micro_batch_size", 1, TOOL)
    rep.default("gradient_accumulation_steps", 1, TOOL)
    rep.default("seq_len", 512, TOOL)
    rep.default("optimizer", "adamw", TOOL + ": adamw_torch_fused")
    rep.default("optimizer_fused", True, TOOL + ": adamw_torch_fused")
    rep.default("gradient_checkpointing", False, TOOL)
    rep.default("attention", "sdpa", "transformers 5.17.0: sdpa when no attention is chosen")
    _finish_padding(rep, st)
    _finish_liger(rep, st, data)
    hf.finish_common(rep, st, TOOL, packing=st.get("packing", False))
    _finish_run_phases(rep, st, data)
    hf.set_framework(rep, "axolotl")
    return rep.result()


def _finish_padding(rep: Report, st: JsonObject) -> None:
    """``pad_to_sequence_len``: every sample padded to ``sequence_len`` (``pad-max``); packed
    rows are full anyway."""
    entry = st.get("pad_to_sequence_len")
    if entry is None or entry[1] is None:
        return
    key, flag = entry
    if st.get("packing"):
        rep.ignore(key, "packing_fills_seq_len")
    elif flag:
        rep.use(key, "batching", "pad-max")
    else:
        rep.ignore(key)


def _precision(st: JsonObject) -> str | None:
    if common.is_true(st.get("fp16")) or common.is_true(st.get("float16")):
        return "fp16-mixed"
    if st.get("bf16") in (True, "auto", "full") or common.is_true(st.get("bfloat16")):
        return "bf16-true"  # axolotl loads the weights in bf16, so states are bf16 too
    if st.get("bf16") is False or common.is_true(st.get("float32")):
        return "fp32"
    return None
