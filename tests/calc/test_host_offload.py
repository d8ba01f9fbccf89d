"""CPU offload's host side (calc.host_offload): what each engine's code moves per parameter, and
what the step makes of it (calc.timing.step_breakdown)."""

from __future__ import annotations

import json

import pytest

from calc import comm, gpus, timing
from calc.errors import InputError
from calc.fields import Sharding
from calc.plan import parse_plan_request
from calc.request import parse_estimate_request

DS = {
    "num_gpus": 2,
    "sharding": "zero2",
    "sharding_engine": "deepspeed",
    "cpu_offload": "optimizer",
}


def _req(**keys):
    return parse_estimate_request({"model": "llama-3.2-1b", "method": "full", **keys})


def _counts(req):
    """The host's counts as the time model builds them for ``req``."""
    ho = timing.counts(req, req.sharding).host_offload
    assert ho is not None
    return ho


def test_deepspeed_zero2_counts_as_v0_19_5():
    """One micro-step: the gradients go down once in fp32; the host unscales (8), steps
    DeepSpeedCPUAdam (28) and casts the result to 16 bits (6), which goes up (2)."""
    ho = _counts(_req(**DS, precision="bf16-mixed"))
    assert (ho.cpu, ho.grads_each_micro, ho.grads_last, ho.upload) == (42.0, 0.0, 4.0, 2.0)
    assert ho.grads_hidden


def test_deepspeed_before_0_17_uploads_fp32_and_casts_nothing_on_the_host():
    ho = _counts(_req(**DS, precision="bf16-mixed", offload_host_cast=False))
    assert (ho.cpu, ho.upload) == (36.0, 4.0)


@pytest.mark.parametrize(
    ("sharding", "accum", "each"), [("zero2", 4, 3.5), ("zero3", 4, 4.0), ("zero3", 1, 4.0)]
)
def test_deepspeed_accumulation_round_trips(sharding, accum, each):
    """ZeRO-1/2 save each micro-step's 16-bit gradient to the host and bring it back for the next
    (2 A down, 2 (A - 1) up over A micro-steps); ZeRO-3 does both at every micro-step."""
    req = _req(
        **{**DS, "sharding": sharding},
        precision="bf16-mixed",
        gradient_accumulation_steps=accum,
    )
    ho = _counts(req)
    assert ho.grads_each_micro == pytest.approx(each)
    assert ho.grads_last == 4.0


def test_deepspeed_with_weights_offloaded_uploads_nothing_after_the_step():
    ho = _counts(_req(**{**DS, "sharding": "zero3", "cpu_offload": "optimizer+params"}))
    assert ho.upload == 0.0 and ho.stream == 2.0


@pytest.mark.parametrize(("fused", "cpu"), [(True, 7 * 4 + 3 * 4), (False, 20 * 4 + 3 * 4)])
def test_fsdp_offload_steps_torch_adamw_on_the_host(fused, cpu):
    """FSDP's offload: torch's AdamW on fp32 host shards (fused, or one kernel at a time: torch
    has no foreach path on the CPU) and clip_grad_norm_'s three passes."""
    req = _req(
        num_gpus=2,
        sharding="zero3",
        cpu_offload="optimizer+params",
        precision="bf16-mixed",
        optimizer_fused=fused,
    )
    ho = _counts(req)
    assert ho.cpu == cpu
    assert (ho.grads_last, ho.stream, ho.upload, ho.grads_hidden) == (4.0, 4.0, 0.0, True)


def _plan(**keys):
    req, opts = parse_plan_request(
        {
            "model": "llama-3.2-1b",
            "method": "full",
            "gpu": "a100-80gb-sxm",
            "dataset_tokens": 1e9,
            "micro_batch_size": 8,
            "seq_len": 2048,
            "precision": "bf16-mixed",
            **DS,
            **keys,
        }
    )
    return req, timing.estimate_time(req, opts.gpu, 1e9)


def test_pageable_gradient_copies_add_to_the_step():
    """Pinned, the fp32 gradients' copies hide under a long backward; pageable, each holds the
    host and the GPU waits: the step grows by their whole time over the host link."""
    req, pinned = _plan(offload_pinned=True)
    _, pageable = _plan(offload_pinned=False)
    c = timing.counts(req, Sharding.ZERO2)
    host = comm.host_link_bytes_per_s(gpus.get_gpu("a100-80gb-sxm").pcie_gen)
    copies = c.trainable / 2 * 4 / host
    assert pinned.breakdown.exposed_transfer == pytest.approx(c.trainable / 2 * 2 / host)
    assert pageable.step_seconds - pinned.step_seconds == pytest.approx(copies, rel=1e-9)


def test_cpu_step_reads_host_memory_at_its_rate():
    req, est = _plan()
    shard = timing.counts(req, Sharding.ZERO2).trainable / 2
    assert est.breakdown.optimizer == pytest.approx(shard * 42 / timing.CPU_MEMORY_BYTES_PER_S)


@pytest.mark.parametrize("framework", ["hf-trainer-4", "pytorch-loop-4"])
def test_transformers_4_generation_runs_deepspeed_0_16(framework):
    req = _req(**DS, framework=framework)
    assert (req.offload_pinned, req.offload_host_cast) == (False, False)
    current = _req(**DS)
    assert (current.offload_pinned, current.offload_host_cast) == (True, True)


def test_profiles_leave_the_keys_alone_without_deepspeed_offload():
    """The settings are DeepSpeed's offload's: under FSDP the profile does not set them."""
    req = _req(num_gpus=2, sharding="zero3", cpu_offload="optimizer", framework="hf-trainer-4")
    assert (req.offload_pinned, req.offload_host_cast) == (True, True)


def test_bad_value_is_a_coded_error():
    with pytest.raises(InputError) as err:
        _req(**DS, offload_pinned="sometimes")
    assert err.value.field == "offload_pinned"


@pytest.mark.parametrize("pinned", [True, False])
def test_deepspeed_config_pin_memory_is_read(pinned):
    """A pasted DeepSpeed config says whether the optimizer's offload buffers are page-locked;
    the weights' own pin_memory (ZeRO-3 pins them anyway) is not read; the export writes the
    request's setting back."""
    from calc.config_import import export_config, import_data

    config = {
        "zero_optimization": {
            "stage": 3,
            "offload_optimizer": {"device": "cpu", "pin_memory": pinned},
            "offload_param": {"device": "cpu", "pin_memory": not pinned},
        }
    }
    request = import_data(config, "deepspeed")["request"]
    assert request["offload_pinned"] is pinned
    assert request["cpu_offload"] == "optimizer+params"
    parsed = parse_estimate_request({"model": "llama-3.2-1b", **request})
    assert parsed.offload_pinned is pinned
    exported = json.loads(export_config(request, "deepspeed"))
    assert exported["zero_optimization"]["offload_optimizer"]["pin_memory"] is pinned


def test_deepspeed_fp32_model_casts_nothing():
    """An fp32 model's updated partition goes up as it is, with or without the host-side cast."""
    ho = _counts(_req(**DS, precision="fp32"))
    assert (ho.cpu, ho.upload, ho.grads_last) == (36.0, 4.0, 4.0)


@pytest.mark.parametrize("optimizer", ["adafactor", "sgd-momentum", "adamw-8bit"])
def test_deepspeed_offload_steps_cpu_adam_whatever_the_loop_built(optimizer):
    """accelerate swaps the loop's optimizer for DeepSpeedCPUAdam under DeepSpeed's offload: the
    host's step is Adam's, and the response says so."""
    from calc.request import request_warnings

    req = _req(**DS, precision="bf16-mixed", optimizer=optimizer)
    assert _counts(req).cpu == _counts(_req(**DS, precision="bf16-mixed")).cpu
    assert "deepspeed_offload_runs_cpu_adam" in request_warnings(req)
    assert "deepspeed_offload_runs_cpu_adam" not in request_warnings(
        _req(**DS, precision="bf16-mixed")
    )


def test_deepspeed_offload_holds_adams_states_on_the_host():
    """The swapped-in DeepSpeedCPUAdam keeps two fp32 moments per parameter in host memory,
    whatever the loop's optimizer would have kept: Adafactor's or SGD's host bytes are Adam's."""
    from calc.memory import estimate_dict

    base = {"model": "llama-3.2-1b", "method": "full", **DS, "precision": "bf16-mixed"}
    adam = estimate_dict(base)["host_bytes"]
    for optimizer in ("adafactor", "sgd", "paged-adamw-8bit"):
        assert estimate_dict({**base, "optimizer": optimizer})["host_bytes"] == adam
    fsdp = {**base, "sharding_engine": "fsdp"}
    assert (
        estimate_dict({**fsdp, "optimizer": "sgd"})["host_bytes"]
        < estimate_dict(fsdp)["host_bytes"]
    )
