"""The CLI's one error path (``automation.errors.OUTCOMES``) and its consoles (``automation.console``)."""

from __future__ import annotations

import argparse
import importlib
import signal

import pytest

from automation import errors, exit_codes
from automation.console import stdout
from automation.driver.interrupts import Interrupted
from automation.offline.pack.runner import PackReport, Violation
from automation.offline.report import PoolSummary, Summary, render, render_policies


@pytest.mark.parametrize("name", sorted(errors.OUTCOMES))
def test_every_outcome_names_a_real_exception(name: str):
    module, _, cls = name.rpartition(".")
    exception = getattr(importlib.import_module(module), cls)
    assert issubclass(exception, BaseException)
    assert errors.outcome_of(exception.__new__(exception)) is errors.OUTCOMES[name]


def test_outcomes_a_script_must_tell_apart_have_distinct_codes():
    codes = {exit_codes.OK, exit_codes.FAILED, exit_codes.USAGE, exit_codes.LOCKED, exit_codes.NOT_FOUND,
             exit_codes.PREFLIGHT, exit_codes.INTERRUPTED, exit_codes.TERMINATED}
    assert len(codes) == 8
    assert (exit_codes.INTERRUPTED, exit_codes.TERMINATED) == (130, 143)


@pytest.mark.parametrize(("exc", "code", "first_line"), [
    (errors.DriverError("stack 'dev' is locked", exit_codes.LOCKED), exit_codes.LOCKED, "error: stack 'dev' is locked"),
    (errors.DriverError("no such stack", exit_codes.NOT_FOUND), exit_codes.NOT_FOUND, "error: no such stack"),
    (errors.DriverError("pulumi failed"), exit_codes.FAILED, "error: pulumi failed"),
    (errors.UsageError("python -m automation: bad flag"), exit_codes.USAGE,
     "error: python -m automation: bad flag (see --help)"),
    (Interrupted(signal.SIGTERM), exit_codes.TERMINATED, "interrupted by SIGTERM"),
    (Interrupted(signal.SIGINT), exit_codes.INTERRUPTED, "interrupted by Ctrl-C (SIGINT)"),
    (KeyboardInterrupt(), exit_codes.INTERRUPTED, "interrupted by Ctrl-C (SIGINT)"),
])
def test_a_known_error_ends_with_its_code_and_lines_on_stderr(capsys, exc, code, first_line):
    args = argparse.Namespace(command_line="python -m automation up --stack dev")
    assert errors.report(exc, args) == code
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines()[0] == first_line


def test_an_interrupted_verb_says_what_to_run_next(capsys):
    errors.report(Interrupted(signal.SIGTERM, operation="up", stack="dev"),
                  argparse.Namespace(command_line="python -m automation up --stack dev"))
    err = capsys.readouterr().err
    assert "interrupted by SIGTERM during up of stack dev" in err
    assert "next: python -m automation up --stack dev" in err


def test_an_unknown_error_is_not_swallowed():
    assert errors.report(RuntimeError("a bug")) is None
    assert errors.report(SystemExit(0)) is None  # --help


def test_a_held_lock_is_locked_not_failed():
    from pulumi.automation.errors import ConcurrentUpdateError

    with pytest.raises(errors.DriverError) as raised, errors.translate_errors("dev", "file:///tmp/state"):
        raise ConcurrentUpdateError(
            type("Result", (), {"stdout": "", "stderr": "error: the stack is currently locked by 1 lock(s)",
                                "code": 255, "__str__": lambda self: "locked"})()
        )
    assert raised.value.code == exit_codes.LOCKED


MARKUP = "[bold]gpu[/bold] [/x] llm-platform:serving.tiers[interactive].quota"


def test_reports_print_user_text_verbatim(capsys):
    """Key paths and values that look like terminal markup reach the terminal as typed."""
    render_policies(PackReport(pack="llm-platform-gpu@0.1.0", config="/tmp/[cfg].json", violations=[
        Violation("gpu-quota", "mandatory", MARKUP, "fix [interactive]", "urn:[x]"),
    ]), stdout())
    summary = Summary(project="[bold]p", stack="dev", resource_count=1, resources_by_type={"[t]": 1}, pools=[
        PoolSummary("[red]pool", "managed node group", ["g5.xlarge"], "ON_DEMAND", 0, 0, 1, ["[k]=v:NoSchedule"]),
    ])
    render(summary, stdout())
    out = capsys.readouterr().out
    for text in (MARKUP, "fix [interactive]", "urn:[x]", "/tmp/[cfg].json", "[bold]p stack dev", "[t]", "[red]pool",
                 "[k]=v:NoSchedule"):
        assert text in out, text
