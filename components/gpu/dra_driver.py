"""GpuDraDriver: the NVIDIA DRA driver, which publishes the GPUs of ``gpu-dra`` pools as DRA devices.

Pods on those pools claim GPUs with ``resourceClaims`` (DeviceClass ``gpu.nvidia.com``) instead of
``nvidia.com/gpu`` limits. The device plugin stays off DRA pools (``gpu_software``), so each GPU has
exactly one owner; that is what the chart's ``gpuResourcesEnabledOverride`` acknowledges.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from components import versions
from components.helm import pinned_release
from components.specs.gpu_software import dra_driver_values

TYPE = "llm-platform:index:GpuDraDriver"
@dataclass(frozen=True)
class GpuDraDriverArgs:
    """Inputs of :class:`GpuDraDriver`. ``namespace`` is created by the release (the chart refuses
    ``default``)."""

    namespace: str = "nvidia-dra-driver-gpu"


class GpuDraDriver(pulumi.ComponentResource):
    """A pinned Helm release of ``nvidia-dra-driver-gpu``: a kubelet-plugin DaemonSet on DRA pools
    and the ``gpu.nvidia.com`` DeviceClass."""

    namespace: str

    def __init__(self, name: str, args: GpuDraDriverArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(TYPE, name, None, opts)
        pinned_release(
            f"{name}-release",
            versions.NVIDIA_DRA_DRIVER,
            release_name="nvidia-dra-driver-gpu",
            namespace=args.namespace,
            values=dra_driver_values(),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.namespace = args.namespace
        self.register_outputs({"namespace": self.namespace})
