"""A worker-thread pool for sync bodies with batched completions.

The scheduler lives on an event loop; waking it once per finished body would
cost a loop round trip per attempt. Workers instead post to a
`CompletionInbox`, which wakes the loop only when no wake-up is already
pending, so one loop pass drains many completions. Threads are started lazily, at most one per
admitted concurrent invocation.
"""

from __future__ import annotations

import asyncio
import collections
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from partita.events.emission import activate, deactivate

__all__ = ["Completion", "CompletionInbox", "ThreadWorkers"]

# (token, succeeded, value or exception, started_at, finished_at)
Completion = tuple[Any, bool, Any, float, float]

_STOP = object()


class CompletionInbox:
    """Completions posted from other threads, handed to the loop in batches.

    A poster wakes the loop only when no wake-up is already pending, so one
    loop pass drains every completion that arrived meanwhile.
    """

    __slots__ = ("_loop", "_on_completions", "_done", "_wakeup_pending")

    def __init__(self, loop: asyncio.AbstractEventLoop, on_completions: Callable[[list[Completion]], None]) -> None:
        self._loop = loop
        self._on_completions = on_completions
        self._done: collections.deque[Completion] = collections.deque()
        self._wakeup_pending = False

    def put(self, completion: Completion) -> bool:
        """Queue ``completion`` for the loop; False once the loop has closed."""
        self._done.append(completion)
        if not self._wakeup_pending:
            self._wakeup_pending = True
            try:
                self._loop.call_soon_threadsafe(self._drain)
            except RuntimeError:  # loop closed: the run was abandoned
                return False
        return True

    def _drain(self) -> None:
        self._wakeup_pending = False
        done = self._done
        batch: list[Completion] = []
        while done:
            batch.append(done.popleft())
        if batch:
            self._on_completions(batch)


class ThreadWorkers:
    """Runs ``fn(**kwargs)`` jobs on daemon threads and reports completions."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        on_completions: Callable[[list[Completion]], None],
        max_threads: int,
        thread_name: str = "partita-worker",
    ) -> None:
        self._on_completions = on_completions
        self._max_threads = max_threads
        self._thread_name = thread_name
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._inbox = CompletionInbox(loop, self._delivered)
        self._threads: list[threading.Thread] = []
        self._outstanding = 0
        self._closed = False

    @property
    def outstanding(self) -> int:
        """Jobs submitted whose completion the loop has not processed yet."""
        return self._outstanding

    def submit(self, token: Any, fn: Callable[..., Any], kwargs: dict[str, Any], emitter: Any = None) -> None:
        """Run ``fn(**kwargs)``; ``emitter`` becomes `partita.emit`'s producer meanwhile."""
        self._outstanding += 1
        if self._outstanding > len(self._threads) and len(self._threads) < self._max_threads:
            self._start_thread()
        self._jobs.put((token, fn, kwargs, emitter))

    def _start_thread(self) -> None:
        thread = threading.Thread(
            target=self._work, name=f"{self._thread_name}-{len(self._threads)}", daemon=True
        )
        self._threads.append(thread)
        thread.start()

    def _work(self) -> None:
        jobs, post, clock = self._jobs, self._inbox.put, time.time
        while True:
            job = jobs.get()
            if job is _STOP:
                return
            token, fn, kwargs, emitter = job
            active = activate(emitter)
            started = clock()
            try:
                value = fn(**kwargs)
                succeeded = True
            except BaseException as exc:  # noqa: BLE001 - recorded as the attempt's failure
                value, succeeded = exc, False
            finished = clock()
            deactivate(active)
            if not post((token, succeeded, value, started, finished)):
                return  # loop closed during shutdown
            del job, fn, kwargs, value, emitter

    def _delivered(self, batch: list[Completion]) -> None:
        self._outstanding -= len(batch)
        self._on_completions(batch)

    def shutdown(self, wait: float | None = None) -> bool:
        """Stop idle threads; return True when every thread ended within ``wait``."""
        if not self._closed:
            self._closed = True
            for _ in self._threads:
                self._jobs.put(_STOP)
        deadline = None if wait is None else time.monotonic() + wait
        for thread in self._threads:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            thread.join(remaining)
        return not any(thread.is_alive() for thread in self._threads)
