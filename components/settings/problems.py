"""A settings problem as the user sees it: the key to edit, the value given (shortened, secrets never),
what is wrong; and which config keys hold credentials."""

from __future__ import annotations

import difflib
import json
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from components.settings._base import NAMESPACE
from components.settings.observability import SECRET_FIELDS, _secret
from policies.capacity import bounded_json

#: The value of a key that is absent (shown as ``(missing)``).
MISSING = object()
_SHOWN_CHARS = 120
#: Top-level keys that hold credentials; their values are never shown.
SECRET_KEYS = frozenset({"huggingFaceToken"})
_HIDDEN = "(secret, not shown)"

# -- what looks like a credential: the value of such a key or value is never shown ------------------
#: Key names that say "credential", including misspellings of the project's own secret keys
#: (``huggingFaceTokn``) and the usual names of other tools' secrets (a Slack receiver's ``apiKey``).
_SECRET_KEY_WORDS = re.compile(
    r"(?i)(token|tokn|secret|passw|pwd|api[-_]?key|access[-_]?key|private[-_]?key|credential|auth|"
    r"routing[-_]?key|webhook|signing|cookie|session|bearer|^key$|apiurl|^url$|^dsn$)"
)
#: Value shapes of well-known credentials: Hugging Face, Slack, OpenAI-style, GitHub and GitLab
#: tokens, AWS access key ids, JWTs, PEM keys, URLs with a password, Slack/PagerDuty hook URLs.
_SECRET_VALUE_SHAPES = re.compile(
    r"^(hf_[A-Za-z0-9]{20,}|xox[abposr]-[A-Za-z0-9-]{10,}|sk-[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|"
    r"github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_-]{20,}|(AKIA|ASIA)[A-Z0-9]{16}|eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]+|"
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*)$|^[a-z][a-z0-9+.-]*://[^/@\s:]+:[^/@\s]+@|hooks\.slack\.com/|"
    r"events\.pagerduty\.com/",
    re.DOTALL,
)
_TOKEN_CHARS = re.compile(r"^[A-Za-z0-9+/=_-]{24,}$")


def _looks_random(text: str) -> bool:
    """A long run of token characters with letters and digits mixed at high entropy (>= 4 bits a
    character): an API key of unknown shape, not a name or a path."""
    if not _TOKEN_CHARS.match(text) or not (re.search(r"[0-9]", text) and re.search(r"[A-Za-z]", text)):
        return False
    counts = Counter(text)
    entropy = -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())
    return entropy >= 4.0


def secret_key_name(key: str) -> bool:
    """Whether a config key's name says it holds a credential (or nearly spells one that does)."""
    known = SECRET_KEYS | SECRET_FIELDS
    return key in known or bool(_SECRET_KEY_WORDS.search(key)) or bool(difflib.get_close_matches(key, known, cutoff=0.8))


def secret_looking(value: Any) -> bool:
    """Whether a value has the shape of a credential, whatever key it sits under."""
    if isinstance(value, dict) and set(value) == {"secure"}:
        return True
    return isinstance(value, str) and (bool(_SECRET_VALUE_SHAPES.search(value.strip())) or _looks_random(value.strip()))


def masked(value: Any, key: str | None = None) -> Any:
    """``value`` as an error may show it: every part under a credential-like key, or shaped like a
    credential, replaced by ``(secret, not shown)``."""
    if key is not None and secret_key_name(key):
        return _HIDDEN
    if isinstance(value, dict):
        return {k: masked(v, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [masked(v) for v in value]
    return _HIDDEN if secret_looking(value) else value


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
            shown = json.dumps(masked(self.value), default=str, ensure_ascii=True)
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
            return bounded_json.loads(value)
        except ValueError:  # not JSON, or nested past the bound: left as text, refused by type
            return value
    return value


def field_problem(root: type[BaseModel], raw: Mapping[str, Any], error: Mapping[str, Any]) -> Problem:
    """A pydantic error of ``root`` (the stack's settings model) as the key to edit and the value given."""
    loc = tuple(error["loc"]) + tuple((error.get("ctx") or {}).get("path", ()))
    if any(secret_key_name(str(part)) for part in loc if not isinstance(part, int)):
        shown: Any = _HIDDEN
    else:
        shown = _lookup(raw, loc)
        shown = shown if shown is MISSING else masked(shown)
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
