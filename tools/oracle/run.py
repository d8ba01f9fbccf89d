"""Build the requested model on the meta device, make it fake, run training steps, report.

``oracle_estimate(request)`` takes the JSON of ``calc.estimate``'s request (plus an
optional ``"oracle"`` object: ``steps``, ``reentrant``, ``lora_alpha``, ``prepare_kbit``:
QLoRA through peft's ``prepare_model_for_kbit_training`` with ``precision="fp32"``, as the
request key ``qlora_prepare_kbit`` does with ``bf16-true``, see ``qlora.load_in_4bit``) and
returns a
response with ``estimate``'s field names where they mean the same thing
(``peak_allocated_bytes``, ``peak_phase``, ``phases``, ``components``,
``params_total``, ``params_trainable``) and ``oracle`` details (per-phase components,
library versions, limits).

Phases, measured on the last step (step 2 by default, so AdamW's states exist):

- ``forward_end``: from the start of the step until the loss gradient has reached the
  output layer's input: the saved activations with the logits, the loss's fp32 tensors
  and their gradients (what ``calc``'s ``forward_end`` counts);
- ``backward``: the rest of the backward pass;
- ``optimizer_step``: ``optimizer.step()``.
"""

from __future__ import annotations

import contextlib
import copy
import json
import time

SUPPORTED_METHODS = ("full", "lora", "qlora")
SUPPORTED_PRECISIONS = ("bf16-true", "bf16-mixed", "fp32")
SUPPORTED_ATTENTION = ("sdpa", "eager")
SUPPORTED_OPTIMIZERS = ("adamw", "sgd", "sgd-momentum")
ORACLE_DEFAULTS = {"steps": 2, "reentrant": False, "lora_alpha": None, "prepare_kbit": False}
# Request keys the oracle reads; every other key must keep calc's default.
HANDLED_KEYS = {
    "model",
    "method",
    "lora_rank",
    "lora_targets",
    "precision",
    "optimizer",
    "micro_batch_size",
    "seq_len",
    "gradient_checkpointing",
    "attention",
    "num_gpus",
    "lora_dropout",
    "optimizer_fused",
    "lora_adapter_dtype",
    "attention_grouped_kv",
    "loss_outputs_kept",
    "sharding",
    "cpu_offload",
    "framework",
    "qlora_double_quant",
    "lora_modules_to_save",
    "qlora_prepare_kbit",
    "loss_on_16bit_logits",
    "chunked_loss",
    "loss_fused_lm_head",
    "outputs_cast_fp32",
    "zero_grad_set_to_none",
}
# Library profiles (calc.frameworks) whose code the oracle runs: transformers + peft (the Trainer
# tools differ from hf-trainer only in keys the oracle reads), TRL's SFTTrainer preparation and
# loss when trl is installed, and the transformers 4 profiles in a transformers 4 venv
# (tools/requirements-oracle-transformers4.txt).
TRACED_FRAMEWORKS = (
    "generic",
    "hf-trainer",
    "hf-custom-loop",
    "axolotl",
    "llama-factory",
    "ms-swift",
    "pytorch-loop",
    "trl-sft",
    "hf-trainer-4",
    "pytorch-loop-4",
)
TRANSFORMERS_4_FRAMEWORKS = ("hf-trainer-4", "pytorch-loop-4")


class Unsupported(Exception):
    """A setting the fake run cannot reproduce faithfully."""


def versions() -> dict:
    import peft
    import torch
    import transformers

    out = {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "peft": peft.__version__,
    }
    try:
        import trl

        out["trl"] = trl.__version__
    except ImportError:
        pass
    return out


def normalise(request: dict) -> tuple[dict, dict]:
    """The request with calc's defaults filled (validated by calc), and the oracle options."""
    from calc.fields import field_specs
    from calc.request import parse_estimate_request

    req = dict(request)
    options = dict(ORACLE_DEFAULTS, **req.pop("oracle", {}))
    parsed = parse_estimate_request(req).to_dict()  # raises calc's coded errors
    parsed["model"] = req["model"]
    framework = parsed.get("framework", "generic")
    from calc.frameworks import ORACLE_UNTRACED, Framework

    if Framework(framework) in ORACLE_UNTRACED:
        raise Unsupported(f"framework {framework}: {ORACLE_UNTRACED[Framework(framework)]}")
    if framework not in TRACED_FRAMEWORKS:
        raise Unsupported(
            f"framework {framework}: the oracle runs transformers, peft and TRL as installed "
            f"({', '.join(TRACED_FRAMEWORKS)}), not that library's own modules"
        )
    reason = generation_reason(framework)
    if reason:
        raise Unsupported(reason)
    if parsed["chunked_loss"] and not (framework == "trl-sft" and parsed["loss_fused_lm_head"]):
        raise Unsupported(
            "chunked_loss: the oracle runs TRL's fused LM head only (trl-sft, loss_fused_lm_head)"
        )
    for spec in field_specs("estimate"):
        key, default = spec.key, spec.default
        value = parsed[key]
        if key in HANDLED_KEYS or key not in req and key == "qlora_quant_state_replicated":
            continue  # a QLoRA-only setting a Hugging Face profile fills in
        if key == "fsdp_wrap_floor" and key not in req:
            continue  # set by hf-custom-loop; it changes reserved memory only, which the oracle does not trace
        if key == "moe_expert_layout" and value == "fused-3d":
            continue  # set by hf-trainer: what the installed transformers 5 builds (3-D expert tensors)
        if key == "fp8_library":
            continue  # set by the accelerate profiles: what runs FP8 linears, time only
        if value != default and not (isinstance(value, list) and tuple(value) == default):
            raise Unsupported(f"{key}={value!r} is not reproduced by the oracle")
    if parsed["method"] not in SUPPORTED_METHODS:
        raise Unsupported(f"method {parsed['method']}")
    if parsed["method"] == "qlora":
        from .qlora import unsupported_reason

        reason = unsupported_reason(parsed, options)
        if reason:
            raise Unsupported(reason)
    if parsed["precision"] not in SUPPORTED_PRECISIONS:
        raise Unsupported(f"precision {parsed['precision']}")
    if parsed["attention"] not in SUPPORTED_ATTENTION:
        raise Unsupported(f"attention {parsed['attention']}: flash-attn is not installed")
    if parsed["optimizer"] not in SUPPORTED_OPTIMIZERS:
        raise Unsupported(f"optimizer {parsed['optimizer']}")
    if (
        parsed["num_gpus"] != 1
        or parsed["sharding"] not in ("none",)
        or parsed["cpu_offload"] != "none"
    ):
        raise Unsupported("one GPU, no sharding, no offload")
    return parsed, options


def generation_reason(framework: str) -> str | None:
    """Why the installed libraries cannot run ``framework``'s generation, or None."""
    import transformers

    major = int(transformers.__version__.split(".")[0])
    if (framework in TRANSFORMERS_4_FRAMEWORKS) != (major == 4):
        want = "4.46-4.53" if framework in TRANSFORMERS_4_FRAMEWORKS else "5.x"
        return (
            f"framework {framework} is transformers {want}; installed {transformers.__version__} "
            "(one venv per generation: tools/requirements-oracle-transformers*.txt)"
        )
    if framework == "trl-sft":
        try:
            import trl  # noqa: F401
        except ImportError:
            return "framework trl-sft: trl is not installed in the oracle venv"
    return None


def hf_config_of(model: object) -> dict:
    """The Hugging Face config of a preset id or of ``{"hf_config": {...}}``."""
    if isinstance(model, dict):
        return copy.deepcopy(model["hf_config"])
    data = json.loads(_models_json())
    for entry in data["models"]:
        if entry["id"] == model:
            return copy.deepcopy(entry["config"])
    raise Unsupported(f"model {model!r}")


def _models_json() -> str:
    from pathlib import Path

    return (Path(__file__).resolve().parents[2] / "calc" / "data" / "models.json").read_text()


def build_meta_model(req: dict, options: dict):
    """The model on the meta device, with PEFT and checkpointing applied as a Hugging Face
    training script applies them (``Trainer``: checkpointing through
    ``gradient_checkpointing_enable``; inputs made to require grad for reentrant
    checkpointing of a frozen base)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    hf = hf_config_of(req["model"])
    if isinstance(hf.get("text_config"), dict):
        # a multimodal checkpoint (Ministral 3's mistral3): its language model, the part a text
        # fine-tune trains and the one calc counts
        wrapper, hf = hf["model_type"], dict(hf["text_config"])
        if wrapper == "kimi_k25" and hf.get("model_type", "kimi_k2") == "kimi_k2":
            # Kimi_K25Config.__post_init__ (transformers 5.17) builds Kimi K2's text_config as
            # deepseek_v3, the model_type its config class is registered under
            hf["model_type"] = "deepseek_v3"
    model_type = hf.pop("model_type")
    hf.pop("architectures", None)
    config = AutoConfig.for_model(model_type, **hf)
    config.use_cache = False
    dtype = torch.bfloat16 if req["precision"] == "bf16-true" else torch.float32
    if req["method"] == "qlora" and (options["prepare_kbit"] or req["qlora_prepare_kbit"]):
        dtype = torch.bfloat16  # loaded in bf16; prepare_model_for_kbit_training casts to fp32
    with torch.device("meta"):
        model = causal_lm_from_config(
            AutoModelForCausalLM, config, dtype=dtype, attn_implementation=req["attention"]
        )
    if req["gradient_checkpointing"]:
        model.gradient_checkpointing_enable(
            gradient_checkpointing_kwargs={"use_reentrant": bool(options["reentrant"])}
        )
    if req["method"] == "qlora":
        from .qlora import load_in_4bit

        model = load_in_4bit(model, req, options)
    if req["method"] in ("lora", "qlora"):
        from peft import LoraConfig, get_peft_model

        targets = req["lora_targets"]
        lora = LoraConfig(
            r=req["lora_rank"],
            lora_alpha=options["lora_alpha"] or 2 * req["lora_rank"],
            lora_dropout=req["lora_dropout"],
            bias="none",
            task_type="CAUSAL_LM",
            target_modules="all-linear" if targets == "all-linear" else list(targets),
            modules_to_save=modules_to_save(req),
            ensure_weight_tying=req.get("lora_modules_to_save", "").endswith("-tied"),
        )
        if req["method"] == "qlora":
            from .qlora import Linear4bitModel, lora_layer_class

            lora._register_custom_module({Linear4bitModel: lora_layer_class()})
        trl_qlora = req["framework"] == "trl-sft" and req["method"] == "qlora"
        model = get_peft_model(
            model,
            lora,
            autocast_adapter_dtype=trl_qlora or req["lora_adapter_dtype"] == "fp32",
        )
        if trl_qlora and req["lora_adapter_dtype"] == "base":
            # TRL 1.16.0 sft_trainer.py: a quantized model's trainable parameters to bf16
            for name, param in model.named_parameters():
                if param.requires_grad and "lora_magnitude_vector" not in name:
                    param.data = param.data.to(torch.bfloat16)
        if req["gradient_checkpointing"] and options["reentrant"]:
            model.enable_input_require_grads()
    if req["framework"] == "trl-sft" and req["chunked_loss"] and req["loss_fused_lm_head"]:
        from trl.trainer.utils import add_fused_lm_head

        # SFTTrainer.__init__: the fused head on the base model, the metrics' outputs
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        add_fused_lm_head(base, outputs=("log_probs", "entropy", "is_top1"))
    model.train()
    return model, config


def causal_lm_from_config(auto, config, **kwargs):
    """``AutoModelForCausalLM.from_config``, or the family's own ``<Family>ForCausalLM`` where
    transformers ships one that the causal-LM auto mapping leaves out (5.17:
    ``Mistral4ForCausalLM``, whose ``mistral4`` is mapped for pretraining and
    image-text-to-text only, ``models/auto/modeling_auto.py``)."""
    try:
        return auto.from_config(config, **kwargs)
    except ValueError:
        import transformers

        name = type(config).__name__.removesuffix("Config") + "ForCausalLM"
        cls = getattr(transformers, name, None)
        if cls is None:
            raise
        return cls._from_config(config, **kwargs)


def modules_to_save(req: dict) -> list[str] | None:
    """peft's ``modules_to_save`` for calc's ``lora_modules_to_save`` ("none" or names joined
    by "+"); every family the oracle reads names its embedding ``embed_tokens`` and its
    output layer ``lm_head``."""
    value = req.get("lora_modules_to_save", "none").removesuffix("-tied")
    return None if value == "none" else value.split("+")


def fake_parameters(model, tracker) -> None:
    """Replace every meta parameter and buffer with a fake CPU tensor of the same shape and
    dtype, keeping shared (tied) parameters shared. Call inside the fake mode."""
    import torch

    done: dict[int, torch.nn.Parameter] = {}
    for module in model.modules():
        for name, p in list(module._parameters.items()):
            if p is None:
                continue
            if id(p) not in done:
                fake = torch.empty(p.shape, dtype=p.dtype, device="cpu")
                done[id(p)] = torch.nn.Parameter(fake, requires_grad=p.requires_grad)
            module._parameters[name] = done[id(p)]
        for name, b in list(module._buffers.items()):
            if b is None:
                continue
            if id(b) not in done:
                done[id(b)] = torch.empty(b.shape, dtype=b.dtype, device="cpu")
            module._buffers[name] = done[id(b)]
    for p in model.parameters():
        category = "lora_weights" if "lora_" in _param_name(model, p) else "weights"
        tracker.track(p, category)
        tracker.param_storages.add(id(p.untyped_storage()))
    for b in model.buffers():
        tracker.track(b, "weights")


def _param_name(model, p) -> str:
    cache = getattr(model, "_oracle_names", None)
    if cache is None:
        cache = {id(q): n for n, q in model.named_parameters()}
        model._oracle_names = cache
    return cache.get(id(p), "")


def make_optimizer(req: dict, params: list):
    import torch

    from .workarounds import cuda_default_adamw

    if req["optimizer"] == "adamw":
        return cuda_default_adamw(params, fused=req["optimizer_fused"])
    momentum = 0.9 if req["optimizer"] == "sgd-momentum" else 0.0
    return torch.optim.SGD(params, lr=1e-5, momentum=momentum, foreach=True)


def _output_layer(model):
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return base.get_output_embeddings()


def run_steps(req: dict, options: dict) -> dict:
    """Trace ``options["steps"]`` training steps; the peaks of the last one, by phase."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    from .tracker import LiveStorageTracker
    from .workarounds import (
        adam_step_value,
        cuda_dropout,
        flash_like_sdpa,
        real_causal_masks,
        triton_logprob_tiles,
    )

    from . import qlora

    model, config = build_meta_model(req, options)
    tracker = LiveStorageTracker(debug=bool(options.get("debug")))
    if options.get("record_events"):
        tracker.events = []
    qlora.CURRENT["tracker"] = tracker
    counter = {"step": 0}
    mixed = req["precision"] == "bf16-mixed"
    cast = _output_cast(mixed and req.get("outputs_cast_fp32", False))
    grouped = _grouped_kv_context(req["attention_grouped_kv"])
    b, s = req["micro_batch_size"], req["seq_len"]
    head = _output_layer(model)

    def to_backward(_grad):
        tracker.context = "activations"
        if tracker.phase == "forward_end":
            tracker.set_phase("backward")

    def head_pre(_module, args):
        tracker.context = "logits"
        if (
            torch.is_grad_enabled()
            and args
            and isinstance(args[0], torch.Tensor)
            and args[0].requires_grad
        ):
            args[0].register_hook(to_backward)

    head.register_forward_pre_hook(head_pre)
    fused_head = req["framework"] == "trl-sft" and req["chunked_loss"] and req["loss_fused_lm_head"]
    if fused_head:
        # TRL's fused head reads the output layer's weight without calling the module: the
        # loss begins where the backbone's output leaves it
        def backbone_post(_module, _args, output):
            head_pre(None, (output.last_hidden_state,))

        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        base.base_model.register_forward_hook(backbone_post)
    with (
        FakeTensorMode(allow_non_fake_inputs=False),
        tracker,
        real_causal_masks(),
        flash_like_sdpa(),
        adam_step_value(counter),
        cuda_dropout(),
        grouped,
        triton_logprob_tiles() if fused_head else contextlib.nullcontext(),
    ):
        fake_parameters(model, tracker)
        params = [p for p in model.parameters() if p.requires_grad]
        for p in params:
            p.register_post_accumulate_grad_hook(lambda q: tracker.track(q.grad, "gradients"))
        optimizer = make_optimizer(req, params)
        ids = torch.zeros((b, s), dtype=torch.long)
        labels = torch.zeros((b, s), dtype=torch.long)  # a collator's copy of input_ids
        lengths = options.get("seq_lens")  # a padded length per step (record_events runs)
        for step in range(1, options["steps"] + 1):
            counter["step"] = step
            if lengths:
                ids = torch.zeros((b, lengths[step - 1]), dtype=torch.long)
                labels = torch.zeros((b, lengths[step - 1]), dtype=torch.long)
            last = step == options["steps"]
            tracker.context = "activations"
            if last:
                tracker.peaks.clear()
                tracker.set_phase("forward_end")
            autocast = (
                torch.autocast("cpu", dtype=torch.bfloat16) if mixed else contextlib.nullcontext()
            )
            with autocast:
                if fused_head:
                    # TRL 1.16.0 SFTTrainer.compute_loss (loss_type "nll")
                    outputs = cast(model(input_ids=ids, labels=labels, fused_lm_head=True))
                    loss = -outputs.log_probs.sum() / outputs.label_mask.sum().clamp(min=1)
                    metrics = (outputs.entropy.detach().sum(), outputs.is_top1.sum())
                    del metrics
                elif req["loss_on_16bit_logits"]:
                    # a hand-written loop's loss on the logits as the model returns them
                    outputs = cast(model(input_ids=ids))
                    loss = torch.nn.functional.cross_entropy(
                        outputs.logits.flatten(0, 1), labels.flatten()
                    )
                else:
                    outputs = cast(model(input_ids=ids, labels=labels))
                    loss = outputs.loss
            if not req["loss_outputs_kept"]:
                outputs = None
            loss.backward()
            del loss, outputs
            if tracker.phase == "forward_end":  # no hook fired (output layer not in the graph)
                tracker.set_phase("backward")
            tracker.context = "optimizer_temporaries"
            if last:
                tracker.set_phase("optimizer_step")
            optimizer.step()
            for st in optimizer.state.values():
                for v in st.values():
                    if isinstance(v, torch.Tensor):
                        tracker.track(v, "optimizer")
            tracker.set_phase(None)
            # a loop on torch < 2.0 or accelerate < 0.28 zeroes the gradients in place
            optimizer.zero_grad(set_to_none=req["zero_grad_set_to_none"])
        params_total = _logical_params(model)
        trainable = sum(p.numel() for p in params)
    qlora.CURRENT["tracker"] = None
    phases, components = tracker.phase_peaks()
    return {
        "phases": phases,
        "components": components,
        "params_total": params_total,
        "params_trainable": trainable,
        "config": config,
        "events": tracker.events,
    }


def _output_cast(on: bool):
    """accelerate's ``convert_outputs_to_fp32`` (``outputs_cast_fp32``): what the Trainer's
    prepared forward returns under native mixed precision, the model's output with every
    16-bit tensor copied to fp32 by accelerate's own ``convert_to_fp32``."""
    if not on:
        return lambda outputs: outputs
    from accelerate.utils import convert_to_fp32

    return convert_to_fp32


def _logical_params(model) -> int:
    """Parameters as the model defines them: a 4-bit weight counts its ``out x in`` values,
    not the bytes it is packed in."""
    from .qlora import Linear4bitModel

    packed = {}
    for module in model.modules():
        if isinstance(module, Linear4bitModel):
            packed[id(module.weight)] = module.in_features * module.out_features
    unique = {id(p): p for p in model.parameters()}
    return sum(packed.get(key, p.numel()) for key, p in unique.items())


def _grouped_kv_context(grouped: bool):
    """``attention_grouped_kv=False`` runs transformers' SDPA path as before ``enable_gqa``
    (k/v expanded with ``repeat_kv`` first); True keeps the installed library's rule
    (``use_gqa_in_sdpa``: no mask and head_dim <= 256)."""
    if grouped:
        return contextlib.nullcontext()
    import transformers.integrations.sdpa_attention as sa

    @contextlib.contextmanager
    def expanded():
        original = sa.use_gqa_in_sdpa
        sa.use_gqa_in_sdpa = lambda *a, **k: False
        try:
            yield
        finally:
            sa.use_gqa_in_sdpa = original

    return expanded()


def estimate_response(result: dict, options: dict, library_versions: dict) -> dict:
    """A run's phases (:func:`run_steps`' shape, any stack's) as calc's estimate response: the
    peak phase's bytes and components, every phase, the parameter counts, and the oracle's
    own details (each phase's components, the options, the library versions)."""
    phases = result["phases"]
    peak_phase = max(phases, key=phases.get)
    return {
        "peak_allocated_bytes": phases[peak_phase],
        "peak_phase": peak_phase,
        "phases": phases,
        "components": result["components"][peak_phase],
        "params_total": result["params_total"],
        "params_trainable": result["params_trainable"],
        "oracle": {
            "phase_components": result["components"],
            "options": options,
            "versions": library_versions,
        },
    }


def oracle_estimate(request: dict) -> dict:
    """JSON in (calc's estimate request, plus ``"oracle"`` options), JSON out."""
    req, options = normalise(request)
    started = time.perf_counter()
    out = estimate_response(run_steps(req, options), options, versions())
    out["oracle"]["seconds"] = round(time.perf_counter() - started, 2)
    out["request"] = {k: v for k, v in req.items()}
    return out
