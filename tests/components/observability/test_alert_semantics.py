"""Alerts judged by ``promtool test rules`` where the engine's semantics differ from the textbook's.

- DCGM: ``DCGM_FI_DEV_XID_ERRORS`` is the last XID and keeps its value until a driver reload
  (NVIDIA/DCGM#277, dcgm-exporter#500); ``DCGM_EXP_XID_ERRORS_COUNT`` counts XIDs, by ``xid``, over the
  exporter's window (5 minutes). The input series below have exactly that shape: the gauge holds the
  XID for the rest of the hour, the count is 1 for five one-minute samples, then 0.
- KEDA's HPA: a tier's metric up to its scaling target (plus the HPA's 10% tolerance) is the
  autoscaler's business, so series inside a tier's targets fire nothing for that tier and the same
  series above them do, at the severity that tier routes on.
- Cluster Autoscaler: the per-group backoff gauge is 1 only while a backoff lasts and 0 while the
  autoscaler retries (kubernetes/autoscaler ``processors/status/metrics_autoscaling_status_processor.go``):
  backoffs of 5, 10, 20, 30 minutes with a retry of a minute or two between them. The program's rule
  fires at 15 minutes on that shape; the textbook rule (raw gauge at 1 for 15 minutes) is still pending
  there.
"""

from __future__ import annotations

import pytest
import yaml

from components.capacity_check import parse_settings
from components.observability.prometheus import alert_rules
from tests.components.observability.test_alerting import (
    NODE,
    rendered,
    rule_groups,
    run_promtool,
    series,
    write_rules,
)
from tests.conftest import read_stack_config

LABELS = {"team": "ml-platform"}


def promtool_test(tmp_path, rules_path, tests: list[dict]) -> None:
    test_file = tmp_path / "tests.yaml"
    test_file.write_text(yaml.safe_dump({"rule_files": [str(rules_path)], "evaluation_interval": "1m", "tests": tests}, sort_keys=False))
    done = run_promtool("test", "rules", str(test_file))
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]


def rule_named(groups: list[dict], alert: str, tier: str | None = None) -> dict:
    (rule,) = [r for g in groups for r in g["rules"] if r.get("alert") == alert and (tier is None or f'tier="{tier}"' in r["expr"])]
    return rule


def fired(groups: list[dict], alert: str, labels: dict[str, str], tier: str | None = None) -> dict:
    rule = rule_named(groups, alert, tier)
    return {"exp_labels": {**labels, **rule["labels"]}, "exp_annotations": rendered(rule["annotations"], labels)}


# --- XIDs: gauge semantics ------------------------------------------------------------------------

GPU_CRITICAL = 'ALERTS{severity="critical", Hostname!=""}'


def test_an_application_xid_held_in_the_gauge_warns_once_and_never_pages(stack_plan, tmp_path):
    """XID 43 (a CUDA process killed at scale-down) at minute 2: the gauge says 43 all hour. The old
    rule (``DCGM_FI_DEV_XID_ERRORS > 0``, critical) paged from minute 7 until a driver reload."""
    groups = rule_groups(stack_plan)
    xid43 = {**NODE, "xid": "43"}
    tests = [
        {
            "interval": "1m",
            "input_series": [
                series("DCGM_FI_DEV_XID_ERRORS", NODE, "0 0 43x58"),
                series("DCGM_EXP_XID_ERRORS_COUNT", xid43, "0 0 1x4 0x54"),
            ],
            "alert_rule_test": [
                {"eval_time": "5m", "alertname": "GpuXidError", "exp_alerts": [fired(groups, "GpuXidError", xid43)]},
                {"eval_time": "5m", "alertname": "GpuXidHardwareError", "exp_alerts": []},
                {"eval_time": "30m", "alertname": "GpuXidError", "exp_alerts": []},
            ],
            "promql_expr_test": [
                {"expr": GPU_CRITICAL, "eval_time": at, "exp_samples": []} for at in ("5m", "10m", "30m", "59m")
            ],
        }
    ]
    promtool_test(tmp_path, write_rules(stack_plan, tmp_path), tests)


def test_a_hardware_xid_pages_while_counted_and_resolves_after_the_window(stack_plan, tmp_path):
    """XID 79 (fallen off the bus) at minute 2 pages (critical) once it held for a minute, and resolves
    when the exporter's 5-minute window has passed, while the gauge still reads 79."""
    groups = rule_groups(stack_plan)
    xid79 = {**NODE, "xid": "79"}
    tests = [
        {
            "interval": "1m",
            "input_series": [
                series("DCGM_FI_DEV_XID_ERRORS", NODE, "0 0 79x58"),
                series("DCGM_EXP_XID_ERRORS_COUNT", xid79, "0 0 1x4 0x54"),
            ],
            "alert_rule_test": [
                {"eval_time": "2m", "alertname": "GpuXidHardwareError", "exp_alerts": []},
                {"eval_time": "4m", "alertname": "GpuXidHardwareError", "exp_alerts": [fired(groups, "GpuXidHardwareError", xid79)]},
                {"eval_time": "6m", "alertname": "GpuXidHardwareError", "exp_alerts": [fired(groups, "GpuXidHardwareError", xid79)]},
                {"eval_time": "15m", "alertname": "GpuXidHardwareError", "exp_alerts": []},
                {"eval_time": "15m", "alertname": "GpuXidError", "exp_alerts": []},
            ],
            "promql_expr_test": [{"expr": GPU_CRITICAL, "eval_time": "30m", "exp_samples": []}],
        }
    ]
    assert fired(groups, "GpuXidHardwareError", xid79)["exp_labels"]["severity"] == "critical"
    promtool_test(tmp_path, write_rules(stack_plan, tmp_path), tests)


def test_every_hardware_xid_pages_and_no_other_does(stack_plan, tmp_path):
    groups = rule_groups(stack_plan)
    hardware = ["48", "63", "64", "74", "79", "92", "94", "95", "119", "120"]
    application = ["13", "31", "43", "45", "62", "119000"]
    inputs = [series("DCGM_EXP_XID_ERRORS_COUNT", {**NODE, "xid": x}, "1x10") for x in hardware + application]
    tests = [
        {
            "interval": "1m",
            "input_series": inputs,
            "alert_rule_test": [
                {"eval_time": "3m", "alertname": "GpuXidHardwareError",
                 "exp_alerts": [fired(groups, "GpuXidHardwareError", {**NODE, "xid": x}) for x in hardware]},
                {"eval_time": "3m", "alertname": "GpuXidError",
                 "exp_alerts": [fired(groups, "GpuXidError", {**NODE, "xid": x}) for x in application]},
            ],
        }
    ]
    promtool_test(tmp_path, write_rules(stack_plan, tmp_path), tests)


# --- Serving alerts per tier ----------------------------------------------------------------------

#: Upper bounds of the TTFT histogram in the test series (vLLM's buckets include these).
TTFT_BUCKETS = ["0.5", "1", "2.5", "5", "10", "20", "+Inf"]


def ttft(mapping: dict[str, str], le: str) -> list[dict[str, str]]:
    """60 first tokens a minute, all in the bucket ending at ``le``: histogram_quantile puts the p95 at
    95% of the way through that bucket (0.475, 0.975, 4.875, 19.5 s for le 0.5, 1, 5, 20)."""
    at = TTFT_BUCKETS.index(le)
    return [
        series("vllm:time_to_first_token_seconds_bucket", {**mapping, "le": b}, "0+60x30" if i >= at else "0x30")
        for i, b in enumerate(TTFT_BUCKETS)
    ]


def model(tier: str) -> dict[str, str]:
    return {"namespace": f"serving-{tier}", "tier": tier, "model_name": f"{tier}-model"}


def serving(tier: str, kv: float, waiting: int, ttft_le: str) -> list[dict[str, str]]:
    pod = {**model(tier), "pod": f"{tier}-0"}
    return [
        series("vllm:kv_cache_usage_perc", pod, f"{kv}x30"),
        series("vllm:num_requests_waiting", pod, f"{waiting}x30"),
        *ttft(pod, ttft_le),
    ]


@pytest.fixture(scope="module")
def prod_serving_rules() -> list[dict]:
    """The serving rules the program builds from prod's tiers (targets: interactive 4 waiting, 0.75
    KV cache, 1.5 s; embedding 32, 0.9, 0.5 s; batch 16, 0.9, 10 s)."""
    tiers = [(t.name, t.scaling) for t in parse_settings(read_stack_config("prod")).serving.tiers]
    assert [name for name, _ in tiers] == ["interactive", "embedding", "batch"]
    return [g for g in alert_rules(tiers=tiers) if g["name"] == "vllm"]


def write_groups(groups: list[dict], tmp_path):
    path = tmp_path / "serving.yaml"
    path.write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    return path


def test_series_inside_each_tiers_scaling_targets_fire_nothing(prod_serving_rules, tmp_path):
    """Batch at 0.85 KV cache, 12 waiting per replica and a 4.9 s p95 is inside its targets (0.9, 16,
    10 s); the old global thresholds (0.8, 10, 2 s critical) fired on all three, the last one paging."""
    inputs = [
        *serving("interactive", 0.75, 4, "1"),
        *serving("batch", 0.85, 12, "5"),
        *serving("embedding", 0.85, 30, "0.5"),
    ]
    tests = [
        {
            "interval": "1m",
            "input_series": inputs,
            "alert_rule_test": [
                {"eval_time": "25m", "alertname": name, "exp_alerts": []}
                for name in ("VllmKvCacheHigh", "VllmRequestsWaiting", "VllmTimeToFirstTokenSlow")
            ],
        }
    ]
    promtool_test(tmp_path, write_groups(prod_serving_rules, tmp_path), tests)


def test_series_above_each_tiers_targets_fire_for_that_tier_at_its_severity(prod_serving_rules, tmp_path):
    """Above target plus 10%: interactive at 0.85 / 12 / 4.9 s, batch at 0.995 / 20 / 19.5 s,
    embedding at 0.995 / 40 / 0.975 s. Slow first tokens page for interactive only."""
    groups = prod_serving_rules
    inputs = [
        *serving("interactive", 0.85, 12, "5"),
        *serving("batch", 0.995, 20, "20"),
        *serving("embedding", 0.995, 40, "1"),
    ]
    tiers = ("interactive", "batch", "embedding")
    expected = {
        name: [fired(groups, name, model(tier), tier) for tier in tiers]
        for name in ("VllmKvCacheHigh", "VllmRequestsWaiting", "VllmTimeToFirstTokenSlow")
    }
    severities = {e["exp_labels"]["tier"]: e["exp_labels"]["severity"] for e in expected["VllmTimeToFirstTokenSlow"]}
    assert severities == {"interactive": "critical", "batch": "warning", "embedding": "warning"}
    tests = [
        {
            "interval": "1m",
            "input_series": inputs,
            "alert_rule_test": [{"eval_time": "25m", "alertname": name, "exp_alerts": alerts} for name, alerts in expected.items()],
        }
    ]
    promtool_test(tmp_path, write_groups(groups, tmp_path), tests)


def test_each_tiers_thresholds_sit_just_above_its_scaling_targets(prod_serving_rules):
    """Threshold = target x 1.1 (the HPA's tolerance), KV cache capped at 1."""
    def threshold(alert: str, tier: str) -> float:
        return float(rule_named(prod_serving_rules, alert, tier)["expr"].rsplit(">", 1)[1])

    assert [threshold("VllmRequestsWaiting", t) for t in ("interactive", "embedding", "batch")] == [4.4, 35.2, 17.6]
    assert [threshold("VllmKvCacheHigh", t) for t in ("interactive", "embedding", "batch")] == [0.825, 0.99, 0.99]
    assert [threshold("VllmTimeToFirstTokenSlow", t) for t in ("interactive", "embedding", "batch")] == [1.65, 0.55, 11]


def test_the_plans_serving_alerts_use_each_tiers_thresholds(prod_plan, prod_serving_rules):
    (plan_vllm,) = [g for g in rule_groups(prod_plan) if g["name"] == "vllm"]
    assert plan_vllm == prod_serving_rules[0]


# --- Cluster Autoscaler: a backoff gauge that drops to 0 while the autoscaler retries --------------

#: A managed group's Auto Scaling group as EKS names it (``eks-<nodegroup>-<uuid>``).
ASG = "eks-gpu-a10g-20cc4f5e-8d11-4c7e-b3f2-6a9d0e1f2b3c"
CAPACITY = {"node_group": ASG, "reason": "placeholder-cannot-be-fulfilled"}
#: What Prometheus reads from the autoscaler's Service (target labels the ServiceMonitor adds).
CA_TARGET = {"namespace": "kube-system", "service": "cluster-autoscaler-aws-cluster-autoscaler",
             "pod": "cluster-autoscaler-aws-cluster-autoscaler-0", "job": "cluster-autoscaler-aws-cluster-autoscaler"}
#: The engine's shape, one sample a minute from t=0: backed off 5 minutes (0-4m), 0 for the retry
#: (5m), backed off 10 minutes (6-15m), a slower retry (16-17m: the ASG refresh came a minute later),
#: 20 minutes (18-37m), retry (38m), 30 minutes (39-68m). Before its first backoff a group reports
#: reason "" at 0.
STILL_FAILING = "1x4 0 1x9 0x1 1x19 0 1x29"
#: Two failed scale-ups, then the retry at 16m launches the node: 0 from then on.
RECOVERS = "1x4 0 1x9 0x40"
#: One failed scale-up that its retry fixes (a brief Spot shortage).
ONE_FAILURE = "1x4 0x60"


def backoff_series(values: str, leader: str = "0") -> list[dict[str, str]]:
    """The leader's series for the failing reason and its never-used empty reason; a second replica
    (not the leader) sets no per-group series at all."""
    target = {**CA_TARGET, "pod": f"cluster-autoscaler-aws-cluster-autoscaler-{leader}"}
    return [
        series("cluster_autoscaler_node_group_backoff_status", {**target, **CAPACITY}, values),
        series("cluster_autoscaler_node_group_backoff_status", {**target, "node_group": ASG, "reason": ""}, "0x67"),
    ]


@pytest.fixture(scope="module")
def autoscaler_rules(tmp_path_factory):
    """The program's rule, and beside it the textbook rule: the raw gauge at 1 for the same ``for:``."""
    from components.observability.prometheus import cluster_autoscaler_rules

    group = cluster_autoscaler_rules()
    engine = rule_named([group], "ClusterAutoscalerCannotGrowNodeGroup")
    textbook = {**engine, "alert": "TextbookNodeGroupBackedOff",
                "expr": 'max by (node_group, reason) (cluster_autoscaler_node_group_backoff_status{reason!=""}) == 1'}
    path = tmp_path_factory.mktemp("autoscaler") / "autoscaler.yaml"
    path.write_text(yaml.safe_dump({"groups": [group, {"name": "textbook", "rules": [textbook]}]}, sort_keys=False))
    return [group], engine, path


def test_the_rule_reads_the_gauge_over_the_retry_gap_and_holds_fifteen_minutes(autoscaler_rules):
    _, engine, _ = autoscaler_rules
    assert engine["expr"] == ('max by (node_group, reason) '
                              '(max_over_time(cluster_autoscaler_node_group_backoff_status{reason!=""}[5m])) == 1')
    assert (engine["for"], engine["labels"]["severity"]) == ("15m", "warning")


def test_a_group_still_failing_fires_where_the_textbook_rule_stays_pending(autoscaler_rules, tmp_path):
    """The engine's gauge drops to 0 for each retry: ``gauge == 1`` for 15 minutes is pending through the
    5- and 10-minute backoffs, fires only at 33m, 15 minutes into the third one, and resolves at the next
    retry. The program's rule bridges each retry (a two-minute one too) and fires from 15m on."""
    groups, _, path = autoscaler_rules
    expected = [fired(groups, "ClusterAutoscalerCannotGrowNodeGroup", CAPACITY)]
    expected_textbook = expected  # same labels and annotations, another name
    tests = [
        {
            "interval": "1m",
            "input_series": backoff_series(STILL_FAILING),
            "alert_rule_test": [
                {"eval_time": "13m", "alertname": "ClusterAutoscalerCannotGrowNodeGroup", "exp_alerts": []},
                {"eval_time": "20m", "alertname": "ClusterAutoscalerCannotGrowNodeGroup", "exp_alerts": expected},
                {"eval_time": "20m", "alertname": "TextbookNodeGroupBackedOff", "exp_alerts": []},
                {"eval_time": "35m", "alertname": "TextbookNodeGroupBackedOff", "exp_alerts": expected_textbook},
                {"eval_time": "39m", "alertname": "ClusterAutoscalerCannotGrowNodeGroup", "exp_alerts": expected},
                {"eval_time": "39m", "alertname": "TextbookNodeGroupBackedOff", "exp_alerts": []},
            ],
        }
    ]
    promtool_test(tmp_path, path, tests)


def test_a_group_that_recovers_resolves_and_one_failure_stays_silent(autoscaler_rules, tmp_path):
    """Failing twice (5 + 10 minutes) then launching: firing at 15m, resolved once the window has no 1
    left (from 21m). One failure whose retry launches never fires."""
    groups, _, path = autoscaler_rules
    expected = [fired(groups, "ClusterAutoscalerCannotGrowNodeGroup", CAPACITY)]
    name = "ClusterAutoscalerCannotGrowNodeGroup"
    tests = [
        {
            "interval": "1m",
            "input_series": backoff_series(RECOVERS),
            "alert_rule_test": [
                {"eval_time": "18m", "alertname": name, "exp_alerts": expected},
                {"eval_time": "23m", "alertname": name, "exp_alerts": []},
                {"eval_time": "50m", "alertname": name, "exp_alerts": []},
            ],
        },
        {
            "interval": "1m",
            "input_series": backoff_series(ONE_FAILURE),
            "alert_rule_test": [{"eval_time": at, "alertname": name, "exp_alerts": []} for at in ("5m", "9m", "15m", "30m")],
        },
    ]
    promtool_test(tmp_path, path, tests)


def test_a_leader_change_keeps_one_alert_per_group_and_reason(autoscaler_rules, tmp_path):
    """With two replicas only the leader sets the gauge; a new leader (another pod) continues the same
    backoff: still one alert, by group and reason, not by pod."""
    groups, _, path = autoscaler_rules
    first, second = backoff_series("1x4 0 1x4 _x58", leader="0"), backoff_series("_x10 1x4 1x20", leader="1")
    tests = [
        {
            "interval": "1m",
            "input_series": [*first, *second],
            "alert_rule_test": [
                {"eval_time": "20m", "alertname": "ClusterAutoscalerCannotGrowNodeGroup",
                 "exp_alerts": [fired(groups, "ClusterAutoscalerCannotGrowNodeGroup", CAPACITY)]},
            ],
        }
    ]
    promtool_test(tmp_path, path, tests)
