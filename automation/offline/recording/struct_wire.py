"""A ``google.protobuf.Struct`` from a dict, written as wire bytes instead of field by field.

``Struct.update`` (protobuf's ``well_known_types``) sets every value of a nested dict through the
message API, one Python-to-C crossing per field; a registration's inputs and the mock answer are
built that way for every resource, and that was a fifth of the recording. Here the same message is
written as its wire encoding in one pass and parsed in C (``Struct.FromString``). The encoding is
protobuf's own for ``struct.proto`` (map entries in the dict's order, which a map does not keep
anyway), and the message parsed from it equals the one ``update`` builds, value kinds included
(``tests/automation/offline/recording/test_struct_wire.py``). A value ``update`` would refuse or convert in
its own way (a non-string key, an unexpected type, a string that is not valid UTF-8, an integer
beyond a double) raises :class:`Unencodable`, and callers build that message the usual way.
"""

from __future__ import annotations

import itertools
import math
import struct as _struct
from collections.abc import Mapping
from typing import Any, NamedTuple

from google.protobuf import struct_pb2

_DOUBLE = _struct.Struct("<d").pack
#: Value's fields, with their wire types: null_value 1 varint, number_value 2 fixed64,
#: string_value 3, struct_value 5 and list_value 6 length-delimited, bool_value 4 varint.
_NULL = b"\x08\x00"
_TRUE, _FALSE = b"\x20\x01", b"\x20\x00"
_NUMBER, _STRING, _STRUCT, _LIST = b"\x11", b"\x1a", b"\x2a", b"\x32"
#: Struct.fields entries and ListValue.values items are field 1; a map entry's key 1, value 2.
_FIELD_1, _FIELD_2 = b"\x0a", b"\x12"


class Unencodable(ValueError):
    """A value to leave to ``Struct.update``."""


_ONE_BYTE = [bytes((n,)) for n in range(0x80)]


def varint(n: int) -> bytes:
    """Protocol Buffers base-128 varint of ``n`` (not negative); one byte from a table below 128."""
    if n < 0x80:
        return _ONE_BYTE[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


#: A map entry's key field, by key: the same few hundred keys recur in every resource.
_KEY_FIELDS: dict[str, bytes] = {}
_KEY_FIELDS_MAX = 20_000


def _key_field(key: Any) -> bytes:
    field = _KEY_FIELDS.get(key) if type(key) is str else None
    if field is None:
        if not isinstance(key, str):
            raise Unencodable(f"key {key!r} is not a string")
        try:
            encoded = key.encode("utf-8")
        except UnicodeEncodeError as error:
            raise Unencodable(str(error)) from None
        field = _FIELD_1 + varint(len(encoded)) + encoded
        if len(_KEY_FIELDS) < _KEY_FIELDS_MAX:
            _KEY_FIELDS[key] = field
    return field


def _string(value: str) -> bytes:
    try:
        encoded = value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise Unencodable(str(error)) from None
    return _STRING + varint(len(encoded)) + encoded


def _number(value: Any) -> bytes:
    try:
        return _NUMBER + _DOUBLE(value)
    except (OverflowError, _struct.error) as error:
        raise Unencodable(str(error)) from None


def _list(value: Any) -> bytes:
    body = b"".join([_item(item) for item in value])
    return _LIST + varint(len(body)) + body


def _item(value: Any) -> bytes:
    """One ``values`` item of a ListValue, tag and length included (a scalar's remembered)."""
    kind = type(value)
    if kind in _SCALARS:
        cache_key = (value, kind)
        item = _SCALAR_ITEMS.get(cache_key)
        if item is None:
            encoded = _value(value)
            item = _FIELD_1 + varint(len(encoded)) + encoded
            if len(_SCALAR_ITEMS) < _SCALAR_ENTRIES_MAX:
                _SCALAR_ITEMS[cache_key] = item
        return item
    encoded = _value(value)
    return _FIELD_1 + varint(len(encoded)) + encoded


def _struct_value(value: dict) -> bytes:
    body = _fields(value)
    return _STRUCT + varint(len(body)) + body


def _value(value: Any) -> bytes:
    """A ``Value`` message for what ``_SetStructValue`` takes, in its order of checks."""
    encode = _BY_TYPE.get(type(value))
    if encode is not None:
        return encode(value)
    if value is None:
        return _NULL
    if isinstance(value, bool):
        return _TRUE if value else _FALSE
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, (int, float)):
        return _number(value)
    if isinstance(value, dict):
        return _struct_value(value)
    if isinstance(value, (list, tuple)):
        return _list(value)
    raise Unencodable(f"unexpected type {type(value).__name__}")


#: The exact built-in types, straight to their encoder (subclasses take the checks above).
_BY_TYPE = {
    str: _string,
    int: _number,
    float: _number,
    bool: lambda value: _TRUE if value else _FALSE,
    type(None): lambda _value: _NULL,
    dict: _struct_value,
    list: _list,
    tuple: _list,
}


#: Whole map entries of a string key and a scalar value, by (key, value, type): the same labels,
#: ports and flags recur in every resource (the type keeps ``True``, ``1`` and ``1.0`` apart).
_SCALAR_ENTRIES: dict[tuple[str, Any, type], bytes] = {}
_SCALAR_ITEMS: dict[tuple[Any, type], bytes] = {}
_SCALAR_ENTRIES_MAX = 50_000
_SCALARS = frozenset({str, int, float, bool, type(None)})


def _fields(mapping: Mapping[Any, Any]) -> bytes:
    parts = []
    for key, value in mapping.items():
        kind = type(value)
        if kind in _SCALARS and type(key) is str:
            cache_key = (key, value, kind)
            entry = _SCALAR_ENTRIES.get(cache_key)
            if entry is None:
                entry = _entry(key, value)
                if len(_SCALAR_ENTRIES) < _SCALAR_ENTRIES_MAX:
                    _SCALAR_ENTRIES[cache_key] = entry
            parts.append(entry)
        else:
            parts.append(_entry(key, value))
    return b"".join(parts)


def _entry(key: Any, value: Any) -> bytes:
    """One ``fields`` map entry, tag and length included."""
    encoded = _value(value)
    entry = _key_field(key) + _FIELD_2 + varint(len(encoded)) + encoded
    return _FIELD_1 + varint(len(entry)) + entry


def struct_bytes(mapping: Mapping[str, Any]) -> bytes:
    """The wire bytes of ``Struct`` updated with ``mapping``; raises :class:`Unencodable`."""
    return _fields(mapping)


def wire_bytes(mapping: Mapping[str, Any]) -> bytes:
    """The serialized ``Struct()`` updated with ``mapping``: written straight as wire bytes when it
    can, else through the message ``update`` builds."""
    try:
        return _fields(mapping)
    except Unencodable:
        return to_struct(mapping).SerializeToString()


def to_struct(mapping: Mapping[str, Any]) -> struct_pb2.Struct:
    """``Struct()`` updated with ``mapping``: from wire bytes when it can, else by ``update``."""
    try:
        return struct_pb2.Struct.FromString(_fields(mapping))
    except Unencodable:
        message = struct_pb2.Struct()
        message.update(mapping)
        return message


def merge_into(message: struct_pb2.Struct, mapping: Mapping[str, Any]) -> None:
    """``message.update(mapping)``: a key already in ``message`` gets the new value whole (a map
    entry parsed again replaces the old one, as ``update`` does)."""
    try:
        message.MergeFromString(_fields(mapping))
    except Unencodable:
        message.update(mapping)


# --- the plain form: what the recording keeps of a Struct ---------------------------------------

#: Wire markers of the Pulumi property protocol (sdk/go/common/resource/sig).
SPECIAL_SIG_KEY = "4dabf18193072939515e22adb298388d"
RESOURCE_REF_SIG = "5cf8f73096256a8f31e491e813e4eb8e"
SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"


class Plain(NamedTuple):
    value: dict[str, Any]
    #: It holds a resource reference.
    refs: bool
    #: The struct is, as it is, what the engine sends analyzers for these inputs: no resource
    #: reference or output value to downgrade and no engine-internal (``__``) key to drop.
    analyzer_form: bool


def plain_of(message: struct_pb2.Struct) -> Plain:
    """``json_format.MessageToDict(message)``, integral numbers as ints (Struct numbers are doubles
    on the wire), in one pass with what the recording monitor needs to know about it."""
    refs = special = False

    def value_of(value: Any) -> Any:
        kind = value.WhichOneof("kind")
        if kind == "string_value":
            return value.string_value
        if kind == "number_value":
            number = value.number_value
            if math.isinf(number) or math.isnan(number):
                raise ValueError(f"Fail to serialize {number} for Value.number_value")
            return int(number) if number.is_integer() else number
        if kind == "bool_value":
            return value.bool_value
        if kind == "struct_value":
            return struct_of(value.struct_value.fields)
        if kind == "list_value":
            return [value_of(item) for item in value.list_value.values]
        return None

    def struct_of(fields: Any) -> dict[str, Any]:
        nonlocal refs, special
        out = {}
        for key in fields:
            if key[:2] == "__":
                special = True
            out[key] = value_of(fields[key])
        sig = out.get(SPECIAL_SIG_KEY)
        if sig is not None and sig != SECRET_SIG:
            special = True
            refs = refs or sig == RESOURCE_REF_SIG
        return out

    top = struct_of(message.fields)
    return Plain(top, refs, not special)


#: Integers a double holds exactly.
_EXACT = 2**53


class _NotPlain(Exception):
    """A number the plain form refuses (infinite, not a number)."""


def _plain_in_place(tree: dict[str, Any]) -> Plain:
    """``tree`` (a Struct's source: fresh dicts and lists, scalar leaves) turned in place into what
    :func:`plain_of` gives for ``to_struct(tree)``: numbers as a double holds them, integral ones as
    ints, tuples as lists. Raises :class:`_NotPlain` where ``plain_of`` would raise."""
    refs = special = False

    def fix(value: Any) -> Any:
        kind = type(value)
        if kind is str or kind is bool or value is None:
            return value
        if kind is int and -_EXACT <= value <= _EXACT:
            return value
        if kind is dict:
            return walk(value)
        if kind is list:
            for index, item in enumerate(value):
                fixed = fix(item)
                if fixed is not item:
                    value[index] = fixed
            return value
        # What the encoder takes beyond the exact types, as the Struct holds it.
        if isinstance(value, bool):
            return bool(value)
        if isinstance(value, str):
            return str.__str__(value)  # a str enum's text, not its name
        if isinstance(value, (int, float)):
            number = float(value)
            if math.isinf(number) or math.isnan(number):
                raise _NotPlain
            return int(number) if number.is_integer() else number
        if isinstance(value, dict):
            return walk(dict(value))
        if isinstance(value, (list, tuple)):
            return fix(list(value))
        raise _NotPlain

    def walk(mapping: dict[str, Any]) -> dict[str, Any]:
        nonlocal refs, special
        for key, value in mapping.items():
            if key[:2] == "__":
                special = True
            fixed = fix(value)
            if fixed is not value:
                mapping[key] = fixed
        sig = mapping.get(SPECIAL_SIG_KEY)
        if sig is not None and sig != SECRET_SIG:
            special = True
            refs = refs or sig == RESOURCE_REF_SIG
        return mapping

    return Plain(walk(tree), refs, not special)


#: The one key of a stand-in Struct (see :class:`SentStructs`); engine-internal (``__``) by its form.
STAND_IN_KEY = "__llm_platform_offline_struct"


class SentStructs:
    """Structs of plain data that the recording's own code builds and reads, stood in for by a
    one-field Struct that names them, and built only if something else needs them.

    The SDK builds a registration's inputs as a Struct (``serialize_properties``), copies it into
    the request, and the recording monitor turned that copy back into plain values; the monitor's
    answer was a Struct again, which the SDK copied aside for the resource's outputs. At 500 models,
    writing, parsing, copying and looking up those Structs (4,703 each way) was a tenth of the
    recording. Now ``serialize_properties`` keeps the plain data here and hands the SDK a stand-in;
    the monitor takes the plain data back by the stand-in's name, and answers with a stand-in for
    the mock's state; the SDK's ``resolve_outputs`` (``sdk_shortcuts``), which runs when a
    resource's output is first read, gets the Structs built then (:meth:`real`). What reads a
    request's Struct anywhere else (the mock monitor's ``ReadResource``) gets it built first too
    (``RecordingMonitor``).

    A stand-in's Struct is the one ``to_struct`` makes of the data kept (the same values, numbers
    as doubles), so whoever builds it sees what the SDK would have sent.
    """

    def __init__(self) -> None:
        self._kept: dict[str, Plain] = {}
        self._names = itertools.count()  # never reused, not even after clear()

    def stand_in(self, tree: dict[str, Any], *, plain: bool = False) -> struct_pb2.Struct:
        """The Struct ``Struct.update(tree)`` makes, stood in for, with ``tree`` (fresh containers:
        this normalizes it in place) kept as :func:`plain_of` would give it; the Struct itself when
        ``tree`` holds what the plain form refuses: an infinite number (the monitor's walk raises for
        it, as it always did), a key that is not a string, an integer beyond a double. ``plain``: the
        caller made ``tree`` in that form already (strings, booleans, nulls, integers a double holds,
        in dicts and lists with no engine key), so it is kept without the walk."""
        if plain:
            return self._name(Plain(tree, False, True))
        try:
            plain = _plain_in_place(tree)
        except (_NotPlain, TypeError, OverflowError):
            return to_struct(tree)
        return self._name(plain)

    def answer(self, state: dict[str, Any], into: struct_pb2.Struct | None = None) -> struct_pb2.Struct:
        """A stand-in for ``Struct.update(state)`` (a mock's state, read only when an output is);
        ``into``: an empty Struct to make the stand-in (a response's own field)."""
        return self._name(Plain(state, False, False), into)

    def take(self, message: struct_pb2.Struct) -> Plain | None:
        """The plain data ``message`` stands in for; ``None`` if it is a Struct of its own."""
        fields = message.fields
        if len(fields) != 1 or STAND_IN_KEY not in fields:
            return None
        return self._kept.get(fields[STAND_IN_KEY].string_value)

    def real(self, message: struct_pb2.Struct) -> struct_pb2.Struct:
        """The Struct ``message`` stands in for, built now; ``message`` if it is one of its own."""
        plain = self.take(message)
        return message if plain is None else to_struct(plain.value)

    def clear(self) -> None:
        self._kept.clear()

    def _name(self, plain: Plain, into: struct_pb2.Struct | None = None) -> struct_pb2.Struct:
        name = str(next(self._names))
        self._kept[name] = plain
        message = struct_pb2.Struct() if into is None else into
        message.fields[STAND_IN_KEY].string_value = name
        return message


#: The recording's one registry of stand-ins (a recording runs on one thread).
SENT = SentStructs()
