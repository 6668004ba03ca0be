"""Node types beyond managed groups: EKS Auto Mode, hybrid nodes, a managed group reserved for DRA."""

from __future__ import annotations

import json

import pytest

from components.hybrid_nodes import remote_network_transform
from components.settings import SettingsError, parse_settings
from tests.conftest import gpu_node_groups, plan_with, read_stack_config

AUTO_POOL = {
    "name": "auto-gpu", "instanceFamilies": ["g6e"], "capacityTypes": ["on-demand"], "gpuLimit": 4,
    "consolidation": {"policy": "WhenEmpty", "after": "10m"},
}


def dev_config(**overrides):
    config = read_stack_config("dev")
    config.update({f"llm-platform:{k}": v for k, v in overrides.items()})
    return config


def test_auto_mode_cluster_and_gpu_node_pool():
    plan = plan_with("dev", autoMode={"enabled": True, "gpuNodePools": [AUTO_POOL]})
    (cluster,) = plan.of_type("eks:index:Cluster")
    assert cluster.inputs["autoMode"]["enabled"] is True
    assert cluster.inputs["autoMode"]["computeConfig"] == {"nodePools": ["system"]}
    (pool,) = [p for p in plan.of_type("kubernetes:karpenter.sh/v1:NodePool") if p.inputs["metadata"]["name"] == "auto-gpu"]
    spec = pool.inputs["spec"]["template"]["spec"]
    assert spec["nodeClassRef"] == {"group": "eks.amazonaws.com", "kind": "NodeClass", "name": "default"}
    assert {r["key"] for r in spec["requirements"]} >= {"eks.amazonaws.com/instance-family", "eks.amazonaws.com/instance-gpu-count"}


def test_auto_mode_pools_turn_off_the_operators_device_plugin():
    plan = plan_with(
        "dev",
        autoMode={"enabled": True, "gpuNodePools": [AUTO_POOL]},
        gpuSoftware={"provider": "gpu-operator", "dcgmExporter": True},
    )
    (pool,) = [p for p in plan.of_type("kubernetes:karpenter.sh/v1:NodePool") if p.inputs["metadata"]["name"] == "auto-gpu"]
    assert pool.inputs["spec"]["template"]["metadata"]["labels"]["nvidia.com/gpu.deploy.device-plugin"] == "false"


def test_auto_mode_only_with_a_second_device_plugin_is_rejected():
    karpenter = {**read_stack_config("dev")["llm-platform:karpenter"], "enabled": False}
    config = dev_config(
        gpuPools=[], karpenter=karpenter, autoMode={"enabled": True, "gpuNodePools": [AUTO_POOL]}, serving={"enabled": False}
    )
    with pytest.raises(SettingsError) as caught:
        parse_settings(config)
    assert "Auto Mode nodes already run a device plugin" in str(caught.value)
    config["llm-platform:gpuSoftware"] = {"provider": "none"}
    assert parse_settings(config).auto_mode.enabled


HYBRID = {"enabled": True, "remoteNodeNetworks": ["192.168.0.0/16"], "remotePodNetworks": ["172.16.0.0/16"]}


def test_hybrid_nodes_need_the_gpu_operator():
    with pytest.raises(SettingsError, match="on-prem GPU nodes need the GPU Operator"):
        parse_settings(dev_config(hybridNodes=HYBRID))


def test_hybrid_networks_must_not_overlap_the_vpc():
    with pytest.raises(SettingsError, match="overlap network.vpcCidr"):
        parse_settings(
            dev_config(hybridNodes={**HYBRID, "remoteNodeNetworks": ["10.40.0.0/24"]}, gpuSoftware={"provider": "gpu-operator"})
        )


def test_hybrid_nodes_plan():
    plan = plan_with("dev", hybridNodes=HYBRID, gpuSoftware={"provider": "gpu-operator", "dcgmExporter": True})
    role = plan.named("aws:iam/role:Role", "hybrid-nodes-role")
    assert json.loads(role.inputs["assumeRolePolicy"])["Statement"][0]["Principal"] == {"Service": "ssm.amazonaws.com"}
    entries = {e.inputs["type"] for e in plan.of_type("aws:eks/accessEntry:AccessEntry")}
    assert entries == {"EC2_LINUX", "HYBRID_LINUX"}
    (activation,) = plan.of_type("aws:ssm/activation:Activation")
    assert activation.inputs["iamRole"] == "hybrid-nodes-role"
    (operator,) = [r for r in plan.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "gpu-operator"]
    assert operator.inputs["values"]["driver"] == {"enabled": True}


def test_remote_network_transform_targets_the_eks_cluster_only():
    import pulumi

    transform = remote_network_transform(["192.168.0.0/16"], ["172.16.0.0/16"])
    opts = pulumi.ResourceOptions()
    cluster = transform(pulumi.ResourceTransformArgs(
        custom=True, type_="aws:eks/cluster:Cluster", name="c", props={"name": "c"}, opts=opts
    ))
    assert cluster.props["remoteNetworkConfig"] == {
        "remoteNodeNetworks": {"cidrs": ["192.168.0.0/16"]},
        "remotePodNetworks": {"cidrs": ["172.16.0.0/16"]},
    }
    assert transform(pulumi.ResourceTransformArgs(
        custom=True, type_="aws:iam/role:Role", name="r", props={}, opts=opts
    )) is None


def test_dra_pool_is_reserved_by_label_and_taint():
    pool = {**read_stack_config("dev")["llm-platform:gpuPools"][0], "name": "dra", "purpose": "gpu-dra"}
    plan = plan_with("dev", gpuPools=[read_stack_config("dev")["llm-platform:gpuPools"][0], pool])
    (group,) = [g for g in gpu_node_groups(plan) if g.name == "dra"]
    assert group.inputs["labels"]["node.kubernetes.io/purpose"] == "gpu-dra"
    assert {"key": "llm-platform.io/workload", "value": "dra", "effect": "NO_SCHEDULE"} in group.inputs["taints"]
    assert {"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"} in group.inputs["taints"]
