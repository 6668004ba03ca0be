"""A managed GPU group on reserved capacity, as the program registers it under the engine's mocks: its launch
template carries what EC2 requires (EKS user guide, "Create a managed node group with Capacity Blocks for
ML": ``InstanceMarketOptions.MarketType: capacity-block`` for a block, ``CapacityReservationSpecification.
CapacityReservationTarget.CapacityReservationId``), the group launches only in the reservation's zone, and its
tag records the reservation for the pack and the check's report.

The group is built by a small program (the same ``GpuNodePool`` and arguments the platform passes, plus the
reservation and the Network's zones) from the dev copy with a Capacity Block pool."""

from __future__ import annotations

import json
import textwrap

import pytest

from automation.offline.plan import record_plan
from components.capacity_check import parse_settings
from components.settings import config_strings
from tests.fixtures.reserved_copies import BLOCK_ID, ODCR, capacity_block_copy
from tests.support.config_changes import with_changes

PROGRAM = textwrap.dedent('''
    import json, os
    import pulumi_eks as eks
    from components.managed_pools.node_groups import GpuNodePool, GpuNodePoolArgs, LaunchSettings, Scaling
    from components.capacity_check import parse_settings
    from components.specs.gpu_software import Provider

    settings = parse_settings(json.loads(os.environ["PULUMI_CONFIG"]))
    cluster = eks.Cluster("cluster", skip_default_node_group=True)
    for pool in settings.gpu_pools:
        GpuNodePool(pool.name, GpuNodePoolArgs(
            cluster=cluster, cluster_name=settings.cluster_name, kubernetes_version=settings.kubernetes_version,
            subnet_ids=["subnet-a", "subnet-b", "subnet-c"], instance_types=pool.instance_types,
            capacity_type=pool.capacity_type,
            scaling=Scaling(pool.scaling.min_size, pool.scaling.desired_size, pool.scaling.max_size),
            launch=LaunchSettings(disk_size_gib=pool.disk_size_gib), accelerator=pool.accelerator,
            gpu_memory_mib=pool.gpu_memory_mib, gpus_per_node=pool.min_gpus_per_node, purpose=pool.purpose,
            reservation=pool.reservation, availability_zones=["us-east-1a", "us-east-1b", "us-east-1c"]))
''')


def _plan(config, tmp_path):
    program = tmp_path / "__main__.py"
    program.write_text(PROGRAM)
    return record_plan("dev", config_strings(config), region=parse_settings(config_strings(config)).region,
                       program=program)


def _resources(plan, pool: str):
    template = plan.named("aws:ec2/launchTemplate:LaunchTemplate", f"{pool}-lt")
    group = plan.named("eks:index:ManagedNodeGroup", pool)
    return template.inputs, group.inputs


def test_a_capacity_block_group_targets_the_block_in_its_zone(tmp_path):
    """EKS creates a Capacity Block group only with the block's instance type in the launch template and none
    on the group (EKS user guide, capacity-blocks-mng; terraform-aws-eks eks-managed-node-group ``main.tf``):
    the textbook group, which lists its type like any other, is refused by EKS."""
    plan = _plan(capacity_block_copy(), tmp_path)
    template, group = _resources(plan, "reserved-h100")
    assert template["instanceMarketOptions"] == {"marketType": "capacity-block"}
    assert template["capacityReservationSpecification"] == {
        "capacityReservationTarget": {"capacityReservationId": "cr-0123456789abcdef0"}}
    assert template["instanceType"] == "p5.48xlarge"
    assert group["capacityType"] == "CAPACITY_BLOCK" and "instanceTypes" not in group
    assert group["subnetIds"] == ["subnet-a"]  # us-east-1a, the block's zone
    assert group["tags"]["llm-platform.io/capacity-reservations"] == (
        "id=cr-0123456789abcdef0 type=capacity-block instanceType=p5.48xlarge count=1 zone=us-east-1a "
        "end=2026-12-20T11:30:00Z")
    # the Spot pool beside it keeps every subnet and no reservation options
    template, group = _resources(plan, "inference")
    assert "instanceMarketOptions" not in template and "capacityReservationSpecification" not in template
    assert "instanceType" not in template and group["instanceTypes"] == ["g5.2xlarge", "g5.4xlarge"]
    assert group["subnetIds"] == ["subnet-a", "subnet-b", "subnet-c"]
    assert "llm-platform.io/capacity-reservations" not in group["tags"]
    assert BLOCK_ID in json.dumps(plan.named("eks:index:ManagedNodeGroup", "reserved-h100").inputs)


def test_an_odcr_group_targets_the_reservation_without_the_market_option(tmp_path):
    config = with_changes(capacity_block_copy(), {"gpuPools__1": {
        "name": "reserved-a10g", "instanceTypes": ["g5.12xlarge"], "capacityType": "ON_DEMAND",
        "scaling": {"minSize": 0, "desiredSize": 0, "maxSize": 2}, "reservation": dict(ODCR)}})
    batch = next(i for i, t in enumerate(config["llm-platform:serving"]["tiers"]) if t["name"] == "batch")
    config = with_changes(config, {f"serving__tiers__{batch}__models__0__pool": "reserved-a10g"})
    template, group = _resources(_plan(config, tmp_path), "reserved-a10g")
    assert "instanceMarketOptions" not in template and "instanceType" not in template
    assert group["instanceTypes"] == ["g5.12xlarge"]  # an ODCR is targeted without moving the type
    assert template["capacityReservationSpecification"] == {
        "capacityReservationTarget": {"capacityReservationId": "cr-0fedcba9876543210"}}
    assert (group["capacityType"], group["subnetIds"]) == ("ON_DEMAND", ["subnet-b"])


def test_a_reservation_in_a_zone_without_a_subnet_stops_the_program(tmp_path):
    config = with_changes(capacity_block_copy(), {"gpuPools__1__reservation__availabilityZone": "us-east-1f"})
    with pytest.raises(Exception, match=r"reservation cr-0123456789abcdef0 is in us-east-1f, where the stack has no "
                                        r"subnet \(its zones: us-east-1a, us-east-1b, us-east-1c\)"):
        _plan(config, tmp_path)
