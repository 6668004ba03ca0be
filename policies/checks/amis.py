"""Node images in support: no Amazon Linux 2 EKS AMIs, which reached end of support on 2025-11-26.

An out-of-support AMI gets no security fixes and no NVIDIA driver updates, and Kubernetes 1.32 is the
last version EKS builds AL2 images for. Managed node groups are judged by ``amiType``, or, for a
pulumi-eks ``ManagedNodeGroup`` without one, by the type pulumi-eks resolves from ``operatingSystem``
and ``gpu`` (``AL2`` + ``gpu: true`` is ``AL2_x86_64_GPU``: pulumi/pulumi-eks nodejs/eks/nodegroup.ts, where
the managed group derives its AMI type from these). EC2NodeClasses are judged by their ``alias`` AMI selector terms and,
without an alias, by ``amiFamily: AL2`` (the AMI a name/id/tag selector finds is bootstrapped as AL2).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from lib.kit import ADVISORY, resource_policy
from lib.resources import EC2NODECLASS, EKS_MANAGED_NODE_GROUP, NODE_GROUP_TYPES, Resource
from lib.values import UNKNOWN, as_list

DEFAULT_FORBIDDEN_AMI_TYPES = ["AL2_x86_64_GPU", "AL2_x86_64", "AL2_ARM_64"]


def _check_ami(resource: Resource, config: dict[str, Any]) -> Iterator[str]:
    forbidden = set(config["forbiddenAmiTypes"])
    if resource.type == EC2NODECLASS:
        terms = resource.get("spec", "amiSelectorTerms", default=[])
        for term in as_list(terms) if terms is not UNKNOWN else []:
            alias = term.get("alias") if isinstance(term, dict) else None
            if isinstance(alias, str) and alias.split("@", 1)[0].lower() == "al2":
                yield (
                    f"{resource.label} selects AMI alias '{alias}': Amazon Linux 2 EKS AMIs reached end of "
                    f"support on 2025-11-26. Use an 'al2023@<version>' or 'bottlerocket@<version>' alias."
                )
        aliased = terms is UNKNOWN or any(isinstance(t, dict) and "alias" in t for t in as_list(terms))
        family = resource.get("spec", "amiFamily")
        if not aliased and isinstance(family, str) and family.lower() == "al2":
            yield (
                f"{resource.label} has amiFamily AL2 with AMI selector terms but no alias: it launches Amazon Linux 2 "
                f"AMIs, which reached end of support on 2025-11-26. Use an 'al2023@<version>' or "
                f"'bottlerocket@<version>' alias (or amiFamily AL2023 with AL2023 AMIs)."
            )
        return
    ami_type = resource.get("amiType")
    if ami_type is None and resource.type == EKS_MANAGED_NODE_GROUP:
        ami_type = _pulumi_eks_ami_type(resource)
    if isinstance(ami_type, str) and ami_type in forbidden:
        replacement = "AL2023_x86_64_NVIDIA or BOTTLEROCKET_x86_64_NVIDIA" if "GPU" in ami_type else (
            "AL2023_ARM_64_STANDARD" if "ARM" in ami_type else "AL2023_x86_64_STANDARD"
        )
        yield (
            f"{resource.label} uses amiType {ami_type}"
            f"{'' if resource.get('amiType') else ' (pulumi-eks: operatingSystem AL2)'}: Amazon Linux 2 EKS AMIs reached end of support on "
            f"2025-11-26 and Kubernetes 1.32 is the last version with them. Use {replacement}."
        )


def _pulumi_eks_ami_type(resource: Resource) -> Any:
    """The AMI type pulumi-eks gives a ManagedNodeGroup without ``amiType``: from ``operatingSystem``
    (default AL2023) and ``gpu``; only the AL2 answers matter here (``None`` otherwise)."""
    system = resource.get("operatingSystem")
    if not isinstance(system, str) or system.upper() != "AL2":
        return None
    gpu = resource.get("gpu")
    if gpu is True:
        return "AL2_x86_64_GPU"
    return None if gpu is UNKNOWN else "AL2_x86_64"


POLICIES = [
    resource_policy(
        name="no-end-of-life-ami",
        description=(
            "Move node groups (amiType, or pulumi-eks operatingSystem AL2) and EC2NodeClasses (an al2 alias, or "
            "amiFamily AL2 without an alias) off Amazon Linux 2 AMIs to AL2023 or Bottlerocket."
        ),
        types=NODE_GROUP_TYPES | {EC2NODECLASS},
        check=_check_ami,
        enforcement=ADVISORY,
        params={
            "forbiddenAmiTypes": {
                "type": "array",
                "items": {"type": "string"},
                "default": DEFAULT_FORBIDDEN_AMI_TYPES,
                "description": "Managed node group AMI types that may not be used.",
            }
        },
    ),
]
