"""Karpenter settings validators as a specification: each with a failing and a passing case, ranges as
numbers (cron fields per crontab(5) as Karpenter's robfig/cron parser reads them; durations up to Go's
time.Duration maximum, 2562047h), messages checked for what they must and must not say."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from components.settings.karpenter import (
    AutoMode,
    Consolidation,
    DisruptionBudget,
    Karpenter,
    KarpenterNodeClass,
    KarpenterNodePool,
    Kubelet,
)


def messages(model, data: dict) -> list[str]:
    try:
        model.model_validate(data)
    except ValidationError as exc:
        return [e["msg"] for e in exc.errors()]
    return []


CRON_MESSAGE = ("Value error, {!r} is not a cron schedule like '0 9 * * mon-fri' (UTC) or '@daily'; fields: minute "
                "0-59, hour 0-23, day of month 1-31, month 1-12 or jan-dec, day of week 0-6 or sun-sat")


@pytest.mark.parametrize(
    "schedule",
    ["0 9 * * mon-fri", "@daily", "@hourly", "59 23 31 12 6", "0 0 1 1 0", "*/15 * * * *", "0 0 * jan-dec sun-sat",
     "0,30 8-17 * * 1-5", "0 */23 * * *", "0 9 * * MON", "0 9 * * 6-sat", "0 9 * * 0-sun", "0 9 * 1-jan *",
     "0 9 * 12-dec *"],
)
def test_cron_schedules_in_range(schedule):
    assert messages(DisruptionBudget, {"nodes": "1", "schedule": schedule, "duration": "1h"}) == []


@pytest.mark.parametrize(
    "schedule",
    ["60 9 * * *", "0 24 * * *", "0 9 0 * *", "0 9 32 * *", "0 9 * 0 *", "0 9 * 13 *", "0 9 * * 7",
     "0 9 * * fri-mon", "0 9 * * mon-tue-wed", "0 9 * * funday", "*/0 * * * *", "*/60 * * * *", "0 9 * *",
     "@often"],
)
def test_cron_schedules_out_of_range(schedule):
    assert messages(DisruptionBudget, {"nodes": "1", "schedule": schedule, "duration": "1h"}) == [
        CRON_MESSAGE.format(schedule)]


@pytest.mark.parametrize("nodes, ok", [("0", True), ("10%", True), ("100%", True), (3, True), ("101%", False),
                                       ("ten", False), ("-1", False), (True, False), ("5.5", False)])
def test_budget_nodes(nodes, ok):
    found = messages(DisruptionBudget, {"nodes": nodes})
    assert found == ([] if ok else [f"Value error, {nodes!r} is not a node count like '2' or a percentage like '10%'"])


@pytest.mark.parametrize("duration, ok", [("8h", True), ("30m", True), ("15h30m", True), ("2562047h", True),
                                          ("2562048h", False), ("10s", False), ("1d", False), ("h", False)])
def test_budget_duration(duration, ok):
    found = messages(DisruptionBudget, {"nodes": "1", "schedule": "@daily", "duration": duration})
    assert found == ([] if ok else [f"Value error, {duration!r} is not a budget duration like '8h', '30m' or '15h30m'"])


@pytest.mark.parametrize("budget", [{"nodes": "1", "schedule": "@daily"}, {"nodes": "1", "duration": "1h"}])
def test_schedule_and_duration_go_together(budget):
    assert messages(DisruptionBudget, budget) == [
        "Value error, schedule and duration must be set together (or neither, for an always-on budget)"]
    assert messages(DisruptionBudget, {"nodes": "1"}) == []


@pytest.mark.parametrize("policy, message", [
    ("WhenEmpty", None), ("WhenEmptyOrUnderutilized", None), ("Balanced", None),
    ("WhenUnderutilized", "Value error, WhenUnderutilized is the v1beta1 value and is invalid in karpenter.sh/v1; "
                          "use WhenEmptyOrUnderutilized"),
    ("Always", "Value error, 'Always' is not allowed; allowed: WhenEmpty, WhenEmptyOrUnderutilized, Balanced"),
])
def test_consolidation_policy(policy, message):
    assert messages(Consolidation, {"policy": policy}) == ([] if message is None else [message])


@pytest.mark.parametrize("after, ok", [("30s", True), ("5m", True), ("1h30m", True), ("Never", True),
                                       ("2562047h", True), ("2562047h1s", False), ("never", False), ("5", False)])
def test_consolidate_after(after, ok):
    found = messages(Consolidation, {"after": after})
    assert found == ([] if ok else [f"Value error, {after!r} is not a duration like '30s' or '5m', or 'Never'"])


def test_consolidation_defaults():
    assert Consolidation().model_dump() == {"policy": "WhenEmptyOrUnderutilized", "after": "5m"}


@pytest.mark.parametrize("low, high, ok", [(75, 85, True), (84, 85, True), (85, 85, False), (90, 85, False),
                                           (0, 1, True)])
def test_image_gc_low_below_high(low, high, ok):
    found = messages(Kubelet, {"imageGcLowThresholdPercent": low, "imageGcHighThresholdPercent": high})
    assert found == ([] if ok else [f"Value error, imageGcLowThresholdPercent ({low}) must be below "
                                    f"imageGcHighThresholdPercent ({high})"])


def test_eviction_signals():
    assert messages(Kubelet, {"evictionHard": {"pid.available": "10%", "nodefs.inodesFree": "5%"}}) == []
    assert messages(Kubelet, {"evictionHard": {"cpu.available": "10%"}}) == [
        "Value error, unknown eviction signal(s) cpu.available; allowed: memory.available, nodefs.available, "
        "nodefs.inodesFree, imagefs.available, imagefs.inodesFree, pid.available"]
    assert Kubelet().eviction_hard == {"memory.available": "5%", "nodefs.available": "10%", "imagefs.available": "10%"}


POOL = {"name": "gpu", "nodeClass": "gpu", "instanceFamilies": ["g5"], "gpuLimit": 8}


@pytest.mark.parametrize("changes, message", [
    ({}, None),
    ({"instanceFamilies": ["g6e"]}, None),
    ({"instanceFamilies": ["m7i"]}, "Value error, unknown GPU instance family m7i; allowed: "),
    ({"instanceFamilies": ["g5", "g6e"]},
     "Value error, mixes GPU models a10g, l40s; a pool holds one GPU model so its labels stay true"),
    ({"purpose": "gpu-dra"}, "Value error, gpu-dra is not allowed on Karpenter or Auto Mode capacity"),
    ({"expireAfter": "Never"}, None),
    ({"expireAfter": "30d"}, "Value error, '30d' is not a duration like '720h', or 'Never'"),
    ({"expireAfter": "2562048h"}, "Value error, '2562048h' is not a duration like '720h', or 'Never'"),
])
def test_nodepool(changes, message):
    found = messages(KarpenterNodePool, {**POOL, **changes})
    if message is None:
        assert found == []
    else:
        [msg] = found
        assert msg.startswith(message)
        if "unknown GPU instance family" in message:
            allowed = msg.split("allowed: ")[1].split(", ")
            assert "g5" in allowed and "g6e" in allowed and "m7i" not in allowed


def test_nodepool_figures_and_defaults():
    pool = KarpenterNodePool.model_validate(POOL)
    assert (pool.accelerator, pool.gpu_memory_mib) == ("a10g", 22888)
    assert {t.name for t in pool.instances} >= {"g5.xlarge", "g5.12xlarge"}
    assert all(t.family == "g5" for t in pool.instances)
    assert (pool.expire_after, pool.weight, pool.capacity_types) == ("720h", 10, ["on-demand"])
    assert [b.nodes for b in pool.budgets] == ["10%"]


CLASS = {"name": "gpu"}


@pytest.mark.parametrize("settings, message", [
    ({"enabled": True, "nodeClasses": [CLASS], "nodePools": [POOL]}, None),
    ({"enabled": False}, None),
    ({"enabled": True, "nodeClasses": [CLASS]}, "enabled is true but no nodePools are defined"),
    ({"nodeClasses": [CLASS, CLASS], "nodePools": [POOL]},
     "nodeClass name 'gpu' is repeated; nodeClasses names must be unique"),
    ({"nodeClasses": [CLASS], "nodePools": [POOL, POOL]},
     "nodePool name 'gpu' is repeated; nodePools names must be unique"),
    ({"nodeClasses": [CLASS], "nodePools": [{**POOL, "nodeClass": "cpu"}]},
     "nodePools 'gpu' names nodeClass 'cpu'; defined: gpu"),
    ({"nodeClasses": [], "nodePools": [POOL]}, "nodePools 'gpu' names nodeClass 'gpu'; defined: none"),
    ({"nodeClasses": [{"name": "gpu", "kubelet": {"maxPods": 58}}], "nodePools": [POOL]}, None),
    ({"nodeClasses": [{"name": "gpu", "kubelet": {"maxPods": 59}}], "nodePools": [POOL]},
     "Value error, nodeClasses 'gpu' sets kubelet.maxPods 59, but the VPC CNI gives g5.xlarge (nodePools 'gpu') "
     "only 58 pod IPs; remove maxPods (Karpenter derives it per instance type) or set it to at most 58"),
    ({"nodeClasses": [{"name": "gpu", "ami": "latest"}], "nodePools": [POOL]},
     "Value error, nodeClasses gpu use ami: latest, which drifts every node on each AMI release; use ami: pinned "
     "or set allowLatestAmi: true (never in production)"),
    ({"allowLatestAmi": True, "nodeClasses": [{"name": "gpu", "ami": "latest"}], "nodePools": [POOL]}, None),
])
def test_karpenter_references(settings, message):
    assert messages(Karpenter, settings) == ([] if message is None else [message])


def test_node_class_ami_alias_follows_the_pin():
    pinned = KarpenterNodeClass.model_validate(CLASS)
    latest = KarpenterNodeClass.model_validate({"name": "gpu", "ami": "latest"})
    assert pinned.ami_alias.startswith("al2023@v") and latest.ami_alias == "al2023@latest"


def test_auto_mode_pools_need_auto_mode():
    assert messages(AutoMode, {"enabled": True, "gpuNodePools": [POOL]}) == []
    assert messages(AutoMode, {"enabled": False, "gpuNodePools": [POOL]}) == [
        "gpuNodePools are set but enabled is false"]
    assert messages(AutoMode, {"enabled": False}) == []
