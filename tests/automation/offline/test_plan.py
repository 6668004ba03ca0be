"""The recording: the monitor answers the program as the SDK's own mock monitor would, and every
recording stands alone, however many a process makes."""

from __future__ import annotations

import asyncio
import threading

import pytest
from google.protobuf import json_format
from google.protobuf.struct_pb2 import Struct
from pulumi.runtime import resource as sdk_resources
from pulumi.runtime.mocks import MockMonitor

from automation.offline import plan as plan_module
from automation.offline.pack_runner import to_struct
from automation.offline.plan import MANAGED_NODE_GROUP, PlatformMocks, _plain_struct, _refs_to_urns, record_plan
from automation.stacks import read_stack_config
from components.settings import config_strings
from tests.conftest import plan_with


class _KeepingMonitor(plan_module.RecordingMonitor):
    """The recording monitor, keeping a copy of every request and of its answer."""

    exchanges: list = []

    def RegisterResource(self, request):  # noqa: N802 - gRPC method name
        response = super().RegisterResource(request)
        kept_request, kept_response = type(request)(), type(response)()
        kept_request.CopyFrom(request)
        kept_response.CopyFrom(response)
        _KeepingMonitor.exchanges.append((kept_request, kept_response))
        return response


def _sdk_answer(sdk: MockMonitor, request):
    """The SDK's MockMonitor answer, with resource references given as URNs as the recording does."""
    plain = _plain_struct(request.object)
    if plain.refs:
        flattened = type(request)()
        flattened.CopyFrom(request)
        flattened.object.Clear()
        flattened.object.update(_refs_to_urns(plain.value))
        request = flattened
    return sdk.RegisterResource(request)


def test_answers_equal_the_sdk_mock_monitor(monkeypatch):
    """Same URN, ID and outputs, resource by resource, for the whole prod program (the node group
    reference the recording adds to a managed node group's outputs aside)."""
    _KeepingMonitor.exchanges = []
    monkeypatch.setattr(plan_module, "RecordingMonitor", _KeepingMonitor)
    plan = plan_with("prod")
    exchanges = _KeepingMonitor.exchanges
    assert len(exchanges) == len(plan.resources) + 1  # and the stack

    answers: list = []

    def ask_the_sdk() -> None:  # on a thread of its own, as the SDK runs its monitor
        asyncio.set_event_loop(asyncio.new_event_loop())
        sdk = MockMonitor(PlatformMocks(region="us-east-1"))
        answers.extend(_sdk_answer(sdk, request) for request, _ in exchanges)

    thread = threading.Thread(target=ask_the_sdk)
    thread.start()
    thread.join()
    assert len(answers) == len(exchanges)
    for (request, ours), theirs in zip(exchanges, answers):
        assert (ours.urn, ours.id) == (theirs.urn, theirs.id), request.name
        our_outputs = json_format.MessageToDict(ours.object)
        if request.type == MANAGED_NODE_GROUP:
            assert our_outputs.pop("nodeGroup")["urn"].endswith(f"aws:eks/nodeGroup:NodeGroup::{request.name}")
        assert our_outputs == json_format.MessageToDict(theirs.object), request.name


def test_recordings_in_one_process_stand_alone(dev_plan):
    """The SDK keeps the root stack in a context variable; a dev recording made after a prod one
    still parents its resources to the dev stack."""
    plan_with("prod")
    again = plan_with("dev")
    assert [(r.urn, r.parent) for r in again.resources] == [(r.urn, r.parent) for r in dev_plan.resources]
    assert all(r.parent.startswith("urn:pulumi:dev::") for r in again.resources if r.parent)


def test_structs_handed_to_the_pack_are_what_the_engine_sends_analyzers():
    """The recording hands the pack the request's Struct only where marshalling the inputs as the
    engine does for analyzers would give the same message."""
    handed: list = []
    config = read_stack_config("prod")
    plan = record_plan("prod", config_strings(config), region="us-east-1",
                       on_record=lambda resource, struct: handed.append((resource, struct)))
    assert [resource for resource, _ in handed] == plan.resources
    as_is = [(resource, struct) for resource, struct in handed if struct is not None]
    assert len(as_is) > 0.8 * len(handed)
    for resource, struct in as_is:
        assert struct == to_struct(resource.inputs), resource.urn
    marshalled = [resource for resource, struct in handed if struct is None]
    assert marshalled, "no resource with a reference or an internal key: the other path is untested"
    for resource in marshalled:
        assert to_struct(resource.inputs) != _struct_of(resource.inputs), resource.urn


def _struct_of(inputs):
    struct = Struct()
    struct.update(inputs)
    return struct


def test_stack_traces_equal_the_sdks(monkeypatch):
    """The registrations carry the stack trace the SDK itself would compute, frame for frame."""
    ours, theirs = plan_module._stack_trace, sdk_resources._get_stack_trace
    compared: list = []

    def both():
        mine, sdk = ours(), theirs()
        compared.append((mine, sdk))
        return mine

    monkeypatch.setattr(plan_module, "_stack_trace", both)
    plan = plan_with("dev")
    assert len(compared) >= len(plan.resources)
    assert all(mine == sdk for mine, sdk in compared)
    assert all(sdk.frames for _, sdk in compared), "every resource is created from the program's code"
    assert any(frame.pc.uri.endswith("/components/platform.py") for _, sdk in compared for frame in sdk.frames)
    assert sdk_resources._get_stack_trace is theirs, "the SDK's own function is back after the recording"


def _recorded(stack: str, settle_every: int | None):
    """The stack's plan, sorted as the check writes it."""
    config = read_stack_config(stack)
    plan = record_plan(stack, config_strings(config), region="us-east-1", settle_every=settle_every)
    plan.resources.sort(key=lambda r: r.urn)
    return plan


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_settling_leaves_the_plan_as_it_is(stack):
    """Yielding to the event loop while the program runs changes when registrations complete, not
    what they are: the same plan, resource for resource, and the same component outputs."""
    settled, waited = _recorded(stack, settle_every=50), _recorded(stack, settle_every=None)
    assert settled.to_json() == waited.to_json() and settled.outputs == waited.outputs


#: Set by the probe program when its code has run to the end.
PROGRAM_DONE = [False]

_PROBE_PROGRAM = """
import sys
import pulumi_random

for i in range(200):
    pulumi_random.RandomPassword(f"password-{i}", length=16)
sys.modules["tests.automation.offline.test_plan"].PROGRAM_DONE[0] = True
"""


@pytest.mark.parametrize("settle_every, least, most", [(50, 140, 200), (None, 0, 0)])
def test_registrations_complete_while_the_program_runs(tmp_path, settle_every, least, most):
    """Settling every 50 resources, registrations complete while the program is still constructing
    resources (all but the last few dozen); without it, none completes before the program's end."""
    program = tmp_path / "__main__.py"
    program.write_text(_PROBE_PROGRAM)
    PROGRAM_DONE[0] = False
    during: list[bool] = []
    plan = record_plan("probe", {}, region="us-east-1", program=program, settle_every=settle_every,
                       on_record=lambda _resource, _struct: during.append(not PROGRAM_DONE[0]))
    assert len(plan.resources) == 200 and PROGRAM_DONE[0]
    assert least <= sum(during) <= most, sum(during)
