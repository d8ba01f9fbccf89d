"""Training time: FLOPs per token for the method, divided by what the GPUs achieve.

    time_s = dataset_tokens * epochs * flops_per_token
             / (num_gpus * peak_bf16_dense_flops * utilisation * qlora_speed_factor
                * batch_saturation * scaling_efficiency)

Every factor is explicit, shown in the plan response and editable through the request
(``mfu``, ``qlora_speed_factor``, ``scaling_efficiency``). ``benchmarks/validate_throughput.py``
checks the result against the published tokens/second in ``measured_throughput.csv``.
"""

from __future__ import annotations

from dataclasses import dataclass

from .arch import ModelArch

# --- FLOPs -----------------------------------------------------------------------------------


def matmul_params(arch: ModelArch) -> int:
    """Parameters one token multiplies through: the active block linears (MoE: top-k experts),
    norms and the lm_head matmul (computed even when it shares the embedding matrix). The
    embedding lookup is a gather, not a matmul, so it costs no FLOPs (Kaplan et al. 2020,
    arXiv:2001.08361, sec. 2.1 counts non-embedding parameters for the same reason)."""
    return (arch.params_active - arch.embedding_params - arch.lm_head_params
            + arch.vocab_size * arch.hidden_size)


CAUSAL_ATTENTION_FRACTION = {"flash": 0.5, "sdpa": 0.5, "eager": 1.0}
"""Share of the score/value matmuls actually computed. Fused causal kernels (FlashAttention-2,
Dao 2023, arXiv:2307.08691, sec. 3.1; PyTorch SDPA dispatches to them) skip the blocks above
the diagonal, about half; eager attention computes the full matrix and masks it."""


def attention_forward_flops_per_token(arch: ModelArch, seq_len: int, attention: str = "eager") -> float:
    """Score and value matmuls of self-attention, forward, per token:
    ``4 * layers * seq_len * heads * head_dim`` (2 FLOPs per multiply-add, QK^T and AV) for the
    full matrix (PaLM's MFU count, Chowdhery et al. 2022, arXiv:2204.02311, app. B), times the
    computed share :data:`CAUSAL_ATTENTION_FRACTION` for ``attention``."""
    full = 4.0 * arch.num_layers * seq_len * arch.num_heads * arch.head_dim
    return full * CAUSAL_ATTENTION_FRACTION[attention]


@dataclass(frozen=True)
class FlopsPerToken:
    """Training FLOPs per token, split by where they come from."""

    forward: float
    backward: float
    recompute: float

    @property
    def total(self) -> float:
        return self.forward + self.backward + self.recompute

    def to_dict(self) -> dict:
        return {"forward": self.forward, "backward": self.backward,
                "recompute": self.recompute, "total": self.total}


def training_flops_per_token(arch: ModelArch, method: str, seq_len: int,
                             gradient_checkpointing: bool, trainable_params: int,
                             attention: str = "eager") -> FlopsPerToken:
    """FLOPs one training token costs.

    - Forward: ``2*N`` for the matmuls (N = :func:`matmul_params`) plus attention.
    - Backward, full fine-tuning: gradients of activations and of weights, ``2 * forward``, so
      the whole step is the familiar ``6*N`` (Kaplan et al. 2020, sec. 2.1).
    - Backward, LoRA/QLoRA: the frozen base needs activation gradients only (``2*N``), no weight
      gradients; the adapters (``A`` trainable parameters) cost ``6*A`` in all (Hu et al. 2021,
      arXiv:2106.09685, sec. 4: no gradients for frozen weights). Attention backward is still
      twice its forward (Q, K and V all need gradients).
    - Gradient checkpointing recomputes the forward once (Chen et al. 2016, arXiv:1604.06174).
    """
    n = float(matmul_params(arch))
    attn = attention_forward_flops_per_token(arch, seq_len, attention)
    if method == "full":
        fwd = 2.0 * n + attn
        bwd = 2.0 * fwd
    else:
        a = float(trainable_params)
        fwd = 2.0 * n + 2.0 * a + attn
        bwd = 2.0 * n + 4.0 * a + 2.0 * attn
    recompute = fwd if gradient_checkpointing else 0.0
    return FlopsPerToken(forward=fwd, backward=bwd, recompute=recompute)


# --- achievable utilisation --------------------------------------------------------------------

UTILISATION_BY_CLASS = {
    # Fraction of dense BF16 peak achieved on the FLOPs actually executed (recomputation included),
    # one GPU, large micro-steps, full fine-tuning. Read from measured_throughput.csv
    # (see benchmarks/validate_throughput.py for the per-row check):
    "a100": 0.55,  # torchtune A100 rows 17-23: 53-72 %; Qwen HF Trainer A100 rows 59-65, 70: 31-59 %;
    #                torchtitan A100 MFU 50-61 %; llm-foundry A100 HFU 59-77 % (tuned pre-training)
    "hopper": 0.40,  # torchtitan H100 bf16 34-39 % (rows 111, 114); llm-foundry H100 HFU 46-57 %
    "gddr": 0.50,  # torchtune RTX 4090 rows 2, 4, 8, 10, 12 imply 60-85 % but are flagged optimistic
    #                (padded tokens counted); 0.50 is the conservative reading
    "blackwell": 0.35,  # no fine-tuning row in the data: Hopper's figure lowered for younger kernels (assumption)
    "cdna3": 0.30,  # no row in the data: ROCm kernels trail CUDA (seed 004); assumption
}

METHOD_UTILISATION_FACTOR = {
    # LoRA runs the same big matmuls plus small adapter matmuls and element-wise work:
    # torchtune rows 22 -> 24 (Llama-3.2-3B, A100, same flags) give 0.89 of full FT's utilisation.
    "full": 1.0,
    "lora": 0.9,
    "qlora": 0.9,
}

QLORA_SPEED_FACTOR = 0.65
"""Throughput of QLoRA relative to LoRA on the same setup (bitsandbytes NF4 dequantisation on
every matmul). LitGPT pairs on A10G / A100 (measured_throughput.csv rows 77/78, 79/80, 81/82,
87/88, 89/90: 0.61, 0.72, 0.69, 0.64, 0.50; median 0.64) and Vertex AI rows 91/92 (0.60).
torchtune's compiled NF4 (rows 24/25) reaches 0.98: set ``qlora_speed_factor`` to match your stack."""

BATCH_SATURATION_TOKENS = 256
"""Tokens per micro-step per GPU at which utilisation is half its large-batch value, for a
model of hidden size 4096: ``saturation = T / (T + T0)``, T = micro_batch_size * seq_len,
``T0 = 256 * (4096 / hidden_size)**2``. Fitted on the Qwen-7B LoRA sequence sweep on one A100
(measured_throughput.csv rows 62-65: seq 256 ... 8192 at micro-batch 1). The 1/hidden^2 scaling
is physical: per layer, matmul work grows as ``T * hidden^2`` while launch and element-wise
overheads do not; the Qwen-1.8B rows (59-61, hidden 2048) check it."""

SATURATION_REFERENCE_HIDDEN = 4096


def batch_saturation(micro_batch_size: int, seq_len: int, hidden_size: int = SATURATION_REFERENCE_HIDDEN) -> float:
    tokens = micro_batch_size * seq_len
    half = BATCH_SATURATION_TOKENS * (SATURATION_REFERENCE_HIDDEN / hidden_size) ** 2
    return tokens / (tokens + half)


# --- multi-GPU scaling -------------------------------------------------------------------------

GPUS_PER_NODE = 8

SCALING_EFFICIENCY = {
    # (replicated | sharded, nvlink | pcie, full | peft) -> per-GPU throughput relative to one GPU
    # replicated = DDP / ZeRO-1 / ZeRO-2 (gradients all-reduced); sharded = ZeRO-3 / FSDP FULL_SHARD
    # (weights all-gathered in forward and backward, so far more traffic).
    ("replicated", "nvlink", "full"): 0.95,  # torchtitan 8 -> 128 H100 keeps 0.97 (rows 111, 114)
    ("replicated", "nvlink", "peft"): 0.97,  # adapter gradients are tiny
    ("replicated", "pcie", "full"): 0.75,  # assumption: full gradients over PCIe, partly overlapped
    ("replicated", "pcie", "peft"): 0.95,  # adapter gradients are tiny
    ("sharded", "nvlink", "full"): 0.90,  # llm-foundry 8-GPU FSDP HFU close to single-node tuned runs
    ("sharded", "nvlink", "peft"): 0.92,  # torchtune 70B LoRA 8xA100 (row 14) ~0.92; Qwen-72B ZeRO-3 (row 72) ~0.94
    ("sharded", "pcie", "full"): 0.50,  # torchtune 4x RTX 4090 FSDP full FT (rows 4/5, aggregate reading) ~0.49
    ("sharded", "pcie", "peft"): 0.55,  # frozen weights are still all-gathered; assumption near the full-FT figure
}

INTER_NODE_FACTOR = 0.90
"""Extra factor once a job spans nodes (more than 8 GPUs): torchtitan H100 8 -> 128 GPUs 0.97
(rows 111/114) on a fast fabric; Qwen's 2x2 A100 LoRA (row 69) only 0.56 of one GPU on a slow
one; 0.90 sits between (assumption)."""

CPU_OFFLOAD_FACTOR = {
    # ZeRO-Offload (Ren et al. 2021, arXiv:2101.06840) keeps most throughput only at large batch:
    # the optimizer step moves to the CPU; parameter offload (ZeRO-Infinity) streams weights over
    # PCIe every step. Assumptions, applied to full fine-tuning (PEFT optimizer states are tiny).
    ("optimizer", "full"): 0.80,
    ("optimizer", "peft"): 1.0,
    ("optimizer+params", "full"): 0.50,
    ("optimizer+params", "peft"): 0.60,
}


def sharding_family(sharding: str) -> str:
    return "sharded" if sharding == "zero3" else "replicated"


def scaling_efficiency(num_gpus: int, sharding: str, link: str, method: str) -> float:
    """Per-GPU throughput of ``num_gpus`` cards relative to one (1.0 for one GPU). ``link`` is
    ``"nvlink"`` or ``"pcie"`` (see :meth:`calc.gpus.Gpu.link_for`). ``n * efficiency`` never
    decreases with n over the counts calc offers, so more GPUs are never slower."""
    if num_gpus <= 1:
        return 1.0
    kind = "full" if method == "full" else "peft"
    eff = SCALING_EFFICIENCY[(sharding_family(sharding), link, kind)]
    if num_gpus > GPUS_PER_NODE:
        eff *= INTER_NODE_FACTOR
    return eff


def cpu_offload_factor(cpu_offload: str, method: str) -> float:
    if cpu_offload == "none":
        return 1.0
    return CPU_OFFLOAD_FACTOR[(cpu_offload, "full" if method == "full" else "peft")]


# --- the time estimate -------------------------------------------------------------------------


@dataclass(frozen=True)
class TimeInputs:
    """What the time model needs, already validated."""

    arch: ModelArch
    method: str
    seq_len: int
    micro_batch_size: int
    gradient_checkpointing: bool
    trainable_params: int
    num_gpus: int
    sharding: str
    cpu_offload: str
    total_tokens: float
    attention: str = "sdpa"


@dataclass(frozen=True)
class TimeEstimate:
    flops_per_token: FlopsPerToken
    peak_flops_per_gpu: float
    utilisation: float
    qlora_speed_factor: float
    batch_saturation: float
    scaling_efficiency: float
    cpu_offload_factor: float
    num_gpus: int
    total_tokens: float

    @property
    def effective_utilisation(self) -> float:
        return (self.utilisation * self.qlora_speed_factor * self.batch_saturation
                * self.scaling_efficiency * self.cpu_offload_factor)

    @property
    def tokens_per_second_per_gpu(self) -> float:
        return self.peak_flops_per_gpu * self.effective_utilisation / self.flops_per_token.total

    @property
    def tokens_per_second(self) -> float:
        return self.tokens_per_second_per_gpu * self.num_gpus

    @property
    def compute_hours(self) -> float:
        return self.total_tokens / self.tokens_per_second / 3600.0

    def to_dict(self) -> dict:
        return {
            "compute_hours": self.compute_hours,
            "total_tokens": self.total_tokens,
            "tokens_per_second": self.tokens_per_second,
            "tokens_per_second_per_gpu": self.tokens_per_second_per_gpu,
            "flops_per_token": self.flops_per_token.to_dict(),
            "peak_flops_per_gpu": self.peak_flops_per_gpu,
            "factors": {
                "mfu": self.utilisation,
                "qlora_speed_factor": self.qlora_speed_factor,
                "batch_saturation": self.batch_saturation,
                "scaling_efficiency": self.scaling_efficiency,
                "cpu_offload_factor": self.cpu_offload_factor,
                "effective_utilisation": self.effective_utilisation,
            },
        }


def default_mfu(utilisation_class: str, method: str) -> float:
    """Default utilisation for a card class and method (shown in the response, editable as ``mfu``)."""
    return UTILISATION_BY_CLASS[utilisation_class] * METHOD_UTILISATION_FACTOR[method]


def estimate_time(inputs: TimeInputs, peak_flops_per_gpu: float, utilisation: float, link: str,
                  qlora_speed_factor: float | None = None,
                  scaling_override: float | None = None) -> TimeEstimate:
    """Training time on ``inputs.num_gpus`` cards of ``peak_flops_per_gpu`` each.
    ``utilisation`` is the single-GPU, large-batch utilisation (:func:`default_mfu` or the
    request's ``mfu``); QLoRA, batch-size, multi-GPU and offload factors multiply it."""
    fpt = training_flops_per_token(inputs.arch, inputs.method, inputs.seq_len,
                                   inputs.gradient_checkpointing, inputs.trainable_params,
                                   inputs.attention)
    qf = 1.0
    if inputs.method == "qlora":
        qf = QLORA_SPEED_FACTOR if qlora_speed_factor is None else qlora_speed_factor
    scale = (scaling_efficiency(inputs.num_gpus, inputs.sharding, link, inputs.method)
             if scaling_override is None or inputs.num_gpus <= 1 else scaling_override)
    return TimeEstimate(
        flops_per_token=fpt, peak_flops_per_gpu=peak_flops_per_gpu, utilisation=utilisation,
        qlora_speed_factor=qf,
        batch_saturation=batch_saturation(inputs.micro_batch_size, inputs.seq_len, inputs.arch.hidden_size),
        scaling_efficiency=scale, cpu_offload_factor=cpu_offload_factor(inputs.cpu_offload, inputs.method),
        num_gpus=inputs.num_gpus, total_tokens=inputs.total_tokens,
    )


__all__ = ["BATCH_SATURATION_TOKENS", "FlopsPerToken", "QLORA_SPEED_FACTOR", "TimeEstimate",
           "TimeInputs", "attention_forward_flops_per_token", "batch_saturation", "default_mfu",
           "estimate_time", "matmul_params", "scaling_efficiency", "training_flops_per_token"]
