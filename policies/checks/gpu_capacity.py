"""GPU capacity is bounded: per pool, per stack (GPU count and monthly spend) and per namespace.

Worst case means every pool at its ceiling at on-demand prices (Spot is cheaper, so this is an
upper bound):

- managed/self-managed node group: ``maxSize`` x the largest GPU count among its instance types,
  and ``maxSize`` x the most expensive of its instance types x ``hoursPerMonth``;
- dynamic Karpenter NodePool: its ``limits["nvidia.com/gpu"]`` (capped by ``limits.nodes`` x GPUs
  per node when both are set), priced at the highest per-GPU hourly price among the catalog types
  its requirements admit (all catalog GPU types if the catalog cannot tell);
- static NodePool (``replicas``): replicas x GPUs per node, at the most expensive admitted type.

Prices and GPU counts come only from ``instance_catalog.json``, priced for the stack's region
(``llm-platform:region``); a GPU instance type missing from it is reported, because its cost cannot
be bounded, and so is a type the catalog has no on-demand price for in that region (its GPU count
still counts against the cap; never another region's price).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from capacity.cost import WorstCase, node_group_worst_case, nodepool_worst_case
from capacity.instances import Instance, UnpricedInstanceError
from capacity.model import counts_priority
from capacity.node_pools import DeclaredGroup, DeclaredNodePool, nodepool_is_gpu, read_nodepool
from lib.catalog import load_catalog
from lib.contract_config import OTHER_GPU_RESOURCES
from lib.kit import ADVISORY, MANDATORY, Stack, resource_policy, stack_policy, stack_workloads
from lib.pools import Pool, gpu_limit, stack_pools
from lib.resources import NODEPOOL, RESOURCE_QUOTA, Resource
from lib.values import UNKNOWN, as_dict, as_int, contains_unknown, fmt, quantity

from checks.gpu_workloads import asks_for_gpu, gpu_resource_names


def _check_nodepool_limit(resource: Resource, config: dict[str, Any]) -> Iterator[str]:
    gpu = config["gpuResource"]
    pool = read_nodepool(resource)
    if nodepool_is_gpu(pool, gpu) is not True or pool.replicas is not None:
        return
    limit = gpu_limit(pool, gpu)
    if limit is None:
        yield (
            f"{resource.label} selects GPU capacity but has no spec.limits['{gpu}'], so Karpenter may buy GPU "
            f"nodes without bound. Set spec.limits: {{'{gpu}': <max GPUs>}}."
        )


@dataclass
class Item:
    """One GPU pool's worst case; ``gpus``/``usd`` are ``None`` when they cannot be bounded."""

    pool: Pool
    gpus: float | None
    usd: float | None
    detail: str
    problem: str | None = None
    #: Why the pool's cost is not known: its types have no price in the stack's region.
    unpriced: str | None = None


def _priced(pool: Pool, hours: float, worst_case: Callable[[Sequence[Instance]], WorstCase | None],
            types: Sequence[Instance]) -> Item | None:
    """The pool's worst case; with a type unpriced in the region, its GPUs alone (they do not depend on
    prices) and the refusal naming the type, region and refresh command."""
    try:
        worst = worst_case(types)
    except UnpricedInstanceError as error:
        gpus_only = worst_case([replace(t, hourly_usd=0.0) for t in types])
        return Item(pool, gpus_only.gpus if gpus_only else None, None, "", unpriced=str(error))
    if worst is None:
        return None
    return Item(pool, worst.gpus, worst.hourly_usd * hours, worst.detail)


def capacity_items(stack: Stack, gpu_resource: str) -> list[Item]:
    catalog = load_catalog()
    hours = catalog.hours_per_month
    items: list[Item | None] = []
    for pool in stack_pools(stack):
        if not pool.is_gpu:
            continue
        if pool.uncatalogued:
            missing = ", ".join(map(str, pool.uncatalogued))
            items.append(Item(pool, None, None, "", f"instance type(s) {missing} are not in instance_catalog.json"))
            continue
        if pool.instance_types is None:
            continue
        declared = pool.declared
        if isinstance(declared, DeclaredGroup):
            max_size = as_int(declared.max_size)
            if max_size is None:
                continue
            label = pool.label
            items.append(_priced(pool, hours, functools.partial(node_group_worst_case, label, max_size), pool.instance_types))
        elif isinstance(declared, DeclaredNodePool):
            items.append(_nodepool_item(pool, declared, gpu_resource, hours))
    return [i for i in items if i is not None]


def _nodepool_item(pool: Pool, declared: DeclaredNodePool, gpu_resource: str, hours: float) -> Item | None:
    catalog = load_catalog()
    types = pool.instance_types or [t for t in catalog.instances.values() if t.gpus]
    replicas = declared.replicas
    limit = gpu_limit(declared, gpu_resource)
    limits = declared.limits
    if UNKNOWN in (replicas, limit) or limits is UNKNOWN:
        return None
    def worst_case(priced: Sequence[Instance]) -> WorstCase | None:
        return nodepool_worst_case(
            pool.label, priced, static_nodes=None if replicas is None else as_int(replicas) or 0,
            gpu_limit=limit, node_limit=quantity(as_dict(limits).get("nodes")),
        )

    item = _priced(pool, hours, worst_case, types)
    if item is None:
        return Item(pool, None, None, "", f"has no limits['{gpu_resource}'], so its GPU count is unbounded")
    return item


def _summary(items: list[Item], value: str) -> str:
    return "; ".join(i.detail for i in items if getattr(i, value))


def _check_gpu_cap(stack: Stack, config: dict[str, Any]) -> Iterator[tuple[str, str | None]]:
    items = capacity_items(stack, config["gpuResource"])
    for item in items:
        if item.problem:
            yield (f"{item.pool.label} {item.problem}; the stack's worst-case GPU count cannot be bounded. "
                   f"Add the type to policies/instance_catalog.json or set a limit.", item.pool.resource.urn)
    total = sum(i.gpus for i in items if i.gpus is not None)
    if total > config["maxGpus"]:
        yield (
            f"Worst-case GPU count is {total:g}, above the cap of {fmt(config['maxGpus'])} ({_summary(items, 'gpus')}). "
            f"Lower node group maxSize or NodePool GPU limits, or raise maxGpus for this stack.",
            None,
        )


def _check_budget(stack: Stack, config: dict[str, Any]) -> Iterator[tuple[str, str | None]]:
    items = capacity_items(stack, config["gpuResource"])
    for item in items:
        if item.problem:
            yield (f"{item.pool.label} {item.problem}; its monthly cost cannot be bounded. Add the type to "
                   f"policies/instance_catalog.json or set a limit.", item.pool.resource.urn)
        elif item.unpriced:
            yield (f"{item.pool.label}: its monthly cost cannot be bounded: {item.unpriced}.", item.pool.resource.urn)
    total = sum(i.usd for i in items if i.usd is not None)
    if total > config["monthlyBudgetUsd"]:
        yield (
            f"Worst-case GPU spend is ${total:,.0f}/month at on-demand prices, above the budget of "
            f"${config['monthlyBudgetUsd']:,.0f} ({_summary(items, 'usd')}). Lower maxSize or NodePool GPU limits, "
            f"choose cheaper instance types, or raise monthlyBudgetUsd for this stack.",
            None,
        )


def _check_quota(stack: Stack, config: dict[str, Any]) -> Iterator[tuple[str, str | None]]:
    gpu = config["gpuResource"]
    quotas: dict[str, list[tuple[dict[str, Any], Any]]] = {}
    for quota in stack.of_type(RESOURCE_QUOTA):
        namespace = quota.get("metadata", "namespace", default="default")
        hard = quota.get("spec", "hard", default={})
        scope = quota.get("spec", "scopeSelector", default=None)
        if namespace is UNKNOWN or contains_unknown(hard) or contains_unknown(scope):
            return
        quotas.setdefault(namespace, []).append((as_dict(hard), scope))
    reported: set[tuple[str, Any, str]] = set()
    for template in stack_workloads(stack, config):
        if not isinstance(template.namespace, str):
            continue
        # The contract's GPU and the GPUs under other names (time-sliced, MIG: lib/contract_config.py);
        # a quota on one name does not count another.
        names = {gpu} | {n for c in template.containers("initContainers", "containers")
                         for n in gpu_resource_names(c, gpu, OTHER_GPU_RESOURCES)}
        for name in sorted(n for n in names if asks_for_gpu(template, n) is True):
            yield from _quota_for(template, name, quotas, reported)


def _quota_for(template: Any, gpu: str, quotas: dict[str, list[tuple[dict[str, Any], Any]]],
               reported: set[tuple[str, Any, str]]) -> Iterator[tuple[str, str | None]]:
    namespace = template.namespace
    priority = template.spec.get("priorityClassName") if isinstance(template.spec, dict) else None
    if priority is UNKNOWN or (namespace, priority, gpu) in reported:
        return
    counting = [hard for hard, scope in quotas.get(namespace, []) if counts_priority(scope, priority)]
    if any(f"requests.{gpu}" in hard for hard in counting):
        return
    reported.add((namespace, priority, gpu))
    scoped = [hard for hard, scope in quotas.get(namespace, []) if f"requests.{gpu}" in hard and hard not in counting]
    if scoped:
        why = (f"its ResourceQuota with requests.{gpu} has a PriorityClass scopeSelector that does not select "
               f"this workload's priority class ({priority or 'none'}), so its pods are never counted")
    elif any(f"limits.{gpu}" in hard for hard in counting):
        why = (f"its ResourceQuota sets only limits.{gpu}, which Kubernetes does not enforce for extended "
               f"resources (only the requests. prefix is)")
    else:
        why = f"it has no ResourceQuota with requests.{gpu}"
    yield (
        f"Namespace '{namespace}' runs GPU workloads ({template.label}) but {why}, so one team can take every "
        f"GPU. Add a ResourceQuota in '{namespace}' with spec.hard['requests.{gpu}'].",
        template.resource.urn,
    )


POLICIES = [
    resource_policy(
        name="karpenter-gpu-nodepool-limits",
        description="Give every GPU Karpenter NodePool a spec.limits entry for nvidia.com/gpu.",
        types={NODEPOOL},
        check=_check_nodepool_limit,
        enforcement=MANDATORY,
        contract=("gpuResource",),
    ),
    stack_policy(
        name="gpu-capacity-cap",
        description="Keep the stack's worst-case GPU count (pool ceilings x GPUs per node) within maxGpus.",
        check=_check_gpu_cap,
        enforcement=MANDATORY,
        contract=("gpuResource",),
        params={"maxGpus": {"type": "integer", "minimum": 0, "default": 16,
                            "description": "Most GPUs the stack may ever run at once."}},
    ),
    stack_policy(
        name="gpu-monthly-budget",
        description=(
            "Keep the stack's worst-case monthly GPU spend at the stack region's on-demand prices within "
            "monthlyBudgetUsd, refreshing the catalog (python -m automation catalog refresh --region R) for a region "
            "it has no prices for."
        ),
        check=_check_budget,
        enforcement=MANDATORY,
        contract=("gpuResource",),
        params={"monthlyBudgetUsd": {"type": "number", "minimum": 0, "default": 20000,
                                     "description": "Monthly GPU budget in USD (on-demand prices, hoursPerMonth)."}},
    ),
    stack_policy(
        name="gpu-namespace-quota",
        description=(
            "Give every namespace that runs GPU workloads a ResourceQuota on requests.nvidia.com/gpu whose "
            "PriorityClass scopeSelector, if any, selects those workloads' priority classes."
        ),
        check=_check_quota,
        custom_workloads=True,
        enforcement=ADVISORY,
        contract=("gpuResource",),
    ),
]
