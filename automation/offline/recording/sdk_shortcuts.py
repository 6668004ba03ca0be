"""Shorter ways to the SDK's own results, installed while a recording runs.

Each function here stands in for one function of the Pulumi Python SDK (pinned in
requirements.txt) and gives what that function gives, by a path that costs less under the
recording; each is tested against the SDK's own (tests/automation/offline/recording/test_sdk_shortcuts.py).
A plan recorded with them equals, resource for resource, one recorded on the SDK's own runtime
(``record_plan(..., fast=False)``); only the order of keys differs (the program's, where the SDK's
Struct gives a map's), and the registration requests differ only in the stack trace left out.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from google.protobuf.struct_pb2 import Struct
from pulumi.output import Output, Unknown, _OutputData
from pulumi import log as pulumi_log
from pulumi import Alias
from pulumi import resource as pulumi_resource
from pulumi.resource import Resource, ResourceOptions
from pulumi.resource_hooks import ResourceHookBinding
from pulumi.runtime.mocks import MockEngine
from pulumi.runtime import settings
from pulumi.runtime.settings import SETTINGS
from pulumi.runtime import resource as sdk_resources
from pulumi.runtime import rpc as sdk_rpc
from pulumi.runtime.proto import resource_pb2, source_pb2

from automation.offline.recording import sdk_serialize
from automation.offline.recording.struct_wire import SENT, Plain, to_struct


class _PropertyOutput(Output):
    """The output of one property of a registered resource, as the SDK makes it, built when read.

    The SDK turns every property the engine returns into Python values of the resource's output
    types (``DeploymentSpec`` and the rest, all the way down) as soon as the registration answers,
    whether or not the program ever reads it; the program reads a few (an ARN, a name). Here the
    registration's answer is kept as it came, and the SDK's own ``resolve_outputs`` runs over it
    the first time the program reads any output of that resource (``_data``), or at once if
    something was already waiting for one. What is read is what the SDK would have given. One
    difference: a registration answer that cannot be turned into output values (none under the
    recording's mocks, whose answers echo the inputs) fails the output it was read for, where the
    SDK would have failed the registration, and the outputs nobody reads are never built.
    """

    def __init__(self, res: Any) -> None:  # noqa: D107 - made by transfer_properties only
        self._owner = res
        self._pending_data: asyncio.Future[_OutputData[Any]] = asyncio.Future()
        self._resolution: _DeferredResolution | None = None
        self._was_read = False

    @property  # type: ignore[override]
    def _data(self) -> asyncio.Future[_OutputData[Any]]:
        self._was_read = True
        deferred = self._resolution
        if deferred is not None:
            deferred.run()
        return self._pending_data

    def _resolve(self, value: Any, is_known: bool, is_secret: bool, deps: Any, failed: Exception | None) -> None:
        """The property's resolver, called by the SDK's resolve_outputs (or on failure)."""
        self._resolution = None
        if failed is not None:
            _fail(self._pending_data, failed)
            return
        resources = set(deps) if deps else set()
        resources.add(self._owner)
        self._pending_data.set_result(_OutputData(resources=resources, value=value, is_known=is_known, is_secret=is_secret))


class _DeferredResolution:
    """One ``resolve_outputs`` call of the SDK, kept until a property output of its resource is read.

    The two Structs (the inputs as sent, the registration's answer) are kept as the plain data they
    stand for (``struct_wire.SentStructs``), or as their wire bytes when they are Structs of their
    own (a fraction of the memory of the parsed messages), and built when the call runs.
    """

    __slots__ = ("res", "inputs", "outputs", "rest", "kwargs")

    def __init__(self, res: Any, inputs: Struct, outputs: Struct, rest: tuple, kwargs: dict) -> None:
        self.res, self.rest, self.kwargs = res, rest, kwargs
        self.inputs, self.outputs = _kept(inputs), _kept(outputs)

    def run(self) -> None:
        res, self.res = self.res, None
        if res is not None:
            _sdk_resolve_outputs(res, _built(self.inputs), _built(self.outputs), *self.rest, **self.kwargs)


def _kept(message: Struct) -> Plain | bytes:
    plain = SENT.take(message)
    return plain if plain is not None else message.SerializeToString()


def _built(kept: Plain | bytes) -> Struct:
    return Struct.FromString(kept) if isinstance(kept, bytes) else to_struct(kept.value)


_sdk_resolve_outputs = sdk_rpc.resolve_outputs


def resolve_outputs(res: Any, serialized_props: Struct, outputs: Struct, deps: Any, resolvers: dict[str, Any],
                    *args: Any, **kwargs: Any) -> None:
    """``pulumi.runtime.rpc.resolve_outputs``, run when one of the resource's outputs is first read.

    Resolvers that are not :class:`_PropertyOutput`'s, or an output something already waits for,
    make it run now, as the SDK would.
    """
    owners = [getattr(resolve, "__self__", None) for resolve in resolvers.values()]
    if not all(isinstance(owner, _PropertyOutput) and not owner._was_read for owner in owners):
        _sdk_resolve_outputs(res, SENT.real(serialized_props), SENT.real(outputs), deps, resolvers, *args, **kwargs)
        return
    deferred = _DeferredResolution(res, serialized_props, outputs, (deps, resolvers, *args), kwargs)
    for owner in owners:
        owner._resolution = deferred


def transfer_properties(res: Any, props: Any, custom: bool) -> dict[str, Any]:
    """``pulumi.runtime.rpc.transfer_properties``: an output per property, and its resolver.

    The SDK builds each output from four futures (value, known, secret, dependencies) joined by a
    task that waits for all four; the output is ready a turn of the event loop after its resolver
    ran. Here the resolver sets the output's data itself, as the SDK already does for ``urn`` and
    ``id`` (``resource_output``): the output is ready the moment its value is resolved
    (:class:`_PropertyOutput`), and the same data (an ``_OutputData`` of the value, whether it is
    known and secret, and the resource with the property's dependencies) is what anyone reading it
    gets. Like the other outputs of a registration it is not tracked (:func:`_registration_output`).
    """
    resolvers: dict[str, Any] = {}
    for name in props:
        if name == "urn" or (name == "id" and custom):
            continue  # resolved by register_resource itself
        output = _PropertyOutput(res)
        resolvers[name] = output._resolve
        res.__dict__[name] = output
    return resolvers


def resource_output(res: Any) -> tuple[Any, Output]:
    """``pulumi.runtime.resource.resource_output``: the ``urn`` or ``id`` output and its resolver."""
    data: asyncio.Future[_OutputData[Any]] = asyncio.Future()

    def resolve(value: Any, known: bool, secret: bool, exn: Exception | None) -> None:
        if exn is not None:
            _fail(data, exn)
        else:
            data.set_result(_OutputData(resources={res}, value=value, is_known=known, is_secret=secret))

    return resolve, _registration_output(data)


def _registration_output(data: asyncio.Future) -> Output:
    """An output of a resource's registration, not tracked in ``SETTINGS.outputs``.

    The SDK tracks it so that the program's end waits for it, and a done callback untracks it when
    it succeeds. Its resolver runs within the registration, which the program's end waits for
    anyway (the RPC manager); so here it is tracked only if it fails (:func:`_fail`), which is where
    the SDK's callback leaves it. On a loop that does not turn until the program's code returns,
    the callbacks held every registration's outputs until the end.
    """
    output: Output = object.__new__(Output)
    output._data = data
    return output


def _fail(data: asyncio.Future, error: Exception) -> None:
    data.set_exception(error)
    with SETTINGS.lock:
        SETTINGS.outputs.add(data)


_sdk_track = Output._track


def track(self: Output) -> None:
    """``Output._track``: the SDK keeps every output's data future in ``SETTINGS.outputs`` until a
    done callback takes it out again if it succeeded (failed ones stay, for the program's end to
    report). Data that is already there when the output is made, as nearly all of it is on the
    eager loop, ends where that callback would leave it, without the callback: nothing kept if it
    succeeded, kept if it failed. The callbacks, queued on a loop that does not turn until the
    program's code returns, held every output the program ever made (60 MiB at 500 models).
    """
    data = self._data
    if not data.done():
        _sdk_track(self)
        return
    if data.cancelled() or data.exception() is not None:
        with SETTINGS.lock:
            SETTINGS.outputs.add(data)


_sdk_create_urn = sdk_resources.create_urn


def create_urn(name: Any, type_: Any, parent: Any = None, project: str | None = None, stack: str | None = None) -> Output:
    """``pulumi.runtime.resource.create_urn``: the URN of a resource from its name, type and parent.

    The SDK joins the parts through ``Output.all(...).apply(...)``, four outputs for one string,
    for every resource (its own URN for the engine, each of its aliases). When the parts are there
    already (strings, and a parent whose URN is known and not secret), the string is put together
    here and given as an output of the same data: the URN, known, not secret, and depending on the
    parent resource. Anything else goes to the SDK's own function.
    """
    if not isinstance(name, str) or not isinstance(type_, str):
        return _sdk_create_urn(name, type_, parent, project, stack)
    resources: set[Any] = set()
    if parent is None:
        prefix = f"urn:pulumi:{stack if stack is not None else settings.get_stack()}::" \
                 f"{project if project is not None else settings.get_project()}::"
    else:
        if isinstance(parent, str):
            parent_urn = parent
        elif isinstance(parent, Resource):
            data = parent.urn._data
            if not data.done() or data.cancelled() or data.exception() is not None:
                return _sdk_create_urn(name, type_, parent, project, stack)
            parent_data = data.result()
            if not parent_data.is_known or parent_data.is_secret or not isinstance(parent_data.value, str):
                return _sdk_create_urn(name, type_, parent, project, stack)
            parent_urn, resources = parent_data.value, set(parent_data.resources)
        else:
            return _sdk_create_urn(name, type_, parent, project, stack)
        prefix = parent_urn[: parent_urn.rfind("::")] + "$"
    data = asyncio.get_event_loop().create_future()
    data.set_result(_OutputData(resources=resources, value=prefix + type_ + "::" + name, is_known=True, is_secret=False))
    return Output._from_data(data)


_sdk_collapse_alias_to_urn = sdk_resources.collapse_alias_to_urn


def collapse_alias_to_urn(alias: Any, default_name: str, default_type: str, default_parent: Any) -> Output:
    """``pulumi.runtime.resource.collapse_alias_to_urn``: the URN an alias stands for.

    The SDK makes it through three outputs and two applies (the alias as an output, its project and
    stack joined, then ``create_urn``) for every alias of every resource it is given; Kubernetes
    types come with the API versions they replace as aliases, three for a Deployment. An ``Alias``
    whose name, type, project and stack are strings (given, or the defaults) goes straight to
    :func:`create_urn`, which gives the same data: the URN, known and not secret when its parent's
    is, depending on the parent. Anything else (an alias that is a string or an output, fields that
    are outputs, a name or type missing: the SDK fails the output for those) goes to the SDK.
    """
    if type(alias) is Alias:
        name = alias.name if alias.name is not ... else default_name
        type_ = alias.type_ if alias.type_ is not ... else default_type
        parent = alias.parent if alias.parent is not ... else default_parent
        project = alias.project if alias.project is not ... and alias.project is not None else settings.get_project()
        stack = alias.stack if alias.stack is not ... and alias.stack is not None else settings.get_stack()
        if type(name) is str and type(type_) is str and type(project) is str and type(stack) is str:
            return create_urn(name, type_, parent, project, stack)
    return _sdk_collapse_alias_to_urn(alias, default_name, default_type, default_parent)


_sdk_debug = pulumi_log.debug


def debug(msg: str, resource: Any = None, stream_id: int | None = None, ephemeral: bool | None = None) -> None:
    """``pulumi.log.debug``, not sent where it would be dropped: the mocks' engine hands debug
    messages to its Python logger, which discards them unless DEBUG is enabled for it. The SDK logs
    a few per registration, each built into a LogRequest first."""
    engine = settings.get_engine()
    if isinstance(engine, MockEngine) and not engine.logger.isEnabledFor(logging.DEBUG):
        return
    _sdk_debug(msg, resource, stream_id, ephemeral)


_PLAIN_SCALARS = frozenset((str, int, float, bool, type(None)))


def contains_unknowns(val: Any) -> bool:
    """``pulumi.runtime.rpc.contains_unknowns``: is an ``Unknown`` anywhere in ``val``'s dicts and
    lists. The SDK asks it of every output's value as the output is made, through a recursive
    generator per container; here a loop over a stack, plain scalars passed over at once. The
    same containers are entered (each once, by identity) and read the same way (a dict that is
    not exactly a dict through its ``__getitem__``)."""
    if type(val) in _PLAIN_SCALARS:
        return False
    seen: set[int] = set()
    pending = [val]
    while pending:
        value = pending.pop()
        if isinstance(value, Unknown):
            return True
        kind = type(value)
        if kind in _PLAIN_SCALARS or id(value) in seen:
            continue
        seen.add(id(value))
        if kind is dict:
            pending.extend(value.values())
        elif kind is list:
            pending.extend(value)
        elif isinstance(value, dict):
            pending.extend(value[key] for key in value)
        elif isinstance(value, list):
            pending.extend(value)
    return False


_NO_STACK_TRACE = source_pb2.StackTrace()


def no_stack_trace() -> source_pb2.StackTrace:
    """``pulumi.runtime.resource._get_stack_trace``, left empty.

    The engine uses a registration's stack trace and source position to point at the line of the
    program that made the resource; nothing in the offline check reads them (the plan and the
    pack get the inputs, type, name, parent, provider and dependencies), and the SDK worked them
    out from the whole call stack, file by file, for every resource. Without frames the source
    position is left out too (``_get_source_position`` takes the first frame).
    """
    return _NO_STACK_TRACE


def shallow_copy(self: Any) -> Any:
    """``ResourceOptions._copy`` and ``ResourceHookBinding._copy``: ``copy.copy(self)``.

    For these classes (no ``__copy__``, ``__reduce__``, ``__getstate__``, ``__setstate__`` or
    slots) ``copy.copy`` makes ``cls.__new__(cls)`` and updates its ``__dict__`` with the
    original's, through the generic pickling protocol; here the same two steps directly. Options
    are copied five times per resource (each merge copies both sides, and the resource its own).
    """
    cls = type(self)
    new = cls.__new__(cls)
    new.__dict__.update(self.__dict__)
    return new


class Registration:
    """``RegisterResourceRequest`` as the SDK's ``register_resource`` makes it, for the recording's
    monitor: the keyword arguments kept as given, the message built only if something reads a field
    the monitor does not (``message()``).

    protobuf copied the SDK's ~35 arguments into the message one by one, and a message for each
    property's dependencies: 17 us per resource (0.08 s at 500 models); the monitor reads nine
    fields. Those nine read as the message's would (an argument left ``None`` or out is the field's
    default); any other attribute is the built message's.
    """

    __slots__ = ("_fields", "_message")

    #: The fields read without building the message, and their defaults.
    DIRECT: dict[str, Any] = {"type": "", "name": "", "parent": "", "custom": False, "provider": "", "importId": "",
                              "dependencies": (), "transforms": (), "object": None}

    PropertyDependencies: Any = None  # set below: kept as given too
    CustomTimeouts = resource_pb2.RegisterResourceRequest.CustomTimeouts
    ResourceHooksBinding = resource_pb2.RegisterResourceRequest.ResourceHooksBinding

    def __init__(self, **fields: Any) -> None:
        self._fields = fields
        self._message: resource_pb2.RegisterResourceRequest | None = None

    def __getattr__(self, name: str) -> Any:
        default = Registration.DIRECT.get(name, _NOT_DIRECT)
        if default is _NOT_DIRECT:
            return getattr(self.message(), name)
        value = self._fields.get(name)
        if value is not None:
            return value
        return Struct() if name == "object" else default

    def message(self) -> resource_pb2.RegisterResourceRequest:
        """The request as protobuf builds it from the same arguments."""
        if self._message is None:
            fields = dict(self._fields)
            if fields.get("propertyDependencies"):
                fields["propertyDependencies"] = {
                    key: resource_pb2.RegisterResourceRequest.PropertyDependencies(urns=deps.urns)
                    for key, deps in fields["propertyDependencies"].items()}
            self._message = resource_pb2.RegisterResourceRequest(**fields)
        return self._message


class _PropertyDependencies:
    """``RegisterResourceRequest.PropertyDependencies`` as the SDK makes it: its URNs, kept."""

    __slots__ = ("urns",)

    def __init__(self, urns: Any = ()) -> None:
        self.urns = urns


_NOT_DIRECT = object()
Registration.PropertyDependencies = _PropertyDependencies


class _ResourceProtos:
    """``resource_pb2`` as ``pulumi.runtime.resource`` sees it under the recording: the module, but
    registrations made as :class:`Registration`."""

    RegisterResourceRequest = Registration

    def __getattr__(self, name: str) -> Any:
        return getattr(resource_pb2, name)


def registration_message(request: Any) -> resource_pb2.RegisterResourceRequest:
    """A registration the monitor received, as its protobuf message (either kind)."""
    return request.message() if isinstance(request, Registration) else request


#: (module, attribute, shortcut): what ``installed()`` swaps in.
SHORTCUTS = (
    (sdk_rpc, "transfer_properties", transfer_properties),
    (sdk_rpc, "resolve_outputs", resolve_outputs),
    (sdk_resources, "resource_output", resource_output),
    (sdk_resources, "create_urn", create_urn),
    (sdk_rpc, "serialize_property", sdk_serialize.serialize_property),
    (sdk_rpc, "serialize_properties", sdk_serialize.serialize_properties),
    (sdk_resources, "_get_stack_trace", no_stack_trace),
    (Output, "_track", track),
    (pulumi_log, "debug", debug),
    (sdk_rpc, "contains_unknowns", contains_unknowns),
    (sdk_resources, "collapse_alias_to_urn", collapse_alias_to_urn),
    (pulumi_resource, "collapse_alias_to_urn", collapse_alias_to_urn),  # Resource.__init__'s own import
    (ResourceOptions, "_copy", shallow_copy),
    (ResourceHookBinding, "_copy", shallow_copy),
    (sdk_resources, "resource_pb2", _ResourceProtos()),
)


@contextmanager
def installed() -> Iterator[None]:
    """The SDK with these shortcuts for the duration; its own functions are back afterwards."""
    saved = [(module, name, getattr(module, name)) for module, name, _ in SHORTCUTS]
    try:
        for module, name, shortcut in SHORTCUTS:
            setattr(module, name, shortcut)
        yield
    finally:
        for module, name, original in saved:
            setattr(module, name, original)
