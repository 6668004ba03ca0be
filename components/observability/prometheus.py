"""Observability: Prometheus (kube-prometheus-stack), vLLM scraping, GPU/serving alerts, where they
go, and Grafana dashboards.

Prometheus here is also KEDA's data source, so serving scales on the same numbers people alert on.
DCGM metrics come from the DCGM exporter's ServiceMonitor (standalone chart or GPU Operator).
Every rule, route and dashboard query here is exercised by the tests on a real Prometheus, promtool
and amtool.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from components import contract, versions
from components.config_files import yaml_text
from components.observability.dashboards import DASHBOARD_LABEL, NODE_LABELS_EXPORTED, dashboards
from components.helm import pinned_release
from components.iam import pod_identity_role
from components.observability.alertmanager import alertmanager_config, sns_publish_policy
from components.settings.observability import GPU_HOURS_WINDOW_DAYS
from components.settings.observability import Observability as ObservabilitySettings
from components.settings.observability import Prometheus as PrometheusSettings

TYPE = "llm-platform:index:Observability"
NAMESPACE = "monitoring"
RELEASE = "kube-prometheus-stack"
PROMETHEUS_URL = f"http://{RELEASE}-prometheus.{NAMESPACE}.svc.cluster.local:9090"
STORAGE_CLASS = "gp3-encrypted"
#: Secret holding alertmanager.yaml (the chart's Alertmanager reads it instead of generating one).
ALERTMANAGER_SECRET = "alertmanager-llm-platform"
#: Alertmanager's volume: silences and the notification log are small; gp3's minimum cost applies anyway.
ALERTMANAGER_VOLUME_GIB = 10

#: Alert thresholds, in one place. GPU utilization has no alert: a busy GPU is what serving is for;
#: saturation shows as waiting requests and time to first token, which alert below.
KV_CACHE_MAX = 0.80
WAITING_REQUESTS_MAX = 10
TTFT_P95_MAX_SECONDS = 2
#: vLLM keeps ``1 - gpuMemoryUtilization`` of the framebuffer free by design (8% at 0.92); the alert
#: fires below half of what the least generous model leaves (see :func:`framebuffer_free_min`).
DEFAULT_GPU_MEMORY_UTILIZATION = 0.9
SERVING_NAMESPACE_RE = "serving-.*"
GATEWAY_UP = 'up{namespace="llm-gateway",service="llm-gateway"}'


def framebuffer_free_min(gpu_memory_utilizations: list[float]) -> float:
    """Free-framebuffer share below which something beyond vLLM's preallocation holds GPU memory."""
    highest = max(gpu_memory_utilizations, default=DEFAULT_GPU_MEMORY_UTILIZATION)
    return round((1 - highest) / 2, 4)


def _alert(name: str, expr: str, duration: str, severity: str, summary: str, runbook: str) -> dict[str, object]:
    return {
        "alert": name,
        "expr": expr,
        "for": duration,
        "labels": {"severity": severity, "team": "ml-platform"},
        "annotations": {"summary": summary, "description": runbook},
    }


def alert_rules(fb_free_min: float = framebuffer_free_min([])) -> list[dict[str, object]]:
    """GPU, serving and gateway alerts with what to check and what to do, in the order an on-call
    reads them. vLLM series carry ``tier`` (PodMonitor relabeling), which Alertmanager routes on."""
    vllm = "namespace, tier, model_name"
    pct = f"{fb_free_min * 100:g}%"
    return [
        {
            "name": "gpu",
            "rules": [
                _alert(
                    "GpuFramebufferExhausted",
                    f"DCGM_FI_DEV_FB_FREE / (DCGM_FI_DEV_FB_FREE + DCGM_FI_DEV_FB_USED) < {fb_free_min}",
                    "10m", "warning",
                    "GPU {{ $labels.gpu }} on {{ $labels.Hostname }} has under " f"{pct} framebuffer free",
                    "vLLM preallocates gpuMemoryUtilization of each GPU, so a healthy serving node shows "
                    "1 - gpuMemoryUtilization free (8-10%); the seeds' 10% threshold fired on every one. Below "
                    f"{pct} something else holds GPU memory: a second process on the GPU, a leaked context after a "
                    "crash, or gpuMemoryUtilization set near 1. Check nvidia-smi on the node and OOM restarts.",
                ),
                _alert(
                    "GpuXidErrors", "max by (Hostname, gpu) (DCGM_FI_DEV_XID_ERRORS) > 0", "5m", "critical",
                    "GPU {{ $labels.gpu }} on {{ $labels.Hostname }} reports XID error {{ $value }}",
                    "The driver reported a GPU fault (XID 48: double-bit ECC, 79: fallen off the bus, 13/31/43: "
                    "application faults). Pods on this GPU fail or hang. Cordon and drain the node "
                    "(kubectl drain --ignore-daemonsets) so Karpenter or the node group replaces it.",
                ),
            ],
        },
        {
            "name": "vllm",
            "rules": [
                _alert(
                    "VllmKvCacheHigh", f"avg by ({vllm}) (vllm:kv_cache_usage_perc) > {KV_CACHE_MAX}", "10m", "warning",
                    "{{ $labels.model_name }} KV cache above 80% in {{ $labels.namespace }}",
                    "Long contexts or many concurrent sequences fill the KV cache and trigger preemption. Confirm the "
                    "ScaledObject's kv-cache trigger is adding replicas; otherwise raise replicas.max or lower maxModelLen.",
                ),
                _alert(
                    "VllmRequestsWaiting", f"sum by ({vllm}) (vllm:num_requests_waiting) > {WAITING_REQUESTS_MAX}",
                    "5m", "warning",
                    "{{ $labels.model_name }} has more than 10 waiting requests",
                    "Demand exceeds running replicas. Check pending pods (GPU quota, pool limits, Spot capacity); "
                    "the gateway falls back to Bedrock on timeouts meanwhile.",
                ),
                _alert(
                    "VllmTimeToFirstTokenSlow",
                    f"histogram_quantile(0.95, sum by (le, {vllm}) (rate(vllm:time_to_first_token_seconds_bucket[5m]))) > {TTFT_P95_MAX_SECONDS}",
                    "10m", "critical",
                    "{{ $labels.model_name }} p95 time to first token above 2s",
                    "Users wait for the first token. Usually queueing (see VllmRequestsWaiting) or prefill of long "
                    "prompts; scale out, or route long-context traffic to a tier with larger GPUs.",
                ),
                _alert(
                    "VllmPreemptions", f"sum by ({vllm}) (rate(vllm:num_preemptions_total[5m])) > 0", "10m", "warning",
                    "{{ $labels.model_name }} is preempting sequences",
                    "The scheduler evicts running sequences for lack of KV cache, recomputing them later at a latency "
                    "cost. Add replicas, lower max concurrency, or give the model more GPU memory.",
                ),
            ],
        },
        {
            "name": "gateway",
            "rules": [
                _alert(
                    "GatewayMetricsMissing", f"absent({GATEWAY_UP} == 1)", "5m", "critical",
                    "Prometheus cannot scrape the LiteLLM gateway",
                    "KEDA wakes cold models on the gateway's request counter: without it a model at zero never wakes "
                    "and KEDA holds replicas on its fallback. Check the gateway pods, the ServiceMonitor's bearer "
                    "token (Secret llm-gateway/llm-gateway-metrics) and the target in Prometheus (Status > Targets).",
                ),
            ],
        },
    ]


def cost_rules(gpu_hours_budget: int | None) -> dict[str, object]:
    """GPU hours as the cluster actually ran them (kube-state-metrics allocatable GPUs, sampled every
    5 minutes), and an alert when the last 30 days exceed the stack's monthly GPU-hour budget."""
    days = GPU_HOURS_WINDOW_DAYS
    rules: list[dict[str, object]] = [
        {"record": "llm_platform:gpus_allocatable:sum", "expr": 'sum(kube_node_status_allocatable{resource="nvidia_com_gpu"})'},
        {"record": f"llm_platform:gpu_hours:{days}d", "expr": f"sum_over_time(llm_platform:gpus_allocatable:sum[{days}d:5m]) / 12"},
    ]
    if gpu_hours_budget is not None:
        rules.append(
            _alert(
                "GpuHoursAboveMonthlyBudget", f"llm_platform:gpu_hours:{days}d > {gpu_hours_budget}", "1h", "warning",
                f"GPU hours over the last {days} days above the budget of {gpu_hours_budget}",
                "GPU nodes ran longer than budgeted. Look for pools that do not scale down (consolidation off, "
                "desiredSize raised by hand, models with replicas.min > 0 outside business hours) and for "
                "environments past their expiry (python -m automation env list).",
            )
        )
    return {"name": "gpu-cost", "rules": rules}


def rule_groups(gpu_hours_budget: int | None, fb_free_min: float, gateway: bool) -> list[dict[str, object]]:
    """Every rule group of the platform's PrometheusRule."""
    groups = [g for g in alert_rules(fb_free_min) if gateway or g["name"] != "gateway"]
    return [*groups, cost_rules(gpu_hours_budget)]


# --- Prometheus, Grafana --------------------------------------------------------------------------


def prometheus_stack_values(prometheus: PrometheusSettings) -> dict[str, object]:
    system = contract.system_node_selector()
    return {
        "fullnameOverride": RELEASE,
        "prometheus": {
            "prometheusSpec": {
                "serviceMonitorSelectorNilUsesHelmValues": False,
                "podMonitorSelectorNilUsesHelmValues": False,
                "ruleSelectorNilUsesHelmValues": False,
                "replicas": prometheus.replicas,
                "retention": f"{prometheus.retention_days}d",
                # Keep a margin on the volume: Prometheus drops the oldest blocks before the disk fills.
                "retentionSize": f"{int(prometheus.volume_size_gib * 0.85)}GB",
                "storageSpec": {
                    "volumeClaimTemplate": {
                        "spec": {
                            "storageClassName": STORAGE_CLASS,
                            "accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": f"{prometheus.volume_size_gib}Gi"}},
                        }
                    }
                },
                "podAntiAffinity": "soft",
                "nodeSelector": system,
                "resources": {"requests": {"cpu": "500m", "memory": "2Gi"}, "limits": {"memory": "4Gi"}},
            }
        },
        "alertmanager": {
            "alertmanagerSpec": {
                "nodeSelector": system,
                "useExistingSecret": True,
                "configSecret": ALERTMANAGER_SECRET,
                "replicas": min(prometheus.replicas, 3),
                # Silences and the notification log survive a restart (the operator mounts this claim
                # at the Alertmanager data directory); without it a rolled pod re-pages silenced alerts.
                "storage": {
                    "volumeClaimTemplate": {
                        "spec": {
                            "storageClassName": STORAGE_CLASS,
                            "accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": f"{ALERTMANAGER_VOLUME_GIB}Gi"}},
                        }
                    }
                },
            }
        },
        "prometheusOperator": {"nodeSelector": system},
        "grafana": {
            "nodeSelector": system,
            "sidecar": {"dashboards": {"enabled": True, "label": DASHBOARD_LABEL, "labelValue": "1"}},
        },
        "kube-state-metrics": {
            "nodeSelector": system,
            "metricLabelsAllowlist": [f"nodes=[{','.join(NODE_LABELS_EXPORTED)}]"],
        },
        # Every node, GPU nodes included. It needs the host's network, PIDs and /proc, /sys, / (a Pod
        # Security exception); everything else is locked down (the chart leaves seccomp, privilege
        # escalation and capabilities open).
        "prometheus-node-exporter": {
            "tolerations": [{"operator": "Exists"}],
            "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
            "containerSecurityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        },
    }


def vllm_pod_monitor_spec() -> dict[str, object]:
    """Every vLLM pod, with the serving tier (pod label) as the ``tier`` label alerts route on."""
    return {
        "namespaceSelector": {"any": True},
        "selector": {"matchLabels": {"app.kubernetes.io/name": "vllm"}},
        "podMetricsEndpoints": [
            {
                "port": "http",
                "path": "/metrics",
                "interval": "15s",
                "relabelings": [
                    {"sourceLabels": ["__meta_kubernetes_pod_label_llm_platform_io_tier"], "targetLabel": "tier"}
                ],
            }
        ],
    }


@dataclass(frozen=True)
class ObservabilityArgs:
    """Inputs of :class:`Observability`. ``gpu_hours_budget`` (GPU hours per 30 days) adds the cost
    alert; ``gpu_memory_utilizations`` (of the served models) sets the framebuffer alert; ``gateway``
    adds the gateway-scrape alert; ``settings`` sizes Prometheus and routes alerts."""

    namespace: str = NAMESPACE
    gpu_hours_budget: int | None = None
    gpu_memory_utilizations: tuple[float, ...] = ()
    gateway: bool = False
    settings: ObservabilitySettings = field(default_factory=ObservabilitySettings)
    cluster_name: str = ""
    tags: dict[str, str] = field(default_factory=dict)


class Observability(pulumi.ComponentResource):
    """kube-prometheus-stack on encrypted gp3, Alertmanager routed from settings, a PodMonitor for
    every vLLM pod, the GPU/serving PrometheusRule and the Grafana dashboards."""

    prometheus_url: str

    def __init__(self, name: str, args: ObservabilityArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(TYPE, name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        namespace = k8s.core.v1.Namespace(f"{name}-namespace", metadata={"name": args.namespace}, opts=child)
        in_namespace = pulumi.ResourceOptions(parent=self, depends_on=[namespace])

        # Storage: EBS gp3, encrypted, kept when a claim is deleted (needs the EBS CSI driver).
        storage = k8s.storage.v1.StorageClass(
            f"{name}-gp3",
            metadata={"name": STORAGE_CLASS},
            provisioner="ebs.csi.aws.com",
            parameters={"type": "gp3", "encrypted": "true"},
            reclaim_policy="Retain",
            volume_binding_mode="WaitForFirstConsumer",
            allow_volume_expansion=True,
            opts=child,
        )

        # Alertmanager: its whole configuration is a Pulumi secret (receiver URLs and keys).
        alerting = args.settings.alerting
        config = k8s.core.v1.Secret(
            f"{name}-alertmanager",
            metadata={"name": ALERTMANAGER_SECRET, "namespace": args.namespace},
            type="Opaque",
            string_data={"alertmanager.yaml": pulumi.Output.secret(yaml_text(alertmanager_config(alerting)))},
            opts=in_namespace,
        )
        topics = [r.sns.topic_arn for r in alerting.receivers if r.sns is not None]
        if topics:
            pod_identity_role(
                f"{name}-alertmanager-sns",
                description=f"Alertmanager of {args.cluster_name}: publish alerts to the configured SNS topics",
                policy=sns_publish_policy(topics),
                cluster_name=args.cluster_name,
                namespace=args.namespace,
                service_account=f"{RELEASE}-alertmanager",
                tags=args.tags,
                parent=self,
            )

        stack = pinned_release(
            f"{name}-prometheus",
            versions.KUBE_PROMETHEUS_STACK,
            release_name=RELEASE,
            namespace=args.namespace,
            values=prometheus_stack_values(args.settings.prometheus),
            timeout=900,
            create_namespace=False,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[namespace, storage, config]),
        )
        after_stack = pulumi.ResourceOptions(parent=self, depends_on=[stack])
        k8s.apiextensions.CustomResource(
            f"{name}-vllm",
            api_version="monitoring.coreos.com/v1",
            kind="PodMonitor",
            metadata={"name": "vllm", "namespace": args.namespace},
            spec=vllm_pod_monitor_spec(),
            opts=after_stack,
        )
        k8s.apiextensions.CustomResource(
            f"{name}-alerts",
            api_version="monitoring.coreos.com/v1",
            kind="PrometheusRule",
            metadata={"name": "llm-platform-gpu-serving", "namespace": args.namespace},
            spec={
                "groups": rule_groups(
                    args.gpu_hours_budget, framebuffer_free_min(list(args.gpu_memory_utilizations)), args.gateway
                )
            },
            opts=after_stack,
        )
        for dashboard in dashboards(args.gpu_hours_budget):
            k8s.core.v1.ConfigMap(
                f"{name}-dashboard-{dashboard['uid']}",
                metadata={
                    "name": f"dashboard-{dashboard['uid']}",
                    "namespace": args.namespace,
                    "labels": {DASHBOARD_LABEL: "1"},
                },
                data={f"{dashboard['uid']}.json": json.dumps(dashboard, sort_keys=True)},
                opts=in_namespace,
            )
        self.prometheus_url = PROMETHEUS_URL
        self.register_outputs({"prometheus_url": self.prometheus_url})
