"""Grafana dashboards the platform provisions through the chart's dashboard sidecar (ConfigMaps
labelled ``grafana_dashboard: "1"``): GPU, serving, gateway and cost.

Panels are data (title, PromQL, unit); the tests evaluate every query on a real Prometheus over
synthetic series (and the gateway's on the real LiteLLM proxy's series), so a renamed metric breaks
a test rather than a dashboard.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from components.observability import token_cost as tc
from components.observability.metric_contract import (
    DCGM_FB_FREE,
    DCGM_FB_USED,
    DCGM_GPU_UTIL,
    DCGM_POWER_USAGE,
    KSM_NODE_LABELS,
    LITELLM_DEPLOYMENT_FAILURES,
    LITELLM_FALLBACKS,
    LITELLM_PROXY_REQUESTS,
    VLLM_GENERATION_TOKENS,
    VLLM_ITL_BUCKET,
    VLLM_KV_CACHE_USAGE,
    VLLM_NUM_REQUESTS_RUNNING,
    VLLM_NUM_REQUESTS_WAITING,
    VLLM_PREEMPTIONS,
    VLLM_TTFT_BUCKET,
    ksm_label,
)
from components.settings.observability import GPU_HOURS_WINDOW_DAYS
from components.specs.observability import NODE_LABELS_EXPORTED

_POOL = ksm_label(NODE_LABELS_EXPORTED[0])
_NODE_POOL = f'label_replace({KSM_NODE_LABELS}{{{_POOL}!=""}}, "Hostname", "$1", "node", "(.*)")'


@dataclass(frozen=True)
class Panel:
    title: str
    expr: str
    unit: str = "short"
    legend: str = ""


#: Share of a GPU's framebuffer in use (the exporter reports used and free, both in one unit).
_FB_USED_SHARE = f"{DCGM_FB_USED} / ({DCGM_FB_USED} + {DCGM_FB_FREE})"


def _per_pool(metric: str) -> str:
    return f"avg by ({_POOL}) ({metric} * on (Hostname) group_left({_POOL}) {_NODE_POOL})"


def token_cost_panels(bedrock: bool) -> list[Panel]:
    """Cost per token per model and tier over time, self-hosted against Bedrock (where a model has a
    priced fallback), and the GPU cost no serving pod uses."""
    usd, model, tier = "currencyUSD", "{{model}}", "{{tier}}"
    items = [
        Panel("Cost per million tokens per model (last hour)", tc.MODEL_PER_MILLION, usd, model),
        Panel("Cost per million input tokens per model", tc.MODEL_PER_MILLION_INPUT, usd, model),
        Panel("Cost per million output tokens per model", tc.MODEL_PER_MILLION_OUTPUT, usd, model),
        Panel("Cost per million tokens per tier (last hour)", tc.TIER_PER_MILLION, usd, tier),
        Panel("GPU cost per hour per model", tc.MODEL_COST, usd, model),
        Panel("Idle GPU cost per hour (GPUs no serving pod holds)", tc.IDLE_COST, usd),
        Panel("Prompt tokens per hour per model", tc.MODEL_PROMPT_TOKENS, "short", model),
        Panel("Generated tokens per hour per model", tc.MODEL_GENERATION_TOKENS, "short", model),
        Panel("GPUs on types without a price in the catalog", f"sum({tc.MODEL_UNPRICED_GPUS}) or vector(0)"),
    ]
    if bedrock:
        items += [
            Panel("Self-hosted / Bedrock cost per model (above 1: Bedrock is cheaper)", tc.MODEL_RATIO, "short",
                  "{{model}} vs {{bedrock_model}}"),
            Panel("Self-hosted / Bedrock cost per tier", tc.TIER_RATIO, "short", tier),
            Panel("Self-hosted GPU cost per tier, last hour (models with a fallback)", tc.TIER_FALLBACK_COST_1H, usd, tier),
            Panel("What Bedrock would have charged per tier, last hour", tc.TIER_BEDROCK_1H, usd, tier),
        ]
    return items


def panels(gpu_hours_budget: int | None, bedrock: bool = False) -> dict[str, tuple[str, list[Panel]]]:
    """Dashboards by uid: title and panels. ``bedrock``: the token-cost dashboard compares with Bedrock."""
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
                Panel("GPU utilization per pool", _per_pool(DCGM_GPU_UTIL), "percent", f"{{{{{_POOL}}}}}"),
                Panel("GPU utilization per node and GPU", f"avg by (Hostname, gpu) ({DCGM_GPU_UTIL})", "percent", "{{Hostname}} {{gpu}}"),
                Panel(
                    "Framebuffer used per node and GPU",
                    f"avg by (Hostname, gpu) ({_FB_USED_SHARE})",
                    "percentunit",
                    "{{Hostname}} {{gpu}}",
                ),
                Panel("Framebuffer used per pool", _per_pool(f"({_FB_USED_SHARE})"), "percentunit"),
                Panel("Power per node", f"sum by (Hostname) ({DCGM_POWER_USAGE})", "watt", "{{Hostname}}"),
                Panel("Power per pool", f"sum by ({_POOL}) ({DCGM_POWER_USAGE} * on (Hostname) group_left({_POOL}) {_NODE_POOL})", "watt"),
            ],
        ),
        "llm-serving": (
            "LLM platform / Serving",
            [
                Panel("Generated tokens/s", f"sum by (model_name) (rate({VLLM_GENERATION_TOKENS}[5m]))", "short", "{{model_name}}"),
                Panel(
                    "Time to first token p95",
                    f"histogram_quantile(0.95, sum by (le, model_name) (rate({VLLM_TTFT_BUCKET}[5m])))",
                    "s",
                    "{{model_name}}",
                ),
                Panel(
                    "Inter-token latency p95",
                    f"histogram_quantile(0.95, sum by (le, model_name) (rate({VLLM_ITL_BUCKET}[5m])))",
                    "s",
                    "{{model_name}}",
                ),
                Panel("Requests waiting", f"sum by (model_name) ({VLLM_NUM_REQUESTS_WAITING})", "short", "{{model_name}}"),
                Panel("Requests running", f"sum by (model_name) ({VLLM_NUM_REQUESTS_RUNNING})", "short", "{{model_name}}"),
                Panel("KV cache usage", f"avg by (model_name) ({VLLM_KV_CACHE_USAGE})", "percentunit", "{{model_name}}"),
                Panel("Preemptions/s", f"sum by (model_name) (rate({VLLM_PREEMPTIONS}[5m]))", "short", "{{model_name}}"),
            ],
        ),
        "llm-gateway": (
            "LLM platform / Gateway",
            [
                Panel(
                    "Requests/s per requested model",
                    f"sum by (requested_model) (rate({LITELLM_PROXY_REQUESTS}[5m]))",
                    "reqps",
                    "{{requested_model}}",
                ),
                Panel(
                    "Fallbacks/s",
                    f"sum by (requested_model, fallback_model) (rate({LITELLM_FALLBACKS}[5m]))",
                    "reqps",
                    "{{requested_model}} -> {{fallback_model}}",
                ),
                Panel(
                    "Backend errors/s per model",
                    f"sum by (model_group, exception_status) (rate({LITELLM_DEPLOYMENT_FAILURES}[5m]))",
                    "reqps",
                    "{{model_group}} {{exception_status}}",
                ),
            ],
        ),
        "llm-cost": ("LLM platform / GPU cost", cost),
        "llm-token-cost": ("LLM platform / Token cost", token_cost_panels(bedrock)),
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


def dashboards(gpu_hours_budget: int | None, bedrock: bool = False) -> list[dict[str, Any]]:
    return [dashboard(uid, title, items) for uid, (title, items) in panels(gpu_hours_budget, bedrock).items()]
