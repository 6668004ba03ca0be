"""Cluster Autoscaler as Prometheus sees it: where its metrics are, and how long its retries leave
the per-group backoff gauge at 0.

The pinned chart (cluster-autoscaler 9.59.0, ``templates/service.yaml``) renders one Service named
after the release and the cloud provider, labelled with the chart's ``cluster-autoscaler.labels``
(``app.kubernetes.io/name: aws-cluster-autoscaler``, ``app.kubernetes.io/instance: <release>``) and
one port, ``service.portName`` (default ``http``), to the container's 8085, where the autoscaler
serves ``/metrics``. The Service monitor below selects it by those labels and that port name; the
test renders the chart with Helm's engine and checks that they meet.

Per-group series (``cluster_autoscaler_node_group_backoff_status`` among them) are registered only
with ``--emit-per-nodegroup-metrics=true`` (kubernetes/autoscaler ``cluster-autoscaler/metrics/
metrics.go`` ``RegisterAll``; the flag in ``config/flags/flags.go`` defaults to false), which
:mod:`components.managed_pools.cluster_autoscaler` sets.
"""

from __future__ import annotations

RELEASE = "cluster-autoscaler"
NAMESPACE = "kube-system"
#: ``cluster-autoscaler.name`` for ``cloudProvider: aws`` (the chart's ``_helpers.tpl``).
APP_NAME = "aws-cluster-autoscaler"
#: ``cluster-autoscaler.fullname``: the release, then the name (its Service and Deployment are named so).
FULLNAME = f"{RELEASE}-{APP_NAME}"
#: The labels the chart puts on its pods and its Service (and selects its pods by).
SELECTOR_LABELS = {"app.kubernetes.io/name": APP_NAME, "app.kubernetes.io/instance": RELEASE}
#: The Service's port name (chart value ``service.portName``; the program leaves the default).
METRICS_PORT_NAME = "http"
#: The flag without which no per-group series exists.
PER_NODEGROUP_METRICS_FLAG = "emit-per-nodegroup-metrics"
#: How often Prometheus reads the autoscaler: its loop runs every 10 s (``--scan-interval``), and a
#: backoff lasts minutes, so 30 s sees every change that matters to the alert.
SCRAPE_INTERVAL = "30s"

# --- The engine's retry gap ---------------------------------------------------------------------------
#: When a backoff ends the gauge reads 0 until the retry fails again: the next loop (``--scan-interval``,
#: 10 s, ``config/const.go`` DefaultScanInterval) raises the desired size, EC2 Auto Scaling records the
#: failed launch, and the AWS provider sees it at its next ASG refresh (``aws_manager.go`` refreshInterval,
#: 1 minute; ``auto_scaling_groups.go`` ``isNodeGroupAvailable`` reads the scaling activities), so about
#: one to two minutes. The alert's window is more than twice that, so one gap never breaks it.
RETRY_GAP_WINDOW = "5m"
#: How long a group must stay unable to grow before the alert fires: longer than one first backoff
#: (5 minutes, ``--initial-node-group-backoff-duration``) plus its retry, so a single failed launch that
#: the retry fixes (a brief Spot shortage) stays silent; two failures in a row fire.
UNABLE_TO_GROW_FOR = "15m"


def service_monitor_spec() -> dict[str, object]:
    """The ServiceMonitor's spec: the chart's Service in kube-system, by its labels and port name."""
    return {
        "namespaceSelector": {"matchNames": [NAMESPACE]},
        "selector": {"matchLabels": dict(SELECTOR_LABELS)},
        "endpoints": [{"port": METRICS_PORT_NAME, "path": "/metrics", "interval": SCRAPE_INTERVAL}],
    }
