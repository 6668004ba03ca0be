"""Values in the shape the engine hands them to the pack, made plain.

Inputs arrive camelCase, numbers as doubles, secrets already unwrapped by ``pulumi_policy``, and
values that are not known during preview as sentinel strings that the SDK's proxy raises on. Every
policy first turns its inputs into plain Python data with :data:`UNKNOWN` in place of those values,
so a policy can say "can't judge" per field instead of losing the whole check to an exception.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pulumi_policy.deserialize import SPECIAL_SIG_KEY as _SIG_KEY, _deserialize_property
from pulumi_policy.proxy import UnknownValueError

from lib.request_cache import LazyProps, message_to_dict

from capacity.model import quantity as _model_quantity

#: Sentinels of the engine's unknown values (sdk/go/common/resource/plugin/rpc.go).
UNKNOWN_SENTINELS = frozenset(
    {
        "1c4a061d-8072-4f0a-a4cb-0ff528b18fe7",
        "3eeb2bf0-c639-47a8-9e75-3b44932eb421",
        "04da6b54-80e4-46f7-96ec-b56ff0331ba9",
        "6a19a0b0-7e62-4c92-b797-7f8e31da9cc2",
        "030794c1-ac77-496b-92df-f27374a8bd58",
        "e48ece36-62e2-4504-bad9-02848725956a",
        "dd056dcd-154b-4c76-9bd3-c8f88648b5ff",
    }
)


class _Unknown:
    """A value the engine does not know yet; policies treat it as "can't judge"."""

    _instance: _Unknown | None = None

    def __new__(cls) -> _Unknown:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "<unknown>"

    def __bool__(self) -> bool:
        return False


UNKNOWN: Any = _Unknown()


def plain(value: Any) -> Any:
    """Plain dicts/lists from the SDK's proxies, with :data:`UNKNOWN` for unknown values."""
    if type(value) is LazyProps:
        source = value.source()
        if source is not None:
            try:
                return _plain_struct(source.fields)
            except Exception:  # noqa: BLE001 - the steps below raise it, as the analyzer's conversion does
                pass
        return _plain_raw(value.raw())
    if isinstance(value, str):
        return UNKNOWN if value in UNKNOWN_SENTINELS else value
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key in value:
            try:
                out[key] = plain(value[key])
            except UnknownValueError:
                out[key] = UNKNOWN
        return out
    if isinstance(value, Sequence):
        items: list[Any] = []
        for index in range(len(value)):
            try:
                items.append(plain(value[index]))
            except UnknownValueError:
                items.append(UNKNOWN)
        return items
    return value


def _plain_raw(value: Any) -> Any:
    """``plain`` of the proxy over ``value``, read from ``value`` itself: the proxy raises exactly
    where ``value`` holds an unknown sentinel, and ``plain`` makes both :data:`UNKNOWN`."""
    kind = type(value)
    if kind is str:
        return UNKNOWN if value in UNKNOWN_SENTINELS else value
    if kind is dict:
        return {key: _plain_raw(item) for key, item in value.items()}
    if kind is list:
        return [_plain_raw(item) for item in value]
    return plain(value)


def _plain_struct(fields: Any) -> dict[str, Any]:
    """``_plain_raw(deserialize_properties(MessageToDict(struct)))`` for a Struct's ``fields``, in
    one walk instead of three (at 500 models the three were most of the pack's own work per
    Analyze, and the pack is the check's slowest process). A map that carries the signature key
    (a secret, an asset, an archive) below the top goes through the three steps, which give it its
    meaning or raise; so does a number that is not finite (``MessageToDict`` raises for it).
    ``tests/policies/test_values.py`` compares both on whole plans and on generated values."""
    return {key: _plain_wire(fields[key]) for key in fields}


def _plain_wire(value: Any) -> Any:
    kind = value.WhichOneof("kind")
    if kind == "string_value":
        text = value.string_value
        return UNKNOWN if text in UNKNOWN_SENTINELS else text
    if kind == "struct_value":
        fields = value.struct_value.fields
        if _SIG_KEY in fields:
            return _plain_raw(_deserialize_property(message_to_dict(value.struct_value)))
        return {key: _plain_wire(fields[key]) for key in fields}
    if kind == "list_value":
        return [_plain_wire(item) for item in value.list_value.values]
    if kind == "number_value":
        number = value.number_value
        if math.isinf(number) or math.isnan(number):
            raise ValueError("not a finite number")  # plain() takes the three steps, which raise their own error
        return number
    if kind == "bool_value":
        return value.bool_value
    return None  # null_value, or no kind at all


def dig(value: Any, *path: str | int, default: Any = None) -> Any:
    """``value[path[0]][path[1]]...``; :data:`UNKNOWN` if any hop is unknown, ``default`` if absent."""
    for step in path:
        if value is UNKNOWN:
            return UNKNOWN
        if isinstance(step, int):
            if not isinstance(value, list) or not -len(value) <= step < len(value):
                return default
            value = value[step]
        else:
            if not isinstance(value, dict) or step not in value:
                return default
            value = value[step]
        if value is None:
            return default
    return value


def as_list(value: Any) -> list[Any]:
    """A list input, ``[]`` when absent; unknown stays :data:`UNKNOWN`."""
    if value is UNKNOWN:
        return UNKNOWN
    return value if isinstance(value, list) else []


def as_dict(value: Any) -> dict[str, Any]:
    if value is UNKNOWN:
        return UNKNOWN
    return value if isinstance(value, dict) else {}


def contains_unknown(value: Any) -> bool:
    """Whether :data:`UNKNOWN` is ``value`` or anywhere inside it (dicts and lists)."""
    if value is UNKNOWN:
        return True
    if isinstance(value, dict):
        items = value.values()
    elif isinstance(value, list):
        items = value
    else:
        return False
    for item in items:  # a loop, not any() over a generator: the capacity check walks every workload
        if item is UNKNOWN:
            return True
        kind = type(item)
        if kind is str or kind is float or kind is int or kind is bool or item is None:
            continue
        if contains_unknown(item):
            return True
    return False


_SENTINEL_BYTES = tuple(sentinel.encode() for sentinel in UNKNOWN_SENTINELS)


def free_of_unknowns(props: Any) -> bool:
    """True if the properties ``props`` (as the SDK hands them) hold no unknown value anywhere,
    read from their wire form without a walk: an unknown is one of the sentinel strings, and a
    string is in the wire form as its UTF-8 bytes. False when that cannot tell (a sentinel's bytes
    inside a longer string, or properties not from a request): then walk (:func:`contains_unknown`)."""
    content = props.content() if type(props) is LazyProps else None
    return content is not None and not any(sentinel in content for sentinel in _SENTINEL_BYTES)


def as_int(value: Any) -> int | None:
    """Integers from engine numbers (doubles) or numeric strings; ``None`` if not an integer."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return int(value) if float(value).is_integer() else None
    if isinstance(value, str) and re.fullmatch(r"[+-]?\d+", value.strip()):
        return int(value)
    return None


def is_true(value: Any) -> bool:
    """Booleans that some providers type as strings (aws LaunchTemplate ``ebs.encrypted``)."""
    return value is True or (isinstance(value, str) and value.strip().lower() == "true")


def quantity(value: Any) -> float | None:
    """A Kubernetes quantity as a number, or ``None`` when unknown at preview or not a quantity; the
    one parser is the capacity model's (``500m`` -> 0.5, ``2Gi`` -> 2147483648)."""
    return None if value is UNKNOWN else _model_quantity(value)


def fmt(value: Any) -> str:
    """Numbers as a user wrote them: engine doubles like ``2.0`` print as ``2``."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
