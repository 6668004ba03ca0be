"""Platform: the whole GPU serving platform of one stack, wired from validated settings."""

from __future__ import annotations

import ipaddress

import pulumi
import pulumi_aws as aws

from components import versions
from components.capacity_check import CheckedStack, check_stack
from components.cluster.control_plane import Cluster, ClusterArgs
from components.cluster.hybrid_nodes import HybridNodes, HybridNodesArgs
from components.cluster.network import Network, NetworkArgs
from components.gpu.dcgm_exporter import DcgmExporter, DcgmExporterArgs
from components.gpu.device_plugin import GpuDevicePlugin, GpuDevicePluginArgs
from components.gpu.dra_driver import GpuDraDriver, GpuDraDriverArgs
from components.gpu.efa import EfaFabric, EfaFabricArgs
from components.gpu.operator import GpuOperator, GpuOperatorArgs
from components.karpenter.controller import Karpenter, KarpenterArgs
from components.karpenter.node_pools import KarpenterNodePools, KarpenterNodePoolsArgs
from components.managed_pools.cluster_autoscaler import ClusterAutoscaler, ClusterAutoscalerArgs
from components.managed_pools.node_groups import (
    GpuNodePool,
    GpuNodePoolArgs,
    LaunchSettings,
    Scaling,
    SystemNodePool,
    SystemNodePoolArgs,
)
from components.observability.prometheus import Observability, ObservabilityArgs
from components.observability.token_cost import bedrock_fallbacks, chargeback_prices, gpu_prices
from components.serving.event_autoscaler import EventAutoscaler, EventAutoscalerArgs
from components.serving.gateway import Gateway, GatewayArgs
from components.serving.group_controller import GroupController, GroupControllerArgs
from components.serving.image_prepull import ImagePrepull, ImagePrepullArgs
from components.serving.routing import RoutingCrds
from components.serving.tier import ServingTier, ServingTierArgs
from components.settings import Settings, SettingsError, settings_warnings
from components.settings.cluster import service_cidr
from components.specs import hybrid_nodes as hybrid_specs
from components.specs.blueprint import (
    cluster_autoscaler_groups,
    efa_interfaces_by_pool,
    gpu_software_charts,
    hybrid_pools,
    installs_prometheus,
    karpenter_node_pools,
    prefix_routed_tiers,
    prepull_hosts,
    spans_nodes,
)
from components.specs.gateway import Route
from components.specs.gateway import api_key_env as gateway_api_key_env
from components.specs.node_pools import SYSTEM_POOL, gpu_group_labels, system_group_labels
from components.specs.routing import PICKER_SELECTOR_KEY, PROXY_PORT, picker_replicas

TYPE = "llm-platform:index:Platform"


def _scaling(s) -> Scaling:
    return Scaling(min_size=s.min_size, desired_size=s.desired_size, max_size=s.max_size)


class Platform(pulumi.ComponentResource):
    """Network, cluster, node pools of every configured type, and the GPU software for one environment.

    Every AWS resource goes through one explicit provider for ``settings.region``; Kubernetes
    objects go through the cluster's provider, so nothing depends on ambient defaults. What exists is
    the blueprint's decision (``components.specs.blueprint``); each model's pool is the one the capacity
    verdict placed it on.
    """

    cluster_name: pulumi.Output[str]
    kubeconfig: pulumi.Output[str]
    #: IAM OIDC provider, only when a component uses IRSA (none does: all use Pod Identity).
    oidc_provider_arn: pulumi.Output[str] | None
    node_role_arns: pulumi.Output[dict[str, str]]
    system_pool: SystemNodePool
    gpu_pools: list[GpuNodePool]
    karpenter: Karpenter | None

    def __init__(self, name: str, stack: CheckedStack, opts: pulumi.ResourceOptions | None = None):
        super().__init__(TYPE, name, None, opts)
        settings = stack.settings
        tags = {
            "llm-platform/environment": settings.environment,
            "llm-platform/stack": pulumi.get_stack(),
            "ManagedBy": "pulumi",
            **settings.tags,
        }
        aws_provider = aws.Provider(f"{name}-aws", region=settings.region, opts=pulumi.ResourceOptions(parent=self))
        on_aws = pulumi.ResourceOptions(parent=self, providers=[aws_provider])

        network, cluster = self._network_and_cluster(name, settings, tags, on_aws)
        self._managed_node_groups(settings, network, cluster, tags, on_aws)
        cluster.install_coredns([self.system_pool])
        on_cluster = pulumi.ResourceOptions(
            parent=self, providers=[aws_provider, cluster.provider], depends_on=[self.system_pool]
        )
        self._node_provisioning(settings, network, cluster, tags, on_aws, on_cluster)
        observability = self._observability(settings, tags, on_cluster)
        self._gpu_software(settings, observability, on_cluster)
        self.endpoints: dict[str, str] = {}
        self.gateway_url: str | None = None
        #: The gateway's Bedrock role (exported for preflight and ``verify``); None without fallbacks.
        self.gateway_role_arn: pulumi.Output[str] | None = None
        if settings.serving.enabled:
            assert observability is not None  # _observability installs Prometheus whenever serving is enabled
            self._serving(stack, on_cluster, observability, tags, cluster.node_security_group_id)
        self._outputs(settings, cluster)

    def _network_and_cluster(
        self, name: str, settings: Settings, tags: dict[str, str], on_aws: pulumi.ResourceOptions
    ) -> tuple[Network, Cluster]:
        """The VPC (with routes to the on-prem networks when hybrid nodes are on), then the EKS control
        plane in its subnets (access entries, logs, KMS, add-ons, remote networks)."""
        hybrid = settings.hybrid_nodes
        remote_routes = (hybrid_specs.remote_routes(hybrid.remote_node_networks + hybrid.remote_pod_networks,
                                                    hybrid.connectivity)
                         if hybrid.enabled and hybrid.connectivity is not None else [])
        network = Network(
            f"{name}-network",
            NetworkArgs(
                cluster_name=settings.cluster_name,
                vpc_cidr=settings.network.vpc_cidr,
                az_count=settings.network.az_count,
                nat_gateways=settings.network.nat_gateways,
                remote_routes=remote_routes,
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
                break_glass_role_arn=settings.endpoint.break_glass_role_arn,
                control_plane_logs=settings.control_plane_logs,
                kms_deletion_window_days=settings.kms_deletion_window_days,
                support_type=settings.upgrade_policy.support_type,
                deletion_protection=settings.cluster_deletion_protection,
                auto_mode=settings.auto_mode.enabled,
                remote_node_networks=hybrid.remote_node_networks if hybrid.enabled else [],
                remote_pod_networks=hybrid.remote_pod_networks if hybrid.enabled else [],
                tags=tags,
            ),
            opts=on_aws,
        )
        return network, cluster

    def _managed_node_groups(
        self, settings: Settings, network: Network, cluster: Cluster, tags: dict[str, str],
        on_aws: pulumi.ResourceOptions,
    ) -> None:
        """The system pool (CoreDNS, controllers) and one managed node group per configured GPU pool."""
        system = settings.system_pool
        self.system_pool = SystemNodePool(
            SYSTEM_POOL,
            SystemNodePoolArgs(
                cluster=cluster.eks,
                kubernetes_version=settings.kubernetes_version,
                subnet_ids=network.private_subnet_ids,
                instance_types=system.instance_types,
                scaling=_scaling(system.scaling),
                launch=LaunchSettings(disk_size_gib=system.disk_size_gib),
                labels=system_group_labels(system),
                tags=tags,
            ),
            opts=on_aws,
        )
        software = settings.gpu_software.provider
        efa_pools = efa_interfaces_by_pool(settings)
        self.gpu_pools = [
            GpuNodePool(
                pool.name,
                GpuNodePoolArgs(
                    cluster=cluster.eks,
                    cluster_name=settings.cluster_name,
                    kubernetes_version=settings.kubernetes_version,
                    subnet_ids=network.private_subnet_ids,
                    instance_types=pool.instance_types,
                    capacity_type=pool.capacity_type,
                    reservation=pool.reservation,
                    availability_zones=network.availability_zones,
                    scaling=_scaling(pool.scaling),
                    launch=LaunchSettings(
                        disk_size_gib=pool.disk_size_gib,
                        disk_throughput_mibps=pool.disk_throughput_mibps,
                        disk_iops=pool.disk_iops,
                        nvme_ephemeral_storage=True,
                        fast_image_pull=pool.fast_image_pull,
                    ),
                    accelerator=pool.accelerator,
                    gpu_memory_mib=pool.gpu_memory_mib,
                    gpus_per_node=pool.min_gpus_per_node,
                    purpose=pool.purpose,
                    labels=gpu_group_labels(pool, software),
                    tags=tags,
                    efa_interfaces=efa_pools.get(pool.name, 0),
                    security_group_id=cluster.node_security_group_id if pool.name in efa_pools else None,
                ),
                opts=on_aws,
            )
            for pool in settings.gpu_pools
        ]

    def _node_provisioning(
        self, settings: Settings, network: Network, cluster: Cluster, tags: dict[str, str], on_aws: pulumi.ResourceOptions,
        on_cluster: pulumi.ResourceOptions,
    ) -> None:
        """Who adds nodes: Karpenter and its NodePools, EKS Auto Mode NodePools, Cluster Autoscaler for
        managed groups that can grow, and hybrid nodes' IAM."""
        cluster_name, software = settings.cluster_name, settings.gpu_software.provider
        self.karpenter = None
        if settings.karpenter.enabled:
            self.karpenter = Karpenter(
                "karpenter",
                KarpenterArgs(
                    cluster_name=cluster_name,
                    cluster_resource=cluster.eks,
                    node_security_group_id=cluster.node_security_group_id,
                    region=settings.region,
                    pod_identity_agent=cluster.pod_identity_agent,
                    replicas=settings.karpenter.replicas,
                    tags=tags,
                ),
                opts=on_cluster,
            )
            KarpenterNodePools(
                "karpenter-gpu",
                KarpenterNodePoolsArgs(
                    cluster_name=cluster_name,
                    node_type="karpenter",
                    node_pools=karpenter_node_pools(settings),
                    node_classes=settings.karpenter.node_classes,
                    node_role=self.karpenter.node_role_name,
                    gpu_software=software,
                    availability_zones=network.availability_zones,
                    tags=tags,
                ),
                opts=pulumi.ResourceOptions.merge(on_cluster, pulumi.ResourceOptions(depends_on=[self.karpenter])),
            )
        if settings.auto_mode.gpu_node_pools:
            KarpenterNodePools(
                "auto-mode-gpu",
                KarpenterNodePoolsArgs(
                    cluster_name=cluster_name,
                    node_type="auto-mode",
                    node_pools=settings.auto_mode.gpu_node_pools,
                    gpu_software=software,
                ),
                opts=on_cluster,
            )
        owned = cluster_autoscaler_groups(settings)
        if owned:
            groups = {SYSTEM_POOL: self.system_pool, **dict(zip([p.name for p in settings.gpu_pools], self.gpu_pools))}
            ClusterAutoscaler(
                "cluster-autoscaler",
                ClusterAutoscalerArgs(
                    cluster_name=cluster_name,
                    cluster_resource=cluster.eks,
                    region=settings.region,
                    kubernetes_version=settings.kubernetes_version,
                    autoscaling_group_names=[groups[name].autoscaling_group_name for name in owned],
                    pod_identity_agent=cluster.pod_identity_agent,
                    replicas=2 if settings.production else 1,
                    tags=tags,
                ),
                opts=on_cluster,
            )
        self.hybrid_nodes: HybridNodes | None = None
        hybrid = settings.hybrid_nodes
        if hybrid_pools(settings):
            self.hybrid_nodes = HybridNodes(
                "hybrid-nodes",
                HybridNodesArgs(
                    cluster_name=cluster_name,
                    cluster_resource=cluster.eks,
                    cluster_security_group_id=cluster.node_security_group_id,
                    region=settings.region,
                    pools=hybrid_pools(settings),
                    software=software,
                    node_cidrs=hybrid.remote_node_networks,
                    pod_cidrs=hybrid.remote_pod_networks,
                    tags=tags,
                ),
                opts=on_cluster,
            )

    def _observability(
        self, settings: Settings, tags: dict[str, str], on_cluster: pulumi.ResourceOptions
    ) -> Observability | None:
        """Prometheus, alerts and Alertmanager, when something serves models or exports GPU metrics."""
        if not installs_prometheus(settings):
            return None
        return Observability(
            "observability",
            ObservabilityArgs(
                gpu_hours_budget=settings.gpu_hours_monthly_budget,
                gpu_memory_utilizations=tuple(
                    m.gpu_memory_utilization for t in settings.serving.tiers for m in t.models
                ),
                gateway=settings.serving.enabled and settings.serving.gateway.enabled,
                tier_scaling=tuple((t.name, t.scaling) for t in settings.serving.tiers),
                gpu_prices=gpu_prices(settings.region),
                pool_prices=chargeback_prices(hybrid_pools(settings)),
                bedrock_fallbacks=bedrock_fallbacks(
                    [(m.name, m.kind) for t in settings.serving.tiers for m in t.models],
                    settings.serving.gateway.fallbacks() if settings.serving.gateway.enabled else {},
                    settings.serving.gateway.bedrock_region,
                ),
                cluster_autoscaler=bool(cluster_autoscaler_groups(settings)),
                settings=settings.observability,
                cluster_name=settings.cluster_name,
                tags=tags,
            ),
            opts=on_cluster,
        )

    def _gpu_software(
        self, settings: Settings, observability: Observability | None, on_cluster: pulumi.ResourceOptions
    ) -> None:
        """The NVIDIA stack the settings chose (device plugin + DCGM exporter, or the GPU Operator), and
        the DRA driver when a pool is for DRA. Exporters wait for Prometheus' CRDs."""
        charts = gpu_software_charts(settings)
        with_monitoring = pulumi.ResourceOptions.merge(
            on_cluster, pulumi.ResourceOptions(depends_on=[observability] if observability else [])
        )
        if versions.NVIDIA_DEVICE_PLUGIN in charts:
            GpuDevicePlugin("nvidia-device-plugin", GpuDevicePluginArgs(), opts=on_cluster)
        if versions.DCGM_EXPORTER in charts:
            DcgmExporter("dcgm-exporter", DcgmExporterArgs(), opts=with_monitoring)
        if versions.NVIDIA_GPU_OPERATOR in charts:
            GpuOperator(
                "gpu-operator",
                GpuOperatorArgs(
                    install_driver=settings.hybrid_nodes.enabled, dcgm_exporter=settings.gpu_software.dcgm_exporter
                ),
                opts=with_monitoring,
            )
        if versions.NVIDIA_DRA_DRIVER in charts:
            GpuDraDriver("nvidia-dra-driver", GpuDraDriverArgs(), opts=on_cluster)

    def _outputs(self, settings: Settings, cluster: Cluster) -> None:
        self.cluster_name = cluster.name
        self.kubeconfig = cluster.kubeconfig
        self.oidc_provider_arn = cluster.oidc_provider_arn
        roles = {SYSTEM_POOL: self.system_pool.node_role_arn}
        roles.update({pool.name: group.node_role_arn for pool, group in zip(settings.gpu_pools, self.gpu_pools)})
        if self.karpenter is not None:
            roles["karpenter"] = self.karpenter.node_role_arn
        self.node_role_arns = pulumi.Output.all(**roles)
        #: What on-prem operators join servers with: ``nodeadm`` configuration per hybrid pool (secret:
        #: it carries the SSM activation code), and the activation's id.
        self.hybrid_node_configs = self.hybrid_nodes.node_configs if self.hybrid_nodes else None
        self.hybrid_activation_id = self.hybrid_nodes.activation_id if self.hybrid_nodes else None
        self.register_outputs(
            {
                "hybrid_node_configs": self.hybrid_node_configs,
                "hybrid_activation_id": self.hybrid_activation_id,
                "cluster_name": self.cluster_name,
                "kubeconfig": self.kubeconfig,
                "node_role_arns": self.node_role_arns,
                "endpoints": self.endpoints,
                "gateway_url": self.gateway_url,
                "gateway_role_arn": self.gateway_role_arn,
            }
        )

    def _serving(
        self,
        stack: CheckedStack,
        on_cluster: pulumi.ResourceOptions,
        observability: Observability,
        tags: dict[str, str],
        node_security_group_id: pulumi.Input[str],
    ) -> None:
        """Prometheus and KEDA first (their CRDs), then the tiers, then the gateway in front of them."""
        settings = stack.settings
        cluster_name = settings.cluster_name
        serving = settings.serving
        autoscaler = EventAutoscaler("keda", EventAutoscalerArgs(), opts=on_cluster)
        # LeaderWorkerSet's controller and CRDs, and EFA, only where a model spans nodes.
        groups: list[pulumi.Resource] = []
        if spans_nodes(settings):
            groups = [GroupController("lws", GroupControllerArgs(), opts=on_cluster),
                      EfaFabric("efa", EfaFabricArgs(node_security_group_id=node_security_group_id), opts=on_cluster)]
        after_platform = pulumi.ResourceOptions.merge(
            on_cluster, pulumi.ResourceOptions(depends_on=[observability, autoscaler, *groups])
        )
        token = settings.hugging_face_token
        pools = settings.gpu_pool_facts()
        starts = stack.model_pools()  # where each model starts: its await bound
        api_keys: dict[str, pulumi.Input[str]] = {}
        hosting = prepull_hosts(settings)
        if hosting:
            ImagePrepull("image-prepull", ImagePrepullArgs(image=str(versions.VLLM_IMAGE), pools=hosting), opts=on_cluster)
        routed = bool(prefix_routed_tiers(settings))
        crds = RoutingCrds("routing-crds", opts=on_cluster) if routed else None
        api_server_ip = str(ipaddress.ip_network(service_cidr(settings.network.vpc_cidr))[1])
        for tier in serving.tiers:
            served = ServingTier(
                f"tier-{tier.name}",
                ServingTierArgs(
                    tier=tier,
                    pools=pools,
                    prometheus_url=observability.prometheus_url,
                    cluster_name=cluster_name,
                    hf_token=pulumi.Output.secret(token.get_secret_value()) if token is not None else None,
                    tags=tags,
                    model_pools={m.name: pool for m, pool in starts.values() if m in tier.models},
                    region=settings.region,
                    routing_crds=crds,
                    picker_replicas=picker_replicas(settings.production),
                    api_server_ip=api_server_ip,
                    fallback_targets=serving.fallback_targets(),
                    vpc_cidr=settings.network.vpc_cidr,
                ),
                opts=after_platform,
            )
            self.endpoints.update(served.endpoints)
            api_keys[gateway_api_key_env(tier.name)] = served.api_key
        if serving.gateway.enabled:
            chains = serving.fallback_chains()
            gateway = Gateway(
                "gateway",
                GatewayArgs(
                    routes=[
                        Route(model.name, self.endpoints[model.name], model.kind, gateway_api_key_env(tier.name),
                              fallbacks=tuple(chains[model.name]))
                        for tier in serving.tiers
                        for model in tier.models
                    ],
                    bedrock_models=serving.gateway.fallbacks(),
                    bedrock_region=serving.gateway.bedrock_region,
                    cluster_name=cluster_name,
                    model_api_keys=api_keys,
                    replicas=serving.gateway.replicas,
                    timeout_seconds=serving.gateway.timeout_seconds,
                    num_retries=serving.gateway.num_retries,
                    tags=tags,
                    picker_key=PICKER_SELECTOR_KEY if routed else None,
                    proxy_port=PROXY_PORT,
                ),
                opts=after_platform,
            )
            self.gateway_url = gateway.url
            self.gateway_role_arn = gateway.bedrock_role_arn


def stack_settings() -> CheckedStack:
    """The running stack's settings, checked, from the config the language host passes to the program.

    Credentials set with ``--secret`` arrive decrypted and are used only inside ``Output.secret``;
    one set in plain text is accepted with a warning naming the key."""
    config = pulumi.runtime.get_config_env()
    try:
        stack = check_stack(config)
    except SettingsError as exc:
        raise pulumi.RunError(str(exc)) from None
    for line in settings_warnings(config, stack.settings, pulumi.runtime.get_config_secret_keys_env()):
        pulumi.log.warn(line.removeprefix("warning: "))  # the engine labels it a warning
    return stack
