"""Managed node groups: the untainted system pool and tainted GPU pools.

Both are EKS managed node groups (pulumi-eks) with their own node role and a launch template that
enforces IMDSv2 and an encrypted gp3 root volume. Cluster Autoscaler owns both groups' desired size
after creation (``ignore_scaling_changes``): ``desired_size`` is only the size a new group starts at. What differs is decided by the scheduling
contract: the system pool carries no taint; a GPU pool carries the GPU taint and pool labels.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks

from components import contract, versions
from components.cluster.node_role import NodeRole, NodeRoleArgs
from components.settings.reservations import CapacityReservation
from components.specs import efa
from components.specs.node_pools import (
    group_instance_types,
    launch_reservation,
    nodeadm_node_config,
    nodeadm_user_data,
    reservation_subnets,
    reservation_tags,
)
from components.tags import NODE_TEMPLATE_PREFIX, cluster_autoscaler_tags, node_template_tags


@dataclass(frozen=True)
class Scaling:
    """Node counts; ``min_size <= desired_size <= max_size`` (checked in settings)."""

    min_size: int
    desired_size: int
    max_size: int


@dataclass(frozen=True)
class LaunchSettings:
    """Secure node defaults. ``metadata_hop_limit`` 1 keeps pods off IMDS (they use Pod Identity);
    raise it to 2 only for an agent that must read IMDS from a pod network namespace."""

    disk_size_gib: int
    disk_throughput_mibps: int = 125
    disk_iops: int = 3000
    metadata_hop_limit: int = 1
    #: Stripe the instance's NVMe drives as RAID0 and put kubelet/containerd on them (AL2023 nodeadm),
    #: so ``emptyDir`` model caches live on local NVMe.
    nvme_ephemeral_storage: bool = False
    #: nodeadm's ``FastImagePull`` gate: containerd pulls through the SOCI snapshotter, downloading and
    #: unpacking layers in parallel (``GpuPool.fast_image_pull``).
    fast_image_pull: bool = False


def launch_user_data(launch: LaunchSettings) -> str | None:
    """The launch template's user data (base64): the NodeConfig EKS merges with its own bootstrap for AL2023
    nodes (``components.specs.node_pools.nodeadm_user_data``)."""
    document = nodeadm_user_data(nodeadm_node_config(local_storage_raid0=launch.nvme_ephemeral_storage,
                                                     fast_image_pull=launch.fast_image_pull))
    return base64.b64encode(document.encode()).decode() if document else None


def _autoscaling_group_name(resources: Sequence[aws.eks.outputs.NodeGroupResource]) -> str:
    """The Auto Scaling group EKS made for a managed node group (one per group)."""
    groups = resources[0].autoscaling_groups or []
    name = groups[0].name if groups else None
    if name is None:
        raise pulumi.RunError("EKS reported no Auto Scaling group for the managed node group")
    return name


class _ManagedNodePool(pulumi.ComponentResource):
    """Shared build of role, launch template and node group; subclasses decide labels and taints."""

    node_role_arn: pulumi.Output[str]
    #: The Auto Scaling group EKS created for the group (pulumi-eks ``nodeGroup.resources``).
    autoscaling_group_name: pulumi.Output[str]
    labels: dict[str, str]
    taints: list[dict[str, str]]
    instance_types: list[str]
    capacity_type: str
    scaling: Scaling

    def _build(
        self,
        name: str,
        *,
        cluster: eks.Cluster,
        kubernetes_version: str,
        subnet_ids: pulumi.Input[list[str]],
        ami_type: str,
        instance_types: list[str],
        capacity_type: str,
        scaling: Scaling,
        labels: dict[str, str],
        taints: list[dict[str, str]],
        launch: LaunchSettings,
        role_description: str,
        tags: dict[str, str],
        node_group_tags: dict[str, str],
        gpus_per_node: int = 0,
        reservation: CapacityReservation | None = None,
        efa_interfaces: int = 0,
        security_group_id: pulumi.Input[str] | None = None,
        placement_group: pulumi.Input[str] | None = None,
    ) -> None:
        child = pulumi.ResourceOptions(parent=self)
        # A reservation's launch options: market type capacity-block and the block's instance type (Capacity
        # Blocks only), and the target id.
        reserved = launch_reservation(reservation)
        market = reserved.get("instanceMarketOptions")
        target = reserved.get("capacityReservationSpecification", {}).get("capacityReservationTarget")
        role = NodeRole(f"{name}-node", NodeRoleArgs(description=role_description, tags=tags), opts=child)
        template = aws.ec2.LaunchTemplate(
            f"{name}-lt",
            description=f"Node settings for pool {name}",
            update_default_version=True,
            metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(
                http_endpoint="enabled",
                http_tokens="required",
                http_put_response_hop_limit=launch.metadata_hop_limit,
            ),
            block_device_mappings=[
                aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
                    device_name="/dev/xvda",
                    ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                        volume_size=launch.disk_size_gib,
                        volume_type="gp3",
                        iops=launch.disk_iops,
                        throughput=launch.disk_throughput_mibps,
                        encrypted="true",
                        delete_on_termination="true",
                    ),
                )
            ],
            user_data=launch_user_data(launch),
            instance_type=reserved.get("instanceType"),
            instance_market_options=aws.ec2.LaunchTemplateInstanceMarketOptionsArgs(market_type=market["marketType"])
            if market else None,
            capacity_reservation_specification=aws.ec2.LaunchTemplateCapacityReservationSpecificationArgs(
                capacity_reservation_target=aws.ec2.LaunchTemplateCapacityReservationSpecificationCapacityReservationTargetArgs(
                    capacity_reservation_id=target["capacityReservationId"]
                )
            ) if target else None,
            placement=aws.ec2.LaunchTemplatePlacementArgs(group_name=placement_group) if placement_group else None,
            network_interfaces=[
                aws.ec2.LaunchTemplateNetworkInterfaceArgs(
                    network_card_index=i["networkCardIndex"], device_index=i["deviceIndex"],
                    interface_type=i["interfaceType"], security_groups=i["securityGroups"],
                    delete_on_termination=i["deleteOnTermination"])
                for i in efa.efa_network_interfaces(efa_interfaces, security_group_id)
            ] or None,
            tag_specifications=[
                aws.ec2.LaunchTemplateTagSpecificationArgs(resource_type=kind, tags={**tags, "Name": name})
                for kind in ("instance", "volume")
            ],
            tags=tags,
            opts=child,
        )
        group = eks.ManagedNodeGroup(
            name,
            cluster=cluster,
            # With a launch template and no ``version`` a group would never follow a cluster upgrade.
            version=kubernetes_version,
            node_role_arn=role.arn,
            ami_type=ami_type,
            instance_types=group_instance_types(instance_types, reservation),
            capacity_type=capacity_type,
            scaling_config=aws.eks.NodeGroupScalingConfigArgs(
                min_size=scaling.min_size, desired_size=scaling.desired_size, max_size=scaling.max_size
            ),
            # Cluster Autoscaler grows and shrinks the group by the ASG's desired size; pulumi-eks then
            # ignores drift in ``scalingConfig.desiredSize`` so a refresh or any change to the group
            # never sends the declared size (0 for GPU pools) back and terminates nodes serving models.
            ignore_scaling_changes=True,
            subnet_ids=subnet_ids,
            labels=labels,
            taints=[aws.eks.NodeGroupTaintArgs(**t) for t in taints],
            launch_template=aws.eks.NodeGroupLaunchTemplateArgs(
                id=template.id, version=template.latest_version.apply(str)
            ),
            tags={**tags, **node_group_tags, **reservation_tags(reservation)},
            opts=child,
        )
        resources: pulumi.Output[Sequence[aws.eks.outputs.NodeGroupResource]] = group.node_group.apply(lambda ng: ng.resources)
        self.autoscaling_group_name = resources.apply(_autoscaling_group_name)
        if scaling.min_size == 0:
            # EKS does not copy node group tags to the Auto Scaling group, and Cluster Autoscaler's
            # DescribeNodegroup fallback covers only a group that never had a node: tag the ASG itself.
            for key, value in node_template_tags(labels, taints, gpus_per_node, efa_interfaces).items():
                aws.autoscaling.Tag(
                    f"{name}-ca-{key[len(NODE_TEMPLATE_PREFIX):].replace('/', '-')}",
                    autoscaling_group_name=self.autoscaling_group_name,
                    tag=aws.autoscaling.TagTagArgs(key=key, value=value, propagate_at_launch=False),
                    opts=child,
                )
        self.node_role_arn = role.arn
        self.labels = labels
        self.taints = taints
        self.instance_types = instance_types
        self.capacity_type = capacity_type
        self.scaling = scaling
        self.register_outputs(
            {
                "node_role_arn": self.node_role_arn,
                "labels": labels,
                "taints": taints,
                "instance_types": instance_types,
                "capacity_type": capacity_type,
                "autoscaling_group_name": self.autoscaling_group_name,
            }
        )


@dataclass(frozen=True)
class SystemNodePoolArgs:
    """Inputs of :class:`SystemNodePool`: CPU instance types, on-demand, ``min_size >= 2``. ``labels``
    are all the nodes carry (``components.specs.node_pools.system_group_labels``)."""

    cluster: eks.Cluster
    kubernetes_version: str
    subnet_ids: pulumi.Input[list[str]]
    instance_types: list[str]
    scaling: Scaling
    launch: LaunchSettings
    labels: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)


class SystemNodePool(_ManagedNodePool):
    """On-demand CPU nodes with no taint: controllers, add-ons and the gateway run here."""

    def __init__(self, name: str, args: SystemNodePoolArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-platform:index:SystemNodePool", name, None, opts)
        self._build(
            name,
            cluster=args.cluster,
            kubernetes_version=args.kubernetes_version,
            subnet_ids=args.subnet_ids,
            ami_type=versions.SYSTEM_AMI_TYPE,
            instance_types=args.instance_types,
            capacity_type="ON_DEMAND",
            scaling=args.scaling,
            labels=args.labels,
            taints=[],
            launch=args.launch,
            role_description="EKS system node pool",
            tags=args.tags,
            node_group_tags={},
        )


@dataclass(frozen=True)
class GpuNodePoolArgs:
    """Inputs of :class:`GpuNodePool`.

    ``instance_types`` share one GPU model (the pool's accelerator label); SPOT pools list at least
    two. ``accelerator``, ``gpu_memory_mib`` and ``gpus_per_node`` (the smallest type's GPU count)
    are what the settings resolved from the catalog for this pool. ``min_size`` is 0 so an idle pool costs nothing. ``cluster_name`` feeds Cluster Autoscaler
    discovery tags; ``kubernetes_version`` is the cluster's minor, so the group follows upgrades.
    ``labels`` are all the nodes carry (``components.specs.node_pools.gpu_group_labels``).
    """

    cluster: eks.Cluster
    cluster_name: str
    kubernetes_version: str
    subnet_ids: pulumi.Input[list[str]]
    instance_types: list[str]
    capacity_type: str
    scaling: Scaling
    launch: LaunchSettings
    accelerator: str
    gpu_memory_mib: int
    gpus_per_node: int
    purpose: str = contract.GPU_INFERENCE_PURPOSE
    labels: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    #: The capacity reservation the group launches into (``GpuPool.reservation``): its launch template then
    #: targets it and the group's subnets are cut to the reservation's zone, looked up in
    #: ``availability_zones`` (the Network's zones, in the order of ``subnet_ids``).
    reservation: CapacityReservation | None = None
    availability_zones: list[str] = field(default_factory=list)
    #: EFA interfaces per node (0: none): set for a pool that hosts a multi-node model
    #: (components/specs/efa.py: every interface of the type, a cluster placement group, one zone), with
    #: the nodes' security group the interfaces carry.
    efa_interfaces: int = 0
    security_group_id: pulumi.Input[str] | None = None


class GpuNodePool(_ManagedNodePool):
    """NVIDIA GPU nodes on the AL2023 NVIDIA AMI, tainted and labelled per the scheduling contract."""

    accelerator: str
    gpu_memory_mib: int
    gpus_per_node: int

    def __init__(self, name: str, args: GpuNodePoolArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-platform:index:GpuNodePool", name, None, opts)
        self.accelerator = args.accelerator
        self.gpu_memory_mib = args.gpu_memory_mib
        self.gpus_per_node = args.gpus_per_node
        labels = args.labels
        taints = contract.gpu_pool_taints_eks(args.purpose)
        subnet_ids: pulumi.Input[list[str]] = args.subnet_ids
        if args.reservation is not None:
            reservation, zones = args.reservation, list(args.availability_zones)
            try:  # refuse at once, before any resource: a zone without a subnet cannot use the reservation
                reservation_subnets(zones, zones, reservation)
            except ValueError as error:
                raise pulumi.RunError(f"llm-platform:gpuPools[{name}].reservation.availabilityZone: {error}") from None
            subnet_ids = pulumi.Output.from_input(args.subnet_ids).apply(
                lambda ids: reservation_subnets(ids, zones, reservation)
            )
        placement_group = None
        if args.efa_interfaces:
            placement_group = aws.ec2.PlacementGroup(
                f"{name}-placement", name=f"{args.cluster_name}-{name}", strategy=efa.PLACEMENT_STRATEGY, tags=args.tags,
                opts=pulumi.ResourceOptions(parent=self)).name
            if args.reservation is None:  # a reservation has cut the subnets to its zone already
                subnet_ids = pulumi.Output.from_input(args.subnet_ids).apply(efa.placement_subnets)
        self._build(
            name,
            cluster=args.cluster,
            kubernetes_version=args.kubernetes_version,
            subnet_ids=subnet_ids,
            ami_type=versions.GPU_AMI_TYPE,
            instance_types=args.instance_types,
            capacity_type=args.capacity_type,
            scaling=args.scaling,
            labels=labels,
            taints=taints,
            launch=args.launch,
            role_description=f"EKS GPU node pool {name}",
            tags=args.tags,
            node_group_tags=cluster_autoscaler_tags(args.cluster_name, labels, taints, self.gpus_per_node,
                                                    args.efa_interfaces),
            gpus_per_node=self.gpus_per_node,
            reservation=args.reservation,
            efa_interfaces=args.efa_interfaces,
            security_group_id=args.security_group_id,
            placement_group=placement_group,
        )
