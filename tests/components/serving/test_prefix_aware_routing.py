"""Prefix-aware routing on a dev copy: what the program emits, and the picker chart rendered by Helm's
engine with the program's values (objects valid against Kubernetes' and the shipped CRDs' schemas, Pod
Security ``restricted`` after the program's transform, every pod on the system pool, and the capacity
table's picker equal to the render)."""

from __future__ import annotations

import copy
import io
import json
from contextlib import redirect_stdout

import kubernetes_validate
import pulumi
import pytest
import yaml

from automation.cli import print_check
from automation.offline.check import run_check
from automation.paths import ROOT
from automation.stacks import read_stack_config
from components import versions
from components.capacity_check import parse_settings
from components.serving.routing import restricted_picker_pods
from components.specs import routing
from policies.capacity.charts import release_deployments
from policies.capacity.kinds import DEPLOYMENT
from tests.components.test_helm_render import landing, purpose_of
from tests.conftest import plan_with
from tests.support import crd_schema, helm_render, pod_security
from tests.support.litellm_proxy import emitted
from tests.support.needs import missing

CHART_V4 = "kubernetes:helm.sh/v4:Chart"
ROUTED = "llama-3-1-8b-instruct"


def routed_serving(routing_mode: str = "prefix-aware") -> dict:
    serving = copy.deepcopy(read_stack_config("dev")["llm-platform:serving"])
    serving["tiers"][0]["routing"] = routing_mode  # interactive
    return serving


@pytest.fixture(scope="module")
def routed_plan():
    return plan_with("dev", serving=routed_serving())


def pickers(plan) -> list:
    return [r for r in plan.of_type(CHART_V4) if r.inputs["chart"].endswith("/llm-d-router-standalone")]


def test_service_routing_is_the_default_and_emits_no_picker(dev_plan):
    settings = parse_settings(read_stack_config("dev"))
    assert [t.routing for t in settings.serving.tiers] == ["service", "service"]
    assert pickers(dev_plan) == []
    assert dev_plan.of_type("kubernetes:yaml/v2:ConfigFile") == []


def test_one_pinned_picker_per_routed_model_in_its_tier_namespace(routed_plan):
    (picker,) = pickers(routed_plan)
    assert picker.inputs["chart"] == "oci://ghcr.io/llm-d/charts/llm-d-router-standalone"
    assert picker.inputs["version"] == "v0.10.0"
    assert (picker.inputs["name"], picker.inputs["namespace"]) == (ROUTED, "serving-interactive")
    pool = picker.inputs["values"]["router"]["modelServers"]
    assert pool["matchLabels"] == {"app.kubernetes.io/name": "vllm", "app.kubernetes.io/instance": ROUTED}
    assert pool["targetPorts"] == [{"number": 8000}]


def test_the_crds_come_from_the_pinned_release_assets_in_order(routed_plan):
    files = [r.inputs["file"] for r in routed_plan.of_type("kubernetes:yaml/v2:ConfigFile")]
    assert files == [
        "https://github.com/kubernetes-sigs/gateway-api/releases/download/v1.6.1/standard-install.yaml",
        "https://github.com/kubernetes-sigs/gateway-api-inference-extension/releases/download/v1.6.0/v1-manifests.yaml",
        "https://github.com/llm-d/llm-d-router/releases/download/v0.10.0/manifests.yaml",
    ]
    for manifest in versions.ROUTING_CRDS:
        assert helm_render.manifest_path(manifest).is_file() or helm_render.SHARED_MANIFESTS.exists() is False


def test_the_gateway_sends_the_routed_model_to_its_picker_and_others_to_their_service(routed_plan):
    routes = {r["model_name"]: r["litellm_params"] for r in emitted(routed_plan)["config"]["model_list"]}
    assert routes[ROUTED]["api_base"] == "http://llama-3-1-8b-instruct-epp.serving-interactive.svc.cluster.local:8081/v1"
    assert routes["qwen2-5-7b-instruct"]["api_base"] == "http://qwen2-5-7b-instruct.serving-batch.svc.cluster.local:8000/v1"
    fallbacks = emitted(routed_plan)["config"]["router_settings"]["fallbacks"]
    assert {ROUTED: ["us.anthropic.claude-haiku-4-5-20251001-v1:0"]} in fallbacks, "the Bedrock cascade stays"


# --- the chart, rendered by Helm's engine with the program's values --------------------------------

@pytest.fixture(scope="module")
def rendered(routed_plan):
    chart = versions.LLM_D_ROUTER_STANDALONE
    reason = helm_render.missing_reason(chart)
    if reason:
        missing(reason)
    (picker,) = pickers(routed_plan)
    return helm_render.render(chart, picker.inputs["values"], release_name=picker.inputs["name"],
                              namespace=picker.inputs["namespace"], kube_version="1.35")


def test_the_chart_renders_one_pool_picker_and_service(rendered):
    kinds = sorted((o["kind"], o["metadata"]["name"]) for o in rendered)
    assert ("InferencePool", ROUTED) in kinds
    assert ("Deployment", "llama-3-1-8b-instruct-epp") in kinds
    assert ("Service", "llama-3-1-8b-instruct-epp") in kinds
    assert ("ConfigMap", "llama-3-1-8b-instruct-envoy") in kinds, "a per-model Envoy config, not the preset's shared name"
    (service,) = [o for o in rendered if o["kind"] == "Service"]
    assert {"name": "http", "port": 8081, "protocol": "TCP", "targetPort": 8081} in service["spec"]["ports"]
    assert service["spec"]["selector"] == {"llm-d-router-gateway": "llama-3-1-8b-instruct-epp"}


def test_core_objects_pass_strict_kubernetes_schemas(rendered):
    failures = []
    for obj in rendered:
        if obj["kind"] == "InferencePool":
            continue
        try:
            kubernetes_validate.validate(obj, "1.35", strict=True)
        except kubernetes_validate.ValidationError as exc:
            failures.append(f"{obj['kind']}/{obj['metadata']['name']}: {exc.message}")
    assert not failures, failures


def test_the_inference_pool_fits_the_shipped_crd(rendered):
    path = helm_render.manifest_path(versions.INFERENCE_POOL_CRDS)
    if not path.is_file():
        missing(f"{path} is missing (../shared/manifests, its README)")
    schemas = helm_render.crd_schemas_of(path.read_text())
    (pool,) = [o for o in rendered if o["kind"] == "InferencePool"]
    assert helm_render.custom_resource_errors(pool, schemas) == []
    assert pool["spec"]["endpointPickerRef"] == {"name": "llama-3-1-8b-instruct-epp", "port": {"number": 9002},
                                                 "failureMode": "FailClose"}
    broken = {**pool, "spec": {**pool["spec"], "targetPorts": [{"number": 70000}]}}
    assert helm_render.custom_resource_errors(broken, schemas), "the schema check can fail"
    # The CRD's CEL rules as the API server runs them: endpointPickerRef needs a port for a Service, target
    # ports are unique.
    schema = schemas[("inference.networking.k8s.io", "v1", "InferencePool")]
    outcome = crd_schema.validate_against(pool, schema)
    assert outcome.ok and outcome.rules_evaluated == 2 and outcome.rules_not_evaluated == [], outcome
    twice = {**pool, "spec": {**pool["spec"], "targetPorts": [{"number": 8000}, {"number": 8000}]}}
    assert crd_schema.validate_against(twice, schema).rule_failures


def test_the_chart_alone_fails_restricted_and_the_programs_transform_passes_it(rendered):
    (deployment,) = [o for o in rendered if o["kind"] == "Deployment"]
    before = pod_security.violations(deployment["spec"]["template"])
    assert "allow-privilege-escalation" in before and "capabilities" in before
    patched = routing.restricted_pod_security(deployment)
    assert patched is not None
    assert pod_security.violations(patched["spec"]["template"]) == {}
    assert patched["spec"]["template"]["spec"]["securityContext"]["runAsUser"] == 65532
    others = [o for o in rendered if o["kind"] != "Deployment"]
    assert all(routing.restricted_pod_security(o) is None for o in others)


def test_picker_pods_land_on_the_system_pool_only(routed_plan, rendered):
    (deployment,) = [o for o in rendered if o["kind"] == "Deployment"]
    where = landing(routed_plan, deployment)
    assert where and {purpose_of(routed_plan, n) for n in where} == {"system"}, where


def test_the_capacity_table_counts_what_the_chart_renders(routed_plan, rendered):
    (picker,) = pickers(routed_plan)
    (counted,) = release_deployments("llm-d-router-standalone", "v0.10.0", picker.inputs["values"],
                                     release=ROUTED, namespace="serving-interactive")
    (deployment,) = [o for o in rendered if o["kind"] == "Deployment"]
    assert counted["metadata"]["name"] == deployment["metadata"]["name"]
    assert counted["spec"]["replicas"] == deployment["spec"]["replicas"] == 1
    requests = sorted(yaml.safe_dump(c["resources"]) for c in deployment["spec"]["template"]["spec"]["containers"])
    assert requests == sorted(yaml.safe_dump(c["resources"]) for c in counted["spec"]["template"]["spec"]["containers"])
    assert counted["spec"]["template"]["spec"]["affinity"] == deployment["spec"]["template"]["spec"]["affinity"]
    # What the pickers ask (literal figures of docs/prefix-aware-routing.md): 500m + 250m CPU, 512 + 256 MiB.
    assert sorted(c["resources"]["requests"]["cpu"] for c in deployment["spec"]["template"]["spec"]["containers"]) == ["250m", "500m"]


def test_the_chart_defaults_are_counted_at_the_charts_own_size():
    (default,) = release_deployments("llm-d-router-standalone", "v0.10.0", {}, release="m", namespace="ns")
    cpus = sorted(c["resources"]["requests"]["cpu"] for c in default["spec"]["template"]["spec"]["containers"])
    assert cpus == ["4", "8"], "8 CPU for the picker and 4 for its Envoy when values say nothing"


def test_the_components_transform_is_what_the_engine_applies_to_the_charts_objects(rendered):
    """The transform the EndpointPicker registers on its chart, called as the engine calls it for each
    object the chart renders (type token and the object as props)."""
    (deployment,) = [o for o in rendered if o["kind"] == "Deployment"]
    result = restricted_picker_pods(pulumi.ResourceTransformArgs(True, DEPLOYMENT, "picker", deployment, pulumi.ResourceOptions()))
    assert result is not None
    assert pod_security.violations(result.props["spec"]["template"]) == {}
    (service,) = [o for o in rendered if o["kind"] == "Service"]
    assert restricted_picker_pods(pulumi.ResourceTransformArgs(True, "kubernetes:core/v1:Service", "picker", service,
                                                               pulumi.ResourceOptions())) is None


def test_the_offline_check_passes_a_routed_dev_copy_with_the_picker_on_the_system_pool(tmp_path):
    stack_file = tmp_path / "Pulumi.dev.yaml"
    document = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())
    document["config"]["llm-platform:serving"] = routed_serving()
    stack_file.write_text(yaml.safe_dump(document, sort_keys=False))
    result = run_check("dev", tmp_path / "out", stack_file=stack_file)
    out = io.StringIO()
    with redirect_stdout(out):
        code = print_check(result, "json")
    report = json.loads(out.getvalue())
    assert code == 0, report["policies"]
    (system,) = [pool for pool in report["summary"]["capacity"] if pool["pool"] == "system"]
    assert "Deployment serving-interactive/llama-3-1-8b-instruct-epp" in system["workloads"], "counted on the system pool"
