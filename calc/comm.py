"""Links and collectives: the bytes a GPU sends per collective and the rate of the link.

Ring collectives (NCCL's algorithm for large messages; Patarasuk & Yuan 2009, "Bandwidth
optimal all-reduce algorithms"): over ``n`` GPUs, a reduce-scatter or an all-gather of a
tensor of ``S`` bytes moves ``S * (n - 1) / n`` bytes through each GPU's link, an all-reduce
twice that (it is a reduce-scatter followed by an all-gather). NCCL's own performance notes
(nccl-tests ``doc/PERFORMANCE.md``) define "bus bandwidth" with the same factors, so the time
of a collective is ``bytes_per_gpu / bus_bandwidth``.

Link rates come from the catalogue (``calc/data/gpus.csv``) and from the constants below,
each with its source; cloud instance types and the network each has: ``calc/data/instances.csv``.
Latency: NCCL's own tuning model prices each collective's ring steps (:func:`ring_latency_s`).
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import InputError
from .gpus import Gpu
from .jsontypes import JsonObject

GPUS_PER_NODE = 8
"""GPUs per server board: HGX/DGX A100, H100, H200, B200 and AMD's MI300X platform all hold 8
(NVIDIA DGX A100/H100 datasheets; AMD Instinct MI300X platform brief). A job of more GPUs
spans several servers joined by the cluster network."""

PCIE_GB_PER_S_PER_DIRECTION = {3: 15.75, 4: 31.5, 5: 63.0, 6: 121.0}
"""Raw rate of an x16 slot, one direction: 8, 16 and 32 GT/s per lane x 16 lanes x 128/130
encoding / 8 bits (PCI-SIG PCI Express Base Specification 3.0, 4.0, 5.0); 6.0 runs 64 GT/s
with PAM4 and FLIT encoding (242/256): 64 x 16 x 242/256 / 8 = 121 GB/s."""

NETWORK_GB_PER_S_PER_GPU = {
    "ampere": 25.0,
    "hopper": 50.0,
    "blackwell": 50.0,
    "cdna3": 50.0,
    "cdna4": 50.0,
    "pcie": 12.5,
}
"""Cluster network adapter per GPU of the card's reference server when a job spans servers,
by architecture for server boards (SXM, OAM): DGX A100 has one 200 Gb/s HDR InfiniBand adapter
per GPU (25 GB/s; NVIDIA DGX A100 datasheet), DGX H100 and DGX B200 one 400 Gb/s NDR adapter
per GPU (50 GB/s; DGX H100 / B200 datasheets); MI300X platforms are sold with 400 Gb/s per GPU
as well (AMD Instinct MI300X platform brief; MI355X the same, assumption). ``pcie``: every
PCIe card, whatever its architecture (a server of PCIe cards has no reference board and no
adapter per GPU): 100 Gb/s per GPU (assumption; Google Cloud's G4, 8 x RTX PRO 6000, lists
400 Gb/s per server, its A2 and G2 100 Gb/s: name the network for such a cluster).

NCCL builds one ring per adapter ("rail"), each carrying 1/8 of the data and crossing between
servers on its own adapter, so a ring collective over several servers runs at the server's
total network rate, ``GPUS_PER_NODE`` adapters (NCCL's rail-optimised rings; nccl-tests
multi-node all-reduce bus bandwidth on DGX A100 is about 190 GB/s against 8 x 25 = 200)."""

NCCL_RING_BASE_LATENCY_S = 8.4e-6
"""Fixed latency of one ring collective on NCCL's Simple protocol, the one it runs for large
messages: ``baseLat[RING][SIMPLE]`` = 8.4 us (NVIDIA/nccl 2.30.7 ``src/graph/tuning.cc``,
``ncclTunerConstantsDefaults``, read by ``ncclTopoTuneModel``)."""

NCCL_RING_STEP_LATENCY_S = {"nvlink": 3.4e-6, "pcie": 5.7e-6, "network": 14.0e-6}
"""Latency of one ring step on the Simple protocol, by the hardware the step crosses: NCCL's
``hwLat[NVLINK|PCI|NET][RING][SIMPLE]`` = 3.4, 5.7 and 14.0 us (NCCL 2.30.7
``src/graph/tuning.cc``; earlier releases had 9.6 for the network). NCCL
prices a ring collective over ``n`` ranks on ``k`` servers as ``baseLat + (steps - inter) x
intra + inter x net``, with ``n - 1`` steps of which ``k - 1`` cross the network for an
all-gather or a reduce-scatter (:func:`ring_latency_s`). The ``network`` figure is NCCL's own
for an RDMA network (InfiniBand, RoCE); :data:`NETWORKS` names slower ones."""


@dataclass(frozen=True)
class Network:
    """A cluster network between servers: its total rate per server (all adapters together,
    Gb/s, one direction) and the latency of one ring step across it (seconds).
    NCCL's rail rings run a collective over several servers at the server's total rate
    (see :data:`NETWORK_GB_PER_S_PER_GPU`)."""

    gbit_per_s_per_node: float
    step_latency_s: float

    @property
    def gb_per_s_per_node(self) -> float:
        return self.gbit_per_s_per_node / 8.0


CATALOGUE_NETWORK = "catalogue"
"""The ``network`` value that keeps the network of the card's reference server
(:data:`NETWORK_GB_PER_S_PER_GPU` per GPU, NCCL's RDMA step latency)."""

_RDMA_STEP_LATENCY_S = NCCL_RING_STEP_LATENCY_S["network"]

NETWORKS = {
    "infiniband-3200": Network(3200.0, _RDMA_STEP_LATENCY_S),
    "infiniband-1600": Network(1600.0, _RDMA_STEP_LATENCY_S),
    "roce-3200": Network(3200.0, _RDMA_STEP_LATENCY_S),
    "roce-800": Network(800.0, _RDMA_STEP_LATENCY_S),
    "roce-400": Network(400.0, _RDMA_STEP_LATENCY_S),
    "efa-3200": Network(3200.0, 15e-6),
    "efa-400": Network(400.0, 15e-6),
    "gpudirect-tcpxo-1600": Network(1600.0, 15e-6),
    "gpudirect-tcpx-800": Network(800.0, 50e-6),
    "ethernet-100": Network(100.0, 50e-6),
    "ethernet-25": Network(25.0, 50e-6),
}
"""Named cluster networks (``network`` request key): total Gb/s per 8-GPU server for GPU to
GPU traffic and the latency of one ring step across it. Which cloud instance has which:
``calc/data/instances.csv``.

- ``infiniband-3200``: 8 x 400 Gb/s NDR InfiniBand, one adapter per GPU (NVIDIA DGX H100 / B200
  datasheets; Azure ND H100 v5, 3.2 Tb/s per VM, Azure ND-series documentation).
- ``infiniband-1600``: 8 x 200 Gb/s HDR InfiniBand (NVIDIA DGX A100 datasheet; Azure ND A100 v4,
  1.6 Tb/s per VM, Azure ND-series documentation).
- ``roce-3200``: 8 x 400 Gb/s RoCE Ethernet, the same rate as NDR over Ethernet (Meta's RoCE
  training clusters, Gangidi et al., SIGCOMM 2024, "RDMA over Ethernet for Distributed Training at
  Meta Scale": 400 Gb/s per GPU; Google Cloud A3 Ultra and A4, 8 ConnectX-7 NICs, 3,200 Gb/s).
- ``roce-800``: 2 x 400 Gb/s Ethernet per 8-GPU server for GPU traffic, the H100 SXM5 clusters
  Juniper Networks ran MLPerf Training v4.0 on (``mlcommons/training_results_v4.0`` at 6fe95437,
  ``JuniperNetworks/systems/*.json``: ``accelerator_interconnect`` "2x 400Gbe Ethernet"); RDMA
  assumed (the system file names Ethernet only).
- ``roce-400``: 4 x 100 Gb/s RoCE per 8-GPU server, the A100-SXM4-80GB cluster of InternLM's
  training performance page (InternLM/InternEvo ``doc/en/train_performance.md`` at c628a8c8,
  2024-03: inter-machine bandwidth 4 * 100Gb RoCE).
- ``efa-3200``: AWS p5.48xlarge (8 x H100), 3,200 Gb/s of Elastic Fabric Adapter (32 x 100 Gb/s;
  AWS EC2 P5 instance page).
- ``efa-400``: AWS p4d.24xlarge / p4de.24xlarge (8 x A100), 400 Gb/s of EFA (4 x 100 Gb/s; AWS EC2
  P4 instance page).
- ``gpudirect-tcpxo-1600`` / ``gpudirect-tcpx-800``: Google Cloud A3 Mega (8 x 200 Gb/s GPU NICs,
  GPUDirect-TCPXO) and A3 High (4 x 200 Gb/s, GPUDirect-TCPX): Google Cloud "Networking and GPU
  machines" (1,800 and 1,000 Gb/s in all, 200 of them on the host's own NIC).
- ``ethernet-100`` / ``ethernet-25``: a plain 100 or 25 Gb/s Ethernet port per server, NCCL's
  socket transport (Google Cloud A2 and G2: 100 Gb/s; a rented server without a fabric).

Latencies per ring step: InfiniBand and RoCE NCCL's own RDMA figure
(:data:`NCCL_RING_STEP_LATENCY_S`); EFA's libfabric path and the TCPXO offload 15 us, a TCP
socket (TCPX, plain Ethernet) 50 us: stated assumptions, not fitted."""

LINK_EFFICIENCY = 0.75
"""Share of a link's rate a large collective reaches. nccl-tests on 8x A100 SXM report
all-reduce bus bandwidth of about 230 GB/s over NVLink's 300 GB/s per direction (0.77; NVIDIA
"NCCL tests" results quoted in the nccl-tests PERFORMANCE guide and DGX A100 user guide);
host-staged PCIe transfers reach about 25 of 31.5 GB/s (0.8; CUDA ``bandwidthTest`` pinned
copies). One figure for every link (a stated assumption, not fitted)."""

HOST_STAGED_BUS_SHARE = {4: 0.55, 8: 0.44}
"""Share of the PCIe x16 slot's raw rate (:data:`PCIE_GB_PER_S_PER_DIRECTION`) that NCCL's
all-reduce bus bandwidth reaches between cards without PCIe peer-to-peer (``gpus.csv``
``pcie_p2p`` false: GeForce), whose collectives NCCL stages through host memory (its SHM
transport), by the largest job it covers: up to 4 cards (one CPU socket), up to 8 (two).
Measured with nccl-tests ``all_reduce_perf`` at large messages, stock driver:
- 4 cards: RTX 4090 on PCIe 4.0, dual Xeon Silver 4416+, NCCL 2.25.1, 16.8 GB/s of 31.5 (0.53;
  Duanyll/open-gpu-kernel-modules ``docs/48g-4090-p2p/method3-test-results.md`` at 23b7fb82);
  RTX 4090, one socket, 18 GB/s (0.57; NVIDIA/nccl#1603); RTX 5090 on PCIe 5.0, dual Xeon
  8480+, 35 GB/s of 63 (0.56; NVIDIA/nccl#1639): 0.55.
- 8 cards: the same dual-Xeon RTX 4090 box, 14.2 GB/s (0.45); another dual-socket RTX 4090
  node, NCCL 2.27.3, 9.9 GB/s at 1 GiB (0.31; the same repository's
  ``hw-logs-2026-07/node32-modded48g-8x/12-nccl-all_reduce.log`` at f6eb773b); the RTX 5090
  box, 28 GB/s (0.44): 0.44.
No measurement of 2 cards was found: they take the 4-card share. The same boxes with peer-to-peer
forced on (patched driver) reach 20.4-26 GB/s on PCIe 4.0, about calc's
``LINK_EFFICIENCY`` x 31.5 = 23.6 for cards that have it. Hosts matter more than the link here:
an AMD EPYC 7302 box measured 4.1 GB/s and hosts with PCIe ACS redirection on 2.6-3.5 GB/s
(same repository); those are not the default."""

HOST_LINK_EFFICIENCY = 0.8
"""Share of the PCIe x16 rate a pinned host<->device copy reaches: CUDA samples'
``bandwidthTest`` reports about 25 GB/s on PCIe 4.0 x16 (31.5 GB/s raw) and about 50 GB/s on
PCIe 5.0 (63 GB/s raw)."""


@dataclass(frozen=True)
class Link:
    """The link a collective crosses, with its usable rate in bytes/s per GPU and direction.
    Across servers it also carries what a ring step costs in latency: ``step_latency_s`` on the
    network, ``intra_step_latency_s`` inside a server (NVLink or PCIe), and the server count."""

    kind: str  # "nvlink" | "pcie" | "network"
    bytes_per_s: float
    step_latency_s: float = 0.0  # per ring step across servers
    intra_step_latency_s: float = 0.0  # per ring step inside a server (jobs across servers)
    nodes: int = 1

    def to_dict(self) -> JsonObject:
        out: JsonObject = {"kind": self.kind, "gb_per_s": self.bytes_per_s / 1e9}
        if self.step_latency_s:
            out["step_latency_us"] = self.step_latency_s * 1e6
        return out


def host_staged_gb_per_s(gpu: Gpu, cards: int) -> float:
    """All-reduce bus bandwidth, GB/s, of ``cards`` cards of ``gpu`` that NCCL joins through host
    memory (no PCIe peer-to-peer): :data:`HOST_STAGED_BUS_SHARE` of the slot's raw rate."""
    share = HOST_STAGED_BUS_SHARE[4] if cards <= 4 else HOST_STAGED_BUS_SHARE[8]
    return PCIE_GB_PER_S_PER_DIRECTION[gpu.pcie_gen] * share


def host_link_bytes_per_s(pcie_gen: int) -> float:
    """Host <-> device rate of the card's PCIe x16 slot, usable share applied."""
    return PCIE_GB_PER_S_PER_DIRECTION[pcie_gen] * 1e9 * HOST_LINK_EFFICIENCY


def reference_network(gpu: Gpu, per_node: int = GPUS_PER_NODE) -> Network:
    """The network of the card's reference server (``network`` ``catalogue``): the per-GPU
    adapter of :data:`NETWORK_GB_PER_S_PER_GPU` on each of the server's ``per_node`` GPUs,
    NCCL's RDMA step latency."""
    key = "pcie" if gpu.form_factor == "pcie" else gpu.architecture
    per_gpu = NETWORK_GB_PER_S_PER_GPU.get(key)
    if per_gpu is None:  # a server board of an architecture with no reference server
        raise InputError("no_network_rate", "network", CATALOGUE_NETWORK)
    return Network(per_node * per_gpu * 8.0, _RDMA_STEP_LATENCY_S)


def cluster_network(gpu: Gpu, network: str, per_node: int) -> Network:
    """The network between servers a request names: one of :data:`NETWORKS`, else the card's
    reference server's (:func:`reference_network`)."""
    named = NETWORKS.get(network)
    return reference_network(gpu, per_node) if named is None else named


def collective_link(
    gpu: Gpu, num_gpus: int, network: str = CATALOGUE_NETWORK, per_node: int = GPUS_PER_NODE
) -> Link:
    """The slowest link a collective over ``num_gpus`` cards of ``gpu`` crosses, on servers of
    ``per_node`` cards (request key ``gpus_per_node``).

    - NVLink / Infinity Fabric when every card of the job shares it: the catalogue's
      ``nvlink_gb_per_s`` is the total of both directions (A100: 12 links x 25 GB/s x 2 =
      600 GB/s), so one direction is half of it. A bridge (``nvlink_max_gpus`` = 2) joins 2 cards.
    - PCIe otherwise within one server (the slot's rate, one direction).
    - Beyond one server (``per_node``): the cluster network, when it is slower: the card's
      reference server's (``network`` ``catalogue``, :func:`reference_network`) or a named one
      of :data:`NETWORKS`; the link then carries the ring-step latencies (network, and NVLink or
      PCIe inside each server) and the server count for :func:`ring_latency_s`.
    """
    intra_nvlink = gpu.nvlink_gb_per_s > 0 and (
        num_gpus <= gpu.nvlink_max_gpus or (gpu.nvlink_max_gpus >= per_node and num_gpus > per_node)
    )
    if intra_nvlink:
        kind, rate = "nvlink", gpu.nvlink_gb_per_s / 2.0 * LINK_EFFICIENCY
    elif gpu.pcie_p2p:
        kind, rate = "pcie", PCIE_GB_PER_S_PER_DIRECTION[gpu.pcie_gen] * LINK_EFFICIENCY
    else:
        kind, rate = "pcie", host_staged_gb_per_s(gpu, min(num_gpus, per_node))
    if num_gpus <= per_node:
        return Link(kind, rate * 1e9)
    intra_latency = NCCL_RING_STEP_LATENCY_S[kind]
    net = cluster_network(gpu, network, per_node)
    if net.gb_per_s_per_node * LINK_EFFICIENCY < rate:
        kind, rate = "network", net.gb_per_s_per_node * LINK_EFFICIENCY
    nodes = -(-num_gpus // per_node)
    return Link(kind, rate * 1e9, net.step_latency_s, intra_latency, nodes)


def replica_link(
    gpu: Gpu,
    num_gpus: int,
    shard_size: int,
    network: str = CATALOGUE_NETWORK,
    per_node: int = GPUS_PER_NODE,
) -> Link:
    """The link of hybrid sharding's all-reduce between replicas: ``num_gpus / shard_size``
    copies of the states, each GPU all-reducing its shard with the GPUs that hold the same
    shard in the other copies (torch 2.13 FSDP ``HYBRID_SHARD``: the reduce-scatter inside the
    shard group, then ``dist.all_reduce`` on the inter-node group, ``_runtime_utils.py``
    ``_reduce_grad``).

    Inside one server: the collective link of the job's cards. Across servers: the
    ``shard_size`` all-reduces run at once, one per shard, and share each server's network;
    a ring all-reduce of ``S / shard_size`` bytes over the replicas then moves what one of
    ``S`` bytes over the whole job would move through each server (``2 S (r - 1) / r``), so
    each GPU's share of the server's rate is ``1 / min(shard_size, per_node)`` of it (a
    stated derivation from the ring's traffic, not a measured figure). The ring crosses
    one server per replica when a group fills whole servers, else the job's servers."""
    whole = collective_link(gpu, num_gpus, network, per_node)
    if num_gpus <= per_node:
        return whole
    net = cluster_network(gpu, network, per_node)
    share = net.gb_per_s_per_node * 1e9 * LINK_EFFICIENCY / min(shard_size, per_node)
    replicas = num_gpus // max(shard_size, 1)
    nodes = replicas if shard_size >= per_node else whole.nodes
    return Link(
        "network",
        min(share, whole.bytes_per_s),
        net.step_latency_s,
        whole.intra_step_latency_s,
        nodes,
    )


@dataclass(frozen=True)
class AllToAll:
    """An all-to-all over ``group`` GPUs (Ulysses sequence parallelism): seconds per byte of
    the tensor each GPU holds, and the latency of one call."""

    group: int
    seconds_per_byte: float
    latency_s: float

    def seconds(self, nbytes: float, calls: float) -> float:
        """``calls`` all-to-alls moving ``nbytes`` of each GPU's tensors in all."""
        return nbytes * self.seconds_per_byte + calls * self.latency_s


def all_to_all_link(
    gpu: Gpu, group: int, network: str = CATALOGUE_NETWORK, per_node: int = GPUS_PER_NODE
) -> AllToAll:
    """An all-to-all over ``group`` consecutive ranks (XTuner and DeepSpeed build each sequence
    parallel group from consecutive ranks, so it fills servers in turn). Each GPU keeps
    ``1 / group`` of its tensor and sends ``1 / group`` to every other GPU: ``(m - 1) / group``
    of it to the ``m - 1`` others on its server (``m = min(group, per_node)``) over the
    server's link (:func:`collective_link`), ``(group - m) / group`` across servers at its
    share of the server's network, ``1 / m`` of it (every GPU of the server sends at once).
    Both run at once; the slower sets the time. Latency: NCCL runs an all-to-all as grouped
    point-to-point sends to every peer at once (``ncclGroupStart`` / ``ncclSend`` /
    ``ncclRecv``, as ``torch.distributed.all_to_all_single`` calls it): one base latency and one
    step of the slowest link crossed (:data:`NCCL_RING_BASE_LATENCY_S`,
    :data:`NCCL_RING_STEP_LATENCY_S`; an assumption, NCCL's tuning model prices rings and
    trees, not point-to-point)."""
    m = min(group, per_node)
    inside = collective_link(gpu, m, network, per_node)
    per_byte = (m - 1) / group / inside.bytes_per_s
    latency = NCCL_RING_BASE_LATENCY_S + NCCL_RING_STEP_LATENCY_S[inside.kind]
    if group > per_node:
        net = cluster_network(gpu, network, per_node)
        share = net.gb_per_s_per_node * 1e9 * LINK_EFFICIENCY / m
        per_byte = max(per_byte, (group - m) / group / share)
        latency = NCCL_RING_BASE_LATENCY_S + net.step_latency_s
    return AllToAll(group, per_byte, latency)


def ring_latency_s(link: Link, num_gpus: int, all_reduce: bool = False) -> float:
    """Latency of one ring collective over ``num_gpus`` GPUs on ``link.nodes`` servers, NCCL's
    tuning model (``src/graph/tuning.cc``, Simple protocol): ``baseLat + (steps - inter) x
    intra + inter x net``; an all-gather or a reduce-scatter takes ``n - 1`` steps of which
    ``k - 1`` cross the network, an all-reduce (a reduce-scatter then an all-gather) twice
    both. 0 on one server: the latency of a collective inside a server (8.4 + 7 x 3.4 = 32 us
    over 8 NVLink GPUs) is left out there, which keeps one server's figures as they were."""
    if link.nodes <= 1 or num_gpus <= 1:
        return 0.0
    hops = 2 if all_reduce else 1
    steps, inter = hops * (num_gpus - 1), hops * (link.nodes - 1)
    return (
        NCCL_RING_BASE_LATENCY_S
        + (steps - inter) * link.intra_step_latency_s
        + inter * link.step_latency_s
    )


NCCL_TREE_BASE_LATENCY_S = 8.4e-6
"""Fixed latency of one tree all-reduce on the Simple protocol: ``baseLat[TREE][SIMPLE]`` =
8.4 us (NCCL 2.30.7 ``src/graph/tuning.cc``)."""

NCCL_TREE_STEP_LATENCY_S = 4.0e-6
"""Latency of one tree step inside a server on the Simple protocol, NVLink or PCIe alike:
``hwLat[NVLINK|PCI][TREE][SIMPLE]`` = 4.0 us (NCCL 2.30.7). Across servers a tree step costs
the network's step latency (``hwLat[NET][TREE][SIMPLE]`` = 14 us, the ring's figure:
:data:`NCCL_RING_STEP_LATENCY_S`; a named network's own, :data:`NETWORKS`)."""

NCCL_TREE_BANDWIDTH_SHARE = 0.92
"""Share of the ring's bus bandwidth a tree all-reduce reaches: ``busBw * .92`` for
``NCCL_ALGO_TREE`` all-reduce (NCCL 2.30.7 ``ncclTopoTuneModel``)."""

NCCL_TREE_SIZE_CORRECTION = (
    0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.8, 0.7, 0.6, 0.6, 0.5,
    0.5, 0.5, 0.5, 0.6, 0.7, 0.8, 0.7, 0.7, 0.8, 0.9, 0.9,
)  # fmt: skip
"""NCCL's static correction of the tree's bandwidth by message size on the Simple protocol,
indexed by ``floor(log2(bytes / 64))`` below 23 (64 B to 256 MiB; 1.0 from there):
``treeCorrectionFactor[NCCL_PROTO_SIMPLE]`` (NCCL 2.30.7 ``ncclTopoGetAlgoTime``, "trees are not
perfectly sticking to the model for medium sizes")."""


def all_reduce_seconds(size: float, link: Link, n: int) -> float:
    """Seconds of an all-reduce of ``size`` bytes over ``n`` GPUs on ``link``, as NCCL picks its
    algorithm: the faster of the ring (:func:`all_reduce_bytes` at the link's rate, plus
    :func:`ring_latency_s`) and, across servers, the tree, whose latency grows with the
    logarithm of the server count instead of the GPU count: ``baseLat + 2 ((n / k - 1) x intra
    + floor(log2 k) x net)`` over ``k`` servers, and whose time per byte is ``2 / (rate x``
    :data:`NCCL_TREE_BANDWIDTH_SHARE` ``x`` :data:`NCCL_TREE_SIZE_CORRECTION` ``)`` (NCCL 2.30.7
    ``ncclTopoTuneModel``: ``ratio = .5`` from bus to algorithm bandwidth;
    ``ncclTopoGetAlgoTime``). Not counted: NCCL's extra ring latency on large multi-server
    all-reduces ("plateau effect", x1.4), NVLS and CollNet (switch offloads)."""
    if n <= 1 or size <= 0:
        return 0.0
    ring = all_reduce_bytes(size, n) / link.bytes_per_s + ring_latency_s(link, n, all_reduce=True)
    if link.nodes <= 1:
        return ring
    k = min(link.nodes, n)
    latency = NCCL_TREE_BASE_LATENCY_S + 2.0 * (
        (n // k - 1) * NCCL_TREE_STEP_LATENCY_S + (k.bit_length() - 1) * link.step_latency_s
    )
    index = max(0, int(size) >> 6).bit_length() - 1
    correction = (
        NCCL_TREE_SIZE_CORRECTION[index] if 0 <= index < len(NCCL_TREE_SIZE_CORRECTION) else 1.0
    )
    tree = latency + 2.0 * size / (link.bytes_per_s * NCCL_TREE_BANDWIDTH_SHARE * correction)
    return min(ring, tree)


def all_reduce_bytes(size: float, n: int) -> float:
    """Bytes through each GPU's link for a ring all-reduce of ``size`` bytes over ``n`` GPUs."""
    return 0.0 if n <= 1 else 2.0 * size * (n - 1) / n


def all_gather_bytes(size: float, n: int) -> float:
    """Ring all-gather (or reduce-scatter) of a tensor of ``size`` bytes in total."""
    return 0.0 if n <= 1 else size * (n - 1) / n


reduce_scatter_bytes = all_gather_bytes

__all__ = [
    "CATALOGUE_NETWORK",
    "GPUS_PER_NODE",
    "HOST_LINK_EFFICIENCY",
    "HOST_STAGED_BUS_SHARE",
    "LINK_EFFICIENCY",
    "Link",
    "NETWORKS",
    "NCCL_RING_BASE_LATENCY_S",
    "NCCL_RING_STEP_LATENCY_S",
    "NETWORK_GB_PER_S_PER_GPU",
    "Network",
    "PCIE_GB_PER_S_PER_DIRECTION",
    "NCCL_TREE_BANDWIDTH_SHARE",
    "NCCL_TREE_BASE_LATENCY_S",
    "NCCL_TREE_SIZE_CORRECTION",
    "NCCL_TREE_STEP_LATENCY_S",
    "all_gather_bytes",
    "all_reduce_bytes",
    "all_reduce_seconds",
    "cluster_network",
    "collective_link",
    "host_link_bytes_per_s",
    "host_staged_gb_per_s",
    "reduce_scatter_bytes",
    "reference_network",
    "replica_link",
    "ring_latency_s",
]
