"""The scheduling contract between GPU capacity and the workloads that use it.

GPU nodes are a separate capacity class: every GPU pool carries the GPU taint and the pool labels
below, and every GPU workload both tolerates the taint and requests ``nvidia.com/gpu`` in its
limits. This module is the only place the program decides those keys and values; components build
taints, labels, tolerations and selectors through these helpers, never by hand. The policy pack
receives the same values through ``policies/config/<stack>.json`` (a test keeps the two in step).
"""

from __future__ import annotations

from typing import Literal

GPU_RESOURCE = "nvidia.com/gpu"

GPU_TAINT_KEY = "nvidia.com/gpu"
GPU_TAINT_VALUE = "true"
#: Kubernetes spelling of the taint effect; the EKS API spells it ``NO_SCHEDULE``.
GPU_TAINT_EFFECT = "NoSchedule"

PURPOSE_LABEL = "node.kubernetes.io/purpose"
POOL_LABEL = "llm-platform.io/pool"
ACCELERATOR_LABEL = "llm-platform.io/accelerator"
GPU_MEMORY_LABEL = "llm-platform.io/gpu-memory-mib"
CAPACITY_TYPE_LABEL = "llm-platform.io/capacity-type"
#: Matches the NVIDIA device plugin's default required node affinity (note the dot).
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"

SYSTEM_PURPOSE = "system"
GPU_INFERENCE_PURPOSE = "gpu-inference"

CapacityType = Literal["ON_DEMAND", "SPOT", "CAPACITY_BLOCK"]

_EKS_EFFECT = {"NoSchedule": "NO_SCHEDULE", "NoExecute": "NO_EXECUTE", "PreferNoSchedule": "PREFER_NO_SCHEDULE"}
_CAPACITY_LABEL_VALUE = {"ON_DEMAND": "on-demand", "SPOT": "spot", "CAPACITY_BLOCK": "reserved"}

#: Label keys a stack may not override through ``labels`` settings: the contract owns them.
RESERVED_LABEL_KEYS = frozenset(
    {PURPOSE_LABEL, POOL_LABEL, ACCELERATOR_LABEL, GPU_MEMORY_LABEL, CAPACITY_TYPE_LABEL, GPU_PRESENT_LABEL}
)


def eks_taint(key: str, value: str, effect: str) -> dict[str, str]:
    """A taint in the EKS managed node group API spelling."""
    return {"key": key, "value": value, "effect": _EKS_EFFECT[effect]}


def gpu_taint_eks() -> dict[str, str]:
    """The GPU taint every GPU managed node group carries."""
    return eks_taint(GPU_TAINT_KEY, GPU_TAINT_VALUE, GPU_TAINT_EFFECT)


def gpu_taint_k8s() -> dict[str, str]:
    """The GPU taint in Kubernetes spelling (Karpenter NodePools, node objects)."""
    return {"key": GPU_TAINT_KEY, "value": GPU_TAINT_VALUE, "effect": GPU_TAINT_EFFECT}


def gpu_toleration() -> dict[str, str]:
    """The toleration a GPU workload or GPU node agent carries: any value of the GPU taint key."""
    return {"key": GPU_TAINT_KEY, "operator": "Exists", "effect": GPU_TAINT_EFFECT}


def capacity_label_value(capacity_type: str) -> str:
    return _CAPACITY_LABEL_VALUE[capacity_type]


def system_pool_labels(pool: str) -> dict[str, str]:
    return {PURPOSE_LABEL: SYSTEM_PURPOSE, POOL_LABEL: pool, CAPACITY_TYPE_LABEL: "on-demand"}


def gpu_pool_labels(
    pool: str, *, purpose: str, accelerator: str, gpu_memory_mib: int, capacity_type: str
) -> dict[str, str]:
    """Labels that say what a GPU pool is; workloads select pools by these."""
    return {
        PURPOSE_LABEL: purpose,
        POOL_LABEL: pool,
        ACCELERATOR_LABEL: accelerator,
        GPU_MEMORY_LABEL: str(gpu_memory_mib),
        CAPACITY_TYPE_LABEL: capacity_label_value(capacity_type),
        GPU_PRESENT_LABEL: "true",
    }


def system_node_selector() -> dict[str, str]:
    """Where platform controllers run: the untainted, on-demand system pool."""
    return {PURPOSE_LABEL: SYSTEM_PURPOSE}


def policy_contract() -> dict[str, object]:
    """The contract as the policy pack's config expects it (``policies/config/<stack>.json``)."""
    return {
        "gpuTaintKey": GPU_TAINT_KEY,
        "gpuResource": GPU_RESOURCE,
        "purposeLabel": PURPOSE_LABEL,
        "acceleratorLabel": ACCELERATOR_LABEL,
        "gpuMemoryLabel": GPU_MEMORY_LABEL,
        "capacityTypeLabel": CAPACITY_TYPE_LABEL,
        "systemPurpose": SYSTEM_PURPOSE,
    }
