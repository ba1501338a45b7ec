"""Group commit: threads of one process writing to a store at once share one transaction.

A commit costs far more than the row it carries (SQLite's write lock and
WAL frame, PostgreSQL's round trip and WAL flush), so when several threads
emit together one of them commits for all. The first thread to arrive
leads: it commits its own item, plus whatever other threads queued while
the store was busy, in one transaction. Each waiter gets its own outcome only
after that transaction has ended (the waiters wake one another in turn), and
the next queued thread takes the lead.

A thread that arrives while nobody else is writing commits at once in its
own thread: it never waits for company and pays no hand-off. The commit
function reports per-item outcomes (an item's own failure among them); if it
raises instead, nothing was committed, so the followers it carried stay
queued and the next one leads.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Generic, TypeVar

__all__ = ["GroupCommit"]

Item = TypeVar("Item")
Outcome = TypeVar("Outcome")

#: Most items one transaction carries; a larger queue is served by the next leader.
GROUP_LIMIT = 64
#: Seconds after a submission from another thread during which a leader lets running emitters queue first.
CROWDED_SECONDS = 0.005


class _Follower:
    """A thread waiting in the queue: its item, then either its outcome or the lead."""

    __slots__ = ("item", "outcome", "wake", "leads", "taken", "done", "gone", "next")

    def __init__(self, item: Any) -> None:
        self.item = item
        self.outcome: Any = None
        self.wake = threading.Lock()
        self.wake.acquire()  # released when its outcome is ready, or when it is given the lead
        self.leads = False
        self.taken = False  # in a leader's transaction: it will get an outcome
        self.done = False  # its outcome is set
        self.gone = False  # stopped waiting (interrupted) before its outcome was set
        self.next: _Follower | None = None  # the follower of the same transaction it wakes in turn


class GroupCommit(Generic[Item, Outcome]):
    """Runs ``commit(items) -> outcomes`` (one per item, in order) for items that threads submit together."""

    def __init__(self, commit: Callable[[list[Item]], list[Outcome]], limit: int = GROUP_LIMIT) -> None:
        self._commit = commit
        self._limit = limit
        self._lock = threading.Lock()
        self._busy = False  # a thread leads (or was just given the lead)
        self._queue: deque[_Follower] = deque()
        self._last_thread: int | None = None
        self._crowded_until = 0.0  # until then, other threads were submitting too

    @property
    def waiting(self) -> int:
        """How many threads are queued behind the one committing now."""
        with self._lock:
            return len(self._queue)

    def submit(self, item: Item) -> Outcome:
        """``item``'s outcome, once the transaction that carried it has ended."""
        thread, now = threading.get_ident(), time.monotonic()
        with self._lock:
            if thread != self._last_thread:
                if self._last_thread is not None:
                    self._crowded_until = now + CROWDED_SECONDS
                self._last_thread = thread
            if self._busy:
                follower = _Follower(item)
                self._queue.append(follower)
            else:
                self._busy = True
                follower = None
                crowded = now < self._crowded_until
        if follower is None:
            # Alone, it commits at once. When other threads emitted moments ago, a
            # thread switch first lets the ones holding the interpreter's lock reach
            # the queue, so that this transaction carries them as well.
            return self._lead(item, pause=crowded, gather=crowded)
        try:
            follower.wake.acquire()
            leads = follower.leads
            if not leads:
                self._wake_next(follower)
        except BaseException:  # interrupted while waiting (KeyboardInterrupt in the main thread)
            self._abandon(follower)
            raise
        return self._lead(item, pause=False, gather=True) if leads else follower.outcome  # type: ignore[no-any-return]

    def _lead(self, item: Item, *, pause: bool, gather: bool) -> Outcome:
        """Commit ``item`` (with the followers queued now, if ``gather``); hand out outcomes, pass the lead on."""
        batch: list[_Follower] = []
        try:
            if pause:
                time.sleep(0)
            if gather:
                with self._lock:
                    while self._queue and len(batch) < self._limit - 1:
                        follower = self._queue.popleft()
                        follower.taken = True
                        batch.append(follower)
            outcomes = self._commit([item, *(follower.item for follower in batch)] if batch else [item])
        except BaseException:
            with self._lock:  # nothing was committed: the followers wait for the next leader
                for follower in reversed(batch):
                    follower.taken = False
                    self._queue.appendleft(follower)
                self._hand_on()
            raise
        with self._lock:
            if batch:
                self._hand_out(batch, outcomes)
            self._hand_on()
        return outcomes[0]

    @staticmethod
    def _hand_out(batch: list[_Follower], outcomes: list[Any]) -> None:
        """With the lock held: give each follower its outcome and wake the first; each wakes the next.

        A wake-up is a system call made while holding the interpreter's lock:
        a leader making them all would stall every thread it wakes.
        """
        waiting = None
        for follower, outcome in zip(reversed(batch), reversed(outcomes[1:]), strict=True):
            follower.outcome = outcome
            follower.done = True
            if not follower.gone:
                follower.next, waiting = waiting, follower
        if waiting is not None:
            waiting.wake.release()

    @staticmethod
    def _wake_next(follower: _Follower) -> None:
        """Pass the wake-up along the transaction's followers (at most once per follower)."""
        following, follower.next = follower.next, None
        if following is not None:
            following.wake.release()

    def _hand_on(self) -> None:
        """With the lock held: the longest-waiting follower leads next, or nobody is busy."""
        if self._queue:
            follower = self._queue.popleft()
            follower.leads = True
            follower.wake.release()
        else:
            self._busy = False

    def _abandon(self, follower: _Follower) -> None:
        """A follower stops waiting: pass on a lead or a wake-up it was given, or leave the queue.

        Taken into a transaction, it stays in it: the outcome is dropped, as a
        lost acknowledgement would be.
        """
        with self._lock:
            if follower.leads:
                self._hand_on()
            elif not follower.taken:
                self._queue.remove(follower)
            elif follower.done:
                self._wake_next(follower)
            else:
                follower.gone = True  # the leader wakes the others without it
