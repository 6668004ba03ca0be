"""A small evaluator of Kubernetes NetworkPolicy (networking.k8s.io/v1) semantics.

A connection from ``src`` to ``dst`` on a port is allowed when both ends allow it: egress of the
source pod (if any policy with policyType Egress selects it, one of their egress rules must match)
and ingress of the destination pod (likewise). Policies are additive allow-lists; a pod no policy
of a type selects is unrestricted for that type. Peers: ``podSelector`` (policy's namespace),
``namespaceSelector`` (+ ``podSelector``: both must match), ``ipBlock`` with ``except`` (applied to
addresses outside the cluster's pods here, as the CNI sees pod IPs for in-cluster peers). Ports:
number, named container port of the destination, ``endPort`` ranges, protocol (default TCP).
Hosts outside the cluster (``Endpoint`` with no namespace) are not subject to policies.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Endpoint:
    """A pod (``namespace`` set) or an address outside the cluster (``namespace`` None)."""

    ip: str
    namespace: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)  # named container ports

    def __hash__(self) -> int:
        return hash((self.ip, self.namespace))


def selector_matches(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """metav1.LabelSelector: an empty selector matches everything."""
    if selector is None:
        return True
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


class Cluster:
    """Namespaces (name -> labels; ``kubernetes.io/metadata.name`` is added as the API server does)
    and the NetworkPolicy objects (``metadata.namespace`` and ``spec``)."""

    def __init__(self, namespaces: dict[str, dict[str, str]], policies: list[dict[str, Any]]):
        self.namespaces = {name: {**labels, "kubernetes.io/metadata.name": name} for name, labels in namespaces.items()}
        self.policies = policies

    def _selecting(self, pod: Endpoint, policy_type: str) -> list[dict[str, Any]]:
        found = []
        for policy in self.policies:
            spec = policy["spec"]
            types = spec.get("policyTypes") or (["Ingress", "Egress"] if "egress" in spec else ["Ingress"])
            if policy["metadata"]["namespace"] == pod.namespace and policy_type in types and selector_matches(spec.get("podSelector"), pod.labels):
                found.append(policy)
        return found

    def _peer_matches(self, peer: dict[str, Any], policy_namespace: str, other: Endpoint) -> bool:
        if "ipBlock" in peer:
            if other.namespace is not None:
                return False
            ip = ipaddress.ip_address(other.ip)
            block = peer["ipBlock"]
            return ip in ipaddress.ip_network(block["cidr"]) and not any(ip in ipaddress.ip_network(e) for e in block.get("except") or [])
        if other.namespace is None:
            return False
        if "namespaceSelector" in peer:
            if not selector_matches(peer["namespaceSelector"], self.namespaces[other.namespace]):
                return False
        elif other.namespace != policy_namespace:
            return False
        return selector_matches(peer.get("podSelector"), other.labels) if "podSelector" in peer else True

    @staticmethod
    def _port_matches(rule_ports: list[dict[str, Any]] | None, port: int, protocol: str, dst: Endpoint) -> bool:
        if not rule_ports:
            return True
        for entry in rule_ports:
            if entry.get("protocol", "TCP") != protocol:
                continue
            wanted = entry.get("port")
            if wanted is None:
                return True
            if isinstance(wanted, str):
                wanted = dst.ports.get(wanted)
                if wanted is None:
                    continue
            if wanted <= port <= entry.get("endPort", wanted):
                return True
        return False

    def _allowed(self, pod: Endpoint, other: Endpoint, port: int, protocol: str, dst: Endpoint, direction: str) -> bool:
        policies = self._selecting(pod, direction)
        if not policies:
            return True
        rules_key, peers_key = ("ingress", "from") if direction == "Ingress" else ("egress", "to")
        for policy in policies:
            for rule in policy["spec"].get(rules_key) or []:
                peers = rule.get(peers_key)
                if peers and not any(self._peer_matches(p, policy["metadata"]["namespace"], other) for p in peers):
                    continue
                if self._port_matches(rule.get("ports"), port, protocol, dst):
                    return True
        return False

    def can_connect(self, src: Endpoint, dst: Endpoint, port: int, protocol: str = "TCP") -> bool:
        egress = src.namespace is None or self._allowed(src, dst, port, protocol, dst, "Egress")
        ingress = dst.namespace is None or self._allowed(dst, src, port, protocol, dst, "Ingress")
        return egress and ingress
