"""The command line as a user meets it: a real process, help text and usage errors."""

from __future__ import annotations

import re
import subprocess
import sys

from automation import exit_codes
from automation.plan import ROOT


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "automation", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


def listed(help_text: str, verbs: tuple[str, ...]) -> list[str]:
    return [verb for verb in verbs if not re.search(rf"^\s+{verb}\s", help_text, re.MULTILINE)]


def test_help_shows_every_verb():
    top = run("--help")
    env = run("env", "--help")
    assert top.returncode == env.returncode == exit_codes.OK
    assert listed(top.stdout, ("check", "preview", "up", "destroy", "refresh", "env", "test")) == []
    assert listed(env.stdout, ("create", "list", "destroy", "reap")) == []
    reap = run("env", "reap", "--help")
    assert "--dry-run" in reap.stdout and "cron" in reap.stdout


def test_usage_errors_exit_2():
    assert run("env").returncode == exit_codes.USAGE
    assert run("up").returncode == exit_codes.USAGE
    assert run("env", "create", "x").returncode == exit_codes.USAGE
