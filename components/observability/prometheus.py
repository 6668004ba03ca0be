"""Observability: Prometheus (kube-prometheus-stack), vLLM scraping, GPU/serving alerts, where they
go, and Grafana dashboards.

Prometheus here is also KEDA's data source, so serving scales on the same numbers people alert on.
DCGM metrics come from the DCGM exporter's ServiceMonitor (standalone chart or GPU Operator).
Every rule, route and dashboard query here is exercised by the tests on a real Prometheus, promtool
and amtool.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from components import contract, versions
from components.config_files import yaml_text
from components.helm import pinned_release
from components.iam import pod_identity_role
from components.observability.alertmanager import alertmanager_config, sns_publish_policy
from components.observability.dashboards import dashboards
from components.observability.metric_contract import (
    CA_NODE_GROUP_BACKOFF,
    DCGM_FB_FREE,
    DCGM_FB_USED,
    DCGM_XID_ERRORS_COUNT,
    KSM_GPU_RESOURCE,
    KSM_NODE_STATUS_ALLOCATABLE,
    PROMETHEUS_UP,
    VLLM_KV_CACHE_USAGE,
    VLLM_NUM_REQUESTS_WAITING,
    VLLM_PREEMPTIONS,
    VLLM_TTFT_BUCKET,
)
from components.observability.token_cost import BedrockFallback, GpuPrice, PoolPrice, token_cost_groups
from components.settings.observability import GPU_HOURS_WINDOW_DAYS
from components.settings.observability import Observability as ObservabilitySettings
from components.settings.serving import INTERACTIVE_TIER, TierScaling
from components.specs import cluster_autoscaler as autoscaler_spec
from components.specs.dcgm_counters import XID_COUNT_WINDOW_MS, hardware_xid_regex
from components.specs.observability import (
    ALERTMANAGER_SECRET,
    DASHBOARD_LABEL,
    NAMESPACE,
    PROMETHEUS_URL,
    RELEASE,
    STORAGE_CLASS,
    prometheus_stack_values,
    vllm_pod_monitor_spec,
)
from components.tags import NODE_TEMPLATE_PREFIX

TYPE = "llm-platform:index:Observability"

#: GPU utilization has no alert: a busy GPU is what serving is for; saturation shows as waiting
#: requests and time to first token, which alert per tier below.
#: vLLM keeps ``1 - gpuMemoryUtilization`` of the framebuffer free by design (8% at 0.92); the alert
#: fires below half of what the least generous model leaves (see :func:`framebuffer_free_min`).
DEFAULT_GPU_MEMORY_UTILIZATION = 0.9
GATEWAY_UP = f'{PROMETHEUS_UP}{{namespace="llm-gateway",service="llm-gateway"}}'
#: The HPA that KEDA drives leaves replicas alone while a metric is within this share of its target
#: (kubernetes ``pkg/controller/podautoscaler/replica_calculator.go``: ``math.Abs(1.0-usageRatio) <=
#: c.tolerance`` in ``GetExternalMetricReplicas`` and ``GetExternalPerPodMetricReplicas``; the
#: kube-controller-manager flag ``--horizontal-pod-autoscaler-tolerance`` defaults to 0.1 and EKS does
#: not change it). Up to ``target * (1 + tolerance)`` a tier's metric is the autoscaler's business;
#: above it for the alert's duration, the autoscaler could not keep up (max replicas, pending pods).
HPA_TOLERANCE = 0.1


def framebuffer_free_min(gpu_memory_utilizations: list[float]) -> float:
    """Free-framebuffer share below which something beyond vLLM's preallocation holds GPU memory."""
    highest = max(gpu_memory_utilizations, default=DEFAULT_GPU_MEMORY_UTILIZATION)
    return round((1 - highest) / 2, 4)


@dataclass(frozen=True)
class TierAlertThresholds:
    """Where a tier's serving alerts start: just above what its autoscaler handles.

    ``tier`` None stands for every tier the settings do not name (the tier's defaults then apply).
    ``ttft_severity``: slow first tokens page for the interactive tier only; other tiers warn.
    """

    tier: str | None
    others: tuple[str, ...]
    waiting_requests_per_replica: float
    kv_cache_usage: float
    ttft_p95_seconds: float
    ttft_severity: str

    @property
    def selector(self) -> str:
        if self.tier is not None:
            return f'tier="{self.tier}"'
        return f'tier!~"{"|".join(self.others)}"' if self.others else ""


def _above_target(target: float, ceiling: float | None = None) -> float:
    value = round(target * (1 + HPA_TOLERANCE), 4)
    return min(value, ceiling) if ceiling is not None else value


def tier_alert_thresholds(tiers: Sequence[tuple[str, TierScaling]]) -> list[TierAlertThresholds]:
    """One set of thresholds per configured tier, from its KEDA targets, and one for any other tier
    (the default targets; the only set when no tier is given)."""

    def of(name: str | None, scaling: TierScaling, others: tuple[str, ...] = ()) -> TierAlertThresholds:
        return TierAlertThresholds(
            tier=name,
            others=others,
            waiting_requests_per_replica=_above_target(scaling.waiting_requests),
            kv_cache_usage=_above_target(scaling.kv_cache_usage, ceiling=1.0),
            ttft_p95_seconds=_above_target(scaling.ttft_p95_seconds),
            ttft_severity="critical" if name in (INTERACTIVE_TIER, None) else "warning",
        )

    names = tuple(name for name, _ in tiers)
    return [*(of(name, scaling) for name, scaling in tiers), of(None, TierScaling(), names)]


def _alert(name: str, expr: str, duration: str, severity: str, summary: str, runbook: str) -> dict[str, object]:
    return {
        "alert": name,
        "expr": expr,
        "for": duration,
        "labels": {"severity": severity, "team": "ml-platform"},
        "annotations": {"summary": summary, "description": runbook},
    }


def gpu_alerts(fb_free_min: float) -> list[dict[str, object]]:
    """Framebuffer and XID alerts. XIDs are read from the exporter's windowed count (see
    :mod:`components.specs.dcgm_counters`), never from the last-XID gauge: a hardware XID pages
    while it is in the window, an application XID warns, and both resolve when the window passes."""
    pct = f"{fb_free_min * 100:g}%"
    hardware = hardware_xid_regex()
    window = f"{XID_COUNT_WINDOW_MS // 60000:g} minutes"
    return [
        _alert(
            "GpuFramebufferExhausted",
            f"{DCGM_FB_FREE} / ({DCGM_FB_FREE} + {DCGM_FB_USED}) < {fb_free_min}",
            "10m", "warning",
            "GPU {{ $labels.gpu }} on {{ $labels.Hostname }} has under " f"{pct} framebuffer free",
            "vLLM preallocates gpuMemoryUtilization of each GPU, so a healthy serving node shows "
            "1 - gpuMemoryUtilization free (8-10%); the seeds' 10% threshold fired on every one. Below "
            f"{pct} something else holds GPU memory: a second process on the GPU, a leaked context after a "
            "crash, or gpuMemoryUtilization set near 1. Check nvidia-smi on the node and OOM restarts.",
        ),
        _alert(
            "GpuXidHardwareError",
            f'max by (Hostname, gpu, xid) ({DCGM_XID_ERRORS_COUNT}{{xid=~"{hardware}"}}) > 0',
            "1m", "critical",
            "GPU {{ $labels.gpu }} on {{ $labels.Hostname }} reported hardware XID {{ $labels.xid }}",
            "The driver reported a GPU hardware fault (48: double-bit ECC, 63/64: row remapping, 74: NVLink, "
            "79: fallen off the bus, 92/94/95: ECC, 119/120: GSP). Pods on this GPU fail or hang. Cordon and "
            "drain the node (kubectl drain --ignore-daemonsets) so Karpenter or the node group replaces it. "
            f"The alert resolves {window} after the last XID: that does not mean the GPU recovered.",
        ),
        _alert(
            "GpuXidError",
            f'max by (Hostname, gpu, xid) ({DCGM_XID_ERRORS_COUNT}{{xid!~"{hardware}"}}) > 0',
            "1m", "warning",
            "GPU {{ $labels.gpu }} on {{ $labels.Hostname }} reported XID {{ $labels.xid }}",
            "An application-level GPU fault (13: graphics engine exception, 31: memory page fault, 43: a "
            "CUDA process was killed, common when a pod stops at scale-down). The GPU is healthy; look at "
            "the pod that used it (restarts, OOM, vLLM errors). Do not drain the node for these.",
        ),
    ]


def vllm_alerts(thresholds: TierAlertThresholds) -> list[dict[str, object]]:
    """Cache, queue and latency alerts of one tier, each above the tier's own scaling target."""
    vllm = "namespace, tier, model_name"
    sel = thresholds.selector
    braces = f"{{{sel}}}" if sel else ""
    kv, waiting, ttft = thresholds.kv_cache_usage, thresholds.waiting_requests_per_replica, thresholds.ttft_p95_seconds
    scope = f"tier {thresholds.tier}" if thresholds.tier else "tiers without their own settings"
    return [
        _alert(
            "VllmKvCacheHigh", f"avg by ({vllm}) ({VLLM_KV_CACHE_USAGE}{braces}) > {kv:g}", "10m", "warning",
            "{{ $labels.model_name }} KV cache above " f"{kv * 100:g}% in " "{{ $labels.namespace }}",
            f"Above the {scope}'s kv-cache scaling target plus the HPA's tolerance for 10 minutes: the "
            "autoscaler is not adding replicas. Check the ScaledObject (at replicas.max?) and pending pods; "
            "otherwise raise replicas.max or lower maxModelLen.",
        ),
        _alert(
            "VllmRequestsWaiting", f"avg by ({vllm}) ({VLLM_NUM_REQUESTS_WAITING}{braces}) > {waiting:g}",
            "5m", "warning",
            "{{ $labels.model_name }} has more than " f"{waiting:g} waiting requests per replica",
            f"Above the {scope}'s waiting-requests target per replica plus the HPA's tolerance for 5 minutes: "
            "demand exceeds what replicas can be added for. Check pending pods (GPU quota, pool limits, Spot "
            "capacity) and replicas.max; the gateway falls back to Bedrock on timeouts meanwhile.",
        ),
        _alert(
            "VllmTimeToFirstTokenSlow",
            f"histogram_quantile(0.95, sum by (le, {vllm}) (rate({VLLM_TTFT_BUCKET}{braces}[5m]))) > {ttft:g}",
            "10m", thresholds.ttft_severity,
            "{{ $labels.model_name }} p95 time to first token above " f"{ttft:g}s",
            f"Above the {scope}'s p95 TTFT scaling target plus the HPA's tolerance for 10 minutes. Usually "
            "queueing (see VllmRequestsWaiting) or prefill of long prompts; scale out, or route long-context "
            "traffic to a tier with larger GPUs.",
        ),
    ]


def alert_rules(
    fb_free_min: float = framebuffer_free_min([]), tiers: Sequence[tuple[str, TierScaling]] = ()
) -> list[dict[str, object]]:
    """GPU, serving and gateway alerts with what to check and what to do, in the order an on-call
    reads them. vLLM series carry ``tier`` (PodMonitor relabeling), which thresholds and Alertmanager
    routes use; each tier's thresholds come from its scaling settings."""
    vllm = "namespace, tier, model_name"
    serving = [rule for t in tier_alert_thresholds(tiers) for rule in vllm_alerts(t)]
    return [
        {"name": "gpu", "rules": gpu_alerts(fb_free_min)},
        {
            "name": "vllm",
            "rules": [
                *serving,
                _alert(
                    "VllmPreemptions", f"sum by ({vllm}) (rate({VLLM_PREEMPTIONS}[5m])) > 0", "10m", "warning",
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


#: The autoscaler's scrape target: the chart's Service in its namespace.
CLUSTER_AUTOSCALER_UP = (
    f'{PROMETHEUS_UP}{{namespace="{autoscaler_spec.NAMESPACE}",'
    f'service="{autoscaler_spec.FULLNAME}"}}'
)


def cluster_autoscaler_rules() -> dict[str, object]:
    """Alerts for Cluster Autoscaler when a managed group cannot grow.

    The engine's gauge is not the textbook's. ``cluster_autoscaler_node_group_backoff_status`` is 1
    only while a backoff lasts: after every loop the autoscaler resets each reason of every group to 0
    and sets 1 for the current backoff's error code only (kubernetes/autoscaler tag
    cluster-autoscaler-1.35.2, ``processors/status/metrics_autoscaling_status_processor.go``
    ``updateNodeGroupBackoffStatusMetrics``; ``metrics/metrics.go`` ``UpdateNodeGroupBackOffStatus``).
    When the backoff ends (5 minutes, doubling to 30: ``utils/backoff/exponential_backoff.go``,
    ``--initial-node-group-backoff-duration``, ``--max-node-group-backoff-duration``) the autoscaler
    retries and the gauge reads 0 until the retry fails again: on AWS, desired nodes that never launch
    become placeholders marked ``placeholder-cannot-be-fulfilled`` (``cloudprovider/aws/
    auto_scaling_groups.go`` ``createPlaceholdersForDesiredNonStartedInstances``), reported with
    ``OutOfResourcesErrorClass`` (``aws_cloud_provider.go`` ``Nodes``), and ``clusterstate/clusterstate.go``
    backs the group off again. So ``gauge == 1`` held for 15 minutes never fires during the 5- and
    10-minute backoffs, whatever happens; the alert reads the gauge's maximum over a window longer than
    the retry gap (:data:`~components.specs.cluster_autoscaler.RETRY_GAP_WINDOW`), ``by`` group and reason
    across replicas (only the leader sets the gauge).

    Severity warning: the platform pages on what users feel (slow first tokens in the interactive
    tier, an unscrapable gateway, GPU hardware faults), and where the gateway has a Bedrock fallback a
    cold model's requests go there meanwhile. A group that cannot grow is a capacity decision (another
    pool, another capacity type, the block's window), not something an on-call can fix at night; for a
    Capacity Block past its end it is the state the offline check warned of beforehand.
    """
    window, hold = autoscaler_spec.RETRY_GAP_WINDOW, autoscaler_spec.UNABLE_TO_GROW_FOR
    pool_tag = f"{NODE_TEMPLATE_PREFIX}label/{contract.POOL_LABEL}"
    deployment = f"deploy/{autoscaler_spec.FULLNAME}"
    return {
        "name": "cluster-autoscaler",
        "rules": [
            _alert(
                "ClusterAutoscalerCannotGrowNodeGroup",
                f"max by (node_group, reason) "
                f'(max_over_time({CA_NODE_GROUP_BACKOFF}{{reason!=""}}[{window}])) == 1',
                hold, "warning",
                "Cluster Autoscaler cannot grow node group {{ $labels.node_group }} ({{ $labels.reason }})",
                f"Pods waiting for this managed node group stay Pending: its scale-ups have failed for {hold} "
                "and the autoscaler backs the group off (5 minutes, doubling to 30) and retries while they wait. "
                "node_group is the Auto Scaling group; EKS names it eks-<nodegroup>-<uuid>. Its pool: "
                "aws autoscaling describe-tags --filters Name=auto-scaling-group,Values={{ $labels.node_group }} "
                f"(tags eks:nodegroup-name and {pool_tag}); EC2's own reason: aws autoscaling "
                "describe-scaling-activities --auto-scaling-group-name {{ $labels.node_group }}. By reason: "
                "placeholder-cannot-be-fulfilled: EC2 launched none of the requested instances, capacity is not "
                "available: a Capacity Block outside its window (before its start or after its end), Spot capacity "
                "exhausted for every listed type, an ODCR fully used or expired. Move the pool's models to a pool with capacity, add instance types or "
                "another capacity type, or wait for the block's window (docs/reserved-capacity.md). "
                "timeout: instances launched but did not join within max-node-provision-time: check the nodes' "
                "bootstrap (console output, nodeadm), the node role's access entry and the VPC CNI. "
                "Any other reason (cloudProviderError, apiCallError, internalError, unknown): the autoscaler's own "
                "calls failed: check "
                f"kubectl -n {autoscaler_spec.NAMESPACE} logs {deployment} and its Pod Identity role. The "
                f"autoscaler's own view: kubectl -n {autoscaler_spec.NAMESPACE} get configmap "
                "cluster-autoscaler-status -o yaml.",
            ),
            _alert(
                "ClusterAutoscalerMetricsMissing", f"absent({CLUSTER_AUTOSCALER_UP} == 1)", "10m", "warning",
                "Prometheus cannot scrape Cluster Autoscaler",
                "Without its metrics ClusterAutoscalerCannotGrowNodeGroup cannot fire. Check the autoscaler's pods "
                f"(kubectl -n {autoscaler_spec.NAMESPACE} get pods -l app.kubernetes.io/name={autoscaler_spec.APP_NAME}), "
                "the ServiceMonitor monitoring/cluster-autoscaler and the target in Prometheus (Status > Targets).",
            ),
        ],
    }


def cost_rules(gpu_hours_budget: int | None) -> dict[str, object]:
    """GPU hours as the cluster actually ran them (kube-state-metrics allocatable GPUs, sampled every
    5 minutes), and an alert when the last 30 days exceed the stack's monthly GPU-hour budget."""
    days = GPU_HOURS_WINDOW_DAYS
    rules: list[dict[str, object]] = [
        {"record": "llm_platform:gpus_allocatable:sum", "expr": f'sum({KSM_NODE_STATUS_ALLOCATABLE}{{resource="{KSM_GPU_RESOURCE}"}})'},
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


def rule_groups(
    gpu_hours_budget: int | None, fb_free_min: float, gateway: bool, tiers: Sequence[tuple[str, TierScaling]] = (),
    gpu_prices: Sequence[GpuPrice] = (), bedrock_fallbacks: Sequence[BedrockFallback] = (),
    pool_prices: Sequence[PoolPrice] = (),
    cluster_autoscaler: bool = False,
) -> list[dict[str, object]]:
    """Every rule group of the platform's PrometheusRule (the autoscaler's only when it is installed)."""
    groups = [g for g in alert_rules(fb_free_min, tiers) if gateway or g["name"] != "gateway"]
    if cluster_autoscaler:
        groups.append(cluster_autoscaler_rules())
    kv_targets = [*((name, scaling.kv_cache_usage) for name, scaling in tiers), (None, TierScaling().kv_cache_usage)]
    return [*groups, cost_rules(gpu_hours_budget), *token_cost_groups(gpu_prices, bedrock_fallbacks, kv_targets, pool_prices)]


@dataclass(frozen=True)
class ObservabilityArgs:
    """Inputs of :class:`Observability`. ``gpu_hours_budget`` (GPU hours per 30 days) adds the cost
    alert; ``gpu_memory_utilizations`` (of the served models) sets the framebuffer alert; ``gateway``
    adds the gateway-scrape alert; ``settings`` sizes Prometheus and routes alerts; ``tier_scaling``
    (tier name and its scaling settings, per serving tier) sets each tier's serving alert thresholds
    (without it every tier gets the default targets' thresholds); ``gpu_prices`` (per-GPU prices of the
    catalog in the stack's region) and ``bedrock_fallbacks`` (each model's first Bedrock fallback with its
    price) feed the token-cost rules (:mod:`components.observability.token_cost`), with ``pool_prices``
    (each hybrid pool's chargeback rate) for GPUs no catalog prices; ``cluster_autoscaler``
    (the stack runs Cluster Autoscaler) adds its ServiceMonitor and alerts, here because this component
    installs the ServiceMonitor CRD and the autoscaler must not wait for Prometheus."""

    namespace: str = NAMESPACE
    gpu_hours_budget: int | None = None
    gpu_memory_utilizations: tuple[float, ...] = ()
    gateway: bool = False
    tier_scaling: tuple[tuple[str, TierScaling], ...] = ()
    gpu_prices: tuple[GpuPrice, ...] = ()
    bedrock_fallbacks: tuple[BedrockFallback, ...] = ()
    pool_prices: tuple[PoolPrice, ...] = ()
    cluster_autoscaler: bool = False
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
        # Alertmanager's SNS role. EKS injects Pod Identity credentials at pod admission, and only if
        # the association exists then: the release waits for the association, or Alertmanager starts
        # without credentials and stays so until its pod is recreated.
        topics = [r.sns.topic_arn for r in alerting.receivers if r.sns is not None]
        associations: list[pulumi.Resource] = []
        if topics:
            _, association = pod_identity_role(
                f"{name}-alertmanager-sns",
                description=f"Alertmanager of {args.cluster_name}: publish alerts to the configured SNS topics",
                policy=sns_publish_policy(topics),
                cluster_name=args.cluster_name,
                namespace=args.namespace,
                service_account=f"{RELEASE}-alertmanager",
                tags=args.tags,
                parent=self,
            )
            associations.append(association)

        stack = pinned_release(
            f"{name}-prometheus",
            versions.KUBE_PROMETHEUS_STACK,
            release_name=RELEASE,
            namespace=args.namespace,
            values=prometheus_stack_values(args.settings.prometheus),
            timeout=900,
            create_namespace=False,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[namespace, storage, config, *associations]),
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
                    args.gpu_hours_budget,
                    framebuffer_free_min(list(args.gpu_memory_utilizations)),
                    args.gateway,
                    args.tier_scaling,
                    args.gpu_prices,
                    args.bedrock_fallbacks,
                    args.pool_prices,
                    args.cluster_autoscaler,
                )
            },
            opts=after_stack,
        )
        if args.cluster_autoscaler:
            k8s.apiextensions.CustomResource(
                f"{name}-cluster-autoscaler",
                api_version="monitoring.coreos.com/v1",
                kind="ServiceMonitor",
                metadata={"name": autoscaler_spec.RELEASE, "namespace": args.namespace},
                spec=autoscaler_spec.service_monitor_spec(),
                opts=after_stack,
            )
        for dashboard in dashboards(args.gpu_hours_budget, any(f.priced for f in args.bedrock_fallbacks)):
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
