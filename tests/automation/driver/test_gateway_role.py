"""The gateway's Pod Identity role, not the operator, is who calls Bedrock when a model fails: preflight
(before ``up`` of a deployed stack) and ``verify`` simulate ``bedrock:InvokeModel`` as that role on every
resource Bedrock authorizes a fallback call against, through the ``aws`` stand-in, which evaluates the
role's policy documents by IAM's evaluation rules."""

from __future__ import annotations

import json

from automation import exit_codes
from automation.driver.preflight import gateway_role_checks
from components.serving.gateway import bedrock_invoke_policy
from tests.automation.driver.test_bedrock_access import PROD_FALLBACKS

ROLE = "arn:aws:iam::123456789012:role/llm-platform-prod-gateway-bedrock"
PROD_ROLE = ROLE
SONNET, HAIKU = "us.anthropic.claude-sonnet-4-5-20250929-v1:0", "us.anthropic.claude-haiku-4-5-20251001-v1:0"


def _policies(monkeypatch, *documents) -> None:
    monkeypatch.setenv("STANDIN_IAM_POLICIES", json.dumps({ROLE: list(documents)}))


def _program_policy() -> str:
    """The inline policy the program gives the gateway's role for prod's fallbacks."""
    return bedrock_invoke_policy("aws", "us-east-1", "123456789012", [m for _, m in PROD_FALLBACKS])


def test_the_programs_policy_lets_the_role_invoke_every_fallback(aws, monkeypatch):
    _policies(monkeypatch, _program_policy())
    results = gateway_role_checks(ROLE, PROD_FALLBACKS, "us-east-1")
    assert [(r.name, r.status) for r in results] == [
        (f"bedrock gateway role {SONNET}", "PASS"),
        (f"bedrock gateway role {HAIKU}", "PASS"),
        ("bedrock gateway role cohere.embed-multilingual-v3", "PASS"),
        ("bedrock gateway role amazon.titan-embed-text-v2:0", "PASS"),
    ]
    sonnet = aws()[0]
    assert sonnet[:2] == ["iam", "simulate-principal-policy"]
    assert sonnet[sonnet.index("--policy-source-arn") + 1] == ROLE
    assert sonnet[sonnet.index("--action-names") + 1] == "bedrock:InvokeModel"
    start = sonnet.index("--resource-arns") + 1
    assert sonnet[start:start + 2] == [
        f"arn:aws:bedrock:us-east-1:123456789012:inference-profile/{SONNET}",
        "arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-sonnet-4-5-20250929-v1:0",
    ]


def test_a_role_allowed_only_the_profiles_cannot_reach_the_models_behind_them(aws, monkeypatch):
    """Textbook: the request names the inference profile, so allowing the profile is enough. Bedrock
    authorizes the routed call on the foundation model too; without it the fallback is AccessDenied."""
    profiles_only = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "bedrock:InvokeModel", "Resource": [
        f"arn:aws:bedrock:us-east-1:123456789012:inference-profile/{SONNET}",
        f"arn:aws:bedrock:us-east-1:123456789012:inference-profile/{HAIKU}",
        "arn:aws:bedrock:us-east-1::foundation-model/cohere.embed-multilingual-v3",
        "arn:aws:bedrock:us-east-1::foundation-model/amazon.titan-embed-text-v2:0"]}]}
    _policies(monkeypatch, profiles_only)
    results = {r.name: r for r in gateway_role_checks(ROLE, PROD_FALLBACKS, "us-east-1")}
    assert results["bedrock gateway role cohere.embed-multilingual-v3"].ok
    sonnet = results[f"bedrock gateway role {SONNET}"]
    assert not sonnet.ok
    assert sonnet.detail == (
        "the gateway's role llm-platform-prod-gateway-bedrock may not bedrock:InvokeModel "
        "arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-sonnet-4-5-20250929-v1:0 (implicitDeny): its "
        "fallback to this model fails with AccessDeniedException (check the role's inline policy, its permissions "
        "boundary and the account's SCPs)")


def test_an_explicit_deny_beside_the_programs_policy_wins(aws, monkeypatch):
    deny = {"Statement": {"Effect": "Deny", "Action": "bedrock:Invoke*", "Resource": "arn:aws:bedrock:*::foundation-model/cohere.*"}}
    _policies(monkeypatch, _program_policy(), deny)
    failed = [r for r in gateway_role_checks(ROLE, PROD_FALLBACKS, "us-east-1") if not r.ok]
    assert [r.name for r in failed] == ["bedrock gateway role cohere.embed-multilingual-v3"]
    assert "(explicitDeny)" in failed[0].detail


def test_a_bad_role_arn_or_answer_is_one_line(aws, monkeypatch):
    [bad] = gateway_role_checks("arn:aws:iam::123:user/x\n", PROD_FALLBACKS, "us-east-1")
    assert not bad.ok and "\n" not in bad.detail.replace("\\n", "")
    monkeypatch.setenv("STANDIN_IAM_POLICIES", json.dumps({}))
    missing = gateway_role_checks(ROLE, PROD_FALLBACKS[:1], "us-east-1")[0]
    assert not missing.ok and missing.detail.startswith("cannot simulate llm-platform-prod-gateway-bedrock's policies: ")


def test_verify_and_up_simulate_the_deployed_role(rig):
    """End to end through the CLI stand-ins: ``verify`` judges the role as deployed; ``up`` judges it with the
    inline policy it is about to set, so a role that has none yet passes and an explicit deny stops it."""
    assert rig.run("up", "--stack", "prod", "--endpoint-reachable").code == exit_codes.OK
    rig.monkeypatch.setenv("STANDIN_IAM_POLICIES", json.dumps({PROD_ROLE: []}))
    result = rig.run("verify", "--stack", "prod", "--kubectl", rig.kubectl, "--timeout", "0s", "--endpoint-reachable",
                     "--json")
    assert result.code == exit_codes.FAILED
    checks = {c["name"]: c for c in json.loads(result.out)["checks"]}
    assert checks[f"bedrock {SONNET}"]["status"] == "PASS", "the operator may invoke it"
    assert checks[f"bedrock gateway role {SONNET}"]["status"] == "FAIL", "the gateway's role may not"

    up = rig.run("up", "--stack", "prod", "--endpoint-reachable")
    assert up.code == exit_codes.OK, up.err  # the policy this up sets is part of the simulation
    deny = {"Statement": [{"Effect": "Deny", "Action": "bedrock:*", "Resource": "*"}]}
    rig.monkeypatch.setenv("STANDIN_IAM_POLICIES", json.dumps({PROD_ROLE: [deny]}))
    refused = rig.run("up", "--stack", "prod", "--endpoint-reachable")
    assert refused.code == exit_codes.PREFLIGHT
    assert f"FAIL  bedrock gateway role {SONNET}: the gateway's role llm-platform-prod-gateway-bedrock may not" in refused.err
