"""Hybrid sharding (``shard_group``): ZeRO shards inside groups and replicates across them.

Memory: a job of ``n`` GPUs in groups of ``g`` holds per GPU what a job of ``g`` GPUs holds.
Time: the ZeRO collectives run inside the group, and the reduced gradient shard is all-reduced
between the ``n / g`` replicas over the network's share each shard gets
(:func:`calc.comm.replica_link`); one group of all GPUs is the plain sharding, to the byte."""

from __future__ import annotations

import pytest

from calc import comm, gpus, timing
from calc.errors import InputError
from calc.memory import estimate_dict
from calc.plan import parse_plan_request, plan_dict
from calc.request import Sharding, shard_size

FULL_8B = {"model": "llama-3.1-8b", "method": "full", "micro_batch_size": 1, "seq_len": 2048}
STATE_KEYS = ("weights", "gradients", "optimizer", "gathered_weights")


def _estimate(**kw):
    return estimate_dict({**FULL_8B, **kw})


@pytest.mark.parametrize("sharding", ["zero1", "zero2", "zero3"])
def test_states_per_gpu_are_those_of_one_group(sharding):
    hybrid = _estimate(num_gpus=32, sharding=sharding, shard_group=8)["components"]
    group = _estimate(num_gpus=8, sharding=sharding)["components"]
    flat = _estimate(num_gpus=32, sharding=sharding)["components"]
    for key in STATE_KEYS:
        assert hybrid[key] == group[key], key
    # fewer GPUs share a copy: more per GPU than sharding over all 32
    assert hybrid["optimizer"] == 4 * flat["optimizer"]


def test_one_group_of_all_is_the_plain_sharding():
    plain = _estimate(num_gpus=16, sharding="zero3")
    whole = _estimate(num_gpus=16, sharding="zero3", shard_group=16)
    for key in ("components", "peak_allocated_bytes", "peak_reserved_bytes"):
        assert whole[key] == plain[key]


def test_shard_size_falls_back_to_the_job_when_the_group_does_not_fit():
    assert shard_size(64, 8) == 8
    assert shard_size(64, None) == 64
    assert shard_size(4, 8) == 4  # a job smaller than a group: one group
    assert shard_size(12, 8) == 12  # the planner's other counts: sharded over all


def test_group_not_dividing_the_gpus_is_refused():
    with pytest.raises(InputError) as err:
        _estimate(num_gpus=12, sharding="zero3", shard_group=8)
    assert (err.value.code, err.value.field) == ("shard_group_not_divisor", "shard_group")
    # a group of the job's size or more is one group (HYBRID_SHARD on one server)
    one = _estimate(num_gpus=4, sharding="zero3", shard_group=8)
    assert one["components"] == _estimate(num_gpus=4, sharding="zero3")["components"]


def test_accelerate_hybrid_shard_imports_a_group_of_one_server():
    from calc.config_import import import_config

    text = (
        "distributed_type: FSDP\nnum_processes: 16\nfsdp_config:\n"
        "  fsdp_sharding_strategy: HYBRID_SHARD\n"
    )
    out = import_config(text, "accelerate")
    assert out["request"]["sharding"] == "zero3"
    assert out["request"]["shard_group"] == 8


def test_group_without_zero_warns():
    out = _estimate(num_gpus=16, sharding="ddp", shard_group=8)
    assert "shard_group_ignored" in out["warnings"]
    assert (
        "shard_group_ignored"
        not in _estimate(num_gpus=16, sharding="zero3", shard_group=8)["warnings"]
    )


def test_replica_link_is_each_shards_share_of_the_server_network():
    a100 = gpus.get_gpu("a100-80gb-sxm")
    net = comm.NETWORKS["roce-400"]  # 400 Gb/s per 8-GPU server
    usable = net.gb_per_s_per_node * 1e9 * comm.LINK_EFFICIENCY
    one_per_server = comm.replica_link(a100, 64, 8, "roce-400", 8)
    assert one_per_server.kind == "network"
    assert one_per_server.bytes_per_s == pytest.approx(usable / 8)
    assert one_per_server.nodes == 8  # one server per replica
    # groups of 16 span two servers: 8 shards per server share its network
    assert comm.replica_link(a100, 64, 16, "roce-400", 8).bytes_per_s == pytest.approx(usable / 8)
    # groups of 4: two replicas' GPUs per server, 4 shards share it
    assert comm.replica_link(a100, 64, 4, "roce-400", 8).bytes_per_s == pytest.approx(usable / 4)
    # inside one server: the job's own link
    assert comm.replica_link(a100, 8, 4) == comm.collective_link(a100, 8)


def _step(**kw):
    req, opts = parse_plan_request(
        {
            **FULL_8B,
            "gpu": "a100-80gb-sxm",
            "dataset_tokens": 1e9,
            "gradient_checkpointing": True,
            "network": "roce-400",
            **kw,
        }
    )
    return timing.estimate_time(req, opts.gpu, 1e9, network=opts.network).breakdown


def test_time_of_one_group_of_all_is_the_plain_sharding():
    assert _step(num_gpus=64, sharding="zero3", shard_group=64) == _step(
        num_gpus=64, sharding="zero3"
    )


def test_zero3_gathers_stay_inside_the_server():
    """Groups of one server gather over NVLink: the forward's exposed all-gather is that of an
    8-GPU job, while a flat ZeRO-3 over 8 servers gathers over the network."""
    hybrid = _step(num_gpus=64, sharding="zero3", shard_group=8)
    one_server = _step(num_gpus=8, sharding="zero3")
    flat = _step(num_gpus=64, sharding="zero3")
    assert hybrid.forward_micro == pytest.approx(one_server.forward_micro)
    assert hybrid.forward_micro < flat.forward_micro
    # the gradient all-reduce between replicas comes on top of the group's reduce-scatter
    assert hybrid.exposed_communication > one_server.exposed_communication


def test_zero1_replica_all_reduce_counts_its_bytes():
    """ZeRO-1 in groups of 8 on 8 servers, short samples (nothing hides the sync past the last
    backward): a 4x faster network (the same RDMA step latency) takes off the step exactly the
    all-reduce of each 1/8 gradient shard between the 8 replicas at each rate."""
    kw = {"num_gpus": 64, "sharding": "zero1", "shard_group": 8, "seq_len": 256}
    slow = _step(**kw, network="roce-400")
    fast = _step(**kw, network="infiniband-1600")
    a100 = gpus.get_gpu("a100-80gb-sxm")
    req, _ = parse_plan_request({**FULL_8B, "gpu": "a100-80gb-sxm", "dataset_tokens": 1e9})
    grads = timing.counts(req, Sharding.ZERO1).grad_params * req_grad_bytes(req)
    shard = comm.all_reduce_bytes(grads / 8, 8)
    expected = sum(
        sign * shard / comm.replica_link(a100, 64, 8, network, 8).bytes_per_s
        for sign, network in ((1, "roce-400"), (-1, "infiniband-1600"))
    )
    assert slow.exposed_communication - fast.exposed_communication == pytest.approx(expected)
    assert slow.compute == fast.compute


def req_grad_bytes(req) -> float:
    from calc import states

    return states.request_regime(req).grad_bytes


def test_plan_tries_other_gpu_counts_with_a_group():
    out = plan_dict(
        {
            **FULL_8B,
            "gpu": "h100-sxm",
            "dataset_tokens": 1e9,
            "num_gpus": 16,
            "sharding": "zero3",
            "shard_group": 8,
        }
    )
    assert out["memory"]["request"]["shard_group"] == 8
    counts = {c["num_gpus"] for c in out["recommendations"]["configs"]}
    assert counts - {16}, counts


def test_all_reduce_takes_the_tree_when_the_ring_latency_grows_with_the_servers():
    """NCCL 2.30.7's choice: across 128 servers, one GPU each, a 3 MiB all-reduce's ring pays
    2 x 127 network steps, the tree 2 x log2(128) = 14: the tree is faster; on one server or
    for a huge message the ring is (the tree's bandwidth is 0.92 of it, corrected by size)."""
    a100 = gpus.get_gpu("a100-80gb-sxm")
    link = comm.replica_link(a100, 1024, 8, "roce-400", 8)
    assert link.nodes == 128
    size = 3 * 2**20
    ring = comm.all_reduce_bytes(size, 128) / link.bytes_per_s + comm.ring_latency_s(
        link, 128, all_reduce=True
    )
    latency = comm.NCCL_TREE_BASE_LATENCY_S + 2 * 7 * link.step_latency_s
    index = (size >> 6).bit_length() - 1
    rate = link.bytes_per_s * comm.NCCL_TREE_BANDWIDTH_SHARE * comm.NCCL_TREE_SIZE_CORRECTION[index]
    tree = latency + 2 * size / rate
    assert tree < ring
    assert comm.all_reduce_seconds(size, link, 128) == pytest.approx(tree)
    one_server = comm.collective_link(a100, 8)
    assert comm.all_reduce_seconds(size, one_server, 8) == pytest.approx(
        comm.all_reduce_bytes(size, 8) / one_server.bytes_per_s
    )
    two = comm.collective_link(a100, 16)
    big = 2**30
    assert comm.all_reduce_seconds(big, two, 16) == pytest.approx(
        comm.all_reduce_bytes(big, 16) / two.bytes_per_s + comm.ring_latency_s(two, 16, True)
    )


@pytest.mark.parametrize(
    ("words", "sharding"), [("hybrid_shard auto_wrap", "zero3"), ("hybrid_shard_zero2", "zero2")]
)
def test_trainer_fsdp_hybrid_words_import_a_group_of_one_server(words, sharding):
    from calc.config_import import import_config

    out = import_config(f"model_name_or_path: x\nbf16: true\nfsdp: {words}\n", "trl")
    assert (out["request"]["sharding"], out["request"]["shard_group"]) == (sharding, 8)


def test_export_writes_hybrid_shard_for_a_group_below_the_job():
    from calc.config_import import export_config

    hybrid = {**FULL_8B, "num_gpus": 16, "sharding": "zero2", "shard_group": 8}
    assert "fsdp: hybrid_shard_zero2" in export_config(hybrid, "trl")
    assert "fsdp: shard_grad_op" in export_config({**hybrid, "shard_group": 16}, "trl")


def test_gradient_buckets_each_pay_one_all_reduce():
    """DDP over 2 servers, short samples (the sync is longer than the backward): the step's
    exposed sync is ``(k - 1)`` full buckets' all-reduces and the rest's, so going from 25 MiB
    to 512 MiB buckets takes off the difference of those sums exactly."""
    a100 = gpus.get_gpu("a100-80gb-sxm")
    link = comm.collective_link(a100, 16)
    kw = {"num_gpus": 16, "sharding": "ddp", "seq_len": 128, "gradient_checkpointing": False}
    small, large = (
        _step(**kw, network="catalogue"),
        _step(**kw, network="catalogue", gradient_bucket_mb=512),
    )
    req, _ = parse_plan_request({**FULL_8B, "gpu": "a100-80gb-sxm", "dataset_tokens": 1e9})
    grads = timing.counts(req, Sharding.DDP).grad_params * req_grad_bytes(req)

    def sync(bucket: float) -> float:
        k = -(-grads // bucket)
        return (k - 1) * comm.all_reduce_seconds(bucket, link, 16) + comm.all_reduce_seconds(
            grads - (k - 1) * bucket, link, 16
        )

    expected = sync(timing.DDP_BUCKET_BYTES) - sync(512 * 2**20)
    assert expected > 0
    assert small.exposed_communication - large.exposed_communication == pytest.approx(expected)


def test_trainer_ddp_bucket_cap_imports():
    from calc.config_import import import_config

    out = import_config("model_name_or_path: x\nddp_bucket_cap_mb: 100\n", "trl")
    assert out["request"]["gradient_bucket_mb"] == 100


def test_deepspeed_zero2_reduce_bucket_imports_as_16bit_gradients():
    import json

    from calc.config_import import import_config

    ds = {"zero_optimization": {"stage": 2, "reduce_bucket_size": 5e8}, "bf16": {"enabled": True}}
    out = import_config(json.dumps(ds), "deepspeed")
    assert out["request"]["gradient_bucket_mb"] == pytest.approx(5e8 * 2 / 2**20)
    ds["zero_optimization"]["stage"] = 3  # ZeRO-3's bucket stays calc's hidden x hidden
    assert "gradient_bucket_mb" not in import_config(json.dumps(ds), "deepspeed")["request"]


def test_deepspeed_zero2_buckets_default_to_the_trainers_auto():
    """No gradient_bucket_mb: DeepSpeed's ZeRO-2 reduces hidden x hidden 16-bit elements per
    bucket (the Trainer's auto), torch DDP 25 MiB."""
    from calc import states
    from calc.request import parse_estimate_request

    req = parse_estimate_request(
        {**FULL_8B, "num_gpus": 8, "sharding": "zero2", "sharding_engine": "deepspeed"}
    )
    reg = states.request_regime(req)
    assert timing.counts(req, Sharding.ZERO2).bucket_bytes == 4096**2 * reg.grad_bytes
    ddp = parse_estimate_request({**FULL_8B, "num_gpus": 8, "sharding": "ddp"})
    assert timing.counts(ddp, Sharding.DDP).bucket_bytes == timing.DDP_BUCKET_BYTES


def test_trl_export_writes_the_ddp_bucket_back():
    from calc.config_import import export_config, import_config

    text = export_config(
        {**FULL_8B, "num_gpus": 8, "sharding": "ddp", "gradient_bucket_mb": 100}, "trl"
    )
    assert "ddp_bucket_cap_mb: 100" in text
    assert import_config(text, "trl")["request"]["gradient_bucket_mb"] == 100
