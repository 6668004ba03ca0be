"""workload-kinds-known, as a specification: how deep an undeclared kind is searched for a pod spec
(eight levels below the object's inputs: deeper than any pod template the built-in kinds keep)."""

from __future__ import annotations

import pytest

from tests.policies.builders import pod_spec, resource
from tests.policies.conftest import one

KNOWN = "workload-kinds-known"


def nested(levels: int) -> dict:
    """A pod spec ``levels`` objects below the inputs: ``{"l1": {"l2": ... {"lN": <pod spec>}}}``."""
    node = pod_spec(gpus=1)
    for level in range(levels, 0, -1):
        node = {f"l{level}": node}
    return node


@pytest.mark.parametrize("levels", [1, 8])
def test_a_pod_spec_down_to_eight_levels_is_found(pack, levels):
    pack.configure({"all": "mandatory"})
    found = resource("kubernetes:example.com/v1:Deep", "deep", nested(levels))
    path = ".".join(f"l{n}" for n in range(1, levels + 1))
    one(pack.stack_messages([found], KNOWN), f"kubernetes:example.com/v1:Deep (at {path})", "customWorkloads")


def test_a_pod_spec_nine_levels_down_is_not_searched_for(pack):
    pack.configure({"all": "mandatory"})
    assert pack.stack_messages([resource("kubernetes:example.com/v1:Deep", "deep", nested(9))], KNOWN) == []


def test_a_list_is_a_level_of_its_own(pack):
    """spec.groups[0].template.spec: the list item counts as a level (spec 1, groups 2, [0] 3, ...)."""
    pack.configure({"all": "mandatory"})
    deep = {"l1": {"l2": {"l3": {"l4": {"groups": [{"template": {"spec": pod_spec(gpus=1)}}]}}}}}
    one(pack.stack_messages([resource("kubernetes:example.com/v1:Deep", "deep", deep)], KNOWN),
        "kubernetes:example.com/v1:Deep (at l1.l2.l3.l4.groups[0].template.spec)")
    deeper = {"l0": deep}
    assert pack.stack_messages([resource("kubernetes:example.com/v1:Deep", "deep", deeper)], KNOWN) == []
