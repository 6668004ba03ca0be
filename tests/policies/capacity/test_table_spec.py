"""Capacity rows (policies/capacity/table.py) as a specification: node and GPU bounds, headroom and
cost at min and max, worked by hand on two made-up GPU types with round prices."""

from __future__ import annotations

import pytest

from policies.capacity.cost import WorstCase
from policies.capacity.instances import Instance, Resources, load_instances
from policies.capacity.model import Cluster, Pool, Selection, Workload
from policies.capacity.simulate import simulate
from policies.capacity.table import capacity_rows, stack_worst_case

SMALL = Instance("a.xlarge", "g", "a", 8, 32768, 1, "a10g", 22888, 1.0, 58)  # $1.00 per GPU-hour
BIG = Instance("a.4xlarge", "g", "a", 48, 196608, 4, "a10g", 22888, 5.0, 234)  # $1.25 per GPU-hour
CPU = load_instances().instances["m7i.xlarge"]


def workload(min_replicas: int, max_replicas: int) -> Workload:
    pod = Resources(cpu_m=1000, memory_mib=4096, gpus=1, pods=1)
    return Workload("a", "Deployment", "llm", pod, pod, [], Selection.of(), min_replicas, max_replicas)


def row(pool: Pool, *workloads: Workload):
    cluster = Cluster(pools=[pool], workloads=list(workloads))
    [only] = capacity_rows(cluster, simulate(cluster))
    return only


def test_a_node_group_row():
    """Planned on its roomiest type (4 GPUs): 2 pods at min fit 1 node; priced at the dearest type, $5/h.
    Worst case 3 nodes x 4 GPUs = 12 GPUs, $15/h; headroom 12 - 2 = 10 at min, 12 - 5 = 7 at max."""
    pool = Pool("g", "managed node group", [SMALL, BIG], {}, [], min_nodes=1, max_nodes=3,
                capacity_source="Cluster Autoscaler")
    found = row(pool, workload(2, 5))
    assert (found.pool, found.kind, found.source) == ("g", "managed node group", "Cluster Autoscaler")
    assert (found.min_nodes, found.max_nodes, found.gpus_per_node, found.min_gpus_per_node) == (1, 3, 4, 1)
    assert (found.max_gpus, found.gpus_at_min, found.gpus_at_max) == (12, 2, 5)
    assert (found.headroom_at_min, found.headroom_at_max) == (10, 7)
    assert (found.hourly_usd_at_min, found.hourly_usd_at_max) == (5.0, 15.0)
    assert found.workloads == ["a"]
    assert found.worst_case_detail == "managed node group 'g': 3 nodes x 4 GPUs at $5.000/h"


def test_a_karpenter_row_prices_min_at_the_cheapest_packing():
    """3 pods at min: 3 small nodes at $1 = $3/h beats 1 big node at $5/h. Max: the GPU limit 8 at the
    dearest GPU-hour, $1.25: $10/h. The smallest type bounds nodes: 8 / 1 = 8."""
    pool = Pool("k", "Karpenter NodePool", [SMALL, BIG], {}, [], gpu_limit=8, capacity_source="Karpenter")
    found = row(pool, workload(3, 5))
    assert (found.hourly_usd_at_min, found.hourly_usd_at_max) == (3.0, 10.0)
    assert (found.max_nodes, found.max_gpus, found.headroom_at_min, found.headroom_at_max) == (8, 8, 5, 3)
    assert found.worst_case_detail == "Karpenter NodePool 'k': limit 8 GPUs at up to $1.250/GPU-h"


def test_a_static_nodepool_without_workloads_pays_its_fixed_nodes_at_the_cheapest_type():
    pool = Pool("s", "Karpenter NodePool", [BIG, SMALL], {}, [], static_nodes=2, capacity_source="fixed nodes")
    found = row(pool)
    assert (found.hourly_usd_at_min, found.hourly_usd_at_max, found.max_gpus) == (2.0, 10.0, 8)
    assert (found.gpus_at_min, found.gpus_at_max, found.headroom_at_min) == (0, 0, 8)


def test_a_static_nodepool_with_no_known_type_costs_nothing_known():
    pool = Pool("s", "Karpenter NodePool", [], {}, [], static_nodes=2, capacity_source="fixed nodes")
    found = row(pool)
    assert (found.hourly_usd_at_min, found.min_gpus_per_node, found.headroom_at_min) == (0.0, 0, None)


def test_an_unbounded_nodepool_and_a_cpu_group_have_no_headroom():
    unbounded = row(Pool("u", "Karpenter NodePool", [SMALL], {}, [], capacity_source="Karpenter"), workload(1, 1))
    assert (unbounded.max_gpus, unbounded.hourly_usd_at_max, unbounded.headroom_at_min) == (None, None, None)
    assert unbounded.worst_case_detail == "unbounded" and unbounded.source == "Karpenter"
    cpu = row(Pool("c", "managed node group", [CPU], {}, [], min_nodes=2, max_nodes=4))
    assert (cpu.gpus_per_node, cpu.min_gpus_per_node, cpu.headroom_at_min, cpu.source) == (0, 0, None, "none")
    assert (cpu.hourly_usd_at_min, cpu.hourly_usd_at_max) == (pytest.approx(2 * 0.2016), pytest.approx(4 * 0.2016))


def test_the_stacks_worst_case_adds_its_gpu_pools():
    pools = [Pool("g", "managed node group", [BIG], {}, [], max_nodes=2),
             Pool("k", "Karpenter NodePool", [SMALL], {}, [], gpu_limit=3),
             Pool("c", "managed node group", [CPU], {}, [], max_nodes=5),
             Pool("u", "Karpenter NodePool", [SMALL], {}, [])]
    assert stack_worst_case(pools) == WorstCase(
        11, 13.0, "managed node group 'g': 2 nodes x 4 GPUs at $5.000/h; Karpenter NodePool 'k': limit 3 GPUs at up "
                  "to $1.000/GPU-h")
