"""Observability: Prometheus (kube-prometheus-stack), vLLM scraping, and GPU/serving alerts.

Prometheus here is also KEDA's data source, so serving scales on the same numbers people alert on.
DCGM metrics come from the DCGM exporter's ServiceMonitor (standalone chart or GPU Operator).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from . import contract, versions
from .helm import pinned_release

TYPE = "llm-platform:index:Observability"
NAMESPACE = "monitoring"
RELEASE = "kube-prometheus-stack"
PROMETHEUS_URL = f"http://{RELEASE}-prometheus.{NAMESPACE}.svc.cluster.local:9090"

#: Alert thresholds, in one place.
GPU_UTIL_WARNING, GPU_UTIL_CRITICAL = 90, 95
FRAMEBUFFER_FREE_MIN = 0.10
KV_CACHE_MAX = 0.80
WAITING_REQUESTS_MAX = 10
TTFT_P95_MAX_SECONDS = 2


def _alert(name: str, expr: str, duration: str, severity: str, summary: str, runbook: str) -> dict[str, object]:
    return {
        "alert": name,
        "expr": expr,
        "for": duration,
        "labels": {"severity": severity, "team": "ml-platform"},
        "annotations": {"summary": summary, "description": runbook},
    }


def alert_rules() -> list[dict[str, object]]:
    """GPU and serving alerts with what to check and what to do, in the order an on-call reads them."""
    util = "avg by (Hostname, gpu, modelName) (DCGM_FI_DEV_GPU_UTIL)"
    vllm = "namespace, model_name"
    return [
        {
            "name": "gpu",
            "rules": [
                _alert(
                    "GpuUtilizationHigh", f"{util} > {GPU_UTIL_WARNING}", "15m", "warning",
                    "GPU {{ $labels.gpu }} on {{ $labels.Hostname }} above " f"{GPU_UTIL_WARNING}% for 15m",
                    "Sustained saturation. Check the model's waiting requests and TTFT; if they rise too, "
                    "confirm KEDA is scaling (kubectl get scaledobject -A) and that the pool's GPU limit or "
                    "quota is not reached. If the node runs one pod, this is expected under load.",
                ),
                _alert(
                    "GpuUtilizationCritical", f"{util} > {GPU_UTIL_CRITICAL}", "10m", "critical",
                    "GPU {{ $labels.gpu }} on {{ $labels.Hostname }} above " f"{GPU_UTIL_CRITICAL}% for 10m",
                    "Requests are queueing behind a saturated GPU. Raise replicas.max or the tier quota, or shed "
                    "load to the Bedrock fallback through the gateway; check for a stuck process with nvidia-smi.",
                ),
                _alert(
                    "GpuFramebufferLow",
                    f"DCGM_FI_DEV_FB_FREE / (DCGM_FI_DEV_FB_FREE + DCGM_FI_DEV_FB_USED) < {FRAMEBUFFER_FREE_MIN}",
                    "10m", "warning",
                    "GPU {{ $labels.gpu }} on {{ $labels.Hostname }} has under 10% framebuffer free",
                    "vLLM preallocates gpuMemoryUtilization of the GPU; less than 10% free means another process "
                    "shares the GPU or utilization is set too high. Look for preemptions and OOM restarts; lower "
                    "gpuMemoryUtilization or maxModelLen for the model.",
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
                    "10m", "warning",
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
    ]


def cost_rules(gpu_hours_budget: int | None) -> dict[str, object]:
    """GPU hours as the cluster actually ran them (kube-state-metrics allocatable GPUs, sampled every
    5 minutes), and an alert when the last 30 days exceed the stack's monthly GPU-hour budget."""
    rules: list[dict[str, object]] = [
        {"record": "llm_platform:gpus_allocatable:sum", "expr": 'sum(kube_node_status_allocatable{resource="nvidia_com_gpu"})'},
        {"record": "llm_platform:gpu_hours:30d", "expr": "sum_over_time(llm_platform:gpus_allocatable:sum[30d:5m]) / 12"},
    ]
    if gpu_hours_budget is not None:
        rules.append(
            _alert(
                "GpuHoursAboveMonthlyBudget", f"llm_platform:gpu_hours:30d > {gpu_hours_budget}", "1h", "warning",
                f"GPU hours over the last 30 days above the budget of {gpu_hours_budget}",
                "GPU nodes ran longer than budgeted. Look for pools that do not scale down (consolidation off, "
                "desiredSize raised by hand, models with replicas.min > 0 outside business hours) and for "
                "environments past their expiry (python -m automation env list).",
            )
        )
    return {"name": "gpu-cost", "rules": rules}


def prometheus_stack_values() -> dict[str, object]:
    system = contract.system_node_selector()
    return {
        "fullnameOverride": RELEASE,
        "prometheus": {
            "prometheusSpec": {
                "serviceMonitorSelectorNilUsesHelmValues": False,
                "podMonitorSelectorNilUsesHelmValues": False,
                "ruleSelectorNilUsesHelmValues": False,
                "retention": "15d",
                "nodeSelector": system,
                "resources": {"requests": {"cpu": "500m", "memory": "2Gi"}, "limits": {"memory": "4Gi"}},
            }
        },
        "alertmanager": {"alertmanagerSpec": {"nodeSelector": system}},
        "prometheusOperator": {"nodeSelector": system},
        "grafana": {"nodeSelector": system},
        "kube-state-metrics": {"nodeSelector": system},
        "prometheus-node-exporter": {"tolerations": [{"operator": "Exists"}]},
    }


@dataclass(frozen=True)
class ObservabilityArgs:
    """Inputs of :class:`Observability`. ``gpu_hours_budget`` (GPU hours per 30 days) adds the cost
    alert; the other alert thresholds are the module constants."""

    namespace: str = NAMESPACE
    gpu_hours_budget: int | None = None


class Observability(pulumi.ComponentResource):
    """kube-prometheus-stack, a PodMonitor for every vLLM pod, and the GPU/serving PrometheusRule."""

    prometheus_url: str

    def __init__(self, name: str, args: ObservabilityArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(TYPE, name, None, opts)
        stack = pinned_release(
            f"{name}-prometheus",
            versions.KUBE_PROMETHEUS_STACK,
            release_name=RELEASE,
            namespace=args.namespace,
            values=prometheus_stack_values(),
            timeout=900,
            opts=pulumi.ResourceOptions(parent=self),
        )
        after_stack = pulumi.ResourceOptions(parent=self, depends_on=[stack])
        k8s.apiextensions.CustomResource(
            f"{name}-vllm",
            api_version="monitoring.coreos.com/v1",
            kind="PodMonitor",
            metadata={"name": "vllm", "namespace": args.namespace},
            spec={
                "namespaceSelector": {"any": True},
                "selector": {"matchLabels": {"app.kubernetes.io/name": "vllm"}},
                "podMetricsEndpoints": [{"port": "http", "path": "/metrics", "interval": "15s"}],
            },
            opts=after_stack,
        )
        k8s.apiextensions.CustomResource(
            f"{name}-alerts",
            api_version="monitoring.coreos.com/v1",
            kind="PrometheusRule",
            metadata={"name": "llm-platform-gpu-serving", "namespace": args.namespace},
            spec={"groups": [*alert_rules(), cost_rules(args.gpu_hours_budget)]},
            opts=after_stack,
        )
        self.prometheus_url = PROMETHEUS_URL
        self.register_outputs({"prometheus_url": self.prometheus_url})
