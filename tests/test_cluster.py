"""Cluster: API access entries, private endpoint, KMS-encrypted Secrets, OIDC, Pod Identity."""

from __future__ import annotations

from components import versions
from tests.conftest import plan_with


def eks_cluster(plan):
    (cluster,) = plan.of_type("eks:index:Cluster")
    return cluster


def test_cluster_baseline(stack_plan):
    inputs = eks_cluster(stack_plan).inputs
    assert inputs["authenticationMode"] == "API"
    assert inputs["skipDefaultNodeGroup"] is True
    assert inputs["endpointPrivateAccess"] is True
    assert inputs["createOidcProvider"] is True
    assert inputs["nodeAssociatePublicIpAddress"] is False
    assert inputs["version"] == versions.DEFAULT_KUBERNETES_VERSION
    assert set(inputs["enabledClusterLogTypes"]) == {"api", "audit", "authenticator", "controllerManager", "scheduler"}
    assert len(inputs["privateSubnetIds"]) == 3 and len(inputs["publicSubnetIds"]) == 3


def test_secrets_encrypted_with_rotating_key(stack_plan):
    (key,) = stack_plan.of_type("aws:kms/key:Key")
    assert key.inputs["enableKeyRotation"] is True
    assert eks_cluster(stack_plan).inputs["encryptionConfigKeyArn"].startswith("arn:aws:kms:us-east-1:")
    assert eks_cluster(stack_plan).inputs["encryptionConfigKeyArn"].endswith(
        stack_plan.named("aws:kms/alias:Alias", "llm-platform-cluster-secrets").inputs["targetKeyId"]
    )


def test_dev_endpoint_is_public_to_listed_cidrs_only(dev_plan):
    inputs = eks_cluster(dev_plan).inputs
    assert inputs["endpointPublicAccess"] is True
    assert inputs["publicAccessCidrs"] == ["203.0.113.0/24"]


def test_prod_endpoint_is_private(prod_plan):
    inputs = eks_cluster(prod_plan).inputs
    assert inputs["endpointPublicAccess"] is False
    assert "publicAccessCidrs" not in inputs


def test_every_managed_add_on_is_pinned_from_versions(stack_plan):
    cluster = eks_cluster(stack_plan).inputs
    pinned = versions.EKS_ADDONS[cluster["version"]]
    addons = {a.inputs["addonName"]: a.inputs for a in stack_plan.of_type("aws:eks/addon:Addon")}
    assert set(addons) == {"eks-pod-identity-agent", "coredns"}
    assert addons["eks-pod-identity-agent"]["addonVersion"] == pinned.pod_identity_agent
    assert addons["coredns"]["addonVersion"] == pinned.coredns
    assert all(a["clusterName"] == cluster["name"] for a in addons.values())
    # pulumi-eks creates kube-proxy and the VPC CNI itself: at the pinned versions, never "most recent".
    assert cluster["kubeProxyAddonOptions"]["enabled"] is True
    assert cluster["kubeProxyAddonOptions"]["version"] == pinned.kube_proxy
    assert cluster["vpcCniOptions"]["addonVersion"] == pinned.vpc_cni
    # pulumi-eks's own CoreDNS would be created before any node exists; ours waits for the system pool.
    assert cluster["corednsAddonOptions"]["enabled"] is False


def test_coredns_waits_for_the_system_pool(stack_plan):
    (coredns,) = [a for a in stack_plan.of_type("aws:eks/addon:Addon") if a.inputs["addonName"] == "coredns"]
    assert any(d.endswith("llm-platform:index:SystemNodePool$eks:index:ManagedNodeGroup::system") for d in coredns.dependencies)


def test_admin_roles_get_cluster_admin_access_entries():
    arn = "arn:aws:iam::123456789012:role/platform-admin"
    entries = eks_cluster(plan_with("dev", adminRoleArns=[arn])).inputs["accessEntries"]
    assert entries == {
        "admin-0": {
            "principalArn": arn,
            "type": "STANDARD",
            "accessPolicies": {
                "cluster-admin": {
                    "policyArn": "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy",
                    "accessScope": {"type": "cluster"},
                }
            },
        }
    }


def test_kubernetes_provider_uses_cluster_kubeconfig(dev_plan):
    (provider,) = dev_plan.of_type("pulumi:providers:kubernetes")
    assert '"current-context": "llm-platform-dev"' in provider.inputs["kubeconfig"]
    assert provider.inputs["enableServerSideApply"] == "true"
