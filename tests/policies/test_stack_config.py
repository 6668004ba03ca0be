"""The stack's own configuration reaches the pack as the engine hands it: ``PULUMI_CONFIG``.

The engine starts a policy pack with the stack's configuration in ``PULUMI_CONFIG``, a JSON object
of ``"namespace:key"`` to a string, object values JSON-encoded into that string (pulumi/pulumi
sdk/go/common/resource/plugin/analyzer_plugin.go, ``constructEnv``/``constructConfig``). Each test
starts a pack with such an environment and drives it over gRPC. ``gpu-capacity-cap`` and
``gpu-monthly-budget`` take ``llm-platform:gpuBudget`` unless their policy config sets a value.

Figures: one GPU node group of g5.xlarge/g5.2xlarge (1 GPU each; the dearer is $1.212/h on demand,
730 h a month, policies/instance_catalog.json). maxSize 5: 5 GPUs and 5 x 1.212 x 730 = $4,424/month;
maxSize 4: 4 GPUs and $3,539/month.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from automation.offline.pack.runner import PolicyPackRunner
from tests.policies.builders import gpu_node_group, patch, system_node_group
from tests.policies.conftest import BASELINE, ROOT, Pack, engine_config, one, stack_yaml_config

CAP, BUDGET = "gpu-capacity-cap", "gpu-monthly-budget"


def stack(max_size: int) -> list[dict]:
    return [patch(gpu_node_group(), {"scalingConfig.maxSize": max_size}), system_node_group()]


@pytest.fixture(scope="module")
def budgeted() -> Iterator[Pack]:
    """A pack started with a stack whose gpuBudget is 4 GPUs and $4,000 a month."""
    env = {"LLM_PLATFORM_POLICY_STRICT": "1",
           "PULUMI_CONFIG": engine_config({"llm-platform:gpuBudget": {"maxGpus": 4, "monthlyBudgetUsd": 4000},
                                           "llm-platform:clusterName": "llm-platform-test"})}
    with PolicyPackRunner(env=env) as runner:
        pack = Pack(runner)
        pack.configure()
        yield pack


def test_engine_form_of_the_stack_config():
    assert json.loads(engine_config({"llm-platform:gpuBudget": {"maxGpus": 4}, "aws:region": "us-east-1"})) == {
        "llm-platform:gpuBudget": '{"maxGpus": 4}', "aws:region": "us-east-1"}


def test_stack_gpu_budget_caps_gpus(budgeted):
    one(budgeted.stack_messages(stack(5), CAP), "Worst-case GPU count is 5, above the cap of 4")


def test_stack_gpu_budget_caps_spend(budgeted):
    one(budgeted.stack_messages(stack(5), BUDGET), "Worst-case GPU spend is $4,424/month", "above the budget of $4,000")


def test_within_the_stack_gpu_budget(budgeted):
    assert budgeted.stack_messages(stack(4), CAP) == []
    assert budgeted.stack_messages(stack(4), BUDGET) == []


def test_policy_config_overrides_the_stack_budget(budgeted):
    budgeted.configure({**BASELINE, CAP: {"maxGpus": 5}, BUDGET: {"monthlyBudgetUsd": 4500}})
    try:
        assert budgeted.stack_messages(stack(5), CAP) == []
        assert budgeted.stack_messages(stack(5), BUDGET) == []
        one(budgeted.stack_messages(stack(6), CAP), "Worst-case GPU count is 6, above the cap of 5")
    finally:
        budgeted.configure()


def test_without_a_stack_budget_the_documented_fallback_applies(pack):
    """The session's pack has no PULUMI_CONFIG: 16 GPUs and $20,000 a month, as before."""
    assert pack.stack_messages(stack(16), CAP) == []
    one(pack.stack_messages(stack(17), CAP), "Worst-case GPU count is 17, above the cap of 16")
    assert pack.stack_messages(stack(16), BUDGET) == []  # $14,156/month
    one(pack.stack_messages(stack(23), BUDGET), "Worst-case GPU spend is $20,349/month", "above the budget of $20,000")


def test_the_engine_would_hide_the_stack_budget_behind_an_advertised_default(budgeted):
    """The engine fills every default a policy's schema advertises into the config it sends
    (pkg/resource/analyzer/config.go, createConfigWithDefaults), as the runner does: a default of 16
    would arrive as if configured and win over the stack's 4. So neither parameter advertises one."""
    effective = budgeted.configure()
    assert "maxGpus" not in effective[CAP] and "monthlyBudgetUsd" not in effective[BUDGET]
    assert effective[CAP]["gpuResource"] == "nvidia.com/gpu"  # other parameters keep their defaults


@pytest.mark.parametrize(
    ("budget", "key"),
    [
        ({"maxGpus": "lots", "monthlyBudgetUsd": 4000}, "llm-platform:gpuBudget.maxGpus"),
        ({"maxGpus": 4}, "llm-platform:gpuBudget.monthlyBudgetUsd"),
        ({"maxGpus": -1, "monthlyBudgetUsd": 4000}, "llm-platform:gpuBudget.maxGpus"),
        ("four GPUs", "llm-platform:gpuBudget"),
        ('{"maxGpus":' * 3000 + "4" + "}" * 3000, "llm-platform:gpuBudget"),
    ],
    ids=["not-a-number", "missing", "negative", "not-an-object", "nested-past-the-bound"],
)
def test_unreadable_stack_budget_is_a_finding_naming_the_key(budget, key):
    raw = budget if isinstance(budget, str) else json.dumps(budget)
    env = {"LLM_PLATFORM_POLICY_STRICT": "1", "PULUMI_CONFIG": json.dumps({"llm-platform:gpuBudget": raw})}
    with PolicyPackRunner(env=env) as runner:
        pack = Pack(runner)
        pack.configure()
        message = one(pack.stack_messages(stack(4), CAP), "cannot read the stack's configuration", key)
        assert "lots" not in message and "four GPUs" not in message and "Traceback" not in message
        # A policy that does not read the budget is not affected.
        assert pack.stack_messages(stack(4), "gpu-namespace-quota") == []


@pytest.mark.parametrize("stack_name", ["dev", "prod"])
def test_project_plans_need_no_copy_of_the_gpu_budget_in_the_pack_config(stack_name, dev_plan, prod_plan):
    """With ``policies/config/<stack>.json`` stripped of its gpuBudget copies, the stack's own
    Pulumi.<stack>.yaml (as PULUMI_CONFIG) bounds the plan: clean as it is, and caught when the stack's
    budget is below the plan's worst case (1 GPU, $1 a month)."""
    plan = {"dev": dev_plan, "prod": prod_plan}[stack_name]
    config = json.loads((ROOT / "policies" / "config" / f"{stack_name}.json").read_text())
    config[CAP] = {k: v for k, v in config[CAP].items() if k != "maxGpus"}
    config[BUDGET] = {k: v for k, v in config[BUDGET].items() if k != "monthlyBudgetUsd"}
    stack_config = stack_yaml_config(stack_name)
    with PolicyPackRunner(env={"PULUMI_CONFIG": engine_config(stack_config)}) as runner:
        runner.configure(config)
        assert runner.analyze_stack(plan.resources) == []
    tight = {**stack_config, "llm-platform:gpuBudget": {"maxGpus": 1, "monthlyBudgetUsd": 1}}
    with PolicyPackRunner(env={"PULUMI_CONFIG": engine_config(tight)}) as runner:
        runner.configure(config)
        names = sorted(v.policy_name for v in runner.analyze_stack(plan.resources))
    assert names == [CAP, BUDGET]
