"""Every GPU workload can land somewhere: a pool whose labels meet its node selection, whose
taints it tolerates, whose nodes have enough GPUs and enough GPU memory.

A workload that fits no pool stays Pending forever (and with Karpenter, a NodePool whose labels
match but whose taint is not tolerated will not even try). GPU memory is judged when the pool's
memory is known (the contract's GPU-memory label, else the catalog) and the pod template declares
its need in the ``llm-platform.io/gpu-memory-mib`` annotation (MiB per GPU). Stacks that declare
no pools at all (workloads deployed into a cluster owned elsewhere) are not judged.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from lib.contract_config import GPU_MEMORY_ANNOTATION, OTHER_GPU_RESOURCES
from lib.kit import MANDATORY, Stack, stack_policy, stack_workloads
from lib.placement import SelectorTerm, node_selection
from lib.pod_templates import PodTemplate
from lib.pools import Pool, gpu_memory_values, labels_match, stack_pools, untolerated_taints
from lib.values import as_int

from checks.gpu_workloads import asks_for_gpu, gpu_resource_names, pod_gpus

MAX_REASONS = 6


def pool_verdict(
    pool: Pool, template: PodTemplate, alternatives: list[SelectorTerm], gpus: float | None, memory: int | None,
    memory_label: str,
) -> tuple[bool | None, str]:
    """Whether ``pool`` can hold one pod of ``template``; the reason when it cannot."""
    undecided = False
    reasons = []
    for alternative in alternatives:
        labels_ok, why = labels_match(pool, [alternative])
        if labels_ok is None:
            undecided = True
            continue
        if not labels_ok:
            reasons.append(why)
            continue
        if memory is not None:
            sizes = gpu_memory_values(pool, memory_label, alternative)
            if sizes is not None and sizes and max(sizes) < memory:
                reasons.append(f"its GPUs have {max(sizes)} MiB, the pod needs {memory} MiB per GPU")
                continue
        break
    else:
        if undecided:
            return None, ""
        return False, "; ".join(dict.fromkeys(reasons))
    missing = untolerated_taints(pool, template.tolerations)
    if missing is None:
        return None, ""
    if missing:
        return False, f"it does not tolerate taint {', '.join(map(str, missing))}"
    if gpus:
        if pool.is_gpu is False:
            return False, "it has no GPUs"
        per_node = pool.max_gpus_per_node
        if per_node is not None and per_node < gpus:
            return False, f"its largest node has {per_node} GPUs, the pod needs {gpus:g}"
    return True, ""


def _check(stack: Stack, config: dict[str, Any]) -> Iterator[tuple[str, str | None]]:
    pools = stack_pools(stack)
    if not pools:
        return
    gpu = config["gpuResource"]
    for template in stack_workloads(stack, config):
        resource = template.resource
        # GPUs under other names (time-sliced, MIG: lib/contract_config.py) still need a node with a GPU.
        other = {n for c in template.containers("initContainers", "containers")
                 for n in gpu_resource_names(c, gpu, OTHER_GPU_RESOURCES)} - {gpu}
        shared = any(asks_for_gpu(template, n) is True for n in other)
        if asks_for_gpu(template, gpu) is not True and not shared:
            continue
        alternatives = node_selection(template.spec)
        gpus = pod_gpus(template, gpu)
        if shared and gpus is not None:
            gpus = max(gpus, 1.0)
        raw_memory = template.annotations.get(config["gpuMemoryAnnotation"])
        memory = as_int(raw_memory)
        if alternatives is None or gpus is None:
            continue
        reasons = []
        for pool in pools:
            ok, why = pool_verdict(pool, template, alternatives, gpus, memory, config["gpuMemoryLabel"])
            if ok is not False:
                break  # a pool can hold it (or may: values not known yet)
            reasons.append(f"{pool.label}: {why}")
        else:
            shown = "; ".join(reasons[:MAX_REASONS]) + ("; ..." if len(reasons) > MAX_REASONS else "")
            needs = f"{gpus:g} {gpu}" + (f", {memory} MiB per GPU" if memory is not None else "")
            selection = " or ".join(alt.describe() for alt in alternatives)
            yield (
                f"{template.label} (needs {needs}; selects {selection}) fits no pool in the stack, so it stays "
                f"Pending: {shown}. Change its node selector or tolerations, or add a pool that can hold it.",
                resource.urn,
            )


POLICIES = [
    stack_policy(
        name="gpu-workload-schedulable",
        description=(
            "Make every GPU workload's node selection match a pool whose taints it tolerates and whose GPUs "
            "(count and memory) can hold it."
        ),
        check=_check,
        enforcement=MANDATORY,
        custom_workloads=True,
        contract=("gpuResource", "gpuMemoryLabel"),
        params={
            "gpuMemoryAnnotation": {
                "type": "string",
                "default": GPU_MEMORY_ANNOTATION,
                "description": "Pod template annotation with the GPU memory (MiB per GPU) a workload needs.",
            }
        },
    ),
]
