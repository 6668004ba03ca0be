"""Network isolation: the evaluator on hand-made cases, then the emitted policies of both stacks."""

from __future__ import annotations

import ipaddress

import pytest

from components.specs import gateway, observability
from components.specs import serving as model_server
from tests.support.network_policy_eval import Cluster, Endpoint, Service, selector_matches

# --- the evaluator itself -----------------------------------------------------------------------

WEB = Endpoint("10.0.1.1", "shop", {"app": "web"}, {"http": 8080})
DB = Endpoint("10.0.1.2", "shop", {"app": "db"})
OTHER = Endpoint("10.0.2.1", "other", {"app": "web"})
INTERNET = Endpoint("52.1.2.3")
METADATA = Endpoint("169.254.169.254")
NAMESPACES = {"shop": {"team": "a"}, "other": {"team": "b"}}


def _policy(namespace: str, spec: dict) -> dict:
    return {"metadata": {"namespace": namespace, "name": "p"}, "spec": spec}


def test_no_policy_allows_everything():
    cluster = Cluster(NAMESPACES, [])
    assert cluster.can_connect(OTHER, DB, 5432) and cluster.can_connect(WEB, INTERNET, 443)


def test_default_deny_blocks_both_directions():
    cluster = Cluster(NAMESPACES, [_policy("shop", {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]})])
    assert not cluster.can_connect(WEB, DB, 5432)
    assert not cluster.can_connect(OTHER, WEB, 8080)
    assert not cluster.can_connect(WEB, INTERNET, 443)
    assert cluster.can_connect(OTHER, INTERNET, 443), "other namespaces are unaffected"


def test_ingress_allow_needs_matching_peer_and_port():
    allow = _policy("shop", {"podSelector": {"matchLabels": {"app": "db"}}, "policyTypes": ["Ingress"], "ingress": [{"from": [{"podSelector": {"matchLabels": {"app": "web"}}}], "ports": [{"port": 5432}]}]})
    cluster = Cluster(NAMESPACES, [allow])
    assert cluster.can_connect(WEB, DB, 5432)
    assert not cluster.can_connect(WEB, DB, 22), "wrong port"
    assert not cluster.can_connect(OTHER, DB, 5432), "a bare podSelector only matches the policy's namespace"


def test_namespace_and_pod_selector_in_one_peer_are_anded():
    peer = {"namespaceSelector": {"matchLabels": {"team": "b"}}, "podSelector": {"matchLabels": {"app": "api"}}}
    allow = _policy("shop", {"podSelector": {}, "policyTypes": ["Ingress"], "ingress": [{"from": [peer]}]})
    cluster = Cluster(NAMESPACES, [allow])
    assert not cluster.can_connect(OTHER, DB, 5432), "namespace matches, pod does not"
    assert cluster.can_connect(Endpoint("10.0.2.9", "other", {"app": "api"}), DB, 5432)


def test_named_port_and_port_ranges():
    allow = _policy("shop", {"podSelector": {"matchLabels": {"app": "web"}}, "policyTypes": ["Ingress"], "ingress": [{"ports": [{"port": "http"}, {"port": 9000, "endPort": 9010, "protocol": "UDP"}]}]})
    cluster = Cluster(NAMESPACES, [allow])
    assert cluster.can_connect(OTHER, WEB, 8080)
    assert cluster.can_connect(OTHER, WEB, 9005, "UDP") and not cluster.can_connect(OTHER, WEB, 9005, "TCP")


def test_ip_block_except():
    egress = _policy("shop", {"podSelector": {}, "policyTypes": ["Egress"], "egress": [{"to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": ["169.254.0.0/16"]}}], "ports": [{"port": 443}]}]})
    cluster = Cluster(NAMESPACES, [egress])
    assert cluster.can_connect(WEB, INTERNET, 443)
    assert not cluster.can_connect(WEB, METADATA, 443)


def test_policies_are_additive():
    deny = _policy("shop", {"podSelector": {}, "policyTypes": ["Ingress"]})
    allow = _policy("shop", {"podSelector": {"matchLabels": {"app": "db"}}, "policyTypes": ["Ingress"], "ingress": [{"from": [{"podSelector": {}}]}]})
    cluster = Cluster(NAMESPACES, [deny, allow])
    assert cluster.can_connect(WEB, DB, 5432) and not cluster.can_connect(DB, WEB, 8080)


def test_match_expressions():
    labels = {"tier": "a"}
    assert selector_matches({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, labels)
    assert not selector_matches({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}, labels)
    assert selector_matches({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]}, labels)
    assert not selector_matches({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["a"]}]}, labels)


# --- Services on EKS: where the engine and the textbook disagree ----------------------------------
# amazon-network-policy-controller-k8s, pkg/resolvers/endpoints.go: getMatchingServiceClusterIPs,
# getMatchingServicePort, hasTargetPortBypass (the evaluator cites each rule it models).

CLIENT = Endpoint("10.0.3.1", "client", {"app": "client"})
MODEL_A = Endpoint("10.0.4.1", "models", {"app.kubernetes.io/name": "vllm", "app.kubernetes.io/instance": "a"}, {"http": 8000})
SERVICE_NAMESPACES = {"client": {}, "models": {"serving": "yes"}}
#: The client may only call vLLM pods in the models namespace, on 8000.
CLIENT_EGRESS = _policy("client", {
    "podSelector": {}, "policyTypes": ["Egress"],
    "egress": [{"to": [{"namespaceSelector": {"matchLabels": {"serving": "yes"}}, "podSelector": {"matchLabels": {"app.kubernetes.io/name": "vllm"}}}],
                "ports": [{"protocol": "TCP", "port": 8000}]}],
})


def _service(selector: dict, target_port=8000, cluster_ip: str = "172.20.5.5") -> Service:
    return Service("a", "models", cluster_ip, selector, [{"name": "http", "port": 8000, "targetPort": target_port, "protocol": "TCP"}])


def test_a_service_selecting_the_right_pods_by_another_label_is_dropped_on_eks():
    """The pods match the peer, so Kubernetes says yes; the Service's selector does not, so EKS never
    puts its ClusterIP in the client's allow-list."""
    service = _service({"app.kubernetes.io/instance": "a"})
    cluster = Cluster(SERVICE_NAMESPACES, [CLIENT_EGRESS], services=[service], pods=[MODEL_A])
    assert cluster.can_connect(CLIENT, MODEL_A, 8000), "the pod IP itself is admitted"
    assert cluster.textbook_can_connect_to_service(CLIENT, service, 8000)
    assert not cluster.can_connect_to_service(CLIENT, service, 8000)


def test_a_service_whose_selector_carries_the_peer_labels_is_admitted():
    service = _service({"app.kubernetes.io/name": "vllm", "app.kubernetes.io/instance": "a"})
    cluster = Cluster(SERVICE_NAMESPACES, [CLIENT_EGRESS], services=[service], pods=[MODEL_A])
    assert cluster.textbook_can_connect_to_service(CLIENT, service, 8000)
    assert cluster.can_connect_to_service(CLIENT, service, 8000)
    assert not cluster.can_connect_to_service(CLIENT, service, 9000), "no such Service port"


def test_a_peer_without_pod_selector_admits_every_service_of_its_namespaces():
    egress = _policy("client", {"podSelector": {}, "policyTypes": ["Egress"],
                                "egress": [{"to": [{"namespaceSelector": {"matchLabels": {"serving": "yes"}}}]}]})
    service = _service({"app.kubernetes.io/instance": "a"})
    assert Cluster(SERVICE_NAMESPACES, [egress], services=[service], pods=[MODEL_A]).can_connect_to_service(CLIENT, service, 8000)


def test_a_named_target_port_that_resolves_to_a_port_the_rule_does_not_allow_drops_the_service():
    """hasTargetPortBypass: one backend names 9000 "http", so ClusterIP:8000 could be DNATed to a port
    the rule forbids; EKS skips the Service although Kubernetes would reach pod a on 8000."""
    other = Endpoint("10.0.4.2", "models", {"app.kubernetes.io/name": "vllm", "app.kubernetes.io/instance": "a", "v": "2"}, {"http": 9000})
    service = _service({"app.kubernetes.io/name": "vllm"}, target_port="http")
    cluster = Cluster(SERVICE_NAMESPACES, [CLIENT_EGRESS], services=[service], pods=[MODEL_A, other])
    assert cluster.textbook_can_connect_to_service(CLIENT, service, 8000)
    assert not cluster.can_connect_to_service(CLIENT, service, 8000)
    assert Cluster(SERVICE_NAMESPACES, [CLIENT_EGRESS], services=[service], pods=[MODEL_A]).can_connect_to_service(CLIENT, service, 8000)


def test_a_named_target_port_needs_a_pod_before_the_cluster_ip_is_admitted():
    """getMatchingServicePort resolves a numeric rule port against a named targetPort only through
    the Service's pods: a model scaled to zero has no ClusterIP entry; a numeric targetPort has one."""
    named = _service({"app.kubernetes.io/name": "vllm"}, target_port="http")
    numeric = _service({"app.kubernetes.io/name": "vllm"}, target_port=8000)
    assert not Cluster(SERVICE_NAMESPACES, [CLIENT_EGRESS], services=[named]).egress_admits_cluster_ip(CLIENT, named, 8000)
    assert Cluster(SERVICE_NAMESPACES, [CLIENT_EGRESS], services=[numeric]).egress_admits_cluster_ip(CLIENT, numeric, 8000)


def test_a_headless_service_follows_pod_rules():
    service = _service({"app.kubernetes.io/instance": "a"}, cluster_ip="None")
    cluster = Cluster(SERVICE_NAMESPACES, [CLIENT_EGRESS], services=[service], pods=[MODEL_A])
    assert cluster.can_connect_to_service(CLIENT, service, 8000)


def test_the_destination_ingress_is_still_checked_on_the_backend_pod():
    service = _service({"app.kubernetes.io/name": "vllm"})
    deny = _policy("models", {"podSelector": {}, "policyTypes": ["Ingress"]})
    cluster = Cluster(SERVICE_NAMESPACES, [CLIENT_EGRESS, deny], services=[service], pods=[MODEL_A])
    assert cluster.egress_admits_cluster_ip(CLIENT, service, 8000)
    assert not cluster.can_connect_to_service(CLIENT, service, 8000)


def test_an_ip_block_admits_a_cluster_ip_only_outside_its_exceptions():
    egress = _policy("client", {"podSelector": {}, "policyTypes": ["Egress"],
                                "egress": [{"to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": ["172.16.0.0/12"]}}], "ports": [{"port": 8000}]}]})
    service = _service({"app.kubernetes.io/name": "vllm"})
    cluster = Cluster(SERVICE_NAMESPACES, [egress], services=[service], pods=[MODEL_A])
    assert not cluster.can_connect_to_service(CLIENT, service, 8000)


# --- the emitted policies -----------------------------------------------------------------------

POD_IDENTITY_AGENT = Endpoint("169.254.170.23")
S3 = Endpoint("52.216.1.1")
IMDS = Endpoint("169.254.169.254")


def emitted(plan) -> tuple[Cluster, dict[str, list[Endpoint]]]:
    """The cluster as the plan makes it, with one pod per model server, gateway, Prometheus, CoreDNS
    and an unrelated pod; ``pods`` by role."""
    namespaces = {
        r.inputs["metadata"]["name"]: dict(r.inputs["metadata"].get("labels") or {})
        for r in plan.of_type("kubernetes:core/v1:Namespace")
    }
    namespaces.setdefault("kube-system", {})
    namespaces["intruder"] = {}
    (vpc,) = plan.of_type("aws:ec2/vpc:Vpc")
    in_vpc = Endpoint(str(next(ipaddress.ip_network(vpc.inputs["cidrBlock"]).hosts())))
    policies = [r.inputs for r in plan.of_type("kubernetes:networking.k8s.io/v1:NetworkPolicy")]
    models = []
    for i, deployment in enumerate(plan.of_type("kubernetes:apps/v1:Deployment")):
        template = deployment.inputs["spec"]["template"]
        ports = {p["name"]: p["containerPort"] for c in template["spec"]["containers"] for p in c.get("ports", [])}
        pod = Endpoint(f"10.50.8.{i + 1}", deployment.inputs["metadata"]["namespace"], dict(template["metadata"]["labels"]), ports)
        models.append(pod)
    pods = {
        "models": [p for p in models if p.labels.get("app.kubernetes.io/name") == "vllm"],
        "gateway": [p for p in models if p.namespace == gateway.NAMESPACE],
        "prometheus": [Endpoint("10.50.9.1", observability.NAMESPACE, {"app.kubernetes.io/name": "prometheus", "prometheus": "x"})],
        "dns": [Endpoint("10.50.9.2", "kube-system", {"k8s-app": "kube-dns"}, {"dns": 53, "dns-tcp": 53})],
        "intruder": [Endpoint("10.50.9.3", "intruder", {"app.kubernetes.io/instance": gateway.NAME})],
        "vpc": [in_vpc],
    }
    services = [
        Service(r.inputs["metadata"]["name"], r.inputs["metadata"]["namespace"], f"172.20.7.{i + 1}",
                dict(r.inputs["spec"].get("selector") or {}), list(r.inputs["spec"]["ports"]))
        for i, r in enumerate(plan.of_type("kubernetes:core/v1:Service"))
    ]
    services.append(KUBE_DNS)
    every_pod = [pod for group in pods.values() for pod in group if pod.namespace is not None]
    return Cluster(namespaces, policies, services=services, pods=every_pod), pods


#: CoreDNS's Service as the EKS add-on creates it (kube-system/kube-dns, 172.20.0.10 in a 10/8 VPC).
KUBE_DNS = Service("kube-dns", "kube-system", "172.20.0.10", {"k8s-app": "kube-dns"}, [
    {"name": "dns", "port": 53, "targetPort": 53, "protocol": "UDP"},
    {"name": "dns-tcp", "port": 53, "targetPort": 53, "protocol": "TCP"},
])


def model_services(cluster: Cluster) -> list[Service]:
    return [s for s in cluster.services if s.namespace.startswith("serving-")]


@pytest.fixture(params=["dev", "prod"])
def emitted_cluster(request, dev_plan, prod_plan):
    return emitted({"dev": dev_plan, "prod": prod_plan}[request.param])


def test_every_owned_namespace_starts_from_default_deny(stack_plan):
    policies = [r.inputs for r in stack_plan.of_type("kubernetes:networking.k8s.io/v1:NetworkPolicy")]
    denied = {p["metadata"]["namespace"] for p in policies if p["spec"] == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}}
    owned = {r.inputs["metadata"]["name"] for r in stack_plan.of_type("kubernetes:core/v1:Namespace")}
    assert denied == {ns for ns in owned if ns.startswith("serving-")} | {gateway.NAMESPACE, model_server.PREPULL_NAMESPACE}


def test_gateway_reaches_every_model_and_nothing_else_in_the_serving_namespaces(emitted_cluster):
    cluster, pods = emitted_cluster
    (gw, *_) = pods["gateway"]
    assert pods["models"]
    for model in pods["models"]:
        assert cluster.can_connect(gw, model, model_server.PORT), model
        assert not cluster.can_connect(gw, model, 22)


def test_a_pod_in_another_namespace_cannot_call_a_model_even_with_the_gateway_labels(emitted_cluster):
    cluster, pods = emitted_cluster
    (intruder,) = pods["intruder"]
    for model in pods["models"]:
        assert not cluster.can_connect(intruder, model, model_server.PORT)
    tiers = {m.namespace for m in pods["models"]}
    if len(tiers) > 1:
        a, b = sorted(tiers)[:2]
        src = next(m for m in pods["models"] if m.namespace == a)
        dst = next(m for m in pods["models"] if m.namespace == b)
        assert not cluster.can_connect(src, dst, model_server.PORT), "tiers cannot call each other"


def test_prometheus_scrapes_models_and_gateway(emitted_cluster):
    cluster, pods = emitted_cluster
    (prometheus,) = pods["prometheus"]
    for model in pods["models"]:
        assert cluster.can_connect(prometheus, model, model_server.PORT)
    for gw in pods["gateway"]:
        assert cluster.can_connect(prometheus, gw, gateway.PORT)


def test_gateway_reaches_every_model_service_cluster_ip_under_the_eks_rule(emitted_cluster):
    """What the gateway dials (each route's URL names the model's Service): admitted by the EKS
    controller's ClusterIP rule, on the Service's port, and not on another port."""
    cluster, pods = emitted_cluster
    services = model_services(cluster)
    assert len(services) == len(pods["models"]) >= 2
    for gw in pods["gateway"]:
        for service in services:
            assert cluster.egress_admits_cluster_ip(gw, service, model_server.PORT), service.name
            assert cluster.can_connect_to_service(gw, service, model_server.PORT), service.name
            assert not cluster.can_connect_to_service(gw, service, 22)


def test_model_services_are_not_reachable_by_other_pods_or_tiers(emitted_cluster):
    cluster, pods = emitted_cluster
    (intruder,) = pods["intruder"]
    for service in model_services(cluster):
        assert not cluster.can_connect_to_service(intruder, service, model_server.PORT)
        for model in pods["models"]:
            if model.namespace != service.namespace:
                assert not cluster.can_connect_to_service(model, service, model_server.PORT)


def test_every_pod_resolves_names_through_the_kube_dns_cluster_ip(emitted_cluster):
    cluster, pods = emitted_cluster
    for pod in pods["models"] + pods["gateway"]:
        assert cluster.can_connect_to_service(pod, KUBE_DNS, 53, "UDP") and cluster.can_connect_to_service(pod, KUBE_DNS, 53, "TCP")


def test_clients_in_the_cluster_reach_the_gateway_and_nothing_outside_it_is_admitted(emitted_cluster):
    """The gateway's Service is ClusterIP: only pods are clients. No VPC range is admitted, so no claim
    of a path from the VPC that does not exist."""
    cluster, pods = emitted_cluster
    (gw, *_) = pods["gateway"]
    (service,) = [s for s in cluster.services if s.namespace == gateway.NAMESPACE]
    assert cluster.can_connect(pods["intruder"][0], gw, gateway.PORT)
    assert cluster.can_connect_to_service(pods["intruder"][0], service, gateway.PORT)
    assert not cluster.can_connect(pods["vpc"][0], gw, gateway.PORT), "no ipBlock for the VPC"
    for model in pods["models"]:
        assert not cluster.can_connect(pods["vpc"][0], model, model_server.PORT), "models are not reachable from the VPC"


def test_dns_credentials_and_aws_apis_and_never_instance_metadata(emitted_cluster):
    cluster, pods = emitted_cluster
    (dns,) = pods["dns"]
    for pod in pods["models"] + pods["gateway"]:
        assert cluster.can_connect(pod, dns, 53, "UDP") and cluster.can_connect(pod, dns, 53, "TCP")
        assert cluster.can_connect(pod, POD_IDENTITY_AGENT, 80), "Pod Identity credentials"
        assert cluster.can_connect(pod, S3, 443), "S3 / Bedrock / STS over HTTPS"
        assert not cluster.can_connect(pod, IMDS, 80) and not cluster.can_connect(pod, IMDS, 443)
        assert not cluster.can_connect(pod, pods["vpc"][0], 443), "no in-VPC address on the HTTPS allow"
        assert not cluster.can_connect(pod, S3, 80)


def test_vllm_scrape_stays_open_to_prometheus_behind_the_api_key(emitted_cluster, prod_plan):
    """vLLM's --api-key (VLLM_API_KEY) guards /v1 only, so the PodMonitor's /metrics needs no key;
    its named port resolves to the port the scrape policy opens."""
    (monitor,) = [r.inputs for r in prod_plan.of_type("kubernetes:monitoring.coreos.com/v1:PodMonitor") if r.inputs["metadata"]["name"] == "vllm"]
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert not endpoint["path"].startswith("/v1") and "authorization" not in endpoint
    cluster, pods = emitted_cluster
    (prometheus,) = pods["prometheus"]
    for model in pods["models"]:
        assert cluster.can_connect(prometheus, model, model.ports[endpoint["port"]])
