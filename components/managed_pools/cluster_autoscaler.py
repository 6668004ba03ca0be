"""ClusterAutoscaler: grows and shrinks the EKS managed node groups (system and GPU pools).

Managed groups never change size on their own; Karpenter and Auto Mode capacity is not in any Auto
Scaling group, so the autoscaler never acts on it. Groups are found by the auto-discovery tags EKS
puts on every managed group's ASG; a group at zero is described by the node-template tags that
:class:`~components.managed_pools.node_groups.GpuNodePool` puts on its ASG.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from components import contract, versions
from components.helm import pinned_release
from components.iam import pod_identity_role
from components.managed_pools.cluster_autoscaler_policy import AutoscalerScope, autoscaler_policy
from components.specs import cluster_autoscaler as spec

TYPE = "llm-platform:index:ClusterAutoscaler"
SERVICE_ACCOUNT = "cluster-autoscaler"

#: Flags chosen for GPU nodes (the chart passes ``extraArgs`` as ``--key=value``).
GPU_SCALING_FLAGS: dict[str, object] = {
    # Pick the group that leaves the least idle CPU/memory after the pending pods land: with one GPU
    # model per pool this is the smallest instance that fits, not a random GPU type.
    "expander": "least-waste",
    # Each managed group already spans every AZ, and GPU pools differ by design (pool label,
    # accelerator, taints): nothing is "similar", balancing would only cost API calls.
    "balance-similar-node-groups": False,
    # vLLM keeps its weights in an emptyDir on NVMe: with the default (true) no GPU node would ever
    # scale down.
    "skip-nodes-with-local-storage": False,
    # GPU node agents (device plugin, DCGM exporter, DRA plugin) do not keep a node alive.
    "ignore-daemonsets-utilization": True,
    # An idle GPU node costs dollars per hour: remove it after 10 minutes unneeded, but not within 10
    # minutes of a scale-up (model downloads and warm-up look idle to the autoscaler).
    "scale-down-unneeded-time": "10m",
    "scale-down-delay-after-add": "10m",
    "scale-down-utilization-threshold": "0.5",
    # NVIDIA AMIs boot and register more slowly than CPU nodes; give them 20 minutes before the
    # autoscaler gives up on a scale-up and backs off the group.
    "max-node-provision-time": "20m",
    "cordon-node-before-terminating": True,
    # Simulate DRA claims (locked on from 1.35, off by default in 1.34): without it the autoscaler
    # would think a claimed GPU is free and never grow a DRA pool.
    "enable-dynamic-resource-allocation": True,
    "leader-elect": True,
}
#: Flags for the platform's monitoring: per-group series, among them the backoff gauge that the
#: ``ClusterAutoscalerCannotGrowNodeGroup`` alert reads (not registered without the flag; see
#: :mod:`components.specs.cluster_autoscaler`).
MONITORING_FLAGS: dict[str, object] = {spec.PER_NODEGROUP_METRICS_FLAG: True}


@dataclass(frozen=True)
class ClusterAutoscalerArgs:
    """Inputs of :class:`ClusterAutoscaler`.

    ``autoscaling_group_names`` are the ASGs of every managed group (the IAM policy allows scaling
    those only). ``kubernetes_version`` picks the image (one autoscaler release per minor; allowed:
    ``versions.CLUSTER_AUTOSCALER_IMAGES``). ``replicas`` (default 1; 2 in production) run with
    leader election and a PodDisruptionBudget on the system pool. ``pod_identity_agent`` orders the
    release after the agent that hands out its credentials.
    """

    cluster_name: str
    cluster_resource: pulumi.Resource
    region: str
    kubernetes_version: str
    autoscaling_group_names: list[pulumi.Input[str]]
    pod_identity_agent: pulumi.Resource
    replicas: int = 1
    namespace: str = spec.NAMESPACE
    tags: dict[str, str] = field(default_factory=dict)


def controller_values(cluster_name: str, region: str, kubernetes_version: str, replicas: int) -> dict[str, object]:
    """Chart values: AWS auto-discovery for this cluster, explicit region (pods cannot reach IMDS
    with hop limit 1), fixed service account for Pod Identity, system-pool placement."""
    image = versions.CLUSTER_AUTOSCALER_IMAGES[kubernetes_version]
    return {
        "cloudProvider": "aws",
        "awsRegion": region,
        "autoDiscovery": {"clusterName": cluster_name},
        "image": {"repository": image.repository, "tag": image.chart_tag},
        "rbac": {"serviceAccount": {"create": True, "name": SERVICE_ACCOUNT}},
        "replicaCount": replicas,
        # Pod Security restricted (the chart leaves both empty; the image runs as nobody, 65534).
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": 65534,
            "runAsGroup": 65534,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containerSecurityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "podDisruptionBudget": {"maxUnavailable": 1},
        "nodeSelector": contract.system_node_selector(),
        "affinity": {
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "podAffinityTerm": {
                            "topologyKey": "kubernetes.io/hostname",
                            "labelSelector": {
                                "matchLabels": {"app.kubernetes.io/name": spec.APP_NAME}
                            },
                        },
                    }
                ]
            }
        },
        "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}],
        "resources": {"requests": {"cpu": "100m", "memory": "600Mi"}, "limits": {"memory": "600Mi"}},
        "extraArgs": {"logtostderr": True, "stderrthreshold": "info", "v": 2, **GPU_SCALING_FLAGS, **MONITORING_FLAGS},
    }


class ClusterAutoscaler(pulumi.ComponentResource):
    """Pod Identity role with the upstream least-privilege policy and the pinned chart."""

    role_arn: pulumi.Output[str]

    def __init__(self, name: str, args: ClusterAutoscalerArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(TYPE, name, None, opts)
        if args.kubernetes_version not in versions.CLUSTER_AUTOSCALER_IMAGES:
            raise ValueError(
                f"no Cluster Autoscaler image for Kubernetes {args.kubernetes_version}; "
                f"allowed: {', '.join(versions.CLUSTER_AUTOSCALER_IMAGES)}"
            )
        partition = aws.get_partition_output(opts=pulumi.InvokeOutputOptions(parent=self)).partition
        account = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(parent=self)).account_id

        role, association = pod_identity_role(
            f"{name}-controller",
            description=f"Cluster Autoscaler of {args.cluster_name}",
            policy=pulumi.Output.all(partition, account, *args.autoscaling_group_names).apply(
                lambda a: autoscaler_policy(
                    AutoscalerScope(
                        partition=a[0], region=args.region, account_id=a[1], cluster_name=args.cluster_name,
                        autoscaling_group_names=tuple(a[2:]),
                    )
                )
            ),
            cluster_name=args.cluster_name,
            namespace=args.namespace,
            service_account=SERVICE_ACCOUNT,
            tags=args.tags,
            parent=self,
            association_depends_on=[args.cluster_resource],
        )
        pinned_release(
            f"{name}-release",
            versions.CLUSTER_AUTOSCALER,
            release_name=spec.RELEASE,
            namespace=args.namespace,
            values=controller_values(args.cluster_name, args.region, args.kubernetes_version, args.replicas),
            create_namespace=False,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[association, args.pod_identity_agent]),
        )
        self.role_arn = role.arn
        self.register_outputs({"role_arn": self.role_arn})
