"""The KEDA/HPA simulation against hand-made cases, so the autoscaling tests rest on a checked model."""

from __future__ import annotations

from tests.support.keda_model import Autoscaler, Trigger, read, recommendation


def spec(**overrides):
    base = {
        "minReplicaCount": 0,
        "maxReplicaCount": 4,
        "cooldownPeriod": 300,
        "pollingInterval": 15,
        "fallback": {"failureThreshold": 3, "replicas": 1, "behavior": "currentReplicasIfHigher"},
        "advanced": {
            "horizontalPodAutoscalerConfig": {
                "behavior": {
                    "scaleDown": {"stabilizationWindowSeconds": 300, "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}]},
                    "scaleUp": {"stabilizationWindowSeconds": 0, "policies": [{"type": "Pods", "value": 2, "periodSeconds": 60}]},
                }
            }
        },
        "triggers": [
            {"type": "prometheus", "name": "demand", "metricType": "AverageValue",
             "metadata": {"query": "d", "threshold": "2", "activationThreshold": "0", "ignoreNullValues": "false"}},
            {"type": "prometheus", "name": "kv", "metricType": "Value",
             "metadata": {"query": "k", "threshold": "0.8", "activationThreshold": "0.8", "ignoreNullValues": "true"}},
        ],
    }
    base.update(overrides)
    return base


def answers(demand, kv):
    return lambda trigger: {"d": demand, "k": kv}[trigger.query]


def test_empty_answers_read_as_keda_reads_them():
    strict = Trigger("a", "q", "AverageValue", 1, 0, ignore_null=False)
    lenient = Trigger("b", "q", "Value", 1, 0, ignore_null=True)
    assert read(strict, []) is None and read(lenient, []) == 0.0
    assert read(lenient, [float("nan")]) == 0.0 and read(strict, [float("nan")]) is None
    assert read(strict, None) is None and read(strict, [1.0, 2.0]) is None


def test_activates_from_zero_on_demand_only():
    keda = Autoscaler(spec(), replicas=0)
    assert keda.poll(0, answers([0.0], [0.5])) == 0, "kv below its activation keeps zero"
    assert keda.poll(15, answers([0.1], [])) == 1


def test_average_value_sizes_replicas_and_scale_up_is_paced():
    keda = Autoscaler(spec(), replicas=1)
    assert keda.poll(0, answers([7.0], [])) == 3, "ceil(7 / 2) = 4, at most +2 pods per minute"
    assert keda.poll(15, answers([7.0], [])) == 3
    assert keda.poll(75, answers([7.0], [])) == 4


def test_value_metric_uses_current_replicas_and_tolerance():
    keda = Autoscaler(spec(), replicas=2)
    assert keda.poll(0, answers([0.1], [0.85])) == 2, "within 10% of the target: no change"
    assert keda.poll(61, answers([0.1], [1.6])) == 4


def test_scale_down_waits_for_the_window_then_goes_one_pod_per_minute_and_to_zero_after_cooldown():
    keda = Autoscaler(spec(), replicas=1)
    keda.poll(0, answers([8.0], []))
    keda.poll(60, answers([8.0], []))
    assert keda.replicas == 4
    assert keda.poll(120, answers([0.0], [])) == 4, "inside the stabilization window"
    assert keda.poll(420, answers([0.0], [])) == 0, "no demand for the cooldown: back to zero"


def test_fallback_holds_after_the_failure_threshold():
    keda = Autoscaler(spec(), replicas=3)
    assert [keda.poll(t, answers(None, [])) for t in (0, 15, 30)] == [3, 3, 3]
    keda = Autoscaler(spec(), replicas=0)
    assert [keda.poll(t, answers([], [])) for t in (0, 15, 30)] == [0, 0, 1], "blind at zero: one replica"


def test_average_value_near_the_target_keeps_the_current_count_as_the_hpa_does():
    """replica_calculator.go GetExternalPerPodMetricReplicas: tolerance on value / (target * pods)."""
    demand = Trigger("demand", "d", "AverageValue", 2, 0, ignore_null=False)
    assert recommendation(demand, 8.5, 4) == 4, "8.5 / (2 * 4) = 1.0625, within 10%: no change (textbook ceil(8.5 / 2) = 5)"
    assert recommendation(demand, 7.3, 4) == 4, "0.9125, within 10%"
    assert recommendation(demand, 8.9, 4) == 5, "1.1125, outside: ceil(4.45)"
    assert recommendation(demand, 7.1, 4) == 4, "0.8875, outside: ceil(3.55) = 4"
    assert recommendation(demand, 6.9, 4) == 4, "0.8625, outside: ceil(3.45) = 4"
    assert recommendation(demand, 5.9, 4) == 3, "0.7375, outside: ceil(2.95) = 3"
    assert recommendation(demand, 0.0, 4) == 0, "no demand: 0, clamped later to the minimum"


def test_value_tolerance_is_on_the_metric_against_its_target():
    kv = Trigger("kv", "k", "Value", 0.8, 0.8, ignore_null=True)
    assert recommendation(kv, 0.85, 4) == 4, "0.85 / 0.8 = 1.0625: no change"
    assert recommendation(kv, 0.9, 4) == 5, "1.125: ceil(4 * 1.125) = ceil(4.5) = 5"


def test_the_tolerance_holds_an_autoscaler_at_its_count():
    keda = Autoscaler(spec(maxReplicaCount=8), replicas=4)
    assert keda.poll(0, answers([8.5], [])) == 4, "a textbook ceil(8.5 / 2) would add a fifth replica"
    assert keda.poll(15, answers([8.9], [])) == 5
