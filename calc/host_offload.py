"""What CPU offload moves over the host link and through host memory, per parameter of this GPU's
shard, as the stack's own code does it (``cpu_offload`` ``optimizer`` or ``optimizer+params``).

Two engines run it, and they differ in every count:

- **DeepSpeed** (``sharding_engine`` ``deepspeed``, ZeRO-1/2/3 with ``offload_optimizer``), read
  at v0.19.5 (cf443004) and v0.16.9, ``deepspeed/runtime/zero/stage_1_and_2.py`` and
  ``stage3.py``. The optimizer is ``DeepSpeedCPUAdam``: accelerate 1.14 swaps the loop's torch
  or bitsandbytes optimizer for it, whichever it is (``utils/deepspeed.py``
  ``map_pytorch_optim_to_deepspeed``: Adam's class by default, Adagrad and 32-bit Lion aside),
  and DeepSpeed refuses any other with ``zero_force_ds_cpu_optimizer``, on by default since
  v0.8.3. Gradients reach the host in the
  master dtype (fp32), the CPU unscales them and steps, and the updated partition goes back.
- **PyTorch FSDP** (``sharding_engine`` ``fsdp``, FSDP1 ``CPUOffload(offload_params=True)``):
  the sharded flat parameters live on the host, their gradients come down in the parameter's
  dtype (``_flat_param.py`` ``_offload_grad``), the user's torch optimizer steps them there, and
  the next forward uploads them again (:func:`calc.timing.step_breakdown` streams them).

:func:`host_offload` gives the counts; :mod:`calc.timing` divides them by the host link's rate
(``comm.host_link_bytes_per_s``) and by host memory's (:data:`calc.timing.CPU_MEMORY_BYTES_PER_S`).
Two behaviours set by the stack's profile (:mod:`calc.frameworks`) change them:
``offload_pinned`` (DeepSpeed's ``pin_memory``) and ``offload_host_cast`` (DeepSpeed 0.17.0
on). What is not counted: the host threads the CPU optimizer gets (torchrun and accelerate
launch set ``OMP_NUM_THREADS=1`` for several processes per server, the deepspeed launcher
leaves OpenMP's default; no published row tells them apart), and a page-locked copy's rate
against a pageable one's (both at the host link's rate here; a pageable copy is only made
synchronous, :data:`offload_pinned`).
"""

from __future__ import annotations

from dataclasses import dataclass

from . import states as st
from .fields import CpuOffload, Optimizer, Sharding
from .request import EstimateRequest

MASTER_BYTES = st.FP32_BYTES
"""DeepSpeed's host copy of the weights, their gradients and Adam's states are fp32
(``master_weights_and_grads_dtype``, fp32 unless low-precision master weights are asked for)."""

DEEPSPEED_CPU_ADAM_BYTES = 28
"""``DeepSpeedCPUAdam`` per parameter and step: ``csrc/includes/cpu_adam.h`` ``Step_AVX``
(DeepSpeed v0.19.5) reads the fp32 weight, gradient, and both moments (16 bytes) and writes the
weight and both moments back (12 bytes). Since v0.14.3 (#5409) it writes no 16-bit copy of the
weight: the step's caller makes it (:data:`HOST_CAST_BYTES`)."""

HOST_UNSCALE_BYTES = 8
"""DeepSpeed's ``unscale_and_clip_grads`` multiplies the fp32 gradient partition on the host by
``1 / combined_scale`` before the step, whether or not it clips or scales (``grad.data.mul_``,
``stage_1_and_2.py`` lines 2408-2423 and ``stage3.py`` lines 2666-2675 at v0.19.5): a read and a
write of 4 bytes."""

HOST_CAST_BYTES = 6
"""DeepSpeed from v0.17.0 (#7309): after the step the fp32 partition is cast to 16 bits on the
host into ``param_buffer_of_bit16_for_cpu_offload_groups`` (read 4, write 2), and that 16-bit
buffer is uploaded (``stage_1_and_2.py`` lines 2312-2315 at v0.19.5; ``offload_host_cast``).
Before (v0.14.1 to v0.16.9, lines 1890-1891) the fp32 partition went up whole and was cast on
the GPU."""

TORCH_CPU_ADAMW_ELEMENTS = {"fused": 7, "single_tensor": 20}
"""Element reads and writes of torch's AdamW per parameter on CPU tensors (torch 2.13
``torch/optim/adamw.py`` -> ``adam.py``): foreach has no CPU path (``_foreach_utils.py``:
CUDA, XPU, MTIA and private-use devices only), so an unfused optimizer runs
``_single_tensor_adam``: ``param.mul_`` (2), ``exp_avg.lerp_`` (3), ``exp_avg_sq.mul_`` (2),
``addcmul_`` (3), ``sqrt`` into a temporary (2), its division (2), ``add_(eps)`` (2) and
``param.addcdiv_`` (4): 20. The fused CPU kernel (``fused=True``, the Trainer's
``adamw_torch_fused``) reads weight, gradient and both moments and writes three: 7. Elements of
the parameter's dtype (fp32 under mixed precision)."""


@dataclass(frozen=True)
class HostOffload:
    """Per parameter of this GPU's shard, in bytes.

    ``cpu``: what the host's step reads and writes in host memory (optimizer, unscaling,
    clipping, the cast back); ``grads_each_micro``: gradient bytes that cross the host link in
    every micro-step's backward, both ways (DeepSpeed accumulates on the GPU from the host's
    copy, an average over the step's micro-steps); ``grads_last``: what the last micro-step's
    backward sends down on top (the gradients the step reads); ``upload``: the updated
    weights going back after the step (0 where the weights stay on the host); ``stream``:
    what one pass's upload of host-held weights moves per dense parameter
    (``optimizer+params``); ``grads_hidden``: whether the gradient copies can run under the
    backward (page-locked buffers; a copy to pageable memory holds the host thread until it
    ends, so the GPU waits for it)."""

    cpu: float
    grads_each_micro: float
    grads_last: float
    upload: float
    stream: float
    grads_hidden: bool


def _deepspeed(req: EstimateRequest, reg: st.Regime) -> HostOffload:
    """DeepSpeed ZeRO-Offload (see the module's docstring)."""
    a = req.gradient_accumulation_steps
    grad = reg.grad_bytes  # the model's dtype: the gradient as backward leaves it
    # the last backward copies the gradients down in fp32 (async_inplace_copy_grad_to_fp32_
    # buffer_from_gpu: cast on the GPU, then copy_(non_blocking=True)); with accumulation, every
    # micro-step also saves the model-dtype gradient to a host buffer and each after the first
    # brings it back up to add to (stage_1_and_2.py async_accumulate_grad_in_cpu_via_gpu, lines
    # 1489-1533); ZeRO-3 makes that round trip at every micro-step, the first included
    # (stage3.py partition_grads, lines 1855-1897)
    if req.sharding is Sharding.ZERO3:
        each = 2.0 * grad
    elif a > 1:
        each = (a * grad + (a - 1) * grad) / a
    else:
        each = 0.0
    # whatever optimizer the loop built: accelerate hands DeepSpeed a DeepSpeedCPUAdam in its
    # place (request warning deepspeed_offload_runs_cpu_adam)
    cpu = DEEPSPEED_CPU_ADAM_BYTES + HOST_UNSCALE_BYTES
    # a 16-bit model gets its weights back cast on the host (0.17 on) or cast on the GPU; an
    # fp32 model's go up as they are
    cast = req.offload_host_cast and reg.weight_bytes < MASTER_BYTES
    if cast:
        cpu += HOST_CAST_BYTES
    params_held = req.cpu_offload is CpuOffload.OPTIMIZER_PARAMS
    return HostOffload(
        cpu=float(cpu),
        grads_each_micro=each,
        grads_last=float(MASTER_BYTES),
        # with the weights offloaded too, the 16-bit partition the cast fills stays on the host
        # (stage3.py: always pinned) and goes up in the all-gathers: the stream
        upload=0.0 if params_held else float(reg.weight_bytes if cast else MASTER_BYTES),
        stream=float(reg.compute_bytes),
        grads_hidden=req.offload_pinned,
    )


def _fsdp(
    req: EstimateRequest, reg: st.Regime, other_optimizer: float, clip_passes: int
) -> HostOffload:
    """FSDP1's ``CPUOffload(offload_params=True)`` (see the module's docstring): the flat
    parameter's dtype (fp32 under mixed precision, ``MixedPrecision`` casting on the GPU) for the
    gradients that come down (one non-blocking copy into page-locked memory per flat parameter,
    ``_flat_param.py`` lines 968-991) and the weights that go up (lines 1351-1355), and the
    user's torch optimizer on the host."""
    element = reg.master_bytes or reg.weight_bytes
    if req.optimizer is Optimizer.ADAMW:
        kind = "fused" if req.optimizer_fused else "single_tensor"
        cpu = float(TORCH_CPU_ADAMW_ELEMENTS[kind] * element)
    else:
        cpu = other_optimizer
    if req.gradient_clipping:
        cpu += clip_passes * element  # torch's clip_grad_norm_ over the host's gradients
    return HostOffload(
        cpu=float(cpu),
        grads_each_micro=0.0,
        grads_last=float(element),
        # optimizer+params: the weights stay on the host and the next forward streams them in;
        # with the optimizer alone the step's result goes back up
        upload=0.0 if req.cpu_offload is CpuOffload.OPTIMIZER_PARAMS else float(element),
        stream=float(element),
        grads_hidden=True,
    )


def host_offload(
    req: EstimateRequest, reg: st.Regime, other_optimizer: float, clip_passes: int
) -> HostOffload | None:
    """The host side of ``req``'s CPU offload (None without it). ``other_optimizer``: the bytes
    per parameter a torch optimizer other than AdamW moves on the host, and ``clip_passes``
    torch's gradient clipping's passes (:data:`calc.timing.GRAD_CLIP_PASSES`): what
    :mod:`calc.timing` counts for the GPU's own step."""
    if req.cpu_offload is CpuOffload.NONE:
        return None
    if st.deepspeed_zero(req):
        return _deepspeed(req, reg)
    return _fsdp(req, reg, other_optimizer, clip_passes)
