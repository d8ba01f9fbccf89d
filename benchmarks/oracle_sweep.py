"""calc against the fake-tensor oracle (tools/oracle) on a sweep of training setups.

Usage: ``python -m benchmarks.oracle_sweep [--only SUBSTRING] [--no-write]`` (from the
repository root; needs torch, transformers and peft, as in ``tools/requirements-measure.txt``).

Each setup is one estimate request (calc's vocabulary, with the keys that describe the
traced code: Hugging Face transformers 5.17 + peft 0.21 + torch 2.13, so
``attention_grouped_kv`` is true for SDPA) plus the oracle's own options
(``reentrant`` checkpointing). The models are the families' real layer structure at
reduced depth and width (2 blocks, hidden 448-512), so every mechanism runs while a
step takes about a second on one core. Oracle results are cached under
``.cache/oracle_sweep/`` by a hash of the setup and the library versions, so a rerun
only traces what changed.

Printed: per setup and phase, calc and oracle and the signed error, worst peak first;
then the share of setups whose allocated peak is within 2 % and within 5 %, and the
worst. The summary is written to ``validation/oracle_sweep_summary.json``, which the
methodology page renders (the site build never needs torch).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE_DIR = ROOT / ".cache" / "oracle_sweep"
SUMMARY_PATH = ROOT / "validation" / "oracle_sweep_summary.json"
PHASES = ("forward_end", "backward", "optimizer_step")

# Reduced-size configs with each family's real structure (module names, norms, GQA ratio,
# head_dim, biases, tying, soft-capping, q/k norms, MoE routing).
FAMILIES: dict[str, dict] = {
    "llama": {"model_type": "llama", "hidden_size": 512, "intermediate_size": 1376,
              "num_attention_heads": 8, "num_key_value_heads": 8, "num_hidden_layers": 2,
              "vocab_size": 8000, "max_position_embeddings": 4096},
    "llama3-gqa-tied": {"model_type": "llama", "hidden_size": 512, "intermediate_size": 1792,
                        "num_attention_heads": 8, "num_key_value_heads": 2, "num_hidden_layers": 2,
                        "vocab_size": 16000, "max_position_embeddings": 8192,
                        "tie_word_embeddings": True},
    "mistral": {"model_type": "mistral", "hidden_size": 512, "intermediate_size": 1792,
                "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 64,
                "num_hidden_layers": 2, "vocab_size": 8000, "max_position_embeddings": 8192,
                "sliding_window": None},
    "qwen2": {"model_type": "qwen2", "hidden_size": 448, "intermediate_size": 2368,
              "num_attention_heads": 7, "num_key_value_heads": 1, "num_hidden_layers": 2,
              "vocab_size": 15200, "max_position_embeddings": 8192, "tie_word_embeddings": False},
    "qwen3": {"model_type": "qwen3", "hidden_size": 512, "intermediate_size": 1536,
              "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 64,
              "num_hidden_layers": 2, "vocab_size": 15200, "max_position_embeddings": 8192,
              "tie_word_embeddings": False},
    "gemma2": {"model_type": "gemma2", "hidden_size": 448, "intermediate_size": 1792,
               "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 128,
               "num_hidden_layers": 2, "vocab_size": 16000, "max_position_embeddings": 8192,
               "sliding_window": 4096},
    "gemma3": {"model_type": "gemma3_text", "hidden_size": 512, "intermediate_size": 2048,
               "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 128,
               "num_hidden_layers": 2, "vocab_size": 16000, "max_position_embeddings": 8192,
               "sliding_window": 4096},
    "phi3": {"model_type": "phi3", "hidden_size": 512, "intermediate_size": 1376,
             "num_attention_heads": 8, "num_key_value_heads": 8, "num_hidden_layers": 2,
             "vocab_size": 8064, "max_position_embeddings": 4096, "pad_token_id": 0},
    "qwen3_moe": {"model_type": "qwen3_moe", "hidden_size": 512, "intermediate_size": 1536,
                  "moe_intermediate_size": 192, "num_experts": 8, "num_experts_per_tok": 2,
                  "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 64,
                  "num_hidden_layers": 2, "vocab_size": 15200, "max_position_embeddings": 8192,
                  "tie_word_embeddings": False, "decoder_sparse_step": 1, "mlp_only_layers": []},
}

ATTENTION_ONLY = ["q_proj", "k_proj", "v_proj", "o_proj"]

# name -> (request overrides, oracle options)
VARIANTS: dict[str, tuple[dict, dict]] = {
    "full": ({"method": "full"}, {}),
    "full-ckpt": ({"method": "full", "gradient_checkpointing": True}, {}),
    "full-ckpt-reentrant": ({"method": "full", "gradient_checkpointing": True}, {"reentrant": True}),
    "full-mixed": ({"method": "full", "precision": "bf16-mixed"}, {}),
    "full-eager": ({"method": "full", "attention": "eager"}, {}),
    "full-b2-s512": ({"method": "full", "micro_batch_size": 2, "seq_len": 512}, {}),
    "full-outputs-kept": ({"method": "full", "loss_outputs_kept": True}, {}),
    "full-fused-adamw": ({"method": "full", "optimizer_fused": True}, {}),
    "lora-r16": ({"method": "lora", "lora_rank": 16}, {}),
    "lora-r16-fp32": ({"method": "lora", "lora_rank": 16, "lora_adapter_dtype": "fp32"}, {}),
    "lora-r64-fp32-s512": ({"method": "lora", "lora_rank": 64, "lora_adapter_dtype": "fp32",
                            "seq_len": 512}, {}),
    "lora-r8-attn": ({"method": "lora", "lora_rank": 8, "lora_targets": ATTENTION_ONLY}, {}),
    "lora-dropout": ({"method": "lora", "lora_rank": 16, "lora_dropout": 0.1}, {}),
    "lora-ckpt": ({"method": "lora", "lora_rank": 16, "gradient_checkpointing": True}, {}),
    "lora-ckpt-reentrant": ({"method": "lora", "lora_rank": 16, "gradient_checkpointing": True},
                            {"reentrant": True}),
    "lora-mixed": ({"method": "lora", "lora_rank": 16, "precision": "bf16-mixed"}, {}),
    "lora-eager": ({"method": "lora", "lora_rank": 16, "attention": "eager"}, {}),
    "lora-fp32-ckpt-b2": ({"method": "lora", "lora_rank": 32, "lora_adapter_dtype": "fp32",
                           "gradient_checkpointing": True, "micro_batch_size": 2}, {}),
    # the library profiles of calc.frameworks that describe this code, keys left to them
    "full-hf-trainer": ({"method": "full", "framework": "hf-trainer"}, {}),
    "lora-hf-custom-loop": ({"method": "lora", "lora_rank": 16, "framework": "hf-custom-loop"}, {}),
}

# QLoRA (tools/oracle/qlora.py: a model of bitsandbytes 0.49.2's Linear4bit, not the kernel).
# peft puts adapters in the 4-bit layer's bf16 compute dtype and, by default
# (autocast_adapter_dtype=True), upcasts them to fp32: lora_adapter_dtype "fp32" ("base" with
# autocast_adapter_dtype=False); precision "fp32" is what peft's prepare_model_for_kbit_training
# makes of a bf16 model (non-quantized parameters in fp32).
QLORA_VARIANTS: dict[str, tuple[dict, dict]] = {
    "qlora-r16": ({"method": "qlora", "lora_rank": 16, "lora_adapter_dtype": "fp32"}, {}),
    "qlora-ckpt": ({"method": "qlora", "lora_rank": 16, "lora_adapter_dtype": "fp32",
                    "gradient_checkpointing": True}, {}),
    "qlora-r64-nodq-s512": ({"method": "qlora", "lora_rank": 64, "lora_adapter_dtype": "fp32",
                             "qlora_double_quant": False, "seq_len": 512}, {}),
    "qlora-r8-attn-bf16-adapters": ({"method": "qlora", "lora_rank": 8, "lora_targets": ATTENTION_ONLY,
                                     "lora_adapter_dtype": "base"}, {}),
    "qlora-prepared-ckpt-reentrant": ({"method": "qlora", "lora_rank": 16, "lora_adapter_dtype": "fp32",
                                       "precision": "fp32", "gradient_checkpointing": True},
                                      {"reentrant": True}),
}
# a few more on one family: the prepare_model_for_kbit_training call itself, batch, dropout, eager
QLORA_EXTRA: dict[str, tuple[dict, dict]] = {
    "qlora-prepare-kbit": ({"method": "qlora", "lora_rank": 16, "lora_adapter_dtype": "fp32",
                            "precision": "fp32"}, {"prepare_kbit": True}),
    "qlora-b2-dropout": ({"method": "qlora", "lora_rank": 32, "lora_adapter_dtype": "fp32",
                          "micro_batch_size": 2, "lora_dropout": 0.05}, {}),
    "qlora-eager-ckpt": ({"method": "qlora", "lora_rank": 16, "lora_adapter_dtype": "fp32",
                          "attention": "eager", "gradient_checkpointing": True}, {}),
}
QLORA_EXTRA_FAMILIES = ("llama", "qwen3", "gemma2")

# MoE LoRA on the experts as transformers 5 stores them (3-D tensors, peft target_parameters):
# calc's "fused-3d" expert layout (calc/lora.py).
MOE_FUSED_VARIANTS: dict[str, tuple[dict, dict]] = {
    "lora-all-linear-fused": ({"method": "lora", "lora_rank": 16, "lora_targets": "all-linear",
                               "lora_adapter_dtype": "fp32", "moe_expert_layout": "fused-3d"}, {}),
    "lora-all-linear-fused-ckpt": ({"method": "lora", "lora_rank": 16, "lora_targets": "all-linear",
                                    "lora_adapter_dtype": "fp32", "moe_expert_layout": "fused-3d",
                                    "gradient_checkpointing": True}, {}),
    "lora-mlp-fused-bf16": ({"method": "lora", "lora_rank": 8, "moe_expert_layout": "fused-3d",
                             "lora_targets": ["gate_proj", "up_proj", "down_proj"],
                             "lora_adapter_dtype": "base"}, {}),
    "lora-mlp-fused-fp32": ({"method": "lora", "lora_rank": 8, "moe_expert_layout": "fused-3d",
                             "lora_targets": ["gate_proj", "up_proj", "down_proj"],
                             "lora_adapter_dtype": "fp32"}, {}),
    "lora-all-linear-fused-bf16": ({"method": "lora", "lora_rank": 8, "lora_targets": "all-linear",
                                    "lora_adapter_dtype": "base", "moe_expert_layout": "fused-3d"}, {}),
    "lora-experts-router-fused-b2-ckpt": ({"method": "lora", "lora_rank": 32, "moe_expert_layout": "fused-3d",
                                           "lora_targets": ["gate", "gate_proj", "up_proj", "down_proj"],
                                           "lora_adapter_dtype": "fp32", "micro_batch_size": 2,
                                           "gradient_checkpointing": True}, {}),
    # the hf-trainer profile (transformers 5) sets the layout itself: no key in the request
    "lora-all-linear-hf-trainer": ({"method": "lora", "lora_rank": 16, "lora_targets": "all-linear",
                                    "framework": "hf-trainer"}, {}),
}

# LoRA / QLoRA that also trains the embedding and / or the output layer in full (peft
# modules_to_save: a trainable deep copy beside the frozen original), on an untied, a tied and
# a q/k-norm family.
MODULES_TO_SAVE_VARIANTS: dict[str, tuple[dict, dict]] = {
    "lora-save-both": ({"method": "lora", "lora_rank": 16, "lora_modules_to_save": "embed_tokens+lm_head"}, {}),
    "lora-save-both-fp32": ({"method": "lora", "lora_rank": 16, "lora_adapter_dtype": "fp32",
                             "lora_modules_to_save": "embed_tokens+lm_head"}, {}),
    "lora-save-embed-ckpt": ({"method": "lora", "lora_rank": 16, "lora_modules_to_save": "embed_tokens",
                              "gradient_checkpointing": True}, {}),
    "lora-save-head-mixed": ({"method": "lora", "lora_rank": 16, "lora_modules_to_save": "lm_head",
                              "precision": "bf16-mixed"}, {}),
    "qlora-save-both": ({"method": "qlora", "lora_rank": 16, "lora_adapter_dtype": "fp32",
                         "lora_modules_to_save": "embed_tokens+lm_head"}, {}),
    "lora-save-both-tied": ({"method": "lora", "lora_rank": 16,
                             "lora_modules_to_save": "embed_tokens+lm_head-tied"}, {}),
    "qlora-save-both-ckpt": ({"method": "qlora", "lora_rank": 16, "lora_adapter_dtype": "fp32",
                              "lora_modules_to_save": "embed_tokens+lm_head", "gradient_checkpointing": True}, {}),
}
MODULES_TO_SAVE_FAMILIES = ("llama", "llama3-gqa-tied", "qwen3")

BASE_REQUEST = {"micro_batch_size": 1, "seq_len": 256, "gradient_checkpointing": False,
                "attention": "sdpa", "attention_grouped_kv": True}


def setups() -> list[dict]:
    """Every (family, variant) pair; MoE LoRA adapts the attention only, but for the
    MOE_FUSED_VARIANTS (calc's moe_expert_layout="fused-3d")."""
    out = []
    for family, cfg in FAMILIES.items():
        for variant, (overrides, options) in VARIANTS.items():
            request = dict(BASE_REQUEST, model={"hf_config": cfg}, **overrides)
            if "framework" in overrides:
                del request["attention_grouped_kv"]  # left to the profile
            if family == "phi3" and request.get("lora_targets") == ATTENTION_ONLY:
                request["lora_targets"] = ["qkv_proj", "o_proj"]  # Phi-3's fused projections
            if family == "qwen3_moe" and request["method"] == "lora" and "lora_targets" not in overrides:
                request["lora_targets"] = ATTENTION_ONLY
            out.append({"id": f"{family}/{variant}", "request": request, "oracle": dict(options)})
    for variant, (overrides, options) in MOE_FUSED_VARIANTS.items():
        request = dict(BASE_REQUEST, model={"hf_config": FAMILIES["qwen3_moe"]}, **overrides)
        out.append({"id": f"qwen3_moe/{variant}", "request": request, "oracle": dict(options)})
    for family in MODULES_TO_SAVE_FAMILIES:
        for variant, (overrides, options) in MODULES_TO_SAVE_VARIANTS.items():
            request = dict(BASE_REQUEST, model={"hf_config": FAMILIES[family]}, **overrides)
            out.append({"id": f"{family}/{variant}", "request": request, "oracle": dict(options)})
    for family, cfg in FAMILIES.items():
        if family == "qwen3_moe":
            continue  # bitsandbytes leaves the 3-D expert tensors of transformers 5 unquantized
        variants = dict(QLORA_VARIANTS, **(QLORA_EXTRA if family in QLORA_EXTRA_FAMILIES else {}))
        for variant, (overrides, options) in variants.items():
            request = dict(BASE_REQUEST, model={"hf_config": cfg}, **overrides)
            if family == "phi3" and request.get("lora_targets") == ATTENTION_ONLY:
                request["lora_targets"] = ["qkv_proj", "o_proj"]
            out.append({"id": f"{family}/{variant}", "request": request, "oracle": dict(options)})
    return out


def _cache_key(setup: dict, versions: dict) -> str:
    qlora = setup["request"].get("method") == "qlora"
    text = json.dumps({"setup": setup, "versions": versions, "oracle": _oracle_source_hash(qlora)},
                      sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


QLORA_ONLY_SOURCES = ("qlora.py",)
"""Oracle modules only QLoRA setups run: a change to them retraces those setups only."""


def _oracle_source_hash(qlora: bool = True) -> str:
    """The oracle's own code is part of the key: a change to it retraces."""
    digest = hashlib.sha256()
    for path in sorted((ROOT / "tools" / "oracle").glob("*.py")):
        if qlora or path.name not in QLORA_ONLY_SOURCES:
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def oracle_request(request: dict) -> dict:
    """The request the oracle traces. ``moe_expert_layout="fused-3d"`` is what the installed
    transformers 5 builds anyway (3-D expert tensors, peft ``target_parameters``), so it is
    dropped rather than taught to the oracle, whose source hash keys every cached trace."""
    out = dict(request)
    if out.get("moe_expert_layout") == "fused-3d":
        del out["moe_expert_layout"]
    return out


def run_oracle(setup: dict, versions: dict) -> dict:
    """The oracle's response for one setup, from the cache when there."""
    path = CACHE_DIR / f"{_cache_key(setup, versions)}.json"
    if path.exists():
        return json.loads(path.read_text())
    from tools.oracle import Unsupported, oracle_estimate

    try:
        result = oracle_estimate(dict(oracle_request(setup["request"]), oracle=setup["oracle"]))
        result.pop("request", None)
    except Unsupported as exc:
        result = {"unsupported": str(exc)}
    except RuntimeError as exc:  # an op the fake CPU run cannot take the CUDA path of
        result = {"unsupported": f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"}
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result))
    return result


def compare(setup: dict, oracle: dict) -> dict:
    """calc's estimate beside the oracle's, per phase; errors are ``calc / oracle - 1``."""
    from calc.memory import estimate_dict

    calc = estimate_dict(setup["request"])
    phases = {}
    for phase in PHASES:
        o = oracle["phases"].get(phase)
        c = calc["phases"].get(phase)
        if o and c is not None:
            phases[phase] = {"calc": c, "oracle": o, "error": c / o - 1}
    return {"id": setup["id"], "calc_peak": calc["peak_allocated_bytes"],
            "oracle_peak": oracle["peak_allocated_bytes"],
            "peak_error": calc["peak_allocated_bytes"] / oracle["peak_allocated_bytes"] - 1,
            "calc_phase": calc["peak_phase"], "oracle_phase": oracle["peak_phase"],
            "phases": phases}


def method_of(row: dict) -> str:
    """The fine-tuning method of a sweep row, from its variant's name."""
    variant = row["id"].split("/", 1)[1]
    return variant.split("-", 1)[0]


def summarise(rows: list[dict], versions: dict) -> dict:
    """Shares within 2 % and 5 % (allocated peak), the worst peak and phase errors, over all
    rows and per method (``groups``)."""
    out = _figures(rows)
    out["groups"] = {m: _figures([r for r in rows if method_of(r) == m])
                     for m in ("full", "lora", "qlora") if any(method_of(r) == m for r in rows)}
    out["families"] = sorted({r["id"].split("/")[0] for r in rows})
    out["versions"] = versions
    return out


def _figures(rows: list[dict]) -> dict:
    n = len(rows)
    peak = sorted(abs(r["peak_error"]) for r in rows)
    worst = max(rows, key=lambda r: abs(r["peak_error"])) if rows else None
    phase_errors = [abs(p["error"]) for r in rows for p in r["phases"].values()]
    return {
        "setups": n,
        "within_2pct": sum(1 for e in peak if e <= 0.02),
        "within_5pct": sum(1 for e in peak if e <= 0.05),
        "median_abs_error": peak[n // 2] if n else None,
        "worst_id": worst["id"] if worst else None,
        "worst_error": worst["peak_error"] if worst else None,
        "phases_within_5pct": sum(1 for e in phase_errors if e <= 0.05),
        "phases": len(phase_errors),
        "beyond_2pct": [{"id": r["id"], "error": round(r["peak_error"], 4)}
                        for r in sorted(rows, key=lambda r: -abs(r["peak_error"]))
                        if abs(r["peak_error"]) > 0.02],
    }


def _pct(x: float) -> str:
    return f"{100 * x:+6.2f} %"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="run the setups whose id contains this text")
    parser.add_argument("--no-write", action="store_true", help="do not rewrite the summary file")
    args = parser.parse_args(argv)
    try:
        from tools.oracle.run import versions as library_versions
        versions = library_versions()
    except ImportError as exc:
        print(f"oracle_sweep needs torch, transformers and peft: {exc}", file=sys.stderr)
        return 2
    chosen = [s for s in setups() if not args.only or args.only in s["id"]]
    rows, unsupported = [], []
    started = time.perf_counter()
    for i, setup in enumerate(chosen, 1):
        oracle = run_oracle(setup, versions)
        if "unsupported" in oracle:
            unsupported.append((setup["id"], oracle["unsupported"]))
            continue
        rows.append(compare(setup, oracle))
        print(f"[{i}/{len(chosen)}] {setup['id']:<40} {_pct(rows[-1]['peak_error'])}",
              file=sys.stderr, flush=True)
    rows.sort(key=lambda r: -abs(r["peak_error"]))
    print(f"{'setup':<40} {'peak calc/oracle MiB':>22} {'peak':>9}   "
          + "   ".join(f"{p:>16}" for p in PHASES))
    for r in rows:
        phases = "   ".join(f"{_pct(r['phases'][p]['error']):>16}" if p in r["phases"] else f"{'-':>16}"
                           for p in PHASES)
        print(f"{r['id']:<40} {r['calc_peak'] / 2**20:10.1f} / {r['oracle_peak'] / 2**20:9.1f} "
              f"{_pct(r['peak_error'])}   {phases}")
    for sid, why in unsupported:
        print(f"{sid:<40} unsupported: {why}")
    s = summarise(rows, versions)
    print()
    print(f"setups {s['setups']}: allocated peak within 2 %: {s['within_2pct']} "
          f"({100 * s['within_2pct'] / max(1, s['setups']):.1f} %), within 5 %: {s['within_5pct']}; "
          f"median |error| {100 * (s['median_abs_error'] or 0):.2f} %; worst {s['worst_id']} "
          f"{_pct(s['worst_error'] or 0)}")
    for method, g in s["groups"].items():
        print(f"  {method:<6} setups {g['setups']}: within 2 %: {g['within_2pct']}, within 5 %: "
              f"{g['within_5pct']}; worst {g['worst_id']} {_pct(g['worst_error'] or 0)}")
    print(f"phases within 5 %: {s['phases_within_5pct']} of {s['phases']}; "
          f"{time.perf_counter() - started:.0f} s; {versions}")
    if not args.only and not args.no_write:
        SUMMARY_PATH.write_text(json.dumps(s, indent=1) + "\n")
        print(f"summary written to {SUMMARY_PATH.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
