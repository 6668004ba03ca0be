"""The recording: the monitor answers the program as the SDK's own mock monitor would, and every
recording stands alone, however many a process makes."""

from __future__ import annotations

import asyncio
import threading

import pytest
from google.protobuf import json_format
from google.protobuf.struct_pb2 import Struct
from pulumi.runtime.mocks import MockMonitor

from automation.offline import plan as plan_module
from automation.offline.pack.runner import to_struct
from automation.offline.plan import MANAGED_NODE_GROUP, PlatformMocks, _refs_to_urns, record_plan
from automation.offline.recording.sdk_shortcuts import registration_message
from automation.offline.recording.struct_wire import SENT, plain_of, wire_bytes
from automation.stacks import read_stack_config
from components.settings import config_strings
from tests.conftest import plan_with


class _KeepingMonitor(plan_module.RecordingMonitor):
    """The recording monitor, keeping a copy of every request and of its answer (their Structs
    built where the recording sent stand-ins for them)."""

    exchanges: list = []

    def RegisterResource(self, request):  # noqa: N802 - gRPC method name
        response = super().RegisterResource(request)
        message = registration_message(request)
        kept_request, kept_response = type(message)(), type(response)()
        kept_request.CopyFrom(message)
        kept_request.object.CopyFrom(SENT.real(request.object))
        kept_response.CopyFrom(response)
        kept_response.object.CopyFrom(SENT.real(response.object))
        _KeepingMonitor.exchanges.append((kept_request, kept_response))
        return response


def _sdk_answer(sdk: MockMonitor, request):
    """The SDK's MockMonitor answer, with resource references given as URNs as the recording does."""
    plain = plain_of(request.object)
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


def test_the_pack_gets_the_struct_the_engine_sends_analyzers(monkeypatch):
    """For every resource, the pack gets the Struct the engine sends analyzers: the request's own
    where the recording hands it over (a Struct of its own, with nothing to marshal), the plain
    inputs written as a Struct where the recording says they are that form (``True``), else the
    plain inputs marshalled by the pack's feeder (``runner.to_struct``). Where the request holds no
    reference and no engine key, that is the request's Struct as the SDK built it."""
    _KeepingMonitor.exchanges = []
    monkeypatch.setattr(plan_module, "RecordingMonitor", _KeepingMonitor)
    handed: list = []
    config = read_stack_config("prod")
    plan = record_plan("prod", config_strings(config), region="us-east-1",
                       on_record=lambda resource, struct: handed.append((resource, struct)))
    assert [resource for resource, _ in handed] == plan.resources
    requests = {f"{r.type}::{r.name}": r for r, _ in _KeepingMonitor.exchanges}
    plain = [resource for resource, struct in handed if struct is True]
    assert len(plain) > 0.8 * len(handed), "the feeder writes the plain inputs of most resources as they are"
    as_is = marshalled = 0
    for resource, struct in handed:
        sent = requests[f"{resource.type}::{resource.name}"].object
        if struct is True:
            packs = Struct.FromString(wire_bytes(resource.inputs))
        else:
            packs = struct if struct is not None else to_struct(resource.inputs)
        if plain_of(sent).analyzer_form:
            as_is += 1
            assert struct is not None and packs == sent, resource.urn
        else:
            marshalled += 1
            assert struct is None and packs != sent, resource.urn
    assert as_is > 0.8 * len(handed) and marshalled, "both kinds of resources are compared"


def _struct_of(inputs):
    struct = Struct()
    struct.update(inputs)
    return struct


def _recorded(stack: str, *, fast: bool, stack_file=None):
    """The stack's plan, sorted as the check writes it."""
    config = read_stack_config(stack, path=stack_file) if stack_file else read_stack_config(stack)
    plan = record_plan(stack, config_strings(config), region="us-east-1", fast=fast)
    plan.resources.sort(key=lambda r: r.urn)
    return plan


def _generated_stack_file(tmp_path, models: int):
    from benchmarks.generated_stack import write_stack

    return write_stack(models, tmp_path)[0]


@pytest.mark.parametrize("stack", ["dev", "prod", "bench20"])
def test_the_fast_recording_records_what_the_sdks_own_runtime_records(stack, tmp_path):
    """The eager loop and the SDK shortcuts change when registrations complete and how outputs are
    built, not what is registered: the same plan, resource for resource (inputs, parents,
    providers, dependencies), and the same component outputs as the SDK's plain runtime gives."""
    stack_file = _generated_stack_file(tmp_path, 20) if stack == "bench20" else None
    fast, plain = _recorded(stack, fast=True, stack_file=stack_file), _recorded(stack, fast=False, stack_file=stack_file)
    assert len(fast.resources) == len(plain.resources) > 100
    assert fast.to_json() == plain.to_json()
    assert fast.outputs == plain.outputs


#: Set by the probe program when its code has run to the end.
PROGRAM_DONE = [False]

_PROBE_PROGRAM = """
import sys
import pulumi_random

for i in range(200):
    pulumi_random.RandomPassword(f"password-{i}", length=16)
sys.modules["tests.automation.offline.test_plan"].PROGRAM_DONE[0] = True
"""


@pytest.mark.parametrize("fast, during_the_program", [(True, 200), (False, 0)])
def test_registrations_complete_while_the_program_runs(tmp_path, fast, during_the_program):
    """On the eager loop each registration completes inside its resource's constructor, so the pack
    gets every resource while the program is still running and nothing piles up in flight; on the
    SDK's plain runtime none completes before the program's code has run to its end."""
    program = tmp_path / "__main__.py"
    program.write_text(_PROBE_PROGRAM)
    PROGRAM_DONE[0] = False
    during: list[bool] = []
    plan = record_plan("probe", {}, region="us-east-1", program=program, fast=fast,
                       on_record=lambda _resource, _struct: during.append(not PROGRAM_DONE[0]))
    assert len(plan.resources) == 200 and PROGRAM_DONE[0]
    assert sum(during) == during_the_program


_FAILING_PROGRAM = """
import pulumi_random

password = pulumi_random.RandomPassword("password", length=16)
password.result.apply(lambda _: 1 / 0)
for i in range(3):
    pulumi_random.RandomPassword(f"broken-{i}", length=password.length.apply(lambda _: 1 / 0))
"""


@pytest.mark.parametrize("fast", [True, False])
def test_a_failed_program_leaves_nothing_for_the_next_recording(tmp_path, fast):
    """Outputs that failed stay in the SDK's process-wide set for the program's end to report; the
    next recording in the process does not wait on them (their loop is closed)."""
    program = tmp_path / "__main__.py"
    program.write_text(_FAILING_PROGRAM)
    with pytest.raises(ZeroDivisionError):
        record_plan("probe", {}, region="us-east-1", program=program, fast=fast)
    again = record_plan("dev", config_strings(read_stack_config("dev")), region="us-east-1", fast=fast)
    assert len(again.resources) > 100
