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
back the daemon's other runs, as it holds back its own run's other bodies;
so does a run's start or end waiting for the store).

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
import logging
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
log = logging.getLogger("partita.daemon")


def _tracking_factory(loop: asyncio.AbstractEventLoop, coroutine: Any, **options: Any) -> asyncio.Task[Any]:
    """Make a task as the loop would, and add it to the tasks of the submitted call it was made under."""
    task = asyncio.Task(coroutine, loop=loop, **options)
    context = options.get("context")
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


class _Running:
    """One loop, its thread, and the calls in flight on it; a new one after a fork or a shutdown."""

    def __init__(self, thread_name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.loop.set_task_factory(_tracking_factory)
        self.pid = os.getpid()
        self.calls: set[asyncio.Task[None]] = set()  # the loop keeps only weak references to its tasks
        self.stopping = False
        self.thread = threading.Thread(target=self._serve, name=f"{thread_name}-loop", daemon=True)
        self.thread.start()

    def usable(self) -> bool:
        return self.pid == os.getpid() and self.thread.is_alive() and not self.loop.is_closed()

    def stop_when_idle(self) -> None:
        """On the loop: stop once the calls in flight are done (the daemon waits for its runs first)."""
        self.stopping = True
        if self.calls:
            asyncio.gather(*self.calls, return_exceptions=True).add_done_callback(lambda _: self.loop.stop())
        else:
            self.loop.stop()

    def _serve(self) -> None:
        """Run the loop until it is stopped, then end what the runs left on it, as `asyncio.run` does.

        ``SystemExit`` or ``KeyboardInterrupt`` raised by a task a run made
        leaves `run_forever`; the loop then goes on under the other runs.
        """
        loop = self.loop
        asyncio.set_event_loop(loop)
        try:
            while not (self.stopping and not self.calls):
                try:
                    loop.run_forever()
                except (SystemExit, KeyboardInterrupt) as exc:
                    log.error("a consumer run's task raised %s; the daemon's other runs go on", type(exc).__name__)
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


class ConsumerLoop:
    """A thread running one event loop, started at the first `submit` and ended by `shutdown`."""

    def __init__(self, thread_name: str = "partita-consumer") -> None:
        self._thread_name = thread_name
        self._lock = threading.Lock()
        self._running: _Running | None = None

    def submit(self, function: Callable[..., Coroutine[Any, Any, T]], *args: Any) -> concurrent.futures.Future[T]:
        """Run ``function(*args)`` as a task of the loop; its future ends with the task's result or exception.

        Any exception ends the future, ``SystemExit`` and ``KeyboardInterrupt``
        too (as a thread pool's future would have them): they never stop the
        loop under the other runs. The call starts in a context of its own,
        not the submitting thread's.
        """
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        async def settle() -> None:
            if not future.set_running_or_notify_cancel():
                return
            made: weakref.WeakSet[asyncio.Task[Any]] = weakref.WeakSet()
            _made_by_call.set(made)
            error: BaseException | None = None
            try:
                result = await function(*args)
            except GeneratorExit:  # the coroutine is being closed: it may not await
                raise
            except BaseException as exc:  # noqa: BLE001 - the future carries it to the daemon
                error = exc
            await _cancel_left_behind(made)  # whatever the call's outcome, as `asyncio.run` does
            if error is None:
                future.set_result(result)
            else:
                future.set_exception(error)

        with self._lock:  # a shutdown cannot come between choosing the loop and handing it the call
            running = self._running
            if running is None or not running.usable():
                running = self._running = _Running(self._thread_name)

            def start() -> None:
                call = running.loop.create_task(settle())
                running.calls.add(call)
                call.add_done_callback(running.calls.discard)

            running.loop.call_soon_threadsafe(start, context=contextvars.Context())
        return future

    def shutdown(self) -> None:
        """End the loop's thread once its calls are done; idempotent. Never from a call on the loop itself."""
        with self._lock:
            running = self._running
            if running is None:
                return
            if threading.current_thread() is running.thread:
                raise RuntimeError("ConsumerLoop.shutdown was called on its own loop: it would wait for itself")
            self._running = None
        if running.usable():
            running.loop.call_soon_threadsafe(running.stop_when_idle)
        running.thread.join()
