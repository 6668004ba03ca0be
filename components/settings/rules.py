"""Cross-field rules: each reads the top-level keys it names and reports at the key to edit.

A rule that reads a key whose own value failed is skipped in that round (its finding would be noise);
the others run with the field errors, so problems arrive in one round.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from components import contract
from components.settings._base import NAMESPACE
from components.settings.cluster import service_cidr
from components.settings.observability import GPU_HOURS_WINDOW_DAYS
from components.settings.problems import MISSING, Problem
from components.settings.reservation_rules import reservation_problems
from components.settings.serving import INTERACTIVE_TIER, MIN_INTERACTIVE_REPLICAS

if TYPE_CHECKING:
    from components.settings.root import Settings

Rule = Callable[["Settings"], Iterable[Problem]]
_RULES: list[tuple[frozenset[str], Rule]] = []


def _rule(*keys: str) -> Callable[[Rule], Rule]:
    def register(rule: Rule) -> Rule:
        _RULES.append((frozenset(keys), rule))
        return rule

    return register


def keyed(key: str, value: Any, reason: str) -> Problem:
    """A problem at ``llm-platform:<key>`` with the value found there."""
    return Problem(f"{NAMESPACE}:{key}", value, reason)


def cross_field_problems(settings: Settings, skip: Iterable[str] = ()) -> list[Problem]:
    """Problems between keys, skipping rules that read a key in ``skip`` (already reported)."""
    skipped = set(skip)
    return [problem for keys, rule in _RULES if not keys & skipped for problem in rule(settings)]


_rule("region", "gpuPools", "karpenter")(reservation_problems)


@_rule("production", "endpoint", "karpenter")
def _production_safety(s: Settings) -> Iterable[Problem]:
    if s.production and s.endpoint.open_to_world:
        yield keyed("endpoint.publicAccessCidrs", s.endpoint.public_access_cidrs,
                 "contains 0.0.0.0/0 in a production stack; list your own CIDRs or set endpoint.publicAccess to false")
    if s.production and s.karpenter.allow_latest_ami:
        yield keyed("karpenter.allowLatestAmi", True, "true in a production stack; pin dated AMI aliases")


def _node_pools(s: Settings) -> list[tuple[str, Any]]:
    """Every GPU pool with the key path of its entry."""
    pools: list[tuple[str, Any]] = [(f"gpuPools[{i}]", p) for i, p in enumerate(s.gpu_pools)]
    pools += [(f"karpenter.nodePools[{i}]", p) for i, p in enumerate(s.karpenter.node_pools)]
    pools += [(f"autoMode.gpuNodePools[{i}]", p) for i, p in enumerate(s.auto_mode.gpu_node_pools)]
    pools += [(f"hybridNodes.pools[{i}]", p) for i, p in enumerate(s.hybrid_nodes.active_pools)]
    return pools


@_rule("gpuPools", "karpenter", "autoMode", "hybridNodes")
def _pool_names_across_kinds(s: Settings) -> Iterable[Problem]:
    """A pool name is the pool label models and the contract select on: one name, one pool."""
    first: dict[str, str] = {}
    for where, pool in _node_pools(s):
        if pool.name in first and first[pool.name].split("[")[0] != where.split("[")[0]:
            yield keyed(f"{where}.name", pool.name,
                     f"pool name {pool.name!r} is repeated: {first[pool.name]}.name has it too; GPU pool names must "
                     "be unique across gpuPools, karpenter.nodePools, autoMode.gpuNodePools and hybridNodes.pools "
                     "(models target pools by name)")
        first.setdefault(pool.name, where)


@_rule("gpuPools", "karpenter", "autoMode", "hybridNodes", "gpuSoftware")
def _gpu_capacity_and_software(s: Settings) -> Iterable[Problem]:
    karpenter_pools = s.karpenter.node_pools if s.karpenter.enabled else []
    if not (s.gpu_pools or karpenter_pools or s.auto_mode.gpu_node_pools or s.hybrid_nodes.enabled):
        yield keyed("gpuPools", [], "no GPU capacity: define gpuPools, karpenter.nodePools, autoMode.gpuNodePools "
                 "or hybridNodes")
    provider = s.gpu_software.provider
    if provider == contract.NO_GPU_SOFTWARE and s.hybrid_nodes.active_pools:
        yield keyed("gpuSoftware.provider", provider, "on-prem GPU nodes (hybridNodes) get no device plugin from an AMI; "
                    "allowed here: gpu-operator (installs the driver there) or device-plugin (driver and NVIDIA "
                    "container toolkit already on the servers)")
    if provider == contract.DEVICE_PLUGIN and s.auto_mode.gpu_node_pools and not (s.gpu_pools or karpenter_pools):
        yield keyed("gpuSoftware.provider", provider, "with only Auto Mode GPU capacity: Auto Mode nodes already run "
                 "a device plugin, a second one would fight it; allowed here: none")


@_rule("hybridNodes", "network")
def _hybrid_networks(s: Settings) -> Iterable[Problem]:
    vpc = ipaddress.ip_network(s.network.vpc_cidr)
    services = service_cidr(s.network.vpc_cidr)
    for field, cidrs in (("remoteNodeNetworks", s.hybrid_nodes.remote_node_networks),
                         ("remotePodNetworks", s.hybrid_nodes.remote_pod_networks)):
        for i, cidr in enumerate(cidrs):
            net = ipaddress.ip_network(cidr)
            if net.overlaps(vpc):
                yield keyed(f"hybridNodes.{field}[{i}]", cidr, f"overlaps network.vpcCidr {s.network.vpc_cidr}; "
                         "remote networks must be outside the VPC")
            if net.overlaps(ipaddress.ip_network(services)):
                yield keyed(f"hybridNodes.{field}[{i}]", cidr, f"overlaps the cluster's Service range {services}")


def _models(s: Settings) -> Iterable[tuple[str, Any, Any]]:
    for tier in s.serving.tiers:
        for model in tier.models:
            yield f"serving.tiers[{tier.name}].models[{model.name}]", tier, model


@_rule("serving", "gpuPools", "karpenter", "autoMode", "hybridNodes", "production", "huggingFaceToken")
def _models_fit_their_pools(s: Settings) -> Iterable[Problem]:
    pools = s.gpu_pool_facts()
    for where, _tier, model in _models(s):
        pool = pools.get(model.pool)
        if pool is None:
            yield keyed(f"{where}.pool", model.pool, f"not a GPU pool; allowed: {', '.join(sorted(pools)) or 'none'}")
            continue
        if pool.purpose != contract.GPU_INFERENCE_PURPOSE:
            yield keyed(f"{where}.pool", model.pool, f"a {pool.purpose} pool; serve from gpu-inference pools")
        if model.gpus_per_replica > pool.max_gpus_per_node:
            yield keyed(f"{where}.gpusPerReplica", model.gpus_per_replica,
                     f"{model.pool!r} nodes have at most {pool.max_gpus_per_node} GPUs; tensor parallelism stays "
                     "within one node")
        if model.multi_node and not pool.efa_interfaces(model.gpus_per_replica):
            types = ", ".join(name for name, count, _ in pool.shapes if count >= model.gpus_per_replica) or "none"
            yield keyed(f"{where}.nodesPerReplica", model.nodes_per_replica,
                     f"a replica spans {model.nodes_per_replica} nodes, which exchange activations every token, but "
                     f"pool {model.pool!r} has no EFA-capable instance type with {model.gpus_per_replica} GPUs "
                     f"(it offers {types}); serve it from a pool of EFA types such as p5.48xlarge or p4d.24xlarge "
                     "(docs/multi-node.md)")
        if s.production and model.replicas.min == 0:
            yield keyed(f"{where}.replicas.min", 0, "0 in a production stack; keep at least 1 warm replica")
        if model.source.hugging_face and s.hugging_face_token is None:
            yield keyed("huggingFaceToken", MISSING, f"{where} loads from Hugging Face; set the token with "
                     "`pulumi config set --secret llm-platform:huggingFaceToken`")
    gateway = s.serving.gateway
    if (s.serving.enabled and gateway.enabled and (gateway.bedrock_models or gateway.bedrock_embedding_models)
            and not gateway.bedrock_region):
        yield keyed("serving.gateway.bedrockRegion", MISSING, "required when bedrockModels are listed; an AWS region "
                 "such as us-east-1")


@_rule("serving", "gpuPools", "karpenter", "autoMode", "hybridNodes", "production")
def _production_interactive(s: Settings) -> Iterable[Problem]:
    """In production the interactive tier keeps 2+ replicas (its PDB then always leaves one
    serving) on capacity that is never reclaimed (on-demand only)."""
    if not (s.production and s.serving.enabled):
        return
    spot_pools = {p.name for p in s.gpu_pools if p.capacity_type == "SPOT"}
    node_pools = (s.karpenter.node_pools if s.karpenter.enabled else []) + s.auto_mode.gpu_node_pools
    spot_pools |= {p.name for p in node_pools if contract.KARPENTER_SPOT in p.capacity_types}
    for where, tier, model in _models(s):
        if tier.name != INTERACTIVE_TIER:
            continue
        if model.replicas.min < MIN_INTERACTIVE_REPLICAS:
            yield keyed(f"{where}.replicas.min", model.replicas.min,
                     f"in a production stack the interactive tier keeps at least {MIN_INTERACTIVE_REPLICAS} so one "
                     "node loss or drain never takes the model down")
        if model.pool in spot_pools:
            yield keyed(f"{where}.pool", model.pool, "allows Spot capacity; in production the interactive tier runs on "
                     "an on-demand-only pool (a Spot reclaim would take replicas away under load)")


@_rule("observability", "gpuHoursMonthlyBudget", "production", "serving")
def _observability(s: Settings) -> Iterable[Problem]:
    prometheus = s.observability.prometheus
    if s.gpu_hours_monthly_budget is not None and prometheus.retention_days < GPU_HOURS_WINDOW_DAYS:
        yield keyed("observability.prometheus.retentionDays", prometheus.retention_days,
                 f"shorter than the {GPU_HOURS_WINDOW_DAYS}-day window of the GPU-hour budget rule; keep at least "
                 f"{GPU_HOURS_WINDOW_DAYS}")
    if s.production and prometheus.replicas < 2:
        yield keyed("observability.prometheus.replicas", prometheus.replicas,
                 "in a production stack run 2 so alerts and KEDA's queries survive a Prometheus restart")
    if s.production and s.serving.enabled and not s.observability.alerting.receivers:
        yield keyed("observability.alerting.receivers", [], "empty in a production stack: alerts would reach no one; "
                 "add a slack, pagerDuty, sns or webhook receiver")
    tiers = {t.name for t in s.serving.tiers}
    for i, route in enumerate(s.observability.alerting.routes if s.serving.enabled else []):
        unknown = [t for t in route.tiers if t not in tiers]
        if unknown:
            yield keyed(f"observability.alerting.routes[{i}].tiers", route.tiers,
                     f"names unknown tier(s) {', '.join(unknown)}; tiers: {', '.join(sorted(tiers)) or 'none'}")
