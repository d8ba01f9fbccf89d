"""The API page (docs/*/api.md): the CLI's flags, a real CLI answer, the response fields and
the links to the published JSON Schemas, all generated from calc at build time.

The flags table is built from the same field specs the CLI builds its options from
(:mod:`calc.cli.fields`), with the CLI's help texts in the page language; the example answer is
the CLI itself, run in this process with ``--table``; the response tables list every top-level
key of a real response, so a key calc adds appears here without an edit (its description falls
back to the calculator's label until it gets one below).
"""

from __future__ import annotations

import contextlib
import html
import io
import shlex

from .site import page_language

REQUEST = {"model": "llama-3.1-8b", "method": "qlora", "seq_len": 4096}
PLAN_REQUEST = {**REQUEST, "dataset_tokens": 50_000_000, "gpu": "rtx-4090"}

# key -> (Spanish, English): what each top-level response key holds
ESTIMATE_KEYS = {
    "peak_allocated_bytes": ("Pico de memoria asignada por PyTorch en una GPU (bytes; "
                             "torch.cuda.max_memory_allocated).",
                             "Peak memory allocated by PyTorch on one GPU (bytes; "
                             "torch.cuda.max_memory_allocated)."),
    "peak_reserved_bytes": ("Pico reservado por el asignador de caché (bytes; "
                            "torch.cuda.max_memory_reserved).",
                            "Peak reserved by the caching allocator (bytes; "
                            "torch.cuda.max_memory_reserved)."),
    "device_total_bytes": ("Total en la GPU, lo que mostraría nvidia-smi: lo reservado más el "
                           "contexto CUDA y los búferes de comunicación (bytes). Es lo que se "
                           "compara con la memoria de la tarjeta.",
                           "Total on the GPU, what nvidia-smi would show: reserved plus the CUDA "
                           "context and communication buffers (bytes). This is what is compared "
                           "with the card's memory."),
    "components": ("Reparto del pico asignado por concepto: nombre → bytes; suman "
                   "peak_allocated_bytes.",
                   "The peak allocated split by component: name → bytes; they add up to "
                   "peak_allocated_bytes."),
    "peak_phase": ("Fase del paso de entrenamiento en la que se alcanza el pico.",
                   "Phase of the training step where the peak is reached."),
    "phases": ("Memoria asignada al final de cada fase: fase → bytes.",
               "Allocated memory at each phase: phase → bytes."),
    "params_total": ("Parámetros del modelo.", "Parameters of the model."),
    "params_active": ("Parámetros activos por token (en un MoE, los de los expertos elegidos; si "
                      "no, todos).",
                      "Parameters active per token (in a MoE, those of the chosen experts; "
                      "otherwise all)."),
    "params_trainable": ("Parámetros entrenables (los de los adaptadores con LoRA y QLoRA).",
                         "Trainable parameters (the adapters' with LoRA and QLoRA)."),
    "host_bytes": ("RAM de la CPU que ocupa la descarga (offload), en bytes.",
                   "CPU RAM the offload takes, in bytes."),
    "unified_memory_bytes": ("Estados del optimizador paginados que pueden pasar a memoria "
                             "unificada (bytes).",
                             "Paged optimizer states that may move to unified memory (bytes)."),
    "model_states_bytes": ("Pesos, gradientes y estados del optimizador por GPU (bytes).",
                           "Weights, gradients and optimizer states per GPU (bytes)."),
    "activations_per_token_bytes": ("Activaciones guardadas por token (bytes).",
                                    "Saved activations per token (bytes)."),
    "quantization_reserved_bytes": ("Suelo de memoria reservada que deja la cuantización "
                                    "de una sola pasada (bytes).",
                                    "Floor of reserved memory left by one-pass quantization "
                                    "(bytes)."),
    "warnings": ("Códigos de aviso (combinaciones válidas pero sospechosas).",
                 "Warning codes (valid but suspicious combinations)."),
    "request": ("La petición validada, con todos los valores por defecto rellenados.",
                "The validated request, every default filled in."),
    "peak_allocated_range_bytes": ("Intervalo [bajo, alto] del pico asignado según el error "
                                   "medido del modelo para este método (bytes; calc.calibration).",
                                   "Range [low, high] of the peak allocated from the model's "
                                   "measured error for this method (bytes; calc.calibration)."),
    "peak_reserved_range_bytes": ("Intervalo [bajo, alto] del pico reservado, del mismo modo "
                                  "(bytes); con lo que el asignador no ve, da el intervalo que "
                                  "juzgan los veredictos.",
                                  "Range [low, high] of the peak reserved, likewise (bytes); with "
                                  "what the allocator does not see, it gives the range the "
                                  "verdicts judge."),
}
PLAN_KEYS = {
    "gpu": ("Tarjeta elegida (id de catálogo).", "Chosen card (catalogue id)."),
    "num_gpus": ("Número de GPU de la petición.", "GPU count of the request."),
    "sharding": ("Reparto de la petición.", "Sharding of the request."),
    "memory": ("La respuesta de estimate para esta petición (tabla anterior).",
               "The estimate response for this request (table above)."),
    "fits_selected_gpu": ("Si cabe en la tarjeta elegida con el margen de seguridad.",
                          "Whether it fits the chosen card with the safety margin."),
    "time_hours": ("Horas de reloj de la ejecución final.", "Wall-clock hours of the final run."),
    "time": ("Desglose del tiempo: tokens por segundo, FLOPs por token, factores, calendario.",
             "Time breakdown: tokens per second, FLOPs per token, factors, schedule."),
    "cost_usd": ("Coste en USD: total (con experimentación), ejecución final, desglose, por "
                 "hora, por mes y el precio usado.",
                 "Cost in USD: total (with experimentation), final run, breakdown, per hour, per "
                 "month and the price used."),
    "storage_gb": ("Almacenamiento supuesto (GB) y su desglose.",
                   "Storage assumed (GB) and its breakdown."),
    "storage_price_per_gb_month": ("Precio del almacenamiento usado (USD por GB-mes).",
                                   "Storage price used (USD per GB-month)."),
    "safety_margin": ("Margen de seguridad usado.", "Safety margin used."),
    "fits": ("Cada tarjeta del catálogo: id → si cabe, con y sin margen, memoria necesaria y "
             "holgura.",
             "Every catalogue card: id → whether it fits, with and without the margin, memory "
             "needed and headroom."),
    "recommendations": ("Cada combinación de tarjeta × número × reparto que cabe, ordenada por "
                        "coste y por tiempo; la más barata, la más rápida, la más pequeña.",
                        "Every card × count × sharding that fits, ranked by cost and by time; "
                        "the cheapest, the fastest, the smallest."),
    "solvers": ("Micro-batch y secuencia más grandes que caben en la tarjeta elegida.",
                "Largest micro-batch and longest sequence that fit the chosen card."),
    "suggestions": ("Si no cabe: cambios ordenados, cada uno con su efecto calculado.",
                    "When it does not fit: ordered changes, each with its computed effect."),
    "warnings": ("Códigos de aviso.", "Warning codes."),
    "notes": ("Códigos de notas (p. ej., que los precios cambian).",
              "Note codes (e.g. that prices move)."),
}
_TYPE = {dict: "object", list: "array", str: "string", bool: "boolean", int: "integer",
         float: "number", type(None): "null"}
_HEAD = {"es": ("Opción", "Qué es", "Clave", "Tipo", "Contenido"),
         "en": ("Flag", "What it is", "Key", "Type", "What it holds")}


def _cell(text: str) -> str:
    return html.escape(text).replace("|", "&#124;").replace("\n", " ")


def run_cli(argv: list[str]) -> str:
    """stdout of ``python -m calc *argv`` run in this process (no terminal: pass --table/--json)."""
    from calc.cli.app import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = main(list(argv))
    if status != 0:
        raise RuntimeError(f"calc {' '.join(argv)} exited {status}: {out.getvalue()[:200]}")
    return out.getvalue()


def cli_example(env, command: str) -> str:
    """A fenced block: the command, then what it prints on a terminal in the page language."""
    lang = page_language(env)
    argv = shlex.split(command)
    text = run_cli([*argv, "--table", "--lang", lang])
    # plain text: the console lexer greys the output lines below the contrast axe asks for
    return f"```text\n$ python -m calc {command}\n{text.rstrip()}\n```"


def cli_flags_table(env, command: str) -> str:
    """Every request flag of ``command`` with its meaning, default and allowed values."""
    from calc.cli.fields import field_specs
    from calc.cli.helptext import field_sentences
    from calc.cli.messages import Messages

    lang = page_language(env)
    msg = Messages(lang)
    head = _HEAD[lang]
    rows = [f"| {head[0]} | {head[1]} |", "|---|---|"]
    for spec in field_specs(command):
        if command == "plan" and spec.table != "plan":
            continue
        flag = f"`{spec.flag}`" + (f" / `--no-{spec.flag[2:]}`" if spec.kind == "bool" else "")
        rows.append(f"| {flag} | {_cell(' '.join(field_sentences(spec, msg)))} |")
    return "\n".join(rows)


def response_fields(env, command: str) -> str:
    """Every top-level key of a real ``command`` response, its JSON type and what it holds."""
    import calc
    from calc.cli.messages import Messages

    lang = page_language(env)
    response = calc.estimate(REQUEST) if command == "estimate" else calc.plan(PLAN_REQUEST)
    texts = ESTIMATE_KEYS if command == "estimate" else PLAN_KEYS
    msg = Messages(lang)
    head = _HEAD[lang]
    rows = [f"| {head[2]} | {head[3]} | {head[4]} |", "|---|---|---|"]
    for key, value in response.items():
        pair = texts.get(key)
        text = pair[0 if lang == "es" else 1] if pair else msg.label(key)
        rows.append(f"| `{key}` | {_TYPE.get(type(value), 'value')} | {_cell(text)} |")
    return "\n".join(rows)


def response_codes(env, section: str) -> str:
    """The codes calc answers with in ``section`` (``components``, ``phases``, ``warnings``) and
    what the site calls each: every code a response can hold, with the page's words for it."""
    from calc.cli.messages import Messages

    lang = page_language(env)
    codes = _codes(section)
    msg = Messages(lang)
    head = {"es": ("Código", "Significado"), "en": ("Code", "Meaning")}[lang]
    rows = [f"| {head[0]} | {head[1]} |", "|---|---|"]
    words = {"components": lambda c: msg.message("component." + c, c),
             "phases": lambda c: msg.option("phase", c),
             "warnings": lambda c: msg.message("warning." + c, c)}[section]
    rows += [f"| `{code}` | {_cell(words(code))} |" for code in codes]
    return "\n".join(rows)


def _codes(section: str) -> list[str]:
    """Components and phases: the keys of a real estimate; warnings: every code the site
    translates (the calculator's tests keep that list equal to what calc can answer)."""
    import calc
    from calc.catalogue import load

    if section in ("components", "phases"):
        return list(calc.estimate(REQUEST)[section])
    return [key.split(".", 1)[1] for key in load("en")["messages"] if key.startswith("warning.")]


def schema_link(env, command: str) -> str:
    """A link to the published schema, relative to the page (the site may live under a sub-path)."""
    from calc.schema import FILE_NAMES

    name = FILE_NAMES[command]
    depth = env.page.url.count("/") if env.page.url else 0
    href = "../" * depth + "schema/" + name
    return f'<a href="{html.escape(href)}"><code>{html.escape(name)}</code></a>'


def api_example(env) -> str:
    """The Python example's output, computed now."""
    import calc

    est = calc.estimate(REQUEST)
    result = calc.plan(PLAN_REQUEST)
    return (f"{est['peak_allocated_bytes']} {est['peak_phase']}\n"
            f"{result['fits_selected_gpu']} {result['recommendations']['cheapest']}")


def register(env) -> None:
    for function in (cli_example, cli_flags_table, response_fields, response_codes, schema_link,
                     api_example):
        def bound(*args, _f=function, **kwargs):
            return _f(env, *args, **kwargs)
        bound.__name__ = function.__name__
        bound.__doc__ = function.__doc__
        env.macro(bound, function.__name__)
