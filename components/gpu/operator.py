"""GpuOperator: the NVIDIA GPU Operator, with operands switched per node type."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from components import versions
from components.helm import pinned_release
from components.specs import gpu_software

TYPE = "llm-platform:index:GpuOperator"


@dataclass(frozen=True)
class GpuOperatorArgs:
    """Inputs of :class:`GpuOperator`.

    ``install_driver`` turns the driver and container toolkit on cluster-wide, which only hybrid
    (on-prem) nodes need; cloud GPU nodes opt out through the ``nvidia.com/gpu.deploy.*`` labels
    their pools carry (see :mod:`components.specs.gpu_software`). ``dcgm_exporter`` adds DCGM metrics
    with a ServiceMonitor.
    """

    install_driver: bool
    dcgm_exporter: bool = True
    namespace: str = "gpu-operator"


def gpu_operator_values(args: GpuOperatorArgs) -> dict[str, object]:
    """The chart's values for ``args`` (see :func:`components.specs.gpu_software.gpu_operator_values`)."""
    return gpu_software.gpu_operator_values(install_driver=args.install_driver, dcgm_exporter=args.dcgm_exporter)


class GpuOperator(pulumi.ComponentResource):
    """A pinned ``gpu-operator`` release (v26) whose daemonsets and NFD workers reach every GPU pool."""

    namespace: str

    def __init__(self, name: str, args: GpuOperatorArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(TYPE, name, None, opts)
        pinned_release(
            f"{name}-release",
            versions.NVIDIA_GPU_OPERATOR,
            release_name="gpu-operator",
            namespace=args.namespace,
            values=gpu_operator_values(args),
            timeout=900,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.namespace = args.namespace
        self.register_outputs({"namespace": self.namespace})
