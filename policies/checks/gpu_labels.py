"""GPU pools say what they are, truthfully: purpose, accelerator, GPU memory, capacity type.

Workloads pick pools by these labels, and the scheduling policy trusts them; a label that
disagrees with the instance types (an ``a10g`` label on a pool that also launches L40S nodes)
sends a model to a GPU too small for it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from capacity.node_pools import DeclaredGroup
from lib.kit import MANDATORY, resource_policy
from lib.pools import Pool, resource_pool
from lib.resources import NODE_GROUP_TYPES, NODEPOOL, Resource
from lib.values import UNKNOWN

CAPACITY_LABEL_VALUES = {"ON_DEMAND": "on-demand", "SPOT": "spot", "CAPACITY_BLOCK": "reserved"}


def _label(pool: Pool, key: str) -> Any:
    """The single value every node of the pool carries for ``key``; ``None`` if absent/varying."""
    offered = pool.constraint(key)
    if offered is None:
        return UNKNOWN
    candidates = offered.candidates() if not offered.absent else None
    return next(iter(candidates)) if candidates and len(candidates) == 1 else None


def _capacity(pool: Pool) -> Any:
    if pool.karpenter:
        offered = pool.constraint("karpenter.sh/capacity-type")
        if offered is None:
            return UNKNOWN
        values = offered.candidates()
        return next(iter(values)) if values and len(values) == 1 else None
    capacity = pool.declared.capacity_type if isinstance(pool.declared, DeclaredGroup) else UNKNOWN
    return capacity if capacity is UNKNOWN else CAPACITY_LABEL_VALUES.get(capacity)


def _check(resource: Resource, config: dict[str, Any]) -> Iterator[str]:
    pool = resource_pool(resource)
    if pool.is_gpu is not True:
        return
    keys = [config[k] for k in ("purposeLabel", "acceleratorLabel", "gpuMemoryLabel", "capacityTypeLabel")]
    found = {key: _label(pool, key) for key in keys}
    capacity = _capacity(pool)
    if pool.karpenter and capacity is None:
        # Mixed Spot/on-demand NodePool: no single label value is true; workloads select on
        # karpenter.sh/capacity-type, which Karpenter sets per node.
        found.pop(config["capacityTypeLabel"])
    missing = [key for key, value in found.items() if value is None]
    where = "spec.template.metadata.labels" if pool.karpenter else "labels"
    if missing:
        yield (f"{resource.label} is a GPU pool without the contract label(s) {', '.join(missing)}, so workloads "
               f"cannot select it by what it is. Add them to {where}.")
    problems = []
    types = pool.instance_types if pool.instance_types and not pool.uncatalogued else []
    accelerator = found[config["acceleratorLabel"]]
    names = {t.gpu_name for t in types if t.gpus}
    if isinstance(accelerator, str) and names and names != {accelerator.lower()}:
        problems.append(f"{config['acceleratorLabel']}={accelerator} but its instance types carry {', '.join(sorted(map(str, names)))}")
    memory = found[config["gpuMemoryLabel"]]
    # A GPU type whose memory the catalog does not know cannot contradict the label (and None would
    # not sort beside the sizes).
    sizes = {t.gpu_memory_mib for t in types if t.gpus and t.gpu_memory_mib is not None}
    if isinstance(memory, str) and sizes and {str(s) for s in sizes} != {memory}:
        problems.append(f"{config['gpuMemoryLabel']}={memory} but its instance types have {', '.join(map(str, sorted(sizes)))} MiB per GPU")
    capacity_label = found.get(config["capacityTypeLabel"])
    if isinstance(capacity_label, str) and isinstance(capacity, str) and capacity_label != capacity:
        problems.append(f"{config['capacityTypeLabel']}={capacity_label} but it runs {capacity} capacity")
    if problems:
        yield (f"{resource.label} has labels that do not match its nodes: {'; '.join(problems)}. Fix the labels, "
               f"or split the pool so each pool has one GPU model.")


POLICIES = [
    resource_policy(
        name="gpu-pool-labels",
        description=(
            "Label every GPU pool with its purpose, accelerator, GPU memory and capacity type, matching its "
            "instance types."
        ),
        types=NODE_GROUP_TYPES | {NODEPOOL},
        check=_check,
        enforcement=MANDATORY,
        contract=("purposeLabel", "acceleratorLabel", "gpuMemoryLabel", "capacityTypeLabel"),
    ),
]
