"""The simulation: does every workload land, fit, load and scale on the cluster described.

It answers, from a :class:`~capacity.model.Cluster`:

- every pool has a capacity source (and Cluster Autoscaler's node-template tags where a group sits at 0);
- every workload fits at least one instance type of a pool it may land on, after the node's
  reserved share and every DaemonSet that lands there;
- pool maximums and GPU limits hold the sum of min replicas, and each workload's own max replicas
  (with the others at min); the sum of all maxes overcommitting a shared pool is reported, not refused;
- a rollout at max replicas finishes: where the strategy must surge before it takes a pod down, the
  pool's ceiling holds the surge pod too; where it takes pods down first, enough stay serving (below);
- model weights plus one max-length sequence's KV cache fit vLLM's share of GPU memory;
- namespace quotas hold every workload at max replicas plus rollout surge;
- a workload that may scale to zero has a wake-up signal that does not come from its own pods.

Node counts come from first-fit-decreasing packing onto the pool's roomiest instance type, the best
case an autoscaler can reach: a shortfall even then is real.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .cost import Reservation
from .instances import Instance, Resources
from .llm import GIB, memory_fit
from .model import (
    GPU_RESOURCE,
    HARD_EFFECTS,
    Cluster,
    Pool,
    ScaleFromZeroTemplate,
    Workload,
    largest,
    node_allocatable,
    untolerated,
)

#: The checks, in the order findings are reported; each finding carries one.
CHECKS = ("capacity-source", "scale-from-zero", "fit", "group", "pool-min", "pool-max", "surge", "model-memory",
          "quota", "rollout", "wake-up", "overcommit", "reserved")


@dataclass(frozen=True)
class Finding:
    """One problem: which check, the workload (if any), the pool or quota, the resource, need vs have."""

    check: str
    workload: str | None
    where: str
    resource: str
    need: str
    have: str
    message: str
    blocking: bool = True
    workload_key: str = ""
    where_key: str = ""

    def identity(self) -> tuple[str, str | None, str, str, str, str]:
        """What two adapters must agree on (messages may name things differently)."""
        return (self.check, self.workload, self.where, self.resource, self.need, self.have)


@dataclass
class Shape:
    """One instance type of one pool: what it leaves for workloads after its DaemonSets."""

    instance: Instance
    free: Resources
    daemonsets: list[str]
    labels: dict[str, str] = field(default_factory=dict)


@dataclass
class PoolPlan:
    """A pool as the simulation sees it, with the workloads that land there."""

    pool: Pool
    shapes: list[Shape]
    workloads: list[Workload] = field(default_factory=list)
    nodes_at_min: int = 0
    nodes_at_max: int = 0
    gpus_at_min: float = 0
    gpus_at_max: float = 0

    @property
    def usable(self) -> list[Shape]:
        """Shapes an autoscaler plans with. Cluster Autoscaler builds a group's template node from the
        first instance type of its mixed-instances overrides while the group has no node
        (kubernetes/autoscaler cloudprovider/aws/aws_wrapper.go getInstanceTypesForAsgs), so a pool at 0
        grows only for pods that fit its first type."""
        pool = self.pool
        if pool.capacity_source == "Cluster Autoscaler" and pool.min_nodes == 0:
            return self.shapes[:1]
        return self.shapes

    @property
    def best(self) -> Shape | None:
        return max(self.usable, key=lambda s: (s.free.gpus, s.free.cpu_m, s.free.memory_mib), default=None)

    @property
    def planning(self) -> Shape | None:
        """The node type replica counts are planned on. Karpenter launches the cheapest type that holds
        the pods (so GPU limits are spent on small nodes, not on the roomiest one); a node group is
        planned on its roomiest type, the best case its autoscaler can reach."""
        if self.pool.kind in ("Karpenter NodePool", "Auto Mode NodePool") and self.workloads:
            # A type holds every pod iff it holds, in each resource, the largest request of any of them.
            need = functools.reduce(largest, (w.requests for w in self.workloads))
            fitting = [s for s in self.usable if not s.free.shortfalls(need)]
            if fitting:
                # A type without a price in the stack's region sorts after the priced ones (the plan still
                # needs a shape); every cost figure over it refuses (cost.hourly_prices). Among types of one
                # price, or none priced (a region the catalog has no prices for), the smallest that holds the
                # pods: the cheapest, as far as size tells.
                return min(fitting, key=lambda s: (math.inf if s.instance.hourly_usd is None else s.instance.hourly_usd,
                                                   s.free.gpus, s.free.cpu_m))
        return self.best

    @property
    def max_nodes(self) -> float | None:
        """Most nodes the pool can hold: group max, static replicas, or what its limits allow."""
        pool = self.pool
        if pool.static_nodes is not None:
            return pool.static_nodes
        if pool.max_nodes is not None:
            return pool.max_nodes
        bounds = []
        if pool.node_limit is not None:
            bounds.append(pool.node_limit)
        smallest = min((s.instance.gpus for s in self.usable if s.instance.gpus), default=0)
        if pool.gpu_limit is not None and smallest:
            bounds.append(math.floor(pool.gpu_limit / smallest))  # the most nodes the GPU limit allows
        return min(bounds) if bounds else None


@dataclass
class Simulation:
    findings: list[Finding]
    plans: list[PoolPlan]
    placements: dict[str, str]

    @property
    def blocking(self) -> list[Finding]:
        return [f for f in self.findings if f.blocking]


def _fmt(value: float) -> str:
    return f"{value:g}" if float(value).is_integer() else f"{value:.2f}"


def _res(name: str, value: float) -> str:
    if name == "cpu":
        return f"{value / 1000:.2f} CPU" if value % 1000 else f"{value / 1000:g} CPU"
    if name in ("memory", "ephemeral-storage"):
        return f"{value / 1024:.1f} GiB"
    return _fmt(value)


def _runtime_gpu_labels(cluster: Cluster, pool: Pool, instance: Instance, labels: dict[str, str]) -> dict[str, str]:
    """Labels agents put on a GPU node after it joins, if they reach it: NFD's PCI vendor label, and the
    GPU Operator's ``nvidia.com/gpu.present`` (set where NFD found an NVIDIA device)."""
    if not instance.gpus:
        return {}
    nfd = [d for d in cluster.daemonsets if d.name == "node-feature-discovery-worker"]
    if not any(d.lands_on(labels, pool.flexible, pool.taints) for d in nfd):
        return {}
    runtime = {"feature.node.kubernetes.io/pci-10de.present": "true"}
    if any(d.name == "nvidia-operator-validator" for d in cluster.daemonsets):
        runtime["nvidia.com/gpu.present"] = "true"
    return runtime


def plan_pools(cluster: Cluster) -> list[PoolPlan]:
    plans = []
    for pool in cluster.pools:
        shapes = []
        for instance in pool.instances:
            labels = {**instance.labels(), **pool.labels}
            labels = {**_runtime_gpu_labels(cluster, pool, instance, labels), **labels}
            landed = [d for d in cluster.daemonsets if d.lands_on(labels, pool.flexible, pool.taints)]
            overhead = sum((d.requests for d in landed), Resources())
            shapes.append(Shape(instance, node_allocatable(pool, instance) - overhead, [d.name for d in landed], labels))
        plans.append(PoolPlan(pool, shapes))
    return plans


def _candidate(plan: PoolPlan, workload: Workload) -> bool:
    pool = plan.pool
    if untolerated(workload.tolerations, pool.taints):
        return False
    if workload.resource_claims and pool.kind in ("Karpenter NodePool", "Auto Mode NodePool"):
        return False  # Karpenter skips pods with resourceClaims; Auto Mode has no DRA
    return any(workload.selection.admits(s.labels, pool.flexible) for s in plan.usable)


def _fits(shape: Shape, pool: Pool, workload: Workload) -> bool:
    return workload.selection.admits(shape.labels, pool.flexible) and not shape.free.shortfalls(workload.requests)


def _fit_count(free: Resources, pod: Resources) -> int:
    """How many ``pod``s fit into ``free`` (every pod takes a pod slot, so the count is finite)."""
    counts = [math.floor((have + 1e-9) / need) for have, need in zip(free._tuple(), pod._tuple())
              if need > 0 and not math.isinf(have)]
    return max(min(counts), 0) if counts else 0


def _place(nodes: list[Resources], pods: list[Resources], capacity: Resources) -> list[Resources]:
    """First-fit-decreasing placement of ``pods`` onto ``nodes`` (free room per node), opening nodes of
    ``capacity`` as needed; returns the new free room per node. Identical pods are placed as a group
    (as many per node as fit), which keeps hundreds of replicas cheap."""
    nodes = list(nodes)
    groups: dict[Resources, int] = {}
    for pod in pods:
        groups[pod] = groups.get(pod, 0) + 1
    for pod in sorted(groups, key=lambda p: (p.gpus, p.cpu_m, p.memory_mib), reverse=True):
        left = groups[pod]
        for i, free in enumerate(nodes):
            if not left:
                break
            k = min(_fit_count(free, pod), left)
            if k:
                nodes[i] = free - pod.scaled(k)
                left -= k
        per_node = _fit_count(capacity, pod)
        if not per_node:
            nodes.extend([capacity - pod] * left)  # does not fit at all: one (overfull) node each
            continue
        full, rest = divmod(left, per_node)
        nodes.extend([capacity - pod.scaled(per_node)] * full)
        if rest:
            nodes.append(capacity - pod.scaled(rest))
    return nodes


def _pack(pods: list[Resources], capacity: Resources) -> int:
    """Nodes first-fit-decreasing packing needs for ``pods`` on nodes of ``capacity``."""
    return len(_place([], pods, capacity))


def _pods(workloads: list[Workload], counts: dict[str, int]) -> list[Resources]:
    pods: list[Resources] = []
    for w in workloads:
        pods.extend([w.requests] * counts[w.name])
    return pods


def simulate(cluster: Cluster) -> Simulation:
    findings: list[Finding] = []
    plans = plan_pools(cluster)
    placements: dict[str, str] = {}
    landing: dict[str, PoolPlan] = {}
    memory_check: list[tuple[Workload, PoolPlan]] = []

    for workload in cluster.workloads:
        candidates = [p for p in plans if _candidate(p, workload)]
        fitting = [p for p in candidates if any(_fits(s, p.pool, workload) for s in p.usable)]
        if fitting:
            landing[workload.name] = fitting[0]
            placements[workload.name] = fitting[0].pool.name
            fitting[0].workloads.append(workload)
            continue
        if not candidates:
            dra = " (its resourceClaims need a managed node group: Karpenter skips such pods, Auto Mode has no DRA)" \
                if workload.resource_claims else ""
            findings.append(Finding(
                "fit", workload.name, "no pool", "placement", workload.selection.describe(), "no matching pool",
                f"{workload.name} selects {workload.selection.describe()} but no pool matches its selection and "
                f"taints it tolerates{dra}, so it stays Pending; change its node selector or tolerations, or add a pool.",
                workload_key=workload.key))
            continue
        for plan in candidates:
            shape = min(
                (s for s in plan.usable if workload.selection.admits(s.labels, plan.pool.flexible)),
                key=lambda s: len(s.free.shortfalls(workload.requests)) * 1e12
                - (s.free.gpus * 1e9 + s.free.cpu_m * 1e3 + s.free.memory_mib),
            )
            short = shape.free.shortfalls(workload.requests)
            ds = f" after the node's reserve and {len(shape.daemonsets)} DaemonSet(s) ({', '.join(shape.daemonsets)})"
            if len(plan.usable) < len(plan.shapes):
                ds += "; Cluster Autoscaler sizes a group at 0 nodes by its first instance type"
            for name, need, have in short:
                findings.append(Finding(
                    "fit", workload.name, plan.pool.name, name, _res(name, need), _res(name, have),
                    f"{workload.name} requests {_res(name, need)}{'' if name == 'cpu' else ' of ' + name} per pod but the roomiest usable node of "
                    f"{plan.pool.kind} '{plan.pool.name}' ({shape.instance.name}) has {_res(name, have)} allocatable{ds}. "
                    f"Lower the request or give the pool a larger instance type.",
                    workload_key=workload.key, where_key=plan.pool.key))
        if candidates:
            memory_check.append((workload, candidates[0]))

    for plan in plans:
        findings.extend(_pool_findings(plan, cluster))
    for workload, plan in memory_check:
        findings.extend(_memory_findings(workload, plan, require_fit=False))
    for workload in cluster.workloads:
        findings.extend(_memory_findings(workload, landing.get(workload.name)))
    findings.extend(_quota_findings(cluster))
    for workload in cluster.workloads:
        findings.extend(_rollout_findings(workload))
    for workload in cluster.workloads:
        if workload.scale_to_zero and workload.wake_signal is False:
            findings.append(Finding(
                "wake-up", workload.name, workload.namespace, "scale-to-zero trigger", "a signal from outside its pods",
                workload.wake_detail or "only self-signals",
                f"{workload.name} may scale to zero but every trigger reads only what its own pods emit "
                f"({workload.wake_detail or 'no external trigger'}), so once at zero nothing wakes it. Add a trigger "
                f"on a series that exists at zero replicas (the gateway's request rate, a queue, a cron) or keep "
                f"minReplicaCount at 1.",
                workload_key=workload.key))
    order = {c: i for i, c in enumerate(CHECKS)}
    findings.sort(key=lambda f: (order[f.check], f.workload or "", f.where, f.resource))
    return Simulation(findings, plans, placements)


def _pool_findings(plan: PoolPlan, cluster: Cluster) -> list[Finding]:
    pool = plan.pool
    out: list[Finding] = []
    label = f"{pool.kind} '{pool.name}'"
    if pool.capacity_source is None:
        grows = pool.max_nodes is None or pool.max_nodes > pool.min_nodes
        # Nothing scales the pool, so it keeps what it was created with: a managed group its
        # desiredSize (EKS creates that many nodes). That fixed capacity may already hold every
        # workload at max replicas; only a shortfall is a finding.
        stays = pool.desired_nodes if pool.desired_nodes is not None else pool.min_nodes
        if grows and plan.planning is not None and plan.workloads and stays:
            maxes = {w.name: w.max_replicas for w in plan.workloads}
            grows = _pack(_pods(plan.workloads, maxes), plan.planning.free) > stays
        if grows:
            out.append(Finding(
                "capacity-source", None, pool.name, "nodes", f"up to {_fmt(pool.max_nodes) if pool.max_nodes is not None else 'unbounded'} nodes",
                f"{stays} (nothing adds nodes)",
                f"{label} may grow from {pool.min_nodes} to {pool.max_nodes if pool.max_nodes is not None else 'its limits'} "
                f"nodes but nothing adds them (managed groups need Cluster Autoscaler, NodePools a Karpenter "
                f"controller), so it stays at {stays}. Install the autoscaler for it or set enough fixed nodes.",
                where_key=pool.key))
    elif pool.capacity_source == "Cluster Autoscaler" and pool.min_nodes == 0:
        template = pool.template or ScaleFromZeroTemplate()
        missing = []
        if pool.is_gpu and GPU_RESOURCE not in template.resources:
            missing.append(f"resources/{GPU_RESOURCE}")
        for taint in pool.taints:
            if taint.effect in HARD_EFFECTS and taint.key not in template.taints:
                missing.append(f"taint/{taint.key}")
        selected = set().union(*(w.selection.keys() for w in plan.workloads)) if plan.workloads else set()
        for key in sorted(selected):
            if key in pool.labels and key not in template.labels:
                missing.append(f"label/{key}")
        if missing:
            out.append(Finding(
                "scale-from-zero", None, pool.name, "node-template tags", ", ".join(missing), "absent",
                f"{label} sits at 0 nodes and Cluster Autoscaler builds its template node from the Auto Scaling "
                f"group's k8s.io/cluster-autoscaler/node-template/* tags, which lack {', '.join(missing)}; pending "
                f"pods never scale it up from zero. Tag the group's ASG with them.",
                where_key=pool.key))
    best = plan.planning
    if best is None or not plan.workloads:
        return out
    capacity = best.free
    mins = {w.name: w.min_replicas for w in plan.workloads}
    plan.nodes_at_min = max(pool.min_nodes, _pack(_pods(plan.workloads, mins), capacity))
    maxes = {w.name: w.max_replicas for w in plan.workloads}
    plan.nodes_at_max = _pack(_pods(plan.workloads, maxes), capacity)
    per_node = best.instance.gpus
    plan.gpus_at_min = sum(w.requests.gpus * w.min_replicas for w in plan.workloads)
    plan.gpus_at_max = sum(w.requests.gpus * w.max_replicas for w in plan.workloads)
    # Nodes are bounded by a group's max, static replicas or limits.nodes; GPUs by limits[nvidia.com/gpu].
    ceiling: float | None = pool.static_nodes if pool.static_nodes is not None else pool.max_nodes
    if ceiling is None:
        ceiling = pool.node_limit
    gpu_cap = pool.gpu_limit

    def over(nodes: int) -> list[tuple[str, str, str]]:
        problems = []
        if ceiling is not None and nodes > ceiling:
            problems.append(("nodes", f"{nodes} nodes", f"max {_fmt(ceiling)}"))
        if gpu_cap is not None and per_node and nodes * per_node > gpu_cap:
            problems.append((GPU_RESOURCE, f"{_fmt(nodes * per_node)} GPUs", f"limit {_fmt(gpu_cap)}"))
        return problems

    out.extend(_group_findings(plan, label, capacity, best.instance.name, over))
    base = _place([], _pods(plan.workloads, mins), capacity)
    at_min = len(base)
    min_problems = over(at_min)
    for resource, need, have in min_problems:
        out.append(Finding(
            "pool-min", None, pool.name, resource, need, have,
            f"{label} cannot hold the min replicas of what lands there ({', '.join(f'{w.name} x{w.min_replicas}' for w in plan.workloads if w.min_replicas)}): "
            f"they need {need} of {best.instance.name}, the pool allows {have}. Raise the pool's maximum or lower min replicas.",
            where_key=pool.key))
    slots: dict[Resources, int] = {}
    for workload in plan.workloads if not min_problems else []:
        # the others at min (packed once), this one's extra replicas first filling the room left there
        pod, extra = workload.requests, max(workload.max_replicas - workload.min_replicas, 0)
        if pod not in slots:
            slots[pod] = sum(_fit_count(free, pod) for free in base)
        room = slots[pod]
        pods_per_node = _fit_count(capacity, pod) or 1  # not per_node: over() reads that one (GPUs a node has)

        def nodes_for(pods: int, room: int = room, pods_per_node: int = pods_per_node) -> int:
            return len(base) + (math.ceil((pods - room) / pods_per_node) if pods > room else 0)

        at_max = over(nodes_for(extra))
        for resource, need, have in at_max:
            out.append(Finding(
                "pool-max", workload.name, pool.name, resource, need, have,
                f"{workload.name} can never reach its {workload.max_replicas} max replicas on {label}: with the "
                f"others at min they need {need} of {best.instance.name}, the pool allows {have}. Raise the pool's "
                f"maximum or lower its max replicas.",
                workload_key=workload.key, where_key=pool.key))
        if not at_max:
            out.extend(_surge_findings(workload, plan, label, best.instance.name,
                                        nodes_for(extra + _stalling_surge(workload)), over))
    if len(plan.workloads) > 1:
        for resource, need, have in over(plan.nodes_at_max):
            out.append(Finding(
                "overcommit", None, pool.name, resource, need, have,
                f"{label} is overcommitted when every workload there is at max replicas ({need}, the pool allows "
                f"{have}); they cannot all peak at once. Fine if intended.",
                blocking=False, where_key=pool.key))
    return out


def _group_findings(plan: PoolPlan, label: str, capacity: Resources, instance: str,
                    over: Callable[[int], list[tuple[str, str, str]]]) -> list[Finding]:
    """A LeaderWorkerSet replica is a group of ``size`` pods that serves only when every pod runs: the leader's
    vLLM waits for all its pipeline stages, and LeaderWorkerSet recreates the whole group when one pod fails
    (kubernetes-sigs/lws pkg/controllers/pod_controller.go, ``handleRestartPolicy`` under
    ``RecreateGroupOnPodRestart``). A pool whose ceiling holds part of a group is not "short by the rest":
    the pods that land hold their GPUs and serve nothing. Counted alone, the pool empty: if one whole group
    does not fit, no replica of the model ever serves there."""
    out = []
    for workload in plan.workloads:
        if workload.group_size <= 1:
            continue
        per_node = _fit_count(capacity, workload.requests) or 1
        nodes = math.ceil(workload.group_size / per_node)
        for resource, need, have in over(nodes):
            out.append(Finding(
                "group", workload.name, plan.pool.name, resource, need, have,
                f"{workload.name} serves each replica as one group of {workload.group_size} pods ({nodes} "
                f"{instance} nodes), all or nothing, but {label} allows {have}: not one whole group fits, and the "
                f"pods that do land hold their GPUs while serving nothing. Raise the pool's ceiling to at least one "
                f"group ({need}), or serve the model on fewer nodes per replica.",
                workload_key=workload.key, where_key=plan.pool.key))
    return out


def _stalling_surge(workload: Workload) -> int:
    """Surge pods a rollout at max replicas must place before it may take any old pod down: the resolved
    ``maxSurge`` when ``maxUnavailable`` resolves to 0, else 0.

    The rule, from the deployment controller (kubernetes/kubernetes pkg/controller/deployment/rolling.go
    ``reconcileOldReplicaSets``): old pods are scaled down only while ``available >= replicas -
    maxUnavailable``. With ``maxUnavailable`` 0 an old pod goes only once a surge pod is ready, so a surge
    pod the pool has no room for stays Pending and the rollout stalls until ``progressDeadlineSeconds``
    marks it failed, at peak, when a fix is most needed. With ``maxUnavailable`` >= 1 the controller takes
    an old pod down first and the new one takes its room: the rollout finishes with one replica fewer
    for a while (the textbook "the surge needs room" is wrong there), and :func:`_rollout_findings`
    judges whether enough stay serving."""
    if workload.rollout is None:
        return 0
    size = max(workload.group_size, 1)
    surge, unavailable = workload.rollout.fenceposts(workload.max_replicas // size)
    return surge * size if unavailable == 0 else 0


def _surge_findings(workload: Workload, plan: PoolPlan, label: str, instance: str, nodes: int,
                    over: Callable[[int], list[tuple[str, str, str]]]) -> list[Finding]:
    surge = _stalling_surge(workload)
    if not surge:
        return []
    gpus = workload.requests.gpus
    size = max(workload.group_size, 1)
    unit = f"group(s) of {size} pods" if size > 1 else "pod(s)"
    controller = "the LeaderWorkerSet controller" if size > 1 else "the deployment controller"
    pods = " pods" if size > 1 else ""
    noun = "replicas" if size == 1 else "pods"
    count = (f" ({workload.max_replicas} {noun} x {_fmt(gpus)} GPUs + {surge} surge{pods} x {_fmt(gpus)} GPUs = "
             f"{_fmt((workload.max_replicas + surge) * gpus)} GPUs)") if gpus else ""
    out = []
    for resource, need, have in over(nodes):
        out.append(Finding(
            "surge", workload.name, plan.pool.name, resource, need, have,
            f"A rollout of {workload.name} at its {workload.max_replicas // size} max replicas stalls on {label}: its "
            f"maxUnavailable resolves to 0, so {controller} first adds {surge // size} surge {unit} and takes "
            f"no old {'one' if size > 1 else 'pod'} down until {'it is' if size > 1 else 'one is'} ready; at max plus "
            f"surge{count}, with the others at min, it needs "
            f"{need} of {instance}, the pool allows {have}. The "
            f"surge pod stays Pending and the rollout never finishes. Raise the pool's maximum to hold the surge "
            f"pod, or roll out with maxSurge: 0, maxUnavailable: 1 (only where min replicas >= 2 keep serving).",
            workload_key=workload.key, where_key=plan.pool.key))
    return out


def _rollout_findings(workload: Workload) -> list[Finding]:
    """A GPU Deployment whose rollout may take every serving pod down while its min replicas promise a warm one.

    The deployment controller takes down up to the resolved ``maxUnavailable`` old pods before new ones
    are ready (``ResolveFenceposts``; ``Recreate`` takes all). ``maxSurge: 0, maxUnavailable: 1`` is the
    way out of a pool at its ceiling. The rule: a rollout at min replicas must leave one serving, so it
    is acceptable where min replicas >= 2 (one serves while the other is replaced) and refused at min 1.
    A scale-to-zero model (min 0) is exempt: it already accepts having no warm replica (a cold start
    behind the gateway's fallback), and a rollout at its one replica is no worse. Judged for pods that
    request GPUs (model servers), whose pools sit at a ceiling."""
    if workload.rollout is None or not workload.requests.gpus or workload.min_replicas == 0:
        return []
    replicas = workload.min_replicas // max(workload.group_size, 1)  # a LeaderWorkerSet's count in groups
    _, unavailable = workload.rollout.fenceposts(replicas)
    serving = max(replicas - unavailable, 0)
    if serving >= 1:
        return []
    rollout = workload.rollout
    how = "Recreate" if rollout.type == "Recreate" else \
        f"maxSurge: {rollout.max_surge}, maxUnavailable: {rollout.max_unavailable}"
    if workload.group_size > 1:
        # A multi-node group: a surge needs a whole second group of GPU nodes, which a pool sized to the model
        # rarely has; the restart gap is served by the gateway's fallbacks (LiteLLM falls back on the 5xx of a
        # group with no ready leader). Advice, not a block.
        return [Finding(
            "rollout", workload.name, workload.namespace, "serving groups during a rollout", "at least 1", str(serving),
            f"{workload.name} rolls out with {how}: at its {replicas} min group(s) the LeaderWorkerSet controller "
            f"restarts {unavailable} group(s) before a new one is ready, so the gateway serves the model from its "
            "fallbacks for a cold multi-node start. To keep it warm, raise min replicas or give the pool room for "
            "a surge group (rollout: surge).",
            blocking=False, workload_key=workload.key)]
    return [Finding(
        "rollout", workload.name, workload.namespace, "serving pods during a rollout", "at least 1", str(serving),
        f"{workload.name} rolls out with {how}: at its {replicas} min replica(s) the deployment controller takes "
        f"{unavailable} pod(s) down before a new one is ready, leaving {serving} serving for a cold GPU start. A "
        f"rollout that takes pods down first needs min replicas >= {unavailable + 1} (or 0, a model that may go "
        f"cold anyway); raise min replicas, or surge (maxSurge: 1, maxUnavailable: 0) with room for the extra pod "
        f"in its pool.",
        workload_key=workload.key)]


def _memory_findings(workload: Workload, plan: PoolPlan | None, require_fit: bool = True) -> list[Finding]:
    model = workload.model
    if model is None or plan is None:
        return []
    out = []
    arch = model.architecture
    if arch.max_position_embeddings and model.max_model_len > arch.max_position_embeddings:
        out.append(Finding(
            "model-memory", workload.name, plan.pool.name, "max-model-len", str(model.max_model_len),
            str(arch.max_position_embeddings),
            f"{workload.name} sets max-model-len {model.max_model_len} above {arch.name}'s "
            f"{arch.max_position_embeddings} positions; vLLM refuses to start. Lower maxModelLen.",
            workload_key=workload.key, where_key=plan.pool.key))
    pod_gpus = int(workload.requests.gpus)
    if pod_gpus and model.tensor_parallel > pod_gpus:
        out.append(Finding(
            "model-memory", workload.name, plan.pool.name, "tensor-parallel", str(model.tensor_parallel), str(pod_gpus),
            f"{workload.name} sets --tensor-parallel-size {model.tensor_parallel} but its pod has {pod_gpus} GPU(s): "
            f"vLLM needs one GPU per tensor-parallel rank and will not start. Request {model.tensor_parallel} GPUs "
            f"per pod or set tensorParallelSize to {pod_gpus}.",
            workload_key=workload.key, where_key=plan.pool.key))
    sizes = [s.instance.gpu_memory_mib for s in plan.usable
             if s.instance.gpu_memory_mib and (_fits(s, plan.pool, workload) or not require_fit)]
    if not sizes:
        return out
    gpu_memory = max(sizes)
    # Weights split over the ranks only when each rank has its own GPU; with more ranks than GPUs
    # the split the textbook formula assumes never happens (the pod's GPUs hold them).
    ranks = model.tensor_parallel if not pod_gpus or model.tensor_parallel <= pod_gpus else pod_gpus
    stages = model.pipeline_parallel if model.pipeline_parallel <= max(workload.group_size, 1) else workload.group_size
    fit = memory_fit(arch, max_model_len=model.max_model_len, tensor_parallel=ranks,
                     gpu_memory_mib=gpu_memory, utilization=model.gpu_memory_utilization, pipeline_parallel=stages)
    if not fit.fits:
        need = f"{fit.need_per_gpu / GIB:.1f} GiB"
        have = f"{fit.budget_per_gpu / GIB:.1f} GiB"
        out.append(Finding(
            "model-memory", workload.name, plan.pool.name, "gpu-memory", need, have,
            f"{workload.name} ({arch.name}, {arch.quantization}, tensor parallel {ranks}"
            f"{f', pipeline parallel {stages}' if stages > 1 else ''}, "
            f"max-model-len {model.max_model_len}) needs {fit.describe()}, but {model.gpu_memory_utilization} of a "
            f"{gpu_memory / 1024:.1f} GiB GPU on '{plan.pool.name}' is {have}: it will not load. Use a quantized "
            f"checkpoint, more GPUs per replica, a shorter maxModelLen or a larger GPU.",
            workload_key=workload.key, where_key=plan.pool.key))
    return out


_QUOTA_KEYS = {
    "cpu": ("requests", "cpu_m", "cpu"), "requests.cpu": ("requests", "cpu_m", "cpu"),
    "memory": ("requests", "memory_mib", "memory"), "requests.memory": ("requests", "memory_mib", "memory"),
    "limits.cpu": ("limits", "cpu_m", "cpu"), "limits.memory": ("limits", "memory_mib", "memory"),
    f"requests.{GPU_RESOURCE}": ("requests", "gpus", GPU_RESOURCE),
    "pods": ("requests", "pods", "pods"),
}


def _quota_findings(cluster: Cluster) -> list[Finding]:
    out = []
    for quota in cluster.quotas:
        # a PriorityClass-scoped quota counts only the pods of the classes it selects
        workloads = [w for w in cluster.workloads if w.namespace == quota.namespace and quota.counts(w.priority_class)]
        if not workloads:
            continue
        for key, hard in sorted(quota.hard.items()):
            if key not in _QUOTA_KEYS:
                continue
            side, attr, name = _QUOTA_KEYS[key]
            need = 0.0
            for w in workloads:
                per_pod = getattr(w.requests if side == "requests" else w.limits, attr)
                if attr == "pods":
                    per_pod = 1
                need += per_pod * (w.max_replicas + w.surge)
            if need > hard + 1e-9:
                surge = sum(w.surge for w in workloads)
                out.append(Finding(
                    "quota", None, f"{quota.namespace}/{quota.name}", key, _res(name, need), _res(name, hard),
                    f"ResourceQuota '{quota.name}' in '{quota.namespace}' allows {key} {_res(name, hard)} but its "
                    f"workloads need {_res(name, need)} at max replicas plus {surge} rollout surge pod(s) "
                    f"({', '.join(f'{w.name} {w.max_replicas}+{w.surge}' for w in workloads)}); scale-out stalls at the "
                    f"quota. Raise the quota, lower max replicas, or set maxSurge: 0.",
                    where_key=quota.key))
    return out


def reserved_gpus(pool: Pool, reservations: Sequence[tuple[str, Reservation, Instance]]) -> float:
    """GPUs the reservations recorded for ``pool`` hold (``engine.reservations_from_resources``), each once."""
    held = {r.id: r.count * i.gpus for key, r, i in reservations if key == pool.key}
    return float(sum(held.values()))


def reserved_findings(simulation: Simulation, reservations: Sequence[tuple[str, Reservation, Instance]]) -> list[Finding]:
    """A Karpenter pool that admits only ``reserved`` capacity launches only into its node class's reservations
    (Karpenter docs, tasks/odcrs: with ``reserved`` alone there is no spot or on-demand fallback), so its
    ceiling is what they hold, below any GPU limit: min replicas beyond it stay Pending (blocking); max
    replicas beyond it wait for room (reported, not refused). Pools with a fallback, and managed groups on a
    reservation (capped at its count by the settings, judged by pool-max), are not judged here."""
    findings = []
    for plan in simulation.plans:
        pool = plan.pool
        if pool.flexible.get("karpenter.sh/capacity-type") != frozenset({"reserved"}):
            continue
        held = reserved_gpus(pool, reservations)
        where = f"{pool.kind} '{pool.name}'"
        names = ", ".join(w.name for w in plan.workloads)
        if plan.gpus_at_min > held:
            findings.append(Finding(
                "reserved", None, pool.name, "reserved GPUs", _fmt(plan.gpus_at_min), _fmt(held),
                f"{where} launches only into capacity reservations, which hold {_fmt(held)} GPUs, but its workloads "
                f"({names}) need {_fmt(plan.gpus_at_min)} at min replicas; the rest stays Pending. Add spot or "
                "on-demand to its capacity types, select more reservations, or lower min replicas.",
                where_key=pool.key))
        elif plan.gpus_at_max > held:
            findings.append(Finding(
                "reserved", None, pool.name, "reserved GPUs", _fmt(plan.gpus_at_max), _fmt(held),
                f"{where} launches only into capacity reservations, which hold {_fmt(held)} GPUs; at max replicas its "
                f"workloads ({names}) need {_fmt(plan.gpus_at_max)}, and the replicas beyond wait for room.",
                blocking=False, where_key=pool.key))
    return findings
