"""gpu-agents-reach-gpu-nodes, as a specification: the device-plugin chart's NFD subchart switch, and
hand-written DaemonSets judged one by one (one without a pod template does not end the walk)."""

from __future__ import annotations

import pytest

from tests.policies.builders import GPU_TOLERATION, gpu_node_group, helm_release, resource, system_node_group
from tests.policies.conftest import one

POLICY = "gpu-agents-reach-gpu-nodes"


@pytest.mark.parametrize(
    "values, reaches",
    [
        ({"nfd": {"enabled": True}}, False),  # NFD on by its own switch, with the chart's default tolerations
        ({"gfd": {"enabled": True}}, False),  # NFD follows gfd when nfd.enabled is unset
        ({"gfd": {"enabled": True}, "nfd": {"enabled": False}}, True),  # the explicit switch wins
        ({}, True),  # neither: no NFD worker to judge
    ],
    ids=["nfd-on", "gfd-on", "nfd-off-gfd-on", "neither"],
)
def test_the_device_plugin_charts_nfd_worker_is_judged_only_when_enabled(pack, values, reaches):
    messages = pack.stack_messages([gpu_node_group(), system_node_group(), helm_release(values=values)], POLICY)
    if reaches:
        assert messages == []
    else:
        message = one(messages, "the node-feature-discovery worker", "values.nfd.worker.tolerations (chart default)")
        assert "the device plugin does not tolerate" not in message


def daemonset(name: str, spec: dict | None) -> dict:
    inputs = {"metadata": {"name": name, "namespace": "kube-system"}}
    if spec is not None:
        inputs["spec"] = {"selector": {"matchLabels": {"app": name}},
                          "template": {"metadata": {"labels": {"app": name}}, "spec": spec}}
    return resource("kubernetes:apps/v1:DaemonSet", name, inputs)


GPU_NODES = {"node.kubernetes.io/purpose": "gpu-inference"}
CONTAINER = [{"name": "agent", "image": "registry.example.com/agent:1.0.0"}]


def test_every_daemonset_is_judged_after_one_without_a_pod_template(pack):
    blind = daemonset("agent", {"nodeSelector": GPU_NODES, "containers": CONTAINER})
    stack = [gpu_node_group(), system_node_group(), daemonset("empty", None), blind]
    message = one(pack.stack_messages(stack, POLICY), "DaemonSet 'agent' selects the nodes of managed node group "
                  "'inference' but does not tolerate its taint nvidia.com/gpu=true:NoSchedule, so it runs no pods "
                  "there. Add a toleration for it.")
    assert "'empty'" not in message
    tolerant = daemonset("agent", {"nodeSelector": GPU_NODES, "containers": CONTAINER, "tolerations": [GPU_TOLERATION]})
    assert pack.stack_messages([gpu_node_group(), system_node_group(), daemonset("empty", None), tolerant], POLICY) == []
