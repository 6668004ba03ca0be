"""Adapter: the resources a stack emits (engine form, camelCase inputs) -> :class:`~capacity.model.Cluster`.

Works on any program's resources, so the pack judges stacks it did not build. Each resource is
anything with ``type``, ``name``, ``urn``, ``parent`` and ``props`` (or ``inputs``) attributes.
Pools come from the one reader of pool resources (``node_pools.declared_pools``), which the pack's
scheduling policies read too; this module adds the model's view (catalog types, bounds, capacity
source). Values that are not plain data (unknowns during preview) are read as absent; the pack skips
the check when the resources that decide it hold unknowns.

Recognised capacity sources: Cluster Autoscaler (a Helm release of chart ``cluster-autoscaler``)
for managed node groups, with node-template tags from ``aws:autoscaling/tag:Tag`` resources parented
by the component that owns the group; Karpenter (a release of chart ``karpenter``) for NodePools on
an EC2NodeClass; EKS Auto Mode for NodePools on the ``eks.amazonaws.com`` NodeClass; fixed nodes
(min = max, a static NodePool, or on-prem servers joined as hybrid nodes: ``capacity.hybrid``).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

from . import bounded_json
from .charts import DEFAULT_ADDONS, addon_daemonset, release_daemonsets, release_deployments
from .cold_start import flag_value
from .cost import RESERVATION_KEY, Reservation, parse_reservations
from .instances import Instance, InstanceCatalog, load_instances
from .kinds import (
    ASG_TAG,
    CLUSTER_TYPES,
    CRONJOB,
    DAEMONSET,
    DEPLOYMENT,
    EC2NODECLASS,
    EKS_ADDON,
    HELM_TYPES,
    INFERENCE_SERVICE,
    JOB,
    KSERVE_CONTAINER_FIELDS,
    LEADER_WORKER_SET,
    POD_TEMPLATE_PATHS,
    RESOURCE_QUOTA,
    SCALED_OBJECT,
    STATEFULSET,
    helm_chart_name,
)
from .llm import architecture_from_json, by_hugging_face_id, model_catalog
from .model import (
    GPU_RESOURCE,
    Cluster,
    DaemonSet,
    ModelServing,
    Pool,
    Quota,
    Rollout,
    ScaleFromZeroTemplate,
    Selection,
    Workload,
    cpu_m,
    mib,
    pod_requests,
    quantity,
)
from .node_pools import DeclaredGroup, DeclaredHybrid, DeclaredNodePool, DeclaredPool, admits, declared_pools, props_of

#: Workload kinds the simulation places (kind, path of the pod template it models): Deployments,
#: StatefulSets, Jobs, CronJobs and LeaderWorkerSets' workers; paths from the one table in ``kinds``.
WORKLOADS = {
    token: (token.rsplit(":", 1)[-1], tuple(POD_TEMPLATE_PATHS[token][-1].split(".")))
    for token in (DEPLOYMENT, STATEFULSET, JOB, CRONJOB, LEADER_WORKER_SET)
}
TEMPLATE_PREFIX = "k8s.io/cluster-autoscaler/node-template/"
#: Pod template annotation with the served model's architecture (JSON, ``model_catalog.json`` fields).
MODEL_ANNOTATION = "llm-platform.io/model-architecture"
#: Metric prefixes a model server emits itself: a scale-to-zero trigger on only these never fires.
SELF_METRIC_PREFIXES = ("vllm:", "vllm_")
_PROMQL_WORDS = {
    "sum", "avg", "min", "max", "count", "rate", "irate", "increase", "histogram_quantile", "by", "without", "on",
    "ignoring", "group_left", "group_right", "and", "or", "unless", "offset", "bool", "topk", "bottomk", "quantile",
    "abs", "ceil", "floor", "round", "clamp_min", "clamp_max", "vector", "scalar", "time", "absent", "le",
    "delta", "deriv", "avg_over_time", "max_over_time", "min_over_time", "sum_over_time", "count_over_time",
    "label_replace", "sort", "sort_desc", "stddev", "stdvar", "count_values", "last_over_time", "nan", "inf",
}


def _get(value: Any, *path: str, default: Any = None) -> Any:
    for step in path:
        if not isinstance(value, dict) or step not in value or value[step] is None:
            return default
        value = value[step]
    return value


def _int(value: Any, default: int | None = None) -> int | None:
    number = quantity(value)
    return default if number is None else int(number)


def _templates(resources: list[Any]) -> dict[str, ScaleFromZeroTemplate]:
    """Cluster Autoscaler node-template tags grouped by the component that parents them."""
    out: dict[str, ScaleFromZeroTemplate] = {}
    for r in resources:
        if r.type != ASG_TAG:
            continue
        tag = _get(props_of(r), "tag") or {}
        key, value = tag.get("key"), tag.get("value")
        if not isinstance(key, str) or not key.startswith(TEMPLATE_PREFIX) or not isinstance(value, str):
            continue
        template = out.setdefault(getattr(r, "parent", None) or "", ScaleFromZeroTemplate())
        kind, _, name = key[len(TEMPLATE_PREFIX):].partition("/")
        if kind == "label":
            template.labels[name] = value
        elif kind == "taint":
            template.taints[name] = value
        elif kind == "resources":
            template.resources[name] = value
    return out


def _pools(declared: list[DeclaredPool], resources: list[Any], catalog: InstanceCatalog) -> list[Pool]:
    """The capacity model's view of each declared pool (``node_pools``): its catalog types, bounds and
    who adds its nodes. Self-managed groups are not modelled (no capacity source is read for them)."""
    releases = {helm_chart_name(props_of(r)) for r in resources if r.type in HELM_TYPES}
    autoscaler = "cluster-autoscaler" in releases
    karpenter = "karpenter" in releases
    templates = _templates(resources)
    node_classes = {_get(props_of(r), "metadata", "name"): props_of(r) for r in resources if r.type == EC2NODECLASS}
    out = []
    for pool in declared:
        if isinstance(pool, DeclaredGroup) and pool.managed:
            out.append(_group_pool(pool, catalog, templates.get(pool.owner) if autoscaler else None, autoscaler=autoscaler))
        elif isinstance(pool, DeclaredNodePool):
            out.append(_nodepool_pool(pool, catalog, node_classes, karpenter=karpenter))
        elif isinstance(pool, DeclaredHybrid):
            hybrid = pool.hybrid
            out.append(Pool(
                name=hybrid.name, kind=pool.kind, instances=[hybrid.instance], labels=dict(hybrid.labels),
                taints=list(pool.taints or ()), min_nodes=hybrid.nodes, max_nodes=hybrid.nodes,
                static_nodes=hybrid.nodes, capacity_source="fixed nodes", max_pods=hybrid.instance.max_pods,
                flexible={"kubernetes.io/hostname": None}, key=pool.resource.urn,
            ))
    return out


def _labels(declared: DeclaredPool) -> dict[str, str]:
    return {str(k): str(v) for k, v in declared.labels.items()} if isinstance(declared.labels, dict) else {}


def _group_pool(declared: DeclaredGroup, catalog: InstanceCatalog, template: ScaleFromZeroTemplate | None, *,
                autoscaler: bool) -> Pool:
    low, high = _int(declared.min_size, 1), _int(declared.max_size, 2)
    if autoscaler:
        source: str | None = "Cluster Autoscaler"
    elif low == high:
        source = "fixed nodes"
    else:
        source = None
    return Pool(
        name=declared.group_name or declared.resource.name, kind=declared.kind,
        instances=[catalog.instances[t] for t in declared.instance_types or () if t in catalog.instances],
        labels=_labels(declared), taints=list(declared.taints or ()),
        min_nodes=low or 0, max_nodes=high, capacity_source=source, disk_gib=quantity(declared.disk_size),
        desired_nodes=_int(declared.desired_size, low or 0), template=template,
        flexible={"topology.kubernetes.io/zone": None, "kubernetes.io/hostname": None}, key=declared.resource.urn,
    )


def _nodepool_pool(declared: DeclaredNodePool, catalog: InstanceCatalog, node_classes: dict[Any, dict[str, Any]], *,
                   karpenter: bool) -> Pool:
    """A NodePool's room: the catalog types its requirements admit (only the GPU ones when it admits any or
    has a GPU limit: the simulation places on what a GPU pool is for), the labels its nodes may take."""
    requirements = declared.requirements or ()
    instances = [i for i in catalog.instances.values() if admits(i.labels(), requirements)]
    limits = declared.limits if isinstance(declared.limits, dict) else {}
    gpu_limit = quantity(limits.get(GPU_RESOURCE))
    if gpu_limit is not None or any(i.gpus for i in instances):
        gpu_only = [i for i in instances if i.gpus]
        instances = gpu_only or instances
    flexible: dict[str, frozenset[str] | None] = {"topology.kubernetes.io/zone": None, "kubernetes.io/hostname": None}
    labels = _labels(declared)
    for q in requirements:
        key = q.get("key")
        if not isinstance(key, str) or key in labels or key.startswith(
                ("karpenter.k8s.aws/", "eks.amazonaws.com/instance", "node.kubernetes.io/instance-type")):
            continue
        if q.get("operator") == "In":
            flexible[key] = frozenset(str(v) for v in q.get("values") or [])
        elif q.get("operator") == "Exists":
            flexible[key] = None
    flexible.setdefault("karpenter.sh/capacity-type", frozenset({"on-demand"}))
    name = declared.pool_name or declared.resource.name
    labels["karpenter.sh/nodepool"] = str(name)
    if declared.auto_mode:
        labels["eks.amazonaws.com/compute-type"] = "auto"
    node_class = node_classes.get(declared.node_class) or {}
    static = _int(declared.replicas)
    source = ("fixed nodes" if static is not None else "EKS Auto Mode" if declared.auto_mode
              else "Karpenter" if karpenter else None)
    return Pool(
        name=str(name), kind=declared.kind, instances=instances, labels=labels, taints=list(declared.taints or ()),
        min_nodes=static or 0, gpu_limit=gpu_limit, node_limit=quantity(limits.get("nodes")),
        static_nodes=static, flexible=flexible, capacity_source=source,
        max_pods=_int(_get(node_class, "spec", "kubelet", "maxPods")), karpenter=not declared.auto_mode,
        key=declared.resource.urn, disk_gib=_root_volume_gib(node_class),
    )


def _root_volume_gib(node_class: dict[str, Any]) -> float | None:
    """Ephemeral storage of an EC2NodeClass's nodes: its root volume, unless instance-store NVMe (RAID0,
    size not in the catalog) backs it instead."""
    spec = node_class.get("spec") or {}
    if not spec or spec.get("instanceStorePolicy") == "RAID0":
        return None
    mappings = [m for m in spec.get("blockDeviceMappings") or [] if isinstance(m, dict)]
    root = next((m for m in mappings if m.get("rootVolume")), mappings[0] if mappings else None)
    size = quantity(_get(root or {}, "ebs", "volumeSize"))
    return None if size is None else size / 2**30 if size > 2**20 else size


def _daemonsets(resources: list[Any]) -> list[DaemonSet]:
    out: list[DaemonSet] = []
    addons = {props_of(r).get("addonName") for r in resources if r.type == EKS_ADDON}
    if any(r.type in CLUSTER_TYPES for r in resources):
        addons |= set(DEFAULT_ADDONS)
    for name in sorted(a for a in addons if isinstance(a, str)):
        ds = addon_daemonset(name)
        if ds is not None:
            out.append(ds)
    for r in resources:  # the type first, as in _pools
        if r.type in HELM_TYPES:
            props = props_of(r)
            values = props.get("values") if isinstance(props.get("values"), dict) else {}
            out.extend(release_daemonsets(helm_chart_name(props), str(props.get("version") or ""), values) or [])
        elif r.type == DAEMONSET:
            props = props_of(r)
            pod = _get(props, "spec", "template", "spec") or {}
            requests, _ = pod_requests(pod)
            out.append(DaemonSet(
                name=str(_get(props, "metadata", "name") or r.name), requests=requests,
                tolerations=[t for t in pod.get("tolerations") or [] if isinstance(t, dict)],
                selection=_selection(pod), source=f"DaemonSet {r.name} in the stack",
            ))
    return out


def _selection(pod: dict[str, Any]) -> Selection:
    terms = _get(pod, "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")
    return Selection.of(pod.get("nodeSelector") or {}, terms or [])


_arg = flag_value


def _model(pod_meta: dict[str, Any], pod: dict[str, Any]) -> ModelServing | None:
    """A vLLM server's model, from the architecture annotation or a catalog match on ``--model``."""
    for container in pod.get("containers") or []:
        if not isinstance(container, dict):
            continue
        args = [str(a) for a in (container.get("command") or []) + (container.get("args") or [])]
        if len(args) == 1 or (args and args[0] in ("/bin/sh", "sh", "bash")):
            args = [part for a in args for part in (shlex.split(a) if " " in a else [a])]
        if "--tensor-parallel-size" not in args and "--max-model-len" not in args and "--model" not in args \
                and not any("vllm" in a for a in args):
            continue
        raw = _get(pod_meta, "annotations", MODEL_ANNOTATION)
        arch = None
        if isinstance(raw, str):
            try:
                spec = bounded_json.loads(raw)
                arch = architecture_from_json(str(spec.get("name", "model")), spec)
            except (ValueError, KeyError, TypeError):
                arch = None
        if arch is None:
            model = _arg(args, "--model")
            arch = by_hugging_face_id(model) if model else None
            # A catalog name (or a local path ending in one) is looked up by its last segment; a
            # Hugging Face id the catalog does not know is no model of ours, whatever its last segment.
            if arch is None and model and (model.startswith("/") or "/" not in model):
                arch = model_catalog().get(model.rstrip("/").rsplit("/", 1)[-1].lower())
        if arch is None:
            return None
        tp = _int(_arg(args, "--tensor-parallel-size"), 1) or 1
        pp = _int(_arg(args, "--pipeline-parallel-size"), 1) or 1
        length = _int(_arg(args, "--max-model-len")) or arch.max_position_embeddings or 8192
        utilization = quantity(_arg(args, "--gpu-memory-utilization")) or 0.9
        return ModelServing(arch, length, tp, utilization, pipeline_parallel=pp)
    return None


def _group_model(props: dict[str, Any]) -> ModelServing | None:
    """A LeaderWorkerSet's model: vLLM's engine arguments are on the leader, which runs ``vllm serve``
    (the workers only join its Ray cluster), so it is read first; a set without a leader template, or whose
    leader runs no model, is read from the worker template."""
    group = _get(props, "spec", "leaderWorkerTemplate") or {}
    for template in (group.get("leaderTemplate"), group.get("workerTemplate")):
        if isinstance(template, dict) and isinstance(template.get("spec"), dict):
            found = _model(template.get("metadata") or {}, template["spec"])
            if found is not None:
                return found
    return None


def query_metrics(query: str) -> set[str]:
    """Metric names a PromQL query reads (identifiers outside label matchers, not functions)."""
    text = re.sub(r"\{[^}]*\}", " ", query)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    names = set(re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", text))
    return {n for n in names if n.lower() not in _PROMQL_WORDS and not re.fullmatch(r"\d+", n)}


def wake_signal(triggers: list[Any], self_prefixes: tuple[str, ...] = SELF_METRIC_PREFIXES) -> tuple[bool, str]:
    """Whether a trigger reads a signal that exists while the workload has no pods; and what was seen."""
    seen = []
    for trigger in triggers:
        if not isinstance(trigger, dict):
            continue
        kind = trigger.get("type")
        if kind in ("cpu", "memory"):
            seen.append(f"{kind} (own pods)")
            continue
        if kind != "prometheus":
            return True, f"{kind} trigger"
        query = str(_get(trigger, "metadata", "query") or "")
        metrics = query_metrics(query)
        external = sorted(m for m in metrics if not m.startswith(self_prefixes))
        if external:
            return True, f"prometheus on {', '.join(external)}"
        seen.append(f"prometheus on {', '.join(sorted(metrics)) or 'nothing'}")
    return False, "; ".join(seen)


def _predictor(resource: Any) -> Workload | None:
    """A KServe InferenceService's predictor as a workload: its pod spec is ``spec.predictor`` inline, the
    model (or framework) field a container beside ``containers`` (kserve/kserve
    pkg/apis/serving/v1beta1/predictor.go, component.go). Replicas: ``minReplicas`` (KServe's default is 1;
    0 only with scale to zero) up to ``maxReplicas`` (0 or unset: no more than the minimum is assumed)."""
    props = props_of(resource)
    predictor = _get(props, "spec", "predictor")
    if not isinstance(predictor, dict):
        return None
    extra = [predictor[f] for f in KSERVE_CONTAINER_FIELDS if isinstance(predictor.get(f), dict)]
    pod = {**predictor, "containers": [*(c for c in predictor.get("containers") or [] if isinstance(c, dict)), *extra]}
    namespace = str(_get(props, "metadata", "namespace") or "default")
    name = str(_get(props, "metadata", "name") or resource.name)
    requests, limits = pod_requests(pod)
    low = _int(predictor.get("minReplicas"), 1) or 0
    high = max(_int(predictor.get("maxReplicas"), 0) or 0, low)
    return Workload(
        name=f"InferenceService {namespace}/{name}", kind="InferenceService", namespace=namespace,
        requests=requests, limits=limits,
        tolerations=[t for t in pod.get("tolerations") or [] if isinstance(t, dict)], selection=_selection(pod),
        min_replicas=low, max_replicas=high, model=_model({}, pod), scale_to_zero=low == 0, key=resource.urn,
        priority_class=pod.get("priorityClassName") if isinstance(pod.get("priorityClassName"), str) else None,
    )


def _workloads(resources: list[Any], self_prefixes: tuple[str, ...]) -> list[Workload]:
    scalers: dict[tuple[str, str, str], dict[str, Any]] = {}
    for r in resources:
        if r.type == SCALED_OBJECT:
            props = props_of(r)
            ref = _get(props, "spec", "scaleTargetRef") or {}
            key = (str(_get(props, "metadata", "namespace") or "default"), str(ref.get("kind") or "Deployment"), str(ref.get("name")))
            scalers[key] = props.get("spec") or {}
    out = [w for r in resources if r.type == INFERENCE_SERVICE if (w := _predictor(r)) is not None]
    for r in [*resources, *_chart_workloads(resources)]:
        if r.type not in WORKLOADS:
            continue
        kind, path = WORKLOADS[r.type]
        props = props_of(r)
        template = _get(props, *path) or {}
        pod = template.get("spec") or {}
        if not isinstance(pod, dict):
            continue
        namespace = str(_get(props, "metadata", "namespace") or "default")
        name = str(_get(props, "metadata", "name") or r.name)
        requests, limits = pod_requests(pod)
        replicas = _int(_get(props, "spec", "replicas"), 1)
        if kind == "Job":
            replicas = _int(_get(props, "spec", "parallelism"), 1)
        elif kind == "CronJob":
            replicas = _int(_get(props, "spec", "jobTemplate", "spec", "parallelism"), 1)
        size = 1
        if kind == "LeaderWorkerSet":
            size = _int(_get(props, "spec", "leaderWorkerTemplate", "size"), 1) or 1
        low = high = replicas or 0
        scaler = scalers.get((namespace, kind, name))
        scale_to_zero, wake, detail = False, None, ""
        if scaler is not None:
            # The scale subresource's replicas: groups for a LeaderWorkerSet (specReplicasPath .spec.replicas).
            low = _int(scaler.get("minReplicaCount"), 0) or 0
            high = _int(scaler.get("maxReplicaCount"), 100) or 0
            scale_to_zero = low == 0
            wake, detail = wake_signal(scaler.get("triggers") or [], self_prefixes)
        surge, rollout = 0, None
        if kind == "Deployment":
            rollout = Rollout.of(_get(props, "spec", "strategy"))
            surge = rollout.fenceposts(high)[0]
        elif kind == "LeaderWorkerSet":
            # Every count is in groups until here; the simulation places pods, size per group.
            rollout = Rollout.of_group(_get(props, "spec", "rolloutStrategy"))
            surge = rollout.fenceposts(high)[0] * size
            low, high = low * size, high * size
        workload = Workload(
            name=f"{kind} {namespace}/{name}", kind=kind, namespace=namespace, requests=requests, limits=limits,
            tolerations=[t for t in pod.get("tolerations") or [] if isinstance(t, dict)], selection=_selection(pod),
            min_replicas=low, max_replicas=high, surge=surge, rollout=rollout, group_size=size,
            model=_group_model(props) if kind == "LeaderWorkerSet" else _model(template.get("metadata") or {}, pod),
            scale_to_zero=scale_to_zero, wake_signal=wake, wake_detail=detail,
            resource_claims=bool(pod.get("resourceClaims")), key=r.urn,
            priority_class=pod.get("priorityClassName") if isinstance(pod.get("priorityClassName"), str) else None,
        )
        leader = _get(props, "spec", "leaderWorkerTemplate", "leaderTemplate", "spec") if kind == "LeaderWorkerSet" else None
        out.extend(_leader_apart(workload, leader) if isinstance(leader, dict) else [workload])
    return out


def _leader_apart(group: Workload, leader: dict[str, Any]) -> list[Workload]:
    """A LeaderWorkerSet whose leader template differs from its workers' (a CPU-only leader that runs the
    API or a coordinator, workers on GPU nodes): one leader pod and ``size - 1`` workers per group, each
    placed by its own template. Read as ``size`` copies of the worker (the textbook of one pod template per
    workload), a CPU-only leader would count as a GPU pod and take a GPU node it never uses. A leader like
    its workers changes nothing: the group stays one workload of ``size`` pods."""
    requests, limits = pod_requests(leader)
    tolerations = [t for t in leader.get("tolerations") or [] if isinstance(t, dict)]
    selection = _selection(leader)
    if (requests, limits, tolerations, selection) == (group.requests, group.limits, group.tolerations, group.selection):
        return [group]
    size = group.group_size
    groups_min, groups_max, surge_groups = group.min_replicas // size, group.max_replicas // size, group.surge // size
    leaders = replace(group, name=f"{group.name} leader", requests=requests, limits=limits, tolerations=tolerations,
                      selection=selection, min_replicas=groups_min, max_replicas=groups_max, surge=surge_groups,
                      group_size=1, model=None, resource_claims=bool(leader.get("resourceClaims")))
    if size <= 1:
        return [leaders]
    workers = replace(group, min_replicas=groups_min * (size - 1), max_replicas=groups_max * (size - 1),
                      surge=surge_groups * (size - 1), group_size=size - 1)
    return [workers, leaders]


def _chart_workloads(resources: list[Any]) -> list[Any]:
    """The Deployments Helm releases render (``charts.release_deployments``), as resources of the stack;
    a release whose name or namespace is unknown is left out (the same as a chart the table lacks)."""
    out = []
    for r in resources:
        if r.type not in HELM_TYPES:
            continue
        props = props_of(r)
        release, namespace = props.get("name"), props.get("namespace")
        if not isinstance(release, str) or not isinstance(namespace, str):
            continue
        values = props.get("values") if isinstance(props.get("values"), dict) else {}
        for deployment in release_deployments(helm_chart_name(props), str(props.get("version") or ""), values,
                                              release=release, namespace=namespace) or []:
            out.append(SimpleNamespace(type=DEPLOYMENT, name=deployment["metadata"]["name"], parent=r.urn,
                                       urn=f"{r.urn}/{deployment['metadata']['name']}", props=deployment))
    return out


def _quotas(resources: list[Any]) -> list[Quota]:
    out = []
    for r in resources:
        if r.type != RESOURCE_QUOTA:
            continue
        props = props_of(r)
        hard = {}
        for key, value in (_get(props, "spec", "hard") or {}).items():
            if key in ("cpu", "requests.cpu", "limits.cpu"):
                hard[key] = cpu_m(value)
            elif key in ("memory", "requests.memory", "limits.memory"):
                hard[key] = mib(value)
            else:
                number = quantity(value)
                if number is not None:
                    hard[key] = number
        scope = _get(props, "spec", "scopeSelector")
        out.append(Quota(str(_get(props, "metadata", "namespace") or "default"),
                         str(_get(props, "metadata", "name") or r.name), hard, key=r.urn,
                         scope_selector=scope if isinstance(scope, dict) else None))
    return out


def cluster_from_resources(resources: Iterable[Any], *, self_prefixes: tuple[str, ...] = SELF_METRIC_PREFIXES,
                           catalog: InstanceCatalog | None = None) -> Cluster:
    resources = list(resources)
    catalog = catalog or load_instances()
    return Cluster(
        pools=_pools(declared_pools(resources), resources, catalog),
        daemonsets=_daemonsets(resources),
        workloads=_workloads(resources, self_prefixes),
        quotas=_quotas(resources),
        hours_per_month=catalog.hours_per_month,
    )


def reservations_from_resources(resources: Iterable[Any], *, catalog: InstanceCatalog | None = None
                                ) -> list[tuple[str, Reservation, Instance]]:
    """``(pool key, reservation, its instance type)`` for every capacity reservation a pool launches into,
    as the plan records them (``cost.RESERVATION_KEY``): a managed group's tag, or the annotation of the
    EC2NodeClass of a NodePool whose ``karpenter.sh/capacity-type`` admits ``reserved`` (Karpenter uses a
    class's reservations only for such pools: docs, tasks/odcrs). The pool key is the one ``Pool.key``
    carries; a reservation of a type the catalog does not know is left out."""
    resources = list(resources)
    catalog = catalog or load_instances()
    declared = declared_pools(resources)
    modelled = {p.key for p in _pools(declared, resources, catalog)}
    classes = {_get(props_of(r), "metadata", "name"): props_of(r) for r in resources if r.type == EC2NODECLASS}
    out = []
    for pool in declared:
        if pool.resource.urn not in modelled:
            continue
        if isinstance(pool, DeclaredGroup):
            text = _get(pool.tags, RESERVATION_KEY)
        elif isinstance(pool, DeclaredNodePool):
            capacity = next((q for q in pool.requirements or () if q.get("key") == "karpenter.sh/capacity-type"), {})
            if capacity.get("operator") != "In" or "reserved" not in (capacity.get("values") or []):
                continue
            text = _get(classes.get(pool.node_class) or {}, "metadata", "annotations", RESERVATION_KEY)
        else:
            continue
        out += [(pool.resource.urn, reservation, catalog.instances[reservation.instance_type])
                for reservation in parse_reservations(text) if reservation.instance_type in catalog.instances]
    return out
