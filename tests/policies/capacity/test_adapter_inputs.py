"""What the capacity simulation is given for the dev stack, as literal figures from Pulumi.dev.yaml and
the upstream rules, for each adapter on its own.

The agreement test in test_capacity.py compares the two adapters with each other; both end in
``cluster_from_resources``, so a fault there (or in the charts' DaemonSet table) moves both sides
alike and passes it. Here each side meets the figures a reader can check by hand:

- workloads: Pulumi.dev.yaml's models (llama: cpu "6", memory 28Gi, replicas 0-3; qwen: the serving
  defaults cpu "4", memory 32Gi, replicas 0-4), the gateway (2 replicas, 500m / 1Gi, limit 2Gi); memory
  limits equal to requests on vLLM pods (Guaranteed memory), a rollout surge of one pod (maxSurge 1);
- a node's room: allocatable by the EKS AMI's formulas (CPU reserved 6% / 1% / 0.5% x 2 / 0.25% of the
  rest of the cores: 90m on 8 vCPU, 110m on 16, 80m on 4; memory reserved 11 MiB x maxPods + 255 MiB
  plus the 100 MiB eviction threshold, on Karpenter's 7.5% VM overhead off the nominal memory), less
  the DaemonSets that land there: aws-node 25m, kube-proxy 100m, eks-pod-identity-agent and the node
  exporter nothing, and on GPU nodes the device plugin 50m / 64Mi (the program's values) and
  dcgm-exporter 100m / 128Mi (chart 4.8.2 values); pods: maxPods (ENIs x (IPv4 per ENI - 1) + 2)
  less one per DaemonSet.
"""

from __future__ import annotations

import pytest

from automation.stacks import read_stack_config
from components.capacity_check import CheckedStack, parse_settings
from policies.capacity.engine import cluster_from_resources
from policies.capacity.model import Resources
from policies.capacity.simulate import simulate

#: On the GPU pools that host models, the vLLM image pre-pull too (10m CPU, 16 MiB, one pod slot).
GPU_DAEMONSETS = ("aws-node", "dcgm-exporter", "eks-pod-identity-agent", "kube-proxy", "nvidia-device-plugin",
                  "prometheus-node-exporter", "vllm-image")
SYSTEM_DAEMONSETS = ("aws-node", "eks-pod-identity-agent", "kube-proxy", "prometheus-node-exporter")

LLAMA = "Deployment serving-interactive/llama-3-1-8b-instruct"
QWEN = "Deployment serving-batch/qwen2-5-7b-instruct"
GATEWAY = "Deployment llm-gateway/llm-gateway"

#: name -> (requests, limits, min, max replicas, surge pods, model's architecture, max model length)
DEV_WORKLOADS = {
    LLAMA: (Resources(cpu_m=6000, memory_mib=28 * 1024, gpus=1, pods=1), Resources(memory_mib=28 * 1024, gpus=1),
            0, 3, 1, "llama-3.1-8b-instruct", 8192),
    QWEN: (Resources(cpu_m=4000, memory_mib=32 * 1024, gpus=1, pods=1), Resources(memory_mib=32 * 1024, gpus=1),
           0, 4, 1, "qwen2.5-7b-instruct", 16384),
    GATEWAY: (Resources(cpu_m=500, memory_mib=1024, pods=1), Resources(memory_mib=2048), 2, 2, 1, None, None),
}

#: (pool, instance type) -> (free CPU m, free memory MiB, GPUs, free pod slots, DaemonSets on it)
DEV_SHAPES = {
    # 8 vCPU, 32768 MiB, maxPods 4 x (15 - 1) + 2 = 58
    ("inference", "g5.2xlarge"): (8000 - 90 - 285, 32768 * 0.925 - (11 * 58 + 255) - 100 - 208, 1, 58 - 7, GPU_DAEMONSETS),
    # 16 vCPU, 65536 MiB, maxPods 8 x (30 - 1) + 2 = 234
    ("inference", "g5.4xlarge"): (16000 - 110 - 285, 65536 * 0.925 - (11 * 234 + 255) - 100 - 208, 1, 234 - 7,
                                  GPU_DAEMONSETS),
    ("gpu-inference", "g5.2xlarge"): (8000 - 90 - 285, 32768 * 0.925 - (11 * 58 + 255) - 100 - 208, 1, 58 - 7,
                                      GPU_DAEMONSETS),
    # 4 vCPU, 16384 MiB, maxPods 4 x (15 - 1) + 2 = 58
    ("system", "m7i.xlarge"): (4000 - 80 - 125, 16384 * 0.925 - (11 * 58 + 255) - 100, 0, 58 - 4, SYSTEM_DAEMONSETS),
}

#: Karpenter's NodePools offer the sizes of their families their instanceSizes admit (gpu-inference: g5; gpu-training: g6e).
DEV_POOL_TYPES = {
    "inference": ["g5.2xlarge", "g5.4xlarge"],
    "gpu-inference": ["g5.xlarge", "g5.2xlarge", "g5.4xlarge", "g5.12xlarge"],
    "gpu-training": ["g6e.xlarge", "g6e.2xlarge", "g6e.12xlarge"],
    "system": ["m7i.xlarge"],
}
DEV_PLACEMENTS = {GATEWAY: "system", QWEN: "gpu-inference", LLAMA: "inference"}


@pytest.fixture(scope="module")
def simulations(dev_plan):
    return {"settings": CheckedStack.of(parse_settings(read_stack_config("dev"))).simulation,
            "engine": simulate(cluster_from_resources(dev_plan.resources))}


@pytest.mark.parametrize("adapter", ["settings", "engine"])
def test_dev_workloads_as_the_stack_states_them(simulations, adapter):
    found = {w.name: (w.requests, w.limits, w.min_replicas, w.max_replicas, w.surge,
                      w.model.architecture.name if w.model else None, w.model.max_model_len if w.model else None)
             for plan in simulations[adapter].plans for w in plan.workloads}
    assert found == DEV_WORKLOADS
    assert simulations[adapter].placements == DEV_PLACEMENTS


@pytest.mark.parametrize("adapter", ["settings", "engine"])
def test_dev_node_room_by_the_eks_formulas(simulations, adapter):
    plans = {p.pool.name: p for p in simulations[adapter].plans}
    assert {name: [s.instance.name for s in plan.shapes] for name, plan in plans.items()} == DEV_POOL_TYPES
    for (pool, instance), (cpu_m, memory_mib, gpus, pods, daemonsets) in DEV_SHAPES.items():
        (shape,) = [s for s in plans[pool].shapes if s.instance.name == instance]
        assert (shape.free.cpu_m, shape.free.gpus, shape.free.pods, tuple(sorted(shape.daemonsets))) == (
            cpu_m, gpus, pods, daemonsets), (pool, instance)
        assert shape.free.memory_mib == pytest.approx(memory_mib), (pool, instance)


@pytest.mark.parametrize("adapter", ["settings", "engine"])
def test_dev_pool_bounds(simulations, adapter):
    """The system group's minSize 2 is the one pool that starts with nodes; every GPU pool scales from 0."""
    assert {p.pool.name: p.pool.min_nodes for p in simulations[adapter].plans} == {
        "inference": 0, "gpu-inference": 0, "gpu-training": 0, "system": 2}
