"""Node packing as a specification: several pods per node, mixed workload shapes and mixed GPU sizes
in one pool, with the node counts at min and max replicas and the findings stated as literal numbers.

Figures (instance_catalog.json, EKS allocatable): g5.12xlarge leaves 4 GPUs, 47810m CPU and 737 pod
slots; g5.xlarge leaves 1 GPU and 3920m CPU. No DaemonSet in these clusters, so a node's free room is
its allocatable. Packing is first-fit-decreasing: the larger pods go first, the smaller ones fill the
room they leave, then new nodes open.
"""

from __future__ import annotations

from policies.capacity.instances import Instance, Resources, load_instances
from policies.capacity.model import Cluster, Pool, Selection, Workload
from policies.capacity.simulate import simulate

CATALOG = load_instances()


def gpu_pool(*types: str, kind: str = "Managed node group", source: str = "Cluster Autoscaler", min_nodes: int = 1,
             max_nodes: int | None = None, gpu_limit: float | None = None) -> Pool:
    return Pool(name="gpu", kind=kind, instances=[CATALOG.instances[t] for t in types], labels={}, taints=[],
                min_nodes=min_nodes, max_nodes=max_nodes, gpu_limit=gpu_limit, capacity_source=source)


def workload(name: str, gpus: int, min_replicas: int, max_replicas: int, cpu_m: float = 4000) -> Workload:
    requests = Resources(cpu_m=cpu_m, memory_mib=8192, gpus=gpus, pods=1)
    return Workload(name=name, kind="Deployment", namespace="llm", requests=requests, limits=requests,
                    tolerations=[], selection=Selection.of(), min_replicas=min_replicas, max_replicas=max_replicas)


def findings(cluster: Cluster) -> list[tuple]:
    return [(f.check, f.workload, f.resource, f.need, f.have, f.blocking) for f in simulate(cluster).findings]


def the_plan(cluster: Cluster):
    [plan] = simulate(cluster).plans
    return plan


# --- one shape, several pods per node ----------------------------------------------------------------


def test_four_one_gpu_pods_share_a_four_gpu_node_and_the_last_partly_filled_node_counts():
    """5 pods at min: 4 + 1 = 2 nodes; 9 at max: 4 + 4 + 1 = 3 nodes."""
    plan = the_plan(Cluster(pools=[gpu_pool("g5.12xlarge", max_nodes=3)], workloads=[workload("a", 1, 5, 9)]))
    assert (plan.nodes_at_min, plan.nodes_at_max) == (2, 3)
    assert (plan.gpus_at_min, plan.gpus_at_max) == (5, 9)


def test_a_pool_at_its_node_max_holds_max_replicas_and_one_node_fewer_does_not():
    at_max = Cluster(pools=[gpu_pool("g5.12xlarge", max_nodes=3)], workloads=[workload("a", 1, 5, 9)])
    assert findings(at_max) == []
    short = Cluster(pools=[gpu_pool("g5.12xlarge", max_nodes=2)], workloads=[workload("a", 1, 5, 9)])
    assert findings(short) == [("pool-max", "a", "nodes", "3 nodes", "max 2", True)]


def test_min_replicas_beyond_the_node_max_is_a_pool_min_finding_not_a_pool_max_one():
    cluster = Cluster(pools=[gpu_pool("g5.12xlarge", max_nodes=1)], workloads=[workload("a", 1, 5, 9)])
    assert findings(cluster) == [("pool-min", None, "nodes", "2 nodes", "max 1", True)]


def test_cpu_bound_pods_pack_by_cpu_not_by_gpu():
    """20000m CPU each: 47810m holds 2 per node although 4 GPUs are free; 3 pods need 2 nodes."""
    plan = the_plan(Cluster(pools=[gpu_pool("g5.12xlarge", max_nodes=5)],
                            workloads=[workload("a", 1, 3, 5, cpu_m=20000)]))
    assert (plan.nodes_at_min, plan.nodes_at_max) == (2, 3)


def test_the_pool_minimum_raises_the_node_count_at_min_but_not_at_max():
    plan = the_plan(Cluster(pools=[gpu_pool("g5.12xlarge", min_nodes=4, max_nodes=6)],
                            workloads=[workload("a", 1, 1, 2)]))
    assert (plan.nodes_at_min, plan.nodes_at_max) == (4, 1)


# --- mixed workload shapes in one pool -------------------------------------------------------------


def mixed(max_nodes: int) -> Cluster:
    """a: 1 GPU, 5..9 replicas; b: 2 GPUs, 1..3 replicas; both on g5.12xlarge (4 GPUs)."""
    return Cluster(pools=[gpu_pool("g5.12xlarge", max_nodes=max_nodes)],
                   workloads=[workload("a", 1, 5, 9), workload("b", 2, 1, 3)])


def test_small_pods_fill_the_room_a_larger_pod_leaves():
    """At min: b on node 1 with two of a beside it, a's other 3 on node 2 = 2 nodes (3 without filling).
    At max: b b | b a a | a a a a | a a a = 4 nodes (15 GPUs on 4-GPU nodes)."""
    plan = the_plan(mixed(max_nodes=4))
    assert (plan.nodes_at_min, plan.nodes_at_max) == (2, 4)
    assert (plan.gpus_at_min, plan.gpus_at_max) == (7, 15)


def test_each_workload_reaches_its_max_with_the_others_at_min_and_only_all_at_max_overcommits():
    """With 3 nodes: a's 4 extra replicas use the 1 GPU left at min plus 1 new node (2 + 1 = 3);
    b's 2 extra replicas need 2 free GPUs on one node, found on 1 new node (3). All at max needs 4."""
    assert findings(mixed(max_nodes=3)) == [("overcommit", None, "nodes", "4 nodes", "max 3", False)]


def test_one_node_fewer_and_both_workloads_miss_their_max():
    assert findings(mixed(max_nodes=2)) == [
        ("pool-max", "a", "nodes", "3 nodes", "max 2", True),
        ("pool-max", "b", "nodes", "3 nodes", "max 2", True),
        ("overcommit", None, "nodes", "4 nodes", "max 2", False),
    ]


def test_the_larger_workload_alone_needs_new_nodes_for_its_extra_replicas():
    """b at max (3 x 2 GPUs) with a at min: base b a a | a a a leaves 1 GPU, no room for a 2-GPU pod, so
    b's 2 extra replicas open ceil(2 / 2) = 1 node: 3. A GPU limit of 8 (2 nodes) refuses it."""
    cluster = Cluster(pools=[gpu_pool("g5.12xlarge", kind="Karpenter NodePool", source="Karpenter", min_nodes=0,
                                      gpu_limit=8)],
                      workloads=[workload("a", 1, 5, 5), workload("b", 2, 1, 3)])
    assert findings(cluster) == [
        ("pool-max", "b", "nvidia.com/gpu", "12 GPUs", "limit 8", True),
        ("overcommit", None, "nvidia.com/gpu", "12 GPUs", "limit 8", False),
    ]


# --- mixed GPU sizes in one pool --------------------------------------------------------------------


def test_a_node_group_with_mixed_gpu_sizes_is_planned_on_its_roomiest_type():
    """Cluster Autoscaler's best case: g5.12xlarge (4 GPUs), so 6 one-GPU pods take 2 nodes."""
    plan = the_plan(Cluster(pools=[gpu_pool("g5.xlarge", "g5.12xlarge", min_nodes=1, max_nodes=2)],
                            workloads=[workload("a", 1, 6, 6, cpu_m=900)]))
    assert plan.planning.instance.name == "g5.12xlarge"
    assert (plan.nodes_at_min, plan.nodes_at_max) == (2, 2)


def test_karpenter_with_mixed_gpu_sizes_plans_on_the_cheapest_type_that_holds_the_pods():
    """Karpenter launches the cheapest fitting type: g5.xlarge, one 1-GPU pod per node, 6 nodes; its
    GPU limit 5 allows 5 one-GPU nodes (the smallest type bounds the node count)."""
    cluster = Cluster(pools=[gpu_pool("g5.12xlarge", "g5.xlarge", kind="Karpenter NodePool", source="Karpenter",
                                      min_nodes=0, gpu_limit=5)],
                      workloads=[workload("a", 1, 6, 6, cpu_m=900)])
    plan = the_plan(cluster)
    assert plan.planning.instance.name == "g5.xlarge"
    assert (plan.nodes_at_min, plan.nodes_at_max) == (6, 6)
    assert plan.max_nodes == 5
    assert findings(cluster) == [("pool-min", None, "nvidia.com/gpu", "6 GPUs", "limit 5", True)]


def test_karpenter_skips_the_cheap_type_a_two_gpu_pod_does_not_fit():
    """A 2-GPU pod does not fit g5.xlarge (1 GPU), so the plan is g5.12xlarge: 2 per node, 3 pods = 2 nodes."""
    plan = the_plan(Cluster(pools=[gpu_pool("g5.xlarge", "g5.12xlarge", kind="Karpenter NodePool",
                                            source="Karpenter", min_nodes=0, gpu_limit=16)],
                            workloads=[workload("b", 2, 3, 3, cpu_m=900)]))
    assert plan.planning.instance.name == "g5.12xlarge"
    assert (plan.nodes_at_min, plan.nodes_at_max) == (2, 2)
    assert plan.max_nodes == 16


def test_a_cluster_autoscaler_group_at_zero_plans_only_on_its_first_type():
    """A group at 0 nodes is sized by its first override (g5.xlarge): the 2-GPU pod fits nowhere."""
    cluster = Cluster(pools=[gpu_pool("g5.xlarge", "g5.12xlarge", min_nodes=0, max_nodes=4)],
                      workloads=[workload("b", 2, 1, 1, cpu_m=900)])
    [fit] = [f for f in simulate(cluster).findings if f.check == "fit"]
    assert (fit.resource, fit.need, fit.have) == ("nvidia.com/gpu", "2", "1")
    assert "(g5.xlarge)" in fit.message and "(g5.12xlarge)" not in fit.message
    assert "Cluster Autoscaler sizes a group at 0 nodes by its first instance type" in fit.message


# --- the roomiest node named in a fit finding; plans without workloads -------------------------------

CPU_HEAVY = Instance("cpu-heavy.8xlarge", "g", "cpu-heavy", 32, 65536, 1, "a10g", 22888, 2.0, 58)
MEMORY_HEAVY = Instance("memory-heavy.8xlarge", "g", "memory-heavy", 16, 131072, 1, "a10g", 22888, 2.0, 58)


def test_a_fit_finding_names_the_roomiest_type_by_gpus_then_cpu_then_memory():
    """Neither 1-GPU type holds a 2-GPU pod; with GPUs equal, the one with more CPU is the roomiest."""
    pool = Pool(name="gpu", kind="Karpenter NodePool", instances=[MEMORY_HEAVY, CPU_HEAVY], labels={}, taints=[],
                gpu_limit=8, capacity_source="Karpenter")
    cluster = Cluster(pools=[pool], workloads=[workload("b", 2, 1, 1, cpu_m=900)])
    [fit] = [f for f in simulate(cluster).findings if f.check == "fit"]
    assert (fit.resource, fit.need, fit.have) == ("nvidia.com/gpu", "2", "1")
    assert "(cpu-heavy.8xlarge)" in fit.message and "memory-heavy" not in fit.message


def test_a_pool_nothing_lands_on_plans_no_nodes():
    plan = the_plan(Cluster(pools=[gpu_pool("g5.12xlarge", max_nodes=3)]))
    assert (plan.nodes_at_min, plan.nodes_at_max, plan.gpus_at_min, plan.gpus_at_max) == (0, 0, 0, 0)


def test_a_gpu_limit_bounds_no_nodes_of_a_pool_without_gpus():
    cpu = Pool(name="cpu", kind="Karpenter NodePool", instances=[CATALOG.instances["m7i.xlarge"]], labels={},
               taints=[], gpu_limit=4, capacity_source="Karpenter")
    assert the_plan(Cluster(pools=[cpu])).max_nodes is None
    cpu.node_limit = 6
    assert the_plan(Cluster(pools=[cpu])).max_nodes == 6
