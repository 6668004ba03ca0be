"""system-pool-on-demand-ha on both node group shapes and a self-managed group."""

from __future__ import annotations

import pytest

from tests.policies.builders import DELETE, NODE_GROUP_SHAPES, SYSTEM_LABELS, UNKNOWN, patch, resource, system_node_group
from tests.policies.conftest import one

POLICY = "system-pool-on-demand-ha"


@pytest.mark.parametrize("shape", NODE_GROUP_SHAPES)
@pytest.mark.parametrize(
    "changes",
    [{}, {"capacityType": DELETE}, {"scalingConfig.minSize": 5}, {"taints": [{"key": "x", "value": "y", "effect": "PREFER_NO_SCHEDULE"}]}],
    ids=["happy", "default-on-demand", "bigger", "soft-taint"],
)
def test_healthy_system_pool(pack, shape, changes):
    assert pack.messages(patch(system_node_group(shape), changes), POLICY) == []


@pytest.mark.parametrize("shape", NODE_GROUP_SHAPES)
@pytest.mark.parametrize(
    "changes, fragment",
    [
        ({"capacityType": "SPOT", ("labels", "llm-platform.io/capacity-type"): DELETE}, "runs SPOT capacity"),
        ({"scalingConfig.minSize": 1}, "minSize 1; it needs at least 2 nodes"),
        ({"scalingConfig.minSize": 0}, "Raise scalingConfig.minSize to 2"),
        ({"taints": [{"key": "dedicated", "value": "system", "effect": "NO_SCHEDULE"}]}, "carries taint dedicated=system:NoSchedule"),
        ({("labels", "llm-platform.io/capacity-type"): "spot"}, "labels itself llm-platform.io/capacity-type=spot but runs on-demand"),
    ],
    ids=["spot", "one-node", "zero-nodes", "tainted", "label-lies"],
)
def test_fragile_system_pool(pack, shape, changes, fragment):
    one(pack.messages(patch(system_node_group(shape), changes), POLICY), fragment)


def test_only_the_system_purpose_is_judged(pack):
    other = patch(system_node_group(), {("labels", "node.kubernetes.io/purpose"): "batch", "capacityType": "SPOT"})
    assert pack.messages(other, POLICY) == []


def test_min_size_is_configurable(pack):
    pack.configure({POLICY: {"minSize": 3}})
    one(pack.messages(system_node_group(), POLICY), "minSize 2; it needs at least 3 nodes")


def test_self_managed_system_group(pack):
    group = resource("eks:index:NodeGroupV2", "system", {"labels": dict(SYSTEM_LABELS), "minSize": 1, "spotPrice": "0.1"})
    messages = pack.messages(group, POLICY)
    assert len(messages) == 2 and "runs SPOT capacity" in messages[0] and "minSize 1" in messages[1]


@pytest.mark.parametrize(
    "changes",
    [{"labels": UNKNOWN}, {"capacityType": UNKNOWN, "scalingConfig": UNKNOWN, "taints": UNKNOWN},
     {"scalingConfig.minSize": UNKNOWN, "taints.0": UNKNOWN}],
    ids=["labels", "fields", "nested"],
)
def test_unknown_values_are_not_judged(pack, changes):
    assert pack.messages(patch(system_node_group(), {"taints": [{}], **changes}), POLICY) == []
