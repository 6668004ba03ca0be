"""A ``google.protobuf.Struct`` from a dict, written as wire bytes instead of field by field.

``Struct.update`` (protobuf's ``well_known_types``) sets every value of a nested dict through the
message API, one Python-to-C crossing per field; a registration's inputs and the mock answer are
built that way for every resource, and that was a fifth of the recording. Here the same message is
written as its wire encoding in one pass and parsed in C (``Struct.FromString``). The encoding is
protobuf's own for ``struct.proto`` (map entries in the dict's order, which a map does not keep
anyway), and the message parsed from it equals the one ``update`` builds, value kinds included
(``tests/automation/offline/test_struct_wire.py``). A value ``update`` would refuse or convert in
its own way (a non-string key, an unexpected type, a string that is not valid UTF-8, an integer
beyond a double) raises :class:`Unencodable`, and callers build that message the usual way.
"""

from __future__ import annotations

import struct as _struct
from collections.abc import Mapping
from typing import Any

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


def _varint(n: int) -> bytes:
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
        field = _FIELD_1 + _varint(len(encoded)) + encoded
        if len(_KEY_FIELDS) < _KEY_FIELDS_MAX:
            _KEY_FIELDS[key] = field
    return field


def _string(value: str) -> bytes:
    try:
        encoded = value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise Unencodable(str(error)) from None
    return _STRING + _varint(len(encoded)) + encoded


def _number(value: Any) -> bytes:
    try:
        return _NUMBER + _DOUBLE(value)
    except (OverflowError, _struct.error) as error:
        raise Unencodable(str(error)) from None


def _list(value: Any) -> bytes:
    items = [_value(item) for item in value]
    body = b"".join([_FIELD_1 + _varint(len(item)) + item for item in items])
    return _LIST + _varint(len(body)) + body


def _struct_value(value: dict) -> bytes:
    body = _fields(value)
    return _STRUCT + _varint(len(body)) + body


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


def _fields(mapping: Mapping[Any, Any]) -> bytes:
    parts = []
    for key, value in mapping.items():
        key_field = _key_field(key)
        encoded = _value(value)
        entry = key_field + _FIELD_2 + _varint(len(encoded)) + encoded
        parts.append(_FIELD_1 + _varint(len(entry)) + entry)
    return b"".join(parts)


def struct_bytes(mapping: Mapping[str, Any]) -> bytes:
    """The wire bytes of ``Struct`` updated with ``mapping``; raises :class:`Unencodable`."""
    return _fields(mapping)


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
