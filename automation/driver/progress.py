"""Progress of a long engine operation: live on a terminal, plain heartbeat lines in CI.

An EKS ``up`` or ``destroy`` runs 15-30 minutes with single steps (the cluster, a node group) that
print nothing for ten minutes; a person wants to see it move, and a CI runner that kills jobs
after some minutes of silence needs a line now and then. Progress is counted from the engine
events the Automation API streams: a step starts with ``resourcePreEvent`` and is done with
``resOutputsEvent``.

- Terminal (stdout or stderr is a TTY and ``CI`` is unset): a status line under the CLI's
  output: resources done of total, the step in flight, elapsed time.
- Otherwise: the CLI's lines as they come, plus ``progress: ...`` every
  ``LLM_PLATFORM_PROGRESS_SECONDS`` (default 60) while the operation runs.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

HEARTBEAT_ENV = "LLM_PLATFORM_PROGRESS_SECONDS"
DEFAULT_HEARTBEAT = 60.0
_VERBS = {"create": "creating", "update": "updating", "delete": "deleting", "replace": "replacing",
          "same": "checking", "refresh": "refreshing", "read": "reading", "create-replacement": "replacing",
          "delete-replaced": "deleting"}


def interactive(stream: TextIO, environ=os.environ) -> bool:
    return bool(getattr(stream, "isatty", lambda: False)()) and not environ.get("CI")


def heartbeat_seconds(environ=os.environ) -> float:
    try:
        value = float(environ.get(HEARTBEAT_ENV, "") or DEFAULT_HEARTBEAT)
    except ValueError:
        value = DEFAULT_HEARTBEAT
    return value if value > 0 else DEFAULT_HEARTBEAT


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


class OperationProgress:
    """Counts steps from engine events and shows them; ``line`` passes the CLI's output through."""

    def __init__(self, operation: str, stack: str, total: int | None, write: Callable[[str], None],
                 stream: TextIO, *, live: bool | None = None, heartbeat: float | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.operation, self.stack, self.total = operation, stack, total
        self.write, self.stream, self.clock = write, stream, clock
        self.live = interactive(stream) if live is None else live
        self.heartbeat = heartbeat_seconds() if heartbeat is None else heartbeat
        self.done = 0
        self.current = ""
        self.started = clock()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._live: Any = None

    def status(self) -> str:
        of = f"/{self.total}" if self.total else ""
        current = f", {self.current}" if self.current else ""
        return (f"{self.operation} {self.stack}: {self.done}{of} resources done{current}, "
                f"{_clock(self.clock() - self.started)} elapsed")

    def start(self) -> None:
        if self.live:
            from rich.live import Live
            from rich.text import Text

            from automation import console

            self._text = Text
            self._live = Live(Text(self.status()), console=console.on(self.stream),
                              refresh_per_second=4, transient=True, get_renderable=lambda: Text(self.status()))
            self._live.start()
        else:
            self._thread = threading.Thread(target=self._beat, daemon=True)
            self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat):
            self.write(f"progress: {self.status()}")

    def line(self, text: str) -> None:
        if self._live is not None:
            self._live.console.print(self._text(text))
        else:
            self.write(text)

    def event(self, event: Any) -> None:
        with self._lock:
            pre = getattr(event, "resource_pre_event", None)
            outputs = getattr(event, "res_outputs_event", None)
            if pre is not None and not pre.planning:
                meta = pre.metadata
                self.current = f"{_VERBS.get(meta.op, meta.op)} {meta.type} {meta.urn.rsplit('::', 1)[-1]}"
            if outputs is not None and not outputs.planning:
                self.done += 1

    def stop(self) -> None:
        self._stop.set()
        if self._live is not None:
            self._live.stop()
            self._live = None
        if self._thread is not None:
            self._thread.join(1)
