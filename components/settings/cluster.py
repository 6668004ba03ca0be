"""Cluster-level settings: network, API endpoint, hybrid nodes, GPU software."""

from __future__ import annotations

import ipaddress
import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from components import contract
from components.settings._base import _Model

_BREAK_GLASS_ARN_RE = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]+$")


class Endpoint(_Model):
    """API server access. The private endpoint is always on; public access is opt-in with CIDRs.
    ``break_glass_role_arn``: an IAM role with its own cluster-admin access entry, assumed only when
    the usual admins cannot reach the cluster (default none; prod sets one)."""

    public_access: bool = False
    public_access_cidrs: list[str] = Field(default_factory=list)
    break_glass_role_arn: str | None = None

    @field_validator("break_glass_role_arn")
    @classmethod
    def _break_glass(cls, arn: str | None) -> str | None:
        if arn is not None and not _BREAK_GLASS_ARN_RE.match(arn):
            raise ValueError(f"{arn!r} is not an IAM role ARN such as arn:aws:iam::123456789012:role/eks-break-glass")
        return arn

    @field_validator("public_access_cidrs")
    @classmethod
    def _cidrs(cls, cidrs: list[str]) -> list[str]:
        for cidr in cidrs:
            try:
                net = ipaddress.ip_network(cidr, strict=True)
            except ValueError as exc:
                raise ValueError(f"{cidr!r} is not an IPv4 CIDR such as 203.0.113.0/24 ({exc})") from None
            if net.version != 4:
                raise ValueError(f"{cidr!r} is not IPv4; EKS public access CIDRs are IPv4")
        return cidrs

    @model_validator(mode="after")
    def _cidrs_with_public(self) -> Endpoint:
        if self.public_access and not self.public_access_cidrs:
            raise ValueError("publicAccess is true but publicAccessCidrs is empty; list the CIDRs allowed in")
        if not self.public_access and self.public_access_cidrs:
            raise ValueError("publicAccessCidrs is set but publicAccess is false; remove the CIDRs or enable access")
        return self

    @property
    def open_to_world(self) -> bool:
        return self.public_access and "0.0.0.0/0" in self.public_access_cidrs


class UpgradePolicy(_Model):
    """What EKS does when the cluster's Kubernetes minor leaves standard support (EKS user guide,
    "Cluster upgrade policy"). ``STANDARD``: EKS upgrades the control plane to the next minor at the
    end of standard support. ``EXTENDED``: the cluster stays on its minor, and every cluster hour
    bills extended support (6x the standard price) with no notice. EKS's own default is EXTENDED."""

    support_type: Literal["STANDARD", "EXTENDED"] = Field(
        default="STANDARD",
        description="STANDARD (default in every environment: no extended-support bill; the settings already refuse "
        "a minor past standard support) or EXTENDED (stay on the minor, billed per cluster hour).",
    )


class Network(_Model):
    """VPC layout: private node subnets (/prefix+3) and public subnets carved from the last block."""

    vpc_cidr: str = "10.0.0.0/16"
    az_count: int = Field(default=3, ge=2, le=6)
    nat_gateways: Literal["single", "perAz"] = "single"

    @field_validator("vpc_cidr")
    @classmethod
    def _vpc_cidr(cls, cidr: str) -> str:
        try:
            net = ipaddress.ip_network(cidr, strict=True)
        except ValueError as exc:
            raise ValueError(f"{cidr!r} is not a network CIDR such as 10.0.0.0/16 ({exc})") from None
        if net.version != 4 or not net.is_private or not 16 <= net.prefixlen <= 20:
            raise ValueError(f"{cidr!r} must be a private IPv4 range with a prefix from /16 to /20")
        return cidr


#: Ranges EKS accepts for remote node and pod networks (RFC 1918 and CGNAT).
HYBRID_ALLOWED_RANGES = tuple(
    ipaddress.IPv4Network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10")
)


def service_cidr(vpc_cidr: str) -> str:
    """The Service range EKS picks when none is given: 172.20.0.0/16 for a VPC in 10.0.0.0/8,
    10.100.0.0/16 otherwise."""
    in_ten = ipaddress.IPv4Network(vpc_cidr).subnet_of(ipaddress.IPv4Network("10.0.0.0/8"))
    return "172.20.0.0/16" if in_ten else "10.100.0.0/16"


class HybridNodes(_Model):
    """EKS Hybrid Nodes: on-prem GPU servers joined to the cluster.

    Refused for now (``enabled: true`` is an error): a working setup also needs cluster security
    group rules and VPC routes to the remote networks and a CNI for the on-prem nodes (Cilium or
    Calico per the EKS docs), which this program does not create yet. The networks are still
    validated (private IPv4, no overlap with each other, the VPC or the Service range).
    """

    enabled: bool = False
    remote_node_networks: list[str] = Field(default_factory=list)
    remote_pod_networks: list[str] = Field(default_factory=list)

    @field_validator("remote_node_networks", "remote_pod_networks")
    @classmethod
    def _cidrs(cls, cidrs: list[str]) -> list[str]:
        for cidr in cidrs:
            try:
                net = ipaddress.ip_network(cidr, strict=True)
            except ValueError as exc:
                raise ValueError(f"{cidr!r} is not a CIDR ({exc})") from None
            if not isinstance(net, ipaddress.IPv4Network) or not any(net.subnet_of(r) for r in HYBRID_ALLOWED_RANGES):
                raise ValueError(
                    f"{cidr!r} is not a private IPv4 range; EKS accepts 10.0.0.0/8, 172.16.0.0/12, "
                    "192.168.0.0/16 or 100.64.0.0/10"
                )
        return cidrs

    @model_validator(mode="after")
    def _networks(self) -> HybridNodes:
        nets = [ipaddress.ip_network(c) for c in self.remote_node_networks + self.remote_pod_networks]
        for i, a in enumerate(nets):
            for b in nets[i + 1:]:
                if a.overlaps(b):
                    raise ValueError(f"remote networks {a} and {b} overlap; node and pod networks must be disjoint")
        if self.enabled:
            raise ValueError(
                "enabled: true is not supported yet: hybrid nodes also need cluster security group rules and "
                "routes for the remote networks and a CNI (Cilium or Calico) on the on-prem nodes, which this "
                "program does not create; set hybridNodes.enabled to false"
            )
        return self


class GpuSoftware(_Model):
    """What makes GPUs schedulable: ``device-plugin`` (NVIDIA device plugin, for AMIs that ship the
    driver), ``gpu-operator`` (NVIDIA GPU Operator with per-node-type operands), or ``none``."""

    provider: contract.GpuSoftwareProvider = contract.DEVICE_PLUGIN
    dcgm_exporter: bool = True
