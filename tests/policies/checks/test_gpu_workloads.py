"""gpu-workload-contract and gpu-toleration-without-gpu across every pod-template kind."""

from __future__ import annotations

import pytest

from tests.policies.builders import GPU, UNKNOWN, WORKLOAD_KINDS, patch, pod_spec, resource, template_path, workload
from tests.policies.conftest import ROOT, one

CONTRACT, WASTE = "gpu-workload-contract", "gpu-toleration-without-gpu"
KINDS = list(WORKLOAD_KINDS)


@pytest.mark.parametrize("kind", KINDS)
def test_compliant_gpu_workload_passes_every_policy(pack, kind):
    assert pack.analyze(workload(kind)) == []


@pytest.mark.parametrize("kind", KINDS)
def test_cpu_workload_without_toleration_passes(pack, kind):
    assert pack.analyze(workload(kind, gpus=None, tolerate=False, selector={})) == []


@pytest.mark.parametrize("kind", KINDS)
def test_gpu_request_only_in_requests(pack, kind):
    spec = template_path(kind)
    res = patch(workload(kind), {
        f"{spec}.containers.0.resources.limits": {"memory": "32Gi"},
        f"{spec}.containers.0.resources.requests": {GPU: 1},
    })
    one(pack.messages(res, CONTRACT), "container 'vllm' requests nvidia.com/gpu only in resources.requests",
        "'nvidia.com/gpu: 1' under limits")


@pytest.mark.parametrize("kind", KINDS)
def test_gpu_without_toleration(pack, kind):
    one(pack.messages(workload(kind, tolerate=False), CONTRACT),
        "requests nvidia.com/gpu but does not tolerate the GPU taint 'nvidia.com/gpu'")


def test_request_must_equal_limit(pack):
    res = patch(workload(), {("spec", "template", "spec", "containers", 0, "resources", "requests", GPU): 2})
    one(pack.messages(res, CONTRACT), "request 2 but limit 1")


def test_init_container_gpu_counts(pack):
    spec = template_path("Job")
    res = patch(workload("Job", gpus=None, tolerate=False), {
        f"{spec}.initContainers": [{"name": "warmup", "image": "x:1", "resources": {"limits": {GPU: 1}}}],
    })
    one(pack.messages(res, CONTRACT), "does not tolerate the GPU taint")


@pytest.mark.parametrize(
    "toleration",
    [
        {"operator": "Exists"},
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"},
        {"key": "nvidia.com/gpu", "operator": "Exists"},
    ],
    ids=["blanket", "equal", "any-effect"],
)
def test_other_tolerations_that_cover_the_taint(pack, toleration):
    res = patch(workload(), {f"{template_path('Deployment')}.tolerations": [toleration]})
    assert pack.messages(res, CONTRACT) == []


@pytest.mark.parametrize(
    "toleration",
    [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"},
        {"key": "other", "operator": "Exists"},
        {"operator": "Equal", "value": "x"},
    ],
    ids=["wrong-effect", "other-key", "keyless-equal"],
)
def test_tolerations_that_miss_the_taint(pack, toleration):
    res = patch(workload(), {f"{template_path('Deployment')}.tolerations": [toleration]})
    one(pack.messages(res, CONTRACT), "does not tolerate the GPU taint")


@pytest.mark.parametrize("kind", [k for k in KINDS if k != "DaemonSet"])
def test_toleration_without_gpu_wastes_a_node(pack, kind):
    one(pack.messages(workload(kind, gpus=None), WASTE),
        "tolerates the GPU taint 'nvidia.com/gpu' but requests no nvidia.com/gpu", "Remove the toleration")


def test_blanket_toleration_without_gpu(pack):
    res = patch(workload(gpus=None), {f"{template_path('Deployment')}.tolerations": [{"operator": "Exists"}]})
    one(pack.messages(res, WASTE), "tolerates every taint (operator: Exists without a key)")


def test_daemonset_agents_may_tolerate(pack):
    assert pack.messages(workload("DaemonSet", gpus=None), WASTE) == []


def test_exempt_kinds_are_configurable(pack):
    pack.configure({WASTE: {"exemptKinds": []}})
    one(pack.messages(workload("DaemonSet", gpus=None), WASTE))


def test_dra_claims_count_as_asking_for_a_device(pack):
    res = patch(workload(gpus=None), {f"{template_path('Deployment')}.resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu"}]})
    assert pack.messages(res, WASTE) == []


@pytest.mark.parametrize(
    "changes",
    [
        {"spec.template": UNKNOWN},
        {"spec.template.spec.tolerations": UNKNOWN},
        {"spec.template.spec.containers.0.resources": UNKNOWN},
        {"spec.template.spec.containers.0.resources.limits": UNKNOWN, "spec.template.spec.containers.0.resources.requests": {GPU: 1}},
    ],
    ids=["template", "tolerations", "resources", "limits"],
)
@pytest.mark.parametrize("gpus", [1, None])
def test_unknown_values_are_not_judged(pack, changes, gpus):
    res = patch(workload(gpus=gpus, tolerate=gpus is None), changes)
    assert pack.messages(res, CONTRACT) == [] and pack.messages(res, WASTE) == []


# --- GPUs under other names, quantities the API server refuses ----------------------------------

PROD_CONFIG = ROOT / "policies" / "config" / "prod.json"


def time_sliced(*, tolerate: bool = True, gpus: str = "1"):
    """A workload on the device plugin's renamed time-sliced GPU (renameByDefault: nvidia.com/gpu.shared)."""
    spec = template_path("Deployment")
    return patch(workload(gpus=None, tolerate=tolerate), {
        f"{spec}.containers.0.resources.limits": {"memory": "16Gi", "nvidia.com/gpu.shared": gpus},
    })


def test_a_tolerating_time_sliced_workload_is_not_a_toleration_without_gpu(pack):
    pack.configure(PROD_CONFIG)
    assert pack.messages(time_sliced(), WASTE) == []
    assert pack.messages(time_sliced(), CONTRACT) == []


def test_a_time_sliced_workload_is_held_to_the_gpu_contract(pack):
    pack.configure(PROD_CONFIG)
    one(pack.messages(time_sliced(tolerate=False), CONTRACT),
        "requests nvidia.com/gpu.shared but does not tolerate the GPU taint 'nvidia.com/gpu'")


@pytest.mark.parametrize("resource", ["nvidia.com/gpu", "nvidia.com/gpu.shared"])
def test_a_fractional_gpu_limit_is_refused(pack, resource):
    pack.configure(PROD_CONFIG)
    spec = template_path("Deployment")
    half = patch(workload(), {f"{spec}.containers.0.resources.limits": {"memory": "16Gi", resource: "500m"}})
    one(pack.messages(half, CONTRACT), f"container 'vllm' has {resource} limit 500m",
        "the API server refuses extended resources that are not whole numbers")
    whole = patch(workload(), {f"{spec}.containers.0.resources.limits": {"memory": "16Gi", resource: "1000m"}})
    assert pack.messages(whole, CONTRACT) == []


# --- workload kinds: built-in CRD table, and an advisory for what the pack cannot know ----------------

KNOWN = "workload-kinds-known"
ISVC = "kubernetes:serving.kserve.io/v1beta1:InferenceService"
PYTORCHJOB = "kubernetes:kubeflow.org/v1:PyTorchJob"


def inference_service(*, tolerate: bool):
    """KServe: spec.predictor is a pod spec inline; the model field is its main container."""
    predictor = {"model": {"modelFormat": {"name": "huggingface"}, "image": "vllm/vllm-openai:v0.11.0",
                           "resources": {"limits": {GPU: "1", "memory": "32Gi"}}}}
    if tolerate:
        predictor["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    return resource(ISVC, "llama", {"metadata": {"name": "llama", "namespace": "serving"}, "spec": {"predictor": predictor}})


def pytorch_job(*, tolerate: bool):
    spec = pod_spec(gpus=1, tolerate=tolerate)
    replica = {"replicas": 2, "template": {"metadata": {}, "spec": spec}}
    return resource(PYTORCHJOB, "train", {"metadata": {"name": "train", "namespace": "training"},
                                          "spec": {"pytorchReplicaSpecs": {"Master": {**replica, "replicas": 1},
                                                                           "Worker": replica}}})


def test_kserve_predictor_gpu_is_held_to_the_contract(pack):
    pack.configure(ROOT / "policies" / "config" / "prod.json")
    one(pack.messages(inference_service(tolerate=False), CONTRACT), "InferenceService",
        "requests nvidia.com/gpu but does not tolerate the GPU taint")
    assert pack.messages(inference_service(tolerate=True), CONTRACT) == []


def test_pytorchjob_master_and_worker_templates_are_judged(pack):
    pack.configure(ROOT / "policies" / "config" / "prod.json")
    messages = pack.messages(pytorch_job(tolerate=False), CONTRACT)
    assert len(messages) == 2
    assert any("spec.pytorchReplicaSpecs.Master.template" in m for m in messages)
    assert any("spec.pytorchReplicaSpecs.Worker.template" in m for m in messages)
    assert pack.messages(pytorch_job(tolerate=True), CONTRACT) == []


def test_an_undeclared_kind_with_a_pod_template_is_advised_once(pack):
    effective = pack.configure(ROOT / "policies" / "config" / "prod.json")
    assert effective[KNOWN]["enforcementLevel"] == "advisory"
    template = {"metadata": {}, "spec": pod_spec(gpus=1, tolerate=False)}
    group = lambda name: resource("kubernetes:example.com/v1:InferenceGroup", name,  # noqa: E731
                                  {"metadata": {"name": name}, "spec": {"groups": [{"template": template}]}})
    one(pack.stack_messages([group("a"), group("b"), inference_service(tolerate=True)], KNOWN),
        "kubernetes:example.com/v1:InferenceGroup (at spec.groups[0].template.spec)", "customWorkloads")
    # declared (or built in): nothing to say
    pack.configure({"all": "mandatory", KNOWN: {"customWorkloads": {
        "kubernetes:example.com/v1:InferenceGroup": ["spec.groups[].template"]}}})
    assert pack.stack_messages([group("a"), pytorch_job(tolerate=True)], KNOWN) == []
