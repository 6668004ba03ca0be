"""The pack's word to its driver on which resource types its ``Analyze`` can report on.

After ``Configure``, the pack (``lib.analyzer_loop``) answers with trailing gRPC metadata under
:data:`KEY`: the resource types that some enabled resource policy acts on under that config. The
Pulumi engine ignores the metadata and sends every resource, as always. The offline check's feeder
sends ``Analyze`` only for resources of those types: for any other type the answer is empty by
construction (every resource policy returns at once for a type it does not take, and the pack's
own loop passes it over). Every resource still goes to ``AnalyzeStack``.

No metadata (another pack, pulumi_policy's own loops, a resource policy that does not say which
types it takes, a list too long for metadata): the driver sends every resource.

Both sides import this module (the pack as ``lib.analyzed_types``, the check as
``policies.lib.analyzed_types``); it imports nothing of either.
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
