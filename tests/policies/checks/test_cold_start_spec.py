"""cold-start-budget, as a specification: every budgeted model is judged (one within its budget does not
end the walk). Stacks and figures from test_cold_start_budget.py: the 70B model on Karpenter starts in
520 s (roomy tier: 600 s), the 8B model on Cluster Autoscaler in 527 s (tight tier: 500 s)."""

from __future__ import annotations

from tests.policies.checks.test_cold_start_budget import POLICY, budgeted, karpenter_stack, managed_stack  # noqa: F401
from tests.policies.conftest import one


def test_a_model_over_its_budget_is_found_after_one_within_its_own(budgeted):  # noqa: F811
    stack = [*karpenter_stack("llama-70b-roomy"), *managed_stack("llama-8b-tight")]
    message = one(budgeted.stack_messages(stack, POLICY),
                  "llama-8b-tight (tier tight) starts cold in 527 s on a new g5.2xlarge of managed node group 'inference'")
    assert "llama-70b-roomy" not in message
