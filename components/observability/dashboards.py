"""Grafana dashboards the platform provisions through the chart's dashboard sidecar (ConfigMaps
labelled ``grafana_dashboard: "1"``): GPU, serving, gateway and cost.

Panels are data (title, PromQL, unit); the tests evaluate every query on a real Prometheus over
synthetic series (and the gateway's on the real LiteLLM proxy's series), so a renamed metric breaks
a test rather than a dashboard.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from components.settings.observability import GPU_HOURS_WINDOW_DAYS

_POOL = "label_llm_platform_io_pool"
_NODE_POOL = f'label_replace(kube_node_labels{{{_POOL}!=""}}, "Hostname", "$1", "node", "(.*)")'


@dataclass(frozen=True)
class Panel:
    title: str
    expr: str
    unit: str = "short"
    legend: str = ""


def _per_pool(metric: str) -> str:
    return f"avg by ({_POOL}) ({metric} * on (Hostname) group_left({_POOL}) {_NODE_POOL})"


def panels(gpu_hours_budget: int | None) -> dict[str, tuple[str, list[Panel]]]:
    """Dashboards by uid: title and panels."""
    days = GPU_HOURS_WINDOW_DAYS
    cost = [
        Panel("GPUs allocatable", "llm_platform:gpus_allocatable:sum"),
        Panel(f"GPU hours, last {days} days", f"llm_platform:gpu_hours:{days}d", "h"),
    ]
    if gpu_hours_budget is not None:
        cost.append(Panel("Share of the monthly GPU-hour budget", f"llm_platform:gpu_hours:{days}d / {gpu_hours_budget}", "percentunit"))
    return {
        "llm-gpu": (
            "LLM platform / GPUs",
            [
                Panel("GPU utilization per pool", _per_pool("DCGM_FI_DEV_GPU_UTIL"), "percent", "{{label_llm_platform_io_pool}}"),
                Panel("GPU utilization per node and GPU", "avg by (Hostname, gpu) (DCGM_FI_DEV_GPU_UTIL)", "percent", "{{Hostname}} {{gpu}}"),
                Panel(
                    "Framebuffer used per node and GPU",
                    "avg by (Hostname, gpu) (DCGM_FI_DEV_FB_USED / (DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE))",
                    "percentunit",
                    "{{Hostname}} {{gpu}}",
                ),
                Panel("Framebuffer used per pool", _per_pool("(DCGM_FI_DEV_FB_USED / (DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE))"), "percentunit"),
                Panel("Power per node", "sum by (Hostname) (DCGM_FI_DEV_POWER_USAGE)", "watt", "{{Hostname}}"),
                Panel("Power per pool", f"sum by ({_POOL}) (DCGM_FI_DEV_POWER_USAGE * on (Hostname) group_left({_POOL}) {_NODE_POOL})", "watt"),
            ],
        ),
        "llm-serving": (
            "LLM platform / Serving",
            [
                Panel("Generated tokens/s", "sum by (model_name) (rate(vllm:generation_tokens_total[5m]))", "short", "{{model_name}}"),
                Panel(
                    "Time to first token p95",
                    "histogram_quantile(0.95, sum by (le, model_name) (rate(vllm:time_to_first_token_seconds_bucket[5m])))",
                    "s",
                    "{{model_name}}",
                ),
                Panel(
                    "Inter-token latency p95",
                    "histogram_quantile(0.95, sum by (le, model_name) (rate(vllm:inter_token_latency_seconds_bucket[5m])))",
                    "s",
                    "{{model_name}}",
                ),
                Panel("Requests waiting", "sum by (model_name) (vllm:num_requests_waiting)", "short", "{{model_name}}"),
                Panel("Requests running", "sum by (model_name) (vllm:num_requests_running)", "short", "{{model_name}}"),
                Panel("KV cache usage", "avg by (model_name) (vllm:kv_cache_usage_perc)", "percentunit", "{{model_name}}"),
                Panel("Preemptions/s", "sum by (model_name) (rate(vllm:num_preemptions_total[5m]))", "short", "{{model_name}}"),
            ],
        ),
        "llm-gateway": (
            "LLM platform / Gateway",
            [
                Panel(
                    "Requests/s per requested model",
                    "sum by (requested_model) (rate(litellm_proxy_total_requests_metric_total[5m]))",
                    "reqps",
                    "{{requested_model}}",
                ),
                Panel(
                    "Fallbacks/s",
                    "sum by (requested_model, fallback_model) (rate(litellm_deployment_successful_fallbacks_total[5m]))",
                    "reqps",
                    "{{requested_model}} -> {{fallback_model}}",
                ),
                Panel(
                    "Backend errors/s per model",
                    "sum by (model_group, exception_status) (rate(litellm_deployment_failure_responses_total[5m]))",
                    "reqps",
                    "{{model_group}} {{exception_status}}",
                ),
            ],
        ),
        "llm-cost": ("LLM platform / GPU cost", cost),
    }


def dashboard(uid: str, title: str, items: list[Panel]) -> dict[str, Any]:
    """A Grafana dashboard (schema 39) on the chart's Prometheus data source (uid ``prometheus``)."""
    source = {"type": "prometheus", "uid": "prometheus"}
    return {
        "uid": uid,
        "title": title,
        "tags": ["llm-platform"],
        "schemaVersion": 39,
        "time": {"from": "now-6h", "to": "now"},
        "refresh": "30s",
        "panels": [
            {
                "id": i + 1,
                "type": "timeseries",
                "title": panel.title,
                "datasource": source,
                "gridPos": {"h": 8, "w": 12, "x": 12 * (i % 2), "y": 8 * (i // 2)},
                "fieldConfig": {"defaults": {"unit": panel.unit}, "overrides": []},
                "targets": [{"refId": "A", "datasource": source, "expr": panel.expr, "legendFormat": panel.legend}],
            }
            for i, panel in enumerate(items)
        ],
    }


def dashboards(gpu_hours_budget: int | None) -> list[dict[str, Any]]:
    return [dashboard(uid, title, items) for uid, (title, items) in panels(gpu_hours_budget).items()]
