"""AWS tag conventions that other systems discover resources by (Karpenter, Cluster Autoscaler)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from components import contract


def karpenter_discovery_tag(cluster_name: str) -> dict[str, str]:
    """Karpenter finds node subnets and security groups by this tag."""
    return {"karpenter.sh/discovery": cluster_name}


NODE_TEMPLATE_PREFIX = "k8s.io/cluster-autoscaler/node-template/"


def node_template_tags(labels: Mapping[str, str], taints: Sequence[Mapping[str, str]], gpus_per_node: int,
                       efa_interfaces: int = 0) -> dict[str, str]:
    """What Cluster Autoscaler needs on an Auto Scaling group to build a node from nothing when the
    group sits at zero: every label, every taint (``value:Effect``), the GPU count and the EFA interfaces."""
    return {k: v for k, v in cluster_autoscaler_tags("", labels, taints, gpus_per_node, efa_interfaces).items()
            if k.startswith(NODE_TEMPLATE_PREFIX)}


def cluster_autoscaler_tags(
    cluster_name: str, labels: Mapping[str, str], taints: Sequence[Mapping[str, str]], gpus_per_node: int,
    efa_interfaces: int = 0,
) -> dict[str, str]:
    """Auto-discovery tags plus node-template hints so Cluster Autoscaler can scale a pool up from zero."""
    tags = {
        "k8s.io/cluster-autoscaler/enabled": "true",
        f"k8s.io/cluster-autoscaler/{cluster_name}": "owned",
    }
    tags.update({f"k8s.io/cluster-autoscaler/node-template/label/{k}": v for k, v in labels.items()})
    for taint in taints:
        tags[f"k8s.io/cluster-autoscaler/node-template/taint/{taint['key']}"] = (
            f"{taint['value']}:{contract.k8s_effect(taint['effect'])}"
        )
    if gpus_per_node:
        tags["k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu"] = str(gpus_per_node)
    if efa_interfaces:
        tags[f"k8s.io/cluster-autoscaler/node-template/resources/{contract.EFA_RESOURCE}"] = str(efa_interfaces)
    return tags
