"""HybridNodes: on-prem GPU servers joined to the cluster as EKS Hybrid Nodes.

What the AWS side needs so that a server running ``nodeadm init`` becomes a serving GPU node:

- credentials: an IAM role that SSM hybrid activations hand to each registered server, with an
  access entry of type ``HYBRID_LINUX`` (EKS maps it to the node's identity) and an activation whose
  id and code the join configuration carries. SSM rather than IAM Roles Anywhere: an activation needs
  no certificate authority or per-server certificates to issue and rotate, SSM rotates each server's
  credentials itself, and a server is removed by deregistering its managed instance;
- the cluster security group rules for the remote networks (``components.specs.hybrid_nodes``);
- per pool, a ``HybridNodePool`` that carries the pool's description (what the capacity model and the
  policy pack read) and its ``nodeadm`` configuration (a secret: it holds the activation code);
- Cilium on the hybrid nodes only: the VPC CNI cannot run there.

The cluster's remote network config and the VPC routes are set where those resources are made
(``Cluster`` through :func:`remote_network_transform`, ``Network`` through its remote routes).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s
import yaml

from components import versions
from components.helm import pinned_release
from components.specs import hybrid_nodes as spec
from components.specs.gpu_software import Provider
from policies.capacity import kinds

if TYPE_CHECKING:
    from components.settings.cluster import HybridPool

TYPE = "llm-platform:index:HybridNodes"
POOL_TYPE = kinds.HYBRID_NODE_POOL
HYBRID_MANAGED_POLICIES = ("AmazonSSMManagedInstanceCore", "AmazonEC2ContainerRegistryPullOnly")


def remote_network_transform(node_cidrs: list[str], pod_cidrs: list[str]):
    """A resource transform that gives the EKS cluster inside pulumi-eks's Cluster component its
    ``remoteNetworkConfig`` (pulumi-eks has no input for it; aws.eks.Cluster does)."""

    def transform(args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult | None:
        if args.type_ != kinds.AWS_EKS_CLUSTER:
            return None
        config: dict[str, Any] = {"remoteNodeNetworks": {"cidrs": list(node_cidrs)}}
        if pod_cidrs:
            config["remotePodNetworks"] = {"cidrs": list(pod_cidrs)}
        return pulumi.ResourceTransformResult(props={**args.props, "remoteNetworkConfig": config}, opts=args.opts)

    return transform


def hybrid_node_policy(partition: str, region: str, account: str, cluster_name: str) -> str:
    """What the node's credentials are for besides joining: ``nodeadm`` reads the cluster (endpoint, CA,
    its own access entry) and deregisters the server's managed instance on ``nodeadm uninstall``; the
    EKS Pod Identity agent (an add-on EKS supports on hybrid nodes from v1.3.3) exchanges pods' tokens
    for their roles (``eks-auth:AssumeRoleForPodIdentity``, the permission the EKS user guide gives node
    roles for it), so models on hybrid nodes read their weights as on cloud nodes."""
    cluster_arn = f"arn:{partition}:eks:{region}:{account}:cluster/{cluster_name}"
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {"Sid": "DescribeCluster", "Effect": "Allow", "Action": ["eks:DescribeCluster", "eks:ListAccessEntries"], "Resource": cluster_arn},
                {"Sid": "PodIdentity", "Effect": "Allow", "Action": ["eks-auth:AssumeRoleForPodIdentity"], "Resource": cluster_arn},
                {
                    "Sid": "DeregisterSelf",
                    "Effect": "Allow",
                    "Action": ["ssm:DeregisterManagedInstance", "ssm:DescribeInstanceInformation"],
                    "Resource": "*",
                    "Condition": {"ArnLike": {"ssm:SourceInstanceARN": f"arn:{partition}:ssm:{region}:{account}:managed-instance/*"}},
                },
            ],
        }
    )


@dataclass(frozen=True)
class HybridNodesArgs:
    """Inputs of :class:`HybridNodes`.

    ``pools``: the on-prem pools (settings ``hybridNodes.pools``); ``software``: the GPU software
    provider (the pools' operand labels follow it). ``node_cidrs``/``pod_cidrs``: the remote networks.
    ``cluster_security_group_id``: the EKS cluster security group the rules go on. ``activation_limit``
    caps how many servers the SSM activation registers (default: twice the pools' servers, so each
    can be re-registered once).
    """

    cluster_name: str
    cluster_resource: pulumi.Resource
    cluster_security_group_id: pulumi.Input[str]
    region: str
    pools: list[HybridPool]
    software: Provider
    node_cidrs: list[str]
    pod_cidrs: list[str]
    activation_limit: int | None = None
    tags: dict[str, str] = field(default_factory=dict)


class HybridNodePool(pulumi.ComponentResource):
    """One set of identical on-prem servers: its description (inputs and outputs alike, so a preview's
    policy pack reads it from either) and the ``nodeadm`` configuration its servers join with."""

    node_config: pulumi.Output[str]

    def __init__(self, name: str, description: dict[str, Any], node_config: pulumi.Output[str],
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__(POOL_TYPE, name, description, opts)
        self.node_config = pulumi.Output.secret(node_config)
        self.register_outputs({**description, "nodeConfig": self.node_config})


class HybridNodes(pulumi.ComponentResource):
    """Hybrid node IAM role (SSM), its access entry, an SSM activation, the cluster security group rules,
    one :class:`HybridNodePool` per pool, and Cilium on the hybrid nodes."""

    role_arn: pulumi.Output[str]
    activation_id: pulumi.Output[str]
    #: ``nodeadm`` configuration (YAML) per pool name; secret.
    node_configs: pulumi.Output[dict[str, str]]

    def __init__(self, name: str, args: HybridNodesArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(TYPE, name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        role = self._role(name, args, child)
        activation = self._access(name, args, role, child)
        self._security_group_rules(name, args, child)
        configs = {pool.name: self._pool(pool, args, activation) for pool in args.pools}
        self._cilium(name, args)
        self.role_arn = role.arn
        self.activation_id = activation.id
        self.node_configs = pulumi.Output.secret(pulumi.Output.all(**configs))
        self.register_outputs(
            {"role_arn": self.role_arn, "activation_id": self.activation_id, "node_configs": self.node_configs}
        )

    # --- hybrid nodes IAM role --------------------------------------------------------------------

    def _role(self, name: str, args: HybridNodesArgs, child: pulumi.ResourceOptions) -> aws.iam.Role:
        partition = aws.get_partition_output(opts=pulumi.InvokeOutputOptions(parent=self)).partition
        account = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(parent=self)).account_id
        role = aws.iam.Role(
            f"{name}-role",
            description=f"EKS hybrid nodes of {args.cluster_name}",
            assume_role_policy=json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [
                        {"Effect": "Allow", "Principal": {"Service": "ssm.amazonaws.com"}, "Action": ["sts:AssumeRole", "sts:TagSession"]}
                    ],
                }
            ),
            tags=args.tags,
            opts=child,
        )
        for policy in HYBRID_MANAGED_POLICIES:
            aws.iam.RolePolicyAttachment(
                f"{name}-{policy}",
                role=role.name,
                policy_arn=pulumi.Output.concat("arn:", partition, ":iam::aws:policy/", policy),
                opts=child,
            )
        aws.iam.RolePolicy(
            f"{name}-cluster",
            role=role.name,
            policy=pulumi.Output.all(partition, account).apply(
                lambda a: hybrid_node_policy(a[0], args.region, a[1], args.cluster_name)
            ),
            opts=child,
        )
        return role

    # --- access entry and activation --------------------------------------------------------------

    def _access(self, name: str, args: HybridNodesArgs, role: aws.iam.Role,
                child: pulumi.ResourceOptions) -> aws.ssm.Activation:
        aws.eks.AccessEntry(
            f"{name}-access",
            cluster_name=args.cluster_name,
            principal_arn=role.arn,
            type="HYBRID_LINUX",
            tags=args.tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[args.cluster_resource]),
        )
        servers = sum(pool.nodes for pool in args.pools)
        return aws.ssm.Activation(
            f"{name}-activation",
            description=f"Registers on-prem GPU servers as hybrid nodes of {args.cluster_name}",
            iam_role=role.name,
            registration_limit=args.activation_limit or min(1000, max(2, 2 * servers)),
            tags=args.tags,
            opts=child,
        )

    # --- cluster security group -------------------------------------------------------------------

    def _security_group_rules(self, name: str, args: HybridNodesArgs, child: pulumi.ResourceOptions) -> None:
        for index, rule in enumerate(spec.cluster_security_group_rules(args.node_cidrs, args.pod_cidrs)):
            kind = aws.vpc.SecurityGroupIngressRule if rule["direction"] == "ingress" else aws.vpc.SecurityGroupEgressRule
            kind(
                f"{name}-{rule['direction']}-{index}",
                security_group_id=args.cluster_security_group_id,
                cidr_ipv4=rule["cidr"],
                ip_protocol=rule["protocol"],
                from_port=rule["fromPort"],
                to_port=rule["toPort"],
                description=rule["description"],
                tags=args.tags,
                opts=child,
            )

    # --- pools and their join configuration -------------------------------------------------------

    def _pool(self, pool: HybridPool, args: HybridNodesArgs, activation: aws.ssm.Activation) -> pulumi.Output[str]:
        config = pulumi.Output.all(activation.id, activation.activation_code).apply(
            lambda a: yaml.safe_dump(
                spec.node_config(cluster_name=args.cluster_name, region=args.region, pool=pool, software=args.software,
                                 activation_id=a[0], activation_code=a[1]),
                sort_keys=False,
            )
        )
        node_pool = HybridNodePool(pool.name, spec.pool_description(pool, args.software), config,
                                   opts=pulumi.ResourceOptions(parent=self))
        return node_pool.node_config

    # --- the CNI on hybrid nodes ------------------------------------------------------------------

    def _cilium(self, name: str, args: HybridNodesArgs) -> k8s.helm.v3.Release:
        """Cilium, the EKS Hybrid Nodes guide's way: hybrid nodes only; the VPC CNI keeps the cloud nodes
        (its add-on's default affinity already excludes ``compute-type: hybrid``)."""
        return pinned_release(
            f"{name}-cilium",
            versions.CILIUM,
            release_name=spec.CILIUM_RELEASE,
            namespace=spec.CILIUM_NAMESPACE,
            create_namespace=False,
            wait=False,
            values=spec.cilium_values(args.pod_cidrs, max(p.max_pods for p in args.pools), sum(p.nodes for p in args.pools)),
            opts=pulumi.ResourceOptions(parent=self),
        )
