"""DcgmExporter: per-GPU metrics (utilization, framebuffer, XID errors) where the GPU Operator is not used."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from components import contract, versions
from components.gpu.software import gpu_monitoring_affinity
from components.helm import pinned_release
from components.observability.dcgm_counters import counters_csv, xid_window_env

TYPE = "llm-platform:index:DcgmExporter"


@dataclass(frozen=True)
class DcgmExporterArgs:
    """Inputs of :class:`DcgmExporter`. The ServiceMonitor needs the Prometheus Operator CRDs."""

    namespace: str = "nvidia-device-plugin"


def dcgm_exporter_values() -> dict[str, object]:
    """The chart's ``customMetrics`` replaces its counters ConfigMap (mounted over
    ``default-counters.csv``, which the chart's default ``arguments`` read), so the windowed XID count
    the alerts use is collected; ``extraEnv`` pins that count's window."""
    image = versions.DCGM_EXPORTER_IMAGE
    return {
        "image": {"repository": image.repository, "tag": image.tag},
        "customMetrics": counters_csv(),
        "extraEnv": xid_window_env(),
        "tolerations": contract.gpu_agent_tolerations(),
        "affinity": gpu_monitoring_affinity(),
        "serviceMonitor": {"enabled": True, "interval": "15s", "honorLabels": False},
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
        "priorityClassName": "system-node-critical",
        "nodeSelector": {contract.GPU_PRESENT_LABEL: "true"},
    }


class DcgmExporter(pulumi.ComponentResource):
    """A pinned ``dcgm-exporter`` DaemonSet on the same nodes as the device plugin."""

    namespace: str

    def __init__(self, name: str, args: DcgmExporterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(TYPE, name, None, opts)
        pinned_release(
            f"{name}-release",
            versions.DCGM_EXPORTER,
            release_name="dcgm-exporter",
            namespace=args.namespace,
            values=dcgm_exporter_values(),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.namespace = args.namespace
        self.register_outputs({"namespace": self.namespace})
