"""One model served by vLLM, and its serving tier's quota, as the engine receives them.

Placement (selector, tolerations, GPU limits) comes from the scheduling contract, never from the
model's settings. Weights are either copied from S3 to the node's NVMe-backed ``emptyDir`` by an
init container that skips a complete cache and verifies what it copied (``weights: download``), or
streamed from S3 into GPU memory by vLLM's Run:ai model streamer (``weights: stream``): no init
container, no weights volume, nothing on the node's disk to go stale or fill it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from components import contract, versions
from components.specs.gateway import DEMAND_WINDOW_SECONDS, demand_query
from policies.capacity.cold_start import (
    COLD,
    DEVICE_PLUGIN_PATH,
    DISTRIBUTED_KEY,
    DOWNLOAD,
    IMAGE_BOUND,
    LOAD_FORMAT_FLAG,
    LOADER_EXTRA_CONFIG_FLAG,
    NODE_BOUND,
    STREAM,
    STREAMER_CONCURRENCY_ENV,
    STREAMER_LOAD_FORMAT,
    STREAMER_MEMORY_LIMIT_ENV,
    AwaitBudget,
    Start,
    WeightLoading,
    await_budget,
    start,
    weights_bound_seconds,
)
from policies.capacity.engine import MODEL_ANNOTATION as MODEL_ARCHITECTURE_ANNOTATION
from policies.capacity.instances import Instance
from policies.capacity.keep_awake import cooldown_for

if TYPE_CHECKING:
    from components.settings.serving import ServedModel, TierQuota, TierScaling

PORT = 8000
MODEL_DIR = "/models"
#: Failed polls in a row before KEDA's fallback holds replicas (3 x the tier's polling interval).
FALLBACK_FAILURE_THRESHOLD = 3
#: Unprivileged user and group every serving container runs as (neither image needs root).
RUN_AS_USER = 1000
#: Writable home of the non-root user (vLLM, Triton and torch.compile caches; the AWS CLI's config).
HOME_DIR = "/home/llm"
#: Secret key holding the tier's model API key (vLLM reads ``VLLM_API_KEY``; it guards ``/v1`` only).
API_KEY_SECRET_KEY = "api-key"
#: Labels every vLLM pod carries (NetworkPolicies select on them, and so does every model Service:
#: see :func:`service_selector`).
POD_LABELS = {"app.kubernetes.io/name": "vllm"}


def service_selector(model: str) -> dict[str, str]:
    """The model Service's selector: the model's pods, spelled so the gateway's egress peer matches it.

    On EKS the gateway's egress rule admits a Service's ClusterIP only when the rule's podSelector
    (:data:`POD_LABELS`) matches the Service's ``spec.selector`` itself
    (aws/amazon-network-policy-controller-k8s, pkg/resolvers/endpoints.go,
    ``getMatchingServiceClusterIPs``); a selector of the instance label alone selects the same pods
    but is never admitted, and every gateway call would be dropped. The Deployment's own selector
    (immutable) stays the instance label.
    """
    return {**POD_LABELS, "app.kubernetes.io/instance": model}


def pod_security_context() -> dict[str, Any]:
    """Pod Security ``restricted``: non-root, RuntimeDefault seccomp; ``fsGroup`` makes the
    emptyDirs writable by the unprivileged user."""
    return {
        "runAsNonRoot": True,
        "runAsUser": RUN_AS_USER,
        "runAsGroup": RUN_AS_USER,
        "fsGroup": RUN_AS_USER,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def container_security_context() -> dict[str, Any]:
    """Every capability dropped, no privilege escalation, read-only root (writes go to emptyDirs)."""
    return {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


#: The vLLM container's startup probe: 10 s x 180 = 30 minutes to download or load weights and
#: capture CUDA graphs before the kubelet restarts it.
STARTUP_PROBE_PERIOD_SECONDS = 10
STARTUP_PROBE_FAILURES = 180

# --- How long a cold start may take: what `pulumi up` waits for -----------------------------------
# pulumi-kubernetes awaits a Deployment's rollout (Progressing/NewReplicaSetAvailable and Available)
# on create and on every update, for DefaultDeploymentTimeoutMins = 10 unless the object carries
# `pulumi.com/timeoutSeconds` (pulumi/pulumi-kubernetes, provider/pkg/await/deployment.go,
# deploymentInitAwaiter.Await; provider/pkg/metadata/overrides.go, TimeoutDuration). A first GPU
# replica needs a node, the image, the weights and the load, which together outlast 10 minutes: the
# update would fail and nothing ordered after the Deployment would be created. Skipping the await
# (`pulumi.com/skipAwait`) would report success for a model that never became ready; instead each
# model Deployment carries an explicit budget, and `progressDeadlineSeconds` matches it so the
# Deployment's own Progressing condition does not report a stalled rollout (ProgressDeadlineExceeded,
# default 600 s) while the budget still runs. The budget is the planning bound of the model's cold
# start on its pool (policies/capacity/cold_start.py, the one cold-start model; docs/cold-start.md
# gives every figure's source): a real failure (image pull, CrashLoopBackOff) is printed by the
# awaiter as it happens, so the budget only bounds how long a slow but healthy start may take.


@dataclass(frozen=True)
class ModelPool:
    """What a model's start depends on in the pool it lands on: the pool (as the capacity simulation
    names it), the node type its autoscaler plans with, how its nodes arrive (a ``cold_start``
    capacity source), its nodes' root volume throughput, and whether they pull images with SOCI parallel pull
    (nodeadm's ``FastImagePull``), and what advertises their GPUs (a ``cold_start`` GPU software path)."""

    name: str
    instance: Instance
    capacity_source: str
    disk_throughput_mibps: float
    fast_image_pull: bool = False
    gpu_software: str = DEVICE_PLUGIN_PATH


def streams(model: ServedModel) -> bool:
    """Whether vLLM streams the model's weights from S3 (:attr:`ServedModel.weight_loading`: ``weights``, or
    by default an ``s3`` source in safetensors; settings refuse streaming anything else)."""
    return model.weight_loading == STREAM and bool(model.source.s3)


def weight_loading(model: ServedModel) -> WeightLoading:
    """How the model's weights reach its GPUs, as the cold-start model counts it."""
    if not streams(model):
        return WeightLoading(DOWNLOAD)
    return WeightLoading(STREAM, model.streaming.concurrency, ranks=model.gpus_per_replica,
                         distributed=model.gpus_per_replica > 1)


def model_start(model: ServedModel, pool: ModelPool, case: str = COLD, *, image_prepulled: bool = True) -> Start:
    """The model's start on a node of ``pool``: its weights and how they load, the vLLM image, the startup
    probe. ``image_prepulled``: the program's pre-pull DaemonSet (components/serving/image_prepull.py) runs
    on every GPU pool that hosts a model, so a warm node holds the image."""
    # A multi-node replica's nodes each load their own pipeline stages' share, together; the group serves
    # when the slowest has (components/specs/multi_node.py).
    return start(
        model.name, pool.name, weight_bytes=model.resolved_architecture().weight_bytes() / model.nodes_per_replica,
        instance=pool.instance,
        capacity_source=pool.capacity_source, image=str(versions.VLLM_IMAGE), disk_throughput_mibps=pool.disk_throughput_mibps,
        startup_probe_period_seconds=STARTUP_PROBE_PERIOD_SECONDS, startup_probe_failures=STARTUP_PROBE_FAILURES,
        case=case, loading=weight_loading(model), image_prepulled=image_prepulled,
        fast_image_pull=pool.fast_image_pull, gpu_software=pool.gpu_software)


def cold_start_bound(model: ServedModel, pool: ModelPool | None) -> AwaitBudget:
    """The await bound of the model's cold start: :func:`cold_start.await_budget` of its start on
    ``pool``. ``None`` (a caller that does not know the pool): the bound of a pool that provisions its
    nodes, the longest the node step can be, from the same figures."""
    if pool is not None:
        return await_budget(model_start(model, pool))
    return AwaitBudget(node_ready=math.ceil(NODE_BOUND.value), image_pull=math.ceil(IMAGE_BOUND.value),
                       weights=0 if streams(model) else weights_bound_seconds(model.resolved_architecture().weight_bytes()),
                       load=STARTUP_PROBE_PERIOD_SECONDS * STARTUP_PROBE_FAILURES)


#: The annotation pulumi-kubernetes reads for a resource's await timeout (seconds, a string).
AWAIT_TIMEOUT_ANNOTATION = "pulumi.com/timeoutSeconds"


def deployment_annotations(model: ServedModel, pool: ModelPool | None = None) -> dict[str, str]:
    """The await budget, as the provider reads it from the Deployment's own metadata."""
    return {AWAIT_TIMEOUT_ANNOTATION: str(cold_start_bound(model, pool).total)}


#: The init container's script (its own file, so it can be read, linted and run as a script).
FETCH_WEIGHTS_SCRIPT = (Path(__file__).resolve().parents[1] / "serving" / "fetch_weights.sh").read_text()
#: What the weight copy may use: the AWS CLI streams, so memory stays flat whatever the model's size.
FETCH_WEIGHTS_RESOURCES = {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "2Gi"}}


def fetch_weights_command(bucket: str, prefix: str, target: str) -> list[str]:
    """Run ``fetch_weights.sh`` with the model's bucket, prefix and cache folder as arguments (never
    spliced into the script's text, so no value needs shell quoting)."""
    return ["/bin/sh", "-c", FETCH_WEIGHTS_SCRIPT, "fetch-weights", bucket, prefix, target]


def s3_read_policy(partition: str, bucket: str, prefix: str) -> str:
    """Read-only access to one model's prefix: list it, get its objects, nothing else."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "ListModelPrefix",
                    "Effect": "Allow",
                    "Action": "s3:ListBucket",
                    "Resource": f"arn:{partition}:s3:::{bucket}",
                    "Condition": {"StringLike": {"s3:prefix": [prefix, f"{prefix}*"]}},
                },
                {
                    "Sid": "FindBucketRegion",
                    "Effect": "Allow",
                    "Action": "s3:GetBucketLocation",
                    "Resource": f"arn:{partition}:s3:::{bucket}",
                },
                {
                    "Sid": "ReadModelObjects",
                    "Effect": "Allow",
                    "Action": "s3:GetObject",
                    "Resource": f"arn:{partition}:s3:::{bucket}/{prefix}*",
                },
            ],
        }
    )


def vllm_args(model: ServedModel) -> list[str]:
    """`vllm serve` arguments derived from the model's settings; tensor parallel = GPUs per replica.

    Streamed, the model is its ``s3://`` prefix and ``--load-format runai_streamer`` reads it (config and
    tokenizer files are pulled into ``~/.cache/vllm/assets/model_streamer``, under the writable home:
    vllm-project/vllm, vllm/transformers_utils/runai_utils.py, ``ObjectStorageModel``); there is no
    download directory."""
    if streams(model):
        source = model.source.s3
    else:
        source = f"{MODEL_DIR}/{model.name}" if model.source.s3 else model.source.hugging_face
    # The image's entrypoint is `vllm serve`, which takes the model as its positional argument
    # (--model is deprecated there); embedding models run vLLM's pooling runner.
    runner = ["--runner", "pooling"] if model.kind == "embedding" else []
    return [
        str(source),
        *runner,
        "--served-model-name", model.name,
        "--tensor-parallel-size", str(model.gpus_per_replica),
        "--gpu-memory-utilization", str(model.gpu_memory_utilization),
        "--max-model-len", str(model.max_model_len),
        *([LOAD_FORMAT_FLAG, STREAMER_LOAD_FORMAT] if streams(model) else ["--download-dir", MODEL_DIR]),
        # Several ranks share the checkpoint instead of each streaming all of it (cold_start.DISTRIBUTED_KEY).
        *([LOADER_EXTRA_CONFIG_FLAG, json.dumps({DISTRIBUTED_KEY: True})]
          if streams(model) and model.gpus_per_replica > 1 else []),
        "--port", str(PORT),
        *(["--quantization", model.quantization] if model.quantization else []),
    ]


def metric_selector(namespace: str, model: str) -> str:
    return f'namespace="{namespace}",model_name="{model}"'


#: The trigger that holds a model's replicas at its tier's KV-cache target (the check's cost estimate reads it).
KV_CACHE_TRIGGER = "kv-cache-usage"


def scaling_triggers(namespace: str, model: ServedModel, scaling: TierScaling, prometheus_url: str, *,
                     fallback_target: bool = False) -> list[dict[str, Any]]:
    """KEDA Prometheus triggers: the gateway's request rate for the model (present even at zero
    replicas, so it wakes the model) and current vLLM metric names (colon names, as PromQL takes them).

    The gateway trigger does not ignore an empty answer: an empty answer means the gateway is not
    scraped, and KEDA's ``fallback`` then holds replicas. vLLM series vanish legitimately at zero
    replicas, so those triggers read an empty answer as 0. The p95 is filtered to numbers (an idle
    model's histogram_quantile is NaN). Only demand (gateway requests, waiting requests) activates a
    model from zero or keeps it from returning there. A ``fallback_target`` (another model's fallback)
    also counts the requests that fell back to it (``gateway.demand_query``).
    """
    sel = metric_selector(namespace, model.name)
    triggers = [
        ("gateway-demand", demand_query(model.name, fallback_target=fallback_target), scaling.gateway_requests_per_second,
         "AverageValue", False, scaling.activation_requests),
        ("waiting-requests", f"sum(vllm:num_requests_waiting{{{sel}}})", scaling.waiting_requests, "AverageValue", True, 0),
        # Cache use and latency size a running model; they never keep an idle one from zero.
        (KV_CACHE_TRIGGER, f"avg(vllm:kv_cache_usage_perc{{{sel}}})", scaling.kv_cache_usage, "Value", True, scaling.kv_cache_usage),
        (
            "ttft-p95",
            f"histogram_quantile(0.95, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket{{{sel}}}[2m]))) >= 0",
            scaling.ttft_p95_seconds,
            "Value",
            True,
            scaling.ttft_p95_seconds,
        ),
    ]
    result = []
    for name, query, threshold, metric_type, ignore_null, activation in triggers:
        result.append(
            {
                "type": "prometheus",
                "name": name,
                "metricType": metric_type,
                "metadata": {
                    "serverAddress": prometheus_url,
                    "query": query,
                    "threshold": str(threshold),
                    "activationThreshold": str(activation),
                    "ignoreNullValues": "true" if ignore_null else "false",
                },
            }
        )
    return result


def keep_awake_cooldown(model: ServedModel, scaling: TierScaling, pool: ModelPool | None) -> int:
    """The model's ``cooldownPeriod``: the tier's ``cooldownSeconds``, or, for a model at ``replicas.min``
    0, longer if that is what it takes for a model one request woke to serve ``servingWindowSeconds``
    after its predicted cold start. KEDA counts the cooldown from the last poll that saw the request
    (``LastActiveTime``), not from the replica's readiness, and deletes a replica that is still starting
    (policies/capacity/keep_awake.py gives the rule and its source). The cold start is
    :func:`model_start` on ``pool``; without a pool, the planning bound of one that provisions nodes."""
    if model.replicas.min > 0:
        return scaling.cooldown_seconds
    cold = model_start(model, pool).seconds if pool is not None else float(cold_start_bound(model, None).total)
    needed = cooldown_for(DEMAND_WINDOW_SECONDS, scaling.polling_seconds, cold, scaling.serving_window_seconds)
    return max(scaling.cooldown_seconds, needed)


def scaled_object_spec(namespace: str, model: ServedModel, scaling: TierScaling, prometheus_url: str,
                       pool: ModelPool | None = None, *, fallback_target: bool = False) -> dict[str, Any]:
    """ScaledObject spec: bounds from the model, pace from the tier, and the cooldown that keeps a woken
    model until it has served (:func:`keep_awake_cooldown`; ``pool`` is where it starts).

    ``cooldownPeriod`` only governs the step to zero; above the minimum the HPA's scale-down
    stabilization window (the tier's cooldown) keeps replicas through short lulls. When Prometheus
    cannot answer (down, or the gateway unscraped) for ``failureThreshold`` polls, KEDA holds the
    current replicas, or at least one (``currentReplicasIfHigher``), instead of scaling on no data.
    """
    return {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": model.name},
        "minReplicaCount": model.replicas.min,
        "maxReplicaCount": model.replicas.max,
        "cooldownPeriod": keep_awake_cooldown(model, scaling, pool),
        "pollingInterval": scaling.polling_seconds,
        "fallback": {
            "failureThreshold": FALLBACK_FAILURE_THRESHOLD,
            "replicas": max(model.replicas.min, 1),
            "behavior": "currentReplicasIfHigher",
        },
        "advanced": {
            "horizontalPodAutoscalerConfig": {
                "behavior": {
                    "scaleDown": {
                        "stabilizationWindowSeconds": scaling.cooldown_seconds,
                        "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}],
                    },
                    "scaleUp": {
                        "stabilizationWindowSeconds": 0,
                        "policies": [{"type": "Pods", "value": 2, "periodSeconds": 60}],
                    },
                }
            }
        },
        "triggers": scaling_triggers(namespace, model, scaling, prometheus_url, fallback_target=fallback_target),
    }


def pod_labels(model: str, tier: str) -> dict[str, str]:
    return {
        **POD_LABELS,
        "app.kubernetes.io/instance": model,
        "app.kubernetes.io/part-of": "llm-platform",
        contract.TIER_LABEL: tier,
    }


def pod_annotations(model: ServedModel) -> dict[str, str]:
    """Per-GPU memory need (the pack checks it fits the pool) and the architecture the capacity model reads."""
    return {
        contract.GPU_MEMORY_NEED_ANNOTATION: str(model.gpu_memory_mib_per_gpu),
        MODEL_ARCHITECTURE_ANNOTATION: json.dumps(model.resolved_architecture().to_json()),
    }


GIB = 1024**3


def streamer_env(model: ServedModel, region: str | None) -> list[dict[str, Any]]:
    """The Run:ai model streamer's settings (run-ai/runai-model-streamer docs/src/env-vars.md) and the
    region its S3 client addresses.

    Credentials: the streamer asks boto3 for them by default (docs/src/usage.md, "S3 authentication") and
    hands them to its C++ S3 client; boto3's chain includes the container provider that reads EKS Pod
    Identity's ``AWS_CONTAINER_CREDENTIALS_FULL_URI`` and ``AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE`` (AWS
    SDKs and Tools reference guide, "Container credential provider"; botocore ``ContainerProvider``), so
    the model's own Pod Identity role (``s3_read_policy``: ListBucket on the prefix, GetObject under it)
    is what it reads with. The image ships the streamer's S3 backend: vllm-project/vllm docker/Dockerfile's
    ``vllm-openai-base`` stage installs ``boto3`` and ``runai-model-streamer[s3]`` (read on the repository,
    not on the v0.33.0 image itself, which cannot be pulled here). The region is the stack's: the S3 client
    is given one region, so the model's bucket must be in the stack's region (not checkable offline)."""
    env = [
        {"name": STREAMER_CONCURRENCY_ENV, "value": str(model.streaming.concurrency)},
        {"name": STREAMER_MEMORY_LIMIT_ENV, "value": str(model.streaming.memory_limit_gib * GIB)},
    ]
    if region:
        env += [{"name": "AWS_REGION", "value": region}, {"name": "AWS_DEFAULT_REGION", "value": region}]
    return env


def vllm_env(model: ServedModel, api_key_secret: str | None, hf_token_secret: Any, region: str | None = None) -> list[dict[str, Any]]:
    """Non-root with a read-only root: every cache goes to the writable home or the model volume."""
    env: list[dict[str, Any]] = [
        {"name": "VLLM_NO_USAGE_STATS", "value": "1"},
        {"name": "HOME", "value": HOME_DIR},
        {"name": "USER", "value": "llm"},
        {"name": "XDG_CACHE_HOME", "value": f"{HOME_DIR}/.cache"},
        {"name": "TMPDIR", "value": "/tmp"},
    ]
    if api_key_secret is not None:
        env.append(
            {"name": "VLLM_API_KEY", "valueFrom": {"secretKeyRef": {"name": api_key_secret, "key": API_KEY_SECRET_KEY}}}
        )
    if model.source.hugging_face:
        env += [
            {"name": "HF_XET_HIGH_PERFORMANCE", "value": "1"},
            {"name": "HF_HOME", "value": f"{MODEL_DIR}/.hf"},
            {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": hf_token_secret, "key": "token"}}},
        ]
    if streams(model):
        env += streamer_env(model, region)
    return env


def fetch_weights_container(model: ServedModel) -> dict[str, Any]:
    """Init container copying S3 weights into the model cache (Hugging Face models download in vLLM)."""
    return {
        "name": "fetch-weights",
        "image": str(versions.AWS_CLI_IMAGE),
        "command": fetch_weights_command(model.source.bucket, model.source.prefix, f"{MODEL_DIR}/{model.name}"),
        "resources": FETCH_WEIGHTS_RESOURCES,
        "env": [{"name": "HOME", "value": HOME_DIR}, {"name": "TMPDIR", "value": "/tmp"}],
        "volumeMounts": [
            {"name": "model-cache", "mountPath": MODEL_DIR},
            {"name": "home", "mountPath": HOME_DIR},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
        "securityContext": container_security_context(),
    }


def vllm_resources(model: ServedModel, placement: dict[str, Any]) -> dict[str, Any]:
    """Requests equal limits for memory; GPUs in both (the contract's resource name and count)."""
    return {
        "requests": {"cpu": model.cpu, "memory": model.memory, **placement["limits"]},
        "limits": {"memory": model.memory, **placement["limits"]},
    }


def pod_spec(
    model: ServedModel, *, pool_purpose: str, priority_class: Any, api_key_secret: str | None = None, hf_token_secret: Any = None,
    region: str | None = None,
) -> dict[str, Any]:
    """The vLLM pod: placement from the scheduling contract, probes sized for a long model load.
    ``priority_class`` is the tier's PriorityClass name (a Pulumi output in the program); ``region`` the
    stack's, which a streamed model's S3 client addresses. A streamed model has no fetch-weights init
    container and no model volume: a replacement pod reads S3 again, and nothing is left on the node."""
    placement = contract.gpu_workload_placement(model.pool, pool_purpose, model.gpus_per_replica)
    downloads = not streams(model)
    http = {"path": "/health", "port": "http"}
    return {
        "serviceAccountName": model.name,
        # No Kubernetes API access; Pod Identity injects its own projected token.
        "automountServiceAccountToken": False,
        "securityContext": pod_security_context(),
        "priorityClassName": priority_class,
        "nodeSelector": placement["nodeSelector"],
        "tolerations": placement["tolerations"],
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": {"app.kubernetes.io/instance": model.name}},
            }
        ],
        "terminationGracePeriodSeconds": 120,
        "initContainers": [fetch_weights_container(model)] if model.source.s3 and downloads else [],
        "containers": [
            {
                "name": "vllm",
                "image": str(versions.VLLM_IMAGE),
                "args": vllm_args(model),
                "env": vllm_env(model, api_key_secret, hf_token_secret, region),
                "ports": [{"name": "http", "containerPort": PORT, "protocol": "TCP"}],
                "resources": vllm_resources(model, placement),
                "startupProbe": {"httpGet": http, "periodSeconds": STARTUP_PROBE_PERIOD_SECONDS, "failureThreshold": STARTUP_PROBE_FAILURES},
                "readinessProbe": {"httpGet": http, "periodSeconds": 10, "failureThreshold": 3},
                "livenessProbe": {"httpGet": http, "periodSeconds": 30, "timeoutSeconds": 5, "failureThreshold": 3},
                "lifecycle": {"preStop": {"exec": {"command": ["/bin/sh", "-c", "sleep 30"]}}},
                "volumeMounts": [
                    *([{"name": "model-cache", "mountPath": MODEL_DIR}] if downloads else []),
                    {"name": "dshm", "mountPath": "/dev/shm"},
                    {"name": "home", "mountPath": HOME_DIR},
                    {"name": "tmp", "mountPath": "/tmp"},
                ],
                "securityContext": container_security_context(),
            }
        ],
        "volumes": [
            *([{"name": "model-cache", "emptyDir": {"sizeLimit": f"{model.cache_size_gib}Gi"}}] if downloads else []),
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}},
            {"name": "home", "emptyDir": {"sizeLimit": "8Gi"}},
            {"name": "tmp", "emptyDir": {"sizeLimit": "2Gi"}},
        ],
    }


#: A serving tier's namespace is this prefix and the tier's name (the pack's cold-start-budget takes it as
#: its ``tierNamespacePrefix``, so a Deployment of the same name in another namespace is not judged).
TIER_NAMESPACE_PREFIX = "serving-"


def namespace_name(tier: str) -> str:
    """The namespace of a serving tier."""
    return f"{TIER_NAMESPACE_PREFIX}{tier}"


def priority_class_name(tier: str) -> str:
    """The tier's PriorityClass (its value decides who is preempted under GPU pressure)."""
    return f"llm-{tier}"


def instance_selector(model: str) -> dict[str, str]:
    """The Deployment's and PDB's selector (a Deployment's is immutable: it stays the instance label)."""
    return {"app.kubernetes.io/instance": model}


def deployment(
    model: ServedModel,
    *,
    namespace: Any,
    tier: str,
    pool_purpose: str,
    priority_class: Any,
    api_key_secret: str | None = None,
    hf_token_secret: Any = None,
    pool: ModelPool | None = None,
    region: str | None = None,
) -> dict[str, Any]:
    """The model's Deployment (``metadata`` and ``spec``). ``namespace`` and ``priority_class`` are
    outputs in the program (the objects' names) and plain names in the capacity check. ``pool`` sets the
    await bound (:func:`cold_start_bound`); the capacity adapter, which works the pool out from these
    very objects, leaves it out (the bound does not change where a pod lands)."""
    labels = pod_labels(model.name, tier)
    return {
        "metadata": {"name": model.name, "namespace": namespace, "labels": labels, "annotations": deployment_annotations(model, pool)},
        "spec": {
            "selector": {"matchLabels": instance_selector(model.name)},
            "progressDeadlineSeconds": cold_start_bound(model, pool).total,
            "strategy": contract.rollout_strategy(model.rollout),
            "template": {
                "metadata": {"labels": labels, "annotations": pod_annotations(model)},
                "spec": pod_spec(model, pool_purpose=pool_purpose, priority_class=priority_class,
                                 api_key_secret=api_key_secret, hf_token_secret=hf_token_secret, region=region),
            },
        },
    }


def service_spec(model: ServedModel) -> dict[str, Any]:
    return {
        "selector": service_selector(model.name),
        # A numeric targetPort: the policy controller resolves it without any pod (a named one
        # is resolved through the Service's pods, so a model scaled to zero would have its
        # ClusterIP missing from the gateway's allow-list until a pod exists;
        # getMatchingServicePort, hasTargetPortBypass in the same file).
        "ports": [{"name": "http", "port": PORT, "targetPort": PORT, "protocol": "TCP"}],
        "trafficDistribution": "PreferClose",
    }


def disruption_budget_spec(model: ServedModel) -> dict[str, Any]:
    return {"maxUnavailable": 1, "selector": {"matchLabels": instance_selector(model.name)}}


def service_url(model: str, namespace: str) -> str:
    return f"http://{model}.{namespace}.svc.cluster.local:{PORT}/v1"


def quota_spec(quota: TierQuota) -> dict[str, Any]:
    """The tier's ResourceQuota: GPUs, CPU and memory its models may request together."""
    return {
        "hard": {
            f"requests.{contract.GPU_RESOURCE}": str(quota.gpus),
            "requests.cpu": quota.cpu,
            "requests.memory": quota.memory,
            "limits.memory": quota.memory,
        }
    }


# --- The serving image, pulled before a model's pod needs it --------------------------------------
#: The pre-pull DaemonSet's own namespace: not a serving namespace (no quota, no model traffic), Pod
#: Security ``restricted`` like them.
PREPULL_NAMESPACE = "image-prepull"
PREPULL_LABELS = {"app.kubernetes.io/name": "image-prepull", "app.kubernetes.io/part-of": "llm-platform"}
#: What each container may use: the init container only runs the shell's ``true`` (the image's ``/bin/sh``,
#: which the model server's preStop hook already relies on), the pause container sleeps.
PREPULL_RESOURCES = {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "32Mi"}}


def prepull_pools(tiers: Any, pool_purposes: dict[str, str]) -> dict[str, str]:
    """The GPU pools whose nodes get the vLLM image pre-pulled (pool name -> purpose): every pool a served
    model of ``tiers`` (the serving settings' tiers) selects; ``pool_purposes`` maps pool names to their
    purpose (``Settings.gpu_pool_facts``; a pool it does not know is left out, the settings name it). The
    program and the settings' capacity adapter both use it."""
    return {m.pool: pool_purposes[m.pool] for tier in tiers for m in tier.models if m.pool in pool_purposes}


def image_prepull_daemonset(image: str, pools: dict[str, str], *, name: str = "vllm") -> dict[str, Any]:
    """A DaemonSet (``metadata`` and ``spec``) that pulls ``image`` onto every node of ``pools`` (pool name ->
    purpose) as the node joins, so a model's pod scheduled there later starts without the pull.

    The image runs as an init container doing nothing (``/bin/sh -c true``); a pinned pause container then
    keeps the pod, so the image stays in use and the kubelet's image garbage collection leaves it on the
    node. Placement follows the scheduling contract: required node affinity on the pool label (only the
    pools that host models using the image) and each pool's tolerations; no GPU request (the pack's
    ``gpu-toleration-without-gpu`` exempts DaemonSets, node agents). Pod Security ``restricted``."""
    tolerations: list[dict[str, str]] = []
    for purpose in sorted(set(pools.values())):
        tolerations += [t for t in contract.workload_tolerations(purpose) if t not in tolerations]
    labels = {**PREPULL_LABELS, "app.kubernetes.io/instance": name}
    return {
        "metadata": {"name": f"{name}-image", "namespace": PREPULL_NAMESPACE, "labels": labels},
        "spec": {
            "selector": {"matchLabels": {"app.kubernetes.io/name": PREPULL_LABELS["app.kubernetes.io/name"],
                                         "app.kubernetes.io/instance": name}},
            # A new image version is pulled onto every node at once: nothing serves from these pods.
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "100%"}},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "automountServiceAccountToken": False,
                    "securityContext": pod_security_context(),
                    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                        {"matchExpressions": [{"key": contract.POOL_LABEL, "operator": "In", "values": sorted(pools)}]}
                    ]}}},
                    "tolerations": tolerations,
                    "terminationGracePeriodSeconds": 5,
                    "initContainers": [{
                        "name": "pull",
                        "image": image,
                        "command": ["/bin/sh", "-c", "true"],
                        "resources": PREPULL_RESOURCES,
                        "securityContext": container_security_context(),
                    }],
                    "containers": [{
                        "name": "hold",
                        "image": str(versions.PAUSE_IMAGE),
                        "resources": PREPULL_RESOURCES,
                        "securityContext": container_security_context(),
                    }],
                },
            },
        },
    }
