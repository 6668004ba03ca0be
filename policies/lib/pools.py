"""Node pools of a stack as the scheduling, DRA, agent and capacity policies see them.

Each pool is read once, whatever resource declares it (``capacity.node_pools``: managed and
self-managed node groups, Karpenter and Auto Mode NodePools, hybrid pools), into a record that keeps
what a preview does not know yet; the capacity model reads the same records. A :class:`Pool` adds
what the policies ask of it: which labels its nodes can carry (:class:`~lib.placement.Constraint`
per key), its hard taints, and the catalog instance types it may launch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from capacity.instances import AUTO_MODE_PREFIX, KARPENTER_PREFIX
from capacity.node_pools import (
    POOL_READS,
    DeclaredGroup,
    DeclaredHybrid,
    DeclaredNodePool,
    DeclaredPool,
    declared_pools,
    group_owner,
    read_group,
    read_nodepool,
)

from lib.catalog import Instance, load_catalog
from lib.kit import Stack
from lib.placement import (
    HARD_EFFECTS,
    Constraint,
    SelectorTerm,
    Taint,
    requirement_constraint,
    tolerates_all,
)
from lib.resources import LAUNCH_TEMPLATE, NODEPOOL, Resource
from lib.values import UNKNOWN, as_dict, as_int, quantity

#: GPUs of the catalog that Multi-Instance GPU can partition (NVIDIA MIG user guide, "Supported GPUs":
#: A100, A30, H100, H200, H20, B200, B300 and RTX PRO 6000 Blackwell Server Edition). A10G, L4, L40S
#: and T4 have no MIG: a pod asking for ``nvidia.com/mig-<profile>`` never finds one there.
MIG_GPUS = frozenset({"a100", "a30", "h100", "h200", "h20", "b200", "b300", "rtx-pro-server-6000"})


@dataclass
class Pool:
    """A declared pool (``capacity.node_pools``) with what the policies ask of it."""

    declared: DeclaredPool
    constraint: Callable[[str], Constraint | None]
    #: Catalog types it may launch (``None``: not known yet); ``uncatalogued``: named types the catalog lacks.
    instance_types: list[Instance] | None
    uncatalogued: list[str] = field(default_factory=list)

    @property
    def resource(self) -> Resource:
        return self.declared.resource

    @property
    def kind(self) -> str:
        return self.declared.kind

    @property
    def label(self) -> str:
        return self.declared.label

    @property
    def is_gpu(self) -> bool | None:
        return self.declared.is_gpu

    @property
    def karpenter(self) -> bool:
        """Nodes come from a NodePool (Karpenter's or Auto Mode's)."""
        return isinstance(self.declared, DeclaredNodePool)

    @property
    def ami_type(self) -> Any:
        return self.declared.ami_type if isinstance(self.declared, DeclaredGroup) else None

    @property
    def taints(self) -> list[Taint] | None:
        declared = self.declared.taints
        return None if declared is None else [Taint(t.key, t.value, t.effect) for t in declared]

    @property
    def hard_taints(self) -> list[Taint] | None:
        if self.taints is None:
            return None
        return [t for t in self.taints if t.effect in HARD_EFFECTS]

    @property
    def max_gpus_per_node(self) -> int | None:
        if not self.instance_types or self.uncatalogued:
            return None
        return max(t.gpus for t in self.instance_types)

    @property
    def mig_capable(self) -> bool | None:
        """Whether any of the pool's types has GPUs that MIG can partition (:data:`MIG_GPUS`); ``None``
        when a type is not in the catalog."""
        if not self.instance_types or self.uncatalogued:
            return None
        return any(t.gpu_name in MIG_GPUS for t in self.instance_types)

    @property
    def bottlerocket(self) -> bool:
        return isinstance(self.ami_type, str) and self.ami_type.startswith("BOTTLEROCKET")


# --- managed and self-managed node groups -----------------------------------------------------


def node_group_template(stack: Stack, group: Resource) -> Resource | None:
    """The group's launch template: the one template beside it under its owner
    (``capacity.node_pools.group_owner``), or None when there is not exactly one there (then the
    template is not where the program puts it and is not read)."""
    owner = group_owner(group, stack.by_urn)
    templates = [r for r in stack.of_type(LAUNCH_TEMPLATE) if (r.parent or "") == owner]
    return templates[0] if len(templates) == 1 else None


def _group_constraint(group: DeclaredGroup) -> Callable[[str], Constraint | None]:
    labels, types, ami_type = group.labels, group.instance_types, group.ami_type
    managed, capacity, group_name = group.managed, group.capacity_type, group.group_name

    def constraint(key: str) -> Constraint | None:
        if labels is UNKNOWN:
            return None
        if isinstance(labels, dict) and key in labels:
            value = labels[key]
            return None if value is UNKNOWN else Constraint.fixed(value)
        if key in ("node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type"):
            return None if types is None else Constraint.one_of(list(types))
        if key in ("kubernetes.io/arch", "beta.kubernetes.io/arch"):
            if not isinstance(ami_type, str):
                return None if ami_type is UNKNOWN else Constraint.any_value()
            return Constraint.fixed("arm64" if "ARM_64" in ami_type else "amd64")
        if key in ("kubernetes.io/os", "beta.kubernetes.io/os"):
            return Constraint.fixed("linux")
        if key in ("topology.kubernetes.io/zone", "topology.kubernetes.io/region", "kubernetes.io/hostname"):
            return Constraint.any_value()
        if managed and key == "eks.amazonaws.com/capacityType":
            return None if capacity is UNKNOWN else Constraint.fixed(capacity)
        if managed and key == "eks.amazonaws.com/nodegroup":
            return Constraint.fixed(group_name) if isinstance(group_name, str) and group_name else Constraint.any_value()
        if managed and key in ("eks.amazonaws.com/nodegroup-image", "eks.amazonaws.com/sourceLaunchTemplateId"):
            return Constraint.any_value()
        return Constraint.missing()

    return constraint


def _group_pool(group: DeclaredGroup) -> Pool:
    catalog = load_catalog()
    known = [catalog.get(t) for t in group.instance_types or ()]
    return Pool(
        declared=group, constraint=_group_constraint(group),
        instance_types=None if group.instance_types is None else [t for t in known if t is not None],
        uncatalogued=[t for t in group.instance_types or () if catalog.get(t) is None],
    )


# --- Karpenter NodePools ----------------------------------------------------------------------

#: Instance labels Karpenter sets on every node it launches (under ``karpenter.k8s.aws/``; EKS Auto
#: Mode nodes carry the same names under ``eks.amazonaws.com/``).
INSTANCE_LABELS = (
    "instance-category",
    "instance-family",
    "instance-generation",
    "instance-size",
    "instance-cpu",
    "instance-memory",
    "instance-hypervisor",
)
KARPENTER_ALWAYS_PRESENT = (
    "node.kubernetes.io/instance-type",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "kubernetes.io/hostname",
    *(KARPENTER_PREFIX + name for name in INSTANCE_LABELS),
)
AUTO_MODE_ALWAYS_PRESENT = tuple(k.replace(KARPENTER_PREFIX, AUTO_MODE_PREFIX) for k in KARPENTER_ALWAYS_PRESENT)
#: What Karpenter assumes when a NodePool has no requirement on these keys.
KARPENTER_DEFAULTS = {
    "karpenter.sh/capacity-type": "on-demand",
    "kubernetes.io/arch": "amd64",
    "kubernetes.io/os": "linux",
}


def _nodepool_constraint(pool: DeclaredNodePool) -> Callable[[str], Constraint | None]:
    requirements, labels, name, node_class, auto_mode = (
        pool.requirements, pool.labels, pool.pool_name, pool.node_class, pool.auto_mode)

    def constraint(key: str) -> Constraint | None:
        if requirements is None or labels is UNKNOWN:
            return None
        result: Constraint | None = None
        if isinstance(labels, dict) and key in labels:
            if labels[key] is UNKNOWN:
                return None
            result = Constraint.fixed(labels[key])
        for requirement in requirements:
            if requirement.get("key") == key:
                c = requirement_constraint(requirement)
                if c is None:
                    return None
                result = c if result is None else result & c
        if key == "karpenter.sh/nodepool":
            fixed = Constraint.fixed(name) if isinstance(name, str) and name else Constraint.any_value()
            return fixed if result is None else result & fixed
        if key == "karpenter.k8s.aws/ec2nodeclass" and isinstance(node_class, str) and not auto_mode:
            return Constraint.fixed(node_class)
        if auto_mode and key == "eks.amazonaws.com/compute-type":
            return Constraint.fixed("auto") if result is None else result & Constraint.fixed("auto")
        prefix = AUTO_MODE_PREFIX if auto_mode else KARPENTER_PREFIX
        well_known = (
            key in KARPENTER_DEFAULTS
            or key in (AUTO_MODE_ALWAYS_PRESENT if auto_mode else KARPENTER_ALWAYS_PRESENT)
            or key.startswith(prefix + "instance-gpu")
        )
        if result is not None:
            if result.exists or result.absent:
                return result
            return result & (Constraint.any_value() if well_known else Constraint.missing())
        if key in KARPENTER_DEFAULTS:
            return Constraint.fixed(KARPENTER_DEFAULTS[key])
        return Constraint.any_value() if well_known else Constraint.missing()

    return constraint


def _nodepool_pool(pool: DeclaredNodePool) -> Pool:
    selectable = None if pool.requirements is None else load_catalog().selectable(list(pool.requirements))
    if selectable is not None and pool.is_gpu:
        selectable = [t for t in selectable if t.gpus > 0]
    return Pool(declared=pool, constraint=_nodepool_constraint(pool), instance_types=selectable)


# --- on-prem servers joined as hybrid nodes ----------------------------------------------------


def _hybrid_pool(pool: DeclaredHybrid) -> Pool:
    """Fixed labels and taints, one server shape."""
    labels = pool.hybrid.labels

    def constraint(key: str) -> Constraint | None:
        if key in labels:
            return Constraint.fixed(labels[key])
        return Constraint.any_value() if key in ("kubernetes.io/hostname", "kubernetes.io/os") else Constraint.missing()

    return Pool(declared=pool, constraint=constraint, instance_types=[pool.hybrid.instance])


# --- the stack's pools ------------------------------------------------------------------------


def pool_view(declared: DeclaredPool) -> Pool:
    """The policies' view of one declared pool."""
    if isinstance(declared, DeclaredNodePool):
        return _nodepool_pool(declared)
    if isinstance(declared, DeclaredHybrid):
        return _hybrid_pool(declared)
    assert isinstance(declared, DeclaredGroup)
    return _group_pool(declared)


def stack_pools(stack: Stack) -> list[Pool]:
    """Every pool once (found once per AnalyzeStack call for all stack policies; the pools are shared).

    AnalyzeStack hands the engine's view of each resource: for a remote component such as the
    pulumi-eks ManagedNodeGroup that is its registered outputs, not its inputs, so when the stack
    holds the aws NodeGroup child (a real preview) the child describes the pool; under mocks there
    is no child and the component's recorded inputs do (``capacity.node_pools.pool_resources``).
    """
    def compute() -> list[Pool]:
        return [pool_view(declared) for declared in declared_pools(stack.resources)]

    return list(stack.derived("stack pools", None, compute, reads=POOL_READS))


def resource_pool(resource: Resource) -> Pool:
    """The view of a node group or NodePool read alone (a resource policy sees no launch template)."""
    return pool_view(read_nodepool(resource) if resource.type == NODEPOOL else read_group(resource))


# --- matching pods to pools -------------------------------------------------------------------


def labels_match(pool: Pool, alternatives: list[SelectorTerm]) -> tuple[bool | None, str]:
    """Whether some selector alternative can be met by a node of ``pool``; the reason if not."""
    reasons = []
    undecided = False
    for alternative in alternatives:
        failed = None
        for key, wanted in alternative.constraints.items():
            offered = pool.constraint(key)
            if offered is None:
                undecided = True
                failed = None
                break
            if not (offered & wanted).satisfiable():
                failed = key
                break
        else:
            return True, ""
        if failed:
            reasons.append(f"'{failed}'")
    if undecided:
        return None, ""
    keys = list(dict.fromkeys(reasons))
    return False, f"its nodes cannot satisfy {' nor '.join(keys)}" if keys else "no selector term matches"


def untolerated_taints(pool: Pool, tolerations: Any) -> list[Taint] | None:
    """Hard taints of ``pool`` the tolerations do not cover (``None`` = can't judge)."""
    taints = pool.hard_taints
    if taints is None:
        return None
    missing = []
    for taint in taints:
        verdict = tolerates_all(tolerations, taint)
        if verdict is None:
            return None
        if not verdict:
            missing.append(taint)
    return missing


def gpu_memory_values(pool: Pool, memory_label: str, alternative: SelectorTerm | None = None) -> set[int] | None:
    """GPU memory (MiB per GPU) the pool's nodes may have, from the contract label, else the catalog."""
    offered = pool.constraint(memory_label)
    if offered is not None and not offered.absent:
        if alternative is not None and memory_label in alternative.constraints:
            offered = offered & alternative.constraints[memory_label]
        candidates = offered.candidates()
        if candidates is not None:
            return {n for n in map(as_int, candidates) if n is not None}
    if pool.instance_types and not pool.uncatalogued:
        values = {t.gpu_memory_mib for t in pool.instance_types if t.gpu_memory_mib}
        return values or None
    return None


def gpu_limit(pool: DeclaredNodePool, gpu_resource: str) -> float | None | Any:
    """A NodePool's GPU limit: a number, ``None`` when absent, :data:`UNKNOWN` when unknown."""
    limits = pool.limits
    if limits is UNKNOWN:
        return UNKNOWN
    value = as_dict(limits).get(gpu_resource)
    if value is UNKNOWN:
        return UNKNOWN
    return quantity(value) if value is not None else None
