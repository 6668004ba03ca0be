"""Node pools as the engine receives them: the managed node groups' labels and taints, Karpenter v1
EC2NodeClasses and GPU NodePools.

The same NodePool builder serves EKS Auto Mode, whose NodePools point at the built-in
``eks.amazonaws.com`` NodeClass and use EKS's label keys.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from components import contract
from components.specs.gpu_software import Provider, operator_node_labels
from components.tags import karpenter_discovery_tag
from policies.capacity.cold_start import FAST_IMAGE_PULL_GATE, NODEADM_CONTENT_TYPE
from policies.capacity.cost import reservation_text

if TYPE_CHECKING:
    from components.settings.karpenter import KarpenterNodeClass, KarpenterNodePool
    from components.settings.managed_pools import GpuPool, Scaling, SystemPool
    from components.settings.reservations import CapacityReservation

#: The system node group's name (its nodes carry it as their pool label).
SYSTEM_POOL = "system"


def system_group_labels(pool: SystemPool) -> dict[str, str]:
    """The system group's labels: the stack's own, then the contract's (they win)."""
    return {**pool.labels, **contract.system_pool_labels(SYSTEM_POOL)}


def gpu_group_labels(pool: GpuPool, software: Provider) -> dict[str, str]:
    """A managed GPU group's labels: the stack's own, the GPU Operator's operand switches, then the
    contract's (they win)."""
    return {
        **pool.labels,
        **operator_node_labels(software, "managed", pool.purpose),
        **contract.managed_gpu_pool_labels(pool.name, purpose=pool.purpose, accelerator=pool.accelerator,
                                           gpu_memory_mib=pool.gpu_memory_mib, capacity_type=pool.capacity_type),
    }


def managed_node_group(
    instance_types: list[str], scaling: Scaling, labels: dict[str, str], taints: list[dict[str, str]]
) -> dict[str, Any]:
    """What the capacity model reads of a managed node group (pulumi-eks ``ManagedNodeGroup`` inputs)."""
    return {
        "instanceTypes": list(instance_types),
        "scalingConfig": {"minSize": scaling.min_size, "desiredSize": scaling.desired_size, "maxSize": scaling.max_size},
        "labels": labels,
        "taints": taints,
    }

NODE_POOL_API = "karpenter.sh/v1"
NODE_CLASS_API = "karpenter.k8s.aws/v1"
KARPENTER_NODE_CLASS_REF = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass"}
AUTO_MODE_NODE_CLASS_REF = {"group": "eks.amazonaws.com", "kind": "NodeClass", "name": "default"}
#: Well-known instance label prefix: Karpenter's on self-managed Karpenter, EKS's on Auto Mode.
KARPENTER_LABELS = "karpenter.k8s.aws"
AUTO_MODE_LABELS = "eks.amazonaws.com"


def ec2_node_class_manifest(
    node_class: KarpenterNodeClass, *, cluster_name: str, node_role: str, tags: dict[str, str]
) -> dict[str, Any]:
    """An EC2NodeClass: pinned AL2023 alias, discovery-tag selectors, IMDSv2, encrypted gp3 root, the
    instance's NVMe drives striped as RAID0 ephemeral storage, where model caches (``emptyDir``) live, and,
    with ``fastImagePull``, user data that turns on nodeadm's SOCI parallel pull."""
    volume, kubelet = node_class.root_volume, node_class.kubelet
    discovery = karpenter_discovery_tag(cluster_name)
    reservations = node_class_reservations(node_class)
    return {
        "apiVersion": NODE_CLASS_API,
        "kind": "EC2NodeClass",
        "metadata": {"name": node_class.name, **({"annotations": reservations} if reservations else {})},
        "spec": {
            **reservation_selector(node_class),
            "amiSelectorTerms": [{"alias": node_class.ami_alias}],
            "instanceStorePolicy": "RAID0",
            # Karpenter writes the RAID0 NodeConfig itself (instanceStorePolicy); the class adds the gate.
            **({"userData": user_data} if (user_data := nodeadm_user_data(
                nodeadm_node_config(local_storage_raid0=False, fast_image_pull=node_class.fast_image_pull))) else {}),
            "role": node_role,
            "subnetSelectorTerms": [{"tags": discovery}],
            "securityGroupSelectorTerms": [{"tags": discovery}],
            "blockDeviceMappings": [
                {
                    "deviceName": "/dev/xvda",
                    "ebs": {
                        "volumeSize": f"{volume.size_gib}Gi",
                        "volumeType": "gp3",
                        "iops": volume.iops,
                        "throughput": volume.throughput_mibps,
                        "encrypted": True,
                        "deleteOnTermination": True,
                    },
                }
            ],
            "metadataOptions": {
                "httpEndpoint": "enabled",
                "httpProtocolIPv6": "disabled",
                "httpPutResponseHopLimit": 1,
                "httpTokens": "required",
            },
            # No maxPods unless a stack sets one: Karpenter then derives it per instance type from
            # its ENI limits, which is what the VPC CNI can actually give.
            "kubelet": {
                **({"maxPods": kubelet.max_pods} if kubelet.max_pods is not None else {}),
                "evictionHard": dict(kubelet.eviction_hard),
                "imageGCHighThresholdPercent": kubelet.image_gc_high_threshold_percent,
                "imageGCLowThresholdPercent": kubelet.image_gc_low_threshold_percent,
            },
            "tags": {**tags, **discovery, "Name": f"{cluster_name}-{node_class.name}"},
        },
    }


def reservation_selector(node_class: KarpenterNodeClass) -> dict[str, Any]:
    """``capacityReservationSelectorTerms`` when the class selects reservations (Karpenter docs,
    tasks/odcrs; CRD ``karpenter.k8s.aws_ec2nodeclasses.yaml`` 1.14.1: terms ORed, an ``id`` term alone,
    at most 30). The ``ReservedCapacity`` feature gate is on by default in the pinned chart
    (``settings.featureGates.reservedCapacity: true``, BETA), so the program leaves it as shipped."""
    terms = node_class.reservation_selector_terms()
    return {"capacityReservationSelectorTerms": terms} if terms else {}


def node_class_reservations(node_class: KarpenterNodeClass) -> dict[str, str]:
    """The annotation that records the class's reservations by id (type, instance type, count, zone, end)
    for the pack and the report, which count reserved GPUs and date Capacity Blocks from the plan."""
    if not node_class.capacity_reservations:
        return {}
    return {contract.RESERVATIONS_KEY: reservation_text([r.record() for r in node_class.capacity_reservations])}


#: The boundary of the program's MIME user data (the gate and part type: policies/capacity/cold_start.py).
USER_DATA_BOUNDARY = "==LLMPLATFORM=="


def nodeadm_node_config(*, local_storage_raid0: bool, fast_image_pull: bool) -> dict[str, Any] | None:
    """The ``node.eks.aws/v1alpha1`` NodeConfig a GPU node adds to the bootstrap EKS or Karpenter writes
    (nodeadm merges every NodeConfig of the user data): the instance's NVMe drives striped as RAID0 for
    kubelet and containerd, and the ``FastImagePull`` gate. ``None`` when it would say nothing."""
    spec: dict[str, Any] = {}
    if fast_image_pull:
        spec["featureGates"] = {FAST_IMAGE_PULL_GATE: True}
    if local_storage_raid0:
        spec["instance"] = {"localStorage": {"strategy": "RAID0"}}
    if not spec:
        return None
    return {"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig", "spec": spec}


def nodeadm_user_data(node_config: dict[str, Any] | None) -> str | None:
    """The NodeConfig as a MIME multipart document, the form both EKS (managed groups with a launch
    template) and Karpenter (EC2NodeClass ``userData`` on AL2023) merge with their own part. The NodeConfig
    is written as JSON, which nodeadm's decoder reads like YAML (``nodeadm/internal/api/bridge/decode.go``)."""
    if node_config is None:
        return None
    return "\n".join([
        "MIME-Version: 1.0",
        f'Content-Type: multipart/mixed; boundary="{USER_DATA_BOUNDARY}"',
        "",
        f"--{USER_DATA_BOUNDARY}",
        f"Content-Type: {NODEADM_CONTENT_TYPE}",
        "",
        json.dumps(node_config, sort_keys=True),
        "",
        f"--{USER_DATA_BOUNDARY}--",
        "",
    ])


def launch_reservation(reservation: CapacityReservation | None) -> dict[str, Any]:
    """What a managed GPU group's launch template adds for its reservation, in the EC2 API's camelCase
    (pulumi-aws ``LaunchTemplate`` ``instance_market_options``, ``capacity_reservation_specification``).

    EKS user guide, "Create a managed node group with Capacity Blocks for ML": the launch template's
    ``InstanceMarketOptions.MarketType`` is ``capacity-block`` and ``CapacityReservationSpecification.
    CapacityReservationTarget.CapacityReservationId`` names the block; an On-Demand Capacity Reservation
    is targeted without the market option. A Capacity Block's template also names the block's instance type
    (``instanceType``), which the group then leaves out (:func:`group_instance_types`). Empty without a
    reservation."""
    if reservation is None:
        return {}
    out: dict[str, Any] = {
        "capacityReservationSpecification": {"capacityReservationTarget": {"capacityReservationId": reservation.id}},
    }
    if reservation.type == contract.RESERVATION_CAPACITY_BLOCK:
        out["instanceMarketOptions"] = {"marketType": contract.CAPACITY_BLOCK_MARKET_TYPE}
        out["instanceType"] = reservation.instance_type
    return out


def group_instance_types(instance_types: list[str], reservation: CapacityReservation | None) -> list[str] | None:
    """The ``instanceTypes`` a managed group itself lists: none for a Capacity Block, whose type is in the
    launch template instead (:func:`launch_reservation`).

    EKS rejects a Capacity Block group whose launch template has no ``InstanceType`` (EKS user guide,
    "Create a managed node group with Capacity Blocks for ML": the create request "will be rejected"), and a
    launch template that sets the instance type forbids instance types on the group (EKS user guide,
    "Customize managed nodes with launch templates": a setting goes in the group or the template, not both).
    terraform-aws-eks ``modules/eks-managed-node-group/main.tf`` does the same: ``instance_type`` on the
    template and ``instance_types = null`` on the group when ``capacity_type == "CAPACITY_BLOCK"``."""
    if reservation is not None and reservation.type == contract.RESERVATION_CAPACITY_BLOCK:
        return None
    return list(instance_types)


def reservation_tags(reservation: CapacityReservation | None) -> dict[str, str]:
    """The tag that records a managed group's reservation for the pack and the report (one per group)."""
    if reservation is None:
        return {}
    return {contract.RESERVATIONS_KEY: reservation_text([reservation.record()])}


def reservation_subnets(subnet_ids: list[str], zones: list[str], reservation: CapacityReservation | None) -> list[str]:
    """The subnets a group launches in: all of them, or with a reservation only the one in its zone
    (``subnet_ids`` and ``zones`` in the same order, as the Network component makes them). An Auto Scaling
    group spreads launches over its subnets' zones, and a launch in another zone cannot use the reservation
    (EKS user guide, Capacity Blocks with managed node groups; terraform-aws-eks-blueprints pattern
    ml-capacity-block: "restricted to the availability zone where the CBR has been allocated")."""
    if reservation is None:
        return list(subnet_ids)
    if reservation.availability_zone not in zones:
        raise ValueError(
            f"reservation {reservation.id} is in {reservation.availability_zone}, where the stack has no subnet "
            f"(its zones: {', '.join(zones)}); raise network.azCount or use a reservation in one of those zones")
    return [subnet_ids[zones.index(reservation.availability_zone)]]


def node_pool_manifest(
    pool: KarpenterNodePool,
    *,
    node_class_ref: dict[str, str],
    label_prefix: str,
    extra_labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A GPU NodePool carrying the contract's taints and labels, a GPU limit and disruption rules.

    Expiry and budgets: in Karpenter v1 expiration is forceful. Its controller deletes a NodeClaim once
    ``expireAfter`` has passed, consulting no disruption budget and launching no replacement first
    (kubernetes-sigs/karpenter pkg/controllers/nodeclaim/expiration/controller.go ``Reconcile``; disruption
    docs: "Expiration is forceful", automated forceful methods "blow past NodePool Disruption Budgets").
    Budgets govern only drift, consolidation and emptiness. So a pool whose budgets protect a window with
    ``nodes: "0"`` (business hours) runs ``expireAfter: Never`` and rotates its nodes through drift: a
    move of the pinned AMI alias (versions.py) drifts every node, and drift is graceful, held to the
    hours the budgets allow, one replacement launched and ready before a node drains. A bounded
    ``terminationGracePeriod`` with spreading was the other option, rejected: it bounds the drain, not
    when expiry starts, so nodes launched together (a morning scale-out) would still expire together
    inside the window. The settings refuse a finite ``expireAfter`` beside a zero budget
    (``components/settings/karpenter.py``, ``KarpenterNodePool``).

    Capacity types are emitted as listed. With ``reserved`` among them Karpenter launches into the node
    class's selected reservations first and falls back to the other types only when they are full (spot
    before on-demand, by price); the settings refuse ``reserved`` on a class that selects no reservation
    (Karpenter docs, tasks/odcrs; docs/reserved-capacity.md, "Fallback order")."""
    single_capacity = pool.capacity_types[0] if len(pool.capacity_types) == 1 else None
    labels = {
        **(extra_labels or {}),
        **contract.gpu_pool_labels(
            pool.name,
            purpose=pool.purpose,
            accelerator=pool.accelerator,
            gpu_memory_mib=pool.gpu_memory_mib,
            capacity_type=single_capacity,
        ),
    }
    budgets = []
    for budget in pool.budgets:
        entry: dict[str, Any] = {"nodes": budget.nodes}
        if budget.schedule is not None:
            entry.update(schedule=budget.schedule, duration=budget.duration)
        if budget.reasons is not None:
            entry["reasons"] = list(budget.reasons)
        budgets.append(entry)
    return {
        "apiVersion": NODE_POOL_API,
        "kind": "NodePool",
        "metadata": {"name": pool.name},
        "spec": {
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeClassRef": dict(node_class_ref),
                    "taints": contract.gpu_pool_taints_k8s(pool.purpose),
                    "expireAfter": pool.expire_after,
                    "requirements": [
                        {"key": f"{label_prefix}/instance-family", "operator": "In", "values": list(pool.instance_families)},
                        {"key": f"{label_prefix}/instance-gpu-count", "operator": "Gt", "values": ["0"]},
                        *([{"key": f"{label_prefix}/instance-size", "operator": "In", "values": list(pool.instance_sizes)}]
                          if pool.instance_sizes else []),
                        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": list(pool.capacity_types)},
                        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                    ],
                },
            },
            "disruption": {
                "consolidationPolicy": pool.consolidation.policy,
                "consolidateAfter": pool.consolidation.after,
                "budgets": budgets,
            },
            "limits": {contract.GPU_RESOURCE: str(pool.gpu_limit)},
            "weight": pool.weight,
        },
    }
