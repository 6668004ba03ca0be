"""Reading resources in the shape the engine hands them to the pack.

Inputs arrive camelCase, numbers as doubles, secrets already unwrapped by ``pulumi_policy``, and
values that are not known during preview as sentinel strings that the SDK's proxy raises on. Every
policy first turns its inputs into plain Python data with :data:`UNKNOWN` in place of those values,
so a policy can say "can't judge" per field instead of losing the whole check to an exception.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pulumi_policy.proxy import UnknownValueError

#: Sentinels of the engine's unknown values (sdk/go/common/resource/plugin/rpc.go).
UNKNOWN_SENTINELS = frozenset(
    {
        "1c4a061d-8072-4f0a-a4cb-0ff528b18fe7",
        "3eeb2bf0-c639-47a8-9e75-3b44932eb421",
        "04da6b54-80e4-46f7-96ec-b56ff0331ba9",
        "6a19a0b0-7e62-4c92-b797-7f8e31da9cc2",
        "030794c1-ac77-496b-92df-f27374a8bd58",
        "e48ece36-62e2-4504-bad9-02848725956a",
        "dd056dcd-154b-4c76-9bd3-c8f88648b5ff",
    }
)


class _Unknown:
    """A value the engine does not know yet; policies treat it as "can't judge"."""

    _instance: _Unknown | None = None

    def __new__(cls) -> _Unknown:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "<unknown>"

    def __bool__(self) -> bool:
        return False


UNKNOWN: Any = _Unknown()


def plain(value: Any) -> Any:
    """Plain dicts/lists from the SDK's proxies, with :data:`UNKNOWN` for unknown values."""
    if isinstance(value, str):
        return UNKNOWN if value in UNKNOWN_SENTINELS else value
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key in value:
            try:
                out[key] = plain(value[key])
            except UnknownValueError:
                out[key] = UNKNOWN
        return out
    if isinstance(value, Sequence):
        items: list[Any] = []
        for index in range(len(value)):
            try:
                items.append(plain(value[index]))
            except UnknownValueError:
                items.append(UNKNOWN)
        return items
    return value


def dig(value: Any, *path: str | int, default: Any = None) -> Any:
    """``value[path[0]][path[1]]...``; :data:`UNKNOWN` if any hop is unknown, ``default`` if absent."""
    for step in path:
        if value is UNKNOWN:
            return UNKNOWN
        if isinstance(step, int):
            if not isinstance(value, list) or not -len(value) <= step < len(value):
                return default
            value = value[step]
        else:
            if not isinstance(value, dict) or step not in value:
                return default
            value = value[step]
        if value is None:
            return default
    return value


def as_list(value: Any) -> list[Any]:
    """A list input, ``[]`` when absent; unknown stays :data:`UNKNOWN`."""
    if value is UNKNOWN:
        return UNKNOWN
    return value if isinstance(value, list) else []


def as_dict(value: Any) -> dict[str, Any]:
    if value is UNKNOWN:
        return UNKNOWN
    return value if isinstance(value, dict) else {}


def contains_unknown(value: Any) -> bool:
    if value is UNKNOWN:
        return True
    if isinstance(value, dict):
        return any(contains_unknown(v) for v in value.values())
    if isinstance(value, list):
        return any(contains_unknown(v) for v in value)
    return False


def as_int(value: Any) -> int | None:
    """Integers from engine numbers (doubles) or numeric strings; ``None`` if not an integer."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return int(value) if float(value).is_integer() else None
    if isinstance(value, str) and re.fullmatch(r"[+-]?\d+", value.strip()):
        return int(value)
    return None


def is_true(value: Any) -> bool:
    """Booleans that some providers type as strings (aws LaunchTemplate ``ebs.encrypted``)."""
    return value is True or (isinstance(value, str) and value.strip().lower() == "true")


_QUANTITY = re.compile(r"^([+-]?\d+(?:\.\d+)?)([a-zA-Z]*)$")
_SUFFIX = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30}


def quantity(value: Any) -> float | None:
    """A Kubernetes quantity as a number (enough for GPU counts: ``1``, ``"8"``, ``"2k"``)."""
    if isinstance(value, bool) or value is None or value is UNKNOWN:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    match = _QUANTITY.match(str(value).strip())
    if not match or match.group(2) not in _SUFFIX:
        return None
    return float(match.group(1)) * _SUFFIX[match.group(2)]


# --- Resources --------------------------------------------------------------------------------


@dataclass
class Resource:
    """One resource as a policy sees it: plain inputs plus identity."""

    type: str
    name: str
    urn: str
    props: dict[str, Any]
    parent: str | None = None

    def get(self, *path: str | int, default: Any = None) -> Any:
        return dig(self.props, *path, default=default)

    @property
    def label(self) -> str:
        """How messages name the resource: ``Kind 'name'``."""
        kind = self.type.rsplit(":", 1)[-1]
        return f"{kind} '{self.display_name}'"

    @property
    def display_name(self) -> str:
        name = self.get("metadata", "name")
        if isinstance(name, str) and name:
            return name
        node_group_name = self.get("nodeGroupName")
        if isinstance(node_group_name, str) and node_group_name:
            return node_group_name
        return self.name


# --- Resource type tokens ---------------------------------------------------------------------

EKS_MANAGED_NODE_GROUP = "eks:index:ManagedNodeGroup"
AWS_NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
EKS_SELF_MANAGED_NODE_GROUPS = frozenset({"eks:index:NodeGroup", "eks:index:NodeGroupV2"})
NODE_GROUP_TYPES = frozenset({EKS_MANAGED_NODE_GROUP, AWS_NODE_GROUP}) | EKS_SELF_MANAGED_NODE_GROUPS
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
EC2_INSTANCE = "aws:ec2/instance:Instance"
EKS_CLUSTER = "eks:index:Cluster"
AWS_EKS_CLUSTER = "aws:eks/cluster:Cluster"
NODEPOOL = "kubernetes:karpenter.sh/v1:NodePool"
LEGACY_KARPENTER_TYPES = frozenset(
    {
        "kubernetes:karpenter.sh/v1beta1:NodePool",
        "kubernetes:karpenter.sh/v1alpha5:Provisioner",
        "kubernetes:karpenter.k8s.aws/v1beta1:EC2NodeClass",
        "kubernetes:karpenter.k8s.aws/v1alpha1:AWSNodeTemplate",
    }
)
EC2NODECLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
HELM_CHART_V4 = "kubernetes:helm.sh/v4:Chart"
HELM_TYPES = frozenset({HELM_RELEASE, HELM_CHART_V4})
RESOURCE_QUOTA = "kubernetes:core/v1:ResourceQuota"
SCALED_OBJECT = "kubernetes:keda.sh/v1alpha1:ScaledObject"
PROMETHEUS_RULE = "kubernetes:monitoring.coreos.com/v1:PrometheusRule"

#: Where each workload kind keeps its pod template(s): dotted paths, ``[]`` = every item of a list,
#: ``""`` = the object is the pod. Upstream field names: apps/v1 and batch/v1; LeaderWorkerSet
#: ``leaderworkerset.x-k8s.io/v1`` (``spec.leaderWorkerTemplate.{leaderTemplate,workerTemplate}``,
#: the leader template optional); KubeRay ``ray.io/v1`` (``RayClusterSpec.headGroupSpec.template``,
#: ``workerGroupSpecs[].template``; a RayJob embeds the cluster spec at ``spec.rayClusterSpec`` and may
#: set ``spec.submitterPodTemplate``, a RayService at ``spec.rayClusterConfig``).
_RAY = ("headGroupSpec.template", "workerGroupSpecs[].template")
POD_TEMPLATE_PATHS: dict[str, tuple[str, ...]] = {
    "kubernetes:apps/v1:Deployment": ("spec.template",),
    "kubernetes:apps/v1:StatefulSet": ("spec.template",),
    "kubernetes:apps/v1:DaemonSet": ("spec.template",),
    "kubernetes:apps/v1:ReplicaSet": ("spec.template",),
    "kubernetes:core/v1:ReplicationController": ("spec.template",),
    "kubernetes:batch/v1:Job": ("spec.template",),
    "kubernetes:batch/v1:CronJob": ("spec.jobTemplate.spec.template",),
    "kubernetes:core/v1:PodTemplate": ("template",),
    "kubernetes:core/v1:Pod": ("",),
    "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet": (
        "spec.leaderWorkerTemplate.leaderTemplate",
        "spec.leaderWorkerTemplate.workerTemplate",
    ),
    "kubernetes:ray.io/v1:RayCluster": tuple(f"spec.{p}" for p in _RAY),
    "kubernetes:ray.io/v1:RayJob": (*(f"spec.rayClusterSpec.{p}" for p in _RAY), "spec.submitterPodTemplate"),
    "kubernetes:ray.io/v1:RayService": tuple(f"spec.rayClusterConfig.{p}" for p in _RAY),
}
DAEMONSET = "kubernetes:apps/v1:DaemonSet"

#: Policy parameter that adds workload kinds (custom resources) to the built-in table above.
CUSTOM_WORKLOADS = "customWorkloads"
CUSTOM_WORKLOADS_SCHEMA: dict[str, Any] = {
    CUSTOM_WORKLOADS: {
        "type": "object",
        "additionalProperties": {
            "type": "array",
            "minItems": 1,
            "items": {"type": "string", "pattern": r"^(|[A-Za-z0-9_-]+(\[\])?(\.[A-Za-z0-9_-]+(\[\])?)*)$"},
        },
        "default": {},
        "description": (
            "Extra workload kinds whose pod templates the workload policies judge: resource type token "
            "(e.g. 'kubernetes:example.com/v1:InferenceGroup') -> dotted paths of its pod templates, "
            "'[]' after a list field for every item (e.g. 'spec.groups[].template'), '' when the object is a pod."
        ),
    }
}


def workload_paths(config: Mapping[str, Any] | None = None) -> dict[str, tuple[str, ...]]:
    """The built-in pod-template table plus the kinds a policy's config adds."""
    extra = (config or {}).get(CUSTOM_WORKLOADS) or {}
    return {**POD_TEMPLATE_PATHS, **{k: tuple(v) for k, v in extra.items() if isinstance(v, list)}}


@dataclass
class PodTemplate:
    """One pod template of a workload resource, with the namespace it will run in."""

    resource: Resource
    kind: str
    namespace: Any
    metadata: dict[str, Any]
    spec: Any
    #: Where in the resource the template sits ("" for a Pod, else e.g. "spec.workerGroupSpecs[1].template").
    where: str = ""
    #: Whether the resource can hold several templates (then messages name ``where``).
    several: bool = False

    @property
    def is_daemonset(self) -> bool:
        return self.resource.type == DAEMONSET

    @property
    def label(self) -> str:
        """How messages name the template: the resource, plus the template's path when it has several."""
        return f"{self.resource.label} ({self.where})" if self.several and self.where else self.resource.label

    def containers(self, *fields: str) -> Iterator[dict[str, Any]]:
        for field_name in fields or ("initContainers", "containers", "ephemeralContainers"):
            items = as_list(dig(self.spec, field_name))
            if items is UNKNOWN:
                continue
            for item in items:
                if isinstance(item, dict):
                    yield item

    @property
    def annotations(self) -> dict[str, Any]:
        value = dig(self.metadata, "annotations", default={})
        return value if isinstance(value, dict) else {}

    @property
    def tolerations(self) -> Any:
        return as_list(dig(self.spec, "tolerations"))


def _walk(node: Any, steps: list[str], where: str) -> Iterator[tuple[str, Any]]:
    """(concrete path, value) for a dotted path whose ``name[]`` steps fan out over list items."""
    if not steps:
        yield where, node
        return
    step, rest = steps[0], steps[1:]
    fan = step.endswith("[]")
    name = step[:-2] if fan else step
    value = dig(node, name)
    here = f"{where}.{name}" if where else name
    if value is None:
        return
    if value is UNKNOWN:
        yield here, UNKNOWN
        return
    if not fan:
        yield from _walk(value, rest, here)
        return
    if not isinstance(value, list):
        return
    for index, item in enumerate(value):
        if item is UNKNOWN:
            yield f"{here}[{index}]", UNKNOWN
        else:
            yield from _walk(item, rest, f"{here}[{index}]")


def pod_templates(resource: Resource, config: Mapping[str, Any] | None = None) -> list[PodTemplate]:
    """Every pod template of a workload (built-in kinds and the config's ``customWorkloads``), at any depth.

    A template that is unknown during preview comes back with ``spec`` :data:`UNKNOWN` ("can't judge").
    """
    paths = workload_paths(config).get(resource.type)
    if not paths:
        return []
    kind = resource.type.rsplit(":", 1)[-1]
    namespace = resource.get("metadata", "namespace", default="default")
    out = []
    several = len(paths) > 1 or any("[]" in p for p in paths)
    for path in paths:
        if path == "":
            found: list[tuple[str, Any]] = [("", resource.props)]
        else:
            found = list(_walk(resource.props, path.split("."), ""))
        for where, template in found:
            if template is UNKNOWN:
                out.append(PodTemplate(resource, kind, UNKNOWN, {}, UNKNOWN, where, several))
            elif isinstance(template, dict):
                out.append(PodTemplate(
                    resource=resource,
                    kind=kind,
                    namespace=namespace,
                    metadata=as_dict(template.get("metadata")) or {},
                    spec=template.get("spec") if template.get("spec") is not None else {},
                    where=where,
                    several=several,
                ))
    return out


def pod_template(resource: Resource) -> PodTemplate | None:
    """The first pod template (for kinds that have exactly one, such as DaemonSets)."""
    templates = pod_templates(resource)
    return templates[0] if templates else None


# --- Taints and tolerations -------------------------------------------------------------------

# One taint-effect table for the pack, kept with the capacity model that also needs it.
from capacity.model import EKS_EFFECTS, HARD_EFFECTS  # noqa: E402  (re-exported)
from capacity.model import Taint as _ModelTaint  # noqa: E402
from capacity.model import tolerates as _model_tolerates  # noqa: E402


@dataclass(frozen=True)
class Taint:
    key: Any
    value: Any
    effect: Any

    def __str__(self) -> str:
        value = "" if self.value in (None, "") else f"={self.value}"
        return f"{self.key}{value}:{self.effect}"

    @property
    def is_known(self) -> bool:
        return UNKNOWN not in (self.key, self.value, self.effect)


def tolerates(toleration: Any, taint: Taint) -> bool | None:
    """Kubernetes toleration matching (the capacity model's matcher); ``None`` when an unknown value decides it."""
    if not isinstance(toleration, dict):
        return None if toleration is UNKNOWN else False
    if contains_unknown(toleration) or not taint.is_known:
        return None
    return _model_tolerates([toleration], _ModelTaint(str(taint.key), str(taint.value or ""), str(taint.effect)))


def tolerates_all(tolerations: Any, taint: Taint) -> bool | None:
    """Whether any toleration in the list tolerates ``taint`` (``None`` = can't judge)."""
    if tolerations is UNKNOWN:
        return None
    results = [tolerates(t, taint) for t in tolerations or []]
    if any(r is True for r in results):
        return True
    if any(r is None for r in results):
        return None
    return False


# --- Node selection ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Constraint:
    """What one label key may be: allowed values, exclusions, integer bounds, presence.

    Both sides of scheduling are expressed this way (a pod's selector and what a pool's nodes can
    carry) so "can this pool hold this pod" is an intersection that must be satisfiable.
    """

    values: frozenset[str] | None = None
    excluded: frozenset[str] = frozenset()
    gt: int | None = None
    lt: int | None = None
    exists: bool = False
    absent: bool = False

    @staticmethod
    def fixed(value: str) -> Constraint:
        return Constraint(values=frozenset({str(value)}), exists=True)

    @staticmethod
    def one_of(values: Sequence[str]) -> Constraint:
        return Constraint(values=frozenset(str(v) for v in values), exists=True)

    @staticmethod
    def any_value() -> Constraint:
        return Constraint(exists=True)

    @staticmethod
    def missing() -> Constraint:
        return Constraint(absent=True)

    def __and__(self, other: Constraint) -> Constraint:
        if self.values is None:
            values = other.values
        elif other.values is None:
            values = self.values
        else:
            values = self.values & other.values
        gts = [b for b in (self.gt, other.gt) if b is not None]
        lts = [b for b in (self.lt, other.lt) if b is not None]
        return Constraint(
            values=values,
            excluded=self.excluded | other.excluded,
            gt=max(gts) if gts else None,
            lt=min(lts) if lts else None,
            exists=self.exists or other.exists,
            absent=self.absent or other.absent,
        )

    def _admits(self, value: str) -> bool:
        if value in self.excluded:
            return False
        if self.gt is not None or self.lt is not None:
            number = as_int(value)
            if number is None:
                return False
            if self.gt is not None and not number > self.gt:
                return False
            if self.lt is not None and not number < self.lt:
                return False
        return True

    def candidates(self) -> set[str] | None:
        """The finite set of values a present label may take, or ``None`` if unbounded."""
        if self.values is None:
            return None
        return {v for v in self.values if self._admits(v)}

    def satisfiable(self) -> bool:
        if self.absent:
            return not self.exists
        if not self.exists:
            return True
        if self.values is not None:
            return bool(self.candidates())
        if self.gt is not None and self.lt is not None:
            low, high = self.gt + 1, self.lt - 1
            blocked = {n for n in map(as_int, self.excluded) if n is not None and low <= n <= high}
            return high - low + 1 > len(blocked)
        return True


def requirement_constraint(requirement: Any) -> Constraint | None:
    """A ``{key, operator, values}`` requirement as a :class:`Constraint` (``None`` if unknown/invalid)."""
    if not isinstance(requirement, dict) or contains_unknown(requirement):
        return None
    operator = requirement.get("operator")
    values = [str(v) for v in as_list(requirement.get("values"))]
    if operator == "In":
        return Constraint(values=frozenset(values), exists=True)
    if operator == "NotIn":
        return Constraint(excluded=frozenset(values))
    if operator == "Exists":
        return Constraint(exists=True)
    if operator == "DoesNotExist":
        return Constraint(absent=True)
    if operator in ("Gt", "Lt", "Gte", "Lte") and len(values) == 1 and as_int(values[0]) is not None:
        bound = as_int(values[0])
        if operator == "Gt":
            return Constraint(gt=bound, exists=True)
        if operator == "Gte":
            return Constraint(gt=bound - 1, exists=True)
        if operator == "Lt":
            return Constraint(lt=bound, exists=True)
        return Constraint(lt=bound + 1, exists=True)
    return None


@dataclass
class SelectorTerm:
    """One alternative of a pod's node selection: every key's constraint must hold (AND)."""

    constraints: dict[str, Constraint] = field(default_factory=dict)

    def add(self, key: str, constraint: Constraint) -> None:
        self.constraints[key] = self.constraints[key] & constraint if key in self.constraints else constraint

    def describe(self) -> str:
        parts = []
        for key, c in self.constraints.items():
            if c.absent:
                parts.append(f"!{key}")
            elif c.values is not None:
                parts.append(f"{key} in ({', '.join(sorted(c.values))})")
            elif c.excluded:
                parts.append(f"{key} notin ({', '.join(sorted(c.excluded))})")
            elif c.gt is not None or c.lt is not None:
                parts.append(f"{key} in ({c.gt}, {c.lt})")
            else:
                parts.append(key)
        return ", ".join(parts) or "any node"


def node_selection(spec: Any) -> list[SelectorTerm] | None:
    """The pod spec's ``nodeSelector`` and required node affinity as alternatives (OR of ANDs).

    Returns ``None`` when an unknown value makes the selection unknowable.
    """
    if spec is UNKNOWN:
        return None
    base = SelectorTerm()
    selector = dig(spec, "nodeSelector", default={})
    if contains_unknown(selector):
        return None
    for key, value in (selector or {}).items():
        base.add(key, Constraint.fixed(value))
    terms = dig(spec, "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")
    if terms is UNKNOWN or contains_unknown(terms):
        return None
    if not terms:
        return [base]
    alternatives = []
    for term in terms:
        alternative = SelectorTerm(dict(base.constraints))
        for expression in as_list(dig(term, "matchExpressions", default=[])):
            constraint = requirement_constraint(expression)
            if constraint is None:
                return None
            alternative.add(expression["key"], constraint)
        alternatives.append(alternative)
    return alternatives


def pod_uses_key(alternatives: list[SelectorTerm], key: str) -> bool:
    return any(key in alt.constraints and not alt.constraints[key].absent for alt in alternatives)


def fmt(value: Any) -> str:
    """Numbers as a user wrote them: engine doubles like ``2.0`` print as ``2``."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
