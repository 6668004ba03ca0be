"""The neutral description of a cluster the simulation judges, whoever built it.

Two adapters fill it: :mod:`capacity.engine` from the resources a stack emits (the pack) and the
program's blueprint of a stack (``components/specs/blueprint.py``, read by ``components/capacity_check.py``). Nothing here knows about Pulumi,
Helm or settings; labels, taints and tolerations use Kubernetes spelling.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, field
from typing import Any

from .instances import Instance, Resources, allocatable
from .llm import Architecture

#: The pack's one taint-effect table: EKS API spelling -> Kubernetes spelling (``shapes`` re-exports it).
#: Read with whatever effect the engine sent (any value); one that is not an EKS spelling misses.
EKS_EFFECTS: dict[object, str] = {"NO_SCHEDULE": "NoSchedule", "NO_EXECUTE": "NoExecute", "PREFER_NO_SCHEDULE": "PreferNoSchedule"}
HARD_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
GPU_RESOURCE = "nvidia.com/gpu"


# --- taints, tolerations, node selection -------------------------------------------------------


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"


def tolerates(tolerations: list[dict[str, Any]], taint: Taint) -> bool:
    """Kubernetes toleration matching for one taint."""
    for toleration in tolerations or []:
        if not isinstance(toleration, dict):
            continue
        effect = toleration.get("effect") or ""
        if effect and effect != taint.effect:
            continue
        key = toleration.get("key") or ""
        operator = toleration.get("operator") or "Equal"
        if not key:
            if operator == "Exists":
                return True
            continue
        if key != taint.key:
            continue
        if operator == "Exists" or (operator == "Equal" and (toleration.get("value") or "") == (taint.value or "")):
            return True
    return False


def untolerated(tolerations: list[dict[str, Any]], taints: list[Taint]) -> list[Taint]:
    return [t for t in taints if t.effect in HARD_EFFECTS and not tolerates(tolerations, t)]


@dataclass(frozen=True)
class Selection:
    """A pod's ``nodeSelector`` plus its required node affinity terms (OR of ANDed expressions)."""

    node_selector: tuple[tuple[str, str], ...] = ()
    terms: tuple[tuple[tuple[str, str, tuple[str, ...]], ...], ...] = ()

    @staticmethod
    def of(node_selector: dict[str, Any] | None = None, affinity_terms: list[Any] | None = None) -> Selection:
        terms = []
        for term in affinity_terms or []:
            expressions = []
            for e in (term or {}).get("matchExpressions") or []:
                if isinstance(e, dict) and isinstance(e.get("key"), str):
                    expressions.append((e["key"], str(e.get("operator", "In")), tuple(str(v) for v in e.get("values") or [])))
            terms.append(tuple(expressions))
        return Selection(tuple(sorted((str(k), str(v)) for k, v in (node_selector or {}).items())), tuple(terms))

    def keys(self) -> set[str]:
        return {k for k, _ in self.node_selector} | {e[0] for term in self.terms for e in term}

    def admits(self, fixed: dict[str, str], flexible: dict[str, frozenset[str] | None]) -> bool:
        """Whether a node with ``fixed`` labels (and ``flexible`` ones its pool may choose) can match."""
        for key, value in self.node_selector:
            if not _expression_ok(key, "In", (value,), fixed, flexible):
                return False
        if not self.terms:
            return True
        return any(all(_expression_ok(k, op, vals, fixed, flexible) for k, op, vals in term) for term in self.terms)

    def describe(self) -> str:
        parts = [f"{k}={v}" for k, v in self.node_selector]
        if self.terms:
            parts.append(" or ".join("(" + ", ".join(f"{k} {op} {','.join(v)}".strip() for k, op, v in term) + ")"
                                     for term in self.terms))
        return "; ".join(parts) or "any node"


def _int(value: str) -> int | None:
    return int(value) if re.fullmatch(r"-?\d+", value or "") else None


def _expression_ok(key: str, operator: str, values: tuple[str, ...], fixed: dict[str, str],
                   flexible: dict[str, frozenset[str] | None]) -> bool:
    candidates: frozenset[str] | None
    if key in fixed:
        present, candidates = True, frozenset({fixed[key]})
    elif key in flexible:
        present, candidates = True, flexible[key]
    else:
        present, candidates = False, frozenset()
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present or key in flexible and key not in fixed
    if operator == "NotIn":
        if not present:
            return True
        return candidates is None or bool(set(candidates) - set(values))
    if not present:
        return False
    if operator == "In":
        return candidates is None or bool(set(candidates) & set(values))
    bound = _int(values[0]) if operator in ("Gt", "Lt") and values else None
    if bound is not None:
        if candidates is None:
            return True
        numbers = [n for n in map(_int, candidates) if n is not None]
        return any(n > bound if operator == "Gt" else n < bound for n in numbers)
    return False


# --- what the cluster is made of ---------------------------------------------------------------


@dataclass
class DaemonSet:
    """A per-node agent: its pod's requests, where it may land, and where the figure comes from."""

    name: str
    requests: Resources
    tolerations: list[dict[str, Any]]
    selection: Selection = field(default_factory=Selection)
    source: str = ""
    #: GPU Operator operands are switched off per node by ``nvidia.com/gpu.deploy.<operand>=false``.
    deploy_label: str | None = None

    def lands_on(self, labels: dict[str, str], flexible: dict[str, frozenset[str] | None], taints: list[Taint]) -> bool:
        if untolerated(self.tolerations, taints):
            return False
        if self.deploy_label and labels.get(self.deploy_label) == "false":
            return False
        return self.selection.admits(labels, flexible)


@dataclass
class ScaleFromZeroTemplate:
    """Cluster Autoscaler node-template tags on a managed group's Auto Scaling group."""

    labels: dict[str, str] = field(default_factory=dict)
    taints: dict[str, str] = field(default_factory=dict)
    resources: dict[str, str] = field(default_factory=dict)


@dataclass
class Pool:
    """A set of nodes built alike: its instance types, labels, taints, bounds and who adds nodes."""

    name: str
    kind: str
    instances: list[Instance]
    labels: dict[str, str]
    taints: list[Taint]
    min_nodes: int = 0
    max_nodes: int | None = None
    #: Karpenter ``limits["nvidia.com/gpu"]`` / ``limits.nodes``; ``None`` when absent.
    gpu_limit: float | None = None
    node_limit: float | None = None
    #: Static NodePool replicas (fixed nodes), else ``None``.
    static_nodes: int | None = None
    #: A managed group's ``desiredSize``: the nodes it keeps when nothing scales it (``None``: not a group).
    desired_nodes: int | None = None
    #: Labels a Karpenter pool may set per node from its requirements (``None`` = any value).
    flexible: dict[str, frozenset[str] | None] = field(default_factory=dict)
    #: Who adds nodes: "Cluster Autoscaler", "Karpenter", "EKS Auto Mode", "fixed nodes", or None.
    capacity_source: str | None = None
    #: Managed group with Cluster Autoscaler: its node-template tags (``None`` = none found).
    template: ScaleFromZeroTemplate | None = None
    #: Whether the autoscaler can read labels/taints from the EKS API (it cannot once a node existed).
    max_pods: int | None = None
    disk_gib: float | None = None
    #: Pods with DRA ``resourceClaims`` cannot be provisioned by Karpenter.
    karpenter: bool = False
    #: Where a setting user finds this pool (key path); the pack uses the resource name.
    key: str = ""

    @property
    def is_gpu(self) -> bool:
        return any(i.gpus for i in self.instances)

    @property
    def gpus_per_node(self) -> int:
        return max((i.gpus for i in self.instances), default=0)


@dataclass
class ModelServing:
    """A served model: its architecture and the vLLM engine arguments that size it."""

    architecture: Architecture
    max_model_len: int
    tensor_parallel: int
    gpu_memory_utilization: float
    #: ``--pipeline-parallel-size``: stages, one per node of a multi-node replica.
    pipeline_parallel: int = 1


@dataclass
class Workload:
    """Pods of one controller: requests per pod, placement, replica bounds and rollout surge."""

    name: str
    kind: str
    namespace: str
    requests: Resources
    limits: Resources
    tolerations: list[dict[str, Any]]
    selection: Selection
    min_replicas: int = 1
    max_replicas: int = 1
    #: Extra pods a rolling update creates at ``max_replicas`` (0 with ``maxSurge: 0`` or Recreate).
    surge: int = 0
    #: A Deployment's or LeaderWorkerSet's update strategy (``None``: nothing rolls this way).
    rollout: Rollout | None = None
    #: Pods per replica: a LeaderWorkerSet's ``size`` (its replicas are groups created and restarted as a
    #: unit, all or nothing), else 1. ``min_replicas``, ``max_replicas`` and ``surge`` count pods.
    group_size: int = 1
    model: ModelServing | None = None
    #: ScaledObject may scale it to zero; then ``wake_signal`` says whether a trigger reads a series
    #: that exists without the model's own pods (``None``: not scaled by KEDA).
    scale_to_zero: bool = False
    wake_signal: bool | None = None
    #: The pod's ``priorityClassName`` (``None``: none), which PriorityClass-scoped quotas select on.
    priority_class: str | None = None
    wake_detail: str = ""
    resource_claims: bool = False
    key: str = ""


@dataclass
class Quota:
    """A namespace ResourceQuota's hard limits, by quota key (``requests.cpu`` in millicores, memory in MiB)."""

    namespace: str
    name: str
    hard: dict[str, float]
    key: str = ""
    #: ``spec.scopeSelector`` as written (``None``: the quota counts every pod of its namespace).
    scope_selector: dict[str, Any] | None = None

    def counts(self, priority_class: str | None) -> bool:
        return counts_priority(self.scope_selector, priority_class)


def counts_priority(scope_selector: Any, priority: Any) -> bool:
    """Whether a quota with this ``scopeSelector`` counts a pod of priority class ``priority``.

    Kubernetes' rule (kubernetes/kubernetes pkg/quota/v1/evaluator/core/pods.go, ``podMatchesScopeFunc``
    with ``PriorityClass``): every PriorityClass expression must match: ``In``/``NotIn`` the pod's
    ``priorityClassName``, ``Exists``/``DoesNotExist`` whether it has one. Other scopes (BestEffort,
    Terminating, ...) are not judged: such a quota is taken as counting the pod.
    """
    if not isinstance(scope_selector, dict):
        return True
    expressions = scope_selector.get("matchExpressions") or []
    for expression in expressions if isinstance(expressions, list) else []:
        if not isinstance(expression, dict) or expression.get("scopeName") != "PriorityClass":
            continue
        raw = expression.get("values") or []
        values = [str(v) for v in raw] if isinstance(raw, list) else []
        name = priority if isinstance(priority, str) and priority else None
        outcomes: dict[object, bool] = {"In": name in values, "NotIn": name not in values, "Exists": name is not None,
                                        "DoesNotExist": name is None}
        matched = outcomes.get(expression.get("operator"), True)
        if not matched:
            return False
    return True


@dataclass
class Cluster:
    pools: list[Pool] = field(default_factory=list)
    daemonsets: list[DaemonSet] = field(default_factory=list)
    workloads: list[Workload] = field(default_factory=list)
    quotas: list[Quota] = field(default_factory=list)
    hours_per_month: float = 730


# --- helpers used by both adapters -------------------------------------------------------------

_QUANTITY = re.compile(r"^([+-]?\d+(?:\.\d+)?)([a-zA-Z]*)$")
_SUFFIX = {"": 1, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
           "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def quantity(value: Any) -> float | None:
    """A Kubernetes quantity as a plain number (``"500m"`` -> 0.5, ``"2Gi"`` -> 2147483648)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if type(value) is str:
        return _quantity_text(value)
    return _parsed_quantity(str(value))


@functools.lru_cache(maxsize=4096)
def _quantity_text(text: str) -> float | None:
    """Parsed once per text: the same few quantities recur in every workload of a plan."""
    return _parsed_quantity(text)


def _parsed_quantity(text: str) -> float | None:
    match = _QUANTITY.match(text.strip())
    if not match or match.group(2) not in _SUFFIX:
        return None
    return float(match.group(1)) * _SUFFIX[match.group(2)]


def cpu_m(value: Any) -> float:
    number = quantity(value)
    return 0.0 if number is None else number * 1000


def mib(value: Any) -> float:
    number = quantity(value)
    return 0.0 if number is None else number / 2**20


def resources_of(spec: dict[str, Any] | None, *, pods: int = 0) -> Resources:
    spec = spec if isinstance(spec, dict) else {}
    return Resources(
        cpu_m=cpu_m(spec.get("cpu")),
        memory_mib=mib(spec.get("memory")),
        gpus=quantity(spec.get(GPU_RESOURCE)) or 0.0,
        ephemeral_mib=mib(spec.get("ephemeral-storage")),
        pods=pods,
    )


def is_sidecar(container: dict[str, Any]) -> bool:
    """A native sidecar: an init container with ``restartPolicy: Always`` (KEP-753), which keeps
    running beside the app containers."""
    return container.get("restartPolicy") == "Always"


def largest(a: Resources, b: Resources) -> Resources:
    """Each resource's larger amount of the two: a node holds both pods' needs one at a time iff it
    holds this."""
    return Resources(*(max(x, y) for x, y in zip(a._tuple(), b._tuple())))


def effective(apps: list[Resources], inits: list[tuple[Resources, bool]]) -> Resources:
    """Kubernetes' effective pod request: app containers plus native sidecars summed (they run
    together), against each ordinary init container plus the sidecars started before it (kubernetes/
    kubernetes staging/src/k8s.io/component-helpers/resource/helpers.go, ``AggregateContainerRequests``;
    KEP-753 "Resources calculation for scheduling and pod admission"). The textbook max(apps, any init)
    undercounts a pod with sidecars."""
    total = sum(apps, Resources())
    sidecars, peak = Resources(), Resources()
    for res, sidecar in inits:
        if sidecar:
            total = total + res
            sidecars = sidecars + res
            peak = largest(peak, sidecars)
        else:
            peak = largest(peak, res + sidecars)
    return largest(total, peak)


def pod_requests(pod_spec: dict[str, Any]) -> tuple[Resources, Resources]:
    """Effective requests and limits of a pod (:func:`effective`); a limit without a request counts
    as the request."""

    def container(c: dict[str, Any]) -> tuple[Resources, Resources]:
        res = c.get("resources") or {}
        limits = res.get("limits") or {}
        requests = {**limits, **(res.get("requests") or {})}
        return resources_of(requests), resources_of(limits)

    apps = [container(c) for c in pod_spec.get("containers") or [] if isinstance(c, dict)]
    inits = [(container(c), is_sidecar(c)) for c in pod_spec.get("initContainers") or [] if isinstance(c, dict)]
    req = effective([a[0] for a in apps], [(r, side) for (r, _), side in inits])
    lim = effective([a[1] for a in apps], [(li, side) for (_, li), side in inits])
    return Resources(req.cpu_m, req.memory_mib, req.gpus, req.ephemeral_mib, 1), lim


def _scaled(value: Any, replicas: int, round_up: bool) -> int:
    """An int-or-percent of ``replicas`` (apimachinery ``intstr.GetScaledValueFromIntOrPercent``)."""
    if isinstance(value, str) and value.endswith("%"):
        try:
            share = replicas * float(value[:-1]) / 100
        except ValueError:
            return 0
        return math.ceil(share - 1e-9) if round_up else math.floor(share + 1e-9)
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _int_or_percent(value: Any) -> Any:
    """An IntOrString as written (a whole number that arrived as a float, as protobuf numbers do, is an int)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


@dataclass(frozen=True)
class Rollout:
    """A Deployment's ``spec.strategy`` after API defaulting: ``RollingUpdate`` with ``maxSurge`` and
    ``maxUnavailable`` each 25% when unset (kubernetes/kubernetes pkg/apis/apps/v1/defaults.go
    ``SetDefaults_Deployment``), or ``Recreate``."""

    type: str = "RollingUpdate"
    max_surge: Any = "25%"
    max_unavailable: Any = "25%"
    #: A LeaderWorkerSet's strategy: the numbers count groups, not pods.
    groups: bool = False

    @staticmethod
    def of(strategy: Any) -> Rollout:
        strategy = strategy if isinstance(strategy, dict) else {}
        rolling = strategy.get("rollingUpdate") if isinstance(strategy.get("rollingUpdate"), dict) else {}
        surge, unavailable = (_int_or_percent(rolling.get(k)) for k in ("maxSurge", "maxUnavailable"))
        return Rollout(str(strategy.get("type") or "RollingUpdate"), "25%" if surge is None else surge,
                       "25%" if unavailable is None else unavailable)

    @staticmethod
    def of_group(strategy: Any) -> Rollout:
        """A LeaderWorkerSet's ``spec.rolloutStrategy``, counted in groups, after its CRD's defaults: maxSurge
        0 and maxUnavailable 1 (kubernetes-sigs/lws charts/lws/crds, ``rollingUpdateConfiguration``)."""
        strategy = strategy if isinstance(strategy, dict) else {}
        rolling = strategy.get("rollingUpdateConfiguration")
        rolling = rolling if isinstance(rolling, dict) else {}
        surge, unavailable = (_int_or_percent(rolling.get(k)) for k in ("maxSurge", "maxUnavailable"))
        return Rollout("RollingUpdate", 0 if surge is None else surge, 1 if unavailable is None else unavailable,
                       groups=True)

    def fenceposts(self, replicas: int) -> tuple[int, int]:
        """(extra pods a rollout at ``replicas`` may add, pods it may take down first), as the deployment
        controller resolves them (kubernetes/kubernetes pkg/controller/deployment/util/deployment_util.go
        ``ResolveFenceposts``): surge rounds up, unavailable rounds down, and when both come to 0
        unavailable becomes 1. ``Recreate`` adds none and takes every pod down."""
        if replicas <= 0:
            return 0, 0
        if self.type == "Recreate":
            return 0, replicas
        surge = _scaled(self.max_surge, replicas, True)
        unavailable = _scaled(self.max_unavailable, replicas, False)
        if self.groups:
            # LeaderWorkerSet caps the surge at the replicas (pkg/controllers/leaderworkerset_controller.go,
            # rollingUpdateParameters: "if maxSurge > lwsReplicas { maxSurge = lwsReplicas }").
            surge = min(surge, replicas)
        if surge == 0 and unavailable == 0:
            unavailable = 1
        return surge, unavailable


def surge_pods(max_surge: Any, replicas: int, strategy: str = "RollingUpdate") -> int:
    """Extra pods a Deployment rollout adds at ``replicas`` (Kubernetes default ``maxSurge`` 25%)."""
    return Rollout(strategy, "25%" if max_surge is None else max_surge).fenceposts(replicas)[0]


def node_allocatable(pool: Pool, instance: Instance) -> Resources:
    return allocatable(instance, max_pods=pool.max_pods, disk_gib=pool.disk_gib)
