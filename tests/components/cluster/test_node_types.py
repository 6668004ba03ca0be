"""Node types beyond managed groups: EKS Auto Mode, hybrid nodes, a managed group reserved for DRA."""

from __future__ import annotations

import pytest

from components.capacity_check import parse_settings
from components.cluster.hybrid_nodes import remote_network_transform
from components.settings import SettingsError
from tests.conftest import ROOMY_GPU_BUDGET, gpu_node_groups, plan_with, read_stack_config

AUTO_POOL = {
    "name": "auto-gpu", "instanceFamilies": ["g6e"], "capacityTypes": ["on-demand"], "gpuLimit": 4,
    "consolidation": {"policy": "WhenEmpty", "after": "10m"},
}


def dev_config(**overrides):
    config = read_stack_config("dev")
    config.update({f"llm-platform:{k}": v for k, v in overrides.items()})
    return config


def test_auto_mode_cluster_and_gpu_node_pool():
    plan = plan_with("dev", autoMode={"enabled": True, "gpuNodePools": [AUTO_POOL]}, gpuBudget=ROOMY_GPU_BUDGET)
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
        gpuBudget=ROOMY_GPU_BUDGET,
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


HYBRID = {"enabled": False, "remoteNodeNetworks": ["192.168.0.0/16"], "remotePodNetworks": ["172.16.0.0/16"]}


def problems_for(**overrides) -> str:
    with pytest.raises(SettingsError) as caught:
        parse_settings(dev_config(**overrides))
    return str(caught.value)


def test_hybrid_nodes_without_connectivity_are_refused_at_the_key():
    message = problems_for(hybridNodes={**HYBRID, "enabled": True}, gpuSoftware={"provider": "gpu-operator"})
    assert "llm-platform:hybridNodes.connectivity: got (missing): required when hybridNodes.enabled is true" in message


@pytest.mark.parametrize(
    ("networks", "fragment"),
    [
        ({"remoteNodeNetworks": ["10.40.0.0/24"]}, "remoteNodeNetworks[0]: got \"10.40.0.0/24\": overlaps network.vpcCidr"),
        ({"remoteNodeNetworks": ["172.20.0.0/24"]}, "overlaps the cluster's Service range 172.20.0.0/16"),
        ({"remoteNodeNetworks": ["8.8.8.0/24"]}, "is not a private IPv4 range"),
        ({"remotePodNetworks": ["192.168.1.0/24"]}, "overlap; node and pod networks must be disjoint"),
    ],
)
def test_hybrid_networks_are_validated(networks, fragment):
    assert fragment in problems_for(hybridNodes={**HYBRID, **networks})


def test_valid_hybrid_networks_with_hybrid_off_are_accepted():
    assert not parse_settings(dev_config(hybridNodes=HYBRID)).hybrid_nodes.enabled


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
    pool = {
        **read_stack_config("dev")["llm-platform:gpuPools"][0], "name": "dra", "purpose": "gpu-dra",
        "scaling": {"minSize": 1, "desiredSize": 1, "maxSize": 2},
    }
    plan = plan_with("dev", gpuPools=[read_stack_config("dev")["llm-platform:gpuPools"][0], pool], gpuBudget=ROOMY_GPU_BUDGET)
    (group,) = [g for g in gpu_node_groups(plan) if g.name == "dra"]
    assert group.inputs["labels"]["node.kubernetes.io/purpose"] == "gpu-dra"
    assert {"key": "llm-platform.io/workload", "value": "dra", "effect": "NO_SCHEDULE"} in group.inputs["taints"]
    assert {"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"} in group.inputs["taints"]


def test_dra_on_karpenter_is_rejected_with_a_clear_error():
    karpenter = read_stack_config("dev")["llm-platform:karpenter"]
    pools = [{**karpenter["nodePools"][0], "purpose": "gpu-dra"}, *karpenter["nodePools"][1:]]
    message = problems_for(karpenter={**karpenter, "nodePools": pools})
    assert "gpu-dra is not allowed on Karpenter or Auto Mode capacity" in message


def test_dra_on_auto_mode_is_rejected_with_a_clear_error():
    message = problems_for(autoMode={"enabled": True, "gpuNodePools": [{**AUTO_POOL, "purpose": "gpu-dra"}]})
    assert "gpu-dra is not allowed on Karpenter or Auto Mode capacity" in message


def test_a_dra_pool_at_zero_is_refused_because_the_autoscaler_could_not_grow_it():
    pool = {**read_stack_config("dev")["llm-platform:gpuPools"][0], "name": "dra", "purpose": "gpu-dra"}
    message = problems_for(gpuPools=[read_stack_config("dev")["llm-platform:gpuPools"][0], pool])
    assert "llm-platform:gpuPools[1]" in message and "cannot describe DRA devices" in message and "minSize >= 1" in message
