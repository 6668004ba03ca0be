"""JSON and YAML text of the check's files, from the C emitters where their output is identical.

The files are byte-for-byte what ``json.dumps(value, indent=2)`` and PyYAML's pure-Python safe
emitter write (``yaml.safe_dump(document, sort_keys=False)``, except that text with line breaks,
a script or an embedded config file, is a literal block as people write it in manifests); the C
emitters (orjson, libyaml through ``yaml.CSafeDumper``) only do it faster. Each C emitter differs
from the pure-Python one in a few known places, and a value that could reach one of them is
written by the pure-Python emitter instead:

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
from pathlib import Path
from typing import Any

import yaml

try:  # orjson is pinned in requirements.txt; the pure-Python encoder is the fallback.
    import orjson
except ImportError:  # pragma: no cover - exercised only without the pinned dependencies
    orjson = None

_ORJSON_PASSTHROUGH = (orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME) if orjson else 0


def _represent_str(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    """Multi-line text as a literal block (``|``); the emitter still quotes it where a block cannot
    hold it (trailing spaces, control characters)."""
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style="|" if "\n" in text else None)


class ManifestDumper(yaml.SafeDumper):
    """PyYAML's safe dumper with multi-line text as literal blocks."""


ManifestDumper.add_representer(str, _represent_str)

_STR, _INT, _BOOL, _NULL = (f"tag:yaml.org,2002:{kind}" for kind in ("str", "int", "bool", "null"))
_MAP, _SEQ = "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"


class _Unplain(Exception):
    """The document holds something the fast representation leaves to PyYAML's own path."""


class _NeedsPythonEmitter(Exception):
    """A string in the document is one libyaml writes differently (see ``_needs_python_emitter``)."""


class _FastRepresentation:
    """PyYAML's safe representation of plain data, node for node, with less in between.

    ``represent_data`` goes through the type's MRO, a representer lookup and, for every scalar,
    ``ignore_aliases``; here the exact built-in types a manifest holds go straight to the node
    their representer makes (mappings and lists still registered by identity, so an object met
    twice becomes an anchor and alias as before), each string checked on the way for what
    ``_needs_python_emitter`` looks for. Any other type raises :class:`_Unplain` and the document
    takes the usual path. The emitter asks the resolver twice per scalar which tag a plain scalar
    would read as; the answer depends only on the scalar (there are no path resolvers here), so it
    is remembered.
    """

    def represent_data(self, data: Any) -> Any:
        kind = type(data)
        if kind is str:
            if _string_needs_python(data, key=False):
                raise _NeedsPythonEmitter
            return yaml.ScalarNode(_STR, data, style="|" if "\n" in data else None)
        if kind is dict or kind is list:
            node = self.represented_objects.get(id(data))
            if node is not None:
                return node
            self.object_keeper.append(data)
            represent = self.represent_data
            if kind is dict:
                pairs: list[Any] = []
                node = self.represented_objects[id(data)] = yaml.MappingNode(_MAP, pairs, flow_style=False)
                for key, value in data.items():
                    if type(key) is str and _string_needs_python(key, key=True):
                        raise _NeedsPythonEmitter
                    pairs.append((represent(key), represent(value)))
            else:
                items: list[Any] = []
                node = self.represented_objects[id(data)] = yaml.SequenceNode(_SEQ, items, flow_style=False)
                items.extend(represent(item) for item in data)
            return node
        if kind is bool:
            return yaml.ScalarNode(_BOOL, "true" if data else "false")
        if kind is int:
            return yaml.ScalarNode(_INT, str(data))
        if data is None:
            return yaml.ScalarNode(_NULL, "null")
        if kind is float:  # its own spelling rules (.inf, .nan, exponents): PyYAML's representer
            return yaml.representer.SafeRepresenter.represent_float(self, data)
        raise _Unplain

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        if kind is not yaml.ScalarNode or self.yaml_path_resolvers:
            return super().resolve(kind, value, implicit)
        key = (value, tuple(implicit))
        tag = _RESOLVED.get(key)
        if tag is None:
            tag = super().resolve(kind, value, implicit)
            if len(_RESOLVED) < 100_000:
                _RESOLVED[key] = tag
        return tag


_RESOLVED: dict[Any, str] = {}

if hasattr(yaml, "CSafeDumper"):

    class _CManifestDumper(yaml.CSafeDumper):
        """The same representation, emitted by libyaml."""

    _CManifestDumper.add_representer(str, _represent_str)

    class _FastCManifestDumper(_FastRepresentation, _CManifestDumper):
        """The same again, for documents of plain data only (``default_flow_style=False``, as
        ``yaml.dump`` has it)."""

    _YAML_CSAFE: type | None = _CManifestDumper
else:  # pragma: no cover - exercised only where PyYAML was built without libyaml
    _YAML_CSAFE = None
    _FastCManifestDumper = None


def _refuse(value: Any) -> Any:
    raise TypeError(type(value).__name__)


def dumps_json(value: Any) -> str:
    """``json.dumps(value, indent=2)``."""
    return _json_bytes(value).decode()


def write_json(path: Path, value: Any) -> None:
    """``path`` holds ``json.dumps(value, indent=2)`` and a line end.

    A top-level object is written member by member and a list member item by item (the plan's
    resources), each indented to its depth, so a large plan never exists as one text beside
    itself (at 500 models the whole text and its checks were 30 MiB of the check's peak).
    """
    with path.open("wb") as file:
        if not (isinstance(value, dict) and value and all(isinstance(key, str) for key in value)):
            file.write(_json_bytes(value))
            file.write(b"\n")
            return
        file.write(b"{")
        for index, (key, member) in enumerate(value.items()):
            file.write(b",\n  " if index else b"\n  ")
            file.write(_json_bytes(key))
            file.write(b": ")
            if isinstance(member, list) and member:
                file.write(b"[")
                for position, item in enumerate(member):
                    file.write(b",\n    " if position else b"\n    ")
                    file.write(_indented(_json_bytes(item), 4))
                file.write(b"\n  ]")
            else:
                file.write(_indented(_json_bytes(member), 2))
        file.write(b"\n}\n")


def _indented(text: bytes, spaces: int) -> bytes:
    """``text``'s lines after the first shifted right (JSON text has no raw line break in strings)."""
    return text.replace(b"\n", b"\n" + b" " * spaces)


def _json_bytes(value: Any) -> bytes:
    """UTF-8 of ``json.dumps(value, indent=2)``.

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
            del compact
            return orjson.dumps(value, option=_ORJSON_PASSTHROUGH | orjson.OPT_INDENT_2)
    return json.dumps(value, indent=2).encode()


def dumps_yaml(document: Any) -> str:
    """``yaml.dump(document, Dumper=ManifestDumper, sort_keys=False)``."""
    if _FastCManifestDumper is not None and type(document) in (dict, list):
        try:
            return yaml.dump(document, Dumper=_FastCManifestDumper, sort_keys=False)
        except _NeedsPythonEmitter:
            return yaml.dump(document, Dumper=ManifestDumper, sort_keys=False)
        except _Unplain:
            pass
    # A bare scalar gets PyYAML's document-end marker, which libyaml leaves out.
    if _YAML_CSAFE is None or not isinstance(document, (dict, list)) or _needs_python_emitter(document):
        return yaml.dump(document, Dumper=ManifestDumper, sort_keys=False)
    return yaml.dump(document, Dumper=_YAML_CSAFE, sort_keys=False)


def _string_needs_python(value: str, *, key: bool) -> bool:
    if "\n" in value and not key:
        return not (value.isascii() and value.replace("\n", "").isprintable()) or " \n" in value or value.endswith(" ")
    return not (value.isascii() and value.isprintable())


def _needs_python_emitter(value: Any, *, key: bool = False) -> bool:
    """A string anywhere in ``value`` that PyYAML would double-quote (escapes, non-ASCII, and text
    with line breaks that cannot be a literal block: a key, a space before a break or at the end)."""
    if isinstance(value, str):
        return _string_needs_python(value, key=key)
    if isinstance(value, dict):
        return any(_needs_python_emitter(k, key=True) or _needs_python_emitter(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(_needs_python_emitter(v) for v in value)
    return False
