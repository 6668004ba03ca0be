"""The process that feeds the policy pack while the check's program records: the engine's part.

Under ``pulumi preview --policy-pack``, the program (language host) sends registrations to the
engine, and the engine, another process, sends ``Analyze`` to the pack. The offline check keeps
that split: the recording hands each resource (its plain inputs, or its Struct's bytes) to this
process through a pipe (a few microseconds), and this process marshals the inputs as the engine
does for analyzers and drives the pack over its gRPC protocol
(:class:`~automation.offline.pack.runner.PolicyPackRunner`). The gRPC client's work per call
(a message, a call object, a completion thread that wants the interpreter lock) then runs on
the other core instead of between the program's registrations: at 500 models it had cost the
recording 3 s. Frames are read, and calls made and answered, on one asyncio event loop with gRPC's
asyncio client (:class:`~automation.offline.pack.runner.AsyncAnalyzer`): per call it costs this
process and the pack less than the threaded client did (whose completion thread woke for every
answer), so the pack keeps up with the recording (at 500 models, a quarter of a second of the
check's wall time).

Run as ``python -m automation.offline.pack.feeder`` by :class:`~automation.offline.pack.streaming.StreamingAnalysis`;
frames on stdin (see :mod:`automation.offline.pack.streaming`), the report as one JSON line on stdout.
Ctrl-C is the check's to handle: this process ignores SIGINT, and stops (stopping the pack) when
its stdin closes or on SIGTERM.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

from automation.offline.frames import FrameReader


async def _serve(fd: int, answer: Callable[[dict[str, Any]], None] = lambda result: None) -> dict[str, Any] | None:
    """Drive the pack from the frames read from ``fd``: the report (or the error) as JSON data, or
    ``None`` if the stream ended before ``end`` (the check stopped). Frames are read as they come,
    on the event loop that also carries the pack's calls. ``answer`` gets the report as soon as it
    is made, before the pack is stopped: the check goes on meanwhile (stopping the pack and this
    loop took 0.03 s at 500 models, which the check had waited for)."""
    loop = asyncio.get_running_loop()
    feeder = _Feeder()
    ended: asyncio.Future[list[str] | None] = loop.create_future()

    def on_frame(kind: str, fields: list[Any]) -> None:
        if kind == "resource":
            feeder.resource(*fields)
        elif kind == "start":
            feeder.start(*fields)  # starting the pack blocks the loop: nothing else to do meanwhile
        elif kind == "end":
            if not ended.done():
                ended.set_result(fields[0])
        else:
            raise ValueError(f"unknown frame {kind!r}")

    frames = FrameReader(on_frame)

    def readable() -> None:
        try:
            chunk = os.read(fd, 1 << 20)
        except BlockingIOError:
            return
        except OSError as error:
            chunk, failure = b"", error
        else:
            failure = None
        try:
            more = bool(chunk) and frames.feed(chunk)
        except Exception as error:  # noqa: BLE001 - a bad frame ends the run, as the check's error
            more, failure = False, error
        if not more:
            loop.remove_reader(fd)
            if not ended.done():
                if failure is not None:
                    ended.set_exception(failure)
                else:
                    ended.set_result(None)  # the stream ended before ``end``

    os.set_blocking(fd, False)
    loop.add_reader(fd, readable)
    try:
        order = await ended
        if order is None:
            return None
        result = await feeder.end(order)
        answer(result)
        return result
    finally:
        loop.remove_reader(fd)
        await feeder.close()
        # The run's data (every resource's dict, Struct and call) goes with the process: released
        # here object by object, it took 0.02 s at 500 models that the check waited for.
        _LEFT_TO_EXIT.append(feeder)


#: Runs whose data the process's exit releases (see the end of ``_serve``).
_LEFT_TO_EXIT: list[Any] = []


class _Feeder:
    """One pack run: ``start``, ``resource`` per registered resource, ``end`` with the plan's order."""

    def __init__(self) -> None:
        from automation.offline.pack.runner import _Structs

        self.runner: Any = None
        self.analyzer: Any = None
        self.error: BaseException | None = None
        self.structs = _Structs()
        self.by_urn: dict[str, dict[str, Any]] = {}
        self.waiting: list[dict[str, Any]] = []
        self.calls: dict[str, Any] = {}
        #: The types the pack can report on in Analyze, as it named them (None: any).
        self.analyzed_types: frozenset[str] | None = None

    def start(self, config: Any, pack_dir: str | None) -> None:
        from automation.offline.pack.runner import AsyncAnalyzer, PolicyPackRunner

        try:
            self.runner = PolicyPackRunner(pack_dir)
            self.runner.start()
            self.runner.configure(config)
            self.analyzed_types = self.runner.analyzed_types
            self.analyzer = AsyncAnalyzer(self.runner)
        except BaseException as error:  # noqa: BLE001 - reported at the end, where run_pack raises it
            self.error = error

    def resource(self, r: dict[str, Any], properties: bytes | bool | None) -> None:
        """``r``: the resource's fields (``frames.resource_frame``); ``properties``: the inputs' Struct,
        serialized, as the engine sends analyzers; ``True``: the dict's ``inputs`` are that form
        already, to write as a Struct; ``None``: they are to marshal."""
        from automation.offline.pack.runner import _provider_urn
        from automation.offline.recording.struct_wire import wire_bytes

        if properties is True:
            self.structs.keep(r["urn"], wire_bytes(r.get("inputs") or {}))
        elif properties is not None:
            self.structs.keep(r["urn"], properties)
        self.by_urn[r["urn"]] = r
        provider = _provider_urn(r)
        if provider and provider not in self.by_urn:
            self.waiting.append(r)  # its provider is not registered yet: sent at the end
        else:
            self._send(r)

    def _send(self, r: dict[str, Any]) -> None:
        from automation.offline.pack.runner import _analyze_request, _provider_urn

        if self.error is None:
            try:
                request = _analyze_request(r, self.by_urn.get(_provider_urn(r)), self.structs)
                # Analyze only where it can report something: the pack names the types its resource
                # policies take (at 500 models a fifth of the resources; the gRPC call was most of
                # the cost per resource on both sides).
                if self.analyzed_types is None or r["type"] in self.analyzed_types:
                    self.calls[r["urn"]] = self.analyzer.send_analyze(request)
                # Its AnalyzeStack entry, for every resource, while the program still records (the
                # request is its beginning): at the end only the entries' order is left to write.
                self.structs.stack_item(r, self.by_urn, request)
            except BaseException as error:  # noqa: BLE001 - reported at the end
                self.error = error

    async def end(self, order: list[str]) -> dict[str, Any]:
        """Send what is left and AnalyzeStack; findings of every resource in ``order``, then the stack's."""
        for r in self.waiting:
            self._send(r)
        if self.error is not None:
            return _error(self.error)
        try:
            items = [self.by_urn[urn] for urn in order]
            stack = self.analyzer.analyze_stack(items, self.by_urn, structs=self.structs)
            violations = []
            for r in items:
                call = self.calls.get(r["urn"])
                if call is not None:
                    violations += await self.analyzer.violations_of(call, r["urn"])
            violations += await self.analyzer.violations_of(stack, "")
        except Exception as error:  # noqa: BLE001 - reported as the pack's failure (a stop still stops)
            return _error(error)
        info = self.runner.info()
        return {"report": {"pack": f"{info.name}@{info.version}", "config": self.runner.config_source,
                           "violations": [v.__dict__ for v in violations]},
                "analyze_calls": len(self.calls)}

    async def close(self) -> None:
        """Stop the pack (first, and without waiting: nothing may cut it short), then close the channel."""
        if self.runner is not None:
            self.runner.close()
        if self.analyzer is not None:
            analyzer, self.analyzer = self.analyzer, None
            try:
                await analyzer.close()
            except asyncio.CancelledError:
                pass  # a second stop: the pack is stopped already


def _error(error: BaseException) -> dict[str, Any]:
    """An error as the check's process raises it again: its kind and its one-line message."""
    from automation.offline.pack.findings import PolicyConfigError, PolicyPackError

    if isinstance(error, (PolicyConfigError, PolicyPackError)):
        return {"error": {"kind": type(error).__name__, "message": str(error)}}
    return {"error": {"kind": "PolicyPackError", "message": f"{type(error).__name__}: {error}"}}


def serve(fd: int, answer: Callable[[dict[str, Any]], None] = lambda result: None) -> tuple[dict[str, Any] | None, int | None]:
    """Run :func:`_serve` (``answer`` as there) until it answers or a SIGTERM stops it: (the answer,
    the signal).

    A SIGTERM is handled on the event loop, so it cuts short only a wait (for frames, for the
    pack's answers): while the pack starts or stops (blocking calls on the loop) it waits its turn,
    and then the run is cancelled, which stops the pack (a stop in the middle of starting or
    stopping the pack left it running on its own).
    """
    stopped: list[int] = []

    async def main() -> dict[str, Any] | None:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()

        def stop() -> None:
            if not stopped:
                stopped.append(signal.SIGTERM)
                task.cancel()

        loop.add_signal_handler(signal.SIGTERM, stop)
        try:
            return await _serve(fd, answer)
        except asyncio.CancelledError:
            if stopped:
                return None
            raise

    answer = asyncio.run(main())
    return answer, (stopped[0] if stopped else None)


#: How much less of the machine this process and the pack it starts ask for than the check's
#: program: the recording is the check's critical path while the pack has slack (it catches up
#: while the files are written); with both at one priority, three busy processes shared two cores
#: and the recording lost a sixth of its time at 500 models.
NICENESS = 10


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        os.nice(NICENESS)
    except OSError:
        pass  # not allowed here: the same work at the same priority
    # What this process makes (a call, its future and the resource's bytes, per resource) lives
    # until the report and ends with the process: the collector only rescanned it (5% of its CPU
    # at 500 models).
    gc.disable()

    def answer(result: dict[str, Any]) -> None:
        try:
            sys.stdout.write(json.dumps(result) + "\n")
            sys.stdout.flush()
        except OSError:
            pass  # the check is gone (it was stopped): nobody to answer

    _, stopped_by = serve(sys.stdin.fileno(), answer)
    return 128 + stopped_by if stopped_by is not None else 0


if __name__ == "__main__":
    code = main()
    # The pack is stopped and the answer written: leave without the interpreter's teardown, which
    # released every call, request and Struct of the run one by one while the check waited for
    # this process to end (at 500 models 0.05-0.15 s; nothing here registers exit handlers).
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except OSError:
            pass  # the check is gone (it read the answer or was stopped): nothing more to say
    os._exit(code)
