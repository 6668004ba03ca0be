"""Reserved capacity between keys: a reservation's zone in the stack's region, and the warning for a
Capacity Block that ends soon under a serving tier (docs/reserved-capacity.md).

``reservation_problems`` is a cross-field rule (keys ``region``, ``gpuPools``, ``karpenter``);
``reservation_warnings`` joins the stack's warnings. The day is ``support_date()``, the same day (and
``LLM_PLATFORM_TODAY`` override) the Kubernetes support windows are judged on.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from components import contract
from components.settings._base import NAMESPACE
from components.settings.problems import Problem
from components.settings.reservations import CapacityReservation
from components.settings.root import Settings, support_date


def _reservations(settings: Settings) -> Iterator[tuple[str, CapacityReservation, list[str]]]:
    """Every reservation with its key path and the GPU pools that launch into it."""
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
    """A reservation lives in one zone of one region; a stack can launch only in its own region."""
    for where, reservation, _ in _reservations(settings):
        if reservation.region != settings.region:
            yield Problem(f"{NAMESPACE}:{where}.availabilityZone", reservation.availability_zone,
                          f"is in {reservation.region}, but the stack's region is {settings.region}; a reservation "
                          f"is used only by instances launched in its own zone (use a {settings.region}<letter> "
                          "reservation)")


def reservation_warnings(settings: Settings) -> list[str]:
    """A Capacity Block that ends within ``RESERVATION_END_WARNING_DAYS`` (or has ended) while a serving
    tier's model runs on a pool that launches into it: EC2 reclaims the block's instances at its end
    (EC2 user guide, "Capacity Blocks for ML"), so that tier loses those nodes."""
    today = support_date()
    tiers_by_pool: dict[str, list[str]] = {}
    for tier in settings.serving.tiers if settings.serving.enabled else []:
        for model in tier.models:
            tiers_by_pool.setdefault(model.pool, [])
            if tier.name not in tiers_by_pool[model.pool]:
                tiers_by_pool[model.pool].append(tier.name)
    out = []
    for where, reservation, pools in _reservations(settings):
        if reservation.end_date is None or reservation.type != contract.RESERVATION_CAPACITY_BLOCK:
            continue
        tiers = sorted({t for p in pools for t in tiers_by_pool.get(p, [])})
        if not tiers:
            continue
        days = (reservation.end_date.date() - today).days
        if days > contract.RESERVATION_END_WARNING_DAYS:
            continue
        when = f"ended on {reservation.end_text}" if days < 0 else f"ends on {reservation.end_text} (in {days} day(s))"
        out.append(f"warning: {NAMESPACE}:{where}.endDate: Capacity Block {reservation.id} {when}; tier(s) "
                   f"{', '.join(tiers)} serve from pool(s) {', '.join(pools)} on it and lose those nodes when EC2 "
                   "reclaims the block: extend the block, buy a new one, or move the models to another pool")
    return out
