"""The pack sees every pod template and pool shape, and blocks nothing valid.

Multi-template kinds (LeaderWorkerSet, RayCluster/RayJob/RayService), custom kinds added through
``customWorkloads``, MIG slices and DRA claims under the workload contract, moving image tags, and
GPU pools recognised by any GPU-only requirement under Karpenter's and EKS Auto Mode's label keys.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.policies.builders import (
    GPU_TOLERATION,
    MULTI_TEMPLATE_KINDS,
    auto_mode_nodepool,
    gpu_node_group,
    multi_workload,
    nodepool,
    patch,
    resource,
    workload,
)
from tests.policies.conftest import one

CONTRACT, WASTE, IMAGE = "gpu-workload-contract", "gpu-toleration-without-gpu", "container-image-pinned"
TAINTED, LABELS, DRA = "gpu-pools-tainted", "gpu-pool-labels", "dra-workloads-on-managed-nodes"
DIGEST = "@sha256:" + "b" * 64
CONFIG_DIR = Path(__file__).resolve().parents[2] / "policies" / "config"
MULTI = list(MULTI_TEMPLATE_KINDS)
WHERE = {
    "LeaderWorkerSet": "spec.leaderWorkerTemplate.workerTemplate",
    "RayCluster": "spec.workerGroupSpecs[1].template",
    "RayJob": "spec.rayClusterSpec.workerGroupSpecs[1].template",
    "RayService": "spec.rayClusterConfig.workerGroupSpecs[1].template",
}


# --- every pod template of multi-template kinds ---------------------------------------------------


@pytest.mark.parametrize("kind", MULTI)
def test_compliant_multi_template_workload_passes_every_policy(pack, kind):
    assert pack.analyze(multi_workload(kind)) == []


@pytest.mark.parametrize("kind", MULTI)
def test_gpu_template_without_toleration_is_named(pack, kind):
    one(pack.messages(multi_workload(kind, tolerate=False), CONTRACT),
        f"({WHERE[kind]}) requests nvidia.com/gpu but does not tolerate the GPU taint")


@pytest.mark.parametrize("kind", MULTI)
def test_toleration_without_gpu_in_a_nested_template(pack, kind):
    one(pack.messages(multi_workload(kind, gpus=None), WASTE), f"({WHERE[kind]}) tolerates the GPU taint")


@pytest.mark.parametrize("kind", MULTI)
def test_moving_image_in_a_nested_template(pack, kind):
    _, spec = MULTI_TEMPLATE_KINDS[kind]
    res = patch(multi_workload(kind), {f"{spec}.containers.0.image": "rayproject/ray:nightly-gpu"})
    one(pack.messages(res, IMAGE), WHERE[kind], "uses the moving tag 'nightly-gpu'")


def test_lws_leader_template_is_judged_too(pack):
    res = patch(multi_workload("LeaderWorkerSet"), {"spec.leaderWorkerTemplate.leaderTemplate.spec.tolerations": []})
    one(pack.messages(res, CONTRACT), "(spec.leaderWorkerTemplate.leaderTemplate)")


def test_rayjob_submitter_template_is_judged_too(pack):
    res = patch(multi_workload("RayJob"), {"spec.submitterPodTemplate.spec.tolerations": [GPU_TOLERATION]})
    one(pack.messages(res, WASTE), "(spec.submitterPodTemplate)")


# --- custom kinds through the policy config ---------------------------------------------------------

CUSTOM = "kubernetes:serving.example.com/v1:InferenceGroup"


def _custom(tolerate: bool) -> dict:
    spec = {"containers": [{"name": "m", "image": "vllm/vllm-openai:v0.11.0", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}
    if tolerate:
        spec["tolerations"] = [GPU_TOLERATION]
    return resource(CUSTOM, "group", {"metadata": {"name": "group", "namespace": "serving"},
                                      "spec": {"groups": [{"name": "a", "template": {"spec": spec}}]}})


def test_custom_kind_is_judged_once_configured(pack):
    assert pack.messages(_custom(tolerate=False), CONTRACT) == [], "unknown kinds are not guessed at"
    pack.configure({"all": "mandatory", CONTRACT: {"customWorkloads": {CUSTOM: ["spec.groups[].template"]}}})
    one(pack.messages(_custom(tolerate=False), CONTRACT), "InferenceGroup 'group' (spec.groups[0].template)",
        "does not tolerate the GPU taint")
    assert pack.messages(_custom(tolerate=True), CONTRACT) == []


def test_custom_kind_paths_are_validated(pack):
    with pytest.raises(Exception, match="customWorkloads"):
        pack.configure({"all": "mandatory", CONTRACT: {"customWorkloads": {CUSTOM: ["spec/groups"]}}})


# --- MIG and DRA are valid shapes -------------------------------------------------------------------

MIG = "nvidia.com/mig-1g.10gb"


def _mig(tolerate: bool = True, where: str = "limits"):
    res = workload("Deployment", gpus=None, tolerate=tolerate)
    return patch(res, {f"spec.template.spec.containers.0.resources.{where}": {MIG: 1, "memory": "8Gi"}})


def test_mig_slice_with_toleration_is_valid(pack):
    assert pack.analyze(_mig()) == []


def test_mig_slice_without_toleration_is_blocked(pack):
    one(pack.messages(_mig(tolerate=False), CONTRACT), f"requests {MIG} but does not tolerate")


def test_mig_slice_only_in_requests_is_blocked(pack):
    one(pack.messages(_mig(where="requests"), CONTRACT), f"requests {MIG} only in resources.requests")


def _dra_pod():
    res = workload("Deployment", gpus=None)
    return patch(res, {
        "spec.template.spec.resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "single-gpu"}],
        "spec.template.spec.containers.0.resources.claims": [{"name": "gpu"}],
    })


def test_dra_claim_on_a_managed_group_is_valid(pack):
    assert pack.analyze(_dra_pod()) == []
    assert pack.stack_messages([gpu_node_group(), _dra_pod()], DRA) == []


def test_dra_claim_that_can_land_on_karpenter_is_blocked(pack):
    one(pack.stack_messages([nodepool(), _dra_pod()], DRA), "Karpenter will never provision for it")


# --- moving tags and digests ------------------------------------------------------------------------


@pytest.mark.parametrize("tag", ["latest", "stable", "nightly", "main", "master", "edge", "dev", "main-stable",
                                 "nightly-2026-01-05", "latest-cuda", "cuda-latest", "Stable", "dev_gpu"])
def test_moving_tags_are_unpinned(pack, tag):
    res = patch(workload(), {"spec.template.spec.containers.0.image": f"vllm/vllm-openai:{tag}"})
    one(pack.messages(res, IMAGE), f"'vllm/vllm-openai:{tag}'")


@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.11.0", "nvcr.io/nvidia/cuda:12.4.1-devel-ubuntu22.04",
                                   "example/app:1.2.3-stable", "rayproject/ray:2.49.0-py311-gpu",
                                   f"vllm/vllm-openai:nightly{DIGEST}", f"vllm/vllm-openai{DIGEST}"])
def test_release_tags_and_digests_are_pinned(pack, image):
    res = patch(workload(), {"spec.template.spec.containers.0.image": image})
    assert pack.messages(res, IMAGE) == []


@pytest.mark.parametrize("values, fragment", [
    ({"image": {"repository": "nvcr.io/nvidia/k8s/dcgm-exporter", "tag": "edge"}}, "values.image.tag"),
    ({"exporter": {"image": "ghcr.io/x/exporter", "tag": "main-stable"}}, "values.exporter.tag"),
])
def test_moving_tags_in_helm_values(pack, values, fragment):
    from tests.policies.builders import helm_release
    one(pack.messages(helm_release("dcgm-exporter", "4.8.2", values), IMAGE), fragment, "moving tag")


def test_digest_required_per_stack(pack):
    tagged = workload()
    assert pack.messages(tagged, IMAGE) == [], "digests are off by default"
    pack.configure({"all": "mandatory", IMAGE: {"requireDigest": True}})
    one(pack.messages(tagged, IMAGE), "pinned by tag only and this stack requires a digest", "repo:tag@sha256:")
    pinned = patch(tagged, {"spec.template.spec.containers.0.image": f"vllm/vllm-openai:v0.11.0{DIGEST}"})
    assert pack.messages(pinned, IMAGE) == []


def test_digest_exemptions_are_exact(pack):
    """An exempt 'repo:tag' passes without a digest; another tag of the same repo does not."""
    pack.configure({"all": "mandatory", IMAGE: {"requireDigest": True,
                                                "digestExemptImages": ["vllm/vllm-openai:v0.11.0"]}})
    assert pack.messages(patch(workload(), {"spec.template.spec.containers.0.image": "vllm/vllm-openai:v0.11.0"}),
                         IMAGE) == []
    other = patch(workload(), {"spec.template.spec.containers.0.image": "vllm/vllm-openai:v0.11.1"})
    one(pack.messages(other, IMAGE), "requires a digest")


def test_digest_in_a_helm_tag_counts_when_digests_are_required(pack):
    """Charts that build "repository:tag" take the digest in the tag (``tag: v1.35.2@sha256:...``)."""
    from tests.policies.builders import helm_release
    pack.configure({"all": "mandatory", IMAGE: {"requireDigest": True}})
    image = {"repository": "registry.k8s.io/autoscaling/cluster-autoscaler"}
    with_digest = helm_release("cluster-autoscaler", "9.59.0", {"image": {**image, "tag": f"v1.35.2{DIGEST}"}})
    assert pack.messages(with_digest, IMAGE) == []
    tag_only = helm_release("cluster-autoscaler", "9.59.0", {"image": {**image, "tag": "v1.35.2"}})
    one(pack.messages(tag_only, IMAGE), "values.image.digest", "requires a digest")
    malformed = helm_release("cluster-autoscaler", "9.59.0", {"image": {**image, "tag": "v1.35.2@sha256:abc"}})
    one(pack.messages(malformed, IMAGE), "values.image.tag", "malformed digest")


# --- GPU pools by any GPU-only requirement, Karpenter and Auto Mode keys ------------------------------

GPU_ONLY = {
    "instance-type": ("node.kubernetes.io/instance-type", "In", ["g5.2xlarge"]),
    "family": ("{p}instance-family", "In", ["p5"]),
    "category-g": ("{p}instance-category", "In", ["g"]),
    "category-p": ("{p}instance-category", "In", ["p"]),
    "gpu-name": ("{p}instance-gpu-name", "In", ["l40s"]),
    "gpu-count-gt-0": ("{p}instance-gpu-count", "Gt", ["0"]),
    "gpu-manufacturer": ("{p}instance-gpu-manufacturer", "In", ["nvidia"]),
    # only GPU types carry these labels, and a numeric requirement never matches a node without one
    "gpu-count-lt-9": ("{p}instance-gpu-count", "Lt", ["9"]),
    "gpu-count-lte-4": ("{p}instance-gpu-count", "Lte", ["4"]),
    "gpu-memory-lt": ("{p}instance-gpu-memory", "Lt", ["50000"]),
    "gpu-memory-lte": ("{p}instance-gpu-memory", "Lte", ["24576"]),
    # Karpenter normalises the deprecated key to node.kubernetes.io/instance-type (pkg/apis/v1/labels.go)
    "beta-instance-type": ("beta.kubernetes.io/instance-type", "In", ["g6e.xlarge"]),
}
PREFIXES = {"karpenter": "karpenter.k8s.aws/", "auto-mode": "eks.amazonaws.com/"}


def _pool(provisioner: str, key: str, operator: str, values: list[str], tainted: bool):
    requirement = {"key": key.format(p=PREFIXES[provisioner]), "operator": operator, "values": values}
    build = auto_mode_nodepool if provisioner == "auto-mode" else nodepool
    res = build("pool")
    changes = {"spec.template.spec.requirements": [requirement], "spec.limits": {"cpu": "1000"}}
    if not tainted:
        changes["spec.template.spec.taints"] = []
    return patch(res, changes)


@pytest.mark.parametrize("provisioner", list(PREFIXES))
@pytest.mark.parametrize("shape", list(GPU_ONLY))
def test_gpu_pool_recognised_by_requirement(pack, provisioner, shape):
    key, operator, values = GPU_ONLY[shape]
    one(pack.messages(_pool(provisioner, key, operator, values, tainted=False), TAINTED), "nvidia.com/gpu")
    assert pack.messages(_pool(provisioner, key, operator, values, tainted=True), TAINTED) == []


@pytest.mark.parametrize("provisioner", list(PREFIXES))
def test_cpu_pool_needs_no_gpu_taint(pack, provisioner):
    res = _pool(provisioner, "{p}instance-category", "In", ["c", "m"], tainted=False)
    assert pack.messages(res, TAINTED) == []


@pytest.mark.parametrize("provisioner", list(PREFIXES))
def test_a_zero_gpu_limit_is_a_guard_not_a_gpu_pool(pack, provisioner):
    """``limits: {nvidia.com/gpu: "0"}`` keeps GPUs off a CPU pool; a limit above zero is a GPU pool."""
    res = _pool(provisioner, "{p}instance-category", "In", ["c", "m"], tainted=False)
    assert pack.messages(patch(res, {"spec.limits": {"cpu": "1000", "nvidia.com/gpu": "0"}}), TAINTED) == []
    one(pack.messages(patch(res, {"spec.limits": {"cpu": "1000", "nvidia.com/gpu": "2"}}), TAINTED), "nvidia.com/gpu")


def test_auto_mode_gpu_pool_is_valid(pack):
    assert pack.analyze(auto_mode_nodepool()) == []


def test_auto_mode_pool_labels_still_checked_against_its_types(pack):
    res = patch(auto_mode_nodepool(), {("spec", "template", "metadata", "labels", "llm-platform.io/accelerator"): "l40s"})
    one(pack.messages(res, LABELS), "llm-platform.io/accelerator=l40s but its instance types carry a10g")


# --- GPU-facing Helm releases on their rendered tolerations, chart defaults included ------------------

AGENTS = "gpu-agents-reach-gpu-nodes"


@pytest.mark.parametrize("chart, version, override", [
    ("dcgm-exporter", "4.8.2", {"tolerations": [GPU_TOLERATION]}),
    ("nvidia-dra-driver-gpu", "25.12.0", {"kubeletPlugin": {"tolerations": [GPU_TOLERATION]}}),
])
def test_gpu_facing_chart_defaults_miss_the_gpu_taint(pack, chart, version, override):
    from tests.policies.builders import helm_release
    pool = gpu_node_group()
    if chart == "nvidia-dra-driver-gpu":  # the kubelet plugin serves DRA pools only (agentPlacement)
        pool = gpu_node_group(labels={**pool["inputs"]["labels"], "node.kubernetes.io/purpose": "gpu-dra"})
    one(pack.stack_messages([pool, helm_release(chart, version, {})], AGENTS),
        f"(chart {chart})", f"({chart} {version} default)", "does not tolerate taint nvidia.com/gpu=true:NoSchedule")
    assert pack.stack_messages([pool, helm_release(chart, version, override)], AGENTS) == []


def test_the_dra_driver_from_0_4_tolerates_the_gpu_taint_by_default(pack):
    """dra-driver-nvidia-gpu 0.4.1's values.yaml: kubeletPlugin.tolerations nvidia.com/gpu Exists NoSchedule."""
    from tests.policies.builders import helm_release
    pool = gpu_node_group()
    pool = gpu_node_group(labels={**pool["inputs"]["labels"], "node.kubernetes.io/purpose": "gpu-dra"})
    assert pack.stack_messages([pool, helm_release("dra-driver-nvidia-gpu", "0.4.1", {})], AGENTS) == []
    untolerated = {"kubeletPlugin": {"tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}]}}
    one(pack.stack_messages([pool, helm_release("dra-driver-nvidia-gpu", "0.4.1", untolerated)], AGENTS),
        "(chart dra-driver-nvidia-gpu)", "does not tolerate taint nvidia.com/gpu=true:NoSchedule")


def test_auto_mode_pool_counts_for_agents(pack):
    from tests.policies.builders import helm_release
    one(pack.stack_messages([auto_mode_nodepool(), helm_release("dcgm-exporter", "4.8.2", {})], AGENTS),
        "of Auto Mode NodePool 'auto-gpu'")


def test_digests_required_in_prod_only():
    configs = {stack: json.loads((CONFIG_DIR / f"{stack}.json").read_text()) for stack in ("dev", "prod")}
    assert configs["dev"][IMAGE]["requireDigest"] is False
    assert configs["prod"][IMAGE]["requireDigest"] is True
