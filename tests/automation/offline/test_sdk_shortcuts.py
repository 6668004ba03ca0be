"""Each SDK shortcut gives what the SDK's own function gives, on the whole program."""

from __future__ import annotations

import asyncio

import pulumi
from pulumi.runtime import resource as sdk_resources
from pulumi.runtime import rpc as sdk_rpc
from pulumi.runtime.settings import SETTINGS

from automation.offline import sdk_shortcuts
from tests.conftest import plan_with


def test_stack_traces_equal_the_sdks(monkeypatch):
    """The registrations carry the stack trace the SDK itself would compute, frame for frame."""
    theirs = sdk_resources._get_stack_trace
    compared: list = []

    def both():
        mine, sdk = sdk_shortcuts.stack_trace(), theirs()
        compared.append((mine, sdk))
        return mine

    monkeypatch.setattr(sdk_shortcuts, "SHORTCUTS", tuple(
        (module, name, both if shortcut is sdk_shortcuts.stack_trace else shortcut)
        for module, name, shortcut in sdk_shortcuts.SHORTCUTS))
    plan = plan_with("dev")
    assert len(compared) >= len(plan.resources)
    assert all(mine == sdk for mine, sdk in compared)
    assert all(sdk.frames for _, sdk in compared), "every resource is created from the program's code"
    assert any(frame.pc.uri.endswith("/components/platform.py") for _, sdk in compared for frame in sdk.frames)
    assert sdk_resources._get_stack_trace is theirs, "the SDK's own function is back after the recording"


class _Props(pulumi.Resource):
    """Stands in for a resource: transfer_properties only sets attributes on it."""

    def __init__(self) -> None:  # noqa: D107 - no registration
        self._name = "probe"


async def _resolved(transfer, value, known, secret, deps, failed):
    res = _Props()
    resolvers = transfer(res, {"urn": None, "id": None, "arn": None, "tags": None}, True)
    assert set(resolvers) == {"arn", "tags"}
    resolvers["arn"](value, known, secret, deps, failed)
    resolvers["tags"]({"a": "b"}, True, False, None, None)
    outputs = []
    for name in ("arn", "tags"):
        try:
            data = await res.__dict__[name]._data
            outputs.append((data.value, data.is_known, data.is_secret, {r._name for r in data.resources}))
        except Exception as error:  # noqa: BLE001 - compared below
            outputs.append(("raised", type(error), str(error)))
    return outputs


def test_in_place_outputs_resolve_as_the_sdks():
    """Same value, known-ness (unknowns inside a value make it unknown), secrecy, resources and
    failure as the SDK's four-future outputs give."""
    dep = _Props()
    dep._name = "dependency"
    cases = [
        ("arn:aws:iam::1:role/x", True, False, None, None),
        ("hidden", True, True, {dep}, None),
        ({"nested": [1, pulumi.UNKNOWN]}, True, False, set(), None),
        (None, False, False, None, None),
        (None, False, False, None, ValueError("registration failed")),
    ]
    for case in cases:
        loop = asyncio.new_event_loop()
        try:
            ours = loop.run_until_complete(_resolved(sdk_shortcuts.transfer_properties, *case))
            theirs = loop.run_until_complete(_resolved(sdk_rpc.transfer_properties, *case))
            # Both keep a failed output in the SDK's process-wide set, for a program's end to report.
            assert bool(SETTINGS.outputs) == (case[-1] is not None)
        finally:
            SETTINGS.outputs.clear()
            loop.close()
        assert ours == theirs, case


_READING_PROGRAM = """
import pulumi
import pulumi_random

holder = pulumi.ComponentResource("test:index:Holder", "holder")
unread = [pulumi_random.RandomPassword(f"unread-{i}", length=12, opts=pulumi.ResourceOptions(parent=holder))
          for i in range(5)]
read = pulumi_random.RandomPassword("read", length=16, opts=pulumi.ResourceOptions(parent=holder))
holder.register_outputs({"result": read.result, "length": read.length.apply(lambda n: n * 2)})
"""


def test_outputs_are_built_when_first_read_and_equal_the_sdks(tmp_path, monkeypatch):
    """A resource's outputs go through the SDK's resolve_outputs when the program first reads one,
    not for resources whose outputs nobody reads; what is read equals the SDK's runtime."""
    from automation.offline.plan import record_plan

    program = tmp_path / "__main__.py"
    program.write_text(_READING_PROGRAM)
    resolved: list[str] = []
    sdk_resolve = sdk_shortcuts._sdk_resolve_outputs

    def counting(res, *args, **kwargs):
        resolved.append(res._name)
        return sdk_resolve(res, *args, **kwargs)

    monkeypatch.setattr(sdk_shortcuts, "_sdk_resolve_outputs", counting)
    fast = record_plan("probe", {}, region="us-east-1", program=program)
    assert resolved == ["read"]
    plain = record_plan("probe", {}, region="us-east-1", program=program, fast=False)
    (holder,) = [outputs for urn, outputs in fast.outputs.items() if urn.endswith("::holder")]
    assert holder["length"] == 32 and len(holder["result"]) == 16
    assert fast.outputs == plain.outputs
