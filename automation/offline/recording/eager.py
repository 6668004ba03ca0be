"""An asyncio event loop on which work that need not wait does not wait.

A Pulumi Python program runs on asyncio: every registration, every output and every ``apply`` is a
task, and every task waits for a turn of the loop even when all it awaits is already there. Against
a real engine that costs nothing next to the engine's round trips. Under the recording monitor,
which answers at once, the tasks and turns are most of the work: at 500 models, 130,000 tasks were
created, each scheduled, woken and finished by the loop.

This loop runs a coroutine, at the moment its task is created, up to its first real wait (as
Python 3.12's ``asyncio.eager_task_factory`` does); a coroutine that never waits completes right
there and its "task" is a finished future. What runs, and in which context, is unchanged; only
when it runs moves earlier. ``gather`` over futures that are all finished likewise finishes at once
(Python 3.12 does the same for finished children). Nothing here knows about Pulumi.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Coroutine, Generator, Iterator
from contextlib import contextmanager
from typing import Any


class _Resumed:
    """The rest of a coroutine whose first step ran eagerly and stopped at ``waiting_on``.

    Awaited by the task that takes the coroutine over: it waits for what the coroutine was
    waiting for, then steps the coroutine on exactly as ``await`` would have.
    """

    __slots__ = ("coro", "waiting_on")

    def __init__(self, coro: Coroutine[Any, Any, Any], waiting_on: Any) -> None:
        self.coro, self.waiting_on = coro, waiting_on

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, waiting_on = self.coro, self.waiting_on
        self.coro = self.waiting_on = None
        while True:
            if hasattr(waiting_on, "_asyncio_future_blocking"):
                # A future's __await__ raises its flag just before yielding; the task that takes
                # the yield lowers it. Raised again here, at the yield, for the task to see.
                waiting_on._asyncio_future_blocking = True
            try:
                sent = yield waiting_on
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as error:  # noqa: BLE001 - thrown into the coroutine, as a task would
                try:
                    waiting_on = coro.throw(error)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    waiting_on = coro.send(sent)
                except StopIteration as stop:
                    return stop.value


async def _rest_of(resumed: _Resumed) -> Any:
    return await resumed


class EagerLoop(asyncio.SelectorEventLoop):
    """A selector event loop whose tasks start at once and whose executor calls run inline.

    ``run_in_executor(None, f)`` calls ``f`` on the loop's own thread and returns its finished
    future: the SDK sends every monitor call through a thread pool because a real engine answers
    over gRPC; the recording monitor answers in-process, at once, without waiting on anything, so
    the thread hop, the lock handovers and the wake-up per answer cost more than the answer.
    Calls with an explicit executor keep it.
    """

    def __init__(self) -> None:
        super().__init__()
        self.set_task_factory(_eager_task)
        #: Tasks that finished in their first step / that had to wait (for benchmarks and tests).
        self.finished_at_once = 0
        self.waited = 0

    def run_in_executor(self, executor, func, *args):  # type: ignore[override]
        if executor is not None:
            return super().run_in_executor(executor, func, *args)
        future = self.create_future()
        try:
            future.set_result(func(*args))
        except Exception as error:  # noqa: BLE001 - delivered to the awaiting coroutine, as the pool would
            future.set_exception(error)
        return future


def _eager_task(loop: EagerLoop, coro: Coroutine[Any, Any, Any], context: contextvars.Context | None = None):
    """The task factory: step ``coro`` now, in the context its task would have had."""
    if not loop.is_running():
        return asyncio.Task(coro, loop=loop, context=context)
    context = contextvars.copy_context() if context is None else context
    future = loop.create_future()
    try:
        waiting_on = context.run(coro.send, None)
    except StopIteration as stop:
        loop.finished_at_once += 1
        future.set_result(stop.value)
        return future
    except asyncio.CancelledError:
        loop.finished_at_once += 1
        future.cancel()
        return future
    except (KeyboardInterrupt, SystemExit) as error:
        future.set_exception(error)
        raise
    except BaseException as error:  # noqa: BLE001 - kept in the future, as a task keeps it
        loop.finished_at_once += 1
        future.set_exception(error)
        return future
    loop.waited += 1
    if getattr(waiting_on, "_asyncio_future_blocking", None):
        # Lowered until the task below yields it again: another coroutine may await the same
        # future before that task's first step, and a raised flag would make its await fail.
        waiting_on._asyncio_future_blocking = False
    rest = _rest_of(_Resumed(coro, waiting_on))
    # Named as the coroutine it continues: the SDK finds its own RPC tasks by coroutine name.
    rest.__name__, rest.__qualname__ = coro.__name__, coro.__qualname__
    return asyncio.Task(rest, loop=loop, context=context)


_plain_gather = asyncio.gather


def _gather(*awaitables: Any, return_exceptions: bool = False) -> asyncio.Future[list[Any]]:
    """``asyncio.gather``, finished at once when every child is a finished future.

    The result, and which exception wins, are what the plain gather gives once its callbacks have
    run (children in argument order; every child's exception marked as retrieved).
    """
    if not awaitables or not all(asyncio.isfuture(a) and a.done() for a in awaitables):
        return _plain_gather(*awaitables, return_exceptions=return_exceptions)
    outer = awaitables[0].get_loop().create_future()
    results: list[Any] = []
    first_error: BaseException | None = None
    for child in awaitables:
        if child.cancelled():
            # As asyncio 3.11's gather words it: a fresh error when kept among the results.
            message = child._cancel_message
            error = asyncio.CancelledError("" if message is None else message) if return_exceptions \
                else child._make_cancelled_error()
        else:
            error = child.exception()
        if error is None:
            results.append(child.result())
        elif return_exceptions:
            results.append(error)
        elif first_error is None:
            first_error = error
    if first_error is not None:
        outer.set_exception(first_error)
    else:
        outer.set_result(results)
    return outer


@contextmanager
def finished_gathers() -> Iterator[None]:
    """``asyncio.gather`` finishes at once over finished futures while this is active."""
    asyncio.gather = _gather
    try:
        yield
    finally:
        asyncio.gather = _plain_gather
