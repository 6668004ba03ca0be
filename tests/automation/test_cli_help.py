"""The command line as a user meets it: a real process, help text and usage errors."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from automation import exit_codes
from automation.cli import main
from automation.offline.plan import ROOT


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "automation", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


def listed(help_text: str, verbs: tuple[str, ...]) -> list[str]:
    return [verb for verb in verbs if not re.search(rf"^\s+{verb}\s", help_text, re.MULTILINE)]


def test_help_shows_every_verb():
    top = run("--help")
    env = run("env", "--help")
    assert top.returncode == env.returncode == exit_codes.OK
    assert listed(top.stdout, ("check", "preview", "up", "destroy", "refresh", "env", "test", "verify", "unlock", "images")) == []
    assert listed(env.stdout, ("create", "update", "extend", "list", "destroy", "reap")) == []



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


BAD_FLAGS = [
    (["env", "create", "x", "--from", "dev", "--ttl", "9999999999d"], "--ttl"),
    (["env", "create", "x", "--from", "dev", "--ttl", "soon"], "--ttl"),
    (["env", "extend", "x", "--ttl", "8d"], "--ttl"),
    (["env", "create", "x", "--from", "dev", "--via", "operator", "--out", "/"], "--out"),
    (["env", "create", "x", "--from", "dev", "--via", "operator", "--out", "/etc/passwd/stack.yaml"], "--out"),
    (["check", "--stack", "dev", "--out", "/etc/passwd"], "--out"),
    (["test", "--from", "dev", "--gpu-nodes", "many"], "--gpu-nodes"),
    (["test", "--from", "dev", "--timeout", "-5"], "--timeout"),
    (["env", "reap", "--busy-retries", "99"], "--busy-retries"),
    (["env", "reap", "--backoff", "never"], "--backoff"),
    (["env", "list", "--output", "xml"], "--output"),
]


@pytest.mark.parametrize("argv, flag", BAD_FLAGS, ids=[" ".join(a) for a, _ in BAD_FLAGS])
def test_every_bad_flag_value_is_one_line_naming_the_flag(argv, flag, capsys):
    assert main(argv) == exit_codes.USAGE
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert f"argument {flag}" in err and "Traceback" not in err


def test_bad_cancel_grace_is_a_usage_error(monkeypatch, capsys):
    monkeypatch.setenv("LLM_PLATFORM_CANCEL_GRACE", "forever")
    assert main(["env", "list"]) == exit_codes.USAGE
    assert "LLM_PLATFORM_CANCEL_GRACE='forever'" in capsys.readouterr().err


def test_a_bad_flag_in_a_real_process_exits_2_with_one_line():
    done = run("env", "create", "x", "--from", "dev", "--ttl", "9999999999d")
    assert done.returncode == exit_codes.USAGE
    assert done.stderr.strip().count("\n") == 0 and "argument --ttl" in done.stderr
