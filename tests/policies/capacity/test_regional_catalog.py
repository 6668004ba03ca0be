"""The shipped catalog, per region: facts everywhere, prices only where sourced (docs/catalog.md).

Literal prices are the AWS Price List's as Karpenter generated them on 2026-07-20
(aws/karpenter-provider-aws pkg/providers/pricing/zz_generated.pricing_aws*.go)."""

from __future__ import annotations

import pytest

from policies.capacity.cost import node_group_worst_case, nodepool_worst_case, per_gpu_hourly_usd
from policies.capacity.instances import UnpricedInstanceError, hourly_price, load_instances


def test_every_current_nvidia_family_is_catalogued():
    families = {i.family for i in load_instances().gpu_types()}
    assert {"g4dn", "g5", "g6", "gr6", "g6e", "g7e", "p4d", "p4de", "p5", "p5e", "p5en", "p6-b200",
            "p6-b300"} <= families


# Karpenter instance-types reference (its labels from DescribeInstanceTypes) and eks-ami instance-info.jsonl.
@pytest.mark.parametrize("name, gpus, gpu, gpu_mib, vcpu, max_pods", [
    ("p5en.48xlarge", 8, "h200", 144384, 192, 198),
    ("p6-b200.48xlarge", 8, "b200", 183359, 192, 198),  # DescribeInstanceTypes: 183359 MiB, not 180 GiB
    ("g6e.xlarge", 1, "l40s", 45776, 4, 58),
    ("gr6.4xlarge", 1, "l4", 22888, 16, 234),
])
def test_facts_of_types_the_sample_refused(name, gpus, gpu, gpu_mib, vcpu, max_pods):
    instance = load_instances(region="eu-west-1").instances[name]  # facts do not depend on prices
    assert (instance.gpus, instance.gpu_name, instance.gpu_memory_mib, instance.vcpu, instance.max_pods) == \
        (gpus, gpu, gpu_mib, vcpu, max_pods)


@pytest.mark.parametrize("name, region, usd", [
    ("p5en.48xlarge", "us-east-1", 63.296),
    ("p6-b200.48xlarge", "us-east-1", 113.9328),
    ("g5.xlarge", "us-east-1", 1.006),
    ("g6.xlarge", "us-gov-west-1", 1.0144),
    ("p5.48xlarge", "us-gov-west-1", 66.048),
])
def test_prices_are_the_regions_own(name, region, usd):
    assert hourly_price(name, region) == usd


def test_a_region_without_prices_refuses_rather_than_borrowing_us_east_1():
    ireland = load_instances(region="eu-west-1")
    g5 = ireland.instances["g5.xlarge"]
    assert g5.hourly_usd is None and g5.on_demand_offered is None
    with pytest.raises(UnpricedInstanceError) as raised:
        node_group_worst_case("ng", 3, [g5])
    assert "g5.xlarge in eu-west-1" in str(raised.value)
    assert "python -m automation catalog refresh --region eu-west-1" in str(raised.value)
    with pytest.raises(UnpricedInstanceError):  # a Karpenter pool cannot drop what nothing is known of
        nodepool_worst_case("np", [g5, ireland.instances["g5.2xlarge"]], static_nodes=None, gpu_limit=4, node_limit=None)
    with pytest.raises(UnpricedInstanceError, match="eu-west-1"):
        hourly_price("g5.xlarge", "eu-west-1")


def test_a_type_its_region_does_not_sell_on_demand_is_not_launched_by_karpenter():
    """Textbook: any admitted type may be launched, so p5e must be priced (or refused). Karpenter marks
    an on-demand offering without a price unavailable, so the pool costs what p5 costs."""
    virginia = load_instances(region="us-east-1")
    p5, p5e = virginia.instances["p5.48xlarge"], virginia.instances["p5e.48xlarge"]
    assert p5e.hourly_usd is None and p5e.on_demand_offered is False
    worst = nodepool_worst_case("np", [p5, p5e], static_nodes=None, gpu_limit=16, node_limit=None)
    assert (worst.gpus, worst.hourly_usd) == (16, pytest.approx(2 * 55.04))
    assert per_gpu_hourly_usd([p5, p5e]) == pytest.approx(55.04 / 8)
    with pytest.raises(UnpricedInstanceError, match="p5e.48xlarge in us-east-1"):
        node_group_worst_case("ng", 1, [p5e])  # a node group names its type: no silent drop


def test_the_default_region_keeps_the_sample_prices():
    catalog = load_instances()
    assert catalog.region == "us-east-1"
    assert [catalog.instances[n].hourly_usd for n in ("g5.4xlarge", "g5.48xlarge", "p4d.24xlarge", "p5.48xlarge")] == \
        [1.624, 16.288, 21.957642, 55.04]
