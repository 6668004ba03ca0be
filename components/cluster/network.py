"""Network: a VPC across the configured AZs with private node subnets and public edge subnets."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Literal

import pulumi
import pulumi_aws as aws

from components.tags import karpenter_discovery_tag

TYPE = "llm-platform:index:Network"


@dataclass(frozen=True)
class NetworkArgs:
    """Inputs of :class:`Network`.

    ``vpc_cidr`` is split into ``/prefix+3`` blocks: the first ``az_count`` are private node subnets
    (room for VPC CNI pod IPs), and the last block is cut into ``/prefix+6`` public subnets.
    ``nat_gateways`` is ``single`` (one NAT, cheaper, one AZ's failure cuts egress) or ``perAz``.
    """

    cluster_name: str
    vpc_cidr: str
    az_count: int
    nat_gateways: Literal["single", "perAz"]
    #: Extra routes of every private route table (``components.specs.hybrid_nodes.remote_routes``: the
    #: on-prem networks through a Transit Gateway or virtual private gateway); default none.
    remote_routes: list[dict[str, str]] = field(default_factory=list)
    tags: dict[str, str] = field(default_factory=dict)


def plan_subnets(vpc_cidr: str, az_count: int) -> tuple[list[str], list[str]]:
    """Private and public subnet CIDRs, one of each per AZ, for a /16-/20 VPC and 2-6 AZs."""
    vpc = ipaddress.IPv4Network(vpc_cidr)  # settings accept IPv4 VPC ranges only
    blocks = list(vpc.subnets(new_prefix=vpc.prefixlen + 3))
    private = [str(b) for b in blocks[:az_count]]
    public = [str(b) for b in list(blocks[-1].subnets(new_prefix=vpc.prefixlen + 6))[:az_count]]
    return private, public


def s3_gateway_service_name(region: str) -> str:
    """S3 gateway endpoint service, ``com.amazonaws.<region>.s3`` (the region comes from the provider,
    so the name follows the stack's region; the form in China regions is not verified here)."""
    return f"com.amazonaws.{region}.s3"


class Network(pulumi.ComponentResource):
    """VPC, subnets, internet and NAT gateways, routes, and an S3 gateway endpoint.

    The S3 gateway endpoint keeps model-weight downloads (tens of GB per cold start) off the NAT
    gateways and their per-GB charge; gateway endpoints themselves cost nothing. Private subnets carry
    ``kubernetes.io/role/internal-elb`` and ``karpenter.sh/discovery`` so load
    balancers and Karpenter find them by tag; public subnets carry ``kubernetes.io/role/elb``.
    """

    vpc_id: pulumi.Output[str]
    private_subnet_ids: pulumi.Output[list[str]]
    public_subnet_ids: pulumi.Output[list[str]]
    s3_endpoint_id: pulumi.Output[str]
    availability_zones: list[str]

    def __init__(self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(TYPE, name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        zones = aws.get_availability_zones(
            state="available", opts=pulumi.InvokeOptions(parent=self)
        ).names[: args.az_count]
        if len(zones) < args.az_count:
            raise pulumi.RunError(
                f"llm-platform:network.azCount is {args.az_count} but the region has only {len(zones)} available AZs"
            )
        private_cidrs, public_cidrs = plan_subnets(args.vpc_cidr, args.az_count)
        cluster_tag = {f"kubernetes.io/cluster/{args.cluster_name}": "shared"}

        vpc = aws.ec2.Vpc(
            f"{name}-vpc",
            cidr_block=args.vpc_cidr,
            enable_dns_hostnames=True,
            enable_dns_support=True,
            tags={**args.tags, "Name": f"{args.cluster_name}-vpc"},
            opts=child,
        )
        igw = aws.ec2.InternetGateway(
            f"{name}-igw", vpc_id=vpc.id, tags={**args.tags, "Name": f"{args.cluster_name}-igw"}, opts=child
        )
        public_rt = aws.ec2.RouteTable(
            f"{name}-public",
            vpc_id=vpc.id,
            routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", gateway_id=igw.id)],
            tags={**args.tags, "Name": f"{args.cluster_name}-public"},
            opts=child,
        )

        public_subnets, private_subnets, private_route_tables, nats = [], [], [], []
        for i, (zone, cidr) in enumerate(zip(zones, public_cidrs)):
            subnet = aws.ec2.Subnet(
                f"{name}-public-{zone}",
                vpc_id=vpc.id,
                cidr_block=cidr,
                availability_zone=zone,
                map_public_ip_on_launch=False,
                tags={**args.tags, **cluster_tag, "Name": f"{args.cluster_name}-public-{zone}", "kubernetes.io/role/elb": "1"},
                opts=child,
            )
            aws.ec2.RouteTableAssociation(
                f"{name}-public-{zone}", subnet_id=subnet.id, route_table_id=public_rt.id, opts=child
            )
            public_subnets.append(subnet)
            if args.nat_gateways == "perAz" or i == 0:
                eip = aws.ec2.Eip(
                    f"{name}-nat-{zone}", domain="vpc", tags={**args.tags, "Name": f"{args.cluster_name}-nat-{zone}"}, opts=child
                )
                nats.append(
                    aws.ec2.NatGateway(
                        f"{name}-nat-{zone}",
                        subnet_id=subnet.id,
                        allocation_id=eip.id,
                        tags={**args.tags, "Name": f"{args.cluster_name}-nat-{zone}"},
                        opts=pulumi.ResourceOptions(parent=self, depends_on=[igw]),
                    )
                )

        for i, (zone, cidr) in enumerate(zip(zones, private_cidrs)):
            nat = nats[i] if args.nat_gateways == "perAz" else nats[0]
            subnet = aws.ec2.Subnet(
                f"{name}-private-{zone}",
                vpc_id=vpc.id,
                cidr_block=cidr,
                availability_zone=zone,
                tags={
                    **args.tags,
                    **cluster_tag,
                    **karpenter_discovery_tag(args.cluster_name),
                    "Name": f"{args.cluster_name}-private-{zone}",
                    "kubernetes.io/role/internal-elb": "1",
                },
                opts=child,
            )
            route_table = aws.ec2.RouteTable(
                f"{name}-private-{zone}",
                vpc_id=vpc.id,
                routes=[
                    aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", nat_gateway_id=nat.id),
                    *(aws.ec2.RouteTableRouteArgs(
                        cidr_block=route["cidrBlock"], transit_gateway_id=route.get("transitGatewayId"),
                        gateway_id=route.get("gatewayId")) for route in args.remote_routes),
                ],
                tags={**args.tags, "Name": f"{args.cluster_name}-private-{zone}"},
                opts=child,
            )
            aws.ec2.RouteTableAssociation(
                f"{name}-private-{zone}", subnet_id=subnet.id, route_table_id=route_table.id, opts=child
            )
            private_subnets.append(subnet)
            private_route_tables.append(route_table)

        # S3 traffic from the private subnets goes through this gateway endpoint (a prefix-list route in
        # each private route table) instead of the NAT. S3's addresses stay public, so the model
        # fetcher's NetworkPolicy egress rule (HTTPS to public addresses, private ranges excepted)
        # still matches it: no policy change is needed for the endpoint.
        region = aws.get_region_output(opts=pulumi.InvokeOutputOptions(parent=self)).region
        s3_endpoint = aws.ec2.VpcEndpoint(
            f"{name}-s3",
            vpc_id=vpc.id,
            service_name=region.apply(s3_gateway_service_name),
            vpc_endpoint_type="Gateway",
            route_table_ids=[t.id for t in private_route_tables],
            tags={**args.tags, "Name": f"{args.cluster_name}-s3"},
            opts=child,
        )

        self.availability_zones = list(zones)
        self.vpc_id = vpc.id
        self.private_subnet_ids = pulumi.Output.all(*[s.id for s in private_subnets])
        self.public_subnet_ids = pulumi.Output.all(*[s.id for s in public_subnets])
        self.s3_endpoint_id = s3_endpoint.id
        self.register_outputs(
            {
                "vpc_id": self.vpc_id,
                "private_subnet_ids": self.private_subnet_ids,
                "public_subnet_ids": self.public_subnet_ids,
                "s3_endpoint_id": self.s3_endpoint_id,
                "availability_zones": self.availability_zones,
            }
        )
