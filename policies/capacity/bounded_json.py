"""JSON from outside (the engine's config, a server's answer, a file a user wrote) read with a nesting bound.

Python's ``json`` recurses once per level of nesting, and on CPython 3.11 a ``RecursionError`` raised
inside its C scanner can leave the interpreter's recursion bookkeeping off for the rest of the process
(a later ``ast.parse`` then fails with "AST constructor recursion depth mismatch"). So nothing deep may
reach the parser: :func:`loads` measures the nesting first, with one linear scan that never recurses,
and refuses a document deeper than :data:`MAX_DEPTH` with :class:`NestingError`, a ``ValueError`` like
the parser's own, so every caller that already answers "not JSON" with one line answers this too.

The bound is the one the settings' YAML reader applies (``automation/stacks.py``): no setting, pack
config, registry or AWS answer the project reads nests deeper than about 10 levels.
"""

from __future__ import annotations

import json
import re
from typing import Any

#: Nesting accepted: no input the project reads nests deeper than about 10 levels; 64 leaves room.
MAX_DEPTH = 64

#: A JSON string (skipped whole, so brackets inside it do not count) or one bracket.
_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


class NestingError(ValueError):
    """A JSON document nested deeper than the bound; a ``ValueError`` like ``json.JSONDecodeError``."""


def nesting_depth(text: str) -> int:
    """The deepest nesting of arrays and objects in ``text``, counted without recursion.

    Brackets inside strings do not count. Text that is not JSON still gets a number (the parser
    then refuses it); only the bound matters here."""
    depth = deepest = 0
    for match in _TOKENS.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif token in "]}":
            depth -= 1
    return deepest


def loads(text: str | bytes | bytearray, max_depth: int = MAX_DEPTH) -> Any:
    """``json.loads`` for input from outside: :class:`NestingError` (a ``ValueError``) when ``text``
    nests deeper than ``max_depth``; ``json.JSONDecodeError`` or ``UnicodeDecodeError`` (both
    ``ValueError``) as ``json.loads`` raises them otherwise."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8")
    if text.count("[") + text.count("{") > max_depth and nesting_depth(text) > max_depth:
        raise NestingError(f"nested deeper than {max_depth} levels")
    return json.loads(text)
