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

from .analyzer import PackReport
from .plan import Plan

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


@dataclass
class Summary:
    project: str
    stack: str
    resource_count: int
    resources_by_type: dict[str, int]
    pools: list[PoolSummary] = field(default_factory=list)
    worst_case_gpus: int = 0
    worst_case_gpu_hourly_usd: float = 0.0
    worst_case_gpu_monthly_usd: float = 0.0
    hours_per_month: int = 730

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
    )


def summarize(plan: Plan) -> Summary:
    catalog = load_catalog()
    by_type = Counter(r.type for r in plan.resources)
    pools = [
        _pool(r.name, "managed node group", r.inputs) for r in plan.resources if r.type in NODE_GROUP_TYPES
    ] + [_node_pool(r.name, r.inputs) for r in plan.resources if r.type == NODE_POOL_TYPE]
    gpus = sum(p.worst_case_gpus for p in pools)
    hourly = round(sum(p.worst_case_hourly_usd for p in pools), 4)
    return Summary(
        project=plan.project,
        stack=plan.stack,
        resource_count=len(plan.resources),
        resources_by_type=dict(sorted(by_type.items())),
        pools=sorted(pools, key=lambda p: p.name),
        worst_case_gpus=gpus,
        worst_case_gpu_hourly_usd=hourly,
        worst_case_gpu_monthly_usd=round(hourly * catalog.hours_per_month, 2),
        hours_per_month=catalog.hours_per_month,
    )


def render(summary: Summary, console: Console) -> None:
    console.print(f"[bold]{summary.project}[/bold] stack [bold]{summary.stack}[/bold]: {summary.resource_count} resources")

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
    console.print(
        f"GPU capacity (worst case): [bold]{summary.worst_case_gpus}[/bold] GPUs; "
        f"GPU cost at on-demand prices: [bold]${summary.worst_case_gpu_hourly_usd:,.2f}/h[/bold], "
        f"[bold]${summary.worst_case_gpu_monthly_usd:,.0f}/month[/bold] ({summary.hours_per_month} h)"
    )


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
