"""EfaFabric: what Elastic Fabric Adapter needs for models that span nodes: the AWS EFA device plugin,
which advertises ``vpc.amazonaws.com/efa`` on EFA nodes, and the node security group's self rules.

Without it no node advertises the resource and every multi-node model pod (which requests all of its
node's EFA interfaces) stays Pending. The chart's DaemonSet keeps to EFA-capable instance types by its
own required node affinity (``supportedInstanceLabels``) but tolerates only ``CriticalAddonsOnly``
(aws/eks-charts stable/aws-efa-k8s-device-plugin templates/daemonset.yaml): on the platform's GPU nodes,
all tainted ``nvidia.com/gpu:NoSchedule``, it would run nowhere. The values add the contract's GPU
taint. The plugin runs privileged (it opens ``/dev/infiniband``), so it lives in ``kube-system``, not in a
namespace with Pod Security ``restricted``.

EFA traffic (SRD) is not IP: a security group must allow all inbound and all outbound traffic to itself by
reference (EC2 user guide, "Prepare an EFA-enabled security group"); a 0.0.0.0/0 egress rule does not count.
The nodes' security group is the EKS cluster security group, whose inbound self rule EKS creates (EKS user
guide, "Amazon EKS security group requirements"); the outbound self rule is added here.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components import contract, versions
from components.helm import pinned_release

TYPE = "llm-platform:index:EfaFabric"


def efa_device_plugin_values() -> dict[str, object]:
    """The pinned image and a toleration of the GPU taint (any value: every GPU pool's taint)."""
    image = versions.AWS_EFA_DEVICE_PLUGIN_IMAGE
    return {
        "image": {"repository": image.repository, "tag": image.chart_tag},
        "tolerations": [{"key": contract.GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}],
        "resources": {"requests": {"cpu": "10m", "memory": "20Mi"}, "limits": {"memory": "64Mi"}},
    }


@dataclass(frozen=True)
class EfaFabricArgs:
    """Inputs of :class:`EfaFabric`: the nodes' security group (the cluster's) and the plugin's namespace."""

    node_security_group_id: pulumi.Input[str]
    namespace: str = "kube-system"


class EfaFabric(pulumi.ComponentResource):
    """A pinned Helm release of ``aws-efa-k8s-device-plugin`` (a DaemonSet on EFA-capable nodes) and the
    outbound self rule of the nodes' security group."""

    namespace: str

    def __init__(self, name: str, args: EfaFabricArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(TYPE, name, None, opts)
        aws.vpc.SecurityGroupEgressRule(
            f"{name}-self-egress",
            security_group_id=args.node_security_group_id,
            referenced_security_group_id=args.node_security_group_id,
            ip_protocol="-1",
            description="EFA: all traffic to the nodes' own security group",
            opts=pulumi.ResourceOptions(parent=self),
        )
        pinned_release(
            f"{name}-release",
            versions.AWS_EFA_DEVICE_PLUGIN,
            release_name="aws-efa-k8s-device-plugin",
            namespace=args.namespace,
            create_namespace=False,
            values=efa_device_plugin_values(),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.namespace = args.namespace
        self.register_outputs({"namespace": self.namespace})
