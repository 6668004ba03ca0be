"""The offline check's summary: what a plan builds, its GPU capacity and its worst-case GPU cost.

Figures come from the plan (what the engine would receive), priced from the shared instance
catalog. Worst case means every pool at its max size on on-demand prices, Spot included.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from components.catalog import load_catalog
from components.contract import GPU_RESOURCE, POOL_LABEL
from policies.capacity.engine import cluster_from_resources
from policies.capacity.simulate import simulate
from policies.capacity.table import CapacityRow, capacity_rows, worst_case

from automation.offline.pack_runner import PackReport
from automation.offline.plan import Plan

NODE_GROUP_TYPES = ("eks:index:ManagedNodeGroup", "aws:eks/nodeGroup:NodeGroup")
NODE_POOL_TYPE = "kubernetes:karpenter.sh/v1:NodePool"


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
    gpu_model: str
    max_gpus_per_node: int
    worst_case_gpus: int
    worst_case_hourly_usd: float
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

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _pool(resource_name: str, kind: str, inputs: dict[str, Any]) -> PoolSummary:
    catalog = load_catalog()
    types = list(inputs.get("instanceTypes") or [])
    known = [catalog.instances[t] for t in types if t in catalog.instances]
    gpu_types = [t for t in known if t.is_gpu]
    scaling = inputs.get("scalingConfig") or {}
    max_size = int(scaling.get("maxSize", 0))
    max_gpus = max((t.gpus for t in gpu_types), default=0)
    max_price = max((t.on_demand_hourly_usd for t in gpu_types), default=0.0)
    return PoolSummary(
        name=inputs.get("nodeGroupName") or resource_name,
        kind=kind,
        instance_types=types,
        capacity_type=inputs.get("capacityType") or "ON_DEMAND",
        min_size=int(scaling.get("minSize", 0)),
        desired_size=int(scaling.get("desiredSize", 0)),
        max_size=max_size,
        taints=[f"{t.get('key')}={t.get('value', '')}:{t.get('effect')}" for t in inputs.get("taints") or []],
        gpu_model=", ".join(sorted({t.gpu_name or "" for t in gpu_types})),
        max_gpus_per_node=max_gpus,
        worst_case_gpus=max_size * max_gpus,
        worst_case_hourly_usd=round(max_size * max_price, 4),
        max_usd_per_gpu_hour=max((t.on_demand_hourly_usd / t.gpus for t in gpu_types), default=0.0),
        label=(inputs.get("labels") or {}).get(POOL_LABEL, ""),
    )


def _node_pool(resource_name: str, inputs: dict[str, Any]) -> PoolSummary:
    """A Karpenter NodePool, bounded by its GPU limit and priced at its dearest GPU per hour."""
    catalog = load_catalog()
    spec = inputs.get("spec") or {}
    template = (spec.get("template") or {}).get("spec") or {}
    requirements = {r.get("key", "").rsplit("/", 1)[-1]: r.get("values", []) for r in template.get("requirements") or []}
    families = requirements.get("instance-family", [])
    gpu_types = [t for t in catalog.instances.values() if t.is_gpu and t.family in families]
    gpu_limit = int(str((spec.get("limits") or {}).get("nvidia.com/gpu", 0)))
    per_gpu = max((t.on_demand_hourly_usd / t.gpus for t in gpu_types), default=0.0)
    return PoolSummary(
        name=(inputs.get("metadata") or {}).get("name", resource_name),
        kind="karpenter NodePool",
        instance_types=[f"{f}.*" for f in families],
        capacity_type=",".join(requirements.get("capacity-type", [])),
        min_size=0,
        desired_size=0,
        max_size=0,
        taints=[f"{t.get('key')}={t.get('value', '')}:{t.get('effect')}" for t in template.get("taints") or []],
        gpu_model=", ".join(sorted({t.gpu_name or "" for t in gpu_types})),
        max_gpus_per_node=max((t.gpus for t in gpu_types), default=0),
        worst_case_gpus=gpu_limit,
        worst_case_hourly_usd=round(gpu_limit * per_gpu, 4),
        max_usd_per_gpu_hour=per_gpu,
        label=((spec.get("template") or {}).get("metadata") or {}).get("labels", {}).get(POOL_LABEL, ""),
    )


def _models(plan: Plan, pools: list[PoolSummary], hours: int) -> list[ModelSummary]:
    """Each served model: replica bounds from its ScaledObject, GPUs and pool from its Deployment,
    worst case = max replicas x GPUs per replica x the pool's dearest GPU-hour."""
    price = {p.label: p.max_usd_per_gpu_hour for p in pools if p.label}
    deployments = {
        (r.inputs["metadata"].get("namespace"), r.inputs["metadata"].get("name")): r.inputs
        for r in plan.of_type("kubernetes:apps/v1:Deployment")
    }
    models = []
    for scaler in plan.of_type("kubernetes:keda.sh/v1alpha1:ScaledObject"):
        meta, spec = scaler.inputs["metadata"], scaler.inputs["spec"]
        deployment = deployments.get((meta.get("namespace"), spec["scaleTargetRef"]["name"]), {})
        pod = deployment.get("spec", {}).get("template", {})
        pool = pod.get("spec", {}).get("nodeSelector", {}).get(POOL_LABEL, "")
        limits = [c.get("resources", {}).get("limits", {}) for c in pod.get("spec", {}).get("containers", [])]
        gpus = sum(int(lim.get(GPU_RESOURCE, 0)) for lim in limits)
        high = int(spec.get("maxReplicaCount", 100))
        models.append(
            ModelSummary(
                tier=pod.get("metadata", {}).get("labels", {}).get("llm-platform.io/tier", meta.get("namespace", "")),
                model=meta["name"],
                pool=pool,
                min_replicas=int(spec.get("minReplicaCount", 0)),
                max_replicas=high,
                gpus_per_replica=gpus,
                worst_case_gpus=high * gpus,
                worst_case_monthly_usd=round(high * gpus * price.get(pool, 0.0) * hours, 2),
            )
        )
    return sorted(models, key=lambda m: (m.tier, m.model))


def summarize(plan: Plan) -> Summary:
    catalog = load_catalog()
    by_type = Counter(r.type for r in plan.resources)
    pools = [
        _pool(r.name, "managed node group", r.inputs) for r in plan.resources if r.type in NODE_GROUP_TYPES
    ] + [_node_pool(r.name, r.inputs) for r in plan.resources if r.type == NODE_POOL_TYPE]
    # Worst-case GPUs and cost come from the capacity model, the calculator the pack's cap and budget use.
    cluster = cluster_from_resources(plan.resources)
    modelled = {p.name: p for p in cluster.pools}
    for summary in pools:
        pool = modelled.get(summary.name)
        worst = worst_case(pool) if pool is not None else None
        if worst is not None:
            summary.worst_case_gpus = int(worst.gpus)
            summary.worst_case_hourly_usd = round(worst.hourly_usd, 4)
    capacity = capacity_rows(cluster, simulate(cluster))
    gpus = sum(p.worst_case_gpus for p in pools)
    hourly = round(sum(p.worst_case_hourly_usd for p in pools), 4)
    quotas = {
        r.inputs["metadata"]["namespace"]: int(str(r.inputs["spec"]["hard"].get(f"requests.{GPU_RESOURCE}", 0)))
        for r in plan.of_type("kubernetes:core/v1:ResourceQuota")
    }
    return Summary(
        project=plan.project,
        stack=plan.stack,
        resource_count=len(plan.resources),
        resources_by_type=dict(sorted(by_type.items())),
        pools=sorted(pools, key=lambda p: p.name),
        models=_models(plan, pools, catalog.hours_per_month),
        tier_gpu_quotas=quotas,
        worst_case_gpus=gpus,
        worst_case_gpu_hourly_usd=hourly,
        worst_case_gpu_monthly_usd=round(hourly * catalog.hours_per_month, 2),
        hours_per_month=catalog.hours_per_month,
        capacity=capacity,
    )


def render(summary: Summary, console: Console) -> None:
    console.print(f"[bold]{escape(summary.project)}[/bold] stack [bold]{escape(summary.stack)}[/bold]: "
                  f"{summary.resource_count} resources")

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
            f"{p.worst_case_hourly_usd:.2f}" if p.max_gpus_per_node else "-",
        )
    console.print(pools)
    if summary.models:
        tiers = Table(title="Serving tiers", title_justify="left")
        for column in ("tier", "model", "pool", "replicas min/max", "GPUs/replica", "max GPUs", "tier GPU quota", "max $/month"):
            tiers.add_column(column, overflow="fold")
        for m in summary.models:
            quota = summary.tier_gpu_quotas.get(f"serving-{m.tier}")
            tiers.add_row(
                m.tier, m.model, m.pool, f"{m.min_replicas}/{m.max_replicas}", str(m.gpus_per_replica),
                str(m.worst_case_gpus), "-" if quota is None else str(quota), f"{m.worst_case_monthly_usd:,.0f}",
            )
        console.print(tiers)
    if summary.capacity:
        render_capacity(summary, console)
    console.print(
        f"GPU capacity (worst case): [bold]{summary.worst_case_gpus}[/bold] GPUs; "
        f"GPU cost at on-demand prices: [bold]${summary.worst_case_gpu_hourly_usd:,.2f}/h[/bold], "
        f"[bold]${summary.worst_case_gpu_monthly_usd:,.0f}/month[/bold] ({summary.hours_per_month} h)"
    )


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
            escape(row.pool), escape(row.source), f"{row.min_nodes}/{num(row.max_nodes)}",
            str(row.gpus_per_node) if row.min_gpus_per_node == row.gpus_per_node else f"{row.min_gpus_per_node}-{row.gpus_per_node}",
            num(row.max_gpus), escape("\n".join(row.workloads)) or "-", f"{row.gpus_at_min:g}/{row.gpus_at_max:g}",
            f"{num(row.headroom_at_min)}/{num(row.headroom_at_max)}", f"{row.hourly_usd_at_min * hours:,.0f}",
            "-" if row.hourly_usd_at_max is None else f"{row.hourly_usd_at_max * hours:,.0f}",
        )
    console.print(table)


def render_policies(report: PackReport, console: Console) -> None:
    """Violations grouped by enforcement level, each with the resource and how to fix it."""
    levels = report.by_level
    if not report.violations:
        console.print(f"Policy pack [bold]{report.pack}[/bold] ({report.config}): no violations")
        return
    console.print(f"Policy pack [bold]{report.pack}[/bold] ({report.config}):")
    for level in ("mandatory", "remediate", "advisory"):
        for violation in levels.get(level, []):
            console.print(escape(f"  [{level}] {violation.policy_name}: {violation.urn or '(stack)'}"))
            for line in violation.message.splitlines():
                console.print(escape(f"      {line}"))
            if violation.description and violation.description not in violation.message:
                console.print(escape(f"      fix: {violation.description}"))
    counts = ", ".join(f"{len(v)} {k}" for k, v in levels.items() if v)
    console.print(f"Policy violations: {counts}")
