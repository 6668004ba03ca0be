"""The AWS EFA device plugin (components/gpu/efa.py), rendered by Helm's engine from the pinned chart
(aws/eks-charts stable/aws-efa-k8s-device-plugin v0.5.30) with the program's values, placed against the
nodes of a multi-node pool: p5.48xlarge carrying the contract's GPU taint."""

from __future__ import annotations

import kubernetes_validate

from components import contract, versions
from components.gpu.efa import efa_device_plugin_values
from tests.support import helm_render
from tests.support.needs import missing

P5_NODE = {"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "node.kubernetes.io/instance-type": "p5.48xlarge",
           contract.POOL_LABEL: "h100-multinode"}
G5_NODE = {**P5_NODE, "node.kubernetes.io/instance-type": "g5.2xlarge"}
GPU_TAINT = [{"key": contract.GPU_TAINT_KEY, "value": "true", "effect": "NoSchedule"}]


def daemonset(values: dict) -> dict:
    reason = helm_render.missing_reason(versions.AWS_EFA_DEVICE_PLUGIN)
    if reason:
        missing(reason)
    objects = helm_render.render(versions.AWS_EFA_DEVICE_PLUGIN, values, release_name="aws-efa-k8s-device-plugin",
                                 namespace="kube-system", kube_version="1.35")
    for obj in objects:
        kubernetes_validate.validate(obj, "1.35", strict=True)
    (found,) = [o for o in objects if o["kind"] == "DaemonSet"]
    return found


def test_the_plugin_reaches_tainted_efa_gpu_nodes_and_no_others():
    pod = helm_render.pod_spec_of(daemonset(efa_device_plugin_values()))
    assert helm_render.schedulable_on(pod, P5_NODE, GPU_TAINT)
    # the chart's own affinity keeps it to EFA types: a g5.2xlarge has no EFA
    assert not helm_render.schedulable_on(pod, G5_NODE, GPU_TAINT)
    assert pod["containers"][0]["image"] == str(versions.AWS_EFA_DEVICE_PLUGIN_IMAGE)


def test_with_the_charts_default_tolerations_it_runs_on_no_gpu_node():
    """The textbook "the device plugin runs on every EFA node" is wrong on tainted GPU pools: the chart
    tolerates CriticalAddonsOnly only."""
    pod = helm_render.pod_spec_of(daemonset({}))
    assert helm_render.schedulable_on(pod, P5_NODE, [])
    assert not helm_render.schedulable_on(pod, P5_NODE, GPU_TAINT)
