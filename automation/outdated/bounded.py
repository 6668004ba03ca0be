"""Asking a server that may answer badly: every exchange bounded in time and size, every bad answer
one line.

A per-read timeout does not bound a request: a server that drips one byte every few seconds never
trips it. :func:`within` bounds the whole exchange (redirects, token, every page, every read) by one
wall-clock budget: the exchange runs in a worker thread, the caller waits at most the budget, and the
worker stops itself at its next read once the deadline has passed (:func:`read_capped`). Sizes are
capped while reading, never after, and JSON nesting is bounded before the parser sees it
(``policies/capacity/bounded_json.py``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import requests
import urllib3

from policies.capacity import bounded_json

T = TypeVar("T")

#: Seconds the worker may run on after the caller stopped waiting, before its own reads give up.
_GRACE = 1.0


class SourceError(Exception):
    """A source that could not be read, or answered something unusable; the message names it."""


def within(seconds: float, what: str, exchange: Callable[[float], T]) -> T:
    """``exchange(deadline)``, or :class:`SourceError` once ``seconds`` have passed without its answer.

    ``deadline`` is a ``time.monotonic()`` value the exchange passes on to its reads: a little after
    the caller stops waiting, so a late exchange always ends in this function's line, and then stops."""
    deadline = time.monotonic() + seconds
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append((True, exchange(deadline + _GRACE)))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread as it is
            outcome.append((False, exc))

    worker = threading.Thread(target=run, name=f"source {what}", daemon=True)
    worker.start()
    worker.join(max(0.0, deadline - time.monotonic()))
    if not outcome:
        raise SourceError(f"{what}: no complete answer within {seconds:g} s")
    ok, value = outcome[0]
    if ok:
        return value
    raise value


def read_capped(response: requests.Response, limit: int, deadline: float, what: str) -> bytes:
    """The body of a streamed ``response``, refusing more than ``limit`` bytes or a read past ``deadline``."""
    raw = response.raw
    chunks: list[bytes] = []
    size = 0
    try:
        while True:
            if time.monotonic() > deadline:
                raise SourceError(f"{what}: the answer was still arriving at the deadline")
            chunk = raw.read1(64 * 1024, decode_content=True)
            if not chunk:
                break
            size += len(chunk)
            if size > limit:
                raise SourceError(f"{what}: the answer is larger than {_size(limit)}")
            chunks.append(chunk)
    except (requests.RequestException, urllib3.exceptions.HTTPError, OSError) as exc:
        # raw reads raise urllib3's own errors (read timeout, connection reset), not requests'
        raise SourceError(f"{what}: the answer broke off ({type(exc).__name__})") from None
    finally:
        response.close()
    return b"".join(chunks)


def _size(limit: int) -> str:
    return f"{limit // (1024 * 1024)} MiB" if limit >= 1024 * 1024 else f"{limit} bytes"


def loads_json(data: bytes, what: str) -> Any:
    """``data`` as JSON, or one line saying why not (not JSON, nested too deep)."""
    try:
        return bounded_json.loads(data)
    except bounded_json.NestingError as exc:
        raise SourceError(f"{what}: the JSON is {exc}") from None
    except ValueError:
        raise SourceError(f"{what}: the answer is not JSON") from None
