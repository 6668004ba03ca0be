"""Stack files (``Pulumi.<stack>.yaml``) and their settings, read without the Pulumi CLI."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from automation.paths import ROOT
from components.capacity_check import parse_settings
from components.settings import Settings, SettingsError, config_strings
from policies.capacity import bounded_json


class StackFileError(Exception):
    """The stack file is missing or is not a YAML mapping with a ``config`` block."""


class _DuplicateKey(yaml.YAMLError):
    """A mapping repeats a key; the message names it and its line."""

    @property
    def problem(self) -> str:
        return str(self)


class YamlLimitError(yaml.YAMLError):
    """A document nested too deep or made mostly of alias expansion (a "billion laughs")."""

    @property
    def problem(self) -> str:
        return str(self)


#: Nesting the settings accept. The Pulumi CLI's YAML reader (go-yaml v3, ``scannerc.go``
#: ``max_flow_level``/``max_indents``) stops at 10000 with "exceeded max depth of 10000", but the
#: program receives each value as JSON text and Python's ``json`` and PyYAML's composer recurse, so
#: a value nested a few hundred levels deep would end in RecursionError there. No setting nests
#: deeper than 8; the bound is the one every JSON reader of the project applies before parsing.
MAX_DEPTH = bounded_json.MAX_DEPTH

#: go-yaml v3's alias budget (``decode.go``: ``allowedAliasRatio``, ``alias_ratio_range_low`` and
#: ``_high``): once more than 100 nodes came from aliases and more than 1000 were decoded, decoding
#: fails when the share of alias-made nodes exceeds 99% (up to 400000 decodes), scaling down to 10%
#: at 4000000. Counted here on the composed nodes before anything is expanded.
_ALIAS_RATIO_LOW, _ALIAS_RATIO_HIGH = 400_000, 4_000_000


def _allowed_alias_ratio(decoded: int) -> float:
    if decoded <= _ALIAS_RATIO_LOW:
        return 0.99
    if decoded >= _ALIAS_RATIO_HIGH:
        return 0.10
    return 0.99 - 0.89 * (decoded - _ALIAS_RATIO_LOW) / (_ALIAS_RATIO_HIGH - _ALIAS_RATIO_LOW)


def _check_depth(text: str) -> None:
    """Refuse nesting beyond :data:`MAX_DEPTH` from the event stream (which never recurses),
    before anything composes or constructs the document."""
    depth = 0
    for event in yaml.parse(text, Loader=_EventLoader):
        if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            depth += 1
            if depth > MAX_DEPTH:
                raise YamlLimitError(f"line {event.start_mark.line + 1}: nested deeper than {MAX_DEPTH} levels; "
                                     "no setting nests that deep")
        elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            depth -= 1


def _check_aliases(root: yaml.Node | None) -> None:
    """Count nodes as go-yaml's decoder visits them (an alias visits its anchor's whole value again)
    and stop, as it does, when alias expansion makes up nearly all of the document."""
    if root is None:
        return
    decoded = aliased = 0
    # (node, inside an alias expansion, anchors being expanded around it)
    stack: list[tuple[yaml.Node, bool, frozenset[int]]] = [(root, False, frozenset())]
    seen_as_alias: dict[int, int] = {}
    while stack:
        node, in_alias, around = stack.pop()
        decoded += 1
        if in_alias:
            aliased += 1
        if aliased > 100 and decoded > 1000 and aliased / decoded > _allowed_alias_ratio(decoded):
            raise YamlLimitError("is refused: the document contains excessive aliasing (anchors that expand to far more "
                                 "than is written); the Pulumi CLI refuses it too")
        if isinstance(node, yaml.ScalarNode):
            continue
        if id(node) in around:
            raise YamlLimitError(f"line {node.start_mark.line + 1}: an anchor's value contains itself")
        # A node reached a second time is an alias (PyYAML's composer shares the anchored node).
        repeat = seen_as_alias.get(id(node), 0)
        seen_as_alias[id(node)] = repeat + 1
        inside = in_alias or repeat > 0
        children = node.value if isinstance(node, yaml.SequenceNode) else [n for pair in node.value for n in pair]
        nested = around | {id(node)}
        stack.extend((child, inside, nested) for child in reversed(children))


class _RefusesDuplicateKeys:
    """Safe YAML that refuses a repeated mapping key, as the Pulumi CLI does (PyYAML keeps the last).
    Merge keys (``<<: *defaults``) are read as the CLI reads them: the mapping's own keys win.
    Mixed into a loader before its constructor (``SafeConstructor``, in the pure-Python and libyaml
    loaders alike), which supplies ``construct_object`` and the ``construct_mapping`` this one ends in."""

    construct_object: Callable[..., Any]

    def construct_mapping(self, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:
                continue
            if first is not None:
                raise _DuplicateKey(f"line {key_node.start_mark.line + 1}: duplicate key {str(key)[:80]!r} "
                                    f"(first at line {first}); the Pulumi CLI rejects repeated keys, keep one")
            seen[key] = key_node.start_mark.line + 1
        return yaml.constructor.SafeConstructor.construct_mapping(self, node, deep=deep)


class _StackFileLoader(_RefusesDuplicateKeys, yaml.SafeLoader):
    """The pure-Python loader: its error messages are the ones users see."""


#: libyaml's parser under the same constructor and resolver (the same values; a 500-model stack
#: file read in a fifth of the time). Where it fails, the pure-Python loader reads the text again,
#: so errors read as they always did.
_FastStackFileLoader: Any = type("_FastStackFileLoader", (_RefusesDuplicateKeys, yaml.CSafeLoader), {}) \
    if hasattr(yaml, "CSafeLoader") else _StackFileLoader
_EventLoader = yaml.CSafeLoader if hasattr(yaml, "CSafeLoader") else yaml.SafeLoader


def _timestamp_as_text(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> str:
    """A timestamp-like scalar (``endDate: 2026-12-20T11:30:00Z`` unquoted) stays its text, as the Pulumi
    CLI reads it: go-yaml decodes a timestamp into ``interface{}`` as the scalar's string "for backward
    compatibility" (go-yaml decode.go ``(*decoder).scalar``, the ``reflect.Interface`` case), so the
    program receives the text, never a date object."""
    return str(loader.construct_scalar(node))


class _WrittenFloat(float):
    """A float scalar with the text it was written as, while a stack file is read.

    The Pulumi CLI hands a top-level config value to the program as its text: pulumi's ``config.Value``
    decodes a YAML scalar into a string first (``UnmarshalYAML``), and go-yaml gives a float scalar's
    string as written. ``kubernetesVersion: 1.360`` reaches the program as "1.360" (refused) and ``1.30``
    as "1.30", never as 1.36 or 1.3. Inside an object the value is JSON-encoded from the decoded number.
    So :func:`read_stack_config` keeps a top-level float's text and every nested one as a plain float;
    no instance of this class leaves this module (YAML dumpers and copies see plain values)."""

    text: str

    def __new__(cls, value: float, text: str) -> _WrittenFloat:
        number = super().__new__(cls, value)
        number.text = text
        return number


def _plain(node: Any) -> Any:
    """``node`` with every written float a plain float (nesting is bounded by :data:`MAX_DEPTH`)."""
    if isinstance(node, _WrittenFloat):
        return float(node)
    if isinstance(node, dict):
        return {key: _plain(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_plain(value) for value in node]
    return node


def _float_as_written(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> float:
    return _WrittenFloat(loader.construct_yaml_float(node), str(node.value))


for _loader in {_StackFileLoader, _FastStackFileLoader}:
    _loader.add_constructor("tag:yaml.org,2002:timestamp", _timestamp_as_text)
    _loader.add_constructor("tag:yaml.org,2002:float", _float_as_written)


def _load(text: str, loader: type) -> Any:
    instance = loader(text)
    try:
        node = instance.get_single_node()
        _check_aliases(node)
        return instance.construct_document(node) if node is not None else None
    finally:
        instance.dispose()


def load_yaml(text: str):
    """YAML as the Pulumi CLI reads it: safe types, merge keys, a repeated mapping key is an error
    (_DuplicateKey), and nesting or alias expansion past the limits is refused (YamlLimitError)
    before anything is expanded."""
    return _plain(_load_written(text))


def _load_written(text: str) -> Any:
    """:func:`load_yaml` with each float still carrying its written text (:class:`_WrittenFloat`)."""
    try:
        _check_depth(text)
    except YamlLimitError:
        raise
    except yaml.YAMLError:
        pass  # not YAML at all: the loaders below say where
    try:
        return _load(text, _FastStackFileLoader)
    except YamlLimitError:
        raise
    except yaml.YAMLError:
        return _load(text, _StackFileLoader)


def available_stacks(root: Path = ROOT) -> list[str]:
    return sorted(p.name[len("Pulumi."):-len(".yaml")] for p in root.glob("Pulumi.*.yaml"))


def stack_file(stack: str, root: Path = ROOT) -> Path:
    return root / f"Pulumi.{stack}.yaml"


def read_stack_config(stack: str, root: Path = ROOT, path: Path | None = None) -> dict[str, Any]:
    """The ``config:`` block of ``Pulumi.<stack>.yaml`` (or of ``path``) with YAML types intact."""
    path = path or stack_file(stack, root)
    if not path.is_file():
        known = ", ".join(available_stacks(root)) or "none"
        raise StackFileError(f"no stack file {path.name} in {root}; stacks here: {known}")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[: exc.start].count(b"\n") + 1
        raise StackFileError(f"{path.name} line {line} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x}); "
                             "save the stack file as UTF-8") from None
    except OSError as exc:
        raise StackFileError(f"cannot read {path.name}: {exc.strerror}") from None
    try:
        document = _load_written(text) or {}
    except (_DuplicateKey, YamlLimitError) as exc:
        raise StackFileError(f"{path.name} {exc}") from None
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        at = f" at line {where.line + 1}, column {where.column + 1}" if where else ""
        problem = getattr(exc, "problem", None) or "cannot be parsed"
        raise StackFileError(f"{path.name} is not valid YAML{at}: {problem}") from None
    config = document.get("config") if isinstance(document, dict) else None
    if not isinstance(config, dict):
        raise StackFileError(f"{path.name} has no 'config:' mapping")
    # A top-level float reaches the program as the text it was written as; nested ones as numbers.
    return {key: value.text if isinstance(value, _WrittenFloat) else _plain(value) for key, value in config.items()}


def load_stack(stack: str, root: Path = ROOT, path: Path | None = None) -> tuple[dict[str, Any], Settings]:
    """Config and validated settings; raises StackFileError or SettingsError.

    The settings are parsed from the strings the language host passes the program
    (``config_strings``), as the program itself parses them, so the check refuses what the program
    would. Where those strings do not parse,
    the problems are reported from the stack file's typed values, whose messages show values as
    written (``got 3`` rather than ``got "3"``), if those fail too.
    """
    config = read_stack_config(stack, root, path)
    try:
        return config, parse_settings(config_strings(config))
    except SettingsError as as_passed:
        try:
            parse_settings(config)
        except SettingsError as as_written:
            raise as_written from None
        raise as_passed from None
