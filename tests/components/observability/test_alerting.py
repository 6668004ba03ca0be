"""Alert rules and Alertmanager, judged by Prometheus's own tools on what the program emits:
``promtool check rules`` on every PrometheusRule, ``promtool test rules`` unit tests in which each alert
fires on its failure and stays silent on a healthy node serving normal load (vLLM's framebuffer
preallocation included), and ``amtool check-config`` / ``amtool config routes test`` on the
Alertmanager configuration."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.conftest import plan_with, read_stack_config
from tests.support.litellm_proxy import unwrap
from tests.support.prometheus_tools import require_binary

RULE = "kubernetes:monitoring.coreos.com/v1:PrometheusRule"
A10G_MIB = 23028
NODE = {"Hostname": "ip-10-0-1-1", "gpu": "0"}
MODEL = {"namespace": "serving-interactive", "tier": "interactive", "model_name": "m"}
#: The autoscaler's scrape target (the chart's Service in kube-system) and a group it backed off.
AUTOSCALER = {"namespace": "kube-system", "service": "cluster-autoscaler-aws-cluster-autoscaler",
              "job": "cluster-autoscaler-aws-cluster-autoscaler", "instance": "10.0.1.5:8085"}
BACKED_OFF = {"node_group": "eks-gpu-a10g-20cc4f5e-8d11-4c7e-b3f2-6a9d0e1f2b3c", "reason": "placeholder-cannot-be-fulfilled"}


def rule_groups(plan) -> list[dict]:
    (rule,) = [r.inputs for r in plan.of_type(RULE)]
    return rule["spec"]["groups"]


def alerts_of(plan) -> dict[str, dict]:
    """Each alert's rule as it applies to the interactive tier (serving alerts have one rule per tier:
    the interactive tier's when the plan names it, else the rule for tiers without settings)."""
    found: dict[str, dict] = {}
    for rule in (r for g in rule_groups(plan) for r in g["rules"] if "alert" in r):
        tier = re.search(r'tier(=|!~)"([^"]*)"', rule["expr"])
        applies = tier is None or (tier.group(1) == "=") == ("interactive" in tier.group(2).split("|"))
        if applies:
            assert rule["alert"] not in found, f"two {rule['alert']} rules apply to the interactive tier"
            found[rule["alert"]] = rule
    return found


def serving_utilization(plan) -> float:
    """The highest --gpu-memory-utilization among the emitted vLLM Deployments."""
    values = []
    for deployment in plan.of_type("kubernetes:apps/v1:Deployment"):
        for container in deployment.inputs["spec"]["template"]["spec"]["containers"]:
            args = container.get("args", [])
            if "--gpu-memory-utilization" in args:
                values.append(float(args[args.index("--gpu-memory-utilization") + 1]))
    return max(values)


def labels(mapping: dict[str, str]) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in mapping.items()) + "}"


def series(name: str, mapping: dict[str, str], values: str) -> dict[str, str]:
    return {"series": f"{name}{labels(mapping)}", "values": values}


def histogram(name: str, mapping: dict[str, str], per_bucket: dict[str, int]) -> list[dict[str, str]]:
    """A histogram whose observations (per minute) land in the given upper bounds."""
    out, total = [], 0
    for le in ["0.5", "1", "2.5", "5", "10", "+Inf"]:
        total += per_bucket.get(le, 0)
        out.append(series(name, {**mapping, "le": le}, f"0+{total}x30"))
    return out


def rendered(annotations: dict[str, str], alert_labels: dict[str, str], value: str = "") -> dict[str, str]:
    """Annotations as Prometheus renders them for these labels (the templates used here only)."""
    def one(text: str) -> str:
        text = re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: alert_labels.get(m.group(1), ""), text)
        return text.replace("{{ $value }}", value)

    return {k: one(v) for k, v in annotations.items()}


def tier_cost_inputs(plan) -> tuple[list[dict], list[dict]]:
    """The interactive model on a g5.12xlarge (4 GPUs, priced from the shipped catalog) for 26 hours:
    idle (no tokens, KV cache empty), or busy (100,000 generated tokens a minute, which its Bedrock
    fallback would bill at several dollars an hour, and the KV cache at 60%)."""
    (model,) = [d.inputs["metadata"]["name"] for d in plan.of_type("kubernetes:apps/v1:Deployment")
                if d.inputs["metadata"].get("namespace") == "serving-interactive"
                and d.inputs["metadata"]["labels"].get("app.kubernetes.io/name") == "vllm"]
    pod = {"namespace": "serving-interactive", "pod": f"{model}-0"}
    placed = [
        series("kube_node_labels", {"node": "gpu-a", "label_node_kubernetes_io_instance_type": "g5.12xlarge",
                                    "label_karpenter_sh_capacity_type": "on-demand"}, "1x1560"),
        series("kube_pod_container_resource_requests", {**pod, "container": "vllm", "node": "gpu-a",
                                                        "resource": "nvidia_com_gpu", "unit": "integer"}, "4x1560"),
        series("kube_pod_status_phase", {**pod, "phase": "Running"}, "1x1560"),
        series("kube_pod_labels", {**pod, "label_app_kubernetes_io_name": "vllm", "label_app_kubernetes_io_instance": model,
                                   "label_llm_platform_io_tier": "interactive"}, "1x1560"),
    ]
    vllm = {"namespace": "serving-interactive", "tier": "interactive", "pod": pod["pod"], "model_name": model}
    idle = [*placed, series("vllm:prompt_tokens_total", vllm, "0x1560"), series("vllm:generation_tokens_total", vllm, "0x1560"),
            series("vllm:kv_cache_usage_perc", vllm, "0x1560")]
    busy = [*placed, series("vllm:prompt_tokens_total", vllm, "0+100000x1560"),
            series("vllm:generation_tokens_total", vllm, "0+100000x1560"), series("vllm:kv_cache_usage_perc", vllm, "0.6x1560")]
    return idle, busy


def unit_tests(plan) -> tuple[list[dict], list[dict], set[str]]:
    """One failing and one healthy case per alert; returns the tests (1m evaluation), the GPU-hour
    budget tests (5m evaluation, as the 30-day rule samples) and the alert names covered."""
    util = serving_utilization(plan)
    used_healthy = round(A10G_MIB * util)
    alerts = alerts_of(plan)
    cases: dict[str, tuple[list[dict], list[dict], str, dict]] = {
        # name: (failing input, healthy input, eval time, labels expected on the failing alert)
        "GpuFramebufferExhausted": (
            [series("DCGM_FI_DEV_FB_USED", NODE, f"{A10G_MIB - 200}x30"), series("DCGM_FI_DEV_FB_FREE", NODE, "200x30")],
            [series("DCGM_FI_DEV_FB_USED", NODE, f"{used_healthy}x30"), series("DCGM_FI_DEV_FB_FREE", NODE, f"{A10G_MIB - used_healthy}x30")],
            "20m",
            {**NODE, "severity": "warning"},
        ),
        # The exporter's windowed count (5 minutes) beside the last-XID gauge, which keeps its value.
        "GpuXidHardwareError": (
            [series("DCGM_EXP_XID_ERRORS_COUNT", {**NODE, "xid": "79"}, "0 0 1x4 0x24"), series("DCGM_FI_DEV_XID_ERRORS", NODE, "0 0 79x28")],
            [series("DCGM_EXP_XID_ERRORS_COUNT", {**NODE, "xid": "43"}, "0 0 1x4 0x24"), series("DCGM_FI_DEV_XID_ERRORS", NODE, "0 0 43x28")],
            "5m",
            {**NODE, "xid": "79", "severity": "critical"},
        ),
        "GpuXidError": (
            [series("DCGM_EXP_XID_ERRORS_COUNT", {**NODE, "xid": "43"}, "0 0 1x4 0x24"), series("DCGM_FI_DEV_XID_ERRORS", NODE, "0 0 43x28")],
            [series("DCGM_EXP_XID_ERRORS_COUNT", {**NODE, "xid": "43"}, "0x30"), series("DCGM_FI_DEV_XID_ERRORS", NODE, "0x30")],
            "5m",
            {**NODE, "xid": "43", "severity": "warning"},
        ),
        "VllmKvCacheHigh": (
            [series("vllm:kv_cache_usage_perc", {**MODEL, "pod": "a"}, "0.93x30")],
            [series("vllm:kv_cache_usage_perc", {**MODEL, "pod": "a"}, "0.55x30")],
            "20m",
            {**MODEL, "severity": "warning"},
        ),
        "VllmRequestsWaiting": (
            [series("vllm:num_requests_waiting", {**MODEL, "pod": "a"}, "25x30")],
            [series("vllm:num_requests_waiting", {**MODEL, "pod": "a"}, "2x30")],
            "20m",
            {**MODEL, "severity": "warning"},
        ),
        "VllmTimeToFirstTokenSlow": (
            histogram("vllm:time_to_first_token_seconds_bucket", {**MODEL, "pod": "a"}, {"2.5": 2, "5": 60}),
            histogram("vllm:time_to_first_token_seconds_bucket", {**MODEL, "pod": "a"}, {"0.5": 60, "1": 2}),
            "25m",
            {**MODEL, "severity": "critical"},
        ),
        "VllmPreemptions": (
            [series("vllm:num_preemptions_total", {**MODEL, "pod": "a"}, "0+5x30")],
            [series("vllm:num_preemptions_total", {**MODEL, "pod": "a"}, "0x30")],
            "25m",
            {**MODEL, "severity": "warning"},
        ),
        "GatewayMetricsMissing": (
            [series("up", {"namespace": "llm-gateway", "service": "llm-gateway", "job": "llm-gateway", "instance": "a"}, "0x30")],
            [series("up", {"namespace": "llm-gateway", "service": "llm-gateway", "job": "llm-gateway", "instance": "a"}, "1x30")],
            "20m",
            {"severity": "critical"},
        ),
        # The autoscaler's backoff gauge as the engine writes it: 1 while backed off, 0 for each retry.
        "ClusterAutoscalerCannotGrowNodeGroup": (
            [series("cluster_autoscaler_node_group_backoff_status", {**AUTOSCALER, **BACKED_OFF}, "1x4 0 1x9 0 1x19")],
            [series("cluster_autoscaler_node_group_backoff_status", {**AUTOSCALER, **BACKED_OFF}, "0x30")],
            "20m",
            {**BACKED_OFF, "severity": "warning"},
        ),
        "ClusterAutoscalerMetricsMissing": (
            [series("up", AUTOSCALER, "0x30")],
            [series("up", AUTOSCALER, "1x30")],
            "20m",
            {"severity": "warning"},
        ),
    }
    if "LlmTierCostAboveBedrock" in alerts:
        cases["LlmTierCostAboveBedrock"] = (*tier_cost_inputs(plan), "26h", {"tier": "interactive", "severity": "warning"})
    tests: list[dict] = []
    for name, (failing, healthy, at, expected) in cases.items():
        if name not in alerts:
            continue
        tests.append(
            {
                "interval": "1m",
                "input_series": failing,
                "alert_rule_test": [
                    {
                        "eval_time": at,
                        "alertname": name,
                        "exp_alerts": [
                            {
                                "exp_labels": {**expected, "team": "ml-platform"},
                                "exp_annotations": rendered(alerts[name]["annotations"], expected),
                            }
                        ],
                    }
                ],
            }
        )
        tests.append({"interval": "1m", "input_series": healthy, "alert_rule_test": [{"eval_time": at, "alertname": name, "exp_alerts": []}]})
    budget_tests: list[dict] = []
    if "GpuHoursAboveMonthlyBudget" in alerts:
        budget = float(alerts["GpuHoursAboveMonthlyBudget"]["expr"].rsplit(">", 1)[1])
        over = int(budget / 40) + 1  # GPUs that spend the budget in 40 hours
        gpus = {"resource": "nvidia_com_gpu", "node": "n1", "unit": "integer"}
        budget_tests.append(
            {
                "interval": "5m",
                "input_series": [series("kube_node_status_allocatable", gpus, f"{over}x600")],
                "alert_rule_test": [
                    {
                        "eval_time": "48h",
                        "alertname": "GpuHoursAboveMonthlyBudget",
                        "exp_alerts": [
                            {
                                "exp_labels": {"severity": "warning", "team": "ml-platform"},
                                "exp_annotations": alerts["GpuHoursAboveMonthlyBudget"]["annotations"],
                            }
                        ],
                    }
                ],
            }
        )
        budget_tests.append(
            {
                "interval": "5m",
                "input_series": [series("kube_node_status_allocatable", gpus, "8x600")],
                "alert_rule_test": [{"eval_time": "48h", "alertname": "GpuHoursAboveMonthlyBudget", "exp_alerts": []}],
                # 8 GPUs for 48 hours, sampled every 5 minutes from t=0: 577 samples of 8 GPUs / 12 per hour.
                "promql_expr_test": [
                    {"expr": "llm_platform:gpu_hours:30d", "eval_time": "48h", "exp_samples": [{"labels": "llm_platform:gpu_hours:30d", "value": 8 * (48 * 12 + 1) / 12}]}
                ],
            }
        )
        cases["GpuHoursAboveMonthlyBudget"] = None  # type: ignore[assignment]
    return tests, budget_tests, set(cases) & set(alerts)


def run_promtool(*args: str) -> subprocess.CompletedProcess[str]:
    promtool = require_binary("promtool", "prometheus")
    return subprocess.run([promtool, *args], capture_output=True, text=True, timeout=300)


def write_rules(plan, tmp_path: Path) -> Path:
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump({"groups": rule_groups(plan)}, sort_keys=False))
    return path


def test_every_rule_passes_promtool_check(stack_plan, tmp_path):
    done = run_promtool("check", "rules", str(write_rules(stack_plan, tmp_path)))
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_alert_fires_on_its_failure_and_stays_silent_when_healthy(stack_plan, tmp_path):
    rules = write_rules(stack_plan, tmp_path)
    tests, budget_tests, covered = unit_tests(stack_plan)
    assert covered == set(alerts_of(stack_plan)), f"alerts without a unit test: {set(alerts_of(stack_plan)) - covered}"
    for name, interval, group in (("tests", "1m", tests), ("budget", "5m", budget_tests)):
        if not group:
            continue
        test_file = tmp_path / f"{name}.yaml"
        test_file.write_text(yaml.safe_dump({"rule_files": [str(rules)], "evaluation_interval": interval, "tests": group}, sort_keys=False))
        done = run_promtool("test", "rules", str(test_file))
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_framebuffer_alert_would_have_fired_on_healthy_nodes_at_the_seed_threshold(prod_plan):
    """The seeds' 10% free threshold against vLLM's preallocation: the reason the threshold moved."""
    util = serving_utilization(prod_plan)
    assert 1 - util < 0.10
    expr = alerts_of(prod_plan)["GpuFramebufferExhausted"]["expr"]
    assert float(expr.rsplit("<", 1)[1]) < 1 - util


# --- Alertmanager ---------------------------------------------------------------------------------

ALL_RECEIVERS = {
    "receivers": [
        {"name": "pager", "pagerDuty": {"routingKey": "0123456789abcdef0123456789abcdef"}},
        {"name": "chat", "slack": {"apiUrl": "https://hooks.slack.com/services/T000/B000/XXXXSECRETXXXX", "channel": "#ml-platform"}},
        {"name": "topic", "sns": {"topicArn": "arn:aws:sns:us-east-1:123456789012:llm-alerts"}},
        {"name": "hook", "webhook": {"url": "https://alerts.example.com/hook?token=SECRETTOKEN"}},
    ],
    "routes": [
        {"receiver": "pager", "severities": ["critical"], "tiers": ["interactive"]},
        {"receiver": "topic", "severities": ["critical"]},
        {"receiver": "chat", "severities": ["warning"]},
    ],
    "defaultReceiver": "hook",
}


def alertmanager_yaml(plan) -> str:
    (secret,) = [r.inputs for r in plan.of_type("kubernetes:core/v1:Secret") if r.inputs["metadata"]["name"] == "alertmanager-llm-platform"]
    data = unwrap(secret["stringData"])
    return unwrap(data["alertmanager.yaml"])


@pytest.fixture(scope="module")
def all_receivers_plan():
    observability = {**read_stack_config("dev")["llm-platform:observability"], "alerting": ALL_RECEIVERS}
    return plan_with("dev", observability=observability)


def amtool(config: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    binary = require_binary("amtool", "prometheus-alertmanager")
    path = tmp_path / "alertmanager.yaml"
    path.write_text(config)
    return subprocess.run([binary, "check-config", str(path)], capture_output=True, text=True, timeout=60)


def route_of(config: str, tmp_path: Path, **alert_labels: str) -> str:
    binary = require_binary("amtool", "prometheus-alertmanager")
    path = tmp_path / "alertmanager.yaml"
    path.write_text(config)
    done = subprocess.run(
        [binary, "config", "routes", "test", f"--config.file={path}", *(f"{k}={v}" for k, v in alert_labels.items())],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_shipped_alertmanager_configs_pass_amtool(stack_plan, tmp_path):
    done = amtool(alertmanager_yaml(stack_plan), tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


def test_prod_pages_on_critical_and_interactive_warnings(prod_plan, tmp_path):
    config = alertmanager_yaml(prod_plan)
    assert route_of(config, tmp_path, alertname="VllmTimeToFirstTokenSlow", severity="critical", tier="batch") == "oncall-pager"
    assert route_of(config, tmp_path, alertname="VllmKvCacheHigh", severity="warning", tier="interactive") == "oncall-pager"
    assert route_of(config, tmp_path, alertname="VllmKvCacheHigh", severity="warning", tier="batch") == "ml-platform-alerts"
    assert route_of(config, tmp_path, alertname="Watchdog", severity="none") == "null"


def test_prod_sends_a_group_that_cannot_grow_to_the_team_not_the_pager(prod_plan, tmp_path):
    """The autoscaler's alert carries no tier: it goes where warnings go, and pages nobody."""
    config = alertmanager_yaml(prod_plan)
    (rule,) = [r for g in rule_groups(prod_plan) for r in g["rules"] if r.get("alert") == "ClusterAutoscalerCannotGrowNodeGroup"]
    labels = {**BACKED_OFF, **rule["labels"]}
    assert route_of(config, tmp_path, alertname=rule["alert"], **labels) == "ml-platform-alerts"


def test_every_receiver_kind_passes_amtool_and_routes_by_severity_and_tier(all_receivers_plan, tmp_path):
    config = alertmanager_yaml(all_receivers_plan)
    done = amtool(config, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert route_of(config, tmp_path, severity="critical", tier="interactive") == "pager"
    assert route_of(config, tmp_path, severity="critical", tier="batch") == "topic"
    assert route_of(config, tmp_path, severity="warning", tier="interactive") == "chat"
    assert route_of(config, tmp_path, severity="info") == "hook"
    parsed = yaml.safe_load(config)
    assert parsed["inhibit_rules"] == [
        {
            "source_matchers": ['severity="critical"', 'namespace=~".+"', 'model_name=~".+"'],
            "target_matchers": ['severity=~"warning|info"', 'namespace=~".+"', 'model_name=~".+"'],
            "equal": ["namespace", "model_name"],
        },
        {
            "source_matchers": ['severity="critical"', 'Hostname=~".+"', 'gpu=~".+"'],
            "target_matchers": ['severity=~"warning|info"', 'Hostname=~".+"', 'gpu=~".+"'],
            "equal": ["Hostname", "gpu"],
        },
    ]


def test_receiver_secrets_stay_secret_in_the_plan_and_in_errors(all_receivers_plan, tmp_path):
    from automation.offline.manifests import redact_secrets
    from components.capacity_check import parse_settings
    from components.settings import SettingsError

    plan_text = yaml.safe_dump(redact_secrets(all_receivers_plan.to_json()))
    for secret in ("XXXXSECRETXXXX", "0123456789abcdef0123456789abcdef", "SECRETTOKEN"):
        assert secret not in plan_text
    config = read_stack_config("dev")
    bad = {"receivers": [{"name": "chat", "slack": {"apiUrl": "http://hooks.example/SECRETVALUE", "channel": "#x"}}], "defaultReceiver": "chat"}
    config["llm-platform:observability"] = {"alerting": bad}
    with pytest.raises(SettingsError) as error:
        parse_settings(config)
    assert "observability.alerting.receivers[0].slack.apiUrl" in str(error.value)
    assert "SECRETVALUE" not in str(error.value)


def test_encrypted_receiver_values_pass_the_offline_check(tmp_path):
    """A stack file read offline holds ``{secure: ...}``: settings accept it and the plan stands."""
    encrypted = {"secure": "v1:AAAAAAAAAAAAAAAA:BBBBBBBBBBBBBBBBBBBBBBBB"}
    alerting = {"receivers": [{"name": "chat", "slack": {"apiUrl": encrypted, "channel": "#x"}}], "defaultReceiver": "chat"}
    plan = plan_with("dev", observability={"alerting": alerting})
    done = amtool(alertmanager_yaml(plan), tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


def _days(duration: str) -> float:
    units = {"s": 1 / 86400, "m": 1 / 1440, "h": 1 / 24, "d": 1, "w": 7, "y": 365}
    return sum(float(n) * units[u] for n, u in re.findall(r"(\d+)([smhdwy])", duration))


def test_retention_covers_the_longest_rule_window_on_an_encrypted_volume(stack_plan):
    windows = [
        _days(w)
        for g in rule_groups(stack_plan)
        for r in g["rules"]
        for w in re.findall(r"\[([0-9smhdwy]+)(?::[0-9smhdwy]+)?\]", r["expr"])
    ]
    (release,) = [r.inputs for r in stack_plan.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "kube-prometheus-stack"]
    spec = release["values"]["prometheus"]["prometheusSpec"]
    assert _days(spec["retention"]) >= max(windows) == 30
    claim = spec["storageSpec"]["volumeClaimTemplate"]["spec"]
    (storage_class,) = [r.inputs for r in stack_plan.of_type("kubernetes:storage.k8s.io/v1:StorageClass") if r.inputs["metadata"]["name"] == claim["storageClassName"]]
    assert storage_class["parameters"] == {"type": "gp3", "encrypted": "true"}
    assert spec["replicas"] == (2 if stack_plan.stack == "prod" else 1)


def test_alertmanager_keeps_silences_on_an_encrypted_volume(stack_plan):
    """Alertmanager's silences and notification log live on a gp3-encrypted claim, so a restarted
    pod neither forgets silences nor re-sends notifications. Judged on the Alertmanager resource
    Helm's engine renders from the program's values, against the CRD the chart ships."""
    from components import versions
    from tests.components.test_helm_render import rendered
    from tests.support import helm_render

    (release,) = [r.inputs for r in stack_plan.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "kube-prometheus-stack"]
    storage_classes = {
        r.inputs["metadata"]["name"]: r.inputs for r in stack_plan.of_type("kubernetes:storage.k8s.io/v1:StorageClass")
    }
    objects = rendered(stack_plan, versions.KUBE_PROMETHEUS_STACK)
    (alertmanager,) = [o for o in objects if o["kind"] == "Alertmanager"]
    claim = alertmanager["spec"]["storage"]["volumeClaimTemplate"]["spec"]
    assert claim == release["values"]["alertmanager"]["alertmanagerSpec"]["storage"]["volumeClaimTemplate"]["spec"]
    assert claim["accessModes"] == ["ReadWriteOnce"] and claim["resources"]["requests"]["storage"] == "10Gi"
    assert storage_classes[claim["storageClassName"]]["parameters"] == {"type": "gp3", "encrypted": "true"}
    assert helm_render.custom_resource_errors(alertmanager, helm_render.chart_crd_schemas(versions.KUBE_PROMETHEUS_STACK)) == []
