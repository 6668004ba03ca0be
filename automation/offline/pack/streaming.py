"""The policy pack run beside the recording, fed through the pack feeder process.

:class:`StreamingAnalysis` starts :mod:`automation.offline.pack.feeder` (which starts the pack and
configures it) as soon as it exists, and hands it each resource as the program registers it. The
program's thread only writes a frame to a pipe; the feeder makes the gRPC calls on the other core.

Frames (stdin of the feeder, :mod:`automation.offline.frames`) are one of
``("start", config, pack_dir)``, ``("resource", resource, properties)`` (``properties``: the
inputs' Struct serialized as the engine sends analyzers; ``True`` with ``inputs`` in the resource
that are that form already; or ``None`` with ``inputs`` to marshal) and ``("end", urns)``, the order of the report. The feeder answers ``end``
with one JSON line: ``{"report": ...}`` or ``{"error": {"kind", "message"}}``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from automation.offline.exits import wait_for_exit
from automation.offline.frames import FrameWriter, resource_frame
from automation.offline.pack.findings import PackReport, PolicyConfigError, PolicyPackError, resource_dict, urn_of

ROOT = Path(__file__).resolve().parents[3]
_ERRORS = {"PolicyConfigError": PolicyConfigError, "PolicyPackError": PolicyPackError}


def feeder_properties(properties: Any) -> bytes | bool | None:
    """``StreamingAnalysis.submit``'s ``properties`` as the feeder gets them: a Struct as its bytes."""
    if properties is None or properties is True or isinstance(properties, bytes):
        return properties
    return properties.SerializeToString()


class StreamingAnalysis:
    """The pack's findings for resources handed over one by one as they are registered.

    ``submit`` (from the program's thread) never waits: frames are buffered and written to the
    feeder's pipe about 64 KiB at a time, as far as the pipe takes them; the rest waits for the
    next ``submit`` or ``end``. ``end`` sends the rest
    and the plan's order, so the feeder sends AnalyzeStack while the caller writes its files;
    ``finish`` reads the report, the same report in the same order as
    :func:`~automation.offline.pack.runner.run_pack` over the same resources. Errors of start-up or
    configuration are raised by ``finish``, where ``run_pack`` would have raised them. Use as a
    context manager: leaving it stops the feeder, which stops the pack.
    """

    def __init__(
        self,
        config_path: str | os.PathLike[str] | Mapping[str, Any] | None = None,
        pack_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        self._stderr = tempfile.TemporaryFile()
        self._process: subprocess.Popen[bytes] | None = subprocess.Popen(
            [sys.executable, "-m", "automation.offline.pack.feeder"],
            cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
        )
        assert self._process.stdin is not None
        self._frames = FrameWriter(self._process.stdin.fileno())
        self._submitted: set[str] = set()
        self._ended = self._answered = False
        #: How many resources ``finish`` found were sent to ``Analyze``: those of the types the pack
        #: said it can report on (all, if it did not say); every resource goes to AnalyzeStack.
        self.analyze_calls: int | None = None
        config = str(config_path) if isinstance(config_path, os.PathLike) else config_path
        self._frames.send(("start", dict(config) if isinstance(config, Mapping) else config,
                           None if pack_dir is None else str(pack_dir)), now=True)

    def __enter__(self) -> StreamingAnalysis:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def pid(self) -> int | None:
        """The feeder's process id while it runs."""
        return self._process.pid if self._process is not None else None

    def submit(self, resource: Any, properties: Any = None) -> None:
        """Hand one registered resource to the pack. ``properties``: its inputs' Struct (or the
        Struct's wire form) when the recording has it in the form the engine sends analyzers (sent
        as its bytes); ``True`` when the plain ``inputs`` are that form as they are (no reference,
        output value or engine key: the feeder writes them as a Struct); ``None``: the feeder
        marshals ``inputs`` as the engine does."""
        r = resource_dict(resource)
        self.submit_frame(r["urn"], resource_frame(r, feeder_properties(properties)))

    def submit_frame(self, urn: str, frame: bytes) -> None:
        """Hand over a resource already encoded (``frames.resource_frame``), the frame the file
        writer gets too."""
        self._frames.send_encoded(frame)
        self._submitted.add(urn)

    def end(self, resources: Iterable[Any]) -> None:
        """No more resources: hand over any not submitted yet, then the report's order (``resources``'s)."""
        order = []
        for resource in resources:
            urn = urn_of(resource)
            if urn not in self._submitted:
                self.submit(resource)
            order.append(urn)
        self._frames.send(("end", order))
        self._ended = True
        self._frames.flush(block=True)

    def finish(self, resources: Iterable[Any] | None = None) -> PackReport:
        """Findings for ``resources`` (Analyze each, in this order, then AnalyzeStack); ``resources``
        may be left out after ``end``."""
        if not self._ended:
            self.end(resources if resources is not None else [])
        assert self._process is not None and self._process.stdout is not None
        line = self._process.stdout.readline()
        try:
            answer = json.loads(line) if line else None
        except json.JSONDecodeError:
            answer = None
        if not isinstance(answer, dict) or not ("report" in answer or "error" in answer):
            wait_for_exit(self._process, 30)
            raise PolicyPackError(f"the pack feeder stopped without a report (exit code {self._process.returncode})"
                                  f"{self._stderr_tail()}")
        self._answered = True
        self.analyze_calls = answer.get("analyze_calls")
        if "error" in answer:
            raise _ERRORS.get(answer["error"]["kind"], PolicyPackError)(answer["error"]["message"])
        return PackReport.from_json(answer["report"])

    def close(self) -> None:
        """Stop the feeder, and with it the pack (also when the program failed before ``finish``)."""
        process, self._process = self._process, None
        if process is None:
            return
        try:
            if process.stdin is not None:
                process.stdin.close()  # after its answer, the feeder stops at the end of its frames
            if not self._answered:
                process.terminate()  # still at work (the check failed or was interrupted): stop it now
            try:
                wait_for_exit(process, 10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        except OSError:
            pass
        finally:
            if process.stdout is not None:
                process.stdout.close()
            self._stderr.close()

    def _stderr_tail(self) -> str:
        self._stderr.seek(0)
        tail = self._stderr.read().decode(errors="replace")[-4000:].strip()
        return f"; stderr:\n{tail}" if tail else ""
