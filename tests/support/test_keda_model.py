"""The KEDA/HPA simulation against hand-made cases, so the autoscaling tests rest on a checked model."""

from __future__ import annotations

from tests.support.keda_model import Autoscaler, Trigger, read


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
