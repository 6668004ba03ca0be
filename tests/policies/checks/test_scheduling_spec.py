"""gpu-workload-schedulable's reasons, as a specification: one per pool, at most 6 shown, then '...'."""

from __future__ import annotations

import pytest

from tests.policies.builders import system_node_group, workload
from tests.policies.conftest import one

POLICY = "gpu-workload-schedulable"


@pytest.mark.parametrize("pools, shown, more", [(6, 6, False), (7, 6, True), (8, 6, True), (5, 5, False)])
def test_at_most_six_pools_are_named_then_an_ellipsis(pack, pools, shown, more):
    groups = [system_node_group(name=f"cpu-{i}") for i in range(pools)]
    message = one(pack.stack_messages([*groups, workload()], POLICY),
                  "Deployment 'vllm' (needs 1 nvidia.com/gpu; selects node.kubernetes.io/purpose in (gpu-inference)) "
                  "fits no pool in the stack, so it stays Pending: managed node group 'cpu-0': its nodes cannot "
                  "satisfy 'node.kubernetes.io/purpose'")
    assert message.count("its nodes cannot satisfy") == shown
    assert [f"'cpu-{i}'" in message for i in range(pools)] == [i < 6 for i in range(pools)]
    assert message.endswith("; .... Change its node selector or tolerations, or add a pool that can hold it.") is more


def test_a_declared_custom_kind_is_judged_like_a_deployment(pack):
    """customWorkloads names where a kind keeps its pod templates; its GPU pods must fit a pool too."""
    from tests.policies.builders import pod_spec, resource

    group = resource("kubernetes:example.com/v1:InferenceGroup", "g", {
        "metadata": {"name": "g", "namespace": "serving"},
        "spec": {"groups": [{"template": {"metadata": {}, "spec": pod_spec(gpus=1)}}]}})
    pack.configure({"all": "mandatory", POLICY: {"customWorkloads": {
        "kubernetes:example.com/v1:InferenceGroup": ["spec.groups[].template"]}}})
    one(pack.stack_messages([system_node_group(), group], POLICY),
        "(needs 1 nvidia.com/gpu; selects node.kubernetes.io/purpose in (gpu-inference)) fits no pool in the stack",
        "managed node group 'system': its nodes cannot satisfy 'node.kubernetes.io/purpose'")
