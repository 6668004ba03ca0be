"""The capacity verdict on a stack's blueprint, and the one parse that ends in it.

:func:`check_stack` reads a stack's config (``components.settings``: field errors and the rules
between keys), then judges the objects its blueprint (``components.specs.blueprint``) lists with
the pack's capacity model (``policies.capacity``): the predicted cold starts against each tier's
budget, the stack's worst case against ``gpuBudget``, and the simulation's blocking findings.
Every finding is named by the setting key a user edits, with the value there, and all of them
arrive in one :class:`SettingsError`. The simulation runs once; the program reads each model's
pool from the same one (:meth:`CheckedStack.model_pools`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from components import contract
from components.settings import Problem, Settings, SettingsError
from components.settings.rules import keyed
from components.settings.stack import read_settings
from components.specs import serving
from components.specs.blueprint import Blueprint, blueprint, karpenter_node_pools, selects_reserved
from policies.capacity.cold_start import GP3_BASELINE, gpu_software_path
from policies.capacity.engine import cluster_from_resources, reservations_from_resources
from policies.capacity.instances import InstanceCatalog, UnpricedInstanceError, load_instances
from policies.capacity.model import Cluster
from policies.capacity.simulate import Finding, Simulation, reserved_findings, simulate
from policies.capacity.table import stack_worst_case

if TYPE_CHECKING:
    from components.settings.serving import ServedModel, ServingTier

#: Top-level keys each verdict reads; a verdict reading a key whose own value failed is skipped.
_COLD_START_KEYS = frozenset({"serving", "gpuPools", "karpenter", "autoMode", "systemPool", "gpuSoftware",
                              "observability", "hybridNodes", "region", "environment"})
_BUDGET_KEYS = frozenset({"gpuBudget", "gpuPools", "karpenter", "autoMode", "systemPool", "gpuSoftware", "serving",
                          "observability", "hybridNodes", "environment"})


@dataclass(frozen=True)
class CheckedStack:
    """Settings, the blueprint they describe, and the capacity model of it, worked out once."""

    settings: Settings
    blueprint: Blueprint

    @classmethod
    def of(cls, settings: Settings) -> CheckedStack:
        """The blueprint and capacity model of settings read already (no verdict is passed on them)."""
        return cls(settings, blueprint(settings))

    @cached_property
    def catalog(self) -> InstanceCatalog:
        # Prices are the stack's region's: a type unpriced there is refused by the cost figures (never
        # priced at another region's rate).
        return load_instances(region=self.settings.region)

    @cached_property
    def cluster(self) -> Cluster:
        """The blueprint as the capacity model reads it, each pool, workload and quota keyed by its setting."""
        cluster = cluster_from_resources(self.blueprint.objects, catalog=self.catalog)
        keys = self.blueprint.keys
        for pool in cluster.pools:
            pool.key = keys.get(pool.key, pool.key)
        for workload in cluster.workloads:
            # A Deployment a chart renders (an endpoint picker) carries its release's key: ``<release urn>/<name>``.
            workload.key = keys.get(workload.key) or keys.get(workload.key.rsplit("/", 1)[0], workload.key)
        for quota in cluster.quotas:
            quota.key = keys.get(quota.key, quota.key)
        return cluster

    @cached_property
    def simulation(self) -> Simulation:
        return simulate(self.cluster)

    def blocking(self) -> list[Finding]:
        """The simulation's blocking findings, then the blocking reserved-capacity ones
        (``simulate.reserved_findings``: a pool admitting only ``reserved`` capacity against the GPUs
        its node class's reservations hold)."""
        found = list(self.simulation.blocking)
        if selects_reserved(self.settings):
            keys = self.blueprint.keys
            reservations = [(keys.get(urn, urn), reservation, instance) for urn, reservation, instance
                            in reservations_from_resources(self.blueprint.objects, catalog=self.catalog)]
            found += [f for f in reserved_findings(self.simulation, reservations) if f.blocking]
        return found

    def model_pools(self) -> dict[str, tuple[ServedModel, serving.ModelPool]]:
        """Each served model's pool as its start sees it, by the model's settings key
        (``serving.tiers[<tier>].models[<model>]``): the pool the simulation places it on, the node type
        that pool's autoscaler plans with (:attr:`PoolPlan.planning`), its capacity source and root
        volume throughput. A model that lands nowhere, or on a pool with no capacity source, is left
        out: the capacity verdict reports it."""
        simulation = self.simulation
        pools: dict[str, serving.ModelPool | None] = {}
        for plan in simulation.plans:
            shape = plan.planning
            pools[plan.pool.name] = None if shape is None or not plan.pool.capacity_source else serving.ModelPool(
                name=f"{plan.pool.kind} '{plan.pool.name}'", instance=shape.instance,
                capacity_source=plan.pool.capacity_source,
                disk_throughput_mibps=_disk_throughput_mibps(self.settings, plan.pool.name),
                fast_image_pull=_fast_image_pull(self.settings, plan.pool.name),
                gpu_software=gpu_software_path(
                    self.settings.gpu_software.provider, capacity_source=plan.pool.capacity_source,
                    dra=any(p.name == plan.pool.name and p.purpose == contract.GPU_DRA_PURPOSE
                            for p in self.settings.gpu_pools)))
        models = self.blueprint.served_models
        found: dict[str, tuple[ServedModel, serving.ModelPool]] = {}
        for workload in self.cluster.workloads:
            pool = pools.get(simulation.placements.get(workload.name, ""))
            if workload.key in models and pool is not None:
                found[workload.key] = (models[workload.key], pool)
        return found


def parse_settings(config: Mapping[str, Any]) -> Settings:
    """A stack's settings, once they pass the field rules, the rules between keys and the capacity
    verdict; otherwise :class:`SettingsError` with every problem of the round (see :func:`check_stack`)."""
    return check_stack(config).settings


def check_stack(config: Mapping[str, Any]) -> CheckedStack:
    """Read and judge a stack's config map (keys ``llm-platform:<key>``) in one round: field errors,
    the rules between keys, the cold starts and the GPU budget (skipped where a key they read failed),
    then, when all of those passed, the capacity simulation's blocking findings."""
    read = read_settings(config)
    problems = list(read.problems)
    checked = None
    if read.settings is not None:
        checked = CheckedStack.of(read.settings)
        if not _COLD_START_KEYS & read.failed:
            problems += _cold_starts_over_budget(checked)
        if not _BUDGET_KEYS & read.failed:
            problems += _over_gpu_budget(checked)
        if not problems:
            problems += [keyed(*problem_key(finding, checked.settings), finding.message) for finding in checked.blocking()]
    problems = read.misspelled + problems
    if problems:
        raise SettingsError(problems)
    assert checked is not None
    return checked


def _served(settings: Settings) -> Iterator[tuple[str, ServingTier, ServedModel]]:
    for tier in settings.serving.tiers:
        for model in tier.models:
            yield f"serving.tiers[{tier.name}].models[{model.name}]", tier, model


def _cold_starts_over_budget(checked: CheckedStack) -> Iterable[Problem]:
    """Each model's predicted cold start (a new node of its pool's planning type, the image pulled, the
    weights fetched and loaded; policies/capacity/cold_start.py, the model the pack's cold-start-budget
    also uses) within its tier's ``coldStartBudgetSeconds``, reported at the model with the step to shorten."""
    s = checked.settings
    budgets = {t.name: t.cold_start_budget_seconds for t in s.serving.tiers if t.cold_start_budget_seconds}
    if not (s.serving.enabled and budgets):
        return
    pools = checked.model_pools()
    for where, tier, model in _served(s):
        budget = budgets.get(tier.name)
        if budget is None or where not in pools:
            continue  # a model that lands nowhere is the capacity verdict's finding
        cold = serving.model_start(model, pools[where][1])
        if cold.seconds <= budget:
            continue
        dominant = cold.dominant
        yield keyed(where, round(cold.seconds),
                    f"predicted cold start {cold.seconds:.0f} s on a new {cold.instance} of {cold.pool} is above "
                    f"serving.tiers[{tier.name}].coldStartBudgetSeconds {budget}; the {dominant.name} step dominates "
                    f"with {dominant.seconds:.0f} s ({dominant.detail}); steps: "
                    + ", ".join(f"{step.name} {step.seconds:.0f} s" for step in cold.steps)
                    + ". Shorten that step (docs/cold-start.md) or raise the budget")


def _over_gpu_budget(checked: CheckedStack) -> Iterable[Problem]:
    """The stack's own worst case (the capacity model's, as the pack computes it) within ``gpuBudget``,
    priced in the stack's region; a type the catalog has no price for there is a problem at
    ``region`` (refresh the catalog for it), never a price borrowed from another region."""
    try:
        problems = list(over_budget(checked))
    except UnpricedInstanceError as exc:
        if exc.region_unpriced:
            return  # nothing is priced there: the offline check reports the budget as unknown (exit 8)
        yield keyed("region", checked.settings.region, str(exc))
        return
    for key, value, reason in problems:
        yield keyed(key, value, reason)


def over_budget(checked: CheckedStack) -> Iterable[tuple[str, float, str]]:
    """``(key, value, reason)`` for each ceiling the stack's own worst case exceeds."""
    budget = checked.settings.gpu_budget
    if budget is None:
        return
    cluster = checked.cluster
    worst = stack_worst_case(cluster.pools)
    if worst.gpus > budget.max_gpus:
        yield ("gpuBudget.maxGpus", budget.max_gpus,
               f"the stack's worst-case GPU count is {worst.gpus:g} ({worst.detail}); lower node group maxSize or "
               "NodePool gpuLimit, or raise gpuBudget.maxGpus")
    monthly = worst.hourly_usd * cluster.hours_per_month
    if monthly > budget.monthly_budget_usd:
        yield ("gpuBudget.monthlyBudgetUsd", budget.monthly_budget_usd,
               f"the stack's worst-case GPU spend is ${monthly:,.0f}/month at on-demand prices ({worst.detail}); "
               "lower maxSize or gpuLimit, choose cheaper instance types, or raise gpuBudget.monthlyBudgetUsd")


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


def _fast_image_pull(settings: Settings, pool_name: str) -> bool:
    """Whether the program turns on nodeadm's ``FastImagePull`` for the pool's nodes: a managed group's own
    setting, a Karpenter pool's EC2NodeClass's; never on Auto Mode (its NodeClass takes no user data)."""
    for pool in settings.gpu_pools:
        if pool.name == pool_name:
            return pool.fast_image_pull
    classes = {node_class.name: node_class for node_class in settings.karpenter.node_classes}
    for node_pool in karpenter_node_pools(settings):
        if node_pool.name == pool_name and node_pool.node_class in classes:
            return classes[node_pool.node_class].fast_image_pull
    return False


def _disk_throughput_mibps(settings: Settings, pool_name: str) -> float:
    """The root volume throughput the program gives the pool's nodes: a managed group's launch template,
    a Karpenter pool's EC2NodeClass; Auto Mode's built-in NodeClass sets none (gp3's baseline)."""
    for pool in settings.gpu_pools:
        if pool.name == pool_name:
            return pool.disk_throughput_mibps
    classes = {node_class.name: node_class for node_class in settings.karpenter.node_classes}
    for node_pool in karpenter_node_pools(settings):
        if node_pool.name == pool_name and node_pool.node_class in classes:
            return classes[node_pool.node_class].root_volume.throughput_mibps
    return GP3_BASELINE.value
