"""The scheduling contract between GPU capacity and the workloads that use it.

GPU nodes are a separate capacity class: every GPU pool carries the GPU taint and the pool labels
below, and every GPU workload both tolerates the taint and requests ``nvidia.com/gpu`` in its
limits. This module is the only place the program decides those keys and values; components build
taints, labels, tolerations and selectors through these helpers, never by hand. The policy pack
receives the same values through ``policies/config/<stack>.json``, generated from this module by
``python -m automation pack-config write`` (a test fails when the committed files are stale).
"""

from __future__ import annotations

from typing import Literal, get_args

from policies.capacity.cost import CAPACITY_BLOCK as CAPACITY_BLOCK_RESERVATION
from policies.capacity.cost import ODCR as ODCR_RESERVATION
from policies.capacity.cost import RESERVATION_KEY

GPU_RESOURCE = "nvidia.com/gpu"
#: The extended resource the AWS EFA device plugin advertises: one per EFA interface of the node.
#: Multi-node model pods request every interface of their node type (Karpenter then launches the node
#: with that many EFA interfaces; aws/karpenter-provider-aws docs, "Elastic Fabric Adapter").
EFA_RESOURCE = "vpc.amazonaws.com/efa"

GPU_TAINT_KEY = "nvidia.com/gpu"
GPU_TAINT_VALUE = "true"
#: Kubernetes spelling of the taint effect; the EKS API spells it ``NO_SCHEDULE``.
GPU_TAINT_EFFECT = "NoSchedule"

PURPOSE_LABEL = "node.kubernetes.io/purpose"
POOL_LABEL = "llm-platform.io/pool"
ACCELERATOR_LABEL = "llm-platform.io/accelerator"
GPU_MEMORY_LABEL = "llm-platform.io/gpu-memory-mib"
CAPACITY_TYPE_LABEL = "llm-platform.io/capacity-type"
#: Namespace and pod label naming a serving tier; the network policies, the scrape config's ``tier``
#: target label and the report group by it.
TIER_LABEL = "llm-platform.io/tier"
#: Per-GPU memory (MiB) a workload needs; the policy pack checks it against the pool's memory label.
GPU_MEMORY_NEED_ANNOTATION = "llm-platform.io/gpu-memory-mib"
#: Matches the NVIDIA device plugin's default required node affinity (note the dot).
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"
#: The label Cluster Autoscaler's AWS provider reads as "this node has GPUs" (cloudprovider/aws
#: ``GPULabel``). A node that carries it but does not advertise ``nvidia.com/gpu`` yet counts as not
#: ready, so the autoscaler waits for the device plugin instead of adding more nodes.
AUTOSCALER_GPU_LABEL = "k8s.amazonaws.com/accelerator"

SYSTEM_PURPOSE = "system"
# Each set of values below is written once, as its Literal type (what settings fields are typed
# with); the tuples and names are read from it with typing.get_args, in the Literal's order.
#: Karpenter and Auto Mode pools serve every purpose but DRA (Karpenter cannot provision DRA pods).
NodePoolPurpose = Literal["gpu-inference", "gpu-training"]
#: Pools reserved for pods that claim GPUs through Dynamic Resource Allocation (``resourceClaims``).
DraPurpose = Literal["gpu-dra"]
GpuPurpose = Literal[NodePoolPurpose, DraPurpose]
GPU_PURPOSES: tuple[GpuPurpose, ...] = get_args(GpuPurpose)
NODE_POOL_PURPOSES: tuple[NodePoolPurpose, ...] = get_args(NodePoolPurpose)
GPU_INFERENCE_PURPOSE, GPU_TRAINING_PURPOSE = NODE_POOL_PURPOSES
GPU_DRA_PURPOSE: DraPurpose = get_args(DraPurpose)[0]

#: Who installs the GPU node software: the NVIDIA device plugin, the GPU Operator, or nothing (the AMI).
GpuSoftwareProvider = Literal["device-plugin", "gpu-operator", "none"]
GPU_SOFTWARE_PROVIDERS: tuple[GpuSoftwareProvider, ...] = get_args(GpuSoftwareProvider)
DEVICE_PLUGIN, GPU_OPERATOR, NO_GPU_SOFTWARE = GPU_SOFTWARE_PROVIDERS

#: Second taint that keeps everything but the pool's own workload class off training and DRA pools.
WORKLOAD_TAINT_KEY = "llm-platform.io/workload"
_PURPOSE_TAINT_VALUE = {GPU_TRAINING_PURPOSE: "training", GPU_DRA_PURPOSE: "dra"}

#: Capacity types: EKS node group spelling -> Karpenter's (``karpenter.sh/capacity-type``), which the
#: capacity-type label also uses; the two Literals pair up position by position.
CapacityType = Literal["ON_DEMAND", "SPOT", "CAPACITY_BLOCK"]
KarpenterCapacityType = Literal["on-demand", "spot", "reserved"]
CAPACITY_TYPES: dict[CapacityType, KarpenterCapacityType] = dict(
    zip(get_args(CapacityType), get_args(KarpenterCapacityType), strict=True)
)
ON_DEMAND: CapacityType = "ON_DEMAND"
KARPENTER_ON_DEMAND, KARPENTER_SPOT = CAPACITY_TYPES["ON_DEMAND"], CAPACITY_TYPES["SPOT"]
CAPACITY_BLOCK: CapacityType = "CAPACITY_BLOCK"
KARPENTER_RESERVED = CAPACITY_TYPES[CAPACITY_BLOCK]

#: Reserved capacity (docs/reserved-capacity.md). EC2's reservation types, as
#: ``DescribeCapacityReservations`` ``ReservationType`` and Karpenter's
#: ``karpenter.k8s.aws/capacity-reservation-type`` label spell them: a Capacity Block for ML, or an
#: On-Demand Capacity Reservation (``default``). The tag/annotation key that records a pool's
#: reservations for the pack and the report comes from the capacity model (one source).
RESERVATION_CAPACITY_BLOCK, RESERVATION_ODCR = CAPACITY_BLOCK_RESERVATION, ODCR_RESERVATION
RESERVATION_TYPES = (RESERVATION_CAPACITY_BLOCK, RESERVATION_ODCR)
ReservationType = Literal[RESERVATION_TYPES]  # type: ignore[valid-type]
RESERVATIONS_KEY = RESERVATION_KEY
#: Launch template market type of a Capacity Block (EKS user guide "Create a managed node group with
#: Capacity Blocks for ML": ``InstanceMarketOptions.MarketType: capacity-block``).
CAPACITY_BLOCK_MARKET_TYPE = "capacity-block"
#: Days before a Capacity Block's end from which the check warns about tiers that depend on it.
RESERVATION_END_WARNING_DAYS = 14
#: How long before a Capacity Block's end EKS scales a managed group on it to 0, by a scheduled action named
#: "Amazon EKS Node Group Capacity Scaledown Before Reservation End" (EKS user guide, "Create a managed node
#: group with Capacity Blocks for ML": EC2 starts shutting the instances down 30 minutes before the end, so
#: EKS scales down 40 minutes before it). A managed group's nodes are gone from then on.
CAPACITY_BLOCK_MANAGED_SCALEDOWN_MINUTES = 40

_EKS_EFFECT = {"NoSchedule": "NO_SCHEDULE", "NoExecute": "NO_EXECUTE", "PreferNoSchedule": "PREFER_NO_SCHEDULE"}
_CAPACITY_LABEL_VALUE: dict[str, str] = {spelling: karpenter for eks, karpenter in CAPACITY_TYPES.items() for spelling in (eks, karpenter)}

#: Label keys a stack may not override through ``labels`` settings: the contract owns them.
RESERVED_LABEL_KEYS = frozenset(
    {PURPOSE_LABEL, POOL_LABEL, ACCELERATOR_LABEL, GPU_MEMORY_LABEL, CAPACITY_TYPE_LABEL, GPU_PRESENT_LABEL}
)


#: How every platform Deployment rolls out by default: one extra pod first, none taken down before it
#: is ready, so serving capacity never dips. The surge pod needs room under its pool's ceiling (group
#: ``maxSize``, NodePool ``limits``) with the model at max replicas: with ``maxUnavailable: 0`` the
#: deployment controller removes no old pod until the surge pod is ready, so a surge pod the pool has no
#: room for stalls the rollout at peak (the capacity simulation's ``surge`` check refuses that).
SURGE_ROLLOUT: dict[str, object] = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
#: The way out for a model whose pool sits at its ceiling: take one old pod down first, its replacement
#: takes the freed room. Serving capacity dips by one replica during the rollout, so it is allowed only
#: where ``replicas.min >= 2`` leaves one serving, or ``replicas.min`` is 0 (a scale-to-zero model that
#: already accepts going cold); the simulation's ``rollout`` check refuses ``replicas.min`` 1.
NO_SURGE_ROLLOUT: dict[str, object] = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}
#: A model's ``rollout`` setting -> its Deployment strategy. The rule: ``surge`` (default) wherever the
#: pool's ceiling holds the model at max replicas plus one; ``noSurge`` only where it cannot and
#: ``replicas.min`` is 0 or at least 2. The program (settings check) and the pack judge both through one simulation
#: (``policies/capacity/simulate.py``), the settings on the strategy this table gives.
#: How the gateway reaches a tier's models: ``service`` (the model's Service, replicas picked at random by
#: kube-proxy) or ``prefix-aware`` (an Endpoint Picker per model: components/specs/routing.py).
Routing = Literal["service", "prefix-aware"]
SERVICE_ROUTING, PREFIX_AWARE_ROUTING = get_args(Routing)

Rollout = Literal["surge", "noSurge"]
ROLLOUTS: dict[Rollout, dict[str, object]] = dict(zip(get_args(Rollout), (SURGE_ROLLOUT, NO_SURGE_ROLLOUT), strict=True))


def rollout_strategy(rollout: Rollout) -> dict[str, object]:
    """The Deployment ``spec.strategy`` of a model whose ``rollout`` setting is ``rollout``."""
    return ROLLOUTS[rollout]


def group_rollout_strategy(rollout: Rollout) -> dict[str, object]:
    """The LeaderWorkerSet ``spec.rolloutStrategy`` for the same ``rollout`` setting: the same numbers, counted
    in groups (one group = one replica of ``nodesPerReplica`` pods). LeaderWorkerSet's own defaults are
    maxSurge 0, maxUnavailable 1 (the CRD in kubernetes-sigs/lws charts/lws/crds), so a multi-node model
    written without a strategy would take a whole group down first."""
    rolling = ROLLOUTS[rollout]["rollingUpdate"]
    return {"type": "RollingUpdate", "rollingUpdateConfiguration": dict(rolling)}  # type: ignore[call-overload]


def k8s_effect(eks_effect: str) -> str:
    """Kubernetes spelling of an EKS taint effect (``NO_SCHEDULE`` -> ``NoSchedule``)."""
    return {v: k for k, v in _EKS_EFFECT.items()}[eks_effect]


def eks_taint(key: str, value: str, effect: str) -> dict[str, str]:
    """A taint in the EKS managed node group API spelling."""
    return {"key": key, "value": value, "effect": _EKS_EFFECT[effect]}


def gpu_taint_eks() -> dict[str, str]:
    """The GPU taint every GPU managed node group carries."""
    return eks_taint(GPU_TAINT_KEY, GPU_TAINT_VALUE, GPU_TAINT_EFFECT)


def gpu_taint_k8s() -> dict[str, str]:
    """The GPU taint in Kubernetes spelling (Karpenter NodePools, node objects)."""
    return {"key": GPU_TAINT_KEY, "value": GPU_TAINT_VALUE, "effect": GPU_TAINT_EFFECT}


def gpu_pool_taints_k8s(purpose: str) -> list[dict[str, str]]:
    """Every taint a GPU pool of ``purpose`` carries, in Kubernetes spelling.

    All GPU pools carry the GPU taint; training and DRA pools also carry a workload taint so that
    inference pods, which tolerate only the GPU taint, never land there.
    """
    taints = [gpu_taint_k8s()]
    if purpose in _PURPOSE_TAINT_VALUE:
        taints.append({"key": WORKLOAD_TAINT_KEY, "value": _PURPOSE_TAINT_VALUE[purpose], "effect": "NoSchedule"})
    return taints


def gpu_pool_taints_eks(purpose: str) -> list[dict[str, str]]:
    """:func:`gpu_pool_taints_k8s` in the EKS managed node group spelling."""
    return [eks_taint(t["key"], t["value"], t["effect"]) for t in gpu_pool_taints_k8s(purpose)]


def workload_tolerations(purpose: str) -> list[dict[str, str]]:
    """Tolerations a workload needs to run on a GPU pool of ``purpose``."""
    tolerations = [gpu_toleration()]
    if purpose in _PURPOSE_TAINT_VALUE:
        tolerations.append(
            {"key": WORKLOAD_TAINT_KEY, "operator": "Equal", "value": _PURPOSE_TAINT_VALUE[purpose], "effect": "NoSchedule"}
        )
    return tolerations


def gpu_agent_tolerations() -> list[dict[str, str]]:
    """GPU node agents (device plugin, operator operands, DCGM, NFD workers) tolerate every GPU
    pool taint: the GPU taint and the workload taint of training and DRA pools."""
    return [gpu_toleration(), {"key": WORKLOAD_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}]


def gpu_toleration() -> dict[str, str]:
    """The toleration a GPU workload or GPU node agent carries: any value of the GPU taint key."""
    return {"key": GPU_TAINT_KEY, "operator": "Exists", "effect": GPU_TAINT_EFFECT}


def capacity_label_value(capacity_type: str) -> str:
    return _CAPACITY_LABEL_VALUE[capacity_type]


def system_pool_labels(pool: str) -> dict[str, str]:
    return {PURPOSE_LABEL: SYSTEM_PURPOSE, POOL_LABEL: pool, CAPACITY_TYPE_LABEL: KARPENTER_ON_DEMAND}


def gpu_pool_labels(
    pool: str, *, purpose: str, accelerator: str, gpu_memory_mib: int, capacity_type: str | None
) -> dict[str, str]:
    """Labels that say what a GPU pool is; workloads select pools by these.

    ``capacity_type`` is None for a Karpenter pool that mixes capacity types: its nodes carry
    Karpenter's own ``karpenter.sh/capacity-type`` label instead.
    """
    labels = {
        PURPOSE_LABEL: purpose,
        POOL_LABEL: pool,
        ACCELERATOR_LABEL: accelerator,
        GPU_MEMORY_LABEL: str(gpu_memory_mib),
        GPU_PRESENT_LABEL: "true",
    }
    if capacity_type is not None:
        labels[CAPACITY_TYPE_LABEL] = capacity_label_value(capacity_type)
    return labels


def managed_gpu_pool_labels(
    pool: str, *, purpose: str, accelerator: str, gpu_memory_mib: int, capacity_type: str | None
) -> dict[str, str]:
    """Labels of a managed GPU group: the pool labels plus Cluster Autoscaler's GPU label
    (``nvidia-<accelerator>``). DRA groups never advertise ``nvidia.com/gpu``, so they do not carry
    it: the autoscaler would count their nodes as unready forever."""
    labels = gpu_pool_labels(pool, purpose=purpose, accelerator=accelerator, gpu_memory_mib=gpu_memory_mib,
                             capacity_type=capacity_type)
    if purpose != GPU_DRA_PURPOSE:
        labels[AUTOSCALER_GPU_LABEL] = f"nvidia-{accelerator}"
    return labels


def gpu_workload_placement(pool: str, purpose: str, gpus: int) -> dict[str, object]:
    """Pod spec fragments that put a GPU workload on ``pool``: the selector on the pool label, the
    tolerations for the pool's taints, and the GPU count for limits (requests default to limits)."""
    return {
        "nodeSelector": {POOL_LABEL: pool},
        "tolerations": workload_tolerations(purpose),
        "limits": {GPU_RESOURCE: str(gpus)},
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
