"""Shared fixtures: the real program recorded under mocks, per stack, once per session."""

from __future__ import annotations

import copy
import io
import json
from collections.abc import Callable
from contextlib import redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from automation.offline.plan import Plan, PlannedResource, record_plan
from automation.stacks import read_stack_config
from components.capacity_check import parse_settings
from components.settings import config_strings

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


@dataclass(frozen=True)
class RecordedCheck:
    """One offline check of a stack, run once per session and printed both ways the CLI prints it."""

    stack: str
    out: Path
    code: int
    text: str
    json: dict[str, Any]


def _recorded_check(stack: str, tmp_path_factory: pytest.TempPathFactory) -> RecordedCheck:
    from automation.cli import print_check
    from automation.offline.check import run_check

    out = tmp_path_factory.mktemp(f"check-{stack}")
    result = run_check(stack, out)
    text, as_json = io.StringIO(), io.StringIO()
    with redirect_stdout(text):
        code = print_check(result, "text")
    with redirect_stdout(as_json):
        print_check(result, "json")
    return RecordedCheck(stack, out, code, text.getvalue(), json.loads(as_json.getvalue()))


@pytest.fixture(scope="session")
def dev_check(tmp_path_factory) -> RecordedCheck:
    """``python -m automation check --stack dev`` as the CLI runs it (same function), in this process."""
    return _recorded_check("dev", tmp_path_factory)


@pytest.fixture(scope="session")
def prod_check(tmp_path_factory) -> RecordedCheck:
    return _recorded_check("prod", tmp_path_factory)


@pytest.fixture(scope="session", params=["dev", "prod"])
def stack_check(request) -> RecordedCheck:
    return request.getfixturevalue(f"{request.param}_check")


@pytest.fixture
def upstream_crds() -> None:
    """The upstream CRDs in ../shared/schemas/crds (skip without them; fail in CI)."""
    from tests.support import crd_schema

    crd_schema.require()


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
