"""The weight-fetch step's own figures (policies/capacity/cold_start.py weight_fetch): the network
figure is the catalog's bandwidth for the node's type (g5.12xlarge: 40,000 Mbps, g5.2xlarge: 5,000), and
weights the node-local cache holds cost nothing, predicted or bounded."""

from __future__ import annotations

import pytest

from policies.capacity.cold_start import weight_fetch
from policies.capacity.instances import load_instances

INSTANCES = load_instances().instances


@pytest.mark.parametrize("instance, mbps", [("g5.12xlarge", 40_000), ("g5.2xlarge", 5_000)])
def test_the_fetch_names_the_nodes_network_bandwidth(instance, mbps):
    step = weight_fetch(16_060_522_496, INSTANCES[instance], 500)
    (network,) = [f for f in step.figures if f.name == f"{instance} network bandwidth"]
    assert (network.value, network.unit) == (mbps, "Mbps")


def test_cached_weights_cost_nothing():
    step = weight_fetch(16_060_522_496, INSTANCES["g5.2xlarge"], 500, cached=True)
    assert (step.name, step.seconds, step.bound_seconds, step.figures) == ("weights", 0.0, 0.0, ())
    assert step.detail == "node-local cache holds them"
