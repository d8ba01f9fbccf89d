"""Pieces shared by the formats built on the Hugging Face Trainer (axolotl, TRL,
LLaMA-Factory): LoRA targets, bitsandbytes options, checkpointing kwargs, a DeepSpeed file
named by path, epochs and steps, and the ``framework`` key."""

from __future__ import annotations

from ..arch import ModelArch
from ..hf_config import BNB_BLOCKLESS_SKIPS
from ..jsontypes import JsonObject
from ..fields import MAX_GRADIENT_BUCKET_MB
from . import common, keys, sections
from .report import Report

# peft 0.21.0 ``peft/utils/constants.py`` TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING:
# the targets peft picks when a LoraConfig names none (families with presets)
PEFT_DEFAULT_TARGETS = {
    "llama": ["q_proj", "v_proj"],
    "mistral": ["q_proj", "v_proj"],
    "mixtral": ["q_proj", "v_proj"],
    "qwen2": ["q_proj", "v_proj"],
    "gemma": ["q_proj", "v_proj"],
    "gemma2": ["q_proj", "v_proj"],
    "phi": ["q_proj", "v_proj", "fc1", "fc2"],
    "falcon": ["query_key_value"],
    "bloom": ["query_key_value"],
    "gpt_neox": ["query_key_value"],
    "gpt2": ["c_attn"],
}


def set_framework(rep: Report, value: str) -> None:
    """The training library the file is for, unless the file named another."""
    rep.request.setdefault("framework", value)


def adapter_dtype_default(rep: Report, fp32: bool, source: str) -> None:
    """peft upcasts 16-bit adapters to fp32 unless told not to (peft 0.21.0
    ``get_peft_model(autocast_adapter_dtype=True)``)."""
    rep.default("lora_adapter_dtype", "fp32" if fp32 else "base", source)


def set_dropout(rep: Report, key: str, value: object) -> None:
    rate = common.number(rep, key, value, "lora_dropout", 0.0, 1.0, maximum_exclusive=True)
    if rate is not None:
        rep.use(key, "lora_dropout", float(rate))


def _double_quant(rep: Report, path: str, value: object, ctx: JsonObject) -> None:
    rep.use(path, "qlora_double_quant", common.flag(rep, path, value, "qlora_double_quant"))


def _load_in(name: str) -> keys.Key:
    """``load_in_4bit`` / ``load_in_8bit`` inside the config: the method, decided by the
    importer once every key is read (``ctx[name]``)."""

    def read(rep: Report, path: str, value: object, ctx: JsonObject) -> None:
        ctx[name] = common.flag(rep, path, value, "method")
        if name == "load_in_8bit" and ctx[name]:
            rep.unknown(path, "int8_base_weights_not_modelled")
        else:
            rep.mark_used(path, ["method"])

    return keys.Key(read, ("method",))


def _skip_modules(rep: Report, path: str, value: object, ctx: JsonObject) -> None:
    """``llm_int8_skip_modules``: a list that names no block module changes nothing calc counts
    (:data:`calc.hf_config.BNB_BLOCKLESS_SKIPS`); one that keeps block modules in 16 bits is
    the model's to say (its ``config.json``'s ``quantization_config``, which
    :func:`calc.hf_config.bnb_kept_16bit` reads), not the loop's."""
    if value is None or (
        isinstance(value, list)
        and all(isinstance(v, str) for v in value)
        and set(value) <= BNB_BLOCKLESS_SKIPS
    ):
        rep.ignore(path)
    else:
        rep.unknown(path, "bnb_skip_modules_in_model_config")


BNB: dict[str, keys.Key] = {
    "bnb_4bit_use_double_quant": keys.Key(_double_quant, ("qlora_double_quant",)),
    "llm_int8_skip_modules": keys.Key(_skip_modules, ()),
    # nf4 and fp4 both store 4 bits + one absmax per 64 weights
    **{
        name: keys.ignored()
        for name in (
            "bnb_4bit_quant_type",
            "bnb_4bit_compute_dtype",
            "quant_method",
            "bnb_4bit_quant_storage",
            "llm_int8_threshold",
        )
    },
}
"""bitsandbytes ``BitsAndBytesConfig`` keys (transformers 5.17.0)."""

BNB_WITH_METHOD: dict[str, keys.Key] = {
    **BNB,
    "load_in_4bit": _load_in("load_in_4bit"),
    "load_in_8bit": _load_in("load_in_8bit"),
}
""":data:`BNB` where the config's ``load_in_*`` choose the method (TRL's ``quantization_config``)."""


def bnb_section(
    rep: Report, cfg: JsonObject, prefix: str = "", st: JsonObject | None = None
) -> None:
    """A ``BitsAndBytesConfig`` dict through :data:`BNB`, or :data:`BNB_WITH_METHOD` when the
    importer's state ``st`` takes the ``load_in_*`` choice (else they are ``unknown``)."""
    if st is None:
        keys.read_keys(rep, cfg, BNB, {}, prefix)
    else:
        keys.read_keys(rep, cfg, BNB_WITH_METHOD, st, prefix)


CHECKPOINTING_KWARGS: dict[str, keys.Key] = {
    # both variants keep each block's input and recompute it in backward
    "use_reentrant": keys.ignored("same_saved_tensors"),
    "preserve_rng_state": keys.ignored(),
}
"""``gradient_checkpointing_kwargs`` (transformers 5.17.0, passed to ``torch.utils.checkpoint``)."""


def deepspeed_value(
    rep: Report, key: str, value: object, read_file: common.ReadFile | None = None
) -> None:
    """``deepspeed``: an inline dict, or a path (read through ``read_file`` when the CLI can,
    else stage and offload inferred from the file name)."""
    if isinstance(value, dict):
        sections.deepspeed_section(rep, value, key + ".")
    elif isinstance(value, str) and value:
        data = None
        if read_file is not None:
            data = read_file(value)
        if isinstance(data, dict):
            rep.mark_used(key, ["sharding"], "file_read")
            sections.deepspeed_section(rep, data, key + ".")
        else:
            common.deepspeed_from_name(rep, key, value)
    elif value in (None, ""):
        rep.ignore(key)
    else:
        rep.unknown(key)
    rep.request.setdefault("_deepspeed", True)


def set_epochs(rep: Report, key: str, value: object) -> None:
    epochs = common.number(rep, key, value, "epochs", 0.0, minimum_exclusive=True)
    if epochs is not None:
        rep.use_plan(key, "epochs", epochs)


def finish_targets(
    rep: Report, targets_key: tuple[str, object] | None, arch: ModelArch | None, tool: str
) -> None:
    if targets_key is not None:
        common.normalise_targets(rep, targets_key[0], targets_key[1], arch)
        if "lora_targets" in rep.request:
            return
    family: str | None = getattr(arch, "family", None)
    default = PEFT_DEFAULT_TARGETS.get(family) if family is not None else None
    if default is not None and arch is not None and all(n in arch.linear_names() for n in default):
        rep.default(
            "lora_targets", default, f"peft 0.21.0 default targets for {family} ({tool} names none)"
        )
    elif arch is not None:
        rep.note("peft_needs_target_modules")


def finish_common(
    rep: Report, st: JsonObject, tool: str, packing: bool, default_epochs: float = 1.0
) -> None:
    """Steps -> dataset tokens, the epochs default, DeepSpeed's precision, and a
    placeholder key cleaned away."""
    ds = rep.request.pop("_deepspeed", False)
    if (
        ds
        and rep.request.get("precision") == "bf16-true"
        and rep.request.get("sharding") in ("zero1", "zero2", "zero3", "ddp")
    ):
        # ZeRO keeps fp32 master weights in its optimizer whatever the model's dtype
        rep.request["precision"] = "bf16-mixed"
        rep.note("deepspeed_keeps_fp32_master_weights")
    steps_key = st.get("max_steps")
    if steps_key is not None:
        key, value = steps_key
        # -1: the Trainer's "no step limit"
        steps = None if value in (-1, None) else common.integer(rep, key, value, "max_steps")
        if value in (-1, None):
            rep.ignore(key)
        elif steps is None:
            pass
        elif packing:  # the run's length, and its tokens: every row fills seq_len
            rep.use(key, "max_steps", steps)
            req = rep.request
            tokens = (
                steps
                * req.get("micro_batch_size", 1)
                * req.get("gradient_accumulation_steps", 1)
                * req.get("num_gpus", 1)
                * req.get("seq_len", 2048)
            )
            rep.use_plan(key, "dataset_tokens", tokens, "packed_sequences_fill_seq_len")
            rep.plan["epochs"] = 1
        else:  # the run's length (how many samples it meets), not its tokens
            rep.use(key, "max_steps", steps, "dataset_tokens_need_packing")
    rep.default("epochs", default_epochs, tool, plan=True)
    rep.default("num_gpus", 1, tool + ": one process unless launched with more")


# HF Trainer's evaluations and saves (transformers 5.17 TrainingArguments): when they run is
# read once the whole file is (finish_run_phases), since the strategy, the interval and the
# epochs may come in any order
RUN_PHASE_STRATEGIES = {"save": ("no", "steps", "epoch", "best"), "eval": ("no", "steps", "epoch")}
SAVE_STEPS_DEFAULT = 500.0  # TrainingArguments.save_steps, with save_strategy "steps"
EVAL_STEPS_DEFAULT = 500.0  # eval_steps unset: logging_steps, whose default is 500


def read_phase_strategy(rep: Report, key: str, value: object, st: JsonObject) -> None:
    """``save_strategy`` / ``eval_strategy`` (``evaluation_strategy`` before transformers 4.46):
    kept for :func:`finish_run_phases`."""
    kind = "save" if key.startswith("save") else "eval"
    name = common.choice(rep, key, value, RUN_PHASE_STRATEGIES[kind], kind + "_steps")
    if name is not None:
        st[kind + "_strategy"] = (key, name)


def read_phase_steps(rep: Report, key: str, value: object, st: JsonObject) -> None:
    """``save_steps`` / ``eval_steps``: whole steps, or below 1 a share of the run's steps."""
    if value is None:
        rep.ignore(key, "not_set")
        return
    steps = common.number(rep, key, value, key, 0.0, minimum_exclusive=True)
    if steps is not None:
        st[key] = (key, steps)


def plan_int(field: str, unset: tuple[object, ...] = (None,)) -> keys.Key:
    """A whole number that sets the plan field ``field``; a value in ``unset`` is the tool's
    "not set" (reported ``ignored``)."""

    def read(rep: Report, key: str, value: object, st: JsonObject) -> None:
        if value in unset:
            rep.ignore(key, "not_set")
            return
        number = common.integer(rep, key, value, field)
        if number is not None:
            rep.use_plan(key, field, number)

    return keys.Key(read, (field,))


def read_bucket_cap(rep: Report, key: str, value: object, st: JsonObject) -> None:
    """``ddp_bucket_cap_mb``: the MiB of gradients per DDP reduction (``None``: torch's 25)."""
    if value is None:
        rep.ignore(key, "not_set")
        return
    mib = common.number(
        rep, key, value, "gradient_bucket_mb", 0.0, MAX_GRADIENT_BUCKET_MB, minimum_exclusive=True
    )
    if mib is not None:
        rep.use(key, "gradient_bucket_mb", mib)


def plan_flag(field: str) -> keys.Key:
    """A boolean that sets the plan field ``field``."""

    def read(rep: Report, key: str, value: object, st: JsonObject) -> None:
        flag = common.flag(rep, key, value, field)
        if flag is not None:
            rep.use_plan(key, field, flag)

    return keys.Key(read, (field,))


def finish_run_phases(
    rep: Report,
    st: JsonObject,
    source: str = "transformers 5.17.0 TrainingArguments",
    save_default: str = "steps",
    total_limit: int | None = None,
) -> None:
    """The plan's ``save_steps`` and ``eval_steps`` as the Trainer runs them:

    - ``steps``: the file's interval, else the Trainer's (500 for saves, the default
      ``save_strategy``; ``logging_steps``' 500 for evaluations);
    - ``epoch``: one at each epoch's end (``DefaultFlowCallback.on_epoch_end``; the Trainer
      ends its last epoch when the steps run out), ``ceil(epochs)`` of them: the share
      ``1 / ceil(epochs)`` of the run's steps, or for a single epoch one at the end (a share
      just under 1);
    - ``no``: none; ``best`` (saves when the metric improves): not counted.

    ``save_default`` and ``total_limit``: what the tool itself passes the Trainer when the file
    says nothing (axolotl: a save each epoch, four kept). Evaluations need the evaluation set's
    size, which no training file holds (``eval_tokens_needed``)."""
    epochs = rep.plan.get("epochs", 1.0)
    assert isinstance(epochs, (int, float))
    for kind in ("save", "eval"):
        field = kind + "_steps"
        key, strategy = st.get(kind + "_strategy", (None, save_default if kind == "save" else "no"))
        given = st.get(field)
        if given is not None and strategy != "steps":
            rep.ignore(given[0], "not_read_without_steps_strategy")
        value: float | None = None
        if strategy == "steps":
            default = SAVE_STEPS_DEFAULT if kind == "save" else EVAL_STEPS_DEFAULT
            value = default if given is None else given[1]
        elif strategy == "epoch":
            ends = max(1, -(-epochs // 1))
            value = 1.0 / ends if ends > 1 else 0.999
        if given is not None and strategy == "steps":
            rep.use_plan(given[0], field, value)
        elif key is not None and value is not None:
            rep.use_plan(key, field, value, "once_per_epoch" if strategy == "epoch" else None)
        elif value is not None:
            rep.default(field, value, source, plan=True)
        else:
            # none: said outright, so that a file pasted over another clears its interval
            rep.plan[field] = None
            if key is not None:
                rep.ignore(key, "not_counted" if strategy == "best" else None)
        if key is not None and value is not None and given is not None:
            rep.mark_used(key, [field])
        if kind == "eval" and rep.plan.get(field) is not None:
            rep.note("eval_tokens_needed")
    # the Trainer's own values where the file gives none (a file pasted over another
    # inherits none of its keys)
    kept = "every checkpoint kept" if total_limit is None else f"{total_limit} checkpoints kept"
    rep.default("save_total_limit", total_limit, f"{source}: {kept}", plan=True)
    rep.default("save_only_model", False, source, plan=True)
    rep.default("eval_on_start", False, source, plan=True)
    rep.default("eval_batch_size", 8, source + ": per_device_eval_batch_size", plan=True)


def set_modules_to_save(rep: Report, key: str, value: object) -> None:
    """peft ``modules_to_save`` (axolotl and TRL ``lora_modules_to_save``) as calc's
    ``lora_modules_to_save``: the embedding and / or the output layer, by the last component
    of their names (``model.embed_tokens``); any other module is not modelled."""
    if value in (None, "", []):
        rep.ignore(key)
        return
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        rep.invalid(
            key,
            value,
            "not_a_list_of_names",
            {"type": "list", "allowed": ["embed_tokens", "lm_head"]},
            "lora_modules_to_save",
        )
        return
    short = {n.rsplit(".", 1)[-1] for n in names}
    if not short <= {"embed_tokens", "lm_head"}:
        rep.unknown(key, "not_modelled")
        return
    rep.use(
        key, "lora_modules_to_save", "+".join(n for n in ("embed_tokens", "lm_head") if n in short)
    )


# -- readers shared by the Trainer-based formats' key tables (calc.config_import.keys) ----------
def read_packing(rep: Report, key: str, value: object, st: JsonObject) -> None:
    """``packing`` / ``sample_packing``: packed rows (``batching`` ``packed``), else each
    micro-batch padded to its longest sample (the collators' default, ``pad-longest``)."""
    flag = common.flag(rep, key, value, "batching")
    if flag is False and st.get("packing"):  # neat_packing has turned it on
        rep.ignore(key)
        return
    st["packing"] = flag
    if flag is not None:
        rep.use(
            key,
            "batching",
            "packed" if flag else "grouped" if st.get("group_by_length") else "pad-longest",
            "packing_fills_seq_len" if flag else None,
        )


def read_neat_packing(rep: Report, key: str, value: object, st: JsonObject) -> None:
    """LLaMA-Factory ``neat_packing``: packing without attention across the packed samples
    (``packed_attention`` ``per-sample``), which turns ``packing`` on
    (``DataArguments.__post_init__``); the rows are as full."""
    if common.flag(rep, key, value, "batching") is True:
        st["packing"] = True
        rep.use(key, "batching", "packed", "packing_fills_seq_len")
        rep.use(key, "packed_attention", "per-sample")
    else:
        rep.ignore(key)


def read_max_grad_norm(rep: Report, key: str, value: object, st: JsonObject) -> None:
    """``max_grad_norm`` (transformers ``TrainingArguments``, default 1.0; axolotl and
    LLaMA-Factory hand it to it): the Trainer clips only when it is a number above 0
    (``Trainer._inner_training_loop``: ``args.max_grad_norm is not None and
    args.max_grad_norm > 0``), so 0 or null turns ``gradient_clipping`` off."""
    if value is None:
        rep.use(key, "gradient_clipping", False, "max_grad_norm_null_no_clipping")
        return
    norm = common.number(rep, key, value, "gradient_clipping", 0.0)
    if norm is not None:
        rep.use(key, "gradient_clipping", norm > 0)


def read_group_by_length(rep: Report, key: str, value: object, st: JsonObject) -> None:
    """``group_by_length``: micro-batches of samples of like length (``batching`` ``grouped``,
    transformers' ``LengthGroupedSampler``); packed rows have no padding to group, so under
    packing the key changes nothing."""
    if common.flag(rep, key, value, "batching") is True:
        st["group_by_length"] = True
        if st.get("packing"):
            rep.ignore(key)
        else:
            rep.use(key, "batching", "grouped")
    else:
        rep.ignore(key)


def read_padding_free(rep: Report, key: str, value: object, st: JsonObject) -> None:
    """TRL ``padding_free``: the micro-batch is its samples end to end, no padding at all. With
    ``packing`` the rows are full (``packed``); without it, one row of the micro-batch's own
    samples (``padding-free``)."""
    if common.flag(rep, key, value) is True:
        st["padding_free"] = key
    else:
        rep.ignore(key)


def finish_padding_free(rep: Report, st: JsonObject) -> None:
    key = st.get("padding_free")
    if key is None:
        return
    if st.get("packing"):
        rep.mark_used(key, ["batching"])
    else:
        rep.use(key, "batching", "padding-free")


def read_targets(rep: Report, key: str, value: object, st: JsonObject) -> None:
    if value is None:
        rep.ignore(key)
    else:
        st["targets_key"] = (key, value)  # checked against the model once it is known


def read_load_in(rep: Report, key: str, value: object, st: JsonObject) -> None:
    """``load_in_4bit`` / ``load_in_8bit``: the method, decided once every key is read."""
    st[key] = common.flag(rep, key, value, "method")
    if key == "load_in_8bit" and st[key]:
        rep.unknown(key, "int8_base_weights_not_modelled")
    else:
        rep.mark_used(key, ["method"])


def read_max_steps(rep: Report, key: str, value: object, st: JsonObject) -> None:
    st["max_steps"] = (key, value)  # tokens once the batch shape is known (finish_common)
