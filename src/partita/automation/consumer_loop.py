"""The one event loop, on a thread of its own, that runs a trigger daemon's consumer runs as its tasks.

A consumer run used to take a thread of a pool, each with its own loop.
With several one-key runs in flight, those threads took turns with the
interpreter's lock at every call into the store or a worker thread: a run's
statement, done in SQLite, waited for the lock to come back while it held
the process's write gate, and the switches cost processor time of their
own. On one loop, the runs in flight share its turns: one wake-up settles
whichever bodies have finished, and only one thread of the daemon runs
their Python. Sync bodies still run on worker threads, and async bodies on
this loop, as within any one run (an async body that blocks its loop holds
back the daemon's other runs, as it holds back its own run's other bodies).

`submit` returns a `concurrent.futures.Future`, as the thread pool's did, so
the daemon counts and awaits runs in flight from its own thread. A run ends
as under `asyncio.run`: the tasks it left behind (an async body's, say) are
cancelled and awaited before its future ends; the loop's task factory knows
a run's tasks by a context variable they inherit from it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import os
import threading
import weakref
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["ConsumerLoop"]

T = TypeVar("T")

#: The tasks made by the submitted call that runs in this context, and by their tasks in turn.
_made_by_call: contextvars.ContextVar[weakref.WeakSet[asyncio.Task[Any]] | None] = contextvars.ContextVar(
    "partita_consumer_call", default=None
)


def _tracking_factory(
    loop: asyncio.AbstractEventLoop, coroutine: Any, context: contextvars.Context | None = None
) -> asyncio.Task[Any]:
    """Make a task as the loop would, and add it to the tasks of the submitted call it was made under."""
    task = asyncio.Task(coroutine, loop=loop, context=context)
    made = context.get(_made_by_call) if context is not None else _made_by_call.get()
    if made is not None:
        made.add(task)
    return task


async def _cancel_left_behind(made: weakref.WeakSet[asyncio.Task[Any]]) -> None:
    """Cancel and await the call's tasks that are still pending, as `asyncio.run` does at a run's end."""
    current = asyncio.current_task()
    left = [task for task in made if task is not current and not task.done()]
    for task in left:
        task.cancel()
    if left:
        await asyncio.gather(*left, return_exceptions=True)


class ConsumerLoop:
    """A thread running one event loop, started at the first `submit` and ended by `shutdown`."""

    def __init__(self, thread_name: str = "partita-consumer") -> None:
        self._thread_name = thread_name
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()
        self._tasks: set[asyncio.Task[None]] = set()  # the loop keeps only weak references to its tasks

    def submit(self, function: Callable[..., Coroutine[Any, Any, T]], *args: Any) -> concurrent.futures.Future[T]:
        """Run ``function(*args)`` as a task of the loop; its future ends with the task's result or exception.

        Any exception ends the future, ``SystemExit`` and ``KeyboardInterrupt``
        too (as a thread pool's future would have them): they never stop the
        loop under the other runs.
        """
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        loop = self._running_loop()

        async def settle() -> None:
            if not future.set_running_or_notify_cancel():
                return
            made: weakref.WeakSet[asyncio.Task[Any]] = weakref.WeakSet()
            _made_by_call.set(made)
            try:
                result = await function(*args)
            except BaseException as exc:  # noqa: BLE001 - the future carries it to the daemon
                await _cancel_left_behind(made)
                future.set_exception(exc)
            else:
                await _cancel_left_behind(made)
                future.set_result(result)

        def start() -> None:
            task = loop.create_task(settle())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

        loop.call_soon_threadsafe(start)
        return future

    def shutdown(self) -> None:
        """End the loop's thread once its tasks are done (the daemon waits for its runs first); idempotent."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(self._stop_when_idle, loop)
        thread.join()

    def _stop_when_idle(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._tasks:
            asyncio.gather(*self._tasks, return_exceptions=True).add_done_callback(lambda _: loop.stop())
        else:
            loop.stop()

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._pid != os.getpid():  # none yet, or a forked child's copy
                self._loop, self._pid = asyncio.new_event_loop(), os.getpid()
                self._loop.set_task_factory(_tracking_factory)
                self._tasks = set()
                ready = threading.Event()
                self._thread = threading.Thread(
                    target=self._serve, args=(self._loop, ready), name=f"{self._thread_name}-loop", daemon=True
                )
                self._thread.start()
                ready.wait()
            return self._loop

    @staticmethod
    def _serve(loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
        """Run the loop until `shutdown` stops it, then end what the runs left on it, as `asyncio.run` does."""
        asyncio.set_event_loop(loop)
        loop.call_soon(ready.set)
        try:
            loop.run_forever()
        finally:
            try:
                left = asyncio.all_tasks(loop)
                for task in left:
                    task.cancel()
                if left:
                    loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.run_until_complete(loop.shutdown_default_executor())
            finally:
                asyncio.set_event_loop(None)
                loop.close()
