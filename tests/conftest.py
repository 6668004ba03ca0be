"""Shared fixtures: the real program recorded under mocks, per stack, once per session."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from automation.offline.plan import Plan, PlannedResource, record_plan
from automation.stacks import read_stack_config
from components.settings import config_strings, parse_settings


#: For variants that add GPU pools to test something else; the gpuBudget rule has its own tests.
ROOMY_GPU_BUDGET = {"maxGpus": 1000, "monthlyBudgetUsd": 10_000_000}


def plan_with(stack: str, **overrides: Any) -> Plan:
    """Record the plan of ``stack`` with ``llm-platform:<key>`` values replaced by ``overrides``."""
    config = copy.deepcopy(read_stack_config(stack))
    config.update({f"llm-platform:{key}": value for key, value in overrides.items()})
    settings = parse_settings(config)
    return record_plan(stack, config_strings(config), region=settings.region)


@pytest.fixture(scope="session")
def dev_plan() -> Plan:
    return plan_with("dev")


@pytest.fixture(scope="session")
def prod_plan() -> Plan:
    return plan_with("prod")


@pytest.fixture(scope="session", params=["dev", "prod"])
def stack_plan(request, dev_plan, prod_plan) -> Plan:
    return {"dev": dev_plan, "prod": prod_plan}[request.param]


@pytest.fixture
def stack_config() -> Callable[[str], dict[str, Any]]:
    return lambda stack: copy.deepcopy(read_stack_config(stack))


def gpu_node_groups(plan: Plan) -> list[PlannedResource]:
    return [r for r in plan.of_type("eks:index:ManagedNodeGroup") if r.parent.split("::")[2].endswith("GpuNodePool")]


def system_node_group(plan: Plan) -> PlannedResource:
    (group,) = [
        r for r in plan.of_type("eks:index:ManagedNodeGroup") if r.parent.split("::")[2].endswith("SystemNodePool")
    ]
    return group


def child_of_type(plan: Plan, parent_urn: str, type_: str) -> PlannedResource:
    (child,) = [r for r in plan.children_of(parent_urn) if r.type == type_]
    return child
