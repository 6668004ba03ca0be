"""Reserved capacity in the capacity model (policies/capacity/cost.py, engine.py), worked by hand: the record a
plan carries, the commitment (GPUs and hourly cost paid whether used or not) and the on-demand spend beyond it."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

from policies.capacity.cost import (
    Commitment,
    Reservation,
    WorstCase,
    parse_reservations,
    reservation_text,
    reserved_commitment,
    reserved_split,
)
from policies.capacity.engine import reservations_from_resources


@dataclass(frozen=True)
class Priced:
    name: str
    gpus: int
    hourly_usd: float


BIG = Priced("big", 4, 6.0)
BLOCK = Reservation("cr-0a", "capacity-block", "big", 2, "us-east-1a", "2026-12-20T11:30:00Z")
ODCR = Reservation("cr-0b", "default", "big", 1, "us-east-1b")


def test_the_record_round_trips_and_skips_what_it_cannot_read():
    text = reservation_text([BLOCK, ODCR])
    assert text == ("id=cr-0a type=capacity-block instanceType=big count=2 zone=us-east-1a end=2026-12-20T11:30:00Z;"
                    "id=cr-0b type=default instanceType=big count=1 zone=us-east-1b")
    assert parse_reservations(text) == [BLOCK, ODCR]
    assert parse_reservations("id=cr-0c type=default instanceType=big count=two") == []
    assert parse_reservations(None) == [] and parse_reservations("") == []


def test_the_commitment_counts_each_reservation_once():
    """2 x 4 GPUs + 1 x 4 GPUs = 12 GPUs; 3 instances x $6.00/h = $18.00/h; cr-0a listed twice counts once."""
    assert reserved_commitment([(BLOCK, BIG), (ODCR, BIG), (BLOCK, BIG)]) == Commitment(
        12, 18.0, "cr-0a: 2 x big (8 GPUs) at $6.000/h (Capacity Block, on-demand rate as stand-in); "
                  "cr-0b: 1 x big (4 GPUs) at $6.000/h (ODCR)")


def test_the_split_takes_reserved_gpus_out_of_each_pools_ceiling():
    """Pool a: 16 GPUs at $24/h ($1.50/GPU-h) holds cr-0a's 8 GPUs: 8 x $1.50 = $12/h beyond.
    Pool b: 4 GPUs at $6/h holds cr-0b's 4: nothing beyond. Pool c: no reservation, $3/h beyond."""
    split = reserved_split(
        [("a", WorstCase(16, 24.0, "")), ("b", WorstCase(4, 6.0, "")), ("c", WorstCase(2, 3.0, ""))],
        [("a", BLOCK, BIG), ("b", ODCR, BIG)],
    )
    assert split.on_demand_hourly_usd == 15.0
    assert (split.committed.gpus, split.committed.hourly_usd) == (12, 18.0)


def test_a_reservation_larger_than_its_pool_leaves_no_negative_spend():
    split = reserved_split([("a", WorstCase(4, 6.0, ""))], [("a", BLOCK, BIG)])
    assert split.on_demand_hourly_usd == 0.0


def _resource(type_, name, props, parent=None):
    return SimpleNamespace(type=type_, name=name, urn=f"urn:{type_}::{name}", parent=parent, props=props)


def test_the_engine_reads_a_groups_tag_and_a_reserved_nodepools_class():
    """The group's tag counts; the NodePool counts only while it admits reserved; a type the catalog lacks is
    left out."""
    text = "id=cr-0a type=capacity-block instanceType=p5.48xlarge count=1 zone=us-east-1a end=2026-12-20T11:30:00Z"
    group = _resource("eks:index:ManagedNodeGroup", "h100", {
        "instanceTypes": ["p5.48xlarge"], "capacityType": "CAPACITY_BLOCK",
        "scalingConfig": {"minSize": 0, "desiredSize": 0, "maxSize": 1},
        "tags": {"llm-platform.io/capacity-reservations": text}})
    node_class = _resource("kubernetes:karpenter.k8s.aws/v1:EC2NodeClass", "gpu", {"metadata": {
        "name": "gpu", "annotations": {"llm-platform.io/capacity-reservations":
                                       "id=cr-0b type=default instanceType=g5.12xlarge count=2 zone=us-east-1b;"
                                       "id=cr-0c type=default instanceType=x9.huge count=1 zone=us-east-1b"}}})

    def pool(values):
        return _resource("kubernetes:karpenter.sh/v1:NodePool", "gpu-inference", {
            "metadata": {"name": "gpu-inference"},
            "spec": {"template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "gpu"},
                "requirements": [
                    {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["g5"]},
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": values}]}},
                "limits": {"nvidia.com/gpu": "8"}}})

    found = reservations_from_resources([group, node_class, pool(["reserved", "on-demand"])])
    assert [(key, r.id, r.count, i.name, i.gpus) for key, r, i in found] == [
        (group.urn, "cr-0a", 1, "p5.48xlarge", 8),
        ("urn:kubernetes:karpenter.sh/v1:NodePool::gpu-inference", "cr-0b", 2, "g5.12xlarge", 4),
    ]
    assert [r.id for _, r, _ in reservations_from_resources([group, node_class, pool(["on-demand"])])] == ["cr-0a"]
