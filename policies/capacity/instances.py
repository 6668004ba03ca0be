"""Instance facts and what a node of each type leaves for pods (allocatable).

Reads ``instance_catalog.json`` beside the pack (pure ``json``: this package imports nothing from
Pulumi, so the program's settings and the pack share it). Allocatable follows EKS's AL2023 node
bootstrap (awslabs/amazon-eks-ami ``nodeadm/internal/kubelet/config.go``):

- kube-reserved CPU: 6% of the first core, 1% of the second, 0.5% of cores 3-4, 0.25% of the rest;
- kube-reserved memory: ``11 MiB x maxPods + 255 MiB``; eviction threshold ``memory.available`` 100Mi;
- kube-reserved ephemeral storage 1Gi and eviction ``nodefs.available`` 10%;
- ``maxPods``: ENI-limited (catalog field ``maxPods``) unless the kubelet config sets it.

GPU, vCPU, memory and network facts are the same in every region; on-demand prices are per region
(``onDemandHourlyUsd.<region>``). A catalog is loaded for one region (:func:`load_instances`): a type
without a price there keeps its facts and carries ``hourly_usd=None``, and every cost figure over it
raises :class:`UnpricedInstanceError` naming the type and the region, never another region's price.
``docs/catalog.md`` says where each figure comes from and how ``python -m automation catalog refresh``
rebuilds the file from the AWS APIs.

Memory capacity is the instance's nominal memory less Karpenter's default VM overhead estimate
(``VM_MEMORY_OVERHEAD_PERCENT`` 7.5%, Karpenter settings reference): the kernel and firmware keep
part of the nominal figure, and Karpenter launches a node only if the pod fits that estimate.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

KARPENTER_PREFIX, AUTO_MODE_PREFIX = "karpenter.k8s.aws/", "eks.amazonaws.com/"
CATALOG_PATH = Path(__file__).resolve().parent.parent / "instance_catalog.json"
#: The region of callers that were not given one (the shipped file's fully priced region). The
#: settings and the pack pass the stack's ``region``.
DEFAULT_REGION = "us-east-1"
VM_MEMORY_OVERHEAD = 0.075
EVICTION_MEMORY_MIB = 100
KUBE_RESERVED_EPHEMERAL_MIB = 1024
EVICTION_NODEFS_FRACTION = 0.10
#: Kubelet default when the ENI limit is unknown (nodeadm falls back to 110 too).
DEFAULT_MAX_PODS = 110


@dataclass(frozen=True)
class Resources:
    """Pod-scheduling resources: CPU in millicores, memory and ephemeral storage in MiB, GPUs, pods."""

    cpu_m: float = 0
    memory_mib: float = 0
    gpus: float = 0
    ephemeral_mib: float = 0
    pods: float = 0

    def __add__(self, other: Resources) -> Resources:
        return Resources(*(a + b for a, b in zip(self._tuple(), other._tuple())))

    def __sub__(self, other: Resources) -> Resources:
        return Resources(*(a - b for a, b in zip(self._tuple(), other._tuple())))

    def scaled(self, factor: float) -> Resources:
        return Resources(*(a * factor for a in self._tuple()))

    def _tuple(self) -> tuple[float, ...]:
        return (self.cpu_m, self.memory_mib, self.gpus, self.ephemeral_mib, self.pods)

    def shortfalls(self, need: Resources, *, ephemeral: bool = True) -> list[tuple[str, float, float]]:
        """``(resource, need, have)`` for every resource where ``need`` exceeds this."""
        out = []
        for name, want, have in (
            ("cpu", need.cpu_m, self.cpu_m),
            ("memory", need.memory_mib, self.memory_mib),
            ("nvidia.com/gpu", need.gpus, self.gpus),
            ("ephemeral-storage", need.ephemeral_mib if ephemeral else 0, self.ephemeral_mib),
            ("pods", need.pods, self.pods),
        ):
            if want > have + 1e-9:
                out.append((name, want, have))
        return out


@dataclass(frozen=True)
class Instance:
    name: str
    category: str
    family: str
    vcpu: int
    memory_mib: int
    gpus: int
    gpu_name: str | None
    gpu_memory_mib: int | None
    #: On-demand USD per hour in ``region``; ``None`` when the catalog has no price for it there.
    hourly_usd: float | None
    max_pods: int
    region: str = DEFAULT_REGION
    #: False when ``region``'s Price List (as the catalog holds it) has no on-demand price for the type,
    #: None when the catalog has no prices for ``region`` at all (nothing is known), True when priced.
    on_demand_offered: bool | None = True
    network_bandwidth_mbps: int | None = None
    local_nvme_gb: int | None = None
    #: EFA interfaces the type can carry (``vpc.amazonaws.com/efa`` its nodes advertise); 0: no EFA.
    efa_interfaces: int = 0

    def labels(self) -> dict[str, str]:
        """The well-known labels Karpenter puts on a node of this type (its instance-types reference).

        GPU labels exist only on GPU types: a CPU node has no ``instance-gpu-count`` label at all.
        """
        size = self.name.split(".", 1)[1] if "." in self.name else ""
        generation = re.sub(r"\D", "", self.family.split("-")[0])[:1]
        labels = {
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",  # every catalog type is x86_64
            "node.kubernetes.io/instance-type": self.name,
            "karpenter.k8s.aws/instance-category": self.category,
            "karpenter.k8s.aws/instance-family": self.family,
            "karpenter.k8s.aws/instance-size": size,
            "karpenter.k8s.aws/instance-generation": generation,
            "karpenter.k8s.aws/instance-cpu": str(self.vcpu),
            "karpenter.k8s.aws/instance-memory": str(self.memory_mib),
        }
        if self.gpus:
            labels["karpenter.k8s.aws/instance-gpu-count"] = str(self.gpus)
            labels["karpenter.k8s.aws/instance-gpu-manufacturer"] = "nvidia"
            if self.gpu_name:
                labels["karpenter.k8s.aws/instance-gpu-name"] = self.gpu_name
            if self.gpu_memory_mib:
                labels["karpenter.k8s.aws/instance-gpu-memory"] = str(self.gpu_memory_mib)
        # EKS Auto Mode spells the same facts under its own prefix (Auto Mode "Create a Node Pool": supported labels).
        labels.update({k.replace(KARPENTER_PREFIX, AUTO_MODE_PREFIX): v
                       for k, v in list(labels.items()) if k.startswith(KARPENTER_PREFIX)})
        return labels


def reserved_cpu_m(vcpu: int) -> float:
    """EKS kube-reserved CPU (millicores) for a node with ``vcpu`` cores."""
    total = vcpu * 1000
    reserved = 0.0
    for start, end, basis_points in ((0, 1000, 600), (1000, 2000, 100), (2000, 4000, 50), (4000, total, 25)):
        if total > start:
            reserved += (min(total, end) - start) * basis_points / 10000
    return reserved


def reserved_memory_mib(max_pods: int) -> float:
    """EKS kube-reserved memory (MiB): 11 MiB per pod slot plus 255 MiB."""
    return 11 * max_pods + 255


def allocatable(instance: Instance, *, max_pods: int | None = None, disk_gib: float | None = None) -> Resources:
    """What the kubelet of such a node offers pods, before any DaemonSet."""
    pods = max_pods or instance.max_pods
    memory = instance.memory_mib * (1 - VM_MEMORY_OVERHEAD) - reserved_memory_mib(pods) - EVICTION_MEMORY_MIB
    ephemeral = (
        disk_gib * 1024 * (1 - EVICTION_NODEFS_FRACTION) - KUBE_RESERVED_EPHEMERAL_MIB if disk_gib else float("inf")
    )
    return Resources(
        cpu_m=instance.vcpu * 1000 - reserved_cpu_m(instance.vcpu),
        memory_mib=memory,
        gpus=instance.gpus,
        ephemeral_mib=ephemeral,
        pods=pods,
    )


class UnpricedInstanceError(ValueError):
    """A cost figure was asked of types the catalog has no on-demand price for in the stack's region."""

    def __init__(self, names: list[str], region: str, priced_regions: tuple[str, ...] = (),
                 region_unpriced: bool = False):
        self.names, self.region = sorted(set(names)), region
        #: The catalog has no prices for the region at all (not merely none for these types there): the
        #: offline check then reports the budget as unknown instead of refusing the stack.
        self.region_unpriced = region_unpriced
        known = f" (priced regions: {', '.join(priced_regions)})" if priced_regions else ""
        super().__init__(
            f"no on-demand price for {', '.join(self.names)} in {region} in policies/instance_catalog.json{known}; "
            f"run `python -m automation catalog refresh --region {region}` with AWS credentials, or choose a "
            "priced region or type")


@dataclass(frozen=True)
class InstanceCatalog:
    hours_per_month: float
    instances: dict[str, Instance]
    #: The region whose prices ``Instance.hourly_usd`` carries.
    region: str = DEFAULT_REGION
    #: Every region the file has prices for.
    priced_regions: tuple[str, ...] = ()

    def unpriced(self, names: list[str]) -> list[str]:
        """The catalog types among ``names`` without an on-demand price in this catalog's region."""
        return [n for n in names if n in self.instances and self.instances[n].hourly_usd is None]

    def require_prices(self, names: list[str]) -> None:
        """:class:`UnpricedInstanceError` naming every type of ``names`` not priced in this region."""
        missing = self.unpriced(names)
        if missing:
            raise UnpricedInstanceError(missing, self.region, self.priced_regions,
                                        region_unpriced=self.region not in self.priced_regions)

    def get(self, name: object) -> Instance | None:
        return self.instances.get(name) if isinstance(name, str) else None

    def gpu_types(self) -> list[Instance]:
        return [i for i in self.instances.values() if i.gpus]

    def names(self) -> list[str]:
        return sorted(self.instances)

    def gpu_names(self) -> list[str]:
        return sorted(i.name for i in self.gpu_types())


@lru_cache(maxsize=16)
def load_instances(path: Path = CATALOG_PATH, region: str = DEFAULT_REGION) -> InstanceCatalog:
    """The catalog with ``region``'s on-demand prices (types without one there: ``hourly_usd=None``)."""
    raw = json.loads(path.read_text())
    prices = raw["onDemandHourlyUsd"]
    regional = prices.get(region)
    instances = {
        name: Instance(
            name=name,
            category=spec["category"],
            family=spec["family"],
            vcpu=int(spec["vcpu"]),
            memory_mib=int(spec["memoryMiB"]),
            gpus=int(spec["gpus"]),
            gpu_name=spec.get("gpuName"),
            gpu_memory_mib=spec.get("gpuMemoryMiB"),
            hourly_usd=float(regional[name]) if regional and name in regional else None,
            max_pods=int(spec.get("maxPods") or DEFAULT_MAX_PODS),
            region=region,
            on_demand_offered=None if regional is None else name in regional,
            network_bandwidth_mbps=spec.get("networkBandwidthMbps"),
            local_nvme_gb=spec.get("localNvmeGB"),
            efa_interfaces=int(spec.get("efaInterfaces", 0)),
        )
        for name, spec in raw["instances"].items()
    }
    return InstanceCatalog(hours_per_month=float(raw["hoursPerMonth"]), instances=instances, region=region,
                           priced_regions=tuple(sorted(prices)))


def hourly_price(name: str, region: str, path: Path = CATALOG_PATH) -> float:
    """On-demand USD per hour of instance type ``name`` in ``region``; raises
    :class:`UnpricedInstanceError` when the catalog has no price there (KeyError for an unknown type)."""
    catalog = load_instances(path, region)
    catalog.require_prices([catalog.instances[name].name])
    return float(catalog.instances[name].hourly_usd)  # type: ignore[arg-type]


def max_pods_for(default_card_max_enis: int, ipv4_per_eni: int) -> int:
    """ENI-limited pods per node as nodeadm computes them (awslabs/amazon-eks-ami
    ``nodeadm/internal/kubelet/eni_max_pods.go``): ``ENIs x (IPv4 per ENI - 1) + 2``, where ENIs is the
    *default network card's* ``MaximumNetworkInterfaces`` (``nodeadm/internal/util/ec2.go``), not the
    instance's total over all cards: p5.48xlarge has 64 ENIs over 32 cards but 2 on card 0, so 100 pods."""
    return default_card_max_enis * (ipv4_per_eni - 1) + 2
