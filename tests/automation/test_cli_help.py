"""The command line as a user meets it: a real process, help text and usage errors."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from automation import exit_codes
from automation.cli import main
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



def test_reap_help_says_it_suits_cron(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["env", "reap", "--help"])
    assert exited.value.code == exit_codes.OK
    help_text = capsys.readouterr().out
    assert "--dry-run" in help_text and "cron" in help_text


@pytest.mark.parametrize(
    "argv", [["env"], ["up"], ["env", "create", "x"], ["test"], ["env", "list", "--output", "xml"]]
)
def test_usage_errors_exit_2(argv, capsys):
    assert main(argv) == exit_codes.USAGE
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: "), err
    assert "Traceback" not in err
