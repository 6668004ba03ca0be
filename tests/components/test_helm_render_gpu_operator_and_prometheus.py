"""The GPU Operator and kube-prometheus-stack, rendered by Helm's engine with the program's values:
where their pods land and what the operator and Prometheus are told.

Both charts are packaged into the chart cache as published (docs/charts.md):
the GPU Operator stamped with its release version, kube-prometheus-stack with the
subchart versions its Chart.yaml names. Schema checks of every core object run in
``tests/components/test_helm_render.py``; custom resources (ClusterPolicy, Prometheus, ...) are listed here.
A chart not in the cache skips with the reason printed (``pytest -rs``).
"""

from __future__ import annotations

from typing import Any

import pytest

from components import contract, versions
from components.specs.observability import DASHBOARD_LABEL
from tests.components.test_helm_render import CUSTOM_KINDS, landing, nodes, purpose_of, rendered
from tests.conftest import ROOMY_GPU_BUDGET, plan_with, read_stack_config
from tests.support import helm_render
from tests.support.needs import missing

#: The ClusterPolicy fields of the operands that must reach GPU nodes, with the
#: ``nvidia.com/gpu.deploy.*`` label each operand's DaemonSet selects on (gpu-operator
#: controllers/state_manager.go and assets/state-*/0500_daemonset.yaml).
OPERANDS = {
    "devicePlugin": "device-plugin",
    "dcgmExporter": "dcgm-exporter",
    "gfd": "gpu-feature-discovery",
    "migManager": "mig-manager",
    "validator": "operator-validator",
}
#: Labels the operator puts on every GPU node (nvidia.com/gpu.present=true) that does not carry
#: them yet; a pool opts out of an operand by carrying the label as "false".
OPERATOR_DEFAULT_DEPLOY = ["driver", "container-toolkit", *OPERANDS.values(), "dcgm", "node-status-exporter"]


@pytest.fixture(params=["dev", "prod"])
def stack_plan(request, dev_plan, prod_plan):
    return {"dev": dev_plan, "prod": prod_plan}[request.param]


@pytest.fixture(scope="module")
def operator_dra_plan():
    """dev switched to the GPU Operator with a DRA pool beside its inference pool: the operator's
    device plugin must stay off the DRA pool while its other operands still reach it."""
    inference = read_stack_config("dev")["llm-platform:gpuPools"][0]
    dra = {**inference, "name": "dra", "purpose": "gpu-dra", "capacityType": "ON_DEMAND", "instanceTypes": ["g6e.xlarge"],
           "scaling": {"minSize": 1, "desiredSize": 1, "maxSize": 2}}
    return plan_with("dev", gpuPools=[inference, dra], gpuSoftware={"provider": "gpu-operator", "dcgmExporter": True},
                     gpuBudget=ROOMY_GPU_BUDGET)


@pytest.fixture(params=["prod", "dev+gpu-operator+dra"])
def operator_plan(request, prod_plan, operator_dra_plan):
    """The plans that run the GPU Operator (dev's own plan uses the standalone device plugin)."""
    return {"prod": prod_plan, "dev+gpu-operator+dra": operator_dra_plan}[request.param]


def _system_only(plan, obj) -> None:
    where = landing(plan, obj)
    assert where and {purpose_of(plan, n) for n in where} == {contract.SYSTEM_PURPOSE}, (obj["metadata"]["name"], where)


def _gpu_nodes(plan) -> set[str]:
    return {n for n in nodes(plan) if purpose_of(plan, n) in contract.GPU_PURPOSES}


# -- NVIDIA GPU Operator (prod runs it; dev uses the standalone device plugin) ---------------------

def _operator_objects(plan) -> list[dict[str, Any]]:
    return rendered(plan, versions.NVIDIA_GPU_OPERATOR)


def _cluster_policy(objects) -> dict[str, Any]:
    (policy,) = [o for o in objects if o["kind"] == "ClusterPolicy"]
    return policy["spec"]


def test_gpu_operator_renders_its_cluster_policy_and_the_nfd_subchart_at_the_pinned_versions(operator_plan):
    objects = _operator_objects(operator_plan)
    custom = sorted({o["kind"] for o in objects if not o["apiVersion"].startswith(("v1", "apps/", "batch/", "rbac.", "policy/"))})
    assert custom == ["ClusterPolicy"]
    charts = {o["metadata"].get("labels", {}).get("helm.sh/chart") for o in objects} - {None}
    assert charts == {"gpu-operator-v26.7.0", "node-feature-discovery-0.19.0"}
    assert _cluster_policy(objects)["daemonsets"]["labels"]["helm.sh/chart"] == "gpu-operator-v26.7.0"


def test_gpu_operator_controllers_land_on_the_system_pool(operator_plan):
    objects = _operator_objects(operator_plan)
    controllers = [o for o in objects if o["kind"] in ("Deployment", "Job")]
    assert {o["metadata"]["name"] for o in controllers if o["kind"] == "Deployment"} == {
        "gpu-operator", "gpu-operator-node-feature-discovery-master", "gpu-operator-node-feature-discovery-gc",
    }
    for obj in controllers:
        _system_only(operator_plan, obj)


def test_nfd_worker_reaches_every_gpu_pool(operator_plan):
    (worker,) = [o for o in _operator_objects(operator_plan) if o["kind"] == "DaemonSet"]
    assert worker["metadata"]["name"] == "gpu-operator-node-feature-discovery-worker"
    gpu = _gpu_nodes(operator_plan)
    assert gpu and gpu <= landing(operator_plan, worker)


def _operand_pod(spec: dict[str, Any], operand: str) -> dict[str, Any]:
    """The pod spec the operator gives an operand's DaemonSet: ClusterPolicy daemonsets
    tolerations and priority, selecting nodes on ``nvidia.com/gpu.deploy.<operand>=true``."""
    return {
        "nodeSelector": {f"nvidia.com/gpu.deploy.{operand}": "true"},
        "tolerations": spec["daemonsets"].get("tolerations", []),
    }


def _as_labelled_by_the_operator(labels: dict[str, str]) -> dict[str, str]:
    if labels.get("nvidia.com/gpu.present") != "true":
        return labels
    return {**{f"nvidia.com/gpu.deploy.{o}": "true" for o in OPERATOR_DEFAULT_DEPLOY}, **labels}


def test_operator_operands_reach_gpu_pools_through_their_taints(operator_plan):
    spec = _cluster_policy(_operator_objects(operator_plan))
    assert spec["daemonsets"]["priorityClassName"] == "system-node-critical"
    gpu = _gpu_nodes(operator_plan)
    assert gpu
    for field, operand in OPERANDS.items():
        assert spec[field].get("enabled", True) is True, field
        pod = _operand_pod(spec, operand)
        where = {
            n for n, (labels, taints) in nodes(operator_plan).items()
            if helm_render.schedulable_on(pod, _as_labelled_by_the_operator(labels), taints)
        }
        wanted = {n for n in gpu if nodes(operator_plan)[n][0].get(f"nvidia.com/gpu.deploy.{operand}") != "false"}
        assert where == wanted, (operand, where, wanted)
        if operand == "mig-manager":  # MIG-capable instances land through Karpenter
            assert wanted == {n for n in gpu if n.startswith("karpenter/")}
        elif operand == "device-plugin":  # a DRA driver owns DRA pools' GPUs; Auto Mode runs its own
            auto = {n for n in gpu if nodes(operator_plan)[n][0].get("eks.amazonaws.com/compute-type") == "auto"}
            assert wanted == {n for n in gpu if purpose_of(operator_plan, n) != contract.GPU_DRA_PURPOSE} - auto
        else:
            assert wanted == gpu
        # every taint of every GPU pool is tolerated (GPU taint, training/DRA workload taint)
        for n in gpu:
            labels, taints = nodes(operator_plan)[n]
            assert all(helm_render._tolerates(pod["tolerations"], t) for t in taints), (operand, n, taints)


def test_driver_and_toolkit_stay_off_where_the_ami_ships_them(operator_plan):
    spec = _cluster_policy(_operator_objects(operator_plan))
    # No hybrid nodes in either plan: the operator installs neither, cluster-wide ...
    assert spec["driver"]["enabled"] is False and spec["toolkit"]["enabled"] is False
    # ... and every cloud GPU pool opts out by label too, so enabling it for hybrid nodes keeps them off.
    for n in _gpu_nodes(operator_plan):
        labels = nodes(operator_plan)[n][0]
        assert labels.get("nvidia.com/gpu.deploy.driver") == "false", n
        assert labels.get("nvidia.com/gpu.deploy.container-toolkit") == "false", n


# -- kube-prometheus-stack (dev and prod) ------------------------------------------------------------

def _stack_objects(plan) -> list[dict[str, Any]]:
    return rendered(plan, versions.KUBE_PROMETHEUS_STACK)


def _one(objects, kind: str) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind]
    return found


def test_prometheus_stack_renders_its_subcharts_at_the_pinned_versions(stack_plan):
    objects = _stack_objects(stack_plan)
    # kube-prometheus-stack's own templates label ``chart``, its subcharts ``helm.sh/chart``
    charts = {(o["metadata"].get("labels") or {}).get(k) for o in objects for k in ("helm.sh/chart", "chart")} - {None}
    assert {"kube-prometheus-stack-88.5.3", "grafana-12.11.1", "kube-state-metrics-8.4.0", "prometheus-node-exporter-4.56.1"} <= charts
    assert not any(c.startswith("prometheus-windows-exporter") for c in charts), "no Windows nodes: exporter off"
    custom = sorted({o["kind"] for o in objects if o["apiVersion"].startswith("monitoring.coreos.com/")})
    assert custom == ["Alertmanager", "Prometheus", "PrometheusRule", "ServiceMonitor"]


def test_prometheus_stack_controllers_and_servers_land_on_the_system_pool(stack_plan):
    objects = _stack_objects(stack_plan)
    names = {o["metadata"]["name"] for o in objects if o["kind"] == "Deployment"}
    assert names == {"kube-prometheus-stack-operator", "kube-prometheus-stack-grafana", "kube-prometheus-stack-kube-state-metrics"}
    for obj in objects:
        if obj["kind"] in ("Deployment", "Job", "StatefulSet"):
            _system_only(stack_plan, obj)
    # Prometheus and Alertmanager pods are made by the operator from their CR's scheduling fields.
    for kind in ("Prometheus", "Alertmanager"):
        spec = _one(objects, kind)["spec"]
        pod = {k: spec[k] for k in ("nodeSelector", "tolerations", "affinity") if k in spec}
        _system_only(stack_plan, {"kind": "DaemonSet", "metadata": {"name": kind}, "spec": {"template": {"spec": pod}}})


def test_node_exporter_runs_on_every_node_including_tainted_gpu_nodes(stack_plan):
    (daemonset,) = [o for o in _stack_objects(stack_plan) if o["kind"] == "DaemonSet"]
    assert daemonset["metadata"]["name"] == "kube-prometheus-stack-prometheus-node-exporter"
    assert landing(stack_plan, daemonset) == set(nodes(stack_plan))
    assert any(taints for n, (_, taints) in nodes(stack_plan).items() if n in _gpu_nodes(stack_plan))


def test_prometheus_carries_the_programs_storage_retention_and_replicas(stack_plan):
    settings = read_stack_config(stack_plan.stack)["llm-platform:observability"]["prometheus"]
    objects = _stack_objects(stack_plan)
    spec = _one(objects, "Prometheus")["spec"]
    assert spec["replicas"] == settings["replicas"]
    assert spec["retention"] == f"{settings['retentionDays']}d"
    assert spec["retentionSize"] == f"{int(settings['volumeSizeGib'] * 0.85)}GB"
    claim = spec["storage"]["volumeClaimTemplate"]["spec"]
    assert claim["resources"]["requests"]["storage"] == f"{settings['volumeSizeGib']}Gi"
    assert claim["storageClassName"] == "gp3-encrypted" and claim["accessModes"] == ["ReadWriteOnce"]
    assert spec["alerting"]["alertmanagers"], "Prometheus sends alerts to the release's Alertmanager"
    assert _one(objects, "Alertmanager")["spec"]["replicas"] == min(settings["replicas"], 3)
    # The program's ServiceMonitors/PodMonitors/rules outside the release are selected too.
    for selector in ("serviceMonitorSelector", "podMonitorSelector", "ruleSelector"):
        assert spec[selector] == {}, selector


def test_grafana_dashboard_sidecar_picks_up_the_programs_dashboard_config_maps(stack_plan):
    objects = _stack_objects(stack_plan)
    grafana = next(o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"].endswith("-grafana"))
    pod = grafana["spec"]["template"]["spec"]
    sidecars = [c for c in pod["containers"] if c["name"] == "grafana-sc-dashboard"]
    assert sidecars, [c["name"] for c in pod["containers"]]
    env = {e["name"]: e.get("value") for e in sidecars[0]["env"]}
    assert env["LABEL"] == DASHBOARD_LABEL and env["LABEL_VALUE"] == "1" and env["RESOURCE"] in ("both", "configmap")
    release_namespace = next(o for o in objects if o["kind"] == "Deployment")["metadata"]["namespace"]
    watched = env.get("NAMESPACE")
    config_maps = [
        r for r in stack_plan.of_type("kubernetes:core/v1:ConfigMap")
        if DASHBOARD_LABEL in (r.inputs.get("metadata", {}).get("labels") or {})
    ]
    assert config_maps
    for cm in config_maps:
        metadata = cm.inputs["metadata"]
        assert metadata["labels"][DASHBOARD_LABEL] == env["LABEL_VALUE"], metadata["name"]
        assert watched == "ALL" or metadata["namespace"] in ((watched or release_namespace).split(",")), (metadata, watched)


# -- custom resources against the CRDs the charts ship -----------------------------------------------

def _custom_resources_fit_their_crds(plan, chart: versions.HelmChart, probe_kind: str) -> None:
    objects = rendered(plan, chart)
    schemas = helm_render.chart_crd_schemas(chart)
    custom = [o for o in objects if o["kind"] in CUSTOM_KINDS]
    assert custom
    failures = {f"{o['kind']}/{o['metadata']['name']}": e for o in custom if (e := helm_render.custom_resource_errors(o, schemas))}
    assert failures == {}
    # the check is strict: a misspelt field the API server would prune is an error
    (target,) = [o for o in custom if o["kind"] == probe_kind]
    wrong = {**target, "spec": {**target["spec"], "retentionDays": 35}}
    assert any("retentionDays" in e for e in helm_render.custom_resource_errors(wrong, schemas))


def test_gpu_operator_cluster_policy_fits_the_charts_own_crd(operator_plan):
    _custom_resources_fit_their_crds(operator_plan, versions.NVIDIA_GPU_OPERATOR, "ClusterPolicy")


def test_prometheus_stack_custom_resources_fit_the_charts_own_crds(stack_plan):
    _custom_resources_fit_their_crds(stack_plan, versions.KUBE_PROMETHEUS_STACK, "Prometheus")


def test_the_programs_own_monitoring_resources_fit_the_prometheus_operator_crds(stack_plan):
    reason = helm_render.missing_reason(versions.KUBE_PROMETHEUS_STACK)
    if reason:
        missing(reason)
    schemas = helm_render.chart_crd_schemas(versions.KUBE_PROMETHEUS_STACK)
    resources = [r for r in stack_plan.resources if r.type.startswith("kubernetes:monitoring.coreos.com/")]
    assert resources
    for resource in resources:
        group_version, kind = resource.type.removeprefix("kubernetes:").rsplit(":", 1)
        obj = {"apiVersion": group_version, "kind": kind, **resource.inputs}
        assert helm_render.custom_resource_errors(obj, schemas) == [], resource.name


# -- the cache tool's stamping and dependency vendoring (no chart cache needed: runs in CI) ----------

def _chart(path, name: str, version: str, dependencies: str = "", template: str = "") -> None:
    (path / "templates").mkdir(parents=True)
    (path / "Chart.yaml").write_text(f"apiVersion: v2\nname: {name}\nversion: {version}\nappVersion: main-latest\n{dependencies}")
    (path / "templates" / "cm.yaml").write_text(
        template or "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Chart.Name }}-{{ .Chart.Version }}-{{ .Chart.AppVersion }}\n"
    )


def test_cache_tool_stamps_the_release_and_vendors_named_dependencies_only(tmp_path, monkeypatch, capsys):
    if helm_render.helm is None:
        missing("helm-python-sdk is not installed (tests/requirements-helm.txt; make test installs it)")
    monkeypatch.setenv(helm_render.CACHE_ENV, str(tmp_path / "cache"))
    parent = tmp_path / "src" / "parent"
    _chart(parent, "parent", "v1.0.0-devel", (
        "dependencies:\n"
        "  - {name: exporter, version: '0.12.*', repository: https://example.invalid, condition: exporter.enabled}\n"
        "  - {name: inline, version: 0.0.0}\n"
    ))
    _chart(parent / "charts" / "inline", "inline", "0.0.0")
    _chart(tmp_path / "exporter-0.12.8", "exporter", "0.12.8")
    _chart(tmp_path / "exporter-0.13.0", "exporter", "0.13.0")
    _chart(tmp_path / "stranger", "stranger", "1.0.0")
    source = (parent / "Chart.yaml").read_text()

    def cache(*extra):
        return helm_render.main(["cache", str(parent), "--stamp-version", "v2.0.0", "--stamp-app-version", "v2.0.0", *extra])

    for extra, message in [
        ((), "needs dependency exporter 0.12.*"),
        (("--dependency", str(tmp_path / "exporter-0.13.0")), "wants exporter 0.12.*, not 0.13.0"),
        (("--dependency", str(tmp_path / "stranger")), "names no dependency stranger"),
    ]:
        with pytest.raises(SystemExit, match=message):
            cache(*extra)
    assert not (tmp_path / "cache" / "parent-v2.0.0.tgz").exists()

    assert cache("--dependency", str(tmp_path / "exporter-0.12.8")) == 0
    assert (parent / "Chart.yaml").read_text() == source, "the checkout is never edited"
    chart = versions.HelmChart(chart="parent", version="v2.0.0", repository="https://example.invalid")
    names = {o["metadata"]["name"] for o in helm_render.render(chart, {}, release_name="r", namespace="n", kube_version="1.35")}
    assert names == {"parent-v2.0.0-v2.0.0", "inline-0.0.0-main-latest", "exporter-0.12.8-main-latest"}
    off = helm_render.render(chart, {"exporter": {"enabled": False}}, release_name="r", namespace="n", kube_version="1.35")
    assert {o["metadata"]["name"] for o in off} == names - {"exporter-0.12.8-main-latest"}
    # without the stamp flags nothing is stamped: the devel version goes into the cache as it is
    capsys.readouterr()
    assert helm_render.main(["cache", str(parent), "--dependency", str(tmp_path / "exporter-0.12.8")]) == 0
    assert capsys.readouterr().out.strip().endswith("parent-v1.0.0-devel.tgz")
