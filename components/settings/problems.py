"""A settings problem as the user sees it: the key to edit, the value given (shortened, secrets never),
what is wrong; and which config keys hold credentials."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from components.settings._base import NAMESPACE
from components.settings.observability import SECRET_FIELDS, _secret, mask_secrets

#: The value of a key that is absent (shown as ``(missing)``).
MISSING = object()
_SHOWN_CHARS = 120
#: Top-level keys that hold credentials; their values are never shown.
SECRET_KEYS = frozenset({"huggingFaceToken"})
_HIDDEN = "(secret, not shown)"


@dataclass(frozen=True)
class Problem:
    """One bad setting: the config key path, the value given (shortened; secrets never shown), and
    what is wrong or allowed."""

    key: str
    value: Any
    reason: str

    def __str__(self) -> str:
        if self.value is MISSING:
            shown = "(missing)"
        else:
            shown = json.dumps(mask_secrets(self.value), default=str, ensure_ascii=True)
            if len(shown) > _SHOWN_CHARS:
                shown = shown[: _SHOWN_CHARS - 3] + "..."
        return f"{self.key}: got {shown}: {self.reason}"


class SettingsError(Exception):
    """Every problem found in one stack's settings, reported together."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"invalid stack settings ({len(problems)} problem(s)):\n{lines}")


def _key_path(loc: tuple[Any, ...]) -> str:
    path = f"{NAMESPACE}:{loc[0]}" if loc else NAMESPACE
    for part in loc[1:]:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def _lookup(raw: Mapping[str, Any], loc: tuple[Any, ...]) -> Any:
    node: Any = raw
    for part in loc:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return MISSING
    return node


def _reason(root: type[BaseModel], error: Mapping[str, Any], loc: tuple[Any, ...]) -> str:
    if error["type"] == "extra_forbidden":
        return f"unknown key; allowed keys here: {', '.join(_allowed_keys(root, loc[:-1]))}"
    if error["type"] == "missing":
        return "required key is missing"
    if error["type"] == "finite_number":
        return "must be a finite number (not inf or NaN)"
    message = str(error["msg"])
    return message.removeprefix("Value error, ")


def _allowed_keys(root: type[BaseModel], parent: tuple[Any, ...]) -> list[str]:
    model: Any = root
    for part in parent:
        if isinstance(part, int):
            continue
        field = next((f for n, f in model.model_fields.items() if f.alias == part or n == part), None)
        if field is None:
            return []
        annotation = field.annotation
        inner = getattr(annotation, "__args__", (annotation,))[0] if hasattr(annotation, "__args__") else annotation
        model = inner if isinstance(inner, type) and issubclass(inner, BaseModel) else annotation
    return sorted(f.alias or n for n, f in model.model_fields.items())


def decode_config_value(value: Any) -> Any:
    """Config arrives as strings (``PULUMI_CONFIG``); objects and lists arrive as JSON text."""
    if isinstance(value, str) and value[:1] in "{[":
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def field_problem(root: type[BaseModel], raw: Mapping[str, Any], error: Mapping[str, Any]) -> Problem:
    """A pydantic error of ``root`` (the stack's settings model) as the key to edit and the value given."""
    loc = tuple(error["loc"]) + tuple((error.get("ctx") or {}).get("path", ()))
    if (SECRET_FIELDS | SECRET_KEYS) & {str(part) for part in loc}:
        shown: Any = _HIDDEN
    else:
        shown = _lookup(raw, loc)
    return Problem(_key_path(loc), shown, _reason(root, error, loc))


def secret_warnings(config: Mapping[str, Any], secret_keys: Iterable[str] = ()) -> list[str]:
    """One line per credential stored in plain text (accepted, but it belongs in ``--secret``).

    ``config`` is the stack file's block or the engine's map; ``secret_keys`` are the keys the
    engine decrypted (a key set with ``--secret``, or holding a ``--path --secret`` leaf)."""
    encrypted = set(secret_keys)
    out = []
    for key, value in config.items():
        if not key.startswith(f"{NAMESPACE}:") or key in encrypted:
            continue
        name = key[len(NAMESPACE) + 1 :]
        for path in _plain_secret_paths(name, decode_config_value(value)):
            out.append(f"warning: {NAMESPACE}:{path} is stored in plain text; store it encrypted with "
                       f"`pulumi config set --secret{' --path' if path != name else ''} '{NAMESPACE}:{path}' ...`")
    return out


def is_secret_path(path: Iterable[str | int]) -> bool:
    """Whether a config key path (``huggingFaceToken``, ``observability.alerting...apiUrl``) holds a credential."""
    parts = [str(p) for p in path]
    return bool(parts) and (parts[0] in SECRET_KEYS or (parts[0] == "observability" and bool(SECRET_FIELDS & set(parts))))


def _plain_secret_paths(path: str, value: Any) -> Iterable[str]:
    if _secret(value) is not value:  # {secure: ...}
        return
    leaf = path.rsplit(".", 1)[-1].split("[", 1)[0]
    if isinstance(value, str) and (leaf in SECRET_KEYS or (leaf in SECRET_FIELDS and "alerting" in path)):
        yield path
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _plain_secret_paths(f"{path}.{k}", v)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _plain_secret_paths(f"{path}[{i}]", v)
