"""What the methodology page says about each constant, limit and data column of ``calc``,
in both languages, with the source of each figure.

The values are NOT here: the page reads them from ``calc`` (``macros/methodology.py``).
Keys are ``module.NAME`` for module-level constants (the module that defines them) and
``file:column`` for data-file columns. A constant of ``calc`` without an entry stops the
build, so a new constant cannot ship undocumented.
"""

from __future__ import annotations

ASSUMPTION = {"es": "Supuesto del modelo (sin medición publicada)",
              "en": "Model assumption (no published measurement)"}


def _e(es: str, en: str, source) -> dict:
    return {"es": es, "en": en, "source": source}


# the source of every input bound in calc/fields.py
VALIDATION_LIMIT = {"es": "Límite de validación", "en": "Validation limit"}


CONSTANTS: dict[str, dict] = {
    # --- units -------------------------------------------------------------------------
    "calc.states.FP32_BYTES": _e(
        "Bytes de un número en fp32 (pesos maestros, estados de Adam).",
        "Bytes of one fp32 number (master weights, Adam states).", "IEEE 754"),
    "calc.states.BF16_BYTES": _e(
        "Bytes de un número en bf16/fp16 (pesos y gradientes de 16 bits).",
        "Bytes of one bf16/fp16 number (16-bit weights and gradients).", "IEEE 754 / bfloat16"),
    "calc.activations.FP32_BYTES": _e(
        "Bytes de un número en fp32 en las activaciones guardadas (softmax, log-sum-exp).",
        "Bytes of one fp32 number in saved activations (softmax, log-sum-exp).", "IEEE 754"),
    "calc.activations.BATCH_BYTES_PER_TOKEN": _e(
        "El lote en la GPU por token: input_ids y labels, un int64 cada uno (los data collators "
        "de Hugging Face copian input_ids en labels; torchtune y LitGPT guardan tokens y "
        "objetivos).",
        "The batch on the GPU per token: input_ids and labels, one int64 each (Hugging Face's "
        "data collators copy input_ids into labels; torchtune and LitGPT hold tokens and "
        "targets).",
        {"es": "transformers 5.17 DataCollatorForLanguageModeling", "en": "transformers 5.17 DataCollatorForLanguageModeling"}),
    "calc.presets.MAX_SUGGESTIONS": _e(
        "Cuántos modelos predefinidos se sugieren, del más parecido al menos, cuando un id de "
        "Hugging Face no está en la tabla de alias (parecido de nombres con difflib, umbral 0,5).",
        "How many presets are suggested, nearest first, when a Hugging Face id is not in the alias "
        "table (name similarity by difflib, threshold 0.5).",
        {"es": "Elección de interfaz (issue 16)", "en": "Interface choice (issue 16)"}),
    "calc.gpus.MIB": _e(
        "Bytes de un MiB: convierte la memoria que informa el driver (MiB) a bytes.",
        "Bytes in one MiB: converts the driver-reported memory (MiB) to bytes.",
        "nvidia-smi memory.total"),
    "calc.cost.BYTES_PER_GB": _e(
        "Bytes de un GB decimal, la unidad con la que se factura el disco.",
        "Bytes in a decimal GB, the unit disk is billed in.", "SI"),
    "calc.cost.HOURS_PER_MONTH": _e(
        "Horas de un mes en las tarifas mensuales: 8760 horas al año entre 12.",
        "Hours in a month for monthly rates: 8760 hours a year over 12.",
        {"es": "Convención mensual de las tarifas en la nube", "en": "Cloud price sheets' monthly convention"}),
    # --- memory --------------------------------------------------------------------------
    "calc.states.NF4_BITS": _e(
        "Bits por peso en NF4 sin doble cuantización: código de 4 bits más una escala fp32 por "
        "bloque de 64 pesos.",
        "Bits per weight in NF4 without double quantisation: a 4-bit code plus one fp32 scale "
        "per block of 64 weights.",
        "Dettmers et al. 2023, QLoRA, arXiv:2305.14314, §3"),
    "calc.states.NF4_DOUBLE_QUANT_BITS": _e(
        "Bits por peso en NF4 con doble cuantización: escala de 8 bits por bloque de 64 y una "
        "constante fp32 por cada 256 bloques.",
        "Bits per weight in NF4 with double quantisation: an 8-bit scale per block of 64 and one "
        "fp32 constant per 256 blocks.",
        "Dettmers et al. 2023, QLoRA, arXiv:2305.14314, §3; torchao NF4Tensor"),
    "calc.states.OPT8_BLOCK": _e(
        "Tamaño de bloque de los estados del optimizador de 8 bits (una escala fp32 por bloque).",
        "Block size of 8-bit optimizer states (one fp32 scale per block).",
        "Dettmers et al. 2022, arXiv:2110.02861, §2.1 (bitsandbytes)"),
    "calc.activations.LAYERNORM_STATS_BYTES": _e(
        "Bytes por token que guarda LayerNorm para el paso hacia atrás: media y desviación "
        "inversa en fp32.",
        "Bytes per token LayerNorm saves for the backward pass: fp32 mean and inverse "
        "standard deviation.",
        "PyTorch ATen native_layer_norm"),
    "calc.activations.TORCHTUNE_OUTPUT_CHUNKS": _e(
        "Trozos en que torchtune divide la salida y la pérdida por trozos; sin compilar, el "
        "último trozo pasado a fp32 convive con el log-softmax guardado de todos los demás.",
        "Chunks into which torchtune splits the output and the chunked loss; uncompiled, the "
        "last chunk's fp32 upcast coexists with every other chunk's saved log-softmax.",
        "torchtune modules/loss/ce_chunked_output_loss.py, CEWithChunkedOutputLoss "
        "num_output_chunks=8 (30b8519e8, 1814feb17)"),
    "calc.activations.COMPILE_KEPT_FRACTION": _e(
        "Parte de lo que un bloque compilado con torch.compile podría recalcular en vez de "
        "guardar (copias fp32 de RMSNorm, salidas de la activación y del producto del MLP) "
        "que sigue guardando.",
        "Share of what a block compiled with torch.compile could recompute instead of saving "
        "(RMSNorm's fp32 copies, the MLP's activation and product outputs) that it still "
        "saves.",
        {"es": "Ajustada: torchtune, tabla «Optimization flags» (1814feb17), Llama-3.2-3B con y "
               "sin compile: 9,0 GiB ahorrados de 14,88 posibles; error en las demás filas "
               "compiladas en la validación",
         "en": "Fitted: torchtune \"Optimization flags\" table (1814feb17), Llama-3.2-3B with and "
               "without compile: 9.0 GiB saved of 14.88 possible; error on the other compiled "
               "rows in the validation"}),
    "calc.calibration.MIN_ROWS": _e(
        "Filas fuera de muestra que necesita una combinación de método y medida para tener banda "
        "de error propia; con menos, su rango usa la banda de todas las filas medidas.",
        "Held-out rows a method-and-metric pair needs for an error band of its own; with fewer, "
        "its range uses the band of all measured rows.",
        {"es": "Elección: tres filas son las mínimas con percentiles 10 y 90 distintos de los "
               "extremos; cobertura comprobada dejando fuera cada fuente (validación)",
         "en": "Choice: three rows are the fewest with 10th and 90th percentiles apart from the "
               "extremes; coverage checked leaving each source out (validation)"}),
    "calc.memory.ALLOCATOR_SLACK_FRACTION": _e(
        "Holgura del asignador de PyTorch: reservado = asignado × (1 + f), por redondeo de "
        "bloques, caché y fragmentación.",
        "PyTorch allocator slack: reserved = allocated × (1 + f), from block rounding, caching "
        "and fragmentation.",
        {"es": "Ajustada: mediana, por publicación, de reservado medido / asignado calculado − 1 en "
               "las filas que publican max_memory_reserved (tutoriales de torchtune, comparativa de "
               "Answer.AI) y después mediana entre publicaciones; reajustada dejando fuera cada fuente "
               "(validación)",
         "en": "Fitted: per publication, the median of measured reserved / computed allocated − 1 "
               "over the rows that publish max_memory_reserved (torchtune tutorials, Answer.AI's "
               "benchmark), then the median over publications; refitted leaving each source out "
               "(validation)"}),
    "calc.memory.FSDP1_ALLOCATOR_SLACK_FRACTION": _e(
        "Holgura del asignador en el paso de FSDP1 cuando el bucle conserva la salida del modelo "
        "(fsdp_wrap_floor con loss_outputs_kept): reservado = asignado × (1 + f) donde no manda "
        "el suelo del envoltorio. FSDP1 reúne los parámetros en un flujo CUDA propio y reduce los "
        "gradientes en otro, y el asignador solo reutiliza un bloque en el flujo que lo liberó; "
        "transformers anterior a 4.46 devuelve además los logits en fp32 (4 V bytes por token).",
        "Allocator slack of the FSDP1 step when the loop keeps the model's output "
        "(fsdp_wrap_floor with loss_outputs_kept): reserved = allocated × (1 + f) where the "
        "wrap's floor does not bind. FSDP1 all-gathers on a CUDA stream of its own and "
        "reduce-scatters on another, and the allocator reuses a block only on the stream that "
        "freed it; transformers before 4.46 also returns fp32 logits (4 V bytes per token).",
        {"es": "Ajustada con la regla de la holgura general sobre las 13 filas de max_memory_reserved "
               "de la comparativa de Answer.AI (fsdp_qlora, benchmarks_03_2024.md), la única "
               "publicación de ese montaje: valores por fila de 0,12 a 0,58; dejándola fuera se "
               "recurre a la holgura general, así que su error fuera de muestra es el de esa "
               "(python -m benchmarks.validate_memory)",
         "en": "Fitted with the general slack's rule on the 13 max_memory_reserved rows of "
               "Answer.AI's benchmark (fsdp_qlora, benchmarks_03_2024.md), the one publication of "
               "that setup: per-row values 0.12 to 0.58; holding it out falls back to the general "
               "slack, so its held-out error is that one's (python -m benchmarks.validate_memory)"}),
    "calc.memory.FSDP1_BROADCAST_BUCKET_BYTES": _e(
        "Tamaño máximo de cada cubo con que FSDP1 difunde desde el rango 0 los parámetros de una "
        "unidad (sync_module_states); dos cubos en vuelo, cada uno una copia plana nueva si junta "
        "dos o más tensores. Entra en el suelo de memoria reservada que deja el envoltorio "
        "(fsdp_wrap_floor): cada unidad pasa por la GPU sin fragmentar (sus parámetros, esas "
        "copias, el parámetro plano y su fragmento) y el asignador conserva los bloques liberados.",
        "Largest bucket in which FSDP1 broadcasts a unit's parameters from rank 0 "
        "(sync_module_states); two buckets in flight, each a new flat copy when it holds two or "
        "more tensors. Part of the reserved floor the wrapping leaves (fsdp_wrap_floor): each "
        "unit passes through the GPU unsharded (its parameters, those copies, the flat parameter "
        "and its shard) and the allocator keeps the freed blocks.",
        {"es": "torch 2.13.0, torch/distributed/fsdp/_init_utils.py (PARAM_BROADCAST_BUCKET_SIZE, "
               "_init_param_handle_from_module), _flat_param.py (flatten_tensors, shard) y "
               "torch/csrc/distributed/c10d/comm.cpp (broadcast_coalesced, max_in_flight = 2); "
               "Answer.AI fsdp_qlora train.py 50efa1e, que imprime reserved_after_model_wrap",
         "en": "torch 2.13.0, torch/distributed/fsdp/_init_utils.py (PARAM_BROADCAST_BUCKET_SIZE, "
               "_init_param_handle_from_module), _flat_param.py (flatten_tensors, shard) and "
               "torch/csrc/distributed/c10d/comm.cpp (broadcast_coalesced, max_in_flight = 2); "
               "Answer.AI fsdp_qlora train.py 50efa1e, which prints reserved_after_model_wrap"}),
    "calc.memory.DEQUANT_BYTES": _e(
        "Bytes por elemento de un peso de 4 bits descuantizado y de los gradientes que rodean "
        "su multiplicación: el tipo de cálculo de 16 bits, sea cual sea el tipo de los demás "
        "parámetros. El peso descuantizado solo existe durante su multiplicación; cuenta en la "
        "retropropagación, cuando supera lo que el bloque tiene ya en vuelo.",
        "Bytes per element of a dequantised 4-bit weight and of the gradients around its "
        "matmul: the 16-bit compute dtype, whatever the other parameters' dtype. The "
        "dequantised weight exists only during its matmul; it counts in the backward pass, "
        "when it exceeds what the block already has in flight.",
        {"es": "bitsandbytes 0.49.2, autograd/_functions.py (MatMul4Bit) y nn/modules.py "
               "(Linear4bit.forward, compute_dtype); comprobado con el oráculo (tools/oracle/qlora.py)",
         "en": "bitsandbytes 0.49.2, autograd/_functions.py (MatMul4Bit) and nn/modules.py "
               "(Linear4bit.forward, compute_dtype); checked against the oracle (tools/oracle/qlora.py)"}),
    "calc.memory.UNCHUNKED_QUANTIZE_BYTES_PER_ELEMENT": _e(
        "Bytes por elemento vivos a la vez mientras torchao anterior a la v0.2.0 cuantiza un "
        "peso a NF4 de una sola pasada (origen de 16 bits, bloques escalados y dos tensores "
        "de distancias a los 16 valores NF4). Solo cuenta con la opción de cuantización sin "
        "trocear; lo que deja en la caché del asignador fija un mínimo para la memoria reservada.",
        "Bytes per element alive at once while torchao before v0.2.0 quantizes one weight to "
        "NF4 in a single pass (16-bit source, scaled blocks and two tensors of distances to the "
        "16 NF4 values). Counted only with the unchunked-quantization option; what it leaves in "
        "the allocator's cache sets a floor for reserved memory.",
        {"es": "torchao v0.1, torchao/dtypes/nf4tensor.py (quantize_tensor_nearest); PR #196 lo "
               "trocea desde la v0.2.0",
         "en": "torchao v0.1, torchao/dtypes/nf4tensor.py (quantize_tensor_nearest); PR #196 "
               "chunks it from v0.2.0"}),
    "calc.memory.ALLOCATOR_SEGMENT_BYTES": _e(
        "Segmento en que el asignador de PyTorch reserva los bloques grandes: toda cifra de "
        "memoria reservada se redondea hacia arriba a segmentos enteros.",
        "Segment in which PyTorch's allocator reserves large blocks: every reserved-memory "
        "figure is rounded up to whole segments.",
        {"es": "Documentación de PyTorch, CUDA semantics (gestión de memoria: bloques grandes en segmentos de 2 MiB)",
         "en": "PyTorch docs, CUDA semantics (memory management: large blocks in 2 MiB segments)"}),
    "calc.memory.CUDA_CONTEXT_BYTES": _e(
        "Contexto de CUDA y núcleos cargados, fuera del asignador de PyTorch; se suma al total "
        "que muestra nvidia-smi.",
        "CUDA context and loaded kernels, outside PyTorch's allocator; added to the total "
        "nvidia-smi shows.",
        {"es": "Documentación de PyTorch, CUDA semantics (se observan 0,3-1,5 GB; el extremo bajo con carga diferida)", "en": "PyTorch docs, CUDA semantics (0.3-1.5 GB observed; low end with lazy loading)"}),
    "calc.memory.NCCL_BUFFER_BYTES": _e(
        "Búferes de comunicación de NCCL con varias GPU: envío y recepción en hasta 32 canales "
        "de 4 MiB.",
        "NCCL communication buffers with several GPUs: send and receive on up to 32 channels "
        "of 4 MiB.",
        "NCCL docs: NCCL_BUFFSIZE, NCCL_MAX_NCHANNELS"),
    "calc.memory.GATHERED_UNITS": _e(
        "Bloques que ZeRO-3/FSDP tiene reunidos a la vez en el paso hacia atrás, además de la "
        "unidad raíz: el que calcula y el siguiente, precargado.",
        "Blocks ZeRO-3/FSDP holds gathered at once in the backward pass, on top of the root "
        "unit: the one computing and the prefetched next one.",
        "PyTorch FSDP BackwardPrefetch, FSDPState._lazy_init (root not resharded); DeepSpeed "
        "stage3_prefetch_bucket_size"),
    # --- time ----------------------------------------------------------------------------
    "calc.flops.CAUSAL_ATTENTION_FRACTION": _e(
        "Parte de las multiplicaciones de la atención que se calcula de verdad: los núcleos "
        "causales fusionados saltan la mitad superior de la matriz; la atención ingenua la "
        "calcula entera.",
        "Share of the attention matmuls actually computed: fused causal kernels skip the upper "
        "half of the matrix; eager attention computes all of it.",
        "Dao 2023, FlashAttention-2, arXiv:2307.08691, §3.1"),
    "calc.timing.MATMUL_EFFICIENCY": _e(
        "Fracción del pico bf16 denso que alcanzan las multiplicaciones de matrices con "
        "micro-pasos grandes, por familia de tarjeta. Ajustada a las filas medidas de cada "
        "familia (cada fuente pesa lo mismo entre ellas); Blackwell se apoya en una sola "
        "fuente.",
        "Share of the dense bf16 peak the matmuls reach with large micro-steps, by card family. "
        "Fitted to the measured rows of each family (every source weighs the same among them); "
        "Blackwell rests on a single source.",
        {"es": "AJUSTADA: validation/measured_throughput.csv (tabla de validación del tiempo, con "
               "su error dejando fuera cada fuente)",
         "en": "FITTED: validation/measured_throughput.csv (time validation table, with its "
               "leave-one-source-out error)"}),
    "calc.timing.MATMUL_EFFICIENCY_POOLED": _e(
        "La misma fracción ajustada con todas las filas juntas: la que usan las familias sin "
        "ninguna fila medida (MI300X).",
        "The same share fitted on all rows pooled: what card families without a measured row "
        "use (MI300X).",
        {"es": "AJUSTADA: validation/measured_throughput.csv",
         "en": "FITTED: validation/measured_throughput.csv"}),
    "calc.timing.MATMUL_HALF_TOKENS": _e(
        "Tokens por micro-paso con los que un modelo de tamaño oculto 4096 llega a la mitad de "
        "su eficiencia con pasos grandes; escala con (4096 / tamaño oculto)².",
        "Tokens per micro-step at which a model of hidden size 4096 reaches half its "
        "large-step efficiency; it scales with (4096 / hidden size)².",
        {"es": "AJUSTADA: validation/measured_throughput.csv (el barrido de longitudes de Qwen la "
               "fija casi sola)",
         "en": "FITTED: validation/measured_throughput.csv (Qwen's length sweep all but sets it)"}),
    "calc.timing.FP8_MATMUL_EFFICIENCY": _e(
        "Fracción del pico FP8 denso que alcanzan las capas lineales en FP8 (torchao float8, "
        "Transformer Engine) con micro-pasos grandes.",
        "Share of the dense FP8 peak the FP8 linears reach (torchao float8, Transformer Engine) "
        "with large micro-steps.",
        {"es": "AJUSTADA: filas FP8 de NeMo, Megatron-Bridge (H100 y B200), llm-foundry y "
               "torchtitan",
         "en": "FITTED: FP8 rows of NeMo, Megatron-Bridge (H100 and B200), llm-foundry and "
               "torchtitan"}),
    "calc.timing.SATURATION_REFERENCE_HIDDEN": _e(
        "Tamaño oculto de referencia de MATMUL_HALF_TOKENS.",
        "Reference hidden size of MATMUL_HALF_TOKENS.",
        {"es": "Convención del ajuste", "en": "Convention of the fit"}),
    "calc.timing.MEMORY_BANDWIDTH_EFFICIENCY": _e(
        "Fracción del ancho de banda de memoria de la ficha técnica que alcanza un núcleo que "
        "solo mueve datos (optimizador, descuantización, operaciones elemento a elemento).",
        "Share of the datasheet memory bandwidth a data-moving kernel reaches (optimizer, "
        "dequantisation, element-wise work).",
        {"es": "Medidas tipo BabelStream/STREAM: A100 80GB unos 1,7 TB/s de 2,04; H100 SXM "
               "2,9-3,0 de 3,35; RTX 4090 0,9 de 1,01",
         "en": "BabelStream/STREAM-like measurements: A100 80GB about 1.7 TB/s of 2.04; H100 SXM "
               "2.9-3.0 of 3.35; RTX 4090 0.9 of 1.01"}),
    "calc.timing.DEQUANT_WRITE_BYTES": _e(
        "Bytes que escribe la descuantización de QLoRA por peso y pasada: la copia de 16 bits "
        "que usa la multiplicación (además de leer el peso de 4 bits).",
        "Bytes QLoRA's dequantisation writes per weight and pass: the 16-bit copy the matmul "
        "uses (besides reading the 4-bit weight).",
        "bitsandbytes 0.49.2, autograd/_functions.py (MatMul4Bit, dequantize_4bit)"),
    "calc.timing.NF4_BLOCK": _e(
        "Pesos por bloque de 4 bits de bitsandbytes: cada bloque guarda su propio máximo "
        "absoluto, que la descuantización lee junto al código empaquetado.",
        "Weights per bitsandbytes 4-bit block: each block keeps its own absmax, which "
        "dequantisation reads beside the packed code.",
        "bitsandbytes 0.49.2, nn/modules.py (Params4bit, blocksize=64)"),
    "calc.timing.NESTED_ABSMAX_BYTES_PER_BLOCK": _e(
        "Con cuantización doble, antes de cada multiplicación se reconstruye el máximo absoluto "
        "en fp32: se lee el de 8 bits, se escribe en fp32 y se le suma el desplazamiento en el "
        "sitio (bytes por bloque).",
        "With double quantisation, the fp32 absmax is rebuilt before each matmul: the 8-bit one "
        "is read, written in fp32, and the offset is added in place (bytes per block).",
        "bitsandbytes 0.49.2, functional.py (dequantize_4bit, dequantize_blockwise)"),
    "calc.timing.BNB_OPS_FORWARD": _e(
        "Operaciones que bitsandbytes lanza desde la CPU en cada pasada hacia delante de una capa "
        "lineal de 4 bits, además de la multiplicación (conversiones de tipo, transpuestas, la "
        "función de autograd y los núcleos de descuantización), con y sin cuantización doble.",
        "Host-dispatched ops bitsandbytes adds to each forward pass of a 4-bit linear besides "
        "the matmul (casts, transposes, the autograd Function, the dequantisation kernels), "
        "with and without double quantisation.",
        "bitsandbytes 0.49.2, nn/modules.py (Linear4bit.forward), autograd/_functions.py "
        "(MatMul4Bit), functional.py (dequantize_4bit)"),
    "calc.timing.DEQUANT_KERNELS": _e(
        "Con torch.compile solo quedan los núcleos de descuantización de cada capa lineal de 4 "
        "bits y pasada (con y sin cuantización doble): las capas de Python se trazan y desaparecen.",
        "Under torch.compile only the dequantisation kernels of each 4-bit linear and pass are "
        "left (with and without double quantisation): the Python layers are traced away.",
        "bitsandbytes 0.49.2, _ops.py (torch.library custom ops), functional.py (dequantize_4bit)"),
    "calc.timing.BNB_OPS_BACKWARD": _e(
        "Las mismas operaciones añadidas en la pasada hacia atrás de una capa lineal de 4 bits: "
        "la descuantización de nuevo, una conversión y una transpuesta.",
        "The same added ops in a 4-bit linear's backward pass: the dequantisation again, a cast "
        "and a transpose.",
        "bitsandbytes 0.49.2, autograd/_functions.py (MatMul4Bit.backward)"),
    "calc.timing.DISPATCH_SECONDS_PER_KERNEL": _e(
        "Tiempo de CPU para lanzar cada operación del paso (Python, despachador, ganchos de "
        "peft, checkpointing y FSDP); si el lanzamiento de un micro-paso dura más que el trabajo "
        "de la GPU, la GPU espera.",
        "CPU time to dispatch each op of the step (Python, dispatcher, peft, checkpointing and "
        "FSDP hooks); when a micro-step's dispatch takes longer than the GPU's work, the GPU "
        "waits.",
        {"es": "AJUSTADA: validation/measured_throughput.csv (modelos pequeños en tarjetas "
               "rápidas, pasos cortos); una operación eager sola cuesta 5-20 µs (blog de PyTorch "
               "sobre CUDA Graphs, 2021)",
         "en": "FITTED: validation/measured_throughput.csv (small models on fast cards, short "
               "steps); a bare eager op costs 5-20 µs (PyTorch blog on CUDA Graphs, 2021)"}),
    "calc.timing.EAGER_OPS_PER_LAYER_FORWARD": _e(
        "Operaciones de un bloque en el paso hacia delante, además de sus capas lineales, en "
        "modo eager.",
        "Ops of one block's forward pass besides its linears, eager.",
        "transformers 5.17, LlamaDecoderLayer.forward (op count)"),
    "calc.timing.LORA_OPS_PER_ADAPTER": _e(
        "Operaciones que añade cada capa adaptada con LoRA.",
        "Ops each LoRA-adapted linear adds.",
        "peft 0.21, tuners/lora/layer.py (Linear.forward)"),
    "calc.timing.COMPILED_OPS_PER_LAYER_FORWARD": _e(
        "Operaciones de un bloque, además de las lineales, con torch.compile (núcleos Triton "
        "fusionados).",
        "Ops of one block besides its linears under torch.compile (fused Triton kernels).",
        ASSUMPTION),
    "calc.timing.BACKWARD_OPS_FACTOR": _e(
        "Operaciones del paso hacia atrás por cada una del paso hacia delante.",
        "Backward ops per forward op.",
        {"es": "Autograd: un gradiente por entrada de cada operación",
         "en": "Autograd: one gradient per input of each op"}),
    "calc.timing.NORM_BYTES_PER_ELEMENT": _e(
        "Bytes que mueve una RMSNorm por elemento del estado oculto en el paso hacia delante: "
        "en modo eager (seis operaciones con conversión a fp32) o compilada (un núcleo).",
        "Bytes an RMSNorm moves per hidden-state element in the forward pass: eager (six ops "
        "with an fp32 upcast) or compiled (one kernel).",
        "transformers 5.17, LlamaRMSNorm.forward"),
    "calc.timing.LAYER_NORM_BYTES_PER_ELEMENT": _e(
        "Bytes por elemento de una LayerNorm de PyTorch, que ya es un solo núcleo.",
        "Bytes per element of a PyTorch LayerNorm, already one kernel.",
        "PyTorch native_layer_norm"),
    "calc.timing.RESIDUAL_BYTES_PER_ELEMENT": _e(
        "Bytes por elemento de una suma residual (dos lecturas y una escritura); compilada se "
        "funde con la norma siguiente.",
        "Bytes per element of a residual add (two reads, one write); compiled, it fuses into "
        "the next norm.",
        {"es": "Recuento de lecturas y escrituras en bf16", "en": "Count of bf16 reads and writes"}),
    "calc.timing.ROTARY_BYTES_PER_ELEMENT": _e(
        "Bytes por elemento de q y k que mueve la codificación rotatoria de posiciones.",
        "Bytes per q and k element the rotary position embedding moves.",
        "transformers 5.17, apply_rotary_pos_emb / rotate_half"),
    "calc.timing.ATTENTION_IO_BYTES_PER_ELEMENT": _e(
        "Bytes por elemento de q, k y v de las trasposiciones y copias alrededor del núcleo "
        "de atención.",
        "Bytes per q, k and v element of the transposes and copies around the attention "
        "kernel.",
        "transformers 5.17, LlamaAttention.forward (view/transpose, contiguous)"),
    "calc.timing.MLP_ACT_BYTES_PER_ELEMENT": _e(
        "Bytes por elemento del ancho interno del MLP de act(gate) × up.",
        "Bytes per element of the MLP's inner width for act(gate) × up.",
        "transformers 5.17, LlamaMLP.forward"),
    "calc.timing.LORA_BYTES_PER_OUTPUT": _e(
        "Bytes por elemento de salida de cada capa adaptada: escalado de la rama LoRA y suma a "
        "la salida base.",
        "Bytes per output element of each adapted linear: scaling of the LoRA branch and the "
        "add to the base output.",
        "peft 0.21, tuners/lora/layer.py (Linear.forward)"),
    "calc.timing.LOSS_BYTES_PER_LOGIT": _e(
        "Bytes por logit y token de la entropía cruzada, hacia delante y hacia atrás.",
        "Bytes per logit and token of the cross-entropy, forward and backward.",
        "transformers 5.17, loss/loss_utils.py (ForCausalLMLoss)"),
    "calc.timing.BACKWARD_ELEMENTWISE_FACTOR": _e(
        "Tráfico del paso hacia atrás de una operación elemento a elemento respecto al de su "
        "paso hacia delante.",
        "Backward traffic of an element-wise op relative to its forward.",
        {"es": "Lee la entrada guardada y el gradiente, escribe el gradiente",
         "en": "Reads the saved input and the gradient, writes the gradient"}),
    "calc.timing.DDP_BUCKET_BYTES": _e(
        "Tamaño de los cubos de gradientes de DDP: solo el último all-reduce queda seguro al "
        "descubierto.",
        "Size of DDP's gradient buckets: only the last all-reduce is certainly exposed.",
        "torch 2.13, DistributedDataParallel(bucket_cap_mb=25)"),
    "calc.timing.CPU_OPTIMIZER_BYTES_PER_PARAM": _e(
        "Bytes por parámetro del paso de Adam en la CPU (ZeRO-Offload): lee peso, gradiente y "
        "dos momentos fp32, escribe tres y la copia de 16 bits.",
        "Bytes per parameter of the CPU Adam step (ZeRO-Offload): reads fp32 weight, gradient "
        "and two moments, writes three and the 16-bit copy.",
        "Ren et al. 2021, ZeRO-Offload, arXiv:2101.06840, §4.1 (DeepSpeedCPUAdam)"),
    "calc.timing.CPU_MEMORY_BYTES_PER_S": _e(
        "Ancho de banda de la memoria del anfitrión al que corre el optimizador en la CPU.",
        "Host memory bandwidth the CPU optimizer streams at.",
        ASSUMPTION),
    "calc.timing.GRAD_CLIP_PASSES": _e(
        "Pasadas del recorte de gradientes sobre todos los gradientes: una lectura para la "
        "norma, una lectura y una escritura para escalarlos.",
        "Passes of gradient clipping over all gradients: one read for the norm, a read and a "
        "write to scale them.",
        "torch 2.13, torch.nn.utils.clip_grad_norm_ (foreach)"),
    "calc.timing.FP8_CAST_BYTES_PER_ELEMENT": _e(
        "Bytes por elemento de cada conversión a FP8 (lee 2, escribe 1) de entradas, pesos y "
        "gradientes de salida de las capas lineales.",
        "Bytes per element of each cast to FP8 (read 2, write 1) of the linears' inputs, "
        "weights and output gradients.",
        "torchao float8 (tensorwise dynamic scaling), torchtitan default"),
    "calc.comm.GPUS_PER_NODE": _e(
        "GPU por servidor: por encima, el trabajo cruza la red entre servidores.",
        "GPUs per server: above it, the job crosses the network between servers.",
        {"es": "Placas HGX/DGX y OAM (8 GPU)", "en": "HGX/DGX and OAM boards (8 GPUs)"}),
    "calc.comm.PCIE_GB_PER_S_PER_DIRECTION": _e(
        "Velocidad bruta de una ranura PCIe x16 en un sentido, por generación.",
        "Raw rate of a PCIe x16 slot in one direction, by generation.",
        "PCI-SIG, PCI Express Base Specification 3.0 / 4.0 / 5.0"),
    "calc.comm.NETWORK_GB_PER_S_PER_GPU": _e(
        "Red entre servidores por GPU, por arquitectura; NCCL reparte los anillos entre los 8 "
        "adaptadores, así que un colectivo entre servidores usa los 8.",
        "Network between servers per GPU, by architecture; NCCL spreads its rings over the 8 "
        "adapters, so a collective across servers uses all 8.",
        {"es": "Fichas de DGX A100 (HDR 200 Gb/s por GPU), DGX H100/B200 (NDR 400 Gb/s), "
               "plataforma MI300X; Ada: supuesto",
         "en": "DGX A100 (HDR 200 Gb/s per GPU), DGX H100/B200 (NDR 400 Gb/s) datasheets, "
               "MI300X platform brief; Ada: assumption"}),
    "calc.comm.LINK_EFFICIENCY": _e(
        "Fracción de la velocidad del enlace que alcanza un colectivo grande.",
        "Share of the link's rate a large collective reaches.",
        {"es": "nccl-tests en 8×A100 SXM: unos 230 GB/s de ancho de bus sobre 300 por sentido",
         "en": "nccl-tests on 8×A100 SXM: about 230 GB/s bus bandwidth over 300 per direction"}),
    "calc.comm.HOST_LINK_EFFICIENCY": _e(
        "Fracción de la velocidad PCIe que alcanza una copia entre CPU y GPU con memoria fijada.",
        "Share of the PCIe rate a pinned host<->device copy reaches.",
        {"es": "bandwidthTest de las muestras de CUDA: unos 25 GB/s en PCIe 4.0 x16",
         "en": "CUDA samples bandwidthTest: about 25 GB/s on PCIe 4.0 x16"}),
    # --- cost ----------------------------------------------------------------------------
    "calc.cost.DATASET_BYTES_PER_TOKEN": _e(
        "Bytes de disco por token del conjunto de datos (identificadores int32; el texto "
        "original ocupa del mismo orden).",
        "Disk bytes per dataset token (int32 ids; the raw text is of the same order).",
        {"es": "Identificadores de token int32", "en": "int32 token ids"}),
    "calc.cost.CHECKPOINT_BYTES_PER_TRAINABLE_PARAM": _e(
        "Bytes de un checkpoint reanudable por parámetro entrenable: pesos y dos momentos de "
        "AdamW en 16 bits.",
        "Bytes of a resumable checkpoint per trainable parameter: weights and AdamW's two "
        "moments in 16 bits.",
        {"es": "Checkpoints bf16-true de torchtune y LitGPT", "en": "torchtune / LitGPT bf16-true checkpoints"}),
    "calc.cost.BASE_MODEL_BYTES_PER_PARAM": _e(
        "Bytes por parámetro del modelo base descargado (safetensors en bf16).",
        "Bytes per parameter of the downloaded base model (bf16 safetensors).",
        {"es": "Repositorios de modelos de Hugging Face", "en": "Hugging Face model repositories"}),
    "calc.cost.ENVIRONMENT_GB": _e(
        "Disco de la imagen del entorno (CUDA, PyTorch y bibliotecas de entrenamiento), en GB.",
        "Disk of the environment image (CUDA, PyTorch and training libraries), in GB.",
        {"es": "Supuesto: las imágenes habituales ocupan 15-30 GB",
         "en": "Assumption: common images take 15-30 GB"}),
    # --- recommendation ------------------------------------------------------------------
    "calc.recommend.GPU_COUNTS": _e(
        "Número de tarjetas que explora la recomendación (con DDP, ZeRO-2 y ZeRO-3 a partir de 2).",
        "Card counts the recommendation explores (with DDP, ZeRO-2 and ZeRO-3 from 2 up).",
        {"es": "Tamaños habituales de instancia en la nube", "en": "Usual cloud instance sizes"}),
    # --- limits --------------------------------------------------------------------------
    "calc.fields.MAX_SEQ_LEN": _e(
        "Longitud de secuencia máxima aceptada (por encima de las ventanas de contexto "
        "publicadas más largas).",
        "Largest sequence length accepted (above the longest published context windows).",
        VALIDATION_LIMIT),
    "calc.fields.MAX_MICRO_BATCH": _e(
        "Micro-batch máximo aceptado.", "Largest micro-batch accepted.",
        VALIDATION_LIMIT),
    "calc.fields.MAX_LORA_RANK": _e(
        "Rango LoRA máximo aceptado.", "Largest LoRA rank accepted.",
        VALIDATION_LIMIT),
    "calc.fields.MAX_GPUS": _e(
        "Número máximo de GPU aceptado.", "Largest GPU count accepted.",
        VALIDATION_LIMIT),
    "calc.fields.MAX_ACCUMULATION": _e(
        "Pasos de acumulación de gradientes máximos aceptados.",
        "Largest number of gradient accumulation steps accepted.",
        VALIDATION_LIMIT),
    "calc.fields.MAX_DATASET_TOKENS": _e(
        "Tokens máximos del conjunto de datos (más que cualquier corpus publicado: sería una "
        "errata).",
        "Largest dataset size in tokens (more than any published corpus: it would be a typo).",
        VALIDATION_LIMIT),
    "calc.fields.MAX_STARTS": _e(
        "Número máximo de arranques aceptado.", "Largest number of starts accepted.",
        VALIDATION_LIMIT),
}

# Defaults of the plan-only request keys (calc.plan.PLAN_FIELDS) that are numbers.
PLAN_DEFAULTS: dict[str, dict] = {
    "epochs": _e("Pasadas por el conjunto de datos.", "Passes over the dataset.",
                 {"es": "Valor neutro", "en": "Neutral value"}),
    "checkpoint_interval_minutes": _e(
        "Minutos entre checkpoints (capacidad interrumpible).",
        "Minutes between checkpoints (interruptible capacity).", ASSUMPTION),
    "checkpoint_minutes": _e(
        "Minutos que tarda un checkpoint (capacidad interrumpible).",
        "Minutes one checkpoint takes (interruptible capacity).", ASSUMPTION),
    "interruptions_per_day": _e(
        "Interrupciones esperadas al día (capacidad interrumpible).",
        "Expected interruptions per day (interruptible capacity).", ASSUMPTION),
    "startup_minutes": _e(
        "Minutos de preparación del entorno y descarga del modelo, facturados en cada arranque.",
        "Minutes of environment set-up and model download, billed at every start.",
        {"es": "Fuente 004: «varios minutos por arranque»",
         "en": "Seed 004: \u201cseveral minutes per start\u201d"}),
    "starts": _e("Arranques previstos de la ejecución final.", "Planned starts of the final run.",
                 {"es": "Valor neutro", "en": "Neutral value"}),
    "months_kept": _e("Meses que se conserva el almacenamiento.", "Months the storage is kept.",
                      {"es": "Valor neutro", "en": "Neutral value"}),
    "experiment_multiplier": _e(
        "Tiempo de GPU de pruebas y ejecuciones fallidas, como múltiplo de la ejecución final.",
        "GPU time of trials and failed runs, as a multiple of the final run.",
        {"es": "Fuente 004: las pruebas y fallos suelen costar más que la ejecución final; 2 es "
               "lo mínimo que eso implica",
         "en": "Seed 004: trials and failures often cost more than the final run; 2 is the least "
               "that implies"}),
    "safety_margin": _e(
        "Margen de memoria sobre la estimación para dar una tarjeta por buena.",
        "Memory margin over the estimate for a card to count as fitting.",
        {"es": "Fuentes 000 y 004: 20-30 %; se toma el punto medio",
         "en": "Seeds 000 and 004: 20-30 %; the middle is taken"}),
}

# Data-file columns: "file:column" -> meaning and unit, per language.
DATA_COLUMNS: dict[str, dict] = {
    "gpus.csv:id": {"es": "Identificador del catálogo (minúsculas, con guiones)",
                    "en": "Catalogue id (lowercase, hyphenated)"},
    "gpus.csv:name": {"es": "Nombre comercial", "en": "Product name"},
    "gpus.csv:vendor": {"es": "Fabricante: nvidia o amd", "en": "Vendor: nvidia or amd"},
    "gpus.csv:stack": {"es": "Pila de software: cuda o rocm (en ROCm, QLoRA y parte de la "
                             "atención rápida piden trabajo extra)",
                       "en": "Software stack: cuda or rocm (on ROCm, QLoRA and some fast "
                             "attention need extra work)"},
    "gpus.csv:architecture": {"es": "Arquitectura del chip", "en": "Chip architecture"},
    "gpus.csv:memory_mib": {"es": "Memoria total tal como la informa el driver (nvidia-smi, "
                                  "rocminfo), en MiB; es la que se compara con el total estimado",
                            "en": "Total memory as the driver reports it (nvidia-smi, rocminfo), "
                                  "in MiB; what the estimated total is compared with"},
    "gpus.csv:memory_gb_marketed": {"es": "Memoria anunciada en GB, solo para mostrar",
                                    "en": "Marketed memory in GB, for display only"},
    "gpus.csv:bf16_dense_tflops": {"es": "Pico bf16 denso de los núcleos tensoriales con "
                                         "acumulación fp32, en TFLOP/s (ni disperso ni fp32)",
                                   "en": "Dense bf16 tensor-core peak with fp32 accumulation, "
                                         "in TFLOP/s (not sparse, not fp32)"},
    "gpus.csv:fp8_dense_tflops": {"es": "Pico FP8 denso de los núcleos tensoriales con "
                                        "acumulación fp32, en TFLOP/s; 0 si la tarjeta no tiene FP8",
                                  "en": "Dense FP8 tensor-core peak with fp32 accumulation, in "
                                        "TFLOP/s; 0 where the card has no FP8"},
    "gpus.csv:memory_bandwidth_gb_per_s": {"es": "Ancho de banda de memoria, GB/s",
                                           "en": "Memory bandwidth, GB/s"},
    "gpus.csv:form_factor": {"es": "Formato: pcie, sxm u oam", "en": "Form factor: pcie, sxm or oam"},
    "gpus.csv:pcie_gen": {"es": "Generación de PCIe del anfitrión", "en": "Host PCIe generation"},
    "gpus.csv:nvlink_gb_per_s": {"es": "Enlace entre GPU (NVLink, puente NVLink o Infinity "
                                       "Fabric), GB/s bidireccionales por GPU; 0 si no hay",
                                 "en": "GPU-to-GPU link (NVLink, NVLink bridge or Infinity "
                                       "Fabric), bidirectional GB/s per GPU; 0 if none"},
    "gpus.csv:nvlink_max_gpus": {"es": "GPU que une ese enlace: 2 con puente, 8 en una placa "
                                       "SXM/OAM",
                                 "en": "GPUs that link joins: 2 for a bridge, 8 on an SXM/OAM "
                                       "board"},
    "gpus.csv:utilisation_class": {"es": "Familia de la tarjeta para la eficiencia ajustada de las "
                                         "multiplicaciones (MATMUL_EFFICIENCY)",
                                   "en": "Card family for the fitted matmul efficiency "
                                         "(MATMUL_EFFICIENCY)"},
    "gpus.csv:source": {"es": "De dónde salen las cifras (hoja de datos, salida de nvidia-smi)",
                        "en": "Where the figures come from (datasheet, nvidia-smi output)"},
    "gpus.csv:as_of": {"es": "Fecha de la fuente", "en": "Date of the source"},
    "prices.csv:item": {"es": "Identificador de GPU del catálogo, o storage para el disco",
                        "en": "GPU catalogue id, or storage for disk"},
    "prices.csv:tier": {"es": "Tipo de proveedor: marketplace (mercado de capacidad ociosa) o "
                              "managed (nube gestionada)",
                        "en": "Kind of provider: marketplace (idle-capacity marketplace) or "
                              "managed (managed cloud)"},
    "prices.csv:interruptible": {"es": "true para capacidad interrumpible (spot)",
                                 "en": "true for interruptible (spot) capacity"},
    "prices.csv:usd": {"es": "Precio en dólares, en la unidad de la columna siguiente",
                       "en": "Price in US dollars, in the unit of the next column"},
    "prices.csv:unit": {"es": "usd_per_gpu_hour (una GPU, una hora) o usd_per_gb_month (disco)",
                        "en": "usd_per_gpu_hour (one GPU, one hour) or usd_per_gb_month (disk)"},
    "prices.csv:source": {"es": "Dónde se leyó el precio", "en": "Where the price was read"},
    "prices.csv:as_of": {"es": "Fecha de la fuente", "en": "Date of the source"},
    "prices.csv:note": {"es": "Cómo se eligió la cifra cuando la fuente da un intervalo",
                        "en": "How the figure was chosen when the source gives a range"},
    "models.json:id": {"es": "Identificador del modelo predefinido", "en": "Preset id"},
    "models.json:name": {"es": "Nombre del modelo", "en": "Model name"},
    "models.json:hf_repo": {"es": "Repositorio en Hugging Face", "en": "Hugging Face repository"},
    "models.json:aliases": {"es": "Otros ids de Hugging Face con las mismas formas (variantes base e "
                                  "instruct, ajustes conocidos, resubidas): la petición acepta "
                                  "hf_repo o cualquiera de ellos, sin distinguir mayúsculas; un id "
                                  "desconocido da unknown_preset con los más parecidos en suggestions",
                            "en": "Other Hugging Face ids with the same shapes (base and instruct "
                                  "variants, well-known fine-tunes, re-uploads): the request accepts "
                                  "hf_repo or any of them, case-insensitively; an unknown id gets "
                                  "unknown_preset with the nearest presets in suggestions"},
    "models.json:params_total": {"es": "Parámetros totales exactos (todos los expertos en MoE)",
                                 "en": "Exact total parameters (all experts in MoE)"},
    "models.json:params_active": {"es": "Parámetros por los que pasa un token (expertos "
                                        "activos en MoE)",
                                  "en": "Parameters one token passes through (active experts "
                                        "in MoE)"},
    "models.json:source": {"es": "URL del config.json", "en": "URL of the config.json"},
    "models.json:as_of": {"es": "Fecha de la última comprobación", "en": "Date last checked"},
    "models.json:config": {"es": "Claves de forma del config.json, copiadas tal cual",
                           "en": "Shape keys of the config.json, copied verbatim"},
}


def translate_note(text: str, lang: str) -> str:
    """A validation note or reason in ``lang``: ``"; "``-separated note ids, each ``id`` or
    ``id:argument``, worded by the catalogue's ``validation_note.<id>`` (the CSVs hold ids, so
    a wording is corrected in the catalogue alone)."""
    if not text:
        return ""
    from calc.catalogue import catalogue

    parts = []
    for part in text.split("; "):
        key, _, arg = part.partition(":")
        words = catalogue(lang).message("validation_note." + key)
        parts.append(words.format(arg=arg) if arg else words)
    return "; ".join(parts)


# Validation rows name their card, method and model as the source labelled them, often with
# a remark in brackets ("A100 (40/80GB not stated)"). The name is kept; the remark is shown
# in the page's language. A bracket that is a plain identifier (an instance type, a system
# name) is kept as it is; any other unknown remark stops the build.
LABEL_REMARKS: dict[str, dict[str, str]] = {
    "40/80GB not stated": {"es": "no dice si es de 40 u 80 GB", "en": "40 or 80 GB not stated"},
    "README says A100; 60 GB peak implies 80GB": {
        "es": "el README dice A100; un pico de 60 GB implica la de 80 GB",
        "en": "the README says A100; a 60 GB peak implies the 80 GB one"},
    "implied by 44.8 GB peak": {"es": "lo implica un pico de 44,8 GB",
                                "en": "implied by a 44.8 GB peak"},
    "8/host, NVLink, 400Gb/s RDMA per GPU": {
        "es": "8 por nodo, NVLink, RDMA de 400 Gb/s por GPU",
        "en": "8 per host, NVLink, 400 Gb/s RDMA per GPU"},
    "as labelled": {"es": "según su etiqueta", "en": "as labelled"},
    "Grand Teton": {"es": "Grand Teton", "en": "Grand Teton"},
    "4-bit": {"es": "4 bits", "en": "4-bit"},
    "GPTQ int4 base, not bnb NF4": {"es": "base GPTQ int4, no NF4 de bitsandbytes",
                                    "en": "GPTQ int4 base, not bitsandbytes NF4"},
    "bnb nf4": {"es": "NF4 de bitsandbytes", "en": "bitsandbytes NF4"},
    "bnb.nf4": {"es": "NF4 de bitsandbytes", "en": "bitsandbytes NF4"},
    "pre-training": {"es": "preentrenamiento", "en": "pre-training"},
    "ZeRO paper": {"es": "artículo de ZeRO", "en": "ZeRO paper"},
}

# Words in the names themselves
LABEL_NAMES: dict[str, dict[str, str]] = {
    "generic 7.5B": {"es": "genérico de 7,5B", "en": "generic 7.5B"},
}


def translate_label(text: str, lang: str) -> str:
    """A source's label of a card, model or method, its bracketed remark in ``lang``."""
    import re

    match = re.fullmatch(r"(.*?)\s*\((.*)\)", text)
    name, remark = (match.group(1), match.group(2)) if match else (text, None)
    name = LABEL_NAMES.get(name, {}).get(lang, name)
    if remark is None:
        return name
    if remark in LABEL_REMARKS:
        remark = LABEL_REMARKS[remark][lang]
    elif not re.fullmatch(r"[\w.-]+", remark):
        raise KeyError(f"no {lang!r} translation for the label remark {remark!r}")
    return f"{name} ({remark})"
