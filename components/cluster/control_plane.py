"""Cluster: the EKS control plane with API access entries, KMS-encrypted Secrets and Pod Identity."""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks
import pulumi_kubernetes as k8s

from components import versions
from components.cluster.hybrid_nodes import remote_network_transform
from components.iam import pod_identity_trust

TYPE = "llm-platform:index:Cluster"


@dataclass(frozen=True)
class ClusterArgs:
    """Inputs of :class:`Cluster`.

    The private endpoint is always on. ``public_access`` opens the public endpoint to
    ``public_access_cidrs`` only (required when public access is on). ``admin_role_arns`` get
    cluster-admin access entries; the creator of the stack gets none implicitly beyond EKS's own
    bootstrap admin. ``kms_deletion_window_days`` (7-30) delays deletion of the Secrets key.
    ``auto_mode`` turns on EKS Auto Mode with its ``system`` node pool (our GPU NodePools are added
    separately). ``remote_node_networks``/``remote_pod_networks`` enable EKS Hybrid Nodes.
    ``break_glass_role_arn`` (optional) gets its own cluster-admin access entry, for when the usual
    admins or the creator's identity are lost. ``irsa`` creates the IAM OIDC provider; default off,
    every component here takes AWS credentials from EKS Pod Identity.
    """

    name: str
    kubernetes_version: str
    vpc_id: pulumi.Input[str]
    private_subnet_ids: pulumi.Input[list[str]]
    public_subnet_ids: pulumi.Input[list[str]]
    public_access: bool = False
    public_access_cidrs: list[str] = field(default_factory=list)
    admin_role_arns: list[str] = field(default_factory=list)
    control_plane_logs: list[str] = field(default_factory=list)
    kms_deletion_window_days: int = 30
    auto_mode: bool = False
    remote_node_networks: list[str] = field(default_factory=list)
    remote_pod_networks: list[str] = field(default_factory=list)
    break_glass_role_arn: str | None = None
    irsa: bool = False
    support_type: str = "STANDARD"
    deletion_protection: bool = False
    tags: dict[str, str] = field(default_factory=dict)


#: What the VPC CNI add-on is configured with: its network policy agent enforces NetworkPolicies.
VPC_CNI_CONFIGURATION = {"enableNetworkPolicy": "true"}
#: Service account of the EBS CSI controller (the add-on's own).
EBS_CSI_CONTROLLER_SERVICE_ACCOUNT = "ebs-csi-controller-sa"


def _admin_entry(principal_arn: str, admin_policy: pulumi.Input[str]) -> eks.AccessEntryArgs:
    return eks.AccessEntryArgs(
        principal_arn=principal_arn,
        type=eks.AccessEntryType.STANDARD,
        access_policies={
            "cluster-admin": eks.AccessPolicyAssociationArgs(
                policy_arn=admin_policy,
                access_scope=aws.eks.AccessPolicyAssociationAccessScopeArgs(type="cluster"),
            )
        },
    )


class Cluster(pulumi.ComponentResource):
    """An EKS cluster (pulumi-eks) with no default node group; node pools attach to :attr:`eks`."""

    eks: eks.Cluster
    provider: k8s.Provider
    name: pulumi.Output[str]
    kubeconfig: pulumi.Output[str]
    #: Only when ``irsa`` is on; None otherwise.
    oidc_provider_arn: pulumi.Output[str] | None
    oidc_provider_url: pulumi.Output[str] | None
    secrets_key_arn: pulumi.Output[str]
    #: The EKS-managed cluster security group: managed nodes and Karpenter nodes join it.
    node_security_group_id: pulumi.Output[str]

    def __init__(self, name: str, args: ClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(TYPE, name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        partition = aws.get_partition_output(opts=pulumi.InvokeOutputOptions(parent=self)).partition

        key = aws.kms.Key(
            f"{name}-secrets",
            description=f"Encrypts Kubernetes Secrets of EKS cluster {args.name}",
            enable_key_rotation=True,
            deletion_window_in_days=args.kms_deletion_window_days,
            tags=args.tags,
            opts=child,
        )
        aws.kms.Alias(f"{name}-secrets", name=f"alias/{args.name}-secrets", target_key_id=key.key_id, opts=child)

        admin_policy = pulumi.Output.concat(
            "arn:", partition, ":eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
        )
        access_entries = {f"admin-{i}": _admin_entry(arn, admin_policy) for i, arn in enumerate(args.admin_role_arns)}
        if args.break_glass_role_arn:
            access_entries["break-glass"] = _admin_entry(args.break_glass_role_arn, admin_policy)

        addons = versions.EKS_ADDONS[args.kubernetes_version]
        self.addon_versions = addons
        # kube-proxy and the VPC CNI are managed add-ons at pinned versions (pulumi-eks would resolve
        # "most recent" on every update otherwise). The system pool is a managed group even with
        # Auto Mode, so they are always installed (their DaemonSets skip Auto Mode nodes).
        # CoreDNS needs nodes: see install_coredns.
        self.eks = eks.Cluster(
            f"{name}-eks",
            name=args.name,
            version=args.kubernetes_version,
            vpc_id=args.vpc_id,
            private_subnet_ids=args.private_subnet_ids,
            public_subnet_ids=args.public_subnet_ids,
            node_associate_public_ip_address=False,
            skip_default_node_group=True,
            skip_default_security_groups=True,
            authentication_mode=eks.AuthenticationMode.API,
            access_entries=access_entries,
            endpoint_private_access=True,
            endpoint_public_access=args.public_access,
            public_access_cidrs=args.public_access_cidrs if args.public_access else None,
            encryption_config_key_arn=key.arn,
            create_oidc_provider=args.irsa,
            enabled_cluster_log_types=args.control_plane_logs,
            upgrade_policy=aws.eks.ClusterUpgradePolicyArgs(support_type=args.support_type),
            deletion_protection=args.deletion_protection,
            auto_mode=(
                eks.AutoModeOptionsArgs(
                    enabled=True, compute_config=eks.ClusterComputeConfigArgs(node_pools=["system"])
                )
                if args.auto_mode
                else None
            ),
            tags=args.tags,
            kube_proxy_addon_options=eks.KubeProxyAddonOptionsArgs(enabled=True, version=addons.kube_proxy),
            # The CNI's network policy agent enforces the platform's NetworkPolicies.
            vpc_cni_options=eks.VpcCniOptionsArgs(addon_version=addons.vpc_cni, configuration_values=VPC_CNI_CONFIGURATION),
            coredns_addon_options=eks.CoreDnsAddonOptionsArgs(enabled=False),
            opts=pulumi.ResourceOptions(
                parent=self,
                transforms=(
                    [remote_network_transform(args.remote_node_networks, args.remote_pod_networks)]
                    if args.remote_node_networks
                    else None
                ),
            ),
        )

        #: Controllers that take AWS credentials from Pod Identity (Karpenter, Cluster Autoscaler)
        #: are ordered after this add-on.
        self.pod_identity_agent = aws.eks.Addon(
            f"{name}-pod-identity-agent",
            cluster_name=args.name,
            addon_name="eks-pod-identity-agent",
            addon_version=addons.pod_identity_agent,
            resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="OVERWRITE",
            tags=args.tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.eks]),
        )

        # EBS CSI driver: Prometheus and Alertmanager volumes (gp3 StorageClass) need it to bind.
        ebs_role = aws.iam.Role(
            f"{name}-ebs-csi",
            description=f"EBS CSI controller of EKS cluster {args.name}",
            assume_role_policy=pod_identity_trust(),
            tags=args.tags,
            opts=child,
        )
        aws.iam.RolePolicyAttachment(
            f"{name}-ebs-csi",
            role=ebs_role.name,
            policy_arn=pulumi.Output.concat("arn:", partition, ":iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy"),
            opts=child,
        )
        self.ebs_csi_driver = aws.eks.Addon(
            f"{name}-ebs-csi-driver",
            cluster_name=args.name,
            addon_name="aws-ebs-csi-driver",
            addon_version=addons.ebs_csi_driver,
            pod_identity_associations=[
                aws.eks.AddonPodIdentityAssociationArgs(role_arn=ebs_role.arn, service_account=EBS_CSI_CONTROLLER_SERVICE_ACCOUNT)
            ],
            resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="OVERWRITE",
            tags=args.tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.eks, self.pod_identity_agent]),
        )

        self._name = name
        self._args = args
        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=self.eks.kubeconfig_json,
            enable_server_side_apply=True,
            opts=child,
        )

        self.name = self.eks.kubeconfig_json.apply(lambda _: args.name)
        self.kubeconfig = pulumi.Output.secret(self.eks.kubeconfig_json)
        self.oidc_provider_arn = self.eks.oidc_provider_arn if args.irsa else None
        self.oidc_provider_url = self.eks.oidc_provider_url if args.irsa else None
        self.secrets_key_arn = key.arn
        self.node_security_group_id = self.eks.node_security_group_id
        self.register_outputs(
            {
                "name": self.name,
                "kubeconfig": self.kubeconfig,
                "oidc_provider_arn": self.oidc_provider_arn,
                "oidc_provider_url": self.oidc_provider_url,
                "secrets_key_arn": self.secrets_key_arn,
                "node_security_group_id": self.node_security_group_id,
            }
        )

    def install_coredns(self, nodes: list[pulumi.Resource]) -> aws.eks.Addon:
        """CoreDNS as a managed add-on at its pinned version, once ``nodes`` exist to run it (the
        add-on stays DEGRADED, and the update fails, on a cluster without nodes)."""
        return aws.eks.Addon(
            f"{self._name}-coredns",
            cluster_name=self._args.name,
            addon_name="coredns",
            addon_version=self.addon_versions.coredns,
            resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="OVERWRITE",
            tags=self._args.tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.eks, *nodes]),
        )
