"""A gpu-dra pool gets the DRA Driver for NVIDIA GPUs (kubernetes-sigs/dra-driver-nvidia-gpu 0.4.1, chart
``dra-driver-nvidia-gpu`` at ``oci://registry.k8s.io/dra-driver-nvidia/charts``); the device plugin stays off
it; Cluster Autoscaler grows it."""

from __future__ import annotations

import pytest

from components import contract, versions
from components.specs.gpu_software import GPU_DEVICE_CLASS
from tests.conftest import ROOMY_GPU_BUDGET, plan_with, read_stack_config


@pytest.fixture(scope="module")
def dra_plan():
    inference = read_stack_config("dev")["llm-platform:gpuPools"][0]
    dra = {**inference, "name": "dra", "purpose": "gpu-dra", "capacityType": "ON_DEMAND", "instanceTypes": ["g6e.xlarge"],
           "scaling": {"minSize": 1, "desiredSize": 1, "maxSize": 2}}
    return plan_with("dev", gpuPools=[inference, dra], gpuBudget=ROOMY_GPU_BUDGET)


DRA_CHART = "oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu"
CRD_URLS = [
    "https://raw.githubusercontent.com/kubernetes-sigs/dra-driver-nvidia-gpu/v0.4.1/deployments/helm/"
    "dra-driver-nvidia-gpu/crds/resource.nvidia.com_computedomaincliques.yaml",
    "https://raw.githubusercontent.com/kubernetes-sigs/dra-driver-nvidia-gpu/v0.4.1/deployments/helm/"
    "dra-driver-nvidia-gpu/crds/resource.nvidia.com_computedomains.yaml",
]


def release(plan, chart):
    matches = [r for r in plan.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["chart"] == chart]
    return matches[0] if matches else None


def test_dev_and_prod_have_no_dra_driver_without_a_dra_pool(stack_plan):
    assert release(stack_plan, DRA_CHART) is None


def test_a_dra_pool_installs_the_pinned_driver(dra_plan):
    dra = release(dra_plan, DRA_CHART)
    inputs = dra.inputs
    assert (inputs["chart"], inputs["version"], inputs.get("repositoryOpts")) == (DRA_CHART, "0.4.1", None)
    # the old release name and chart name: the upgrade from nvidia-dra-driver-gpu 25.12 keeps every object
    assert (inputs["name"], inputs["values"]["nameOverride"]) == ("nvidia-dra-driver-gpu", "nvidia-dra-driver-gpu")
    assert inputs["namespace"] not in ("default", "kube-system")
    values = inputs["values"]
    assert values["image"] == {"repository": "registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu", "tag": "v0.4.1"}
    assert values["resources"] == {"gpus": {"enabled": True}, "computeDomains": {"enabled": False}}
    assert values["gpuResourcesEnabledOverride"] is True
    assert values["nvidiaDriverRoot"] == "/"
    assert values["resourceApiVersion"] == "resource.k8s.io/v1"


def test_the_compute_domain_crds_are_applied_before_the_release(dra_plan):
    """Helm installs a chart's crds/ on first install only: on the upgrade from 25.12 the program applies the
    0.4.1 CRDs itself, first, and the release skips crds/."""
    files = [r for r in dra_plan.of_type("kubernetes:yaml/v2:ConfigFile") if r.inputs.get("file") in CRD_URLS]
    assert sorted(f.inputs["file"] for f in files) == CRD_URLS
    dra = release(dra_plan, DRA_CHART)
    assert dra.inputs["skipCrds"] is True
    assert {f.urn for f in files} <= set(dra.dependencies)


def test_kubelet_plugin_reaches_dra_pools_only(dra_plan):
    plugin = release(dra_plan, DRA_CHART).inputs["values"]["kubeletPlugin"]
    assert plugin["nodeSelector"] == {contract.PURPOSE_LABEL: contract.GPU_DRA_PURPOSE}
    tolerated = {(t["key"], t.get("value")) for t in plugin["tolerations"]}
    (dra_group,) = [g for g in dra_plan.of_type("eks:index:ManagedNodeGroup") if g.name == "dra"]
    for taint in dra_group.inputs["taints"]:
        assert (taint["key"], None) in tolerated or (taint["key"], taint["value"]) in tolerated


def test_device_plugin_stays_off_dra_pools(dra_plan):
    values = release(dra_plan, "nvidia-device-plugin").inputs["values"]
    (term,) = values["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert {"key": contract.PURPOSE_LABEL, "operator": "NotIn", "values": [contract.GPU_DRA_PURPOSE]} in term["matchExpressions"]


def test_cluster_autoscaler_grows_the_dra_group_from_a_real_node(dra_plan):
    """A DRA group keeps one node, whose ResourceSlices the autoscaler copies into its template; its
    DRA simulation is on so a claimed GPU is not mistaken for a free one."""
    (group,) = [g for g in dra_plan.of_type("eks:index:ManagedNodeGroup") if g.name == "dra"]
    assert group.inputs["scalingConfig"]["minSize"] >= 1
    assert group.inputs["scalingConfig"]["maxSize"] > group.inputs["scalingConfig"]["minSize"]
    autoscaler = release(dra_plan, "cluster-autoscaler").inputs["values"]
    assert autoscaler["extraArgs"]["enable-dynamic-resource-allocation"] is True


def test_device_class_name_is_the_charts():
    assert GPU_DEVICE_CLASS == "gpu.nvidia.com"


def test_documented_dra_example_is_valid_and_targets_the_dra_pool():
    """The documented workload passes strict Kubernetes schemas and tolerates a DRA pool's taints."""
    import re
    from pathlib import Path

    import kubernetes_validate
    import yaml

    readme = (Path(__file__).resolve().parents[3] / "docs" / "capacity.md").read_text()
    (block,) = [b for b in re.findall(r"```yaml\n(.*?)```", readme, re.S) if "ResourceClaimTemplate" in b]
    documents = list(yaml.safe_load_all(block))
    for document in documents:
        kubernetes_validate.validate(document, versions.DEFAULT_KUBERNETES_VERSION, strict=True)
    template, pod = documents
    assert template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] == GPU_DEVICE_CLASS
    assert pod["spec"]["tolerations"] == contract.workload_tolerations(contract.GPU_DRA_PURPOSE)
    assert pod["spec"]["containers"][0]["image"] == str(versions.CUDA_SMOKE_IMAGE)
