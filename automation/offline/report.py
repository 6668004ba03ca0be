"""The offline check's summary: what a plan builds, its GPU capacity and its worst-case GPU cost.

What the plan declares (names, sizes, taints) is read from the plan; every GPU count and price
comes from the capacity model (``policies.capacity``), the one calculator the pack's cap and budget
also use. Worst case means every pool at its ceiling at on-demand prices, Spot included.
"""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from automation.offline.pack.findings import PackReport
from automation.offline.plan import Plan
from components.contract import GPU_RESOURCE, POOL_LABEL, TIER_LABEL
from components.specs.serving import KV_CACHE_TRIGGER
from policies.capacity import kinds
from policies.capacity.cold_start import (
    GP3_BASELINE,
    WARM,
    Start,
    fast_image_pull,
    gpu_software_of,
    image_prepulled,
    root_volume_mibps,
    start,
    weight_loading,
)
from policies.capacity.cost import per_gpu_hourly_usd, reserved_split
from policies.capacity.engine import cluster_from_resources, reservations_from_resources
from policies.capacity.instances import InstanceCatalog
from policies.capacity.model import Cluster, Pool, Workload
from policies.capacity.simulate import Shape, Simulation, simulate
from policies.capacity.table import CapacityRow, capacity_rows, stack_worst_case, worst_case
from policies.capacity.throughput import TokenCostEstimate, token_cost_estimate

#: The node groups the summary lists (managed ones: the program makes no self-managed group).
MANAGED_GROUP_TYPES = frozenset({kinds.EKS_MANAGED_NODE_GROUP, kinds.AWS_NODE_GROUP})


@dataclass
class PoolSummary:
    name: str
    kind: str
    instance_types: list[str]
    capacity_type: str
    min_size: int
    desired_size: int
    max_size: int
    taints: list[str]
    gpu_model: str = ""
    max_gpus_per_node: int = 0
    worst_case_gpus: int = 0
    worst_case_hourly_usd: float = 0.0
    max_usd_per_gpu_hour: float = 0.0
    label: str = ""


@dataclass
class ModelSummary:
    tier: str
    model: str
    pool: str
    min_replicas: int
    max_replicas: int
    gpus_per_replica: int
    worst_case_gpus: int
    worst_case_monthly_usd: float
    #: Estimate at the tier's KV-cache target on the pool's planning type (policies/capacity/throughput.py):
    #: generated tokens per second of one replica and USD per million output and input tokens; ``None``
    #: where no estimate is made (an embedding model, a GPU whose bandwidth is not known, an unpriced type).
    tokens_per_second_at_target: float | None = None
    usd_per_million_output_at_target: float | None = None
    usd_per_million_input_at_target: float | None = None


@dataclass
class StartStep:
    """One step of a model's start: seconds cold and warm, and how the cold figure is made up."""

    step: str
    cold_seconds: float
    warm_seconds: float
    detail: str


@dataclass
class ColdStartSummary:
    """A model's predicted start from first request to first token (policies/capacity/cold_start.py):
    cold on a new node of its pool's planning type, warm on a node that is up with the image."""

    tier: str
    pool: str
    instance: str
    cold_seconds: float
    warm_seconds: float
    dominant_step: str
    steps: list[StartStep]


@dataclass
class ReservationSummary:
    id: str
    type: str
    instance_type: str
    count: int
    zone: str
    end: str | None
    pool: str


@dataclass
class ReservedSummary:
    """Reserved capacity (docs/reserved-capacity.md): GPUs and cost committed whether used or not, and
    what the pools may spend on demand beyond them at their ceilings (figures from ``policies.capacity.cost``)."""

    gpus: int
    committed_hourly_usd: float
    committed_monthly_usd: float
    on_demand_beyond_monthly_usd: float
    detail: str
    reservations: list[ReservationSummary] = field(default_factory=list)


@dataclass
class Summary:
    project: str
    stack: str
    resource_count: int
    resources_by_type: dict[str, int]
    pools: list[PoolSummary] = field(default_factory=list)
    models: list[ModelSummary] = field(default_factory=list)
    tier_gpu_quotas: dict[str, int] = field(default_factory=dict)
    worst_case_gpus: int = 0
    worst_case_gpu_hourly_usd: float = 0.0
    worst_case_gpu_monthly_usd: float = 0.0
    hours_per_month: int = 730
    capacity: list[CapacityRow] = field(default_factory=list)
    cold_start: dict[str, ColdStartSummary] = field(default_factory=dict)
    reserved: ReservedSummary | None = None
    #: Why no figure in dollars is known: the catalog has no prices for the stack's region (the reason
    #: names the command that fills them). Dollar fields are then null in JSON and "?" in text.
    prices_unknown: str | None = None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        return _without_dollars(data) if self.prices_unknown else data


def _without_dollars(value: Any) -> Any:
    """``value`` with every dollar figure (a key naming ``usd``) set to None."""
    if isinstance(value, dict):
        return {k: None if "usd" in k.lower() else _without_dollars(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_dollars(v) for v in value]
    return value


def _taints(taints: list[Any] | None) -> list[str]:
    return [f"{t.get('key')}={t.get('value', '')}:{t.get('effect')}" for t in taints or []]


def _figures(summary: PoolSummary, pool: Pool | None) -> PoolSummary:
    """GPU model, GPUs per node, prices and worst case: all from the capacity model's view of the pool."""
    if pool is None:
        return summary
    gpu_types = [i for i in pool.instances if i.gpus]
    worst = worst_case(pool) if pool.is_gpu else None
    summary.gpu_model = ", ".join(sorted({i.gpu_name or "" for i in gpu_types}))
    summary.max_gpus_per_node = pool.gpus_per_node
    summary.max_usd_per_gpu_hour = per_gpu_hourly_usd(gpu_types)
    summary.worst_case_gpus = int(worst.gpus) if worst else 0
    summary.worst_case_hourly_usd = round(worst.hourly_usd, 4) if worst else 0.0
    return summary


def _node_group(resource_name: str, inputs: dict[str, Any], pool: Pool | None) -> PoolSummary:
    """A managed node group as the plan declares it, figures from the capacity model."""
    scaling = inputs.get("scalingConfig") or {}
    return _figures(PoolSummary(
        name=inputs.get("nodeGroupName") or resource_name,
        kind="managed node group",
        # a Capacity Block group lists none: its type is in the launch template, which the model read
        instance_types=list(inputs.get("instanceTypes") or ([i.name for i in pool.instances] if pool else [])),
        capacity_type=inputs.get("capacityType") or "ON_DEMAND",
        min_size=int(scaling.get("minSize", 0)),
        desired_size=int(scaling.get("desiredSize", 0)),
        max_size=int(scaling.get("maxSize", 0)),
        taints=_taints(inputs.get("taints")),
        label=(inputs.get("labels") or {}).get(POOL_LABEL, ""),
    ), pool)


def _node_pool(resource_name: str, inputs: dict[str, Any], pool: Pool | None) -> PoolSummary:
    """A Karpenter NodePool as the plan declares it, figures from the capacity model."""
    spec = inputs.get("spec") or {}
    template = (spec.get("template") or {}).get("spec") or {}
    requirements = {r.get("key", "").rsplit("/", 1)[-1]: r.get("values", []) for r in template.get("requirements") or []}
    return _figures(PoolSummary(
        name=(inputs.get("metadata") or {}).get("name", resource_name),
        kind="karpenter NodePool",
        instance_types=[f"{f}.*" for f in requirements.get("instance-family", [])],
        capacity_type=",".join(requirements.get("capacity-type", [])),
        min_size=0,
        desired_size=0,
        max_size=0,
        taints=_taints(template.get("taints")),
        label=((spec.get("template") or {}).get("metadata") or {}).get("labels", {}).get(POOL_LABEL, ""),
    ), pool)


def _kv_cache_target(spec: dict[str, Any]) -> float | None:
    """The KV-cache share a ScaledObject's ``kv-cache-usage`` trigger holds replicas at."""
    for trigger in spec.get("triggers") or []:
        threshold = (trigger.get("metadata") or {}).get("threshold")
        if trigger.get("name") == KV_CACHE_TRIGGER and threshold is not None:
            return float(threshold)
    return None


def _estimate(workload: Workload, gpus: int, pod: dict[str, Any], shape: Shape | None,
              kv_target: float | None) -> TokenCostEstimate | None:
    """Cost per token of one replica (``gpus`` GPUs, every node of a multi-node group) at its tier's
    KV-cache target on the pool's planning type."""
    serving = workload.model
    containers = (pod.get("spec") or {}).get("containers") or []
    pooling = any("pooling" in (c.get("args") or []) for c in containers if isinstance(c, dict))
    hourly = shape.instance.hourly_usd if shape is not None else None
    if serving is None or shape is None or kv_target is None or pooling or hourly is None or not shape.instance.gpus:
        return None
    instance = shape.instance
    return token_cost_estimate(
        serving.architecture, gpus=gpus, tensor_parallel=serving.tensor_parallel,
        pipeline_parallel=serving.pipeline_parallel,
        gpu_name=instance.gpu_name, gpu_memory_mib=instance.gpu_memory_mib,
        usd_per_gpu_hour=hourly / instance.gpus, utilization=serving.gpu_memory_utilization,
        max_model_len=serving.max_model_len, kv_cache_target=kv_target)


def _models(plan: Plan, cluster: Cluster, hours: float, simulation: Simulation) -> list[ModelSummary]:
    """Each served model (a ScaledObject's target): replica bounds and GPUs per replica as the capacity
    model reads them; worst case = max replicas x GPUs per replica x its pool's dearest GPU-hour; cost
    per million tokens at its tier's KV-cache target on the type its pool plans with."""
    shapes = {p.pool.name: p.planning for p in simulation.plans}
    price = {p.labels[POOL_LABEL]: per_gpu_hourly_usd(p.instances) for p in cluster.pools if POOL_LABEL in p.labels}
    workloads = {w.name: w for w in cluster.workloads}
    templates = _server_templates(plan)
    models = []
    for scaler in plan.of_type(kinds.SCALED_OBJECT):
        meta, spec = scaler.inputs["metadata"], scaler.inputs["spec"]
        namespace, target = meta.get("namespace"), spec["scaleTargetRef"]["name"]
        kind = spec["scaleTargetRef"].get("kind") or "Deployment"
        workload = workloads.get(f"{kind} {namespace}/{target}")
        if workload is None:
            continue
        pod = templates.get(workload.name, {})
        pool = dict(workload.selection.node_selector).get(POOL_LABEL, "")
        # A LeaderWorkerSet's replica is a group: its GPUs are every pod's, its replicas the groups.
        size = max(workload.group_size, 1)
        gpus = int(workload.limits.gpus) * size
        estimate = _estimate(workload, gpus, pod, shapes.get(simulation.placements.get(workload.name, "")),
                             _kv_cache_target(spec))
        models.append(
            ModelSummary(
                tier=pod.get("metadata", {}).get("labels", {}).get(TIER_LABEL, namespace or ""),
                model=meta["name"],
                pool=pool,
                min_replicas=workload.min_replicas // size,
                max_replicas=workload.max_replicas // size,
                gpus_per_replica=gpus,
                worst_case_gpus=workload.max_replicas // size * gpus,
                worst_case_monthly_usd=round(workload.max_replicas // size * gpus * price.get(pool, 0.0) * hours, 2),
                tokens_per_second_at_target=round(estimate.tokens_per_second) if estimate else None,
                usd_per_million_output_at_target=round(estimate.usd_per_million_output, 3) if estimate else None,
                usd_per_million_input_at_target=round(estimate.usd_per_million_input, 3) if estimate else None,
            )
        )
    return sorted(models, key=lambda m: (m.tier, m.model))


def _server_templates(plan: Plan) -> dict[str, dict[str, Any]]:
    """The pod template that runs each model's server, by the capacity model's workload name: a Deployment's
    template, a LeaderWorkerSet's leader template (the pod that runs ``vllm serve``)."""
    found: dict[str, dict[str, Any]] = {}
    for kind, resources in (("Deployment", plan.of_type(kinds.DEPLOYMENT)), ("LeaderWorkerSet", plan.of_type(kinds.LEADER_WORKER_SET))):
        for r in resources:
            meta, spec = r.inputs.get("metadata") or {}, r.inputs.get("spec") or {}
            template = spec.get("template") if kind == "Deployment" else \
                (spec.get("leaderWorkerTemplate") or {}).get("leaderTemplate")
            found[f"{kind} {meta.get('namespace')}/{meta.get('name')}"] = template or {}
    return found


def _root_volume_mibps(plan: Plan, pool: Pool) -> float:
    """The root volume throughput the plan gives the pool's nodes (the pack's cold-start-budget reads it
    with the same function); gp3's baseline where none is set (Auto Mode's NodeClass)."""
    return root_volume_mibps(plan.resources, pool.key) or GP3_BASELINE.value


def _cold_starts(plan: Plan, cluster: Cluster, simulation: Simulation) -> dict[str, ColdStartSummary]:
    """Each model Deployment's start, cold and warm, on the planning type of the pool it lands on, with the
    image and startup probe the plan gives its server container."""
    plans = {p.pool.name: p for p in simulation.plans}
    # Per pool, worked out once: the type its autoscaler plans with, its nodes' root volume throughput,
    # and per pool and image whether a DaemonSet pre-pulls it.
    shapes = {name: p.planning for name, p in plans.items()}
    volumes = {p.pool.key: _root_volume_mibps(plan, p.pool) for p in simulation.plans}
    parallel_pulls = {p.pool.key: fast_image_pull(plan.resources, p.pool.key) for p in simulation.plans}
    paths = {p.pool.key: gpu_software_of(plan.resources, p.pool) for p in simulation.plans}
    prepulled: dict[tuple[str, str], bool] = {}
    templates = _server_templates(plan)
    starts: dict[str, ColdStartSummary] = {}
    for workload in cluster.workloads:
        template = templates.get(workload.name)
        pool_plan = plans.get(simulation.placements.get(workload.name, ""))
        shape = shapes.get(pool_plan.pool.name) if pool_plan else None
        if workload.model is None or template is None or pool_plan is None or shape is None or not pool_plan.pool.capacity_source:
            continue
        containers = [c for c in (template.get("spec") or {}).get("containers") or [] if isinstance(c, dict)]
        server = next((c for c in containers if "vllm" in str(c.get("image") or "")), None)
        probe = (server or {}).get("startupProbe") or {}
        if server is None or not probe.get("periodSeconds") or not probe.get("failureThreshold"):
            continue
        name = workload.name.rsplit("/", 1)[-1]
        pool, image = pool_plan.pool, str(server.get("image"))
        if (pool.key, image) not in prepulled:
            prepulled[pool.key, image] = image_prepulled(plan.resources, image, pool)
        start_of = functools.partial(
            # Every node of a group streams or copies its own stages' share, all at once; the leader serves once
            # the slowest has loaded, so a group starts as one node with its share.
            start, weight_bytes=workload.model.architecture.weight_bytes() / max(workload.group_size, 1),
            instance=shape.instance,
            capacity_source=pool.capacity_source, image=image, disk_throughput_mibps=volumes[pool.key],
            startup_probe_period_seconds=float(probe["periodSeconds"]),
            startup_probe_failures=int(probe["failureThreshold"]),
            loading=weight_loading(template.get("spec") or {}), image_prepulled=prepulled[pool.key, image],
            fast_image_pull=parallel_pulls[pool.key], gpu_software=paths[pool.key])
        cold: Start = start_of(name, f"{pool.kind} '{pool.name}'")
        warm: Start = start_of(name, f"{pool.kind} '{pool.name}'", case=WARM)
        tier = ((template.get("metadata") or {}).get("labels") or {}).get(TIER_LABEL, "")
        key = name if name not in starts else f"{tier}/{name}"
        starts[key] = ColdStartSummary(
            tier=tier, pool=pool.name, instance=cold.instance, cold_seconds=round(cold.seconds, 1),
            warm_seconds=round(warm.seconds, 1), dominant_step=cold.dominant.name,
            steps=[StartStep(c.name, round(float(c.seconds), 1), round(float(w.seconds), 1), c.detail)
                   for c, w in zip(cold.steps, warm.steps, strict=True)])
    return dict(sorted(starts.items()))


def summarize(plan: Plan, catalog: InstanceCatalog | None = None) -> Summary:
    """The plan's summary; every GPU count and price comes from the capacity model (``policies.capacity``),
    the calculator the pack's cap and budget use, priced from ``catalog`` (the stack's region's; a type
    unpriced there raises :class:`UnpricedInstanceError`)."""
    by_type = Counter(r.type for r in plan.resources)
    cluster = cluster_from_resources(plan.resources, catalog=catalog)
    modelled = {p.key: p for p in cluster.pools}
    pools = [
        _node_group(r.name, r.inputs, modelled.get(r.urn)) for r in plan.resources if r.type in MANAGED_GROUP_TYPES
    ] + [_node_pool(r.name, r.inputs, modelled.get(r.urn)) for r in plan.resources if r.type == kinds.NODEPOOL]
    simulation = simulate(cluster)
    capacity = capacity_rows(cluster, simulation)
    worst = stack_worst_case(cluster.pools)
    hours = cluster.hours_per_month
    reserved = _reserved(plan, cluster, catalog, hours)
    quotas = {
        r.inputs["metadata"]["namespace"]: int(str(r.inputs["spec"]["hard"].get(f"requests.{GPU_RESOURCE}", 0)))
        for r in plan.of_type(kinds.RESOURCE_QUOTA)
    }
    return Summary(
        project=plan.project,
        stack=plan.stack,
        resource_count=len(plan.resources),
        resources_by_type=dict(sorted(by_type.items())),
        pools=sorted(pools, key=lambda p: p.name),
        models=_models(plan, cluster, hours, simulation),
        tier_gpu_quotas=quotas,
        worst_case_gpus=int(worst.gpus),
        worst_case_gpu_hourly_usd=round(worst.hourly_usd, 4),
        worst_case_gpu_monthly_usd=round(worst.hourly_usd * hours, 2),
        hours_per_month=int(hours),
        capacity=capacity,
        cold_start=_cold_starts(plan, cluster, simulation),
        reserved=reserved,
    )


def _reserved(plan: Plan, cluster: Cluster, catalog: InstanceCatalog | None, hours: float) -> ReservedSummary | None:
    """The plan's reservations (a managed group's tag, a reserved NodePool's EC2NodeClass annotation), their
    commitment and the on-demand spend beyond them, by the capacity model's one calculator."""
    reservations = reservations_from_resources(plan.resources, catalog=catalog)
    if not reservations:
        return None
    names = {p.key: p.name for p in cluster.pools}
    cases = [(p.key, case) for p in cluster.pools if p.is_gpu and (case := worst_case(p)) is not None]
    split = reserved_split(cases, reservations)
    committed = split.committed
    return ReservedSummary(
        gpus=int(committed.gpus), committed_hourly_usd=round(committed.hourly_usd, 4),
        committed_monthly_usd=round(committed.hourly_usd * hours, 2),
        on_demand_beyond_monthly_usd=round(split.on_demand_hourly_usd * hours, 2), detail=committed.detail,
        reservations=[ReservationSummary(r.id, r.type, r.instance_type, r.count, r.zone, r.end, names.get(key, key))
                      for key, r, _ in reservations],
    )


def render(summary: Summary, console: Console) -> None:
    console.print(Text.assemble((summary.project, "bold"), " stack ", (summary.stack, "bold"),
                                f": {summary.resource_count} resources"))

    types = Table(title="Resources by type", title_justify="left")
    types.add_column("type")
    types.add_column("count", justify="right")
    for type_, count in summary.resources_by_type.items():
        types.add_row(type_, str(count))
    console.print(types)

    pools = Table(title="Node pools", title_justify="left")
    for column in ("pool", "kind", "instances", "capacity", "min/desired/max", "taints", "GPU", "max GPUs", "max $/h"):
        pools.add_column(column, overflow="fold")
    for p in summary.pools:
        pools.add_row(
            p.name,
            p.kind,
            ", ".join(p.instance_types),
            p.capacity_type,
            f"{p.min_size}/{p.desired_size}/{p.max_size}" if p.kind != "karpenter NodePool" else "GPU limit",
            "\n".join(p.taints) or "-",
            f"{p.max_gpus_per_node}x {p.gpu_model}" if p.max_gpus_per_node else "-",
            str(p.worst_case_gpus),
            "?" if summary.prices_unknown and p.max_gpus_per_node else
            f"{p.worst_case_hourly_usd:.2f}" if p.max_gpus_per_node else "-",
        )
    console.print(pools)
    if summary.models:
        tiers = Table(title="Serving tiers", title_justify="left")
        for column in ("tier", "model", "pool", "replicas min/max", "GPUs/replica", "max GPUs", "tier GPU quota", "max $/month",
                       "$/M tokens at target (out/in)"):
            tiers.add_column(column, overflow="fold")
        for m in summary.models:
            quota = summary.tier_gpu_quotas.get(f"serving-{m.tier}")
            at_target = ("-" if m.usd_per_million_output_at_target is None or m.usd_per_million_input_at_target is None
                         else f"{m.usd_per_million_output_at_target:,.2f} / {m.usd_per_million_input_at_target:,.2f}")
            tiers.add_row(
                m.tier, m.model, m.pool, f"{m.min_replicas}/{m.max_replicas}", str(m.gpus_per_replica),
                str(m.worst_case_gpus), "-" if quota is None else str(quota),
                "?" if summary.prices_unknown else f"{m.worst_case_monthly_usd:,.0f}", at_target,
            )
        console.print(tiers)
    if summary.capacity:
        render_capacity(summary, console)
    if summary.cold_start:
        render_cold_starts(summary, console)
    if summary.prices_unknown:
        console.print(Text.assemble(
            "GPU capacity (worst case): ", (str(summary.worst_case_gpus), "bold"), " GPUs; GPU cost and budget: ",
            ("unknown", "bold"), f" ({summary.prices_unknown})",
        ))
        return
    console.print(Text.assemble(
        "GPU capacity (worst case): ", (str(summary.worst_case_gpus), "bold"), " GPUs; GPU cost at on-demand prices: ",
        (f"${summary.worst_case_gpu_hourly_usd:,.2f}/h", "bold"), ", ",
        (f"${summary.worst_case_gpu_monthly_usd:,.0f}/month", "bold"), f" ({summary.hours_per_month} h)",
    ))
    if summary.reserved is not None:
        reserved = summary.reserved
        console.print(Text.assemble(
            "Reserved GPU capacity (committed, paid whether used or not): ", (str(reserved.gpus), "bold"), " GPUs, ",
            (f"${reserved.committed_monthly_usd:,.0f}/month", "bold"), f" ({reserved.detail}); on-demand spend beyond "
            "the reservations at the pools' ceilings: ", (f"${reserved.on_demand_beyond_monthly_usd:,.0f}/month", "bold"),
        ))
        for r in reserved.reservations:
            if r.end:
                console.print(f"  {r.id} ({r.type}, {r.count} x {r.instance_type} in {r.zone}, pool {r.pool}) ends {r.end}")


def render_capacity(summary: Summary, console: Console) -> None:
    """Per pool: who adds nodes, node and GPU bounds, what lands there, GPU headroom and cost at min and max."""
    hours = summary.hours_per_month
    table = Table(title="Capacity (simulated)", title_justify="left")
    for column in ("pool", "source", "nodes min/max", "GPUs/node", "max GPUs", "workloads", "GPUs used min/max",
                   "headroom min/max", "$/month min", "$/month max"):
        table.add_column(column, overflow="fold")

    def num(value: float | None) -> str:
        return "-" if value is None else f"{value:g}"

    for row in summary.capacity:
        table.add_row(
            row.pool, row.source, f"{row.min_nodes}/{num(row.max_nodes)}",
            str(row.gpus_per_node) if row.min_gpus_per_node == row.gpus_per_node else f"{row.min_gpus_per_node}-{row.gpus_per_node}",
            num(row.max_gpus), "\n".join(row.workloads) or "-", f"{row.gpus_at_min:g}/{row.gpus_at_max:g}",
            f"{num(row.headroom_at_min)}/{num(row.headroom_at_max)}",
            "?" if summary.prices_unknown else f"{row.hourly_usd_at_min * hours:,.0f}",
            "?" if summary.prices_unknown else "-" if row.hourly_usd_at_max is None else f"{row.hourly_usd_at_max * hours:,.0f}",
        )
    console.print(table)


def render_cold_starts(summary: Summary, console: Console) -> None:
    """Per model: first request to first token, cold (a new node) and warm (a node with the image), by step."""
    table = Table(title="Cold start (predicted, docs/cold-start.md)", title_justify="left")
    for column in ("model", "pool (node type)", "cold", "warm", "steps cold / warm", "dominant"):
        table.add_column(column, overflow="fold")
    for model, start_ in summary.cold_start.items():
        table.add_row(
            model, f"{start_.pool} ({start_.instance})", f"{start_.cold_seconds:.0f} s", f"{start_.warm_seconds:.0f} s",
            "\n".join(f"{s.step} {s.cold_seconds:.0f} / {s.warm_seconds:.0f} s" for s in start_.steps),
            start_.dominant_step,
        )
    console.print(table)


def render_policies(report: PackReport, console: Console) -> None:
    """Violations grouped by enforcement level, each with the resource and how to fix it."""
    levels = report.by_level
    if not report.violations:
        console.print(Text.assemble("Policy pack ", (report.pack, "bold"), f" ({report.config}): no violations"))
        return
    console.print(Text.assemble("Policy pack ", (report.pack, "bold"), f" ({report.config}):"))
    for level in ("mandatory", "remediate", "advisory"):
        for violation in levels.get(level, []):
            console.print(f"  [{level}] {violation.policy_name}: {violation.urn or '(stack)'}")
            for line in violation.message.splitlines():
                console.print(f"      {line}")
            if violation.description and violation.description not in violation.message:
                console.print(f"      fix: {violation.description}")
    counts = ", ".join(f"{len(v)} {k}" for k, v in levels.items() if v)
    console.print(f"Policy violations: {counts}")
