"""The dev copy with a Karpenter reserved pool (an On-Demand Capacity Reservation on class ``gpu``): what the
program emits is what Karpenter 1.14.1 requires (Karpenter docs, tasks/odcrs: ``capacityReservationSelectorTerms``
on the EC2NodeClass, ``reserved`` among the NodePool's ``karpenter.sh/capacity-type`` values), valid against the
upstream CRDs, and the check of both dev copies is clean and counts the reserved capacity; a wrong reservation
is refused by the CLI with exit 2 naming the key."""

from __future__ import annotations

import subprocess
import sys

import pytest

from automation import exit_codes
from automation.offline.plan import ROOT
from tests.conftest import plan_with
from tests.fixtures.reserved_copies import capacity_block_copy, karpenter_reserved_copy, stack_file
from tests.support import crd_schema
from tests.support.config_changes import with_changes

NODE_CLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"


@pytest.fixture(scope="module")
def reserved_plan():
    config = karpenter_reserved_copy()
    return plan_with("dev", **{k.split(":", 1)[1]: v for k, v in config.items() if k.startswith("llm-platform:")})


def _named(plan, type_, name):
    (found,) = [r for r in plan.of_type(type_) if r.inputs["metadata"]["name"] == name]
    return found.inputs


def test_the_node_class_selects_the_reservation_and_records_it(reserved_plan):
    node_class = _named(reserved_plan, NODE_CLASS, "gpu")
    assert node_class["spec"]["capacityReservationSelectorTerms"] == [{"id": "cr-0fedcba9876543210"}]
    assert node_class["metadata"]["annotations"] == {
        "llm-platform.io/capacity-reservations":
            "id=cr-0fedcba9876543210 type=default instanceType=g5.12xlarge count=2 zone=us-east-1b"}


def test_the_node_pool_lists_reserved_first(reserved_plan):
    pool = _named(reserved_plan, NODE_POOL, "gpu-inference")
    [capacity] = [q for q in pool["spec"]["template"]["spec"]["requirements"] if q["key"] == "karpenter.sh/capacity-type"]
    assert capacity == {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved", "spot", "on-demand"]}
    # the class's other pool does not admit reserved, and its node class is the same
    training = _named(reserved_plan, NODE_POOL, "gpu-training")
    assert ["on-demand"] in [q["values"] for q in training["spec"]["template"]["spec"]["requirements"]]


@pytest.mark.usefixtures("upstream_crds")
def test_the_emitted_objects_are_valid_against_the_1_14_1_crds(reserved_plan):
    for type_, name in ((NODE_CLASS, "gpu"), (NODE_POOL, "gpu-inference")):
        outcome = crd_schema.validate(_named(reserved_plan, type_, name))
        assert outcome.ok, (name, outcome.schema_errors, outcome.rule_failures)
        assert outcome.rules_evaluated > 0


def _check(config, tmp_path, *extra):
    path = stack_file(config, tmp_path)
    return subprocess.run(
        [sys.executable, "-m", "automation", "check", "--stack", "dev", "--stack-file", str(path), "--out",
         str(tmp_path / "out"), *extra], cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**__import__("os").environ, "LLM_PLATFORM_TODAY": "2026-12-01"},
    )


def test_the_karpenter_reserved_copy_checks_clean_and_counts_the_reservation(tmp_path):
    done = _check(karpenter_reserved_copy(), tmp_path)
    assert done.returncode == exit_codes.OK, done.stdout[-3000:] + done.stderr
    out = " ".join(done.stdout.split())
    assert "no violations" in out
    assert ("Reserved GPU capacity (committed, paid whether used or not): 8 GPUs, $8,281/month "
            "(cr-0fedcba9876543210: 2 x g5.12xlarge (8 GPUs) at $5.672/h (ODCR)); on-demand spend beyond the "
            "reservations at the pools' ceilings: $12,402/month") in out


def test_the_capacity_block_copy_checks_clean_and_counts_the_block(tmp_path):
    done = _check(capacity_block_copy(), tmp_path)
    assert done.returncode == exit_codes.OK, done.stdout[-3000:] + done.stderr
    out = " ".join(done.stdout.split())
    assert "no violations" in out
    assert ("Reserved GPU capacity (committed, paid whether used or not): 8 GPUs, $40,179/month "
            "(cr-0123456789abcdef0: 1 x p5.48xlarge (8 GPUs) at $55.040/h (Capacity Block, on-demand rate as "
            "stand-in)); on-demand spend beyond the reservations at the pools' ceilings: $21,886/month") in out


@pytest.mark.parametrize(
    "make, changes, key",
    [
        (capacity_block_copy, {"gpuPools__1__reservation__id": "cr-NOT-HEX"}, "llm-platform:gpuPools[1].reservation.id"),
        (capacity_block_copy, {"gpuPools__1__reservation__instanceType": "p5.4xlarge"},
         "llm-platform:gpuPools[1].reservation.instanceType"),
        (capacity_block_copy, {"gpuPools__1__reservation": None}, "llm-platform:gpuPools[1].reservation"),
        (karpenter_reserved_copy, {"karpenter__nodeClasses__0__capacityReservations": []},
         "llm-platform:karpenter.nodePools[0].capacityTypes"),
    ],
    ids=["malformed-id", "type-not-in-pool", "block-without-reservation", "reserved-without-terms"],
)
def test_wrong_reservation_settings_exit_2_naming_the_key(tmp_path, make, changes, key):
    done = _check(with_changes(make(), changes), tmp_path)
    assert done.returncode == exit_codes.USAGE, done.stdout[-2000:] + done.stderr
    header, line = done.stderr.strip().splitlines()
    assert header == "error: stack 'dev' has 1 invalid setting(s):"
    assert line.strip().startswith(f"{key}: ")
    assert "Traceback" not in done.stderr and not (tmp_path / "out" / "plan.json").exists()


@pytest.mark.parametrize(
    "make, changes, key",
    [
        (capacity_block_copy, {"gpuPools__1__reservation__availabilityZone": "us-east-1f"},
         "llm-platform:gpuPools[reserved-h100].reservation.availabilityZone"),
        (karpenter_reserved_copy, {"karpenter__nodeClasses__0__capacityReservations__0__availabilityZone": "us-east-1f"},
         "llm-platform:karpenter.nodeClasses[gpu].capacityReservations[cr-0fedcba9876543210].availabilityZone"),
    ],
    ids=["managed-group", "karpenter-node-class"],
)
def test_a_reservation_in_a_zone_without_a_subnet_exits_2_naming_the_key(tmp_path, make, changes, key):
    """The stack's subnets are in its first azCount (3) zones, us-east-1a to 1c under the check; a
    reservation in us-east-1f is never launched into, on either path (managed group or Karpenter)."""
    done = _check(with_changes(make(), changes), tmp_path)
    assert done.returncode == exit_codes.USAGE, done.stdout[-2000:] + done.stderr
    assert done.stderr.strip() == (
        f"error: {key}: reservation {'cr-0123456789abcdef0' if 'gpuPools' in key else 'cr-0fedcba9876543210'} is in "
        "us-east-1f, where the stack has no subnet (its zones: us-east-1a, us-east-1b, us-east-1c); raise "
        "network.azCount or use a reservation in one of those zones")
    assert not (tmp_path / "out" / "plan.json").exists()
