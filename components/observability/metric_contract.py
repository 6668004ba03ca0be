"""What the program reads from each exporter: metric names, the labels its queries use and the units,
per exporter, with the release they were checked against and where that release defines them.

Alerts, recording rules, dashboards and KEDA's Prometheus triggers all read series that other
programs name. An exporter bump can rename a metric, a label or a unit (DCGM exporter 4.9 moves
framebuffer memory from MiB to bytes and utilization from percent to a ratio) and PromQL does not
complain: the alert just never fires. The tests in ``tests/components/observability/test_metric_contract*``
hold this module to the plan (every metric a query reads is here) and to the pinned releases (every
name, label and unit here is what that release defines), and fail, naming the exporter, when a pin
in :mod:`components.versions` moves away from the release recorded here. ``docs/metric-contracts.md``
says how to re-check on a bump.

Names are as PromQL reads them: counters with ``_total`` and histogram buckets with ``_bucket``
(prometheus_client and the Go client append those to the registered name), vLLM's with colons.
"""

from __future__ import annotations

from dataclasses import dataclass

from components.specs.dcgm_counters import XID_COUNT_METRIC
from components.specs.gateway import DEMAND_CREATED, DEMAND_METRIC

# --- Units ------------------------------------------------------------------------------------------
#: Unit words, as the sources spell them (DCGM's help text "(in MiB)", vLLM's "1 means 100 percent").
MIB = "MiB"
PERCENT = "percent (0-100)"
RATIO = "ratio (0-1)"
WATT = "W"
SECONDS = "seconds"
COUNT = "count"
REQUESTS = "requests"
TOKENS = "tokens"
INFO = "info (value 1; the labels carry the data)"
UNIX_SECONDS = "seconds since the Unix epoch"
BOOLEAN = "boolean (1 or 0)"
#: Grafana's unit id for each contract unit a panel can show as it is.
GRAFANA_UNITS = {PERCENT: "percent", RATIO: "percentunit", WATT: "watt", SECONDS: "s"}


@dataclass(frozen=True)
class Metric:
    """One series family as PromQL reads it. ``labels``: the exporter's own labels the program's
    queries (or Alertmanager templates) use, not every label the exporter sets."""

    name: str
    kind: str
    unit: str
    labels: tuple[str, ...] = ()


@dataclass(frozen=True)
class ExporterContract:
    """An exporter's side of the contract. ``release`` is the release the names were checked against
    (a test compares it with ``pinned_by``); ``source`` is where that release defines them."""

    exporter: str
    release: str
    pinned_by: str
    source: str
    metrics: tuple[Metric, ...]

    @property
    def names(self) -> frozenset[str]:
        return frozenset(m.name for m in self.metrics)

    def metric(self, name: str) -> Metric:
        return next(m for m in self.metrics if m.name == name)


# --- DCGM exporter ----------------------------------------------------------------------------------
DCGM_FB_FREE = "DCGM_FI_DEV_FB_FREE"
DCGM_FB_USED = "DCGM_FI_DEV_FB_USED"
DCGM_GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
DCGM_POWER_USAGE = "DCGM_FI_DEV_POWER_USAGE"
DCGM_XID_ERRORS_COUNT = XID_COUNT_METRIC
#: Labels of every GPU series (dcgm-exporter ``internal/pkg/rendermetrics/render_metrics.go``, the GPU
#: template: ``gpu``, the UUID, ``pci_bus_id``, ``device``, ``modelName``, ``Hostname``). ``Hostname`` is
#: the node's name (``internal/pkg/hostname/hostname.go`` reads ``NODE_NAME``, which the chart's
#: DaemonSet sets from ``spec.nodeName``): the dashboards join it to kube-state-metrics' ``node``.
_DCGM_GPU_LABELS = ("Hostname", "gpu")

DCGM_EXPORTER = ExporterContract(
    exporter="dcgm-exporter",
    release="4.5.3-4.8.2",
    pinned_by="components/versions.py DCGM_EXPORTER_IMAGE.tag",
    source=(
        "github.com/NVIDIA/dcgm-exporter tag 4.5.3-4.8.2: etc/default-counters.csv (fields, types, units "
        "in the help text), internal/pkg/rendermetrics/render_metrics.go (labels), "
        "internal/pkg/collector/xid_collector.go (the xid label)"
    ),
    metrics=(
        Metric(DCGM_FB_FREE, "gauge", MIB, _DCGM_GPU_LABELS),
        Metric(DCGM_FB_USED, "gauge", MIB, _DCGM_GPU_LABELS),
        Metric(DCGM_GPU_UTIL, "gauge", PERCENT, _DCGM_GPU_LABELS),
        Metric(DCGM_POWER_USAGE, "gauge", WATT, _DCGM_GPU_LABELS),
        Metric(DCGM_XID_ERRORS_COUNT, "gauge", COUNT, (*_DCGM_GPU_LABELS, "xid")),
    ),
)

# --- vLLM -------------------------------------------------------------------------------------------
VLLM_NUM_REQUESTS_WAITING = "vllm:num_requests_waiting"
VLLM_NUM_REQUESTS_RUNNING = "vllm:num_requests_running"
VLLM_KV_CACHE_USAGE = "vllm:kv_cache_usage_perc"
VLLM_PREEMPTIONS = "vllm:num_preemptions_total"
VLLM_GENERATION_TOKENS = "vllm:generation_tokens_total"
VLLM_PROMPT_TOKENS = "vllm:prompt_tokens_total"
VLLM_TTFT_BUCKET = "vllm:time_to_first_token_seconds_bucket"
VLLM_ITL_BUCKET = "vllm:inter_token_latency_seconds_bucket"

VLLM = ExporterContract(
    exporter="vllm",
    release="v0.33.0",
    pinned_by="components/versions.py VLLM_IMAGE.tag",
    source=(
        "vllm 0.33.0 (github.com/vllm-project/vllm tag v0.33.0; read from the PyPI wheel "
        "vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl): vllm/v1/metrics/loggers.py PrometheusStatLogger"
    ),
    metrics=(
        Metric(VLLM_NUM_REQUESTS_WAITING, "gauge", REQUESTS, ("model_name",)),
        Metric(VLLM_NUM_REQUESTS_RUNNING, "gauge", REQUESTS, ("model_name",)),
        # "KV-cache usage. 1 means 100 percent usage." despite the _perc suffix.
        Metric(VLLM_KV_CACHE_USAGE, "gauge", RATIO, ("model_name",)),
        Metric(VLLM_PREEMPTIONS, "counter", COUNT, ("model_name",)),
        Metric(VLLM_GENERATION_TOKENS, "counter", TOKENS, ("model_name",)),
        # Prefill tokens of every request, prefix-cache hits included ("Number of prefill tokens processed").
        Metric(VLLM_PROMPT_TOKENS, "counter", TOKENS, ("model_name",)),
        Metric(VLLM_TTFT_BUCKET, "histogram", SECONDS, ("model_name", "le")),
        Metric(VLLM_ITL_BUCKET, "histogram", SECONDS, ("model_name", "le")),
    ),
)

# --- LiteLLM (the gateway) --------------------------------------------------------------------------
LITELLM_PROXY_REQUESTS = DEMAND_METRIC
#: prometheus_client's creation time of each counter child (kind "created": ``<family>_created``).
LITELLM_PROXY_REQUESTS_CREATED = DEMAND_CREATED
LITELLM_FALLBACKS = "litellm_deployment_successful_fallbacks_total"
LITELLM_DEPLOYMENT_FAILURES = "litellm_deployment_failure_responses_total"

LITELLM = ExporterContract(
    exporter="litellm",
    release="v1.110.2",
    pinned_by="components/versions.py LITELLM_IMAGE.tag and requirements-gateway.txt litellm==",
    source=(
        "litellm 1.110.2 (github.com/BerriAI/litellm tag v1.110.2; the installed package in .venv-gateway): "
        "litellm/integrations/prometheus.py PrometheusLogger, labels from get_labels_for_metric"
    ),
    metrics=(
        Metric(LITELLM_PROXY_REQUESTS, "counter", REQUESTS, ("requested_model",)),
        Metric(LITELLM_PROXY_REQUESTS_CREATED, "created", UNIX_SECONDS, ("requested_model",)),
        Metric(LITELLM_FALLBACKS, "counter", REQUESTS, ("requested_model", "fallback_model")),
        Metric(LITELLM_DEPLOYMENT_FAILURES, "counter", REQUESTS, ("model_group", "exception_status")),
    ),
)

# --- KEDA -------------------------------------------------------------------------------------------
#: KEDA is read the other way round: no query reads a ``keda_*`` series; KEDA reads the program's
#: ScaledObject triggers. Its side of the contract is the Prometheus scaler's trigger metadata keys.
KEDA_PROMETHEUS_TRIGGER_KEYS = ("serverAddress", "query", "threshold", "activationThreshold", "ignoreNullValues")

KEDA = ExporterContract(
    exporter="keda",
    release="2.20.2",
    pinned_by="components/versions.py KEDA.version",
    source=(
        "github.com/kedacore/keda tag v2.20.2: pkg/scalers/prometheus_scaler.go prometheusMetadata "
        "(trigger keys), pkg/metricscollector/prommetrics.go (keda_* operator metrics; none read)"
    ),
    metrics=(),
)

# --- kube-state-metrics -----------------------------------------------------------------------------
KSM_NODE_LABELS = "kube_node_labels"
KSM_NODE_STATUS_ALLOCATABLE = "kube_node_status_allocatable"
KSM_POD_LABELS = "kube_pod_labels"
KSM_POD_PHASE = "kube_pod_status_phase"
KSM_POD_RESOURCE_REQUESTS = "kube_pod_container_resource_requests"
#: ``nvidia.com/gpu`` as a ``resource`` label value: kube-state-metrics replaces every character
#: outside ``[a-zA-Z0-9_]`` with ``_`` (``internal/store/utils.go`` SanitizeLabelName).
KSM_GPU_RESOURCE = "nvidia_com_gpu"


def ksm_label(label: str) -> str:
    """The ``label_*`` label kube-state-metrics gives an allow-listed node or pod label (SanitizeLabelName)."""
    return "label_" + "".join(c if c.isascii() and (c.isalnum() or c == "_") else "_" for c in label)


#: kube-prometheus-stack 88.5.3 depends on the kube-state-metrics chart 8.4.0 (its Chart.yaml), whose
#: appVersion is 2.20.0.
KUBE_STATE_METRICS = ExporterContract(
    exporter="kube-state-metrics",
    release="v2.20.0",
    pinned_by=(
        "components/versions.py KUBE_PROMETHEUS_STACK (88.5.3): Chart.yaml dependency kube-state-metrics "
        "8.4.0, appVersion 2.20.0"
    ),
    source=(
        "github.com/kubernetes/kube-state-metrics tag v2.20.0: docs/metrics/cluster/node-metrics.md, "
        "docs/metrics/workload/pod-metrics.md, internal/store/node.go (resource and unit labels), "
        "internal/store/utils.go (SanitizeLabelName)"
    ),
    metrics=(
        Metric(KSM_NODE_LABELS, "gauge", INFO, ("node", "label_*")),
        Metric(KSM_NODE_STATUS_ALLOCATABLE, "gauge", COUNT, ("node", "resource", "unit")),
        Metric(KSM_POD_LABELS, "gauge", INFO, ("namespace", "pod", "label_*")),
        Metric(KSM_POD_PHASE, "gauge", INFO, ("namespace", "pod", "phase")),
        # ``node`` is the node the pod is bound to (empty until the scheduler binds it).
        Metric(KSM_POD_RESOURCE_REQUESTS, "gauge", COUNT, ("namespace", "pod", "node", "resource", "unit")),
    ),
)

# --- Cluster Autoscaler -----------------------------------------------------------------------------
#: 1 while the autoscaler has backed the group off after a failed scale-up, else 0; ``node_group`` is the
#: Auto Scaling group's name (the AWS provider's NodeGroup ``Id()``), ``reason`` the backoff's error code
#: (``placeholder-cannot-be-fulfilled``, ``timeout``, ``cloudProviderError``, ...; ``unknown`` when the
#: cloud gave none). Registered only with ``--emit-per-nodegroup-metrics=true``.
CA_NODE_GROUP_BACKOFF = "cluster_autoscaler_node_group_backoff_status"

#: The release the program runs at the default Kubernetes minor (one image per minor; the 1.34 and 1.36
#: releases define the same series, recorded beside it).
CLUSTER_AUTOSCALER = ExporterContract(
    exporter="cluster-autoscaler",
    release="v1.35.2",
    pinned_by="components/versions.py CLUSTER_AUTOSCALER_IMAGES[DEFAULT_KUBERNETES_VERSION].tag",
    source=(
        "github.com/kubernetes/autoscaler tag cluster-autoscaler-1.35.2: cluster-autoscaler/metrics/metrics.go "
        "(name, labels, RegisterAll), config/flags/flags.go (emit-per-nodegroup-metrics), "
        "processors/status/metrics_autoscaling_status_processor.go (reason values), "
        "cloudprovider/aws/auto_scaling_groups.go and aws_cloud_provider.go (node_group, placeholder reason)"
    ),
    metrics=(Metric(CA_NODE_GROUP_BACKOFF, "gauge", BOOLEAN, ("node_group", "reason")),),
)

# --- Prometheus itself ------------------------------------------------------------------------------
#: Series Prometheus writes, not an exporter: ``up`` per scrape target, ``ALERTS`` per alert.
PROMETHEUS_UP = "up"
PROMETHEUS_SERIES = frozenset({PROMETHEUS_UP, "ALERTS", "ALERTS_FOR_STATE"})
#: Labels Prometheus (the operator's ServiceMonitor/PodMonitor relabeling) puts on every scraped
#: series, and the program's own ``tier`` (the vLLM PodMonitor copies the pod's tier label).
TARGET_LABELS = frozenset({"namespace", "service", "pod", "container", "job", "instance", "endpoint", "tier"})

EXPORTERS: tuple[ExporterContract, ...] = (DCGM_EXPORTER, VLLM, LITELLM, KEDA, KUBE_STATE_METRICS, CLUSTER_AUTOSCALER)


def exporter_of(name: str) -> ExporterContract | None:
    """The exporter whose contract holds the series ``name``, if any."""
    return next((e for e in EXPORTERS if name in e.names), None)
