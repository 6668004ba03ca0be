"""A small evaluator of Kubernetes NetworkPolicy (networking.k8s.io/v1) semantics.

A connection from ``src`` to ``dst`` on a port is allowed when both ends allow it: egress of the
source pod (if any policy with policyType Egress selects it, one of their egress rules must match)
and ingress of the destination pod (likewise). Policies are additive allow-lists; a pod no policy
of a type selects is unrestricted for that type. Peers: ``podSelector`` (policy's namespace),
``namespaceSelector`` (+ ``podSelector``: both must match), ``ipBlock`` with ``except`` (applied to
addresses outside the cluster's pods here, as the CNI sees pod IPs for in-cluster peers). Ports:
number, named container port of the destination, ``endPort`` ranges, protocol (default TCP).
Hosts outside the cluster (``Endpoint`` with no namespace) are not subject to policies.

Connections to a Service's ClusterIP follow the engine EKS runs, not the textbook: see
:meth:`Cluster.can_connect_to_service` (the textbook answer is :meth:`Cluster.textbook_can_connect_to_service`).

Pods on EKS Hybrid Nodes (``cilium_pods``, their addresses) have their policies enforced by Cilium,
which matches pod and namespace selectors only against peers it holds an identity for, i.e. other
Cilium-managed pods; a pod on a cloud node (VPC CNI, no Cilium endpoint) arrives as the ``world``
identity and is matched by ``ipBlock`` alone (Cilium docs, "Layer 3 Examples"; cilium/cilium
pkg/policy/api ``EndpointSelector`` selects endpoints' identities, ``CIDRRule`` addresses). The textbook
matches the selector by the peer's labels, whoever enforces.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
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


@dataclass(frozen=True)
class Service:
    """A Service as the policy controller caches it (``StripDownServiceTransformFunc`` keeps the
    selector, ClusterIP and ports): ``ports`` entries have ``port``, ``targetPort`` (int or a
    container port's name; defaults to ``port`` as the API server does) and ``protocol``.
    ``cluster_ip`` ``"None"`` is a headless Service."""

    name: str
    namespace: str
    cluster_ip: str
    selector: dict[str, str]
    ports: list[dict[str, Any]]

    def __hash__(self) -> int:
        return hash((self.name, self.namespace))

    def service_ports(self) -> list[tuple[int, int | str, str]]:
        """(port, targetPort, protocol) with the API server's defaults applied."""
        return [(p["port"], p.get("targetPort", p["port"]), p.get("protocol") or "TCP") for p in self.ports]


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

    def __init__(
        self,
        namespaces: dict[str, dict[str, str]],
        policies: list[dict[str, Any]],
        *,
        services: Sequence[Service] = (),
        pods: Sequence[Endpoint] = (),
        cilium_pods: frozenset[str] = frozenset(),
    ):
        self.namespaces = {name: {**labels, "kubernetes.io/metadata.name": name} for name, labels in namespaces.items()}
        self.policies = policies
        #: Services and the cluster's pods (the engine resolves a Service's ports against its pods).
        self.services = list(services)
        self.pods = list(pods)
        self.cilium_pods = cilium_pods

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
        if pod.ip in self.cilium_pods and other.namespace is not None and other.ip not in self.cilium_pods:
            other = Endpoint(other.ip)  # Cilium knows a cloud pod by its address only
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

    # --- Services: the EKS engine (amazon-network-policy-controller-k8s) -------------------------

    def backends(self, service: Service) -> list[Endpoint]:
        """Pods of the Service's namespace its selector matches (a Service without one has none)."""
        if not service.selector:
            return []
        return [p for p in self.pods if p.namespace == service.namespace and selector_matches({"matchLabels": service.selector}, p.labels)]

    @staticmethod
    def _target_port(target: int | str, pod: Endpoint) -> int | None:
        return target if isinstance(target, int) else pod.ports.get(target)

    def textbook_can_connect_to_service(self, src: Endpoint, service: Service, port: int, protocol: str = "TCP") -> bool:
        """Kubernetes' documented answer: kube-proxy rewrites the ClusterIP to a backend pod first, so
        policies are evaluated against some backend pod on its target port."""
        for svc_port, target, proto in service.service_ports():
            if svc_port != port or proto != protocol:
                continue
            for pod in self.backends(service):
                target_port = self._target_port(target, pod)
                if target_port is not None and self.can_connect(src, pod, target_port, protocol):
                    return True
        return False

    def can_connect_to_service(self, src: Endpoint, service: Service, port: int, protocol: str = "TCP") -> bool:
        """The EKS answer. The VPC CNI's eBPF probe on the source pod's veth sees the ClusterIP before
        DNAT, so the source's egress must admit ``ClusterIP:port`` itself; only the destination's
        ingress is evaluated on the backend pod. The ClusterIP is in an egress rule's allow-list only
        as aws/amazon-network-policy-controller-k8s resolves it (pkg/resolvers/endpoints.go,
        ``computeEgressEndpoints`` and ``getMatchingServiceClusterIPs``): see :meth:`egress_admits_cluster_ip`.
        Headless Services have no ClusterIP: clients dial pod IPs, which follow pod rules."""
        if service.cluster_ip in ("", "None"):
            return self.textbook_can_connect_to_service(src, service, port, protocol)
        if not (src.namespace is None or self.egress_admits_cluster_ip(src, service, port, protocol)):
            return False
        for svc_port, target, proto in service.service_ports():
            if svc_port != port or proto != protocol:
                continue
            for pod in self.backends(service):
                target_port = self._target_port(target, pod)
                if target_port is not None and self._allowed(pod, src, target_port, protocol, pod, "Ingress"):
                    return True
        return False

    def egress_admits_cluster_ip(self, src: Endpoint, service: Service, port: int, protocol: str = "TCP") -> bool:
        """Whether ``ClusterIP:port`` is in ``src``'s egress allow-list as the controller resolves it
        (no pod is needed for that; the connection also needs a backend that admits it)."""
        policies = self._selecting(src, "Egress")
        if not policies:
            return True
        cluster_ip = ipaddress.ip_address(service.cluster_ip)
        for policy in policies:
            for rule in policy["spec"].get("egress") or []:
                rule_ports = rule.get("ports") or []
                peers = rule.get("to")
                if not peers:
                    # buildAllowAllEgress: 0.0.0.0/0 with the rule's numeric ports (named ones dropped).
                    if _cidr_ports_admit(rule_ports, port, protocol):
                        return True
                    continue
                for peer in peers:
                    if "ipBlock" in peer:
                        block = peer["ipBlock"]
                        inside = cluster_ip in ipaddress.ip_network(block["cidr"]) and not any(
                            cluster_ip in ipaddress.ip_network(e) for e in block.get("except") or []
                        )
                        if inside and _cidr_ports_admit(rule_ports, port, protocol):
                            return True
                        continue
                    # resolvePeerNamespaces: the policy's namespace unless a namespaceSelector is given.
                    if "namespaceSelector" in peer:
                        if not selector_matches(peer["namespaceSelector"], self.namespaces[service.namespace]):
                            continue
                    elif service.namespace != policy["metadata"]["namespace"]:
                        continue
                    # getMatchingServiceClusterIPs: the peer's podSelector is evaluated against the
                    # Service's spec.selector as if it were a pod's labels (svcSelector.Matches(
                    # labels.Set(svc.Spec.Selector))): every requirement of the peer must be met by
                    # the Service's selector, whatever labels the backend pods carry.
                    if not selector_matches(peer.get("podSelector") or {}, service.selector):
                        continue
                    admitted = self._service_ports_admitted(service, rule_ports)
                    if admitted is not None and _ports_admit(admitted, port, protocol):
                        return True
        return False

    def _service_ports_admitted(self, service: Service, rule_ports: list[dict[str, Any]]) -> list[tuple[int | None, int | None, str]] | None:
        """The ports the ClusterIP gets, per ``getMatchingServiceClusterIPs``; ``None``: the Service is
        skipped. No rule ports: every port. A rule port that cannot be resolved to a Service port, or
        a numeric one whose named ``targetPort`` could reach a container port the rule does not allow
        (``hasTargetPortBypass``), is dropped."""
        if not rule_ports:
            return [(None, None, "TCP"), (None, None, "UDP"), (None, None, "SCTP")]
        admitted: list[tuple[int | None, int | None, str]] = []
        for entry in rule_ports:
            proto = entry.get("protocol", "TCP")
            wanted = entry.get("port")
            if wanted is None:
                admitted.append((None, entry.get("endPort"), proto))
                continue
            listen = self._matching_service_port(service, wanted, proto)
            if listen is None:
                continue
            if isinstance(wanted, int) and self._target_port_bypass(service, listen, proto, rule_ports):
                continue
            admitted.append((listen, entry.get("endPort"), proto))
        if not admitted:
            return None
        return admitted

    def _matching_service_port(self, service: Service, wanted: int | str, protocol: str) -> int | None:
        """``getMatchingServicePort``: first ``LookupServiceListenPort`` (the rule's port equals a
        Service port's ``targetPort``, same type: a number to a number, a name to a name), then each
        pod the Service selects (``LookupListenPortFromPodSpec``)."""
        for svc_port, target, proto in service.service_ports():
            if type(target) is type(wanted) and str(target) == str(wanted) and proto == protocol:
                return svc_port
        for pod in self.backends(service):
            # LookupContainerPortAndName: a number stands for itself even when no container declares it.
            if isinstance(wanted, int):
                names = [name for name, number in pod.ports.items() if number == wanted]
                container_port, container_name = wanted, names[0] if names else ""
            elif wanted in pod.ports:
                container_port, container_name = pod.ports[wanted], wanted
            else:
                continue
            for svc_port, target, proto in service.service_ports():
                if proto != protocol:
                    continue
                if (isinstance(target, str) and target == container_name) or (isinstance(target, int) and target == container_port):
                    return svc_port
        return None

    def _target_port_bypass(self, service: Service, listen: int, protocol: str, rule_ports: list[dict[str, Any]]) -> bool:
        """``hasTargetPortBypass``: the Service port's named ``targetPort`` resolves, on some pod the
        Service selects, to a container port the rule's numeric ports do not allow."""
        name = next(
            (target for svc_port, target, proto in service.service_ports() if svc_port == listen and proto == protocol and isinstance(target, str)),
            None,
        )
        if name is None:
            return False
        for pod in self.backends(service):
            container_port = pod.ports.get(name)
            if container_port is not None and not _numeric_port_allowed(container_port, protocol, rule_ports):
                return True
        return False


def _numeric_port_allowed(port: int, protocol: str, rule_ports: list[dict[str, Any]]) -> bool:
    """``isNumericPortAllowed``: a protocol-only entry allows every port; named entries are skipped."""
    for entry in rule_ports:
        if entry.get("protocol", "TCP") != protocol:
            continue
        wanted = entry.get("port")
        if wanted is None:
            return True
        if isinstance(wanted, str):
            continue
        if wanted <= port <= entry.get("endPort", wanted):
            return True
    return False


def _cidr_ports_admit(rule_ports: list[dict[str, Any]], port: int, protocol: str) -> bool:
    """Ports of an ipBlock or allow-all peer (``convertToPolicyInfoPortForCIDRs``): named ports are
    dropped; a rule left with no port admits nothing."""
    if not rule_ports:
        return True
    return _numeric_port_allowed(port, protocol, rule_ports)


def _ports_admit(admitted: list[tuple[int | None, int | None, str]], port: int, protocol: str) -> bool:
    for number, end, proto in admitted:
        if proto == protocol and (number is None or number <= port <= (end or number)):
            return True
    return False
