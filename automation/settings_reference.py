"""docs/settings.md and README's settings table, generated from the settings models.

Each settings field says what it decides on its ``Field(description=...)``, next to its type, default
and constraints (``components/settings/``). This module turns those into the reference users read: a
table per model in docs/settings.md, every key as written under ``llm-platform:`` (camelCase), with its
type, default, allowed values (the Field's bounds, lengths and Literal choices) and description; and in
README.md, between :data:`BEGIN` and :data:`END`, one row per top-level key that links into it. Nothing
here is written by hand, so the reference cannot drift from the models: ``python -m automation
settings-doc write`` regenerates both files and ``settings-doc check`` (run by a test) refuses a stale one.
"""

from __future__ import annotations

import json
import re
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import annotated_types
from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo

from components.settings import NAMESPACE, Settings

#: The command that regenerates the files, named in every refusal.
WRITE_COMMAND = "python -m automation settings-doc write"
REFERENCE = Path("docs") / "settings.md"
README = Path("README.md")
BEGIN = "<!-- settings-table:begin -->"
END = "<!-- settings-table:end -->"
TOP_LEVEL_HEADING = "Top-level keys"
_SCALARS: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean",
                            SecretStr: "secret string", datetime: "date-time"}


@dataclass
class Section:
    """A settings model and the key paths it is written at (``karpenter.nodePools[]``); the first path
    heads its table in the reference, the root model's path is empty."""

    model: type[BaseModel]
    paths: list[str] = field(default_factory=list)

    @property
    def heading(self) -> str:
        return self.paths[0] or TOP_LEVEL_HEADING

    @property
    def anchor(self) -> str:
        return anchor(self.heading)


def anchor(heading: str) -> str:
    """The fragment GitHub gives a heading: lowercase, punctuation dropped but ``-`` and ``_``, spaces to ``-``."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def _unwrap(annotation: Any) -> tuple[str, Any]:
    """``(shape, inner)``: ``list``, ``dict`` (of its values) or ``one``, with ``None`` dropped from unions."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _unwrap(members[0]) if len(members) == 1 else ("one", annotation)
    if origin is list:
        return "list", typing.get_args(annotation)[0]
    if origin is dict:
        return "dict", typing.get_args(annotation)[1]
    return "one", annotation


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _key(info: FieldInfo, name: str) -> str:
    return info.alias or name


def sections(root: type[BaseModel] = Settings) -> list[Section]:
    """Every model reachable from ``root`` through its fields, depth first, each with every path it sits at."""
    found: dict[type[BaseModel], Section] = {}

    def visit(model: type[BaseModel], path: str) -> None:
        if model in found:
            found[model].paths.append(path)
            return
        found[model] = Section(model, [path])
        for name, info in model.model_fields.items():
            shape, inner = _unwrap(info.annotation)
            if _is_model(inner):
                key = f"{path}.{_key(info, name)}" if path else _key(info, name)
                visit(inner, key + ("[]" if shape == "list" else ""))

    visit(root, "")
    listed = list(found.values())
    anchors = [s.anchor for s in listed]
    assert len(set(anchors)) == len(anchors), f"two settings sections share an anchor: {anchors}"
    return listed


def _type(annotation: Any, links: dict[type[BaseModel], Section]) -> str:
    shape, inner = _unwrap(annotation)
    if shape == "list":
        return f"list of {_type(inner, links)}"
    if shape == "dict":
        return f"map of string to {_type(inner, links)}"
    if _is_model(inner):
        return f"[{inner.__name__}](#{links[inner].anchor})"
    if typing.get_origin(inner) is typing.Literal:
        return "string"
    if typing.get_origin(inner) in (typing.Union, types.UnionType):
        return " or ".join(_type(a, links) for a in typing.get_args(inner) if a is not type(None))
    return _SCALARS.get(inner, getattr(inner, "__name__", str(inner)))


def _number(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else f"{value:g}"


def allowed(info: FieldInfo) -> str:
    """What the field's own constraints admit: bounds, item counts and Literal choices."""
    low: Any = None
    high: Any = None
    low_open = high_open = False
    min_items = max_items = None
    for rule in info.metadata:
        if isinstance(rule, annotated_types.Ge):
            low = rule.ge
        elif isinstance(rule, annotated_types.Gt):
            low, low_open = rule.gt, True
        elif isinstance(rule, annotated_types.Le):
            high = rule.le
        elif isinstance(rule, annotated_types.Lt):
            high, high_open = rule.lt, True
        elif isinstance(rule, annotated_types.MinLen):
            min_items = rule.min_length
        elif isinstance(rule, annotated_types.MaxLen):
            max_items = rule.max_length
    parts = []
    if low is not None and high is not None and not (low_open or high_open):
        parts.append(f"{_number(low)} to {_number(high)}")
    else:
        bounds = ([f"{'above' if low_open else 'at least'} {_number(low)}"] if low is not None else []) + (
            [f"{'below' if high_open else 'at most'} {_number(high)}"] if high is not None else [])
        if bounds:
            parts.append(", ".join(bounds))
    if min_items is not None and max_items is not None:
        parts.append(f"{min_items} to {max_items} items")
    elif min_items is not None:
        parts.append(f"at least {min_items} item{'s' if min_items != 1 else ''}")
    elif max_items is not None:
        parts.append(f"at most {max_items} items")
    shape, inner = _unwrap(info.annotation)
    if typing.get_origin(inner) is typing.Literal:
        choices = ", ".join(f"`{c}`" for c in typing.get_args(inner))
        parts.append(f"each one of {choices}" if shape == "list" else choices)
    return "; ".join(parts)


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def default(info: FieldInfo) -> str:
    """The default as a user writes it: ``required``, ``unset`` (a computed default is in the
    description), ``per key`` for a block whose keys have their own, else the value in code."""
    if info.is_required():
        return "required"
    value = info.get_default(call_default_factory=True)
    if value is None:
        return "unset"
    if isinstance(value, BaseModel):
        return "per key"
    if isinstance(value, str):
        return f"`{value}`"
    return f"`{json.dumps(_plain(value))}`"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _intro(model: type[BaseModel]) -> str:
    """The model docstring's first paragraph, with reStructuredText's double backquotes as Markdown's."""
    paragraph = (model.__doc__ or "").strip().split("\n\n")[0]
    return " ".join(paragraph.split()).replace("``", "`")


def _first_sentence(text: str) -> str:
    return re.split(r"(?<=\.)\s+(?=[A-Z`(])", " ".join(text.split()), maxsplit=1)[0]


def _rows(section: Section, links: dict[type[BaseModel], Section]) -> Iterator[str]:
    prefix = f"{section.paths[0]}." if section.paths[0] else ""
    for name, info in section.model.model_fields.items():
        cells = (f"`{prefix}{_key(info, name)}`", _type(info.annotation, links), default(info), allowed(info),
                 info.description or "")
        yield "| " + " | ".join(_cell(c) for c in cells) + " |"


def reference(root: type[BaseModel] = Settings) -> str:
    """docs/settings.md: one table per settings model, every key with type, default, allowed values, description."""
    listed = sections(root)
    links = {s.model: s for s in listed}
    lines = [
        "# Stack settings reference",
        "",
        f"<!-- Generated by `{WRITE_COMMAND}` from the settings models (components/settings/): edit a field's "
        "Field(description=...) there, not this file. -->",
        "",
        f"Every key sits under `{NAMESPACE}:` in `Pulumi.<stack>.yaml`, spelled as below; a key in a block is "
        f"written inside it (`{NAMESPACE}:network` holds `vpcCidr`), and `[]` marks an item of a list. Unknown keys "
        "are errors, and a bad value stops the offline check and `pulumi preview` with one line naming the key "
        "([validation.md](validation.md)). *Allowed* is what the key's own type admits; the rules between keys "
        "are in [validation.md](validation.md).",
    ]
    for section in listed:
        lines += ["", f"## {section.heading}", ""]
        intro = _intro(section.model)
        if intro:
            lines += [intro, ""]
        if len(section.paths) > 1:
            lines += ["Also at: " + ", ".join(f"`{p}`" for p in section.paths[1:]) + ".", ""]
        lines += ["| key | type | default | allowed | description |", "| --- | --- | --- | --- | --- |"]
        lines += list(_rows(section, links))
    return "\n".join(lines) + "\n"


def readme_table(root: type[BaseModel] = Settings) -> str:
    """README's settings table: one row per top-level key, linking to its table in docs/settings.md."""
    listed = sections(root)
    links = {s.model: s for s in listed}
    lines = [BEGIN, f"<!-- generated by `{WRITE_COMMAND}` from the settings models; edit their descriptions -->",
             "| key | default | what it decides |", "| --- | --- | --- |"]
    for name, info in root.model_fields.items():
        _, inner = _unwrap(info.annotation)
        target = links[inner].anchor if _is_model(inner) else anchor(TOP_LEVEL_HEADING)
        cells = (f"[`{_key(info, name)}`]({REFERENCE.as_posix()}#{target})", default(info),
                 _first_sentence(info.description or ""))
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    lines.append(END)
    return "\n".join(lines)


class MissingMarkers(ValueError):
    """README.md has no settings-table markers to write between."""


def with_table(readme: str, table: str) -> str:
    """``readme`` with the text between :data:`BEGIN` and :data:`END` (both lines included) replaced by ``table``."""
    begin = readme.find(BEGIN)
    end = readme.find(END, max(begin, 0))
    if begin < 0 or end < 0:
        raise MissingMarkers(f"{README}: no settings-table markers; put {BEGIN} and {END} on their own lines where "
                             "the settings table goes")
    return readme[:begin] + table + readme[end + len(END):]


@dataclass(frozen=True)
class Generated:
    """A generated file: where it goes below the repository root, what it should hold, what it holds now."""

    path: Path
    text: str
    current: str | None

    @property
    def stale(self) -> bool:
        return self.text != self.current


def generated(root: Path) -> list[Generated]:
    """docs/settings.md and README.md as the models would have them, beside what ``root`` holds now."""
    reference_path, readme_path = root / REFERENCE, root / README
    readme = readme_path.read_text() if readme_path.is_file() else None
    if readme is None:
        raise MissingMarkers(f"{README}: not found in {root}")
    return [
        Generated(REFERENCE, reference(), reference_path.read_text() if reference_path.is_file() else None),
        Generated(README, with_table(readme, readme_table()), readme),
    ]
