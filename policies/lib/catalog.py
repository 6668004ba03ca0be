"""The instance catalog (GPU counts, GPU memory, prices) the program and the pack share.

The pack reads ``instance_catalog.json`` beside this file, so a published pack carries its own copy.
GPU families outside the catalog are still recognised by name (``g*``/``gr*``/``p*`` + generation),
but counts and prices come only from the table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from capacity.instances import CATALOG_PATH, load_instances
from lib.placement import Constraint, requirement_constraint

GPU_FAMILY = re.compile(r"^(g|gr|p)\d")
GPU_INSTANCE_CATEGORIES = frozenset({"g", "p"})
KARPENTER_PREFIX, AUTO_MODE_PREFIX = "karpenter.k8s.aws/", "eks.amazonaws.com/"


def label_key_variants(name: str) -> tuple[str, str]:
    """A well-known instance label under Karpenter's and EKS Auto Mode's prefix (``instance-gpu-count``)."""
    return KARPENTER_PREFIX + name, AUTO_MODE_PREFIX + name


@dataclass(frozen=True)
class InstanceType:
    name: str
    category: str
    family: str
    vcpu: int
    memory_mib: int
    gpus: int
    gpu_name: str | None
    gpu_memory_mib: int | None
    hourly_usd: float

    @property
    def per_gpu_hourly_usd(self) -> float | None:
        return self.hourly_usd / self.gpus if self.gpus else None

    def node_labels(self) -> dict[str, str]:
        """The well-known labels Karpenter puts on a node of this type."""
        size = self.name.split(".", 1)[1] if "." in self.name else ""
        generation = re.sub(r"\D", "", self.family.split("-")[0])[:1]
        labels = {
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
        labels.update({k.replace(KARPENTER_PREFIX, AUTO_MODE_PREFIX): v for k, v in list(labels.items())
                       if k.startswith(KARPENTER_PREFIX)})
        return labels


@dataclass(frozen=True)
class Catalog:
    hours_per_month: float
    instances: dict[str, InstanceType]

    def get(self, name: Any) -> InstanceType | None:
        return self.instances.get(name) if isinstance(name, str) else None

    def selectable(self, requirements: list[Any]) -> list[InstanceType] | None:
        """Catalog types a Karpenter requirement list admits; ``None`` if a requirement is unknown.

        Requirements on keys the catalog does not describe (zone, capacity type, custom labels)
        do not narrow the set.
        """
        constraints: dict[str, Constraint] = {}
        for requirement in requirements:
            constraint = requirement_constraint(requirement)
            if constraint is None:
                return None
            key = requirement["key"]
            constraints[key] = constraints[key] & constraint if key in constraints else constraint
        described = set(next(iter(self.instances.values())).node_labels()) | GPU_LABEL_KEYS
        result = []
        for instance in self.instances.values():
            labels = instance.node_labels()
            ok = True
            for key, constraint in constraints.items():
                if key not in described:
                    continue
                node = Constraint.fixed(labels[key]) if key in labels else Constraint.missing()
                if not (node & constraint).satisfiable():
                    ok = False
                    break
            if ok:
                result.append(instance)
        return result


GPU_LABEL_KEYS = frozenset(
    key
    for name in ("instance-gpu-count", "instance-gpu-manufacturer", "instance-gpu-name", "instance-gpu-memory")
    for key in label_key_variants(name)
)


def is_gpu_instance_type(name: Any) -> bool:
    """GPU instance types by family name (``g5.xlarge``, ``p4d.24xlarge``), catalog or not."""
    if not isinstance(name, str):
        return False
    instance = load_catalog().get(name)
    if instance is not None:
        return instance.gpus > 0
    return bool(GPU_FAMILY.match(name.split(".", 1)[0]))


def is_gpu_family(family: Any) -> bool:
    return isinstance(family, str) and bool(GPU_FAMILY.match(family))


@lru_cache(maxsize=1)
def load_catalog(path: Path = CATALOG_PATH) -> Catalog:
    """The pool policies' view of the one reader of ``instance_catalog.json`` (``capacity.instances``)."""
    shared = load_instances(path)
    instances = {
        name: InstanceType(
            name=name,
            category=i.category,
            family=i.family,
            vcpu=i.vcpu,
            memory_mib=i.memory_mib,
            gpus=i.gpus,
            gpu_name=i.gpu_name,
            gpu_memory_mib=i.gpu_memory_mib,
            hourly_usd=i.hourly_usd,
        )
        for name, i in shared.instances.items()
    }
    return Catalog(hours_per_month=shared.hours_per_month, instances=instances)
