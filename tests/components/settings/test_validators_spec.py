"""Settings validators as a specification: every numeric bound stated as a number, with the value at
the bound accepted and the value just past it refused at that key; every cross-field and format
validator with a failing and a passing case, and the message checked for what it must say and must
not say.

The bounds are the documented ranges of each key (README's settings reference); moving one in the
code fails here, because these numbers do not move with it.
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from components.settings.cluster import Network
from components.settings.gpu_budget import GpuBudget
from components.settings.karpenter import Karpenter, KarpenterNodePool, Kubelet, RootVolume
from components.settings.managed_pools import GpuPool, Scaling, SystemPool
from components.settings.observability import Prometheus
from components.settings.serving import (
    Gateway,
    ModelArchitecture,
    ModelSource,
    Replicas,
    ServedModel,
    Serving,
    ServingTier,
    TierQuota,
    TierScaling,
)
from components.settings.stack import Settings


def errors(model, data: dict) -> list[dict]:
    try:
        model.model_validate(data)
    except ValidationError as exc:
        return exc.errors()
    return []


def errors_at(model, data: dict, *loc) -> list[dict]:
    return [e for e in errors(model, data) if tuple(e["loc"][:len(loc)]) == loc]


# --- numeric bounds ------------------------------------------------------------------------------------

#: (model, key, lowest accepted, highest accepted or None, whether the low bound is exclusive (gt))
BOUNDS = [
    (Network, "azCount", 2, 6, False),
    (GpuBudget, "maxGpus", 0, 100_000, False),
    (GpuBudget, "monthlyBudgetUsd", 0, 1_000_000_000, False),
    (Karpenter, "replicas", 1, 5, False),
    (KarpenterNodePool, "gpuLimit", 1, 10_000, False),
    (KarpenterNodePool, "weight", 1, 100, False),
    (Kubelet, "maxPods", 1, 737, False),
    (Kubelet, "imageGcHighThresholdPercent", 1, 100, False),
    (Kubelet, "imageGcLowThresholdPercent", 0, 99, False),
    (RootVolume, "sizeGib", 20, 16_384, False),
    (RootVolume, "iops", 3000, 16_000, False),
    (RootVolume, "throughputMibps", 125, 1000, False),
    (GpuPool, "diskSizeGib", 50, 4000, False),
    (Scaling, "minSize", 0, 1000, False),
    (Scaling, "desiredSize", 0, 1000, False),
    (Scaling, "maxSize", 1, 1000, False),
    (SystemPool, "diskSizeGib", 20, 1000, False),
    (Prometheus, "replicas", 1, 5, False),
    (Prometheus, "retentionDays", 1, 400, False),
    (Prometheus, "volumeSizeGib", 10, 16_384, False),
    (Gateway, "replicas", 1, 20, False),
    (Gateway, "timeoutSeconds", 5, 600, False),
    (Gateway, "numRetries", 0, 5, False),
    (ModelArchitecture, "parameters", 1_000_000, 10_000_000_000_000, False),
    (ModelArchitecture, "vocabSize", 1, None, False),
    (ModelArchitecture, "hiddenSize", 1, None, False),
    (ModelArchitecture, "layers", 1, 1000, False),
    (ModelArchitecture, "kvHeads", 1, 1024, False),
    (ModelArchitecture, "headDim", 1, 1024, False),
    (ModelArchitecture, "maxPositionEmbeddings", 1, None, False),
    (Replicas, "min", 0, 100, False),
    (Replicas, "max", 1, 100, False),
    (ServedModel, "gpusPerReplica", 1, 8, False),
    (ServedModel, "maxModelLen", 256, 1_048_576, False),
    (ServedModel, "gpuMemoryUtilization", 0.5, 0.98, False),
    (ServedModel, "cacheSizeGib", 10, 4000, False),
    (ServingTier, "priority", 0, 1_000_000_000, False),
    (TierQuota, "gpus", 0, 10_000, False),
    (TierScaling, "waitingRequests", 0, None, True),
    (TierScaling, "kvCacheUsage", 0, 1, True),
    (TierScaling, "ttftP95Seconds", 0, None, True),
    (TierScaling, "activationRequests", 0, None, False),
    (TierScaling, "gatewayRequestsPerSecond", 0, None, True),
    (TierScaling, "cooldownSeconds", 30, 86_400, False),
    (TierScaling, "pollingSeconds", 5, 300, False),
    (TierScaling, "servingWindowSeconds", 60, 86_400, False),
    (Settings, "kmsDeletionWindowDays", 7, 30, False),
    (Settings, "gpuHoursMonthlyBudget", 1, 10_000_000, False),
]


def _step(value: float) -> float:
    """The next value out of range: 1 for whole numbers, 0.01 for fractions like 0.98."""
    return 1 if float(value).is_integer() else 0.01


@pytest.mark.parametrize("model, key, low, high, exclusive", BOUNDS, ids=[f"{m.__name__}.{k}" for m, k, *_ in BOUNDS])
def test_each_bound_accepts_its_edge_and_refuses_one_step_past(model, key, low, high, exclusive):
    if exclusive:
        assert errors_at(model, {key: low}, key), f"{key} {low} must be refused (> {low})"
        assert errors_at(model, {key: low + 0.001}, key) == []
    else:
        assert errors_at(model, {key: low}, key) == [], f"{key} {low} must be accepted"
        [below] = errors_at(model, {key: low - _step(low)}, key)
        assert below["type"] == "greater_than_equal"
    if high is not None:
        assert errors_at(model, {key: high}, key) == [], f"{key} {high} must be accepted"
        [above] = errors_at(model, {key: high + _step(high)}, key)
        assert above["type"] == "less_than_equal"


#: Defaults a stack that leaves the key out gets (each within its bounds above).
DEFAULTS = [
    (Network, "azCount", 3),
    (Karpenter, "replicas", 2),
    (KarpenterNodePool, "weight", 10),
    (Kubelet, "maxPods", None),
    (Kubelet, "imageGcHighThresholdPercent", 85),
    (Kubelet, "imageGcLowThresholdPercent", 75),
    (RootVolume, "sizeGib", 200),
    (RootVolume, "iops", 6000),
    (RootVolume, "throughputMibps", 500),
    (GpuPool, "diskSizeGib", 200),
    (SystemPool, "diskSizeGib", 50),
    (Prometheus, "replicas", 1),
    (Prometheus, "retentionDays", 35),
    (Prometheus, "volumeSizeGib", 100),
    (Gateway, "replicas", 2),
    (Gateway, "timeoutSeconds", 60),
    (Gateway, "numRetries", 1),
    (ServedModel, "gpusPerReplica", 1),
    (ServedModel, "maxModelLen", 8192),
    (ServedModel, "gpuMemoryUtilization", 0.9),
    (ServedModel, "cacheSizeGib", 100),
    (TierScaling, "waitingRequests", 5),
    (TierScaling, "kvCacheUsage", 0.8),
    (TierScaling, "ttftP95Seconds", 2.0),
    (TierScaling, "activationRequests", 0),
    (TierScaling, "gatewayRequestsPerSecond", 2),
    (TierScaling, "cooldownSeconds", 300),
    (TierScaling, "pollingSeconds", 15),
    (TierScaling, "servingWindowSeconds", 300),
    (Settings, "kmsDeletionWindowDays", 30),
    (Settings, "gpuHoursMonthlyBudget", None),
]


@pytest.mark.parametrize("model, key, default", DEFAULTS, ids=[f"{m.__name__}.{k}" for m, k, _ in DEFAULTS])
def test_defaults(model, key, default):
    field = next(f for name, f in model.model_fields.items() if (f.alias or name) == key)
    assert field.get_default(call_default_factory=True) == default


# --- serving --------------------------------------------------------------------------------------------

LLAMA = {"name": "llama", "source": {"s3": "s3://models/llama/"}, "pool": "gpu", "catalog": "llama-3.1-8b-instruct",
         "replicas": {"min": 1, "max": 2}}


@pytest.mark.parametrize("low, high, ok", [(2, 2, True), (0, 1, True), (3, 2, False), (100, 1, False)])
def test_replicas_min_may_not_exceed_max(low, high, ok):
    found = errors(Replicas, {"min": low, "max": high})
    if ok:
        assert found == []
    else:
        [error] = found
        assert error["msg"] == f"need min <= max, got {low} > {high}"
        assert error["ctx"]["path"] == ("min",)


@pytest.mark.parametrize(
    "source, message",
    [
        ({"s3": "s3://models/llama/"}, None),
        ({"s3": "s3://my-models/org/llama-3.1-8b/"}, None),
        ({"huggingFace": "meta-llama/Llama-3.1-8B-Instruct"}, None),
        ({"huggingFace": "Qwen/Qwen2.5-7B-Instruct"}, None),
        ({"s3": "s3://models/llama"}, "Value error, 's3://models/llama' is not an S3 prefix like "
                                      "s3://my-models/llama-3.1-8b-instruct/ (trailing /)"),
        ({"s3": "models/llama/"}, "Value error, 'models/llama/' is not an S3 prefix like "
                                  "s3://my-models/llama-3.1-8b-instruct/ (trailing /)"),
        ({"huggingFace": "Llama-3.1-8B-Instruct"}, "Value error, 'Llama-3.1-8B-Instruct' is not a Hugging Face repo "
                                                   "id like meta-llama/Llama-3.1-8B-Instruct"),
        ({"huggingFace": "meta-llama/Llama/8B"}, "Value error, 'meta-llama/Llama/8B' is not a Hugging Face repo id "
                                                 "like meta-llama/Llama-3.1-8B-Instruct"),
        ({"huggingFace": "-meta/llama"}, "Value error, '-meta/llama' is not a Hugging Face repo id like "
                                         "meta-llama/Llama-3.1-8B-Instruct"),
        ({}, "Value error, set exactly one of s3 or huggingFace"),
        ({"s3": "s3://models/llama/", "huggingFace": "meta-llama/Llama-3.1-8B-Instruct"},
         "Value error, set exactly one of s3 or huggingFace"),
    ],
    ids=["s3", "s3-nested", "hf", "hf-qwen", "s3-no-slash", "s3-no-scheme", "hf-no-org", "hf-two-slashes",
         "hf-leading-dash", "neither", "both"],
)
def test_model_source(source, message):
    found = [e["msg"] for e in errors(ModelSource, source)]
    assert found == ([] if message is None else [message])


def test_model_source_bucket_and_prefix():
    source = ModelSource.model_validate({"s3": "s3://my-models/org/llama/"})
    assert (source.bucket, source.prefix) == ("my-models", "org/llama/")


@pytest.mark.parametrize(
    "changes, message",
    [
        ({}, None),
        ({"cpu": "500m", "memory": "64Gi"}, None),
        ({"cpu": "4 cores"}, "Value error, '4 cores' is not a Kubernetes quantity like '4', '500m' or '32Gi'"),
        ({"memory": "32GB"}, "Value error, '32GB' is not a Kubernetes quantity like '4', '500m' or '32Gi'"),
        ({"catalog": "llama-9"}, "Value error, 'llama-9' is not in the model catalog; allowed: "),
        ({"catalog": None}, "Value error, set exactly one of catalog (a model_catalog.json name) or architecture"),
        ({"architecture": {"parameters": 8_000_000_000, "vocabSize": 128256, "hiddenSize": 4096, "layers": 32,
                           "kvHeads": 8, "headDim": 128, "quantization": "bf16"}},
         "Value error, set exactly one of catalog (a model_catalog.json name) or architecture"),
        ({"name": "Llama"}, "Value error, 'Llama' must be 2-32 lowercase letters, digits or '-', starting with a letter"),
    ],
    ids=["catalog", "quantities", "bad-cpu", "bad-memory", "unknown-catalog", "neither", "both", "bad-name"],
)
def test_served_model(changes, message):
    found = [e["msg"] for e in errors(ServedModel, {**LLAMA, **changes})]
    if message is None:
        assert found == []
    else:
        [msg] = found
        assert msg.startswith(message)
        if "catalog; allowed" in message:
            assert "llama-3.1-8b-instruct" in msg and "llama-9," not in msg


def test_gpu_memory_annotation_value_for_llama_8b_on_one_gpu():
    """The llm-platform.io/gpu-memory-mib annotation's figure. llama-3.1-8b-instruct in bf16: 8030261248
    parameters x 2 bytes = 16060522496 bytes; one 8192-token sequence's KV cache: 2 (K, V) x 32 layers x 8
    KV heads x 128 x 2 bytes x 8192 = 1073741824 bytes. (16060522496 + 1073741824) / 0.9 / 2**20 =
    18156.2, rounded up: 18157 MiB. Over 2 GPUs: (8030261248 + 536870912) / 0.9 / 2**20 = 9078.1 -> 9079."""
    model = ServedModel.model_validate(LLAMA)
    assert model.gpu_memory_mib_per_gpu == 18157
    halved = ServedModel.model_validate({**LLAMA, "gpusPerReplica": 2})
    assert halved.gpu_memory_mib_per_gpu == 9079
    roomier = ServedModel.model_validate({**LLAMA, "gpuMemoryUtilization": 0.5})
    assert roomier.gpu_memory_mib_per_gpu == 32682  # 17134264320 / 0.5 / 2**20 = 32681.02, rounded up


def test_quantization_override_reaches_the_architecture():
    model = ServedModel.model_validate({**LLAMA, "quantization": "fp8"})
    assert model.resolved_architecture().quantization == "fp8"
    assert ServedModel.model_validate(LLAMA).resolved_architecture().quantization == "bf16"


@pytest.mark.parametrize(
    "gateway, message",
    [
        ({"bedrockModels": ["anthropic.claude-sonnet-4-5-20250929-v1:0", "us.meta.llama3-1-70b-instruct-v1:0"]}, None),
        ({"bedrockEmbeddingModels": ["amazon.titan-embed-text-v2:0", "cohere.embed-multilingual-v3"]}, None),
        ({"bedrockModels": ["claude"]},
         "Value error, claude not Bedrock model ids like anthropic.claude-sonnet-4-5-20250929-v1:0"),
        ({"bedrockModels": ["anthropic.claude-3-haiku-20240307-v1:0", "anthropic.claude-3-haiku-20240307-v1:0"]},
         "Value error, model ids must not repeat"),
        ({"bedrockEmbeddingModels": ["amazon.titan-embed-text-v2:0", "amazon.titan-embed-text-v2:0"]},
         "Value error, model ids must not repeat"),
        ({"bedrockModels": ["amazon.titan-embed-text-v2:0"]},
         "Value error, bedrockModels are chat fallbacks but amazon.titan-embed-text-v2:0 is an embedding model; "
         "list it under bedrockEmbeddingModels"),
        ({"bedrockEmbeddingModels": ["anthropic.claude-3-haiku-20240307-v1:0"]},
         "Value error, bedrockEmbeddingModels are embedding fallbacks but anthropic.claude-3-haiku-20240307-v1:0 is "
         "not an embedding model (ids like amazon.titan-embed-text-v2:0 or cohere.embed-multilingual-v3); list it "
         "under bedrockModels"),
        ({"bedrockRegion": "us-west-2"}, None),
        ({"bedrockRegion": "us-gov-west-1"}, None),
        ({"bedrockRegion": "us-west"}, "Value error, 'us-west' is not an AWS region name such as us-east-1"),
        ({"bedrockRegion": "US-WEST-2"}, "Value error, 'US-WEST-2' is not an AWS region name such as us-east-1"),
    ],
    ids=["chat-ids", "embedding-ids", "bad-id", "repeated-chat", "repeated-embedding", "embedding-as-chat",
         "chat-as-embedding", "region", "gov-region", "region-no-number", "region-upper"],
)
def test_gateway(gateway, message):
    found = [e["msg"] for e in errors(Gateway, gateway)]
    assert found == ([] if message is None else [message])


def test_gateway_fallbacks_by_kind():
    gateway = Gateway.model_validate({"bedrockModels": ["anthropic.claude-3-haiku-20240307-v1:0"],
                                      "bedrockEmbeddingModels": ["amazon.titan-embed-text-v2:0"]})
    assert gateway.fallbacks() == {"chat": ["anthropic.claude-3-haiku-20240307-v1:0"],
                                   "embedding": ["amazon.titan-embed-text-v2:0"]}


def tier(name: str, priority: int, *models: str) -> dict:
    """A tier of catalog llama models named ``models`` (each a DNS name of 2+ characters)."""
    return {"name": name, "priority": priority, "quota": {"gpus": 8, "cpu": "64", "memory": "512Gi"},
            "models": [{**LLAMA, "name": m} for m in models]}


@pytest.mark.parametrize(
    "tiers, message, path",
    [
        ([tier("interactive", 100, "m-a", "m-b"), tier("batch", 10, "m-c")], None, None),
        ([tier("interactive", 100, "m-a", "m-b", "m-a")],
         "model name 'm-a' is repeated; model names must be unique within a tier", ("tiers", 0, "models", 2, "name")),
        ([tier("interactive", 100, "m-a"), tier("interactive", 10, "m-b")],
         "tier name 'interactive' is repeated; tier names must be unique", ("tiers", 1, "name")),
        ([tier("interactive", 100, "m-a"), tier("batch", 10, "m-a")],
         "model name 'm-a' is repeated in another tier; model names must be unique across tiers (the gateway routes "
         "by name)", ("tiers", 1, "models", 0, "name")),
        ([tier("interactive", 100, "m-a"), tier("batch", 100, "m-b")],
         "priority 100 is repeated; tier priorities must differ so preemption order is defined", ("tiers", 1, "priority")),
    ],
    ids=["distinct", "model-in-tier", "tier-name", "model-across-tiers", "priority"],
)
def test_serving_names_and_priorities_are_unique(tiers, message, path):
    found = errors(Serving, {"enabled": True, "tiers": tiers})
    if message is None:
        assert found == []
        return
    [error] = found
    assert error["msg"] == message
    assert tuple(error["loc"]) + tuple(error["ctx"]["path"]) == path


def test_tier_quota_quantities():
    assert errors(TierQuota, {"gpus": 4, "cpu": "64", "memory": "512Gi"}) == []
    [error] = errors(TierQuota, {"gpus": 4, "cpu": "64 cpus", "memory": "512Gi"})
    assert error["msg"] == "Value error, '64 cpus' is not a Kubernetes quantity like '64' or '512Gi'"


# --- managed pools -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sizes, key",
    [((0, 0, 1), None), ((1, 2, 2), None), ((2, 1, 3), "desiredSize"), ((1, 3, 2), "desiredSize"),
     ((3, 3, 2), "minSize")],
)
def test_scaling_is_ordered(sizes, key):
    low, desired, high = sizes
    found = errors(Scaling, {"minSize": low, "desiredSize": desired, "maxSize": high})
    if key is None:
        assert found == []
    else:
        [error] = found
        assert error["msg"] == f"need minSize <= desiredSize <= maxSize, got {low} <= {desired} <= {high}"
        assert error["ctx"]["path"] == (key,)


SYSTEM = {"instanceTypes": ["m7i.xlarge"], "scaling": {"minSize": 2, "desiredSize": 2, "maxSize": 3}}


def test_system_pool_takes_cpu_types_and_two_nodes():
    assert errors(SystemPool, SYSTEM) == []
    [gpu] = errors(SystemPool, {**SYSTEM, "instanceTypes": ["m7i.xlarge", "g5.xlarge"]})
    assert gpu["msg"] == "Value error, g5.xlarge carry GPUs; the system pool takes CPU types only"
    [one] = errors(SystemPool, {**SYSTEM, "scaling": {"minSize": 1, "desiredSize": 2, "maxSize": 3}})
    assert one["msg"] == "Value error, minSize is 1; the system pool keeps at least 2 nodes in 2 AZs"
    [unknown] = errors(SystemPool, {**SYSTEM, "instanceTypes": ["m9z.huge"]})
    assert unknown["msg"].startswith("Value error, unknown instance type(s) m9z.huge; allowed: ")
    [twice] = errors(SystemPool, {**SYSTEM, "instanceTypes": ["m7i.xlarge", "m7i.xlarge"]})
    assert twice["msg"] == "Value error, instance types must not repeat"


GPU_POOL = {"name": "gpu", "instanceTypes": ["g5.xlarge", "g5.2xlarge"], "capacityType": "SPOT",
            "scaling": {"minSize": 0, "desiredSize": 0, "maxSize": 2}}


@pytest.mark.parametrize(
    "changes, message",
    [
        ({}, None),
        ({"capacityType": "ON_DEMAND", "instanceTypes": ["g5.xlarge"]}, None),
        ({"purpose": "gpu-dra", "scaling": {"minSize": 1, "desiredSize": 1, "maxSize": 2}}, None),
        ({"instanceTypes": ["g5.xlarge", "m7i.xlarge"]}, "Value error, m7i.xlarge have no GPU; allowed: "),
        ({"instanceTypes": ["g5.xlarge", "g6e.xlarge"]},
         "Value error, mixes GPU models a10g, l40s; a pool holds one GPU model so its labels stay true"),
        ({"instanceTypes": ["g5.xlarge"]},
         "SPOT pool 'gpu' lists 1 instance type; list at least 2 types with the same GPU model so Spot can find "
         "capacity"),
        ({"scaling": {"minSize": 1, "desiredSize": 1, "maxSize": 2}},
         "scaling.minSize is 1; GPU pools scale to minSize 0"),
        ({"purpose": "gpu-dra"}, "scaling.minSize is 0 on gpu-dra pool 'gpu'; Cluster Autoscaler builds"),
    ],
    ids=["spot-two-types", "on-demand-one-type", "dra-at-one", "cpu-type", "mixed-gpu-models", "spot-one-type",
         "min-above-zero", "dra-at-zero"],
)
def test_gpu_pool(changes, message):
    found = [e["msg"] for e in errors(GpuPool, {**GPU_POOL, **changes})]
    if message is None:
        assert found == []
    else:
        [msg] = found
        assert msg.startswith(message)
        if "have no GPU" in message:
            assert "g5.xlarge" in msg.split("allowed: ")[1] and "m7i.xlarge" not in msg.split("allowed: ")[1]


def test_gpu_pool_figures():
    pool = GpuPool.model_validate({**GPU_POOL, "instanceTypes": ["g5.12xlarge", "g5.2xlarge"]})
    assert (pool.accelerator, pool.gpu_memory_mib, pool.min_gpus_per_node) == ("a10g", 22888, 1)
    assert (pool.disk_iops, pool.disk_throughput_mibps) == (6000, 500)
