"""Speed of the memory model: one estimate (median, CPython) and ``import calc``.

Usage: ``python -m benchmarks.bench_estimate``. Targets: one estimate
<= 1 ms median; ``import calc`` <= 50 ms.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

REQUESTS = {
    "lora default (llama-3.1-8b)": {"model": "llama-3.1-8b"},
    "qlora list targets (llama-2-7b)": {
        "model": "llama-2-7b",
        "method": "qlora",
        "lora_rank": 8,
        "lora_targets": ["q_proj", "v_proj"],
    },
    "full zero3 8 GPUs (llama-3.1-70b)": {
        "model": "llama-3.1-70b",
        "method": "full",
        "num_gpus": 8,
        "sharding": "zero3",
        "optimizer": "adamw-8bit",
    },
    "moe lora (mixtral-8x7b)": {"model": "mixtral-8x7b", "attention": "eager", "seq_len": 4096},
}

IMPORT_SNIPPET = "import time; t = time.perf_counter(); import calc; print(time.perf_counter() - t)"


def time_estimates(request: dict, runs: int = 2000) -> float:
    """Median seconds of ``calc.memory.estimate_dict`` (validation + model + serialisation)."""
    from calc.memory import estimate_dict

    estimate_dict(request)  # warm: presets loaded once
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        estimate_dict(request)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def time_import(runs: int = 7) -> float:
    """Median seconds of ``import calc`` in a fresh interpreter."""
    out = []
    for _ in range(runs):
        proc = subprocess.run(
            [sys.executable, "-c", IMPORT_SNIPPET], capture_output=True, text=True, check=True
        )
        out.append(float(proc.stdout))
    return statistics.median(out)


def main() -> int:
    print(f"python {sys.version.split()[0]}")
    for label, request in REQUESTS.items():
        print(
            f"estimate {label:<36} median {1e3 * time_estimates(request):7.3f} ms  (target <= 1 ms)"
        )
    print(f"import calc{'':<36} median {1e3 * time_import():7.2f} ms  (target <= 50 ms)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
