"""Gateway: LiteLLM on the system pool, cascading each self-hosted model to Bedrock."""

from __future__ import annotations

import json

import yaml

from automation.offline.wire import SECRET_SIG, SIG_KEY
from components import contract, versions
from components.serving.gateway import bedrock_invoke_policy


def config(plan):
    (config_map,) = [r.inputs for r in plan.of_type("kubernetes:core/v1:ConfigMap") if r.inputs["metadata"]["name"] == "llm-gateway"]
    return yaml.safe_load(config_map["data"]["config.yaml"])


def test_routes_every_model_and_falls_back_to_bedrock(prod_plan):
    cfg = config(prod_plan)
    routes = {m["model_name"]: m["litellm_params"] for m in cfg["model_list"]}
    assert routes["bge-m3"] == {
        "model": "hosted_vllm/bge-m3",
        "api_base": "http://bge-m3.serving-embedding.svc.cluster.local:8000/v1",
        "api_key": "os.environ/MODEL_API_KEY_EMBEDDING",
        "timeout": 45,
        "stream_timeout": 45,
    }
    assert routes["us.anthropic.claude-sonnet-4-5-20250929-v1:0"]["model"] == "bedrock/us.anthropic.claude-sonnet-4-5-20250929-v1:0"
    fallbacks = {k: v for entry in cfg["router_settings"]["fallbacks"] for k, v in entry.items()}
    assert set(fallbacks) == {"bge-m3", "qwen2-5-32b-instruct", "llama-3-1-70b-instruct-awq"}
    chat = ["us.anthropic.claude-sonnet-4-5-20250929-v1:0", "us.anthropic.claude-haiku-4-5-20251001-v1:0"]
    assert fallbacks["qwen2-5-32b-instruct"] == fallbacks["llama-3-1-70b-instruct-awq"] == chat
    assert fallbacks["bge-m3"] == ["cohere.embed-multilingual-v3", "amazon.titan-embed-text-v2:0"], "embeddings fall back to embeddings"
    modes = {m["model_name"]: m["model_info"]["mode"] for m in cfg["model_list"]}
    assert modes["bge-m3"] == modes["amazon.titan-embed-text-v2:0"] == "embedding" and modes[chat[0]] == "chat"
    assert cfg["general_settings"]["master_key"] == "os.environ/LITELLM_MASTER_KEY"
    assert "prometheus" in cfg["litellm_settings"]["callbacks"]
    assert cfg["litellm_settings"]["require_auth_for_metrics_endpoint"] is True


def test_gateway_is_scraped_with_a_token_from_a_secret(dev_plan):
    (monitor,) = [r.inputs for r in dev_plan.of_type("kubernetes:monitoring.coreos.com/v1:ServiceMonitor") if r.inputs["metadata"]["name"] == "llm-gateway"]
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["authorization"] == {"type": "Bearer", "credentials": {"name": "llm-gateway-metrics", "key": "token"}}
    (token,) = [r.inputs for r in dev_plan.of_type("kubernetes:core/v1:Secret") if r.inputs["metadata"]["name"] == "llm-gateway-metrics"]
    assert token["metadata"]["namespace"] == monitor["metadata"]["namespace"] == "llm-gateway"
    assert token["stringData"][SIG_KEY] == SECRET_SIG, "the token stays a Pulumi secret"


def test_bedrock_models_are_listed_by_kind(stack_config):
    from components.capacity_check import parse_settings
    from components.settings import SettingsError

    config = stack_config("prod")
    config["llm-platform:serving"]["gateway"]["bedrockModels"].append("amazon.titan-embed-text-v2:0")
    try:
        parse_settings(config)
    except SettingsError as exc:
        assert "is an embedding model; list it under bedrockEmbeddingModels" in str(exc)
    else:
        raise AssertionError("an embedding model among chat fallbacks was accepted")


def test_gateway_runs_pinned_on_the_system_pool(dev_plan):
    (deployment,) = [r.inputs for r in dev_plan.of_type("kubernetes:apps/v1:Deployment") if r.inputs["metadata"]["name"] == "llm-gateway"]
    pod = deployment["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == contract.system_node_selector()
    assert "tolerations" not in pod
    (container,) = pod["containers"]
    assert container["image"] == str(versions.LITELLM_IMAGE)
    assert container["readinessProbe"]["httpGet"]["path"] == "/health/readiness"
    assert deployment["spec"]["replicas"] == 2


def test_master_key_is_generated_and_secret(dev_plan):
    passwords = dev_plan.of_type("random:index/randomPassword:RandomPassword")
    (master,) = [p for p in passwords if p.name.endswith("master-key")]
    assert master.inputs["length"] == 48
    (secret,) = [r.inputs for r in dev_plan.of_type("kubernetes:core/v1:Secret") if r.inputs["metadata"]["name"] == "llm-gateway"]
    assert secret["stringData"][SIG_KEY] == SECRET_SIG


def test_bedrock_role_invokes_only_configured_models(prod_plan):
    policies = [json.loads(p.inputs["policy"]) for p in prod_plan.of_type("aws:iam/rolePolicy:RolePolicy")]
    (policy,) = [p for p in policies if p["Statement"][0]["Sid"] == "InvokeConfiguredModels"]
    statement = policy["Statement"][0]
    assert statement["Action"] == ["bedrock:InvokeModel", "bedrock:InvokeModelWithResponseStream"]
    assert statement["Resource"] == [
        "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        "arn:aws:bedrock:*::foundation-model/anthropic.claude-sonnet-4-5-20250929-v1:0",
        "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-haiku-4-5-20251001-v1:0",
        "arn:aws:bedrock:*::foundation-model/anthropic.claude-haiku-4-5-20251001-v1:0",
        "arn:aws:bedrock:us-east-1::foundation-model/cohere.embed-multilingual-v3",
        "arn:aws:bedrock:us-east-1::foundation-model/amazon.titan-embed-text-v2:0",
    ]


def test_foundation_model_ids_stay_in_region():
    policy = json.loads(bedrock_invoke_policy("aws-us-gov", "us-gov-west-1", "123456789012", ["amazon.nova-pro-v1:0"]))
    assert policy["Statement"][0]["Resource"] == ["arn:aws-us-gov:bedrock:us-gov-west-1::foundation-model/amazon.nova-pro-v1:0"]
