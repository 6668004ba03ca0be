"""no-end-of-life-ami: Amazon Linux 2 AMI types on both node group shapes, AL2 aliases on EC2NodeClasses."""

from __future__ import annotations

import pytest

from tests.policies.builders import NODE_GROUP_SHAPES, ec2nodeclass, gpu_node_group, patch
from tests.policies.conftest import ROOT, one


@pytest.mark.parametrize("shape", NODE_GROUP_SHAPES)
@pytest.mark.parametrize(
    "ami, replacement",
    [
        ("AL2_x86_64_GPU", "AL2023_x86_64_NVIDIA or BOTTLEROCKET_x86_64_NVIDIA"),
        ("AL2_x86_64", "AL2023_x86_64_STANDARD"),
        ("AL2_ARM_64", "AL2023_ARM_64_STANDARD"),
    ],
)
def test_end_of_life_ami_types(pack, shape, ami, replacement):
    one(pack.messages(patch(gpu_node_group(shape), {"amiType": ami}), "no-end-of-life-ami"), "2025-11-26", replacement)


def test_end_of_life_nodeclass_alias(pack):
    assert pack.messages(ec2nodeclass(), "no-end-of-life-ami") == []
    old = patch(ec2nodeclass(), {"spec.amiSelectorTerms": [{"alias": "al2@v20240807"}]})
    one(pack.messages(old, "no-end-of-life-ami"), "alias 'al2@v20240807'", "al2023@<version>")


def test_forbidden_ami_types_are_configurable(pack):
    pack.configure({"no-end-of-life-ami": {"forbiddenAmiTypes": ["BOTTLEROCKET_x86_64_NVIDIA"]}})
    one(pack.messages(patch(gpu_node_group(), {"amiType": "BOTTLEROCKET_x86_64_NVIDIA"}), "no-end-of-life-ami"))
    assert pack.messages(patch(gpu_node_group(), {"amiType": "AL2_x86_64_GPU"}), "no-end-of-life-ami") == []


# --- end-of-life AMIs reached without an alias or an amiType, at prod's level --------------------

PROD_CONFIG = ROOT / "policies" / "config" / "prod.json"
EOL = "no-end-of-life-ami"


def test_nodeclass_with_amifamily_al2_and_a_name_selector(pack):
    pack.configure(PROD_CONFIG)
    old = patch(ec2nodeclass(), {"spec.amiFamily": "AL2", "spec.amiSelectorTerms": [{"name": "amazon-eks-gpu-node-1.32-*"}]})
    one(pack.messages(old, EOL), "amiFamily AL2 with AMI selector terms but no alias", "2025-11-26", "al2023@<version>")
    current = patch(ec2nodeclass(), {"spec.amiFamily": "AL2023", "spec.amiSelectorTerms": [{"name": "amazon-eks-node-al2023-*"}]})
    assert pack.messages(current, EOL) == []


def test_pulumi_eks_gpu_group_on_al2_without_ami_type(pack):
    """pulumi-eks resolves operatingSystem AL2 + gpu: true to AL2_x86_64_GPU when amiType is not set."""
    pack.configure(PROD_CONFIG)
    group = gpu_node_group("eks:index:ManagedNodeGroup")
    del group["inputs"]["amiType"]
    old = patch(group, {"gpu": True, "operatingSystem": "AL2"})
    one(pack.messages(old, EOL), "uses amiType AL2_x86_64_GPU (pulumi-eks: operatingSystem AL2)", "2025-11-26",
        "AL2023_x86_64_NVIDIA or BOTTLEROCKET_x86_64_NVIDIA")
    assert pack.messages(patch(group, {"gpu": True, "operatingSystem": "AL2023"}), EOL) == []
