"""Per-pool capacity rows: source, node and GPU bounds, what lands there, headroom and cost at min and max.

Cost at max is the pool's worst case (:mod:`.cost`); cost at min prices the nodes the min replicas
need (or the pool's minimum, whichever is larger) at the same on-demand rate. Headroom is the pool's
worst-case GPU count less the GPUs its workloads request at min (or max) replicas; negative means
they cannot all run.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .cost import WorstCase, hourly_prices, launchable, node_group_worst_case, nodepool_worst_case
from .hybrid import HYBRID_KIND
from .model import Cluster, Pool
from .simulate import PoolPlan, Simulation, _pack


@dataclass
class CapacityRow:
    pool: str
    kind: str
    source: str
    min_nodes: int
    max_nodes: float | None
    gpus_per_node: int
    max_gpus: float | None
    min_gpus_per_node: int = 0
    workloads: list[str] = field(default_factory=list)
    gpus_at_min: float = 0
    gpus_at_max: float = 0
    headroom_at_min: float | None = None
    headroom_at_max: float | None = None
    hourly_usd_at_min: float = 0.0
    hourly_usd_at_max: float | None = None
    worst_case_detail: str = ""


def worst_case(pool: Pool) -> WorstCase | None:
    """The pool's worst case by the one formula the pack and the report share."""
    label = f"{pool.kind} '{pool.name}'"
    if pool.kind in ("managed node group", "self-managed node group"):
        return node_group_worst_case(label, pool.max_nodes or 0, pool.instances)
    return nodepool_worst_case(label, pool.instances or [], static_nodes=pool.static_nodes,
                               gpu_limit=pool.gpu_limit, node_limit=pool.node_limit)


def stack_worst_case(pools: list[Pool]) -> WorstCase:
    """The stack's worst case in the cloud: the sum over its GPU pools (an unbounded pool adds nothing
    here; the pack reports it apart). On-prem hybrid pools are left out: their servers are bought, no
    autoscaler adds any, and the GPU budget bounds what the cloud may bill."""
    cases = [c for c in (worst_case(p) for p in pools if p.is_gpu and p.kind != HYBRID_KIND) if c is not None]
    return WorstCase(sum(c.gpus for c in cases), sum(c.hourly_usd for c in cases),
                     "; ".join(c.detail for c in cases if c.gpus))


def capacity_rows(cluster: Cluster, simulation: Simulation) -> list[CapacityRow]:
    rows = []
    for plan in simulation.plans:
        rows.append(_row(plan))
    return rows


def _row(plan: PoolPlan) -> CapacityRow:
    pool = plan.pool
    worst = worst_case(pool)
    per_node = pool.gpus_per_node
    node_group = pool.kind in ("managed node group", "self-managed node group")
    dearest = max(hourly_prices(pool.instances), default=0.0)
    if node_group:
        # An Auto Scaling group may launch any of its types: price its nodes at the dearest.
        at_min = max(plan.nodes_at_min, pool.min_nodes) * dearest
        at_max: float | None = (pool.max_nodes or 0) * dearest
    else:
        # Karpenter launches the cheapest type that holds the pods.
        at_min = _cheapest_at_min(plan)
        at_max = worst.hourly_usd if worst else None
    row = CapacityRow(
        pool=pool.name, kind=pool.kind, source=pool.capacity_source or "none", min_nodes=pool.min_nodes,
        max_nodes=plan.max_nodes, gpus_per_node=per_node, max_gpus=worst.gpus if worst else None,
        min_gpus_per_node=min((i.gpus for i in pool.instances), default=0),
        workloads=[w.name for w in plan.workloads], gpus_at_min=plan.gpus_at_min, gpus_at_max=plan.gpus_at_max,
        hourly_usd_at_min=at_min, hourly_usd_at_max=at_max,
        worst_case_detail=worst.detail if worst else "unbounded",
    )
    if worst is not None and per_node:
        row.headroom_at_min = worst.gpus - plan.gpus_at_min
        row.headroom_at_max = worst.gpus - plan.gpus_at_max
    return row


def _cheapest_at_min(plan: PoolPlan) -> float:
    pods = [w.requests for w in plan.workloads for _ in range(w.min_replicas)]
    if not pods:
        return (plan.pool.static_nodes or 0) * min(hourly_prices(launchable(plan.pool.instances)), default=0.0)
    offered = launchable([shape.instance for shape in plan.usable])
    costs = [
        _pack(pods, shape.free) * hourly_prices([shape.instance])[0]
        for shape in plan.usable
        if shape.instance in offered and all(not shape.free.shortfalls(p) for p in pods)
    ]
    return min(costs, default=0.0)
