"""Frames on a pipe between the check's process and a helper process: a 4-byte little-endian
length, then a pickle of a tuple whose first item names the frame's kind.

The writer side never waits while the program records: frames are buffered and written at most
every 20 ms, at least 64 KiB at a time (or at once past 768 KiB), as far as the pipe takes them;
the rest waits for the next frame or a blocking flush. Each write wakes the reader, and a reader
woken often took the program's core from it now and then: with a write every 64 KiB the 500-model
recording took 0.1-0.16 s longer (a write per resource was 4% of the check). The reader side hands
on each complete frame of whatever a read brought.

A registered resource goes to both of the check's helpers, the pack's feeder and the file writer,
as one frame (:func:`resource_frame`): pickled once, the same bytes written to both pipes.
"""

from __future__ import annotations

import errno
import fcntl
import os
import pickle
import struct
import time
from collections.abc import Callable
from typing import Any

#: Frame header: payload length, unsigned 32-bit little-endian.
HEADER = struct.Struct("<I")
#: Frames are written in batches of at least this many bytes, at most every ``INTERVAL`` seconds
#: (the reader gets them with that much delay at most), and at once past ``FULL`` bytes.
BATCH = 64 * 1024
INTERVAL = 0.02
FULL = 768 * 1024
_F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)


def encode(message: tuple[Any, ...]) -> bytes:
    """One frame: the header and the pickle of ``message``."""
    payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return HEADER.pack(len(payload)) + payload


def resource_frame(fields: dict[str, Any], properties: bytes | bool | None = None) -> bytes:
    """The frame of one registered resource, as both helpers read it: ``("resource", fields,
    properties)``. ``fields``: the resource's fields by name (a plan entry's); ``properties``: what
    the pack's feeder is told of its inputs' form (see ``StreamingAnalysis.submit``), which the
    file writer ignores."""
    return encode(("resource", fields, properties))


class FrameWriter:
    """Frames to the pipe ``fd`` (made non-blocking here), batched."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        try:
            fcntl.fcntl(fd, _F_SETPIPE_SZ, 1 << 20)  # fewer wake-ups of the reader; best effort
        except OSError:
            pass
        os.set_blocking(fd, False)
        self._pending = bytearray()
        self._written = time.monotonic()

    def send(self, message: tuple[Any, ...], *, now: bool = False) -> None:
        """Queue one frame; written with the batch (see the module), or at once if ``now``, as far as
        the pipe takes it."""
        self.send_encoded(encode(message), now=now)

    def send_encoded(self, frame: bytes, *, now: bool = False) -> None:
        """:meth:`send` for a frame already encoded (:func:`encode`)."""
        pending = self._pending
        pending += frame
        if now or len(pending) >= FULL or (len(pending) >= BATCH and time.monotonic() - self._written >= INTERVAL):
            self.flush(block=False)

    def flush(self, *, block: bool) -> None:
        """Write what is queued: all of it (``block``), or what the pipe takes now. A reader that is
        gone takes everything (its owner says why it went)."""
        if block:
            os.set_blocking(self.fd, True)
        view = memoryview(self._pending)
        sent = 0
        try:
            while sent < len(view):
                try:
                    sent += os.write(self.fd, view[sent:])
                except BlockingIOError:
                    break
                except OSError as error:
                    if error.errno != errno.EPIPE:
                        raise
                    sent = len(view)
        finally:
            view.release()
            del self._pending[:sent]
            self._written = time.monotonic()


class FrameReader:
    """Frames from a pipe, as they arrive: each complete frame of a read goes to ``on_frame(kind,
    fields)``; after the ``end`` frame the rest of the stream is not read."""

    def __init__(self, on_frame: Callable[[str, list[Any]], None]) -> None:
        self._on_frame = on_frame
        self._buffer = bytearray()

    def feed(self, chunk: bytes) -> bool:
        """Take a chunk of the stream; False once the ``end`` frame was handed on."""
        buffer = self._buffer
        buffer += chunk
        offset, size_of = 0, HEADER.size
        try:
            while len(buffer) - offset >= size_of:
                (size,) = HEADER.unpack_from(buffer, offset)
                if len(buffer) - offset - size_of < size:
                    break
                kind, *fields = pickle.loads(memoryview(buffer)[offset + size_of: offset + size_of + size])
                offset += size_of + size
                self._on_frame(kind, fields)
                if kind == "end":
                    return False
            return True
        finally:
            del buffer[:offset]
