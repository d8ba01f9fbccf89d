"""Measure the peak GPU memory of real fine-tuning steps, one CSV row per configuration.

For each configuration of a grid file the tool builds a causal LM from an inline
Hugging Face config with random weights (nothing is downloaded), applies the
requested precision, LoRA, gradient checkpointing and attention implementation,
runs three optimizer steps on random tokens and records the CUDA memory
statistics of steps 2-3 (peak statistics are reset after step 1, once the
optimizer states exist). Every setting is written in the vocabulary of
``python -m calc estimate`` so each row converts to a calc request
(:func:`row_to_request`).

Usage (see tools/README.md)::

    python tools/measure_peak.py --grid tools/measure_grid.json --dry-run
    python tools/measure_peak.py --grid tools/measure_grid.json --out peaks.csv --time-budget-s 480
    python tools/measure_peak.py --to-requests peaks.csv --out requests.jsonl

Only the measuring path imports torch, transformers and peft; loading grids,
estimating times and converting rows use the standard library alone.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import gc
import inspect
import json
import math
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

# The settings of one configuration, named and defaulted as in calc's estimate
# request (calc/fields.py FIELDS), in the same order. "model" is the
# preset id; the inline config travels in the "hf_config" column.
REQUEST_DEFAULTS: dict[str, object] = {
    "model": None,
    "method": "lora",
    "lora_rank": 16,
    "lora_targets": "all-linear",
    "qlora_double_quant": True,
    "precision": "bf16-true",
    "optimizer": "adamw",
    "optimizer_in_backward": False,
    "micro_batch_size": 1,
    "seq_len": 2048,
    "gradient_checkpointing": True,
    "attention": "sdpa",
    "chunked_loss": False,
    "activation_offload": False,
    "num_gpus": 1,
    "sharding": "none",
    "cpu_offload": "none",
}
REQUEST_KEYS = tuple(REQUEST_DEFAULTS)
INT_KEYS = ("lora_rank", "micro_batch_size", "seq_len", "num_gpus")
BOOL_KEYS = (
    "qlora_double_quant",
    "optimizer_in_backward",
    "gradient_checkpointing",
    "chunked_loss",
    "activation_offload",
)
LORA_ONLY_KEYS = ("lora_rank", "lora_targets")

# Settings the tool needs that calc's request does not have.
EXTRA_DEFAULTS: dict[str, object] = {
    "lora_alpha": None,  # None: twice the rank
    "optimizer_impl": "default",  # torch AdamW/SGD: default (foreach on CUDA) | fused | foreach | for-loop
    "learning_rate": 1e-5,
}

STATUSES = ("ok", "oom", "error", "unsupported", "skipped", "timeout")

CSV_COLUMNS = (
    ["config_id", "status", "failed_phase", "error"]
    + list(REQUEST_KEYS)
    + ["hf_config", "lora_alpha", "optimizer_impl", "optimizer_impl_used", "learning_rate"]
    + [
        "device",
        "gpu_name",
        "gpu_total_bytes",
        "driver_version",
        "cuda_version",
        "torch_version",
        "transformers_version",
        "peft_version",
        "bitsandbytes_version",
        "python_version",
        "alloc_conf",
        "attn_impl_used",
        "started_utc",
    ]
    + [
        "params_total",
        "params_trainable",
        "weights_allocated_bytes",
        "peak_allocated_first_step_bytes",
        "peak_reserved_first_step_bytes",
        "peak_allocated_bytes",
        "peak_reserved_bytes",
        "device_used_bytes",
        "device_used_before_build_bytes",
        "peak_allocated_at_failure_bytes",
        "alloc_retries",
        "tokens_per_s",
        "step_time_s",
        "build_time_s",
        "config_time_s",
        "estimated_time_s",
        "loss",
    ]
)

ATTN_IMPLEMENTATIONS = {"sdpa": "sdpa", "eager": "eager", "flash": "flash_attention_2"}

# Time model for --dry-run and the budget (rough, on purpose; see tools/README.md).
# 790 TFLOP/s is a cautious planning figure; NVIDIA's H200 SXM datasheet lists
# 1,979 TFLOP/s BF16 with sparsity, i.e. ~989 dense, so the estimate errs on the slow side.
H200_BF16_DENSE_FLOPS = 790e12
H200_FP32_FLOPS = 67e12  # NVIDIA H200 datasheet, FP32 (non tensor core)
H200_HBM_BYTES_PER_S = 4.8e12  # NVIDIA H200 datasheet, HBM3e bandwidth
ASSUMED_MFU = 0.40  # model FLOPs utilisation assumed for dense bf16 training steps
ASSUMED_BANDWIDTH_USE = 0.6  # share of HBM bandwidth reached by optimizer and softmax kernels
STEPS = 3
STARTUP_S = 25.0  # imports, CUDA context, first cuBLAS handles
PER_CONFIG_OVERHEAD_S = 2.5  # build, optimizer creation, cleanup, first-step warm-up
BUILD_S_PER_BILLION_PARAMS = 0.8  # random init on the GPU plus module construction
STEP_LAUNCH_OVERHEAD_S_PER_LAYER = 0.002  # kernel launches, fwd+bwd+optimizer, per layer per step


class BudgetExceeded(Exception):
    """The run's time budget ran out in the middle of a configuration."""


# ---------------------------------------------------------------------------
# Grid loading (stdlib only)
# ---------------------------------------------------------------------------


def _bool(value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "1", "yes"):
        return True
    if isinstance(value, str) and value.lower() in ("false", "0", "no"):
        return False
    raise ValueError(f"not a boolean: {value!r}")


def _targets_text(value: object) -> str:
    if value == "all-linear":
        return "all-linear"
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    return ",".join(value)


def config_id(cfg: dict) -> str:
    """A readable id from the settings that usually vary."""
    parts = [cfg["model"]]
    if cfg["method"] == "full":
        parts.append("full")
    else:
        targets = (
            "all"
            if cfg["lora_targets"] == "all-linear"
            else "".join(t.split("_")[0][0] for t in cfg["lora_targets"].split(","))
        )
        parts.append(f"{cfg['method']}-r{cfg['lora_rank']}-{targets}")
    parts += [
        cfg["precision"],
        cfg["optimizer"],
        f"b{cfg['micro_batch_size']}",
        f"s{cfg['seq_len']}",
        "gc" if cfg["gradient_checkpointing"] else "nogc",
        cfg["attention"],
    ]
    for flag in ("optimizer_in_backward", "chunked_loss", "activation_offload"):
        if cfg[flag]:
            parts.append(flag.replace("_", "-"))
    if cfg["optimizer_impl"] != "default":
        parts.append(cfg["optimizer_impl"])
    return "|".join(parts)


def expand_grid(grid: dict) -> list[dict]:
    """The grid's configurations with every setting filled in.

    Grid format: ``{"models": {preset_id: hf_config}, "defaults": {...},
    "configs": [{"model": preset_id, ...overrides}]}``.
    """
    models = grid.get("models", {})
    base = {**REQUEST_DEFAULTS, **EXTRA_DEFAULTS, **grid.get("defaults", {})}
    out, seen = [], set()
    for index, entry in enumerate(grid["configs"]):
        unknown = set(entry) - set(base) - {"id"}
        if unknown:
            raise ValueError(f"config {index}: unknown keys {sorted(unknown)}")
        cfg = {**base, **entry}
        if cfg["model"] not in models:
            raise ValueError(f"config {index}: model {cfg['model']!r} has no hf_config in the grid")
        cfg["hf_config"] = models[cfg["model"]]
        for key in INT_KEYS:
            cfg[key] = int(cfg[key])
        for key in BOOL_KEYS:
            cfg[key] = _bool(cfg[key])
        cfg["lora_targets"] = _targets_text(cfg["lora_targets"])
        if cfg["lora_alpha"] is None:
            cfg["lora_alpha"] = 2 * cfg["lora_rank"]
        cfg["id"] = entry.get("id") or config_id(cfg)
        if cfg["id"] in seen:
            raise ValueError(f"config {index}: duplicate id {cfg['id']}")
        seen.add(cfg["id"])
        out.append(cfg)
    return out


def load_grid(path: str | os.PathLike) -> list[dict]:
    with open(path, encoding="utf-8") as fh:
        return expand_grid(json.load(fh))


# ---------------------------------------------------------------------------
# Sizes and the time estimate (stdlib only)
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Dims:
    vocab: int
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    qkv_bias: bool
    tied: bool

    @classmethod
    def from_hf_config(cls, cfg: dict) -> "Dims":
        """Llama / Mistral / Qwen2 key names (the families the grid uses)."""
        heads = cfg["num_attention_heads"]
        return cls(
            vocab=cfg["vocab_size"],
            hidden=cfg["hidden_size"],
            layers=cfg["num_hidden_layers"],
            heads=heads,
            kv_heads=cfg.get("num_key_value_heads") or heads,
            head_dim=cfg.get("head_dim") or cfg["hidden_size"] // heads,
            intermediate=cfg["intermediate_size"],
            qkv_bias=cfg.get("model_type") == "qwen2" or bool(cfg.get("attention_bias", False)),
            tied=bool(cfg.get("tie_word_embeddings", False)),
        )

    def linear_shapes(self) -> dict[str, tuple[int, int]]:
        h, q, kv, i = (
            self.hidden,
            self.heads * self.head_dim,
            self.kv_heads * self.head_dim,
            self.intermediate,
        )
        return {
            "q_proj": (h, q),
            "k_proj": (h, kv),
            "v_proj": (h, kv),
            "o_proj": (q, h),
            "gate_proj": (h, i),
            "up_proj": (h, i),
            "down_proj": (i, h),
        }

    def block_linear_params(self) -> int:
        return sum(a * b for a, b in self.linear_shapes().values())

    def params_total(self) -> int:
        bias = (self.heads + 2 * self.kv_heads) * self.head_dim if self.qkv_bias else 0
        per_layer = self.block_linear_params() + bias + 2 * self.hidden  # two RMSNorms
        embed = self.vocab * self.hidden
        return embed * (1 if self.tied else 2) + self.layers * per_layer + self.hidden

    def lora_params(self, rank: int, targets: str) -> int:
        shapes = self.linear_shapes()
        names = list(shapes) if targets == "all-linear" else targets.split(",")
        return self.layers * sum(rank * (shapes[n][0] + shapes[n][1]) for n in names)


def estimate_config_seconds(cfg: dict) -> float:
    """Rough wall time of one configuration on one H200 (build + 3 steps + overhead).

    Matmul FLOPs: 2 per parameter per token forward (linears and lm_head),
    backward twice that for full fine-tuning and once for LoRA (input gradients
    only), one more forward under gradient checkpointing. Attention score FLOPs:
    4*s*(heads*head_dim) per token per layer forward, halved by SDPA's causal
    kernels. Memory-bound parts (optimizer update, eager softmax) at a share of
    HBM bandwidth. OOM configurations fail faster than this.
    """
    d = Dims.from_hf_config(cfg["hf_config"])
    tokens = cfg["micro_batch_size"] * cfg["seq_len"]
    full = cfg["method"] == "full"
    matmul_params = d.layers * d.block_linear_params() + d.vocab * d.hidden
    passes = 3.0 if full else 2.0
    if cfg["gradient_checkpointing"]:
        passes += 1.0
    attn_fwd = 4.0 * cfg["seq_len"] * d.heads * d.head_dim * d.layers
    if cfg["attention"] != "eager":
        attn_fwd /= 2.0
    flops = tokens * (2.0 * matmul_params * passes + attn_fwd * passes)
    peak = H200_FP32_FLOPS if cfg["precision"] == "fp32" else H200_BF16_DENSE_FLOPS
    mfu = ASSUMED_MFU * (0.7 if cfg["precision"] in ("bf16-mixed", "fp16-mixed") else 1.0)
    step_s = flops / (peak * mfu)
    bandwidth = H200_HBM_BYTES_PER_S * ASSUMED_BANDWIDTH_USE
    trainable = d.params_total() if full else d.lora_params(cfg["lora_rank"], cfg["lora_targets"])
    state_bytes = {"adamw": 16, "sgd": 6, "sgd-momentum": 10}.get(cfg["optimizer"], 16)
    wide = 2 if cfg["precision"] in ("bf16-mixed", "fp16-mixed", "fp32") else 1
    step_s += trainable * state_bytes * wide * 2 / bandwidth
    if cfg["attention"] == "eager":  # scores written, softmaxed in fp32, read back, fwd and bwd
        score_elems = cfg["micro_batch_size"] * d.heads * cfg["seq_len"] ** 2 * d.layers
        step_s += score_elems * 24 * (passes / 3.0) / bandwidth
    if cfg["activation_offload"]:  # saved activations over PCIe (~25 GB/s each way, pinned)
        step_s += tokens * d.layers * d.hidden * 2 * 20 / 25e9
    step_s += STEP_LAUNCH_OVERHEAD_S_PER_LAYER * d.layers
    build_s = BUILD_S_PER_BILLION_PARAMS * d.params_total() / 1e9 * (2 if wide == 2 else 1)
    return PER_CONFIG_OVERHEAD_S + build_s + STEPS * step_s


def calc_prediction(cfg: dict) -> dict | None:
    """calc's estimate for a grid configuration, or None where calc cannot give one
    (not importable from here, or an error code)."""
    try:
        import calc

        return calc.estimate(row_to_request(_settings_row(cfg)))
    except Exception:  # calc is optional for the tool
        return None


def dry_run_lines(configs: list[dict], budget_s: float | None) -> list[str]:
    """Run order, estimated seconds, and calc's predicted peak (GiB) when calc is importable."""
    lines = [f"{'#':>3} {'est_s':>7} {'cum_s':>7} {'calc_GiB':>8}  config"]
    total = STARTUP_S
    for n, cfg in enumerate(configs, 1):
        est = estimate_config_seconds(cfg)
        total += est
        mark = "  (beyond budget)" if budget_s is not None and total > budget_s else ""
        predicted = calc_prediction(cfg)
        gib = f"{predicted['peak_allocated_bytes'] / 2**30:8.1f}" if predicted else f"{'-':>8}"
        lines.append(f"{n:>3} {est:7.1f} {total:7.1f} {gib}  {cfg['id']}{mark}")
    lines.append(
        f"estimated total {total:.0f} s ({total / 60:.1f} min) for {len(configs)} configurations "
        f"on one H200 at {ASSUMED_MFU:.0%} MFU, including {STARTUP_S:.0f} s start-up"
    )
    return lines


# ---------------------------------------------------------------------------
# Rows -> calc requests (stdlib only)
# ---------------------------------------------------------------------------


def row_to_request(row: dict, model_source: str = "hf_config") -> dict:
    """A ``python -m calc estimate`` request from one CSV row (strings, as csv reads them).

    ``model_source``: "hf_config" sends the inline config (works with calc's
    config readers), "preset" sends the preset id in the ``model`` column.
    LoRA settings are left out of full fine-tuning requests, the QLoRA flag out
    of non-QLoRA ones, so calc sees no ignored options.
    """
    request: dict = {}
    if model_source == "hf_config":
        request["model"] = {"hf_config": json.loads(row["hf_config"]), "name": row["model"]}
    elif model_source == "preset":
        request["model"] = row["model"]
    else:
        raise ValueError(f"model_source must be hf_config or preset, not {model_source!r}")
    for key in REQUEST_KEYS[1:]:
        value = row.get(key, "")
        if value in ("", None):
            continue
        if key in LORA_ONLY_KEYS and row["method"] == "full":
            continue
        if key == "qlora_double_quant" and row["method"] != "qlora":
            continue
        if key in INT_KEYS:
            value = int(value)
        elif key in BOOL_KEYS:
            value = _bool(value)
        elif key == "lora_targets" and value != "all-linear":
            value = [v.strip() for v in str(value).split(",") if v.strip()]
        request[key] = value
    # torch's fused AdamW has no state-sized step temporary; calc has the switch
    impl = row.get("optimizer_impl_used") or row.get("optimizer_impl")
    if impl == "fused" and row.get("optimizer") == "adamw":
        request["optimizer_fused"] = True
    return request


def read_rows(path: str | os.PathLike) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


MEASURED_KEYS = (
    "peak_allocated_bytes",
    "peak_reserved_bytes",
    "device_used_bytes",
    "gpu_total_bytes",
)


def write_requests(rows: Iterable[dict], out, model_source: str = "hf_config") -> int:
    """JSON lines, one per row: {"config_id", "status", "request", "measured"}; "measured"
    holds the byte figures present in the row (none for skipped, OOM or CPU rows)."""
    count = 0
    for row in rows:
        measured = {key: int(row[key]) for key in MEASURED_KEYS if row.get(key, "") != ""}
        line = {
            "config_id": row["config_id"],
            "status": row["status"],
            "request": row_to_request(row, model_source),
            "measured": measured,
        }
        out.write(json.dumps(line, sort_keys=False) + "\n")
        count += 1
    return count


# CSV column -> calc response field it is compared with
COMPARED_METRICS = (
    ("peak_allocated_bytes", "peak_allocated_bytes"),
    ("peak_reserved_bytes", "peak_reserved_bytes"),
    ("device_used_bytes", "device_total_bytes"),
)


def compare_rows(
    rows: Iterable[dict],
    estimate: Callable[[dict], dict] | None = None,
    model_source: str = "hf_config",
) -> list[dict]:
    """Each measured row against calc: {"config_id", "status", "note", metric: (predicted,
    measured, error_pct)}; OOM rows say whether calc also exceeds the card's memory."""
    if estimate is None:
        from calc import estimate
    out = []
    for row in rows:
        entry: dict = {
            "config_id": row["config_id"],
            "status": row["status"],
            "method": row["method"],
            "note": "",
        }
        out.append(entry)
        if row["status"] not in ("ok", "oom"):
            entry["note"] = "not measured"
            continue
        try:
            predicted = estimate(row_to_request(row, model_source))
        except Exception as exc:  # calc refuses the setting: report, do not drop
            entry["note"] = f"calc: {getattr(exc, 'code', type(exc).__name__)}"
            continue
        if row["status"] == "oom":
            total = int(row["gpu_total_bytes"]) if row.get("gpu_total_bytes") else None
            entry["note"] = (
                "oom, calc agrees"
                if total and predicted["device_total_bytes"] > total
                else "oom, calc says it fits"
            )
            continue
        for column, field_name in COMPARED_METRICS:
            if row.get(column, "") != "":
                measured, guess = int(row[column]), int(predicted[field_name])
                entry[column] = (guess, measured, 100.0 * (guess - measured) / measured)
        if not any(column in entry for column, _ in COMPARED_METRICS):
            entry["note"] = "no CUDA figures"
    return out


def _percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100.0 * len(ordered)) - 1)]


def comparison_lines(entries: list[dict]) -> list[str]:
    lines = [
        f"{'alloc pred/meas GiB':>22} {'err%':>7} {'reserved err%':>13} {'used err%':>9}  config / note"
    ]
    gib = 2**30
    for e in entries:
        a = e.get("peak_allocated_bytes")
        left = f"{a[0] / gib:10.2f}/{a[1] / gib:<10.2f} {a[2]:+7.1f}" if a else f"{'':>30}"
        r, u = e.get("peak_reserved_bytes"), e.get("device_used_bytes")
        lines.append(
            f"{left} {f'{r[2]:+.1f}' if r else '':>13} {f'{u[2]:+.1f}' if u else '':>9}  "
            f"{e['config_id']} {e['note']}".rstrip()
        )
    for column, _ in COMPARED_METRICS:
        groups: dict[str, list[float]] = {}
        for e in entries:
            if column in e:
                groups.setdefault("all", []).append(abs(e[column][2]))
                groups.setdefault(e["method"], []).append(abs(e[column][2]))
        for name, errs in sorted(groups.items()):
            lines.append(
                f"{column} {name}: n={len(errs)} median |err| {_percentile(errs, 50):.1f} % "
                f"p90 {_percentile(errs, 90):.1f} % max {max(errs):.1f} %"
            )
    return lines


# ---------------------------------------------------------------------------
# Measuring (torch, transformers, peft imported here only)
# ---------------------------------------------------------------------------


def _version(module: str) -> str:
    try:
        mod = __import__(module)
    except Exception:  # an optional package that is missing or broken
        return ""
    return str(getattr(mod, "__version__", ""))


def _driver_version() -> str:
    try:
        done = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
        return (
            done.stdout.strip().splitlines()[0]
            if done.returncode == 0 and done.stdout.strip()
            else ""
        )
    except (OSError, subprocess.SubprocessError):
        return ""


def environment_info(device: str) -> dict:
    import torch

    info = {
        "device": device,
        "gpu_name": "",
        "gpu_total_bytes": "",
        "driver_version": "",
        "cuda_version": torch.version.cuda or "",
        "torch_version": torch.__version__,
        "transformers_version": _version("transformers"),
        "peft_version": _version("peft"),
        "bitsandbytes_version": _version("bitsandbytes"),
        "python_version": platform.python_version(),
        # expandable_segments and friends change what "reserved" means
        "alloc_conf": os.environ.get(
            "PYTORCH_CUDA_ALLOC_CONF", os.environ.get("PYTORCH_ALLOC_CONF", "")
        ),
    }
    if device == "cuda":
        info["gpu_name"] = torch.cuda.get_device_name(0)
        info["gpu_total_bytes"] = torch.cuda.mem_get_info()[1]
        info["driver_version"] = _driver_version()
    return info


class Unsupported(Exception):
    """A setting this tool cannot reproduce faithfully (recorded, not faked)."""


@dataclass
class Session:
    """What one configuration's steps need."""

    cfg: dict
    device: str
    model: object
    optimizer: object
    scaler: object = None
    vocab: int = 0
    extras: dict = field(default_factory=dict)


def check_supported(cfg: dict, device: str) -> None:
    if cfg["method"] == "qlora":
        raise Unsupported("qlora: quantizing random weights to NF4 is not implemented in this tool")
    if cfg["num_gpus"] != 1 or cfg["sharding"] != "none":
        raise Unsupported("single-process tool: num_gpus must be 1 and sharding none")
    if cfg["cpu_offload"] != "none":
        raise Unsupported("cpu_offload is not implemented in this tool")
    if cfg["attention"] == "flash" and device != "cuda":
        raise Unsupported("flash attention needs CUDA")
    if cfg["optimizer_in_backward"] and cfg["precision"] == "fp16-mixed":
        raise Unsupported("optimizer_in_backward with a gradient scaler")


def _dtype_for(precision: str):
    import torch

    return torch.bfloat16 if precision == "bf16-true" else torch.float32


def build_model(cfg: dict, device: str):
    """The causal LM with random weights, on ``device``, in the precision's parameter dtype."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    hf = json.loads(
        json.dumps(cfg["hf_config"])
    )  # deep copy: transformers rewrites nested rope dicts
    model_type = hf.pop("model_type")
    config = AutoConfig.for_model(model_type, **hf)
    config.use_cache = False  # training: no KV cache kept alive
    dtype = _dtype_for(cfg["precision"])
    kwargs = {"attn_implementation": ATTN_IMPLEMENTATIONS[cfg["attention"]]}
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # also covers transformers versions without a dtype kwarg
    try:
        with torch.device(device):
            try:
                model = AutoModelForCausalLM.from_config(config, dtype=dtype, **kwargs)
            except TypeError:  # transformers < 4.56 names it torch_dtype
                model = AutoModelForCausalLM.from_config(config, torch_dtype=dtype, **kwargs)
    finally:
        torch.set_default_dtype(previous)
    model.to(device=device, dtype=dtype)
    if cfg["gradient_checkpointing"]:
        # Non-reentrant: works with frozen inputs (LoRA) without enable_input_require_grads.
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if cfg["method"] == "lora":
        from peft import LoraConfig, get_peft_model

        targets = cfg["lora_targets"]
        lora = LoraConfig(
            r=cfg["lora_rank"],
            lora_alpha=cfg["lora_alpha"],
            lora_dropout=0.0,
            bias="none",
            task_type="CAUSAL_LM",
            target_modules="all-linear" if targets == "all-linear" else targets.split(","),
        )
        kw = {}
        if "autocast_adapter_dtype" in inspect.signature(get_peft_model).parameters:
            kw["autocast_adapter_dtype"] = (
                False  # bf16-true: adapters in bf16 too, as the vocabulary says
            )
        model = get_peft_model(model, lora, **kw)
    model.train()
    return model


def make_optimizer(cfg: dict, params: list):
    """The optimizer over ``params``; optimizer_in_backward steps each parameter in its grad hook."""
    import torch

    name, impl, lr = cfg["optimizer"], cfg["optimizer_impl"], float(cfg["learning_rate"])
    kw: dict = {}
    if impl == "fused":
        kw["fused"] = True
    elif impl == "foreach":
        kw["foreach"] = True
    elif impl == "for-loop":
        kw["foreach"] = False

    def one(group):
        if name == "adamw":
            return torch.optim.AdamW(group, lr=lr, **kw)
        if name == "sgd":
            return torch.optim.SGD(group, lr=lr, **kw)
        if name == "sgd-momentum":
            return torch.optim.SGD(group, lr=lr, momentum=0.9, **kw)
        if name == "adafactor":
            if not hasattr(torch.optim, "Adafactor"):
                raise Unsupported("torch.optim.Adafactor needs torch >= 2.5")
            return torch.optim.Adafactor(group, lr=lr)
        try:
            import bitsandbytes as bnb
        except Exception as exc:
            raise Unsupported(f"{name} needs bitsandbytes ({type(exc).__name__})") from None
        cls = {
            "adamw-8bit": bnb.optim.AdamW8bit,
            "paged-adamw": bnb.optim.PagedAdamW,
            "paged-adamw-8bit": bnb.optim.PagedAdamW8bit,
        }[name]
        return cls(group, lr=lr)

    if not cfg["optimizer_in_backward"]:
        return one(params)
    per_param = {p: one([p]) for p in params}

    def hook(p):
        per_param[p].step()
        per_param[p].zero_grad(set_to_none=True)

    for p in params:
        p.register_post_accumulate_grad_hook(hook)
    return _StepsInBackward(per_param)


def optimizer_impl_used(optimizer) -> str:
    """fused, foreach or for-loop for torch optimizers (what actually runs: the foreach
    AdamW allocates temporaries the size of the parameters at the step, fused does not)."""
    first = (
        next(iter(optimizer.per_param.values()))
        if isinstance(optimizer, _StepsInBackward)
        else optimizer
    )
    if type(first).__module__.startswith("bitsandbytes"):
        return "bitsandbytes"
    defaults = getattr(first, "defaults", {})
    if defaults.get("fused"):
        return "fused"
    if "foreach" not in defaults:
        return type(first).__name__
    if defaults["foreach"] is not None:
        return "foreach" if defaults["foreach"] else "for-loop"
    try:  # torch's own default rule (private, hence the fallback)
        from torch.optim.optimizer import _default_to_fused_or_foreach

        params = [p for group in first.param_groups for p in group["params"]]
        fused, foreach = _default_to_fused_or_foreach(params, differentiable=False, use_fused=False)
    except Exception:
        return "default"
    return "fused" if fused else ("foreach" if foreach else "for-loop")


class _StepsInBackward:
    """Stands for the optimizer when each parameter steps inside backward."""

    def __init__(self, per_param: dict):
        self.per_param = per_param

    def step(self) -> None:
        pass

    def zero_grad(self, set_to_none: bool = True) -> None:
        pass


def _chunked_loss(model, input_ids, chunks: int = 8):
    """Causal-LM loss without the full logits: lm_head + cross-entropy per sequence chunk,
    recomputed in backward (as fused/chunked cross-entropy kernels do)."""
    import torch
    import torch.nn.functional as F
    from torch.utils.checkpoint import checkpoint

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    hidden = base.model(input_ids=input_ids).last_hidden_state[:, :-1]
    targets = input_ids[:, 1:]
    lm_head = base.lm_head

    def piece(h, t):
        logits = lm_head(h).float()
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), t.reshape(-1), reduction="sum")

    total = hidden.new_zeros((), dtype=torch.float32)
    for h, t in zip(hidden.chunk(chunks, dim=1), targets.chunk(chunks, dim=1), strict=True):
        total = total + checkpoint(piece, h, t, use_reentrant=False)
    return total / targets.numel()


def train_step(session: Session, input_ids) -> float:
    """One forward, backward and optimizer step; returns the loss."""
    import torch

    cfg, model = session.cfg, session.model
    mixed = {"bf16-mixed": torch.bfloat16, "fp16-mixed": torch.float16}.get(cfg["precision"])
    autocast = torch.autocast(session.device, dtype=mixed) if mixed else contextlib.nullcontext()
    offload = (
        torch.autograd.graph.save_on_cpu(pin_memory=session.device == "cuda")
        if cfg["activation_offload"]
        else contextlib.nullcontext()
    )
    with offload:
        with autocast:
            if cfg["chunked_loss"]:
                loss = _chunked_loss(model, input_ids)
            else:
                loss = model(input_ids=input_ids, labels=input_ids).loss
        if session.scaler is not None:
            session.scaler.scale(loss).backward()
        else:
            loss.backward()
    if session.scaler is not None:
        session.scaler.step(session.optimizer)
        session.scaler.update()
    else:
        session.optimizer.step()
    session.optimizer.zero_grad(set_to_none=True)
    return float(loss.detach())


class CudaStats:
    """The CUDA allocator's statistics, behind one small interface (tests use a stand-in
    to check the protocol on machines without a GPU)."""

    def __init__(self):
        import torch

        self.cuda = torch.cuda

    def sync(self) -> None:
        self.cuda.synchronize()

    def empty_cache(self) -> None:
        self.cuda.empty_cache()

    def reset_peak(self) -> None:
        self.cuda.reset_peak_memory_stats()

    def allocated(self) -> int:
        return self.cuda.memory_allocated()

    def max_allocated(self) -> int:
        return self.cuda.max_memory_allocated()

    def max_reserved(self) -> int:
        return self.cuda.max_memory_reserved()

    def device_used(self) -> int:
        free, total = self.cuda.mem_get_info()
        return total - free

    def alloc_retries(self) -> int:
        return self.cuda.memory_stats().get("num_alloc_retries", 0)


def run_config(
    cfg: dict,
    device: str,
    progress: dict,
    clock: Callable[[], float],
    deadline: float | None,
    stats: CudaStats | None = None,
) -> dict:
    """Build, step three times, measure. Raises on OOM and other failures;
    ``progress["phase"]`` says how far it got. ``stats`` is None on CPU."""
    import torch

    check_supported(cfg, device)
    sync = stats.sync if stats else (lambda: None)
    out: dict = {}
    if stats:
        out["device_used_before_build_bytes"] = stats.device_used()
    progress["phase"] = "build"
    torch.manual_seed(0)
    t_build = time.perf_counter()
    model = build_model(cfg, device)
    out["attn_impl_used"] = (
        getattr(getattr(model, "config", None), "_attn_implementation", "") or ""
    )
    params = [p for p in model.parameters() if p.requires_grad]
    out["params_total"] = sum(p.numel() for p in model.parameters())
    out["params_trainable"] = sum(p.numel() for p in params)
    progress["phase"] = "optimizer"
    optimizer = make_optimizer(cfg, params)
    out["optimizer_impl_used"] = optimizer_impl_used(optimizer)
    scaler = torch.amp.GradScaler(device) if cfg["precision"] == "fp16-mixed" else None
    session = Session(
        cfg=cfg,
        device=device,
        model=model,
        optimizer=optimizer,
        scaler=scaler,
        vocab=cfg["hf_config"]["vocab_size"],
    )
    sync()
    out["build_time_s"] = round(time.perf_counter() - t_build, 3)
    if stats:
        stats.empty_cache()  # build leftovers are not part of training
        stats.reset_peak()
        out["weights_allocated_bytes"] = stats.allocated()
    shape = (cfg["micro_batch_size"], cfg["seq_len"])
    t0 = None
    for step in (1, 2, 3):
        if step > 1 and deadline is not None and clock() > deadline:
            raise BudgetExceeded(f"time budget ran out before step {step}")
        progress["phase"] = f"step{step}"
        batch = torch.randint(0, session.vocab, shape, device=device)
        if step == 2:
            sync()
            t0 = time.perf_counter()
        out["loss"] = round(train_step(session, batch), 4)
        del batch
        if step == 1:
            sync()
            if stats:
                out["peak_allocated_first_step_bytes"] = stats.max_allocated()
                out["peak_reserved_first_step_bytes"] = stats.max_reserved()
                stats.reset_peak()  # optimizer states now exist
    sync()
    elapsed = time.perf_counter() - t0
    out["step_time_s"] = round(elapsed / 2, 4)
    out["tokens_per_s"] = round(2 * shape[0] * shape[1] / elapsed, 1)
    if stats:
        out["peak_allocated_bytes"] = stats.max_allocated()
        out["peak_reserved_bytes"] = stats.max_reserved()
        out["device_used_bytes"] = stats.device_used()
        # >0: the allocator had to free its cache to satisfy a request (reserved is squeezed)
        out["alloc_retries"] = stats.alloc_retries()
    progress["phase"] = "done"
    return out


def classify_error(exc: BaseException) -> str:
    """oom, timeout, unsupported or error."""
    if isinstance(exc, BudgetExceeded):
        return "timeout"
    if isinstance(exc, (Unsupported, ImportError)):
        return "unsupported"
    try:
        import torch

        if isinstance(exc, torch.cuda.OutOfMemoryError):
            return "oom"
    except ImportError:
        pass
    text = str(exc).lower()
    if isinstance(exc, (RuntimeError, MemoryError)) and (
        "out of memory" in text or "can't allocate memory" in text or isinstance(exc, MemoryError)
    ):
        return "oom"
    return "error"


def _cleanup(stats: CudaStats | None) -> None:
    gc.collect()
    if stats:
        stats.empty_cache()


def _settings_row(cfg: dict) -> dict:
    row = {"config_id": cfg["id"]}
    for key in REQUEST_KEYS:
        value = cfg[key]
        row[key] = ("true" if value else "false") if isinstance(value, bool) else value
    if cfg["method"] == "full":
        row["lora_rank"] = row["lora_targets"] = ""
    row["hf_config"] = json.dumps(cfg["hf_config"], separators=(",", ":"), sort_keys=True)
    row["lora_alpha"] = cfg["lora_alpha"] if cfg["method"] != "full" else ""
    row["optimizer_impl"] = cfg["optimizer_impl"]
    row["learning_rate"] = cfg["learning_rate"]
    return row


def run_grid(
    configs: list[dict],
    out_path: str | os.PathLike,
    device: str = "cuda",
    time_budget_s: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    estimate: Callable[[dict], float] = estimate_config_seconds,
    log=sys.stderr,
    stats: CudaStats | None = None,
) -> list[dict]:
    """Measure each configuration and append its row to ``out_path`` as soon as it is known
    (a run killed midway keeps what it measured)."""
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda but torch sees no CUDA device")
    if device == "cuda" and stats is None:
        stats = CudaStats()
    start = clock()
    deadline = None if time_budget_s is None else start + time_budget_s
    env = environment_info(device)
    rows = []
    with open(out_path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=CSV_COLUMNS, extrasaction="raise")
        writer.writeheader()
        fh.flush()
        for n, cfg in enumerate(configs, 1):
            est = estimate(cfg)
            row = {key: "" for key in CSV_COLUMNS}
            row.update(env)
            row.update(_settings_row(cfg))
            row["estimated_time_s"] = round(est, 1)
            row["started_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            if deadline is not None and clock() + est > deadline:
                row["status"], row["error"] = "skipped", "time budget"
            else:
                progress = {"phase": "setup"}
                t_cfg = time.perf_counter()
                if stats:
                    stats.reset_peak()
                try:
                    row.update(run_config(cfg, device, progress, clock, deadline, stats))
                    row["status"] = "ok"
                except Exception as exc:  # recorded, and the loop goes on
                    row["status"] = classify_error(exc)
                    row["failed_phase"] = progress["phase"]
                    row["error"] = f"{type(exc).__name__}: {' '.join(str(exc).split())}"[:300]
                    if stats:
                        row["peak_allocated_at_failure_bytes"] = stats.max_allocated()
                # the exception and its frames (model, optimizer, activations) are gone here
                _cleanup(stats)
                row["config_time_s"] = round(time.perf_counter() - t_cfg, 2)
            writer.writerow(row)
            fh.flush()
            rows.append(row)
            print(
                f"[{n}/{len(configs)}] {row['status']:<11} {cfg['id']}  "
                f"alloc={row['peak_allocated_bytes']} reserved={row['peak_reserved_bytes']} "
                f"tok/s={row['tokens_per_s']} t={row['config_time_s']}s {row['error']}",
                file=log,
                flush=True,
            )
    return rows


def select(configs: list[dict], only: str | None) -> list[dict]:
    """``--only``: a count N (the first N), a 1-based index list "3,7,9", or an id substring."""
    if not only:
        return configs
    if only.isdigit():
        return configs[: int(only)]
    if all(part.strip().isdigit() for part in only.split(",")):
        return [configs[int(part) - 1] for part in only.split(",")]
    return [cfg for cfg in configs if only in cfg["id"]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--grid", default=str(Path(__file__).with_name("measure_grid.json")))
    parser.add_argument(
        "--out", help="CSV to write (with --to-requests: JSON lines, default stdout)"
    )
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--only", help="first N configs, 1-based indices '3,7', or an id substring")
    parser.add_argument(
        "--time-budget-s",
        type=float,
        default=None,
        help="skip configs that would not finish within this many seconds of the start",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="list configs with estimated times; run nothing"
    )
    parser.add_argument(
        "--to-requests", metavar="CSV", help="convert a results CSV to calc requests (JSON lines)"
    )
    parser.add_argument("--model-source", choices=("hf_config", "preset"), default="hf_config")
    parser.add_argument(
        "--compare", metavar="CSV", help="measured rows against calc's estimates (needs calc)"
    )
    args = parser.parse_args(argv)
    root = str(Path(__file__).resolve().parents[1])
    if root not in sys.path:  # calc, for --compare and the dry run's predictions
        sys.path.append(root)

    if args.compare:
        print(
            "\n".join(
                comparison_lines(
                    compare_rows(read_rows(args.compare), model_source=args.model_source)
                )
            )
        )
        return 0
    if args.to_requests:
        rows = read_rows(args.to_requests)
        if args.out:
            with open(args.out, "w", encoding="utf-8") as fh:
                write_requests(rows, fh, args.model_source)
        else:
            write_requests(rows, sys.stdout, args.model_source)
        return 0
    configs = select(load_grid(args.grid), args.only)
    if args.dry_run:
        print("\n".join(dry_run_lines(configs, args.time_budget_s)))
        return 0
    if not args.out:
        parser.error("--out is required to measure")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing from a hub, ever
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    rows = run_grid(configs, args.out, args.device, args.time_budget_s)
    counts = {s: sum(r["status"] == s for r in rows) for s in STATUSES}
    print(" ".join(f"{k}={v}" for k, v in counts.items() if v), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
