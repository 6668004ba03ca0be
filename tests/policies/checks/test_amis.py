"""no-end-of-life-ami: Amazon Linux 2 AMI types on both node group shapes, AL2 aliases on EC2NodeClasses."""

from __future__ import annotations

import pytest

from tests.policies.builders import NODE_GROUP_SHAPES, ec2nodeclass, gpu_node_group, patch
from tests.policies.conftest import one


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
