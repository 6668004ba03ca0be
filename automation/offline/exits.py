"""Waiting for a helper process of the check to end, woken by the exit itself.

Python 3.11's ``Popen.wait(timeout=...)`` polls: it naps between checks, each nap twice the last, up
to 50 ms. The check waits that way for its pack feeder and the feeder for the pack, each a few tens
of milliseconds after the answer, so the last nap overshot the exit by about as much again (0.03 s
of a 500-model check's tail). A pidfd (Linux 5.3) becomes readable when its process exits; where
there is none, ``Popen.wait`` is used as it is.
"""

from __future__ import annotations

import os
import select
import subprocess


def wait_for_exit(process: subprocess.Popen, timeout: float) -> int:
    """``process.wait(timeout)``: its exit code, or ``subprocess.TimeoutExpired`` after ``timeout``
    seconds, but returning as soon as the process has exited."""
    if process.returncode is None and hasattr(os, "pidfd_open"):
        try:
            fd = os.pidfd_open(process.pid)
        except OSError:
            pass  # gone and reaped already, or no pidfds here: Popen's own wait below
        else:
            try:
                select.select([fd], [], [], timeout)
            finally:
                os.close(fd)
            return process.wait(timeout=0)  # reaps it; still running after ``timeout``: TimeoutExpired
    return process.wait(timeout=timeout)
