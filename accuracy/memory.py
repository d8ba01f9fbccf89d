"""Validation of the memory model against published measurements.

``validation/measured_peaks.csv`` rows -> estimate requests -> predicted figure of the
field the row measured (allocated, reserved, or model states for the ZeRO paper's
analytical rows) -> signed error. Importable: :func:`compare_rows` returns one
:class:`RowResult` per CSV row (covered or not, with the reason), :func:`summary`
the aggregate figures. ``python -m benchmarks.validate_memory`` prints them; the site renders them.

Mapping rules (one rule per CSV vocabulary, no per-row values):
- ``memory_metric``: ``max_memory_allocated`` and ``active`` -> ``peak_allocated_bytes``
  (active bytes track allocated); ``reserved`` -> ``peak_reserved_bytes``; a stat that
  is "not stated" -> ``peak_reserved_bytes`` (torchtune's own tutorial quotes reserved,
  and row 8 equals the tutorial's reserved figure); ``formula`` -> model states.
- ``seq_len`` ``<=N``: not covered (the peak follows the longest sample, unknown).
- Measured below the stated configuration's own weights + optimizer states: not covered
  (the configuration is misreported; e.g. 1 GPU cannot hold AdamW states of 3B params
  in less than 24 GB).
- Gradient accumulation: the row's ``grad_accum`` ("128/mbs" -> 128 // mbs), else the
  framework's documented config (:data:`LITGPT_CONFIG_HUB`), else 1. torchtune's
  recipes reduce gradients on every micro-batch (no ``no_sync`` in
  ``recipes/*_distributed.py`` at the cited commits): ``sync_each_micro_batch``.
- Adapter dropout, where the row does not state it, is the framework's default of that
  version: torchtune's LoRA builders ``lora_dropout=0.05`` until commit d7fae9677
  (2024-09-11, "expose and set lora_dropout = 0.0"), 0.0 after; LitGPT 0.05
  (``finetune/lora.py`` at 8641822; ``lora_dropout: 0.05`` in every config_hub LoRA yaml).
- bitsandbytes QLoRA rows with bitsandbytes < 0.43.2 (LitGPT 2023: 0.41.1 stated;
  config_hub rows: LitGPT pinned ``bitsandbytes==0.42.0`` in pyproject.toml through
  Sep 2024) set ``qlora_keeps_inputs``.
- torchtune QLoRA rows whose commit pinned ``torchao==0.1`` (pyproject.toml from f97bcdaa0,
  2024-04-09, until c1c9f308a, 2024-06-26, "Pin ao==0.3") set
  ``qlora_unchunked_quantization``: torchao before v0.2.0 quantizes each weight in one pass
  (:data:`TORCHAO_CHUNKED_FROM`).
- LitGPT rows whose note says the longest sample is forced into iteration 0
  (:data:`LONGEST_FIRST_NOTE`) set ``previous_outputs_kept`` to False.
- LitGPT rows set ``attention_keeps_fused_qkv`` (its ``CausalSelfAttention`` at 8641822,
  5895df10 and 00af8b0d; the setting changes nothing on models with grouped k/v heads).
- torchtune rows before ``del logits`` (:data:`TORCHTUNE_DEL_LOGITS_FROM`) set
  ``loss_outputs_kept``: the recipe kept the model's fp32 logits through the backward.
- torchtune config files that contradict a setting the CSV attributes to "config default"
  (:data:`TORCHTUNE_CONFIGS`).
- Measured below the stated configuration's floor: not covered. The floor is what any
  run of that configuration must hold at once: weights, optimizer states and all
  gradients on the GPU (``model_states_bytes``), plus the activations every
  implementation saves (:func:`activation_floor_bytes`), plus the FSDP root unit
  (:func:`fsdp_root_bytes`).
- ``grad_checkpointing`` "not stated": not covered (the setting decides the result).
- Cumulative tables ("... +X"): a row has the options of the rows above it.
- Packing fills every sample to ``seq_len``: modelled as full sequences of that length.
- FSDP1 wrapping a model loaded on the CPU (``fsdp_wrap_floor``): Answer.AI's rows through the
  ``hf-custom-loop`` profile, the PEFT FSDP rows through their accelerate config
  (:data:`PEFT_FSDP_CONFIG`); its slack, fitted on the rows where it applies
  (:func:`fit_fsdp1_slack`), is printed with its per-row spread.
- ``torch.compile``: ``torch_compile`` (its fitted share, :func:`fit_compile_kept`);
  such rows stay flagged ``compile`` and the summary also gives the figures without them.
"""

from __future__ import annotations

import csv
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from accuracy import DATA_DIR
from accuracy.stats import percentile
from calc import memory, states
from calc.errors import CalcError
from calc.request import Sharding, parse_estimate_request

CSV_PATH = DATA_DIR / "measured_peaks.csv"

MODEL_IDS = {
    "Llama-2-7B": "llama-2-7b",
    "Llama-2-13B": "llama-2-13b",
    "Llama-2-70B": "llama-2-70b",
    "Llama-3-8B": "llama-3-8b",
    "Llama-3.1-8B": "llama-3.1-8b",
    "Llama-3.1-70B": "llama-3.1-70b",
    "Llama-3.1-405B": "llama-3.1-405b",
    "Llama-3.2-1B": "llama-3.2-1b",
    "Llama-3.2-3B": "llama-3.2-3b",
    "Mistral-7B": "mistral-7b",
    "TinyLlama-1.1B": "tinyllama-1.1b",
    "gemma-2b": "gemma-2b",
    "phi-1.5": "phi-1.5",
    "phi-2": "phi-2",
    "StableLM-base-alpha-3B": "stablelm-base-alpha-3b",
}
"""CSV model names -> preset ids (calc/data/models.json)."""

UNIT_BYTES = {"GB": 10**9, "GiB": 2**30}

ALL_LINEAR_TARGETS = (
    "all-linear",
    "q,k,v,o + MLP",
    "q,k,v,o + MLP (w1,w2,w3)",
    "q,k,v,o + MLP + output proj (all layers)",
    "all layers (q,k,v,o, MLP, output)",
)
"""Target lists meaning every block linear (the output layer's adapter, where listed,
is not expressible; it adds ``r * (h + V)`` parameters, under 0.1 % of any row)."""

LITGPT_CONFIG_HUB = {
    ("TinyLlama-1.1B", "LoRA"): {"lora_targets": "all-linear"},
    ("TinyLlama-1.1B", "QLoRA"): {"lora_targets": "all-linear"},
    ("gemma-2b", "full"): {"num_gpus": 4, "gradient_accumulation_steps": 16 // (4 * 1)},
    ("phi-2", "full"): {"num_gpus": 2, "gradient_accumulation_steps": 8 // (2 * 4)},
    ("Llama-3.2-1B", "full"): {"gradient_accumulation_steps": 64 // 4},
    ("Llama-3.2-3B", "full"): {"gradient_accumulation_steps": 64 // 4},
    ("TinyLlama-1.1B", "full"): {"gradient_accumulation_steps": 32 // 4},
}
"""Settings of LitGPT ``config_hub/finetune/<model>/<method>.yaml`` (commit 5895df10,
2024-04-26, when the benchmark table was generated; 00af8b0d for Llama 3.2) where the CSV
row leaves them out or contradicts them: tiny-llama lora/qlora set ``lora_query, key,
value, projection, mlp, head: true`` (all linears; the head adapter adds ``r (h + V)``
parameters, not expressible, under 0.2 % of the row); ``devices`` and
``gradient_accumulation_iters = global_batch_size // devices // micro_batch_size``
(the README table's "4xA10G" is the machine, not the devices used: tiny-llama full shows
the same 14.10 GB on 1xA10G and 4xA10G)."""

TORCHTUNE_CONFIGS = {
    ("Llama-3.1-405B", "QLoRA"): {"chunked_loss": False},
}
"""Settings of torchtune ``recipes/configs/<model>/<config>.yaml`` at the row's commit where
the CSV calls a setting the config default and the file says otherwise (settings the README
states outright are kept). ``llama3_1/405B_qlora.yaml`` at 30b8519e8 (2024-09-24, the
README commit of row 20; unchanged in this respect from 27d103bd1 through 2c948c6c1) sets
``loss: torch.nn.CrossEntropyLoss``, not ``CEWithChunkedOutputLoss`` as the 8B and 70B
configs do. The same file says ``batch_size: 1``, ``gradient_accumulation_steps: 16``, no
``packed`` and no ``compile`` (both default False in recipes/lora_finetune_distributed.py),
but the README note above the table states "batch size 2 (without gradient accumulation),
a dataset packed to sequence length 2048, and torch compile enabled" for all rows, so
those stay as the CSV has them."""

LONGEST_FIRST_NOTE = "forces the longest training sample into iteration 0"
"""Note of LitGPT rows whose peak is the first iteration's: lit-gpt 8641822 (2023)
``finetune/lora.py`` line 212 puts the longest sample into iteration 0
(``get_batch(fabric, train_data, longest_seq_ix if iter_num == 0 else None)``), so the
peak is the step no earlier micro-batch precedes: such rows set ``previous_outputs_kept``
to False (the ``litgpt`` profile sets it; the 2024 loops sample batches in order,
``CycleIterator``, with no such first step)."""

PEFT_SFT_EXAMPLE = {"lora_dropout": 0.1}
"""Settings of PEFT's ``examples/sft/run_peft_qlora_deepspeed_stage3.sh`` and
``run_peft_qlora_fsdp.sh`` (quoted in docs/source/accelerate/deepspeed.md and fsdp.md at the
rows' commits) that the CSV columns do not hold: ``--lora_dropout 0.1``."""

PEFT_FSDP_CONFIG = {"fsdp_wrap_floor": True}
"""PEFT's ``examples/sft/configs/fsdp_config_qlora.yaml`` (commit 1948110), which fsdp.md's run
uses: ``fsdp_cpu_ram_efficient_loading: true``, ``fsdp_sync_module_states: true``,
``fsdp_use_orig_params: false``: accelerate's FSDP1 wraps a model loaded on rank 0's CPU, as
``fsdp_wrap_floor`` describes (the Trainer drops the outputs, so the slack stays generic)."""

ANSWERAI_TRAIN_DEFAULTS = {
    "lora_dropout": 0.1,
    "lora_adapter_dtype": "base",
    "attention_grouped_kv": False,
    "logits_upcast_in_model": True,
}
"""Settings of Answer.AI's ``fsdp_qlora/train.py`` (``main`` at 50efa1e, 2024-03-26) that the
CSV columns do not hold, where they differ from today's ``hf-custom-loop`` profile:
``lora_dropout: float = 0.1`` (rank 64, alpha 16 and the targets ``k, q, v, up, down, gate``
for ``lora_target_modules="all"`` are in the rows); ``--precision bf16`` casts every parameter,
adapters included, to bf16 (its README, "bf16": "sharded and unsharded params will be stored in
bf16"), so no fp32 adapters; transformers of March 2024 (4.38) expanded k, v with ``repeat_kv``
before SDPA (``enable_gqa`` came later); and that transformers up-casts the logits to fp32
inside the model (4.38.2 ``models/llama/modeling_llama.py`` line 1196, ``logits =
logits.float()``, in every release from 4.31 to 4.44), so the output object the loop keeps
holds ``4 V`` bytes per token (``logits_upcast_in_model``)."""

TORCHAO_CHUNKED_FROM = "2024-06-26"
"""torchtune commit c1c9f308a ("Pin ao==0.3") replaced the ``torchao==0.1`` pin; torchao
v0.1 (tag ff2889540) quantizes a whole weight at once in
``NF4Tensor.convert_to_norm_float_weight``; chunking came with PR #196 (6081796, in v0.2.0)."""

TORCHTUNE_FUSED_ADAMW_FROM = "2024-09-14"
"""torchtune commit cca50f02e ("add fused = true to adam, except pagedAdam", #1575) set
``fused: True`` on every ``torch.optim.AdamW`` in ``recipes/configs``; at 30b8519e8 and
1814feb17 each llama3_1 / llama3_2 config with torch AdamW has it (70B_full.yaml
recommends it in a comment). Before it the llama2 configs (fef3ed10d, 0217d44c2) leave
torch's default, the foreach path. Rows whose optimizer text names ``fused`` keep it."""

TORCHTUNE_DEL_LOGITS_FROM = "2024-07-28"
"""torchtune commit 8a98fbaa3 ("[memory Improvement] delete logits before bwd", #1235) added
``del logits`` between the loss and ``loss.backward()`` in every recipe. Before it (the
README tables at fef3ed10d and 0217d44c2, the tutorials of April 2024) each recipe kept
``logits = self._model(input_ids)`` (then ``logits[..., :-1, :].contiguous()``) in a local
through the backward: ``recipes/full_finetune_single_device.py`` lines 416-426,
``full_finetune_distributed.py`` 478-488, ``lora_finetune_single_device.py`` 460-469 and
``lora_finetune_distributed.py`` 553-563 at 0217d44c2 (lines 403-430, 440-465, 447-468,
537-560 at fef3ed10d). The model returned them in fp32 (``modules/transformer.py`` line 210,
``output = self.output(h).float()``; the profile's ``logits_upcast_in_model``): such rows set
``loss_outputs_kept``."""

TORCHTUNE_FSDP2_FROM = "2024-08-11"
"""torchtune commits afd23fd0b ("Full finetune FSDP2 recipe", #1287, 2024-08-11) and 6deeda92c
("LoRA FSDP2 recipe migration", #1517, 2024-09-10) replaced FSDP1 in the distributed recipes.
Before them (the README tables at fef3ed10d and 0217d44c2) ``lora_finetune_distributed.py``
and ``full_finetune_distributed.py`` built the model on rank 0's CPU (the other ranks on the
meta device), loaded the checkpoint there and wrapped it with
``FullyShardedDataParallel(..., device_id=..., sync_module_states=True,
param_init_fn=to_empty)``, decoder layers as units (fef3ed10d
``lora_finetune_distributed.py`` lines 279-349): Answer.AI's ``train.py`` pattern, so such
multi-GPU rows set ``fsdp_wrap_floor``."""

TORCHTUNE_DROPOUT_ZERO_FROM = "2024-09-11"
"""torchtune commit d7fae9677 set the LoRA builders' ``lora_dropout`` default to 0.0."""

SHORT_TARGETS = {
    "q,v": ("q", "v"),
    "q,k,v": ("q", "k", "v"),
    "q,v,o + MLP": ("q", "v", "o", "mlp"),
    "q,k,v + MLP": ("q", "k", "v", "mlp"),
}

ZERO_SHARDING = {"DDP": "ddp", "ZeRO-1": "zero1", "ZeRO-2": "zero2", "ZeRO-3": "zero3"}


@dataclass(frozen=True)
class RowResult:
    """One CSV row against the model. ``covered`` False comes with ``reason``."""

    row_id: str
    source: str
    model: str
    method: str
    metric: str  # allocated | reserved | model_states
    measured_bytes: int
    predicted_bytes: int = 0
    error: float = 0.0  # (predicted - measured) / measured
    covered: bool = True
    reason: str = ""
    flags: tuple = ()
    request: dict = field(default_factory=dict)
    allocated_bytes: int = 0  # predicted peak_allocated_bytes (for the slack fit)
    reserved_floor_bytes: int = 0  # predicted reserved floor: quantization or FSDP1 wrap (idem)
    device_extra_bytes: int = 0  # device_total_bytes - peak_reserved_bytes (CUDA context, NCCL)
    source_key: str = ""  # the publication (:func:`source_key`)
    fsdp1: bool = False  # the FSDP1 slack applies (calc.memory.fsdp1_slack_applies)


class NotCovered(Exception):
    """A row the request contract cannot express; ``args[0]`` is the reason code."""


def _names_for(arch, short: tuple) -> list:
    """Map q/k/v/o/mlp shorthands to the model's HF module names."""
    names = arch.linear_names()
    fused = {"q": "query_key_value", "k": "query_key_value", "v": "query_key_value"}
    table = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj"}
    out = []
    for s in short:
        if s == "mlp":
            out += [l.name for l in arch.linears if l.role == "mlp"]
            continue
        name = table[s] if table[s] in names else fused.get(s, "")
        if name not in names:
            raise NotCovered("lora_target_not_in_model")
        out.append(name)
    return list(dict.fromkeys(out))


def _targets(row: dict, arch) -> object:
    text = row["lora_targets"]
    if text in ALL_LINEAR_TARGETS:
        return "all-linear"
    if text in SHORT_TARGETS:
        return _names_for(arch, SHORT_TARGETS[text])
    raise NotCovered("lora_targets_unknown")


def _optimizer(text: str) -> tuple[str, bool]:
    """(optimizer, optimizer_in_backward) from the CSV's optimizer text."""
    in_bwd = "optimizer_in_bwd" in text or "in backward" in text or "into backward" in text
    if "PagedAdamW8bit" in text:
        return "paged-adamw-8bit", in_bwd
    if "PagedAdamW" in text:
        return "paged-adamw", in_bwd
    if "AdamW8bit" in text:
        return "adamw-8bit", in_bwd
    return "adamw", in_bwd


def _precision(text: str) -> str:
    if "bf16-mixed" in text:
        return "bf16-mixed"
    if "fp16 mixed" in text:
        return "fp16-mixed"
    return "bf16-true"


def _checkpointing(text: str) -> bool:
    if "not stated" in text and "default" not in text:
        raise NotCovered("gradient_checkpointing_not_stated")
    if text.startswith("yes"):
        return True
    if text.startswith("no") or text.startswith("config default = no"):
        return False
    raise NotCovered("gradient_checkpointing_not_stated")


def _metric(text: str) -> str:
    low = text.lower()
    if low == "formula":
        return "model_states"
    if "nvidia-smi" in low or "nvml" in low:
        return "device"
    if "not stated" in low:
        return "reserved"
    if "allocated" in low or "active" in low:
        return "allocated"
    return "reserved"


def _sharding(row: dict) -> tuple[str, int]:
    gpus = int(row["num_gpus"] or 1)
    text = row["sharding"]
    if text.startswith("FSDP"):
        return "zero3", gpus
    for key, value in ZERO_SHARDING.items():
        if text.startswith(key):
            return value, gpus
    return "none", gpus


def row_request(row: dict) -> dict:
    """The estimate request a CSV row describes; raises :class:`NotCovered`."""
    model = MODEL_IDS.get(row["model"])
    if model is None:
        raise NotCovered("model_not_in_presets")
    seq = row["seq_len"]
    if not seq.isdigit():
        raise NotCovered("seq_len_upper_bound_only")
    method = row["method"].lower()
    optimizer, in_bwd = _optimizer(row["optimizer"])
    sharding, gpus = _sharding(row)
    source = _source(row)
    opts = row["_opts"].lower()
    req = {
        "model": model,
        "method": method,
        "precision": _precision(row["compute_precision"]),
        "optimizer": optimizer,
        "optimizer_in_backward": in_bwd,
        "micro_batch_size": int(row["micro_batch_size"]),
        "seq_len": int(seq),
        "gradient_checkpointing": _checkpointing(row["grad_checkpointing"]),
        "attention": "sdpa",
        "chunked_loss": "chunked" in opts,
        "activation_offload": "activation offloading" in opts,
        "num_gpus": gpus,
        "sharding": sharding,
        "cpu_offload": "optimizer+params" if row["cpu_offload"].startswith("yes") else "none",
    }
    req["gradient_accumulation_steps"] = _accumulation(row, source)
    req["framework"] = source  # the profile fills what the row's library decides (calc.frameworks)
    req["torch_compile"] = "compile" in opts
    if optimizer == "adamw":
        req["optimizer_fused"] = "fused=True" in row["optimizer"] or (
            source == "torchtune" and _row_date(row) >= TORCHTUNE_FUSED_ADAMW_FROM
        )
    if method != "full":
        from calc.presets import get_preset

        req["lora_rank"] = int(row["lora_rank"])
        req["lora_targets"] = _targets(row, get_preset(model))
        dropout = _lora_dropout(row, source)
        if dropout is not None:
            req["lora_dropout"] = dropout
        if method == "qlora":
            fmt = row["base_weight_format"]
            req["qlora_double_quant"] = "torchao" in fmt or "double quant" in fmt
            req["qlora_keeps_inputs"] = "bitsandbytes" in fmt and (
                source == "litgpt" or _bnb_before_fix(fmt)
            )
            req["qlora_unchunked_quantization"] = (
                "torchao" in fmt and source == "torchtune" and _row_date(row) < TORCHAO_CHUNKED_FROM
            )
    if source == "torchtune":
        req.update(TORCHTUNE_CONFIGS.get((row["model"], row["method"]), {}))
        if _row_date(row) < TORCHTUNE_DEL_LOGITS_FROM:
            req["loss_outputs_kept"] = True
        if _row_date(row) < TORCHTUNE_FSDP2_FROM and req.get("num_gpus", 1) > 1:
            req["fsdp_wrap_floor"] = True
    if source == "hf-trainer":
        req.update(PEFT_SFT_EXAMPLE if "huggingface/peft" in row["source"] else {})
        req.update(
            PEFT_FSDP_CONFIG
            if "huggingface/peft" in row["source"] and row["sharding"].startswith("FSDP")
            else {}
        )
        # DeepSpeed's engine reduce-scatters every micro-batch; accelerate's FSDP uses no_sync
        req["sync_each_micro_batch"] = "DeepSpeed" in row["sharding"]
        if "DeepSpeed" in row["sharding"]:
            req["sharding_engine"] = (
                "deepspeed"  # the row's stated engine (sub-group step, reduce bucket)
            )
    if "fsdp_qlora" in row["source"]:
        req.update(ANSWERAI_TRAIN_DEFAULTS)
    if source == "litgpt":
        req["model"] = _litgpt_model(model)
        if LONGEST_FIRST_NOTE in row["notes"]:
            req["previous_outputs_kept"] = False  # the peak is iteration 0's: nothing before it
        req.update(
            LITGPT_CONFIG_HUB.get((row["model"], row["method"]), {})
            if "config_hub" in row["source"]
            else {}
        )
    if req["num_gpus"] == 1:
        req["gradient_accumulation_steps"] = max(1, req["gradient_accumulation_steps"])
    return req


def _bnb_before_fix(fmt: str) -> bool:
    """A stated bitsandbytes version before 0.43.2, whose ``MatMul4Bit`` kept its input
    (``qlora_keeps_inputs``; fixed by bitsandbytes PR #1270)."""
    words = fmt.replace(",", " ").replace("(", " ").replace(")", " ").split()
    for word, nxt in zip(words, words[1:], strict=False):
        if word == "bitsandbytes" and nxt[:1].isdigit():
            parts = tuple(int(x) for x in nxt.split(".")[:3] if x.isdigit())
            return parts < (0, 43, 2)
    return False


def _litgpt_model(preset_id: str) -> object:
    """LitGPT (8641822 and through 00af8b0d, Sep 2024) builds ``lm_head`` and ``wte`` as
    separate parameters (no weight-tying option in ``litgpt/config.py``; its checkpoint
    converter copies the embedding into ``lm_head``): a preset that ties them becomes its
    own config with ``tie_word_embeddings: false``."""
    from calc.presets import preset_row

    config = preset_row(preset_id)["config"]
    if not config.get("tie_word_embeddings"):
        return preset_id
    return {"hf_config": {**config, "tie_word_embeddings": False}, "name": preset_id}


def _accumulation(row: dict, source: str) -> int:
    """Micro-batches per optimizer step: the row's ``grad_accum``, else the config's."""
    text = row["grad_accum"].strip()
    if text.endswith("/mbs"):
        return max(1, int(text[:-4]) // int(row["micro_batch_size"]))
    return int(text) if text.isdigit() else 1


def _row_date(row: dict) -> str:
    """The first ISO date in ``source_version`` (the commit's date), else ``""``."""
    dates = [
        part
        for part in row["source_version"].replace("(", " ").replace(",", " ").split()
        if part[:2] == "20" and part.count("-") == 2
    ]
    return dates[0] if dates else ""


def _lora_dropout(row: dict, source: str) -> float | None:
    """The framework's default adapter dropout at the row's version (module doc); ``None``
    where the row's script sets it (:data:`PEFT_SFT_EXAMPLE`, :data:`ANSWERAI_TRAIN_DEFAULTS`)."""
    if source == "torchtune":
        date = _row_date(row)
        return 0.0 if date and date >= TORCHTUNE_DROPOUT_ZERO_FROM else 0.05
    if source == "litgpt":
        return 0.05
    return None


def _flags(row: dict) -> tuple:
    opts = (row["_opts"] + " " + row["optimizer"]).lower()
    out = []
    if "compile" in opts:
        out.append("compile")
    if "packing" in opts or "packed to" in row["seq_len_note"].lower():
        out.append("packed")
    if "not stated" in row["memory_metric"] or "likely" in row["memory_metric"]:
        out.append("metric_assumed")
    if "ambiguous:" in row["notes"].lower():
        out.append("ambiguous")
    return tuple(out)


def _zero_paper_states(row: dict) -> int:
    """Model states of the ZeRO paper's generic 7.5B model (mixed precision Adam)."""
    params = int(float(row["params"].rstrip("B")) * 1e9)
    sharding, gpus = _sharding(row)
    req = parse_estimate_request(
        {
            "model": "llama-2-7b",
            "method": "full",
            "precision": "fp16-mixed",
            "num_gpus": gpus,
            "sharding": sharding,
        }
    )
    layout = states.ParamLayout(params, 0, params, params, 0, 0, ((params, 1, 1),))
    reg = states.regime(req.precision, req.sharding)
    return memory.model_states_total(memory.model_states(req, layout, reg))


def source_key(row: dict) -> str:
    """One publication: the torchtune README's table at its commit, a tutorial page, a LitGPT
    file, the ZeRO paper, or (other sources) the ``source`` column with its section."""
    src, section, version = row["source"], row["source_section"], row["source_version"]
    first = section.splitlines()[0].strip().strip('"')
    if "torchtune" in src and "tutorials" in src:
        return "torchtune tutorial " + first.split()[0].rstrip(",")
    if "torchtune" in src and "README" in src:
        return (
            "torchtune README " + version.split()[1]
            if version.startswith("commit")
            else "torchtune README"
        )
    if "litgpt" in src.lower():
        return "litgpt " + src.split(" ", 1)[1].strip()
    if "ZeRO" in src:
        return "ZeRO paper"
    return src.replace("github.com/", "")  # one file, one publication


def compare_row(row: dict) -> RowResult:
    measured = int(round(float(row["peak_value"]) * UNIT_BYTES[row["peak_unit"]]))
    metric = _metric(row["memory_metric"])
    base = dict(
        row_id=row["id"],
        source=_source(row),
        source_key=source_key(row),
        model=row["model"],
        method=row["method"],
        metric=metric,
        measured_bytes=measured,
        flags=_flags(row),
    )
    try:
        if metric == "model_states":
            predicted, allocated, floor, extra, req, est = _zero_paper_states(row), 0, 0, 0, {}, {}
        else:
            req = row_request(row)
            est = memory.estimate_dict(req)
            allocated = est["peak_allocated_bytes"]
            floor = reserved_floor_of(est)
            extra = est["device_total_bytes"] - est["peak_reserved_bytes"]
            if measured < est["model_states_bytes"]:
                raise NotCovered("measured_below_model_states")
            if measured < configured_floor_bytes(req, est):
                raise NotCovered("measured_below_configured_floor")
            predicted = {"allocated": allocated, "device": est["device_total_bytes"]}.get(
                metric, est["peak_reserved_bytes"]
            )
    except NotCovered as reason:
        return RowResult(**base, covered=False, reason=str(reason))
    except CalcError as err:
        return RowResult(**base, covered=False, reason="calc_error:" + err.code)
    return RowResult(
        **base,
        predicted_bytes=predicted,
        error=(predicted - measured) / measured,
        request=req,
        allocated_bytes=allocated,
        reserved_floor_bytes=floor,
        device_extra_bytes=extra,
        fsdp1=bool(req) and memory.fsdp1_slack_applies(parse_estimate_request(req)),
    )


def reserved_floor_of(est: dict) -> int:
    """The reserved floor of an estimate: the larger of the quantization floor and the FSDP1
    wrap floor (:func:`calc.memory.estimate_request` takes the larger of these and the slack)."""
    return max(est["quantization_reserved_bytes"], est["fsdp_wrap_reserved_bytes"])


def configured_floor_bytes(request: dict, est: dict) -> int:
    """``weights + optimizer states + max(all gradients, activation floor) + FSDP root``:
    gradients complete only after the backward has freed the activations, so the two never
    add; the root unit is unsharded at the end of the forward, beside every activation."""
    r = parse_estimate_request(request)
    reg = states.regime(r.precision, r.sharding)
    grads = memory.model_states(r, states.param_layout(r), reg).grads_all
    return (
        est["model_states_bytes"]
        - grads
        + max(grads, activation_floor_bytes(request))
        + fsdp_root_bytes(r, reg)
    )


def fsdp_root_bytes(r, reg) -> int:
    """The root unit PyTorch FSDP keeps unsharded from its forward into the backward, on
    top of its shard (:func:`calc.memory.gathered_weight_bytes`, which cites the FSDP1 and
    FSDP2 code). Every row's framework (torchtune, LitGPT) wraps the decoder blocks as
    units, so the root holds the embedding, the final norm and the output layer. Zero
    without ZeRO-3 on several GPUs."""
    if r.sharding is not Sharding.ZERO3 or r.num_gpus < 2:
        return 0
    return memory.root_unit_bytes(r, reg)


def activation_floor_bytes(request: dict) -> int:
    """Activations any implementation of the stated configuration holds at the end of the
    forward pass, a lower bound in 16-bit: per token and layer, the block input under
    activation checkpointing (``2 h``); without it, the block input, the q, k, v and
    output that every SDPA / FlashAttention backward needs (``2 (2 q_dim + 2 kv_dim)``,
    grouped k, v not expanded) and the MLP nonlinearity's input (``2 m`` per active MLP).
    Activation offloading: none counted. With the model states it makes the floor below
    which a measurement cannot come from the stated configuration
    (:func:`configured_floor_bytes`)."""
    from calc.request import resolve_model

    if request.get("activation_offload"):
        return 0
    arch = resolve_model(request["model"])[0]
    tokens = request["micro_batch_size"] * request["seq_len"]
    h = arch.hidden_size
    if request["gradient_checkpointing"]:
        per = 2 * h
    else:
        q_dim = arch.num_heads * arch.head_dim
        kv_dim = arch.num_kv_heads * arch.head_dim
        m = sum(l.d_in * l.active for l in arch.linears if l.role == "mlp" and l.d_in != h)
        per = 2 * (h + 2 * q_dim + 2 * kv_dim + m)
    return arch.num_layers * tokens * per


def _source(row: dict) -> str:
    """The row's training library (a ``framework`` profile), or ``zero-paper``."""
    src = row["source"]
    if "torchtune" in src:
        return "torchtune"
    if "litgpt" in src.lower():
        return "litgpt"
    if "huggingface/" in src:
        return "hf-trainer"  # PEFT's examples/sft/train.py runs TRL's SFTTrainer
    if "fsdp_qlora" in src:
        return "hf-custom-loop"  # Answer.AI's train.py: transformers + PEFT in its own FSDP loop
    return "zero-paper"


def load_rows(path: Path = CSV_PATH) -> list[dict]:
    """CSV rows, each with ``_opts``: its memory options, where a row of a cumulative table
    ("... +X") carries the options of the rows before it in the same table."""
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    previous: dict = {}
    for row in rows:
        opts = row["other_memory_opts"]
        if opts.startswith("...") and row["source_section"] in previous:
            opts = previous[row["source_section"]] + " " + opts[3:].strip()
        row["_opts"] = opts
        previous[row["source_section"]] = opts
    return rows


def compare_rows(path: Path = CSV_PATH) -> list[RowResult]:
    """Every CSV row, compared or marked not covered."""
    return [compare_row(row) for row in load_rows(path)]


@dataclass(frozen=True)
class Summary:
    count: int
    median_abs_error: float
    p90_abs_error: float
    max_abs_error: float
    worst_row: str


def summary(results: list[RowResult], keep=lambda r: True) -> Summary:
    """Median, 90th percentile and max of ``|error|`` over covered rows passing ``keep``."""
    rows = [r for r in results if r.covered and keep(r)]
    errs = [abs(r.error) for r in rows]
    if not rows:
        return Summary(0, float("nan"), float("nan"), float("nan"), "")
    worst = max(rows, key=lambda r: abs(r.error))
    return Summary(
        len(rows), statistics.median(errs), percentile(errs, 90), abs(worst.error), worst.row_id
    )


@dataclass(frozen=True)
class SlackFit:
    """Allocator slack fitted on rows that state ``max_memory_reserved``, and its error on
    the rows it was not fitted on (those whose stat is assumed reserved)."""

    fraction: float
    fit_rows: tuple
    test_rows: tuple
    test_summary: Summary


def _stated_reserved(r: RowResult) -> bool:
    """A covered row whose metric is a stated ``max_memory_reserved``, settings unambiguous:
    the rows a slack is fitted on."""
    return (
        r.covered
        and r.metric == "reserved"
        and "metric_assumed" not in r.flags
        and "ambiguous" not in r.flags
    )


def _row_slack(r: RowResult) -> float:
    """``measured / predicted_allocated - 1``: the slack one row shows."""
    return r.measured_bytes / r.allocated_bytes - 1


def fsdp1_slack_values(rows: list[RowResult]) -> dict:
    """``{row_id: measured / predicted_allocated - 1}`` over the stated ``max_memory_reserved``
    rows where the FSDP1 slack applies (:func:`calc.memory.fsdp1_slack_applies`): the spread of
    :data:`calc.memory.FSDP1_ALLOCATOR_SLACK_FRACTION`."""
    return {r.row_id: _row_slack(r) for r in rows if _stated_reserved(r) and r.fsdp1}


def fit_fsdp1_slack(rows: list[RowResult]) -> float | None:
    """:data:`calc.memory.FSDP1_ALLOCATOR_SLACK_FRACTION` by :func:`fit_slack_fraction`'s rule
    (median per publication, then over publications) on the FSDP1 rows; ``None`` without any."""
    return fit_slack_fraction([r for r in rows if r.fsdp1])


def slack_by_source(rows: list[RowResult]) -> dict:
    """``{source: median(measured / predicted_allocated - 1)}`` over each publication's covered
    rows whose metric is a stated ``max_memory_reserved``."""
    out: dict = {}
    for r in rows:
        if _stated_reserved(r):
            out.setdefault(r.source_key, []).append(_row_slack(r))
    return {k: statistics.median(v) for k, v in out.items()}


def fit_slack_fraction(rows: list[RowResult]) -> float | None:
    """The allocator slack: the median over publications of each one's median (one vote per
    publication, so that one long table does not outvote the others). ``None`` without any
    stated reserved row."""
    per_source = slack_by_source(rows)
    return statistics.median(per_source.values()) if per_source else None


def fit_allocator_slack(results: list[RowResult]) -> SlackFit:
    """:func:`fit_slack_fraction` over the covered rows whose metric is a stated
    ``max_memory_reserved``; then ``|max(allocated * (1 + f), floor) - measured| / measured``
    on the covered rows whose reserved metric is only assumed (``floor``: the reserved memory a
    one-pass NF4 quantization leaves, as in :mod:`calc.memory`)."""
    fit = [r for r in results if _stated_reserved(r)]
    test = [
        r for r in results if r.covered and r.metric == "reserved" and "metric_assumed" in r.flags
    ]
    fraction = fit_slack_fraction(fit) or 0.0
    refit = [
        RowResult(
            **{
                **r.__dict__,
                "error": (
                    max(r.allocated_bytes * (1 + fraction), r.reserved_floor_bytes)
                    - r.measured_bytes
                )
                / r.measured_bytes,
            }
        )
        for r in test
    ]
    return SlackFit(
        fraction, tuple(r.row_id for r in fit), tuple(r.row_id for r in test), summary(refit)
    )


COMPILE_FIT_ROWS = ("22", "23")
"""The pair that isolates ``torch.compile``: same run, compile added (torchtune README at
1814feb17, "Optimization flags")."""


@dataclass(frozen=True)
class CompileFit:
    """``COMPILE_KEPT_FRACTION`` fitted on :data:`COMPILE_FIT_ROWS`, and calc's error on the
    compiled rows it was not fitted on."""

    kept: float
    measured_saving: int
    removable: int
    test_rows: tuple
    test_summary: Summary


def fit_compile_kept(results: list[RowResult]) -> CompileFit:
    """``kept = 1 - (measured eager - measured compiled) / removable``, where ``removable``
    is what the compiled row's blocks could recompute at most
    (:func:`calc.activations.compile_removable_bytes_per_token` x layers x tokens)."""
    from calc import activations

    by_id = {r.row_id: r for r in results}
    eager, compiled = (by_id[i] for i in COMPILE_FIT_ROWS)
    r = parse_estimate_request(compiled.request)
    cfg = memory.act_config(r, states.regime(r.precision, r.sharding))
    removable = (
        activations.compile_removable_bytes_per_token(r.model, cfg)
        * r.model.num_layers
        * r.micro_batch_size
        * r.seq_len
    )
    saving = eager.measured_bytes - compiled.measured_bytes
    test = [
        x
        for x in results
        if x.covered and "compile" in x.flags and x.row_id not in COMPILE_FIT_ROWS
    ]
    return CompileFit(
        1 - saving / removable, saving, removable, tuple(x.row_id for x in test), summary(test)
    )
