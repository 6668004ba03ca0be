"""The gateway's role may complete a third-party Bedrock model's first-use Marketplace subscription
(the caller of that first invocation needs aws-marketplace:Subscribe, Unsubscribe, ViewSubscriptions;
docs.aws.amazon.com/bedrock/latest/userguide/model-access.html), through Bedrock only."""

from __future__ import annotations

import json

from components.serving.gateway import bedrock_invoke_policy, is_marketplace_model


def gateway_policy(plan) -> dict:
    policies = [json.loads(p.inputs["policy"]) for p in plan.of_type("aws:iam/rolePolicy:RolePolicy")]
    (policy,) = [p for p in policies if p["Statement"][0]["Sid"] == "InvokeConfiguredModels"]
    return policy


def test_the_gateway_may_subscribe_through_bedrock_on_first_invocation(stack_plan):
    """dev and prod both fall back to Anthropic models: Marketplace offerings."""
    statements = {s["Sid"]: s for s in gateway_policy(stack_plan)["Statement"]}
    assert statements["SubscribeOnFirstInvocation"] == {
        "Sid": "SubscribeOnFirstInvocation",
        "Effect": "Allow",
        "Action": ["aws-marketplace:Subscribe", "aws-marketplace:Unsubscribe", "aws-marketplace:ViewSubscriptions"],
        "Resource": "*",
        "Condition": {"StringEquals": {"aws:CalledViaLast": "bedrock.amazonaws.com"}},
    }


def test_amazon_models_alone_need_no_marketplace_actions():
    policy = json.loads(bedrock_invoke_policy("aws", "us-east-1", "123456789012", ["amazon.titan-embed-text-v2:0", "us.amazon.nova-pro-v1:0"]))
    assert [s["Sid"] for s in policy["Statement"]] == ["InvokeConfiguredModels"]


def test_which_models_are_marketplace_offerings():
    assert is_marketplace_model("us.anthropic.claude-haiku-4-5-20251001-v1:0")
    assert is_marketplace_model("cohere.embed-multilingual-v3")
    assert not is_marketplace_model("amazon.titan-embed-text-v2:0")
    assert not is_marketplace_model("eu.amazon.nova-lite-v1:0")
