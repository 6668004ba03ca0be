"""The stack's GPU budget is priced in the stack's own region: the catalog's prices for that region,
and a type it has no price for there is a problem at ``region``, never a us-east-1 price."""

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
def test_a_region_without_catalog_prices_is_refused_at_region(stack):
    with pytest.raises(SettingsError) as caught:
        parse_settings(in_region(stack, "eu-west-1"))
    (problem,) = caught.value.problems
    assert problem.key == "llm-platform:region"
    assert "in eu-west-1 in policies/instance_catalog.json" in problem.reason
    assert "python -m automation catalog refresh --region eu-west-1" in problem.reason
    assert "us-east-1" not in problem.reason


def test_the_shipped_region_is_priced():
    assert parse_settings(read_stack_config("dev")).region == "us-east-1"
