"""scale-to-zero-keep-awake over gRPC: a model at minReplicaCount 0 that one request wakes must not be scaled
back to zero by KEDA before its predicted cold start ends (policies/capacity/keep_awake.py has the rule).

The stacks are cold-start-budget's (tests/policies/checks/test_cold_start_budget.py): Llama-3.1-8B on a Cluster
Autoscaler group of g5.2xlarge at 500 MiB/s starts cold in 527 s, Llama-3.1-70B AWQ on a Karpenter g5.12xlarge
at 750 MiB/s in 520 s. The ScaledObject wakes it on the gateway's demand (a 120 s window) and polls every 15 s:
woken at 15 s, last active at 105 s. Dev's cooldownPeriod before the fix, 300 s, scales it to zero at 420 s,
122 s before it is ready at 542 s; the cooldown it needs to be ready before the scale-in is
15 + 527.2 - 105 = 437.2 -> 438 s. The cooldown the program now emits for it (738 s) keeps it to 855 s.
"""

from __future__ import annotations

from tests.policies.builders import patch, resource, scaled_object
from tests.policies.checks.test_cold_start_budget import karpenter_stack, managed_stack
from tests.policies.conftest import one

POLICY = "scale-to-zero-keep-awake"
DEMAND = ('(sum(rate(litellm_proxy_total_requests_metric_total{{requested_model="{m}"}}[120s])) or on() vector(0))'
          ' and on() (count(up{{namespace="llm-gateway",service="llm-gateway"}} == 1) > 0)')


def scaler(model: str, *, low: int = 0, cooldown: int | None = 300, query: str | None = None) -> dict:
    spec = {"minReplicaCount": low, "maxReplicaCount": 3, "pollingInterval": 15}
    if cooldown is not None:
        spec["cooldownPeriod"] = cooldown
    res = scaled_object(query=query or DEMAND.format(m=model), **spec)
    res = patch(res, {"spec.scaleTargetRef.name": model, "metadata": {"name": model, "namespace": "serving"},
                      "spec.triggers.0.metadata.activationThreshold": "0"})
    return resource(res["type"], model, res["inputs"])


def test_a_cooldown_shorter_than_the_cold_start_is_refused(pack):
    one(pack.stack_messages([*managed_stack("llama-8b", namespace="serving"), scaler("llama-8b")], POLICY),
        "llama-8b (minReplicaCount 0): one request wakes it at 15 s and KEDA scales it back to zero at 420 s "
        "(its last active poll at 105 s, within the triggers' demand window of 120 s, + cooldownPeriod 300 s",
        "before its predicted cold start of 527 s on a new g5.2xlarge of managed node group 'inference' ends at 542 s",
        "Raise cooldownPeriod to at least 438 s plus the time it should serve")


def test_the_cooldown_the_program_emits_passes(pack):
    assert pack.stack_messages([*managed_stack("llama-8b", namespace="serving"), scaler("llama-8b", cooldown=738)], POLICY) == []


def test_ready_just_before_the_scale_in_passes_and_just_after_is_refused(pack):
    # Cooldown 438: LastActiveTime 105 + 438 = 543, scale-in at 555 > ready 542.2. Cooldown 420: 105 + 420 = 525,
    # scale-in at the first poll strictly after it, 540, 2 s before the replica is ready.
    assert pack.stack_messages([*managed_stack("llama-8b", namespace="serving"), scaler("llama-8b", cooldown=438)], POLICY) == []
    one(pack.stack_messages([*managed_stack("llama-8b", namespace="serving"), scaler("llama-8b", cooldown=420)], POLICY),
        "scales it back to zero at 540 s", "ends at 542 s")


def test_keda_default_cooldown_and_karpenter_pool(pack):
    # No cooldownPeriod: KEDA's 300 s. The 70B on Karpenter starts in 520 s: ready at 535 s, gone at 420 s.
    one(pack.stack_messages([*karpenter_stack("llama-70b", "serving"), scaler("llama-70b", cooldown=None)], POLICY),
        "cooldownPeriod 300 s", "predicted cold start of 520 s on a new g5.12xlarge of Karpenter NodePool "
        "'gpu-interactive' ends at 535 s")


def test_a_kept_replica_or_a_self_signal_is_not_judged_here(pack):
    assert pack.stack_messages([*managed_stack("llama-8b", namespace="serving"), scaler("llama-8b", low=1)], POLICY) == []
    own = 'sum(vllm:num_requests_waiting{model_name="llama-8b"})'
    assert pack.stack_messages([*managed_stack("llama-8b", namespace="serving"), scaler("llama-8b", query=own)], POLICY) == []


def test_a_window_no_poll_can_see_is_refused(pack):
    short = 'sum(rate(litellm_proxy_total_requests_metric_total{requested_model="llama-8b"}[10s]))'
    one(pack.stack_messages([*managed_stack("llama-8b", namespace="serving"), scaler("llama-8b", query=short)], POLICY),
        "llama-8b: one request is never seen by KEDA: its waking triggers hold a request for 10 s, "
        "not longer than pollingInterval 15 s")
