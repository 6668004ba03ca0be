"""IAM documents shared by components."""

from __future__ import annotations

import json


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
