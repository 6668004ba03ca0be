"""GpuDevicePlugin: the NVIDIA device plugin that advertises ``nvidia.com/gpu`` on GPU nodes."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from components import contract, versions
from components.gpu.software import device_plugin_affinity
from components.helm import pinned_release

TYPE = "llm-platform:index:GpuDevicePlugin"


@dataclass(frozen=True)
class GpuDevicePluginArgs:
    """Inputs of :class:`GpuDevicePlugin`.

    Use it on AL2023 NVIDIA nodes (managed groups, Karpenter). Bottlerocket NVIDIA AMIs and EKS Auto
    Mode ship their own device plugin, and the GPU Operator brings one: never install two.
    ``namespace`` is created by the release.
    """

    namespace: str = "nvidia-device-plugin"


def device_plugin_values() -> dict[str, object]:
    """Chart values: tolerate the GPU pools' taints, pin the image, bound the daemon's resources.

    The affinity replaces the chart's default (which matches ``nvidia.com/gpu.present=true`` or NFD's
    PCI/CPU labels): GPU pools carry that label through the contract, and Auto Mode and DRA nodes
    are excluded so no node ever runs two device plugins.
    """
    image = versions.NVIDIA_DEVICE_PLUGIN_IMAGE
    return {
        "image": {"repository": image.repository, "tag": image.chart_tag},
        "tolerations": [*contract.gpu_agent_tolerations(), {"key": "CriticalAddonsOnly", "operator": "Exists"}],
        "affinity": device_plugin_affinity(),
        "priorityClassName": "system-node-critical",
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
        "gfd": {"enabled": False},
        "failOnInitError": True,
    }


class GpuDevicePlugin(pulumi.ComponentResource):
    """A pinned Helm release of ``nvidia-device-plugin`` as a DaemonSet on GPU nodes only."""

    release_name: pulumi.Output[str]
    namespace: str

    def __init__(self, name: str, args: GpuDevicePluginArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(TYPE, name, None, opts)
        release = pinned_release(
            f"{name}-release",
            versions.NVIDIA_DEVICE_PLUGIN,
            release_name="nvidia-device-plugin",
            namespace=args.namespace,
            values=device_plugin_values(),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.release_name = release.name
        self.namespace = args.namespace
        self.register_outputs({"release_name": self.release_name, "namespace": self.namespace})
