"""Pod Security ``restricted`` on the controllers' pods as Helm's engine renders the pinned charts
with the program's values. Node agents that must touch the host are the listed exceptions (README,
"Pod Security exceptions"); everything else must pass."""

from __future__ import annotations

import pytest

from components import versions
from tests import helm_render, pod_security
from tests.test_helm_render import kube_version, release_of

#: (chart, workload) -> why it cannot run under ``restricted``. Kept in step with the README.
EXCEPTIONS = {
    ("nvidia-device-plugin", "nvidia-device-plugin"): "registers with the kubelet through a hostPath socket (/var/lib/kubelet/device-plugins) as root",
    ("nvidia-device-plugin", "nvidia-device-plugin-mps-control-daemon"): "MPS control daemon: privileged with hostPID (only on MPS-labelled nodes)",
    ("dcgm-exporter", "dcgm-exporter"): "reads GPU profiling counters: root with SYS_ADMIN and the kubelet pod-resources hostPath",
    ("nvidia-dra-driver-gpu", "*"): "DRA kubelet plugin and controller publish devices through kubelet hostPaths, privileged",
}
CHARTS = [versions.CLUSTER_AUTOSCALER, versions.KARPENTER, versions.KEDA, versions.NVIDIA_DEVICE_PLUGIN, versions.DCGM_EXPORTER, versions.NVIDIA_DRA_DRIVER]


def _excepted(chart: str, name: str) -> bool:
    return (chart, name) in EXCEPTIONS or (chart, "*") in EXCEPTIONS


@pytest.fixture(params=["dev", "prod"])
def chart_plan(request, dev_plan, prod_plan):
    return {"dev": dev_plan, "prod": prod_plan}[request.param]


@pytest.mark.parametrize("chart", CHARTS, ids=lambda c: c.chart)
def test_controller_pods_are_restricted_except_the_listed_node_agents(chart_plan, chart):
    reason = helm_render.missing_reason(chart)
    if reason:
        pytest.skip(reason)
    inputs = release_of(chart_plan, chart)
    if inputs is None:
        pytest.skip(f"{chart.chart} is not installed in this plan")
    objects = helm_render.render(
        chart, inputs.get("values", {}), release_name=inputs["name"], namespace=inputs["namespace"], kube_version=kube_version(chart_plan)
    )
    workloads = [o for o in objects if o["kind"] in ("Deployment", "DaemonSet", "StatefulSet", "Job")]
    assert workloads
    failures = {}
    for obj in workloads:
        if _excepted(chart.chart, obj["metadata"]["name"]):
            continue
        for pod in pod_security.pod_templates(obj["kind"], obj):
            if found := pod_security.violations(pod):
                failures[obj["metadata"]["name"]] = found
    assert failures == {}
