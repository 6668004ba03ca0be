"""Property values as the engine sends them: unknowns during preview, numbers as doubles.

The engine sends a value it cannot compute during preview as a sentinel; the pack turns each into
:data:`UNKNOWN` (``lib.values.plain``) so a reader can say "not known yet" per field instead of
guessing. Plain data from the program's own description of a stack never holds one. Lives here, not
in the pack's ``lib``, because the one reader of node pools (``node_pools``) is shared with the program.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any


class _Unknown:
    """A value the engine does not know yet; readers treat it as "can't judge"."""

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


def contains_unknown(value: Any) -> bool:
    """Whether :data:`UNKNOWN` is ``value`` or anywhere inside it (dicts and lists)."""
    if value is UNKNOWN:
        return True
    items: Iterable[Any]
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


def as_list(value: Any) -> list[Any]:
    """A list input, ``[]`` when absent; unknown stays :data:`UNKNOWN`."""
    if value is UNKNOWN:
        return UNKNOWN
    return value if isinstance(value, list) else []


def as_dict(value: Any) -> dict[str, Any]:
    if value is UNKNOWN:
        return UNKNOWN
    return value if isinstance(value, dict) else {}


def as_int(value: Any) -> int | None:
    """Integers from engine numbers (doubles) or numeric strings; ``None`` if not an integer."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return int(value) if float(value).is_integer() else None
    if isinstance(value, str) and re.fullmatch(r"[+-]?\d+", value.strip()):
        return int(value)
    return None
