"""Node pools as the stack's resources declare them: one reading of each pool resource.

Managed and self-managed node groups (with a Capacity Block group's launch-template type), Karpenter
and EKS Auto Mode NodePools (requirements, limits, taints) and on-prem hybrid pools each become one
:class:`DeclaredPool`, a record that keeps :data:`~capacity.unknown.UNKNOWN` where a preview does not
know a value yet. Both views of a pool read it: the capacity model's (``engine``: room, bounds,
capacity source) and the pack's scheduling policies' (``lib/pools``: labels, taints, what is not known
yet). Works on anything with ``type``, ``name``, ``urn``, ``parent`` and ``props`` (or ``inputs``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .hybrid import HYBRID_KIND, HybridPool
from .hybrid import read as read_hybrid
from .instances import AUTO_MODE_PREFIX, KARPENTER_PREFIX, load_instances
from .kinds import (
    AWS_NODE_GROUP,
    EKS_MANAGED_NODE_GROUP,
    EKS_SELF_MANAGED_NODE_GROUPS,
    HYBRID_NODE_POOL,
    LAUNCH_TEMPLATE,
    NODEPOOL,
)
from .model import EKS_EFFECTS, GPU_RESOURCE, Taint, quantity
from .values import UNKNOWN, as_dict, as_int, as_list, contains_unknown, dig

#: The resource types a pool is read from (their ancestors are known by type and parent alone).
POOL_TYPES = frozenset({EKS_MANAGED_NODE_GROUP, AWS_NODE_GROUP, NODEPOOL, HYBRID_NODE_POOL, *EKS_SELF_MANAGED_NODE_GROUPS})
#: What the pools are read from: the pools' own resources, and launch templates (a Capacity Block
#: group's instance type is its template's).
POOL_READS = frozenset({*POOL_TYPES, LAUNCH_TEMPLATE})
#: The type EKS launches for a group that names none (``instanceTypes`` absent, no launch template type).
DEFAULT_GROUP_INSTANCE_TYPE = "t3.medium"
#: AMI types that carry NVIDIA drivers (``AL2023_x86_64_NVIDIA``, ``BOTTLEROCKET_x86_64_NVIDIA``, ``AL2_x86_64_GPU``).
NVIDIA_AMI_MARKERS = ("NVIDIA", "GPU")
#: GPU instance families by name (``g5``, ``gr6``, ``p4d``), for types outside the catalog too.
GPU_FAMILY = re.compile(r"^(g|gr|p)\d")
GPU_INSTANCE_CATEGORIES = frozenset({"g", "p"})


def props_of(resource: Any) -> dict[str, Any]:
    """A resource's properties (``props``, else ``inputs``); ``{}`` when neither is a dict."""
    props = getattr(resource, "props", None)
    if props is None:
        props = getattr(resource, "inputs", None)
    return props if isinstance(props, dict) else {}


def pool_resources(resources: Iterable[Any]) -> list[Any]:
    """The resources that describe the stack's pools, each pool once, in the stack's order.

    A pulumi-eks ManagedNodeGroup is a remote component: in a real preview its registered view is
    its outputs, and the ``aws`` NodeGroup it creates (its child) describes the pool; under mocks there
    is no child and the component's own inputs do. So a component with a NodeGroup below it is left
    out, the child read instead.
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


# --- GPU instance types -------------------------------------------------------------------------


def is_gpu_family(family: Any) -> bool:
    return isinstance(family, str) and bool(GPU_FAMILY.match(family))


def is_gpu_instance_type(name: Any) -> bool:
    """GPU instance types by the catalog's GPU count (the same in every region), else by family name
    (``g5.xlarge``, ``p4d.24xlarge``)."""
    if not isinstance(name, str):
        return False
    instance = load_instances().get(name)
    if instance is not None:
        return instance.gpus > 0
    return is_gpu_family(name.split(".", 1)[0])


# --- the record ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class DeclaredPool:
    """What one resource declares about a pool. A value a preview does not know yet is
    :data:`~capacity.values.UNKNOWN` (or ``None`` where a field says so); each view decides what
    that means for its question."""

    #: The resource read: its URN keys findings and the capacity model's pool.
    resource: Any
    #: ``managed node group``, ``self-managed node group``, ``Karpenter NodePool``, ``Auto Mode NodePool``
    #: or the hybrid pool kind (``capacity.hybrid.HYBRID_KIND``).
    kind: str
    #: How findings name the pool: ``metadata.name``, else ``nodeGroupName``, else the resource's name.
    name: str
    #: Labels every node of the pool carries, as declared: a dict (a value UNKNOWN where not known yet)
    #: or UNKNOWN.
    labels: Any
    #: Taints in Kubernetes spelling; ``None`` while any is not known yet.
    taints: tuple[Taint, ...] | None
    #: Whether the pool is GPU capacity (:func:`group_is_gpu`, :func:`nodepool_is_gpu`); ``None`` while
    #: what decides it is not known yet.
    is_gpu: bool | None

    @property
    def label(self) -> str:
        return f"{self.kind} '{self.name}'"


@dataclass(frozen=True)
class DeclaredGroup(DeclaredPool):
    """A managed node group (pulumi-eks component or the aws NodeGroup it creates) or a self-managed one."""

    managed: bool
    #: The types it launches: ``instanceTypes``; without them its launch template's ``instanceType`` (how a
    #: Capacity Block group names its type), else EKS's default; ``None`` while not known yet.
    instance_types: tuple[str, ...] | None
    ami_type: Any
    #: Whether ``gpu: true`` is declared (pulumi-eks self-managed groups).
    gpu_flag: Any
    #: ``ON_DEMAND``, ``SPOT`` or ``CAPACITY_BLOCK`` as the EKS API spells them (a self-managed group: by
    #: ``spotPrice``).
    capacity_type: Any
    #: ``nodeGroupName`` as declared: the value of the ``eks.amazonaws.com/nodegroup`` label.
    group_name: Any
    #: Scaling bounds after the defaults pulumi-eks applies (1 and 2); desired ``None`` when absent.
    min_size: Any
    max_size: Any
    desired_size: Any
    #: ``diskSize`` in GiB (a launch template's volumes are not read).
    disk_size: Any
    #: ``tags`` as declared (a reserved group records its reservations there).
    tags: Any
    #: The component that owns the group (:func:`group_owner`); its launch template and Cluster
    #: Autoscaler node-template tags sit beside the group under it.
    owner: str


@dataclass(frozen=True)
class DeclaredNodePool(DeclaredPool):
    """A Karpenter NodePool, or one EKS Auto Mode serves (its nodeClassRef names ``eks.amazonaws.com``)."""

    auto_mode: bool
    #: ``spec.template.spec.requirements``, deprecated keys under their stable names; ``None`` while not known.
    requirements: tuple[dict[str, Any], ...] | None
    #: ``metadata.name`` as declared: the value of the ``karpenter.sh/nodepool`` label.
    pool_name: Any
    #: The name its nodeClassRef gives.
    node_class: Any
    #: ``spec.limits`` (a dict, or UNKNOWN).
    limits: Any
    #: ``spec.replicas``: a static NodePool's nodes (``None``: not static).
    replicas: Any


@dataclass(frozen=True)
class DeclaredHybrid(DeclaredPool):
    """On-prem servers joined as hybrid nodes, as their pool's description holds them (``capacity.hybrid``)."""

    hybrid: HybridPool


def _display_name(props: dict[str, Any], fallback: str) -> str:
    for name in (dig(props, "metadata", "name"), props.get("nodeGroupName")):
        if isinstance(name, str) and name:
            return name
    return fallback


def _taints(raw: Any, effects: Mapping[object, str] | None = None) -> tuple[Taint, ...] | None:
    """Taints in Kubernetes spelling (``effects`` maps the EKS API's); pulumi-eks self-managed groups key
    them by taint key. ``None`` while any is not known yet."""
    if contains_unknown(raw):
        return None
    if isinstance(raw, dict):
        return tuple(Taint(str(key), str(as_dict(t).get("value") or ""), str(as_dict(t).get("effect")))
                     for key, t in raw.items())
    spell = effects or {}
    return tuple(Taint(str(t.get("key")), str(t.get("value") or ""), spell.get(t.get("effect"), str(t.get("effect"))))
                 for t in as_list(raw) if isinstance(t, dict))


# --- node groups ----------------------------------------------------------------------------------


def group_instance_types(props: dict[str, Any], managed: bool, template_type: Any = None) -> tuple[str, ...] | None:
    """The types a group launches (:attr:`DeclaredGroup.instance_types`)."""
    if not managed:
        value = dig(props, "instanceType", default=DEFAULT_GROUP_INSTANCE_TYPE)
        return None if value is UNKNOWN else (str(value),)
    value = dig(props, "instanceTypes", default=[])
    if contains_unknown(value):
        return None
    names = tuple(t for t in as_list(value) if isinstance(t, str))
    if not names and template_type is UNKNOWN:
        return None
    if not names and isinstance(template_type, str) and template_type:
        return (template_type,)
    return names or (DEFAULT_GROUP_INSTANCE_TYPE,)


def group_is_gpu(ami_type: Any, gpu_flag: Any, types: tuple[str, ...] | None) -> bool | None:
    """GPU capacity by NVIDIA AMI type, ``gpu: true`` or a GPU instance type."""
    if isinstance(ami_type, str) and any(marker in ami_type for marker in NVIDIA_AMI_MARKERS):
        return True
    if gpu_flag is True:
        return True
    if types and any(is_gpu_instance_type(t) for t in types):
        return True
    if types is None or UNKNOWN in (ami_type, gpu_flag):
        return None
    return False


def read_group(resource: Any, template_type: Any = None, owner: str = "") -> DeclaredGroup:
    """A node group's declaration; ``template_type`` is its launch template's ``instanceType`` (None: none)."""
    props = props_of(resource)
    managed = resource.type not in EKS_SELF_MANAGED_NODE_GROUPS
    types = group_instance_types(props, managed, template_type)
    ami_type, gpu_flag = dig(props, "amiType"), dig(props, "gpu")
    desired: Any = None
    if managed:
        scaling = dig(props, "scalingConfig", default={})
        if scaling is UNKNOWN:
            low = high = desired = UNKNOWN
        else:
            low, high = dig(scaling, "minSize", default=1), dig(scaling, "maxSize", default=2)
            desired = dig(scaling, "desiredSize")
        capacity = dig(props, "capacityType", default="ON_DEMAND")
    else:
        low, high = dig(props, "minSize", default=1), dig(props, "maxSize", default=2)
        spot = dig(props, "spotPrice")
        capacity = UNKNOWN if spot is UNKNOWN else ("SPOT" if spot else "ON_DEMAND")
    return DeclaredGroup(
        resource=resource, kind="managed node group" if managed else "self-managed node group",
        name=_display_name(props, resource.name), labels=dig(props, "labels", default={}),
        taints=_taints(dig(props, "taints", default=[]), EKS_EFFECTS), is_gpu=group_is_gpu(ami_type, gpu_flag, types),
        managed=managed, instance_types=types, ami_type=ami_type, gpu_flag=gpu_flag, capacity_type=capacity,
        group_name=dig(props, "nodeGroupName"), min_size=low, max_size=high, desired_size=desired,
        disk_size=dig(props, "diskSize"), tags=dig(props, "tags"), owner=owner,
    )


def group_owner(resource: Any, by_urn: Mapping[str, Any]) -> str:
    """The component that owns a node group, as the program and pulumi-eks lay it out: the nearest
    ancestor outside pulumi-eks' and AWS's types (a real preview shows ``aws:eks/nodeGroup:NodeGroup``
    under ``eks:index:ManagedNodeGroup`` under the program's pool component); without one in the stack,
    the outermost parent named, else ``""`` (then the group's neighbours are the resources without a parent)."""
    parent = getattr(resource, "parent", None)
    seen = set()
    while parent and parent in by_urn and parent not in seen:
        seen.add(parent)
        node = by_urn[parent]
        if not str(node.type).startswith(("eks:index:", "aws:")):
            return str(parent)
        parent = getattr(node, "parent", None)
    return parent or ""


def launch_template_types(resources: Iterable[Any]) -> dict[str, Any]:
    """The ``instanceType`` of each launch template, by the component that parents it (``""``: none): where
    a Capacity Block group names its type (EKS takes it from the template and refuses ``instanceTypes`` on
    the group). A parent with more than one template is left out (which one a group uses is not known)."""
    out: dict[str, Any] = {}
    seen: set[str] = set()
    for r in resources:
        if r.type != LAUNCH_TEMPLATE:
            continue
        parent = getattr(r, "parent", None) or ""
        if parent in seen:
            out.pop(parent, None)
            continue
        seen.add(parent)
        out[parent] = props_of(r).get("instanceType")
    return out


# --- Karpenter and Auto Mode NodePools ------------------------------------------------------------


def _instance_label(key: Any) -> str | None:
    """``instance-gpu-count`` for either provisioner's spelling of an instance label, else ``None``."""
    for prefix in (KARPENTER_PREFIX, AUTO_MODE_PREFIX):
        if isinstance(key, str) and key.startswith(prefix):
            return key[len(prefix):]
    return None


def nodepool_is_gpu(pool: DeclaredNodePool, gpu_resource: str = GPU_RESOURCE) -> bool | None:
    """GPU capacity: a GPU limit above zero, or a requirement that selects GPU instances by type (its
    deprecated ``beta.kubernetes.io/instance-type`` key included), family, category (g/p), GPU
    name/manufacturer/memory or a GPU count above zero, under Karpenter's or Auto Mode's keys.

    ``Lt``/``Lte`` on the GPU count or GPU memory labels select GPU types only: only GPU types carry
    those labels, and a numeric requirement does not match a node without the label (Karpenter's
    requirement semantics, kubernetes-sigs/karpenter pkg/scheduling/requirement.go). A limit of ``0``
    on the GPU resource is a guard that keeps GPUs out, not a GPU pool.
    """
    return _selects_gpus(pool.limits, pool.requirements, gpu_resource)


def _selects_gpus(limits: Any, requirements: tuple[dict[str, Any], ...] | None, gpu_resource: str) -> bool | None:
    if isinstance(limits, dict) and gpu_resource in limits:
        bound = limits[gpu_resource]
        if bound is UNKNOWN:
            return None
        if (quantity(bound) or 0) > 0:
            return True
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


def read_nodepool(resource: Any) -> DeclaredNodePool:
    props = props_of(resource)
    raw = dig(props, "spec", "template", "spec", "requirements", default=[])
    requirements = None if contains_unknown(raw) else tuple(normalized(as_list(raw)))
    limits = dig(props, "spec", "limits", default={})
    auto_mode = dig(props, "spec", "template", "spec", "nodeClassRef", "group") == "eks.amazonaws.com"
    return DeclaredNodePool(
        resource=resource, kind="Auto Mode NodePool" if auto_mode else "Karpenter NodePool",
        name=_display_name(props, resource.name), labels=dig(props, "spec", "template", "metadata", "labels", default={}),
        taints=_taints(dig(props, "spec", "template", "spec", "taints", default=[])),
        is_gpu=_selects_gpus(limits, requirements, GPU_RESOURCE), auto_mode=auto_mode, requirements=requirements,
        pool_name=dig(props, "metadata", "name"), node_class=dig(props, "spec", "template", "spec", "nodeClassRef", "name"),
        limits=limits, replicas=dig(props, "spec", "replicas"),
    )


# --- hybrid pools and the stack's pools -----------------------------------------------------------


def read_hybrid_pool(resource: Any) -> DeclaredHybrid | None:
    """A hybrid pool's declaration; ``None`` while its description is not complete (not known yet)."""
    hybrid = read_hybrid(props_of(resource))
    if hybrid is None:
        return None
    return DeclaredHybrid(
        resource=resource, kind=HYBRID_KIND, name=_display_name(props_of(resource), resource.name),
        labels=dict(hybrid.labels), taints=tuple(Taint(t.get("key", ""), t.get("value", ""), t.get("effect", ""))
                                                 for t in hybrid.taints),
        is_gpu=hybrid.instance.gpus > 0, hybrid=hybrid,
    )


def declared_pools(resources: Iterable[Any]) -> list[DeclaredPool]:
    """Every pool of the stack once (:func:`pool_resources`), in the stack's order, each read once."""
    resources = list(resources)
    by_urn = {r.urn: r for r in resources}
    templates: dict[str, Any] | None = None
    out: list[DeclaredPool] = []
    for resource in pool_resources(resources):  # by type and parent: reading a resource's properties converts them
        if resource.type == NODEPOOL:
            out.append(read_nodepool(resource))
        elif resource.type == HYBRID_NODE_POOL:
            hybrid = read_hybrid_pool(resource)
            if hybrid is not None:
                out.append(hybrid)
        else:
            owner = group_owner(resource, by_urn)
            if templates is None:
                templates = launch_template_types(resources)
            template_type = templates.get(owner) if resource.type not in EKS_SELF_MANAGED_NODE_GROUPS else None
            out.append(read_group(resource, template_type, owner))
    return out
