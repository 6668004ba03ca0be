"""keda-scaledobject-valid and vllm-metric-names-current."""

from __future__ import annotations

import pytest

from tests.policies.builders import DELETE, UNKNOWN, patch, prometheus_rule, scaled_object
from tests.policies.conftest import one

KEDA, METRICS = "keda-scaledobject-valid", "vllm-metric-names-current"
TRIGGER = "spec.triggers.0.metadata"


@pytest.mark.parametrize(
    "query",
    [
        "sum(vllm:num_requests_waiting)",
        "avg(vllm:kv_cache_usage_perc{model_name=\"llama\"})",
        "histogram_quantile(0.95, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket[2m])))",
        "sum(rate(vllm:generation_tokens_total[1m])) / sum(vllm:num_requests_running)",
        "increase(vllm:num_preemptions_total[5m])",
        "sum(up{job=\"vllm_server\"})",
    ],
    ids=["waiting", "kv-cache", "ttft", "tokens", "preemptions", "quoted-label-value"],
)
def test_current_metric_names(pack, query):
    assert pack.analyze(scaled_object(query)) == []


@pytest.mark.parametrize(
    "query, fragments",
    [
        ("avg(vllm:gpu_cache_usage_perc)",
         ["'vllm:gpu_cache_usage_perc', which current vLLM no longer exports", "Use 'vllm:kv_cache_usage_perc'"]),
        ("sum(vllm_num_requests_waiting)", ["'vllm_num_requests_waiting', an underscore spelling", "Use 'vllm:num_requests_waiting'"]),
        ("sum(vllm:num_requests_swapped)", ["'vllm:num_requests_swapped'", "Remove it from the query"]),
    ],
    ids=["gpu-cache", "underscore", "swapped"],
)
def test_stale_metric_names_in_keda(pack, query, fragments):
    one(pack.messages(scaled_object(query), METRICS), "triggers[0].metadata.query", *fragments)


def test_stale_metric_names_in_alerts(pack):
    rule = prometheus_rule("vllm:kv_cache_usage_perc > 0.9", "avg(vllm:gpu_cache_usage_perc) > 0.9")
    one(pack.messages(rule, METRICS), "spec.groups[0].rules[1].expr uses 'vllm:gpu_cache_usage_perc'")


def test_removed_metrics_are_configurable(pack):
    pack.configure({METRICS: {"removedMetrics": {"vllm:num_requests_running": "vllm:num_requests_waiting"}}})
    one(pack.messages(scaled_object("sum(vllm:num_requests_running)"), METRICS), "Use 'vllm:num_requests_waiting'")


@pytest.mark.parametrize(
    "changes, fragment",
    [
        ({f"{TRIGGER}.serverAddress": DELETE}, "prometheus trigger #0 lacks metadata.serverAddress"),
        ({f"{TRIGGER}.query": "", f"{TRIGGER}.threshold": DELETE}, "lacks metadata.query, metadata.threshold"),
        ({f"{TRIGGER}.threshold": "five"}, "metadata.threshold 'five' is not a number"),
        ({f"{TRIGGER}.activationThreshold": "x"}, "metadata.activationThreshold 'x' is not a number"),
        ({"spec.minReplicaCount": 5, "spec.maxReplicaCount": 2}, "minReplicaCount 5 is above maxReplicaCount 2"),
        ({"spec.minReplicaCount": 101, "spec.maxReplicaCount": DELETE}, "minReplicaCount 101 is above maxReplicaCount 100"),
        ({"spec.idleReplicaCount": 1}, "idleReplicaCount 1 must be below minReplicaCount 1"),
        ({"spec.scaleTargetRef": DELETE}, "spec.scaleTargetRef.name is required"),
        ({"spec.triggers": []}, "spec.triggers is empty"),
    ],
    ids=["server", "query-threshold", "threshold", "activation", "min-max", "default-max", "idle", "target", "triggers"],
)
def test_invalid_scaled_objects(pack, changes, fragment):
    one(pack.messages(patch(scaled_object(), changes), KEDA), "cannot scale as written", fragment)


@pytest.mark.parametrize(
    "changes",
    [
        {"spec.minReplicaCount": 0, f"{TRIGGER}.activationThreshold": "1"},
        {"spec.minReplicaCount": DELETE, "spec.maxReplicaCount": DELETE},
        {"spec.triggers.0": {"type": "cpu", "metadata": {"value": "60"}}},
        {"spec.minReplicaCount": UNKNOWN, "spec.maxReplicaCount": 0},
        {TRIGGER: UNKNOWN},
        {f"{TRIGGER}.serverAddress": UNKNOWN, f"{TRIGGER}.threshold": UNKNOWN},
        {"spec": UNKNOWN},
        {"spec.triggers": UNKNOWN},
    ],
    ids=["scale-to-zero", "defaults", "non-prometheus", "unknown-min", "unknown-metadata", "unknown-fields", "unknown-spec",
         "unknown-triggers"],
)
def test_valid_or_unknown_scaled_objects(pack, changes):
    assert pack.messages(patch(scaled_object(), changes), KEDA) == []


def test_unknown_query_is_not_judged(pack):
    assert pack.messages(patch(scaled_object(), {f"{TRIGGER}.query": UNKNOWN}), METRICS) == []
    assert pack.messages(patch(prometheus_rule("x"), {"spec.groups": UNKNOWN}), METRICS) == []
