"""The settings and the pack take a number from the stack's configuration the same way.

The engine hands the pack ``PULUMI_CONFIG`` with object values as JSON text; a value quoted in the stack
file (``maxGpus: "16"``) arrives there as a JSON string, and the program's settings read it as the number
(pydantic's lax mode). The pack must read it too, or a stack the settings accept fails a policy as "not a
number". A boolean is a number to neither (``true`` is not 1).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator

import pytest

from automation.offline.pack.runner import PolicyPackRunner
from automation.stacks import read_stack_config
from components.capacity_check import parse_settings
from components.settings import SettingsError, config_strings
from tests.policies.builders import gpu_node_group, patch, system_node_group
from tests.policies.conftest import Pack, engine_config, one

CAP, BUDGET = "gpu-capacity-cap", "gpu-monthly-budget"


def stack(max_size: int) -> list[dict]:
    return [patch(gpu_node_group(), {"scalingConfig.maxSize": max_size}), system_node_group()]


def pack_with(budget) -> Iterator[Pack]:
    env = {"LLM_PLATFORM_POLICY_STRICT": "1", "PULUMI_CONFIG": engine_config({"llm-platform:gpuBudget": budget})}
    with PolicyPackRunner(env=env) as runner:
        pack = Pack(runner)
        pack.configure()
        yield pack


def settings_budget(budget):
    config = copy.deepcopy(read_stack_config("dev"))
    config["llm-platform:gpuBudget"] = budget
    return parse_settings(config_strings(config)).gpu_budget


@pytest.mark.parametrize("budget", [
    {"maxGpus": "64", "monthlyBudgetUsd": "100000"},
    {"maxGpus": " 64 ", "monthlyBudgetUsd": "100_000"},
    {"maxGpus": "64.0", "monthlyBudgetUsd": "100000.0"},
], ids=["quoted", "spaces-and-underscores", "whole-fractions"])
def test_quoted_numbers_mean_the_same_to_the_settings_and_the_pack(budget):
    """64 GPUs and $100,000 a month to both. The pack's group: g5.xlarge/g5.2xlarge, 1 GPU each, the dearer
    $1.212/h: 114 nodes x 1.212 x 730 h = $100,863/month."""
    parsed = settings_budget(budget)
    assert (parsed.max_gpus, parsed.monthly_budget_usd) == (64, 100000.0)
    for pack in pack_with(budget):
        one(pack.stack_messages(stack(65), CAP), "Worst-case GPU count is 65, above the cap of 64")
        assert pack.stack_messages(stack(64), CAP) == []
        one(pack.stack_messages(stack(114), BUDGET), "Worst-case GPU spend is $100,863/month",
            "above the budget of $100,000")


@pytest.mark.parametrize("budget, field", [
    ({"maxGpus": True, "monthlyBudgetUsd": 100000}, "maxGpus"),
    ({"maxGpus": 64, "monthlyBudgetUsd": False}, "monthlyBudgetUsd"),
    ({"maxGpus": "64.5", "monthlyBudgetUsd": 100000}, "maxGpus"),
], ids=["true-gpus", "false-dollars", "fractional-gpus"])
def test_what_the_settings_refuse_the_pack_refuses(budget, field):
    with pytest.raises(SettingsError) as raised:
        settings_budget(budget)
    assert [p.key for p in raised.value.problems] == [f"llm-platform:gpuBudget.{field}"]
    for pack in pack_with(budget):
        one(pack.stack_messages(stack(4), CAP), "cannot read the stack's configuration",
            f"llm-platform:gpuBudget.{field} must be a number >= 0")


@pytest.mark.parametrize("key, value", [
    ("streaming.concurrency", True), ("streaming.memoryLimitGib", False), ("replicas.min", False),
    ("gpusPerReplica", True), ("maxModelLen", True),
])
def test_a_boolean_is_not_a_number_in_any_serving_setting(key, value):
    config = copy.deepcopy(read_stack_config("dev"))
    model = config["llm-platform:serving"]["tiers"][0]["models"][0]
    *parents, leaf = key.split(".")
    node = model
    for part in parents:
        node = node.setdefault(part, {})
    node[leaf] = value
    with pytest.raises(SettingsError) as raised:
        parse_settings(config_strings(config))
    [problem] = raised.value.problems
    assert problem.key == f"llm-platform:serving.tiers[0].models[0].{key}"
    assert problem.reason == f"{str(value).lower()} is a boolean; this setting is a number"
