"""The eager loop runs what it runs as a plain loop would, only sooner."""

from __future__ import annotations

import asyncio
import contextvars

import pytest

from automation.offline.recording.eager import EagerLoop, _gather, finished_gathers

VAR = contextvars.ContextVar("var", default="unset")


def _run(main, *, eager: bool):
    loop = EagerLoop() if eager else asyncio.new_event_loop()
    try:
        return loop.run_until_complete(main(loop)), loop
    finally:
        loop.close()


async def _trace_program(loop):
    """Tasks that finish at once, tasks that wait on one future together, a chain through a task,
    context variables, exceptions and cancellation; returns what each observed."""
    seen: list = []
    pending = loop.create_future()

    async def immediate(n):
        seen.append(("immediate", n))
        return n * 2

    async def waits(n):
        value = await pending
        seen.append(("woke", n, value))
        return value + n

    async def through(task):
        return await task + 100

    async def fails():
        raise ValueError("boom")

    async def reads_context():
        VAR.set("inner")  # a task's context is a copy: the caller's value stays
        return VAR.get()

    VAR.set("outer")
    first = asyncio.ensure_future(immediate(1))
    a, b = asyncio.ensure_future(waits(1)), asyncio.ensure_future(waits(2))  # both await `pending`
    chained = asyncio.ensure_future(through(a))
    failed = asyncio.ensure_future(fails())
    inner = asyncio.ensure_future(reads_context())
    sleeper = asyncio.ensure_future(asyncio.sleep(3600))
    loop.call_soon(pending.set_result, 10)
    sleeper.cancel()
    results = [await first, await a, await b, await chained, await inner, VAR.get()]
    with pytest.raises(ValueError, match="boom"):
        await failed
    with pytest.raises(asyncio.CancelledError):
        await sleeper
    return results, sorted(map(str, seen))


def test_same_results_as_a_plain_loop():
    (eager_results, eager_seen), eager_loop = _run(_trace_program, eager=True)
    (plain_results, plain_seen), _ = _run(_trace_program, eager=False)
    assert eager_results == plain_results == [2, 11, 12, 111, "inner", "outer"]
    assert eager_seen == plain_seen
    assert eager_loop.finished_at_once >= 3 and eager_loop.waited >= 3


def test_a_task_that_needs_nothing_finishes_when_created():
    async def main(loop):
        async def immediate():
            return 42

        task = asyncio.ensure_future(immediate())
        return task.done() and task.result()

    assert _run(main, eager=True)[0] == 42
    assert _run(main, eager=False)[0] is False


def test_executor_calls_run_inline_and_errors_reach_the_caller():
    async def main(loop):
        ok = loop.run_in_executor(None, lambda: 7)
        assert ok.done()

        def broken():
            raise KeyError("x")

        with pytest.raises(KeyError):
            await loop.run_in_executor(None, broken)
        return await ok

    assert _run(main, eager=True)[0] == 7


async def _gathered(loop, gather, children, return_exceptions):
    futures = []
    for kind, value in children:
        future = loop.create_future()
        if kind == "ok":
            future.set_result(value)
        elif kind == "error":
            future.set_exception(value)
        else:
            future.cancel()
        futures.append(future)
    outer = gather(*futures, return_exceptions=return_exceptions)
    try:
        return ("ok", [repr(r) for r in await outer])
    except BaseException as error:  # noqa: BLE001 - compared
        return ("raised", repr(error))


@pytest.mark.parametrize("return_exceptions", [False, True])
@pytest.mark.parametrize("children", [
    [("ok", 1), ("ok", "two")],
    [("ok", 1), ("error", ValueError("first")), ("error", KeyError("second"))],
    [("cancelled", None), ("ok", 3)],
    [("error", RuntimeError("only"))],
])
def test_gather_over_finished_futures_equals_asyncios(children, return_exceptions):
    def run(gather):
        loop = asyncio.new_event_loop()
        try:
            return loop.run_until_complete(_gathered(loop, gather, children, return_exceptions))
        finally:
            loop.close()

    assert run(_gather) == run(asyncio.gather)


def test_gather_finishes_at_once_only_over_finished_futures():
    async def main(loop):
        done = loop.create_future()
        done.set_result(1)
        waiting = loop.create_future()
        with finished_gathers():
            at_once = asyncio.gather(done, done)
            later = asyncio.gather(done, waiting)
        assert asyncio.gather is not _gather, "asyncio's gather is back"
        assert at_once.done() and not later.done()
        waiting.set_result(2)
        return await at_once, await later

    assert _run(main, eager=True)[0] == ([1, 1], [1, 2])
