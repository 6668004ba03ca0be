"""The vLLM image pre-pull DaemonSet: shape, placement on exactly the GPU pools that host models,
Pod Security ``restricted``, and its namespace's default deny."""

from __future__ import annotations

from components import versions
from components.specs import serving
from policies.capacity.cold_start import image_prepulled
from policies.capacity.engine import cluster_from_resources
from tests.support import pod_security

DAEMONSET = "kubernetes:apps/v1:DaemonSet"
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def prepull(plan) -> dict:
    (found,) = [r.inputs for r in plan.of_type(DAEMONSET) if r.inputs["metadata"]["namespace"] == "image-prepull"]
    return found


def pools_of(daemonset: dict) -> list[str]:
    terms = daemonset["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    (term,) = terms
    (expression,) = term["matchExpressions"]
    assert (expression["key"], expression["operator"]) == ("llm-platform.io/pool", "In")
    return expression["values"]


def test_prod_prepulls_on_the_three_pools_that_host_models(prod_plan):
    daemonset = prepull(prod_plan)
    assert pools_of(daemonset) == ["gpu-interactive", "inference-a10g", "inference-l40s"]
    pod = daemonset["spec"]["template"]["spec"]
    assert pod["tolerations"] == [GPU_TOLERATION]
    (pull,) = pod["initContainers"]
    assert (pull["image"], pull["command"]) == ("vllm/vllm-openai:v0.33.0", ["/bin/sh", "-c", "true"])
    (hold,) = pod["containers"]
    assert hold["image"] == str(versions.PAUSE_IMAGE) == (
        "registry.k8s.io/pause:3.10.1@sha256:278fb9dbcca9518083ad1e11276933a2e96f23de604a3a08cc3c80002767d24c")
    for container in (pull, hold):
        assert container["resources"] == {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "32Mi"}}
        assert "nvidia.com/gpu" not in container["resources"]["requests"]
    assert pod["automountServiceAccountToken"] is False
    assert daemonset["metadata"]["annotations"] == {"pulumi.com/skipAwait": "true"}


def test_dev_prepulls_on_its_two_model_pools_not_on_training(dev_plan):
    assert pools_of(prepull(dev_plan)) == ["gpu-inference", "inference"]


def test_the_prepull_pod_is_restricted(stack_plan):
    template = prepull(stack_plan)["spec"]["template"]
    assert pod_security.violations(template) == {}


def test_its_namespace_enforces_restricted_and_denies_all_traffic(stack_plan):
    (namespace,) = [r.inputs for r in stack_plan.of_type("kubernetes:core/v1:Namespace")
                    if r.inputs["metadata"]["name"] == "image-prepull"]
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    policies = [r.inputs for r in stack_plan.of_type("kubernetes:networking.k8s.io/v1:NetworkPolicy")
                if r.inputs["metadata"]["namespace"] == "image-prepull"]
    assert [p["spec"] for p in policies] == [{"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}]


def test_training_purpose_pools_get_their_workload_toleration_too():
    spec = serving.image_prepull_daemonset("vllm/vllm-openai:v0.33.0", {"a": "gpu-inference", "b": "gpu-training"})
    assert spec["spec"]["template"]["spec"]["tolerations"] == [
        GPU_TOLERATION, {"key": "llm-platform.io/workload", "operator": "Equal", "value": "training", "effect": "NoSchedule"}]


def test_the_daemonset_lands_exactly_on_the_pools_that_host_models(stack_plan):
    """Behaviour, by the capacity engine's own DaemonSet rule (taints tolerated, node selection admits the
    pool's labels; policies/capacity/model.py DaemonSet.lands_on) on the emitted objects, and the cold-start
    reader the pack and the report use: every pool a model lands on holds the image when warm; the training
    and system pools get no pre-pull pod."""
    cluster = cluster_from_resources(stack_plan.resources)
    (daemonset,) = [d for d in cluster.daemonsets if d.name == "vllm-image"]
    landed = sorted(p.name for p in cluster.pools if daemonset.lands_on(p.labels, p.flexible, p.taints))
    hosting = sorted({r.inputs["spec"]["template"]["spec"]["nodeSelector"]["llm-platform.io/pool"]
                      for r in stack_plan.of_type("kubernetes:apps/v1:Deployment")
                      if r.inputs["metadata"]["namespace"].startswith("serving-")})
    assert landed == hosting
    assert {"gpu-training", "system"}.isdisjoint(landed)
    for pool in cluster.pools:
        assert image_prepulled(stack_plan.resources, str(versions.VLLM_IMAGE), pool) is (pool.name in hosting), pool.name
