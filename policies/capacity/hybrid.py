"""On-prem GPU servers joined as EKS Hybrid Nodes, as a plan describes them.

No AWS or Kubernetes object lists servers that join later, so the program describes each set of
identical servers once, as data (:func:`description`), on its ``HybridNodePool`` component: the
number of servers, what one offers (vCPUs, memory, GPUs and their memory, pods) and the labels and
taints their kubelet registers with (the same values the join configuration passes as kubelet flags).
The capacity model and the policies read it back with :func:`read`.

Such a pool is fixed capacity: nothing adds servers, so it holds exactly ``nodes`` nodes, and it has
no cloud price (its hourly price is 0; a chargeback rate, when given, is reported apart and never
enters the cloud GPU budget).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .instances import Instance

#: The label EKS gives every hybrid node (nodeadm registers it); add-ons that must stay off hybrid
#: nodes (the VPC CNI) select ``NotIn [hybrid]`` on it (EKS user guide, "Configure add-ons for hybrid nodes").
COMPUTE_TYPE_LABEL = "eks.amazonaws.com/compute-type"
HYBRID_COMPUTE_TYPE = "hybrid"
#: The pool kind as findings and the capacity table name it.
HYBRID_KIND = "hybrid node pool"


@dataclass(frozen=True)
class HybridPool:
    name: str
    nodes: int
    labels: dict[str, str]
    taints: list[dict[str, str]]
    instance: Instance
    cost_per_gpu_hour_usd: float | None = None


def description(*, name: str, nodes: int, labels: dict[str, str], taints: list[dict[str, str]], cpu: int,
                memory_gib: int, gpus: int, gpu_memory_mib: int, accelerator: str, max_pods: int,
                network_mbps: int, cost_per_gpu_hour_usd: float | None) -> dict[str, Any]:
    """The pool as its component's inputs and outputs carry it (camelCase, plain data)."""
    return {
        "poolName": name,
        "nodes": nodes,
        "labels": {COMPUTE_TYPE_LABEL: HYBRID_COMPUTE_TYPE, **labels},
        "taints": [dict(t) for t in taints],
        "server": {"cpu": cpu, "memoryGib": memory_gib, "gpus": gpus, "gpuMemoryMib": gpu_memory_mib,
                   "accelerator": accelerator, "maxPods": max_pods, "networkMbps": network_mbps},
        "costPerGpuHourUsd": cost_per_gpu_hour_usd,
    }


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def read(props: Any) -> HybridPool | None:
    """The pool a description holds; ``None`` when a field is missing or not a number (unknown yet)."""
    if not isinstance(props, dict):
        return None
    raw_server = props.get("server")
    server: dict[str, Any] = raw_server if isinstance(raw_server, dict) else {}
    numbers = {k: _number(server.get(k)) for k in ("cpu", "memoryGib", "gpus", "gpuMemoryMib", "maxPods", "networkMbps")}
    nodes, name = _number(props.get("nodes")), props.get("poolName")
    if nodes is None or not isinstance(name, str) or any(v is None for v in numbers.values()):
        return None
    raw_labels = props.get("labels")
    labels: dict[str, Any] = raw_labels if isinstance(raw_labels, dict) else {}
    taints = [t for t in props.get("taints") or [] if isinstance(t, dict)]
    accelerator = server.get("accelerator") if isinstance(server.get("accelerator"), str) else None
    instance = Instance(
        name=f"on-prem server of {name}", category="hybrid", family="on-prem", vcpu=int(numbers["cpu"] or 0),
        memory_mib=int((numbers["memoryGib"] or 0) * 1024), gpus=int(numbers["gpus"] or 0), gpu_name=accelerator,
        gpu_memory_mib=int(numbers["gpuMemoryMib"] or 0), hourly_usd=0.0, max_pods=int(numbers["maxPods"] or 0),
        on_demand_offered=None, network_bandwidth_mbps=int(numbers["networkMbps"] or 0),
    )
    cost = _number(props.get("costPerGpuHourUsd"))
    return HybridPool(name, int(nodes), {str(k): str(v) for k, v in labels.items()},
                      [{str(k): str(v) for k, v in t.items()} for t in taints], instance, cost)
