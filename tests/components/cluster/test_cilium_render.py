"""Cilium, rendered by Helm's engine from the pinned chart with the program's values: agent and operator
only on hybrid nodes, cluster-pool IPAM over the remote pod networks, AWS's Cilium build images, policy
enforcement on; and the VPC CNI's own affinity keeps it off those nodes."""

from __future__ import annotations

from typing import Any

import pytest

from components import versions
from components.specs.hybrid_nodes import cilium_values
from policies.capacity.charts import addon_daemonset
from tests.support import helm_render
from tests.support.needs import missing

HYBRID_NODE = ({"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "eks.amazonaws.com/compute-type": "hybrid",
                "llm-platform.io/pool": "onprem-l40s", "nvidia.com/gpu.present": "true"},
               [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}])
CLOUD_GPU_NODE = ({"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "llm-platform.io/pool": "inference",
                   "nvidia.com/gpu.present": "true"},
                  [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}])
SYSTEM_NODE = ({"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "node.kubernetes.io/purpose": "system"}, [])


@pytest.fixture(scope="module")
def objects() -> list[dict[str, Any]]:
    reason = helm_render.missing_reason(versions.CILIUM)
    if reason:
        missing(reason)
    return helm_render.render(versions.CILIUM, cilium_values(["192.168.64.0/18"], 110, 2), release_name="cilium",
                              namespace="kube-system", kube_version="1.35")


def one(objects, kind: str, name: str) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def test_agent_and_operator_land_on_hybrid_nodes_only(objects):
    agent = helm_render.pod_spec_of(one(objects, "DaemonSet", "cilium"))
    operator = helm_render.pod_spec_of(one(objects, "Deployment", "cilium-operator"))
    for spec in (agent, operator):
        assert helm_render.schedulable_on(spec, *HYBRID_NODE)
        assert not helm_render.schedulable_on(spec, *CLOUD_GPU_NODE)
        assert not helm_render.schedulable_on(spec, *SYSTEM_NODE)


def test_workloads_are_exactly_the_agent_and_the_operator(objects):
    """Envoy (L7) and Hubble relay/UI are off: no other DaemonSet or Deployment to place."""
    workloads = sorted((o["kind"], o["metadata"]["name"]) for o in objects if o["kind"] in ("DaemonSet", "Deployment"))
    assert workloads == [("DaemonSet", "cilium"), ("Deployment", "cilium-operator")]
    assert one(objects, "Deployment", "cilium-operator")["spec"]["replicas"] == 2


def test_images_are_awss_cilium_build_as_pinned(objects):
    images = {c["image"] for o in objects if (spec := helm_render.pod_spec_of(o))
              for c in spec.get("containers", []) + spec.get("initContainers", [])}
    assert images == {"public.ecr.aws/eks/cilium/cilium:v1.18.12-0",
                      "public.ecr.aws/eks/cilium/operator-generic:v1.18.12-0"}


def test_cluster_pool_ipam_hands_out_the_remote_pod_network(objects):
    config = one(objects, "ConfigMap", "cilium-config")["data"]
    assert config["ipam"] == "cluster-pool"
    assert config["cluster-pool-ipv4-cidr"] == "192.168.64.0/18"
    assert config["cluster-pool-ipv4-mask-size"] == "25"  # 128 addresses: 110 pods + router + health
    assert config["enable-policy"] == "default"  # Kubernetes NetworkPolicies are enforced
    assert config["unmanaged-pod-watcher-interval"] == "0"  # cloud pods (VPC CNI) are left alone


def test_the_vpc_cni_and_pod_identity_agent_stay_off_hybrid_nodes_and_kube_proxy_runs_there():
    """The EKS add-ons' own affinity (as the capacity model records it): aws-node NotIn hybrid."""
    labels, taints = HYBRID_NODE
    landing = {name: addon_daemonset(name).lands_on(labels, {}, []) for name in ("vpc-cni", "eks-pod-identity-agent", "kube-proxy")}
    assert landing == {"vpc-cni": False, "eks-pod-identity-agent": False, "kube-proxy": True}
