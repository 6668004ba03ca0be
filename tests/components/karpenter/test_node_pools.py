"""NodePools and EC2NodeClasses: the contract, limits, disruption, and what the upstream CRDs accept."""

from __future__ import annotations

import pytest

from components import contract, versions
from tests.support import crd_schema

NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"
NODE_CLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"


def pools(plan):
    return {r.inputs["metadata"]["name"]: r.inputs for r in plan.of_type(NODE_POOL)}


def test_inference_pool(dev_plan):
    spec = pools(dev_plan)["gpu-inference"]["spec"]
    template = spec["template"]
    assert template["spec"]["taints"] == [contract.gpu_taint_k8s()]
    assert template["spec"]["nodeClassRef"] == {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "gpu"}
    labels = template["metadata"]["labels"]
    assert labels["nvidia.com/gpu.present"] == "true"
    assert labels["llm-platform.io/accelerator"] == "a10g"
    assert "llm-platform.io/capacity-type" not in labels, "mixed capacity: karpenter.sh/capacity-type says it"
    requirements = {r["key"]: r for r in template["spec"]["requirements"]}
    assert requirements["karpenter.k8s.aws/instance-gpu-count"] == {
        "key": "karpenter.k8s.aws/instance-gpu-count", "operator": "Gt", "values": ["0"]
    }
    assert requirements["karpenter.sh/capacity-type"]["values"] == ["spot", "on-demand"]
    assert spec["limits"] == {"nvidia.com/gpu": "8"}
    assert spec["disruption"] == {
        "consolidationPolicy": "WhenEmptyOrUnderutilized",
        "consolidateAfter": "5m",
        "budgets": [{"nodes": "10%", "schedule": "0 8 * * mon-fri", "duration": "10h"}, {"nodes": "50%"}],
    }
    assert (template["spec"]["expireAfter"], spec["weight"]) == ("720h", 50)


def test_training_pool_has_its_own_taint_and_refuses_disruption_in_working_hours(dev_plan):
    spec = pools(dev_plan)["gpu-training"]["spec"]
    assert {"key": "llm-platform.io/workload", "value": "training", "effect": "NoSchedule"} in spec["template"]["spec"]["taints"]
    assert spec["disruption"]["consolidationPolicy"] == "WhenEmpty"
    assert spec["disruption"]["budgets"][0]["nodes"] == "0"
    assert spec["template"]["metadata"]["labels"]["llm-platform.io/capacity-type"] == "on-demand"


@pytest.mark.usefixtures("upstream_crds")
def test_pools_with_a_zero_window_never_expire(stack_plan):
    """Karpenter v1 expiry ignores budgets: every emitted pool with a nodes: "0" budget sets expireAfter
    Never (rotating through drift, which budgets hold to the allowed hours) and the upstream CRD takes it."""
    emitted = pools(stack_plan)
    zero = {name for name, p in emitted.items() if any(b["nodes"] in ("0", "0%") for b in p["spec"]["disruption"]["budgets"])}
    assert zero == {"dev": {"gpu-training"}, "prod": {"gpu-interactive", "gpu-training"}}[stack_plan.stack]
    for name in zero:
        assert emitted[name]["spec"]["template"]["spec"]["expireAfter"] == "Never", name
        outcome = crd_schema.validate(emitted[name])
        assert outcome.ok, (name, outcome.schema_errors, outcome.rule_failures)
    assert {n: p["spec"]["template"]["spec"]["expireAfter"] for n, p in emitted.items() if n not in zero} == {
        "gpu-inference": "720h"}


def test_node_class(stack_plan):
    (node_class,) = stack_plan.of_type(NODE_CLASS)
    spec = node_class.inputs["spec"]
    assert spec["amiSelectorTerms"] == [{"alias": versions.KARPENTER_AMI_ALIAS}]
    assert spec["role"] == "karpenter-node-role"
    discovery = {"tags": {"karpenter.sh/discovery": f"llm-platform-{stack_plan.stack}"}}
    assert spec["subnetSelectorTerms"] == spec["securityGroupSelectorTerms"] == [discovery]
    assert spec["metadataOptions"]["httpTokens"] == "required"
    (volume,) = spec["blockDeviceMappings"]
    assert volume["ebs"]["encrypted"] is True and volume["ebs"]["volumeType"] == "gp3"
    # No maxPods: Karpenter derives it per instance type from ENI limits (what the VPC CNI can give).
    assert set(spec["kubelet"]) == {"evictionHard", "imageGCHighThresholdPercent", "imageGCLowThresholdPercent"}


@pytest.mark.usefixtures("upstream_crds")
def test_every_karpenter_object_passes_the_upstream_crd(stack_plan):
    objects = stack_plan.of_type(NODE_POOL) + stack_plan.of_type(NODE_CLASS)
    assert objects
    evaluated = 0
    for resource in objects:
        outcome = crd_schema.validate(resource.inputs)
        assert outcome.ok, (resource.urn, outcome.schema_errors, outcome.rule_failures)
        assert not outcome.rules_not_evaluated, outcome.rules_not_evaluated
        evaluated += outcome.rules_evaluated
    assert evaluated > 20


@pytest.mark.usefixtures("upstream_crds")
@pytest.mark.parametrize(
    "mutate, expected",
    [
        (lambda s: s["disruption"].update(consolidationPolicy="WhenUnderutilized"), "consolidationPolicy"),
        (lambda s: s["disruption"]["budgets"][0].pop("duration"), "'schedule' must be set with 'duration'"),
        (lambda s: s["disruption"]["budgets"].append({"nodes": "ten"}), "nodes"),
        (lambda s: s["template"]["spec"]["requirements"][1].update(values=["0", "1"]), "requirements"),
    ],
    ids=["v1beta1-policy", "schedule-without-duration", "bad-nodes", "gt-two-values"],
)
def test_crd_validation_catches_what_the_api_server_would(dev_plan, mutate, expected):
    import copy

    document = copy.deepcopy(pools(dev_plan)["gpu-inference"])
    mutate(document["spec"])
    outcome = crd_schema.validate(document)
    assert not outcome.ok
    assert any(expected in e for e in outcome.schema_errors + outcome.rule_failures), outcome


def test_sizes_are_restricted_in_the_nodepool_not_the_catalog(dev_plan):
    """The catalog lists every g5 and g6e size; dev's pools admit only the sizes their budget was made for,
    through Karpenter's instance-size requirement (the label every node it launches carries)."""
    requirements = {name: {r["key"]: r for r in spec["spec"]["template"]["spec"]["requirements"]}
                    for name, spec in pools(dev_plan).items()}
    assert requirements["gpu-inference"]["karpenter.k8s.aws/instance-size"] == {
        "key": "karpenter.k8s.aws/instance-size", "operator": "In", "values": ["xlarge", "2xlarge", "4xlarge", "12xlarge"]}
    assert requirements["gpu-training"]["karpenter.k8s.aws/instance-size"]["values"] == ["xlarge", "2xlarge", "12xlarge"]
