"""Each SDK shortcut gives what the SDK's own function gives, on the whole program."""

from __future__ import annotations

import asyncio

import pulumi
from pulumi.runtime import rpc as sdk_rpc
from pulumi.runtime.settings import SETTINGS

from automation.offline.recording import sdk_shortcuts


def _registrations(fast: bool) -> dict:
    """Every RegisterResourceRequest of the prod program, by URN, as the monitor received it (the
    inputs Struct built where the fast recording sent a stand-in for it)."""
    from automation.offline import plan as plan_module
    from automation.offline.recording.struct_wire import SENT
    from automation.stacks import read_stack_config
    from components.settings import config_strings

    kept: dict = {}

    class Keeping(plan_module.RecordingMonitor):
        def RegisterResource(self, request):  # noqa: N802 - gRPC method name
            response = super().RegisterResource(request)
            message = sdk_shortcuts.registration_message(request)
            copy = type(message)()
            copy.CopyFrom(message)
            copy.object.CopyFrom(SENT.real(request.object))
            kept[response.urn] = copy
            return response

    real = plan_module.RecordingMonitor
    plan_module.RecordingMonitor = Keeping
    try:
        plan_module.record_plan("prod", config_strings(read_stack_config("prod")), region="us-east-1", fast=fast)
    finally:
        plan_module.RecordingMonitor = real
    return kept


def _comparable(request) -> dict:
    """The request as data, repeated fields that come from sets sorted."""
    from google.protobuf import json_format

    data = json_format.MessageToDict(request)
    for key in ("dependencies", "aliasURNs"):
        if key in data:
            data[key] = sorted(data[key])
    for deps in data.get("propertyDependencies", {}).values():
        deps["urns"] = sorted(deps.get("urns", []))
    if "aliases" in data:
        data["aliases"] = sorted(data["aliases"], key=repr)
    return data


def test_registrations_equal_the_sdks_but_for_the_stack_trace():
    """Request by request, the monitor receives from the fast recording what it receives from the
    SDK's plain runtime (inputs, parent, provider, dependencies, aliases, options), except the stack
    trace and source position the shortcut leaves out."""
    fast, plain = _registrations(True), _registrations(False)
    assert fast.keys() == plain.keys() and len(fast) > 200
    assert all(plain[urn].stackTrace.frames for urn in plain if not urn.endswith("pulumi:pulumi:Stack::llm-platform-prod"))
    for urn, request in fast.items():
        assert not request.stackTrace.frames and not request.HasField("sourcePosition"), urn
        ours, theirs = type(request)(), type(request)()
        ours.CopyFrom(request)
        theirs.CopyFrom(plain[urn])
        for message in (ours, theirs):
            message.ClearField("stackTrace")
            message.ClearField("sourcePosition")
        assert _comparable(ours) == _comparable(theirs), urn


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


#: The end of a probe program: each case's output from ``ours`` and from ``sdk`` (both given as the
#: program's names for the two functions) described as data and kept in ``seen``.
_COMPARE_OUTPUTS = """

async def describe(output):
    data = await output._data
    return (data.value, data.is_known, data.is_secret, sorted(r._name for r in data.resources))


for case, args in cases.items():
    for which, make in (("ours", ours), ("sdk", sdk)):
        output = make(*args)
        pulumi.Output.from_input(None).apply(
            lambda _, case=case, which=which, output=output: describe(output)
        ).apply(lambda described, case=case, which=which: seen.setdefault(case, {}).__setitem__(which, described))
"""


_URN_PROGRAM = """
import sys
import pulumi
from automation.offline.recording import sdk_shortcuts

seen = sys.modules["tests.automation.offline.recording.test_sdk_shortcuts"].URNS_SEEN
parent = pulumi.ComponentResource("test:index:Parent", "parent")
secret_parent_urn = pulumi.Output.secret("urn:pulumi:probe::llm-platform::test:index:Parent::hidden")
cases = {
    "no parent": ("name", "aws:iam/role:Role", None, None, None),
    "no parent, other project": ("name", "aws:iam/role:Role", None, "other", "elsewhere"),
    "parent resource": ("child", "aws:iam/role:Role", parent, None, None),
    "parent urn": ("child", "aws:iam/role:Role", "urn:pulumi:probe::llm-platform::test:index:Parent::parent", None, None),
    "name as output": (pulumi.Output.from_input("late"), "aws:iam/role:Role", parent, None, None),
    "secret parent urn": ("child", "aws:iam/role:Role", secret_parent_urn, None, None),
}

ours, sdk = sdk_shortcuts.create_urn, sdk_shortcuts._sdk_create_urn
""" + _COMPARE_OUTPUTS

URNS_SEEN: dict = {}


def _compare_in_a_program(tmp_path, program_text: str, seen: dict, *, cases: int) -> None:
    """Record ``program_text`` (a probe ending in ``_COMPARE_OUTPUTS``); every case's output from
    the shortcut equals the SDK's."""
    from automation.offline.plan import record_plan

    program = tmp_path / "__main__.py"
    program.write_text(program_text)
    seen.clear()
    record_plan("probe", {}, region="us-east-1", program=program)
    assert len(seen) == cases
    for case, both in seen.items():
        assert both["ours"] == both["sdk"], case


def test_urns_equal_the_sdks(tmp_path):
    """Same URN, known-ness, secrecy and dependencies as the SDK's create_urn, for every shape of
    arguments (those it does not take go to the SDK's own function)."""
    _compare_in_a_program(tmp_path, _URN_PROGRAM, URNS_SEEN, cases=6)
    assert URNS_SEEN["parent resource"]["ours"] == (
        "urn:pulumi:probe::llm-platform::pulumi:pulumi:Stack$test:index:Parent$aws:iam/role:Role::child", True, False,
        ["parent"])
    assert URNS_SEEN["no parent, other project"]["ours"][0] == "urn:pulumi:elsewhere::other::aws:iam/role:Role::name"


_ALIAS_PROGRAM = """
import sys
import pulumi
from automation.offline.recording import sdk_shortcuts

seen = sys.modules["tests.automation.offline.recording.test_sdk_shortcuts"].ALIASES_SEEN
parent = pulumi.ComponentResource("test:index:Parent", "parent")
other = pulumi.ComponentResource("test:index:Other", "other")
cases = {
    "type only": (pulumi.Alias(type_="kubernetes:apps/v1beta1:Deployment"), "web", "kubernetes:apps/v1:Deployment", parent),
    "no parent": (pulumi.Alias(type_="old:index:T"), "web", "new:index:T", None),
    "name and other parent": (pulumi.Alias(name="old", parent=other), "web", "new:index:T", parent),
    "no parent given": (pulumi.Alias(name="old", parent=None), "web", "new:index:T", parent),
    "parent urn": (pulumi.Alias(parent="urn:pulumi:probe::llm-platform::test:index:P::p"), "web", "new:index:T", None),
    "project and stack": (pulumi.Alias(project="other", stack="elsewhere"), "web", "new:index:T", None),
    "project as output": (pulumi.Alias(project=pulumi.Output.from_input("late")), "web", "new:index:T", None),
    "string": ("urn:pulumi:probe::llm-platform::new:index:T::old", "web", "new:index:T", parent),
    "alias as output": (pulumi.Output.from_input(pulumi.Alias(name="old")), "web", "new:index:T", parent),
    "secret parent": (pulumi.Alias(parent=pulumi.Output.secret("urn:pulumi:probe::llm-platform::test:index:P::p")),
                      "web", "new:index:T", None),
}

ours, sdk = sdk_shortcuts.collapse_alias_to_urn, sdk_shortcuts._sdk_collapse_alias_to_urn
""" + _COMPARE_OUTPUTS

ALIASES_SEEN: dict = {}


def test_aliases_collapse_to_the_urns_the_sdk_gives(tmp_path):
    """Same URN, known-ness, secrecy and dependencies as the SDK's collapse_alias_to_urn, for every
    shape of alias (those it does not take go to the SDK's own)."""
    _compare_in_a_program(tmp_path, _ALIAS_PROGRAM, ALIASES_SEEN, cases=10)
    assert ALIASES_SEEN["type only"]["ours"] == (
        "urn:pulumi:probe::llm-platform::pulumi:pulumi:Stack$test:index:Parent$kubernetes:apps/v1beta1:Deployment::web",
        True, False, ["parent"])


_SERIALIZE_PROGRAM = """
import enum
import sys
import types
import typing
import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s
import pulumi_random
from automation.offline.recording import sdk_serialize

seen = sys.modules["tests.automation.offline.recording.test_sdk_shortcuts"].SERIALIZED


class Color(str, enum.Enum):
    RED = "red"


password = pulumi_random.RandomPassword("password", length=16)
holder = pulumi.ComponentResource("test:index:Holder", "holder")
deployment_spec = k8s.apps.v1.DeploymentSpecArgs(
    selector=k8s.meta.v1.LabelSelectorArgs(match_labels={"app": "x"}),
    template=k8s.core.v1.PodTemplateSpecArgs(
        metadata=k8s.meta.v1.ObjectMetaArgs(labels={"app": password.result}),
        spec=k8s.core.v1.PodSpecArgs(containers=[k8s.core.v1.ContainerArgs(name="c", image="i:1", args=("a", 1, 2.5))]),
    ),
)
values = {
    "plain": {"a": [1, 2.0, "three", None, True], "nested": {"deep": ("t", 1)}},
    "output": password.result,
    "secret": pulumi.Output.secret("s3cr3t"),
    "secret output in dict": {"key": pulumi.Output.secret({"inner": password.length})},
    "unknown": pulumi.UNKNOWN,
    "output of unknown": pulumi.Output.from_input([1, pulumi.UNKNOWN]),
    "input type": deployment_spec,
    "input type dict": {"selector": {"match_labels": {"app": "y"}}, "replicas": 2},
    "resource": password,
    "component": holder,
    "asset": pulumi.StringAsset("text"),
    "archive": pulumi.AssetArchive({"f": pulumi.StringAsset("x")}),
    "enum": Color.RED,
    "awaitable": lambda: pulumi.Output.from_input(1).future(),  # a fresh coroutine for each serializer
    "illegal": object(),
    "bytes": b"raw",
    "union, a member picked": {"match_labels": {"app": "z"}},
    "union, the other member": {"a": 1},
    "typed values": {"first": {"match_labels": {"app": "w"}}, "second": None},
    "keys transformed": {"some_key": {"inner_key": [1, {"deep_key": 2}]}},
    "mapping proxy": types.MappingProxyType({"a_b": {"c_d": 1}}),
}
SELECTOR_OR_COUNTS = typing.Union[k8s.meta.v1.LabelSelectorArgs, typing.Mapping[str, int]]
typs = {
    "input type dict": k8s.apps.v1.DeploymentSpecArgs,
    "plain": typing.Optional[typing.Mapping[str, typing.Any]],
    "union, a member picked": typing.Optional[pulumi.Input[SELECTOR_OR_COUNTS]],
    "union, the other member": SELECTOR_OR_COUNTS,
    "typed values": typing.Mapping[str, k8s.meta.v1.LabelSelectorArgs],
    "keys transformed": dict,
}
transformers = {"keys transformed": str.upper, "mapping proxy": str.upper}


async def both(name, value):
    out = []
    for serialize in (sdk_serialize.serialize_property, sdk_serialize._sdk_serialize_property):
        deps = []
        try:
            given = value() if name == "awaitable" else value
            result = await serialize(given, deps, "prop", None, transformers.get(name), typs.get(name))
            out.append(("ok", result, sorted(r._name for r in deps)))
        except Exception as error:
            out.append(("raised", type(error).__name__, str(error)))
    seen[name] = out


for name, value in values.items():
    pulumi.Output.from_input(None).apply(lambda _, name=name, value=value: both(name, value))
"""

SERIALIZED: dict = {}


def test_serialized_values_equal_the_sdks(tmp_path):
    """Value by value, the plain walk gives what the SDK's serializer gives, dependencies included;
    what it does not take (resources, assets, awaitables, values the SDK refuses) is the SDK's own
    answer or error."""
    from automation.offline.plan import record_plan

    program = tmp_path / "__main__.py"
    program.write_text(_SERIALIZE_PROGRAM)
    SERIALIZED.clear()
    record_plan("probe", {}, region="us-east-1", program=program)
    assert len(SERIALIZED) == 21
    for name, (ours, theirs) in SERIALIZED.items():
        assert ours == theirs, name
    # The typed branches were taken: keys translated by the member picked, the values' type, the transformer.
    assert SERIALIZED["union, a member picked"][0][1] == {"matchLabels": {"app": "z"}}
    assert SERIALIZED["union, the other member"][0][1] == {"a": 1}
    assert SERIALIZED["typed values"][0][1] == {"first": {"matchLabels": {"app": "w"}}, "second": None}
    assert SERIALIZED["keys transformed"][0][1] == {"SOME_KEY": {"INNER_KEY": [1, {"DEEP_KEY": 2}]}}
    assert SERIALIZED["input type"][0][1]["template"]["metadata"]["labels"]["app"]
    assert SERIALIZED["input type"][0][2] == ["password"]
    assert SERIALIZED["illegal"][0][0] == "raised"


def test_debug_messages_still_reach_a_logger_that_wants_them(tmp_path, caplog):
    """Debug messages are left out only where the mocks' engine would drop them."""
    import logging

    from automation.offline.plan import record_plan

    program = tmp_path / "__main__.py"
    program.write_text("import pulumi\npulumi.log.debug('probe says hello')\npulumi.log.warn('probe warns')\n")
    with caplog.at_level(logging.WARNING):
        record_plan("probe", {}, region="us-east-1", program=program)
    assert "probe warns" in caplog.text and "probe says hello" not in caplog.text
    caplog.clear()
    with caplog.at_level(logging.DEBUG):
        record_plan("probe", {}, region="us-east-1", program=program)
    assert "probe says hello" in caplog.text and "registering resource" in caplog.text


def test_unknowns_found_as_the_sdk_finds_them():
    import random

    from pulumi.output import UNKNOWN

    class Odd(dict):
        def __getitem__(self, key):
            return UNKNOWN if key == "hidden" else super().__getitem__(key)

    cyclic: list = [1]
    cyclic.append(cyclic)
    cases = [None, "x", 3, [], {}, UNKNOWN, [UNKNOWN], {"a": [1, {"b": UNKNOWN}]}, {"a": [1, {"b": 2}]}, cyclic,
             Odd(hidden=1), Odd(shown=1), ("tuple", UNKNOWN), [[[[[UNKNOWN]]]]]]
    rng = random.Random(3)

    def value(depth):
        kind = rng.randrange(6 if depth < 5 else 3)
        if kind == 0:
            return UNKNOWN if rng.random() < 0.05 else "s"
        if kind in (1, 2):
            return rng.choice([1, 2.5, None, True])
        if kind in (3, 4):
            return {f"k{i}": value(depth + 1) for i in range(rng.randrange(4))}
        return [value(depth + 1) for _ in range(rng.randrange(4))]

    cases += [value(0) for _ in range(500)]
    assert any(sdk_rpc.contains_unknowns(case) for case in cases[20:]), "some random cases hold an unknown"
    for case in cases:
        assert sdk_shortcuts.contains_unknowns(case) == sdk_rpc.contains_unknowns(case), case


def test_options_are_copied_as_copy_copies_them():
    """The options and hook bindings a resource is made with, copied as ``copy.copy`` copies them:
    a new object of the same class whose attributes are the same objects, the original unchanged."""
    import copy

    from pulumi.resource import CustomTimeouts, ResourceOptions
    from pulumi.resource_hooks import ResourceHookBinding

    assert not any(name in vars(cls) for cls in (ResourceOptions, ResourceHookBinding)
                   for name in ("__copy__", "__reduce__", "__reduce_ex__", "__getstate__", "__setstate__", "__slots__"))
    cases = [ResourceOptions(), ResourceOptions(protect=True, aliases=["urn:a"], depends_on=[], ignore_changes=["x"],
                                                custom_timeouts=CustomTimeouts(create="1m"), version="1.2.3"),
             ResourceOptions.merge(ResourceOptions(version="1"), ResourceOptions(retain_on_delete=True)),
             ResourceHookBinding()]
    for original in cases:
        before = dict(vars(original))
        fast, reference = sdk_shortcuts.shallow_copy(original), copy.copy(original)
        assert type(fast) is type(reference) and fast is not original
        assert vars(fast).keys() == vars(reference).keys()
        assert all(vars(fast)[key] is vars(reference)[key] for key in vars(reference))
        assert vars(original) == before


def test_a_registration_reads_as_the_message_built_from_the_same_arguments():
    """The fields the monitor reads without building the message equal the message's, whether the
    SDK gave them, left them None or left them out; any other field is the message's."""
    from pulumi.runtime.proto import resource_pb2

    from automation.offline.recording.sdk_shortcuts import Registration
    from automation.offline.recording.struct_wire import to_struct

    given = Registration(
        type="aws:iam/role:Role", name="r", parent="urn:p", custom=True, object=to_struct({"a": 1}),
        provider="urn:prov::id", importId=None, dependencies=["urn:a", "urn:b"], protect=None, retainOnDelete=False,
        propertyDependencies={"a": Registration.PropertyDependencies(urns=["urn:a"])},
        customTimeouts=Registration.CustomTimeouts(create="5m"), version="",
    )
    bare = Registration(type="t", name="n")
    for registration in (given, bare):
        message = registration.message()
        assert isinstance(message, resource_pb2.RegisterResourceRequest)
        for field in Registration.DIRECT:
            ours, theirs = getattr(registration, field), getattr(message, field)
            if field in ("dependencies", "transforms"):
                ours, theirs = list(ours), list(theirs)
            assert ours == theirs, field
        assert registration.retainOnDelete == message.retainOnDelete
        assert registration.HasField("customTimeouts") == message.HasField("customTimeouts")
    assert list(given.propertyDependencies["a"].urns) == ["urn:a"]
    assert given.customTimeouts.create == "5m" and given.HasField("retainOnDelete") and not given.HasField("protect")
    assert sdk_shortcuts.registration_message(given) is given.message()


def test_the_monitor_reads_each_registration_as_its_message(monkeypatch):
    """Over the prod program, every field the monitor reads directly equals the built message's."""
    from automation.offline import plan as plan_module
    from automation.offline.recording.sdk_shortcuts import Registration
    from automation.offline.recording.struct_wire import SENT
    from automation.stacks import read_stack_config
    from components.settings import config_strings

    seen = []

    class Checking(plan_module.RecordingMonitor):
        def RegisterResource(self, request):  # noqa: N802 - gRPC method name
            assert isinstance(request, Registration)
            message = request.message()
            for field in Registration.DIRECT:
                ours, theirs = getattr(request, field), getattr(message, field)
                if field == "object":
                    ours, theirs = SENT.real(ours), SENT.real(theirs)
                elif field in ("dependencies", "transforms"):
                    ours, theirs = list(ours), list(theirs)
                assert ours == theirs, (request.name, field)
            seen.append(request.name)
            return super().RegisterResource(request)

    monkeypatch.setattr(plan_module, "RecordingMonitor", Checking)
    plan_module.record_plan("prod", config_strings(read_stack_config("prod")), region="us-east-1")
    assert len(seen) > 200
