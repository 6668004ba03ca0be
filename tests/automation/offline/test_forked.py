"""The forked child that works beside the check (its file writer): its result, its errors, its end."""

from __future__ import annotations

import errno
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from automation.offline.forked import ForkedTask, ForkedTaskError, can_fork

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the check forks on Linux only")


def _alive(pid: int) -> bool:
    """Running (a zombie, dead but not yet reaped by whoever adopted it, is not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state != "Z"


def _announce(path: Path) -> None:
    """This process's id in ``path``, which appears whole or not at all (a reader polling for the
    file must not read it half written)."""
    part = path.with_suffix(".part")
    part.write_text(str(os.getpid()))
    os.replace(part, path)


def test_the_child_does_the_work_in_its_own_process(tmp_path: Path) -> None:
    parent = os.getpid()
    out = tmp_path / "pid"

    with ForkedTask(lambda: out.write_text(str(os.getpid()))) as task:
        task.wait()

    assert int(out.read_text()) != parent


def test_the_child_yields_the_cpu_by_its_niceness_and_the_parent_keeps_its_own(tmp_path: Path) -> None:
    out = tmp_path / "nice"
    before = os.nice(0)

    with ForkedTask(lambda: out.write_text(str(os.nice(0))), niceness=5) as task:
        task.wait()

    assert int(out.read_text()) == min(before + 5, 19)
    assert os.nice(0) == before


def test_the_childs_exception_is_raised_by_wait_with_its_type_and_fields(tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such" / "dir" / "file.yaml"

    with ForkedTask(lambda: missing.write_text("x"), what="manifest writer") as task:
        with pytest.raises(FileNotFoundError) as raised:
            task.wait()

    assert raised.value.errno == errno.ENOENT
    assert raised.value.filename == str(missing)


def test_an_exception_that_does_not_pickle_arrives_as_its_type_and_text() -> None:
    class Local(Exception):  # a local class cannot be pickled by reference
        pass

    def fail() -> None:
        raise Local("disk on fire")

    with ForkedTask(fail, what="manifest writer") as task:
        with pytest.raises(ForkedTaskError, match="Local: disk on fire"):
            task.wait()


def test_a_child_killed_by_a_signal_is_an_error_naming_the_task(tmp_path: Path) -> None:
    with ForkedTask(lambda: os.kill(os.getpid(), signal.SIGKILL), what="manifest writer") as task:
        with pytest.raises(ForkedTaskError, match=r"the manifest writer stopped before it finished \(signal 9\)"):
            task.wait()


def test_leaving_the_block_without_waiting_kills_and_reaps_the_child(tmp_path: Path) -> None:
    started = tmp_path / "started"

    def forever() -> None:
        _announce(started)
        time.sleep(60)

    with pytest.raises(KeyboardInterrupt):
        with ForkedTask(forever):
            deadline = time.monotonic() + 10
            while not started.exists() and time.monotonic() < deadline:
                time.sleep(0.01)
            raise KeyboardInterrupt  # Ctrl-C in the parent while the child works

    pid = int(started.read_text())
    assert not _alive(pid)  # killed and reaped: not even a zombie is left
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def test_the_child_leaves_the_parents_buffered_output_alone(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:

    sys.stdout.write("written once")  # still in the parent's buffer when it forks
    with ForkedTask(lambda: None) as task:
        task.wait()
    sys.stdout.flush()

    assert capfd.readouterr().out.count("written once") == 1


def test_forking_is_refused_while_another_thread_runs() -> None:
    import threading

    release = threading.Event()
    other = threading.Thread(target=release.wait)
    other.start()
    try:
        assert not can_fork()
    finally:
        release.set()
        other.join()
    # Other tests in this worker may have left threads of their own (a gRPC channel's).
    assert can_fork() == (threading.active_count() == 1)


@pytest.mark.skipif(not os.uname().sysname == "Linux", reason="PR_SET_PDEATHSIG is Linux's")
def test_the_child_dies_with_a_parent_killed_outright(tmp_path: Path) -> None:
    """A parent killed by SIGKILL (no cleanup runs) still leaves no writer behind."""
    import subprocess

    from automation.offline.plan import ROOT

    started = tmp_path / "child"
    code = (
        "import os, signal, time, sys\n"
        "from pathlib import Path\n"
        "from automation.offline.forked import ForkedTask\n"
        f"out = Path({str(started)!r})\n"
        "def work():\n"
        "    out.with_suffix('.part').write_text(str(os.getpid()))\n"
        "    os.replace(out.with_suffix('.part'), out)  # seen whole or not at all\n"
        "    time.sleep(60)\n"
        "task = ForkedTask(work)\n"
        "while not out.exists():\n"
        "    time.sleep(0.01)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, timeout=60)
    assert done.returncode == -signal.SIGKILL
    pid = int(started.read_text())
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid)


def test_wait_returns_what_the_work_returned() -> None:
    with ForkedTask(lambda: {"pid": os.getpid(), "names": ["a.yaml"]}) as task:
        answer = task.wait()
    assert answer["names"] == ["a.yaml"] and answer["pid"] != os.getpid()


def test_a_grace_period_lets_a_child_that_is_ending_finish(tmp_path: Path) -> None:
    done = tmp_path / "done"

    def ending() -> None:
        time.sleep(0.3)
        done.write_text("whole")

    task = ForkedTask(ending)
    task.cancel(grace=10)
    assert done.read_text() == "whole"
    started = tmp_path / "started"

    def forever() -> None:
        _announce(started)
        time.sleep(60)

    task = ForkedTask(forever)
    deadline = time.monotonic() + 10
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    begun = time.monotonic()
    task.cancel(grace=0.2)  # killed once the grace is over, and reaped
    assert time.monotonic() - begun < 5 and not _alive(int(started.read_text()))
