"""Chart DaemonSets under the program's values (policies/capacity/charts.py): each override path with
a value that applies and one that does not."""

from __future__ import annotations

from policies.capacity.charts import addon_daemonset, release_daemonsets
from policies.capacity.instances import Resources
from policies.capacity.model import Selection

DCGM = ("dcgm-exporter", "4.8.2")


def only(chart: tuple[str, str], values: dict | None):
    [daemonset] = release_daemonsets(*chart, values)
    return daemonset


def test_defaults_of_a_chart():
    dcgm = only(DCGM, None)
    assert dcgm.name == "dcgm-exporter"
    assert dcgm.requests == Resources(cpu_m=100.0, memory_mib=128.0, pods=1)
    assert dcgm.selection == Selection()
    assert dcgm.source.startswith("chart dcgm-exporter 4.8.2; ")


def test_resources_override_with_limits_as_requests():
    dcgm = only(DCGM, {"resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "200m"}}})
    assert dcgm.requests == Resources(cpu_m=200.0, memory_mib=1024.0, pods=1)
    assert only(DCGM, {"resources": "big"}).requests == Resources(cpu_m=100.0, memory_mib=128.0, pods=1)


def test_tolerations_override_needs_a_list():
    given = [{"key": "dedicated", "operator": "Exists"}]
    assert only(DCGM, {"tolerations": given}).tolerations == given
    assert only(DCGM, {"tolerations": {"key": "x"}}).tolerations == only(DCGM, None).tolerations


def test_node_selector_override_needs_a_non_empty_mapping():
    assert only(DCGM, {"nodeSelector": {"gpu": "yes"}}).selection == Selection((("gpu", "yes"),), ())
    assert only(DCGM, {"nodeSelector": {}}).selection == Selection()
    assert only(DCGM, {"nodeSelector": "gpu=yes"}).selection == Selection()


def test_affinity_override():
    terms = [{"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}]
    values = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}}
    assert only(DCGM, values).selection == Selection((), ((("gpu", "Exists", ()),),))
    assert only(DCGM, {"affinity": {}}).selection == Selection()


def test_enabled_flags_follow_the_chart_default():
    names = lambda values: [d.name for d in release_daemonsets("nvidia-device-plugin", "0.20.0", values)]  # noqa: E731
    assert names({}) == ["nvidia-device-plugin"]
    assert names({"gfd": {"enabled": True}}) == ["nvidia-device-plugin", "gpu-feature-discovery"]
    assert names({"gfd": {"enabled": "true"}}) == ["nvidia-device-plugin", "gpu-feature-discovery"]
    assert names({"gfd": {"enabled": "yes"}}) == ["nvidia-device-plugin"]
    operator = [d.name for d in release_daemonsets("gpu-operator", "v26.7.0", {"driver": {"enabled": False}})]
    assert "nvidia-driver-daemonset" not in operator and "nvidia-device-plugin-daemonset" in operator
    assert len(operator) == 7


def test_operands_are_switched_off_per_node_by_their_deploy_label():
    plugin = next(d for d in release_daemonsets("gpu-operator", "v26.7.0", {})
                  if d.name == "nvidia-device-plugin-daemonset")
    assert plugin.deploy_label == "nvidia.com/gpu.deploy.device-plugin"
    assert plugin.selection == Selection((("nvidia.com/gpu.present", "true"),), ())


def test_unknown_versions_and_addons():
    assert release_daemonsets("dcgm-exporter", "4.8.1", {}) is None
    assert addon_daemonset("coredns") is None
    proxy = addon_daemonset("kube-proxy")
    assert proxy.requests == Resources(cpu_m=100.0, pods=1)
    assert proxy.source.startswith("EKS add-on kube-proxy; ")


def test_the_dra_kubelet_plugin_is_named_after_name_override():
    """dra-driver-nvidia-gpu 0.4.1 templates/kubeletplugin.yaml: ``<nameOverride or chart>-kubelet-plugin``;
    its default tolerations hold the GPU taint (values.yaml), the 25.12 chart's held none."""
    (default,) = release_daemonsets("dra-driver-nvidia-gpu", "0.4.1", {})
    assert default.name == "dra-driver-nvidia-gpu-kubelet-plugin"
    assert default.tolerations == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    (kept,) = release_daemonsets("dra-driver-nvidia-gpu", "0.4.1", {"nameOverride": "nvidia-dra-driver-gpu"})
    assert kept.name == "nvidia-dra-driver-gpu-kubelet-plugin"
    (old,) = release_daemonsets("nvidia-dra-driver-gpu", "25.12.0", {})
    assert (old.name, old.tolerations) == ("nvidia-dra-driver-gpu-kubelet-plugin", [])
