"""Settings problems: field and cross-field errors in one round, each at its key, values shortened, secrets hidden."""

from __future__ import annotations

import copy

import pytest

from automation.stacks import read_stack_config
from components.capacity_check import parse_settings
from components.settings import SettingsError

SECRET = "hf_SENTINEL_secret_value with spaces"
SLACK_URL = "https://hooks.slack.com/services/T000/B000/SENTINELslackurl"


def _errors(config: dict) -> SettingsError:
    with pytest.raises(SettingsError) as caught:
        parse_settings(config)
    return caught.value


def test_field_and_cross_field_problems_arrive_together_shortened_and_without_secrets():
    config = copy.deepcopy(read_stack_config("prod"))
    many = [f"198.51.{i}.0/24" for i in range(40)] + ["0.0.0.0/0"]
    config["llm-platform:endpoint"] = {"publicAccess": True, "publicAccessCidrs": many}  # cross-field (production)
    config["llm-platform:kmsDeletionWindowDays"] = 3  # field
    config["llm-platform:huggingFaceToken"] = SECRET  # field, a secret
    config["llm-platform:observability"]["alerting"]["receivers"].append(
        {"name": "chat", "slack": {"apiUrl": SLACK_URL, "channel": "not a channel"}})  # field beside a secret
    error = _errors(config)
    by_key = {p.key: p for p in error.problems}
    assert {"llm-platform:endpoint.publicAccessCidrs", "llm-platform:kmsDeletionWindowDays",
            "llm-platform:huggingFaceToken"} <= set(by_key)
    assert any(k.startswith("llm-platform:observability.alerting.receivers[2].slack") for k in by_key)
    cidrs = str(by_key["llm-platform:endpoint.publicAccessCidrs"])
    assert "0.0.0.0/0 in a production stack" in cidrs
    shown = cidrs.split(": got ", 1)[1].split(": contains", 1)[0]
    assert shown.endswith("...") and len(shown) == 120, shown
    text = str(error)
    assert "SENTINEL" not in text
    assert "(secret, not shown)" in str(by_key["llm-platform:huggingFaceToken"])
    assert "llm-platform:{" not in text and not any(p.key == "llm-platform" for p in error.problems)


def test_the_gpu_budget_rule_reports_in_the_same_round_as_field_errors():
    config = copy.deepcopy(read_stack_config("dev"))
    config["llm-platform:kmsDeletionWindowDays"] = 3
    config["llm-platform:gpuBudget"] = {"maxGpus": 1, "monthlyBudgetUsd": 25000}
    keys = [p.key for p in _errors(config).problems]
    assert keys == ["llm-platform:kmsDeletionWindowDays", "llm-platform:gpuBudget.maxGpus"]
