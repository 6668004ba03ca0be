"""GpuOperator: the NVIDIA GPU Operator, with operands switched per node type."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from components import contract, versions
from components.helm import pinned_release
from components.observability.dcgm_counters import GPU_OPERATOR_COUNTERS_CONFIGMAP, counters_csv, xid_window_env

TYPE = "llm-platform:index:GpuOperator"


@dataclass(frozen=True)
class GpuOperatorArgs:
    """Inputs of :class:`GpuOperator`.

    ``install_driver`` turns the driver and container toolkit on cluster-wide, which only hybrid
    (on-prem) nodes need; cloud GPU nodes opt out through the ``nvidia.com/gpu.deploy.*`` labels
    their pools carry (see :mod:`components.gpu.software`). ``dcgm_exporter`` adds DCGM metrics
    with a ServiceMonitor.
    """

    install_driver: bool
    dcgm_exporter: bool = True
    namespace: str = "gpu-operator"


_RUNTIME_DEFAULT_SECCOMP = {"seccompProfile": {"type": "RuntimeDefault"}}


def gpu_operator_values(args: GpuOperatorArgs) -> dict[str, object]:
    tolerations = contract.gpu_agent_tolerations()
    return {
        "operator": {"nodeSelector": contract.system_node_selector()},
        "driver": {"enabled": args.install_driver},
        "toolkit": {"enabled": args.install_driver},
        "devicePlugin": {"enabled": True},
        "migManager": {"enabled": True},
        "cdi": {"enabled": True},
        "nfd": {"enabled": True},
        # The chart creates the counters ConfigMap (key dcgm-metrics.csv) and names it in the
        # ClusterPolicy; the operator mounts it into the exporter and points DCGM_EXPORTER_COLLECTORS
        # at it (gpu-operator controllers/object_controls.go, TransformDCGMExporter). It adds the
        # windowed XID count the alerts use; the env pins that count's window.
        "dcgmExporter": {
            "enabled": args.dcgm_exporter,
            "serviceMonitor": {"enabled": args.dcgm_exporter},
            "config": {"name": GPU_OPERATOR_COUNTERS_CONFIGMAP, "create": True, "data": counters_csv()},
            "env": xid_window_env(),
        },
        "daemonsets": {"tolerations": tolerations, "priorityClassName": "system-node-critical"},
        # NFD's chart leaves seccomp unset (Pod Security "restricted" requires it); master's container
        # context also covers the post-delete prune Job. The worker still needs its hostPath mounts.
        "node-feature-discovery": {
            "master": {"nodeSelector": contract.system_node_selector(), "securityContext": _RUNTIME_DEFAULT_SECCOMP},
            "gc": {"nodeSelector": contract.system_node_selector(), "podSecurityContext": _RUNTIME_DEFAULT_SECCOMP},
            "worker": {
                "podSecurityContext": _RUNTIME_DEFAULT_SECCOMP,
                "tolerations": [
                    {"key": "node-role.kubernetes.io/control-plane", "operator": "Equal", "value": "", "effect": "NoSchedule"},
                    *tolerations,
                ]
            },
        },
    }


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
