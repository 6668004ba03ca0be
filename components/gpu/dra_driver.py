"""GpuDraDriver: the NVIDIA DRA driver, which publishes the GPUs of ``gpu-dra`` pools as DRA devices.

Pods on those pools claim GPUs with ``resourceClaims`` (DeviceClass ``gpu.nvidia.com``) instead of
``nvidia.com/gpu`` limits. The device plugin stays off DRA pools (``gpu_software``), so each GPU has
exactly one owner; that is what the chart's ``gpuResourcesEnabledOverride`` acknowledges.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from components import contract, versions
from components.helm import pinned_release

TYPE = "llm-platform:index:GpuDraDriver"
#: The DeviceClass the chart creates for whole GPUs; workloads name it in ResourceClaimTemplates.
GPU_DEVICE_CLASS = "gpu.nvidia.com"
#: DRA is GA (``resource.k8s.io/v1``) from Kubernetes 1.34, the oldest minor this program supports.
RESOURCE_API_VERSION = "resource.k8s.io/v1"


@dataclass(frozen=True)
class GpuDraDriverArgs:
    """Inputs of :class:`GpuDraDriver`. ``namespace`` is created by the release (the chart refuses
    ``default``)."""

    namespace: str = "nvidia-dra-driver-gpu"


def dra_pool_affinity() -> dict[str, object]:
    """Where the kubelet plugin runs: GPU nodes of ``gpu-dra`` pools, nowhere else."""
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": contract.PURPOSE_LABEL, "operator": "In", "values": [contract.GPU_DRA_PURPOSE]},
                            {"key": contract.GPU_PRESENT_LABEL, "operator": "In", "values": ["true"]},
                        ]
                    }
                ]
            }
        }
    }


def dra_driver_values() -> dict[str, object]:
    """Chart values, each set on purpose (the chart fails on its unsafe defaults).

    - ``nvidiaDriverRoot: /``: the AL2023 NVIDIA AMI has the driver on the host.
    - GPUs on, ``gpuResourcesEnabledOverride``: the device plugin is kept off DRA pools.
    - ComputeDomains off: they need multi-node NVLink (IMEX), which no catalog instance has; with
      them off the chart deploys no controller, only the kubelet plugin.
    - ``resourceApiVersion`` fixed to v1 instead of guessing from the API server's list.
    - the kubelet plugin on DRA pools only, tolerating their taints.
    """
    image = versions.NVIDIA_DRA_DRIVER_IMAGE
    return {
        "nvidiaDriverRoot": "/",
        "image": {"repository": image.repository, "tag": image.tag},
        "resourceApiVersion": RESOURCE_API_VERSION,
        "resources": {"gpus": {"enabled": True}, "computeDomains": {"enabled": False}},
        "gpuResourcesEnabledOverride": True,
        "webhook": {"enabled": False},
        "logVerbosity": "2",
        "kubeletPlugin": {
            "priorityClassName": "system-node-critical",
            "nodeSelector": {contract.PURPOSE_LABEL: contract.GPU_DRA_PURPOSE},
            "tolerations": [*contract.gpu_agent_tolerations(), {"key": "CriticalAddonsOnly", "operator": "Exists"}],
            "affinity": dra_pool_affinity(),
            "containers": {
                "gpus": {"resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}}},
            },
        },
    }


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
