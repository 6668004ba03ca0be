"""NodeRole: the IAM role EC2 worker nodes run as."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

TYPE = "llm-platform:index:NodeRole"

#: AWS-managed policies every EKS worker node needs; ARNs are built from the partition at run time.
NODE_MANAGED_POLICIES = (
    "AmazonEKSWorkerNodePolicy",
    "AmazonEKS_CNI_Policy",
    "AmazonEC2ContainerRegistryPullOnly",
    "AmazonSSMManagedInstanceCore",
)

_EC2_TRUST = json.dumps(
    {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}
        ],
    }
)


@dataclass(frozen=True)
class NodeRoleArgs:
    """Inputs of :class:`NodeRole`. ``description`` says which pool the role serves."""

    description: str
    tags: dict[str, str] = field(default_factory=dict)


class NodeRole(pulumi.ComponentResource):
    """An EC2-assumable role with the four managed worker-node policies, partition-aware."""

    arn: pulumi.Output[str]
    name: pulumi.Output[str]

    def __init__(self, name: str, args: NodeRoleArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(TYPE, name, None, opts)
        partition = aws.get_partition_output(opts=pulumi.InvokeOutputOptions(parent=self)).partition
        role = aws.iam.Role(
            f"{name}-role",
            description=args.description,
            assume_role_policy=_EC2_TRUST,
            tags=args.tags,
            opts=pulumi.ResourceOptions(parent=self),
        )
        for policy in NODE_MANAGED_POLICIES:
            aws.iam.RolePolicyAttachment(
                f"{name}-{policy}",
                role=role.name,
                policy_arn=pulumi.Output.concat("arn:", partition, ":iam::aws:policy/", policy),
                opts=pulumi.ResourceOptions(parent=self),
            )
        self.arn = role.arn
        self.name = role.name
        self.register_outputs({"arn": self.arn, "name": self.name})
