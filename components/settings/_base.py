"""Shared pieces of the settings models: strict base model, common checks."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from components import contract
from policies.capacity.instances import load_instances

NAMESPACE = "llm-platform"
#: gp3 root volume of every GPU node, managed or Karpenter: vLLM images are several GB and pull at the
#: volume's throughput, so GPU nodes get 500 MiB/s and 6000 IOPS over gp3's 125 MiB/s and 3000 baseline.
GPU_ROOT_VOLUME_IOPS = 6000
GPU_ROOT_VOLUME_THROUGHPUT_MIBPS = 500
#: What ``fastImagePull`` does and costs, on the field of both kinds of GPU pool (managed groups, EC2NodeClasses).
FAST_IMAGE_PULL_DESCRIPTION = (
    "nodeadm's FastImagePull feature gate (AL2023 EKS AMI v20250821 or later): containerd pulls through the SOCI "
    "snapshotter in parallel pull and unpack mode, downloading and unpacking an image's layers concurrently instead "
    "of one layer at a time; no SOCI index or image rebuild is needed. Default true. It shortens the image step of a "
    "cold start (docs/cold-start.md), not the weights, the load or the node's boot. nodeadm ignores it on instances "
    "under 4 vCPUs or 7 GiB of memory. Turning it on or off changes the {what}."
)
_REGION_RE = re.compile(r"^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d$")
#: Every AWS region the AWS provider knows (pulumi-aws 7.51.1's ``Region`` enum; a test compares the
#: two, so a provider bump that adds regions shows here). A well-formed name that is not a region
#: (``us-nowhere-9``) would otherwise fail only at the first AWS call of ``pulumi up``.
AWS_REGIONS = frozenset({
    "af-south-1", "ap-east-1", "ap-east-2", "ap-northeast-1", "ap-northeast-2", "ap-northeast-3", "ap-south-1",
    "ap-south-2", "ap-southeast-1", "ap-southeast-2", "ap-southeast-3", "ap-southeast-4", "ap-southeast-5",
    "ap-southeast-6", "ap-southeast-7", "ca-central-1", "ca-west-1", "cn-north-1", "cn-northwest-1",
    "eu-central-1", "eu-central-2", "eu-isoe-west-1", "eu-north-1", "eu-south-1", "eu-south-2", "eu-west-1",
    "eu-west-2", "eu-west-3", "eusc-de-east-1", "il-central-1", "me-central-1", "me-south-1", "mx-central-1",
    "sa-east-1", "us-east-1", "us-east-2", "us-gov-east-1", "us-gov-west-1", "us-iso-east-1", "us-iso-west-1",
    "us-isob-east-1", "us-isob-west-1", "us-isof-east-1", "us-isof-south-1", "us-west-1", "us-west-2",
})
#: Region prefix -> ARN partition (AWS's partition list: aws, aws-cn, aws-us-gov, aws-iso, aws-iso-b,
#: aws-iso-e, aws-iso-f, aws-eusc); longest prefix first.
_PARTITIONS = (
    ("us-isob-", "aws-iso-b"), ("us-isof-", "aws-iso-f"), ("us-iso-", "aws-iso"), ("eu-isoe-", "aws-iso-e"),
    ("us-gov-", "aws-us-gov"), ("cn-", "aws-cn"), ("eusc-", "aws-eusc"),
)


def check_region(region: str) -> str:
    """``region`` if it is an AWS region, else a ValueError that names the nearest ones."""
    if region not in AWS_REGIONS:
        near = [r for r in sorted(AWS_REGIONS) if r.split("-")[0] == region.split("-")[0]][:6]
        hint = f"; regions starting alike: {', '.join(near)}" if near else " such as us-east-1"
        raise ValueError(f"{region[:40]!r} is not an AWS region{hint}")
    return region


def partition_of(region: str) -> str:
    """The ARN partition of ``region`` (``aws`` for the commercial regions)."""
    return next((partition for prefix, partition in _PARTITIONS if region.startswith(prefix)), "aws")
_POOL_NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,30}[a-z0-9]$")
_LABEL_KEY_RE = re.compile(r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_LABEL_VALUE_RE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


def _numeric(annotation: Any) -> bool:
    """Whether a field's annotation is a number (``int``, ``float``, or one of them or ``None``)."""
    if annotation in (int, float):
        return True
    args = [a for a in getattr(annotation, "__args__", ()) if a is not type(None)]
    return bool(args) and all(a in (int, float) for a in args) and type(None) in getattr(annotation, "__args__", ())


class _Model(BaseModel):
    """Every settings model: camelCase keys, unknown keys refused, values frozen, no inf or NaN, and no
    boolean where a number goes (pydantic's lax mode reads ``true`` as 1; a number written as text,
    ``"900"``, is read as the number, as the policy pack's ``config_number`` reads it too)."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True, str_strip_whitespace=True,
        allow_inf_nan=False,
    )

    @field_validator("*", mode="before")
    @classmethod
    def _no_boolean_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, bool) and info.field_name is not None:
            field = cls.model_fields.get(info.field_name)
            if field is not None and _numeric(field.annotation):
                raise ValueError(f"{str(value).lower()} is a boolean; this setting is a number")
        return value


def _check_labels(labels: dict[str, str]) -> dict[str, str]:
    for key, value in labels.items():
        if key in contract.RESERVED_LABEL_KEYS:
            raise keyed(f"label {key!r} is set by the scheduling contract and cannot be overridden", key)
        if not _LABEL_KEY_RE.match(key):
            raise keyed("not a valid Kubernetes label key ([prefix/]name: up to 63 of A-Z a-z 0-9 - _ .)", key)
        if not _LABEL_VALUE_RE.match(value):
            raise keyed("not a valid Kubernetes label value (up to 63 of A-Z a-z 0-9 - _ ., alphanumeric at both "
                        "ends)", key)
    return labels


def _dns_name(name: str) -> str:
    if not _POOL_NAME_RE.match(name):
        raise ValueError(f"{name!r} must be 2-32 lowercase letters, digits or '-', starting with a letter")
    return name


def _check_known_types(types: list[str]) -> list[str]:
    catalog = load_instances()
    unknown = [t for t in types if catalog.get(t) is None]
    if unknown:
        raise ValueError(f"unknown instance type(s) {', '.join(unknown)}; allowed: {', '.join(catalog.names())}")
    if len(set(types)) != len(types):
        raise ValueError("instance types must not repeat")
    return types


def keyed(reason: str, *path: str | int) -> PydanticCustomError:
    """A cross-field error of a nested model, reported at ``path`` below the model (e.g.
    ``keyed("...", "nodePools", 1, "nodeClass")``) instead of at the model with its whole value."""
    return PydanticCustomError("keyed", "{reason}", {"reason": reason, "path": tuple(path)})


def repeated(values: list[Any]) -> list[Any]:
    """Values that occur more than once, in first-seen order."""
    seen: set[Any] = set()
    out: list[Any] = []
    for value in values:
        if value in seen and value not in out:
            out.append(value)
        seen.add(value)
    return out
