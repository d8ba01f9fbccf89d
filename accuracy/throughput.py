"""calc's time model against published training throughput, leave-one-source-out.

``validation/measured_throughput.csv`` is the single source of truth: each row carries the
published figure, its settings and, in ``calc_request``, the same setup as a calc plan
request (JSON), or in ``calc_not_covered`` why calc cannot express it. :func:`compare`

1. fits the time model's fitted constants (:data:`calc.timing.MATMUL_EFFICIENCY` per card
   class, :data:`~calc.timing.MATMUL_EFFICIENCY_POOLED`, :data:`~calc.timing.MATMUL_HALF_TOKENS`,
   :data:`~calc.timing.FP8_MATMUL_EFFICIENCY`) on every covered row (in-sample), and again
   once per source with that source's rows held out (LOSO), predicting the held-out rows;
2. computes median, p90 and max absolute % error of tokens/s per GPU, in-sample and LOSO,
   overall, by workload, method, card class and source;
3. says which constant rests on a single source and what its LOSO error is.

The methodology page and the tests read :func:`compare`; ``python -m
benchmarks.validate_throughput`` prints it.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import statistics
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from accuracy import DATA_DIR, ROOT
from accuracy.stats import percentile
from calc import timing
from calc.memory import estimate_request
from calc.plan import parse_plan_request
from calc.request import Sharding

CSV_PATH = DATA_DIR / "measured_throughput.csv"


def _qwen1(hidden: int, layers: int, heads: int, ffn: int, vocab: int = 151936) -> dict:
    """Qwen (1.x) has llama's shapes with fused c_attn; its config's intermediate_size is twice
    the per-matrix width (Qwen-7B: 22016 -> 11008)."""
    return {
        "hf_config": {
            "model_type": "llama",
            "hidden_size": hidden,
            "num_hidden_layers": layers,
            "num_attention_heads": heads,
            "num_key_value_heads": heads,
            "intermediate_size": ffn,
            "vocab_size": vocab,
            "max_position_embeddings": 32768,
        }
    }


def _mpt(hidden: int, layers: int, heads: int) -> dict:
    """MPT blocks: attention plus a plain 4h MLP, tied embeddings, vocab 50432 (MPT model cards).
    calc reads no "mpt" family; gpt_neox with the same shapes has the same matmul FLOPs."""
    return {
        "hf_config": {
            "model_type": "gpt_neox",
            "hidden_size": hidden,
            "num_hidden_layers": layers,
            "num_attention_heads": heads,
            "intermediate_size": 4 * hidden,
            "vocab_size": 50432,
            "max_position_embeddings": 8192,
            "tie_word_embeddings": True,
            "use_parallel_residual": False,
        }
    }


def _qwen3(hidden: int, layers: int, heads: int, ffn: int, tied: bool) -> dict:
    """Qwen3 dense models (config.json of Qwen/Qwen3-*: 8 k/v heads, head_dim 128, vocab
    151936, q/k norms)."""
    return {
        "hf_config": {
            "model_type": "qwen3",
            "hidden_size": hidden,
            "num_hidden_layers": layers,
            "num_attention_heads": heads,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "intermediate_size": ffn,
            "vocab_size": 151936,
            "max_position_embeddings": 40960,
            "tie_word_embeddings": tied,
        }
    }


MODELS = {  # shapes of models calc has no preset for (from their model cards / configs)
    "qwen-1.8b": _qwen1(2048, 24, 16, 5504),
    "qwen-7b": _qwen1(4096, 32, 32, 11008),
    "qwen-14b": _qwen1(5120, 40, 40, 13696),
    "qwen-72b": _qwen1(8192, 80, 64, 24576, vocab=152064),
    "mpt-3b": _mpt(2560, 32, 32),
    "mpt-7b": _mpt(4096, 32, 32),
    "mpt-13b": _mpt(5120, 40, 40),
    "mpt-30b": _mpt(7168, 48, 64),
    "mpt-70b": _mpt(8192, 80, 64),
    "qwen3-0.6b": _qwen3(1024, 28, 16, 3072, True),
    "qwen3-1.7b": _qwen3(2048, 28, 16, 6144, True),
    "qwen3-4b": _qwen3(2560, 36, 32, 9728, True),
    "qwen3-8b": _qwen3(4096, 36, 32, 12288, False),
    "qwen3-14b": _qwen3(5120, 40, 40, 17408, False),
    "qwen3-32b": _qwen3(5120, 64, 64, 25600, False),
}

QLORA_PAIRS = [(77, 78), (79, 80), (81, 82), (87, 88), (89, 90), (91, 92), (24, 25)]
QLORA_PAIR_MEAN_TOKENS = 256
"""Tokens per sample assumed for the QLoRA/LoRA pairs that publish samples/s only (Alpaca,
unpadded, capped at 512): their ratio is compared with calc's at this length."""


def load_rows(path: Path = CSV_PATH) -> dict[int, dict]:
    text = path.read_text(encoding="utf-8")
    return {int(r["row_id"]): r for r in csv.DictReader(io.StringIO(text))}


ROW_FRAMEWORK = "generic"
"""The ``framework`` of a row whose request names none: the rows come from many stacks
(llm-foundry, torchtitan, Megatron, Unsloth, Answer.AI's FSDP loop, the HF Trainer…), so
each is judged with the keys its request states and every other key at its own default,
not with the request's default library."""


def row_request(row: dict) -> dict | None:
    """The row's calc plan request (``calc_request`` JSON), model names resolved."""
    text = (row.get("calc_request") or "").strip()
    if not text:
        return None
    req = json.loads(text)
    req.setdefault("framework", ROW_FRAMEWORK)
    if req["model"] in MODELS:
        req["model"] = MODELS[req["model"]]
    req.setdefault("dataset_tokens", 1e9)
    return req


@dataclass(frozen=True)
class Case:
    """One covered row, with what its prediction needs precomputed."""

    row_id: int
    source: str
    workload: str
    method: str
    gpu: str
    card_class: str
    num_gpus: int
    measured: float
    counts: timing.Counts
    rates: timing.Rates
    sharding: Sharding
    kwargs: tuple
    fp8: bool
    note: str
    model: str
    fitted: bool = True


NOT_FITTED_NOTES = frozenset({"whole_run_time_includes_startup"})
"""Row notes whose figure is not steady-state tokens/s (a whole job's wall time holds start-up,
compilation and data loading, which calc reports apart): such rows are judged like the others
but no constant is fitted on them. Rows on a power-limited card (``power_limited_card``: the L4
rows of Philipp Schmid's TRL table, a 72 W board whose 121 TFLOPS bf16 is quoted at its boost
clock) are fitted on: calc runs every card at the clock it holds under its board power
(``gpus.csv`` ``sustained_clock_mhz``), so their power limit is no longer read as a matmul
property; they are the second source of the workstation and data-centre GDDR class beside
Answer.AI's RTX 6000 Ada."""


def cases(rows: dict[int, dict]) -> list[Case]:
    out = []
    for row_id, row in rows.items():
        data = row_request(row)
        measured = row.get("tokens_per_second_per_gpu") or ""
        if data is None or not measured or row.get("calc_not_covered"):
            continue
        req, opts = parse_plan_request(data)
        c = timing.counts(req, req.sharding)
        mem = estimate_request(req)
        overflow = timing.paged_overflow_bytes(
            {
                "unified_memory_bytes": mem.unified_memory_bytes,
                "device_total_bytes": mem.device_total_bytes,
            },
            opts.gpu,
        )
        out.append(
            Case(
                row_id=row_id,
                source=row["source_repo_or_site"],
                workload=row["workload"],
                method=req.method.value,
                gpu=opts.gpu.id,
                card_class=opts.gpu.utilisation_class,
                num_gpus=req.num_gpus,
                measured=float(measured),
                counts=c,
                rates=timing.card_rates(opts.gpu, req.num_gpus, opts.network, opts.gpus_per_node),
                sharding=req.sharding,
                kwargs=(
                    ("cpu_offload", req.cpu_offload),
                    ("sync_each_micro_batch", req.sync_each_micro_batch),
                    ("paged_overflow_bytes", overflow),
                ),
                fp8=opts.fp8_compute,
                note=row.get("calc_note", ""),
                model=row["model"],
                fitted=not NOT_FITTED_NOTES
                & set(row.get("calc_note", "").replace(" ", "").split(";")),
            )
        )
    return out


@dataclass(frozen=True)
class Params:
    efficiency: tuple  # ((class, eff), ...)
    pooled: float
    half_tokens: float
    fp8: float
    dispatch: float = timing.DISPATCH_SECONDS_PER_KERNEL

    def eff(self, card_class: str) -> float:
        return dict(self.efficiency).get(card_class, self.pooled)

    def to_dict(self) -> dict:
        return {
            "matmul_efficiency": dict(self.efficiency),
            "matmul_efficiency_pooled": self.pooled,
            "matmul_half_tokens": self.half_tokens,
            "fp8_matmul_efficiency": self.fp8,
            "dispatch_seconds_per_kernel": self.dispatch,
        }


def predict(
    case: Case,
    eff: float,
    half_tokens: float,
    fp8_eff: float,
    dispatch: float = timing.DISPATCH_SECONDS_PER_KERNEL,
) -> float:
    b = timing.step_breakdown(
        case.counts,
        case.rates,
        num_gpus=case.num_gpus,
        sharding=case.sharding,
        efficiency=eff,
        half_tokens=half_tokens,
        fp8=case.fp8,
        fp8_efficiency=fp8_eff,
        dispatch_seconds=dispatch,
        **dict(case.kwargs),
    )
    return case.counts.tokens_micro * case.counts.accumulation / b.step_seconds


def breakdown_with(case: Case, p: Params) -> timing.StepBreakdown:
    """The row's step with the constants ``p`` (:func:`predict`'s, as a breakdown)."""
    return timing.step_breakdown(
        case.counts,
        case.rates,
        num_gpus=case.num_gpus,
        sharding=case.sharding,
        efficiency=p.eff(case.card_class),
        half_tokens=p.half_tokens,
        fp8=case.fp8,
        fp8_efficiency=p.fp8,
        dispatch_seconds=p.dispatch,
        **dict(case.kwargs),
    )


def host_bound(case: Case, p: Params) -> bool:
    """Whether the host's dispatch of the row's kernels outlasts its GPU work (the step's
    ``overheads`` are not zero) with the constants ``p``: the rows the dispatch time is read
    from."""
    b = breakdown_with(case, p)
    return b.overheads > 0


def _loss(pairs) -> float:
    """Weighted sum of squared log errors (a ratio error counts the same above and below);
    ``pairs`` are (predicted, case) and each row weighs 1 / (rows of its source in the fit), so
    every source counts the same whatever its number of rows."""
    return sum(w * math.log(p / c.measured) ** 2 for p, c, w in pairs)


def _golden(f, lo: float, hi: float, iters: int = 40) -> float:
    g = (math.sqrt(5) - 1) / 2
    a, b = lo, hi
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(iters):
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - g * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + g * (b - a)
            fd = f(d)
    return (a + b) / 2


HALF_TOKEN_GRID = [2 ** (k / 4) for k in range(16, 49)]  # 16 ... 4096 tokens
DISPATCH_GRID = [1e-6 * 2 ** (k / 2) for k in range(0, 15)]  # 1 ... 128 us per kernel


def fit(train: list[Case], fallback: Params | None = None) -> Params:
    """Fit the constants on ``train`` by coordinate descent on the weighted squared log error:
    for each ``T_half`` of a log grid (the dispatch time held), the BF16 efficiency of each card
    class (golden-section search on its rows); then the dispatch time per kernel on its own
    grid (``T_half`` held); twice. Then the pooled efficiency and the FP8 efficiency on the FP8
    rows. A constant without rows in ``train`` keeps ``fallback``'s value (or calc's).

    Each constant is fitted with every source counting the same among the rows it is fitted on
    (a row weighs 1 / that source's rows there): a source whose rows are all on one card class
    would otherwise outweigh, in that class, a source with half its rows there. The choice of
    ``T_half`` and of the dispatch time, which every row informs, weighs rows by their source's
    rows in the whole fit."""
    bf16 = [c for c in train if not c.fp8]
    fp8_rows = [c for c in train if c.fp8]
    classes = sorted({c.card_class for c in bf16})
    weight = _source_weights(train)
    by_class = {cls: [c for c in bf16 if c.card_class == cls] for cls in classes}
    class_weight = {cls: _source_weights(rows) for cls, rows in by_class.items()}

    def class_fit(half: float, dispatch: float) -> tuple[float, dict]:
        effs, total = {}, 0.0
        for cls in classes:
            rows, w = by_class[cls], class_weight[cls]
            e = _golden(
                lambda x, rows=rows, w=w: _loss(
                    (predict(c, x, half, 0.3, dispatch), c, w[c.source]) for c in rows
                ),
                0.05,
                1.0,
            )
            effs[cls] = e
            total += _loss((predict(c, e, half, 0.3, dispatch), c, weight[c.source]) for c in rows)
        return total, effs

    half, dispatch = timing.MATMUL_HALF_TOKENS, timing.DISPATCH_SECONDS_PER_KERNEL
    for _ in range(2):
        _, half, effs = _best_half(class_fit, dispatch)
        dispatch = min(DISPATCH_GRID, key=lambda d: class_fit(half, d)[0])
    _, effs = class_fit(half, dispatch)
    bf16_weight, fp8_weight = _source_weights(bf16), _source_weights(fp8_rows)
    pooled = _golden(
        lambda x: _loss(
            (predict(c, x, half, 0.3, dispatch), c, bf16_weight[c.source]) for c in bf16
        ),
        0.05,
        1.0,
    )
    if fp8_rows:
        fp8 = _golden(
            lambda x: _loss(
                (
                    predict(c, effs.get(c.card_class, pooled), half, x, dispatch),
                    c,
                    fp8_weight[c.source],
                )
                for c in fp8_rows
            ),
            0.05,
            1.0,
        )
    else:
        fp8 = fallback.fp8 if fallback else timing.FP8_MATMUL_EFFICIENCY
    return Params(tuple(sorted(effs.items())), pooled, half, fp8, dispatch)


def _source_weights(rows: list[Case]) -> dict[str, float]:
    """1 / (rows of each source among ``rows``): every source counts the same in a fit on them."""
    n: dict[str, int] = {}
    for c in rows:
        n[c.source] = n.get(c.source, 0) + 1
    return {s: 1.0 / k for s, k in n.items()}


def _best_half(class_fit, dispatch: float) -> tuple:
    best = min(((*class_fit(h, dispatch), h) for h in HALF_TOKEN_GRID), key=lambda t: t[0])
    return best[0], best[2], best[1]


def calc_params() -> Params:
    """The constants calc ships (timing.py)."""
    return Params(
        tuple(sorted(timing.MATMUL_EFFICIENCY.items())),
        timing.MATMUL_EFFICIENCY_POOLED,
        timing.MATMUL_HALF_TOKENS,
        timing.FP8_MATMUL_EFFICIENCY,
        timing.DISPATCH_SECONDS_PER_KERNEL,
    )


def _predict_with(case: Case, p: Params) -> float:
    return predict(case, p.eff(case.card_class), p.half_tokens, p.fp8, p.dispatch)


def _stats(errors: list[float]) -> dict:
    if not errors:
        return {"rows": 0}
    a = [abs(e) for e in errors]
    return {
        "rows": len(a),
        "median_abs_pct": statistics.median(a),
        "p90_abs_pct": percentile(a, 90),
        "max_abs_pct": max(a),
        "mean_signed_pct": statistics.fmean(errors),
    }


def _groups(case: Case) -> list[str]:
    """Summary groups of a row: all, workload, workload/method (``+fp8`` for FP8 rows), card
    class, source."""
    method = case.method + ("+fp8" if case.fp8 else "")
    return [
        "all",
        case.workload,
        f"{case.workload}/{method}",
        "class:" + case.card_class,
        "source:" + case.source,
    ]


@lru_cache(maxsize=4)
def _compare_cached(path: str) -> dict:
    rows = load_rows(Path(path))
    all_cases = cases(rows)
    fit_cases = [c for c in all_cases if c.fitted]
    in_fit = fit(fit_cases)
    shipped = calc_params()
    out_rows = []
    loso_fits = {}
    for source in sorted({c.source for c in all_cases}):
        train = [c for c in fit_cases if c.source != source]
        loso_fits[source] = fit(train, in_fit)
    for c in all_cases:
        held = loso_fits[c.source]
        pred_in = _predict_with(c, in_fit)
        pred_loso = _predict_with(c, held)
        pred_calc = _predict_with(c, shipped)
        out_rows.append(
            {
                "row_id": c.row_id,
                "source": c.source,
                "workload": c.workload,
                "model": c.model,
                "method": c.method,
                "fp8": c.fp8,
                "gpu": c.gpu,
                "card_class": c.card_class,
                "num_gpus": c.num_gpus,
                "measured_tokens_per_second_per_gpu": c.measured,
                "predicted_tokens_per_second_per_gpu": pred_calc,
                "error_pct": 100.0 * (pred_calc - c.measured) / c.measured,
                "in_sample_error_pct": 100.0 * (pred_in - c.measured) / c.measured,
                "loso_error_pct": 100.0 * (pred_loso - c.measured) / c.measured,
                "note": c.note,
                "fitted": c.fitted,
            }
        )
    # summary[group]: calc as shipped (top level), the in-sample fit and the LOSO fit
    groups: dict[str, list[int]] = {}
    for i, c in enumerate(all_cases):
        for g in _groups(c):
            groups.setdefault(g, []).append(i)
    summary: dict = {}
    for g in sorted(groups, key=lambda k: (k != "all", ":" in k, k)):
        idx = groups[g]
        summary[g] = {
            **_stats([out_rows[i]["error_pct"] for i in idx]),
            "in_sample": _stats([out_rows[i]["in_sample_error_pct"] for i in idx]),
            "loso": _stats([out_rows[i]["loso_error_pct"] for i in idx]),
        }
    # which fitted constant rests on which sources
    basis = {}
    for cls in sorted({c.card_class for c in all_cases if not c.fp8}):
        srcs = sorted({c.source for c in fit_cases if c.card_class == cls and not c.fp8})
        errs = [
            r["loso_error_pct"]
            for r, c in zip(out_rows, all_cases, strict=True)
            if c.card_class == cls and not c.fp8
        ]
        basis["matmul_efficiency." + cls] = {
            "value": shipped.eff(cls),
            "sources": srcs,
            "single_source": len(srcs) == 1,
            "loso": _stats(errs),
        }
    srcs = sorted({c.source for c in fit_cases if c.fp8})
    basis["fp8_matmul_efficiency"] = {
        "value": shipped.fp8,
        "sources": srcs,
        "card_classes": sorted({c.card_class for c in fit_cases if c.fp8}),
        "single_source": len(srcs) == 1,
        "loso": _stats(
            [r["loso_error_pct"] for r, c in zip(out_rows, all_cases, strict=True) if c.fp8]
        ),
    }
    srcs = sorted({c.source for c in fit_cases if not c.fp8})
    # the dispatch time rests on the rows the host binds (their step waits on it in-sample)
    bound = {c.row_id: c.source for c in fit_cases if host_bound(c, in_fit)}
    basis["dispatch_seconds_per_kernel"] = {
        "value": shipped.dispatch,
        "sources": sorted(set(bound.values())),
        "single_source": len(set(bound.values())) == 1,
        "loso": _stats([r["loso_error_pct"] for r in out_rows if r["row_id"] in bound]),
    }
    basis["matmul_half_tokens"] = {
        "value": shipped.half_tokens,
        "sources": srcs,
        "single_source": len(srcs) == 1,
        "loso": _stats(
            [r["loso_error_pct"] for r, c in zip(out_rows, all_cases, strict=True) if not c.fp8]
        ),
    }
    for b in basis.values():
        b["source_count"] = len(b["sources"])
    not_covered = [
        {
            "row_id": rid,
            "model": r["model"],
            "method": r["method"],
            "gpu": r["gpu_type"],
            "reason": r.get("calc_not_covered") or "no_tokens_per_second",
        }
        for rid, r in rows.items()
        if r.get("calc_not_covered")
        or not (r.get("calc_request") and r.get("tokens_per_second_per_gpu"))
    ]
    return {
        "rows": out_rows,
        "summary": summary,
        "fit": in_fit.to_dict(),
        "loso_fits": {s: p.to_dict() for s, p in loso_fits.items()},
        "shipped": shipped.to_dict(),
        "constant_basis": basis,
        "not_covered": not_covered,
        "qlora_ratio_check": qlora_ratio_check(rows),
    }


CACHE_DIR = ROOT / ".cache" / "validate_throughput"


def _inputs_digest(path: Path) -> str:
    """SHA-256 of everything the comparison reads: the CSV, calc's code and data, this module."""
    import hashlib

    h = hashlib.sha256(path.read_bytes())
    files = [f for f in (ROOT / "calc").rglob("*") if f.is_file() and "__pycache__" not in f.parts]
    for f in sorted(
        [*files, Path(__file__).resolve(), Path(percentile.__code__.co_filename).resolve()]
    ):
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:32]


def compare(path: Path = CSV_PATH) -> dict:
    """Every row: measured vs predicted tokens/s/GPU (calc's constants, in-sample fit, LOSO
    fit), the summaries, the fits, and the rows not covered with their reason. The fits take
    tens of seconds, so the result is kept in ``.cache/validate_throughput/`` under a digest of
    every input (the CSV, calc, this module): any change recomputes it. Processes that need
    it at once (a site build beside test workers) compute it once: the others wait for the
    first one's result (a lock file beside the cache, where the platform has ``fcntl``)."""
    cache = CACHE_DIR / f"{_inputs_digest(Path(path))}.json"
    found = _read_cached(cache)
    if found is not None:
        return found
    with _cache_lock(cache.with_suffix(".lock")):
        found = _read_cached(cache)  # computed by the process that held the lock
        if found is not None:
            return found
        result = _compare_cached(str(path))
        try:
            CACHE_DIR.mkdir(parents=True, exist_ok=True)
            tmp = cache.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(result), encoding="utf-8")
            tmp.replace(cache)
        except OSError:
            pass
    return json.loads(json.dumps(result))


def _read_cached(cache: Path) -> dict | None:
    try:
        found: dict = json.loads(cache.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return found


@contextmanager
def _cache_lock(path: Path) -> Iterator[None]:
    """Held while one process computes the comparison; none where it cannot be taken."""
    try:
        import fcntl

        path.parent.mkdir(parents=True, exist_ok=True)
        lock = open(path, "a")
    except (ImportError, OSError):
        yield
        return
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        yield


def qlora_ratio_check(rows: dict[int, dict]) -> list[dict]:
    """Measured QLoRA / LoRA speed on the same model, card and stack, against calc's ratio
    (counted dequantisation) at the pair's micro-batch and :data:`QLORA_PAIR_MEAN_TOKENS`."""
    import re

    out = []
    for lora_id, qlora_id in QLORA_PAIRS:
        a, b = rows.get(lora_id), rows.get(qlora_id)
        if a is None or b is None:
            continue
        if a.get("tokens_per_second_per_gpu") and b.get("tokens_per_second_per_gpu"):
            ratio = float(b["tokens_per_second_per_gpu"]) / float(a["tokens_per_second_per_gpu"])
        else:

            def sps(row):
                for text in (row.get("flags_notes", ""), row.get("published_figure", "")):
                    m = re.search(r"samples/s = ([0-9]+(?:\.[0-9]+)?)", text) or re.search(
                        r"([0-9]+(?:\.[0-9]+)?) samples/s", text
                    )
                    if m:
                        return float(m.group(1))
                return None

            sa, sb = sps(a), sps(b)
            if not sa or not sb:
                continue
            ratio = sb / sa
        out.append(
            {
                "rows": [lora_id, qlora_id],
                "model": a["model"],
                "gpu": a["gpu_type"],
                "measured_ratio": ratio,
                "calc_ratio": _calc_qlora_ratio(a, b),
            }
        )
    return out


_PAIR_MODELS = {
    "Llama-3.1-8B": "llama-3.1-8b",
    "Llama-2-7B": "llama-2-7b",
    "Mistral-7B-v0.1": "mistral-7b",
    "Llama-2-13B": "llama-2-13b",
    "OpenLLaMA-7B": "llama-2-7b",
    "Llama-3.2-3B": "llama-3.2-3b",
}
_PAIR_GPUS = {"A10G": "a10g", "A100 40GB SXM4": "a100-40gb-sxm"}


def _pair_request(row: dict, method: str) -> dict | None:
    """The calc request of one row of a QLoRA/LoRA pair: its own ``calc_request``, or one built
    from its model, card and micro-batch at :data:`QLORA_PAIR_MEAN_TOKENS` tokens; a QLoRA row
    stated as plain ``bnb.nf4`` (LitGPT's precision without ``-dq``) has no double quantisation."""
    from calc import presets

    if row.get("calc_request"):
        return {**row_request(row), "method": method}
    model = _PAIR_MODELS.get(row["model"])
    gpu_id = next((g for k, g in _PAIR_GPUS.items() if row["gpu_type"].startswith(k)), None)
    if not (model and gpu_id and model in presets.preset_ids()):
        return None
    mb = int((row["micro_batch_per_gpu"] or "1").split()[0])
    data = {
        "model": model,
        "gpu": gpu_id,
        "micro_batch_size": mb,
        "seq_len": QLORA_PAIR_MEAN_TOKENS,
        "gradient_checkpointing": False,
        "dataset_tokens": 1e9,
        "method": method,
        "framework": ROW_FRAMEWORK,
    }
    if method == "qlora" and "nf4" in row["method"] and "dq" not in row["method"]:
        data["qlora_double_quant"] = False
    return data


def _calc_qlora_ratio(lora: dict, qlora: dict) -> float | None:
    """calc's QLoRA / LoRA speed for a pair, each row at its own micro-batch and quantisation."""
    speeds = []
    for row, method in ((lora, "lora"), (qlora, "qlora")):
        data = _pair_request(row, method)
        if data is None:
            return None
        req, opts = parse_plan_request(data)
        speeds.append(timing.estimate_time(req, opts.gpu, 1e9).tokens_per_second_per_gpu)
    return speeds[1] / speeds[0]
