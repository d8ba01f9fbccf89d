"""The oracle on torchtune's own code path (the ``torchtune`` profile).

Run in a venv with torchtune (``tools/requirements-oracle-torchtune.txt``: torchtune 0.6.1 on
the transformers 5 venv's torch). What runs is torchtune's, as its single-device recipes
(``recipes/lora_finetune_single_device.py``, ``full_finetune_single_device.py``, 0.6.1) run it:

- the model from torchtune's Llama 3.1 builders (``torchtune.models.llama3_1._component_builders``
  ``llama3_1`` / ``lora_llama3_1``; Llama 3.2's for a tied output layer: its
  ``MultiHeadAttention``, which expands grouped k/v before SDPA, its ``LoRALinear`` adapters in
  the model dtype, ``FeedForward``, ``RMSNorm``, one ``Llama3ScaledRoPE`` table shared by every
  layer), built under ``training.set_default_dtype`` as the recipe does, on the meta device;
- ``set_trainable_params(model, get_adapter_params(model))`` for LoRA;
- ``training.set_activation_checkpointing(model, auto_wrap_policy={TransformerSelfAttentionLayer})``;
- the loss ``CEWithChunkedOutputLoss`` (8 chunks; ``model.set_num_output_chunks``), the output
  projection applied chunk by chunk, labels shifted with ``torch.hstack`` and an ignore column,
  ``loss * num_tokens``, ``del logits`` before the backward, as ``_loss_step`` does;
- ``torch.optim.AdamW(fused=True)`` (the recipes' configs), ``zero_grad(set_to_none=True)``.

The oracle's CUDA workarounds (flash-like SDPA, fused dropout, AdamW's step count) are the
transformers path's (``tools/oracle/workarounds.py``). Llama-family configs only: the builders
take the Hugging Face config's shapes (``hidden_size``, heads, ``intermediate_size``,
``vocab_size``, ``tie_word_embeddings``, which selects Llama 3.2's ``TiedLinear`` output).
"""

from __future__ import annotations

from .run import (
    estimate_response,
    Unsupported,
    _logical_params,
    fake_parameters,
    hf_config_of,
    make_optimizer,
)

TRACED_KEYS = frozenset(
    {
        "chunked_loss",  # CEWithChunkedOutputLoss, the output projection chunk by chunk
        "chunked_loss_keeps_fp32",  # its logits.float() per chunk
        "logits_upcast_in_model",
        "optimizer_fused",  # the configs' torch.optim.AdamW(fused=True)
        "lora_dropout",
        "lora_adapter_dtype",  # LoRALinear built in the model dtype
        "attention_grouped_kv",  # MultiHeadAttention expands k/v before SDPA
        "attention_keeps_fused_qkv",  # separate q_proj, k_proj, v_proj
        "loss_outputs_kept",  # _loss_step: del logits before the backward
        "output_layer_chunked",  # TransformerDecoder.chunked_output
        "rope_cache_fp32",  # RotaryPositionalEmbeddings / Llama3ScaledRoPE cache buffer
        "zero_grad_set_to_none",  # the recipes' zero_grad(set_to_none=True)
    }
)
"""The torchtune profile's keys this stack runs as torchtune's code decides them (the request
may not set them otherwise); the profile's other keys are several-GPU or QLoRA paths
(``UNTRACED_KEYS`` and ``calc.frameworks.ORACLE_UNTRACED_KEYS``)."""
UNTRACED_KEYS = {
    "qlora_unchunked_quantization": "QLoRA: torchao's NF4Tensor is not traced (methods full and "
    "lora only)",
}
NUM_OUTPUT_CHUNKS = 8  # CEWithChunkedOutputLoss(num_output_chunks=8), torchtune 0.6.1
IGNORE_INDEX = -100


def versions() -> dict:
    import torch
    import torchtune

    return {"torch": torch.__version__, "torchtune": torchtune.__version__}


def _targets(req: dict) -> tuple[list[str], bool]:
    """torchtune's ``lora_attn_modules`` and ``apply_lora_to_mlp`` for calc's ``lora_targets``."""
    targets = req["lora_targets"]
    attn_names = {
        "q_proj": "q_proj",
        "k_proj": "k_proj",
        "v_proj": "v_proj",
        "o_proj": "output_proj",
    }
    if targets == "all-linear":
        return ["q_proj", "k_proj", "v_proj", "output_proj"], True
    names = set(targets)
    mlp = {"gate_proj", "up_proj", "down_proj"}
    if names & mlp and not mlp <= names:
        raise Unsupported("torchtune adapts the whole MLP or none of it (apply_lora_to_mlp)")
    unknown = names - mlp - set(attn_names)
    if unknown:
        raise Unsupported(f"torchtune has no LoRA target {sorted(unknown)}")
    return [attn_names[n] for n in ("q_proj", "k_proj", "v_proj", "o_proj") if n in names], bool(
        names & mlp
    )


def build_model(req: dict, options: dict):
    """torchtune's Llama 3 model on the meta device, as the recipe's ``_setup_model`` makes it."""
    import torch
    from torchtune import modules, training
    from torchtune.models.llama3_1 import _component_builders as llama3_1_builders
    from torchtune.models.llama3_2 import _component_builders as llama3_2_builders
    from torchtune.modules.peft import get_adapter_params, set_trainable_params

    hf = hf_config_of(req["model"])
    if hf.get("model_type") != "llama":
        raise Unsupported(
            f"torchtune stack: the oracle builds Llama models only, not {hf.get('model_type')}"
        )
    if req["precision"] not in ("bf16-true", "fp32"):
        raise Unsupported(
            f"torchtune recipes train in one dtype (bf16 or fp32), not {req['precision']}"
        )
    heads = hf["num_attention_heads"]
    shape = dict(
        vocab_size=hf["vocab_size"],
        num_layers=hf["num_hidden_layers"],
        num_heads=heads,
        num_kv_heads=hf.get("num_key_value_heads", heads),
        embed_dim=hf["hidden_size"],
        max_seq_len=hf.get("max_position_embeddings", 4096),
        intermediate_dim=hf["intermediate_size"],
        norm_eps=hf.get("rms_norm_eps", 1e-5),
        rope_base=hf.get("rope_theta", 500_000),
    )
    tied = bool(hf.get("tie_word_embeddings", False))
    builders = llama3_2_builders if tied else llama3_1_builders
    dtype = torch.bfloat16 if req["precision"] == "bf16-true" else torch.float32
    with training.set_default_dtype(dtype), torch.device("meta"):
        if req["method"] == "lora":
            attn, mlp = _targets(req)
            build = builders.lora_llama3_2 if tied else builders.lora_llama3_1
            model = build(
                lora_attn_modules=attn,
                apply_lora_to_mlp=mlp,
                apply_lora_to_output=False,
                lora_rank=req["lora_rank"],
                lora_alpha=options["lora_alpha"] or 2 * req["lora_rank"],
                lora_dropout=req["lora_dropout"],
                **shape,
            )
        elif req["method"] == "full":
            model = (builders.llama3_2 if tied else builders.llama3_1)(**shape)
        else:
            raise Unsupported(
                f"torchtune stack: method {req['method']} (QLoRA is torchao's NF4Tensor)"
            )
    for module in model.modules():
        # Llama 3.2's scaled RoPE (Llama3ScaledRoPE) builds its cache only off the meta device
        # (its frequencies are scaled in Python); torchtune's meta-device loaders call
        # rope_init() after materialising it. Built on the CPU here (max_seq_len x head_dim
        # values), made fake with the rest by fake_parameters.
        if hasattr(module, "rope_init") and not getattr(module, "is_cache_built", True):
            module.to_empty(device="cpu", recurse=False)
            module.rope_init()
    if req["method"] == "lora":
        set_trainable_params(model, get_adapter_params(model))
    if req["gradient_checkpointing"]:
        training.set_activation_checkpointing(
            model, auto_wrap_policy={modules.TransformerSelfAttentionLayer}
        )
    model.set_num_output_chunks(NUM_OUTPUT_CHUNKS)
    model.train()
    return model


class _HookedHead:
    """A callable output projection (``TiedLinear``) with the output-layer hook called first."""

    def __init__(self, head, hook):
        self.head, self.hook = head, hook

    def __call__(self, x):
        self.hook(None, (x,))
        return self.head(x)


def normalise(request: dict) -> tuple[dict, dict]:
    """calc's request with its defaults and the torchtune profile filled (calc validates), and
    the oracle options; a setting torchtune's recipe does not run is refused."""
    from calc.request import parse_estimate_request

    from .run import ORACLE_DEFAULTS

    req = dict(request)
    options = dict(ORACLE_DEFAULTS, **req.pop("oracle", {}))
    parsed = parse_estimate_request(req).to_dict()
    parsed["model"] = req["model"]
    if parsed.get("framework") != "torchtune":
        raise Unsupported("the torchtune stack traces framework torchtune only")
    if parsed["optimizer"] != "adamw" or not parsed["optimizer_fused"]:
        raise Unsupported("torchtune's configs: torch.optim.AdamW(fused=True)")
    if parsed["attention"] != "sdpa":
        raise Unsupported("torchtune's attention is SDPA (or flex attention for packed samples)")
    if parsed["num_gpus"] != 1 or parsed["sharding"] != "none" or parsed["cpu_offload"] != "none":
        raise Unsupported("one GPU, no sharding, no offload")
    if parsed.get("activation_offload"):
        raise Unsupported("activation offloading copies to host memory")
    return parsed, options


def run_steps(req: dict, options: dict) -> dict:
    """Trace torchtune's training step ``options["steps"]`` times; the last one's peaks, by
    phase, with the phases of ``tools/oracle/run.py``."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torchtune.modules.loss import CEWithChunkedOutputLoss

    from .tracker import LiveStorageTracker
    from .workarounds import adam_step_value, cuda_dropout, flash_like_sdpa

    model = build_model(req, options)
    tracker = LiveStorageTracker(debug=bool(options.get("debug")))
    counter = {"step": 0}
    b, s = req["micro_batch_size"], req["seq_len"]
    loss_fn = CEWithChunkedOutputLoss(
        num_output_chunks=NUM_OUTPUT_CHUNKS, ignore_index=IGNORE_INDEX
    )

    def to_backward(_grad):
        tracker.context = "activations"
        if tracker.phase == "forward_end":
            tracker.set_phase("backward")

    def head_pre(_module, args):
        tracker.context = "logits"
        if torch.is_grad_enabled() and args and args[0].requires_grad:
            args[0].register_hook(to_backward)

    if isinstance(model.output, torch.nn.Module):
        model.output.register_forward_pre_hook(head_pre)
    else:  # Llama 3.2's TiedLinear: a callable reading the embedding's weight
        model.output = _HookedHead(model.output, head_pre)
    with (
        FakeTensorMode(allow_non_fake_inputs=False),
        tracker,
        flash_like_sdpa(),
        adam_step_value(counter),
        cuda_dropout(),
    ):
        fake_parameters(model, tracker)
        params = [p for p in model.parameters() if p.requires_grad]
        for p in params:
            p.register_post_accumulate_grad_hook(lambda q: tracker.track(q.grad, "gradients"))
        optimizer = make_optimizer(req, params)
        ignore_labels_cache = torch.full((b, 1), IGNORE_INDEX, dtype=torch.long)
        for step in range(1, options["steps"] + 1):
            counter["step"] = step
            tokens = torch.zeros((b, s), dtype=torch.long)
            labels = torch.zeros((b, s), dtype=torch.long)
            last = step == options["steps"]
            tracker.context = "activations"
            if last:
                tracker.peaks.clear()
                tracker.set_phase("forward_end")
            # recipes/lora_finetune_single_device.py _loss_step and train (0.6.1)
            current_num_tokens = (labels != IGNORE_INDEX).sum()
            logits = model(tokens)
            labels = torch.hstack((labels[..., 1:], ignore_labels_cache[: labels.shape[0]]))
            if not isinstance(logits, list):
                labels = labels.reshape(-1)
                logits = logits.reshape(-1, logits.size(-1))
            loss = loss_fn(logits, labels)
            del logits
            current_loss = loss * current_num_tokens
            del loss
            current_loss.backward()
            del current_loss
            if tracker.phase == "forward_end":
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
            optimizer.zero_grad(set_to_none=True)
        params_total = _logical_params(model)
        trainable = sum(p.numel() for p in params)
    phases, components = tracker.phase_peaks()
    return {
        "phases": phases,
        "components": components,
        "params_total": params_total,
        "params_trainable": trainable,
    }


def oracle_estimate(request: dict) -> dict:
    """calc's estimate request (``framework`` ``torchtune``) traced through torchtune."""
    req, options = normalise(request)
    return estimate_response(run_steps(req, options), options, versions())


__all__ = ["oracle_estimate", "versions"]
