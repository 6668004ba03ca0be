"""cold-start-budget over gRPC: each tier's coldStartBudgetSeconds (the stack's llm-platform:serving, as the
engine hands it in PULUMI_CONFIG) against the cold start capacity/cold_start.py predicts.

The pack below runs with two tiers: ``roomy`` (600 s) and ``tight`` (500 s). The figures (literal, from
the module's sources; see tests/policies/capacity/test_cold_start.py for the arithmetic):
- Llama-3.1-70B AWQ on a Karpenter NodePool of g5.12xlarge whose EC2NodeClass root volume runs at
  750 MiB/s: node 121 s + image 198 s + weights 51 s + load 51 s + compile 90 s + readiness 10 s = 520 s;
- Llama-3.1-8B on a Cluster Autoscaler group of g5.2xlarge whose launch template sets 500 MiB/s:
  node 160 s + image 206 s + weights 31 s + load 31 s + compile 90 s + readiness 10 s = 527 s;
- the same group with no throughput in its launch template runs at gp3's 125 MiB/s baseline
  (131,072,000 B/s): image 12.64e9 / 131,072,000 = 96.4 s + 28.6e9 / 131,072,000 = 218.2 s = 315 s,
  weights and load 16,060,522,496 / 131,072,000 = 122.5 s each: 160 + 315 + 123 + 123 + 90 + 10 = 820 s.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from automation.offline.pack.runner import PolicyPackRunner
from policies.capacity.engine import MODEL_ANNOTATION
from policies.capacity.llm import model_catalog
from tests.policies.builders import (
    GPU,
    GPU_POOL_LABELS,
    ec2nodeclass,
    gpu_node_group,
    helm_release,
    launch_template,
    nodepool,
    patch,
    resource,
    workload,
)
from tests.policies.conftest import Pack, engine_config, one, stack_yaml_config

POLICY = "cold-start-budget"
IMAGE = "vllm/vllm-openai:v0.33.0"
AUTOSCALER = helm_release("cluster-autoscaler", "9.59.0", values={}, repo="https://kubernetes.github.io/autoscaler")
KARPENTER = helm_release("karpenter", "1.14.1", values={}, repo="oci://public.ecr.aws/karpenter")
TEMPLATE = "k8s.io/cluster-autoscaler/node-template"
SERVING = {"enabled": True, "tiers": [
    {"name": "roomy", "coldStartBudgetSeconds": 600, "models": [{"name": "llama-70b-roomy"}, {"name": "llama-8b-roomy"}]},
    {"name": "tight", "coldStartBudgetSeconds": 500, "models": [{"name": "llama-70b-tight"}, {"name": "llama-8b-tight"}]},
    {"name": "unbudgeted", "models": [{"name": "llama-8b-free"}]},
]}


def _pack(serving) -> Iterator[Pack]:
    env = {"LLM_PLATFORM_POLICY_STRICT": "1", "PULUMI_CONFIG": engine_config({"llm-platform:serving": serving})}
    with PolicyPackRunner(env=env) as runner:
        pack = Pack(runner)
        pack.configure()
        yield pack


@pytest.fixture(scope="module")
def budgeted() -> Iterator[Pack]:
    yield from _pack(SERVING)


def server(name: str, catalog: str, gpus: int, pool: str, *, cpu: str, memory: str, namespace: str) -> dict:
    """A model Deployment as the program emits it: vLLM image, architecture annotation, startup probe 10 s x 180."""
    res = workload(name=name, namespace=namespace, gpus=gpus, selector={"llm-platform.io/pool": pool},
                   annotations={MODEL_ANNOTATION: json.dumps(model_catalog()[catalog].to_json())})
    return patch(res, {"spec.template.spec.containers.0": {
        "name": "vllm", "image": IMAGE,
        "args": ["/models/x", "--tensor-parallel-size", str(gpus), "--max-model-len", "8192"],
        "resources": {"requests": {"cpu": cpu, "memory": memory}, "limits": {"memory": memory, GPU: str(gpus)}},
        "startupProbe": {"httpGet": {"path": "/health", "port": "http"}, "periodSeconds": 10, "failureThreshold": 180},
    }})


def tier_namespace(name: str) -> str:
    """The namespace the program gives the tier a test model's name ends in (``llama-70b-tight``: serving-tight)."""
    return f"serving-{name.rsplit('-', 1)[-1]}"


def karpenter_stack(name: str, namespace: str | None = None) -> list[dict]:
    pool = patch(nodepool("gpu-interactive"), {
        "spec.template.spec.requirements.1.values": ["12xlarge"], "spec.limits": {GPU: "8"}})
    node_class = patch(ec2nodeclass(), {"spec.blockDeviceMappings.0.ebs.throughput": 750})
    return [KARPENTER, pool, node_class,
            server(name, "llama-3.1-70b-instruct-awq", 4, "gpu-interactive", cpu="40", memory="160Gi",
                   namespace=namespace or tier_namespace(name))]


def managed_stack(name: str, throughput: int | None = 500, namespace: str | None = None) -> list[dict]:
    owner = resource("llm-platform:index:GpuNodePool", "inference", {})
    group = patch(gpu_node_group(), {"instanceTypes": ["g5.2xlarge", "g5.4xlarge"],
                                     "scalingConfig": {"minSize": 0, "desiredSize": 0, "maxSize": 4}})
    group = resource(group["type"], "inference", group["inputs"], parent=owner)
    template = launch_template("inference-lt")
    if throughput is not None:
        template = patch(template, {"blockDeviceMappings.0.ebs.throughput": throughput})
    template = resource(template["type"], "inference-lt", template["inputs"], parent=owner)
    tags = {f"{TEMPLATE}/label/{k}": v for k, v in GPU_POOL_LABELS.items()}
    tags[f"{TEMPLATE}/taint/nvidia.com/gpu"] = "true:NoSchedule"
    tags[f"{TEMPLATE}/resources/nvidia.com/gpu"] = "1"
    asg_tags = [resource("aws:autoscaling/tag:Tag", f"tag-{i}", {"autoscalingGroupName": "eks-inference",
                                                                 "tag": {"key": k, "value": v, "propagateAtLaunch": False}},
                         parent=owner) for i, (k, v) in enumerate(tags.items())]
    return [owner, group, template, AUTOSCALER, *asg_tags,
            server(name, "llama-3.1-8b-instruct", 1, "inference", cpu="6", memory="28Gi",
                   namespace=namespace or tier_namespace(name))]


def test_prod_like_70b_fits_a_600_second_budget(budgeted):
    assert budgeted.stack_messages(karpenter_stack("llama-70b-roomy"), POLICY) == []


def test_prod_like_70b_over_a_500_second_budget_names_the_step(budgeted):
    one(budgeted.stack_messages(karpenter_stack("llama-70b-tight"), POLICY),
        "llama-70b-tight (tier tight) starts cold in 520 s on a new g5.12xlarge of Karpenter NodePool 'gpu-interactive'",
        "above its tier's coldStartBudgetSeconds of 500",
        "the image step dominates with 198 s (vllm/vllm-openai:v0.33.0: 12.64 GB at 750 MiB/s, 28.60 GB unpacked at 150 MiB/s)",
        "Steps: node 121 s, image 198 s, weights 51 s, load 51 s, compile 90 s, readiness 10 s.")


def test_dev_like_8b_on_cluster_autoscaler(budgeted):
    assert budgeted.stack_messages(managed_stack("llama-8b-roomy"), POLICY) == []
    one(budgeted.stack_messages(managed_stack("llama-8b-tight"), POLICY),
        "llama-8b-tight (tier tight) starts cold in 527 s on a new g5.2xlarge of managed node group 'inference'",
        "the image step dominates with 206 s",
        "Steps: node 160 s, image 206 s, weights 31 s, load 31 s, compile 90 s, readiness 10 s.")


def test_a_launch_template_without_throughput_runs_at_the_gp3_baseline(budgeted):
    one(budgeted.stack_messages(managed_stack("llama-8b-roomy", throughput=None), POLICY),
        "starts cold in 820 s", "above its tier's coldStartBudgetSeconds of 600",
        "the image step dominates with 315 s (vllm/vllm-openai:v0.33.0: 12.64 GB at 125 MiB/s, 28.60 GB unpacked at 125 MiB/s)",
        "weights 123 s, load 123 s")


def test_a_tier_without_a_budget_is_not_judged(budgeted):
    assert budgeted.stack_messages(managed_stack("llama-8b-free", throughput=None), POLICY) == []


def test_an_image_without_a_size_is_named(budgeted):
    stack = karpenter_stack("llama-70b-tight")
    stack[-1] = patch(stack[-1], {"spec.template.spec.containers.0.image": "vllm/vllm-openai:v9.9.9"})
    one(budgeted.stack_messages(stack, POLICY), "image vllm/vllm-openai:v9.9.9 has no size in policies/capacity/images.json")


def test_without_a_serving_budget_nothing_is_judged(pack):
    """The session's pack has no PULUMI_CONFIG: no tier has a budget."""
    assert pack.stack_messages(karpenter_stack("llama-70b-tight"), POLICY) == []


def test_an_unreadable_budget_names_its_key():
    bad = {"tiers": [{"name": "interactive", "coldStartBudgetSeconds": "fast", "models": [{"name": "m"}]}]}
    for pack in _pack(bad):
        one(pack.stack_messages(karpenter_stack("m"), POLICY),
            "llm-platform:serving.tiers[0].coldStartBudgetSeconds must be a number of seconds > 0")


@pytest.mark.parametrize("budget, messages", [
    (600, []),
    # Streamed (weights: stream in Pulumi.prod.yaml, read from the emitted pod): no copy, a 15 s load from S3.
    # The program's EC2NodeClass carries FastImagePull, read back from its userData: the image takes 0.532 of
    # the serial 197.9 s = 105.3 s. The gpu-operator release puts the GPU Operator's path on the node step:
    # 1 + 90 + (15 + 15 + 5 + 20 + 10) = 156 s, which dominates: 156 + 105.3 + 14.6 + 90 + 10 = 376 s.
    (300, ["llama-3-1-70b-instruct-awq (tier interactive) starts cold in 376 s on a new g5.12xlarge of Karpenter "
           "NodePool 'gpu-interactive', above its tier's coldStartBudgetSeconds of 300; the node step dominates with "
           "156 s", "Steps: node 156 s, image 105 s, weights 0 s, load 15 s, compile 90 s, readiness 10 s."]),
])
def test_the_programs_prod_plan_against_an_interactive_budget(prod_plan, budget, messages):
    """The program's own prod objects: its 70B AWQ model lands on gpu-interactive, planned on g5.12xlarge, with the
    EC2NodeClass root volume at 750 MiB/s that Pulumi.prod.yaml sets; the other tiers set no budget."""
    config = stack_yaml_config("prod")
    serving = json.loads(json.dumps(config["llm-platform:serving"]))
    serving["tiers"][0]["coldStartBudgetSeconds"] = budget
    env = {"LLM_PLATFORM_POLICY_STRICT": "1", "PULUMI_CONFIG": engine_config({**config, "llm-platform:serving": serving})}
    with PolicyPackRunner(env=env) as runner:
        runner.configure({"all": "mandatory"})
        found = [v.message for v in runner.analyze_plan(prod_plan.resources) if v.policy_name == POLICY]
    assert len(found) == (1 if messages else 0)
    for expected in messages:
        assert expected in found[0], found[0]


def _two_type_stack(name: str) -> list[dict]:
    """A NodePool that may launch g5.2xlarge or g6.4xlarge: us-east-1 prices g5.2xlarge lower ($1.212 against
    $1.3232 an hour), GovCloud (us-gov-west-1) sells no g5 on demand, so Karpenter launches a g6.4xlarge there."""
    pool = patch(nodepool("gpu-inference"), {"spec.template.spec.requirements": [
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["g5.2xlarge", "g6.4xlarge"]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]})
    return [KARPENTER, pool, ec2nodeclass(), server(name, "llama-3.1-8b-instruct", 1, "gpu-inference", cpu="6",
                                                     memory="28Gi", namespace="serving-tight")]


@pytest.mark.parametrize("region, instance", [("us-east-1", "g5.2xlarge"), ("us-gov-west-1", "g6.4xlarge")])
def test_the_start_is_planned_on_the_type_the_stacks_region_launches(region, instance):
    """The node type a start is predicted on is the one the capacity simulation plans with for the stack's
    region (the cheapest fitting type there), not the catalog's default region's."""
    serving = {"tiers": [{"name": "tight", "coldStartBudgetSeconds": 60, "models": [{"name": "llama-8b"}]}]}
    env = {"LLM_PLATFORM_POLICY_STRICT": "1",
           "PULUMI_CONFIG": engine_config({"llm-platform:serving": serving, "llm-platform:region": region})}
    with PolicyPackRunner(env=env) as runner:
        pack = Pack(runner)
        pack.configure()
        one(pack.stack_messages(_two_type_stack("llama-8b"), POLICY),
            "llama-8b (tier tight) starts cold in", f"on a new {instance} of Karpenter NodePool 'gpu-inference'")


def _probe(stack: list[dict], **probe) -> list[dict]:
    return [*stack[:-1], patch(stack[-1], {"spec.template.spec.containers.0.startupProbe": {
        "httpGet": {"path": "/health", "port": "http"}, **probe}})]


def test_a_startup_probe_shorter_than_the_load_restarts_the_server_forever(pack):
    """Judged with or without a budget (the session's pack has none). The 70B AWQ model downloaded to a 750 MiB/s
    root volume loads in 51 s, compiles in 90 s and answers within one 10 s period: 151 s under the probe, which
    a textbook probe of 10 s x 3 (30 s: Kubernetes' default failureThreshold) cannot cover."""
    stack = _probe(karpenter_stack("llama-70b-free"), periodSeconds=10, failureThreshold=3)
    one(pack.stack_messages(stack, POLICY),
        "llama-70b-free needs about 151 s from its server's start to ready (load 51 s, compile 90 s, readiness 10 s) "
        "on a g5.12xlarge of Karpenter NodePool 'gpu-interactive', but its startupProbe allows 30 s "
        "(initialDelaySeconds 0 + periodSeconds 10 x failureThreshold 3)",
        "Raise failureThreshold")


@pytest.mark.parametrize("probe", [
    {"periodSeconds": 10, "failureThreshold": 16},  # 160 s >= 151 s
    {"periodSeconds": 10, "failureThreshold": 10, "initialDelaySeconds": 60},  # 60 + 100 = 160 s
])
def test_a_startup_probe_that_covers_the_load_is_compliant(pack, probe):
    assert pack.stack_messages(_probe(karpenter_stack("llama-70b-free"), **probe), POLICY) == []


def test_a_window_of_exactly_the_load_fails_one_period_short(pack):
    """15 x 10 s = 150 s < 151 s: one period short is still a restart loop."""
    one(pack.stack_messages(_probe(karpenter_stack("llama-70b-free"), periodSeconds=10, failureThreshold=15), POLICY),
        "its startupProbe allows 150 s")


def test_the_readiness_step_is_one_of_the_probes_own_periods(pack):
    """A 30 s period: readiness 30 s (not Kubernetes' default 10 s), 51 + 90 + 30 = 171 s against 30 x 5 = 150 s."""
    one(pack.stack_messages(_probe(karpenter_stack("llama-70b-free"), periodSeconds=30, failureThreshold=5), POLICY),
        "needs about 171 s from its server's start to ready (load 51 s, compile 90 s, readiness 30 s)",
        "its startupProbe allows 150 s (initialDelaySeconds 0 + periodSeconds 30 x failureThreshold 5)")


@pytest.mark.parametrize("quoted, judged", [("7200", False), (" 30 ", True), ("30.0", True)])
def test_a_quoted_budget_is_read_as_the_settings_read_it(quoted, judged):
    """``coldStartBudgetSeconds: "30"`` in the stack file reaches the pack as a JSON string; the settings read
    it as 30 seconds (pydantic's lax mode), and so does the pack, instead of calling it not a number."""
    serving = {"tiers": [{"name": "quoted", "coldStartBudgetSeconds": quoted, "models": [{"name": "m"}]}]}
    for pack in _pack(serving):
        messages = pack.stack_messages(karpenter_stack("m", "serving-quoted"), POLICY)
        if judged:
            one(messages, "m (tier quoted) starts cold in", "above its tier's coldStartBudgetSeconds of 30")
        else:
            assert messages == []


def test_a_boolean_budget_is_not_a_number():
    serving = {"tiers": [{"name": "interactive", "coldStartBudgetSeconds": True, "models": [{"name": "m"}]}]}
    for pack in _pack(serving):
        one(pack.stack_messages(karpenter_stack("m", "serving-interactive"), POLICY),
            "llm-platform:serving.tiers[0].coldStartBudgetSeconds must be a number of seconds > 0")


def test_a_deployment_that_only_shares_a_models_name_is_not_judged_by_its_tier(budgeted):
    """The tight tier's model lives in serving-tight; a team's own Deployment named llama-70b-tight in its
    namespace is not that model and gets no tier budget (a false block otherwise)."""
    assert budgeted.stack_messages(karpenter_stack("llama-70b-tight", "team-experiments"), POLICY) == []
    one(budgeted.stack_messages(karpenter_stack("llama-70b-tight"), POLICY),
        "llama-70b-tight (tier tight) starts cold in", "above its tier's coldStartBudgetSeconds of 500")
