"""NetworkIsolation: default-deny NetworkPolicies for one namespace, with explicit allows.

The VPC CNI enforces them (``enableNetworkPolicy`` on its add-on, see :mod:`components.cluster.control_plane`);
the kubelet's probes from the node's own IP are allowed by the CNI's policy agent. Each namespace
gets a default deny (ingress and egress), DNS to CoreDNS, and only the flows its pods need:

* serving tiers: ingress from the gateway and from Prometheus on the vLLM port; egress to the EKS
  Pod Identity agent (credentials) and HTTPS to public addresses (S3 for weights, the Hugging Face
  Hub for Hub sources).
* gateway: ingress from in-cluster pods on its port (its clients, Prometheus too; its Service is
  ClusterIP, so nothing outside the cluster has a path to it); egress to the model servers of every
  tier, the Pod Identity agent and public HTTPS (Bedrock); with prefix-aware routing, also to the
  pickers' Envoy port.
* prefix-aware tiers (:func:`picker_policies`): the gateway reaches the pickers' Envoy; the pickers
  reach the model pods on the vLLM port (Envoy forwards to the pod the picker chose, by pod IP, and
  the picker scrapes each pod's ``/metrics`` there) and the Kubernetes API (the picker watches its
  pool's pods and InferencePool). Envoy reaches the picker over loopback, inside the pod: no
  NetworkPolicy applies there.

The gateway calls each model through its Service's ClusterIP. EKS's policy engine does not see the
backend pod there: the eBPF probe on the gateway pod's veth sees the ClusterIP before DNAT, and
aws/amazon-network-policy-controller-k8s (pkg/resolvers/endpoints.go, ``getMatchingServiceClusterIPs``)
puts a ClusterIP into an egress rule only when the rule's ``podSelector`` matches the Service's
``spec.selector`` (evaluated as if the selector were a pod's labels). So every model Service selects
on :data:`components.serving.model_server.POD_LABELS`, the labels the gateway's egress peer names
(see ``model_server.service_selector``).

Public HTTPS excludes private, link-local (instance metadata) and carrier-grade NAT ranges: pods
reach AWS APIs through the NAT gateway, never another in-VPC address on 443. AWS publishes no
stable per-service prefixes a NetworkPolicy could name, so the allow is by port, not by service.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.contract import TIER_LABEL

TYPE = "llm-platform:index:NetworkIsolation"

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
#: CoreDNS pods (the EKS add-on keeps the kube-dns label).
DNS_PEER = {
    "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: "kube-system"}},
    "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
}
#: EKS Pod Identity agent: a host-network DaemonSet listening on this link-local address, port 80.
POD_IDENTITY_AGENT_CIDR = "169.254.170.23/32"
POD_IDENTITY_AGENT_PORT = 80
#: Never reached by the public-HTTPS allow: RFC 1918, link-local (IMDS), CGNAT, loopback.
NON_PUBLIC_CIDRS = ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16", "100.64.0.0/10", "127.0.0.0/8"]
#: Prometheus pods of kube-prometheus-stack (labelled by the Prometheus operator).
PROMETHEUS_POD_LABELS = {"app.kubernetes.io/name": "prometheus"}
#: Label every serving-tier namespace carries (the gateway's egress selects by it).


def _namespace(name: str) -> dict[str, Any]:
    return {"matchLabels": {NAMESPACE_NAME_LABEL: name}}


def _tcp(*ports: int) -> list[dict[str, Any]]:
    return [{"protocol": "TCP", "port": port} for port in ports]


def default_deny() -> dict[str, Any]:
    return {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}


def allow_dns() -> dict[str, Any]:
    return {
        "podSelector": {},
        "policyTypes": ["Egress"],
        "egress": [{"to": [DNS_PEER], "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]}],
    }


def allow_aws_apis(pods: dict[str, str]) -> dict[str, Any]:
    """Credentials from the Pod Identity agent, then HTTPS to public addresses (AWS APIs via NAT)."""
    return {
        "podSelector": {"matchLabels": pods},
        "policyTypes": ["Egress"],
        "egress": [
            {"to": [{"ipBlock": {"cidr": POD_IDENTITY_AGENT_CIDR}}], "ports": _tcp(POD_IDENTITY_AGENT_PORT)},
            {"to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": NON_PUBLIC_CIDRS}}], "ports": _tcp(443)},
        ],
    }


def serving_policies(
    model_pods: dict[str, str], port: int, gateway_namespace: str, gateway_pods: dict[str, str], monitoring_namespace: str
) -> dict[str, dict[str, Any]]:
    """A serving tier's policies by name: only the gateway and Prometheus reach the models."""
    return {
        "default-deny": default_deny(),
        "allow-dns": allow_dns(),
        "allow-gateway-to-models": {
            "podSelector": {"matchLabels": model_pods},
            "policyTypes": ["Ingress"],
            "ingress": [
                {
                    "from": [{"namespaceSelector": _namespace(gateway_namespace), "podSelector": {"matchLabels": gateway_pods}}],
                    "ports": _tcp(port),
                }
            ],
        },
        "allow-prometheus-scrape": {
            "podSelector": {"matchLabels": model_pods},
            "policyTypes": ["Ingress"],
            "ingress": [
                {
                    "from": [
                        {"namespaceSelector": _namespace(monitoring_namespace), "podSelector": {"matchLabels": PROMETHEUS_POD_LABELS}}
                    ],
                    "ports": _tcp(port),
                }
            ],
        },
        "allow-aws-apis": allow_aws_apis(model_pods),
    }


def hybrid_peer_policies(model_pods: dict[str, str], port: int, vpc_cidr: str) -> dict[str, dict[str, Any]]:
    """Extra policies of a tier whose models may run on hybrid (on-prem) nodes.

    There Cilium enforces NetworkPolicies, not the VPC CNI, and Cilium matches a pod or namespace
    selector only against peers it has an identity for: pods with a Cilium endpoint, i.e. pods on
    Cilium's own (hybrid) nodes. Pods on cloud nodes (the VPC CNI's) have none; their traffic arrives
    with the ``world`` identity, which only CIDR rules select (Cilium docs, "Layer 3 Examples":
    endpoints-based selectors select Cilium-managed endpoints, ``toCIDR``/``ipBlock`` the rest;
    cilium/cilium pkg/policy/api ``EndpointSelector`` vs ``CIDRRule``). So the gateway and Prometheus
    (cloud pods in the VPC) reach the vLLM port from the VPC's range, and the models reach CoreDNS on
    the system pool (Cilium translates the kube-dns ClusterIP to a CoreDNS pod address before its
    egress policy) in the VPC's range on port 53. The model port stays behind the tier's API key."""
    return {
        "allow-vpc-to-hybrid-models": {
            "podSelector": {"matchLabels": model_pods},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [{"ipBlock": {"cidr": vpc_cidr}}], "ports": _tcp(port)}],
        },
        "allow-hybrid-models-dns": {
            "podSelector": {"matchLabels": model_pods},
            "policyTypes": ["Egress"],
            "egress": [{"to": [{"ipBlock": {"cidr": vpc_cidr}}],
                        "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]}],
        },
    }


def _has(key: str) -> dict[str, Any]:
    return {"matchExpressions": [{"key": key, "operator": "Exists"}]}


#: Serving-tier namespaces, as the gateway's egress peers name them.
TIER_NAMESPACES = _has(TIER_LABEL)


def picker_policies(
    picker_key: str, proxy_port: int, model_pods: dict[str, str], model_port: int, gateway_namespace: str,
    gateway_pods: dict[str, str], api_server_ip: str,
) -> dict[str, dict[str, Any]]:
    """A prefix-aware tier's extra policies by name. Pickers are the pods carrying ``picker_key`` (the
    chart's selector label, one value per picker); ``api_server_ip`` is the ``kubernetes`` Service's
    ClusterIP, which is what the engine sees leaving the picker's veth (before DNAT), so the API's
    egress is that address, not the control plane's ENIs."""
    pickers = _has(picker_key)
    return {
        "allow-gateway-to-pickers": {
            "podSelector": pickers,
            "policyTypes": ["Ingress"],
            "ingress": [{
                "from": [{"namespaceSelector": _namespace(gateway_namespace), "podSelector": {"matchLabels": gateway_pods}}],
                "ports": _tcp(proxy_port),
            }],
        },
        "allow-pickers-to-models": {
            "podSelector": {"matchLabels": model_pods},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [{"podSelector": pickers}], "ports": _tcp(model_port)}],
        },
        "allow-picker-egress": {
            "podSelector": pickers,
            "policyTypes": ["Egress"],
            "egress": [
                {"to": [{"podSelector": {"matchLabels": model_pods}}], "ports": _tcp(model_port)},
                {"to": [{"ipBlock": {"cidr": f"{api_server_ip}/32"}}], "ports": _tcp(443)},
            ],
        },
    }


def gateway_policies(
    gateway_pods: dict[str, str], port: int, model_pods: dict[str, str], model_port: int,
    picker_key: str | None = None, proxy_port: int | None = None,
) -> dict[str, dict[str, Any]]:
    """The gateway's policies by name: clients in the cluster in, models and AWS out.

    ``model_pods`` must be a subset of every model Service's selector (the engine's ClusterIP rule,
    see the module's docstring), not only of the model pods' labels. ``picker_key`` (with prefix-aware
    routing) admits the picker Services' Envoy port: their selector is ``{picker_key: <picker>}``, which
    an ``Exists`` requirement on that key matches as the engine evaluates it."""
    policies = {
        "default-deny": default_deny(),
        "allow-dns": allow_dns(),
        "allow-clients": {
            "podSelector": {"matchLabels": gateway_pods},
            "policyTypes": ["Ingress"],
            "ingress": [
                {
                    "from": [{"namespaceSelector": {}}],
                    "ports": _tcp(port),
                }
            ],
        },
        "allow-models": {
            "podSelector": {"matchLabels": gateway_pods},
            "policyTypes": ["Egress"],
            "egress": [
                {
                    "to": [
                        {
                            "namespaceSelector": {"matchExpressions": [{"key": TIER_LABEL, "operator": "Exists"}]},
                            "podSelector": {"matchLabels": model_pods},
                        }
                    ],
                    "ports": _tcp(model_port),
                }
            ],
        },
        "allow-aws-apis": allow_aws_apis(gateway_pods),
    }
    if picker_key is not None and proxy_port is not None:
        policies["allow-pickers"] = {
            "podSelector": {"matchLabels": gateway_pods},
            "policyTypes": ["Egress"],
            "egress": [{"to": [{"namespaceSelector": TIER_NAMESPACES, "podSelector": _has(picker_key)}],
                        "ports": _tcp(proxy_port)}],
        }
    return policies


@dataclass(frozen=True)
class NetworkIsolationArgs:
    """Inputs of :class:`NetworkIsolation`: the namespace and its policies by name (see
    :func:`serving_policies`, :func:`gateway_policies`)."""

    namespace: str
    policies: dict[str, dict[str, Any]]
    labels: dict[str, str] = field(default_factory=dict)


class NetworkIsolation(pulumi.ComponentResource):
    """One NetworkPolicy per entry of ``policies`` in ``namespace``."""

    def __init__(self, name: str, args: NetworkIsolationArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(TYPE, name, None, opts)
        for policy, spec in args.policies.items():
            # pulumi_kubernetes types spec as its snake_case TypedDicts; the provider takes Kubernetes' camelCase JSON as the specs write it.
            k8s.networking.v1.NetworkPolicy(  # type: ignore[call-overload]
                f"{name}-{policy}",
                metadata={"name": policy, "namespace": args.namespace, "labels": args.labels},
                spec=spec,
                opts=pulumi.ResourceOptions(parent=self),
            )
        self.register_outputs({"policies": sorted(args.policies)})
