"""Everything the generated tables say in words, keyed by language.

``calc`` speaks in codes (methods, optimizers, components, warnings); this
table is where they become Spanish or English. A missing key is an error, so
a new code in calc stops the build until it is translated here.
"""

from __future__ import annotations

from .numfmt import format_number

_TEXT: dict[str, dict[str, str]] = {
    # column headers
    "col.model": {"es": "Modelo", "en": "Model"},
    "col.method": {"es": "Método", "en": "Method"},
    "col.params_total": {"es": "Parámetros (miles de millones)", "en": "Parameters (billions)"},
    "col.params_trainable": {"es": "Entrenables (millones)", "en": "Trainable (millions)"},
    "col.peak_allocated": {"es": "Pico asignado (GiB)", "en": "Peak allocated (GiB)"},
    "col.device_total": {"es": "Total en la GPU (GiB)", "en": "Total on the GPU (GiB)"},
    "col.seq_len": {"es": "Longitud de secuencia (tokens)", "en": "Sequence length (tokens)"},
    "col.sharding": {"es": "Estrategia", "en": "Strategy"},
    "col.num_gpus": {"es": "GPU", "en": "GPUs"},
    "col.precision": {"es": "Precisión", "en": "Precision"},
    "col.optimizer": {"es": "Optimizador", "en": "Optimizer"},
    "col.bpp_total": {"es": "Total (bytes/parámetro)", "en": "Total (bytes/parameter)"},
    "col.batch": {"es": "Micro-batch {n}", "en": "Micro-batch {n}"},
    "col.variant": {"es": "Variante", "en": "Variant"},
    "col.bpp_weights": {"es": "Pesos (bytes/parámetro)", "en": "Weights (bytes/parameter)"},
    # components (per-component columns)
    "component.weights": {"es": "Pesos (GiB)", "en": "Weights (GiB)"},
    "component.gradients": {"es": "Gradientes (GiB)", "en": "Gradients (GiB)"},
    "component.optimizer": {"es": "Optimizador (GiB)", "en": "Optimizer (GiB)"},
    "component.activations": {"es": "Activaciones (GiB)", "en": "Activations (GiB)"},
    "component.logits": {"es": "Logits y pérdida (GiB)", "en": "Logits and loss (GiB)"},
    "component.buffers": {"es": "Búferes (GiB)", "en": "Buffers (GiB)"},
    "component.lora_weights": {"es": "Adaptadores LoRA (GiB)", "en": "LoRA adapters (GiB)"},
    "component.optimizer_temporaries": {"es": "Temporales del optimizador (GiB)",
                                        "en": "Optimizer temporaries (GiB)"},
    "component.weight_copies": {"es": "Copias de pesos (GiB)", "en": "Weight copies (GiB)"},
    "component.gathered_weights": {"es": "Pesos reunidos de otras GPU (GiB)",
                                   "en": "Weights gathered from other GPUs (GiB)"},
    "component.dequant_buffer": {"es": "Búfer de descuantización (GiB)",
                                 "en": "Dequantisation buffer (GiB)"},
    "component.comm_buffers": {"es": "Búferes de comunicación (GiB)",
                               "en": "Communication buffers (GiB)"},
    # captions
    "caption.vram_by_model": {"es": "Memoria pico por GPU según modelo y método",
                              "en": "Peak memory per GPU by model and method"},
    "caption.memory_vs_seq_batch": {
        "es": "Pico asignado (GiB) según longitud de secuencia y micro-batch",
        "en": "Peak allocated (GiB) by sequence length and micro-batch"},
    "caption.per_gpu_memory": {"es": "Memoria por GPU según estrategia y número de GPU",
                               "en": "Memory per GPU by strategy and number of GPUs"},
    "caption.bytes_per_param": {"es": "Bytes por parámetro del ajuste completo",
                                "en": "Bytes per parameter of full fine-tuning"},
    "caption.weight_bytes": {"es": "Memoria de los pesos: 16 bits frente a 4 bits",
                             "en": "Weight memory: 16-bit versus 4-bit"},
    "caption.full_ft_sharded": {
        "es": "Ajuste completo: total por GPU (GiB) repartiendo los estados entre N GPU",
        "en": "Full fine-tuning: total per GPU (GiB) with states sharded over N GPUs"},
    "col.per_gpu_of": {"es": "{n} GPU", "en": "{n} GPU(s)"},
    "note.gib": {"es": "Toda la memoria de esta página está en GiB (1 GiB = 2<sup>30</sup> bytes "
                       "= 1,074 GB).",
                 "en": "All memory on this page is in GiB (1 GiB = 2<sup>30</sup> bytes "
                       "= 1.074 GB)."},
    "col.gpu": {"es": "GPU", "en": "GPU"},
    "col.stack": {"es": "Pila de software", "en": "Software stack"},
    "col.gpu_memory": {"es": "Memoria según el driver (GiB)", "en": "Memory per the driver (GiB)"},
    "col.memory_marketed": {"es": "Memoria anunciada (GB)", "en": "Marketed memory (GB)"},
    "col.bf16_tflops": {"es": "TFLOPS bf16 densos", "en": "Dense bf16 TFLOPS"},
    "col.bandwidth": {"es": "Ancho de banda de memoria (GB/s)", "en": "Memory bandwidth (GB/s)"},
    "col.nvlink": {"es": "Enlace entre GPU: NVLink o Infinity Fabric (GB/s; 0: solo PCIe)",
                   "en": "GPU-to-GPU link: NVLink or Infinity Fabric (GB/s; 0: PCIe only)"},
    "col.as_of": {"es": "Fecha", "en": "As of"},
    "col.source": {"es": "Fuente", "en": "Source"},
    "col.tier": {"es": "Tipo de proveedor", "en": "Kind of provider"},
    "col.capacity": {"es": "Capacidad", "en": "Capacity"},
    "col.usd_per_hour": {"es": "USD por GPU-hora", "en": "USD per GPU-hour"},
    "caption.gpu_catalogue": {"es": "Catálogo de GPU", "en": "GPU catalogue"},
    "caption.gpu_sources": {"es": "Fuentes del catálogo de GPU", "en": "Sources of the GPU catalogue"},
    "caption.gpu_prices": {"es": "Precios indicativos por GPU-hora",
                           "en": "Indicative prices per GPU-hour"},
    "col.row": {"es": "Fila", "en": "Row"},
    "col.metric": {"es": "Qué se midió", "en": "What was measured"},
    "col.measured": {"es": "Medido (GiB)", "en": "Measured (GiB)"},
    "col.predicted": {"es": "Calculado (GiB)", "en": "Computed (GiB)"},
    "col.error_pct": {"es": "Error (%)", "en": "Error (%)"},
    "col.flags": {"es": "Marcas", "en": "Flags"},
    "col.rows": {"es": "Filas", "en": "Rows"},
    "col.median_error": {"es": "Mediana del error absoluto (%)", "en": "Median absolute error (%)"},
    "col.p90_error": {"es": "Percentil 90 del error absoluto (%)",
                      "en": "90th percentile absolute error (%)"},
    "col.max_error": {"es": "Error absoluto máximo (%)", "en": "Largest absolute error (%)"},
    "col.reason": {"es": "Motivo", "en": "Reason"},
    "row.all_methods": {"es": "Todos", "en": "All"},
    "caption.validation_rows": {"es": "Memoria medida frente a calculada, fila a fila",
                                "en": "Measured versus computed memory, row by row"},
    "caption.validation_summary": {"es": "Error del modelo de memoria por método",
                                   "en": "Error of the memory model by method"},
    "caption.validation_uncovered": {"es": "Filas medidas que el modelo no cubre",
                                     "en": "Measured rows the model does not cover"},
    # request fields (setup lists)
    "field.method": {"es": "Método", "en": "Method"},
    "field.precision": {"es": "Precisión", "en": "Precision"},
    "field.optimizer": {"es": "Optimizador", "en": "Optimizer"},
    "field.micro_batch_size": {"es": "Micro-batch por GPU", "en": "Micro-batch per GPU"},
    "field.seq_len": {"es": "Longitud de secuencia (tokens)", "en": "Sequence length (tokens)"},
    "field.gradient_checkpointing": {"es": "Gradient checkpointing",
                                     "en": "Gradient checkpointing"},
    "field.attention": {"es": "Atención", "en": "Attention"},
    "field.lora_rank": {"es": "Rango LoRA", "en": "LoRA rank"},
    "field.lora_targets": {"es": "Capas con adaptador LoRA", "en": "LoRA target layers"},
    "field.qlora_double_quant": {"es": "Doble cuantización (QLoRA)",
                                 "en": "Double quantization (QLoRA)"},
    "field.chunked_loss": {"es": "Pérdida por trozos", "en": "Chunked loss"},
    "field.num_gpus": {"es": "GPU", "en": "GPUs"},
    "field.sharding": {"es": "Reparto entre GPU", "en": "Sharding"},
    "field.cpu_offload": {"es": "Descarga a CPU", "en": "CPU offload"},
    "field.activation_offload": {"es": "Descarga de activaciones", "en": "Activation offload"},
    "field.optimizer_in_backward": {"es": "Paso del optimizador dentro del backward",
                                    "en": "Optimizer step fused into backward"},
}

_CODES: dict[str, dict[str, str]] = {
    "full": {"es": "Completo", "en": "Full"},
    "lora": {"es": "LoRA", "en": "LoRA"},
    "qlora": {"es": "QLoRA", "en": "QLoRA"},
    "bf16-true": {"es": "bf16 puro", "en": "pure bf16"},
    "bf16-mixed": {"es": "bf16 mixta", "en": "bf16 mixed"},
    "fp16-mixed": {"es": "fp16 mixta", "en": "fp16 mixed"},
    "fp32": {"es": "fp32", "en": "fp32"},
    "adamw": {"es": "AdamW", "en": "AdamW"},
    "adamw-8bit": {"es": "AdamW de 8 bits", "en": "8-bit AdamW"},
    "paged-adamw": {"es": "AdamW paginado", "en": "paged AdamW"},
    "paged-adamw-8bit": {"es": "AdamW paginado de 8 bits", "en": "paged 8-bit AdamW"},
    "adafactor": {"es": "Adafactor", "en": "Adafactor"},
    "sgd": {"es": "SGD", "en": "SGD"},
    "sgd-momentum": {"es": "SGD con momento", "en": "SGD with momentum"},
    "none": {"es": "una GPU", "en": "one GPU"},
    "ddp": {"es": "DDP", "en": "DDP"},
    "zero1": {"es": "ZeRO-1", "en": "ZeRO-1"},
    "zero2": {"es": "ZeRO-2 / FSDP SHARD_GRAD_OP", "en": "ZeRO-2 / FSDP SHARD_GRAD_OP"},
    "zero3": {"es": "ZeRO-3 / FSDP FULL_SHARD", "en": "ZeRO-3 / FSDP FULL_SHARD"},
    "sdpa": {"es": "SDPA (sin matriz de puntuaciones)", "en": "SDPA (no score matrix)"},
    "flash": {"es": "FlashAttention", "en": "FlashAttention"},
    "eager": {"es": "ingenua (eager)", "en": "eager"},
    "all-linear": {"es": "todas las lineales", "en": "all linear layers"},
    "optimizer": {"es": "estados del optimizador", "en": "optimizer states"},
    "optimizer+params": {"es": "optimizador y pesos", "en": "optimizer and weights"},
}

_CODES.update({
    "cuda": {"es": "CUDA", "en": "CUDA"},
    "rocm": {"es": "ROCm", "en": "ROCm"},
    "tier.marketplace": {"es": "mercado de capacidad ociosa", "en": "idle-capacity marketplace"},
    "tier.managed": {"es": "nube gestionada", "en": "managed cloud"},
    "capacity.on_demand": {"es": "bajo demanda", "en": "on demand"},
    "capacity.interruptible": {"es": "interrumpible", "en": "interruptible"},
})

_CODES.update({
    "metric.allocated": {"es": "pico asignado", "en": "peak allocated"},
    "metric.reserved": {"es": "pico reservado", "en": "peak reserved"},
    "metric.model_states": {"es": "estados del modelo", "en": "model states"},
})

_BOOL = {True: {"es": "sí", "en": "yes"}, False: {"es": "no", "en": "no"}}


def text(key: str, lang: str) -> str:
    """The label ``key`` in ``lang``; ``"key|n"`` fills a number into the label."""
    key, _, arg = key.partition("|")
    try:
        label = _TEXT[key][lang]
        return label.format(n=format_number(int(arg), 0, lang)) if arg else label
    except KeyError:
        raise KeyError(f"no {lang!r} label for {key!r}") from None


def code(value: str, lang: str) -> str:
    try:
        return _CODES[value][lang]
    except KeyError:
        raise KeyError(f"no {lang!r} translation for code {value!r}") from None


def value(field: str, val: object, lang: str) -> str:
    """A request value as the setup lists show it."""
    if isinstance(val, bool):
        return _BOOL[val][lang]
    if isinstance(val, int):
        return format_number(val, 0, lang)
    if isinstance(val, list):
        return ", ".join(f"`{v}`" for v in val)
    return code(str(val), lang)


def variant(request: dict, lang: str) -> str:
    """Short name of a weight-storage variant (method + double quantization)."""
    name = code(request.get("method", "lora"), lang)
    if request.get("method") == "qlora":
        dq = request.get("qlora_double_quant", True)
        name += " (" + text("field.qlora_double_quant", lang) + ": " + _BOOL[dq][lang] + ")"
    return name


def languages_complete() -> list[str]:
    """Keys missing a language (the tests require none)."""
    return [k for table in (_TEXT, _CODES) for k, v in table.items() if set(v) != {"es", "en"}]
