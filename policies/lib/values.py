"""Values in the shape the engine hands them to the pack, made plain.

Inputs arrive camelCase, numbers as doubles, secrets already unwrapped by ``pulumi_policy``, and
values that are not known during preview as sentinel strings that the SDK's proxy raises on. Every
policy first turns its inputs into plain Python data with :data:`UNKNOWN` in place of those values,
so a policy can say "can't judge" per field instead of losing the whole check to an exception.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from capacity.model import quantity as _model_quantity
from capacity.values import UNKNOWN as UNKNOWN
from capacity.values import as_dict as as_dict
from capacity.values import as_int as as_int
from capacity.values import as_list as as_list
from capacity.values import contains_unknown as contains_unknown
from capacity.values import dig as dig
from pulumi_policy.proxy import UnknownValueError

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


def plain(value: Any) -> Any:
    """Plain dicts/lists from pulumi_policy's unknown-checking proxies (``args.props``), with
    :data:`UNKNOWN` where the proxy raises ``UnknownValueError`` (a value not known during preview)."""
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
