"""Decoding of a side protocol the pack no longer speaks: nothing in ``policies/`` imports this.

The pack once named, in trailing gRPC metadata of ``Configure``, the resource types its ``Analyze``
could report on. It now runs on pulumi_policy's own loops and sends no metadata, so
:func:`decode` always answers ``None`` (send every resource). The module stays only while
``automation/offline/pack/runner.py`` imports it; delete both together.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

#: The trailing-metadata key of ``Configure``'s answer (gRPC keys are lower case).
KEY = "llm-platform-analyzed-types"
#: Longer lists are not sent: gRPC's default limit for all of a call's metadata is 8 KiB.
MAX_LENGTH = 4096


def encode(types: Iterable[str]) -> str | None:
    """The metadata value for ``types`` (a JSON list, sorted, ASCII); ``None`` if too long to send."""
    text = json.dumps(sorted(types), separators=(",", ":"))
    return text if len(text) <= MAX_LENGTH else None


def decode(metadata: Sequence[Any] | None) -> frozenset[str] | None:
    """The types named in a call's trailing metadata (``(key, value)`` pairs); ``None`` when the
    pack did not name them, or named them in a form this module does not write."""
    for key, value in metadata or ():
        if key != KEY:
            continue
        try:
            types = json.loads(value)
        except (TypeError, ValueError):
            return None
        if isinstance(types, list) and all(isinstance(t, str) for t in types):
            return frozenset(types)
        return None
    return None
