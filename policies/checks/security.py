"""Node and control-plane security defaults: IMDSv2, encrypted root volumes, Secrets encryption,
private API endpoint.

Each check reads both shapes: pulumi-eks components (``eks:index:Cluster``,
``eks:index:ManagedNodeGroup``) as mocks record them, and the aws resources a real preview shows.
Provider defaults decide missing fields: a launch template without ``httpTokens`` allows IMDSv1,
an EKS cluster without ``endpointPrivateAccess`` is public-only, and a missing
``publicAccessCidrs`` means 0.0.0.0/0.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from lib.kit import ADVISORY, MANDATORY, resource_policy
from lib.resources import (
    AWS_EKS_CLUSTER,
    AWS_NODE_GROUP,
    EC2_INSTANCE,
    EC2NODECLASS,
    EKS_CLUSTER,
    EKS_MANAGED_NODE_GROUP,
    EKS_SELF_MANAGED_NODE_GROUPS,
    LAUNCH_TEMPLATE,
    Resource,
)
from lib.values import UNKNOWN, as_list, dig, is_true

OPEN_CIDRS = frozenset({"0.0.0.0/0", "::/0"})
#: AMI types whose images are registered with ImdsSupport v2.0: instances from them require IMDSv2
#: unless the account-level default says otherwise (AL2023 user guide, "IMDSv2"; EC2 httpTokens default).
IMDSV2_AMI_PREFIXES = ("AL2023_",)


def _imds_by_ami(resource: Resource) -> Iterator[str]:
    """A node group without a launch template gets EKS's generated one, so its AMI decides IMDS."""
    ami_type = resource.get("amiType")
    if ami_type is UNKNOWN:
        return
    if isinstance(ami_type, str) and ami_type.startswith(IMDSV2_AMI_PREFIXES):
        return
    what = f"amiType {ami_type}" if ami_type else "no amiType (EKS picks the AMI by Kubernetes version)"
    fix = ("set enableIMDSv2: true or pass a launch template with httpTokens: required"
           if resource.type == EKS_MANAGED_NODE_GROUP else "attach a launch template with metadataOptions.httpTokens: required")
    yield (f"{resource.label} has no launch template and {what}, whose nodes may allow IMDSv1 so pods can steal "
           f"node credentials. Use an AL2023 amiType (EKS requires IMDSv2 there), or {fix}.")


def _check_imds(resource: Resource, config: dict[str, Any]) -> Iterator[str]:
    if resource.type in (LAUNCH_TEMPLATE, EC2_INSTANCE):
        options = resource.get("metadataOptions", default={})
        tokens = dig(options, "httpTokens")
        if UNKNOWN in (options, tokens) or dig(options, "httpEndpoint") in ("disabled", UNKNOWN):
            return
        if tokens != "required":
            yield (f"{resource.label} has metadataOptions.httpTokens {tokens or 'unset (optional)'}, so pods can "
                   f"steal node credentials over IMDSv1. Set metadataOptions.httpTokens: required.")
    elif resource.type == EC2NODECLASS:
        tokens = resource.get("spec", "metadataOptions", "httpTokens")
        if tokens not in (None, UNKNOWN, "required"):
            yield (f"{resource.label} sets spec.metadataOptions.httpTokens '{tokens}', allowing IMDSv1. Set it to "
                   f"'required' (Karpenter's default).")
    elif resource.type == EKS_MANAGED_NODE_GROUP:
        enabled, template = resource.get("enableIMDSv2"), resource.get("launchTemplate")
        if UNKNOWN in (enabled, template) or enabled is True or template is not None:
            return
        yield from _imds_by_ami(resource)
    elif resource.type == AWS_NODE_GROUP:
        template = resource.get("launchTemplate")
        if template is None:
            yield from _imds_by_ami(resource)


def _check_volumes(resource: Resource, config: dict[str, Any]) -> Iterator[str]:
    if resource.type == LAUNCH_TEMPLATE:
        mappings, flag = resource.get("blockDeviceMappings", default=[]), "ebs.encrypted: \"true\""
    elif resource.type == EC2NODECLASS:
        mappings, flag = resource.get("spec", "blockDeviceMappings", default=[]), "ebs.encrypted: true"
    elif resource.type == EC2_INSTANCE:
        encrypted = resource.get("rootBlockDevice", "encrypted")
        if encrypted is not UNKNOWN and not is_true(encrypted):
            yield f"{resource.label} has an unencrypted root volume. Set rootBlockDevice.encrypted: true."
        return
    else:
        flags = [resource.get("nodeRootVolumeEncrypted"), resource.get("encryptRootBlockDevice")]
        if UNKNOWN not in flags and not any(is_true(f) for f in flags):
            yield (f"{resource.label} leaves its root volume unencrypted. Set nodeRootVolumeEncrypted: true "
                   f"(or encryptRootBlockDevice: true).")
        return
    if mappings is UNKNOWN:
        return
    for i, mapping in enumerate(as_list(mappings)):
        ebs = dig(mapping, "ebs")
        if not isinstance(ebs, dict):
            continue
        encrypted = ebs.get("encrypted")
        if encrypted is not UNKNOWN and not is_true(encrypted):
            device = dig(mapping, "deviceName") or f"#{i}"
            yield (f"{resource.label} maps EBS volume {device} without encryption (encrypted: {encrypted}). "
                   f"Set {flag} on every EBS block device mapping.")


def _check_secrets(resource: Resource, config: dict[str, Any]) -> Iterator[str]:
    if resource.type == EKS_CLUSTER:
        key = resource.get("encryptionConfigKeyArn")
        if key in (None, ""):
            yield (f"{resource.label} does not encrypt Kubernetes Secrets with KMS. Pass encryptionConfigKeyArn "
                   f"(a KMS key with rotation).")
        return
    resources = resource.get("encryptionConfig", "resources")
    if resources is UNKNOWN or UNKNOWN in (as_list(resources) or []):
        return
    if "secrets" not in (as_list(resources) or []):
        yield (f"{resource.label} does not encrypt Kubernetes Secrets with KMS. Set encryptionConfig "
               f"{{provider: {{keyArn: <kms key>}}, resources: [secrets]}}.")


def _check_endpoint(resource: Resource, config: dict[str, Any]) -> Iterator[str]:
    if resource.type == EKS_CLUSTER:
        private = resource.get("endpointPrivateAccess", default=False)
        public = resource.get("endpointPublicAccess", default=True)
        cidrs = resource.get("publicAccessCidrs")
    else:
        private = resource.get("vpcConfig", "endpointPrivateAccess", default=False)
        public = resource.get("vpcConfig", "endpointPublicAccess", default=True)
        cidrs = resource.get("vpcConfig", "publicAccessCidrs")
    if private is False:
        yield (f"{resource.label} has no private API endpoint, so nodes reach the API over the internet. Set "
               f"endpointPrivateAccess: true.")
    if public is not True:
        return
    if not config["allowPublicAccess"]:
        yield (f"{resource.label} exposes a public API endpoint, which this stack does not allow. Set "
               f"endpointPublicAccess: false and reach the API through the VPC.")
        return
    if cidrs is UNKNOWN or UNKNOWN in (as_list(cidrs) or []):
        return
    open_to = sorted(OPEN_CIDRS & set(as_list(cidrs) or []))
    if not cidrs or open_to:
        what = f"open to {', '.join(open_to)}" if open_to else "open to 0.0.0.0/0 (publicAccessCidrs unset)"
        yield (f"{resource.label} has a public API endpoint {what}. Restrict publicAccessCidrs to known "
               f"networks or turn the public endpoint off.")


NODE_TYPES = {LAUNCH_TEMPLATE, EC2_INSTANCE, EC2NODECLASS}

POLICIES = [
    resource_policy(
        name="imdsv2-required",
        description=(
            "Require IMDSv2 (httpTokens: required) on launch templates, EC2NodeClasses and node groups; a node group "
            "without a launch template needs an AL2023 amiType (or enableIMDSv2: true)."
        ),
        types=NODE_TYPES | {EKS_MANAGED_NODE_GROUP, AWS_NODE_GROUP},
        check=_check_imds,
        enforcement=MANDATORY,
    ),
    resource_policy(
        name="root-volume-encrypted",
        description="Encrypt every node root volume (ebs.encrypted on launch templates and EC2NodeClasses).",
        types=NODE_TYPES | EKS_SELF_MANAGED_NODE_GROUPS,
        check=_check_volumes,
        enforcement=MANDATORY,
    ),
    resource_policy(
        name="eks-secrets-encrypted",
        description="Encrypt Kubernetes Secrets with a KMS key (encryptionConfigKeyArn on pulumi-eks clusters).",
        types={EKS_CLUSTER, AWS_EKS_CLUSTER},
        check=_check_secrets,
        enforcement=MANDATORY,
    ),
    resource_policy(
        name="eks-private-endpoint",
        description=(
            "Turn on the cluster's private API endpoint and keep any public endpoint closed to 0.0.0.0/0 "
            "(or off where the stack forbids it)."
        ),
        types={EKS_CLUSTER, AWS_EKS_CLUSTER},
        check=_check_endpoint,
        enforcement=ADVISORY,
        params={
            "allowPublicAccess": {
                "type": "boolean",
                "default": False,
                "description": "Whether a public endpoint (restricted by publicAccessCidrs) is acceptable.",
            }
        },
    ),
]
