"""Real signals to a real driver process running the CLI stand-in: graceful cancel, exit 130/143,
no lock left behind, exactly one Ctrl-C reaching the CLI, a second Ctrl-C stopping at once."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from automation import exit_codes
from automation.offline.plan import ROOT
from tests.automation.conftest import Rig

#: The driver as an operator runs it, with the project root pointed at the rig's copy.
DRIVER = (
    "import sys; from pathlib import Path; from automation.driver import workspace; "
    "workspace.PROJECT_ROOT = Path(sys.argv[1]); from automation.cli import main; sys.exit(main(sys.argv[2:]))"
)
STEP_SECONDS = "0.4"


def lock_files(rig: Rig, stack: str = "dev") -> list[Path]:
    folder = rig.state / ".pulumi" / "locks" / "organization" / "llm-platform" / stack
    return sorted(folder.glob("*.json")) if folder.exists() else []


def resources(rig: Rig, stack: str = "dev") -> list[str]:
    return json.loads((rig.state / ".pulumi" / "stacks" / "llm-platform" / f"{stack}.json").read_text())["resources"]


def signals_seen(rig: Rig) -> list[str]:
    return [e["signal"] for e in rig.calls.entries("pulumi-signal")]


def start(rig: Rig, *argv: str, session: bool = False, **env: str) -> subprocess.Popen:
    environ = {**os.environ, "STANDIN_STEP_SECONDS": STEP_SECONDS, "PYTHONPATH": str(ROOT), **env}
    return subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(rig.project), *argv], cwd=ROOT, env=environ, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=session,
    )


def wait_until_locked(rig: Rig, driver: subprocess.Popen, stack: str = "dev", timeout: float = 60) -> None:
    """The operation is under way once the CLI holds the stack's lock; then let one step start."""
    deadline = time.monotonic() + timeout
    while not lock_files(rig, stack):
        assert driver.poll() is None, driver.communicate()
        assert time.monotonic() < deadline, "the CLI never locked the stack"
        time.sleep(0.05)
    time.sleep(0.6)


def finish(driver: subprocess.Popen, timeout: float = 60) -> tuple[int, str, str]:
    out, err = driver.communicate(timeout=timeout)
    return driver.returncode, out, err


def deploy(rig: Rig) -> None:
    assert rig.run("up", "--stack", "dev").code == exit_codes.OK


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("verb", ["up", "destroy", "refresh"])
def test_signal_to_the_driver_cancels_the_cli_once_and_leaves_no_lock(rig: Rig, verb: str, signum: int, code: int):
    if verb != "up":
        deploy(rig)
    driver = start(rig, verb, "--stack", "dev")
    wait_until_locked(rig, driver)
    os.kill(driver.pid, signum)  # the driver alone, as a CI runner or `kill` sends it
    status, out, err = finish(driver)

    assert status == code == exit_codes.interrupted(signum), err
    assert lock_files(rig) == [], "the CLI released the lock before exiting"
    assert signals_seen(rig) == ["SIGINT"], "the CLI heard exactly one Ctrl-C, its graceful cancel"
    assert f"during {verb} of stack dev" in err and "cancelled cleanly" in err
    assert f"next: python -m automation {verb} --stack dev" in err
    assert "Traceback" not in err
    if verb == "up":
        assert 0 < len(resources(rig)) < 7, "the steps done before the cancel are in the checkpoint"
    if verb == "destroy":
        assert 0 < len(resources(rig)) < 7, "a cancelled destroy leaves the rest for the next destroy"
    again = rig.run(verb, "--stack", "dev")
    assert again.code == exit_codes.OK, again.err


def test_terminal_ctrl_c_reaches_the_cli_once(rig: Rig):
    """A terminal sends SIGINT to the whole foreground process group; the CLI runs in its own group,
    so only the driver's forwarded Ctrl-C reaches it (two would be the CLI's hard stop)."""
    driver = start(rig, "up", "--stack", "dev", session=True)
    wait_until_locked(rig, driver)
    os.killpg(driver.pid, signal.SIGINT)
    status, out, err = finish(driver)

    assert status == exit_codes.INTERRUPTED, err
    assert signals_seen(rig) == ["SIGINT"]
    assert lock_files(rig) == []


def test_second_ctrl_c_stops_at_once_and_says_how_to_recover(rig: Rig):
    driver = start(rig, "up", "--stack", "dev", STANDIN_STEP_SECONDS="5")
    wait_until_locked(rig, driver)
    os.kill(driver.pid, signal.SIGINT)
    time.sleep(0.5)
    stopped = time.monotonic()
    os.kill(driver.pid, signal.SIGINT)
    status, out, err = finish(driver)

    assert status == exit_codes.INTERRUPTED
    assert time.monotonic() - stopped < 4.5, "the second Ctrl-C does not wait for the step in flight"
    assert signals_seen(rig) == ["SIGINT", "SIGINT"]
    assert "stopped at once" in err
    assert "python -m automation unlock --stack dev" in err and "python -m automation refresh --stack dev" in err
    (lock,) = lock_files(rig)  # a hard stop leaves the lock, as the real CLI's terminate does

    locked = rig.run("up", "--stack", "dev")
    assert locked.code == exit_codes.LOCKED
    assert "its process is gone (stale)" in locked.err and "unlock --stack dev" in locked.err
    cleared = rig.run("unlock", "--stack", "dev")
    assert cleared.code == exit_codes.OK, cleared.err
    assert not lock.exists()
    assert rig.run("up", "--stack", "dev").code == exit_codes.OK


def test_grace_period_bounds_the_wait_for_a_graceful_cancel(rig: Rig):
    driver = start(rig, "up", "--stack", "dev", STANDIN_STEP_SECONDS="20", LLM_PLATFORM_CANCEL_GRACE="1")
    wait_until_locked(rig, driver)
    sent = time.monotonic()
    os.kill(driver.pid, signal.SIGTERM)
    status, out, err = finish(driver)

    assert status == exit_codes.TERMINATED
    assert time.monotonic() - sent < 10
    assert "did not finish cancelling within 1s" in err and "stopped at once" in err


def write_lock(rig: Rig, pid: int, host: str, stack: str = "dev") -> Path:
    path = rig.state / ".pulumi" / "locks" / "organization" / "llm-platform" / stack / "abc123.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"pid": pid, "username": "bob", "hostname": host,
                                "timestamp": "2026-11-23T08:00:00+00:00"}))
    return path


def test_unlock_refuses_a_lock_whose_holder_still_runs_here(rig: Rig):
    deploy(rig)
    lock = write_lock(rig, os.getpid(), socket.gethostname())
    refused = rig.run("unlock", "--stack", "dev")
    assert refused.code == exit_codes.LOCKED
    assert "still running" in refused.err and f"kill -INT {os.getpid()}" in refused.err
    assert lock.exists()
    busy = rig.run("destroy", "--stack", "dev")
    assert busy.code == exit_codes.LOCKED and "wait for that run to finish" in busy.err


def test_unlock_of_a_lock_from_another_host_needs_force(rig: Rig):
    deploy(rig)
    lock = write_lock(rig, 4242, "ci-runner-7")
    refused = rig.run("unlock", "--stack", "dev")
    assert refused.code == exit_codes.LOCKED and "pass --force" in refused.err and lock.exists()
    forced = rig.run("unlock", "--stack", "dev", "--force")
    assert forced.code == exit_codes.OK and not lock.exists()


def test_unlock_of_a_missing_stack_is_not_found(rig: Rig):
    result = rig.run("unlock", "--stack", "nope")
    assert result.code == exit_codes.NOT_FOUND
    assert "does not exist" in result.err
