"""gpu-workload-schedulable and dra-workloads-on-managed-nodes: pods against the stack's pools."""

from __future__ import annotations

import pytest

from tests.policies.builders import (
    GPU_TOLERATION,
    NODE_GROUP_SHAPES,
    UNKNOWN,
    gpu_node_group,
    helm_release,
    nodepool,
    patch,
    resource,
    system_node_group,
    template_path,
    workload,
)
from tests.policies.conftest import ROOT, one

POLICY, DRA = "gpu-workload-schedulable", "dra-workloads-on-managed-nodes"
SPEC = template_path("Deployment")
MEMORY = "llm-platform.io/gpu-memory-mib"


def required(*expressions):
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": list(expressions)}]}}}


def expr(key, operator, *values):
    return {"key": key, "operator": operator, **({"values": list(values)} if values else {})}


def pools(shape=NODE_GROUP_SHAPES[0]):
    return [gpu_node_group(shape), system_node_group(shape)]


@pytest.mark.parametrize("shape", NODE_GROUP_SHAPES)
@pytest.mark.parametrize(
    "changes",
    [
        {},
        {f"{SPEC}.nodeSelector": {}},
        {f"{SPEC}.nodeSelector": {"llm-platform.io/accelerator": "a10g", "node.kubernetes.io/instance-type": "g5.2xlarge"}},
        {f"{SPEC}.affinity": required(expr(MEMORY, "Gt", "20000"))},
        {f"{SPEC}.affinity": required(expr("llm-platform.io/accelerator", "NotIn", "h100"), expr("eks.amazonaws.com/capacityType", "In", "SPOT"))},
        {f"{SPEC}.affinity": required(expr("llm-platform.io/accelerator", "Exists"), expr("team", "DoesNotExist"))},
        {("spec", "template", "metadata", "annotations", MEMORY): "20000"},
    ],
    ids=["purpose", "no-selector", "accelerator-and-type", "memory-gt", "notin-and-capacity", "exists", "memory-fits"],
)
def test_workloads_that_fit_a_node_group(pack, shape, changes):
    assert pack.stack_messages([*pools(shape), patch(workload(), changes)], POLICY) == []


@pytest.mark.parametrize("shape", NODE_GROUP_SHAPES)
@pytest.mark.parametrize(
    "changes, fragments",
    [
        ({f"{SPEC}.nodeSelector": {"llm-platform.io/accelerator": "h100"}},
         ["selects llm-platform.io/accelerator in (h100)", "managed node group 'inference': its nodes cannot satisfy 'llm-platform.io/accelerator'"]),
        ({f"{SPEC}.nodeSelector": {"team": "ml"}}, ["its nodes cannot satisfy 'team'"]),
        ({f"{SPEC}.affinity": required(expr(MEMORY, "Gt", "40000"))}, ["cannot satisfy 'llm-platform.io/gpu-memory-mib'"]),
        ({("spec", "template", "metadata", "annotations", MEMORY): "40000"},
         ["needs 1 nvidia.com/gpu, 40000 MiB per GPU", "its GPUs have 22888 MiB, the pod needs 40000 MiB per GPU"]),
        ({f"{SPEC}.containers.0.resources.limits": {"nvidia.com/gpu": 4}}, ["its largest node has 1 GPUs, the pod needs 4"]),
        ({f"{SPEC}.tolerations": [{"key": "nvidia.com/gpu", "operator": "Equal", "value": "yes", "effect": "NoSchedule"}]},
         ["it does not tolerate taint nvidia.com/gpu=true:NoSchedule"]),
    ],
    ids=["accelerator", "unknown-label", "memory-affinity", "memory-annotation", "gpu-count", "taint-value"],
)
def test_workloads_that_fit_no_pool(pack, shape, changes, fragments):
    one(pack.stack_messages([*pools(shape), patch(workload(), changes)], POLICY),
        "fits no pool in the stack, so it stays Pending", *fragments)


def test_cpu_pool_is_no_home_for_gpu_pods(pack):
    res = patch(workload(), {f"{SPEC}.nodeSelector": {"node.kubernetes.io/purpose": "system"}})
    one(pack.stack_messages([*pools(), res], POLICY), "managed node group 'system': it has no GPUs")


@pytest.mark.parametrize("kind", ["Job", "CronJob", "StatefulSet", "Pod"])
def test_every_workload_kind_is_checked(pack, kind):
    res = workload(kind, selector={"llm-platform.io/accelerator": "h100"})
    one(pack.stack_messages([*pools(), res], POLICY), f"{kind} 'vllm'")


@pytest.mark.parametrize(
    "selector, fits",
    [
        ({"karpenter.sh/nodepool": "gpu-inference"}, True),
        ({"karpenter.k8s.aws/instance-family": "g5"}, True),
        ({"karpenter.sh/capacity-type": "spot"}, False),
        ({"kubernetes.io/arch": "arm64"}, False),
        ({"llm-platform.io/pool": "gpu-inference", "node.kubernetes.io/instance-type": "g5.2xlarge"}, True),
    ],
    ids=["nodepool-name", "family", "capacity", "arch-default", "pool-and-type"],
)
def test_karpenter_nodepool_labels(pack, selector, fits):
    messages = pack.stack_messages([nodepool(), workload(selector=selector)], POLICY)
    if fits:
        assert messages == []
    else:
        one(messages, "Karpenter NodePool 'gpu-inference': its nodes cannot satisfy")


def test_extra_pool_taint_needs_its_own_toleration(pack):
    tainted = patch(nodepool(), {"spec.template.spec.taints": [
        {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"},
        {"key": "llm-platform.io/workload", "value": "training", "effect": "NoSchedule"},
    ]})
    one(pack.stack_messages([tainted, workload(selector={})], POLICY), "does not tolerate taint llm-platform.io/workload=training")
    tolerant = patch(workload(selector={}), {f"{SPEC}.tolerations": [GPU_TOLERATION, {"key": "llm-platform.io/workload", "operator": "Exists"}]})
    assert pack.stack_messages([tainted, tolerant], POLICY) == []


def test_one_fitting_pool_is_enough(pack):
    big = patch(nodepool("big"), {
        "spec.template.spec.requirements.0.values": ["g6e"],
        ("spec", "template", "metadata", "labels", "llm-platform.io/accelerator"): "l40s",
        ("spec", "template", "metadata", "labels", MEMORY): "45776",
    })
    res = patch(workload(), {("spec", "template", "metadata", "annotations", MEMORY): "40000"})
    assert pack.stack_messages([*pools(), big, res], POLICY) == []


def test_real_preview_uses_the_aws_node_group_child(pack):
    component = resource("eks:index:ManagedNodeGroup", "inference", {"nodeGroup": {"id": "x"}})
    child = gpu_node_group(NODE_GROUP_SHAPES[1])
    child = {**child, "parent": component["urn"], "urn": child["urn"].replace("::aws:eks", "::eks:index:ManagedNodeGroup$aws:eks")}
    assert pack.stack_messages([component, child, workload()], POLICY) == []


def test_stacks_without_pools_are_not_judged(pack):
    assert pack.stack_messages([workload(selector={"llm-platform.io/accelerator": "h100"})], POLICY) == []


@pytest.mark.parametrize(
    "resources",
    [
        [patch(gpu_node_group(), {"labels": UNKNOWN}), workload(selector={"team": "ml"})],
        [patch(gpu_node_group(), {"taints": UNKNOWN}), workload(tolerate=False)],
        [gpu_node_group(), patch(workload(), {f"{SPEC}.nodeSelector": UNKNOWN})],
        [gpu_node_group(), patch(workload(), {f"{SPEC}.tolerations": UNKNOWN})],
        [gpu_node_group(), patch(workload(), {f"{SPEC}.affinity": required(expr("team", "In", UNKNOWN))})],
        [patch(nodepool(), {"spec.template.spec.requirements": UNKNOWN}), workload(selector={"team": "ml"})],
    ],
    ids=["pool-labels", "pool-taints", "selector", "tolerations", "affinity-value", "nodepool-requirements"],
)
def test_unknown_values_are_not_judged(pack, resources):
    assert pack.stack_messages(resources, POLICY) == []


# --- DRA ------------------------------------------------------------------------------------------


def dra_workload(selector=None):
    res = workload(gpus=None, selector=selector if selector is not None else {"llm-platform.io/pool": "dra"})
    return patch(res, {f"{SPEC}.resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]})


def dra_group(shape=NODE_GROUP_SHAPES[0]):
    return patch(gpu_node_group(shape, "dra"), {("labels", "llm-platform.io/pool"): "dra"})


@pytest.mark.parametrize("shape", NODE_GROUP_SHAPES)
def test_dra_workload_on_a_managed_group(pack, shape):
    assert pack.stack_messages([dra_group(shape), nodepool(), dra_workload()], DRA) == []


@pytest.mark.parametrize(
    "resources, fragment",
    [
        ([dra_group(), nodepool(), dra_workload({})], "can be placed on Karpenter NodePool 'gpu-inference'"),
        ([dra_group(), nodepool(), dra_workload({"node.kubernetes.io/purpose": "gpu-inference"})], "can be placed on Karpenter NodePool"),
        ([dra_group(), dra_workload({"karpenter.sh/nodepool": "gpu-inference"})], "selects nodes by karpenter.sh/nodepool"),
        ([nodepool(), dra_workload()], "no managed node group in the stack matches"),
        ([dra_workload()], "no managed node group in the stack matches"),
    ],
    ids=["no-selector", "shared-labels", "nodepool-key", "only-karpenter", "no-pools"],
)
def test_dra_workload_that_karpenter_would_strand(pack, resources, fragment):
    one(pack.stack_messages(resources, DRA), "uses DRA resourceClaims", fragment)


def test_untolerated_nodepool_is_not_a_risk(pack):
    res = patch(dra_workload({}), {f"{SPEC}.tolerations": []})
    untainted_dra = patch(dra_group(), {"taints": []})
    assert pack.stack_messages([untainted_dra, nodepool(), res], DRA) == []


@pytest.mark.parametrize(
    "resources",
    [
        [patch(dra_group(), {"labels": UNKNOWN}), dra_workload()],
        [dra_group(), nodepool(), patch(dra_workload(), {f"{SPEC}.nodeSelector": UNKNOWN})],
    ],
    ids=["group-labels", "selector"],
)
def test_unknown_dra_placement_is_not_judged(pack, resources):
    assert pack.stack_messages(resources, DRA) == []


def test_nodepool_with_unknown_requirements_is_not_judged(pack):
    shared = patch(nodepool(), {("spec", "template", "metadata", "labels", "llm-platform.io/pool"): "dra"})
    one(pack.stack_messages([dra_group(), shared, dra_workload()], DRA), "can be placed on Karpenter NodePool")
    unknown = patch(shared, {"spec.template.spec.requirements": UNKNOWN})
    assert pack.stack_messages([dra_group(), unknown, dra_workload()], DRA) == []


# --- native sidecars (KEP-753): summed with the app containers, not maxed --------------------------

def _with_init(restart_policy):
    init = {"name": "gpu-warmup", "image": "vllm/vllm-openai:v0.11.0",
            "resources": {"limits": {"nvidia.com/gpu": 1, "memory": "1Gi"}}}
    if restart_policy:
        init["restartPolicy"] = restart_policy
    return patch(workload(), {f"{SPEC}.initContainers": [init]})


def test_a_native_sidecar_gpu_adds_to_the_pods_gpus(pack):
    """1 app GPU + a 1-GPU sidecar (restartPolicy: Always) run together: the pod needs 2 GPUs, and the
    pool's largest node has 1 (the textbook max(apps, init) would say 1 and pass)."""
    pack.configure(ROOT / "policies" / "config" / "prod.json")
    one(pack.stack_messages([*pools(), _with_init("Always")], POLICY), "needs 2 nvidia.com/gpu",
        "its largest node has 1 GPUs, the pod needs 2")


def test_an_ordinary_init_container_gpu_is_maxed(pack):
    pack.configure(ROOT / "policies" / "config" / "prod.json")
    assert pack.stack_messages([*pools(), _with_init(None)], POLICY) == []


def _time_sliced(selector):
    return patch(workload(gpus=None, selector=selector), {f"{SPEC}.containers.0.resources.limits":
                                                           {"memory": "16Gi", "nvidia.com/gpu.shared": "1"}})


def test_a_time_sliced_workload_needs_a_gpu_pool(pack):
    """nvidia.com/gpu.shared counts as a GPU request: on the CPU pool it stays Pending (it was not judged)."""
    pack.configure(ROOT / "policies" / "config" / "prod.json")
    one(pack.stack_messages([*pools(), _time_sliced({"node.kubernetes.io/purpose": "system"})], POLICY),
        "managed node group 'system': it has no GPUs")
    # On the GPU pool it lands, once the device plugin's time-slicing advertises the shared GPU.
    slicing = helm_release(values={"config": {"map": {"default": "version: v1\nsharing:\n  timeSlicing:\n"
                                                                  "    renameByDefault: true\n"}}})
    assert pack.stack_messages([*pools(), slicing, _time_sliced({"node.kubernetes.io/purpose": "gpu-inference"})],
                               POLICY) == []


# --- MIG slices and time-sliced GPUs: what the pool's GPUs and the stack's device plugin can offer -----

MIG_SLICE, SHARED = "nvidia.com/mig-1g.10gb", "nvidia.com/gpu.shared"


def _asking_for(resource_name: str) -> dict:
    res = workload("Deployment", gpus=None)
    return patch(res, {"spec.template.spec.containers.0.resources.limits": {resource_name: 1, "memory": "8Gi"}})


def _pool_of(*types: str, accelerator: str, memory: str) -> list[dict]:
    group = patch(gpu_node_group(), {"instanceTypes": list(types), ("labels", "llm-platform.io/accelerator"): accelerator,
                                     ("labels", "llm-platform.io/gpu-memory-mib"): memory})
    return [group, system_node_group()]


def test_a_mig_slice_on_a_pool_whose_gpus_have_no_mig_is_refused(pack):
    """A10G (g5) has no MIG: the mixed strategy never advertises nvidia.com/mig-* on those nodes."""
    one(pack.stack_messages([*_pool_of("g5.xlarge", "g5.2xlarge", accelerator="a10g", memory="22888"),
                             _asking_for(MIG_SLICE)], POLICY),
        "fits no pool in the stack", "its GPUs (a10g) have no MIG, the pod asks for a MIG slice")


def test_a_mig_slice_on_an_a100_pool_passes(pack):
    assert pack.stack_messages([*_pool_of("p4d.24xlarge", accelerator="a100", memory="40960"),
                                _asking_for(MIG_SLICE)], POLICY) == []


def test_time_sliced_gpus_without_time_slicing_configured_are_refused(pack):
    one(pack.stack_messages([*pools(), _asking_for(SHARED)], POLICY),
        f"asks for {SHARED}, which only the NVIDIA device plugin's time-slicing with renameByDefault: true "
        "advertises, and no chart or ConfigMap in the stack configures it")


@pytest.mark.parametrize("values", [
    {"config": {"map": {"default": "version: v1\nsharing:\n  timeSlicing:\n    renameByDefault: true\n"
                                   "    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n"}}},
    {"devicePlugin": {"config": {"create": True, "data": {"any": {"version": "v1", "sharing": {"timeSlicing": {
        "renameByDefault": True, "resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}}}}}},
], ids=["device-plugin-config-map-text", "operator-config-as-data"])
def test_time_sliced_gpus_with_renamed_time_slicing_pass(pack, values):
    assert pack.stack_messages([*pools(), helm_release(values=values), _asking_for(SHARED)], POLICY) == []


def test_time_slicing_without_rename_advertises_no_shared_gpus(pack):
    """renameByDefault false (the default) advertises the replicas as nvidia.com/gpu itself."""
    values = {"config": {"map": {"default": "version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                                            "    - name: nvidia.com/gpu\n      replicas: 4\n"}}}
    one(pack.stack_messages([*pools(), helm_release(values=values), _asking_for(SHARED)], POLICY),
        f"asks for {SHARED}")
