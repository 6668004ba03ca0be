"""Node pools: AMI types, capacity, scaling, the contract's taints and labels, secure launch templates."""

from __future__ import annotations

import json

import pytest

from components import contract, versions
from components.cluster.node_role import NODE_MANAGED_POLICIES
from tests.conftest import child_of_type, gpu_node_groups, system_node_group

GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}


def launch_template_of(plan, group):
    return child_of_type(plan, group.parent, "aws:ec2/launchTemplate:LaunchTemplate")


def test_system_pool(stack_plan):
    group = system_node_group(stack_plan).inputs
    assert group["amiType"] == "AL2023_x86_64_STANDARD"
    assert group["capacityType"] == "ON_DEMAND"
    assert group["taints"] == []
    assert group["labels"]["node.kubernetes.io/purpose"] == "system"
    assert group["scalingConfig"]["minSize"] >= 2


def test_gpu_pools_follow_the_contract(stack_plan):
    groups = gpu_node_groups(stack_plan)
    assert groups
    for group in groups:
        inputs = group.inputs
        assert inputs["amiType"] == "AL2023_x86_64_NVIDIA", group.urn
        assert inputs["taints"] == [GPU_TAINT], group.urn
        assert inputs["scalingConfig"]["minSize"] == 0, group.urn
        labels = inputs["labels"]
        assert labels["nvidia.com/gpu.present"] == "true", group.urn
        assert labels["node.kubernetes.io/purpose"] == "gpu-inference", group.urn
        assert labels["llm-platform.io/pool"] == group.name, group.urn


def test_dev_gpu_pool_is_diverse_spot(dev_plan):
    (group,) = gpu_node_groups(dev_plan)
    assert group.inputs["capacityType"] == "SPOT"
    assert group.inputs["instanceTypes"] == ["g5.2xlarge", "g5.4xlarge"]
    assert group.inputs["labels"]["llm-platform.io/capacity-type"] == "spot"
    assert group.inputs["labels"]["llm-platform.io/accelerator"] == "a10g"
    assert group.inputs["labels"]["llm-platform.io/gpu-memory-mib"] == "22888"


def test_prod_gpu_pools_are_on_demand(prod_plan):
    groups = {g.name: g.inputs for g in gpu_node_groups(prod_plan)}
    assert set(groups) == {"inference-a10g", "inference-l40s"}
    assert {g["capacityType"] for g in groups.values()} == {"ON_DEMAND"}
    assert groups["inference-l40s"]["labels"]["llm-platform.io/gpu-memory-mib"] == "45776"


def test_no_end_of_life_gpu_ami_anywhere(stack_plan):
    assert "AL2_x86_64_GPU" not in json.dumps([r.inputs for r in stack_plan.resources])
    assert versions.GPU_AMI_TYPE == "AL2023_x86_64_NVIDIA"


def test_gpu_pools_carry_cluster_autoscaler_tags(dev_plan):
    (group,) = gpu_node_groups(dev_plan)
    tags = group.inputs["tags"]
    assert tags["k8s.io/cluster-autoscaler/enabled"] == "true"
    assert tags["k8s.io/cluster-autoscaler/llm-platform-dev"] == "owned"
    assert tags["k8s.io/cluster-autoscaler/node-template/taint/nvidia.com/gpu"] == "true:NoSchedule"
    assert tags["k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu"] == "1"
    assert tags["k8s.io/cluster-autoscaler/node-template/label/nvidia.com/gpu.present"] == "true"


@pytest.mark.parametrize("pool", ["system", "gpu"])
def test_launch_templates_require_imdsv2_and_encrypt_root(dev_plan, pool):
    group = system_node_group(dev_plan) if pool == "system" else gpu_node_groups(dev_plan)[0]
    template = launch_template_of(dev_plan, group)
    assert template.inputs["metadataOptions"] == {
        "httpEndpoint": "enabled",
        "httpTokens": "required",
        "httpPutResponseHopLimit": 1,
    }
    (mapping,) = template.inputs["blockDeviceMappings"]
    assert mapping["ebs"]["encrypted"] == "true"
    assert mapping["ebs"]["volumeType"] == "gp3"
    assert group.inputs["launchTemplate"]["version"] == "1"
    assert group.inputs["launchTemplate"]["id"].startswith("lt-")


def test_gpu_root_volume_sized_for_model_images(dev_plan):
    template = launch_template_of(dev_plan, gpu_node_groups(dev_plan)[0])
    ebs = template.inputs["blockDeviceMappings"][0]["ebs"]
    assert (ebs["volumeSize"], ebs["throughput"], ebs["iops"]) == (200, 500, 6000)


def test_every_pool_has_its_own_node_role_with_worker_policies(dev_plan):
    roles = [r for r in dev_plan.of_type("aws:iam/role:Role") if r.parent.split("::")[2].endswith("NodePool$llm-platform:index:NodeRole")]
    assert len(roles) == 2
    for role in roles:
        trust = json.loads(role.inputs["assumeRolePolicy"])
        assert trust["Statement"][0]["Principal"] == {"Service": "ec2.amazonaws.com"}
        attached = sorted(
            a.inputs["policyArn"]
            for a in dev_plan.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
            if a.parent == role.parent
        )
        assert attached == sorted(f"arn:aws:iam::aws:policy/{p}" for p in NODE_MANAGED_POLICIES), role.urn
    node_role_arns = {g.inputs["nodeRoleArn"] for g in dev_plan.of_type("eks:index:ManagedNodeGroup")}
    assert node_role_arns == {f"arn:aws:iam::123456789012:role/{name}-node-role" for name in ("system", "inference")}


def test_contract_helpers_agree_with_each_other():
    taint = contract.gpu_taint_k8s()
    toleration = contract.gpu_toleration()
    assert toleration["key"] == taint["key"] and toleration["effect"] == taint["effect"]
    assert contract.gpu_taint_eks() == GPU_TAINT


def test_gpu_nodes_put_ephemeral_storage_on_local_nvme(dev_plan):
    import base64

    import yaml

    gpu_template = launch_template_of(dev_plan, gpu_node_groups(dev_plan)[0])
    document = base64.b64decode(gpu_template.inputs["userData"]).decode()
    assert "Content-Type: application/node.eks.aws" in document
    node_config = yaml.safe_load(document.split("application/node.eks.aws", 1)[1].split("--==", 1)[0])
    assert node_config == {
        "apiVersion": "node.eks.aws/v1alpha1",
        "kind": "NodeConfig",
        "spec": {"featureGates": {"FastImagePull": True}, "instance": {"localStorage": {"strategy": "RAID0"}}},
    }
    assert "userData" not in launch_template_of(dev_plan, system_node_group(dev_plan)).inputs
    (node_class,) = dev_plan.of_type("kubernetes:karpenter.k8s.aws/v1:EC2NodeClass")
    assert node_class.inputs["spec"]["instanceStorePolicy"] == "RAID0"


def test_managed_groups_follow_the_cluster_version(stack_plan):
    (cluster,) = stack_plan.of_type("eks:index:Cluster")
    groups = stack_plan.of_type("eks:index:ManagedNodeGroup")
    assert groups and all(g.inputs["version"] == cluster.inputs["version"] for g in groups)


def test_cluster_autoscaler_owns_the_desired_size_of_every_managed_group(stack_plan):
    """Cluster Autoscaler scales managed groups through their ASG's desired size; if the stack kept
    ``scalingConfig.desiredSize`` (0 for GPU pools), the next ``up`` after a refresh or any group
    change would shrink the group back and terminate nodes serving warm models."""
    groups = stack_plan.of_type("eks:index:ManagedNodeGroup")
    assert {g.name for g in groups} >= {"system", *(g.name for g in gpu_node_groups(stack_plan))}
    for group in groups:
        assert group.inputs["ignoreScalingChanges"] is True, group.urn
