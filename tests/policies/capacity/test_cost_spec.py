"""Worst-case GPUs and on-demand cost of a pool (policies/capacity/cost.py), worked by hand."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from policies.capacity.cost import WorstCase, node_group_worst_case, nodepool_worst_case, per_gpu_hourly_usd


@dataclass(frozen=True)
class Priced:
    gpus: int
    hourly_usd: float


SMALL, BIG, CPU = Priced(1, 1.0), Priced(4, 6.0), Priced(0, 0.5)


def test_dearest_gpu_hour():
    """SMALL: $1.00 per GPU-hour, BIG: $6.00 / 4 = $1.50; CPU types have no GPU-hour."""
    assert per_gpu_hourly_usd([SMALL, BIG, CPU]) == 1.5
    assert per_gpu_hourly_usd([CPU]) == 0.0 and per_gpu_hourly_usd([]) == 0.0


def test_node_group_at_its_max_size():
    """3 nodes x 4 GPUs (the largest type) at the dearest type's $6.00/h."""
    assert node_group_worst_case("g", 3, [SMALL, BIG]) == WorstCase(12, 18.0, "g: 3 nodes x 4 GPUs at $6.000/h")
    assert node_group_worst_case("c", 3, [CPU]) == WorstCase(0, 0.0, "c: 3 nodes x 0 GPUs at $0.000/h")


def test_static_nodepool():
    found = nodepool_worst_case("s", [SMALL, BIG], static_nodes=2, gpu_limit=100, node_limit=1)
    assert found == WorstCase(8, 12.0, "s: 2 static nodes x 4 GPUs at $6.000/h")


@pytest.mark.parametrize(
    "gpu_limit, node_limit, gpus",
    [(10, None, 10), (None, 3, 12), (10, 2, 8), (6, 2, 6), (None, None, None)],
    ids=["gpu-limit", "node-limit-times-largest", "node-limit-caps", "gpu-limit-caps", "unbounded"],
)
def test_dynamic_nodepool(gpu_limit, node_limit, gpus):
    found = nodepool_worst_case("d", [SMALL, BIG], static_nodes=None, gpu_limit=gpu_limit, node_limit=node_limit)
    if gpus is None:
        assert found is None
    else:
        assert found == WorstCase(gpus, gpus * 1.5, f"d: limit {gpus:g} GPUs at up to $1.500/GPU-h")


def test_a_node_limit_bounds_nothing_without_gpu_types():
    assert nodepool_worst_case("c", [CPU], static_nodes=None, gpu_limit=None, node_limit=5) is None
