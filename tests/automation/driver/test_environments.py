"""Environment metadata, expiry and config merging: pure logic, with a fixed clock."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from automation.driver import environments as envs
from automation.driver.environments import EnvMetadata, EnvRequestError
from automation.stacks import read_stack_config
from components.capacity_check import parse_settings

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
#: Pulumi's stack tag name rule (apitype.ValidateStackTags): at most 40 of these characters.
TAG_NAME = re.compile(r"^[a-zA-Z0-9\-_.:]{1,40}$")


def meta(stack: str, expires_in: timedelta, kind: str = envs.KIND_ENV) -> EnvMetadata:
    return EnvMetadata(stack=stack, kind=kind, owner="alice", created_at=NOW - timedelta(hours=1),
                       expires_at=NOW + expires_in, template="dev")


@pytest.mark.parametrize(("text", "expected"), [
    ("8h", timedelta(hours=8)), ("90m", timedelta(minutes=90)), ("2d", timedelta(days=2)),
    ("1d12h", timedelta(days=1, hours=12)), ("7d", timedelta(days=7)), ("15m", timedelta(minutes=15)),
])
def test_ttl_accepts_days_hours_minutes(text, expected):
    assert envs.parse_ttl(text) == expected


@pytest.mark.parametrize("text", ["", "8", "h", "8x", "1h8d", "-1h", "7d1m", "14m", "8 h"])
def test_ttl_rejects_bad_or_out_of_range_values(text):
    with pytest.raises(EnvRequestError, match="--ttl"):
        envs.parse_ttl(text)


def test_select_expired_picks_only_past_expiries_oldest_first():
    fleet = [meta("env-a", timedelta(minutes=-5)), meta("env-b", timedelta(hours=3)),
             meta("test-x", timedelta(hours=-2), kind=envs.KIND_TEST), meta("env-c", timedelta(0))]
    assert [e.stack for e in envs.select_expired(fleet, NOW)] == ["test-x", "env-a", "env-c"]
    assert envs.select_expired(fleet, NOW - timedelta(days=1)) == []


def test_tags_round_trip_and_unmanaged_stacks_are_ignored():
    original = envs.new_metadata("env-alice", kind=envs.KIND_ENV, owner="alice", ttl=timedelta(hours=8),
                                 template="dev", purpose="try vllm", now=NOW)
    tags = original.to_tags()
    assert all(TAG_NAME.match(name) for name in tags), "valid Pulumi stack tag names"
    assert all(not name.startswith("pulumi:") for name in tags)
    assert tags[envs.TAG_EXPIRES] == "2026-11-21T20:00:00Z"
    assert EnvMetadata.from_tags("env-alice", {**tags, "pulumi:project": "llm-platform"}) == original
    assert EnvMetadata.from_tags("dev", {"pulumi:project": "llm-platform"}) is None
    assert EnvMetadata.from_tags("env-x", {**tags, envs.TAG_EXPIRES: "next week"}) is None
    assert EnvMetadata.from_tags("env-x", {**tags, envs.TAG_KIND: "other"}) is None


def test_names():
    assert envs.env_stack_name("alice-exp") == "env-alice-exp"
    assert envs.managed_stack_name("alice-exp") == "env-alice-exp"
    assert envs.managed_stack_name("test-alice-20261121120000-abcdef") == "test-alice-20261121120000-abcdef"
    for bad in ("Alice", "1abc", "env-x", "test-x", "a" * 21, "a_b", ""):
        with pytest.raises(EnvRequestError):
            envs.env_stack_name(bad)
    first = envs.ephemeral_stack_name("Alice.Smith@example.com", NOW)
    second = envs.ephemeral_stack_name("Alice.Smith@example.com", NOW)
    assert first != second, "a random suffix makes runs started in the same second distinct"
    assert re.match(r"^test-alice-smith-20261121120000-[0-9a-f]{6}$", first)
    environment = envs.ephemeral_environment(first)
    assert re.match(r"^[a-z][a-z0-9-]{0,19}$", environment) and environment.endswith(first[-6:])


def test_default_owner_prefers_the_flag_then_the_login(monkeypatch):
    assert envs.default_owner("bob") == "bob"
    monkeypatch.setenv("LOGNAME", "carol")
    assert envs.default_owner(None) == "carol"
    with pytest.raises(EnvRequestError, match="owner"):
        envs.default_owner("no spaces please")


def test_overrides_walk_objects_and_lists():
    config = {"llm-platform:gpuPools": '[{"name": "a", "scaling": {"maxSize": 3}}]', "llm-platform:region": "x"}
    for text in ("gpuPools[0].scaling.maxSize=2", "gpuPools[0].labels.team=ml", "gpuPools[1].name=b",
                 "llm-platform:region=us-west-2", "network.azCount=2", "endpoint.publicAccessCidrs=[10.0.0.0/8]"):
        envs.apply_override(config, envs.parse_override(text))
    assert config["llm-platform:gpuPools"] == [
        {"name": "a", "scaling": {"maxSize": 2}, "labels": {"team": "ml"}}, {"name": "b"}]
    assert config["llm-platform:region"] == "us-west-2"
    assert config["llm-platform:network"] == {"azCount": 2}
    assert config["llm-platform:endpoint"] == {"publicAccessCidrs": ["10.0.0.0/8"]}


@pytest.mark.parametrize(("text", "value"), [
    ("production=true", True), ("kmsDeletionWindowDays=10", 10), ("kubernetesVersion='1.33'", "1.33"),
    ('tags={"team": "ml"}', {"team": "ml"}), ("region=us-east-1", "us-east-1"),
])
def test_override_values_are_read_as_yaml(text, value):
    assert envs.parse_override(text).value == value


@pytest.mark.parametrize("text", ["region", "=x", "a..b=1", "gpuPools[x]=1", "[0].name=a", "region=", "a=[1"])
def test_malformed_overrides_are_refused(text):
    with pytest.raises(EnvRequestError, match="--set"):
        envs.parse_override(text)


def test_gpu_budget_is_not_an_environment_override():
    with pytest.raises(EnvRequestError, match=r"^llm-platform:gpuBudget.maxGpus: set by the template stack"):
        envs.parse_override("gpuBudget.maxGpus=100")


def test_override_into_a_scalar_is_refused():
    with pytest.raises(EnvRequestError, match="not inside an object"):
        envs.apply_override({"llm-platform:region": "x"}, envs.parse_override("region.name=y"))


def test_merged_config_is_the_template_plus_environment_plus_overrides():
    template = read_stack_config("dev")
    merged = envs.merged_config(template, [envs.parse_override("gpuPools[0].scaling.maxSize=4")], environment="bob")
    assert merged["llm-platform:environment"] == "bob"
    assert merged["llm-platform:gpuPools"][0]["scaling"]["maxSize"] == 4
    assert template["llm-platform:gpuPools"][0]["scaling"]["maxSize"] != 1, "the template is not modified"
    assert set(merged) == set(template)
    settings = parse_settings(merged)
    assert settings.cluster_name == "llm-platform-bob"


def test_resource_tags_carry_owner_and_stack():
    config = {"llm-platform:tags": {"cost-center": "ml"}}
    envs.tag_resources(config, meta("env-alice", timedelta(hours=1)))
    assert config["llm-platform:tags"] == {
        "cost-center": "ml", "llm-platform/owner": "alice", "llm-platform/stack": "env-alice"}
