"""Settings: each rule rejects bad input with the key, the value and what is allowed."""

from __future__ import annotations

import copy
import subprocess
import sys
from typing import Any

import pulumi
import pytest
import yaml

from automation import exit_codes
from automation.cli import main
from automation.offline.plan import ROOT, Plan, record_plan
from automation.stacks import read_stack_config
from components.capacity_check import parse_settings
from components.settings import SettingsError, config_strings
from tests.support.config_changes import DELETE
from tests.support.config_changes import with_changes as changed

DEV = read_stack_config("dev")
PROD = read_stack_config("prod")


def with_changes(base: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """``base`` with paths under ``llm-platform:`` replaced (``gpuPools__0__scaling__minSize``)."""
    return changed(base, changes)


_DELETE = DELETE


def problems_of(config: dict[str, Any]) -> list[str]:
    with pytest.raises(SettingsError) as caught:
        parse_settings(config)
    return [str(p) for p in caught.value.problems]


def assert_rejected(config: dict[str, Any], key: str, *fragments: str) -> None:
    problems = problems_of(config)
    matching = [p for p in problems if p.startswith(f"{key}:")]
    assert matching, f"no problem reported for {key}; got {problems}"
    for fragment in fragments:
        assert any(fragment in p for p in matching), f"{fragment!r} not in {matching}"


def test_both_stacks_parse():
    dev, prod = parse_settings(DEV), parse_settings(PROD)
    assert (dev.production, prod.production) == (False, True)
    assert dev.gpu_pools[0].capacity_type == "SPOT"
    assert prod.network.nat_gateways == "perAz"


@pytest.mark.parametrize(
    "changes, key, fragments",
    [
        ({"systemPool__scaling__desiredSize": 5}, "llm-platform:systemPool.scaling.desiredSize", ["minSize <= desiredSize <= maxSize", "2 <= 5 <= 3"]),
        ({"gpuPools__0__scaling__maxSize": 0}, "llm-platform:gpuPools[0].scaling.maxSize", ["greater than or equal to 1"]),
        ({"gpuPools__0__scaling__desiredSize": 5}, "llm-platform:gpuPools[0].scaling.desiredSize", ["0 <= 5 <= 4"]),
    ],
    ids=["system-desired-above-max", "gpu-max-zero", "gpu-desired-above-max"],
)
def test_scaling_is_ordered(changes, key, fragments):
    assert_rejected(with_changes(DEV, **changes), key, *fragments)


def test_gpu_pool_takes_only_gpu_types():
    config = with_changes(DEV, gpuPools__0__instanceTypes=["g5.xlarge", "m7i.xlarge"])
    assert_rejected(config, "llm-platform:gpuPools[0].instanceTypes", "m7i.xlarge have no GPU", "allowed: g4dn.12xlarge")


def test_instance_types_must_be_in_the_catalog():
    config = with_changes(DEV, systemPool__instanceTypes=["m9z.huge"])
    assert_rejected(config, "llm-platform:systemPool.instanceTypes", "unknown instance type(s) m9z.huge", "allowed:")


def test_gpu_pool_holds_one_gpu_model():
    config = with_changes(DEV, gpuPools__0__instanceTypes=["g5.xlarge", "g6e.xlarge"])
    assert_rejected(config, "llm-platform:gpuPools[0].instanceTypes", "mixes GPU models a10g, l40s")


def test_spot_gpu_pool_needs_two_types():
    config = with_changes(DEV, gpuPools__0__instanceTypes=["g5.xlarge"])
    assert_rejected(config, "llm-platform:gpuPools[0].instanceTypes", "SPOT pool 'inference' lists 1 instance type", "at least 2")


def test_on_demand_gpu_pool_may_have_one_type():
    config = with_changes(DEV, gpuPools__0__instanceTypes=["g5.2xlarge"], gpuPools__0__capacityType="ON_DEMAND")
    assert parse_settings(config).gpu_pools[0].instance_types == ["g5.2xlarge"]


def test_gpu_pool_scales_to_zero():
    config = with_changes(DEV, gpuPools__0__scaling__minSize=1, gpuPools__0__scaling__desiredSize=1)
    assert_rejected(config, "llm-platform:gpuPools[0].scaling.minSize", "GPU pools scale to minSize 0")


def test_capacity_type_is_an_eks_value():
    config = with_changes(DEV, gpuPools__0__capacityType="spot")
    assert_rejected(config, "llm-platform:gpuPools[0].capacityType", "'ON_DEMAND', 'SPOT' or 'CAPACITY_BLOCK'")


def test_system_pool_keeps_two_nodes():
    config = with_changes(DEV, systemPool__scaling={"minSize": 1, "desiredSize": 1, "maxSize": 3})
    assert_rejected(config, "llm-platform:systemPool.scaling", "at least 2 nodes")


def test_system_pool_is_on_demand():
    config = with_changes(DEV, systemPool__capacityType="SPOT")
    assert_rejected(config, "llm-platform:systemPool.capacityType", "'ON_DEMAND'")


def test_system_pool_takes_cpu_types():
    config = with_changes(DEV, systemPool__instanceTypes=["g5.xlarge"])
    assert_rejected(config, "llm-platform:systemPool.instanceTypes", "CPU types only")


def test_production_endpoint_not_open_to_the_world():
    config = with_changes(PROD, endpoint={"publicAccess": True, "publicAccessCidrs": ["0.0.0.0/0"]})
    assert_rejected(config, "llm-platform", "0.0.0.0/0 in a production stack")


def test_dev_may_open_endpoint_to_the_world():
    config = with_changes(DEV, endpoint={"publicAccess": True, "publicAccessCidrs": ["0.0.0.0/0"]})
    assert parse_settings(config).endpoint.open_to_world


@pytest.mark.parametrize(
    "endpoint, fragment",
    [
        ({"publicAccess": True}, "publicAccessCidrs is empty"),
        ({"publicAccess": False, "publicAccessCidrs": ["203.0.113.0/24"]}, "publicAccess is false"),
        ({"publicAccess": True, "publicAccessCidrs": ["203.0.113.7/24"]}, "not an IPv4 CIDR"),
        ({"privateAccess": False}, "unknown key; allowed keys here: breakGlassRoleArn, publicAccess, publicAccessCidrs"),
    ],
    ids=["public-without-cidrs", "cidrs-without-public", "host-bits-set", "private-cannot-be-off"],
)
def test_endpoint_rules(endpoint, fragment):
    problems = problems_of(with_changes(DEV, endpoint=endpoint))
    assert any(p.startswith("llm-platform:endpoint") and fragment in p for p in problems), problems


@pytest.mark.parametrize(
    "network, key, fragment",
    [
        ({"vpcCidr": "10.0.0.0/24"}, "llm-platform:network.vpcCidr", "prefix from /16 to /20"),
        ({"vpcCidr": "8.8.0.0/16"}, "llm-platform:network.vpcCidr", "private IPv4"),
        ({"azCount": 1}, "llm-platform:network.azCount", "greater than or equal to 2"),
        ({"natGateways": "two"}, "llm-platform:network.natGateways", "'single' or 'perAz'"),
    ],
)
def test_network_rules(network, key, fragment):
    assert_rejected(with_changes(DEV, network=network), key, fragment)


def test_kubernetes_version_is_supported():
    assert_rejected(with_changes(DEV, kubernetesVersion="1.33"), "llm-platform:kubernetesVersion", "allowed: 1.34, 1.35")


def test_region_name():
    assert_rejected(with_changes(DEV, region="us-east"), "llm-platform:region", "'us-east' is not an AWS region")


def test_unknown_keys_are_errors_naming_allowed_keys():
    config = with_changes(DEV, gpuPool=[])
    config["llm-platform:systemPool"]["minsize"] = 2
    problems = problems_of(config)
    assert any(p.startswith("llm-platform:gpuPool:") and "allowed keys here: adminRoleArns" in p for p in problems)
    assert any(p.startswith("llm-platform:systemPool.minsize:") and "diskSizeGib" in p for p in problems)


def test_contract_labels_cannot_be_overridden():
    config = with_changes(DEV, gpuPools__0__labels={"node.kubernetes.io/purpose": "cpu"})
    assert_rejected(config, "llm-platform:gpuPools[0].labels.node.kubernetes.io/purpose", "set by the scheduling contract")


def test_pool_names_unique_and_dns_safe():
    pool = DEV["llm-platform:gpuPools"][0]
    assert_rejected(with_changes(DEV, gpuPools=[pool, pool]), "llm-platform:gpuPools[1].name", "pool name 'inference' is repeated")
    assert_rejected(with_changes(DEV, gpuPools__0__name="GPU_pool"), "llm-platform:gpuPools[0].name", "lowercase")


def test_admin_role_arns_are_role_arns():
    config = with_changes(DEV, adminRoleArns=["arn:aws:iam::123456789012:user/alice"])
    assert_rejected(config, "llm-platform:adminRoleArns", "not IAM role ARNs")


def test_missing_required_key():
    config = copy.deepcopy(DEV)
    del config["llm-platform:region"]
    assert_rejected(config, "llm-platform:region", "required key is missing")


def test_all_problems_reported_together():
    config = with_changes(DEV, region="mars-1", network={"azCount": 9}, gpuPools__0__capacityType="CHEAP")
    keys = {p.split(":", 2)[0] + ":" + p.split(":", 2)[1] for p in problems_of(config)}
    assert {"llm-platform:region", "llm-platform:network.azCount", "llm-platform:gpuPools[0].capacityType"} <= keys


def test_language_host_strings_parse_like_yaml():
    """The program gets every value as a string (PULUMI_CONFIG); it must mean the same settings."""
    assert parse_settings(config_strings(DEV)) == parse_settings(DEV)
    assert parse_settings(config_strings(PROD)) == parse_settings(PROD)


def test_program_refuses_bad_settings_before_registering_anything():
    config = config_strings(with_changes(DEV, gpuPools__0__instanceTypes=["m7i.xlarge", "m7i.2xlarge"]))
    plan = Plan(project="llm-platform", stack="dev")
    with pytest.raises(pulumi.RunError, match=r"llm-platform:gpuPools\[0\]\.instanceTypes: .*have no GPU"):
        record_plan("dev", config, region="us-east-1", into=plan)
    assert plan.resources == []


# --- every key of the dev stack, given a value of the wrong type, stops the check with exit 2 ---


def _wrong(value: Any) -> Any:
    if isinstance(value, bool):
        return "perhaps"
    if isinstance(value, (int, float)):
        return "many"
    if isinstance(value, str):
        return ["a", "list"]
    if isinstance(value, list):
        return "not-a-list"
    return ["not", "a", "map"]


def _leaf_paths(value: Any, path: str, key: tuple) -> list[tuple[str, tuple]]:
    paths = [(path, key)]
    if isinstance(value, dict):
        for k, v in value.items():
            paths += _leaf_paths(v, f"{path}.{k}", (*key, k))
    elif isinstance(value, list) and value and isinstance(value[0], dict):
        paths += _leaf_paths(value[0], f"{path}[0]", (*key, 0))
    return paths


DEV_KEYS = [p for k, v in DEV.items() for p in _leaf_paths(v, k, (k,))]


@pytest.mark.parametrize("path, key", DEV_KEYS, ids=[p for p, _ in DEV_KEYS])
def test_every_dev_key_wrong_typed_exits_2_naming_it(path, key, tmp_path, capsys):
    config = copy.deepcopy(DEV)
    node = config
    for part in key[:-1]:
        node = node[part]
    node[key[-1]] = _wrong(node[key[-1]])
    stack_file = tmp_path / "Pulumi.dev.yaml"
    stack_file.write_text(yaml.safe_dump({"config": config}))

    code = main(["check", "--stack", "dev", "--stack-file", str(stack_file), "--out", str(tmp_path / "out")])

    stderr = capsys.readouterr().err
    assert code == exit_codes.USAGE
    assert f"{path}:" in stderr, stderr
    assert not (tmp_path / "out" / "plan.json").exists()


def test_bad_settings_in_a_real_process_print_no_traceback(tmp_path):
    stack_file = tmp_path / "Pulumi.dev.yaml"
    stack_file.write_text(yaml.safe_dump({"config": with_changes(DEV, network={"azCount": "three"})}))
    done = subprocess.run(
        [sys.executable, "-m", "automation", "check", "--stack", "dev", "--stack-file", str(stack_file)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == exit_codes.USAGE
    assert "llm-platform:network.azCount: got \"three\"" in done.stderr
    assert "Traceback" not in done.stderr + done.stdout


# --- Karpenter settings ---

KARPENTER = DEV["llm-platform:karpenter"]


def karpenter_with(**changes):
    return with_changes(DEV, **{f"karpenter__{k}": v for k, v in changes.items()})


def test_v1beta1_consolidation_policy_is_rejected():
    config = karpenter_with(nodePools__0__consolidation={"policy": "WhenUnderutilized", "after": "5m"})
    assert_rejected(config, "llm-platform:karpenter.nodePools[0].consolidation.policy", "v1beta1 value", "WhenEmptyOrUnderutilized")


def test_budget_schedule_needs_duration():
    config = karpenter_with(nodePools__0__budgets=[{"nodes": "10%", "schedule": "0 8 * * mon-fri"}])
    assert_rejected(config, "llm-platform:karpenter.nodePools[0].budgets[0]", "schedule and duration must be set together")


@pytest.mark.parametrize("nodes", ["ten", "101%", "-1"])
def test_budget_nodes_format(nodes):
    config = karpenter_with(nodePools__0__budgets=[{"nodes": nodes}])
    assert_rejected(config, "llm-platform:karpenter.nodePools[0].budgets[0].nodes", "percentage like '10%'")


def test_consolidate_after_format():
    config = karpenter_with(nodePools__0__consolidation={"policy": "WhenEmpty", "after": "soon"})
    assert_rejected(config, "llm-platform:karpenter.nodePools[0].consolidation.after", "'30s' or '5m', or 'Never'")


def test_node_pool_weight_range():
    assert_rejected(karpenter_with(nodePools__0__weight=101), "llm-platform:karpenter.nodePools[0].weight", "less than or equal to 100")


def test_node_pool_one_gpu_model():
    config = karpenter_with(nodePools__0__instanceFamilies=["g5", "p5"])
    assert_rejected(config, "llm-platform:karpenter.nodePools[0].instanceFamilies", "mixes GPU models a10g, h100")


def test_node_pool_names_a_defined_node_class():
    assert_rejected(karpenter_with(nodePools__0__nodeClass="cpu"), "llm-platform:karpenter.nodePools[0].nodeClass", "names nodeClass 'cpu'; defined: gpu")


def test_latest_ami_needs_explicit_allowance_and_never_in_production():
    assert_rejected(karpenter_with(nodeClasses__0__ami="latest"), "llm-platform:karpenter", "use ami: latest")
    assert parse_settings(karpenter_with(nodeClasses__0__ami="latest", allowLatestAmi=True)).karpenter.allow_latest_ami
    prod = with_changes(PROD, karpenter__allowLatestAmi=True)
    assert_rejected(prod, "llm-platform:karpenter.allowLatestAmi", "true in a production stack")


def test_kubelet_gc_thresholds_ordered():
    config = karpenter_with(nodeClasses__0__kubelet={"imageGcHighThresholdPercent": 70, "imageGcLowThresholdPercent": 80})
    assert_rejected(config, "llm-platform:karpenter.nodeClasses[0].kubelet", "must be below")


def test_no_gpu_capacity_is_an_error():
    config = with_changes(DEV, gpuPools=[], karpenter__enabled=False)
    assert_rejected(config, "llm-platform", "no GPU capacity")


# --- serving settings ---


def serving_with(**changes):
    return with_changes(DEV, **{f"serving__{k}": v for k, v in changes.items()})


MODEL = "llm-platform:serving.tiers[interactive].models[llama-3-1-8b-instruct]"


def test_model_that_does_not_fit_its_gpus_is_rejected():
    """Weights plus one max-length sequence's KV cache against gpuMemoryUtilization x GPU memory."""
    config = serving_with(tiers__0__models__0__catalog="qwen2.5-32b-instruct")
    assert_rejected(config, f"{MODEL}.catalog", "bf16", "weights 61.0 GiB + KV cache 2.0 GiB = 63.0 GiB per GPU",
                    "0.9 of a 22.4 GiB GPU on 'inference' is 20.1 GiB", "will not load")
    # the AWQ INT4 checkpoint of the same model needs more than one A10G holds at 16384 tokens...
    awq = serving_with(tiers__0__models__0__catalog="qwen2.5-32b-instruct-awq", tiers__0__models__0__maxModelLen=16384)
    assert_rejected(awq, f"{MODEL}.catalog", "weights 18.0 GiB + KV cache 4.0 GiB = 22.0 GiB per GPU")
    # ...and fits at 8192
    parse_settings(serving_with(tiers__0__models__0__catalog="qwen2.5-32b-instruct-awq"))


def test_hand_written_gpu_memory_is_gone():
    assert_rejected(serving_with(tiers__0__models__0__gpuMemoryGib=40), "llm-platform:serving.tiers[0].models[0].gpuMemoryGib",
                    "unknown key")


def test_model_catalog_name_or_architecture():
    assert_rejected(serving_with(tiers__0__models__0__catalog="llama-9"), "llm-platform:serving.tiers[0].models[0].catalog",
                    "not in the model catalog", "llama-3.1-8b-instruct")
    arch = {"parameters": 8030261248, "vocabSize": 128256, "hiddenSize": 4096, "layers": 32, "kvHeads": 8,
            "headDim": 128, "quantization": "bf16"}
    both = serving_with(tiers__0__models__0__architecture=arch)
    assert_rejected(both, "llm-platform:serving.tiers[0].models[0]", "exactly one of catalog")
    override = serving_with(tiers__0__models__0__architecture=arch, tiers__0__models__0__catalog=None)
    model = parse_settings(override).serving.tiers[0].models[0]
    assert model.resolved_architecture().weight_bytes() == pytest.approx(16.06e9, rel=1e-3)
    too_big = serving_with(tiers__0__models__0__architecture={**arch, "parameters": 14_000_000_000},
                           tiers__0__models__0__catalog=None)
    assert_rejected(too_big, f"{MODEL}.catalog", "will not load")


def test_max_model_len_beyond_the_model_is_rejected():
    config = serving_with(tiers__1__models__0__maxModelLen=65536)
    assert_rejected(config, "llm-platform:serving.tiers[batch].models[qwen2-5-7b-instruct].maxModelLen",
                    "above qwen2.5-7b-instruct's 32768 positions")


def test_model_requests_must_fit_a_node_after_daemonsets():
    config = serving_with(tiers__0__models__0__cpu="8")
    assert_rejected(config, f"{MODEL}.cpu", "requests 8 CPU per pod", "(g5.2xlarge) has 7.62 CPU allocatable",
                    "DaemonSet(s) (eks-pod-identity-agent, kube-proxy, aws-node, nvidia-device-plugin, dcgm-exporter, prometheus-node-exporter, vllm-image)")


def test_model_that_can_never_reach_its_max_is_rejected():
    config = serving_with(tiers__0__models__0__replicas={"min": 0, "max": 5})
    assert_rejected(config, f"{MODEL}.replicas.max", "can never reach its 5 max replicas", "5 nodes", "max 4")


def test_tensor_parallel_stays_within_a_node():
    config = serving_with(tiers__0__models__0__gpusPerReplica=2, tiers__0__quota={"gpus": 8, "cpu": "32", "memory": "192Gi"})
    assert_rejected(config, "llm-platform:serving.tiers[interactive].models[llama-3-1-8b-instruct].gpusPerReplica", "'inference' nodes have at most 1 GPUs")


def test_model_pool_must_exist_and_serve_inference():
    assert_rejected(serving_with(tiers__0__models__0__pool="nowhere"), "llm-platform:serving.tiers[interactive].models[llama-3-1-8b-instruct].pool", "not a GPU pool; allowed: gpu-inference")
    assert_rejected(serving_with(tiers__0__models__0__pool="gpu-training"), "llm-platform:serving.tiers[interactive].models[llama-3-1-8b-instruct].pool", "a gpu-training pool")


def test_production_models_keep_a_warm_replica():
    config = with_changes(PROD, serving__tiers__0__models__0__replicas={"min": 0, "max": 4})
    assert_rejected(config, "llm-platform:serving.tiers[interactive].models[llama-3-1-70b-instruct-awq].replicas.min",
                    "0 in a production stack")


def test_tier_quota_must_cover_max_replicas_plus_surge():
    config = serving_with(tiers__0__quota={"gpus": 3, "cpu": "20", "memory": "100Gi"})
    quota = "llm-platform:serving.tiers[interactive].quota"
    assert_rejected(config, f"{quota}.gpus", "allows requests.nvidia.com/gpu 3", "need 4 at max replicas plus 1 rollout surge")
    assert_rejected(config, f"{quota}.cpu", "allows requests.cpu 20 CPU", "need 24 CPU")
    assert_rejected(config, f"{quota}.memory", "need 112.0 GiB")


def test_hugging_face_models_need_the_token_secret():
    source = {"huggingFace": "meta-llama/Llama-3.1-8B-Instruct"}
    assert_rejected(serving_with(tiers__0__models__0__source=source), "llm-platform:huggingFaceToken", "loads from Hugging Face", "--secret")
    config = serving_with(tiers__0__models__0__source=source)
    config["llm-platform:huggingFaceToken"] = "hf_example"
    assert parse_settings(config).hugging_face_token.get_secret_value() == "hf_example"


def test_model_source_is_exactly_one():
    source = {"s3": "s3://bucket/p/", "huggingFace": "org/repo"}
    assert_rejected(serving_with(tiers__0__models__0__source=source), "llm-platform:serving.tiers[0].models[0].source", "exactly one")
    assert_rejected(serving_with(tiers__0__models__0__source={"s3": "s3://bucket/no-slash"}),
                    "llm-platform:serving.tiers[0].models[0].source.s3", "trailing /")


def test_bedrock_models_need_a_region():
    assert_rejected(serving_with(gateway__bedrockRegion=None), "llm-platform:serving.gateway.bedrockRegion", "required when bedrockModels")


def test_karpenter_max_pods_above_what_the_cni_gives_is_rejected():
    karpenter = copy.deepcopy(DEV["llm-platform:karpenter"])
    karpenter["nodeClasses"][0]["kubelet"] = {"maxPods": 110}
    assert_rejected(
        with_changes(DEV, karpenter=karpenter), "llm-platform:karpenter",
        "the VPC CNI gives g5.xlarge", "only 58 pod IPs", "remove maxPods",
    )
    karpenter["nodeClasses"][0]["kubelet"] = {"maxPods": 58}
    assert parse_settings(with_changes(DEV, karpenter=karpenter)).karpenter.node_classes[0].kubelet.max_pods == 58


def test_break_glass_role_must_be_an_iam_role_arn():
    problems = problems_of(with_changes(DEV, endpoint={"breakGlassRoleArn": "arn:aws:iam::123:user/me"}))
    assert any(p.startswith("llm-platform:endpoint.breakGlassRoleArn") and "not an IAM role ARN" in p for p in problems), problems
    assert parse_settings(with_changes(DEV, endpoint={"breakGlassRoleArn": "arn:aws:iam::123456789012:role/glass"})).endpoint.break_glass_role_arn


def test_program_takes_a_decrypted_secret_and_warns_only_for_plain_text(monkeypatch):
    """Under the engine, a ``--secret`` value arrives decrypted with its key in PULUMI_CONFIG_SECRET_KEYS;
    a plain one is used too, with one warning that names the key and never the value."""
    import json

    from components.platform import stack_settings

    token = "hf_CANARYprogram0123456789"
    config = config_strings(serving_with(tiers__0__models__0__source={"huggingFace": "meta-llama/Llama-3.1-8B-Instruct"}))
    config["llm-platform:huggingFaceToken"] = token
    warnings: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *a, **k: warnings.append(message))
    monkeypatch.setenv("PULUMI_CONFIG", json.dumps(config))
    monkeypatch.setenv("PULUMI_CONFIG_SECRET_KEYS", json.dumps(["llm-platform:huggingFaceToken"]))
    assert stack_settings().settings.hugging_face_token.get_secret_value() == token
    assert warnings == []
    monkeypatch.setenv("PULUMI_CONFIG_SECRET_KEYS", "[]")
    stack_settings()
    assert len(warnings) == 1 and "llm-platform:huggingFaceToken" in warnings[0] and token not in warnings[0]


def test_encrypted_values_read_offline_stand_for_an_opaque_secret():
    """``{secure: v1:...}`` (``pulumi config set --secret``, with ``--path`` for nested leaves) cannot be
    decrypted offline: it passes as a present secret of the right shape, never shown."""
    config = serving_with(tiers__0__models__0__source={"huggingFace": "meta-llama/Llama-3.1-8B-Instruct"})
    config["llm-platform:huggingFaceToken"] = {"secure": "v1:AAAA"}
    config["llm-platform:observability"] = {"alerting": {
        "receivers": [{"name": "pager", "pagerDuty": {"routingKey": {"secure": "v1:BBBB"}}},
                      {"name": "chat", "slack": {"apiUrl": {"secure": "v1:CCCC"}, "channel": "#llm"}}],
        "defaultReceiver": "pager"}}
    settings = parse_settings(config)
    assert settings.hugging_face_token is not None and "v1:AAAA" not in repr(settings)
    from components.settings import secret_warnings

    assert secret_warnings(config) == []
    config["llm-platform:observability"]["alerting"]["receivers"][1]["slack"]["apiUrl"] = "https://hooks.slack.com/x"
    assert secret_warnings(config) == [
        "warning: llm-platform:observability.alerting.receivers[1].slack.apiUrl is stored in plain text; store it "
        "encrypted with `pulumi config set --secret --path 'llm-platform:observability.alerting.receivers[1].slack.apiUrl' ...`"
    ]


def test_stack_files_read_by_libyaml_as_by_pyyaml(tmp_path):
    """The fast loader gives the pure-Python loader's values, types included, for the project's
    stack files, a generated 100-model stack and YAML's corner cases; a file it cannot read is
    read again by the pure-Python loader, so errors read as they always did."""
    import yaml

    from automation import stacks
    from benchmarks.generated_stack import write_stack

    texts = [p.read_text() for p in sorted(stacks.ROOT.glob("Pulumi.*.yaml"))]
    texts.append(write_stack(100, tmp_path)[0].read_text())
    texts.append("a: &x {b: [1, 2.5, yes, null, ~, '0x1F', 0x1F, 1e3, 2026-11-25]}\nc: *x\nd: |\n  text\n  more\n"
                 "e: !!str 12\nf: 'it''s'\ng: \"\\u00e9\\t\"\nh: [] \ni: {}\nj: -.inf\nk: .nan\n")

    def typed(value):
        if isinstance(value, dict):
            return {typed(k): typed(v) for k, v in value.items()}
        if isinstance(value, list):
            return [typed(v) for v in value]
        return (type(value).__name__, repr(value))

    for text in texts:
        assert typed(stacks.load_yaml(text)) == typed(stacks._plain(yaml.load(text, Loader=stacks._StackFileLoader)))
    for broken in ("a: 1\na: 2\n", "a: [1, 2\n", "a:\n  - b\n c: 1\n"):
        with pytest.raises(yaml.YAMLError) as fast:
            stacks.load_yaml(broken)
        with pytest.raises(yaml.YAMLError) as plain:
            yaml.load(broken, Loader=stacks._StackFileLoader)
        assert str(fast.value) == str(plain.value)


def test_one_program_run_simulates_its_capacity_once(monkeypatch):
    """The verdict, the cold-start budgets and each model's await bound read one simulation: prod has
    cold-start budgets and served models, so all three readers run in this program."""
    import components.capacity_check as capacity_check

    runs = []
    real = capacity_check.simulate
    monkeypatch.setattr(capacity_check, "simulate", lambda cluster: runs.append(1) or real(cluster))
    config = read_stack_config("prod")
    assert any(t.get("coldStartBudgetSeconds") for t in config["llm-platform:serving"]["tiers"])
    record_plan("prod", config_strings(config), region="us-east-1")
    assert len(runs) == 1


def test_settings_problems_show_values_as_written(tmp_path):
    """The check parses the strings the program gets; where they fail, the problems name the
    values as the stack file writes them."""
    from automation.stacks import load_stack

    text = (ROOT / "Pulumi.dev.yaml").read_text().replace("kmsDeletionWindowDays: 7", "kmsDeletionWindowDays: 3")
    assert "kmsDeletionWindowDays: 3" in text
    path = tmp_path / "Pulumi.dev.yaml"
    path.write_text(text)
    with pytest.raises(SettingsError) as caught:
        load_stack("dev", path=path)
    assert "llm-platform:kmsDeletionWindowDays: got 3:" in str(caught.value)
