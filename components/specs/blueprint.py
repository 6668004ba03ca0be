"""The stack's blueprint: which objects a stack has, decided once, in the form the engine receives them.

Settings go in; out come the capacity-relevant objects the program registers (pools, Karpenter
NodePools and their EC2NodeClasses, the Helm releases whose DaemonSets land on nodes, the EKS
add-ons, model Deployments and their ScaledObjects, the gateway, tier quotas, the image pre-pull),
each tagged with the setting key a user edits for it. The existence decisions are named predicates
(:func:`cluster_autoscaler_groups`, :func:`gpu_software_charts`, :func:`installs_prometheus`,
:func:`prepull_hosts`, :func:`karpenter_node_pools`, :func:`hybrid_pools`, :func:`spans_nodes`, :func:`efa_interfaces_by_pool`,
:func:`prefix_routed_tiers`,
:func:`selects_reserved`): the components
(``components.platform``) read them to decide what to build, and the capacity verdict
(``components.capacity_check``) reads the objects they produce, so the program and its check cannot
disagree on what exists.

The objects are built by the same spec functions the components wrap. Values known only at deploy
time (the node role, the gateway's config hash, the Auto Scaling group's name) are given as their
names or a placeholder. Nothing here imports Pulumi.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

import policies.capacity.kinds as kinds
from components import contract, versions
from components.specs import gateway, hybrid_nodes, multi_node, routing, serving
from components.specs.gpu_software import (
    dcgm_exporter_values,
    device_plugin_values,
    dra_driver_values,
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
from components.tags import node_template_tags

if TYPE_CHECKING:
    from components.settings.karpenter import KarpenterNodePool
    from components.settings.root import Settings
    from components.settings.serving import ServedModel

#: Stands for the EC2NodeClass's node role (an IAM role's name, known once the role exists).
NODE_ROLE_PLACEHOLDER = "node"
#: Stands for the gateway's config hash (a digest of the ConfigMap the program writes).
CONFIG_HASH_PLACEHOLDER = ""
#: Stands for a managed group's Auto Scaling group (EKS names it when it creates the group).
AUTOSCALING_GROUP_PLACEHOLDER = ""
#: Type of the component that owns a managed group and its node-template tags (the engine groups
#: the tags by it, as it does in a recorded plan).
NODE_GROUP_OWNER = "llm-platform:index:ManagedNodePool"


@dataclass
class EngineObject:
    """One object as the engine receives it (``type``, ``name``, ``urn``, ``parent``, camelCase ``props``),
    and the setting key path (without the ``llm-platform:`` prefix) it comes from."""

    type: str
    name: str
    props: dict[str, Any]
    key: str
    parent: str = ""

    @property
    def urn(self) -> str:
        return f"blueprint::{self.type}::{self.name}"


# Existence decisions ---------------------------------------------------------------------------


def karpenter_node_pools(settings: Settings) -> list[KarpenterNodePool]:
    """The NodePools Karpenter provisions (none when Karpenter is off, whatever is listed)."""
    return list(settings.karpenter.node_pools) if settings.karpenter.enabled else []


def cluster_autoscaler_groups(settings: Settings) -> list[str]:
    """The managed groups Cluster Autoscaler owns, by name: all of them (system first) once any one of
    them can grow (``maxSize`` above ``minSize``), none otherwise (then nothing installs it)."""
    groups = [(SYSTEM_POOL, settings.system_pool.scaling), *((p.name, p.scaling) for p in settings.gpu_pools)]
    if not any(scaling.max_size > scaling.min_size for _, scaling in groups):
        return []
    return [name for name, _ in groups]


def hybrid_pools(settings: Settings) -> list[Any]:
    """The on-prem GPU pools that join the cluster (hybrid nodes on, pools with servers); any at all
    installs the hybrid nodes' IAM and activation, and Cilium for their pods."""
    return list(settings.hybrid_nodes.active_pools)


def gpu_software_charts(settings: Settings) -> list[versions.HelmChart]:
    """The NVIDIA charts the stack installs: the standalone device plugin (and the DCGM exporter when
    asked) or the GPU Operator, as ``gpuSoftware.provider`` says; the DRA driver when a managed group is
    for DRA."""
    software = settings.gpu_software
    charts: list[versions.HelmChart] = []
    if software.provider == contract.DEVICE_PLUGIN:
        charts.append(versions.NVIDIA_DEVICE_PLUGIN)
        if software.dcgm_exporter:
            charts.append(versions.DCGM_EXPORTER)
    elif software.provider == contract.GPU_OPERATOR:
        charts.append(versions.NVIDIA_GPU_OPERATOR)
    if any(pool.purpose == contract.GPU_DRA_PURPOSE for pool in settings.gpu_pools):
        charts.append(versions.NVIDIA_DRA_DRIVER)
    return charts


def installs_prometheus(settings: Settings) -> bool:
    """Prometheus (and its alerts) runs when something serves models or exports GPU metrics."""
    return settings.serving.enabled or settings.gpu_software.dcgm_exporter


def prepull_hosts(settings: Settings) -> dict[str, str]:
    """The GPU pools (name -> purpose) whose nodes get the vLLM image pre-pulled; empty when nothing serves."""
    if not settings.serving.enabled:
        return {}
    purposes = {name: facts.purpose for name, facts in settings.gpu_pool_facts().items()}
    return serving.prepull_pools(settings.serving.tiers, purposes)


def spans_nodes(settings: Settings) -> bool:
    """Whether a served model spans nodes (``nodesPerReplica`` above 1): then LeaderWorkerSet's controller
    and CRDs are installed, and the model is a LeaderWorkerSet instead of a Deployment."""
    return settings.serving.enabled and any(m.multi_node for t in settings.serving.tiers for m in t.models)


def efa_interfaces_by_pool(settings: Settings) -> dict[str, int]:
    """The GPU pools that host a multi-node model, with the EFA interfaces their nodes get (the model's
    request: every interface of the pool's type that holds its GPUs)."""
    facts = settings.gpu_pool_facts()
    found: dict[str, int] = {}
    for tier in settings.serving.tiers if settings.serving.enabled else []:
        for model in tier.models:
            if model.multi_node and model.pool in facts:
                found[model.pool] = max(found.get(model.pool, 0), facts[model.pool].efa_interfaces(model.gpus_per_replica))
    return found


def prefix_routed_tiers(settings: Settings) -> list[str]:
    """The tiers whose requests reach their models through a prefix-aware endpoint picker (``routing``);
    any at all installs the routing CRDs and gives each of their models a picker."""
    if not settings.serving.enabled:
        return []
    return [t.name for t in settings.serving.tiers if t.routing == contract.PREFIX_AWARE_ROUTING]


def selects_reserved(settings: Settings) -> bool:
    """Whether a Karpenter pool admits ``reserved`` capacity (then its node class's reservations count)."""
    return any(contract.KARPENTER_RESERVED in p.capacity_types for p in karpenter_node_pools(settings))


# The blueprint ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Blueprint:
    """The objects of one stack (engine form, each with its setting key), for the settings given."""

    settings: Settings
    objects: list[EngineObject] = field(default_factory=list)

    @cached_property
    def keys(self) -> dict[str, str]:
        """Setting key path by object URN (the URN is what the engine's model carries as ``key``)."""
        return {o.urn: o.key for o in self.objects}

    @cached_property
    def served_models(self) -> dict[str, ServedModel]:
        """Each served model by its setting key (``serving.tiers[<tier>].models[<model>]``)."""
        return {f"serving.tiers[{tier.name}].models[{model.name}]": model
                for tier in self.settings.serving.tiers for model in tier.models} if self.settings.serving.enabled else {}


def _release(chart: versions.HelmChart, values: dict[str, Any], key: str) -> EngineObject:
    return EngineObject(kinds.HELM_RELEASE, chart.chart, {"chart": chart.ref, "version": chart.version, "values": values}, key)


def blueprint(settings: Settings) -> Blueprint:
    """The capacity-relevant objects the program registers for ``settings``."""
    out = [EngineObject(kinds.EKS_CLUSTER, "cluster", {}, "kubernetesVersion"),
           EngineObject(kinds.EKS_ADDON, "pod-identity", {"addonName": "eks-pod-identity-agent"}, "kubernetesVersion")]
    out += _managed_groups(settings)
    out += _node_pools(settings)
    out += _hybrid_pools(settings)
    out += _gpu_software(settings)
    if installs_prometheus(settings):
        out.append(_release(versions.KUBE_PROMETHEUS_STACK, prometheus_stack_values(settings.observability.prometheus),
                            "observability.prometheus"))
    if settings.serving.enabled:
        out += _serving(settings)
    return Blueprint(settings, out)


def _managed_groups(settings: Settings) -> list[EngineObject]:
    """The system group and each GPU group; Cluster Autoscaler when it owns them, with the node-template
    tags of each group that sits at zero (parented, as in the program, by the group's component)."""
    software = settings.gpu_software.provider
    system = settings.system_pool
    groups = [(SYSTEM_POOL, "systemPool", system.scaling, managed_node_group(
        system.instance_types, system.scaling, system_group_labels(system), []), 0)]
    for index, pool in enumerate(settings.gpu_pools):
        groups.append((pool.name, f"gpuPools[{index}]", pool.scaling, managed_node_group(
            pool.instance_types, pool.scaling, gpu_group_labels(pool, software), contract.gpu_pool_taints_eks(pool.purpose)),
            pool.min_gpus_per_node))
    owned = set(cluster_autoscaler_groups(settings))
    out: list[EngineObject] = []
    if owned:
        out.append(_release(versions.CLUSTER_AUTOSCALER, {}, "gpuPools"))
    for name, key, scaling, props, gpus in groups:
        owner = EngineObject(NODE_GROUP_OWNER, name, {}, key)
        out += [owner, EngineObject(kinds.EKS_MANAGED_NODE_GROUP, name, props, key, parent=owner.urn)]
        if name in owned and scaling.min_size == 0:
            tags = node_template_tags(props["labels"], props["taints"], gpus)
            out += [EngineObject(kinds.ASG_TAG, f"{name}-{tag}", {
                "autoscalingGroupName": AUTOSCALING_GROUP_PLACEHOLDER, "tag": {"key": tag, "value": value}}, key,
                parent=owner.urn) for tag, value in tags.items()]
    return out


def _node_pools(settings: Settings) -> list[EngineObject]:
    """Karpenter (its release, EC2NodeClasses and NodePools) and EKS Auto Mode's GPU NodePools."""
    software = settings.gpu_software.provider
    out: list[EngineObject] = []
    if settings.karpenter.enabled:
        out.append(_release(versions.KARPENTER, {}, "karpenter.enabled"))
        for index, node_class in enumerate(settings.karpenter.node_classes):
            out.append(EngineObject(kinds.EC2NODECLASS, node_class.name, ec2_node_class_manifest(
                node_class, cluster_name=settings.cluster_name, node_role=NODE_ROLE_PLACEHOLDER, tags={}),
                f"karpenter.nodeClasses[{index}]"))
        for index, pool in enumerate(settings.karpenter.node_pools):
            assert pool.node_class is not None  # settings refuse a Karpenter pool without a defined nodeClass
            out.append(EngineObject(kinds.NODEPOOL, pool.name, node_pool_manifest(
                pool, node_class_ref={**KARPENTER_NODE_CLASS_REF, "name": pool.node_class},
                label_prefix=KARPENTER_LABELS, extra_labels=operator_node_labels(software, "karpenter")),
                f"karpenter.nodePools[{index}]"))
    for index, pool in enumerate(settings.auto_mode.gpu_node_pools):
        out.append(EngineObject(kinds.NODEPOOL, pool.name, node_pool_manifest(
            pool, node_class_ref=AUTO_MODE_NODE_CLASS_REF, label_prefix=AUTO_MODE_LABELS,
            extra_labels=operator_node_labels(software, "auto-mode")), f"autoMode.gpuNodePools[{index}]"))
    return out


def _hybrid_pools(settings: Settings) -> list[EngineObject]:
    """On-prem GPU pools (fixed servers) and the Cilium release their pods network through."""
    hybrid, software = settings.hybrid_nodes, settings.gpu_software.provider
    pools = hybrid_pools(settings)
    out = [EngineObject(kinds.HYBRID_NODE_POOL, pool.name, hybrid_nodes.pool_description(pool, software),
                        f"hybridNodes.pools[{index}]") for index, pool in enumerate(pools)]
    if pools:
        out.append(_release(versions.CILIUM, hybrid_nodes.cilium_values(
            hybrid.remote_pod_networks, max(p.max_pods for p in pools), sum(p.nodes for p in pools)), "hybridNodes"))
    return out


def _gpu_software(settings: Settings) -> list[EngineObject]:
    software = settings.gpu_software
    values = {
        versions.NVIDIA_DEVICE_PLUGIN: device_plugin_values,
        versions.DCGM_EXPORTER: dcgm_exporter_values,
        versions.NVIDIA_GPU_OPERATOR: lambda: gpu_operator_values(
            install_driver=settings.hybrid_nodes.enabled, dcgm_exporter=software.dcgm_exporter),
        versions.NVIDIA_DRA_DRIVER: dra_driver_values,
    }
    return [_release(chart, values[chart](), "gpuSoftware") for chart in gpu_software_charts(settings)]


def _serving(settings: Settings) -> list[EngineObject]:
    out: list[EngineObject] = []
    pools = settings.gpu_pool_facts()
    targets = settings.serving.fallback_targets()
    for tier in settings.serving.tiers:
        namespace = serving.namespace_name(tier.name)
        out.append(EngineObject(kinds.RESOURCE_QUOTA, f"{tier.name}-quota", {
            "metadata": {"name": "serving-capacity", "namespace": namespace}, "spec": serving.quota_spec(tier.quota),
        }, f"serving.tiers[{tier.name}].quota"))
        for model in tier.models:
            key = f"serving.tiers[{tier.name}].models[{model.name}]"
            facts = pools.get(model.pool)
            purpose = facts.purpose if facts else contract.GPU_INFERENCE_PURPOSE
            scaler = serving.scaled_object_spec(namespace, model, tier.scaling, PROMETHEUS_URL,
                                                fallback_target=model.name in targets)
            if model.multi_node:
                out.append(EngineObject(kinds.LEADER_WORKER_SET, model.name, multi_node.leader_worker_set(
                    model, namespace=namespace, tier=tier.name, pool_purpose=purpose,
                    priority_class=serving.priority_class_name(tier.name),
                    efa_interfaces=facts.efa_interfaces(model.gpus_per_replica) if facts else 0), key))
                scaler = {**scaler, "scaleTargetRef": multi_node.scale_target(model.name)}
            else:
                out.append(EngineObject(kinds.DEPLOYMENT, model.name, serving.deployment(
                    model, namespace=namespace, tier=tier.name, pool_purpose=purpose,
                    priority_class=serving.priority_class_name(tier.name)), key))
            out.append(EngineObject(kinds.SCALED_OBJECT, model.name, {
                "metadata": {"name": model.name, "namespace": namespace}, "spec": scaler}, key))
            if tier.name in prefix_routed_tiers(settings):
                chart = versions.LLM_D_ROUTER_STANDALONE
                out.append(EngineObject(kinds.HELM_CHART_V4, f"{model.name}-picker", {
                    "name": model.name, "namespace": namespace, "chart": chart.ref, "version": chart.version,
                    "values": routing.picker_values(model.name, replicas=routing.picker_replicas(settings.production),
                                                    leaders_only=model.multi_node),
                }, f"serving.tiers[{tier.name}].routing"))
    hosting = prepull_hosts(settings)
    if hosting:
        out.append(EngineObject(kinds.DAEMONSET, "image-prepull",
                                serving.image_prepull_daemonset(str(versions.VLLM_IMAGE), hosting), "serving.tiers"))
    gateway_settings = settings.serving.gateway
    if gateway_settings.enabled:
        out.append(EngineObject(kinds.DEPLOYMENT, gateway.NAME, gateway.deployment(
            gateway_settings.replicas, gateway_settings.bedrock_region, CONFIG_HASH_PLACEHOLDER), "serving.gateway"))
    return out
