"""JSON and YAML text of the check's files, from the C emitters where their output is identical.

The files are byte-for-byte what ``json.dumps(value, indent=2)`` and ``yaml.safe_dump(document,
sort_keys=False)`` write; the C emitters (orjson, libyaml through ``yaml.CSafeDumper``) only do it
faster. Each C emitter differs from the pure-Python one in a few known places, and a value that
could reach one of them is written by the pure-Python emitter instead:

- orjson writes non-ASCII and DEL unescaped, small floats without an exponent (``0.00001`` where
  Python writes ``1e-05``), NaN and infinities as ``null``, and refuses integers beyond 64 bits and
  non-string keys: its text is used only when it matches json's own C encoder, scalar for scalar;
- libyaml folds long double-quoted scalars at other points than PyYAML (and without PyYAML's
  escaped line-end), and those are the scalars with line breaks or characters that need escapes;
  it also leaves out the document-end marker PyYAML writes after a bare scalar.

``tests/automation/offline/test_emit.py`` compares both paths on the dev and prod plans and on such values.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

try:  # orjson is pinned in requirements.txt; the pure-Python encoder is the fallback.
    import orjson
except ImportError:  # pragma: no cover - exercised only without the pinned dependencies
    orjson = None

_ORJSON_PASSTHROUGH = (orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME) if orjson else 0
_YAML_CSAFE = getattr(yaml, "CSafeDumper", None)


def _refuse(value: Any) -> Any:
    raise TypeError(type(value).__name__)


def dumps_json(value: Any) -> str:
    """``json.dumps(value, indent=2)``.

    Scalars are the only place the two encoders can differ, and indentation does not change how a
    scalar is written, so orjson's indented text is used when its compact text equals that of
    json's C encoder (which json uses only without ``indent``).
    """
    if orjson is not None:
        try:
            compact = orjson.dumps(value, default=_refuse, option=_ORJSON_PASSTHROUGH)
        except TypeError:
            compact = None
        if compact is not None and compact == json.dumps(value, separators=(",", ":")).encode():
            return orjson.dumps(value, option=_ORJSON_PASSTHROUGH | orjson.OPT_INDENT_2).decode()
    return json.dumps(value, indent=2)


def dumps_yaml(document: Any) -> str:
    """``yaml.safe_dump(document, sort_keys=False)``."""
    # A bare scalar gets PyYAML's document-end marker, which libyaml leaves out.
    if _YAML_CSAFE is None or not isinstance(document, (dict, list)) or _needs_python_emitter(document):
        return yaml.safe_dump(document, sort_keys=False)
    return yaml.dump(document, Dumper=_YAML_CSAFE, sort_keys=False)


def _needs_python_emitter(value: Any) -> bool:
    """A string that PyYAML would double-quote (line breaks, escapes, non-ASCII) anywhere in ``value``."""
    if isinstance(value, str):
        return not (value.isascii() and value.isprintable())
    if isinstance(value, dict):
        return any(_needs_python_emitter(k) or _needs_python_emitter(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(_needs_python_emitter(v) for v in value)
    return False
