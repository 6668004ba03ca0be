"""Karpenter: the controller that provisions GPU nodes on demand, with its IAM, queue and charts.

Sections follow terraform-aws-eks's karpenter module: controller role (Pod Identity), node role and
access entry, interruption queue, Helm releases, discovery tags.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from components import contract, versions
from components.cluster.node_role import NodeRole, NodeRoleArgs
from components.helm import pinned_release
from components.iam import pod_identity_role
from components.karpenter.controller_policy import PolicyScope, controller_policy
from components.karpenter.interruption_queue import InterruptionQueue, InterruptionQueueArgs
from components.tags import karpenter_discovery_tag

TYPE = "llm-platform:index:Karpenter"
SERVICE_ACCOUNT = "karpenter"


@dataclass(frozen=True)
class KarpenterArgs:
    """Inputs of :class:`Karpenter`.

    ``cluster_resource`` orders the access entry and releases after the control plane;
    ``node_security_group_id`` (the EKS cluster security group) gets the discovery tag that
    EC2NodeClasses select on. ``replicas`` controller pods run on the system pool only.
    ``region`` goes to the controller as ``AWS_REGION``: with IMDS hop limit 1 a pod cannot ask
    IMDS, and Karpenter panics at start without a region (aws/karpenter-provider-aws#8219).
    ``pod_identity_agent`` orders the controller after the agent that hands out its credentials.
    """

    cluster_name: str
    cluster_resource: pulumi.Resource
    node_security_group_id: pulumi.Input[str]
    region: str
    pod_identity_agent: pulumi.Resource | None = None
    replicas: int = 2
    namespace: str = "kube-system"
    tags: dict[str, str] = field(default_factory=dict)


def controller_values(cluster_name: str, queue_name: str, replicas: int, region: str) -> dict[str, object]:
    """Chart values: cluster and queue settings, the region, fixed service account for Pod Identity,
    and a placement that keeps the controller on the system pool and off nodes it manages."""
    return {
        "settings": {"clusterName": cluster_name, "interruptionQueue": queue_name},
        "serviceAccount": {"create": True, "name": SERVICE_ACCOUNT},
        "replicas": replicas,
        "nodeSelector": {"kubernetes.io/os": "linux", **contract.system_node_selector()},
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "karpenter.sh/nodepool", "operator": "DoesNotExist"}]}
                    ]
                }
            },
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "kubernetes.io/hostname"}]
            },
        },
        "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}],
        "controller": {
            "image": {"repository": versions.KARPENTER_CONTROLLER_IMAGE.repository,
                      "tag": versions.KARPENTER_CONTROLLER_IMAGE.tag,
                      "digest": versions.KARPENTER_CONTROLLER_IMAGE.digest or ""},
            "env": [{"name": "AWS_REGION", "value": region}],
            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "1Gi"}},
        },
        "podDisruptionBudget": {"name": "karpenter", "maxUnavailable": 1},
    }


class Karpenter(pulumi.ComponentResource):
    """Controller role via Pod Identity, node role with an EC2_LINUX access entry, interruption
    queue with its rules, the pinned ``karpenter-crd`` and ``karpenter`` charts, discovery tags."""

    controller_role_arn: pulumi.Output[str]
    node_role_arn: pulumi.Output[str]
    node_role_name: pulumi.Output[str]
    queue_name: pulumi.Output[str]

    def __init__(self, name: str, args: KarpenterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(TYPE, name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        after_cluster = pulumi.ResourceOptions(parent=self, depends_on=[args.cluster_resource])
        partition = aws.get_partition_output(opts=pulumi.InvokeOutputOptions(parent=self)).partition
        account = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(parent=self)).account_id

        # Node role and access entry
        node_role = NodeRole(
            f"{name}-node", NodeRoleArgs(description="Karpenter-provisioned GPU nodes", tags=args.tags), opts=child
        )
        aws.eks.AccessEntry(
            f"{name}-node",
            cluster_name=args.cluster_name,
            principal_arn=node_role.arn,
            type="EC2_LINUX",
            tags=args.tags,
            opts=after_cluster,
        )

        # Interruption queue
        queue = InterruptionQueue(
            f"{name}-interruption", InterruptionQueueArgs(queue_name=args.cluster_name, tags=args.tags), opts=child
        )

        # Controller role (Pod Identity)
        controller_role, association = pod_identity_role(
            f"{name}-controller",
            description=f"Karpenter controller of {args.cluster_name}",
            policy=pulumi.Output.all(partition, account, node_role.arn, queue.queue_arn).apply(
                lambda a: controller_policy(
                    PolicyScope(
                        partition=a[0], region=args.region, account_id=a[1], cluster_name=args.cluster_name,
                        node_role_arn=a[2], queue_arn=a[3],
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

        # Discovery tags (subnets are tagged by Network)
        for key, value in karpenter_discovery_tag(args.cluster_name).items():
            aws.ec2.Tag(f"{name}-sg-discovery", resource_id=args.node_security_group_id, key=key, value=value, opts=child)

        # Helm releases (the component's providers carry the cluster's Kubernetes provider)
        crds = pinned_release(
            f"{name}-crd",
            versions.KARPENTER_CRD,
            release_name="karpenter-crd",
            namespace=args.namespace,
            values={},
            create_namespace=False,
            opts=after_cluster,
        )
        pinned_release(
            f"{name}-controller",
            versions.KARPENTER,
            release_name="karpenter",
            namespace=args.namespace,
            values=queue.queue_name.apply(lambda q: controller_values(args.cluster_name, q, args.replicas, args.region)),
            create_namespace=False,
            skip_crds=True,
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=[crds, association, *([args.pod_identity_agent] if args.pod_identity_agent else [])],
            ),
        )

        self.controller_role_arn = controller_role.arn
        self.node_role_arn = node_role.arn
        self.node_role_name = node_role.name
        self.queue_name = queue.queue_name
        self.register_outputs(
            {
                "controller_role_arn": self.controller_role_arn,
                "node_role_arn": self.node_role_arn,
                "node_role_name": self.node_role_name,
                "queue_name": self.queue_name,
            }
        )
