"""The system pool keeps controllers up: on-demand, at least two nodes, no taint.

Karpenter, CoreDNS, the gateway and the device plugin's own controllers run there; a Spot
interruption or a single node takes the whole platform down with it, and a taint keeps the
controllers (which select the pool by its purpose label) from scheduling at all.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from capacity.node_pools import read_group
from lib.kit import MANDATORY, resource_policy
from lib.placement import HARD_EFFECTS
from lib.resources import NODE_GROUP_TYPES, Resource
from lib.values import UNKNOWN, as_int, fmt


def _check(resource: Resource, config: dict[str, Any]) -> Iterator[str]:
    labels = resource.get("labels", default={})
    if not isinstance(labels, dict) or labels.get(config["purposeLabel"]) != config["systemPurpose"]:
        return
    group = read_group(resource)
    capacity = group.capacity_type
    if capacity not in (UNKNOWN, "ON_DEMAND"):
        yield (f"{resource.label} is the system pool but runs {capacity} capacity, so an interruption can take "
               f"every controller down at once. Set capacityType: ON_DEMAND.")
    label = labels.get(config["capacityTypeLabel"])
    if isinstance(label, str) and capacity == "ON_DEMAND" and label != "on-demand":
        yield (f"{resource.label} labels itself {config['capacityTypeLabel']}={label} but runs on-demand "
               f"capacity. Set the label to on-demand.")
    min_size = group.min_size
    if min_size is not UNKNOWN and (as_int(min_size) or 0) < config["minSize"]:
        yield (f"{resource.label} is the system pool with minSize {fmt(min_size)}; it needs at least "
               f"{fmt(config['minSize'])} nodes (spread over two AZs) to survive a node loss. Raise "
               f"scalingConfig.minSize to {fmt(config['minSize'])}.")
    hard = [t for t in group.taints or () if t.effect in HARD_EFFECTS]
    if hard:
        yield (f"{resource.label} is the system pool but carries taint {', '.join(map(str, hard))}, so "
               f"controllers that select it cannot schedule. Remove the taint.")


POLICIES = [
    resource_policy(
        name="system-pool-on-demand-ha",
        description="Run the system node pool on-demand, untainted, with scalingConfig.minSize of at least 2.",
        types=NODE_GROUP_TYPES,
        check=_check,
        enforcement=MANDATORY,
        contract=("purposeLabel", "systemPurpose", "capacityTypeLabel"),
        params={"minSize": {"type": "integer", "minimum": 1, "default": 2,
                            "description": "Fewest nodes the system pool may scale down to."}},
    ),
]
