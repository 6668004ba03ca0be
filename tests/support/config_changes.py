"""A stack's configuration with some values replaced: the one helper the settings, capacity and
bad-input tests use to make variants (``gpuPools__0__scaling__minSize=0``)."""

from __future__ import annotations

import copy
from typing import Any

#: As a value: remove the key instead of setting it.
DELETE = object()


def with_changes(base: dict[str, Any], changes: dict[str, Any], *, separator: str = "__") -> dict[str, Any]:
    """A copy of ``base`` with each path under ``llm-platform:`` set to its value (list items by index)."""
    config = copy.deepcopy(base)
    for path, value in changes.items():
        key, *rest = path.split(separator)
        if not rest:
            config[f"llm-platform:{key}"] = value
            continue
        node = config[f"llm-platform:{key}"]
        for part in rest[:-1]:
            node = node[int(part)] if part.isdigit() else node[part]
        last = int(rest[-1]) if rest[-1].isdigit() else rest[-1]
        if value is DELETE:
            del node[last]
        else:
            node[last] = value
    return config
