"""Adapter: validated settings -> the capacity simulation, before any resource is registered.

It lists, in engine form, the capacity-relevant objects the program will emit (pools, Karpenter
NodePools and their EC2NodeClasses, the Helm releases whose DaemonSets land on nodes, the EKS
add-ons, model Deployments, their ScaledObjects, the gateway, tier quotas), built by the same spec
functions the components wrap, and hands them to the pack's engine adapter: the program and the
pack judge one description with one model. Values known only at deploy time (the node role, the
tier's PriorityClass and namespace objects, the gateway's config hash) are given as their names or
a placeholder. What it adds on top: a managed group that can grow is taken to have Cluster
Autoscaler with its node-template tags (the program installs them whenever a group can grow), and
every finding is named by the setting key a user edits, with the value there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import policies.capacity.kinds as kinds
from components import contract, versions
from components.specs import gateway, hybrid_nodes, multi_node, routing, serving
from components.specs.gpu_software import (
    dcgm_exporter_values,
    device_plugin_values,
    gpu_operator_values,
    operator_node_labels,
)
from components.specs.node_pools import (
    AUTO_MODE_LABELS,
    AUTO_MODE_NODE_CLASS_REF,
    KARPENTER_LABELS,
    KARPENTER_NODE_CLASS_REF,
    SYSTEM_POOL,
    ec2_node_class_manifest,
    gpu_group_labels,
    managed_node_group,
    node_pool_manifest,
    system_group_labels,
)
from components.specs.observability import PROMETHEUS_URL, prometheus_stack_values
from policies.capacity.cold_start import GP3_BASELINE
from policies.capacity.engine import cluster_from_resources, reservations_from_resources
from policies.capacity.instances import load_instances
from policies.capacity.model import Cluster, ScaleFromZeroTemplate
from policies.capacity.simulate import Finding, Simulation, reserved_findings, simulate

if TYPE_CHECKING:
    from components.settings.root import Settings
    from components.settings.serving import ServedModel

#: Stands for the EC2NodeClass's node role (an IAM role's name, known once the role exists).
NODE_ROLE_PLACEHOLDER = "node"
#: Stands for the gateway's config hash (a digest of the ConfigMap the program writes).
CONFIG_HASH_PLACEHOLDER = ""


def _resource(type_: str, name: str, inputs: dict[str, Any], parent: str = "") -> SimpleNamespace:
    return SimpleNamespace(type=type_, name=name, urn=f"settings::{type_}::{name}", parent=parent, props=inputs)


def _release(chart: Any, values: dict[str, Any]) -> SimpleNamespace:
    return _resource(kinds.HELM_RELEASE, chart.chart,
                     {"chart": chart.ref, "version": chart.version, "values": values})


@dataclass
class Keyed:
    """Setting key paths for pools, workloads and quotas, and the value found there."""

    pools: dict[str, str]
    workloads: dict[str, tuple[str, Any]]
    quotas: dict[str, str]
    #: ``(pool key, reservation, instance type)`` for each capacity reservation a pool launches into,
    #: keyed like the pools (``engine.reservations_from_resources`` on the same emitted objects).
    reservations: list[tuple[str, Any, Any]] = field(default_factory=list)


def emitted(settings: Settings) -> tuple[list[SimpleNamespace], Keyed]:
    """The capacity-relevant objects the program emits for ``settings``, in engine form."""
    out: list[SimpleNamespace] = [_resource(kinds.EKS_CLUSTER, "cluster", {}),
                                  _resource(kinds.EKS_ADDON, "pod-identity", {"addonName": "eks-pod-identity-agent"})]
    keys = Keyed({}, {}, {})
    software = settings.gpu_software.provider
    system = settings.system_pool
    out.append(_resource(kinds.EKS_MANAGED_NODE_GROUP, SYSTEM_POOL, managed_node_group(
        system.instance_types, system.scaling, system_group_labels(system), [])))
    keys.pools[SYSTEM_POOL] = "systemPool"
    for index, group in enumerate(settings.gpu_pools):
        out.append(_resource(kinds.EKS_MANAGED_NODE_GROUP, group.name, managed_node_group(
            group.instance_types, group.scaling, gpu_group_labels(group, software), contract.gpu_pool_taints_eks(group.purpose))))
        keys.pools[group.name] = f"gpuPools[{index}]"
    if settings.karpenter.enabled:
        out.append(_release(versions.KARPENTER, {}))
        for node_class in settings.karpenter.node_classes:
            out.append(_resource(kinds.EC2NODECLASS, node_class.name,
                                 ec2_node_class_manifest(node_class, cluster_name=settings.cluster_name,
                                                         node_role=NODE_ROLE_PLACEHOLDER, tags={})))
        for index, pool in enumerate(settings.karpenter.node_pools):
            assert pool.node_class is not None  # settings refuse a Karpenter pool without a defined nodeClass
            out.append(_resource(kinds.NODEPOOL, pool.name, node_pool_manifest(
                pool, node_class_ref={**KARPENTER_NODE_CLASS_REF, "name": pool.node_class}, label_prefix=KARPENTER_LABELS,
                extra_labels=operator_node_labels(software, "karpenter"))))
            keys.pools[pool.name] = f"karpenter.nodePools[{index}]"
    for index, pool in enumerate(settings.auto_mode.gpu_node_pools):
        out.append(_resource(kinds.NODEPOOL, pool.name, node_pool_manifest(
            pool, node_class_ref=AUTO_MODE_NODE_CLASS_REF, label_prefix=AUTO_MODE_LABELS,
            extra_labels=operator_node_labels(software, "auto-mode"))))
        keys.pools[pool.name] = f"autoMode.gpuNodePools[{index}]"

    hybrid = settings.hybrid_nodes
    for index, hybrid_pool in enumerate(hybrid.active_pools):
        out.append(_resource(kinds.HYBRID_NODE_POOL, hybrid_pool.name, hybrid_nodes.pool_description(hybrid_pool, software)))
        keys.pools[hybrid_pool.name] = f"hybridNodes.pools[{index}]"
    if hybrid.active_pools:
        out.append(_release(versions.CILIUM, hybrid_nodes.cilium_values(
            hybrid.remote_pod_networks, max(p.max_pods for p in hybrid.active_pools),
            sum(p.nodes for p in hybrid.active_pools))))

    if software == contract.DEVICE_PLUGIN:
        out.append(_release(versions.NVIDIA_DEVICE_PLUGIN, device_plugin_values()))
        if settings.gpu_software.dcgm_exporter:
            out.append(_release(versions.DCGM_EXPORTER, dcgm_exporter_values()))
    elif software == contract.GPU_OPERATOR:
        out.append(_release(versions.NVIDIA_GPU_OPERATOR, gpu_operator_values(
            install_driver=settings.hybrid_nodes.enabled, dcgm_exporter=settings.gpu_software.dcgm_exporter)))
    if settings.serving.enabled or settings.gpu_software.dcgm_exporter:
        out.append(_release(versions.KUBE_PROMETHEUS_STACK, prometheus_stack_values(settings.observability.prometheus)))
    if settings.serving.enabled:
        out.extend(_serving(settings, keys))
    return out, keys


def _serving(settings: Settings, keys: Keyed) -> list[SimpleNamespace]:
    out = []
    pools = settings.gpu_pool_facts()
    targets = settings.serving.fallback_targets()
    for tier in settings.serving.tiers:
        namespace = serving.namespace_name(tier.name)
        out.append(_resource(kinds.RESOURCE_QUOTA, f"{tier.name}-quota", {
            "metadata": {"name": "serving-capacity", "namespace": namespace}, "spec": serving.quota_spec(tier.quota),
        }))
        keys.quotas[f"{namespace}/serving-capacity"] = f"serving.tiers[{tier.name}].quota"
        for model in tier.models:
            facts = pools.get(model.pool)
            purpose = facts.purpose if facts else contract.GPU_INFERENCE_PURPOSE
            scaler = serving.scaled_object_spec(namespace, model, tier.scaling, PROMETHEUS_URL,
                                                fallback_target=model.name in targets)
            if model.multi_node:
                out.append(_resource(kinds.LEADER_WORKER_SET, model.name, multi_node.leader_worker_set(
                    model, namespace=namespace, tier=tier.name, pool_purpose=purpose,
                    priority_class=serving.priority_class_name(tier.name),
                    efa_interfaces=facts.efa_interfaces(model.gpus_per_replica) if facts else 0)))
                scaler = {**scaler, "scaleTargetRef": multi_node.scale_target(model.name)}
            else:
                out.append(_resource(kinds.DEPLOYMENT, model.name, serving.deployment(
                    model, namespace=namespace, tier=tier.name, pool_purpose=purpose,
                    priority_class=serving.priority_class_name(tier.name))))
            out.append(_resource(kinds.SCALED_OBJECT, model.name, {
                "metadata": {"name": model.name, "namespace": namespace}, "spec": scaler}))
            kind = multi_node.KIND if model.multi_node else "Deployment"
            keys.workloads[f"{kind} {namespace}/{model.name}"] = (f"serving.tiers[{tier.name}].models[{model.name}]", model)
            if tier.routing == contract.PREFIX_AWARE_ROUTING:
                chart = versions.LLM_D_ROUTER_STANDALONE
                out.append(_resource(kinds.HELM_CHART_V4, f"{model.name}-picker", {
                    "name": model.name, "namespace": namespace, "chart": chart.ref, "version": chart.version,
                    "values": routing.picker_values(model.name, replicas=routing.picker_replicas(settings.production),
                                                    leaders_only=model.multi_node),
                }))
                keys.workloads[f"Deployment {namespace}/{routing.picker_name(model.name)}"] = (
                    f"serving.tiers[{tier.name}].routing", tier)
    hosting = serving.prepull_pools(settings.serving.tiers, {name: facts.purpose for name, facts in pools.items()})
    if hosting:
        out.append(_resource(kinds.DAEMONSET, "image-prepull",
                             serving.image_prepull_daemonset(str(versions.VLLM_IMAGE), hosting)))
    gateway_settings = settings.serving.gateway
    if gateway_settings.enabled:
        out.append(_resource(kinds.DEPLOYMENT, gateway.NAME, gateway.deployment(
            gateway_settings.replicas, gateway_settings.bedrock_region, CONFIG_HASH_PLACEHOLDER)))
        keys.workloads[f"Deployment {gateway.NAMESPACE}/{gateway.NAME}"] = ("serving.gateway", gateway_settings)
    return out


def settings_cluster(settings: Settings) -> tuple[Cluster, Keyed]:
    """The cluster the settings describe, keyed back to the settings. Worked out once per
    ``Settings`` (frozen, so the same object describes the same cluster): the settings' capacity
    rule and their GPU budget rule both read it, and at 500 models it takes a tenth of a second.
    Readers must not change it."""
    global _last_cluster
    last = _last_cluster
    if last is not None and last[0] is settings:
        return last[1]
    made = _settings_cluster(settings)
    _last_cluster = (settings, made)
    return made


_last_cluster: tuple[Settings, tuple[Cluster, Keyed]] | None = None


def _settings_cluster(settings: Settings) -> tuple[Cluster, Keyed]:
    resources, keys = emitted(settings)
    # Prices are the stack's region's: a type unpriced there is refused by the cost figures (never
    # priced at another region's rate).
    catalog = load_instances(region=settings.region)
    cluster = cluster_from_resources(resources, catalog=catalog)
    if _selects_reserved(settings):
        by_engine_key = {pool.key: keys.pools.get(pool.name, pool.name) for pool in cluster.pools}
        keys.reservations = [(by_engine_key.get(key, key), reservation, instance)
                             for key, reservation, instance in reservations_from_resources(resources, catalog=catalog)]
    for pool in cluster.pools:
        pool.key = keys.pools.get(pool.name, pool.name)
        if pool.kind == "managed node group" and pool.capacity_source is None:
            pool.capacity_source = "Cluster Autoscaler"
            pool.template = ScaleFromZeroTemplate(
                labels=dict(pool.labels), taints={t.key: f"{t.value}:{t.effect}" for t in pool.taints},
                resources={contract.GPU_RESOURCE: str(pool.gpus_per_node)} if pool.is_gpu else {},
            )
    for workload in cluster.workloads:
        workload.key = keys.workloads.get(workload.name, ("", None))[0]
    for quota in cluster.quotas:
        quota.key = keys.quotas.get(f"{quota.namespace}/{quota.name}", "")
    return cluster, keys


def settings_simulation(settings: Settings) -> Simulation:
    return simulate(settings_cluster(settings)[0])


def _selects_reserved(settings: Settings) -> bool:
    karpenter = settings.karpenter
    return karpenter.enabled and any(contract.KARPENTER_RESERVED in p.capacity_types for p in karpenter.node_pools)


def settings_reserved_findings(settings: Settings, simulation: Simulation | None = None) -> list[Finding]:
    """The pack's reserved-capacity findings (``simulate.reserved_findings``) on the settings: a Karpenter
    pool that admits only ``reserved`` capacity against the GPUs its node class's reservations hold, read
    from the same emitted objects (the EC2NodeClass's reservation record) and keyed to the settings."""
    if not _selects_reserved(settings):
        return []
    simulation = simulation or settings_simulation(settings)
    return reserved_findings(simulation, settings_cluster(settings)[1].reservations)


_FIT_FIELD = {"cpu": "cpu", "memory": "memory", contract.GPU_RESOURCE: "gpusPerReplica", "pods": "pool",
              "ephemeral-storage": "cacheSizeGib", "placement": "pool"}
_QUOTA_FIELD = {"requests.cpu": "cpu", "cpu": "cpu", "requests.memory": "memory", "memory": "memory",
                "limits.memory": "memory", f"requests.{contract.GPU_RESOURCE}": "gpus"}


def problem_key(finding: Finding, settings: Settings) -> tuple[str, Any]:
    """The setting a user edits for ``finding`` (without the ``llm-platform:`` prefix) and its value."""
    raw = settings.model_dump(by_alias=True, mode="json")
    if finding.check == "quota":
        field = _QUOTA_FIELD.get(finding.resource, "gpus")
        return f"{finding.where_key}.{field}", _lookup(raw, f"{finding.where_key}.{field}")
    if finding.check in ("capacity-source", "scale-from-zero", "pool-min", "overcommit", "surge"):
        nodepool = finding.where_key.startswith(("karpenter", "autoMode"))
        field = "gpuLimit" if nodepool or finding.resource == contract.GPU_RESOURCE else "scaling.maxSize"
        if finding.where_key.startswith("hybridNodes"):
            field = "nodes"  # fixed capacity: more servers is the only way to more room
        path = f"{finding.where_key}.{field}"
        return path, _lookup(raw, path)
    base = finding.workload_key or finding.where_key
    field = {"fit": _FIT_FIELD.get(finding.resource, "pool"), "pool-max": "replicas.max", "group": "nodesPerReplica",
             "model-memory": "maxModelLen" if finding.resource == "max-model-len" else "catalog",
             "wake-up": "replicas.min", "rollout": "rollout", "reserved": "capacityTypes"}.get(finding.check, "")
    if base == "serving.gateway":
        field = {"cpu": "replicas", "memory": "replicas"}.get(field, "replicas")
    path = f"{base}.{field}" if field else base
    return path, _lookup(raw, path)


def _lookup(raw: dict[str, Any], path: str) -> Any:
    """The value at a settings key path such as ``serving.tiers[batch].models[qwen].cpu``."""
    node: Any = raw
    for part in path.replace("]", "").replace("[", ".").split("."):
        if isinstance(node, dict):
            node = node.get(part)
        elif isinstance(node, list):
            if part.isdigit():
                node = node[int(part)] if int(part) < len(node) else None
            else:
                node = next((item for item in node if isinstance(item, dict) and item.get("name") == part), None)
        else:
            return None
        if node is None:
            return None
    return node


def _disk_throughput_mibps(settings: Settings, pool_name: str) -> float:
    """The root volume throughput the program gives the pool's nodes: a managed group's launch template,
    a Karpenter pool's EC2NodeClass; Auto Mode's built-in NodeClass sets none (gp3's baseline)."""
    for pool in settings.gpu_pools:
        if pool.name == pool_name:
            return pool.disk_throughput_mibps
    classes = {node_class.name: node_class for node_class in settings.karpenter.node_classes}
    for node_pool in settings.karpenter.node_pools if settings.karpenter.enabled else []:
        if node_pool.name == pool_name and node_pool.node_class in classes:
            return classes[node_pool.node_class].root_volume.throughput_mibps
    return GP3_BASELINE.value


def model_pools(settings: Settings) -> dict[str, tuple[ServedModel, serving.ModelPool]]:
    """Each served model's pool as its start sees it, by the model's settings key
    (``serving.tiers[<tier>].models[<model>]``): the pool the simulation places it on, the node type that
    pool's autoscaler plans with (:attr:`PoolPlan.planning`), its capacity source and root volume
    throughput. A model that lands nowhere, or on a pool with no capacity source, is left out: the
    capacity rules report it."""
    cluster, keys = settings_cluster(settings)
    simulation = simulate(cluster)
    plans = {plan.pool.name: plan for plan in simulation.plans}
    # One ModelPool per pool, shared by the models that land there.
    pools: dict[str, serving.ModelPool | None] = {}
    for name, plan in plans.items():
        shape = plan.planning
        pools[name] = None if shape is None or not plan.pool.capacity_source else serving.ModelPool(
            name=f"{plan.pool.kind} '{name}'", instance=shape.instance, capacity_source=plan.pool.capacity_source,
            disk_throughput_mibps=_disk_throughput_mibps(settings, name))
    found: dict[str, tuple[ServedModel, serving.ModelPool]] = {}
    for workload in cluster.workloads:
        key, model = keys.workloads.get(workload.name, ("", None))
        pool = pools.get(simulation.placements.get(workload.name, ""))
        if not key.startswith("serving.tiers") or pool is None:
            continue
        found[key] = (model, pool)
    return found
