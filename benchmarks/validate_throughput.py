"""Check calc's time model against published training throughput.

    python benchmarks/validate_throughput.py          # per-row table, summary, rows not covered

Each covered row of ``validation/measured_throughput.csv`` (a copy of the project's
validation set, with its sources) is expressed as a calc request below; calc predicts tokens
per second per GPU with its DEFAULT factors (no per-row tuning) and the script prints predicted,
measured and the percentage error, then the median and 90th-percentile absolute error per
workload (fine-tuning rows are the target; pre-training rows are tuned upper bounds) and per
method. Rows calc cannot express are listed with the reason. ``compare()`` returns the same
as data for the site's validation page.
"""

from __future__ import annotations

import csv
import io
import re
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.stats import percentile  # noqa: E402
from calc import gpus, lora, presets, timing  # noqa: E402
from calc.hf_config import arch_from_hf_config  # noqa: E402

CSV_PATH = ROOT / "validation" / "measured_throughput.csv"

QV = ["q_proj", "v_proj"]
QKV = ["q_proj", "k_proj", "v_proj"]
QVO_MLP = ["q_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def _qwen1(hidden: int, layers: int, heads: int, ffn: int, vocab: int = 151936) -> dict:
    """Qwen (1.x) has llama's shapes with fused c_attn; its config's intermediate_size is twice
    the per-matrix width (Qwen-7B: 22016 -> 11008)."""
    return {"hf_config": {"model_type": "llama", "hidden_size": hidden, "num_hidden_layers": layers,
                          "num_attention_heads": heads, "num_key_value_heads": heads,
                          "intermediate_size": ffn, "vocab_size": vocab, "max_position_embeddings": 32768}}


def _mpt(hidden: int, layers: int, heads: int) -> dict:
    """MPT blocks: attention plus a plain 4h MLP, tied embeddings, vocab 50432 (MPT model cards).
    calc reads no "mpt" family; gpt_neox with the same shapes has the same matmul FLOPs."""
    return {"hf_config": {"model_type": "gpt_neox", "hidden_size": hidden, "num_hidden_layers": layers,
                          "num_attention_heads": heads, "intermediate_size": 4 * hidden,
                          "vocab_size": 50432, "max_position_embeddings": 8192,
                          "tie_word_embeddings": True, "use_parallel_residual": False}}


MODELS = {
    "qwen-1.8b": _qwen1(2048, 24, 16, 5504),
    "qwen-7b": _qwen1(4096, 32, 32, 11008),
    "qwen-14b": _qwen1(5120, 40, 40, 13696),
    "qwen-72b": _qwen1(8192, 80, 64, 24576, vocab=152064),
    "mpt-3b": _mpt(2560, 32, 32),
    "mpt-7b": _mpt(4096, 32, 32),
    "mpt-13b": _mpt(5120, 40, 40),
    "mpt-30b": _mpt(7168, 48, 64),
    "mpt-70b": _mpt(8192, 80, 64),
}


def _r(model, method, gpu, mb, seq, gc, n=1, sharding="none", rank=8, targets="all-linear", note=""):
    return {"model": model, "method": method, "gpu": gpu, "micro_batch_size": mb, "seq_len": seq,
            "gradient_checkpointing": gc, "num_gpus": n, "sharding": sharding, "lora_rank": rank,
            "lora_targets": targets, "note": note}


COMPILE = "torch.compile not modelled"
T_A100 = "a100-80gb-sxm"
COVERED: dict[int, dict] = {
    # torchtune README, Llama-2 table (May 2024): padded tokens counted, as calc counts them
    1: _r("llama-2-7b", "qlora", "rtx-4090", 4, 2048, True, note=COMPILE),
    2: _r("llama-2-7b", "lora", "rtx-4090", 4, 2048, True, targets=QV),
    3: _r("llama-2-7b", "lora", "rtx-4090", 4, 2048, False, n=2, sharding="zero3", targets=QV,
          note="aggregate-vs-per-GPU ambiguous (CSV reads aggregate)"),
    4: _r("llama-2-7b", "full", "rtx-4090", 4, 2048, True, note="bnb paged AdamW pages states to host"),
    5: _r("llama-2-7b", "full", "rtx-4090", 4, 2048, True, n=4, sharding="zero3",
          note="aggregate-vs-per-GPU ambiguous (CSV reads aggregate)"),
    6: _r("llama-2-70b", "lora", T_A100, 4, 4096, True, n=8, sharding="zero3", rank=16, targets=QKV,
          note="A100 40/80GB not stated"),
    7: _r("llama-2-70b", "full", T_A100, 4, 4096, True, n=8, sharding="zero3",
          note="checkpointing not stated (assumed on)"),
    # torchtune optimisation-flags table (Nov 2024), Llama-3.2-3B on one A100, packed to 4096
    17: _r("llama-3.2-3b", "full", T_A100, 2, 4096, False),
    18: _r("llama-3.2-3b", "full", T_A100, 2, 4096, False, note=COMPILE),
    19: _r("llama-3.2-3b", "full", T_A100, 2, 4096, False, note=COMPILE + "; chunked CE"),
    20: _r("llama-3.2-3b", "full", T_A100, 2, 4096, True, note=COMPILE),
    21: _r("llama-3.2-3b", "full", T_A100, 2, 4096, True, note=COMPILE + "; optimizer in backward"),
    22: _r("llama-3.2-3b", "full", T_A100, 2, 4096, True, note=COMPILE + "; activation offload"),
    23: _r("llama-3.2-3b", "full", T_A100, 2, 4096, True, note=COMPILE + "; 8-bit AdamW"),
    24: _r("llama-3.2-3b", "lora", T_A100, 2, 4096, True, rank=64, targets=QVO_MLP, note=COMPILE),
    25: _r("llama-3.2-3b", "qlora", T_A100, 2, 4096, True, rank=64, targets=QVO_MLP,
           note=COMPILE + " (torchtune compiles NF4 dequantisation)"),
    # Qwen README profiling (HF Trainer + FlashAttention-2, every sample padded to seq_len)
    59: _r("qwen-1.8b", "full", T_A100, 1, 2048, True),
    60: _r("qwen-1.8b", "full", T_A100, 1, 8192, True),
    61: _r("qwen-1.8b", "lora", T_A100, 1, 2048, True, rank=64),
    62: _r("qwen-7b", "lora", T_A100, 1, 256, True, rank=64),
    63: _r("qwen-7b", "lora", T_A100, 1, 1024, True, rank=64),
    64: _r("qwen-7b", "lora", T_A100, 1, 2048, True, rank=64),
    65: _r("qwen-7b", "lora", T_A100, 1, 8192, True, rank=64),
    70: _r("qwen-14b", "lora", T_A100, 1, 2048, True, rank=64),
    72: _r("qwen-72b", "lora", T_A100, 1, 2048, True, n=4, sharding="zero3", rank=64),
    # pre-training, bf16 (torchtitan, TinyLlama, llm-foundry): tuned runs, an upper bound
    106: _r("llama-3-8b", "full", T_A100, 1, 8192, False, n=64, sharding="zero3", note="selective AC as off"),
    107: _r("llama-3-8b", "full", T_A100, 1, 8192, False, n=64, sharding="zero3", note="selective AC as off"),
    108: _r("llama-3.1-70b", "full", T_A100, 1, 8192, True, n=64, sharding="zero3"),
    109: _r("llama-2-13b", "full", T_A100, 2, 4096, False, n=64, sharding="zero3"),
    110: _r("llama-2-70b", "full", T_A100, 2, 4096, True, n=64, sharding="zero3"),
    111: _r("llama-3.1-8b", "full", "h100-sxm", 2, 8192, False, n=8, sharding="zero3",
           note="500 W H100 variant; selective AC as off"),
    112: _r("llama-3.1-8b", "full", "h100-sxm", 2, 8192, False, n=8, sharding="zero3",
           note="500 W H100 variant; " + COMPILE),
    114: _r("llama-3.1-8b", "full", "h100-sxm", 2, 8192, False, n=128, sharding="zero3",
           note="500 W H100 variant; selective AC as off"),
    121: _r("tinyllama-1.1b", "full", "a100-40gb-sxm", 8, 2048, False, n=16, sharding="zero3",
           note="fused kernels"),
}
_MPT_ROWS = {  # row: (model, gpu, micro-batch, seq, checkpointing, GPUs)
    122: ("mpt-70b", "h100-sxm", 8, 2048, True, 64), 123: ("mpt-70b", "h100-sxm", 2, 2048, True, 32),
    124: ("mpt-30b", "h100-sxm", 3, 2048, True, 8), 125: ("mpt-13b", "h100-sxm", 10, 4096, True, 8),
    126: ("mpt-13b", "h100-sxm", 2, 2048, False, 8), 127: ("mpt-7b", "h100-sxm", 8, 8192, True, 8),
    128: ("mpt-7b", "h100-sxm", 16, 4096, True, 8), 129: ("mpt-7b", "h100-sxm", 6, 2048, False, 8),
    130: ("mpt-3b", "h100-sxm", 5, 4096, False, 8),
    132: ("mpt-70b", T_A100, 8, 2048, True, 64), 133: ("mpt-30b", T_A100, 3, 2048, True, 8),
    134: ("mpt-13b", T_A100, 10, 4096, True, 8), 135: ("mpt-13b", T_A100, 2, 2048, False, 8),
    136: ("mpt-7b", T_A100, 8, 8192, True, 8), 137: ("mpt-7b", T_A100, 16, 4096, True, 8),
    138: ("mpt-7b", T_A100, 6, 2048, False, 8), 139: ("mpt-3b", T_A100, 10, 2048, False, 8),
    140: ("mpt-70b", "a100-40gb-sxm", 4, 2048, True, 128), 141: ("mpt-30b", "a100-40gb-sxm", 4, 2048, True, 32),
    142: ("mpt-13b", "a100-40gb-sxm", 4, 2048, True, 8), 143: ("mpt-7b", "a100-40gb-sxm", 6, 4096, True, 8),
    144: ("mpt-7b", "a100-40gb-sxm", 12, 2048, True, 8),
}
for _row, (_m, _g, _mb, _s, _gc, _n) in _MPT_ROWS.items():
    COVERED[_row] = _r(_m, "full", _g, _mb, _s, _gc, n=_n, sharding="zero3", note="MPT as gpt_neox shapes")

_VARIABLE = "unpadded alpaca samples of varying length: tokens per step and attention length unknown"
NOT_COVERED: dict[int, str] = {
    **{r: _VARIABLE for r in range(8, 16)},
    16: "unpacked, padded to varying lengths while only non-padding tokens are counted",
    **{r: "GPTQ int4 base with fp16 compute: calc's QLoRA factor is for bitsandbytes NF4" for r in (66, 67, 71, 73)},
    68: "DeepSpeed ZeRO stage not stated",
    69: "2 nodes x 2 GPUs: calc assumes 8 GPUs per node",
    **{r: "only samples/s published (token counts unknown); used for the QLoRA/LoRA ratio check"
       for r in range(77, 91)},
    **{r: "only samples/s or whole-job hours published (token counts unknown)" for r in range(91, 96)},
    **{r: "FP8 training: calc models BF16" for r in range(96, 106)},
    **{r: "float8 linears: calc models BF16" for r in (113, 115, 116, 119, 120, 131)},
    117: "tensor parallelism (FSDP 32 x TP 8) is not a calc sharding",
    118: "tensor parallelism (FSDP 8 x TP 8) is not a calc sharding",
}

QLORA_PAIRS = [(77, 78), (79, 80), (81, 82), (87, 88), (89, 90), (91, 92), (24, 25)]


def load_rows(path: Path = CSV_PATH) -> dict[int, dict]:
    text = path.read_text(encoding="utf-8")
    return {int(r["row_id"]): r for r in csv.DictReader(io.StringIO(text))}


def _arch(model: str):
    if model in MODELS:
        return arch_from_hf_config(MODELS[model]["hf_config"], model)
    return presets.get_preset(model)


def predict_tokens_per_second_per_gpu(spec: dict) -> float:
    """calc's prediction for one mapped row, with the default utilisation of the card class."""
    arch = _arch(spec["model"])
    method = spec["method"]
    trainable = arch.params_total if method == "full" else lora.lora_trainable_params(
        arch, spec["lora_rank"], spec["lora_targets"])
    gpu = gpus.get_gpu(spec["gpu"])
    inputs = timing.TimeInputs(arch=arch, method=method, seq_len=spec["seq_len"],
                               micro_batch_size=spec["micro_batch_size"],
                               gradient_checkpointing=spec["gradient_checkpointing"],
                               trainable_params=trainable, num_gpus=spec["num_gpus"],
                               sharding=spec["sharding"], cpu_offload="none", total_tokens=1e9,
                               attention=spec.get("attention", "sdpa"))
    est = timing.estimate_time(inputs, gpu.bf16_dense_flops, timing.default_mfu(gpu.utilisation_class, method),
                               gpu.link_for(spec["num_gpus"]))
    return est.tokens_per_second_per_gpu



def _stats(rows: list[dict]) -> dict:
    errors = [abs(r["error_pct"]) for r in rows]
    if not errors:
        return {"rows": 0}
    return {"rows": len(errors), "median_abs_pct": statistics.median(errors),
            "p90_abs_pct": percentile(errors, 90), "max_abs_pct": max(errors),
            "mean_signed_pct": statistics.fmean(r["error_pct"] for r in rows)}


def _samples_per_second(row: dict) -> float | None:
    for text in (row.get("flags_notes", ""), row.get("published_figure", "")):
        m = re.search(r"samples/s = ([0-9]+(?:\.[0-9]+)?)", text) or re.search(r"([0-9]+(?:\.[0-9]+)?) samples/s", text)
        if m:
            return float(m.group(1))
    return None


def qlora_ratio_check(rows: dict[int, dict]) -> list[dict]:
    """Measured QLoRA / LoRA speed on the same model, card and stack, against calc's factor."""
    out = []
    for lora_id, qlora_id in QLORA_PAIRS:
        a, b = rows.get(lora_id), rows.get(qlora_id)
        if a is None or b is None:
            continue
        if a.get("tokens_per_second_per_gpu") and b.get("tokens_per_second_per_gpu"):
            ratio = float(b["tokens_per_second_per_gpu"]) / float(a["tokens_per_second_per_gpu"])
        else:
            sa, sb = _samples_per_second(a), _samples_per_second(b)
            if not sa or not sb:
                continue
            ratio = sb / sa
        out.append({"rows": [lora_id, qlora_id], "model": a["model"], "gpu": a["gpu_type"],
                    "measured_ratio": ratio, "calc_factor": timing.QLORA_SPEED_FACTOR})
    return out


def compare(path: Path = CSV_PATH) -> dict:
    """Every row: predicted vs measured tokens/s/GPU, or the reason it is not covered."""
    rows = load_rows(path)
    covered, not_covered = [], []
    for row_id, row in rows.items():
        spec = COVERED.get(row_id)
        measured = row.get("tokens_per_second_per_gpu") or ""
        if spec is None or not measured:
            reason = NOT_COVERED.get(row_id, "no tokens/s figure" if not measured else "not mapped")
            not_covered.append({"row_id": row_id, "model": row["model"], "method": row["method"],
                                "gpu": row["gpu_type"], "reason": reason})
            continue
        predicted = predict_tokens_per_second_per_gpu(spec)
        measured_f = float(measured)
        covered.append({
            "row_id": row_id, "source": row["source_repo_or_site"], "workload": row["workload"],
            "model": row["model"], "method": spec["method"], "gpu": spec["gpu"], "num_gpus": spec["num_gpus"],
            "seq_len": spec["seq_len"], "micro_batch_size": spec["micro_batch_size"],
            "predicted_tokens_per_second_per_gpu": predicted,
            "measured_tokens_per_second_per_gpu": measured_f,
            "error_pct": 100.0 * (predicted - measured_f) / measured_f,
            "note": spec["note"],
        })
    summary = {"all": _stats(covered)}
    for workload in sorted({r["workload"] for r in covered}):
        summary[workload] = _stats([r for r in covered if r["workload"] == workload])
    for method in ("full", "lora", "qlora"):
        summary["fine-tune/" + method] = _stats([r for r in covered
                                                 if r["workload"] == "fine-tune" and r["method"] == method])
    return {"rows": covered, "not_covered": not_covered, "summary": summary,
            "qlora_ratio_check": qlora_ratio_check(rows)}


def main() -> int:
    result = compare()
    print(f"{'row':>4} {'workload':9} {'model':16} {'method':6} {'gpu':15} {'n':>3} "
          f"{'pred tok/s':>10} {'meas tok/s':>10} {'err %':>7}  note")
    for r in result["rows"]:
        print(f"{r['row_id']:>4} {r['workload']:9} {r['model'][:16]:16} {r['method']:6} {r['gpu']:15} "
              f"{r['num_gpus']:>3} {r['predicted_tokens_per_second_per_gpu']:>10.0f} "
              f"{r['measured_tokens_per_second_per_gpu']:>10.0f} {r['error_pct']:>+7.1f}  {r['note']}")
    print("\nabsolute percentage error (tokens/s per GPU):")
    for name, s in result["summary"].items():
        if s.get("rows"):
            print(f"  {name:18} rows {s['rows']:>3}  median {s['median_abs_pct']:5.1f} %  "
                  f"p90 {s['p90_abs_pct']:5.1f} %  max {s['max_abs_pct']:5.1f} %  mean signed {s['mean_signed_pct']:+6.1f} %")
    print("\nQLoRA / LoRA speed, measured vs calc's factor:")
    for q in result["qlora_ratio_check"]:
        print(f"  rows {q['rows']}: {q['model']} on {q['gpu']}: measured {q['measured_ratio']:.2f}, "
              f"calc {q['calc_factor']:.2f}")
    print(f"\nnot covered ({len(result['not_covered'])} rows):")
    for r in result["not_covered"]:
        print(f"  {r['row_id']:>4} {r['model'][:22]:22} {r['gpu'][:28]:28} {r['reason']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
