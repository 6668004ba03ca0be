"""gpu-pools-tainted, on both node group shapes and on NodePools."""

from __future__ import annotations

import pytest

from tests.policies.builders import (
    DELETE,
    NODE_GROUP_SHAPES,
    UNKNOWN,
    gpu_node_group,
    nodepool,
    patch,
    resource,
    system_node_group,
)
from tests.policies.conftest import one

POLICY = "gpu-pools-tainted"
REQS = "spec.template.spec.requirements"
TAINTS = "spec.template.spec.taints"


@pytest.mark.parametrize("shape", NODE_GROUP_SHAPES)
def test_compliant_pools_pass_every_policy(pack, shape):
    assert pack.analyze(gpu_node_group(shape)) == []
    assert pack.analyze(system_node_group(shape)) == []


def test_compliant_nodepool_passes_every_policy(pack):
    assert pack.analyze(nodepool()) == []


@pytest.mark.parametrize("shape", NODE_GROUP_SHAPES)
@pytest.mark.parametrize(
    "changes, fragment",
    [
        ({"taints": []}, "has no taint with key 'nvidia.com/gpu'"),
        ({"taints": DELETE}, "has no taint with key 'nvidia.com/gpu'"),
        ({"taints.0.key": "gpu"}, "has no taint with key 'nvidia.com/gpu'"),
        ({"taints.0.effect": "PREFER_NO_SCHEDULE"}, "effect PREFER_NO_SCHEDULE, which does not keep other pods off"),
        ({"taints.0.effect": "NO_EXECUTE"}, "effect NO_EXECUTE"),
        ({"taints.0.effect": "NoSchedule"}, "spells the effect 'NoSchedule', which the EKS API does not accept"),
    ],
)
def test_node_group_taint_findings(pack, shape, changes, fragment):
    one(pack.messages(patch(gpu_node_group(shape), changes), POLICY), fragment, "effect: NO_SCHEDULE")


@pytest.mark.parametrize("shape", NODE_GROUP_SHAPES)
@pytest.mark.parametrize(
    "changes, why",
    [
        ({"amiType": "BOTTLEROCKET_x86_64_NVIDIA"}, "amiType BOTTLEROCKET_x86_64_NVIDIA"),
        ({"amiType": "AL2023_ARM_64_NVIDIA", "instanceTypes": ["g5g.xlarge"]}, "amiType AL2023_ARM_64_NVIDIA"),
        ({"amiType": "AL2023_x86_64_STANDARD", "instanceTypes": ["p4d.24xlarge"]}, "instance types p4d.24xlarge"),
        ({"amiType": DELETE, "instanceTypes": ["g6e.xlarge"]}, "instance types g6e.xlarge"),
        ({"amiType": DELETE, "instanceTypes": ["m7i.large"], "gpu": True}, "gpu: true"),
    ],
)
def test_gpu_capacity_is_recognised(pack, shape, changes, why):
    one(pack.messages(patch(gpu_node_group(shape), {**changes, "taints": []}), POLICY), why)


@pytest.mark.parametrize("shape", NODE_GROUP_SHAPES)
def test_cpu_pool_needs_no_taint(pack, shape):
    assert pack.messages(system_node_group(shape), POLICY) == []


def test_self_managed_node_group_uses_kubernetes_spelling(pack):
    base = {"amiType": "AL2023_x86_64_NVIDIA", "instanceType": "g5.xlarge", "minSize": 0, "maxSize": 2}
    good = resource("eks:index:NodeGroupV2", "gpu", {**base, "taints": {"nvidia.com/gpu": {"value": "true", "effect": "NoSchedule"}}})
    assert pack.messages(good, POLICY) == []
    bad = patch(good, {("taints", "nvidia.com/gpu", "effect"): "NO_SCHEDULE"})
    one(pack.messages(bad, POLICY), "spells the effect 'NO_SCHEDULE', which the Kubernetes API does not accept")


@pytest.mark.parametrize(
    "changes, fragment",
    [
        ({TAINTS: []}, "selects GPU capacity but has no taint with key 'nvidia.com/gpu'"),
        ({TAINTS: [{"key": "nvidia.com/gpu", "value": "true", "effect": "PreferNoSchedule"}]}, "effect PreferNoSchedule"),
        ({f"{TAINTS}.0.effect": "NO_SCHEDULE"}, "spells the effect 'NO_SCHEDULE', which the Kubernetes API"),
    ],
)
def test_nodepool_taint_findings(pack, changes, fragment):
    one(pack.messages(patch(nodepool(), changes), POLICY), fragment, "effect: NoSchedule")


@pytest.mark.parametrize(
    "requirement",
    [
        {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "g"]},
        {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["p5"]},
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["g6e.12xlarge"]},
        {"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "Gt", "values": ["0"]},
        {"key": "karpenter.k8s.aws/instance-gpu-name", "operator": "In", "values": ["h100"]},
        {"key": "karpenter.k8s.aws/instance-gpu-manufacturer", "operator": "Exists"},
    ],
)
def test_nodepool_gpu_selection_is_recognised(pack, requirement):
    untainted = patch(nodepool(), {REQS: [requirement], TAINTS: DELETE, "spec.limits": {"cpu": "100"}})
    one(pack.messages(untainted, POLICY), "selects GPU capacity")


@pytest.mark.parametrize(
    "requirement",
    [
        {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m"]},
        {"key": "karpenter.k8s.aws/instance-category", "operator": "NotIn", "values": ["g", "p"]},
        {"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "DoesNotExist"},
    ],
)
def test_cpu_nodepool_needs_no_taint(pack, requirement):
    cpu = patch(nodepool(), {REQS: [requirement], TAINTS: DELETE, "spec.limits": {"cpu": "100"}})
    assert pack.messages(cpu, POLICY) == []


@pytest.mark.parametrize(
    "res",
    [
        patch(gpu_node_group(), {"taints": UNKNOWN}),
        patch(gpu_node_group(), {"taints.0": UNKNOWN}),
        patch(gpu_node_group(), {"amiType": UNKNOWN, "instanceTypes": UNKNOWN, "taints": []}),
        patch(nodepool(), {REQS: UNKNOWN, "spec.limits": DELETE, TAINTS: []}),
        patch(nodepool(), {TAINTS: UNKNOWN}),
    ],
    ids=["taints", "one-taint", "gpu-unknowable", "requirements", "nodepool-taints"],
)
def test_unknown_values_are_not_judged(pack, res):
    assert pack.messages(res, POLICY) == []
