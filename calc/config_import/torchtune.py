"""torchtune recipe YAML -> request. Keys and defaults read from torchtune 0.7.0
(``recipes/configs/*``, ``recipes/{lora,full}_finetune_{single_device,distributed}.py``,
commit bd2a0fc): ``compile`` false, ``optimizer_in_bwd`` false, ``fsdp_cpu_offload`` false,
``fsdp_reshard_after_forward`` true, ``enable_activation_offloading`` false,
``gradient_accumulation_steps`` 1, ``epochs`` 1; ``dtype`` missing is fp32
(``training.get_dtype(None)``); ``tokenizer.max_seq_len: null`` truncates nothing, so the
sequence length then falls back to calc's own default, named as such.

The model comes from the builder (``torchtune.models.llama3_1.qlora_llama3_1_8b``:
preset llama-3.1-8b, QLoRA). torchtune's module names map to Hugging Face's
(``output_proj`` -> ``o_proj``; ``apply_lora_to_mlp`` -> gate/up/down). Whether a recipe
is distributed is not in its file; ``fsdp_*`` keys, or a ``--num-gpus`` given with the
import, make it FSDP2 (``reshard_after_forward`` true = ZeRO-3-like), with gradients
reduce-scattered every micro-batch as torchtune's recipes do.
"""

from __future__ import annotations

from ..arch import ModelArch
from ..jsontypes import JsonObject
from . import common, hf, keys
from .models import arch_of, torchtune_builder
from .report import Report

TOOL = "torchtune 0.7.0"

IGNORED = {
    "output_dir",
    "checkpointer",
    "resume_from_checkpoint",
    "save_adapter_weights_only",
    "seed",
    "shuffle",
    "lr_scheduler",
    "metric_logger",
    "log_every_n_steps",
    "log_peak_memory_stats",
    "log_level",
    "profiler",
    "low_cpu_ram",
    "device",
    "batch_size_val",
    "run_val_every_n_steps",
    "dataset_val",
    "collate_fn",
    "cudnn_deterministic_mode",
    "enable_async_checkpointing",
    "custom_sharded_layers",
    "resize_token_embeddings",
    "enable_kv_cache",
    "data_parallel_replicate_dim",
}
NOT_MODELLED = {
    "enable_fp8_training",
    "fp8_recipe_name",
    "tensor_parallel_dim",
    "tensor_parallel_plan",
    "context_parallel_dim",
}
CHUNKED_LOSSES = {
    "torchtune.modules.loss.LinearCrossEntropyLoss",
    "torchtune.modules.loss.CEWithChunkedOutputLoss",
    "torchtune.modules.loss.ChunkedCrossEntropyLoss",
}
PLAIN_LOSSES = {"torch.nn.CrossEntropyLoss"}
_MODEL_IGNORED = {"lora_alpha", "use_dora_magnitude", "max_seq_len"}


def _max_seq_len(rep: Report, path: str, value: object, st: JsonObject) -> None:
    if value is None:
        rep.unknown(path, "no_truncation_length")
    else:
        common.set_int(rep, path, "seq_len", value)


def _packed(rep: Report, path: str, value: object, st: JsonObject) -> None:
    st["packing"] = common.flag(rep, path, value, "batching")
    if st["packing"]:  # PackedDataset rows of max_seq_len tokens
        rep.use(path, "batching", "packed", "packing_fills_seq_len")
    else:
        rep.ignore(path)


def _epochs(rep: Report, path: str, value: object, st: JsonObject) -> None:
    epochs = common.integer(rep, path, value, "epochs", maximum=2**62)  # range(epochs)
    if epochs is not None:
        rep.use_plan(path, "epochs", epochs)


def _max_steps(rep: Report, path: str, value: object, st: JsonObject) -> None:
    if value is None:
        rep.ignore(path)
    else:
        st["max_steps"] = common.integer(rep, path, value, "dataset_tokens", maximum=2**62)


def _loss_component(rep: Report, path: str, value: object, st: JsonObject) -> None:
    if not isinstance(value, str):  # a list or a mapping names no loss
        rep.unknown(path)
    elif value in CHUNKED_LOSSES:
        rep.use(path, "chunked_loss", True)
    elif value in PLAIN_LOSSES:
        rep.use(path, "chunked_loss", False)
    else:
        rep.unknown(path)


def _clip_grad_norm(rep: Report, key: str, value: object, st: JsonObject) -> None:
    """``clip_grad_norm``: the recipes clip when it is set (``clip_grad_norm_`` with that
    norm; ``"inf"`` only logs the norm but still takes its passes), not when it is null, the
    recipes' default (``cfg.get("clip_grad_norm", None)``)."""
    if value is None:
        rep.use(key, "gradient_clipping", False, "clip_grad_norm_null_no_clipping")
    elif value == "inf" or (isinstance(value, (int, float)) and not isinstance(value, bool)):
        rep.use(key, "gradient_clipping", True)
    else:
        common.number(rep, key, value, "gradient_clipping", 0.0, minimum_exclusive=True)


def _compile(rep: Report, path: str, value: object, st: JsonObject) -> None:
    # a dict of compile options compiles too
    rep.use(
        path,
        "torch_compile",
        True if isinstance(value, dict) else common.flag(rep, path, value, "torch_compile"),
    )


# -- model: the builder's arguments (the builder itself is read first, by _model) ------------------
def _lora_attn_modules(rep: Report, path: str, value: object, ctx: JsonObject) -> None:
    if isinstance(value, list):
        ctx["targets"] += [common.TORCHTUNE_TO_HF.get(str(v), str(v)) for v in value]
        rep.mark_used(path, ["lora_targets"])
    else:
        rep.unknown(path)


def _lora_to(names: list[str]) -> keys.Key:
    """``apply_lora_to_mlp`` / ``apply_lora_to_output``: ``names`` join the targets when true."""

    def read(rep: Report, path: str, value: object, ctx: JsonObject) -> None:
        if common.flag(rep, path, value, "lora_targets") is True:
            ctx["targets"] += names
        rep.mark_used(path, ["lora_targets"])

    return keys.Key(read, ("lora_targets",))


def _quantize_base(rep: Report, path: str, value: object, ctx: JsonObject) -> None:
    if common.flag(rep, path, value, "method") is not None:
        rep.mark_used(path, ["method"])


def _use_dora(rep: Report, path: str, value: object, ctx: JsonObject) -> None:
    if common.flag(rep, path, value) is True:
        rep.unknown(path, "not_modelled")
    else:
        rep.ignore(path)


MODEL: dict[str, keys.Key] = {
    **{name: keys.ignored() for name in sorted(_MODEL_IGNORED)},
    "_component_": keys.Key(
        lambda rep, path, value, ctx: None, ("model", "method"), "read first, by _model"
    ),
    "lora_attn_modules": keys.Key(
        _lora_attn_modules, ("lora_targets",), "torchtune names, as Hugging Face's"
    ),
    "apply_lora_to_mlp": _lora_to(["gate_proj", "down_proj", "up_proj"]),
    "apply_lora_to_output": _lora_to(["lm_head"]),
    "lora_rank": keys.whole("lora_rank"),
    "lora_dropout": keys.call(hf.set_dropout, "lora_dropout"),
    "quantize_base": keys.Key(
        _quantize_base, ("method",), "lora builders with quantize_base: QLoRA"
    ),
    "use_dora": keys.Key(_use_dora),
}
"""The ``model`` component's arguments (torchtune 0.7.0 builders); ``ctx["targets"]`` gathers
the LoRA targets they name."""


# -- optimizer ----------------------------------------------------------------------------------
def _optimizer_component(rep: Report, path: str, value: object, ctx: JsonObject) -> None:
    name = common.COMPONENT_OPTIMIZERS.get(str(value))
    momentum = (
        ctx["momentum"] if isinstance(ctx["momentum"], (int, float)) else 0
    )  # text: refused below
    if name == "sgd" and momentum > 0:
        name = "sgd-momentum"
    if name is None:
        rep.unknown(path, "optimizer_not_modelled")
    else:
        rep.use(path, "optimizer", name)


def _optimizer_fused(rep: Report, path: str, value: object, ctx: JsonObject) -> None:
    fused = common.flag(rep, path, value, "optimizer_fused")
    if ctx["component"] in ("torch.optim.AdamW", "torch.optim.Adam"):
        rep.use(path, "optimizer_fused", fused)
    else:
        rep.ignore(path)


def _momentum(rep: Report, path: str, value: object, ctx: JsonObject) -> None:
    if value is None or isinstance(value, (int, float)):
        rep.mark_used(path, ["optimizer"])
    else:  # torch.optim.SGD compares it with 0: text fails there
        rep.invalid(path, value, "not_a_number", {"type": "number", "minimum": 0.0}, "optimizer")


OPTIMIZER: dict[str, keys.Key] = {
    **{
        name: keys.ignored()
        for name in (
            "lr",
            "weight_decay",
            "betas",
            "eps",
            "amsgrad",
            "foreach",
            "nesterov",
            "optim_bits",
            "min_8bit_size",
            "percentile_clipping",
            "block_wise",
            "dampening",
        )
    },
    "_component_": keys.Key(
        _optimizer_component, ("optimizer",), "SGD with momentum > 0: sgd-momentum"
    ),
    "fused": keys.Key(_optimizer_fused, ("optimizer_fused",), "torch's AdamW / Adam only"),
    "momentum": keys.Key(_momentum, ("optimizer",)),
}
"""The ``optimizer`` component's arguments; ``ctx`` holds the component and its momentum."""


def _optimizer_section(rep: Report, path: str, value: object, st: JsonObject) -> None:
    if isinstance(value, dict):
        _optimizer(rep, value)
    else:
        rep.unknown(path)


KEYS: dict[str, keys.Key] = {
    # listed first: an explicit entry below overrides them
    **{name: keys.ignored() for name in sorted(IGNORED)},
    **{name: keys.not_modelled() for name in sorted(NOT_MODELLED)},
    "model": keys.Key(
        lambda rep, path, value, st: None,
        ("model", "method", "lora_targets", "lora_rank", "lora_dropout"),
        "read first (_model): the builder names the preset and the method",
        MODEL,
    ),
    "tokenizer": keys.section(
        {"max_seq_len": keys.Key(_max_seq_len, ("seq_len",))}, ("seq_len",), rest=keys.ignored()
    ),
    "dataset": keys.section(
        {"packed": keys.Key(_packed, ("batching",))},
        ("batching",),
        otherwise="ignored",
        rest=keys.ignored(),
    ),
    "batch_size": keys.whole("micro_batch_size"),
    "gradient_accumulation_steps": keys.whole("gradient_accumulation_steps"),
    "epochs": keys.Key(_epochs, ("epochs",), "a whole number: the recipes loop over range(epochs)"),
    "max_steps_per_epoch": keys.Key(
        _max_steps, ("dataset_tokens",), "tokens only over packed sequences"
    ),
    "optimizer": keys.Key(_optimizer_section, ("optimizer", "optimizer_fused"), table=OPTIMIZER),
    "optimizer_in_bwd": keys.boolean("optimizer_in_backward"),
    "clip_grad_norm": keys.Key(_clip_grad_norm, ("gradient_clipping",)),
    "loss": keys.section(
        {
            "_component_": keys.Key(_loss_component, ("chunked_loss",)),
            "num_output_chunks": keys.ignored(),
        },
        ("chunked_loss",),
    ),
    # torchtune 0.7.0 training.precision: fp16, bf16, fp32, fp64 (fp16 and fp64 not modelled)
    "dtype": keys.mapped("precision", {"bf16": "bf16-true", "fp32": "fp32"}, ("fp16", "fp64")),
    "enable_activation_checkpointing": keys.boolean("gradient_checkpointing"),
    # read together once every key is in (_selective_checkpointing)
    "ac_mode": keys.Key(
        lambda rep, path, value, st: st.__setitem__("ac_mode", value),
        ("gradient_checkpointing", "checkpointing_granularity", "checkpointing_every"),
        TOOL + " full_finetune_distributed.py / qat_distributed.py _setup_model",
    ),
    "ac_option": keys.Key(
        lambda rep, path, value, st: st.__setitem__("ac_option", value),
        ("checkpointing_granularity", "checkpointing_every"),
        TOOL + " training/activations.py checkpoint_wrapper",
    ),
    "enable_activation_offloading": keys.boolean("activation_offload"),
    "compile": keys.Key(_compile, ("torch_compile",)),
    "fsdp_cpu_offload": keys.state(
        "distributed", True, keys.boolean("cpu_offload", ("none", "optimizer+params"))
    ),
    "fsdp_reshard_after_forward": keys.state(
        "distributed", True, keys.boolean("sharding", ("zero2", "zero3"))
    ),
    "data_parallel_shard_dim": keys.state(
        "distributed",
        True,
        keys.Key(lambda rep, path, value, st: rep.mark_used(path, ["sharding"]), ("sharding",)),
    ),
}


def import_torchtune(
    data: JsonObject, model: object = None, read_file: common.ReadFile | None = None
) -> JsonObject:
    rep = Report("torchtune", TOOL)
    st: JsonObject = {}
    spec = data.get("model")
    if isinstance(spec, dict):
        _model(rep, spec, st, model)
    elif model is not None:
        rep.request["model"] = model
    if "model" in data and not isinstance(spec, dict):
        rep.unknown("model", "not_a_component")
    keys.read_keys(rep, data, KEYS, st)
    _selective_checkpointing(rep, data, st)

    if st.get("distributed"):
        rep.default("sharding", "zero3", TOOL + ": fsdp_reshard_after_forward true")
        rep.default("cpu_offload", "none", TOOL + ": fsdp_cpu_offload false")
        rep.request["sync_each_micro_batch"] = True
    if rep.request.get("method", "full") != "full":
        rep.default("lora_dropout", 0.0, TOOL + " lora builders")
    if rep.request.get("method") == "qlora":
        # torchao's NF4 quantizes the per-block scales to 8 bits too (double quantization)
        rep.default("qlora_double_quant", True, TOOL + ": torchao NF4Tensor")
    rep.default("seq_len", 2048, "calc default (no max_seq_len: torchtune truncates nothing)")
    rep.default("precision", "fp32", TOOL + ": training.get_dtype(None)")
    rep.default("micro_batch_size", 1, "calc default (torchtune's configs always set batch_size)")
    rep.default("gradient_accumulation_steps", 1, TOOL)
    rep.default("gradient_checkpointing", False, TOOL)
    rep.default("activation_offload", False, TOOL)
    rep.default("optimizer_in_backward", False, TOOL)
    rep.default("torch_compile", False, TOOL)
    rep.default("attention", "sdpa", TOOL + ": attention runs through SDPA")
    rep.default("chunked_loss", False, TOOL)
    steps = common.positive_int(st.get("max_steps"))
    if steps is not None:
        if st.get("packing"):
            req = rep.request
            tokens = (
                steps
                * req["micro_batch_size"]
                * req["gradient_accumulation_steps"]
                * req.get("num_gpus", 1)
                * req["seq_len"]
            )
            rep.use_plan(
                "max_steps_per_epoch", "dataset_tokens", tokens, "packed_sequences_fill_seq_len"
            )
        else:
            rep.unknown("max_steps_per_epoch", "dataset_tokens_need_packing")
    rep.default("epochs", 1, TOOL, plan=True)
    rep.default("num_gpus", 1, TOOL + ": tune run without --nproc_per_node")
    rep.request.setdefault("framework", "torchtune")
    return rep.result()


def _layer_every(option: object) -> int | None:
    """``ac_option`` as torchtune 0.7.0's ``checkpoint_wrapper`` reads it (``int(ac_style)``):
    a whole number, or its digits as text; None where ``int()`` fails (``"op"``, null) or the
    wrapper refuses it (below 0)."""
    if isinstance(option, bool):
        return None
    if isinstance(option, int):
        every = option
    elif isinstance(option, str) and option.strip().isdigit():
        every = int(option)
    else:
        return None
    return every if every >= 0 else None


def _selective_checkpointing(rep: Report, data: JsonObject, st: JsonObject) -> None:
    """torchtune 0.7.0 (bd2a0fc) ``recipes/full_finetune_distributed.py`` and
    ``qat_distributed.py`` ``_setup_model``: with ``ac_mode`` set and
    ``enable_activation_checkpointing`` false, ``training/activations.py``
    ``apply_selective_activation_checkpointing`` wraps every block (``full``) or, with
    ``selective`` and an integer ``ac_option`` N, blocks N, 2N, ... (N = 0: every block);
    ``enable_activation_checkpointing`` true checkpoints only when ``ac_mode`` is unset, so
    both set run with none. ``selective`` with ``"op"`` fails in ``int(ac_style)``. The LoRA
    recipes read neither key."""

    def ignore_option(reason: str) -> None:
        if "ac_option" in data:
            rep.ignore("ac_option", reason)

    if "ac_mode" not in data:
        ignore_option("ac_option_without_ac_mode")
        return
    mode, option = st.get("ac_mode"), st.get("ac_option")
    if rep.request.get("method", "full") != "full":
        for key in ("ac_mode", "ac_option"):
            if key in data:
                rep.ignore(key, "ac_mode_lora_recipes_ignore")
        return
    if mode is None:
        rep.use("ac_mode", "gradient_checkpointing", None)
        ignore_option("ac_option_without_ac_mode")
        return
    every = _layer_every(option) if mode == "selective" else None
    if mode not in ("full", "none") and every is None:
        for key in ("ac_mode", "ac_option"):
            if key in data:
                rep.unknown(key, "not_modelled")
        return
    if rep.request.get("gradient_checkpointing") is True:
        rep.use("ac_mode", "gradient_checkpointing", False, "ac_mode_turns_off_checkpointing")
        ignore_option("ac_mode_turns_off_checkpointing")
        return
    rep.use("ac_mode", "gradient_checkpointing", mode != "none")
    if mode == "none":
        ignore_option("ac_option_only_with_selective")
        return
    if mode == "full" or every == 0:
        rep.use("ac_mode", "checkpointing_granularity", "full")
        if "ac_option" in data:
            if mode == "full":
                rep.ignore("ac_option", "ac_option_only_with_selective")
            else:
                rep.use("ac_option", "checkpointing_granularity", "full")
        return
    rep.use("ac_option", "checkpointing_granularity", "every-n")
    rep.use("ac_option", "checkpointing_every", every)
    rep.mark_used(
        "ac_mode", ["gradient_checkpointing", "checkpointing_granularity", "checkpointing_every"]
    )


def _model(rep: Report, spec: JsonObject, st: JsonObject, override: object) -> ModelArch | None:
    component = spec.get("_component_")
    preset_id, method = (
        torchtune_builder(component) if isinstance(component, str) else (None, "full")
    )
    if spec.get("quantize_base") is True and method == "lora":
        method = "qlora"
    if override is not None:
        rep.mark_used("model._component_", ["model", "method"], "model_given_separately")
        rep.request["model"] = override
    elif preset_id is None:
        rep.unknown("model._component_", "model_not_a_preset:paste_config_json")
    else:
        rep.use("model._component_", "model", preset_id)
    if isinstance(component, str):
        rep.use("model._component_", "method", method)
    arch = arch_of(rep.request.get("model"))
    ctx: JsonObject = {"targets": []}
    keys.read_keys(rep, spec, MODEL, ctx, "model.")
    targets = ctx["targets"]
    if targets:
        if arch is not None and "lm_head" in targets:
            rep.note("lora_on_output_not_modelled")
        kept = [t for t in dict.fromkeys(targets) if arch is None or t in arch.linear_names()]
        if kept:
            value = (
                "all-linear" if arch is not None and set(kept) == set(arch.linear_names()) else kept
            )
            rep.request["lora_targets"] = value
    return arch


def _optimizer(rep: Report, cfg: JsonObject) -> None:
    keys.read_keys(
        rep,
        cfg,
        OPTIMIZER,
        {"component": cfg.get("_component_"), "momentum": cfg.get("momentum")},
        "optimizer.",
    )
