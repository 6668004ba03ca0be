"""The node step per GPU software path: what must happen on a Ready node before the scheduler sees its GPUs.

Figures (each with its source in policies/capacity/cold_start.py; "estimate" where no timing is published):
- standalone device plugin and EKS Auto Mode's own: plugin start and registration 20 s (estimate; no wait in
  NVIDIA/k8s-device-plugin v0.20.0 internal/plugin/server.go) + kubelet node status 10 s (nodeStatusUpdateFrequency
  default) = 30 s;
- GPU Operator v26.7.0: NFD labels the node 15 s (estimate; the operator deploys operands only on NFD's
  pci-10de label) + validator driver and toolkit validations 15 s (estimate; order from
  assets/state-operator-validation) + the device plugin's toolkit-ready poll 5 s (its init container's
  ``sleep 5``) + plugin start 20 s + kubelet status 10 s = 65 s;
- DRA kubelet plugin: 20 s (estimate), published as ResourceSlices, no kubelet status period;
- before them: Karpenter 1 + 90 = 91 s, Cluster Autoscaler 10 + 30 + 90 = 130 s.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from policies.capacity.cold_start import (
    AUTO_MODE,
    AUTO_MODE_PLUGIN_PATH,
    CLUSTER_AUTOSCALER,
    DEVICE_PLUGIN_PATH,
    DRA_PATH,
    GPU_OPERATOR_PATH,
    KARPENTER,
    gpu_software_of,
    gpu_software_path,
    gpus_advertised,
    node_provisioning,
)
from policies.capacity.kinds import HELM_RELEASE


@pytest.mark.parametrize("source, path, seconds", [
    (KARPENTER, DEVICE_PLUGIN_PATH, 121.0),        # 91 + 30
    (KARPENTER, GPU_OPERATOR_PATH, 156.0),         # 91 + 65
    (KARPENTER, DRA_PATH, 111.0),                  # 91 + 20
    (CLUSTER_AUTOSCALER, DEVICE_PLUGIN_PATH, 160.0),  # 130 + 30
    (CLUSTER_AUTOSCALER, GPU_OPERATOR_PATH, 195.0),   # 130 + 65
    (AUTO_MODE, GPU_OPERATOR_PATH, 121.0),         # Auto Mode runs EKS's plugin, whatever the stack installs
])
def test_the_node_step_per_capacity_source_and_gpu_software(source, path, seconds):
    step = node_provisioning(source, path)
    assert step.seconds == seconds
    assert step.bound_seconds == 600


def test_only_the_driver_and_toolkit_validations_gate_the_operators_device_plugin():
    """The textbook reading: the validator's whole chain (driver, toolkit, cuda, plugin) runs before the GPUs
    show, at least one 5 s poll each for the cuda workload pod and the plugin check: 65 + 5 + 5 = 75 s.
    The operator's own objects: the device plugin waits for toolkit-ready only, and plugin-validation polls
    for nvidia.com/gpu in the node's allocatable, so it can pass only after the GPUs are advertised: 65 s."""
    figures = gpus_advertised(GPU_OPERATOR_PATH)
    assert [f.name for f in figures] == [
        "NFD labels the node as a GPU node", "GPU Operator driver and toolkit validations",
        "operator's device plugin waits for toolkit-ready", "device plugin pod start and kubelet registration",
        "kubelet node status update"]
    engine = sum(f.value for f in figures)
    textbook = engine + 5 + 5
    assert (engine, textbook) == (65, 75)
    assert not any("cuda" in f.name.lower() or "plugin-validation" in f.name for f in figures)
    assert all(f.source for f in figures)
    estimates = {f.name for f in figures if f.source.startswith("estimate")}
    assert estimates == {"NFD labels the node as a GPU node", "GPU Operator driver and toolkit validations",
                         "device plugin pod start and kubelet registration"}


@pytest.mark.parametrize("provider, source, dra, path", [
    ("device-plugin", KARPENTER, False, DEVICE_PLUGIN_PATH),
    ("gpu-operator", CLUSTER_AUTOSCALER, False, GPU_OPERATOR_PATH),
    ("none", KARPENTER, False, DEVICE_PLUGIN_PATH),
    ("gpu-operator", AUTO_MODE, False, AUTO_MODE_PLUGIN_PATH),
    ("gpu-operator", CLUSTER_AUTOSCALER, True, DRA_PATH),
])
def test_the_path_a_pool_takes(provider, source, dra, path):
    assert gpu_software_path(provider, capacity_source=source, dra=dra) == path


def release(chart: str) -> SimpleNamespace:
    return SimpleNamespace(urn=f"urn:{chart}", type=HELM_RELEASE, parent=None, props={"chart": chart})


@pytest.mark.parametrize("charts, source, path", [
    (["gpu-operator"], KARPENTER, GPU_OPERATOR_PATH),
    (["oci://registry.example/nvidia/gpu-operator"], CLUSTER_AUTOSCALER, GPU_OPERATOR_PATH),
    (["nvidia-device-plugin"], KARPENTER, DEVICE_PLUGIN_PATH),
    ([], CLUSTER_AUTOSCALER, DEVICE_PLUGIN_PATH),
    (["gpu-operator"], AUTO_MODE, AUTO_MODE_PLUGIN_PATH),
])
def test_the_path_is_read_from_the_emitted_releases(charts, source, path):
    pool = SimpleNamespace(capacity_source=source)
    assert gpu_software_of([release(c) for c in charts], pool) == path


def test_an_unknown_path_is_refused():
    with pytest.raises(ValueError, match="no GPU software path 'cuda'"):
        gpus_advertised("cuda")
