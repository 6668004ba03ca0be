"""Which GPU software runs on which node type, decided in one place.

Node types differ in what they already ship: AL2023 NVIDIA and Bottlerocket NVIDIA AMIs carry the
driver and container toolkit; EKS Auto Mode nodes also run their own device plugin; hybrid
(on-prem) nodes bring nothing. The GPU Operator is steered per node with its ``nvidia.com/gpu.deploy.*``
node labels; the standalone device plugin is steered with node affinity. Either way a node never
gets two device plugins.
"""

from __future__ import annotations

from typing import Literal

from components import contract

NodeType = Literal["managed", "karpenter", "auto-mode", "hybrid"]
Provider = contract.GpuSoftwareProvider

#: Label EKS puts on Auto Mode nodes.
AUTO_MODE_COMPUTE_LABEL = "eks.amazonaws.com/compute-type"

_DEPLOY = "nvidia.com/gpu.deploy"


def operator_node_labels(provider: Provider, node_type: NodeType, purpose: str = "") -> dict[str, str]:
    """GPU Operator operand switches a pool of ``node_type`` carries (empty unless the operator runs).

    Driver and toolkit stay off wherever the AMI ships them; the operator's device plugin stays off
    Auto Mode nodes (they run their own) and DRA pools (a DRA driver owns their GPUs); the MIG
    manager runs on Karpenter GPU nodes, where MIG-capable instances land.
    """
    if provider != "gpu-operator" or node_type == "hybrid":
        return {}
    labels = {
        f"{_DEPLOY}.driver": "false",
        f"{_DEPLOY}.container-toolkit": "false",
        f"{_DEPLOY}.mig-manager": "true" if node_type == "karpenter" else "false",
    }
    if node_type == "auto-mode" or purpose == contract.GPU_DRA_PURPOSE:
        labels[f"{_DEPLOY}.device-plugin"] = "false"
    return labels


def _gpu_node_affinity(*, dra_pools: bool) -> dict[str, object]:
    expressions = [
        {"key": contract.GPU_PRESENT_LABEL, "operator": "In", "values": ["true"]},
        {"key": AUTO_MODE_COMPUTE_LABEL, "operator": "NotIn", "values": ["auto"]},
    ]
    if not dra_pools:
        expressions.append({"key": contract.PURPOSE_LABEL, "operator": "NotIn", "values": [contract.GPU_DRA_PURPOSE]})
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": expressions}]}
        }
    }


def device_plugin_affinity() -> dict[str, object]:
    """Node affinity for the standalone device plugin: GPU nodes of the contract, except Auto Mode
    nodes (they run their own plugin) and DRA pools (a DRA driver owns their GPUs)."""
    return _gpu_node_affinity(dra_pools=False)


def gpu_monitoring_affinity() -> dict[str, object]:
    """Node affinity for GPU monitoring agents (DCGM exporter): every GPU node of the contract that
    this program manages, DRA pools included (their GPUs need metrics too), Auto Mode excluded."""
    return _gpu_node_affinity(dra_pools=True)
