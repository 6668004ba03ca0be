"""GPU software per node type: never two device plugins on a node, operands switched by node labels."""

from __future__ import annotations

import pytest

from components import contract, versions
from components.specs.gpu_software import operator_node_labels
from tests.conftest import gpu_node_groups, plan_with, read_stack_config


def releases(plan):
    return {r.inputs["name"]: r.inputs for r in plan.of_type("kubernetes:helm.sh/v3:Release")}


def test_dev_runs_device_plugin_and_dcgm_exporter(dev_plan):
    charts = releases(dev_plan)
    assert {"nvidia-device-plugin", "dcgm-exporter"} <= set(charts)
    assert "gpu-operator" not in charts
    dcgm = charts["dcgm-exporter"]
    assert dcgm["version"] == versions.DCGM_EXPORTER.version
    assert dcgm["values"]["serviceMonitor"]["enabled"] is True
    assert dcgm["values"]["image"]["tag"] == versions.DCGM_EXPORTER_IMAGE.tag
    assert contract.gpu_toleration() in dcgm["values"]["tolerations"]


def test_device_plugin_stays_off_auto_mode_and_dra_nodes(dev_plan):
    values = releases(dev_plan)["nvidia-device-plugin"]["values"]
    (term,) = values["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    expressions = {e["key"]: e for e in term["matchExpressions"]}
    assert expressions["eks.amazonaws.com/compute-type"] == {
        "key": "eks.amazonaws.com/compute-type", "operator": "NotIn", "values": ["auto"]
    }
    assert expressions["node.kubernetes.io/purpose"]["values"] == ["gpu-dra"]
    assert expressions["nvidia.com/gpu.present"]["values"] == ["true"]
    assert {"key": "llm-platform.io/workload", "operator": "Exists", "effect": "NoSchedule"} in values["tolerations"]


def test_prod_runs_gpu_operator_with_driver_off(prod_plan):
    charts = releases(prod_plan)
    assert "nvidia-device-plugin" not in charts and "dcgm-exporter" not in charts
    operator = charts["gpu-operator"]
    assert (operator["chart"], operator["version"]) == ("gpu-operator", "v26.7.0")
    values = operator["values"]
    assert values["driver"]["enabled"] is False and values["toolkit"]["enabled"] is False
    assert values["dcgmExporter"]["enabled"] is True and values["dcgmExporter"]["serviceMonitor"] == {"enabled": True}
    assert values["dcgmExporter"]["config"]["name"] == "dcgm-exporter-counters"
    assert values["migManager"]["enabled"] is True
    for toleration in contract.gpu_agent_tolerations():
        assert toleration in values["daemonsets"]["tolerations"]
        assert toleration in values["node-feature-discovery"]["worker"]["tolerations"]
    assert all(t.get("operator") != "Equal" or t.get("key") != contract.GPU_TAINT_KEY
               for t in values["node-feature-discovery"]["worker"]["tolerations"])


def test_prod_pools_carry_operand_switches(prod_plan):
    for group in gpu_node_groups(prod_plan):
        labels = group.inputs["labels"]
        assert labels["nvidia.com/gpu.deploy.driver"] == "false", group.urn
        assert labels["nvidia.com/gpu.deploy.mig-manager"] == "false", group.urn
    for pool in prod_plan.of_type("kubernetes:karpenter.sh/v1:NodePool"):
        labels = pool.inputs["spec"]["template"]["metadata"]["labels"]
        assert labels["nvidia.com/gpu.deploy.mig-manager"] == "true", pool.urn
        assert labels["nvidia.com/gpu.deploy.container-toolkit"] == "false", pool.urn


@pytest.mark.parametrize(
    "node_type, purpose, expected",
    [
        ("managed", "gpu-inference", {"driver": "false", "container-toolkit": "false", "mig-manager": "false"}),
        ("karpenter", "gpu-inference", {"driver": "false", "container-toolkit": "false", "mig-manager": "true"}),
        ("auto-mode", "gpu-inference", {"driver": "false", "container-toolkit": "false", "mig-manager": "false", "device-plugin": "false"}),
        ("managed", "gpu-dra", {"driver": "false", "container-toolkit": "false", "mig-manager": "false", "device-plugin": "false"}),
        ("hybrid", "gpu-inference", {}),
    ],
)
def test_operator_labels_per_node_type(node_type, purpose, expected):
    labels = operator_node_labels("gpu-operator", node_type, purpose)
    assert labels == {f"nvidia.com/gpu.deploy.{k}": v for k, v in expected.items()}
    assert operator_node_labels("device-plugin", node_type, purpose) == {}


def test_switching_software_changes_the_plan():
    plan = plan_with("dev", gpuSoftware={"provider": "gpu-operator", "dcgmExporter": True})
    charts = releases(plan)
    assert "gpu-operator" in charts and "nvidia-device-plugin" not in charts
    (group,) = gpu_node_groups(plan)
    assert group.inputs["labels"]["nvidia.com/gpu.deploy.driver"] == "false"
    none = releases(plan_with("dev", gpuSoftware={"provider": "none", "dcgmExporter": False}))
    assert not {"gpu-operator", "nvidia-device-plugin", "dcgm-exporter"} & set(none)


def test_gpu_metrics_bring_prometheus_even_without_serving():
    serving = read_stack_config("dev")["llm-platform:serving"]
    plan = plan_with("dev", serving={**serving, "enabled": False, "tiers": []})
    charts = releases(plan)
    assert {"dcgm-exporter", "kube-prometheus-stack"} <= set(charts)
    assert "keda" not in charts
    (exporter,) = plan.of_type("llm-platform:index:DcgmExporter")
    (prometheus,) = [r for r in plan.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "kube-prometheus-stack"]
    assert prometheus.urn in exporter.dependencies, "ServiceMonitor CRDs must exist before the exporter's release"
