"""karpenter-v1-valid: NodePool and EC2NodeClass fields the v1 API would reject."""

from __future__ import annotations

import pytest

from tests.policies.builders import DELETE, UNKNOWN, ec2nodeclass, nodepool, patch, resource
from tests.policies.conftest import one

POLICY = "karpenter-v1-valid"
D = "spec.disruption"
T = "spec.template.spec"


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {f"{D}.consolidationPolicy": "WhenEmptyOrUnderutilized"},
        {f"{D}.consolidationPolicy": "Balanced"},
        {f"{D}.consolidateAfter": "Never"},
        {f"{D}.consolidateAfter": "1h30m"},
        {f"{D}.budgets": [{"nodes": "5"}, {"nodes": "50%", "schedule": "@daily", "duration": "15h30m", "reasons": ["Drifted"]}]},
        {D: DELETE},
        {"spec.weight": 1},
        {"spec.weight": 100},
        {f"{T}.expireAfter": "Never"},
        {f"{T}.requirements.0": {"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "Gte", "values": ["1"]}},
    ],
    ids=["happy", "when-empty-or-underutilized", "balanced", "never", "compound-duration", "budgets", "no-disruption",
         "weight-1", "weight-100", "expire-never", "gte"],
)
def test_valid_nodepools(pack, changes):
    assert pack.messages(patch(nodepool(), changes), POLICY) == []


@pytest.mark.parametrize(
    "changes, fragment",
    [
        ({f"{D}.consolidationPolicy": "WhenUnderutilized"}, "'WhenUnderutilized' is the v1beta1 value; use 'WhenEmptyOrUnderutilized'"),
        ({f"{D}.consolidationPolicy": "Always"}, "consolidationPolicy 'Always' is not one of"),
        ({f"{D}.consolidateAfter": DELETE}, "spec.disruption has no consolidateAfter"),
        ({f"{D}.consolidateAfter": "5 minutes"}, "consolidateAfter '5 minutes' is not a duration"),
        ({f"{D}.expireAfter": "720h"}, "spec.disruption.expireAfter is a v1beta1 field"),
        ({f"{D}.budgets.1.duration": DELETE}, "budgets[1] sets schedule without duration"),
        ({f"{D}.budgets.1.schedule": DELETE}, "budgets[1] sets duration without schedule"),
        ({f"{D}.budgets.1.duration": "30s"}, "budgets[1].duration '30s' must be hours and/or minutes"),
        ({f"{D}.budgets.1.schedule": "daily"}, "budgets[1].schedule 'daily' is not a 5-field cron"),
        ({f"{D}.budgets.0.nodes": "10 %"}, "budgets[0].nodes '10 %' must be a node count"),
        ({f"{D}.budgets.0.nodes": "101%"}, "budgets[0].nodes '101%'"),
        ({f"{D}.budgets.0.nodes": 10}, "budgets[0].nodes is the number 10, but the CRD types it as a string"),
        ({f"{D}.budgets.0.nodes": DELETE}, "budgets[0].nodes is required"),
        ({f"{D}.budgets.0.reasons": ["Underutilized", "Expired"]}, "budgets[0].reasons has 'Expired'"),
        ({"spec.weight": 0}, "spec.weight 0 is not an integer from 1 to 100"),
        ({"spec.weight": 101}, "spec.weight 101"),
        ({f"{T}.nodeClassRef": {"name": "gpu"}}, "nodeClassRef lacks group, kind"),
        ({f"{T}.nodeClassRef.group": ""}, "nodeClassRef lacks group"),
        ({f"{T}.nodeClassRef": DELETE}, "nodeClassRef lacks group, kind, name"),
        ({f"{T}.requirements": DELETE}, "spec.template.spec.requirements is required in v1"),
        ({f"{T}.requirements.0.operator": "Like"}, "requirements[0].operator 'Like' is not one of"),
        ({f"{T}.requirements.0.values": []}, "requirements[0] uses In without values"),
        ({f"{T}.requirements.0": {"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "Gt", "values": ["a"]}},
         "requirements[0] uses Gt, which needs exactly one non-negative integer"),
        ({f"{T}.kubelet": {"maxPods": 110}}, "spec.template.spec.kubelet is a v1beta1 field"),
        ({f"{T}.expireAfter": "30d"}, "expireAfter '30d' is not a duration"),
        ({"spec.replicas": 2}, "static NodePools (spec.replicas set) support only limits.nodes"),
    ],
)
def test_invalid_nodepools(pack, changes, fragment):
    one(pack.messages(patch(nodepool(), changes), POLICY), "is not a valid Karpenter v1 object", fragment)


def test_all_problems_in_one_finding(pack):
    res = patch(nodepool(), {f"{D}.consolidationPolicy": "WhenUnderutilized", "spec.weight": 0})
    one(pack.messages(res, POLICY), "WhenUnderutilized", "spec.weight 0")


@pytest.mark.parametrize(
    "type_",
    ["kubernetes:karpenter.sh/v1beta1:NodePool", "kubernetes:karpenter.sh/v1alpha5:Provisioner",
     "kubernetes:karpenter.k8s.aws/v1beta1:EC2NodeClass"],
)
def test_pre_v1_apis(pack, type_):
    one(pack.messages(resource(type_, "old", nodepool()["inputs"]), POLICY), "which Karpenter 1.x no longer serves")


@pytest.mark.parametrize(
    "changes, fragment",
    [
        ({"spec.instanceProfile": "karpenter-node"}, "exactly one of role and instanceProfile"),
        ({"spec.role": DELETE}, "exactly one of role and instanceProfile"),
        ({"spec.amiSelectorTerms": [{"alias": "al2023@v20251117"}, {"id": "ami-123"}]}, "alias term must stand alone"),
        ({"spec.amiSelectorTerms": [{"alias": "al2023@v20251117", "owner": "amazon"}]}, "alias term must stand alone"),
        ({"spec.amiSelectorTerms": DELETE}, "spec.amiSelectorTerms is required"),
        ({"spec.subnetSelectorTerms": DELETE}, "spec.subnetSelectorTerms is required"),
    ],
)
def test_invalid_nodeclasses(pack, changes, fragment):
    one(pack.messages(patch(ec2nodeclass(), changes), POLICY), fragment)


@pytest.mark.parametrize(
    "res",
    [
        patch(nodepool(), {"spec": UNKNOWN}),
        patch(nodepool(), {D: UNKNOWN}),
        patch(nodepool(), {f"{D}.consolidationPolicy": UNKNOWN, f"{D}.consolidateAfter": UNKNOWN, f"{D}.budgets": UNKNOWN}),
        patch(nodepool(), {f"{D}.budgets.1.schedule": UNKNOWN}),
        patch(nodepool(), {T: UNKNOWN, "spec.weight": UNKNOWN}),
        patch(nodepool(), {f"{T}.requirements": UNKNOWN, f"{T}.nodeClassRef": UNKNOWN}),
        patch(ec2nodeclass(), {"spec.role": UNKNOWN, "spec.amiSelectorTerms": UNKNOWN}),
    ],
    ids=["spec", "disruption", "disruption-fields", "schedule", "template", "requirements", "nodeclass"],
)
def test_unknown_values_are_not_judged(pack, res):
    assert pack.messages(res, POLICY) == []
