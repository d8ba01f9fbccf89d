"""calc.allocator: hand-built event sequences with known outcomes, one per rule of torch
2.13.0's ``c10/cuda/CUDACachingAllocator.cpp`` (``DeviceCachingAllocator``), and the step
sequences calc.step_events builds from calc's own counts."""

from __future__ import annotations

import gzip
import json

import pytest

from calc import allocator as al
from calc import memory as mem
from calc.request import parse_estimate_request
from benchmarks.oracle_allocator import recorded_request
from calc.step_events import lengths_of, simulate, step_events
from conftest import REPO_ROOT

MiB = 1024**2


def run(sizes_and_frees, capacity=None, config=al.DEFAULT_CONFIG):
    """Events from a compact list: an int allocates that many bytes (key = position), a
    string ``"-k"`` frees the allocation made at position k."""
    events = []
    for i, item in enumerate(sizes_and_frees):
        if isinstance(item, str):
            events.append(("free", int(item[1:])))
        else:
            events.append(("alloc", i, item))
    return al.replay(events, capacity, config), events


# ---- round_size ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "request_bytes, rounded",
    [
        (1, 512),
        (511, 512),
        (512, 512),
        (513, 1024),
        (MiB + 1, MiB + 512),
    ],
)
def test_requests_round_up_to_512_bytes(request_bytes, rounded):
    """``round_size``: ``kMinBlockSize`` (512) granularity, ``roundup_power2_divisions`` off."""
    assert al.round_size(request_bytes) == rounded


def test_power2_divisions_round_to_the_next_division():
    """``roundup_power2_next_division``: with 4 divisions 1.2e6 B (between 1 MiB and 2 MiB)
    rounds to 1.25 MiB; a power of two stays."""
    cfg = al.AllocatorConfig(roundup_power2_divisions=4)
    assert al.round_size(1_200_000, cfg) == 1_310_720
    assert al.round_size(2 * MiB, cfg) == 2 * MiB


# ---- pools and segment sizes (get_pool, get_allocation_size) --------------------------------


@pytest.mark.parametrize(
    "request_bytes, segment",
    [
        (100, 2 * MiB),  # small pool: 2 MiB segment (kSmallBuffer)
        (MiB, 2 * MiB),  # 1 MiB is still small (size <= kSmallSize)
        (MiB + 1, 20 * MiB),  # large, under 10 MiB: kLargeBuffer
        (10 * MiB - 512, 20 * MiB),
        (10 * MiB, 10 * MiB),  # from kMinLargeAlloc: rounded to 2 MiB (kRoundLarge)
        (11 * MiB + 1, 12 * MiB),
    ],
)
def test_segment_size_by_request(request_bytes, segment):
    result, _ = run([request_bytes])
    assert result.peak_reserved_bytes == segment


def test_small_requests_share_a_small_segment_and_large_ones_do_not():
    """Small and large pools are apart: 1000 small tensors of 1 KiB fill one 2 MiB segment
    (packed by splitting, remainder >= 512 B); a 2 MiB request then opens a 20 MiB one."""
    result, _ = run([1024] * 1000 + [2 * MiB])
    assert result.peak_reserved_bytes == 2 * MiB + 20 * MiB


# ---- splitting (should_split, alloc_found_block) ---------------------------------------------


def test_large_block_is_split_when_the_rest_exceeds_1_mib():
    """Two 4 MiB requests share one 20 MiB segment: the first's remainder (16 MiB) is split
    off and serves the second."""
    result, _ = run([4 * MiB, 4 * MiB])
    assert result.peak_reserved_bytes == 20 * MiB
    assert result.peak_allocated_bytes == 8 * MiB


def test_large_remainder_of_1_mib_or_less_stays_with_the_block():
    """``should_split`` for the large pool: remainder > kSmallSize only. 19.5 MiB gets a
    20 MiB segment and the 0.5 MiB rest is not split: allocated counts the whole block."""
    result, _ = run([19 * MiB + MiB // 2])
    assert result.peak_allocated_bytes == 20 * MiB


def test_best_fit_takes_the_smallest_cached_block():
    """``get_free_block``: lower_bound by size: a 28 MiB request after freeing 30 and 50
    MiB blocks reuses the 30 MiB one; the 50 MiB one then serves a 45 MiB request."""
    result, _ = run([30 * MiB, 50 * MiB, "-0", "-1", 28 * MiB, 45 * MiB])
    assert result.peak_reserved_bytes == 80 * MiB


def test_freed_neighbours_merge_back_into_the_segment():
    """``free_block`` -> ``try_merge_blocks``: two 8 MiB halves of a 20 MiB segment freed
    merge with the rest; a 19 MiB request then fits in the same segment."""
    result, _ = run([8 * MiB, 8 * MiB, "-0", "-1", 19 * MiB])
    assert result.peak_reserved_bytes == 20 * MiB


# ---- max_split_size_mb (oversize blocks) -----------------------------------------------------


def test_oversize_block_does_not_serve_a_smaller_request():
    """With ``max_split_size_mb:40`` a cached 50 MiB block is oversize: a 30 MiB request
    opens its own segment instead of splitting it."""
    cfg = al.AllocatorConfig(max_split_size_bytes=40 * MiB)
    result, _ = run([50 * MiB, "-0", 30 * MiB], config=cfg)
    assert result.peak_reserved_bytes == 80 * MiB
    default, _ = run([50 * MiB, "-0", 30 * MiB])
    assert default.peak_reserved_bytes == 50 * MiB


def test_oversize_block_serves_a_large_request_only_within_20_mib():
    """An oversize request may take a cached oversize block less than ``kLargeBuffer`` larger:
    80 MiB cached serves 65 MiB, not 50 MiB."""
    cfg = al.AllocatorConfig(max_split_size_bytes=40 * MiB)
    near, _ = run([80 * MiB, "-0", 65 * MiB], config=cfg)
    far, _ = run([80 * MiB, "-0", 50 * MiB], config=cfg)
    assert near.peak_reserved_bytes == 80 * MiB
    assert far.peak_reserved_bytes == 130 * MiB


def test_max_split_size_is_at_least_20_mib():
    assert al.AllocatorConfig(max_split_size_bytes=MiB).max_split == 20 * MiB


# ---- free and retry before out of memory -----------------------------------------------------


def test_cached_segments_are_released_and_the_allocation_retried():
    """``malloc``: ``alloc_block`` fails, ``release_cached_blocks`` frees the two cached 20 MiB
    segments, the retried ``alloc_block`` succeeds: 60 MiB is enough for a sequence whose
    cache reaches 90 MiB on an unlimited device."""
    seq = [20 * MiB, 20 * MiB, "-0", "-1", 50 * MiB]
    unlimited, _ = run(seq)
    small, _ = run(seq, capacity=60 * MiB)
    assert unlimited.peak_reserved_bytes == 90 * MiB and unlimited.alloc_retries == 0
    assert small.fits and small.alloc_retries == 1
    assert small.peak_reserved_bytes == 50 * MiB


def test_oversize_blocks_are_released_first_with_max_split_size():
    """``release_available_cached_blocks`` (only with ``max_split_size_mb``): a cached 80 MiB
    oversize block cannot serve 50 MiB (more than 20 MiB larger); it is freed for it before
    the full release (no retry counted). When no oversize block is as large as the request,
    the release falls through to ``release_cached_blocks`` (one retry)."""
    cfg = al.AllocatorConfig(max_split_size_bytes=40 * MiB)
    result, _ = run([80 * MiB, "-0", 50 * MiB], capacity=100 * MiB, config=cfg)
    assert result.fits and result.alloc_retries == 0
    short, _ = run([50 * MiB, "-0", 60 * MiB], capacity=70 * MiB, config=cfg)
    assert short.fits and short.alloc_retries == 1


def test_out_of_memory_when_live_memory_does_not_fit():
    result, _ = run([40 * MiB, 30 * MiB], capacity=60 * MiB)
    assert not result.fits and result.failed_at == 1


def test_a_partly_used_segment_is_not_released():
    """``release_blocks`` frees only blocks with no neighbours: a 20 MiB segment with one of
    its 4 MiB pieces alive stays, so 30 MiB more does not fit in 40 MiB."""
    seq = [4 * MiB, 4 * MiB, "-0", 30 * MiB]
    assert not run(seq, capacity=40 * MiB)[0].fits
    assert run(seq, capacity=50 * MiB)[0].fits


# ---- expandable segments ---------------------------------------------------------------------


def test_expandable_segment_grows_in_20_mib_pages_and_splits_finely():
    """``try_allocate_expandable_block``: a 30 MiB request maps two 20 MiB pages; the 10 MiB
    rest serves a 4 MiB request (``should_split``: remainder >= 512 B with expandable
    segments); a 30 MiB request after freeing the first reuses its space."""
    cfg = al.AllocatorConfig(expandable_segments=True)
    result, _ = run([30 * MiB, 4 * MiB, "-0", 30 * MiB], config=cfg)
    assert result.peak_reserved_bytes == 40 * MiB


def test_expandable_segment_grows_past_a_free_tail_instead_of_a_new_segment():
    """Where a fixed segment leaves a gap (24 MiB then 26 MiB after freeing the first: two
    segments, 50 MiB), the expandable segment maps only the pages the growth needs."""
    cfg = al.AllocatorConfig(expandable_segments=True)
    seq = [24 * MiB, "-0", 26 * MiB]
    assert run(seq)[0].peak_reserved_bytes == 50 * MiB
    assert run(seq, config=cfg)[0].peak_reserved_bytes == 40 * MiB


def test_expandable_segment_unmaps_free_pages_before_out_of_memory():
    """``release_blocks`` -> ``unmap_block``: free whole pages go back to the device."""
    cfg = al.AllocatorConfig(expandable_segments=True)
    seq = [40 * MiB, 20 * MiB, "-0", 2 * MiB]  # small pool needs one 2 MiB page
    assert run(seq, capacity=60 * MiB, config=cfg)[0].fits


# ---- min_device_bytes ------------------------------------------------------------------------


def test_min_device_bytes_counts_the_release_and_the_outside_memory():
    _, events = run([20 * MiB, 20 * MiB, "-0", "-1", 50 * MiB])
    assert al.min_device_bytes(events) == 50 * MiB
    assert al.min_device_bytes(events, outside_allocator_bytes=512 * MiB) == 562 * MiB


def test_min_device_bytes_is_the_smallest_capacity_that_fits():
    _, events = run([4 * MiB, 4 * MiB, "-0", 30 * MiB, 6 * MiB, "-1", 40 * MiB])
    need = al.min_device_bytes(events)
    assert al.replay(events, need).fits
    assert not al.replay(events, need - al.ROUND_LARGE_BYTES).fits


# ---- the step sequence from calc's counts ----------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        {"model": "llama-3.1-8b", "method": "lora"},
        {"model": "llama-3.1-8b", "method": "qlora", "micro_batch_size": 2},
        {
            "model": "qwen2.5-0.5b",
            "method": "full",
            "gradient_checkpointing": False,
            "seq_len": 512,
        },
        {"model": "llama-3.2-1b", "method": "full", "gradient_accumulation_steps": 2},
    ],
)
def test_step_sequence_reaches_calcs_allocated_peak(body):
    """The synthetic sequence holds calc's own components: its replayed allocated peak is
    calc's within 1 % (the rest is 512-byte rounding and unsplit remainders)."""
    req = parse_estimate_request(body)
    est = mem.estimate_request(req)
    events = step_events(req, [req.seq_len] * 2 * req.gradient_accumulation_steps)
    result = al.replay(events)
    assert result.peak_allocated_bytes == pytest.approx(est.peak_allocated_bytes, rel=0.01)
    assert result.peak_reserved_bytes >= result.peak_allocated_bytes


def test_step_sequence_frees_all_but_the_resident_states():
    req = parse_estimate_request({"model": "llama-3.2-1b", "method": "lora"})
    events = step_events(req, [256, 512])
    live = set()
    for ev in events:
        if ev[0] == "alloc":
            live.add(ev[1])
        else:
            live.discard(ev[1])
    last_alloc = {ev[1]: ev[2] for ev in events if ev[0] == "alloc"}
    resident = sum(last_alloc[k] for k in live)
    est = mem.estimate_request(req)
    states = (
        est.components["weights"] + est.components["lora_weights"] + est.components["optimizer"]
    )
    assert resident == states


def test_a_longer_batch_after_shorter_ones_reserves_more_than_alone():
    """Variable lengths fragment the cache: the blocks cached for short batches do not serve
    the longer one's tensors, so reserved exceeds the longest batch's own replay."""
    req = parse_estimate_request({"model": "llama-3.2-1b", "method": "lora", "seq_len": 4096})
    alone = al.replay(step_events(req, [4096, 4096])).peak_reserved_bytes
    mixed = al.replay(step_events(req, [700, 1500, 2900, 4096])).peak_reserved_bytes
    assert mixed > alone


def test_micro_batch_tokens_become_padded_lengths():
    req = parse_estimate_request({"model": "llama-3.2-1b", "method": "lora", "micro_batch_size": 4})
    assert lengths_of(req, [4096, 4097, 8]) == [1024, 1025, 2]


def test_simulate_adds_the_memory_outside_the_allocator():
    """min_device_bytes = smallest allocator capacity + CUDA context (+ NCCL buffers on
    several GPUs, + a driver reserve when given); the capacity runs the sequence and is at
    most the unlimited replay's reserved peak."""
    one = parse_estimate_request({"model": "llama-3.2-1b", "method": "lora"})
    out = simulate(one, [2048, 1024])
    assert out.min_device_bytes == out.min_allocator_bytes + mem.CUDA_CONTEXT_BYTES
    assert out.min_allocator_bytes <= out.simulated_reserved_bytes
    assert al.replay(step_events(one, [2048, 1024]), out.min_allocator_bytes).fits
    two = parse_estimate_request(
        {"model": "llama-3.2-1b", "method": "lora", "num_gpus": 2, "sharding": "ddp"}
    )
    out2 = simulate(two, driver_reserve_bytes=300 * MiB)
    assert out2.min_device_bytes == (
        out2.min_allocator_bytes + mem.CUDA_CONTEXT_BYTES + mem.NCCL_BUFFER_BYTES + 300 * MiB
    )
    assert set(out2.to_dict()) >= {"simulated_reserved_bytes", "min_device_bytes"}


def test_a_smaller_card_needs_less_than_the_cache_of_a_large_one():
    """The release-and-retry rule: with lengths that vary, the device that suffices is below
    the reserved peak an unlimited card shows."""
    req = parse_estimate_request({"model": "llama-3.2-1b", "method": "lora", "seq_len": 4096})
    out = simulate(req, [700, 1500, 2900, 4096, 1200, 4000])
    assert out.min_allocator_bytes < out.simulated_reserved_bytes


SEQUENCES = sorted((REPO_ROOT / "validation" / "allocator_sequences").glob("*.json.gz"))


@pytest.mark.parametrize("path", SEQUENCES, ids=lambda p: p.name.removesuffix(".json.gz"))
def test_synthetic_sequence_against_the_oracles_recorded_one(path):
    """calc's synthetic sequence reserves what the oracle's recorded sequence (real order and
    sizes of a transformers + peft step) reserves through the same allocator: within 5 % on
    the sequences its split was read against, 15 % on the held-out ones."""
    with gzip.open(path, "rt") as handle:
        data = json.load(handle)
    real = al.replay([tuple(e) for e in data["events"]])
    req = parse_estimate_request(recorded_request(data))
    synthetic = al.replay(step_events(req, data["lengths"] or [req.seq_len] * data["steps"]))
    bound = 0.05 if data["set"] == "shaping" else 0.15
    assert synthetic.peak_reserved_bytes == pytest.approx(real.peak_reserved_bytes, rel=bound)
    assert synthetic.peak_allocated_bytes == pytest.approx(real.peak_allocated_bytes, rel=0.01)


def test_recorded_sequences_are_there():
    assert len(SEQUENCES) == 16
