"""Cluster-level settings: network, API endpoint, hybrid nodes, GPU software."""

from __future__ import annotations

import ipaddress
import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from components import contract
from components.settings._base import _check_labels, _dns_name, _Model, keyed, repeated

_BREAK_GLASS_ARN_RE = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]+$")


class Endpoint(_Model):
    """API server access. The private endpoint is always on; public access is opt-in with CIDRs."""

    public_access: bool = Field(
        default=False,
        description="Whether the Kubernetes API is also reachable from the internet, from publicAccessCidrs only "
        "(default false: private endpoint only).",
    )
    public_access_cidrs: list[str] = Field(
        default_factory=list,
        description="IPv4 CIDRs allowed to reach the public endpoint; required with publicAccess, refused without "
        "it (default none).",
    )
    break_glass_role_arn: str | None = Field(
        default=None,
        description="An IAM role ARN with its own cluster-admin access entry, assumed only when the usual admins "
        "cannot reach the cluster (default none; prod sets one).",
    )

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

    vpc_cidr: str = Field(
        default="10.0.0.0/16",
        description="The VPC's IPv4 range: private, with a prefix from /16 to /20.",
    )
    az_count: int = Field(
        default=3, ge=2, le=6,
        description="Availability Zones the subnets and node groups span. Unit: zones.",
    )
    nat_gateways: Literal["single", "perAz"] = Field(
        default="single",
        description="`single`: one NAT gateway for every zone (cheaper; egress stops with its zone). `perAz`: one "
        "per zone, so each zone keeps its own egress.",
    )

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


_TGW_RE = re.compile(r"^tgw-[0-9a-f]{8,17}$")
_VGW_RE = re.compile(r"^vgw-[0-9a-f]{8,17}$")
_ACCELERATOR_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")


class HybridConnectivity(_Model):
    """How the VPC reaches the on-prem networks: exactly one gateway. The private route tables get a
    route to every remote node and pod network through it. No default: hybrid nodes need one."""

    transit_gateway_id: str | None = Field(
        default=None,
        description="A Transit Gateway attached to this VPC (tgw-...); exactly one of this or "
        "virtualPrivateGatewayId.",
    )
    virtual_private_gateway_id: str | None = Field(
        default=None,
        description="A virtual private gateway attached to this VPC (vgw-..., a Site-to-Site VPN or Direct Connect "
        "gateway); exactly one of this or transitGatewayId.",
    )

    @field_validator("transit_gateway_id")
    @classmethod
    def _tgw(cls, value: str | None) -> str | None:
        if value is not None and not _TGW_RE.match(value):
            raise ValueError(f"{value[:40]!r} is not a Transit Gateway id such as tgw-0123456789abcdef0")
        return value

    @field_validator("virtual_private_gateway_id")
    @classmethod
    def _vgw(cls, value: str | None) -> str | None:
        if value is not None and not _VGW_RE.match(value):
            raise ValueError(f"{value[:40]!r} is not a virtual private gateway id such as vgw-0123456789abcdef0")
        return value

    @model_validator(mode="after")
    def _one(self) -> HybridConnectivity:
        if (self.transit_gateway_id is None) == (self.virtual_private_gateway_id is None):
            raise ValueError("set exactly one of transitGatewayId or virtualPrivateGatewayId")
        return self

    @property
    def gateway_id(self) -> str:
        return self.transit_gateway_id or self.virtual_private_gateway_id or ""


class HybridPool(_Model):
    """A set of identical on-prem GPU servers joined as hybrid nodes: fixed capacity (no autoscaler
    adds any), ``nodes`` servers of ``gpusPerNode`` GPUs of ``gpuMemoryGib`` GiB each."""

    name: str = Field(
        description="The pool label models select (pool); unique across every GPU pool.",
    )
    purpose: contract.NodePoolPurpose = Field(
        default=contract.GPU_INFERENCE_PURPOSE,
        description="What the pool runs: inference or training workloads.",
    )
    nodes: int = Field(ge=1, le=1000, description="How many servers the pool has. Unit: nodes.")
    gpus_per_node: int = Field(ge=1, le=16, description="GPUs in each server. Unit: GPUs.")
    accelerator: str = Field(
        description="The GPU model as the pool's accelerator label carries it, such as nvidia-l40s.",
    )
    gpu_memory_gib: int = Field(ge=1, le=1024, description="Memory of one GPU. Unit: GiB.")
    cpu: int = Field(
        default=32, ge=2, le=1024,
        description="vCPUs one server offers the kubelet before its reserves; the capacity check fits pods against "
        "them. Unit: vCPUs.",
    )
    memory_gib: int = Field(
        default=256, ge=8, le=16384,
        description="Memory one server offers the kubelet before its reserves; the capacity check fits pods against "
        "it. Unit: GiB.",
    )
    max_pods: int = Field(default=110, ge=10, le=1000, description="Most pods per server (the kubelet's default). "
                          "Unit: pods.")
    network_gbps: int = Field(
        default=10, ge=1, le=800,
        description="The server's link for image and weight downloads, which the cold-start prediction reads. "
        "Unit: Gbit/s.",
    )
    cost_per_gpu_hour_usd: float | None = Field(
        default=None, ge=0, le=1000,
        description="An internal chargeback rate, shown beside cloud costs and pricing the pool's GPUs in cost per "
        "token (docs/cost-per-token.md); it never enters the cloud GPU budget (the servers are already paid for). "
        "Default unset: the pool's GPUs stay unpriced. Unit: USD per GPU-hour.",
    )
    labels: dict[str, str] = Field(
        default_factory=dict,
        description="Extra Kubernetes labels on the pool's nodes; the scheduling contract's keys are reserved "
        "(default none).",
    )

    _name = field_validator("name")(lambda v: _dns_name(v))
    _labels = field_validator("labels")(_check_labels)

    @field_validator("accelerator")
    @classmethod
    def _accelerator(cls, value: str) -> str:
        if not _ACCELERATOR_RE.match(value):
            raise ValueError(f"{value[:70]!r} is not a label value such as nvidia-l40s (lowercase letters, digits, "
                             "'-', up to 63)")
        return value

    @property
    def gpu_memory_mib(self) -> int:
        return self.gpu_memory_gib * 1024


class HybridNodes(_Model):
    """EKS Hybrid Nodes: on-prem GPU servers joined to the cluster (docs/hybrid-nodes.md)."""

    enabled: bool = Field(default=False, description="Whether on-prem servers join the cluster (default false).")
    remote_node_networks: list[str] = Field(
        default_factory=list,
        description="The on-prem node CIDRs: private IPv4, disjoint, outside the VPC and the Service range; "
        "required when enabled.",
    )
    remote_pod_networks: list[str] = Field(
        default_factory=list,
        description="The on-prem pod CIDRs, same rules as remoteNodeNetworks; required when enabled: Cilium's "
        "cluster-pool IPAM hands out pod addresses from them, and webhooks on hybrid nodes are reached through them.",
    )
    connectivity: HybridConnectivity | None = Field(
        default=None,
        description="The gateway the VPC routes the remote networks through; required when enabled.",
    )
    pools: list[HybridPool] = Field(
        default_factory=list, max_length=10,
        description="The on-prem servers, each set a fixed-capacity GPU pool; required when enabled.",
    )

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
        return self

    @model_validator(mode="after")
    def _what_enabled_needs(self) -> HybridNodes:
        if not self.enabled:
            return self
        if self.connectivity is None:
            raise keyed("required when hybridNodes.enabled is true: the VPC reaches the on-prem networks through "
                        "a transitGatewayId (tgw-...) or a virtualPrivateGatewayId (vgw-...)", "connectivity")
        for field_name, cidrs in (("remoteNodeNetworks", self.remote_node_networks),
                                  ("remotePodNetworks", self.remote_pod_networks)):
            if not cidrs:
                raise keyed("required when hybridNodes.enabled is true: list the on-prem CIDRs (e.g. "
                            "192.168.0.0/20)", field_name)
        if not self.pools:
            raise keyed("required when hybridNodes.enabled is true: describe the on-prem GPU servers (name, nodes, "
                        "gpusPerNode, accelerator, gpuMemoryGib)", "pools")
        names = [p.name for p in self.pools]
        for name in repeated(names):
            raise keyed(f"pool name {name!r} is repeated; pool names must be unique", "pools",
                        len(names) - 1 - names[::-1].index(name), "name")
        return self

    @property
    def active_pools(self) -> list[HybridPool]:
        """The pools that join the cluster: none while hybrid nodes are off."""
        return list(self.pools) if self.enabled else []


class GpuSoftware(_Model):
    """What makes GPUs schedulable on the nodes, and whether their metrics are exported."""

    provider: contract.GpuSoftwareProvider = Field(
        default=contract.DEVICE_PLUGIN,
        description="`device-plugin`: the NVIDIA device plugin, for AMIs that ship the driver. `gpu-operator`: the "
        "NVIDIA GPU Operator with per-node-type operands (required with hybrid nodes). `none`: nothing installed.",
    )
    dcgm_exporter: bool = Field(
        default=True,
        description="Whether the DCGM exporter publishes GPU metrics to Prometheus (default true).",
    )
