"""Work done by a forked copy of the check's process while the check goes on: the second core.

The check's file writer (:mod:`automation.offline.files`) is such a copy: forked before the
program runs, it renders the files as resources are registered, on the core the policy pack leaves
idle, and writes them at the end.

The child never returns into the caller's code: it runs the work, hands back its result or its
exception, pickled, on a pipe, and leaves with ``os._exit`` (no atexit handlers, no buffered output
of the parent written twice). It dies with the parent (PR_SET_PDEATHSIG, Linux) and on Ctrl-C,
and the parent kills it on every other way out (after a grace period, if it asks for one), so an
interrupted check leaves no writer behind.
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

_PR_SET_PDEATHSIG = 1


class ForkedTaskError(RuntimeError):
    """The child ended without finishing its work or saying why (killed by a signal)."""


def can_fork() -> bool:
    """True where a fork is safe: Linux (macOS's system libraries do not all survive a fork, which
    is why Python starts its own workers there by spawning), and only this thread running (a fork
    copies a lock another thread holds, locked, into a child that never releases it)."""
    return sys.platform.startswith("linux") and threading.active_count() == 1


class ForkedTask:
    """``work()`` running in a forked child; ``wait()`` returns when it is done or raises its error.

    Use as a context manager: leaving the block without ``wait()`` (an error or a signal in the
    parent) kills the child and reaps it. ``niceness`` is added to the child's (only the child's):
    how much less of the machine it asks for than the parent.
    """

    def __init__(self, work: Callable[[], Any], *, what: str = "forked task", niceness: int = 0) -> None:
        self.what = what
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child
            os.close(read)
            _child(work, write, niceness)  # never returns
        os.close(write)
        self._pid: int | None = pid
        self._answer = read

    @property
    def pid(self) -> int | None:
        """The child's process id until it is reaped."""
        return self._pid

    def __enter__(self) -> ForkedTask:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cancel()

    def wait(self) -> Any:
        """Block until the child is done: what ``work()`` returned (pickled across); its exception
        is raised here."""
        if self._pid is None:
            return None
        chunks = []
        while chunk := os.read(self._answer, 1 << 16):
            chunks.append(chunk)
        _, status = os.waitpid(self._pid, 0)
        self._pid = None
        os.close(self._answer)
        if chunks:
            done, value = _unpickled(b"".join(chunks), self.what)
            if not done:
                raise value
            return value
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            how = f"signal {-code}" if code < 0 else f"exit code {code}"
            raise ForkedTaskError(f"the {self.what} stopped before it finished ({how})")

    def cancel(self, grace: float = 0.0) -> None:
        """Kill the child if it still runs after ``grace`` seconds (a child that is ending by itself
        ends whole), and reap it."""
        if self._pid is None:
            return
        pid, self._pid = self._pid, None
        deadline = time.monotonic() + grace
        while os.waitpid(pid, os.WNOHANG)[0] == 0:
            if time.monotonic() >= deadline:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                os.waitpid(pid, 0)
                break
            time.sleep(0.005)
        os.close(self._answer)


def _child(work: Callable[[], Any], answer: int, niceness: int) -> None:
    """Run ``work`` and write on ``answer`` ``(True, its result)`` (nothing for ``None``) or ``(False,
    its exception)``."""
    code, payload = 1, b""
    try:
        if niceness:
            try:
                os.nice(niceness)
            except OSError:
                pass  # best effort: the same work at the parent's priority
        # The parent's handlers (the CLI's signal guard) are not this process's business.
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        _die_with_parent()
        result = work()
        payload = b"" if result is None else pickle.dumps((True, result))
        code = 0
    except BaseException as error:  # noqa: BLE001 - handed to the parent, which raises it
        try:
            payload = pickle.dumps((False, error))
        except Exception:  # noqa: BLE001 - an exception that does not pickle: its type and text
            payload = pickle.dumps((False, ForkedTaskError(f"{type(error).__name__}: {error}")))
    finally:
        try:
            view = memoryview(payload)
            while view:
                view = view[os.write(answer, view):]
        except OSError:
            pass
        os._exit(code)


def _die_with_parent() -> None:
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    parent = os.getppid()
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL))
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


def _unpickled(payload: bytes, what: str) -> tuple[bool, Any]:
    try:
        done, value = pickle.loads(payload)
    except Exception as failure:  # noqa: BLE001
        return False, ForkedTaskError(f"the {what} ended and its answer could not be read ({failure})")
    if not done and not isinstance(value, BaseException):
        return False, ForkedTaskError(f"the {what} failed: {value!r}")
    return bool(done), value
