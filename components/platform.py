"""Platform: the whole GPU serving platform of one stack, wired from validated settings."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from .cluster import Cluster, ClusterArgs
from .gpu_device_plugin import GpuDevicePlugin, GpuDevicePluginArgs
from .network import Network, NetworkArgs
from .node_pools import GpuNodePool, GpuNodePoolArgs, LaunchSettings, Scaling, SystemNodePool, SystemNodePoolArgs
from .settings import Settings

TYPE = "llm-platform:index:Platform"


def _scaling(s) -> Scaling:
    return Scaling(min_size=s.min_size, desired_size=s.desired_size, max_size=s.max_size)


class Platform(pulumi.ComponentResource):
    """Network, cluster, system pool, GPU pools and GPU software for one environment.

    Every AWS resource goes through one explicit provider for ``settings.region``; Kubernetes
    objects go through the cluster's provider, so nothing depends on ambient credentials' defaults.
    """

    cluster_name: pulumi.Output[str]
    kubeconfig: pulumi.Output[str]
    oidc_provider_arn: pulumi.Output[str]
    node_role_arns: pulumi.Output[dict[str, str]]
    system_pool: SystemNodePool
    gpu_pools: list[GpuNodePool]

    def __init__(self, name: str, settings: Settings, opts: pulumi.ResourceOptions | None = None):
        super().__init__(TYPE, name, None, opts)
        tags = {
            "llm-platform/environment": settings.environment,
            "llm-platform/stack": pulumi.get_stack(),
            "ManagedBy": "pulumi",
            **settings.tags,
        }
        aws_provider = aws.Provider(f"{name}-aws", region=settings.region, opts=pulumi.ResourceOptions(parent=self))
        on_aws = pulumi.ResourceOptions(parent=self, providers=[aws_provider])

        network = Network(
            f"{name}-network",
            NetworkArgs(
                cluster_name=settings.cluster_name,
                vpc_cidr=settings.network.vpc_cidr,
                az_count=settings.network.az_count,
                nat_gateways=settings.network.nat_gateways,
                tags=tags,
            ),
            opts=on_aws,
        )
        cluster = Cluster(
            f"{name}-cluster",
            ClusterArgs(
                name=settings.cluster_name,
                kubernetes_version=settings.kubernetes_version,
                vpc_id=network.vpc_id,
                private_subnet_ids=network.private_subnet_ids,
                public_subnet_ids=network.public_subnet_ids,
                public_access=settings.endpoint.public_access,
                public_access_cidrs=settings.endpoint.public_access_cidrs,
                admin_role_arns=settings.admin_role_arns,
                control_plane_logs=settings.control_plane_logs,
                kms_deletion_window_days=settings.kms_deletion_window_days,
                tags=tags,
            ),
            opts=on_aws,
        )
        system = settings.system_pool
        self.system_pool = SystemNodePool(
            "system",
            SystemNodePoolArgs(
                cluster=cluster.eks,
                subnet_ids=network.private_subnet_ids,
                instance_types=system.instance_types,
                scaling=_scaling(system.scaling),
                launch=LaunchSettings(disk_size_gib=system.disk_size_gib),
                labels=system.labels,
                tags=tags,
            ),
            opts=on_aws,
        )
        self.gpu_pools = [
            GpuNodePool(
                pool.name,
                GpuNodePoolArgs(
                    cluster=cluster.eks,
                    cluster_name=settings.cluster_name,
                    subnet_ids=network.private_subnet_ids,
                    instance_types=pool.instance_types,
                    capacity_type=pool.capacity_type,
                    scaling=_scaling(pool.scaling),
                    launch=LaunchSettings(disk_size_gib=pool.disk_size_gib, disk_throughput_mibps=500, disk_iops=6000),
                    purpose=pool.purpose,
                    labels=pool.labels,
                    tags=tags,
                ),
                opts=on_aws,
            )
            for pool in settings.gpu_pools
        ]
        GpuDevicePlugin(
            "nvidia-device-plugin",
            GpuDevicePluginArgs(),
            opts=pulumi.ResourceOptions(parent=self, providers=[cluster.provider], depends_on=[self.system_pool]),
        )

        self.cluster_name = cluster.name
        self.kubeconfig = cluster.kubeconfig
        self.oidc_provider_arn = cluster.oidc_provider_arn
        pool_names = ["system", *[pool.name for pool in settings.gpu_pools]]
        self.node_role_arns = pulumi.Output.all(*[p.node_role_arn for p in [self.system_pool, *self.gpu_pools]]).apply(
            lambda arns: dict(zip(pool_names, arns))
        )
        self.register_outputs(
            {
                "cluster_name": self.cluster_name,
                "kubeconfig": self.kubeconfig,
                "oidc_provider_arn": self.oidc_provider_arn,
                "node_role_arns": self.node_role_arns,
            }
        )
