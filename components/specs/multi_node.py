"""A model larger than one node, served by a LeaderWorkerSet, as the engine receives it.

One replica of a multi-node model (``nodesPerReplica`` N > 1) is one LeaderWorkerSet group of N pods,
one per node, each with ``gpusPerReplica`` GPUs: vLLM's tensor parallelism inside a node and pipeline
parallelism across nodes (``--pipeline-parallel-size N``), over Ray, which is how vLLM's multi-node
serving guide and the LeaderWorkerSet vLLM example (kubernetes-sigs/lws docs/examples/vllm/GPU/lws.yaml)
run it. The leader runs the Ray head and, once every worker has joined, ``vllm serve`` with the
OpenAI API; the workers join the leader's Ray cluster and hold their stages. Only the leader is behind
the model's Service.

LeaderWorkerSet's own rules that decide how this behaves (kubernetes-sigs/lws v0.10.0):

- Start-up order: the leader pod's reconciler creates the group's worker StatefulSet as soon as the
  leader pod exists (``startupPolicy: LeaderCreated``, the default); ``LeaderReady`` would wait for
  the leader's readiness first (pkg/controllers/pod_controller.go, ``LeaderReadyStartupPolicy &&
  !IsPodReady``). The leader becomes ready only when vLLM serves, which needs every worker: under
  ``LeaderReady`` the group would wait for itself forever. The textbook "start the leader, then the
  workers" deadlocks here.
- A group is restarted as a unit: with ``restartPolicy: RecreateGroupOnPodRestart`` a failed or
  restarted pod deletes the group's leader, which recreates every pod of the group
  (pod_controller.go ``handleRestartPolicy``); vLLM cannot replace one lost pipeline stage.
- A group is ready when its leader is ready and its worker StatefulSet is ready
  (leaderworkerset_controller.go, ``readyCount``): workers carry no HTTP probe (they serve no API), so
  the leader's ``/health`` decides, and vLLM answers it only after every stage has loaded.
- The scale subresource counts groups (``specReplicasPath: .spec.replicas``), and its pod selector
  (``.status.hpaPodSelector``) selects leaders only (charts/lws/crds): KEDA's replica bounds are
  groups of N pods, never pods.
- A rolling update's ``maxSurge`` and ``maxUnavailable`` count groups (rounded up and down as a
  Deployment's, and ``maxSurge`` capped at the replicas: ``rollingUpdateParameters``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from components import contract
from components.specs import serving

if TYPE_CHECKING:
    from components.settings.serving import ServedModel

API_VERSION = "leaderworkerset.x-k8s.io/v1"
KIND = "LeaderWorkerSet"
#: Labels LeaderWorkerSet puts on every pod of a set (api/leaderworkerset/v1/leaderworkerset_types.go):
#: the set's name, and the pod's index in its group (the leader is 0).
SET_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
LEADER_INDEX = "0"
#: Ray's head port (the workers join it at LWS_LEADER_ADDRESS).
RAY_PORT = 6379
#: The group's start script (its own file, so it can be read, linted and run as a script).
GROUP_SCRIPT = (Path(__file__).resolve().parents[1] / "serving" / "multi_node.sh").read_text()
#: Ray keeps its session (logs, sockets, spilled objects) under /tmp: a larger scratch volume than a
#: single-node pod's.
GROUP_TMP_SIZE = "16Gi"
#: libfabric and NCCL settings for EFA (aws-ofi-nccl's documented environment): use the EFA provider,
#: with GPUDirect RDMA where the instance has it (p4d, p5). They take effect when the serving image
#: carries libfabric and the aws-ofi-nccl plugin; without them NCCL falls back to TCP sockets over the
#: node's ENA interface (docs/multi-node.md).
EFA_ENV = {"FI_PROVIDER": "efa", "FI_EFA_USE_DEVICE_RDMA": "1", "NCCL_DEBUG": "WARN"}


def leader_selector(model: str) -> dict[str, str]:
    """The Service's selector for a multi-node model: the model's pods with worker index 0 (its leaders).
    It keeps :func:`serving.service_selector`'s labels, so the gateway's egress peer still matches it."""
    return {**serving.service_selector(model), WORKER_INDEX_LABEL: LEADER_INDEX}


def service_spec(model: ServedModel) -> dict[str, Any]:
    """The model's Service: the single-node spec, with only the leaders behind it."""
    return {**serving.service_spec(model), "selector": leader_selector(model.name)}


def group_vllm_args(model: ServedModel) -> list[str]:
    """`vllm serve` arguments of the leader: the single-node ones plus one pipeline stage per node, on Ray."""
    return [*serving.vllm_args(model), "--pipeline-parallel-size", str(model.nodes_per_replica),
            "--distributed-executor-backend", "ray"]


def group_command(role: str, model: ServedModel) -> list[str]:
    """Run :data:`GROUP_SCRIPT` as ``leader`` (with the vLLM arguments) or ``worker``; arguments are passed
    to the script, never spliced into its text."""
    args = group_vllm_args(model) if role == "leader" else []
    return ["/bin/sh", "-c", GROUP_SCRIPT, "multi-node", role, *args]


def group_pod_spec(model: ServedModel, role: str, *, pool_purpose: str, priority_class: Any, efa_interfaces: int,
                   api_key_secret: str | None = None, hf_token_secret: Any = None,
                   region: str | None = None) -> dict[str, Any]:
    """A leader's or worker's pod: the single-node pod (placement from the scheduling contract, the same
    weights path and Pod Security ``restricted`` context: Ray needs no privilege, a writable ``/tmp`` and
    ``/dev/shm``, both emptyDirs), with the group's command, every EFA interface of its node
    (``efa_interfaces``; 0: none requested) and the EFA environment. Workers expose no API port and
    carry no probes: the leader's ``/health`` stands for the group."""
    spec = serving.pod_spec(model, pool_purpose=pool_purpose, priority_class=priority_class,
                            api_key_secret=api_key_secret, hf_token_secret=hf_token_secret, region=region)
    container = spec["containers"][0]
    container["command"] = group_command(role, model)
    container.pop("args", None)
    if efa_interfaces:
        for side in ("requests", "limits"):
            container["resources"][side][contract.EFA_RESOURCE] = str(efa_interfaces)
        container["env"] = [*container["env"], *({"name": k, "value": v} for k, v in EFA_ENV.items())]
    if role == "worker":
        for key in ("ports", "startupProbe", "readinessProbe", "livenessProbe"):
            container.pop(key, None)
    spec["volumes"] = [{**v, "emptyDir": {**v["emptyDir"], "sizeLimit": GROUP_TMP_SIZE}} if v["name"] == "tmp" else v
                       for v in spec["volumes"]]
    # One group's pods belong together (one placement group, one zone); spreading them apart is wrong.
    spec.pop("topologySpreadConstraints", None)
    return spec


def leader_worker_set(
    model: ServedModel,
    *,
    namespace: Any,
    tier: str,
    pool_purpose: str,
    priority_class: Any,
    efa_interfaces: int = 0,
    api_key_secret: str | None = None,
    hf_token_secret: Any = None,
    region: str | None = None,
) -> dict[str, Any]:
    """The model's LeaderWorkerSet (``metadata`` and ``spec``): ``size`` = ``nodesPerReplica``, replicas left to
    KEDA (through the scale subresource), the group started leader-created, restarted as a unit, and rolled
    out by the model's ``rollout`` setting counted in groups."""
    labels = serving.pod_labels(model.name, tier)

    def template(role: str) -> dict[str, Any]:
        return {"metadata": {"labels": labels, "annotations": serving.pod_annotations(model)},
                "spec": group_pod_spec(model, role, pool_purpose=pool_purpose, priority_class=priority_class,
                                       efa_interfaces=efa_interfaces, api_key_secret=api_key_secret,
                                       hf_token_secret=hf_token_secret, region=region)}

    return {
        "metadata": {"name": model.name, "namespace": namespace, "labels": labels},
        "spec": {
            "startupPolicy": "LeaderCreated",
            "rolloutStrategy": contract.group_rollout_strategy(model.rollout),
            "leaderWorkerTemplate": {
                "size": model.nodes_per_replica,
                "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": template("leader"),
                "workerTemplate": template("worker"),
            },
        },
    }


def scale_target(model: str) -> dict[str, str]:
    """KEDA's ``scaleTargetRef`` for the model's LeaderWorkerSet (its scale subresource)."""
    return {"apiVersion": API_VERSION, "kind": KIND, "name": model}


def group_policy(model: str) -> dict[str, Any]:
    """A NetworkPolicy spec letting the pods of the model's groups reach each other on every port (Ray's head
    on :data:`RAY_PORT`, Ray's and NCCL's ephemeral ports between stages); the tier's default deny holds
    everything else. EFA traffic bypasses the IP stack, and so NetworkPolicies: the node security group's
    self rule carries it."""
    peers = [{"podSelector": {"matchLabels": serving.instance_selector(model)}}]
    return {
        "podSelector": {"matchLabels": serving.instance_selector(model)},
        "policyTypes": ["Ingress", "Egress"],
        "ingress": [{"from": peers}],
        "egress": [{"to": peers}],
    }
