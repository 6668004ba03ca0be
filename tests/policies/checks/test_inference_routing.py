"""inference-pool-selects-one-model, endpoint-picker-off-gpu-nodes and httproute-inference-pool-exists over
the real gRPC protocol: a happy stack (a routed model as the program emits it: vLLM Deployment, llm-d-router
chart whose pool selects it, picker on the system pool), then one broken field per case."""

from __future__ import annotations

import copy

import pytest

from components import versions
from components.specs import routing
from tests.policies.builders import GPU_TOLERATION, gpu_node_group, helm_chart_v4, resource, system_node_group
from tests.policies.conftest import one
from tests.support import helm_render
from tests.support.needs import missing

POOL = "inference-pool-selects-one-model"
PICKER = "endpoint-picker-off-gpu-nodes"
ROUTE = "httproute-inference-pool-exists"
NAMESPACE = "serving-interactive"
CHART = "oci://ghcr.io/llm-d/charts/llm-d-router-standalone"


def model(name: str, *, namespace: str = NAMESPACE, labels: dict[str, str] | None = None) -> dict:
    """A vLLM Deployment labelled as the program labels its model pods."""
    pod_labels = labels or {"app.kubernetes.io/name": "vllm", "app.kubernetes.io/instance": name}
    return resource("kubernetes:apps/v1:Deployment", name, {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"template": {"metadata": {"labels": pod_labels}, "spec": {
            "nodeSelector": {"llm-platform.io/pool": "inference"}, "tolerations": [dict(GPU_TOLERATION)],
            "containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.33.0",
                            "args": ["/models/x", "--served-model-name", name, "--port", "8000"],
                            "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}},
    })


def picker_chart(model_name: str = "llama", values: dict | None = None) -> dict:
    chart = helm_chart_v4(CHART, "v0.10.0", values or routing.picker_values(model_name, replicas=1), name=f"{model_name}-picker")
    chart["inputs"].update({"name": model_name, "namespace": NAMESPACE})
    return chart


def happy() -> list[dict]:
    return [system_node_group(), gpu_node_group(), model("llama"), model("qwen"), picker_chart("llama")]


def test_the_routed_stack_as_the_program_emits_it_passes(pack):
    for policy in (POOL, PICKER, ROUTE):
        assert pack.stack_messages(happy(), policy) == []


def test_a_pool_matching_no_model_pod(pack):
    stack = happy()
    stack[-1] = picker_chart("llama", values=copy.deepcopy(routing.picker_values("lama", replicas=1)))
    stack[-1]["inputs"]["name"] = "llama"
    one(pack.stack_messages(stack, POOL), "InferencePool serving-interactive/llama",
        "app.kubernetes.io/instance=lama", "matches no model-server pod", "answers every request with 503")


def test_a_pool_in_another_namespace_than_its_models(pack):
    stack = happy()
    stack[2] = model("llama", namespace="serving-batch")
    one(pack.stack_messages(stack, POOL), "matches no model-server pod in namespace serving-interactive")


def test_a_pool_matching_two_models(pack):
    values = routing.picker_values("llama", replicas=1)
    values["router"]["modelServers"]["matchLabels"] = {"app.kubernetes.io/name": "vllm"}
    stack = [*happy()[:-1], picker_chart("llama", values=values)]
    one(pack.stack_messages(stack, POOL), "matches pods of 2 models", "llama (", "qwen (")


def test_a_hand_written_inference_pool_is_judged_too(pack):
    pool = resource("kubernetes:inference.networking.k8s.io/v1:InferencePool", "mixed", {
        "metadata": {"name": "mixed", "namespace": NAMESPACE},
        "spec": {"selector": {"matchLabels": {"app.kubernetes.io/name": "vllm"}}, "targetPorts": [{"number": 8000}],
                 "endpointPickerRef": {"name": "mixed-epp", "port": {"number": 9002}}},
    })
    one(pack.stack_messages([*happy(), pool], POOL), "InferencePool serving-interactive/mixed", "matches pods of 2 models")
    single = copy.deepcopy(pool)
    single["inputs"]["spec"]["selector"]["matchLabels"]["app.kubernetes.io/instance"] = "qwen"
    assert pack.stack_messages([*happy(), single], POOL) == []


def test_a_picker_tolerating_the_gpu_taint(pack):
    values = routing.picker_values("llama", replicas=1)
    values["router"]["epp"]["tolerations"] = [dict(GPU_TOLERATION)]
    stack = [*happy()[:-1], picker_chart("llama", values=values)]
    one(pack.stack_messages(stack, PICKER), "tolerates the GPU taint nvidia.com/gpu", "Remove the toleration")


def test_a_picker_without_placement_is_not_on_gpu_nodes_while_they_are_tainted(pack):
    values = routing.picker_values("llama", replicas=1)
    values["router"]["epp"]["affinity"] = {}
    stack = [*happy()[:-1], picker_chart("llama", values=values)]
    assert pack.stack_messages(stack, PICKER) == []


def test_a_picker_selecting_an_untainted_gpu_pool(pack):
    values = routing.picker_values("llama", replicas=1)
    values["router"]["epp"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "llm-platform.io/pool", "operator": "In", "values": ["inference"]}]}]}}}
    untainted = gpu_node_group(taints=[])
    stack = [system_node_group(), untainted, model("llama"), picker_chart("llama", values=values)]
    one(pack.stack_messages(stack, PICKER), "can land on GPU pool(s)", "Place it on the system pool")


def test_a_hand_written_picker_deployment_on_gpu_nodes(pack):
    epp = resource("kubernetes:apps/v1:Deployment", "epp", {
        "metadata": {"name": "epp", "namespace": NAMESPACE},
        "spec": {"template": {"metadata": {"labels": {"app": "epp"}}, "spec": {
            "tolerations": [dict(GPU_TOLERATION)],
            "containers": [{"name": "epp", "image": "ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.10.0"}]}}},
    })
    one(pack.stack_messages([*happy(), epp], PICKER), "Deployment", "tolerates the GPU taint")


def route(pool: str) -> dict:
    return resource("kubernetes:gateway.networking.k8s.io/v1:HTTPRoute", "chat", {
        "metadata": {"name": "chat", "namespace": NAMESPACE},
        "spec": {"parentRefs": [{"name": "inference-gateway"}],
                 "rules": [{"backendRefs": [{"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": pool}]}]},
    })


@pytest.mark.parametrize("pool, findings", [("llama", 0), ("mistral", 1)], ids=["defined", "missing"])
def test_an_httproute_to_an_inference_pool(pack, pool, findings):
    messages = pack.stack_messages([*happy(), route(pool)], ROUTE)
    assert len(messages) == findings
    if findings:
        one(messages, "InferencePool serving-interactive/mistral", "does not define")


def test_the_routes_and_pools_these_cases_use_fit_the_shipped_crds():
    """The HTTPRoute and InferencePool written here are what the API would accept (Gateway API v1.6.1
    standard, InferencePool v1.6.0 release manifests), so the findings are about objects that can exist."""
    schemas = {}
    for manifest in (versions.GATEWAY_API_CRDS, versions.INFERENCE_POOL_CRDS):
        path = helm_render.manifest_path(manifest)
        if not path.is_file():
            missing(f"{path} is missing (../shared/manifests)")
        schemas.update(helm_render.crd_schemas_of(path.read_text()))
    http_route = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute", **route("llama")["inputs"]}
    assert helm_render.custom_resource_errors(http_route, schemas) == []
    pool = {"apiVersion": "inference.networking.k8s.io/v1", "kind": "InferencePool",
            "metadata": {"name": "mixed", "namespace": NAMESPACE},
            "spec": {"selector": {"matchLabels": {"app.kubernetes.io/name": "vllm"}}, "targetPorts": [{"number": 8000}],
                     "endpointPickerRef": {"name": "mixed-epp", "port": {"number": 9002}}}}
    assert helm_render.custom_resource_errors(pool, schemas) == []
