"""Each of the gateway's Bedrock fallbacks is invoked once by preflight and by ``verify``, through
the recording ``aws`` stand-in: a fresh account's AccessDeniedException becomes one line naming the
model and the one-time step; an enabled account passes."""

from __future__ import annotations

import json
import os

from automation.driver import postdeploy
from automation.driver.preflight import (
    PreflightNeeds,
    bedrock_checks,
    bedrock_enablement_step,
    bedrock_targets,
    run_preflight,
)
from automation.stacks import read_stack_config
from components.capacity_check import parse_settings

PROD_FALLBACKS = (
    ("chat", "us.anthropic.claude-sonnet-4-5-20250929-v1:0"),
    ("chat", "us.anthropic.claude-haiku-4-5-20251001-v1:0"),
    ("embedding", "cohere.embed-multilingual-v3"),
    ("embedding", "amazon.titan-embed-text-v2:0"),
)


def prod_settings():
    return parse_settings(read_stack_config("prod"))


def test_the_targets_are_the_gateways_fallbacks_by_kind():
    assert bedrock_targets(prod_settings()) == PROD_FALLBACKS
    config = read_stack_config("prod")
    config["llm-platform:serving"]["gateway"]["enabled"] = False
    assert bedrock_targets(parse_settings(config)) == ()


def test_an_enabled_account_passes_with_one_call_per_model(aws):
    results = bedrock_checks(PROD_FALLBACKS, "us-east-1")
    assert [(r.name, r.status) for r in results] == [
        ("bedrock us.anthropic.claude-sonnet-4-5-20250929-v1:0", "PASS"),
        ("bedrock us.anthropic.claude-haiku-4-5-20251001-v1:0", "PASS"),
        ("bedrock cohere.embed-multilingual-v3", "PASS"),
        ("bedrock amazon.titan-embed-text-v2:0", "PASS"),
    ]
    calls = aws()
    assert [c[:2] for c in calls] == [["bedrock-runtime", "converse"]] * 2 + [["bedrock-runtime", "invoke-model"]] * 2
    chat = calls[0]
    assert chat[chat.index("--inference-config") + 1] == '{"maxTokens": 1}', "one output token"
    assert chat[chat.index("--region") + 1] == "us-east-1"
    cohere = calls[2]
    assert json.loads(cohere[cohere.index("--body") + 1]) == {"texts": ["ready"], "input_type": "search_query"}
    assert cohere[-1] == os.devnull


def test_a_fresh_account_names_each_marketplace_model_and_the_one_time_step(aws, monkeypatch):
    monkeypatch.setenv("STANDIN_AWS", "bedrock-unsubscribed")
    results = {r.name: r for r in bedrock_checks(PROD_FALLBACKS, "us-east-1")}
    assert results["bedrock amazon.titan-embed-text-v2:0"].ok, "Amazon's models need no subscription"
    cohere = results["bedrock cohere.embed-multilingual-v3"]
    assert not cohere.ok
    assert cohere.detail == (
        "cohere.embed-multilingual-v3 is not invocable in this account: its one-time AWS Marketplace subscription "
        "is missing: run this again as a principal allowed aws-marketplace:Subscribe, aws-marketplace:Unsubscribe, "
        "aws-marketplace:ViewSubscriptions (the first invocation subscribes the account; allow up to 15 minutes)"
    )
    haiku = results["bedrock us.anthropic.claude-haiku-4-5-20251001-v1:0"]
    assert not haiku.ok and haiku.detail.endswith("; Anthropic also needs its one-time use-case form")
    assert all("\n" not in r.detail for r in results.values()), "one line each"


def test_a_missing_anthropic_use_case_form_is_named(aws, monkeypatch):
    monkeypatch.setenv("STANDIN_AWS", "bedrock-no-use-case")
    results = {r.name: r for r in bedrock_checks(PROD_FALLBACKS, "us-east-1")}
    assert results["bedrock cohere.embed-multilingual-v3"].ok
    sonnet = results["bedrock us.anthropic.claude-sonnet-4-5-20250929-v1:0"]
    assert sonnet.detail == (
        "us.anthropic.claude-sonnet-4-5-20250929-v1:0 is not invocable in this account: submit Anthropic's one-time "
        "use-case form (Bedrock console, Model catalog, the model's page), then run this again (allow up to 15 minutes)"
    )


def test_other_failures_are_told_apart():
    assert bedrock_enablement_step("amazon.nova-pro-v1:0", "An error occurred (AccessDeniedException) when calling the "
                                   "Converse operation: You don't have access to the model with the specified model ID.") == (
        "amazon.nova-pro-v1:0 is not invocable in this account: request access to it once for the account "
        "(Bedrock console, Model access)")
    assert "an IAM policy, not the model" in bedrock_enablement_step(
        "cohere.embed-multilingual-v3", "An error occurred (AccessDeniedException) when calling the InvokeModel "
        "operation: User: arn:aws:sts::1:assumed-role/x is not authorized to perform: bedrock:InvokeModel")


def test_preflight_invokes_the_fallbacks_after_the_identity(aws, monkeypatch):
    needs = PreflightNeeds(region="us-east-1", bedrock=PROD_FALLBACKS, bedrock_region="us-east-1")
    monkeypatch.setenv("STANDIN_AWS", "bedrock-unsubscribed")
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "x")
    monkeypatch.delenv("PULUMI_CONFIG_PASSPHRASE_FILE", raising=False)
    results = run_preflight(needs, "file:///tmp", "passphrase", "3.200.0")
    assert [r.name for r in results if not r.ok] == [
        "bedrock us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        "bedrock us.anthropic.claude-haiku-4-5-20251001-v1:0",
        "bedrock cohere.embed-multilingual-v3",
    ]
    assert "bedrock amazon.titan-embed-text-v2:0" in [r.name for r in results if r.ok]
    monkeypatch.setenv("STANDIN_AWS", "no-credentials")
    names = [r.name for r in run_preflight(needs, "file:///tmp", "passphrase", "3.200.0")]
    assert not any(n.startswith("bedrock ") for n in names), "no identity, no invocation"


def test_verify_plans_and_runs_the_bedrock_checks_whatever_the_cluster(aws, monkeypatch):
    plan = postdeploy.plan_checks(prod_settings())
    assert plan.bedrock == PROD_FALLBACKS and plan.bedrock_region == "us-east-1"
    gpu_test = postdeploy.plan_checks(prod_settings(), wait_for=postdeploy.GpuTarget("gpu-interactive", "gpu-inference", 1))
    assert gpu_test.bedrock == (), "a `test` run checks the GPU path only"

    class NoNodes:
        def __call__(self, *args, input=None):
            return json.dumps({"items": []})

    poller = postdeploy.Poller(timeout=0, sleep=lambda _: None)
    monkeypatch.setenv("STANDIN_AWS", "bedrock-unsubscribed")
    results = postdeploy.run_checks(NoNodes(), plan, poller)
    bedrock = {r.name: r.status for r in results if r.name.startswith("bedrock ")}
    assert bedrock == {
        "bedrock us.anthropic.claude-sonnet-4-5-20250929-v1:0": "FAIL",
        "bedrock us.anthropic.claude-haiku-4-5-20251001-v1:0": "FAIL",
        "bedrock cohere.embed-multilingual-v3": "FAIL",
        "bedrock amazon.titan-embed-text-v2:0": "PASS",
    }


def test_verify_on_a_fresh_account_fails_and_says_what_to_do(rig):
    """The CLI end to end: `verify --stack prod` against the stand-ins, in a fresh account."""
    from automation import exit_codes

    assert rig.run("up", "--stack", "prod", "--endpoint-reachable").code == exit_codes.OK
    rig.monkeypatch.setenv("STANDIN_AWS", "bedrock-unsubscribed")
    result = rig.run("verify", "--stack", "prod", "--kubectl", rig.kubectl, "--timeout", "0s",
                     "--endpoint-reachable", "--json")
    assert result.code == exit_codes.FAILED
    checks = {c["name"]: c for c in json.loads(result.out)["checks"]}
    assert checks["bedrock amazon.titan-embed-text-v2:0"]["status"] == "PASS"
    assert checks["bedrock cohere.embed-multilingual-v3"]["detail"].startswith(
        "cohere.embed-multilingual-v3 is not invocable in this account: its one-time AWS Marketplace subscription")

    rig.monkeypatch.setenv("STANDIN_AWS", "ok")
    assert rig.run("verify", "--stack", "prod", "--kubectl", rig.kubectl, "--timeout", "0s",
                   "--endpoint-reachable").code == exit_codes.OK
