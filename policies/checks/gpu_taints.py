"""GPU capacity is a separate class: every GPU pool carries the contract's NoSchedule taint.

Without the taint, CPU pods fill GPU nodes and the GPU workloads that need them stay pending (or
Karpenter buys more GPUs). The check covers both shapes of a managed node group (the pulumi-eks
component under mocks, the aws NodeGroup in a real preview), pulumi-eks self-managed groups and
Karpenter NodePools. End-of-life AMIs are ``checks/amis.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from capacity.model import EKS_EFFECTS
from capacity.node_pools import NVIDIA_AMI_MARKERS, DeclaredGroup, nodepool_is_gpu, read_group, read_nodepool
from lib.kit import MANDATORY, resource_policy
from lib.resources import EKS_SELF_MANAGED_NODE_GROUPS, NODE_GROUP_TYPES, NODEPOOL, Resource
from lib.values import UNKNOWN, as_list, contains_unknown


def _why_gpu(group: DeclaredGroup) -> str:
    """Which declaration makes the group GPU capacity (``capacity.node_pools.group_is_gpu``)."""
    if isinstance(group.ami_type, str) and any(marker in group.ami_type for marker in NVIDIA_AMI_MARKERS):
        return f"amiType {group.ami_type}"
    if group.gpu_flag is True:
        return "gpu: true"
    return f"instance types {', '.join(group.instance_types or ())}"


def _taint_problem(taints: list[Any], key: str, want_effect: str, spelling: str) -> str | None:
    """What is wrong with the GPU taint among ``taints``, or ``None`` if it is right or unknowable."""
    matching = [t for t in taints if isinstance(t, dict) and t.get("key") == key]
    if any(t.get("effect") == want_effect for t in matching):
        return None
    if any(contains_unknown(t) for t in taints) or UNKNOWN in taints:
        return None
    if not matching:
        return f"has no taint with key '{key}'"
    effects = sorted({str(t.get("effect")) for t in matching})
    if {EKS_EFFECTS.get(e, e) for e in effects} & {"NoSchedule"}:
        return f"spells the effect {effects[0]!r}, which the {spelling} does not accept"
    return f"taints '{key}' with effect {', '.join(effects)}, which does not keep other pods off"


def _check_gpu_taint(resource: Resource, config: dict[str, Any]) -> Iterator[str]:
    key = config["gpuTaintKey"]
    if resource.type == NODEPOOL:
        if nodepool_is_gpu(read_nodepool(resource), config["gpuResource"]) is not True:
            return
        taints = resource.get("spec", "template", "spec", "taints", default=[])
        if taints is UNKNOWN:
            return
        problem = _taint_problem(as_list(taints), key, "NoSchedule", "Kubernetes API")
        if problem:
            yield (
                f"{resource.label} selects GPU capacity but {problem}. Add "
                f"spec.template.spec.taints: [{{key: {key}, value: \"true\", effect: NoSchedule}}] so only pods "
                f"that tolerate it (GPU workloads and agents) land on its nodes."
            )
        return
    group = read_group(resource)
    if group.is_gpu is not True:
        return
    raw = resource.get("taints", default=[])
    if raw is UNKNOWN:
        return
    if resource.type in EKS_SELF_MANAGED_NODE_GROUPS:
        taints = [{"key": k, **(v if isinstance(v, dict) else {})} for k, v in (raw or {}).items()]
        want, spelling, example = "NoSchedule", "Kubernetes API", f'{{"{key}": {{value: "true", effect: NoSchedule}}}}'
    else:
        taints = as_list(raw)
        want, spelling, example = "NO_SCHEDULE", "EKS API", f'[{{key: {key}, value: "true", effect: NO_SCHEDULE}}]'
    problem = _taint_problem(taints, key, want, spelling)
    if problem:
        yield (
            f"{resource.label} is GPU capacity ({_why_gpu(group)}) but {problem}. Set taints: {example} "
            f"so CPU pods cannot take its GPU nodes."
        )


POLICIES = [
    resource_policy(
        name="gpu-pools-tainted",
        description=(
            "Give every GPU node group and GPU Karpenter NodePool a NoSchedule taint with the GPU taint key "
            "(NO_SCHEDULE in the EKS API)."
        ),
        types=NODE_GROUP_TYPES | {NODEPOOL},
        check=_check_gpu_taint,
        enforcement=MANDATORY,
        contract=("gpuTaintKey", "gpuResource"),
    ),

]
