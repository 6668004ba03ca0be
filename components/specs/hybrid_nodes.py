"""EKS Hybrid Nodes as the engine receives them: what the VPC, the cluster security group, the join
configuration of each on-prem pool and the CNI on those nodes are made of.

Everything here is pure data from settings (no ``pulumi``): the ``HybridNodes`` component, the
settings' capacity adapter and the tests read the same values.

Facts used (EKS user guide, "Prepare networking for hybrid nodes", "Configure CNI for hybrid nodes",
"Hybrid nodes nodeadm reference"):

- the VPC's route tables need a route to every remote node and pod network through the Transit
  Gateway or virtual private gateway that reaches on-prem;
- the cluster security group must let the remote node and pod networks reach the API server (TCP 443);
  the control plane reaches kubelets (TCP 10250) and webhooks on the remote networks through egress;
- nodes join with ``nodeadm init`` and a ``node.eks.aws/v1alpha1`` ``NodeConfig`` naming the cluster, the
  credential provider (here an SSM hybrid activation) and kubelet flags; nodeadm itself labels the node
  ``eks.amazonaws.com/compute-type: hybrid``;
- the VPC CNI cannot run there: Cilium runs on hybrid nodes only (node affinity on that label), with
  cluster-pool IPAM handing out the remote pod networks.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from components import contract, versions
from components.specs.gpu_software import Provider, operator_node_labels
from policies.capacity.hybrid import COMPUTE_TYPE_LABEL, HYBRID_COMPUTE_TYPE, description

if TYPE_CHECKING:
    from components.settings.cluster import HybridConnectivity, HybridPool

NODE_CONFIG_API = "node.eks.aws/v1alpha1"
#: Where Cilium runs (and where the VPC CNI must not): nodes nodeadm labelled hybrid.
ON_HYBRID_NODES: dict[str, Any] = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": COMPUTE_TYPE_LABEL, "operator": "In", "values": [HYBRID_COMPUTE_TYPE]}]}
            ]
        }
    }
}
#: Cilium's namespace and release name (the EKS guide installs it into kube-system as ``cilium``).
CILIUM_NAMESPACE = "kube-system"
CILIUM_RELEASE = "cilium"
#: TCP ports on the cluster security group (EKS "Prepare networking for hybrid nodes", cluster security
#: group table): the API server, reached by kubelets and by pods (webhooks, operators) on hybrid nodes.
API_SERVER_PORT = 443
KUBELET_PORT = 10250
#: CoreDNS runs on the system pool (cloud nodes in this security group): pods on hybrid nodes resolve
#: names there.
DNS_PORT = 53


# --- the pools ------------------------------------------------------------------------------------


def pool_labels(pool: HybridPool, software: Provider) -> dict[str, str]:
    """A hybrid pool's node labels: the stack's own, the GPU Operator's operand switches for hybrid
    nodes (none: the operator installs the driver and toolkit there), then the contract's (they win).
    No capacity-type label: on-prem servers are neither on-demand nor Spot."""
    return {
        **pool.labels,
        **operator_node_labels(software, "hybrid", pool.purpose),
        **contract.gpu_pool_labels(pool.name, purpose=pool.purpose, accelerator=pool.accelerator,
                                   gpu_memory_mib=pool.gpu_memory_mib, capacity_type=None),
    }


def pool_taints(pool: HybridPool) -> list[dict[str, str]]:
    """The contract's GPU taints of the pool's purpose, in Kubernetes spelling (kubelet flags)."""
    return contract.gpu_pool_taints_k8s(pool.purpose)


def pool_description(pool: HybridPool, software: Provider) -> dict[str, Any]:
    """The pool as the capacity model and the policy pack read it (``policies/capacity/hybrid.py``)."""
    return description(
        name=pool.name, nodes=pool.nodes, labels=pool_labels(pool, software), taints=pool_taints(pool),
        cpu=pool.cpu, memory_gib=pool.memory_gib, gpus=pool.gpus_per_node, gpu_memory_mib=pool.gpu_memory_mib,
        accelerator=pool.accelerator, max_pods=pool.max_pods, network_mbps=pool.network_gbps * 1000,
        cost_per_gpu_hour_usd=pool.cost_per_gpu_hour_usd,
    )


def kubelet_flags(pool: HybridPool, software: Provider) -> list[str]:
    """``--node-labels`` and ``--register-with-taints`` as the kubelet takes them (sorted, comma-joined):
    the node registers with the contract's labels and taint, so no GPU pod lands before it is tainted."""
    labels = pool_labels(pool, software)
    taints = pool_taints(pool)
    return [
        "--node-labels=" + ",".join(f"{key}={labels[key]}" for key in sorted(labels)),
        "--register-with-taints=" + ",".join(f"{t['key']}={t['value']}:{t['effect']}" for t in taints),
    ]


def node_config(*, cluster_name: str, region: str, pool: HybridPool, software: Provider, activation_id: str,
                activation_code: str) -> dict[str, Any]:
    """The ``nodeadm init -c file://nodeConfig.yaml`` document of one pool's servers."""
    return {
        "apiVersion": NODE_CONFIG_API,
        "kind": "NodeConfig",
        "spec": {
            "cluster": {"name": cluster_name, "region": region},
            "hybrid": {"ssm": {"activationCode": activation_code, "activationId": activation_id}},
            "kubelet": {"config": {"maxPods": pool.max_pods}, "flags": kubelet_flags(pool, software)},
        },
    }


# --- the network ----------------------------------------------------------------------------------


def remote_routes(cidrs: list[str], connectivity: HybridConnectivity) -> list[dict[str, str]]:
    """Routes each private route table gets, one per remote network (node and pod), through the gateway
    that reaches on-prem: ``transitGatewayId`` for a Transit Gateway, ``gatewayId`` for a virtual
    private gateway (the EC2 route's field for it)."""
    if connectivity.transit_gateway_id:
        return [{"cidrBlock": cidr, "transitGatewayId": connectivity.transit_gateway_id} for cidr in cidrs]
    return [{"cidrBlock": cidr, "gatewayId": connectivity.virtual_private_gateway_id or ""} for cidr in cidrs]


def cluster_security_group_rules(node_cidrs: list[str], pod_cidrs: list[str]) -> list[dict[str, Any]]:
    """Rules on the EKS cluster security group (which the control plane's interfaces and the cloud nodes
    share): kubelets and pods on hybrid nodes reach the API server; their pods reach CoreDNS on the
    system pool; the control plane reaches kubelets (logs, exec, port-forward) and pods (webhooks,
    metrics) on the remote networks. EKS's default egress (all) already allows the last two; they are
    written so they survive a tightened egress."""
    rules: list[dict[str, Any]] = []
    for cidr in node_cidrs:
        rules.append({"direction": "ingress", "protocol": "tcp", "fromPort": API_SERVER_PORT, "toPort": API_SERVER_PORT,
                      "cidr": cidr, "description": "kubelets on hybrid nodes to the API server"})
        rules.append({"direction": "egress", "protocol": "tcp", "fromPort": KUBELET_PORT, "toPort": KUBELET_PORT,
                      "cidr": cidr, "description": "control plane to kubelets on hybrid nodes"})
    for cidr in pod_cidrs:
        rules.append({"direction": "ingress", "protocol": "tcp", "fromPort": API_SERVER_PORT, "toPort": API_SERVER_PORT,
                      "cidr": cidr, "description": "pods on hybrid nodes to the API server"})
        for protocol in ("udp", "tcp"):
            rules.append({"direction": "ingress", "protocol": protocol, "fromPort": DNS_PORT, "toPort": DNS_PORT,
                          "cidr": cidr, "description": "pods on hybrid nodes to CoreDNS"})
        rules.append({"direction": "egress", "protocol": "tcp", "fromPort": 0, "toPort": 65535,
                      "cidr": cidr, "description": "control plane and cloud pods to pods on hybrid nodes"})
    return rules


# --- Cilium ---------------------------------------------------------------------------------------


def pod_cidr_mask_size(max_pods: int) -> int:
    """Cilium's ``clusterPoolIPv4MaskSize``: the longest prefix whose block holds ``max_pods`` addresses
    plus the node's router and health addresses Cilium takes from it."""
    return 32 - math.ceil(math.log2(max_pods + 2))


def cilium_values(pod_cidrs: list[str], max_pods: int, nodes: int) -> dict[str, Any]:
    """Chart values as the EKS Hybrid Nodes guide gives them: agent and operator on hybrid nodes only,
    cluster-pool IPAM over the remote pod networks, the operator leaving pods it does not manage (cloud
    pods on the VPC CNI) alone; AWS's Cilium build images. Envoy (L7 policy) is off, so Kubernetes
    NetworkPolicies are enforced by the agent's eBPF datapath; Hubble's relay and UI stay off. Two
    operator replicas (the chart's default, spread over nodes) where two hybrid nodes exist, else one."""
    agent, operator = versions.CILIUM_IMAGE, versions.CILIUM_OPERATOR_IMAGE
    return {
        "image": {"repository": agent.repository, "tag": agent.tag, "useDigest": False},
        "affinity": ON_HYBRID_NODES,
        "ipam": {
            "mode": "cluster-pool",
            "operator": {"clusterPoolIPv4PodCIDRList": list(pod_cidrs),
                         "clusterPoolIPv4MaskSize": pod_cidr_mask_size(max_pods)},
        },
        "operator": {
            "image": {"repository": operator.repository, "tag": operator.tag, "useDigest": False},
            "affinity": ON_HYBRID_NODES,
            # The chart's own (control plane, not-ready, uninitialized) plus the GPU pools' taints: every
            # hybrid node here is a tainted GPU node, and without them the operator never schedules.
            "tolerations": [
                {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"},
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists"},
                {"key": "node.cloudprovider.kubernetes.io/uninitialized", "operator": "Exists"},
                *contract.gpu_agent_tolerations(),
            ],
            "replicas": 2 if nodes >= 2 else 1,
            "unmanagedPodWatcher": {"restart": False},
        },
        "policyEnforcementMode": "default",
        "envoy": {"enabled": False},
        "hubble": {"relay": {"enabled": False}, "ui": {"enabled": False}},
    }
