"""karpenter-v1-valid on EC2NodeClass AMI selection, as a specification: an alias term stands alone,
and selector terms without an alias may be many (Karpenter's EC2NodeClass CRD CEL rules)."""

from __future__ import annotations

import pytest

from tests.policies.builders import ec2nodeclass, patch

POLICY = "karpenter-v1-valid"
DESCRIPTION = ("Fix Karpenter NodePools and EC2NodeClasses to the v1 schema (consolidation policy, budgets, "
               "durations, weight, nodeClassRef).\n")


@pytest.mark.parametrize(
    "terms",
    [
        [{"alias": "al2023@v20251117"}],
        [{"id": "ami-0123456789abcdef0"}, {"id": "ami-0fedcba9876543210"}],
        [{"tags": {"team": "ml"}}, {"name": "my-ami-*", "owner": "self"}],
    ],
    ids=["alias-alone", "two-ids", "tags-and-name"],
)
def test_valid_ami_selector_terms(pack, terms):
    assert pack.messages(patch(ec2nodeclass(), {"spec.amiSelectorTerms": terms}), POLICY) == []


@pytest.mark.parametrize(
    "terms",
    [
        [{"alias": "al2023@v20251117"}, {"id": "ami-0123456789abcdef0"}],
        [{"id": "ami-0123456789abcdef0"}, {"alias": "al2023@v20251117"}],
        [{"alias": "al2023@v20251117", "owner": "amazon"}],
    ],
    ids=["alias-first-of-two", "alias-second-of-two", "alias-with-owner"],
)
def test_an_alias_term_must_stand_alone(pack, terms):
    assert pack.messages(patch(ec2nodeclass(), {"spec.amiSelectorTerms": terms}), POLICY) == [
        DESCRIPTION + "EC2NodeClass 'gpu' is not a valid Karpenter v1 object: an amiSelectorTerms alias term must "
        "stand alone (one term, no other fields)."]
