"""karpenter-gpu-nodepool-limits, gpu-capacity-cap, gpu-monthly-budget, gpu-namespace-quota."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.policies.builders import (
    DELETE,
    GPU,
    NODE_GROUP_SHAPES,
    UNKNOWN,
    gpu_node_group,
    nodepool,
    patch,
    resource,
    resource_quota,
    system_node_group,
    template_path,
    workload,
)
from tests.policies.conftest import ROOT, one

LIMITS, CAP, BUDGET, QUOTA = "karpenter-gpu-nodepool-limits", "gpu-capacity-cap", "gpu-monthly-budget", "gpu-namespace-quota"
REQS = "spec.template.spec.requirements"
CATALOG = json.loads((Path(__file__).resolve().parents[3] / "policies" / "instance_catalog.json").read_text())
HOURS = CATALOG["hoursPerMonth"]


def price(instance: str) -> float:
    return CATALOG["onDemandHourlyUsd"]["us-east-1"][instance]


def sized(max_size: int, shape: str = NODE_GROUP_SHAPES[0], types=("g5.xlarge", "g5.2xlarge")):
    return patch(gpu_node_group(shape), {"scalingConfig.maxSize": max_size, "instanceTypes": list(types)})


def family_pool(families, limit, **spec):
    requirements = [{"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": list(families)}]
    return patch(nodepool(**spec), {REQS: requirements, "spec.limits": {GPU: str(limit)} if limit is not None else {}})


# --- per NodePool ---------------------------------------------------------------------------------


def test_gpu_nodepool_needs_a_gpu_limit(pack):
    one(pack.messages(patch(nodepool(), {"spec.limits": {"cpu": "64"}}), LIMITS), "has no spec.limits['nvidia.com/gpu']")


@pytest.mark.parametrize(
    "res",
    [
        nodepool(),
        patch(nodepool(), {"spec.limits": {"nodes": "2"}, "spec.replicas": 2}),
        patch(nodepool(), {REQS: [{"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["m"]}],
                           "spec.limits": {"cpu": "64"}}),
        patch(nodepool(), {"spec.limits": UNKNOWN}),
        patch(nodepool(), {"spec.limits": {GPU: UNKNOWN}}),
    ],
    ids=["limited", "static", "cpu-pool", "unknown-limits", "unknown-gpu-limit"],
)
def test_nodepools_without_limit_findings(pack, res):
    assert pack.messages(res, LIMITS) == []


# --- stack GPU cap --------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", NODE_GROUP_SHAPES)
def test_node_groups_within_cap(pack, shape):
    assert pack.stack_messages([sized(16, shape), system_node_group(shape)], CAP) == []


@pytest.mark.parametrize("shape", NODE_GROUP_SHAPES)
def test_node_groups_above_cap(pack, shape):
    one(pack.stack_messages([sized(17, shape)], CAP), "Worst-case GPU count is 17, above the cap of 16",
        "17 nodes x 1 GPUs")


def test_largest_gpu_count_per_instance_type_and_nodepool_limits_add_up(pack):
    resources = [sized(3, types=("g5.xlarge", "g5.12xlarge")), family_pool(["g5"], 8)]
    one(pack.stack_messages(resources, CAP), "GPU count is 20", "3 nodes x 4 GPUs", "limit 8 GPUs")


@pytest.mark.parametrize(
    "pool, gpus",
    [
        (patch(nodepool(), {"spec.limits": {GPU: "64", "nodes": "20"}}), 20),
        (patch(nodepool(), {"spec.limits": {"nodes": "17"}}), 17),
        (patch(family_pool(["p5"], None), {"spec.replicas": 3, "spec.limits": {"nodes": "3"}}), 24),
    ],
    ids=["nodes-caps-gpu-limit", "nodes-only", "static"],
)
def test_nodepool_bounds(pack, pool, gpus):
    one(pack.stack_messages([pool], CAP), f"GPU count is {gpus},")


def test_unbounded_nodepool(pack):
    pool = patch(nodepool(), {"spec.limits": {"cpu": "64"}})
    one(pack.stack_messages([pool], CAP), "has no limits['nvidia.com/gpu'], so its GPU count is unbounded")


def test_uncatalogued_gpu_type(pack):
    one(pack.stack_messages([sized(1, types=("g4ad.xlarge",))], CAP), "g4ad.xlarge are not in instance_catalog.json")


def test_cap_is_configurable(pack):
    pack.configure({CAP: {"maxGpus": 40}})
    assert pack.stack_messages([sized(40)], CAP) == []


def test_real_preview_counts_a_managed_node_group_once(pack):
    """A pulumi-eks component and the aws NodeGroup it creates are one pool (component has only outputs)."""
    component = resource("eks:index:ManagedNodeGroup", "inference", {"nodeGroup": {"id": "x"}})
    child = sized(10, NODE_GROUP_SHAPES[1])
    child = {**child, "parent": component["urn"],
             "urn": child["urn"].replace("::aws:eks", "::eks:index:ManagedNodeGroup$aws:eks")}
    assert pack.stack_messages([component, child], CAP) == []
    one(pack.stack_messages([component, patch(child, {"scalingConfig.maxSize": 17})], CAP), "GPU count is 17")


@pytest.mark.parametrize(
    "resources",
    [
        [patch(sized(40), {"scalingConfig": UNKNOWN})],
        [patch(sized(40), {"instanceTypes": UNKNOWN})],
        [patch(nodepool(), {"spec.limits": UNKNOWN})],
        [patch(nodepool(), {REQS: UNKNOWN, "spec.limits": {"cpu": "1"}})],
    ],
    ids=["scaling", "types", "limits", "requirements"],
)
def test_unknown_capacity_is_not_judged(pack, resources):
    assert pack.stack_messages(resources, CAP) == [] and pack.stack_messages(resources, BUDGET) == []


# --- stack budget ---------------------------------------------------------------------------------


def test_budget_uses_the_most_expensive_type_and_per_gpu_prices(pack):
    group = sized(10, types=("g5.xlarge", "g5.4xlarge"))
    pool = family_pool(["p5"], 8)
    expected = 10 * price("g5.4xlarge") * HOURS + 8 * price("p5.48xlarge") / 8 * HOURS
    one(pack.stack_messages([group, pool], BUDGET), f"${expected:,.0f}/month", "above the budget of $20,000",
        "10 nodes x 1 GPUs at $1.624/h", "limit 8 GPUs at up to $6.880/GPU-h")


@pytest.mark.parametrize("limit, over", [(10, False), (20, True)])
def test_nodepool_priced_at_its_dearest_selectable_gpu(pack, limit, over):
    """g5 + g6e at sizes xlarge/2xlarge: the dearest per-GPU type is g6e.2xlarge."""
    pool = patch(nodepool(), {
        REQS: [
            {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["g5", "g6e"]},
            {"key": "karpenter.k8s.aws/instance-size", "operator": "In", "values": ["xlarge", "2xlarge"]},
        ],
        "spec.limits": {GPU: str(limit)},
    })
    messages = pack.stack_messages([pool], BUDGET)
    if over:
        one(messages, f"${limit * price('g6e.2xlarge') * HOURS:,.0f}/month", "$2.242/GPU-h")
    else:
        assert messages == []


def test_unpriceable_nodepool_uses_the_dearest_catalog_gpu(pack):
    pool = family_pool(["g4ad"], 4)
    one(pack.stack_messages([pool], BUDGET), f"${4 * price('p6-b300.48xlarge') / 8 * HOURS:,.0f}/month")


def test_budget_is_configurable(pack):
    pack.configure({BUDGET: {"monthlyBudgetUsd": 60000}})
    assert pack.stack_messages([sized(10, types=("g5.4xlarge",)), family_pool(["p5"], 8)], BUDGET) == []


# --- namespace quota ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "resources",
    [
        [workload(), resource_quota()],
        [workload(gpus=None, tolerate=False), ],
        [patch(workload(), {"metadata.namespace": UNKNOWN})],
        [workload(), patch(resource_quota(), {"metadata.namespace": UNKNOWN})],
        [workload(), patch(resource_quota(), {"spec.hard": UNKNOWN})],
        [patch(workload(), {"metadata.namespace": DELETE}), resource_quota("default")],
    ],
    ids=["quota", "cpu-only", "unknown-workload-ns", "unknown-quota-ns", "unknown-hard", "default-ns"],
)
def test_namespaces_with_gpu_quota(pack, resources):
    assert pack.stack_messages(resources, QUOTA) == []


@pytest.mark.parametrize(
    "resources, fragment",
    [
        ([workload()], "it has no ResourceQuota with requests.nvidia.com/gpu"),
        ([workload(), resource_quota("batch")], "it has no ResourceQuota"),
        ([workload(), resource_quota(hard={"requests.cpu": "64"})], "it has no ResourceQuota"),
        ([workload("Job"), resource_quota(hard={f"limits.{GPU}": "4"})], "sets only limits.nvidia.com/gpu"),
    ],
    ids=["none", "other-namespace", "cpu-quota", "limits-only"],
)
def test_namespaces_without_gpu_quota(pack, resources, fragment):
    one(pack.stack_messages(resources, QUOTA), "Namespace 'serving' runs GPU workloads", fragment)


# --- the pack and the offline check's report quote one worst case ---------------------------------

WORST = {"all": "mandatory", CAP: {"maxGpus": 0}, BUDGET: {"monthlyBudgetUsd": 0}}


def pack_worst_case(pack, resources) -> tuple[float, int]:
    """The pack's worst-case GPUs and monthly USD, read from its cap and budget findings at zero."""
    pack.configure(WORST)
    findings = [line for policy in (CAP, BUDGET) for m in pack.stack_messages(resources, policy)
                for line in m.splitlines() if line.startswith("Worst-case GPU")]
    (gpus,), (usd,) = ([f for f in findings if kind in f] for kind in ("GPU count", "GPU spend"))
    return (float(gpus.split(" is ", 1)[1].split(",", 1)[0]),
            int(usd.split("$", 1)[1].split("/month", 1)[0].replace(",", "")))


def report_worst_case(plan) -> tuple[float, int]:
    from automation.offline.report import summarize

    summary = summarize(plan)
    return summary.worst_case_gpus, round(summary.worst_case_gpu_monthly_usd)


def test_pack_and_report_agree_on_the_recorded_plans(pack, stack_plan):
    figures = pack_worst_case(pack, stack_plan.resources)
    assert figures == report_worst_case(stack_plan)
    # Pool ceilings hold each model's rollout surge pod: dev's 'inference' group
    # 3 -> 4 nodes (+1 x $1.624/h x 730 h), prod's 'inference-l40s' 4 -> 5 nodes (+1 x $2.242/h x 730 h)
    # and 'gpu-interactive' 16 -> 20 GPUs (+4 x $2.036/GPU-h x 730 h). Both stacks' 'gpu-inference' NodePool
    # then took instanceSizes xlarge-12xlarge: its dearest GPU-hour is g5.4xlarge's $1.624, not the
    # 24xlarge/48xlarge's $2.036 (-8 x $0.412 x 730 h = -$2,406).
    assert figures == {"dev": (16, 21886), "prod": (55, 86565)}[stack_plan.stack]


def test_pack_and_report_agree_where_node_limits_and_static_replicas_bound_a_pool(pack):
    """``limits.nodes`` caps a GPU limit, static replicas fix the count: both sides honour them."""
    from automation.offline.plan import Plan, PlannedResource

    resources = [
        sized(3),
        patch(nodepool("capped"), {"spec.limits": {GPU: "64", "nodes": "5"}}),
        patch(family_pool(["g6e"], None, name="fixed"), {"spec.replicas": 2, "spec.limits": {"nodes": "2"}}),
    ]
    plan = Plan("llm-platform", "synthetic", [PlannedResource(**r) for r in resources])
    figures = pack_worst_case(pack, resources)
    assert figures == report_worst_case(plan)
    g6e_largest = max(i["gpus"] for n, i in CATALOG["instances"].items() if n.startswith("g6e."))
    assert figures[0] == 3 * 1 + 5 * 1 + 2 * g6e_largest


# --- quotas scoped to a PriorityClass count only that class's pods, at prod's level -----------------

def _scoped(operator="In", *values):
    expression = {"scopeName": "PriorityClass", "operator": operator, **({"values": list(values)} if values else {})}
    return patch(resource_quota(), {"spec.scopeSelector": {"matchExpressions": [expression]}})


def _with_priority(name):
    return patch(workload(), {f"{template_path('Deployment')}.priorityClassName": name})


def test_a_priority_scoped_quota_does_not_cover_other_classes(pack):
    pack.configure(ROOT / "policies" / "config" / "prod.json")
    one(pack.stack_messages([_with_priority("batch"), _scoped("In", "interactive")], QUOTA),
        "Namespace 'serving'", "PriorityClass scopeSelector that does not select this workload's priority class (batch)")
    one(pack.stack_messages([workload(), _scoped("Exists")], QUOTA), "priority class (none)")


def test_a_priority_scoped_quota_covers_its_class(pack):
    pack.configure(ROOT / "policies" / "config" / "prod.json")
    assert pack.stack_messages([_with_priority("interactive"), _scoped("In", "interactive")], QUOTA) == []
    assert pack.stack_messages([_with_priority("batch"), _scoped("NotIn", "interactive")], QUOTA) == []


def test_time_sliced_gpus_need_their_own_quota(pack):
    """nvidia.com/gpu.shared is a GPU by another name: a quota on requests.nvidia.com/gpu does not count it."""
    pack.configure(ROOT / "policies" / "config" / "prod.json")
    shared = patch(workload(gpus=None), {f"{template_path('Deployment')}.containers.0.resources.limits":
                                         {"memory": "16Gi", "nvidia.com/gpu.shared": "1"}})
    one(pack.stack_messages([shared, resource_quota()], QUOTA), "it has no ResourceQuota with requests.nvidia.com/gpu.shared")
    assert pack.stack_messages([shared, resource_quota(hard={"requests.nvidia.com/gpu.shared": "8"})], QUOTA) == []


def test_a_family_pool_is_priced_at_its_big_sizes_unless_its_sizes_are_restricted(pack):
    """g5 admits g5.16xlarge (1 A10G, 64 vCPU, $4.096/h): Karpenter launches it when it fits pending pods
    best, so 8 GPUs cost up to 8 x 4.096 x 730 = $23,921/month. Restricted to xlarge-12xlarge, the dearest
    GPU-hour is g5.4xlarge's $1.624: $9,484/month, under the $20,000 budget."""
    one(pack.stack_messages([family_pool(["g5"], 8)], BUDGET), "$23,921/month", "limit 8 GPUs at up to $4.096/GPU-h")
    restricted = patch(family_pool(["g5"], 8), {REQS: [
        {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["g5"]},
        {"key": "karpenter.k8s.aws/instance-size", "operator": "In", "values": ["xlarge", "2xlarge", "4xlarge", "12xlarge"]},
    ]})
    assert pack.stack_messages([restricted], BUDGET) == []
