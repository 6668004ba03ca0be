"""wait_for_exit: Popen.wait's answers (exit code, TimeoutExpired, reaped), woken by the exit."""

from __future__ import annotations

import subprocess
import sys

import pytest

from automation.offline.exits import wait_for_exit


def _child(code: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code])


def test_it_returns_the_exit_code_of_a_process_that_ends_and_reaps_it():
    process = _child("import time, sys; time.sleep(0.2); sys.exit(7)")
    assert wait_for_exit(process, 30) == 7
    assert process.returncode == 7
    assert wait_for_exit(process, 30) == 7  # already reaped: the same answer


def test_a_process_still_running_after_the_timeout_raises_timeout_expired_and_is_left_running():
    process = _child("import time; time.sleep(60)")
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            wait_for_exit(process, 0.2)
        assert process.poll() is None
    finally:
        process.kill()
    assert wait_for_exit(process, 30) == -9


def test_a_process_killed_by_a_signal_gives_the_negative_signal_number():
    process = _child("import os, signal; os.kill(os.getpid(), signal.SIGTERM)")
    assert wait_for_exit(process, 30) == -15


def test_without_pidfds_it_falls_back_to_popen_wait(monkeypatch):
    from automation.offline import exits

    monkeypatch.delattr(exits.os, "pidfd_open", raising=False)
    process = _child("import sys; sys.exit(3)")
    assert wait_for_exit(process, 30) == 3
