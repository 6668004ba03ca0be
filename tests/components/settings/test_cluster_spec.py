"""Network, hybrid-node, alerting-reference and GPU-budget validators as a specification: each with a
failing and a passing case, ranges as numbers."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from automation.stacks import read_stack_config
from components.capacity_check import parse_settings
from components.settings import SettingsError
from components.settings.cluster import HybridNodes, Network
from components.settings.observability import Alerting
from tests.support.config_changes import with_changes


def messages(model, data: dict) -> list[str]:
    try:
        model.model_validate(data)
    except ValidationError as exc:
        return [e["msg"] for e in exc.errors()]
    return []


@pytest.mark.parametrize("cidr, ok", [("10.0.0.0/16", True), ("10.0.0.0/20", True), ("172.16.0.0/18", True),
                                      ("10.0.0.0/15", False), ("10.0.0.0/21", False), ("8.8.0.0/16", False)])
def test_vpc_cidr_is_private_with_a_prefix_from_16_to_20(cidr, ok):
    assert messages(Network, {"vpcCidr": cidr}) == ([] if ok else [
        f"Value error, {cidr!r} must be a private IPv4 range with a prefix from /16 to /20"])


def test_vpc_cidr_must_be_a_network():
    [message] = messages(Network, {"vpcCidr": "10.0.0.1/16"})
    assert message.startswith("Value error, '10.0.0.1/16' is not a network CIDR such as 10.0.0.0/16 (")


@pytest.mark.parametrize("field", ["remoteNodeNetworks", "remotePodNetworks"])
def test_remote_networks_are_private_cidrs(field):
    assert messages(HybridNodes, {field: ["192.168.0.0/16", "100.64.0.0/16"]}) == []
    assert messages(HybridNodes, {field: ["192.168.0.0/16", "8.8.8.0/24"]}) == [
        "Value error, '8.8.8.0/24' is not a private IPv4 range; EKS accepts 10.0.0.0/8, 172.16.0.0/12, "
        "192.168.0.0/16 or 100.64.0.0/10"]
    [bad] = messages(HybridNodes, {field: ["192.168.0.0/16", "192.168.1.1/24"]})
    assert bad.startswith("Value error, '192.168.1.1/24' is not a CIDR (")


def test_remote_networks_do_not_overlap():
    assert messages(HybridNodes, {"remoteNodeNetworks": ["192.168.0.0/17"], "remotePodNetworks": ["192.168.128.0/17"]}) \
        == []
    assert messages(HybridNodes, {"remoteNodeNetworks": ["192.168.0.0/16"], "remotePodNetworks": ["192.168.128.0/17"]}) \
        == ["Value error, remote networks 192.168.0.0/16 and 192.168.128.0/17 overlap; node and pod networks must be "
            "disjoint"]


SNS = {"name": "pager", "sns": {"topicArn": "arn:aws:sns:us-east-1:111122223333:pager"}}


@pytest.mark.parametrize("alerting, message", [
    ({"receivers": [SNS], "routes": [{"receiver": "pager"}], "defaultReceiver": "pager"}, None),
    ({}, None),
    ({"routes": [{"receiver": "pager"}]}, "names unknown receiver 'pager'; defined receivers: none"),
    ({"receivers": [SNS], "routes": [{"receiver": "slack"}], "defaultReceiver": "pager"},
     "names unknown receiver 'slack'; defined receivers: pager"),
    ({"receivers": [SNS], "defaultReceiver": "oncall"}, "names unknown receiver 'oncall'; defined receivers: pager"),
    ({"receivers": [SNS]}, "defaultReceiver is required when receivers are defined (it gets what no route matched)"),
    ({"receivers": [SNS, SNS], "defaultReceiver": "pager"},
     "receiver name 'pager' is repeated; receiver names must be unique"),
])
def test_alerting_references(alerting, message):
    assert messages(Alerting, alerting) == ([] if message is None else [message])


def test_the_gpu_budget_holds_a_worst_case_equal_to_it():
    """dev's worst case: gpuPools inference 4 nodes x 1 GPU (g5.2xlarge, g5.4xlarge; room for the
    rollout surge pod) + Karpenter limits 8 + 4 = 16 GPUs."""
    dev = read_stack_config("dev")
    parse_settings(with_changes(dev, {"gpuBudget": {"maxGpus": 16, "monthlyBudgetUsd": 1_000_000}}))
    with pytest.raises(SettingsError) as caught:
        parse_settings(with_changes(dev, {"gpuBudget": {"maxGpus": 15, "monthlyBudgetUsd": 1_000_000}}))
    [problem] = [str(p) for p in caught.value.problems]
    assert problem.startswith("llm-platform:gpuBudget.maxGpus: got 15: the stack's worst-case GPU count is 16 (")
