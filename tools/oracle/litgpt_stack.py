"""The oracle on LitGPT's own code path (the ``litgpt`` profile).

Run in a venv with LitGPT (``tools/requirements-oracle-litgpt.txt``: litgpt 0.5.13 and the
Lightning it imports, on the transformers 5 venv's torch). What runs is LitGPT's, as its
single-device ``finetune`` commands run it (``litgpt/finetune/lora.py``, ``full.py``, 0.5.13):

- the model ``litgpt.lora.GPT`` / ``litgpt.model.GPT`` from a ``Config`` with the Hugging Face
  config's shapes (LLaMA blocks: ``LLaMAMLP``, ``RMSNorm``, the fused ``attn`` q/k/v linear,
  k/v expanded to every query head before SDPA, an untied ``lm_head``), built in bf16 (the
  ``bf16-true`` precision's ``fabric.init_module``) on the meta device, ``max_seq_length`` set
  to the micro-batch's length as the script sets it to the longest sample;
- ``mark_only_lora_as_trainable(model)`` for LoRA (``LoRALinear`` / ``LoRAQKVLinear`` adapters
  in the model dtype, ``lora_dropout`` 0.05 by default);
- LoRA: ``logits = model(input_ids, lm_head_chunk_size=128)``, ``logits[-1] =
  logits[-1][..., :-1, :]``, ``chunked_cross_entropy(logits, targets[..., 1:])`` (cross-entropy
  on the 16-bit chunks); full: ``logits = model(input_ids)`` and
  ``chunked_cross_entropy(logits[..., :-1, :], targets[..., 1:])`` (the whole logits, the loss
  chunked); ``loss.backward()``; the ``logits`` variable lives on into the next step's forward,
  as in the script's loop;
- ``torch.optim.AdamW`` as ``instantiate_torch_optimizer`` builds it (neither ``foreach`` nor
  ``fused``: foreach on CUDA), ``optimizer.zero_grad()``.

LitGPT checkpoints activations only under FSDP on several GPUs (``FSDPStrategy``
``activation_checkpointing_policy``); the oracle runs one process, so no checkpointing setup.
QLoRA is Lightning's ``BitsandbytesPrecision`` (not traced). The oracle's CUDA workarounds are
the transformers path's (``tools/oracle/workarounds.py``).
"""

from __future__ import annotations

from .run import (
    estimate_response,
    ORACLE_DEFAULTS,
    Unsupported,
    _logical_params,
    fake_parameters,
    hf_config_of,
)

LM_HEAD_CHUNK_SIZE = 128  # finetune/lora.py: model(input_ids, lm_head_chunk_size=128)
LLAMA_LIKE = ("llama", "mistral")

TRACED_KEYS = frozenset(
    {
        "zero_grad_set_to_none",  # optimizer.zero_grad(): set_to_none=True on torch 2
        "attention_keeps_fused_qkv",  # CausalSelfAttention's fused attn linear, split by views
        "lora_dropout",
        "chunked_loss",  # chunked_cross_entropy
        "optimizer_fused",  # AdamW without foreach/fused: foreach on CUDA
        "lora_adapter_dtype",  # adapters in the model dtype
        "attention_grouped_kv",  # k/v expanded before SDPA
        "loss_outputs_kept",
        "previous_outputs_kept",  # the loop's logits variable alive into the next forward
        "chunked_loss_holds_logits",  # chunked_cross_entropy on the loop's 16-bit logits
        "lora_fused_qkv_adapter",  # LoRAQKVLinear: one dropout, zero_pad's index_copy_
    }
)
"""The litgpt profile's keys this stack runs as LitGPT's code decides them; the others are
QLoRA or several-GPU paths (``UNTRACED_KEYS``, ``calc.frameworks.ORACLE_UNTRACED_KEYS``)."""
UNTRACED_KEYS = {
    "qlora_output_layer_quantized": "QLoRA: Lightning's BitsandbytesPrecision is not traced",
    "qlora_dequant_fp16": "QLoRA: Lightning's BitsandbytesPrecision is not traced",
    "fsdp_flat_parameters": "several GPUs (FSDP flat parameters); the oracle runs one process",
}


def versions() -> dict:
    import litgpt
    import lightning
    import torch
    from importlib.metadata import version

    del litgpt
    return {
        "torch": torch.__version__,
        "litgpt": version("litgpt"),
        "lightning": lightning.__version__,
    }


def normalise(request: dict) -> tuple[dict, dict]:
    """calc's request with its defaults and the litgpt profile filled (calc validates), and the
    oracle options; a setting LitGPT's single-device scripts do not run is refused."""
    from calc.request import parse_estimate_request

    req = dict(request)
    options = dict(ORACLE_DEFAULTS, **req.pop("oracle", {}))
    parsed = parse_estimate_request(req).to_dict()
    parsed["model"] = req["model"]
    if parsed.get("framework") != "litgpt":
        raise Unsupported("the LitGPT stack traces framework litgpt only")
    if parsed["method"] not in ("full", "lora"):
        raise Unsupported("QLoRA is Lightning's BitsandbytesPrecision (not traced)")
    if parsed["precision"] != "bf16-true":
        raise Unsupported("the LitGPT stack runs the bf16-true precision")
    if parsed["optimizer"] != "adamw" or parsed["optimizer_fused"]:
        raise Unsupported("LitGPT's scripts: torch.optim.AdamW (foreach on CUDA)")
    if parsed["gradient_checkpointing"]:
        raise Unsupported("LitGPT checkpoints activations only under FSDP on several GPUs")
    if parsed["attention"] != "sdpa":
        raise Unsupported("LitGPT's attention is SDPA")
    if parsed["num_gpus"] != 1 or parsed["sharding"] != "none" or parsed["cpu_offload"] != "none":
        raise Unsupported("one GPU, no sharding, no offload")
    return parsed, options


def _lora_flags(req: dict) -> dict:
    """LitGPT's ``lora_query`` ... ``lora_head`` for calc's ``lora_targets``."""
    targets = req["lora_targets"]
    if targets == "all-linear":
        names = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
    else:
        names = set(targets)
    mlp = {"gate_proj", "up_proj", "down_proj"}
    if names & mlp and not mlp <= names:
        raise Unsupported("LitGPT adapts the whole MLP or none of it (lora_mlp)")
    unknown = names - mlp - {"q_proj", "k_proj", "v_proj", "o_proj"}
    if unknown:
        raise Unsupported(f"LitGPT has no LoRA target {sorted(unknown)}")
    return {
        "lora_query": "q_proj" in names,
        "lora_key": "k_proj" in names,
        "lora_value": "v_proj" in names,
        "lora_projection": "o_proj" in names,
        "lora_mlp": bool(names & mlp),
        "lora_head": False,
    }


def build_model(req: dict, options: dict):
    """LitGPT's model on the meta device, as the finetune script makes it."""
    import torch

    hf = hf_config_of(req["model"])
    if hf.get("model_type") not in LLAMA_LIKE or hf.get("tie_word_embeddings"):
        raise Unsupported("the LitGPT stack builds untied LLaMA-style models only")
    heads = hf["num_attention_heads"]
    shape = dict(
        name="oracle",
        block_size=hf.get("max_position_embeddings", 4096),
        vocab_size=hf["vocab_size"],
        padded_vocab_size=hf["vocab_size"],
        n_layer=hf["num_hidden_layers"],
        n_head=heads,
        n_embd=hf["hidden_size"],
        n_query_groups=hf.get("num_key_value_heads", heads),
        head_size=hf.get("head_dim") or hf["hidden_size"] // heads,
        rotary_percentage=1.0,
        parallel_residual=False,
        bias=False,
        norm_class_name="RMSNorm",
        norm_eps=hf.get("rms_norm_eps", 1e-5),
        mlp_class_name="LLaMAMLP",
        intermediate_size=hf["intermediate_size"],
        rope_base=int(hf.get("rope_theta", 10000)),
    )
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)  # fabric.init_module under bf16-true
    try:
        with torch.device("meta"):
            if req["method"] == "lora":
                from litgpt.lora import GPT, Config, mark_only_lora_as_trainable

                config = Config(
                    **shape,
                    lora_r=req["lora_rank"],
                    lora_alpha=options["lora_alpha"] or 2 * req["lora_rank"],
                    lora_dropout=req["lora_dropout"],
                    **_lora_flags(req),
                )
                model = GPT(config)
                mark_only_lora_as_trainable(model)
            else:
                from litgpt.config import Config
                from litgpt.model import GPT

                model = GPT(Config(**shape))
            model.max_seq_length = req["seq_len"]
    finally:
        torch.set_default_dtype(previous)
    model.train()
    return model


def run_steps(req: dict, options: dict) -> dict:
    """Trace LitGPT's training step ``options["steps"]`` times; the last one's peaks, by phase,
    with the phases of ``tools/oracle/run.py``."""
    import torch
    from litgpt.utils import chunked_cross_entropy
    from torch._subclasses.fake_tensor import FakeTensorMode

    from .tracker import LiveStorageTracker
    from .workarounds import adam_step_value, cuda_dropout, flash_like_sdpa

    model = build_model(req, options)
    tracker = LiveStorageTracker(debug=bool(options.get("debug")))
    counter = {"step": 0}
    b, s = req["micro_batch_size"], req["seq_len"]
    lora = req["method"] == "lora"

    def to_backward(_grad):
        tracker.context = "activations"
        if tracker.phase == "forward_end":
            tracker.set_phase("backward")

    def head_pre(_module, args):
        tracker.context = "logits"
        if torch.is_grad_enabled() and args and args[0].requires_grad:
            args[0].register_hook(to_backward)

    model.lm_head.register_forward_pre_hook(head_pre)
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
        # instantiate_torch_optimizer("AdamW", ...): neither foreach nor fused, foreach on CUDA
        optimizer = torch.optim.AdamW(params, lr=1e-5, foreach=True)
        logits = None  # the script's loop variable: alive until the next assignment
        for step in range(1, options["steps"] + 1):
            counter["step"] = step
            input_ids = torch.zeros((b, s), dtype=torch.long)
            targets = torch.zeros((b, s), dtype=torch.long)
            last = step == options["steps"]
            tracker.context = "activations"
            if last:
                tracker.peaks.clear()
                tracker.set_phase("forward_end")
            if lora:  # finetune/lora.py fit()
                logits = model(input_ids, lm_head_chunk_size=LM_HEAD_CHUNK_SIZE)
                logits[-1] = logits[-1][..., :-1, :]
                loss = chunked_cross_entropy(logits, targets[..., 1:])
            else:  # finetune/full.py fit()
                logits = model(input_ids)
                loss = chunked_cross_entropy(logits[..., :-1, :], targets[..., 1:])
            loss.backward()
            del loss
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
            optimizer.zero_grad()
        del logits
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
    """calc's estimate request (``framework`` ``litgpt``) traced through LitGPT."""
    req, options = normalise(request)
    return estimate_response(run_steps(req, options), options, versions())
