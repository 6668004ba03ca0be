"""Reserved capacity settings as a specification (docs/reserved-capacity.md): each validator with a failing
and a passing literal case, the key it names, and the 14-day Capacity Block warning on fixed dates."""

from __future__ import annotations

import copy

import pytest
from pydantic import ValidationError

from components.capacity_check import parse_settings
from components.settings import SettingsError, config_strings
from components.settings.karpenter import Karpenter
from components.settings.managed_pools import GpuPool
from components.settings.reservation_rules import reservation_problems, reservation_warnings
from components.settings.reservations import CapacityReservation
from tests.fixtures.reserved_copies import BLOCK_POOL, ODCR, capacity_block_copy, karpenter_reserved_copy
from tests.support.config_changes import with_changes

BLOCK = BLOCK_POOL["reservation"]


def problems(config) -> list[tuple[str, str]]:
    try:
        parse_settings(config_strings(config))
    except SettingsError as error:
        return [(p.key, p.reason) for p in error.problems]
    return []


def messages(model, data) -> list[tuple[tuple, str]]:
    """``(key path, message)``: a ``keyed`` error's path below the model is added to its location."""
    try:
        model.model_validate(data)
    except ValidationError as exc:
        return [(tuple(e["loc"]) + tuple((e.get("ctx") or {}).get("path", ())), e["msg"]) for e in exc.errors()]
    return []


# --- one reservation -------------------------------------------------------------------------------


def test_a_capacity_block_and_an_odcr_are_accepted():
    assert messages(CapacityReservation, BLOCK) == []
    assert messages(CapacityReservation, ODCR) == []
    block = CapacityReservation.model_validate(BLOCK)
    assert (block.region, block.end_text) == ("us-east-1", "2026-12-20T11:30:00Z")


@pytest.mark.parametrize("rid", ["cr-0123456789ABCDEF0", "cr_0123", "0123456789abcdef0", "cr-", "ri-0123abc",
                                 "cr-zzzzzzzzzzzzzzzzz", "cr-0123456789abcdef", "cr-0123456789abcdef00"])
def test_a_malformed_reservation_id_is_refused(rid):
    assert messages(CapacityReservation, {**BLOCK, "id": rid}) == [
        (("id",), f"Value error, {rid!r} is not a capacity reservation id such as cr-0123456789abcdef0 (cr- and "
                  "17 lowercase hexadecimal digits, as EC2 writes them)")]


def test_an_absurdly_long_reservation_id_is_refused_and_shown_cut():
    [(loc, msg)] = messages(CapacityReservation, {**BLOCK, "id": "cr-" + "0" * 5000})
    assert loc == ("id",) and msg == (f"Value error, {'cr-' + '0' * 37!r} is not a capacity reservation id such as "
                                      "cr-0123456789abcdef0 (cr- and 17 lowercase hexadecimal digits, as EC2 writes them)")


@pytest.mark.parametrize("end", [1797766200, 1797766200.5, True])
def test_an_end_date_written_as_a_number_is_refused_not_read_as_unix_seconds(end):
    [(loc, msg)] = messages(CapacityReservation, {**BLOCK, "endDate": end})
    assert loc == ("endDate",) and msg == (f"Value error, {str(end)!r} is not an ISO 8601 date-time such as "
                                           "2026-12-01T11:30:00Z (a number is not read as a date)")


@pytest.mark.parametrize("zone", ["us-east-1", "use1-az1", "us-nowhere-9a", "us-east-1ab"])
def test_a_zone_that_is_not_an_az_name_is_refused(zone):
    [(loc, msg)] = messages(CapacityReservation, {**BLOCK, "availabilityZone": zone})
    assert loc == ("availabilityZone",) and msg.startswith(f"Value error, {zone!r} is not an Availability Zone name")


def test_a_capacity_block_needs_its_end_date_in_utc():
    without = {k: v for k, v in BLOCK.items() if k != "endDate"}
    [(loc, msg)] = messages(CapacityReservation, without)
    assert loc == ("endDate",) and msg.startswith("a capacity-block reservation needs its endDate")
    [(loc, msg)] = messages(CapacityReservation, {**BLOCK, "endDate": "2026-12-20T11:30:00+02:00"})
    assert loc == ("endDate",) and "must be UTC (end it with Z)" in msg
    [(loc, msg)] = messages(CapacityReservation, {**BLOCK, "endDate": "20 Dec 2026"})
    assert "is not an ISO 8601 date-time such as 2026-12-01T11:30:00Z" in msg
    assert messages(CapacityReservation, {**ODCR}) == []  # an ODCR without an end date is open-ended


def test_an_unknown_instance_type_is_refused():
    [(loc, msg)] = messages(CapacityReservation, {**BLOCK, "instanceType": "p9.huge"})
    assert loc == ("instanceType",) and msg.startswith("Value error, unknown instance type(s) p9.huge")


# --- managed GPU pools ------------------------------------------------------------------------------


def test_a_capacity_block_pool_is_accepted():
    assert messages(GpuPool, BLOCK_POOL) == []


@pytest.mark.parametrize(
    "changes, loc, start",
    [
        ({"reservation": None}, ("reservation",), "capacityType CAPACITY_BLOCK on pool 'reserved-h100' needs a "
                                                    "reservation"),
        ({"capacityType": "ON_DEMAND"}, ("capacityType",), "ON_DEMAND with a capacity-block reservation"),
        ({"reservation": {**BLOCK, "instanceType": "p5.4xlarge"}}, ("reservation", "instanceType"),
         "p5.4xlarge is not among the pool's instanceTypes (p5.48xlarge)"),
        ({"instanceTypes": ["p5.48xlarge", "p5.4xlarge"]}, ("instanceTypes",),
         "p5.4xlarge besides the reserved p5.48xlarge"),
        ({"scaling": {"minSize": 0, "desiredSize": 0, "maxSize": 2}}, ("scaling", "maxSize"),
         "maxSize 2 is above the reservation's instanceCount 1"),
        ({"capacityType": "SPOT", "instanceTypes": ["g5.12xlarge", "g5.24xlarge"], "reservation": dict(ODCR)},
         ("capacityType",), "SPOT with an On-Demand Capacity Reservation (type default)"),
    ],
    ids=["block-without-reservation", "block-on-demand", "type-not-in-pool", "other-types", "above-count",
         "odcr-on-spot"],
)
def test_a_managed_pool_whose_reservation_cannot_be_used_is_refused(changes, loc, start):
    [(found_loc, msg)] = messages(GpuPool, {**BLOCK_POOL, **changes})
    assert found_loc == loc and msg.startswith(start), msg


def test_an_odcr_pool_is_accepted():
    pool = {**BLOCK_POOL, "capacityType": "ON_DEMAND", "instanceTypes": ["g5.12xlarge"], "reservation": dict(ODCR)}
    assert messages(GpuPool, pool) == []


# --- Karpenter ---------------------------------------------------------------------------------------


def _karpenter(config) -> dict:
    return copy.deepcopy(config["llm-platform:karpenter"])


def test_the_karpenter_reserved_copy_is_accepted():
    assert messages(Karpenter, _karpenter(karpenter_reserved_copy())) == []


def test_reserved_without_selector_terms_is_refused():
    data = _karpenter(karpenter_reserved_copy())
    data["nodeClasses"][0].pop("capacityReservations")
    [(loc, msg)] = messages(Karpenter, data)
    assert loc == ("nodePools", 0, "capacityTypes")
    assert msg.startswith("nodePools 'gpu-inference' lists reserved, but nodeClasses 'gpu' selects no capacity "
                          "reservation")


def test_tag_terms_alone_satisfy_reserved():
    data = _karpenter(karpenter_reserved_copy())
    data["nodeClasses"][0].pop("capacityReservations")
    data["nodeClasses"][0]["capacityReservationTags"] = [{"team": "ml-platform"}]
    assert messages(Karpenter, data) == []


def test_a_reservation_no_reserved_pool_can_launch_is_refused():
    data = _karpenter(karpenter_reserved_copy())
    data["nodeClasses"][0]["capacityReservations"][0]["instanceType"] = "g6e.12xlarge"  # only gpu-training has g6e
    [(loc, msg)] = messages(Karpenter, data)
    assert loc == ("nodeClasses", 0, "capacityReservations", 0, "instanceType")
    assert msg.startswith("g6e.12xlarge is in no NodePool that lists reserved on this class "
                          "(pools with reserved: gpu-inference (g5))")


def test_a_repeated_reservation_and_empty_tags_are_refused():
    data = _karpenter(karpenter_reserved_copy())
    data["nodeClasses"][0]["capacityReservations"] *= 2
    [(loc, msg)] = messages(Karpenter, data)
    assert loc == ("nodeClasses", 0, "capacityReservations", 1, "id")
    data = _karpenter(karpenter_reserved_copy())
    data["nodeClasses"][0]["capacityReservationTags"] = [{"team": ""}]
    [(loc, msg)] = messages(Karpenter, data)
    assert loc == ("nodeClasses", 0, "capacityReservationTags", 0)


def test_reserved_on_auto_mode_is_refused():
    config = with_changes(capacity_block_copy(), {"autoMode": {"enabled": True, "gpuNodePools": [{
        "name": "auto-gpu", "instanceFamilies": ["g5"], "capacityTypes": ["reserved"], "gpuLimit": 4}]}})
    found = problems(config)
    assert ("llm-platform:autoMode.gpuNodePools[0].capacityTypes",) == tuple(k for k, _ in found if "autoMode" in k)


# --- the stack: parse, region, warnings -------------------------------------------------------------


def test_both_dev_copies_parse_clean():
    assert problems(capacity_block_copy()) == []
    assert problems(karpenter_reserved_copy()) == []


def test_a_wrong_reservation_is_one_problem_at_its_key():
    config = with_changes(capacity_block_copy(), {"gpuPools__1__reservation__id": "cr-XYZ"})
    [(key, reason)] = problems(config)
    assert key == "llm-platform:gpuPools[1].reservation.id"
    assert reason.startswith("'cr-XYZ' is not a capacity reservation id")


def test_a_reservation_outside_the_stacks_region_is_a_problem():
    settings = parse_settings(config_strings(capacity_block_copy()))
    assert list(reservation_problems(settings)) == []
    moved = with_changes(capacity_block_copy(), {"gpuPools__1__reservation__availabilityZone": "us-west-2a"})
    with pytest.raises(SettingsError) as raised:
        parse_settings(config_strings(moved))
    [problem] = raised.value.problems
    assert problem.key == "llm-platform:gpuPools[1].reservation.availabilityZone"
    assert problem.reason.startswith("is in us-west-2, but the stack's region is us-east-1")


@pytest.mark.parametrize(
    "today, expected",
    [
        ("2026-12-05", None),  # 15 days before 2026-12-20
        ("2026-12-06", "ends on 2026-12-20T11:30:00Z (in 14 day(s))"),
        ("2026-12-20", "ends on 2026-12-20T11:30:00Z (in 0 day(s))"),
        ("2026-12-21", "ended on 2026-12-20T11:30:00Z"),
    ],
)
def test_a_tier_on_a_block_that_ends_within_14_days_is_warned(monkeypatch, today, expected):
    monkeypatch.setenv("LLM_PLATFORM_TODAY", today)
    warnings = reservation_warnings(parse_settings(config_strings(capacity_block_copy())))
    if expected is None:
        assert warnings == []
        return
    [warning] = warnings
    assert warning.startswith(f"warning: llm-platform:gpuPools[1].reservation.endDate: Capacity Block "
                              f"cr-0123456789abcdef0 {expected}; tier(s) batch serve from pool(s) reserved-h100")


def test_a_block_no_tier_serves_from_is_not_warned(monkeypatch):
    monkeypatch.setenv("LLM_PLATFORM_TODAY", "2026-12-19")
    config = capacity_block_copy()
    batch = next(i for i, t in enumerate(config["llm-platform:serving"]["tiers"]) if t["name"] == "batch")
    config = with_changes(config, {f"serving__tiers__{batch}__models__0__pool": "gpu-inference"})
    assert reservation_warnings(parse_settings(config_strings(config))) == []


def test_a_karpenter_capacity_block_under_a_tier_is_warned(monkeypatch):
    """The batch tier's model serves from gpu-inference, which lists reserved on class gpu."""
    monkeypatch.setenv("LLM_PLATFORM_TODAY", "2026-12-10")
    block = {**ODCR, "id": "cr-0aaaabbbbccccdddd", "type": "capacity-block", "endDate": "2026-12-20T11:30:00Z"}
    config = with_changes(karpenter_reserved_copy(), {"karpenter__nodeClasses__0__capacityReservations": [block]})
    [warning] = reservation_warnings(parse_settings(config_strings(config)))
    assert warning.startswith("warning: llm-platform:karpenter.nodeClasses[0].capacityReservations[0].endDate: "
                              "Capacity Block cr-0aaaabbbbccccdddd ends on 2026-12-20T11:30:00Z (in 10 day(s)); "
                              "tier(s) batch serve from pool(s) gpu-inference")


def test_an_end_date_without_a_zone_is_refused_whatever_its_form():
    from datetime import UTC, datetime
    [(loc, msg)] = messages(CapacityReservation, {**BLOCK, "endDate": datetime(2026, 12, 20, 11, 30)})
    assert loc == ("endDate",) and msg == ("Value error, '2026-12-20T11:30:00' must be UTC (end it with Z), as EC2 "
                                           "reports a block's end")
    assert messages(CapacityReservation, {**BLOCK, "endDate": datetime(2026, 12, 20, 11, 30, tzinfo=UTC)}) == []
    [(loc, msg)] = messages(CapacityReservation, {**BLOCK, "endDate": "2026-12-20T11:30:00"})
    assert msg == "Value error, '2026-12-20T11:30:00' must be UTC (end it with Z), as EC2 reports a block's end"


def test_a_reserved_only_pool_whose_min_replicas_outgrow_its_reservation_is_refused():
    """As the pack's capacity-simulation judges it: gpu-inference admits only reserved capacity, its class selects
    one g5.12xlarge ODCR (4 GPUs), and the batch model on it keeps 5 one-GPU replicas: one stays Pending."""
    config = with_changes(karpenter_reserved_copy(), {
        "karpenter__nodeClasses__0__capacityReservations": [{**ODCR, "instanceCount": 1}],
        "karpenter__nodePools__0__capacityTypes": ["reserved"],
        "serving__tiers__1__models__0__replicas": {"min": 5, "max": 5},
        "serving__tiers__1__quota__gpus": 8,
    })
    with pytest.raises(SettingsError) as raised:
        parse_settings(config_strings(config))
    reserved = [p for p in raised.value.problems if p.key == "llm-platform:karpenter.nodePools[0].capacityTypes"]
    assert len(reserved) == 1, raised.value.problems
    assert reserved[0].value == ["reserved"]
    assert ("Karpenter NodePool 'gpu-inference' launches only into capacity reservations, which hold 4 GPUs, but its "
            "workloads (Deployment serving-batch/qwen2-5-7b-instruct) need 5 at min replicas") in reserved[0].reason


def test_a_reserved_only_pool_within_its_reservation_is_accepted():
    config = with_changes(karpenter_reserved_copy(), {"karpenter__nodePools__0__capacityTypes": ["reserved"]})
    parse_settings(config_strings(config))


def test_a_tag_term_holds_one_to_twenty_tags():
    """Karpenter's CRD: a term's tags map has maxProperties 20."""
    twenty = {f"k{i}": "v" for i in range(20)}
    data = _karpenter(karpenter_reserved_copy())
    data["nodeClasses"][0].pop("capacityReservations")
    data["nodeClasses"][0]["capacityReservationTags"] = [twenty]
    assert messages(Karpenter, data) == []
    data["nodeClasses"][0]["capacityReservationTags"] = [{**twenty, "k20": "v"}]
    [(loc, msg)] = messages(Karpenter, data)
    assert loc == ("nodeClasses", 0, "capacityReservationTags", 0)
    assert "a tag term holds 1-20 tags (Karpenter's CRD), got 21" in msg


def test_a_managed_block_is_over_when_eks_scales_its_group_down(monkeypatch):
    """Textbook: a block ending 2026-12-20T00:30Z serves through that day. EKS scales a managed group on it to
    0 forty minutes before the end (EKS user guide, capacity-blocks-mng), 2026-12-19T23:50Z: on the 20th its
    nodes are gone and Cluster Autoscaler only retries the group."""
    monkeypatch.setenv("LLM_PLATFORM_TODAY", "2026-12-20")
    config = with_changes(capacity_block_copy(), {"gpuPools__1__reservation__endDate": "2026-12-20T00:30:00Z"})
    [warning] = reservation_warnings(parse_settings(config_strings(config)))
    assert warning == (
        "warning: llm-platform:gpuPools[1].reservation.endDate: Capacity Block cr-0123456789abcdef0 ended on "
        "2026-12-20T00:30:00Z; tier(s) batch serve from pool(s) reserved-h100 on it and lose those nodes when EKS "
        "scales the group to 0 at 2026-12-19T23:50:00Z, 40 minutes before the end; Cluster Autoscaler does not know "
        "the block's window and keeps retrying the group (backing off up to 30 minutes) while the models stay "
        "Pending: extend the block, buy a new one, or move the models to another pool")


def test_a_karpenter_block_is_judged_at_its_end(monkeypatch):
    """Karpenter drains capacity-block nodes on EC2's interruption warning, not on EKS's group scale-down."""
    monkeypatch.setenv("LLM_PLATFORM_TODAY", "2026-12-20")
    block = {**ODCR, "id": "cr-0aaaabbbbccccdddd", "type": "capacity-block", "endDate": "2026-12-20T00:30:00Z"}
    config = with_changes(karpenter_reserved_copy(), {"karpenter__nodeClasses__0__capacityReservations": [block]})
    [warning] = reservation_warnings(parse_settings(config_strings(config)))
    assert "Capacity Block cr-0aaaabbbbccccdddd ends on 2026-12-20T00:30:00Z (in 0 day(s))" in warning
    assert warning.endswith("lose those nodes when EC2 reclaims the block: extend the block, buy a new one, or move "
                            "the models to another pool")


# --- one reservation, counted once; a block that has ended ------------------------------------------


def test_one_reservation_declared_on_two_pools_is_refused_at_the_second():
    config = capacity_block_copy()
    second = {**copy.deepcopy(BLOCK_POOL), "name": "reserved-h100-b"}
    config = with_changes(config, {"gpuPools": config["llm-platform:gpuPools"] + [second]})
    found = [(k, r) for k, r in problems(config) if k.endswith(".id")]
    assert found == [("llm-platform:gpuPools[2].reservation.id",
                      "is declared again (first at llm-platform:gpuPools[1].reservation): its instances would be "
                      "counted twice against the stack's capacity; declare each reservation once, on the one pool "
                      "or node class that launches into it")]


def test_one_reservation_declared_with_two_different_types_names_what_differs():
    config = karpenter_reserved_copy()
    pool = copy.deepcopy(BLOCK_POOL)
    pool["reservation"]["id"] = "cr-0fedcba9876543210"  # the Karpenter class's ODCR, declared here as a block
    config = with_changes(config, {"gpuPools": config["llm-platform:gpuPools"] + [pool],
                                   "gpuBudget": {"maxGpus": 64, "monthlyBudgetUsd": 200000}})
    found = [(k, r) for k, r in problems(config) if k.endswith(".id")]
    assert found == [("llm-platform:karpenter.nodeClasses[0].capacityReservations[0].id",
                      "is declared again (first at llm-platform:gpuPools[1].reservation, with another type, "
                      "availabilityZone, instanceType, instanceCount, endDate): its instances would be counted twice "
                      "against the stack's capacity; declare each reservation once, on the one pool or node class "
                      "that launches into it")]


def test_an_ended_block_under_a_model_that_keeps_replicas_is_refused(monkeypatch):
    monkeypatch.setenv("LLM_PLATFORM_TODAY", "2026-12-21")
    config = with_changes(capacity_block_copy(), {"serving__tiers__1__models__0__replicas": {"min": 1, "max": 4}})
    found = [(k, r) for k, r in problems(config) if k.endswith("endDate")]
    assert found == [("llm-platform:gpuPools[1].reservation.endDate",
                      "Capacity Block cr-0123456789abcdef0 has ended; model(s) qwen2-5-7b-instruct keep replicas on "
                      "pool(s) reserved-h100, which EC2 no longer gives instances from this block: buy a new block "
                      "(its id and endDate), or move the models to another pool")]
    # The same block a day before it ends: a warning, no problem.
    monkeypatch.setenv("LLM_PLATFORM_TODAY", "2026-12-19")
    assert [k for k, _ in problems(config) if k.endswith("endDate")] == []


def test_an_ended_block_under_a_scale_to_zero_model_is_warned_not_refused(monkeypatch):
    monkeypatch.setenv("LLM_PLATFORM_TODAY", "2026-12-21")
    settings = parse_settings(config_strings(capacity_block_copy()))  # batch: min 0
    [warning] = reservation_warnings(settings)
    assert warning.startswith("warning: llm-platform:gpuPools[1].reservation.endDate: Capacity Block "
                              "cr-0123456789abcdef0 ended on 2026-12-20T11:30:00Z; tier(s) batch serve from pool(s) "
                              "reserved-h100")


def test_an_ended_block_under_a_pool_nothing_serves_from_is_warned(monkeypatch):
    monkeypatch.setenv("LLM_PLATFORM_TODAY", "2026-12-21")
    config = with_changes(capacity_block_copy(), {"serving__tiers__1__models__0__pool": "gpu-inference"})
    assert reservation_warnings(parse_settings(config_strings(config))) == [
        "warning: llm-platform:gpuPools[1].reservation.endDate: Capacity Block cr-0123456789abcdef0 ended on "
        "2026-12-20T11:30:00Z; pool(s) reserved-h100 launch(es) into it and get no instances from it any more: "
        "remove the reservation, or replace it with a current block"]


def test_a_reserved_only_node_pool_whose_only_block_ended_is_refused(monkeypatch):
    monkeypatch.setenv("LLM_PLATFORM_TODAY", "2026-12-21")
    block = {**ODCR, "id": "cr-0aaaabbbbccccdddd", "type": "capacity-block", "endDate": "2026-12-20T11:30:00Z"}
    config = with_changes(karpenter_reserved_copy(), {"karpenter__nodeClasses__0__capacityReservations": [block],
                                                      "karpenter__nodePools__0__capacityTypes": ["reserved"]})
    found = [(k, r) for k, r in problems(config) if k == "llm-platform:karpenter.nodePools[0].capacityTypes"]
    assert found == [("llm-platform:karpenter.nodePools[0].capacityTypes",
                      "only reserved, and every reservation of node class 'gpu' (cr-0aaaabbbbccccdddd) is a Capacity "
                      "Block that has ended: the NodePool can launch nothing; add spot or on-demand, or select a "
                      "current reservation")]
    # With spot and on-demand beside reserved it still launches: no problem.
    config = with_changes(config, {"karpenter__nodePools__0__capacityTypes": ["reserved", "spot", "on-demand"]})
    assert [k for k, _ in problems(config) if k.startswith("llm-platform:karpenter.nodePools")] == []
