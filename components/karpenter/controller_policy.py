"""The Karpenter controller's IAM policy, after Karpenter v1.14's reference CloudFormation.

Every statement is scoped the way the reference scopes it: EC2 writes only on resources tagged for
this cluster and a NodePool, instance-profile actions only on profiles Karpenter tagged for this
cluster and region, PassRole only for the node role, queue actions only on the interruption queue.
ARNs are built from the partition, region and account at run time, never as ``arn:aws:`` literals.
"""

from __future__ import annotations

import json
from dataclasses import dataclass


@dataclass(frozen=True)
class PolicyScope:
    partition: str
    region: str
    account_id: str
    cluster_name: str
    node_role_arn: str
    queue_arn: str


def controller_policy(scope: PolicyScope) -> str:
    p, r, acct, cluster = scope.partition, scope.region, scope.account_id, scope.cluster_name
    ec2 = f"arn:{p}:ec2:{r}"
    owned = f"kubernetes.io/cluster/{cluster}"
    created = ["fleet/*", "instance/*", "volume/*", "network-interface/*", "launch-template/*", "spot-instances-request/*"]
    created_arns = [f"{ec2}:*:{kind}" for kind in created]
    profile_arn = f"arn:{p}:iam::{acct}:instance-profile/*"
    cluster_arn = f"arn:{p}:eks:{r}:{acct}:cluster/{cluster}"
    request_tags = {
        f"aws:RequestTag/{owned}": "owned",
        "aws:RequestTag/eks:eks-cluster-name": cluster,
    }
    statements = [
        {
            "Sid": "AllowScopedEC2InstanceAccessActions",
            "Effect": "Allow",
            "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
            "Resource": [
                f"{ec2}::image/*",
                f"{ec2}::snapshot/*",
                f"{ec2}:*:security-group/*",
                f"{ec2}:*:subnet/*",
                f"{ec2}:*:capacity-reservation/*",
                f"{ec2}:*:placement-group/*",
            ],
        },
        {
            "Sid": "AllowScopedEC2LaunchTemplateAccessActions",
            "Effect": "Allow",
            "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
            "Resource": f"{ec2}:*:launch-template/*",
            "Condition": {
                "StringEquals": {f"aws:ResourceTag/{owned}": "owned"},
                "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"},
            },
        },
        {
            "Sid": "AllowScopedEC2InstanceActionsWithTags",
            "Effect": "Allow",
            "Action": ["ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate"],
            "Resource": created_arns,
            "Condition": {
                "StringEquals": request_tags,
                "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"},
            },
        },
        {
            "Sid": "AllowScopedResourceCreationTagging",
            "Effect": "Allow",
            "Action": "ec2:CreateTags",
            "Resource": created_arns,
            "Condition": {
                "StringEquals": {**request_tags, "ec2:CreateAction": ["RunInstances", "CreateFleet", "CreateLaunchTemplate"]},
                "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"},
            },
        },
        {
            "Sid": "AllowScopedResourceTagging",
            "Effect": "Allow",
            "Action": "ec2:CreateTags",
            "Resource": f"{ec2}:*:instance/*",
            "Condition": {
                "StringEquals": {f"aws:ResourceTag/{owned}": "owned"},
                "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"},
                "StringEqualsIfExists": {"aws:RequestTag/eks:eks-cluster-name": cluster},
                "ForAllValues:StringEquals": {"aws:TagKeys": ["eks:eks-cluster-name", "karpenter.sh/nodeclaim", "Name"]},
            },
        },
        {
            "Sid": "AllowScopedDeletion",
            "Effect": "Allow",
            "Action": ["ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"],
            "Resource": [f"{ec2}:*:instance/*", f"{ec2}:*:launch-template/*"],
            "Condition": {
                "StringEquals": {f"aws:ResourceTag/{owned}": "owned"},
                "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"},
            },
        },
        {
            "Sid": "AllowRegionalReadActions",
            "Effect": "Allow",
            "Action": [
                "ec2:DescribeCapacityReservations",
                "ec2:DescribeImages",
                "ec2:DescribeInstances",
                "ec2:DescribeInstanceStatus",
                "ec2:DescribeInstanceTypeOfferings",
                "ec2:DescribeInstanceTypes",
                "ec2:DescribeLaunchTemplates",
                "ec2:DescribePlacementGroups",
                "ec2:DescribeSecurityGroups",
                "ec2:DescribeSpotPriceHistory",
                "ec2:DescribeSubnets",
            ],
            "Resource": "*",
            "Condition": {"StringEquals": {"aws:RequestedRegion": r}},
        },
        {
            "Sid": "AllowSSMReadActions",
            "Effect": "Allow",
            "Action": "ssm:GetParameter",
            "Resource": f"arn:{p}:ssm:{r}::parameter/aws/service/*",
        },
        {"Sid": "AllowPricingReadActions", "Effect": "Allow", "Action": "pricing:GetProducts", "Resource": "*"},
        {
            "Sid": "AllowInterruptionQueueActions",
            "Effect": "Allow",
            "Action": ["sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"],
            "Resource": scope.queue_arn,
        },
        {
            "Sid": "AllowPassingInstanceRole",
            "Effect": "Allow",
            "Action": "iam:PassRole",
            "Resource": scope.node_role_arn,
            "Condition": {"StringEquals": {"iam:PassedToService": ["ec2.amazonaws.com", "ec2.amazonaws.com.cn"]}},
        },
        {
            "Sid": "AllowScopedInstanceProfileCreationActions",
            "Effect": "Allow",
            "Action": "iam:CreateInstanceProfile",
            "Resource": profile_arn,
            "Condition": {
                "StringEquals": {**request_tags, "aws:RequestTag/topology.kubernetes.io/region": r},
                "StringLike": {"aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*"},
            },
        },
        {
            "Sid": "AllowScopedInstanceProfileTagActions",
            "Effect": "Allow",
            "Action": "iam:TagInstanceProfile",
            "Resource": profile_arn,
            "Condition": {
                "StringEquals": {
                    f"aws:ResourceTag/{owned}": "owned",
                    "aws:ResourceTag/topology.kubernetes.io/region": r,
                    **request_tags,
                    "aws:RequestTag/topology.kubernetes.io/region": r,
                },
                "StringLike": {
                    "aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*",
                    "aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*",
                },
            },
        },
        {
            "Sid": "AllowScopedInstanceProfileActions",
            "Effect": "Allow",
            "Action": ["iam:AddRoleToInstanceProfile", "iam:RemoveRoleFromInstanceProfile", "iam:DeleteInstanceProfile"],
            "Resource": profile_arn,
            "Condition": {
                "StringEquals": {f"aws:ResourceTag/{owned}": "owned", "aws:ResourceTag/topology.kubernetes.io/region": r},
                "StringLike": {"aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*"},
            },
        },
        {"Sid": "AllowInstanceProfileReadActions", "Effect": "Allow", "Action": "iam:GetInstanceProfile", "Resource": profile_arn},
        {"Sid": "AllowUnscopedInstanceProfileListAction", "Effect": "Allow", "Action": "iam:ListInstanceProfiles", "Resource": "*"},
        {
            "Sid": "AllowAPIServerEndpointDiscovery",
            "Effect": "Allow",
            "Action": "eks:DescribeCluster",
            "Resource": cluster_arn,
        },
        {
            "Sid": "AllowZonalShiftStatusReadOnly",
            "Effect": "Allow",
            "Action": "arc-zonal-shift:GetManagedResource",
            "Resource": "*",
            "Condition": {"StringEquals": {"arc-zonal-shift:ResourceIdentifier": cluster_arn}},
        },
    ]
    return json.dumps({"Version": "2012-10-17", "Statement": statements})
