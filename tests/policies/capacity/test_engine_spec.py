"""The engine adapter (policies/capacity/engine.py) as a specification: what it reads from hand-written
resources in engine form, each figure from the API's own defaults and the catalog
(policies/instance_catalog.json: g5.xlarge, .2xlarge, .4xlarge 1 GPU; .12xlarge, .24xlarge 4; .48xlarge 8).

- pulumi-eks ManagedNodeGroup / aws.eks.NodeGroup: ``instanceTypes`` defaults to t3.medium, scaling to
  minSize 1, maxSize 2 (EKS CreateNodegroup defaults), ``desiredSize`` to minSize; taint effects in EKS
  spelling (``NO_SCHEDULE``); who adds nodes: Cluster Autoscaler when its release is present, else
  fixed nodes when min = max, else nobody;
- Karpenter v1 NodePool: the catalog types its requirements admit (In, NotIn, Gt, Lt, DoesNotExist),
  GPU types only once the pool is a GPU pool; ``spec.replicas`` makes it static; ``eks.amazonaws.com``
  nodeClassRef makes it an Auto Mode pool; capacity type on-demand when not required;
- workloads: Deployment replicas default 1, Job/CronJob ``parallelism``, LeaderWorkerSet replicas x
  group size; a ScaledObject's ``minReplicaCount`` default 0 and ``maxReplicaCount`` default 100 (KEDA's
  defaults); surge by the Deployment's strategy (25% rounded up by default);
- ResourceQuota ``spec.hard``: CPU in millicores, memory in MiB, other quantities as numbers.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from policies.capacity.engine import cluster_from_resources

CA_RELEASE = ("kubernetes:helm.sh/v3:Release", "autoscaler", {"chart": "cluster-autoscaler", "version": "9.46.0"})
KARPENTER_RELEASE = ("kubernetes:helm.sh/v3:Release", "karpenter", {"chart": "oci://public.ecr.aws/karpenter/karpenter",
                                                                   "version": "1.8.0"})
G5 = ["g5.xlarge", "g5.2xlarge", "g5.4xlarge", "g5.8xlarge", "g5.12xlarge", "g5.16xlarge", "g5.24xlarge", "g5.48xlarge"]


def resource(type_: str, name: str, props: dict, parent: str = "") -> SimpleNamespace:
    return SimpleNamespace(type=type_, name=name, urn=f"urn:{type_}::{name}", parent=parent, props=props)


def cluster(*specs):
    return cluster_from_resources([resource(*spec) for spec in specs])


def node_group(name: str, **props) -> tuple:
    return ("eks:index:ManagedNodeGroup", name, props)


def node_pool(name: str, requirements: list, **spec) -> tuple:
    spec.setdefault("template", {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                                              "name": "gpu"}}})
    spec["template"]["spec"]["requirements"] = requirements
    return ("kubernetes:karpenter.sh/v1:NodePool", name, {"metadata": {"name": name}, "spec": spec})


def family(*families: str) -> dict:
    return {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": list(families)}


# --- managed node groups ---------------------------------------------------------------------------


def test_a_managed_group_with_nothing_set_takes_the_eks_defaults():
    (pool,) = cluster(node_group("bare")).pools
    # t3.medium, no type of the catalog: no instances to place on
    assert (pool.name, pool.kind, pool.instances) == ("bare", "managed node group", [])
    assert (pool.min_nodes, pool.max_nodes, pool.desired_nodes, pool.capacity_source) == (1, 2, 1, None)


@pytest.mark.parametrize("scaling, with_autoscaler, source", [
    ({"minSize": 0, "maxSize": 4}, True, "Cluster Autoscaler"),
    ({"minSize": 0, "maxSize": 4}, False, None),
    ({"minSize": 3, "maxSize": 3}, False, "fixed nodes"),
    ({"minSize": 3, "maxSize": 3}, True, "Cluster Autoscaler"),
])
def test_who_adds_a_managed_groups_nodes(scaling, with_autoscaler, source):
    specs = [node_group("gpu", nodeGroupName="inference", instanceTypes=["g5.2xlarge", "g5.4xlarge"], scalingConfig=scaling)]
    if with_autoscaler:
        specs.append(CA_RELEASE)
    (pool,) = cluster(*specs).pools
    assert (pool.name, pool.capacity_source) == ("inference", source)
    assert (pool.min_nodes, pool.max_nodes, pool.desired_nodes) == (scaling["minSize"], scaling["maxSize"],
                                                                   scaling["minSize"])
    assert [i.name for i in pool.instances] == ["g5.2xlarge", "g5.4xlarge"]


def test_a_managed_groups_desired_size_taints_labels_and_disk():
    (pool,) = cluster(node_group(
        "gpu", instanceTypes=["g5.xlarge"], scalingConfig={"minSize": 1, "desiredSize": 2, "maxSize": 5},
        taints=[{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"},
                {"key": "dedicated", "effect": "PREFER_NO_SCHEDULE"}],
        labels={"llm-platform.io/pool": "gpu"}, diskSize=200)).pools
    assert pool.desired_nodes == 2
    assert [(t.key, t.value, t.effect) for t in pool.taints] == [("nvidia.com/gpu", "true", "NoSchedule"),
                                                                 ("dedicated", "", "PreferNoSchedule")]
    assert pool.labels == {"llm-platform.io/pool": "gpu"} and pool.disk_gib == 200


def test_a_pulumi_eks_group_and_the_aws_node_group_under_it_are_one_pool():
    """The aws.eks.NodeGroup holds the group's real inputs; the pulumi-eks component above it is skipped."""
    group = resource("eks:index:ManagedNodeGroup", "gpu", {"instanceTypes": ["g5.xlarge"]})
    inner = resource("aws:eks/nodeGroup:NodeGroup", "gpu", {"instanceTypes": ["g5.xlarge"]}, parent=group.urn)
    lone = resource("aws:eks/nodeGroup:NodeGroup", "lone", {"instanceTypes": ["m7i.xlarge"]})
    pools = cluster_from_resources([group, inner, lone]).pools
    assert sorted((p.name, p.key) for p in pools) == [("gpu", inner.urn), ("lone", lone.urn)]


# --- Karpenter and Auto Mode NodePools -----------------------------------------------------------------


@pytest.mark.parametrize("requirement, types", [
    ({"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "Gt", "values": ["1"]},
     ["g5.12xlarge", "g5.24xlarge", "g5.48xlarge"]),
    ({"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "Gt", "values": ["4"]}, ["g5.48xlarge"]),
    ({"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "Lt", "values": ["4"]},
     ["g5.xlarge", "g5.2xlarge", "g5.4xlarge", "g5.8xlarge", "g5.16xlarge"]),
    ({"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "Lt", "values": ["5"]},
     ["g5.xlarge", "g5.2xlarge", "g5.4xlarge", "g5.8xlarge", "g5.12xlarge", "g5.16xlarge", "g5.24xlarge"]),
    ({"key": "karpenter.k8s.aws/instance-size", "operator": "In", "values": ["2xlarge", "12xlarge"]},
     ["g5.2xlarge", "g5.12xlarge"]),
    ({"key": "karpenter.k8s.aws/instance-size", "operator": "NotIn", "values": ["xlarge", "48xlarge"]},
     ["g5.2xlarge", "g5.4xlarge", "g5.8xlarge", "g5.12xlarge", "g5.16xlarge", "g5.24xlarge"]),
    ({"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "DoesNotExist"}, []),
])
def test_a_nodepool_offers_the_catalog_types_its_requirements_admit(requirement, types):
    (pool,) = cluster(KARPENTER_RELEASE, node_pool("gpu", [family("g5"), requirement])).pools
    assert [i.name for i in pool.instances] == types


def test_a_gpu_nodepool_drops_the_cpu_types_its_requirements_also_admit():
    """g5 and m7i admitted: a pool with any GPU type (or a GPU limit) is a GPU pool of its GPU types."""
    (pool,) = cluster(KARPENTER_RELEASE, node_pool("mixed", [family("g5", "m7i")])).pools
    assert [i.name for i in pool.instances] == G5
    (cpu,) = cluster(KARPENTER_RELEASE, node_pool("cpu", [family("m7i")])).pools
    assert cpu.instances and not any(i.gpus for i in cpu.instances)


def test_a_karpenter_nodepool_as_the_pack_reads_it():
    (pool,) = cluster(KARPENTER_RELEASE, node_pool(
        "gpu-inference", [family("g5"), {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]},
                          {"key": "llm-platform.io/team", "operator": "Exists"}],
        limits={"nvidia.com/gpu": "8", "nodes": 3})).pools
    assert (pool.name, pool.kind, pool.capacity_source, pool.karpenter) == (
        "gpu-inference", "Karpenter NodePool", "Karpenter", True)
    assert (pool.gpu_limit, pool.node_limit, pool.min_nodes, pool.static_nodes) == (8, 3, 0, None)
    assert pool.labels == {"karpenter.sh/nodepool": "gpu-inference"}
    assert pool.flexible == {"topology.kubernetes.io/zone": None, "kubernetes.io/hostname": None,
                             "karpenter.sh/capacity-type": frozenset({"spot", "on-demand"}),
                             "llm-platform.io/team": None}


def test_without_a_capacity_type_requirement_karpenter_launches_on_demand():
    (pool,) = cluster(KARPENTER_RELEASE, node_pool("gpu", [family("g5")])).pools
    assert pool.flexible["karpenter.sh/capacity-type"] == frozenset({"on-demand"})


def test_a_nodepool_without_karpenter_installed_has_no_one_to_add_nodes():
    (pool,) = cluster(node_pool("gpu", [family("g5")])).pools
    assert pool.capacity_source is None


def test_a_static_nodepool_keeps_its_replicas():
    (pool,) = cluster(KARPENTER_RELEASE, node_pool("warm", [family("g5")], replicas=2)).pools
    assert (pool.capacity_source, pool.static_nodes, pool.min_nodes) == ("fixed nodes", 2, 2)


def test_an_auto_mode_nodepool():
    spec = node_pool("auto-gpu", [family("g5")], template={"spec": {"nodeClassRef": {
        "group": "eks.amazonaws.com", "kind": "NodeClass", "name": "default"}}})
    (pool,) = cluster(spec).pools
    assert (pool.kind, pool.capacity_source, pool.karpenter) == ("Auto Mode NodePool", "EKS Auto Mode", False)
    assert pool.labels == {"karpenter.sh/nodepool": "auto-gpu", "eks.amazonaws.com/compute-type": "auto"}


@pytest.mark.parametrize("node_class_spec, disk_gib", [
    ({"blockDeviceMappings": [{"deviceName": "/dev/xvda", "rootVolume": True, "ebs": {"volumeSize": "200Gi"}}]}, 200),
    ({"blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "80Gi"}},
                              {"deviceName": "/dev/xvdb", "rootVolume": True, "ebs": {"volumeSize": "500Gi"}}]}, 500),
    ({"blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "80Gi"}}]}, 80),
    ({"blockDeviceMappings": [{"deviceName": "/dev/xvda", "rootVolume": True, "ebs": {"volumeSize": "1Ti"}}]}, 1024),
    ({"instanceStorePolicy": "RAID0",
      "blockDeviceMappings": [{"deviceName": "/dev/xvda", "rootVolume": True, "ebs": {"volumeSize": "200Gi"}}]}, None),
    ({"blockDeviceMappings": []}, None),
])
def test_a_nodepools_disk_is_its_node_class_root_volume(node_class_spec, disk_gib):
    node_class = ("kubernetes:karpenter.k8s.aws/v1:EC2NodeClass", "gpu", {"metadata": {"name": "gpu"}, "spec": node_class_spec})
    (pool,) = cluster(KARPENTER_RELEASE, node_class, node_pool("gpu", [family("g5")])).pools
    assert pool.disk_gib == disk_gib


def test_a_node_class_max_pods_reaches_its_pools():
    node_class = ("kubernetes:karpenter.k8s.aws/v1:EC2NodeClass", "gpu", {"metadata": {"name": "gpu"},
                                                                          "spec": {"kubelet": {"maxPods": 110}}})
    (pool,) = cluster(KARPENTER_RELEASE, node_class, node_pool("gpu", [family("g5")])).pools
    assert pool.max_pods == 110


# --- workloads --------------------------------------------------------------------------------------------

POD = {"containers": [{"name": "app", "image": "app:1", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}


def workload(type_: str, name: str, spec: dict) -> tuple:
    return (type_, name, {"metadata": {"name": name, "namespace": "apps"}, "spec": spec})


def scaled_object(target: str, kind: str = "Deployment", **spec) -> tuple:
    return ("kubernetes:keda.sh/v1alpha1:ScaledObject", f"{target}-scaler", {
        "metadata": {"name": target, "namespace": "apps"},
        "spec": {"scaleTargetRef": {"name": target, "kind": kind}, "triggers": [
            {"type": "prometheus", "metadata": {"query": "sum(gateway_requests_waiting)", "threshold": "4"}}], **spec}})


@pytest.mark.parametrize("spec, replicas", [
    (workload("kubernetes:apps/v1:Deployment", "web", {"template": {"spec": POD}}), (1, 1, 1)),
    (workload("kubernetes:apps/v1:Deployment", "web", {"replicas": 8, "template": {"spec": POD}}), (8, 8, 2)),
    (workload("kubernetes:apps/v1:Deployment", "web", {"replicas": 0, "template": {"spec": POD}}), (0, 0, 0)),
    (workload("kubernetes:apps/v1:StatefulSet", "db", {"replicas": 3, "template": {"spec": POD}}), (3, 3, 0)),
    (workload("kubernetes:batch/v1:Job", "train", {"parallelism": 4, "template": {"spec": POD}}), (4, 4, 0)),
    (workload("kubernetes:batch/v1:Job", "once", {"template": {"spec": POD}}), (1, 1, 0)),
    (workload("kubernetes:batch/v1:CronJob", "nightly", {"jobTemplate": {"spec": {"parallelism": 3, "template": {"spec": POD}}}}),
     (3, 3, 0)),
    (workload("kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet", "big",
              {"replicas": 2, "leaderWorkerTemplate": {"size": 4, "workerTemplate": {"spec": POD}}}), (8, 8, 0)),
    (workload("kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet", "one",
              {"leaderWorkerTemplate": {"size": 3, "workerTemplate": {"spec": POD}}}), (3, 3, 0)),
])
def test_pods_each_workload_kind_asks_for(spec, replicas):
    (found,) = cluster(spec).workloads
    assert (found.min_replicas, found.max_replicas, found.surge) == replicas
    assert (found.requests.cpu_m, found.requests.memory_mib, found.requests.pods) == (1000, 1024, 1)


@pytest.mark.parametrize("scaler, bounds", [
    ({}, (0, 100, True, 25)),
    ({"minReplicaCount": 2, "maxReplicaCount": 6}, (2, 6, False, 2)),
    ({"minReplicaCount": 0, "maxReplicaCount": 3}, (0, 3, True, 1)),
    # parked: a ScaledObject capped at 0 asks for no pods, and a rollout of none adds none
    ({"minReplicaCount": 0, "maxReplicaCount": 0}, (0, 0, True, 0)),
])
def test_a_scaled_object_sets_a_deployments_bounds(scaler, bounds):
    """KEDA's defaults: minReplicaCount 0, maxReplicaCount 100; surge 25% of the maximum, rounded up."""
    (found,) = cluster(workload("kubernetes:apps/v1:Deployment", "api", {"replicas": 5, "template": {"spec": POD}}),
                       scaled_object("api", **scaler)).workloads
    assert (found.min_replicas, found.max_replicas, found.scale_to_zero, found.surge) == bounds
    assert (found.wake_signal, found.wake_detail) == (True, "prometheus on gateway_requests_waiting")


def test_a_scaled_object_binds_by_namespace_kind_and_name():
    deployment = workload("kubernetes:apps/v1:Deployment", "api", {"replicas": 5, "template": {"spec": POD}})
    other_kind = scaled_object("api", kind="StatefulSet", minReplicaCount=0, maxReplicaCount=2)
    (found,) = cluster(deployment, other_kind).workloads
    assert (found.min_replicas, found.max_replicas) == (5, 5)


@pytest.mark.parametrize("strategy, surge", [
    ({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}, 0),
    ({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "50%"}}, 2),
    ({"type": "Recreate"}, 0),
])
def test_a_deployments_strategy_sets_its_surge(strategy, surge):
    (found,) = cluster(workload("kubernetes:apps/v1:Deployment", "api",
                                {"replicas": 3, "strategy": strategy, "template": {"spec": POD}})).workloads
    assert found.surge == surge


# --- vLLM servers ------------------------------------------------------------------------------------------


def vllm(args: list[str], annotations: dict | None = None, command: list[str] | None = None) -> tuple:
    container = {"name": "vllm", "image": "vllm/vllm-openai:v0.33.0", "args": args,
                 "resources": {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}}
    if command:
        container["command"] = command
    template = {"metadata": {"annotations": annotations or {}}, "spec": {"containers": [container]}}
    return workload("kubernetes:apps/v1:Deployment", "llm", {"template": template})


def served(spec):
    (found,) = cluster(spec).workloads
    return found.model and (found.model.architecture.name, found.model.max_model_len, found.model.tensor_parallel,
                            found.model.gpu_memory_utilization)


def test_a_catalog_model_with_vllms_defaults():
    """No --max-model-len: the model's own context (131072 for Llama 3.1); TP 1; utilization 0.9."""
    assert served(vllm(["--model", "llama-3.1-8b-instruct"])) == ("llama-3.1-8b-instruct", 131072, 1, 0.9)


def test_engine_arguments_size_the_model():
    assert served(vllm(["--model=/models/llama-3.1-8b-instruct/", "--max-model-len", "8192",
                        "--tensor-parallel-size", "2", "--gpu-memory-utilization", "0.85"])) == (
        "llama-3.1-8b-instruct", 8192, 2, 0.85)


def test_a_shell_command_line_is_split_into_its_arguments():
    assert served(vllm(["vllm serve --model qwen2.5-7b-instruct --max-model-len 16384"], command=["/bin/sh", "-c"])) == (
        "qwen2.5-7b-instruct", 16384, 1, 0.9)


def test_a_hugging_face_id_is_looked_up_by_id_not_by_its_last_segment():
    assert served(vllm(["--model", "meta-llama/Llama-3.1-8B-Instruct"])) == ("llama-3.1-8b-instruct", 131072, 1, 0.9)
    assert served(vllm(["--model", "someone/llama-3.1-8b-instruct"])) is None


def test_the_architecture_annotation_wins_over_the_model_argument():
    annotation = ('{"name": "tiny", "parameters": 1000000000, "vocabSize": 32000, "hiddenSize": 2048, '
                  '"layers": 16, "kvHeads": 8, "headDim": 64, "quantization": "bf16", "maxPositionEmbeddings": 4096}')
    assert served(vllm(["--model", "llama-3.1-8b-instruct"], {"llm-platform.io/model-architecture": annotation})) == (
        "tiny", 4096, 1, 0.9)


def test_a_container_that_is_no_model_server_has_no_model():
    assert served(workload("kubernetes:apps/v1:Deployment", "web", {"template": {"spec": POD}})) is None


# --- quotas --------------------------------------------------------------------------------------------------


def test_a_quota_in_the_units_the_simulation_counts():
    (quota,) = cluster(("kubernetes:core/v1:ResourceQuota", "cap", {
        "metadata": {"name": "serving-capacity", "namespace": "serving-batch"},
        "spec": {"hard": {"requests.cpu": "16", "limits.cpu": "500m", "cpu": 2, "requests.memory": "64Gi",
                          "limits.memory": "512Mi", "memory": "1Gi", "requests.nvidia.com/gpu": "4", "pods": "10",
                          "count/jobs.batch": "many"}}})).quotas
    assert (quota.namespace, quota.name) == ("serving-batch", "serving-capacity")
    assert quota.hard == {"requests.cpu": 16000, "limits.cpu": 500, "cpu": 2000, "requests.memory": 65536,
                          "limits.memory": 512, "memory": 1024, "requests.nvidia.com/gpu": 4, "pods": 10}


def test_a_quota_without_a_namespace_is_in_default():
    (quota,) = cluster(("kubernetes:core/v1:ResourceQuota", "cap", {"spec": {"hard": {"pods": "5"}}})).quotas
    assert (quota.namespace, quota.name) == ("default", "cap")
