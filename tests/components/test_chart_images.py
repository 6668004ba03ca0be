"""Every image the installed charts would run is a pin of components/versions.py.

Each chart of the dev and prod plans (and dev with a DRA pool, the only plan that installs the DRA
driver) is rendered by Helm's engine with the program's values; every image reference in the output
is collected: containers and initContainers of every pod template, image flags and ``*_IMAGE``
variables a controller passes on (prometheus-operator's config reloader and Thanos images, the GPU
Operator's validator and driver manager), the ``image`` of the Prometheus and Alertmanager resources,
and the ``repository``/``image``/``version`` triples of the GPU Operator's ClusterPolicy. Each must equal
a pin's reference, digest included, so no chart default reaches a cluster unseen. The KEDA,
kube-prometheus-stack and GPU Operator lists are written out below as the spec (the charts' defaults
read from their values.yaml / appVersion in ../shared/charts).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from automation.cli import main
from components import versions
from components.capacity_check import parse_settings
from components.serving.event_autoscaler import keda_values
from components.specs.gpu_software import gpu_operator_values
from components.specs.observability import prometheus_stack_values
from tests.components.test_helm_render import RENDERED, kube_version, release_of
from tests.conftest import ROOMY_GPU_BUDGET, plan_with, read_stack_config
from tests.support import helm_render
from tests.support.needs import missing

PINNED = {str(value) for value in vars(versions).values() if isinstance(value, versions.Image)}
#: Operator flags whose value is an image the operator starts later.
IMAGE_FLAGS = ("--prometheus-config-reloader=", "--thanos-default-base-image=",
               "--prometheus-default-base-image=", "--alertmanager-default-base-image=")

KEDA_IMAGES = {
    "ghcr.io/kedacore/keda:2.20.2",
    "ghcr.io/kedacore/keda-metrics-apiserver:2.20.2",
    "ghcr.io/kedacore/keda-admission-webhooks:2.20.2",
}
PROMETHEUS_STACK_IMAGES = {
    "quay.io/prometheus-operator/prometheus-operator:v0.93.1",
    "quay.io/prometheus-operator/prometheus-config-reloader:v0.93.1",
    "quay.io/thanos/thanos:v0.42.4",
    "quay.io/prometheus/prometheus:v3.14.0-distroless@sha256:50c707e96da5ade383cb1707790576480485e93de06aa60ad8802cb5f744bd0a",
    "quay.io/prometheus/alertmanager:v0.34.0@sha256:690c7b525f4367aa91f73e2f91c632206d32e97c6384bdbf2fb7a861b420340d",
    "ghcr.io/jkroepke/kube-webhook-certgen:1.8.7",
    "registry.k8s.io/kube-state-metrics/kube-state-metrics:v2.20.0@sha256:42cfe3723a5f058171c627537fb57a3ea0f26e4380fa18555a95cb1a1b4cfc5b",
    "quay.io/prometheus/node-exporter:v1.12.1-distroless",
    "docker.io/grafana/grafana:13.2.0@sha256:3fd54ae1214669f8355f065ec9f6445d5279a3d77095ab048ca045685272429b",
    "quay.io/kiwigrid/k8s-sidecar:2.10.1",
}
GPU_OPERATOR_IMAGES = {
    "nvcr.io/nvidia/gpu-operator:v26.7.0",
    "nvcr.io/nvidia/driver:595.91.07",
    "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.12.0",
    "nvcr.io/nvidia/k8s/container-toolkit:v1.20.0",
    "nvcr.io/nvidia/k8s-device-plugin:v0.20.0@sha256:a61ba9fd8efb82f3a79f877f7580e02c1e8e7593f62473644bc9c79e315c3312",
    "nvcr.io/nvidia/cloud-native/dcgm:4.6.0-1-ubuntu24.04",
    "nvcr.io/nvidia/k8s/dcgm-exporter:4.5.3-4.8.2",
    "nvcr.io/nvidia/cloud-native/k8s-mig-manager:v0.15.0",
    "nvcr.io/nvidia/cloud-native/nvidia-fs:2.29.4",
    "nvcr.io/nvidia/cloud-native/gdrdrv:v2.6",
    "nvcr.io/nvidia/cloud-native/vgpu-device-manager:v0.5.0",
    "nvcr.io/nvidia/kubevirt-gpu-device-plugin:v1.6.0",
    "nvcr.io/nvidia/cloud-native/nvidia-sandbox-device-plugin:v0.0.5",
    "nvcr.io/nvidia/cloud-native/k8s-cc-manager:v0.4.3",
    "registry.k8s.io/nfd/node-feature-discovery:v0.19.0",
}


def _container_images(spec: dict[str, Any]) -> list[str]:
    found = []
    for key in ("initContainers", "containers"):
        for container in spec.get(key) or []:
            found.append(container["image"])
            for arg in [*(container.get("args") or []), *(container.get("command") or [])]:
                found.extend(arg.split("=", 1)[1] for flag in IMAGE_FLAGS if arg.startswith(flag))
            found.extend(env["value"] for env in container.get("env") or []
                         if env["name"].endswith("_IMAGE") and "value" in env)
    return found


def _cluster_policy_images(node: Any, unset: list[str], path: str = "spec") -> list[str]:
    """``repository/image:version`` of every operand (``@version`` for a bare digest, as the operator's
    ``ImagePath`` builds it); an operand with neither repository nor version has no image to pull."""
    found: list[str] = []
    if isinstance(node, dict):
        if isinstance(node.get("image"), str):
            repository, version = node.get("repository"), node.get("version")
            if not repository and not version:
                unset.append(path)
            else:
                found.append(f"{repository}/{node['image']}" + ("@" if version.startswith("sha256:") else ":") + version)
        for key, value in node.items():
            found.extend(_cluster_policy_images(value, unset, f"{path}.{key}"))
    return found


def image_references(objects: list[dict[str, Any]]) -> tuple[set[str], list[str]]:
    """Every image reference in rendered ``objects``, and the ClusterPolicy operands without one."""
    found: list[str] = []
    unset: list[str] = []
    for obj in objects:
        spec = helm_render.pod_spec_of(obj) or (obj.get("spec") if obj.get("kind") == "Pod" else None)
        if spec is not None:
            found.extend(_container_images(spec))
        if obj.get("kind") in ("Prometheus", "Alertmanager"):
            found.append(obj["spec"]["image"])
            if isinstance(obj["spec"].get("thanos"), dict) and obj["spec"]["thanos"].get("image"):
                found.append(obj["spec"]["thanos"]["image"])
            found.extend(_container_images(obj["spec"]))
        if obj.get("kind") == "ClusterPolicy":
            found.extend(_cluster_policy_images(obj["spec"], unset))
    return set(found), unset


def _render(plan, chart: versions.HelmChart) -> list[dict[str, Any]] | None:
    reason = helm_render.missing_reason(chart)
    if reason:
        missing(reason)
    inputs = release_of(plan, chart)
    if inputs is None:
        return None
    return helm_render.render(chart, inputs.get("values", {}), release_name=inputs["name"],
                              namespace=inputs["namespace"], kube_version=kube_version(plan))


@pytest.fixture(scope="module")
def dev_dra_plan():
    """dev with a DRA pool beside its inference pool: the only plan that installs the DRA driver."""
    inference = read_stack_config("dev")["llm-platform:gpuPools"][0]
    dra = {**inference, "name": "dra", "purpose": "gpu-dra", "capacityType": "ON_DEMAND", "instanceTypes": ["g6e.xlarge"],
           "scaling": {"minSize": 1, "desiredSize": 1, "maxSize": 2}}
    return plan_with("dev", gpuPools=[inference, dra], gpuBudget=ROOMY_GPU_BUDGET)


@pytest.fixture(params=["dev", "prod", "dev+dra"])
def plan(request, dev_plan, prod_plan, dev_dra_plan):
    return {"dev": dev_plan, "prod": prod_plan, "dev+dra": dev_dra_plan}[request.param]


def test_every_rendered_image_is_a_pin_of_versions(plan):
    rendered_charts = 0
    for chart in RENDERED:
        objects = _render(plan, chart)
        if objects is None:
            continue
        rendered_charts += 1
        references, _ = image_references(objects)
        assert not references - PINNED, (chart.chart, sorted(references - PINNED))
    assert rendered_charts >= 6


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_keda_and_the_prometheus_stack_run_exactly_the_pinned_images(stack, dev_plan, prod_plan):
    plan = {"dev": dev_plan, "prod": prod_plan}[stack]
    assert image_references(_render(plan, versions.KEDA))[0] == KEDA_IMAGES
    assert image_references(_render(plan, versions.KUBE_PROMETHEUS_STACK))[0] == PROMETHEUS_STACK_IMAGES


def test_the_gpu_operators_cluster_policy_names_only_pinned_images(prod_plan):
    references, unset = image_references(_render(prod_plan, versions.NVIDIA_GPU_OPERATOR))
    assert references == GPU_OPERATOR_IMAGES
    # NVIDIA ships no vGPU manager image (its licensees build one); the operand is off.
    (policy,) = [o for o in _render(prod_plan, versions.NVIDIA_GPU_OPERATOR) if o["kind"] == "ClusterPolicy"]
    assert unset == ["spec.vgpuManager"] and policy["spec"]["vgpuManager"]["enabled"] is False


def test_the_grafana_test_pod_is_not_rendered(dev_plan):
    kinds = {(o["kind"], o["metadata"]["name"]) for o in _render(dev_plan, versions.KUBE_PROMETHEUS_STACK)}
    assert ("Pod", "kube-prometheus-stack-grafana-test") not in kinds


# -- a digest reaches the rendered reference in each chart's own spelling ---------------------------

DIGEST = "sha256:" + "1" * 64


def test_digests_render_as_full_references_in_each_charts_spelling(monkeypatch):
    """Each chart takes a digest differently (kube-prometheus-stack and grafana: bare hex in ``sha``;
    kube-state-metrics: the whole digest in ``sha``; node-exporter: ``digest``; KEDA: ``tag@digest``;
    the GPU Operator: ``version``): with every pin given a digest, each rendered reference is the pin's
    ``repo:tag@sha256:...`` and the Prometheus and Alertmanager versions stay their tags."""
    for chart in (versions.KEDA, versions.KUBE_PROMETHEUS_STACK, versions.NVIDIA_GPU_OPERATOR):
        reason = helm_render.missing_reason(chart)
        if reason:
            missing(reason)
    for name, value in list(vars(versions).items()):
        if isinstance(value, versions.Image) and value.digest is None:
            monkeypatch.setattr(versions, name, versions.Image(value.repository, value.tag, DIGEST))
    prometheus = parse_settings(read_stack_config("dev")).observability.prometheus
    keda = helm_render.render(versions.KEDA, keda_values(), release_name="keda", namespace="keda", kube_version="1.35")
    stack = helm_render.render(versions.KUBE_PROMETHEUS_STACK, prometheus_stack_values(prometheus),
                               release_name="kube-prometheus-stack", namespace="monitoring", kube_version="1.35")
    assert image_references(keda)[0] == {f"{ref}@{DIGEST}" for ref in KEDA_IMAGES}
    assert image_references(stack)[0] == {ref if "@" in ref else f"{ref}@{DIGEST}" for ref in PROMETHEUS_STACK_IMAGES}
    versions_of = {o["kind"]: o["spec"]["version"] for o in stack if o["kind"] in ("Prometheus", "Alertmanager")}
    assert versions_of == {"Prometheus": "v3.14.0-distroless", "Alertmanager": "v0.34.0"}
    # The driver is left out: the operator appends the node's OS to its version, so a digest there
    # would not name the image pulled (see versions.GPU_OPERATOR_DRIVER_IMAGE).
    operator = helm_render.render(versions.NVIDIA_GPU_OPERATOR, gpu_operator_values(install_driver=False),
                                  release_name="gpu-operator", namespace="gpu-operator", kube_version="1.35")
    expected = {ref if "@" in ref else f"{ref}@{DIGEST}" for ref in GPU_OPERATOR_IMAGES}
    assert image_references(operator)[0] == expected


# -- the resolver sees every one of them -------------------------------------------------------------

def test_images_list_shows_every_chart_default_pin(capsys):
    assert main(["images", "list", "--output", "json"]) == 0
    listed = {(p["repository"], p["tag"]) for p in json.loads(capsys.readouterr().out)}
    for reference in KEDA_IMAGES | PROMETHEUS_STACK_IMAGES | GPU_OPERATOR_IMAGES:
        name, _, tag = reference.split("@")[0].rpartition(":")
        assert (name, tag) in listed, reference
