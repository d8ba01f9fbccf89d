"""The block transformers 4.51-4.57 allocate and free while they load a 4-bit model
(calc.load_warmup), and the allocator replay that starts with it (calc.step_events)."""

from __future__ import annotations

import pytest

from calc import allocator as al
from calc import load_warmup as lw
from calc import step_events as se
from calc.memory import estimate_response
from calc.request import parse_estimate_request

GIB = 2**30
UNSLOTH_8B = {"model": "llama-3.1-8b", "method": "qlora", "framework": "unsloth"}
ALPACA = {"mean": 225, "p90": 442, "max": 1585}


def _req(**more: object):
    return parse_estimate_request({**UNSLOTH_8B, **more})


def test_unsloth_profile_loads_with_the_4_52_block() -> None:
    assert _req().load_warmup.value == "transformers-4.52"
    # the profile describes a 4-bit load only; the default stack's transformers 5 sizes the
    # block from the 4-bit bytes
    assert _req(method="lora").load_warmup.value == "none"
    assert parse_estimate_request(
        {"model": "llama-3.1-8b", "method": "qlora"}
    ).load_warmup.value == ("none")


def test_block_is_half_the_16bit_count_capped_by_the_free_memory() -> None:
    req = _req()
    count = req.model.params_total * 2  # counted at 16 bits, the load dtype
    assert lw.block_bytes(req, None) == count // 4 * 2
    free = int(14.5 * GIB)  # a T4 after the CUDA context
    assert lw.block_bytes(req, free) == (free - int(1.2 * GIB)) // 4 * 2
    old = _req(load_warmup="transformers-4.51")
    assert lw.block_bytes(old, free) == int(0.95 * free) // 4 * 2
    # a card whose cap does not bind: the count itself
    assert lw.block_bytes(req, 80 * GIB) == lw.block_bytes(req, None)
    # a loop that loads in fp32 counts 4 bytes a parameter
    assert lw.block_bytes(_req(weights_loaded_16bit=False), None) == 2 * lw.block_bytes(req, None)


@pytest.mark.parametrize(
    "more",
    [{"load_warmup": "none"}, {"method": "lora"}, {"num_gpus": 2, "sharding": "zero3"}],
)
def test_no_block_where_the_load_has_none(more: dict) -> None:
    assert lw.block_bytes(_req(**more), None) == 0


def test_weights_load_into_the_block() -> None:
    """The block stays cached after its free; the weights then take it, so the load reserves
    the block (plus the small pool), not the block and the weights."""
    req = _req()
    block = lw.block_bytes(req, int(14.5 * GIB))
    config = se.allocator_config(req)
    plain = al.replay(se._Builder(req).resident(), al.UNLIMITED, config)
    warmed = al.replay(se._Builder(req).resident(block), al.UNLIMITED, config)
    assert warmed.peak_reserved_bytes >= block > plain.peak_allocated_bytes
    assert warmed.peak_reserved_bytes < plain.peak_reserved_bytes + block // 4
    # while it is allocated the block is the allocated peak (max_memory_allocated keeps it)
    assert warmed.peak_allocated_bytes >= al.round_size(block)


def test_replayed_reserve_grows_but_the_smallest_card_does_not() -> None:
    """The estimate's replay (a large card: the uncapped block) starts from the block; the
    capacity walk replays the load without it (calc.load_warmup)."""
    se.forget_simulations()
    warmed = estimate_response(_req(length_stats=ALPACA, seq_len=2048))
    plain = estimate_response(_req(length_stats=ALPACA, seq_len=2048, load_warmup="none"))
    block = lw.block_bytes(_req(), None)
    assert warmed["allocator"]["simulated_reserved_bytes"] >= block
    assert (
        warmed["allocator"]["simulated_reserved_bytes"]
        > plain["allocator"]["simulated_reserved_bytes"]
    )
    assert warmed["min_device_bytes"] == plain["min_device_bytes"]


@pytest.mark.parametrize(
    "more",
    [
        {"seq_len": 2048, "length_stats": ALPACA, "gradient_accumulation_steps": 4},
        {"seq_len": 4096, "length_stats": {"mean": 1500, "p90": 3000}},
        {"seq_len": 1024, "micro_batch_size": 8, "model": "mistral-7b"},
    ],
)
def test_one_replay_gives_both_figures_on_expandable_segments(more: dict) -> None:
    """With expandable segments the smallest card is the footprint's peak, restarted after the
    block's release: the figure of a replay without the block, while the reserved peak keeps it."""
    req = _req(**more)
    assert req.expandable_segments
    lengths = se.simulated_lengths(req)
    plain = se.StepReplay(req, lengths)
    warmed = se.StepReplay(req, lengths, load_block_bytes=lw.block_bytes(req, None))
    plain_run, warmed_run = plain.replay(), warmed.replay()
    assert warmed.min_capacity(warmed_run) == plain.min_capacity(plain_run)
    assert warmed_run.peak_reserved_bytes >= plain_run.peak_reserved_bytes


def test_the_default_allocator_walks_without_the_block() -> None:
    se.forget_simulations()
    lengths = {"length_stats": ALPACA, "seq_len": 2048, "expandable_segments": False}
    warmed = estimate_response(_req(**lengths))
    plain = estimate_response(_req(**lengths, load_warmup="none"))
    assert warmed["min_device_bytes"] == plain["min_device_bytes"]
    assert (
        warmed["allocator"]["simulated_reserved_bytes"]
        > plain["allocator"]["simulated_reserved_bytes"]
    )
