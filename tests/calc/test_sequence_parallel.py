"""Ulysses sequence parallelism (``sequence_parallel``): each sequence split over a group of GPUs.

Memory: outside attention a GPU holds ``seq_len / N`` tokens of each sequence, and attention's
saved tensors (head-split, every token) are as large, so with flash attention a GPU of a group
of ``N`` at ``N x L`` tokens holds what one GPU holds at ``L``. Time: the same FLOPs per local
token (attention over the whole sequence), plus the all-to-alls of q, k, v and the output
around every block's attention (:func:`calc.timing.sequence_parallel_traffic`) at the group's
link (:func:`calc.comm.all_to_all_link`); a group of 1 changes nothing."""

from __future__ import annotations

import pytest

from calc import comm, gpus, timing
from calc.config_import import export_config, import_config
from calc.errors import InputError
from calc.lengths import samples_seen
from calc.memory import estimate_dict
from calc.plan import parse_plan_request, plan_dict, step_tokens
from calc.recommend import configurations
from calc.request import Sharding, parse_estimate_request

LONG_8B = {
    "model": "llama-3.1-8b",
    "method": "full",
    "micro_batch_size": 1,
    "attention": "flash",
    "gradient_checkpointing": True,
    "sharding": "zero3",
}


def _estimate(**kw):
    return estimate_dict({**LONG_8B, **kw})


def test_a_group_of_one_is_no_sequence_parallelism():
    plain = _estimate(num_gpus=8, seq_len=8192)
    one = _estimate(num_gpus=8, seq_len=8192, sequence_parallel=1)
    assert one == plain


@pytest.mark.parametrize("sp", [2, 4, 8])
def test_a_gpu_of_a_group_holds_its_share_of_the_sequence(sp):
    """Flash attention keeps per-token tensors only: N GPUs at N x L tokens hold, each, what
    one GPU holds at L (the states are sharded over the same 8 GPUs in both)."""
    split = _estimate(num_gpus=8, seq_len=4096 * sp, sequence_parallel=sp)
    whole = _estimate(num_gpus=8, seq_len=4096)
    assert split["components"] == whole["components"]
    assert split["peak_allocated_bytes"] == whole["peak_allocated_bytes"]


def test_eager_attention_scores_cover_the_whole_sequence():
    """Eager attention's probabilities are ``heads / N x L x L`` per GPU after the all-to-all:
    N times what one GPU at L tokens holds (``local tokens x L keys``), so the split run holds
    more than the plain run at a N-th of the length."""
    kw = {"attention": "eager", "gradient_checkpointing": False, "num_gpus": 4}
    split = _estimate(**kw, seq_len=4096, sequence_parallel=4)
    short = _estimate(**kw, seq_len=1024)
    assert split["peak_allocated_bytes"] > short["peak_allocated_bytes"]


def _req(**kw):
    return parse_estimate_request({**LONG_8B, **kw})


def test_all_to_all_traffic_counts_q_k_v_and_the_output():
    req = _req(num_gpus=8, seq_len=32768, sequence_parallel=8)
    arch = req.model
    local = 32768 // 8
    # 32 query heads, 8 key/value heads (no repeat with a group of 8), bf16, three passes
    # (forward, backward, the checkpointed blocks' recompute)
    per_pass = arch.num_layers * local * 2 * arch.head_dim * (2 * 32 + 2 * 8)
    got = timing.counts(req, Sharding.ZERO3)
    assert got.all_to_all_bytes == 3 * per_pass
    assert got.all_to_all_calls == 3 * arch.num_layers * 4
    assert got.tokens_micro == local


def test_key_value_heads_below_the_group_are_repeated():
    req = _req(num_gpus=16, seq_len=32768, sequence_parallel=16)
    arch = req.model
    local = 32768 // 16
    per_pass = arch.num_layers * local * 2 * arch.head_dim * (2 * 32 + 2 * 16)
    assert timing.counts(req, Sharding.ZERO3).all_to_all_bytes == 3 * per_pass


def test_all_to_all_link_inside_and_across_servers():
    h100 = gpus.get_gpu("h100-sxm")
    nvlink = h100.nvlink_gb_per_s / 2 * 1e9 * comm.LINK_EFFICIENCY
    inside = comm.all_to_all_link(h100, 8)
    assert inside.seconds_per_byte == pytest.approx(7 / 8 / nvlink)
    # 16 GPUs over two servers: half of each tensor crosses the network at an eighth of the
    # server's rate, slower than the 7/16 that stays on NVLink
    net = comm.cluster_network(h100, "roce-400", 8).gb_per_s_per_node * 1e9 * comm.LINK_EFFICIENCY
    across = comm.all_to_all_link(h100, 16, "roce-400")
    assert across.seconds_per_byte == pytest.approx(8 / 16 / (net / 8))
    assert across.latency_s > inside.latency_s


def _time(**kw):
    req, opts = parse_plan_request(
        {**LONG_8B, "gpu": "h100-sxm", "dataset_tokens": 1e9, "network": "roce-400", **kw}
    )
    return timing.estimate_time(req, opts.gpu, 1e9, network=opts.network)


def test_time_adds_the_all_to_alls_whole():
    """Two runs whose every other count is equal: the split one's exposed communication is the
    other's plus the all-to-alls (one GPU, no gradient synchronisation to hide them behind)."""
    req = _req(num_gpus=8, seq_len=32768, sequence_parallel=8)
    c = timing.counts(req, Sharding.NONE)
    h100 = gpus.get_gpu("h100-sxm")
    rates = timing.card_rates(h100, 1)
    kw = dict(num_gpus=1, sharding=Sharding.NONE, cpu_offload=req.cpu_offload, efficiency=0.5)
    link = comm.all_to_all_link(h100, 8)
    with_sp = timing.step_breakdown(c, rates, sp_link=link, **kw)
    without = timing.step_breakdown(c, rates, **kw)
    added = with_sp.exposed_communication - without.exposed_communication
    assert added == pytest.approx(link.seconds(c.all_to_all_bytes, c.all_to_all_calls))
    assert with_sp.compute == without.compute
    # the forward alone (an evaluation) carries the forward's all-to-alls
    assert with_sp.forward_micro - without.forward_micro == pytest.approx(added / 3)


def test_tokens_per_gpu_are_the_local_share():
    split = _time(num_gpus=8, seq_len=32768, sequence_parallel=8)
    assert split.tokens_per_step_per_gpu == 32768 // 8
    # the whole job still trains 8 / 8 = one sequence per step
    req, _ = parse_plan_request(
        {
            **LONG_8B,
            "gpu": "h100-sxm",
            "dataset_tokens": 1e9,
            "num_gpus": 8,
            "seq_len": 32768,
            "sequence_parallel": 8,
        }
    )
    assert step_tokens(req) == 32768
    assert split.tokens_per_step_per_gpu * split.num_gpus == step_tokens(req)


def test_samples_seen_count_data_parallel_replicas():
    req = _req(num_gpus=8, seq_len=8192, sequence_parallel=4, max_steps=10)
    assert req.data_parallel == 2
    assert samples_seen(req) == 10 * 1 * 1 * 2


@pytest.mark.parametrize(
    ("kw", "code"),
    [
        ({"num_gpus": 6, "sequence_parallel": 4}, "sequence_parallel_not_divisor"),
        ({"num_gpus": 2, "sequence_parallel": 4}, "sequence_parallel_not_divisor"),
        # Llama 3.1 8B: 32 query heads
        ({"num_gpus": 64, "sequence_parallel": 64}, "sequence_parallel_heads"),
        # Qwen2.5-14B: 40 query heads
        (
            {"num_gpus": 16, "sequence_parallel": 16, "model": "qwen2.5-14b"},
            "sequence_parallel_heads",
        ),
        # Qwen3-Next: Gated DeltaNet layers
        (
            {"num_gpus": 4, "sequence_parallel": 4, "model": "qwen3-next-80b-a3b"},
            "sequence_parallel_not_modelled",
        ),
        (
            {"num_gpus": 4, "sequence_parallel": 4, "model": "lfm2-1.2b"},
            "sequence_parallel_not_modelled",
        ),
    ],
)
def test_groups_calc_cannot_price_are_refused(kw, code):
    with pytest.raises(InputError) as err:
        _req(seq_len=8192, **kw)
    assert (err.value.code, err.value.field) == (code, "sequence_parallel")


def test_plan_tries_only_gpu_counts_the_group_divides():
    req = _req(num_gpus=8, seq_len=32768, sequence_parallel=4)
    counts = {n for n, _ in configurations(req)}
    assert counts and all(n % 4 == 0 for n in counts)
    out = plan_dict(
        {
            **LONG_8B,
            "gpu": "h100-sxm",
            "dataset_tokens": 1e8,
            "num_gpus": 8,
            "seq_len": 32768,
            "sequence_parallel": 4,
        }
    )
    assert out["memory"]["request"]["sequence_parallel"] == 4
    assert {c["num_gpus"] for c in out["recommendations"]["configs"]} <= counts


def test_padded_lengths_split_too():
    """With a length distribution the replay's micro-batches are the padded lengths, each split
    over the group: the split run's smallest device is below the whole run's."""
    data = {"length_stats": {"mean": 6000, "p90": 14000}, "seq_len": 16384, "num_gpus": 4}
    split = _estimate(**data, sequence_parallel=4)
    whole = _estimate(**data)
    assert split["peak_allocated_bytes"] < whole["peak_allocated_bytes"]
    if "min_device_bytes" in split:
        assert split["min_device_bytes"] < whole["min_device_bytes"]


ALST = """\
distributed_type: DEEPSPEED
deepspeed_config:
  zero_stage: 3
mixed_precision: bf16
num_machines: 1
num_processes: 4
parallelism_config:
  parallelism_config_dp_replicate_size: 1
  parallelism_config_dp_shard_size: 2
  parallelism_config_tp_size: 1
  parallelism_config_sp_size: 2
  parallelism_config_sp_backend: deepspeed
  parallelism_config_sp_seq_length_is_variable: true
  parallelism_config_sp_attn_implementation: flash_attention_2
"""


def test_accelerate_parallelism_config_imports_and_exports_the_group():
    """accelerate's ALST config (``parallelism_config_sp_size`` with the DeepSpeed backend)
    reads as ``sequence_parallel``; the export writes it back, and a request that does not run
    on DeepSpeed gets a note instead."""
    read = import_config(ALST, "accelerate")
    assert read["request"]["sequence_parallel"] == 2
    assert read["request"]["attention"] == "flash"
    again = import_config(export_config({**read["request"], "model": "llama-3.1-8b"}, "accelerate"))
    assert again["request"]["sequence_parallel"] == 2
    fsdp = export_config(
        {"model": "llama-3.1-8b", "num_gpus": 4, "sharding": "zero3", "sequence_parallel": 2},
        "accelerate",
    )
    assert "parallelism_config" not in fsdp and "sequence_parallel 2 not written" in fsdp
    trl = export_config({"model": "llama-3.1-8b", "num_gpus": 4, "sequence_parallel": 2}, "trl")
    assert "# sequence parallel: 2 GPUs per sequence" in trl


@pytest.mark.parametrize(
    ("key", "value", "note"),
    [
        ("parallelism_config_cp_size", 2, "context_parallel_not_modelled"),
        ("parallelism_config_tp_size", 2, "tensor_parallel_not_modelled"),
        ("parallelism_config_sp_backend", "other", "sequence_parallel_backend_not_modelled"),
    ],
)
def test_accelerate_parallelism_calc_does_not_model_is_reported(key, value, note):
    text = ALST.replace(f"  {key}: ", f"  {key}_was: ") + f"  {key}: {value}\n"
    read = import_config(text, "accelerate")
    notes = {k["key"].split(".")[-1]: k.get("note") for k in read["keys"]}
    flagged = "parallelism_config_sp_size" if "backend" in key else key
    assert notes[flagged] == note


def test_xtuner_repeats_key_value_heads_before_its_all_to_all():
    """XTuner repeats k/v to every query head before the all-to-all: the all-to-alls carry
    ``4 heads`` widths per token instead of ``2 heads + 2 kv heads``, and flash attention saves
    the repeated k/v (more memory than DeepSpeed's Ulysses, which keeps the kv heads)."""
    kw = dict(num_gpus=8, seq_len=32768, sequence_parallel=8)
    ulysses = _req(**kw)
    xtuner = _req(**kw, sequence_parallel_repeats_kv=True)
    arch = ulysses.model
    ratio = (4 * arch.num_heads) / (2 * arch.num_heads + 2 * arch.num_kv_heads)
    a, b = (timing.counts(r, Sharding.ZERO3).all_to_all_bytes for r in (ulysses, xtuner))
    assert b == pytest.approx(a * ratio)
    # every block's saved tensors (no checkpointing): the repeated k/v show in each
    saved = dict(kw, gradient_checkpointing=False)
    repeated = _estimate(**saved, sequence_parallel_repeats_kv=True)["components"]["activations"]
    kept = _estimate(**saved)["components"]["activations"]
    assert repeated > kept
    # without sequence parallelism the key changes nothing
    on, off = (
        _estimate(num_gpus=8, seq_len=4096, sequence_parallel_repeats_kv=flag)
        for flag in (True, False)
    )
    assert {**on, "request": None} == {**off, "request": None}


def test_what_to_change_offers_splitting_long_sequences():
    """Llama 3.1 8B LoRA at 128k tokens does not fit one H100; the smallest group that fits is
    offered, each GPU of the request becoming a group (one GPU: the group's GPUs), and on GPUs
    the group divides the accumulation grows by the group instead."""
    base = {**LONG_8B, "method": "lora", "gpu": "h100-sxm", "dataset_tokens": 1e8}
    out = plan_dict({**base, "seq_len": 131072, "num_gpus": 1, "sharding": "none"})
    assert not out["fits_selected_gpu"]
    split = next(s for s in out["suggestions"] if s["action"] == "sequence_parallel")
    k = split["changes"]["sequence_parallel"]
    assert split["fits"] and split["changes"] == {"sequence_parallel": k, "num_gpus": k}
    smaller = plan_dict(
        {**base, "seq_len": 131072, "num_gpus": k // 2, "sequence_parallel": k // 2}
        if k > 2
        else {**base, "seq_len": 131072}
    )
    assert not smaller["fits_selected_gpu"]
    on_eight = plan_dict({**base, "seq_len": 131072, "num_gpus": 8, "sharding": "zero3"})
    keep = next(s for s in on_eight["suggestions"] if s["action"] == "sequence_parallel")
    assert keep["changes"] == {
        "sequence_parallel": keep["changes"]["sequence_parallel"],
        "gradient_accumulation_steps": keep["changes"]["sequence_parallel"],
    }
