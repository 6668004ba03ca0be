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
    the cluster, or the service account it names). The association also waits for the inline policy,
    so a workload ordered after the association (as every caller must order the pods that use it)
    starts with both its credentials and its permissions.

    Why callers must order their pods after the association: EKS Pod Identity's admission webhook
    injects ``AWS_CONTAINER_CREDENTIALS_FULL_URI`` and the token volume when a pod is created, and
    only if an association for its service account exists then (associations are eventually
    consistent); a pod admitted earlier runs without credentials until it is recreated, and a second
    ``pulumi up`` changes nothing (docs.aws.amazon.com/eks/latest/userguide/pod-id-how-it-works.html).
    """
    child = pulumi.ResourceOptions(parent=parent)
    role = aws.iam.Role(name, description=description, assume_role_policy=pod_identity_trust(), tags=tags, opts=child)
    inline = aws.iam.RolePolicy(name, role=role.name, policy=policy, opts=child)
    association = aws.eks.PodIdentityAssociation(
        name,
        cluster_name=cluster_name,
        namespace=namespace,
        service_account=service_account,
        role_arn=role.arn,
        tags=tags,
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[*association_depends_on, inline]),
    )
    return role, association
