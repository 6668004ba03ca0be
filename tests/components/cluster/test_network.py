"""Network: subnets per AZ with discovery tags, NAT per environment."""

from __future__ import annotations

import pytest

from components.cluster.network import plan_subnets
from tests.conftest import plan_with


def subnets(plan, tier):
    return sorted(
        (r for r in plan.of_type("aws:ec2/subnet:Subnet") if f"-{tier}-" in r.name), key=lambda r: r.name
    )


def test_subnet_plan_splits_vpc():
    private, public = plan_subnets("10.40.0.0/16", 3)
    assert private == ["10.40.0.0/19", "10.40.32.0/19", "10.40.64.0/19"]
    assert public == ["10.40.224.0/22", "10.40.228.0/22", "10.40.232.0/22"]


@pytest.mark.parametrize("cidr, azs", [("10.0.0.0/16", 6), ("10.9.0.0/20", 2)])
def test_subnet_plan_never_overlaps(cidr, azs):
    import ipaddress

    nets = [ipaddress.ip_network(c) for c in sum(plan_subnets(cidr, azs), [])]
    assert len(nets) == 2 * azs
    assert all(not a.overlaps(b) for i, a in enumerate(nets) for b in nets[i + 1 :])


def test_private_subnets_are_tagged_for_discovery(dev_plan):
    private = subnets(dev_plan, "private")
    assert [s.inputs["availabilityZone"] for s in private] == ["us-east-1a", "us-east-1b", "us-east-1c"]
    for subnet in private:
        tags = subnet.inputs["tags"]
        assert tags["kubernetes.io/role/internal-elb"] == "1", subnet.urn
        assert tags["karpenter.sh/discovery"] == "llm-platform-dev", subnet.urn
        assert tags["kubernetes.io/cluster/llm-platform-dev"] == "shared", subnet.urn
        assert "mapPublicIpOnLaunch" not in subnet.inputs or not subnet.inputs["mapPublicIpOnLaunch"]


def test_public_subnets_are_for_internet_load_balancers(dev_plan):
    for subnet in subnets(dev_plan, "public"):
        assert subnet.inputs["tags"]["kubernetes.io/role/elb"] == "1", subnet.urn
        assert "karpenter.sh/discovery" not in subnet.inputs["tags"], subnet.urn
        assert subnet.inputs["mapPublicIpOnLaunch"] is False, subnet.urn


def test_one_nat_in_dev_one_per_az_in_prod(dev_plan, prod_plan):
    assert len(dev_plan.of_type("aws:ec2/natGateway:NatGateway")) == 1
    assert len(prod_plan.of_type("aws:ec2/natGateway:NatGateway")) == 3


def test_private_routes_go_through_nat(prod_plan):
    nat_ids = set()
    for table in prod_plan.of_type("aws:ec2/routeTable:RouteTable"):
        (route,) = table.inputs["routes"]
        assert route["cidrBlock"] == "0.0.0.0/0"
        if "-private-" in table.name:
            nat_ids.add(route["natGatewayId"])
        else:
            assert route["gatewayId"].startswith("igw-"), table.urn
    assert len(nat_ids) == 3


def test_az_count_follows_settings():
    plan = plan_with("dev", network={"vpcCidr": "10.40.0.0/16", "azCount": 2, "natGateways": "single"})
    assert len(subnets(plan, "private")) == len(subnets(plan, "public")) == 2


def s3_endpoint(plan):
    (endpoint,) = plan.of_type("aws:ec2/vpcEndpoint:VpcEndpoint")
    return endpoint


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_s3_gateway_endpoint_serves_every_private_route_table(stack, dev_plan, prod_plan):
    """Weights pulled from S3 take the gateway endpoint, not the NAT (per-GB charge): the endpoint's
    prefix-list route must be in each private subnet's route table, and in no public one."""
    plan = {"dev": dev_plan, "prod": prod_plan}[stack]
    endpoint = s3_endpoint(plan)
    assert endpoint.inputs["vpcEndpointType"] == "Gateway"
    assert endpoint.inputs["serviceName"] == "com.amazonaws.us-east-1.s3"
    (vpc,) = plan.of_type("aws:ec2/vpc:Vpc")
    assert endpoint.inputs["vpcId"].startswith("vpc-") and endpoint.parent == vpc.parent
    associations = plan.of_type("aws:ec2/routeTableAssociation:RouteTableAssociation")
    private_tables = {a.inputs["routeTableId"] for a in associations if "-private-" in a.name}
    public_tables = {a.inputs["routeTableId"] for a in associations if "-public-" in a.name}
    assert len(private_tables) == len(subnets(plan, "private")) == 3
    assert sorted(endpoint.inputs["routeTableIds"]) == sorted(private_tables)
    assert not public_tables & set(endpoint.inputs["routeTableIds"])


def test_s3_gateway_endpoint_follows_the_region():
    # without gpuBudget: the catalog ships no eu-west-1 prices, and a budget there is refused
    # (tests/components/settings/test_regional_pricing.py)
    from automation.offline.plan import record_plan
    from automation.stacks import read_stack_config
    from components.settings import config_strings

    config = {k: v for k, v in read_stack_config("dev").items() if k != "llm-platform:gpuBudget"}
    config["llm-platform:region"] = "eu-west-1"
    plan = record_plan("dev", config_strings(config), region="eu-west-1")
    assert s3_endpoint(plan).inputs["serviceName"] == "com.amazonaws.eu-west-1.s3"
    assert len(s3_endpoint(plan).inputs["routeTableIds"]) == 3
