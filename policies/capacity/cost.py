"""Worst-case GPU count and on-demand cost of a pool: the one calculator of these figures.

The pack's cap and budget policies, the offline check's report and the capacity table all call
these (Spot is cheaper, so on-demand is an upper bound):

- node group: ``maxSize`` x the largest GPU count among its types, at the dearest type;
- static NodePool: replicas x GPUs per node, at the dearest admitted type;
- dynamic NodePool: its GPU limit, capped by ``limits.nodes`` x GPUs per node (or that product
  alone without a GPU limit), at the highest per-GPU price among admitted types.

Prices are the stack's region's (``instances.load_instances(region=...)``); a type without a price
there raises :class:`~.instances.UnpricedInstanceError` naming it, rather than being priced at another
region's rate or at nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from .instances import UnpricedInstanceError


class PricedType(Protocol):
    """What pricing reads of an instance type (read-only: a frozen ``Instance`` satisfies it)."""

    @property
    def gpus(self) -> int: ...

    @property
    def hourly_usd(self) -> float | None: ...


def hourly_prices(types: Sequence[PricedType]) -> list[float]:
    """Each type's hourly price, or :class:`UnpricedInstanceError` naming every unpriced one."""
    missing = [t for t in types if t.hourly_usd is None]
    if missing:
        raise UnpricedInstanceError([str(getattr(t, "name", "?")) for t in missing],
                                    str(getattr(missing[0], "region", "?")),
                                    region_unpriced=all(getattr(t, "on_demand_offered", True) is None for t in missing))
    return [float(t.hourly_usd) for t in types]  # type: ignore[arg-type]


@dataclass(frozen=True)
class WorstCase:
    """``gpus`` and ``hourly_usd`` at the pool's ceiling; ``detail`` says how they were reached."""

    gpus: float
    hourly_usd: float
    detail: str


def launchable(types: Sequence[PricedType]) -> list[PricedType]:
    """The types Karpenter may launch on demand: it marks an on-demand offering unavailable when the
    region's Price List has no price for the type (aws/karpenter-provider-aws
    pkg/providers/instancetype/offering/base_resolver.go, ``Available: ... && hasPrice``). So a type the
    catalog's copy of that region's Price List lacks (p5e.48xlarge in us-east-1: Capacity Blocks only)
    is dropped, not priced; in a region the catalog has no prices for at all nothing is known, and
    :func:`hourly_prices` refuses."""
    return [t for t in types if getattr(t, "on_demand_offered", None) is not False]


def per_gpu_hourly_usd(types: Sequence[PricedType]) -> float:
    """The dearest GPU-hour among the ``launchable`` types (0 without GPUs): what a GPU of a pool
    Karpenter fills from ``types`` costs at worst."""
    gpu_types = [t for t in launchable(types) if t.gpus]
    return max((price / t.gpus for t, price in zip(gpu_types, hourly_prices(gpu_types))), default=0.0)


def node_group_worst_case(label: str, max_size: int, types: Sequence[PricedType]) -> WorstCase:
    per_node = max((t.gpus for t in types), default=0)
    price = max(hourly_prices(types), default=0.0) if per_node else 0.0
    return WorstCase(max_size * per_node, max_size * price,
                     f"{label}: {max_size} nodes x {per_node} GPUs at ${price:.3f}/h")


def nodepool_worst_case(label: str, types: Sequence[PricedType], *, static_nodes: int | None,
                        gpu_limit: float | None, node_limit: float | None) -> WorstCase | None:
    """``None`` when nothing bounds the pool's GPUs. Karpenter fills the pool from its ``launchable`` types."""
    types = launchable(types)
    per_node = max((t.gpus for t in types), default=0)
    if static_nodes is not None:
        price = max(hourly_prices(types), default=0.0)
        return WorstCase(static_nodes * per_node, static_nodes * price,
                         f"{label}: {static_nodes} static nodes x {per_node} GPUs at ${price:.3f}/h")
    limit = gpu_limit
    if limit is None and node_limit is not None and per_node:
        limit = node_limit * per_node
    elif limit is not None and node_limit is not None and per_node:
        limit = min(limit, node_limit * per_node)
    if limit is None:
        return None
    per_gpu = per_gpu_hourly_usd(types)
    return WorstCase(limit, limit * per_gpu, f"{label}: limit {limit:g} GPUs at up to ${per_gpu:.3f}/GPU-h")


#: Where a stack records the capacity reservations a pool launches into, so that the pack and the offline
#: report can count them from the plan alone: a managed group's tag, an EC2NodeClass's annotation (EC2
#: returns neither counts nor end dates in the launch template or selector terms). One source: the program
#: writes it with :func:`reservation_text`, the engine reads it with :func:`parse_reservations`.
RESERVATION_KEY = "llm-platform.io/capacity-reservations"
#: Reservation types as EC2 names them (``DescribeCapacityReservations`` ``ReservationType``) and as
#: Karpenter's ``karpenter.k8s.aws/capacity-reservation-type`` label carries them.
CAPACITY_BLOCK, ODCR = "capacity-block", "default"
_FIELDS = ("id", "type", "instanceType", "count", "zone", "end")


@dataclass(frozen=True)
class Reservation:
    """An EC2 capacity reservation as the plan records it: ``count`` instances of ``instance_type`` in
    ``zone``; ``end`` (ISO 8601, UTC) for a Capacity Block, whose instances EC2 reclaims at its end."""

    id: str
    type: str
    instance_type: str
    count: int
    zone: str
    end: str | None = None


def reservation_text(reservations: Sequence[Reservation]) -> str:
    """``id=cr-... type=capacity-block instanceType=p5.48xlarge count=2 zone=us-east-1a end=...``, entries
    joined by ``;`` (a managed group's tag holds one: AWS tag values allow letters, digits, spaces and
    ``_ . : / = + - @``, which this text keeps to)."""
    return ";".join(
        " ".join(f"{k}={v}" for k, v in zip(_FIELDS, (r.id, r.type, r.instance_type, r.count, r.zone, r.end))
                 if v is not None)
        for r in reservations
    )


def parse_reservations(text: object) -> list[Reservation]:
    """What :func:`reservation_text` wrote; entries without an id, type, instance type or a count are
    skipped (a plan the pack did not see built may carry anything)."""
    out = []
    for entry in str(text or "").split(";"):
        fields = dict(part.split("=", 1) for part in entry.split() if "=" in part)
        count = fields.get("count", "")
        if not (fields.get("id") and fields.get("type") and fields.get("instanceType") and count.isdigit()):
            continue
        out.append(Reservation(fields["id"], fields["type"], fields["instanceType"], int(count),
                               fields.get("zone", ""), fields.get("end")))
    return out


@dataclass(frozen=True)
class Commitment:
    """Reserved capacity the stack pays for whether a node runs on it or not."""

    gpus: float
    hourly_usd: float
    detail: str


def reserved_commitment(reservations: Sequence[tuple[Reservation, PricedType]]) -> Commitment:
    """GPUs and hourly cost of ``(reservation, its instance type)`` pairs, each reservation once.

    An On-Demand Capacity Reservation bills its instances at the on-demand rate from the moment it is
    active, used or not (EC2 user guide, "Capacity Reservation pricing and billing"). A Capacity Block is
    paid upfront at the price quoted at purchase, which the catalog does not hold: its hourly figure here
    is the on-demand rate as a stand-in, said so in ``detail`` (docs/reserved-capacity.md)."""
    seen: set[str] = set()
    gpus, hourly, parts = 0.0, 0.0, []
    for reservation, instance in reservations:
        if reservation.id in seen:
            continue
        seen.add(reservation.id)
        price = hourly_prices([instance])[0]
        gpus += reservation.count * instance.gpus
        hourly += reservation.count * price
        kind = "Capacity Block, on-demand rate as stand-in" if reservation.type == CAPACITY_BLOCK else "ODCR"
        parts.append(f"{reservation.id}: {reservation.count} x {reservation.instance_type} "
                     f"({reservation.count * instance.gpus} GPUs) at ${price:.3f}/h ({kind})")
    return Commitment(gpus, hourly, "; ".join(parts))


@dataclass(frozen=True)
class ReservedSplit:
    """The stack's worst-case GPU spend split: ``committed`` reserved capacity (paid whether used or not)
    and ``on_demand_hourly_usd``, what the pools may spend beyond their reservations at their ceilings."""

    committed: Commitment
    on_demand_hourly_usd: float


def reserved_split(pool_cases: Sequence[tuple[str, WorstCase]],
                   reservations: Sequence[tuple[str, Reservation, PricedType]]) -> ReservedSplit:
    """Each pool's worst case less the GPUs its reservations hold (a reservation counts toward the first
    pool that launches into it, as it is one set of instances), priced at the pool's own GPU rate; plus the
    reservations' commitment. A reserved node is inside the pool's ceiling (a NodePool's GPU limit counts
    every node; a managed group on a reservation is capped at its count by the settings), so the GPU total
    does not change: only who pays how."""
    held: dict[str, float] = {}
    seen: set[str] = set()
    for key, reservation, instance in reservations:
        if reservation.id not in seen:
            seen.add(reservation.id)
            held[key] = held.get(key, 0.0) + reservation.count * instance.gpus
    beyond = sum(max(0.0, case.gpus - held.get(key, 0.0)) * case.hourly_usd / case.gpus
                 for key, case in pool_cases if case.gpus > 0)
    return ReservedSplit(reserved_commitment([(r, i) for _, r, i in reservations]), beyond)
