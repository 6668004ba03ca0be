"""Every object of the pinned charts, rendered by Helm's engine with the program's values, passes
strict schema validation and lands where it should.

Charts come from the local chart cache, else from ``../shared/charts`` (``tests/support/helm_render.py``);
a chart in neither place skips with the reason printed (``pytest -rs``), and fails in CI. Placement is decided against the nodes the plan creates:
each managed group and Karpenter/Auto Mode NodePool, with its labels and taints.
"""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest

from components import contract, versions
from tests.conftest import ROOMY_GPU_BUDGET, plan_with, read_stack_config
from tests.support import helm_render
from tests.support.needs import missing

RENDERED = [
    versions.CLUSTER_AUTOSCALER,
    versions.NVIDIA_DRA_DRIVER,
    versions.KARPENTER,
    versions.KARPENTER_CRD,
    versions.NVIDIA_DEVICE_PLUGIN,
    versions.DCGM_EXPORTER,
    versions.NVIDIA_GPU_OPERATOR,
    versions.KEDA,
    versions.KUBE_PROMETHEUS_STACK,
]
#: Kinds whose schema is not in Kubernetes' own (CRDs of other charts); checked elsewhere.
CUSTOM_KINDS = {"ServiceMonitor", "PodMonitor", "PrometheusRule", "Prometheus", "Alertmanager", "ClusterPolicy"}


@pytest.fixture(scope="module")
def dra_plan():
    inference = read_stack_config("dev")["llm-platform:gpuPools"][0]
    dra = {**inference, "name": "dra", "purpose": "gpu-dra", "capacityType": "ON_DEMAND", "instanceTypes": ["g6e.xlarge"],
           "scaling": {"minSize": 1, "desiredSize": 1, "maxSize": 2}}
    return plan_with("dev", gpuPools=[inference, dra], gpuBudget=ROOMY_GPU_BUDGET)


@pytest.fixture(scope="module")
def dev_1_36_plan():
    """dev on Kubernetes 1.36: every chart renders and validates for the newest supported minor."""
    return plan_with("dev", kubernetesVersion="1.36")


@pytest.fixture(params=["dev", "prod", "dev+dra", "dev@1.36"])
def plan(request, dev_plan, prod_plan, dra_plan, dev_1_36_plan):
    return {"dev": dev_plan, "prod": prod_plan, "dev+dra": dra_plan, "dev@1.36": dev_1_36_plan}[request.param]


def kube_version(plan) -> str:
    (cluster,) = plan.of_type("eks:index:Cluster")
    return cluster.inputs["version"]


def release_of(plan, chart: versions.HelmChart) -> dict[str, Any] | None:
    for release in plan.of_type("kubernetes:helm.sh/v3:Release"):
        if release.inputs["chart"] in (chart.chart, chart.ref) and release.inputs["version"] == chart.version:
            return release.inputs
    return None


def rendered(plan, chart: versions.HelmChart) -> list[dict[str, Any]]:
    reason = helm_render.missing_reason(chart)
    if reason:
        missing(reason)
    inputs = release_of(plan, chart)
    if inputs is None:
        pytest.skip(f"{chart.chart} is not installed in the {plan.stack} plan")
    return helm_render.render(
        chart, inputs.get("values", {}), release_name=inputs["name"], namespace=inputs["namespace"],
        kube_version=kube_version(plan),
    )


def nodes(plan) -> dict[str, tuple[dict[str, str], list[dict[str, str]]]]:
    """Every kind of node the plan can create: name -> (labels, taints in Kubernetes spelling)."""
    found = {}
    kubelet = {"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}  # every AL2023 x86_64 node
    for group in plan.of_type("eks:index:ManagedNodeGroup"):
        taints = [{**t, "effect": contract.k8s_effect(t["effect"])} for t in group.inputs.get("taints", [])]
        found[f"managed/{group.name}"] = ({**kubelet, **group.inputs.get("labels", {})}, taints)
    for pool in plan.of_type("kubernetes:karpenter.sh/v1:NodePool"):
        template = pool.inputs["spec"]["template"]
        labels = {**kubelet, **template.get("metadata", {}).get("labels", {})}
        for req in template["spec"].get("requirements", []):
            if req["operator"] == "In" and len(req.get("values", [])) == 1:
                labels.setdefault(req["key"], req["values"][0])
        if template["spec"]["nodeClassRef"].get("group") == "eks.amazonaws.com":
            labels["eks.amazonaws.com/compute-type"] = "auto"
        labels.setdefault("karpenter.sh/nodepool", pool.inputs["metadata"]["name"])
        found[f"karpenter/{pool.inputs['metadata']['name']}"] = (labels, list(template["spec"].get("taints", [])))
    return found


def landing(plan, obj) -> set[str]:
    spec = helm_render.pod_spec_of(obj)
    return {name for name, (labels, taints) in nodes(plan).items() if helm_render.schedulable_on(spec, labels, taints)}


def purpose_of(plan, node: str) -> str:
    return nodes(plan)[node][0].get(contract.PURPOSE_LABEL, "")


@pytest.mark.parametrize("chart", RENDERED, ids=lambda c: c.chart)
def test_every_rendered_object_passes_strict_schema_validation(plan, chart):
    objects = rendered(plan, chart)
    assert objects
    failures = []
    for obj in objects:
        if obj["kind"] in CUSTOM_KINDS or obj["kind"] == "CustomResourceDefinition" and chart is versions.KARPENTER_CRD:
            continue
        try:
            kubernetes_validate.validate(obj, kube_version(plan), strict=True)
        except kubernetes_validate.ValidationError as exc:
            failures.append(f"{obj['kind']}/{obj['metadata']['name']}: {exc.message} at {list(exc.path)}")
    assert not failures, failures


@pytest.mark.parametrize("chart", [versions.CLUSTER_AUTOSCALER, versions.KARPENTER, versions.KEDA], ids=lambda c: c.chart)
def test_controllers_land_on_the_system_pool_only(plan, chart):
    deployments = [o for o in rendered(plan, chart) if o["kind"] == "Deployment"]
    assert deployments
    for deployment in deployments:
        where = landing(plan, deployment)
        assert where and {purpose_of(plan, n) for n in where} == {contract.SYSTEM_PURPOSE}, (deployment["metadata"]["name"], where)


def test_cluster_autoscaler_is_configured_as_the_program_intends(plan):
    (deployment,) = [o for o in rendered(plan, versions.CLUSTER_AUTOSCALER) if o["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    command = container["command"]
    cluster = f"llm-platform-{plan.stack}"
    assert f"--node-group-auto-discovery=asg:tag=k8s.io/cluster-autoscaler/enabled,k8s.io/cluster-autoscaler/{cluster}" in command
    assert "--expander=least-waste" in command and "--skip-nodes-with-local-storage=false" in command
    assert {"name": "AWS_REGION", "value": "us-east-1"} in container["env"]
    assert container["image"] == str(versions.CLUSTER_AUTOSCALER_IMAGES[kube_version(plan)])
    account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
    association = plan.named("aws:eks/podIdentityAssociation:PodIdentityAssociation", "cluster-autoscaler-controller")
    assert account == association.inputs["serviceAccount"]
    pdbs = [o for o in rendered(plan, versions.CLUSTER_AUTOSCALER) if o["kind"] == "PodDisruptionBudget"]
    assert len(pdbs) == 1


def test_karpenter_container_gets_the_region(plan):
    (deployment,) = [o for o in rendered(plan, versions.KARPENTER) if o["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert {"name": "AWS_REGION", "value": "us-east-1"} in container["env"]


def test_device_plugin_lands_on_gpu_pools_but_not_dra_pools(plan):
    daemonsets = {o["metadata"]["name"]: o for o in rendered(plan, versions.NVIDIA_DEVICE_PLUGIN) if o["kind"] == "DaemonSet"}
    # The MPS control daemon waits for GFD's nvidia.com/mps.capable label, which no pool carries.
    assert not landing(plan, daemonsets.pop("nvidia-device-plugin-mps-control-daemon"))
    (daemonset,) = daemonsets.values()
    where = landing(plan, daemonset)
    gpu = {n for n in nodes(plan) if purpose_of(plan, n) in contract.GPU_PURPOSES}
    expected = {n for n in gpu if purpose_of(plan, n) != contract.GPU_DRA_PURPOSE}
    expected -= {n for n, (labels, _) in nodes(plan).items() if labels.get("eks.amazonaws.com/compute-type") == "auto"}
    assert where == expected


def test_dra_kubelet_plugin_lands_on_dra_pools_only(plan):
    objects = rendered(plan, versions.NVIDIA_DRA_DRIVER)
    (daemonset,) = [o for o in objects if o["kind"] == "DaemonSet"]
    where = landing(plan, daemonset)
    assert where and {purpose_of(plan, n) for n in where} == {contract.GPU_DRA_PURPOSE}
    assert not [o for o in objects if o["kind"] == "Deployment"], "ComputeDomains are off: no controller"
    classes = {o["metadata"]["name"] for o in objects if o["kind"] == "DeviceClass"}
    assert "gpu.nvidia.com" in classes


def test_the_engine_honours_the_kube_version():
    """As ``helm install`` does, a chart whose kubeVersion excludes the cluster is refused."""
    chart = versions.NVIDIA_DRA_DRIVER
    reason = helm_render.missing_reason(chart)
    if reason:
        missing(reason)
    from components.specs.gpu_software import dra_driver_values

    with pytest.raises(ValueError, match="requires kubeVersion >=1.32.0-0, not Kubernetes v1.31.0"):
        helm_render.render(chart, dra_driver_values(), release_name="d", namespace="d", kube_version="1.31")
    assert helm_render.render(chart, dra_driver_values(), release_name="d", namespace="d", kube_version="1.32")


def test_dcgm_exporter_lands_on_gpu_nodes_only(plan):
    (daemonset,) = [o for o in rendered(plan, versions.DCGM_EXPORTER) if o["kind"] == "DaemonSet"]
    where = landing(plan, daemonset)
    managed_gpu = {n for n in nodes(plan) if n.startswith("managed/") and purpose_of(plan, n) in contract.GPU_PURPOSES}
    assert managed_gpu <= where
    assert {purpose_of(plan, n) for n in where} <= set(contract.GPU_PURPOSES)


def test_the_helper_renders_with_helms_engine_everywhere(tmp_path, monkeypatch):
    """Runs without the chart cache (CI): a chart written here goes through the same cache and
    render path, so the engine, the kube version and schema checks are exercised on every run."""
    if helm_render.helm is None:
        missing("helm-python-sdk is not installed (tests/requirements-helm.txt; make test installs it)")
    chart_dir = tmp_path / "probe"
    (chart_dir / "templates").mkdir(parents=True)
    (chart_dir / "Chart.yaml").write_text('apiVersion: v2\nname: probe\nversion: 1.2.3\nkubeVersion: ">= 1.34.0-0"\n')
    (chart_dir / "values.schema.json").write_text('{"type": "object", "properties": {"replicas": {"type": "integer"}}}')
    (chart_dir / "templates" / "cm.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n  namespace: {{ .Release.Namespace }}\n"
        "data:\n  kube: {{ .Capabilities.KubeVersion.Version | quote }}\n  replicas: {{ .Values.replicas | quote }}\n"
    )
    monkeypatch.setenv(helm_render.CACHE_ENV, str(tmp_path / "cache"))
    archive = helm_render.add_to_cache(chart_dir)
    assert archive.name == "probe-1.2.3.tgz"
    chart = versions.HelmChart(chart="probe", version="1.2.3", repository="https://example.invalid")
    (config_map,) = helm_render.render(chart, {"replicas": 2}, release_name="r", namespace="ns", kube_version="1.35")
    assert config_map["metadata"] == {"name": "r", "namespace": "ns"}
    assert config_map["data"] == {"kube": "v1.35.0", "replicas": "2"}
    kubernetes_validate.validate(config_map, "1.35", strict=True)
    with pytest.raises(helm_render.helm.HelmError, match="replicas"):
        helm_render.render(chart, {"replicas": "two"}, release_name="r", namespace="ns", kube_version="1.35")
    with pytest.raises(ValueError, match="requires kubeVersion"):
        helm_render.render(chart, {}, release_name="r", namespace="ns", kube_version="1.33")
