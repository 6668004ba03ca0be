"""A model that one request wakes from zero stays until it serves: ``scale-to-zero-keep-awake``.

For every model Deployment whose ScaledObject has ``minReplicaCount`` 0, the pack takes the triggers that
wake it (those that read a metric the model's own pods do not emit, as ``capacity-simulation`` decides
with the same ``selfMetricPrefixes``), the longest demand window among their queries, the ScaledObject's
``cooldownPeriod`` and ``pollingInterval``, and the model's predicted cold start on the pool it lands on
(the same prediction as ``cold-start-budget``). By KEDA's rule (:mod:`capacity.keep_awake`: the cooldown
counts from the last poll that saw the request, whatever the replica's readiness) a model whose demand
window plus cooldown ends before its cold start does is deleted while it is still starting: the GPU node
comes up for nothing, every time. Such a model is reported with the ``cooldownPeriod`` it needs.

A model without a waking trigger, or whose waking triggers look back over no range (an instant gauge
holds demand only while its source does), is not judged here (``capacity-simulation`` reports the first).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from capacity.engine import SELF_METRIC_PREFIXES, query_metrics
from capacity.keep_awake import cooldown_for, of_scaled_object, ready_at, scaled_to_zero_at
from lib.kit import MANDATORY, Stack, stack_policy
from lib.resources import SCALED_OBJECT

from checks.cold_start import model_cold_starts


def waking_triggers(triggers: list[Any], self_prefixes: tuple[str, ...]) -> list[dict[str, Any]]:
    """The triggers that can see demand while the model has no pods: not cpu/memory, and, for Prometheus,
    a query that reads at least one metric outside ``self_prefixes``."""
    found = []
    for trigger in triggers:
        if not isinstance(trigger, dict) or trigger.get("type") in ("cpu", "memory"):
            continue
        if trigger.get("type") == "prometheus":
            query = str((trigger.get("metadata") or {}).get("query") or "")
            if not any(not m.startswith(self_prefixes) for m in query_metrics(query)):
                continue
        found.append(trigger)
    return found


def _scalers(stack: Stack) -> dict[tuple[str, str], dict[str, Any]]:
    """ScaledObject specs by (namespace, target Deployment)."""
    found = {}
    for resource in stack.of_type(frozenset({SCALED_OBJECT})):
        props = resource.props
        spec = props.get("spec") or {}
        ref = spec.get("scaleTargetRef") or {}
        if str(ref.get("kind") or "Deployment") != "Deployment":
            continue
        found[(str((props.get("metadata") or {}).get("namespace") or "default"), str(ref.get("name")))] = spec
    return found


def _check(stack: Stack, config: dict[str, Any]) -> Iterator[tuple[str, str | None]]:
    prefixes = tuple(config.get("selfMetricPrefixes") or SELF_METRIC_PREFIXES)
    scalers = _scalers(stack)
    try:
        starts = list(model_cold_starts(stack))
    except KeyError:  # an image without a size: cold-start-budget names it
        return
    for workload, name, _probe, cold in starts:
        spec = scalers.get((workload.namespace, name))
        if spec is None or not workload.scale_to_zero:
            continue
        waking = waking_triggers(spec.get("triggers") or [], prefixes)
        keep = of_scaled_object(spec, waking)
        if not waking or keep.demand_window_seconds <= 0:
            continue
        zero, ready = scaled_to_zero_at(keep), ready_at(keep, cold.seconds)
        if zero is None or ready is None:
            yield (
                f"{name}: one request is never seen by KEDA: its waking triggers hold a request for "
                f"{keep.demand_window_seconds:g} s, not longer than pollingInterval {keep.polling_seconds:g} s. "
                "Lengthen the query's range or poll more often."
            ), workload.key
            continue
        if zero >= ready:
            continue
        needed = cooldown_for(keep.demand_window_seconds, keep.polling_seconds, cold.seconds, 0)
        yield (
            f"{name} (minReplicaCount 0): one request wakes it at {keep.woken_at:g} s and KEDA scales it back to "
            f"zero at {zero:g} s (its last active poll at {keep.last_active_at:g} s, within the triggers' demand "
            f"window of {keep.demand_window_seconds:g} s, + cooldownPeriod {keep.cooldown_seconds:g} s; KEDA does "
            f"not wait for the replica to be ready), before its predicted cold start of {cold.seconds:.0f} s on a new "
            f"{cold.instance} of {cold.pool} ends at {ready:.0f} s: the node comes up and the pod is deleted before "
            f"it serves. Raise cooldownPeriod to at least {needed} s plus the time it should serve (the program's "
            "serving.tiers[].scaling.servingWindowSeconds), or keep minReplicaCount at 1."
        ), workload.key


POLICIES = [
    stack_policy(
        name="scale-to-zero-keep-awake",
        description=(
            "Keep a model that one request wakes from zero until it has served: its waking triggers' demand window "
            "plus the ScaledObject's cooldownPeriod must outlast its predicted cold start, since KEDA counts the "
            "cooldown from the last active poll, not from readiness (raise cooldownPeriod or keep a replica)."
        ),
        check=_check,
        enforcement=MANDATORY,
        params={
            "selfMetricPrefixes": {
                "type": "array",
                "items": {"type": "string", "minLength": 1},
                "default": list(SELF_METRIC_PREFIXES),
                "description": "Metric name prefixes a model server emits itself; a trigger that reads only these "
                               "does not see demand while the model is at zero.",
            }
        },
    ),
]
