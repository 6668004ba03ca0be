"""The scheduling contract as policy configuration.

The program decides the GPU taint key and the pool label names in ``components/contract.py``; the
pack must not import program code, so each policy that needs a contract value declares it as a
config property with the program's value as default, and ``config/<stack>.json`` carries the values,
generated from ``components.contract.policy_contract()`` into every policy whose schema declares them
(``python -m automation pack-config write``; a test keeps the defaults here equal to the program's).
"""

from __future__ import annotations

from typing import Any

CONTRACT_DEFAULTS: dict[str, str] = {
    "gpuTaintKey": "nvidia.com/gpu",
    "gpuResource": "nvidia.com/gpu",
    "purposeLabel": "node.kubernetes.io/purpose",
    "acceleratorLabel": "llm-platform.io/accelerator",
    "gpuMemoryLabel": "llm-platform.io/gpu-memory-mib",
    "capacityTypeLabel": "llm-platform.io/capacity-type",
    "systemPurpose": "system",
}

_DESCRIPTIONS = {
    "gpuTaintKey": "Key of the NoSchedule taint every GPU pool carries.",
    "gpuResource": "Extended resource name GPU workloads request in their limits.",
    "purposeLabel": "Node label naming a pool's purpose (system, gpu-inference, ...).",
    "acceleratorLabel": "Node label naming a GPU pool's accelerator (a10g, l40s, h100, ...).",
    "gpuMemoryLabel": "Node label with a GPU pool's memory per GPU in MiB.",
    "capacityTypeLabel": "Node label with a pool's capacity type (on-demand, spot, reserved).",
    "systemPurpose": "Value of the purpose label that marks the system pool.",
}

#: Further NVIDIA extended resources that are GPUs under another name: the device plugin's time-sliced
#: GPU when it renames shared replicas (``sharing.timeSlicing.renameByDefault: true`` advertises
#: ``nvidia.com/gpu.shared``, NVIDIA/k8s-device-plugin README "Shared Access to GPUs") and MIG slices
#: (``nvidia.com/mig-<profile>``, mixed strategy). Globs; the default of every policy's ``extraGpuResources``.
SHARED_GPU_RESOURCE = "nvidia.com/gpu.shared"
OTHER_GPU_RESOURCES = [SHARED_GPU_RESOURCE, "nvidia.com/mig-*"]

#: Pod template annotation with the GPU memory (MiB per GPU) a workload needs.
GPU_MEMORY_ANNOTATION = "llm-platform.io/gpu-memory-mib"


def contract_schema(*keys: str) -> dict[str, dict[str, Any]]:
    """JSON-schema properties for the named contract values, defaults included."""
    return {
        key: {"type": "string", "minLength": 1, "default": CONTRACT_DEFAULTS[key], "description": _DESCRIPTIONS[key]}
        for key in keys
    }
