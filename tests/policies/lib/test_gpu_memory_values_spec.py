"""GPU memory a pool offers (policies/lib/pools.py gpu_memory_values), read from gpu-workload-schedulable:
the contract label when its value is known, else the catalog (A10G: 22888 MiB) when every instance type
is in it, else not known (the pod is not judged on memory)."""

from __future__ import annotations

from tests.policies.builders import UNKNOWN, gpu_node_group, workload
from tests.policies.conftest import one

SCHEDULABLE = "gpu-workload-schedulable"
MEMORY_LABEL = "llm-platform.io/gpu-memory-mib"
NEEDS_40000 = {"llm-platform.io/gpu-memory-mib": "40000"}


def group(**inputs) -> dict:
    return gpu_node_group(**inputs)


def test_a_label_not_known_yet_falls_back_to_the_catalog(pack):
    labels = {**gpu_node_group()["inputs"]["labels"], MEMORY_LABEL: UNKNOWN}
    one(pack.stack_messages([group(labels=labels), workload(annotations=NEEDS_40000)], SCHEDULABLE),
        "managed node group 'inference': its GPUs have 22888 MiB, the pod needs 40000 MiB per GPU")


def test_a_pool_with_an_uncatalogued_type_is_not_judged_on_memory(pack):
    labels = {k: v for k, v in gpu_node_group()["inputs"]["labels"].items() if k != MEMORY_LABEL}
    pool = group(labels=labels, instanceTypes=["g5.xlarge", "x9.mystery"])
    assert pack.stack_messages([pool, workload(annotations=NEEDS_40000)], SCHEDULABLE) == []
    catalogued = group(labels=labels, instanceTypes=["g5.xlarge", "g5.2xlarge"])
    one(pack.stack_messages([catalogued, workload(annotations=NEEDS_40000)], SCHEDULABLE),
        "its GPUs have 22888 MiB, the pod needs 40000 MiB per GPU")
