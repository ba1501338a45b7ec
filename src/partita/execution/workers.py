"""A worker-thread pool for sync bodies with batched completions.

The scheduler lives on an event loop; waking it once per finished body would
cost a loop round trip per attempt. Workers instead post to a
`CompletionInbox`, which wakes the loop only when no wake-up is already
pending, so one loop pass drains many completions. Threads are taken
lazily, at most one per admitted concurrent invocation.

Threads outlive runs: when a run's pool shuts down, each of its threads
parks (`_Parking`) once its last job is done, and the next run's pool takes
a parked thread before starting a new one. A worker that settles its pool's
last outstanding job parks at once, without waiting for the shutdown: back
in the parking before the next run asks for a thread. Starting a thread
cost about as much as the whole rest of a one-key run (a triggered consumer
run, say); a thread parked for `PARKED_SECONDS` ends.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from partita.events.emission import activate, deactivate
from partita.execution.attempt_scope import AttemptScope

__all__ = ["NO_LOCK", "Completion", "CompletionInbox", "SchedulerLock", "ThreadWorkers", "parked_threads"]

# (token, succeeded, value or exception, started_at, finished_at)
Completion = tuple[Any, bool, Any, float, float]

#: Ends a worker's service of a pool: queued at shutdown, or returned by `SchedulerLock.offer` to the
#: worker that settled the pool's last outstanding job (it parks at once).
_STOP = object()
#: The scheduler's lock in runs whose scheduler runs on the loop's thread alone: entering it does nothing.
NO_LOCK: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()


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


class SchedulerLock:
    """Held by whichever thread runs a run's scheduler: the loop's, or a worker settling a success.

    A worker whose body succeeded never waits for it: when another thread
    holds it, the completion waits in ``pending`` and the holder settles it
    on its way out. Waiting would chain the workers behind each other, one
    sleep and wake-up per attempt.
    """

    __slots__ = ("_lock", "pending", "settle")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.pending: collections.deque[Completion] = collections.deque()
        #: ``settle(batch, keep)`` settles completions; with ``keep``, the first job it starts is returned, not
        #: queued (or `_STOP` when nothing is left to run).
        self.settle: Callable[[list[Completion], bool], Any] = _unbound_settle

    def __enter__(self) -> None:
        self._lock.acquire()

    def __exit__(self, *exc_info: object) -> None:
        self._lock.release()
        if self.pending:
            self._settle_pending(keep=False)

    def offer(self, completion: Completion) -> Any:
        """Settle ``completion`` now, or leave it to the holder; a job started for this thread, `_STOP` or None."""
        self.pending.append(completion)
        return self._settle_pending(keep=True)

    def _settle_pending(self, keep: bool) -> Any:
        pending, lock, kept = self.pending, self._lock, None
        # Checked again after each release: a completion offered meanwhile is never left behind.
        while pending and lock.acquire(blocking=False):
            try:
                batch = [pending.popleft()]  # a loop, not a comprehension: one call less per attempt
                while pending:
                    batch.append(pending.popleft())
                job = self.settle(batch, keep and kept is None)
                if job is not None:
                    kept = job
            finally:
                lock.release()
        return kept


def _unbound_settle(batch: list[Completion], keep: bool) -> Any:
    raise RuntimeError("SchedulerLock.settle was not set")


class _Parking:
    """Worker threads between runs, by name prefix; one per process (a forked child starts empty)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._parked: dict[str, list[queue.SimpleQueue[Any]]] = {}
        self._started: dict[str, int] = {}
        self._names: set[str] = set()

    def lend(self, workers: ThreadWorkers, prefix: str) -> None:
        """Give ``workers`` a thread: a parked one, or a new one."""
        with self._lock:
            parked = self._parked.get(prefix)
            slot = parked.pop() if parked else None
            if slot is None:
                number = self._started.get(prefix, 0)
                self._started[prefix] = number + 1
        if slot is not None:
            slot.put(workers)
            return
        slot = queue.SimpleQueue()
        slot.put(workers)
        thread = threading.Thread(target=self._serve, args=(slot, prefix), name=f"{prefix}-{number}", daemon=True)
        try:
            thread.start()
        except BaseException:
            workers._returned()  # no thread serves it: shutdown must not wait for one
            raise

    def names(self) -> frozenset[str]:
        """The names of the threads parked now."""
        with self._lock:
            return frozenset(self._names)

    def _serve(self, slot: queue.SimpleQueue[Any], prefix: str) -> None:
        """A thread's life: serve a run's pool until it shuts down, park, and end after parking too long."""
        while True:
            try:
                workers = slot.get(timeout=PARKED_SECONDS)
            except queue.Empty:
                with self._lock:
                    parked = self._parked.get(prefix, [])
                    if slot in parked:  # not lent meanwhile: end
                        parked.remove(slot)
                        self._names.discard(threading.current_thread().name)
                        return
                continue  # lent just now: its pool is in the slot
            with self._lock:
                self._names.discard(threading.current_thread().name)
            workers._work()
            with self._lock:
                self._parked.setdefault(prefix, []).append(slot)
                self._names.add(threading.current_thread().name)
            workers._returned()
            del workers

    def forget(self) -> None:
        """In a forked child: the parent's threads do not exist here."""
        self._lock = threading.Lock()
        self._parked = {}
        self._names = set()


def parked_threads() -> frozenset[str]:
    """The names of the worker threads parked between runs now (diagnostics; tests wait on it)."""
    return _parking.names()


#: Seconds a thread stays parked between runs before it ends.
PARKED_SECONDS = 30.0
_parking = _Parking()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_parking.forget)


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
        self._threads = 0
        #: Threads that have not given this pool back yet; ``_all_returned`` is notified at zero.
        self._serving = 0
        self._all_returned = threading.Condition(threading.Lock())
        self._outstanding = 0
        self._closed = False
        #: Set by `settle_on_workers`: the run's scheduler lock, under which workers settle successes themselves.
        self._scheduler_lock: SchedulerLock | None = None
        #: While a worker settles: the first job it starts is kept for it (``_kept``), not queued.
        self._keep_next = False
        self._kept: Any = None

    def settle_on_workers(self, scheduler_lock: SchedulerLock) -> None:
        """Let each worker settle its body's success itself, under ``scheduler_lock``.

        The loop then only sees failures (which may schedule a retry on the
        loop's clock). A finished body's consumers start on the thread that
        ran it, without a wake-up of the loop and a second thread per
        attempt: on few cores that hand-off cost more than the scheduler's
        own work. Every other caller of the scheduler holds the same lock.
        """
        self._scheduler_lock = scheduler_lock
        scheduler_lock.settle = self._settle_batch

    def _settle_batch(self, batch: list[Completion], keep: bool) -> Any:
        """Settle successes (under the scheduler lock); with ``keep``, return the first job started instead of queueing it.

        With ``keep`` and nothing started, nothing queued and nothing running, `_STOP`: the worker parks.
        """
        self._outstanding -= len(batch)
        self._keep_next = keep
        try:
            self._on_completions(batch)
        except Exception:  # noqa: BLE001 - a scheduler fault: the run's fault handler has ended it
            pass
        kept, self._kept, self._keep_next = self._kept, None, False
        if kept is None and keep and self._outstanding == 0:
            # Nothing is queued or running: the thread goes back to the parking now, without a stop
            # message at the run's end, and is there when the next run asks. A later job lends one again.
            self._threads -= 1
            return _STOP
        return kept

    @property
    def outstanding(self) -> int:
        """Jobs submitted whose completion the loop has not processed yet."""
        return self._outstanding

    def submit(self, token: Any, fn: Callable[..., Any], kwargs: dict[str, Any], emitter: Any = None) -> None:
        """Run ``fn(**kwargs)``; ``emitter`` becomes `partita.emit`'s producer meanwhile (an `AttemptScope`: its log too)."""
        self._outstanding += 1
        if self._outstanding > self._threads and self._threads < self._max_threads:
            self._threads += 1
            with self._all_returned:
                self._serving += 1
            _parking.lend(self, self._thread_name)
        if self._keep_next:  # a worker settling under the scheduler lock runs it next: no hand-off
            self._keep_next = False
            self._kept = (token, fn, kwargs, emitter)
            return
        self._jobs.put((token, fn, kwargs, emitter))

    def _work(self) -> None:
        """Serve this pool's jobs on the calling (lent) thread until it shuts down or its loop closes."""
        jobs, post, clock = self._jobs, self._inbox.put, time.time
        lock = self._scheduler_lock
        job = None
        while True:
            if job is None:
                job = jobs.get()
            if job is _STOP:
                return
            token, fn, kwargs, emitter = job
            active = activate(emitter)
            started = clock()
            try:
                try:
                    value = fn(**kwargs)
                finally:
                    if emitter.__class__ is AttemptScope:
                        emitter.end(clock)  # its last unfinished line is kept; a failure here fails the attempt
                succeeded = True
            except BaseException as exc:  # noqa: BLE001 - recorded as the attempt's failure
                value, succeeded = exc, False
            finished = clock()
            deactivate(active)
            if succeeded and lock is not None:
                job = lock.offer((token, True, value, started, finished))
            else:
                job = None
                if not post((token, succeeded, value, started, finished)):
                    return  # loop closed during shutdown
            del fn, kwargs, value, emitter

    def _returned(self) -> None:
        """A lent thread is done with this pool (parked again)."""
        with self._all_returned:
            self._serving -= 1
            if self._serving == 0:
                self._all_returned.notify_all()

    def _delivered(self, batch: list[Completion]) -> None:
        with self._scheduler_lock or NO_LOCK:
            self._outstanding -= len(batch)
            self._on_completions(batch)

    def shutdown(self, wait: float | None = None) -> bool:
        """Let the threads go once their jobs are done; True when every one did within ``wait``."""
        if not self._closed:
            self._closed = True
            for _ in range(self._threads):
                self._jobs.put(_STOP)
        with self._all_returned:
            return self._all_returned.wait_for(lambda: self._serving == 0, wait)
