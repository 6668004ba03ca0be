"""imdsv2-required, root-volume-encrypted, eks-secrets-encrypted, eks-private-endpoint."""

from __future__ import annotations

import pytest

from tests.policies.builders import (
    DELETE,
    NODE_GROUP_SHAPES,
    UNKNOWN,
    aws_cluster,
    ec2nodeclass,
    eks_cluster,
    gpu_node_group,
    launch_template,
    patch,
    resource,
    secret,
)
from tests.policies.conftest import one

IMDS, VOLUMES, SECRETS, ENDPOINT = "imdsv2-required", "root-volume-encrypted", "eks-secrets-encrypted", "eks-private-endpoint"


@pytest.mark.parametrize("res", [launch_template(), ec2nodeclass(), eks_cluster(), aws_cluster()],
                         ids=["launch-template", "nodeclass", "eks-cluster", "aws-cluster"])
def test_secure_resources_pass_every_policy(pack, res):
    assert pack.analyze(res) == []


# --- IMDSv2 ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "case",
    [
        (patch(launch_template(), {"metadataOptions.httpTokens": "optional"}), "httpTokens optional"),
        (patch(launch_template(), {"metadataOptions.httpTokens": DELETE}), "httpTokens unset (optional)"),
        (patch(launch_template(), {"metadataOptions": DELETE}), "httpTokens unset (optional)"),
        (patch(ec2nodeclass(), {"spec.metadataOptions.httpTokens": "optional"}), "spec.metadataOptions.httpTokens 'optional'"),
        (patch(gpu_node_group(NODE_GROUP_SHAPES[0]), {"enableIMDSv2": DELETE, "launchTemplate": DELETE,
                                                       "amiType": "AL2_x86_64_GPU"}),
         "has no launch template and amiType AL2_x86_64_GPU", "set enableIMDSv2: true"),
        (patch(gpu_node_group(NODE_GROUP_SHAPES[0]), {"enableIMDSv2": False, "launchTemplate": DELETE,
                                                       "amiType": DELETE}),
         "no amiType (EKS picks the AMI", "Use an AL2023 amiType"),
        (patch(gpu_node_group(NODE_GROUP_SHAPES[1]), {"launchTemplate": DELETE, "amiType": "AL2_x86_64_GPU"}),
         "has no launch template and amiType AL2_x86_64_GPU", "attach a launch template"),
        (patch(gpu_node_group(NODE_GROUP_SHAPES[1]), {"launchTemplate": DELETE, "amiType": "CUSTOM"}),
         "amiType CUSTOM"),
    ],
    ids=["lt-optional", "lt-unset", "lt-no-options", "nodeclass-optional", "eks-mng-al2", "eks-mng-no-ami",
         "aws-nodegroup-al2", "aws-nodegroup-custom"],
)
def test_imdsv1_allowed(pack, case):
    res, *fragments = case
    one(pack.messages(res, IMDS), *fragments)


@pytest.mark.parametrize(
    "res",
    [
        patch(ec2nodeclass(), {"spec.metadataOptions": DELETE}),
        patch(launch_template(), {"metadataOptions.httpEndpoint": "disabled", "metadataOptions.httpTokens": "optional"}),
        patch(gpu_node_group(NODE_GROUP_SHAPES[0]), {"launchTemplate": DELETE}),
        patch(gpu_node_group(NODE_GROUP_SHAPES[0]), {"enableIMDSv2": DELETE}),
        patch(launch_template(), {"metadataOptions.httpTokens": UNKNOWN}),
        patch(launch_template(), {"metadataOptions": UNKNOWN}),
        patch(gpu_node_group(NODE_GROUP_SHAPES[0]), {"enableIMDSv2": UNKNOWN, "launchTemplate": DELETE}),
        patch(gpu_node_group(NODE_GROUP_SHAPES[1]), {"launchTemplate": UNKNOWN}),
        # AL2023 AMIs require IMDSv2, so EKS's generated launch template gives the nodes IMDSv2 only.
        patch(gpu_node_group(NODE_GROUP_SHAPES[0]), {"enableIMDSv2": DELETE, "launchTemplate": DELETE}),
        patch(gpu_node_group(NODE_GROUP_SHAPES[0]), {"enableIMDSv2": False, "launchTemplate": DELETE,
                                                      "amiType": "AL2023_ARM_64_STANDARD"}),
        patch(gpu_node_group(NODE_GROUP_SHAPES[1]), {"launchTemplate": DELETE}),
        patch(gpu_node_group(NODE_GROUP_SHAPES[1]), {"launchTemplate": DELETE, "amiType": UNKNOWN}),
    ],
    ids=["karpenter-default", "imds-off", "enable-flag", "own-template", "unknown-tokens", "unknown-options",
         "unknown-flag", "unknown-template", "eks-mng-al2023-no-template", "eks-mng-al2023-arm-flag-off",
         "aws-nodegroup-al2023-no-template", "aws-nodegroup-unknown-ami"],
)
def test_imdsv2_enforced_or_unknown(pack, res):
    assert pack.messages(res, IMDS) == []


# --- encrypted root volumes ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "res, fragment",
    [
        (patch(launch_template(), {"blockDeviceMappings.0.ebs.encrypted": "false"}), "/dev/xvda without encryption (encrypted: false)"),
        (patch(launch_template(), {"blockDeviceMappings.0.ebs.encrypted": DELETE}), "without encryption (encrypted: None)"),
        (patch(ec2nodeclass(), {"spec.blockDeviceMappings.0.ebs.encrypted": False}), "Set ebs.encrypted: true"),
        (resource("eks:index:NodeGroupV2", "ng", {"instanceType": "m7i.large"}), "Set nodeRootVolumeEncrypted: true"),
        (resource("aws:ec2/instance:Instance", "vm", {"rootBlockDevice": {"encrypted": False}}), "unencrypted root volume"),
    ],
    ids=["lt-false", "lt-unset", "nodeclass", "self-managed", "instance"],
)
def test_unencrypted_volumes(pack, res, fragment):
    one(pack.messages(res, VOLUMES), fragment)


@pytest.mark.parametrize(
    "res",
    [
        patch(launch_template(), {"blockDeviceMappings.0.ebs.encrypted": True}),
        patch(launch_template(), {"blockDeviceMappings": [{"deviceName": "/dev/sdb", "virtualName": "ephemeral0"}]}),
        patch(launch_template(), {"blockDeviceMappings": DELETE}),
        patch(ec2nodeclass(), {"spec.blockDeviceMappings": DELETE}),
        resource("eks:index:NodeGroupV2", "ng", {"instanceType": "m7i.large", "nodeRootVolumeEncrypted": True}),
        patch(launch_template(), {"blockDeviceMappings.0.ebs.encrypted": UNKNOWN}),
        patch(launch_template(), {"blockDeviceMappings": UNKNOWN}),
    ],
    ids=["bool-true", "instance-store", "no-mappings", "karpenter-default", "self-managed", "unknown-flag", "unknown-mappings"],
)
def test_encrypted_or_unknown_volumes(pack, res):
    assert pack.messages(res, VOLUMES) == []


# --- Secrets encryption ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "res, fragment",
    [
        (patch(eks_cluster(), {"encryptionConfigKeyArn": DELETE}), "Pass encryptionConfigKeyArn"),
        (patch(aws_cluster(), {"encryptionConfig": DELETE}), "resources: [secrets]"),
        (patch(aws_cluster(), {"encryptionConfig.resources": []}), "resources: [secrets]"),
    ],
)
def test_secrets_not_encrypted(pack, res, fragment):
    one(pack.messages(res, SECRETS), "does not encrypt Kubernetes Secrets with KMS", fragment)


@pytest.mark.parametrize(
    "res",
    [
        patch(eks_cluster(), {"encryptionConfigKeyArn": UNKNOWN}),
        patch(eks_cluster(), {"encryptionConfigKeyArn": secret(UNKNOWN)}),
        patch(aws_cluster(), {"encryptionConfig": UNKNOWN}),
        patch(aws_cluster(), {"encryptionConfig.resources": [UNKNOWN]}),
    ],
)
def test_unknown_secrets_encryption_is_not_judged(pack, res):
    assert pack.messages(res, SECRETS) == []


# --- private endpoint -----------------------------------------------------------------------------


def endpoint(shape: str, **fields):
    if shape == "eks":
        return patch(eks_cluster(), fields)
    return patch(aws_cluster(), {f"vpcConfig.{k}": v for k, v in fields.items()})


@pytest.mark.parametrize("shape", ["eks", "aws"])
@pytest.mark.parametrize(
    "fields, allow_public, fragment",
    [
        ({"endpointPrivateAccess": False}, False, "has no private API endpoint"),
        ({"endpointPrivateAccess": DELETE}, False, "has no private API endpoint"),
        ({"endpointPublicAccess": True, "publicAccessCidrs": ["10.0.0.0/8"]}, False, "which this stack does not allow"),
        ({"endpointPublicAccess": DELETE}, False, "which this stack does not allow"),
        ({"endpointPublicAccess": True, "publicAccessCidrs": ["0.0.0.0/0"]}, True, "open to 0.0.0.0/0. Restrict"),
        ({"endpointPublicAccess": True}, True, "open to 0.0.0.0/0 (publicAccessCidrs unset)"),
        ({"endpointPublicAccess": True, "publicAccessCidrs": []}, True, "publicAccessCidrs unset"),
    ],
    ids=["private-off", "private-default", "public-forbidden", "public-default", "open-cidr", "cidrs-unset", "cidrs-empty"],
)
def test_endpoint_findings(pack, shape, fields, allow_public, fragment):
    pack.configure({ENDPOINT: {"allowPublicAccess": allow_public}})
    one(pack.messages(endpoint(shape, **fields), ENDPOINT), fragment)


@pytest.mark.parametrize("shape", ["eks", "aws"])
@pytest.mark.parametrize(
    "fields",
    [
        {"endpointPublicAccess": True, "publicAccessCidrs": ["203.0.113.0/24"]},
        {"endpointPrivateAccess": UNKNOWN, "endpointPublicAccess": UNKNOWN},
        {"endpointPublicAccess": True, "publicAccessCidrs": UNKNOWN},
    ],
    ids=["restricted", "unknown-flags", "unknown-cidrs"],
)
def test_endpoint_restricted_or_unknown(pack, shape, fields):
    pack.configure({ENDPOINT: {"allowPublicAccess": True}})
    assert pack.messages(endpoint(shape, **fields), ENDPOINT) == []
