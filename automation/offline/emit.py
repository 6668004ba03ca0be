"""JSON and YAML text of the check's files, written faster than the reference emitters, identically.

The files are byte-for-byte what ``json.dumps(value, indent=2)`` and PyYAML's pure-Python safe
emitter write (``yaml.safe_dump(document, sort_keys=False)``, except that text with line breaks,
a script or an embedded config file, is a literal block as people write it in manifests). Faster:
JSON by orjson (C); YAML by :class:`_BlockWriter`, which lays out plain documents itself and has
PyYAML's emitter choose and write every scalar (at 500 models twice as fast as libyaml driven
through PyYAML's Python representer and resolver), and the documents it leaves by libyaml
(``yaml.CSafeDumper``). Each C emitter differs from the pure-Python one in a few known places,
and a value that could reach one of them is written by the pure-Python emitter instead:

- orjson writes non-ASCII and DEL unescaped, small floats without an exponent (``0.00001`` where
  Python writes ``1e-05``), NaN and infinities as ``null``, and refuses integers beyond 64 bits and
  non-string keys: its text is used only when it matches json's own C encoder, scalar for scalar;
- libyaml folds long double-quoted scalars at other points than PyYAML (and without PyYAML's
  escaped line-end), and those are the scalars with line breaks or characters that need escapes;
  it also leaves out the document-end marker PyYAML writes after a bare scalar, and writes
  complex keys (``? ``: empty, or 128 characters and more) otherwise.

``tests/automation/offline/test_emit.py`` compares every path with the reference on the dev and prod
plans, on such values and on random documents.
"""

from __future__ import annotations

import json
import re
import threading
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


#: One line of printable ASCII, the text a manifest mostly holds (names, labels, images, queries).
_ONE_LINE = re.compile(r"[\x20-\x7e]+")
#: Characters that, first, make PyYAML's ``analyze_scalar`` refuse a plain scalar.
_LEADING_INDICATORS = frozenset("#,[]{}&*!|>'\"%@`")


#: Text over several lines of printable ASCII, not ending in a space: PyYAML's ``analyze_scalar``
#: allows it a block (what it refuses one: a character to escape, a space before a break or at the end).
_LITERAL_TEXT = re.compile(r"[\x20-\x7e]*\n[\x20-\x7e\n]*(?<! )")


def _literal_block(value: str, indent: int) -> str:
    """PyYAML's ``write_literal`` of ``value`` (``_LITERAL_TEXT``, first line not starting with a
    space or a break) after ``:`` or ``-``, at ``indent``: the indicator with its chomping hint,
    then each line at the indent and each empty line bare. PyYAML writes it a character at a time
    (at 500 models the gateway's 200 KiB config took a fifth of the manifest writer's work)."""
    if value[-1] != "\n":
        hint, lines = "-", value.split("\n")
    else:
        hint, lines = "+" if len(value) == 1 or value[-2] == "\n" else "", value[:-1].split("\n")
    pad = " " * indent
    return f" |{hint}\n" + "".join(f"{pad}{line}\n" if line else "\n" for line in lines)


_WORDS_AND_SPACES = re.compile(r"[^ ]+| +")


def _folded_plain(value: str, column: int, indent: int) -> str:
    """PyYAML's ``write_plain`` of one line of printable ASCII, written plain, after the indicator
    that ends at ``column``: a single space past column 80 becomes a line break and the indent
    (a run of spaces stays). PyYAML writes it a character at a time (a long command line in each of
    500 Deployments)."""
    out = [" "]
    column += 1
    for token in _WORDS_AND_SPACES.findall(value):
        if token == " " and column > 80:
            out.append("\n" + " " * indent)
            column = indent
        else:
            out.append(token)
            column += len(token)
    return "".join(out)


def _block_plain_allowed(value: str) -> bool:
    """``analyze_scalar(value).allow_block_plain`` for one line of printable ASCII (``_ONE_LINE``),
    by its rules: no space first or last, no document marker or indicator first, no ``: `` or
    ``:`` at the end, no `` #``."""
    first = value[0]
    if first == " " or value[-1] == " " or first in _LEADING_INDICATORS or value.startswith(("---", "...")):
        return False
    if first in "?:-" and (len(value) == 1 or value[1] == " "):
        return False
    return not (": " in value or (len(value) > 1 and value[-1] == ":") or " #" in value)


class _BlockWriter:
    """PyYAML's block-style text of plain data, written directly: what
    ``yaml.dump(document, Dumper=ManifestDumper, sort_keys=False)`` writes, without its events.

    PyYAML and libyaml turn a document into nodes, the nodes into events and the events into text,
    asking the resolver twice per scalar on the way; at 500 models that was 0.45 ms per manifest,
    most of the check's file writing. The layout of plain block data is small (a mapping's keys at
    its indent, an indentless sequence under a key, ``- `` with the first key or item inline,
    ``{}`` and ``[]`` for empty collections), and is written here. Every scalar is PyYAML's own
    work: its style is chosen by PyYAML's emitter (``analyze_scalar`` and ``choose_scalar_style``'s
    rules, with the resolver's answer), remembered per string; a scalar PyYAML writes as it is
    (plain or single-quoted, on one line, ending by column 80 so it cannot be folded) is written
    here, and any other (folded, double-quoted, a literal block) is written by PyYAML's emitter
    itself, placed at the same column and indent (and a document whose last scalar is a literal
    block keeping its trailing breaks ends with ``...``, as PyYAML ends it). Anything else (an
    object met twice, which PyYAML writes as an anchor and alias; a key that is not a string or is
    too long to be a simple key; a float) raises :class:`_Unplain` and the document takes the
    libyaml path below.
    """

    def __init__(self) -> None:
        self._emitter = yaml.emitter.Emitter(None)
        self._resolver = yaml.resolver.Resolver()
        self._styles: dict[tuple[str, bool], tuple[str, str]] = {}
        #: What PyYAML's emitter wrote for a scalar at a place: the same every time (a model
        #: server's init script, at one indent in each of 500 Deployments).
        self._written: dict[tuple[Any, ...], str] = {}
        self._out: list[str] = []
        self._seen: set[int] = set()
        self._open_ended = False

    def dumps(self, document: Any) -> str:
        out = self._out = []
        self._seen = set()
        self._open_ended = False
        if type(document) is dict and document:
            self._mapping(document, 0, False)
        elif type(document) is list and document:
            self._sequence(document, 0, False)
        else:
            raise _Unplain
        if self._open_ended:  # the last scalar was a literal block that keeps its trailing breaks
            out.append("...\n")
        return "".join(out)

    def _enter(self, collection: Any) -> None:
        if id(collection) in self._seen:
            raise _Unplain  # PyYAML writes an anchor and an alias
        self._seen.add(id(collection))

    def _mapping(self, mapping: dict, indent: int, inline: bool) -> None:
        self._enter(mapping)
        out = self._out
        pad = " " * indent
        for key, value in mapping.items():
            if type(key) is not str or len(key) >= 128:
                raise _Unplain
            style, text = self._style(key, True)
            if style not in ("", "'"):
                raise _Unplain
            if inline:
                inline = False
            else:
                out.append(pad)
            out.append(text)
            out.append(":")
            self._node(value, indent + len(text) + 1, indent, False)

    def _sequence(self, sequence: list, indent: int, inline: bool) -> None:
        self._enter(sequence)
        out = self._out
        pad = " " * indent
        for item in sequence:
            if inline:
                inline = False
            else:
                out.append(pad)
            out.append("-")
            self._node(item, indent + 1, indent, True)

    def _node(self, value: Any, column: int, indent: int, after_dash: bool) -> None:
        """A mapping's value (after ``:``; ``indent``: the mapping's) or a sequence's item (after
        ``-``; the sequence's), the indicator ending at ``column``. A collection under a key starts
        on the next line (a sequence there indentless); under ``-`` it starts on the same line."""
        kind = type(value)
        if kind is not dict and kind is not list:
            self._scalar(value, column, indent + 2, after_dash)
        elif not value:
            self._out.append(" {}\n" if kind is dict else " []\n")
            self._open_ended = False
        elif after_dash:
            self._out.append(" ")
            (self._mapping if kind is dict else self._sequence)(value, indent + 2, True)
        else:
            self._out.append("\n")
            if kind is dict:
                self._mapping(value, indent + 2, False)
            else:
                self._sequence(value, indent, False)

    def _scalar(self, value: Any, column: int, indent: int, after_dash: bool) -> None:
        """``value`` written after the indicator that ends at ``column`` (``:`` or ``-``), then the
        line's end; ``indent``: the scalar's own indent, for continuation lines."""
        kind = type(value)
        out = self._out
        self._open_ended = False
        if kind is str:
            style, text = self._style(value, False)
            if style in ("", "'") and (column + 1 + len(text) <= 80 or " " not in text):
                out.append(" ")
                out.append(text)
                out.append("\n")
                return
            key = (style, value, column, indent, after_dash)
            written = self._written.get(key)
            if written is None:
                if style[:1] == "|" and value[:1] not in ("", " ", "\n"):
                    written = _literal_block(value, indent)
                elif style == "" and _ONE_LINE.fullmatch(value):
                    written = _folded_plain(value, column, indent)
                else:
                    written = self._by_pyyaml(style, value, column, indent, after_dash)
                if len(self._written) < 10_000:
                    self._written[key] = written
            out.append(written)
            if not written.endswith("\n"):
                out.append("\n")
            self._open_ended = style == "|+"
            return
        if kind is bool:
            out.append(" true\n" if value else " false\n")
        elif kind is int:
            out.append(f" {value}\n")
        elif value is None:
            out.append(" null\n")
        else:
            raise _Unplain

    def _style(self, value: str, key: bool) -> tuple[str, str]:
        """PyYAML's style for ``value`` as a mapping key or a block value, and the text it writes
        when that text is the scalar as it is or single-quoted (else ``value``)."""
        found = self._styles.get((value, key))
        if found is None:
            if not key and _LITERAL_TEXT.fullmatch(value) and " \n" not in value:
                # Lines of printable ASCII, no space before a break or at the end: PyYAML writes a
                # literal block ("keep" chomping when the text ends in two breaks or more).
                found = ("|+" if value.endswith("\n\n") or value == "\n" else "|", value)
            elif _ONE_LINE.fullmatch(value):
                # One line of printable ASCII: PyYAML allows it single-quoted, and plain unless
                # _block_plain_allowed says no; the resolver decides between them ("8000" is quoted).
                if _block_plain_allowed(value) and self._resolver.resolve(yaml.ScalarNode, value, (True, False)) == _STR:
                    found = ("", value)
                else:
                    found = ("'", "'" + value.replace("'", "''") + "'")
            else:
                found = self._style_by_pyyaml(value, key)
            if len(self._styles) < 100_000:
                self._styles[(value, key)] = found
        return found

    def _style_by_pyyaml(self, value: str, key: bool) -> tuple[str, str]:
        """``_style`` as PyYAML's emitter works it out (``analyze_scalar``, ``choose_scalar_style``)."""
        emitter = self._emitter
        analysis = emitter.analyze_scalar(value)
        implicit = self._resolver.resolve(yaml.ScalarNode, value, (True, False)) == _STR
        emitter.event = yaml.ScalarEvent(None, None, (implicit, False), value,
                                         style="|" if "\n" in value and not key else None)
        emitter.analysis, emitter.simple_key_context, emitter.flow_level = analysis, key, 0
        style = emitter.choose_scalar_style()
        emitter.event = emitter.analysis = None
        if key and (style not in ("", "'") or analysis.multiline or analysis.empty):
            raise _Unplain  # not a simple key
        if style == "|" and emitter.determine_block_hints(value).endswith("+"):
            style = "|+"  # "keep" chomping: if nothing follows, PyYAML ends the document with "..."
        text = value if style in ("", "|", "|+", '"') else "'" + value.replace("'", "''") + "'"
        if style == "'" and "\n" in value:
            style = "'\n"  # a quoted scalar over lines: PyYAML writes its breaks
        return style, text

    def _by_pyyaml(self, style: str, value: str, column: int, indent: int, after_dash: bool) -> str:
        """The scalar as PyYAML's emitter writes it from ``column`` (after ``:`` or ``-``) at ``indent``."""
        emitter = self._emitter
        chunks: list[str] = []
        emitter.stream = _Chunks(chunks)
        emitter.column, emitter.indent, emitter.flow_level = column, indent, 0
        emitter.whitespace, emitter.indention = False, after_dash
        emitter.root_context = emitter.open_ended = False
        if style == "":
            emitter.write_plain(value, True)
        elif style in ("'", "'\n"):
            emitter.write_single_quoted(value, True)
        elif style in ("|", "|+"):
            emitter.write_literal(value)
        else:
            emitter.write_double_quoted(value, True)
        emitter.stream = None
        return "".join(chunks)


class _Chunks:
    """A stream that keeps what is written to it."""

    __slots__ = ("write",)

    def __init__(self, chunks: list[str]) -> None:
        self.write = chunks.append


_BLOCK_WRITER = _BlockWriter()
#: The writer keeps the document it writes in itself (and one PyYAML emitter): one at a time.
_BLOCK_WRITER_LOCK = threading.Lock()


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
                rendered = isinstance(member, RenderedItems)
                for position, item in enumerate(member):
                    file.write(b",\n    " if position else b"\n    ")
                    file.write(item if rendered else list_item_json(item))
                file.write(b"\n  ]")
            else:
                file.write(_indented(_json_bytes(member), 2))
        file.write(b"\n}\n")


class RenderedItems(list):
    """A list member of the object :func:`write_json` writes, its items already written by
    :func:`list_item_json` (a list of ``bytes``)."""


def list_item_json(item: Any) -> bytes:
    """An item of a list member of the object :func:`write_json` writes, as it writes it."""
    return _indented(_json_bytes(item), 4)


def _indented(text: bytes, spaces: int) -> bytes:
    """``text``'s lines after the first shifted right (JSON text has no raw line break in strings)."""
    return text.replace(b"\n", b"\n" + b" " * spaces)


#: A number token with a fraction or an exponent after a colon, comma or bracket in orjson's compact
#: text: where a float was written inside a container (a text that is only a number is looked at
#: apart). It may also match inside a string; that only costs the full comparison. (No ``^|``
#: alternative: it made the search three times slower than json's own encoding.)
_FLOAT_TOKEN = re.compile(rb"[:,\[]-?[0-9]+[.eE]")
_NUMBER_START = frozenset(b"-0123456789")


def _json_bytes(value: Any) -> bytes:
    """UTF-8 of ``json.dumps(value, indent=2)``.

    Scalars are the only place the two encoders can differ, and indentation does not change how a
    scalar is written, so orjson's indented text is used when its compact text is that of json's C
    encoder (which json uses only without ``indent``). They write a value alike unless it holds a
    float (orjson writes ``1e16``, json ``1e+16``; NaN and infinity orjson writes as ``null``), a
    non-ASCII character (json escapes it) or DEL (json escapes it); integers beyond 64 bits and
    other types orjson refuses. Compact text with none of those marks (ASCII, no DEL, no ``null``,
    no number with a fraction or exponent) is taken as it is; any other is compared with json's.
    (A value json cannot write at all is not for this function: orjson writes an ``Enum`` or a
    ``UUID`` by its value where json raises. The check writes plain data.)
    """
    if orjson is not None:
        try:
            compact = orjson.dumps(value, default=_refuse, option=_ORJSON_PASSTHROUGH)
        except TypeError:
            compact = None
        if compact is not None and (
            (compact.isascii() and b"\x7f" not in compact and b"null" not in compact
             and compact[0] not in _NUMBER_START and _FLOAT_TOKEN.search(compact) is None)
            or compact == json.dumps(value, separators=(",", ":")).encode()
        ):
            del compact
            return orjson.dumps(value, option=_ORJSON_PASSTHROUGH | orjson.OPT_INDENT_2)
    return json.dumps(value, indent=2).encode()


def dumps_yaml(document: Any) -> str:
    """``yaml.dump(document, Dumper=ManifestDumper, sort_keys=False)``."""
    if type(document) in (dict, list):
        try:
            with _BLOCK_WRITER_LOCK:
                return _BLOCK_WRITER.dumps(document)
        except _Unplain:
            pass
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
    if key and (not value or len(value) >= 128):
        return True  # a complex key ("? "), which libyaml writes otherwise (simple key, "..." after)
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
