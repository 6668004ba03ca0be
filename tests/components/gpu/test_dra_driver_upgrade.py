"""The upgrade from NVIDIA's ``nvidia-dra-driver-gpu`` 25.12.0 to ``dra-driver-nvidia-gpu`` 0.4.1, rendered by
Helm's engine with the program's values: ``helm upgrade`` deletes every object the old release rendered and
the new one does not, so every object must keep its kind, namespace and name, and the kubelet plugin
DaemonSet its selector (immutable). The chart names them after ``nameOverride`` or else the chart's name
(``templates/_helpers.tpl``, ``dra-driver-nvidia-gpu.name`` and ``selectorLabels``)."""

from __future__ import annotations

import copy
import tarfile
from typing import Any

from components import versions
from components.specs.gpu_software import dra_driver_values
from tests.support import helm_render
from tests.support.needs import missing

#: The pin stacks ran before (NVIDIA/k8s-dra-driver-gpu v25.12.0), with the values the program gave it.
OLD_CHART = versions.HelmChart(chart="nvidia-dra-driver-gpu", version="25.12.0",
                               repository="https://helm.ngc.nvidia.com/nvidia")
RELEASE = NAMESPACE = "nvidia-dra-driver-gpu"


def _render(chart: versions.HelmChart, values: dict[str, Any]) -> dict[tuple[str, str, str], dict[str, Any]]:
    reason = helm_render.missing_reason(chart)
    if reason:
        missing(reason)
    objects = helm_render.render(chart, values, release_name=RELEASE, namespace=NAMESPACE, kube_version="1.35")
    return {(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in objects}


def _old_values() -> dict[str, Any]:
    values: dict[str, Any] = copy.deepcopy(dra_driver_values())
    del values["nameOverride"]
    values["image"] = {"repository": "nvcr.io/nvidia/k8s-dra-driver-gpu", "tag": "v25.12.0"}
    return values


def test_the_upgrade_keeps_every_object_and_the_daemonsets_selector():
    old, new = _render(OLD_CHART, _old_values()), _render(versions.NVIDIA_DRA_DRIVER, dra_driver_values())
    assert set(old) - set(new) == set(), "objects helm upgrade would delete"
    key = ("DaemonSet", NAMESPACE, "nvidia-dra-driver-gpu-kubelet-plugin")
    assert new[key]["spec"]["selector"] == old[key]["spec"]["selector"] == {
        "matchLabels": {"nvidia-dra-driver-gpu-component": "kubelet-plugin"}}
    (container,) = [c for c in new[key]["spec"]["template"]["spec"]["containers"] if c["name"] == "gpus"]
    assert container["image"] == "registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu:v0.4.1"


def test_without_the_old_name_the_upgrade_replaces_the_kubelet_plugin():
    """Textbook: an upgrade to the renamed chart updates the driver in place. Helm's engine renders the
    DaemonSet under the chart's new name with a new selector key: the old one is deleted (its pods and
    the GPUs they published go) and a second one is created."""
    values = dra_driver_values()
    bare = {k: v for k, v in values.items() if k != "nameOverride"}
    old, new = _render(OLD_CHART, _old_values()), _render(versions.NVIDIA_DRA_DRIVER, bare)
    assert ("DaemonSet", NAMESPACE, "nvidia-dra-driver-gpu-kubelet-plugin") in set(old) - set(new)
    replacement = new[("DaemonSet", NAMESPACE, "dra-driver-nvidia-gpu-kubelet-plugin")]
    assert replacement["spec"]["selector"] == {"matchLabels": {"dra-driver-nvidia-gpu-component": "kubelet-plugin"}}


def test_the_applied_crds_are_the_charts():
    """The program applies the CRDs the chart keeps in crds/ (Helm never upgrades them): the same files."""
    chart = versions.NVIDIA_DRA_DRIVER
    reason = helm_render.missing_reason(chart)
    if reason:
        missing(reason)
    with tarfile.open(helm_render.cached_chart(chart)) as archive:
        crds = sorted(m.name.rsplit("/", 1)[-1] for m in archive.getmembers() if "/crds/" in m.name)
    assert crds == ["resource.nvidia.com_computedomaincliques.yaml", "resource.nvidia.com_computedomains.yaml"]
    assert [f.name for f in versions.NVIDIA_DRA_DRIVER_CRDS] == crds
    assert {f.tag for f in versions.NVIDIA_DRA_DRIVER_CRDS} == {f"v{chart.version}"}
