"""LeaderWorkerSet groups in the capacity model, by LeaderWorkerSet's own rules (kubernetes-sigs/lws v0.10.0):

- the scale subresource counts groups (charts/lws/crds: ``specReplicasPath: .spec.replicas``), so a
  ScaledObject's bounds are groups of ``size`` pods; the textbook reading (KEDA replicas are pods) asks
  for a fraction of the GPUs;
- a rolling update's maxSurge and maxUnavailable count groups, after the CRD's defaults (maxSurge 0,
  maxUnavailable 1), and the controller caps maxSurge at the replicas
  (pkg/controllers/leaderworkerset_controller.go, ``rollingUpdateParameters``), where a Deployment would not;
- a group serves only whole: a pool whose ceiling holds part of one group serves nothing
  (pkg/controllers/pod_controller.go, ``handleRestartPolicy``), reported as such, not as a shortfall;
- vLLM's engine arguments are on the leader (``vllm serve`` there, the workers only join Ray).
Figures: p5.48xlarge has 8 H100 of 81920 MiB (policies/instance_catalog.json)."""

from __future__ import annotations

from types import SimpleNamespace

from policies.capacity.engine import cluster_from_resources
from policies.capacity.simulate import simulate

LWS = "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet"
KARPENTER = ("kubernetes:helm.sh/v3:Release", "karpenter", {"chart": "oci://public.ecr.aws/karpenter/karpenter",
                                                           "version": "1.14.1"})
GPU_POD = {
    "nodeSelector": {"karpenter.sh/nodepool": "h100"},
    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    "containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.33.0",
                    "resources": {"requests": {"cpu": "90", "memory": "900Gi"},
                                  "limits": {"nvidia.com/gpu": "8", "memory": "900Gi"}}}],
}


def resource(type_: str, name: str, props: dict) -> SimpleNamespace:
    return SimpleNamespace(type=type_, name=name, urn=f"urn:{type_}::{name}", parent="", props=props)


def pool(gpu_limit: int) -> tuple:
    return ("kubernetes:karpenter.sh/v1:NodePool", "h100", {"metadata": {"name": "h100"}, "spec": {
        "limits": {"nvidia.com/gpu": str(gpu_limit)},
        "template": {"spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "gpu"},
            "taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}],
            "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["p5.48xlarge"]}],
        }}}})


def group(size: int = 2, rollout: dict | None = None, leader: dict | None = None, worker: dict | None = None) -> tuple:
    template = {"size": size, "workerTemplate": {"spec": worker or GPU_POD}}
    if leader is not None:
        template["leaderTemplate"] = {"spec": leader}
    spec = {"leaderWorkerTemplate": template, **({"rolloutStrategy": rollout} if rollout else {})}
    return (LWS, "big", {"metadata": {"name": "big", "namespace": "serving"}, "spec": spec})


def scaler(low: int, high: int) -> tuple:
    return ("kubernetes:keda.sh/v1alpha1:ScaledObject", "big-scaler", {
        "metadata": {"name": "big", "namespace": "serving"},
        "spec": {"scaleTargetRef": {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "name": "big"},
                 "minReplicaCount": low, "maxReplicaCount": high,
                 "triggers": [{"type": "prometheus", "metadata": {"query": "sum(gateway_waiting)", "threshold": "1"}}]}})


def cluster(*specs):
    return cluster_from_resources([resource(*spec) for spec in specs])


def test_keda_bounds_on_a_leaderworkerset_are_groups_of_size_pods():
    (found,) = cluster(group(size=2), scaler(1, 3)).workloads
    # textbook (replicas are pods): 1..3 pods; LeaderWorkerSet's scale subresource: 1..3 groups of 2
    assert (found.min_replicas, found.max_replicas, found.group_size) == (2, 6, 2)


def test_rollout_counts_groups_with_the_crd_defaults():
    (found,) = cluster(group(size=2), scaler(2, 2)).workloads
    # no strategy: maxSurge 0, maxUnavailable 1 (a Deployment would default to 25% / 25%: 1 surge pod)
    assert found.surge == 0
    (found,) = cluster(group(size=2, rollout={"rollingUpdateConfiguration": {"maxSurge": 1, "maxUnavailable": 0}}),
                       scaler(2, 2)).workloads
    assert found.surge == 2  # one surge group of 2 pods


def test_leaderworkerset_caps_the_surge_at_its_replicas():
    """maxSurge 3 at 1 group: a Deployment would add 3 pods; LeaderWorkerSet adds 1 group."""
    (found,) = cluster(group(size=2, rollout={"rollingUpdateConfiguration": {"maxSurge": 3, "maxUnavailable": 0}}),
                       scaler(1, 1)).workloads
    assert found.surge == 2


def findings(gpu_limit: int, low: int, high: int, **kw) -> list:
    return simulate(cluster(KARPENTER, pool(gpu_limit), group(**kw), scaler(low, high))).findings


def test_a_pool_with_room_for_half_a_group_is_refused_as_a_group():
    found = [f for f in findings(8, 1, 1) if f.check == "group"]
    assert [(f.workload, f.where, f.need, f.have) for f in found] == [
        ("LeaderWorkerSet serving/big", "h100", "16 GPUs", "limit 8")]
    assert found[0].blocking


def test_a_third_node_does_not_make_a_second_group():
    """24 GPUs hold 3 of the 4 pods two groups need; the third node serves nothing. One group fits, so no
    group finding, but the second replica is refused (pods counted by whole groups: 32 GPUs)."""
    found = findings(24, 1, 2)
    assert [(f.check, f.need, f.have) for f in found if f.check in ("group", "pool-min", "pool-max")] == [
        ("pool-max", "32 GPUs", "limit 24")]
    # and the CRD's default rollout (maxUnavailable 1 group) at 1 group takes the only one down first
    assert [(f.check, f.need, f.have) for f in found if f.check == "rollout"] == [("rollout", "at least 1", "0")]


def test_room_for_the_surge_group_is_needed_when_the_rollout_surges():
    surging = {"rollingUpdateConfiguration": {"maxSurge": 1, "maxUnavailable": 0}}
    assert [(f.check, f.need, f.have) for f in findings(16, 1, 1, rollout=surging) if f.blocking] == [
        ("surge", "32 GPUs", "limit 16")]
    assert not [f for f in findings(32, 1, 1, rollout=surging) if f.blocking]


def test_the_model_is_read_from_the_leader_that_serves_it():
    """The leader runs `vllm serve` over two pipeline stages; the worker only joins Ray. Read from the worker
    (the textbook template of a LeaderWorkerSet's pods) the model would be one unsplit 405B on 8 GPUs,
    57 GiB per GPU plus KV; read from the leader it is 28.4 GiB per GPU, and fits."""
    leader = {**GPU_POD, "containers": [{**GPU_POD["containers"][0], "args": [
        "s3://models/llama-405b/", "--tensor-parallel-size", "8", "--pipeline-parallel-size", "2",
        "--model", "llama-3.1-405b-instruct-fp8"]}]}
    worker = {**GPU_POD, "containers": [{**GPU_POD["containers"][0], "command": ["/bin/sh", "-c", "ray start --block"]}]}
    (found,) = cluster(group(leader=leader, worker=worker), scaler(1, 1)).workloads
    assert found.model is not None
    assert (found.model.architecture.name, found.model.tensor_parallel, found.model.pipeline_parallel) == (
        "llama-3.1-405b-instruct-fp8", 8, 2)
    assert not [f for f in findings(32, 1, 1, leader=leader, worker=worker) if f.check == "model-memory"]


CPU_LEADER = {"containers": [{"name": "api", "image": "example/router:1.0",
                              "resources": {"requests": {"cpu": "2", "memory": "4Gi"}}}]}


def test_a_cpu_only_leader_is_not_a_gpu_pod():
    """size 3 with a CPU-only leader: per group 1 leader on CPU and 2 GPU workers. Read as 3 copies of the
    worker template, one group would ask for 24 GPUs; it asks for 16, and the leader for none."""
    workers, leaders = cluster(group(size=3, leader=CPU_LEADER), scaler(1, 2)).workloads
    assert (workers.name, workers.min_replicas, workers.max_replicas, workers.group_size, workers.requests.gpus) == (
        "LeaderWorkerSet serving/big", 2, 4, 2, 8)
    assert (leaders.name, leaders.min_replicas, leaders.max_replicas, leaders.group_size, leaders.requests.gpus) == (
        "LeaderWorkerSet serving/big leader", 1, 2, 1, 0)
    assert leaders.tolerations == [] and leaders.model is None


def test_a_pool_for_one_group_of_gpu_workers_is_enough_when_the_leader_is_elsewhere():
    simulation = simulate(cluster(KARPENTER, pool(16), group(size=3, leader=CPU_LEADER), scaler(1, 1)))
    (plan,) = [p for p in simulation.plans if p.pool.name == "h100"]
    assert (plan.gpus_at_min, plan.gpus_at_max) == (16, 16)
    assert not [f for f in simulation.findings if f.check in ("group", "pool-min", "pool-max")]


def test_a_leader_like_its_workers_keeps_the_group_one_workload():
    (found,) = cluster(group(size=2, leader=GPU_POD), scaler(1, 1)).workloads
    assert (found.min_replicas, found.group_size) == (2, 2)
