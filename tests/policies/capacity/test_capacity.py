"""The capacity model: its figures against upstream formulas, and its two adapters agreeing.

The capacity verdict on the stack's blueprint (``components/capacity_check.py``) judges a configuration before anything is
registered; the engine adapter (``policies/capacity/engine.py``, the pack's view) judges what the
program then emits. They must reach the same findings, shipped stacks and broken variants alike, and
those findings are the literal ones below (agreement alone passes a fault both adapters share: the
settings adapter ends in the engine's ``cluster_from_resources``). test_adapter_inputs.py states the dev
stack's simulation inputs as literal figures for each adapter.
"""

from __future__ import annotations

import pytest

from automation.offline.plan import record_plan
from automation.stacks import read_stack_config
from components.capacity_check import CheckedStack, parse_settings
from components.settings import Settings, SettingsError, config_strings, read_settings
from policies.capacity.charts import release_daemonsets
from policies.capacity.engine import cluster_from_resources, query_metrics, wake_signal
from policies.capacity.instances import allocatable, load_instances, reserved_cpu_m, reserved_memory_mib
from policies.capacity.llm import GIB, model_catalog
from policies.capacity.model import surge_pods
from policies.capacity.simulate import simulate
from tests.conftest import ROOMY_GPU_BUDGET
from tests.support.config_changes import with_changes
from tests.support.unjudged_program import UNJUDGED_PROGRAM

# --- figures ----------------------------------------------------------------------------------


@pytest.mark.parametrize("vcpu, reserved", [(2, 70), (4, 80), (8, 90), (48, 190), (192, 550)])
def test_eks_reserved_cpu(vcpu, reserved):
    """nodeadm: 6% of the first core, 1% of the second, 0.5% of cores 3-4, 0.25% of the rest."""
    assert reserved_cpu_m(vcpu) == pytest.approx(reserved)


def test_eks_reserved_memory_and_max_pods():
    catalog = load_instances()
    assert {n: catalog.instances[n].max_pods for n in ("m7i.xlarge", "g5.4xlarge", "g5.12xlarge", "g6e.12xlarge", "p5.48xlarge")} \
        == {"m7i.xlarge": 58, "g5.4xlarge": 234, "g5.12xlarge": 737, "g6e.12xlarge": 292, "p5.48xlarge": 100}
    assert reserved_memory_mib(58) == 11 * 58 + 255
    g5 = allocatable(catalog.instances["g5.2xlarge"])
    assert g5.cpu_m == 7910 and g5.pods == 58
    assert g5.memory_mib == pytest.approx(32768 * 0.925 - 893 - 100)
    assert allocatable(catalog.instances["g5.2xlarge"], max_pods=110).memory_mib == pytest.approx(32768 * 0.925 - 1465 - 100)


@pytest.mark.parametrize(
    "model, weights_gb",
    [
        ("llama-3.1-8b-instruct", 16.06),       # published safetensors: 16.1 GB
        ("qwen2.5-7b-instruct", 15.23),         # 15.2 GB
        ("qwen2.5-32b-instruct", 65.53),        # 65.5 GB
        ("qwen2.5-32b-instruct-awq", 19.34),    # 19.3 GB
        ("llama-3.1-70b-instruct-awq", 39.80),  # 39.8 GB
    ],
)
def test_weights_match_published_checkpoint_sizes(model, weights_gb):
    assert model_catalog()[model].weight_bytes() / 1e9 == pytest.approx(weights_gb, abs=0.05)


def test_kv_cache_of_one_sequence():
    llama = model_catalog()["llama-3.1-70b-instruct-awq"]
    # 2 (K and V) x 80 layers x 8 KV heads x 128 x 2 bytes per token
    assert llama.kv_bytes_per_gpu(8192, 1) == 2 * 80 * 8 * 128 * 2 * 8192
    assert llama.kv_bytes_per_gpu(8192, 4) == llama.kv_bytes_per_gpu(8192, 1) / 4
    assert llama.kv_bytes_per_gpu(8192, 16) == llama.kv_bytes_per_gpu(8192, 8)  # heads replicate beyond 8 GPUs
    assert llama.kv_bytes_per_gpu(8192, 1) / GIB == pytest.approx(2.5)


def test_chart_table_applies_the_programs_values():
    from components.gpu.operator import GpuOperatorArgs, gpu_operator_values

    rendered = release_daemonsets("gpu-operator", "v26.7.0", gpu_operator_values(GpuOperatorArgs(install_driver=False)))
    names = {d.name for d in rendered}
    assert "nvidia-driver-daemonset" not in names and "nvidia-container-toolkit-daemonset" not in names
    assert {"nvidia-device-plugin-daemonset", "nvidia-dcgm-exporter", "node-feature-discovery-worker"} <= names
    nfd = next(d for d in rendered if d.name == "node-feature-discovery-worker")
    assert (nfd.requests.cpu_m, nfd.requests.memory_mib) == (5, 64)
    assert any(t.get("key") == "nvidia.com/gpu" for t in nfd.tolerations), "the program's tolerations replace the chart's"
    assert "v0.19.0" in nfd.source
    assert release_daemonsets("gpu-operator", "v25.3.0", {}) is None, "unknown versions are not guessed"


@pytest.mark.parametrize(
    "query, metrics",
    [
        ('sum(rate(litellm_proxy_total_requests_metric_total{requested_model="m"}[2m]))',
         {"litellm_proxy_total_requests_metric_total"}),
        ("histogram_quantile(0.95, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket{a=\"b\"}[2m])))",
         {"vllm:time_to_first_token_seconds_bucket"}),
        ("avg(vllm:kv_cache_usage_perc) / on(pod) group_left max(up)", {"vllm:kv_cache_usage_perc", "up"}),
    ],
)
def test_query_metrics(query, metrics):
    assert query_metrics(query) == metrics


def test_wake_signal_and_surge():
    assert wake_signal([{"type": "prometheus", "metadata": {"query": "sum(vllm:num_requests_waiting)"}}])[0] is False
    assert wake_signal([{"type": "cron", "metadata": {}}])[0] is True
    assert [surge_pods(None, 4), surge_pods("50%", 3), surge_pods(0, 4), surge_pods(1, 4, "Recreate")] == [1, 2, 0, 0]


# --- the adapters agree -----------------------------------------------------------------------


def _config(stack: str, **changes) -> dict:
    """The stack's config with ``changes``; the variants add GPU pools, so the GPU budget is lifted."""
    return with_changes(read_stack_config(stack), {"gpuBudget": ROOMY_GPU_BUDGET, **changes})


def without_cluster_autoscaler(resources: list) -> list:
    """The plan minus the Cluster Autoscaler release and the node-template tags on the ASGs."""
    def is_autoscaler(r) -> bool:
        chart = str((r.inputs or {}).get("chart", ""))
        return r.type == "aws:autoscaling/tag:Tag" or (r.type == "kubernetes:helm.sh/v3:Release"
                                                       and chart.endswith("cluster-autoscaler"))
    return [r for r in resources if not is_autoscaler(r)]


def _read_without_verdict(config: dict) -> Settings:
    """Settings that pass the field and cross-field rules, before any capacity verdict on them."""
    read = read_settings(config)
    assert read.settings is not None and not read.problems, read.problems
    return read.settings


VARIANTS = {
    "dev": ("dev", {}),
    "prod": ("prod", {}),
    "dev-infeasible": ("dev", {
        "serving__tiers__0__models__0__cpu": "8",
        "serving__tiers__0__models__0__replicas": {"min": 1, "max": 4},
        "serving__tiers__1__models__0__catalog": "qwen2.5-32b-instruct",
        "serving__tiers__1__quota": {"gpus": 4, "cpu": "16", "memory": "64Gi"},
        "karpenter__nodePools__0__gpuLimit": 2,
    }),
    "dev-auto-mode": ("dev", {
        "autoMode": {"enabled": True, "gpuNodePools": [
            {"name": "auto-l40s", "purpose": "gpu-inference", "instanceFamilies": ["g6e"], "gpuLimit": 5}]},  # 4 + surge
        "serving__tiers__1__models__0__pool": "auto-l40s",
    }),
    "prod-infeasible": ("prod", {
        "serving__tiers__2__models__0__catalog": "qwen2.5-32b-instruct",
        "serving__tiers__2__models__0__cpu": "8",
        "serving__tiers__2__models__0__memory": "64Gi",
        "serving__tiers__0__quota": {"gpus": 16, "cpu": "128", "memory": "768Gi"},
        "serving__tiers__1__models__0__replicas": {"min": 7, "max": 8},
    }),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_settings_and_engine_adapters_agree(variant):
    stack, changes = VARIANTS[variant]
    config = _config(stack, **changes)
    settings = _read_without_verdict(config)
    plan = record_plan(stack, config_strings(config), region=settings.region, program=UNJUDGED_PROGRAM)

    from_settings = CheckedStack.of(settings).simulation
    from_engine = simulate(cluster_from_resources(plan.resources))
    seen = {f.identity() for f in from_settings.findings}
    emitted = {f.identity() for f in from_engine.findings}
    assert seen == emitted
    # and they describe the same cluster: every pod's requests, bounds, surge and model; every node's room
    def workloads(sim):
        return {w.name: (w.requests, w.limits, w.min_replicas, w.max_replicas, w.surge, w.model, w.wake_signal)
                for plan in sim.plans for w in plan.workloads}

    def shapes(sim):
        return {(p.pool.name, s.instance.name): (s.free, tuple(sorted(s.daemonsets))) for p in sim.plans for s in p.shapes}

    assert workloads(from_settings) == workloads(from_engine)
    assert shapes(from_settings) == shapes(from_engine)
    # without Cluster Autoscaler the pack names exactly the managed groups that can grow and whose
    # desired size does not already hold their workloads: the system group keeps its 2 desired nodes,
    # which hold the gateway at max replicas (judged by fixed capacity, not "stays at 2")
    bare = simulate(cluster_from_resources(without_cluster_autoscaler(plan.resources))).findings
    grows = {p.name for p in settings.gpu_pools if p.scaling.max_size > p.scaling.min_size}
    assert {f.where for f in bare if f.check == "capacity-source"} == grows
    assert from_settings.placements == from_engine.placements
    assert seen == EXPECTED_FINDINGS.get(variant, set())


#: The findings each broken variant must raise, no more and no fewer (check, workload, where, resource,
#: need, room). Quotas count max replicas plus the one surge pod: dev-infeasible's interactive model at 8
#: CPU x (4 + 1) = 40 CPU and 5 GPUs against 32 and 4; qwen2.5-32b's bf16 weights (65.0 GiB) on one
#: 24 GiB A10G; 4 one-GPU replicas against a NodePool gpuLimit of 2; the inference group's first type
#: (g5.2xlarge, the node template Cluster Autoscaler builds) has 7.62 CPU free for an 8-CPU pod (after the
#: DaemonSets, the vLLM image pre-pull's 10m included).
EXPECTED_FINDINGS = {
    "dev-infeasible": {
        ("fit", "Deployment serving-interactive/llama-3-1-8b-instruct", "inference", "cpu", "8 CPU", "7.62 CPU"),
        ("model-memory", "Deployment serving-batch/qwen2-5-7b-instruct", "gpu-inference", "gpu-memory", "65.0 GiB", "20.1 GiB"),
        ("pool-max", "Deployment serving-batch/qwen2-5-7b-instruct", "gpu-inference", "nvidia.com/gpu", "4 GPUs", "limit 2"),
        ("quota", None, "serving-batch/serving-capacity", "limits.memory", "160.0 GiB", "64.0 GiB"),
        ("quota", None, "serving-batch/serving-capacity", "requests.cpu", "20 CPU", "16 CPU"),
        ("quota", None, "serving-batch/serving-capacity", "requests.memory", "160.0 GiB", "64.0 GiB"),
        ("quota", None, "serving-batch/serving-capacity", "requests.nvidia.com/gpu", "5", "4"),
        ("quota", None, "serving-interactive/serving-capacity", "requests.cpu", "40 CPU", "32 CPU"),
        ("quota", None, "serving-interactive/serving-capacity", "requests.nvidia.com/gpu", "5", "4"),
    },
    "prod-infeasible": {
        ("fit", "Deployment serving-batch/qwen2-5-32b-instruct", "inference-l40s", "cpu", "8 CPU", "3.78 CPU"),
        ("fit", "Deployment serving-batch/qwen2-5-32b-instruct", "inference-l40s", "memory", "64.0 GiB", "28.6 GiB"),
        ("model-memory", "Deployment serving-batch/qwen2-5-32b-instruct", "inference-l40s", "gpu-memory", "65.0 GiB", "41.1 GiB"),
        # bge-m3 at 7 replicas of one GPU on a group of at most 6 one-GPU nodes
        ("pool-min", None, "inference-a10g", "nodes", "7 nodes", "max 6"),
        ("quota", None, "serving-batch/serving-capacity", "limits.memory", "320.0 GiB", "256.0 GiB"),
        ("quota", None, "serving-batch/serving-capacity", "requests.cpu", "40 CPU", "32 CPU"),
        ("quota", None, "serving-batch/serving-capacity", "requests.memory", "320.0 GiB", "256.0 GiB"),
        ("quota", None, "serving-embedding/serving-capacity", "limits.memory", "144.0 GiB", "128.0 GiB"),
        ("quota", None, "serving-embedding/serving-capacity", "requests.cpu", "36 CPU", "32 CPU"),
        ("quota", None, "serving-embedding/serving-capacity", "requests.memory", "144.0 GiB", "128.0 GiB"),
        ("quota", None, "serving-embedding/serving-capacity", "requests.nvidia.com/gpu", "9", "5"),
        ("quota", None, "serving-interactive/serving-capacity", "limits.memory", "800.0 GiB", "768.0 GiB"),
        # the 70B model at 4 GPUs x (max 4 + 1 surge) = 20 against 16
        ("quota", None, "serving-interactive/serving-capacity", "requests.cpu", "200 CPU", "128 CPU"),
        ("quota", None, "serving-interactive/serving-capacity", "requests.memory", "800.0 GiB", "768.0 GiB"),
        ("quota", None, "serving-interactive/serving-capacity", "requests.nvidia.com/gpu", "20", "16"),
    },
}


def test_infeasible_settings_exit_before_registration_with_one_line_per_problem():
    config = _config(*VARIANTS["prod-infeasible"][:1], **VARIANTS["prod-infeasible"][1])
    with pytest.raises(SettingsError) as caught:
        parse_settings(config)
    keys = {p.key for p in caught.value.problems}
    model = "llm-platform:serving.tiers[batch].models[qwen2-5-32b-instruct]"
    assert {f"{model}.catalog", f"{model}.cpu", f"{model}.memory", "llm-platform:serving.tiers[interactive].quota.gpus",
            "llm-platform:gpuPools[0].scaling.maxSize"} <= keys, keys
    for problem in caught.value.problems:
        assert "\n" not in str(problem)


def test_dev_with_a_dra_pool_passes():
    config = _config("dev")
    config["llm-platform:gpuPools"].append({
        "name": "dra", "instanceTypes": ["g5.12xlarge"], "capacityType": "ON_DEMAND", "purpose": "gpu-dra",
        "scaling": {"minSize": 1, "desiredSize": 1, "maxSize": 2}, "diskSizeGib": 200,
    })
    settings = parse_settings(config)
    plan = record_plan("dev", config_strings(config), region=settings.region)
    assert any(r.inputs.get("chart") == "oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu" for r in plan.of_type("kubernetes:helm.sh/v3:Release"))
    findings = simulate(cluster_from_resources(plan.resources)).findings
    assert findings == [], findings
    assert any(p.name == "dra" for p in cluster_from_resources(plan.resources).pools)


def test_eks_agents_skip_auto_mode_nodes():
    config = _config("dev", **VARIANTS["dev-auto-mode"][1])
    plans = {p.pool.name: p for p in CheckedStack.of(parse_settings(config)).simulation.plans}
    auto = set(plans["auto-l40s"].shapes[0].daemonsets)
    managed = set(plans["inference"].shapes[0].daemonsets)
    assert {"aws-node", "kube-proxy", "eks-pod-identity-agent", "nvidia-device-plugin"} <= managed
    assert not auto & {"aws-node", "kube-proxy", "eks-pod-identity-agent", "nvidia-device-plugin"}, auto
    assert "system" in plans and "nvidia-device-plugin" not in plans["system"].shapes[0].daemonsets


def test_every_pinned_agent_chart_has_a_daemonset_row():
    """Moving a pin in versions.py without reading the new chart's DaemonSets fails here."""
    from components import versions
    from policies.capacity.charts import CHART_DAEMONSETS

    for chart in (versions.NVIDIA_DEVICE_PLUGIN, versions.DCGM_EXPORTER, versions.NVIDIA_GPU_OPERATOR,
                  versions.KUBE_PROMETHEUS_STACK):
        assert (chart.chart, chart.version) in CHART_DAEMONSETS, chart


def test_gpu_operator_operands_reach_gpu_nodes_labelled_at_runtime():
    """A foreign stack's GPU pool without the gpu.present label still gets the operator's agents:
    NFD labels the PCI vendor and the operator sets nvidia.com/gpu.present."""
    from types import SimpleNamespace as NS

    group = NS(type="eks:index:ManagedNodeGroup", name="gpu", urn="g", parent="",
               props={"instanceTypes": ["g5.2xlarge"], "scalingConfig": {"minSize": 1, "maxSize": 1}, "labels": {},
                      "taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}]})
    gpu = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    values = {"node-feature-discovery": {"worker": {"tolerations": gpu}}}
    operator = NS(type="kubernetes:helm.sh/v3:Release", name="op", urn="o", parent="",
                  props={"chart": "gpu-operator", "version": "v26.7.0", "values": values})
    (plan,) = simulate(cluster_from_resources([group, operator])).plans
    landed = set(plan.shapes[0].daemonsets)
    assert {"node-feature-discovery-worker", "nvidia-device-plugin-daemonset", "nvidia-operator-validator"} <= landed
    # the chart's own default NFD tolerations include nvidia.com/gpu (gpu-operator v26.7.0 values.yaml)
    operator.props["values"] = {}
    (plan,) = simulate(cluster_from_resources([group, operator])).plans
    assert "node-feature-discovery-worker" in plan.shapes[0].daemonsets
    # NFD tolerating only the control plane never reaches the tainted node, so nothing labels it and no
    # operand lands either
    control_plane = [{"key": "node-role.kubernetes.io/control-plane", "operator": "Equal", "value": "", "effect": "NoSchedule"}]
    operator.props["values"] = {"node-feature-discovery": {"worker": {"tolerations": control_plane}}}
    (plan,) = simulate(cluster_from_resources([group, operator])).plans
    assert plan.shapes[0].daemonsets == [], plan.shapes[0].daemonsets


def test_nodepool_problems_name_the_gpu_limit():
    config = _config("dev", **{"karpenter__nodePools__0__gpuLimit": 2})
    with pytest.raises(SettingsError) as caught:
        parse_settings(config)
    (problem,) = caught.value.problems
    assert problem.key == "llm-platform:serving.tiers[batch].models[qwen2-5-7b-instruct].replicas.max"
    assert "limit 2" in problem.reason and problem.value == 4


@pytest.mark.parametrize("order, cpu_m", [(("init", "sidecar"), 1500.0), (("sidecar", "init"), 1700.0)])
def test_native_sidecars_sum_with_the_app_containers(order, cpu_m):
    """KEP-753's effective request (component-helpers AggregateContainerRequests): app 1000m + sidecar
    500m run together (1500m); an init container after the sidecar runs beside it (1200m + 500m = 1700m).
    The textbook max(sum of apps, largest init) says 1200m for both."""
    from policies.capacity.model import pod_requests

    containers = {"init": {"name": "migrate", "resources": {"requests": {"cpu": "1200m"}}},
                  "sidecar": {"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "500m"}}}}
    spec = {"containers": [{"name": "app", "resources": {"requests": {"cpu": "1"}}}],
            "initContainers": [containers[name] for name in order]}
    requests, _ = pod_requests(spec)
    assert requests.cpu_m == cpu_m
