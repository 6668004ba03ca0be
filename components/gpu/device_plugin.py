"""GpuDevicePlugin: the NVIDIA device plugin that advertises ``nvidia.com/gpu`` on GPU nodes."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from components import versions
from components.helm import pinned_release
from components.specs.gpu_software import device_plugin_values

TYPE = "llm-platform:index:GpuDevicePlugin"


@dataclass(frozen=True)
class GpuDevicePluginArgs:
    """Inputs of :class:`GpuDevicePlugin`.

    Use it on AL2023 NVIDIA nodes (managed groups, Karpenter). Bottlerocket NVIDIA AMIs and EKS Auto
    Mode ship their own device plugin, and the GPU Operator brings one: never install two.
    ``namespace`` is created by the release.
    """

    namespace: str = "nvidia-device-plugin"


class GpuDevicePlugin(pulumi.ComponentResource):
    """A pinned Helm release of ``nvidia-device-plugin`` as a DaemonSet on GPU nodes only."""

    release_name: pulumi.Output[str | None]
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
