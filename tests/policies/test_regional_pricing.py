"""The pack prices instances in the stack's region (``llm-platform:region`` in ``PULUMI_CONFIG``).

The shipped catalog has prices for us-east-1 only (docs/catalog.md); a stack in eu-west-1 gets a
finding naming the type, the region and the refresh command, never us-east-1's price.

Figures: one GPU node group of g5.xlarge/g5.2xlarge (1 GPU each; the dearer is $1.212/h on demand in
us-east-1, 730 h a month, policies/instance_catalog.json). maxSize 5: 5 GPUs and $4,424/month.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from automation.offline.pack.runner import PolicyPackRunner
from tests.policies.builders import gpu_node_group, patch, system_node_group, workload
from tests.policies.conftest import Pack, engine_config, one

CAP, BUDGET, SIMULATION = "gpu-capacity-cap", "gpu-monthly-budget", "capacity-simulation"
REFRESH = "python -m automation catalog refresh --region eu-west-1"


def stack(max_size: int = 5) -> list[dict]:
    return [patch(gpu_node_group(), {"scalingConfig.maxSize": max_size}), system_node_group()]


def _pack(region: str) -> Iterator[Pack]:
    env = {"LLM_PLATFORM_POLICY_STRICT": "1",
           "PULUMI_CONFIG": engine_config({"llm-platform:region": region,
                                           "llm-platform:gpuBudget": {"maxGpus": 4, "monthlyBudgetUsd": 4000}})}
    with PolicyPackRunner(env=env) as runner:
        pack = Pack(runner)
        pack.configure()
        yield pack


@pytest.fixture(scope="module")
def ireland() -> Iterator[Pack]:
    yield from _pack("eu-west-1")


@pytest.fixture(scope="module")
def virginia() -> Iterator[Pack]:
    yield from _pack("us-east-1")


def test_budget_refuses_a_type_unpriced_in_the_stacks_region(ireland):
    message = one(ireland.stack_messages(stack(), BUDGET), "managed node group 'inference'",
                  "its monthly cost cannot be bounded", "g5.2xlarge, g5.xlarge in eu-west-1", REFRESH)
    assert "$4,424" not in message  # us-east-1's figure is never borrowed


def test_gpu_count_does_not_need_prices(ireland):
    one(ireland.stack_messages(stack(), CAP), "Worst-case GPU count is 5, above the cap of 4")


def test_simulation_runs_on_the_regions_catalog(ireland, virginia):
    """Prices only rank fitting types in the simulation; facts are the same in every region, so the
    findings are too (the stack's region reaches cluster_from_resources without a crash or a borrowed price)."""
    resources = [*stack(), workload()]
    findings = ireland.stack_messages(resources, SIMULATION)
    assert findings == virginia.stack_messages(resources, SIMULATION)
    assert any("(g5.2xlarge) has 28.6 GiB allocatable" in m for m in findings)


def test_us_east_1_is_priced_as_before(virginia):
    one(virginia.stack_messages(stack(), BUDGET), "Worst-case GPU spend is $4,424/month", "above the budget of $4,000")
    assert virginia.stack_messages(stack(4), BUDGET) == []
