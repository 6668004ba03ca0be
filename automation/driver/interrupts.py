"""Ctrl-C and SIGTERM while the Pulumi CLI runs: the CLI hears exactly one graceful cancel.

The Automation API SDK starts the CLI in the driver's process group, so a terminal Ctrl-C reaches
both, and a SIGTERM from a CI runner reaches only the driver, which dies and takes the CLI's pipes
with it. Here every CLI process runs in its own process group (:class:`GroupedPulumiCommand`) and
:class:`SignalGuard` owns SIGINT/SIGTERM for the length of a verb:

- first signal while a CLI process runs: one SIGINT to that process group, the CLI's own Ctrl-C
  (``pkg/backend/cancellation_scope.go``: cancel, let in-flight steps finish, write the checkpoint,
  release the lock); the driver waits up to the grace period for it to exit;
- grace exceeded, or a second signal: a second SIGINT (the CLI's "terminate immediately"), then
  SIGKILL if it still runs a moment later; the driver stops at once and says how to recover;

The CLI starts each plugin in a process group of its own (``cmdutil.RegisterProcessGroup``), so a
signal to the CLI's group reaches the CLI alone; it then stops its plugins itself.

- a signal while no CLI process runs raises :class:`Interrupted` right away, like Python's own
  KeyboardInterrupt, so ``finally`` clean-ups still run.

Verbs exit 130 (SIGINT) or 143 (SIGTERM) with what was done and what to run next.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from pulumi.automation import CommandResult, OnOutput, PulumiCommand
from pulumi.automation.errors import create_command_error

from automation import exit_codes

#: Environment variable: how long a graceful cancel may take before the CLI is stopped hard.
CANCEL_GRACE_ENV = "LLM_PLATFORM_CANCEL_GRACE"
#: Default grace: an in-flight EKS node group or cluster step can take minutes to finish.
DEFAULT_CANCEL_GRACE = 600.0
#: After the hard stop, how long the CLI gets before SIGKILL.
HARD_STOP_SECONDS = 3.0
HANDLED = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """The verb was interrupted by SIGINT or SIGTERM; ``hard`` when the CLI was stopped at once."""

    def __init__(self, signum: int, hard: bool = False, operation: str = "", stack: str = "", report=None):
        super().__init__(signal.Signals(signum).name)
        self.signum, self.hard, self.operation, self.stack = signum, hard, operation, stack
        #: The interrupted operation's report (changes made before it stopped), when there was one.
        self.report = report

    @property
    def signal_name(self) -> str:
        return "Ctrl-C (SIGINT)" if self.signum == signal.SIGINT else signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        return exit_codes.interrupted(self.signum)


def cancel_grace(environ: Mapping[str, str] = os.environ) -> float:
    text = environ.get(CANCEL_GRACE_ENV, "").strip()
    if not text:
        return DEFAULT_CANCEL_GRACE
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= 24 * 3600:
        raise ValueError(f"{CANCEL_GRACE_ENV}={text!r}: use a number of seconds between 1 and 86400")
    return value


class SignalGuard:
    """Owns SIGINT/SIGTERM while a verb runs; see the module docstring for the protocol."""

    def __init__(self, grace: float = DEFAULT_CANCEL_GRACE, notify=None):
        self.grace = grace
        self.notify = notify or (lambda line: None)
        self.signals: list[int] = []
        self.hard = False
        self._children: list[subprocess.Popen] = []
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self._previous: dict[int, object] = {}

    # --- installation ---------------------------------------------------------------------------

    def install(self) -> None:
        for signum in HANDLED:
            self._previous[signum] = signal.signal(signum, self._handle)

    def uninstall(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)  # type: ignore[arg-type]
        self._previous.clear()

    # --- children -------------------------------------------------------------------------------

    def started(self, child: subprocess.Popen) -> None:
        with self._lock:
            self._children.append(child)

    def finished(self, child: subprocess.Popen) -> None:
        with self._lock:
            if child in self._children:
                self._children.remove(child)

    @property
    def interrupted(self) -> bool:
        return bool(self.signals)

    @property
    def first_signal(self) -> int:
        return self.signals[0]

    # --- the handler ----------------------------------------------------------------------------

    def _handle(self, signum: int, frame) -> None:  # noqa: ARG002 - signal handler signature
        with self._lock:
            self.signals.append(signum)
            children = list(self._children)
            first = len(self.signals) == 1
        name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
        if not children:
            raise Interrupted(self.signals[0], hard=not first)
        if first:
            self.notify(f"{name} received: asking the Pulumi CLI to cancel (it finishes in-flight steps, "
                        f"writes state and releases the lock; waiting up to {self.grace:.0f}s). "
                        f"{name} again stops it at once.")
            self._forward(signal.SIGINT, children)
            self._timer = threading.Timer(self.grace, self._grace_expired)
            self._timer.daemon = True
            self._timer.start()
        else:
            self.notify(f"{name} received again: stopping the Pulumi CLI at once.")
            self._hard_stop(children)

    def _grace_expired(self) -> None:
        with self._lock:
            children = list(self._children)
        if children:
            self.notify(f"the Pulumi CLI did not finish cancelling within {self.grace:.0f}s: stopping it at once.")
            self._hard_stop(children)

    def _hard_stop(self, children: list[subprocess.Popen]) -> None:
        self.hard = True
        if self._timer is not None:
            self._timer.cancel()
        self._forward(signal.SIGINT, children)  # the CLI's second Ctrl-C: terminate
        killer = threading.Timer(HARD_STOP_SECONDS, self._forward, args=(signal.SIGKILL, children))
        killer.daemon = True
        killer.start()

    @staticmethod
    def _forward(signum: int, children: list[subprocess.Popen]) -> None:
        for child in children:
            if child.poll() is None:
                try:
                    os.killpg(child.pid, signum)
                except ProcessLookupError:
                    pass


_active: SignalGuard | None = None


def active() -> SignalGuard | None:
    return _active


@contextmanager
def guard_signals(notify=None, grace: float | None = None) -> Iterator[SignalGuard]:
    """Install a :class:`SignalGuard` for the block (main thread only; elsewhere it is inert)."""
    global _active
    guard = SignalGuard(grace=cancel_grace() if grace is None else grace, notify=notify)
    main = threading.current_thread() is threading.main_thread()
    if main:
        guard.install()
    previous, _active = _active, guard
    try:
        yield guard
    finally:
        _active = previous
        if main:
            guard.uninstall()


def mark() -> int:
    """How many signals the verb has received so far (compare after a run with ``since``)."""
    return len(_active.signals) if _active is not None else 0


def raise_if_interrupted(operation: str = "", stack: str = "", report=None, since: int = 0) -> None:
    """After a CLI run: turn a signal received during it (after ``since``) into :class:`Interrupted`."""
    guard = _active
    if guard is not None and len(guard.signals) > since:
        raise Interrupted(guard.first_signal, hard=guard.hard, operation=operation, stack=stack, report=report)


class GroupedPulumiCommand(PulumiCommand):
    """``PulumiCommand`` whose runs each get their own process group, registered with the guard.

    ``run`` mirrors the SDK's (same environment, output callbacks and error classification); the
    one difference is ``process_group=0``, so a terminal's Ctrl-C reaches only the driver, which
    forwards it exactly once.
    """

    def run(
        self,
        args: list[str],
        cwd: str,
        additional_env: Mapping[str, str],
        on_output: OnOutput | None = None,
        on_error: OnOutput | None = None,
    ) -> CommandResult:
        if "--non-interactive" not in args[: args.index("--") if "--" in args else len(args)]:
            args.insert(0, "--non-interactive")
        env = {**os.environ, **additional_env, "PULUMI_AUTOMATION_API": "true"}
        if os.path.isabs(self.command):
            # As the SDK's own PulumiCommand runs it: the plugins bundled beside the binary come first.
            env["PATH"] = os.pathsep.join([os.path.dirname(self.command), env.get("PATH", "")])
        chunks: dict[str, list[str]] = {"stdout": [], "stderr": []}

        def consume(stream, callback, sink: list[str]) -> None:
            for line in iter(stream.readline, ""):
                stripped = line.rstrip()
                if callback:
                    callback(stripped)
                sink.append(stripped)
            stream.close()

        guard = _active
        signals_before = len(guard.signals) if guard is not None else 0
        with subprocess.Popen(
            [self.command, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
            cwd=cwd, env=env, encoding="utf-8", process_group=0,
        ) as process:
            if guard is not None:
                guard.started(process)
            try:
                readers = [
                    threading.Thread(target=consume, args=(process.stdout, on_output, chunks["stdout"]), daemon=True),
                    threading.Thread(target=consume, args=(process.stderr, on_error, chunks["stderr"]), daemon=True),
                ]
                for reader in readers:
                    reader.start()
                for reader in readers:
                    while reader.is_alive():  # short joins keep the main thread responsive to signals
                        reader.join(0.2)
                while process.poll() is None:
                    time.sleep(0.05)
            except BaseException:
                if process.poll() is None:  # interrupted before the guard knew of it: cancel it gracefully
                    SignalGuard._forward(signal.SIGINT, [process])
                raise
            finally:
                if guard is not None:
                    guard.finished(process)
        if guard is not None and len(guard.signals) > signals_before:
            # Stopped on request, whatever the exit status: the caller reports it as an interruption.
            raise Interrupted(guard.signals[signals_before], hard=guard.hard)
        result = CommandResult(stdout="\n".join(chunks["stdout"]), stderr="\n".join(chunks["stderr"]),
                               code=process.returncode)
        if process.returncode != 0:
            raise create_command_error(result)
        return result
