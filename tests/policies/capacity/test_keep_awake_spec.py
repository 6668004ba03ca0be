"""KEDA's scale-to-zero rule for a model one request woke, as a specification (policies/capacity/keep_awake.py).

Figures: the gateway's demand query holds one request for 120 s (``[120s]``), KEDA polls every 15 s, so the
first poll (15 s) wakes the model and the last poll inside the window is at 105 s (``LastActiveTime``). With
a cooldownPeriod of 300 s KEDA scales to zero at the first poll after 405 s: 420 s. Dev's Llama-3.1-8B with
its weights downloaded was predicted to start cold in 527 s on a g5.2xlarge of a Cluster Autoscaler group
(491.6 s now that it streams; the rule is the same), so it would be ready at
15 + 527 = 542 s: KEDA deletes it 122 s before it serves. The textbook, counting the cooldown from readiness,
would keep it until the first poll after 542 + 300 = 842 s: 855 s.
"""

from __future__ import annotations

import pytest

from policies.capacity.keep_awake import (
    DEFAULT_COOLDOWN_SECONDS,
    DEFAULT_INITIAL_COOLDOWN_SECONDS,
    DEFAULT_POLLING_SECONDS,
    KeepAwake,
    cooldown_for,
    demand_window_seconds,
    of_scaled_object,
    promql_duration_seconds,
    ready_at,
    scaled_to_zero_at,
    serving_seconds,
    textbook_scaled_to_zero_at,
)

DEMAND = ('((sum(rate(litellm_proxy_total_requests_metric_total{requested_model="m"}[120s])) or on() vector(0)) + '
          '(sum(min_over_time(litellm_proxy_total_requests_metric_total{requested_model="m"}[120s]) and '
          '(time() - litellm_proxy_total_requests_metric_created{requested_model="m"} < 120)) / 120 or on() vector(0)))')


def test_keda_defaults_are_its_source_constants():
    assert (DEFAULT_COOLDOWN_SECONDS, DEFAULT_INITIAL_COOLDOWN_SECONDS, DEFAULT_POLLING_SECONDS) == (300, 0, 30)


@pytest.mark.parametrize("text, seconds", [("120s", 120), ("2m", 120), ("1h30m", 5400), ("500ms", 0.5), ("2x", None), ("", None)])
def test_promql_durations(text, seconds):
    assert promql_duration_seconds(text) == seconds


def test_the_demand_window_is_the_longest_range_of_the_query():
    assert demand_window_seconds(DEMAND) == 120
    assert demand_window_seconds("max_over_time(q[5m]) + rate(q[30s])") == 300
    assert demand_window_seconds("rate(q[10m:1m])") == 600, "a subquery's range counts"
    assert demand_window_seconds("sum(queue_length)") == 0


def test_keda_deletes_a_starting_replica_where_the_textbook_keeps_it():
    keep = KeepAwake(120, 300, 15)
    assert (keep.woken_at, keep.last_active_at) == (15, 105)
    assert scaled_to_zero_at(keep) == 420
    assert ready_at(keep, 527) == 542
    assert serving_seconds(keep, 527) == -122, "KEDA: deleted 122 s before it is ready"
    assert textbook_scaled_to_zero_at(keep, 527) == 855, "textbook: the cooldown starts at readiness"


def test_the_scale_in_poll_is_strictly_after_the_cooldown():
    # LastActiveTime 105 + cooldown 315 = 420: KEDA's Before(now) is false at 420, true at 435.
    assert scaled_to_zero_at(KeepAwake(120, 315, 15)) == 435


def test_a_window_no_poll_sees_never_wakes():
    keep = KeepAwake(10, 300, 15)
    assert keep.woken_at is None and scaled_to_zero_at(keep) is None and serving_seconds(keep, 100) is None
    with pytest.raises(ValueError, match="one request never wakes the model"):
        cooldown_for(10, 15, 100, 300)


def test_the_cooldown_that_serves_a_window_after_the_cold_start():
    # 15 (woken) + 527.2 (cold start) + 300 (serving window) - 105 (last active) = 737.2 -> 738.
    assert cooldown_for(120, 15, 527.2088, 300) == 738
    keep = KeepAwake(120, 738, 15)
    assert scaled_to_zero_at(keep) == 855
    assert serving_seconds(keep, 527.2088) == pytest.approx(312.79, abs=0.01)
    # Dev's Qwen2.5-7B on a Karpenter g5.4xlarge: 15 + 485.05 + 300 - 105 = 695.05 -> 696.
    assert cooldown_for(120, 15, 485.0453, 300) == 696


def test_a_scaled_object_reads_its_waking_triggers_and_keda_defaults():
    waking = [{"type": "prometheus", "metadata": {"query": DEMAND}}]
    assert of_scaled_object({"cooldownPeriod": 600, "pollingInterval": 10}, waking) == KeepAwake(120, 600, 10)
    assert of_scaled_object({}, waking) == KeepAwake(120, 300, 30)
    assert of_scaled_object({}, [{"type": "cron", "metadata": {}}]) == KeepAwake(0, 300, 30)
