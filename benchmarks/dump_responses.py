"""Dump calc's answers to a wide set of requests, to compare two versions byte for byte.

    python -m benchmarks.dump_responses OUT.jsonl [--quick]

One JSON line per case: every preset x method x training library (estimate), multi-GPU
variants, plans on a few cards, rejected requests (with every field's error), the JSON
Schemas, the CLI's ``--help`` in both languages, the calculator page's HTML and the CLI docs
tables. A refactoring of the request's fields must leave the file unchanged
(``cmp before.jsonl after.jsonl``).
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from collections.abc import Iterator

METHODS = ("full", "lora", "qlora")
PLAN_CARDS = ("l4", "l40s", "a100-80gb-sxm", "h100-sxm", "mi300x")
PLAN_MODELS = ("llama-3.2-1b", "llama-3.1-8b", "qwen3-30b-a3b", "llama-3.1-70b")
BAD_REQUESTS = (
    {},
    {"model": "llama-3.1-8b", "seq_len": 0, "method": "lora2", "lora_dropout": 1.0},
    {"model": "llama-3.1-8b", "framework": "keras", "qlora_keeps_inputs": "yes"},
    {"model": "llama-3.1-8b", "lora_targets": "q_proj,nope", "micro_batch_size": 2.0},
    {"model": "llama-3.1-8b", "unknown": 1, "num_gpus": 70_000},
    {"model": "nope", "precision": "fp8", "optimizer_fused": 1},
)
BAD_PLANS = (
    {"model": "llama-3.1-8b"},
    {
        "model": "llama-3.1-8b",
        "gpu": "h100-sxm",
        "dataset_tokens": -1,
        "epochs": 0,
        "mfu": 2,
        "price_tier": "cheap",
        "starts": 0,
        "storage_gb": "x",
    },
    {"model": "llama-3.1-8b", "gpu": "nope", "dataset_tokens": 1e8, "safety_margin": 1.5},
)


def _cases() -> Iterator[tuple[str, str, dict]]:
    from calc.frameworks import Framework
    from calc.presets import presets_listing

    frameworks = [f.value for f in Framework]
    for preset in presets_listing():
        for method in METHODS:
            for framework in frameworks:
                yield (
                    "estimate",
                    "estimate",
                    {"model": preset["id"], "method": method, "framework": framework},
                )
    for model in PLAN_MODELS:
        for method in METHODS:
            for framework in frameworks:
                base = {"model": model, "method": method, "framework": framework}
                yield (
                    "estimate",
                    "estimate",
                    {**base, "num_gpus": 4, "sharding": "zero3", "gradient_accumulation_steps": 4},
                )
                yield (
                    "estimate",
                    "estimate",
                    {
                        **base,
                        "num_gpus": 2,
                        "sharding": "zero2",
                        "optimizer": "adamw-8bit",
                        "seq_len": 4096,
                        "micro_batch_size": 2,
                        "torch_compile": True,
                    },
                )
                yield (
                    "estimate",
                    "estimate",
                    {
                        **base,
                        "qlora_keeps_inputs": True,
                        "lora_modules_to_save": "embed_tokens+lm_head",
                        "lora_targets": ["q_proj", "v_proj"],
                    },
                )
    for model in PLAN_MODELS:
        for card in PLAN_CARDS:
            for method in ("lora", "qlora"):
                yield (
                    "plan",
                    "plan",
                    {
                        "model": model,
                        "method": method,
                        "gpu": card,
                        "dataset_tokens": 1e8,
                        "framework": "hf-trainer",
                    },
                )
        yield (
            "plan",
            "plan",
            {
                "model": model,
                "gpu": "h100-sxm",
                "dataset_tokens": 5e8,
                "epochs": 2,
                "interruptible": True,
                "price_tier": "managed",
                "mfu": 0.4,
                "safety_margin": 0.1,
                "num_gpus": 2,
                "sharding": "zero3",
                "framework": "torchtune",
            },
        )
    for bad in BAD_REQUESTS:
        yield "estimate", "estimate", bad
    for bad in BAD_PLANS:
        yield "plan", "plan", bad


def _cli(argv: list[str]) -> str:
    import calc.cli.app as app

    out, err = io.StringIO(), io.StringIO()
    saved = app._is_terminal
    app._is_terminal = lambda: False
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = app.main(list(argv))
            except SystemExit as stop:
                rc = stop.code
    finally:
        app._is_terminal = saved
    return f"{rc}\n{out.getvalue()}\n{err.getvalue()}"


def _pages() -> Iterator[tuple[str, str]]:
    from calc.gpus import gpus_listing
    from calc.presets import presets_listing
    from calc.schema import schema_files
    from macros import calculator, cli_docs

    for name, text in schema_files().items():
        yield "schema " + name, text
    for lang in ("es", "en"):
        for command in ("estimate", "plan", "sweep"):
            yield f"help {command} {lang}", _cli([command, "--help", "--lang", lang])
    urls = {k: k for k in calculator.URL_KEYS}
    for lang in ("es", "en"):
        yield (
            "calculator " + lang,
            calculator.calculator_html(lang, urls, presets_listing(), gpus_listing()["gpus"]),
        )

        class Env:
            conf = {"theme": {"language": lang}}

        for command in ("estimate", "plan"):
            yield f"cli_flags_table {command} {lang}", cli_docs.cli_flags_table(Env, command)
    from calc.field_errors import field_errors

    for bad in BAD_REQUESTS:
        yield (
            "field_errors estimate " + json.dumps(bad),
            json.dumps([e.to_dict() for e in field_errors("estimate", bad)]),
        )
    for bad in BAD_PLANS:
        yield (
            "field_errors plan " + json.dumps(bad),
            json.dumps([e.to_dict() for e in field_errors("plan", bad)]),
        )


def main(argv: list[str]) -> int:
    import calc

    quick = "--quick" in argv
    path = [a for a in argv if not a.startswith("--")][0]
    with open(path, "w", encoding="utf-8") as out:
        for i, (label, command, request) in enumerate(_cases()):
            if quick and i % 7:
                continue
            answer = calc.run(command, request)
            out.write(
                json.dumps(
                    {"case": label, "request": request, "answer": answer}, ensure_ascii=False
                )
                + "\n"
            )
        for label, text in _pages():
            out.write(json.dumps({"case": label, "text": text}, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
