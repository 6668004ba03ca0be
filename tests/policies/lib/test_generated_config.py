"""``policies/config/<stack>.json`` is generated (``python -m automation pack-config write``): the
committed files are what the generator writes now, and the program's facts reach every policy whose
schema takes them."""

from __future__ import annotations

import pytest

from automation.offline.pack.config import (
    STACK_CHOICES,
    UnknownPackStack,
    config_path,
    generate,
    render,
    stacks,
)


@pytest.fixture
def schemas(pack):
    return {name: policy.config_schema for name, policy in pack.runner.info().policies.items()}


def test_every_stack_with_choices_has_a_config():
    assert stacks() == ("dev", "prod")


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_committed_config_is_what_the_generator_writes(schemas, stack):
    path = config_path(stack)
    assert path.read_text() == render(generate(stack, schemas)), (
        f"{path} is not what the generator writes (hand-edited, or the program's contract or STACK_CHOICES changed "
        f"since); run `python -m automation pack-config write --stack {stack}`")


def test_program_facts_reach_the_policies_that_take_them(schemas):
    prod = generate("prod", schemas)
    assert prod["gpu-pools-tainted"] == {"gpuResource": "nvidia.com/gpu", "gpuTaintKey": "nvidia.com/gpu"}
    assert prod["gpu-pool-labels"] == {
        "acceleratorLabel": "llm-platform.io/accelerator", "capacityTypeLabel": "llm-platform.io/capacity-type",
        "gpuMemoryLabel": "llm-platform.io/gpu-memory-mib", "purposeLabel": "node.kubernetes.io/purpose"}
    assert prod["gpu-agents-reach-gpu-nodes"]["agentPlacement"] == {
        "nvidia-device-plugin": {"exceptPurposes": ["gpu-dra"]}, "dra-driver-nvidia-gpu": {"onlyPurposes": ["gpu-dra"]}}
    assert prod["capacity-simulation"] == {"selfMetricPrefixes": ["vllm:", "vllm_"]}
    # choices and facts side by side, the level first
    assert prod["system-pool-on-demand-ha"] == {
        "capacityTypeLabel": "llm-platform.io/capacity-type", "minSize": 3, "purposeLabel": "node.kubernetes.io/purpose",
        "systemPurpose": "system"}
    assert list(prod["gpu-namespace-quota"]) == ["enforcementLevel", "gpuResource"]


def test_the_hand_chosen_part_is_per_stack(schemas):
    dev, prod = generate("dev", schemas), generate("prod", schemas)
    assert dev["eks-private-endpoint"] == {"enforcementLevel": "advisory", "allowPublicAccess": True}
    assert prod["eks-private-endpoint"] == {"enforcementLevel": "mandatory", "allowPublicAccess": False}
    assert dev["container-image-pinned"] == {"requireDigest": False}
    exempt = prod["container-image-pinned"]["digestExemptImages"]
    assert exempt[:3] == [
        "vllm/vllm-openai:v0.33.0", "ghcr.io/berriai/litellm:v1.110.2", "nvcr.io/nvidia/k8s/dcgm-exporter:4.5.3-4.8.2"]
    assert "public.ecr.aws/karpenter/controller:1.14.1" in exempt and len(exempt) == 28
    # The multi-node pins (tag-only until images resolve runs where their registries answer); AWS's Cilium
    # build is not exempt: prod's plan runs no hybrid nodes.
    assert exempt[-2:] == ["registry.k8s.io/lws/lws:v0.10.0",
                           "602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/aws-efa-k8s-device-plugin:v0.5.20"]
    assert not any("cilium" in image for image in exempt)
    assert {"ghcr.io/kedacore/keda:2.20.2", "ghcr.io/kedacore/keda-metrics-apiserver:2.20.2",
            "ghcr.io/kedacore/keda-admission-webhooks:2.20.2", "quay.io/thanos/thanos:v0.42.4"} <= set(exempt)
    # pins with a cited digest are never exempt
    assert not {"quay.io/prometheus/prometheus:v3.14.0-distroless", "docker.io/grafana/grafana:13.2.0",
                "registry.k8s.io/pause:3.10.1"} & set(exempt)


def test_a_new_policy_taking_a_fact_gets_it_without_a_hand_edit(schemas):
    grown = {**schemas, "zz-new-policy": {"purposeLabel": {"type": "string"}, "threshold": {"type": "integer"}}}
    assert generate("dev", grown)["zz-new-policy"] == {"purposeLabel": "node.kubernetes.io/purpose"}
    assert "zz-new-policy" not in generate("dev", schemas)


def test_choices_for_a_policy_the_pack_lacks_are_refused(schemas):
    renamed = {name: schema for name, schema in schemas.items() if name != "eks-private-endpoint"}
    with pytest.raises(UnknownPackStack, match="names eks-private-endpoint, which the pack does not have"):
        generate("prod", renamed)
    with pytest.raises(UnknownPackStack, match="no pack choices for stack 'staging'"):
        generate("staging", schemas)
    assert set(STACK_CHOICES) == {"dev", "prod"}
