"""The spec functions as plain functions: settings in, the engine's camelCase dicts out, no Pulumi.

Expected values are the scheduling contract's and vLLM's own (see PLATFORM.md), written out here.
"""

from __future__ import annotations

import pytest

from automation.stacks import read_stack_config
from components.capacity_check import check_stack
from components.settings.karpenter import KarpenterNodePool
from components.settings.serving import ServedModel
from components.specs import gateway, node_pools, serving


@pytest.fixture()
def llama() -> ServedModel:
    return ServedModel.model_validate({
        "name": "llama-8b", "source": {"s3": "s3://my-models/llama-3.1-8b-instruct/"}, "pool": "gpu-inference",
        "catalog": "llama-3.1-8b-instruct", "replicas": {"min": 1, "max": 3},
    })


@pytest.fixture()
def downloaded(llama) -> ServedModel:
    """The same model with its weights copied to the node first (``weights: download``, the opt-out)."""
    return ServedModel.model_validate({**llama.model_dump(by_alias=True, exclude_unset=True), "weights": "download"})


def test_an_s3_safetensors_model_streams_by_default(llama):
    """``weights`` unset with an ``s3`` source (format ``safetensors`` by default): vLLM's Run:ai streamer reads
    the prefix (``--load-format runai_streamer``), one rank so no distributed flag, no init container."""
    pod = serving.pod_spec(llama, pool_purpose="gpu-inference", priority_class="llm-interactive")
    [vllm] = pod["containers"]
    assert vllm["args"] == ["s3://my-models/llama-3.1-8b-instruct/", "--served-model-name", "llama-8b",
                            "--tensor-parallel-size", "1", "--gpu-memory-utilization", "0.9", "--max-model-len", "8192",
                            "--load-format", "runai_streamer", "--port", "8000"]
    assert pod["initContainers"] == []
    assert {"name": "RUNAI_STREAMER_CONCURRENCY", "value": "16"} in vllm["env"]


def test_a_vllm_deployment_on_an_inference_pool(downloaded):
    llama = downloaded
    described = serving.deployment(llama, namespace="serving-interactive", tier="interactive",
                                   pool_purpose="gpu-inference", priority_class="llm-interactive",
                                   api_key_secret="model-api-key")
    assert described["metadata"]["name"] == "llama-8b" and described["metadata"]["namespace"] == "serving-interactive"
    assert described["spec"]["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    pod = described["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"llm-platform.io/pool": "gpu-inference"}
    assert pod["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert pod["priorityClassName"] == "llm-interactive"
    [vllm] = pod["containers"]
    assert vllm["name"] == "vllm"
    assert vllm["args"] == ["/models/llama-8b", "--served-model-name", "llama-8b", "--tensor-parallel-size", "1",
                            "--gpu-memory-utilization", "0.9", "--max-model-len", "8192", "--download-dir", "/models",
                            "--port", "8000"]
    assert vllm["resources"] == {"requests": {"cpu": "4", "memory": "32Gi", "nvidia.com/gpu": "1"},
                                 "limits": {"memory": "32Gi", "nvidia.com/gpu": "1"}}
    assert {"name": "VLLM_API_KEY", "valueFrom": {"secretKeyRef": {"name": "model-api-key", "key": "api-key"}}} in vllm["env"]
    [fetch] = pod["initContainers"]
    assert fetch["command"][3:] == ["fetch-weights", "my-models", "llama-3.1-8b-instruct/", "/models/llama-8b"]
    assert fetch["resources"] == {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "2Gi"}}


def test_a_training_pool_model_tolerates_the_workload_taint_too(downloaded):
    pod = serving.pod_spec(downloaded, pool_purpose="gpu-training", priority_class="llm-batch")
    assert pod["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "llm-platform.io/workload", "operator": "Equal", "value": "training", "effect": "NoSchedule"},
    ]
    assert pod["initContainers"][0]["name"] == "fetch-weights"


def test_a_karpenter_nodepool_for_one_pool():
    pool = KarpenterNodePool.model_validate(
        {"name": "gpu-x", "nodeClass": "gpu", "instanceFamilies": ["g5"], "gpuLimit": 8, "expireAfter": "720h"})
    manifest = node_pools.node_pool_manifest(pool, node_class_ref={**node_pools.KARPENTER_NODE_CLASS_REF, "name": "gpu"},
                                             label_prefix=node_pools.KARPENTER_LABELS)
    assert manifest["apiVersion"] == "karpenter.sh/v1" and manifest["kind"] == "NodePool"
    template = manifest["spec"]["template"]
    assert {k: template["metadata"]["labels"][k] for k in (
        "node.kubernetes.io/purpose", "llm-platform.io/pool", "nvidia.com/gpu.present", "llm-platform.io/capacity-type")} == {
        "node.kubernetes.io/purpose": "gpu-inference", "llm-platform.io/pool": "gpu-x",
        "nvidia.com/gpu.present": "true", "llm-platform.io/capacity-type": "on-demand"}
    assert template["spec"]["nodeClassRef"] == {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "gpu"}
    assert template["spec"]["taints"] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]
    assert template["spec"]["expireAfter"] == "720h"
    assert template["spec"]["requirements"][:3] == [
        {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["g5"]},
        {"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "Gt", "values": ["0"]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
    ]
    assert manifest["spec"]["limits"] == {"nvidia.com/gpu": "8"}


def test_the_gateway_runs_on_the_system_pool_with_its_config_hash():
    described = gateway.deployment(3, "us-east-1", "abc123")
    assert described["metadata"] == {"name": "llm-gateway", "namespace": "llm-gateway", "labels": gateway.LABELS}
    spec = described["spec"]
    assert spec["replicas"] == 3
    assert spec["template"]["metadata"]["annotations"] == {"llm-platform.io/config-hash": "abc123"}
    pod = spec["template"]["spec"]
    assert pod["nodeSelector"] == {"node.kubernetes.io/purpose": "system"}
    [litellm] = pod["containers"]
    assert litellm["resources"] == {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "2Gi"}}
    assert {"name": "AWS_REGION", "value": "us-east-1"} in litellm["env"]


def test_the_await_bound_is_the_cold_start_models_on_the_models_pool():
    """One source: the Deployment's timeoutSeconds and progressDeadlineSeconds are cold_start.await_budget
    of the model's start on its pool (prod's 70B AWQ model streams its weights, so no copy is bounded:
    node 600 + image 600 + startup probe 10 x 180 = 1800, 3000 s; downloaded it would add 380 s)."""
    model, pool = check_stack(read_stack_config("prod")).model_pools()[
        "serving.tiers[interactive].models[llama-3-1-70b-instruct-awq]"]
    assert (pool.name, pool.instance.name, pool.capacity_source, pool.disk_throughput_mibps) == (
        "Karpenter NodePool 'gpu-interactive'", "g5.12xlarge", "Karpenter", 750)
    bound = serving.cold_start_bound(model, pool)
    assert (bound.node_ready, bound.image_pull, bound.weights, bound.load, bound.total) == (600, 600, 0, 1800, 3000)
    described = serving.deployment(model, namespace="serving-interactive", tier="interactive",
                                   pool_purpose="gpu-inference", priority_class="llm-interactive", pool=pool)
    assert described["metadata"]["annotations"] == {"pulumi.com/timeoutSeconds": "3000"}
    assert described["spec"]["progressDeadlineSeconds"] == 3000


def test_a_fixed_node_pool_has_no_node_step_in_its_await_bound(downloaded):
    """Textbook: every cold start waits for a node. The cold-start model: a pool of fixed nodes has them up
    already, so the bound drops the 600 s node step (llama-3.1-8b: 16.06 GB at 100 MiB/s is 154 s)."""
    from policies.capacity.instances import load_instances

    instance = load_instances().instances["g5.2xlarge"]
    fixed = serving.ModelPool("managed node group 'fixed'", instance, "fixed nodes", 500)
    growing = serving.ModelPool("managed node group 'grows'", instance, "Cluster Autoscaler", 500)
    assert serving.cold_start_bound(downloaded, fixed).total == 0 + 600 + 154 + 1800
    assert serving.cold_start_bound(downloaded, growing).total == 600 + 600 + 154 + 1800
    assert serving.cold_start_bound(downloaded, None).total == 600 + 600 + 154 + 1800
    described = serving.deployment(downloaded, namespace="serving-interactive", tier="interactive",
                                   pool_purpose="gpu-inference", priority_class="llm-interactive", pool=fixed)
    assert described["metadata"]["annotations"] == {"pulumi.com/timeoutSeconds": "2554"}
