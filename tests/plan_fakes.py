"""A deterministic stand-in for the memory model, used only by the plan tests to check the
plan's own logic (fits, ranking, solvers) with hand-computable numbers. It follows the
estimate contract's field names and nothing else of calc.memory."""

from __future__ import annotations

GIB = 2**30
KIB = 2**10
CONTEXT_BYTES = GIB // 2
ACT_BYTES_PER_TOKEN = 256 * KIB  # without checkpointing; a quarter with it


def states_bytes(
    method: str, optimizer: str, num_gpus: int, sharding: str, cpu_offload: str
) -> int:
    states = {"full": 16 * GIB, "lora": 4 * GIB, "qlora": 2 * GIB}[method]
    if optimizer.endswith("8bit"):
        states -= states // 4
    if num_gpus > 1 and sharding == "zero3":
        states //= num_gpus
    if cpu_offload != "none":
        states //= 2
    return states


def fake_estimate(req) -> dict:
    states = states_bytes(
        req.method.value,
        req.optimizer.value,
        req.num_gpus,
        req.sharding.value,
        req.cpu_offload.value,
    )
    per_token = ACT_BYTES_PER_TOKEN // 4 if req.gradient_checkpointing else ACT_BYTES_PER_TOKEN
    acts = req.micro_batch_size * req.seq_len * per_token
    allocated = states + acts
    return {
        "peak_allocated_bytes": allocated,
        "peak_reserved_bytes": allocated,
        "device_total_bytes": allocated + CONTEXT_BYTES,
        "components": {"states": states, "activations": acts},
        "peak_phase": "backward",
        "params_total": req.model.params_total,
        "params_trainable": req.model.params_total if req.method.value == "full" else 4_194_304,
        "host_bytes": 0,
        "warnings": [],
    }
