"""GpuDraDriver: the DRA Driver for NVIDIA GPUs, which publishes the GPUs of ``gpu-dra`` pools as DRA devices.

Pods on those pools claim GPUs with ``resourceClaims`` (DeviceClass ``gpu.nvidia.com``) instead of
``nvidia.com/gpu`` limits. The device plugin stays off DRA pools (``gpu_software``), so each GPU has
exactly one owner; that is what the chart's ``gpuResourcesEnabledOverride`` acknowledges.

The driver's chart keeps its ComputeDomain CRDs in ``crds/``, which Helm installs on a first install and
never upgrades. The component applies them itself (``versions.NVIDIA_DRA_DRIVER_CRDS``), before the
release, which then skips ``crds/``: an upgrade gets the new CRDs before the objects that use them.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

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
    """The driver's CRDs, then a pinned Helm release of ``dra-driver-nvidia-gpu`` under its old name: a
    kubelet-plugin DaemonSet on DRA pools and the ``gpu.nvidia.com`` DeviceClass."""

    namespace: str
    crds: list[str]

    def __init__(self, name: str, args: GpuDraDriverArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(TYPE, name, None, opts)
        crds = [
            k8s.yaml.v2.ConfigFile(f"{name}-{crd.name.removesuffix('.yaml')}", file=crd.url,
                                   opts=pulumi.ResourceOptions(parent=self))
            for crd in versions.NVIDIA_DRA_DRIVER_CRDS
        ]
        pinned_release(
            f"{name}-release",
            versions.NVIDIA_DRA_DRIVER,
            release_name=versions.NVIDIA_DRA_DRIVER_NAME,
            namespace=args.namespace,
            values=dra_driver_values(),
            skip_crds=True,
            opts=pulumi.ResourceOptions(parent=self, depends_on=crds),
        )
        self.namespace = args.namespace
        self.crds = [crd.url for crd in versions.NVIDIA_DRA_DRIVER_CRDS]
        self.register_outputs({"namespace": self.namespace, "crds": self.crds})
