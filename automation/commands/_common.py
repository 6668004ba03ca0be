"""What the CLI-driving verbs share: consoles, common flags, and one clear line per domain error."""

from __future__ import annotations

import argparse
import functools
import os
import re
import sys
from pathlib import Path
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from pulumi.automation.errors import (
    CommandError,
    ConcurrentUpdateError,
    StackAlreadyExistsError,
    StackNotFoundError,
)
from rich.console import Console

from components.settings import Settings, SettingsError, parse_settings, secret_warnings

from automation import exit_codes

from automation.driver import locks
from automation.driver.environments import EnvRequestError
from automation.driver.interrupts import Interrupted
from automation.driver.locks import LockInfo
from automation.driver.postdeploy import KubectlError
from automation.stacks import StackFileError
from automation.driver.workspace import WorkspaceError

#: Error output shows user text (names, values, CLI output) as given: markup off, so `[/x]` is text.
err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False)


class DriverError(Exception):
    """A failure with a one-line explanation and the exit code it maps to."""

    def __init__(self, message: str, code: int = exit_codes.FAILED):
        super().__init__(message)
        self.code = code


class InvalidStackSettings(Exception):
    """SettingsError for a stack the driver composed (env or test), named for the message."""

    def __init__(self, stack: str, error: SettingsError):
        super().__init__(str(error))
        self.stack = stack
        self.problems = error.problems


def validate(stack: str, config: Mapping[str, Any]) -> Settings:
    """Parse settings before any CLI call; a bad value stops the verb with exit 2."""
    try:
        settings = parse_settings(config)
    except SettingsError as exc:
        raise InvalidStackSettings(stack, exc) from None
    for line in secret_warnings(config):
        err.print(line)
    return settings


def stdout() -> Console:
    """Rich console for summaries; wide enough for tables when stdout is a pipe or a CI log."""
    console = Console(highlight=False, soft_wrap=True)
    return console if console.is_terminal else Console(highlight=False, width=160, soft_wrap=True)


def progress_writer(json_mode: bool) -> Callable[[str], None]:
    """Streams the CLI's progress lines: stdout for people, stderr when stdout carries JSON."""
    stream = sys.stderr if json_mode else sys.stdout

    def write(line: str) -> None:
        stream.write(line + "\n")
        stream.flush()

    write.stream = stream  # type: ignore[attr-defined]  - where live progress draws
    return write


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

    if not _OWNER_RE.match(text):
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
    err.print(f"preflight: {len(results)} check(s) passed ({passed})", markup=False)


def add_output_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--output", choices=("text", "json"), default="text", help="result format on stdout")
    parser.add_argument("--json", dest="output", action="store_const", const="json", help="same as --output json")


def add_secrets_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--secrets-provider", type=secrets_provider_flag,
        help="passphrase (default; needs PULUMI_CONFIG_PASSPHRASE) or a KMS URL such as awskms://alias/NAME; "
        "default from $LLM_PLATFORM_SECRETS_PROVIDER",
    )


_ERROR_LINE = re.compile(r"^\s*(?:(?:stdout|stderr):\s*)?error:\s*(.+)$", re.IGNORECASE)


def error_lines(exc: BaseException, limit: int = 3) -> list[str]:
    """The CLI's ``error:`` lines from a CommandError, without its full stdout dump."""
    lines: list[str] = []
    for line in str(exc).splitlines():
        match = _ERROR_LINE.match(line)
        if match and match.group(1).strip() not in lines:
            lines.append(match.group(1).strip())
    if not lines:
        tail = [line.strip() for line in str(exc).splitlines() if line.strip()]
        lines = tail[-1:]
    return lines[-limit:]


def lock_advice(stack: str, held: list[LockInfo]) -> str:
    """One line: who holds the lock and what to do about it."""
    if not held:
        return (f"stack {stack!r} is locked by another update; wait for it to finish, or clear a dead one with "
                f"`python -m automation unlock --stack {stack}`")
    lock = held[0]
    more = f" (and {len(held) - 1} more lock(s))" if len(held) > 1 else ""
    if lock.stale:
        action = f"clear it with `python -m automation unlock --stack {stack}`"
    elif lock.holder_alive():
        action = "wait for that run to finish"
    else:
        action = f"once that run is gone, `python -m automation unlock --stack {stack} --force` clears it"
    return f"stack {stack!r} is {lock.describe()}{more}; {action}"


@contextmanager
def translate_errors(stack: str, backend: str) -> Iterator[None]:
    """Distinct outcomes for distinct CLI errors: missing stack, existing stack, a held lock."""
    try:
        yield
    except StackNotFoundError:
        raise DriverError(f"stack {stack!r} does not exist in {backend}", exit_codes.NOT_FOUND) from None
    except StackAlreadyExistsError:
        raise DriverError(f"stack {stack!r} already exists in {backend}; pick another name", exit_codes.USAGE) from None
    except ConcurrentUpdateError as exc:
        raise DriverError(lock_advice(stack, locks.from_error(str(exc))), exit_codes.LOCKED) from None
    except CommandError as exc:
        raise DriverError(f"pulumi failed on stack {stack!r}: {'; '.join(error_lines(exc))}") from None


def report_interruption(exc: Interrupted, command_line: str) -> None:
    """What an interrupted verb did, and the command that continues or repairs it."""
    where = f" during {exc.operation} of stack {exc.stack}" if exc.operation else ""
    err.print(f"interrupted by {exc.signal_name}{where}", markup=False)
    report = exc.report
    done = ", ".join(f"{n} {op}" for op, n in sorted((report.changes if report else {}).items()) if n) or "none"
    if exc.hard:
        err.print(f"  the Pulumi CLI was stopped at once; changes recorded before it stopped: {done}", markup=False)
        if exc.stack:
            err.print(f"  the stack may still be locked and its state may list pending operations. Recover with:\n"
                      f"    python -m automation unlock --stack {exc.stack}\n"
                      f"    python -m automation refresh --stack {exc.stack}\n"
                      f"  then run again: {command_line}", markup=False)
        return
    if exc.operation:
        err.print(f"  the Pulumi CLI cancelled cleanly: in-flight steps finished, state written, lock released; "
                  f"changes made: {done}", markup=False)
    err.print(f"  next: {command_line}", markup=False)


def guarded(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Turns domain errors into one line on stderr and a named exit code, never a traceback."""

    @functools.wraps(run)
    def wrapper(args: argparse.Namespace) -> int:
        try:
            return run(args)
        except Interrupted as exc:
            report_interruption(exc, getattr(args, "resume", None) or getattr(args, "command_line", "the same command"))
            return exc.exit_code
        except InvalidStackSettings as exc:
            err.print(f"error: stack {exc.stack!r} has {len(exc.problems)} invalid setting(s):", markup=False)
            for problem in exc.problems:
                err.print(f"  {problem}", markup=False)
            return exit_codes.USAGE
        except (WorkspaceError, EnvRequestError, StackFileError) as exc:
            err.print(f"error: {exc}", markup=False)
            return exit_codes.USAGE
        except KubectlError as exc:
            err.print(f"error: {exc}", markup=False)
            return exit_codes.FAILED
        except DriverError as exc:
            err.print(f"error: {exc}", markup=False)
            return exc.code

    return wrapper
