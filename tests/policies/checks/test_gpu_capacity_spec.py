"""gpu-namespace-quota and gpu-capacity-cap, as a specification: every GPU namespace is judged (one with
a quota does not end the walk), and the cap's own config bounds."""

from __future__ import annotations

import pytest

from automation.offline.pack.findings import PolicyConfigError
from tests.policies.builders import gpu_node_group, nodepool, patch, resource_quota, workload
from tests.policies.conftest import one

QUOTA, CAP = "gpu-namespace-quota", "gpu-capacity-cap"


def test_a_namespace_without_a_gpu_quota_is_found_after_one_with_it(pack):
    stack = [workload(name="a", namespace="serving"), resource_quota("serving"), workload(name="b", namespace="batch")]
    message = one(pack.stack_messages(stack, QUOTA), "Namespace 'batch' runs GPU workloads",
                  "it has no ResourceQuota with requests.nvidia.com/gpu")
    assert "Namespace 'serving'" not in message
    assert pack.stack_messages([*stack, resource_quota("batch")], QUOTA) == []


def test_the_gpu_cap_is_a_count_from_zero(pack):
    assert pack.configure({"all": "mandatory", CAP: {"maxGpus": 0}})[CAP]["maxGpus"] == 0
    with pytest.raises(PolicyConfigError) as caught:
        pack.configure({"all": "mandatory", CAP: {"maxGpus": -1}})
    assert "gpu-capacity-cap: maxGpus: -1 is less than the minimum of 0" in str(caught.value)


def test_a_static_nodepool_scaled_to_zero_adds_no_gpus(pack):
    """3 nodes x 1 GPU (g5.xlarge group at maxSize 3) plus a static NodePool of 0 replicas: 3 GPUs."""
    group = patch(gpu_node_group(), {"scalingConfig.maxSize": 3, "instanceTypes": ["g5.xlarge"]})
    static = patch(nodepool("static"), {"spec.replicas": 0})
    pack.configure({"all": "mandatory", CAP: {"maxGpus": 2}})
    [message] = pack.stack_messages([group, static], CAP)
    assert message.endswith("Worst-case GPU count is 3, above the cap of 2 (managed node group 'inference': 3 nodes "
                            "x 1 GPUs at $1.006/h). Lower node group maxSize or NodePool GPU limits, or raise maxGpus "
                            "for this stack.")
    assert "static" not in message


def test_the_monthly_budget_is_an_amount_from_zero(pack):
    budget = "gpu-monthly-budget"
    assert pack.configure({"all": "mandatory", budget: {"monthlyBudgetUsd": 0}})[budget]["monthlyBudgetUsd"] == 0
    with pytest.raises(PolicyConfigError) as caught:
        pack.configure({"all": "mandatory", budget: {"monthlyBudgetUsd": -1}})
    assert "gpu-monthly-budget: monthlyBudgetUsd: -1 is less than the minimum of 0" in str(caught.value)
