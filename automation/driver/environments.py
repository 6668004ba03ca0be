"""Self-service environments: names, owner, creation time, expiry, purpose, and their config.

Metadata lives in stack tags (``llm-platform:owner``, ``llm-platform:expires-at``, ...), never in
``llm-platform:`` config: settings parsing is strict, and tags are readable by ``env list`` and
``env reap`` from any machine that can reach the backend, without the stack's config file.
Integration-test stacks carry the same tags with kind ``test``, so a run killed before its
``finally`` is still reaped when it expires.
"""

from __future__ import annotations

import copy
import getpass
import json
import re
import secrets
import subprocess
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import yaml

from components.settings import NAMESPACE, decode_config_value, is_secret_path
from policies.capacity import bounded_json

TAG_PREFIX = f"{NAMESPACE}:"
TAG_KIND = f"{TAG_PREFIX}kind"
TAG_OWNER = f"{TAG_PREFIX}owner"
TAG_CREATED = f"{TAG_PREFIX}created-at"
TAG_EXPIRES = f"{TAG_PREFIX}expires-at"
TAG_PURPOSE = f"{TAG_PREFIX}purpose"
TAG_TEMPLATE = f"{TAG_PREFIX}template"
#: The request's ``--set`` overrides, JSON split over numbered tags (a tag value holds 256 characters).
TAG_REQUEST = f"{TAG_PREFIX}request."
TAG_VALUE_LIMIT = 256
MAX_REQUEST_TAGS = 32

KIND_ENV = "env"
KIND_TEST = "test"
ENV_PREFIX = "env-"
TEST_PREFIX = "test-"

MAX_TTL = timedelta(days=7)
MIN_TTL = timedelta(minutes=15)
#: A test stack normally lives minutes; this expiry only matters if its run was killed.
TEST_TTL = timedelta(hours=3)

#: An env name becomes the ``environment`` setting, so it follows that setting's pattern.
#: Matched whole (``fullmatch``: ``$`` would also match before a final newline) and in ASCII
#: (``\d`` would take Unicode digits such as ``٨``).
_ENV_NAME_RE = re.compile(r"[a-z][a-z0-9-]{0,19}", re.ASCII)
_OWNER_RE = re.compile(r"[A-Za-z0-9._@+-]{1,64}", re.ASCII)
_DURATION_RE = re.compile(r"(?:([0-9]+)d)?(?:([0-9]+)h)?(?:([0-9]+)m)?(?:([0-9]+)s)?", re.ASCII)
_PATH_TOKEN_RE = re.compile(r"([^.\[\]]+)|\[(\d+)\]")
_TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
MAX_PURPOSE = 256


class EnvRequestError(ValueError):
    """A bad environment request: name, TTL, owner or ``--set`` override. Nothing was run."""


def utcnow() -> datetime:
    """The clock every expiry decision uses; tests replace it."""
    return datetime.now(UTC).replace(microsecond=0)


def format_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime(_TIME_FORMAT)


def parse_time(text: str) -> datetime:
    return datetime.strptime(text, _TIME_FORMAT).replace(tzinfo=UTC)


def parse_duration(text: str, flag: str) -> timedelta:
    """``8h``, ``90m``, ``2d``, ``1d12h``, ``45s``."""
    match = _DURATION_RE.fullmatch(text.strip(' '))
    if not text.strip(' ') or not match or not any(match.groups()):
        raise EnvRequestError(f"{flag} {text!r}: use days/hours/minutes/seconds such as 8h, 90m, 2d or 1d12h")
    days, hours, minutes, seconds = (int(g or 0) for g in match.groups())
    try:
        return timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)
    except OverflowError:
        raise EnvRequestError(f"{flag} {text!r}: far too long (at most 999999999 days)") from None


def parse_ttl(text: str) -> timedelta:
    """An environment's lifetime: between 15 minutes and 7 days."""
    ttl = parse_duration(text, "--ttl")
    if not MIN_TTL <= ttl <= MAX_TTL:
        raise EnvRequestError(f"--ttl {text!r}: must be between {human(MIN_TTL)} and {human(MAX_TTL)}")
    return ttl


def human(delta: timedelta) -> str:
    """A short duration such as ``3h12m`` or ``2d4h``."""
    minutes = int(abs(delta).total_seconds() // 60)
    days, rest = divmod(minutes, 24 * 60)
    hours, mins = divmod(rest, 60)
    if days:
        return f"{days}d{hours}h" if hours else f"{days}d"
    if hours:
        return f"{hours}h{mins}m" if mins else f"{hours}h"
    return f"{mins}m"


def check_env_name(name: str) -> str:
    if not _ENV_NAME_RE.fullmatch(name) or name.startswith((ENV_PREFIX, TEST_PREFIX)):
        raise EnvRequestError(
            f"environment name {name!r}: use 1-20 lowercase letters, digits and dashes, starting with a letter "
            f"(and not with {ENV_PREFIX!r} or {TEST_PREFIX!r})"
        )
    return name


def env_stack_name(name: str) -> str:
    return ENV_PREFIX + check_env_name(name)


def managed_stack_name(name: str) -> str:
    """``env destroy`` takes an env name, or a full ``env-*``/``test-*`` stack name from ``env list``."""
    if name.startswith((ENV_PREFIX, TEST_PREFIX)):
        return name
    return env_stack_name(name)


def _slug(text: str, limit: int) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:limit].strip("-") or "user"


def ephemeral_stack_name(owner: str, now: datetime, token: str | None = None) -> str:
    """Unique per run: ``test-<owner>-<UTC stamp>-<random>``."""
    token = token or secrets.token_hex(3)
    return f"{TEST_PREFIX}{_slug(owner.split('@')[0], 20)}-{now.astimezone(UTC):%Y%m%d%H%M%S}-{token}"


def ephemeral_environment(stack: str) -> str:
    """The ``environment`` setting of a test stack: short (AWS names derive from it), unique by the
    stack's random suffix."""
    return f"t-{stack.rsplit('-', 1)[-1]}"


def default_owner(explicit: str | None = None) -> str:
    """``--owner``, else the login name, else git's ``user.email``."""
    owner = explicit
    if not owner:
        try:
            owner = getpass.getuser()
        except (KeyError, OSError):
            owner = None
    if not owner:
        try:
            owner = subprocess.run(
                ["git", "config", "user.email"], capture_output=True, text=True, timeout=10, check=False
            ).stdout.strip()
        except OSError:
            owner = None
    if not owner:
        raise EnvRequestError("cannot tell who you are: pass --owner NAME")
    if not _OWNER_RE.fullmatch(owner):
        raise EnvRequestError(f"owner {owner!r}: use letters, digits and . _ @ + - (at most 64)")
    return owner


@dataclass(frozen=True)
class EnvMetadata:
    """What a managed stack says about itself through its tags."""

    stack: str
    kind: str
    owner: str
    created_at: datetime
    expires_at: datetime
    purpose: str = ""
    template: str = ""
    #: The ``--set KEY=VALUE`` texts of the request, in order; with ``template`` they rebuild the config.
    overrides: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.stack.removeprefix(ENV_PREFIX) if self.kind == KIND_ENV else self.stack

    def expired(self, now: datetime) -> bool:
        return self.expires_at <= now

    def to_tags(self) -> dict[str, str]:
        tags = {
            TAG_KIND: self.kind,
            TAG_OWNER: self.owner,
            TAG_CREATED: format_time(self.created_at),
            TAG_EXPIRES: format_time(self.expires_at),
            TAG_TEMPLATE: self.template,
        }
        if self.purpose:
            tags[TAG_PURPOSE] = self.purpose
        tags.update(request_tags(self.overrides))
        return tags

    @classmethod
    def from_tags(cls, stack: str, tags: Mapping[str, str]) -> EnvMetadata | None:
        """None for stacks this driver did not create (no kind or expiry tag)."""
        if tags.get(TAG_KIND) not in (KIND_ENV, KIND_TEST) or TAG_EXPIRES not in tags:
            return None
        try:
            expires = parse_time(tags[TAG_EXPIRES])
            created = parse_time(tags.get(TAG_CREATED, tags[TAG_EXPIRES]))
        except ValueError:
            return None
        return cls(
            stack=stack,
            kind=tags[TAG_KIND],
            owner=tags.get(TAG_OWNER, ""),
            created_at=created,
            expires_at=expires,
            purpose=tags.get(TAG_PURPOSE, ""),
            template=tags.get(TAG_TEMPLATE, ""),
            overrides=overrides_from_tags(tags),
        )

    def to_json(self, now: datetime, *, status: str) -> dict[str, Any]:
        return {
            "name": self.name,
            "stack": self.stack,
            "kind": self.kind,
            "owner": self.owner,
            "createdAt": format_time(self.created_at),
            "expiresAt": format_time(self.expires_at),
            "ageSeconds": int((now - self.created_at).total_seconds()),
            "expired": self.expired(now),
            "purpose": self.purpose,
            "template": self.template,
            "overrides": list(self.overrides),
            "status": status,
        }


def request_tags(overrides: Iterable[str]) -> dict[str, str]:
    """``llm-platform:request.0..N``: the overrides as JSON, in chunks a stack tag can hold."""
    text = json.dumps(list(overrides), separators=(",", ":"))
    chunks = [text[i:i + TAG_VALUE_LIMIT] for i in range(0, len(text), TAG_VALUE_LIMIT)]
    if len(chunks) > MAX_REQUEST_TAGS:
        raise EnvRequestError(f"--set: the overrides are too long to store with the stack "
                              f"(at most {MAX_REQUEST_TAGS * TAG_VALUE_LIMIT} characters of JSON)")
    return {f"{TAG_REQUEST}{i}": chunk for i, chunk in enumerate(chunks)}


def overrides_from_tags(tags: Mapping[str, str]) -> tuple[str, ...]:
    parts = []
    index = 0
    while f"{TAG_REQUEST}{index}" in tags:
        parts.append(tags[f"{TAG_REQUEST}{index}"])
        index += 1
    if not parts:
        return ()
    try:
        values = bounded_json.loads("".join(parts))
    except ValueError:
        return ()
    return tuple(str(v) for v in values) if isinstance(values, list) else ()


def stale_request_tags(old: Mapping[str, str], new: Mapping[str, str]) -> list[str]:
    """Request chunk tags of ``old`` that ``new`` no longer has (the overrides got shorter)."""
    return sorted(k for k in old if k.startswith(TAG_REQUEST) and k not in new)


def combine_overrides(stored: Iterable[str], added: Iterable[str], removed: Iterable[str] = ()) -> list[str]:
    """Stored overrides, minus those whose key a new one (or ``--unset``) covers, then the new ones."""
    new = [parse_override(text) for text in added]
    drop = [o.path for o in new] + [parse_override(f"{key}=0").path for key in removed]

    def covered(path: tuple) -> bool:
        return any(path[:len(prefix)] == prefix for prefix in drop)

    stored = list(stored)
    for key in removed:
        path = parse_override(f"{key}=0").path
        if not any(parse_override(text).path[:len(path)] == path for text in stored):
            keys = ", ".join(text.partition("=")[0] for text in stored) or "none"
            raise EnvRequestError(f"--unset {key!r}: no stored --set override under that key (stored: {keys})")
    kept = [text for text in stored if not covered(parse_override(text).path)]
    return kept + [o.text for o in new]


def new_metadata(
    stack: str, *, kind: str, owner: str, ttl: timedelta, template: str, purpose: str = "", now: datetime | None = None,
    overrides: Iterable[str] = (),
) -> EnvMetadata:
    if len(purpose) > MAX_PURPOSE:
        raise EnvRequestError(f"--purpose: at most {MAX_PURPOSE} characters")
    control = next((i for i, ch in enumerate(purpose) if unicodedata.category(ch)[0] == "C"), None)
    if control is not None:
        # Stored in a stack tag and printed by `env list`: a terminal escape would repaint the screen.
        raise EnvRequestError(f"--purpose: control character U+{ord(purpose[control]):04X} at position {control + 1}; "
                              "use plain text on one line")
    now = now or utcnow()
    return EnvMetadata(
        stack=stack, kind=kind, owner=owner, created_at=now, expires_at=now + ttl, purpose=purpose, template=template,
        overrides=tuple(overrides),
    )


def select_expired(envs: Iterable[EnvMetadata], now: datetime) -> list[EnvMetadata]:
    """The environments ``env reap`` destroys: expiry at or before ``now``, oldest expiry first."""
    return sorted((e for e in envs if e.expired(now)), key=lambda e: e.expires_at)


# --- config: template stack + overrides ---------------------------------------------------------


@dataclass(frozen=True)
class Override:
    """One ``--set path=value``: ``path`` walks into ``llm-platform:<key>`` objects and lists."""

    text: str
    path: tuple[str | int, ...]
    value: Any


def parse_override(text: str) -> Override:
    """``gpuPools[0].scaling.maxSize=2``; the value is read as YAML (numbers, booleans, lists, JSON).

    Quote a value to keep it a string: ``kubernetesVersion='"1.34"'``.
    """
    key, sep, raw = text.partition("=")
    key = key.strip().removeprefix(TAG_PREFIX)
    tokens: list[str | int] = []
    position = 0
    for match in _PATH_TOKEN_RE.finditer(key):
        gap = key[position:match.start()]
        if gap not in ("", "."):
            break
        tokens.append(match.group(1) if match.group(1) is not None else int(match.group(2)))
        position = match.end()
    if tokens and is_secret_path(tokens):
        shown = "".join(f"[{t}]" if isinstance(t, int) else f".{t}" for t in tokens).lstrip(".")
        raise EnvRequestError(
            f"--set {shown}=(value not shown): {shown} is a secret, and --set values are stored in clear in the "
            "stack's tags; environments take no secrets on the command line: use a stack with its own stack file "
            f"and `pulumi config set --secret --path '{NAMESPACE}:{shown}' ...`"
        )
    if not sep or not key or position != len(key) or not tokens or not isinstance(tokens[0], str):
        raise EnvRequestError(f"--set {text!r}: use KEY=VALUE with KEY like gpuPools[0].scaling.maxSize")
    if tokens[0] == "environment":
        # An environment's identity (cluster and AWS names) comes from its name; two envs given the
        # same `environment` would build resources with the same names.
        raise EnvRequestError(
            f"--set {NAMESPACE}:environment: set from the environment's name (env create NAME), not by --set"
        )
    if tokens[0] == "gpuBudget":
        # The environment is checked by the template's policy config, which repeats the template's budget.
        raise EnvRequestError(
            f"{NAMESPACE}:{key}: set by the template stack and repeated in its policy config, so --set cannot "
            "change it for an environment: lower pool sizes instead, or change the template's gpuBudget and policy config"
        )
    from automation.stacks import load_yaml  # reads YAML as the Pulumi CLI does (a repeated key is an error)

    try:
        value = load_yaml(raw) if raw.strip() else None
    except yaml.YAMLError as exc:
        raise EnvRequestError(f"--set {text!r}: value is not valid YAML/JSON ({exc.problem})") from None
    if value is None:
        raise EnvRequestError(f"--set {text!r}: empty value")
    return Override(text=text, path=tuple(tokens), value=value)


def apply_override(config: dict[str, Any], override: Override) -> None:
    first, *rest = override.path
    key = f"{TAG_PREFIX}{first}"
    if not rest:
        config[key] = override.value
        return
    node = config.setdefault(key, {} if isinstance(rest[0], str) else [])
    node = config[key] = decode_config_value(node)
    for step, nxt in zip(rest, [*rest[1:], None]):
        last = nxt is None
        if isinstance(step, int):
            if not isinstance(node, list) or step > len(node):
                raise EnvRequestError(f"--set {override.text!r}: no list item [{step}] to set")
            if step == len(node):
                node.append(None)
            if last:
                node[step] = override.value
            else:
                if not isinstance(node[step], (dict, list)):
                    node[step] = {} if isinstance(nxt, str) else []
                node = node[step]
        else:
            if not isinstance(node, dict):
                raise EnvRequestError(f"--set {override.text!r}: {step!r} is not inside an object")
            if last:
                node[step] = override.value
            else:
                if not isinstance(node.get(step), (dict, list)):
                    node[step] = {} if isinstance(nxt, str) else []
                node = node[step]


def tag_resources(config: dict[str, Any], meta: EnvMetadata) -> None:
    """Add owner and stack to the AWS tags of every resource, for cost reports per environment."""
    key = f"{TAG_PREFIX}tags"
    tags = decode_config_value(config.get(key)) or {}
    if not isinstance(tags, dict):
        raise EnvRequestError(f"{key} must be a map of tags, got {tags!r}")
    config[key] = {**tags, "llm-platform/owner": meta.owner, "llm-platform/stack": meta.stack}


def secret_keys(config: Mapping[str, Any]) -> list[str]:
    return sorted(k for k, v in config.items() if isinstance(v, dict) and set(v) == {"secure"})


def merged_config(
    template: Mapping[str, Any], overrides: Iterable[Override], *, environment: str | None = None
) -> dict[str, Any]:
    """The template stack's config, ``environment`` set to the new stack's own, then ``--set`` values.

    Secret (``secure:``) template values are refused: they are encrypted for the template stack
    and cannot be copied as plaintext.
    """
    hidden = secret_keys(template)
    if hidden:
        raise EnvRequestError(
            f"the template has secret config ({', '.join(hidden)}); copying secrets is not supported, "
            "set them on the new stack with `pulumi config set --secret`"
        )
    config = copy.deepcopy(dict(template))
    if environment is not None:
        config[f"{TAG_PREFIX}environment"] = environment
    for override in overrides:
        apply_override(config, override)
    return config
