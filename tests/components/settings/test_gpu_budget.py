"""gpuBudget: the stack's GPU ceilings, checked against its own worst case and repeated by the pack config."""

from __future__ import annotations

import copy
import json

import pytest

from automation.offline.plan import ROOT
from automation.offline.report import summarize
from automation.stacks import read_stack_config
from components.capacity_check import CheckedStack, parse_settings
from components.settings import SettingsError, pack_config_disagreements
from policies.capacity.table import stack_worst_case

#: Today's pack values (policies/config/<stack>.json), which the stack files repeat.
SHIPPED = {"dev": {"maxGpus": 16, "monthlyBudgetUsd": 25000}, "prod": {"maxGpus": 64, "monthlyBudgetUsd": 150000}}


def _with_budget(stack: str, **budget: float) -> dict:
    config = copy.deepcopy(read_stack_config(stack))
    config["llm-platform:gpuBudget"] = {**config["llm-platform:gpuBudget"], **budget}
    return config


def _pack_config(stack: str) -> dict:
    return json.loads((ROOT / "policies" / "config" / f"{stack}.json").read_text())


@pytest.mark.parametrize("stack", sorted(SHIPPED))
def test_shipped_stacks_set_the_budget_their_pack_config_enforces(stack):
    settings = parse_settings(read_stack_config(stack))
    assert settings.gpu_budget is not None and settings.gpu_budget.by_key() == SHIPPED[stack]
    assert pack_config_disagreements(settings.gpu_budget, ROOT / "policies" / "config" / f"{stack}.json") == []


def test_a_pack_config_that_overrides_the_budget_with_another_value_is_named_by_key():
    settings = parse_settings(read_stack_config("dev"))
    pack = _pack_config("dev")
    assert "maxGpus" not in pack["gpu-capacity-cap"], "the pack reads the stack's gpuBudget; no copy"
    assert pack_config_disagreements(settings.gpu_budget, pack) == []
    pack["gpu-capacity-cap"]["maxGpus"] = 20
    (line,) = pack_config_disagreements(settings.gpu_budget, pack)
    assert line.startswith("llm-platform:gpuBudget.maxGpus is 16 but the policy config's gpu-capacity-cap.maxGpus "
                           "sets 20; drop the override")
    pack["gpu-capacity-cap"]["maxGpus"] = 16
    pack["gpu-monthly-budget"]["monthlyBudgetUsd"] = 25000
    assert pack_config_disagreements(settings.gpu_budget, pack) == [], "an explicit equal value agrees"
    pack["gpu-capacity-cap"]["maxGpus"] = "32"
    assert pack_config_disagreements(settings.gpu_budget, pack) == [], "a wrong type is the pack's to name"


def test_without_a_budget_nothing_is_compared():
    config = copy.deepcopy(read_stack_config("dev"))
    del config["llm-platform:gpuBudget"]
    settings = parse_settings(config)
    assert settings.gpu_budget is None and pack_config_disagreements(None, {}) == []


def test_a_stack_whose_worst_case_exceeds_its_cap_is_refused_at_the_key():
    with pytest.raises(SettingsError) as caught:
        parse_settings(_with_budget("dev", maxGpus=15))
    (problem,) = caught.value.problems
    assert problem.key == "llm-platform:gpuBudget.maxGpus" and problem.value == 15
    # 'inference' 4 nodes x 1 GPU (3 replicas + the rollout surge pod) + gpu-inference 8 + gpu-training 4
    assert "worst-case GPU count is 16 (" in problem.reason and "raise gpuBudget.maxGpus" in problem.reason


def test_a_stack_whose_worst_case_exceeds_its_budget_is_refused_at_the_key():
    with pytest.raises(SettingsError) as caught:
        parse_settings(_with_budget("prod", monthlyBudgetUsd=80000))
    (problem,) = caught.value.problems
    assert problem.key == "llm-platform:gpuBudget.monthlyBudgetUsd"
    # $81,389 before the surge room: + 1 g6e.xlarge x $2.242/h x 730 h + 4 GPUs x $2.036/GPU-h x 730 h;
    # then gpu-inference's instanceSizes (xlarge-12xlarge): 8 GPUs x ($2.036 - $1.624)/GPU-h x 730 h less
    assert "worst-case GPU spend is $86,565/month" in problem.reason


@pytest.mark.parametrize("budget", [{"maxGpus": -1}, {"monthlyBudgetUsd": -5}, {"maxGpus": "many"}])
def test_budget_values_are_validated(budget):
    with pytest.raises(SettingsError) as caught:
        parse_settings(_with_budget("dev", **budget))
    assert [p.key for p in caught.value.problems] == [f"llm-platform:gpuBudget.{next(iter(budget))}"]


def test_settings_worst_case_is_the_reports(stack_plan):
    """The settings judge the cap on the figures the offline check prints (one calculator)."""
    settings = parse_settings(read_stack_config(stack_plan.stack))
    cluster = CheckedStack.of(settings).cluster
    worst = stack_worst_case(cluster.pools)
    summary = summarize(stack_plan)
    assert worst.gpus == summary.worst_case_gpus
    assert round(worst.hourly_usd * cluster.hours_per_month, 2) == summary.worst_case_gpu_monthly_usd
