"""NetworkPolicies stay enforced for models on hybrid nodes, under the rule of the engine that enforces
there: Cilium, which knows pods on cloud nodes (VPC CNI) only by address. The evaluator's Cilium rule on
hand-made cases first (where it and the textbook disagree), then the emitted policies of a dev copy with
an on-prem tier."""

from __future__ import annotations

from dataclasses import replace

import pytest

from components.specs import gateway
from components.specs import serving as model_server
from tests.components.cluster.test_hybrid_nodes import hybrid_config
from tests.components.serving.test_network_policy import emitted
from tests.conftest import plan_with
from tests.support.network_policy_eval import Cluster, Endpoint

GATEWAY_POD = Endpoint("10.40.1.10", "gw", {"app": "gateway"})
MODEL_POD = Endpoint("192.168.64.10", "tier", {"app": "model"})
ALLOW_GATEWAY = {"metadata": {"namespace": "tier", "name": "p"}, "spec": {
    "podSelector": {"matchLabels": {"app": "model"}}, "policyTypes": ["Ingress"],
    "ingress": [{"from": [{"namespaceSelector": {}, "podSelector": {"matchLabels": {"app": "gateway"}}}], "ports": [{"port": 8000}]}]}}
ALLOW_VPC = {"metadata": {"namespace": "tier", "name": "q"}, "spec": {
    "podSelector": {"matchLabels": {"app": "model"}}, "policyTypes": ["Ingress"],
    "ingress": [{"from": [{"ipBlock": {"cidr": "10.40.0.0/16"}}], "ports": [{"port": 8000}]}]}}


def test_cilium_does_not_match_a_cloud_pod_by_its_labels_where_the_textbook_does():
    namespaces = {"gw": {}, "tier": {}}
    textbook = Cluster(namespaces, [ALLOW_GATEWAY])
    cilium = Cluster(namespaces, [ALLOW_GATEWAY], cilium_pods=frozenset({MODEL_POD.ip}))
    assert textbook.can_connect(GATEWAY_POD, MODEL_POD, 8000)
    assert not cilium.can_connect(GATEWAY_POD, MODEL_POD, 8000)


def test_cilium_matches_the_cloud_pod_by_address_and_a_hybrid_pod_by_labels():
    cilium = Cluster({"gw": {}, "tier": {}}, [ALLOW_GATEWAY, ALLOW_VPC], cilium_pods=frozenset({MODEL_POD.ip, "192.168.64.20"}))
    assert cilium.can_connect(GATEWAY_POD, MODEL_POD, 8000)
    assert cilium.can_connect(Endpoint("192.168.64.20", "gw", {"app": "gateway"}), MODEL_POD, 8000)
    assert not cilium.can_connect(Endpoint("192.168.64.30", "gw", {"app": "other"}), MODEL_POD, 8000)


@pytest.fixture(scope="module")
def hybrid_cluster():
    config = hybrid_config()
    plan = plan_with("dev", **{k.split(":", 1)[1]: v for k, v in config.items() if k.startswith("llm-platform:")})
    cluster, pods = emitted(plan)
    # Cloud pods get VPC addresses (dev: 10.40.0.0/16), the on-prem model a remote pod network's address.
    cloud = {role: [replace(p, ip=f"10.40.{9 + n}.{i + 1}") for i, p in enumerate(pods[role])]
             for n, role in enumerate(("gateway", "prometheus", "dns", "intruder"))}
    (onprem,) = [replace(p, ip="192.168.64.10") for p in pods["models"] if p.namespace == "serving-onprem"]
    neighbour = Endpoint("192.168.64.20", "intruder", {"app.kubernetes.io/instance": gateway.NAME})
    cluster = Cluster(cluster.namespaces, cluster.policies, services=cluster.services,
                      cilium_pods=frozenset({onprem.ip, neighbour.ip}))
    return cluster, cloud, onprem, neighbour


def test_gateway_and_prometheus_reach_the_on_prem_model_under_cilium(hybrid_cluster):
    cluster, cloud, onprem, _ = hybrid_cluster
    assert cluster.can_connect(cloud["gateway"][0], onprem, model_server.PORT)
    assert cluster.can_connect(cloud["prometheus"][0], onprem, model_server.PORT)
    assert not cluster.can_connect(cloud["gateway"][0], onprem, 22)


def test_the_on_prem_model_resolves_names_on_the_system_pool(hybrid_cluster):
    cluster, cloud, onprem, _ = hybrid_cluster
    assert cluster.can_connect(onprem, cloud["dns"][0], 53, "UDP")
    assert cluster.can_connect(onprem, cloud["dns"][0], 53, "TCP")


def test_an_on_prem_pod_of_another_namespace_is_still_kept_out(hybrid_cluster):
    """Cilium knows it (a hybrid pod), so the gateway labels in the wrong namespace match nothing."""
    cluster, _, onprem, neighbour = hybrid_cluster
    assert not cluster.can_connect(neighbour, onprem, model_server.PORT)


def test_stacks_without_hybrid_models_get_no_vpc_wide_allow(dev_plan):
    names = {r.inputs["metadata"]["name"] for r in dev_plan.of_type("kubernetes:networking.k8s.io/v1:NetworkPolicy")}
    assert "allow-vpc-to-hybrid-models" not in names and "allow-hybrid-models-dns" not in names
