"""gpu-pool-labels: contract labels present on GPU pools and true to their instance types."""

from __future__ import annotations

import pytest

from tests.policies.builders import NODE_GROUP_SHAPES, UNKNOWN, gpu_node_group, nodepool, patch, system_node_group
from tests.policies.conftest import one

POLICY = "gpu-pool-labels"
NP_LABELS = "spec.template.metadata.labels"
REQS = "spec.template.spec.requirements"


def label(key: str, prefix: str = "labels") -> tuple[str, ...]:
    return (*prefix.split("."), key)


@pytest.mark.parametrize("shape", NODE_GROUP_SHAPES)
@pytest.mark.parametrize(
    "key", ["node.kubernetes.io/purpose", "llm-platform.io/accelerator", "llm-platform.io/gpu-memory-mib", "llm-platform.io/capacity-type"]
)
def test_missing_contract_label(pack, shape, key):
    group = gpu_node_group(shape)
    labels = {k: v for k, v in group["inputs"]["labels"].items() if k != key}
    one(pack.messages(patch(group, {"labels": labels}), POLICY), f"without the contract label(s) {key}", "Add them to labels")


@pytest.mark.parametrize("shape", NODE_GROUP_SHAPES)
@pytest.mark.parametrize(
    "changes, fragment",
    [
        ({"instanceTypes": ["g5.xlarge", "g6e.xlarge"]}, "llm-platform.io/accelerator=a10g but its instance types carry a10g, l40s"),
        ({label("llm-platform.io/gpu-memory-mib"): "45776"}, "gpu-memory-mib=45776 but its instance types have 22888 MiB"),
        ({"capacityType": "ON_DEMAND"}, "llm-platform.io/capacity-type=spot but it runs on-demand capacity"),
        ({"capacityType": "CAPACITY_BLOCK"}, "but it runs reserved capacity"),
    ],
    ids=["mixed-models", "memory", "capacity", "capacity-block"],
)
def test_labels_that_lie(pack, shape, changes, fragment):
    one(pack.messages(patch(gpu_node_group(shape), changes), POLICY), "has labels that do not match its nodes", fragment)


@pytest.mark.parametrize(
    "changes, fragment",
    [
        ({REQS: [{"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["g5", "g6e"]}]},
         "accelerator=a10g but its instance types carry a10g, l40s"),
        ({(*NP_LABELS.split("."), "llm-platform.io/capacity-type"): "spot"}, "capacity-type=spot but it runs on-demand"),
        ({f"{REQS}.2.values": ["spot"]}, "capacity-type=on-demand but it runs spot capacity"),
    ],
    ids=["mixed-families", "label-spot", "requirement-spot"],
)
def test_nodepool_labels_that_lie(pack, changes, fragment):
    one(pack.messages(patch(nodepool(), changes), POLICY), fragment)


def test_nodepool_label_from_a_single_valued_requirement_counts(pack):
    labels = {k: v for k, v in nodepool()["inputs"]["spec"]["template"]["metadata"]["labels"].items() if k != "llm-platform.io/accelerator"}
    requirement = {"key": "llm-platform.io/accelerator", "operator": "In", "values": ["a10g"]}
    requirements = [*nodepool()["inputs"]["spec"]["template"]["spec"]["requirements"], requirement]
    res = patch(nodepool(), {NP_LABELS: labels, REQS: requirements})
    assert pack.messages(res, POLICY) == []


def test_cpu_pools_need_no_gpu_labels(pack):
    assert pack.messages(system_node_group(), POLICY) == []


@pytest.mark.parametrize(
    "res",
    [
        patch(gpu_node_group(), {"labels": UNKNOWN}),
        patch(gpu_node_group(), {label("llm-platform.io/accelerator"): UNKNOWN}),
        patch(gpu_node_group(), {"instanceTypes": UNKNOWN, label("llm-platform.io/gpu-memory-mib"): "1"}),
        patch(nodepool(), {REQS: UNKNOWN}),
    ],
    ids=["labels", "one-label", "types", "requirements"],
)
def test_unknown_values_are_not_judged(pack, res):
    assert pack.messages(res, POLICY) == []


def test_mixed_capacity_nodepool_needs_no_capacity_label(pack):
    labels = {k: v for k, v in nodepool()["inputs"]["spec"]["template"]["metadata"]["labels"].items()
              if k != "llm-platform.io/capacity-type"}
    mixed = patch(nodepool(), {NP_LABELS: labels, f"{REQS}.2.values": ["spot", "on-demand"]})
    assert pack.messages(mixed, POLICY) == []
    one(pack.messages(patch(mixed, {f"{REQS}.2.values": ["spot"]}), POLICY), "llm-platform.io/capacity-type")
