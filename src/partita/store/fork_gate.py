"""Keep process forks out of SQLite write transactions.

SQLite keeps the locks of all of a process's connections to one file in
memory it shares between them. A process forked while another thread holds a
write transaction inherits that bookkeeping without the lock itself: every
connection the child opens to that file then waits for a lock nobody will
release, and its writes fail with "database is locked" after the busy
timeout. The process executor forks worker processes that emit into the
store, so each SQLite write transaction holds this gate; opening or closing
a connection and a background checkpoint (`checkpointer`) hold a second
one; reads outside both count in `SQLITE_READS`. A fork waits until no read
is under way and neither gate is held (`os.register_at_fork`): SQLite's own
process-wide locks (its memory allocator's among them) would otherwise be
inherited held, and the child would hang in its first SQLite call. Writers
to the same file are serialized by SQLite anyway; the gate costs one
uncontended lock per write. Objects that keep a thread or a connection of
the parent's (`forget_in_child`) drop it in the child.
"""

from __future__ import annotations

import contextlib
import os
import threading
import weakref
from collections.abc import Iterator
from typing import Protocol

__all__ = ["SQLITE_CALL_GATE", "SQLITE_READS", "SQLITE_WRITE_GATE", "forget_in_child", "sqlite_write"]

#: The gate itself, for hot paths that hold it with a plain ``with`` (no generator frame).
SQLITE_WRITE_GATE = _gate = threading.RLock()
#: Held around SQLite calls outside write transactions that a fork must not interrupt: opening or
#: closing a connection, a background checkpoint (`checkpointer`). SQLite takes process-wide locks
#: there too, and a child forked meanwhile hangs in its first ``sqlite3.connect``. A lock of its
#: own, so that writers never wait for them.
SQLITE_CALL_GATE = threading.RLock()


class _Reads:
    """Reads on SQLite connections outside the gates: any number at once, none while a fork happens.

    A read runs SQLite with the interpreter's lock released, taking SQLite's
    process-wide memory lock as it allocates: a child forked meanwhile
    hangs in its first SQLite call. `enter` returns whether the read counts
    (a thread holding a gate needs not: the fork waits for that gate).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._drained = threading.Condition(self._lock)
        self._count = 0
        self._forking = 0  # forks waiting or under way (threads may fork at once)

    def enter(self) -> bool:
        if _gate._is_owned() or SQLITE_CALL_GATE._is_owned():  # type: ignore[attr-defined]
            return False
        with self._lock:
            while self._forking:
                self._drained.wait()
            self._count += 1
        return True

    def leave(self) -> None:
        with self._lock:
            self._count -= 1
            if not self._count:
                self._drained.notify_all()

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        counted = self.enter()
        try:
            yield
        finally:
            if counted:
                self.leave()

    def _before_fork(self) -> None:
        with self._lock:
            self._forking += 1
            while self._count:
                self._drained.wait()

    def _after_fork_in_parent(self) -> None:
        with self._lock:
            self._forking -= 1
            self._drained.notify_all()

    def _after_fork_in_child(self) -> None:
        self._lock = threading.Lock()  # the other threads, and their reads, did not come along
        self._drained = threading.Condition(self._lock)
        self._count = 0
        self._forking = 0


#: Reads outside the gates (the engine's pooled connections, reading connections): a fork waits for them.
SQLITE_READS = _Reads()


@contextlib.contextmanager
def sqlite_write() -> Iterator[None]:
    """Hold around one SQLite write transaction: a fork waits until it ends."""
    with _gate:
        yield


class _ForgetsInChild(Protocol):
    def _forget_after_fork(self) -> None: ...


_forgetting: weakref.WeakSet[_ForgetsInChild] = weakref.WeakSet()


def forget_in_child(holder: _ForgetsInChild) -> None:
    """Call ``holder._forget_after_fork()`` in every child forked from now on, while it lives.

    For what the child must not use: the parent's threads did not come
    along, and the parent's connections stay the parent's.
    """
    _forgetting.add(holder)


def _before_fork() -> None:
    # Reads first: a reader may take a gate before it is done, never the other way round.
    SQLITE_READS._before_fork()
    _gate.acquire()
    SQLITE_CALL_GATE.acquire()


def _after_fork() -> None:
    SQLITE_CALL_GATE.release()
    _gate.release()


def _after_fork_in_parent() -> None:
    _after_fork()
    SQLITE_READS._after_fork_in_parent()


def _after_fork_in_child() -> None:
    _after_fork()
    SQLITE_READS._after_fork_in_child()
    for holder in list(_forgetting):
        holder._forget_after_fork()


if hasattr(os, "register_at_fork"):
    # The forking thread holds both gates across fork(), once no read is under way; both sides let go.
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent, after_in_child=_after_fork_in_child)
