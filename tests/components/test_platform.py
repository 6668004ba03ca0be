"""Platform wiring: component tokens, parenting, one AWS provider, exported outputs."""

from __future__ import annotations

import re

from automation.offline.wire import SECRET_SIG, SIG_KEY

COMPONENTS = {
    "llm-platform:index:Platform",
    "llm-platform:index:Network",
    "llm-platform:index:Cluster",
    "llm-platform:index:NetworkIsolation",
    "llm-platform:index:SystemNodePool",
    "llm-platform:index:GpuNodePool",
    "llm-platform:index:NodeRole",
    "llm-platform:index:GpuDevicePlugin",
    "llm-platform:index:DcgmExporter",
    "llm-platform:index:GpuOperator",
    "llm-platform:index:Karpenter",
    "llm-platform:index:InterruptionQueue",
    "llm-platform:index:KarpenterNodePools",
    "llm-platform:index:ServingTier",
    "llm-platform:index:ModelServer",
    "llm-platform:index:Observability",
    "llm-platform:index:EventAutoscaler",
    "llm-platform:index:ClusterAutoscaler",
    "llm-platform:index:Gateway",
    "llm-platform:index:ImagePrepull",
}


def test_components_use_project_namespace(dev_plan, prod_plan):
    own = {r.type for plan in (dev_plan, prod_plan) for r in plan.resources if not r.custom}
    assert own - {"eks:index:Cluster", "eks:index:ManagedNodeGroup"} == COMPONENTS


def test_everything_is_parented_under_the_platform(stack_plan):
    (platform,) = stack_plan.of_type("llm-platform:index:Platform")
    by_urn = {r.urn: r for r in stack_plan.resources}
    for resource in stack_plan.resources:
        if resource is platform:
            continue
        node = resource
        while node.parent in by_urn and node.parent != platform.urn:
            node = by_urn[node.parent]
        assert node.parent == platform.urn, resource.urn


def test_aws_resources_use_the_regional_provider(stack_plan):
    (provider,) = stack_plan.of_type("pulumi:providers:aws")
    assert provider.inputs["region"] == "us-east-1"
    for resource in stack_plan.resources:
        if resource.custom and resource.type.startswith("aws:"):
            assert resource.provider.startswith(provider.urn + "::"), resource.urn


def test_platform_outputs(dev_plan):
    (platform,) = dev_plan.of_type("llm-platform:index:Platform")
    outputs = dev_plan.outputs[platform.urn]
    assert outputs["cluster_name"] == "llm-platform-dev"
    assert outputs["kubeconfig"][SIG_KEY] == SECRET_SIG
    assert "oidc_provider_arn" not in outputs, "no IAM OIDC provider: nothing uses IRSA"
    assert set(outputs["node_role_arns"]) == {"system", "inference", "karpenter"}


def test_every_component_registers_outputs(stack_plan):
    components = [r for r in stack_plan.resources if r.type in COMPONENTS]
    missing = [r.urn for r in components if r.urn not in stack_plan.outputs]
    assert not missing


def test_main_exports(dev_plan):
    from pathlib import Path

    source = (Path(__file__).resolve().parents[2] / "__main__.py").read_text()
    exported = re.findall(r'pulumi\.export\("(\w+)"', source)
    assert exported == ["clusterName", "kubeconfig", "nodeRoleArns", "gatewayRoleArn", "hybridNodeConfigs",
                        "hybridActivationId"]
    assert len([line for line in source.splitlines() if line.strip()]) <= 14
