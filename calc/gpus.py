"""GPU catalogue and indicative prices: the loader for ``calc/data/gpus.csv`` and ``prices.csv``.

This is the only module that reads those files; it reads them once, on first use (importing
``calc`` stays fast). Each data file's header states its units and every row carries ``source``
and ``as_of``. Memory is what the driver reports (nvidia-smi ``memory.total``, rocminfo for AMD),
converted here to bytes (``memory_mib * 2**20``) and compared with the estimate's
``device_total_bytes``.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, replace
from pathlib import Path

from .errors import InputError
from .jsontypes import JsonObject

_DATA_DIR = Path(__file__).with_name("data")

MIB = 2**20

STACKS = ("cuda", "rocm")
TIERS = ("marketplace", "managed")

# Warning codes the site translates.
ROCM_CAVEAT_CODES = {
    "qlora": "rocm_qlora_needs_extra_work",  # bitsandbytes NF4 kernels are CUDA-first (seed 004)
    "flash": "rocm_flash_attention_needs_extra_work",  # FlashAttention builds are CUDA-first (seed 004)
}


DERIVABLE = (
    "memory_mib",
    "bf16_dense_tflops",
    "fp8_dense_tflops",
    "memory_bandwidth_gb_per_s",
    "nvlink_gb_per_s",
    "fp32_tflops",
    "boost_clock_mhz",
    "sustained_clock_mhz",
)
"""The figure columns of ``gpus.csv`` a row may mark as derived (its ``derived`` column)."""

CLOCK_POWER_EXPONENT = 3.0
"""Dynamic power per compute unit grows about as the clock to this power at the board power
limit (``P ~ f V**2`` with the voltage rising about linearly with the clock over the boost
range): a card with less power per unit than its die family's reference holds
``reference clock x (power ratio) ** (1 / 3)`` (:func:`power_limited_clock_mhz`). Stated, not
fitted."""


@dataclass(frozen=True)
class Gpu:
    """One catalogue card. Units are in the field names; see ``calc/data/gpus.csv``'s header."""

    id: str
    name: str
    vendor: str
    stack: str
    architecture: str
    memory_mib: int
    memory_gb_marketed: int
    bf16_dense_tflops: float
    fp8_dense_tflops: (
        float  # dense FP8 tensor peak, FP32 accumulate, not sparse; 0 without FP8 tensor cores
    )
    memory_bandwidth_gb_per_s: float
    form_factor: str
    pcie_gen: int
    nvlink_gb_per_s: float
    nvlink_max_gpus: int
    utilisation_class: str
    source: str
    as_of: str
    board_power_w: float  # the vendor's board power (TDP), watts: an owned card's electricity
    board_power_source: str
    derived: tuple[str, ...] = ()  # rate columns computed rather than read off a datasheet
    fp32_tflops: float = 0.0  # peak FP32 without tensor cores (CUDA cores / vector units)
    fp32_source: str = ""
    compute_units: int = 0  # SMs (NVIDIA) or compute units (AMD)
    base_clock_mhz: int = 0  # 0: none published
    boost_clock_mhz: int = 0  # the clock the datasheet's tensor rate assumes; 0: none published
    sustained_clock_mhz: int = 0  # the clock held under the board power limit
    clock_reference: str = ""  # the die family's reference card of the derivation
    clock_source: str = ""
    pcie_p2p: bool = True  # False: NCCL stages collectives over PCIe through host memory (GeForce)

    def __post_init__(self) -> None:
        for name in self.derived:
            if name not in DERIVABLE:
                raise ValueError(f"gpus.csv {self.id}: derived names {name!r}, not a figure column")
        if self.stack not in STACKS:
            raise ValueError(f"gpus.csv {self.id}: stack {self.stack!r}")
        for name in ("memory_mib", "bf16_dense_tflops", "memory_bandwidth_gb_per_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"gpus.csv {self.id}: {name} must be positive")
        if not self.fp8_dense_tflops >= 0:
            raise ValueError(f"gpus.csv {self.id}: fp8_dense_tflops must be 0 or positive")
        if not self.source or not self.as_of:
            raise ValueError(f"gpus.csv {self.id}: source and as_of are required")
        if not self.board_power_w > 0 or not self.board_power_source:
            raise ValueError(f"gpus.csv {self.id}: board_power_w and its source are required")
        if not self.fp32_tflops > 0 or not self.fp32_source:
            raise ValueError(f"gpus.csv {self.id}: fp32_tflops and its source are required")
        if not self.compute_units > 0 or not self.clock_source:
            raise ValueError(f"gpus.csv {self.id}: compute_units and clock_source are required")
        if self.boost_clock_mhz > 0 and not (
            self.base_clock_mhz <= self.sustained_clock_mhz <= self.boost_clock_mhz
        ):
            raise ValueError(f"gpus.csv {self.id}: base <= sustained <= boost clock")
        if self.boost_clock_mhz <= 0 and self.sustained_clock_mhz > 0:
            raise ValueError(f"gpus.csv {self.id}: a sustained clock needs the boost clock")

    @property
    def memory_bytes(self) -> int:
        """Driver-reported total memory in bytes (MiB from nvidia-smi times 2**20)."""
        return self.memory_mib * MIB

    @property
    def bf16_dense_flops(self) -> float:
        """Peak dense BF16 tensor throughput in FLOP/s (the datasheet's, at the boost clock)."""
        return self.bf16_dense_tflops * 1e12

    @property
    def clock_factor(self) -> float:
        """``sustained_clock_mhz / boost_clock_mhz``: the share of the datasheet's rates (tensor
        and FP32, all computed at the boost clock) the card runs at under its board power limit;
        1 where no clock is published (the rate is taken as sustained)."""
        if self.boost_clock_mhz <= 0:
            return 1.0
        return self.sustained_clock_mhz / self.boost_clock_mhz

    @property
    def fp32_flops(self) -> float:
        """Peak FP32 throughput without tensor cores in FLOP/s."""
        return self.fp32_tflops * 1e12

    def link_for(self, num_gpus: int, per_node: int = 8) -> str:
        """``"nvlink"`` when the cards of a job talk over the fast GPU link, else ``"pcie"``.
        An SXM/OAM board joins the GPUs of its server (``per_node``, 8 unless the request
        says) and larger jobs are whole boards joined by the cluster network
        (:func:`calc.comm.collective_link`); a bridge joins only 2 cards."""
        if self.nvlink_gb_per_s <= 0:
            return "pcie"
        if self.nvlink_max_gpus >= per_node or num_gpus <= self.nvlink_max_gpus:
            return "nvlink"
        return "pcie"

    def to_dict(self) -> JsonObject:
        return {
            "id": self.id,
            "name": self.name,
            "vendor": self.vendor,
            "stack": self.stack,
            "architecture": self.architecture,
            "memory_bytes": self.memory_bytes,
            "memory_mib": self.memory_mib,
            "memory_gb_marketed": self.memory_gb_marketed,
            "bf16_dense_tflops": self.bf16_dense_tflops,
            "fp8_dense_tflops": self.fp8_dense_tflops,
            "memory_bandwidth_gb_per_s": self.memory_bandwidth_gb_per_s,
            "form_factor": self.form_factor,
            "pcie_gen": self.pcie_gen,
            "nvlink_gb_per_s": self.nvlink_gb_per_s,
            "nvlink_max_gpus": self.nvlink_max_gpus,
            "pcie_p2p": self.pcie_p2p,
            "utilisation_class": self.utilisation_class,
            "source": self.source,
            "as_of": self.as_of,
            "board_power_w": self.board_power_w,
            "board_power_source": self.board_power_source,
            "derived": list(self.derived),
            "fp32_tflops": self.fp32_tflops,
            "fp32_source": self.fp32_source,
            "compute_units": self.compute_units,
            "base_clock_mhz": self.base_clock_mhz,
            "boost_clock_mhz": self.boost_clock_mhz,
            "sustained_clock_mhz": self.sustained_clock_mhz,
            "clock_reference": self.clock_reference,
            "clock_source": self.clock_source,
        }


@dataclass(frozen=True)
class Price:
    """One dated price row of ``calc/data/prices.csv``."""

    item: str
    tier: str
    interruptible: bool
    usd: float
    unit: str
    source: str
    as_of: str
    note: str = ""

    def __post_init__(self) -> None:
        if self.tier not in TIERS:
            raise ValueError(f"prices.csv {self.item}: tier {self.tier!r}")
        if self.unit not in ("usd_per_gpu_hour", "usd_per_gb_month"):
            raise ValueError(f"prices.csv {self.item}: unit {self.unit!r}")
        if not self.usd > 0 or not self.source or not self.as_of:
            raise ValueError(f"prices.csv {self.item}: usd, source and as_of are required")

    def to_dict(self) -> JsonObject:
        return {
            "tier": self.tier,
            "interruptible": self.interruptible,
            "usd": self.usd,
            "unit": self.unit,
            "source": self.source,
            "as_of": self.as_of,
            "note": self.note,
        }


@dataclass(frozen=True)
class PriceQuote:
    """The price used for a plan: the row found and whether it had to fall back to another
    tier or to on-demand capacity."""

    usd_per_gpu_hour: float
    tier: str
    interruptible: bool
    source: str
    as_of: str
    fallback: bool

    def to_dict(self) -> JsonObject:
        return {
            "usd_per_gpu_hour": self.usd_per_gpu_hour,
            "tier": self.tier,
            "interruptible": self.interruptible,
            "source": self.source,
            "as_of": self.as_of,
            "fallback": self.fallback,
        }


def _rows(name: str) -> list[JsonObject]:
    """Rows of a data file: ``#`` comment lines first, then a CSV header and rows."""
    text = (_DATA_DIR / name).read_text(encoding="utf-8")
    body = "\n".join(
        line for line in text.splitlines() if line.strip() and not line.startswith("#")
    )
    return list(csv.DictReader(io.StringIO(body)))


_CACHE: dict[str, object] = {}


def _bool_cell(row: JsonObject, column: str) -> bool:
    """A ``true`` / ``false`` cell of a data file; anything else is a broken file, said so."""
    value = str(row[column])
    if value not in ("true", "false"):
        raise ValueError(f"gpus.csv {row['id']}: {column} must be true or false, not {value!r}")
    return value == "true"


def _catalogue() -> dict[str, Gpu]:
    if "gpus" not in _CACHE:
        gpus = {}
        for row in _rows("gpus.csv"):
            gpu = Gpu(
                id=row["id"],
                name=row["name"],
                vendor=row["vendor"],
                stack=row["stack"],
                architecture=row["architecture"],
                memory_mib=int(row["memory_mib"]),
                memory_gb_marketed=int(row["memory_gb_marketed"]),
                bf16_dense_tflops=float(row["bf16_dense_tflops"]),
                fp8_dense_tflops=float(row["fp8_dense_tflops"]),
                memory_bandwidth_gb_per_s=float(row["memory_bandwidth_gb_per_s"]),
                form_factor=row["form_factor"],
                pcie_gen=int(row["pcie_gen"]),
                nvlink_gb_per_s=float(row["nvlink_gb_per_s"]),
                nvlink_max_gpus=int(row["nvlink_max_gpus"]),
                utilisation_class=row["utilisation_class"],
                source=row["source"],
                as_of=row["as_of"],
                board_power_w=float(row["board_power_w"]),
                board_power_source=row["board_power_source"],
                derived=tuple(row["derived"].split()),
                fp32_tflops=float(row["fp32_tflops"]),
                fp32_source=row["fp32_source"],
                compute_units=int(row["compute_units"]),
                base_clock_mhz=int(row["base_clock_mhz"]),
                boost_clock_mhz=int(row["boost_clock_mhz"]),
                sustained_clock_mhz=int(row["sustained_clock_mhz"]),
                clock_reference=row["clock_reference"],
                clock_source=row["clock_source"],
                pcie_p2p=_bool_cell(row, "pcie_p2p"),
            )
            gpus[gpu.id] = gpu
        _CACHE["gpus"] = gpus
    return _CACHE["gpus"]  # type: ignore[return-value]  # the dict built just above


def _prices() -> list[Price]:
    if "prices" not in _CACHE:
        _CACHE["prices"] = [
            Price(
                item=row["item"],
                tier=row["tier"],
                interruptible=row["interruptible"] == "true",
                usd=float(row["usd"]),
                unit=row["unit"],
                source=row["source"],
                as_of=row["as_of"],
                note=row.get("note") or "",
            )
            for row in _rows("prices.csv")
        ]
    return _CACHE["prices"]  # type: ignore[return-value]  # the list built just above


@dataclass(frozen=True)
class Instance:
    """A cloud instance type of ``calc/data/instances.csv``: its cards, the link between them and
    the named network (``calc.comm.NETWORKS``) between two such instances."""

    instance: str
    provider: str
    gpu: str
    gpus: int
    intra_node: str
    network: str
    network_gbit_per_s: float
    source: str
    as_of: str
    note: str

    def to_dict(self) -> JsonObject:
        return {
            "instance": self.instance,
            "provider": self.provider,
            "gpu": self.gpu,
            "gpus": self.gpus,
            "intra_node": self.intra_node,
            "network": self.network,
            "network_gbit_per_s": self.network_gbit_per_s,
            "source": self.source,
            "as_of": self.as_of,
        }


def instances() -> tuple[Instance, ...]:
    """Cloud instance types and their networks, in file order."""
    if "instances" not in _CACHE:
        _CACHE["instances"] = tuple(
            Instance(
                instance=row["instance"],
                provider=row["provider"],
                gpu=row["gpu"],
                gpus=int(row["gpus"]),
                intra_node=row["intra_node"],
                network=row["network"],
                network_gbit_per_s=float(row["network_gbit_per_s"]),
                source=row["source"],
                as_of=row["as_of"],
                note=row.get("note") or "",
            )
            for row in _rows("instances.csv")
        )
    return _CACHE["instances"]  # type: ignore[return-value]  # the tuple built just above


def power_limited_clock_mhz(gpu: Gpu, reference: Gpu) -> float:
    """The clock ``gpu`` holds under its board power limit, from its die family's ``reference``
    (a card taken at its own sustained clock): with at least the reference's board power per
    compute unit, the boost clock; with less, ``reference clock x (power ratio) ** (1 /
    CLOCK_POWER_EXPONENT)``, never below the base clock (NVIDIA's clock guaranteed at the board
    power) nor above the boost clock. MHz; what ``gpus.csv`` records as DERIVED. A reference whose
    vendor measured it below its boost clock (the MI300X and MI325X, "Sustained MEASURED") scales
    its measured clock by the same law on either side of its own power: at that power, the
    measured clock."""
    ratio = (gpu.board_power_w / gpu.compute_units) / (
        reference.board_power_w / reference.compute_units
    )
    if ratio >= 1 and reference.sustained_clock_mhz >= reference.boost_clock_mhz:
        return gpu.boost_clock_mhz
    clock: float = reference.sustained_clock_mhz * ratio ** (1 / CLOCK_POWER_EXPONENT)
    return min(float(gpu.boost_clock_mhz), max(float(gpu.base_clock_mhz), clock))


def with_power_limit(gpu: Gpu, watts: float, field: str = "power_limit_w") -> Gpu:
    """``gpu`` run under a board power limit of ``watts`` (``nvidia-smi -pl``): its board power
    (an owned card's electricity) is the limit, and its sustained clock the one the limit
    allows by the same law as the catalogue's derived clocks: :func:`power_limited_clock_mhz`
    against the die family's reference (``clock_reference``), a reference card against itself
    (references are taken at their boost clock). So the card's default power gives back the
    catalogue's clock. Power-limited
    benchmark clusters run so: torchtitan's H100 (Grand Teton hosts) at their default 500 W
    (torchtitan ``benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md``). A card without
    published clocks cannot be priced under a limit: ``InputError("power_limit_without_clock")``."""
    if gpu.boost_clock_mhz <= 0:
        raise InputError("power_limit_without_clock", field, watts)
    limited = replace(gpu, board_power_w=float(watts))
    reference = get_gpu(gpu.clock_reference) if gpu.clock_reference else gpu
    clock = power_limited_clock_mhz(limited, reference)
    return replace(limited, sustained_clock_mhz=int(round(clock)))


def gpu_ids() -> tuple[str, ...]:
    """Catalogue ids in file order (smallest to largest within each family)."""
    return tuple(_catalogue())


def all_gpus() -> tuple[Gpu, ...]:
    return tuple(_catalogue().values())


def get_gpu(gpu_id: object, field: str = "gpu") -> Gpu:
    """The card with this id, or ``InputError("unknown_gpu", field, gpu_id)``."""
    if not isinstance(gpu_id, str):
        raise InputError("wrong_type", field, gpu_id)
    gpu = _catalogue().get(gpu_id)
    if gpu is None:
        raise InputError("unknown_gpu", field, gpu_id)
    return gpu


def prices_for(item: str) -> tuple[Price, ...]:
    return tuple(p for p in _prices() if p.item == item)


def price_quote(gpu_id: str, tier: str, interruptible: bool) -> PriceQuote:
    """Catalogue price for one GPU-hour. Search order: the asked tier and capacity kind; the
    other tier, same kind; then on-demand capacity of the asked tier, then of the other; last,
    interruptible capacity (a card only listed as interruptible). ``fallback`` says whether the
    first choice was missing."""
    rows = prices_for(gpu_id)
    other = TIERS[1] if tier == TIERS[0] else TIERS[0]
    order = [
        (tier, interruptible),
        (other, interruptible),
        (tier, False),
        (other, False),
        (tier, True),
        (other, True),
    ]
    for rank, (want_tier, want_int) in enumerate(order):
        for row in rows:
            if (
                row.tier == want_tier
                and row.interruptible == want_int
                and row.unit == "usd_per_gpu_hour"
            ):
                return PriceQuote(
                    row.usd, row.tier, row.interruptible, row.source, row.as_of, rank > 0
                )
    raise InputError("no_price_for_gpu", "gpu", gpu_id)


def storage_price() -> Price:
    """Default persistent-storage price (USD per GB-month)."""
    for row in _prices():
        if row.item == "storage" and row.unit == "usd_per_gb_month":
            return row
    raise RuntimeError("prices.csv has no storage row")


def rocm_warnings(gpu: Gpu, method: str, attention: str) -> list[str]:
    """Warning codes for the seed's caveat: on ROCm, QLoRA (bitsandbytes) and some fast
    attention paths need extra work (seed 004, 'Fine tuning LLM en GPU AMD')."""
    if gpu.stack != "rocm":
        return []
    out = []
    if method == "qlora":
        out.append(ROCM_CAVEAT_CODES["qlora"])
    if attention == "flash":
        out.append(ROCM_CAVEAT_CODES["flash"])
    return out


def gpus_listing() -> JsonObject:
    """``python -m calc gpus``: every card with its dated prices, plus the storage price.
    ``notes`` are codes: prices move and the plan request can override them."""
    out = []
    for gpu in all_gpus():
        entry = gpu.to_dict()
        entry["prices"] = [p.to_dict() for p in prices_for(gpu.id)]
        out.append(entry)
    return {
        "gpus": out,
        "storage_prices": [p.to_dict() for p in _prices() if p.item == "storage"],
        "notes": [
            "prices_move_override_with_price_per_gpu_hour",
            "memory_is_driver_reported_total",
            "rocm_qlora_and_flash_attention_need_extra_work",
        ],
    }


__all__ = [
    "Gpu",
    "Instance",
    "Price",
    "PriceQuote",
    "all_gpus",
    "get_gpu",
    "gpu_ids",
    "gpus_listing",
    "instances",
    "power_limited_clock_mhz",
    "with_power_limit",
    "price_quote",
    "prices_for",
    "rocm_warnings",
    "storage_price",
]
