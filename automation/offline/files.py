"""The check's ``plan.json`` and ``manifests/``, made resource by resource while the program records.

Written from the finished plan, at 500 models they took most of half a second after the recording,
on both cores (redaction and JSON in the check's process, YAML in a forked child, beside the pack's
AnalyzeStack), while during the recording the second core was mostly idle. So a copy of the check's
process, forked before the program runs (a small process then: nothing of the recording to copy),
is handed each resource as it is registered (its fields pickled on a pipe: the frame the pack's
feeder gets too, ``frames.resource_frame``) and renders its plan entry (redacted JSON) and its
manifest (YAML) at once. At the end it gets the plan's order and only writes the files:
``plan.json``'s entries in that order, and the manifests (of two with one file name, the later in
that order), with nothing else left in ``manifests/``.

The files are byte for byte those written from the finished plan (``write_json(path,
redact_plan(plan))``, ``write_manifests``): the same functions render each piece. Where a fork is
not safe (:func:`~automation.offline.forked.can_fork`), the same rendering runs in the check's own
process as each resource is registered.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from automation.offline.emit import RenderedItems, dumps_yaml, list_item_json, write_json
from automation.offline.forked import ForkedTask, can_fork
from automation.offline.frames import FrameReader, FrameWriter, resource_frame
from automation.offline.manifests import kubernetes_document, redact_secrets, write_files
from automation.offline.pack.findings import resource_dict
from automation.offline.plan import PLAN_FIELDS, PlannedResource

#: Seconds the writer is given to finish its files when the check stops after ``end`` (at 500
#: models it needs a fraction of one).
_FINISH_GRACE = 10.0


class _Rendering:
    """Each resource's plan entry and manifest, rendered as it comes; the files, at the end."""

    def __init__(self, out: Path, project: str, stack: str) -> None:
        self.out, self.project, self.stack = out, project, stack
        self.entries: dict[str, bytes] = {}
        self.manifests: dict[str, tuple[str, bytes]] = {}

    def add(self, fields: dict[str, Any]) -> None:
        """One resource, its fields by name (``frames.resource_frame``); its plan entry has them in
        the plan's order."""
        resource = {name: fields.get(name) for name in PLAN_FIELDS}
        self.entries[resource["urn"]] = list_item_json(redact_secrets(resource))
        manifest = kubernetes_document(resource["type"], resource["name"], resource["custom"], resource["inputs"])
        if manifest is not None:
            self.manifests[resource["urn"]] = (manifest[0], dumps_yaml(manifest[1]).encode())

    def write(self, order: list[str]) -> list[str]:
        """The files for the resources in ``order``; the manifests' file names."""
        self.out.mkdir(parents=True, exist_ok=True)
        # Written aside and renamed: a reader never sees half a plan.
        partial = self.out / "plan.json.partial"
        write_json(partial, {"project": self.project, "stack": self.stack,
                             "resources": RenderedItems(self.entries[urn] for urn in order)})
        os.replace(partial, self.out / "plan.json")
        files: dict[str, bytes] = {}
        for urn in order:
            manifest = self.manifests.get(urn)
            if manifest is not None:
                files[manifest[0]] = manifest[1]
        return [path.name for path in write_files(self.out / "manifests", dict(sorted(files.items())))]


def _render_from(fd: int, parent_end: int, out: Path, project: str, stack: str) -> list[str] | None:
    """The forked writer: frames from ``fd`` until ``end``, then the files (``None`` if the check
    stopped first)."""
    os.close(parent_end)
    rendering = _Rendering(out, project, stack)
    order: list[list[str]] = []

    def on_frame(kind: str, frame: list[Any]) -> None:
        if kind == "resource":
            rendering.add(frame[0])
        elif kind == "end":
            order.append(frame[0])
        else:
            raise ValueError(f"unknown frame {kind!r}")

    frames = FrameReader(on_frame)
    while (chunk := os.read(fd, 1 << 20)) and frames.feed(chunk):
        pass
    return rendering.write(order[0]) if order else None


class StreamedFiles:
    """``plan.json`` and ``manifests/`` in ``out``, rendered as resources are handed over
    (``submit``), written after ``end`` gives their order, done when ``finish`` returns. Use as a
    context manager: leaving it before ``end`` (the program failed, a signal) stops the writer,
    which then writes nothing."""

    def __init__(self, out: Path, project: str, stack: str, *, niceness: int = 0) -> None:
        self.out = out
        self._submitted: set[str] = set()
        self._order: list[str] = []
        self._rendering: _Rendering | None = None
        self._task: ForkedTask | None = None
        self._frames: FrameWriter | None = None
        if not can_fork():
            self._rendering = _Rendering(out, project, stack)
            return
        read, write = os.pipe()
        try:
            self._task = ForkedTask(lambda: _render_from(read, write, out, project, stack),
                                    what="file writer", niceness=niceness)
        except BaseException:
            os.close(write)
            raise
        finally:
            os.close(read)
        self._frames = FrameWriter(write)

    def __enter__(self) -> StreamedFiles:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def pid(self) -> int | None:
        """The forked writer's process id while it runs (``None`` when rendering in this process)."""
        return self._task.pid if self._task is not None else None

    def submit(self, resource: PlannedResource, frame: bytes | None = None) -> None:
        """One registered resource (its fields as they are now: the recording does not change them);
        ``frame``: the resource already encoded (``frames.resource_frame``), as the pack's feeder
        gets it too."""
        if self._rendering is not None:
            self._rendering.add(resource_dict(resource))
        else:
            assert self._frames is not None
            self._frames.send_encoded(frame if frame is not None else resource_frame(resource_dict(resource)))
        self._submitted.add(resource.urn)

    def end(self, resources: list[PlannedResource]) -> None:
        """No more resources: the files are for ``resources``, in their order (any not submitted yet
        are, first). The forked writer writes them once it has rendered every resource; ``finish``
        waits for it."""
        self._order = []
        for resource in resources:
            if resource.urn not in self._submitted:
                self.submit(resource)
            self._order.append(resource.urn)
        if self._frames is not None:
            # As far as the pipe takes it now: a writer still rendering takes the rest in ``finish``,
            # and the caller gets on with its own work meanwhile.
            self._frames.send(("end", self._order), now=True)

    def finish(self) -> list[Path]:
        """The files written (after ``end``): the manifests' paths. Raises what writing raised (an
        ``OSError`` for a file that cannot be written)."""
        if self._rendering is not None:
            names = self._rendering.write(self._order)
        else:
            assert self._frames is not None and self._task is not None
            self._frames.flush(block=True)
            self._close_pipe()
            names = self._task.wait()
        return [self.out / "manifests" / name for name in names]

    def close(self) -> None:
        """Stop the writer if it still runs. Its pipe closes first: before ``end`` reached it, the
        writer then leaves without writing; after, it finishes writing the files, which it is given
        a few seconds for, so that no file is left half-written (a check interrupted in its last
        moments leaves the files it had made)."""
        self._close_pipe()
        if self._task is not None:
            self._task.cancel(grace=_FINISH_GRACE)

    def _close_pipe(self) -> None:
        if self._frames is not None:
            frames, self._frames = self._frames, None
            os.close(frames.fd)
