"""Cluster Autoscaler's IAM policy, after the upstream README (cloudprovider/aws, "IAM Policy").

Describe calls on ``*`` (they cannot be scoped); the two mutating calls only on this cluster's own
Auto Scaling groups, by exact ARN and by the ownership tag EKS puts on managed groups' ASGs;
``eks:DescribeNodegroup`` only on this cluster's node groups. ARNs are built from the partition,
region and account at run time.
"""

from __future__ import annotations

import json
from dataclasses import dataclass


@dataclass(frozen=True)
class AutoscalerScope:
    partition: str
    region: str
    account_id: str
    cluster_name: str
    autoscaling_group_names: tuple[str, ...]


def autoscaler_policy(scope: AutoscalerScope) -> str:
    p, r, acct, cluster = scope.partition, scope.region, scope.account_id, scope.cluster_name
    groups = [
        f"arn:{p}:autoscaling:{r}:{acct}:autoScalingGroup:*:autoScalingGroupName/{name}"
        for name in sorted(scope.autoscaling_group_names)
    ]
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "DescribeScalingState",
                    "Effect": "Allow",
                    "Action": [
                        "autoscaling:DescribeAutoScalingGroups",
                        "autoscaling:DescribeAutoScalingInstances",
                        "autoscaling:DescribeLaunchConfigurations",
                        "autoscaling:DescribeScalingActivities",
                        "ec2:DescribeImages",
                        "ec2:DescribeInstanceTypes",
                        "ec2:DescribeLaunchTemplateVersions",
                        "ec2:GetInstanceTypesFromInstanceRequirements",
                    ],
                    "Resource": "*",
                },
                {
                    "Sid": "ScaleOwnGroupsOnly",
                    "Effect": "Allow",
                    "Action": ["autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup"],
                    "Resource": groups,
                    "Condition": {
                        "StringEquals": {f"aws:ResourceTag/k8s.io/cluster-autoscaler/{cluster}": "owned"}
                    },
                },
                {
                    "Sid": "ReadOwnNodegroups",
                    "Effect": "Allow",
                    "Action": ["eks:DescribeNodegroup"],
                    "Resource": f"arn:{p}:eks:{r}:{acct}:nodegroup/{cluster}/*/*",
                },
            ],
        },
        indent=2,
    )
