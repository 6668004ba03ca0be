"""``up`` of a stack with a Capacity Block pool refuses a Kubernetes version change of a Capacity Block group
whose desired size is above 0 (EKS user guide, "Create a managed node group with Capacity Blocks for ML":
"When upgrading managed node groups with Capacity Blocks, make sure that the desired size of the node group
is set to 0"), read from EKS through the aws stand-in, before the CLI changes anything (exit 5)."""

from __future__ import annotations

import json

import yaml

from automation import exit_codes
from tests.automation.conftest import Rig
from tests.fixtures.reserved_copies import capacity_block_copy

SPOT = {"name": "inference-20261101", "capacityType": "SPOT", "version": "1.34", "desiredSize": 2}


def _deployed_block_stack(rig: Rig) -> None:
    """The dev copy with a Capacity Block pool (kubernetesVersion 1.35), already deployed once."""
    (rig.project / "Pulumi.dev.yaml").write_text(yaml.safe_dump({"config": capacity_block_copy()}))
    first = rig.run("up", "--stack", "dev")
    assert first.code == exit_codes.OK, first.err
    assert not [e for e in rig.calls.entries("aws") if e["argv"][:1] == ["eks"]], "a new stack has no groups yet"


def _groups(rig: Rig, *groups: dict) -> None:
    rig.monkeypatch.setenv("STANDIN_NODEGROUPS", json.dumps(list(groups)))


def _ups(rig: Rig) -> int:
    return len([a for a in rig.calls.argvs() if a[0] == "up"])


def test_a_version_change_of_a_block_group_with_nodes_wanted_is_refused_before_the_cli_runs(rig: Rig):
    _deployed_block_stack(rig)
    _groups(rig, SPOT, {"name": "reserved-h100-20261101", "capacityType": "CAPACITY_BLOCK", "version": "1.34",
                        "desiredSize": 1})

    result = rig.run("up", "--stack", "dev")

    assert result.code == exit_codes.PREFLIGHT
    assert ("FAIL  capacity block upgrades: kubernetesVersion 1.35 would update Capacity Block node group(s) "
            "reserved-h100-20261101 runs 1.34 at desiredSize 1; EKS updates a Capacity Block group's version only "
            "at desired size 0") in result.err
    assert "inference-20261101" not in result.err, "the Spot group is not a Capacity Block"
    assert _ups(rig) == 1, "the second up never reached the CLI"
    eks = [e["argv"][:2] for e in rig.calls.entries("aws") if e["argv"][:1] == ["eks"]]
    assert eks == [["eks", "list-nodegroups"], ["eks", "describe-nodegroup"], ["eks", "describe-nodegroup"]]


def test_a_block_whose_window_has_not_started_still_counts_by_desired_size(rig: Rig):
    """Textbook: no node runs in the group (its block has not started, every launch fails), so the upgrade
    is safe. EKS judges the desired size, which its create request and Cluster Autoscaler left at 1."""
    _deployed_block_stack(rig)
    rig.monkeypatch.setenv("STANDIN_GPU_POOLS", "[]")  # no GPU node in the cluster
    _groups(rig, {"name": "reserved-h100-20261101", "capacityType": "CAPACITY_BLOCK", "version": "1.34",
                  "desiredSize": 1})

    result = rig.run("up", "--stack", "dev")

    assert result.code == exit_codes.PREFLIGHT
    assert "reserved-h100-20261101 runs 1.34 at desiredSize 1" in result.err
    assert rig.calls.kubectl() == [], "nodes are not what EKS reads"


def test_a_block_group_at_desired_zero_or_already_at_the_version_goes_ahead(rig: Rig):
    _deployed_block_stack(rig)
    _groups(rig, SPOT, {"name": "reserved-h100-20261101", "capacityType": "CAPACITY_BLOCK", "version": "1.34",
                        "desiredSize": 0})
    drained = rig.run("up", "--stack", "dev")
    assert drained.code == exit_codes.OK, drained.err
    assert "capacity block upgrades" in drained.err and _ups(rig) == 2

    _groups(rig, {"name": "reserved-h100-20261101", "capacityType": "CAPACITY_BLOCK", "version": "1.35",
                  "desiredSize": 1})
    same = rig.run("up", "--stack", "dev")
    assert same.code == exit_codes.OK, same.err
    assert _ups(rig) == 3


def test_a_stack_without_a_block_pool_asks_eks_nothing(rig: Rig):
    assert rig.run("up", "--stack", "dev").code == exit_codes.OK
    assert rig.run("up", "--stack", "dev").code == exit_codes.OK
    assert [e for e in rig.calls.entries("aws") if e["argv"][:1] == ["eks"]] == []
