"""HybridNodes: on-prem GPU servers joined to the cluster as EKS Hybrid Nodes.

The cluster learns the remote node and pod networks; the nodes authenticate through SSM hybrid
activations with a role that may only describe this cluster, and join through a HYBRID_LINUX
access entry. Their driver comes from the GPU Operator (settings require it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_aws as aws

from policies.capacity import kinds

TYPE = "llm-platform:index:HybridNodes"
HYBRID_MANAGED_POLICIES = ("AmazonSSMManagedInstanceCore", "AmazonEC2ContainerRegistryPullOnly")


def remote_network_transform(node_cidrs: list[str], pod_cidrs: list[str]):
    """A resource transform that gives the EKS cluster inside pulumi-eks's Cluster component its
    ``remoteNetworkConfig`` (pulumi-eks has no input for it; aws.eks.Cluster does)."""

    def transform(args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult | None:
        if args.type_ != kinds.AWS_EKS_CLUSTER:
            return None
        config: dict[str, Any] = {"remoteNodeNetworks": {"cidrs": list(node_cidrs)}}
        if pod_cidrs:
            config["remotePodNetworks"] = {"cidrs": list(pod_cidrs)}
        return pulumi.ResourceTransformResult(props={**args.props, "remoteNetworkConfig": config}, opts=args.opts)

    return transform


def hybrid_node_policy(partition: str, region: str, account: str, cluster_name: str) -> str:
    cluster_arn = f"arn:{partition}:eks:{region}:{account}:cluster/{cluster_name}"
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {"Sid": "DescribeCluster", "Effect": "Allow", "Action": ["eks:DescribeCluster", "eks:ListAccessEntries"], "Resource": cluster_arn},
                {
                    "Sid": "DeregisterSelf",
                    "Effect": "Allow",
                    "Action": ["ssm:DeregisterManagedInstance", "ssm:DescribeInstanceInformation"],
                    "Resource": "*",
                    "Condition": {"ArnLike": {"ssm:SourceInstanceARN": f"arn:{partition}:ssm:{region}:{account}:managed-instance/*"}},
                },
            ],
        }
    )


@dataclass(frozen=True)
class HybridNodesArgs:
    """Inputs of :class:`HybridNodes`. ``activation_limit`` caps how many servers one SSM activation registers."""

    cluster_name: str
    cluster_resource: pulumi.Resource
    region: str
    activation_limit: int = 10
    tags: dict[str, str] = field(default_factory=dict)


class HybridNodes(pulumi.ComponentResource):
    """Hybrid node IAM role (SSM), its access entry, and an SSM activation for registering servers."""

    role_arn: pulumi.Output[str]
    activation_id: pulumi.Output[str]

    def __init__(self, name: str, args: HybridNodesArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(TYPE, name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        partition = aws.get_partition_output(opts=pulumi.InvokeOutputOptions(parent=self)).partition
        account = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(parent=self)).account_id
        role = aws.iam.Role(
            f"{name}-role",
            description=f"EKS hybrid nodes of {args.cluster_name}",
            assume_role_policy=json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [
                        {"Effect": "Allow", "Principal": {"Service": "ssm.amazonaws.com"}, "Action": ["sts:AssumeRole", "sts:TagSession"]}
                    ],
                }
            ),
            tags=args.tags,
            opts=child,
        )
        for policy in HYBRID_MANAGED_POLICIES:
            aws.iam.RolePolicyAttachment(
                f"{name}-{policy}",
                role=role.name,
                policy_arn=pulumi.Output.concat("arn:", partition, ":iam::aws:policy/", policy),
                opts=child,
            )
        aws.iam.RolePolicy(
            f"{name}-cluster",
            role=role.name,
            policy=pulumi.Output.all(partition, account).apply(
                lambda a: hybrid_node_policy(a[0], args.region, a[1], args.cluster_name)
            ),
            opts=child,
        )
        aws.eks.AccessEntry(
            f"{name}-access",
            cluster_name=args.cluster_name,
            principal_arn=role.arn,
            type="HYBRID_LINUX",
            tags=args.tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[args.cluster_resource]),
        )
        activation = aws.ssm.Activation(
            f"{name}-activation",
            description=f"Registers on-prem GPU servers as hybrid nodes of {args.cluster_name}",
            iam_role=role.name,
            registration_limit=args.activation_limit,
            tags=args.tags,
            opts=child,
        )
        self.role_arn = role.arn
        self.activation_id = activation.id
        self.register_outputs({"role_arn": self.role_arn, "activation_id": self.activation_id})
