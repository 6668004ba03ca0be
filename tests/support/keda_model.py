"""What KEDA and the HPA would do with a ScaledObject, given what Prometheus answers its queries.

A simulation of the documented behaviour (KEDA 2.20 scaling, fallback; HPA v2 algorithm), decided
from the emitted ScaledObject, used where the autoscalers themselves cannot run:

- a trigger's answer is an error when Prometheus fails, or when the answer is empty and the trigger
  does not set ``ignoreNullValues`` (then an empty answer reads 0);
- at 0 replicas KEDA activates (to ``max(min, 1)``) when any trigger is above its
  ``activationThreshold``; it returns to 0 (only when ``minReplicaCount`` is 0) once no trigger has
  been active for longer than ``cooldownPeriod``, counted from the last active poll and not from the
  replica's readiness (``policies/capacity/keep_awake.py`` cites KEDA's source);
- above zero the HPA takes the largest recommendation over the triggers: ``ceil(value / threshold)``
  for ``AverageValue``, ``ceil(current * value / threshold)`` for ``Value``, clamped to
  [max(min, 1), max]; for both kinds a usage ratio within the HPA's 10% tolerance of 1 keeps the
  current count (see ``recommendation``); scale-down takes the highest recommendation of the
  stabilization window and at most the policy's pods per period; scale-up at most the policy's pods
  per period;
- after ``fallback.failureThreshold`` polls in a row with a failing trigger, replicas follow the
  fallback (``currentReplicasIfHigher``: the current count or ``fallback.replicas``, whichever is
  higher).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

SCALED_OBJECT = "kubernetes:keda.sh/v1alpha1:ScaledObject"
TOLERANCE = 0.1


@dataclass(frozen=True)
class Trigger:
    name: str
    query: str
    metric_type: str
    threshold: float
    activation: float
    ignore_null: bool


def triggers_of(spec: dict[str, Any]) -> list[Trigger]:
    return [
        Trigger(
            name=t["name"],
            query=t["metadata"]["query"],
            metric_type=t["metricType"],
            threshold=float(t["metadata"]["threshold"]),
            activation=float(t["metadata"].get("activationThreshold", "0")),
            ignore_null=t["metadata"].get("ignoreNullValues", "true") == "true",
        )
        for t in spec["triggers"]
    ]


def scaled_object(plan, model: str) -> dict[str, Any]:
    (found,) = [r.inputs for r in plan.of_type(SCALED_OBJECT) if r.inputs["metadata"]["name"] == model]
    return found


def trigger_queries(plan, model: str) -> list[Trigger]:
    return triggers_of(scaled_object(plan, model)["spec"])


#: One poll's answers: trigger name -> value, or None for an error (Prometheus down, or empty + strict).
Readings = dict[str, float | None]


def read(trigger: Trigger, answer: list[float] | None) -> float | None:
    """What KEDA's Prometheus scaler makes of an answer (``None`` = the request failed)."""
    if answer is None:
        return None
    if not answer:
        return 0.0 if trigger.ignore_null else None
    if len(answer) > 1:
        return None  # KEDA requires a single-element answer
    value = answer[0]
    if math.isnan(value) or math.isinf(value):
        return 0.0 if trigger.ignore_null else None
    return value


def recommendation(trigger: Trigger, value: float, current: int) -> int:
    """The HPA's replica count for one KEDA trigger (an External metric) at ``current`` (> 0) replicas.

    The engine's rule, kubernetes/kubernetes pkg/controller/podautoscaler/replica_calculator.go:
    ``GetExternalPerPodMetricReplicas`` (``AverageValue``) takes the usage ratio against the target
    for the current pods, ``value / (threshold * current)``, keeps ``current`` when that ratio is within
    the tolerance of 1 (``--horizontal-pod-autoscaler-tolerance``, default 0.1) and otherwise asks
    ``ceil(value / threshold)``; ``GetExternalMetricReplicas`` -> ``getUsageRatioReplicaCount``
    (``Value``) keeps ``current`` within the same tolerance of ``value / threshold`` and otherwise asks
    ``ceil(ratio * pods)`` (ready pods, here the current count). So a textbook ``ceil(value /
    threshold)`` for ``AverageValue`` is wrong near the target: 8.5 queued over 4 pods at 2 each is a
    ratio of 1.0625, and the HPA stays at 4 where the textbook answer is 5.
    """
    ratio = value / trigger.threshold
    usage_ratio = ratio / current if trigger.metric_type == "AverageValue" else ratio
    if abs(1.0 - usage_ratio) <= TOLERANCE:
        return current
    if trigger.metric_type == "AverageValue":
        return math.ceil(ratio)
    return math.ceil(current * ratio)


@dataclass
class Autoscaler:
    """KEDA + HPA state for one ScaledObject, advanced one poll at a time."""

    spec: dict[str, Any]
    replicas: int
    now: float = 0.0
    failures: int = 0
    last_active: float | None = None
    recommendations: list[tuple[float, int]] = field(default_factory=list)
    last_scale_up: float = -1e9
    last_scale_down: float = -1e9

    @property
    def triggers(self) -> list[Trigger]:
        return triggers_of(self.spec)

    @property
    def minimum(self) -> int:
        return int(self.spec.get("minReplicaCount", 0))

    @property
    def maximum(self) -> int:
        return int(self.spec["maxReplicaCount"])

    def _behavior(self, direction: str) -> dict[str, Any]:
        return self.spec.get("advanced", {}).get("horizontalPodAutoscalerConfig", {}).get("behavior", {}).get(direction, {})

    def poll(self, at: float, answers: Callable[[Trigger], list[float] | None]) -> int:
        self.now = at
        readings = {t.name: read(t, answers(t)) for t in self.triggers}
        if any(v is None for v in readings.values()):
            self.failures += 1
            fallback = self.spec.get("fallback")
            if fallback and self.failures >= int(fallback["failureThreshold"]):
                target = int(fallback["replicas"])
                behavior = fallback.get("behavior", "static")
                if behavior == "currentReplicasIfHigher":
                    target = max(self.replicas, target)
                elif behavior == "currentReplicas":
                    target = self.replicas
                self.replicas = target
            return self.replicas
        self.failures = 0
        values = {t.name: (t, reading) for t in self.triggers if (reading := readings[t.name]) is not None}
        active = any(v > t.activation for t, v in values.values())
        if active:
            self.last_active = at
        if self.replicas == 0:
            if active:
                self.replicas = max(self.minimum, 1)
                self.last_scale_up = at
            return self.replicas
        cooldown = float(self.spec.get("cooldownPeriod", 300))
        # KEDA scales to zero once LastActiveTime + cooldownPeriod is before now (strictly), whether or not
        # the replica is ready (kedacore/keda pkg/scaling/executor/scale_scaledobjects.go, scaleToZeroOrIdle).
        if self.minimum == 0 and not active and (self.last_active is None or at - self.last_active > cooldown):
            self.replicas = 0
            self.recommendations.clear()
            return 0
        self.replicas = self._hpa(values)
        return self.replicas

    def _hpa(self, values: dict[str, tuple[Trigger, float]]) -> int:
        current = self.replicas
        desired = 0
        for trigger, value in values.values():
            desired = max(desired, recommendation(trigger, value, current))
        desired = min(max(desired, max(self.minimum, 1)), self.maximum)
        self.recommendations.append((self.now, desired))
        if desired < current:
            down = self._behavior("scaleDown")
            window = float(down.get("stabilizationWindowSeconds", 300))
            recent = [r for t, r in self.recommendations if t >= self.now - window]
            desired = max(recent)
            for policy in down.get("policies", []):
                if policy["type"] == "Pods" and self.now - self.last_scale_down < policy["periodSeconds"]:
                    desired = current
                elif policy["type"] == "Pods":
                    desired = max(desired, current - int(policy["value"]))
            if desired < current:
                self.last_scale_down = self.now
        elif desired > current:
            up = self._behavior("scaleUp")
            for policy in up.get("policies", []):
                if policy["type"] == "Pods" and self.now - self.last_scale_up < policy["periodSeconds"]:
                    desired = current
                elif policy["type"] == "Pods":
                    desired = min(desired, current + int(policy["value"]))
            if desired > current:
                self.last_scale_up = self.now
        self.recommendations = [(t, r) for t, r in self.recommendations if t >= self.now - 3600]
        return desired
