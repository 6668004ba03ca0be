"""Input an attacker or a tired user writes: secrets under the wrong key, documents built to exhaust
memory or the stack, identities with a trailing newline or foreign digits, text that a terminal
would interpret. Each is refused with exit 2 and one line naming the key or flag, no traceback, no
secret printed and nothing written; the valid YAML the Pulumi CLI reads (merge keys) is accepted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from automation import exit_codes
from automation.offline.plan import ROOT
from automation.stacks import StackFileError, load_yaml, read_stack_config
from components.capacity_check import parse_settings
from components.settings import SettingsError
from components.settings._base import AWS_REGIONS, partition_of
from tests.automation.conftest import Rig

DEV = (ROOT / "Pulumi.dev.yaml").read_text()
HF_TOKEN = "hf_CANARYabcdefghij0123456789"
SLACK_TOKEN = "xoxb-123456789012-CANARYabcdef"
RANDOM_KEY = "Xk9fQ2mZp7LwR4tYv8BnC3sD6hJ1gE5a"


def check(tmp_path: Path, text: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``python -m automation check`` on a stack file with ``text``, in a real process."""
    stack_file = tmp_path / "Pulumi.dev.yaml"
    stack_file.write_text(text)
    return subprocess.run(
        [sys.executable, "-m", "automation", "check", "--stack", "dev", "--stack-file", str(stack_file),
         "--out", str(tmp_path / "out")],
        cwd=ROOT, capture_output=True, text=True, timeout=timeout,
    )


def refused(done: subprocess.CompletedProcess[str], tmp_path: Path, *, names: str, hides: tuple[str, ...] = ()) -> None:
    output = done.stdout + done.stderr
    assert done.returncode == exit_codes.USAGE, output
    assert "Traceback" not in output and names in done.stderr, output
    for secret in hides:
        assert secret not in output, f"{secret} echoed: {output}"
    assert not (tmp_path / "out").exists(), "nothing is written for a refused stack"


def with_extra(lines: str) -> str:
    return DEV.rstrip("\n") + "\n" + lines


# --- secrets under keys the settings do not know -------------------------------------------------------

@pytest.mark.parametrize("extra, key, secret", [
    (f"  llm-platform:huggingFaceTokn: {HF_TOKEN}\n", "llm-platform:huggingFaceTokn", HF_TOKEN),
    # a value shaped like a token, under a key that says nothing
    (f"  llm-platform:notes: {{owner: me, other: {RANDOM_KEY}}}\n", "llm-platform:notes", RANDOM_KEY),
    (f"  llm-platform:extra: {HF_TOKEN}\n", "llm-platform:extra", HF_TOKEN),
])
def test_a_secret_under_an_unknown_key_is_never_echoed(tmp_path, extra, key, secret):
    done = check(tmp_path, with_extra(extra))
    refused(done, tmp_path, names=key, hides=(secret,))
    assert "unknown key" in done.stderr and "(secret, not shown)" in done.stderr


def test_a_slack_receivers_misspelled_credential_is_never_echoed(tmp_path):
    text = DEV.replace(
        "    prometheus: {replicas: 1, retentionDays: 35, volumeSizeGib: 50}\n",
        "    prometheus: {replicas: 1, retentionDays: 35, volumeSizeGib: 50}\n"
        "    alerting:\n      receivers:\n        - name: team\n"
        f"          slack: {{apiKey: {SLACK_TOKEN}, channel: '#llm'}}\n      defaultReceiver: team\n",
    )
    assert text != DEV
    done = check(tmp_path, text)
    refused(done, tmp_path, names="llm-platform:observability.alerting.receivers[0].slack.apiKey", hides=(SLACK_TOKEN,))


def test_plain_values_are_still_shown():
    """Masking by shape keeps ordinary values readable: a model name, a region, a small number."""
    config = read_stack_config("dev")
    config["llm-platform:region"] = "us-nowhere-9"
    config["llm-platform:kmsDeletionWindowDays"] = 99
    with pytest.raises(SettingsError) as caught:
        parse_settings(config)
    text = str(caught.value)
    assert 'llm-platform:region: got "us-nowhere-9"' in text
    assert "llm-platform:kmsDeletionWindowDays: got 99" in text


# --- documents built to exhaust the reader ---------------------------------------------------------------

def billion_laughs(levels: int = 9, fanout: int = 9) -> str:
    lines = [f"    - &a0 [{', '.join(['lol'] * fanout)}]"]
    lines += [f"    - &a{i} [{', '.join([f'*a{i - 1}'] * fanout)}]" for i in range(1, levels)]
    return "  llm-platform:extra:\n" + "\n".join(lines) + "\n"


def test_an_alias_bomb_is_refused_before_it_is_expanded(tmp_path):
    """387 million scalars from 600 bytes: go-yaml's alias budget refuses it, and so does the check,
    within the timeout (it used to run out of memory after about 75 s)."""
    text = billion_laughs()
    assert len(text) < 700
    done = check(tmp_path, with_extra(text), timeout=60)
    refused(done, tmp_path, names="Pulumi.dev.yaml is refused: the document contains excessive aliasing")


def test_aliases_within_go_yamls_budget_are_read():
    # 3 levels of 10: 1000 scalars from aliases, the ratio go-yaml v3.0.4 accepts
    document = load_yaml("a0: &a0 [" + ", ".join(["x"] * 10) + "]\n"
                         "a1: &a1 [" + ", ".join(["*a0"] * 10) + "]\n"
                         "a2: [" + ", ".join(["*a1"] * 10) + "]\n")
    assert sum(len(inner) for inner in document["a2"]) == 100
    assert document["a2"][9][9] == ["x"] * 10
    # 4 levels of 10 (10000 scalars) is over it
    with pytest.raises(Exception, match="excessive aliasing"):
        load_yaml("a0: &a0 [" + ", ".join(["x"] * 10) + "]\n"
                  + "".join(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]\n" for i in range(1, 4)))


def test_an_anchor_that_contains_itself_is_refused(tmp_path):
    done = check(tmp_path, with_extra("  llm-platform:extra: &x {a: *x}\n"))
    refused(done, tmp_path, names="an anchor's value contains itself")


def test_deep_nesting_is_refused_with_a_line_not_a_recursion_error(tmp_path):
    done = check(tmp_path, with_extra("  llm-platform:extra: " + "[" * 20000 + "]" * 20000 + "\n"))
    refused(done, tmp_path, names="nested deeper than 64 levels")
    assert "line " in done.stderr


def test_nesting_within_the_limit_is_read():
    assert load_yaml("a: " + "[" * 60 + "1" + "]" * 60) is not None
    with pytest.raises(Exception, match="nested deeper than 64 levels"):
        load_yaml("a: " + "[" * 65 + "1" + "]" * 65)


def test_deep_json_from_the_engine_is_a_settings_problem():
    """Under the engine a value arrives as JSON text; one nested past what ``json`` reads is refused
    at its key, not with a RecursionError."""
    config = read_stack_config("dev")
    config["llm-platform:tags"] = '{"a":' * 3000 + "1" + "}" * 3000
    with pytest.raises(SettingsError) as caught:
        parse_settings(config)
    assert [p.key for p in caught.value.problems] == ["llm-platform:tags"]


# --- valid YAML the Pulumi CLI reads -------------------------------------------------------------------------

def test_merge_keys_are_read_as_the_cli_reads_them(tmp_path):
    text = DEV.replace(
        "  llm-platform:tags:\n    cost-center: ml-platform-dev\n",
        "  llm-platform:tags:\n    <<: {team: inference, cost-center: overridden}\n    cost-center: ml-platform-dev\n",
    )
    assert text != DEV
    path = tmp_path / "Pulumi.dev.yaml"
    path.write_text(text)
    config = read_stack_config("dev", path=path)
    assert config["llm-platform:tags"] == {"team": "inference", "cost-center": "ml-platform-dev"}


def test_a_key_repeated_beside_a_merge_is_still_a_duplicate(tmp_path):
    path = tmp_path / "Pulumi.dev.yaml"
    path.write_text("config:\n  llm-platform:tags:\n    <<: {a: b}\n    c: d\n    c: e\n")
    with pytest.raises(StackFileError, match="line 5: duplicate key 'c'"):
        read_stack_config("dev", path=path)


# --- keys that are not what they look like ---------------------------------------------------------------------

def test_a_misspelled_namespace_is_not_silently_ignored(tmp_path):
    done = check(tmp_path, with_extra("  llm-platfrom:gpuHoursMonthlyBudget: 10\n"))
    refused(done, tmp_path, names="llm-platfrom:gpuHoursMonthlyBudget")
    assert "write llm-platform:gpuHoursMonthlyBudget" in done.stderr


def test_other_namespaces_are_left_alone():
    config = read_stack_config("dev")
    config["aws:region"] = "us-east-1"
    config["kubernetes:context"] = "x"
    assert parse_settings(config).region == "us-east-1"


def test_a_well_formed_region_that_does_not_exist_is_refused():
    config = read_stack_config("dev")
    config["llm-platform:region"] = "us-nowhere-9"
    with pytest.raises(SettingsError) as caught:
        parse_settings(config)
    (problem,) = caught.value.problems
    assert problem.key == "llm-platform:region"
    assert "'us-nowhere-9' is not an AWS region" in problem.reason


def test_the_region_table_is_the_aws_providers():
    import pulumi_aws

    assert AWS_REGIONS == {region.value for region in pulumi_aws.Region}


@pytest.mark.parametrize("region, partition", [
    ("us-east-1", "aws"), ("eu-west-1", "aws"), ("cn-north-1", "aws-cn"), ("us-gov-west-1", "aws-us-gov"),
    ("us-iso-east-1", "aws-iso"), ("us-isob-east-1", "aws-iso-b"), ("eusc-de-east-1", "aws-eusc"),
])
def test_partitions(region, partition):
    assert partition_of(region) == partition


def test_an_sns_topic_of_another_partition_is_refused():
    config = read_stack_config("prod")
    receivers = config["llm-platform:observability"]["alerting"]["receivers"]
    index = next(i for i, r in enumerate(receivers) if "sns" in r)
    receivers[index]["sns"]["topicArn"] = "arn:aws-cn:sns:cn-north-1:111122223333:llm-alerts"
    with pytest.raises(SettingsError) as caught:
        parse_settings(config)
    keys = [p.key for p in caught.value.problems]
    assert f"llm-platform:observability.alerting.receivers[{index}].sns.topicArn" in keys
    assert "partition 'aws-cn', but region us-east-1 is in 'aws'" in str(caught.value)


def test_emoji_codes_in_user_text_stay_text(tmp_path):
    done = check(tmp_path, DEV.replace("      diskSizeGib: 200\n", "      diskSizeGib: 200\n      labels: {':label:x': y}\n", 1))
    refused(done, tmp_path, names="llm-platform:gpuPools[0].labels.:label:x:")
    assert "\N{LABEL}" not in done.stderr


# --- identities on the command line --------------------------------------------------------------------------

@pytest.mark.parametrize("argv, flag", [
    (["env", "create", "ok\n", "--from", "dev"], "environment name"),
    (["env", "create", "ok", "--from", "dev", "--owner", "alice\n"], "owner"),
    (["env", "create", "ok", "--from", "dev", "--ttl", "\u0668h"], "--ttl"),  # Arabic-Indic eight
    (["env", "create", "ok", "--from", "dev", "--ttl", "8h\n"], "--ttl"),
    (["env", "create", "ok", "--from", "dev", "--purpose", "demo \x1b]0;pwned\x07"], "--purpose"),
    (["env", "create", "ok", "--from", "dev", "--purpose", "two\nlines"], "--purpose"),
    (["env", "create", "ok", "--from", "dev", "--set", "environment=prod"], "llm-platform:environment"),
])
def test_identities_are_what_they_look_like(argv, flag, rig: Rig):
    result = rig.run(*argv)
    assert result.code == exit_codes.USAGE, result.err
    assert "Traceback" not in result.err and result.err.startswith("error:"), result.err
    assert flag in result.err, result.err
    assert "\x1b" not in result.err
    assert rig.calls.entries() == [], "nothing reached the Pulumi CLI"


def test_plain_identities_still_pass():
    from automation.driver.environments import check_env_name, new_metadata, parse_ttl

    assert check_env_name("team-a1") == "team-a1"
    assert parse_ttl("1d12h").total_seconds() == 129600
    meta = new_metadata("env-x", kind="env", owner="alice", ttl=parse_ttl("8h"), template="dev", purpose="demo: Qwen on L40S")
    assert meta.purpose == "demo: Qwen on L40S"
