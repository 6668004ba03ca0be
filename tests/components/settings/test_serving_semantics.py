"""Serving values that parse but cannot work: a tensor-parallel size vLLM refuses, a role name IAM
refuses once Pulumi suffixes it, a threshold so large it switches a trigger off, a pod with no CPU."""

from __future__ import annotations

import copy

import pytest

from automation.stacks import read_stack_config
from components.capacity_check import parse_settings
from components.settings import SettingsError
from components.settings.serving import weights_role_name

PROD = read_stack_config("prod")


def problems(change) -> list[str]:
    config = copy.deepcopy(PROD)
    change(config["llm-platform:serving"])
    with pytest.raises(SettingsError) as caught:
        parse_settings(config)
    return [str(p) for p in caught.value.problems]


def interactive(serving) -> dict:
    return next(t for t in serving["tiers"] if t["name"] == "interactive")


def test_a_tensor_parallel_size_that_does_not_divide_the_attention_heads_is_refused():
    """Llama 3.1 70B: hiddenSize 8192 / headDim 128 = 64 attention heads, 8 KV heads; 3 GPUs divides neither."""
    def three(serving):
        interactive(serving)["models"][0]["gpusPerReplica"] = 3
    found = [p for p in problems(three) if ".gpusPerReplica:" in p]
    assert found == ["llm-platform:serving.tiers[0].models[0].gpusPerReplica: got 3: 3 GPUs does not divide the "
                     "model's 64 attention heads (hiddenSize 8192 / headDim 128): vLLM refuses that tensor-parallel "
                     "size; use a divisor of 64"]


def test_a_divisor_of_the_heads_is_accepted():
    config = copy.deepcopy(PROD)
    assert interactive(config["llm-platform:serving"])["models"][0]["gpusPerReplica"] == 4
    parse_settings(config)


@pytest.mark.parametrize("key, value, message", [
    ("ttftP95Seconds", 1e300, "Input should be less than or equal to 600"),
    ("waitingRequests", 1_000_000, "Input should be less than or equal to 10000"),
    ("gatewayRequestsPerSecond", 1e9, "Input should be less than or equal to 100000"),
])
def test_thresholds_that_would_switch_a_trigger_off_are_refused(key, value, message):
    def set_it(serving):
        interactive(serving).setdefault("scaling", {})[key] = value
    found = [p for p in problems(set_it) if f"scaling.{key}:" in p]
    assert len(found) == 1 and message in found[0]


@pytest.mark.parametrize("key, value", [("cpu", "0"), ("memory", "0Gi"), ("cpu", "0.0")])
def test_a_model_with_no_cpu_or_memory_is_refused(key, value):
    def zero(serving):
        interactive(serving)["models"][0][key] = value
    found = [p for p in problems(zero) if p.startswith(f"llm-platform:serving.tiers[0].models[0].{key}:")]
    assert len(found) == 1 and "needs more than zero" in found[0]


def test_a_role_name_iam_would_refuse_is_refused_at_the_model_name():
    """tier-interactive-<model>-weights plus Pulumi's 8 characters must stay within IAM's 64."""
    long_name = "m" + "x" * 31  # 32 characters, a valid DNS label: tier-interactive-<32>-weights is 57 + 8 = 65
    def rename(serving):
        interactive(serving)["models"][0]["name"] = long_name
    found = [p for p in problems(rename) if "S3 reader role" in p]
    assert len(found) == 1
    assert found[0].startswith("llm-platform:serving.tiers[0].models[0].name: got ")
    assert "65 characters; IAM allows 64" in found[0]


def test_the_role_name_rule_is_the_name_the_program_gives(prod_plan):
    roles = {r.name for r in prod_plan.of_type("aws:iam/role:Role")}
    assert weights_role_name("interactive", "llama-3-1-70b-instruct-awq") in roles
    assert weights_role_name("interactive", "llama-3-1-70b-instruct-awq") == "tier-interactive-llama-3-1-70b-instruct-awq-weights"
