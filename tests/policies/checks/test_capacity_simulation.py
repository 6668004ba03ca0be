"""capacity-simulation and capacity-overcommit over gRPC: a failing and a passing stack for each finding."""

from __future__ import annotations

import re

import pytest

from tests.policies.builders import (
    DELETE,
    GPU,
    GPU_POOL_LABELS,
    UNKNOWN,
    eks_cluster,
    gpu_node_group,
    helm_release,
    nodepool,
    patch,
    resource,
    resource_quota,
    scaled_object,
    workload,
)
from tests.policies.conftest import ROOT, one

SIM, OVER = "capacity-simulation", "capacity-overcommit"
POOL = "llm-platform:index:GpuNodePool"
TEMPLATE = "k8s.io/cluster-autoscaler/node-template"
AUTOSCALER = helm_release("cluster-autoscaler", "9.59.0", values={}, repo="https://kubernetes.github.io/autoscaler")
KARPENTER = helm_release("karpenter", "1.14.1", values={}, repo="oci://public.ecr.aws/karpenter")
SELECTOR = {"llm-platform.io/pool": "inference"}


def pool(types=("g5.2xlarge",), min_size=0, max_size=3, *, aws_child: bool = False) -> list[dict]:
    """A GpuNodePool component, its managed group (pulumi-eks component, or the aws child a real preview adds).
    3 nodes: the server's 2 max replicas plus the surge pod its default strategy adds first (25% of 2
    rounds up to 1 surge pod, down to 0 unavailable)."""
    owner = resource(POOL, "inference", {})
    group = gpu_node_group(parent=None)
    group = patch(group, {"instanceTypes": list(types), "scalingConfig": {"minSize": min_size, "desiredSize": min_size,
                                                                          "maxSize": max_size}})
    group = resource(group["type"], "inference", group["inputs"], parent=owner)
    out = [owner, group]
    if aws_child:
        out.append(resource("aws:eks/nodeGroup:NodeGroup", "inference", group["inputs"], parent=group))
    return out


def asg_tags(owner: dict, *, skip: tuple[str, ...] = ()) -> list[dict]:
    """Cluster Autoscaler node-template tags as the program emits them: aws:autoscaling/tag:Tag parented by the pool."""
    tags = {f"{TEMPLATE}/label/{k}": v for k, v in GPU_POOL_LABELS.items()}
    tags[f"{TEMPLATE}/taint/nvidia.com/gpu"] = "true:NoSchedule"
    tags[f"{TEMPLATE}/resources/nvidia.com/gpu"] = "1"
    return [
        resource("aws:autoscaling/tag:Tag", f"tag-{i}", {
            "autoscalingGroupName": "eks-inference-asg", "tag": {"key": key, "value": value, "propagateAtLaunch": False}},
            parent=owner)
        for i, (key, value) in enumerate(tags.items()) if not any(s in key for s in skip)
    ]


def server(name="vllm", *, cpu="4", memory="16Gi", gpus=1, namespace="serving", args=None, annotations=None,
           strategy=None, selector=None) -> dict:
    res = workload(name=name, namespace=namespace, gpus=gpus, selector=selector or SELECTOR, annotations=annotations)
    changes = {"spec.template.spec.containers.0.resources": {"requests": {"cpu": cpu, "memory": memory},
                                                             "limits": {"memory": memory, GPU: str(gpus)}}}
    if args is not None:
        changes["spec.template.spec.containers.0.args"] = args
    res = patch(res, changes)
    if strategy is not None:
        res["inputs"]["spec"]["strategy"] = strategy
    return res


def scaler(name="vllm", low=1, high=2, query='sum(vllm:num_requests_waiting{model_name="vllm"})', triggers=None):
    res = scaled_object(query=query, minReplicaCount=low, maxReplicaCount=high)
    res = patch(res, {"spec.scaleTargetRef.name": name, "metadata": {"name": name, "namespace": "serving"}})
    if triggers is not None:
        res = patch(res, {"spec.triggers": triggers})
    return resource(res["type"], name, res["inputs"])


def scaled_stack(*extra, types=("g5.2xlarge",), max_size=3, low=1, high=2, **server_args) -> list[dict]:
    """A clean stack: one autoscaled, fully tagged pool and one model server with its ScaledObject."""
    owner, *groups = pool(types, max_size=max_size)
    return [owner, *groups, AUTOSCALER, *asg_tags(owner), server(**server_args), scaler(low=low, high=high), *extra]


def test_a_clean_stack_has_no_findings(pack):
    assert pack.stack_messages(scaled_stack(), SIM) == []
    assert pack.stack_messages(scaled_stack(), OVER) == []


# --- capacity sources -------------------------------------------------------------------------


def test_managed_group_needs_an_autoscaler(pack):
    owner, group = pool()
    stack = [owner, group, server(), scaler()]
    one(pack.stack_messages(stack, SIM), "managed node group 'inference' may grow from 0 to 3 nodes but nothing adds them")
    assert pack.stack_messages([*stack, AUTOSCALER, *asg_tags(owner)], SIM) == []


def test_fixed_nodes_need_no_autoscaler(pack):
    owner, group = pool(min_size=3, max_size=3)
    assert pack.stack_messages([owner, group, server(), scaler()], SIM) == []


@pytest.mark.parametrize("aws_child", [False, True], ids=["mocks-shape", "preview-shape"])
def test_scale_from_zero_needs_node_template_tags(pack, aws_child):
    owner, *groups = pool(aws_child=aws_child)
    stack = [owner, *groups, AUTOSCALER, server(), scaler()]
    message = one(pack.stack_messages(stack, SIM), "sits at 0 nodes", "node-template")
    assert f"resources/{GPU}" in message and "taint/nvidia.com/gpu" in message and "label/llm-platform.io/pool" in message
    partial = asg_tags(owner, skip=("taint/",))
    one(pack.stack_messages([*stack, *partial], SIM), "lack taint/nvidia.com/gpu")
    assert pack.stack_messages([*stack, *asg_tags(owner)], SIM) == []


def test_tags_of_another_pool_do_not_count(pack):
    owner, group = pool()
    other = resource(POOL, "other", {})
    one(pack.stack_messages([owner, group, AUTOSCALER, *asg_tags(other), server(), scaler()], SIM), "sits at 0 nodes")


def test_nodepools_need_a_karpenter_controller(pack):
    stack = [nodepool(), server(selector={"llm-platform.io/pool": "gpu-inference"}), scaler()]
    one(pack.stack_messages(stack, SIM), "Karpenter NodePool 'gpu-inference'", "nothing adds them")
    assert pack.stack_messages([*stack, KARPENTER], SIM) == []


def test_auto_mode_nodepools_scale_themselves(pack):
    auto = patch(nodepool(), {"spec.template.spec.nodeClassRef": {"group": "eks.amazonaws.com", "kind": "NodeClass",
                                                                   "name": "default"},
                              "spec.template.spec.requirements.0.key": "eks.amazonaws.com/instance-family",
                              "spec.template.spec.requirements.1.key": "eks.amazonaws.com/instance-size"})
    assert pack.stack_messages([auto, server(selector={"llm-platform.io/pool": "gpu-inference"}), scaler()], SIM) == []


def test_dra_pods_cannot_use_karpenter(pack):
    sel = {"llm-platform.io/pool": "gpu-inference"}
    claim = patch(server(selector=sel), {"spec.template.spec.resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]})
    one(pack.stack_messages([KARPENTER, nodepool(), claim, scaler()], SIM), "no pool matches", "resourceClaims need a managed node group")


# --- fit: allocatable after the node's reserve and DaemonSets ---------------------------------


def test_requests_beyond_allocatable_do_not_fit(pack):
    one(pack.stack_messages(scaled_stack(memory="32Gi"), SIM),
        "requests 32.0 GiB of memory per pod", "(g5.2xlarge) has 28.6 GiB allocatable")
    one(pack.stack_messages(scaled_stack(cpu="8"), SIM), "requests 8 CPU per pod", "has 7.91 CPU")


def test_autoscaler_sizes_an_empty_group_by_its_first_type(pack):
    one(pack.stack_messages(scaled_stack(types=("g5.xlarge", "g5.4xlarge"), cpu="2", memory="20Gi"), SIM),
        "(g5.xlarge) has 13.8 GiB", "first instance type")
    assert pack.stack_messages(scaled_stack(types=("g5.4xlarge", "g5.xlarge"), cpu="2", memory="20Gi"), SIM) == []


DCGM = helm_release("dcgm-exporter", "4.8.2", repo="https://nvidia.github.io/dcgm-exporter/helm-charts",
                    values={"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]})


def test_chart_rendered_daemonsets_take_their_share(pack):
    """7.7 CPU fits a g5.2xlarge after the EKS reserve (90m) and the add-ons (aws-node 25m, kube-proxy 100m);
    the dcgm-exporter chart's default request (100m) tips it over; a values override brings it back."""
    stack = scaled_stack(eks_cluster(), helm_release(), cpu="7700m")
    assert pack.stack_messages(stack, SIM) == []
    one(pack.stack_messages([*stack, DCGM], SIM), "requests 7.70 CPU", "has 7.68 CPU", "dcgm-exporter", "kube-proxy")
    light = patch(DCGM, {"values.resources": {"requests": {"cpu": "10m"}}})
    assert pack.stack_messages([*stack, light], SIM) == []
    # a DaemonSet that does not tolerate the GPU taint never lands there (the chart's default tolerations)
    untolerated = patch(DCGM, {"values.tolerations": DELETE})
    assert pack.stack_messages([*stack, untolerated], SIM) == []


def test_explicit_daemonsets_count_too(pack):
    agent = resource("kubernetes:apps/v1:DaemonSet", "agent", {
        "metadata": {"name": "agent", "namespace": "kube-system"},
        "spec": {"template": {"spec": {"tolerations": [{"operator": "Exists"}],
                                       "containers": [{"name": "a", "resources": {"requests": {"memory": "2Gi"}}}]}}}})
    stack = scaled_stack(memory="27Gi")
    assert pack.stack_messages(stack, SIM) == []
    one(pack.stack_messages([*stack, agent], SIM), "requests 27.0 GiB of memory", "agent")


def test_ephemeral_storage_against_the_root_volume(pack):
    from tests.policies.builders import ec2nodeclass

    sel = {"llm-platform.io/pool": "gpu-inference"}
    big = patch(server(selector=sel), {"spec.template.spec.containers.0.resources.requests.ephemeral-storage": "300Gi"})
    one(pack.stack_messages([KARPENTER, nodepool(), ec2nodeclass(), big, scaler()], SIM),
        "requests 300.0 GiB of ephemeral-storage", "has 179.0 GiB")
    nvme = patch(ec2nodeclass(), {"spec.instanceStorePolicy": "RAID0"})
    assert pack.stack_messages([KARPENTER, nodepool(), nvme, big, scaler()], SIM) == []


def test_no_matching_pool(pack):
    one(pack.stack_messages(scaled_stack(selector={"llm-platform.io/pool": "elsewhere"}), SIM),
        "no pool matches its selection")


# --- pool maximums and GPU limits -------------------------------------------------------------


def test_min_replicas_must_fit_the_pool(pack):
    one(pack.stack_messages(scaled_stack(low=3, high=3, max_size=2), SIM), "cannot hold the min replicas", "3 nodes",
        "max 2")


def test_each_models_max_must_be_reachable(pack):
    one(pack.stack_messages(scaled_stack(low=1, high=4, max_size=2), SIM), "can never reach its 4 max replicas", "max 2")


def test_nodepool_gpu_limit_bounds_max_replicas(pack):
    sel = {"llm-platform.io/pool": "gpu-inference"}
    stack = [KARPENTER, nodepool(), server(selector=sel), scaler(high=3)]
    assert pack.stack_messages(stack, SIM) == []
    one(pack.stack_messages([KARPENTER, nodepool(), server(selector=sel), scaler(high=6)], SIM),
        "can never reach its 6 max replicas", "6 GPUs", "limit 4")


def test_karpenter_plans_on_the_cheapest_node_that_holds_the_pods(pack):
    """A g5 NodePool admits g5.48xlarge (8 GPUs): 3 one-GPU replicas on g5.2xlarge nodes spend 3 of a
    4-GPU limit, not 8."""
    sel = {"llm-platform.io/pool": "gpu-inference"}
    any_size = patch(nodepool(), {"spec.template.spec.requirements": [
        {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["g5"]}]})
    assert pack.stack_messages([KARPENTER, any_size, server(selector=sel), scaler(high=3)], SIM) == []
    one(pack.stack_messages([KARPENTER, any_size, server(selector=sel), scaler(high=5)], SIM),
        "can never reach its 5 max replicas", "5 GPUs of g5.2xlarge", "limit 4")


def test_shared_pool_overcommit_is_advice(pack):
    """Each model reaches its max plus its surge pod with the other at min (3+1+0, 2+1+1 of 4 nodes);
    both at max (3+2) is overcommitted, which is advice."""
    stack = [*scaled_stack(max_size=4, high=3), server("other"),
             scaler("other", low=0, high=2, query='sum(rate(litellm_requests_total{model="other"}[2m]))')]
    assert pack.stack_messages(stack, SIM) == []
    one(pack.stack_messages(stack, OVER), "overcommitted when every workload there is at max replicas", "5 nodes", "max 4")


# --- model memory -----------------------------------------------------------------------------


def test_model_weights_and_kv_cache_must_fit(pack):
    bf16 = ["--model", "Qwen/Qwen2.5-32B-Instruct", "--max-model-len", "8192"]
    one(pack.stack_messages(scaled_stack(args=bf16), SIM), "qwen2.5-32b-instruct, bf16", "will not load")
    awq = ["--model", "Qwen/Qwen2.5-32B-Instruct-AWQ", "--max-model-len", "8192"]
    assert pack.stack_messages(scaled_stack(args=awq), SIM) == []
    longer = ["--model", "Qwen/Qwen2.5-32B-Instruct-AWQ", "--max-model-len", "16384"]
    one(pack.stack_messages(scaled_stack(args=longer), SIM), "KV cache 4.0 GiB", "will not load")
    two_gpus = ["--model", "Qwen/Qwen2.5-32B-Instruct-AWQ", "--max-model-len", "16384", "--tensor-parallel-size", "2"]
    assert pack.stack_messages(scaled_stack(args=two_gpus, gpus=2, types=("g5.12xlarge",)), SIM) == []


def test_model_architecture_annotation(pack):
    arch = ('{"name": "custom", "parameters": 14000000000, "vocabSize": 128256, "hiddenSize": 5120, "layers": 40, '
            '"kvHeads": 8, "headDim": 128, "quantization": "bf16"}')
    args = ["--model", "/models/custom", "--max-model-len", "4096"]
    annotations = {"llm-platform.io/model-architecture": arch}
    one(pack.stack_messages(scaled_stack(args=args, annotations=annotations), SIM), "custom, bf16", "will not load")
    fp8 = {"llm-platform.io/model-architecture": arch.replace('"bf16"', '"fp8"')}
    assert pack.stack_messages(scaled_stack(args=args, annotations=fp8), SIM) == []


# --- quotas -----------------------------------------------------------------------------------


def test_quota_covers_max_replicas_plus_surge(pack):
    quota = resource_quota(hard={f"requests.{GPU}": "2", "requests.cpu": "16", "requests.memory": "64Gi"})
    one(pack.stack_messages(scaled_stack(quota), SIM), f"requests.{GPU} 2", "need 3 at max replicas plus 1 rollout surge")
    no_surge = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}
    assert pack.stack_messages(scaled_stack(quota, strategy=no_surge, low=2), SIM) == []
    small = resource_quota(hard={f"requests.{GPU}": "8", "requests.cpu": "8", "limits.memory": "40Gi"})
    messages = pack.stack_messages(scaled_stack(small), SIM)
    assert len(messages) == 2 and any("requests.cpu 8 CPU" in m for m in messages)
    assert any("limits.memory 40.0 GiB" in m and "48.0 GiB" in m for m in messages)


# --- wake-up signal ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "triggers, wakes",
    [
        ([{"type": "prometheus", "metadata": {"query": 'sum(vllm:num_requests_waiting{model_name="vllm"})'}}], False),
        ([{"type": "prometheus", "metadata": {"query": "avg(vllm:kv_cache_usage_perc) + sum(vllm_num_requests_running)"}},
          {"type": "cpu", "metadata": {"value": "80"}}], False),
        ([{"type": "prometheus", "metadata": {"query": 'sum(rate(litellm_proxy_total_requests_metric_total{requested_model="vllm"}[2m]))'}}], True),
        ([{"type": "prometheus", "metadata": {"query": 'sum(rate(gateway_requests_total{model="vllm"}[1m])) by (model)'}}], True),
        ([{"type": "aws-sqs-queue", "metadata": {"queueURL": "https://sqs/q", "queueLength": "5"}}], True),
        ([{"type": "cron", "metadata": {"timezone": "UTC", "start": "0 8 * * *", "end": "0 18 * * *", "desiredReplicas": "1"}}], True),
    ],
    ids=["vllm-only", "vllm-and-cpu", "gateway", "other-gateway-metric", "sqs", "cron"],
)
def test_scale_to_zero_needs_an_outside_signal(pack, triggers, wakes):
    stack = [*scaled_stack()[:-1], scaler(low=0, high=2, triggers=triggers)]
    messages = pack.stack_messages(stack, SIM)
    if wakes:
        assert messages == []
    else:
        one(messages, "may scale to zero but every trigger reads only what its own pods emit")


def test_self_metric_prefixes_are_configurable(pack):
    stack = [*scaled_stack()[:-1], scaler(low=0, high=2, query="sum(rate(litellm_requests_total[2m]))")]
    assert pack.stack_messages(stack, SIM) == []
    pack.configure({"all": "mandatory", SIM: {"selfMetricPrefixes": ["vllm:", "litellm_"]}})
    one(pack.stack_messages(stack, SIM), "may scale to zero")


# --- what is not judged -----------------------------------------------------------------------


def test_stacks_without_pools_are_not_judged(pack):
    assert pack.stack_messages([server(), scaler(low=0, high=2)], SIM) == []


def test_unknown_deciding_values_are_not_judged(pack):
    owner, group = pool()
    unknown = patch(group, {"scalingConfig": UNKNOWN})
    assert pack.stack_messages([owner, unknown, server(), scaler()], SIM) == []


# --- one calculator: the report's worst case is the pack's --------------------------------------


def test_report_and_pack_agree_on_worst_case(pack, stack_plan):
    """The offline check's summary and the pack's cap and budget policies price the same ceiling."""
    from automation.offline.report import summarize

    pack.configure({"all": "mandatory", "gpu-capacity-cap": {"maxGpus": 0}, "gpu-monthly-budget": {"monthlyBudgetUsd": 0}})
    messages = [v.message for v in pack.runner.analyze_plan(stack_plan.resources)]
    gpus = next(re.search(r"Worst-case GPU count is ([\d.]+)", m) for m in messages if "Worst-case GPU count" in m)
    spend = next(re.search(r"Worst-case GPU spend is \$([\d,]+)/month", m) for m in messages if "GPU spend" in m)
    summary = summarize(stack_plan)
    assert float(gpus.group(1)) == summary.worst_case_gpus
    assert int(spend.group(1).replace(",", "")) == pytest.approx(summary.worst_case_gpu_monthly_usd, abs=1)
    rows = {row.pool: row for row in summary.capacity}
    assert sum(r.max_gpus or 0 for r in rows.values()) == summary.worst_case_gpus


# --- rollouts at max replicas -------------------------------------------------------------
#
# The deployment controller resolves maxSurge rounding up and maxUnavailable rounding down (both 0 ->
# unavailable 1), and takes an old pod down only while `available >= replicas - maxUnavailable`. So a
# strategy whose maxUnavailable resolves to 0 needs room for its surge pod at max replicas, or the
# rollout stalls at peak; one that takes a pod down first needs no room but must leave one serving.

INTERACTIVE = {"llm-platform.io/pool": "gpu-interactive"}
SURGE = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
NO_SURGE = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}


def interactive_pool(gpu_limit: int) -> dict:
    """prod's gpu-interactive: 4-GPU g5.12xlarge nodes, on-demand, a GPU limit."""
    return patch(nodepool("gpu-interactive"), {
        "spec.template.spec.requirements.1.values": ["12xlarge"], "spec.limits": {GPU: str(gpu_limit)}})


def llama_70b(*, strategy=None, low=2, high=4) -> list[dict]:
    """prod's interactive model: 4 GPUs, 40 CPU, 160 GiB per replica, 2-4 replicas."""
    return [server(gpus=4, cpu="40", memory="160Gi", selector=INTERACTIVE, strategy=strategy),
            scaler(low=low, high=high)]


def test_prod_interactive_surge_does_not_fit_a_16_gpu_limit(pack):
    """prod gpu-interactive: 4 replicas x 4 GPUs + 1 surge x 4 GPUs = 20 GPUs needed, limit 16 -> refused."""
    message = one(pack.stack_messages([KARPENTER, interactive_pool(16), *llama_70b(strategy=SURGE)], SIM),
                  "A rollout of Deployment serving/vllm at its 4 max replicas stalls on Karpenter NodePool "
                  "'gpu-interactive'", "4 replicas x 4 GPUs + 1 surge x 4 GPUs = 20 GPUs", "needs 20 GPUs of g5.12xlarge",
                  "the pool allows limit 16", "maxSurge: 0, maxUnavailable: 1")
    assert "can never reach" not in message, "the 4 max replicas themselves fit 16 GPUs"
    assert pack.stack_messages([KARPENTER, interactive_pool(20), *llama_70b(strategy=SURGE)], SIM) == []


def test_a_pool_at_its_ceiling_rolls_out_without_surge_when_two_replicas_keep_serving(pack):
    assert pack.stack_messages([KARPENTER, interactive_pool(16), *llama_70b(strategy=NO_SURGE)], SIM) == []
    one(pack.stack_messages([KARPENTER, interactive_pool(16), *llama_70b(strategy=NO_SURGE, low=1)], SIM),
        "Deployment serving/vllm rolls out with maxSurge: 0, maxUnavailable: 1", "at its 1 min replica(s)",
        "takes 1 pod(s) down before a new one is ready, leaving 0 serving", "needs min replicas >= 2")
    # a scale-to-zero model already accepts going cold: a rollout at its one replica is no worse
    assert pack.stack_messages([KARPENTER, interactive_pool(16), *llama_70b(strategy=NO_SURGE, low=0)[:1],
                                scaler(low=0, high=4, query='sum(rate(litellm_requests_total{model="vllm"}[2m]))')],
                               SIM) == []


def test_recreate_takes_every_replica_down(pack):
    one(pack.stack_messages([KARPENTER, interactive_pool(20), *llama_70b(strategy={"type": "Recreate"}, low=3)], SIM),
        "rolls out with Recreate", "at its 3 min replica(s)", "takes 3 pod(s) down", "leaving 0 serving",
        "min replicas >= 4")


def test_textbook_surge_room_versus_the_deployment_controller(pack):
    """The default strategy (25%/25%). Textbook: every rollout adds a surge pod, so a pool holding
    exactly max replicas stalls. Engine: at 4 replicas maxUnavailable resolves to 1, the controller
    takes an old pod down first and the rollout finishes; at 2 replicas it resolves to 0 and stalls."""
    assert pack.stack_messages([KARPENTER, interactive_pool(16), *llama_70b(strategy=None, low=2, high=4)], SIM) == []
    one(pack.stack_messages([KARPENTER, interactive_pool(8), *llama_70b(strategy=None, low=1, high=2)], SIM),
        "at its 2 max replicas stalls", "2 replicas x 4 GPUs + 1 surge x 4 GPUs = 12 GPUs", "limit 8")


def test_managed_group_max_size_holds_the_surge_pod(pack):
    """prod inference-l40s-like: 4 max replicas of one GPU each + 1 surge = 5 nodes, maxSize 4 -> refused."""
    stack = scaled_stack(max_size=4, high=4, strategy=SURGE)
    one(pack.stack_messages(stack, SIM), "at its 4 max replicas stalls on managed node group 'inference'",
        "needs 5 nodes of g5.2xlarge", "the pool allows max 4")
    assert pack.stack_messages(scaled_stack(max_size=5, high=4, strategy=SURGE), SIM) == []


def test_gpu_limit_counts_the_gpus_of_the_nodes_not_the_pods_per_node(pack):
    """4 max replicas x 4 GPUs need 4 g5.12xlarge nodes = 16 GPUs: a limit of 12 can never hold them
    (one pod per node must not be read as one GPU per node)."""
    one(pack.stack_messages([KARPENTER, interactive_pool(12), *llama_70b(strategy=NO_SURGE)], SIM),
        "can never reach its 4 max replicas on Karpenter NodePool 'gpu-interactive'", "16 GPUs of g5.12xlarge",
        "limit 12")


def test_tensor_parallel_above_the_pods_gpus(pack):
    """--tensor-parallel-size 2 on a 1-GPU pod: vLLM will not start, and the weights are not split
    (the textbook estimate halves them and says the 16k-token AWQ model fits one 24 GiB GPU)."""
    pack.configure(ROOT / "policies" / "config" / "prod.json")
    args = ["--model", "Qwen/Qwen2.5-32B-Instruct-AWQ", "--max-model-len", "16384", "--tensor-parallel-size", "2"]
    messages = pack.stack_messages(scaled_stack(args=args, gpus=1), SIM)
    assert len(messages) == 2, messages
    assert any("sets --tensor-parallel-size 2 but its pod has 1 GPU(s)" in m and "will not start" in m for m in messages)
    assert any("tensor parallel 1" in m and "KV cache 4.0 GiB" in m and "will not load" in m for m in messages)
    # the compliant shape: as many GPUs per pod as ranks
    assert pack.stack_messages(scaled_stack(args=args, gpus=2, types=("g5.12xlarge",)), SIM) == []


@pytest.mark.parametrize("desired, finding", [(2, None), (1, "so it stays at 1")])
def test_a_group_without_autoscaler_keeps_its_desired_size(pack, desired, finding):
    """min 0, desired N, max 3, no autoscaler: EKS keeps N nodes. 2 desired nodes hold the server's 2 max
    replicas (1 GPU each, g5.2xlarge has 1); 1 does not. Judged before as 'stays at 0' either way."""
    pack.configure(ROOT / "policies" / "config" / "prod.json")
    owner, group = pool(min_size=0, max_size=3)
    group["inputs"]["scalingConfig"]["desiredSize"] = desired
    messages = pack.stack_messages([owner, group, server(), scaler()], SIM)
    if finding is None:
        assert messages == []
    else:
        one(messages, "managed node group 'inference' may grow from 0 to 3 nodes but nothing adds them", finding)


def test_a_priority_scoped_quota_counts_only_its_class(pack):
    """The 2-GPU quota stalls the server (3 GPUs at max + surge) only when its scopeSelector selects the
    server's priority class."""
    pack.configure(ROOT / "policies" / "config" / "prod.json")
    quota = resource_quota(hard={f"requests.{GPU}": "2"})

    def scoped(*classes):
        return patch(quota, {"spec.scopeSelector": {"matchExpressions": [
            {"scopeName": "PriorityClass", "operator": "In", "values": list(classes)}]}})

    def batch_stack(extra):
        stack = scaled_stack(extra)
        for res in stack:
            if res["type"] == "kubernetes:apps/v1:Deployment":
                res["inputs"]["spec"]["template"]["spec"]["priorityClassName"] = "batch"
        return stack

    one(pack.stack_messages(batch_stack(scoped("batch")), SIM), f"requests.{GPU} 2", "need 3 at max replicas")
    assert pack.stack_messages(batch_stack(scoped("interactive")), SIM) == []


# --- KServe InferenceService: the predictor is a workload too ----------------------------------------


def inference_service(min_replicas, max_replicas=None, gpus=1) -> dict:
    """A KServe InferenceService whose predictor (an inline pod spec, its model a container) asks for
    ``gpus`` GPUs on the pool's nodes, with the GPU toleration."""
    predictor = {"minReplicas": min_replicas, "nodeSelector": SELECTOR,
                 "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                 "model": {"modelFormat": {"name": "huggingface"}, "resources": {
                     "requests": {"cpu": "4", "memory": "16Gi"}, "limits": {"memory": "16Gi", GPU: str(gpus)}}}}
    if max_replicas is not None:
        predictor["maxReplicas"] = max_replicas
    return resource("kubernetes:serving.kserve.io/v1beta1:InferenceService", "kserve-llm", {
        "apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
        "metadata": {"name": "kserve-llm", "namespace": "kserve"}, "spec": {"predictor": predictor}})


def _kserve_stack(service: dict, max_size: int = 2) -> list[dict]:
    owner, *groups = pool(("g5.2xlarge",), max_size=max_size)
    return [owner, *groups, AUTOSCALER, *asg_tags(owner), service]


def test_an_inference_service_whose_min_replicas_outgrow_its_pool_is_refused(pack):
    """Two g5.2xlarge nodes (1 GPU each) at most; the predictor keeps 3 one-GPU replicas."""
    one(pack.stack_messages(_kserve_stack(inference_service(3, 3)), SIM),
        "InferenceService kserve/kserve-llm", "cannot hold the min replicas", "max 2")


def test_an_inference_service_within_its_pool_passes(pack):
    assert pack.stack_messages(_kserve_stack(inference_service(2, 2)), SIM) == []
    assert pack.stack_messages(_kserve_stack(inference_service(None)), SIM) == []  # KServe's default: 1
