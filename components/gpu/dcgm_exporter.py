"""DcgmExporter: per-GPU metrics (utilization, framebuffer, XID errors) where the GPU Operator is not used."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from components import versions
from components.helm import pinned_release
from components.specs.gpu_software import dcgm_exporter_values

TYPE = "llm-platform:index:DcgmExporter"


@dataclass(frozen=True)
class DcgmExporterArgs:
    """Inputs of :class:`DcgmExporter`. The ServiceMonitor needs the Prometheus Operator CRDs."""

    namespace: str = "nvidia-device-plugin"


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
