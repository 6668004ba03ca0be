"""Reading node pools from a stack's resources: which resources describe a pool, and which catalog
instance types a Karpenter NodePool's requirements admit.

One reader for both views of a pool: the capacity model's (``engine``: room, bounds, capacity
source) and the pack's scheduling policies' (``lib/pools``, ``lib/catalog``: labels, taints, what is
not known yet). Plain functions over anything with ``type``, ``urn`` and ``parent``, and over
requirement dicts; whether a value is known is the caller's to judge before it asks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .kinds import AWS_NODE_GROUP, EKS_MANAGED_NODE_GROUP, EKS_SELF_MANAGED_NODE_GROUPS, HYBRID_NODE_POOL, NODEPOOL

#: The resource types a pool is read from (their ancestors are known by type and parent alone).
POOL_TYPES = frozenset({EKS_MANAGED_NODE_GROUP, AWS_NODE_GROUP, NODEPOOL, HYBRID_NODE_POOL, *EKS_SELF_MANAGED_NODE_GROUPS})


def pool_resources(resources: Iterable[Any]) -> list[Any]:
    """The resources that describe the stack's pools, each pool once, in the stack's order.

    A pulumi-eks ManagedNodeGroup is a remote component: in a real preview its registered view is
    its outputs, and the ``aws`` NodeGroup it creates (its child) describes the pool; under mocks
    there is no child and the component's own inputs do. So a component with a NodeGroup below it
    is left out, the child read instead.
    """
    resources = list(resources)
    by_urn = {r.urn: r for r in resources}
    covered: set[str] = set()
    for resource in resources:
        if resource.type != AWS_NODE_GROUP:
            continue
        parent, seen = getattr(resource, "parent", None), set()
        while parent and parent in by_urn and parent not in seen:
            seen.add(parent)
            if by_urn[parent].type == EKS_MANAGED_NODE_GROUP:
                covered.add(parent)
            parent = getattr(by_urn[parent], "parent", None)
    return [r for r in resources if r.type in POOL_TYPES and r.urn not in covered]


#: Deprecated label keys Karpenter rewrites to their stable names before it reads a requirement
#: (kubernetes-sigs/karpenter pkg/apis/v1/labels.go, ``NormalizedLabels``).
NORMALIZED_LABELS: dict[object, str] = {
    "failure-domain.beta.kubernetes.io/zone": "topology.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region": "topology.kubernetes.io/region",
    "beta.kubernetes.io/arch": "kubernetes.io/arch",
    "beta.kubernetes.io/os": "kubernetes.io/os",
    "beta.kubernetes.io/instance-type": "node.kubernetes.io/instance-type",
}


def normalized(requirements: Iterable[Any]) -> list[dict[str, Any]]:
    """A NodePool's requirements, deprecated keys under their stable names as Karpenter reads them."""
    return [{**r, "key": NORMALIZED_LABELS.get(r.get("key"), r.get("key"))} for r in requirements if isinstance(r, dict)]


#: Keys that say nothing about which catalog type a pool gets: the catalog holds x86_64 Linux types
#: only, which is not a claim that no arm64 GPU type exists (``g5g``), so these never narrow it.
UNDESCRIBED_KEYS = frozenset({"kubernetes.io/os", "kubernetes.io/arch"})
#: Labels Karpenter puts only on GPU types (``instances.Instance.labels``): a type without one has it as
#: ``DoesNotExist`` (aws/karpenter-provider-aws pkg/providers/instancetype/types.go ``computeRequirements``).
GPU_ONLY_LABELS = ("instance-gpu-count", "instance-gpu-manufacturer", "instance-gpu-memory", "instance-gpu-name")
_BOUNDS = {"Gt": lambda n, b: n > b, "Gte": lambda n, b: n >= b, "Lt": lambda n, b: n < b, "Lte": lambda n, b: n <= b}


def admits(labels: Mapping[str, str], requirements: Iterable[Mapping[str, Any]]) -> bool:
    """Whether a type with well-known ``labels`` meets a NodePool's (normalized) requirements, by
    Karpenter's rule (kubernetes-sigs/karpenter pkg/scheduling/requirements.go ``Intersects``,
    requirement.go): a type that lacks a GPU label meets a requirement on it only through ``NotIn`` or
    ``DoesNotExist`` (``Gt``/``Gte``/``Lt``/``Lte`` are bounds on a value that must exist: ``Gte 0`` on the
    GPU count admits GPU types only, where the textbook reading "count >= 0" would admit every CPU type
    too). Labels the catalog does not describe, and :data:`UNDESCRIBED_KEYS`, are not judged."""
    for req in requirements:
        key, op, values = req.get("key"), req.get("operator"), [str(v) for v in req.get("values") or []]
        if key in UNDESCRIBED_KEYS:
            continue
        have = labels.get(key) if isinstance(key, str) else None
        if have is None:
            if isinstance(key, str) and key.rsplit("/", 1)[-1] in GPU_ONLY_LABELS and op not in ("NotIn", "DoesNotExist"):
                return False
            continue
        if op == "In" and have not in values:
            return False
        if op == "NotIn" and have in values:
            return False
        if op in _BOUNDS and values:
            try:
                number, bound = int(have), int(values[0])
            except ValueError:
                return False
            if not _BOUNDS[op](number, bound):
                return False
        if op == "DoesNotExist":
            return False
    return True
