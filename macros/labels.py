"""Everything the generated tables say in words, keyed by language.

``calc`` speaks in codes (methods, optimizers, components, warnings); this
table is where they become Spanish or English. A missing key is an error, so
a new code in calc stops the build until it is translated here.
"""

from __future__ import annotations

from calc_view.numfmt import format_number

_TEXT: dict[str, dict[str, str]] = {
    # column headers
    "col.model": {"es": "Modelo", "en": "Model"},
    "col.method": {"es": "Método", "en": "Method"},
    "col.params_total": {"es": "Parámetros (miles de millones)", "en": "Parameters (billions)"},
    "col.params_trainable": {"es": "Entrenables (millones)", "en": "Trainable (millions)"},
    "col.peak_allocated": {"es": "Pico asignado (GiB)", "en": "Peak allocated (GiB)"},
    "col.device_total": {"es": "Total en la GPU (GiB)", "en": "Total on the GPU (GiB)"},
    "col.peak_phase": {"es": "Fase del pico", "en": "Peak phase"},
    "col.seq_len": {"es": "Longitud de secuencia (tokens)", "en": "Sequence length (tokens)"},
    "col.sharding": {"es": "Estrategia", "en": "Strategy"},
    "col.num_gpus": {"es": "GPU", "en": "GPUs"},
    "col.precision": {"es": "Precisión", "en": "Precision"},
    "col.optimizer": {"es": "Optimizador", "en": "Optimizer"},
    "col.bpp_total": {"es": "Total (bytes/parámetro)", "en": "Total (bytes/parameter)"},
    "col.batch": {"es": "Micro-batch {n}", "en": "Micro-batch {n}"},
    "col.variant": {"es": "Variante", "en": "Variant"},
    "col.bpp_weights": {"es": "Pesos (bytes/parámetro)", "en": "Weights (bytes/parameter)"},
    "col.bpp_gradients": {"es": "Gradientes (bytes/parámetro)", "en": "Gradients (bytes/parameter)"},
    "col.bpp_optimizer": {"es": "Optimizador (bytes/parámetro)", "en": "Optimizer (bytes/parameter)"},
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
    "col.per_gpu_of": {"es": "{n} GPU", "en": "{n} GPUs"},
    "col.per_gpu_of_one": {"es": "{n} GPU", "en": "{n} GPU"},
    "note.gib": {"es": "Toda la memoria de esta página está en GiB (1 GiB = 2<sup>30</sup> bytes "
                       "= 1,074 GB).",
                 "en": "All memory on this page is in GiB (1 GiB = 2<sup>30</sup> bytes "
                       "= 1.074 GB)."},
    "col.gpu": {"es": "GPU", "en": "GPU"},
    "col.stack": {"es": "Pila de software", "en": "Software stack"},
    "col.gpu_memory": {"es": "Memoria según el driver (GiB)", "en": "Memory reported by the driver (GiB)"},
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
    # calc against the fake-tensor oracle (macros/oracle_sweep.py)
    "col.setups": {"es": "Configuraciones", "en": "Setups"},
    "col.within_2pct": {"es": "Pico a ±2 %", "en": "Peak within 2 %"},
    "col.within_2pct_share": {"es": "Proporción a ±2 % (%)", "en": "Share within 2 % (%)"},
    "col.within_5pct": {"es": "Pico a ±5 %", "en": "Peak within 5 %"},
    "col.worst_error": {"es": "Peor error (%)", "en": "Worst error (%)"},
    "col.phases_within_5pct": {"es": "Fases a ±5 %", "en": "Phases within 5 %"},
    "col.setup": {"es": "Configuración", "en": "Setup"},
    "caption.oracle_sweep_summary": {
        "es": "calc frente al oráculo de tensores falsos: pico de memoria asignada",
        "en": "calc against the fake-tensor oracle: allocated peak"},
    "caption.oracle_sweep_misses": {"es": "Configuraciones del barrido fuera de ±2 %",
                                    "en": "Sweep setups beyond 2 %"},
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
    "field.gpu": {"es": "GPU", "en": "GPU"},
    "field.price_per_gpu_hour": {"es": "Precio por GPU-hora (USD)", "en": "Price per GPU-hour (USD)"},
    "field.storage_gb": {"es": "Almacenamiento (GB)", "en": "Storage (GB)"},
    "field.storage_price_per_gb_month": {"es": "Precio del almacenamiento (USD por GB-mes)",
                                         "en": "Storage price (USD per GB-month)"},
    "field.mfu": {"es": "Aprovechamiento (MFU)", "en": "Utilisation (MFU)"},
    "field.qlora_speed_factor": {"es": "Factor de velocidad de QLoRA",
                                 "en": "QLoRA speed factor"},
    "field.scaling_efficiency": {"es": "Eficiencia de escalado", "en": "Scaling efficiency"},
    "field.lora_dropout": {"es": "Dropout de LoRA", "en": "LoRA dropout"},
    "field.gradient_accumulation_steps": {"es": "Pasos de acumulación de gradientes",
                                          "en": "Gradient accumulation steps"},
    "field.qlora_keeps_inputs": {"es": "Las capas de 4 bits guardan su entrada (bitsandbytes antiguo)",
                                 "en": "4-bit layers keep their input (older bitsandbytes)"},
    "field.frozen_weight_grads": {"es": "Gradientes también para los pesos congelados (FSDP1)",
                                  "en": "Gradients for the frozen weights too (FSDP1)"},
    "field.qlora_unchunked_quantization": {
        "es": "Cuantización NF4 de una sola pasada (torchao anterior a 0.2)",
        "en": "Single-pass NF4 quantization (torchao before 0.2)"},
    "field.attention_keeps_fused_qkv": {
        "es": "La atención mantiene viva la salida qkv fusionada (LitGPT)",
        "en": "Attention keeps the fused qkv output alive (LitGPT)"},
    "field.sync_each_micro_batch": {"es": "Sincronizar gradientes en cada micro-batch",
                                    "en": "Synchronise gradients every micro-batch"},
    "field.optimizer_in_backward": {"es": "Actualización del optimizador dentro del paso hacia atrás",
                                    "en": "Optimizer step fused into backward"},
    "field.optimizer_fused": {"es": "AdamW fusionado (fused=True)", "en": "Fused AdamW (fused=True)"},
    "field.torch_compile": {"es": "torch.compile en los bloques", "en": "torch.compile on the blocks"},
    "field.fp8_compute": {"es": "Cómputo FP8 en las capas lineales", "en": "FP8 compute in the linear layers"},
    "field.lora_adapter_dtype": {"es": "Tipo de dato de los adaptadores LoRA",
                                 "en": "LoRA adapter dtype"},
    "field.attention_grouped_kv": {"es": "SDPA guarda k/v agrupados (enable_gqa)",
                                   "en": "SDPA saves grouped k/v (enable_gqa)"},
    "field.loss_outputs_kept": {"es": "El bucle retiene los logits durante el paso hacia atrás",
                                "en": "The loop holds the logits through backward"},
    "field.framework": {"es": "Biblioteca de entrenamiento", "en": "Training library"},
    "field.qlora_quant_state_replicated": {
        "es": "Estadísticas de cuantización enteras en cada GPU (bitsandbytes con FSDP/ZeRO-3)",
        "en": "Quantization statistics whole on every GPU (bitsandbytes with FSDP/ZeRO-3)"},
}

_CODES: dict[str, dict[str, str]] = {
    "full": {"es": "Completo", "en": "Full"},
    "full+fp8": {"es": "Completo, FP8", "en": "Full, FP8"},
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
    "base": {"es": "el de los pesos base", "en": "the base weights'"},
    "all-linear": {"es": "todas las lineales", "en": "all linear layers"},
    "optimizer": {"es": "estados del optimizador", "en": "optimizer states"},
    "optimizer+params": {"es": "optimizador y pesos", "en": "optimizer and weights"},
}

_CODES.update({
    "generic": {"es": "genérica", "en": "generic"},
    "hf-trainer": {"es": "Hugging Face Trainer", "en": "Hugging Face Trainer"},
    "hf-custom-loop": {"es": "transformers en bucle propio", "en": "transformers in a custom loop"},
    "torchtune": {"es": "torchtune", "en": "torchtune"},
    "litgpt": {"es": "LitGPT", "en": "LitGPT"},
    "unsloth": {"es": "Unsloth", "en": "Unsloth"},
})

_CODES.update({
    "cuda": {"es": "CUDA", "en": "CUDA"},
    "rocm": {"es": "ROCm", "en": "ROCm"},
    "capacity.on_demand": {"es": "bajo demanda", "en": "on demand"},
    "capacity.interruptible": {"es": "interrumpible", "en": "interruptible"},
})

_CODES.update({
    "metric.allocated": {"es": "pico asignado", "en": "peak allocated"},
    "metric.reserved": {"es": "pico reservado", "en": "peak reserved"},
    "metric.model_states": {"es": "estados del modelo", "en": "model states"},
    "metric.device": {"es": "memoria del dispositivo (nvidia-smi)", "en": "device memory (nvidia-smi)"},
})


_TEXT.update({
    # plan tables (macros/plan_tables.py)
    "col.required_with_margin": {"es": "Necesaria: extremo alto del rango (GiB)",
                                 "en": "Needed: upper end of the range (GiB)"},
    "col.smallest_single_card": {"es": "Tarjeta más pequeña en la que cabe",
                                 "en": "Smallest card that fits"},
    "col.smallest_config": {"es": "Configuración más pequeña", "en": "Smallest configuration"},
    "col.largest_fitting.full": {"es": "Mayor modelo: ajuste completo",
                                 "en": "Largest model: full fine-tuning"},
    "col.largest_fitting.lora": {"es": "Mayor modelo: LoRA", "en": "Largest model: LoRA"},
    "col.largest_fitting.qlora": {"es": "Mayor modelo: QLoRA", "en": "Largest model: QLoRA"},
    "text.nothing_fits": {"es": "ninguno", "en": "none"},
    "text.no_single_card": {"es": "ninguna (hacen falta varias)", "en": "none (needs several)"},
    "text.no_config": {"es": "ninguna, ni con {n} tarjetas", "en": "none, not even with {n} cards"},
    "caption.cards_that_fit": {"es": "Qué tarjetas sirven, con el margen de seguridad",
                               "en": "Which cards fit, with the safety margin"},
    "caption.gpu_typical": {"es": "Escenario típico por tarjeta: el mayor modelo que cabe en una",
                            "en": "Typical scenario per card: the largest model that fits on one"},
    "col.scenario": {"es": "Escenario", "en": "Scenario"},
    "col.card": {"es": "Tarjetas", "en": "Cards"},
    "col.tokens_per_second": {"es": "Tokens por segundo (todas las GPU)",
                             "en": "Tokens per second (all GPUs)"},
    "col.time_hours": {"es": "Duración (h)", "en": "Duration (h)"},
    "col.gpu_hours": {"es": "GPU-horas", "en": "GPU-hours"},
    "col.usd_per_month": {"es": "USD al mes (alquiler continuo)", "en": "USD per month (rented continuously)"},
    "col.cost_compute": {"es": "Cómputo (USD)", "en": "Compute (USD)"},
    "col.cost_startup": {"es": "Arranques (USD)", "en": "Start-ups (USD)"},
    "col.cost_interruptions": {"es": "Checkpoints y trabajo perdido (USD)",
                               "en": "Checkpoints and lost work (USD)"},
    "col.cost_experimentation": {"es": "Experimen\u00adtación (USD)", "en": "Experimen\u00adtation (USD)"},
    "col.cost_storage": {"es": "Almacena\u00admiento (USD)", "en": "Storage (USD)"},
    "col.cost_total": {"es": "Total (USD)", "en": "Total (USD)"},
    "caption.example_times": {"es": "Ejemplos: velocidad, duración y tarifa",
                              "en": "Examples: speed, duration and rate"},
    "caption.example_costs": {"es": "Ejemplos: coste por ejecución, por partidas",
                              "en": "Examples: cost per run, line by line"},
    # plan request fields (setup lists)
    "col.fits_with_margin": {"es": "¿Cabe con margen?", "en": "Fits with margin?"},
    "caption.multi_gpu_plan": {"es": "El mismo trabajo en una o varias {n}: memoria, velocidad y coste",
                               "en": "The same job on one or several {n}: memory, speed and cost"},
    "field.dataset_tokens": {"es": "Tokens del conjunto de datos (por época)",
                             "en": "Dataset tokens (per epoch)"},
    "field.epochs": {"es": "Épocas", "en": "Epochs"},
    "field.price_tier": {"es": "Tipo de proveedor", "en": "Kind of provider"},
    "field.interruptible": {"es": "Capacidad interrumpible", "en": "Interruptible capacity"},
    "field.experiment_multiplier": {"es": "Multiplicador de experimentación",
                                    "en": "Experimentation multiplier"},
    "field.safety_margin": {"es": "Margen de seguridad", "en": "Safety margin"},
    "field.starts": {"es": "Arranques", "en": "Starts"},
    "field.months_kept": {"es": "Meses de almacenamiento", "en": "Months of storage"},
    "field.startup_minutes": {"es": "Arranque y descarga del modelo, por arranque",
                              "en": "Start-up and model download, per start"},
    "field.checkpoint_interval_minutes": {"es": "Intervalo entre checkpoints (interrumpible)",
                                          "en": "Interval between checkpoints (interruptible)"},
    "field.checkpoint_minutes": {"es": "Duración de un checkpoint (interrumpible)",
                                 "en": "Time one checkpoint takes (interruptible)"},
    "field.interruptions_per_day": {"es": "Interrupciones al día (interrumpible)",
                                    "en": "Interruptions per day (interruptible)"},
    "unit.minutes": {"es": "min", "en": "min"},
    "unit.pct": {"es": "%", "en": "%"},
})

_CODES.update({
    "fits.yes": {"es": "sí", "en": "yes"},
    "fits.no": {"es": "no", "en": "no"},
    # price tiers (calc/gpus.py TIERS): the catalogue's column and the setup lists
    "marketplace": {"es": "mercado de capacidad ociosa", "en": "idle-capacity marketplace"},
    "managed": {"es": "nube gestionada", "en": "managed cloud"},
})

_TEXT.update({
    # methodology (macros/methodology.py)
    "col.constant": {"es": "Constante", "en": "Constant"},
    "col.value": {"es": "Valor", "en": "Value"},
    "col.meaning": {"es": "Qué es", "en": "What it is"},
    "col.request_key": {"es": "Clave de la petición", "en": "Request key"},
    "col.default": {"es": "Por defecto", "en": "Default"},
    "col.column": {"es": "Columna", "en": "Column"},
    "caption.constants_model": {"es": "Constantes de calc, con su valor actual y su fuente",
                                "en": "Constants of calc, with their current value and source"},
    "caption.constants_limits": {"es": "Límites de validación de la petición",
                                 "en": "Validation limits of the request"},
    "caption.plan_defaults": {"es": "Valores por defecto del plan (tiempo y coste)",
                              "en": "Defaults of the plan (time and cost)"},
    "caption.data_columns.gpus.csv": {"es": "Columnas de gpus.csv", "en": "Columns of gpus.csv"},
    "caption.data_columns.prices.csv": {"es": "Columnas de prices.csv",
                                        "en": "Columns of prices.csv"},
    "caption.data_columns.models.json": {"es": "Campos de models.json",
                                         "en": "Fields of models.json"},
    "col.workload": {"es": "Carga", "en": "Workload"},
    "col.measured_tps": {"es": "Medido (tokens/s por GPU)", "en": "Measured (tokens/s per GPU)"},
    "col.predicted_tps": {"es": "Calculado (tokens/s por GPU)",
                          "en": "Computed (tokens/s per GPU)"},
    "col.note": {"es": "Nota", "en": "Note"},
    "col.group": {"es": "Grupo", "en": "Group"},
    "col.framework": {"es": "Biblioteca", "en": "Library"},
    "caption.framework_profiles": {"es": "Perfiles de biblioteca de entrenamiento: qué claves fija cada uno y de dónde sale",
                                   "en": "Training-library profiles: the keys each one sets and where each comes from"},
    "col.mean_signed_error": {"es": "Error medio con signo (%)", "en": "Mean signed error (%)"},
    "col.rows_pair": {"es": "Filas (LoRA / QLoRA)", "en": "Rows (LoRA / QLoRA)"},
    "col.measured_ratio": {"es": "Cociente medido", "en": "Measured ratio"},
    "col.calc_factor": {"es": "Factor de calc", "en": "calc's factor"},
    "caption.validation_time_rows": {"es": "Velocidad medida frente a calculada, fila a fila",
                                     "en": "Measured versus computed speed, row by row"},
    "caption.validation_time_summary": {"es": "Error del modelo de tiempo por grupo",
                                        "en": "Error of the time model by group"},
    "caption.validation_time_uncovered": {"es": "Filas de velocidad que el modelo no cubre",
                                          "en": "Speed rows the model does not cover"},
    "caption.validation_qlora_ratio": {"es": "Velocidad de QLoRA respecto a LoRA: medida y de calc",
                                       "en": "QLoRA speed relative to LoRA: measured and calc's"},
    # time model validated leave-one-source-out (issue 14)
    "col.loso_error_pct": {"es": "Error dejando fuera la fuente (%)",
                           "en": "Error with the source left out (%)"},
    "col.loso_median_error": {"es": "Mediana, fuente fuera (%)", "en": "Median, source left out (%)"},
    "col.loso_p90_error": {"es": "Percentil 90, fuente fuera (%)", "en": "90th percentile, source left out (%)"},
    "col.loso_max_error": {"es": "Máximo, fuente fuera (%)", "en": "Largest, source left out (%)"},
    "col.source_count": {"es": "Fuentes", "en": "Sources"},
    "col.calc_ratio": {"es": "Cociente de calc", "en": "calc's ratio"},
    "caption.validation_time_fit": {"es": "Constantes ajustadas del modelo de tiempo y sus fuentes",
                                    "en": "Fitted constants of the time model and their sources"},
})

_CODES.update({
    "workload.fine-tune": {"es": "fine-tuning", "en": "fine-tuning"},
    "workload.pre-train": {"es": "preentrenamiento", "en": "pre-training"},
    "group.fine-tune/full": {"es": "fine-tuning, completo", "en": "fine-tuning, full"},
    "group.fine-tune/lora": {"es": "fine-tuning, LoRA", "en": "fine-tuning, LoRA"},
    "group.fine-tune/qlora": {"es": "fine-tuning, QLoRA", "en": "fine-tuning, QLoRA"},
    "group.fine-tune": {"es": "fine-tuning, todos", "en": "fine-tuning, all"},
    "group.pre-train": {"es": "preentrenamiento", "en": "pre-training"},
    "group.all": {"es": "todas las filas", "en": "all rows"},
    "group.fine-tune/full+fp8": {"es": "fine-tuning, completo en FP8", "en": "fine-tuning, full in FP8"},
    "group.pre-train/full": {"es": "preentrenamiento, BF16", "en": "pre-training, BF16"},
    "group.pre-train/full+fp8": {"es": "preentrenamiento, FP8", "en": "pre-training, FP8"},
    "group.class:a100": {"es": "familia A100", "en": "A100 family"},
    "group.class:hopper": {"es": "familia Hopper (H100, H200)", "en": "Hopper family (H100, H200)"},
    "group.class:gddr": {"es": "tarjetas GDDR (RTX, L4, L40S…)", "en": "GDDR cards (RTX, L4, L40S…)"},
    "group.class:blackwell": {"es": "familia Blackwell", "en": "Blackwell family"},
    "group.class:cdna3": {"es": "familia CDNA3 (MI300X)", "en": "CDNA3 family (MI300X)"},
    "group.source": {"es": "fuente", "en": "source"},
})

_CODES.update({
    # why a measured memory row is not covered (accuracy/memory.py)
    "reason.lora_target_not_in_model": {"es": "la capa LoRA indicada no existe en el modelo",
                                        "en": "the stated LoRA layer is not in the model"},
    "reason.lora_targets_unknown": {"es": "no se sabe qué capas llevan LoRA",
                                    "en": "which layers carry LoRA is unknown"},
    "reason.gradient_checkpointing_not_stated": {
        "es": "no dice si usa gradient checkpointing",
        "en": "gradient checkpointing not stated"},
    "reason.model_not_in_presets": {"es": "modelo sin configuración predefinida",
                                    "en": "model without a preset"},
    "reason.seq_len_upper_bound_only": {"es": "solo se conoce la longitud de secuencia máxima",
                                        "en": "only the maximum sequence length is known"},
    "reason.fsdp_no_sync_gradient_accumulation": {
        "es": "acumulación de gradientes con FSDP no_sync, no modelada",
        "en": "gradient accumulation under FSDP no_sync, not modelled"},
    "reason.measured_below_model_states": {
        "es": "lo medido es menor que los propios estados del modelo",
        "en": "the measurement is below the model states themselves"},
    "reason.measured_below_configured_floor": {
        "es": "lo medido es menor que el mínimo que guarda cualquier implementación",
        "en": "the measurement is below what any implementation keeps"},
    "reason.calc_error": {"es": "calc rechaza la configuración", "en": "calc rejects the setup"},
})

_CODES.update({
    # the phase of the training step that sets the peak (calc's ``peak_phase``)
    "phase.forward_end": {"es": "final del paso hacia delante", "en": "end of forward"},
    "phase.backward": {"es": "paso hacia atrás", "en": "backward"},
    "phase.optimizer_step": {"es": "paso del optimizador", "en": "optimizer step"},
})

_TEXT.update({
    "variant.double_quant.yes": {"es": "con doble cuantización", "en": "with double quantisation"},
    "variant.double_quant.no": {"es": "sin doble cuantización", "en": "without double quantisation"},
})

_CODES.update({
    # marks on the measured memory rows (accuracy/memory.py)
    "flag.compile": {"es": "compilado", "en": "compiled"},
    "flag.packed": {"es": "empaquetado", "en": "packed"},
    "flag.metric_assumed": {"es": "medida supuesta", "en": "metric assumed"},
    "flag.ambiguous": {"es": "ambigua (no se ajusta nada con ella)", "en": "ambiguous (nothing is fitted on it)"},
})

_TEXT.update({
    # leave-one-source-out and calibrated ranges (macros/validation_loso.py)
    "caption.validation_loso": {"es": "Error del modelo de memoria dentro de la muestra y dejando fuera cada fuente",
                                "en": "Error of the memory model in-sample and leaving each source out"},
    "caption.validation_bands": {"es": "Bandas calibradas de los rangos y filas fuera de muestra dentro de ellas",
                                 "en": "Calibrated bands of the ranges and held-out rows inside them"},
    "col.group": {"es": "Grupo", "en": "Group"},
    "col.framework": {"es": "Biblioteca", "en": "Library"},
    "caption.framework_profiles": {"es": "Perfiles de biblioteca de entrenamiento: qué claves fija cada uno y de dónde sale",
                                   "en": "Training-library profiles: the keys each one sets and where each comes from"},
    "col.in_median": {"es": "Mediana, en muestra (%)", "en": "Median, in-sample (%)"},
    "col.in_p90": {"es": "P90, en muestra (%)", "en": "P90, in-sample (%)"},
    "col.in_max": {"es": "Máximo, en muestra (%)", "en": "Max, in-sample (%)"},
    "col.loso_median": {"es": "Mediana, fuente fuera (%)", "en": "Median, source held out (%)"},
    "col.loso_p90": {"es": "P90, fuente fuera (%)", "en": "P90, source held out (%)"},
    "col.loso_max": {"es": "Máximo, fuente fuera (%)", "en": "Max, source held out (%)"},
    "col.band_low": {"es": "Error con signo, extremo bajo (%)", "en": "Signed error, low end (%)"},
    "col.band_high": {"es": "Error con signo, extremo alto (%)", "en": "Signed error, high end (%)"},
    "col.coverage": {"es": "Filas fuera de muestra dentro de la banda, por método (%)",
                     "en": "Held-out rows inside the band, per method (%)"},
    "loso.group.measured": {"es": "Filas medidas (cifra de portada)", "en": "Measured rows (headline)"},
    "loso.group.measured_unfitted": {"es": "Filas medidas sobre las que no se ajustó ninguna constante",
                                     "en": "Measured rows no constant was fitted on"},
    "loso.group.metric_stated": {"es": "Medida declarada (no supuesta)", "en": "Metric stated (not assumed)"},
    "loso.kind.method": {"es": "Método", "en": "Method"},
    "loso.kind.framework": {"es": "Biblioteca", "en": "Library"},
    "loso.kind.metric": {"es": "Medida", "en": "Metric"},
    "loso.kind.source": {"es": "Fuente", "en": "Source"},
})

_CODES.update({
    "analytic": {"es": "analítica (artículo de ZeRO)", "en": "analytic (ZeRO paper)"},
})

# issue 12 (oracle-moe): the MoE expert layout key and its values, in one block for the
# message catalogue to take over
MOE_EXPERT_LAYOUT_TEXT: dict[str, dict[str, str]] = {
    "field.moe_expert_layout": {"es": "Disposición de los expertos MoE",
                                "en": "MoE expert layout"},
}
MOE_EXPERT_LAYOUT_CODES: dict[str, dict[str, str]] = {
    "per-expert-modules": {"es": "un módulo por experto (transformers 4)",
                           "en": "one module per expert (transformers 4)"},
    "fused-3d": {"es": "tensores 3-D de expertos (transformers 5)",
                 "en": "3-D expert tensors (transformers 5)"},
}
_TEXT.update(MOE_EXPERT_LAYOUT_TEXT)
_CODES.update(MOE_EXPERT_LAYOUT_CODES)

_BOOL = {True: {"es": "sí", "en": "yes"}, False: {"es": "no", "en": "no"}}


def text(key: str, lang: str) -> str:
    """The label ``key`` in ``lang``; ``"key|n"`` fills ``n`` into the label (a number
    written in ``lang``, or a name as it is)."""
    key, _, arg = key.partition("|")
    try:
        label = _TEXT[key][lang]
        if not arg:
            return label
        return label.format(n=format_number(int(arg), 0, lang) if arg.isdigit() else arg)
    except KeyError:
        raise KeyError(f"no {lang!r} label for {key!r}") from None


def code(value: str, lang: str) -> str:
    try:
        return _CODES[value][lang]
    except KeyError:
        raise KeyError(f"no {lang!r} translation for code {value!r}") from None


def reason(code_: str, lang: str) -> str:
    """Why a validation row is not covered; ``calc_error:<code>`` keeps calc's error code."""
    name, _, detail = code_.partition(":")
    text_ = code("reason." + name, lang)
    return f"{text_} ({detail})" if detail else text_


def value(field: str, val: object, lang: str) -> str:
    """A request value as the setup lists show it."""
    if isinstance(val, bool):
        return _BOOL[val][lang]
    if isinstance(val, int):
        return format_number(val, 0, lang)
    if isinstance(val, float):
        return format_number(val, 0 if val.is_integer() else 2, lang)
    if isinstance(val, list):
        return ", ".join(f"`{v}`" for v in val)
    return code(str(val), lang)


def method_label(raw: str, lang: str) -> str:
    """A method as a validation source wrote it (``full``, ``LoRA``, ``QLoRA (4-bit)``):
    the method's name in ``lang``, with the source's remark translated."""
    from .methodology_text import translate_label

    head = raw.split(" ", 1)[0]
    return code(head.lower(), lang) + translate_label(raw, lang)[len(head):]


def variant(request: dict, lang: str) -> str:
    """Short name of a weight-storage variant (method + double quantization)."""
    name = code(request.get("method", "lora"), lang)
    if request.get("method") == "qlora":
        dq = request.get("qlora_double_quant", True)
        name += " " + text("variant.double_quant." + ("yes" if dq else "no"), lang)
    return name


def languages_complete() -> list[str]:
    """Keys missing a language (the tests require none)."""
    return [k for table in (_TEXT, _CODES) for k, v in table.items() if set(v) != {"es", "en"}]
