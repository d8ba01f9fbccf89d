"""Time of importing a 200-line training config (target: <= 20 ms in CPython).

Builds a realistic 200-line axolotl YAML (the test fixture's keys, datasets and
special tokens repeated until 200 lines), then prints the median and p95 over runs of
``calc.config_import.import_config`` (parse + map), the parse alone, and the time a
billion-laughs file takes to be refused.

    python benchmarks/bench_config_import.py [--runs N] [--pyodide BUNDLE.zip]

``--pyodide`` also runs the import inside Pyodide under Node (the interpreter of the
calculator's worker; ``BUNDLE.zip`` is the site's ``assets/calc/calc-*.zip`` after
``mkdocs build``), prints its figures and checks its result equals CPython's.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from calc.config_import import import_config  # noqa: E402
from calc.config_import.loading import load_text  # noqa: E402
from calc.errors import InputError  # noqa: E402


def config_200_lines() -> str:
    base = (ROOT / "tests" / "configs" / "axolotl" / "qlora.yml").read_text().splitlines()
    lines = list(base)
    i = 0
    lines.append("datasets_extra_note: padding for the benchmark")
    lines.append("test_datasets:")
    while len(lines) < 200:
        lines += [
            f"  - path: org/dataset-{i}",
            "    type: chat_template",
            f"    split: train[:{i}%]",
        ]
        i += 1
    return "\n".join(lines[:200]) + "\n"


def timed(fn, runs: int, clock=time.perf_counter) -> list[float]:
    out = []
    for _ in range(runs):
        start = clock()
        fn()
        out.append((clock() - start) * 1000)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--pyodide", help="calc bundle zip: also time the import in Pyodide (Node)")
    args = parser.parse_args()
    text = config_200_lines()
    assert len(text.splitlines()) == 200
    import_config(text)  # first call imports yaml and the importer modules
    full = sorted(timed(lambda: import_config(text), args.runs))
    parse = sorted(timed(lambda: load_text(text), args.runs))
    # CPU time of this process: what the import costs when the machine is shared
    cpu = sorted(timed(lambda: import_config(text), args.runs, time.process_time))
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(8)
    )

    def refuse():
        try:
            import_config(bomb)
        except InputError:
            return
        raise AssertionError("billion laughs was accepted")

    laughs = sorted(timed(refuse, 50))
    deep = "a: " + "[" * 5000 + "]" * 5000 + "\n"

    def refuse_deep():
        try:
            import_config(deep)
        except InputError:
            return
        raise AssertionError("5000-deep nesting was accepted")

    deep_times = sorted(timed(refuse_deep, 50))
    p95 = lambda xs: xs[int(0.95 * (len(xs) - 1))]  # noqa: E731
    print(
        f"import of a 200-line axolotl config ({len(text)} bytes), {args.runs} runs, CPython {sys.version.split()[0]}"
    )
    print(
        f"  parse + map: median {statistics.median(full):.2f} ms, p95 {p95(full):.2f} ms (target <= 20 ms)"
    )
    print(f"  parse + map, CPU time: median {statistics.median(cpu):.2f} ms, p95 {p95(cpu):.2f} ms")
    print(f"  parse only:  median {statistics.median(parse):.2f} ms, p95 {p95(parse):.2f} ms")
    print(
        f"  billion laughs refused: median {statistics.median(laughs):.3f} ms, worst {laughs[-1]:.3f} ms"
    )
    print(
        f"  5000-deep flow nesting refused: median {statistics.median(deep_times):.3f} ms, "
        f"worst {deep_times[-1]:.3f} ms"
    )
    if args.pyodide:
        with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as handle:
            handle.write(text)
        out = subprocess.run(
            [
                "node",
                str(ROOT / "benchmarks" / "bench_config_import_pyodide.mjs"),
                args.pyodide,
                handle.name,
                "100",
            ],
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        if out.returncode != 0:
            print("  pyodide: failed:", out.stderr.strip()[-300:])
            return
        data = json.loads(out.stdout.strip().splitlines()[-1])
        same = data["result"] == import_config(text)
        print(
            f"  in Pyodide (Node, PyYAML {data['yaml']}, libyaml {data['libyaml']}): median "
            f"{data['median_ms']:.2f} ms, p95 {data['p95_ms']:.2f} ms; same result as CPython: {same}"
        )


if __name__ == "__main__":
    main()
