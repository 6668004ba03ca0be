"""The prefix-aware request path under the VPC CNI policy engine's rules (tests/support/network_policy_eval.py):
gateway -> picker Service (Envoy) -> picker -> model pods, the picker's scrape of the model pods and its
watch of the Kubernetes API, on the NetworkPolicies a routed dev copy emits and the picker objects Helm's
engine renders from the program's values. Envoy reaches the picker over loopback inside one pod, where no
NetworkPolicy applies."""

from __future__ import annotations

import copy

import pytest

from components import versions
from components.specs import gateway, routing
from components.specs import serving as model_server
from tests.components.serving.test_network_policy import emitted
from tests.components.serving.test_prefix_aware_routing import ROUTED, routed_serving
from tests.conftest import plan_with
from tests.support import helm_render
from tests.support.needs import missing
from tests.support.network_policy_eval import Cluster, Endpoint, Service

#: The ``kubernetes`` Service as EKS creates it: no selector, the first address of the Service range
#: (172.20.0.0/16 for dev's 10.40.0.0/16 VPC).
KUBERNETES_API = Service("kubernetes", "default", "172.20.0.1", {}, [{"name": "https", "port": 443, "targetPort": 443}])
S3 = Endpoint("52.216.1.1")


@pytest.fixture(scope="module")
def routed_plan():
    return plan_with("dev", serving=routed_serving())


def picker_objects(plan) -> list[dict]:
    chart = versions.LLM_D_ROUTER_STANDALONE
    reason = helm_render.missing_reason(chart)
    if reason:
        missing(reason)
    (picker,) = [r for r in plan.of_type("kubernetes:helm.sh/v4:Chart") if r.inputs["chart"].endswith("/llm-d-router-standalone")]
    return helm_render.render(chart, picker.inputs["values"], release_name=picker.inputs["name"],
                              namespace=picker.inputs["namespace"], kube_version="1.35")


def with_pickers(plan, policies_override=None):
    """The emitted cluster plus the rendered picker pod and Service, and the kubernetes Service."""
    cluster, pods = emitted(plan)
    objects = picker_objects(plan)
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    (service,) = [o for o in objects if o["kind"] == "Service"]
    template = deployment["spec"]["template"]
    ports = {p["name"]: p["containerPort"] for c in template["spec"]["containers"] for p in c.get("ports", [])}
    picker = Endpoint("10.50.10.1", deployment["metadata"]["namespace"], dict(template["metadata"]["labels"]), ports)
    picker_service = Service(service["metadata"]["name"], service["metadata"]["namespace"], "172.20.8.1",
                             dict(service["spec"]["selector"]), list(service["spec"]["ports"]))
    policies = policies_override if policies_override is not None else cluster.policies
    namespaces = {k: {kk: vv for kk, vv in v.items() if kk != "kubernetes.io/metadata.name"} for k, v in cluster.namespaces.items()}
    routed = Cluster({**namespaces, "default": {}}, policies, services=[*cluster.services, picker_service, KUBERNETES_API], pods=[*cluster.pods, picker])
    return routed, pods, picker, picker_service


@pytest.fixture(scope="module")
def routed(routed_plan):
    return with_pickers(routed_plan)


def test_gateway_reaches_the_picker_service_as_the_engine_resolves_it(routed):
    cluster, pods, _, service = routed
    (gw, *_) = pods["gateway"]
    assert cluster.can_connect_to_service(gw, service, routing.PROXY_PORT)
    assert not cluster.can_connect_to_service(gw, service, routing.EXT_PROC_PORT), "only Envoy's port, not the picker's gRPC"


def test_naming_the_pickers_by_another_label_passes_the_textbook_but_not_the_engine(routed_plan):
    """The picker pods carry ``llm-d.ai/igw-mode``; the picker Service selects only on the chart's selector
    key. An egress peer on the mode label selects the same pods (the textbook allows the call) but the
    controller puts the ClusterIP only where the peer matches the Service's selector: every call dropped."""
    policies = copy.deepcopy([r.inputs for r in routed_plan.of_type("kubernetes:networking.k8s.io/v1:NetworkPolicy")])
    (allow,) = [p for p in policies if p["metadata"]["namespace"] == gateway.NAMESPACE and p["metadata"]["name"] == "allow-pickers"]
    allow["spec"]["egress"][0]["to"][0]["podSelector"] = {"matchLabels": {"llm-d.ai/igw-mode": "llm-d-router-gateway"}}
    cluster, pods, _, service = with_pickers(routed_plan, policies)
    (gw, *_) = pods["gateway"]
    assert cluster.textbook_can_connect_to_service(gw, service, routing.PROXY_PORT)
    assert not cluster.can_connect_to_service(gw, service, routing.PROXY_PORT)


def test_the_picker_reaches_its_models_pods_for_requests_and_metrics(routed):
    cluster, pods, picker, _ = routed
    own = [m for m in pods["models"] if m.labels.get("app.kubernetes.io/instance") == ROUTED]
    others = [m for m in pods["models"] if m.labels.get("app.kubernetes.io/instance") != ROUTED]
    assert own and others
    for model in own:  # Envoy forwards to the pod IP the picker chose; the picker scrapes /metrics there
        assert cluster.can_connect(picker, model, model_server.PORT)
        assert not cluster.can_connect(picker, model, 22)
    for model in others:
        assert not cluster.can_connect(picker, model, model_server.PORT), "another tier's models stay closed"


def test_the_picker_watches_the_api_and_reaches_nothing_public(routed):
    cluster, _, picker, _ = routed
    assert cluster.egress_admits_cluster_ip(picker, KUBERNETES_API, 443)
    assert not cluster.can_connect(picker, S3, 443)


def test_nothing_but_the_gateway_reaches_the_picker(routed):
    cluster, pods, picker, service = routed
    (intruder,) = pods["intruder"]
    assert not cluster.can_connect(intruder, picker, routing.PROXY_PORT)
    (model, *_) = pods["models"]
    assert not cluster.can_connect(model, picker, routing.PROXY_PORT)
    (gw, *_) = pods["gateway"]
    assert cluster.can_connect(gw, picker, routing.PROXY_PORT)


def test_service_routing_leaves_the_gateway_without_a_picker_rule(dev_plan):
    names = {r.inputs["metadata"]["name"] for r in dev_plan.of_type("kubernetes:networking.k8s.io/v1:NetworkPolicy")}
    assert "allow-pickers" not in names and "allow-picker-egress" not in names
