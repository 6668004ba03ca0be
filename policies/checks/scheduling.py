"""Every GPU workload can land somewhere: a pool whose labels meet its node selection, whose
taints it tolerates, whose nodes have enough GPUs and enough GPU memory.

A workload that fits no pool stays Pending forever (and with Karpenter, a NodePool whose labels
match but whose taint is not tolerated will not even try). GPU memory is judged when the pool's
memory is known (the contract's GPU-memory label, else the catalog) and the pod template declares
its need in the ``llm-platform.io/gpu-memory-mib`` annotation (MiB per GPU). Stacks that declare
no pools at all (workloads deployed into a cluster owned elsewhere) are not judged.

Shared GPUs, as the device plugin advertises them: a MIG slice (``nvidia.com/mig-<profile>``) exists only
on GPUs that MIG partitions (``lib.pools.MIG_GPUS``), and ``nvidia.com/gpu.shared`` only where time-slicing
renames its replicas (``renameByDefault: true``; without it the replicas are advertised as
``nvidia.com/gpu`` itself, NVIDIA/k8s-device-plugin README "Shared Access to GPUs").
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from lib.contract_config import GPU_MEMORY_ANNOTATION, OTHER_GPU_RESOURCES, SHARED_GPU_RESOURCE
from lib.kit import MANDATORY, Stack, stack_policy, stack_workloads
from lib.placement import SelectorTerm, node_selection
from lib.pod_templates import PodTemplate
from lib.pools import Pool, gpu_memory_values, labels_match, stack_pools, untolerated_taints
from lib.resources import HELM_TYPES
from lib.values import UNKNOWN, as_int

from checks.gpu_workloads import asks_for_gpu, gpu_resource_names, pod_gpus

MAX_REASONS = 6
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
#: MIG slices are advertised as ``nvidia.com/mig-<profile>`` (mixed strategy; lib/contract_config.py).
MIG_PREFIX = "nvidia.com/mig-"


def pool_verdict(
    pool: Pool, template: PodTemplate, alternatives: list[SelectorTerm], gpus: float | None, memory: int | None,
    memory_label: str, mig: bool = False,
) -> tuple[bool | None, str]:
    """Whether ``pool`` can hold one pod of ``template``; the reason when it cannot. ``mig``: the pod asks
    for a MIG slice, which only GPUs that MIG partitions offer."""
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
    if mig and pool.mig_capable is False:
        names = sorted({t.gpu_name or "?" for t in pool.instance_types or []})
        return False, f"its GPUs ({', '.join(names)}) have no MIG, the pod asks for a MIG slice"
    return True, ""


def _renames_shared(node: Any, depth: int = 0) -> bool | None:
    """Whether ``node`` (chart values or a ConfigMap's data, at any depth, as data or as YAML text) sets the
    device plugin's ``sharing.timeSlicing.renameByDefault: true``; ``None`` when part of it is not known."""
    if node is UNKNOWN or depth > 32:
        return None
    if isinstance(node, str):
        return "timeSlicing" in node and bool(re.search(r"renameByDefault\s*:\s*true", node))
    if isinstance(node, dict):
        slicing = node.get("timeSlicing")
        if isinstance(slicing, dict) and slicing.get("renameByDefault") is True:
            return True
        items: Any = node.values()
    elif isinstance(node, list):
        items = node
    else:
        return False
    found: bool | None = False
    for child in items:
        result = _renames_shared(child, depth + 1)
        if result:
            return True
        if result is None:
            found = None
    return found


def shared_gpus_advertised(stack: Stack) -> bool | None:
    """Whether any node can advertise ``nvidia.com/gpu.shared``: only the NVIDIA device plugin's time-slicing
    with ``renameByDefault: true`` does (NVIDIA/k8s-device-plugin README, "Shared Access to GPUs"), set in a
    chart's values (the device plugin's ``config.map``, the GPU Operator's ``devicePlugin.config``) or in a
    ConfigMap they read. ``None``: a value that decides it is not known yet."""
    found: bool | None = False
    for resource in stack.of_type(*HELM_TYPES, CONFIG_MAP):
        result = _renames_shared(resource.get("values") if resource.type in HELM_TYPES else resource.get("data"))
        if result:
            return True
        if result is None:
            found = None
    return found


def _check(stack: Stack, config: dict[str, Any]) -> Iterator[tuple[str, str | None]]:
    pools = stack_pools(stack)
    if not pools:
        return
    advertised: list[bool | None] = []
    gpu = config["gpuResource"]
    for template in stack_workloads(stack, config):
        resource = template.resource
        # GPUs under other names (time-sliced, MIG: lib/contract_config.py) still need a node with a GPU.
        other = {n for c in template.containers("initContainers", "containers")
                 for n in gpu_resource_names(c, gpu, OTHER_GPU_RESOURCES)} - {gpu}
        shared = any(asks_for_gpu(template, n) is True for n in other)
        mig = any(n.startswith(MIG_PREFIX) and asks_for_gpu(template, n) is True for n in other)
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
            ok, why = pool_verdict(pool, template, alternatives, gpus, memory, config["gpuMemoryLabel"], mig)
            if ok is not False:
                # A pool can hold it (or may: values not known yet); a time-sliced GPU also needs a node
                # that advertises one.
                if SHARED_GPU_RESOURCE in other and asks_for_gpu(template, SHARED_GPU_RESOURCE) is True:
                    if not advertised:
                        advertised.append(shared_gpus_advertised(stack))
                    if advertised[0] is False:
                        yield (f"{template.label} asks for {SHARED_GPU_RESOURCE}, which only the NVIDIA device "
                               "plugin's time-slicing with renameByDefault: true advertises, and no chart or ConfigMap "
                               "in the stack configures it: no node ever offers one, so it stays Pending. Configure "
                               f"time-slicing (sharing.timeSlicing.renameByDefault: true) or request {gpu}.",
                               resource.urn)
                break
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
            "(count, memory, MIG for a MIG slice) can hold it; a time-sliced GPU (nvidia.com/gpu.shared) also needs "
            "the device plugin's time-slicing with renameByDefault: true."
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
