"""``pulumi.runtime.rpc.serialize_property`` without waiting, for the values a program has in hand.

The SDK serializes each input value as a coroutine that awaits every output inside it, and works
out the type metadata (``Optional[Input[...]]`` unwrapped, an input type's Python -> Pulumi names
and property types) anew at every level of every value. On the eager loop every output a
registration reads is already resolved, so the same walk can run as a plain function, with the
type metadata looked up once per type. It follows the SDK's function branch by branch for plain
values, lists, dicts, input types and outputs; anything else (resources, assets, archives,
awaitables, protobuf values, an output not resolved yet or failed, output values kept for a remote
component, a value the SDK would refuse) goes to the SDK's own coroutine, from the top of that
value, so what it returns or raises is the SDK's.
"""

from __future__ import annotations

import inspect
import typing
from collections import abc
from typing import Any

from pulumi import _types
from pulumi.output import Output, Unknown
from pulumi.resource import Resource
from pulumi.asset import Archive, Asset
from pulumi.runtime import rpc as sdk_rpc
from pulumi.runtime import settings
from pulumi.runtime.proto import resource_pb2
from google.protobuf import struct_pb2

from automation.offline.recording.struct_wire import _EXACT, SENT, SPECIAL_SIG_KEY

_sdk_serialize_property = sdk_rpc.serialize_property
_SECRETS = resource_pb2.RESOURCE_MONITOR_FEATURE_SECRETS
_OUTPUT_VALUES = resource_pb2.RESOURCE_MONITOR_FEATURE_OUTPUT_VALUES
_MAPPING_ORIGINS = (dict, typing.Dict, abc.Mapping, typing.Mapping)  # noqa: UP006 - as the SDK lists them
_NOT_SEQUENCES = (str, range, memoryview, bytes, bytearray)
_LEGAL = (bool, str, int, float, dict, list)


class _Fallback(Exception):
    """This value is for the SDK's own serializer."""


def _memo(function: Any) -> Any:
    """``function(typ)``, remembered per type object. By identity: the annotations a program's
    input types carry live as long as their classes, and hashing a ``typing`` alias is itself a
    Python-level walk. The entry keeps its type alive, so its id is not reused."""
    memo: dict[int, tuple[Any, Any]] = {}

    def remembered(typ: Any) -> Any:
        entry = memo.get(id(typ))
        if entry is None or entry[0] is not typ:
            entry = memo[id(typ)] = (typ, function(typ))
        return entry[1]

    return remembered


_unwrap_type = _memo(_types.unwrap_type)
_list_element_type = _memo(sdk_rpc._get_list_element_type)
_input_names = _memo(_types.input_type_py_to_pulumi_names)
_input_types = _memo(_types.input_type_types)
_is_input_type = _memo(_types.is_input_type)


@_memo
def _mapping_value_type(typ: Any) -> tuple[bool, Any]:
    """For a non-input-type ``typ`` of a mapping value: (keys translated?, type of each value)."""
    if typ is dict or typing.get_origin(typ) in _MAPPING_ORIGINS:
        args = typing.get_args(typ)
        if len(args) == 2 and args[0] is str:
            return False, args[1]
        return True, None  # keys keep the input transformer, values untyped
    return False, None


async def serialize_property(
    value: Any,
    deps: list[Resource] | None,
    property_key: str | None,
    resource_obj: Resource | None = None,
    input_transformer: Any = None,
    typ: Any = None,
    keep_output_values: bool = False,
    exclude_resource_refs_from_deps: bool = False,
    return_protobuf_value: bool = False,
) -> Any:
    """``pulumi.runtime.rpc.serialize_property``: the plain walk when it can, else the SDK's.
    ``_PLAIN_SO_FAR.plain`` says, as it returns, whether the value is in the plain form as it is."""
    if not return_protobuf_value:
        found: list[Resource] = []
        _PLAIN_SO_FAR.plain = True
        try:
            result = _serialize(value, found, property_key, input_transformer, typ, keep_output_values)
        except _Fallback:
            pass
        else:
            if deps is not None:
                deps.extend(found)
            return result
    result = await _sdk_serialize_property(value, deps, property_key, resource_obj, input_transformer, typ,
                                           keep_output_values, exclude_resource_refs_from_deps, return_protobuf_value)
    _PLAIN_SO_FAR.plain = False  # set as it returns: nothing else runs before the caller reads it
    return result


#: Values of these exact types are what the SDK returns as they are (no branch before its last takes them).
_SCALARS = frozenset((str, int, float, bool, type(None)))
#: Of those, the ones that are their own plain form whatever their value (an int is, within a double's range).
_PLAIN_SCALARS = frozenset((str, bool, type(None)))


class _PlainSoFar:
    """Whether what the plain walk returned since ``plain`` was last set is, as it is, the plain form
    the recording keeps for a Struct of it (``struct_wire.plain_of``): strings, booleans, nulls,
    integers a double holds exactly, in fresh dicts and lists whose keys are strings other than the
    engine's (``__`` and the signature key). Anything else (a float, a large integer, an enum, such
    a key, a value the SDK serialized) clears it, and the stand-in is then made by the walk that
    turns a tree into that form (``SentStructs.stand_in``); at 500 models that walk was 0.08 s."""

    __slots__ = ("plain",)

    def __init__(self) -> None:
        self.plain = True


_PLAIN_SO_FAR = _PlainSoFar()
#: Keys seen to be plain ones (see :func:`_plain_key`); the same few hundred recur in every resource.
_PLAIN_KEYS: set[str] = set()
_PLAIN_KEYS_MAX = 20_000


def _plain_key(key: Any) -> bool:
    """Whether ``key`` is a plain one (a string, not the engine's); remembered if it is."""
    if type(key) is str and key[:2] != "__" and key != SPECIAL_SIG_KEY:
        if len(_PLAIN_KEYS) < _PLAIN_KEYS_MAX:
            _PLAIN_KEYS.add(key)
        return True
    return False


def _serialize(value: Any, deps: list[Resource], key: str | None, transformer: Any, typ: Any, keep_outputs: bool) -> Any:
    """The SDK's branches, in its order, for the values that need no waiting."""
    exact = type(value)
    if exact in _SCALARS:
        if exact is float or (exact is int and not -_EXACT <= value <= _EXACT):
            _PLAIN_SO_FAR.plain = False
        return value
    if exact is dict:  # no branch before the mapping one takes a dict
        return _mapping(value, deps, transformer, typ, keep_outputs)
    if typ:
        typ = _unwrap_type(typ)
    if typ is Any:
        typ = None
    if isinstance(value, abc.Sequence) and not isinstance(value, _NOT_SEQUENCES):
        element = _list_element_type(typ)
        return [item if type(item) in _PLAIN_SCALARS else _serialize(item, deps, key, transformer, element, keep_outputs)
                for item in value]
    if isinstance(value, Unknown):
        return sdk_rpc.UNKNOWN
    if isinstance(value, (Resource, Asset, Archive, struct_pb2.Value)):
        raise _Fallback
    if inspect.isawaitable(value):
        raise _Fallback
    if isinstance(value, Output):
        return _output(value, deps, key, transformer, typ, keep_outputs)
    value_cls = type(value)
    if _is_input_type(value_cls):
        types = _input_types(value_cls)
        out = {k: _serialize(v, deps, key, transformer, types.get(k), keep_outputs)
               for k, v in _types.input_type_to_dict(value).items()}
        for k in out:
            if k not in _PLAIN_KEYS and not _plain_key(k):
                _PLAIN_SO_FAR.plain = False
        return out
    if isinstance(value, abc.Mapping):
        return _mapping(value, deps, transformer, typ, keep_outputs)
    if value is not None and not isinstance(value, _LEGAL):
        raise _Fallback  # the SDK raises its error about the unexpected input
    _PLAIN_SO_FAR.plain = False  # a subclass of a scalar type (an enum): its plain form is the base type's
    return value


def _output(output: Output, deps: list[Resource], key: str | None, transformer: Any, typ: Any, keep_outputs: bool) -> Any:
    if keep_outputs and settings.monitor_supports_feature(_OUTPUT_VALUES):
        raise _Fallback  # output values for a remote component
    future = output._data
    if not future.done() or future.cancelled() or future.exception() is not None:
        raise _Fallback
    data = future.result()
    resources = data.resources
    deps.extend(resources)
    promise_deps: list[Resource] = []
    inner = data.value
    if type(inner) not in _SCALARS and sdk_rpc.contains_unknowns(inner):  # a scalar is never a container of one
        inner = None
    value = _serialize(inner, promise_deps, key, transformer, typ, False)
    deps.extend(promise_deps)
    resources.update(promise_deps)  # as the SDK does, into the output's own set
    if not data.is_known:
        if data.is_secret and settings.monitor_supports_feature(_SECRETS):
            return {sdk_rpc._special_sig_key: sdk_rpc._special_secret_sig, "value": sdk_rpc.UNKNOWN}
        return sdk_rpc.UNKNOWN
    if data.is_secret and settings.monitor_supports_feature(_SECRETS):
        return {sdk_rpc._special_sig_key: sdk_rpc._special_secret_sig, "value": value}
    return value


def _mapping(value: abc.Mapping, deps: list[Resource], transformer: Any, typ: Any, keep_outputs: bool) -> dict:
    """The SDK's mapping branch; ``typ`` as the caller has it (unwrapped here, see :func:`_mapping_plan`).

    A scalar value (what :func:`_serialize` returns as it is, whatever its type) is taken without
    the call: most of a registration's values are."""
    kind, names, types, value_type = _mapping_plan(typ) if typ else _UNTYPED
    if kind is _UNION:
        case = _types.reduce_discriminated_union(types, value, _types._py_name_for)
        kind, names, types, value_type = _member_plan(case if case is not None else types)
    out = {}
    plain_keys = _PLAIN_KEYS
    if kind is _INPUT_TYPE:
        for k in value:
            v = value[k]
            key = names.get(k) or k  # as the SDK translates
            if key not in plain_keys and not _plain_key(key):
                _PLAIN_SO_FAR.plain = False
            out[key] = v if type(v) in _PLAIN_SCALARS else _serialize(v, deps, k, transformer, types.get(key), keep_outputs)
        return out
    translate = transformer if kind is not _TYPED_VALUES else None
    for k in value:
        v = value[k]
        key = translate(k) if translate is not None else k
        if key not in plain_keys and not _plain_key(key):
            _PLAIN_SO_FAR.plain = False
        out[key] = v if type(v) in _PLAIN_SCALARS else _serialize(v, deps, k, transformer, value_type, keep_outputs)
    return out


#: What a mapping's type says of its keys and values (:func:`_mapping_plan`).
_INPUT_TYPE, _TYPED_VALUES, _KEYS_TRANSFORMED, _UNION = "input type", "typed values", "keys transformed", "union"
_UNTYPED = (_KEYS_TRANSFORMED, None, None, None)


@_memo
def _mapping_plan(typ: Any) -> tuple[str, Any, Any, Any]:
    """For a mapping of type ``typ`` (as written, ``Optional[Input[...]]`` and all), what the SDK's
    mapping branch does, worked out once per type: ``(kind, names, types, value type)``.

    - an input type: keys translated by its Python -> Pulumi names, each value of its property's type;
    - a ``dict[str, T]``: keys as they are, values of type ``T``;
    - untyped (``Any``, a bare ``dict``): keys through the input transformer, values untyped;
    - any other type: keys as they are, values untyped;
    - a discriminated union (``types`` the union): the member is picked per value, then as above
      (:func:`_member_plan`).
    """
    typ = _types.unwrap_type(typ)
    if typ is Any:
        return _UNTYPED
    if _types.is_discriminated_union(typ):
        return (_UNION, None, typ, None)
    return _member_plan(typ)


@_memo
def _member_plan(typ: Any) -> tuple[str, Any, Any, Any]:
    """:func:`_mapping_plan` of an unwrapped type, without looking for a union."""
    if _types.is_input_type(typ):
        return (_INPUT_TYPE, _types.input_type_py_to_pulumi_names(typ), _types.input_type_types(typ), None)
    keeps_transformer, value_type = _mapping_value_type(typ)
    return (_KEYS_TRANSFORMED if keeps_transformer else _TYPED_VALUES, None, None, value_type)


async def serialize_properties(
    inputs: Any,
    property_deps: dict[str, list[Resource]],
    resource_obj: Resource | None = None,
    input_transformer: Any = None,
    typ: Any = None,
    keep_output_values: bool = False,
    exclude_resource_refs_from_deps: bool = False,
) -> struct_pb2.Struct:
    """``pulumi.runtime.rpc.serialize_properties``: each input through :func:`serialize_property`;
    the Struct stood in for until something needs it built (``struct_wire.SentStructs``)."""
    if settings.excessive_debug_output:  # the SDK logs every translation then
        return await _sdk_serialize_properties(inputs, property_deps, resource_obj, input_transformer, typ,
                                               keep_output_values, exclude_resource_refs_from_deps)
    get_type: Any = None
    translate = input_transformer
    if typ is not None:
        names, types = _input_names(typ), _input_types(typ)
        translate = lambda k: names.get(k) or k  # noqa: E731 - as the SDK translates
        get_type = lambda k: types.get(translate(k))  # noqa: E731
    fields: dict[str, Any] = {}
    plain = True  # the fields are their own plain form (see _PlainSoFar)
    for k in inputs:  # not items(): as the SDK, for a mapping that redefines items
        v = inputs[k]
        deps: list[Resource] = []
        try:
            result = await serialize_property(v, deps, k, resource_obj, input_transformer,
                                              get_type(k) if get_type else None, keep_output_values,
                                              exclude_resource_refs_from_deps)
            plain = plain and _PLAIN_SO_FAR.plain
        except ValueError as e:
            raise ValueError(f"While processing input: {repr(k)}, type {type(k)}, value {repr(v)}\n"
                             + f"ValueError has risen: {e}") from e
        except AssertionError as e:
            raise AssertionError(f"While processing input: {repr(k)}, type {type(k)}, value {repr(v)}\n"
                                 + f"AssertionError has risen: {e}") from e
        if result is not None:  # inputs that serialize to None are left out, as by the SDK
            name = translate(k) if translate is not None else k
            if name not in _PLAIN_KEYS and not _plain_key(name):
                plain = False
            fields[name] = result
            property_deps[name] = deps
    return SENT.stand_in(fields, plain=plain)


_sdk_serialize_properties = sdk_rpc.serialize_properties
