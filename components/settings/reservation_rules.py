"""Reserved capacity between keys: a reservation's zone in the stack's region, each reservation declared
once, a Capacity Block that has ended under capacity that needs it (a problem), and the warning for one
that ends soon, or has ended under nothing that needs it (docs/reserved-capacity.md).

``reservation_problems`` is a cross-field rule (keys ``region``, ``gpuPools``, ``karpenter``);
``reservation_warnings`` joins the stack's warnings. The day is ``support_date()``, the same day (and
``LLM_PLATFORM_TODAY`` override) the Kubernetes support windows are judged on.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import timedelta

from components import contract
from components.settings._base import NAMESPACE
from components.settings.problems import Problem
from components.settings.reservations import CapacityReservation
from components.settings.root import Settings, support_date


def _reservations(settings: Settings) -> Iterator[tuple[str, CapacityReservation, list[str]]]:
    """Every reservation with its key path and the GPU pools that launch into it (managed groups' key paths
    start with ``gpuPools``)."""
    for i, pool in enumerate(settings.gpu_pools):
        if pool.reservation is not None:
            yield f"gpuPools[{i}].reservation", pool.reservation, [pool.name]
    karpenter = settings.karpenter
    for c, node_class in enumerate(karpenter.node_classes if karpenter.enabled else []):
        users = [p.name for p in karpenter.node_pools
                 if p.node_class == node_class.name and contract.KARPENTER_RESERVED in p.capacity_types]
        for r, reservation in enumerate(node_class.capacity_reservations):
            yield f"karpenter.nodeClasses[{c}].capacityReservations[{r}]", reservation, users


def reservation_problems(settings: Settings) -> Iterable[Problem]:
    """A reservation lives in one zone of one region; a stack can launch only in its own region. Each
    reservation is declared once (its instances are counted once). A Capacity Block that has ended
    gives no instances: a model that must keep replicas on it, or a NodePool that may launch only
    reserved capacity from it, cannot start."""
    first_seen: dict[str, tuple[str, CapacityReservation]] = {}
    for where, reservation, _ in _reservations(settings):
        if reservation.region != settings.region:
            yield Problem(f"{NAMESPACE}:{where}.availabilityZone", reservation.availability_zone,
                          f"is in {reservation.region}, but the stack's region is {settings.region}; a reservation "
                          f"is used only by instances launched in its own zone (use a {settings.region}<letter> "
                          "reservation)")
        first = first_seen.setdefault(reservation.id, (where, reservation))
        if first[0] != where:
            others = [key for key, attr in _DECLARED if getattr(first[1], attr) != getattr(reservation, attr)]
            yield Problem(f"{NAMESPACE}:{where}.id", reservation.id,
                          f"is declared again (first at {NAMESPACE}:{first[0]}"
                          f"{', with another ' + ', '.join(others) if others else ''}): its instances would be counted "
                          "twice against the stack's capacity; declare each reservation once, on the one pool or "
                          "node class that launches into it")
    yield from _ended_block_problems(settings)


#: A reservation's declared facts (key, attribute) that two declarations of one id must share.
_DECLARED = (("type", "type"), ("availabilityZone", "availability_zone"), ("instanceType", "instance_type"),
             ("instanceCount", "instance_count"), ("endDate", "end_date"))


def _ended(reservation: CapacityReservation) -> bool:
    return (reservation.type == contract.RESERVATION_CAPACITY_BLOCK and reservation.end_date is not None
            and reservation.end_date.date() < support_date())


def _ended_block_problems(settings: Settings) -> Iterable[Problem]:
    """An ended Capacity Block under a model with ``replicas.min >= 1`` (it can never reach its minimum
    there), or the only reservations of a NodePool whose ``capacityTypes`` is ``[reserved]`` (it can
    launch nothing)."""
    needed = _models_needing_nodes(settings)
    for where, reservation, pools in _reservations(settings):
        if not _ended(reservation):
            continue
        models = [m for p in pools for m in needed.get(p, [])]
        if models:
            yield Problem(f"{NAMESPACE}:{where}.endDate", reservation.end_text,
                          f"Capacity Block {reservation.id} has ended; model(s) {', '.join(models)} keep replicas on "
                          f"pool(s) {', '.join(pools)}, which EC2 no longer gives instances from this block: buy a new "
                          "block (its id and endDate), or move the models to another pool")
    karpenter = settings.karpenter
    for i, pool in enumerate(karpenter.node_pools if karpenter.enabled else []):
        if list(pool.capacity_types) != [contract.KARPENTER_RESERVED]:
            continue
        blocks = [r for c in karpenter.node_classes if c.name == pool.node_class for r in c.capacity_reservations]
        if blocks and all(_ended(r) for r in blocks):
            yield Problem(f"{NAMESPACE}:karpenter.nodePools[{i}].capacityTypes", list(pool.capacity_types),
                          f"only reserved, and every reservation of node class {pool.node_class!r} "
                          f"({', '.join(r.id for r in blocks)}) is a Capacity Block that has ended: the NodePool can "
                          "launch nothing; add spot or on-demand, or select a current reservation")


def _models_needing_nodes(settings: Settings) -> dict[str, list[str]]:
    """Pool name -> the models that keep at least one replica on it (``replicas.min >= 1``)."""
    out: dict[str, list[str]] = {}
    for tier in settings.serving.tiers if settings.serving.enabled else []:
        for model in tier.models:
            if model.replicas.min >= 1:
                out.setdefault(model.pool, []).append(model.name)
    return out


def reservation_warnings(settings: Settings) -> list[str]:
    """A Capacity Block that ends within ``RESERVATION_END_WARNING_DAYS`` (or has ended) while a serving
    tier's model runs on a pool that launches into it: EC2 reclaims the block's instances at its end
    (EC2 user guide, "Capacity Blocks for ML"), so that tier loses those nodes.

    A managed group loses them earlier: EKS scales it to 0 ``CAPACITY_BLOCK_MANAGED_SCALEDOWN_MINUTES``
    before the end, so its block is judged from that moment. What follows is Cluster Autoscaler's AWS
    provider, which knows nothing of a block's window (kubernetes/autoscaler
    ``cluster-autoscaler/cloudprovider/aws``, no capacity-block handling anywhere): the drained pods are
    Pending and it raises the group's desired size again while the block still launches; after the end every
    launch fails, ``createPlaceholdersForDesiredNonStartedInstances`` and ``isNodeGroupAvailable``
    (``auto_scaling_groups.go``) mark the missing nodes ``placeholder-cannot-be-fulfilled``, ``Nodes()``
    (``aws_cloud_provider.go``) reports them as ``OutOfResourcesErrorClass``, and the core backs the group
    off (``--initial-node-group-backoff-duration`` 5m, doubling to ``--max-node-group-backoff-duration``
    30m, FAQ.md) and retries, for good. The pods never land elsewhere unless another pool matches them, so
    the warning says to move the models."""
    today = support_date()
    tiers_by_pool: dict[str, list[str]] = {}
    for tier in settings.serving.tiers if settings.serving.enabled else []:
        for model in tier.models:
            tiers_by_pool.setdefault(model.pool, [])
            if tier.name not in tiers_by_pool[model.pool]:
                tiers_by_pool[model.pool].append(tier.name)
    needed = _models_needing_nodes(settings)
    out = []
    for where, reservation, pools in _reservations(settings):
        if reservation.end_date is None or reservation.type != contract.RESERVATION_CAPACITY_BLOCK:
            continue
        managed = where.startswith("gpuPools")
        gone = reservation.end_date - timedelta(minutes=contract.CAPACITY_BLOCK_MANAGED_SCALEDOWN_MINUTES if managed
                                                else 0)
        days = (gone.date() - today).days
        if days > contract.RESERVATION_END_WARNING_DAYS:
            continue
        if days < 0 and any(needed.get(p) for p in pools):
            continue  # a problem, not a warning (reservation_problems)
        tiers = sorted({t for p in pools for t in tiers_by_pool.get(p, [])})
        when = f"ended on {reservation.end_text}" if days < 0 else f"ends on {reservation.end_text} (in {days} day(s))"
        if managed:
            lose = (f"lose those nodes when EKS scales the group to 0 at {gone.strftime('%Y-%m-%dT%H:%M:%SZ')}, "
                    f"{contract.CAPACITY_BLOCK_MANAGED_SCALEDOWN_MINUTES} minutes before the end; Cluster Autoscaler "
                    "does not know the block's window and keeps retrying the group (backing off up to 30 minutes) "
                    "while the models stay Pending")
        else:
            lose = "lose those nodes when EC2 reclaims the block"
        if tiers:
            out.append(f"warning: {NAMESPACE}:{where}.endDate: Capacity Block {reservation.id} {when}; tier(s) "
                       f"{', '.join(tiers)} serve from pool(s) {', '.join(pools)} on it and {lose}: extend the block, "
                       "buy a new one, or move the models to another pool")
        elif days < 0:
            out.append(f"warning: {NAMESPACE}:{where}.endDate: Capacity Block {reservation.id} {when}; "
                       f"{'pool(s) ' + ', '.join(pools) if pools else 'nothing'} launch(es) into it and get no "
                       "instances from it any more: remove the reservation, or replace it with a current block")
    return out
