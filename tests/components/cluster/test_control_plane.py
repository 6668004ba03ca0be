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
    assert inputs["createOidcProvider"] is False, "no IRSA user: no IAM OIDC provider"
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
    assert set(addons) == {"eks-pod-identity-agent", "coredns", "aws-ebs-csi-driver"}
    assert addons["eks-pod-identity-agent"]["addonVersion"] == pinned.pod_identity_agent
    assert addons["aws-ebs-csi-driver"]["addonVersion"] == pinned.ebs_csi_driver
    assert addons["coredns"]["addonVersion"] == pinned.coredns
    assert all(a["clusterName"] == cluster["name"] for a in addons.values())
    # pulumi-eks creates kube-proxy and the VPC CNI itself: at the pinned versions, never "most recent".
    assert cluster["kubeProxyAddonOptions"]["enabled"] is True
    assert cluster["kubeProxyAddonOptions"]["version"] == pinned.kube_proxy
    assert cluster["vpcCniOptions"]["addonVersion"] == pinned.vpc_cni
    assert cluster["vpcCniOptions"]["configurationValues"] == {"enableNetworkPolicy": "true"}, "NetworkPolicies enforced"
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


def test_ebs_csi_driver_gets_aws_managed_policy_through_pod_identity(stack_plan):
    """Prometheus's gp3 StorageClass (ebs.csi.aws.com) binds only with the driver installed."""
    (addon,) = [a for a in stack_plan.of_type("aws:eks/addon:Addon") if a.inputs["addonName"] == "aws-ebs-csi-driver"]
    (association,) = addon.inputs["podIdentityAssociations"]
    assert association["serviceAccount"] == "ebs-csi-controller-sa"
    (role,) = [r for r in stack_plan.of_type("aws:iam/role:Role") if r.name.endswith("-ebs-csi")]
    assert "pods.eks.amazonaws.com" in role.inputs["assumeRolePolicy"]
    (attachment,) = [a for a in stack_plan.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment") if a.name.endswith("-ebs-csi")]
    assert attachment.inputs["policyArn"] == "arn:aws:iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy"
    assert any(d.endswith("::llm-platform-cluster-pod-identity-agent") for d in addon.dependencies)
    (storage,) = stack_plan.of_type("kubernetes:storage.k8s.io/v1:StorageClass")
    assert storage.inputs["provisioner"] == "ebs.csi.aws.com"


def test_prod_has_a_break_glass_admin_entry_and_dev_none(prod_plan, dev_plan):
    entries = eks_cluster(prod_plan).inputs["accessEntries"]
    glass = entries["break-glass"]
    assert glass["principalArn"] == "arn:aws:iam::111122223333:role/eks-break-glass"
    assert glass["accessPolicies"]["cluster-admin"]["policyArn"].endswith(":cluster-access-policy/AmazonEKSClusterAdminPolicy")
    assert "break-glass" not in (eks_cluster(dev_plan).inputs.get("accessEntries") or {})


def test_kubernetes_provider_uses_cluster_kubeconfig(dev_plan):
    (provider,) = dev_plan.of_type("pulumi:providers:kubernetes")
    assert '"current-context": "llm-platform-dev"' in provider.inputs["kubeconfig"]
    assert provider.inputs["enableServerSideApply"] == "true"


# --- upgrade policy and deletion protection, by environment -----------------------------------------


def test_prod_cluster_stays_in_standard_support_and_cannot_be_deleted(prod_plan):
    inputs = eks_cluster(prod_plan).inputs
    assert inputs["upgradePolicy"] == {"supportType": "STANDARD"}
    assert inputs["deletionProtection"] is True


def test_dev_cluster_stays_in_standard_support_and_can_be_destroyed(dev_plan):
    """Environments copied from dev and test stacks are destroyed by the driver: no protection there."""
    inputs = eks_cluster(dev_plan).inputs
    assert inputs["upgradePolicy"] == {"supportType": "STANDARD"}
    assert inputs["deletionProtection"] is False


def test_upgrade_policy_and_deletion_protection_as_set():
    inputs = eks_cluster(plan_with("dev", upgradePolicy={"supportType": "EXTENDED"}, deletionProtection=True)).inputs
    assert inputs["upgradePolicy"] == {"supportType": "EXTENDED"}
    assert inputs["deletionProtection"] is True
    assert eks_cluster(plan_with("prod", deletionProtection=False)).inputs["deletionProtection"] is False
