"""What the CLI-driving verbs share: flag types, common flags, settings validation and preflight.

Consoles live in ``automation.console``; errors and their exit codes in ``automation.errors``."""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from automation import exit_codes
from automation.console import err
from automation.errors import DriverError, InvalidStackSettings
from components.capacity_check import parse_settings
from components.settings import Settings, SettingsError, settings_warnings


def validate(stack: str, config: Mapping[str, Any]) -> Settings:
    """Parse settings before any CLI call; a bad value stops the verb with exit 2."""
    try:
        settings = parse_settings(config)
    except SettingsError as exc:
        raise InvalidStackSettings(stack, exc) from None
    for line in settings_warnings(config, settings):
        err.print(line)
    return settings


def ttl_flag(text: str):
    """argparse type for ``--ttl``: a bad value is a one-line usage error naming the flag."""
    from automation.driver.environments import EnvRequestError, parse_ttl

    try:
        return parse_ttl(text)
    except EnvRequestError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--ttl ")) from None


def duration_flag(flag: str):
    def parse(text: str):
        from automation.driver.environments import EnvRequestError, parse_duration

        try:
            return parse_duration(text, flag)
        except EnvRequestError as exc:
            raise argparse.ArgumentTypeError(str(exc).removeprefix(f"{flag} ")) from None

    return parse


_STACK_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")


def stack_flag(text: str) -> str:
    """argparse type for ``--stack``: a Pulumi stack name (letters, digits, ``_ . -``)."""
    if not _STACK_NAME_RE.match(text) or text.startswith("-"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a stack name (1-100 letters, digits, '_', '.', '-')")
    return text


def secrets_provider_flag(text: str) -> str:
    """argparse type for ``--secrets-provider``: ``passphrase`` or a key URL the Pulumi CLI accepts."""
    from automation.driver.workspace import SECRETS_PROVIDER_SCHEMES

    if text != "passphrase" and not (text.startswith(SECRETS_PROVIDER_SCHEMES) and text.split("://", 1)[1].strip()):
        raise argparse.ArgumentTypeError(
            f"{text!r}: use passphrase or a key URL such as awskms://alias/llm-platform "
            f"({', '.join(SECRETS_PROVIDER_SCHEMES)})"
        )
    return text


_DNS_LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_DNS_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


def namespace_flag(text: str) -> str:
    """argparse type for a Kubernetes namespace: a DNS label."""
    if not _DNS_LABEL_RE.match(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a namespace name (a DNS label: a-z, 0-9, '-', at most 63)")
    return text


def object_name_flag(text: str) -> str:
    """argparse type for a Kubernetes object name (Secret, ServiceAccount): a DNS subdomain."""
    if not _DNS_SUBDOMAIN_RE.match(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a Kubernetes object name (a-z, 0-9, '-', '.')")
    return text


def owner_flag(text: str) -> str:
    """argparse type for ``--owner``: the name recorded on the stack's tags."""
    from automation.driver.environments import _OWNER_RE

    if not _OWNER_RE.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r}: use 1-64 letters, digits and . _ @ + -")
    return text


def executable_flag(text: str) -> str:
    """argparse type for a program flag (``--kubectl``): a name or a path. Whether it exists and runs is
    preflight's check (it reports every missing tool at once, exit 5)."""
    if not text.strip() or text.startswith("-") or any(not c.isprintable() for c in text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a program name or path")
    if os.sep not in text and any(c.isspace() for c in text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a program name (no spaces; give a path)")
    return text


def output_file(text: str) -> Path:
    """argparse type for a file to write: not a directory, and its folder exists or can be made."""
    path = Path(text).expanduser()
    if not text.strip():
        raise argparse.ArgumentTypeError("empty path")
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a directory; name a file")
    _check_creatable(path.parent, text)
    return path


def output_dir(text: str) -> Path:
    """argparse type for a directory to write into: not an existing file, and creatable."""
    path = Path(text).expanduser()
    if not text.strip():
        raise argparse.ArgumentTypeError("empty path")
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a file, not a directory")
    _check_creatable(path, text)
    return path


def _check_creatable(folder: Path, text: str) -> None:
    probe = folder
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r}: {probe} is a file, not a directory")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"{text!r}: {probe} is not writable")


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: must be at least 1")
    return value


def add_endpoint_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--endpoint-reachable", action="store_true",
                        help="this machine is inside (or routed to) the cluster's VPC: skip the private API endpoint "
                        "check of preflight")


def preflight(needs, backend, command, extra=()) -> None:
    """Run the preflight checks; any failure stops the verb before anything changes (exit 5)."""
    from automation.driver.preflight import run_preflight

    version = str(command.version) if getattr(command, "version", None) else "?"
    results = run_preflight(needs, backend.url, backend.secrets_provider, version, [e for e in extra if e])
    failed = [r for r in results if not r.ok]
    if failed:
        lines = "\n".join(f"  FAIL  {r.name}: {r.detail}" for r in failed)
        raise DriverError(f"preflight failed, nothing was changed:\n{lines}", exit_codes.PREFLIGHT)
    passed = ", ".join(r.name for r in results if not r.skipped)
    err.print(f"preflight: {len(results)} check(s) passed ({passed})")


def add_output_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--output", choices=("text", "json"), default="text", help="result format on stdout")
    parser.add_argument("--json", dest="output", action="store_const", const="json", help="same as --output json")


def add_secrets_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--secrets-provider", type=secrets_provider_flag,
        help="passphrase (default; needs PULUMI_CONFIG_PASSPHRASE) or a KMS URL such as awskms://alias/NAME; "
        "default from $LLM_PLATFORM_SECRETS_PROVIDER",
    )


