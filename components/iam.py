"""IAM shared by components: the Pod Identity trust, and the role + inline policy + association
every controller or workload that calls AWS gets (one least-privilege role per service account)."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pulumi
import pulumi_aws as aws


def pod_identity_trust() -> str:
    """Trust for EKS Pod Identity: the agent assumes the role and tags the session."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Service": "pods.eks.amazonaws.com"},
                    "Action": ["sts:AssumeRole", "sts:TagSession"],
                }
            ],
        }
    )


def pod_identity_role(
    name: str,
    *,
    description: pulumi.Input[str],
    policy: pulumi.Input[str],
    cluster_name: pulumi.Input[str],
    namespace: pulumi.Input[str],
    service_account: pulumi.Input[str],
    tags: dict[str, str],
    parent: pulumi.Resource,
    association_depends_on: Sequence[pulumi.Resource] = (),
) -> tuple[aws.iam.Role, aws.eks.PodIdentityAssociation]:
    """A role only ``namespace/service_account`` of the cluster can assume, with ``policy`` inline.

    All three resources are named ``name``; ``association_depends_on`` orders the association (after
    the cluster, or the service account it names).
    """
    child = pulumi.ResourceOptions(parent=parent)
    role = aws.iam.Role(name, description=description, assume_role_policy=pod_identity_trust(), tags=tags, opts=child)
    aws.iam.RolePolicy(name, role=role.name, policy=policy, opts=child)
    association = aws.eks.PodIdentityAssociation(
        name,
        cluster_name=cluster_name,
        namespace=namespace,
        service_account=service_account,
        role_arn=role.arn,
        tags=tags,
        opts=pulumi.ResourceOptions(parent=parent, depends_on=list(association_depends_on)),
    )
    return role, association
