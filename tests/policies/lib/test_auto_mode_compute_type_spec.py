"""An Auto Mode NodePool's nodes carry eks.amazonaws.com/compute-type=auto (EKS Auto Mode's node labels),
whether or not a requirement names the key, read from gpu-workload-schedulable."""

from __future__ import annotations

import pytest

from tests.policies.builders import nodepool, patch, workload
from tests.policies.conftest import one

SCHEDULABLE = "gpu-workload-schedulable"
COMPUTE_TYPE = "eks.amazonaws.com/compute-type"
AUTO_CLASS = {"group": "eks.amazonaws.com", "kind": "NodeClass", "name": "default"}


def auto_pool(*requirements: dict) -> dict:
    return patch(nodepool("auto"), {"spec.template.spec.nodeClassRef": AUTO_CLASS, "spec.template.spec.requirements": [
        {"key": "eks.amazonaws.com/instance-category", "operator": "In", "values": ["g"]}, *requirements]})


@pytest.mark.parametrize("requirements", [(), ({"key": COMPUTE_TYPE, "operator": "In", "values": ["auto"]},)],
                         ids=["unnamed", "required"])
def test_a_pod_selecting_auto_compute_lands_on_an_auto_mode_pool(pack, requirements):
    assert pack.stack_messages([auto_pool(*requirements), workload(selector={COMPUTE_TYPE: "auto"})], SCHEDULABLE) == []


@pytest.mark.parametrize("requirements", [(), ({"key": COMPUTE_TYPE, "operator": "In", "values": ["auto", "hybrid"]},)],
                         ids=["unnamed", "widened"])
def test_an_auto_mode_pool_offers_no_other_compute_type(pack, requirements):
    one(pack.stack_messages([auto_pool(*requirements), workload(selector={COMPUTE_TYPE: "hybrid"})], SCHEDULABLE),
        f"Auto Mode NodePool 'auto': its nodes cannot satisfy '{COMPUTE_TYPE}'")
