"""Pod Security ``restricted`` on the controllers' pods as Helm's engine renders the pinned charts
with the program's values. Node agents that must touch the host are the listed exceptions (docs/security.md,
"Pod Security exceptions"); everything else must pass."""

from __future__ import annotations

import pytest

from components import versions
from tests.components.test_helm_render import kube_version, release_of
from tests.support import helm_render, pod_security
from tests.support.needs import missing

#: (chart, workload) -> why it cannot run under ``restricted``. Kept in step with docs/security.md.
EXCEPTIONS = {
    ("nvidia-device-plugin", "nvidia-device-plugin"): "registers with the kubelet through a hostPath socket (/var/lib/kubelet/device-plugins) as root",
    ("nvidia-device-plugin", "nvidia-device-plugin-mps-control-daemon"): "MPS control daemon: privileged with hostPID (only on MPS-labelled nodes)",
    ("dcgm-exporter", "dcgm-exporter"): "reads GPU profiling counters: root with SYS_ADMIN and the kubelet pod-resources hostPath",
    ("dra-driver-nvidia-gpu", "*"): "DRA kubelet plugin and controller publish devices through kubelet hostPaths, privileged",
    ("gpu-operator", "gpu-operator"): "the chart has no security-context values for the operator controller",
    ("gpu-operator", "gpu-operator-upgrade-crd"): "hook Job: the chart has no security-context values for it",
    ("gpu-operator", "gpu-operator-cleanup-gpucluster"): "hook Job: the chart has no security-context values for it",
    ("gpu-operator", "gpu-operator-node-feature-discovery-worker"): "NFD worker reads /boot, /sys, /usr/lib, /lib through hostPaths",
    ("kube-prometheus-stack", "kube-prometheus-stack-prometheus-node-exporter"): "node-exporter: host network, PID and /proc, /sys, / hostPaths",
}
#: What an excepted node agent may still violate; anything beyond is a regression of its hardening.
EXCEPTED_ONLY = {
    ("gpu-operator", "gpu-operator-node-feature-discovery-worker"): {"host-path-volumes", "restricted-volume-types"},
    ("kube-prometheus-stack", "kube-prometheus-stack-prometheus-node-exporter"): {
        "host-namespaces", "host-path-volumes", "restricted-volume-types",
    },
}
CHARTS = [
    versions.CLUSTER_AUTOSCALER, versions.KARPENTER, versions.KEDA, versions.NVIDIA_DEVICE_PLUGIN, versions.DCGM_EXPORTER,
    versions.NVIDIA_DRA_DRIVER, versions.NVIDIA_GPU_OPERATOR, versions.KUBE_PROMETHEUS_STACK,
]


def _excepted(chart: str, name: str) -> bool:
    return (chart, name) in EXCEPTIONS or (chart, "*") in EXCEPTIONS


@pytest.fixture(params=["dev", "prod"])
def chart_plan(request, dev_plan, prod_plan):
    return {"dev": dev_plan, "prod": prod_plan}[request.param]


@pytest.mark.parametrize("chart", CHARTS, ids=lambda c: c.chart)
def test_controller_pods_are_restricted_except_the_listed_node_agents(chart_plan, chart):
    reason = helm_render.missing_reason(chart)
    if reason:
        missing(reason)
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
        key = (chart.chart, obj["metadata"]["name"])
        if _excepted(*key) and key not in EXCEPTED_ONLY:
            continue
        for pod in pod_security.pod_templates(obj["kind"], obj):
            found = pod_security.violations(pod)
            if key in EXCEPTED_ONLY:
                assert set(found) == EXCEPTED_ONLY[key], (key, found)
            elif found:
                failures[obj["metadata"]["name"]] = found
    assert failures == {}
