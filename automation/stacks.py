"""Stack files (``Pulumi.<stack>.yaml``) and their settings, read without the Pulumi CLI."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from components.settings import Settings, SettingsError, config_strings, parse_settings

from automation.offline.plan import ROOT


class StackFileError(Exception):
    """The stack file is missing or is not a YAML mapping with a ``config`` block."""


class _DuplicateKey(yaml.YAMLError):
    """A mapping repeats a key; the message names it and its line."""

    @property
    def problem(self) -> str:
        return str(self)


class _RefusesDuplicateKeys:
    """Safe YAML that refuses a repeated mapping key, as the Pulumi CLI does (PyYAML keeps the last)."""

    def construct_mapping(self, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:
                continue
            if first is not None:
                raise _DuplicateKey(f"line {key_node.start_mark.line + 1}: duplicate key {str(key)[:80]!r} "
                                    f"(first at line {first}); the Pulumi CLI rejects repeated keys, keep one")
            seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


class _StackFileLoader(_RefusesDuplicateKeys, yaml.SafeLoader):
    """The pure-Python loader: its error messages are the ones users see."""


#: libyaml's parser under the same constructor and resolver (the same values; a 500-model stack
#: file read in a fifth of the time). Where it fails, the pure-Python loader reads the text again,
#: so errors read as they always did.
_FastStackFileLoader = type("_FastStackFileLoader", (_RefusesDuplicateKeys, yaml.CSafeLoader), {}) \
    if hasattr(yaml, "CSafeLoader") else _StackFileLoader


def load_yaml(text: str):
    """YAML as the Pulumi CLI reads it: safe types, a repeated mapping key is an error (_DuplicateKey)."""
    try:
        return yaml.load(text, Loader=_FastStackFileLoader)
    except yaml.YAMLError:
        return yaml.load(text, Loader=_StackFileLoader)


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
        document = load_yaml(text) or {}
    except _DuplicateKey as exc:
        raise StackFileError(f"{path.name} {exc}") from None
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        at = f" at line {where.line + 1}, column {where.column + 1}" if where else ""
        problem = getattr(exc, "problem", None) or "cannot be parsed"
        raise StackFileError(f"{path.name} is not valid YAML{at}: {problem}") from None
    config = document.get("config") if isinstance(document, dict) else None
    if not isinstance(config, dict):
        raise StackFileError(f"{path.name} has no 'config:' mapping")
    return config


def load_stack(stack: str, root: Path = ROOT, path: Path | None = None) -> tuple[dict[str, Any], Settings]:
    """Config and validated settings; raises StackFileError or SettingsError.

    The settings are parsed from the strings the language host passes the program
    (``config_strings``), as the program itself parses them: the program's parse of the same text
    is then the one already made (``parse_settings`` keeps it). Where those strings do not parse,
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
