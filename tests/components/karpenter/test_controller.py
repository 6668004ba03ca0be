"""Karpenter: controller IAM via Pod Identity, node role, interruption queue, charts, discovery tags."""

from __future__ import annotations

import json

import pytest

from components import versions
from components.cluster.node_role import NODE_MANAGED_POLICIES
from components.karpenter.interruption_queue import INTERRUPTION_EVENTS


def statements(plan):
    policy = plan.named("aws:iam/rolePolicy:RolePolicy", "karpenter-controller")
    document = json.loads(policy.inputs["policy"])
    return {s["Sid"]: s for s in document["Statement"]}, policy.inputs["policy"]


def releases(plan):
    return {r.inputs["name"]: r.inputs for r in plan.of_type("kubernetes:helm.sh/v3:Release")}


def test_controller_role_trusts_pod_identity(dev_plan):
    role = dev_plan.named("aws:iam/role:Role", "karpenter-controller")
    (statement,) = json.loads(role.inputs["assumeRolePolicy"])["Statement"]
    assert statement["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert statement["Action"] == ["sts:AssumeRole", "sts:TagSession"]
    association = dev_plan.named("aws:eks/podIdentityAssociation:PodIdentityAssociation", "karpenter-controller")
    assert association.inputs["namespace"] == "kube-system"
    assert association.inputs["serviceAccount"] == "karpenter"
    assert association.inputs["roleArn"] == "arn:aws:iam::123456789012:role/karpenter-controller"


def test_controller_policy_is_scoped_like_the_reference(dev_plan):
    by_sid, text = statements(dev_plan)
    assert len(by_sid) == 18
    cluster_tag = "aws:ResourceTag/kubernetes.io/cluster/llm-platform-dev"
    assert by_sid["AllowScopedDeletion"]["Condition"]["StringEquals"] == {cluster_tag: "owned"}
    assert by_sid["AllowScopedEC2InstanceActionsWithTags"]["Condition"]["StringEquals"][
        "aws:RequestTag/eks:eks-cluster-name"
    ] == "llm-platform-dev"
    assert by_sid["AllowPassingInstanceRole"]["Resource"] == "arn:aws:iam::123456789012:role/karpenter-node-role"
    assert by_sid["AllowInterruptionQueueActions"]["Resource"].startswith("arn:aws:sqs:us-east-1:")
    assert by_sid["AllowRegionalReadActions"]["Condition"] == {"StringEquals": {"aws:RequestedRegion": "us-east-1"}}
    assert by_sid["AllowAPIServerEndpointDiscovery"]["Resource"] == (
        "arn:aws:eks:us-east-1:123456789012:cluster/llm-platform-dev"
    )
    unscoped = {sid for sid, s in by_sid.items() if s["Resource"] == "*" and "Condition" not in s}
    assert unscoped == {"AllowPricingReadActions", "AllowUnscopedInstanceProfileListAction"}
    assert len("".join(text.split())) < 10240, "inline role policies are limited to 10,240 characters"


def test_node_role_and_access_entry(dev_plan):
    attached = {
        a.inputs["policyArn"].rsplit("/", 1)[1]
        for a in dev_plan.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
        if a.name.startswith("karpenter-node-")
    }
    assert attached == set(NODE_MANAGED_POLICIES)
    (entry,) = dev_plan.of_type("aws:eks/accessEntry:AccessEntry")
    assert entry.inputs["type"] == "EC2_LINUX"
    assert entry.inputs["principalArn"] == "arn:aws:iam::123456789012:role/karpenter-node-role"


def test_interruption_queue(dev_plan):
    (queue,) = dev_plan.of_type("aws:sqs/queue:Queue")
    assert queue.inputs["messageRetentionSeconds"] == 300
    assert queue.inputs["sqsManagedSseEnabled"] is True
    assert queue.inputs["name"] == "llm-platform-dev"
    (policy,) = dev_plan.of_type("aws:sqs/queuePolicy:QueuePolicy")
    deny = json.loads(policy.inputs["policy"])["Statement"][1]
    assert deny["Effect"] == "Deny" and deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


def test_five_interruption_rules_target_the_queue(dev_plan):
    rules = dev_plan.of_type("aws:cloudwatch/eventRule:EventRule")
    patterns = sorted(json.loads(r.inputs["eventPattern"])["detail-type"][0] for r in rules)
    assert patterns == sorted(p["detail-type"][0] for p in INTERRUPTION_EVENTS.values())
    assert "EC2 Capacity Reservation Instance Interruption Warning" in patterns
    targets = dev_plan.of_type("aws:cloudwatch/eventTarget:EventTarget")
    assert len(targets) == 5
    assert len({t.inputs["arn"] for t in targets}) == 1
    assert next(iter({t.inputs["arn"] for t in targets})).startswith("arn:aws:sqs:us-east-1:123456789012:")
    assert {t.inputs["targetId"] for t in targets} == {"KarpenterInterruptionQueueTarget"}


def test_charts_are_pinned_oci_and_crds_come_first(dev_plan):
    charts = releases(dev_plan)
    assert charts["karpenter-crd"]["chart"] == "oci://public.ecr.aws/karpenter/karpenter-crd"
    assert charts["karpenter"]["chart"] == "oci://public.ecr.aws/karpenter/karpenter"
    assert charts["karpenter"]["version"] == charts["karpenter-crd"]["version"] == versions.KARPENTER.version == "1.14.1"
    assert charts["karpenter"]["skipCrds"] is True
    assert "repositoryOpts" not in charts["karpenter"]


def test_controller_values(dev_plan):
    values = releases(dev_plan)["karpenter"]["values"]
    assert values["settings"] == {"clusterName": "llm-platform-dev", "interruptionQueue": "llm-platform-dev"}
    assert values["serviceAccount"]["name"] == "karpenter"
    assert values["replicas"] == 2
    assert values["nodeSelector"]["node.kubernetes.io/purpose"] == "system"
    assert all(t.get("key") != "nvidia.com/gpu" for t in values["tolerations"])


def test_node_security_group_is_tagged_for_discovery(dev_plan):
    (tag,) = dev_plan.of_type("aws:ec2/tag:Tag")
    assert (tag.inputs["key"], tag.inputs["value"]) == ("karpenter.sh/discovery", "llm-platform-dev")
    assert tag.inputs["resourceId"].startswith("sg-")


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_karpenter_can_be_switched_off(stack):
    from tests.conftest import plan_with, read_stack_config

    config = read_stack_config(stack)
    karpenter = config["llm-platform:karpenter"]
    serving = config["llm-platform:serving"]
    plan = plan_with(stack, karpenter={**karpenter, "enabled": False}, serving={**serving, "enabled": False, "tiers": []})
    assert not plan.of_type("llm-platform:index:Karpenter")
    assert not plan.of_type("kubernetes:karpenter.sh/v1:NodePool")
    assert not plan.of_type("aws:sqs/queue:Queue")


def test_controller_gets_the_region_explicitly(stack_plan):
    # Hop limit 1 keeps pods off IMDS; without AWS_REGION Karpenter 1.14 panics at start (#8219).
    values = releases(stack_plan)["karpenter"]["values"]
    assert {"name": "AWS_REGION", "value": "us-east-1"} in values["controller"]["env"]


def test_controller_starts_after_the_pod_identity_agent(stack_plan):
    (controller,) = [r for r in stack_plan.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "karpenter"]
    assert any(d.endswith("aws:eks/addon:Addon::llm-platform-cluster-pod-identity-agent") for d in controller.dependencies)
    assert any(d.endswith("PodIdentityAssociation::karpenter-controller") for d in controller.dependencies)
