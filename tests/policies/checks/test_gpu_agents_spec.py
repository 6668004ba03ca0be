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


def test_a_chart_whose_device_plugin_stays_off_every_pool_still_has_its_nfd_worker_judged(pack):
    """The only GPU pool is a DRA pool: the placement table keeps the device plugin off it, but the same
    chart's NFD worker (nfd.enabled) runs on every GPU node and must tolerate its taint."""
    pack.configure({"all": "mandatory", POLICY: {"agentPlacement": {"nvidia-device-plugin": {"exceptPurposes": ["gpu-dra"]}}}})
    labels = {**gpu_node_group()["inputs"]["labels"], "node.kubernetes.io/purpose": "gpu-dra"}
    dra = gpu_node_group(name="dra", labels=labels, instanceTypes=["g6e.xlarge"], capacityType="ON_DEMAND")
    release = helm_release(values={"tolerations": [GPU_TOLERATION], "nfd": {"enabled": True}})
    message = one(pack.stack_messages([dra, system_node_group(), release], POLICY),
                  "the node-feature-discovery worker", "values.nfd.worker.tolerations (chart default)")
    assert "the device plugin does not tolerate" not in message
    tolerant = helm_release(values={"tolerations": [GPU_TOLERATION], "nfd": {"enabled": True,
                                                                              "worker": {"tolerations": [GPU_TOLERATION]}}})
    assert pack.stack_messages([dra, system_node_group(), tolerant], POLICY) == []
