"""Resources in engine form (what the pack receives), each builder a compliant happy path.

Tests start from a builder and break one field with :func:`patch`, so each test states only what
it changes. Inputs are camelCase and shaped as the program's plan records them; the analyzer
marshals them exactly as the engine would (secrets wrapped, references downgraded).
"""

from __future__ import annotations

import copy
from typing import Any

STACK, PROJECT = "test", "llm-platform"
UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
SIG = "4dabf18193072939515e22adb298388d"
SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"
REF_SIG = "5cf8f73096256a8f31e491e813e4eb8e"
DELETE = object()

GPU_TAINT_KEY = "nvidia.com/gpu"
GPU = "nvidia.com/gpu"
GPU_TOLERATION = {"key": GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}
GPU_POOL_LABELS = {
    "node.kubernetes.io/purpose": "gpu-inference",
    "llm-platform.io/pool": "inference",
    "llm-platform.io/accelerator": "a10g",
    "llm-platform.io/gpu-memory-mib": "22888",
    "llm-platform.io/capacity-type": "spot",
    "nvidia.com/gpu.present": "true",
}
SYSTEM_LABELS = {
    "node.kubernetes.io/purpose": "system",
    "llm-platform.io/pool": "system",
    "llm-platform.io/capacity-type": "on-demand",
}

NODE_GROUP_SHAPES = ("eks:index:ManagedNodeGroup", "aws:eks/nodeGroup:NodeGroup")
WORKLOAD_KINDS = {
    "Deployment": ("kubernetes:apps/v1:Deployment", ("spec", "template")),
    "StatefulSet": ("kubernetes:apps/v1:StatefulSet", ("spec", "template")),
    "DaemonSet": ("kubernetes:apps/v1:DaemonSet", ("spec", "template")),
    "ReplicaSet": ("kubernetes:apps/v1:ReplicaSet", ("spec", "template")),
    "Job": ("kubernetes:batch/v1:Job", ("spec", "template")),
    "CronJob": ("kubernetes:batch/v1:CronJob", ("spec", "jobTemplate", "spec", "template")),
    "Pod": ("kubernetes:core/v1:Pod", ()),
}


def urn(type_: str, name: str, parent_types: tuple[str, ...] = ()) -> str:
    return f"urn:pulumi:{STACK}::{PROJECT}::{'$'.join((*parent_types, type_))}::{name}"


def resource(type_: str, name: str, inputs: dict[str, Any], *, parent: dict[str, Any] | None = None) -> dict[str, Any]:
    parent_types = tuple(parent["urn"].split("::")[2].split("$")) if parent else ()
    return {
        "urn": urn(type_, name, parent_types),
        "type": type_,
        "name": name,
        "parent": parent["urn"] if parent else "",
        "custom": not type_.startswith(("eks:index:", "llm-platform:")),
        "inputs": inputs,
    }


def secret(value: Any) -> dict[str, Any]:
    return {SIG: SECRET_SIG, "value": value}


def reference(target: dict[str, Any], id_: str | None = None) -> dict[str, Any]:
    ref = {SIG: REF_SIG, "urn": target["urn"]}
    if id_ is not None:
        ref["id"] = id_
    return ref


def _steps(path: str) -> list[str | int]:
    return [int(p) if p.isdigit() else p for p in path.split(".")]


def patch(res: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``res`` with ``inputs`` paths ("spec.template.spec.taints", "taints.0.effect") set,
    or removed with :data:`DELETE`; a path naming a key that contains dots is written as a tuple.
    Intermediate keys must exist, so a mistyped path fails instead of adding an unrelated field."""
    out = copy.deepcopy(res)
    for path, value in changes.items():
        steps = list(path) if isinstance(path, tuple) else _steps(path)
        node = out["inputs"]
        for step in steps[:-1]:
            node = node[step]
        if value is DELETE:
            if isinstance(node, dict):
                node.pop(steps[-1], None)
            else:
                del node[steps[-1]]
        else:
            node[steps[-1]] = copy.deepcopy(value)
    return out


# --- pools ------------------------------------------------------------------------------------


def gpu_node_group(shape: str = NODE_GROUP_SHAPES[0], name: str = "inference", **inputs: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "amiType": "AL2023_x86_64_NVIDIA",
        "instanceTypes": ["g5.xlarge", "g5.2xlarge"],
        "capacityType": "SPOT",
        "labels": dict(GPU_POOL_LABELS),
        "taints": [{"key": GPU_TAINT_KEY, "value": "true", "effect": "NO_SCHEDULE"}],
        "scalingConfig": {"minSize": 0, "desiredSize": 0, "maxSize": 2},
        "launchTemplate": {"id": "lt-0123456789abcdef0", "version": "1"},
    }
    if shape == "eks:index:ManagedNodeGroup":
        base["enableIMDSv2"] = True
    else:
        base.update(clusterName="llm-platform-test", nodeRoleArn="arn:aws:iam::123456789012:role/gpu")
    base.update(inputs)
    return resource(shape, name, base)


def system_node_group(shape: str = NODE_GROUP_SHAPES[0], name: str = "system", **inputs: Any) -> dict[str, Any]:
    base = {
        "amiType": "AL2023_x86_64_STANDARD",
        "instanceTypes": ["m7i.xlarge"],
        "capacityType": "ON_DEMAND",
        "labels": dict(SYSTEM_LABELS),
        "taints": [],
        "scalingConfig": {"minSize": 2, "desiredSize": 2, "maxSize": 3},
        "launchTemplate": {"id": "lt-0fedcba9876543210", "version": "1"},
        **inputs,
    }
    return resource(shape, name, base)


def launch_template(name: str = "nodes-lt", **inputs: Any) -> dict[str, Any]:
    base = {
        "metadataOptions": {"httpEndpoint": "enabled", "httpTokens": "required", "httpPutResponseHopLimit": 1},
        "blockDeviceMappings": [
            {"deviceName": "/dev/xvda", "ebs": {"volumeSize": 200, "volumeType": "gp3", "encrypted": "true"}}
        ],
        **inputs,
    }
    return resource("aws:ec2/launchTemplate:LaunchTemplate", name, base)


def nodepool(name: str = "gpu-inference", **spec: Any) -> dict[str, Any]:
    base_spec: dict[str, Any] = {
        "template": {
            "metadata": {"labels": {**GPU_POOL_LABELS, "llm-platform.io/pool": name, "llm-platform.io/capacity-type": "on-demand"}},
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "gpu"},
                "requirements": [
                    {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["g5"]},
                    {"key": "karpenter.k8s.aws/instance-size", "operator": "In", "values": ["xlarge", "2xlarge"]},
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                ],
                "taints": [{"key": GPU_TAINT_KEY, "value": "true", "effect": "NoSchedule"}],
                "expireAfter": "720h",
            },
        },
        "limits": {GPU: "4"},
        "disruption": {
            "consolidationPolicy": "WhenEmpty",
            "consolidateAfter": "5m",
            "budgets": [{"nodes": "10%"}, {"nodes": "0", "schedule": "0 9 * * mon-fri", "duration": "8h"}],
        },
        "weight": 50,
        **spec,
    }
    return resource(
        "kubernetes:karpenter.sh/v1:NodePool",
        name,
        {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name}, "spec": base_spec},
    )


def ec2nodeclass(name: str = "gpu", **spec: Any) -> dict[str, Any]:
    base_spec = {
        "amiSelectorTerms": [{"alias": "al2023@v20251117"}],
        "role": "karpenter-node",
        "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "llm-platform-test"}}],
        "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "llm-platform-test"}}],
        "metadataOptions": {"httpTokens": "required", "httpPutResponseHopLimit": 1},
        "blockDeviceMappings": [
            {"deviceName": "/dev/xvda", "rootVolume": True, "ebs": {"volumeSize": "200Gi", "volumeType": "gp3", "encrypted": True}}
        ],
        **spec,
    }
    return resource(
        "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass",
        name,
        {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": name}, "spec": base_spec},
    )


# --- workloads --------------------------------------------------------------------------------


def container(name: str = "vllm", image: str = "vllm/vllm-openai:v0.11.0", gpus: int | None = 1) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": image, "resources": {"requests": {"cpu": "4"}, "limits": {"memory": "32Gi"}}}
    if gpus is not None:
        c["resources"]["limits"][GPU] = gpus
    return c


def pod_spec(*, gpus: int | None = 1, tolerate: bool = True, selector: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [container(gpus=gpus)]}
    if tolerate:
        spec["tolerations"] = [dict(GPU_TOLERATION)]
    spec["nodeSelector"] = (
        {"node.kubernetes.io/purpose": "gpu-inference"} if selector is None else selector
    )
    return spec


def workload(
    kind: str = "Deployment",
    name: str = "vllm",
    *,
    namespace: str = "serving",
    gpus: int | None = 1,
    tolerate: bool = True,
    selector: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A workload of ``kind`` whose pod template follows the GPU contract (with ``gpus`` GPUs)."""
    type_, path = WORKLOAD_KINDS[kind]
    template = {
        "metadata": {"labels": {"app": name}, "annotations": dict(annotations or {})},
        "spec": pod_spec(gpus=gpus, tolerate=tolerate, selector=selector),
    }
    metadata = {"name": name, "namespace": namespace}
    if not path:
        return resource(type_, name, {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": template["spec"]})
    inputs: dict[str, Any] = {"metadata": metadata}
    node = inputs
    for step in path[:-1]:
        node = node.setdefault(step, {})
    node[path[-1]] = template
    return resource(type_, name, inputs)


def template_path(kind: str) -> str:
    """Dotted path of the pod spec inside a workload of ``kind``, for :func:`patch`."""
    return ".".join((*WORKLOAD_KINDS[kind][1], "spec"))


def resource_quota(namespace: str = "serving", hard: dict[str, Any] | None = None) -> dict[str, Any]:
    return resource(
        "kubernetes:core/v1:ResourceQuota",
        f"{namespace}-gpu",
        {"metadata": {"name": "gpu", "namespace": namespace}, "spec": {"hard": hard or {f"requests.{GPU}": "4"}}},
    )


# --- charts -----------------------------------------------------------------------------------


def helm_release(
    chart: str = "nvidia-device-plugin",
    version: Any = "0.20.0",
    values: dict[str, Any] | None = None,
    repo: str = "https://nvidia.github.io/k8s-device-plugin",
    name: str | None = None,
) -> dict[str, Any]:
    inputs: dict[str, Any] = {
        "chart": chart,
        "repositoryOpts": {"repo": repo},
        "values": values if values is not None else {
            "image": {"repository": "nvcr.io/nvidia/k8s-device-plugin", "tag": "v0.20.0"},
            "tolerations": [dict(GPU_TOLERATION), {"key": "CriticalAddonsOnly", "operator": "Exists"}],
        },
    }
    if version is not None:
        inputs["version"] = version
    return resource("kubernetes:helm.sh/v3:Release", name or chart, inputs)


def helm_chart_v4(chart: str, version: Any = None, values: dict[str, Any] | None = None, name: str = "chart") -> dict[str, Any]:
    inputs: dict[str, Any] = {"chart": chart, "values": values or {}}
    if version is not None:
        inputs["version"] = version
    return resource("kubernetes:helm.sh/v4:Chart", name, inputs)


# --- clusters ---------------------------------------------------------------------------------


def eks_cluster(**inputs: Any) -> dict[str, Any]:
    base = {
        "authenticationMode": "API",
        "endpointPrivateAccess": True,
        "endpointPublicAccess": False,
        "encryptionConfigKeyArn": "arn:aws:kms:us-east-1:123456789012:key/abc",
        "skipDefaultNodeGroup": True,
        "createOidcProvider": True,
        "enabledClusterLogTypes": ["api", "audit"],
        **inputs,
    }
    return resource("eks:index:Cluster", "cluster", base)


def aws_cluster(**vpc: Any) -> dict[str, Any]:
    return resource(
        "aws:eks/cluster:Cluster",
        "cluster-eksCluster",
        {
            "roleArn": "arn:aws:iam::123456789012:role/eks",
            "vpcConfig": {"endpointPrivateAccess": True, "endpointPublicAccess": False, "subnetIds": ["subnet-1"], **vpc},
            "encryptionConfig": {"provider": {"keyArn": "arn:aws:kms:us-east-1:123456789012:key/abc"}, "resources": ["secrets"]},
        },
    )


# --- autoscaling ------------------------------------------------------------------------------


def scaled_object(query: str = "sum(vllm:num_requests_waiting{model_name=\"llama\"})", **spec: Any) -> dict[str, Any]:
    base_spec = {
        "scaleTargetRef": {"name": "vllm"},
        "minReplicaCount": 1,
        "maxReplicaCount": 4,
        "triggers": [
            {
                "type": "prometheus",
                "metadata": {"serverAddress": "http://prometheus.monitoring:9090", "query": query, "threshold": "5"},
            }
        ],
        **spec,
    }
    return resource(
        "kubernetes:keda.sh/v1alpha1:ScaledObject",
        "vllm",
        {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject", "metadata": {"namespace": "serving"}, "spec": base_spec},
    )


def prometheus_rule(*exprs: str) -> dict[str, Any]:
    rules = [{"alert": f"A{i}", "expr": e} for i, e in enumerate(exprs)]
    return resource(
        "kubernetes:monitoring.coreos.com/v1:PrometheusRule",
        "vllm-alerts",
        {"metadata": {"namespace": "monitoring"}, "spec": {"groups": [{"name": "vllm", "rules": rules}]}},
    )


# --- workloads with several pod templates ------------------------------------------------------

LWS = "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet"
RAY_CLUSTER, RAY_JOB, RAY_SERVICE = (f"kubernetes:ray.io/v1:{k}" for k in ("RayCluster", "RayJob", "RayService"))


def _template(name: str, *, gpus: int | None, tolerate: bool, image: str = "vllm/vllm-openai:v0.11.0") -> dict[str, Any]:
    spec = pod_spec(gpus=gpus, tolerate=tolerate)
    spec["containers"][0]["image"] = image
    return {"metadata": {"labels": {"app": name}}, "spec": spec}


def _ray_cluster_spec(gpus: int | None, tolerate: bool) -> dict[str, Any]:
    """A head on CPU nodes (no GPU, no toleration) and two worker groups holding the GPUs."""
    return {
        "rayVersion": "2.49.0",
        "headGroupSpec": {"rayStartParams": {}, "template": _template("head", gpus=None, tolerate=False)},
        "workerGroupSpecs": [
            {"groupName": "small", "replicas": 1, "minReplicas": 0, "maxReplicas": 2, "rayStartParams": {},
             "template": _template("small", gpus=1, tolerate=True)},
            {"groupName": "big", "replicas": 1, "minReplicas": 0, "maxReplicas": 2, "rayStartParams": {},
             "template": _template("big", gpus=gpus, tolerate=tolerate)},
        ],
    }


#: Kind -> (builder of a resource whose last GPU template has ``gpus``/``tolerate``, dotted path of that pod spec).
MULTI_TEMPLATE_KINDS = {
    "LeaderWorkerSet": (
        lambda gpus, tolerate: resource(LWS, "lws", {
            "metadata": {"name": "lws", "namespace": "serving"},
            "spec": {"replicas": 1, "leaderWorkerTemplate": {
                "size": 2,
                "leaderTemplate": _template("leader", gpus=1, tolerate=True),
                "workerTemplate": _template("worker", gpus=gpus, tolerate=tolerate),
            }},
        }),
        "spec.leaderWorkerTemplate.workerTemplate.spec",
    ),
    "RayCluster": (
        lambda gpus, tolerate: resource(RAY_CLUSTER, "ray", {
            "metadata": {"name": "ray", "namespace": "serving"}, "spec": _ray_cluster_spec(gpus, tolerate),
        }),
        "spec.workerGroupSpecs.1.template.spec",
    ),
    "RayJob": (
        lambda gpus, tolerate: resource(RAY_JOB, "rayjob", {
            "metadata": {"name": "rayjob", "namespace": "serving"},
            "spec": {"entrypoint": "python run.py", "rayClusterSpec": _ray_cluster_spec(gpus, tolerate),
                     "submitterPodTemplate": _template("submitter", gpus=None, tolerate=False)},
        }),
        "spec.rayClusterSpec.workerGroupSpecs.1.template.spec",
    ),
    "RayService": (
        lambda gpus, tolerate: resource(RAY_SERVICE, "rayservice", {
            "metadata": {"name": "rayservice", "namespace": "serving"},
            "spec": {"serveConfigV2": "applications: []", "rayClusterConfig": _ray_cluster_spec(gpus, tolerate)},
        }),
        "spec.rayClusterConfig.workerGroupSpecs.1.template.spec",
    ),
}


def multi_workload(kind: str, *, gpus: int | None = 1, tolerate: bool = True) -> dict[str, Any]:
    return MULTI_TEMPLATE_KINDS[kind][0](gpus, tolerate)


def auto_mode_nodepool(name: str = "auto-gpu", requirements: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """An EKS Auto Mode NodePool (built-in ``eks.amazonaws.com`` NodeClass) selecting by Auto Mode labels."""
    res = nodepool(name)
    return patch(res, {
        "spec.template.spec.nodeClassRef": {"group": "eks.amazonaws.com", "kind": "NodeClass", "name": "default"},
        "spec.template.spec.requirements": requirements if requirements is not None else [
            {"key": "eks.amazonaws.com/instance-family", "operator": "In", "values": ["g5"]},
            {"key": "eks.amazonaws.com/instance-size", "operator": "In", "values": ["xlarge", "2xlarge"]},
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
        ],
    })
