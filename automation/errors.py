"""The CLI's one error path: every known failure becomes one exit code and a few clear lines.

:data:`OUTCOMES` is the table (exception -> exit code -> lines on stderr); ``cli.main`` consults it
for anything a verb raises, so no verb catches its own errors. Exceptions are named by module and
class, so nothing heavy (the Pulumi SDK, the pack's gRPC client) is imported to look them up; a test
keeps every name real. Anything not in the table is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from automation import exit_codes
from automation.console import err


class UsageError(Exception):
    """A bad command line: one line naming the flag, exit 2 (argparse would print the whole usage)."""


class DriverError(Exception):
    """A failure with a one-line explanation and the exit code it maps to."""

    def __init__(self, message: str, code: int = exit_codes.FAILED):
        super().__init__(message)
        self.code = code


class InvalidStackSettings(Exception):
    """A ``SettingsError`` for a stack the driver composed (env or test), with that stack's name."""

    def __init__(self, stack: str, error: Any):
        super().__init__(str(error))
        self.stack = stack
        self.problems = error.problems


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


def lock_advice(stack: str, held: list[Any]) -> str:
    """One line: who holds the lock (``locks.LockInfo``) and what to do about it."""
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
    """The Automation API's errors as :class:`DriverError` with the stack's name: missing stack (not
    found), existing stack (usage), a held lock (locked), any other CLI failure (failed)."""
    from pulumi.automation.errors import (
        CommandError,
        ConcurrentUpdateError,
        StackAlreadyExistsError,
        StackNotFoundError,
    )

    from automation.driver import locks

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


def _interruption_lines(exc: Any, args: argparse.Namespace) -> list[str]:
    """What an interrupted verb did (``interrupts.Interrupted``), and the command that continues or repairs it."""
    command_line = getattr(args, "resume", None) or getattr(args, "command_line", None) or "the same command"
    where = f" during {exc.operation} of stack {exc.stack}" if exc.operation else ""
    lines = [f"interrupted by {exc.signal_name}{where}"]
    report = exc.report
    done = ", ".join(f"{n} {op}" for op, n in sorted((report.changes if report else {}).items()) if n) or "none"
    if exc.hard:
        lines.append(f"  the Pulumi CLI was stopped at once; changes recorded before it stopped: {done}")
        if exc.stack:
            lines.append(f"  the stack may still be locked and its state may list pending operations. Recover with:\n"
                         f"    python -m automation unlock --stack {exc.stack}\n"
                         f"    python -m automation refresh --stack {exc.stack}\n"
                         f"  then run again: {command_line}")
        return lines
    if exc.operation:
        lines.append("  the Pulumi CLI cancelled cleanly: in-flight steps finished, state written, lock released; "
                     f"changes made: {done}")
    lines.append(f"  next: {command_line}")
    return lines


def _settings_lines(exc: Any, args: argparse.Namespace) -> list[str]:
    stack = getattr(exc, "stack", None) or getattr(args, "stack", None) or getattr(args, "name", None) or "?"
    return [f"error: stack {stack!r} has {len(exc.problems)} invalid setting(s):",
            *(f"  {problem}" for problem in exc.problems)]


def _line(prefix: str = "", suffix: str = "") -> Callable[[BaseException, argparse.Namespace], list[str]]:
    return lambda exc, _args: [f"error: {prefix}{exc}{suffix}"]


@dataclass(frozen=True)
class Outcome:
    """How one kind of failure ends a run: its exit code (or the attribute carrying it) and its lines."""

    code: int | str
    lines: Callable[[Any, argparse.Namespace], list[str]] = _line()

    def exit_code(self, exc: BaseException) -> int:
        return getattr(exc, self.code) if isinstance(self.code, str) else self.code


#: Exception (``module.Class``, subclasses included) -> outcome. The first class in the raised
#: exception's MRO that is listed here decides.
OUTCOMES: dict[str, Outcome] = {
    # Nothing was run: fix the command line, the stack file, the settings or the pack config.
    "automation.errors.UsageError": Outcome(exit_codes.USAGE, _line(suffix=" (see --help)")),
    "components.settings.problems.SettingsError": Outcome(exit_codes.USAGE, _settings_lines),
    "automation.errors.InvalidStackSettings": Outcome(exit_codes.USAGE, _settings_lines),
    "automation.stacks.StackFileError": Outcome(exit_codes.USAGE),
    "automation.offline.check.PolicyConfigMissing": Outcome(exit_codes.USAGE),
    "automation.offline.check.CheckOutputError": Outcome(exit_codes.USAGE),
    "automation.offline.pack.findings.PolicyConfigError": Outcome(exit_codes.USAGE),
    "automation.driver.workspace.WorkspaceError": Outcome(exit_codes.USAGE),
    "automation.driver.environments.EnvRequestError": Outcome(exit_codes.USAGE),
    "automation.images.pins.VersionsFileError": Outcome(exit_codes.USAGE),
    "automation.outdated.pins.VersionsFileError": Outcome(exit_codes.USAGE),
    # The program refused its input before creating anything (a setting that only the run can judge, such
    # as a reservation's zone against the zones the stack's subnets are in); its message names the key.
    "pulumi.errors.RunError": Outcome(exit_codes.USAGE),
    # It ran and failed.
    "automation.offline.pack.findings.PolicyPackError": Outcome(exit_codes.FAILED, _line("the policy pack failed: ")),
    "automation.driver.postdeploy.KubectlError": Outcome(exit_codes.FAILED),
    # Failed, locked, not found, preflight: the code travels with the error.
    "automation.errors.DriverError": Outcome("code"),
    # Stopped by a signal: 130 or 143, with what was done and what to run next.
    "automation.driver.interrupts.Interrupted": Outcome("exit_code", _interruption_lines),
    "builtins.KeyboardInterrupt": Outcome(exit_codes.INTERRUPTED, lambda _e, _a: ["interrupted by Ctrl-C (SIGINT)"]),
}


def outcome_of(exc: BaseException) -> Outcome | None:
    for cls in type(exc).__mro__:
        outcome = OUTCOMES.get(f"{cls.__module__}.{cls.__qualname__}")
        if outcome is not None:
            return outcome
    return None


def report(exc: BaseException, args: argparse.Namespace | None = None) -> int | None:
    """Print ``exc``'s lines on stderr and return its exit code; ``None`` when the table does not know it."""
    outcome = outcome_of(exc)
    if outcome is None:
        return None
    for line in outcome.lines(exc, args or argparse.Namespace()):
        err.print(line)
    return outcome.exit_code(exc)
