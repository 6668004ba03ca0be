"""KarpenterNodePools: EC2NodeClasses and GPU NodePools (Karpenter v1) built from settings.

The manifests come from ``components.specs.node_pools`` (plain functions, validated by the tests
against the upstream CRDs); the component only turns them into custom resources.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.settings import KarpenterNodeClass, KarpenterNodePool
from components.specs.gpu_software import NodeType, Provider, operator_node_labels
from components.specs.node_pools import (
    AUTO_MODE_LABELS,
    AUTO_MODE_NODE_CLASS_REF,
    KARPENTER_LABELS,
    KARPENTER_NODE_CLASS_REF,
    NODE_CLASS_API,
    NODE_POOL_API,
    ec2_node_class_manifest,
    node_class_reservations,
    node_pool_manifest,
    reservation_subnets,
)


@dataclass(frozen=True)
class KarpenterNodePoolsArgs:
    """Inputs of :class:`KarpenterNodePools`.

    ``node_type`` is ``karpenter`` (pools on this stack's EC2NodeClasses, ``node_classes`` required)
    or ``auto-mode`` (pools on EKS Auto Mode's built-in NodeClass, ``node_classes`` must be empty).
    ``gpu_software`` decides the GPU Operator operand labels the nodes carry. ``availability_zones``
    are the zones of the stack's subnets (the Network component's): a node class's reservation in
    another zone is refused, as Karpenter launches only into the subnets its selector terms find.
    """

    cluster_name: str
    node_type: NodeType
    node_pools: list[KarpenterNodePool]
    gpu_software: Provider
    node_classes: list[KarpenterNodeClass] = field(default_factory=list)
    node_role: pulumi.Input[str] | None = None
    availability_zones: list[str] = field(default_factory=list)
    tags: dict[str, str] = field(default_factory=dict)


def _node_class_manifest(node_class: KarpenterNodeClass, cluster_name: str, tags: dict[str, str], node_role: str) -> dict[str, Any]:
    return ec2_node_class_manifest(node_class, cluster_name=cluster_name, node_role=node_role, tags=tags)


def _refuse_reservations_outside(node_class: KarpenterNodeClass, zones: list[str]) -> None:
    """Refuse, before any resource, a reservation in a zone where the stack has no subnet: Karpenter
    launches only into the subnets its ``subnetSelectorTerms`` find, so such a reservation is never used
    (the same rule the managed groups apply, ``reservation_subnets``)."""
    for reservation in node_class.capacity_reservations if zones else []:
        try:
            reservation_subnets(zones, zones, reservation)
        except ValueError as error:
            raise pulumi.RunError(f"llm-platform:karpenter.nodeClasses[{node_class.name}].capacityReservations"
                                  f"[{reservation.id}].availabilityZone: {error}") from None


class KarpenterNodePools(pulumi.ComponentResource):
    """Dynamic GPU capacity: one NodePool per pool class, each on a declared node class."""

    node_pool_names: list[str]
    node_class_names: list[str]

    def __init__(self, name: str, args: KarpenterNodePoolsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-platform:index:KarpenterNodePools", name, None, opts)
        auto_mode = args.node_type == "auto-mode"
        classes: dict[str, k8s.apiextensions.CustomResource] = {}
        for node_class in args.node_classes:
            _refuse_reservations_outside(node_class, args.availability_zones)
            manifest = pulumi.Output.from_input(args.node_role).apply(
                functools.partial(_node_class_manifest, node_class, args.cluster_name, args.tags)
            )
            classes[node_class.name] = k8s.apiextensions.CustomResource(
                f"{name}-{node_class.name}",
                api_version=NODE_CLASS_API,
                kind="EC2NodeClass",
                # The name, and the annotation recording the class's reservations (count, zone, end) that the
                # pack and the check's report read; the spec waits for the node role.
                metadata={"name": node_class.name, **({"annotations": reservations}
                                                      if (reservations := node_class_reservations(node_class)) else {})},
                spec=manifest.apply(lambda m: m["spec"]),
                opts=pulumi.ResourceOptions(parent=self),
            )
        for pool in args.node_pools:
            depends: list[pulumi.Resource] = []
            if auto_mode:
                ref = AUTO_MODE_NODE_CLASS_REF
            else:
                assert pool.node_class is not None  # settings refuse a Karpenter pool without a defined nodeClass
                ref = {**KARPENTER_NODE_CLASS_REF, "name": pool.node_class}
                depends.append(classes[pool.node_class])
            pool_manifest = node_pool_manifest(
                pool,
                node_class_ref=ref,
                label_prefix=AUTO_MODE_LABELS if auto_mode else KARPENTER_LABELS,
                extra_labels=operator_node_labels(args.gpu_software, args.node_type),
            )
            k8s.apiextensions.CustomResource(
                f"{name}-{pool.name}",
                api_version=NODE_POOL_API,
                kind="NodePool",
                metadata=pool_manifest["metadata"],
                spec=pool_manifest["spec"],
                opts=pulumi.ResourceOptions(parent=self, depends_on=depends),
            )
        self.node_pool_names = [p.name for p in args.node_pools]
        self.node_class_names = list(classes)
        self.register_outputs({"node_pool_names": self.node_pool_names, "node_class_names": self.node_class_names})
