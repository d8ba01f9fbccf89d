"""Links and collectives: the bytes a GPU sends per collective and the rate of the link.

Ring collectives (NCCL's algorithm for large messages; Patarasuk & Yuan 2009, "Bandwidth
optimal all-reduce algorithms"): over ``n`` GPUs, a reduce-scatter or an all-gather of a
tensor of ``S`` bytes moves ``S * (n - 1) / n`` bytes through each GPU's link, an all-reduce
twice that (it is a reduce-scatter followed by an all-gather). NCCL's own performance notes
(nccl-tests ``doc/PERFORMANCE.md``) define "bus bandwidth" with the same factors, so the time
of a collective is ``bytes_per_gpu / bus_bandwidth``.

Link rates come from the catalogue (``calc/data/gpus.csv``) and from the constants below,
each with its source; no new catalogue column is needed.
"""

from __future__ import annotations

from dataclasses import dataclass

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
    "ada": 12.5,
    "turing": 12.5,
}
"""Cluster network adapter per GPU when a job spans servers: DGX A100 has one 200 Gb/s HDR
InfiniBand adapter per GPU (25 GB/s; NVIDIA DGX A100 datasheet), DGX H100 and DGX B200 one
400 Gb/s NDR adapter per GPU (50 GB/s; DGX H100 / B200 datasheets); MI300X platforms are sold
with 400 Gb/s per GPU as well (AMD Instinct MI300X platform brief; MI355X the same, assumption). PCIe
(Ada, Turing) servers: 100 Gb/s per GPU is the common cloud figure (assumption; no such row
in the validation set).

NCCL builds one ring per adapter ("rail"), each carrying 1/8 of the data and crossing between
servers on its own adapter, so a ring collective over several servers runs at the server's
total network rate, ``GPUS_PER_NODE`` adapters (NCCL's rail-optimised rings; nccl-tests
multi-node all-reduce bus bandwidth on DGX A100 is about 190 GB/s against 8 x 25 = 200)."""


@dataclass(frozen=True)
class Network:
    """A cluster network between servers: its total rate per server (all adapters together,
    Gb/s, one direction) and the latency of one step of a ring collective across it (seconds).
    NCCL's rail rings run a collective over several servers at the server's total rate
    (see :data:`NETWORK_GB_PER_S_PER_GPU`)."""

    gbit_per_s_per_node: float
    step_latency_s: float

    @property
    def gb_per_s_per_node(self) -> float:
        return self.gbit_per_s_per_node / 8.0


CATALOGUE_NETWORK = "catalogue"
"""The ``network`` value that keeps the network of the card's reference server
(:data:`NETWORK_GB_PER_S_PER_GPU` per GPU, no latency term): calc's figures before the key."""

NETWORKS = {
    "infiniband-3200": Network(3200.0, 5e-6),
    "infiniband-1600": Network(1600.0, 5e-6),
    "roce-3200": Network(3200.0, 7e-6),
    "efa-3200": Network(3200.0, 15e-6),
    "efa-400": Network(400.0, 15e-6),
    "ethernet-100": Network(100.0, 50e-6),
    "ethernet-25": Network(25.0, 50e-6),
}
"""Named cluster networks (``network`` request key): total Gb/s per 8-GPU server and the
latency of one ring step.

- ``infiniband-3200``: 8 x 400 Gb/s NDR InfiniBand, one adapter per GPU (NVIDIA DGX H100 / B200
  datasheets; Azure ND H100 v5, 8 x 400 Gb/s, Azure ND-series documentation).
- ``infiniband-1600``: 8 x 200 Gb/s HDR InfiniBand (NVIDIA DGX A100 datasheet; Azure ND A100 v4,
  8 x 200 Gb/s, Azure ND-series documentation).
- ``roce-3200``: 8 x 400 Gb/s RoCE Ethernet, the same rate as NDR over Ethernet (Meta's RoCE
  training clusters, Gangidi et al., SIGCOMM 2024, "RDMA over Ethernet for Distributed Training at
  Meta Scale": 400 Gb/s per GPU).
- ``efa-3200``: AWS p5.48xlarge (8 x H100), 3,200 Gb/s of Elastic Fabric Adapter (AWS EC2 P5
  instance page).
- ``efa-400``: AWS p4d.24xlarge / p4de.24xlarge (8 x A100), 400 Gb/s of EFA (4 x 100 Gb/s; AWS EC2
  P4 instance page).
- ``ethernet-100`` / ``ethernet-25``: a plain 100 or 25 Gb/s Ethernet port per server, NCCL's
  socket transport (assumption: the common rate of rented servers without a fabric).

Latencies: NCCL's tuning model (``src/graph/tuning.cc``, ``hwLat[NCCL_HW_NET]``) charges a few
microseconds per ring step over an RDMA network (InfiniBand 5, RoCE a little more); EFA's
libfabric path and a TCP socket are slower (15 and 50 us: assumptions, stated, not fitted). A ring
all-gather or reduce-scatter over ``n`` GPUs takes ``n - 1`` steps, an all-reduce ``2 (n - 1)``."""

LINK_EFFICIENCY = 0.75
"""Share of a link's rate a large collective reaches. nccl-tests on 8x A100 SXM report
all-reduce bus bandwidth of about 230 GB/s over NVLink's 300 GB/s per direction (0.77; NVIDIA
"NCCL tests" results quoted in the nccl-tests PERFORMANCE guide and DGX A100 user guide);
host-staged PCIe transfers reach about 25 of 31.5 GB/s (0.8; CUDA ``bandwidthTest`` pinned
copies). One figure for every link (a stated assumption, not fitted)."""

HOST_LINK_EFFICIENCY = 0.8
"""Share of the PCIe x16 rate a pinned host<->device copy reaches: CUDA samples'
``bandwidthTest`` reports about 25 GB/s on PCIe 4.0 x16 (31.5 GB/s raw) and about 50 GB/s on
PCIe 5.0 (63 GB/s raw)."""


@dataclass(frozen=True)
class Link:
    """The link a collective crosses, with its usable rate in bytes/s per GPU and direction."""

    kind: str  # "nvlink" | "pcie" | "network"
    bytes_per_s: float
    step_latency_s: float = 0.0  # per ring step across servers (named networks only)

    def to_dict(self) -> JsonObject:
        out: JsonObject = {"kind": self.kind, "gb_per_s": self.bytes_per_s / 1e9}
        if self.step_latency_s:
            out["step_latency_us"] = self.step_latency_s * 1e6
        return out


def host_link_bytes_per_s(pcie_gen: int) -> float:
    """Host <-> device rate of the card's PCIe x16 slot, usable share applied."""
    return PCIE_GB_PER_S_PER_DIRECTION[pcie_gen] * 1e9 * HOST_LINK_EFFICIENCY


def collective_link(gpu: Gpu, num_gpus: int, network: str = CATALOGUE_NETWORK) -> Link:
    """The slowest link a collective over ``num_gpus`` cards of ``gpu`` crosses.

    - NVLink / Infinity Fabric when every card of the job shares it: the catalogue's
      ``nvlink_gb_per_s`` is the total of both directions (A100: 12 links x 25 GB/s x 2 =
      600 GB/s), so one direction is half of it. A bridge (``nvlink_max_gpus`` = 2) joins 2 cards.
    - PCIe otherwise within one server (the slot's rate, one direction).
    - Beyond one server (``GPUS_PER_NODE``): the cluster network, when it is slower: the card's
      reference server's (``network`` ``catalogue``) or a named one of :data:`NETWORKS`, whose
      ring-step latency the link carries.
    """
    intra_nvlink = gpu.nvlink_gb_per_s > 0 and (
        num_gpus <= gpu.nvlink_max_gpus
        or (gpu.nvlink_max_gpus >= GPUS_PER_NODE and num_gpus > GPUS_PER_NODE)
    )
    if intra_nvlink:
        kind, rate = "nvlink", gpu.nvlink_gb_per_s / 2.0
    else:
        kind, rate = "pcie", PCIE_GB_PER_S_PER_DIRECTION[gpu.pcie_gen]
    latency = 0.0
    if num_gpus > GPUS_PER_NODE:
        named = NETWORKS.get(network)
        if named is None:
            net = GPUS_PER_NODE * NETWORK_GB_PER_S_PER_GPU.get(
                gpu.architecture, NETWORK_GB_PER_S_PER_GPU["ada"]
            )
        else:
            net, latency = named.gb_per_s_per_node, named.step_latency_s
        if net < rate:
            kind, rate = "network", net
    return Link(kind, rate * 1e9 * LINK_EFFICIENCY, latency)


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
    "LINK_EFFICIENCY",
    "Link",
    "NETWORKS",
    "NETWORK_GB_PER_S_PER_GPU",
    "Network",
    "PCIE_GB_PER_S_PER_DIRECTION",
    "all_gather_bytes",
    "all_reduce_bytes",
    "collective_link",
    "host_link_bytes_per_s",
    "reduce_scatter_bytes",
]
