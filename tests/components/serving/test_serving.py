"""Serving tiers: vLLM on the scheduling contract, KEDA on current metrics, quotas, priorities."""

from __future__ import annotations

import json

import pytest

from components import contract, versions
from tests.support import crd_schema

DEPLOYMENT = "kubernetes:apps/v1:Deployment"
SCALED_OBJECT = "kubernetes:keda.sh/v1alpha1:ScaledObject"


def models(plan):
    return {
        r.inputs["metadata"]["name"]: r.inputs
        for r in plan.of_type(DEPLOYMENT)
        if r.inputs["metadata"]["labels"].get("app.kubernetes.io/name") == "vllm"
    }


def of_kind(plan, type_, name):
    (found,) = [r.inputs for r in plan.of_type(type_) if r.inputs["metadata"]["name"] == name]
    return found


def test_each_stack_serves_two_models_across_two_tiers(stack_plan):
    served = models(stack_plan)
    tiers = {d["metadata"]["namespace"] for d in served.values()}
    assert len(served) >= 2 and len(tiers) >= 2


def test_model_pods_follow_the_contract(stack_plan):
    for name, deployment in models(stack_plan).items():
        pod = deployment["spec"]["template"]["spec"]
        (vllm,) = pod["containers"]
        gpus = vllm["resources"]["limits"][contract.GPU_RESOURCE]
        assert vllm["resources"]["requests"][contract.GPU_RESOURCE] == gpus, name
        assert contract.gpu_toleration() in pod["tolerations"], name
        assert set(pod["nodeSelector"]) == {contract.POOL_LABEL}, name
        annotations = deployment["spec"]["template"]["metadata"]["annotations"]
        assert int(annotations[contract.GPU_MEMORY_NEED_ANNOTATION]) > 0, name
        assert vllm["image"] == str(versions.VLLM_IMAGE), name
        args = dict(zip(vllm["args"][1::2], vllm["args"][2::2])) if "--runner" not in vllm["args"] else dict(zip(vllm["args"][3::2], vllm["args"][4::2]))
        # The model is vllm serve's positional argument: the node-local copy, or the S3 prefix it streams.
        assert vllm["args"][0].startswith("/models/" if "--load-format" not in vllm["args"] else "s3://"), name
        assert args["--tensor-parallel-size"] == gpus, name
        assert args["--served-model-name"] == name
        assert pod["priorityClassName"].startswith("llm-")
        assert pods_spread_by_zone(pod), name
        assert "replicas" not in deployment["spec"], "KEDA owns replicas; Pulumi must not reset them"


def pods_spread_by_zone(pod):
    return any(c["topologyKey"] == "topology.kubernetes.io/zone" for c in pod["topologySpreadConstraints"])


def test_model_pod_suits_long_loads_and_drains(dev_plan):
    pod = models(dev_plan)["llama-3-1-8b-instruct"]["spec"]["template"]["spec"]
    (vllm,) = pod["containers"]
    startup = vllm["startupProbe"]
    assert startup["httpGet"]["path"] == "/health"
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 1800, "weights and CUDA graphs take minutes"
    assert vllm["lifecycle"]["preStop"]["exec"]["command"][-1] == "sleep 30"
    assert pod["terminationGracePeriodSeconds"] >= 60
    # Its s3 safetensors stream by default: vLLM reads the prefix, nothing is copied to the node first.
    assert pod["initContainers"] == []
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert "model-cache" not in volumes
    assert volumes["dshm"]["emptyDir"]["medium"] == "Memory"
    args = dict(zip(vllm["args"][1::2], vllm["args"][2::2]))
    assert vllm["args"][0] == "s3://llm-platform-models-dev/meta-llama/Llama-3.1-8B-Instruct/"
    assert args["--load-format"] == "runai_streamer"
    assert (args["--gpu-memory-utilization"], args["--max-model-len"]) == ("0.9", "8192")


def test_weights_role_reads_only_its_prefix(dev_plan):
    policies = [json.loads(p.inputs["policy"]) for p in dev_plan.of_type("aws:iam/rolePolicy:RolePolicy")]
    (policy,) = [p for p in policies if p["Statement"][0].get("Sid") == "ListModelPrefix" and
                 "meta-llama/Llama-3.1-8B-Instruct/" in json.dumps(p)]
    listing, region, read = policy["Statement"]
    assert region["Action"] == "s3:GetBucketLocation" and region["Resource"] == "arn:aws:s3:::llm-platform-models-dev"
    assert listing["Resource"] == "arn:aws:s3:::llm-platform-models-dev"
    assert listing["Condition"]["StringLike"]["s3:prefix"] == [
        "meta-llama/Llama-3.1-8B-Instruct/", "meta-llama/Llama-3.1-8B-Instruct/*"
    ]
    assert read["Action"] == "s3:GetObject"
    assert read["Resource"] == "arn:aws:s3:::llm-platform-models-dev/meta-llama/Llama-3.1-8B-Instruct/*"
    associations = {a.inputs["serviceAccount"] for a in dev_plan.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")}
    assert {"llama-3-1-8b-instruct", "qwen2-5-7b-instruct"} <= associations


def test_service_pdb_and_scaler(dev_plan):
    service = of_kind(dev_plan, "kubernetes:core/v1:Service", "llama-3-1-8b-instruct")
    assert service["spec"]["trafficDistribution"] == "PreferClose"
    pdb = of_kind(dev_plan, "kubernetes:policy/v1:PodDisruptionBudget", "llama-3-1-8b-instruct")
    assert pdb["spec"]["maxUnavailable"] == 1
    scaler = of_kind(dev_plan, SCALED_OBJECT, "llama-3-1-8b-instruct")["spec"]
    assert scaler["scaleTargetRef"]["name"] == "llama-3-1-8b-instruct"
    assert (scaler["minReplicaCount"], scaler["maxReplicaCount"]) == (0, 3)
    triggers = {t["name"]: t for t in scaler["triggers"]}
    assert set(triggers) == {"gateway-demand", "waiting-requests", "kv-cache-usage", "ttft-p95"}
    for trigger in triggers.values():
        assert trigger["type"] == "prometheus"
        assert trigger["metadata"]["serverAddress"] == "http://kube-prometheus-stack-prometheus.monitoring.svc.cluster.local:9090"
    assert "vllm:num_requests_waiting{" in triggers["waiting-requests"]["metadata"]["query"]
    assert "vllm:kv_cache_usage_perc{" in triggers["kv-cache-usage"]["metadata"]["query"]
    assert "vllm:time_to_first_token_seconds_bucket{" in triggers["ttft-p95"]["metadata"]["query"]
    assert 'requested_model="llama-3-1-8b-instruct"' in triggers["gateway-demand"]["metadata"]["query"]
    assert (triggers["waiting-requests"]["metadata"]["threshold"], triggers["kv-cache-usage"]["metadata"]["threshold"]) == ("4.0", "0.75")


def test_prod_keeps_warm_replicas(prod_plan):
    for scaler in prod_plan.of_type(SCALED_OBJECT):
        assert scaler.inputs["spec"]["minReplicaCount"] >= 1, scaler.urn


@pytest.mark.usefixtures("upstream_crds")
def test_scaled_objects_pass_the_keda_crd(stack_plan):
    scalers = stack_plan.of_type(SCALED_OBJECT)
    assert scalers
    for scaler in scalers:
        outcome = crd_schema.validate(scaler.inputs)
        assert outcome.ok, (scaler.urn, outcome.schema_errors, outcome.rule_failures)
        assert not outcome.rules_not_evaluated


def test_tiers_have_priorities_quotas_and_limits(prod_plan):
    priorities = {p.inputs["metadata"]["name"]: p.inputs["value"] for p in prod_plan.of_type("kubernetes:scheduling.k8s.io/v1:PriorityClass")}
    assert max(priorities, key=priorities.get) == "llm-interactive"
    quotas = {q.inputs["metadata"]["namespace"]: q.inputs["spec"]["hard"] for q in prod_plan.of_type("kubernetes:core/v1:ResourceQuota")}
    assert quotas["serving-interactive"]["requests.nvidia.com/gpu"] == "20"
    assert set(quotas) == {"serving-interactive", "serving-embedding", "serving-batch"}
    assert len(prod_plan.of_type("kubernetes:core/v1:LimitRange")) == 3


def test_alerts_cover_the_thresholds(dev_plan):
    (rule,) = [r.inputs for r in dev_plan.of_type("kubernetes:monitoring.coreos.com/v1:PrometheusRule")]
    alerts = {a["alert"]: a for g in rule["spec"]["groups"] for a in g["rules"] if "alert" in a}
    assert not [a for a in alerts if a.startswith("GpuUtilization")], "a busy GPU is the goal of serving, not a page"
    assert alerts["GpuFramebufferExhausted"]["expr"].endswith("< 0.05"), "half of what vLLM at 0.9 leaves free"
    assert "absent(" in alerts["GatewayMetricsMissing"]["expr"]
    tiered = {(a["alert"], a["expr"].split('tier="', 1)[1].split('"', 1)[0]): a
              for g in rule["spec"]["groups"] for a in g["rules"] if 'tier="' in a.get("expr", "")}
    # each tier alerts just above its own scaling targets (target x 1.1, the HPA's tolerance)
    assert tiered[("VllmKvCacheHigh", "interactive")]["expr"].endswith("> 0.825")
    assert tiered[("VllmRequestsWaiting", "interactive")]["expr"].endswith("> 4.4")
    assert tiered[("VllmTimeToFirstTokenSlow", "interactive")]["expr"].endswith("> 1.65")
    assert tiered[("VllmTimeToFirstTokenSlow", "interactive")]["labels"]["severity"] == "critical"
    assert tiered[("VllmRequestsWaiting", "batch")]["expr"].endswith("> 17.6")
    assert tiered[("VllmTimeToFirstTokenSlow", "batch")]["expr"].endswith("> 11")
    assert tiered[("VllmTimeToFirstTokenSlow", "batch")]["labels"]["severity"] == "warning"
    assert "vllm:num_preemptions_total" in alerts["VllmPreemptions"]["expr"]
    for alert in alerts.values():
        assert len(alert["annotations"]["description"]) > 80, alert["alert"]


def test_prometheus_and_keda_are_pinned_on_the_system_pool(dev_plan):
    charts = {r.inputs["name"]: r.inputs for r in dev_plan.of_type("kubernetes:helm.sh/v3:Release")}
    assert charts["keda"]["version"] == versions.KEDA.version == "2.20.2"
    assert charts["keda"]["values"]["nodeSelector"] == contract.system_node_selector()
    stack = charts["kube-prometheus-stack"]
    assert stack["version"] == versions.KUBE_PROMETHEUS_STACK.version
    spec = stack["values"]["prometheus"]["prometheusSpec"]
    assert spec["podMonitorSelectorNilUsesHelmValues"] is False and spec["ruleSelectorNilUsesHelmValues"] is False


def test_hugging_face_source_uses_hf_transfer_and_a_secret_token():
    from tests.conftest import plan_with, read_stack_config

    serving = read_stack_config("dev")["llm-platform:serving"]
    serving["tiers"][0]["models"][0]["source"] = {"huggingFace": "meta-llama/Llama-3.1-8B-Instruct"}
    plan = plan_with("dev", serving=serving, huggingFaceToken="hf_test_token")
    (secret,) = [r.inputs for r in plan.of_type("kubernetes:core/v1:Secret") if r.inputs["metadata"]["name"] == "hugging-face-token"]
    assert secret["metadata"]["namespace"] == "serving-interactive"
    assert secret["stringData"]["4dabf18193072939515e22adb298388d"] == "1b47061264138c4ac30d75fd1eb44270", "token stays secret"
    pod = models(plan)["llama-3-1-8b-instruct"]["spec"]["template"]["spec"]
    assert pod["initContainers"] == [], "Hugging Face models download in vLLM itself"
    env = {e["name"]: e for e in pod["containers"][0]["env"]}
    assert env["HF_XET_HIGH_PERFORMANCE"]["value"] == "1"
    assert env["HF_TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": "hugging-face-token", "key": "token"}
    args = pod["containers"][0]["args"]
    assert args[0] == "meta-llama/Llama-3.1-8B-Instruct"


def test_gpu_hours_are_recorded_and_budgeted(dev_plan):
    (rule,) = [r.inputs for r in dev_plan.of_type("kubernetes:monitoring.coreos.com/v1:PrometheusRule")]
    (cost,) = [g for g in rule["spec"]["groups"] if g["name"] == "gpu-cost"]
    records = {r["record"]: r["expr"] for r in cost["rules"] if "record" in r}
    assert 'resource="nvidia_com_gpu"' in records["llm_platform:gpus_allocatable:sum"]
    assert records["llm_platform:gpu_hours:30d"].endswith("[30d:5m]) / 12")
    (alert,) = [r for r in cost["rules"] if "alert" in r]
    assert alert["expr"] == "llm_platform:gpu_hours:30d > 1500"


def test_prod_interactive_model_keeps_two_on_demand_replicas_behind_a_pdb(prod_plan):
    scaler = of_kind(prod_plan, SCALED_OBJECT, "llama-3-1-70b-instruct-awq")["spec"]
    assert scaler["minReplicaCount"] >= 2
    pdb = of_kind(prod_plan, "kubernetes:policy/v1:PodDisruptionBudget", "llama-3-1-70b-instruct-awq")["spec"]
    assert pdb["maxUnavailable"] == 1, "one replica always serves through a drain"
    pod = models(prod_plan)["llama-3-1-70b-instruct-awq"]["spec"]["template"]["spec"]
    (pool,) = [
        r.inputs for r in prod_plan.of_type("kubernetes:karpenter.sh/v1:NodePool")
        if r.inputs["metadata"]["name"] == pod["nodeSelector"][contract.POOL_LABEL]
    ]
    (capacity,) = [req for req in pool["spec"]["template"]["spec"]["requirements"] if req["key"] == "karpenter.sh/capacity-type"]
    assert capacity["values"] == ["on-demand"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda m: m["replicas"].update(min=1), "replicas.min: got 1: in a production stack the interactive tier keeps at least 2"),
        (lambda m: m.update(pool="gpu-inference"), ".pool: got \"gpu-inference\": allows Spot capacity"),
    ],
)
def test_prod_settings_refuse_a_fragile_interactive_model(stack_config, change, message):
    from components.capacity_check import parse_settings
    from components.settings import SettingsError

    config = stack_config("prod")
    (interactive,) = [t for t in config["llm-platform:serving"]["tiers"] if t["name"] == "interactive"]
    change(interactive["models"][0])
    with pytest.raises(SettingsError) as error:
        parse_settings(config)
    assert message in str(error.value)


def test_embedding_models_run_the_pooling_runner(prod_plan):
    (vllm,) = models(prod_plan)["bge-m3"]["spec"]["template"]["spec"]["containers"]
    assert vllm["args"][:3] == ["/models/bge-m3", "--runner", "pooling"]
    (chat,) = models(prod_plan)["qwen2-5-32b-instruct"]["spec"]["template"]["spec"]["containers"]
    assert "--runner" not in chat["args"]
