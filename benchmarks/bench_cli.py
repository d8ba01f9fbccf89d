"""Start-up of the command line: wall time of whole ``python -m calc`` processes.

Usage: ``python -m benchmarks.bench_cli [--runs N]``. Target: ``estimate`` <= 150 ms
(median, from process start to exit, flags in, JSON or table out). Printed beside it: a bare
interpreter (``python -c pass``, the floor no CLI can go under) and the other commands, so the
CLI's own share is visible. Runs are interleaved (one of each per round) so the machine's load
affects every command alike.
"""

from __future__ import annotations

import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from accuracy.stats import percentile

ROOT = Path(__file__).resolve().parent.parent
EST = [
    "--model",
    "llama-3.1-8b",
    "--method",
    "qlora",
    "--seq-len",
    "4096",
    "--micro-batch-size",
    "2",
]
COMMANDS = {
    "python -c pass (floor)": ["-c", "pass"],
    "estimate --request (JSON, piped)": ["-m", "calc", "estimate", "--request", "REQ"],
    "estimate flags (JSON, piped)": ["-m", "calc", "estimate", *EST],
    "estimate flags --table --gpu": [
        "-m",
        "calc",
        "estimate",
        *EST,
        "--gpu",
        "rtx-4090",
        "--table",
    ],
    "plan flags --table": [
        "-m",
        "calc",
        "plan",
        *EST,
        "--dataset-tokens",
        "5e7",
        "--gpu",
        "rtx-4090",
        "--table",
    ],
    "estimate --help": ["-m", "calc", "estimate", "--help"],
}


def main(argv: list[str]) -> int:
    runs = int(argv[argv.index("--runs") + 1]) if "--runs" in argv else 21
    request = ROOT / ".cache" / "bench_cli_request.json"
    request.parent.mkdir(exist_ok=True)
    request.write_text(
        '{"model": "llama-3.1-8b", "method": "qlora", "seq_len": 4096, "micro_batch_size": 2}'
    )
    wall: dict[str, list[float]] = {name: [] for name in COMMANDS}
    cpu: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(runs + 1):  # the first round warms the OS caches and byte-code
        for name, args in COMMANDS.items():
            args = [str(request) if a == "REQ" else a for a in args]
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            subprocess.run([sys.executable, *args], cwd=ROOT, stdout=subprocess.DEVNULL, check=True)
            wall[name].append(time.perf_counter() - start)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu[name].append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    # CPU time (user + system) is what the process itself needed; on a shared, loaded machine
    # the wall time adds the waits for a core
    print(
        f"CLI start-up, whole process, {runs} runs each (ms): wall median / p90 / min; CPU median"
    )
    for name in COMMANDS:
        w, c = wall[name][1:], cpu[name][1:]
        print(
            f"  {name:36s} {statistics.median(w) * 1e3:7.1f} {percentile(w, 90) * 1e3:7.1f}"
            f" {min(w) * 1e3:7.1f}   {statistics.median(c) * 1e3:7.1f}"
        )
    key = "estimate flags (JSON, piped)"
    print(
        f"estimate with flags: wall {statistics.median(wall[key][1:]) * 1e3:.1f} ms median, "
        f"{min(wall[key][1:]) * 1e3:.1f} ms best; CPU {statistics.median(cpu[key][1:]) * 1e3:.1f} ms "
        f"(target <= 150 ms); a bare interpreter: wall "
        f"{statistics.median(wall['python -c pass (floor)'][1:]) * 1e3:.1f} ms"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
