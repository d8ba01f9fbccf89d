"""Evaluations and checkpoint saves of a run: when HF Trainer runs them, what a save writes (the
memory model's own bytes), and how they reach the plan's hours and bill."""

from __future__ import annotations

import pytest

import calc
from calc import cost, run_phases, timing
from calc.errors import InputError
from calc.fields import Sharding
from calc.gpus import get_gpu
from calc.request import parse_estimate_request

GB = 10**9


@pytest.mark.parametrize(
    "steps, every, count",
    [
        (1000, 500, 2),  # multiples only: the end is one of them
        (763, 500, 2),  # one multiple, then the end
        (763, 100, 8),
        (763, 0.25, 4),  # a share: every ceil(763 x 0.25) = 191 steps
        (10, 500, 1),  # shorter than one interval: the save at the end
        (0, 100, 0),
    ],
)
def test_occurrences_follow_hf_trainer(steps, every, count):
    assert run_phases.occurrences(steps, every) == count


def _req(**kw):
    return parse_estimate_request({"model": "llama-3.1-8b", **kw})


def test_checkpoint_bytes_count_what_the_memory_model_holds():
    full_bf16 = _req(method="full", precision="bf16-true")
    params = full_bf16.model.params_total
    ckpt = run_phases.checkpoint_bytes(full_bf16, save_only_model=False)
    # bf16 weights, two bf16 AdamW moments
    assert (ckpt.model, ckpt.optimizer) == (2 * params, 4 * params)
    amp = run_phases.checkpoint_bytes(_req(method="full", precision="bf16-mixed"), False)
    # PyTorch AMP: fp32 parameters and fp32 moments
    assert (amp.model, amp.optimizer) == (4 * params, 8 * params)
    zero = _req(method="full", precision="bf16-mixed", num_gpus=8, sharding="zero3")
    ds = run_phases.checkpoint_bytes(zero, False)
    # DeepSpeed: 16-bit module weights; fp32 master copy and moments in the optimizer's partitions
    assert (ds.model, ds.optimizer) == (2 * params, 12 * params)
    assert run_phases.checkpoint_bytes(zero, save_only_model=True).optimizer == 0
    lora = _req(method="lora")
    adapters = run_phases.checkpoint_bytes(lora, False)
    # the adapters only, in fp32 (peft upcasts them on a 16-bit base), and two fp32 moments
    assert adapters.model == 4 * calc.estimate(lora.to_dict())["params_trainable"]
    assert adapters.optimizer == 2 * adapters.model


def test_sharded_states_are_written_by_every_server():
    ckpt = run_phases.CheckpointBytes(model=10 * GB, optimizer=40 * GB)
    one = run_phases.save_seconds(ckpt, Sharding.DDP, 4, 2.0)
    assert one == pytest.approx(25.0)  # rank 0 writes all 50 GB at 2 GB/s
    sharded = run_phases.save_seconds(ckpt, Sharding.ZERO3, 4, 2.0)
    assert sharded == pytest.approx(5.0 + 5.0)  # the states split over four servers' disks


def test_schedule_adds_evaluations_and_saves():
    inputs = cost.CostInputs(
        price_per_gpu_hour=2.0,
        num_gpus=1,
        storage_gb=0.0,
        storage_price_per_gb_month=0.0,
        months_kept=0.0,
        startup_minutes=12.0,
        starts=1,
        experiment_multiplier=1.0,
        interruptible=True,
        checkpoint_interval_minutes=30.0,
        checkpoint_minutes=3.0,
        interruptions_per_day=4.0,
    )
    extras = cost.RunExtras(eval_hours=1.0, save_hours=0.5, save_interval_hours=2.0)
    s = cost.schedule(10.0, inputs, extras)
    # the saves replace the interval checkpoints; interruptions over 10 + 1 + 0.5 hours, each
    # losing half the two hours between saves and a 12-minute restart
    assert (s.eval_hours, s.checkpoint_hours) == (1.0, 0.5)
    assert s.interruptions == pytest.approx(4 * 11.5 / 24)
    assert s.lost_work_hours == pytest.approx(s.interruptions * (1.0 + 0.2))
    assert s.total_hours == pytest.approx(10 + 1 + 0.2 + 0.5 + s.lost_work_hours)
    bill = cost.estimate_cost(10.0, inputs, extras).to_dict()
    assert bill["breakdown"]["evaluation"] == pytest.approx(2.0)


BASE = {
    "model": "llama-3.1-8b",
    "method": "full",
    "gpu": "h100-sxm",
    "num_gpus": 8,
    "sharding": "zero3",
    "dataset_tokens": 1e8,
    "seq_len": 4096,
    "micro_batch_size": 4,
}


def test_plan_without_the_keys_is_unchanged():
    plan = calc.plan_setup(BASE)
    s = plan["time"]["schedule"]
    assert s["eval_hours"] == 0 and s["checkpoint_hours"] == 0
    assert s["total_hours"] == pytest.approx(s["compute_hours"] + s["startup_hours"])
    assert plan["time"]["run_phases"]["saves"] == 0


def test_plan_counts_saves_and_evaluations():
    plan = calc.plan_setup(
        {**BASE, "save_steps": 100, "eval_steps": 0.1, "eval_tokens": 2e6, "eval_batch_size": 4}
    )
    phases = plan["time"]["run_phases"]
    steps = phases["optimizer_steps"]
    per_step = 4 * 4096 * 8  # micro-batch x length x GPUs, no accumulation
    assert steps == -(-int(1e8) // per_step)
    assert phases["saves"] == -(-steps // 100)
    assert phases["evaluations"] == -(-steps // -(-steps // 10))
    estimate_keys = {k: v for k, v in BASE.items() if k not in ("gpu", "dataset_tokens")}
    req = parse_estimate_request(estimate_keys)
    ckpt = run_phases.checkpoint_bytes(req, False)
    assert phases["checkpoint_bytes"] == ckpt.total
    # one server: the sharded states and the model both go through its disk at 1 GB/s
    assert phases["seconds_per_save"] == pytest.approx(ckpt.total / GB)
    s = plan["time"]["schedule"]
    assert s["checkpoint_hours"] == pytest.approx(phases["saves"] * ckpt.total / GB / 3600)
    assert s["eval_hours"] == pytest.approx(
        phases["evaluations"] * phases["seconds_per_evaluation"] / 3600
    )
    # an evaluation is the forward alone: per token well under a third of a training step's
    # time plus a margin for its fixed costs, and more than a tenth of it
    train_per_token = 1 / plan["time"]["tokens_per_second"]
    eval_per_token = phases["seconds_per_evaluation"] / 2e6
    assert train_per_token / 10 < eval_per_token < train_per_token / 2
    plain = calc.plan_setup(BASE)
    assert plan["cost_usd"]["total"] > plain["cost_usd"]["total"]
    assert plan["time_hours"] == pytest.approx(
        plain["time_hours"] + s["checkpoint_hours"] + s["eval_hours"]
    )


def test_eval_forward_matches_the_step_forward():
    """Without checkpointing the training micro-step runs one forward and one backward: its
    forward part, priced alone, is between a quarter and a half of the step."""
    req = parse_estimate_request(
        {"model": "llama-3.1-8b", "gradient_checkpointing": False, "micro_batch_size": 8}
    )
    gpu = get_gpu("h100-sxm")
    step = timing.estimate_time(req, gpu, 1e6)
    each = timing.eval_seconds(req, gpu, step.tokens_per_step_per_gpu, batch_size=8)
    assert 0.25 < each / step.step_seconds < 0.5


@pytest.mark.parametrize(
    "change, code, field",
    [
        ({"eval_steps": -1}, "out_of_range", "eval_steps"),
        ({"save_steps": 0}, "out_of_range", "save_steps"),
        ({"checkpoint_write_gb_per_s": 0}, "out_of_range", "checkpoint_write_gb_per_s"),
        ({"eval_tokens": "many"}, "not_number", "eval_tokens"),
        ({"eval_batch_size": 0}, "not_positive", "eval_batch_size"),
    ],
)
def test_bad_values_are_coded(change, code, field):
    with pytest.raises(InputError) as err:
        calc.plan_setup({**BASE, **change})
    assert (err.value.code, err.value.field) == (code, field)


def test_storage_keeps_the_counted_checkpoints():
    """With saves counted the default disk holds every checkpoint the Trainer keeps (all of
    them unless ``save_total_limit``), each of the counted size."""
    setup = {**BASE, "dataset_tokens": 4e8, "save_steps": 500}
    every = calc.plan_setup(setup)
    phases = every["time"]["run_phases"]
    assert phases["saves"] == 7  # 3,052 steps: six multiples of 500 and the end
    assert every["storage_gb"]["checkpoints"] == pytest.approx(7 * phases["checkpoint_bytes"] / GB)
    two = calc.plan_setup({**setup, "save_total_limit": 2})
    assert two["storage_gb"]["checkpoints"] == pytest.approx(2 * phases["checkpoint_bytes"] / GB)
    assert two["cost_usd"]["breakdown"]["storage"] < every["cost_usd"]["breakdown"]["storage"]
    given = calc.plan_setup({**setup, "storage_gb": 100})
    assert given["storage_gb"] == {"total": 100}


def test_an_interval_without_an_evaluation_set_is_said():
    plan = calc.plan_setup({**BASE, "eval_steps": 100})
    assert "eval_steps_without_eval_tokens" in plan["warnings"]
    assert plan["time"]["schedule"]["eval_hours"] == 0
    given = calc.plan_setup({**BASE, "eval_steps": 100, "eval_tokens": 1e6})
    assert "eval_steps_without_eval_tokens" not in given["warnings"]
