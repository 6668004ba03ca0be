"""Node images in support: no Amazon Linux 2 EKS AMIs, which reached end of support on 2025-11-26.

An out-of-support AMI gets no security fixes and no NVIDIA driver updates, and Kubernetes 1.32 is the
last version EKS builds AL2 images for. Managed node groups are judged by ``amiType``, EC2NodeClasses
by their ``alias`` AMI selector terms.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from lib.kit import ADVISORY, resource_policy
from lib.values import UNKNOWN, as_list
from lib.resources import EC2NODECLASS, NODE_GROUP_TYPES, Resource

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
        return
    ami_type = resource.get("amiType")
    if isinstance(ami_type, str) and ami_type in forbidden:
        replacement = "AL2023_x86_64_NVIDIA or BOTTLEROCKET_x86_64_NVIDIA" if "GPU" in ami_type else (
            "AL2023_ARM_64_STANDARD" if "ARM" in ami_type else "AL2023_x86_64_STANDARD"
        )
        yield (
            f"{resource.label} uses amiType {ami_type}: Amazon Linux 2 EKS AMIs reached end of support on "
            f"2025-11-26 and Kubernetes 1.32 is the last version with them. Use {replacement}."
        )


POLICIES = [
    resource_policy(
        name="no-end-of-life-ami",
        description="Move node groups and EC2NodeClasses off Amazon Linux 2 AMIs to AL2023 or Bottlerocket.",
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
