"""The process that feeds the policy pack while the check's program records: the engine's part.

Under ``pulumi preview --policy-pack``, the program (language host) sends registrations to the
engine, and the engine, another process, sends ``Analyze`` to the pack. The offline check keeps
that split: the recording hands each resource, already in wire form, to this process through a
pipe (a few microseconds), and this process drives the pack over its gRPC protocol
(:class:`~automation.offline.pack.runner.PolicyPackRunner`). The gRPC client's work per call
(a message, a call object, a completion thread that wants the interpreter lock) then runs on
the other core instead of between the program's registrations: at 500 models it had cost the
recording 3 s.

Run as ``python -m automation.offline.pack.feeder`` by :class:`~automation.offline.pack.streaming.StreamingAnalysis`;
frames on stdin (see :mod:`automation.offline.pack.streaming`), the report as one JSON line on stdout.
Ctrl-C is the check's to handle: this process ignores SIGINT, and stops (stopping the pack) when
its stdin closes or on SIGTERM.
"""

from __future__ import annotations

import gc
import json
import os
import pickle
import signal
import struct
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, BinaryIO

#: Frame header: payload length, unsigned 32-bit little-endian.
HEADER = struct.Struct("<I")


def frames(stream: BinaryIO) -> Iterator[Any]:
    """Unpickled frames until the stream ends (a frame cut short ends it too)."""
    while True:
        with _waiting():
            header = stream.read(HEADER.size)
        if len(header) < HEADER.size:
            return
        (size,) = HEADER.unpack(header)
        with _waiting():
            payload = stream.read(size)
        if len(payload) < size:
            return
        yield pickle.loads(payload)


def serve(stream: BinaryIO) -> dict[str, Any] | None:
    """Drive the pack from the frames on ``stream``: the report (or the error) as JSON data, or
    ``None`` if the stream ended before ``end`` (the check stopped)."""
    feeder = _Feeder()
    try:
        for kind, *fields in frames(stream):
            if kind == "end":
                return feeder.end(*fields)
            if kind == "resource":
                feeder.resource(*fields)
            elif kind == "start":
                feeder.start(*fields)
            else:
                raise ValueError(f"unknown frame {kind!r}")
        return None
    finally:
        feeder.close()  # not cut short by SIGTERM: it only cuts waits short (see _stop)


class _Feeder:
    """One pack run: ``start``, ``resource`` per registered resource, ``end`` with the plan's order."""

    def __init__(self) -> None:
        from automation.offline.pack.runner import _Structs

        self.runner: Any = None
        self.error: BaseException | None = None
        self.structs = _Structs()
        self.by_urn: dict[str, dict[str, Any]] = {}
        self.waiting: list[dict[str, Any]] = []
        self.futures: dict[str, Any] = {}

    def start(self, config: Any, pack_dir: str | None) -> None:
        from automation.offline.pack.runner import PolicyPackRunner

        try:
            self.runner = PolicyPackRunner(pack_dir)
            self.runner.start()
            self.runner.configure(config)
        except BaseException as error:  # noqa: BLE001 - reported at the end, where run_pack raises it
            self.error = error

    def resource(self, r: dict[str, Any], properties: bytes | None) -> None:
        """``properties``: the inputs' Struct, serialized, as the engine sends analyzers; ``None``: the
        dict carries ``inputs`` to marshal."""
        from automation.offline.pack.runner import _provider_urn

        if properties is not None:
            self.structs._by_urn[r["urn"]] = properties
        self.by_urn[r["urn"]] = r
        provider = _provider_urn(r)
        if provider and provider not in self.by_urn:
            self.waiting.append(r)  # its provider is not registered yet: sent at the end
        else:
            self._send(r)

    def _send(self, r: dict[str, Any]) -> None:
        from automation.offline.pack.runner import _provider_urn

        if self.error is None:
            try:
                self.futures[r["urn"]] = self.runner.analyze_async(
                    r, self.by_urn.get(_provider_urn(r)), structs=self.structs)
                # Its AnalyzeStack entry too, while the program still records: at the end only
                # the entries' order is left to write.
                self.structs.stack_item(r, self.by_urn)
            except BaseException as error:  # noqa: BLE001 - reported at the end
                self.error = error

    def end(self, order: list[str]) -> dict[str, Any]:
        """Send what is left and AnalyzeStack; findings of every resource in ``order``, then the stack's."""
        for r in self.waiting:
            self._send(r)
        if self.error is not None:
            return _error(self.error)
        try:
            items = [self.by_urn[urn] for urn in order]
            stack = self.runner.analyze_stack_async(items, self.by_urn, structs=self.structs)
            violations = []
            with _waiting():
                for r in items:
                    violations += self.runner.violations_of(self.futures[r["urn"]], r["urn"])
                violations += self.runner.violations_of(stack, "")
        except Exception as error:  # noqa: BLE001 - reported as the pack's failure (a stop still stops)
            return _error(error)
        info = self.runner.info()
        return {"report": {"pack": f"{info.name}@{info.version}", "config": self.runner.config_source,
                           "violations": [v.__dict__ for v in violations]}}

    def close(self) -> None:
        if self.runner is not None:
            self.runner.close()


def _error(error: BaseException) -> dict[str, Any]:
    """An error as the check's process raises it again: its kind and its one-line message."""
    from automation.offline.pack.findings import PolicyConfigError, PolicyPackError

    if isinstance(error, (PolicyConfigError, PolicyPackError)):
        return {"error": {"kind": type(error).__name__, "message": str(error)}}
    return {"error": {"kind": "PolicyPackError", "message": f"{type(error).__name__}: {error}"}}


_stop_asked: int | None = None
_waits = False


def _stop(signum: int, _frame: Any) -> None:
    """SIGTERM: stop, stopping the pack. Raised only out of a wait (reading frames, waiting for the
    pack's answers), so that nothing in between is cut short: a stop raised in the middle of
    starting the pack, or of stopping it, left it running on its own. Elsewhere it is noted, and
    the next wait raises it."""
    global _stop_asked
    _stop_asked = signum
    if _waits:
        raise SystemExit(128 + signum)


@contextmanager
def _waiting() -> Iterator[None]:
    """A blocking wait that a SIGTERM ends (see _stop)."""
    global _waits
    _waits = True
    try:
        if _stop_asked is not None:  # asked before the wait began
            raise SystemExit(128 + _stop_asked)
        yield
    finally:
        _waits = False


#: How much less of the machine this process and the pack it starts ask for than the check's
#: program: the recording is the check's critical path while the pack has slack (it catches up
#: while the files are written); with both at one priority, three busy processes shared two cores
#: and the recording lost a sixth of its time at 500 models.
NICENESS = 10


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _stop)
    try:
        os.nice(NICENESS)
    except OSError:
        pass  # not allowed here: the same work at the same priority
    # What this process makes (a call, its future and the resource's bytes, per resource) lives
    # until the report and ends with the process: the collector only rescanned it (5% of its CPU
    # at 500 models).
    gc.disable()
    result = serve(sys.stdin.buffer)
    if result is not None:
        sys.stdout.write(json.dumps(result) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
