"""Observability settings: storage that covers the rules, production rules, receivers and routes."""

from __future__ import annotations

import pytest

from components.capacity_check import parse_settings
from components.settings import SettingsError


def rejected(config) -> str:
    with pytest.raises(SettingsError) as error:
        parse_settings(config)
    return str(error.value)


def test_retention_must_cover_the_gpu_hour_window(stack_config):
    config = stack_config("dev")
    config["llm-platform:observability"] = {"prometheus": {"retentionDays": 15}}
    assert "observability.prometheus.retentionDays: got 15: shorter than the 30-day window" in rejected(config)


def test_production_needs_two_prometheus_and_a_receiver(stack_config):
    config = stack_config("prod")
    config["llm-platform:observability"] = {"prometheus": {"replicas": 1}}
    message = rejected(config)
    assert "observability.prometheus.replicas: got 1: in a production stack" in message
    assert "observability.alerting.receivers: got []: empty in a production stack" in message


def test_routes_name_known_receivers(stack_config):
    config = stack_config("prod")
    alerting = config["llm-platform:observability"]["alerting"]
    alerting["receivers"].append({"name": "chat", "slack": {"apiUrl": "https://hooks.slack.com/SECRETURL", "channel": "#x"}})
    alerting["routes"].append({"receiver": "nobody", "severities": ["critical"]})
    message = rejected(config)
    assert "alerting.routes[3].receiver: got \"nobody\": names unknown receiver" in message
    assert "SECRETURL" not in message, "the whole alerting block is shown without its credentials"


def test_routes_name_known_tiers(stack_config):
    config = stack_config("prod")
    config["llm-platform:observability"]["alerting"]["routes"].append({"receiver": "oncall-pager", "tiers": ["vip"]})
    assert "routes[3].tiers: got [\"vip\"]: names unknown tier(s) vip" in rejected(config)


def test_a_receiver_has_exactly_one_kind(stack_config):
    config = stack_config("prod")
    receiver = config["llm-platform:observability"]["alerting"]["receivers"][0]
    receiver["webhook"] = {"url": "https://example.com/hook"}
    assert "set exactly one of slack, pagerDuty, sns or webhook" in rejected(config)


def test_sns_topic_must_be_an_arn(stack_config):
    config = stack_config("prod")
    config["llm-platform:observability"]["alerting"]["receivers"][0]["sns"]["topicArn"] = "oncall"
    assert "is not an SNS topic ARN" in rejected(config)


def test_pager_duty_key_error_does_not_echo_the_key(stack_config):
    config = stack_config("dev")
    config["llm-platform:observability"] = {
        "alerting": {"receivers": [{"name": "pager", "pagerDuty": {"routingKey": "short-SECRETKEY"}}], "defaultReceiver": "pager"}
    }
    message = rejected(config)
    assert "pagerDuty.routingKey" in message and "SECRETKEY" not in message
