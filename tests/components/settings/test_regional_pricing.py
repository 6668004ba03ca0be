"""The stack's GPU budget is priced in the stack's own region: the catalog's prices for that region,
never a us-east-1 price. A type a priced region does not sell on demand is a problem at ``region``; a
region with no prices at all leaves the budget unknown (the offline check says so, exit 8)."""

from __future__ import annotations

import pytest

from automation.stacks import read_stack_config
from components.capacity_check import parse_settings
from components.settings import SettingsError


def in_region(stack: str, region: str) -> dict:
    config = read_stack_config(stack)
    config["llm-platform:region"] = region
    return config


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_a_region_without_catalog_prices_is_accepted_with_its_budget_unknown(stack):
    """Nothing is priced in eu-west-1: the settings cannot judge gpuBudget there and do not pretend to
    (no us-east-1 price is borrowed); the offline check reports the budget as unknown and exits 8."""
    assert parse_settings(in_region(stack, "eu-west-1")).region == "eu-west-1"


def test_a_type_its_priced_region_does_not_sell_on_demand_is_refused_at_region():
    """us-east-1 is priced, but not p5e.48xlarge there (Capacity Blocks only): that is a fact, not a gap."""
    config = in_region("dev", "us-east-1")
    config["llm-platform:gpuPools"][0]["instanceTypes"] = ["p5e.48xlarge"]
    config["llm-platform:gpuPools"][0]["capacityType"] = "ON_DEMAND"
    with pytest.raises(SettingsError) as caught:
        parse_settings(config)
    problems = [p for p in caught.value.problems if p.key == "llm-platform:region"]
    assert [p.reason for p in problems] == [
        "no on-demand price for p5e.48xlarge in us-east-1 in policies/instance_catalog.json; run `python -m automation catalog refresh --region us-east-1` "
        "with AWS credentials, or choose a priced region or type"]


def test_the_shipped_region_is_priced():
    assert parse_settings(read_stack_config("dev")).region == "us-east-1"
