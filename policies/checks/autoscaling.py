"""KEDA ScaledObjects that can actually scale, on vLLM metrics that still exist.

KEDA rejects a Prometheus trigger without ``serverAddress``, ``query`` or ``threshold`` only at
runtime (the object applies, then never scales). vLLM's V1 engine names metrics with colons
(``vllm:num_requests_waiting``); the underscore spelling matches nothing and
``vllm:gpu_cache_usage_perc`` was removed, so an autoscaler or alert on them silently sees no data.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from lib.kit import MANDATORY, resource_policy
from lib.resources import PROMETHEUS_RULE, SCALED_OBJECT, Resource
from lib.values import UNKNOWN, as_int, as_list, dig, fmt

KEDA_DEFAULT_MIN, KEDA_DEFAULT_MAX = 0, 100
REMOVED_VLLM_METRICS = {
    "vllm:gpu_cache_usage_perc": "vllm:kv_cache_usage_perc",
    "vllm:cpu_cache_usage_perc": "",
    "vllm:num_requests_swapped": "",
}
_METRIC = re.compile(r"\bvllm[:_][A-Za-z0-9_:]+")
_QUOTED = re.compile(r"\"(?:\\.|[^\"\\])*\"|'(?:\\.|[^'\\])*'|`[^`]*`")


def _number(value: Any) -> bool:
    try:
        float(str(value))
    except ValueError:
        return False
    return True


def _check_scaled_object(resource: Resource, config: dict[str, Any]) -> Iterator[str]:
    spec = resource.get("spec", default={})
    if spec is UNKNOWN or not isinstance(spec, dict):
        return
    problems = []
    if spec.get("scaleTargetRef") is not UNKNOWN and not dig(spec, "scaleTargetRef", "name"):
        problems.append("spec.scaleTargetRef.name is required")
    low, high = spec.get("minReplicaCount", KEDA_DEFAULT_MIN), spec.get("maxReplicaCount", KEDA_DEFAULT_MAX)
    min_count, max_count = as_int(low), as_int(high)
    if min_count is not None and max_count is not None and min_count > max_count:
        problems.append(f"minReplicaCount {fmt(low)} is above maxReplicaCount {fmt(high)}")
    idle = spec.get("idleReplicaCount")
    idle_count = as_int(idle)
    if idle_count is not None and min_count is not None and idle_count >= min_count:
        problems.append(f"idleReplicaCount {fmt(idle)} must be below minReplicaCount {fmt(low)}")
    triggers = spec.get("triggers")
    if triggers is None or triggers == []:
        problems.append("spec.triggers is empty")
    for i, trigger in enumerate(as_list(triggers) if triggers is not UNKNOWN else []):
        if not isinstance(trigger, dict) or trigger.get("type") != "prometheus":
            continue
        metadata = trigger.get("metadata", {})
        if metadata is UNKNOWN:
            continue
        metadata = metadata if isinstance(metadata, dict) else {}
        missing = [k for k in ("serverAddress", "query", "threshold") if metadata.get(k) in (None, "")]
        if missing:
            problems.append(f"prometheus trigger #{i} lacks metadata.{', metadata.'.join(missing)}")
        for key in ("threshold", "activationThreshold"):
            value = metadata.get(key)
            if value not in (None, "", UNKNOWN) and not _number(value):
                problems.append(f"prometheus trigger #{i} metadata.{key} '{value}' is not a number")
    if problems:
        yield f"{resource.label} cannot scale as written: {'; '.join(problems)}. Fix the ScaledObject spec."


def _queries(resource: Resource) -> Iterator[tuple[str, str]]:
    if resource.type == SCALED_OBJECT:
        triggers = resource.get("spec", "triggers", default=[])
        for i, trigger in enumerate(as_list(triggers) if triggers is not UNKNOWN else []):
            query = dig(trigger, "metadata", "query")
            if isinstance(query, str):
                yield f"triggers[{i}].metadata.query", query
        return
    groups = resource.get("spec", "groups", default=[])
    for g, group in enumerate(as_list(groups) if groups is not UNKNOWN else []):
        rules = dig(group, "rules", default=[])
        for r, rule in enumerate(as_list(rules) if rules is not UNKNOWN else []):
            expr = dig(rule, "expr")
            if isinstance(expr, str):
                yield f"spec.groups[{g}].rules[{r}].expr", expr


def _check_metric_names(resource: Resource, config: dict[str, Any]) -> Iterator[str]:
    removed = config["removedMetrics"]
    for where, query in _queries(resource):
        names = dict.fromkeys(_METRIC.findall(_QUOTED.sub("", query)))
        for name in names:
            if name.startswith("vllm_"):
                yield (f"{resource.label} {where} uses '{name}', an underscore spelling that matches no vLLM "
                       f"metric. Use '{name.replace('vllm_', 'vllm:', 1)}'.")
            elif name in removed:
                hint = f"Use '{removed[name]}'." if removed[name] else "Remove it from the query."
                yield f"{resource.label} {where} uses '{name}', which current vLLM no longer exports. {hint}"


POLICIES = [
    resource_policy(
        name="keda-scaledobject-valid",
        description=(
            "Give KEDA ScaledObjects a target, triggers, minReplicaCount <= maxReplicaCount, and Prometheus "
            "triggers serverAddress, query and a numeric threshold."
        ),
        types={SCALED_OBJECT},
        check=_check_scaled_object,
        enforcement=MANDATORY,
    ),
    resource_policy(
        name="vllm-metric-names-current",
        description="Query vLLM metrics by their current colon names (vllm:kv_cache_usage_perc, not vllm_-prefixed or removed names).",
        types={SCALED_OBJECT, PROMETHEUS_RULE},
        check=_check_metric_names,
        enforcement=MANDATORY,
        params={
            "removedMetrics": {
                "type": "object",
                "additionalProperties": {"type": "string"},
                "default": REMOVED_VLLM_METRICS,
                "description": "vLLM metrics that no longer exist, mapped to their replacement ('' if none).",
            }
        },
    ),
]
