"""Node pools of a stack, whatever resource declares them, as one model.

Managed node groups (pulumi-eks component or the aws child it creates), self-managed pulumi-eks
node groups and Karpenter NodePools all become a :class:`Pool`: which labels its nodes can carry,
its hard taints, whether it is GPU capacity, and the catalog instance types it may launch. The
scheduling, DRA, agent and capacity policies reason over pools, never over resource shapes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from capacity.hybrid import HYBRID_KIND
from capacity.hybrid import read as read_hybrid_pool
from capacity.instances import AUTO_MODE_PREFIX, KARPENTER_PREFIX
from capacity.node_pools import POOL_TYPES, normalized, pool_resources

from lib.catalog import (
    GPU_INSTANCE_CATEGORIES,
    Instance,
    is_gpu_family,
    is_gpu_instance_type,
    load_catalog,
)
from lib.kit import Stack
from lib.placement import (
    EKS_EFFECTS,
    HARD_EFFECTS,
    Constraint,
    SelectorTerm,
    Taint,
    requirement_constraint,
    tolerates_all,
)
from lib.resources import (
    EKS_MANAGED_NODE_GROUP,
    EKS_SELF_MANAGED_NODE_GROUPS,
    HYBRID_NODE_POOL,
    LAUNCH_TEMPLATE,
    NODEPOOL,
    Resource,
)
from lib.values import UNKNOWN, as_dict, as_int, as_list, contains_unknown, quantity

NVIDIA_AMI_MARKERS = ("NVIDIA", "GPU")
DEFAULT_MNG_INSTANCE_TYPE = "t3.medium"


#: GPUs of the catalog that Multi-Instance GPU can partition (NVIDIA MIG user guide, "Supported GPUs":
#: A100, A30, H100, H200, H20, B200, B300 and RTX PRO 6000 Blackwell Server Edition). A10G, L4, L40S
#: and T4 have no MIG: a pod asking for ``nvidia.com/mig-<profile>`` never finds one there.
MIG_GPUS = frozenset({"a100", "a30", "h100", "h200", "h20", "b200", "b300", "rtx-pro-server-6000"})


@dataclass
class Pool:
    resource: Resource
    kind: str
    is_gpu: bool | None
    taints: list[Taint] | None
    constraint: Callable[[str], Constraint | None]
    instance_types: list[Instance] | None
    uncatalogued: list[str] = field(default_factory=list)
    ami_type: Any = None
    karpenter: bool = False

    @property
    def label(self) -> str:
        return f"{self.kind} '{self.resource.display_name}'"

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


def node_group_instance_types(resource: Resource, template_type: Any = None) -> list[str] | None:
    """The types a group launches: its ``instanceTypes``; without them its launch template's ``instanceType``
    (``template_type``, how a Capacity Block group names its type), else EKS's default ``t3.medium``."""
    if resource.type in EKS_SELF_MANAGED_NODE_GROUPS:
        value = resource.get("instanceType", default=DEFAULT_MNG_INSTANCE_TYPE)
        return None if value is UNKNOWN else [value]
    value = resource.get("instanceTypes", default=[])
    if contains_unknown(value):
        return None
    if not value and template_type is not None:
        return None if template_type is UNKNOWN else [template_type]
    return list(value) or [DEFAULT_MNG_INSTANCE_TYPE]


def node_group_owner(stack: Stack, group: Resource) -> str | None:
    """The component that owns a managed group, as the program and pulumi-eks lay it out: the nearest
    ancestor outside pulumi-eks' and AWS's types (a real preview shows ``aws:eks/nodeGroup:NodeGroup``
    under ``eks:index:ManagedNodeGroup`` under the program's pool component)."""
    for urn in stack.ancestors(group):
        if not stack.by_urn[urn].type.startswith(("eks:index:", "aws:")):
            return urn
    return None


def node_group_template(stack: Stack, group: Resource) -> Resource | None:
    """The group's launch template: the one template beside it under its owner, or None when there is not
    exactly one there (then the template is not where the program puts it and is not read)."""
    owner = node_group_owner(stack, group)
    templates = [r for r in stack.of_type(LAUNCH_TEMPLATE) if owner is not None and r.parent == owner]
    return templates[0] if len(templates) == 1 else None


def template_instance_type(stack: Stack, group: Resource) -> Any:
    """The ``instanceType`` of the group's launch template (None without one, UNKNOWN while computed)."""
    template = node_group_template(stack, group) if group.type not in EKS_SELF_MANAGED_NODE_GROUPS else None
    return None if template is None else template.get("instanceType")


def node_group_is_gpu(resource: Resource, template_type: Any = None) -> bool | None:
    """GPU capacity by NVIDIA AMI type, ``gpu: true`` or a GPU instance type."""
    ami_type = resource.get("amiType")
    if isinstance(ami_type, str) and any(marker in ami_type for marker in NVIDIA_AMI_MARKERS):
        return True
    if resource.get("gpu") is True:
        return True
    types = node_group_instance_types(resource, template_type)
    if types and any(is_gpu_instance_type(t) for t in types):
        return True
    if types is None or UNKNOWN in (ami_type, resource.get("gpu")):
        return None
    return False


def node_group_taints(resource: Resource) -> list[Taint] | None:
    """Taints in Kubernetes spelling; pulumi-eks self-managed groups key them by taint key."""
    raw = resource.get("taints", default=[])
    if contains_unknown(raw):
        return None
    if isinstance(raw, dict):
        return [Taint(key, as_dict(t).get("value"), as_dict(t).get("effect")) for key, t in raw.items()]
    return [
        Taint(t.get("key"), t.get("value"), EKS_EFFECTS.get(t.get("effect"), t.get("effect")))
        for t in as_list(raw)
        if isinstance(t, dict)
    ]


def node_group_scaling(resource: Resource) -> dict[str, Any]:
    if resource.type in EKS_SELF_MANAGED_NODE_GROUPS:
        return {"minSize": resource.get("minSize", default=1), "maxSize": resource.get("maxSize", default=2)}
    scaling = resource.get("scalingConfig", default={})
    if scaling is UNKNOWN:
        return {"minSize": UNKNOWN, "maxSize": UNKNOWN}
    defaults = {"minSize": 1, "maxSize": 2} if resource.type == EKS_MANAGED_NODE_GROUP else {}
    return {**defaults, **{k: v for k, v in as_dict(scaling).items() if v is not None}}


def node_group_capacity_type(resource: Resource) -> Any:
    if resource.type in EKS_SELF_MANAGED_NODE_GROUPS:
        spot = resource.get("spotPrice")
        return UNKNOWN if spot is UNKNOWN else ("SPOT" if spot else "ON_DEMAND")
    return resource.get("capacityType", default="ON_DEMAND")


def _node_group_pool(resource: Resource, template_type: Any = None) -> Pool:
    catalog = load_catalog()
    labels = resource.get("labels", default={})
    types = node_group_instance_types(resource, template_type)
    ami_type = resource.get("amiType")
    capacity = node_group_capacity_type(resource)
    group_name = resource.get("nodeGroupName")
    managed = resource.type not in EKS_SELF_MANAGED_NODE_GROUPS

    def constraint(key: str) -> Constraint | None:
        if labels is UNKNOWN:
            return None
        if isinstance(labels, dict) and key in labels:
            value = labels[key]
            return None if value is UNKNOWN else Constraint.fixed(value)
        if key in ("node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type"):
            return None if types is None else Constraint.one_of(types)
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

    known = [catalog.get(t) for t in types or []]
    kind = "managed node group" if managed else "self-managed node group"
    return Pool(
        resource=resource,
        kind=kind,
        is_gpu=node_group_is_gpu(resource, template_type),
        taints=node_group_taints(resource),
        constraint=constraint,
        instance_types=None if types is None else [t for t in known if t is not None],
        uncatalogued=[t for t in types or [] if catalog.get(t) is None],
        ami_type=ami_type,
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


def is_auto_mode(resource: Resource) -> bool:
    """A NodePool served by EKS Auto Mode: its nodeClassRef names the ``eks.amazonaws.com`` NodeClass."""
    return resource.get("spec", "template", "spec", "nodeClassRef", "group") == "eks.amazonaws.com"


def nodepool_requirements(resource: Resource) -> list[Any] | None:
    """The NodePool's requirements, deprecated keys under their stable names as Karpenter reads them."""
    requirements = resource.get("spec", "template", "spec", "requirements", default=[])
    if contains_unknown(requirements):
        return None
    return normalized(as_list(requirements))


def _instance_label(key: Any) -> str | None:
    """``instance-gpu-count`` for either provisioner's spelling of an instance label, else ``None``."""
    for prefix in (KARPENTER_PREFIX, AUTO_MODE_PREFIX):
        if isinstance(key, str) and key.startswith(prefix):
            return key[len(prefix):]
    return None


def nodepool_is_gpu(resource: Resource, gpu_resource: str = "nvidia.com/gpu") -> bool | None:
    """GPU capacity: a GPU limit above zero, or a requirement that selects GPU instances by type (its
    deprecated ``beta.kubernetes.io/instance-type`` key included), family, category (g/p), GPU
    name/manufacturer/memory or a GPU count above zero, under Karpenter's or Auto Mode's keys.

    ``Lt``/``Lte`` on the GPU count or GPU memory labels select GPU types only: only GPU types carry
    those labels, and a numeric requirement does not match a node without the label (Karpenter's
    requirement semantics, kubernetes-sigs/karpenter pkg/scheduling/requirement.go). A limit of ``0``
    on the GPU resource is a guard that keeps GPUs out, not a GPU pool.
    """
    limits = resource.get("spec", "limits", default={})
    if isinstance(limits, dict) and gpu_resource in limits:
        bound = limits[gpu_resource]
        if bound is UNKNOWN:
            return None
        if (quantity(bound) or 0) > 0:
            return True
    requirements = nodepool_requirements(resource)
    if requirements is None:
        return None
    for requirement in requirements:
        key, operator = requirement.get("key"), requirement.get("operator")
        name = _instance_label(key)
        values = [str(v) for v in as_list(requirement.get("values", []))]
        if operator == "In":
            if name == "instance-category" and GPU_INSTANCE_CATEGORIES & set(values):
                return True
            if name == "instance-family" and any(is_gpu_family(v) for v in values):
                return True
            if key == "node.kubernetes.io/instance-type" and any(is_gpu_instance_type(v) for v in values):
                return True
            if name == "instance-gpu-count" and any((as_int(v) or 0) > 0 for v in values):
                return True
        if name in ("instance-gpu-name", "instance-gpu-manufacturer", "instance-gpu-memory") and operator in (
            "In", "Exists", "Gt", "Gte"
        ):
            return True
        if name == "instance-gpu-count" and operator in ("Exists", "Gt", "Gte"):
            # Any bound needs the label, which only GPU types carry: Karpenter reads Gt/Gte as "exists, with a
            # lower bound", never met by a type without the label (kubernetes-sigs/karpenter pkg/scheduling
            # requirement.go: a Gt/Gte requirement is a complement with a bound, Operator() Exists), so Gte 0
            # admits every GPU type and no CPU type, though "count >= 0" reads as "any type".
            if operator == "Exists" or (values and as_int(values[0]) is not None):
                return True
        if name in ("instance-gpu-count", "instance-gpu-memory") and operator in ("Lt", "Lte"):
            bound = as_int(values[0]) if values else None
            if bound is not None and bound > (1 if operator == "Lt" and name == "instance-gpu-count" else 0):
                return True
    return False


def _nodepool_pool(resource: Resource) -> Pool:
    catalog = load_catalog()
    requirements = nodepool_requirements(resource)
    labels = resource.get("spec", "template", "metadata", "labels", default={})
    name = resource.get("metadata", "name")
    node_class = resource.get("spec", "template", "spec", "nodeClassRef", "name")
    auto_mode = is_auto_mode(resource)

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

    raw_taints = resource.get("spec", "template", "spec", "taints", default=[])
    taints = (
        None
        if contains_unknown(raw_taints)
        else [Taint(t.get("key"), t.get("value"), t.get("effect")) for t in as_list(raw_taints) if isinstance(t, dict)]
    )
    selectable = None if requirements is None else catalog.selectable(requirements)
    is_gpu = nodepool_is_gpu(resource)
    if selectable is not None and is_gpu:
        selectable = [t for t in selectable if t.gpus > 0]
    return Pool(
        resource=resource,
        kind="Auto Mode NodePool" if auto_mode else "Karpenter NodePool",
        is_gpu=is_gpu,
        taints=taints,
        constraint=constraint,
        instance_types=selectable,
        karpenter=True,
    )


# --- on-prem servers joined as hybrid nodes ----------------------------------------------------


def _hybrid_pool(resource: Resource) -> Pool | None:
    """A hybrid node pool's description (``capacity.hybrid``): fixed labels and taints, one server shape."""
    hybrid = read_hybrid_pool(resource.props)
    if hybrid is None:
        return None
    labels = hybrid.labels

    def constraint(key: str) -> Constraint | None:
        if key in labels:
            return Constraint.fixed(labels[key])
        return Constraint.any_value() if key in ("kubernetes.io/hostname", "kubernetes.io/os") else Constraint.missing()

    return Pool(
        resource=resource, kind=HYBRID_KIND, is_gpu=hybrid.instance.gpus > 0,
        taints=[Taint(t.get("key"), t.get("value"), t.get("effect")) for t in hybrid.taints],
        constraint=constraint, instance_types=[hybrid.instance],
    )


# --- the stack's pools ------------------------------------------------------------------------


def stack_pools(stack: Stack) -> list[Pool]:
    """Every pool once (found once per AnalyzeStack call for all stack policies; the pools are shared).

    AnalyzeStack hands the engine's view of each resource: for a remote component such as the
    pulumi-eks ManagedNodeGroup that is its registered outputs, not its inputs, so when the stack
    holds the aws NodeGroup child (a real preview) the child describes the pool; under mocks there
    is no child and the component's recorded inputs do.
    """
    return list(stack.derived("stack pools", None, lambda: _stack_pools(stack), reads=POOL_READS))


#: What the pools are read from: the pools' own resources, and launch templates (a Capacity Block
#: group's instance type is its template's).
POOL_READS = frozenset({*POOL_TYPES, LAUNCH_TEMPLATE})


def _stack_pools(stack: Stack) -> list[Pool]:
    pools: list[Pool] = []
    for resource in pool_resources(stack.resources):
        if resource.type == NODEPOOL:
            pools.append(_nodepool_pool(resource))
        elif resource.type == HYBRID_NODE_POOL:
            hybrid = _hybrid_pool(resource)
            if hybrid is not None:
                pools.append(hybrid)
        else:
            pools.append(_node_group_pool(resource, template_instance_type(stack, resource)))
    return pools


def node_group_pool(resource: Resource) -> Pool:
    return _node_group_pool(resource)


def nodepool_pool(resource: Resource) -> Pool:
    return _nodepool_pool(resource)


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


def gpu_limit(resource: Resource, gpu_resource: str) -> float | None | Any:
    """A NodePool's GPU limit: a number, ``None`` when absent, :data:`UNKNOWN` when unknown."""
    limits = resource.get("spec", "limits", default={})
    if limits is UNKNOWN:
        return UNKNOWN
    value = as_dict(limits).get(gpu_resource)
    if value is UNKNOWN:
        return UNKNOWN
    return quantity(value) if value is not None else None
